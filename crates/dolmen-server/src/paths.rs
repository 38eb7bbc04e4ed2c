//! Every route path in one place (IX `all_paths.rs`). API routes are mounted under both
//! [`SERVICE_PREFIX`] (canonical, spec) and [`DRUID_PREFIX`] (Druid clients).

/// Canonical prefix of API routes (spec).
pub const SERVICE_PREFIX: &str = "/service";
/// Prefix Druid clients use; answers the same routes with `X-Druid-*` headers.
pub const DRUID_PREFIX: &str = "/druid";

/// `GET /status`: version.
pub const STATUS: &str = "/status";
/// `GET /status/health`: `true`.
pub const STATUS_HEALTH: &str = "/status/health";
/// `GET /status/selfDiscovered`.
pub const STATUS_SELF_DISCOVERED: &str = "/status/selfDiscovered";

/// `POST /v2/sql`.
pub const SQL: &str = "/v2/sql";

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
