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
//! Restart: tasks found RUNNING in the metadata store at start-up were interrupted by a crash or
//! kill; they are marked FAILED with an error message saying so, and their locks are released.
//! Nothing they wrote is visible, because publishing is their last, atomic step.

pub mod tasklog;

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
use dolmen_storage::{DeepStorage, SegmentCache, SegmentView};
use rand::Rng;
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

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
}

struct LiveTask {
    cancel: CancellationToken,
    stats: Arc<RowStats>,
    runner_status: RunnerStatus,
}

#[derive(Debug, Clone)]
struct HeldLock {
    task_id: String,
    data_source: String,
    interval: Interval,
    exclusive: bool,
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
    live: Mutex<HashMap<String, LiveTask>>,
    locks: Mutex<Vec<HeldLock>>,
    lock_released: Notify,
    shutdown: CancellationToken,
    tracker: TaskTracker,
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
            config,
            live: Mutex::new(HashMap::new()),
            locks: Mutex::new(Vec::new()),
            lock_released: Notify::new(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        }))
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
        let task_type = payload
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if task_type.is_empty() {
            return Err(OverlordError::InvalidTask("type: missing task type".into()));
        }
        if task_type != "index_parallel" && task_type != "index" {
            return Err(OverlordError::InvalidTask(format!(
                "type: unsupported task type [{task_type}]; supported: index_parallel, index"
            )));
        }
        let spec = IndexTaskSpec::from_json(&payload)
            .map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
        let now = now_millis();
        let id = spec
            .id
            .clone()
            .unwrap_or_else(|| generate_task_id(&task_type, spec.data_source(), now));
        let mut stored = spec.clone();
        stored.id = Some(id.clone());
        stored.group_id = Some(spec.group_id.clone().unwrap_or_else(|| id.clone()));
        stored.data_source = Some(spec.data_source().to_string());
        if stored.resource.is_none() {
            stored.resource =
                Some(serde_json::json!({"availabilityGroup": id, "requiredCapacity": 1}));
        }
        if stored.context.is_none() {
            stored.context = Some(serde_json::Map::new());
        }
        let payload =
            serde_json::to_value(&stored).map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
        let record = TaskRecord {
            id: id.clone(),
            task_type,
            group_id: stored.group_id.clone().unwrap_or_else(|| id.clone()),
            data_source: spec.data_source().to_string(),
            created_ms: now,
            queue_insertion_ms: now,
            status: TaskState::Running,
            runner_status: RunnerStatus::Waiting,
            duration_ms: -1,
            error_msg: None,
            location: TaskLocation::unknown(),
            payload,
        };
        self.metadata
            .insert_task(&record)
            .await
            .map_err(|e| match e {
                MetadataError::Conflict(m) => OverlordError::Conflict(m),
                other => other.into(),
            })?;
        let stats = Arc::new(RowStats::new());
        let cancel = self.shutdown.child_token();
        self.live.lock().expect("live lock").insert(
            id.clone(),
            LiveTask {
                cancel: cancel.clone(),
                stats: Arc::clone(&stats),
                runner_status: RunnerStatus::Waiting,
            },
        );
        let this = Arc::clone(self);
        let span = tracing::info_span!("task", task_id = %id);
        let task_id = id.clone();
        self.tracker.spawn(
            async move {
                this.run(task_id, stored, record.created_ms, cancel, stats)
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
        spec: IndexTaskSpec,
        created_ms: i64,
        cancel: CancellationToken,
        stats: Arc<RowStats>,
    ) {
        tracing::info!(data_source = spec.data_source(), task_type = %spec.task_type, "task submitted");
        let started = Instant::now();
        let outcome = self.run_phases(&id, &spec, &cancel, &stats).await;
        let (status, error) = match &outcome {
            Ok(n) => {
                tracing::info!(
                    segments = n,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "task succeeded"
                );
                (TaskState::Success, None)
            }
            Err(e) => {
                tracing::error!(error = %e, "task failed");
                (TaskState::Failed, Some(e.to_string()))
            }
        };
        if outcome.is_ok() {
            // Make the new segments visible to queries before the task reports SUCCESS, so a
            // client that saw SUCCESS always reads its data.
            if let Err(e) = self.view.refresh_data_source(spec.data_source()).await {
                tracing::warn!(error = %e, "cannot refresh timeline after publish");
            }
            self.preload(spec.data_source()).await;
        }
        let report = stats.report(&id, error.as_deref());
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

    async fn run_phases(
        &self,
        id: &str,
        spec: &IndexTaskSpec,
        cancel: &CancellationToken,
        stats: &Arc<RowStats>,
    ) -> Result<usize, IngestError> {
        // WAITING: locks.
        let version = self.acquire_locks(id, spec, cancel).await?;
        tracing::info!(version = %version, "acquired locks");
        // PENDING: a slot.
        self.set_status(id, RunnerStatus::Pending).await;
        let _permit = tokio::select! {
            p = Arc::clone(&self.slots).acquire_owned() => p.map_err(|_| IngestError::Canceled)?,
            _ = cancel.cancelled() => return Err(IngestError::Canceled),
        };
        // RUNNING.
        self.set_status(id, RunnerStatus::Running).await;
        let env = IndexTaskEnv {
            task_id: id.to_string(),
            work_dir: self.config.work_dir.join(id),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            cancel: cancel.clone(),
            stats: Arc::clone(stats),
            lock_version: version,
        };
        let segments = run_index_task(&env, spec).await?;
        Ok(segments.len())
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

    async fn acquire_locks(
        &self,
        id: &str,
        spec: &IndexTaskSpec,
        cancel: &CancellationToken,
    ) -> Result<String, IngestError> {
        let ds = spec.data_source().to_string();
        let exclusive = !spec.spec.io_config.append_to_existing;
        let intervals = Self::lock_intervals(spec);
        loop {
            let notified = self.lock_released.notified();
            {
                let mut held = self.locks.lock().expect("lock table");
                let conflict = held.iter().any(|h| {
                    h.task_id != id
                        && h.data_source == ds
                        && (h.exclusive || exclusive)
                        && intervals.iter().any(|i| i.overlaps(&h.interval))
                });
                if !conflict {
                    for iv in &intervals {
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
        // Version: now, bumped past every version already used in the locked intervals.
        let mut v = now_millis();
        for iv in &intervals {
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
            return Ok(live.stats.report(id, None));
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

/// A task id as Druid makes them: `<type>_<dataSource>_<8 random letters>_<ISO time>`.
pub fn generate_task_id(task_type: &str, data_source: &str, now_ms: i64) -> String {
    let mut rng = rand::rng();
    let suffix: String = (0..8)
        .map(|_| (b'a' + rng.random_range(0..26u8)) as char)
        .collect();
    format!(
        "{task_type}_{data_source}_{suffix}_{}",
        format_iso_millis(now_ms)
    )
}
