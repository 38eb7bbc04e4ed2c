//! Druid SQL array (`ARRAY_*`) and multi-value string (`MV_*`) functions, and the
//! `ARRAY_CONCAT_AGG` aggregation (`docs/querying/sql-array-functions.md`,
//! `sql-multivalue-string-functions.md`; native `org.apache.druid.math.expr.Function`).
//!
//! | Function | Result |
//! |---|---|
//! | `ARRAY_LENGTH(arr)`, `MV_LENGTH(mv)` | BIGINT: number of elements |
//! | `ARRAY_OFFSET(arr, long)`, `MV_OFFSET(mv, long)` | element at the 0-based index, null when out of range |
//! | `ARRAY_ORDINAL(arr, long)`, `MV_ORDINAL(mv, long)` | element at the 1-based index, null when out of range |
//! | `ARRAY_CONTAINS(arr, expr)`, `MV_CONTAINS(mv, expr)` | BOOLEAN: `arr` holds every element of the array `expr`, or the scalar `expr` |
//! | `ARRAY_OVERLAP(arr1, arr2)`, `MV_OVERLAP(mv1, mv2)` | BOOLEAN: the arrays have an element in common |
//! | `SCALAR_IN_ARRAY(expr, arr)` | BOOLEAN: `expr` is an element of `arr`; otherwise false, or null when `expr` is null |
//! | `ARRAY_OFFSET_OF(arr, expr)`, `MV_OFFSET_OF(mv, expr)` | BIGINT: 0-based index of the first `expr`, null when absent |
//! | `ARRAY_ORDINAL_OF(arr, expr)`, `MV_ORDINAL_OF(mv, expr)` | BIGINT: 1-based index of the first `expr`, null when absent |
//! | `ARRAY_PREPEND(expr, arr)`, `MV_PREPEND(expr, mv)` | `expr` then the elements of `arr` |
//! | `ARRAY_APPEND(arr, expr)`, `MV_APPEND(mv, expr)` | the elements of `arr` then `expr` |
//! | `ARRAY_CONCAT(arr1, arr2)`, `MV_CONCAT(mv1, mv2)` | the elements of `arr1` then those of `arr2` |
//! | `ARRAY_SLICE(arr, start[, end])`, `MV_SLICE(mv, start[, end])` | elements `start` (0-based, inclusive) to `end` (exclusive; default: the length) |
//! | `ARRAY_TO_STRING(arr, str)`, `MV_TO_STRING(mv, str)` | VARCHAR: the elements joined by `str` |
//! | `STRING_TO_ARRAY(str, regex)`, `STRING_TO_MV(str, regex)` | `str` split around matches of the regular expression `regex` |
//! | `ARRAY_TO_MV(arr)` | multi-value VARCHAR of the elements as strings |
//! | `MV_TO_ARRAY(mv)` | `ARRAY<VARCHAR>` of the values |
//! | `MV_FILTER_ONLY(mv, arr)` / `MV_FILTER_NONE(mv, arr)` | multi-value VARCHAR of the values that are (not) in the array `arr` |
//! | `MV_FILTER_REGEX(mv, regex)` | multi-value VARCHAR of the values the literal `regex` matches entirely |
//! | `MV_FILTER_PREFIX(mv, prefix)` | multi-value VARCHAR of the values starting with the literal `prefix` |
//! | `ARRAY_CONCAT_AGG([DISTINCT] arr[, maxBytes])` | aggregate: the elements of every non-null `arr`; with `DISTINCT`, the distinct elements in ascending order (nulls first); null when there are none (`maxBytes` is accepted, not enforced) |
//!
//! `ARRAY_AGG` is DataFusion's `array_agg`, which takes no `maxBytes` argument: Druid's
//! `ARRAY_AGG(expr, maxBytes)` is a plan error ("expected 1 arguments but received 2").
//!
//! Types. Druid arrays are `ARRAY<STRING>`, `ARRAY<LONG>` and `ARRAY<DOUBLE>`: array arguments
//! are coerced to `List<Utf8>`, `List<Int64>` or `List<Float64>` (other integers, booleans and
//! timestamps become BIGINT, floats and decimals DOUBLE, nulls VARCHAR), and `ARRAY_*` results keep
//! the element type of their array argument (`ARRAY_CONCAT`: of the first one). A value added to or
//! looked up in an array is cast to the array's element type, as Druid does (a value that cannot
//! be cast, such as `'x'` in an `ARRAY<BIGINT>`, is never found), except for `SCALAR_IN_ARRAY`,
//! which compares in the wider of the two types (`SCALAR_IN_ARRAY(2.1, ARRAY[1, 2, 3])` is false).
//! `ARRAY[...]` literals are DataFusion's `make_array`.
//!
//! Multi-value strings (see dolmen-query's `table`) are `List<Utf8>` columns whose field carries
//! [`dolmen_segment::MULTI_VALUE_METADATA_KEY`]. The `MV_*` functions read any array or plain
//! VARCHAR as a multi-value string (a string is a one-value row, a null string a null row;
//! numbers are rendered as Java does, `1.0E7`), and those returning multi-value strings return a
//! field with that marker, so that results are reported as Druid `STRING`. `ARRAY_*` functions
//! also accept multi-value strings and VARCHAR (Druid's multi-value columns are VARCHAR) but
//! return real arrays; [`MV_TO_ARRAY`](ArrayFunction::MvToArray) and
//! [`ARRAY_TO_MV`](ArrayFunction::ArrayToMv) convert.
//!
//! Nulls, as Druid with SQL-compatible null handling (the cases of Druid's `FunctionTest`): a null
//! array (or multi-value row) as first argument gives a null result, except for the checks on a
//! null multi-value row below; `ARRAY_CONTAINS(arr, NULL)` and `SCALAR_IN_ARRAY(NULL, arr)` look
//! for a null element (`SCALAR_IN_ARRAY` is null rather than false when there is none); a null
//! array as second argument of `ARRAY_CONTAINS`/`ARRAY_OVERLAP` contains nothing (false);
//! `ARRAY_CONCAT` is null when either array is; `ARRAY_PREPEND`/`ARRAY_APPEND` of a null value
//! add a null element; `ARRAY_OFFSET_OF(arr, NULL)` finds the first null element. Indexes are
//! read as Druid's `ExprEval.asInt()` does: a null index is 0, a fractional one is truncated.
//!
//! Druid quirks kept on purpose:
//! - `ARRAY_SLICE` is null when `start < 0`, `start > length` or `start > end`; an `end` past the
//!   length pads the result with nulls (Java's `Arrays.copyOfRange`).
//! - `ARRAY_TO_STRING` writes null elements as `null` and is null for a single null element.
//! - `STRING_TO_ARRAY` splits like Java's `String.split(regex)`: trailing empty strings are
//!   dropped, and a string with no match is a one-element array. Patterns use the Rust `regex`
//!   syntax, which matches Java's for everything but look-around and back-references.
//! - `MV_CONTAINS`/`MV_OVERLAP` on a null row read the row as `[NULL]` when that makes the check
//!   true (`MV_CONTAINS(col, ARRAY[NULL])` and `MV_OVERLAP(col, ARRAY[NULL])` match null rows, as
//!   Druid's null filter does) and are null otherwise (so `NOT MV_CONTAINS(col, 'a')` skips null
//!   rows, as Druid's three-valued filters do).
//! - `MV_FILTER_*` drop null values for the regex and prefix filters, keep them for
//!   `MV_FILTER_ONLY(.., ARRAY[NULL, ..])`, and return null rather than an empty row when nothing
//!   is left (Druid's filtered virtual columns on a column). `MV_FILTER_REGEX` matches the whole
//!   value (`Matcher.matches()`), as Druid does for a column.
//!
//! Literal arguments are validated when the query is planned: argument counts and types, regular
//! expressions, and the `MV_FILTER_REGEX`/`MV_FILTER_PREFIX` pattern (which must be a literal).
//! `MV_TO_ARRAY` only takes multi-value columns and strings, not arrays (Druid rejects them too).
//!
//! Registering these functions replaces DataFusion's built-ins of the same names, whose semantics
//! differ: `array_length` (takes a dimension), `array_contains` (an alias of `array_has`, which
//! takes one element), `array_prepend`/`array_append`/`array_concat` (null arrays are empty lists,
//! `array_concat` is variadic), `array_slice` (1-based, inclusive), `array_to_string` (skips
//! nulls), and `string_to_array` (a plain, non-regex delimiter).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::NullBufferBuilder;
use arrow::array::{
    Array, ArrayData, ArrayRef, AsArray, BooleanArray, Int64Array, ListArray, MutableArrayData,
    StringArray, StringBuilder, UInt64Array, make_array, new_null_array,
};
use arrow::buffer::OffsetBuffer;
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Expr, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use dolmen_segment::MULTI_VALUE_METADATA_KEY;
use regex::Regex;

/// The scalar functions of this module, registered by [`super::register_druid_functions`].
pub fn udfs() -> Vec<ScalarUDF> {
    ArrayFunction::ALL
        .iter()
        .map(|f| ScalarUDF::new_from_impl(DruidArrayUdf::new(*f)))
        .collect()
}

/// The aggregate functions of this module, registered by [`super::register_druid_functions`].
pub fn udafs() -> Vec<AggregateUDF> {
    vec![AggregateUDF::new_from_impl(ArrayConcatAgg::new(false))]
}

/// A call of `func` on `args`, for rewrites that produce these functions (for instance Druid's
/// filter semantics on multi-value columns: `mv = 'a'` is `MV_CONTAINS(mv, 'a')`, `mv IN (..)` is
/// `MV_OVERLAP(mv, ARRAY[..])`).
pub fn call(func: ArrayFunction, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(DruidArrayUdf::new(func))),
        args,
    ))
}

/// Whether `field` is a multi-value string (a list field marked with
/// [`MULTI_VALUE_METADATA_KEY`]).
pub fn is_multi_value_field(field: &Field) -> bool {
    matches!(field.data_type(), DataType::List(_))
        && field.metadata().contains_key(MULTI_VALUE_METADATA_KEY)
}

/// A nullable field named `name` of type [`dolmen_segment::multi_value_string_type`] marked as a
/// multi-value string, as the `MV_*` functions return.
pub fn multi_value_field(name: &str) -> Field {
    Field::new(name, dolmen_segment::multi_value_string_type(), true).with_metadata(
        [(MULTI_VALUE_METADATA_KEY.to_string(), "true".to_string())]
            .into_iter()
            .collect(),
    )
}

/// Which Druid array or multi-value string function a [`DruidArrayUdf`] implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrayFunction {
    /// `ARRAY_LENGTH(arr)`.
    ArrayLength,
    /// `ARRAY_OFFSET(arr, long)`.
    ArrayOffset,
    /// `ARRAY_ORDINAL(arr, long)`.
    ArrayOrdinal,
    /// `ARRAY_CONTAINS(arr, expr)`.
    ArrayContains,
    /// `ARRAY_OVERLAP(arr1, arr2)`.
    ArrayOverlap,
    /// `SCALAR_IN_ARRAY(expr, arr)`.
    ScalarInArray,
    /// `ARRAY_OFFSET_OF(arr, expr)`.
    ArrayOffsetOf,
    /// `ARRAY_ORDINAL_OF(arr, expr)`.
    ArrayOrdinalOf,
    /// `ARRAY_PREPEND(expr, arr)`.
    ArrayPrepend,
    /// `ARRAY_APPEND(arr, expr)`.
    ArrayAppend,
    /// `ARRAY_CONCAT(arr1, arr2)`.
    ArrayConcat,
    /// `ARRAY_SLICE(arr, start[, end])`.
    ArraySlice,
    /// `ARRAY_TO_STRING(arr, str)`.
    ArrayToString,
    /// `STRING_TO_ARRAY(str, regex)`.
    StringToArray,
    /// `ARRAY_TO_MV(arr)`.
    ArrayToMv,
    /// `MV_FILTER_ONLY(mv, arr)`.
    MvFilterOnly,
    /// `MV_FILTER_NONE(mv, arr)`.
    MvFilterNone,
    /// `MV_FILTER_REGEX(mv, regex)`.
    MvFilterRegex,
    /// `MV_FILTER_PREFIX(mv, prefix)`.
    MvFilterPrefix,
    /// `MV_LENGTH(mv)`.
    MvLength,
    /// `MV_CONTAINS(mv, expr)`.
    MvContains,
    /// `MV_OVERLAP(mv1, mv2)`.
    MvOverlap,
    /// `MV_OFFSET(mv, long)`.
    MvOffset,
    /// `MV_OFFSET_OF(mv, expr)`.
    MvOffsetOf,
    /// `MV_ORDINAL(mv, long)`.
    MvOrdinal,
    /// `MV_ORDINAL_OF(mv, expr)`.
    MvOrdinalOf,
    /// `MV_PREPEND(expr, mv)`.
    MvPrepend,
    /// `MV_APPEND(mv, expr)`.
    MvAppend,
    /// `MV_CONCAT(mv1, mv2)`.
    MvConcat,
    /// `MV_SLICE(mv, start[, end])`.
    MvSlice,
    /// `MV_TO_STRING(mv, str)`.
    MvToString,
    /// `STRING_TO_MV(str, regex)`.
    StringToMv,
    /// `MV_TO_ARRAY(mv)`.
    MvToArray,
}

/// What a function does; `ARRAY_*` and `MV_*` twins share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Length,
    /// Element at an index; the base (0 or 1) is subtracted.
    Offset(i64),
    Contains,
    Overlap,
    ScalarInArray,
    /// Index of an element, plus the base.
    IndexOf(i64),
    Prepend,
    Append,
    Concat,
    Slice,
    ToString,
    Split,
    ToMv,
    /// Keep the values that are in the list (true) or those that are not (false).
    FilterList(bool),
    FilterRegex,
    FilterPrefix,
    ToArray,
}

/// Kinds of arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    /// An array, a multi-value string or a string (a one-element array).
    Arr,
    /// Like `Arr`, or any scalar (a one-element array).
    ArrOrScalar,
    /// An array only.
    ArrOnly,
    /// A scalar element.
    Elem,
    /// An index (read as an integer).
    Index,
    /// A string.
    Text,
    /// A string literal.
    LiteralText,
}

impl ArrayFunction {
    /// Every function, in documentation order.
    pub const ALL: [ArrayFunction; 33] = [
        ArrayFunction::ArrayLength,
        ArrayFunction::ArrayOffset,
        ArrayFunction::ArrayOrdinal,
        ArrayFunction::ArrayContains,
        ArrayFunction::ArrayOverlap,
        ArrayFunction::ScalarInArray,
        ArrayFunction::ArrayOffsetOf,
        ArrayFunction::ArrayOrdinalOf,
        ArrayFunction::ArrayPrepend,
        ArrayFunction::ArrayAppend,
        ArrayFunction::ArrayConcat,
        ArrayFunction::ArraySlice,
        ArrayFunction::ArrayToString,
        ArrayFunction::StringToArray,
        ArrayFunction::ArrayToMv,
        ArrayFunction::MvFilterOnly,
        ArrayFunction::MvFilterNone,
        ArrayFunction::MvFilterRegex,
        ArrayFunction::MvFilterPrefix,
        ArrayFunction::MvLength,
        ArrayFunction::MvContains,
        ArrayFunction::MvOverlap,
        ArrayFunction::MvOffset,
        ArrayFunction::MvOffsetOf,
        ArrayFunction::MvOrdinal,
        ArrayFunction::MvOrdinalOf,
        ArrayFunction::MvPrepend,
        ArrayFunction::MvAppend,
        ArrayFunction::MvConcat,
        ArrayFunction::MvSlice,
        ArrayFunction::MvToString,
        ArrayFunction::StringToMv,
        ArrayFunction::MvToArray,
    ];

    /// The registered (lowercase) function name.
    pub fn name(self) -> &'static str {
        use ArrayFunction::*;
        match self {
            ArrayLength => "array_length",
            ArrayOffset => "array_offset",
            ArrayOrdinal => "array_ordinal",
            ArrayContains => "array_contains",
            ArrayOverlap => "array_overlap",
            ScalarInArray => "scalar_in_array",
            ArrayOffsetOf => "array_offset_of",
            ArrayOrdinalOf => "array_ordinal_of",
            ArrayPrepend => "array_prepend",
            ArrayAppend => "array_append",
            ArrayConcat => "array_concat",
            ArraySlice => "array_slice",
            ArrayToString => "array_to_string",
            StringToArray => "string_to_array",
            ArrayToMv => "array_to_mv",
            MvFilterOnly => "mv_filter_only",
            MvFilterNone => "mv_filter_none",
            MvFilterRegex => "mv_filter_regex",
            MvFilterPrefix => "mv_filter_prefix",
            MvLength => "mv_length",
            MvContains => "mv_contains",
            MvOverlap => "mv_overlap",
            MvOffset => "mv_offset",
            MvOffsetOf => "mv_offset_of",
            MvOrdinal => "mv_ordinal",
            MvOrdinalOf => "mv_ordinal_of",
            MvPrepend => "mv_prepend",
            MvAppend => "mv_append",
            MvConcat => "mv_concat",
            MvSlice => "mv_slice",
            MvToString => "mv_to_string",
            StringToMv => "string_to_mv",
            MvToArray => "mv_to_array",
        }
    }

    /// The SQL name used in error messages (`ARRAY_SLICE`).
    pub fn sql_name(self) -> String {
        self.name().to_ascii_uppercase()
    }

    /// Whether this is an `MV_*` function (or `STRING_TO_MV`/`ARRAY_TO_MV`): array arguments are
    /// read as multi-value strings.
    fn multi_value_input(self) -> bool {
        use ArrayFunction::*;
        matches!(
            self,
            MvFilterOnly
                | MvFilterNone
                | MvFilterRegex
                | MvFilterPrefix
                | MvLength
                | MvContains
                | MvOverlap
                | MvOffset
                | MvOffsetOf
                | MvOrdinal
                | MvOrdinalOf
                | MvPrepend
                | MvAppend
                | MvConcat
                | MvSlice
                | MvToString
                | MvToArray
        )
    }

    fn op(self) -> Op {
        use ArrayFunction::*;
        match self {
            ArrayLength | MvLength => Op::Length,
            ArrayOffset | MvOffset => Op::Offset(0),
            ArrayOrdinal | MvOrdinal => Op::Offset(1),
            ArrayContains | MvContains => Op::Contains,
            ArrayOverlap | MvOverlap => Op::Overlap,
            ScalarInArray => Op::ScalarInArray,
            ArrayOffsetOf | MvOffsetOf => Op::IndexOf(0),
            ArrayOrdinalOf | MvOrdinalOf => Op::IndexOf(1),
            ArrayPrepend | MvPrepend => Op::Prepend,
            ArrayAppend | MvAppend => Op::Append,
            ArrayConcat | MvConcat => Op::Concat,
            ArraySlice | MvSlice => Op::Slice,
            ArrayToString | MvToString => Op::ToString,
            StringToArray | StringToMv => Op::Split,
            ArrayToMv => Op::ToMv,
            MvFilterOnly => Op::FilterList(true),
            MvFilterNone => Op::FilterList(false),
            MvFilterRegex => Op::FilterRegex,
            MvFilterPrefix => Op::FilterPrefix,
            MvToArray => Op::ToArray,
        }
    }

    /// Expected arguments; the first `min` are required.
    fn params(self) -> (&'static [Arg], usize) {
        use Arg::*;
        match self.op() {
            Op::Length | Op::ToMv | Op::ToArray => (&[Arr], 1),
            Op::Offset(_) => (&[Arr, Index], 2),
            Op::Contains | Op::Overlap | Op::Concat => (&[Arr, ArrOrScalar], 2),
            Op::ScalarInArray => (&[Elem, ArrOnly], 2),
            Op::IndexOf(_) | Op::Append => (&[Arr, Elem], 2),
            Op::Prepend => (&[Elem, Arr], 2),
            Op::Slice => (&[Arr, Index, Index], 2),
            Op::ToString => (&[Arr, Text], 2),
            Op::Split => (&[Text, Text], 2),
            Op::FilterList(_) => (&[Arr, ArrOnly], 2),
            Op::FilterRegex | Op::FilterPrefix => (&[Arr, LiteralText], 2),
        }
    }

    /// Whether the result is a multi-value string.
    fn multi_value_output(self) -> bool {
        use ArrayFunction::*;
        matches!(
            self,
            ArrayToMv
                | MvFilterOnly
                | MvFilterNone
                | MvFilterRegex
                | MvFilterPrefix
                | MvPrepend
                | MvAppend
                | MvConcat
                | MvSlice
                | StringToMv
        )
    }
}

/// The type an argument is cast to before a call: [`norm_elem`]'s, except that timestamps are
/// cast to milliseconds first (a TIMESTAMP literal is nanoseconds, `__time` milliseconds; cast
/// straight to BIGINT they would not compare), and become BIGINT in `invoke_with_args`.
fn coerce_elem(dt: &DataType) -> Option<DataType> {
    match dt {
        DataType::Timestamp(_, tz) => Some(DataType::Timestamp(
            arrow::datatypes::TimeUnit::Millisecond,
            tz.clone(),
        )),
        other => norm_elem(other),
    }
}

/// Millisecond timestamps (and lists of them, see [`coerce_elem`]) as BIGINT epoch millis.
fn timestamps_as_millis(values: ArrayRef) -> Result<ArrayRef> {
    match values.data_type() {
        DataType::Timestamp(_, _) => Ok(arrow::compute::cast(&values, &DataType::Int64)?),
        DataType::List(f) if matches!(f.data_type(), DataType::Timestamp(_, _)) => {
            Ok(arrow::compute::cast(&values, &list_type(DataType::Int64))?)
        }
        _ => Ok(values),
    }
}

/// The element type Druid arrays are normalized to: BIGINT, DOUBLE or VARCHAR.
fn norm_elem(dt: &DataType) -> Option<DataType> {
    match dt {
        dt if super::is_integer(dt) => Some(DataType::Int64),
        DataType::Boolean | DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => {
            Some(DataType::Int64)
        }
        DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _) => Some(DataType::Float64),
        dt if super::is_string(dt) => Some(DataType::Utf8),
        DataType::Null => Some(DataType::Utf8),
        DataType::Dictionary(_, v) => norm_elem(v),
        _ => None,
    }
}

fn list_type(elem: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(elem, true)))
}

fn list_elem(dt: &DataType) -> Option<&DataType> {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// A Druid array or multi-value string function as a DataFusion [`ScalarUDFImpl`]; see the
/// module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DruidArrayUdf {
    func: ArrayFunction,
    signature: Signature,
}

impl DruidArrayUdf {
    /// The UDF implementation for `func`.
    pub fn new(func: ArrayFunction) -> Self {
        DruidArrayUdf {
            func,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Which function this is.
    pub fn function(&self) -> ArrayFunction {
        self.func
    }

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

    /// The element type of the array-ish first argument (or the second, for `ARRAY_PREPEND`)
    /// after coercion.
    fn array_elem(&self, arg_types: &[DataType]) -> DataType {
        if self.func.multi_value_input() {
            return DataType::Utf8;
        }
        let i = usize::from(self.func.op() == Op::Prepend);
        match arg_types.get(i) {
            Some(dt) => match list_elem(dt) {
                Some(e) => norm_elem(e).unwrap_or(DataType::Utf8),
                None => norm_elem(dt).unwrap_or(DataType::Utf8),
            },
            None => DataType::Utf8,
        }
    }

    fn result_type(&self, arg_types: &[DataType]) -> DataType {
        match self.func.op() {
            Op::Length | Op::IndexOf(_) => DataType::Int64,
            Op::Contains | Op::Overlap | Op::ScalarInArray => DataType::Boolean,
            Op::ToString => DataType::Utf8,
            Op::Offset(_) => self.array_elem(arg_types),
            Op::Split | Op::ToMv | Op::ToArray => list_type(DataType::Utf8),
            Op::FilterList(_) | Op::FilterRegex | Op::FilterPrefix => list_type(DataType::Utf8),
            Op::Prepend | Op::Append | Op::Concat | Op::Slice => {
                list_type(self.array_elem(arg_types))
            }
        }
    }

    fn coerce_arg(&self, i: usize, kind: Arg, dt: &DataType) -> Result<DataType> {
        let f = self.func.sql_name();
        let bad = || plan_err!("{f}: argument {} has unsupported type {dt}", i + 1);
        let is_list = list_elem(dt).is_some();
        match kind {
            Arg::Arr | Arg::ArrOrScalar | Arg::ArrOnly => {
                if let Some(e) = list_elem(dt) {
                    return match coerce_elem(e) {
                        Some(e) => Ok(list_type(e)),
                        None => plan_err!(
                            "{f}: argument {} is an array of {e}; Druid arrays hold strings, longs or doubles",
                            i + 1
                        ),
                    };
                }
                if *dt == DataType::Null {
                    return Ok(DataType::Null);
                }
                match kind {
                    Arg::ArrOnly => plan_err!("{f}: argument {} must be an array, got {dt}", i + 1),
                    Arg::Arr if norm_elem(dt) != Some(DataType::Utf8) => {
                        plan_err!(
                            "{f}: argument {} must be an array or a string, got {dt}",
                            i + 1
                        )
                    }
                    _ => coerce_elem(dt).map_or_else(bad, Ok),
                }
            }
            Arg::Elem => {
                if is_list {
                    return plan_err!("{f}: argument {} must be a scalar, got {dt}", i + 1);
                }
                if *dt == DataType::Null {
                    return Ok(DataType::Null);
                }
                coerce_elem(dt).map_or_else(bad, Ok)
            }
            Arg::Index => match dt {
                DataType::Null => Ok(DataType::Null),
                dt if super::is_string(dt) => Ok(DataType::Utf8),
                dt => match norm_elem(dt) {
                    Some(t) => Ok(t),
                    None => plan_err!("{f}: argument {} must be a number, got {dt}", i + 1),
                },
            },
            Arg::Text => {
                if is_list {
                    return plan_err!("{f}: argument {} must be a string, got {dt}", i + 1);
                }
                match dt {
                    DataType::Null => Ok(DataType::Null),
                    dt if norm_elem(dt).is_some() => Ok(DataType::Utf8),
                    _ => bad(),
                }
            }
            Arg::LiteralText => match dt {
                DataType::Null => Ok(DataType::Null),
                dt if super::is_string(dt) => Ok(dt.clone()),
                _ => plan_err!("{f}: argument {} must be a string literal, got {dt}", i + 1),
            },
        }
    }

    /// Plan-time checks of the argument fields and literal values.
    fn validate(&self, fields: &[FieldRef], literals: &[Option<&ScalarValue>]) -> Result<()> {
        let f = self.func.sql_name();
        let literal = |i: usize| literals.get(i).copied().flatten();
        match self.func.op() {
            Op::FilterRegex | Op::FilterPrefix => match literal(1) {
                Some(v) if v.is_null() => {
                    plan_err!("{f}: the pattern must be a non-null string literal")
                }
                Some(v) => {
                    let Some(s) = scalar_str(v) else {
                        return plan_err!("{f}: the pattern must be a string literal, got {v}");
                    };
                    if self.func.op() == Op::FilterRegex {
                        full_match_regex(s)
                            .map_err(|e| DataFusionError::Plan(format!("{f}: {e}")))?;
                    }
                    Ok(())
                }
                None => plan_err!("{f}: the pattern must be a string literal"),
            },
            Op::Split => {
                if let Some(s) = literal(1).and_then(scalar_str) {
                    Regex::new(s).map_err(|e| {
                        DataFusionError::Plan(format!("{f}: bad regular expression [{s}]: {e}"))
                    })?;
                }
                Ok(())
            }
            Op::ToArray => match fields.first() {
                Some(field)
                    if list_elem(field.data_type()).is_some() && !is_multi_value_field(field) =>
                {
                    plan_err!(
                        "{f}: argument must be a multi-value string column, got an array ({}); use it directly",
                        field.data_type()
                    )
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

fn scalar_str(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s),
        _ => None,
    }
}

/// `pattern` compiled to match whole values, as Java's `Matcher.matches()`.
fn full_match_regex(pattern: &str) -> std::result::Result<Regex, String> {
    Regex::new(pattern).map_err(|e| format!("bad regular expression [{pattern}]: {e}"))?;
    Regex::new(&format!(r"\A(?:{pattern})\z"))
        .map_err(|e| format!("bad regular expression [{pattern}]: {e}"))
}

impl ScalarUDFImpl for DruidArrayUdf {
    fn name(&self) -> &str {
        self.func.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.result_type(arg_types))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.check_arity(args.arg_fields.len())?;
        self.validate(args.arg_fields, args.scalar_arguments)?;
        if self.func.multi_value_output() {
            return Ok(Arc::new(multi_value_field(self.name())));
        }
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        Ok(Arc::new(Field::new(
            self.name(),
            self.result_type(&types),
            true,
        )))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.check_arity(arg_types.len())?;
        let (params, _) = self.func.params();
        arg_types
            .iter()
            .zip(params.iter())
            .enumerate()
            .map(|(i, (dt, kind))| self.coerce_arg(i, *kind, dt))
            .collect()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.check_arity(args.args.len())?;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = if all_scalar { 1 } else { args.number_rows };
        // Constant arguments (literals) stay one row long instead of being repeated per row.
        let inputs = args
            .args
            .iter()
            .map(|a| match a {
                ColumnarValue::Scalar(v) => Ok(Input {
                    values: timestamps_as_millis(v.to_array_of_size(1)?)?,
                    constant: true,
                }),
                ColumnarValue::Array(a) => Ok(Input {
                    values: timestamps_as_millis(Arc::clone(a))?,
                    constant: false,
                }),
            })
            .collect::<Result<Vec<_>>>()?;
        let out = self.eval(&inputs, n)?;
        if all_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// An argument: `n` rows, or one row used for every row when `constant`.
#[derive(Debug)]
struct Input {
    values: ArrayRef,
    constant: bool,
}

impl Input {
    fn row(&self, i: usize) -> usize {
        if self.constant { 0 } else { i }
    }
}

/// An array-ish argument as a list; see [`Input`].
#[derive(Debug)]
struct Rows {
    list: ListArray,
    constant: bool,
}

impl Rows {
    fn row(&self, i: usize) -> usize {
        if self.constant { 0 } else { i }
    }

    fn is_null(&self, i: usize) -> bool {
        self.list.is_null(self.row(i))
    }

    fn range(&self, i: usize) -> std::ops::Range<usize> {
        row_range(&self.list, self.row(i))
    }

    fn values(&self) -> &ArrayRef {
        self.list.values()
    }
}

/// Whether `hay` holds every (`all`) or some needle; a `None` needle is never found.
fn holds(hay: &[Key], needles: &[Option<Key>], all: bool) -> bool {
    let set: Option<HashSet<&Key>> =
        (hay.len() > 16 && needles.len() > 1).then(|| hay.iter().collect());
    let found = |k: &Option<Key>| match (k, &set) {
        (None, _) => false,
        (Some(k), Some(s)) => s.contains(k),
        (Some(k), None) => hay.contains(k),
    };
    if all {
        needles.iter().all(found)
    } else {
        needles.iter().any(found)
    }
}

impl DruidArrayUdf {
    /// Evaluates the function over `n` rows.
    fn eval(&self, inputs: &[Input], n: usize) -> Result<ArrayRef> {
        let mv = self.func.multi_value_input();
        let f = self.func.sql_name();
        let arr = |k: usize| -> Result<Rows> {
            let l = to_list(&inputs[k].values)?;
            Ok(Rows {
                list: if mv { stringify_list(&l)? } else { l },
                constant: inputs[k].constant,
            })
        };
        let types: Vec<DataType> = inputs
            .iter()
            .map(|a| a.values.data_type().clone())
            .collect();
        Ok(match self.func.op() {
            Op::Length => {
                let l = arr(0)?;
                let out: Int64Array = (0..n)
                    .map(|i| (!l.is_null(i)).then(|| l.range(i).len() as i64))
                    .collect();
                Arc::new(out)
            }
            Op::Offset(base) => {
                let l = arr(0)?;
                let idx = indexes(&inputs[1].values)?;
                let indices: UInt64Array = (0..n)
                    .map(|i| {
                        if l.is_null(i) {
                            return None;
                        }
                        let pos = idx[inputs[1].row(i)].checked_sub(base)?;
                        let r = l.range(i);
                        (0..r.len() as i64)
                            .contains(&pos)
                            .then(|| (r.start as i64 + pos) as u64)
                    })
                    .collect();
                arrow::compute::take(l.values().as_ref(), &indices, None)?
            }
            Op::Contains | Op::Overlap => {
                let lhs = arr(0)?;
                let rhs = arr(1)?;
                let target = elem_type(&lhs.list, &rhs.list);
                let lhs_values = cast_elems(lhs.values(), &target)?;
                let rhs_values = cast_elems(rhs.values(), &target)?;
                let lk = Keys::new(lhs.values(), &lhs_values)?;
                let rk = Keys::new(rhs.values(), &rhs_values)?;
                let contains = self.func.op() == Op::Contains;
                let rhs_is_array = list_elem(inputs[1].values.data_type()).is_some();
                // The needles of a row; `None` for a null array, which contains nothing. A null
                // scalar is a null element for ARRAY_CONTAINS (Druid's `castTo` element path).
                let needles_of = |i: usize| -> Option<Vec<Option<Key>>> {
                    if rhs.is_null(i) {
                        return (contains && !rhs_is_array).then(|| vec![Some(Key::Null)]);
                    }
                    Some(rhs.range(i).map(|j| rk.key(j)).collect())
                };
                // A literal right side is read once.
                let constant = rhs.constant.then(|| needles_of(0));
                let constant_set: Option<HashSet<Key>> = match &constant {
                    Some(Some(needles)) if !contains => {
                        Some(needles.iter().flatten().copied().collect())
                    }
                    _ => None,
                };
                let mut hay = Vec::new();
                let out: BooleanArray = (0..n)
                    .map(|i| {
                        let owned;
                        let needles: Option<&[Option<Key>]> = match &constant {
                            Some(c) => c.as_deref(),
                            None => {
                                owned = needles_of(i);
                                owned.as_deref()
                            }
                        };
                        if lhs.is_null(i) {
                            // A null multi-value row reads as [NULL] when that makes the check
                            // true (Druid's null filter); otherwise it is unknown.
                            let is_null = |k: &Option<Key>| *k == Some(Key::Null);
                            let hit = match needles {
                                None => false,
                                Some(n) if contains => n.iter().all(is_null),
                                Some(n) => n.iter().any(is_null),
                            };
                            return (mv && hit).then_some(true);
                        }
                        let Some(needles) = needles else {
                            return Some(false);
                        };
                        if let Some(set) = &constant_set {
                            return Some(
                                lhs.range(i)
                                    .any(|j| lk.key(j).is_some_and(|k| set.contains(&k))),
                            );
                        }
                        hay.clear();
                        hay.extend(lhs.range(i).filter_map(|j| lk.key(j)));
                        Some(holds(&hay, needles, contains))
                    })
                    .collect();
                Arc::new(out)
            }
            Op::ScalarInArray => {
                let l = arr(1)?;
                // Compared in the wider type: SCALAR_IN_ARRAY(2.1, ARRAY[1, 2, 3]) is false.
                let target = wider_type(&elem_type(&l.list, &l.list), inputs[0].values.data_type());
                let values = cast_elems(l.values(), &target)?;
                let needles = cast_elems(&inputs[0].values, &target)?;
                let hk = Keys::new(l.values(), &values)?;
                let nk = Keys::new(&inputs[0].values, &needles)?;
                // A literal array (Druid's rewrite of large IN lists) is hashed once.
                let constant: Option<HashSet<Key>> = (l.constant && !l.is_null(0))
                    .then(|| l.range(0).filter_map(|j| hk.key(j)).collect());
                let out: BooleanArray = (0..n)
                    .map(|i| {
                        if l.is_null(i) {
                            return None;
                        }
                        let needle = nk.key(inputs[0].row(i));
                        let found = match (&constant, needle) {
                            (_, None) => false,
                            (Some(set), Some(k)) => set.contains(&k),
                            (None, k) => l.range(i).any(|j| hk.key(j) == k),
                        };
                        if found {
                            Some(true)
                        } else if needle == Some(Key::Null) {
                            None
                        } else {
                            Some(false)
                        }
                    })
                    .collect();
                Arc::new(out)
            }
            Op::IndexOf(base) => {
                let l = arr(0)?;
                let target = elem_type(&l.list, &l.list);
                let values = cast_elems(l.values(), &target)?;
                let needles = cast_elems(&inputs[1].values, &target)?;
                let hk = Keys::new(l.values(), &values)?;
                let nk = Keys::new(&inputs[1].values, &needles)?;
                let out: Int64Array = (0..n)
                    .map(|i| {
                        if l.is_null(i) {
                            return None;
                        }
                        let needle = nk.key(inputs[1].row(i));
                        needle?;
                        l.range(i)
                            .position(|j| hk.key(j) == needle)
                            .map(|p| p as i64 + base)
                    })
                    .collect();
                Arc::new(out)
            }
            Op::Prepend | Op::Append => {
                let prepend = self.func.op() == Op::Prepend;
                let (ai, ei) = if prepend { (1, 0) } else { (0, 1) };
                let l = arr(ai)?;
                let target = self.array_elem(&types);
                let values = cast_elems(l.values(), &target)?;
                let elems = cast_elems(&inputs[ei].values, &target)?;
                let vd = values.to_data();
                let ed = elems.to_data();
                let mut b = ListBuilder::new(vec![&vd, &ed], vd.len() + n);
                for i in 0..n {
                    if l.is_null(i) {
                        b.null_row()?;
                        continue;
                    }
                    let r = l.range(i);
                    let e = inputs[ei].row(i);
                    if prepend {
                        b.extend(1, e, e + 1)?;
                        b.extend(0, r.start, r.end)?;
                    } else {
                        b.extend(0, r.start, r.end)?;
                        b.extend(1, e, e + 1)?;
                    }
                    b.finish_row()?;
                }
                b.finish(target)?
            }
            Op::Concat => {
                let a = arr(0)?;
                let c = arr(1)?;
                let target = self.array_elem(&types);
                let av = cast_elems(a.values(), &target)?;
                let cv = cast_elems(c.values(), &target)?;
                let ad = av.to_data();
                let cd = cv.to_data();
                let mut b = ListBuilder::new(vec![&ad, &cd], ad.len() + cd.len());
                for i in 0..n {
                    if a.is_null(i) || c.is_null(i) {
                        b.null_row()?;
                        continue;
                    }
                    let ra = a.range(i);
                    let rc = c.range(i);
                    b.extend(0, ra.start, ra.end)?;
                    b.extend(1, rc.start, rc.end)?;
                    b.finish_row()?;
                }
                b.finish(target)?
            }
            Op::Slice => {
                let l = arr(0)?;
                let target = self.array_elem(&types);
                let values = cast_elems(l.values(), &target)?;
                let starts = indexes(&inputs[1].values)?;
                let ends = inputs.get(2).map(|a| indexes(&a.values)).transpose()?;
                let vd = values.to_data();
                let mut b = ListBuilder::new(vec![&vd], vd.len());
                for i in 0..n {
                    if l.is_null(i) {
                        b.null_row()?;
                        continue;
                    }
                    let r = l.range(i);
                    let len = r.len() as i64;
                    let start = starts[inputs[1].row(i)];
                    let end = match (&ends, inputs.get(2)) {
                        (Some(e), Some(input)) => e[input.row(i)],
                        _ => len,
                    };
                    if start < 0 || start > len || start > end {
                        b.null_row()?;
                        continue;
                    }
                    let pad = end - len;
                    if pad > MAX_SLICE_PADDING {
                        return exec_err!(
                            "{f}: end index {end} is too far past the array length {len}"
                        );
                    }
                    b.extend(0, r.start + start as usize, r.start + end.min(len) as usize)?;
                    if pad > 0 {
                        b.extend_nulls(pad as usize)?;
                    }
                    b.finish_row()?;
                }
                b.finish(target)?
            }
            Op::ToString => {
                let l = arr(0)?;
                let strings = java_strings(l.values())?;
                let strings = strings.as_string::<i32>();
                let delims = cast_elems(&inputs[1].values, &DataType::Utf8)?;
                let delims = delims.as_string::<i32>();
                let mut out = StringBuilder::with_capacity(n, strings.value_data().len());
                let mut buf = String::new();
                for i in 0..n {
                    let r = l.range(i);
                    if l.is_null(i) || (r.len() == 1 && strings.is_null(r.start)) {
                        out.append_null();
                        continue;
                    }
                    let d = inputs[1].row(i);
                    let delim = if delims.is_valid(d) {
                        delims.value(d)
                    } else {
                        ""
                    };
                    buf.clear();
                    for (k, j) in r.enumerate() {
                        if k > 0 {
                            buf.push_str(delim);
                        }
                        buf.push_str(if strings.is_valid(j) {
                            strings.value(j)
                        } else {
                            "null"
                        });
                    }
                    out.append_value(&buf);
                }
                Arc::new(out.finish())
            }
            Op::Split => {
                let text = cast_elems(&inputs[0].values, &DataType::Utf8)?;
                let text = text.as_string::<i32>();
                let patterns = cast_elems(&inputs[1].values, &DataType::Utf8)?;
                let patterns = patterns.as_string::<i32>();
                let mut cache: HashMap<String, Regex> = HashMap::new();
                let mut values = StringBuilder::new();
                let mut offsets = vec![0_i32];
                let mut nulls = NullBufferBuilder::new(n);
                let mut count = 0_usize;
                for i in 0..n {
                    let t = inputs[0].row(i);
                    if text.is_null(t) {
                        nulls.append_null();
                        offsets.push(offset(count)?);
                        continue;
                    }
                    let p = inputs[1].row(i);
                    let pattern = if patterns.is_valid(p) {
                        patterns.value(p)
                    } else {
                        ""
                    };
                    if !cache.contains_key(pattern) {
                        let re = Regex::new(pattern).map_err(|e| {
                            DataFusionError::Execution(format!(
                                "{f}: bad regular expression [{pattern}]: {e}"
                            ))
                        })?;
                        cache.insert(pattern.to_string(), re);
                    }
                    let Some(re) = cache.get(pattern) else {
                        return exec_err!("{f}: regular expression cache miss");
                    };
                    for part in java_split(text.value(t), re) {
                        values.append_value(part);
                        count += 1;
                    }
                    nulls.append_non_null();
                    offsets.push(offset(count)?);
                }
                Arc::new(ListArray::try_new(
                    Arc::new(Field::new_list_field(DataType::Utf8, true)),
                    OffsetBuffer::new(offsets.into()),
                    Arc::new(values.finish()),
                    nulls.finish(),
                )?)
            }
            Op::ToMv | Op::ToArray => {
                let l = Rows {
                    list: stringify_list(&to_list(&inputs[0].values)?)?,
                    constant: inputs[0].constant,
                };
                if l.constant && n != 1 {
                    filter_values(&l, n, false, |_, _| true)?
                } else {
                    Arc::new(l.list)
                }
            }
            Op::FilterList(keep) => {
                let l = arr(0)?;
                let set = Rows {
                    list: stringify_list(&to_list(&inputs[1].values)?)?,
                    constant: inputs[1].constant,
                };
                let lk = Keys::new(l.values(), l.values())?;
                let sk = Keys::new(set.values(), set.values())?;
                // A literal list (the usual case) is hashed once.
                let constant: Option<HashSet<Key>> = (set.constant && !set.is_null(0))
                    .then(|| set.range(0).filter_map(|j| sk.key(j)).collect());
                filter_values(&l, n, true, |i, j| {
                    if set.is_null(i) {
                        // No list: nothing is in it.
                        return !keep;
                    }
                    let k = lk.key(j);
                    let found = match (&constant, k) {
                        (_, None) => false,
                        (Some(s), Some(k)) => s.contains(&k),
                        (None, k) => set.range(i).any(|m| sk.key(m) == k),
                    };
                    found == keep
                })?
            }
            Op::FilterRegex | Op::FilterPrefix => {
                let l = arr(0)?;
                let Some(pattern) = const_text(&inputs[1].values) else {
                    return exec_err!("{f}: the pattern must be a non-null string literal");
                };
                let strings = l.values().as_string::<i32>();
                if self.func.op() == Op::FilterRegex {
                    let re = full_match_regex(&pattern)
                        .map_err(|e| DataFusionError::Execution(format!("{f}: {e}")))?;
                    filter_values(&l, n, true, |_, j| {
                        strings.is_valid(j) && re.is_match(strings.value(j))
                    })?
                } else {
                    filter_values(&l, n, true, |_, j| {
                        strings.is_valid(j) && strings.value(j).starts_with(pattern.as_str())
                    })?
                }
            }
        })
    }
}

/// `ARRAY_SLICE` pads with at most this many nulls past the end of an array.
const MAX_SLICE_PADDING: i64 = 1 << 20;

fn offset(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| DataFusionError::Execution("array result too large".into()))
}

fn row_range(l: &ListArray, i: usize) -> std::ops::Range<usize> {
    let o = l.value_offsets();
    o[i] as usize..o[i + 1] as usize
}

/// The text of a constant string argument (its first row: the argument is a literal).
fn const_text(arr: &ArrayRef) -> Option<String> {
    let s = cast_elems(arr, &DataType::Utf8).ok()?;
    let s = s.as_string::<i32>();
    (!s.is_empty() && s.is_valid(0)).then(|| s.value(0).to_string())
}

/// An array-ish argument as a list: lists as they are, other values as one-element lists (a
/// null value is a null list).
fn to_list(a: &ArrayRef) -> Result<ListArray> {
    match a.data_type() {
        DataType::List(_) => Ok(a.as_list::<i32>().clone()),
        DataType::LargeList(_) | DataType::FixedSizeList(_, _) => {
            let elem = list_elem(a.data_type())
                .and_then(norm_elem)
                .unwrap_or(DataType::Utf8);
            let cast = arrow::compute::cast(a, &list_type(elem))?;
            Ok(cast.as_list::<i32>().clone())
        }
        dt => {
            let elem = if *dt == DataType::Null {
                DataType::Utf8
            } else {
                dt.clone()
            };
            let values = if *dt == DataType::Null {
                new_null_array(&DataType::Utf8, a.len())
            } else {
                Arc::clone(a)
            };
            let nulls = a.logical_nulls();
            Ok(ListArray::try_new(
                Arc::new(Field::new_list_field(elem, true)),
                OffsetBuffer::from_lengths(std::iter::repeat_n(1, a.len())),
                values,
                nulls,
            )?)
        }
    }
}

/// The list with its elements rendered as strings ([`java_strings`]).
fn stringify_list(l: &ListArray) -> Result<ListArray> {
    if l.values().data_type() == &DataType::Utf8 {
        return Ok(l.clone());
    }
    let values = java_strings(l.values())?;
    Ok(ListArray::try_new(
        Arc::new(Field::new_list_field(DataType::Utf8, true)),
        l.offsets().clone(),
        values,
        l.nulls().cloned(),
    )?)
}

/// Elements as Druid renders them as strings: longs in decimal, doubles as Java's
/// `Double.toString` (`1.0`, `1.0E7`).
fn java_strings(a: &ArrayRef) -> Result<ArrayRef> {
    match a.data_type() {
        DataType::Utf8 => Ok(Arc::clone(a)),
        DataType::Null => Ok(new_null_array(&DataType::Utf8, a.len())),
        DataType::Int64 => {
            let v = a.as_primitive::<Int64Type>();
            let out: StringArray = v.iter().map(|x| x.map(|x| x.to_string())).collect();
            Ok(Arc::new(out))
        }
        DataType::Float64 => {
            let v = a.as_primitive::<Float64Type>();
            let mut buf = Vec::new();
            let out: StringArray = v
                .iter()
                .map(|x| {
                    x.map(|x| {
                        buf.clear();
                        dolmen_common::java_number::write_java_double(&mut buf, x);
                        String::from_utf8_lossy(&buf).into_owned()
                    })
                })
                .collect();
            Ok(Arc::new(out))
        }
        DataType::Float32 | DataType::Float16 => {
            java_strings(&arrow::compute::cast(a, &DataType::Float64)?)
        }
        dt if super::is_integer(dt) => java_strings(&arrow::compute::cast(a, &DataType::Int64)?),
        _ => Ok(arrow::compute::cast(a, &DataType::Utf8)?),
    }
}

/// Values cast to `target` (Utf8 as [`java_strings`]); values that cannot be cast become null.
fn cast_elems(a: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    if a.data_type() == target {
        return Ok(Arc::clone(a));
    }
    if *target == DataType::Utf8 {
        return java_strings(a);
    }
    if *a.data_type() == DataType::Null {
        return Ok(new_null_array(target, a.len()));
    }
    Ok(arrow::compute::cast(a, target)?)
}

/// The element type two lists are compared in: that of `lhs` (Druid casts the needles to the
/// array type), unless its elements are of the Null type.
fn elem_type(lhs: &ListArray, rhs: &ListArray) -> DataType {
    match (lhs.values().data_type(), rhs.values().data_type()) {
        (DataType::Null, DataType::Null) => DataType::Utf8,
        (DataType::Null, r) => r.clone(),
        (l, _) => l.clone(),
    }
}

/// The type two values are compared in: VARCHAR if either is, else DOUBLE if either is, else
/// BIGINT (a null takes the other type).
fn wider_type(a: &DataType, b: &DataType) -> DataType {
    match (a, b) {
        (DataType::Null, t) | (t, DataType::Null) => t.clone(),
        (DataType::Utf8, _) | (_, DataType::Utf8) => DataType::Utf8,
        (DataType::Float64, _) | (_, DataType::Float64) => DataType::Float64,
        (t, _) => t.clone(),
    }
}

/// Index arguments as Druid's `asInt()` reads them: null (or unparseable) is 0, fractions are
/// truncated.
fn indexes(a: &ArrayRef) -> Result<Vec<i64>> {
    if *a.data_type() == DataType::Null {
        return Ok(vec![0; a.len()]);
    }
    let ints = cast_elems(a, &DataType::Int64)?;
    let ints = ints.as_primitive::<Int64Type>();
    let doubles = cast_elems(a, &DataType::Float64)?;
    let doubles = doubles.as_primitive::<Float64Type>();
    Ok((0..a.len())
        .map(|i| {
            if ints.is_valid(i) {
                ints.value(i)
            } else if doubles.is_valid(i) {
                // `as` truncates and saturates; NaN is 0.
                doubles.value(i) as i64
            } else {
                0
            }
        })
        .collect())
}

/// A hashable element, compared as Java's `Objects.equals` compares Druid values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    Null,
    Int(i64),
    /// Double bits; NaNs are one value, `0.0` and `-0.0` differ (`Double.equals`).
    Float(u64),
    Str(&'a str),
}

/// Keys of the elements of `cast` (the values `orig` cast to a common element type).
struct Keys<'a> {
    orig: &'a ArrayRef,
    cast: &'a ArrayRef,
}

impl<'a> Keys<'a> {
    fn new(orig: &'a ArrayRef, cast: &'a ArrayRef) -> Result<Self> {
        match cast.data_type() {
            DataType::Int64 | DataType::Float64 | DataType::Utf8 | DataType::Null => {
                Ok(Keys { orig, cast })
            }
            other => exec_err!("array elements of type {other} cannot be compared"),
        }
    }

    /// The key of element `i`; `None` for a value that could not be cast (equal to nothing).
    fn key(&self, i: usize) -> Option<Key<'a>> {
        let c: &'a ArrayRef = self.cast;
        if c.is_null(i) {
            // `NullArray::is_null` is false: its nulls are only logical.
            let orig_null = *self.orig.data_type() == DataType::Null || self.orig.is_null(i);
            return orig_null.then_some(Key::Null);
        }
        Some(match c.data_type() {
            DataType::Int64 => Key::Int(c.as_primitive::<Int64Type>().value(i)),
            DataType::Float64 => {
                let v = c.as_primitive::<Float64Type>().value(i);
                Key::Float(if v.is_nan() {
                    f64::NAN.to_bits()
                } else {
                    v.to_bits()
                })
            }
            DataType::Utf8 => Key::Str(c.as_string::<i32>().value(i)),
            _ => Key::Null,
        })
    }
}

/// Java's `String.split(regex)`: pieces between matches, no leading empty piece for a
/// zero-width match at the start, trailing empty pieces dropped; no match gives the input.
fn java_split<'t>(text: &'t str, re: &Regex) -> Vec<&'t str> {
    let mut parts = Vec::new();
    let mut index = 0;
    let mut matched = false;
    for m in re.find_iter(text) {
        if m.start() == 0 && m.end() == 0 {
            continue;
        }
        matched = true;
        parts.push(&text[index..m.start()]);
        index = m.end();
    }
    if !matched {
        return vec![text];
    }
    parts.push(&text[index..]);
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// Builds a list array by copying ranges of source arrays of one type.
struct ListBuilder<'a> {
    data: MutableArrayData<'a>,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    len: usize,
}

impl<'a> ListBuilder<'a> {
    fn new(sources: Vec<&'a ArrayData>, capacity: usize) -> Self {
        ListBuilder {
            data: MutableArrayData::new(sources, true, capacity),
            offsets: vec![0],
            nulls: NullBufferBuilder::new(0),
            len: 0,
        }
    }

    fn extend(&mut self, source: usize, start: usize, end: usize) -> Result<()> {
        if end > start {
            self.data.try_extend(source, start, end)?;
            self.len += end - start;
        }
        Ok(())
    }

    fn extend_nulls(&mut self, n: usize) -> Result<()> {
        self.data.try_extend_nulls(n)?;
        self.len += n;
        Ok(())
    }

    fn finish_row(&mut self) -> Result<()> {
        self.offsets.push(offset(self.len)?);
        self.nulls.append_non_null();
        Ok(())
    }

    fn null_row(&mut self) -> Result<()> {
        self.offsets.push(offset(self.len)?);
        self.nulls.append_null();
        Ok(())
    }

    fn finish(mut self, elem: DataType) -> Result<ArrayRef> {
        let values = make_array(self.data.freeze());
        Ok(Arc::new(ListArray::try_new(
            Arc::new(Field::new_list_field(elem, true)),
            OffsetBuffer::new(self.offsets.into()),
            values,
            self.nulls.finish(),
        )?))
    }
}

/// `n` rows of the string list `l` keeping the values `keep(row, value_index)` accepts; with
/// `empty_is_null`, rows left empty are null (Druid's filtered virtual columns read an empty row
/// as null).
fn filter_values(
    l: &Rows,
    n: usize,
    empty_is_null: bool,
    mut keep: impl FnMut(usize, usize) -> bool,
) -> Result<ArrayRef> {
    let vd = l.values().to_data();
    let mut b = ListBuilder::new(vec![&vd], vd.len());
    for i in 0..n {
        if l.is_null(i) {
            b.null_row()?;
            continue;
        }
        let before = b.len;
        for j in l.range(i) {
            if keep(i, j) {
                b.extend(0, j, j + 1)?;
            }
        }
        if empty_is_null && b.len == before {
            b.null_row()?;
        } else {
            b.finish_row()?;
        }
    }
    let elem = l.values().data_type().clone();
    b.finish(elem)
}

/// `ARRAY_CONCAT_AGG([DISTINCT] arr[, maxBytes])` as a DataFusion [`AggregateUDFImpl`]; see the
/// module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArrayConcatAgg {
    signature: Signature,
    distinct: bool,
}

impl ArrayConcatAgg {
    /// The aggregate; `distinct` for the `ARRAY_CONCAT_AGG(DISTINCT ..)` form (the plain form
    /// rewrites itself to it when planned with `DISTINCT`, so that DataFusion does not turn it
    /// into a concatenation of distinct arrays).
    pub fn new(distinct: bool) -> Self {
        ArrayConcatAgg {
            signature: Signature::user_defined(Volatility::Immutable),
            distinct,
        }
    }
}

impl AggregateUDFImpl for ArrayConcatAgg {
    fn name(&self) -> &str {
        if self.distinct {
            "array_concat_agg_distinct"
        } else {
            "array_concat_agg"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if arg_types.is_empty() || arg_types.len() > 2 {
            return plan_err!(
                "Function ARRAY_CONCAT_AGG takes 1 to 2 arguments, got {}",
                arg_types.len()
            );
        }
        let arr = match &arg_types[0] {
            DataType::Null => list_type(DataType::Utf8),
            dt => match list_elem(dt).map(norm_elem) {
                Some(Some(e)) => list_type(e),
                _ => {
                    return plan_err!("ARRAY_CONCAT_AGG: argument 1 must be an array, got {dt}");
                }
            },
        };
        let mut out = vec![arr];
        if let Some(dt) = arg_types.get(1) {
            if !super::is_integer(dt) && *dt != DataType::Null {
                return plan_err!(
                    "ARRAY_CONCAT_AGG: maxBytes (argument 2) must be an integer, got {dt}"
                );
            }
            out.push(DataType::Int64);
        }
        Ok(out)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types.first() {
            Some(dt) if list_elem(dt).is_some() => Ok(dt.clone()),
            _ => Ok(list_type(DataType::Utf8)),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let elem = list_elem(args.return_field.data_type())
            .cloned()
            .unwrap_or(DataType::Utf8);
        Ok(Box::new(ConcatAccumulator {
            elem,
            parts: Vec::new(),
            distinct: self.distinct || args.is_distinct,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[concat]", args.name),
            args.return_field.data_type().clone(),
            true,
        ))])
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        if self.distinct {
            return None;
        }
        Some(Box::new(|agg: AggregateFunction, _| {
            if !agg.params.distinct {
                return Ok(Expr::AggregateFunction(agg));
            }
            let p = agg.params;
            Ok(Expr::AggregateFunction(AggregateFunction::new_udf(
                Arc::new(AggregateUDF::new_from_impl(ArrayConcatAgg::new(true))),
                p.args,
                false,
                p.filter,
                p.order_by,
                p.null_treatment,
            )))
        }))
    }
}

/// Accumulates the elements of non-null arrays, one compacted array per batch.
#[derive(Debug)]
struct ConcatAccumulator {
    elem: DataType,
    parts: Vec<ArrayRef>,
    distinct: bool,
}

impl ConcatAccumulator {
    fn add_lists(&mut self, a: &ArrayRef) -> Result<()> {
        let l = to_list(a)?;
        let indices: UInt64Array = (0..l.len())
            .filter(|i| l.is_valid(*i))
            .flat_map(|i| row_range(&l, i))
            .map(|j| j as u64)
            .collect();
        if indices.is_empty() {
            return Ok(());
        }
        let values = arrow::compute::take(l.values().as_ref(), &indices, None)?;
        self.parts.push(cast_elems(&values, &self.elem)?);
        Ok(())
    }

    fn concatenated(&self) -> Result<ArrayRef> {
        if self.parts.is_empty() {
            return Ok(new_null_array(&self.elem, 0));
        }
        let refs: Vec<&dyn Array> = self.parts.iter().map(|p| p.as_ref()).collect();
        Ok(arrow::compute::concat(&refs)?)
    }

    fn one_row_list(&self, values: ArrayRef) -> Result<ScalarValue> {
        let len = values.len();
        Ok(ScalarValue::List(Arc::new(ListArray::try_new(
            Arc::new(Field::new_list_field(self.elem.clone(), true)),
            OffsetBuffer::from_lengths([len]),
            values,
            None,
        )?)))
    }
}

impl Accumulator for ConcatAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        match values.first() {
            Some(a) => self.add_lists(a),
            None => Ok(()),
        }
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut values = self.concatenated()?;
        if self.distinct && !values.is_empty() {
            // Druid's `array_set_add_all` collects into a TreeSet: sorted, nulls first.
            let sorted = arrow::compute::sort(
                values.as_ref(),
                Some(SortOptions {
                    descending: false,
                    nulls_first: true,
                }),
            )?;
            let keys = Keys::new(&sorted, &sorted)?;
            let indices: UInt64Array = (0..sorted.len())
                .filter(|&i| i == 0 || keys.key(i) != keys.key(i - 1))
                .map(|i| i as u64)
                .collect();
            values = arrow::compute::take(sorted.as_ref(), &indices, None)?;
        }
        if values.is_empty() {
            return ScalarValue::try_from(&list_type(self.elem.clone()));
        }
        self.one_row_list(values)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .parts
                .iter()
                .map(|p| p.get_array_memory_size())
                .sum::<usize>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values = self.concatenated()?;
        self.parts = vec![Arc::clone(&values)];
        Ok(vec![self.one_row_list(values)?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        match states.first() {
            Some(a) => self.add_lists(a),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Float64Builder, Int64Builder, ListBuilder as ArrowListBuilder, RecordBatch,
    };
    use arrow::datatypes::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    fn mv_column() -> ArrayRef {
        // Druid's `numfoo.dim3`: ["a","b"], ["b","c"], "d", "", null, null.
        let mut b = ArrowListBuilder::new(StringBuilder::new());
        for row in [
            Some(vec![Some("a"), Some("b")]),
            Some(vec![Some("b"), Some("c")]),
            Some(vec![Some("d")]),
            Some(vec![Some("")]),
            None,
            None,
        ] {
            match row {
                Some(values) => {
                    for v in values {
                        b.values().append_option(v);
                    }
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        Arc::new(b.finish())
    }

    fn ctx() -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let ctx = SessionContext::new_with_config(config);
        crate::register_druid_functions(&ctx);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("dim1", DataType::Utf8, true),
            multi_value_field("dim3"),
            Field::new("la", list_type(DataType::Int64), true),
            Field::new("da", list_type(DataType::Float64), true),
        ]));
        let mut la = ArrowListBuilder::new(Int64Builder::new());
        for row in [
            Some(vec![Some(1), Some(2), Some(3)]),
            Some(vec![Some(4)]),
            Some(vec![]),
            None,
            Some(vec![Some(5), None]),
            Some(vec![Some(1)]),
        ] {
            match row {
                Some(values) => {
                    for v in values {
                        la.values().append_option(v);
                    }
                    la.append(true);
                }
                None => la.append(false),
            }
        }
        let mut da = ArrowListBuilder::new(Float64Builder::new());
        for row in [
            Some(vec![Some(1.5), Some(2.0)]),
            None,
            Some(vec![]),
            Some(vec![Some(0.25)]),
            Some(vec![Some(1e7)]),
            Some(vec![Some(-0.0)]),
        ] {
            match row {
                Some(values) => {
                    for v in values {
                        da.values().append_option(v);
                    }
                    da.append(true);
                }
                None => da.append(false),
            }
        }
        let la = la.finish();
        let la = ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Int64, true)),
            la.offsets().clone(),
            Arc::clone(la.values()),
            la.nulls().cloned(),
        )
        .unwrap();
        let da = da.finish();
        let da = ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Float64, true)),
            da.offsets().clone(),
            Arc::clone(da.values()),
            da.nulls().cloned(),
        )
        .unwrap();
        let mv = mv_column();
        let mv = mv.as_list::<i32>();
        let mv = ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Utf8, true)),
            mv.offsets().clone(),
            Arc::clone(mv.values()),
            mv.nulls().cloned(),
        )
        .unwrap();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(1..=6)),
                Arc::new(StringArray::from(vec![
                    Some(""),
                    Some("10.1"),
                    Some("2"),
                    Some("1"),
                    Some("def"),
                    Some("abc"),
                ])),
                Arc::new(mv),
                Arc::new(la),
                Arc::new(da),
            ],
        )
        .unwrap();
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(Arc::clone(&schema), vec![vec![batch.clone()]]).unwrap()),
        )
        .unwrap();
        // The same rows in three partitions of one to three rows, for multi-phase aggregation.
        let parts = vec![
            vec![batch.slice(0, 1)],
            vec![batch.slice(1, 2)],
            vec![batch.slice(3, 3)],
        ];
        ctx.register_table("tp", Arc::new(MemTable::try_new(schema, parts).unwrap()))
            .unwrap();
        ctx
    }

    fn render(a: &ArrayRef, i: usize) -> String {
        if a.is_null(i) {
            return "null".to_string();
        }
        match a.data_type() {
            DataType::List(_) => {
                let l = a.as_list::<i32>();
                let v = l.value(i);
                let parts: Vec<String> = (0..v.len()).map(|j| render(&v, j)).collect();
                format!("[{}]", parts.join(","))
            }
            // Empty strings inside arrays are shown as '' to tell [""] from [].
            DataType::Utf8 if a.as_string::<i32>().value(i).is_empty() => "''".to_string(),
            _ => arrow::util::display::array_value_to_string(a, i).unwrap(),
        }
    }

    async fn strings(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let batches = crate::test_support::batches(ctx, sql).await;
        let mut out = Vec::new();
        for b in batches {
            for i in 0..b.num_rows() {
                out.push(render(b.column(0), i));
            }
        }
        out
    }

    async fn one(ctx: &SessionContext, sql: &str) -> String {
        strings(ctx, sql).await.remove(0)
    }

    /// The values of `expr` over the test table, in `id` order.
    async fn column(ctx: &SessionContext, expr: &str) -> Vec<String> {
        strings(ctx, &format!("SELECT {expr} FROM t ORDER BY id")).await
    }

    async fn plan_error(ctx: &SessionContext, sql: &str) -> String {
        match ctx.sql(sql).await {
            Err(e) => e.to_string(),
            Ok(df) => match df.into_optimized_plan() {
                Err(e) => e.to_string(),
                Ok(p) => panic!("{sql} should fail at planning, got {}", p.display_indent()),
            },
        }
    }

    async fn field(ctx: &SessionContext, sql: &str) -> Field {
        let df = ctx.sql(sql).await.unwrap();
        df.schema().field(0).as_ref().clone()
    }

    #[tokio::test]
    async fn length_offset_ordinal() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_LENGTH(dim3)").await,
            ["2", "2", "1", "1", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_LENGTH(la)").await,
            ["3", "1", "0", "null", "2", "1"]
        );
        assert_eq!(one(&ctx, "SELECT ARRAY_LENGTH('x')").await, "1");
        assert_eq!(one(&ctx, "SELECT ARRAY_LENGTH(NULL)").await, "null");
        assert_eq!(
            column(&ctx, "MV_OFFSET(dim3, 1)").await,
            ["b", "c", "null", "null", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_ORDINAL(dim3, 2)").await,
            ["b", "c", "null", "null", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_OFFSET(la, 0)").await,
            ["1", "4", "null", "null", "5", "1"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_ORDINAL(la, 3)").await,
            ["3", "null", "null", "null", "null", "null"]
        );
        // Out of range, negative, and Druid's asInt(): null is 0, fractions truncate.
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET(ARRAY[1,2,3], -1)").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET(ARRAY[1,2,3], 3)").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_ORDINAL(ARRAY[1,2,3], 0)").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET(ARRAY[1,2,3], NULL)").await,
            "1"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET(ARRAY[1,2,3], 1.9)").await,
            "2"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET(ARRAY[1,2,3], '2')").await,
            "3"
        );
        // Element types are kept.
        let f = field(&ctx, "SELECT ARRAY_OFFSET(da, 0) FROM t").await;
        assert_eq!(f.data_type(), &DataType::Float64);
        assert_eq!(
            column(&ctx, "ARRAY_OFFSET(da, 0)").await,
            ["1.5", "null", "null", "0.25", "10000000.0", "-0.0"]
        );
        let f = field(&ctx, "SELECT MV_OFFSET(dim3, 0) FROM t").await;
        assert_eq!(f.data_type(), &DataType::Utf8);
    }

    #[tokio::test]
    async fn contains_overlap_scalar_in_array() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_CONTAINS(dim3, 'b')").await,
            ["true", "true", "false", "false", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_CONTAINS(dim3, ARRAY['a','b'])").await,
            ["true", "false", "false", "false", "null", "null"]
        );
        // Druid's null filter: a null row matches ARRAY[NULL].
        assert_eq!(
            column(&ctx, "MV_CONTAINS(dim3, ARRAY[NULL])").await,
            ["false", "false", "false", "false", "true", "true"]
        );
        assert_eq!(
            column(&ctx, "MV_OVERLAP(dim3, ARRAY[NULL, 'd'])").await,
            ["false", "false", "true", "false", "true", "true"]
        );
        assert_eq!(
            column(&ctx, "MV_OVERLAP(dim3, ARRAY['a','c'])").await,
            ["true", "true", "false", "false", "null", "null"]
        );
        assert_eq!(
            strings(
                &ctx,
                "SELECT id FROM t WHERE NOT MV_CONTAINS(dim3, 'b') ORDER BY id"
            )
            .await,
            ["3", "4"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_CONTAINS(la, 1)").await,
            ["true", "false", "false", "null", "false", "true"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_CONTAINS(la, ARRAY[1, 3])").await,
            ["true", "false", "false", "null", "false", "false"]
        );
        // The needle is cast to the element type; an uncastable value is never found.
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONTAINS(ARRAY[1,2], '2')").await,
            "true"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONTAINS(ARRAY[1,2], 'x')").await,
            "false"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONTAINS(ARRAY[1,2], ARRAY[])").await,
            "true"
        );
        // Druid's FunctionTest: a NULL needle looks for a null element.
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONTAINS(ARRAY[1,2], NULL)").await,
            "false"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONTAINS(ARRAY[1.5, NULL], NULL)").await,
            "true"
        );
        assert_eq!(one(&ctx, "SELECT ARRAY_CONTAINS(NULL, NULL)").await, "null");
        assert_eq!(
            column(&ctx, "ARRAY_CONTAINS(ARRAY[1, 4], la)").await,
            ["false", "true", "true", "false", "false", "true"]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONTAINS(ARRAY[1.5, NULL], ARRAY[NULL])").await,
            "true"
        );
        assert_eq!(
            column(&ctx, "ARRAY_OVERLAP(la, ARRAY[4, 5])").await,
            ["false", "true", "false", "null", "true", "false"]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OVERLAP(NULL, ARRAY[1])").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OVERLAP(ARRAY[4, NULL], NULL)").await,
            "false"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OVERLAP(ARRAY[4, NULL], ARRAY[NULL])").await,
            "true"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OVERLAP(ARRAY[4, 5], ARRAY[NULL])").await,
            "false"
        );
        assert_eq!(
            column(&ctx, "ARRAY_OVERLAP(ARRAY[3, 5], la)").await,
            ["true", "false", "false", "false", "true", "false"]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OVERLAP(ARRAY['a'], ARRAY['b'])").await,
            "false"
        );
        assert_eq!(
            column(&ctx, "SCALAR_IN_ARRAY(dim1, ARRAY['2', 'abc'])").await,
            ["false", "false", "true", "false", "false", "true"]
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(2, ARRAY[1, 2])").await,
            "true"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(3, ARRAY[1, 2])").await,
            "false"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(NULL, ARRAY[1, 2])").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(NULL, ARRAY[1, NULL, 2])").await,
            "true"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(2.1, ARRAY[1, 2, 3])").await,
            "false"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(2, ARRAY[1.1, 2.1, 3.1])").await,
            "false"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(2, ARRAY[1.1, 2.0, 3.1])").await,
            "true"
        );
        assert_eq!(
            one(&ctx, "SELECT SCALAR_IN_ARRAY(1, ARRAY_SLICE(ARRAY[1], 5))").await,
            "null"
        );
        let f = field(&ctx, "SELECT MV_CONTAINS(dim3, 'a') FROM t").await;
        assert_eq!(f.data_type(), &DataType::Boolean);
    }

    #[tokio::test]
    async fn offset_of_ordinal_of() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_OFFSET_OF(dim3, 'b')").await,
            ["1", "0", "null", "null", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_ORDINAL_OF(dim3, 'b')").await,
            ["2", "1", "null", "null", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_ORDINAL_OF(la, 1)").await,
            ["1", "null", "null", "null", "null", "1"]
        );
        // NULL finds the first null element.
        assert_eq!(
            column(&ctx, "ARRAY_OFFSET_OF(la, NULL)").await,
            ["null", "null", "null", "null", "1", "null"]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET_OF(ARRAY[1.5, 2.5], 2.5)").await,
            "1"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_ORDINAL_OF(ARRAY[1, 2], 2.0)").await,
            "2"
        );
    }

    #[tokio::test]
    async fn prepend_append_concat() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_APPEND(dim3, 'foo')").await,
            [
                "[a,b,foo]",
                "[b,c,foo]",
                "[d,foo]",
                "['',foo]",
                "null",
                "null"
            ]
        );
        assert_eq!(
            column(&ctx, "MV_PREPEND('foo', dim3)").await,
            [
                "[foo,a,b]",
                "[foo,b,c]",
                "[foo,d]",
                "[foo,'']",
                "null",
                "null"
            ]
        );
        assert_eq!(
            column(&ctx, "MV_TO_STRING(MV_PREPEND('foo', dim3), ',')").await,
            ["foo,a,b", "foo,b,c", "foo,d", "foo,", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_CONCAT(dim3, dim3)").await,
            ["[a,b,a,b]", "[b,c,b,c]", "[d,d]", "['','']", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_CONCAT(dim1, dim3)").await,
            ["['',a,b]", "[10.1,b,c]", "[2,d]", "[1,'']", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_APPEND(la, 7)").await,
            ["[1,2,3,7]", "[4,7]", "[7]", "null", "[5,null,7]", "[1,7]"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_PREPEND(NULL, la)").await,
            [
                "[null,1,2,3]",
                "[null,4]",
                "[null]",
                "null",
                "[null,5,null]",
                "[null,1]"
            ]
        );
        // The value is cast to the array's element type.
        assert_eq!(
            one(&ctx, "SELECT ARRAY_APPEND(ARRAY[1, 2], 3.7)").await,
            "[1,2,3]"
        );
        let f = field(&ctx, "SELECT ARRAY_APPEND(la, 1.5) FROM t").await;
        assert_eq!(f.data_type(), &list_type(DataType::Int64));
        assert!(!is_multi_value_field(&f));
        assert_eq!(
            column(&ctx, "ARRAY_CONCAT(la, ARRAY[8, 9])").await,
            [
                "[1,2,3,8,9]",
                "[4,8,9]",
                "[8,9]",
                "null",
                "[5,null,8,9]",
                "[1,8,9]"
            ]
        );
        assert_eq!(
            column(&ctx, "ARRAY_CONCAT(da, la)").await,
            [
                "[1.5,2.0,1.0,2.0,3.0]",
                "null",
                "[]",
                "null",
                "[10000000.0,5.0,null]",
                "[-0.0,1.0]"
            ]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONCAT(ARRAY['a'], NULL)").await,
            "null"
        );
        let f = field(&ctx, "SELECT MV_APPEND(dim3, 'x') FROM t").await;
        assert!(is_multi_value_field(&f), "{f:?}");
        assert_eq!(f.data_type(), &dolmen_segment::multi_value_string_type());
        // Numbers in multi-value strings are rendered as Java does.
        assert_eq!(
            column(&ctx, "MV_APPEND(da, 'x')").await,
            [
                "[1.5,2.0,x]",
                "null",
                "[x]",
                "[0.25,x]",
                "[1.0E7,x]",
                "[-0.0,x]"
            ]
        );
    }

    #[tokio::test]
    async fn slices() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_SLICE(dim3, 1)").await,
            ["[b]", "[c]", "[]", "[]", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_SLICE(la, 1, 2)").await,
            ["[2]", "[null]", "null", "null", "[null]", "[null]"]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_SLICE(ARRAY[1,2,3,4], 1, 3)").await,
            "[2,3]"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_SLICE(ARRAY[1,2,3], -1, 2)").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_SLICE(ARRAY[1,2,3], 4, 5)").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_SLICE(ARRAY[1,2,3], 2, 1)").await,
            "null"
        );
        assert_eq!(one(&ctx, "SELECT ARRAY_SLICE(ARRAY[1,2,3], 3)").await, "[]");
        // Java's Arrays.copyOfRange pads past the end.
        assert_eq!(
            one(&ctx, "SELECT ARRAY_SLICE(ARRAY['a','b'], 1, 4)").await,
            "[b,null,null]"
        );
        let f = field(&ctx, "SELECT ARRAY_SLICE(da, 0, 1) FROM t").await;
        assert_eq!(f.data_type(), &list_type(DataType::Float64));
        let f = field(&ctx, "SELECT MV_SLICE(dim3, 0, 1) FROM t").await;
        assert!(is_multi_value_field(&f));
        let r = ctx
            .sql("SELECT ARRAY_SLICE(ARRAY[1], 0, 2147483647)")
            .await
            .unwrap()
            .collect()
            .await;
        assert!(r.is_err());
    }

    #[tokio::test]
    async fn to_string_and_split() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_TO_STRING(dim3, ',')").await,
            ["a,b", "b,c", "d", "''", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_TO_STRING(la, '|')").await,
            ["1|2|3", "4", "''", "null", "5|null", "1"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_TO_STRING(da, '; ')").await,
            ["1.5; 2.0", "null", "''", "0.25", "1.0E7", "-0.0"]
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_TO_STRING(ARRAY[NULL], ',')").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_TO_STRING(ARRAY['a','b'], NULL)").await,
            "ab"
        );
        assert_eq!(
            one(&ctx, "SELECT STRING_TO_ARRAY('a,b,,c,,', ',')").await,
            "[a,b,'',c]"
        );
        assert_eq!(
            one(&ctx, "SELECT STRING_TO_ARRAY('a1b22c', '[0-9]+')").await,
            "[a,b,c]"
        );
        assert_eq!(
            one(&ctx, "SELECT STRING_TO_ARRAY('abc', ',')").await,
            "[abc]"
        );
        assert_eq!(one(&ctx, "SELECT STRING_TO_ARRAY('', ',')").await, "['']");
        assert_eq!(one(&ctx, "SELECT STRING_TO_ARRAY(',', ',')").await, "[]");
        assert_eq!(
            one(&ctx, "SELECT STRING_TO_ARRAY(',a', ',')").await,
            "['',a]"
        );
        assert_eq!(
            one(&ctx, "SELECT STRING_TO_ARRAY('a.b', '')").await,
            "[a,.,b]"
        );
        assert_eq!(one(&ctx, "SELECT STRING_TO_ARRAY(NULL, ',')").await, "null");
        assert_eq!(
            column(&ctx, "STRING_TO_MV(MV_TO_STRING(dim3, ',') || ',d', ',')").await,
            ["[a,b,d]", "[b,c,d]", "[d,d]", "['',d]", "null", "null"]
        );
        let f = field(&ctx, "SELECT STRING_TO_MV('a,b', ',')").await;
        assert!(is_multi_value_field(&f));
        let f = field(&ctx, "SELECT STRING_TO_ARRAY('a,b', ',')").await;
        assert!(!is_multi_value_field(&f));
        assert_eq!(f.data_type(), &list_type(DataType::Utf8));
        // A per-row delimiter.
        assert_eq!(
            column(&ctx, "STRING_TO_ARRAY('x1y', dim1)").await,
            ["[x,1,y]", "[x1y]", "[x1y]", "[x,y]", "[x1y]", "[x1y]"]
        );
    }

    #[tokio::test]
    async fn conversions() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_TO_ARRAY(dim3)").await,
            ["[a,b]", "[b,c]", "[d]", "['']", "null", "null"]
        );
        let f = field(&ctx, "SELECT MV_TO_ARRAY(dim3) FROM t").await;
        assert!(!is_multi_value_field(&f));
        assert_eq!(f.data_type(), &list_type(DataType::Utf8));
        assert_eq!(
            column(&ctx, "MV_TO_ARRAY(dim1)").await,
            ["['']", "[10.1]", "[2]", "[1]", "[def]", "[abc]"]
        );
        assert_eq!(
            column(&ctx, "ARRAY_TO_MV(da)").await,
            ["[1.5,2.0]", "null", "[]", "[0.25]", "[1.0E7]", "[-0.0]"]
        );
        let f = field(&ctx, "SELECT ARRAY_TO_MV(la) FROM t").await;
        assert!(is_multi_value_field(&f));
        // Multi-value results survive a round trip.
        assert_eq!(
            column(&ctx, "MV_TO_ARRAY(ARRAY_TO_MV(la))").await,
            ["[1,2,3]", "[4]", "[]", "null", "[5,null]", "[1]"]
        );
    }

    #[tokio::test]
    async fn filters() {
        let ctx = ctx();
        assert_eq!(
            column(&ctx, "MV_FILTER_ONLY(dim3, ARRAY['b'])").await,
            ["[b]", "[b]", "null", "null", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_FILTER_NONE(dim3, ARRAY['b'])").await,
            ["[a]", "[c]", "[d]", "['']", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_LENGTH(MV_FILTER_NONE(dim3, ARRAY['b']))").await,
            ["1", "1", "1", "1", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_FILTER_ONLY(dim3, ARRAY[NULL, ''])").await,
            ["null", "null", "null", "['']", "null", "null"]
        );
        assert_eq!(
            column(&ctx, "MV_FILTER_REGEX(dim3, '[ab]')").await,
            ["[a,b]", "[b]", "null", "null", "null", "null"]
        );
        // The whole value must match.
        assert_eq!(
            one(&ctx, "SELECT MV_FILTER_REGEX(ARRAY['abc','b'], 'b')").await,
            "[b]"
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT MV_FILTER_REGEX(ARRAY['abc','b', NULL], '.*b.*')"
            )
            .await,
            "[abc,b]"
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT MV_FILTER_PREFIX(ARRAY['foo','bar','food', NULL], 'foo')"
            )
            .await,
            "[foo,food]"
        );
        assert_eq!(
            one(&ctx, "SELECT MV_FILTER_PREFIX(ARRAY['bar'], 'foo')").await,
            "null"
        );
        assert_eq!(
            one(&ctx, "SELECT MV_FILTER_PREFIX('food', 'foo')").await,
            "[food]"
        );
        let f = field(&ctx, "SELECT MV_FILTER_PREFIX(dim3, 'a') FROM t").await;
        assert!(is_multi_value_field(&f));
    }

    /// Cases of Druid's `FunctionTest` (`testArraySlice`, `testArrayPrepend`, `testStringToArray`,
    /// `testArrayContains`, `testArrayOverlap`, `testScalarInArray`) through SQL.
    #[tokio::test]
    async fn druid_function_test_cases() {
        let ctx = ctx();
        for (sql, want) in [
            ("ARRAY_SLICE(ARRAY[1, 2, 3, 4], 1, 3)", "[2,3]"),
            ("ARRAY_SLICE(ARRAY[1.0, 2.1, 3.2, 4.3], 2)", "[3.2,4.3]"),
            (
                "ARRAY_SLICE(ARRAY['a', 'b', 'c', 'd'], 4, 6)",
                "[null,null]",
            ),
            ("ARRAY_SLICE(ARRAY[1, 2, 3, 4], 2, 2)", "[]"),
            ("ARRAY_SLICE(ARRAY[1, 2, 3, 4], 5, 7)", "null"),
            ("ARRAY_SLICE(ARRAY[1, 2, 3, 4], 2, 1)", "null"),
            ("ARRAY_PREPEND(4, ARRAY[1, 2, 3])", "[4,1,2,3]"),
            ("ARRAY_PREPEND('bar', ARRAY[1, 2, 3])", "[null,1,2,3]"),
            ("ARRAY_PREPEND(1, ARRAY[])", "[1]"),
            ("STRING_TO_ARRAY('1,2,3', ',')", "[1,2,3]"),
            ("STRING_TO_ARRAY('1', ',')", "[1]"),
            ("ARRAY_TO_STRING(ARRAY[1, 2, 3], ',')", "1,2,3"),
            ("ARRAY_OFFSET(ARRAY[1, 2, 3], 2)", "3"),
            ("ARRAY_ORDINAL(ARRAY[1, 2, 3], 3)", "3"),
            ("ARRAY_OFFSET_OF(ARRAY[1, 2, 3], 3)", "2"),
            ("ARRAY_ORDINAL_OF(ARRAY[1, 2, 3], 4)", "null"),
            ("ARRAY_CONTAINS(ARRAY[1, 2, 3], ARRAY[2, 3])", "true"),
            ("ARRAY_CONTAINS(ARRAY[1, 2, 3], ARRAY[3, 4])", "false"),
            ("ARRAY_CONTAINS(ARRAY[1, NULL, 2], ARRAY[NULL])", "true"),
            ("ARRAY_OVERLAP(ARRAY[4, NULL], ARRAY[4, 5, 6])", "true"),
            ("ARRAY_OVERLAP(ARRAY[4, 5, NULL, 6], NULL)", "false"),
            ("ARRAY_OVERLAP(ARRAY[4, 5, NULL, 6], ARRAY[NULL])", "true"),
            ("SCALAR_IN_ARRAY(4, ARRAY[1, 2, 3])", "false"),
            ("SCALAR_IN_ARRAY(1, NULL)", "null"),
        ] {
            assert_eq!(one(&ctx, &format!("SELECT {sql}")).await, want, "{sql}");
        }
        let f = field(&ctx, "SELECT ARRAY_PREPEND(1, ARRAY[])").await;
        assert_eq!(f.data_type(), &list_type(DataType::Utf8));
    }

    #[tokio::test]
    async fn dictionary_strings() {
        let ctx = ctx();
        assert_eq!(
            column(
                &ctx,
                "MV_APPEND(arrow_cast(dim1, 'Dictionary(Int32, Utf8)'), 'x')"
            )
            .await,
            ["['',x]", "[10.1,x]", "[2,x]", "[1,x]", "[def,x]", "[abc,x]"]
        );
        assert_eq!(
            column(
                &ctx,
                "ARRAY_LENGTH(arrow_cast(dim1, 'Dictionary(Int32, Utf8)'))"
            )
            .await,
            ["1", "1", "1", "1", "1", "1"]
        );
    }

    #[tokio::test]
    async fn call_builds_expressions() {
        let ctx = ctx();
        let df = ctx
            .table("t")
            .await
            .unwrap()
            .filter(call(
                ArrayFunction::MvContains,
                vec![
                    datafusion::prelude::col("dim3"),
                    datafusion::prelude::lit("b"),
                ],
            ))
            .unwrap()
            .select_columns(&["id"])
            .unwrap();
        let batches = df.collect().await.unwrap();
        let ids: Vec<String> = batches
            .iter()
            .flat_map(|b| (0..b.num_rows()).map(|i| render(b.column(0), i)))
            .collect();
        assert_eq!(ids, ["1", "2"]);
    }

    #[tokio::test]
    async fn array_literals() {
        let ctx = ctx();
        assert_eq!(
            one(&ctx, "SELECT ARRAY['a', NULL, 'b']").await,
            "[a,null,b]"
        );
        assert_eq!(one(&ctx, "SELECT ARRAY[1, NULL, 3]").await, "[1,null,3]");
        assert_eq!(one(&ctx, "SELECT ARRAY[1.5, NULL]").await, "[1.5,null]");
        assert_eq!(one(&ctx, "SELECT ARRAY_LENGTH(ARRAY[NULL])").await, "1");
        assert_eq!(
            one(&ctx, "SELECT ARRAY_APPEND(ARRAY[NULL], 'x')").await,
            "[null,x]"
        );
        let f = field(&ctx, "SELECT ARRAY[1, 2]").await;
        assert_eq!(f.data_type(), &list_type(DataType::Int64));
        // Longs and doubles mix as doubles.
        assert_eq!(one(&ctx, "SELECT ARRAY[1, 2.5]").await, "[1.0,2.5]");
        assert_eq!(
            one(&ctx, "SELECT ARRAY_OFFSET(ARRAY[1, 2.5], 0)").await,
            "1.0"
        );
        // Numbers in multi-value functions compare as their strings.
        assert_eq!(
            column(&ctx, "MV_CONTAINS(ARRAY_TO_MV(la), 1)").await,
            ["true", "false", "false", "null", "false", "true"]
        );
    }

    #[tokio::test]
    async fn concat_agg() {
        let ctx = ctx();
        assert_eq!(
            one(
                &ctx,
                "SELECT ARRAY_CONCAT_AGG(la) FROM (SELECT * FROM t ORDER BY id)"
            )
            .await,
            "[1,2,3,4,5,null,1]"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONCAT_AGG(DISTINCT la) FROM t").await,
            "[null,1,2,3,4,5]"
        );
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONCAT_AGG(DISTINCT da, 10000) FROM t").await,
            "[-0.0,0.25,1.5,2.0,10000000.0]"
        );
        assert_eq!(
            strings(
                &ctx,
                "SELECT ARRAY_CONCAT_AGG(DISTINCT dim3) FROM t GROUP BY id > 2 ORDER BY 1"
            )
            .await,
            ["['',d]", "[a,b,c]"]
        );
        // Nothing to concatenate: null.
        assert_eq!(
            one(&ctx, "SELECT ARRAY_CONCAT_AGG(la) FROM t WHERE id > 100").await,
            "null"
        );
        assert_eq!(
            one(
                &ctx,
                "SELECT ARRAY_CONCAT_AGG(la) FROM t WHERE id = 3 OR id = 4"
            )
            .await,
            "null"
        );
        // The DISTINCT form is rewritten to an element-distinct aggregate under the same name.
        let batches = ctx
            .sql("SELECT ARRAY_CONCAT_AGG(DISTINCT la) FROM t")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(
            batches[0].schema().field(0).name(),
            "array_concat_agg(DISTINCT t.la)"
        );
        // Partial aggregates merge (state / merge_batch).
        let config = SessionConfig::new().with_target_partitions(4);
        let multi = SessionContext::new_with_config(config);
        crate::register_druid_functions(&multi);
        multi
            .register_table("tp", ctx.table_provider("tp").await.unwrap())
            .unwrap();
        assert_eq!(
            one(&multi, "SELECT ARRAY_CONCAT_AGG(DISTINCT la) FROM tp").await,
            "[null,1,2,3,4,5]"
        );
        assert_eq!(
            one(&multi, "SELECT ARRAY_LENGTH(ARRAY_CONCAT_AGG(la)) FROM tp").await,
            "7"
        );
        assert_eq!(
            strings(
                &multi,
                "SELECT ARRAY_CONCAT_AGG(DISTINCT dim3) FROM tp GROUP BY id % 2 ORDER BY 1"
            )
            .await,
            ["['',b,c]", "[a,b,d]"]
        );
        let f = field(&ctx, "SELECT ARRAY_CONCAT_AGG(da) FROM t").await;
        assert_eq!(f.data_type(), &list_type(DataType::Float64));
        assert!(
            plan_error(&ctx, "SELECT ARRAY_CONCAT_AGG(dim1) FROM t")
                .await
                .contains("must be an array")
        );
    }

    #[tokio::test]
    async fn array_agg_max_bytes() {
        // Druid's ARRAY_AGG(expr, maxBytes): DataFusion's array_agg takes one argument.
        let ctx = ctx();
        let r = ctx.sql("SELECT ARRAY_AGG(dim1, 1024) FROM t").await;
        let err = match r {
            Err(e) => e.to_string(),
            Ok(df) => match df.collect().await {
                Err(e) => e.to_string(),
                Ok(_) => panic!("array_agg now accepts a second argument"),
            },
        };
        assert!(err.contains("expected 1 arguments but received 2"), "{err}");
        assert_eq!(
            one(&ctx, "SELECT ARRAY_LENGTH(ARRAY_AGG(dim1)) FROM t").await,
            "6"
        );
    }

    #[tokio::test]
    async fn errors_are_plan_errors() {
        let ctx = ctx();
        for (sql, needle) in [
            ("SELECT ARRAY_LENGTH(la, 1) FROM t", "takes 1 arguments"),
            ("SELECT ARRAY_OFFSET(la) FROM t", "takes 2 arguments"),
            ("SELECT ARRAY_SLICE(la, 1, 2, 3) FROM t", "takes 2 to 3"),
            ("SELECT ARRAY_LENGTH(1)", "must be an array or a string"),
            ("SELECT ARRAY_OFFSET(la, la) FROM t", "must be a number"),
            (
                "SELECT ARRAY_OFFSET_OF(la, ARRAY[1]) FROM t",
                "must be a scalar",
            ),
            ("SELECT SCALAR_IN_ARRAY(la, la) FROM t", "must be a scalar"),
            ("SELECT SCALAR_IN_ARRAY(1, 'a')", "must be an array"),
            (
                "SELECT MV_FILTER_ONLY(dim3, 'b') FROM t",
                "must be an array",
            ),
            ("SELECT MV_FILTER_REGEX(dim3, dim1) FROM t", "literal"),
            ("SELECT MV_FILTER_PREFIX(dim3, NULL) FROM t", "non-null"),
            (
                "SELECT MV_FILTER_REGEX(dim3, '(') FROM t",
                "regular expression",
            ),
            (
                "SELECT STRING_TO_ARRAY(dim1, '[') FROM t",
                "regular expression",
            ),
            ("SELECT MV_TO_ARRAY(ARRAY[1, 2])", "multi-value"),
            ("SELECT MV_TO_ARRAY(la) FROM t", "multi-value"),
            ("SELECT ARRAY_TO_STRING(la, la) FROM t", "must be a string"),
            ("SELECT ARRAY_LENGTH(ARRAY[ARRAY[1]])", "array of"),
            ("SELECT MV_LENGTH(1)", "must be an array or a string"),
            ("SELECT ARRAY_ORDINAL(la, 1, 2) FROM t", "takes 2 arguments"),
            (
                "SELECT MV_OFFSET(dim3, ARRAY[1]) FROM t",
                "must be a number",
            ),
            ("SELECT MV_ORDINAL(dim3) FROM t", "takes 2 arguments"),
            (
                "SELECT ARRAY_CONTAINS(1, 1)",
                "must be an array or a string",
            ),
            ("SELECT MV_CONTAINS(dim3) FROM t", "takes 2 arguments"),
            ("SELECT ARRAY_OVERLAP(la) FROM t", "takes 2 arguments"),
            (
                "SELECT MV_OVERLAP(1, dim3) FROM t",
                "must be an array or a string",
            ),
            ("SELECT ARRAY_ORDINAL_OF(la, la) FROM t", "must be a scalar"),
            ("SELECT MV_OFFSET_OF(dim3, dim3) FROM t", "must be a scalar"),
            ("SELECT MV_ORDINAL_OF(dim3) FROM t", "takes 2 arguments"),
            ("SELECT ARRAY_PREPEND(la, la) FROM t", "must be a scalar"),
            ("SELECT ARRAY_APPEND(la, la) FROM t", "must be a scalar"),
            ("SELECT ARRAY_CONCAT(la) FROM t", "takes 2 arguments"),
            (
                "SELECT ARRAY_CONCAT(la, la, la) FROM t",
                "takes 2 arguments",
            ),
            ("SELECT MV_PREPEND(dim3, dim3) FROM t", "must be a scalar"),
            ("SELECT MV_APPEND(dim3, dim3) FROM t", "must be a scalar"),
            (
                "SELECT MV_CONCAT(dim3, dim3, dim3) FROM t",
                "takes 2 arguments",
            ),
            ("SELECT MV_SLICE(dim3, la) FROM t", "must be a number"),
            ("SELECT MV_TO_STRING(dim3) FROM t", "takes 2 arguments"),
            ("SELECT STRING_TO_MV('a', '(')", "regular expression"),
            ("SELECT STRING_TO_ARRAY(la, ',') FROM t", "must be a string"),
            ("SELECT ARRAY_TO_MV(1)", "must be an array or a string"),
            (
                "SELECT MV_FILTER_NONE(dim3, 'b') FROM t",
                "must be an array",
            ),
            ("SELECT MV_FILTER_ONLY(dim3) FROM t", "takes 2 arguments"),
        ] {
            let err = plan_error(&ctx, sql).await;
            assert!(err.contains(needle), "{sql}: {err}");
        }
    }

    #[test]
    fn java_split_edge_cases() {
        let re = |s: &str| Regex::new(s).unwrap();
        assert_eq!(java_split("a,b,,", &re(",")), ["a", "b"]);
        assert_eq!(java_split("", &re(",")), [""]);
        assert_eq!(java_split("abc", &re("")), ["a", "b", "c"]);
        assert_eq!(java_split("aXbXX", &re("X")), ["a", "b"]);
        assert!(java_split("XX", &re("X")).is_empty());
        assert_eq!(java_split("日本,語", &re(",")), ["日本", "語"]);
        assert_eq!(java_split("日本", &re("")), ["日", "本"]);
    }

    fn input(values: ArrayRef, constant: bool) -> Input {
        Input { values, constant }
    }

    #[test]
    fn bad_inputs_do_not_panic() {
        let udf = DruidArrayUdf::new(ArrayFunction::ArraySlice);
        let list: ArrayRef = Arc::new(ListArray::new_null(
            Arc::new(Field::new_list_field(DataType::Int64, true)),
            3,
        ));
        let start: ArrayRef = Arc::new(StringArray::from(vec![Some("x"), None, Some("1.5")]));
        let out = udf
            .eval(&[input(list, false), input(start, false)], 3)
            .unwrap();
        assert_eq!(out.null_count(), 3);
        let idx: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, i64::MAX, -1]));
        for f in [ArrayFunction::ArrayOffset, ArrayFunction::ArrayOrdinal] {
            let udf = DruidArrayUdf::new(f);
            let l: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
                Some(vec![Some(1)]),
                Some(vec![Some(2)]),
                Some(vec![]),
            ]));
            let out = udf
                .eval(&[input(l, false), input(Arc::clone(&idx), false)], 3)
                .unwrap();
            assert_eq!(out.null_count(), 3);
        }

        // Every function on every accepted combination of odd values, as columns and as
        // constants: errors are fine, panics are not, and results have one value per row.
        let pool: Vec<ArrayRef> = vec![
            Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
                Some(vec![Some(i64::MIN), None]),
                None,
                Some(vec![]),
            ])),
            Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(vec![
                Some(vec![Some(f64::NAN), Some(f64::INFINITY), Some(-0.0)]),
                Some(vec![None]),
                None,
            ])),
            to_list(&(Arc::new(StringArray::from(vec![Some("日本"), None, Some("")])) as ArrayRef))
                .map(|l| Arc::new(l) as ArrayRef)
                .unwrap(),
            Arc::new(StringArray::from(vec![Some("("), Some("x"), None])),
            Arc::new(Int64Array::from(vec![Some(i64::MAX), None, Some(-5)])),
            Arc::new(arrow::array::Float64Array::from(vec![
                Some(f64::NAN),
                Some(1e300),
                None,
            ])),
            new_null_array(&DataType::Null, 3),
        ];
        for f in ArrayFunction::ALL {
            let udf = DruidArrayUdf::new(f);
            let (params, min) = f.params();
            for arity in min..=params.len() {
                let mut combos: Vec<Vec<usize>> = vec![vec![]];
                for _ in 0..arity {
                    combos = combos
                        .into_iter()
                        .flat_map(|c| {
                            (0..pool.len()).map(move |p| {
                                let mut c = c.clone();
                                c.push(p);
                                c
                            })
                        })
                        .collect();
                }
                for combo in combos {
                    let types: Vec<DataType> =
                        combo.iter().map(|p| pool[*p].data_type().clone()).collect();
                    let Ok(coerced) = udf.coerce_types(&types) else {
                        continue;
                    };
                    let Ok(args) = combo
                        .iter()
                        .zip(&coerced)
                        .map(|(p, t)| arrow::compute::cast(&pool[*p], t))
                        .collect::<std::result::Result<Vec<_>, _>>()
                    else {
                        continue;
                    };
                    for constant_mask in 0..(1_u32 << arity) {
                        let inputs: Vec<Input> = args
                            .iter()
                            .enumerate()
                            .map(|(k, a)| {
                                let constant = constant_mask & (1 << k) != 0;
                                input(
                                    if constant {
                                        a.slice(1, 1)
                                    } else {
                                        Arc::clone(a)
                                    },
                                    constant,
                                )
                            })
                            .collect();
                        if let Ok(out) = udf.eval(&inputs, 3) {
                            assert_eq!(out.len(), 3, "{f:?} {types:?}");
                            assert_eq!(
                                out.data_type(),
                                &udf.result_type(&coerced),
                                "{f:?} {types:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
