//! `UNNEST` of a column of the table beside it: Druid's `FROM t CROSS JOIN UNNEST(t.arr) AS
//! u(x)` (also `FROM t, UNNEST(...)`, `JOIN UNNEST(...) ON TRUE`), planned without a
//! correlated subquery.
//!
//! DataFusion's SQL planner plans the `UNNEST` table factor over an empty one-row relation and
//! its argument's references to `t` as outer references, inside a `Subquery` on the right of a
//! join. No optimizer rule of DataFusion 55 decorrelates that shape, and the physical planner
//! rejects outer references ("Physical plan does not support logical expression
//! OuterReferenceColumn"). This analyzer rule rewrites
//!
//! ```text
//! Join(left = L, right = [SubqueryAlias u](Subquery(S)))     -- S: Projection/Unnest nodes over
//!                                                               EmptyRelation(one row), with
//!                                                               outer references to L
//! ```
//! into
//! ```text
//! Projection(L's columns, S's output columns qualified as u)
//!   S with its leaf replaced by L, every Projection also passing L's columns through, and
//!   every outer reference a plain column reference
//! ```
//! which is Druid's semantics of the lateral unnest (`docs/querying/sql.md#unnest`): each row
//! of `t` is repeated once per element of its array, with the element in `x`; rows whose array
//! is null or empty produce no rows (the unnest options of the table factor are kept). A join
//! condition (`ON ...`) becomes a filter above, for an inner join only; other join types keep
//! DataFusion's plan (and error).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, DFSchemaRef, Result};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    Expr, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, Subquery, SubqueryAlias, Unnest,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule of the module docs; the engine registers it first.
#[derive(Debug, Default)]
pub struct LateralUnnestRule;

impl AnalyzerRule for LateralUnnestRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let plan = plan.transform_up_with_subqueries(rewrite_join).data()?;
        refuse_multi_value_unnest(&plan)?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "druid_lateral_unnest"
    }
}

/// Druid types a multi-value string column as `VARCHAR`, which `UNNEST` does not take (Calcite:
/// "Cannot apply 'UNNEST' to arguments of type 'UNNEST(<VARCHAR>)'", quidem `qaUnnest`
/// `mv_sql_*`): the column goes through `MV_TO_ARRAY` first. Dolmen keeps such a column as a
/// list (marked [`dolmen_segment::MULTI_VALUE_METADATA_KEY`]), so without this check it would
/// unnest it silently.
fn refuse_multi_value_unnest(plan: &LogicalPlan) -> Result<()> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut found: Option<String> = None;
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Unnest(u) = node {
            for c in &u.exec_columns {
                if let Ok((_, f)) = u.input.schema().qualified_field_from_column(c)
                    && f.metadata()
                        .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
                {
                    found = Some(c.name.clone());
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    match found {
        Some(name) => datafusion::common::plan_err!(
            "Cannot apply 'UNNEST' to arguments of type 'UNNEST(<VARCHAR>)' ({name} is a \
             multi-value string column): unnest MV_TO_ARRAY(column) instead. Supported form(s): \
             'UNNEST(<MULTISET>)', 'UNNEST(<ARRAY>)'"
        ),
        None => Ok(()),
    }
}

fn rewrite_join(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(join) = &node else {
        return Ok(Transformed::no(node));
    };
    if join.join_type != JoinType::Inner || !join.on.is_empty() {
        return Ok(Transformed::no(node));
    }
    let (alias, sub) = match join.right.as_ref() {
        LogicalPlan::SubqueryAlias(SubqueryAlias { input, alias, .. }) => match input.as_ref() {
            LogicalPlan::Subquery(s) => (Some((alias.clone(), input.schema())), s),
            _ => return Ok(Transformed::no(node)),
        },
        LogicalPlan::Subquery(s) => (None, s),
        _ => return Ok(Transformed::no(node)),
    };
    if !is_unnest_over_one_row(&sub.subquery) {
        return Ok(Transformed::no(node));
    }
    let left = Arc::clone(&join.left);
    let left_columns: Vec<Column> = left.schema().columns();
    let mut top_names = Vec::new();
    let Some(inner) = relink(&sub.subquery, &left, &left_columns, Some(&mut top_names))? else {
        return Ok(Transformed::no(node));
    };
    // The join's output: L's columns as they were, then the unnest's, under the alias.
    let right_schema: &DFSchemaRef = join.right.schema();
    let sub_schema = sub.subquery.schema();
    let mut exprs: Vec<Expr> = left_columns.iter().cloned().map(Expr::Column).collect();
    for (i, (q, f)) in right_schema.iter().enumerate() {
        let source = match top_names.get(i) {
            // The top projection's outputs were given internal names (see `relink`).
            Some(name) => Expr::Column(Column::from_name(name)),
            None => {
                let (sq, sf) = sub_schema.qualified_field(i);
                Expr::Column(Column::from((sq, sf)))
            }
        };
        exprs.push(match (&alias, q) {
            (Some(_), Some(q)) => source.alias_qualified(Some(q.clone()), f.name()),
            _ => source.alias(f.name()),
        });
    }
    let mut builder = LogicalPlanBuilder::from(inner).project(exprs)?;
    if let Some(filter) = &join.filter {
        builder = builder.filter(filter.clone())?;
    }
    Ok(Transformed::yes(builder.build()?))
}

/// Whether `plan` is a chain of Projection / Unnest / SubqueryAlias nodes ending in an empty
/// one-row relation, with at least one Unnest.
fn is_unnest_over_one_row(plan: &LogicalPlan) -> bool {
    let mut unnest = false;
    let mut p = plan;
    loop {
        match p {
            LogicalPlan::Projection(x) => p = x.input.as_ref(),
            LogicalPlan::SubqueryAlias(x) => p = x.input.as_ref(),
            LogicalPlan::Unnest(x) => {
                unnest = true;
                p = x.input.as_ref();
            }
            LogicalPlan::EmptyRelation(e) => return unnest && e.produce_one_row,
            _ => return false,
        }
    }
}

/// `plan` rebuilt over `left` instead of its one-row leaf: outer references become column
/// references and every Projection also outputs `left_columns`. `None` when a node is not one
/// this rewrite knows.
///
/// When `top_names` is given and the top node is a Projection, its own outputs are named
/// `__lateral_unnest_<i>` (the names are pushed there): the user's alias of an element
/// (`UNNEST(a_int) AS u(s_int)`) may equal a column of `left` (`t.s_int`), and one projection
/// cannot output a qualified and an unqualified field of one name. The join's final
/// projection gives them their names back under the alias.
fn relink(
    plan: &LogicalPlan,
    left: &Arc<LogicalPlan>,
    left_columns: &[Column],
    top_names: Option<&mut Vec<String>>,
) -> Result<Option<LogicalPlan>> {
    Ok(Some(match plan {
        LogicalPlan::EmptyRelation(_) => left.as_ref().clone(),
        LogicalPlan::Projection(Projection { expr, input, .. }) => {
            let Some(input) = relink(input, left, left_columns, None)? else {
                return Ok(None);
            };
            let mut exprs: Vec<Expr> = left_columns.iter().cloned().map(Expr::Column).collect();
            let mut names = top_names;
            for (i, e) in expr.iter().enumerate() {
                let e = strip_outer_refs(e.clone())?;
                exprs.push(match names.as_deref_mut() {
                    Some(names) => {
                        let name = format!("__lateral_unnest_{i}");
                        names.push(name.clone());
                        e.alias(name)
                    }
                    None => e,
                });
            }
            LogicalPlanBuilder::from(input).project(exprs)?.build()?
        }
        LogicalPlan::Unnest(Unnest {
            input,
            exec_columns,
            options,
            ..
        }) => {
            let Some(input) = relink(input, left, left_columns, None)? else {
                return Ok(None);
            };
            LogicalPlanBuilder::from(input)
                .unnest_columns_with_options(exec_columns.clone(), options.clone())?
                .build()?
        }
        LogicalPlan::Subquery(Subquery { subquery, .. }) => {
            return relink(subquery, left, left_columns, top_names);
        }
        _ => return Ok(None),
    }))
}

/// `e` with every outer reference turned into a plain column reference.
fn strip_outer_refs(e: Expr) -> Result<Expr> {
    e.transform_up(|e| match e {
        Expr::OuterReferenceColumn(_, c) => Ok(Transformed::yes(Expr::Column(c))),
        e => Ok(Transformed::no(e)),
    })
    .data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, ListBuilder, RecordBatch, StringBuilder};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    fn ctx() -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let mut rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = vec![Arc::new(LateralUnnestRule)];
        rules.extend(datafusion::optimizer::Analyzer::new().rules);
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rules(rules)
            .build();
        let ctx = SessionContext::new_with_state(state);
        let schema = Arc::new(Schema::new(vec![
            Field::new("label", DataType::Utf8, true),
            Field::new(
                "arr",
                DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
                true,
            ),
            Field::new("n", DataType::Int64, true),
        ]));
        let mut b = ListBuilder::new(StringBuilder::new());
        for row in [
            Some(vec![Some("a"), Some("b")]),
            Some(vec![None, Some("b")]),
            Some(vec![]),
            None,
        ] {
            match row {
                Some(vs) => {
                    for v in vs {
                        b.values().append_option(v);
                    }
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(arrow::array::StringArray::from(vec![
                    "r1", "r2", "r3", "r4",
                ])),
                Arc::new(b.finish()),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
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

    async fn rows(sql: &str) -> Vec<String> {
        let batches = ctx().sql(sql).await.unwrap().collect().await.unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        text.lines()
            .filter(|l| l.starts_with('|'))
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    /// Each row repeats once per element; null and empty arrays give no rows; the outer
    /// columns and the alias resolve, qualified or not.
    #[tokio::test]
    async fn cross_join_unnest_of_a_column_repeats_rows_per_element() {
        let want = vec![
            "| r1 | a | 1 |",
            "| r1 | b | 1 |",
            "| r2 | | 2 |",
            "| r2 | b | 2 |",
        ];
        for sql in [
            "SELECT label, x, n FROM t CROSS JOIN UNNEST(t.arr) AS u(x) ORDER BY label, x NULLS FIRST",
            "SELECT t.label, u.x, t.n FROM t CROSS JOIN UNNEST(arr) AS u(x) ORDER BY 1, 2 NULLS FIRST",
            "SELECT label, x, n FROM t, UNNEST(t.arr) AS u(x) ORDER BY label, x NULLS FIRST",
        ] {
            assert_eq!(rows(sql).await, want, "{sql}");
        }
        assert_eq!(
            rows("SELECT x, COUNT(*) AS c FROM t CROSS JOIN UNNEST(t.arr) AS u(x) WHERE n > 1 GROUP BY x ORDER BY x NULLS FIRST").await,
            vec!["| | 1 |", "| b | 1 |"]
        );
        // The element's alias may be a column of the table too (quidem `qaUnnest`
        // `array_sql_col_general`: `unnest(a_int) AS u(s_int)` beside `test_unnest.s_int`).
        assert_eq!(
            rows("SELECT u.label, t.label FROM t, UNNEST(t.arr) AS u(label) ORDER BY 2, 1 NULLS FIRST").await,
            vec!["| a | r1 |", "| b | r1 |", "| | r2 |", "| b | r2 |"]
        );
        assert_eq!(
            rows("SELECT COUNT(*) AS c FROM t, UNNEST(arr) AS u(n)").await,
            vec!["| 4 |"]
        );
    }
}
