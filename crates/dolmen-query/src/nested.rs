//! `JSON_VALUE` over shredded sub-columns of nested JSON columns (ADR 0026), an analyzer rule.
//!
//! Segment files store each `COMPLEX<json>` column as JSON text plus one hidden typed column per
//! literal path ([`dolmen_segment::nested`]), and segment payloads list those paths. This rule
//! rewrites `JSON_VALUE(col, '<literal path>')` (and the casts `RETURNING` adds,
//! [`crate::rewrite`]) to read the sub-column instead of parsing every row's document, when
//! `col` is a JSON column of a datasource table and every segment and hydrant of the table that
//! holds `col` has the sub-column ([`DatasourceTable::nested_sub_column`]); otherwise the
//! expression is left as it is and reads the text. Only paths of object keys are shredded
//! (`$.a.b`, `$['a.b']`, `$`); a path with an array index always reads the text.
//!
//! | expression | sub-column `Utf8` | `Int64` | `Float64` |
//! |---|---|---|---|
//! | `JSON_VALUE(col, p)` | the column | `CAST(sub AS VARCHAR)` | Druid's `CONCAT(sub)` (Java's `Double.toString`); kept when some values were integers |
//! | `TRY_CAST(JSON_VALUE(col, p) AS DOUBLE)` (`RETURNING DOUBLE`, and inside `RETURNING BIGINT`) | `TRY_CAST(sub AS DOUBLE)` | `CAST(sub AS DOUBLE)` | the column |
//!
//! Each answer is the one the text gives: a row without the path, with `null`, an object or an
//! array there is null in both, and the sub-column holds the same text or number
//! `JSON_VALUE` reads (a number's text parses back to the same double).
//!
//! Where: the rule runs last among the analyzer rules (types are coerced), and rewrites the
//! expressions of a `Projection`, `Filter`, `Aggregate`, `Sort` or `Window` whose input reaches
//! the table scan through `Filter`, `Sort`, `Limit` and `SubqueryAlias` nodes (their output
//! schema is their input's, so the sub-column passes through them) and `Projection`s that pass
//! the JSON column through unchanged (`FROM (SELECT j, x FROM t)`, also `j AS k`: such a
//! projection gains the sub-column as one more output, which the rewritten node reads; any other
//! expression of the column, a join, a union or an aggregate in between leaves the text):
//! the scan's table
//! gains the sub-column in its schema ([`DatasourceTable::with_nested_column`]; `SELECT *` was
//! expanded before, so it never shows), and the expression becomes a reference to it, aliased
//! to the name it had (an aggregate's group keys are not aliased, so that grouping by the
//! sub-column is grouping by a scan column, which [`crate::dictionary`] aggregates by dictionary
//! id; a projection above the aggregate restores its output names). DataFusion's optimizer then pushes filters on it into the scan, where
//! they prune row groups and pages by the sub-column's statistics and, for string equalities,
//! use its value index ([`crate::index`]) as for any string column.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::catalog::TableProvider;
use datafusion::catalog::default_table_source::provider_as_source;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::expr::{Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Expr, Filter, LogicalPlan, LogicalPlanBuilder, Projection, ScalarUDF, SubqueryAlias,
    TableScanBuilder,
};
use datafusion::optimizer::AnalyzerRule;

use crate::functions::scalar::{
    DruidScalarUdf, ScalarFunction as DruidFunction, is_json_field, json_path_keys,
};
use crate::table::{DatasourceTable, NestedSubColumn};

/// The analyzer rule of the module docs.
#[derive(Debug, Default)]
pub struct NestedColumnsRule;

impl AnalyzerRule for NestedColumnsRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let schema = Arc::clone(plan.schema());
        let out = plan.transform_up_with_subqueries(rewrite_node)?;
        if !out.transformed || out.data.schema().fields().len() == schema.fields().len() {
            return Ok(out.data);
        }
        // A sub-column passed up through a Filter at the root: keep the root's columns.
        let columns = schema.columns().into_iter().map(Expr::Column);
        LogicalPlanBuilder::from(out.data).project(columns)?.build()
    }

    fn name(&self) -> &str {
        "druid_nested_columns"
    }
}

/// A `JSON_VALUE(column, 'literal path')` call: the column and the path's text.
fn json_value_call(e: &Expr) -> Option<(&Column, &str)> {
    let Expr::ScalarFunction(ScalarFunction { func, args }) = e else {
        return None;
    };
    if func.name() != "json_value" {
        return None;
    }
    match args.as_slice() {
        [
            Expr::Column(c),
            Expr::Literal(ScalarValue::Utf8(Some(p)), _),
        ] => Some((c, p)),
        _ => None,
    }
}

fn rewrite_node(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    if !matches!(
        node,
        LogicalPlan::Projection(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Aggregate(_)
            | LogicalPlan::Sort(_)
            | LogicalPlan::Window(_)
    ) {
        return Ok(Transformed::no(node));
    }
    let mut calls: Vec<(Column, String)> = Vec::new();
    for e in node.expressions() {
        e.apply(|x| {
            if let Some((c, p)) = json_value_call(x)
                && !calls.iter().any(|(c2, p2)| c2 == c && p2 == p)
            {
                calls.push((c.clone(), p.to_string()));
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })?;
    }
    if calls.is_empty() {
        return Ok(Transformed::no(node));
    }
    let mut input = node.inputs()[0].clone();
    let mut subs: HashMap<(Column, String), (Column, NestedSubColumn)> = HashMap::new();
    for (c, p) in calls {
        let Some(keys) = json_path_keys(&p) else {
            continue;
        };
        let Some(index) = input.schema().maybe_index_of_column(&c) else {
            continue;
        };
        if let Some((new_input, column, sub)) = with_sub_column(&input, index, &keys)? {
            input = new_input;
            subs.insert((c, p), (column, sub));
        }
    }
    if subs.is_empty() {
        return Ok(Transformed::no(node));
    }
    // Group keys are not aliased: an aggregate grouping by a bare scan column is one the
    // dictionary aggregation (crate::dictionary) recognises. A projection above restores the
    // aggregate's output names instead.
    let groups = match &node {
        LogicalPlan::Aggregate(a) => a.group_expr.len(),
        _ => 0,
    };
    let preserver = NamePreserver::new(&node);
    let exprs = node
        .expressions()
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let saved = preserver.save(&e);
            let out = e.transform_down(|x| replace(x, &subs))?;
            Ok(if out.transformed && i >= groups {
                saved.restore(out.data)
            } else {
                out.data
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let rewritten = node.with_new_exprs(exprs, vec![input])?;
    if groups == 0 {
        return Ok(Transformed::yes(rewritten));
    }
    let names: Vec<Expr> = node
        .schema()
        .iter()
        .zip(rewritten.schema().iter())
        .map(|((qualifier, field), (new_qualifier, new_field))| {
            Expr::Column(Column::new(new_qualifier.cloned(), new_field.name()))
                .alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    Ok(Transformed::yes(
        LogicalPlanBuilder::from(rewritten)
            .project(names)?
            .build()?,
    ))
}

/// The sub-column read in place of `e`, if `e` is a call (or a cast of one) that it answers.
fn replace(
    e: Expr,
    subs: &HashMap<(Column, String), (Column, NestedSubColumn)>,
) -> Result<Transformed<Expr>> {
    let lookup =
        |x: &Expr| json_value_call(x).and_then(|(c, p)| subs.get(&(c.clone(), p.to_string())));
    let column = |c: &Column| Expr::Column(c.clone());
    if let Expr::TryCast(TryCast { expr, field }) = &e
        && field.data_type() == &DataType::Float64
        && let Some((c, sub)) = lookup(expr)
    {
        return Ok(Transformed::yes(match sub.data_type {
            DataType::Float64 => column(c),
            DataType::Int64 => Expr::Cast(Cast::new(Box::new(column(c)), DataType::Float64)),
            _ => Expr::TryCast(TryCast::new(Box::new(column(c)), DataType::Float64)),
        }));
    }
    let Some((c, sub)) = lookup(&e) else {
        return Ok(Transformed::no(e));
    };
    Ok(match sub.data_type {
        DataType::Utf8 => Transformed::yes(column(c)),
        DataType::Int64 => {
            Transformed::yes(Expr::Cast(Cast::new(Box::new(column(c)), DataType::Utf8)))
        }
        DataType::Float64 if !sub.integers => {
            // Druid's CONCAT writes a double as Java's Double.toString, as JSON_VALUE does.
            let concat =
                ScalarUDF::new_from_impl(DruidScalarUdf::new("concat", DruidFunction::Concat));
            Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(concat),
                vec![column(c)],
            )))
        }
        _ => Transformed::no(e),
    })
}

/// `plan` rebuilt so that its output holds the sub-column at `keys` of its output column
/// `index` (a JSON column of a datasource table scan reached through schema-preserving nodes),
/// with the sub-column's reference in `plan`'s output; `None` when there is no such
/// sub-column.
fn with_sub_column(
    plan: &LogicalPlan,
    index: usize,
    keys: &[String],
) -> Result<Option<(LogicalPlan, Column, NestedSubColumn)>> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source)?;
            let Some(table) = provider.downcast_ref::<DatasourceTable>() else {
                return Ok(None);
            };
            let source_index = scan.projection.as_ref().map_or(index, |p| p[index]);
            let schema = TableProvider::schema(table);
            let field = schema.field(source_index);
            if !is_json_field(field) {
                return Ok(None);
            }
            let Some(sub) = table.nested_sub_column(field.name(), keys) else {
                return Ok(None);
            };
            let (table, sub_index) = table.with_nested_column(&sub);
            let projection = scan.projection.clone().map(|mut p| {
                if !p.contains(&sub_index) {
                    p.push(sub_index);
                }
                p
            });
            let new_scan =
                TableScanBuilder::new(scan.table_name.clone(), provider_as_source(Arc::new(table)))
                    .with_projection(projection)
                    .with_filters(scan.filters.clone())
                    .with_fetch(scan.fetch)
                    .with_statistics_requests(scan.statistics_requests.clone())
                    .build()?;
            let column = Column::new(Some(scan.table_name.clone()), &sub.name);
            Ok(Some((LogicalPlan::TableScan(new_scan), column, sub)))
        }
        LogicalPlan::Filter(f) => {
            let Some((input, column, sub)) = with_sub_column(&f.input, index, keys)? else {
                return Ok(None);
            };
            let filter = Filter::try_new(f.predicate.clone(), Arc::new(input))?;
            Ok(Some((LogicalPlan::Filter(filter), column, sub)))
        }
        LogicalPlan::SubqueryAlias(a) => {
            let Some((input, column, sub)) = with_sub_column(&a.input, index, keys)? else {
                return Ok(None);
            };
            let alias = SubqueryAlias::try_new(Arc::new(input), a.alias.clone())?;
            let column = Column::new(Some(a.alias.clone()), column.name);
            Ok(Some((LogicalPlan::SubqueryAlias(alias), column, sub)))
        }
        // A projection passing the JSON column through as it is (`SELECT j FROM t`, `j AS x`):
        // it also passes the sub-column (once, however many calls read it).
        LogicalPlan::Projection(p) => {
            let Some(inner) = (match p.expr.get(index) {
                Some(Expr::Column(c)) => Some(c),
                Some(Expr::Alias(a)) => match a.expr.as_ref() {
                    Expr::Column(c) => Some(c),
                    _ => None,
                },
                _ => None,
            }) else {
                return Ok(None);
            };
            let Some(inner_index) = p.input.schema().maybe_index_of_column(inner) else {
                return Ok(None);
            };
            let Some((input, column, sub)) = with_sub_column(&p.input, inner_index, keys)? else {
                return Ok(None);
            };
            let mut exprs = p.expr.clone();
            let passed = Expr::Column(column.clone());
            if !exprs.contains(&passed) {
                exprs.push(passed);
            }
            let projection = Projection::try_new(exprs, Arc::new(input))?;
            Ok(Some((LogicalPlan::Projection(projection), column, sub)))
        }
        LogicalPlan::Sort(_) | LogicalPlan::Limit(_) => {
            let Some((input, column, sub)) = with_sub_column(plan.inputs()[0], index, keys)? else {
                return Ok(None);
            };
            let rebuilt = plan.with_new_exprs(plan.expressions(), vec![input])?;
            Ok(Some((rebuilt, column, sub)))
        }
        _ => Ok(None),
    }
}
