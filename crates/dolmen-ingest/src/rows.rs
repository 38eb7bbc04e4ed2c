//! Rows as the indexer holds them: typed dimension values and metric accumulators, with the
//! sort order of segment files (`__time`, then dimensions in order, nulls first) and rollup.
//!
//! # Multi-value string dimensions
//! A JSON array (or a CSV/TSV field split by `listDelimiter`) in a string dimension becomes a
//! multi-value row ([`Val::Multi`]) after the dimension's `multiValueHandling`
//! (`SORTED_ARRAY` sorts and keeps duplicates, `SORTED_SET` sorts and drops them, `ARRAY` keeps
//! input order; Druid's `docs/querying/multi-value-dimensions.md`). A row left with one value is
//! the plain string ([`Val::Str`]), an empty array is null. Null elements are kept and sort
//! first. For sorting and rollup the whole (handled) list is the value: lists compare element by
//! element, a shorter prefix first, and a plain string compares as a one-element list.
//!
//! # First/last metrics
//! `longFirst`, `doubleLast`, `stringFirst`, ... keep the value at the earliest (latest) time:
//! the row's timestamp before `queryGranularity` truncation, or the `timeColumn` field. As in
//! Druid's `NumericFirstAggregator`/`NumericLastAggregator` with SQL-compatible nulls, a null
//! value at the earliest (latest) time wins (the result is null), rows without a time are
//! skipped, `first` keeps the earlier-seen row on a tie and `last` takes the later-seen one.
//! The accumulator carries the time ([`Acc::TimedLong`], ...) so that combining partial results
//! (spilled runs, see `index.rs`) stays exact.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use dolmen_segment::ColumnType;
use dolmen_sketch::hyper_unique::HyperLogLogCollector;
use dolmen_sketch::quantiles::DoublesSketch;
use dolmen_sketch::{HllAcc, HllStringEncoding, HllTargetType, SketchError, ThetaAcc};
use serde_json::Value;

use crate::input::InputRow;
use crate::spec::{MetricSpec, MultiValueHandling};

/// One dimension value.
#[derive(Debug, Clone)]
pub enum Val {
    /// Missing or null.
    Null,
    /// A string.
    Str(Box<str>),
    /// A multi-value string row with at least two values (after `multiValueHandling`); elements
    /// may be null. Build it with [`multi_value`].
    Multi(Box<[Option<Box<str>>]>),
    /// A long.
    Long(i64),
    /// A float.
    Float(f32),
    /// A double.
    Double(f64),
    /// A row of an array dimension (`ARRAY<STRING|LONG|DOUBLE>`): the whole array is one value
    /// (`[]` is not null). Elements are [`Val::Null`], [`Val::Str`], [`Val::Long`] or
    /// [`Val::Double`]; a dimension whose type widened after a row was read may hold elements
    /// of the narrower type, which segment writing converts.
    Array(Box<[Val]>),
    /// A row of a `COMPLEX<json>` dimension: the value's compact JSON text.
    Json(Box<str>),
}

impl Val {
    fn rank(&self) -> u8 {
        match self {
            Val::Null => 0,
            Val::Long(_) => 1,
            Val::Float(_) => 2,
            Val::Double(_) => 3,
            Val::Str(_) | Val::Multi(_) => 4,
            Val::Array(_) => 5,
            Val::Json(_) => 6,
        }
    }
}

/// Compares a plain string with a multi-value row as a one-element list.
fn cmp_str_multi(a: &str, b: &[Option<Box<str>>]) -> Ordering {
    match b.first() {
        None => Ordering::Greater,
        Some(None) => Ordering::Greater,
        Some(Some(first)) => a
            .as_bytes()
            .cmp(first.as_bytes())
            .then_with(|| 1.cmp(&b.len())),
    }
}

impl PartialEq for Val {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Val {}

impl PartialOrd for Val {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Val {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Val::Null, Val::Null) => Ordering::Equal,
            (Val::Str(a), Val::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Val::Multi(a), Val::Multi(b)) => a.iter().cmp(b.iter()),
            (Val::Str(a), Val::Multi(b)) => cmp_str_multi(a, b),
            (Val::Multi(a), Val::Str(b)) => cmp_str_multi(b, a).reverse(),
            (Val::Long(a), Val::Long(b)) => a.cmp(b),
            (Val::Float(a), Val::Float(b)) => a.total_cmp(b),
            (Val::Double(a), Val::Double(b)) => a.total_cmp(b),
            (Val::Array(a), Val::Array(b)) => a.iter().cmp(b.iter()),
            (Val::Json(a), Val::Json(b)) => a.as_bytes().cmp(b.as_bytes()),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl Hash for Val {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Val::Null => {}
            Val::Str(s) => s.hash(state),
            Val::Multi(v) => {
                // A plain string never equals a multi-value row (which has two or more values),
                // so the two may hash differently.
                0xffu8.hash(state);
                v.hash(state);
            }
            Val::Long(v) => v.hash(state),
            Val::Float(v) => v.to_bits().hash(state),
            Val::Double(v) => v.to_bits().hash(state),
            Val::Array(v) => v.hash(state),
            Val::Json(v) => v.hash(state),
        }
    }
}

/// Applies `multiValueHandling` to the values of one row and builds its dimension value: null
/// for no values, the plain string (or null) for one, [`Val::Multi`] otherwise.
pub fn multi_value(mut values: Vec<Option<Box<str>>>, handling: MultiValueHandling) -> Val {
    match handling {
        MultiValueHandling::Array => {}
        MultiValueHandling::SortedArray => values.sort_unstable(),
        MultiValueHandling::SortedSet => {
            values.sort_unstable();
            values.dedup();
        }
    }
    match values.len() {
        0 => Val::Null,
        1 => match values.pop().flatten() {
            Some(s) => Val::Str(s),
            None => Val::Null,
        },
        _ => Val::Multi(values.into_boxed_slice()),
    }
}

/// Why a value could not be converted to a dimension's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversionError(pub String);

/// Renders a JSON scalar as Druid renders it for a string dimension: strings as they are,
/// numbers in their JSON form, booleans `true`/`false`; arrays and objects as compact JSON.
pub fn json_to_string(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(a) if a.len() == 1 => json_to_string(&a[0]),
        Value::Array(a) if a.is_empty() => None,
        other => Some(other.to_string()),
    }
}

fn json_to_f64(v: &Value) -> Result<Option<f64>, ConversionError> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        Value::Bool(b) => Ok(Some(if *b { 1.0 } else { 0.0 })),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => s
            .trim()
            .parse::<f64>()
            .map(Some)
            .map_err(|_| ConversionError(format!("could not convert value [{s}] to a number"))),
        other => Err(ConversionError(format!(
            "could not convert value [{other}] to a number"
        ))),
    }
}

fn json_to_i64(v: &Value) -> Result<Option<i64>, ConversionError> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i))
            } else {
                Ok(n.as_f64().map(|f| f as i64))
            }
        }
        Value::String(s) => {
            let t = s.trim();
            if let Ok(i) = t.parse::<i64>() {
                return Ok(Some(i));
            }
            json_to_f64(v).map(|o| o.map(|f| f as i64))
        }
        other => json_to_f64(other).map(|o| o.map(|f| f as i64)),
    }
}

/// Converts an input value to a dimension value of type `ty` with the default
/// `multiValueHandling` (`SORTED_ARRAY`); see [`to_dim_val`].
///
/// # Errors
/// [`ConversionError`] when a numeric dimension gets a non-numeric value or several values.
pub fn to_val(v: Option<&Value>, ty: ColumnType) -> Result<Val, ConversionError> {
    to_dim_val(v, ty, MultiValueHandling::default())
}

/// One element of a multi-value row as text: strings as they are, numbers and booleans in their
/// JSON form, nested arrays and objects as Java renders them ([`java_text`]), null as a null element.
fn element_string(v: &Value) -> Option<Box<str>> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.as_str().into()),
        other => Some(java_text(other).into_boxed_str()),
    }
}

/// A value inside a multi-value row as Druid renders it (`Rows.objectToStrings` calls
/// `String.valueOf` on each element): a nested list is Java's `List.toString()` (`["3",["4"]]`
/// becomes `[3, [4]]`), an object Java's `Map.toString()` (`{a=1, b=x}`), strings unquoted
/// inside them. Druid's quidem corpus, `qaUnnest/mv_sql_select_distinct.all.iq`.
fn java_text(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(java_text).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", java_text(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// Converts an input value to a dimension value of type `ty`, as Druid's
/// `DimensionHandlerUtils.convertObjectTo*` does. For a string dimension a JSON array is a
/// multi-value row, stored after `handling` (see [`multi_value`]). A numeric dimension takes a
/// one-element array as its element and an empty one as null.
///
/// # Errors
/// [`ConversionError`] when a numeric dimension gets a non-numeric value or several values.
pub fn to_dim_val(
    v: Option<&Value>,
    ty: ColumnType,
    handling: MultiValueHandling,
) -> Result<Val, ConversionError> {
    let Some(v) = v else { return Ok(Val::Null) };
    if ty == ColumnType::Json {
        return Ok(match v {
            Value::Null => Val::Null,
            other => Val::Json(other.to_string().into_boxed_str()),
        });
    }
    if let Some(element) = ty.element() {
        // Druid's auto column with an array type: a scalar is a one-element array; elements
        // that do not convert are null (`ExprEval.castTo` of each element).
        return Ok(match v {
            Value::Null => Val::Null,
            Value::Array(items) => {
                Val::Array(items.iter().map(|x| array_element(x, element)).collect())
            }
            other => Val::Array(Box::new([array_element(other, element)])),
        });
    }
    if let Value::Array(items) = v {
        return match (ty, items.as_slice()) {
            (ColumnType::String, _) => Ok(multi_value(
                items.iter().map(element_string).collect(),
                handling,
            )),
            (_, []) => Ok(Val::Null),
            (_, [one]) => to_dim_val(Some(one), ty, handling),
            (_, _) => Err(ConversionError(format!(
                "could not convert value [{v}] to {}: a {} dimension cannot have multiple values",
                ty.druid_name().to_ascii_lowercase(),
                ty.druid_name().to_ascii_lowercase()
            ))),
        };
    }
    Ok(match ty {
        ColumnType::String => match json_to_string(v) {
            Some(s) => Val::Str(s.into_boxed_str()),
            None => Val::Null,
        },
        ColumnType::Long => json_to_i64(v)?.map_or(Val::Null, Val::Long),
        ColumnType::Float => json_to_f64(v)?.map_or(Val::Null, |f| Val::Float(f as f32)),
        ColumnType::Double => json_to_f64(v)?.map_or(Val::Null, Val::Double),
        other => {
            return Err(ConversionError(format!(
                "a dimension cannot have type {}",
                other.druid_name()
            )));
        }
    })
}

/// One element of an array dimension value as type `element` (String, Long or Double):
/// null when it does not convert; nested arrays and objects as their JSON text in a string
/// array, null in a numeric one.
fn array_element(v: &Value, element: ColumnType) -> Val {
    match (element, v) {
        (_, Value::Null) => Val::Null,
        (ColumnType::String, Value::String(s)) => Val::Str(s.as_str().into()),
        (ColumnType::String, other) => Val::Str(other.to_string().into_boxed_str()),
        (_, Value::Array(_) | Value::Object(_)) => Val::Null,
        (ColumnType::Long, other) => match json_to_i64(other) {
            Ok(Some(n)) => Val::Long(n),
            _ => Val::Null,
        },
        (_, other) => match json_to_f64(other) {
            Ok(Some(n)) => Val::Double(n),
            _ => Val::Null,
        },
    }
}

/// Infers a discovered dimension's type from its first value (`useSchemaDiscovery`).
pub fn infer_type(v: &Value) -> ColumnType {
    infer_auto_type(v).unwrap_or(ColumnType::String)
}

/// The type Druid's auto column indexer (`AutoTypeColumnIndexer`, shared by dimension type
/// `auto` and `useSchemaDiscovery`) gives a value: integers and booleans `LONG` (Druid 28+
/// ingests booleans as 1/0), other numbers `DOUBLE`, strings `STRING`; a flat JSON array
/// `ARRAY<LONG>` if all its non-null elements are integers or booleans (also when it has none:
/// `[]` and `[null, null]`, as `ExprEval.coerceListToArray` types them), `ARRAY<DOUBLE>` if
/// they are numbers, else `ARRAY<STRING>` (elements keep their text: `true` stays `true` in
/// `[true, "a"]`); `COMPLEX<json>` for objects and arrays holding objects or arrays. `None`
/// for null (no type information yet).
///
/// Druid's quidem corpus shows each case (`qaUnnest/array`, `qaArray/sql`: `a_bool` reads
/// `[1, 0, null]`, `a_null` is `BIGINT ARRAY`, `a_empty` reads `[]`).
pub fn infer_auto_type(v: &Value) -> Option<ColumnType> {
    match v {
        Value::Null => None,
        Value::Object(_) => Some(ColumnType::Json),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(ColumnType::Long),
        Value::Number(_) => Some(ColumnType::Double),
        Value::Array(items) => {
            let mut element: Option<ColumnType> = None;
            for x in items {
                let t = match x {
                    Value::Null => continue,
                    Value::Array(_) | Value::Object(_) => return Some(ColumnType::Json),
                    x => infer_auto_type(x)?,
                };
                element = Some(element.map_or(t, |e| widen(e, t)));
            }
            ColumnType::array_of(element.unwrap_or(ColumnType::Long))
        }
        Value::Bool(_) => Some(ColumnType::Long),
        Value::String(_) => Some(ColumnType::String),
    }
}

/// The least restrictive of two dimension types, as Druid's
/// `ColumnType.leastRestrictiveType`: `LONG` < `DOUBLE` < `STRING` (a `FLOAT` counts as
/// `DOUBLE`), and a scalar with an array (or two arrays) gives the array of the least
/// restrictive element type; `COMPLEX<json>` with anything is `COMPLEX<json>`.
pub fn widen(a: ColumnType, b: ColumnType) -> ColumnType {
    if a == ColumnType::Json || b == ColumnType::Json {
        return ColumnType::Json;
    }
    fn scalar_rank(t: ColumnType) -> u8 {
        match t {
            ColumnType::Long => 0,
            ColumnType::Float | ColumnType::Double => 1,
            _ => 2,
        }
    }
    let scalar = |t: ColumnType| t.element().unwrap_or(t);
    let (ea, eb) = (scalar(a), scalar(b));
    let e = match scalar_rank(ea).max(scalar_rank(eb)) {
        0 => ColumnType::Long,
        1 => ColumnType::Double,
        _ => ColumnType::String,
    };
    if a.is_array() || b.is_array() {
        ColumnType::array_of(e).unwrap_or(ColumnType::StringArray)
    } else if a == b {
        a
    } else {
        e
    }
}

/// How a metric aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Count of rows.
    Count,
    /// Long sum.
    LongSum,
    /// Long minimum.
    LongMin,
    /// Long maximum.
    LongMax,
    /// Double sum.
    DoubleSum,
    /// Double minimum.
    DoubleMin,
    /// Double maximum.
    DoubleMax,
    /// Float sum.
    FloatSum,
    /// Long value at the earliest time.
    LongFirst,
    /// Long value at the latest time.
    LongLast,
    /// Double value at the earliest time.
    DoubleFirst,
    /// Double value at the latest time.
    DoubleLast,
    /// Float value at the earliest time.
    FloatFirst,
    /// Float value at the latest time.
    FloatLast,
    /// String value at the earliest time.
    StringFirst,
    /// String value at the latest time.
    StringLast,
    /// `HLLSketchBuild` (`merge` false) / `HLLSketchMerge` (`merge` true).
    HllSketch {
        /// log2 of the bucket count.
        lg_k: u8,
        /// Stored register width.
        target: HllTargetType,
        /// Bytes of a string that are hashed.
        encoding: HllStringEncoding,
        /// Inputs are serialized sketches.
        merge: bool,
    },
    /// `thetaSketch`.
    ThetaSketch {
        /// Nominal entries.
        size: u32,
        /// Inputs are serialized sketches (`isInputThetaSketch`).
        merge: bool,
    },
    /// `quantilesDoublesSketch`.
    QuantilesSketch {
        /// Accuracy parameter.
        k: u16,
    },
    /// `hyperUnique`.
    HyperUnique {
        /// Inputs are serialized collectors (`isInputHyperUnique`).
        merge: bool,
    },
}

impl MetricKind {
    /// The kind of a metric spec, with its sketch parameters checked.
    ///
    /// # Errors
    /// A sketch parameter out of range (`lgK`, `tgtHllType`, `stringEncoding`, `size`, `k`); the
    /// message names it.
    pub fn try_of(m: &MetricSpec) -> Result<MetricKind, SketchError> {
        let kind = match m {
            MetricSpec::HllSketchBuild(h) | MetricSpec::HllSketchMerge(h) => {
                MetricKind::HllSketch {
                    lg_k: h.lg_k,
                    target: HllTargetType::from_name(&h.tgt_hll_type)?,
                    encoding: HllStringEncoding::from_name(&h.string_encoding)?,
                    merge: matches!(m, MetricSpec::HllSketchMerge(_)),
                }
            }
            MetricSpec::ThetaSketch(t) => MetricKind::ThetaSketch {
                size: t.size,
                merge: t.is_input_theta_sketch,
            },
            MetricSpec::QuantilesDoublesSketch(q) => MetricKind::QuantilesSketch { k: q.k },
            MetricSpec::HyperUnique(h) => MetricKind::HyperUnique {
                merge: h.is_input_hyper_unique,
            },
            other => MetricKind::of(other),
        };
        if kind.is_sketch() {
            SketchAcc::new(kind)?;
        }
        Ok(kind)
    }

    /// The kind of a metric spec whose parameters [`MetricKind::try_of`] has accepted (the
    /// ingestion spec's validation does); out-of-range sketch parameters fall back to Druid's
    /// defaults here.
    pub fn of(m: &MetricSpec) -> MetricKind {
        match m {
            MetricSpec::HllSketchBuild(_)
            | MetricSpec::HllSketchMerge(_)
            | MetricSpec::ThetaSketch(_)
            | MetricSpec::QuantilesDoublesSketch(_)
            | MetricSpec::HyperUnique(_) => MetricKind::try_of(m).unwrap_or(match m {
                MetricSpec::ThetaSketch(_) => MetricKind::ThetaSketch {
                    size: dolmen_sketch::THETA_DEFAULT_SIZE,
                    merge: false,
                },
                MetricSpec::QuantilesDoublesSketch(_) => MetricKind::QuantilesSketch {
                    k: DoublesSketch::DEFAULT_K,
                },
                MetricSpec::HyperUnique(_) => MetricKind::HyperUnique { merge: false },
                _ => MetricKind::HllSketch {
                    lg_k: 12,
                    target: HllTargetType::default(),
                    encoding: HllStringEncoding::default(),
                    merge: matches!(m, MetricSpec::HllSketchMerge(_)),
                },
            }),
            MetricSpec::Count(_) => MetricKind::Count,
            MetricSpec::LongSum(_) => MetricKind::LongSum,
            MetricSpec::LongMin(_) => MetricKind::LongMin,
            MetricSpec::LongMax(_) => MetricKind::LongMax,
            MetricSpec::DoubleSum(_) => MetricKind::DoubleSum,
            MetricSpec::DoubleMin(_) => MetricKind::DoubleMin,
            MetricSpec::DoubleMax(_) => MetricKind::DoubleMax,
            MetricSpec::FloatSum(_) => MetricKind::FloatSum,
            MetricSpec::LongFirst(_) => MetricKind::LongFirst,
            MetricSpec::LongLast(_) => MetricKind::LongLast,
            MetricSpec::DoubleFirst(_) => MetricKind::DoubleFirst,
            MetricSpec::DoubleLast(_) => MetricKind::DoubleLast,
            MetricSpec::FloatFirst(_) => MetricKind::FloatFirst,
            MetricSpec::FloatLast(_) => MetricKind::FloatLast,
            MetricSpec::StringFirst(_) => MetricKind::StringFirst,
            MetricSpec::StringLast(_) => MetricKind::StringLast,
        }
    }

    /// The Druid type of the aggregator that combines stored values of this metric
    /// (`AggregatorFactory.getCombiningFactory`): a count's and a sum's is the sum of its type,
    /// a min's and a max's itself, a first's and a last's itself (over the stored value and its
    /// hidden time column). `None` for sketches, which are combined by their column type.
    pub fn combining_type(self) -> Option<&'static str> {
        Some(match self {
            MetricKind::Count | MetricKind::LongSum => "longSum",
            MetricKind::LongMin => "longMin",
            MetricKind::LongMax => "longMax",
            MetricKind::DoubleSum => "doubleSum",
            MetricKind::DoubleMin => "doubleMin",
            MetricKind::DoubleMax => "doubleMax",
            MetricKind::FloatSum => "floatSum",
            MetricKind::LongFirst => "longFirst",
            MetricKind::LongLast => "longLast",
            MetricKind::DoubleFirst => "doubleFirst",
            MetricKind::DoubleLast => "doubleLast",
            MetricKind::FloatFirst => "floatFirst",
            MetricKind::FloatLast => "floatLast",
            MetricKind::StringFirst => "stringFirst",
            MetricKind::StringLast => "stringLast",
            MetricKind::HllSketch { .. }
            | MetricKind::ThetaSketch { .. }
            | MetricKind::QuantilesSketch { .. }
            | MetricKind::HyperUnique { .. } => return None,
        })
    }

    /// The stored column type.
    pub fn column_type(self) -> ColumnType {
        match self {
            MetricKind::Count
            | MetricKind::LongSum
            | MetricKind::LongMin
            | MetricKind::LongMax
            | MetricKind::LongFirst
            | MetricKind::LongLast => ColumnType::Long,
            MetricKind::DoubleSum
            | MetricKind::DoubleMin
            | MetricKind::DoubleMax
            | MetricKind::DoubleFirst
            | MetricKind::DoubleLast => ColumnType::Double,
            MetricKind::FloatSum | MetricKind::FloatFirst | MetricKind::FloatLast => {
                ColumnType::Float
            }
            MetricKind::StringFirst | MetricKind::StringLast => ColumnType::String,
            MetricKind::HllSketch { .. } => ColumnType::HllSketch,
            MetricKind::ThetaSketch { .. } => ColumnType::ThetaSketch,
            MetricKind::QuantilesSketch { .. } => ColumnType::QuantilesDoublesSketch,
            MetricKind::HyperUnique { .. } => ColumnType::HyperUnique,
        }
    }

    /// Whether the accumulator is a sketch ([`Acc::Sketch`]).
    pub fn is_sketch(self) -> bool {
        self.column_type().is_sketch()
    }

    /// Heap bytes an accumulator of this kind may take at most, for `maxBytesInMemory`
    /// accounting (as Druid's `AggregatorFactory.getMaxIntermediateSize`): the register array of
    /// an HLL union (2^lgK bytes), a theta hash table of twice `size` 8-byte entries, a
    /// quantiles sketch's base buffer and about 30 levels of `k` doubles, a 1,031-byte
    /// hyperUnique collector; 16 bytes for the other kinds.
    pub fn max_heap_bytes(self) -> usize {
        match self {
            MetricKind::HllSketch { lg_k, .. } => (1usize << lg_k) + 64,
            MetricKind::ThetaSketch { size, .. } => 16 * size as usize + 64,
            MetricKind::QuantilesSketch { k } => 8 * 32 * k as usize + 64,
            MetricKind::HyperUnique { .. } => 1031 + 64,
            _ => 16,
        }
    }

    /// Whether this is a first aggregator (value at the earliest time).
    pub fn is_first(self) -> bool {
        matches!(
            self,
            MetricKind::LongFirst
                | MetricKind::DoubleFirst
                | MetricKind::FloatFirst
                | MetricKind::StringFirst
        )
    }

    /// Whether this is a last aggregator (value at the latest time).
    pub fn is_last(self) -> bool {
        matches!(
            self,
            MetricKind::LongLast
                | MetricKind::DoubleLast
                | MetricKind::FloatLast
                | MetricKind::StringLast
        )
    }

    /// Whether the accumulator carries a time (first/last aggregators).
    pub fn is_timed(self) -> bool {
        self.is_first() || self.is_last()
    }

    /// The time of an accumulator that has seen no row with a time: later than every time for
    /// first aggregators, earlier for last ones.
    pub fn empty_time(self) -> i64 {
        if self.is_last() { i64::MIN } else { i64::MAX }
    }

    /// The accumulator for one input row with input value `v` (`None` = null/missing). First/last
    /// aggregators get no time here and so ignore the row; use [`MetricKind::init_at`].
    ///
    /// # Errors
    /// When the input is not numeric.
    pub fn init(self, v: Option<&Value>) -> Result<Acc, ConversionError> {
        self.init_at(v, None, crate::spec::DEFAULT_MAX_STRING_BYTES)
    }

    /// The accumulator for one input row with input value `v` at `time` (first/last
    /// aggregators; `None` when the row has no time, which the aggregator skips). String values
    /// are cut to `max_string_bytes` UTF-8 bytes at a character boundary.
    ///
    /// # Errors
    /// When the input is not numeric (numeric aggregators).
    pub fn init_at(
        self,
        v: Option<&Value>,
        time: Option<i64>,
        max_string_bytes: u32,
    ) -> Result<Acc, ConversionError> {
        if self.is_timed() {
            let Some(t) = time else {
                return Ok(self.empty());
            };
            return Ok(match self.column_type() {
                ColumnType::Long => Acc::TimedLong(t, v.map(json_to_i64).transpose()?.flatten()),
                ColumnType::String => Acc::TimedStr(
                    t,
                    v.and_then(json_to_string)
                        .map(|s| truncate_utf8(s, max_string_bytes as usize).into_boxed_str()),
                ),
                _ => Acc::TimedDouble(t, v.map(json_to_f64).transpose()?.flatten()),
            });
        }
        if self.is_sketch() {
            let mut acc = SketchAcc::new(self).map_err(|e| ConversionError(e.to_string()))?;
            if let Some(v) = v {
                acc.add_json(self, v)?;
            }
            return Ok(Acc::Sketch(Box::new(acc)));
        }
        Ok(match self {
            MetricKind::Count => Acc::Long(Some(1)),
            MetricKind::LongSum | MetricKind::LongMin | MetricKind::LongMax => Acc::Long(match v {
                Some(v) => json_to_i64(v)?,
                None => None,
            }),
            _ => Acc::Double(match v {
                Some(v) => json_to_f64(v)?,
                None => None,
            }),
        })
    }

    /// The accumulator of no row: null (first/last: null at [`MetricKind::empty_time`];
    /// sketches: an empty sketch).
    pub fn empty(self) -> Acc {
        if self.is_sketch()
            && let Ok(acc) = SketchAcc::new(self)
        {
            return Acc::Sketch(Box::new(acc));
        }
        if !self.is_timed() {
            return if self.column_type() == ColumnType::Long {
                Acc::Long(None)
            } else {
                Acc::Double(None)
            };
        }
        let t = self.empty_time();
        match self.column_type() {
            ColumnType::Long => Acc::TimedLong(t, None),
            ColumnType::String => Acc::TimedStr(t, None),
            _ => Acc::TimedDouble(t, None),
        }
    }

    /// Combines accumulator `b` into `a`, where `b` comes from rows seen after `a`'s. Sums, min
    /// and max ignore nulls (all-null stays null, as Druid's SQL-compatible null handling);
    /// first/last keep the value with the earlier (later) time, see the module docs.
    pub fn combine(self, a: &mut Acc, b: &Acc) {
        match (a, b) {
            (Acc::Sketch(x), Acc::Sketch(y)) => x.merge(y),
            (Acc::Long(x), Acc::Long(y)) => {
                *x = match (*x, *y) {
                    (None, o) | (o, None) => o,
                    (Some(p), Some(q)) => Some(match self {
                        MetricKind::LongMin => p.min(q),
                        MetricKind::LongMax => p.max(q),
                        _ => p.wrapping_add(q),
                    }),
                }
            }
            (Acc::Double(x), Acc::Double(y)) => {
                *x = match (*x, *y) {
                    (None, o) | (o, None) => o,
                    (Some(p), Some(q)) => Some(match self {
                        MetricKind::DoubleMin => p.min(q),
                        MetricKind::DoubleMax => p.max(q),
                        _ => p + q,
                    }),
                }
            }
            (a, b) => {
                if let (Some(ta), Some(tb)) = (a.time(), b.time()) {
                    let take = if self.is_last() { tb >= ta } else { tb < ta };
                    if take {
                        *a = b.clone();
                    }
                }
            }
        }
    }
}

/// Cuts `s` to at most `max` UTF-8 bytes at a character boundary.
fn truncate_utf8(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// A metric accumulator.
#[derive(Debug, Clone, PartialEq)]
pub enum Acc {
    /// Long-valued (count, long aggregators).
    Long(Option<i64>),
    /// Double-valued (double and float aggregators).
    Double(Option<f64>),
    /// `longFirst`/`longLast`: the time of the value (ms; [`MetricKind::empty_time`] before any
    /// row with a time) and the value.
    TimedLong(i64, Option<i64>),
    /// `doubleFirst`/`doubleLast`/`floatFirst`/`floatLast`: time and value.
    TimedDouble(i64, Option<f64>),
    /// `stringFirst`/`stringLast`: time and value.
    TimedStr(i64, Option<Box<str>>),
    /// A sketch aggregator's state.
    Sketch(Box<SketchAcc>),
}

/// The state of a sketch aggregator (see `dolmen-sketch` for formats and hashing).
#[derive(Debug, Clone)]
pub enum SketchAcc {
    /// `HLLSketchBuild` / `HLLSketchMerge`.
    Hll(HllAcc),
    /// `thetaSketch`.
    Theta(ThetaAcc),
    /// `quantilesDoublesSketch`.
    Quantiles(DoublesSketch),
    /// `hyperUnique`.
    HyperUnique(HyperLogLogCollector),
}

impl PartialEq for SketchAcc {
    fn eq(&self, other: &Self) -> bool {
        self.to_bytes() == other.to_bytes()
    }
}

impl SketchAcc {
    /// An empty sketch of a sketch `kind`.
    ///
    /// # Errors
    /// A parameter out of range, or `kind` not a sketch kind.
    pub fn new(kind: MetricKind) -> Result<SketchAcc, SketchError> {
        Ok(match kind {
            MetricKind::HllSketch { lg_k, target, .. } => {
                SketchAcc::Hll(HllAcc::new(lg_k, target)?)
            }
            MetricKind::ThetaSketch { size, .. } => SketchAcc::Theta(ThetaAcc::new(size)?),
            MetricKind::QuantilesSketch { k } => SketchAcc::Quantiles(DoublesSketch::new(k)?),
            MetricKind::HyperUnique { .. } => SketchAcc::HyperUnique(HyperLogLogCollector::new()),
            other => {
                return Err(SketchError::InvalidParameter(format!(
                    "{other:?} is not a sketch aggregator"
                )));
            }
        })
    }

    /// Reads a serialized sketch of `kind` (the bytes [`SketchAcc::to_bytes`] writes).
    ///
    /// # Errors
    /// Bytes that are not a sketch of that family.
    pub fn from_bytes(kind: MetricKind, bytes: &[u8]) -> Result<SketchAcc, SketchError> {
        let mut acc = SketchAcc::new(kind)?;
        acc.merge_bytes(bytes)?;
        Ok(acc)
    }

    fn merge_bytes(&mut self, bytes: &[u8]) -> Result<(), SketchError> {
        match self {
            SketchAcc::Hll(h) => h.merge_bytes(bytes),
            SketchAcc::Theta(t) => t.merge_bytes(bytes),
            SketchAcc::Quantiles(q) => {
                q.merge(&DoublesSketch::deserialize(bytes)?);
                Ok(())
            }
            SketchAcc::HyperUnique(h) => {
                h.fold(&HyperLogLogCollector::from_bytes(bytes)?);
                Ok(())
            }
        }
    }

    /// Merges another accumulator of the same kind (a different family is ignored).
    pub fn merge(&mut self, other: &SketchAcc) {
        match (self, other) {
            (SketchAcc::Hll(a), SketchAcc::Hll(b)) => a.merge(b),
            (SketchAcc::Theta(a), SketchAcc::Theta(b)) => a.merge(b),
            (SketchAcc::Quantiles(a), SketchAcc::Quantiles(b)) => a.merge(b),
            (SketchAcc::HyperUnique(a), SketchAcc::HyperUnique(b)) => a.fold(b),
            _ => {}
        }
    }

    /// The serialized sketch as stored in segment and spill files.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            SketchAcc::Hll(h) => h.to_bytes(),
            SketchAcc::Theta(t) => t.to_bytes(),
            SketchAcc::Quantiles(q) => q.serialize(),
            SketchAcc::HyperUnique(h) => h.to_bytes(),
        }
    }

    /// Adds one input value. Nulls inside arrays are skipped, array elements are added one by
    /// one. `HLLSketchMerge`, `isInputThetaSketch` and `isInputHyperUnique` inputs are base64
    /// serialized sketches; a quantiles input that is not a number is read as one too (Druid's
    /// `DoublesSketchComplexMetricSerde`). Other values: see `dolmen-sketch` for hashing.
    ///
    /// # Errors
    /// A sketch input that is not base64 of a valid sketch; a quantiles input that is neither
    /// a number nor a sketch.
    fn add_json(&mut self, kind: MetricKind, v: &Value) -> Result<(), ConversionError> {
        let merge = matches!(
            kind,
            MetricKind::HllSketch { merge: true, .. }
                | MetricKind::ThetaSketch { merge: true, .. }
                | MetricKind::HyperUnique { merge: true }
        );
        let merge_b64 = |acc: &mut SketchAcc, s: &str| -> Result<(), ConversionError> {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .map_err(|e| {
                    ConversionError(format!("cannot decode sketch [{s}] as base64: {e}"))
                })?;
            acc.merge_bytes(&bytes)
                .map_err(|e| ConversionError(format!("cannot read sketch: {e}")))
        };
        match v {
            Value::Null => Ok(()),
            Value::String(s) if s.trim().is_empty() => Ok(()),
            Value::Array(items) => items.iter().try_for_each(|i| self.add_json(kind, i)),
            Value::String(s) if merge => merge_b64(self, s),
            _ if merge => Err(ConversionError(format!(
                "expected a base64 serialized sketch, got [{v}]"
            ))),
            _ => match self {
                SketchAcc::Hll(h) => {
                    let MetricKind::HllSketch { encoding, .. } = kind else {
                        return Ok(());
                    };
                    match v {
                        Value::Number(n) if n.is_i64() => h.update_i64(n.as_i64().unwrap_or(0)),
                        Value::Number(n) => h.update_f64(n.as_f64().unwrap_or(f64::NAN)),
                        Value::String(s) => h.update_str(s, encoding),
                        other => h.update_str(&other.to_string(), encoding),
                    }
                    Ok(())
                }
                SketchAcc::Theta(t) => {
                    // Druid's `SketchAggregator.updateUnion`: longs and doubles hash as their
                    // 8-byte values (as query-time `DS_THETA` does), other values as text.
                    match v {
                        Value::Number(n) if n.is_i64() => t.update_i64(n.as_i64().unwrap_or(0)),
                        Value::Number(n) => t.update_f64(n.as_f64().unwrap_or(f64::NAN)),
                        Value::String(s) => t.update_str(s),
                        other => t.update_str(&other.to_string()),
                    }
                    Ok(())
                }
                SketchAcc::HyperUnique(h) => {
                    match v {
                        Value::String(s) => h.add_str(s),
                        other => h.add_str(&other.to_string()),
                    }
                    Ok(())
                }
                SketchAcc::Quantiles(q) => match v {
                    Value::String(s) => match s.trim().parse::<f64>() {
                        Ok(d) => {
                            q.update(d);
                            Ok(())
                        }
                        Err(_) => merge_b64(self, s),
                    },
                    other => match json_to_f64(other)? {
                        Some(d) => {
                            q.update(d);
                            Ok(())
                        }
                        None => Ok(()),
                    },
                },
            },
        }
    }
}

impl Acc {
    /// The time of a first/last accumulator.
    pub fn time(&self) -> Option<i64> {
        match self {
            Acc::TimedLong(t, _) | Acc::TimedDouble(t, _) | Acc::TimedStr(t, _) => Some(*t),
            Acc::Long(_) | Acc::Double(_) | Acc::Sketch(_) => None,
        }
    }
}

/// The accumulator of metric `spec` (of kind `kind`) for one input row: `v` is its input value,
/// `ts` the row's timestamp (ms, before `queryGranularity` truncation). First/last aggregators
/// take their time from `timeColumn` when set (a number of epoch milliseconds; a missing or
/// null time skips the row for that aggregator).
///
/// # Errors
/// When the input value, or the `timeColumn` value, is not a number where one is needed.
pub fn init_metric(
    kind: MetricKind,
    spec: &MetricSpec,
    v: Option<&Value>,
    row: &InputRow,
    ts: i64,
) -> Result<Acc, ConversionError> {
    if !kind.is_timed() {
        return kind.init(v);
    }
    let time = match spec.time_column() {
        None => Some(ts),
        Some(c) => match row.get(c) {
            None => None,
            Some(t) => json_to_i64(t).map_err(|e| {
                ConversionError(format!(
                    "metric [{}] timeColumn [{c}]: {}",
                    spec.name(),
                    e.0
                ))
            })?,
        },
    };
    kind.init_at(
        v,
        time,
        spec.max_string_bytes()
            .unwrap_or(crate::spec::DEFAULT_MAX_STRING_BYTES),
    )
}

/// A row in the indexer: truncated time, dimension values (possibly fewer than the current
/// dimension count when dimensions were discovered later: missing trailing values are null)
/// and metric accumulators.
#[derive(Debug, Clone)]
pub struct Row {
    /// `__time` after queryGranularity truncation, ms.
    pub time: i64,
    /// Dimension values in dimension order.
    pub dims: Vec<Val>,
    /// Metric accumulators in metric order.
    pub metrics: Vec<Acc>,
}

/// Compares two rows by the segment sort order.
pub fn compare_keys(a_time: i64, a: &[Val], b_time: i64, b: &[Val]) -> Ordering {
    a_time.cmp(&b_time).then_with(|| {
        let n = a.len().max(b.len());
        for i in 0..n {
            let x = a.get(i).unwrap_or(&Val::Null);
            let y = b.get(i).unwrap_or(&Val::Null);
            match x.cmp(y) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        Ordering::Equal
    })
}

/// Normalizes a dimension vector for use as a hash key: trailing nulls are dropped so that rows
/// recorded before and after a dimension was discovered compare equal.
pub fn trim_nulls(mut dims: Vec<Val>) -> Vec<Val> {
    while matches!(dims.last(), Some(Val::Null)) {
        dims.pop();
    }
    dims
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_values_of_a_multi_value_row_render_as_java_does() {
        let v: Value = serde_json::json!(["1", ["2"], ["3", ["4", "5"]], {"a": 1, "b": "x"}, null]);
        let Val::Multi(values) = to_val(Some(&v), ColumnType::String).unwrap() else {
            panic!("multi-value expected")
        };
        let text: Vec<Option<&str>> = values.iter().map(|v| v.as_deref()).collect();
        assert_eq!(
            text,
            // Sorted: `multiValueHandling` defaults to SORTED_ARRAY, nulls first.
            [
                None,
                Some("1"),
                Some("[2]"),
                Some("[3, [4, 5]]"),
                Some("{a=1, b=x}")
            ]
        );
    }
    use serde_json::json;

    #[test]
    fn converts_like_druid() {
        assert_eq!(
            to_val(Some(&json!(true)), ColumnType::String).unwrap(),
            Val::Str("true".into())
        );
        assert_eq!(
            to_val(Some(&json!(36)), ColumnType::String).unwrap(),
            Val::Str("36".into())
        );
        assert_eq!(
            to_val(Some(&json!("36")), ColumnType::Long).unwrap(),
            Val::Long(36)
        );
        assert_eq!(
            to_val(Some(&json!(1.9)), ColumnType::Long).unwrap(),
            Val::Long(1)
        );
        assert_eq!(to_val(None, ColumnType::Long).unwrap(), Val::Null);
        assert!(to_val(Some(&json!("abc")), ColumnType::Long).is_err());
        assert_eq!(
            to_val(Some(&json!(null)), ColumnType::String).unwrap(),
            Val::Null
        );
    }

    #[test]
    fn null_sorts_first_and_padding_is_null() {
        assert_eq!(
            compare_keys(1, &[Val::Null], 1, &[Val::Str("a".into())]),
            Ordering::Less
        );
        assert_eq!(
            compare_keys(
                1,
                &[Val::Str("a".into())],
                1,
                &[Val::Str("a".into()), Val::Null]
            ),
            Ordering::Equal
        );
        assert_eq!(
            compare_keys(0, &[Val::Str("z".into())], 1, &[]),
            Ordering::Less
        );
    }

    #[test]
    fn combine_ignores_nulls() {
        let mut a = Acc::Long(None);
        MetricKind::LongSum.combine(&mut a, &Acc::Long(Some(3)));
        MetricKind::LongSum.combine(&mut a, &Acc::Long(Some(4)));
        assert_eq!(a, Acc::Long(Some(7)));
        let mut m = Acc::Double(Some(2.0));
        MetricKind::DoubleMin.combine(&mut m, &Acc::Double(Some(1.5)));
        assert_eq!(m, Acc::Double(Some(1.5)));
        let mut n = Acc::Double(None);
        MetricKind::DoubleMax.combine(&mut n, &Acc::Double(None));
        assert_eq!(n, Acc::Double(None));
    }

    fn strs(v: &[&str]) -> Val {
        Val::Multi(v.iter().map(|s| Some(Box::<str>::from(*s))).collect())
    }

    #[test]
    fn multi_value_handling() {
        let v = json!(["b", "a", "b"]);
        assert_eq!(
            to_dim_val(
                Some(&v),
                ColumnType::String,
                MultiValueHandling::SortedArray
            )
            .unwrap(),
            strs(&["a", "b", "b"])
        );
        assert_eq!(
            to_dim_val(Some(&v), ColumnType::String, MultiValueHandling::SortedSet).unwrap(),
            strs(&["a", "b"])
        );
        assert_eq!(
            to_dim_val(Some(&v), ColumnType::String, MultiValueHandling::Array).unwrap(),
            strs(&["b", "a", "b"])
        );
        // One value is the plain string, none is null; a set can collapse to one value.
        assert_eq!(
            to_val(Some(&json!(["x"])), ColumnType::String).unwrap(),
            Val::Str("x".into())
        );
        assert_eq!(
            to_val(Some(&json!([])), ColumnType::String).unwrap(),
            Val::Null
        );
        assert_eq!(
            to_dim_val(
                Some(&json!(["x", "x"])),
                ColumnType::String,
                MultiValueHandling::SortedSet
            )
            .unwrap(),
            Val::Str("x".into())
        );
        // Non-string elements become text; nulls are kept and sort first.
        assert_eq!(
            to_val(Some(&json!([2, null, true])), ColumnType::String).unwrap(),
            Val::Multi(vec![None, Some("2".into()), Some("true".into())].into_boxed_slice())
        );
        // Numeric dimensions take one value only.
        assert_eq!(
            to_val(Some(&json!(["7"])), ColumnType::Long).unwrap(),
            Val::Long(7)
        );
        let e = to_val(Some(&json!([1, 2])), ColumnType::Long).unwrap_err();
        assert!(e.0.contains("cannot have multiple values"), "{}", e.0);
    }

    #[test]
    fn multi_values_order_and_hash() {
        use std::collections::HashSet;
        let a = Val::Str("a".into());
        let ab = strs(&["a", "b"]);
        let b = Val::Str("b".into());
        assert!(a < ab && ab < b);
        assert!(strs(&["a", "b"]) < strs(&["a", "b", "c"]));
        assert!(Val::Null < ab);
        assert_eq!(ab.cmp(&a), Ordering::Greater);
        let set: HashSet<Val> = [ab.clone(), strs(&["a", "b"]), a.clone()]
            .into_iter()
            .collect();
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn first_last_accumulators() {
        let first = MetricKind::LongFirst;
        let mut a = first.init_at(Some(&json!(5)), Some(20), 1024).unwrap();
        first.combine(
            &mut a,
            &first.init_at(Some(&json!(6)), Some(10), 1024).unwrap(),
        );
        first.combine(
            &mut a,
            &first.init_at(Some(&json!(7)), Some(10), 1024).unwrap(),
        );
        first.combine(&mut a, &first.init_at(Some(&json!(8)), None, 1024).unwrap());
        assert_eq!(a, Acc::TimedLong(10, Some(6)), "ties keep the first seen");

        let last = MetricKind::DoubleLast;
        let mut a = last.init_at(Some(&json!(1.5)), Some(10), 1024).unwrap();
        last.combine(
            &mut a,
            &last.init_at(Some(&json!(2.5)), Some(10), 1024).unwrap(),
        );
        assert_eq!(
            a,
            Acc::TimedDouble(10, Some(2.5)),
            "ties take the last seen"
        );
        last.combine(&mut a, &last.init_at(None, Some(11), 1024).unwrap());
        assert_eq!(
            a,
            Acc::TimedDouble(11, None),
            "a null at the latest time wins"
        );
        last.combine(&mut a, &last.empty());
        assert_eq!(a, Acc::TimedDouble(11, None));

        let s = MetricKind::StringFirst;
        let a = s.init_at(Some(&json!("héllo")), Some(1), 2).unwrap();
        assert_eq!(
            a,
            Acc::TimedStr(1, Some("h".into())),
            "cut at a char boundary"
        );
        assert_eq!(
            s.init_at(Some(&json!(12)), Some(1), 1024).unwrap(),
            Acc::TimedStr(1, Some("12".into()))
        );
        assert!(
            MetricKind::LongLast
                .init_at(Some(&json!("x")), Some(1), 1)
                .is_err()
        );
        assert_eq!(MetricKind::StringLast.column_type(), ColumnType::String);
        assert_eq!(MetricKind::FloatFirst.column_type(), ColumnType::Float);
    }

    #[test]
    fn init_metric_reads_time_column() {
        let spec: MetricSpec = serde_json::from_value(
            json!({"type": "longLast", "name": "l", "fieldName": "v", "timeColumn": "t"}),
        )
        .unwrap();
        let Value::Object(row) = json!({"v": 3, "t": 100}) else {
            unreachable!()
        };
        let k = MetricKind::of(&spec);
        assert_eq!(
            init_metric(k, &spec, row.get("v"), &row, 5).unwrap(),
            Acc::TimedLong(100, Some(3))
        );
        let Value::Object(no_time) = json!({"v": 3}) else {
            unreachable!()
        };
        assert_eq!(
            init_metric(k, &spec, no_time.get("v"), &no_time, 5).unwrap(),
            k.empty()
        );
        let Value::Object(bad) = json!({"v": 3, "t": "soon"}) else {
            unreachable!()
        };
        let e = init_metric(k, &spec, bad.get("v"), &bad, 5).unwrap_err();
        assert!(e.0.contains("timeColumn [t]"), "{}", e.0);
        let dflt: MetricSpec = serde_json::from_value(
            json!({"type": "stringFirst", "name": "s", "fieldName": "v", "maxStringBytes": 1}),
        )
        .unwrap();
        assert_eq!(
            init_metric(MetricKind::of(&dflt), &dflt, row.get("v"), &row, 5).unwrap(),
            Acc::TimedStr(5, Some("3".into()))
        );
    }

    /// The auto column's types: integers and booleans LONG, numbers DOUBLE, strings STRING;
    /// arrays by their non-null elements (LONG when none); nothing for null; objects and
    /// nested arrays JSON.
    #[test]
    fn auto_types_follow_the_values() {
        use serde_json::json;
        let t = |v: Value| infer_auto_type(&v);
        assert_eq!(t(json!(1)), Some(ColumnType::Long));
        assert_eq!(t(json!(1.5)), Some(ColumnType::Double));
        assert_eq!(t(json!("a")), Some(ColumnType::String));
        assert_eq!(t(json!([1, null, 3])), Some(ColumnType::LongArray));
        assert_eq!(t(json!([1, 2.5])), Some(ColumnType::DoubleArray));
        assert_eq!(t(json!([1, "a"])), Some(ColumnType::StringArray));
        assert_eq!(t(json!(true)), Some(ColumnType::Long));
        assert_eq!(t(json!([true, false, null])), Some(ColumnType::LongArray));
        assert_eq!(
            t(json!([true, 1, 0.1, "S1"])),
            Some(ColumnType::StringArray)
        );
        assert_eq!(t(json!([])), Some(ColumnType::LongArray));
        assert_eq!(t(json!([null, null])), Some(ColumnType::LongArray));
        assert_eq!(t(json!(null)), None);
        assert_eq!(t(json!({"a": 1})), Some(ColumnType::Json));
        assert_eq!(t(json!([[1]])), Some(ColumnType::Json));
        assert_eq!(widen(ColumnType::Json, ColumnType::Long), ColumnType::Json);
        use ColumnType::*;
        assert_eq!(widen(Long, Double), Double);
        assert_eq!(widen(Double, String), String);
        assert_eq!(widen(Long, LongArray), LongArray);
        assert_eq!(widen(Double, LongArray), DoubleArray);
        assert_eq!(widen(StringArray, Long), StringArray);
        assert_eq!(widen(Long, Long), Long);
    }

    /// An array dimension keeps the whole array (`[]` is not null); a scalar is a one-element
    /// array; elements that do not convert are null.
    #[test]
    fn array_dimension_values() {
        use serde_json::json;
        let h = MultiValueHandling::default();
        let v = |x: Value, ty| to_dim_val(Some(&x), ty, h).unwrap();
        assert_eq!(
            v(json!([3, null, "x", "4"]), ColumnType::LongArray),
            Val::Array(vec![Val::Long(3), Val::Null, Val::Null, Val::Long(4)].into())
        );
        assert_eq!(
            v(json!([]), ColumnType::StringArray),
            Val::Array(vec![].into())
        );
        assert_eq!(v(json!(null), ColumnType::StringArray), Val::Null);
        assert_eq!(
            v(json!(2.5), ColumnType::DoubleArray),
            Val::Array(vec![Val::Double(2.5)].into())
        );
        assert!(
            v(json!([1, 2]), ColumnType::LongArray) < v(json!([1, 2, 0]), ColumnType::LongArray)
        );
    }
}
