//! Records stored in the metadata store.

use dolmen_common::Interval;
use dolmen_segment::LoadSpec;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A task's status code (`statusCode`/`status` in the task summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    /// Not finished (waiting, pending or running).
    Running,
    /// Finished successfully.
    Success,
    /// Finished with an error, or was shut down.
    Failed,
}

impl TaskState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Running => "RUNNING",
            TaskState::Success => "SUCCESS",
            TaskState::Failed => "FAILED",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<TaskState> {
        match s {
            "RUNNING" => Some(TaskState::Running),
            "SUCCESS" => Some(TaskState::Success),
            "FAILED" => Some(TaskState::Failed),
            _ => None,
        }
    }

    /// True for SUCCESS and FAILED.
    pub fn is_complete(self) -> bool {
        self != TaskState::Running
    }
}

/// Where a task is in the runner (`runnerStatusCode`): WAITING for locks, PENDING for a slot,
/// RUNNING, or NONE once complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunnerStatus {
    /// Acquiring time-chunk locks.
    Waiting,
    /// Waiting for a task slot.
    Pending,
    /// Running.
    Running,
    /// Complete.
    None,
}

impl RunnerStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerStatus::Waiting => "WAITING",
            RunnerStatus::Pending => "PENDING",
            RunnerStatus::Running => "RUNNING",
            RunnerStatus::None => "NONE",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<RunnerStatus> {
        match s {
            "WAITING" => Some(RunnerStatus::Waiting),
            "PENDING" => Some(RunnerStatus::Pending),
            "RUNNING" => Some(RunnerStatus::Running),
            "NONE" => Some(RunnerStatus::None),
            _ => None,
        }
    }
}

/// Where a task runs (`location` in the task summary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskLocation {
    /// Host name, or null when not placed.
    pub host: Option<String>,
    /// Plaintext port, -1 when none.
    pub port: i32,
    /// TLS port, -1 when none.
    pub tls_port: i32,
}

impl TaskLocation {
    /// The location of a task that is not placed anywhere.
    pub fn unknown() -> TaskLocation {
        TaskLocation {
            host: None,
            port: -1,
            tls_port: -1,
        }
    }
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Task id.
    pub id: String,
    /// Task type (`index_parallel`, ...).
    pub task_type: String,
    /// Group id (the task id for batch tasks).
    pub group_id: String,
    /// Datasource the task writes or reads.
    pub data_source: String,
    /// Creation time, ms.
    pub created_ms: i64,
    /// Time the task entered the queue, ms.
    pub queue_insertion_ms: i64,
    /// Status code.
    pub status: TaskState,
    /// Runner status.
    pub runner_status: RunnerStatus,
    /// Duration in ms once complete, -1 before.
    pub duration_ms: i64,
    /// Error message of a failed task.
    pub error_msg: Option<String>,
    /// Where it runs or ran.
    pub location: TaskLocation,
    /// The task payload as submitted (with `id` and defaults filled in).
    pub payload: serde_json::Value,
}

/// A change of a task's status fields.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStatusUpdate {
    /// Task id.
    pub id: String,
    /// New status code.
    pub status: TaskState,
    /// New runner status.
    pub runner_status: RunnerStatus,
    /// Duration, ms (-1 while running).
    pub duration_ms: i64,
    /// Error message.
    pub error_msg: Option<String>,
    /// Location.
    pub location: TaskLocation,
}

/// Which tasks to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskFilter {
    /// Only tasks with one of these status codes (all when `None`).
    pub statuses: Option<Vec<TaskState>>,
    /// Only this datasource.
    pub data_source: Option<String>,
    /// Only this task type.
    pub task_type: Option<String>,
    /// Only tasks created in this interval.
    pub created: Option<Interval>,
    /// At most this many (newest first).
    pub max: Option<usize>,
}

/// A time-chunk lock held by a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLockRecord {
    /// Lock id.
    pub id: String,
    /// Holding task.
    pub task_id: String,
    /// Datasource.
    pub data_source: String,
    /// Locked interval.
    pub interval: Interval,
    /// The version segments written under this lock get (for overwrites).
    pub version: String,
    /// `EXCLUSIVE` or `APPEND`.
    pub lock_type: String,
}

/// A segment file written by a task, before it has an identity.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSegment {
    /// The time chunk.
    pub interval: Interval,
    /// Where the file is in deep storage.
    pub load_spec: LoadSpec,
    /// Dimension names in order.
    pub dimensions: Vec<String>,
    /// Metric names in order.
    pub metrics: Vec<String>,
    /// Column types (after `__time`).
    pub columns: Vec<dolmen_segment::SegmentColumn>,
    /// File size, bytes.
    pub size: u64,
    /// Rows.
    pub num_rows: u64,
    /// Shard spec template for secondary partitioning (`hashed`, `single`, `range`); the
    /// publish sets its partition number and core-partition count. `None`: `numbered`.
    pub shard: Option<dolmen_segment::ShardSpec>,
}

/// How published segments relate to the segments already in their time chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishMode {
    /// The segments form new complete partition sets at `version`, which must be higher than
    /// the versions they replace: each chunk's segments are numbered `0..n` with `n` core
    /// partitions, and overshadow what was there once published.
    Overwrite {
        /// The version (the task's lock version).
        version: String,
    },
    /// The segments are added to the visible version of their chunk as extra partitions
    /// (numbered after the highest existing one); a chunk with no used segments gets
    /// `version_if_new`.
    Append {
        /// Version for chunks that have no segments yet.
        version_if_new: String,
    },
}

/// One atomic publication.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishRequest {
    /// Datasource.
    pub data_source: String,
    /// The segments.
    pub segments: Vec<NewSegment>,
    /// Overwrite or append.
    pub mode: PublishMode,
    /// Intervals whose older used segments (lower version, fully inside) are marked unused in
    /// the same transaction (`dropExisting`).
    pub drop_existing: Vec<Interval>,
    /// Stream offsets committed with the segments (streaming ingestion), or `None` for batch.
    pub commit: Option<StreamCommit>,
    /// The compaction state recorded in every published segment's `lastCompactionState`
    /// (compact tasks; `None` for everything else).
    pub last_compaction_state: Option<serde_json::Value>,
}

/// The offsets a streaming task's segments cover, committed atomically with them (Druid's
/// `startMetadata`/`endMetadata` of `SegmentTransactionalInsertAction`, checked by
/// `IndexerSQLMetadataStorageCoordinator.updateDataSourceMetadataWithHandle`).
///
/// The store compares `start` with the datasource's stored offsets: every partition of `start`
/// that the stored metadata has must hold the same offset (a task that read from offsets other
/// than those last committed, e.g. a replica whose twin already published, fails instead of
/// counting rows twice). When the datasource has no stored offsets, any start is accepted.
/// On success the stored offsets become the stored ones overlaid with `end`.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCommit {
    /// The stream (Kafka topic, Kinesis stream) the offsets belong to.
    pub stream: String,
    /// Partition id (decimal string for Kafka, shard id for Kinesis) to the first offset the
    /// task read (a JSON number for Kafka, a string sequence number for Kinesis).
    pub start: BTreeMap<String, serde_json::Value>,
    /// Partition id to the next offset to read after the published rows.
    pub end: BTreeMap<String, serde_json::Value>,
}

/// The stream offsets stored for a datasource (Druid's `DataSourceMetadata` of a supervisor:
/// `{"type", "partitions": {"type": "end", "stream", "partitionOffsetMap"}}` in the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOffsets {
    /// The stream.
    pub stream: String,
    /// Partition id to the next offset to read.
    pub partitions: BTreeMap<String, serde_json::Value>,
}

/// One stored version of a supervisor spec (a row of the supervisors table).
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorRecord {
    /// Supervisor id.
    pub spec_id: String,
    /// When this version was stored, ms since the epoch (the history entry's `version`).
    pub created_ms: i64,
    /// The spec as stored; a terminated supervisor's last version is a tombstone
    /// (`{"type": "NoopSupervisorSpec", ...}`, see [`SupervisorRecord::is_tombstone`]).
    pub payload: serde_json::Value,
}

impl SupervisorRecord {
    /// The payload type of a terminated supervisor's last version (Druid's).
    pub const TOMBSTONE_TYPE: &'static str = "NoopSupervisorSpec";

    /// True when this version marks the supervisor terminated.
    pub fn is_tombstone(&self) -> bool {
        self.payload.get("type").and_then(serde_json::Value::as_str) == Some(Self::TOMBSTONE_TYPE)
    }
}

/// A segment as the metadata store holds it: the payload plus its used flag and timestamps
/// (Druid's `DataSegmentPlus`).
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentRecord {
    /// The Druid-shaped payload.
    pub segment: dolmen_segment::DataSegment,
    /// True when the segment is used (part of the timeline); false once marked unused.
    pub used: bool,
    /// When the segment was published, ms since the epoch.
    pub created_ms: i64,
    /// When `used` last changed (or the publish time), ms since the epoch (Druid's
    /// `used_status_last_updated`).
    pub used_status_last_updated_ms: i64,
}

/// Which segments of one datasource a change of the used flag applies to (the bodies of
/// Druid's `markUsed` / `markUnused`, `DataSourcesResource.java`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentSelector {
    /// Every segment of the datasource.
    All,
    /// The segments lying fully inside `interval` (partially overlapping ones are not
    /// affected), optionally only those of the listed versions.
    Interval {
        /// The interval that must contain a segment's interval.
        interval: Interval,
        /// Only segments with one of these versions (all versions when `None`).
        versions: Option<Vec<String>>,
    },
    /// These segment ids; ids of other datasources and unknown ids are skipped.
    Ids(Vec<String>),
}

/// Which unused segments a kill task deletes (Druid's `RetrieveUnusedSegmentsAction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedSegmentsQuery {
    /// The datasource.
    pub data_source: String,
    /// Only unused segments lying fully inside this interval.
    pub interval: Interval,
    /// Only these versions (all when `None`).
    pub versions: Option<Vec<String>>,
    /// Only segments whose used flag last changed at or before this instant, ms.
    pub max_used_status_last_updated_ms: Option<i64>,
    /// At most this many, oldest interval first.
    pub limit: usize,
}

/// Who changed something and why (Druid's `AuditInfo`): from the `X-Service-Author` /
/// `X-Service-Comment` headers (`""` when absent), the client's address, and the authenticated
/// identity (`allowAll` with security off).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct AuditInfo {
    /// `X-Service-Author`.
    pub author: String,
    /// The authenticated user.
    pub identity: String,
    /// `X-Service-Comment`.
    pub comment: String,
    /// The client's IP address.
    pub ip: String,
}

/// What an audited change is recorded under (Druid's audit `key` and `type`): for rules the
/// datasource and `rules`; for the coordinator's dynamic config `coordinator.config` twice; for
/// the overlord's `worker.config` twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditTarget {
    /// Druid's `key`.
    pub key: String,
    /// Druid's `type`.
    pub audit_type: String,
}

impl AuditTarget {
    /// A target whose key and type are both `name` (the dynamic configurations).
    pub fn config(name: &str) -> AuditTarget {
        AuditTarget {
            key: name.to_string(),
            audit_type: name.to_string(),
        }
    }
}

/// One entry of the audit log (Druid's `AuditEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Druid's `key`.
    pub key: String,
    /// Druid's `type`.
    pub audit_type: String,
    /// Who and why.
    pub info: AuditInfo,
    /// The document as changed, JSON text.
    pub payload: String,
    /// When, ms since the epoch (`auditTime`).
    pub created_ms: i64,
}

/// Which audit entries a history request returns (Druid's `SQLAuditManager`): the entries in
/// an interval, oldest first, or the newest `n`, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditQuery {
    /// Entries with `created_ms` inside `[start, end]` (both ends inclusive, as Druid's
    /// `BETWEEN`), oldest first.
    Interval(Interval),
    /// The newest `n` entries (`n >= 1`), newest first.
    Count(u32),
}

/// One stored version of a datasource's retention rules (a row of Druid's `druid_rules`).
#[derive(Debug, Clone, PartialEq)]
pub struct RulesRecord {
    /// The datasource, or `_default` for the cluster-wide defaults.
    pub data_source: String,
    /// The version: the ISO 8601 time the rules were stored (strictly increasing per datasource).
    pub version: String,
    /// The rule array as posted (JSON).
    pub rules: serde_json::Value,
}

/// A user of a basic authenticator (a row of `authn_users`).
#[derive(Debug, Clone, PartialEq)]
pub struct AuthnUserRecord {
    /// User name.
    pub name: String,
    /// `{"salt","hash","iterations"}` as the authenticator wrote it; `None` for a user created
    /// without credentials (who cannot log in).
    pub credentials: Option<serde_json::Value>,
}

/// A user of a basic authorizer and the names of its roles, sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthzUserRecord {
    /// User name.
    pub name: String,
    /// Assigned roles, sorted.
    pub roles: Vec<String>,
}

/// A role of a basic authorizer.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthzRoleRecord {
    /// Role name.
    pub name: String,
    /// JSON array of `{resource{name,type},action}` as the authorizer wrote it.
    pub permissions: serde_json::Value,
}

/// Everything one basic authorizer holds, read in one transaction: users (with their roles)
/// and roles, each sorted by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuthzSnapshot {
    /// Users.
    pub users: Vec<AuthzUserRecord>,
    /// Roles.
    pub roles: Vec<AuthzRoleRecord>,
}
