//! The overlord: task queue, time-chunk locks and the task runner.
//!
//! Lifecycle of a task (Druid's, `docs/ingestion/tasks.md`): submitted tasks are stored in the
//! metadata store as RUNNING/WAITING before the API answers; the task then waits for its
//! time-chunk locks (WAITING), for a slot of the runner's capacity (PENDING), runs (RUNNING),
//! and ends SUCCESS or FAILED with `runnerStatusCode` NONE. Every state change is written to
//! the metadata store first; the in-memory map of running tasks is only a cache of live
//! counters and cancellation handles.
//!
//! Locks: a task writing intervals of a datasource holds an EXCLUSIVE lock on them (the
//! bucketed `granularitySpec.intervals`, or all time when none are given); appending tasks hold
//! APPEND locks, which are shared among appenders but exclude overwrites. An overwrite lock
//! carries the version its segments get: the current time, bumped past any version already
//! used in those intervals, so new data always overshadows old.
//!
//! Metrics (`dolmen_metrics`): a task that ends records `task/run/time` and
//! `task/success/count` or `task/failed/count`; ingestion tasks' row counters feed
//! `ingest/events/*`, `ingest/rows/output`, `ingest/persists/count` and `ingest/handoff/count`
//! by datasource: what they moved since the last report is added at every scrape
//! ([`Overlord::report_ingest_metrics`]) and when the task ends, so the counters follow a
//! running task without any per-row work. [`Overlord::task_slots`] gives the slot gauges.
//!
//! Restart: tasks found RUNNING in the metadata store at start-up were interrupted by a crash or
//! kill; they are marked FAILED with an error message saying so, and their locks are released.
//! Nothing they wrote is visible, because publishing is their last, atomic step.
//!
//! Task types ([`spec::TaskSpec`]): `index_parallel` and `index` (batch ingestion, run by
//! `dolmen-ingest`), `kill` ([`kill`]: permanent deletion of unused segments under an
//! EXCLUSIVE lock on its interval), `query_controller` ([`controller`]) and `index_logstream`
//! (streaming, run by `dolmen-stream`, created by the [`supervisor`] manager). All go through
//! the same lifecycle, logs and reports.

pub mod auto_compact;
pub mod compact;
pub mod controller;
pub mod kill;
pub mod spec;
pub mod supervisor;
pub mod tasklog;
pub mod worker_config;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dolmen_common::time::{format_iso_millis, now_millis, parse_iso_instant};
use dolmen_common::{ErrorCategory, Interval};
use dolmen_ingest::{IndexTaskEnv, IndexTaskSpec, IngestError, RowStats, run_index_task};
use dolmen_metadata::{
    MetadataError, MetadataStore, RunnerStatus, TaskFilter, TaskLocation, TaskLockRecord,
    TaskRecord, TaskState, TaskStatusUpdate,
};
use dolmen_metrics::{IngestCounts, Metrics};
use dolmen_storage::{DeepStorage, SegmentCache, SegmentView};
use dolmen_stream::kafka::KafkaRecordSupplier;
use dolmen_stream::kinesis::KinesisRecordSupplier;
/// The explicit Kinesis credentials type of [`OverlordConfig::kinesis_credentials`].
pub use dolmen_stream::kinesis::StaticCredentials as KinesisCredentials;
use dolmen_stream::spec::StreamKind;
use dolmen_stream::task::{StreamTaskEnv, StreamTaskSpec, TaskControl, run_stream_task};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use controller::{
    ControllerProgress, ControllerQuerySpec, ControllerRunner, ControllerSpec, ControllerTask,
    Destination,
};
pub use kill::KillProgress;
pub use spec::{KillTaskSpec, TaskSpec, generate_kill_task_id, generate_task_id};
pub use tasklog::TaskLogs;

/// Errors of the overlord API.
#[derive(Debug, thiserror::Error)]
pub enum OverlordError {
    /// The submitted task is invalid (message names the field).
    #[error("{0}")]
    InvalidTask(String),
    /// Unknown task.
    #[error("{0}")]
    NotFound(String),
    /// The task cannot take this action in its current state.
    #[error("{0}")]
    Conflict(String),
    /// The overlord is shutting down.
    #[error("the overlord is shutting down")]
    ShuttingDown,
    /// Metadata store failure.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// Local filesystem failure.
    #[error("{0}")]
    Io(String),
}

impl OverlordError {
    /// The error category.
    pub fn category(&self) -> ErrorCategory {
        match self {
            OverlordError::InvalidTask(_) => ErrorCategory::InvalidInput,
            OverlordError::NotFound(_) => ErrorCategory::NotFound,
            OverlordError::Conflict(_) => ErrorCategory::Conflict,
            OverlordError::ShuttingDown => ErrorCategory::ServiceUnavailable,
            OverlordError::Metadata(m) => m.category(),
            OverlordError::Io(_) => ErrorCategory::RuntimeFailure,
        }
    }
}

/// Settings of the overlord.
#[derive(Debug, Clone)]
pub struct OverlordConfig {
    /// Scratch space for running tasks (`<dir>/<task_id>`).
    pub work_dir: PathBuf,
    /// Number of tasks that may run at once.
    pub capacity: usize,
    /// Host name reported in task locations.
    pub host: String,
    /// Port reported in task locations.
    pub port: u16,
    /// Where task and ingestion metrics go.
    pub metrics: Metrics,
    /// This worker's category (`service.worker.category`, default `_default_worker_category`),
    /// matched against the worker configuration's category spec.
    pub category: String,
    /// Credentials of `shardstream` tasks and supervisors (`service.kinesis.accessKey` /
    /// `secretKey`, Druid's `druid.kinesis.*`); `None` uses the standard AWS chain. Never
    /// written to a task payload or a log (`Debug` redacts them).
    pub kinesis_credentials: Option<dolmen_stream::kinesis::StaticCredentials>,
}

/// Live counters of a running task, by task kind.
#[derive(Clone)]
enum Progress {
    Index(Arc<RowStats>),
    Kill(Arc<KillProgress>),
    Controller(Arc<ControllerProgress>),
    Stream(Arc<TaskControl>),
}

impl Progress {
    /// The running totals of an ingestion task's counters (`None` for tasks that ingest no
    /// rows this way: kill tasks, statements). Rows written by a batch task are added when it
    /// publishes, not here.
    fn ingest_counts(&self) -> Option<IngestCounts> {
        let rows = |s: &RowStats| IngestCounts {
            processed: s.processed.load(std::sync::atomic::Ordering::Relaxed),
            processed_with_error: s
                .processed_with_error
                .load(std::sync::atomic::Ordering::Relaxed),
            unparseable: s.unparseable.load(std::sync::atomic::Ordering::Relaxed),
            thrown_away: s.thrown_away.load(std::sync::atomic::Ordering::Relaxed),
            ..IngestCounts::default()
        };
        match self {
            Progress::Index(s) => Some(rows(s)),
            Progress::Stream(c) => {
                let (persists, rows_output) = c.persisted();
                Some(IngestCounts {
                    persists,
                    rows_output,
                    handoffs: c.published().0,
                    ..rows(&c.stats)
                })
            }
            Progress::Kill(_) | Progress::Controller(_) => None,
        }
    }

    fn for_spec(spec: &TaskSpec) -> Progress {
        match spec {
            TaskSpec::Logstream(s) => {
                Progress::Stream(Arc::new(TaskControl::new(&s.start_offsets)))
            }
            TaskSpec::Index(_) | TaskSpec::Compact(_) => Progress::Index(Arc::new(RowStats::new())),
            TaskSpec::Kill(_) => Progress::Kill(Arc::new(KillProgress::default())),
            TaskSpec::Controller(_) => Progress::Controller(Arc::new(ControllerProgress::new())),
        }
    }

    /// The task report (ingestion tasks: `ingestionStatsAndErrors`; kill tasks:
    /// `killUnusedSegments`; statements: `multiStageQuery`). `outcome` is `None` while the
    /// task runs.
    fn report(&self, id: &str, outcome: Option<Result<(), &str>>) -> Value {
        let error = match outcome {
            Some(Err(e)) => Some(e),
            _ => None,
        };
        match self {
            Progress::Index(s) => s.report(id, error),
            Progress::Kill(k) => k.report(id),
            Progress::Controller(c) => c.report(id, outcome),
            Progress::Stream(c) => {
                let mut r = c.stats.report(id, error);
                if let Some(p) = r.pointer_mut("/ingestionStatsAndErrors/payload") {
                    let (segments, rows) = c.published();
                    p["ingestionState"] = json!(match (c.phase(), outcome) {
                        (_, Some(_)) => "COMPLETED",
                        ("PUBLISHING", None) => "PUBLISHING",
                        _ => "BUILD_SEGMENTS",
                    });
                    p["currentOffsets"] =
                        dolmen_stream::seekable::offsets_object(&c.current_offsets());
                    p["endOffsets"] = c
                        .end_offsets()
                        .map_or(Value::Null, |e| dolmen_stream::seekable::offsets_object(&e));
                    p["segmentsPublished"] = json!(segments);
                    p["rowsPublished"] = json!(rows);
                }
                r
            }
        }
    }
}

struct LiveTask {
    cancel: CancellationToken,
    progress: Progress,
    data_source: String,
    runner_status: RunnerStatus,
    /// The highest ingestion counters already added to the metrics.
    reported: IngestCounts,
}

#[derive(Debug, Clone)]
struct HeldLock {
    task_id: String,
    data_source: String,
    interval: Interval,
    exclusive: bool,
}

/// How often a task held back by the worker configuration re-reads it.
const WORKER_CONFIG_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// A task slot held by a running task: gives the slot back, and its count by type, on drop.
struct SlotGuard {
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    task_type: String,
    running: Arc<Mutex<HashMap<String, usize>>>,
    freed: Arc<Notify>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Ok(mut running) = self.running.lock()
            && let Some(n) = running.get_mut(&self.task_type)
        {
            *n = n.saturating_sub(1);
        }
        // The slot goes back before the waiters wake.
        drop(self.permit.take());
        self.freed.notify_waiters();
    }
}

/// The task queue and runner.
pub struct Overlord {
    metadata: Arc<dyn MetadataStore>,
    deep: DeepStorage,
    view: Arc<SegmentView>,
    cache: Arc<SegmentCache>,
    logs: TaskLogs,
    config: OverlordConfig,
    slots: Arc<Semaphore>,
    /// Tasks holding a slot, by task type (for the worker configuration's `taskLimits`).
    running_by_type: Arc<Mutex<HashMap<String, usize>>>,
    /// Notified whenever a slot is given back.
    slot_freed: Arc<Notify>,
    live: Mutex<HashMap<String, LiveTask>>,
    locks: Mutex<Vec<HeldLock>>,
    /// Lock requests still waiting, by arrival ticket (see [`Overlord::acquire_locks`]).
    lock_waiters: Mutex<Vec<(u64, HeldLock)>>,
    next_ticket: std::sync::atomic::AtomicU64,
    lock_released: Notify,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    controller_runner: std::sync::OnceLock<Arc<dyn ControllerRunner>>,
    finished: tokio::sync::broadcast::Sender<String>,
}

impl std::fmt::Debug for Overlord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overlord")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Overlord {
    /// Starts the overlord: recovers from an earlier run (tasks left RUNNING are marked FAILED,
    /// their locks released).
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn start(
        metadata: Arc<dyn MetadataStore>,
        deep: DeepStorage,
        view: Arc<SegmentView>,
        cache: Arc<SegmentCache>,
        logs: TaskLogs,
        config: OverlordConfig,
    ) -> Result<Arc<Overlord>, OverlordError> {
        let interrupted = metadata
            .list_tasks(&TaskFilter {
                statuses: Some(vec![TaskState::Running]),
                ..Default::default()
            })
            .await?;
        for t in interrupted {
            let msg = "Task was interrupted: the server stopped while the task was running or queued; it published nothing. Resubmit it.";
            tracing::warn!(task_id = %t.id, "marking interrupted task FAILED");
            metadata
                .update_task_status(&TaskStatusUpdate {
                    id: t.id.clone(),
                    status: TaskState::Failed,
                    runner_status: RunnerStatus::None,
                    duration_ms: (now_millis() - t.created_ms).max(0),
                    error_msg: Some(msg.to_string()),
                    location: t.location.clone(),
                })
                .await?;
            logs.append(
                &t.id,
                &format!("{} ERROR {msg}", format_iso_millis(now_millis())),
            );
            logs.close(&t.id);
            metadata.delete_locks(&t.id).await?;
        }
        for l in metadata.list_locks().await? {
            metadata.delete_locks(&l.task_id).await?;
        }
        // No task runs yet: whatever is in the work directory was left by an earlier process
        // (interrupted tasks, hydrant files kept for in-flight queries).
        if let Ok(entries) = std::fs::read_dir(&config.work_dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        std::fs::create_dir_all(&config.work_dir).map_err(|e| {
            OverlordError::Io(format!(
                "cannot create task work directory [{}]: {e}",
                config.work_dir.display()
            ))
        })?;
        Ok(Arc::new(Overlord {
            metadata,
            deep,
            view,
            cache,
            logs,
            slots: Arc::new(Semaphore::new(config.capacity.max(1))),
            running_by_type: Arc::default(),
            slot_freed: Arc::new(Notify::new()),
            config,
            live: Mutex::new(HashMap::new()),
            locks: Mutex::new(Vec::new()),
            lock_waiters: Mutex::new(Vec::new()),
            next_ticket: std::sync::atomic::AtomicU64::new(0),
            lock_released: Notify::new(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            controller_runner: std::sync::OnceLock::new(),
            finished: tokio::sync::broadcast::channel(1024).0,
        }))
    }

    /// Installs what runs `query_controller` tasks (the SQL layer); until then such tasks
    /// fail. A second call is ignored.
    pub fn set_controller_runner(&self, runner: Arc<dyn ControllerRunner>) {
        let _ = self.controller_runner.set(runner);
    }

    /// The task logs.
    pub fn logs(&self) -> &TaskLogs {
        &self.logs
    }

    /// Submits a task payload (`POST /task`); returns its id once it is durably queued.
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] naming the bad field; [`OverlordError::Conflict`] when a
    /// task with the requested id exists.
    pub async fn submit(self: &Arc<Self>, payload: Value) -> Result<String, OverlordError> {
        if self.shutdown.is_cancelled() {
            return Err(OverlordError::ShuttingDown);
        }
        let spec = TaskSpec::from_json(&payload)?;
        let now = now_millis();
        let id = spec
            .id()
            .map(str::to_string)
            .unwrap_or_else(|| spec.generate_id(now));
        let stored = spec.with_defaults(&id);
        let record = TaskRecord {
            id: id.clone(),
            task_type: stored.task_type().to_string(),
            group_id: stored.group_id().unwrap_or(&id).to_string(),
            data_source: stored.data_source().to_string(),
            created_ms: now,
            queue_insertion_ms: now,
            status: TaskState::Running,
            runner_status: RunnerStatus::Waiting,
            duration_ms: -1,
            error_msg: None,
            location: TaskLocation::unknown(),
            payload: stored.to_payload()?,
        };
        self.metadata
            .insert_task(&record)
            .await
            .map_err(|e| match e {
                MetadataError::Conflict(m) => OverlordError::Conflict(m),
                other => other.into(),
            })?;
        let progress = Progress::for_spec(&stored);
        let cancel = self.shutdown.child_token();
        self.live.lock().expect("live lock").insert(
            id.clone(),
            LiveTask {
                cancel: cancel.clone(),
                progress: progress.clone(),
                data_source: record.data_source.clone(),
                runner_status: RunnerStatus::Waiting,
                reported: IngestCounts::default(),
            },
        );
        let this = Arc::clone(self);
        let span = tracing::info_span!("task", task_id = %id);
        let task_id = id.clone();
        self.tracker.spawn(
            async move {
                this.run(task_id, stored, record.created_ms, cancel, progress)
                    .await;
            }
            .instrument(span),
        );
        Ok(id)
    }

    fn set_runner_status(&self, id: &str, rs: RunnerStatus) {
        if let Some(t) = self.live.lock().expect("live lock").get_mut(id) {
            t.runner_status = rs;
        }
    }

    async fn run(
        self: Arc<Self>,
        id: String,
        spec: TaskSpec,
        created_ms: i64,
        cancel: CancellationToken,
        progress: Progress,
    ) {
        tracing::info!(
            data_source = spec.data_source(),
            task_type = spec.task_type(),
            "task submitted"
        );
        let started = Instant::now();
        let outcome = match (&spec, &progress) {
            (TaskSpec::Index(s), Progress::Index(stats)) => {
                self.run_index(&id, s, &cancel, stats).await
            }
            (TaskSpec::Kill(s), Progress::Kill(k)) => self.run_kill(&id, s, &cancel, k).await,
            (TaskSpec::Compact(s), Progress::Index(stats)) => {
                self.run_compact(&id, s, &cancel, stats).await
            }
            (TaskSpec::Controller(s), Progress::Controller(p)) => {
                self.run_controller(&id, s, &cancel, p).await
            }
            (TaskSpec::Logstream(s), Progress::Stream(c)) => {
                self.run_logstream(&id, s, &cancel, c).await
            }
            _ => Err(IngestError::Runtime(
                "internal error: task spec and progress kinds differ".into(),
            )),
        };
        let (status, error) = match &outcome {
            Ok(n) => {
                tracing::info!(
                    segments = n,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "task succeeded"
                );
                (TaskState::Success, None)
            }
            Err(IngestError::Canceled) => {
                tracing::info!("task shut down");
                (TaskState::Failed, Some(IngestError::Canceled.to_string()))
            }
            Err(e) => {
                tracing::error!(error = %e, "task failed");
                (TaskState::Failed, Some(e.to_string()))
            }
        };
        let writes_segments = match &spec {
            TaskSpec::Index(_) | TaskSpec::Logstream(_) | TaskSpec::Compact(_) => true,
            TaskSpec::Controller(c) => c.is_ingestion(),
            TaskSpec::Kill(_) => false,
        };
        if outcome.is_ok() && writes_segments {
            // Make the new segments visible to queries before the task reports SUCCESS, so a
            // client that saw SUCCESS always reads its data.
            if let Err(e) = self.view.refresh_data_source(spec.data_source()).await {
                tracing::warn!(error = %e, "cannot refresh timeline after publish");
            }
            self.preload(spec.data_source()).await;
        }
        // Metrics before the final status: a client that saw the task end sees its counts.
        self.report_ingest_metrics();
        self.config.metrics.record_task(
            spec.data_source(),
            spec.task_type(),
            status == TaskState::Success,
            std::time::Duration::from_millis(u64::try_from(now_millis() - created_ms).unwrap_or(0)),
        );
        let report = progress.report(&id, Some(error.as_deref().map_or(Ok(()), Err)));
        if let Err(e) = self.metadata.set_task_report(&id, &report).await {
            tracing::error!(error = %e, "cannot store task report");
        }
        let update = TaskStatusUpdate {
            id: id.clone(),
            status,
            runner_status: RunnerStatus::None,
            duration_ms: (now_millis() - created_ms).max(0),
            error_msg: error,
            location: self.location(),
        };
        if let Err(e) = self.metadata.update_task_status(&update).await {
            tracing::error!(error = %e, "cannot store task status");
        }
        self.release_locks(&id).await;
        self.live.lock().expect("live lock").remove(&id);
        self.logs.close(&id);
        let _ = self.finished.send(id);
    }

    /// Adds to the ingestion metrics what the row counters of every live task moved since the
    /// last report (see [`IngestCounts::advance`]): called at every scrape and when a task
    /// ends. The lock on the live tasks is held briefly, never across an await.
    pub fn report_ingest_metrics(&self) {
        if !self.config.metrics.is_enabled() {
            return;
        }
        let mut live = self.live.lock().expect("live lock");
        for t in live.values_mut() {
            if let Some(current) = t.progress.ingest_counts() {
                let delta = IngestCounts::advance(&mut t.reported, &current);
                if !delta.is_zero() {
                    self.config.metrics.add_ingest(&t.data_source, &delta);
                }
            }
        }
    }

    /// Task slots: the runner's capacity and how many slots run a task now.
    pub fn task_slots(&self) -> (usize, usize) {
        let total = self.config.capacity.max(1);
        (total, total.saturating_sub(self.slots.available_permits()))
    }

    /// True while a task is queued or running in this process.
    pub fn is_live(&self, id: &str) -> bool {
        self.live.lock().expect("live lock").contains_key(id)
    }

    /// Subscribes to the ids of tasks as they finish (SUCCESS or FAILED, status stored).
    pub fn subscribe_finished(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.finished.subscribe()
    }

    /// The credentials of `shardstream` clients (`service.kinesis.*`); `None`: the AWS chain.
    pub fn kinesis_credentials(&self) -> Option<dolmen_stream::kinesis::StaticCredentials> {
        self.config.kinesis_credentials.clone()
    }

    /// The control handle of a live `index_logstream` task (its offsets, end offsets, row
    /// counters); `None` once it finished or for other task types.
    pub fn stream_control(&self, id: &str) -> Option<Arc<TaskControl>> {
        match &self.live.lock().expect("live lock").get(id)?.progress {
            Progress::Stream(c) => Some(Arc::clone(c)),
            _ => None,
        }
    }

    /// An `index_logstream` task: a shared APPEND lock on all time (streaming tasks append to
    /// any time chunk, alongside each other; WAITING), a slot (PENDING), then reading and
    /// publishing on a blocking thread (RUNNING). Returns the number of segments published.
    async fn run_logstream(
        &self,
        id: &str,
        spec: &StreamTaskSpec,
        cancel: &CancellationToken,
        control: &Arc<TaskControl>,
    ) -> Result<usize, IngestError> {
        let version = self
            .acquire_locks(
                id,
                &spec.spec.data_source,
                &[Interval::ETERNITY],
                false,
                cancel,
            )
            .await?;
        tracing::info!(version = %version, start = ?spec.start_offsets, "acquired locks");
        let _permit = self.wait_for_slot(id, cancel).await?;
        let env = StreamTaskEnv {
            task_id: id.to_string(),
            work_dir: self.config.work_dir.join(id),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            view: Arc::clone(&self.view),
            cancel: cancel.clone(),
            control: Arc::clone(control),
            lock_version: version,
            runtime: tokio::runtime::Handle::current(),
        };
        let spec = spec.clone();
        let credentials = self.config.kinesis_credentials.clone();
        let span = tracing::Span::current();
        let n = tokio::task::spawn_blocking(move || {
            span.in_scope(|| match spec.spec.kind {
                StreamKind::Logstream => {
                    let supplier = KafkaRecordSupplier::new(&spec.spec.io.consumer_properties)
                        .map_err(|e| IngestError::Runtime(e.to_string()))?;
                    run_stream_task(&env, &spec, supplier)
                }
                StreamKind::Shardstream => {
                    let supplier = KinesisRecordSupplier::new(
                        kinesis_config(&spec.spec, credentials).map_err(IngestError::Runtime)?,
                    )
                    .map_err(|e| IngestError::Runtime(e.to_string()))?;
                    run_stream_task(&env, &spec, supplier)
                }
            })
        })
        .await
        .map_err(|e| IngestError::Runtime(format!("streaming task thread failed: {e}")))??;
        Ok(n as usize)
    }

    /// Loads the visible segments of a datasource into the segment cache (what a historical
    /// does after the coordinator assigns them), so the first query does not pay for it.
    async fn preload(&self, data_source: &str) {
        if let Some(t) = self.view.timeline(data_source) {
            for s in t.visible_segments() {
                if let Err(e) = self.cache.ensure_loaded(&s).await {
                    tracing::warn!(segment = %s.identifier, error = %e, "cannot load segment");
                }
            }
        }
    }

    fn location(&self) -> TaskLocation {
        TaskLocation {
            host: Some(self.config.host.clone()),
            port: i32::from(self.config.port),
            tls_port: -1,
        }
    }

    /// PENDING until a slot of the runner's capacity is free and the worker configuration
    /// (`GET /indexer/v1/worker`: category spec, affinity, `taskLimits`) lets the task run here,
    /// then RUNNING; the slot is held until the returned guard drops.
    async fn wait_for_slot(
        &self,
        id: &str,
        cancel: &CancellationToken,
    ) -> Result<SlotGuard, IngestError> {
        self.set_status(id, RunnerStatus::Pending).await;
        let (task_type, data_source) = match self.metadata.get_task(id).await {
            Ok(Some(t)) => (t.task_type, t.data_source),
            _ => (String::new(), String::new()),
        };
        let host_port = format!("{}:{}", self.config.host, self.config.port);
        let mut told = None::<String>;
        loop {
            let freed = self.slot_freed.notified();
            let permit = tokio::select! {
                p = Arc::clone(&self.slots).acquire_owned() => p.map_err(|_| IngestError::Canceled)?,
                _ = cancel.cancelled() => return Err(IngestError::Canceled),
            };
            let stored = self
                .metadata
                .config(worker_config::WORKER_CONFIG_KEY)
                .await
                .ok()
                .flatten();
            let selection = worker_config::WorkerSelection::from_stored(stored.as_ref());
            let verdict = {
                let mut running = self.running_by_type.lock().expect("slot lock");
                let of_type = running.get(&task_type).copied().unwrap_or(0);
                let verdict = selection.admits(&worker_config::SlotRequest {
                    task_type: &task_type,
                    data_source: &data_source,
                    host_port: &host_port,
                    category: &self.config.category,
                    capacity: self.config.capacity.max(1),
                    running_of_type: of_type,
                });
                if verdict.is_ok() {
                    *running.entry(task_type.clone()).or_default() += 1;
                }
                verdict
            };
            match verdict {
                Ok(()) => {
                    self.set_status(id, RunnerStatus::Running).await;
                    return Ok(SlotGuard {
                        permit: Some(permit),
                        task_type,
                        running: Arc::clone(&self.running_by_type),
                        freed: Arc::clone(&self.slot_freed),
                    });
                }
                Err(reason) => {
                    drop(permit);
                    if told.as_deref() != Some(reason.as_str()) {
                        tracing::info!(task_id = %id, %reason, "task waits for a slot");
                        self.logs.append(
                            id,
                            &format!("{} INFO waiting: {reason}", format_iso_millis(now_millis())),
                        );
                        told = Some(reason);
                    }
                    // A slot given back, or (for a configuration change) a poll.
                    tokio::select! {
                        () = freed => {}
                        () = tokio::time::sleep(WORKER_CONFIG_POLL) => {}
                        () = cancel.cancelled() => return Err(IngestError::Canceled),
                    }
                }
            }
        }
    }

    /// An ingestion task: locks (WAITING), a slot (PENDING), then indexing and the atomic
    /// publish (RUNNING). Returns the number of segments published.
    async fn run_index(
        &self,
        id: &str,
        spec: &IndexTaskSpec,
        cancel: &CancellationToken,
        stats: &Arc<RowStats>,
    ) -> Result<usize, IngestError> {
        let exclusive = !spec.spec.io_config.append_to_existing;
        let intervals = Self::lock_intervals(spec);
        let version = self
            .acquire_locks(id, spec.data_source(), &intervals, exclusive, cancel)
            .await?;
        tracing::info!(version = %version, "acquired locks");
        let _permit = self.wait_for_slot(id, cancel).await?;
        let env = IndexTaskEnv {
            task_id: id.to_string(),
            work_dir: self.config.work_dir.join(id),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            cancel: cancel.clone(),
            stats: Arc::clone(stats),
            lock_version: version,
            last_compaction_state: None,
        };
        let segments = run_index_task(&env, spec).await?;
        self.config.metrics.add_ingest(
            spec.data_source(),
            &IngestCounts {
                rows_output: segments.iter().map(|s| s.num_rows).sum(),
                ..IngestCounts::default()
            },
        );
        Ok(segments.len())
    }

    /// A `compact` task ([`compact`]): the umbrella interval of the requested one and its
    /// visible segments, aligned to the target granularity, locked EXCLUSIVE (WAITING); a slot
    /// (PENDING); then, with the lock held, the segments are read again and rewritten by the
    /// batch build and publish (RUNNING). Returns the number of segments published.
    async fn run_compact(
        &self,
        id: &str,
        spec: &compact::CompactTaskSpec,
        cancel: &CancellationToken,
        stats: &Arc<RowStats>,
    ) -> Result<usize, IngestError> {
        let used = self.compaction_candidates(spec, None).await?;
        let before = compact::plan(spec, used).map_err(IngestError::Runtime)?;
        let version = self
            .acquire_locks(id, &spec.data_source, &[before.interval], true, cancel)
            .await?;
        tracing::info!(version = %version, interval = %before.interval, "acquired lock");
        let _permit = self.wait_for_slot(id, cancel).await?;
        // Under the lock nobody else writes the interval: plan again from what is there now.
        let used = self
            .compaction_candidates(spec, Some(before.interval))
            .await?;
        let plan = compact::plan(spec, used).map_err(IngestError::Runtime)?;
        if !before.interval.contains(&plan.interval) {
            return Err(IngestError::Runtime(format!(
                "segments of [{}] changed while the task waited for its lock: they now span [{}], beyond the locked interval; submit the task again",
                before.interval, plan.interval
            )));
        }
        compact::check_rollup_metrics(spec, &plan.inputs).map_err(IngestError::InvalidSpec)?;
        let index_json = spec.index_spec(id, before.interval, &plan.granularity, &plan.inputs);
        let index = IndexTaskSpec::from_json(&index_json)?;
        tracing::info!(
            inputs = plan.inputs.len(),
            granularity = %plan.granularity.to_json(),
            "compacting"
        );
        let env = IndexTaskEnv {
            task_id: id.to_string(),
            work_dir: self.config.work_dir.join(id),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            cancel: cancel.clone(),
            stats: Arc::clone(stats),
            lock_version: version,
            last_compaction_state: Some(compact::compaction_state(&index)),
        };
        let segments = run_index_task(&env, &index).await?;
        Ok(segments.len())
    }

    /// The used segments a compact task considers: those overlapping its interval (or
    /// `within`), or for a `segments` input spec all used segments of the datasource.
    async fn compaction_candidates(
        &self,
        spec: &compact::CompactTaskSpec,
        within: Option<Interval>,
    ) -> Result<Vec<dolmen_segment::DataSegment>, IngestError> {
        let interval = match (within, spec.input_spec()) {
            (Some(i), _) => Some(i),
            (None, Some(compact::CompactionInputSpec::Interval { interval, .. })) => Some(interval),
            _ => None,
        };
        self.metadata
            .used_segments(&spec.data_source, interval)
            .await
            .map_err(|e| IngestError::Runtime(e.to_string()))
    }

    /// A `query_controller` task: the locks its destination needs (WAITING; none for a
    /// `SELECT`), a slot (PENDING), then the statement (RUNNING) through the installed
    /// [`ControllerRunner`]. Returns the number of segments published (0 for a `SELECT`).
    async fn run_controller(
        &self,
        id: &str,
        spec: &ControllerSpec,
        cancel: &CancellationToken,
        progress: &Arc<ControllerProgress>,
    ) -> Result<usize, IngestError> {
        let runner = self.controller_runner.get().cloned().ok_or_else(|| {
            IngestError::Runtime("this server does not run SQL statements as tasks".into())
        })?;
        let version = match spec.locks() {
            Some((intervals, exclusive)) => {
                let v = self
                    .acquire_locks(id, &spec.data_source, &intervals, exclusive, cancel)
                    .await?;
                tracing::info!(version = %v, "acquired locks");
                v
            }
            None => format_iso_millis(now_millis()),
        };
        let _permit = self.wait_for_slot(id, cancel).await?;
        let env = IndexTaskEnv {
            task_id: id.to_string(),
            work_dir: self.config.work_dir.join(id),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            cancel: cancel.clone(),
            stats: Arc::new(RowStats::new()),
            lock_version: version,
            last_compaction_state: None,
        };
        let work_dir = env.work_dir.clone();
        let task = ControllerTask {
            id: id.to_string(),
            spec: spec.clone(),
            env,
            progress: Arc::clone(progress),
        };
        let result = runner.run(task).await;
        let _ = tokio::fs::remove_dir_all(&work_dir).await;
        result
    }

    /// A kill task: an EXCLUSIVE lock on its interval (WAITING), a slot (PENDING), then the
    /// deletion of unused segments (RUNNING). Returns the number of segments deleted.
    async fn run_kill(
        &self,
        id: &str,
        spec: &KillTaskSpec,
        cancel: &CancellationToken,
        progress: &Arc<KillProgress>,
    ) -> Result<usize, IngestError> {
        self.acquire_locks(id, &spec.data_source, &[spec.interval], true, cancel)
            .await?;
        tracing::info!(interval = %spec.interval, "acquired lock");
        let _permit = self.wait_for_slot(id, cancel).await?;
        let env = kill::KillEnv {
            metadata: self.metadata.as_ref(),
            deep: &self.deep,
            cache: &self.cache,
            cancel,
            progress,
        };
        Ok(kill::run_kill(&env, spec).await? as usize)
    }

    async fn set_status(&self, id: &str, rs: RunnerStatus) {
        self.set_runner_status(id, rs);
        let location = if rs == RunnerStatus::Running {
            self.location()
        } else {
            TaskLocation::unknown()
        };
        let update = TaskStatusUpdate {
            id: id.to_string(),
            status: TaskState::Running,
            runner_status: rs,
            duration_ms: -1,
            error_msg: None,
            location,
        };
        if let Err(e) = self.metadata.update_task_status(&update).await {
            tracing::warn!(error = %e, "cannot store runner status");
        }
    }

    /// The intervals a task locks: its bucketed `granularitySpec.intervals`, or all time.
    fn lock_intervals(spec: &IndexTaskSpec) -> Vec<Interval> {
        let g = &spec.spec.data_schema.granularity_spec;
        if g.intervals.is_empty() {
            return vec![Interval::ETERNITY];
        }
        let mut out: Vec<Interval> = Vec::new();
        for iv in &g.intervals {
            let buckets = g.segment_granularity.buckets(iv, 10_001);
            if buckets.len() > 10_000 {
                out.push(*iv);
            } else {
                out.extend(buckets);
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Waits (WAITING) until no other task holds a conflicting lock, then records the locks
    /// and returns the version an overwrite writes: now, bumped past every version already
    /// used in the locked intervals. EXCLUSIVE locks conflict with every overlapping lock of
    /// the datasource; APPEND locks only with EXCLUSIVE ones.
    ///
    /// Conflicting requests are granted in arrival order: a request also waits for the earlier
    /// requests it conflicts with, even before they hold anything. Without this a `compact`
    /// task's EXCLUSIVE lock would never be granted while a supervisor keeps one of its
    /// streaming tasks' APPEND locks held at every moment (the next task starts before the
    /// previous one has published); with it, the next streaming task waits for the compaction
    /// (ADR 0022).
    async fn acquire_locks(
        &self,
        id: &str,
        data_source: &str,
        intervals: &[Interval],
        exclusive: bool,
        cancel: &CancellationToken,
    ) -> Result<String, IngestError> {
        let ds = data_source.to_string();
        let ticket = self
            .next_ticket
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let conflicts = |h: &HeldLock| {
            h.task_id != id
                && h.data_source == ds
                && (h.exclusive || exclusive)
                && intervals.iter().any(|i| i.overlaps(&h.interval))
        };
        // Registered as a waiter until granted or cancelled (removed on drop either way).
        struct Waiting<'a>(&'a Overlord, u64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0
                    .lock_waiters
                    .lock()
                    .expect("lock waiters")
                    .retain(|(t, _)| *t != self.1);
                self.0.lock_released.notify_waiters();
            }
        }
        self.lock_waiters
            .lock()
            .expect("lock waiters")
            .extend(intervals.iter().map(|iv| {
                (
                    ticket,
                    HeldLock {
                        task_id: id.to_string(),
                        data_source: ds.clone(),
                        interval: *iv,
                        exclusive,
                    },
                )
            }));
        let waiting = Waiting(self, ticket);
        loop {
            let notified = self.lock_released.notified();
            {
                let mut held = self.locks.lock().expect("lock table");
                let earlier = self
                    .lock_waiters
                    .lock()
                    .expect("lock waiters")
                    .iter()
                    .any(|(t, w)| *t < ticket && conflicts(w));
                let conflict = earlier || held.iter().any(conflicts);
                if !conflict {
                    for iv in intervals {
                        held.push(HeldLock {
                            task_id: id.to_string(),
                            data_source: ds.clone(),
                            interval: *iv,
                            exclusive,
                        });
                    }
                    break;
                }
            }
            tracing::info!("waiting for locks held by other tasks");
            tokio::select! {
                _ = notified => {}
                _ = cancel.cancelled() => return Err(IngestError::Canceled),
            }
        }
        drop(waiting);
        // Version: now, bumped past every version already used in the locked intervals.
        let mut v = now_millis();
        for iv in intervals {
            let max = self
                .metadata
                .max_used_version(&ds, *iv)
                .await
                .map_err(|e| IngestError::Runtime(e.to_string()))?;
            if let Some(max) = max {
                match parse_iso_instant(&max) {
                    Ok(t) => v = v.max(t + 1),
                    Err(_) => v = v.max(now_millis()),
                }
            }
        }
        let version = format_iso_millis(v);
        for (n, iv) in intervals.iter().enumerate() {
            let rec = TaskLockRecord {
                id: format!("{id}-{n}"),
                task_id: id.to_string(),
                data_source: ds.clone(),
                interval: *iv,
                version: version.clone(),
                lock_type: if exclusive {
                    "EXCLUSIVE".into()
                } else {
                    "APPEND".into()
                },
            };
            self.metadata
                .insert_lock(&rec)
                .await
                .map_err(|e| IngestError::Runtime(e.to_string()))?;
        }
        Ok(version)
    }

    async fn release_locks(&self, id: &str) {
        self.locks
            .lock()
            .expect("lock table")
            .retain(|h| h.task_id != id);
        if let Err(e) = self.metadata.delete_locks(id).await {
            tracing::warn!(error = %e, "cannot delete task locks");
        }
        self.lock_released.notify_waiters();
    }

    /// A task's record, with the live runner status of a running task.
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn task(&self, id: &str) -> Result<Option<TaskRecord>, OverlordError> {
        let mut rec = self.metadata.get_task(id).await?;
        if let Some(r) = rec.as_mut()
            && r.status == TaskState::Running
            && let Some(live) = self.live.lock().expect("live lock").get(id)
        {
            r.runner_status = live.runner_status;
        }
        Ok(rec)
    }

    /// Tasks matching a filter, newest first, with live runner statuses.
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRecord>, OverlordError> {
        let mut v = self.metadata.list_tasks(filter).await?;
        let live = self.live.lock().expect("live lock");
        for r in &mut v {
            if r.status == TaskState::Running
                && let Some(l) = live.get(&r.id)
            {
                r.runner_status = l.runner_status;
            }
        }
        Ok(v)
    }

    /// A task's report: live counters while it runs, the stored report once complete.
    ///
    /// # Errors
    /// [`OverlordError::NotFound`] for an unknown task.
    pub async fn report(&self, id: &str) -> Result<Value, OverlordError> {
        if let Some(live) = self.live.lock().expect("live lock").get(id) {
            return Ok(live.progress.report(id, None));
        }
        if let Some(r) = self.metadata.task_report(id).await? {
            return Ok(r);
        }
        if self.metadata.get_task(id).await?.is_some() {
            return Ok(RowStats::new().report(id, None));
        }
        Err(OverlordError::NotFound(format!(
            "Cannot find any task with id: [{id}]"
        )))
    }

    /// Shuts a task down (it ends FAILED and publishes nothing).
    ///
    /// # Errors
    /// [`OverlordError::NotFound`] when the task is unknown or already complete.
    pub fn shutdown_task(&self, id: &str) -> Result<(), OverlordError> {
        match self.live.lock().expect("live lock").get(id) {
            Some(t) => {
                t.cancel.cancel();
                Ok(())
            }
            None => Err(OverlordError::NotFound(format!(
                "Cannot find any active task with id: [{id}]"
            ))),
        }
    }

    /// Shuts down every task of a datasource that is not complete (waiting, pending or
    /// running); returns their ids (`POST /datasources/{ds}/shutdownAllTasks`, Druid's
    /// `OverlordResource.shutdownTasksForDataSource`).
    ///
    /// # Errors
    /// [`OverlordError::NotFound`] when the datasource has no such task.
    pub fn shutdown_data_source_tasks(
        &self,
        data_source: &str,
    ) -> Result<Vec<String>, OverlordError> {
        let live = self.live.lock().expect("live lock");
        let mut ids: Vec<String> = live
            .iter()
            .filter(|(_, t)| t.data_source == data_source)
            .map(|(id, t)| {
                t.cancel.cancel();
                id.clone()
            })
            .collect();
        if ids.is_empty() {
            return Err(OverlordError::NotFound(format!(
                "No active task found for datasource [{data_source}]"
            )));
        }
        ids.sort();
        Ok(ids)
    }

    /// Ids of tasks that are not complete.
    pub fn active_task_ids(&self) -> Vec<String> {
        self.live
            .lock()
            .expect("live lock")
            .keys()
            .cloned()
            .collect()
    }

    /// Graceful shutdown: stops accepting tasks, cancels running ones and waits until each
    /// has recorded its final status (nothing half-published: publishing is atomic).
    pub async fn stop(&self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// The Kinesis client configuration of a `shardstream` spec with the runtime `credentials`
/// (`None`: the standard AWS chain).
///
/// # Errors
/// A message when the spec is not a `shardstream` one.
pub fn kinesis_config(
    spec: &dolmen_stream::spec::SupervisorSpec,
    credentials: Option<dolmen_stream::kinesis::StaticCredentials>,
) -> Result<dolmen_stream::kinesis::KinesisConfig, String> {
    let io = spec
        .io
        .kinesis
        .as_ref()
        .ok_or("ioConfig: not a shardstream ioConfig")?;
    let mut config = io.kinesis_config(credentials);
    if let Some(tuning) = &spec.tuning.kinesis {
        tuning.apply(&mut config);
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dolmen_metadata::{
        NewSegment, PublishMode, PublishRequest, SegmentSelector, SqlMetadataStore,
    };
    use serde_json::json;

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        overlord: Arc<Overlord>,
        metadata: Arc<dyn MetadataStore>,
        deep: DeepStorage,
    }

    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let metadata: Arc<dyn MetadataStore> =
            Arc::new(SqlMetadataStore::connect("sqlite::memory:").await.unwrap());
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let cache = Arc::new(SegmentCache::new(&dir.path().join("cache"), deep.clone()).unwrap());
        let view = Arc::new(SegmentView::new(Arc::clone(&metadata)));
        let overlord = Overlord::start(
            Arc::clone(&metadata),
            deep.clone(),
            view,
            cache,
            TaskLogs::new(),
            OverlordConfig {
                work_dir: dir.path().join("work"),
                capacity: 2,
                host: "localhost".into(),
                port: 8888,
                metrics: Metrics::default(),
                category: worker_config::DEFAULT_WORKER_CATEGORY.into(),
                kinesis_credentials: None,
            },
        )
        .await
        .unwrap();
        Fixture {
            _dir: dir,
            overlord,
            metadata,
            deep,
        }
    }

    /// Pushes a small file to deep storage and publishes it as a segment of `day`.
    async fn publish(f: &Fixture, day: &str, version: &str) -> (String, std::path::PathBuf) {
        let interval = Interval::parse(day).unwrap();
        let src = f
            .deep
            .local_root()
            .unwrap()
            .join(format!("../src-{}-{version}", interval.start));
        std::fs::write(&src, b"segment bytes").unwrap();
        let key = format!(
            "ds/{}/{version}/0/index.parquet",
            interval.to_underscore_string()
        );
        let load_spec = f.deep.push(&src, &key).await.unwrap();
        let out = f
            .metadata
            .publish_segments(PublishRequest {
                data_source: "ds".into(),
                segments: vec![NewSegment {
                    interval,
                    load_spec: load_spec.clone(),
                    dimensions: vec![],
                    metrics: vec![],
                    columns: vec![],
                    size: 13,
                    num_rows: 1,
                    shard: None,
                }],
                mode: PublishMode::Overwrite {
                    version: version.into(),
                },
                drop_existing: vec![],
                commit: None,
                last_compaction_state: None,
            })
            .await
            .unwrap();
        let dolmen_segment::LoadSpec::Local { path } = load_spec else {
            panic!("local load spec")
        };
        (out[0].identifier.clone(), path.into())
    }

    async fn wait(f: &Fixture, id: &str) -> TaskRecord {
        for _ in 0..500 {
            let t = f.overlord.task(id).await.unwrap().unwrap();
            if t.status != TaskState::Running {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id} did not finish");
    }

    #[tokio::test]
    async fn kill_deletes_only_unused_segments_inside_its_interval() {
        let f = fixture().await;
        let (a, a_file) = publish(&f, "2015-09-12/2015-09-13", "v1").await;
        let (b, b_file) = publish(&f, "2015-09-13/2015-09-14", "v1").await;
        let (c, c_file) = publish(&f, "2015-09-14/2015-09-15", "v1").await;
        // a and c unused; b stays used; c lies outside the kill interval.
        f.metadata
            .set_segments_used(
                "ds",
                &SegmentSelector::Ids(vec![a.clone(), c.clone()]),
                false,
            )
            .await
            .unwrap();
        let id = f
            .overlord
            .submit(json!({"type": "kill", "dataSource": "ds", "interval": "2015-09-12/2015-09-14", "batchSize": 1}))
            .await
            .unwrap();
        let t = wait(&f, &id).await;
        assert_eq!(t.status, TaskState::Success, "{:?}", t.error_msg);
        assert_eq!(t.task_type, "kill");
        assert_eq!(t.data_source, "ds");
        assert_eq!(t.payload["batchSize"], 1);
        assert!(f.metadata.segment(&a).await.unwrap().is_none());
        assert!(!a_file.exists());
        assert!(f.metadata.segment(&b).await.unwrap().unwrap().used);
        assert!(b_file.exists());
        assert!(!f.metadata.segment(&c).await.unwrap().unwrap().used);
        assert!(c_file.exists());
        let report = f.overlord.report(&id).await.unwrap();
        assert_eq!(
            report["killUnusedSegments"]["payload"],
            json!({"numSegmentsKilled": 1, "numBatchesProcessed": 1})
        );
        assert!(f.metadata.list_locks().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn kill_respects_limit_and_versions() {
        let f = fixture().await;
        let mut ids = Vec::new();
        for day in [
            "2015-09-12/2015-09-13",
            "2015-09-13/2015-09-14",
            "2015-09-14/2015-09-15",
        ] {
            ids.push(publish(&f, day, "v1").await.0);
        }
        f.metadata
            .set_segments_used("ds", &SegmentSelector::All, false)
            .await
            .unwrap();
        let run = |body: Value| {
            let o = Arc::clone(&f.overlord);
            async move { o.submit(body).await.unwrap() }
        };
        let id = run(json!({"type": "kill", "dataSource": "ds", "interval": "2015/2016", "versions": ["v0"]})).await;
        assert_eq!(wait(&f, &id).await.status, TaskState::Success);
        assert_eq!(f.metadata.segments("ds", true).await.unwrap().len(), 3);
        let id = run(json!({"type": "kill", "dataSource": "ds", "interval": "2015/2016", "limit": 2, "batchSize": 1})).await;
        assert_eq!(wait(&f, &id).await.status, TaskState::Success);
        let left = f.metadata.segments("ds", true).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].segment.identifier, ids[2], "oldest first");
        let report = f.overlord.report(&id).await.unwrap();
        assert_eq!(
            report["killUnusedSegments"]["payload"]["numBatchesProcessed"],
            2
        );
    }

    #[tokio::test]
    async fn kill_waits_for_a_conflicting_lock_and_can_be_shut_down() {
        let f = fixture().await;
        // Another task holds an APPEND lock on the day.
        f.overlord.locks.lock().unwrap().push(HeldLock {
            task_id: "other".into(),
            data_source: "ds".into(),
            interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
            exclusive: false,
        });
        let id = f
            .overlord
            .submit(json!({"type": "kill", "dataSource": "ds", "interval": "2015-09-12T06/2015-09-12T07"}))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = f.overlord.task(&id).await.unwrap().unwrap();
        assert_eq!(t.runner_status, RunnerStatus::Waiting);
        // Another datasource is not blocked.
        let other = f
            .overlord
            .submit(json!({"type": "kill", "dataSource": "ds2", "interval": "2015/2016"}))
            .await
            .unwrap();
        assert_eq!(wait(&f, &other).await.status, TaskState::Success);
        // Releasing the lock lets the kill run.
        f.overlord.release_locks("other").await;
        assert_eq!(wait(&f, &id).await.status, TaskState::Success);

        // A waiting kill can be shut down with its datasource's tasks.
        f.overlord.locks.lock().unwrap().push(HeldLock {
            task_id: "other".into(),
            data_source: "ds".into(),
            interval: Interval::ETERNITY,
            exclusive: true,
        });
        let id = f
            .overlord
            .submit(json!({"type": "kill", "dataSource": "ds", "interval": "2015/2016"}))
            .await
            .unwrap();
        assert!(matches!(
            f.overlord.shutdown_data_source_tasks("nope"),
            Err(OverlordError::NotFound(_))
        ));
        assert_eq!(
            f.overlord.shutdown_data_source_tasks("ds").unwrap(),
            vec![id.clone()]
        );
        let t = wait(&f, &id).await;
        assert_eq!(t.status, TaskState::Failed);
        assert!(t.error_msg.unwrap().contains("shut down"));
    }

    #[tokio::test]
    async fn unknown_task_types_are_rejected() {
        let f = fixture().await;
        let err = f
            .overlord
            .submit(json!({"type": "index_hadoop", "dataSource": "ds"}))
            .await
            .unwrap_err();
        assert!(
            matches!(err, OverlordError::InvalidTask(ref m) if m.contains("type")),
            "{err}"
        );
    }
}
