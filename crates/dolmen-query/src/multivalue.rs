//! Druid's multi-value string semantics for SQL (`docs/querying/multi-value-dimensions.md`,
//! "Querying multi-value dimensions"), as a DataFusion analyzer rule.
//!
//! A multi-value string dimension reaches queries as a `List<Utf8>` column whose field carries
//! [`dolmen_segment::MULTI_VALUE_METADATA_KEY`] (see [`crate::table`]). Druid SQL treats such a
//! column as a `VARCHAR` whose row holds several values; [`MultiValueRule`] gives DataFusion the
//! same behaviour before type coercion sees a list compared with a string:
//!
//! | Druid SQL on a multi-value column `mv` | becomes | meaning |
//! |---|---|---|
//! | `GROUP BY mv` | unnest `mv` below the aggregate, an empty or null row as one null value | a row counts once per value (Druid's implicit unnesting) |
//! | `WHERE mv = x` | `array_has(mv, x)` | any value matches |
//! | `WHERE mv <> x` | `NOT array_has(mv, x)` | no value matches |
//! | `WHERE mv IN (x, y)` / `NOT IN` | `array_has_any(mv, [x, y])` / `NOT ...` | any value is in the list |
//! | `WHERE mv IS NULL` / `IS NOT NULL` | `mv IS NULL OR cardinality(mv) = 0` / `cardinality(mv) > 0` | no values / some value |
//!
//! Filters match whole rows, so a row passing `WHERE mv = 'a'` still groups by all of its values,
//! as in Druid (use `MV_FILTER_ONLY` to keep only some). The rule rewrites `Filter` predicates
//! and `GROUP BY` keys that are multi-value columns or expressions returning multi-value strings
//! (the `MV_*` functions, `STRING_TO_MV`), which are computed below the aggregate and unnested
//! the same way. Not rewritten: grouping sets, and scalar expressions over `mv` such as
//! `UPPER(mv)` (Druid maps them over each value); elsewhere the column stays a list and renders
//! as Druid's array text.

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
            let unnested = LogicalPlanBuilder::from(Arc::unwrap_or_clone(a.input))
                .project(projection)?
                .unnest_columns_with_options(
                    unnest.clone(),
                    UnnestOptions::new().with_preserve_nulls(true),
                )?
                .build()?;
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
/// ...)`, `STRING_TO_MV(...)`): an aggregate whose input also computes each such key as a
/// column named like the expression, grouped by that column, so that the key is unnested like a
/// multi-value column. `None` when no key needs it.
fn materialize_multi_value_keys(a: &Aggregate) -> Result<Option<Aggregate>> {
    let schema = Arc::clone(a.input.schema());
    let mut extra = Vec::new();
    let mut keys = Vec::with_capacity(a.group_expr.len());
    for e in &a.group_expr {
        if !matches!(e, Expr::Column(_) | Expr::GroupingSet(_)) {
            let (_, field) = e.to_field(&schema)?;
            if field
                .metadata()
                .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
                && matches!(
                    field.data_type(),
                    datafusion::arrow::datatypes::DataType::List(_)
                )
            {
                let name = e.schema_name().to_string();
                extra.push(e.clone().alias(&name));
                keys.push(Expr::Column(Column::from_name(name)));
                continue;
            }
        }
        keys.push(e.clone());
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
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow::array::{Array, AsArray, Int64Array, ListBuilder, RecordBatch, StringBuilder};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    fn ctx() -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let mut rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = vec![Arc::new(MultiValueRule)];
        rules.extend(datafusion::optimizer::Analyzer::new().rules);
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rules(rules)
            .build();
        let ctx = SessionContext::new_with_state(state);
        crate::functions::register_druid_functions(&ctx);
        let schema = Arc::new(Schema::new(vec![
            Field::new("tags", dolmen_segment::multi_value_string_type(), true).with_metadata(
                HashMap::from([(
                    dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
                    "true".to_string(),
                )]),
            ),
            Field::new("n", DataType::Int64, true),
        ]));
        let mut b = ListBuilder::new(StringBuilder::new());
        for row in [vec!["a", "b"], vec!["b", "c"], vec![], vec!["a"]] {
            for v in row {
                b.values().append_value(v);
            }
            b.append(true);
        }
        b.append(false);
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(b.finish()),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
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

    /// Rows of `sql`, every cell cast to text (`null` for nulls).
    async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let mut out = Vec::new();
        for b in batches {
            for r in 0..b.num_rows() {
                out.push(
                    b.columns()
                        .iter()
                        .map(|c| {
                            if c.is_null(r) {
                                "null".to_string()
                            } else {
                                let s = arrow::compute::cast(c, &DataType::Utf8).unwrap();
                                s.as_string::<i32>().value(r).to_string()
                            }
                        })
                        .collect(),
                );
            }
        }
        out
    }

    // Rows: n=1 [a, b]; n=2 [b, c]; n=3 []; n=4 [a]; n=5 null.

    #[tokio::test]
    async fn group_by_unnests_values_and_empty_rows_group_as_null() {
        let ctx = ctx();
        assert_eq!(
            rows(
                &ctx,
                "SELECT tags, COUNT(*), SUM(n) FROM t GROUP BY tags ORDER BY tags NULLS FIRST"
            )
            .await,
            vec![
                vec!["null", "2", "8"],
                vec!["a", "2", "5"],
                vec!["b", "2", "3"],
                vec!["c", "1", "2"],
            ]
        );
        // A filter keeps whole rows: row 1 matches `a` and still groups under `b` too.
        assert_eq!(
            rows(
                &ctx,
                "SELECT tags, COUNT(*) FROM t WHERE tags = 'a' GROUP BY tags ORDER BY tags"
            )
            .await,
            vec![vec!["a", "2"], vec!["b", "1"]]
        );
    }

    #[tokio::test]
    async fn group_by_multi_value_expressions_unnests_their_values() {
        let ctx = ctx();
        assert_eq!(
            rows(
                &ctx,
                "SELECT MV_FILTER_ONLY(tags, ARRAY['a', 'c']) AS f, COUNT(*) AS c FROM t \
                 GROUP BY 1 ORDER BY 1 NULLS FIRST"
            )
            .await,
            vec![vec!["null", "2"], vec!["a", "2"], vec!["c", "1"]]
        );
        assert_eq!(
            rows(
                &ctx,
                "SELECT STRING_TO_MV('x,y', ','), SUM(n) FROM t GROUP BY 1 ORDER BY 1"
            )
            .await,
            vec![vec!["x", "15"], vec!["y", "15"]]
        );
    }

    #[tokio::test]
    async fn filters_match_any_value() {
        let ctx = ctx();
        let ns = |sql: &'static str| {
            let ctx = ctx.clone();
            async move {
                rows(&ctx, sql)
                    .await
                    .into_iter()
                    .map(|r| r[0].clone())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            ns("SELECT n FROM t WHERE tags = 'b' ORDER BY n").await,
            ["1", "2"]
        );
        assert_eq!(
            ns("SELECT n FROM t WHERE 'c' = tags ORDER BY n").await,
            ["2"]
        );
        assert_eq!(
            ns("SELECT n FROM t WHERE tags <> 'a' ORDER BY n").await,
            ["2", "3"]
        );
        assert_eq!(
            ns("SELECT n FROM t WHERE tags IN ('c', 'a') ORDER BY n").await,
            ["1", "2", "4"]
        );
        assert_eq!(
            ns("SELECT n FROM t WHERE tags NOT IN ('a') ORDER BY n").await,
            ["2", "3"]
        );
        assert_eq!(
            ns("SELECT n FROM t WHERE tags IS NULL ORDER BY n").await,
            ["3", "5"]
        );
        assert_eq!(
            ns("SELECT n FROM t WHERE tags IS NOT NULL ORDER BY n").await,
            ["1", "2", "4"]
        );
        // Inside a subquery too.
        assert_eq!(
            ns("SELECT n FROM t WHERE n IN (SELECT n FROM t WHERE tags = 'c')").await,
            ["2"]
        );
    }
}
