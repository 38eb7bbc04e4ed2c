//! Rows as the indexer holds them: typed dimension values and metric accumulators, with the
//! sort order of segment files (`__time`, then dimensions in order, nulls first) and rollup.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use dolmen_segment::ColumnType;
use serde_json::Value;

use crate::spec::MetricSpec;

/// One dimension value.
#[derive(Debug, Clone)]
pub enum Val {
    /// Missing or null.
    Null,
    /// A string.
    Str(Box<str>),
    /// A long.
    Long(i64),
    /// A float.
    Float(f32),
    /// A double.
    Double(f64),
}

impl Val {
    fn rank(&self) -> u8 {
        match self {
            Val::Null => 0,
            Val::Long(_) => 1,
            Val::Float(_) => 2,
            Val::Double(_) => 3,
            Val::Str(_) => 4,
        }
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
            (Val::Long(a), Val::Long(b)) => a.cmp(b),
            (Val::Float(a), Val::Float(b)) => a.total_cmp(b),
            (Val::Double(a), Val::Double(b)) => a.total_cmp(b),
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
            Val::Long(v) => v.hash(state),
            Val::Float(v) => v.to_bits().hash(state),
            Val::Double(v) => v.to_bits().hash(state),
        }
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

/// Converts an input value to a dimension value of type `ty`, as Druid's
/// `DimensionHandlerUtils.convertObjectTo*` does.
///
/// # Errors
/// [`ConversionError`] when a numeric dimension gets a non-numeric value.
pub fn to_val(v: Option<&Value>, ty: ColumnType) -> Result<Val, ConversionError> {
    let Some(v) = v else { return Ok(Val::Null) };
    Ok(match ty {
        ColumnType::String => match json_to_string(v) {
            Some(s) => Val::Str(s.into_boxed_str()),
            None => Val::Null,
        },
        ColumnType::Long => json_to_i64(v)?.map_or(Val::Null, Val::Long),
        ColumnType::Float => json_to_f64(v)?.map_or(Val::Null, |f| Val::Float(f as f32)),
        ColumnType::Double => json_to_f64(v)?.map_or(Val::Null, Val::Double),
    })
}

/// Infers a discovered dimension's type from its first value (`useSchemaDiscovery`).
pub fn infer_type(v: &Value) -> ColumnType {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => ColumnType::Long,
        Value::Number(_) => ColumnType::Double,
        _ => ColumnType::String,
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
}

impl MetricKind {
    /// The kind of a metric spec.
    pub fn of(m: &MetricSpec) -> MetricKind {
        match m {
            MetricSpec::Count(_) => MetricKind::Count,
            MetricSpec::LongSum(_) => MetricKind::LongSum,
            MetricSpec::LongMin(_) => MetricKind::LongMin,
            MetricSpec::LongMax(_) => MetricKind::LongMax,
            MetricSpec::DoubleSum(_) => MetricKind::DoubleSum,
            MetricSpec::DoubleMin(_) => MetricKind::DoubleMin,
            MetricSpec::DoubleMax(_) => MetricKind::DoubleMax,
            MetricSpec::FloatSum(_) => MetricKind::FloatSum,
        }
    }

    /// The stored column type.
    pub fn column_type(self) -> ColumnType {
        match self {
            MetricKind::Count | MetricKind::LongSum | MetricKind::LongMin | MetricKind::LongMax => {
                ColumnType::Long
            }
            MetricKind::DoubleSum | MetricKind::DoubleMin | MetricKind::DoubleMax => {
                ColumnType::Double
            }
            MetricKind::FloatSum => ColumnType::Float,
        }
    }

    /// The accumulator for one input row with input value `v` (`None` = null/missing).
    ///
    /// # Errors
    /// When the input is not numeric.
    pub fn init(self, v: Option<&Value>) -> Result<Acc, ConversionError> {
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

    /// Combines two accumulators (nulls are ignored; all-null stays null, as Druid's
    /// SQL-compatible null handling).
    pub fn combine(self, a: &mut Acc, b: &Acc) {
        match (a, b) {
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
            _ => {}
        }
    }
}

/// A metric accumulator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Acc {
    /// Long-valued (count, long aggregators).
    Long(Option<i64>),
    /// Double-valued (double and float aggregators).
    Double(Option<f64>),
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
}
