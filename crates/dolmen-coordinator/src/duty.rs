//! The coordinator loop and its duties (Druid's `DruidCoordinator` with `RunRules`,
//! `MarkOvershadowedSegmentsAsUnused` and the load decisions of `StrategicSegmentAssigner`,
//! reduced to one process that serves one tier).
//!
//! Each run, unless `pauseCoordination` is set:
//! 1. reads every used segment, the rules and the dynamic config from the metadata store;
//! 2. gives every used, non-overshadowed segment to the first rule of its datasource's rules
//!    followed by the `_default` rules that applies at "now" ([`Rule::applies_to`]);
//! 3. marks the segments of drop rules unused, in one transaction per datasource;
//! 4. once the coordinator has run for `millisToWaitBeforeDeleting`, marks overshadowed
//!    segments unused;
//! 5. decides what this process serves: a load rule with at least one replica on this
//!    process's tier (`service.server.tier`) or a broadcast rule loads the segment; a load
//!    rule with no replica here leaves it used but unloaded, so plain queries skip it
//!    ([`SegmentView::set_unloaded`]); a segment no rule matches is left as it is (served);
//! 6. records the assignments ([`SegmentAssignments`]): required replicas per tier, replicas
//!    loaded, for load status and `sys.segments`.
//!
//! Every change is a metadata transaction and the next run recomputes everything from the
//! store, so a crash in the middle of a run loses nothing: the next run finishes the work.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dolmen_metadata::MetadataStore;
use dolmen_segment::{DataSegment, Timeline};
use dolmen_storage::{LoadDecisions, SegmentLoad, SegmentView};
use tokio_util::sync::CancellationToken;

use crate::config::{COORDINATOR_CONFIG_KEY, CoordinatorDynamicConfig};
use crate::rules::{DEFAULT_RULES_KEY, Rule, RuleAction, parse_stored};

/// The source of "now", ms since the epoch (injectable so tests control rule periods).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Start-up settings of the coordinator (runtime properties).
#[derive(Clone)]
pub struct CoordinatorOptions {
    /// `service.coordinator.startDelay` (Druid's default PT300S): wait before the first run.
    pub start_delay: Duration,
    /// `service.coordinator.period` (default PT60S): time between runs.
    pub period: Duration,
    /// `service.server.tier` (default `_default_tier`): the tier this process serves.
    pub tier: String,
    /// The clock rules are evaluated against.
    pub clock: Clock,
    /// Auto-kill (`service.coordinator.kill.on` and the rest); `None` when off.
    pub kill: Option<crate::kill::KillSettings>,
    /// Audit log cleanup (`service.coordinator.kill.audit.*`; default on, daily, keeping 90 days);
    /// `None` when off.
    pub audit_cleanup: Option<Retention>,
    /// Cleanup of the rules of datasources without segments (`service.coordinator.kill.rule.*`;
    /// default on, daily, keeping 90 days); `None` when off.
    pub rules_cleanup: Option<Retention>,
}

/// A metadata cleanup duty's schedule and retention (Druid's `MetadataCleanupConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// How often it runs (`period`, default P1D).
    pub period: Duration,
    /// What is kept (`durationToRetain`, default P90D).
    pub duration_to_retain: dolmen_common::Period,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            period: Duration::from_secs(24 * 3600),
            duration_to_retain: dolmen_common::Period::parse("P90D").expect("constant period"),
        }
    }
}

impl std::fmt::Debug for CoordinatorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorOptions")
            .field("start_delay", &self.start_delay)
            .field("period", &self.period)
            .field("tier", &self.tier)
            .field("kill", &self.kill)
            .field("audit_cleanup", &self.audit_cleanup)
            .field("rules_cleanup", &self.rules_cleanup)
            .finish_non_exhaustive()
    }
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        CoordinatorOptions {
            start_delay: Duration::from_secs(300),
            period: Duration::from_secs(60),
            tier: crate::rules::DEFAULT_TIER.to_string(),
            clock: Arc::new(dolmen_common::time::now_millis),
            kill: None,
            audit_cleanup: Some(Retention::default()),
            rules_cleanup: Some(Retention::default()),
        }
    }
}

/// What one run did (for logs and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// True when `pauseCoordination` skipped the run.
    pub paused: bool,
    /// Segments marked unused by drop rules.
    pub dropped: u64,
    /// Overshadowed segments marked unused.
    pub overshadowed_unused: u64,
    /// Used segments left unloaded (no replica on this tier).
    pub unloaded: u64,
    /// Segments no rule matched.
    pub unmatched: u64,
    /// Kill tasks submitted by auto-kill.
    pub kill_tasks: u64,
    /// Audit entries deleted by the audit cleanup.
    pub audit_deleted: u64,
    /// Datasources whose rules the rules cleanup deleted.
    pub rules_deleted: u64,
}

/// The coordinator: runs the duties on a schedule and holds the last assignments.
pub struct Coordinator {
    metadata: Arc<dyn MetadataStore>,
    view: Arc<SegmentView>,
    options: CoordinatorOptions,
    started_ms: i64,
    run_lock: tokio::sync::Mutex<()>,
    trigger: tokio::sync::Notify,
    runs: AtomicU64,
    kill_submitter: std::sync::OnceLock<Arc<dyn crate::kill::KillTaskSubmitter>>,
    /// When auto-kill last ran (clock ms).
    last_kill: std::sync::Mutex<Option<i64>>,
    /// When the audit and rules cleanups last ran (clock ms).
    last_cleanup: std::sync::Mutex<[Option<i64>; 2]>,
    /// The segment cache this process serves from (set by the binary).
    cache: std::sync::OnceLock<Arc<dolmen_storage::SegmentCache>>,
    /// Segments the previous run decided not to serve: their cached copies are removed by the
    /// next run if it still does not serve them (a period's grace for queries planned before).
    evict_candidates: std::sync::Mutex<HashMap<String, Arc<DataSegment>>>,
}

/// Most segments one run fetches into the segment cache (Druid's
/// `maxSegmentsInNodeLoadingQueue` default).
const MAX_LOADS_PER_RUN: usize = 500;

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("options", &self.options)
            .field("runs", &self.runs)
            .finish_non_exhaustive()
    }
}

/// Errors of a coordinator run.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The metadata store failed.
    #[error(transparent)]
    Metadata(#[from] dolmen_metadata::MetadataError),
    /// The segment view could not be refreshed.
    #[error(transparent)]
    Storage(#[from] dolmen_storage::StorageError),
}

impl Coordinator {
    /// A coordinator over the metadata store and the live view. Stores the initial `_default`
    /// rules (`loadForever`, 2 replicas on `_default_tier`) when none exist.
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn new(
        metadata: Arc<dyn MetadataStore>,
        view: Arc<SegmentView>,
        options: CoordinatorOptions,
    ) -> Result<Arc<Coordinator>, CoordinatorError> {
        metadata
            .init_rules(
                DEFAULT_RULES_KEY,
                &crate::rules::rules_to_json(&crate::rules::initial_default_rules()),
            )
            .await?;
        let started_ms = (options.clock)();
        Ok(Arc::new(Coordinator {
            metadata,
            view,
            options,
            started_ms,
            run_lock: tokio::sync::Mutex::new(()),
            trigger: tokio::sync::Notify::new(),
            runs: AtomicU64::new(0),
            kill_submitter: std::sync::OnceLock::new(),
            last_kill: std::sync::Mutex::new(None),
            last_cleanup: std::sync::Mutex::new([None, None]),
            cache: std::sync::OnceLock::new(),
            evict_candidates: std::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// Sets what auto-kill submits kill tasks through (the overlord); without it auto-kill does
    /// nothing. Only the first call counts.
    pub fn set_kill_submitter(&self, submitter: Arc<dyn crate::kill::KillTaskSubmitter>) {
        let _ = self.kill_submitter.set(submitter);
    }

    /// Sets the segment cache: each run then fetches the segments it serves into it (as a
    /// historical loads what the coordinator assigns) and removes the copies of segments it
    /// no longer serves. Only the first call counts.
    pub fn set_segment_cache(&self, cache: Arc<dolmen_storage::SegmentCache>) {
        let _ = self.cache.set(cache);
    }

    /// The tier this process serves.
    pub fn tier(&self) -> &str {
        &self.options.tier
    }

    /// The decisions of the last run (also installed in the view).
    pub fn assignments(&self) -> Arc<LoadDecisions> {
        self.view.load_decisions()
    }

    /// How many runs completed (paused ones included).
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Acquire)
    }

    /// Asks the loop for a run now instead of at the end of the period.
    pub fn trigger(&self) {
        self.trigger.notify_one();
    }

    /// Runs the duties every period after the start delay until `cancel` fires. A failed run
    /// is logged and retried at the next period.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(self.options.start_delay) => {}
        }
        loop {
            match self.run_once().await {
                Ok(stats) if stats != RunStats::default() => {
                    tracing::info!(?stats, "coordinator run");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "coordinator run failed; retrying next period")
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(self.options.period) => {}
                () = self.trigger.notified() => {}
            }
        }
    }

    /// One run of every duty (see the module docs), at the clock's "now".
    ///
    /// # Errors
    /// When the metadata store fails; nothing half-done is lost (every change is its own
    /// transaction and the next run starts over from the store).
    pub async fn run_once(&self) -> Result<RunStats, CoordinatorError> {
        let _one = self.run_lock.lock().await;
        let stats = self.run_duties().await;
        self.runs.fetch_add(1, Ordering::AcqRel);
        stats
    }

    async fn run_duties(&self) -> Result<RunStats, CoordinatorError> {
        let config = CoordinatorDynamicConfig::from_stored(
            self.metadata.config(COORDINATOR_CONFIG_KEY).await?.as_ref(),
        );
        if config.pause_coordination() {
            return Ok(RunStats {
                paused: true,
                ..RunStats::default()
            });
        }
        let now = (self.options.clock)();
        let stored_rules = self.metadata.rules().await?;
        let mut rules: HashMap<String, Vec<Rule>> = HashMap::new();
        for (ds, rec) in &stored_rules {
            match parse_stored(&rec.rules) {
                Ok(r) => {
                    rules.insert(ds.clone(), r);
                }
                Err(e) => {
                    tracing::error!(datasource = %ds, error = %e, "stored rules do not parse; skipping them")
                }
            }
        }
        let defaults = rules.get(DEFAULT_RULES_KEY).cloned().unwrap_or_default();

        let mut by_ds: BTreeMap<String, Vec<Arc<DataSegment>>> = BTreeMap::new();
        for s in self.metadata.all_used_segments().await? {
            by_ds
                .entry(s.data_source.clone())
                .or_default()
                .push(Arc::new(s));
        }

        let mut stats = RunStats::default();
        let mut assignments = HashMap::new();
        // What this run serves, and what it stopped serving (dropped, overshadowed and
        // marked unused, or left unloaded), for the segment cache.
        let mut to_load: Vec<Arc<DataSegment>> = Vec::new();
        let mut not_served: HashMap<String, Arc<DataSegment>> = HashMap::new();
        let mut unloaded = 0u64;
        let mut changed: Vec<String> = Vec::new();
        let overshadow_ok = now - self.started_ms >= config.millis_to_wait_before_deleting();
        for (ds, segments) in by_ds {
            let timeline = Timeline::build(segments.iter().cloned());
            let ds_rules: Vec<&Rule> = rules
                .get(&ds)
                .into_iter()
                .flatten()
                .chain(defaults.iter())
                .collect();
            let mut drop_ids = Vec::new();
            let mut overshadowed_ids = Vec::new();
            let mut unmatched = 0u64;
            for seg in &segments {
                if timeline.is_overshadowed(&seg.id()) {
                    overshadowed_ids.push(seg.identifier.clone());
                    if overshadow_ok {
                        not_served.insert(seg.identifier.clone(), Arc::clone(seg));
                    }
                    continue;
                }
                let Some(rule) = ds_rules.iter().find(|r| r.applies_to(&seg.interval, now)) else {
                    unmatched += 1;
                    continue;
                };
                match &rule.action {
                    RuleAction::Drop => {
                        drop_ids.push(seg.identifier.clone());
                        not_served.insert(seg.identifier.clone(), Arc::clone(seg));
                    }
                    RuleAction::Broadcast => {
                        to_load.push(Arc::clone(seg));
                        assignments.insert(
                            seg.identifier.clone(),
                            SegmentLoad {
                                required: BTreeMap::new(),
                                loaded: true,
                                broadcast: true,
                            },
                        );
                    }
                    RuleAction::Load {
                        tiered_replicants, ..
                    } => {
                        let here = tiered_replicants
                            .get(&self.options.tier)
                            .copied()
                            .unwrap_or(0);
                        let loaded = here > 0;
                        if loaded {
                            to_load.push(Arc::clone(seg));
                        } else {
                            unloaded += 1;
                            not_served.insert(seg.identifier.clone(), Arc::clone(seg));
                        }
                        assignments.insert(
                            seg.identifier.clone(),
                            SegmentLoad {
                                required: tiered_replicants.clone(),
                                loaded,
                                broadcast: false,
                            },
                        );
                    }
                }
            }
            if unmatched > 0 {
                tracing::warn!(datasource = %ds, segments = unmatched, "No matching retention rule for [{unmatched}] segments in datasource[{ds}]");
                stats.unmatched += unmatched;
            }
            let mut ds_changed = false;
            if !drop_ids.is_empty() {
                let n = self.metadata.mark_segments_unused(&drop_ids).await?;
                tracing::info!("Successfully marked [{n}] segments of datasource[{ds}] as unused");
                stats.dropped += n;
                ds_changed = true;
            }
            if overshadow_ok && !overshadowed_ids.is_empty() {
                let n = self
                    .metadata
                    .mark_segments_unused(&overshadowed_ids)
                    .await?;
                tracing::info!("Marked [{n}] overshadowed segments of datasource[{ds}] as unused");
                stats.overshadowed_unused += n;
                ds_changed = true;
            }
            if ds_changed {
                changed.push(ds);
            }
        }
        stats.unloaded = unloaded;
        self.view.set_load_decisions(LoadDecisions {
            segments: assignments,
            evaluated_at: Some(now),
        });
        for ds in &changed {
            self.view.refresh_data_source(ds).await?;
        }
        if let Some(cache) = self.cache.get() {
            self.manage_cache(cache, &to_load, not_served).await;
        }
        if let (Some(settings), Some(submitter)) = (&self.options.kill, self.kill_submitter.get()) {
            let due = {
                let last = self.last_kill.lock().expect("kill lock");
                last.is_none_or(|t| {
                    now.saturating_sub(t)
                        >= i64::try_from(settings.period.as_millis()).unwrap_or(i64::MAX)
                })
            };
            if due {
                let ids = crate::kill::run_kill(
                    &self.metadata,
                    submitter.as_ref(),
                    settings,
                    &config,
                    now,
                )
                .await?;
                stats.kill_tasks = ids.len() as u64;
                *self.last_kill.lock().expect("kill lock") = Some(now);
            }
        }
        for (slot, retention) in [&self.options.audit_cleanup, &self.options.rules_cleanup]
            .into_iter()
            .enumerate()
        {
            let Some(retention) = retention else {
                continue;
            };
            let due = self.last_cleanup.lock().expect("cleanup lock")[slot].is_none_or(|t| {
                now.saturating_sub(t)
                    >= i64::try_from(retention.period.as_millis()).unwrap_or(i64::MAX)
            });
            if !due {
                continue;
            }
            let before = retention
                .duration_to_retain
                .checked_add_to(now, -1, &dolmen_common::Zone::Utc)
                .unwrap_or(i64::MIN);
            if slot == 0 {
                stats.audit_deleted = self.metadata.delete_audit_before(before).await?;
            } else {
                let gone = self
                    .metadata
                    .delete_rules_of_absent_data_sources(before)
                    .await?;
                if !gone.is_empty() {
                    tracing::info!(datasources = ?gone, "deleted the rules of datasources without segments");
                }
                stats.rules_deleted = gone.len() as u64;
            }
            self.last_cleanup.lock().expect("cleanup lock")[slot] = Some(now);
        }
        Ok(stats)
    }
}

impl Coordinator {
    /// Fetches served segments into the cache (at most [`MAX_LOADS_PER_RUN`] per run) and
    /// removes the copies of segments the previous run already stopped serving and this one
    /// does not serve either. Failures are logged; queries still fetch on demand.
    async fn manage_cache(
        &self,
        cache: &dolmen_storage::SegmentCache,
        to_load: &[Arc<DataSegment>],
        not_served: HashMap<String, Arc<DataSegment>>,
    ) {
        let previous = std::mem::replace(
            &mut *self.evict_candidates.lock().expect("evict lock"),
            not_served,
        );
        let served: std::collections::HashSet<&str> =
            to_load.iter().map(|s| s.identifier.as_str()).collect();
        let still_not_served: Vec<Arc<DataSegment>> = previous
            .into_values()
            .filter(|s| !served.contains(s.identifier.as_str()))
            .collect();
        for seg in still_not_served {
            if cache.is_loaded(&seg)
                && let Err(e) = cache.drop_segment(&seg).await
            {
                tracing::warn!(segment = %seg.identifier, error = %e, "cannot remove a segment from the cache");
            }
        }
        for seg in to_load
            .iter()
            .filter(|s| !cache.is_loaded(s))
            .take(MAX_LOADS_PER_RUN)
        {
            if let Err(e) = cache.ensure_loaded(seg).await {
                tracing::warn!(segment = %seg.identifier, error = %e, "cannot load a segment into the cache");
            }
        }
    }
}

#[cfg(test)]
mod tests;
