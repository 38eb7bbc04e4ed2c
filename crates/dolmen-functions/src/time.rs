//! Druid SQL time functions as DataFusion scalar UDFs (`docs/querying/sql-scalar.md`,
//! "Date and time functions").
//!
//! | Function | Result |
//! |---|---|
//! | `TIME_FLOOR(ts, period[, origin[, timezone]])` | TIMESTAMP: start of the period bucket |
//! | `TIME_CEIL(ts, period[, origin[, timezone]])` | TIMESTAMP: `ts` when it starts a bucket, else the next bucket start |
//! | `TIME_SHIFT(ts, period, step[, timezone])` | TIMESTAMP: `ts` plus `step` periods (`step` may be negative or a column) |
//! | `TIME_EXTRACT(ts, unit[, timezone])` | BIGINT: `EPOCH`, `MICROSECOND`, `MILLISECOND`, `SECOND`, `MINUTE`, `HOUR`, `DAY`, `DOW`, `ISODOW`, `DOY`, `WEEK`, `MONTH`, `QUARTER`, `YEAR`, `ISOYEAR`, `DECADE`, `CENTURY`, `MILLENNIUM` |
//! | `TIME_PARSE(str[, pattern[, timezone]])` | TIMESTAMP, null when unparseable (Joda pattern; default ISO 8601) |
//! | `TIME_FORMAT(ts[, pattern[, timezone]])` | VARCHAR (Joda pattern; default ISO `2015-09-12T00:00:00.000Z`) |
//! | `MILLIS_TO_TIMESTAMP(millis)` / `TIMESTAMP_TO_MILLIS(ts)` | TIMESTAMP / BIGINT |
//! | `TIME_IN_INTERVAL(ts, interval[, timezone])` | BOOLEAN: `start <= ts < end` |
//! | `SUBTRACT_MONTHS(left, right[, timezone])` | BIGINT: whole months from `right` to `left` (Druid native expression; backs `TIMESTAMPDIFF`) |
//!
//! Timestamps are Arrow `Timestamp(Millisecond, None)` holding UTC instants. Arguments of other
//! timestamp units, time zones, dates, strings (ISO text) and integers (epoch millis) are cast to
//! that type by [`ScalarUDFImpl::coerce_types`]. Periods, origins, time zones, patterns, units and
//! intervals must be constant (literals, or at least the same value on every row of a batch);
//! literal values are validated when the query is planned. Time zones default to UTC; the
//! timezone argument of `TIME_IN_INTERVAL` is a Dolmen extension used to apply `sqlTimeZone`
//! (see dolmen-query's `rewrite`).
//!
//! `TIME_IN_INTERVAL` with a literal interval simplifies to
//! `ts >= TIMESTAMP start AND ts < TIMESTAMP end`, so that table providers see a plain `__time`
//! range filter they can prune segments with.
//!
//! The time logic itself is shared with ingestion and lives in `dolmen_common`: periods and
//! bucketing in [`dolmen_common::period`], time zones (ids such as `America/Los_Angeles` and
//! fixed offsets such as `+05:30`) in [`dolmen_common::zone`], Joda patterns in
//! [`dolmen_common::joda`], ISO text, intervals and extract units in [`dolmen_common::time`].
//! This module adapts it to Arrow arrays and DataFusion ([`period`] holds the vectorized
//! `TIME_FLOOR`/`TIME_CEIL` kernels).
//!
//! Semantics follow Druid's expression macros (`TimestampFloorExprMacro`,
//! `TimestampCeilExprMacro`, `TimestampShiftExprMacro`, `TimestampExtractExprMacro`,
//! `TimestampParseExprMacro`, `TimestampFormatExprMacro`) including their quirks:
//! `TIME_EXTRACT(.., 'MICROSECOND')` is epoch seconds / 1000, `DOW` is ISO (Monday = 1), and
//! `CENTURY`/`MILLENNIUM` round up.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, PrimitiveArray, PrimitiveBuilder,
    StringBuilder,
};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, TimeUnit, TimestampMillisecondType};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use dolmen_common::joda::JodaFormat;
use dolmen_common::period::{Period, PeriodBucketer, months_between};
use dolmen_common::time::{Interval, parse_iso_in_zone, parse_time_zone, push_iso_millis};
use dolmen_common::zone::Zone;

pub use dolmen_common::time::ExtractUnit;

use crate::{is_integer, is_string, period, scalar_str};

/// The Arrow type of Druid SQL TIMESTAMP values: `Timestamp(Millisecond, None)` (UTC instants).
pub const TIMESTAMP_TYPE: DataType = DataType::Timestamp(TimeUnit::Millisecond, None);

/// Which Druid time function a [`DruidTimeUdf`] implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DruidTimeFunction {
    /// `TIME_FLOOR(ts, period[, origin[, timezone]])`.
    TimeFloor,
    /// `TIME_CEIL(ts, period[, origin[, timezone]])`.
    TimeCeil,
    /// `TIME_SHIFT(ts, period, step[, timezone])`.
    TimeShift,
    /// `TIME_EXTRACT(ts, unit[, timezone])`.
    TimeExtract,
    /// `TIME_PARSE(string[, pattern[, timezone]])`.
    TimeParse,
    /// `TIME_FORMAT(ts[, pattern[, timezone]])`.
    TimeFormat,
    /// `MILLIS_TO_TIMESTAMP(millis)`.
    MillisToTimestamp,
    /// `TIMESTAMP_TO_MILLIS(ts)`.
    TimestampToMillis,
    /// `TIME_IN_INTERVAL(ts, interval[, timezone])`.
    TimeInInterval,
    /// `SUBTRACT_MONTHS(left, right[, timezone])`: whole months from `right` to `left` (Druid's
    /// native `subtract_months`, used for `TIMESTAMPDIFF(MONTH|QUARTER|YEAR, ..)`).
    SubtractMonths,
}

impl DruidTimeFunction {
    /// Every function, in documentation order.
    pub const ALL: [DruidTimeFunction; 10] = [
        DruidTimeFunction::TimeFloor,
        DruidTimeFunction::TimeCeil,
        DruidTimeFunction::TimeShift,
        DruidTimeFunction::TimeExtract,
        DruidTimeFunction::TimeParse,
        DruidTimeFunction::TimeFormat,
        DruidTimeFunction::MillisToTimestamp,
        DruidTimeFunction::TimestampToMillis,
        DruidTimeFunction::TimeInInterval,
        DruidTimeFunction::SubtractMonths,
    ];

    /// The registered (lowercase) function name; DataFusion lowercases unquoted function names.
    pub fn name(self) -> &'static str {
        match self {
            DruidTimeFunction::TimeFloor => "time_floor",
            DruidTimeFunction::TimeCeil => "time_ceil",
            DruidTimeFunction::TimeShift => "time_shift",
            DruidTimeFunction::TimeExtract => "time_extract",
            DruidTimeFunction::TimeParse => "time_parse",
            DruidTimeFunction::TimeFormat => "time_format",
            DruidTimeFunction::MillisToTimestamp => "millis_to_timestamp",
            DruidTimeFunction::TimestampToMillis => "timestamp_to_millis",
            DruidTimeFunction::TimeInInterval => "time_in_interval",
            DruidTimeFunction::SubtractMonths => "subtract_months",
        }
    }

    /// The SQL name used in error messages (`TIME_FLOOR`).
    pub fn sql_name(self) -> &'static str {
        match self {
            DruidTimeFunction::TimeFloor => "TIME_FLOOR",
            DruidTimeFunction::TimeCeil => "TIME_CEIL",
            DruidTimeFunction::TimeShift => "TIME_SHIFT",
            DruidTimeFunction::TimeExtract => "TIME_EXTRACT",
            DruidTimeFunction::TimeParse => "TIME_PARSE",
            DruidTimeFunction::TimeFormat => "TIME_FORMAT",
            DruidTimeFunction::MillisToTimestamp => "MILLIS_TO_TIMESTAMP",
            DruidTimeFunction::TimestampToMillis => "TIMESTAMP_TO_MILLIS",
            DruidTimeFunction::TimeInInterval => "TIME_IN_INTERVAL",
            DruidTimeFunction::SubtractMonths => "SUBTRACT_MONTHS",
        }
    }

    /// Expected argument kinds; the first `min_args` are required.
    fn params(self) -> (&'static [Param], usize) {
        use Param::*;
        match self {
            DruidTimeFunction::TimeFloor | DruidTimeFunction::TimeCeil => {
                (&[Ts, Period, Origin, Zone], 2)
            }
            DruidTimeFunction::TimeShift => (&[Ts, Period, Step, Zone], 3),
            DruidTimeFunction::TimeExtract => (&[Ts, Unit, Zone], 2),
            DruidTimeFunction::TimeParse => (&[Text, Pattern, Zone], 1),
            DruidTimeFunction::TimeFormat => (&[Ts, Pattern, Zone], 1),
            DruidTimeFunction::MillisToTimestamp => (&[Step], 1),
            DruidTimeFunction::TimestampToMillis => (&[Ts], 1),
            DruidTimeFunction::TimeInInterval => (&[Ts, IntervalText, Zone], 2),
            DruidTimeFunction::SubtractMonths => (&[Ts, Ts, Zone], 2),
        }
    }

    fn return_type(self) -> DataType {
        match self {
            DruidTimeFunction::TimeExtract
            | DruidTimeFunction::TimestampToMillis
            | DruidTimeFunction::SubtractMonths => DataType::Int64,
            DruidTimeFunction::TimeFormat => DataType::Utf8,
            DruidTimeFunction::TimeInInterval => DataType::Boolean,
            _ => TIMESTAMP_TYPE,
        }
    }
}

/// Kinds of arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Param {
    /// A timestamp (cast to `Timestamp(ms)`).
    Ts,
    /// A constant timestamp origin.
    Origin,
    /// A constant ISO period string.
    Period,
    /// A constant time zone id.
    Zone,
    /// A constant TIME_EXTRACT unit.
    Unit,
    /// A constant Joda pattern.
    Pattern,
    /// A constant ISO interval.
    IntervalText,
    /// An integer (cast to Int64), per row.
    Step,
    /// A string, per row.
    Text,
}

impl Param {
    fn is_constant(self) -> bool {
        !matches!(self, Param::Ts | Param::Step | Param::Text)
    }
}

/// A Druid time function as a DataFusion [`ScalarUDFImpl`]; see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DruidTimeUdf {
    func: DruidTimeFunction,
    signature: Signature,
}

impl DruidTimeUdf {
    /// The UDF implementation for `func`.
    pub fn new(func: DruidTimeFunction) -> Self {
        DruidTimeUdf {
            func,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Which function this is.
    pub fn function(&self) -> DruidTimeFunction {
        self.func
    }
}

/// All Druid time functions as DataFusion [`ScalarUDF`]s (lowercase names, e.g. `time_floor`).
pub fn druid_udfs() -> Vec<ScalarUDF> {
    DruidTimeFunction::ALL
        .iter()
        .map(|f| ScalarUDF::new_from_impl(DruidTimeUdf::new(*f)))
        .collect()
}

impl DruidTimeUdf {
    fn check_arity(&self, n: usize) -> Result<()> {
        let (params, min) = self.func.params();
        if n < min || n > params.len() {
            let expected = if min == params.len() {
                format!("{min}")
            } else {
                format!("{min} to {}", params.len())
            };
            return plan_err!(
                "Function {} takes {expected} arguments, got {n}",
                self.func.sql_name()
            );
        }
        Ok(())
    }

    /// Validates literal constant arguments at planning time.
    fn validate_literal(&self, param: Param, value: &ScalarValue) -> Result<()> {
        let Some(s) = scalar_str(value) else {
            return Ok(());
        };
        let f = self.func.sql_name();
        match param {
            Param::Period => {
                Period::parse(s).map_err(|e| plan_error(format!("{f}: {e}")))?;
            }
            Param::Zone => {
                parse_zone(f, Some(s)).map_err(|e| plan_error(e.to_string()))?;
            }
            Param::Unit => {
                ExtractUnit::parse(s)
                    .ok_or_else(|| plan_error(format!("{f}: unknown unit [{s}]")))?;
            }
            Param::Pattern => {
                JodaFormat::compile(s).map_err(|e| plan_error(format!("{f}: {e}")))?;
            }
            Param::IntervalText => {
                parse_interval_in_zone(s, &Zone::Utc)
                    .map_err(|e| plan_error(format!("{f}: {e}")))?;
            }
            _ => {}
        }
        Ok(())
    }
}

fn plan_error(msg: String) -> DataFusionError {
    DataFusionError::Plan(msg)
}

impl ScalarUDFImpl for DruidTimeUdf {
    fn name(&self) -> &str {
        self.func.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.func.return_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.check_arity(args.arg_fields.len())?;
        let (params, _) = self.func.params();
        for (param, value) in params.iter().zip(args.scalar_arguments.iter()) {
            if let Some(v) = value {
                self.validate_literal(*param, v)?;
            }
        }
        Ok(Arc::new(Field::new(
            self.name(),
            self.func.return_type(),
            true,
        )))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.check_arity(arg_types.len())?;
        let (params, _) = self.func.params();
        let f = self.func.sql_name();
        arg_types
            .iter()
            .zip(params.iter())
            .enumerate()
            .map(|(i, (dt, p))| {
                let ok = match p {
                    Param::Ts | Param::Origin => {
                        matches!(
                            dt,
                            DataType::Timestamp(_, _)
                                | DataType::Date32
                                | DataType::Date64
                                | DataType::Null
                        ) || is_string(dt)
                            || is_integer(dt)
                    }
                    Param::Step => {
                        is_integer(dt)
                            || matches!(
                                dt,
                                DataType::Null
                                    | DataType::Float32
                                    | DataType::Float64
                                    | DataType::Decimal128(_, _)
                                    | DataType::Decimal256(_, _)
                            )
                    }
                    Param::Text => !matches!(
                        dt,
                        DataType::List(_)
                            | DataType::LargeList(_)
                            | DataType::Struct(_)
                            | DataType::Map(_, _)
                    ),
                    _ => is_string(dt) || *dt == DataType::Null,
                };
                if !ok {
                    return plan_err!("{f}: argument {} has unsupported type {dt}", i + 1);
                }
                Ok(match p {
                    Param::Ts | Param::Origin => TIMESTAMP_TYPE,
                    Param::Step => DataType::Int64,
                    Param::Text if is_string(dt) => dt.clone(),
                    _ => DataType::Utf8,
                })
            })
            .collect()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.check_arity(args.args.len())?;
        let f = self.func.sql_name();
        let params = self.func.params().0;
        // Scalar output when every per-row argument is scalar.
        let all_scalar = args
            .args
            .iter()
            .zip(params.iter())
            .all(|(a, p)| p.is_constant() || matches!(a, ColumnarValue::Scalar(_)));
        let n = if all_scalar { 1 } else { args.number_rows };
        let out = match self.func {
            DruidTimeFunction::TimeFloor | DruidTimeFunction::TimeCeil => {
                let ts = ts_array(&args.args[0], n)?;
                let Some(period) = const_str(f, "period", &args.args[1])? else {
                    return Ok(null_result(self.func));
                };
                let period = Period::parse(&period).map_err(|e| exec_error(format!("{f}: {e}")))?;
                let origin = match args.args.get(2) {
                    Some(a) => const_ts(f, a)?,
                    None => None,
                };
                let tz = zone_arg(f, args.args.get(3))?;
                let bucketer = PeriodBucketer::new(period, origin, tz)
                    .map_err(|e| exec_error(format!("{f}: {e}")))?;
                let arr = if self.func == DruidTimeFunction::TimeFloor {
                    period::floor_array(&bucketer, &ts)
                } else {
                    period::ceil_array(&bucketer, &ts)
                };
                Arc::new(arr) as ArrayRef
            }
            DruidTimeFunction::TimeShift => {
                let ts = ts_array(&args.args[0], n)?;
                let Some(period) = const_str(f, "period", &args.args[1])? else {
                    return Ok(null_result(self.func));
                };
                let period = Period::parse(&period).map_err(|e| exec_error(format!("{f}: {e}")))?;
                let tz = zone_arg(f, args.args.get(3))?;
                Arc::new(time_shift(&ts, &period, &args.args[2], n, &tz)?) as ArrayRef
            }
            DruidTimeFunction::TimeExtract => {
                let ts = ts_array(&args.args[0], n)?;
                let Some(unit) = const_str(f, "unit", &args.args[1])? else {
                    return Ok(null_result(self.func));
                };
                let unit = ExtractUnit::parse(&unit)
                    .ok_or_else(|| exec_error(format!("{f}: unknown unit [{unit}]")))?;
                let tz = zone_arg(f, args.args.get(2))?;
                Arc::new(time_extract(&ts, unit, &tz)) as ArrayRef
            }
            DruidTimeFunction::TimeParse => {
                let text = args.args[0].to_array(n)?;
                let format = pattern_arg(f, args.args.get(1))?;
                let tz = zone_arg(f, args.args.get(2))?;
                Arc::new(time_parse(&text, format.as_ref(), &tz)?) as ArrayRef
            }
            DruidTimeFunction::TimeFormat => {
                let ts = ts_array(&args.args[0], n)?;
                let format = pattern_arg(f, args.args.get(1))?;
                let tz = zone_arg(f, args.args.get(2))?;
                Arc::new(time_format(&ts, format.as_ref(), &tz)) as ArrayRef
            }
            DruidTimeFunction::MillisToTimestamp => {
                let arr = int_array(&args.args[0], n)?;
                Arc::new(arr.reinterpret_cast::<TimestampMillisecondType>()) as ArrayRef
            }
            DruidTimeFunction::TimestampToMillis => {
                let ts = ts_array(&args.args[0], n)?;
                Arc::new(ts.reinterpret_cast::<Int64Type>()) as ArrayRef
            }
            DruidTimeFunction::TimeInInterval => {
                let ts = ts_array(&args.args[0], n)?;
                let Some(text) = const_str(f, "interval", &args.args[1])? else {
                    return Ok(null_result(self.func));
                };
                let tz = zone_arg(f, args.args.get(2))?;
                let (start, end) = parse_interval_in_zone(&text, &tz)
                    .map_err(|e| exec_error(format!("{f}: {e}")))?;
                let out: BooleanArray = ts
                    .iter()
                    .map(|v| v.map(|t| start <= t && t < end))
                    .collect();
                Arc::new(out) as ArrayRef
            }
            DruidTimeFunction::SubtractMonths => {
                let left = ts_array(&args.args[0], n)?;
                let right = ts_array(&args.args[1], n)?;
                let tz = zone_arg(f, args.args.get(2))?;
                let out: Int64Array = left
                    .iter()
                    .zip(right.iter())
                    .map(|(l, r)| match (l, r) {
                        (Some(l), Some(r)) => months_between(r, l, &tz),
                        _ => None,
                    })
                    .collect();
                Arc::new(out) as ArrayRef
            }
        };
        if all_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }

    fn simplify(&self, args: Vec<Expr>, _info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        if self.func != DruidTimeFunction::TimeInInterval || !(2..=3).contains(&args.len()) {
            return Ok(ExprSimplifyResult::Original(args));
        }
        let f = self.func.sql_name();
        let text = match &args[1] {
            Expr::Literal(v, _) if v.is_null() => {
                return Ok(ExprSimplifyResult::Simplified(Expr::Literal(
                    ScalarValue::Boolean(None),
                    None,
                )));
            }
            Expr::Literal(v, _) => match scalar_str(v) {
                Some(s) => s.to_string(),
                None => return plan_err!("{f}: interval must be a string literal, got {v}"),
            },
            _ => return Ok(ExprSimplifyResult::Original(args)),
        };
        let tz = match args.get(2) {
            None => Zone::Utc,
            Some(Expr::Literal(v, _)) if v.is_null() => Zone::Utc,
            Some(Expr::Literal(v, _)) => match scalar_str(v) {
                Some(s) => parse_zone(f, Some(s)).map_err(|e| plan_error(e.to_string()))?,
                None => return plan_err!("{f}: time zone must be a string literal, got {v}"),
            },
            Some(_) => return Ok(ExprSimplifyResult::Original(args)),
        };
        let (start, end) =
            parse_interval_in_zone(&text, &tz).map_err(|e| plan_error(format!("{f}: {e}")))?;
        let ts = args
            .into_iter()
            .next()
            .ok_or_else(|| plan_error(format!("{f}: missing timestamp")))?;
        let lit_ts =
            |ms: i64| Expr::Literal(ScalarValue::TimestampMillisecond(Some(ms), None), None);
        Ok(ExprSimplifyResult::Simplified(
            ts.clone().gt_eq(lit_ts(start)).and(ts.lt(lit_ts(end))),
        ))
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        let monotonic = matches!(
            self.func,
            DruidTimeFunction::TimeFloor
                | DruidTimeFunction::TimeCeil
                | DruidTimeFunction::TimeShift
                | DruidTimeFunction::MillisToTimestamp
                | DruidTimeFunction::TimestampToMillis
        );
        let rest_constant = inputs
            .iter()
            .skip(1)
            .all(|p| p.sort_properties == SortProperties::Singleton);
        match inputs.first() {
            Some(first) if monotonic && rest_constant => Ok(first.sort_properties),
            _ => Ok(SortProperties::Unordered),
        }
    }
}

fn exec_error(msg: String) -> DataFusionError {
    DataFusionError::Execution(msg)
}

fn null_result(func: DruidTimeFunction) -> ColumnarValue {
    ColumnarValue::Scalar(ScalarValue::try_from(&func.return_type()).unwrap_or(ScalarValue::Null))
}

/// The per-row timestamp argument as a `Timestamp(ms)` array of `n` rows (cast when needed).
fn ts_array(arg: &ColumnarValue, n: usize) -> Result<PrimitiveArray<TimestampMillisecondType>> {
    let arr = arg.to_array(n)?;
    let arr = if *arr.data_type() == TIMESTAMP_TYPE {
        arr
    } else {
        arrow::compute::cast(&arr, &TIMESTAMP_TYPE)?
    };
    Ok(arr.as_primitive::<TimestampMillisecondType>().clone())
}

fn int_array(arg: &ColumnarValue, n: usize) -> Result<Int64Array> {
    let arr = arg.to_array(n)?;
    let arr = if *arr.data_type() == DataType::Int64 {
        arr
    } else {
        arrow::compute::cast(&arr, &DataType::Int64)?
    };
    Ok(arr.as_primitive::<Int64Type>().clone())
}

/// A constant string argument: a scalar, or an array holding one value on every row.
fn const_str(f: &str, what: &str, arg: &ColumnarValue) -> Result<Option<String>> {
    match arg {
        ColumnarValue::Scalar(v) if v.is_null() => Ok(None),
        ColumnarValue::Scalar(v) => match scalar_str(v) {
            Some(s) => Ok(Some(s.to_string())),
            None => exec_err!("{f}: {what} must be a string, got {v}"),
        },
        ColumnarValue::Array(a) => {
            let a = if is_string(a.data_type()) && *a.data_type() != DataType::Utf8 {
                arrow::compute::cast(a, &DataType::Utf8)?
            } else {
                Arc::clone(a)
            };
            let Some(s) = a.as_string_opt::<i32>() else {
                return exec_err!("{f}: {what} must be a string, got {}", a.data_type());
            };
            if s.is_empty() {
                return Ok(None);
            }
            let first = s.is_valid(0).then(|| s.value(0));
            for i in 1..s.len() {
                if s.is_valid(i).then(|| s.value(i)) != first {
                    return exec_err!(
                        "{f}: {what} must be a literal (constant), but it varies between rows"
                    );
                }
            }
            Ok(first.map(str::to_string))
        }
    }
}

/// A constant timestamp argument (the origin of TIME_FLOOR/TIME_CEIL).
fn const_ts(f: &str, arg: &ColumnarValue) -> Result<Option<i64>> {
    let arr = match arg {
        ColumnarValue::Scalar(v) if v.is_null() => return Ok(None),
        ColumnarValue::Scalar(v) => v.to_array_of_size(1)?,
        ColumnarValue::Array(a) => Arc::clone(a),
    };
    let arr = if *arr.data_type() == TIMESTAMP_TYPE {
        arr
    } else {
        arrow::compute::cast(&arr, &TIMESTAMP_TYPE)?
    };
    let ts = arr.as_primitive::<TimestampMillisecondType>();
    if ts.is_empty() {
        return Ok(None);
    }
    let first = ts.is_valid(0).then(|| ts.value(0));
    for i in 1..ts.len() {
        if ts.is_valid(i).then(|| ts.value(i)) != first {
            return exec_err!(
                "{f}: origin must be a literal (constant), but it varies between rows"
            );
        }
    }
    Ok(first)
}

/// The optional constant Joda pattern argument, compiled.
fn pattern_arg(f: &str, arg: Option<&ColumnarValue>) -> Result<Option<JodaFormat>> {
    let pattern = match arg {
        Some(a) => const_str(f, "pattern", a)?,
        None => None,
    };
    pattern
        .map(|p| JodaFormat::compile(&p).map_err(|e| exec_error(format!("{f}: {e}"))))
        .transpose()
}

fn parse_zone(f: &str, s: Option<&str>) -> Result<Zone> {
    match s {
        None => Ok(Zone::Utc),
        Some(s) => {
            parse_time_zone(s).map_err(|_| exec_error(format!("{f}: unknown time zone [{s}]")))
        }
    }
}

fn zone_arg(f: &str, arg: Option<&ColumnarValue>) -> Result<Zone> {
    match arg {
        None => Ok(Zone::Utc),
        Some(a) => {
            let s = const_str(f, "time zone", a)?;
            parse_zone(f, s.as_deref())
        }
    }
}

/// Parses a `TIME_IN_INTERVAL` interval in `tz` ([`Interval::parse_in_zone`]) into
/// `(start, end)` ms.
fn parse_interval_in_zone(text: &str, tz: &Zone) -> std::result::Result<(i64, i64), String> {
    Interval::parse_in_zone(text, tz)
        .map(|i| (i.start, i.end))
        .map_err(|e| e.to_string())
}

fn time_shift(
    ts: &PrimitiveArray<TimestampMillisecondType>,
    period: &Period,
    step: &ColumnarValue,
    n: usize,
    tz: &Zone,
) -> Result<PrimitiveArray<TimestampMillisecondType>> {
    // Hours and below are durations in every zone; days and weeks too in fixed-offset zones.
    let fixed_len =
        if period.is_fixed() || (period.years == 0 && period.months == 0 && tz.is_fixed_offset()) {
            match period.checked_fixed_millis() {
                Some(len) => Some(len),
                None => return exec_err!("TIME_SHIFT: period [{period}] is too long"),
            }
        } else {
            None
        };
    let shift = |t: i64, k: i64| -> Option<i64> {
        match fixed_len {
            Some(len) => Some(t.wrapping_add(k.wrapping_mul(len))),
            None => period.checked_add_to(t, k, tz),
        }
    };
    match step {
        ColumnarValue::Scalar(v) => {
            let k = match v {
                ScalarValue::Int64(Some(k)) => *k,
                v if v.is_null() => return Ok(PrimitiveArray::new_null(ts.len())),
                other => match other.cast_to(&DataType::Int64)? {
                    ScalarValue::Int64(Some(k)) => k,
                    _ => return Ok(PrimitiveArray::new_null(ts.len())),
                },
            };
            Ok(match fixed_len {
                Some(len) => {
                    let d = k.wrapping_mul(len);
                    ts.unary(|t| t.wrapping_add(d))
                }
                None => ts.unary_opt(|t| period.checked_add_to(t, k, tz)),
            })
        }
        ColumnarValue::Array(_) => {
            let steps = int_array(step, n)?;
            let mut out = PrimitiveBuilder::<TimestampMillisecondType>::with_capacity(ts.len());
            for i in 0..ts.len() {
                if ts.is_null(i) || steps.is_null(i) {
                    out.append_null();
                } else {
                    out.append_option(shift(ts.value(i), steps.value(i)));
                }
            }
            Ok(out.finish())
        }
    }
}

fn time_extract(
    ts: &PrimitiveArray<TimestampMillisecondType>,
    unit: ExtractUnit,
    tz: &Zone,
) -> Int64Array {
    if tz.is_utc() {
        ts.unary(|t| unit.extract(t, t))
    } else {
        ts.unary(|t| unit.extract_in(t, tz))
    }
}

fn time_parse(
    text: &ArrayRef,
    format: Option<&JodaFormat>,
    tz: &Zone,
) -> Result<PrimitiveArray<TimestampMillisecondType>> {
    let text = if is_string(text.data_type()) {
        Arc::clone(text)
    } else {
        arrow::compute::cast(text, &DataType::Utf8)?
    };
    let mut out = PrimitiveBuilder::<TimestampMillisecondType>::with_capacity(text.len());
    let mut parse_one = |v: Option<&str>| {
        let parsed = v.and_then(|s| match format {
            Some(f) => f.parse_opt(s, tz),
            None => parse_iso_in_zone(s, tz).ok(),
        });
        out.append_option(parsed);
    };
    match text.data_type() {
        DataType::Utf8 => text.as_string::<i32>().iter().for_each(&mut parse_one),
        DataType::LargeUtf8 => text.as_string::<i64>().iter().for_each(&mut parse_one),
        _ => text.as_string_view().iter().for_each(&mut parse_one),
    }
    Ok(out.finish())
}

fn time_format(
    ts: &PrimitiveArray<TimestampMillisecondType>,
    format: Option<&JodaFormat>,
    tz: &Zone,
) -> arrow::array::StringArray {
    let width = format.map_or(29, |_| 32);
    let mut out = StringBuilder::with_capacity(ts.len(), ts.len() * width);
    let mut buf = String::with_capacity(64);
    for v in ts.iter() {
        match v {
            None => out.append_null(),
            Some(t) => {
                buf.clear();
                match format {
                    Some(f) => f.format_into(t, tz, &mut buf),
                    None => push_iso_millis(&mut buf, t, tz),
                }
                out.append_value(&buf);
            }
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register_druid_functions;
    use arrow::array::{RecordBatch, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};
    use dolmen_common::time::parse_iso_instant;
    use dolmen_common::time::parse_time_zone;

    fn ctx() -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let ctx = SessionContext::new_with_config(config);
        register_druid_functions(&ctx);
        let schema = Arc::new(Schema::new(vec![
            Field::new("__time", TIMESTAMP_TYPE, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let times = [
            "2015-09-12T00:46:58.771Z",
            "2015-09-12T01:10:00.000Z",
            "2015-09-12T13:00:00.000Z",
        ];
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(TimestampMillisecondArray::from(
                    times
                        .iter()
                        .map(|t| parse_iso_instant(t).unwrap())
                        .collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(vec![
                    Some("2015-09-12 10:00:00"),
                    None,
                    Some("bad"),
                ])),
            ],
        )
        .unwrap();
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
        )
        .unwrap();
        ctx
    }

    async fn strings(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let mut out = Vec::new();
        for b in batches {
            let col = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
            let col = col.as_string::<i32>();
            for i in 0..col.len() {
                out.push(if col.is_null(i) {
                    "null".to_string()
                } else {
                    col.value(i).to_string()
                });
            }
        }
        out
    }

    async fn one(ctx: &SessionContext, sql: &str) -> String {
        strings(ctx, sql).await.remove(0)
    }

    #[tokio::test]
    async fn floor_ceil_shift() {
        let ctx = ctx();
        assert_eq!(
            strings(
                &ctx,
                "SELECT TIME_FORMAT(TIME_FLOOR(__time, 'PT1H')) FROM t ORDER BY 1"
            )
            .await,
            [
                "2015-09-12T00:00:00.000Z",
                "2015-09-12T01:00:00.000Z",
                "2015-09-12T13:00:00.000Z"
            ]
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT TIME_FORMAT(TIME_CEIL(TIMESTAMP '2015-09-12 00:46:58', 'P1D'))"
            )
            .await,
            "2015-09-13T00:00:00.000Z"
        );
        assert_eq!(
            one(&ctx, "SELECT TIME_FORMAT(TIME_FLOOR(__time, 'P1D', NULL, 'America/Los_Angeles')) FROM t ORDER BY 1 LIMIT 1").await,
            "2015-09-11T07:00:00.000Z"
        );
        assert_eq!(
            one(&ctx, "SELECT TIME_FORMAT(TIME_FLOOR(__time, 'PT1H', TIMESTAMP '2000-01-01 00:30:00')) FROM t ORDER BY 1 LIMIT 1").await,
            "2015-09-12T00:30:00.000Z"
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT TIME_FORMAT(TIME_SHIFT(TIMESTAMP '2015-01-31 00:00:00', 'P1M', 1))"
            )
            .await,
            "2015-02-28T00:00:00.000Z"
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT TIME_FORMAT(TIME_SHIFT(__time, 'PT1H', -2)) FROM t ORDER BY 1 LIMIT 1"
            )
            .await,
            "2015-09-11T22:46:58.771Z"
        );
        // Strings and millis are accepted as timestamps.
        assert_eq!(
            one(
                &ctx,
                "SELECT TIMESTAMP_TO_MILLIS(TIME_FLOOR('2015-09-12T00:46:58.771Z', 'PT1M'))"
            )
            .await,
            "1442018760000"
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT TIMESTAMP_TO_MILLIS(TIME_FLOOR(1442018818771, 'PT1S'))"
            )
            .await,
            "1442018818000"
        );
    }

    #[tokio::test]
    async fn extract_parse_format() {
        let ctx = ctx();
        let q = |unit: &str| {
            format!("SELECT TIME_EXTRACT(TIMESTAMP '2015-09-12 13:04:05.678', '{unit}')")
        };
        for (unit, want) in [
            ("EPOCH", "1442063045"),
            ("MILLISECOND", "678"),
            ("SECOND", "5"),
            ("MINUTE", "4"),
            ("HOUR", "13"),
            ("DAY", "12"),
            ("DOW", "6"),
            ("ISODOW", "6"),
            ("DOY", "255"),
            ("WEEK", "37"),
            ("MONTH", "9"),
            ("QUARTER", "3"),
            ("YEAR", "2015"),
            ("ISOYEAR", "2015"),
            ("DECADE", "201"),
            ("CENTURY", "21"),
            ("MILLENNIUM", "3"),
            ("microsecond", "1442063"),
        ] {
            assert_eq!(one(&ctx, &q(unit)).await, want, "{unit}");
        }
        assert_eq!(one(&ctx, "SELECT TIME_EXTRACT(TIMESTAMP '2015-09-12 03:00:00', 'HOUR', 'America/Los_Angeles')").await, "20");
        assert_eq!(
            strings(
                &ctx,
                "SELECT TIME_FORMAT(TIME_PARSE(s)) FROM t ORDER BY __time"
            )
            .await,
            ["2015-09-12T10:00:00.000Z", "null", "null"]
        );
        assert_eq!(
            one(&ctx, "SELECT TIMESTAMP_TO_MILLIS(TIME_PARSE('12/09/2015 10', 'dd/MM/yyyy HH', 'America/Los_Angeles'))").await,
            "1442077200000"
        );
        assert_eq!(
            one(&ctx, "SELECT TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm', 'Asia/Kolkata') FROM t ORDER BY 1 LIMIT 1").await,
            "2015-09-12 06:16"
        );
        assert_eq!(
            one(&ctx, "SELECT TIME_FORMAT(MILLIS_TO_TIMESTAMP(0))").await,
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(one(&ctx, "SELECT TIME_FORMAT(NULL)").await, "null");
    }

    #[tokio::test]
    async fn in_interval_simplifies_to_range() {
        let ctx = ctx();
        assert_eq!(
            one(
                &ctx,
                "SELECT COUNT(*) FROM t WHERE TIME_IN_INTERVAL(__time, '2015-09-12T01:00:00Z/PT1H')"
            )
            .await,
            "1"
        );
        let df = ctx
            .sql("SELECT * FROM t WHERE TIME_IN_INTERVAL(__time, '2015-09-12/2015-09-13')")
            .await
            .unwrap();
        let plan = df.into_optimized_plan().unwrap();
        let text = format!("{}", plan.display_indent());
        assert!(
            text.contains("__time >= TimestampMillisecond(1442016000000, None)"),
            "{text}"
        );
        assert!(
            text.contains("__time < TimestampMillisecond(1442102400000, None)"),
            "{text}"
        );
        let err = ctx
            .sql("SELECT * FROM t WHERE TIME_IN_INTERVAL(__time, 'yesterday')")
            .await
            .and_then(|df| df.into_optimized_plan())
            .unwrap_err();
        assert!(err.to_string().contains("yesterday"), "{err}");
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let extremes = PrimitiveArray::<TimestampMillisecondType>::from(vec![
            Some(i64::MIN),
            Some(i64::MAX),
            Some(i64::MIN / 2),
            Some(i64::MAX / 2),
            Some(-1),
            Some(0),
            None,
            Some(253_402_300_800_000),
            Some(-62_135_596_800_001),
        ]);
        let zones = [
            Zone::Utc,
            parse_time_zone("America/Los_Angeles").unwrap(),
            parse_time_zone("Asia/Kolkata").unwrap(),
        ];
        for tz in &zones {
            for p in [
                "PT1S", "PT1M", "PT1H", "PT15M", "P1D", "P2D", "P1W", "P2W", "P1M", "P3M", "P1Y",
                "PT1H30M", "P1M1D", "PT0.001S",
            ] {
                for origin in [None, Some(0), Some(1_000_000_007)] {
                    let b = PeriodBucketer::new(Period::parse(p).unwrap(), origin, *tz).unwrap();
                    let _ = period::floor_array(&b, &extremes);
                    let _ = period::ceil_array(&b, &extremes);
                }
                let step = ColumnarValue::Scalar(ScalarValue::Int64(Some(i64::MAX)));
                let _ = time_shift(
                    &extremes,
                    &Period::parse(p).unwrap(),
                    &step,
                    extremes.len(),
                    tz,
                )
                .unwrap();
            }
            for unit in [
                "EPOCH",
                "DOY",
                "WEEK",
                "ISOYEAR",
                "CENTURY",
                "MILLENNIUM",
                "DECADE",
                "DOW",
            ] {
                let _ = time_extract(&extremes, ExtractUnit::parse(unit).unwrap(), tz);
            }
            let _ = time_format(&extremes, None, tz);
            let f = JodaFormat::compile("GGGG CCC YYYY xxxx ww e EEEE yy D MMMM dd a KK hh HH kk mm ss SSSSSSSSSSSSSSSSSSSSSSSS zzzz z Z ZZ ZZZ").unwrap();
            let _ = time_format(&extremes, Some(&f), tz);
        }
        let text: ArrayRef = Arc::new(StringArray::from(vec![
            "99999999999999999999999999",
            "2015-09-12 00:00:00.123456789012345678901234",
            "-999999999-01-01",
            "",
        ]));
        for pat in [
            "yyyyMMddHHmmss",
            "SSSSSSSSSSSSSSSSSSSSSSSSSS",
            "yyyy-MM-dd HH:mm:ss.SSSSSSSSSSSSSSSSSSSSSSSS",
            "yyyy-MM-dd",
            "CCCCCCCCCCCCCCCCCCCCCC",
        ] {
            let f = JodaFormat::compile(pat).unwrap();
            let _ = time_parse(&text, Some(&f), &Zone::Utc).unwrap();
        }
        let _ = time_parse(&text, None, &zones[1]).unwrap();
    }

    #[tokio::test]
    async fn errors_are_plan_errors() {
        let ctx = ctx();
        for sql in [
            "SELECT TIME_FLOOR(__time, 'PT1X') FROM t",
            "SELECT TIME_FLOOR(__time, 'PT1H', NULL, 'Mars/Olympus') FROM t",
            "SELECT TIME_EXTRACT(__time, 'FORTNIGHT') FROM t",
            "SELECT TIME_FORMAT(__time, 'yyyy-QQ') FROM t",
            "SELECT TIME_FLOOR(__time) FROM t",
        ] {
            let r = ctx.sql(sql).await;
            assert!(r.is_err(), "{sql} should fail at planning");
        }
        // Non-constant period.
        let r = ctx
            .sql("SELECT TIME_FLOOR(__time, s) FROM t")
            .await
            .unwrap()
            .collect()
            .await;
        assert!(r.is_err());
    }
}
