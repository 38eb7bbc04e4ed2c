//! Native batch ingestion specs (`index_parallel`, `index`), as in the spec's "Ingestion spec"
//! section and Druid's `docs/ingestion/ingestion-spec.md`.
//!
//! Every field the spec lists is accepted (and echoed back in the task payload); a field that is
//! not a Druid field is rejected with an error naming its path, e.g.
//! `spec.dataSchema.granularitySpec.segmentGranulrity: unknown field`. Defaults are Druid's
//! observed defaults for batch tasks (spec: "Effective values observed for batch tuning when
//! not set").

use dolmen_common::{Granularity, Interval};
use dolmen_segment::ColumnType;
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
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DimensionSchema {
    /// A string dimension by name.
    Name(String),
    /// A typed dimension.
    Typed(TypedDimension),
}

impl<'de> Deserialize<'de> for DimensionSchema {
    /// A string is a name; an object is a [`TypedDimension`], whose own errors (unknown field,
    /// bad `multiValueHandling`) come through with their path.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = DimensionSchema;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a dimension name or a dimension object")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(DimensionSchema::Name(v.to_string()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                TypedDimension::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(DimensionSchema::Typed)
            }
        }
        d.deserialize_any(V)
    }
}

/// A dimension object: `{"type": "long", "name": "added"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypedDimension {
    /// `string` (default), `long`, `float`, `double`, or `auto` (Druid's auto column: the
    /// type follows the data, or `castToType`; see [`TypedDimension::column_type`]).
    #[serde(rename = "type", default = "default_dim_type")]
    pub dim_type: String,
    /// For an `auto` dimension: the type its values are cast to (`STRING`, `LONG`, `DOUBLE`,
    /// `ARRAY<STRING>`, `ARRAY<LONG>`, `ARRAY<DOUBLE>`, case-insensitive; `FLOAT` as `DOUBLE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cast_to_type: Option<String>,
    /// Column name.
    pub name: String,
    /// `SORTED_ARRAY` (default), `SORTED_SET`, `ARRAY` (multi-value strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_value_handling: Option<MultiValueHandling>,
    /// Whether to index the dimension (Parquet statistics are always written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_bitmap_index: Option<bool>,
}

fn default_dim_type() -> String {
    "string".to_string()
}

/// The column type named by an `auto` dimension's `castToType` (Druid's `ColumnType` names),
/// `None` for a name it does not know.
pub fn cast_to_column_type(name: &str) -> Option<ColumnType> {
    match name.trim().to_ascii_uppercase().as_str() {
        "STRING" => Some(ColumnType::String),
        "LONG" => Some(ColumnType::Long),
        "FLOAT" | "DOUBLE" => Some(ColumnType::Double),
        "ARRAY<STRING>" => Some(ColumnType::StringArray),
        "ARRAY<LONG>" => Some(ColumnType::LongArray),
        "ARRAY<FLOAT>" | "ARRAY<DOUBLE>" => Some(ColumnType::DoubleArray),
        "COMPLEX<JSON>" | "JSON" => Some(ColumnType::Json),
        _ => None,
    }
}

impl TypedDimension {
    /// The stored type when fixed by the spec: `long`, `float`, `double`, `string`, or `auto`
    /// with `castToType`. `None` for `auto` without it (the type follows the data).
    pub fn column_type(&self) -> Option<ColumnType> {
        match self.dim_type.as_str() {
            "long" => Some(ColumnType::Long),
            "float" => Some(ColumnType::Float),
            "double" => Some(ColumnType::Double),
            "json" => Some(ColumnType::Json),
            "auto" => self.cast_to_type.as_deref().and_then(cast_to_column_type),
            _ => Some(ColumnType::String),
        }
    }
}

/// How a string dimension stores a row with several values (`multiValueHandling`, Druid's
/// `docs/querying/multi-value-dimensions.md`). Names are read case-insensitively and written
/// upper-case, as Druid's `MultiValueHandling.fromString` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MultiValueHandling {
    /// Sort the values, keep duplicates (the default).
    #[default]
    SortedArray,
    /// Sort the values and drop duplicates.
    SortedSet,
    /// Keep the values in input order.
    Array,
}

impl MultiValueHandling {
    /// Druid's name: `SORTED_ARRAY`, `SORTED_SET` or `ARRAY`.
    pub fn as_str(self) -> &'static str {
        match self {
            MultiValueHandling::SortedArray => "SORTED_ARRAY",
            MultiValueHandling::SortedSet => "SORTED_SET",
            MultiValueHandling::Array => "ARRAY",
        }
    }
}

impl Serialize for MultiValueHandling {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for MultiValueHandling {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.to_ascii_uppercase().as_str() {
            "SORTED_ARRAY" => Ok(MultiValueHandling::SortedArray),
            "SORTED_SET" => Ok(MultiValueHandling::SortedSet),
            "ARRAY" => Ok(MultiValueHandling::Array),
            _ => Err(serde::de::Error::custom(format!(
                "unknown multiValueHandling [{s}]; expected SORTED_ARRAY, SORTED_SET or ARRAY"
            ))),
        }
    }
}

impl DimensionSchema {
    /// The dimension's name.
    pub fn name(&self) -> &str {
        match self {
            DimensionSchema::Name(n) => n,
            DimensionSchema::Typed(t) => &t.name,
        }
    }

    /// The effective `multiValueHandling` (default `SORTED_ARRAY`).
    pub fn multi_value_handling(&self) -> MultiValueHandling {
        match self {
            DimensionSchema::Name(_) => MultiValueHandling::default(),
            DimensionSchema::Typed(t) => t.multi_value_handling.unwrap_or_default(),
        }
    }
}

/// An ingestion-time aggregator (`metricsSpec` element): `{"type": "longSum", "name": ...,
/// "fieldName": ...}` (Druid's `docs/ingestion/ingestion-spec.md#metricsspec` and
/// `docs/querying/aggregations.md`).
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
    /// The long value at the earliest time.
    LongFirst(FirstLastAggregator),
    /// The long value at the latest time.
    LongLast(FirstLastAggregator),
    /// The double value at the earliest time.
    DoubleFirst(FirstLastAggregator),
    /// The double value at the latest time.
    DoubleLast(FirstLastAggregator),
    /// The float value at the earliest time.
    FloatFirst(FirstLastAggregator),
    /// The float value at the latest time.
    FloatLast(FirstLastAggregator),
    /// The string value at the earliest time.
    StringFirst(StringFirstLastAggregator),
    /// The string value at the latest time.
    StringLast(StringFirstLastAggregator),
    /// Druid's own HyperLogLog distinct-count sketch (`COMPLEX<hyperUnique>`).
    HyperUnique(HyperUniqueAggregator),
    /// An Apache DataSketches HLL sketch of the input values (`COMPLEX<HLLSketch>`).
    #[serde(rename = "HLLSketchBuild")]
    HllSketchBuild(HllSketchAggregator),
    /// An Apache DataSketches HLL sketch merged from input sketches (base64 or bytes).
    #[serde(rename = "HLLSketchMerge")]
    HllSketchMerge(HllSketchAggregator),
    /// An Apache DataSketches theta sketch (`COMPLEX<thetaSketch>`).
    ThetaSketch(ThetaSketchAggregator),
    /// An Apache DataSketches classic quantiles sketch of doubles
    /// (`COMPLEX<quantilesDoublesSketch>`).
    QuantilesDoublesSketch(QuantilesSketchAggregator),
}

/// `hyperUnique` (Druid's `docs/querying/aggregations.md#cardinality-hyperunique`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HyperUniqueAggregator {
    /// Output column.
    pub name: String,
    /// Input field.
    pub field_name: String,
    /// The input holds serialized collectors (base64) to merge rather than values.
    #[serde(default)]
    pub is_input_hyper_unique: bool,
    /// Query-time rounding of the estimate (kept for round-tripping; not used at ingestion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<bool>,
}

/// `HLLSketchBuild` / `HLLSketchMerge` (Druid's
/// `docs/development/extensions-core/datasketches-hll.md`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HllSketchAggregator {
    /// Output column.
    pub name: String,
    /// Input field.
    pub field_name: String,
    /// log2 of the number of buckets, 4..=21 (default 12).
    #[serde(default = "default_hll_lg_k", rename = "lgK")]
    pub lg_k: u8,
    /// `HLL_4` (default), `HLL_6` or `HLL_8`.
    #[serde(default = "default_hll_type")]
    pub tgt_hll_type: String,
    /// `utf16le` (default) or `utf8`: the bytes of a string that are hashed.
    #[serde(default = "default_hll_encoding")]
    pub string_encoding: String,
    /// Query-time option (kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<bool>,
    /// Query-time option (kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_finalize: Option<bool>,
}

fn default_hll_lg_k() -> u8 {
    12
}
fn default_hll_type() -> String {
    "HLL_4".into()
}
fn default_hll_encoding() -> String {
    "utf16le".into()
}

/// `thetaSketch` (Druid's `docs/development/extensions-core/datasketches-theta.md`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThetaSketchAggregator {
    /// Output column.
    pub name: String,
    /// Input field.
    pub field_name: String,
    /// Nominal entries: a power of 2 (default 16384).
    #[serde(default = "default_theta_size")]
    pub size: u32,
    /// The input holds serialized theta sketches (base64) to merge rather than values.
    #[serde(default)]
    pub is_input_theta_sketch: bool,
    /// Query-time option (kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_finalize: Option<bool>,
    /// Query-time option (kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_bounds_std_dev: Option<u8>,
}

fn default_theta_size() -> u32 {
    dolmen_sketch::THETA_DEFAULT_SIZE
}

/// `quantilesDoublesSketch` (Druid's `docs/development/extensions-core/datasketches-quantiles.md`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuantilesSketchAggregator {
    /// Output column.
    pub name: String,
    /// Input field: numbers, or serialized sketches (base64) to merge.
    pub field_name: String,
    /// Accuracy parameter: a power of 2 from 2 to 32768 (default 128).
    #[serde(default = "default_quantiles_k")]
    pub k: u16,
    /// Query-time memory hint (kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stream_length: Option<u64>,
    /// Query-time option (kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_finalize: Option<bool>,
}

fn default_quantiles_k() -> u16 {
    128
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

/// The fields of a numeric first/last aggregator (`longFirst`, `doubleLast`, ...):
/// `{"type": "longFirst", "name": ..., "fieldName": ..., "timeColumn": ...}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FirstLastAggregator {
    /// Output column.
    pub name: String,
    /// Input field.
    pub field_name: String,
    /// Field holding each row's time in epoch milliseconds (default `__time`, the row's
    /// timestamp before `queryGranularity` truncation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_column: Option<String>,
}

/// The fields of `stringFirst` / `stringLast`: a [`FirstLastAggregator`] plus
/// `maxStringBytes`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StringFirstLastAggregator {
    /// Output column.
    pub name: String,
    /// Input field.
    pub field_name: String,
    /// Field holding each row's time in epoch milliseconds (default `__time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_column: Option<String>,
    /// Longest value kept, in UTF-8 bytes (default 1024); longer values are cut at a character
    /// boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_string_bytes: Option<u32>,
}

/// Druid's default `maxStringBytes` of `stringFirst`/`stringLast`.
pub const DEFAULT_MAX_STRING_BYTES: u32 = 1024;

impl MetricSpec {
    fn fields(&self) -> Option<&FieldAggregator> {
        match self {
            MetricSpec::LongSum(f)
            | MetricSpec::DoubleSum(f)
            | MetricSpec::FloatSum(f)
            | MetricSpec::LongMin(f)
            | MetricSpec::LongMax(f)
            | MetricSpec::DoubleMin(f)
            | MetricSpec::DoubleMax(f) => Some(f),
            _ => None,
        }
    }

    /// Output column name.
    pub fn name(&self) -> &str {
        match self {
            MetricSpec::Count(c) => &c.name,
            MetricSpec::LongFirst(f)
            | MetricSpec::LongLast(f)
            | MetricSpec::DoubleFirst(f)
            | MetricSpec::DoubleLast(f)
            | MetricSpec::FloatFirst(f)
            | MetricSpec::FloatLast(f) => &f.name,
            MetricSpec::StringFirst(f) | MetricSpec::StringLast(f) => &f.name,
            MetricSpec::HyperUnique(h) => &h.name,
            MetricSpec::HllSketchBuild(h) | MetricSpec::HllSketchMerge(h) => &h.name,
            MetricSpec::ThetaSketch(t) => &t.name,
            MetricSpec::QuantilesDoublesSketch(q) => &q.name,
            other => other.fields().map_or("", |f| f.name.as_str()),
        }
    }

    /// Input field and expression, if any.
    pub fn input(&self) -> (Option<&str>, Option<&str>) {
        match self {
            MetricSpec::LongFirst(f)
            | MetricSpec::LongLast(f)
            | MetricSpec::DoubleFirst(f)
            | MetricSpec::DoubleLast(f)
            | MetricSpec::FloatFirst(f)
            | MetricSpec::FloatLast(f) => (Some(f.field_name.as_str()), None),
            MetricSpec::StringFirst(f) | MetricSpec::StringLast(f) => {
                (Some(f.field_name.as_str()), None)
            }
            MetricSpec::HyperUnique(h) => (Some(h.field_name.as_str()), None),
            MetricSpec::HllSketchBuild(h) | MetricSpec::HllSketchMerge(h) => {
                (Some(h.field_name.as_str()), None)
            }
            MetricSpec::ThetaSketch(t) => (Some(t.field_name.as_str()), None),
            MetricSpec::QuantilesDoublesSketch(q) => (Some(q.field_name.as_str()), None),
            other => match other.fields() {
                Some(f) => (f.field_name.as_deref(), f.expression.as_deref()),
                None => (None, None),
            },
        }
    }

    /// For first/last aggregators: the `timeColumn` (`None` for the default `__time`).
    pub fn time_column(&self) -> Option<&str> {
        let t = match self {
            MetricSpec::LongFirst(f)
            | MetricSpec::LongLast(f)
            | MetricSpec::DoubleFirst(f)
            | MetricSpec::DoubleLast(f)
            | MetricSpec::FloatFirst(f)
            | MetricSpec::FloatLast(f) => f.time_column.as_deref(),
            MetricSpec::StringFirst(f) | MetricSpec::StringLast(f) => f.time_column.as_deref(),
            _ => None,
        };
        t.filter(|c| *c != crate::TIME_COLUMN)
    }

    /// For `stringFirst`/`stringLast`: the effective `maxStringBytes` (default 1024); `None`
    /// for other aggregators.
    pub fn max_string_bytes(&self) -> Option<u32> {
        match self {
            MetricSpec::StringFirst(f) | MetricSpec::StringLast(f) => {
                Some(f.max_string_bytes.unwrap_or(DEFAULT_MAX_STRING_BYTES))
            }
            _ => None,
        }
    }

    /// Input fields the aggregator reads (input field and `timeColumn`), which schema
    /// discovery leaves out of the dimensions as Druid does (`AggregatorFactory.requiredFields`).
    pub fn required_fields(&self) -> impl Iterator<Item = &str> {
        self.input().0.into_iter().chain(self.time_column())
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
            MetricSpec::LongFirst(_) => "longFirst",
            MetricSpec::LongLast(_) => "longLast",
            MetricSpec::DoubleFirst(_) => "doubleFirst",
            MetricSpec::DoubleLast(_) => "doubleLast",
            MetricSpec::FloatFirst(_) => "floatFirst",
            MetricSpec::FloatLast(_) => "floatLast",
            MetricSpec::StringFirst(_) => "stringFirst",
            MetricSpec::StringLast(_) => "stringLast",
            MetricSpec::HyperUnique(_) => "hyperUnique",
            MetricSpec::HllSketchBuild(_) => "HLLSketchBuild",
            MetricSpec::HllSketchMerge(_) => "HLLSketchMerge",
            MetricSpec::ThetaSketch(_) => "thetaSketch",
            MetricSpec::QuantilesDoublesSketch(_) => "quantilesDoublesSketch",
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
    /// How to parse (may be omitted only for the `druid` input source).
    #[serde(default = "crate::input::absent_input_format")]
    pub input_format: InputFormat,
    /// Add segments to existing time chunks instead of replacing them.
    #[serde(default)]
    pub append_to_existing: bool,
    /// Drop existing segments in `granularitySpec.intervals` that the new data does not cover.
    #[serde(default)]
    pub drop_existing: bool,
}

/// `partitionsSpec`: how each time chunk's rows are split into segments (Druid's
/// `docs/ingestion/native-batch.md#partitionsspec`).
///
/// `dynamic` cuts a chunk every `maxRowsPerSegment` rows (best-effort rollup in Druid; Dolmen's
/// rollup within one task is always perfect). `hashed` puts each row in the bucket of a hash of
/// its partition dimensions, `single_dim` and `range` in the segment whose dimension-value range
/// holds it; these "secondary partitioning" kinds need `forceGuaranteedRollup` and cannot
/// append, as in Druid.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
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
    /// Hash partitioning.
    #[serde(rename_all = "camelCase")]
    Hashed {
        /// Buckets per time chunk (exclusive with `targetRowsPerSegment`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        num_shards: Option<u32>,
        /// Rows per segment aimed at; buckets per chunk = ceil(rows / target) (default 5000000
        /// when `numShards` is absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_rows_per_segment: Option<u64>,
        /// Deprecated alias of `targetRowsPerSegment`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_rows_per_segment: Option<u64>,
        /// Dimensions hashed (default: all dimensions and the truncated timestamp).
        #[serde(default)]
        partition_dimensions: Vec<String>,
        /// Hash function (only `murmur3_32_abs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition_function: Option<String>,
        /// Accepted and unused, as in Druid, whose hash partitioning ignores it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_total_rows: Option<u64>,
    },
    /// Range partitioning on one dimension.
    #[serde(rename_all = "camelCase")]
    SingleDim {
        /// The partition dimension (a string dimension).
        partition_dimension: String,
        /// Rows per segment aimed at (exactly one of this and `maxRowsPerSegment`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_rows_per_segment: Option<u64>,
        /// Upper bound of rows per segment (exactly one of this and `targetRowsPerSegment`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_rows_per_segment: Option<u64>,
        /// Accepted (the input is grouped by the build in any case).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assume_grouped: Option<bool>,
        /// Accepted and unused, as in Druid, whose range partitioning ignores it (its specs and
        /// tests carry it over from `dynamic`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_total_rows: Option<u64>,
    },
    /// Range partitioning on several dimensions.
    #[serde(rename_all = "camelCase")]
    Range {
        /// The partition dimensions, in order (string dimensions).
        partition_dimensions: Vec<String>,
        /// Rows per segment aimed at (exactly one of this and `maxRowsPerSegment`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_rows_per_segment: Option<u64>,
        /// Upper bound of rows per segment (exactly one of this and `targetRowsPerSegment`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_rows_per_segment: Option<u64>,
        /// Accepted (the input is grouped by the build in any case).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assume_grouped: Option<bool>,
        /// Accepted and unused, as in Druid, whose range partitioning ignores it (its specs and
        /// tests carry it over from `dynamic`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_total_rows: Option<u64>,
    },
}

impl PartitionsSpec {
    /// The Druid type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            PartitionsSpec::Dynamic { .. } => "dynamic",
            PartitionsSpec::Hashed { .. } => "hashed",
            PartitionsSpec::SingleDim { .. } => "single_dim",
            PartitionsSpec::Range { .. } => "range",
        }
    }

    /// Whether this is a secondary (hash or range) partitioning, which needs perfect rollup.
    pub fn is_secondary(&self) -> bool {
        !matches!(self, PartitionsSpec::Dynamic { .. })
    }
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
            // Secondary partitioning decides segment sizes itself.
            Some(_) => Some(u64::MAX),
            None => None,
        };
        from_partitions
            .or(self.max_rows_per_segment)
            .unwrap_or(5_000_000)
            .max(1)
    }

    /// The partitioning in effect: `partitionsSpec`, else the legacy `numShards` /
    /// `partitionDimensions` fields as a `hashed` spec, else none (dynamic).
    pub fn effective_partitions(&self) -> Option<PartitionsSpec> {
        if let Some(p) = &self.partitions_spec {
            return Some(p.clone());
        }
        let shards = self.num_shards.filter(|n| *n > 0)?;
        Some(PartitionsSpec::Hashed {
            num_shards: u32::try_from(shards).ok(),
            target_rows_per_segment: None,
            max_rows_per_segment: None,
            partition_dimensions: self.partition_dimensions.clone().unwrap_or_default(),
            partition_function: None,
            max_total_rows: None,
        })
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

/// Druid's rules for `partitionsSpec` (`docs/ingestion/native-batch.md`): secondary
/// partitioning needs `forceGuaranteedRollup` and no appending, `forceGuaranteedRollup` needs a
/// secondary partitioning, `hashed` takes at most one of `numShards` and
/// `targetRowsPerSegment`, `single_dim`/`range` exactly one of `targetRowsPerSegment` and
/// `maxRowsPerSegment` and string partition dimensions that are dimensions of the spec.
fn validate_partitioning(spec: &IndexTaskSpec) -> Result<(), IngestError> {
    let tuning = &spec.spec.tuning_config;
    let bad = |msg: String| Err(IngestError::InvalidSpec(format!("spec.tuningConfig.{msg}")));
    let Some(p) = tuning.effective_partitions() else {
        if tuning.force_guaranteed_rollup == Some(true) {
            return bad(
                "forceGuaranteedRollup: needs a hashed, single_dim or range partitionsSpec".into(),
            );
        }
        return Ok(());
    };
    let forced = tuning.force_guaranteed_rollup == Some(true);
    if p.is_secondary() && !forced {
        return bad(format!(
            "partitionsSpec: [{}] partitioning needs forceGuaranteedRollup = true; use dynamic partitioning for best-effort rollup",
            p.type_name()
        ));
    }
    if !p.is_secondary() && forced {
        return bad("forceGuaranteedRollup: needs a hashed, single_dim or range partitionsSpec, not dynamic".into());
    }
    if forced && spec.spec.io_config.append_to_existing {
        return bad("forceGuaranteedRollup: perfect rollup cannot be guaranteed when appending to existing data (spec.ioConfig.appendToExisting)".into());
    }
    let dims = &spec.spec.data_schema.dimensions_spec.dimensions;
    let string_dim = |name: &str, field: &str| -> Result<(), IngestError> {
        match dims.iter().find(|d| d.name() == name) {
            Some(DimensionSchema::Typed(t)) if t.dim_type != "string" => bad(format!(
                "partitionsSpec.{field}: [{name}] must be a string dimension, not {}",
                t.dim_type
            )),
            Some(_) => Ok(()),
            None if dims.is_empty() => Ok(()),
            None => bad(format!(
                "partitionsSpec.{field}: [{name}] is not in spec.dataSchema.dimensionsSpec.dimensions"
            )),
        }
    };
    match &p {
        PartitionsSpec::Dynamic { .. } => {}
        PartitionsSpec::Hashed {
            num_shards,
            target_rows_per_segment,
            max_rows_per_segment,
            partition_dimensions,
            partition_function,
            ..
        } => {
            if num_shards.is_some() && (target_rows_per_segment.or(*max_rows_per_segment)).is_some()
            {
                return bad(
                    "partitionsSpec: numShards and targetRowsPerSegment cannot both be set".into(),
                );
            }
            if *num_shards == Some(0) {
                return bad("partitionsSpec.numShards: must be positive".into());
            }
            if target_rows_per_segment.or(*max_rows_per_segment) == Some(0) {
                return bad("partitionsSpec.targetRowsPerSegment: must be positive".into());
            }
            if let Some(f) = partition_function
                && !f.eq_ignore_ascii_case("murmur3_32_abs")
            {
                return bad(format!(
                    "partitionsSpec.partitionFunction: unknown function [{f}]; expected murmur3_32_abs"
                ));
            }
            for d in partition_dimensions {
                if !dims.is_empty() && !dims.iter().any(|x| x.name() == d) {
                    return bad(format!(
                        "partitionsSpec.partitionDimensions: [{d}] is not in spec.dataSchema.dimensionsSpec.dimensions"
                    ));
                }
            }
        }
        PartitionsSpec::SingleDim {
            partition_dimension,
            target_rows_per_segment,
            max_rows_per_segment,
            ..
        } => {
            range_sizes(*target_rows_per_segment, *max_rows_per_segment)?;
            string_dim(partition_dimension, "partitionDimension")?;
        }
        PartitionsSpec::Range {
            partition_dimensions,
            target_rows_per_segment,
            max_rows_per_segment,
            ..
        } => {
            range_sizes(*target_rows_per_segment, *max_rows_per_segment)?;
            if partition_dimensions.is_empty() {
                return bad(
                    "partitionsSpec.partitionDimensions: at least one dimension is needed".into(),
                );
            }
            for d in partition_dimensions {
                string_dim(d, "partitionDimensions")?;
            }
        }
    }
    Ok(())
}

fn range_sizes(target: Option<u64>, max: Option<u64>) -> Result<(), IngestError> {
    match (target, max) {
        (Some(0), _) | (_, Some(0)) => Err(IngestError::InvalidSpec(
            "spec.tuningConfig.partitionsSpec: targetRowsPerSegment and maxRowsPerSegment must be positive".into(),
        )),
        (Some(_), None) | (None, Some(_)) => Ok(()),
        _ => Err(IngestError::InvalidSpec(
            "spec.tuningConfig.partitionsSpec: exactly one of targetRowsPerSegment or maxRowsPerSegment must be present".into(),
        )),
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

/// Removes the members of JSON objects whose value is `null`, except inside filters.
///
/// Druid reads a `null` property of an ingestion spec as an absent one: Jackson hands a spec
/// class's constructor `null` for both, and the constructors replace it with the default
/// (`"queryGranularity": null` is `NONE`, `"metricsSpec": null` is no metrics). Inside a filter
/// a null value means "matches null" (`{"type": "selector", "dimension": "d", "value": null}`),
/// so filters are kept as written. Array elements are kept.
fn strip_null_members(v: &mut Value) {
    match v {
        Value::Object(members) => {
            members.retain(|_, x| !x.is_null());
            for (name, x) in members.iter_mut() {
                if name != "filter" {
                    strip_null_members(x);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null_members),
        _ => {}
    }
}

impl IndexTaskSpec {
    /// Parses a submission, naming the offending field path on error. A `null` member reads
    /// as an absent one, as in Druid (see [`strip_null_members`]).
    ///
    /// # Errors
    /// [`IngestError::InvalidSpec`] with the JSON path and serde's message.
    pub fn from_json(v: &Value) -> Result<IndexTaskSpec, IngestError> {
        let mut v = v.clone();
        strip_null_members(&mut v);
        let v = &v;
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
        crate::input::validate_io_config(
            &spec.spec.io_config.input_source,
            v.pointer("/spec/ioConfig/inputFormat").is_some(),
        )?;
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
        validate_partitioning(self)?;
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
            if crate::index::is_hidden_column(n) {
                return Err(IngestError::InvalidSpec(format!(
                    "spec.dataSchema.dimensionsSpec.dimensions: [{n}] is a reserved column name"
                )));
            }
            if let DimensionSchema::Typed(t) = d {
                if !matches!(
                    t.dim_type.as_str(),
                    "string" | "long" | "float" | "double" | "auto" | "json"
                ) {
                    return Err(IngestError::InvalidSpec(format!(
                        "spec.dataSchema.dimensionsSpec.dimensions: dimension [{n}] has unsupported type [{}]; expected string, long, float, double, auto or json",
                        t.dim_type
                    )));
                }
                if let Some(c) = &t.cast_to_type {
                    if t.dim_type != "auto" {
                        return Err(IngestError::InvalidSpec(format!(
                            "spec.dataSchema.dimensionsSpec.dimensions: dimension [{n}] sets castToType, which only an [auto] dimension takes"
                        )));
                    }
                    if cast_to_column_type(c).is_none() {
                        return Err(IngestError::InvalidSpec(format!(
                            "spec.dataSchema.dimensionsSpec.dimensions: dimension [{n}] has unsupported castToType [{c}]; expected STRING, LONG, DOUBLE, ARRAY<STRING>, ARRAY<LONG> or ARRAY<DOUBLE>"
                        )));
                    }
                }
            }
        }
        if !ds.dimensions_spec.spatial_dimensions.is_empty() {
            return Err(IngestError::InvalidSpec(
                "spec.dataSchema.dimensionsSpec.spatialDimensions: spatial dimensions are not supported".into(),
            ));
        }
        for m in &ds.metrics_spec {
            let n = m.name();
            if n.is_empty() || n == crate::TIME_COLUMN || crate::index::is_hidden_column(n) {
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
                (Some(""), None) => {
                    return Err(IngestError::InvalidSpec(format!(
                        "spec.dataSchema.metricsSpec: metric [{n}] has an empty fieldName"
                    )));
                }
                _ => {}
            }
            if let MetricSpec::LongFirst(FirstLastAggregator { time_column, .. })
            | MetricSpec::LongLast(FirstLastAggregator { time_column, .. })
            | MetricSpec::DoubleFirst(FirstLastAggregator { time_column, .. })
            | MetricSpec::DoubleLast(FirstLastAggregator { time_column, .. })
            | MetricSpec::FloatFirst(FirstLastAggregator { time_column, .. })
            | MetricSpec::FloatLast(FirstLastAggregator { time_column, .. })
            | MetricSpec::StringFirst(StringFirstLastAggregator { time_column, .. })
            | MetricSpec::StringLast(StringFirstLastAggregator { time_column, .. }) = m
                && time_column.as_deref() == Some("")
            {
                return Err(IngestError::InvalidSpec(format!(
                    "spec.dataSchema.metricsSpec: metric [{n}] has an empty timeColumn"
                )));
            }
            crate::rows::MetricKind::try_of(m).map_err(|e| {
                IngestError::InvalidSpec(format!("spec.dataSchema.metricsSpec: metric [{n}]: {e}"))
            })?;
        }
        // The input format's own settings (columns, delimiters, flattenSpec, Avro schema).
        self.spec
            .io_config
            .input_format
            .validate()
            .map_err(|e| IngestError::InvalidSpec(format!("spec.ioConfig.inputFormat: {e}")))?;
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

    fn minimal_task(edit: impl FnOnce(&mut Value)) -> Value {
        let mut v = json!({
            "type": "index_parallel",
            "spec": {
                "dataSchema": {
                    "dataSource": "ds",
                    "timestampSpec": {"column": "t", "format": "auto"},
                    "dimensionsSpec": {"dimensions": ["d"]},
                    "granularitySpec": {"segmentGranularity": "DAY"}
                },
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": {"type": "inline", "data": "{}"},
                    "inputFormat": {"type": "json"}
                },
                "tuningConfig": {"type": "index_parallel"}
            }
        });
        edit(&mut v);
        v
    }

    #[test]
    fn null_members_read_as_absent_except_inside_filters() {
        // Druid's spec constructors read a null property as the default.
        let v = minimal_task(|v| {
            let ds = &mut v["spec"]["dataSchema"];
            ds["metricsSpec"] = Value::Null;
            ds["granularitySpec"]["queryGranularity"] = Value::Null;
            ds["granularitySpec"]["rollup"] = Value::Null;
            ds["timestampSpec"]["missingValue"] = Value::Null;
            ds["dimensionsSpec"]["dimensionExclusions"] = Value::Null;
            ds["transformSpec"] = json!({
                "transforms": null,
                "filter": {"type": "selector", "dimension": "d", "value": null}
            });
            v["spec"]["tuningConfig"]["partitionsSpec"] = Value::Null;
            v["spec"]["ioConfig"]["appendToExisting"] = Value::Null;
        });
        let spec = IndexTaskSpec::from_json(&v).unwrap();
        let ds = &spec.spec.data_schema;
        assert!(ds.metrics_spec.is_empty());
        assert!(matches!(
            ds.granularity_spec.query_granularity,
            Granularity::None
        ));
        assert!(ds.granularity_spec.rollup);
        assert!(ds.transform_spec.transforms.is_empty());
        // The selector's null value is kept: it matches rows without `d`.
        let filter = serde_json::to_value(ds.transform_spec.filter.as_ref().unwrap()).unwrap();
        assert_eq!(filter["value"], Value::Null, "{filter}");
        assert!(spec.spec.tuning_config.partitions_spec.is_none());
        // A null where a value is required still names the field.
        let v = minimal_task(|v| v["spec"]["dataSchema"]["dataSource"] = Value::Null);
        let e = IndexTaskSpec::from_json(&v).unwrap_err().to_string();
        assert!(e.contains("dataSource"), "{e}");
    }

    #[test]
    fn secondary_partitions_accept_max_total_rows_as_druid_does() {
        for partitions in [
            json!({"type": "range", "partitionDimensions": ["d"], "targetRowsPerSegment": 10, "maxTotalRows": 100}),
            json!({"type": "single_dim", "partitionDimension": "d", "targetRowsPerSegment": 10, "maxTotalRows": 100}),
            json!({"type": "hashed", "numShards": 2, "maxTotalRows": 100}),
        ] {
            let v = minimal_task(|v| {
                v["spec"]["tuningConfig"]["partitionsSpec"] = partitions.clone();
                v["spec"]["tuningConfig"]["forceGuaranteedRollup"] = json!(true);
            });
            IndexTaskSpec::from_json(&v).unwrap_or_else(|e| panic!("{partitions}: {e}"));
        }
    }

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

    #[test]
    fn first_last_metric_specs() {
        let m: MetricSpec = serde_json::from_value(
            json!({"type": "stringLast", "name": "s", "fieldName": "page", "timeColumn": "t", "maxStringBytes": 10}),
        )
        .unwrap();
        assert_eq!(m.type_name(), "stringLast");
        assert_eq!(m.input(), (Some("page"), None));
        assert_eq!(m.time_column(), Some("t"));
        assert_eq!(m.max_string_bytes(), Some(10));
        assert_eq!(m.required_fields().collect::<Vec<_>>(), vec!["page", "t"]);
        let m: MetricSpec = serde_json::from_value(
            json!({"type": "longFirst", "name": "f", "fieldName": "n", "timeColumn": "__time"}),
        )
        .unwrap();
        assert_eq!(m.time_column(), None);
        assert_eq!(m.max_string_bytes(), None);
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"type": "longFirst", "name": "f", "fieldName": "n", "timeColumn": "__time"})
        );
        // Numeric kinds have no maxStringBytes; fieldName is required.
        let e = serde_json::from_value::<MetricSpec>(
            json!({"type": "doubleFirst", "name": "f", "fieldName": "n", "maxStringBytes": 1}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("maxStringBytes"), "{e}");
        let e = serde_json::from_value::<MetricSpec>(json!({"type": "floatLast", "name": "f"}))
            .unwrap_err();
        assert!(e.to_string().contains("fieldName"), "{e}");
    }

    #[test]
    fn multi_value_handling_parses_case_insensitively() {
        let d: DimensionSchema = serde_json::from_value(
            json!({"type": "string", "name": "tags", "multiValueHandling": "sorted_set"}),
        )
        .unwrap();
        assert_eq!(d.multi_value_handling(), MultiValueHandling::SortedSet);
        let DimensionSchema::Typed(t) = &d else {
            panic!("typed")
        };
        assert_eq!(
            serde_json::to_value(t).unwrap()["multiValueHandling"],
            json!("SORTED_SET")
        );
        assert_eq!(
            DimensionSchema::Name("x".into()).multi_value_handling(),
            MultiValueHandling::SortedArray
        );
        let v = json!({
            "type": "index_parallel",
            "spec": {
                "dataSchema": {
                    "dataSource": "ds",
                    "dimensionsSpec": {"dimensions": [{"type": "string", "name": "tags", "multiValueHandling": "BOGUS"}]}
                },
                "ioConfig": {"type": "index_parallel", "inputSource": {"type": "inline", "data": ""}, "inputFormat": {"type": "json"}}
            }
        });
        let e = IndexTaskSpec::from_json(&v).unwrap_err().to_string();
        assert!(
            e.contains("dimensions[0].multiValueHandling") && e.contains("BOGUS"),
            "{e}"
        );
    }
}
