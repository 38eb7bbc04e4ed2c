//! The text of a Druid SQL request: leading `SET` statements and `?` parameters.
//!
//! Druid SQL (`docs/querying/sql.md`, reference-behaviour "SQL API") accepts any number of
//! `SET key = literal;` statements before the one query; each sets a query-context value and
//! wins over the request's `context`. Only literals are allowed (strings, numbers, booleans,
//! `NULL`). Dynamic parameters are written `?` and bound by position from the request's
//! `parameters` (Calcite numbers them in the order they appear in the text).
//!
//! [`parse_request_sql`] splits the text into those parts. DataFusion's planner knows numbered
//! placeholders (`$1`, `$2`, ...) only, so each `?` token is renumbered in text order first;
//! the tokenizer finds them, so a `?` inside a string literal, a quoted identifier or a comment
//! is left alone.
//!
//! `EXPLAIN PLAN FOR <query>` (Calcite's syntax, which Druid's console sends) is not in
//! DataFusion's grammar: the three words are blanked out of the text before parsing (so error
//! columns still point into the user's text) and [`RequestSql::explain`] is set; the engine then
//! answers with Druid's `PLAN`/`RESOURCES`/`ATTRIBUTES` row instead of running the query.
//!
//! SQL-based ingestion (`INSERT` / `REPLACE ... PARTITIONED BY ... CLUSTERED BY`) is not in
//! DataFusion's grammar either: when the query statement opens with `INSERT` or `REPLACE`,
//! [`crate::dml::parse_dml`] takes its clauses off and leaves the `SELECT` (blanked in place,
//! so positions still match), which is parsed as the query; [`RequestSql::dml`] carries the
//! clauses. `TABLE(EXTERN(...)) [EXTEND] (...)` is rewritten first
//! ([`crate::external::rewrite_extern`]).
//!
//! Two SQL-standard argument forms Druid (Calcite) takes but DataFusion's parser does not are
//! rewritten on tokens too (`rewrite_standard_forms`): `JSON_OBJECT(KEY k VALUE v, ...)`
//! (also `k VALUE v` and `k: v`) becomes `JSON_OBJECT(k, v, ...)` (blanked in place), and `POSITION(a IN b FROM n)` becomes
//! the same search on `SUBSTR(b, GREATEST(n, 1))` (`''` past the end), shifted back (0 when not found; Druid's
//! `strpos(b, a, n - 1) + 1`, where a start before 1 searches from the beginning).

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::context::SessionState;
use datafusion::sql::parser::{DFParserBuilder, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{Expr, Set, Statement, UnaryOperator, Value};
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};
use serde_json::{Map, Value as Json};

/// A request's SQL text, parsed: the `SET` assignments in order and the query statement.
#[derive(Debug)]
pub struct RequestSql {
    /// `SET key = literal` assignments, in text order (a later one wins).
    pub sets: Vec<(String, Json)>,
    /// The query, with `?` parameters renumbered `$1..$n`.
    pub statement: DFStatement,
    /// How many `?` parameters the text holds.
    pub parameter_count: usize,
    /// The query was written `EXPLAIN PLAN FOR <query>`.
    pub explain: bool,
    /// The `INSERT` / `REPLACE` clauses when the query is SQL-based ingestion; `statement` is
    /// then its `SELECT`.
    pub dml: Option<crate::dml::DmlStatement>,
}

impl RequestSql {
    /// `context` with the `SET` values applied over it (SET wins, as in Druid).
    pub fn effective_context(&self, context: Option<&Map<String, Json>>) -> Map<String, Json> {
        let mut out = context.cloned().unwrap_or_default();
        for (k, v) in &self.sets {
            out.insert(k.clone(), v.clone());
        }
        out
    }
}

/// Parses a request's SQL text with Druid's dialect ([`crate::dialect::DruidDialect`]).
///
/// # Errors
/// A parse error (as DataFusion reports it) for bad SQL; a plan error when a statement other
/// than the last is not a `SET`, when a `SET` assigns anything but one literal, or when the
/// text holds no query after its `SET` statements.
pub fn parse_request_sql(state: &SessionState, sql: &str) -> Result<RequestSql> {
    let dialect = crate::dialect::DruidDialect::default();
    let text = crate::external::rewrite_extern(sql, &dialect)?;
    let text = rewrite_standard_forms(&text, &dialect)?;
    let (text, explain) = blank_explain_plan_for(&text, &dialect)?;
    let (text, parameter_count) = number_placeholders(&text, &dialect)?;
    let (text, dml) = split_dml(&text, &dialect)?;
    let recursion_limit = state.config().options().sql_parser.recursion_limit.get();
    let mut statements = DFParserBuilder::new(text.as_str())
        .with_dialect(&dialect)
        .with_recursion_limit(recursion_limit)
        .build()?
        .parse_statements()?;
    let Some(statement) = statements.pop_back() else {
        return Err(DataFusionError::Plan("Empty query".into()));
    };
    if set_assignment(&statement)?.is_some() {
        return Err(DataFusionError::Plan(
            "The request ends with a SET statement; a query must follow them".into(),
        ));
    }
    let mut sets = Vec::with_capacity(statements.len());
    for s in statements {
        sets.push(set_assignment(&s)?.ok_or_else(|| {
            DataFusionError::Plan(
                "Only SET statements may come before the query; a request holds one query".into(),
            )
        })?);
    }
    Ok(RequestSql {
        sets,
        statement,
        parameter_count,
        explain,
        dml,
    })
}

/// When the last statement of `sql` opens with `INSERT` or `REPLACE`, parses its clauses with
/// [`crate::dml::parse_dml`] and returns the text with that statement replaced by its bare
/// query; otherwise the text unchanged. Text without those words is not tokenized.
fn split_dml(
    sql: &str,
    dialect: &dyn datafusion::sql::sqlparser::dialect::Dialect,
) -> Result<(String, Option<crate::dml::DmlStatement>)> {
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("insert") && !lower.contains("replace") {
        return Ok((sql.to_string(), None));
    }
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize_with_location()
        .map_err(|e| DataFusionError::SQL(Box::new(e.into()), None))?;
    // The start of the last statement: after the last `;` that is followed by more than
    // whitespace and comments.
    let mut start: Option<Location> = None;
    let mut after_semicolon = true;
    let mut first_word: Option<String> = None;
    for t in &tokens {
        match &t.token {
            Token::Whitespace(_) => {}
            Token::SemiColon => after_semicolon = true,
            tok => {
                if after_semicolon {
                    start = Some(t.span.start);
                    first_word = match tok {
                        Token::Word(w) if w.quote_style.is_none() => {
                            Some(w.value.to_ascii_uppercase())
                        }
                        _ => None,
                    };
                    after_semicolon = false;
                }
            }
        }
    }
    let (Some(start), Some(word)) = (start, first_word) else {
        return Ok((sql.to_string(), None));
    };
    if word != "INSERT" && word != "REPLACE" {
        return Ok((sql.to_string(), None));
    }
    let at = byte_offsets(sql, &[start]).first().copied().unwrap_or(0);
    let Some(mut dml) = crate::dml::parse_dml(&sql[at..], dialect)? else {
        return Ok((sql.to_string(), None));
    };
    let mut text = String::with_capacity(sql.len());
    text.push_str(&sql[..at]);
    text.push_str(&std::mem::take(&mut dml.query));
    Ok((text, Some(dml)))
}

/// `Some((key, value))` for `SET key = literal`, `None` for any other statement.
fn set_assignment(s: &DFStatement) -> Result<Option<(String, Json)>> {
    let DFStatement::Statement(s) = s else {
        return Ok(None);
    };
    let Statement::Set(set) = s.as_ref() else {
        return Ok(None);
    };
    let Set::SingleAssignment {
        variable, values, ..
    } = set
    else {
        return Err(DataFusionError::Plan(format!(
            "Unsupported SET statement [{set}]: use SET key = literal"
        )));
    };
    let key = variable
        .0
        .iter()
        .map(|p| {
            p.as_ident()
                .map_or_else(|| p.to_string(), |i| i.value.clone())
        })
        .collect::<Vec<_>>()
        .join(".");
    let [value] = values.as_slice() else {
        return Err(DataFusionError::Plan(format!(
            "SET {key}: assign exactly one literal value"
        )));
    };
    let json = literal_json(value).ok_or_else(|| {
        DataFusionError::Plan(format!(
            "SET {key}: the value [{value}] is not a literal; only literals are allowed"
        ))
    })?;
    Ok(Some((key, json)))
}

/// A SQL literal as a JSON context value: strings, numbers (`-` allowed), booleans, `NULL`.
fn literal_json(e: &Expr) -> Option<Json> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                Some(Json::String(s.clone()))
            }
            Value::Number(n, _) => number_json(n, false),
            Value::Boolean(b) => Some(Json::Bool(*b)),
            Value::Null => Some(Json::Null),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => number_json(n, true),
                _ => None,
            },
            _ => None,
        },
        // `SET sqlTimeZone = America/Los_Angeles`-style bare words are not literals in Druid.
        _ => None,
    }
}

fn number_json(n: &str, negative: bool) -> Option<Json> {
    let text = if negative {
        format!("-{n}")
    } else {
        n.to_string()
    };
    if let Ok(i) = text.parse::<i64>() {
        return Some(Json::from(i));
    }
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(Json::Number)
}

/// Replaces the words `EXPLAIN PLAN FOR` that open a statement (at the start of the text or
/// after a `;`, comments and whitespace aside) with spaces; returns the text and whether they
/// were found. Text without the word `plan` is returned unchanged without tokenizing.
///
/// # Errors
/// A tokenizer error as a SQL error.
fn blank_explain_plan_for(
    sql: &str,
    dialect: &dyn datafusion::sql::sqlparser::dialect::Dialect,
) -> Result<(String, bool)> {
    if !sql.to_ascii_lowercase().contains("plan") {
        return Ok((sql.to_string(), false));
    }
    let words = significant_tokens(sql, dialect)?;
    let is_word = |i: usize, w: &str| is_bare_word(words.get(i), w);
    let mut ranges = Vec::new();
    for i in 0..words.len() {
        let starts_statement = i == 0 || matches!(words[i - 1].token, Token::SemiColon);
        if starts_statement
            && is_word(i, "explain")
            && is_word(i + 1, "plan")
            && is_word(i + 2, "for")
        {
            ranges.push((words[i].span.start, words[i + 2].span.end));
        }
    }
    if ranges.is_empty() {
        return Ok((sql.to_string(), false));
    }
    let bounds: Vec<Location> = ranges.iter().flat_map(|(a, b)| [*a, *b]).collect();
    let mut offsets = byte_offsets(sql, &bounds);
    // A `FOR` that ends the text ends past its last character.
    offsets.resize(bounds.len(), sql.len());
    let mut out = String::with_capacity(sql.len());
    let mut at = 0;
    for pair in offsets.chunks(2) {
        let (a, b) = (pair[0], pair[1]);
        out.push_str(&sql[at..a]);
        // Keep line breaks so that error positions still match the user's text.
        out.extend(
            sql[a..b]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        at = b;
    }
    out.push_str(&sql[at..]);
    Ok((out, true))
}

/// The tokens of `sql` other than whitespace, with their locations.
///
/// # Errors
/// A tokenizer error as a SQL error.
fn significant_tokens(
    sql: &str,
    dialect: &dyn datafusion::sql::sqlparser::dialect::Dialect,
) -> Result<Vec<TokenWithSpan>> {
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize_with_location()
        .map_err(|e| DataFusionError::SQL(Box::new(e.into()), None))?;
    Ok(tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect())
}

/// Whether `token` is the unquoted word `w` (any case).
fn is_bare_word(token: Option<&TokenWithSpan>, w: &str) -> bool {
    matches!(token.map(|t| &t.token),
        Some(Token::Word(word)) if word.quote_style.is_none() && word.value.eq_ignore_ascii_case(w))
}

/// The byte offset of a tokenizer location (1-based line and character column) in `sql`;
/// `sql.len()` for a location past the end.
fn byte_offset(sql: &str, at: Location) -> usize {
    byte_offsets(sql, &[at])
        .first()
        .copied()
        .unwrap_or(sql.len())
}

/// See the module docs: `JSON_OBJECT(KEY k VALUE v, ...)` and `POSITION(a IN b FROM n)`
/// rewritten to forms DataFusion parses. Text without those function names is returned
/// unchanged without tokenizing; nested occurrences inside a rewritten `POSITION` keep their
/// original text.
///
/// # Errors
/// A tokenizer error as a SQL error.
fn rewrite_standard_forms(
    sql: &str,
    dialect: &dyn datafusion::sql::sqlparser::dialect::Dialect,
) -> Result<String> {
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("json_object") && !lower.contains("position") && !lower.contains("returning")
    {
        return Ok(sql.to_string());
    }
    let words = significant_tokens(sql, dialect)?;
    let is_word = |i: usize, w: &str| is_bare_word(words.get(i), w);
    // (start byte, end byte, replacement), possibly nested.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    // `RETURNING <type> ARRAY)` (Calcite's postfix array type in JSON_VALUE) reads as
    // `RETURNING <type>[])`, the form sqlparser knows.
    for i in 0..words.len() {
        if is_word(i, "returning") {
            let array_at = (i + 2..(i + 4).min(words.len())).find(|&j| {
                is_word(j, "array")
                    && matches!(words.get(j + 1).map(|t| &t.token), Some(Token::RParen))
            });
            if let Some(j) = array_at {
                let a = byte_offset(sql, words[j].span.start);
                let b = byte_offset(sql, words[j].span.end);
                edits.push((a, b, "[]".to_string()));
            }
        }
    }
    for i in 0..words.len() {
        let json = is_word(i, "json_object");
        let position = is_word(i, "position");
        if !(json || position) || !matches!(words.get(i + 1).map(|t| &t.token), Some(Token::LParen))
        {
            continue;
        }
        // Tokens at depth 1 inside the call's parentheses, and the closing one.
        let mut depth = 0usize;
        let mut top: Vec<usize> = Vec::new();
        let mut close = None;
        for (j, t) in words.iter().enumerate().skip(i + 1) {
            match t.token {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                _ if depth == 1 => top.push(j),
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let span = |j: usize| {
            (
                byte_offset(sql, words[j].span.start),
                byte_offset(sql, words[j].span.end),
            )
        };
        if json {
            // Each argument `[KEY] k VALUE v` or `k: v`: the first VALUE word (or colon) after
            // the argument's first token becomes a comma, and a leading KEY (with more before
            // VALUE) goes.
            for arg in top.split(|&j| matches!(words[j].token, Token::Comma)) {
                let Some(v) = arg
                    .iter()
                    .skip(1)
                    .position(|&j| is_word(j, "value") || matches!(words[j].token, Token::Colon))
                else {
                    continue;
                };
                let v = v + 1;
                let (a, b) = span(arg[v]);
                edits.push((a, b, format!(",{}", " ".repeat(b - a - 1))));
                if is_word(arg[0], "key") && v > 1 {
                    let (a, b) = span(arg[0]);
                    edits.push((a, b, " ".repeat(b - a)));
                }
            }
        } else {
            let (Some(&in_at), Some(&from_at)) = (
                top.iter().find(|&&j| is_word(j, "in")),
                top.iter().find(|&&j| is_word(j, "from")),
            ) else {
                continue;
            };
            if !(i + 2 < in_at && in_at < from_at && from_at + 1 < close) {
                continue;
            }
            let text = |from: usize, to: usize| {
                let a = byte_offset(sql, words[from].span.start);
                let b = byte_offset(sql, words[to].span.end);
                sql[a..b].to_string()
            };
            let needle = text(i + 2, in_at - 1);
            let haystack = text(in_at + 1, from_at - 1);
            let start = text(from_at + 1, close - 1);
            // Druid's SUBSTR is null past the end of the string: search '' there instead
            // (`LEFT(b, 0)`, null when `b` is).
            let found = format!(
                "STRPOS(COALESCE(SUBSTR(({haystack}), GREATEST(({start}), 1)), LEFT(({haystack}), 0)), ({needle}))"
            );
            let replacement = format!(
                "(CASE WHEN {found} = 0 THEN 0 ELSE {found} + GREATEST(({start}), 1) - 1 END)"
            );
            let (a, _) = span(i);
            let (_, b) = span(close);
            edits.push((a, b, replacement));
        }
    }
    if edits.is_empty() {
        return Ok(sql.to_string());
    }
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(sql.len() + 64);
    let mut at = 0;
    for (a, b, replacement) in edits {
        if a < at {
            // Inside an outer rewritten span: its original text was used.
            continue;
        }
        out.push_str(&sql[at..a]);
        out.push_str(&replacement);
        at = b;
    }
    out.push_str(&sql[at..]);
    Ok(out)
}

/// Rewrites each `?` placeholder token of `sql` to `$1`, `$2`, ... in text order; returns the
/// new text and the count. Text without `?` tokens is returned unchanged.
///
/// # Errors
/// A tokenizer error (an unterminated string literal, ...) as a SQL error.
fn number_placeholders(
    sql: &str,
    dialect: &dyn datafusion::sql::sqlparser::dialect::Dialect,
) -> Result<(String, usize)> {
    if !sql.contains('?') {
        return Ok((sql.to_string(), 0));
    }
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize_with_location()
        .map_err(|e| DataFusionError::SQL(Box::new(e.into()), None))?;
    let starts: Vec<Location> = tokens
        .iter()
        .filter(|t| matches!(&t.token, Token::Placeholder(p) if p == "?"))
        .map(|t| t.span.start)
        .collect();
    if starts.is_empty() {
        return Ok((sql.to_string(), 0));
    }
    let offsets = byte_offsets(sql, &starts);
    let mut out = String::with_capacity(sql.len() + 2 * offsets.len());
    let mut at = 0;
    for (n, off) in offsets.iter().enumerate() {
        out.push_str(&sql[at..*off]);
        out.push('$');
        out.push_str(&(n + 1).to_string());
        at = off + 1;
    }
    out.push_str(&sql[at..]);
    Ok((out, offsets.len()))
}

/// Byte offsets of tokenizer locations (1-based line and character column), in order.
fn byte_offsets(sql: &str, locations: &[Location]) -> Vec<usize> {
    let mut out = Vec::with_capacity(locations.len());
    let mut want = locations.iter().peekable();
    let (mut line, mut col) = (1u64, 1u64);
    for (i, ch) in sql.char_indices() {
        while let Some(l) = want.peek() {
            if l.line == line && l.column == col {
                out.push(i);
                want.next();
            } else {
                break;
            }
        }
        if ch == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    fn standard(sql: &str) -> String {
        rewrite_standard_forms(sql, &crate::dialect::DruidDialect::default()).unwrap()
    }

    /// The single value of `sql` (after the rewrite) as text.
    async fn value(sql: &str) -> String {
        let ctx = SessionContext::new();
        crate::functions::register_druid_functions(&ctx);
        let batches = crate::rewrite::plan_sql(&ctx, &standard(sql))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let c =
            arrow::compute::cast(batches[0].column(0), &arrow::datatypes::DataType::Utf8).unwrap();
        use arrow::array::{Array, AsArray};
        let c = c.as_string::<i32>();
        if c.is_valid(0) {
            c.value(0).to_string()
        } else {
            "null".to_string()
        }
    }

    #[test]
    fn json_object_key_value_is_blanked_in_place() {
        let sql = "SELECT JSON_OBJECT(KEY 'a' VALUE 1, KEY 'b' VALUE x) FROM t";
        let out = standard(sql);
        assert_eq!(
            out,
            "SELECT JSON_OBJECT(    'a' ,     1,     'b' ,     x) FROM t"
        );
        assert_eq!(out.len(), sql.len(), "positions are kept");
        // KEY is optional; columns named key or value stay.
        assert_eq!(
            standard("SELECT JSON_OBJECT('a' VALUE value, 'k', key)"),
            "SELECT JSON_OBJECT('a' ,     value, 'k', key)"
        );
        assert_eq!(
            standard("SELECT JSON_OBJECT('a': 1)"),
            "SELECT JSON_OBJECT('a', 1)"
        );
        let plain = "SELECT JSON_OBJECT('a', 1), json_object_x(key) FROM t";
        assert_eq!(standard(plain), plain);
    }

    #[tokio::test]
    async fn json_object_key_value_builds_the_object() {
        assert_eq!(
            value("SELECT TO_JSON_STRING(JSON_OBJECT(KEY 'a' VALUE 1, KEY 'b' VALUE 'x'))").await,
            r#"{"a":1,"b":"x"}"#
        );
    }

    #[tokio::test]
    async fn position_from_searches_from_the_start_index() {
        for (sql, want) in [
            ("SELECT POSITION('b' IN 'abcb' FROM 3)", "4"),
            ("SELECT POSITION('b' IN 'abcb' FROM 1)", "2"),
            ("SELECT POSITION('b' IN 'abcb' FROM 0)", "2"),
            ("SELECT POSITION('b' IN 'abcb' FROM 10)", "0"),
            ("SELECT POSITION('z' IN 'abcb' FROM 2)", "0"),
            (
                "SELECT POSITION('b' IN CAST(NULL AS VARCHAR) FROM 2)",
                "null",
            ),
            ("SELECT POSITION('b' IN 'abcb')", "2"),
            // Nested calls and expressions in every part.
            (
                "SELECT POSITION(LOWER('B') IN CONCAT('ab', 'cb') FROM 1 + 2)",
                "4",
            ),
        ] {
            assert_eq!(value(sql).await, want, "{sql}");
        }
    }

    fn parse(sql: &str) -> Result<RequestSql> {
        parse_request_sql(&SessionContext::new().state(), sql)
    }

    #[test]
    fn explain_plan_for() {
        let r = parse("explain  Plan\nFOR SELECT 'explain plan for' AS x").unwrap();
        assert!(r.explain);
        assert_eq!(r.statement.to_string(), "SELECT 'explain plan for' AS x");
        let r = parse("SET a = 1; /* c */ EXPLAIN PLAN FOR SELECT ? AS p").unwrap();
        assert!(r.explain);
        assert_eq!(r.parameter_count, 1);
        assert_eq!(r.sets.len(), 1);
        assert!(!parse("SELECT 1 AS plan").unwrap().explain);
        assert!(!parse("SELECT \"explain\" FROM t").unwrap().explain);
        // Nothing after FOR: a parse error, not a panic.
        assert!(parse("EXPLAIN PLAN FOR").is_err());
        // An error position still points into the user's text (line 2).
        let e = parse("EXPLAIN PLAN FOR\nSELEC 1").unwrap_err().to_string();
        assert!(e.contains("Line: 2"), "{e}");
    }

    #[test]
    fn question_marks_become_numbered_placeholders_in_text_order() {
        let d = datafusion::sql::sqlparser::dialect::GenericDialect {};
        let (s, n) = number_placeholders(
            "SELECT '?', \"a?\" FROM t -- ?\nWHERE x = ? AND\n  y IN (?, ?) /* ? */ LIMIT ?",
            &d,
        )
        .unwrap();
        assert_eq!(n, 4);
        assert_eq!(
            s,
            "SELECT '?', \"a?\" FROM t -- ?\nWHERE x = $1 AND\n  y IN ($2, $3) /* ? */ LIMIT $4"
        );
        // Multi-byte characters before a placeholder do not shift it.
        let (s, _) = number_placeholders("SELECT 'é€', ? ", &d).unwrap();
        assert_eq!(s, "SELECT 'é€', $1 ");
        assert_eq!(number_placeholders("SELECT 1", &d).unwrap().1, 0);
    }

    #[test]
    fn set_statements_come_before_the_query_and_win_over_context() {
        let r = parse(
            "SET sqlTimeZone = 'America/Los_Angeles'; SET timeout = 5000;\n\
             SET useApproximateCountDistinct = false; SET x = -1.5; SELECT ?",
        )
        .unwrap();
        assert_eq!(r.parameter_count, 1);
        let mut ctx = Map::new();
        ctx.insert("timeout".into(), Json::from(1));
        ctx.insert("priority".into(), Json::from(7));
        let eff = r.effective_context(Some(&ctx));
        assert_eq!(eff["sqlTimeZone"], "America/Los_Angeles");
        assert_eq!(eff["timeout"], 5000);
        assert_eq!(eff["useApproximateCountDistinct"], false);
        assert_eq!(eff["x"], -1.5);
        assert_eq!(eff["priority"], 7);
    }

    #[test]
    fn misplaced_or_non_literal_sets_are_rejected() {
        let e = parse("SELECT 1; SET a = 1").unwrap_err().to_string();
        assert!(e.contains("a query must follow"), "{e}");
        let e = parse("SELECT 1; SELECT 2").unwrap_err().to_string();
        assert!(e.contains("Only SET statements"), "{e}");
        let e = parse("SET a = 1 + 1; SELECT 1").unwrap_err().to_string();
        assert!(e.contains("not a literal"), "{e}");
        let e = parse("SET a = b; SELECT 1").unwrap_err().to_string();
        assert!(e.contains("not a literal"), "{e}");
        assert!(parse("").is_err());
    }
}
