//! Automatic compaction (Druid's `CompactSegments` duty and `DataSourceCompactionConfig`;
//! `docs/data-management/automatic-compaction.md`, `docs/api-reference/automatic-compaction-api.md`).
//!
//! **Configuration.** One document, [`COMPACTION_CONFIG_KEY`] (Druid's
//! `coordinator.compaction.config`), holds the cluster settings and every datasource's config
//! ([`CompactionClusterConfig`]); every change stores it together with an audit entry of the
//! same key and type, so the per-datasource history is computed from the audit log
//! ([`datasource_history`]).
//!
//! **The duty** ([`CompactionDuty::run_once`], run every
//! `service.coordinator.period.indexingPeriod`): per datasource with a config, the visible
//! segments are grouped into candidates (one per time chunk, or per bucket of the configured
//! `segmentGranularity`) and visited newest first. A candidate is *skipped* when it overlaps the
//! `skipOffsetFromLatest` window (ending at the end of the newest segment, not now), an interval
//! a running `compact` task works on, or eternity, or when it holds more than
//! `inputSegmentSizeBytes`. It is *compacted* when every segment carries a
//! `lastCompactionState` matching what the config asks for ([`needs_compaction`]), otherwise
//! *awaiting*: a `compact` task is submitted for it while compaction task slots are free
//! (`max(1, min(floor(capacity * compactionTaskSlotRatio), maxCompactionTaskSlots))`, less the
//! running compact tasks; none when `maxCompactionTaskSlots <= 0`), and it then counts as
//! compacted, as in Druid. The counts of the last run are the status snapshots.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dolmen_common::period::Period;
use dolmen_common::time::format_iso_millis;
use dolmen_common::{Granularity, Interval};
use dolmen_ingest::IndexTaskSpec;
use dolmen_metadata::{AuditEntry, MetadataStore, TaskFilter, TaskState};
use dolmen_segment::{DataSegment, Timeline};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::compact::{self, CompactTaskSpec, fill_partition_defaults};
use crate::{Overlord, OverlordError};

/// Configuration name, audit key and audit type of the compaction configuration.
pub const COMPACTION_CONFIG_KEY: &str = "coordinator.compaction.config";

/// Druid's default `taskPriority` of auto-compaction tasks.
pub const DEFAULT_TASK_PRIORITY: i64 = 25;
/// Druid's default `inputSegmentSizeBytes` (100 TB).
pub const DEFAULT_INPUT_SEGMENT_SIZE_BYTES: i64 = 100_000_000_000_000;
/// Druid's default `skipOffsetFromLatest`.
pub const DEFAULT_SKIP_OFFSET: &str = "P1D";
/// Druid's default `compactionTaskSlotRatio`.
pub const DEFAULT_SLOT_RATIO: f64 = 0.1;
/// Druid's default `maxCompactionTaskSlots`.
pub const DEFAULT_MAX_SLOTS: i64 = i32::MAX as i64;

fn d_priority() -> i64 {
    DEFAULT_TASK_PRIORITY
}
fn d_input_size() -> i64 {
    DEFAULT_INPUT_SEGMENT_SIZE_BYTES
}
fn d_skip() -> String {
    DEFAULT_SKIP_OFFSET.to_string()
}
fn d_ratio() -> f64 {
    DEFAULT_SLOT_RATIO
}
fn d_max() -> i64 {
    DEFAULT_MAX_SLOTS
}

/// A datasource's automatic compaction config (the spec's "Automatic compaction configuration";
/// read back with every field, Druid's defaults filled in). Unknown fields are ignored, as
/// Druid does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceCompactionConfig {
    /// The datasource (required).
    pub data_source: String,
    /// Priority of the submitted tasks (default 25).
    #[serde(default = "d_priority")]
    pub task_priority: i64,
    /// Candidates holding more bytes are skipped (default 100000000000000).
    #[serde(default = "d_input_size")]
    pub input_segment_size_bytes: i64,
    /// Rows per compacted segment when `tuningConfig.partitionsSpec` is not given.
    #[serde(default)]
    pub max_rows_per_segment: Option<i64>,
    /// ISO 8601 period before the end of the newest segment left alone (default P1D).
    #[serde(default = "d_skip")]
    pub skip_offset_from_latest: String,
    /// Tuning config of the tasks (`partitionsSpec`, ...).
    #[serde(default)]
    pub tuning_config: Option<Value>,
    /// `segmentGranularity`, `queryGranularity`, `rollup`.
    #[serde(default)]
    pub granularity_spec: Option<Value>,
    /// Dimensions of the compacted segments.
    #[serde(default)]
    pub dimensions_spec: Option<Value>,
    /// Metrics of the compacted segments.
    #[serde(default)]
    pub metrics_spec: Option<Value>,
    /// Transform and filter.
    #[serde(default)]
    pub transform_spec: Option<Value>,
    /// `{"dropExisting": bool}`.
    #[serde(default)]
    pub io_config: Option<Value>,
    /// Context of the submitted tasks.
    #[serde(default)]
    pub task_context: Option<Value>,
}

impl DataSourceCompactionConfig {
    /// Parses a posted config and checks it by building the compact task it would submit.
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] naming the bad field.
    pub fn from_json(v: &Value) -> Result<DataSourceCompactionConfig, OverlordError> {
        if !v.is_object() {
            return Err(OverlordError::InvalidTask(
                "the compaction config must be a JSON object".into(),
            ));
        }
        if v.get("engine").and_then(Value::as_str) == Some("msq") {
            return Err(OverlordError::InvalidTask(
                "engine: MSQ engine is supported only with supervisor-based compaction on the Overlord.".into(),
            ));
        }
        let c: DataSourceCompactionConfig = crate::spec::parse_named(v)?;
        dolmen_ingest::spec::validate_data_source_name(&c.data_source, "dataSource")
            .map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
        c.skip_offset()?;
        if c.input_segment_size_bytes <= 0 {
            return Err(OverlordError::InvalidTask(
                "inputSegmentSizeBytes: must be positive".into(),
            ));
        }
        if let Some(n) = c.max_rows_per_segment
            && n <= 0
        {
            return Err(OverlordError::InvalidTask(
                "maxRowsPerSegment: must be positive".into(),
            ));
        }
        if c.max_rows_per_segment.is_some()
            && c.tuning_config
                .as_ref()
                .is_some_and(|t| t.get("partitionsSpec").is_some_and(|p| !p.is_null()))
        {
            return Err(OverlordError::InvalidTask(
                "maxRowsPerSegment: give it in tuningConfig.partitionsSpec only, not both".into(),
            ));
        }
        let probe = Interval::parse("2000-01-01/2000-01-02").expect("static interval");
        CompactTaskSpec::from_json(&c.task_json("validation", probe))?;
        Ok(c)
    }

    /// `skipOffsetFromLatest` parsed.
    ///
    /// # Errors
    /// When it is not an ISO 8601 period.
    pub fn skip_offset(&self) -> Result<Period, OverlordError> {
        Period::parse(&self.skip_offset_from_latest).map_err(|e| {
            OverlordError::InvalidTask(format!(
                "skipOffsetFromLatest [{}] is invalid: {}",
                self.skip_offset_from_latest, e.0
            ))
        })
    }

    /// The configured `segmentGranularity`, if any.
    pub fn segment_granularity(&self) -> Option<Granularity> {
        let g = self.granularity_spec.as_ref()?.get("segmentGranularity")?;
        if g.is_null() {
            return None;
        }
        Granularity::from_json(g).ok()
    }

    /// The `compact` task this config submits for `interval` (Druid's `ClientCompactionTaskQuery`).
    pub fn task_json(&self, id: &str, interval: Interval) -> Value {
        let mut tuning = self
            .tuning_config
            .clone()
            .filter(|t| !t.is_null())
            .unwrap_or_else(|| json!({"type": "index_parallel"}));
        if let Some(o) = tuning.as_object_mut()
            && o.get("partitionsSpec").is_none_or(Value::is_null)
        {
            o.insert(
                "partitionsSpec".into(),
                json!({"type": "dynamic", "maxRowsPerSegment": self.max_rows_per_segment.unwrap_or(5_000_000)}),
            );
        }
        let mut context = match &self.task_context {
            Some(Value::Object(m)) => m.clone(),
            _ => serde_json::Map::new(),
        };
        context.insert("priority".into(), json!(self.task_priority));
        context.insert("storeCompactionState".into(), json!(true));
        let drop_existing = self
            .io_config
            .as_ref()
            .and_then(|io| io.get("dropExisting"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut task = json!({
            "type": compact::TASK_TYPE,
            "id": id,
            "dataSource": self.data_source,
            "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": interval.to_string()}, "dropExisting": drop_existing},
            "tuningConfig": tuning,
            "context": context,
        });
        for (k, v) in [
            ("granularitySpec", &self.granularity_spec),
            ("dimensionsSpec", &self.dimensions_spec),
            ("metricsSpec", &self.metrics_spec),
            ("transformSpec", &self.transform_spec),
        ] {
            if let Some(v) = v.as_ref().filter(|v| !v.is_null()) {
                task[k] = v.clone();
            }
        }
        task
    }
}

/// The whole compaction configuration: cluster settings and every datasource's config (the
/// listing of `GET /coordinator/v1/config/compaction`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionClusterConfig {
    /// Datasource configs, by datasource name order.
    #[serde(default)]
    pub compaction_configs: Vec<DataSourceCompactionConfig>,
    /// Share of the task capacity compaction may use (default 0.1).
    #[serde(default = "d_ratio")]
    pub compaction_task_slot_ratio: f64,
    /// Cap on compaction task slots (default 2147483647; `<= 0` disables compaction).
    #[serde(default = "d_max")]
    pub max_compaction_task_slots: i64,
    /// Accepted and stored (Druid 27); Dolmen's capacity is fixed, so it changes nothing.
    #[serde(default)]
    pub use_auto_scale_slots: bool,
}

impl Default for CompactionClusterConfig {
    fn default() -> Self {
        CompactionClusterConfig {
            compaction_configs: Vec::new(),
            compaction_task_slot_ratio: DEFAULT_SLOT_RATIO,
            max_compaction_task_slots: DEFAULT_MAX_SLOTS,
            use_auto_scale_slots: false,
        }
    }
}

impl CompactionClusterConfig {
    /// The stored document, defaults when none (or an unreadable one) is stored.
    pub fn from_stored(doc: Option<&Value>) -> CompactionClusterConfig {
        doc.and_then(|d| serde_json::from_value(d.clone()).ok())
            .unwrap_or_default()
    }

    /// Reads it from the metadata store.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn load(
        metadata: &dyn MetadataStore,
    ) -> Result<CompactionClusterConfig, OverlordError> {
        Ok(Self::from_stored(
            metadata.config(COMPACTION_CONFIG_KEY).await?.as_ref(),
        ))
    }

    /// The config of `data_source`.
    pub fn get(&self, data_source: &str) -> Option<&DataSourceCompactionConfig> {
        self.compaction_configs
            .iter()
            .find(|c| c.data_source == data_source)
    }

    /// Replaces or adds the config of its datasource.
    pub fn upsert(&mut self, config: DataSourceCompactionConfig) {
        self.compaction_configs
            .retain(|c| c.data_source != config.data_source);
        self.compaction_configs.push(config);
        self.compaction_configs
            .sort_by(|a, b| a.data_source.cmp(&b.data_source));
    }

    /// Removes the config of `data_source`; false when it had none.
    pub fn remove(&mut self, data_source: &str) -> bool {
        let before = self.compaction_configs.len();
        self.compaction_configs
            .retain(|c| c.data_source != data_source);
        before != self.compaction_configs.len()
    }

    /// `globalConfig` of history entries.
    pub fn global_json(&self) -> Value {
        json!({
            "compactionTaskSlotRatio": self.compaction_task_slot_ratio,
            "maxCompactionTaskSlots": self.max_compaction_task_slots,
            "useAutoScaleSlots": self.use_auto_scale_slots,
        })
    }

    /// Compaction task slots for a process running `capacity` tasks at once: `max(1,
    /// min(floor(capacity * ratio), max))`, 0 when `max <= 0` (compaction off).
    pub fn total_slots(&self, capacity: usize) -> usize {
        if self.max_compaction_task_slots <= 0 {
            return 0;
        }
        let by_ratio = (capacity as f64 * self.compaction_task_slot_ratio).floor();
        let by_ratio = if by_ratio.is_finite() && by_ratio > 0.0 {
            by_ratio as i64
        } else {
            0
        };
        by_ratio.min(self.max_compaction_task_slots).max(1) as usize
    }
}

/// The history of one datasource's config from the audit entries of the compaction config
/// (Druid's `DataSourceCompactionConfigHistory`): an entry is kept when the datasource's config
/// or the cluster settings differ from the previous kept entry; the first kept entry has a
/// config for the datasource; a later deletion shows as `"compactionConfig": null`.
pub fn datasource_history(data_source: &str, entries: &[AuditEntry]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut last: Option<(Option<DataSourceCompactionConfig>, Value)> = None;
    for e in entries {
        let Ok(doc) = serde_json::from_str::<Value>(&e.payload) else {
            continue;
        };
        let cluster = CompactionClusterConfig::from_stored(Some(&doc));
        let config = cluster.get(data_source).cloned();
        let global = cluster.global_json();
        let keep = match &last {
            None => config.is_some(),
            Some((c, g)) => *c != config || *g != global,
        };
        if !keep {
            continue;
        }
        out.push(json!({
            "globalConfig": global,
            "compactionConfig": config,
            "auditInfo": {"author": e.info.author, "comment": e.info.comment, "ip": e.info.ip},
            "auditTime": format_iso_millis(e.created_ms),
        }));
        last = Some((config, global));
    }
    out
}

/// One datasource's counts of the last duty run (the spec's `latestStatus` element).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoCompactionSnapshot {
    /// Datasource.
    pub data_source: String,
    /// `RUNNING` (a config exists).
    pub schedule_status: &'static str,
    /// Why nothing could be compacted, if so.
    pub message: Option<String>,
    /// Bytes of awaiting candidates.
    pub bytes_awaiting_compaction: u64,
    /// Bytes already compacted (or submitted this run).
    pub bytes_compacted: u64,
    /// Bytes skipped.
    pub bytes_skipped: u64,
    /// Segments of awaiting candidates.
    pub segment_count_awaiting_compaction: u64,
    /// Segments compacted.
    pub segment_count_compacted: u64,
    /// Segments skipped.
    pub segment_count_skipped: u64,
    /// Awaiting candidates.
    pub interval_count_awaiting_compaction: u64,
    /// Compacted candidates.
    pub interval_count_compacted: u64,
    /// Skipped candidates.
    pub interval_count_skipped: u64,
}

impl AutoCompactionSnapshot {
    fn add(&mut self, kind: Kind, segments: &[Arc<DataSegment>]) {
        let bytes: u64 = segments.iter().map(|s| s.size).sum();
        let n = segments.len() as u64;
        let (b, s, i) = match kind {
            Kind::Awaiting => (
                &mut self.bytes_awaiting_compaction,
                &mut self.segment_count_awaiting_compaction,
                &mut self.interval_count_awaiting_compaction,
            ),
            Kind::Compacted => (
                &mut self.bytes_compacted,
                &mut self.segment_count_compacted,
                &mut self.interval_count_compacted,
            ),
            Kind::Skipped => (
                &mut self.bytes_skipped,
                &mut self.segment_count_skipped,
                &mut self.interval_count_skipped,
            ),
        };
        *b += bytes;
        *s += n;
        *i += 1;
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Awaiting,
    Compacted,
    Skipped,
}

/// Groups visible segments into candidates: one per time chunk, or per bucket span of
/// `granularity`; newest first.
fn candidates(
    visible: Vec<Arc<DataSegment>>,
    granularity: Option<&Granularity>,
) -> Vec<(Interval, Vec<Arc<DataSegment>>)> {
    let mut groups: BTreeMap<(i64, i64), Vec<Arc<DataSegment>>> = BTreeMap::new();
    for s in visible {
        let key = match granularity {
            Some(g) if !matches!(g, Granularity::All | Granularity::None) => {
                let start = g.bucket_start(s.interval.start);
                let end = g.bucket_end(g.bucket_start(s.interval.end - 1));
                (start, end)
            }
            _ => (s.interval.start, s.interval.end),
        };
        groups.entry(key).or_default().push(s);
    }
    let mut out: Vec<(Interval, Vec<Arc<DataSegment>>)> = groups
        .into_iter()
        .map(|((start, end), segs)| (Interval { start, end }, segs))
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse((c.0.end, c.0.start)));
    out
}

/// Whether `segments` need compacting under `config` (Druid's `CompactionStatus`): yes when
/// one has no `lastCompactionState`; otherwise when a state differs from the one the config's
/// task would record, on `partitionsSpec` always and on each of `segmentGranularity`,
/// `queryGranularity`, `rollup`, `dimensionsSpec`, `metricsSpec`, `transformSpec` that the
/// config sets. Returns the reason.
pub fn needs_compaction(
    config: &DataSourceCompactionConfig,
    interval: Interval,
    segments: &[Arc<DataSegment>],
) -> Option<String> {
    if segments.iter().any(|s| s.last_compaction_state.is_none()) {
        return Some("not compacted yet".into());
    }
    let desired = match desired_state(config, interval, segments) {
        Ok(d) => d,
        Err(e) => return Some(format!("cannot compute the desired state: {e}")),
    };
    let g = config.granularity_spec.clone().unwrap_or(Value::Null);
    let set = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    for s in segments {
        let state = s.last_compaction_state.as_ref().expect("checked above");
        let mut checks: Vec<(&str, Value, Value)> = vec![(
            "partitionsSpec",
            comparable_partitions(&desired["partitionsSpec"]),
            comparable_partitions(&state["partitionsSpec"]),
        )];
        for k in ["segmentGranularity", "queryGranularity", "rollup"] {
            if set(g.get(k)) {
                checks.push((
                    k,
                    desired["granularitySpec"][k].clone(),
                    state["granularitySpec"][k].clone(),
                ));
            }
        }
        for (k, field) in [
            ("dimensionsSpec", &config.dimensions_spec),
            ("metricsSpec", &config.metrics_spec),
            ("transformSpec", &config.transform_spec),
        ] {
            if set(field.as_ref()) {
                checks.push((k, desired[k].clone(), state[k].clone()));
            }
        }
        for (k, want, have) in checks {
            if want != have {
                return Some(format!("'{k}' mismatch: required[{want}], current[{have}]"));
            }
        }
    }
    None
}

/// `maxTotalRows` null means no limit: leave it out of the comparison then.
fn comparable_partitions(p: &Value) -> Value {
    let mut p = fill_partition_defaults(p.clone());
    if let Some(o) = p.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    p
}

fn desired_state(
    config: &DataSourceCompactionConfig,
    interval: Interval,
    segments: &[Arc<DataSegment>],
) -> Result<Value, OverlordError> {
    let task = CompactTaskSpec::from_json(&config.task_json("desired", interval))?;
    let inputs: Vec<DataSegment> = segments.iter().map(|s| (**s).clone()).collect();
    let granularity = task
        .target_segment_granularity()?
        .unwrap_or_else(|| compact::kept_granularity(&inputs));
    let index =
        IndexTaskSpec::from_json(&task.index_spec("desired", interval, &granularity, &inputs))
            .map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
    Ok(compact::compaction_state(&index))
}

/// The compaction duty and its last snapshots.
pub struct CompactionDuty {
    overlord: Arc<Overlord>,
    metadata: Arc<dyn MetadataStore>,
    snapshots: Mutex<Option<BTreeMap<String, AutoCompactionSnapshot>>>,
}

impl std::fmt::Debug for CompactionDuty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionDuty").finish_non_exhaustive()
    }
}

impl CompactionDuty {
    /// A duty submitting to `overlord`.
    pub fn new(overlord: Arc<Overlord>, metadata: Arc<dyn MetadataStore>) -> CompactionDuty {
        CompactionDuty {
            overlord,
            metadata,
            snapshots: Mutex::new(None),
        }
    }

    /// The snapshot of `data_source` from the last run (`None` before the first run or when
    /// the datasource had no candidate).
    pub fn snapshot(&self, data_source: &str) -> Option<AutoCompactionSnapshot> {
        self.snapshots
            .lock()
            .expect("snapshots lock")
            .as_ref()?
            .get(data_source)
            .cloned()
    }

    /// Every snapshot of the last run.
    pub fn snapshots(&self) -> Vec<AutoCompactionSnapshot> {
        self.snapshots
            .lock()
            .expect("snapshots lock")
            .as_ref()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// One run (see the module docs); returns the ids of the tasks submitted.
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn run_once(&self) -> Result<Vec<String>, OverlordError> {
        let cluster = CompactionClusterConfig::load(self.metadata.as_ref()).await?;
        let total = cluster.total_slots(self.overlord.task_slots().0);
        let running = self
            .metadata
            .list_tasks(&TaskFilter {
                statuses: Some(vec![TaskState::Running]),
                task_type: Some(compact::TASK_TYPE.into()),
                ..TaskFilter::default()
            })
            .await?;
        let mut busy: Vec<(String, Interval)> = Vec::new();
        for t in &running {
            if let Ok(spec) = CompactTaskSpec::from_json(&t.payload)
                && let Some(compact::CompactionInputSpec::Interval { interval, .. }) =
                    spec.input_spec()
            {
                busy.push((t.data_source.clone(), interval));
            }
        }
        let mut free = total.saturating_sub(running.len());
        let mut submitted = Vec::new();
        let mut snapshots = BTreeMap::new();
        if total == 0 {
            *self.snapshots.lock().expect("snapshots lock") = Some(snapshots);
            return Ok(submitted);
        }
        for config in &cluster.compaction_configs {
            let used = self
                .metadata
                .used_segments(&config.data_source, None)
                .await?;
            let timeline = Timeline::build(used.into_iter().map(Arc::new));
            let visible = timeline.visible_segments();
            let Some(latest) = visible.iter().map(|s| s.interval.end).max() else {
                continue;
            };
            let skip_start = config
                .skip_offset()
                .ok()
                .and_then(|p| {
                    p.checked_add_to(latest, -1, &dolmen_common::zone::Zone::from_offset_secs(0))
                })
                .unwrap_or(latest);
            let skip = Interval {
                start: skip_start.min(latest),
                end: latest,
            };
            let granularity = config.segment_granularity();
            let mut snap = AutoCompactionSnapshot {
                data_source: config.data_source.clone(),
                schedule_status: "RUNNING",
                ..AutoCompactionSnapshot::default()
            };
            for (interval, segs) in candidates(visible, granularity.as_ref()) {
                let size: u64 = segs.iter().map(|s| s.size).sum();
                let skipped = (skip.start < skip.end && interval.overlaps(&skip))
                    || interval.start <= Interval::ETERNITY.start
                    || interval.end >= Interval::ETERNITY.end
                    || busy
                        .iter()
                        .any(|(ds, i)| *ds == config.data_source && i.overlaps(&interval))
                    || i64::try_from(size).unwrap_or(i64::MAX) > config.input_segment_size_bytes;
                if skipped {
                    snap.add(Kind::Skipped, &segs);
                    continue;
                }
                let Some(reason) = needs_compaction(config, interval, &segs) else {
                    snap.add(Kind::Compacted, &segs);
                    continue;
                };
                if free == 0 {
                    snap.add(Kind::Awaiting, &segs);
                    continue;
                }
                let id = format!(
                    "auto_compact_{}_{}_{}",
                    config.data_source,
                    crate::spec::random_suffix(),
                    format_iso_millis(dolmen_common::time::now_millis())
                );
                match self.overlord.submit(config.task_json(&id, interval)).await {
                    Ok(id) => {
                        tracing::info!(task_id = %id, %interval, %reason, "submitted compaction task");
                        free -= 1;
                        submitted.push(id);
                        snap.add(Kind::Compacted, &segs);
                    }
                    Err(e) => {
                        tracing::warn!(data_source = %config.data_source, %interval, error = %e, "cannot submit compaction task");
                        snap.message = Some(e.to_string());
                        snap.add(Kind::Awaiting, &segs);
                    }
                }
            }
            snapshots.insert(config.data_source.clone(), snap);
        }
        *self.snapshots.lock().expect("snapshots lock") = Some(snapshots);
        Ok(submitted)
    }
}

#[cfg(test)]
mod tests;
