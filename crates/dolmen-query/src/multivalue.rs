//! Druid's multi-value string semantics for SQL (`docs/querying/multi-value-dimensions.md`,
//! "Querying multi-value dimensions"), as a DataFusion analyzer rule and one AST rewrite.
//!
//! A multi-value string dimension reaches queries as a `List<Utf8>` column whose field carries
//! [`dolmen_segment::MULTI_VALUE_METADATA_KEY`] (see [`crate::table`]). Druid SQL treats such a
//! column as a `VARCHAR` whose row holds several values; [`MultiValueRule`] gives DataFusion the
//! same behaviour before type coercion sees a list compared with a string:
//!
//! | Druid SQL on a multi-value column `mv` | becomes | meaning |
//! |---|---|---|
//! | `GROUP BY mv` | unnest `mv` below the aggregate, an empty or null row as one null value | a row counts once per value (Druid's implicit unnesting) |
//! | `GROUP BY f(mv)`, `f` scalar | `GROUP BY array_transform(mv, __mv_value -> f(__mv_value))`, unnested the same way | `f` is applied to each value (Druid's implicit mapping); each result is a group |
//! | `WHERE mv = x` | `array_has(mv, x)` | any value matches |
//! | `WHERE mv <> x` | `NOT array_has(mv, x)` | no value matches |
//! | `WHERE mv IN (x, y)` / `NOT IN` | `array_has_any(mv, [x, y])` / `NOT ...` | any value is in the list |
//! | `WHERE mv IS NULL` / `IS NOT NULL` | `mv IS NULL OR cardinality(mv) = 0` / `cardinality(mv) > 0` | no values / some value |
//!
//! Filters match whole rows, so a row passing `WHERE mv = 'a'` still groups by all of its values,
//! as in Druid (use `MV_FILTER_ONLY` to keep only some). The rule rewrites `Filter` predicates
//! and `GROUP BY` keys that are multi-value columns or expressions returning multi-value strings
//! (the `MV_*` functions, `STRING_TO_MV`, and mapped keys, below), which are computed below the
//! aggregate and unnested the same way.
//!
//! ## Scalar expressions over a multi-value column as keys
//!
//! DataFusion's SQL planner types `UPPER(mv)` against `List<Utf8>` and fails (or, for `mv ||
//! 'x'`, plans an array append) before any analyzer rule runs, so these keys are rewritten in
//! the SQL AST, before planning, by [`map_multi_value_expressions`] (ADR 0013). For each
//! `SELECT` with a plain `GROUP BY` key (by expression, ordinal or alias) that names an
//! identifier and is not a bare column, the `FROM` clause is planned alone (`WITH <CTEs in
//! scope> SELECT * FROM ...`) to learn which columns are multi-value. A key that references
//! exactly one multi-value column, never inside a function taking whole arrays, becomes
//! `array_transform(mv, __mv_value -> key[mv := __mv_value])` (DataFusion's lambda function;
//! other columns of the row are captured), and so does every occurrence of the same expression
//! in the select list, `HAVING` and `ORDER BY` outside aggregate and window calls, so that they
//! name the key. The rule then unnests `array_transform` over a multi-value column like a
//! multi-value column: an empty or null row is one null group (the expression is not applied
//! to it, as Druid's grouping engine treats an empty row as null), and a row with several values
//! counts once in each of its groups.
//!
//! Functions taking whole arrays, whose multi-value arguments are never mapped: `MV_*`,
//! `ARRAY*`, `LIST_*`, `STRING_TO_MV`, `SCALAR_IN_ARRAY`, `CARDINALITY`, `EMPTY`, `FLATTEN`,
//! `UNNEST`, `MAKE_ARRAY`/`MAKE_LIST`, aggregates, window functions, array literals,
//! subscripts and subqueries. A key using the column both ways (`MV_LENGTH(mv) + LENGTH(mv)`)
//! is left as it is.
//!
//! Not covered (left as DataFusion plans them, usually a type error): expressions over two or
//! more multi-value columns (Druid maps the cartesian product); grouping sets; `SELECT
//! DISTINCT f(mv)` without `GROUP BY`; select items over a grouped key that are not the key
//! itself (`SELECT UPPER(mv) ... GROUP BY mv`, `SELECT f(mv) || '!' ... GROUP BY f(mv)`); scalar
//! expressions over `mv` outside `GROUP BY` (elsewhere the column stays a list and renders as
//! Druid's array text); and a `FROM` clause that does not plan alone (lateral references).
//! Several multi-value keys (`GROUP BY mv, UPPER(mv)`, or two multi-value columns) group by
//! every combination of their values, as Druid does.

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

mod functions;
mod mapping;

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
            let materialized = materialize_multi_value_keys(&a)?;
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
                return Ok(Transformed::no(LogicalPlan::Aggregate(a)));
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
            Ok(Transformed::yes(LogicalPlan::Aggregate(agg)))
        }
        other => Ok(Transformed::no(other)),
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
