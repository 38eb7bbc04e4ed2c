//! The metadata store: the source of truth for segments, tasks, task locks, supervisors, stream
//! offsets and named configuration documents (and, as later features land, rules, audit entries
//! and users).
//!
//! [`MetadataStore`] is the trait every backend implements. [`SqlMetadataStore`] implements it
//! over sqlx's `Any` driver with portable SQL (`$1` placeholders, TEXT/BIGINT/INTEGER columns),
//! so the same code and the same conformance tests serve SQLite (the embedded default, a file
//! under the data directory) and PostgreSQL (for clusters; enabled by adding sqlx's `postgres`
//! driver). Schema changes are versioned migrations in `migrations/` applied at start-up.
//!
//! Publishing is atomic: [`MetadataStore::publish_segments`] allocates partition numbers and
//! inserts all of a task's segments (and marks the segments they drop unused) in one
//! transaction, so readers never see half of a task's output.
//!
//! Segments are never deleted by a change of their used flag
//! ([`MetadataStore::set_segments_used`], the coordinator's markUsed/markUnused): only a kill
//! task removes rows, and only rows that are still unused
//! ([`MetadataStore::delete_unused_segments`]).

mod sql;
mod types;

pub use sql::SqlMetadataStore;
pub use types::*;

use async_trait::async_trait;
use dolmen_common::{ErrorCategory, Interval};
use dolmen_segment::DataSegment;

/// Errors of the metadata store.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The database failed or is unreachable.
    #[error("metadata store error: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed at start-up.
    #[error("metadata store migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// A stored payload does not decode (corruption or an incompatible older version).
    #[error("metadata store holds an undecodable {what} [{id}]: {reason}")]
    Corrupt {
        /// What kind of record.
        what: &'static str,
        /// Its id.
        id: String,
        /// Why.
        reason: String,
    },
    /// An insert collided with an existing record.
    #[error("{0}")]
    Conflict(String),
    /// The named record does not exist.
    #[error("{0}")]
    NotFound(String),
}

impl MetadataError {
    /// The error category this maps to.
    pub fn category(&self) -> ErrorCategory {
        match self {
            MetadataError::Conflict(_) => ErrorCategory::Conflict,
            MetadataError::NotFound(_) => ErrorCategory::NotFound,
            _ => ErrorCategory::RuntimeFailure,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = MetadataError> = std::result::Result<T, E>;

/// Everything Dolmen keeps durably. All methods are transactional on their own; every write
/// is durable when the call returns.
#[async_trait]
pub trait MetadataStore: Send + Sync + std::fmt::Debug + 'static {
    // --- segments ---

    /// Publishes a task's segments in one transaction (see [`PublishRequest`]); returns the
    /// segment payloads as stored, with ids, versions and shard specs assigned.
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] when the request collides with existing segments (an
    /// overwrite version already present, or an append into a chunk of another granularity),
    /// or its [`StreamCommit`] start does not match the stored offsets: nothing is written then.
    async fn publish_segments(&self, req: PublishRequest) -> Result<Vec<DataSegment>>;

    /// All used segments of a datasource, optionally only those overlapping `interval`.
    async fn used_segments(
        &self,
        data_source: &str,
        interval: Option<Interval>,
    ) -> Result<Vec<DataSegment>>;

    /// All used segments of all datasources.
    async fn all_used_segments(&self) -> Result<Vec<DataSegment>>;

    /// Names of datasources with at least one used segment, sorted.
    async fn data_sources(&self) -> Result<Vec<String>>;

    /// Marks the given segments unused; returns how many changed.
    async fn mark_segments_unused(&self, segment_ids: &[String]) -> Result<u64>;

    /// The highest version among used segments of `data_source` overlapping `interval`.
    async fn max_used_version(
        &self,
        data_source: &str,
        interval: Interval,
    ) -> Result<Option<String>>;

    /// Names of datasources with at least one segment, used or unused, sorted (Druid's
    /// `retrieveAllDataSourceNames`, behind `GET /metadata/datasources?includeUnused`).
    async fn all_data_source_names(&self) -> Result<Vec<String>>;

    /// The segments of a datasource with their status, ordered by interval start, end,
    /// version and partition number; unused ones only when `include_unused`.
    async fn segments(&self, data_source: &str, include_unused: bool)
    -> Result<Vec<SegmentRecord>>;

    /// One segment by id, used or unused.
    async fn segment(&self, segment_id: &str) -> Result<Option<SegmentRecord>>;

    /// Sets the used flag of the selected segments of `data_source` in one transaction and
    /// returns how many changed (segments already in that state do not count). Marking used
    /// does not check overshadowing: the timeline hides overshadowed segments.
    async fn set_segments_used(
        &self,
        data_source: &str,
        selector: &SegmentSelector,
        used: bool,
    ) -> Result<u64>;

    /// Unused segments matching the query, oldest interval first (what a kill task deletes).
    async fn unused_segments(&self, query: &UnusedSegmentsQuery) -> Result<Vec<SegmentRecord>>;

    /// Deletes the rows of the given segments that are still unused, in one transaction, and
    /// returns the ids actually deleted (a segment marked used again meanwhile is kept).
    async fn delete_unused_segments(&self, segment_ids: &[String]) -> Result<Vec<String>>;

    // --- tasks ---

    /// Inserts a new task.
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] when a task with that id exists.
    async fn insert_task(&self, task: &TaskRecord) -> Result<()>;

    /// Updates the status fields of a task.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] for an unknown id.
    async fn update_task_status(&self, update: &TaskStatusUpdate) -> Result<()>;

    /// Stores a task's report (replacing any earlier one).
    async fn set_task_report(&self, task_id: &str, report: &serde_json::Value) -> Result<()>;

    /// A task's report, if stored.
    async fn task_report(&self, task_id: &str) -> Result<Option<serde_json::Value>>;

    /// One task.
    async fn get_task(&self, task_id: &str) -> Result<Option<TaskRecord>>;

    /// Tasks matching a filter, newest first.
    async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRecord>>;

    // --- task locks ---

    /// Records a lock held by a task.
    async fn insert_lock(&self, lock: &TaskLockRecord) -> Result<()>;

    /// Removes all locks of a task.
    async fn delete_locks(&self, task_id: &str) -> Result<u64>;

    /// All recorded locks.
    async fn list_locks(&self) -> Result<Vec<TaskLockRecord>>;

    // --- supervisors and stream offsets ---

    /// Stores a new version of a supervisor spec (or a tombstone); returns it as stored.
    async fn insert_supervisor(
        &self,
        spec_id: &str,
        payload: &serde_json::Value,
    ) -> Result<SupervisorRecord>;

    /// Every stored version of one supervisor (or of all when `spec_id` is `None`), newest
    /// first within a supervisor, supervisors by id.
    async fn supervisor_history(&self, spec_id: Option<&str>) -> Result<Vec<SupervisorRecord>>;

    /// The newest version of every supervisor, tombstones included, by id.
    async fn latest_supervisors(&self) -> Result<Vec<SupervisorRecord>>;

    /// The stream offsets stored for a datasource.
    async fn stream_offsets(&self, data_source: &str) -> Result<Option<StreamOffsets>>;

    /// Replaces (`Some`) or deletes (`None`) the stream offsets of a datasource, outside any
    /// publish: a supervisor's `reset` and `resetOffsets`. With `expected`, only when the stored
    /// offsets still equal it (compare-and-swap), so a reset never silently overwrites a
    /// publish that happened in between.
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] when `expected` does not match what is stored.
    async fn set_stream_offsets(
        &self,
        data_source: &str,
        expected: Option<&Option<StreamOffsets>>,
        offsets: Option<&StreamOffsets>,
    ) -> Result<()>;

    // --- configuration documents ---

    /// The configuration document stored under `name` (Druid's `druid_config` table, e.g.
    /// [`LOOKUPS_CONFIG_KEY`]), `None` when none was ever stored.
    async fn config(&self, name: &str) -> Result<Option<serde_json::Value>>;

    /// Stores `value` as the configuration document `name`, replacing any earlier one. With
    /// `expected`, only when the stored document still equals it (`Some(None)`: none is stored),
    /// so a read-modify-write never silently overwrites another writer's change.
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] when `expected` does not match what is stored.
    async fn set_config(
        &self,
        name: &str,
        expected: Option<&Option<serde_json::Value>>,
        value: &serde_json::Value,
    ) -> Result<()>;

    /// Stores `value` as the configuration document `name` and records the change in the
    /// audit log (payload: `value` as JSON text) in one transaction: the coordinator's and
    /// the overlord's dynamic configurations. Always audits, even when nothing changed (Druid's
    /// `JacksonConfigManager`).
    async fn set_config_audited(
        &self,
        name: &str,
        value: &serde_json::Value,
        target: &AuditTarget,
        info: &AuditInfo,
    ) -> Result<()>;

    // --- retention rules and the audit log ---

    /// The newest rule array of every datasource that ever had rules (`_default` included),
    /// by datasource.
    async fn rules(&self) -> Result<std::collections::BTreeMap<String, RulesRecord>>;

    /// Stores `rules` as the new rule array of `data_source` and an audit entry
    /// (`key` = the datasource, `type` = `rules`) in one transaction; returns false, writing
    /// nothing, when `rules` equals the current array (Druid's `SQLMetadataRuleManager`).
    async fn set_rules(
        &self,
        data_source: &str,
        rules: &serde_json::Value,
        info: &AuditInfo,
    ) -> Result<bool>;

    /// Stores `rules` for `data_source` without an audit entry, only when it has no rules yet
    /// (the initial `_default` rules at start-up); returns whether it stored them.
    async fn init_rules(&self, data_source: &str, rules: &serde_json::Value) -> Result<bool>;

    /// Deletes the audit entries created before `before_ms`; returns how many (Druid's
    /// `KillAuditLog` duty).
    async fn delete_audit_before(&self, before_ms: i64) -> Result<u64>;

    /// Deletes every rules version of the datasources (never `_default`) that have no segment
    /// at all, used or unused, and whose newest rules version is older than `before_ms`; returns
    /// the datasources cleaned (Druid's `KillRules` duty).
    async fn delete_rules_of_absent_data_sources(&self, before_ms: i64) -> Result<Vec<String>>;

    /// Audit entries of `audit_type` (and of `key` when given) selected by `query`.
    async fn audit_history(
        &self,
        audit_type: &str,
        key: Option<&str>,
        query: &AuditQuery,
    ) -> Result<Vec<AuditEntry>>;

    // --- basic security (users, credentials, roles, permissions) ---
    //
    // Messages of the errors are Druid's (`User [x] does not exist.`, ...): the security API
    // answers them as they are.

    /// Users of a basic authenticator, by name.
    async fn authn_users(&self, authenticator: &str) -> Result<Vec<AuthnUserRecord>>;

    /// Creates a user of a basic authenticator, without credentials.
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] `User [x] already exists.`
    async fn create_authn_user(&self, authenticator: &str, name: &str) -> Result<()>;

    /// Deletes a user of a basic authenticator.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] `User [x] does not exist.`
    async fn delete_authn_user(&self, authenticator: &str, name: &str) -> Result<()>;

    /// Replaces the credentials (`{"salt","hash","iterations"}`) of a user.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] `User [x] does not exist.`
    async fn set_authn_credentials(
        &self,
        authenticator: &str,
        name: &str,
        credentials: &serde_json::Value,
    ) -> Result<()>;

    /// Users and roles of a basic authorizer, read in one transaction.
    async fn authz_snapshot(&self, authorizer: &str) -> Result<AuthzSnapshot>;

    /// Creates a user of a basic authorizer.
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] `User [x] already exists.`
    async fn create_authz_user(&self, authorizer: &str, name: &str) -> Result<()>;

    /// Deletes a user of a basic authorizer and its role assignments.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] `User [x] does not exist.`
    async fn delete_authz_user(&self, authorizer: &str, name: &str) -> Result<()>;

    /// Creates a role with the given permissions (a JSON array).
    ///
    /// # Errors
    /// [`MetadataError::Conflict`] `Role [r] already exists.`
    async fn create_authz_role(
        &self,
        authorizer: &str,
        name: &str,
        permissions: &serde_json::Value,
    ) -> Result<()>;

    /// Deletes a role and its assignments.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] `Role [r] does not exist.`
    async fn delete_authz_role(&self, authorizer: &str, name: &str) -> Result<()>;

    /// Replaces the permissions of a role.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] `Role [r] does not exist.`
    async fn set_authz_role_permissions(
        &self,
        authorizer: &str,
        role: &str,
        permissions: &serde_json::Value,
    ) -> Result<()>;

    /// Assigns (`assigned`) or removes a role of a user.
    ///
    /// # Errors
    /// [`MetadataError::NotFound`] `User [u] does not exist.` / `Role [r] does not exist.`;
    /// [`MetadataError::Conflict`] `User [u] already has role [r].` /
    /// `User [u] does not have role [r].`
    async fn set_authz_user_role(
        &self,
        authorizer: &str,
        user: &str,
        role: &str,
        assigned: bool,
    ) -> Result<()>;
}

/// The audit type of retention rule changes (Druid's `RulesResource`/`SQLMetadataRuleManager`).
pub const RULES_AUDIT_TYPE: &str = "rules";

/// The configuration document holding every tier's lookups (Druid's
/// `LookupCoordinatorManager.LOOKUP_CONFIG_KEY`): `{tier: {lookupName: {version,
/// lookupExtractorFactory}}}`.
pub const LOOKUPS_CONFIG_KEY: &str = "lookupsConfig";

/// Conformance tests every backend must pass; instantiate with
/// [`metadata_store_conformance!`](crate::metadata_store_conformance).
#[doc(hidden)]
pub mod conformance;
