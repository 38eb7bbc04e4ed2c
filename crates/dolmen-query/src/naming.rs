//! Calcite's names for unaliased select items: an expression that is not a plain column
//! reference, with no `AS`, is named `EXPR$<n>` where `n` is its 0-based position in the
//! select list (`SELECT channel, SUM(added) ...` yields the columns `channel` and `EXPR$1`).
//! Druid reports these names, and clients and dashboards depend on them
//! (reference-behaviour.md, "Metadata tables": "An unaliased aggregate is named `EXPR$n`").
//!
//! Applied to every SELECT of a statement (subqueries included), before DataFusion plans it.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Select, SelectItem, Statement, VisitMut, VisitorMut,
};

struct Namer;

impl VisitorMut for Namer {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        name_select_items(&mut select.projection);
        ControlFlow::Continue(())
    }
}

/// Gives every unaliased non-column select item its `EXPR$n` alias.
pub fn name_select_items(items: &mut [SelectItem]) {
    for (i, item) in items.iter_mut().enumerate() {
        if let SelectItem::UnnamedExpr(expr) = item
            && !is_column_reference(expr)
        {
            let expr = std::mem::replace(
                expr,
                Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
            );
            *item = SelectItem::ExprWithAlias {
                expr,
                alias: Ident::with_quote('"', format!("EXPR${i}")),
            };
        }
    }
}

fn is_column_reference(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Nested(inner) => is_column_reference(inner),
        _ => false,
    }
}

/// Names the unaliased select items of every SELECT in `stmt`.
pub fn name_unaliased_expressions(stmt: &mut Statement) {
    let _ = stmt.visit(&mut Namer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn named(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&GenericDialect {}, sql).unwrap();
        name_unaliased_expressions(&mut stmts[0]);
        stmts[0].to_string()
    }

    #[test]
    fn names_like_calcite() {
        assert_eq!(
            named("SELECT channel, page, SUM(added) FROM t GROUP BY channel, page"),
            "SELECT channel, page, SUM(added) AS \"EXPR$2\" FROM t GROUP BY channel, page"
        );
        assert_eq!(
            named("SELECT COUNT(*) FROM t"),
            "SELECT COUNT(*) AS \"EXPR$0\" FROM t"
        );
        assert_eq!(
            named("SELECT t.a, 1 AS one, 2 FROM t"),
            "SELECT t.a, 1 AS one, 2 AS \"EXPR$2\" FROM t"
        );
        assert_eq!(
            named("SELECT x FROM (SELECT MAX(a) FROM t) AS s"),
            "SELECT x FROM (SELECT MAX(a) AS \"EXPR$0\" FROM t) AS s"
        );
    }
}
