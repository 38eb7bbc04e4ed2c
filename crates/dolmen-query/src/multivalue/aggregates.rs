//! Aggregate calls whose argument is a multi-value column ([`super::MultiValueRule`]).
//!
//! Druid's aggregators over a multi-value string dimension see each value of a row:
//! - `COUNT(DISTINCT mv)` counts the distinct values. Exact (`useApproximateCountDistinct`
//!   false), Druid plans it as a grouping on `mv` (which unnests it) and counts the non-null
//!   groups; Dolmen runs it as `__mv_count_distinct`, an exact count of the distinct non-null
//!   values of the lists. Approximate, it is `APPROX_COUNT_DISTINCT` (Druid's `cardinality`
//!   aggregator, whose `StringCardinalityAggregatorColumnSelectorStrategy` hashes every value of
//!   the row and skips nulls), which already adds each value of a list, as do the sketch
//!   aggregates (`APPROX_COUNT_DISTINCT_DS_HLL`, `APPROX_COUNT_DISTINCT_DS_THETA`, `DS_HLL`,
//!   `DS_THETA`: Druid's HLL and theta build aggregators update the sketch with every value).
//! - `COUNT(mv)` counts rows (not values), `ARRAY_CONCAT_AGG(mv)` concatenates the rows' lists:
//!   left as planned.
//! - Every other aggregate over a bare multi-value column (`MIN`, `MAX`, `EARLIEST`, `LATEST`,
//!   `ANY_VALUE`, `STRING_AGG`, `ARRAY_AGG`, ..) is a plan error naming the function and the
//!   column: DataFusion would aggregate whole lists, an answer Druid never gives (its
//!   `ARRAY_AGG(mv)` collects the values, a null row as one null:
//!   `CalciteArraysQueryTest.testArrayAggMultiValue`; its string `MIN`/`MAX`/first/last
//!   aggregators are not specified over several values). An aggregate over a scalar expression of
//!   the column (`MAX(UPPER(mv))`) is not mapped and fails when planned (a type error).

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, StringBuilder};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Expr, Signature, Volatility,
};

/// Name of the exact distinct count of the values of multi-value rows.
pub(crate) const MV_COUNT_DISTINCT: &str = "__mv_count_distinct";

/// Aggregates that take a bare multi-value column as it is (see the module docs).
const TAKE_LISTS: &[&str] = &[
    "count",
    "approx_count_distinct",
    "approx_count_distinct_ds_hll",
    "approx_count_distinct_ds_hll_utf8",
    "ds_hll",
    "approx_count_distinct_ds_theta",
    "ds_theta",
    "array_concat_agg",
    MV_COUNT_DISTINCT,
];

static COUNT_DISTINCT_UDAF: LazyLock<Arc<AggregateUDF>> = LazyLock::new(|| {
    Arc::new(AggregateUDF::new_from_impl(MvCountDistinct {
        signature: Signature::any(1, Volatility::Immutable),
    }))
});

/// One aggregate expression of an aggregate whose input has `schema`, rewritten as the module
/// docs say: `count(DISTINCT mv)` becomes [`MV_COUNT_DISTINCT`] (under the original name), an
/// aggregate that cannot take the column's lists is a plan error.
pub(crate) fn rewrite_aggregate_argument(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let (inner, alias) = match e {
        Expr::Alias(a) => (*a.expr, Some((a.relation, a.name, a.metadata))),
        other => (other, None),
    };
    let Expr::AggregateFunction(f) = inner else {
        return Ok(Transformed::no(rewrap(inner, alias)));
    };
    let Some(column) = f
        .params
        .args
        .iter()
        .find_map(|a| multi_value_column(a, schema))
    else {
        return Ok(Transformed::no(rewrap(Expr::AggregateFunction(f), alias)));
    };
    let name = f.func.name().to_ascii_lowercase();
    if name == "count" && f.params.distinct && f.params.args.len() == 1 {
        let original = Expr::AggregateFunction(f.clone()).schema_name().to_string();
        let mut params = f.params;
        params.distinct = false;
        let counted = Expr::AggregateFunction(AggregateFunction {
            func: Arc::clone(&COUNT_DISTINCT_UDAF),
            params,
        });
        let aliased = match alias {
            Some((relation, name, metadata)) => {
                counted.alias_qualified_with_metadata(relation, name, metadata)
            }
            None => counted.alias(original),
        };
        return Ok(Transformed::yes(aliased));
    }
    if TAKE_LISTS.contains(&name.as_str()) && !(name == "count" && f.params.distinct) {
        return Ok(Transformed::no(rewrap(Expr::AggregateFunction(f), alias)));
    }
    plan_err!(
        "{}({column}): aggregating a multi-value column is not supported by this function \
         (Druid's aggregators see each value of a row; Dolmen supports COUNT(DISTINCT), \
         APPROX_COUNT_DISTINCT and the HLL and theta sketch aggregates over it)",
        f.func.name().to_ascii_uppercase()
    )
}

fn rewrap(
    e: Expr,
    alias: Option<(
        Option<datafusion::common::TableReference>,
        String,
        Option<datafusion::common::metadata::FieldMetadata>,
    )>,
) -> Expr {
    match alias {
        Some((relation, name, metadata)) => {
            e.alias_qualified_with_metadata(relation, name, metadata)
        }
        None => e,
    }
}

/// The name of `e` when it is a column of `schema` holding multi-value lists (also through
/// the timestamp-to-milliseconds input wrapper of Druid's expression aggregations,
/// [`crate::functions::agg_size::input_udf`], which leaves lists alone).
fn multi_value_column(e: &Expr, schema: &DFSchema) -> Option<String> {
    let e = match e {
        Expr::ScalarFunction(sf)
            if sf.func.name() == crate::functions::agg_size::INPUT_NAME && sf.args.len() == 1 =>
        {
            &sf.args[0]
        }
        other => other,
    };
    let Expr::Column(c) = e else {
        return None;
    };
    let (_, f) = schema.qualified_field_from_column(c).ok()?;
    (f.metadata()
        .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
        && matches!(f.data_type(), DataType::List(_) | DataType::LargeList(_)))
    .then(|| c.name.clone())
}

/// `__mv_count_distinct(mv)`: the exact number of distinct non-null values of the rows' lists.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MvCountDistinct {
    signature: Signature,
}

impl AggregateUDFImpl for MvCountDistinct {
    fn name(&self) -> &str {
        MV_COUNT_DISTINCT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(DistinctValues::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new_list(
            format!("{}[values]", args.name),
            Field::new_list_field(DataType::Utf8, true),
            true,
        ))])
    }

    fn default_value(&self, _: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(0)))
    }
}

/// The distinct values seen so far.
#[derive(Debug, Default)]
struct DistinctValues {
    values: HashSet<String>,
    bytes: usize,
}

impl DistinctValues {
    /// Adds every non-null value of the valid rows of `lists`.
    fn add_lists(&mut self, lists: &ArrayRef) -> Result<()> {
        let (offsets, values): (Vec<(usize, usize)>, ArrayRef) = match lists.data_type() {
            DataType::Null => return Ok(()),
            DataType::List(_) => {
                let l = lists.as_list::<i32>();
                let o = l.value_offsets();
                (
                    (0..l.len())
                        .filter(|r| l.is_valid(*r))
                        .map(|r| (o[r] as usize, o[r + 1] as usize))
                        .collect(),
                    Arc::clone(l.values()),
                )
            }
            DataType::LargeList(_) => {
                let l = lists.as_list::<i64>();
                let o = l.value_offsets();
                (
                    (0..l.len())
                        .filter(|r| l.is_valid(*r))
                        .map(|r| (o[r] as usize, o[r + 1] as usize))
                        .collect(),
                    Arc::clone(l.values()),
                )
            }
            other => return exec_err!("{MV_COUNT_DISTINCT} takes lists, got {other}"),
        };
        let values = if values.data_type() == &DataType::Utf8 {
            values
        } else {
            cast(&values, &DataType::Utf8)?
        };
        let strings = values.as_string::<i32>();
        for (start, end) in offsets {
            for i in start..end {
                if strings.is_valid(i) {
                    let v = strings.value(i);
                    if !self.values.contains(v) {
                        self.bytes += v.len();
                        self.values.insert(v.to_owned());
                    }
                }
            }
        }
        Ok(())
    }
}

impl Accumulator for DistinctValues {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        match values.first() {
            Some(a) => self.add_lists(a),
            None => Ok(()),
        }
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(self.values.len() as i64)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.values.capacity() * std::mem::size_of::<String>()
            + self.bytes
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut b = ListBuilder::new(StringBuilder::new());
        for v in &self.values {
            b.values().append_value(v);
        }
        b.append(true);
        Ok(vec![ScalarValue::List(Arc::new(b.finish()))])
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

    fn lists(rows: &[Option<&[Option<&str>]>]) -> ArrayRef {
        let mut b = ListBuilder::new(StringBuilder::new());
        for row in rows {
            match row {
                Some(values) => {
                    for v in *values {
                        b.values().append_option(*v);
                    }
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        Arc::new(b.finish())
    }

    #[test]
    fn counts_distinct_values_of_lists_and_partials_merge() {
        let mut a = DistinctValues::default();
        a.update_batch(&[lists(&[
            Some(&[Some("a"), Some("b")]),
            None,
            Some(&[]),
            Some(&[Some("b"), None]),
        ])])
        .unwrap();
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Int64(Some(2)));
        let mut b = DistinctValues::default();
        b.update_batch(&[lists(&[Some(&[Some("c"), Some("a")])])])
            .unwrap();
        let ScalarValue::List(state) = &b.state().unwrap()[0] else {
            panic!()
        };
        let state: ArrayRef = state.clone();
        a.merge_batch(&[state]).unwrap();
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Int64(Some(3)));
        assert_eq!(
            DistinctValues::default().evaluate().unwrap(),
            ScalarValue::Int64(Some(0))
        );
    }
}
