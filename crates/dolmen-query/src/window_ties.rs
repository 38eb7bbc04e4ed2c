//! Ties of a window's `ORDER BY` broken as Druid breaks them: by the order of the window's
//! input, which for a grouped input is the order of its grouping keys.
//!
//! Druid's native engine reads a window's input in order (a `GROUP BY` result comes sorted by
//! its grouping keys, ascending, nulls first) and sorts it for the window with a stable sort, so
//! rows equal on the window's `PARTITION BY` and `ORDER BY` keep their input order. Row-based
//! results depend on it: in Druid's quidem `qaWin/basics_group_by`,
//! `ROW_NUMBER() OVER (PARTITION BY client_ip ORDER BY server_ip, timezone)` over rows grouped by
//! `server_ip, client_ip, timezone, TIME_FLOOR(__time, 'PT12H')` numbers the 00:00 row of a tie
//! 1 and the 12:00 row 2. DataFusion's sort is not stable (arrow's `lexsort_to_indices`) and
//! its hash aggregation has no order, so the same query numbered the tie either way.
//!
//! This analyzer rule appends the grouping keys of the nearest `GROUP BY` below a window (seen
//! through projections, filters, aliases, sorts, limits and other windows) to the `ORDER BY` of
//! each window function whose result depends on the order of peers, ascending with nulls first,
//! skipping keys the window already partitions or orders by:
//!
//! - `ROW_NUMBER`, `NTILE`, `LAG`, `LEAD` (they do not read a frame);
//! - any function over a `ROWS` frame (a frame counted in rows), except an aggregate over the
//!   whole partition (`ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING`), whose value
//!   no order changes.
//!
//! `RANK`-like functions and `RANGE`/`GROUPS` frames treat peers alike and are left alone (an
//! extra key would split their peer groups). A window over rows that are not grouped keeps
//! DataFusion's order: Druid's order there is its segments' row order, which Dolmen's segments
//! do not keep.
//!
//! The rewritten call keeps its output name (an alias of the original name), and a window node
//! whose calls now sort differently is split into one node per sort, with a projection
//! restoring the original column order (DataFusion's physical planner takes one sort per window
//! node).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult};
use datafusion::common::{Column, Result};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::{Sort, WindowFunction};
use datafusion::logical_expr::{
    Expr, LogicalPlan, LogicalPlanBuilder, Window, WindowFrameBound, WindowFrameUnits,
    WindowFunctionDefinition,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule of the module docs; the engine registers it after type coercion.
#[derive(Debug, Default)]
pub struct WindowTiesRule;

impl AnalyzerRule for WindowTiesRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Window(window) => rewrite_window(window),
            other => Ok(Transformed::no(other)),
        })
        .data()
    }

    fn name(&self) -> &str {
        "druid_window_ties"
    }
}

/// Window functions that number or offset rows without reading a frame.
const ROW_FUNCTIONS: &[&str] = &["row_number", "ntile", "lag", "lead"];

fn rewrite_window(window: Window) -> Result<Transformed<LogicalPlan>> {
    let Some(keys) = tie_keys(&window.input) else {
        return Ok(Transformed::no(LogicalPlan::Window(window)));
    };
    let mut changed = false;
    let mut exprs = Vec::with_capacity(window.window_expr.len());
    for e in &window.window_expr {
        match with_tie_keys(e, &keys) {
            Some(new) => {
                changed = true;
                exprs.push(new.alias(e.schema_name().to_string()));
            }
            None => exprs.push(e.clone()),
        }
    }
    if !changed {
        return Ok(Transformed::no(LogicalPlan::Window(window)));
    }
    // One window node per distinct sort, in first-seen order.
    let mut groups: Vec<(Vec<Expr>, Vec<Sort>, Vec<Expr>)> = Vec::new();
    for e in exprs {
        let (partition_by, order_by) = sort_of(&e);
        match groups
            .iter_mut()
            .find(|(p, o, _)| *p == partition_by && *o == order_by)
        {
            Some(g) => g.2.push(e),
            None => groups.push((partition_by, order_by, vec![e])),
        }
    }
    let mut builder = LogicalPlanBuilder::from(Arc::clone(&window.input));
    for (_, _, group) in groups {
        builder = builder.window(group)?;
    }
    let plan = builder.build()?;
    // The original column order, by name (window outputs are unqualified).
    let columns: Vec<Expr> = window
        .schema
        .iter()
        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
        .collect();
    let plan = LogicalPlanBuilder::from(plan).project(columns)?.build()?;
    Ok(Transformed::yes(plan))
}

/// The `PARTITION BY` and `ORDER BY` of a (possibly aliased) window call.
fn sort_of(e: &Expr) -> (Vec<Expr>, Vec<Sort>) {
    match e {
        Expr::Alias(a) => sort_of(&a.expr),
        Expr::WindowFunction(w) => (w.params.partition_by.clone(), w.params.order_by.clone()),
        _ => (Vec::new(), Vec::new()),
    }
}

/// `e` with `keys` appended to its `ORDER BY`, if its result depends on the order of peers and
/// some key is not already among its sort keys; `None` otherwise.
fn with_tie_keys(e: &Expr, keys: &[Expr]) -> Option<Expr> {
    // Type coercion wraps a call whose arguments it cast in an alias of its original name.
    let Expr::WindowFunction(w) = unaliased(e) else {
        return None;
    };
    let name = w.fun.name().to_ascii_lowercase();
    let row_function = matches!(w.fun, WindowFunctionDefinition::WindowUDF(_))
        && ROW_FUNCTIONS.contains(&name.as_str());
    let frame = &w.params.window_frame;
    let whole_partition = matches!(frame.start_bound, WindowFrameBound::Preceding(ref v) if v.is_null())
        && matches!(frame.end_bound, WindowFrameBound::Following(ref v) if v.is_null());
    let aggregate = matches!(w.fun, WindowFunctionDefinition::AggregateUDF(_));
    let rows_frame = frame.units == WindowFrameUnits::Rows && !(aggregate && whole_partition);
    if !row_function && !rows_frame {
        return None;
    }
    let mut params = w.params.clone();
    let mut added = false;
    for k in keys {
        if params.partition_by.contains(k) || params.order_by.iter().any(|s| &s.expr == k) {
            continue;
        }
        params.order_by.push(Sort::new(k.clone(), true, true));
        added = true;
    }
    if !added {
        return None;
    }
    Some(Expr::WindowFunction(Box::new(WindowFunction {
        fun: w.fun.clone(),
        params,
    })))
}

/// The grouping keys of the nearest `GROUP BY` under `plan`, as columns of `plan`'s output;
/// `None` when there is none or none of its keys reaches `plan`'s output.
fn tie_keys(plan: &LogicalPlan) -> Option<Vec<Expr>> {
    let keys = match plan {
        LogicalPlan::Aggregate(agg) => {
            if agg
                .group_expr
                .iter()
                .any(|g| matches!(g, Expr::GroupingSet(_)))
            {
                return None;
            }
            (0..agg.group_expr.len())
                .map(|i| {
                    let (q, f) = agg.schema.qualified_field(i);
                    Expr::Column(Column::new(q.cloned(), f.name()))
                })
                .collect()
        }
        LogicalPlan::Filter(f) => tie_keys(&f.input)?,
        LogicalPlan::Sort(s) => tie_keys(&s.input)?,
        LogicalPlan::Limit(l) => tie_keys(&l.input)?,
        LogicalPlan::Window(w) => tie_keys(&w.input)?,
        LogicalPlan::Repartition(r) => tie_keys(&r.input)?,
        LogicalPlan::Projection(p) => {
            let inner = tie_keys(&p.input)?;
            inner
                .iter()
                .filter_map(|k| {
                    let i = p.expr.iter().position(|e| unaliased(e) == k)?;
                    let (q, f) = p.schema.qualified_field(i);
                    Some(Expr::Column(Column::new(q.cloned(), f.name())))
                })
                .collect()
        }
        LogicalPlan::SubqueryAlias(a) => {
            let inner = tie_keys(&a.input)?;
            let input_schema = a.input.schema();
            inner
                .iter()
                .filter_map(|k| {
                    let Expr::Column(c) = k else { return None };
                    let i = input_schema.index_of_column(c).ok()?;
                    let (q, f) = a.schema.qualified_field(i);
                    Some(Expr::Column(Column::new(q.cloned(), f.name())))
                })
                .collect()
        }
        _ => return None,
    };
    (!keys.is_empty()).then_some(keys)
}

fn unaliased(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unaliased(&a.expr),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    /// The rows of `sql` as text, planned with DataFusion's analyzer rules then this module's,
    /// in one partition (the aggregation emits groups in first-seen order).
    async fn rows_of(sql: &str) -> Vec<Vec<String>> {
        let mut rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> =
            datafusion::optimizer::Analyzer::new().rules;
        rules.push(Arc::new(WindowTiesRule));
        let config = datafusion::prelude::SessionConfig::new().with_target_partitions(1);
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rules(rules)
            .build();
        let batches = SessionContext::new_with_state(state)
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        crate::test_support::rows_text(&batches)
    }

    /// Druid's quidem `qaWin/basics_group_by` shape: ties of the window's order numbered in
    /// grouping-key order, whatever order the aggregation produced.
    #[tokio::test]
    async fn row_number_ties_follow_the_grouping_keys() {
        let sql = "SELECT s, c, z, t, ROW_NUMBER() OVER (PARTITION BY c ORDER BY s, z) AS n \
                   FROM (VALUES ('a', 'x', 'E', 12), ('a', 'x', 'E', 0), ('a', 'x', 'N', 12), \
                   ('b', 'x', 'E', 0)) v(s, c, z, t) GROUP BY s, c, z, t ORDER BY s, z, t";
        let rows = rows_of(sql).await;
        assert_eq!(
            rows,
            vec![
                vec!["a", "x", "E", "0", "1"],
                vec!["a", "x", "E", "12", "2"],
                vec!["a", "x", "N", "12", "3"],
                vec!["b", "x", "E", "0", "4"],
            ]
        );
    }

    /// A call that type coercion aliased (its partition casts `length(z)` to a double) gets its
    /// ties broken too.
    #[tokio::test]
    async fn coerced_calls_are_rewritten_too() {
        let sql = "SELECT s, z, t, ROW_NUMBER() OVER (PARTITION BY cos(length(z)) \
                   ORDER BY s, cos(length(z))) AS n \
                   FROM (VALUES ('a', 'E', 12), ('a', 'E', 0), ('b', 'N', 1)) v(s, z, t) \
                   GROUP BY s, z, t ORDER BY s, t";
        assert_eq!(
            rows_of(sql).await,
            vec![
                vec!["a", "E", "0", "1"],
                vec!["a", "E", "12", "2"],
                vec!["b", "N", "1", "3"],
            ]
        );
    }

    /// A `RANGE` frame keeps its peers: the running sum of tied rows is the same.
    #[tokio::test]
    async fn range_frames_keep_their_peers() {
        let sql = "SELECT s, t, SUM(t) OVER (ORDER BY s) AS r, \
                   SUM(t) OVER (ORDER BY s ROWS UNBOUNDED PRECEDING) AS w \
                   FROM (VALUES ('a', 2), ('a', 1), ('b', 4)) v(s, t) GROUP BY s, t \
                   ORDER BY s, t";
        let rows = rows_of(sql).await;
        assert_eq!(
            rows,
            vec![
                vec!["a", "1", "3", "1"],
                vec!["a", "2", "3", "3"],
                vec!["b", "4", "7", "7"],
            ]
        );
    }
}
