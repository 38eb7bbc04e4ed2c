//! Window frames as Druid reads them ([`rewrite_window_frames`], an AST rewrite before
//! planning).
//!
//! Calcite keeps a frame's bounds as written and fills a missing bound with `CURRENT ROW`:
//! "ROWS 1 PRECEDING" is "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", and a single `FOLLOWING`
//! bound is the upper one (`SqlWindow.create`): "ROWS 1 FOLLOWING" is "ROWS BETWEEN CURRENT
//! ROW AND 1 FOLLOWING", "RANGE UNBOUNDED FOLLOWING" is "RANGE BETWEEN CURRENT ROW AND
//! UNBOUNDED FOLLOWING" (Druid's quidem `qaWin/orderby_rows_1_following_*` and
//! `orderby_range_ub_following_*` answers); its validator only rejects an `UNBOUNDED PRECEDING` upper or `UNBOUNDED FOLLOWING`
//! lower bound written as such and a few `FOLLOWING .. PRECEDING` shapes
//! (`SqlWindow.checkSpecialLiterals`, which does not see the filled-in bound). Druid turns the
//! bounds into row (or peer-group) offsets, an unbounded end being unbounded whatever its
//! direction (`Windowing.getWindowFrame`: `lowerBound.isUnbounded()`), and aggregates each
//! row's frame: a frame whose start is after its end is empty (`DefaultFramedOnHeapAggregatable`),
//! so `COUNT` is 0 and `SUM`, `MIN`, `MAX`, `AVG` are null (Druid's
//! `calcite/tests/window/allBoundsCombination.sqlTest`: `rows between unbounded preceding and 1
//! preceding` counts 0 on a partition's first row; `past_and_future_frames.sqlTest`: `0 =
//! COUNT(1) OVER (.. ROWS BETWEEN 2 FOLLOWING AND 1 FOLLOWING)`). DataFusion rejects those
//! frames while planning. The rewrite gives DataFusion frames it takes, with Druid's answers:
//!
//! | written | becomes |
//! |---|---|
//! | `ROWS n FOLLOWING`, `RANGE UNBOUNDED FOLLOWING` (short forms) | `BETWEEN CURRENT ROW AND n FOLLOWING` (`.. UNBOUNDED FOLLOWING`) |
//! | a lower bound `UNBOUNDED FOLLOWING` written in `BETWEEN` | `UNBOUNDED PRECEDING` |
//! | a `ROWS` bound `0 PRECEDING` or `0 FOLLOWING` (`ROWS 0 FOLLOWING`) | `CURRENT ROW` |
//! | `FIRST_VALUE`/`LAST_VALUE` with `ORDER BY` over a `RANGE` frame, or the default one | the same bounds in `ROWS` (Druid reads rows for them); over a named window, on the call's own copy of it |
//! | an upper bound `UNBOUNDED PRECEDING` | `UNBOUNDED FOLLOWING` |
//! | `f(x, ..) OVER (.. frame)` whose start is after its end (`ROWS BETWEEN 0 PRECEDING AND 1 PRECEDING`, `1 FOLLOWING AND CURRENT ROW`) | `f(CASE WHEN FALSE THEN x END, ..) OVER (.. ROWS BETWEEN CURRENT ROW AND CURRENT ROW)`: the aggregate of no value, typed as `f(x)` (`COUNT(*)` counts a null) |
//!
//! Ranking and offset functions (`ROW_NUMBER`, `RANK`, `LAG`, ..) do not read frames; an
//! empty frame of theirs is replaced by the one-row frame. Named windows (`WINDOW w AS (..)`)
//! get the first rewrites; a call over a named window with an empty frame is left to
//! DataFusion.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, NamedWindowExpr, Select,
    Value, VisitMut, VisitorMut, WindowFrame, WindowFrameBound, WindowFrameUnits, WindowType,
};

/// Functions that ignore the frame (ranking and offsets): their empty frames need no rewrite
/// of their arguments.
const FRAMELESS: &[&str] = &[
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
];

/// Applies the module's rewrites to every window of `stmt`.
pub fn rewrite_window_frames<V: VisitMut>(stmt: &mut V) {
    let _ = stmt.visit(&mut Frames);
}

struct Frames;

impl VisitorMut for Frames {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        for def in &mut select.named_window {
            if let NamedWindowExpr::WindowSpec(spec) = &mut def.1
                && let Some(frame) = &mut spec.window_frame
            {
                normalize(frame);
            }
        }
        // `FIRST_VALUE(x) OVER w`: the call gets its own copy of `w`'s definition, so that
        // `rewrite_call` can make its frame row-based without changing `w` for the other calls
        // over it (a `SUM(x) OVER w` keeps `w`'s peer groups).
        let named: Vec<(String, datafusion::sql::sqlparser::ast::WindowSpec)> = select
            .named_window
            .iter()
            .filter_map(|def| match &def.1 {
                NamedWindowExpr::WindowSpec(spec) if spec.window_name.is_none() => {
                    Some((def.0.value.to_ascii_lowercase(), spec.clone()))
                }
                _ => None,
            })
            .collect();
        if !named.is_empty() {
            for item in &mut select.projection {
                let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(item, |e| {
                    if let Expr::Function(f) = e
                        && is_first_or_last(f)
                        && let Some(WindowType::NamedWindow(w)) = &f.over
                        && let Some((_, spec)) = named
                            .iter()
                            .find(|(n, _)| *n == w.value.to_ascii_lowercase())
                    {
                        f.over = Some(WindowType::WindowSpec(spec.clone()));
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Function(f) = expr {
            rewrite_call(f);
        }
        ControlFlow::Continue(())
    }
}

/// Where a bound is, in rows from the current one (`None` for an unbounded end or an offset
/// that is not an integer literal).
fn position(bound: &WindowFrameBound) -> Option<i128> {
    let offset = |e: &Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<i128>().ok(),
            _ => None,
        },
        _ => None,
    };
    match bound {
        WindowFrameBound::CurrentRow => Some(0),
        WindowFrameBound::Preceding(Some(e)) => offset(e).map(|n| -n),
        WindowFrameBound::Following(Some(e)) => offset(e),
        _ => None,
    }
}

/// Fills the short form's end and turns unbounded ends the wrong way round into Druid's
/// unbounded ends.
fn normalize(frame: &mut WindowFrame) {
    // Calcite's `SqlWindow.create`: a single bound that is `FOLLOWING` is the upper bound, the
    // lower one the current row (`ROWS 1 FOLLOWING` is `BETWEEN CURRENT ROW AND 1 FOLLOWING`).
    if frame.end_bound.is_none() && matches!(frame.start_bound, WindowFrameBound::Following(_)) {
        let upper = std::mem::replace(&mut frame.start_bound, WindowFrameBound::CurrentRow);
        frame.end_bound = Some(upper);
    }
    let end = frame.end_bound.get_or_insert(WindowFrameBound::CurrentRow);
    if matches!(end, WindowFrameBound::Preceding(None)) {
        *end = WindowFrameBound::Following(None);
    }
    if matches!(frame.start_bound, WindowFrameBound::Following(None)) {
        frame.start_bound = WindowFrameBound::Preceding(None);
    }
    // `0 PRECEDING` and `0 FOLLOWING` are the current row (its peers for `RANGE`): DataFusion
    // compares them with `CURRENT ROW` by kind and rejects `ROWS 0 FOLLOWING` ("start bound
    // (0 FOLLOWING) cannot be larger than end bound (CURRENT ROW)"), which Druid runs (quidem
    // `qaWin/orderby_rows_0_following_*`).
    // Not for `RANGE`: an offset there needs exactly one `ORDER BY` key, which DataFusion
    // checks as Druid does (quidem `qaWin/orderby_range_0_*` refuses two keys).
    if frame.units == WindowFrameUnits::Range {
        return;
    }
    for bound in [Some(&mut frame.start_bound), frame.end_bound.as_mut()]
        .into_iter()
        .flatten()
    {
        if !matches!(bound, WindowFrameBound::CurrentRow) && position(bound) == Some(0) {
            *bound = WindowFrameBound::CurrentRow;
        }
    }
}

/// Whether `frame` (normalized) holds no row for any current row: its start is after its end.
fn is_empty(frame: &WindowFrame) -> bool {
    let Some(end) = &frame.end_bound else {
        return false;
    };
    match (position(&frame.start_bound), position(end)) {
        (Some(start), Some(end)) => start > end,
        _ => false,
    }
}

fn is_first_or_last(f: &Function) -> bool {
    let name = f.name.to_string().to_ascii_lowercase();
    name == "first_value" || name == "last_value"
}

fn rewrite_call(f: &mut Function) {
    let first_or_last = is_first_or_last(f);
    let Some(WindowType::WindowSpec(spec)) = &mut f.over else {
        return;
    };
    // Druid's FIRST_VALUE/LAST_VALUE read rows, not peer groups: over the default frame
    // (`RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`) LAST_VALUE is the current row's
    // value even when later rows tie with it (quidem `qaWin/basics_window_funcs`:
    // `LAST_VALUE(timezone) OVER (PARTITION BY client_ip ORDER BY server_ip)`). Their frames
    // have no offsets (Druid refuses those, `crate::validate`).
    if first_or_last && !spec.order_by.is_empty() {
        let frame = spec.window_frame.get_or_insert(WindowFrame {
            units: WindowFrameUnits::Range,
            start_bound: WindowFrameBound::Preceding(None),
            end_bound: Some(WindowFrameBound::CurrentRow),
        });
        if frame.units == WindowFrameUnits::Range {
            frame.units = WindowFrameUnits::Rows;
        }
    }
    let Some(frame) = &mut spec.window_frame else {
        return;
    };
    normalize(frame);
    if !is_empty(frame) {
        return;
    }
    // A frame of one row (always valid), whose rows the arguments no longer see.
    *frame = WindowFrame {
        units: WindowFrameUnits::Rows,
        start_bound: WindowFrameBound::CurrentRow,
        end_bound: Some(WindowFrameBound::CurrentRow),
    };
    let name = f.name.to_string().to_ascii_lowercase();
    if FRAMELESS.contains(&name.as_str()) {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let Some(first) = list.args.first_mut() else {
        return;
    };
    let arg = match first {
        FunctionArg::Unnamed(a) | FunctionArg::Named { arg: a, .. } => a,
        FunctionArg::ExprNamed { arg, .. } => arg,
    };
    *arg = match std::mem::replace(arg, FunctionArgExpr::Wildcard) {
        FunctionArgExpr::Expr(e) => FunctionArgExpr::Expr(Expr::Case {
            case_token:
                datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
            end_token:
                datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
            operand: None,
            conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
                condition: Expr::value(Value::Boolean(false)),
                result: e,
            }],
            else_result: None,
        }),
        // COUNT(*) of no row: a count of nulls.
        _ => FunctionArgExpr::Expr(Expr::value(Value::Null)),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&crate::dialect::DruidDialect::default(), sql).unwrap();
        rewrite_window_frames(&mut stmts[0]);
        stmts[0].to_string()
    }

    #[test]
    fn short_forms_and_unbounded_ends_read_as_druid_reads_them() {
        assert_eq!(
            rewritten("SELECT SUM(x) OVER (ORDER BY x ROWS 1 PRECEDING) FROM t"),
            "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t"
        );
        assert_eq!(
            rewritten("SELECT SUM(x) OVER (ORDER BY x RANGE UNBOUNDED FOLLOWING) FROM t"),
            "SELECT SUM(x) OVER (ORDER BY x RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM t"
        );
        assert_eq!(
            rewritten("SELECT SUM(x) OVER (ORDER BY x ROWS 1 FOLLOWING) FROM t"),
            "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND UNBOUNDED PRECEDING) FROM t"
            ),
            "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN 0 FOLLOWING AND 0 FOLLOWING) FROM t"
            ),
            "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN 0 PRECEDING AND 0 FOLLOWING) FROM t"
            ),
            "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM t"
        );
        // A RANGE offset of 0 stays an offset (one ORDER BY key only).
        let sql =
            "SELECT SUM(x) OVER (ORDER BY x RANGE BETWEEN 0 PRECEDING AND CURRENT ROW) FROM t";
        assert_eq!(rewritten(sql), sql);
        // Valid frames are left as written.
        let sql = "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) FROM t";
        assert_eq!(rewritten(sql), sql);
    }

    #[test]
    fn first_and_last_values_read_rows() {
        assert_eq!(
            rewritten("SELECT LAST_VALUE(x) OVER (PARTITION BY y ORDER BY z) FROM t"),
            "SELECT LAST_VALUE(x) OVER (PARTITION BY y ORDER BY z ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM t"
        );
        assert_eq!(
            rewritten("SELECT FIRST_VALUE(x) OVER (ORDER BY z RANGE UNBOUNDED FOLLOWING) FROM t"),
            "SELECT FIRST_VALUE(x) OVER (ORDER BY z ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM t"
        );
        // Over a named window, the call gets its own row-based copy; `SUM` keeps `w`.
        assert_eq!(
            rewritten("SELECT LAST_VALUE(x) OVER w, SUM(x) OVER w FROM t WINDOW w AS (ORDER BY z)"),
            "SELECT LAST_VALUE(x) OVER (ORDER BY z ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), \
             SUM(x) OVER w FROM t WINDOW w AS (ORDER BY z)"
        );
        // Without ORDER BY the frame is the whole partition either way.
        let sql = "SELECT LAST_VALUE(x) OVER (PARTITION BY y) FROM t";
        assert_eq!(rewritten(sql), sql);
    }

    #[test]
    fn empty_frames_aggregate_no_value() {
        assert_eq!(
            rewritten(
                "SELECT SUM(x) OVER (ORDER BY x ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) FROM t"
            ),
            "SELECT SUM(CASE WHEN false THEN x END) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT COUNT(*) OVER (ORDER BY x ROWS BETWEEN 0 PRECEDING AND 1 PRECEDING) FROM t"
            ),
            "SELECT COUNT(NULL) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT ROW_NUMBER() OVER (ORDER BY x ROWS BETWEEN 2 FOLLOWING AND 1 FOLLOWING) FROM t"
            ),
            "SELECT ROW_NUMBER() OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM t"
        );
    }
}
