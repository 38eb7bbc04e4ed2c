//! Druid's multi-value string semantics for SQL (`docs/querying/multi-value-dimensions.md`;
//! `docs/querying/sql-data-types.md`, "Multi-value strings behavior"), as a DataFusion analyzer
//! rule ([`MultiValueRule`]) and an AST rewrite before planning
//! ([`map_multi_value_expressions`], ADR 0013 and ADR 0015).
//!
//! A multi-value string dimension reaches queries as a `List<Utf8>` column whose field carries
//! [`dolmen_segment::MULTI_VALUE_METADATA_KEY`] (see [`crate::table`]). Druid SQL treats such a
//! column as a `VARCHAR` whose row holds several values: grouping on it groups by each value
//! (implicit unnesting), a scalar expression over it is applied to each value (implicit
//! mapping), and a filter matches a row when any value matches. With `mv`, `mv2` multi-value
//! columns, `f`, `g` scalar expressions and `p` a predicate:
//!
//! | Druid SQL | becomes | meaning |
//! |---|---|---|
//! | `GROUP BY mv` | unnest `mv` below the aggregate, a null or empty row as one null value | a row counts once per value |
//! | `GROUP BY f(mv)` | `GROUP BY __mv_key(array_transform(__mv_bind(mv), v -> f(v)))`, unnested the same way | `f` applied to each value; each result is a group |
//! | `GROUP BY f(mv, mv2)` | `__mv_key(flatten(array_transform(__mv_bind(mv), v -> array_transform(__mv_bind(mv2), w -> f(v, w)))))` | `f` applied to every combination of values, the first column varying slowest (Druid's `cartesian_map`); one column used twice is one mapping |
//! | `SELECT g(mv) .. GROUP BY mv`, `SELECT g(f(mv)) .. GROUP BY f(mv)`, same in `HAVING` and `ORDER BY` | the key becomes `__mv_key(..)`, typed as one value, and `g` reads it | computed from the group's value (Druid's post-aggregation) |
//! | `SELECT DISTINCT items` without aggregates | `SELECT items GROUP BY 1, 2, ..` | as grouping by them |
//! | `SELECT f(mv)` without aggregates | `__mv_result(array_transform(__mv_bind(mv), v -> f(v)), 'f(mv)')` | a multi-value result (the writers give one value as itself, several as the JSON text of the list, as Druid) |
//! | `MV_TO_STRING(f(mv), ',')`, any function taking arrays over a mapped argument | `MV_TO_STRING(array_transform(..), ',')` | `f` applied to each value, then the function to the list |
//! | `WHERE mv = x` | `array_has(mv, x)` | any value matches |
//! | `WHERE mv <> x` | `NOT array_has(mv, x)` | no value matches |
//! | `WHERE mv IN (x, y)` / `NOT IN` | `array_has_any(mv, [x, y])` / `NOT ...` | any value is in the list |
//! | `WHERE mv IS NULL` / `IS NOT NULL` | `mv IS NULL OR cardinality(mv) = 0` / `cardinality(mv) > 0` | no values / some value |
//! | `COUNT(DISTINCT mv)` (exact) | `__mv_count_distinct(mv)` ([`aggregates`]), under the call's name | the number of distinct non-null values of all rows |
//! | `APPROX_COUNT_DISTINCT(mv)` (also `COUNT(DISTINCT mv)` when approximate), `APPROX_COUNT_DISTINCT_DS_HLL`/`_DS_THETA`, `DS_HLL`, `DS_THETA` | unchanged: the accumulators add each value of a list | every value is added to the sketch; null values and rows add nothing |
//! | `MIN(mv)`, `MAX(mv)`, `EARLIEST(mv)`, `ANY_VALUE(mv)`, `STRING_AGG(mv, ..)`, `ARRAY_AGG(mv)`, any other aggregate over a bare column but `COUNT(mv)` and `ARRAY_CONCAT_AGG(mv)` | a plan error naming the call | DataFusion would aggregate whole lists ([`aggregates`] says why no mapping) |
//! | `WHERE p(mv)`, any other predicate (`f(mv) = x`, `mv LIKE x`, `mv < x`, `mv BETWEEN ..`, `mv = mv2`, `COALESCE(mv, x) = y`, ..), also in an aggregate's `FILTER (WHERE ..)` | `array_any_match(__mv_bind(mv), v -> p(v))`, nested for several columns | any value (any combination) matches; `AND`, `OR` and `NOT` stay around the predicates, and a negated predicate (`<>`, `NOT IN`, `NOT LIKE`, `NOT BETWEEN`, `IS NOT NULL`, `IS NOT TRUE`, `IS DISTINCT FROM`, ..) is `NOT` of its positive form: no value matches |
//!
//! The first rows and the aggregate rows are [`MultiValueRule`]'s (the filter shapes: only in
//! `WHERE`); the others are
//! written by [`map_multi_value_expressions`] into the SQL AST, because DataFusion's SQL planner
//! types `UPPER(mv)` against `List<Utf8>` and fails (or, for `mv || 'x'`, plans an array append)
//! before any analyzer rule runs. [`mapping`] says which `SELECT`s it looks at and how it tells a
//! column used value by value from one used as an array. The rule then unnests `__mv_key(list)`
//! keys and keys returning multi-value strings (`MV_FILTER_ONLY(mv, ..)`, `STRING_TO_MV(..)`)
//! like multi-value columns, below the aggregate. The `__mv_*` functions are described in
//! [`functions`].
//!
//! Filters match whole rows, so a row passing `WHERE mv = 'a'` still groups by all of its values,
//! as in Druid (use `MV_FILTER_ONLY` to keep only some). Several multi-value keys (`GROUP BY mv,
//! UPPER(mv)`, or two columns) group by every combination of their values, as Druid's grouping
//! engine does. `MV_*` and `ARRAY_*` functions and aggregates see the whole row.
//!
//! Null and empty rows: an expression is mapped over a null or empty row as over one null value
//! (`__mv_bind`), as Druid binds such a row as `[null]` when it maps an expression
//! (`ExpressionSelectors.createBindings`, `homogenizeNullMultiValueStringArrays` when the plan
//! `NEEDS_APPLIED`; "If the row is null or empty, the function receives `NULL` as its input",
//! `sql-data-types.md`): `COALESCE(mv, 'none')` is `'none'` there, `UPPER(mv)` null. A grouped
//! key then puts the row in the group of `f(NULL)` once. Dolmen stores an ingested empty list as
//! null, so stored rows are never empty.
//!
//! Errors, at planning: a column used both as an array and value by value in one expression
//! (`MV_LENGTH(mv) + LENGTH(mv)`: Druid rejects it, "used as both scalar and array variables");
//! a mapped select item whose values are not strings (`SELECT mv = 'a'`, `CASE .. THEN 1 ..`:
//! Druid fails such a query when it returns the rows, "Cannot coerce field"); a subquery inside
//! a mapped expression; `SELECT DISTINCT *` over multi-value columns.
//!
//! Not covered (left as DataFusion plans them, a list or usually a type error): grouping sets
//! (`ROLLUP`, `CUBE`, `GROUPING SETS`) over multi-value keys; join conditions; arguments of
//! window calls; scalar expressions inside aggregate calls (`MAX(UPPER(mv))` is a type error,
//! `COUNT(DISTINCT UPPER(mv))` too); `COUNT(mv)` counts rows with a non-null list (Druid: rows
//! with a value); scalar functions over the result of a multi-value function
//! (`UPPER(MV_FILTER_ONLY(mv, ..))`); select items over a key that are not computed from the
//! key's own expression (matched as written, or for a column however it is qualified); a
//! `SELECT` whose `FROM` clause does not plan alone (lateral references). `mv <> x` and
//! `mv NOT IN (..)` through the rule count an empty row as having no value (true), where the
//! mapped predicates and Druid count it as unknown; only in-memory tables have empty rows.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, DFSchema, Result, UnnestOptions};
use datafusion::config::ConfigOptions;
use datafusion::functions_nested::expr_fn::{array_has, array_has_any, cardinality, make_array};
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Operator, lit, when,
};
use datafusion::optimizer::AnalyzerRule;

pub mod aggregates;
pub mod functions;
pub mod mapping;

pub use functions::udfs;
pub use mapping::map_multi_value_expressions;

/// The analyzer rule described in the module docs. Register it before DataFusion's type
/// coercion (the engine puts it first).
#[derive(Debug, Default)]
pub struct MultiValueRule;

impl AnalyzerRule for MultiValueRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(rewrite_node).data()
    }

    fn name(&self) -> &str {
        "druid_multi_value"
    }
}

/// Whether `e` is a column of `schema` marked multi-value.
fn is_multi_value(e: &Expr, schema: &DFSchema) -> bool {
    let Expr::Column(c) = e else {
        return false;
    };
    schema.qualified_field_from_column(c).is_ok_and(|(_, f)| {
        f.metadata()
            .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
    })
}

fn rewrite_node(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    match node {
        LogicalPlan::Filter(f) => {
            let schema = Arc::clone(f.input.schema());
            let rewritten = f
                .predicate
                .clone()
                .transform_up(|e| rewrite_predicate(e, &schema))?;
            if !rewritten.transformed {
                return Ok(Transformed::no(LogicalPlan::Filter(f)));
            }
            let filter = Filter::try_new(rewritten.data, f.input)?;
            Ok(Transformed::yes(LogicalPlan::Filter(filter)))
        }
        LogicalPlan::Aggregate(a) => {
            let keyed = unnest_multi_value_keys(a)?;
            let arguments = rewrite_aggregate_arguments(keyed.data)?;
            Ok(Transformed::new(
                LogicalPlan::Aggregate(arguments.data),
                keyed.transformed || arguments.transformed,
                datafusion::common::tree_node::TreeNodeRecursion::Continue,
            ))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// The aggregate expressions of `a` over multi-value columns of its input, rewritten as
/// [`aggregates`] says (after [`unnest_multi_value_keys`], so that an unnested key is one value).
fn rewrite_aggregate_arguments(a: Aggregate) -> Result<Transformed<Aggregate>> {
    let schema = Arc::clone(a.input.schema());
    let mut transformed = false;
    let mut aggr_expr = Vec::with_capacity(a.aggr_expr.len());
    for e in &a.aggr_expr {
        let t = aggregates::rewrite_aggregate_argument(e.clone(), &schema)?;
        transformed |= t.transformed;
        aggr_expr.push(t.data);
    }
    if !transformed {
        return Ok(Transformed::no(a));
    }
    Ok(Transformed::yes(Aggregate::try_new(
        a.input,
        a.group_expr,
        aggr_expr,
    )?))
}

/// `a` with its multi-value keys unnested below it (the `GROUP BY` rows of the module docs).
fn unnest_multi_value_keys(a: Aggregate) -> Result<Transformed<Aggregate>> {
    {
        {
            let materialized = materialize_multi_value_keys(&a)?;
            let changed = materialized.is_some();
            let a = materialized.unwrap_or(a);
            let schema = Arc::clone(a.input.schema());
            let unnest: Vec<Column> = a
                .group_expr
                .iter()
                .filter(|e| is_multi_value(e, &schema))
                .filter_map(|e| match e {
                    Expr::Column(c) => Some(c.clone()),
                    _ => None,
                })
                .collect();
            if unnest.is_empty() {
                return Ok(Transformed::new_transformed(a, changed));
            }
            // Empty lists become null so that unnesting keeps the row as one null value.
            let projection: Vec<Expr> = schema
                .iter()
                .map(|(q, f)| {
                    let c = Column::new(q.cloned(), f.name());
                    if unnest.contains(&c) {
                        let col = Expr::Column(c);
                        when(cardinality(col.clone()).gt(lit(0u64)), col)
                            .end()
                            .map(|e| e.alias_qualified(q.cloned(), f.name()))
                    } else {
                        Ok(Expr::Column(c))
                    }
                })
                .collect::<Result<_>>()?;
            // One unnest per key: several multi-value keys give every combination of their
            // values (Druid's cartesian product), not the values paired by position.
            let mut builder =
                LogicalPlanBuilder::from(Arc::unwrap_or_clone(a.input)).project(projection)?;
            for c in &unnest {
                builder = builder.unnest_columns_with_options(
                    vec![c.clone()],
                    UnnestOptions::new().with_preserve_nulls(true),
                )?;
            }
            let unnested = builder.build()?;
            // Unnest outputs the values unqualified; give them back the column's qualifier so
            // the aggregate's keys still resolve.
            let requalify: Vec<Expr> = unnested
                .schema()
                .iter()
                .map(|(q, f)| {
                    let c = Column::new(q.cloned(), f.name());
                    match unnest.iter().find(|u| q.is_none() && u.name == *f.name()) {
                        Some(u) if u.relation.is_some() => {
                            Expr::Column(c).alias_qualified(u.relation.clone(), f.name())
                        }
                        _ => Expr::Column(c),
                    }
                })
                .collect();
            let input = LogicalPlanBuilder::from(unnested)
                .project(requalify)?
                .build()?;
            let agg = Aggregate::try_new(Arc::new(input), a.group_expr, a.aggr_expr)?;
            Ok(Transformed::yes(agg))
        }
    }
}

/// For `GROUP BY` keys that are expressions returning multi-value strings (`MV_FILTER_ONLY(tags,
/// ...)`, `STRING_TO_MV(...)`) or `__mv_key(list)` markers ([`functions`]): an aggregate whose
/// input also computes each such key's list as a column named like the key expression, marked
/// multi-value, grouped by that column, so that the key is unnested like a multi-value column.
/// `None` when no key needs it.
fn materialize_multi_value_keys(a: &Aggregate) -> Result<Option<Aggregate>> {
    let schema = Arc::clone(a.input.schema());
    let marker =
        datafusion::common::metadata::FieldMetadata::from(std::collections::BTreeMap::from([(
            dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
            "true".to_string(),
        )]));
    let mut extra = Vec::new();
    let mut keys = Vec::with_capacity(a.group_expr.len());
    for e in &a.group_expr {
        let list = match e {
            Expr::ScalarFunction(f) if f.func.name() == functions::KEY => Some(&f.args[0]),
            Expr::Column(_) | Expr::GroupingSet(_) => None,
            _ => {
                let (_, field) = e.to_field(&schema)?;
                (field
                    .metadata()
                    .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
                    && matches!(
                        field.data_type(),
                        datafusion::arrow::datatypes::DataType::List(_)
                    ))
                .then_some(e)
            }
        };
        match list {
            Some(list) => {
                let name = e.schema_name().to_string();
                extra.push(
                    list.clone()
                        .alias_with_metadata(&name, Some(marker.clone())),
                );
                keys.push(Expr::Column(Column::from_name(name)));
            }
            None => keys.push(e.clone()),
        }
    }
    if extra.is_empty() {
        return Ok(None);
    }
    let mut projection: Vec<Expr> = schema
        .iter()
        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
        .collect();
    projection.extend(extra);
    let input = LogicalPlanBuilder::from(a.input.as_ref().clone())
        .project(projection)?
        .build()?;
    Ok(Some(Aggregate::try_new(
        Arc::new(input),
        keys,
        a.aggr_expr.clone(),
    )?))
}

/// One predicate node over a multi-value column, rewritten as the module docs say.
fn rewrite_predicate(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Eq | Operator::NotEq)
                && (is_multi_value(&left, schema) != is_multi_value(&right, schema)) =>
        {
            let (mv, value) = if is_multi_value(&left, schema) {
                (*left, *right)
            } else {
                (*right, *left)
            };
            let has = array_has(mv, value);
            Ok(Transformed::yes(if op == Operator::Eq {
                has
            } else {
                !has
            }))
        }
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if is_multi_value(&expr, schema) => {
            let any = array_has_any(*expr, make_array(list));
            Ok(Transformed::yes(if negated { !any } else { any }))
        }
        Expr::IsNull(inner) if is_multi_value(&inner, schema) => Ok(Transformed::yes(
            inner
                .clone()
                .is_null()
                .or(cardinality(*inner).eq(lit(0u64))),
        )),
        Expr::IsNotNull(inner) if is_multi_value(&inner, schema) => {
            Ok(Transformed::yes(cardinality(*inner).gt(lit(0u64))))
        }
        other => Ok(Transformed::no(other)),
    }
}

#[cfg(test)]
mod tests;
