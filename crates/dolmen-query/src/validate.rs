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
//! - `RANK`, `DENSE_RANK`, `PERCENT_RANK`, `CUME_DIST` and `NTILE` over a window without
//!   `ORDER BY` (`PERCENT_RANK() OVER ()`): Calcite's ranking functions require one
//!   (`SqlWindow.validate`, `RESOURCE.funcNeedsOrderBy`: "RANK or DENSE_RANK functions require
//!   ORDER BY clause in window specification"). A call over a named window is not checked.

use std::ops::ControlFlow;

use datafusion::common::{DataFusionError, Result};
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

struct Checks;

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
        for def in &select.named_window {
            if let NamedWindowExpr::WindowSpec(spec) = &def.1 {
                check_all(&spec.order_by)?;
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
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for (sql, message) in [
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
}
