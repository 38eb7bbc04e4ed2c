//! The internal functions that [`super::map_multi_value_expressions`] writes into queries and
//! [`super::MultiValueRule`] reads back. Their names start with `__mv_`; they are registered
//! with the Druid functions (so that the SQL planner resolves them) but are not Druid functions
//! and are not listed in `INFORMATION_SCHEMA.ROUTINES`.
//!
//! | Function | Planned type | Meaning |
//! |---|---|---|
//! | `__mv_bind(mv)` | the list | the values an expression is mapped over: the row's values, or one null for a null or empty row (Druid binds such a row as `[null]` when it maps an expression over it) |
//! | `__mv_key(list)` | the element type | a `GROUP BY` key whose values are the groups; [`super::MultiValueRule`] computes `list` below the aggregate and unnests it, so the call itself never runs |
//! | `__mv_result(list, 'text')` | multi-value VARCHAR | a mapped expression returned as a multi-value string (Druid renders it so); a plan error when the mapped values are not strings, naming the expression `text` |

use std::sync::Arc;

use arrow::array::{Array, AsArray, ListArray, UInt64Array};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// Name of the function binding a multi-value column's values (see the module docs).
pub(crate) const BIND: &str = "__mv_bind";
/// Name of the `GROUP BY` key marker (see the module docs).
pub(crate) const KEY: &str = "__mv_key";
/// Name of the multi-value result marker (see the module docs).
pub(crate) const RESULT: &str = "__mv_result";

/// The functions of the module docs, to register in a session.
pub fn udfs() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(MvBind::default()),
        ScalarUDF::new_from_impl(MvKey::default()),
        ScalarUDF::new_from_impl(MvResult::default()),
    ]
}

/// Whether `name` is one of the functions of this module.
pub(crate) fn is_internal(name: &str) -> bool {
    matches!(name, BIND | KEY | RESULT)
}

fn list_element(dt: &DataType, f: &str) -> Result<FieldRef> {
    match dt {
        DataType::List(e) => Ok(Arc::clone(e)),
        other => plan_err!("{f} takes a multi-value column (a list), got {other}"),
    }
}

/// `__mv_bind(mv)`: see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MvBind {
    signature: Signature,
}

impl Default for MvBind {
    fn default() -> Self {
        MvBind {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for MvBind {
    fn name(&self) -> &str {
        BIND
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        list_element(&arg_types[0], BIND)?;
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let Some(list) = array.as_list_opt::<i32>() else {
            return exec_err!("{BIND} takes a list, got {}", array.data_type());
        };
        // Indexes into the values: a row's own values, or one null index for a null or empty
        // row, which `take` turns into one null value.
        let offsets = list.value_offsets();
        let mut indexes: Vec<Option<u64>> = Vec::with_capacity(list.values().len());
        let mut lengths = Vec::with_capacity(list.len());
        for row in 0..list.len() {
            let (start, end) = (offsets[row], offsets[row + 1]);
            if list.is_null(row) || start == end {
                indexes.push(None);
                lengths.push(1);
            } else {
                indexes.extend((start..end).map(|i| Some(i as u64)));
                lengths.push((end - start) as usize);
            }
        }
        let values = arrow::compute::take(list.values(), &UInt64Array::from(indexes), None)?;
        let field = list_element(array.data_type(), BIND)?;
        Ok(ColumnarValue::Array(Arc::new(ListArray::try_new(
            field,
            OffsetBuffer::from_lengths(lengths),
            values,
            None,
        )?)))
    }
}

/// `__mv_key(list)`: see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MvKey {
    signature: Signature,
}

impl Default for MvKey {
    fn default() -> Self {
        MvKey {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for MvKey {
    fn name(&self) -> &str {
        KEY
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(list_element(&arg_types[0], KEY)?.data_type().clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // The multi-value rule replaces every `GROUP BY __mv_key(..)`; a call left elsewhere
        // would give a list where the plan expects one value.
        exec_err!(
            "{KEY} marks a multi-value GROUP BY key and is only valid as one (it reached execution)"
        )
    }
}

/// `__mv_result(list, 'text')`: see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MvResult {
    signature: Signature,
}

impl Default for MvResult {
    fn default() -> Self {
        MvResult {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

fn is_string_like(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => true,
        DataType::Dictionary(_, v) => is_string_like(v),
        _ => false,
    }
}

impl ScalarUDFImpl for MvResult {
    fn name(&self) -> &str {
        RESULT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(dolmen_segment::multi_value_string_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let element = list_element(args.arg_fields[0].data_type(), RESULT)?;
        if !is_string_like(element.data_type()) {
            let text = match args.scalar_arguments.get(1).copied().flatten() {
                Some(ScalarValue::Utf8(Some(s))) => s.as_str(),
                _ => "the expression",
            };
            return plan_err!(
                "{text} is applied to each value of a multi-value column and gives {} values, \
                 which Druid SQL can only return as a multi-value VARCHAR (Druid fails the query \
                 when it returns the rows: \"Cannot coerce field\"); cast it to VARCHAR, group by \
                 it or filter with it",
                element.data_type()
            );
        }
        Ok(Arc::new(crate::functions::arrays::multi_value_field(
            RESULT,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let target = dolmen_segment::multi_value_string_type();
        if array.data_type() == &target {
            return Ok(ColumnarValue::Array(array));
        }
        Ok(ColumnarValue::Array(arrow::compute::cast(&array, &target)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ListBuilder, StringBuilder};
    use arrow::datatypes::Field;
    use datafusion::config::ConfigOptions;

    #[test]
    fn bind_gives_null_and_empty_rows_one_null_value() {
        let mut b = ListBuilder::new(StringBuilder::new());
        b.values().append_value("a");
        b.values().append_value("b");
        b.append(true);
        b.append(true);
        b.append(false);
        b.values().append_value("c");
        b.append(true);
        let input: Arc<dyn Array> = Arc::new(b.finish());
        let field = Arc::new(Field::new("x", input.data_type().clone(), true));
        let out = MvBind::default()
            .invoke_with_args(ScalarFunctionArgs {
                args: vec![ColumnarValue::Array(Arc::clone(&input))],
                arg_fields: vec![Arc::clone(&field)],
                number_rows: 4,
                return_field: field,
                config_options: Arc::new(ConfigOptions::default()),
            })
            .unwrap()
            .to_array(4)
            .unwrap();
        let list = out.as_list::<i32>();
        let rows: Vec<Vec<Option<String>>> = (0..4)
            .map(|r| {
                let v = list.value(r);
                let s = v.as_string::<i32>();
                (0..s.len())
                    .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
                    .collect()
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                vec![Some("a".to_string()), Some("b".to_string())],
                vec![None],
                vec![None],
                vec![Some("c".to_string())],
            ]
        );
        assert_eq!(list.null_count(), 0);
    }
}
