//! Queries Druid's validator rejects that DataFusion would run ([`validate_statement`], a check
//! of the SQL AST before planning). Each is a plan error (400) with Druid's message.
//!
//! - `DESC NULLS FIRST` and `ASC NULLS LAST` (`ORDER BY`, window and aggregate orderings): Druid
//!   sorts NULL first ascending and last descending and supports no other placement
//!   (`DruidSqlValidator.validateCall`: "DESCENDING ordering with NULLS FIRST is not
//!   supported!", "ASCENDING ordering with NULLS LAST is not supported!"). The placements it
//!   supports are its defaults (`datafusion.sql_parser.default_null_ordering = nulls_min`, see
//!   [`crate::engine`]).
//! - An empty array constructor, `ARRAY[]`: Calcite's array value constructor takes at least
//!   one element (`SqlOperator.checkOperandCount`: "Invalid number of arguments to function
//!   'ARRAY'. Was expecting 1 arguments"), and nothing would give the array its type.
//! - `FIRST_VALUE`/`LAST_VALUE` over a frame with an offset bound (`ROWS 1 PRECEDING`, even
//!   `0 FOLLOWING`): "Framing of FIRST_VALUE/LAST_VALUE is only allowed with UNBOUNDED or
//!   CURRENT ROW" (quidem `qaWin/orderby_rows_*_first_last`).
//! - An aggregate in the keys of a named window (`WINDOW w AS (PARTITION BY COUNT(*))`):
//!   Druid's planner refuses it ("Aggregation inside window is currently not supported with
//!   syntax WINDOW W AS <DEF>. ..."), though it takes the same keys in `OVER (...)`.
//! - `RANK`, `DENSE_RANK`, `PERCENT_RANK`, `CUME_DIST` and `NTILE` over a window without
//!   `ORDER BY` (`PERCENT_RANK() OVER ()`): Calcite's ranking functions require one
//!   (`SqlWindow.validate`, `RESOURCE.funcNeedsOrderBy`: "RANK or DENSE_RANK functions require
//!   ORDER BY clause in window specification"), over an inline or a named window.
//!
//! And checks of the planned query ([`validate_plan`], types known):
//!
//! - An ordering comparison, `BETWEEN` or `LIKE` with a `COMPLEX<json>` operand: Calcite has
//!   no ordering for Druid's JSON type ("Cannot apply '<' to arguments of type
//!   '<COMPLEX<JSON>> < <COMPLEX<JSON>>'", Druid's quidem `qaJsonCols`). Equality is allowed.
//!
//! - A multi-value string (a multi-value column, `STRING_TO_MV(..)`, `ARRAY_TO_MV(..)`) as a
//!   window's `PARTITION BY` or `ORDER BY` key: Druid's window processing refuses it ("Window
//!   processing does not support MVDs. Consider using UNNEST or MV_TO_ARRAY.", quidem
//!   `qaWin/basics_data_types_and_exprs`).
//!
//! - A join whose condition compares arrays or `COMPLEX<json>` values (`ON t1.a_int =
//!   t2.a_int` over `ARRAY<LONG>` columns): Druid's join matchers read only scalar values
//!   (`IndexedTableJoinMatcher`, `docs/querying/datasource.md`, "join condition on a
//!   multi-valued column" is unsupported), and Druid's planner refuses such a query; its quidem
//!   corpus (`qaArray/sql_join.*`) expects an error containing "not support" for every such
//!   join; so is `x IN (SELECT a ...)` over such values, which Druid plans as a join.
//!   A cross join filtered by such an equality (`FROM t1, t2 WHERE t1.c = t2.c`) is a join
//!   too. Conditions over scalar expressions of arrays (`ARRAY_TO_STRING(a, ',') = ...`) are
//!   joins like any other.

use std::ops::ControlFlow;

use arrow::datatypes::{DataType, Field};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError, Result};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr as PlanExpr, ExprSchemable, LogicalPlan, Operator,
};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArgumentClause, FunctionArguments, NamedWindowExpr, OrderByExpr, OrderByKind,
    Query, Select, Visit, Visitor, WindowType,
};

/// Checks `stmt` for the constructs of the module docs.
///
/// # Errors
/// A plan error with Druid's message for the first one found.
pub fn validate_statement<V: Visit>(stmt: &V) -> Result<()> {
    match stmt.visit(&mut Checks) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Checks the planned `plan` (and its subqueries) for the join conditions and the
/// `COMPLEX<json>` operators of the module docs.
///
/// # Errors
/// A plan error naming the type Druid cannot join on, or Calcite's "Cannot apply ..." message.
pub fn validate_plan(plan: &LogicalPlan) -> Result<()> {
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Join(join) = node {
            let schema = join.schema.as_ref();
            for (l, r) in &join.on {
                check_join_operand(l, schema)?;
                check_join_operand(r, schema)?;
            }
            if let Some(filter) = &join.filter {
                for conjunct in split_conjunction(filter) {
                    if let PlanExpr::BinaryExpr(BinaryExpr {
                        left,
                        op: Operator::Eq | Operator::IsNotDistinctFrom,
                        right,
                    }) = conjunct
                    {
                        check_join_operand(left, schema)?;
                        check_join_operand(right, schema)?;
                    }
                }
            }
        }
        // `FROM t1, t2 WHERE t1.c = t2.c`: a cross join filtered by equalities is a join to
        // Druid's planner ("Cannot join" for such values).
        if let LogicalPlan::Filter(filter) = node
            && let LogicalPlan::Join(join) = filter.input.as_ref()
            && join.on.is_empty()
            && join.filter.is_none()
        {
            let schema = join.schema.as_ref();
            for conjunct in split_conjunction(&filter.predicate) {
                if let PlanExpr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Eq | Operator::IsNotDistinctFrom,
                    right,
                }) = conjunct
                    && !left.column_refs().is_empty()
                    && !right.column_refs().is_empty()
                {
                    check_join_operand(left, schema)?;
                    check_join_operand(right, schema)?;
                }
            }
        }
        if let LogicalPlan::Window(window) = node {
            check_window_keys(&window.window_expr, window.input.schema())?;
        }
        let input_schema = datafusion::logical_expr::utils::merge_schema(&node.inputs());
        // `x IN (SELECT ...)` is a join on `x` to Druid's planner.
        node.apply_expressions(|e| {
            e.apply(|e| {
                check_json_operator(e, &input_schema)?;
                if let PlanExpr::InSubquery(s) = e
                    && let Some(field) = s.subquery.subquery.schema().fields().first()
                    && let Some(type_name) = unjoinable_type(field)
                {
                    return Err(DataFusionError::Plan(format!(
                        "Join conditions on a value of type [{type_name}] are not supported: \
                         Druid joins on scalar values only (IN subquery of [{}])",
                        s.expr
                    )));
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(TreeNodeRecursion::Continue)
    })
    .map(|_| ())
}

/// Druid's refusal of a multi-value string as a window's partitioning or ordering key
/// (quidem `qaWin/basics_data_types_and_exprs`: `PARTITION BY STRING_TO_MV('1,2,3', ',')`).
fn check_window_keys(window_expr: &[PlanExpr], schema: &DFSchema) -> Result<()> {
    for e in window_expr {
        let mut e = e;
        while let PlanExpr::Alias(a) = e {
            e = &a.expr;
        }
        let PlanExpr::WindowFunction(w) = e else {
            continue;
        };
        let keys = w
            .params
            .partition_by
            .iter()
            .chain(w.params.order_by.iter().map(|s| &s.expr));
        for k in keys {
            if k.to_field(schema).is_ok_and(|(_, f)| {
                f.metadata()
                    .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
            }) {
                return Err(DataFusionError::Plan(
                    "Window processing does not support MVDs. Consider using UNNEST or \
                     MV_TO_ARRAY."
                        .to_string(),
                ));
            }
        }
    }
    Ok(())
}

/// Calcite's refusal of an ordering comparison, `BETWEEN` or `LIKE` with a `COMPLEX<json>`
/// operand (Druid's quidem `qaJsonCols/funcs_and_sql_datatype_comp_ops`: "Cannot apply '<' to
/// arguments of type '<COMPLEX<JSON>> < <COMPLEX<JSON>>'"); equality is allowed.
fn check_json_operator(e: &PlanExpr, schema: &DFSchema) -> Result<()> {
    let sql_type = |x: &PlanExpr| -> Option<(String, bool)> {
        let (_, field) = x.to_field(schema).ok()?;
        if dolmen_functions::scalar::is_json_field(&field) {
            Some(("COMPLEX<JSON>".into(), true))
        } else {
            Some((
                crate::writer::druid_types(field.data_type()).1.to_string(),
                false,
            ))
        }
    };
    let refuse = |operands: &[&PlanExpr], render: &dyn Fn(&[String]) -> String| {
        let typed: Option<Vec<(String, bool)>> = operands.iter().map(|x| sql_type(x)).collect();
        match typed {
            Some(typed) if typed.iter().any(|(_, json)| *json) => {
                let names: Vec<String> = typed.into_iter().map(|(n, _)| format!("<{n}>")).collect();
                Err(DataFusionError::Plan(format!(
                    "Cannot apply {} to arguments of type {}",
                    render(&[]),
                    render(&names)
                )))
            }
            _ => Ok(()),
        }
    };
    match e {
        PlanExpr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(
                op,
                Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
            ) =>
        {
            refuse(&[left, right], &|names| match names {
                [] => format!("'{op}'"),
                [l, r] => format!("'{l} {op} {r}'"),
                _ => String::new(),
            })
        }
        PlanExpr::Between(b) => {
            let word = if b.negated {
                "NOT BETWEEN ASYMMETRIC"
            } else {
                "BETWEEN ASYMMETRIC"
            };
            refuse(&[&b.expr, &b.low, &b.high], &|names| match names {
                [] => format!("'{word}'"),
                [x, lo, hi] => format!("'{x} {word} {lo} AND {hi}'"),
                _ => String::new(),
            })
        }
        PlanExpr::Like(l) => {
            let word = if l.negated { "NOT LIKE" } else { "LIKE" };
            refuse(&[&l.expr, &l.pattern], &|names| match names {
                [] => format!("'{word}'"),
                [x, p] => format!("'{word}({x}, {p})'"),
                _ => String::new(),
            })
        }
        _ => Ok(()),
    }
}

/// A plan error when `e` (an operand of a join's equality) is an array or `COMPLEX<json>`.
fn check_join_operand(e: &PlanExpr, schema: &DFSchema) -> Result<()> {
    let Ok((_, field)) = e.to_field(schema) else {
        return Ok(());
    };
    if let Some(type_name) = unjoinable_type(&field) {
        return Err(DataFusionError::Plan(format!(
            "Join conditions on a value of type [{type_name}] are not supported: \
             Druid joins on scalar values only (expression [{e}])"
        )));
    }
    Ok(())
}

/// Druid's name of `field`'s type if a join cannot compare it. A multi-value string column
/// (a `List<Utf8>` underneath) is a `VARCHAR` to Druid's planner and is not refused.
fn unjoinable_type(field: &Field) -> Option<String> {
    if dolmen_functions::arrays::is_multi_value_field(field) {
        return None;
    }
    if dolmen_functions::scalar::is_json_field(field) {
        return Some("COMPLEX<json>".into());
    }
    match field.data_type() {
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            Some(crate::writer::druid_types(field.data_type()).0)
        }
        DataType::Struct(_) | DataType::Map(..) => Some("COMPLEX<json>".into()),
        _ => None,
    }
}

struct Checks;

/// Aggregate functions of Druid SQL, recognised by name in a named window's keys (`WINDOW w AS
/// (PARTITION BY COUNT(*))`), which Druid refuses (quidem `qaWin/basics_window_and_aggr`); the
/// same keys written in the `OVER (...)` of a call are allowed.
const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "any_value",
    "earliest",
    "earliest_by",
    "latest",
    "latest_by",
    "approx_count_distinct",
    "approx_count_distinct_ds_hll",
    "approx_count_distinct_ds_theta",
    "approx_quantile_ds",
    "array_agg",
    "array_concat_agg",
    "string_agg",
    "listagg",
    "bit_and",
    "bit_or",
    "bit_xor",
    "bool_and",
    "bool_or",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
];

/// Whether a frame has a bound at an offset (`n PRECEDING`, `n FOLLOWING`, 0 included).
fn has_offset(frame: &datafusion::sql::sqlparser::ast::WindowFrame) -> bool {
    use datafusion::sql::sqlparser::ast::WindowFrameBound;
    let offset = |b: &WindowFrameBound| {
        matches!(
            b,
            WindowFrameBound::Preceding(Some(_)) | WindowFrameBound::Following(Some(_))
        )
    };
    offset(&frame.start_bound) || frame.end_bound.as_ref().is_some_and(offset)
}

/// Druid's refusal of `FIRST_VALUE`/`LAST_VALUE` over a frame with an offset bound (quidem
/// `qaWin/orderby_rows_0_following_first_last`: even `ROWS 0 FOLLOWING`).
fn first_last_framing() -> DataFusionError {
    DataFusionError::Plan(
        "Framing of FIRST_VALUE/LAST_VALUE is only allowed with UNBOUNDED or CURRENT ROW".into(),
    )
}

/// Window functions Calcite's `requiresOrder()` is true for (its `SqlRankFunction`s and
/// `NTILE`).
const NEEDS_ORDER: &[&str] = &["rank", "dense_rank", "percent_rank", "cume_dist", "ntile"];

/// Druid's error for an ordering it does not support, if `o` is one.
fn check_order(o: &OrderByExpr) -> ControlFlow<DataFusionError> {
    let descending = o.options.asc == Some(false);
    match (descending, o.options.nulls_first) {
        (true, Some(true)) => ControlFlow::Break(DataFusionError::Plan(
            "DESCENDING ordering with NULLS FIRST is not supported!".into(),
        )),
        (false, Some(false)) => ControlFlow::Break(DataFusionError::Plan(
            "ASCENDING ordering with NULLS LAST is not supported!".into(),
        )),
        _ => ControlFlow::Continue(()),
    }
}

fn check_all(orders: &[OrderByExpr]) -> ControlFlow<DataFusionError> {
    orders.iter().try_for_each(check_order)
}

impl Visitor for Checks {
    type Break = DataFusionError;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<DataFusionError> {
        if let Some(order) = &query.order_by
            && let OrderByKind::Expressions(orders) = &order.kind
        {
            check_all(orders)?;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<DataFusionError> {
        // A ranking call over a named window without `ORDER BY` (`RANK() OVER w ... WINDOW w
        // AS (PARTITION BY x)`), as over an inline one.
        let unordered: Vec<String> = select
            .named_window
            .iter()
            .filter(|def| {
                matches!(&def.1, NamedWindowExpr::WindowSpec(spec)
                    if spec.order_by.is_empty() && spec.window_name.is_none())
            })
            .map(|def| def.0.value.to_ascii_lowercase())
            .collect();
        if !unordered.is_empty() {
            for item in &select.projection {
                let found = datafusion::sql::sqlparser::ast::visit_expressions(item, |e| match e {
                    Expr::Function(f)
                        if matches!(&f.over, Some(WindowType::NamedWindow(w))
                            if unordered.contains(&w.value.to_ascii_lowercase()))
                            && NEEDS_ORDER
                                .contains(&f.name.to_string().to_ascii_lowercase().as_str()) =>
                    {
                        ControlFlow::Break(())
                    }
                    _ => ControlFlow::Continue(()),
                });
                if found.is_break() {
                    return ControlFlow::Break(DataFusionError::Plan(
                        "RANK or DENSE_RANK functions require ORDER BY clause in window \
                         specification"
                            .into(),
                    ));
                }
            }
        }
        let offset_framed: Vec<String> = select
            .named_window
            .iter()
            .filter(|def| {
                matches!(&def.1, NamedWindowExpr::WindowSpec(spec)
                    if spec.window_frame.as_ref().is_some_and(has_offset))
            })
            .map(|def| def.0.value.to_ascii_lowercase())
            .collect();
        if !offset_framed.is_empty() {
            for item in &select.projection {
                let found = datafusion::sql::sqlparser::ast::visit_expressions(item, |e| match e {
                    Expr::Function(f)
                        if matches!(&f.over, Some(WindowType::NamedWindow(w))
                            if offset_framed.contains(&w.value.to_ascii_lowercase()))
                            && matches!(
                                f.name.to_string().to_ascii_lowercase().as_str(),
                                "first_value" | "last_value"
                            ) =>
                    {
                        ControlFlow::Break(())
                    }
                    _ => ControlFlow::Continue(()),
                });
                if found.is_break() {
                    return ControlFlow::Break(first_last_framing());
                }
            }
        }
        for def in &select.named_window {
            if let NamedWindowExpr::WindowSpec(spec) = &def.1 {
                check_all(&spec.order_by)?;
                let keys = spec
                    .partition_by
                    .iter()
                    .chain(spec.order_by.iter().map(|o| &o.expr));
                for k in keys {
                    let found =
                        datafusion::sql::sqlparser::ast::visit_expressions(k, |e| match e {
                            Expr::Function(f)
                                if f.over.is_none()
                                    && AGGREGATES.contains(
                                        &f.name.to_string().to_ascii_lowercase().as_str(),
                                    ) =>
                            {
                                ControlFlow::Break(())
                            }
                            _ => ControlFlow::Continue(()),
                        });
                    if found.is_break() {
                        return ControlFlow::Break(DataFusionError::Plan(
                            "Aggregation inside window is currently not supported with syntax \
                             WINDOW W AS <DEF>. Try providing window definition directly \
                             without alias"
                                .into(),
                        ));
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<DataFusionError> {
        if let Expr::Array(array) = expr
            && array.elem.is_empty()
        {
            return ControlFlow::Break(DataFusionError::Plan(
                "Invalid number of arguments to function 'ARRAY'. Was expecting 1 arguments".into(),
            ));
        }
        if let Expr::Function(f) = expr {
            if let Some(WindowType::WindowSpec(spec)) = &f.over {
                check_all(&spec.order_by)?;
                let name = f.name.to_string().to_ascii_lowercase();
                if spec.order_by.is_empty()
                    && spec.window_name.is_none()
                    && NEEDS_ORDER.contains(&name.as_str())
                {
                    return ControlFlow::Break(DataFusionError::Plan(
                        "RANK or DENSE_RANK functions require ORDER BY clause in window specification"
                            .into(),
                    ));
                }
                if (name == "first_value" || name == "last_value")
                    && spec.window_frame.as_ref().is_some_and(has_offset)
                {
                    return ControlFlow::Break(first_last_framing());
                }
            }
            check_all(&f.within_group)?;
            if let FunctionArguments::List(list) = &f.args {
                for clause in &list.clauses {
                    if let FunctionArgumentClause::OrderBy(orders) = clause {
                        check_all(orders)?;
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::parser::Parser;

    fn check(sql: &str) -> Result<()> {
        let stmts = Parser::parse_sql(&crate::dialect::DruidDialect::default(), sql).unwrap();
        validate_statement(&stmts[0])
    }

    /// `DruidSqlValidator.validateCall` rejects the placements Druid cannot sort in; Calcite
    /// rejects `ARRAY[]` and ranking without `ORDER BY`.
    #[test]
    fn what_druid_rejects_is_rejected() {
        for ok in [
            "SELECT x FROM t ORDER BY x",
            "SELECT x FROM t ORDER BY x NULLS FIRST, y DESC NULLS LAST",
            "SELECT ROW_NUMBER() OVER (ORDER BY x ASC NULLS FIRST) FROM t",
            "SELECT ARRAY[1], ROW_NUMBER() OVER (), RANK() OVER (ORDER BY x) FROM t",
            "SELECT ROW_NUMBER() OVER (PARTITION BY COUNT(*)) FROM t GROUP BY x",
            "SELECT ROW_NUMBER() OVER w FROM t GROUP BY x WINDOW w AS (PARTITION BY x)",
            "SELECT RANK() OVER w FROM t WINDOW w AS (PARTITION BY x ORDER BY y)",
            "SELECT FIRST_VALUE(x) OVER (ORDER BY x ROWS UNBOUNDED PRECEDING) FROM t",
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for (sql, message) in [
            (
                "SELECT FIRST_VALUE(x) OVER (ORDER BY x ROWS 0 FOLLOWING) FROM t",
                "Framing of FIRST_VALUE/LAST_VALUE",
            ),
            (
                "SELECT LAST_VALUE(x) OVER w FROM t WINDOW w AS (ORDER BY x ROWS 1 PRECEDING)",
                "Framing of FIRST_VALUE/LAST_VALUE",
            ),
            (
                "SELECT RANK() OVER w FROM t WINDOW w AS (PARTITION BY x)",
                "RANK or DENSE_RANK functions require ORDER BY",
            ),
            (
                "SELECT ROW_NUMBER() OVER w FROM t GROUP BY x WINDOW w AS (PARTITION BY COUNT(*))",
                "Aggregation inside window is currently not supported",
            ),
            (
                "SELECT x FROM t ORDER BY x NULLS LAST",
                "ASCENDING ordering with NULLS LAST",
            ),
            (
                "SELECT x FROM t ORDER BY x ASC NULLS LAST",
                "ASCENDING ordering with NULLS LAST",
            ),
            (
                "SELECT x FROM t ORDER BY x DESC NULLS FIRST",
                "DESCENDING ordering with NULLS FIRST",
            ),
            (
                "SELECT RANK() OVER (ORDER BY x DESC NULLS FIRST) FROM t",
                "DESCENDING ordering with NULLS FIRST",
            ),
            (
                "SELECT * FROM (SELECT x FROM t ORDER BY x NULLS LAST LIMIT 1)",
                "ASCENDING ordering with NULLS LAST",
            ),
            (
                "SELECT ARRAY_AGG(x ORDER BY x NULLS LAST) FROM t",
                "ASCENDING ordering with NULLS LAST",
            ),
        ] {
            let e = check(sql).unwrap_err().to_string();
            assert!(e.contains(message), "{sql}: {e}");
        }
    }

    /// Druid refuses joins on arrays and `COMPLEX<json>` values (`qaArray/sql_join.*`), and
    /// joins on scalars, scalar expressions of arrays and multi-value strings plan.
    #[tokio::test]
    async fn joins_on_arrays_and_json_are_refused() {
        use std::sync::Arc;

        use arrow::datatypes::Schema;
        use datafusion::datasource::MemTable;
        use datafusion::prelude::{SessionConfig, SessionContext};

        let ctx = SessionContext::new_with_config(
            SessionConfig::new()
                .set_bool("datafusion.sql_parser.enable_ident_normalization", false),
        );
        crate::functions::register_druid_functions(&ctx);
        let json = Field::new("j", DataType::Utf8, true).with_metadata(
            [(
                dolmen_functions::scalar::COMPLEX_METADATA_KEY.to_string(),
                dolmen_functions::scalar::JSON_COMPLEX_TYPE.to_string(),
            )]
            .into(),
        );
        let mv = dolmen_functions::arrays::multi_value_field("mv");
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Int64, true),
            Field::new(
                "a",
                DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true))),
                true,
            ),
            json,
            mv,
        ]));
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(schema, vec![vec![]]).unwrap()),
        )
        .unwrap();
        let plan = |sql: &'static str| {
            let state = ctx.state();
            async move { crate::rewrite::sql_to_logical_plan(&state, sql, &Default::default()).await }
        };
        for ok in [
            "SELECT t1.x FROM t t1 JOIN t t2 ON t1.x = t2.x",
            "SELECT t1.x FROM t t1 JOIN t t2 ON ARRAY_TO_STRING(t1.a, ',') = ARRAY_TO_STRING(t2.a, ',')",
            "SELECT t1.x FROM t t1 JOIN t t2 ON t1.mv = t2.mv",
            "SELECT t1.x FROM t t1 CROSS JOIN t t2",
            "SELECT x FROM t WHERE x IN (SELECT x FROM t)",
            "SELECT t1.x FROM t t1, t t2 WHERE t1.x = t2.x AND t1.j = 'a'",
            "SELECT x FROM t WHERE j = j",
        ] {
            assert!(plan(ok).await.is_ok(), "{ok}: {:?}", plan(ok).await.err());
        }
        for (bad, type_name) in [
            (
                "SELECT t1.x FROM t t1 JOIN t t2 ON t1.a = t2.a",
                "ARRAY<LONG>",
            ),
            (
                "SELECT t1.x FROM t t1 LEFT JOIN t t2 ON t1.x = t2.x AND t1.j = t2.j",
                "COMPLEX<json>",
            ),
            (
                "SELECT x FROM t WHERE x IN (SELECT t1.x FROM t t1 JOIN t t2 ON t1.a = t2.a)",
                "ARRAY<LONG>",
            ),
            (
                "SELECT x FROM t WHERE a IN (SELECT a FROM t)",
                "ARRAY<LONG>",
            ),
            (
                "SELECT t1.x FROM t t1, t t2 WHERE t1.j = t2.j",
                "COMPLEX<json>",
            ),
        ] {
            let e = plan(bad).await.unwrap_err().to_string();
            assert!(
                e.contains(type_name) && e.contains("not supported"),
                "{bad}: {e}"
            );
        }
        // Multi-value strings as window keys are refused; arrays and scalars are not.
        for ok in [
            "SELECT ROW_NUMBER() OVER (PARTITION BY x ORDER BY a) FROM t",
            "SELECT ROW_NUMBER() OVER (PARTITION BY MV_TO_ARRAY(mv)) FROM t",
        ] {
            assert!(plan(ok).await.is_ok(), "{ok}: {:?}", plan(ok).await.err());
        }
        for bad in [
            "SELECT ROW_NUMBER() OVER (PARTITION BY STRING_TO_MV('1,2', ',')) FROM t",
            "SELECT ROW_NUMBER() OVER (ORDER BY mv) FROM t",
            "SELECT ROW_NUMBER() OVER w FROM t WINDOW w AS (PARTITION BY ARRAY_TO_MV(a))",
        ] {
            let e = plan(bad).await.unwrap_err().to_string();
            assert!(e.contains("does not support MVDs"), "{bad}: {e}");
        }
    }
}
