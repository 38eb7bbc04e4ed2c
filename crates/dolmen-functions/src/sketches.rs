//! Apache DataSketches SQL aggregations (`DS_HLL`, `DS_THETA`, `DS_QUANTILES_SKETCH`,
//! `APPROX_COUNT_DISTINCT_DS_*`, `APPROX_QUANTILE_DS`) and their post-processing functions
//! (Druid's `docs/development/extensions-core/datasketches-{hll,theta,quantiles}.md`,
//! `docs/querying/sql-aggregations.md` "Sketch functions", `docs/querying/sql-scalar.md`
//! "Sketch functions").
//!
//! # Aggregations
//!
//! | Function | Defaults | Result |
//! |---|---|---|
//! | `APPROX_COUNT_DISTINCT_DS_HLL(expr[, lgK[, tgtHllType]])` | lgK 12, `HLL_4` | BIGINT: the estimate rounded half up (`Math.round`), 0 for no rows |
//! | `APPROX_COUNT_DISTINCT_DS_HLL_UTF8(expr[, lgK[, tgtHllType]])` | lgK 12, `HLL_4` | BIGINT, as above with strings hashed as UTF-8 (Druid's `stringEncoding: utf8`) |
//! | `DS_HLL(expr[, lgK[, tgtHllType]])` | lgK 12, `HLL_4` | `COMPLEX<HLLSketch>`: DataSketches HLL bytes |
//! | `APPROX_COUNT_DISTINCT_DS_THETA(expr[, size])` | size 16384 | BIGINT: the estimate truncated (Druid coerces the double estimate to BIGINT with `longValue`), 0 for no rows |
//! | `DS_THETA(expr[, size])` | size 16384 | `COMPLEX<thetaSketch>`: compact ordered theta bytes |
//! | `DS_QUANTILES_SKETCH(expr[, k])` | k 128 | `COMPLEX<quantilesDoublesSketch>`: compact classic quantiles bytes |
//! | `APPROX_QUANTILE_DS(expr, probability[, k])` | k 128 | DOUBLE: the quantile at `probability` (taken as a FLOAT, as Druid does), NaN for no rows |
//!
//! `lgK` (4..=21), `tgtHllType` (`HLL_4`, `HLL_6`, `HLL_8`), `size` (a power of two,
//! 16..=2^26), `k` (a power of two, 2..=32768) and `probability` (0..=1) must be literals; a
//! missing or bad one is a planning error ([`DataFusionError::Plan`]), raised when the plan is
//! optimized and again when the accumulator is built.
//!
//! `expr` may be a raw value or a stored sketch column:
//! - HLL (`HLLSketchBuild` at query time, `HllSketchBuildUtil.updateSketch`): strings hash as
//!   their UTF-16LE code units (Druid's default `stringEncoding`), longs (and booleans,
//!   timestamps as epoch millis) as their 8 little-endian bytes, floats and doubles as the bits
//!   of the double; empty strings are skipped.
//! - Theta (`SketchAggregator.updateUnion`): strings as UTF-8 bytes (empty skipped), longs as 8
//!   little-endian bytes, doubles as the bits of the double.
//! - Quantiles: numbers as doubles (NaN skipped; booleans as 0/1, timestamps as epoch millis);
//!   numeric strings are parsed, others skipped; arrays are refused.
//! - Multi-value strings and arrays: each element, as a string (Druid hashes `entry.toString()`).
//! - Binary values are serialized sketches of the function's family (what segment sketch
//!   columns hold; `HLLSketchMerge`/`thetaSketch`/`quantilesDoublesSketch` merge aggregators):
//!   they are merged. Bytes that do not deserialize are an execution error.
//! - Nulls are skipped.
//!
//! Partial aggregates travel as serialized sketches, so results do not depend on how the rows
//! are split across partitions (beyond the sketches' own randomness for quantiles).
//!
//! # Post-processing functions
//!
//! | Function | Result |
//! |---|---|
//! | `HLL_SKETCH_ESTIMATE(sketch[, round])` | DOUBLE (rounded with `Math.round` when `round` is true; default false) |
//! | `HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(sketch[, numStdDev])` | `ARRAY<DOUBLE>` `[estimate, lower, upper]`, numStdDev 1 (default), 2 or 3 |
//! | `HLL_SKETCH_UNION([lgK, tgtHllType,] sketch, ...)` | `COMPLEX<HLLSketch>` (lgK 12, `HLL_4` by default) |
//! | `HLL_SKETCH_TO_STRING(sketch)` | VARCHAR: DataSketches-java's `HllSketch.toString()` summary |
//! | `THETA_SKETCH_ESTIMATE(sketch)` | DOUBLE |
//! | `THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(sketch, numStdDev)` | struct `{estimate, highBound, lowBound, numStdDev}` (Druid's `SketchEstimateWithErrorBounds`, a JSON object); numStdDev must be 1, 2 or 3 for sketches in estimation mode, anything for exact ones (whose bounds are the estimate), as in DataSketches-java |
//! | `THETA_SKETCH_UNION([size,] sketch, ...)` | `COMPLEX<thetaSketch>` (size 16384 by default) |
//! | `THETA_SKETCH_INTERSECT([size,] sketch, ...)` | `COMPLEX<thetaSketch>` |
//! | `THETA_SKETCH_NOT([size,] sketch, ...)` | `COMPLEX<thetaSketch>`: the first minus the others |
//! | `DS_GET_QUANTILE(sketch, fraction)` | DOUBLE (fraction taken as a FLOAT), NaN for an empty sketch |
//! | `DS_GET_QUANTILES(sketch, fraction, ...)` | `ARRAY<DOUBLE>`, NaNs for an empty sketch |
//! | `DS_HISTOGRAM(sketch, splitPoint, ...)` | `ARRAY<DOUBLE>`: approximate counts in the `n + 1` bins `(-inf, sp0]`, ..., `(spN, +inf)` (PMF times N), NaNs for an empty sketch |
//! | `DS_CDF(sketch, splitPoint, ...)` | `ARRAY<DOUBLE>`: fractions of items `<=` each split point, then 1.0; NaNs for an empty sketch |
//! | `DS_RANK(sketch, value)` | DOUBLE: fraction of items `<= value` (value taken as a FLOAT), NaN for an empty sketch |
//! | `DS_QUANTILE_SUMMARY(sketch)` | VARCHAR: DataSketches-java's `DoublesSketch.toString()` summary |
//!
//! Druid types the array results of the quantiles functions as `OTHER` holding a `double[]`
//! (which clients receive as a JSON array); here they are `ARRAY<DOUBLE>`, which the result
//! writers render the same way (as text with `sqlStringifyArrays`, Druid's default). The
//! parameters (`round`, `numStdDev`, `lgK`, `tgtHllType`, `size`, fractions, split points,
//! values) must be constants; literals are validated at planning time. A null sketch gives a
//! null result. Sketch arguments may also be strings holding the base64 of a sketch (the form
//! sketches take in JSON results), as Druid accepts.
//!
//! Sketch-valued results (and this module's sketch arguments, when they carry it) have the
//! field metadata [`DRUID_TYPE_METADATA_KEY`] naming their Druid type
//! (`COMPLEX<HLLSketch>`, ...); a sketch of the wrong family passed to a function is a planning
//! error when the argument carries the marker, and an execution error (bytes that do not
//! deserialize) otherwise.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, Float64Array, Float64Builder, Int32Array, ListBuilder,
    StringBuilder, StructArray,
};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Float32Type, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Expr, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use dolmen_sketch::quantiles::DoublesSketch;
use dolmen_sketch::{
    HllAcc, HllMode, HllSketchView, HllStringEncoding, HllTargetType, THETA_DEFAULT_SIZE, ThetaAcc,
    ThetaSketchView,
};

/// Arrow field metadata key naming the Druid native type of a sketch-valued (Binary) column:
/// `COMPLEX<HLLSketch>`, `COMPLEX<thetaSketch>` or `COMPLEX<quantilesDoublesSketch>`. Set on the
/// results of `DS_HLL`, `DS_THETA`, `DS_QUANTILES_SKETCH` and the sketch set operations, and on
/// segment sketch columns ([`dolmen_segment::DRUID_TYPE_METADATA_KEY`]).
pub const DRUID_TYPE_METADATA_KEY: &str = dolmen_segment::DRUID_TYPE_METADATA_KEY;

/// Druid's default `lgK` of HLL sketches (`HllSketchAggregatorFactory.DEFAULT_LG_K`).
pub const HLL_DEFAULT_LG_K: u8 = 12;

/// A DataSketches sketch family that these functions build or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SketchFamily {
    /// HLL sketches (`COMPLEX<HLLSketch>`).
    Hll,
    /// Theta sketches (`COMPLEX<thetaSketch>`).
    Theta,
    /// Classic quantiles doubles sketches (`COMPLEX<quantilesDoublesSketch>`).
    Quantiles,
}

impl SketchFamily {
    /// Druid's native type name, e.g. `COMPLEX<HLLSketch>`.
    pub fn druid_type(self) -> &'static str {
        match self {
            SketchFamily::Hll => "COMPLEX<HLLSketch>",
            SketchFamily::Theta => "COMPLEX<thetaSketch>",
            SketchFamily::Quantiles => "COMPLEX<quantilesDoublesSketch>",
        }
    }

    /// A Binary field holding sketches of this family, marked with
    /// [`DRUID_TYPE_METADATA_KEY`].
    pub fn field(self, name: &str, nullable: bool) -> Field {
        Field::new(name, DataType::Binary, nullable).with_metadata(
            [(
                DRUID_TYPE_METADATA_KEY.to_string(),
                self.druid_type().to_string(),
            )]
            .into_iter()
            .collect(),
        )
    }

    /// The family `field` is marked with, if any.
    pub fn of_field(field: &Field) -> Option<SketchFamily> {
        match field.metadata().get(DRUID_TYPE_METADATA_KEY)?.as_str() {
            "COMPLEX<HLLSketch>" => Some(SketchFamily::Hll),
            "COMPLEX<thetaSketch>" => Some(SketchFamily::Theta),
            "COMPLEX<quantilesDoublesSketch>" => Some(SketchFamily::Quantiles),
            _ => None,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            SketchFamily::Hll => "an HLL sketch",
            SketchFamily::Theta => "a theta sketch",
            SketchFamily::Quantiles => "a quantiles sketch",
        }
    }

    /// Plan error when `field` is marked as a sketch of another family.
    fn check_field(self, func: &str, field: &Field) -> Result<()> {
        match SketchFamily::of_field(field) {
            Some(other) if other != self => plan_err!(
                "{func} takes {}, got {} ({})",
                self.noun(),
                other.noun(),
                other.druid_type()
            ),
            _ => Ok(()),
        }
    }
}

/// The aggregate functions of this module, registered by [`super::register_druid_functions`].
pub fn udafs() -> Vec<AggregateUDF> {
    SketchAggregate::ALL
        .iter()
        .map(|f| AggregateUDF::new_from_impl(SketchAggregateUdaf::new(*f)))
        .collect()
}

/// The scalar functions of this module, registered by [`super::register_druid_functions`].
pub fn udfs() -> Vec<ScalarUDF> {
    SketchFunction::ALL
        .iter()
        .map(|f| ScalarUDF::new_from_impl(SketchFunctionUdf::new(*f)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Literal parameters
// ---------------------------------------------------------------------------------------------

pub(super) fn plan_error(msg: String) -> DataFusionError {
    DataFusionError::Plan(msg)
}

/// A numeric literal as a double (`Number.doubleValue()`); `None` for null or non-numbers.
fn lit_f64(v: &ScalarValue) -> Option<f64> {
    if v.is_null() || !(v.data_type().is_numeric()) {
        return None;
    }
    match v.cast_to(&DataType::Float64).ok()? {
        ScalarValue::Float64(Some(f)) => Some(f),
        _ => None,
    }
}

/// A numeric literal truncated to an integer, as Java's `Number.intValue()` does.
pub(super) fn lit_int(func: &str, what: &str, v: &ScalarValue) -> Result<i64> {
    match v {
        ScalarValue::Int64(Some(i)) => Ok(*i),
        _ => match lit_f64(v) {
            Some(f) if f.is_finite() && f.abs() < 9.0e15 => Ok(f.trunc() as i64),
            _ => plan_err!("{func}: {what} must be a numeric literal, got [{v}]"),
        },
    }
}

fn check_lg_k(func: &str, v: &ScalarValue) -> Result<u8> {
    let n = lit_int(func, "lgK", v)?;
    match u8::try_from(n) {
        Ok(lg_k) if dolmen_sketch::HLL_LG_K_RANGE.contains(&lg_k) => Ok(lg_k),
        _ => plan_err!("{func}: lgK must be between 4 and 21, got [{n}]"),
    }
}

fn check_tgt_hll_type(func: &str, v: &ScalarValue) -> Result<HllTargetType> {
    let Some(s) = super::scalar_str(v) else {
        return plan_err!("{func}: tgtHllType must be a string literal, got [{v}]");
    };
    HllTargetType::from_name(s).map_err(|e| plan_error(format!("{func}: {e}")))
}

fn check_theta_size(func: &str, v: &ScalarValue) -> Result<u32> {
    let n = lit_int(func, "size", v)?;
    match u32::try_from(n) {
        Ok(size) if size.is_power_of_two() && (16..=(1 << 26)).contains(&size) => Ok(size),
        _ => plan_err!("{func}: size must be a power of 2 between 16 and 67108864, got [{n}]"),
    }
}

fn check_quantiles_k(func: &str, v: &ScalarValue) -> Result<u16> {
    let n = lit_int(func, "k", v)?;
    match u16::try_from(n) {
        Ok(k) if k.is_power_of_two() && (2..=32768).contains(&k) => Ok(k),
        _ => plan_err!("{func}: k must be a power of 2 between 2 and 32768, got [{n}]"),
    }
}

fn check_num_std_dev(func: &str, v: &ScalarValue) -> Result<u8> {
    let n = lit_int(func, "numStdDev", v)?;
    match u8::try_from(n) {
        Ok(d @ 1..=3) => Ok(d),
        _ => plan_err!("{func}: numStdDev must be 1, 2 or 3, got [{n}]"),
    }
}

/// A fraction in `[0, 1]`; with `as_float` rounded to a Java float first (Druid reads the
/// single-fraction arguments with `floatValue()`).
fn check_fraction(func: &str, what: &str, v: &ScalarValue, as_float: bool) -> Result<f64> {
    let Some(f) = lit_f64(v) else {
        return plan_err!("{func}: {what} must be a numeric literal, got [{v}]");
    };
    let f = if as_float { f64::from(f as f32) } else { f };
    if !(0.0..=1.0).contains(&f) {
        return plan_err!("{func}: {what} must be between 0 and 1, got [{f}]");
    }
    Ok(f)
}

fn check_number(func: &str, what: &str, v: &ScalarValue) -> Result<f64> {
    match lit_f64(v) {
        Some(f) if !f.is_nan() => Ok(f),
        _ => plan_err!("{func}: {what} must be a numeric literal, got [{v}]"),
    }
}

pub(super) fn is_numeric_type(dt: &DataType) -> bool {
    dt.is_numeric() || matches!(dt, DataType::Null)
}

pub(super) fn is_binary_type(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
            | DataType::Null
    )
}

// ---------------------------------------------------------------------------------------------
// Aggregations
// ---------------------------------------------------------------------------------------------

/// Which sketch aggregation a [`SketchAggregateUdaf`] implements (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SketchAggregate {
    /// `APPROX_COUNT_DISTINCT_DS_HLL(expr[, lgK[, tgtHllType]])` -> BIGINT.
    ApproxCountDistinctDsHll,
    /// `APPROX_COUNT_DISTINCT_DS_HLL_UTF8(expr[, lgK[, tgtHllType]])` -> BIGINT: as
    /// `APPROX_COUNT_DISTINCT_DS_HLL` with strings hashed as UTF-8 (`stringEncoding: utf8`).
    ApproxCountDistinctDsHllUtf8,
    /// `DS_HLL(expr[, lgK[, tgtHllType]])` -> `COMPLEX<HLLSketch>`.
    DsHll,
    /// `APPROX_COUNT_DISTINCT_DS_THETA(expr[, size])` -> BIGINT.
    ApproxCountDistinctDsTheta,
    /// `DS_THETA(expr[, size])` -> `COMPLEX<thetaSketch>`.
    DsTheta,
    /// `DS_QUANTILES_SKETCH(expr[, k])` -> `COMPLEX<quantilesDoublesSketch>`.
    DsQuantilesSketch,
    /// `APPROX_QUANTILE_DS(expr, probability[, k])` -> DOUBLE.
    ApproxQuantileDs,
}

impl SketchAggregate {
    /// Every aggregation, in documentation order.
    pub const ALL: [SketchAggregate; 7] = [
        SketchAggregate::ApproxCountDistinctDsHll,
        SketchAggregate::ApproxCountDistinctDsHllUtf8,
        SketchAggregate::DsHll,
        SketchAggregate::ApproxCountDistinctDsTheta,
        SketchAggregate::DsTheta,
        SketchAggregate::DsQuantilesSketch,
        SketchAggregate::ApproxQuantileDs,
    ];

    /// The registered (lowercase) name.
    pub fn name(self) -> &'static str {
        match self {
            SketchAggregate::ApproxCountDistinctDsHll => "approx_count_distinct_ds_hll",
            SketchAggregate::ApproxCountDistinctDsHllUtf8 => "approx_count_distinct_ds_hll_utf8",
            SketchAggregate::DsHll => "ds_hll",
            SketchAggregate::ApproxCountDistinctDsTheta => "approx_count_distinct_ds_theta",
            SketchAggregate::DsTheta => "ds_theta",
            SketchAggregate::DsQuantilesSketch => "ds_quantiles_sketch",
            SketchAggregate::ApproxQuantileDs => "approx_quantile_ds",
        }
    }

    /// The SQL name used in error messages.
    pub fn sql_name(self) -> &'static str {
        match self {
            SketchAggregate::ApproxCountDistinctDsHll => "APPROX_COUNT_DISTINCT_DS_HLL",
            SketchAggregate::ApproxCountDistinctDsHllUtf8 => "APPROX_COUNT_DISTINCT_DS_HLL_UTF8",
            SketchAggregate::DsHll => "DS_HLL",
            SketchAggregate::ApproxCountDistinctDsTheta => "APPROX_COUNT_DISTINCT_DS_THETA",
            SketchAggregate::DsTheta => "DS_THETA",
            SketchAggregate::DsQuantilesSketch => "DS_QUANTILES_SKETCH",
            SketchAggregate::ApproxQuantileDs => "APPROX_QUANTILE_DS",
        }
    }

    /// The sketch family it builds.
    pub fn family(self) -> SketchFamily {
        match self {
            SketchAggregate::ApproxCountDistinctDsHll
            | SketchAggregate::ApproxCountDistinctDsHllUtf8
            | SketchAggregate::DsHll => SketchFamily::Hll,
            SketchAggregate::ApproxCountDistinctDsTheta | SketchAggregate::DsTheta => {
                SketchFamily::Theta
            }
            SketchAggregate::DsQuantilesSketch | SketchAggregate::ApproxQuantileDs => {
                SketchFamily::Quantiles
            }
        }
    }

    /// Smallest and largest argument count.
    fn arity(self) -> (usize, usize) {
        match self {
            SketchAggregate::ApproxCountDistinctDsHll
            | SketchAggregate::ApproxCountDistinctDsHllUtf8
            | SketchAggregate::DsHll => (1, 3),
            SketchAggregate::ApproxCountDistinctDsTheta
            | SketchAggregate::DsTheta
            | SketchAggregate::DsQuantilesSketch => (1, 2),
            SketchAggregate::ApproxQuantileDs => (2, 3),
        }
    }

    fn return_type(self) -> DataType {
        match self {
            SketchAggregate::ApproxCountDistinctDsHll
            | SketchAggregate::ApproxCountDistinctDsHllUtf8
            | SketchAggregate::ApproxCountDistinctDsTheta => DataType::Int64,
            SketchAggregate::DsHll
            | SketchAggregate::DsTheta
            | SketchAggregate::DsQuantilesSketch => DataType::Binary,
            SketchAggregate::ApproxQuantileDs => DataType::Float64,
        }
    }

    fn returns_sketch(self) -> bool {
        self.return_type() == DataType::Binary
    }

    /// Parses the parameters after `expr`; `None` entries are arguments that are not literals.
    fn config(self, params: &[Option<ScalarValue>]) -> Result<AggConfig> {
        let f = self.sql_name();
        let get = |i: usize, what: &str| -> Result<Option<&ScalarValue>> {
            match params.get(i) {
                None => Ok(None),
                Some(None) => plan_err!("{f}: {what} must be a literal"),
                Some(Some(v)) => Ok(Some(v)),
            }
        };
        Ok(match self.family() {
            SketchFamily::Hll => AggConfig::Hll {
                lg_k: match get(0, "lgK")? {
                    Some(v) => check_lg_k(f, v)?,
                    None => HLL_DEFAULT_LG_K,
                },
                target: match get(1, "tgtHllType")? {
                    Some(v) => check_tgt_hll_type(f, v)?,
                    None => HllTargetType::default(),
                },
            },
            SketchFamily::Theta => AggConfig::Theta {
                size: match get(0, "size")? {
                    Some(v) => check_theta_size(f, v)?,
                    None => THETA_DEFAULT_SIZE,
                },
            },
            SketchFamily::Quantiles => {
                let (probability, k_at) = if self == SketchAggregate::ApproxQuantileDs {
                    match get(0, "probability")? {
                        Some(v) => (Some(check_fraction(f, "probability", v, true)?), 1),
                        None => return plan_err!("{f}: probability is required"),
                    }
                } else {
                    (None, 0)
                };
                AggConfig::Quantiles {
                    k: match get(k_at, "k")? {
                        Some(v) => check_quantiles_k(f, v)?,
                        None => DoublesSketch::DEFAULT_K,
                    },
                    probability,
                }
            }
        })
    }
}

/// Parsed parameters of an aggregation.
#[derive(Debug, Clone, Copy)]
enum AggConfig {
    Hll { lg_k: u8, target: HllTargetType },
    Theta { size: u32 },
    Quantiles { k: u16, probability: Option<f64> },
}

/// A sketch aggregation as a DataFusion [`AggregateUDFImpl`]; see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SketchAggregateUdaf {
    func: SketchAggregate,
    signature: Signature,
}

impl SketchAggregateUdaf {
    /// The UDAF implementation for `func`.
    pub fn new(func: SketchAggregate) -> Self {
        SketchAggregateUdaf {
            func,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Which aggregation this is.
    pub fn function(&self) -> SketchAggregate {
        self.func
    }

    fn check_arity(&self, n: usize) -> Result<()> {
        let (min, max) = self.func.arity();
        if n < min || n > max {
            return plan_err!(
                "Function {} takes {min} to {max} arguments, got {n}",
                self.func.sql_name()
            );
        }
        Ok(())
    }

    fn sketch_accumulator(&self, config: AggConfig) -> Result<Box<dyn Accumulator>> {
        let f = self.func.sql_name();
        let param = |e: dolmen_sketch::SketchError| plan_error(format!("{f}: {e}"));
        Ok(match config {
            AggConfig::Hll { lg_k, target } => Box::new(HllAccumulator {
                acc: HllAcc::new(lg_k, target).map_err(param)?,
                func: self.func,
            }),
            AggConfig::Theta { size } => Box::new(ThetaAccumulator {
                acc: ThetaAcc::new(size).map_err(param)?,
                count: self.func == SketchAggregate::ApproxCountDistinctDsTheta,
            }),
            AggConfig::Quantiles { k, probability } => Box::new(QuantilesAccumulator {
                sketch: DoublesSketch::new(k).map_err(param)?,
                probability,
            }),
        })
    }
}

impl AggregateUDFImpl for SketchAggregateUdaf {
    fn name(&self) -> &str {
        self.func.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.func.return_type())
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        if let Some(first) = arg_fields.first() {
            self.func
                .family()
                .check_field(self.func.sql_name(), first)?;
        }
        Ok(Arc::new(if self.func.returns_sketch() {
            self.func.family().field(self.name(), false)
        } else {
            Field::new(self.name(), self.func.return_type(), false)
        }))
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.check_arity(arg_types.len())?;
        let f = self.func.sql_name();
        let mut out = arg_types.to_vec();
        let first = &arg_types[0];
        let ok = match self.func.family() {
            SketchFamily::Quantiles => {
                // Druid's LONG-typed booleans and timestamps (epoch millis) included.
                is_numeric_type(first)
                    || is_binary_type(first)
                    || super::is_string(first)
                    || matches!(
                        first,
                        DataType::Boolean
                            | DataType::Timestamp(..)
                            | DataType::Date32
                            | DataType::Date64
                            | DataType::Dictionary(..)
                    )
            }
            _ => !matches!(
                first,
                DataType::Struct(_) | DataType::Map(..) | DataType::Union(..)
            ),
        };
        if !ok {
            return plan_err!("{f} does not take values of type {first}");
        }
        if matches!(
            first,
            DataType::Decimal32(..)
                | DataType::Decimal64(..)
                | DataType::Decimal128(..)
                | DataType::Decimal256(..)
                | DataType::Float16
        ) {
            out[0] = DataType::Float64;
        }
        Ok(out)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.check_arity(args.exprs.len())?;
        let params = super::literal_args(args.exprs);
        let config = self.func.config(&params)?;
        self.sketch_accumulator(config)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[sketch]", args.name),
            DataType::Binary,
            true,
        ))])
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(match self.func {
            SketchAggregate::ApproxCountDistinctDsHll
            | SketchAggregate::ApproxCountDistinctDsHllUtf8
            | SketchAggregate::ApproxCountDistinctDsTheta => ScalarValue::Int64(Some(0)),
            SketchAggregate::ApproxQuantileDs => ScalarValue::Float64(Some(f64::NAN)),
            _ => {
                let config = self.func.config(&[])?;
                self.sketch_accumulator(config)?.evaluate()?
            }
        })
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        let func = self.func;
        // Validates the literal parameters while the plan is optimized, so that a bad lgK, size,
        // k or probability is a planning error; the expression itself is unchanged.
        Some(Box::new(move |af: AggregateFunction, _| {
            let params: Vec<Option<ScalarValue>> = af
                .params
                .args
                .iter()
                .skip(1)
                .map(|e| match e {
                    Expr::Literal(v, _) => Some(v.clone()),
                    _ => None,
                })
                .collect();
            func.config(&params)?;
            Ok(Expr::AggregateFunction(af))
        }))
    }
}

/// One input value, as the sketch aggregators see it.
enum Value<'a> {
    Str(&'a str),
    Long(i64),
    Double(f64),
    Sketch(&'a [u8]),
}

/// Calls `f` with every non-null value of `a` (see the module docs for the mapping).
fn for_each_value(
    func: &str,
    a: &ArrayRef,
    f: &mut dyn FnMut(Value<'_>) -> Result<()>,
) -> Result<()> {
    match a.data_type() {
        DataType::Null => {}
        DataType::Utf8 => {
            for v in a.as_string::<i32>().iter().flatten() {
                f(Value::Str(v))?;
            }
        }
        DataType::LargeUtf8 => {
            for v in a.as_string::<i64>().iter().flatten() {
                f(Value::Str(v))?;
            }
        }
        DataType::Utf8View => {
            for v in a.as_string_view().iter().flatten() {
                f(Value::Str(v))?;
            }
        }
        DataType::Binary => {
            for v in a.as_binary::<i32>().iter().flatten() {
                f(Value::Sketch(v))?;
            }
        }
        DataType::LargeBinary => {
            for v in a.as_binary::<i64>().iter().flatten() {
                f(Value::Sketch(v))?;
            }
        }
        DataType::BinaryView => {
            for v in a.as_binary_view().iter().flatten() {
                f(Value::Sketch(v))?;
            }
        }
        DataType::FixedSizeBinary(_) => {
            for v in a.as_fixed_size_binary().iter().flatten() {
                f(Value::Sketch(v))?;
            }
        }
        DataType::Float64 => {
            for v in a.as_primitive::<Float64Type>().iter().flatten() {
                f(Value::Double(v))?;
            }
        }
        DataType::Float32 => {
            for v in a.as_primitive::<Float32Type>().iter().flatten() {
                f(Value::Double(f64::from(v)))?;
            }
        }
        DataType::Float16
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => {
            let d = cast(a, &DataType::Float64)?;
            for_each_value(func, &d, f)?;
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            // Druid hashes each element of a multi-value row / array as `toString()`.
            for row in (0..a.len()).filter(|r| a.is_valid(*r)) {
                let elements = match a.data_type() {
                    DataType::List(_) => a.as_list::<i32>().value(row),
                    DataType::LargeList(_) => a.as_list::<i64>().value(row),
                    _ => a.as_fixed_size_list().value(row),
                };
                let strings = if super::is_string(elements.data_type()) {
                    elements
                } else {
                    cast(&elements, &DataType::Utf8)?
                };
                for_each_value(func, &strings, f)?;
            }
        }
        DataType::Dictionary(_, v) => {
            let plain = cast(a, v)?;
            for_each_value(func, &plain, f)?;
        }
        dt if super::is_integer(dt)
            || matches!(
                dt,
                DataType::Boolean | DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64
            ) =>
        {
            let ms = match dt {
                DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => cast(
                    a,
                    &DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
                )?,
                _ => Arc::clone(a),
            };
            let longs = cast(&ms, &DataType::Int64)?;
            for v in longs.as_primitive::<Int64Type>().iter().flatten() {
                f(Value::Long(v))?;
            }
        }
        other => return exec_err!("{func} does not take values of type {other}"),
    }
    Ok(())
}

fn bad_sketch(func: &str, family: SketchFamily, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{func}: a binary value is not {}: {e}",
        family.noun()
    ))
}

/// The first (only) state column as Binary.
pub(super) fn state_column(states: &[ArrayRef]) -> Result<Option<ArrayRef>> {
    match states.first() {
        Some(s) => Ok(Some(cast(s, &DataType::Binary)?)),
        None => Ok(None),
    }
}

/// `DS_HLL` / `APPROX_COUNT_DISTINCT_DS_HLL[_UTF8]` state.
#[derive(Debug)]
struct HllAccumulator {
    acc: HllAcc,
    func: SketchAggregate,
}

impl HllAccumulator {
    fn count(&self) -> bool {
        self.func != SketchAggregate::DsHll
    }
}

impl Accumulator for HllAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(a) = values.first() else {
            return Ok(());
        };
        let func = self.func.sql_name();
        let encoding = if self.func == SketchAggregate::ApproxCountDistinctDsHllUtf8 {
            HllStringEncoding::Utf8
        } else {
            HllStringEncoding::Utf16Le
        };
        let acc = &mut self.acc;
        for_each_value(func, a, &mut |v| {
            match v {
                Value::Str(s) => acc.update_str(s, encoding),
                Value::Long(l) => acc.update_i64(l),
                Value::Double(d) => acc.update_f64(d),
                Value::Sketch(b) => acc
                    .merge_bytes(b)
                    .map_err(|e| bad_sketch(func, SketchFamily::Hll, e))?,
            }
            Ok(())
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(if self.count() {
            // HllSketchAggregatorFactory.finalizeComputation with round: Math.round.
            ScalarValue::Int64(Some((self.acc.sketch_estimate() + 0.5).floor() as i64))
        } else {
            ScalarValue::Binary(Some(self.acc.to_bytes()))
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.acc.memory_size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.acc.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = state_column(states)? else {
            return Ok(());
        };
        for b in s.as_binary::<i32>().iter().flatten() {
            self.acc
                .merge_bytes(b)
                .map_err(|e| DataFusionError::Internal(format!("bad partial HLL sketch: {e}")))?;
        }
        Ok(())
    }
}

/// `DS_THETA` / `APPROX_COUNT_DISTINCT_DS_THETA` state.
#[derive(Debug)]
struct ThetaAccumulator {
    acc: ThetaAcc,
    count: bool,
}

impl Accumulator for ThetaAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(a) = values.first() else {
            return Ok(());
        };
        let func = if self.count {
            "APPROX_COUNT_DISTINCT_DS_THETA"
        } else {
            "DS_THETA"
        };
        let acc = &mut self.acc;
        for_each_value(func, a, &mut |v| {
            match v {
                Value::Str(s) => acc.update_str(s),
                Value::Long(l) => acc.update_i64(l),
                Value::Double(d) => acc.update_f64(d),
                Value::Sketch(b) => acc
                    .merge_bytes(b)
                    .map_err(|e| bad_sketch(func, SketchFamily::Theta, e))?,
            }
            Ok(())
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(if self.count {
            // A double estimate coerced to BIGINT (`Number.longValue()`): truncated.
            ScalarValue::Int64(Some(self.acc.estimate() as i64))
        } else {
            ScalarValue::Binary(Some(self.acc.to_bytes()))
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.acc.memory_size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.acc.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = state_column(states)? else {
            return Ok(());
        };
        for b in s.as_binary::<i32>().iter().flatten() {
            self.acc
                .merge_bytes(b)
                .map_err(|e| DataFusionError::Internal(format!("bad partial theta sketch: {e}")))?;
        }
        Ok(())
    }
}

/// `DS_QUANTILES_SKETCH` / `APPROX_QUANTILE_DS` state.
#[derive(Debug)]
struct QuantilesAccumulator {
    sketch: DoublesSketch,
    /// `Some` for `APPROX_QUANTILE_DS`.
    probability: Option<f64>,
}

impl Accumulator for QuantilesAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(a) = values.first() else {
            return Ok(());
        };
        let func = if self.probability.is_some() {
            "APPROX_QUANTILE_DS"
        } else {
            "DS_QUANTILES_SKETCH"
        };
        let sketch = &mut self.sketch;
        for_each_value(func, a, &mut |v| {
            match v {
                Value::Double(d) => sketch.update(d),
                Value::Long(l) => sketch.update(l as f64),
                Value::Str(s) => {
                    if let Ok(d) = s.trim().parse::<f64>() {
                        sketch.update(d);
                    }
                }
                Value::Sketch(b) => {
                    let other = DoublesSketch::deserialize(b)
                        .map_err(|e| bad_sketch(func, SketchFamily::Quantiles, e))?;
                    sketch.merge(&other);
                }
            }
            Ok(())
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(match self.probability {
            Some(p) => ScalarValue::Float64(Some(self.sketch.quantile(p).unwrap_or(f64::NAN))),
            None => ScalarValue::Binary(Some(self.sketch.serialize())),
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + 8 * self.sketch.retained_items()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.sketch.serialize()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = state_column(states)? else {
            return Ok(());
        };
        for b in s.as_binary::<i32>().iter().flatten() {
            let other = DoublesSketch::deserialize(b).map_err(|e| {
                DataFusionError::Internal(format!("bad partial quantiles sketch: {e}"))
            })?;
            self.sketch.merge(&other);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Post-processing functions
// ---------------------------------------------------------------------------------------------

/// Which post-processing function a [`SketchFunctionUdf`] implements (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SketchFunction {
    /// `HLL_SKETCH_ESTIMATE(sketch[, round])` -> DOUBLE.
    HllSketchEstimate,
    /// `HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(sketch[, numStdDev])` -> `ARRAY<DOUBLE>`.
    HllSketchEstimateWithErrorBounds,
    /// `HLL_SKETCH_UNION([lgK, tgtHllType,] sketch, ...)` -> `COMPLEX<HLLSketch>`.
    HllSketchUnion,
    /// `HLL_SKETCH_TO_STRING(sketch)` -> VARCHAR.
    HllSketchToString,
    /// `THETA_SKETCH_ESTIMATE(sketch)` -> DOUBLE.
    ThetaSketchEstimate,
    /// `THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(sketch, numStdDev)` -> struct.
    ThetaSketchEstimateWithErrorBounds,
    /// `THETA_SKETCH_UNION([size,] sketch, ...)` -> `COMPLEX<thetaSketch>`.
    ThetaSketchUnion,
    /// `THETA_SKETCH_INTERSECT([size,] sketch, ...)` -> `COMPLEX<thetaSketch>`.
    ThetaSketchIntersect,
    /// `THETA_SKETCH_NOT([size,] sketch, ...)` -> `COMPLEX<thetaSketch>`.
    ThetaSketchNot,
    /// `DS_GET_QUANTILE(sketch, fraction)` -> DOUBLE.
    DsGetQuantile,
    /// `DS_GET_QUANTILES(sketch, fraction, ...)` -> `ARRAY<DOUBLE>`.
    DsGetQuantiles,
    /// `DS_HISTOGRAM(sketch, splitPoint, ...)` -> `ARRAY<DOUBLE>`.
    DsHistogram,
    /// `DS_CDF(sketch, splitPoint, ...)` -> `ARRAY<DOUBLE>`.
    DsCdf,
    /// `DS_RANK(sketch, value)` -> DOUBLE.
    DsRank,
    /// `DS_QUANTILE_SUMMARY(sketch)` -> VARCHAR.
    DsQuantileSummary,
}

/// The role of one argument of a post-processing function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    Sketch,
    Round,
    NumStdDev,
    LgK,
    TgtHllType,
    Size,
    /// A fraction read as a FLOAT (`DS_GET_QUANTILE`).
    FloatFraction,
    /// A fraction read as a DOUBLE (`DS_GET_QUANTILES`).
    Fraction,
    SplitPoint,
    /// A value read as a FLOAT (`DS_RANK`).
    FloatValue,
}

impl SketchFunction {
    /// Every function, in documentation order.
    pub const ALL: [SketchFunction; 15] = [
        SketchFunction::HllSketchEstimate,
        SketchFunction::HllSketchEstimateWithErrorBounds,
        SketchFunction::HllSketchUnion,
        SketchFunction::HllSketchToString,
        SketchFunction::ThetaSketchEstimate,
        SketchFunction::ThetaSketchEstimateWithErrorBounds,
        SketchFunction::ThetaSketchUnion,
        SketchFunction::ThetaSketchIntersect,
        SketchFunction::ThetaSketchNot,
        SketchFunction::DsGetQuantile,
        SketchFunction::DsGetQuantiles,
        SketchFunction::DsHistogram,
        SketchFunction::DsCdf,
        SketchFunction::DsRank,
        SketchFunction::DsQuantileSummary,
    ];

    /// The SQL name (upper case).
    pub fn sql_name(self) -> &'static str {
        match self {
            SketchFunction::HllSketchEstimate => "HLL_SKETCH_ESTIMATE",
            SketchFunction::HllSketchEstimateWithErrorBounds => {
                "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS"
            }
            SketchFunction::HllSketchUnion => "HLL_SKETCH_UNION",
            SketchFunction::HllSketchToString => "HLL_SKETCH_TO_STRING",
            SketchFunction::ThetaSketchEstimate => "THETA_SKETCH_ESTIMATE",
            SketchFunction::ThetaSketchEstimateWithErrorBounds => {
                "THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS"
            }
            SketchFunction::ThetaSketchUnion => "THETA_SKETCH_UNION",
            SketchFunction::ThetaSketchIntersect => "THETA_SKETCH_INTERSECT",
            SketchFunction::ThetaSketchNot => "THETA_SKETCH_NOT",
            SketchFunction::DsGetQuantile => "DS_GET_QUANTILE",
            SketchFunction::DsGetQuantiles => "DS_GET_QUANTILES",
            SketchFunction::DsHistogram => "DS_HISTOGRAM",
            SketchFunction::DsCdf => "DS_CDF",
            SketchFunction::DsRank => "DS_RANK",
            SketchFunction::DsQuantileSummary => "DS_QUANTILE_SUMMARY",
        }
    }

    /// The sketch family it reads.
    pub fn family(self) -> SketchFamily {
        use SketchFunction::*;
        match self {
            HllSketchEstimate
            | HllSketchEstimateWithErrorBounds
            | HllSketchUnion
            | HllSketchToString => SketchFamily::Hll,
            ThetaSketchEstimate
            | ThetaSketchEstimateWithErrorBounds
            | ThetaSketchUnion
            | ThetaSketchIntersect
            | ThetaSketchNot => SketchFamily::Theta,
            _ => SketchFamily::Quantiles,
        }
    }

    fn return_type(self) -> DataType {
        use SketchFunction::*;
        match self {
            HllSketchEstimate | ThetaSketchEstimate | DsGetQuantile | DsRank => DataType::Float64,
            HllSketchEstimateWithErrorBounds | DsGetQuantiles | DsHistogram | DsCdf => {
                DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
            }
            HllSketchUnion | ThetaSketchUnion | ThetaSketchIntersect | ThetaSketchNot => {
                DataType::Binary
            }
            HllSketchToString | DsQuantileSummary => DataType::Utf8,
            ThetaSketchEstimateWithErrorBounds => DataType::Struct(theta_bounds_fields()),
        }
    }

    /// The role of each argument, given their types.
    fn layout(self, types: &[DataType]) -> Result<Vec<Arg>> {
        use SketchFunction::*;
        let n = types.len();
        let f = self.sql_name();
        let arity = |min: usize, max: usize| -> Result<()> {
            if n < min || n > max {
                let expected = if min == max {
                    format!("{min}")
                } else if max == usize::MAX {
                    format!("at least {min}")
                } else {
                    format!("{min} to {max}")
                };
                return plan_err!("Function {f} takes {expected} arguments, got {n}");
            }
            Ok(())
        };
        let with_rest = |first: &[Arg], rest: Arg| -> Vec<Arg> {
            let mut v = first.to_vec();
            v.resize(n, rest);
            v
        };
        Ok(match self {
            HllSketchEstimate => {
                arity(1, 2)?;
                [Arg::Sketch, Arg::Round][..n].to_vec()
            }
            HllSketchEstimateWithErrorBounds => {
                arity(1, 2)?;
                [Arg::Sketch, Arg::NumStdDev][..n].to_vec()
            }
            HllSketchToString | ThetaSketchEstimate | DsQuantileSummary => {
                arity(1, 1)?;
                vec![Arg::Sketch]
            }
            ThetaSketchEstimateWithErrorBounds => {
                arity(2, 2)?;
                vec![Arg::Sketch, Arg::NumStdDev]
            }
            HllSketchUnion => {
                arity(1, usize::MAX)?;
                // Druid: "The lgK and tgtHllType can be optionally specified as the first
                // parameter; if provided, both optional parameters must be specified."
                if n >= 3 && is_numeric_type(&types[0]) && super::is_string(&types[1]) {
                    with_rest(&[Arg::LgK, Arg::TgtHllType], Arg::Sketch)
                } else {
                    vec![Arg::Sketch; n]
                }
            }
            ThetaSketchUnion | ThetaSketchIntersect | ThetaSketchNot => {
                arity(1, usize::MAX)?;
                if n >= 2 && types[0].is_numeric() {
                    with_rest(&[Arg::Size], Arg::Sketch)
                } else {
                    vec![Arg::Sketch; n]
                }
            }
            DsGetQuantile => {
                arity(2, 2)?;
                vec![Arg::Sketch, Arg::FloatFraction]
            }
            DsRank => {
                arity(2, 2)?;
                vec![Arg::Sketch, Arg::FloatValue]
            }
            DsGetQuantiles => {
                arity(2, usize::MAX)?;
                with_rest(&[Arg::Sketch], Arg::Fraction)
            }
            DsHistogram | DsCdf => {
                arity(2, usize::MAX)?;
                with_rest(&[Arg::Sketch], Arg::SplitPoint)
            }
        })
    }
}

/// Fields of `THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS` results, in Druid's JSON order.
fn theta_bounds_fields() -> Fields {
    Fields::from(vec![
        Field::new("estimate", DataType::Float64, true),
        Field::new("highBound", DataType::Float64, true),
        Field::new("lowBound", DataType::Float64, true),
        Field::new("numStdDev", DataType::Int32, true),
    ])
}

/// Validated constant parameters of one call.
#[derive(Debug, Clone, Default)]
struct Params {
    round: bool,
    num_std_dev: Option<i32>,
    lg_k: Option<u8>,
    target: Option<HllTargetType>,
    size: Option<u32>,
    /// Fractions, split points, or the single fraction/value.
    numbers: Vec<f64>,
}

impl SketchFunction {
    /// Validates one constant parameter into `p`.
    fn param(self, arg: Arg, v: &ScalarValue, p: &mut Params) -> Result<()> {
        let f = self.sql_name();
        match arg {
            Arg::Sketch => {}
            Arg::Round => match v {
                ScalarValue::Boolean(Some(b)) => p.round = *b,
                _ => return plan_err!("{f}: round must be a boolean literal, got [{v}]"),
            },
            Arg::NumStdDev if self.family() == SketchFamily::Hll => {
                p.num_std_dev = Some(i32::from(check_num_std_dev(f, v)?));
            }
            Arg::NumStdDev => {
                // Theta: any int; only estimation-mode sketches need 1, 2 or 3.
                let n = lit_int(f, "numStdDev", v)?;
                p.num_std_dev = Some(
                    i32::try_from(n)
                        .map_err(|_| plan_error(format!("{f}: numStdDev out of range: [{n}]")))?,
                );
            }
            Arg::LgK => p.lg_k = Some(check_lg_k(f, v)?),
            Arg::TgtHllType => p.target = Some(check_tgt_hll_type(f, v)?),
            Arg::Size => p.size = Some(check_theta_size(f, v)?),
            Arg::FloatFraction => p.numbers.push(check_fraction(f, "fraction", v, true)?),
            Arg::Fraction => p.numbers.push(check_fraction(f, "fraction", v, false)?),
            Arg::SplitPoint => p.numbers.push(check_number(f, "split point", v)?),
            Arg::FloatValue => p
                .numbers
                .push(f64::from(check_number(f, "value", v)? as f32)),
        }
        Ok(())
    }

    fn check_numbers(self, p: &Params) -> Result<()> {
        if matches!(self, SketchFunction::DsHistogram | SketchFunction::DsCdf) {
            DoublesSketch::check_split_points(&p.numbers)
                .map_err(|e| plan_error(format!("{}: {e}", self.sql_name())))?;
        }
        Ok(())
    }
}

/// A sketch post-processing function as a DataFusion [`ScalarUDFImpl`]; see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SketchFunctionUdf {
    func: SketchFunction,
    name: String,
    signature: Signature,
}

impl SketchFunctionUdf {
    /// The UDF implementation for `func`.
    pub fn new(func: SketchFunction) -> Self {
        SketchFunctionUdf {
            func,
            name: func.sql_name().to_ascii_lowercase(),
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Which function this is.
    pub fn function(&self) -> SketchFunction {
        self.func
    }
}

impl ScalarUDFImpl for SketchFunctionUdf {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.func.return_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let layout = self.func.layout(&types)?;
        let mut p = Params::default();
        let mut all_numbers_known = true;
        for (i, arg) in layout.iter().enumerate() {
            if *arg == Arg::Sketch {
                self.func
                    .family()
                    .check_field(self.func.sql_name(), &args.arg_fields[i])?;
                continue;
            }
            match args.scalar_arguments.get(i).copied().flatten() {
                Some(v) => self.func.param(*arg, v, &mut p)?,
                None => all_numbers_known = false,
            }
        }
        if all_numbers_known {
            self.func.check_numbers(&p)?;
        }
        let ret = self.func.return_type();
        Ok(Arc::new(if ret == DataType::Binary {
            self.func.family().field(self.name(), true)
        } else {
            Field::new(self.name(), ret, true)
        }))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let layout = self.func.layout(arg_types)?;
        let f = self.func.sql_name();
        layout
            .iter()
            .zip(arg_types)
            .map(|(arg, dt)| {
                let (ok, to) = match arg {
                    Arg::Sketch if super::is_string(dt) => (true, DataType::Utf8),
                    Arg::Sketch => (is_binary_type(dt), DataType::Binary),
                    Arg::Round => (
                        matches!(dt, DataType::Boolean | DataType::Null),
                        DataType::Boolean,
                    ),
                    Arg::NumStdDev | Arg::LgK | Arg::Size => (is_numeric_type(dt), DataType::Int64),
                    Arg::TgtHllType => (
                        super::is_string(dt) || matches!(dt, DataType::Null),
                        DataType::Utf8,
                    ),
                    Arg::FloatFraction | Arg::Fraction | Arg::SplitPoint | Arg::FloatValue => {
                        (is_numeric_type(dt), DataType::Float64)
                    }
                };
                if !ok {
                    let what = if *arg == Arg::Sketch {
                        self.func.family().noun()
                    } else {
                        "a literal of another type"
                    };
                    return plan_err!("{f} takes {what} where it got a value of type {dt}");
                }
                // Keep integer literals integral and binary views as they are where that is
                // already what the function reads.
                Ok(match (arg, dt) {
                    (Arg::Sketch, DataType::Binary) => DataType::Binary,
                    (Arg::NumStdDev | Arg::LgK | Arg::Size, DataType::Int64) => DataType::Int64,
                    _ => to,
                })
            })
            .collect()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let types: Vec<DataType> = args.args.iter().map(|a| a.data_type()).collect();
        let layout = self.func.layout(&types)?;
        let f = self.func.sql_name();
        let mut p = Params::default();
        let mut sketches: Vec<ArrayRef> = Vec::new();
        let n = args.number_rows;
        for (arg, value) in layout.iter().zip(&args.args) {
            match (arg, value) {
                (Arg::Sketch, v) => sketches.push(sketch_array(f, v.to_array(n)?)?),
                (_, ColumnarValue::Scalar(s)) => self.func.param(*arg, s, &mut p)?,
                (_, ColumnarValue::Array(_)) => {
                    return plan_err!("{f}: parameters must be literals");
                }
            }
        }
        self.func.check_numbers(&p)?;
        let out = evaluate(self.func, &p, &sketches, n)?;
        Ok(ColumnarValue::Array(out))
    }
}

/// A sketch argument as Binary: binary values as they are, strings decoded from base64 (the
/// form sketches take in JSON results, which Druid's `HllSketchHolder.fromObj`,
/// `SketchHolder.deserialize` and `DoublesSketchOperations.deserialize` accept too).
pub(super) fn sketch_array(func: &str, a: ArrayRef) -> Result<ArrayRef> {
    if !super::is_string(a.data_type()) {
        return Ok(cast(&a, &DataType::Binary)?);
    }
    let strings = cast(&a, &DataType::Utf8)?;
    let mut out = BinaryBuilder::with_capacity(a.len(), 0);
    for v in strings.as_string::<i32>().iter() {
        match v {
            None => out.append_null(),
            Some(text) => match decode_base64(text) {
                Some(bytes) => out.append_value(bytes),
                None => return exec_err!("{func}: a string sketch argument is not base64"),
            },
        }
    }
    Ok(Arc::new(out.finish()))
}

/// Decodes standard base64 (`A-Z a-z 0-9 + /`), padding optional, as `java.util.Base64`'s
/// basic decoder; `None` for anything else.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let body = text.trim_end_matches('=');
    if text.len() - body.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in body.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover character cannot encode a byte.
    (bits < 6).then_some(out)
}

/// The sketch bytes of every sketch argument at `row`, or `None` when any is null.
fn row_sketches(sketches: &[ArrayRef], row: usize) -> Option<Vec<&[u8]>> {
    sketches
        .iter()
        .map(|a| {
            let b = a.as_binary::<i32>();
            b.is_valid(row).then(|| b.value(row))
        })
        .collect()
}

fn hll_view(func: &str, bytes: &[u8]) -> Result<HllSketchView> {
    HllSketchView::from_bytes(bytes).map_err(|e| bad_sketch(func, SketchFamily::Hll, e))
}

fn theta_view(func: &str, bytes: &[u8]) -> Result<ThetaSketchView> {
    ThetaSketchView::from_bytes(bytes).map_err(|e| bad_sketch(func, SketchFamily::Theta, e))
}

fn quantiles_sketch(func: &str, bytes: &[u8]) -> Result<DoublesSketch> {
    DoublesSketch::deserialize(bytes).map_err(|e| bad_sketch(func, SketchFamily::Quantiles, e))
}

pub(super) fn exec_error(func: &str, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{func}: {e}"))
}

/// Computes `func` row by row.
fn evaluate(func: SketchFunction, p: &Params, sketches: &[ArrayRef], n: usize) -> Result<ArrayRef> {
    use SketchFunction::*;
    let f = func.sql_name();
    match func {
        HllSketchEstimate | ThetaSketchEstimate | DsGetQuantile | DsRank => {
            let mut out = Float64Builder::with_capacity(n);
            for row in 0..n {
                let Some(s) = row_sketches(sketches, row) else {
                    out.append_null();
                    continue;
                };
                let v = match func {
                    HllSketchEstimate => {
                        let est = hll_view(f, s[0])?.estimate();
                        if p.round { (est + 0.5).floor() } else { est }
                    }
                    ThetaSketchEstimate => theta_view(f, s[0])?.estimate(),
                    DsGetQuantile => quantiles_sketch(f, s[0])?
                        .quantile(p.numbers[0])
                        .unwrap_or(f64::NAN),
                    _ => quantiles_sketch(f, s[0])?
                        .rank(p.numbers[0])
                        .unwrap_or(f64::NAN),
                };
                out.append_value(v);
            }
            Ok(Arc::new(out.finish()))
        }
        HllSketchEstimateWithErrorBounds | DsGetQuantiles | DsHistogram | DsCdf => {
            let mut out = ListBuilder::new(Float64Builder::new());
            for row in 0..n {
                let Some(s) = row_sketches(sketches, row) else {
                    out.append_null();
                    continue;
                };
                let values: Vec<f64> = match func {
                    HllSketchEstimateWithErrorBounds => {
                        let v = hll_view(f, s[0])?;
                        let sd = u8::try_from(p.num_std_dev.unwrap_or(1)).unwrap_or(0);
                        vec![
                            v.estimate(),
                            v.lower_bound(sd).map_err(|e| exec_error(f, e))?,
                            v.upper_bound(sd).map_err(|e| exec_error(f, e))?,
                        ]
                    }
                    DsGetQuantiles => {
                        let sk = quantiles_sketch(f, s[0])?;
                        p.numbers
                            .iter()
                            .map(|r| sk.quantile(*r).unwrap_or(f64::NAN))
                            .collect()
                    }
                    DsHistogram => {
                        let sk = quantiles_sketch(f, s[0])?;
                        let total = sk.n() as f64;
                        match sk.pmf(&p.numbers).map_err(|e| exec_error(f, e))? {
                            Some(pmf) => pmf.into_iter().map(|x| x * total).collect(),
                            None => vec![f64::NAN; p.numbers.len() + 1],
                        }
                    }
                    _ => {
                        let sk = quantiles_sketch(f, s[0])?;
                        sk.cdf(&p.numbers)
                            .map_err(|e| exec_error(f, e))?
                            .unwrap_or_else(|| vec![f64::NAN; p.numbers.len() + 1])
                    }
                };
                out.values().append_slice(&values);
                out.append(true);
            }
            Ok(Arc::new(out.finish()))
        }
        HllSketchToString | DsQuantileSummary => {
            let mut out = StringBuilder::with_capacity(n, n * 400);
            for row in 0..n {
                let Some(s) = row_sketches(sketches, row) else {
                    out.append_null();
                    continue;
                };
                if func == HllSketchToString {
                    out.append_value(hll_summary(&hll_view(f, s[0])?)?);
                } else {
                    out.append_value(quantiles_sketch(f, s[0])?.summary());
                }
            }
            Ok(Arc::new(out.finish()))
        }
        HllSketchUnion | ThetaSketchUnion | ThetaSketchIntersect | ThetaSketchNot => {
            let mut out = BinaryBuilder::with_capacity(n, n * 64);
            for row in 0..n {
                let Some(s) = row_sketches(sketches, row) else {
                    out.append_null();
                    continue;
                };
                let bytes = match func {
                    HllSketchUnion => {
                        let mut acc = HllAcc::new(
                            p.lg_k.unwrap_or(HLL_DEFAULT_LG_K),
                            p.target.unwrap_or_default(),
                        )
                        .map_err(|e| plan_error(format!("{f}: {e}")))?;
                        for b in &s {
                            acc.merge_bytes(b)
                                .map_err(|e| bad_sketch(f, SketchFamily::Hll, e))?;
                        }
                        acc.to_bytes()
                    }
                    ThetaSketchUnion => {
                        let mut acc = ThetaAcc::new(p.size.unwrap_or(THETA_DEFAULT_SIZE))
                            .map_err(|e| plan_error(format!("{f}: {e}")))?;
                        for b in &s {
                            acc.merge_bytes(b)
                                .map_err(|e| bad_sketch(f, SketchFamily::Theta, e))?;
                        }
                        acc.to_bytes()
                    }
                    _ => {
                        let views = s
                            .iter()
                            .map(|b| theta_view(f, b))
                            .collect::<Result<Vec<_>>>()?;
                        let result = if func == ThetaSketchIntersect {
                            ThetaSketchView::intersect(&views)
                        } else {
                            ThetaSketchView::a_not_b(&views)
                        };
                        result.map_err(|e| exec_error(f, e))?.to_bytes()
                    }
                };
                out.append_value(bytes);
            }
            Ok(Arc::new(out.finish()))
        }
        ThetaSketchEstimateWithErrorBounds => {
            let sd = p.num_std_dev.unwrap_or(1);
            let mut est = Vec::with_capacity(n);
            let mut hi = Vec::with_capacity(n);
            let mut lo = Vec::with_capacity(n);
            let mut sds = Vec::with_capacity(n);
            let mut valid = Vec::with_capacity(n);
            for row in 0..n {
                match row_sketches(sketches, row) {
                    Some(s) => {
                        let v = theta_view(f, s[0])?;
                        est.push(Some(v.estimate()));
                        hi.push(Some(v.upper_bound(sd).map_err(|e| exec_error(f, e))?));
                        lo.push(Some(v.lower_bound(sd).map_err(|e| exec_error(f, e))?));
                        sds.push(Some(sd));
                        valid.push(true);
                    }
                    None => {
                        est.push(None);
                        hi.push(None);
                        lo.push(None);
                        sds.push(None);
                        valid.push(false);
                    }
                }
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Float64Array::from(est)),
                Arc::new(Float64Array::from(hi)),
                Arc::new(Float64Array::from(lo)),
                Arc::new(Int32Array::from(sds)),
            ];
            let nulls: Option<arrow::buffer::NullBuffer> =
                valid.iter().any(|v| !v).then(|| valid.into());
            Ok(Arc::new(StructArray::try_new(
                theta_bounds_fields(),
                columns,
                nulls,
            )?))
        }
    }
}

/// DataSketches-java's `HllSketch.toString()` (summary only): the lines of
/// `BaseHllSketch.toString(true, false, false, false)`, doubles as Java's `Double.toString`.
fn hll_summary(view: &HllSketchView) -> Result<String> {
    let p = view.preamble();
    let java = |v: f64| -> String {
        let mut b = Vec::with_capacity(24);
        dolmen_common::java_number::write_java_double(&mut b, v);
        String::from_utf8_lossy(&b).into_owned()
    };
    let lb = view.lower_bound(1).map_err(|e| exec_error("HLL", e))?;
    let ub = view.upper_bound(1).map_err(|e| exec_error("HLL", e))?;
    let mut s = String::with_capacity(400);
    let mut line = |label: &str, value: String| {
        s.push_str("  ");
        s.push_str(label);
        s.push_str(": ");
        s.push_str(&value);
        s.push('\n');
    };
    line("Log Config K   ", p.lg_k.to_string());
    line("Hll Target     ", p.target.name().to_string());
    line("Current Mode   ", p.mode.name().to_string());
    line("Memory         ", "false".to_string());
    line("LB             ", java(lb));
    line("Estimate       ", java(view.estimate()));
    line("UB             ", java(ub));
    line("OutOfOrder Flag", p.out_of_order.to_string());
    if p.mode == HllMode::Hll {
        line("CurMin         ", p.cur_min.to_string());
        line("NumAtCurMin    ", p.num_at_cur_min.to_string());
        line("HipAccum       ", java(p.hip_accum));
        line("KxQ0           ", java(p.kxq0));
        line("KxQ1           ", java(p.kxq1));
        line("Rebuild KxQ Flg", p.rebuild_kxq.to_string());
    } else {
        line("Coupon Count   ", p.coupon_count.to_string());
    }
    Ok(format!("### HLL SKETCH SUMMARY: \n{s}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{context, foo, register};
    use arrow::array::{BinaryArray, Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Schema;
    use datafusion::prelude::SessionContext;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// `n` rows: `s` = "u{i}" (every 10th null), `l` = i, `d` = i / 4 (so 4 rows per double),
    /// `g` = i % 3, over `parts` batches.
    fn big(ctx: &SessionContext, n: i64, parts: i64) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
            Field::new("l", DataType::Int64, false),
            Field::new("d", DataType::Float64, false),
        ]));
        let per = n / parts;
        let batches = (0..parts)
            .map(|p| {
                let r = p * per..(p + 1) * per;
                RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int64Array::from_iter_values(r.clone().map(|i| i % 3))),
                        Arc::new(StringArray::from_iter(
                            r.clone().map(|i| (i % 10 != 9).then(|| format!("u{i}"))),
                        )),
                        Arc::new(Int64Array::from_iter_values(r.clone())),
                        Arc::new(Float64Array::from_iter_values(r.map(|i| (i / 4) as f64))),
                    ],
                )
                .unwrap()
            })
            .collect();
        register(ctx, "big", batches);
    }

    async fn run(ctx: &SessionContext, sql: &str) -> RecordBatch {
        let batches = crate::test_support::batches(ctx, sql).await;
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
    }

    fn f64_at(b: &RecordBatch, col: usize, row: usize) -> f64 {
        b.column(col).as_primitive::<Float64Type>().value(row)
    }

    fn i64_at(b: &RecordBatch, col: usize, row: usize) -> i64 {
        b.column(col).as_primitive::<Int64Type>().value(row)
    }

    fn bytes_at(b: &RecordBatch, col: usize, row: usize) -> Vec<u8> {
        b.column(col).as_binary::<i32>().value(row).to_vec()
    }

    fn list_at(b: &RecordBatch, col: usize, row: usize) -> Vec<f64> {
        b.column(col)
            .as_list::<i32>()
            .value(row)
            .as_primitive::<Float64Type>()
            .values()
            .to_vec()
    }

    fn str_at(b: &RecordBatch, col: usize, row: usize) -> String {
        b.column(col).as_string::<i32>().value(row).to_string()
    }

    #[tokio::test]
    async fn hll_matches_druid_test_results() {
        // Expected values are Druid's HllSketchSqlAggregatorTest (EXPECTED_PA_RESULT and the
        // filtered-aggregator tests), base64 sketches shown as hex.
        let ctx = context();
        foo(&ctx);
        let b = run(
            &ctx,
            "SELECT DS_HLL(dim2), DS_HLL(m1), DS_HLL(cnt), HLL_SKETCH_ESTIMATE(DS_HLL(dim2)), \
             HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(dim2), 2), \
             HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(dim2)), \
             DS_HLL(POWER(ABS(m1 + 100), 2)), APPROX_COUNT_DISTINCT_DS_HLL(dim2), \
             HLL_SKETCH_TO_STRING(DS_HLL(dim2)), HLL_SKETCH_ESTIMATE(DS_HLL(dim2), true), \
             DS_HLL(dim2) FILTER (WHERE dim2 = 'a'), DS_HLL(m1) FILTER (WHERE dim2 = 'a'), \
             APPROX_COUNT_DISTINCT_DS_HLL(dim1), APPROX_COUNT_DISTINCT_DS_HLL(dim2) FILTER (WHERE dim2 <> ''), \
             APPROX_COUNT_DISTINCT_DS_HLL_UTF8(dim2), APPROX_COUNT_DISTINCT_DS_HLL(dim1, CAST(21 AS BIGINT)) \
             FROM foo",
        )
        .await;
        assert_eq!(hex(&bytes_at(&b, 0, 0)), "0201070c03080200e152ff0feb788005");
        assert_eq!(
            hex(&bytes_at(&b, 1, 0)),
            "0201070c030806000ba59d0f8e94df058e44950a3e0bb504e2303e0ca7dc6104"
        );
        assert_eq!(hex(&bytes_at(&b, 2, 0)), "0201070c030801002bf2fb06");
        assert_eq!(f64_at(&b, 3, 0), 2.000000004967054);
        assert_eq!(
            list_at(&b, 4, 0),
            [2.000000004967054, 2.0, 2.0001997319422404]
        );
        assert_eq!(
            list_at(&b, 5, 0),
            [2.000000004967054, 2.0, 2.000099863468538]
        );
        assert_eq!(
            hex(&bytes_at(&b, 6, 0)),
            "0201070c03080600b5118807d66947070b0a3f0bb948af0c22253107b8995705"
        );
        assert_eq!(i64_at(&b, 7, 0), 2);
        assert_eq!(
            str_at(&b, 8, 0),
            "### HLL SKETCH SUMMARY: \n  Log Config K   : 12\n  Hll Target     : HLL_4\n  \
             Current Mode   : LIST\n  Memory         : false\n  LB             : 2.0\n  \
             Estimate       : 2.000000004967054\n  UB             : 2.000099863468538\n  \
             OutOfOrder Flag: false\n  Coupon Count   : 2\n"
        );
        assert_eq!(f64_at(&b, 9, 0), 2.0);
        assert_eq!(hex(&bytes_at(&b, 10, 0)), "0201070c03080100e152ff0f");
        assert_eq!(
            hex(&bytes_at(&b, 11, 0)),
            "0201070c030802000ba59d0f3e0bb504"
        );
        assert_eq!(i64_at(&b, 12, 0), 5, "empty strings are skipped");
        assert_eq!(i64_at(&b, 13, 0), 2);
        assert_eq!(i64_at(&b, 14, 0), 2);
        assert_eq!(i64_at(&b, 15, 0), 5);
        // Sketch results are typed COMPLEX<HLLSketch> through the field metadata.
        let f = b.schema().field(0).clone();
        assert_eq!(SketchFamily::of_field(&f), Some(SketchFamily::Hll));
        assert_eq!(
            f.metadata()
                .get(DRUID_TYPE_METADATA_KEY)
                .map(String::as_str),
            Some("COMPLEX<HLLSketch>")
        );
        // lgK and target type reach the sketch preamble.
        let b = run(&ctx, "SELECT DS_HLL(dim1, 10, 'HLL_8'), HLL_SKETCH_UNION(14, 'HLL_6', DS_HLL(dim1), DS_HLL(dim2)) FROM foo").await;
        let v = HllSketchView::from_bytes(&bytes_at(&b, 0, 0)).unwrap();
        assert_eq!(
            (v.preamble().lg_k, v.preamble().target),
            (10, HllTargetType::Hll8)
        );
        let u = HllSketchView::from_bytes(&bytes_at(&b, 1, 0)).unwrap();
        // Coupon-mode inputs do not lower the union's lgK (as in DataSketches-java).
        assert_eq!(
            (u.preamble().lg_k, u.preamble().target),
            (14, HllTargetType::Hll6)
        );
        assert_eq!(
            u.estimate().round(),
            6.0,
            "dim1 {{10.1, 2, 1, def, abc}} + dim2 {{a, abc}}"
        );
    }

    #[tokio::test]
    async fn base64_sketches_and_multi_value_rows() {
        let ctx = context();
        foo(&ctx);
        // Druid's DS_HLL(dim2) result as a JSON client receives it.
        let b = run(
            &ctx,
            "SELECT HLL_SKETCH_ESTIMATE('AgEHDAMIAgDhUv8P63iABQ=='), \
             HLL_SKETCH_ESTIMATE('AgEHDAMIAgDhUv8P63iABQ'), \
             DS_GET_QUANTILE('AQMIHoAAAAA=', 0.5), \
             APPROX_COUNT_DISTINCT_DS_HLL(make_array(dim1, dim2)), \
             APPROX_COUNT_DISTINCT_DS_THETA(make_array(dim1, dim2)) FROM foo",
        )
        .await;
        assert_eq!(f64_at(&b, 0, 0), 2.000000004967054);
        assert_eq!(f64_at(&b, 1, 0), 2.000000004967054);
        assert!(f64_at(&b, 2, 0).is_nan());
        // Each element counts; null and empty elements are skipped: 10.1, 2, 1, def, abc, a.
        assert_eq!(i64_at(&b, 3, 0), 6);
        assert_eq!(i64_at(&b, 4, 0), 6);
        let r = ctx
            .sql("SELECT HLL_SKETCH_ESTIMATE('not base64!') FROM foo")
            .await
            .unwrap()
            .collect()
            .await;
        assert!(r.is_err());
        assert_eq!(
            decode_base64("AQMIHoAAAAA="),
            Some(vec![1, 3, 8, 0x1e, 0x80, 0, 0, 0])
        );
        assert_eq!(decode_base64(""), Some(vec![]));
        assert_eq!(decode_base64("A"), None);
        assert_eq!(decode_base64("AB==="), None);
    }

    #[tokio::test]
    async fn theta_matches_druid_test_results() {
        // Druid's ThetaSketchSqlAggregatorTest.testThetaSketchPostAggs (SQL-compatible nulls).
        let ctx = context();
        foo(&ctx);
        let b = run(
            &ctx,
            "SELECT THETA_SKETCH_ESTIMATE(DS_THETA(dim2)), \
             THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_THETA(dim2), 10), \
             THETA_SKETCH_INTERSECT(DS_THETA(dim2), DS_THETA(dim1)), \
             THETA_SKETCH_UNION(DS_THETA(dim2), DS_THETA(dim1)), \
             THETA_SKETCH_NOT(DS_THETA(dim2), DS_THETA(dim1)), \
             THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(THETA_SKETCH_INTERSECT(DS_THETA(dim2), DS_THETA(dim1)), DS_THETA(dim2))), \
             THETA_SKETCH_ESTIMATE('AQMDAAA6zJOQxkPsNomrZQ=='), \
             APPROX_COUNT_DISTINCT_DS_THETA(dim2) FROM foo",
        )
        .await;
        assert_eq!(f64_at(&b, 0, 0), 2.0);
        let s = b.column(1).as_struct();
        let bounds: Vec<f64> = (0..3)
            .map(|c| s.column(c).as_primitive::<Float64Type>().value(0))
            .collect();
        assert_eq!(bounds, [2.0, 2.0, 2.0]);
        assert_eq!(
            s.column(3)
                .as_primitive::<arrow::datatypes::Int32Type>()
                .value(0),
            10
        );
        // Druid writes the one-entry results in DataSketches-java's single-item layout
        // ("AQMDAAA6zJOQxkPsNomrZQ==", "AQMDAAA6zJMXwR1ShQcBew=="); the retained hash is the same.
        assert!(hex(&bytes_at(&b, 2, 0)).ends_with("90c643ec3689ab65"));
        // Byte for byte Druid's union, but for bytes 12..16, the sampling probability `p`
        // that DataSketches-java writes as 1.0f and the Rust (like the C++) library as 0; readers
        // ignore it in compact sketches.
        let union = hex(&bytes_at(&b, 3, 0));
        assert_eq!(&union[..24], "02030300001acc9306000000");
        assert_eq!(
            &union[32..],
            "55d3073b4c21c309f873a80419ded73290c643ec3689ab65\
             47966c9b779fe56917c11d528507017bf1b0b90e484d257d"
        );
        assert!(hex(&bytes_at(&b, 4, 0)).ends_with("17c11d528507017b"));
        assert_eq!(f64_at(&b, 5, 0), 1.0);
        assert_eq!(
            f64_at(&b, 6, 0),
            1.0,
            "Java's single-item layout reads back"
        );
        assert_eq!(i64_at(&b, 7, 0), 2);
        assert_eq!(
            SketchFamily::of_field(b.schema().field(3)),
            Some(SketchFamily::Theta)
        );
    }

    #[tokio::test]
    async fn quantiles_match_druid_test_results() {
        // Druid's DoublesSketchSqlAggregatorTest.testDoublesSketchPostAggs and
        // testDoublesSketchPostAggsPostSort, testEmptyTimeseriesResults.
        let ctx = context();
        foo(&ctx);
        let b = run(
            &ctx,
            "SELECT APPROX_QUANTILE_DS(cnt, 0.5) + 1, \
             DS_GET_QUANTILE(DS_QUANTILES_SKETCH(cnt), 0.5) + 1000, \
             DS_GET_QUANTILE(DS_QUANTILES_SKETCH(cnt + 123), 0.5) + 1000, \
             DS_GET_QUANTILES(DS_QUANTILES_SKETCH(cnt), 0.5, 0.8), \
             DS_GET_QUANTILES(DS_QUANTILES_SKETCH(cnt), CAST(0.5 AS DOUBLE), CAST(0.8 AS DOUBLE)) AS casted, \
             DS_HISTOGRAM(DS_QUANTILES_SKETCH(cnt), 0.2, 0.6), \
             DS_RANK(DS_QUANTILES_SKETCH(cnt), 3), \
             DS_CDF(DS_QUANTILES_SKETCH(cnt), 0.2, 0.6), \
             DS_QUANTILE_SUMMARY(DS_QUANTILES_SKETCH(cnt)), \
             DS_GET_QUANTILE(DS_QUANTILES_SKETCH(m1), 0.5), \
             DS_GET_QUANTILE(DS_QUANTILES_SKETCH(m1), 0.98), \
             APPROX_QUANTILE_DS(m1, 0.5, 256) \
             FROM foo",
        )
        .await;
        assert_eq!(f64_at(&b, 0, 0), 2.0);
        assert_eq!(f64_at(&b, 1, 0), 1001.0);
        assert_eq!(f64_at(&b, 2, 0), 1124.0);
        assert_eq!(list_at(&b, 3, 0), [1.0, 1.0]);
        assert_eq!(list_at(&b, 4, 0), [1.0, 1.0]);
        assert_eq!(list_at(&b, 5, 0), [0.0, 0.0, 6.0]);
        assert_eq!(f64_at(&b, 6, 0), 1.0);
        assert_eq!(list_at(&b, 7, 0), [0.0, 0.0, 1.0]);
        let summary = str_at(&b, 8, 0);
        assert!(
            summary.starts_with("\n### Quantiles HeapUpdateDoublesSketch SUMMARY: \n"),
            "{summary}"
        );
        assert!(
            summary.contains("   N                            : 6\n"),
            "{summary}"
        );
        assert_eq!(f64_at(&b, 9, 0), 3.0);
        assert_eq!(f64_at(&b, 10, 0), 6.0);
        assert_eq!(f64_at(&b, 11, 0), 3.0);
        // No rows: the empty sketch (Druid's "AQMIHoAAAAA=") and NaN.
        let b = run(
            &ctx,
            "SELECT APPROX_QUANTILE_DS(m1, 0.01), DS_QUANTILES_SKETCH(m1), \
             DS_GET_QUANTILES(DS_QUANTILES_SKETCH(m1), 0.1, 0.9), DS_CDF(DS_QUANTILES_SKETCH(m1), 1), \
             DS_RANK(DS_QUANTILES_SKETCH(m1), 1) FROM foo WHERE dim1 = 'nonexistent'",
        )
        .await;
        assert!(f64_at(&b, 0, 0).is_nan());
        assert_eq!(hex(&bytes_at(&b, 1, 0)), "0103081e80000000");
        assert!(list_at(&b, 2, 0).iter().all(|v| v.is_nan()));
        assert_eq!(list_at(&b, 3, 0).len(), 2);
        assert!(f64_at(&b, 4, 0).is_nan());
        assert_eq!(
            SketchFamily::of_field(b.schema().field(1)),
            Some(SketchFamily::Quantiles)
        );
    }

    #[tokio::test]
    async fn exact_below_threshold_and_nulls_ignored() {
        let ctx = context();
        big(&ctx, 320, 4);
        // 288 non-null distinct strings, 320 longs, 80 doubles: HLL lgK 12 stays in its exact
        // coupon modes up to 3/4 * 2^(lgK - 3) = 384 distinct values; theta below its size.
        let b = run(
            &ctx,
            "SELECT APPROX_COUNT_DISTINCT_DS_HLL(s), APPROX_COUNT_DISTINCT_DS_THETA(s), \
             APPROX_COUNT_DISTINCT_DS_HLL(l), APPROX_COUNT_DISTINCT_DS_THETA(l), \
             APPROX_COUNT_DISTINCT_DS_HLL(d), APPROX_COUNT_DISTINCT_DS_THETA(d), \
             THETA_SKETCH_ESTIMATE(DS_THETA(s)), APPROX_QUANTILE_DS(l, 0.5, 256), \
             APPROX_COUNT_DISTINCT_DS_HLL(CASE WHEN l < 0 THEN s END), \
             APPROX_QUANTILE_DS(to_timestamp_millis(l), 1.0) FROM big",
        )
        .await;
        // HLL is exact (LIST/SET mode) well below 3/4 * 2^lgK distinct values; theta below size.
        assert_eq!(i64_at(&b, 0, 0), 288);
        assert_eq!(i64_at(&b, 1, 0), 288);
        assert_eq!(i64_at(&b, 2, 0), 320);
        assert_eq!(i64_at(&b, 3, 0), 320);
        assert_eq!(i64_at(&b, 4, 0), 80);
        assert_eq!(i64_at(&b, 5, 0), 80);
        assert_eq!(f64_at(&b, 6, 0), 288.0);
        // Exact below 2k = 512 items: the smallest item whose rank reaches 0.5 * 320 = 160.
        assert_eq!(f64_at(&b, 7, 0), 159.0);
        assert_eq!(i64_at(&b, 8, 0), 0, "all-null input counts nothing");
        assert_eq!(f64_at(&b, 9, 0), 319.0, "timestamps as epoch millis");
    }

    #[tokio::test]
    async fn accuracy_on_100k_distinct_and_round_trip() {
        let ctx = context();
        big(&ctx, 100_000, 4);
        let b = run(
            &ctx,
            "SELECT APPROX_COUNT_DISTINCT_DS_HLL(l), HLL_SKETCH_ESTIMATE(DS_HLL(l), true), \
             HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(l), 3), \
             APPROX_COUNT_DISTINCT_DS_THETA(l), THETA_SKETCH_ESTIMATE(DS_THETA(l)), \
             THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_THETA(l), 3), \
             APPROX_QUANTILE_DS(l, 0.5), DS_GET_QUANTILES(DS_QUANTILES_SKETCH(l), 0.1, 0.9), \
             DS_CDF(DS_QUANTILES_SKETCH(l), 25000, 75000), \
             APPROX_COUNT_DISTINCT_DS_HLL(s, 16, 'HLL_8'), APPROX_COUNT_DISTINCT_DS_THETA(s, 65536), \
             HLL_SKETCH_TO_STRING(DS_HLL(l)) \
             FROM big",
        )
        .await;
        let truth = 100_000.0;
        // HLL lgK 12: RSE ~ 1.04 / sqrt(4096) = 1.6%; allow 3 RSE.
        let hll = i64_at(&b, 0, 0) as f64;
        assert!((hll - truth).abs() < truth * 0.05, "{hll}");
        assert_eq!(
            f64_at(&b, 1, 0),
            hll,
            "DS_HLL then HLL_SKETCH_ESTIMATE round-trips"
        );
        let bounds = list_at(&b, 2, 0);
        assert!(bounds[1] <= truth && truth <= bounds[2], "{bounds:?}");
        assert_eq!(bounds[0].round(), hll);
        // Theta size 16384: RSE ~ 1 / sqrt(16384) = 0.8%.
        let theta = i64_at(&b, 3, 0) as f64;
        assert!((theta - truth).abs() < truth * 0.03, "{theta}");
        assert_eq!(f64_at(&b, 4, 0).trunc(), theta);
        let s = b.column(5).as_struct();
        let est = s.column(0).as_primitive::<Float64Type>().value(0);
        let hi = s.column(1).as_primitive::<Float64Type>().value(0);
        let lo = s.column(2).as_primitive::<Float64Type>().value(0);
        assert_eq!(
            s.column(3)
                .as_primitive::<arrow::datatypes::Int32Type>()
                .value(0),
            3
        );
        assert!(
            lo <= truth && truth <= hi && lo < est && est < hi,
            "{lo} {est} {hi}"
        );
        // Quantiles k 128: normalized rank error ~1.7% (99% confidence).
        let median = f64_at(&b, 6, 0);
        assert!((median - 50_000.0).abs() < 2_000.0, "{median}");
        let q = list_at(&b, 7, 0);
        assert!(
            (q[0] - 10_000.0).abs() < 2_000.0 && (q[1] - 90_000.0).abs() < 2_000.0,
            "{q:?}"
        );
        let cdf = list_at(&b, 8, 0);
        assert!(
            (cdf[0] - 0.25).abs() < 0.02 && (cdf[1] - 0.75).abs() < 0.02,
            "{cdf:?}"
        );
        assert_eq!(cdf[2], 1.0);
        // 90k non-null strings at lgK 16 (RSE 0.4%) and theta size 65536 (RSE 0.4%).
        let hll16 = i64_at(&b, 9, 0) as f64;
        assert!((hll16 - 90_000.0).abs() < 90_000.0 * 0.015, "{hll16}");
        let theta64k = i64_at(&b, 10, 0) as f64;
        assert!((theta64k - 90_000.0).abs() < 90_000.0 * 0.015, "{theta64k}");
        let summary = str_at(&b, 11, 0);
        assert!(summary.contains("  Current Mode   : HLL\n"), "{summary}");
        assert!(summary.contains("  HipAccum       : "), "{summary}");
    }

    /// A table of pre-built sketch columns, as segments hold them: row `i` (group `i % 2`)
    /// covers the longs `500 i .. 500 i + 1000`.
    fn rollup(ctx: &SessionContext, rows: i64) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, false),
            Field::new("hll", DataType::Binary, true),
            Field::new("theta", DataType::Binary, true),
            Field::new("qs", DataType::Binary, true),
        ]));
        let mut hll = Vec::new();
        let mut theta = Vec::new();
        let mut qs = Vec::new();
        for i in 0..rows {
            let mut h = HllAcc::new(12, HllTargetType::Hll4).unwrap();
            let mut t = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
            let mut q = DoublesSketch::new(128).unwrap();
            for v in 500 * i..500 * i + 1000 {
                h.update_i64(v);
                t.update_i64(v);
                q.update(v as f64);
            }
            hll.push(Some(h.to_bytes()));
            theta.push(Some(t.to_bytes()));
            qs.push(Some(q.serialize()));
        }
        // A null sketch row is ignored.
        hll.push(None);
        theta.push(None);
        qs.push(None);
        let n = hll.len();
        let bin = |v: &Vec<Option<Vec<u8>>>| -> ArrayRef {
            Arc::new(BinaryArray::from_iter(v.iter().map(|o| o.as_deref())))
        };
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i % 2))),
                bin(&hll),
                bin(&theta),
                bin(&qs),
            ],
        )
        .unwrap();
        let half = n / 2;
        register(
            ctx,
            "rollup",
            vec![batch.slice(0, half), batch.slice(half, n - half)],
        );
    }

    #[tokio::test]
    async fn stored_sketch_columns_merge_with_group_by_and_filter() {
        let ctx = context();
        rollup(&ctx, 20);
        // Rows 0..20 cover 0..10500.
        let b = run(
            &ctx,
            "SELECT APPROX_COUNT_DISTINCT_DS_HLL(hll), APPROX_COUNT_DISTINCT_DS_THETA(theta), \
             APPROX_QUANTILE_DS(qs, 0.5), HLL_SKETCH_ESTIMATE(DS_HLL(hll)), \
             THETA_SKETCH_ESTIMATE(DS_THETA(theta)), DS_GET_QUANTILE(DS_QUANTILES_SKETCH(qs), 1.0) \
             FROM rollup",
        )
        .await;
        let hll = i64_at(&b, 0, 0) as f64;
        assert!((hll - 10_500.0).abs() < 10_500.0 * 0.05, "{hll}");
        assert_eq!(i64_at(&b, 1, 0), 10_500);
        // Every value except the ends is in two rows: the median of the multiset is ~5250.
        let median = f64_at(&b, 2, 0);
        assert!((median - 5_250.0).abs() < 300.0, "{median}");
        assert!((f64_at(&b, 3, 0) - hll).abs() <= 0.5);
        assert_eq!(f64_at(&b, 4, 0), 10_500.0);
        assert_eq!(f64_at(&b, 5, 0), 10_499.0, "quantile 1.0 is the max");
        // GROUP BY with FILTER: odd rows of group 1 with g filter, theta is exact.
        let b = run(
            &ctx,
            "SELECT g, APPROX_COUNT_DISTINCT_DS_THETA(theta) FILTER (WHERE g = 1), \
             APPROX_COUNT_DISTINCT_DS_THETA(theta), APPROX_COUNT_DISTINCT_DS_HLL(hll) FILTER (WHERE g = 5) \
             FROM rollup GROUP BY g ORDER BY g",
        )
        .await;
        assert_eq!(b.num_rows(), 2);
        // Group 0: rows 0, 2, .., 18 (and the null row) cover 0..1000, 1000..2000, ..: 0..10000.
        assert_eq!(i64_at(&b, 1, 0), 0, "filtered out: the initial value 0");
        assert_eq!(i64_at(&b, 2, 0), 10_000);
        // Group 1: rows 1, 3, .., 19 cover 500..10500.
        assert_eq!(i64_at(&b, 1, 1), 10_000);
        assert_eq!(i64_at(&b, 2, 1), 10_000);
        assert_eq!(i64_at(&b, 3, 1), 0);
        // Set operations over the groups: overlap is 500..10000.
        let b = run(
            &ctx,
            "SELECT THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(DS_THETA(theta) FILTER (WHERE g = 0), DS_THETA(theta) FILTER (WHERE g = 1))), \
             THETA_SKETCH_ESTIMATE(THETA_SKETCH_UNION(32768, DS_THETA(theta) FILTER (WHERE g = 0), DS_THETA(theta) FILTER (WHERE g = 1))), \
             THETA_SKETCH_ESTIMATE(THETA_SKETCH_NOT(DS_THETA(theta) FILTER (WHERE g = 0), DS_THETA(theta) FILTER (WHERE g = 1))), \
             THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(16384, DS_THETA(theta))), \
             HLL_SKETCH_ESTIMATE(HLL_SKETCH_UNION(DS_HLL(hll) FILTER (WHERE g = 0), DS_HLL(hll) FILTER (WHERE g = 1)), true) \
             FROM rollup",
        )
        .await;
        assert_eq!(f64_at(&b, 0, 0), 9_500.0);
        assert_eq!(f64_at(&b, 1, 0), 10_500.0);
        assert_eq!(f64_at(&b, 2, 0), 500.0);
        assert_eq!(f64_at(&b, 3, 0), 10_500.0);
        let union = f64_at(&b, 4, 0);
        assert!((union - 10_500.0).abs() < 10_500.0 * 0.05, "{union}");
        assert_eq!(
            SketchFamily::of_field(b.schema().field(0)),
            None,
            "estimates are plain doubles"
        );
    }

    #[tokio::test]
    async fn bad_parameters_are_plan_errors() {
        let ctx = context();
        foo(&ctx);
        for sql in [
            "SELECT APPROX_COUNT_DISTINCT_DS_HLL(dim1, 3) FROM foo",
            "SELECT APPROX_COUNT_DISTINCT_DS_HLL(dim1, 22) FROM foo",
            "SELECT DS_HLL(dim1, 12, 'HLL_5') FROM foo",
            "SELECT DS_HLL(dim1, cnt) FROM foo",
            "SELECT DS_HLL(dim1, 12, 'HLL_4', 1) FROM foo",
            "SELECT DS_THETA(dim1, 1000) FROM foo",
            "SELECT APPROX_COUNT_DISTINCT_DS_THETA(dim1, 8) FROM foo",
            "SELECT DS_QUANTILES_SKETCH(m1, 100) FROM foo",
            "SELECT DS_QUANTILES_SKETCH(m1, 65536) FROM foo",
            "SELECT APPROX_QUANTILE_DS(m1, 1.5) FROM foo",
            "SELECT APPROX_QUANTILE_DS(m1) FROM foo",
            "SELECT APPROX_QUANTILE_DS(m1, m1) FROM foo",
            "SELECT DS_QUANTILES_SKETCH(make_array(m1)) FROM foo",
            "SELECT HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(dim1), 4) FROM foo",
            "SELECT HLL_SKETCH_ESTIMATE(DS_HLL(dim1), 'yes') FROM foo",
            "SELECT HLL_SKETCH_ESTIMATE(DS_THETA(dim1)) FROM foo",
            "SELECT THETA_SKETCH_ESTIMATE(DS_HLL(dim1)) FROM foo",
            "SELECT DS_GET_QUANTILE(DS_HLL(dim1), 0.5) FROM foo",
            "SELECT HLL_SKETCH_ESTIMATE(m1) FROM foo",
            "SELECT HLL_SKETCH_UNION(3, 'HLL_4', DS_HLL(dim1), DS_HLL(dim2)) FROM foo",
            "SELECT THETA_SKETCH_UNION(17, DS_THETA(dim1)) FROM foo",
            "SELECT THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_THETA(dim1)) FROM foo",
            "SELECT HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(dim1), 0) FROM foo",
            "SELECT DS_GET_QUANTILE(DS_QUANTILES_SKETCH(m1), 2) FROM foo",
            "SELECT DS_GET_QUANTILES(DS_QUANTILES_SKETCH(m1), 0.5, -0.1) FROM foo",
            "SELECT DS_CDF(DS_QUANTILES_SKETCH(m1), 0.6, 0.2) FROM foo",
            "SELECT DS_HISTOGRAM(DS_QUANTILES_SKETCH(m1), 1, 1) FROM foo",
            "SELECT DS_HISTOGRAM(DS_QUANTILES_SKETCH(m1)) FROM foo",
            "SELECT DS_RANK(DS_QUANTILES_SKETCH(m1), 'x') FROM foo",
        ] {
            let r = match ctx.sql(sql).await {
                Ok(df) => df.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            let e = r.expect_err(sql);
            assert!(
                matches!(e.find_root(), DataFusionError::Plan(_)),
                "{sql}: not a plan error: {e:?}"
            );
        }
        // Aggregation parameters are checked while the plan is optimized, before execution.
        let e = ctx
            .sql("SELECT g, DS_THETA(dim1, 1000) FROM (SELECT dim1, cnt AS g FROM foo) GROUP BY g")
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap_err();
        assert!(matches!(e.find_root(), DataFusionError::Plan(_)), "{e:?}");
        assert!(
            e.to_string()
                .contains("DS_THETA: size must be a power of 2"),
            "{e}"
        );
        // Parameters that are expressions of columns are refused at execution.
        let r = ctx
            .sql("SELECT DS_GET_QUANTILE(DS_QUANTILES_SKETCH(m1), MAX(m1) / 10) FROM foo")
            .await
            .unwrap()
            .collect()
            .await;
        assert!(r.is_err());
    }

    #[tokio::test]
    async fn bad_sketch_bytes_are_errors_not_panics() {
        let ctx = context();
        let schema = Arc::new(Schema::new(vec![Field::new("b", DataType::Binary, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(BinaryArray::from_iter(vec![
                Some(&b"\x02\x01\x07"[..]),
                Some(&[0xff; 40][..]),
                Some(&b""[..]),
                None,
            ]))],
        )
        .unwrap();
        register(&ctx, "junk", vec![batch]);
        for sql in [
            "SELECT APPROX_COUNT_DISTINCT_DS_HLL(b) FROM junk",
            "SELECT DS_THETA(b) FROM junk",
            "SELECT APPROX_QUANTILE_DS(b, 0.5) FROM junk WHERE b <> X''",
            "SELECT HLL_SKETCH_ESTIMATE(b) FROM junk",
            "SELECT HLL_SKETCH_TO_STRING(b) FROM junk",
            "SELECT THETA_SKETCH_INTERSECT(b, b) FROM junk",
            "SELECT DS_QUANTILE_SUMMARY(b) FROM junk WHERE b <> X''",
        ] {
            let r = ctx.sql(sql).await.unwrap().collect().await;
            assert!(r.is_err(), "{sql}");
        }
        // Null sketches give null results; Druid stores an empty quantiles sketch as 0 bytes.
        let b = run(
            &ctx,
            "SELECT HLL_SKETCH_ESTIMATE(b), THETA_SKETCH_UNION(b, b) FROM junk WHERE b IS NULL",
        )
        .await;
        assert!(b.column(0).is_null(0) && b.column(1).is_null(0));
        let b = run(
            &ctx,
            "SELECT DS_GET_QUANTILE(b, 0.5) FROM junk WHERE b = X''",
        )
        .await;
        assert!(f64_at(&b, 0, 0).is_nan());
    }
}
