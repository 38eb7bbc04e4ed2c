//! `JSON_VALUE(expr, path RETURNING <type> ARRAY)`: the array at `path` as an `ARRAY<type>`
//! (Druid's `docs/querying/sql-json-functions.md`: "returns an array of primitives"). The SQL
//! rewrite turns it into `druid_json_array_of(JSON_QUERY_ARRAY(expr, path), '<TYPE>')`; this UDF
//! converts the JSON text of each element:
//!
//! | element | BIGINT | DOUBLE | VARCHAR | BOOLEAN |
//! |---|---|---|---|---|
//! | number | truncated to an integer | as is | its text | non-zero |
//! | string | parsed as a number, else null | parsed, else null | the string | `true`/`false`, else null |
//! | `true`/`false` | 1 / 0 | 1.0 / 0.0 | `true` / `false` | as is |
//! | `null` | null | null | null | null |
//!
//! An array holding an array or an object is not an array of primitives: the result is null
//! (Druid's quidem corpus, `qaArray/sql_explain`: `JSON_VALUE(a_nested, '$[7]' RETURNING
//! VARCHAR ARRAY)` over an array of arrays is null). A null input (no value at the path) is
//! null. The element type names are those of the `RETURNING` clause after dolmen-query's `request` turned `<type> ARRAY` into `<type>[]`.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, Int64Builder, ListArray,
    StringBuilder,
};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use serde_json::Value;

/// The function's name in plans.
pub const NAME: &str = "druid_json_array_of";

/// `druid_json_array_of(list_of_json_texts, 'TYPE')` as a UDF (see the module docs).
pub fn udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(JsonArrayOf {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonArrayOf {
    signature: Signature,
}

/// Element types `RETURNING .. ARRAY` takes.
#[derive(Clone, Copy, PartialEq)]
enum Element {
    Long,
    Double,
    Text,
    Bool,
}

impl Element {
    fn parse(name: &str) -> Option<Element> {
        match name.to_ascii_uppercase().as_str() {
            "BIGINT" | "INTEGER" | "INT" | "SMALLINT" | "TINYINT" | "LONG" => Some(Element::Long),
            "DOUBLE" | "FLOAT" | "REAL" | "DECIMAL" | "NUMERIC" | "DOUBLE PRECISION" => {
                Some(Element::Double)
            }
            "VARCHAR" | "CHAR" | "STRING" | "TEXT" => Some(Element::Text),
            "BOOLEAN" => Some(Element::Bool),
            _ => None,
        }
    }

    fn data_type(self) -> DataType {
        match self {
            Element::Long => DataType::Int64,
            Element::Double => DataType::Float64,
            Element::Text => DataType::Utf8,
            Element::Bool => DataType::Boolean,
        }
    }
}

fn element_of(arg: Option<&ScalarValue>) -> Result<Element> {
    match arg {
        Some(ScalarValue::Utf8(Some(s))) => Element::parse(s).ok_or_else(|| {
            DataFusionError::Plan(format!(
                "JSON_VALUE(... RETURNING {s} ARRAY) is not supported: the element type must be \
                 BIGINT, DOUBLE, VARCHAR or BOOLEAN"
            ))
        }),
        _ => Err(DataFusionError::Plan(format!(
            "{NAME}: the element type must be a string literal"
        ))),
    }
}

impl ScalarUDFImpl for JsonArrayOf {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Err(DataFusionError::Internal(format!(
            "{NAME}: return_field_from_args gives the type"
        )))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let element = element_of(args.scalar_arguments.get(1).copied().flatten())?;
        Ok(Arc::new(Field::new(
            self.name(),
            DataType::List(Arc::new(Field::new("item", element.data_type(), true))),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let element = match &args.args[1] {
            ColumnarValue::Scalar(s) => element_of(Some(s))?,
            ColumnarValue::Array(_) => element_of(None)?,
        };
        let input = args.args[0].to_array(args.number_rows)?;
        let list = match input.data_type() {
            DataType::List(_) => input.as_list::<i32>().clone(),
            DataType::Null => {
                return Ok(ColumnarValue::Array(arrow::array::new_null_array(
                    &DataType::List(Arc::new(Field::new("item", element.data_type(), true))),
                    args.number_rows,
                )));
            }
            other => {
                return Err(DataFusionError::Plan(format!(
                    "{NAME}: expects the JSON texts of an array, got {other}"
                )));
            }
        };
        Ok(ColumnarValue::Array(convert(&list, element)?))
    }
}

/// Each element's JSON text as `element` (table in the module docs).
fn convert(list: &ListArray, element: Element) -> Result<ArrayRef> {
    let texts = arrow::compute::cast(list.values(), &DataType::Utf8)?;
    let texts = texts.as_string::<i32>();
    let parsed: Vec<Option<Value>> = (0..texts.len())
        .map(|i| {
            (!texts.is_null(i)).then(|| serde_json::from_str(texts.value(i)).unwrap_or(Value::Null))
        })
        .collect();
    let values: ArrayRef = match element {
        Element::Long => {
            let mut b = Int64Builder::with_capacity(parsed.len());
            for v in &parsed {
                b.append_option(v.as_ref().and_then(|v| {
                    match v {
                        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
                        Value::String(s) => s
                            .trim()
                            .parse::<i64>()
                            .ok()
                            .or_else(|| s.trim().parse::<f64>().ok().map(|f| f as i64)),
                        Value::Bool(b) => Some(i64::from(*b)),
                        _ => None,
                    }
                }));
            }
            Arc::new(b.finish())
        }
        Element::Double => {
            let mut b = Float64Builder::with_capacity(parsed.len());
            for v in &parsed {
                b.append_option(v.as_ref().and_then(|v| match v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse::<f64>().ok(),
                    Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                    _ => None,
                }));
            }
            Arc::new(b.finish())
        }
        Element::Text => {
            let mut b = StringBuilder::new();
            for v in &parsed {
                match v {
                    None | Some(Value::Null) => b.append_null(),
                    Some(Value::String(s)) => b.append_value(s),
                    Some(other) => b.append_value(other.to_string()),
                }
            }
            Arc::new(b.finish())
        }
        Element::Bool => {
            let mut b = BooleanBuilder::with_capacity(parsed.len());
            for v in &parsed {
                b.append_option(v.as_ref().and_then(|v| match v {
                    Value::Bool(b) => Some(*b),
                    Value::Number(n) => n.as_f64().map(|f| f != 0.0),
                    Value::String(s) => match s.to_ascii_lowercase().as_str() {
                        "true" => Some(true),
                        "false" => Some(false),
                        _ => None,
                    },
                    _ => None,
                }));
            }
            Arc::new(b.finish())
        }
    };
    // A row holding a nested array or object is null (module docs).
    let nested_rows: Vec<bool> = list
        .offsets()
        .windows(2)
        .map(|w| {
            parsed[w[0] as usize..w[1] as usize]
                .iter()
                .any(|v| matches!(v, Some(Value::Array(_) | Value::Object(_))))
        })
        .collect();
    let nulls = if nested_rows.iter().any(|n| *n) {
        let valid: arrow::buffer::BooleanBuffer = nested_rows
            .iter()
            .enumerate()
            .map(|(i, nested)| !nested && list.is_valid(i))
            .collect();
        Some(arrow::buffer::NullBuffer::new(valid))
    } else {
        list.nulls().cloned()
    };
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new("item", element.data_type(), true)),
        list.offsets().clone(),
        values,
        nulls,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::ListBuilder;

    fn texts(rows: &[Option<&[&str]>]) -> ListArray {
        let mut b = ListBuilder::new(StringBuilder::new());
        for r in rows {
            match r {
                None => b.append_null(),
                Some(items) => {
                    for i in *items {
                        b.values().append_value(i);
                    }
                    b.append(true);
                }
            }
        }
        b.finish()
    }

    #[test]
    fn elements_convert_by_type() {
        let l = texts(&[Some(&["1", "2.7", "null", "\"3\"", "true"]), None]);
        let out = convert(&l, Element::Long).unwrap();
        let out = out.as_list::<i32>();
        let v = out.value(0);
        let v = v.as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(
            v.iter().collect::<Vec<_>>(),
            vec![Some(1), Some(2), None, Some(3), Some(1)]
        );
        assert!(out.is_null(1));
        let l = texts(&[
            Some(&["\"S1\"", "null", "1", "true"]),
            Some(&["\"S1\"", "[1]"]),
            Some(&["{\"a\": 1}"]),
        ]);
        let out = convert(&l, Element::Text).unwrap();
        let out = out.as_list::<i32>();
        let v = out.value(0);
        assert_eq!(
            v.as_string::<i32>().iter().collect::<Vec<_>>(),
            vec![Some("S1"), None, Some("1"), Some("true")]
        );
        // Not arrays of primitives: null.
        assert!(out.is_null(1) && out.is_null(2));
        let l = texts(&[Some(&["true", "0", "\"false\"", "\"x\""])]);
        let out = convert(&l, Element::Bool).unwrap();
        let v = out.as_list::<i32>().value(0);
        assert_eq!(
            v.as_boolean().iter().collect::<Vec<_>>(),
            vec![Some(true), Some(false), Some(false), None]
        );
        assert!(Element::parse("varchar").is_some());
        assert!(Element::parse("TIMESTAMP").is_none());
    }
}
