//! The `compact` task (Druid's `CompactionTask`, `docs/data-management/manual-compaction.md`):
//! rewrites the visible segments of an interval into new segments of a newer version.
//!
//! ```json
//! {"type": "compact", "dataSource": "wikipedia",
//!  "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2015-09-12/2015-09-13"},
//!               "dropExisting": false},
//!  "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "none", "rollup": false},
//!  "dimensionsSpec": {...}, "metricsSpec": [...], "transformSpec": {...},
//!  "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}}, "context": {}}
//! ```
//!
//! The legacy top-level `interval` (Druid's tutorial specs) is the same as an `interval` input
//! spec; `inputSpec` `{"type": "segments", "segments": [ids]}` names the segments instead, and the
//! task fails when they are not exactly the visible segments of their umbrella interval (Druid's
//! "Specified segments in the spec are different from the current used segments").
//!
//! Running it ([`plan`]): the visible segments overlapping the interval are read from the
//! metadata store; the umbrella of the interval and those segments, aligned to the target
//! segment granularity, is the interval the task locks (EXCLUSIVE) and rewrites. The target
//! `segmentGranularity` is the given one or, when absent, the granularity the input segments
//! already have (the coarsest one among them when they differ); `queryGranularity` defaults to
//! NONE and `rollup` to false, which keep every row as it is. `dimensionsSpec` defaults to the
//! dimensions of the input segments (newest segment first, with their types), `metricsSpec` to
//! the combining form of their metric columns: the aggregator type ingestion recorded for each
//! metric in the segment (`SegmentColumn::aggregator`: `longSum` for a count, `longMax` for a
//! `longMax`, `doubleFirst` for a `doubleFirst`, ..., as Druid reads a segment's aggregators from
//! its metadata), else by type (`longSum`, `doubleSum`, `floatSum`, `HLLSketchMerge`,
//! `thetaSketch`, `quantilesDoublesSketch`, `hyperUnique` over the stored sketches). Segments
//! written before the aggregator was recorded, and metrics of SQL-based ingestion, have none: a
//! compaction with `rollup: true` and no `metricsSpec` over them fails naming the metric
//! ([`check_rollup_metrics`]) rather than sum maxima; without rollup rows are copied as they are.
//!
//! The rewrite is an ordinary batch ingestion ([`dolmen_ingest::run_index_task`]) reading the
//! `druid` input source over the locked interval: same build, same partitioning, same single
//! publish transaction. The new version overshadows the inputs from the moment of that
//! transaction (queries see either all old or all new segments); with `dropExisting` the
//! overshadowed segments are also marked unused in it. Every new segment carries
//! `lastCompactionState` ([`compaction_state`]).

use dolmen_common::{Granularity, Interval};
use dolmen_ingest::IndexTaskSpec;
use dolmen_segment::{ColumnKind, ColumnType, DataSegment, Timeline};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::OverlordError;

/// The task type name.
pub const TASK_TYPE: &str = "compact";

/// A `compact` task (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactTaskSpec {
    /// Always `compact`.
    #[serde(rename = "type")]
    pub task_type: String,
    /// Caller-chosen id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Group id (the task id unless given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Druid's task resource (echoed back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Value>,
    /// The datasource to compact.
    pub data_source: String,
    /// Legacy form of an `interval` input spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// `{"type": "compact", "inputSpec": ..., "dropExisting": bool}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_config: Option<CompactionIoConfig>,
    /// `segmentGranularity`, `queryGranularity`, `rollup` (all optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granularity_spec: Option<CompactionGranularitySpec>,
    /// Legacy top-level `segmentGranularity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_granularity: Option<Value>,
    /// Dimensions of the compacted segments (default: those of the input segments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions_spec: Option<Value>,
    /// Metrics of the compacted segments (default: the combining form of the input metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_spec: Option<Vec<Value>>,
    /// Transform and filter applied to the rows read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform_spec: Option<Value>,
    /// Batch tuning config (`partitionsSpec`: dynamic, hashed, range, single_dim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning_config: Option<Value>,
    /// Task context (echoed back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Map<String, Value>>,
}

/// `ioConfig` of a compact task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionIoConfig {
    /// Always `compact`.
    #[serde(rename = "type", default = "compact_type")]
    pub io_type: String,
    /// What to compact.
    pub input_spec: CompactionInputSpec,
    /// Mark the overshadowed input segments unused in the publish transaction.
    #[serde(default)]
    pub drop_existing: bool,
    /// Accepted for compatibility: Dolmen always widens the interval to the target granularity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_non_aligned_interval: Option<bool>,
}

fn compact_type() -> String {
    TASK_TYPE.to_string()
}

/// `ioConfig.inputSpec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum CompactionInputSpec {
    /// Every visible segment overlapping `interval`.
    Interval {
        /// The interval.
        interval: Interval,
        /// Accepted for compatibility (Druid's hash of the segments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256_of_sorted_segment_ids: Option<String>,
    },
    /// Exactly these segments (ids as Druid prints them).
    Segments {
        /// Segment ids.
        segments: Vec<String>,
    },
}

/// `granularitySpec` of a compact task (Druid's `ClientCompactionTaskGranularitySpec`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionGranularitySpec {
    /// Accepted for compatibility (`uniform`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub spec_type: Option<String>,
    /// Time chunk of the new segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_granularity: Option<Value>,
    /// Truncation of `__time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_granularity: Option<Value>,
    /// Roll rows up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollup: Option<bool>,
}

/// Granularity names tried, finest first, when the target keeps the input's granularity.
const KEEP_GRANULARITIES: &[&str] = &[
    "SECOND",
    "MINUTE",
    "FIVE_MINUTE",
    "TEN_MINUTE",
    "FIFTEEN_MINUTE",
    "THIRTY_MINUTE",
    "HOUR",
    "SIX_HOUR",
    "EIGHT_HOUR",
    "DAY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
];

fn invalid(msg: impl Into<String>) -> OverlordError {
    OverlordError::InvalidTask(msg.into())
}

fn parse_granularity(v: &Value, path: &str) -> Result<Granularity, OverlordError> {
    Granularity::from_json(v).map_err(|e| invalid(format!("{path}: {e}")))
}

impl CompactTaskSpec {
    /// Parses and checks a submission: the input spec, the granularities, and every sub-spec by
    /// building the batch spec it becomes (errors name the compact spec's own field).
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] naming the bad field.
    pub fn from_json(payload: &Value) -> Result<CompactTaskSpec, OverlordError> {
        let spec: CompactTaskSpec = crate::spec::parse_named(payload)?;
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), OverlordError> {
        dolmen_ingest::spec::validate_data_source_name(&self.data_source, "dataSource")
            .map_err(|e| invalid(e.to_string()))?;
        match (&self.interval, &self.io_config) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "interval: give either interval or ioConfig.inputSpec, not both",
                ));
            }
            (None, None) => {
                return Err(invalid(
                    "ioConfig: missing; give ioConfig.inputSpec (or the legacy interval)",
                ));
            }
            _ => {}
        }
        match self.input_spec() {
            Some(CompactionInputSpec::Interval { interval, .. })
                if interval.start >= interval.end =>
            {
                return Err(invalid(
                    "ioConfig.inputSpec.interval: the interval is empty",
                ));
            }
            Some(CompactionInputSpec::Segments { segments }) => {
                if segments.is_empty() {
                    return Err(invalid("ioConfig.inputSpec.segments: no segments given"));
                }
                for s in &segments {
                    if !s.starts_with(&format!("{}_", self.data_source)) {
                        return Err(invalid(format!(
                            "ioConfig.inputSpec.segments: [{s}] is not a segment id of datasource [{}]",
                            self.data_source
                        )));
                    }
                }
            }
            _ => {}
        }
        if let Some(io) = &self.io_config
            && io.io_type != TASK_TYPE
        {
            return Err(invalid(format!(
                "ioConfig.type: must be [compact], got [{}]",
                io.io_type
            )));
        }
        if self.segment_granularity.is_some()
            && self
                .granularity_spec
                .as_ref()
                .is_some_and(|g| g.segment_granularity.is_some())
        {
            return Err(invalid(
                "segmentGranularity: give it in granularitySpec only, not both",
            ));
        }
        let target = self.target_segment_granularity()?;
        if matches!(target, Some(Granularity::None)) {
            return Err(invalid(
                "granularitySpec.segmentGranularity: NONE is not a segment granularity",
            ));
        }
        let g = self.granularity_spec.clone().unwrap_or_default();
        if let Some(q) = &g.query_granularity {
            parse_granularity(q, "granularitySpec.queryGranularity")?;
        }
        // Check the sub-specs by building the batch spec against a sample input.
        let trial = self.index_spec(
            "validation",
            Interval::parse("2000-01-01/2000-01-02").expect("static interval"),
            &target.unwrap_or(Granularity::from_name("DAY").expect("static")),
            &[],
        );
        IndexTaskSpec::from_json(&trial).map_err(|e| invalid(rename_error_path(&e.to_string())))?;
        Ok(())
    }

    /// The input spec (the legacy `interval` as an `interval` input spec).
    pub fn input_spec(&self) -> Option<CompactionInputSpec> {
        match (&self.io_config, self.interval) {
            (Some(io), _) => Some(io.input_spec.clone()),
            (None, Some(interval)) => Some(CompactionInputSpec::Interval {
                interval,
                sha256_of_sorted_segment_ids: None,
            }),
            (None, None) => None,
        }
    }

    /// `ioConfig.dropExisting`.
    pub fn drop_existing(&self) -> bool {
        self.io_config.as_ref().is_some_and(|io| io.drop_existing)
    }

    /// The requested segment granularity, if any.
    ///
    /// # Errors
    /// When it does not parse.
    pub fn target_segment_granularity(&self) -> Result<Option<Granularity>, OverlordError> {
        if let Some(v) = self
            .granularity_spec
            .as_ref()
            .and_then(|g| g.segment_granularity.as_ref())
        {
            return parse_granularity(v, "granularitySpec.segmentGranularity").map(Some);
        }
        if let Some(v) = &self.segment_granularity {
            return parse_granularity(v, "segmentGranularity").map(Some);
        }
        Ok(None)
    }

    /// The spec as stored: the legacy `interval` moved into `ioConfig` (Druid's read-back).
    pub fn normalized(&self) -> CompactTaskSpec {
        let mut s = self.clone();
        if let Some(interval) = s.interval.take() {
            s.io_config = Some(CompactionIoConfig {
                io_type: compact_type(),
                input_spec: CompactionInputSpec::Interval {
                    interval,
                    sha256_of_sorted_segment_ids: None,
                },
                drop_existing: false,
                allow_non_aligned_interval: None,
            });
        }
        s
    }

    /// The batch ingestion spec (JSON) that rewrites `interval` from `inputs` (the visible
    /// input segments, newest first for the default dimension order) into `granularity`.
    pub fn index_spec(
        &self,
        id: &str,
        interval: Interval,
        granularity: &Granularity,
        inputs: &[DataSegment],
    ) -> Value {
        let g = self.granularity_spec.clone().unwrap_or_default();
        let dimensions = self
            .dimensions_spec
            .clone()
            .unwrap_or_else(|| default_dimensions(inputs));
        let metrics = self
            .metrics_spec
            .clone()
            .map(Value::Array)
            .unwrap_or_else(|| default_metrics(inputs));
        let mut data_schema = json!({
            "dataSource": self.data_source,
            "timestampSpec": {"column": dolmen_ingest::TIME_COLUMN, "format": "millis"},
            "dimensionsSpec": dimensions,
            "metricsSpec": metrics,
            "granularitySpec": {
                "type": "uniform",
                "segmentGranularity": granularity.to_json(),
                "queryGranularity": g.query_granularity.clone().unwrap_or(json!("NONE")),
                "rollup": g.rollup.unwrap_or(false),
                "intervals": [interval.to_string()],
            },
        });
        if let Some(t) = &self.transform_spec {
            data_schema["transformSpec"] = t.clone();
        }
        let mut tuning = self
            .tuning_config
            .clone()
            .unwrap_or_else(|| json!({"type": "index_parallel"}));
        if let Some(o) = tuning.as_object_mut() {
            o.insert("type".into(), json!("index_parallel"));
        }
        json!({
            "type": "index_parallel",
            "id": id,
            "dataSource": self.data_source,
            "spec": {
                "dataSchema": data_schema,
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": {"type": "druid", "dataSource": self.data_source, "interval": interval.to_string()},
                    "appendToExisting": false,
                    "dropExisting": self.drop_existing(),
                },
                "tuningConfig": tuning,
            },
            "context": self.context.clone().unwrap_or_default(),
        })
    }
}

/// Maps an error about the generated batch spec back to the compact spec's field names.
fn rename_error_path(msg: &str) -> String {
    msg.replace("spec.dataSchema.granularitySpec", "granularitySpec")
        .replace("spec.dataSchema.", "")
        .replace("spec.tuningConfig", "tuningConfig")
        .replace("spec.ioConfig", "ioConfig")
}

/// The dimensions of the input segments, newest segment first, with their types.
fn default_dimensions(inputs: &[DataSegment]) -> Value {
    let mut sorted: Vec<&DataSegment> = inputs.iter().collect();
    sorted.sort_by(|a, b| {
        b.interval
            .end
            .cmp(&a.interval.end)
            .then(b.version.cmp(&a.version))
    });
    let mut seen = std::collections::HashSet::new();
    let mut dims = Vec::new();
    for s in sorted {
        for c in s.columns.iter().filter(|c| c.kind == ColumnKind::Dimension) {
            if !seen.insert(c.name.clone()) {
                continue;
            }
            let ty = match c.ty {
                ColumnType::Long => "long",
                ColumnType::Float => "float",
                ColumnType::Double => "double",
                _ => "string",
            };
            let mut d = json!({"type": ty, "name": c.name});
            if c.multi_value {
                d["multiValueHandling"] = json!("ARRAY");
            }
            dims.push(d);
        }
    }
    json!({ "dimensions": dims })
}

/// Refuses a rollup compaction that would combine a metric without knowing how: no
/// `metricsSpec` given, and an input metric column (not a sketch, which combines by its type)
/// without a recorded aggregator (SQL-based ingestion, or a segment written before aggregators
/// were recorded). Summing it could silently add up maxima or minima.
///
/// # Errors
/// A message naming the column and what to give.
pub fn check_rollup_metrics(spec: &CompactTaskSpec, inputs: &[DataSegment]) -> Result<(), String> {
    let rollup = spec.granularity_spec.as_ref().and_then(|g| g.rollup) == Some(true);
    if !rollup || spec.metrics_spec.is_some() {
        return Ok(());
    }
    for s in inputs {
        if let Some(c) = s.columns.iter().find(|c| {
            c.kind == ColumnKind::Metric
                && c.aggregator.is_none()
                && matches!(
                    c.ty,
                    ColumnType::Long | ColumnType::Double | ColumnType::Float
                )
        }) {
            return Err(format!(
                "metricsSpec: metric [{}] of segment [{}] has no recorded aggregator (SQL-based ingestion, or a segment written before aggregators were recorded), so rollup cannot tell how to combine it: give metricsSpec",
                c.name, s.identifier
            ));
        }
    }
    Ok(())
}

/// The combining aggregators of the input segments' metric columns.
fn default_metrics(inputs: &[DataSegment]) -> Value {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for s in inputs {
        for c in s.columns.iter().filter(|c| c.kind == ColumnKind::Metric) {
            if !seen.insert(c.name.clone()) {
                continue;
            }
            let n = &c.name;
            // The combining aggregator the ingestion recorded for the column, when it did.
            if let Some(t) = &c.aggregator {
                out.push(json!({"type": t, "name": n, "fieldName": n}));
                continue;
            }
            out.push(match c.ty {
                ColumnType::Long => json!({"type": "longSum", "name": n, "fieldName": n}),
                ColumnType::Double => json!({"type": "doubleSum", "name": n, "fieldName": n}),
                ColumnType::Float => json!({"type": "floatSum", "name": n, "fieldName": n}),
                ColumnType::String => json!({"type": "stringLast", "name": n, "fieldName": n}),
                ColumnType::HllSketch => {
                    json!({"type": "HLLSketchMerge", "name": n, "fieldName": n})
                }
                ColumnType::ThetaSketch => json!({"type": "thetaSketch", "name": n, "fieldName": n, "isInputThetaSketch": true}),
                ColumnType::QuantilesDoublesSketch => {
                    json!({"type": "quantilesDoublesSketch", "name": n, "fieldName": n})
                }
                ColumnType::HyperUnique => json!({"type": "hyperUnique", "name": n, "fieldName": n, "isInputHyperUnique": true}),
                // No aggregator produces array or JSON metrics: such columns are dimensions.
                ColumnType::StringArray
                | ColumnType::LongArray
                | ColumnType::DoubleArray
                | ColumnType::Json => continue,
            });
        }
    }
    Value::Array(out)
}

/// The granularity the input segments already have: the finest simple granularity every input
/// interval is one bucket of; when they differ, the coarsest such granularity among them.
pub fn kept_granularity(inputs: &[DataSegment]) -> Granularity {
    let mut best: Option<usize> = None;
    for s in inputs {
        let own = KEEP_GRANULARITIES.iter().position(|n| {
            Granularity::from_name(n)
                .map(|g| g.is_aligned(&s.interval))
                .unwrap_or(false)
        });
        match own {
            Some(i) => best = Some(best.map_or(i, |b| b.max(i))),
            None => return Granularity::All,
        }
    }
    best.map_or(Granularity::All, |i| {
        Granularity::from_name(KEEP_GRANULARITIES[i]).expect("static granularity")
    })
}

/// The rewrite a compact task does, decided from the visible segments.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// The interval locked, read and rewritten (aligned to `granularity`).
    pub interval: Interval,
    /// Target segment granularity.
    pub granularity: Granularity,
    /// The visible segments rewritten.
    pub inputs: Vec<DataSegment>,
}

/// Decides the rewrite from `used` (the used segments overlapping the requested interval, or
/// the datasource's used segments for a `segments` input spec).
///
/// # Errors
/// A message for the task's failure: no segments to compact, or listed segments that are not
/// the visible segments of their interval.
pub fn plan(spec: &CompactTaskSpec, used: Vec<DataSegment>) -> Result<CompactionPlan, String> {
    let input = spec
        .input_spec()
        .ok_or_else(|| "ioConfig.inputSpec: missing".to_string())?;
    let requested = match &input {
        CompactionInputSpec::Interval { interval, .. } => *interval,
        CompactionInputSpec::Segments { segments } => {
            let by_id: std::collections::HashMap<&str, &DataSegment> =
                used.iter().map(|s| (s.identifier.as_str(), s)).collect();
            let mut span: Option<Interval> = None;
            for id in segments {
                let s = by_id.get(id.as_str()).ok_or_else(|| {
                    format!("Specified segments in the spec are different from the current used segments: [{id}] is not used")
                })?;
                span = Some(span.map_or(s.interval, |u| umbrella(u, s.interval)));
            }
            span.ok_or_else(|| "ioConfig.inputSpec.segments: no segments given".to_string())?
        }
    };
    let timeline = Timeline::build(
        used.into_iter()
            .filter(|s| s.interval.overlaps(&requested))
            .map(std::sync::Arc::new),
    );
    let visible: Vec<DataSegment> = timeline
        .visible_segments()
        .into_iter()
        .map(|s| (*s).clone())
        .collect();
    if visible.is_empty() {
        return Err(format!(
            "No segments found for compaction. Please check that datasource name [{}] and interval [{requested}] are correct.",
            spec.data_source
        ));
    }
    if let CompactionInputSpec::Segments { segments } = &input {
        let mut want: Vec<&str> = segments.iter().map(String::as_str).collect();
        let mut have: Vec<&str> = visible.iter().map(|s| s.identifier.as_str()).collect();
        want.sort_unstable();
        want.dedup();
        have.sort_unstable();
        if want != have {
            return Err(format!(
                "Specified segments in the spec are different from the current used segments. Possibly new segments would have been added or some segments have been unpublished. Specified: {want:?}, current: {have:?}"
            ));
        }
    }
    let granularity = spec
        .target_segment_granularity()
        .map_err(|e| e.to_string())?
        .unwrap_or_else(|| kept_granularity(&visible));
    let mut span = requested;
    for s in &visible {
        span = umbrella(span, s.interval);
    }
    let interval = match granularity {
        Granularity::All => Interval::ETERNITY,
        _ => {
            let start = granularity.bucket_start(span.start);
            let last = granularity.bucket_start(span.end - 1);
            Interval {
                start,
                end: granularity.bucket_end(last),
            }
        }
    };
    Ok(CompactionPlan {
        interval,
        granularity,
        inputs: visible,
    })
}

fn umbrella(a: Interval, b: Interval) -> Interval {
    Interval {
        start: a.start.min(b.start),
        end: a.end.max(b.end),
    }
}

/// `lastCompactionState` of the segments a compact task publishes (Druid's `CompactionState`):
/// `partitionsSpec` (with defaults filled in), `dimensionsSpec`, `metricsSpec`,
/// `transformSpec`, `indexSpec` and `granularitySpec`, taken from the batch spec that built
/// them.
pub fn compaction_state(index: &IndexTaskSpec) -> Value {
    let schema = &index.spec.data_schema;
    let tuning = &index.spec.tuning_config;
    let partitions = match tuning.effective_partitions() {
        Some(p) => serde_json::to_value(&p).unwrap_or(Value::Null),
        None => json!({
            "type": "dynamic",
            "maxRowsPerSegment": tuning.max_rows_per_segment.unwrap_or(5_000_000),
            "maxTotalRows": tuning.max_total_rows,
        }),
    };
    let partitions = fill_partition_defaults(partitions);
    let g = &schema.granularity_spec;
    json!({
        "partitionsSpec": partitions,
        "dimensionsSpec": serde_json::to_value(&schema.dimensions_spec).unwrap_or(Value::Null),
        "metricsSpec": serde_json::to_value(&schema.metrics_spec).unwrap_or(Value::Null),
        "transformSpec": serde_json::to_value(&schema.transform_spec).unwrap_or(Value::Null),
        "indexSpec": tuning.index_spec.clone().unwrap_or_else(|| json!({})),
        "granularitySpec": {
            "type": "uniform",
            "segmentGranularity": g.segment_granularity.to_json(),
            "queryGranularity": g.query_granularity.to_json(),
            "rollup": g.rollup,
            "intervals": g.intervals.iter().map(ToString::to_string).collect::<Vec<_>>(),
        },
    })
}

/// Druid's defaults in a dynamic partitions spec (`maxRowsPerSegment` 5000000,
/// `maxTotalRows` null), so equal layouts compare equal whether or not they were spelled out.
pub fn fill_partition_defaults(mut p: Value) -> Value {
    if p.get("type").and_then(Value::as_str) == Some("dynamic")
        && let Some(o) = p.as_object_mut()
    {
        if o.get("maxRowsPerSegment").is_none_or(Value::is_null) {
            o.insert("maxRowsPerSegment".into(), json!(5_000_000));
        }
        o.entry("maxTotalRows").or_insert(Value::Null);
    }
    p
}

#[cfg(test)]
mod tests;
