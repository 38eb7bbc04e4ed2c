//! SQL AST rewrites that give DataFusion Druid SQL's time syntax and semantics
//! (`docs/querying/sql-scalar.md`, `docs/querying/sql.md`), and [`plan_sql`], which parses,
//! rewrites and plans a query in one go.
//!
//! What DataFusion 55 already does natively (and is left alone):
//! - `TIMESTAMP '2015-09-12 00:00:00'` literals compare correctly with a
//!   `Timestamp(Millisecond)` `__time` column: the literal is typed `Timestamp(Nanosecond)` but
//!   the optimizer unwraps the cast, so filters reach table providers as
//!   `__time >= TimestampMillisecond(..)` and can prune by time.
//! - `BETWEEN`, `INTERVAL` arithmetic, `CURRENT_TIMESTAMP`, `DATE '...'`.
//!
//! What is rewritten (sqlparser AST, before planning):
//!
//! | Druid SQL | becomes | why |
//! |---|---|---|
//! | `FLOOR(ts TO unit)` / `CEIL(ts TO unit)` | `TIME_FLOOR(ts, 'PT1H')` / `TIME_CEIL(..)` | DataFusion: "FLOOR with datetime is not supported" |
//! | `EXTRACT(unit FROM ts)` | `TIME_EXTRACT(ts, 'UNIT')` | DataFusion's `date_part` returns INT/DOUBLE and Sunday-based `DOW`; Druid returns BIGINT and ISO `DOW` |
//! | `DATE_TRUNC('unit', ts)` | `TIME_FLOOR(ts, 'P1D')` | `sqlTimeZone`, and Druid's `decade`/`century`/`millennium` |
//! | `TIMESTAMPADD(unit, n, ts)` | `TIME_SHIFT(ts, 'PT1H', n)` | not in DataFusion |
//! | `TIMESTAMPDIFF(unit, a, b)` | `(TIMESTAMP_TO_MILLIS(b) - TIMESTAMP_TO_MILLIS(a)) / ms` or `SUBTRACT_MONTHS(b, a) / k` | not in DataFusion |
//! | `COUNT(DISTINCT x)` with `useApproximateCountDistinct` | `APPROX_COUNT_DISTINCT(x)` | Druid's default: approximate |
//! | `(SELECT ... ORDER BY x)` as a sub-query, without `LIMIT`/`OFFSET`/`FETCH` | the same without `ORDER BY` | Calcite drops it (`isRemoveSortInSubQuery`); Druid returns such rows in scan order |
//! | `JSON_VALUE(x, path RETURNING BIGINT)` | `TRY_CAST(TRY_CAST(JSON_VALUE(x, path) AS DOUBLE) AS BIGINT)` (`DOUBLE`/`FLOAT`: one `TRY_CAST`; `VARCHAR`: none) | DataFusion's planner rejects the clause |
//!
//! When planning ([`sql_to_logical_plan`]), unaliased select items that are not column
//! references are also named `EXPR$n`, as Calcite names them (see [`crate::naming`]).
//!
//! FLOOR/CEIL units are Druid's (`TimeUnits.toPeriod`): SECOND `PT1S`, MINUTE `PT1M`, HOUR
//! `PT1H`, DAY `P1D`, WEEK `P1W`, MONTH `P1M`, QUARTER `P3M`, YEAR `P1Y`.
//!
//! With a non-UTC `sqlTimeZone` ([`RewriteOptions::time_zone`]) the rewrites also apply Druid's
//! session time zone: the time functions above and user-written `TIME_FLOOR`, `TIME_CEIL`,
//! `TIME_SHIFT`, `TIME_EXTRACT`, `TIME_FORMAT`, `TIME_PARSE` and `TIME_IN_INTERVAL` calls
//! without a time zone argument (or with a NULL one) get the session zone, and
//! `TIMESTAMP '...'` literals are read as local time in it (rewritten to
//! `MILLIS_TO_TIMESTAMP(<millis>)`, which folds to a `Timestamp(Millisecond)` literal).

use std::ops::ControlFlow;

use datafusion::common::{DataFusionError, Result};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::{SQLOptions, SessionState};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, CeilFloorKind, DataType as SqlDataType, DateTimeField,
    DuplicateTreatment, ExactNumberInfo, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArgumentList, FunctionArguments, Ident, ObjectName, Query,
    Statement, TableFactor, TimezoneInfo, Value, VisitMut, VisitorMut, visit_expressions_mut,
};

use dolmen_common::time::parse_iso_in_zone;
use dolmen_common::zone::Zone;

/// Options for [`rewrite_statement_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewriteOptions {
    /// Druid's `sqlTimeZone` context parameter. `None` or UTC leaves time zones at UTC (the
    /// functions' default); any other zone is applied as described in the module docs.
    pub time_zone: Option<Zone>,
    /// Druid's `useApproximateCountDistinct`: `COUNT(DISTINCT x)` becomes
    /// `APPROX_COUNT_DISTINCT(x)` ([`crate::functions::approx`]). Druid's default is true; the
    /// engine passes the request's value.
    pub approximate_count_distinct: bool,
}

impl RewriteOptions {
    /// Options applying `sqlTimeZone` = `tz`.
    pub fn with_time_zone(tz: Zone) -> Self {
        RewriteOptions {
            time_zone: Some(tz),
            approximate_count_distinct: false,
        }
    }

    fn zone(&self) -> Option<&Zone> {
        self.time_zone.as_ref().filter(|tz| !tz.is_utc())
    }
}

/// Applies the module's rewrites (UTC session time zone) to `stmt` in place.
///
/// # Errors
/// A plan error for Druid syntax with an unsupported unit (e.g. `FLOOR(x TO DECADE)`).
pub fn rewrite_statement(stmt: &mut Statement) -> Result<()> {
    rewrite_statement_with(stmt, &RewriteOptions::default())
}

/// Applies the module's rewrites to `stmt` in place, with `sqlTimeZone` from `opts`.
///
/// # Errors
/// As [`rewrite_statement`].
pub fn rewrite_statement_with(stmt: &mut Statement, opts: &RewriteOptions) -> Result<()> {
    let _ = VisitMut::visit(stmt, &mut UnnestArrayLiterals);
    let _ = VisitMut::visit(stmt, &mut SubquerySortRemoval::default());
    let flow = visit_expressions_mut(stmt, |expr| match rewrite_expr(expr, opts) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => ControlFlow::Break(e),
    });
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// `ARRAY[a, b]` array literals inside the arguments of an `UNNEST` table factor become
/// `make_array(a, b)`, the call DataFusion plans such a literal to anyway. DataFusion 55 plans
/// the elements of an array literal without the outer query's columns, so the lateral
/// `FROM t, UNNEST(ARRAY[t.dim4, t.dim5]) AS u(d45)` of Druid's unnest tutorial failed with "No
/// field named dim4"; a function call's arguments are planned with them (and then by
/// [`crate::lateral_unnest`]). An empty `ARRAY[]` is left alone.
struct UnnestArrayLiterals;

impl VisitorMut for UnnestArrayLiterals {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::UNNEST { array_exprs, .. } = factor {
            for e in array_exprs.iter_mut() {
                unnest_rows_without_values_as_null(e);
                let _ = visit_expressions_mut(e, |e| {
                    if let Expr::Array(a) = e
                        && !a.elem.is_empty()
                    {
                        *e = function_call("make_array", std::mem::take(&mut a.elem));
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
        }
        ControlFlow::Continue(())
    }
}

/// The `ORDER BY` of a sub-query (a derived table, a `WITH` item, a `UNION` branch, an `IN` or
/// scalar sub-query) without `LIMIT`, `OFFSET` or `FETCH` is removed, as Calcite's
/// `SqlToRelConverter` removes it (`Config.isRemoveSortInSubQuery`, on in Druid): such an order
/// means nothing to the enclosing query. Druid's answers show it: `SELECT c FROM (SELECT a c FROM
/// t ORDER BY c ASC)` and the same with `DESC` give the rows in the same (scan) order (quidem
/// `qaArray/sql_order_by`). The outermost query keeps its `ORDER BY`.
#[derive(Default)]
struct SubquerySortRemoval {
    /// Queries entered and not yet left: 1 inside the outermost one.
    depth: usize,
}

impl VisitorMut for SubquerySortRemoval {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        if self.depth > 1
            && query.limit_clause.is_none()
            && query.fetch.is_none()
            && query.order_by.is_some()
        {
            query.order_by = None;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

/// `UNNEST(MV_TO_ARRAY(x))`: a row of `x` without values (null or empty) unnests to one null
/// row, as Druid unnests a multi-value dimension (its selector presents such a row as one null
/// value; Druid's quidem `qaUnnest/mv_sql_col_datatype_mv`: 17 rows for three rows of five values,
/// a null row and an empty row). `MV_TO_ARRAY` itself keeps a null row null (Druid's
/// `CalciteArraysQueryTest`), so only the `UNNEST` argument is rewritten:
/// `CASE WHEN cardinality(MV_TO_ARRAY(x)) > 0 THEN MV_TO_ARRAY(x) ELSE make_array(CAST(NULL AS
/// VARCHAR)) END`.
fn unnest_rows_without_values_as_null(e: &mut Expr) {
    let Expr::Function(f) = e else { return };
    if !ident_name(f).is_some_and(|n| n.eq_ignore_ascii_case("mv_to_array")) {
        return;
    }
    let call = e.clone();
    let null_element = function_call(
        "make_array",
        vec![Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(Expr::Value(Value::Null.into())),
            data_type: SqlDataType::Varchar(None),
            array: false,
            format: None,
        }],
    );
    *e = Expr::Case {
        case_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(
        ),
        end_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
            condition: Expr::BinaryOp {
                left: Box::new(function_call("cardinality", vec![call.clone()])),
                op: BinaryOperator::Gt,
                right: Box::new(number_lit(0)),
            },
            result: call,
        }],
        else_result: Some(Box::new(null_element)),
    };
}

/// Applies [`rewrite_statement_with`] to a DataFusion statement (including the statement inside
/// `EXPLAIN`, and the query of `COPY ... TO`).
///
/// # Errors
/// As [`rewrite_statement`].
pub fn rewrite_df_statement(stmt: &mut DFStatement, opts: &RewriteOptions) -> Result<()> {
    match stmt {
        DFStatement::Statement(s) => rewrite_statement_with(s, opts),
        DFStatement::Explain(e) => rewrite_df_statement(&mut e.statement, opts),
        DFStatement::CopyTo(c) => match &mut c.source {
            datafusion::sql::parser::CopyToSource::Query(q) => {
                let flow =
                    visit_expressions_mut(q.as_mut(), |expr| match rewrite_expr(expr, opts) {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(e) => ControlFlow::Break(e),
                    });
                match flow {
                    ControlFlow::Break(e) => Err(e),
                    ControlFlow::Continue(()) => Ok(()),
                }
            }
            datafusion::sql::parser::CopyToSource::Relation(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Parses `sql` with Druid's dialect ([`crate::dialect::DruidDialect`]), applies the Druid
/// rewrites (UTC), plans it and
/// returns the [`DataFrame`] (not yet executed; call `collect` or `execute_stream`).
///
/// Only read-only queries are allowed: DDL (`CREATE ...`), DML (`INSERT`, `COPY`) and
/// statements such as `SET` are rejected, as the Druid SQL query API is read-only. Use
/// [`plan_sql_with`] to choose otherwise or to apply `sqlTimeZone`.
///
/// The Druid time UDFs must be registered in `ctx` ([`crate::functions::register_druid_functions`]),
/// and the session should run with `datafusion.sql_parser.enable_ident_normalization = false`
/// (Druid identifiers are case-sensitive).
///
/// # Errors
/// Parse, rewrite and planning errors (exactly one statement is accepted).
pub async fn plan_sql(ctx: &SessionContext, sql: &str) -> Result<DataFrame> {
    plan_sql_with(ctx, sql, &RewriteOptions::default(), read_only()).await
}

/// Like [`plan_sql`] with rewrite options (`sqlTimeZone`) and the statements allowed.
///
/// # Errors
/// As [`plan_sql`], plus statements `sql_options` does not allow.
pub async fn plan_sql_with(
    ctx: &SessionContext,
    sql: &str,
    opts: &RewriteOptions,
    sql_options: SQLOptions,
) -> Result<DataFrame> {
    let state = ctx.state();
    let plan = sql_to_logical_plan(&state, sql, opts).await?;
    sql_options.verify_plan(&plan)?;
    ctx.execute_logical_plan(plan).await
}

/// Parses, rewrites and plans `sql` into an (unoptimized) [`LogicalPlan`] without executing
/// anything, e.g. for `EXPLAIN`-style inspection or to check a query's output schema.
///
/// # Errors
/// Parse, rewrite and planning errors.
pub async fn sql_to_logical_plan(
    state: &SessionState,
    sql: &str,
    opts: &RewriteOptions,
) -> Result<LogicalPlan> {
    let recursion_limit = state.config().options().sql_parser.recursion_limit.get();
    let mut statements = datafusion::sql::parser::DFParserBuilder::new(sql)
        .with_dialect(&crate::dialect::DruidDialect::default())
        .with_recursion_limit(recursion_limit)
        .build()?
        .parse_statements()?;
    if statements.len() != 1 {
        return Err(plan_error(
            "The query must be exactly one statement".to_string(),
        ));
    }
    let stmt = statements
        .pop_front()
        .ok_or_else(|| plan_error("Empty query".into()))?;
    statement_to_logical_plan(state, stmt, opts).await
}

/// Checks what Druid's validator rejects ([`crate::validate`]), names unaliased select items
/// (`EXPR$n`), reads window frames as Druid does ([`crate::frames`]), applies the Druid
/// rewrites (and maps expressions over multi-value columns,
/// [`crate::multivalue::map_multi_value_expressions`]), names the columns of derived tables
/// over joins as Calcite does ([`crate::derived`]) and plans an already parsed statement
/// into an (unoptimized) [`LogicalPlan`].
///
/// # Errors
/// Rewrite and planning errors.
pub async fn statement_to_logical_plan(
    state: &SessionState,
    mut stmt: DFStatement,
    opts: &RewriteOptions,
) -> Result<LogicalPlan> {
    if let DFStatement::Statement(s) = &mut stmt {
        crate::validate::validate_statement(s.as_ref())?;
        crate::naming::name_unaliased_expressions(s);
        crate::frames::rewrite_window_frames(s.as_mut());
    }
    rewrite_df_statement(&mut stmt, opts)?;
    crate::multivalue::map_multi_value_expressions(state, &mut stmt).await?;
    crate::derived::uniquify_derived_columns(state, &mut stmt).await?;
    let plan = state.statement_to_plan(stmt).await?;
    crate::validate::validate_plan(&plan)?;
    Ok(plan)
}

/// [`SQLOptions`] allowing only queries (no DDL, DML or `SET`).
pub fn read_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

fn plan_error(msg: String) -> DataFusionError {
    DataFusionError::Plan(msg)
}

fn ident_name(f: &Function) -> Option<String> {
    if f.name.0.len() != 1 {
        return None;
    }
    let ident = f.name.0[0].as_ident()?;
    Some(if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    })
}

/// Builds `name(args...)`.
pub fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn string_lit(s: &str) -> Expr {
    Expr::value(Value::SingleQuotedString(s.to_string()))
}

fn null_lit() -> Expr {
    Expr::value(Value::Null)
}

fn number_lit(n: i64) -> Expr {
    Expr::value(Value::Number(n.to_string(), false))
}

fn is_null_lit(e: &Expr) -> bool {
    matches!(e, Expr::Value(v) if v.value == Value::Null)
}

/// The ISO period of a `FLOOR`/`CEIL ... TO` unit (Druid's `TimeUnits.toPeriod`).
fn floor_period(field: &DateTimeField) -> Option<&'static str> {
    Some(match field {
        DateTimeField::Second | DateTimeField::Seconds => "PT1S",
        DateTimeField::Minute | DateTimeField::Minutes => "PT1M",
        DateTimeField::Hour | DateTimeField::Hours => "PT1H",
        DateTimeField::Day | DateTimeField::Days => "P1D",
        DateTimeField::Week(_) | DateTimeField::Weeks => "P1W",
        DateTimeField::Month | DateTimeField::Months => "P1M",
        DateTimeField::Quarter => "P3M",
        DateTimeField::Year | DateTimeField::Years => "P1Y",
        DateTimeField::Custom(id) => return floor_period_name(&id.value),
        _ => return None,
    })
}

fn floor_period_name(name: &str) -> Option<&'static str> {
    Some(
        match name.to_ascii_uppercase().trim_start_matches("SQL_TSI_") {
            "SECOND" | "SECONDS" => "PT1S",
            "MINUTE" | "MINUTES" => "PT1M",
            "HOUR" | "HOURS" => "PT1H",
            "DAY" | "DAYS" => "P1D",
            "WEEK" | "WEEKS" => "P1W",
            "MONTH" | "MONTHS" => "P1M",
            "QUARTER" | "QUARTERS" => "P3M",
            "YEAR" | "YEARS" => "P1Y",
            _ => return None,
        },
    )
}

const EXTRACT_UNITS: [&str; 18] = [
    "EPOCH",
    "MICROSECOND",
    "MILLISECOND",
    "SECOND",
    "MINUTE",
    "HOUR",
    "DAY",
    "DOW",
    "ISODOW",
    "DOY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
    "ISOYEAR",
    "DECADE",
    "CENTURY",
    "MILLENNIUM",
];

/// The `TIME_EXTRACT` unit of an `EXTRACT` field, when Druid supports it.
fn extract_unit(field: &DateTimeField) -> Option<&'static str> {
    Some(match field {
        DateTimeField::Epoch => "EPOCH",
        DateTimeField::Microsecond | DateTimeField::Microseconds => "MICROSECOND",
        DateTimeField::Millisecond | DateTimeField::Milliseconds => "MILLISECOND",
        DateTimeField::Second | DateTimeField::Seconds => "SECOND",
        DateTimeField::Minute | DateTimeField::Minutes => "MINUTE",
        DateTimeField::Hour | DateTimeField::Hours => "HOUR",
        DateTimeField::Day | DateTimeField::Days => "DAY",
        DateTimeField::Dow | DateTimeField::DayOfWeek => "DOW",
        DateTimeField::Isodow => "ISODOW",
        DateTimeField::Doy | DateTimeField::DayOfYear => "DOY",
        DateTimeField::Week(_) | DateTimeField::Weeks | DateTimeField::IsoWeek => "WEEK",
        DateTimeField::Month | DateTimeField::Months => "MONTH",
        DateTimeField::Quarter => "QUARTER",
        DateTimeField::Year | DateTimeField::Years => "YEAR",
        DateTimeField::Isoyear => "ISOYEAR",
        DateTimeField::Decade => "DECADE",
        DateTimeField::Century => "CENTURY",
        DateTimeField::Millenium | DateTimeField::Millennium => "MILLENNIUM",
        DateTimeField::Custom(id) => {
            let up = id.value.to_ascii_uppercase();
            return EXTRACT_UNITS.iter().copied().find(|u| *u == up);
        }
        _ => return None,
    })
}

/// `DATE_TRUNC` units (Druid's `DateTruncOperatorConversion`).
fn date_trunc_period(unit: &str) -> Option<&'static str> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "milliseconds" | "millisecond" => "PT0.001S",
        "second" | "seconds" => "PT1S",
        "minute" | "minutes" => "PT1M",
        "hour" | "hours" => "PT1H",
        "day" | "days" => "P1D",
        "week" | "weeks" => "P1W",
        "month" | "months" => "P1M",
        "quarter" | "quarters" => "P3M",
        "year" | "years" => "P1Y",
        "decade" | "decades" => "P10Y",
        "century" | "centuries" => "P100Y",
        "millennium" | "millennia" => "P1000Y",
        _ => return None,
    })
}

/// Units of TIMESTAMPADD/TIMESTAMPDIFF: (period for TIME_SHIFT, fixed millis or month count).
enum TsUnit {
    Fixed(&'static str, i64),
    Months(&'static str, i64),
}

fn timestamp_unit(name: &str) -> Option<TsUnit> {
    let up = name.to_ascii_uppercase();
    Some(match up.trim_start_matches("SQL_TSI_") {
        "MICROSECOND" | "FRAC_SECOND" => TsUnit::Fixed("PT0.001S", 0),
        "MILLISECOND" => TsUnit::Fixed("PT0.001S", 1),
        "SECOND" => TsUnit::Fixed("PT1S", 1000),
        "MINUTE" => TsUnit::Fixed("PT1M", 60_000),
        "HOUR" => TsUnit::Fixed("PT1H", 3_600_000),
        "DAY" => TsUnit::Fixed("P1D", 86_400_000),
        "WEEK" => TsUnit::Fixed("P1W", 7 * 86_400_000),
        "MONTH" => TsUnit::Months("P1M", 1),
        "QUARTER" => TsUnit::Months("P3M", 3),
        "YEAR" => TsUnit::Months("P1Y", 12),
        _ => return None,
    })
}

fn unit_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(id) => Some(id.value.clone()),
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

fn plain_args(f: &Function) -> Option<Vec<&Expr>> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

/// Position of the time zone argument of each Druid time function, and how many arguments come
/// before it (padded with NULL when absent).
fn zone_position(name: &str) -> Option<usize> {
    Some(match name {
        "time_floor" | "time_ceil" => 3,
        "time_shift" => 3,
        "time_extract" | "time_format" | "time_parse" | "time_in_interval" | "subtract_months" => 2,
        _ => return None,
    })
}

fn with_zone(mut args: Vec<Expr>, pos: usize, tz: Option<&Zone>) -> Vec<Expr> {
    if let Some(tz) = tz {
        while args.len() < pos {
            args.push(null_lit());
        }
        args.push(string_lit(&tz.id()));
    }
    args
}

/// Rewrites one expression node (children have already been visited).
/// `JSON_VALUE(expr, path RETURNING type)` (Druid: the value at `path` as `type`, null when it
/// does not convert) as `JSON_VALUE(expr, path)` (VARCHAR) converted with `TRY_CAST`:
/// integer types through `DOUBLE` first, so `1.5` gives 1 as Druid's long coercion of a
/// decimal does; `VARCHAR`/`CHAR`/`STRING` as they are. Other types (arrays, booleans) are a
/// plan error naming the clause.
fn rewrite_json_value_returning(expr: &mut Expr) -> Result<()> {
    let Expr::Function(f) = expr else {
        return Ok(());
    };
    let FunctionArguments::List(list) = &mut f.args else {
        return Ok(());
    };
    let mut returning = None;
    list.clauses.retain(|c| match c {
        FunctionArgumentClause::JsonReturningClause(r) => {
            returning = Some(r.data_type.clone());
            false
        }
        _ => true,
    });
    let Some(data_type) = returning else {
        return Ok(());
    };
    let value = std::mem::replace(expr, null_lit());
    let try_cast = |e: Expr, t: SqlDataType| Expr::Cast {
        kind: CastKind::TryCast,
        expr: Box::new(e),
        data_type: t,
        array: false,
        format: None,
    };
    *expr = match (&data_type, returning_family(&data_type)) {
        (_, Some("BIGINT")) => try_cast(
            try_cast(value, SqlDataType::Double(ExactNumberInfo::None)),
            data_type,
        ),
        (_, Some("DOUBLE")) => try_cast(value, data_type),
        (_, Some("VARCHAR")) => value,
        // Druid's quidem `qaJsonCols/funcs_and_sql_func_json_object`: `RETURNING BOOLEAN` is
        // the value as a BOOLEAN: `true`/`false` (any case), a number true when not zero,
        // null otherwise.
        (_, Some("BOOLEAN")) => function_call(
            "coalesce",
            vec![
                try_cast(value.clone(), data_type),
                Expr::BinaryOp {
                    left: Box::new(try_cast(value, SqlDataType::Double(ExactNumberInfo::None))),
                    op: datafusion::sql::sqlparser::ast::BinaryOperator::NotEq,
                    right: Box::new(number_lit(0)),
                },
            ],
        ),
        // `RETURNING <type> ARRAY` (request text rewritten to `<type>[]`): the array at the
        // path, each element converted (functions::json_array).
        (
            SqlDataType::Array(
                datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(inner, _)
                | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::AngleBracket(inner),
            ),
            _,
        ) => {
            let mut query = value;
            if let Expr::Function(f) = &mut query {
                f.name = ObjectName::from(vec![Ident::new("json_query_array")]);
            }
            let Some(element) = returning_family(inner) else {
                return Err(plan_error(format!(
                    "JSON_VALUE(... RETURNING {inner} ARRAY) is not supported: the element type must be BIGINT, DOUBLE, VARCHAR or BOOLEAN"
                )));
            };
            function_call(
                crate::functions::json_array::NAME,
                vec![query, string_lit(element)],
            )
        }
        (other, _) => {
            return Err(plan_error(format!(
                "JSON_VALUE(... RETURNING {other}) is not supported: RETURNING takes BIGINT, INTEGER, DOUBLE, FLOAT, REAL, DECIMAL or VARCHAR"
            )));
        }
    };
    Ok(())
}

/// The family of a `RETURNING` type: `BIGINT`, `DOUBLE`, `VARCHAR` or `BOOLEAN` (the element
/// type names of [`crate::functions::json_array`]); `None` for any other type.
fn returning_family(t: &SqlDataType) -> Option<&'static str> {
    Some(match t {
        SqlDataType::BigInt(_)
        | SqlDataType::Int(_)
        | SqlDataType::Integer(_)
        | SqlDataType::SmallInt(_)
        | SqlDataType::TinyInt(_) => "BIGINT",
        SqlDataType::Double(_)
        | SqlDataType::DoublePrecision
        | SqlDataType::Float(_)
        | SqlDataType::Real
        | SqlDataType::Decimal(_)
        | SqlDataType::Numeric(_) => "DOUBLE",
        SqlDataType::Varchar(_)
        | SqlDataType::Char(_)
        | SqlDataType::String(_)
        | SqlDataType::Text => "VARCHAR",
        SqlDataType::Boolean | SqlDataType::Bool => "BOOLEAN",
        _ => return None,
    })
}

/// Whether `f` is called without arguments (`f` or `f()`).
fn has_no_args(f: &Function) -> bool {
    match &f.args {
        FunctionArguments::None => true,
        FunctionArguments::List(l) => l.args.is_empty() && l.clauses.is_empty(),
        FunctionArguments::Subquery(_) => false,
    }
}

fn rewrite_expr(expr: &mut Expr, opts: &RewriteOptions) -> Result<()> {
    let tz = opts.zone();
    match expr {
        // Calcite's niladic time functions (Druid's `DruidConvertletTable`): `LOCALTIMESTAMP`
        // is `CURRENT_TIMESTAMP` and `LOCALTIME` is `CURRENT_TIME` (Druid gives both of a pair
        // the same value), and `CURRENT_DATE` is the day of `CURRENT_TIMESTAMP` in
        // `sqlTimeZone` (a TIMESTAMP cast to DATE takes its day there, `crate::time_text`).
        Expr::Function(f)
            if f.over.is_none()
                && has_no_args(f)
                && matches!(
                    ident_name(f).as_deref(),
                    Some("localtimestamp" | "localtime" | "current_date")
                ) =>
        {
            let now = |name: &str| {
                Expr::Function(Function {
                    name: ObjectName::from(vec![Ident::new(name)]),
                    args: FunctionArguments::None,
                    ..f.clone()
                })
            };
            *expr = match ident_name(f).as_deref() {
                Some("localtimestamp") => now("current_timestamp"),
                Some("localtime") => now("current_time"),
                _ => Expr::Cast {
                    kind: CastKind::Cast,
                    expr: Box::new(now("current_timestamp")),
                    data_type: SqlDataType::Date,
                    array: false,
                    format: None,
                },
            };
        }
        Expr::Floor {
            expr: inner,
            field: CeilFloorKind::DateTimeField(field),
        }
        | Expr::Ceil {
            expr: inner,
            field: CeilFloorKind::DateTimeField(field),
        } if *field != DateTimeField::NoDateTime => {
            let is_floor = matches!(expr, Expr::Floor { .. });
            let (inner, field) = match expr {
                Expr::Floor {
                    expr,
                    field: CeilFloorKind::DateTimeField(f),
                }
                | Expr::Ceil {
                    expr,
                    field: CeilFloorKind::DateTimeField(f),
                } => (expr, f),
                _ => return Ok(()),
            };
            let Some(period) = floor_period(field) else {
                return Err(plan_error(format!(
                    "{}(... TO {field}) is not supported; use SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR, or TIME_{}",
                    if is_floor { "FLOOR" } else { "CEIL" },
                    if is_floor { "FLOOR" } else { "CEIL" },
                )));
            };
            let inner = std::mem::replace(inner.as_mut(), null_lit());
            let name = if is_floor { "time_floor" } else { "time_ceil" };
            *expr = function_call(name, with_zone(vec![inner, string_lit(period)], 3, tz));
        }
        Expr::Extract {
            field, expr: inner, ..
        } => {
            if let Some(unit) = extract_unit(field) {
                let inner = std::mem::replace(inner.as_mut(), null_lit());
                *expr = function_call(
                    "time_extract",
                    with_zone(vec![inner, string_lit(unit)], 2, tz),
                );
            }
        }
        Expr::TypedString(ts) => {
            if let (
                Some(tz),
                SqlDataType::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone),
            ) = (tz, &ts.data_type)
                && let Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) = &ts.value.value
                && let Ok(ms) = parse_iso_in_zone(s, tz)
            {
                *expr = function_call("millis_to_timestamp", vec![number_lit(ms)]);
            }
        }
        Expr::Function(f)
            if opts.approximate_count_distinct
                && f.over.is_none()
                && ident_name(f).as_deref() == Some("count")
                && matches!(&f.args, FunctionArguments::List(l)
                    if l.duplicate_treatment == Some(DuplicateTreatment::Distinct)
                        && l.args.len() == 1) =>
        {
            f.name = ObjectName::from(vec![Ident::new("approx_count_distinct")]);
            if let FunctionArguments::List(l) = &mut f.args {
                l.duplicate_treatment = None;
            }
        }
        Expr::Function(f)
            if f.over.is_none()
                && ident_name(f)
                    .as_deref()
                    .is_some_and(|n| AGGREGATE_ALIASES.contains(&n)) =>
        {
            if let Some((max_bytes, name)) = rewrite_aggregate_alias(f)? {
                // Druid's buffer bound (functions::agg_size): post-order visit, so the wrapped
                // call is not visited again.
                *expr = function_call(
                    crate::functions::agg_size::NAME,
                    vec![
                        expr.clone(),
                        number_lit(max_bytes as i64),
                        string_lit(&name),
                    ],
                );
            }
        }
        Expr::Function(f)
            if ident_name(f).as_deref() == Some("json_value")
                && matches!(&f.args, FunctionArguments::List(l)
                    if l.clauses.iter().any(|c| matches!(c, FunctionArgumentClause::JsonReturningClause(_)))) =>
        {
            rewrite_json_value_returning(expr)?;
        }
        Expr::Function(f) if f.over.is_none() && f.filter.is_none() => {
            let Some(name) = ident_name(f) else {
                return Ok(());
            };
            let Some(args) = plain_args(f) else {
                return Ok(());
            };
            let args: Vec<Expr> = args.into_iter().cloned().collect();
            match name.as_str() {
                "date_trunc" if args.len() == 2 => {
                    if let Some(period) = unit_name(&args[0]).as_deref().and_then(date_trunc_period)
                    {
                        let ts = args.into_iter().nth(1).unwrap_or_else(null_lit);
                        *expr = function_call(
                            "time_floor",
                            with_zone(vec![ts, string_lit(period)], 3, tz),
                        );
                    }
                }
                // Calcite's `NULLIF(a, b)` is `CASE WHEN a = b THEN NULL ELSE a END`
                // (`SqlNullifFunction.rewriteCall`): typed as `a`, the comparison coerced as
                // any comparison (`crate::coercion`). DataFusion's casts both to one type.
                "nullif" if args.len() == 2 => {
                    let mut it = args.into_iter();
                    let (a, b) = (
                        it.next().unwrap_or_else(null_lit),
                        it.next().unwrap_or_else(null_lit),
                    );
                    *expr = Expr::Case {
                        case_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                        end_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                        operand: None,
                        conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
                            condition: Expr::BinaryOp {
                                left: Box::new(Expr::Nested(Box::new(a.clone()))),
                                op: BinaryOperator::Eq,
                                right: Box::new(Expr::Nested(Box::new(b))),
                            },
                            result: null_lit(),
                        }],
                        else_result: Some(Box::new(a)),
                    };
                }
                "timestampadd" if args.len() == 3 => {
                    let unit = unit_name(&args[0]).unwrap_or_default();
                    let Some(u) = timestamp_unit(&unit) else {
                        return Err(plan_error(format!(
                            "TIMESTAMPADD: unsupported unit [{unit}]"
                        )));
                    };
                    let mut it = args.into_iter().skip(1);
                    let (n, ts) = (
                        it.next().unwrap_or_else(null_lit),
                        it.next().unwrap_or_else(null_lit),
                    );
                    let (period, n) = match u {
                        TsUnit::Fixed(_, 0) => {
                            // Microseconds: whole milliseconds only.
                            (
                                "PT0.001S",
                                Expr::BinaryOp {
                                    left: Box::new(Expr::Nested(Box::new(n))),
                                    op: BinaryOperator::Divide,
                                    right: Box::new(number_lit(1000)),
                                },
                            )
                        }
                        TsUnit::Fixed(p, _) | TsUnit::Months(p, _) => (p, n),
                    };
                    *expr = function_call(
                        "time_shift",
                        with_zone(vec![ts, string_lit(period), n], 3, tz),
                    );
                }
                "timestampdiff" if args.len() == 3 => {
                    let unit = unit_name(&args[0]).unwrap_or_default();
                    let Some(u) = timestamp_unit(&unit) else {
                        return Err(plan_error(format!(
                            "TIMESTAMPDIFF: unsupported unit [{unit}]"
                        )));
                    };
                    let mut it = args.into_iter().skip(1);
                    let (a, b) = (
                        it.next().unwrap_or_else(null_lit),
                        it.next().unwrap_or_else(null_lit),
                    );
                    let (numerator, divisor) = match u {
                        TsUnit::Fixed(_, ms) => {
                            let diff = Expr::BinaryOp {
                                left: Box::new(function_call("timestamp_to_millis", vec![b])),
                                op: BinaryOperator::Minus,
                                right: Box::new(function_call("timestamp_to_millis", vec![a])),
                            };
                            if ms == 0 { (diff, -1000) } else { (diff, ms) }
                        }
                        TsUnit::Months(_, k) => (
                            function_call("subtract_months", with_zone(vec![b, a], 2, tz)),
                            k,
                        ),
                    };
                    *expr = if divisor == 1 {
                        numerator
                    } else if divisor < 0 {
                        // Microseconds: multiply.
                        Expr::Nested(Box::new(Expr::BinaryOp {
                            left: Box::new(Expr::Nested(Box::new(numerator))),
                            op: BinaryOperator::Multiply,
                            right: Box::new(number_lit(-divisor)),
                        }))
                    } else {
                        Expr::Nested(Box::new(Expr::BinaryOp {
                            left: Box::new(Expr::Nested(Box::new(numerator))),
                            op: BinaryOperator::Divide,
                            right: Box::new(number_lit(divisor)),
                        }))
                    };
                }
                other => {
                    // Session time zone for user-written Druid time functions.
                    if let (Some(tz), Some(pos)) = (tz, zone_position(other)) {
                        let mut args = args;
                        if args.len() > pos {
                            if is_null_lit(&args[pos]) {
                                args[pos] = string_lit(&tz.id());
                            } else {
                                return Ok(());
                            }
                        } else {
                            args = with_zone(args, pos, Some(tz));
                        }
                        *expr = function_call(other, args);
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Druid aggregations spelled differently in DataFusion, rewritten by
/// [`rewrite_aggregate_alias`].
const AGGREGATE_ALIASES: &[&str] = &[
    "earliest",
    "latest",
    "earliest_by",
    "latest_by",
    "variance",
    "listagg",
    "string_agg",
    "array_agg",
];

/// Rewrites one Druid aggregation call (any `FILTER (WHERE ...)` clause is kept):
///
/// | Druid | becomes |
/// |---|---|
/// | `EARLIEST(x[, maxBytesPerValue])` | `first_value(x ORDER BY __time)` |
/// | `LATEST(x[, maxBytesPerValue])` | `last_value(x ORDER BY __time)` |
/// | `EARLIEST_BY(x, ts[, maxBytesPerValue])` | `first_value(x ORDER BY ts)` |
/// | `LATEST_BY(x, ts[, maxBytesPerValue])` | `last_value(x ORDER BY ts)` |
/// | `VARIANCE(x)` | `var_samp(x)` |
/// | `LISTAGG(x[, sep[, maxBytes]])` | `string_agg(x, sep)` (`sep` default `','`) |
/// | `STRING_AGG(x, sep, maxBytes)` / `ARRAY_AGG(x, maxBytes)` | without `maxBytes` |
///
/// For `LISTAGG`, `STRING_AGG` and `ARRAY_AGG` it returns the byte bound (`maxBytes`, default
/// 1024) and Druid's function name: the caller wraps the call in
/// [`crate::functions::agg_size`]'s check, as Druid fails a query whose aggregated value
/// outgrows its buffer.
///
/// Druid's first/last aggregators (`NumericFirstAggregator`, `StringFirstAggregator`) take the
/// value of the row with the earliest (latest) time, null or not, which is `first_value`'s
/// default `RESPECT NULLS`. `EARLIEST`/`LATEST` read the relation's `__time` column, so over a
/// subquery without one they fail to plan: use the `_BY` forms there. The `maxBytes` arguments
/// are validated (a positive integer literal); `EARLIEST`/`LATEST` keep values whole.
///
/// # Errors
/// A plan error naming the function for a wrong number of arguments or a bad `maxBytes`.
fn rewrite_aggregate_alias(f: &mut Function) -> Result<Option<(u64, String)>> {
    use crate::functions::agg_size;
    use datafusion::sql::sqlparser::ast::{FunctionArgumentClause, OrderByExpr, OrderByOptions};

    let name = ident_name(f).unwrap_or_default();
    let upper = name.to_ascii_uppercase();
    let FunctionArguments::List(list) = &mut f.args else {
        return Err(plan_error(format!("{upper}: arguments are required")));
    };
    let arity = list.args.len();
    if matches!(name.as_str(), "listagg" | "string_agg")
        && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) = list.args.first_mut()
    {
        // Timestamps join as Druid's expression aggregators read them: milliseconds.
        // (`ARRAY_AGG` keeps them: its SQL type is TIMESTAMP ARRAY in Druid.)
        *first = function_call(agg_size::INPUT_NAME, vec![first.clone()]);
    }
    let max_bytes = |arg: &FunctionArg| -> Result<u64> {
        let n = match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match &v.value {
                Value::Number(n, _) => n.parse::<u64>().ok().filter(|n| *n > 0),
                _ => None,
            },
            _ => None,
        };
        if let Some(n) = n {
            Ok(n)
        } else {
            Err(plan_error(format!(
                "{upper}: maxBytesPerValue must be a positive integer literal, got [{arg}]"
            )))
        }
    };
    let order_by = |expr: Expr| {
        FunctionArgumentClause::OrderBy(vec![OrderByExpr {
            expr,
            options: OrderByOptions {
                asc: Some(true),
                nulls_first: None,
            },
            with_fill: None,
        }])
    };
    let rename = |f: &mut Function, to: &str| {
        f.name = ObjectName::from(vec![Ident::new(to)]);
    };
    match name.as_str() {
        "earliest" | "latest" => {
            if !(1..=2).contains(&arity) {
                return Err(plan_error(format!(
                    "{upper} takes (expr[, maxBytesPerValue]), got {arity} arguments"
                )));
            }
            if arity == 2 {
                max_bytes(&list.args[1])?;
                list.args.truncate(1);
            }
            list.clauses
                .push(order_by(Expr::Identifier(Ident::with_quote('"', "__time"))));
            rename(
                f,
                if name == "earliest" {
                    "first_value"
                } else {
                    "last_value"
                },
            );
        }
        "earliest_by" | "latest_by" => {
            if !(2..=3).contains(&arity) {
                return Err(plan_error(format!(
                    "{upper} takes (expr, timestampExpr[, maxBytesPerValue]), got {arity} arguments"
                )));
            }
            if arity == 3 {
                max_bytes(&list.args[2])?;
            }
            let FunctionArg::Unnamed(FunctionArgExpr::Expr(ts)) = list.args[1].clone() else {
                return Err(plan_error(format!(
                    "{upper}: timestampExpr must be an expression"
                )));
            };
            list.args.truncate(1);
            list.clauses.push(order_by(ts));
            rename(
                f,
                if name == "earliest_by" {
                    "first_value"
                } else {
                    "last_value"
                },
            );
        }
        "variance" => rename(f, "var_samp"),
        "listagg" => {
            if !(1..=3).contains(&arity) {
                return Err(plan_error(format!(
                    "LISTAGG takes (expr[, separator[, maxBytes]]), got {arity} arguments"
                )));
            }
            let mut limit = agg_size::DEFAULT_MAX_BYTES;
            if arity == 3 {
                limit = max_bytes(&list.args[2])?;
                list.args.truncate(2);
            }
            if arity == 1 {
                list.args
                    .push(FunctionArg::Unnamed(FunctionArgExpr::Expr(string_lit(","))));
            }
            rename(f, "string_agg");
            return Ok(Some((limit, upper)));
        }
        "string_agg" => {
            let mut limit = agg_size::DEFAULT_MAX_BYTES;
            if arity == 3 {
                limit = max_bytes(&list.args[2])?;
                list.args.truncate(2);
            }
            return Ok(Some((limit, upper)));
        }
        "array_agg" => {
            let mut limit = agg_size::DEFAULT_MAX_BYTES;
            if arity == 2 {
                limit = max_bytes(&list.args[1])?;
                list.args.truncate(1);
            }
            return Ok(Some((limit, upper)));
        }
        _ => {}
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        Array, AsArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    };
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionConfig;
    use dolmen_common::time::{format_iso_millis, parse_iso_instant, parse_time_zone};

    use super::*;

    fn ctx() -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let ctx = SessionContext::new_with_config(config);
        crate::functions::register_druid_functions(&ctx);
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "__time",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new("channel", DataType::Utf8, true),
            Field::new("added", DataType::Int64, true),
        ]));
        let times = [
            "2015-09-12T00:46:58.771Z",
            "2015-09-12T01:10:00.000Z",
            "2015-09-12T01:59:59.999Z",
            "2015-09-12T02:00:00.000Z",
            "2015-09-12T02:30:00.000Z",
            "2015-09-12T03:00:00.000Z",
            "2015-09-13T00:00:00.000Z",
            "2015-09-11T23:59:59.999Z",
        ];
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(TimestampMillisecondArray::from(
                    times
                        .iter()
                        .map(|t| parse_iso_instant(t).unwrap())
                        .collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(vec![
                    Some("#en"),
                    Some("#fr"),
                    None,
                    Some("#en"),
                    Some("#en"),
                    Some("#de"),
                    Some("#en"),
                    Some("#fr"),
                ])),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5, 6, 7, 8])),
            ],
        )
        .unwrap();
        ctx.register_table(
            "wikipedia",
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
        )
        .unwrap();
        ctx
    }

    /// Runs `sql` through [`plan_sql_with`] and renders every cell (timestamps as ISO).
    async fn rows(ctx: &SessionContext, sql: &str, opts: &RewriteOptions) -> Vec<Vec<String>> {
        let df = plan_sql_with(ctx, sql, opts, read_only()).await.unwrap();
        let batches = df.collect().await.unwrap();
        let mut out = Vec::new();
        for b in batches {
            for r in 0..b.num_rows() {
                let mut row = Vec::new();
                for c in b.columns() {
                    let s = if c.is_null(r) {
                        "null".to_string()
                    } else if let DataType::Timestamp(..) = c.data_type() {
                        let ms = arrow::compute::cast(
                            c,
                            &DataType::Timestamp(TimeUnit::Millisecond, None),
                        )
                        .unwrap();
                        format_iso_millis(
                            ms.as_primitive::<arrow::datatypes::TimestampMillisecondType>()
                                .value(r),
                        )
                    } else {
                        let s = arrow::compute::cast(c, &DataType::Utf8).unwrap();
                        s.as_string::<i32>().value(r).to_string()
                    };
                    row.push(s);
                }
                out.push(row);
            }
        }
        out
    }

    fn rewritten(sql: &str, opts: &RewriteOptions) -> String {
        let ctx = ctx();
        let state = ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let mut stmt = state.sql_to_statement(sql, &dialect).unwrap();
        rewrite_df_statement(&mut stmt, opts).unwrap();
        stmt.to_string()
    }

    fn utc() -> RewriteOptions {
        RewriteOptions::default()
    }

    #[test]
    fn sub_query_order_without_limit_is_removed() {
        let r = |sql| rewritten(sql, &utc());
        assert_eq!(
            r("SELECT c FROM (SELECT a AS c FROM t ORDER BY c DESC) ORDER BY c"),
            "SELECT c FROM (SELECT a AS c FROM t) ORDER BY c"
        );
        // A limit, an offset or a fetch gives the order a meaning: kept.
        for sql in [
            "SELECT c FROM (SELECT a AS c FROM t ORDER BY c LIMIT 2)",
            "SELECT c FROM (SELECT a AS c FROM t ORDER BY c OFFSET 1)",
            "SELECT c FROM (SELECT a AS c FROM t ORDER BY c FETCH FIRST 2 ROWS ONLY)",
        ] {
            assert_eq!(r(sql), sql);
        }
        assert_eq!(
            r(
                "WITH w AS (SELECT a FROM t ORDER BY a) SELECT a FROM w WHERE a IN \
               (SELECT b FROM u ORDER BY b) ORDER BY a DESC"
            ),
            "WITH w AS (SELECT a FROM t) SELECT a FROM w WHERE a IN (SELECT b FROM u) \
             ORDER BY a DESC"
        );
    }

    #[tokio::test]
    async fn earliest_latest_and_aggregate_aliases() {
        let ctx = ctx();
        let q = |sql: &'static str| {
            let ctx = ctx.clone();
            async move { rows(&ctx, sql, &utc()).await }
        };
        // The earliest row is 2015-09-11T23:59:59.999Z (#fr, 8), the latest 2015-09-13 (#en, 7).
        assert_eq!(
            q(
                "SELECT EARLIEST(channel), LATEST(channel), EARLIEST(added), LATEST(added, 16) \
               FROM wikipedia"
            )
            .await,
            vec![vec!["#fr", "#en", "8", "7"]]
        );
        assert_eq!(
            q("SELECT EARLIEST_BY(channel, MILLIS_TO_TIMESTAMP(added)), \
                      LATEST_BY(channel, MILLIS_TO_TIMESTAMP(added), 64) FROM wikipedia")
            .await,
            vec![vec!["#en", "#fr"]]
        );
        // FILTER is kept; per group; a null value at the earliest time is the answer (Druid's
        // first/last aggregators do not skip nulls).
        assert_eq!(
            q(
                "SELECT channel, EARLIEST(added) FILTER (WHERE added > 1), LATEST(added) \
               FROM wikipedia WHERE channel IS NOT NULL GROUP BY channel ORDER BY channel"
            )
            .await,
            vec![
                vec!["#de", "6", "6"],
                vec!["#en", "4", "7"],
                vec!["#fr", "8", "2"]
            ]
        );
        assert_eq!(
            q("SELECT EARLIEST(channel) FILTER (WHERE added IN (3, 4)) FROM wikipedia").await,
            vec![vec!["null"]]
        );
        assert_eq!(
            q(
                "SELECT VARIANCE(added), LISTAGG(channel) FILTER (WHERE added = 2), \
                      LISTAGG(channel, '|', 100) FILTER (WHERE added = 6), \
                      STRING_AGG(channel, ';', 100) FILTER (WHERE added = 1), \
                      ARRAY_LENGTH(ARRAY_AGG(added, 1000)) FROM wikipedia"
            )
            .await,
            vec![vec!["6.0", "#fr", "#de", "#en", "8"]]
        );
        for bad in [
            "SELECT EARLIEST() FROM wikipedia",
            "SELECT EARLIEST(channel, 'x') FROM wikipedia",
            "SELECT LATEST(channel, 0) FROM wikipedia",
            "SELECT EARLIEST_BY(channel) FROM wikipedia",
            "SELECT LISTAGG(channel, ',', -1) FROM wikipedia",
        ] {
            let e = plan_sql_with(&ctx, bad, &utc(), read_only())
                .await
                .err()
                .unwrap_or_else(|| panic!("{bad} planned"));
            assert!(matches!(e, DataFusionError::Plan(_)), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn floor_to_hour_group_by() {
        let ctx = ctx();
        let got = rows(
            &ctx,
            "SELECT FLOOR(__time TO HOUR) AS h, COUNT(*) AS c FROM wikipedia WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' AND __time < TIMESTAMP '2015-09-13 00:00:00' GROUP BY 1 ORDER BY 1",
            &utc(),
        )
        .await;
        assert_eq!(
            got,
            vec![
                vec!["2015-09-12T00:00:00.000Z", "1"],
                vec!["2015-09-12T01:00:00.000Z", "2"],
                vec!["2015-09-12T02:00:00.000Z", "2"],
                vec!["2015-09-12T03:00:00.000Z", "1"],
            ]
        );
        assert_eq!(
            rewritten("SELECT FLOOR(__time TO HOUR) FROM wikipedia", &utc()),
            "SELECT time_floor(__time, 'PT1H') FROM wikipedia"
        );
        assert_eq!(
            rewritten("SELECT CEIL(__time TO WEEK) FROM wikipedia", &utc()),
            "SELECT time_ceil(__time, 'P1W') FROM wikipedia"
        );
        let got = rows(&ctx, "SELECT CEIL(__time TO DAY), FLOOR(__time TO MONTH), FLOOR(__time TO QUARTER), FLOOR(__time TO YEAR) FROM wikipedia ORDER BY __time LIMIT 1", &utc()).await;
        assert_eq!(
            got[0],
            [
                "2015-09-12T00:00:00.000Z",
                "2015-09-01T00:00:00.000Z",
                "2015-07-01T00:00:00.000Z",
                "2015-01-01T00:00:00.000Z"
            ]
        );
        // Plain numeric FLOOR/CEIL are untouched.
        assert_eq!(
            rows(&ctx, "SELECT FLOOR(2.5), CEIL(2.5)", &utc()).await[0],
            ["2.0", "3.0"]
        );
        let err = plan_sql(&ctx, "SELECT FLOOR(__time TO DECADE) FROM wikipedia")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("DECADE"), "{err}");
    }

    #[tokio::test]
    async fn time_floor_function() {
        let ctx = ctx();
        let got = rows(
            &ctx,
            "SELECT TIME_FLOOR(__time, 'PT1H'), SUM(added) FROM wikipedia GROUP BY 1 ORDER BY 1",
            &utc(),
        )
        .await;
        assert_eq!(got.len(), 6);
        assert_eq!(got[0], ["2015-09-11T23:00:00.000Z", "8"]);
        assert_eq!(got[2], ["2015-09-12T01:00:00.000Z", "5"]);
    }

    #[tokio::test]
    async fn time_in_interval_filter() {
        let ctx = ctx();
        let sql = "SELECT COUNT(*) FROM wikipedia WHERE TIME_IN_INTERVAL(__time, '2015-09-12/2015-09-13')";
        assert_eq!(rows(&ctx, sql, &utc()).await, vec![vec!["6"]]);
        // The filter reaches the scan as a plain __time range.
        let plan = plan_sql(&ctx, sql)
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        let text = plan.display_indent().to_string();
        assert!(text.contains("__time >= TimestampMillisecond(1442016000000, None) AND wikipedia.__time < TimestampMillisecond(1442102400000, None)"), "{text}");
        let err = plan_sql(&ctx, "SELECT COUNT(*) FROM wikipedia WHERE TIME_IN_INTERVAL(__time, '2015-09-13/2015-09-12')")
            .await
            .and_then(|df| df.into_optimized_plan())
            .unwrap_err();
        assert!(err.to_string().contains("2015-09-13/2015-09-12"), "{err}");
    }

    #[tokio::test]
    async fn between_timestamp_literals() {
        let ctx = ctx();
        let sql = "SELECT __time FROM wikipedia WHERE __time BETWEEN TIMESTAMP '2015-09-12 02:00:00' AND TIMESTAMP '2015-09-12 03:00:00' ORDER BY 1";
        assert_eq!(
            rows(&ctx, sql, &utc()).await,
            vec![
                vec!["2015-09-12T02:00:00.000Z"],
                vec!["2015-09-12T02:30:00.000Z"],
                vec!["2015-09-12T03:00:00.000Z"]
            ]
        );
        // Natively handled: the literal's cast is unwrapped, the column is not cast.
        let plan = plan_sql(&ctx, sql)
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        let text = plan.display_indent().to_string();
        assert!(
            text.contains("wikipedia.__time >= TimestampMillisecond(1442023200000, None)"),
            "{text}"
        );
        // With sqlTimeZone, literals are local time in the zone.
        let la = RewriteOptions::with_time_zone(parse_time_zone("America/Los_Angeles").unwrap());
        let sql = "SELECT __time FROM wikipedia WHERE __time BETWEEN TIMESTAMP '2015-09-11 18:00:00' AND TIMESTAMP '2015-09-11 19:00:00' ORDER BY 1";
        assert_eq!(
            rows(&ctx, sql, &la).await,
            vec![
                vec!["2015-09-12T01:10:00.000Z"],
                vec!["2015-09-12T01:59:59.999Z"],
                vec!["2015-09-12T02:00:00.000Z"]
            ]
        );
    }

    #[tokio::test]
    async fn extract_hour() {
        let ctx = ctx();
        let sql =
            "SELECT EXTRACT(HOUR FROM __time) AS h, COUNT(*) FROM wikipedia GROUP BY 1 ORDER BY 1";
        assert_eq!(
            rows(&ctx, sql, &utc()).await,
            vec![
                vec!["0", "2"],
                vec!["1", "2"],
                vec!["2", "2"],
                vec!["3", "1"],
                vec!["23", "1"]
            ]
        );
        let df = plan_sql(&ctx, "SELECT EXTRACT(HOUR FROM __time), EXTRACT(EPOCH FROM __time), EXTRACT(DOW FROM __time) FROM wikipedia").await.unwrap();
        for f in df.schema().fields() {
            assert_eq!(f.data_type(), &DataType::Int64);
        }
        // Sunday is 7 (ISO), as Druid.
        assert_eq!(
            rows(
                &ctx,
                "SELECT EXTRACT(DOW FROM TIMESTAMP '2015-09-13 00:00:00')",
                &utc()
            )
            .await,
            vec![vec!["7"]]
        );
        let la = RewriteOptions::with_time_zone(parse_time_zone("America/Los_Angeles").unwrap());
        assert_eq!(
            rows(
                &ctx,
                "SELECT EXTRACT(HOUR FROM __time) FROM wikipedia ORDER BY __time LIMIT 1",
                &la
            )
            .await,
            vec![vec!["16"]]
        );
    }

    #[tokio::test]
    async fn session_time_zone() {
        let ctx = ctx();
        let la = RewriteOptions::with_time_zone(parse_time_zone("America/Los_Angeles").unwrap());
        assert_eq!(
            rewritten(
                "SELECT FLOOR(__time TO DAY), TIME_FLOOR(__time, 'P1D'), TIME_FORMAT(__time), TIME_EXTRACT(__time, 'HOUR', 'UTC') FROM wikipedia",
                &la
            ),
            "SELECT time_floor(__time, 'P1D', NULL, 'America/Los_Angeles'), time_floor(__time, 'P1D', NULL, 'America/Los_Angeles'), time_format(__time, NULL, 'America/Los_Angeles'), TIME_EXTRACT(__time, 'HOUR', 'UTC') FROM wikipedia"
        );
        let got = rows(
            &ctx,
            "SELECT FLOOR(__time TO DAY), COUNT(*) FROM wikipedia GROUP BY 1 ORDER BY 1",
            &la,
        )
        .await;
        assert_eq!(
            got,
            vec![
                vec!["2015-09-11T07:00:00.000Z", "7"],
                vec!["2015-09-12T07:00:00.000Z", "1"]
            ]
        );
        let got = rows(
            &ctx,
            "SELECT TIME_FORMAT(__time) FROM wikipedia ORDER BY __time LIMIT 1",
            &la,
        )
        .await;
        assert_eq!(got, vec![vec!["2015-09-11T16:59:59.999-07:00"]]);
    }

    #[tokio::test]
    async fn date_trunc_timestampadd_timestampdiff() {
        let ctx = ctx();
        let got = rows(
            &ctx,
            "SELECT DATE_TRUNC('hour', __time), TIMESTAMPADD(HOUR, 2, __time), TIMESTAMPADD(MONTH, 1, __time), \
             TIMESTAMPDIFF(MINUTE, TIMESTAMP '2015-09-12 00:00:00', __time), \
             TIMESTAMPDIFF(MONTH, TIMESTAMP '2015-07-12 00:46:58.772', __time), \
             TIMESTAMPDIFF(YEAR, TIMESTAMP '2013-09-12 00:00:00', __time) \
             FROM wikipedia ORDER BY __time LIMIT 2",
            &utc(),
        )
        .await;
        assert_eq!(
            got[1],
            [
                "2015-09-12T00:00:00.000Z",
                "2015-09-12T02:46:58.771Z",
                "2015-10-12T00:46:58.771Z",
                "46",
                "1",
                "2"
            ]
        );
        assert_eq!(got[0][3], "0");
        assert!(
            plan_sql(
                &ctx,
                "SELECT TIMESTAMPADD(FORTNIGHT, 1, __time) FROM wikipedia"
            )
            .await
            .is_err()
        );
    }

    #[tokio::test]
    async fn json_value_returning() {
        let ctx = ctx();
        let q = |ret: &str| {
            format!(
                "SELECT JSON_VALUE(PARSE_JSON('{{\"i\":7,\"d\":1.5,\"s\":\"x\",\"n\":\"12\"}}'), '$.i' RETURNING {ret}), \
                 JSON_VALUE(PARSE_JSON('{{\"d\":1.5}}'), '$.d' RETURNING {ret}), \
                 JSON_VALUE(PARSE_JSON('{{\"s\":\"x\"}}'), '$.s' RETURNING {ret}), \
                 JSON_VALUE(PARSE_JSON('{{\"n\":\"12\"}}'), '$.n' RETURNING {ret})"
            )
        };
        assert_eq!(
            rows(&ctx, &q("BIGINT"), &utc()).await,
            vec![vec!["7", "1", "null", "12"]]
        );
        assert_eq!(
            rows(&ctx, &q("DOUBLE"), &utc()).await,
            vec![vec!["7.0", "1.5", "null", "12.0"]]
        );
        assert_eq!(
            rows(&ctx, &q("VARCHAR"), &utc()).await,
            vec![vec!["7", "1.5", "x", "12"]]
        );
        assert_eq!(
            rows(&ctx, &q("BOOLEAN"), &utc()).await,
            vec![vec!["true", "true", "null", "true"]]
        );
        let err = plan_sql(&ctx, &q("TIMESTAMP"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("RETURNING TIMESTAMP"), "{err}");
    }

    #[tokio::test]
    async fn read_only_by_default() {
        let ctx = ctx();
        assert!(plan_sql(&ctx, "CREATE TABLE x AS SELECT 1").await.is_err());
        assert!(plan_sql(&ctx, "SELECT 1; SELECT 2").await.is_err());
        // EXPLAIN is rewritten too.
        assert!(
            plan_sql(&ctx, "EXPLAIN SELECT FLOOR(__time TO HOUR) FROM wikipedia")
                .await
                .is_ok()
        );
    }
}
