//! Druid's casts from text: a string that does not convert is NULL, not an error
//! ([`LenientCastRule`], an analyzer rule after DataFusion's type coercion); text in
//! arithmetic and numbers in `||` coerced as Calcite coerces them ([`TextOperandPlanner`]).
//!
//! `docs/querying/sql-data-types.md`: "If a value cannot be cast to the target type, as in
//! `CAST('foo' AS BIGINT)`, Druid substitutes NULL." Druid's native `CAST(x, 'LONG')` of a
//! string parses it as a long and, failing that, as a double it truncates
//! (`ExprEval.computeNumber`: `'1.5'` is 1). Arrow's cast fails the query instead, and
//! DataFusion inserts such casts wherever Calcite coerces types too: comparing a string with a
//! number (`'a' = 1`, `x IS DISTINCT FROM 'a'`), `COALESCE(null, 5, 'abc')` (typed as the
//! number, Calcite's least restrictive type for it; `'abc'` becomes NULL, so the answer is 5),
//! `CASE`, `IN` lists. The rule turns every cast of a string to a number, a date or a
//! timestamp into one that gives NULL when the text does not convert:
//!
//! | cast | becomes |
//! |---|---|
//! | string to an integer type | `TRY_CAST(COALESCE(TRY_CAST(s AS BIGINT), TRY_CAST(TRY_CAST(s AS DOUBLE) AS BIGINT)) AS type)` |
//! | string to a floating point or decimal type, a date or a timestamp | `TRY_CAST(s AS type)` |
//! | array of strings to an array of numbers (`CAST(a_str AS BIGINT ARRAY)`; comparisons compare such arrays as strings, see [`TextOperandPlanner`]) | `TRY_CAST(a AS type)`: elements that do not convert are null |
//!
//! `NULLIF(a, b)` is Calcite's `CASE WHEN a = b THEN NULL ELSE a END` (`SqlNullifFunction`),
//! typed as `a`; [`crate::rewrite`] writes it so, as DataFusion's `NULLIF` casts both arguments
//! to one type.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::planner::RawBinaryExpr;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule of the module docs; runs after DataFusion's type coercion.
#[derive(Debug, Default)]
pub struct LenientCastRule;

impl AnalyzerRule for LenientCastRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| rewrite_node_expressions(node, rewrite_expr))
            .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "druid_lenient_casts"
    }
}

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_string(v),
        _ => false,
    }
}

fn try_cast(e: Expr, to: DataType) -> Expr {
    Expr::TryCast(TryCast::new(Box::new(e), to))
}

/// Rewrites the expressions of one plan node bottom-up with `rewrite`, given the schema those
/// expressions read (the node's inputs', plus a table scan's own), keeping each expression's
/// output name as DataFusion's own type coercion does. Shared by the analyzer rules that run
/// after type coercion ([`rule`], [`crate::time_text`]).
///
/// # Errors
/// What `rewrite` returns, or a schema that cannot be built.
pub(crate) fn rewrite_node_expressions(
    node: LogicalPlan,
    mut rewrite: impl FnMut(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<Transformed<LogicalPlan>> {
    let mut schema = merge_schema(&node.inputs());
    if let LogicalPlan::TableScan(ts) = &node {
        schema.merge(&DFSchema::try_from_qualified_schema(
            ts.table_name.clone(),
            &ts.source.schema(),
        )?);
    }
    let preserver = NamePreserver::new(&node);
    node.map_expressions(|e| {
        let saved = preserver.save(&e);
        let out = e.transform_up(|e| rewrite(e, &schema))?;
        Ok(if out.transformed {
            out.update_data(|e| saved.restore(e))
        } else {
            out
        })
    })
}

fn rewrite_expr(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::Cast(Cast { expr, field }) = &e else {
        return Ok(Transformed::no(e));
    };
    let to = field.data_type().clone();
    let Ok(from) = expr.get_type(schema) else {
        return Ok(Transformed::no(e));
    };
    if let (DataType::List(f) | DataType::LargeList(f), DataType::List(t) | DataType::LargeList(t)) =
        (&from, &to)
        && is_string(f.data_type())
        && (t.data_type().is_numeric() || t.data_type() == &DataType::Boolean)
    {
        // An array of strings cast to an array of numbers (`CAST(a_str AS BIGINT ARRAY)`):
        // elements that do not convert are null (Arrow's safe cast of a list, element by
        // element).
        return Ok(Transformed::yes(try_cast((**expr).clone(), to)));
    }
    if !is_string(&from) {
        return Ok(Transformed::no(e));
    }
    let text = (**expr).clone();
    Ok(Transformed::yes(match &to {
        t if t.is_integer() => {
            let as_long = try_cast(text.clone(), DataType::Int64);
            let via_double = try_cast(try_cast(text, DataType::Float64), DataType::Int64);
            let long = datafusion::functions::core::expr_fn::coalesce(vec![as_long, via_double]);
            if to == DataType::Int64 {
                long
            } else {
                try_cast(long, to)
            }
        }
        t if crate::functions::scalar::is_float(t)
            || matches!(
                t,
                DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
            ) =>
        {
            try_cast(text, to)
        }
        _ => return Ok(Transformed::no(e)),
    }))
}

/// `BETWEEN` and `IN` lists mixing arrays of booleans or strings with arrays of numbers (as
/// [`TextOperandPlanner`] plans comparisons): with an array of strings among them the others
/// are cast to arrays of strings (Druid's least restrictive type); else the boolean arrays are
/// cast to arrays of longs, Druid's native form of a BOOLEAN, so that DataFusion's type
/// coercion finds a common type.
/// An analyzer rule that runs before DataFusion's own (type coercion).
#[derive(Debug, Default)]
pub struct BooleanArraysAsLongsRule;

impl AnalyzerRule for BooleanArraysAsLongsRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            rewrite_node_expressions(node, boolean_arrays_in_lists)
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "druid_boolean_arrays_as_longs"
    }
}

fn boolean_arrays_in_lists(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    use datafusion::logical_expr::expr::{Between, InList};
    let element = |x: &Expr| match x.get_type(schema) {
        Ok(DataType::List(f) | DataType::LargeList(f)) => Some(f.data_type().clone()),
        _ => None,
    };
    let longs = || list_of(DataType::Int64);
    let operands: Vec<&Expr> = match &e {
        Expr::Between(b) => vec![&b.expr, &b.low, &b.high],
        Expr::InList(l) => std::iter::once(l.expr.as_ref()).chain(&l.list).collect(),
        _ => return Ok(Transformed::no(e)),
    };
    let elements: Vec<Option<DataType>> = operands.iter().map(|x| element(x)).collect();
    let has_bool = elements.iter().any(|t| t == &Some(DataType::Boolean));
    let has_number = elements.iter().any(|t| {
        t.as_ref()
            .is_some_and(|t| t != &DataType::Boolean && is_number(t))
    });
    let has_string = elements.iter().any(|t| t.as_ref().is_some_and(is_string));
    if !(has_bool && has_number || has_string && (has_number || has_bool)) {
        return Ok(Transformed::no(e));
    }
    let strings = || list_of(DataType::Utf8);
    // With strings among them every array compares as strings (as `TextOperandPlanner` plans
    // `=`); otherwise booleans compare as longs.
    let fix = |x: Expr| match element(&x) {
        Some(t) if has_string && (is_number(&t) || t == DataType::Boolean) => cast(x, strings()),
        Some(DataType::Boolean) if !has_string => cast(x, longs()),
        _ => x,
    };
    Ok(Transformed::yes(match e {
        Expr::Between(b) => Expr::Between(Between::new(
            Box::new(fix(*b.expr)),
            b.negated,
            Box::new(fix(*b.low)),
            Box::new(fix(*b.high)),
        )),
        Expr::InList(l) => Expr::InList(InList::new(
            Box::new(fix(*l.expr)),
            l.list.into_iter().map(fix).collect(),
            l.negated,
        )),
        other => other,
    }))
}

/// The rule as a shared analyzer rule, for the engine's list.
pub fn rule() -> Arc<dyn AnalyzerRule + Send + Sync> {
    Arc::new(LenientCastRule)
}

/// Arithmetic over text as Druid's planner coerces it (Calcite's implicit type coercion,
/// `AbstractTypeCoercion.binaryArithmeticCoercion`): in `+ - * / %`, a string operand meeting
/// a number is cast to that number's type (`c - c_long` is BIGINT), and two strings are both
/// cast to DOUBLE (`c - c` is `0.0`). DataFusion refuses these while planning ("Cannot coerce
/// arithmetic expression Utf8 - Int64"), so this is an expression planner, consulted as each
/// binary operator is planned with the schema it reads; the casts it adds are then made
/// lenient by [`LenientCastRule`] (text that is not a number gives NULL). Druid's quidem
/// corpus, `qaUnnest/mv_sql_ops.all.iq`. It also plans `||` over numbers and booleans
/// ([`concat_as_text`]).
#[derive(Debug, Default)]
pub struct TextOperandPlanner;

/// What [`TextOperandPlanner`]'s helpers answer for one binary operator.
type BinaryPlan = Result<datafusion::logical_expr::planner::PlannerResult<RawBinaryExpr>>;

/// `List(t)`, the list type DataFusion's array functions return.
fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(arrow::datatypes::Field::new_list_field(t, true)))
}

fn is_number(t: &DataType) -> bool {
    t.is_integer() || crate::functions::scalar::is_float(t) || t.is_numeric()
}

fn cast(e: Expr, to: DataType) -> Expr {
    Expr::Cast(Cast::new(Box::new(e), to))
}

/// `a || b` where no operand is text: Druid's `||` concatenates the text of numbers and
/// booleans (`1 || 1` is `'11'`), while DataFusion finds no common string type. Numbers and
/// booleans are cast to VARCHAR; anything else (arrays, timestamps, nulls) is left to the
/// planners that know it.
fn concat_as_text(expr: RawBinaryExpr, schema: &DFSchema) -> BinaryPlan {
    use datafusion::logical_expr::planner::PlannerResult;
    use datafusion::logical_expr::{BinaryExpr, Operator};
    let (Ok(lt), Ok(rt)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
        return Ok(PlannerResult::Original(expr));
    };
    let textual = |t: &DataType| is_number(t) || *t == DataType::Boolean;
    let fits = |t: &DataType| is_string(t) || textual(t);
    if !(fits(&lt) && fits(&rt)) || (is_string(&lt) && is_string(&rt)) {
        return Ok(PlannerResult::Original(expr));
    }
    let text = |e: Expr, t: &DataType| {
        if textual(t) {
            cast(e, DataType::Utf8)
        } else {
            e
        }
    };
    Ok(PlannerResult::Planned(Expr::BinaryExpr(BinaryExpr::new(
        Box::new(text(expr.left, &lt)),
        Operator::StringConcat,
        Box::new(text(expr.right, &rt)),
    ))))
}

/// A comparison of arrays of different element types, as Druid compares them (Druid's quidem
/// corpus, `qaArray/sql_subquery_with_where`): an array of booleans with an array of numbers
/// (`a_bool = JSON_VALUE(.. RETURNING BOOLEAN ARRAY)`, where `a_bool` is an `auto` column of
/// booleans, `ARRAY<LONG>`) compares the booleans as longs, Druid's native form of a BOOLEAN
/// (DataFusion finds no common type for `List(Int64) = List(Boolean)`); an array of strings
/// with an array of numbers or booleans compares as strings.
fn array_comparison_operands(expr: RawBinaryExpr, schema: &DFSchema) -> BinaryPlan {
    use datafusion::logical_expr::planner::PlannerResult;
    let (Ok(lt), Ok(rt)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
        return Ok(PlannerResult::Original(expr));
    };
    let element = |t: &DataType| match t {
        DataType::List(f) | DataType::LargeList(f) => Some(f.data_type().clone()),
        _ => None,
    };
    let (Some(le), Some(re)) = (element(&lt), element(&rt)) else {
        return Ok(PlannerResult::Original(expr));
    };
    let (longs, strings) = (list_of(DataType::Int64), list_of(DataType::Utf8));
    let mut expr = expr;
    match (le == DataType::Boolean, re == DataType::Boolean) {
        (true, false) if is_number(&re) => expr.left = cast(expr.left, longs),
        (false, true) if is_number(&le) => expr.right = cast(expr.right, longs),
        // An array of strings meeting an array of numbers compares as strings (Druid's least
        // restrictive type of the two, `ARRAY<STRING>`): `a_str = a_null` is false for
        // `["S1","S2",null]` and `[null,null,null]`, which casting the strings to numbers would
        // make equal (qaArray/sql_subquery_with_where).
        _ if is_string(&le) && (is_number(&re) || re == DataType::Boolean) => {
            expr.right = cast(expr.right, strings)
        }
        _ if is_string(&re) && (is_number(&le) || le == DataType::Boolean) => {
            expr.left = cast(expr.left, strings)
        }
        _ => {}
    }
    Ok(PlannerResult::Original(expr))
}

impl datafusion::logical_expr::planner::ExprPlanner for TextOperandPlanner {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> BinaryPlan {
        use datafusion::logical_expr::planner::PlannerResult;
        use datafusion::logical_expr::{BinaryExpr, Operator};
        use datafusion::sql::sqlparser::ast::BinaryOperator;
        if matches!(
            expr.op,
            BinaryOperator::Eq
                | BinaryOperator::NotEq
                | BinaryOperator::Lt
                | BinaryOperator::LtEq
                | BinaryOperator::Gt
                | BinaryOperator::GtEq
        ) {
            return array_comparison_operands(expr, schema);
        }
        let op = match expr.op {
            BinaryOperator::StringConcat => return concat_as_text(expr, schema),
            BinaryOperator::Plus => Operator::Plus,
            BinaryOperator::Minus => Operator::Minus,
            BinaryOperator::Multiply => Operator::Multiply,
            BinaryOperator::Divide => Operator::Divide,
            BinaryOperator::Modulo => Operator::Modulo,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let (Ok(lt), Ok(rt)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
            return Ok(PlannerResult::Original(expr));
        };
        // The type each text operand is cast to (`None`: the operand stays as it is).
        let (to_left, to_right) = match (is_string(&lt), is_string(&rt)) {
            (true, true) => (Some(DataType::Float64), Some(DataType::Float64)),
            (true, false) if is_number(&rt) => (Some(rt), None),
            (false, true) if is_number(&lt) => (None, Some(lt)),
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let side = |e: Expr, to: Option<DataType>| match to {
            Some(t) => cast(e, t),
            None => e,
        };
        let (left, right) = (side(expr.left, to_left), side(expr.right, to_right));
        Ok(PlannerResult::Planned(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(left),
            op,
            Box::new(right),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    fn ctx() -> SessionContext {
        let mut rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> =
            vec![Arc::new(BooleanArraysAsLongsRule)];
        rules.extend(datafusion::optimizer::Analyzer::new().rules);
        rules.push(rule());
        let mut state = datafusion::execution::SessionStateBuilder::new()
            .with_default_features()
            .with_analyzer_rules(rules)
            .build();
        datafusion::execution::FunctionRegistry::register_expr_planner(
            &mut state,
            Arc::new(TextOperandPlanner),
        )
        .unwrap();
        SessionContext::new_with_state(state)
    }

    async fn row(sql: &str) -> Vec<String> {
        let batches = ctx()
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        crate::test_support::first_row_text(&batches)
    }

    /// `sql-data-types.md`: `CAST('foo' AS BIGINT)` is NULL; Druid's long parsing falls back
    /// to a double (`'1.5'` is 1).
    #[tokio::test]
    async fn text_that_does_not_convert_is_null() {
        assert_eq!(
            row(
                "SELECT CAST('foo' AS BIGINT) AS a, CAST('12' AS BIGINT) + 1 AS b, \
                        CAST('1.5' AS BIGINT) AS c, CAST(' x' AS DOUBLE) AS d, \
                        CAST('2.5' AS DOUBLE) AS e, CAST('nope' AS TIMESTAMP) AS f, \
                        CAST('99999999999' AS INT) AS g"
            )
            .await,
            ["null", "13", "1", "null", "2.5", "null", "null"]
        );
    }

    /// Comparisons and `COALESCE` coerce a string to the number it meets, as Calcite's
    /// coercion does; text that is not a number is NULL there.
    #[tokio::test]
    async fn coerced_text_does_not_fail_the_query() {
        assert_eq!(
            row(
                "SELECT COALESCE(null, null, 5, 'abc') AS a, 1 IS DISTINCT FROM 'a' AS b, \
                        'a' = 1 AS c, 2 IS NOT DISTINCT FROM '2' AS d"
            )
            .await,
            ["5", "true", "null", "true"]
        );
    }

    /// An array of booleans compared with an array of numbers compares their longs.
    #[tokio::test]
    async fn boolean_arrays_compare_with_long_arrays() {
        assert_eq!(
            row("SELECT make_array(1, 0) = make_array(true, false) AS a, \
                        make_array(true) < make_array(2) AS b, \
                        make_array(1) BETWEEN make_array(false) AND make_array(true) AS c, \
                        make_array(0) IN (make_array(true), make_array(false)) AS d, \
                        make_array('S1') IN (make_array(CAST(NULL AS BIGINT))) AS e")
            .await,
            ["true", "true", "true", "true", "false"]
        );
    }

    /// Druid's quidem `qaArray/sql_subquery_with_where`: an array of strings compared with an
    /// array of numbers compares as strings, and does not fail on elements that are not
    /// numbers.
    #[tokio::test]
    async fn string_arrays_meeting_number_arrays_do_not_fail_the_query() {
        assert_eq!(
            row("SELECT make_array(1, 0) = make_array('S1', 'S2') AS a, \
                        make_array(1, 2) = make_array('1', '2') AS b, \
                        make_array('S1', NULL) = make_array(CAST(NULL AS BIGINT), NULL) AS c, \
                        make_array('10') > make_array(9) AS d")
            .await,
            ["false", "true", "false", "false"]
        );
    }

    /// Druid's quidem `mv_sql_ops`: text meets a number as that number's type, two texts as
    /// DOUBLE; text that is no number gives NULL.
    #[tokio::test]
    async fn arithmetic_over_text_coerces_as_calcite() {
        assert_eq!(
            row(
                "SELECT '3' - '1' AS a, '3' - 1 AS b, 7 / '2' AS c, '1.5' * 2.0 AS d, \
                        'x' + 1 AS e, '' - '' AS f, arrow_typeof('3' - 1) AS g, \
                        1 || 2 AS h, 'a' || 2 AS i, true || 1.5 AS j"
            )
            .await,
            [
                "2.0", "2", "3", "3.0", "null", "null", "Int64", "12", "a2", "true1.5"
            ]
        );
    }
}
