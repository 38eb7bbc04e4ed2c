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
//! the SQL AST, before planning, by [`map_multi_value_group_keys`] (ADR 0013). For each
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

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, DFSchema, DFSchemaRef, Result, TableReference, UnnestOptions};
use datafusion::config::ConfigOptions;
use datafusion::execution::context::SessionState;
use datafusion::functions_nested::expr_fn::{array_has, array_has_any, cardinality, make_array};
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Operator, lit, when,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    Cte, Expr as SqlExpr, GroupByExpr, Ident, LambdaFunction, LambdaFunctionParameter,
    LambdaSyntax, OneOrManyWithParens, OrderBy, OrderByKind, Query, Select, SelectFlavor,
    SelectItem, SetExpr, Statement as SqlStatement, Value, Visit, VisitMut, Visitor, VisitorMut,
    WildcardAdditionalOptions, With, visit_expressions, visit_expressions_mut,
};

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
            if (maps_multi_value(e, &schema)
                || field
                    .metadata()
                    .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY))
                && matches!(
                    field.data_type(),
                    datafusion::arrow::datatypes::DataType::List(_)
                )
            {
                let name = e.schema_name().to_string();
                // Marked multi-value (a mapped key's field is not) so that it is unnested.
                let marker = datafusion::common::metadata::FieldMetadata::from(
                    std::collections::BTreeMap::from([(
                        dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
                        "true".to_string(),
                    )]),
                );
                extra.push(e.clone().alias_with_metadata(&name, Some(marker)));
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

/// Whether `e` is `array_transform(mv, ...)` over a multi-value column `mv`: a scalar
/// expression mapped over each value ([`map_multi_value_group_keys`] writes keys so), whose
/// result is a multi-value string too.
fn maps_multi_value(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e, Expr::HigherOrderFunction(f)
        if f.func.name() == "array_transform"
            && f.args.first().is_some_and(|a| is_multi_value(a, schema)))
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

// Scalar expressions over a multi-value column as `GROUP BY` keys: an AST rewrite before
// planning (see the module docs and docs/adr/0013-multi-value-expression-keys.md).

/// The lambda parameter of a mapped key: one value of the multi-value column.
const VALUE_PARAM: &str = "__mv_value";

/// Rewrites every plain `GROUP BY` key of `stmt` that is a scalar expression over exactly one
/// multi-value column into `array_transform(mv, __mv_value -> <the expression over the value>)`,
/// and the same expression wherever the select list, `HAVING` and `ORDER BY` repeat it (outside
/// aggregate and window calls), so that [`MultiValueRule`] unnests the mapped values as the key
/// (see the module docs). Which columns are multi-value is learned by planning the `FROM` clause
/// of each `SELECT` that has such a candidate key on its own, with the `WITH` clauses in scope;
/// a `FROM` clause that does not plan alone (say, a lateral reference) leaves its `SELECT`
/// unchanged. Run after the other AST rewrites, just before planning.
///
/// # Errors
/// None today: a probe's planning error leaves the query as it is, to fail (or not) when it is
/// planned.
pub async fn map_multi_value_group_keys(
    state: &SessionState,
    stmt: &mut DFStatement,
) -> Result<()> {
    let query = match stmt {
        DFStatement::Statement(s) => match s.as_mut() {
            SqlStatement::Query(q) => q.as_mut(),
            _ => return Ok(()),
        },
        DFStatement::Explain(e) => {
            return Box::pin(map_multi_value_group_keys(state, &mut e.statement)).await;
        }
        _ => return Ok(()),
    };
    let normalize = state.config_options().sql_parser.enable_ident_normalization;
    let mut collect = CollectProbes {
        ctes: Vec::new(),
        probes: Vec::new(),
    };
    let _ = Visit::visit(&*query, &mut collect);
    if collect.probes.iter().all(Option::is_none) {
        return Ok(());
    }
    let mut schemas = Vec::with_capacity(collect.probes.len());
    for probe in collect.probes {
        let schema = match probe {
            Some(q) => state
                .statement_to_plan(DFStatement::Statement(Box::new(SqlStatement::Query(
                    Box::new(q),
                ))))
                .await
                .ok()
                .map(|p| Arc::clone(p.schema())),
            None => None,
        };
        schemas.push(schema);
    }
    let whole_row: HashSet<String> = state
        .aggregate_functions()
        .keys()
        .chain(state.window_functions().keys())
        .map(|k| k.to_ascii_lowercase())
        .collect();
    let mut apply = ApplyMapping {
        normalize,
        schemas,
        next: 0,
        whole_row: &whole_row,
    };
    let _ = query.visit(&mut apply);
    Ok(())
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

/// Whether `e` could be a scalar expression over a column: not a bare column reference, and
/// naming some identifier. Only `SELECT`s with such a key have their `FROM` clause planned.
fn may_map(e: &SqlExpr) -> bool {
    !is_column_ref(e)
        && visit_expressions(e, |x| {
            if matches!(x, SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_)) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .is_break()
}

/// Whether `e` takes a multi-value column as one whole array rather than value by value: the
/// `MV_*`/`ARRAY_*`/`LIST_*` functions and DataFusion's other array functions, aggregate and
/// window calls (`whole_row`), array literals and subscripts, and subqueries.
fn takes_whole_array(e: &SqlExpr, whole_row: &HashSet<String>) -> bool {
    match e {
        SqlExpr::Function(f) => {
            let name = f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default();
            f.over.is_some()
                || whole_row.contains(&name)
                || name.starts_with("mv_")
                || name.starts_with("array")
                || name.starts_with("list_")
                || matches!(
                    name.as_str(),
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
        SqlExpr::Array(_)
        | SqlExpr::CompoundFieldAccess { .. }
        | SqlExpr::Subquery(_)
        | SqlExpr::Exists { .. }
        | SqlExpr::InSubquery { .. }
        | SqlExpr::Lambda(_) => true,
        _ => false,
    }
}

/// Phase one: for every `SELECT`, in visiting order, the query `WITH <the CTEs in scope>
/// SELECT * FROM <its FROM>` when one of its keys may need mapping.
struct CollectProbes {
    ctes: Vec<Option<With>>,
    probes: Vec<Option<Query>>,
}

impl Visitor for CollectProbes {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.ctes.push(query.with.clone());
        let mut selects = Vec::new();
        body_selects(&query.body, &mut selects);
        for select in selects {
            let candidate = !select.from.is_empty()
                && plain_group_keys(select)
                    .iter()
                    .any(|k| may_map(key_expression(k, &select.projection, |_| false)));
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

impl CollectProbes {
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

/// Resolves identifiers against the columns of a `FROM` clause.
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

    /// The column `e` names, when it is an identifier naming one.
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
                let (q, f) = self.schema.qualified_field_with_name(Some(&q), name).ok()?;
                (q, f)
            }
            SqlExpr::Nested(inner) => return self.column(inner),
            _ => return None,
        };
        let multi_value = field
            .metadata()
            .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY);
        Some((Column::new(qualifier.cloned(), field.name()), multi_value))
    }

    /// `e` as a mapped key, when it is a scalar expression over exactly one multi-value column
    /// that no function takes as a whole array.
    fn mapped(&self, e: &SqlExpr, whole_row: &HashSet<String>) -> Option<SqlExpr> {
        if !may_map(e) {
            return None;
        }
        let mut scan = ScanKey {
            resolver: self,
            whole_row,
            whole: Vec::new(),
            refs: Vec::new(),
            subquery: false,
        };
        let _ = e.visit(&mut scan);
        let (column, written, _) = scan.refs.first()?.clone();
        if scan.subquery || scan.refs.iter().any(|(c, _, whole)| *whole || *c != column) {
            return None;
        }
        let mut body = e.clone();
        let _ = visit_expressions_mut(&mut body, |x| {
            if matches!(x, SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_))
                && self.column(x).is_some_and(|(c, _)| c == column)
            {
                *x = SqlExpr::Identifier(Ident::new(VALUE_PARAM));
            }
            ControlFlow::<()>::Continue(())
        });
        Some(crate::rewrite::function_call(
            "array_transform",
            vec![
                written,
                SqlExpr::Lambda(LambdaFunction {
                    params: OneOrManyWithParens::One(LambdaFunctionParameter {
                        name: Ident::new(VALUE_PARAM),
                        data_type: None,
                    }),
                    body: Box::new(body),
                    syntax: LambdaSyntax::Arrow,
                }),
            ],
        ))
    }
}

/// The multi-value column references of a key: (column, as written, under a function taking
/// whole arrays).
struct ScanKey<'a> {
    resolver: &'a Resolver<'a>,
    whole_row: &'a HashSet<String>,
    whole: Vec<bool>,
    refs: Vec<(Column, SqlExpr, bool)>,
    subquery: bool,
}

impl Visitor for ScanKey<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.subquery = true;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &SqlExpr) -> ControlFlow<()> {
        let whole =
            self.whole.last().copied().unwrap_or(false) || takes_whole_array(e, self.whole_row);
        self.whole.push(whole);
        if matches!(e, SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_))
            && let Some((c, true)) = self.resolver.column(e)
        {
            self.refs.push((c, e.clone(), whole));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _e: &SqlExpr) -> ControlFlow<()> {
        self.whole.pop();
        ControlFlow::Continue(())
    }
}

/// Phase three: the mapping applied to the `SELECT`s probed in phase one (same visiting order).
struct ApplyMapping<'a> {
    normalize: bool,
    schemas: Vec<Option<DFSchemaRef>>,
    next: usize,
    whole_row: &'a HashSet<String>,
}

impl VisitorMut for ApplyMapping<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut selects = Vec::new();
        body_selects_mut(&mut query.body, &mut selects);
        let mut mapped = Vec::new();
        for select in selects {
            let schema = self.schemas.get(self.next).cloned().flatten();
            self.next += 1;
            if let Some(schema) = schema {
                mapped = self.map_select(select, &schema);
            }
        }
        // ORDER BY belongs to the query; it can name the keys of a body that is one SELECT.
        if !mapped.is_empty()
            && matches!(query.body.as_ref(), SetExpr::Select(_))
            && let Some(OrderBy {
                kind: OrderByKind::Expressions(exprs),
                ..
            }) = &mut query.order_by
        {
            for o in exprs {
                replace_keys(&mut o.expr, &mapped, self.whole_row);
            }
        }
        ControlFlow::Continue(())
    }
}

impl ApplyMapping<'_> {
    /// Maps the keys of `select`; returns the (original, mapped) key expressions.
    fn map_select(&self, select: &mut Select, schema: &DFSchema) -> Vec<(SqlExpr, SqlExpr)> {
        let resolver = Resolver {
            schema,
            normalize: self.normalize,
        };
        let mut pairs: Vec<(SqlExpr, SqlExpr)> = Vec::new();
        for key in plain_group_keys(select) {
            let e = key_expression(key, &select.projection, |k| resolver.column(k).is_some());
            if pairs.iter().any(|(o, _)| o == e) {
                continue;
            }
            if let Some(m) = resolver.mapped(e, self.whole_row) {
                pairs.push((e.clone(), m));
            }
        }
        if pairs.is_empty() {
            return pairs;
        }
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                replace_keys(e, &pairs, self.whole_row);
            }
        }
        if let Some(h) = &mut select.having {
            replace_keys(h, &pairs, self.whole_row);
        }
        if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
            for k in keys {
                replace_keys(k, &pairs, self.whole_row);
            }
        }
        pairs
    }
}

/// Replaces, in `e`, every occurrence of an original key expression by its mapped form, except
/// inside aggregate and window calls and subqueries (which see whole rows).
fn replace_keys(e: &mut SqlExpr, pairs: &[(SqlExpr, SqlExpr)], whole_row: &HashSet<String>) {
    struct Replace<'a> {
        pairs: &'a [(SqlExpr, SqlExpr)],
        whole_row: &'a HashSet<String>,
        skip: Vec<bool>,
    }
    impl VisitorMut for Replace<'_> {
        type Break = ();

        fn pre_visit_expr(&mut self, e: &mut SqlExpr) -> ControlFlow<()> {
            let skip = self.skip.last().copied().unwrap_or(false);
            if !skip && let Some((_, m)) = self.pairs.iter().find(|(o, _)| o == e) {
                *e = m.clone();
                self.skip.push(true);
                return ControlFlow::Continue(());
            }
            let whole = match e {
                SqlExpr::Function(f) => {
                    f.over.is_some()
                        || f.name
                            .0
                            .last()
                            .and_then(|p| p.as_ident())
                            .is_some_and(|i| self.whole_row.contains(&i.value.to_ascii_lowercase()))
                }
                SqlExpr::Subquery(_) | SqlExpr::Exists { .. } | SqlExpr::InSubquery { .. } => true,
                _ => false,
            };
            self.skip.push(skip || whole);
            ControlFlow::Continue(())
        }

        fn post_visit_expr(&mut self, _e: &mut SqlExpr) -> ControlFlow<()> {
            self.skip.pop();
            ControlFlow::Continue(())
        }
    }
    let _ = e.visit(&mut Replace {
        pairs,
        whole_row,
        skip: Vec::new(),
    });
}

#[cfg(test)]
mod tests;
