//! The size bound of Druid's expression aggregations: `STRING_AGG(expr, sep[, size])`,
//! `LISTAGG(expr[, sep[, size]])` and `ARRAY_AGG(expr[, size])` keep their result in a buffer of
//! `size` bytes (default 1024, `docs/querying/sql-aggregations.md`), and a query whose
//! aggregated value grows past it fails ("Unable to serialize [STRING], size [n] is larger than
//! max [1024]", Druid's `ExpressionLambdaAggregator`). Dolmen's aggregations are not fixed-size;
//! the SQL rewrite wraps each such call in `druid_aggregate_max_bytes(call, size, 'NAME')`, which
//! refuses a value past the bound the same way, so a query gives Druid's answer or Druid's error.
//!
//! Sizes: a string counts its UTF-8 bytes; an array the sum of its elements (strings their
//! bytes, numbers 8 bytes, nulls 1 byte), Druid's serialized sizes up to a few bytes of framing.
//! A null value passes. The error is an execution error (400 `invalidInput`: the user raises
//! `size`).
//!
//! Their input: `STRING_AGG`/`LISTAGG` read `__time` and other TIMESTAMP values as what they are
//! in native queries, milliseconds (`STRING_AGG(__time, '|')` joins `1577840461000|...`; quidem
//! `qaAggFuncs`; `ARRAY_AGG(__time)` stays a TIMESTAMP ARRAY); the rewrite passes their
//! argument through [`input_udf`], which turns timestamps into epoch milliseconds and leaves
//! every other type alone.

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The function's name in plans.
pub const NAME: &str = "druid_aggregate_max_bytes";

/// Default `size` of Druid's expression aggregations, bytes.
pub const DEFAULT_MAX_BYTES: u64 = 1024;

/// `druid_aggregate_max_bytes(value, maxBytes, 'FUNCTION')` as a UDF (see the module docs).
pub fn udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(AggregateMaxBytes {
        signature: Signature::any(3, Volatility::Immutable),
    })
}

/// The name of [`input_udf`] in plans.
pub const INPUT_NAME: &str = "druid_expression_aggregation_input";

/// `druid_expression_aggregation_input(x)`: `x` as Druid's expression aggregators read it
/// (TIMESTAMP -> BIGINT epoch milliseconds, anything else unchanged).
pub fn input_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(ExpressionAggregationInput {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ExpressionAggregationInput {
    signature: Signature,
}

impl ScalarUDFImpl for ExpressionAggregationInput {
    fn name(&self) -> &str {
        INPUT_NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(match &args[0] {
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => DataType::Int64,
            other => other.clone(),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let value = &args.args[0];
        match value.data_type() {
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => {
                let ms = arrow::compute::cast(
                    &value.to_array(args.number_rows)?,
                    &DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
                )?;
                let ms = arrow::compute::cast(&ms, &DataType::Int64)?;
                Ok(ColumnarValue::Array(ms))
            }
            _ => Ok(value.clone()),
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct AggregateMaxBytes {
    signature: Signature,
}

impl ScalarUDFImpl for AggregateMaxBytes {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let limit = match &args.args[1] {
            ColumnarValue::Scalar(s) => match s {
                ScalarValue::Int64(Some(n)) => *n as u64,
                ScalarValue::UInt64(Some(n)) => *n,
                other => {
                    return Err(DataFusionError::Plan(format!(
                        "{NAME}: the size must be an integer literal, got {other}"
                    )));
                }
            },
            ColumnarValue::Array(_) => {
                return Err(DataFusionError::Plan(format!(
                    "{NAME}: the size must be a literal"
                )));
            }
        };
        let function = match &args.args[2] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(s))) => s.clone(),
            _ => "aggregation".to_string(),
        };
        let value = &args.args[0];
        let array = value.to_array(args.number_rows)?;
        for row in 0..array.len() {
            let size = value_size(array.as_ref(), row);
            if size > limit {
                return Err(DataFusionError::Execution(format!(
                    "{function}: Unable to serialize [{}], size [{size}] is larger than max \
                     [{limit}]; pass a larger size argument",
                    druid_type_name(array.data_type())
                )));
            }
        }
        Ok(value.clone())
    }
}

fn druid_type_name(t: &DataType) -> &'static str {
    match t {
        DataType::List(f) | DataType::LargeList(f) => match f.data_type() {
            DataType::Int64 | DataType::Int32 => "ARRAY<LONG>",
            DataType::Float64 | DataType::Float32 => "ARRAY<DOUBLE>",
            _ => "ARRAY<STRING>",
        },
        _ => "STRING",
    }
}

/// Serialized size of `array[row]` in bytes (0 for null).
fn value_size(array: &dyn Array, row: usize) -> u64 {
    if array.is_null(row) {
        return 0;
    }
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row).len() as u64,
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).len() as u64,
        DataType::Utf8View => array.as_string_view().value(row).len() as u64,
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(row);
            (0..items.len())
                .map(|i| element_size(items.as_ref(), i))
                .sum()
        }
        DataType::LargeList(_) => {
            let items = array.as_list::<i64>().value(row);
            (0..items.len())
                .map(|i| element_size(items.as_ref(), i))
                .sum()
        }
        _ => 8,
    }
}

fn element_size(items: &dyn Array, i: usize) -> u64 {
    if items.is_null(i) {
        return 1;
    }
    match items.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => value_size(items, i),
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn values_past_the_bound_fail_and_others_pass() {
        let ctx = SessionContext::new();
        ctx.register_udf(udf());
        let ok = ctx
            .sql("SELECT druid_aggregate_max_bytes('abcd', 4, 'STRING_AGG') AS v")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(ok[0].num_rows(), 1);
        let err = ctx
            .sql("SELECT druid_aggregate_max_bytes('abcde', 4, 'STRING_AGG') AS v")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "STRING_AGG: Unable to serialize [STRING], size [5] is larger than max [4]"
            ),
            "{err}"
        );
        let err = ctx
            .sql("SELECT druid_aggregate_max_bytes(make_array('ab', 'cd', 'e'), 4, 'ARRAY_AGG') AS v")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("ARRAY<STRING>], size [5]"), "{err}");
        let null = ctx
            .sql("SELECT druid_aggregate_max_bytes(CAST(NULL AS VARCHAR), 1, 'X') AS v")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert!(null[0].column(0).is_null(0));
    }

    #[tokio::test]
    async fn timestamps_enter_as_milliseconds() {
        let ctx = SessionContext::new();
        ctx.register_udf(input_udf());
        let out = ctx
            .sql(
                "SELECT druid_expression_aggregation_input(TIMESTAMP '2020-01-01 01:01:01') AS t, \
                 druid_expression_aggregation_input('x') AS s",
            )
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let t = out[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(t.value(0), 1_577_840_461_000);
        assert_eq!(out[0].column(1).data_type(), &DataType::Utf8);
    }
}
