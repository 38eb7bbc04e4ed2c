//! Calcite's unique column names for derived tables: `SELECT a_str FROM (SELECT * FROM t t1
//! CROSS JOIN t t2)` reads the first `a_str`, and the second is `a_str0`.
//!
//! Calcite expands `*` over a join into every column of every input and makes the names of a
//! select list unique (`SqlValidatorImpl.expandStar` with `SqlValidatorUtil.uniquify` and its
//! `EXPR_SUGGESTER`: a repeated name gets the suffix `0`, then `1`, ..., the first number giving
//! a name not used yet), so a derived table over a join has one column per input column, named
//! uniquely. DataFusion keeps both columns under their table qualifiers, and the outer query's
//! `a_str` is ambiguous ("Ambiguous reference to unqualified field a_str"). Druid's quidem
//! corpus uses both forms (`qaArray/sql_join.*`: `SELECT a_nested FROM (SELECT * FROM t1 CROSS
//! JOIN t2)`; `qaUnnest/array_sql_col_general`: `s_int0`).
//!
//! [`uniquify_derived_columns`] rewrites the SQL AST before planning: a derived table (a
//! subquery in `FROM`) whose select list is a bare `*` over more than one table is planned on
//! its own; when its output repeats a name, the `*` becomes the explicit list
//! `"t1"."a_str" AS "a_str", ..., "t2"."a_str" AS "a_str0"`. A subquery that does not plan on
//! its own (it reads a CTE or an outer column), or whose repeated columns have no table
//! qualifier to tell them apart, is left as it is.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::common::{DFSchema, DFSchemaRef, Result};
use datafusion::execution::SessionState;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Query, SelectItem, SetExpr, Statement as SqlStatement, TableFactor, Visit,
    VisitMut, Visitor, VisitorMut,
};

/// Applies the module's rewrite to `stmt` (a query, or the query of an `EXPLAIN`).
///
/// # Errors
/// None of its own: a derived table that fails to plan on its own is left for the planner to
/// report.
pub async fn uniquify_derived_columns(state: &SessionState, stmt: &mut DFStatement) -> Result<()> {
    let query = match stmt {
        DFStatement::Statement(s) => match s.as_mut() {
            SqlStatement::Query(q) => q.as_mut(),
            _ => return Ok(()),
        },
        DFStatement::Explain(e) => {
            return Box::pin(uniquify_derived_columns(state, &mut e.statement)).await;
        }
        _ => return Ok(()),
    };
    let mut collect = Collect { probes: Vec::new() };
    let _ = Visit::visit(&*query, &mut collect);
    if collect.probes.iter().all(Option::is_none) {
        return Ok(());
    }
    let lists: Vec<Option<Vec<SelectItem>>> = probe_schemas(state, collect.probes)
        .await
        .into_iter()
        .map(|schema| schema.and_then(|s| unique_select_list(&s)))
        .collect();
    let mut apply = Apply {
        lists: lists.into_iter(),
    };
    let _ = VisitMut::visit(query, &mut apply);
    Ok(())
}

/// The output schema of each query of `probes` planned on its own (`None` for a missing probe
/// and for a query that does not plan alone: it reads a CTE or an outer column). Shared with
/// [`crate::multivalue`]'s mapping, which probes the columns a `SELECT` reads the same way.
pub(crate) async fn probe_schemas(
    state: &SessionState,
    probes: Vec<Option<Query>>,
) -> Vec<Option<DFSchemaRef>> {
    let mut schemas = Vec::with_capacity(probes.len());
    for probe in probes {
        let schema = match probe {
            Some(q) => state
                .statement_to_plan(DFStatement::Statement(Box::new(SqlStatement::Query(
                    Box::new(q),
                ))))
                .await
                .ok()
                .map(|plan| std::sync::Arc::clone(plan.schema())),
            None => None,
        };
        schemas.push(schema);
    }
    schemas
}

/// Whether `q` is `SELECT * FROM <more than one table>` (a bare wildcard, no other item).
fn is_star_over_join(q: &Query) -> bool {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return false;
    };
    let star = matches!(
        select.projection.as_slice(),
        [SelectItem::Wildcard(options)] if options.opt_exclude.is_none()
            && options.opt_except.is_none()
            && options.opt_replace.is_none()
            && options.opt_rename.is_none()
            && options.opt_ilike.is_none()
    );
    let tables = select.from.len() + select.from.iter().map(|t| t.joins.len()).sum::<usize>();
    star && tables > 1
}

/// Visits the derived tables in order, keeping a copy of those [`is_star_over_join`] accepts.
struct Collect {
    probes: Vec<Option<Query>>,
}

impl Visitor for Collect {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived { subquery, .. } = factor {
            self.probes
                .push(is_star_over_join(subquery).then(|| subquery.as_ref().clone()));
        }
        ControlFlow::Continue(())
    }
}

/// Visits the derived tables in the same order, replacing the `*` where a list was made.
struct Apply {
    lists: std::vec::IntoIter<Option<Vec<SelectItem>>>,
}

impl VisitorMut for Apply {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived { subquery, .. } = factor
            && let Some(Some(list)) = self.lists.next()
            && let SetExpr::Select(select) = subquery.body.as_mut()
        {
            select.projection = list;
        }
        ControlFlow::Continue(())
    }
}

/// The explicit select list giving `schema`'s columns Calcite's unique names, or `None` when
/// no name repeats (nothing to do) or a repeated column has no qualifier to select it by.
fn unique_select_list(schema: &DFSchema) -> Option<Vec<SelectItem>> {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut seen = HashSet::new();
    let repeated: HashSet<&str> = names.iter().copied().filter(|n| !seen.insert(*n)).collect();
    if repeated.is_empty() {
        return None;
    }
    let mut used: HashSet<String> = HashSet::new();
    let mut list = Vec::with_capacity(names.len());
    for (qualifier, field) in schema.iter() {
        let name = field.name();
        let expr = match qualifier {
            Some(q) => {
                let mut parts: Vec<Ident> = Vec::new();
                if let Some(schema_name) = q.schema() {
                    parts.push(Ident::with_quote('"', schema_name));
                }
                parts.push(Ident::with_quote('"', q.table()));
                parts.push(Ident::with_quote('"', name));
                Expr::CompoundIdentifier(parts)
            }
            None if repeated.contains(name.as_str()) => return None,
            None => Expr::Identifier(Ident::with_quote('"', name)),
        };
        let mut alias = name.clone();
        let mut attempt = 0;
        while !used.insert(alias.clone()) {
            alias = format!("{name}{attempt}");
            attempt += 1;
        }
        list.push(SelectItem::ExprWithAlias {
            expr,
            alias: Ident::with_quote('"', alias),
        });
    }
    Some(list)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    async fn columns(ctx: &SessionContext, sql: &str) -> Result<Vec<String>, String> {
        let plan = crate::rewrite::sql_to_logical_plan(&ctx.state(), sql, &Default::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(plan
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect())
    }

    /// Calcite's names: the second `a` of `SELECT * FROM t1, t2` is `a0`; the outer query
    /// reads both; a derived table without repeated names is untouched.
    #[tokio::test]
    async fn derived_tables_over_joins_get_calcites_unique_names() {
        let ctx = SessionContext::new_with_config(
            SessionConfig::new()
                .set_bool("datafusion.sql_parser.enable_ident_normalization", false),
        );
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("a0", DataType::Int64, true),
        ]));
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(schema, vec![vec![]]).unwrap()),
        )
        .unwrap();
        assert_eq!(
            columns(&ctx, "SELECT * FROM (SELECT * FROM t t1 CROSS JOIN t t2)")
                .await
                .unwrap(),
            ["a", "a0", "a1", "a00"]
        );
        assert_eq!(
            columns(&ctx, "SELECT a, a1 FROM (SELECT * FROM t t1, t t2)")
                .await
                .unwrap(),
            ["a", "a1"]
        );
        assert_eq!(
            columns(
                &ctx,
                "SELECT a FROM (SELECT * FROM t t1 JOIN t t2 ON t1.a = t2.a) s"
            )
            .await
            .unwrap(),
            ["a"]
        );
        assert_eq!(
            columns(&ctx, "SELECT * FROM (SELECT * FROM t)")
                .await
                .unwrap(),
            ["a", "a0"]
        );
    }
}
