//! Druid's implicit mapping of scalar expressions over multi-value columns, as a rewrite of the
//! SQL AST before DataFusion plans it (the parent module's docs say what is rewritten into
//! what; ADR 0013 and ADR 0015 say why).
//!
//! The rewrite works per `SELECT`, in two phases over the whole statement:
//!
//! 1. **Probes.** Each `SELECT` is first rewritten on a copy as if every identifier (but
//!    `__time`) named a multi-value column. When that copy differs from the original (or the
//!    rewrite fails), the `SELECT` is worth a probe: its `FROM` clause is planned alone, as
//!    `WITH <CTEs in scope> SELECT * FROM <from>`, and the probe's schema says which columns
//!    really are multi-value. This covers tables, joins, derived tables, views and CTEs with one
//!    mechanism; typical queries (bare columns, aggregates, `col = 'x'` filters, time functions)
//!    need no probe. A probe that does not plan (a lateral reference) leaves its `SELECT` as it
//!    is.
//! 2. **Mapping.** The probed `SELECT`s are rewritten with the real columns.
//!
//! Within an expression, a multi-value column is used either *by value* (as the argument of a
//! scalar function or operator: Druid maps the expression over the values) or *as an array*
//! (as an argument of a function taking whole arrays: `MV_*`, `ARRAY*`, `LIST_*`,
//! `STRING_TO_MV`, `SCALAR_IN_ARRAY`, `CARDINALITY`, `EMPTY`, `FLATTEN`, `UNNEST`,
//! `MAKE_ARRAY`/`MAKE_LIST`, matched by name). An argument of such a function that is itself an
//! expression over a column by value is mapped there, as Druid's `Parser.applyUnappliedBindings`
//! does (`MV_TO_STRING(UPPER(tags), ',')` upper-cases each value, then joins them). Aggregate and
//! window calls, subqueries, lambdas, array literals and subscripts are never looked into: they
//! see whole rows. A column used both ways in one expression is a plan error, as in Druid
//! ("used as both scalar and array variables").

use std::cell::Cell;
use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::common::{Column, DFSchema, DFSchemaRef, DataFusionError, Result, TableReference};
use datafusion::execution::context::SessionState;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Cte, Distinct, Expr as SqlExpr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, LambdaFunction, LambdaFunctionParameter, LambdaSyntax,
    OneOrManyWithParens, OrderByExpr, OrderByKind, Query, Select, SelectFlavor, SelectItem,
    SetExpr, Statement as SqlStatement, UnaryOperator, Value, Visit, VisitMut, Visitor, VisitorMut,
    WildcardAdditionalOptions, With,
};

use super::functions::{BIND, KEY, RESULT, is_internal};
use crate::rewrite::function_call;

/// Rewrites the scalar expressions over multi-value columns of `stmt` (every `SELECT`, in
/// subqueries, CTEs and set operations too) so that DataFusion plans Druid's meaning, as the
/// parent module's docs list. Run after the other AST rewrites, just before planning.
///
/// # Errors
/// A plan error for what Druid rejects or Dolmen cannot map faithfully: a column used both as
/// an array and value by value in one expression, a subquery inside a mapped expression,
/// `SELECT DISTINCT *` over multi-value columns; mapped select items with non-string values
/// fail later, when planned (see [`super::functions`]). A probe's own planning error only
/// leaves its `SELECT` as it is, to fail (or not) when the statement is planned.
pub async fn map_multi_value_expressions(
    state: &SessionState,
    stmt: &mut DFStatement,
) -> Result<()> {
    let query = match stmt {
        DFStatement::Statement(s) => match s.as_mut() {
            SqlStatement::Query(q) => q.as_mut(),
            _ => return Ok(()),
        },
        DFStatement::Explain(e) => {
            return Box::pin(map_multi_value_expressions(state, &mut e.statement)).await;
        }
        _ => return Ok(()),
    };
    let functions = Functions::of(state);
    let mut collect = CollectProbes {
        functions: &functions,
        ctes: Vec::new(),
        probes: Vec::new(),
    };
    let _ = Visit::visit(&*query, &mut collect);
    if collect.probes.iter().all(Option::is_none) {
        return Ok(());
    }
    let schemas = crate::derived::probe_schemas(state, collect.probes).await;
    let params = Cell::new(0);
    let mut apply = ApplyMapping {
        normalize: state.config_options().sql_parser.enable_ident_normalization,
        functions: &functions,
        params: &params,
        schemas,
        next: 0,
    };
    match VisitMut::visit(query, &mut apply) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The session's aggregate and window functions (by lower-case name): calls that see whole
/// rows, never mapped into.
struct Functions {
    aggregates: HashSet<String>,
    windows: HashSet<String>,
}

impl Functions {
    fn of(state: &SessionState) -> Functions {
        let lower = |k: &String| k.to_ascii_lowercase();
        Functions {
            aggregates: state.aggregate_functions().keys().map(lower).collect(),
            windows: state.window_functions().keys().map(lower).collect(),
        }
    }

    /// An aggregate call (not a window over one).
    fn is_aggregate(&self, f: &Function) -> bool {
        f.over.is_none() && self.aggregates.contains(&function_name(f))
    }

    /// An aggregate or window call, or one of the internal functions: not looked into.
    fn is_opaque(&self, f: &Function) -> bool {
        let name = function_name(f);
        f.over.is_some()
            || self.aggregates.contains(&name)
            || self.windows.contains(&name)
            || is_internal(&name)
    }
}

fn function_name(f: &Function) -> String {
    f.name
        .0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.to_ascii_lowercase())
        .unwrap_or_default()
}

/// Whether the function `name` (lower case) takes its arguments as whole arrays.
fn takes_whole_arrays(name: &str) -> bool {
    name.starts_with("mv_")
        || name.starts_with("array")
        || name.starts_with("list_")
        || matches!(
            name,
            "string_to_mv"
                | "scalar_in_array"
                | "cardinality"
                | "empty"
                | "flatten"
                | "unnest"
                | "make_array"
                | "make_list"
        )
}

/// Expressions never looked into (whole rows or whole arrays, or their own scope).
fn is_opaque_form(e: &SqlExpr) -> bool {
    matches!(
        e,
        SqlExpr::Lambda(_) | SqlExpr::Array(_) | SqlExpr::CompoundFieldAccess { .. }
    )
}

/// Which identifiers name multi-value columns.
trait MultiValueColumns {
    /// The multi-value column `e` names, when `e` is an identifier (possibly parenthesized)
    /// naming one.
    fn multi_value(&self, e: &SqlExpr) -> Option<Column>;

    /// Whether `e` names a column at all (to tell a `GROUP BY` alias from a column).
    fn is_column(&self, e: &SqlExpr) -> bool;

    /// Whether the `FROM` clause has any multi-value column.
    fn any(&self) -> bool;
}

/// Resolves identifiers against the columns of a probed `FROM` clause.
struct Resolver<'a> {
    schema: &'a DFSchema,
    normalize: bool,
}

impl Resolver<'_> {
    fn name(&self, id: &Ident) -> String {
        if self.normalize && id.quote_style.is_none() {
            id.value.to_lowercase()
        } else {
            id.value.clone()
        }
    }

    /// The column `e` names, and whether it is multi-value.
    fn column(&self, e: &SqlExpr) -> Option<(Column, bool)> {
        let (qualifier, field) = match e {
            SqlExpr::Identifier(id) => self
                .schema
                .qualified_field_with_unqualified_name(&self.name(id))
                .ok()?,
            SqlExpr::CompoundIdentifier(ids) if (2..=4).contains(&ids.len()) => {
                let parts: Vec<String> = ids.iter().map(|i| self.name(i)).collect();
                let (name, q) = parts.split_last()?;
                let q = match q {
                    [t] => TableReference::bare(t.as_str()),
                    [s, t] => TableReference::partial(s.as_str(), t.as_str()),
                    [c, s, t] => TableReference::full(c.as_str(), s.as_str(), t.as_str()),
                    _ => return None,
                };
                self.schema.qualified_field_with_name(Some(&q), name).ok()?
            }
            SqlExpr::Nested(inner) => return self.column(inner),
            _ => return None,
        };
        let multi_value = field
            .metadata()
            .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY);
        Some((Column::new(qualifier.cloned(), field.name()), multi_value))
    }
}

impl MultiValueColumns for Resolver<'_> {
    fn multi_value(&self, e: &SqlExpr) -> Option<Column> {
        self.column(e).filter(|(_, mv)| *mv).map(|(c, _)| c)
    }

    fn is_column(&self, e: &SqlExpr) -> bool {
        self.column(e).is_some()
    }

    fn any(&self) -> bool {
        self.schema.fields().iter().any(|f| {
            f.metadata()
                .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
        })
    }
}

/// For deciding whether a `SELECT` is worth a probe: every identifier but `__time` (and the
/// rewrite's own lambda parameters) may name a multi-value column.
struct AssumeMultiValue;

impl MultiValueColumns for AssumeMultiValue {
    fn multi_value(&self, e: &SqlExpr) -> Option<Column> {
        let name = match e {
            SqlExpr::Identifier(id) => &id.value,
            SqlExpr::CompoundIdentifier(ids) => &ids.last()?.value,
            SqlExpr::Nested(inner) => return self.multi_value(inner),
            _ => return None,
        };
        // By name alone, so that `t.c` and `c` are one column (more rewrites, never fewer).
        (name != dolmen_segment::TIME_COLUMN && !name.starts_with(PARAM_PREFIX))
            .then(|| Column::new_unqualified(name))
    }

    fn is_column(&self, _e: &SqlExpr) -> bool {
        false
    }

    fn any(&self) -> bool {
        true
    }
}

/// Prefix of the lambda parameters the rewrite introduces (one value of a column).
const PARAM_PREFIX: &str = "__mv_v";

/// How an expression uses multi-value columns.
#[derive(Debug, Default)]
struct Uses {
    /// Used by value, in order of first use: the column and the expression naming it as
    /// written (the first time).
    by_value: Vec<(Column, SqlExpr)>,
    /// Used as whole arrays: arguments of functions taking arrays, directly or mapped there.
    whole: Vec<Column>,
    /// The expression holds a subquery.
    subquery: bool,
}

impl Uses {
    fn add_by_value(&mut self, c: Column, written: &SqlExpr) {
        if !self.by_value.iter().any(|(x, _)| *x == c) {
            self.by_value.push((c, written.clone()));
        }
    }

    fn is_empty(&self) -> bool {
        self.by_value.is_empty() && self.whole.is_empty()
    }
}

/// The rewrites of one `SELECT`, with one way of telling multi-value columns.
struct Mapper<'a> {
    columns: &'a dyn MultiValueColumns,
    functions: &'a Functions,
    /// Number of the next lambda parameter (unique within the statement).
    params: &'a Cell<usize>,
}

impl Mapper<'_> {
    fn fresh_param(&self) -> String {
        let n = self.params.get();
        self.params.set(n + 1);
        format!("{PARAM_PREFIX}{n}")
    }

    /// Maps, in place, the arguments of functions taking whole arrays that use a column by
    /// value (see the module docs), and returns how `e` itself uses multi-value columns.
    fn lift(&self, e: &mut SqlExpr) -> Result<Uses> {
        let mut v = Lift {
            mapper: self,
            uses: Uses::default(),
            scope: Scope::default(),
        };
        match VisitMut::visit(e, &mut v) {
            ControlFlow::Break(err) => Err(err),
            ControlFlow::Continue(()) => Ok(v.uses),
        }
    }

    /// The arguments of `f`, a function taking whole arrays: a bare column is used as an
    /// array; an expression using columns by value is mapped into a list of its values.
    fn lift_array_arguments(&self, f: &mut Function, uses: &mut Uses) -> Result<()> {
        let FunctionArguments::List(list) = &mut f.args else {
            return Ok(());
        };
        for arg in &mut list.args {
            let (FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
            | FunctionArg::Named {
                arg: FunctionArgExpr::Expr(e),
                ..
            }
            | FunctionArg::ExprNamed {
                arg: FunctionArgExpr::Expr(e),
                ..
            }) = arg
            else {
                continue;
            };
            if let Some(c) = self.columns.multi_value(e) {
                uses.whole.push(c);
                continue;
            }
            let original = e.clone();
            let inner = self.lift(e)?;
            uses.subquery |= inner.subquery;
            uses.whole.extend(inner.whole.iter().cloned());
            if !inner.by_value.is_empty() {
                self.check(&inner, &original)?;
                uses.whole
                    .extend(inner.by_value.iter().map(|(c, _)| c.clone()));
                *e = self.map_values(e, &inner);
            }
        }
        Ok(())
    }

    /// Rejects a mapping Druid rejects, or that cannot be written faithfully.
    fn check(&self, uses: &Uses, e: &SqlExpr) -> Result<()> {
        if let Some((_, written)) = uses.by_value.iter().find(|(c, _)| uses.whole.contains(c)) {
            return Err(DataFusionError::Plan(format!(
                "multi-value column {written} is used both as an array (by an MV_*/ARRAY_* \
                 function) and value by value in {e}; Druid rejects such expressions (\"used as \
                 both scalar and array variables\"): use it one way within one expression"
            )));
        }
        if uses.subquery {
            let (_, written) = &uses.by_value[0];
            return Err(DataFusionError::Plan(format!(
                "a subquery in an expression over the multi-value column {written} is not \
                 supported: {e}"
            )));
        }
        Ok(())
    }

    /// `e` (already lifted) with its by-value columns replaced by lambda parameters.
    fn body(&self, e: &SqlExpr, uses: &Uses) -> (SqlExpr, Vec<String>) {
        let params: Vec<String> = uses.by_value.iter().map(|_| self.fresh_param()).collect();
        let mut body = e.clone();
        let mut v = Substitute {
            mapper: self,
            uses,
            params: &params,
            scope: Scope::default(),
        };
        let _ = VisitMut::visit(&mut body, &mut v);
        (body, params)
    }

    /// The list of `e`'s values, `e` mapped over the values of its by-value columns (over
    /// every combination of them, the first column varying slowest, as Druid's
    /// `cartesian_map`).
    fn map_values(&self, e: &SqlExpr, uses: &Uses) -> SqlExpr {
        let (mut out, params) = self.body(e, uses);
        for ((_, written), p) in uses.by_value.iter().zip(&params).rev() {
            out = function_call(
                "array_transform",
                vec![function_call(BIND, vec![written.clone()]), lambda(p, out)],
            );
        }
        if uses.by_value.len() > 1 {
            out = function_call("flatten", vec![out]);
        }
        out
    }

    /// Whether the predicate `e` holds for some value (some combination of values) of its
    /// by-value columns, in three-valued logic (`array_any_match`).
    fn any_value(&self, e: &SqlExpr, uses: &Uses) -> SqlExpr {
        let (mut out, params) = self.body(e, uses);
        for ((_, written), p) in uses.by_value.iter().zip(&params).rev() {
            out = function_call(
                "array_any_match",
                vec![function_call(BIND, vec![written.clone()]), lambda(p, out)],
            );
        }
        out
    }

    /// Maps the predicate `e` (a `WHERE` clause or an aggregate's `FILTER`): `AND`, `OR` and
    /// `NOT` are kept, and each other predicate over columns by value holds when it holds for
    /// any value, as Druid's filters do; a negated predicate (`<>`, `NOT IN`, `NOT LIKE`,
    /// `NOT BETWEEN`, `IS NOT NULL`, .., see [`positive_form`]) is the negation of its positive
    /// form (no value matches), as Druid plans `x <> 'a'` as `not(equals)`. With
    /// `rule_shapes`, the predicates [`super::MultiValueRule`] already gives that meaning
    /// (`mv = x`, `mv IN (..)`, `mv IS NULL` and their negations) are left to it.
    fn map_predicate(&self, e: &mut SqlExpr, rule_shapes: bool) -> Result<()> {
        match e {
            SqlExpr::BinaryOp {
                left,
                op: BinaryOperator::And | BinaryOperator::Or,
                right,
            } => {
                self.map_predicate(left, rule_shapes)?;
                self.map_predicate(right, rule_shapes)
            }
            SqlExpr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            }
            | SqlExpr::Nested(expr) => self.map_predicate(expr, rule_shapes),
            _ => {
                if rule_shapes && self.rule_handles(e) {
                    return Ok(());
                }
                let mut lifted = e.clone();
                let uses = self.lift(&mut lifted)?;
                if uses.by_value.is_empty() {
                    *e = lifted;
                    return Ok(());
                }
                self.check(&uses, e)?;
                let (positive, negated) = positive_form(lifted);
                let any = self.any_value(&positive, &uses);
                *e = if negated {
                    SqlExpr::UnaryOp {
                        op: UnaryOperator::Not,
                        expr: Box::new(any),
                    }
                } else {
                    any
                };
                Ok(())
            }
        }
    }

    /// Whether [`super::MultiValueRule`] rewrites the predicate `e` itself: a bare multi-value
    /// column compared (`=`, `<>`) with, or looked up (`IN`) in, values free of multi-value
    /// columns, or tested for null.
    fn rule_handles(&self, e: &SqlExpr) -> bool {
        let bare = |x: &SqlExpr| self.columns.multi_value(x).is_some();
        let free = |x: &SqlExpr| {
            let mut x = x.clone();
            self.lift(&mut x).is_ok_and(|u| u.is_empty())
        };
        match e {
            SqlExpr::BinaryOp {
                left,
                op: BinaryOperator::Eq | BinaryOperator::NotEq,
                right,
            } => (bare(left) && free(right)) || (bare(right) && free(left)),
            SqlExpr::InList { expr, list, .. } => bare(expr) && list.iter().all(free),
            SqlExpr::IsNull(x) | SqlExpr::IsNotNull(x) => bare(x),
            _ => false,
        }
    }

    /// Maps the `FILTER (WHERE ..)` clauses of the aggregate calls in `e`.
    fn map_aggregate_filters(&self, e: &mut SqlExpr) -> Result<()> {
        struct Filters<'m, 'a> {
            mapper: &'m Mapper<'a>,
            queries: usize,
        }
        impl VisitorMut for Filters<'_, '_> {
            type Break = DataFusionError;

            // A subquery's aggregates belong to its own SELECT.
            fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<DataFusionError> {
                self.queries += 1;
                ControlFlow::Continue(())
            }

            fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<DataFusionError> {
                self.queries -= 1;
                ControlFlow::Continue(())
            }

            fn pre_visit_expr(&mut self, e: &mut SqlExpr) -> ControlFlow<DataFusionError> {
                if self.queries == 0
                    && let SqlExpr::Function(f) = e
                    && self.mapper.functions.is_aggregate(f)
                    && let Some(filter) = &mut f.filter
                    && let Err(err) = self.mapper.map_predicate(filter, false)
                {
                    return ControlFlow::Break(err);
                }
                ControlFlow::Continue(())
            }
        }
        match VisitMut::visit(
            e,
            &mut Filters {
                mapper: self,
                queries: 0,
            },
        ) {
            ControlFlow::Break(err) => Err(err),
            ControlFlow::Continue(()) => Ok(()),
        }
    }

    /// Rewrites `select` (see the parent module's docs); `order_by` is the query's `ORDER BY`
    /// when its body is this one `SELECT`. Returns what the `ORDER BY` must replace: each
    /// `GROUP BY` key expression as written, and what names it now (see
    /// [`Mapper::map_group_keys`]); empty when no key changed.
    fn map_select(
        &self,
        select: &mut Select,
        order_by: &[OrderByExpr],
    ) -> Result<Vec<(SqlExpr, SqlExpr)>> {
        let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(k, _) if k.is_empty());
        let aggregated = grouped
            || select.projection.iter().any(|i| self.has_aggregate(i))
            || select
                .having
                .as_ref()
                .is_some_and(|h| self.expr_has_aggregate(h));
        if matches!(select.distinct, Some(Distinct::Distinct)) && !aggregated {
            self.distinct_to_group_by(select)?;
        }
        if let Some(w) = &mut select.selection {
            self.map_predicate(w, true)?;
        }
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                self.map_aggregate_filters(e)?;
            }
        }
        if let Some(h) = &mut select.having {
            self.map_aggregate_filters(h)?;
        }
        let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(k, _) if k.is_empty());
        if grouped {
            return self.map_group_keys(select, order_by);
        }
        if !aggregated {
            for item in &mut select.projection {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    self.map_select_item(e)?;
                }
            }
        }
        Ok(Vec::new())
    }

    fn has_aggregate(&self, item: &SelectItem) -> bool {
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                self.expr_has_aggregate(e)
            }
            _ => false,
        }
    }

    /// Whether `e` calls an aggregate function (outside subqueries).
    fn expr_has_aggregate(&self, e: &SqlExpr) -> bool {
        struct Find<'f> {
            functions: &'f Functions,
            queries: usize,
        }
        impl Visitor for Find<'_> {
            type Break = ();
            fn pre_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
                self.queries += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
                self.queries -= 1;
                ControlFlow::Continue(())
            }
            fn pre_visit_expr(&mut self, e: &SqlExpr) -> ControlFlow<()> {
                match e {
                    SqlExpr::Function(f) if self.queries == 0 && self.functions.is_aggregate(f) => {
                        ControlFlow::Break(())
                    }
                    _ => ControlFlow::Continue(()),
                }
            }
        }
        e.visit(&mut Find {
            functions: self.functions,
            queries: 0,
        })
        .is_break()
    }

    /// `SELECT DISTINCT items` without aggregates is `SELECT items GROUP BY <every item>`: over
    /// a multi-value column, that groups by its values, as Druid plans `DISTINCT` as a
    /// grouping.
    fn distinct_to_group_by(&self, select: &mut Select) -> Result<()> {
        let mut reads_multi_value = false;
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    let mut e = e.clone();
                    reads_multi_value |= !self.lift(&mut e)?.is_empty();
                }
                _ if self.columns.any() => {
                    return Err(DataFusionError::Plan(
                        "SELECT DISTINCT * over multi-value columns is not supported: list the \
                         columns (SELECT DISTINCT a, b ...), which then group by their values"
                            .to_string(),
                    ));
                }
                _ => return Ok(()),
            }
        }
        if reads_multi_value {
            select.distinct = None;
            select.group_by = GroupByExpr::Expressions(
                (1..=select.projection.len())
                    .map(|i| SqlExpr::value(Value::Number(i.to_string(), false)))
                    .collect(),
                Vec::new(),
            );
        }
        Ok(())
    }

    /// A select item of a `SELECT` without aggregates: an expression over columns by value is
    /// the list of its values, returned as a multi-value string.
    fn map_select_item(&self, e: &mut SqlExpr) -> Result<()> {
        if is_column_ref(e) {
            return Ok(());
        }
        let mut lifted = e.clone();
        let uses = self.lift(&mut lifted)?;
        if uses.by_value.is_empty() {
            *e = lifted;
            return Ok(());
        }
        self.check(&uses, e)?;
        let text = SqlExpr::value(Value::SingleQuotedString(e.to_string()));
        *e = function_call(RESULT, vec![self.map_values(&lifted, &uses), text]);
        Ok(())
    }

    /// The `GROUP BY` keys of a grouped `SELECT`: each key over columns by value becomes
    /// `__mv_key(<its values>)`, a bare multi-value column key becomes `__mv_key(col)` when the
    /// select list, `HAVING` or `ORDER BY` computes something from it, and every occurrence of
    /// a key in the select list, `GROUP BY` and `HAVING` is replaced by its rewritten form, so
    /// that it names the group's value. Returns the replacements for the `ORDER BY`: a key by
    /// the alias of the select item holding it when there is one (`ORDER BY` resolves names
    /// against the select list first, where a bare column key's item is `__mv_key(col) AS
    /// col`), else by its rewritten form.
    fn map_group_keys(
        &self,
        select: &mut Select,
        order_by: &[OrderByExpr],
    ) -> Result<Vec<(SqlExpr, SqlExpr)>> {
        let keys: Vec<SqlExpr> = plain_group_keys(select)
            .iter()
            .map(|k| key_expression(k, &select.projection, |k| self.columns.is_column(k)).clone())
            .collect();
        let mut pairs: Vec<(SqlExpr, SqlExpr)> = Vec::new();
        for key in keys {
            if pairs.iter().any(|(o, _)| *o == key) {
                continue;
            }
            let rewritten = if let Some(c) = self.columns.multi_value(&key) {
                if self.computed_from(select, order_by, &c) {
                    function_call(KEY, vec![key.clone()])
                } else {
                    key.clone()
                }
            } else {
                let mut lifted = key.clone();
                let uses = self.lift(&mut lifted)?;
                if !uses.by_value.is_empty() {
                    self.check(&uses, &key)?;
                    function_call(KEY, vec![self.map_values(&lifted, &uses)])
                } else {
                    lifted
                }
            };
            pairs.push((key, rewritten));
        }
        if pairs.iter().all(|(o, r)| o == r) {
            return Ok(Vec::new());
        }
        for item in &mut select.projection {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    let whole = pairs.iter().find(|(o, r)| o != r && self.is_key(o, e));
                    match (whole, column_alias(e)) {
                        (Some((_, r)), Some(alias)) => {
                            *item = SelectItem::ExprWithAlias {
                                expr: r.clone(),
                                alias,
                            };
                        }
                        _ => self.replace_keys(e, &pairs),
                    }
                }
                SelectItem::ExprWithAlias { expr, .. } => {
                    self.replace_keys(expr, &pairs);
                }
                _ => {}
            }
        }
        if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
            for k in keys {
                self.replace_keys(k, &pairs);
            }
        }
        // HAVING resolves identifiers against the FROM clause first; ORDER BY against the
        // select list, where a bare column key's item is now `__mv_key(col) AS col`: it names
        // a rewritten key by the alias of the select item holding it.
        if let Some(h) = &mut select.having {
            self.replace_keys(h, &pairs);
        }
        let by_alias: Vec<(SqlExpr, SqlExpr)> = pairs
            .into_iter()
            .map(|(o, r)| {
                let alias = select.projection.iter().find_map(|i| match i {
                    SelectItem::ExprWithAlias { expr, alias } if o != r && *expr == r => {
                        Some(SqlExpr::Identifier(alias.clone()))
                    }
                    _ => None,
                });
                (o, alias.unwrap_or(r))
            })
            .collect();
        Ok(by_alias)
    }

    /// Whether `e` is the key expression `key`: the same expression, or the same multi-value
    /// column qualified differently.
    fn is_key(&self, key: &SqlExpr, e: &SqlExpr) -> bool {
        key == e
            || self
                .columns
                .multi_value(key)
                .is_some_and(|c| self.columns.multi_value(e) == Some(c))
    }

    /// Replaces, in `e`, every occurrence of an original key expression of `pairs` (a bare
    /// column key also when written with another qualification) by its rewritten form, and
    /// looks no further into it; not inside aggregate and window calls and subqueries, which
    /// see whole rows.
    fn replace_keys(&self, e: &mut SqlExpr, pairs: &[(SqlExpr, SqlExpr)]) {
        struct Replace<'m, 'a> {
            mapper: &'m Mapper<'a>,
            pairs: &'m [(SqlExpr, SqlExpr)],
            scope: Scope,
        }
        impl VisitorMut for Replace<'_, '_> {
            type Break = ();

            fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
                self.scope.queries += 1;
                ControlFlow::Continue(())
            }

            fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
                self.scope.queries -= 1;
                ControlFlow::Continue(())
            }

            fn pre_visit_expr(&mut self, e: &mut SqlExpr) -> ControlFlow<()> {
                if !self.scope.open() {
                    self.scope.push(false);
                    return ControlFlow::Continue(());
                }
                let stop = if let Some((_, r)) =
                    self.pairs.iter().find(|(o, _)| self.mapper.is_key(o, e))
                {
                    *e = r.clone();
                    true
                } else {
                    matches!(e, SqlExpr::Function(f) if self.mapper.functions.is_opaque(f))
                        || is_opaque_form(e)
                };
                self.scope.push(stop);
                ControlFlow::Continue(())
            }

            fn post_visit_expr(&mut self, _e: &mut SqlExpr) -> ControlFlow<()> {
                self.scope.pop();
                ControlFlow::Continue(())
            }
        }
        let _ = VisitMut::visit(
            e,
            &mut Replace {
                mapper: self,
                pairs,
                scope: Scope::default(),
            },
        );
    }

    /// Whether the select list, `HAVING` or `ORDER BY` of `select` compute something from the
    /// column `c` (use it inside a larger expression, outside aggregates), rather than only
    /// return it.
    fn computed_from(&self, select: &Select, order_by: &[OrderByExpr], c: &Column) -> bool {
        let items = select.projection.iter().filter_map(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        });
        items
            .chain(select.having.as_ref())
            .chain(order_by.iter().map(|o| &o.expr))
            .any(|e| self.columns.multi_value(e).is_none() && self.reads(e, c))
    }

    /// Whether `e` reads the column `c` outside aggregate and window calls and subqueries.
    fn reads(&self, e: &SqlExpr, c: &Column) -> bool {
        struct Reads<'m, 'a> {
            mapper: &'m Mapper<'a>,
            column: &'m Column,
            scope: Scope,
        }
        impl Visitor for Reads<'_, '_> {
            type Break = ();
            fn pre_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
                self.scope.queries += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
                self.scope.queries -= 1;
                ControlFlow::Continue(())
            }
            fn pre_visit_expr(&mut self, e: &SqlExpr) -> ControlFlow<()> {
                let stop = self.scope.stopped == 0
                    && (matches!(e, SqlExpr::Function(f) if self.mapper.functions.is_opaque(f))
                        || is_opaque_form(e));
                self.scope.push(stop);
                if self.scope.open()
                    && self.mapper.columns.multi_value(e).as_ref() == Some(self.column)
                {
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
            fn post_visit_expr(&mut self, _e: &SqlExpr) -> ControlFlow<()> {
                self.scope.pop();
                ControlFlow::Continue(())
            }
        }
        e.visit(&mut Reads {
            mapper: self,
            column: c,
            scope: Scope::default(),
        })
        .is_break()
    }
}

/// `x <> y`, `NOT IN`, `NOT LIKE`, `NOT ILIKE`, `NOT SIMILAR TO`, `NOT RLIKE`, `NOT BETWEEN`,
/// `IS NOT NULL`, `IS NOT TRUE`, `IS NOT FALSE`, `IS NOT UNKNOWN` and `IS DISTINCT FROM` as their
/// positive form and `true`; any other predicate as itself and `false`.
fn positive_form(e: SqlExpr) -> (SqlExpr, bool) {
    match e {
        SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::NotEq,
            right,
        } => (
            SqlExpr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            },
            true,
        ),
        SqlExpr::InList {
            expr,
            list,
            negated: true,
        } => (
            SqlExpr::InList {
                expr,
                list,
                negated: false,
            },
            true,
        ),
        SqlExpr::Between {
            expr,
            negated: true,
            low,
            high,
        } => (
            SqlExpr::Between {
                expr,
                negated: false,
                low,
                high,
            },
            true,
        ),
        SqlExpr::Like {
            negated: true,
            any,
            expr,
            pattern,
            escape_char,
        } => (
            SqlExpr::Like {
                negated: false,
                any,
                expr,
                pattern,
                escape_char,
            },
            true,
        ),
        SqlExpr::ILike {
            negated: true,
            any,
            expr,
            pattern,
            escape_char,
        } => (
            SqlExpr::ILike {
                negated: false,
                any,
                expr,
                pattern,
                escape_char,
            },
            true,
        ),
        SqlExpr::SimilarTo {
            negated: true,
            expr,
            pattern,
            escape_char,
        } => (
            SqlExpr::SimilarTo {
                negated: false,
                expr,
                pattern,
                escape_char,
            },
            true,
        ),
        SqlExpr::RLike {
            negated: true,
            expr,
            pattern,
            regexp,
        } => (
            SqlExpr::RLike {
                negated: false,
                expr,
                pattern,
                regexp,
            },
            true,
        ),
        SqlExpr::IsNotNull(x) => (SqlExpr::IsNull(x), true),
        SqlExpr::IsNotTrue(x) => (SqlExpr::IsTrue(x), true),
        SqlExpr::IsNotFalse(x) => (SqlExpr::IsFalse(x), true),
        SqlExpr::IsNotUnknown(x) => (SqlExpr::IsUnknown(x), true),
        SqlExpr::IsDistinctFrom(a, b) => (SqlExpr::IsNotDistinctFrom(a, b), true),
        other => (other, false),
    }
}

fn lambda(param: &str, body: SqlExpr) -> SqlExpr {
    SqlExpr::Lambda(LambdaFunction {
        params: OneOrManyWithParens::One(LambdaFunctionParameter {
            name: Ident::new(param),
            data_type: None,
        }),
        body: Box::new(body),
        syntax: LambdaSyntax::Arrow,
    })
}

/// The name a bare column select item has, to keep it once the item is rewritten.
fn column_alias(e: &SqlExpr) -> Option<Ident> {
    match e {
        SqlExpr::Identifier(id) => Some(id.clone()),
        SqlExpr::CompoundIdentifier(ids) => ids.last().cloned(),
        SqlExpr::Nested(inner) => column_alias(inner),
        _ => None,
    }
}

/// Where a walk over an expression is: which nodes on the current path stopped it (calls and
/// forms that take whole rows or arrays, whose insides the walk leaves alone), and how deep it is
/// in subqueries. Shared by the walks of this module.
#[derive(Debug, Default)]
struct Scope {
    /// Per visited node: whether it stopped the walk below it.
    stops: Vec<bool>,
    /// How many nodes on the current path stopped the walk.
    stopped: usize,
    /// Depth of subqueries on the current path.
    queries: usize,
}

impl Scope {
    /// Neither below a stopping node nor inside a subquery.
    fn open(&self) -> bool {
        self.stopped == 0 && self.queries == 0
    }

    /// Entering a node; `stop` if the walk below it is closed.
    fn push(&mut self, stop: bool) {
        self.stops.push(stop);
        self.stopped += usize::from(stop);
    }

    /// Leaving the node last entered.
    fn pop(&mut self) {
        if self.stops.pop() == Some(true) {
            self.stopped -= 1;
        }
    }
}

/// The lifting walk of [`Mapper::lift`]: records by-value uses, lifts the arguments of
/// functions taking whole arrays, and does not look into opaque calls, forms and subqueries.
struct Lift<'m, 'a> {
    mapper: &'m Mapper<'a>,
    uses: Uses,
    scope: Scope,
}

impl VisitorMut for Lift<'_, '_> {
    type Break = DataFusionError;

    fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<DataFusionError> {
        self.scope.queries += 1;
        if self.scope.stopped == 0 {
            self.uses.subquery = true;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<DataFusionError> {
        self.scope.queries -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut SqlExpr) -> ControlFlow<DataFusionError> {
        if !self.scope.open() {
            self.scope.push(false);
            return ControlFlow::Continue(());
        }
        let stop = match e {
            SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_) => {
                if let Some(c) = self.mapper.columns.multi_value(e) {
                    self.uses.add_by_value(c, e);
                }
                false
            }
            SqlExpr::Function(f) if self.mapper.functions.is_opaque(f) => true,
            SqlExpr::Function(f) if takes_whole_arrays(&function_name(f)) => {
                if let Err(err) = self.mapper.lift_array_arguments(f, &mut self.uses) {
                    return ControlFlow::Break(err);
                }
                // The arguments are done; the walk below sees them as opaque.
                true
            }
            other => is_opaque_form(other),
        };
        self.scope.push(stop);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _e: &mut SqlExpr) -> ControlFlow<DataFusionError> {
        self.scope.pop();
        ControlFlow::Continue(())
    }
}

/// Replaces the by-value uses of the columns of `uses` with their lambda parameters (the same
/// places [`Lift`] found them).
struct Substitute<'m, 'a> {
    mapper: &'m Mapper<'a>,
    uses: &'m Uses,
    params: &'m [String],
    scope: Scope,
}

impl VisitorMut for Substitute<'_, '_> {
    type Break = ();

    fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.scope.queries += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.scope.queries -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut SqlExpr) -> ControlFlow<()> {
        if !self.scope.open() {
            self.scope.push(false);
            return ControlFlow::Continue(());
        }
        let stop = match e {
            SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_) => {
                if let Some(c) = self.mapper.columns.multi_value(e)
                    && let Some(i) = self.uses.by_value.iter().position(|(x, _)| *x == c)
                {
                    *e = SqlExpr::Identifier(Ident::new(&self.params[i]));
                }
                false
            }
            SqlExpr::Function(f) => self.mapper.functions.is_opaque(f),
            other => is_opaque_form(other),
        };
        self.scope.push(stop);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _e: &mut SqlExpr) -> ControlFlow<()> {
        self.scope.pop();
        ControlFlow::Continue(())
    }
}

/// The `SELECT`s that are a query's body, directly or through set operations (a parenthesized
/// query is a query of its own, visited on its own).
fn body_selects<'a>(body: &'a SetExpr, out: &mut Vec<&'a Select>) {
    match body {
        SetExpr::Select(s) => out.push(s),
        SetExpr::SetOperation { left, right, .. } => {
            body_selects(left, out);
            body_selects(right, out);
        }
        _ => {}
    }
}

fn body_selects_mut<'a>(body: &'a mut SetExpr, out: &mut Vec<&'a mut Select>) {
    match body {
        SetExpr::Select(s) => out.push(s),
        SetExpr::SetOperation { left, right, .. } => {
            body_selects_mut(left, out);
            body_selects_mut(right, out);
        }
        _ => {}
    }
}

/// The expressions of a query's `ORDER BY` (none for `ORDER BY ALL`).
fn order_by_exprs(query: &Query) -> &[OrderByExpr] {
    match &query.order_by {
        Some(o) => match &o.kind {
            OrderByKind::Expressions(exprs) => exprs,
            OrderByKind::All(_) => &[],
        },
        None => &[],
    }
}

/// The plain `GROUP BY` keys of `select`: none with `ROLLUP`, `CUBE`, `GROUPING SETS` or
/// `GROUP BY ALL` (grouping sets are not unnested either).
fn plain_group_keys(select: &Select) -> &[SqlExpr] {
    match &select.group_by {
        GroupByExpr::Expressions(keys, modifiers)
            if modifiers.is_empty()
                && !keys.iter().any(|k| {
                    matches!(
                        k,
                        SqlExpr::Rollup(_) | SqlExpr::Cube(_) | SqlExpr::GroupingSets(_)
                    )
                }) =>
        {
            keys
        }
        _ => &[],
    }
}

/// The expression a `GROUP BY` key stands for: the select item of an ordinal (`GROUP BY 1`) or
/// of an alias that is not a column (`GROUP BY u`), else the key itself.
fn key_expression<'a>(
    key: &'a SqlExpr,
    projection: &'a [SelectItem],
    is_column: impl Fn(&SqlExpr) -> bool,
) -> &'a SqlExpr {
    let item = |i: usize| match projection.get(i) {
        Some(SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) => Some(e),
        _ => None,
    };
    match key {
        SqlExpr::Value(v) => match &v.value {
            Value::Number(n, _) => n
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(item)
                .unwrap_or(key),
            _ => key,
        },
        SqlExpr::Identifier(id) if !is_column(key) => projection
            .iter()
            .find_map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias } if alias.value == id.value => Some(expr),
                _ => None,
            })
            .unwrap_or(key),
        _ => key,
    }
}

fn is_column_ref(e: &SqlExpr) -> bool {
    match e {
        SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_) => true,
        SqlExpr::Nested(inner) => is_column_ref(inner),
        _ => false,
    }
}

/// Phase one: for every `SELECT`, in visiting order, the query `WITH <the CTEs in scope>
/// SELECT * FROM <its FROM>` when it is worth a probe (see the module docs).
struct CollectProbes<'a> {
    functions: &'a Functions,
    ctes: Vec<Option<With>>,
    probes: Vec<Option<Query>>,
}

impl Visitor for CollectProbes<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.ctes.push(query.with.clone());
        let order_by = order_by_exprs(query);
        let single = matches!(query.body.as_ref(), SetExpr::Select(_));
        let mut selects = Vec::new();
        body_selects(&query.body, &mut selects);
        for select in selects {
            let candidate = !select.from.is_empty() && {
                let params = Cell::new(0);
                let mapper = Mapper {
                    columns: &AssumeMultiValue,
                    functions: self.functions,
                    params: &params,
                };
                let mut copy = select.clone();
                let order_by = if single { order_by } else { &[] };
                mapper
                    .map_select(&mut copy, order_by)
                    .map_or(true, |_| copy != *select)
            };
            let probe = candidate.then(|| self.probe(select));
            self.probes.push(probe);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }
}

impl CollectProbes<'_> {
    fn probe(&self, select: &Select) -> Query {
        let cte_tables: Vec<Cte> = self
            .ctes
            .iter()
            .flatten()
            .flat_map(|w| w.cte_tables.iter().cloned())
            .collect();
        let recursive = self.ctes.iter().flatten().any(|w| w.recursive);
        let probe = Select {
            select_token: AttachedToken::empty(),
            optimizer_hints: vec![],
            distinct: None,
            select_modifiers: None,
            top: None,
            top_before_distinct: false,
            projection: vec![SelectItem::Wildcard(WildcardAdditionalOptions::default())],
            exclude: None,
            into: None,
            from: select.from.clone(),
            lateral_views: vec![],
            prewhere: None,
            selection: None,
            connect_by: vec![],
            group_by: GroupByExpr::Expressions(vec![], vec![]),
            cluster_by: vec![],
            distribute_by: vec![],
            sort_by: vec![],
            having: None,
            named_window: vec![],
            qualify: None,
            window_before_qualify: false,
            value_table_mode: None,
            flavor: SelectFlavor::Standard,
        };
        Query {
            with: (!cte_tables.is_empty()).then(|| With {
                with_token: AttachedToken::empty(),
                recursive,
                cte_tables,
            }),
            body: Box::new(SetExpr::Select(Box::new(probe))),
            order_by: None,
            limit_clause: None,
            fetch: None,
            locks: vec![],
            for_clause: None,
            settings: None,
            format_clause: None,
            pipe_operators: vec![],
        }
    }
}

/// Phase two: the rewrite applied to the `SELECT`s probed in phase one (same visiting order).
struct ApplyMapping<'a> {
    normalize: bool,
    functions: &'a Functions,
    params: &'a Cell<usize>,
    schemas: Vec<Option<DFSchemaRef>>,
    next: usize,
}

impl VisitorMut for ApplyMapping<'_> {
    type Break = DataFusionError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<DataFusionError> {
        let single = matches!(query.body.as_ref(), SetExpr::Select(_));
        let order_by: Vec<OrderByExpr> = if single {
            order_by_exprs(query).to_vec()
        } else {
            Vec::new()
        };
        let Query {
            body,
            order_by: query_order_by,
            ..
        } = query;
        let mut selects = Vec::new();
        body_selects_mut(body, &mut selects);
        for select in selects {
            let schema = self.schemas.get(self.next).cloned().flatten();
            self.next += 1;
            let Some(schema) = schema else {
                continue;
            };
            let resolver = Resolver {
                schema: &schema,
                normalize: self.normalize,
            };
            let mapper = Mapper {
                columns: &resolver,
                functions: self.functions,
                params: self.params,
            };
            let pairs = match mapper.map_select(select, &order_by) {
                Ok(p) => p,
                Err(e) => return ControlFlow::Break(e),
            };
            // ORDER BY belongs to the query; it can name the keys of a body that is one SELECT.
            if single
                && !pairs.is_empty()
                && let Some(o) = query_order_by
                && let OrderByKind::Expressions(exprs) = &mut o.kind
            {
                for o in exprs {
                    mapper.replace_keys(&mut o.expr, &pairs);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    /// For each `SELECT` of `sql`, in visiting order, whether it is worth a probe.
    fn probed(sql: &str) -> Vec<bool> {
        let functions = Functions {
            aggregates: ["count", "sum", "min", "max"].map(String::from).into(),
            windows: ["row_number"].map(String::from).into(),
        };
        let stmt = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        let mut collect = CollectProbes {
            functions: &functions,
            ctes: Vec::new(),
            probes: Vec::new(),
        };
        let _ = Visit::visit(&stmt, &mut collect);
        collect.probes.iter().map(Option::is_some).collect()
    }

    #[test]
    fn typical_queries_plan_no_probe() {
        for sql in [
            "SELECT page, COUNT(*) AS c FROM w WHERE channel = '#en' \
             AND TIME_IN_INTERVAL(__time, '2015-09-12/P1D') GROUP BY page ORDER BY c DESC LIMIT 10",
            "SELECT TIME_FLOOR(__time, 'PT1H') AS h, SUM(added) AS a FROM w GROUP BY 1 ORDER BY 1",
            "SELECT page, added FROM w WHERE countryName IS NOT NULL AND page IN ('a', 'b') \
             AND channel <> '#fr' LIMIT 5",
            "SELECT COUNT(*) AS c, MAX(added) AS m FROM w WHERE __time >= TIMESTAMP '2015-09-12'",
            "SELECT tags, COUNT(*) AS c FROM w GROUP BY tags ORDER BY tags",
        ] {
            assert_eq!(probed(sql), [false], "{sql}");
        }
    }

    #[test]
    fn expressions_that_may_read_multi_value_columns_are_probed() {
        for sql in [
            "SELECT UPPER(tags) AS u FROM w",
            "SELECT DISTINCT tags FROM w",
            "SELECT UPPER(tags) AS u, COUNT(*) AS c FROM w GROUP BY 1",
            "SELECT tags, COUNT(*) AS c FROM w GROUP BY tags HAVING tags <> 'a'",
            "SELECT page FROM w WHERE tags LIKE 'a%'",
            "SELECT page FROM w WHERE tags = more",
            "SELECT COUNT(*) FILTER (WHERE tags = 'a') AS c FROM w",
        ] {
            assert_eq!(probed(sql), [true], "{sql}");
        }
        // Per SELECT, the outer one first: grouping by a bare column needs no rewrite (the rule
        // unnests it if the subquery made it multi-value).
        assert_eq!(
            probed("SELECT u, COUNT(*) AS c FROM (SELECT UPPER(tags) AS u FROM w) GROUP BY u"),
            [false, true]
        );
    }
}
