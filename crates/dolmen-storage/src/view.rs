//! The live view of every datasource: the timeline of its published segments plus the hydrants
//! of its running streaming tasks.
//!
//! # Realtime data (Druid's `Sink`, `FireHydrant`, `SinkQuerySegmentWalker`)
//!
//! A streaming task turns the rows it read into small immutable segment files every few hundred
//! milliseconds; each such file is a [`Hydrant`]. The task registers its hydrants here with
//! [`SegmentView::add_hydrants`], under a *sink*: the unit that is later published as segments
//! (the supervisor's task group). Several tasks may be replicas of one sink and read the same
//! rows; queries show the hydrants of exactly one of them (the first registered one still
//! present), so replicas never double count, and the others take over when it is dropped.
//!
//! When the task publishes, [`SegmentView::handoff`] commits the segments and, under one write
//! lock, installs the datasource's new timeline and removes the hydrants the segments were built
//! from. Every reader takes a [`DataSourceSnapshot`] (timeline and hydrants read under one read
//! lock), so a query sees either the hydrants or the segments built from them, never both and
//! never neither.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use dolmen_common::Interval;
use dolmen_metadata::MetadataStore;
use dolmen_segment::{DataSegment, SegmentColumn, Timeline};

use crate::StorageError;

/// A queryable piece of a streaming task's data that is not published yet (Druid's
/// `FireHydrant`): an immutable local segment file in the format batch ingestion writes
/// (`__time` as timestamp ms, then `columns`; extra hidden columns are ignored).
///
/// The file must stay readable while any query may hold a snapshot listing it: a query plans
/// against a snapshot taken before a handoff or a drop and may open the file afterwards.
#[derive(Debug, Clone, PartialEq)]
pub struct Hydrant {
    /// Time range of its rows (a covering range is fine, e.g. the time chunk); used to skip
    /// the file when a query's `__time` filters exclude it.
    pub interval: Interval,
    /// Local Parquet segment file (a relative path is taken relative to the process's current
    /// directory).
    pub path: PathBuf,
    /// Exact number of rows in the file: an unfiltered `COUNT(*)` is answered from it without
    /// reading the file.
    pub num_rows: u64,
    /// Exact file size, bytes (the Parquet reader finds the footer with it).
    pub size: u64,
    /// The file's columns after `__time`, as a published segment's payload lists them.
    pub columns: Vec<SegmentColumn>,
    /// Position of the hydrant in its task's stream of hydrants: increasing per task, and
    /// comparable across the replicas of a sink (hydrant `n` of every replica ends at the same
    /// stream position), since [`SegmentView::handoff`] removes hydrants by sequence.
    pub sequence: u64,
}

/// What a query plans against: one datasource's timeline and its visible hydrants, read under
/// one lock, so a handoff is seen entirely or not at all.
#[derive(Debug, Clone)]
pub struct DataSourceSnapshot {
    /// Visible published segments that this process serves (the coordinator's unloaded ones
    /// left out); empty when the datasource has only hydrants so far.
    pub timeline: Arc<Timeline>,
    /// Every visible used segment, those the coordinator left unloaded included: what a query
    /// from deep storage reads (Druid's statements read segments kept only in deep storage).
    pub all_used: Arc<Timeline>,
    /// Hydrants of one replica per sink (ordered by sink id, then sequence). Their rows are
    /// in addition to the timeline's: hydrants are never overshadowed by segments.
    pub hydrants: Arc<[Arc<Hydrant>]>,
}

/// What the coordinator decided for one used, non-overshadowed segment (Druid's replication
/// status of the segment): the replicas its load rule asks for per tier and whether this process
/// serves it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SegmentLoad {
    /// Replicas the matching load rule asks for, per tier (empty for broadcast rules).
    pub required: BTreeMap<String, u32>,
    /// True when this process serves the segment to queries.
    pub loaded: bool,
    /// Matched by a broadcast rule (loaded on every server).
    pub broadcast: bool,
}

impl SegmentLoad {
    /// Total replicas required over all tiers (Druid's `replication_factor`); 1 for a
    /// broadcast segment (this process is every server).
    pub fn replication_factor(&self) -> u32 {
        if self.broadcast {
            1
        } else {
            self.required.values().sum()
        }
    }

    /// Replicas still missing on `tier`, given whether this process (at most one replica) is
    /// on that tier and serves the segment: Druid's under-replication count.
    pub fn missing_on(&self, tier: &str, served_here: bool) -> u32 {
        let want = self.required.get(tier).copied().unwrap_or(0);
        want.saturating_sub(u32::from(served_here))
    }
}

/// The coordinator's decisions of its last run ([`SegmentView::set_load_decisions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadDecisions {
    /// Per segment id; used segments absent here were not evaluated yet.
    pub segments: HashMap<String, SegmentLoad>,
    /// The "now" of the run that made them, ms; `None` before the first run.
    pub evaluated_at: Option<i64>,
}

/// One task registered for a sink.
#[derive(Debug)]
struct Replica {
    task_id: String,
    /// Sorted by sequence; the files of one hydrant share its sequence.
    hydrants: Vec<Arc<Hydrant>>,
}

/// A sink: the replicas registered for it, in registration order (the first is visible).
#[derive(Debug, Default)]
struct Sink {
    replicas: Vec<Replica>,
    /// Highest sequence handed off so far; hydrants at or below it are not registered again.
    handed_off: Option<u64>,
}

/// The realtime part of one datasource.
#[derive(Debug, Default)]
struct Realtime {
    sinks: BTreeMap<String, Sink>,
    /// The hydrants queries see, recomputed after every change.
    visible: Arc<[Arc<Hydrant>]>,
}

impl Realtime {
    fn recompute(&mut self) {
        self.visible = self
            .sinks
            .values()
            .filter_map(|s| s.replicas.first())
            .flat_map(|r| r.hydrants.iter().cloned())
            .collect();
    }
}

/// Everything readers see, behind one lock.
#[derive(Debug, Default)]
struct ViewState {
    /// Every used segment's timeline (what the metadata store says is visible).
    timelines: HashMap<String, Arc<Timeline>>,
    /// What queries read: `timelines` without the segments in `unloaded`.
    served: HashMap<String, Arc<Timeline>>,
    /// Ids of used segments the coordinator decided not to load (see
    /// [`SegmentView::set_load_decisions`]).
    unloaded: Arc<HashSet<String>>,
    /// The coordinator's last decisions.
    decisions: Arc<LoadDecisions>,
    realtime: HashMap<String, Realtime>,
}

impl ViewState {
    /// Installs a datasource's timeline from its used segments (none: the datasource has no
    /// published data).
    fn install(&mut self, data_source: &str, segments: Vec<DataSegment>) {
        if segments.is_empty() {
            self.timelines.remove(data_source);
        } else {
            self.timelines.insert(
                data_source.to_string(),
                Arc::new(Timeline::build(segments.into_iter().map(Arc::new))),
            );
        }
        self.recompute_served(data_source);
    }

    /// Recomputes the served timeline of one datasource (shared with `timelines` when none of
    /// its segments is unloaded).
    fn recompute_served(&mut self, data_source: &str) {
        let Some(t) = self.timelines.get(data_source) else {
            self.served.remove(data_source);
            return;
        };
        let unloaded = &self.unloaded;
        let any_unloaded = !unloaded.is_empty()
            && t.entries()
                .iter()
                .any(|e| e.segments.iter().any(|s| unloaded.contains(&s.identifier)));
        let served = if any_unloaded {
            Arc::new(t.filtered(|s| !unloaded.contains(&s.identifier)))
        } else {
            Arc::clone(t)
        };
        self.served.insert(data_source.to_string(), served);
    }
}

/// The live view: one timeline snapshot per datasource, rebuilt from the metadata store's used
/// segments, plus the hydrants of running streaming tasks (see the module docs).
///
/// Readers take an `Arc<Timeline>` (or a [`DataSourceSnapshot`]) and keep planning against it
/// even if a publish replaces it meanwhile. Refreshes and handoffs run one at a time (read from
/// the metadata store, then install), so a refresh that read older state can never install its
/// snapshot after a newer one, and cannot install a handoff's segments before its hydrants go.
#[derive(Debug)]
pub struct SegmentView {
    metadata: Arc<dyn MetadataStore>,
    state: RwLock<ViewState>,
    refreshing: tokio::sync::Mutex<()>,
    /// Bumped under the write lock by every change readers could see.
    generation: AtomicU64,
}

/// How often [`SegmentView::handoff`] tries to re-read the used segments after a publish.
const HANDOFF_READ_ATTEMPTS: u32 = 3;

impl SegmentView {
    /// An empty view over `metadata`; call [`SegmentView::refresh`] to fill it.
    pub fn new(metadata: Arc<dyn MetadataStore>) -> SegmentView {
        SegmentView {
            metadata,
            state: RwLock::new(ViewState::default()),
            refreshing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    /// A number that changes whenever the view does (a refresh, a handoff, hydrants added,
    /// replaced or dropped). Something computed from the view after reading generation `g`
    /// is current for as long as `generation()` still returns `g`.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The write lock, with the generation bumped (while it is held, so a reader that sees
    /// the new generation sees the change once it can read).
    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, ViewState> {
        let guard = self.state.write().expect("view lock");
        self.generation.fetch_add(1, Ordering::AcqRel);
        guard
    }

    /// Rebuilds every timeline from the used segments in the metadata store; hydrants stay.
    ///
    /// # Errors
    /// When the metadata store fails; the previous snapshots stay in place.
    pub async fn refresh(&self) -> Result<(), StorageError> {
        let _one_at_a_time = self.refreshing.lock().await;
        let segments = self.metadata.all_used_segments().await?;
        let mut by_ds: HashMap<String, Vec<Arc<DataSegment>>> = HashMap::new();
        for s in segments {
            by_ds
                .entry(s.data_source.clone())
                .or_default()
                .push(Arc::new(s));
        }
        let timelines = by_ds
            .into_iter()
            .map(|(ds, segs)| (ds, Arc::new(Timeline::build(segs))))
            .collect();
        let mut state = self.write_state();
        state.timelines = timelines;
        state.served.clear();
        let names: Vec<String> = state.timelines.keys().cloned().collect();
        for ds in names {
            state.recompute_served(&ds);
        }
        Ok(())
    }

    /// Installs the coordinator's decisions. Segments it decided not to load (a load rule with
    /// no replicas on this process's tier) leave the query path ([`SegmentView::snapshot`]
    /// skips them) while [`SegmentView::timeline`] still lists them as used. Replaces the
    /// previous decisions; segments published later are served until the coordinator decides.
    pub fn set_load_decisions(&self, decisions: LoadDecisions) {
        let unloaded: Arc<HashSet<String>> = Arc::new(
            decisions
                .segments
                .iter()
                .filter(|(_, l)| !l.loaded)
                .map(|(id, _)| id.clone())
                .collect(),
        );
        let decisions = Arc::new(decisions);
        {
            let mut state = self.state.write().expect("view lock");
            state.decisions = Arc::clone(&decisions);
            if *state.unloaded == *unloaded {
                return;
            }
        }
        let mut state = self.write_state();
        state.unloaded = unloaded;
        let names: Vec<String> = state.timelines.keys().cloned().collect();
        for ds in names {
            state.recompute_served(&ds);
        }
    }

    /// The coordinator's last decisions.
    pub fn load_decisions(&self) -> Arc<LoadDecisions> {
        Arc::clone(&self.state.read().expect("view lock").decisions)
    }

    /// True when queries read the segment with this id (it is not in the unloaded set; whether
    /// it is used and visible is the timeline's business).
    pub fn is_loaded(&self, segment_id: &str) -> bool {
        !self
            .state
            .read()
            .expect("view lock")
            .unloaded
            .contains(segment_id)
    }

    /// Rebuilds one datasource's timeline; its hydrants stay.
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn refresh_data_source(&self, data_source: &str) -> Result<(), StorageError> {
        let _one_at_a_time = self.refreshing.lock().await;
        let segs = self.metadata.used_segments(data_source, None).await?;
        self.write_state().install(data_source, segs);
        Ok(())
    }

    /// The current timeline snapshot of a datasource (published segments only).
    pub fn timeline(&self, data_source: &str) -> Option<Arc<Timeline>> {
        self.state
            .read()
            .expect("view lock")
            .timelines
            .get(data_source)
            .cloned()
    }

    /// The timeline and the visible hydrants of a datasource, taken under one read lock; `None`
    /// when it has neither visible segments nor visible hydrants. A datasource whose segments
    /// the coordinator all left unloaded still has a snapshot (its columns are known, as with
    /// Druid's centralized datasource schema): plain queries see no rows, queries from deep
    /// storage read [`DataSourceSnapshot::all_used`].
    pub fn snapshot(&self, data_source: &str) -> Option<DataSourceSnapshot> {
        let state = self.state.read().expect("view lock");
        let timeline = state.served.get(data_source).cloned();
        let all_used = state
            .timelines
            .get(data_source)
            .filter(|t| !t.is_empty())
            .cloned();
        let hydrants = state
            .realtime
            .get(data_source)
            .map(|r| Arc::clone(&r.visible))
            .filter(|h| !h.is_empty());
        drop(state);
        if all_used.is_none() && hydrants.is_none() {
            return None;
        }
        let empty = || Arc::new(Timeline::build(std::iter::empty()));
        Some(DataSourceSnapshot {
            all_used: all_used.unwrap_or_else(empty),
            timeline: timeline.unwrap_or_else(empty),
            hydrants: hydrants.unwrap_or_else(|| Arc::from(Vec::new())),
        })
    }

    /// Datasources with visible used segments (served or not) or visible hydrants, sorted.
    pub fn data_sources(&self) -> Vec<String> {
        let state = self.state.read().expect("view lock");
        let mut v: Vec<String> = state
            .timelines
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(k, _)| k.clone())
            .chain(
                state
                    .realtime
                    .iter()
                    .filter(|(_, r)| !r.visible.is_empty())
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Per datasource with visible segments: how many segments are visible (used, published,
    /// not overshadowed) and their total size in bytes, sorted by datasource. Hydrants are not
    /// segments and are not counted.
    pub fn segment_stats(&self) -> Vec<(String, u64, u64)> {
        let timelines: Vec<(String, Arc<Timeline>)> = self
            .state
            .read()
            .expect("view lock")
            .timelines
            .iter()
            .map(|(k, t)| (k.clone(), Arc::clone(t)))
            .collect();
        let mut out: Vec<(String, u64, u64)> = timelines
            .into_iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(ds, t)| {
                let segs = t.visible_segments();
                (ds, segs.len() as u64, segs.iter().map(|s| s.size).sum())
            })
            .collect();
        out.sort();
        out
    }

    /// Registers hydrants of `task_id`, a replica of sink `sink_id` (the supervisor's task
    /// group, e.g. `<supervisorId>/<groupId>/<n>`) of `data_source`; queries that start
    /// afterwards see them if the task is the sink's visible replica.
    ///
    /// Queries show the hydrants of one replica per sink: the first task that registered for the
    /// sink and has not been dropped ([`SegmentView::drop_task_hydrants`]). The other replicas'
    /// hydrants are kept so that one of them can take over when the first is dropped. A hydrant
    /// with the sequence of one the task already registered replaces it; one with a sequence at
    /// or below the sink's last handoff is ignored (its rows are published already).
    pub fn add_hydrants(
        &self,
        data_source: &str,
        sink_id: &str,
        task_id: &str,
        hydrants: Vec<Hydrant>,
    ) {
        let mut state = self.write_state();
        let realtime = state.realtime.entry(data_source.to_string()).or_default();
        let sink = realtime.sinks.entry(sink_id.to_string()).or_default();
        let replica = match sink.replicas.iter().position(|r| r.task_id == task_id) {
            Some(i) => &mut sink.replicas[i],
            None => {
                sink.replicas.push(Replica {
                    task_id: task_id.to_string(),
                    hydrants: Vec::new(),
                });
                sink.replicas.last_mut().expect("just pushed")
            }
        };
        for h in hydrants {
            if sink.handed_off.is_some_and(|up_to| h.sequence <= up_to) {
                tracing::debug!(
                    data_source,
                    sink_id,
                    task_id,
                    sequence = h.sequence,
                    "ignoring hydrant already handed off"
                );
                continue;
            }
            // One hydrant may be several files (rows of several time chunks) sharing a
            // sequence; the same file registered again replaces the earlier registration.
            if let Some(i) = replica
                .hydrants
                .iter()
                .position(|x| x.sequence == h.sequence && x.path == h.path)
            {
                replica.hydrants[i] = Arc::new(h);
            } else {
                let i = replica
                    .hydrants
                    .partition_point(|x| x.sequence <= h.sequence);
                replica.hydrants.insert(i, Arc::new(h));
            }
        }
        realtime.recompute();
    }

    /// Replaces, in one step, the hydrants of `task_id` in sink `sink_id` whose sequences lie in
    /// `replaced` with `merged` (a task merging its small hydrants into a larger one: the same
    /// rows, fewer files). Queries see either the old files or the merged ones, never both.
    /// `merged` should carry sequences inside `replaced` (usually its end), so a later handoff
    /// up to that sequence removes them.
    pub fn replace_hydrants(
        &self,
        data_source: &str,
        sink_id: &str,
        task_id: &str,
        replaced: std::ops::RangeInclusive<u64>,
        merged: Vec<Hydrant>,
    ) {
        let mut state = self.write_state();
        let Some(realtime) = state.realtime.get_mut(data_source) else {
            return;
        };
        let Some(sink) = realtime.sinks.get_mut(sink_id) else {
            return;
        };
        let Some(replica) = sink.replicas.iter_mut().find(|r| r.task_id == task_id) else {
            return;
        };
        replica.hydrants.retain(|h| !replaced.contains(&h.sequence));
        for h in merged {
            if sink.handed_off.is_some_and(|up_to| h.sequence <= up_to) {
                continue;
            }
            let i = replica
                .hydrants
                .partition_point(|x| x.sequence <= h.sequence);
            replica.hydrants.insert(i, Arc::new(h));
        }
        realtime.recompute();
    }

    /// Forgets everything `task_id` registered for `data_source` (the task failed, stopped
    /// without publishing, or finished after its handoff). If it was a sink's visible replica,
    /// the next registered replica of that sink becomes visible.
    pub fn drop_task_hydrants(&self, data_source: &str, task_id: &str) {
        let mut state = self.write_state();
        let Some(realtime) = state.realtime.get_mut(data_source) else {
            return;
        };
        for sink in realtime.sinks.values_mut() {
            sink.replicas.retain(|r| r.task_id != task_id);
        }
        realtime.sinks.retain(|_, s| !s.replicas.is_empty());
        if realtime.sinks.is_empty() {
            state.realtime.remove(data_source);
        } else {
            realtime.recompute();
        }
    }

    /// Atomic handoff of a sink's data from its hydrants to published segments.
    ///
    /// Runs `publish` (the metadata-store commit of the segments built from the sink's hydrants
    /// up to sequence `up_to`). If it succeeds, re-reads the datasource's used segments and, in
    /// one write-lock section, installs the new timeline and removes the hydrants of the sink
    /// with sequence `<= up_to` of every replica (later hydrants, read after the published
    /// rows, stay). A query therefore sees the rows either in the hydrants or in the segments.
    /// Refreshes wait for the whole handoff, so none can install the new segments while the
    /// hydrants are still there.
    ///
    /// If re-reading the segments fails even after retries, the hydrants are removed anyway and
    /// the old timeline stays until the next refresh: the rows are missing from queries for a
    /// while, rather than counted twice later. The publish's result is still returned.
    ///
    /// Not cancellation safe: dropping the future after `publish` committed leaves the
    /// hydrants in place, and the next refresh then shows both. Run it to completion (in its own
    /// task if the caller may be cancelled).
    ///
    /// # Errors
    /// `publish`'s error; nothing in the view changes then.
    pub async fn handoff<T, E, F>(
        &self,
        data_source: &str,
        sink_id: &str,
        up_to: u64,
        publish: F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let _one_at_a_time = self.refreshing.lock().await;
        let published = publish.await?;
        let mut segments = None;
        for attempt in 1..=HANDOFF_READ_ATTEMPTS {
            match self.metadata.used_segments(data_source, None).await {
                Ok(s) => {
                    segments = Some(s);
                    break;
                }
                Err(e) => {
                    tracing::warn!(
                        data_source,
                        sink_id,
                        attempt,
                        error = %e,
                        "cannot read used segments after handoff publish"
                    );
                    if attempt < HANDOFF_READ_ATTEMPTS {
                        tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                    }
                }
            }
        }
        let mut state = self.write_state();
        if let Some(segments) = segments {
            state.install(data_source, segments);
        }
        if let Some(realtime) = state.realtime.get_mut(data_source) {
            if let Some(sink) = realtime.sinks.get_mut(sink_id) {
                for r in &mut sink.replicas {
                    r.hydrants.retain(|h| h.sequence > up_to);
                }
                sink.handed_off = Some(sink.handed_off.map_or(up_to, |h| h.max(up_to)));
            }
            realtime.recompute();
        }
        Ok(published)
    }
}

#[cfg(test)]
mod tests;
