//! Native batch ingestion specs (`index_parallel`, `index`), as in the spec's "Ingestion spec"
//! section and Druid's `docs/ingestion/ingestion-spec.md`.
//!
//! Every field the spec lists is accepted (and echoed back in the task payload); a field that is
//! not a Druid field is rejected with an error naming its path, e.g.
//! `spec.dataSchema.granularitySpec.segmentGranulrity: unknown field`. Defaults are Druid's
//! observed defaults for batch tasks (spec: "Effective values observed for batch tuning when
//! not set").

use dolmen_common::{Granularity, Interval};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::IngestError;
use crate::expr::Transform;
use crate::filter::DimFilter;
use crate::input::{InputFormat, InputSource};
use crate::timestamp::TimestampSpec;

/// A batch task submission: `{"type": "index_parallel", "spec": {...}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IndexTaskSpec {
    /// `index_parallel` or `index`.
    #[serde(rename = "type")]
    pub task_type: String,
    /// Task id chosen by the caller (generated when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Group id (defaults to the task id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Task resource (read-back field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Value>,
    /// Datasource (read-back field; must match the spec's when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<String>,
    /// The ingestion spec.
    pub spec: IngestionSpec,
    /// Task context (`priority`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Map<String, Value>>,
}

/// `spec`: what to read, how to parse and roll it up, and tuning.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestionSpec {
    /// Schema of the datasource.
    pub data_schema: DataSchema,
    /// Where to read from.
    pub io_config: IoConfig,
    /// Tuning.
    #[serde(default)]
    pub tuning_config: TuningConfig,
}

/// `dataSchema`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataSchema {
    /// Target datasource.
    pub data_source: String,
    /// Where the timestamp comes from.
    #[serde(default)]
    pub timestamp_spec: TimestampSpec,
    /// Dimensions.
    #[serde(default)]
    pub dimensions_spec: DimensionsSpec,
    /// Metrics (aggregators applied at ingestion).
    #[serde(default)]
    pub metrics_spec: Vec<MetricSpec>,
    /// Segment and query granularity, rollup, intervals.
    #[serde(default)]
    pub granularity_spec: GranularitySpec,
    /// Filter and expression transforms applied to input rows.
    #[serde(default)]
    pub transform_spec: TransformSpec,
}

/// `dimensionsSpec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DimensionsSpec {
    /// Dimensions in order; empty means schema discovery.
    #[serde(default)]
    pub dimensions: Vec<DimensionSchema>,
    /// Fields never used as dimensions.
    #[serde(default)]
    pub dimension_exclusions: Vec<String>,
    /// Keep listed dimensions first, then discover the rest.
    #[serde(default)]
    pub include_all_dimensions: bool,
    /// Discover dimensions with their types (long/double/string) instead of all as strings.
    #[serde(default)]
    pub use_schema_discovery: bool,
    /// Spatial dimensions (accepted for compatibility; must be empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spatial_dimensions: Vec<Value>,
}

/// One dimension: a plain name (a string dimension) or a typed object.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DimensionSchema {
    /// A string dimension by name.
    Name(String),
    /// A typed dimension.
    Typed(TypedDimension),
}

/// A dimension object: `{"type": "long", "name": "added"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypedDimension {
    /// `string` (default), `long`, `float`, `double`.
    #[serde(rename = "type", default = "default_dim_type")]
    pub dim_type: String,
    /// Column name.
    pub name: String,
    /// `SORTED_ARRAY` (default), `SORTED_SET`, `ARRAY` (multi-value strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_value_handling: Option<String>,
    /// Whether to index the dimension (Parquet statistics are always written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_bitmap_index: Option<bool>,
}

fn default_dim_type() -> String {
    "string".to_string()
}

impl DimensionSchema {
    /// The dimension's name.
    pub fn name(&self) -> &str {
        match self {
            DimensionSchema::Name(n) => n,
            DimensionSchema::Typed(t) => &t.name,
        }
    }
}

/// An ingestion-time aggregator (`metricsSpec` element): `{"type": "longSum", "name": ...,
/// "fieldName": ...}` (Druid's `docs/ingestion/ingestion-spec.md#metricsspec`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum MetricSpec {
    /// Number of input rows rolled into the row.
    Count(CountAggregator),
    /// Sum as a long.
    LongSum(FieldAggregator),
    /// Sum as a double.
    DoubleSum(FieldAggregator),
    /// Sum as a float.
    FloatSum(FieldAggregator),
    /// Minimum as a long.
    LongMin(FieldAggregator),
    /// Maximum as a long.
    LongMax(FieldAggregator),
    /// Minimum as a double.
    DoubleMin(FieldAggregator),
    /// Maximum as a double.
    DoubleMax(FieldAggregator),
}

/// The fields of a `count` aggregator.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CountAggregator {
    /// Output column.
    pub name: String,
}

/// The fields of an aggregator over one input: a field or a Druid expression.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldAggregator {
    /// Output column.
    pub name: String,
    /// Input field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_name: Option<String>,
    /// Druid expression instead of a field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

impl MetricSpec {
    fn fields(&self) -> Option<&FieldAggregator> {
        match self {
            MetricSpec::Count(_) => None,
            MetricSpec::LongSum(f)
            | MetricSpec::DoubleSum(f)
            | MetricSpec::FloatSum(f)
            | MetricSpec::LongMin(f)
            | MetricSpec::LongMax(f)
            | MetricSpec::DoubleMin(f)
            | MetricSpec::DoubleMax(f) => Some(f),
        }
    }

    /// Output column name.
    pub fn name(&self) -> &str {
        match (self, self.fields()) {
            (MetricSpec::Count(c), _) => &c.name,
            (_, Some(f)) => &f.name,
            (_, None) => "",
        }
    }

    /// Input field and expression, if any.
    pub fn input(&self) -> (Option<&str>, Option<&str>) {
        match self.fields() {
            Some(f) => (f.field_name.as_deref(), f.expression.as_deref()),
            None => (None, None),
        }
    }

    /// Druid's aggregator type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            MetricSpec::Count(_) => "count",
            MetricSpec::LongSum(_) => "longSum",
            MetricSpec::DoubleSum(_) => "doubleSum",
            MetricSpec::FloatSum(_) => "floatSum",
            MetricSpec::LongMin(_) => "longMin",
            MetricSpec::LongMax(_) => "longMax",
            MetricSpec::DoubleMin(_) => "doubleMin",
            MetricSpec::DoubleMax(_) => "doubleMax",
        }
    }
}

/// `granularitySpec`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GranularitySpec {
    /// `uniform` (default) or `arbitrary` (treated as uniform).
    #[serde(rename = "type", default = "default_uniform")]
    pub spec_type: String,
    /// Time chunk of segments (default DAY).
    #[serde(default = "default_segment_granularity")]
    pub segment_granularity: Granularity,
    /// Truncation of `__time` (default NONE).
    #[serde(default = "default_query_granularity")]
    pub query_granularity: Granularity,
    /// Whether to roll up rows with equal truncated time and dimensions (default true).
    #[serde(default = "default_true")]
    pub rollup: bool,
    /// Input rows outside these intervals are thrown away; empty means no restriction.
    #[serde(default)]
    pub intervals: Vec<Interval>,
}

fn default_uniform() -> String {
    "uniform".to_string()
}
fn default_segment_granularity() -> Granularity {
    Granularity::from_name("DAY").expect("static granularity")
}
fn default_query_granularity() -> Granularity {
    Granularity::None
}
fn default_true() -> bool {
    true
}

impl Default for GranularitySpec {
    fn default() -> Self {
        GranularitySpec {
            spec_type: default_uniform(),
            segment_granularity: default_segment_granularity(),
            query_granularity: default_query_granularity(),
            rollup: true,
            intervals: Vec::new(),
        }
    }
}

/// `transformSpec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformSpec {
    /// Rows not matching are thrown away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<DimFilter>,
    /// Expression transforms, applied in order before the filter.
    #[serde(default)]
    pub transforms: Vec<Transform>,
}

/// `ioConfig`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IoConfig {
    /// `index_parallel` or `index`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub io_type: Option<String>,
    /// Where to read.
    pub input_source: InputSource,
    /// How to parse.
    pub input_format: InputFormat,
    /// Add segments to existing time chunks instead of replacing them.
    #[serde(default)]
    pub append_to_existing: bool,
    /// Drop existing segments in `granularitySpec.intervals` that the new data does not cover.
    #[serde(default)]
    pub drop_existing: bool,
}

/// `partitionsSpec` (dynamic partitioning; hashed and range follow).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum PartitionsSpec {
    /// Segments are cut every `maxRowsPerSegment` rows.
    #[serde(rename_all = "camelCase")]
    Dynamic {
        /// Rows per segment (default 5000000).
        #[serde(default)]
        max_rows_per_segment: Option<u64>,
        /// Rows across segments before pushing (accepted).
        #[serde(default)]
        max_total_rows: Option<u64>,
    },
}

/// `tuningConfig` (every field name the spec lists is accepted).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(missing_docs)]
pub struct TuningConfig {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub tuning_type: Option<String>,
    /// Rows per segment (default 5000000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows_per_segment: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub appendable_index_spec: Option<Value>,
    /// Rows held in memory before spilling a sorted run to disk (default 25000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows_in_memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_in_memory: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_bytes_in_memory_overhead_check: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_rows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_shards: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_hint_spec: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions_spec: Option<PartitionsSpec>,
    /// Segment encoding: `dimensionCompression`/`metricCompression` pick the Parquet codec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_spec: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_spec_for_intermediate_persists: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_persists: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_guaranteed_rollup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_parse_exceptions: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_timeout: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_write_out_medium_factory: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_concurrent_sub_tasks: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retry: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_status_check_period_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_handler_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_handler_num_retries: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_segments_to_merge: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_num_merge_tasks: Option<i64>,
    /// Log each parse exception to the task log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_parse_exceptions: Option<bool>,
    /// Unparseable rows tolerated before the task fails (default 2147483647).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parse_exceptions: Option<u64>,
    /// Unparseable rows kept in the report (default 0; Druid keeps none unless asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_saved_parse_exceptions: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_columns_to_merge: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub await_segment_availability_timeout_millis: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_allowed_lock_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_dimensions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_extendable_shard_specs: Option<bool>,
}

impl TuningConfig {
    /// Effective rows per segment: `partitionsSpec.maxRowsPerSegment`, then
    /// `maxRowsPerSegment`, then 5000000.
    pub fn rows_per_segment(&self) -> u64 {
        let from_partitions = match &self.partitions_spec {
            Some(PartitionsSpec::Dynamic {
                max_rows_per_segment,
                ..
            }) => *max_rows_per_segment,
            None => None,
        };
        from_partitions
            .or(self.max_rows_per_segment)
            .unwrap_or(5_000_000)
            .max(1)
    }

    /// Effective rows in memory before a spill (default 25000).
    pub fn rows_in_memory(&self) -> u64 {
        self.max_rows_in_memory.unwrap_or(25_000).max(1)
    }

    /// Effective `maxParseExceptions` (default 2147483647).
    pub fn parse_exception_limit(&self) -> u64 {
        self.max_parse_exceptions.unwrap_or(2_147_483_647)
    }

    /// Effective `maxSavedParseExceptions` (default 0).
    pub fn saved_parse_exception_limit(&self) -> u64 {
        self.max_saved_parse_exceptions.unwrap_or(0)
    }

    /// The compression codec name from `indexSpec.dimensionCompression` (default lz4).
    pub fn compression(&self) -> Option<String> {
        self.index_spec
            .as_ref()
            .and_then(|v| v.get("dimensionCompression"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    }
}

/// Validates a datasource name: non-empty, at most 255 bytes, no `/`, `\`, control characters,
/// and not starting with `.` (it becomes a directory name in deep storage and the segment cache).
///
/// # Errors
/// [`IngestError::InvalidSpec`] naming the problem.
pub fn validate_data_source_name(name: &str, field: &str) -> Result<(), IngestError> {
    let bad = |why: &str| {
        Err(IngestError::InvalidSpec(format!(
            "{field} [{name}] is invalid: {why}"
        )))
    };
    if name.trim().is_empty() {
        return bad("it must not be empty");
    }
    if name.len() > 255 {
        return bad("it must be at most 255 bytes");
    }
    if name.starts_with('.') {
        return bad("it must not start with '.'");
    }
    if name.contains('/') || name.contains('\\') {
        return bad("it must not contain '/' or '\\'");
    }
    if name.chars().any(char::is_control) {
        return bad("it must not contain control characters");
    }
    Ok(())
}

impl IndexTaskSpec {
    /// Parses a submission, naming the offending field path on error.
    ///
    /// # Errors
    /// [`IngestError::InvalidSpec`] with the JSON path and serde's message.
    pub fn from_json(v: &Value) -> Result<IndexTaskSpec, IngestError> {
        let spec: IndexTaskSpec = serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            if path == "." || path.is_empty() {
                IngestError::InvalidSpec(inner)
            } else {
                IngestError::InvalidSpec(format!("{path}: {inner}"))
            }
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks what serde cannot: task type, datasource name, granularities, dimensions and
    /// metrics, filter, transforms and timestamp format compile.
    ///
    /// # Errors
    /// [`IngestError::InvalidSpec`] naming the field.
    pub fn validate(&self) -> Result<(), IngestError> {
        if self.task_type != "index_parallel" && self.task_type != "index" {
            return Err(IngestError::InvalidSpec(format!(
                "type: unsupported task type [{}]; expected index_parallel or index",
                self.task_type
            )));
        }
        let ds = &self.spec.data_schema;
        validate_data_source_name(&ds.data_source, "spec.dataSchema.dataSource")?;
        if let Some(top) = &self.data_source
            && top != &ds.data_source
        {
            return Err(IngestError::InvalidSpec(format!(
                "dataSource [{top}] does not match spec.dataSchema.dataSource [{}]",
                ds.data_source
            )));
        }
        if let Some(id) = &self.id {
            validate_task_id(id)?;
        }
        if matches!(ds.granularity_spec.segment_granularity, Granularity::None) {
            return Err(IngestError::InvalidSpec(
                "spec.dataSchema.granularitySpec.segmentGranularity: NONE is not a valid segment granularity".into(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        for d in &ds.dimensions_spec.dimensions {
            let n = d.name();
            if n.is_empty() {
                return Err(IngestError::InvalidSpec(
                    "spec.dataSchema.dimensionsSpec.dimensions: empty dimension name".into(),
                ));
            }
            if n == crate::TIME_COLUMN {
                return Err(IngestError::InvalidSpec(
                    "spec.dataSchema.dimensionsSpec.dimensions: [__time] cannot be a dimension"
                        .into(),
                ));
            }
            if !names.insert(n.to_string()) {
                return Err(IngestError::InvalidSpec(format!(
                    "spec.dataSchema.dimensionsSpec.dimensions: duplicate dimension [{n}]"
                )));
            }
            if let DimensionSchema::Typed(t) = d
                && !matches!(t.dim_type.as_str(), "string" | "long" | "float" | "double")
            {
                return Err(IngestError::InvalidSpec(format!(
                    "spec.dataSchema.dimensionsSpec.dimensions: dimension [{n}] has unsupported type [{}]; expected string, long, float or double",
                    t.dim_type
                )));
            }
        }
        if !ds.dimensions_spec.spatial_dimensions.is_empty() {
            return Err(IngestError::InvalidSpec(
                "spec.dataSchema.dimensionsSpec.spatialDimensions: spatial dimensions are not supported".into(),
            ));
        }
        for m in &ds.metrics_spec {
            let n = m.name();
            if n.is_empty() || n == crate::TIME_COLUMN {
                return Err(IngestError::InvalidSpec(format!(
                    "spec.dataSchema.metricsSpec: invalid metric name [{n}]"
                )));
            }
            if !names.insert(n.to_string()) {
                return Err(IngestError::InvalidSpec(format!(
                    "spec.dataSchema.metricsSpec: [{n}] is already used by a dimension or another metric"
                )));
            }
            match m.input() {
                (None, None) if !matches!(m, MetricSpec::Count(_)) => {
                    return Err(IngestError::InvalidSpec(format!(
                        "spec.dataSchema.metricsSpec: metric [{n}] of type [{}] needs fieldName or expression",
                        m.type_name()
                    )));
                }
                (Some(_), Some(_)) => {
                    return Err(IngestError::InvalidSpec(format!(
                        "spec.dataSchema.metricsSpec: metric [{n}] must have only one of fieldName and expression"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The datasource this task writes.
    pub fn data_source(&self) -> &str {
        &self.spec.data_schema.data_source
    }
}

/// Validates a caller-chosen task id (it names a log file and appears in URLs).
///
/// # Errors
/// [`IngestError::InvalidSpec`] naming the problem.
pub fn validate_task_id(id: &str) -> Result<(), IngestError> {
    if id.is_empty()
        || id.len() > 255
        || id.starts_with('.')
        || id.contains('/')
        || id.contains('\\')
        || id.chars().any(char::is_control)
    {
        return Err(IngestError::InvalidSpec(format!(
            "id [{id}] is invalid: it must be 1-255 bytes without '/', '\\', control characters or a leading '.'"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metric_specs_parse_and_reject_unknown_fields() {
        let m: MetricSpec =
            serde_json::from_value(json!({"type": "longSum", "name": "a", "fieldName": "b"}))
                .unwrap();
        assert_eq!(m.name(), "a");
        assert_eq!(m.input(), (Some("b"), None));
        assert_eq!(m.type_name(), "longSum");
        let c: MetricSpec = serde_json::from_value(json!({"type": "count", "name": "n"})).unwrap();
        assert_eq!(c.name(), "n");
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type": "count", "name": "n"})
        );
        let e = serde_json::from_value::<MetricSpec>(
            json!({"type": "longSum", "name": "a", "fieldNme": "b"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("fieldNme"), "{e}");
        let e = serde_json::from_value::<MetricSpec>(json!({"type": "median", "name": "a"}))
            .unwrap_err();
        assert!(e.to_string().contains("median"), "{e}");
    }
}
