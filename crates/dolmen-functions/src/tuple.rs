//! Druid's tuple sketch SQL functions over ArrayOfDoubles sketches
//! (`docs/development/extensions-core/datasketches-tuple.md`, `docs/querying/sql-aggregations.md`
//! and `docs/querying/sql-scalar.md`, "Tuple sketch functions").
//!
//! | Function | Defaults | Result |
//! |---|---|---|
//! | `DS_TUPLE_DOUBLES(expr[, nominalEntries])` | nominalEntries 16384 | `COMPLEX<arrayOfDoublesSketch>`: the union of the tuple sketches in `expr` (a stored sketch column) |
//! | `DS_TUPLE_DOUBLES(key, metric, ...[, nominalEntries])` | nominalEntries 16384 | `COMPLEX<arrayOfDoublesSketch>`: a sketch built from a key column and one or more numeric metric columns |
//! | `DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(sketch)` | | `ARRAY<DOUBLE>`: per metric, the sum of the retained values divided by theta |
//! | `DS_TUPLE_DOUBLES_UNION(sketch, sketch, ...[, nominalEntries])` | nominalEntries 16384 | `COMPLEX<arrayOfDoublesSketch>`: the union, values of matching keys summed |
//! | `DS_TUPLE_DOUBLES_INTERSECT(sketch, sketch, ...[, nominalEntries])` | | `COMPLEX<arrayOfDoublesSketch>`: the intersection, values of matching keys summed |
//! | `DS_TUPLE_DOUBLES_NOT(sketch, sketch, ...[, nominalEntries])` | | `COMPLEX<arrayOfDoublesSketch>`: the first minus the others, with the first's values |
//!
//! As in Druid, a trailing numeric literal is `nominalEntries`; it must be a power of 2 between
//! 16 and 2^26, anything else is a planning error ([`DataFusionError::Plan`]) naming it, raised
//! when the plan is optimized. A trailing argument that is not a literal is a metric (or, after a
//! sketch column, an error). Intersections and differences accept `nominalEntries` but do not use
//! it (the Java `ArrayOfDoublesIntersection` and `ArrayOfDoublesAnotB` do not trim).
//!
//! Building follows Druid's `ArrayOfDoublesSketchBuildAggregator`: a row with a null metric is
//! skipped entirely; each value of the key (every element of a multi-value string or array row)
//! is added, as Druid's dimension selector renders it (strings as they are, longs, booleans and
//! timestamps as the decimal text of the long, doubles and floats as Java's `toString`), through
//! `ArrayOfDoublesUpdatableSketch.update(String, double[])` (MurmurHash3 of the UTF-8 bytes, seed
//! 9001); null and empty keys are skipped. Values of a key seen again are added to its array.
//! Binary values of `DS_TUPLE_DOUBLES(expr)` are serialized ArrayOfDoubles sketches (compact or
//! updatable form); they are merged, and bytes that do not deserialize are an execution error.
//!
//! Results are the compact ArrayOfDoubles serialization of datasketches-java
//! ([`dolmen_sketch::tuple`]), which Druid reads; partial aggregates travel in the same form.
//! The number of values per key is the number of metric columns when building; when merging,
//! and in the set operations, it is taken from the first non-empty input (Druid assumes 1 unless
//! given `numberOfValues`, which its SQL functions cannot pass), and non-empty inputs of
//! different widths are an execution error. An aggregation over no rows gives the empty sketch
//! with one value per key when merging.
//!
//! Sketch arguments of the scalar functions may also be strings holding the base64 of a sketch
//! (the form sketches take in JSON results). A null sketch gives a null result, except in
//! `DS_TUPLE_DOUBLES_UNION`, which skips nulls as Druid's union does (so the union of nulls is
//! the empty sketch); Druid's intersection and difference raise an error on a null input. The
//! sketch-valued results carry the field metadata [`DRUID_TYPE_METADATA_KEY`] naming
//! `COMPLEX<arrayOfDoublesSketch>`; a sketch of another family passed where a tuple sketch is
//! expected is a planning error when its field carries the marker.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, Float64Builder, ListBuilder};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{
    DataType, Field, FieldRef, Float32Type, Float64Type, Int64Type, UInt64Type,
};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Expr, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use dolmen_sketch::tuple::{
    ArrayOfDoublesCompactSketch, ArrayOfDoublesUnion, ArrayOfDoublesUpdateSketch,
    TUPLE_DEFAULT_NOMINAL_ENTRIES, TUPLE_MAX_NUM_VALUES, check_nominal_entries,
};

use super::sketches::{
    DRUID_TYPE_METADATA_KEY, exec_error, is_binary_type, is_numeric_type, lit_int, plan_error,
    sketch_array, state_column,
};

/// Druid's native type of ArrayOfDoubles tuple sketches.
pub const TUPLE_DRUID_TYPE: &str = "COMPLEX<arrayOfDoublesSketch>";

const AGG_NAME: &str = "DS_TUPLE_DOUBLES";

/// A Binary field holding tuple sketches, marked with [`DRUID_TYPE_METADATA_KEY`].
pub fn tuple_field(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Binary, nullable).with_metadata(
        [(
            DRUID_TYPE_METADATA_KEY.to_string(),
            TUPLE_DRUID_TYPE.to_string(),
        )]
        .into_iter()
        .collect(),
    )
}

/// Plan error when `field` is marked as a complex type other than a tuple sketch.
fn check_sketch_field(func: &str, field: &Field) -> Result<()> {
    match field.metadata().get(DRUID_TYPE_METADATA_KEY) {
        Some(t) if t != TUPLE_DRUID_TYPE && is_binary_type(field.data_type()) => {
            plan_err!("{func} takes a tuple sketch ({TUPLE_DRUID_TYPE}), got {t}")
        }
        _ => Ok(()),
    }
}

fn check_nominal(func: &str, v: &ScalarValue) -> Result<u32> {
    let n = lit_int(func, "nominalEntries", v)?;
    check_nominal_entries(n).map_err(|e| plan_error(format!("{func}: {e}")))
}

/// A literal that Druid takes as `nominalEntries` when it comes last: a non-null number.
fn is_nominal_literal(v: &ScalarValue) -> bool {
    !v.is_null() && v.data_type().is_numeric()
}

fn bad_sketch(func: &str, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{func}: a binary value is not a tuple sketch: {e}"))
}

/// The aggregate functions of this module, registered by [`super::register_druid_functions`].
pub fn udafs() -> Vec<AggregateUDF> {
    vec![AggregateUDF::new_from_impl(TupleDoublesUdaf::new())]
}

/// The scalar functions of this module, registered by [`super::register_druid_functions`].
pub fn udfs() -> Vec<ScalarUDF> {
    TupleFunction::ALL
        .iter()
        .map(|f| ScalarUDF::new_from_impl(TupleFunctionUdf::new(*f)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// DS_TUPLE_DOUBLES
// ---------------------------------------------------------------------------------------------

/// Parsed arguments of `DS_TUPLE_DOUBLES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AggConfig {
    nominal: u32,
    /// Metric columns after the key; 0 when merging a sketch column.
    metrics: usize,
}

/// Parses the arguments after the first: `params` holds the literal ones (`None` for the
/// others). `first` is the type of the first argument when known; without it only
/// `nominalEntries` is checked.
fn agg_config(first: Option<&DataType>, params: &[Option<ScalarValue>]) -> Result<AggConfig> {
    let f = AGG_NAME;
    let (nominal, rest) = match params.last() {
        Some(Some(v)) if is_nominal_literal(v) => (check_nominal(f, v)?, params.len() - 1),
        _ => (TUPLE_DEFAULT_NOMINAL_ENTRIES, params.len()),
    };
    let Some(first) = first else {
        return Ok(AggConfig {
            nominal,
            metrics: rest,
        });
    };
    let merging = is_binary_type(first) && (*first != DataType::Null || rest == 0);
    if merging {
        if rest > 0 {
            return plan_err!(
                "{f}: a sketch column takes only a literal nominalEntries after it, got {rest} \
                 other argument(s)"
            );
        }
    } else if rest == 0 {
        return plan_err!(
            "{f}: a key column needs at least one metric column after it: \
             {f}(key, metric, ..., [nominalEntries])"
        );
    } else if rest > TUPLE_MAX_NUM_VALUES {
        return plan_err!("{f}: at most {TUPLE_MAX_NUM_VALUES} metric columns, got {rest}");
    }
    Ok(AggConfig {
        nominal,
        metrics: if merging { 0 } else { rest },
    })
}

/// A key type that Druid's dimension selectors render as strings.
fn is_key_type(dt: &DataType) -> bool {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            is_key_type(f.data_type())
        }
        DataType::Dictionary(_, v) => is_key_type(v),
        dt => {
            super::is_string(dt)
                || is_numeric_type(dt)
                || matches!(
                    dt,
                    DataType::Boolean
                        | DataType::Timestamp(..)
                        | DataType::Date32
                        | DataType::Date64
                )
        }
    }
}

fn is_decimal_like(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
            | DataType::Float16
    )
}

/// `DS_TUPLE_DOUBLES` as a DataFusion [`AggregateUDFImpl`]; see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TupleDoublesUdaf {
    signature: Signature,
}

impl TupleDoublesUdaf {
    /// The UDAF implementation.
    pub fn new() -> Self {
        TupleDoublesUdaf {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for TupleDoublesUdaf {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for TupleDoublesUdaf {
    fn name(&self) -> &str {
        "ds_tuple_doubles"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        if let Some(first) = arg_fields.first() {
            check_sketch_field(AGG_NAME, first)?;
        }
        Ok(Arc::new(tuple_field(self.name(), false)))
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let f = AGG_NAME;
        let Some(first) = arg_types.first() else {
            return plan_err!("Function {f} takes at least 1 argument, got 0");
        };
        let mut out = arg_types.to_vec();
        if !is_binary_type(first) && !is_key_type(first) {
            return plan_err!("{f} does not take keys of type {first}");
        }
        if is_decimal_like(first) {
            out[0] = DataType::Float64;
        }
        for (i, dt) in arg_types.iter().enumerate().skip(1) {
            if !(is_numeric_type(dt) || *dt == DataType::Boolean) {
                return plan_err!(
                    "{f}: metric columns (and nominalEntries) must be numeric, got {dt}"
                );
            }
            if is_decimal_like(dt) {
                out[i] = DataType::Float64;
            }
        }
        Ok(out)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let params = super::literal_args(args.exprs);
        let first = args.expr_fields.first().map(|f| f.data_type().clone());
        let config = agg_config(first.as_ref(), &params)?;
        TupleAccumulator::new(config)
            .map(|a| Box::new(a) as Box<dyn Accumulator>)
            .map_err(|e| plan_error(format!("{AGG_NAME}: {e}")))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[sketch]", args.name),
            DataType::Binary,
            true,
        ))])
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Binary(Some(
            ArrayOfDoublesCompactSketch::empty(1).to_bytes(),
        )))
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        // Validates the arguments while the plan is optimized, so that a bad nominalEntries (or
        // a key without metrics) is a planning error; the expression itself is unchanged.
        Some(Box::new(move |af: AggregateFunction, info| {
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
            let first = af
                .params
                .args
                .first()
                .and_then(|e| info.get_data_type(e).ok());
            agg_config(first.as_ref(), &params)?;
            Ok(Expr::AggregateFunction(af))
        }))
    }
}

/// State of one `DS_TUPLE_DOUBLES` group.
#[derive(Debug)]
struct TupleAccumulator {
    config: AggConfig,
    /// The sketch built from raw rows (build mode).
    update: Option<ArrayOfDoublesUpdateSketch>,
    /// Merged sketches: input sketches (merge mode) and partial states.
    union: ArrayOfDoublesUnion,
    merged_any: bool,
}

impl TupleAccumulator {
    fn new(config: AggConfig) -> std::result::Result<Self, dolmen_sketch::SketchError> {
        Ok(TupleAccumulator {
            config,
            update: if config.metrics > 0 {
                Some(ArrayOfDoublesUpdateSketch::new(
                    config.nominal,
                    config.metrics,
                )?)
            } else {
                None
            },
            union: ArrayOfDoublesUnion::new(config.nominal, None)?,
            merged_any: false,
        })
    }

    /// The sketch so far: the built sketch as Druid's build aggregator returns it (compact,
    /// untrimmed) when nothing was merged, else the union of everything.
    fn current(&self) -> Result<ArrayOfDoublesCompactSketch> {
        match (&self.update, self.merged_any) {
            (Some(u), false) => Ok(u.compact()),
            (None, _) => Ok(self.union.result()),
            (Some(u), true) => {
                let mut union = self.union.clone();
                union
                    .update(&u.compact())
                    .map_err(|e| exec_error(AGG_NAME, e))?;
                Ok(union.result())
            }
        }
    }

    fn build(&mut self, values: &[ArrayRef]) -> Result<()> {
        let m = self.config.metrics;
        if values.len() < 1 + m {
            return exec_err!("{AGG_NAME}: expected a key and {m} metric columns");
        }
        let keys = normalize_keys(&values[0])?;
        let metrics = values[1..=m]
            .iter()
            .map(|a| cast(a, &DataType::Float64))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let metrics: Vec<_> = metrics
            .iter()
            .map(|a| a.as_primitive::<Float64Type>())
            .collect();
        let sketch = self
            .update
            .as_mut()
            .expect("build mode has an update sketch");
        let mut row_values = vec![0.0; m];
        'rows: for row in 0..keys.len() {
            for (slot, col) in row_values.iter_mut().zip(&metrics) {
                // ArrayOfDoublesSketchBuildAggregator: a null metric skips the row.
                if col.is_null(row) {
                    continue 'rows;
                }
                *slot = col.value(row);
            }
            for_each_key(&keys, row, &mut |k| sketch.update_str(k, &row_values))?;
        }
        Ok(())
    }
}

impl Accumulator for TupleAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if self.config.metrics > 0 {
            return self.build(values);
        }
        let Some(a) = values.first() else {
            return Ok(());
        };
        if *a.data_type() == DataType::Null {
            return Ok(());
        }
        let b = cast(a, &DataType::Binary)?;
        for bytes in b.as_binary::<i32>().iter().flatten() {
            self.union
                .update_bytes(bytes)
                .map_err(|e| bad_sketch(AGG_NAME, e))?;
            self.merged_any = true;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Binary(Some(self.current()?.to_bytes())))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.union.memory_size()
            + self.update.as_ref().map_or(0, |u| u.memory_size())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.current()?.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = state_column(states)? else {
            return Ok(());
        };
        for bytes in s.as_binary::<i32>().iter().flatten() {
            self.union
                .update_bytes(bytes)
                .map_err(|e| DataFusionError::Internal(format!("bad partial tuple sketch: {e}")))?;
            self.merged_any = true;
        }
        Ok(())
    }
}

/// A key column in the types [`for_each_key`] reads: strings as Utf8, integers, booleans and
/// times as Int64 (epoch millis for times), `UInt64`, floats and lists as they are.
fn normalize_keys(a: &ArrayRef) -> Result<ArrayRef> {
    Ok(match a.data_type() {
        DataType::Dictionary(_, v) => normalize_keys(&cast(a, v)?)?,
        DataType::LargeUtf8 | DataType::Utf8View => cast(a, &DataType::Utf8)?,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => {
            let ms = cast(
                a,
                &DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
            )?;
            cast(&ms, &DataType::Int64)?
        }
        DataType::Boolean => cast(a, &DataType::Int64)?,
        DataType::UInt64 => Arc::clone(a),
        dt if super::is_integer(dt) => cast(a, &DataType::Int64)?,
        dt if is_decimal_like(dt) => cast(a, &DataType::Float64)?,
        _ => Arc::clone(a),
    })
}

/// Calls `f` with each key string of `row` of a [`normalize_keys`] column (none when null).
fn for_each_key(a: &ArrayRef, row: usize, f: &mut dyn FnMut(&str)) -> Result<()> {
    if a.is_null(row) {
        return Ok(());
    }
    match a.data_type() {
        DataType::Null => {}
        DataType::Utf8 => f(a.as_string::<i32>().value(row)),
        DataType::Int64 => f(&a.as_primitive::<Int64Type>().value(row).to_string()),
        DataType::UInt64 => f(&a.as_primitive::<UInt64Type>().value(row).to_string()),
        DataType::Float64 => {
            let mut b = Vec::with_capacity(24);
            dolmen_common::java_number::write_java_double(
                &mut b,
                a.as_primitive::<Float64Type>().value(row),
            );
            f(&String::from_utf8_lossy(&b));
        }
        DataType::Float32 => {
            let mut b = Vec::with_capacity(24);
            dolmen_common::java_number::write_java_float(
                &mut b,
                a.as_primitive::<Float32Type>().value(row),
            );
            f(&String::from_utf8_lossy(&b));
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let elements = match a.data_type() {
                DataType::List(_) => a.as_list::<i32>().value(row),
                DataType::LargeList(_) => a.as_list::<i64>().value(row),
                _ => a.as_fixed_size_list().value(row),
            };
            let elements = normalize_keys(&elements)?;
            for i in 0..elements.len() {
                for_each_key(&elements, i, f)?;
            }
        }
        other => return exec_err!("{AGG_NAME} does not take keys of type {other}"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Post-processing functions
// ---------------------------------------------------------------------------------------------

/// Which tuple sketch function a [`TupleFunctionUdf`] implements (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TupleFunction {
    /// `DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(sketch)` -> `ARRAY<DOUBLE>`.
    MetricsSumEstimate,
    /// `DS_TUPLE_DOUBLES_UNION(sketch, sketch, ...[, nominalEntries])`.
    Union,
    /// `DS_TUPLE_DOUBLES_INTERSECT(sketch, sketch, ...[, nominalEntries])`.
    Intersect,
    /// `DS_TUPLE_DOUBLES_NOT(sketch, sketch, ...[, nominalEntries])`.
    Not,
}

impl TupleFunction {
    /// Every function, in documentation order.
    pub const ALL: [TupleFunction; 4] = [
        TupleFunction::MetricsSumEstimate,
        TupleFunction::Union,
        TupleFunction::Intersect,
        TupleFunction::Not,
    ];

    /// The SQL name (upper case).
    pub fn sql_name(self) -> &'static str {
        match self {
            TupleFunction::MetricsSumEstimate => "DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE",
            TupleFunction::Union => "DS_TUPLE_DOUBLES_UNION",
            TupleFunction::Intersect => "DS_TUPLE_DOUBLES_INTERSECT",
            TupleFunction::Not => "DS_TUPLE_DOUBLES_NOT",
        }
    }

    fn return_type(self) -> DataType {
        match self {
            TupleFunction::MetricsSumEstimate => {
                DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
            }
            _ => DataType::Binary,
        }
    }

    /// The number of sketch arguments, given the argument types: a numeric last argument of a
    /// set operation is `nominalEntries`.
    fn sketch_count(self, types: &[DataType]) -> Result<usize> {
        let f = self.sql_name();
        let n = types.len();
        if self == TupleFunction::MetricsSumEstimate {
            if n != 1 {
                return plan_err!("Function {f} takes 1 argument, got {n}");
            }
            return Ok(1);
        }
        let sketches = match types.last() {
            Some(dt) if dt.is_numeric() => n - 1,
            _ => n,
        };
        if sketches < 2 {
            return plan_err!("Function {f} takes at least 2 sketches, got {sketches}");
        }
        Ok(sketches)
    }
}

/// A tuple sketch function as a DataFusion [`ScalarUDFImpl`]; see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TupleFunctionUdf {
    func: TupleFunction,
    name: String,
    signature: Signature,
}

impl TupleFunctionUdf {
    /// The UDF implementation for `func`.
    pub fn new(func: TupleFunction) -> Self {
        TupleFunctionUdf {
            func,
            name: func.sql_name().to_ascii_lowercase(),
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Which function this is.
    pub fn function(&self) -> TupleFunction {
        self.func
    }
}

impl ScalarUDFImpl for TupleFunctionUdf {
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
        let f = self.func.sql_name();
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let sketches = self.func.sketch_count(&types)?;
        for field in &args.arg_fields[..sketches] {
            check_sketch_field(f, field)?;
        }
        if sketches < types.len()
            && let Some(Some(v)) = args.scalar_arguments.get(sketches)
        {
            check_nominal(f, v)?;
        }
        Ok(Arc::new(
            if self.func == TupleFunction::MetricsSumEstimate {
                Field::new(self.name(), self.func.return_type(), true)
            } else {
                tuple_field(self.name(), true)
            },
        ))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let f = self.func.sql_name();
        let sketches = self.func.sketch_count(arg_types)?;
        arg_types
            .iter()
            .enumerate()
            .map(|(i, dt)| {
                if i >= sketches {
                    return Ok(DataType::Int64);
                }
                if super::is_string(dt) {
                    Ok(DataType::Utf8)
                } else if is_binary_type(dt) {
                    Ok(DataType::Binary)
                } else {
                    plan_err!("{f} takes a tuple sketch where it got a value of type {dt}")
                }
            })
            .collect()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let f = self.func.sql_name();
        let types: Vec<DataType> = args.args.iter().map(|a| a.data_type()).collect();
        let count = self.func.sketch_count(&types)?;
        let n = args.number_rows;
        let mut nominal = TUPLE_DEFAULT_NOMINAL_ENTRIES;
        let mut sketches: Vec<ArrayRef> = Vec::with_capacity(count);
        for (i, value) in args.args.iter().enumerate() {
            if i < count {
                sketches.push(sketch_array(f, value.to_array(n)?)?);
                continue;
            }
            match value {
                ColumnarValue::Scalar(s) => nominal = check_nominal(f, s)?,
                ColumnarValue::Array(_) => {
                    return plan_err!("{f}: nominalEntries must be a literal");
                }
            }
        }
        Ok(ColumnarValue::Array(evaluate(
            self.func, nominal, &sketches, n,
        )?))
    }
}

fn read_sketch(func: &str, bytes: &[u8]) -> Result<ArrayOfDoublesCompactSketch> {
    ArrayOfDoublesCompactSketch::from_bytes(bytes).map_err(|e| bad_sketch(func, e))
}

/// Computes `func` row by row.
fn evaluate(
    func: TupleFunction,
    nominal: u32,
    sketches: &[ArrayRef],
    n: usize,
) -> Result<ArrayRef> {
    let f = func.sql_name();
    let binaries: Vec<_> = sketches.iter().map(|a| a.as_binary::<i32>()).collect();
    if func == TupleFunction::MetricsSumEstimate {
        let mut out = ListBuilder::new(Float64Builder::new());
        let a = binaries[0];
        for row in 0..n {
            if a.is_null(row) {
                out.append_null();
                continue;
            }
            let s = read_sketch(f, a.value(row))?;
            out.values().append_slice(&s.metrics_sum_estimates());
            out.append(true);
        }
        return Ok(Arc::new(out.finish()));
    }
    let mut out = BinaryBuilder::with_capacity(n, n * 64);
    for row in 0..n {
        let result = match func {
            TupleFunction::Union => {
                // Druid's union skips null inputs.
                let mut union = ArrayOfDoublesUnion::new(nominal, None)
                    .map_err(|e| plan_error(format!("{f}: {e}")))?;
                for a in binaries.iter().filter(|a| a.is_valid(row)) {
                    union
                        .update(&read_sketch(f, a.value(row))?)
                        .map_err(|e| exec_error(f, e))?;
                }
                Some(union.result())
            }
            _ if binaries.iter().any(|a| a.is_null(row)) => None,
            _ => {
                let inputs = binaries
                    .iter()
                    .map(|a| read_sketch(f, a.value(row)))
                    .collect::<Result<Vec<_>>>()?;
                Some(if func == TupleFunction::Intersect {
                    let refs: Vec<&ArrayOfDoublesCompactSketch> = inputs.iter().collect();
                    ArrayOfDoublesCompactSketch::intersect(&refs).map_err(|e| exec_error(f, e))?
                } else {
                    let mut acc = inputs[0].clone();
                    for b in &inputs[1..] {
                        acc = ArrayOfDoublesCompactSketch::a_not_b(&acc, b)
                            .map_err(|e| exec_error(f, e))?;
                    }
                    acc
                })
            }
        };
        match result {
            Some(s) => out.append_value(s.to_bytes()),
            None => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{ctx, one};
    use arrow::array::{BinaryArray, Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionContext;

    /// Registers `batches` as `name`, one partition per batch, so partial aggregates merge.
    fn register(ctx: &SessionContext, name: &str, batches: Vec<RecordBatch>) {
        let schema = batches[0].schema();
        let parts = batches.into_iter().map(|b| vec![b]).collect();
        ctx.register_table(name, Arc::new(MemTable::try_new(schema, parts).unwrap()))
            .unwrap();
    }

    /// The rows of Druid's `ArrayOfDoublesSketchSqlAggregatorTest` (dim1, dim2, m1), over three
    /// partitions.
    fn foo(ctx: &SessionContext) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("dim1", DataType::Utf8, true),
            Field::new("dim2", DataType::Utf8, true),
            Field::new("m1", DataType::Float64, true),
            Field::new("m2", DataType::Int64, true),
        ]));
        let batch = |rows: &[(&str, &str, f64)]| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
                    Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|_| 1))),
                ],
            )
            .unwrap()
        };
        register(
            ctx,
            "foo",
            vec![
                batch(&[("CA", "FEDCAB", 5.0), ("US", "ABCDEF", 12.0)]),
                batch(&[("CA", "FEDCAB", 3.0), ("US", "ABCDEF", 8.0)]),
                batch(&[("US", "ABCDEF", 2.0)]),
            ],
        );
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> RecordBatch {
        let batches = crate::test_support::batches(ctx, sql).await;
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
    }

    fn list_at(b: &RecordBatch, col: usize, row: usize) -> Vec<f64> {
        b.column(col)
            .as_list::<i32>()
            .value(row)
            .as_primitive::<Float64Type>()
            .values()
            .to_vec()
    }

    fn sketch_at(b: &RecordBatch, col: usize, row: usize) -> ArrayOfDoublesCompactSketch {
        ArrayOfDoublesCompactSketch::from_bytes(b.column(col).as_binary::<i32>().value(row))
            .unwrap()
    }

    // Built by Java ArrayOfDoublesUpdatableSketch.update("FEDCAB", new double[] {0.0}).compact()
    // (Druid's ArrayOfDoublesSketchSqlAggregatorTest).
    const FEDCAB_SKETCH: &str = "AQEJAwgBzJP/////////fwEAAAAAAAAAjFnadZuMrkgAAAAAAAAAAA==";

    #[tokio::test]
    async fn matches_druid_test_results_with_group_by() {
        let ctx = ctx();
        foo(&ctx);
        // Druid's testMetricsSumEstimate: CA [8.0], US [22.0].
        let b = rows(
            &ctx,
            "SELECT dim1, SUM(m2), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(dim2, m1)), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(dim2, m1, 256)), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(dim2, m1, m2)) \
             FROM foo GROUP BY dim1 ORDER BY dim1",
        )
        .await;
        assert_eq!(b.num_rows(), 2);
        assert_eq!(list_at(&b, 2, 0), vec![8.0]);
        assert_eq!(list_at(&b, 3, 0), vec![8.0]);
        assert_eq!(list_at(&b, 4, 0), vec![8.0, 2.0]);
        assert_eq!(list_at(&b, 2, 1), vec![22.0]);
        assert_eq!(list_at(&b, 4, 1), vec![22.0, 3.0]);
        assert_eq!(
            b.schema().field(2).data_type(),
            &TupleFunction::MetricsSumEstimate.return_type()
        );
        // The aggregation is marked as a tuple sketch.
        let b = rows(&ctx, "SELECT DS_TUPLE_DOUBLES(dim2, m1) AS s FROM foo").await;
        assert_eq!(
            b.schema()
                .field(0)
                .metadata()
                .get(DRUID_TYPE_METADATA_KEY)
                .map(String::as_str),
            Some(TUPLE_DRUID_TYPE)
        );
        let s = sketch_at(&b, 0, 0);
        assert_eq!(s.metrics_sum_estimates(), vec![30.0]);
        assert_eq!(s.estimate(), 2.0);
        // Druid's testMetricsSumEstimateIntersect: [8.0] (0.0 + 8.0 for FEDCAB), with the
        // Java-built sketch as base64 text.
        let v = one(
            &ctx,
            &format!(
                "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_INTERSECT(\
                 '{FEDCAB_SKETCH}', DS_TUPLE_DOUBLES(dim2, m1), 128)) FROM foo"
            ),
        )
        .await
        .unwrap();
        assert_eq!(v, "[8.0]");
        let v = one(
            &ctx,
            &format!(
                "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_INTERSECT(\
                 DECODE_BASE64_COMPLEX('arrayOfDoublesSketch', '{FEDCAB_SKETCH}'), \
                 DS_TUPLE_DOUBLES(dim2, m1), 128)) FROM foo"
            ),
        )
        .await
        .unwrap();
        assert_eq!(v, "[8.0]");
        // Druid's testNullInputs: the union skips nulls; intersections of a null are null here.
        let b = rows(
            &ctx,
            "SELECT DS_TUPLE_DOUBLES_UNION(CAST(NULL AS BYTEA), CAST(NULL AS BYTEA)), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_UNION(CAST(NULL AS BYTEA), DS_TUPLE_DOUBLES(dim2, m1))), \
             DS_TUPLE_DOUBLES_INTERSECT(CAST(NULL AS BYTEA), DS_TUPLE_DOUBLES(dim2, m1)), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(CAST(NULL AS BYTEA)) \
             FROM foo",
        )
        .await;
        assert_eq!(
            b.column(0).as_binary::<i32>().value(0),
            ArrayOfDoublesCompactSketch::empty(1).to_bytes()
        );
        assert_eq!(list_at(&b, 1, 0), vec![30.0]);
        assert!(b.column(2).is_null(0));
        assert!(b.column(3).is_null(0));
    }

    #[tokio::test]
    async fn set_operations_on_filtered_aggregates() {
        let ctx = ctx();
        foo(&ctx);
        // CA has FEDCAB (8), US has ABCDEF (22); all has both.
        let b = rows(
            &ctx,
            "SELECT \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_UNION(\
               DS_TUPLE_DOUBLES(dim2, m1) FILTER (WHERE dim1 = 'CA'), \
               DS_TUPLE_DOUBLES(dim2, m1) FILTER (WHERE dim1 = 'US'), 1024)), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_INTERSECT(\
               DS_TUPLE_DOUBLES(dim2, m1), DS_TUPLE_DOUBLES(dim2, m1) FILTER (WHERE dim1 = 'US'))), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_NOT(\
               DS_TUPLE_DOUBLES(dim2, m1), DS_TUPLE_DOUBLES(dim2, m1) FILTER (WHERE dim1 = 'US'))), \
             DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_NOT(\
               DS_TUPLE_DOUBLES(dim2, m1), DS_TUPLE_DOUBLES(dim2, m1) FILTER (WHERE dim1 = 'US'), \
               DS_TUPLE_DOUBLES(dim2, m1) FILTER (WHERE dim1 = 'CA'))) \
             FROM foo",
        )
        .await;
        assert_eq!(list_at(&b, 0, 0), vec![30.0]);
        // Intersection sums both sides: ABCDEF 22 + 22.
        assert_eq!(list_at(&b, 1, 0), vec![44.0]);
        assert_eq!(list_at(&b, 2, 0), vec![8.0]);
        // Nothing left: the sum of no values.
        assert_eq!(list_at(&b, 3, 0), vec![0.0]);
    }

    /// A table of stored tuple sketch columns: row `i` (group `i % 3`) covers keys
    /// `k{100 i} .. k{100 i + 200}` with value 1.0 each, over two partitions.
    fn rollup(ctx: &SessionContext, rows: i64) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, false),
            tuple_field("s", true),
        ]));
        let mut sketches = Vec::new();
        for i in 0..rows {
            let mut s = ArrayOfDoublesUpdateSketch::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, 1).unwrap();
            for k in 100 * i..100 * i + 200 {
                s.update_str(&format!("k{k}"), &[1.0]);
            }
            sketches.push(Some(s.compact().to_bytes()));
        }
        sketches.push(None);
        let n = sketches.len();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i % 3))),
                Arc::new(BinaryArray::from_iter(
                    sketches.iter().map(|o| o.as_deref()),
                )),
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
    async fn merges_stored_sketch_columns_with_group_by() {
        let ctx = ctx();
        rollup(&ctx, 30);
        // Every row has 200 keys of value 1: the sums count rows * 200; the keys are 0..3100.
        let b = rows(
            &ctx,
            "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(s)), \
             DS_TUPLE_DOUBLES(s) FROM rollup",
        )
        .await;
        assert_eq!(list_at(&b, 0, 0), vec![6000.0]);
        assert_eq!(sketch_at(&b, 1, 0).estimate(), 3100.0);
        let b = rows(
            &ctx,
            "SELECT g, DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(s)), \
             DS_TUPLE_DOUBLES(s, 64) FROM rollup GROUP BY g ORDER BY g",
        )
        .await;
        assert_eq!(b.num_rows(), 3);
        for g in 0..3 {
            assert_eq!(list_at(&b, 1, g), vec![2000.0], "group {g}");
            // Group g has rows g, g + 3, ..: ten disjoint runs of 200 keys, 2000 keys; with
            // nominalEntries 64 the union keeps 64 and estimates.
            let s = sketch_at(&b, 2, g);
            assert_eq!(s.num_retained(), 64);
            let est = s.estimate();
            assert!((est - 2000.0).abs() < 0.3 * 2000.0, "group {g}: {est}");
        }
    }

    #[tokio::test]
    async fn estimation_mode_over_partitions() {
        let ctx = ctx();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Float64, true),
        ]));
        // 100k distinct keys over four partitions; v = 2.0, null on every 10th row.
        let batches = (0..4)
            .map(|p| {
                let r = p * 25_000..(p + 1) * 25_000;
                RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int64Array::from_iter_values(r.clone())),
                        Arc::new(Float64Array::from_iter(
                            r.map(|i| (i % 10 != 9).then_some(2.0)),
                        )),
                    ],
                )
                .unwrap()
            })
            .collect();
        register(&ctx, "big", batches);
        let b = rows(
            &ctx,
            "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(k, v, 1024)), \
             DS_TUPLE_DOUBLES(k, v, 1024) FROM big",
        )
        .await;
        let s = sketch_at(&b, 1, 0);
        assert!(s.is_estimation_mode());
        // Rows with a null metric are skipped: 90k keys of value 2. The partial sketches of the
        // partitions union to the sketch of all keys at once, trimmed to k: the same k smallest
        // hashes (long keys hash as their decimal text, as Druid's dimension selector renders
        // them), so the same estimates.
        let mut direct = ArrayOfDoublesUpdateSketch::new(1024, 1).unwrap();
        for i in 0..100_000 {
            if i % 10 != 9 {
                direct.update_str(&i.to_string(), &[2.0]);
            }
        }
        let mut union = ArrayOfDoublesUnion::new(1024, None).unwrap();
        union.update(&direct.compact()).unwrap();
        let direct = union.result();
        assert_eq!(s.num_retained(), 1024);
        let mut expect: Vec<u64> = direct.keys().to_vec();
        let mut got: Vec<u64> = s.keys().to_vec();
        expect.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, expect);
        assert_eq!(s.theta_long(), direct.theta_long());
        let sum = list_at(&b, 0, 0)[0];
        assert_eq!(sum, direct.metrics_sum_estimates()[0]);
        // Relative standard error 1/sqrt(1024) = 3.1%: within 3 sigma. (This key set happens
        // to land at -5.1%.)
        assert!((sum - 180_000.0).abs() < 0.1 * 180_000.0, "{sum}");
        assert!((s.estimate() - 90_000.0).abs() < 0.1 * 90_000.0);
    }

    #[tokio::test]
    async fn keys_of_other_types_and_multi_value_rows() {
        let ctx = ctx();
        let v = one(
            &ctx,
            "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES(k, v)) FROM \
             (VALUES (make_array('a', 'b'), 1.0), (make_array('b'), 2.0), (NULL, 4.0), \
             (make_array(''), 8.0)) AS t(k, v)",
        )
        .await
        .unwrap();
        // a: 1, b: 1 + 2; null and empty keys skipped.
        assert_eq!(v, "[4.0]");
        let b = rows(
            &ctx,
            "SELECT DS_TUPLE_DOUBLES(k, v) FROM (VALUES (1.5, 1.0), (2.0, 1.0)) AS t(k, v)",
        )
        .await;
        let s = sketch_at(&b, 0, 0);
        let mut keys = s.keys().to_vec();
        keys.sort_unstable();
        let mut expect = vec![
            dolmen_sketch::tuple::tuple_key_hash(b"1.5").unwrap(),
            dolmen_sketch::tuple::tuple_key_hash(b"2.0").unwrap(),
        ];
        expect.sort_unstable();
        assert_eq!(keys, expect, "doubles hash as Java's Double.toString");
        // No rows: the empty sketch.
        let b = rows(
            &ctx,
            "SELECT DS_TUPLE_DOUBLES(k, v) FROM (VALUES ('a', 1.0)) AS t(k, v) WHERE v > 5",
        )
        .await;
        assert!(sketch_at(&b, 0, 0).is_empty());
    }

    #[tokio::test]
    async fn bad_arguments_are_plan_errors() {
        let ctx = ctx();
        foo(&ctx);
        for (sql, needle) in [
            (
                "SELECT DS_TUPLE_DOUBLES(dim2, m1, 1000) FROM foo",
                "nominalEntries",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES(dim2, m1, 8) FROM foo",
                "nominalEntries",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES(dim2, m1, 0) FROM foo",
                "nominalEntries",
            ),
            ("SELECT DS_TUPLE_DOUBLES(dim2) FROM foo", "metric"),
            ("SELECT DS_TUPLE_DOUBLES(dim2, 256) FROM foo", "metric"),
            ("SELECT DS_TUPLE_DOUBLES(dim2, dim1) FROM foo", "numeric"),
            (
                "SELECT DS_TUPLE_DOUBLES(DS_TUPLE_DOUBLES_UNION(CAST(NULL AS BYTEA), CAST(NULL AS BYTEA)), m1) FROM foo",
                "sketch column",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES_UNION(DS_TUPLE_DOUBLES(dim2, m1), DS_TUPLE_DOUBLES(dim2, m1), 100) FROM foo",
                "nominalEntries",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES_INTERSECT(DS_TUPLE_DOUBLES(dim2, m1), DS_TUPLE_DOUBLES(dim2, m1), 15) FROM foo",
                "nominalEntries",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES_NOT(DS_TUPLE_DOUBLES(dim2, m1), 1024) FROM foo",
                "at least 2 sketches",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_THETA(dim2)) FROM foo",
                "COMPLEX<thetaSketch>",
            ),
            (
                "SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(m1) FROM foo",
                "tuple sketch",
            ),
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
            assert!(e.to_string().contains(needle), "{sql}: {e}");
        }
        // Checked while the plan is optimized, also under GROUP BY.
        let e = ctx
            .sql("SELECT dim1, DS_TUPLE_DOUBLES(dim2, m1, 1000) FROM foo GROUP BY dim1")
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("DS_TUPLE_DOUBLES: nominalEntries must be a power of 2"),
            "{e}"
        );
        // Bytes that are not a tuple sketch are an execution error.
        let r = ctx
            .sql("SELECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(X'0102030405') FROM foo")
            .await
            .unwrap()
            .collect()
            .await;
        assert!(r.is_err());
    }
}
