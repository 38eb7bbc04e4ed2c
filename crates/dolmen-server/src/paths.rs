//! Every route path in one place (IX `all_paths.rs`). API routes are mounted under both
//! [`SERVICE_PREFIX`] (canonical, spec) and [`DRUID_PREFIX`] (Druid clients).

/// Canonical prefix of API routes (spec).
pub const SERVICE_PREFIX: &str = "/service";
/// Prefix Druid clients use; answers the same routes with `X-Druid-*` headers.
pub const DRUID_PREFIX: &str = "/druid";

/// Prefix of the extension APIs (basic security), canonical (spec).
pub const SERVICE_EXT_PREFIX: &str = "/service-ext";
/// Prefix of the extension APIs for Druid clients.
pub const DRUID_EXT_PREFIX: &str = "/druid-ext";

/// `GET /status`: version.
pub const STATUS: &str = "/status";
/// `GET /status/health`: `true`.
pub const STATUS_HEALTH: &str = "/status/health";
/// `GET /status/selfDiscovered`.
pub const STATUS_SELF_DISCOVERED: &str = "/status/selfDiscovered";
/// `GET /metrics`: Prometheus exposition (404 with `service.emitter=noop`).
pub const METRICS: &str = "/metrics";

/// `POST /v2/sql`.
pub const SQL: &str = "/v2/sql";
/// `DELETE`: cancel the synchronous queries with this `sqlQueryId`.
pub const SQL_QUERY: &str = "/v2/sql/{id}";

/// `POST /v2/sql/statements`: submit an async statement.
pub const SQL_STATEMENTS: &str = "/v2/sql/statements";
/// `GET /v2/sql/statements/enabled`.
pub const SQL_STATEMENTS_ENABLED: &str = "/v2/sql/statements/enabled";
/// `GET` status / `DELETE` cancel of a statement.
pub const SQL_STATEMENT: &str = "/v2/sql/statements/{id}";
/// `GET` the results of a statement.
pub const SQL_STATEMENT_RESULTS: &str = "/v2/sql/statements/{id}/results";
/// `POST /v2/sql/task`: run a statement as a task.
pub const SQL_TASK: &str = "/v2/sql/task";
/// `GET /v2/sql/task/enabled`.
pub const SQL_TASK_ENABLED: &str = "/v2/sql/task/enabled";

/// `POST /indexer/v1/task`.
pub const TASK_SUBMIT: &str = "/indexer/v1/task";
/// `GET /indexer/v1/task/{taskId}`.
pub const TASK: &str = "/indexer/v1/task/{task_id}";
/// `GET /indexer/v1/task/{taskId}/status`.
pub const TASK_STATUS: &str = "/indexer/v1/task/{task_id}/status";
/// `GET /indexer/v1/task/{taskId}/reports`.
pub const TASK_REPORTS: &str = "/indexer/v1/task/{task_id}/reports";
/// `GET /indexer/v1/task/{taskId}/log`.
pub const TASK_LOG: &str = "/indexer/v1/task/{task_id}/log";
/// `GET /indexer/v1/task/{taskId}/segments` (always 404).
pub const TASK_SEGMENTS: &str = "/indexer/v1/task/{task_id}/segments";
/// `POST /indexer/v1/task/{taskId}/shutdown`.
pub const TASK_SHUTDOWN: &str = "/indexer/v1/task/{task_id}/shutdown";
/// `GET /indexer/v1/tasks`.
pub const TASKS: &str = "/indexer/v1/tasks";
/// `GET /indexer/v1/completeTasks`.
pub const COMPLETE_TASKS: &str = "/indexer/v1/completeTasks";
/// `GET /indexer/v1/runningTasks`.
pub const RUNNING_TASKS: &str = "/indexer/v1/runningTasks";
/// `GET /indexer/v1/waitingTasks`.
pub const WAITING_TASKS: &str = "/indexer/v1/waitingTasks";
/// `GET /indexer/v1/pendingTasks`.
pub const PENDING_TASKS: &str = "/indexer/v1/pendingTasks";
/// `POST /indexer/v1/datasources/{dataSource}/shutdownAllTasks`.
pub const SHUTDOWN_ALL_TASKS: &str = "/indexer/v1/datasources/{data_source}/shutdownAllTasks";
/// `POST /indexer/v1/taskStatus`: statuses of many tasks.
pub const TASK_STATUSES: &str = "/indexer/v1/taskStatus";
/// `DELETE /indexer/v1/pendingSegments/{dataSource}`.
pub const PENDING_SEGMENTS: &str = "/indexer/v1/pendingSegments/{data_source}";
/// `GET /indexer/v1/isLeader`.
pub const INDEXER_IS_LEADER: &str = "/indexer/v1/isLeader";
/// `GET /indexer/v1/leader`.
pub const INDEXER_LEADER: &str = "/indexer/v1/leader";

/// `GET /coordinator/v1/isLeader`.
pub const COORDINATOR_IS_LEADER: &str = "/coordinator/v1/isLeader";
/// `GET /coordinator/v1/leader`.
pub const COORDINATOR_LEADER: &str = "/coordinator/v1/leader";
/// `GET /coordinator/v1/loadstatus`.
pub const LOAD_STATUS: &str = "/coordinator/v1/loadstatus";
/// `GET /coordinator/v1/datasources`.
pub const DATASOURCES: &str = "/coordinator/v1/datasources";
/// `GET|POST|DELETE /coordinator/v1/datasources/{dataSource}`.
pub const DATASOURCE: &str = "/coordinator/v1/datasources/{data_source}";
/// `GET /coordinator/v1/datasources/{dataSource}/intervals`.
pub const DATASOURCE_INTERVALS: &str = "/coordinator/v1/datasources/{data_source}/intervals";
/// `GET|DELETE /coordinator/v1/datasources/{dataSource}/intervals/{interval}`.
pub const DATASOURCE_INTERVAL: &str =
    "/coordinator/v1/datasources/{data_source}/intervals/{interval}";
/// `GET /coordinator/v1/datasources/{dataSource}/segments`.
pub const DATASOURCE_SEGMENTS: &str = "/coordinator/v1/datasources/{data_source}/segments";
/// `GET|POST|DELETE /coordinator/v1/datasources/{dataSource}/segments/{segmentId}`.
pub const DATASOURCE_SEGMENT: &str =
    "/coordinator/v1/datasources/{data_source}/segments/{segment_id}";
/// `POST /coordinator/v1/datasources/{dataSource}/markUsed`.
pub const DATASOURCE_MARK_USED: &str = "/coordinator/v1/datasources/{data_source}/markUsed";
/// `POST /coordinator/v1/datasources/{dataSource}/markUnused`.
pub const DATASOURCE_MARK_UNUSED: &str = "/coordinator/v1/datasources/{data_source}/markUnused";
/// `GET /coordinator/v1/datasources/{dataSource}/loadstatus`.
pub const DATASOURCE_LOAD_STATUS: &str = "/coordinator/v1/datasources/{data_source}/loadstatus";
/// `GET /coordinator/v1/datasources/{dataSource}/tiers`.
pub const DATASOURCE_TIERS: &str = "/coordinator/v1/datasources/{data_source}/tiers";
/// `GET /coordinator/v1/metadata/datasources`.
pub const METADATA_DATASOURCES: &str = "/coordinator/v1/metadata/datasources";
/// `GET /coordinator/v1/metadata/datasources/{dataSource}`.
pub const METADATA_DATASOURCE: &str = "/coordinator/v1/metadata/datasources/{data_source}";
/// `GET /coordinator/v1/metadata/datasources/{dataSource}/segments`.
pub const METADATA_SEGMENTS: &str = "/coordinator/v1/metadata/datasources/{data_source}/segments";
/// `GET /coordinator/v1/metadata/datasources/{dataSource}/segments/{segmentId}`.
pub const METADATA_SEGMENT: &str =
    "/coordinator/v1/metadata/datasources/{data_source}/segments/{segment_id}";

/// `GET` list (`?full`, `?state=true`) / `POST` create or update supervisors.
pub const SUPERVISORS: &str = "/indexer/v1/supervisor";
/// `GET /indexer/v1/supervisor/history`: every supervisor's spec history.
pub const SUPERVISORS_HISTORY: &str = "/indexer/v1/supervisor/history";
/// `POST /indexer/v1/supervisor/terminateAll`.
pub const SUPERVISORS_TERMINATE_ALL: &str = "/indexer/v1/supervisor/terminateAll";
/// `POST /indexer/v1/supervisor/suspendAll`.
pub const SUPERVISORS_SUSPEND_ALL: &str = "/indexer/v1/supervisor/suspendAll";
/// `POST /indexer/v1/supervisor/resumeAll`.
pub const SUPERVISORS_RESUME_ALL: &str = "/indexer/v1/supervisor/resumeAll";
/// `GET /indexer/v1/supervisor/{id}`: the spec.
pub const SUPERVISOR: &str = "/indexer/v1/supervisor/{id}";
/// `GET /indexer/v1/supervisor/{id}/status`.
pub const SUPERVISOR_STATUS: &str = "/indexer/v1/supervisor/{id}/status";
/// `GET /indexer/v1/supervisor/{id}/health`.
pub const SUPERVISOR_HEALTH: &str = "/indexer/v1/supervisor/{id}/health";
/// `GET /indexer/v1/supervisor/{id}/stats`.
pub const SUPERVISOR_STATS: &str = "/indexer/v1/supervisor/{id}/stats";
/// `GET /indexer/v1/supervisor/{id}/history`.
pub const SUPERVISOR_HISTORY: &str = "/indexer/v1/supervisor/{id}/history";
/// `POST /indexer/v1/supervisor/{id}/suspend`.
pub const SUPERVISOR_SUSPEND: &str = "/indexer/v1/supervisor/{id}/suspend";
/// `POST /indexer/v1/supervisor/{id}/resume`.
pub const SUPERVISOR_RESUME: &str = "/indexer/v1/supervisor/{id}/resume";
/// `POST /indexer/v1/supervisor/{id}/reset`.
pub const SUPERVISOR_RESET: &str = "/indexer/v1/supervisor/{id}/reset";
/// `POST /indexer/v1/supervisor/{id}/resetOffsets`.
pub const SUPERVISOR_RESET_OFFSETS: &str = "/indexer/v1/supervisor/{id}/resetOffsets";
/// `POST /indexer/v1/supervisor/{id}/terminate`.
pub const SUPERVISOR_TERMINATE: &str = "/indexer/v1/supervisor/{id}/terminate";
/// `POST /indexer/v1/supervisor/{id}/shutdown` (deprecated alias of terminate).
pub const SUPERVISOR_SHUTDOWN: &str = "/indexer/v1/supervisor/{id}/shutdown";
/// `POST /indexer/v1/supervisor/{id}/taskGroups/handoff`.
pub const SUPERVISOR_HANDOFF: &str = "/indexer/v1/supervisor/{id}/taskGroups/handoff";

/// `GET` tier names (`?discover=true`) / `POST` a bulk update of lookups.
pub const LOOKUPS_CONFIG: &str = "/coordinator/v1/lookups/config";
/// `GET` every tier's lookups (`DELETE`: the tier named `all`).
pub const LOOKUPS_CONFIG_ALL: &str = "/coordinator/v1/lookups/config/all";
/// `GET` the lookups of a tier (`?detailed=true`) / `DELETE` the tier.
pub const LOOKUPS_TIER: &str = "/coordinator/v1/lookups/config/{tier}";
/// `GET|POST|DELETE` one lookup of a tier.
pub const LOOKUPS_LOOKUP: &str = "/coordinator/v1/lookups/config/{tier}/{lookup}";
/// `GET` the load status of every lookup.
pub const LOOKUPS_STATUS: &str = "/coordinator/v1/lookups/status";
/// `GET` the load status of a tier's lookups.
pub const LOOKUPS_TIER_STATUS: &str = "/coordinator/v1/lookups/status/{tier}";
/// `GET` the load status of one lookup.
pub const LOOKUPS_LOOKUP_STATUS: &str = "/coordinator/v1/lookups/status/{tier}/{lookup}";
/// `GET` the lookups state of every node, by tier.
pub const LOOKUPS_NODE_STATUS: &str = "/coordinator/v1/lookups/nodeStatus";
/// `GET` the lookups state of a tier's nodes.
pub const LOOKUPS_TIER_NODE_STATUS: &str = "/coordinator/v1/lookups/nodeStatus/{tier}";
/// `GET` the lookups state of one node (`host:port`).
pub const LOOKUPS_NODE: &str = "/coordinator/v1/lookups/nodeStatus/{tier}/{host_and_port}";

/// `GET` the rules of every datasource.
pub const RULES: &str = "/coordinator/v1/rules";
/// `GET` the rule changes of every datasource (`interval`, `count`).
pub const RULES_HISTORY: &str = "/coordinator/v1/rules/history";
/// `GET` (`?full`) / `POST` the rules of a datasource (or `_default`).
pub const DATASOURCE_RULES: &str = "/coordinator/v1/rules/{data_source}";
/// `GET` the rule changes of one datasource.
pub const DATASOURCE_RULES_HISTORY: &str = "/coordinator/v1/rules/{data_source}/history";
/// `GET|POST` the coordinator dynamic configuration.
pub const COORDINATOR_CONFIG: &str = "/coordinator/v1/config";
/// `GET` the coordinator dynamic configuration's history.
pub const COORDINATOR_CONFIG_HISTORY: &str = "/coordinator/v1/config/history";
/// `GET|POST` the overlord dynamic configuration (worker behaviour).
pub const WORKER_CONFIG: &str = "/indexer/v1/worker";
/// `GET` the overlord dynamic configuration's history.
pub const WORKER_CONFIG_HISTORY: &str = "/indexer/v1/worker/history";
/// `GET` the workers (this process).
pub const WORKERS: &str = "/indexer/v1/workers";
/// `GET` autoscaling events (none: empty body).
pub const SCALING: &str = "/indexer/v1/scaling";

/// `GET` the listing / `POST` a datasource's automatic compaction config.
pub const COMPACTION_CONFIG: &str = "/coordinator/v1/config/compaction";
/// `POST ?ratio=&max=`: compaction task slots.
pub const COMPACTION_TASKSLOTS: &str = "/coordinator/v1/config/compaction/taskslots";
/// `GET` / `DELETE` a datasource's compaction config.
pub const COMPACTION_DATASOURCE_CONFIG: &str = "/coordinator/v1/config/compaction/{data_source}";
/// `GET` the history of a datasource's compaction config.
pub const COMPACTION_DATASOURCE_HISTORY: &str =
    "/coordinator/v1/config/compaction/{data_source}/history";
/// `GET ?dataSource=`: `{remainingSegmentSize}`.
pub const COMPACTION_PROGRESS: &str = "/coordinator/v1/compaction/progress";
/// `GET ?dataSource=`: `{latestStatus}`.
pub const COMPACTION_STATUS: &str = "/coordinator/v1/compaction/status";
/// `GET` / `POST` the cluster compaction config (newer overlord API).
pub const OVERLORD_COMPACTION_CLUSTER: &str = "/indexer/v1/compaction/config/cluster";
/// `GET` every datasource's compaction config (newer overlord API).
pub const OVERLORD_COMPACTION_DATASOURCES: &str = "/indexer/v1/compaction/config/datasources";
/// `GET` / `POST` / `DELETE` one datasource's compaction config (newer overlord API).
pub const OVERLORD_COMPACTION_DATASOURCE: &str =
    "/indexer/v1/compaction/config/datasources/{data_source}";
/// `GET` the history of one datasource's compaction config (newer overlord API).
pub const OVERLORD_COMPACTION_DATASOURCE_HISTORY: &str =
    "/indexer/v1/compaction/config/datasources/{data_source}/history";
/// `GET` every compaction snapshot (newer overlord API).
pub const OVERLORD_COMPACTION_STATUSES: &str = "/indexer/v1/compaction/status/datasources";
/// `GET` one compaction snapshot (newer overlord API).
pub const OVERLORD_COMPACTION_STATUS: &str =
    "/indexer/v1/compaction/status/datasources/{data_source}";
/// `GET`: whether compaction supervisors run auto-compaction (`false`).
pub const OVERLORD_COMPACTION_SUPERVISOR_ENABLED: &str =
    "/indexer/v1/compaction/isSupervisorEnabled";

/// `GET`: `{authenticatorName: true}` per basic authenticator.
pub const AUTHN_LOAD_STATUS: &str = "/basic-security/authentication/loadStatus";
/// `GET`: reload every authenticator's users from the metadata store.
pub const AUTHN_REFRESH_ALL: &str = "/basic-security/authentication/refreshAll";
/// `GET` the user names of an authenticator.
pub const AUTHN_USERS: &str = "/basic-security/authentication/db/{authenticator}/users";
/// `GET|POST|DELETE` an authenticator user.
pub const AUTHN_USER: &str = "/basic-security/authentication/db/{authenticator}/users/{user}";
/// `POST {"password"}`: set a user's credentials.
pub const AUTHN_USER_CREDENTIALS: &str =
    "/basic-security/authentication/db/{authenticator}/users/{user}/credentials";
/// `GET`: `{authorizerName: true}` per basic authorizer.
pub const AUTHZ_LOAD_STATUS: &str = "/basic-security/authorization/loadStatus";
/// `GET`: reload every authorizer's users and roles from the metadata store.
pub const AUTHZ_REFRESH_ALL: &str = "/basic-security/authorization/refreshAll";
/// `GET` the user names of an authorizer.
pub const AUTHZ_USERS: &str = "/basic-security/authorization/db/{authorizer}/users";
/// `GET|POST|DELETE` an authorizer user (`?full`, `?simplifyPermissions`).
pub const AUTHZ_USER: &str = "/basic-security/authorization/db/{authorizer}/users/{user}";
/// `POST|DELETE`: assign or remove a role.
pub const AUTHZ_USER_ROLE: &str =
    "/basic-security/authorization/db/{authorizer}/users/{user}/roles/{role}";
/// `GET` the role names of an authorizer.
pub const AUTHZ_ROLES: &str = "/basic-security/authorization/db/{authorizer}/roles";
/// `GET|POST|DELETE` a role (`?full`, `?simplifyPermissions`).
pub const AUTHZ_ROLE: &str = "/basic-security/authorization/db/{authorizer}/roles/{role}";
/// `GET` / `POST` (replace) the permissions of a role.
pub const AUTHZ_ROLE_PERMISSIONS: &str =
    "/basic-security/authorization/db/{authorizer}/roles/{role}/permissions";
