//! A subset of the Druid native expression language, used by `transformSpec.transforms` and the
//! `expression` filter.
//!
//! Reference: Druid docs, "Druid expressions"
//! (<https://druid.apache.org/docs/latest/querying/math-expr>).
//!
//! [`Expr::parse`] is a Pratt parser producing an AST; [`Expr::eval`] evaluates it against any
//! [`Bindings`] (a closure `Fn(&str) -> ExprValue`, an [`InputRow`], or [`RowBindings`], which also
//! resolves `__time`). Evaluation never panics and never fails: invalid operations yield
//! [`ExprValue::Null`].
//!
//! # Syntax
//!
//! * Literals: longs `42`, doubles `1.5`, `1e3`, `NaN`, `Infinity`, strings `'text'` (single
//!   quotes, backslash escapes `\' \\ \n \t \r \b \f \/ \uXXXX`) and `null`.
//! * Identifiers: bare `[_$a-zA-Z][_$a-zA-Z0-9]*` (e.g. `page`, `__time`) or double-quoted
//!   `"my col"`.
//! * Operators, highest precedence first: unary `-` `!`; `^` (right associative); `*` `/` `%`;
//!   `+` `-`; `<` `<=` `>` `>=` `==` `!=`; `&&` `||` (same precedence, left associative, as in
//!   Druid's grammar).
//! * Function calls with case-insensitive names. Array literals and lambdas are not supported.
//!
//! # Semantics (Druid's SQL-compatible null handling, strict booleans)
//!
//! * Binary operators return null if either side is null.
//! * `long op long` stays long (integer division, wrapping overflow); any double makes the
//!   operation double; a string with a number is converted to double (non-numeric → null).
//!   `string + string` concatenates; `string < string` compares lexicographically; other
//!   arithmetic on two strings is null (Druid raises an error).
//! * Long division or modulo by zero, and `long ^ negative long`, yield null (Druid raises an
//!   error that fails the row; Dolmen never fails evaluation). Double division follows IEEE.
//! * Comparisons and logical operators return long `1`/`0`; `&&`/`||` use three-valued logic.
//! * Truthiness (Druid `Evals.asBoolean`): long `> 0`, double `> 0`, string equal to `"true"`
//!   (case-insensitive), null is false.
//! * Doubles are rendered as strings like Java's `Double.toString` (`300.0`, `1.0E10`), see
//!   [`format_double`].
//! * String functions index by Unicode scalar values (Java uses UTF-16 units; they differ only
//!   for characters outside the Basic Multilingual Plane).
//!
//! # Functions
//!
//! String: `concat`, `upper`, `lower`, `strlen`, `substring(expr, index, length)` (0-based,
//! negative length = to the end), `replace`, `left`, `right`, `trim`/`ltrim`/`rtrim(expr[, chars])`,
//! `lpad`/`rpad(expr, length, chars)`, `strpos(haystack, needle[, fromIndex])`, `contains_string`,
//! `icontains_string`, `reverse`, `repeat`, `like(expr, pattern[, escape])`,
//! `regexp_extract(expr, pattern[, index])`, `regexp_like`, `regexp_replace`.
//! Patterns of `like`/`regexp_*` must be string literals (as in Druid); regular expressions use
//! Rust `regex` syntax, which lacks look-around and back-references.
//!
//! Conditional and null: `nvl`, `coalesce`, `if(cond, then, else)`,
//! `case_searched(c1, v1, ..., [else])`, `case_simple(expr, v1, r1, ..., [else])`, `isnull`,
//! `notnull`, `cast(expr, 'LONG'|'DOUBLE'|'STRING')`.
//!
//! Math: `abs`, `floor`, `ceil` (double results, like Druid), `round(x[, scale])`, `pow`, `sqrt`,
//! `exp`, `log`, `log10`, `greatest`, `least`, `div`, `parse_long(str[, radix])`. Numeric strings
//! are accepted where Druid would return null.
//!
//! Time (epoch millis; periods are ISO 8601 such as `PT1H`, `P1D`, `P1W`, `P3M`, `P1Y`):
//! `timestamp(expr[, pattern])`, `timestamp_parse(expr[, pattern[, timezone]])`,
//! `timestamp_floor(expr, period[, origin[, timezone]])`, `timestamp_ceil(...)`,
//! `timestamp_shift(expr, period, step[, timezone])`, `timestamp_extract(expr, unit[, timezone])`,
//! `timestamp_format(expr[, pattern[, timezone]])`. Patterns are Joda-Time patterns (the
//! letters [`crate::timestamp`] accepts, implemented by [`dolmen_common::joda::JodaFormat`]) and,
//! like the `timestamp_extract` unit, must be literals. Time zones are ids such as
//! `America/Los_Angeles` or fixed offsets such as `+05:30` ([`dolmen_common::zone::Zone`]).
//! `timestamp`/`timestamp_parse` pass long inputs through unchanged and return null for
//! unparseable strings (and for local times inside a daylight-saving gap, as Joda's parser).
//! Floors, ceilings and shifts are Druid's period arithmetic ([`dolmen_common::period`]), the
//! units of `timestamp_extract` Druid's ([`dolmen_common::time::ExtractUnit`]).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;

use dolmen_common::joda::JodaFormat;
use dolmen_common::period::{Period, PeriodBucketer};
use dolmen_common::time::{ExtractUnit, format_iso_in_zone, parse_iso_in_zone};
use dolmen_common::zone::Zone;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::input::InputRow;
use crate::timestamp::compile_pattern;

/// Maximum nesting depth accepted by the parser (guards the stack against hostile input).
const MAX_DEPTH: usize = 128;

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// The value of an expression: Druid's `ExprEval` restricted to scalar types.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprValue {
    /// SQL null.
    Null,
    /// 64-bit integer.
    Long(i64),
    /// 64-bit float.
    Double(f64),
    /// UTF-8 string.
    String(String),
    /// A `COMPLEX<json>` value (results of `json_query`, `json_object`, `parse_json`); where a
    /// string is wanted it reads as its JSON text, where a number is wanted as its number.
    Json(Value),
}

impl ExprValue {
    /// Converts an input value. Booleans become the strings `"true"`/`"false"` (how Druid ingests
    /// them), integers that fit `i64` become longs, other numbers doubles, and arrays/objects
    /// their JSON text.
    pub fn from_json(v: &Value) -> ExprValue {
        match v {
            Value::Null => ExprValue::Null,
            Value::Bool(b) => ExprValue::String(if *b { "true" } else { "false" }.to_string()),
            Value::Number(n) => match n.as_i64() {
                Some(i) => ExprValue::Long(i),
                None => n.as_f64().map_or(ExprValue::Null, ExprValue::Double),
            },
            Value::String(s) => ExprValue::String(s.clone()),
            Value::Array(_) | Value::Object(_) => ExprValue::String(v.to_string()),
        }
    }

    /// Converts to JSON. Non-finite doubles have no JSON form and become `null`.
    pub fn to_json(&self) -> Value {
        match self {
            ExprValue::Null => Value::Null,
            ExprValue::Long(l) => Value::from(*l),
            ExprValue::Double(d) => {
                serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number)
            }
            ExprValue::String(s) => Value::String(s.clone()),
            ExprValue::Json(v) => v.clone(),
        }
    }

    /// True for [`ExprValue::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, ExprValue::Null)
    }

    /// Druid's type name (`LONG`, `DOUBLE`, `STRING`; null is reported as `STRING`).
    pub fn type_name(&self) -> &'static str {
        match self {
            ExprValue::Long(_) => "LONG",
            ExprValue::Double(_) => "DOUBLE",
            ExprValue::String(_) | ExprValue::Null => "STRING",
            ExprValue::Json(_) => "COMPLEX<json>",
        }
    }

    /// String form (doubles as Java prints them); `None` for null.
    pub fn as_str(&self) -> Option<Cow<'_, str>> {
        match self {
            ExprValue::Null => None,
            ExprValue::Long(l) => Some(Cow::Owned(l.to_string())),
            ExprValue::Double(d) => Some(Cow::Owned(format_double(*d))),
            ExprValue::String(s) => Some(Cow::Borrowed(s)),
            ExprValue::Json(Value::Null) => None,
            ExprValue::Json(v) => Some(Cow::Owned(v.to_string())),
        }
    }

    /// Long form: doubles truncate (saturating, NaN → 0), numeric strings parse; else `None`.
    pub fn as_long(&self) -> Option<i64> {
        match self {
            ExprValue::Null => None,
            ExprValue::Long(l) => Some(*l),
            ExprValue::Double(d) => Some(*d as i64),
            ExprValue::String(s) => match parse_number(s)? {
                ExprValue::Long(l) => Some(l),
                ExprValue::Double(d) => Some(d as i64),
                _ => None,
            },
            ExprValue::Json(v) => v.as_i64().or_else(|| v.as_f64().map(|d| d as i64)),
        }
    }

    /// Double form; numeric strings parse; else `None`.
    pub fn as_double(&self) -> Option<f64> {
        match self {
            ExprValue::Null => None,
            ExprValue::Long(l) => Some(*l as f64),
            ExprValue::Double(d) => Some(*d),
            ExprValue::String(s) => match parse_number(s)? {
                ExprValue::Long(l) => Some(l as f64),
                ExprValue::Double(d) => Some(d),
                _ => None,
            },
            ExprValue::Json(v) => v.as_f64(),
        }
    }

    /// Druid truthiness: long/double `> 0`, string `"true"` (any case); null is false.
    pub fn as_bool(&self) -> bool {
        match self {
            ExprValue::Null => false,
            ExprValue::Long(l) => *l > 0,
            ExprValue::Double(d) => *d > 0.0,
            ExprValue::String(s) => s.eq_ignore_ascii_case("true"),
            ExprValue::Json(v) => v.as_bool().unwrap_or(false),
        }
    }

    /// A numeric view: longs and doubles as-is, numeric strings parsed; else `None`.
    fn numeric(&self) -> Option<ExprValue> {
        match self {
            ExprValue::Long(_) | ExprValue::Double(_) => Some(self.clone()),
            ExprValue::String(s) => parse_number(s),
            ExprValue::Json(v) => match v {
                Value::Number(n) => Some(n.as_i64().map_or_else(
                    || ExprValue::Double(n.as_f64().unwrap_or(f64::NAN)),
                    ExprValue::Long,
                )),
                _ => None,
            },
            ExprValue::Null => None,
        }
    }

    fn bool(b: bool) -> ExprValue {
        ExprValue::Long(i64::from(b))
    }
}

impl fmt::Display for ExprValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(s) => f.write_str(&s),
            None => f.write_str("null"),
        }
    }
}

/// Parses a numeric string the way Druid's `ExprEval.computeNumber` does: a long if it is an
/// integer, else a double; `None` for anything else (including `inf`/`nan` spellings other than
/// Java's `NaN`/`Infinity`).
pub fn parse_number(s: &str) -> Option<ExprValue> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    if let Ok(l) = t.parse::<i64>() {
        return Some(ExprValue::Long(l));
    }
    match t {
        "NaN" => return Some(ExprValue::Double(f64::NAN)),
        "Infinity" | "+Infinity" => return Some(ExprValue::Double(f64::INFINITY)),
        "-Infinity" => return Some(ExprValue::Double(f64::NEG_INFINITY)),
        _ => {}
    }
    let ok = t.bytes().any(|b| b.is_ascii_digit())
        && t.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    if !ok {
        return None;
    }
    t.parse::<f64>().ok().map(ExprValue::Double)
}

/// Renders a double like Java's `Double.toString`: `300.0`, `0.001`, `1.0E7`, `1.5E-5`, `NaN`,
/// `Infinity`. Druid stringifies double values this way (e.g. when a transform produces a double
/// that is then matched by a selector filter).
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let a = d.abs();
    if (1e-3..1e7).contains(&a) {
        let mut s = format!("{d}");
        if !s.contains('.') {
            s.push_str(".0");
        }
        s
    } else {
        let s = format!("{d:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        if mant.contains('.') {
            format!("{mant}E{exp}")
        } else {
            format!("{mant}.0E{exp}")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bindings
// ---------------------------------------------------------------------------------------------

/// Supplies identifier values to [`Expr::eval`]. Missing identifiers should return
/// [`ExprValue::Null`].
pub trait Bindings {
    /// The value of identifier `name`.
    fn get(&self, name: &str) -> ExprValue;
}

impl<F> Bindings for F
where
    F: Fn(&str) -> ExprValue + ?Sized,
{
    fn get(&self, name: &str) -> ExprValue {
        self(name)
    }
}

impl Bindings for InputRow {
    fn get(&self, name: &str) -> ExprValue {
        self.get(name).map_or(ExprValue::Null, ExprValue::from_json)
    }
}

/// Bindings over an input row plus its parsed timestamp, which answers `__time` (Druid binds
/// `__time` to the row timestamp in transforms and filters).
#[derive(Debug, Clone, Copy)]
pub struct RowBindings<'a> {
    /// The row.
    pub row: &'a InputRow,
    /// The row timestamp in epoch millis, if already parsed.
    pub time_ms: Option<i64>,
}

impl<'a> RowBindings<'a> {
    /// Bindings for `row` with `__time` = `time_ms`.
    pub fn new(row: &'a InputRow, time_ms: Option<i64>) -> Self {
        Self { row, time_ms }
    }
}

impl Bindings for RowBindings<'_> {
    fn get(&self, name: &str) -> ExprValue {
        if name == "__time"
            && let Some(t) = self.time_ms
        {
            return ExprValue::Long(t);
        }
        self.row
            .get(name)
            .map_or(ExprValue::Null, ExprValue::from_json)
    }
}

// ---------------------------------------------------------------------------------------------
// Errors, transforms
// ---------------------------------------------------------------------------------------------

/// A parse (or transform compilation) error. The message names the expression, the position
/// (0-based byte offset) and the offending token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    /// Human-readable description.
    pub message: String,
    /// Byte offset in the expression, when known.
    pub position: Option<usize>,
}

/// One entry of `transformSpec.transforms`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Transform {
    /// `{"type": "expression", "name": ..., "expression": ...}`.
    Expression {
        /// Output column (may shadow an input column, including `__time`).
        name: String,
        /// Druid expression.
        expression: String,
    },
}

impl Transform {
    /// The output column name.
    pub fn name(&self) -> &str {
        match self {
            Transform::Expression { name, .. } => name,
        }
    }
}

/// Parses every transform, rejecting empty or duplicate names (Druid: "Cannot have two transforms
/// with the same name"). Errors name the transform.
pub fn compile_transforms(ts: &[Transform]) -> Result<Vec<(String, Expr)>, ExprError> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(ts.len());
    for t in ts {
        let Transform::Expression { name, expression } = t;
        if name.is_empty() {
            return Err(ExprError {
                message: format!("transform with expression [{expression}] has an empty name"),
                position: None,
            });
        }
        if !seen.insert(name.as_str()) {
            return Err(ExprError {
                message: format!("cannot have two transforms with the same name [{name}]"),
                position: None,
            });
        }
        let expr = Expr::parse(expression).map_err(|e| ExprError {
            message: format!("transform [{name}]: {}", e.message),
            position: e.position,
        })?;
        out.push((name.clone(), expr));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// (left, right) binding powers.
    fn binding_power(self) -> (u8, u8) {
        match self {
            BinOp::And | BinOp::Or => (1, 2),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => (3, 4),
            BinOp::Add | BinOp::Sub => (5, 6),
            BinOp::Mul | BinOp::Div | BinOp::Mod => (7, 8),
            BinOp::Pow => (10, 9),
        }
    }
}

const PREFIX_BP: u8 = 11;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CastType {
    Long,
    Double,
    String,
}

#[derive(Debug, Clone)]
enum Func {
    /// `json_value(expr, path)`: the scalar at `path`, else null.
    JsonValue(Vec<PathStep>),
    /// `json_query(expr, path)`: the JSON at `path`.
    JsonQuery(Vec<PathStep>),
    /// `json_object(k1, v1, ...)`.
    JsonObject,
    /// `parse_json(str)` (`try_parse_json` gives null for text that is not JSON).
    ParseJson,
    /// `to_json_string(expr)`.
    ToJsonString,
    Concat,
    Upper,
    Lower,
    Strlen,
    Substring,
    Replace,
    Left,
    Right,
    Trim(TrimKind),
    Lpad,
    Rpad,
    Strpos,
    ContainsString {
        ignore_case: bool,
    },
    Reverse,
    Repeat,
    Like(Regex),
    RegexpExtract(Regex),
    RegexpLike(Regex),
    RegexpReplace(Regex),
    Nvl,
    Coalesce,
    If,
    CaseSearched,
    CaseSimple,
    IsNull,
    NotNull,
    Cast(CastType),
    Abs,
    Floor,
    Ceil,
    Round,
    Pow,
    Sqrt,
    Exp,
    Log,
    Log10,
    Greatest,
    Least,
    Div,
    ParseLong,
    /// `timestamp` and `timestamp_parse`: optional compiled pattern and zone.
    TimestampParse(Option<JodaFormat>, Zone),
    TimestampFloor,
    TimestampCeil,
    TimestampShift,
    TimestampExtract(ExtractUnit, Zone),
    TimestampFormat(Option<JodaFormat>, Zone),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrimKind {
    Both,
    Left,
    Right,
}

#[derive(Debug, Clone)]
enum Node {
    Lit(ExprValue),
    Ident(String),
    Neg(Box<Node>),
    Not(Box<Node>),
    Bin(BinOp, Box<Node>, Box<Node>),
    Call(Func, Vec<Node>),
}

/// A parsed Druid expression.
#[derive(Debug, Clone)]
pub struct Expr {
    source: String,
    root: Node,
}

impl Expr {
    /// Parses `s`. Errors name the position and offending token, e.g.
    /// `invalid expression [a +]: unexpected end of expression at position 3`.
    pub fn parse(s: &str) -> Result<Expr, ExprError> {
        let tokens = lex(s).map_err(|(msg, pos)| err(s, &msg, pos))?;
        let mut p = Parser {
            src: s,
            tokens,
            pos: 0,
            depth: 0,
        };
        let root = p.expr(0)?;
        let t = p.peek();
        if !matches!(t.kind, Tk::Eof) {
            return Err(err(s, &format!("unexpected token [{}]", t.text), t.pos));
        }
        Ok(Expr {
            source: s.to_string(),
            root,
        })
    }

    /// The expression text this was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates against `bindings`. Never panics; invalid operations yield null.
    pub fn eval<B: Bindings + ?Sized>(&self, bindings: &B) -> ExprValue {
        eval(&self.root, bindings)
    }

    /// Distinct identifiers referenced, in order of first appearance.
    pub fn identifiers(&self) -> Vec<String> {
        fn walk(n: &Node, out: &mut Vec<String>) {
            match n {
                Node::Lit(_) => {}
                Node::Ident(name) => {
                    if !out.iter().any(|o| o == name) {
                        out.push(name.clone());
                    }
                }
                Node::Neg(a) | Node::Not(a) => walk(a, out),
                Node::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Node::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// The constant value if the expression is a single literal.
    pub fn as_literal(&self) -> Option<&ExprValue> {
        match &self.root {
            Node::Lit(v) => Some(v),
            _ => None,
        }
    }
}

fn err(src: &str, msg: &str, pos: usize) -> ExprError {
    ExprError {
        message: format!("invalid expression [{src}]: {msg} at position {pos}"),
        position: Some(pos),
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tk {
    /// Unsigned integer literal text (parsed by the parser so `-9223372036854775808` works).
    Long(String),
    Double(f64),
    Str(String),
    Ident(String),
    QuotedIdent(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
    LBracket,
    RBracket,
    Eof,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Tk,
    pos: usize,
    text: String,
}

fn lex(s: &str) -> Result<Vec<Token>, (String, usize)> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let kind = if b.is_ascii_digit()
            || (b == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let mut is_double = false;
            if i < bytes.len() && bytes[i] == b'.' {
                is_double = true;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'-' || bytes[j] == b'+') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    is_double = true;
                    i = j;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text = &s[start..i];
            if is_double {
                match text.parse::<f64>() {
                    Ok(d) => Tk::Double(d),
                    Err(_) => return Err((format!("invalid number [{text}]"), start)),
                }
            } else {
                Tk::Long(text.to_string())
            }
        } else if b.is_ascii_alphabetic() || b == b'_' || b == b'$' {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')
            {
                i += 1;
            }
            let word = &s[start..i];
            match word {
                "NaN" => Tk::Double(f64::NAN),
                "Infinity" => Tk::Double(f64::INFINITY),
                _ => Tk::Ident(word.to_string()),
            }
        } else if b == b'\'' || b == b'"' {
            let (text, end) = lex_quoted(s, i).ok_or_else(|| {
                (
                    format!(
                        "unterminated {} starting",
                        if b == b'\'' {
                            "string literal"
                        } else {
                            "quoted identifier"
                        }
                    ),
                    start,
                )
            })?;
            i = end;
            if b == b'\'' {
                Tk::Str(text)
            } else {
                Tk::QuotedIdent(text)
            }
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            let op: Option<(&'static str, usize)> = match two {
                "<=" => Some(("<=", 2)),
                ">=" => Some((">=", 2)),
                "==" => Some(("==", 2)),
                "!=" => Some(("!=", 2)),
                "&&" => Some(("&&", 2)),
                "||" => Some(("||", 2)),
                _ => match b {
                    b'+' => Some(("+", 1)),
                    b'-' => Some(("-", 1)),
                    b'*' => Some(("*", 1)),
                    b'/' => Some(("/", 1)),
                    b'%' => Some(("%", 1)),
                    b'^' => Some(("^", 1)),
                    b'<' => Some(("<", 1)),
                    b'>' => Some((">", 1)),
                    b'!' => Some(("!", 1)),
                    _ => None,
                },
            };
            match (op, b) {
                (Some((op, n)), _) => {
                    i += n;
                    Tk::Op(op)
                }
                (None, b'(') => {
                    i += 1;
                    Tk::LParen
                }
                (None, b')') => {
                    i += 1;
                    Tk::RParen
                }
                (None, b',') => {
                    i += 1;
                    Tk::Comma
                }
                (None, b'[') => {
                    i += 1;
                    Tk::LBracket
                }
                (None, b']') => {
                    i += 1;
                    Tk::RBracket
                }
                _ => {
                    let ch = s[i..].chars().next().unwrap_or('?');
                    return Err((format!("unexpected character [{ch}]"), start));
                }
            }
        };
        out.push(Token {
            kind,
            pos: start,
            text: s.get(start..i).unwrap_or("").to_string(),
        });
    }
    out.push(Token {
        kind: Tk::Eof,
        pos: s.len(),
        text: "<end of expression>".to_string(),
    });
    Ok(out)
}

/// Lexes a quoted literal starting at byte `start` (the quote); returns (content, end offset).
fn lex_quoted(s: &str, start: usize) -> Option<(String, usize)> {
    let quote = s.as_bytes()[start] as char;
    let mut out = String::new();
    let mut chars = s[start + 1..].char_indices();
    while let Some((off, c)) = chars.next() {
        if c == quote {
            return Some((out, start + 1 + off + 1));
        }
        if c == '\\' {
            let (_, e) = chars.next()?;
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let mut code = 0u32;
                    for _ in 0..4 {
                        let (_, h) = chars.next()?;
                        code = code * 16 + h.to_digit(16)?;
                    }
                    out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
                other => out.push(other),
            }
        } else {
            out.push(c);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        // The token list always ends with Eof, and `pos` never passes it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if !matches!(t.kind, Tk::Eof) {
            self.pos += 1;
        }
        t
    }

    fn error(&self, msg: &str, pos: usize) -> ExprError {
        err(self.src, msg, pos)
    }

    fn unexpected(&self, t: &Token) -> ExprError {
        if matches!(t.kind, Tk::Eof) {
            self.error("unexpected end of expression", t.pos)
        } else {
            self.error(&format!("unexpected token [{}]", t.text), t.pos)
        }
    }

    fn expr(&mut self, min_bp: u8) -> Result<Node, ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("expression is nested too deeply", self.peek().pos));
        }
        let mut lhs = self.prefix()?;
        let mut chain = 0;
        while let Tk::Op(sym) = self.peek().kind {
            let op = match sym {
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Mod,
                "^" => BinOp::Pow,
                "<" => BinOp::Lt,
                "<=" => BinOp::Le,
                ">" => BinOp::Gt,
                ">=" => BinOp::Ge,
                "==" => BinOp::Eq,
                "!=" => BinOp::Ne,
                "&&" => BinOp::And,
                "||" => BinOp::Or,
                _ => {
                    let t = self.peek().clone();
                    return Err(self.unexpected(&t));
                }
            };
            let (lbp, rbp) = op.binding_power();
            if lbp < min_bp {
                break;
            }
            self.next();
            // Each operator in a chain deepens the (left-leaning) tree: count it so evaluation
            // and drop recursion stay bounded.
            chain += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(self.error("expression is nested too deeply", self.peek().pos));
            }
            let rhs = self.expr(rbp)?;
            lhs = Node::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        self.depth -= chain + 1;
        Ok(lhs)
    }

    fn prefix(&mut self) -> Result<Node, ExprError> {
        let t = self.next();
        match t.kind {
            Tk::Long(text) => text
                .parse::<i64>()
                .map(|l| Node::Lit(ExprValue::Long(l)))
                .map_err(|_| self.error(&format!("long literal [{text}] is out of range"), t.pos)),
            Tk::Double(d) => Ok(Node::Lit(ExprValue::Double(d))),
            Tk::Str(s) => Ok(Node::Lit(ExprValue::String(s))),
            Tk::QuotedIdent(name) => Ok(Node::Ident(name)),
            Tk::Ident(name) => {
                if matches!(self.peek().kind, Tk::LParen) {
                    self.next();
                    let args = self.args()?;
                    build_call(self.src, &name, args, t.pos)
                } else if name == "null" {
                    Ok(Node::Lit(ExprValue::Null))
                } else {
                    Ok(Node::Ident(name))
                }
            }
            Tk::Op("-") => {
                // Fold negative numeric literals (so i64::MIN is expressible).
                match self.peek().kind.clone() {
                    Tk::Long(text) if !self.followed_by_pow() => {
                        let lit = self.next();
                        format!("-{text}")
                            .parse::<i64>()
                            .map(|l| Node::Lit(ExprValue::Long(l)))
                            .map_err(|_| {
                                self.error(
                                    &format!("long literal [-{text}] is out of range"),
                                    lit.pos,
                                )
                            })
                    }
                    Tk::Double(d) if !self.followed_by_pow() => {
                        self.next();
                        Ok(Node::Lit(ExprValue::Double(-d)))
                    }
                    _ => Ok(Node::Neg(Box::new(self.expr(PREFIX_BP)?))),
                }
            }
            Tk::Op("!") => Ok(Node::Not(Box::new(self.expr(PREFIX_BP)?))),
            Tk::LParen => {
                let inner = self.expr(0)?;
                let close = self.next();
                if !matches!(close.kind, Tk::RParen) {
                    return Err(self.unexpected(&close));
                }
                Ok(inner)
            }
            Tk::LBracket => Err(self.error("array literals are not supported", t.pos)),
            _ => Err(self.unexpected(&t)),
        }
    }

    /// Whether the token after the next one is `^` (then `-2^2` must stay `(-2)^2`, which the
    /// generic path produces as well; folding is only a convenience for plain literals).
    fn followed_by_pow(&self) -> bool {
        self.tokens
            .get(self.pos + 1)
            .is_some_and(|t| matches!(t.kind, Tk::Op("^")))
    }

    fn args(&mut self) -> Result<Vec<Node>, ExprError> {
        let mut args = Vec::new();
        if matches!(self.peek().kind, Tk::RParen) {
            self.next();
            return Ok(args);
        }
        loop {
            args.push(self.expr(0)?);
            let t = self.next();
            match t.kind {
                Tk::Comma => continue,
                Tk::RParen => return Ok(args),
                _ => return Err(self.unexpected(&t)),
            }
        }
    }
}

fn literal_str(n: &Node) -> Option<Option<&str>> {
    match n {
        Node::Lit(ExprValue::String(s)) => Some(Some(s)),
        Node::Lit(ExprValue::Null) => Some(None),
        _ => None,
    }
}

fn build_call(src: &str, raw_name: &str, args: Vec<Node>, pos: usize) -> Result<Node, ExprError> {
    let name = raw_name.to_ascii_lowercase();
    let n = args.len();
    let arity_err = |expected: &str| {
        err(
            src,
            &format!("function [{name}] needs {expected}, got {n}"),
            pos,
        )
    };
    let check = |ok: bool, expected: &str| if ok { Ok(()) } else { Err(arity_err(expected)) };
    let literal_arg = |i: usize, what: &str| -> Result<Option<String>, ExprError> {
        match args.get(i).map(literal_str) {
            None => Ok(None),
            Some(Some(v)) => Ok(v.map(str::to_string)),
            Some(None) => Err(err(
                src,
                &format!("function [{name}] needs a string literal for {what}"),
                pos,
            )),
        }
    };
    let compile_regex = |pattern: &str| {
        Regex::new(pattern).map_err(|e| {
            err(
                src,
                &format!("function [{name}] has an invalid regular expression [{pattern}]: {e}"),
                pos,
            )
        })
    };
    let zone_arg = |i: usize| -> Result<Zone, ExprError> {
        match literal_arg(i, "the time zone")? {
            None => Ok(Zone::Utc),
            Some(z) => Zone::parse(&z).map_err(|_| {
                err(
                    src,
                    &format!("function [{name}] has an unknown time zone [{z}]"),
                    pos,
                )
            }),
        }
    };
    let joda_arg = |i: usize| -> Result<Option<JodaFormat>, ExprError> {
        match literal_arg(i, "the pattern")? {
            None => Ok(None),
            Some(p) => compile_pattern(&p)
                .map(Some)
                .map_err(|e| err(src, &format!("function [{name}]: {e}"), pos)),
        }
    };

    let path_arg = |i: usize| -> Result<Vec<PathStep>, ExprError> {
        let p = literal_arg(i, "the path")?.unwrap_or_default();
        parse_json_path(&p).ok_or_else(|| {
            err(
                src,
                &format!("function [{name}] has an unsupported JSONPath [{p}]"),
                pos,
            )
        })
    };
    let func = match name.as_str() {
        "json_value" => {
            check(n == 2 || n == 3, "2 or 3 arguments")?;
            Func::JsonValue(path_arg(1)?)
        }
        "json_query" => {
            check(n == 2, "2 arguments")?;
            Func::JsonQuery(path_arg(1)?)
        }
        "json_object" => {
            check(n.is_multiple_of(2), "an even number of arguments")?;
            Func::JsonObject
        }
        "parse_json" | "try_parse_json" => {
            check(n == 1, "1 argument")?;
            Func::ParseJson
        }
        "to_json_string" => {
            check(n == 1, "1 argument")?;
            Func::ToJsonString
        }
        "concat" => Func::Concat,
        "upper" => {
            check(n == 1, "1 argument")?;
            Func::Upper
        }
        "lower" => {
            check(n == 1, "1 argument")?;
            Func::Lower
        }
        "strlen" => {
            check(n == 1, "1 argument")?;
            Func::Strlen
        }
        "substring" => {
            check(n == 3, "3 arguments")?;
            Func::Substring
        }
        "replace" => {
            check(n == 3, "3 arguments")?;
            Func::Replace
        }
        "left" => {
            check(n == 2, "2 arguments")?;
            Func::Left
        }
        "right" => {
            check(n == 2, "2 arguments")?;
            Func::Right
        }
        "trim" | "ltrim" | "rtrim" => {
            check(n == 1 || n == 2, "1 or 2 arguments")?;
            Func::Trim(match name.as_str() {
                "trim" => TrimKind::Both,
                "ltrim" => TrimKind::Left,
                _ => TrimKind::Right,
            })
        }
        "lpad" | "rpad" => {
            check(n == 3, "3 arguments")?;
            if name == "lpad" {
                Func::Lpad
            } else {
                Func::Rpad
            }
        }
        "strpos" => {
            check(n == 2 || n == 3, "2 or 3 arguments")?;
            Func::Strpos
        }
        "contains_string" | "icontains_string" => {
            check(n == 2, "2 arguments")?;
            Func::ContainsString {
                ignore_case: name == "icontains_string",
            }
        }
        "reverse" => {
            check(n == 1, "1 argument")?;
            Func::Reverse
        }
        "repeat" => {
            check(n == 2, "2 arguments")?;
            Func::Repeat
        }
        "like" => {
            check(n == 2 || n == 3, "2 or 3 arguments")?;
            let pattern = literal_arg(1, "the pattern")?
                .ok_or_else(|| err(src, "function [like] needs a non-null pattern", pos))?;
            let escape = literal_arg(2, "the escape")?;
            let escape = match escape.as_deref() {
                None | Some("") => None,
                Some(e) if e.chars().count() == 1 => e.chars().next(),
                Some(e) => {
                    return Err(err(
                        src,
                        &format!("function [like] escape [{e}] must be a single character"),
                        pos,
                    ));
                }
            };
            Func::Like(compile_regex(&like_to_regex(&pattern, escape))?)
        }
        "regexp_extract" => {
            check(n == 2 || n == 3, "2 or 3 arguments")?;
            let pattern = literal_arg(1, "the pattern")?.ok_or_else(|| {
                err(
                    src,
                    "function [regexp_extract] needs a non-null pattern",
                    pos,
                )
            })?;
            Func::RegexpExtract(compile_regex(&pattern)?)
        }
        "regexp_like" => {
            check(n == 2, "2 arguments")?;
            let pattern = literal_arg(1, "the pattern")?
                .ok_or_else(|| err(src, "function [regexp_like] needs a non-null pattern", pos))?;
            Func::RegexpLike(compile_regex(&pattern)?)
        }
        "regexp_replace" => {
            check(n == 3, "3 arguments")?;
            let pattern = literal_arg(1, "the pattern")?.ok_or_else(|| {
                err(
                    src,
                    "function [regexp_replace] needs a non-null pattern",
                    pos,
                )
            })?;
            Func::RegexpReplace(compile_regex(&pattern)?)
        }
        "nvl" => {
            check(n == 2, "2 arguments")?;
            Func::Nvl
        }
        "coalesce" => {
            check(n >= 1, "at least 1 argument")?;
            Func::Coalesce
        }
        "if" => {
            check(n == 3, "3 arguments")?;
            Func::If
        }
        "case_searched" => {
            check(n >= 2, "at least 2 arguments")?;
            Func::CaseSearched
        }
        "case_simple" => {
            check(n >= 3, "at least 3 arguments")?;
            Func::CaseSimple
        }
        "isnull" => {
            check(n == 1, "1 argument")?;
            Func::IsNull
        }
        "notnull" => {
            check(n == 1, "1 argument")?;
            Func::NotNull
        }
        "cast" => {
            check(n == 2, "2 arguments")?;
            let ty = literal_arg(1, "the target type")?.unwrap_or_default();
            Func::Cast(match ty.to_ascii_uppercase().as_str() {
                "LONG" => CastType::Long,
                "DOUBLE" | "FLOAT" => CastType::Double,
                "STRING" => CastType::String,
                other => {
                    return Err(err(
                        src,
                        &format!("function [cast] does not support type [{other}]"),
                        pos,
                    ));
                }
            })
        }
        "abs" | "floor" | "ceil" | "sqrt" | "exp" | "log" | "log10" => {
            check(n == 1, "1 argument")?;
            match name.as_str() {
                "abs" => Func::Abs,
                "floor" => Func::Floor,
                "ceil" => Func::Ceil,
                "sqrt" => Func::Sqrt,
                "exp" => Func::Exp,
                "log" => Func::Log,
                _ => Func::Log10,
            }
        }
        "round" => {
            check(n == 1 || n == 2, "1 or 2 arguments")?;
            Func::Round
        }
        "pow" => {
            check(n == 2, "2 arguments")?;
            Func::Pow
        }
        "div" => {
            check(n == 2, "2 arguments")?;
            Func::Div
        }
        "greatest" => Func::Greatest,
        "least" => Func::Least,
        "parse_long" => {
            check(n == 1 || n == 2, "1 or 2 arguments")?;
            Func::ParseLong
        }
        "timestamp" => {
            check(n == 1 || n == 2, "1 or 2 arguments")?;
            Func::TimestampParse(joda_arg(1)?, Zone::Utc)
        }
        "timestamp_parse" => {
            check((1..=3).contains(&n), "1 to 3 arguments")?;
            Func::TimestampParse(joda_arg(1)?, zone_arg(2)?)
        }
        "timestamp_floor" | "timestamp_ceil" => {
            check((2..=4).contains(&n), "2 to 4 arguments")?;
            if let Some(Some(p)) = args.get(1).and_then(literal_str)
                && Period::parse(p).is_err()
            {
                return Err(err(
                    src,
                    &format!("function [{name}] has an invalid period [{p}]"),
                    pos,
                ));
            }
            if name == "timestamp_floor" {
                Func::TimestampFloor
            } else {
                Func::TimestampCeil
            }
        }
        "timestamp_shift" => {
            check(n == 3 || n == 4, "3 or 4 arguments")?;
            if let Some(Some(p)) = args.get(1).and_then(literal_str)
                && Period::parse(p).is_err()
            {
                return Err(err(
                    src,
                    &format!("function [{name}] has an invalid period [{p}]"),
                    pos,
                ));
            }
            Func::TimestampShift
        }
        "timestamp_extract" => {
            check(n == 2 || n == 3, "2 or 3 arguments")?;
            let unit = literal_arg(1, "the unit")?.unwrap_or_default();
            let unit = ExtractUnit::parse(&unit).ok_or_else(|| {
                err(
                    src,
                    &format!("function [timestamp_extract] has an unknown unit [{unit}]"),
                    pos,
                )
            })?;
            Func::TimestampExtract(unit, zone_arg(2)?)
        }
        "timestamp_format" => {
            check((1..=3).contains(&n), "1 to 3 arguments")?;
            Func::TimestampFormat(joda_arg(1)?, zone_arg(2)?)
        }
        _ => {
            return Err(err(
                src,
                &format!("function [{raw_name}] is not supported"),
                pos,
            ));
        }
    };
    Ok(Node::Call(func, args))
}

/// Translates a SQL LIKE pattern (`%`, `_`, optional escape) into an anchored regex.
fn like_to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut re = String::from("(?s)^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(n) => re.push_str(&regex::escape(&n.to_string())),
                None => re.push_str(&regex::escape(&c.to_string())),
            }
        } else if c == '%' {
            re.push_str(".*");
        } else if c == '_' {
            re.push('.');
        } else {
            re.push_str(&regex::escape(&c.to_string()));
        }
    }
    re.push('$');
    re
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

fn eval<B: Bindings + ?Sized>(node: &Node, b: &B) -> ExprValue {
    match node {
        Node::Lit(v) => v.clone(),
        Node::Ident(name) => b.get(name),
        Node::Neg(a) => match eval(a, b).numeric() {
            Some(ExprValue::Long(l)) => ExprValue::Long(l.wrapping_neg()),
            Some(ExprValue::Double(d)) => ExprValue::Double(-d),
            _ => ExprValue::Null,
        },
        Node::Not(a) => match eval(a, b) {
            ExprValue::Null => ExprValue::Null,
            v => ExprValue::bool(!v.as_bool()),
        },
        Node::Bin(BinOp::And, l, r) => {
            let lv = eval(l, b);
            if !lv.is_null() && !lv.as_bool() {
                return ExprValue::bool(false);
            }
            let rv = eval(r, b);
            if !rv.is_null() && !rv.as_bool() {
                return ExprValue::bool(false);
            }
            if lv.is_null() || rv.is_null() {
                ExprValue::Null
            } else {
                ExprValue::bool(true)
            }
        }
        Node::Bin(BinOp::Or, l, r) => {
            let lv = eval(l, b);
            if !lv.is_null() && lv.as_bool() {
                return ExprValue::bool(true);
            }
            let rv = eval(r, b);
            if !rv.is_null() && rv.as_bool() {
                return ExprValue::bool(true);
            }
            if lv.is_null() || rv.is_null() {
                ExprValue::Null
            } else {
                ExprValue::bool(false)
            }
        }
        Node::Bin(op, l, r) => binary(*op, eval(l, b), eval(r, b)),
        Node::Call(func, args) => call(func, args, b),
    }
}

fn compare_result(op: BinOp, ord: Option<Ordering>) -> ExprValue {
    let r = match (op, ord) {
        (BinOp::Lt, Some(o)) => o == Ordering::Less,
        (BinOp::Le, Some(o)) => o != Ordering::Greater,
        (BinOp::Gt, Some(o)) => o == Ordering::Greater,
        (BinOp::Ge, Some(o)) => o != Ordering::Less,
        (BinOp::Eq, Some(o)) => o == Ordering::Equal,
        (BinOp::Ne, Some(o)) => o != Ordering::Equal,
        // NaN: every comparison is false except !=.
        (BinOp::Ne, None) => true,
        _ => false,
    };
    ExprValue::bool(r)
}

fn is_comparison(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
    )
}

fn binary(op: BinOp, l: ExprValue, r: ExprValue) -> ExprValue {
    use ExprValue as V;
    match (&l, &r) {
        (V::Null, _) | (_, V::Null) => V::Null,
        (V::String(a), V::String(b)) => {
            if is_comparison(op) {
                compare_result(op, Some(a.as_str().cmp(b.as_str())))
            } else if op == BinOp::Add {
                let mut s = String::with_capacity(a.len() + b.len());
                s.push_str(a);
                s.push_str(b);
                V::String(s)
            } else {
                V::Null
            }
        }
        (V::Long(a), V::Long(b)) => {
            let (a, b) = (*a, *b);
            if is_comparison(op) {
                return compare_result(op, Some(a.cmp(&b)));
            }
            match op {
                BinOp::Add => V::Long(a.wrapping_add(b)),
                BinOp::Sub => V::Long(a.wrapping_sub(b)),
                BinOp::Mul => V::Long(a.wrapping_mul(b)),
                BinOp::Div if b == 0 => V::Null,
                BinOp::Div => V::Long(a.wrapping_div(b)),
                BinOp::Mod if b == 0 => V::Null,
                BinOp::Mod => V::Long(a.wrapping_rem(b)),
                BinOp::Pow => match u32::try_from(b) {
                    Ok(e) => V::Long(a.wrapping_pow(e)),
                    Err(_) => V::Null,
                },
                _ => V::Null,
            }
        }
        _ => {
            let (Some(a), Some(b)) = (l.as_double(), r.as_double()) else {
                return V::Null;
            };
            if is_comparison(op) {
                return compare_result(op, a.partial_cmp(&b));
            }
            V::Double(match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => a / b,
                BinOp::Mod => a % b,
                BinOp::Pow => a.powf(b),
                _ => return V::Null,
            })
        }
    }
}

/// One step of a JSONPath: an object field or an array index.
#[derive(Debug, Clone, PartialEq)]
enum PathStep {
    Field(String),
    Index(usize),
}

/// Parses the JSONPath subset Druid's JSON functions take (`docs/querying/sql-json-functions.md`):
/// `$`, `.field`, `["field"]` / `['field']`, `[n]`; a trailing `.` is ignored (`'$.'`).
fn parse_json_path(p: &str) -> Option<Vec<PathStep>> {
    let rest = p.trim().strip_prefix('$')?;
    let mut steps = Vec::new();
    let b = rest.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'.' && b[j] != b'[' {
                    j += 1;
                }
                if j > start {
                    steps.push(PathStep::Field(rest[start..j].to_string()));
                }
                i = j;
            }
            b'[' => {
                let end = i + rest[i..].find(']')?;
                let inner = rest[i + 1..end].trim();
                if let Some(q) = inner
                    .strip_prefix('"')
                    .and_then(|x| x.strip_suffix('"'))
                    .or_else(|| inner.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
                {
                    steps.push(PathStep::Field(q.to_string()));
                } else {
                    steps.push(PathStep::Index(inner.parse().ok()?));
                }
                i = end + 1;
            }
            _ => return None,
        }
    }
    Some(steps)
}

/// The value at `path` in `v`.
fn walk_path<'a>(v: &'a Value, path: &[PathStep]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, step| match (step, v) {
        (PathStep::Field(f), Value::Object(m)) => m.get(f),
        (PathStep::Index(i), Value::Array(a)) => a.get(*i),
        _ => None,
    })
}

/// Argument `i` as JSON: a JSON value itself, a string parsed as JSON (an input object or
/// array reaches expressions as its JSON text), numbers as numbers.
fn json_arg<B: Bindings + ?Sized>(args: &[Node], i: usize, b: &B) -> Option<Value> {
    match eval(args.get(i)?, b) {
        ExprValue::Json(v) => Some(v),
        ExprValue::String(s) => serde_json::from_str(&s).ok(),
        ExprValue::Null => None,
        other => Some(other.to_json()),
    }
}

fn str_arg<B: Bindings + ?Sized>(args: &[Node], i: usize, b: &B) -> Option<String> {
    let v = eval(args.get(i)?, b);
    match v {
        ExprValue::String(s) => Some(s),
        other => other.as_str().map(Cow::into_owned),
    }
}

fn long_arg<B: Bindings + ?Sized>(args: &[Node], i: usize, b: &B) -> Option<i64> {
    eval(args.get(i)?, b).as_long()
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// Byte offset of the `n`th char (or the string length).
fn char_offset(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

fn call<B: Bindings + ?Sized>(func: &Func, args: &[Node], b: &B) -> ExprValue {
    use ExprValue as V;
    let str_result = |s: Option<String>| s.map_or(V::Null, V::String);
    match func {
        Func::JsonValue(path) => match json_arg(args, 0, b)
            .as_ref()
            .and_then(|v| walk_path(v, path))
        {
            Some(Value::String(s)) => V::String(s.clone()),
            Some(Value::Number(n)) => n
                .as_i64()
                .map_or_else(|| n.as_f64().map_or(V::Null, V::Double), V::Long),
            Some(Value::Bool(v)) => V::Long(i64::from(*v)),
            _ => V::Null,
        },
        Func::JsonQuery(path) => match json_arg(args, 0, b)
            .as_ref()
            .and_then(|v| walk_path(v, path))
        {
            None | Some(Value::Null) => V::Null,
            Some(v) => V::Json(v.clone()),
        },
        Func::JsonObject => {
            let mut m = serde_json::Map::new();
            for pair in args.chunks(2) {
                let Some(k) = eval(&pair[0], b).as_str().map(Cow::into_owned) else {
                    return V::Null;
                };
                let v = match eval(&pair[1], b) {
                    V::String(s) => serde_json::from_str::<Value>(&s)
                        .ok()
                        .filter(|v| v.is_object() || v.is_array())
                        .unwrap_or(Value::String(s)),
                    other => other.to_json(),
                };
                m.insert(k, v);
            }
            V::Json(Value::Object(m))
        }
        Func::ParseJson => match eval(&args[0], b) {
            V::String(s) => serde_json::from_str(&s).map_or(V::Null, V::Json),
            V::Null => V::Null,
            other => V::Json(other.to_json()),
        },
        Func::ToJsonString => match eval(&args[0], b) {
            V::Null => V::Null,
            other => V::String(other.to_json().to_string()),
        },
        Func::Concat => {
            let mut out = String::new();
            for a in args {
                match eval(a, b).as_str() {
                    Some(s) => out.push_str(&s),
                    None => return V::Null,
                }
            }
            V::String(out)
        }
        Func::Upper => str_result(str_arg(args, 0, b).map(|s| s.to_uppercase())),
        Func::Lower => str_result(str_arg(args, 0, b).map(|s| s.to_lowercase())),
        Func::Strlen => str_arg(args, 0, b).map_or(V::Null, |s| V::Long(char_len(&s) as i64)),
        Func::Substring => {
            let (Some(s), Some(index), Some(len)) = (
                str_arg(args, 0, b),
                long_arg(args, 1, b),
                long_arg(args, 2, b),
            ) else {
                return V::Null;
            };
            let Ok(index) = usize::try_from(index) else {
                return V::Null;
            };
            let total = char_len(&s);
            if index >= total {
                return V::Null;
            }
            let start = char_offset(&s, index);
            let end = if len < 0 {
                s.len()
            } else {
                char_offset(
                    &s,
                    index.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)),
                )
            };
            V::String(s[start..end].to_string())
        }
        Func::Replace => {
            let (Some(s), Some(from), Some(to)) = (
                str_arg(args, 0, b),
                str_arg(args, 1, b),
                str_arg(args, 2, b),
            ) else {
                return V::Null;
            };
            V::String(s.replace(&from, &to))
        }
        Func::Left | Func::Right => {
            let (Some(s), Some(n)) = (str_arg(args, 0, b), long_arg(args, 1, b)) else {
                return V::Null;
            };
            let Ok(n) = usize::try_from(n) else {
                return V::Null;
            };
            let total = char_len(&s);
            let n = n.min(total);
            if matches!(func, Func::Left) {
                V::String(s[..char_offset(&s, n)].to_string())
            } else {
                V::String(s[char_offset(&s, total - n)..].to_string())
            }
        }
        Func::Trim(kind) => {
            let Some(s) = str_arg(args, 0, b) else {
                return V::Null;
            };
            let chars: Vec<char> = if args.len() > 1 {
                match str_arg(args, 1, b) {
                    Some(c) => c.chars().collect(),
                    None => return V::Null,
                }
            } else {
                vec![' ']
            };
            let pred = |c: char| chars.contains(&c);
            V::String(
                match kind {
                    TrimKind::Both => s.trim_matches(pred),
                    TrimKind::Left => s.trim_start_matches(pred),
                    TrimKind::Right => s.trim_end_matches(pred),
                }
                .to_string(),
            )
        }
        Func::Lpad | Func::Rpad => {
            let (Some(s), Some(len), Some(pad)) = (
                str_arg(args, 0, b),
                long_arg(args, 1, b),
                str_arg(args, 2, b),
            ) else {
                return V::Null;
            };
            let Ok(len) = usize::try_from(len) else {
                return V::Null;
            };
            // Guard against absurd allocations from hostile input.
            if len > 1 << 24 {
                return V::Null;
            }
            let base: Vec<char> = s.chars().collect();
            if len <= base.len() || pad.is_empty() {
                return V::String(base.iter().take(len).collect());
            }
            let fill: String = pad.chars().cycle().take(len - base.len()).collect();
            V::String(if matches!(func, Func::Lpad) {
                fill + &s
            } else {
                s + &fill
            })
        }
        Func::Strpos => {
            let (Some(hay), Some(needle)) = (str_arg(args, 0, b), str_arg(args, 1, b)) else {
                return V::Null;
            };
            let from = if args.len() > 2 {
                match long_arg(args, 2, b) {
                    Some(f) => usize::try_from(f.max(0)).unwrap_or(0),
                    None => return V::Null,
                }
            } else {
                0
            };
            let start = char_offset(&hay, from);
            match hay[start..].find(&needle) {
                Some(off) => V::Long((from + char_len(&hay[start..start + off])) as i64),
                None => V::Long(-1),
            }
        }
        Func::ContainsString { ignore_case } => {
            let (Some(s), Some(needle)) = (str_arg(args, 0, b), str_arg(args, 1, b)) else {
                return V::Null;
            };
            if *ignore_case {
                V::bool(s.to_lowercase().contains(&needle.to_lowercase()))
            } else {
                V::bool(s.contains(&needle))
            }
        }
        Func::Reverse => str_result(str_arg(args, 0, b).map(|s| s.chars().rev().collect())),
        Func::Repeat => {
            let (Some(s), Some(n)) = (str_arg(args, 0, b), long_arg(args, 1, b)) else {
                return V::Null;
            };
            let n = usize::try_from(n.max(0)).unwrap_or(0);
            if s.len().saturating_mul(n) > 1 << 24 {
                return V::Null;
            }
            V::String(s.repeat(n))
        }
        Func::Like(re) | Func::RegexpLike(re) => {
            str_arg(args, 0, b).map_or(V::Null, |s| V::bool(re.is_match(&s)))
        }
        Func::RegexpExtract(re) => {
            let Some(s) = str_arg(args, 0, b) else {
                return V::Null;
            };
            let idx = if args.len() > 2 {
                long_arg(args, 2, b).unwrap_or(0)
            } else {
                0
            };
            let Ok(idx) = usize::try_from(idx) else {
                return V::Null;
            };
            re.captures(&s)
                .and_then(|c| c.get(idx))
                .map_or(V::Null, |m| V::String(m.as_str().to_string()))
        }
        Func::RegexpReplace(re) => {
            let (Some(s), Some(rep)) = (str_arg(args, 0, b), str_arg(args, 2, b)) else {
                return V::Null;
            };
            V::String(re.replace_all(&s, rep.as_str()).into_owned())
        }
        Func::Nvl | Func::Coalesce => {
            for a in args {
                let v = eval(a, b);
                if !v.is_null() {
                    return v;
                }
            }
            V::Null
        }
        Func::If => {
            let (Some(c), Some(t), Some(e)) = (args.first(), args.get(1), args.get(2)) else {
                return V::Null;
            };
            if eval(c, b).as_bool() {
                eval(t, b)
            } else {
                eval(e, b)
            }
        }
        Func::CaseSearched => {
            let mut i = 0;
            while i + 1 < args.len() {
                if eval(&args[i], b).as_bool() {
                    return eval(&args[i + 1], b);
                }
                i += 2;
            }
            args.get(i).map_or(V::Null, |e| eval(e, b))
        }
        Func::CaseSimple => {
            let Some(base) = args.first() else {
                return V::Null;
            };
            let base = eval(base, b);
            let mut i = 1;
            while i + 1 < args.len() {
                if binary(BinOp::Eq, base.clone(), eval(&args[i], b)).as_bool() {
                    return eval(&args[i + 1], b);
                }
                i += 2;
            }
            args.get(i).map_or(V::Null, |e| eval(e, b))
        }
        Func::IsNull => V::bool(args.first().is_none_or(|a| eval(a, b).is_null())),
        Func::NotNull => V::bool(args.first().is_some_and(|a| !eval(a, b).is_null())),
        Func::Cast(ty) => {
            let v = args.first().map_or(V::Null, |a| eval(a, b));
            match (ty, &v) {
                (_, V::Null) => V::Null,
                (CastType::Long, _) => v.as_long().map_or(V::Null, V::Long),
                (CastType::Double, _) => v.as_double().map_or(V::Null, V::Double),
                (CastType::String, _) => str_result(v.as_str().map(Cow::into_owned)),
            }
        }
        Func::Abs => match args.first().and_then(|a| eval(a, b).numeric()) {
            Some(V::Long(l)) => V::Long(l.wrapping_abs()),
            Some(V::Double(d)) => V::Double(d.abs()),
            _ => V::Null,
        },
        Func::Floor | Func::Ceil | Func::Sqrt | Func::Exp | Func::Log | Func::Log10 => {
            let Some(x) = args.first().and_then(|a| eval(a, b).as_double()) else {
                return V::Null;
            };
            V::Double(match func {
                Func::Floor => x.floor(),
                Func::Ceil => x.ceil(),
                Func::Sqrt => x.sqrt(),
                Func::Exp => x.exp(),
                Func::Log => x.ln(),
                _ => x.log10(),
            })
        }
        Func::Round => {
            let Some(x) = args.first().and_then(|a| eval(a, b).numeric()) else {
                return V::Null;
            };
            let scale = if args.len() > 1 {
                match long_arg(args, 1, b) {
                    Some(s) => s.clamp(-10_000, 10_000) as i32,
                    None => return V::Null,
                }
            } else {
                0
            };
            match x {
                V::Long(l) => V::Long(round_long(l, scale)),
                V::Double(d) => V::Double(round_double(d, scale)),
                _ => V::Null,
            }
        }
        Func::Pow => {
            let (Some(x), Some(y)) = (
                args.first().and_then(|a| eval(a, b).as_double()),
                args.get(1).and_then(|a| eval(a, b).as_double()),
            ) else {
                return V::Null;
            };
            V::Double(x.powf(y))
        }
        Func::Div => {
            let (Some(x), Some(y)) = (
                args.first().and_then(|a| eval(a, b).numeric()),
                args.get(1).and_then(|a| eval(a, b).numeric()),
            ) else {
                return V::Null;
            };
            match (x, y) {
                (V::Long(_), V::Long(0)) => V::Null,
                (V::Long(x), V::Long(y)) => V::Long(x.wrapping_div(y)),
                (x, y) => match (x.as_double(), y.as_double()) {
                    (Some(x), Some(y)) => V::Long((x / y) as i64),
                    _ => V::Null,
                },
            }
        }
        Func::Greatest | Func::Least => {
            let vals: Vec<V> = args
                .iter()
                .map(|a| eval(a, b))
                .filter(|v| !v.is_null())
                .collect();
            if vals.is_empty() {
                return V::Null;
            }
            let greatest = matches!(func, Func::Greatest);
            let pick = |o: Ordering| {
                if greatest {
                    o == Ordering::Greater
                } else {
                    o == Ordering::Less
                }
            };
            if vals.iter().any(|v| matches!(v, V::String(_))) {
                let strs: Vec<String> = vals
                    .iter()
                    .filter_map(|v| v.as_str().map(Cow::into_owned))
                    .collect();
                let mut best = strs[0].clone();
                for s in &strs[1..] {
                    if pick(s.as_str().cmp(best.as_str())) {
                        best = s.clone();
                    }
                }
                V::String(best)
            } else if vals.iter().any(|v| matches!(v, V::Double(_))) {
                let mut best = vals[0].as_double().unwrap_or(f64::NAN);
                for v in &vals[1..] {
                    let d = v.as_double().unwrap_or(f64::NAN);
                    if d.partial_cmp(&best).is_some_and(pick) {
                        best = d;
                    }
                }
                V::Double(best)
            } else {
                let ls = vals.iter().filter_map(V::as_long);
                let best = if greatest { ls.max() } else { ls.min() };
                best.map_or(V::Null, V::Long)
            }
        }
        Func::ParseLong => {
            let Some(s) = str_arg(args, 0, b) else {
                return V::Null;
            };
            let radix = if args.len() > 1 {
                long_arg(args, 1, b).unwrap_or(10)
            } else {
                10
            };
            let Ok(radix) = u32::try_from(radix) else {
                return V::Null;
            };
            if !(2..=36).contains(&radix) {
                return V::Null;
            }
            let digits = if radix == 16 {
                s.strip_prefix("0x")
                    .or_else(|| s.strip_prefix("0X"))
                    .unwrap_or(&s)
            } else {
                &s
            };
            i64::from_str_radix(digits, radix).map_or(V::Null, V::Long)
        }
        Func::TimestampParse(pattern, zone) => {
            let v = args.first().map_or(V::Null, |a| eval(a, b));
            match v {
                V::Null => V::Null,
                V::Long(l) => V::Long(l),
                V::Double(d) => V::Long(d as i64),
                V::String(s) => {
                    let parsed = match pattern {
                        Some(f) => f.parse_opt(&s, zone),
                        None => parse_iso_in_zone(&s, zone).ok(),
                    };
                    parsed.map_or(V::Null, V::Long)
                }
                V::Json(j) => j.as_i64().map_or(V::Null, V::Long),
            }
        }
        Func::TimestampFloor | Func::TimestampCeil => {
            let Some(t) = long_arg(args, 0, b) else {
                return V::Null;
            };
            let Some(period) = str_arg(args, 1, b).and_then(|p| Period::parse(&p).ok()) else {
                return V::Null;
            };
            let origin = if args.len() > 2 {
                long_arg(args, 2, b)
            } else {
                None
            };
            let Some(zone) = dyn_zone(args, 3, b) else {
                return V::Null;
            };
            let Ok(bucketer) = PeriodBucketer::new(period, origin, zone) else {
                return V::Null;
            };
            let out = if matches!(func, Func::TimestampFloor) {
                bucketer.floor(t)
            } else {
                bucketer.ceil(t)
            };
            out.map_or(V::Null, V::Long)
        }
        Func::TimestampShift => {
            let (Some(t), Some(period), Some(step)) = (
                long_arg(args, 0, b),
                str_arg(args, 1, b).and_then(|p| Period::parse(&p).ok()),
                long_arg(args, 2, b),
            ) else {
                return V::Null;
            };
            let Some(zone) = dyn_zone(args, 3, b) else {
                return V::Null;
            };
            period
                .checked_add_to(t, step, &zone)
                .map_or(V::Null, V::Long)
        }
        Func::TimestampExtract(unit, zone) => {
            let Some(t) = long_arg(args, 0, b) else {
                return V::Null;
            };
            V::Long(unit.extract_in(t, zone))
        }
        Func::TimestampFormat(pattern, zone) => {
            let Some(t) = long_arg(args, 0, b) else {
                return V::Null;
            };
            V::String(match pattern {
                Some(f) => f.format(t, zone),
                // Beyond the calendar range the value prints as its millis.
                None if zone.to_local_datetime(t).is_none() => t.to_string(),
                None => format_iso_in_zone(t, zone),
            })
        }
    }
}

/// A timezone argument evaluated per row; absent or null means UTC, unknown zones give `None`.
fn dyn_zone<B: Bindings + ?Sized>(args: &[Node], i: usize, b: &B) -> Option<Zone> {
    match args.get(i) {
        None => Some(Zone::Utc),
        Some(a) => match eval(a, b).as_str() {
            None => Some(Zone::Utc),
            Some(z) => Zone::parse(&z).ok(),
        },
    }
}

fn round_long(l: i64, scale: i32) -> i64 {
    if scale >= 0 {
        return l;
    }
    let Some(unit) = 10i64.checked_pow(scale.unsigned_abs()) else {
        return 0;
    };
    let rem = l % unit;
    let base = l - rem;
    // HALF_UP: ties round away from zero.
    if rem.unsigned_abs() * 2 >= unit.unsigned_abs() {
        base.wrapping_add(if l < 0 { -unit } else { unit })
    } else {
        base
    }
}

/// `BigDecimal.valueOf(d).setScale(scale, HALF_UP).doubleValue()`: rounds the shortest decimal
/// representation of `d`, not its binary value (so `round(2.675, 2)` is `2.68`).
fn round_double(d: f64, scale: i32) -> f64 {
    if !d.is_finite() {
        return d;
    }
    let repr = format!("{:e}", d.abs()); // e.g. "2.675e0"
    let Some((mant, exp)) = repr.split_once('e') else {
        return d;
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return d;
    };
    let digits: Vec<u8> = mant
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|c| c - b'0')
        .collect();
    // value = 0.d1d2d3... × 10^(exp+1); number of digits kept = exp + 1 + scale.
    let keep = exp + 1 + scale;
    if keep < 0 {
        return 0.0_f64.copysign(d);
    }
    let keep = keep as usize;
    if keep >= digits.len() {
        return d;
    }
    let mut kept: Vec<u8> = digits[..keep].to_vec();
    let round_up = digits[keep] >= 5;
    let mut carry_exp = 0;
    if round_up {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                carry_exp = 1;
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    if kept.is_empty() {
        return 0.0_f64.copysign(d);
    }
    let s: String = kept.iter().map(|c| char::from(b'0' + c)).collect();
    let e = exp + 1 + carry_exp - kept.len() as i32;
    let v: f64 = format!("{s}e{e}").parse().unwrap_or(d.abs());
    v.copysign(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(s: &str) -> ExprValue {
        Expr::parse(s)
            .unwrap_or_else(|e| panic!("{e}"))
            .eval(&|_: &str| ExprValue::Null)
    }

    fn ev_row(s: &str, row: Value) -> ExprValue {
        let Value::Object(row) = row else { panic!() };
        Expr::parse(s).unwrap_or_else(|e| panic!("{e}")).eval(&row)
    }

    fn ts(s: &str) -> i64 {
        crate::timestamp::parse_iso(s).unwrap()
    }

    use ExprValue::{Double as D, Long as L, Null, String as S};

    fn s(x: &str) -> ExprValue {
        S(x.to_string())
    }

    #[test]
    fn literals_and_precedence() {
        assert_eq!(ev("1 + 2 * 3"), L(7));
        assert_eq!(ev("(1 + 2) * 3"), L(9));
        assert_eq!(ev("2 ^ 3 ^ 2"), L(512));
        assert_eq!(ev("-2 ^ 2"), L(4));
        assert_eq!(ev("- 2 ^ 2"), L(4));
        assert_eq!(ev("-x"), Null);
        assert_eq!(ev("7 / 2"), L(3));
        assert_eq!(ev("7 / 2.0"), D(3.5));
        assert_eq!(ev("7 % 3"), L(1));
        assert_eq!(ev("1.5e1"), D(15.0));
        assert_eq!(ev("-9223372036854775808"), L(i64::MIN));
        assert_eq!(ev("'it\\'s'"), s("it's"));
        assert_eq!(ev("'\\u0041b'"), s("Ab"));
        assert_eq!(ev("null"), Null);
        assert_eq!(ev("1 < 2 && 3 > 2"), L(1));
        // && and || share precedence, left associative.
        assert_eq!(ev("1 || 0 && 0"), L(0));
        assert_eq!(ev("!0"), L(1));
        assert_eq!(ev("!1 == 0"), L(1));
        assert_eq!(ev("3 - 2 - 1"), L(0));
    }

    #[test]
    fn null_and_type_semantics() {
        assert_eq!(ev("null + 1"), Null);
        assert_eq!(ev("'a' + 'b'"), s("ab"));
        assert_eq!(ev("'a' - 'b'"), Null);
        assert_eq!(ev("'3' * 2"), D(6.0));
        assert_eq!(ev("'x' * 2"), Null);
        assert_eq!(ev("1 / 0"), Null);
        assert_eq!(ev("1 % 0"), Null);
        assert_eq!(ev("1.0 / 0"), D(f64::INFINITY));
        assert_eq!(ev("2 ^ -1"), Null);
        assert_eq!(ev("'b' > 'a'"), L(1));
        assert_eq!(ev("1 == 1.0"), L(1));
        assert_eq!(ev("null == null"), Null);
        // Three-valued logic.
        assert_eq!(ev("null && 0"), L(0));
        assert_eq!(ev("null && 1"), Null);
        assert_eq!(ev("null || 1"), L(1));
        assert_eq!(ev("null || 0"), Null);
        assert_eq!(ev("!null"), Null);
        assert_eq!(ev("'true' && 'TRUE'"), L(1));
        assert_eq!(ev("-1 && 1"), L(0));
    }

    #[test]
    fn row_bindings() {
        let row = json!({"number": 100, "animal": "mongoose", "d": 1.5, "b": true, "arr": ["a", "b"], "my col": "x"});
        assert_eq!(ev_row("number * 3", row.clone()), L(300));
        assert_eq!(
            ev_row("concat('super-', animal)", row.clone()),
            s("super-mongoose")
        );
        assert_eq!(ev_row("d * 2", row.clone()), D(3.0));
        assert_eq!(ev_row("b", row.clone()), s("true"));
        assert_eq!(ev_row("arr", row.clone()), s(r#"["a","b"]"#));
        assert_eq!(ev_row("\"my col\"", row.clone()), s("x"));
        assert_eq!(ev_row("missing", row.clone()), Null);
        let Value::Object(m) = row else { panic!() };
        let e = Expr::parse("__time + 1").unwrap();
        assert_eq!(e.eval(&RowBindings::new(&m, Some(10))), L(11));
        assert_eq!(e.identifiers(), vec!["__time".to_string()]);
        let dynamic: &dyn Fn(&str) -> ExprValue = &|_| L(1);
        assert_eq!(e.eval(dynamic), L(2));
    }

    #[test]
    fn string_functions() {
        assert_eq!(ev("concat('a', 1, 2.5)"), s("a12.5"));
        assert_eq!(ev("concat('a', null)"), Null);
        assert_eq!(ev("UPPER('abc')"), s("ABC"));
        assert_eq!(ev("lower('ÀB')"), s("àb"));
        assert_eq!(ev("strlen('héllo')"), L(5));
        assert_eq!(ev("substring('hello', 1, 3)"), s("ell"));
        assert_eq!(ev("substring('hello', 1, -1)"), s("ello"));
        assert_eq!(ev("substring('hello', 2, 100)"), s("llo"));
        assert_eq!(ev("substring('hello', 10, 1)"), Null);
        assert_eq!(ev("substring('hello', -1, 1)"), Null);
        assert_eq!(ev("replace('banana', 'a', 'o')"), s("bonono"));
        assert_eq!(ev("left('hello', 2)"), s("he"));
        assert_eq!(ev("right('hello', 2)"), s("lo"));
        assert_eq!(ev("right('hello', 20)"), s("hello"));
        assert_eq!(ev("trim('  a  ')"), s("a"));
        assert_eq!(ev("ltrim('xxaxx', 'x')"), s("axx"));
        assert_eq!(ev("rtrim('xxaxx', 'x')"), s("xxa"));
        assert_eq!(ev("lpad('abc', 6, 'xy')"), s("xyxabc"));
        assert_eq!(ev("rpad('abc', 6, 'xy')"), s("abcxyx"));
        assert_eq!(ev("lpad('abcdef', 3, 'x')"), s("abc"));
        assert_eq!(ev("lpad('abc', 5, '')"), s("abc"));
        assert_eq!(ev("lpad('abc', 9999999999, 'x')"), Null);
        assert_eq!(ev("strpos('hello', 'l')"), L(2));
        assert_eq!(ev("strpos('hello', 'l', 3)"), L(3));
        assert_eq!(ev("strpos('hello', 'z')"), L(-1));
        assert_eq!(ev("contains_string('hello', 'ell')"), L(1));
        assert_eq!(ev("icontains_string('hello', 'ELL')"), L(1));
        assert_eq!(ev("like('hello', 'h%o')"), L(1));
        assert_eq!(ev("like('hello', 'h_llo')"), L(1));
        assert_eq!(ev("like('h%llo', 'h\\\\%l%', '\\\\')"), L(1));
        assert_eq!(ev("like('hello', 'h\\\\%l%', '\\\\')"), L(0));
        assert_eq!(ev("like(null, 'x')"), Null);
        assert_eq!(ev("regexp_extract('foo123bar', '[0-9]+')"), s("123"));
        assert_eq!(ev("regexp_extract('foo123bar', 'o([0-9]+)b', 1)"), s("123"));
        assert_eq!(ev("regexp_extract('foo', '[0-9]+')"), Null);
        assert_eq!(ev("regexp_like('foo123', '\\\\d')"), L(1));
        assert_eq!(ev("regexp_replace('a1b22', '[0-9]+', '#')"), s("a#b#"));
        assert_eq!(ev("reverse('abc')"), s("cba"));
        assert_eq!(ev("repeat('ab', 3)"), s("ababab"));
    }

    #[test]
    fn conditional_functions() {
        assert_eq!(ev("nvl(null, 'x')"), s("x"));
        assert_eq!(ev("nvl('y', 'x')"), s("y"));
        assert_eq!(ev("coalesce(null, null, 3)"), L(3));
        assert_eq!(ev("if(1 > 2, 'a', 'b')"), s("b"));
        assert_eq!(ev("case_searched(0, 'a', 1, 'b', 'c')"), s("b"));
        assert_eq!(ev("case_searched(0, 'a', 'c')"), s("c"));
        assert_eq!(ev("case_searched(0, 'a')"), Null);
        assert_eq!(ev("case_simple(2, 1, 'one', 2, 'two', 'other')"), s("two"));
        assert_eq!(
            ev("case_simple(3, 1, 'one', 2, 'two', 'other')"),
            s("other")
        );
        assert_eq!(ev("isnull(null)"), L(1));
        assert_eq!(ev("notnull(1)"), L(1));
        assert_eq!(ev("cast('12', 'LONG')"), L(12));
        assert_eq!(ev("cast('1.9', 'long')"), L(1));
        assert_eq!(ev("cast(3, 'DOUBLE')"), D(3.0));
        assert_eq!(ev("cast(3.0, 'STRING')"), s("3.0"));
        assert_eq!(ev("cast('x', 'LONG')"), Null);
    }

    #[test]
    fn math_functions() {
        assert_eq!(ev("abs(-3)"), L(3));
        assert_eq!(ev("abs(-3.5)"), D(3.5));
        assert_eq!(ev("floor(3.7)"), D(3.0));
        assert_eq!(ev("ceil(3)"), D(3.0));
        assert_eq!(ev("round(2.5)"), D(3.0));
        assert_eq!(ev("round(-2.5)"), D(-3.0));
        assert_eq!(ev("round(2.675, 2)"), D(2.68));
        assert_eq!(ev("round(1234, -2)"), L(1200));
        assert_eq!(ev("round(1250, -2)"), L(1300));
        assert_eq!(ev("round(9.99, 1)"), D(10.0));
        assert_eq!(ev("round(0.004, 2)"), D(0.0));
        assert_eq!(ev("pow(2, 10)"), D(1024.0));
        assert_eq!(ev("sqrt(16)"), D(4.0));
        assert_eq!(ev("log10(1000)"), D(3.0));
        assert_eq!(ev("greatest(1, 5, 3)"), L(5));
        assert_eq!(ev("greatest(1, 5.5, null)"), D(5.5));
        assert_eq!(ev("least('b', 'a', 3)"), s("3"));
        assert_eq!(ev("greatest(null, null)"), Null);
        assert_eq!(ev("div(7, 2)"), L(3));
        assert_eq!(ev("div(7.5, 2)"), L(3));
        assert_eq!(ev("div(7, 0)"), Null);
        assert_eq!(ev("parse_long('ff', 16)"), L(255));
        assert_eq!(ev("parse_long('0x1F', 16)"), L(31));
        assert_eq!(ev("parse_long('z')"), Null);
    }

    #[test]
    fn time_functions() {
        let t = ts("2015-09-12T00:46:58.771Z");
        let b = |name: &str| if name == "t" { L(t) } else { Null };
        let e = |s: &str| Expr::parse(s).unwrap_or_else(|e| panic!("{e}")).eval(&b);
        assert_eq!(
            e("timestamp_floor(t, 'PT1H')"),
            L(ts("2015-09-12T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'PT15M')"),
            L(ts("2015-09-12T00:45:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P1D')"),
            L(ts("2015-09-12T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P1W')"),
            L(ts("2015-09-07T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P1M')"),
            L(ts("2015-09-01T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P3M')"),
            L(ts("2015-07-01T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P1Y')"),
            L(ts("2015-01-01T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P1DT12H')"),
            L(ts("2015-09-11T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'P1D', null, 'America/Los_Angeles')"),
            L(ts("2015-09-11T07:00:00Z"))
        );
        assert_eq!(
            e("timestamp_floor(t, 'PT1H', timestamp('2015-09-12T00:30:00Z'))"),
            L(ts("2015-09-12T00:30:00Z"))
        );
        assert_eq!(e("timestamp_floor(t, concat('bo', 'gus'))"), Null);
        assert_eq!(e("timestamp_ceil(t, 'P1D')"), L(ts("2015-09-13T00:00:00Z")));
        assert_eq!(
            e("timestamp_ceil(timestamp_floor(t, 'P1D'), 'P1D')"),
            L(ts("2015-09-12T00:00:00Z"))
        );
        assert_eq!(
            e("timestamp_shift(t, 'P1M', 2)"),
            L(ts("2015-11-12T00:46:58.771Z"))
        );
        assert_eq!(
            e("timestamp_shift(t, 'PT1H', -1)"),
            L(ts("2015-09-11T23:46:58.771Z"))
        );
        assert_eq!(e("timestamp_extract(t, 'YEAR')"), L(2015));
        assert_eq!(e("timestamp_extract(t, 'month')"), L(9));
        assert_eq!(e("timestamp_extract(t, 'DOW')"), L(6));
        assert_eq!(e("timestamp_extract(t, 'HOUR', 'Europe/Paris')"), L(2));
        assert_eq!(e("timestamp_extract(t, 'EPOCH')"), L(1442018818));
        assert_eq!(e("timestamp_extract(t, 'QUARTER')"), L(3));
        assert_eq!(e("timestamp_extract(t, 'CENTURY')"), L(21));
        assert_eq!(e("timestamp_extract(t, 'MILLENNIUM')"), L(3));
        assert_eq!(e("timestamp_format(t)"), s("2015-09-12T00:46:58.771Z"));
        assert_eq!(
            e("timestamp_format(t, 'yyyy-MM-dd HH:mm')"),
            s("2015-09-12 00:46")
        );
        assert_eq!(
            e("timestamp_format(t, null, 'America/Los_Angeles')"),
            s("2015-09-11T17:46:58.771-07:00")
        );
        assert_eq!(
            e("timestamp_format(t, 'yyyy-MM-dd HH:mm', 'Europe/Paris')"),
            s("2015-09-12 02:46")
        );
        assert_eq!(e("timestamp('2015-09-12T00:46:58.771Z')"), L(t));
        assert_eq!(
            e("timestamp('2015-09-12 00:46:58', 'yyyy-MM-dd HH:mm:ss')"),
            L(t - 771)
        );
        assert_eq!(e("timestamp('garbage')"), Null);
        assert_eq!(
            e("timestamp_parse('2015-09-12 02:46:58.771', null, 'Europe/Paris')"),
            L(t)
        );
        assert_eq!(
            e("timestamp_parse('2015-09-12T00:46:58.771Z', null, 'Europe/Paris')"),
            L(t)
        );
        assert_eq!(e("timestamp(t)"), L(t));
    }

    #[test]
    fn parse_errors_name_position_and_token() {
        let cases = [
            ("a +", "unexpected end of expression at position 3"),
            ("a + )", "unexpected token [)] at position 4"),
            ("(a", "unexpected end of expression"),
            ("a b", "unexpected token [b] at position 2"),
            ("foo(1)", "function [foo] is not supported"),
            ("upper(1, 2)", "function [upper] needs 1 argument, got 2"),
            ("'abc", "unterminated string literal"),
            ("a # b", "unexpected character [#] at position 2"),
            ("[1, 2]", "array literals are not supported"),
            ("regexp_like(a, '(')", "invalid regular expression"),
            ("like(a, b)", "needs a string literal"),
            ("99999999999999999999", "out of range"),
            ("timestamp_floor(t, 'PXD')", "invalid period [PXD]"),
            ("timestamp_extract(t, 'FOO')", "unknown unit [FOO]"),
            (
                "timestamp_format(t, 'yyyy G')",
                "unsupported pattern letter [G]",
            ),
            ("cast(a, 'ARRAY')", "does not support type"),
            ("a = 1", "unexpected character [=]"),
        ];
        for (src, want) in cases {
            let e = Expr::parse(src).unwrap_err();
            assert!(e.message.contains(want), "{src}: {}", e.message);
            assert!(e.message.contains(src), "{src}: {}", e.message);
        }
    }

    #[test]
    fn hostile_input_never_panics() {
        let deep = "(".repeat(10_000) + "1" + &")".repeat(10_000);
        assert!(Expr::parse(&deep).is_err());
        let deep_neg = "-".repeat(10_000) + "x";
        assert!(Expr::parse(&deep_neg).is_err());
        let long_chain = vec!["1"; 100_000].join(" + ");
        assert!(Expr::parse(&long_chain).is_err());
        let ok_chain = vec!["1"; 100].join(" + ");
        assert_eq!(ev(&ok_chain), L(100));
        for src in [
            "é", "'\\u12'", "\"", "a(", "f(,)", "1..2", "'\\", "0x", "€ + 1", ".5", "1e", "1e+",
        ] {
            let _ = Expr::parse(src);
        }
        // i64 edge cases.
        assert_eq!(ev("-9223372036854775808 / -1"), L(i64::MIN));
        assert_eq!(ev("-9223372036854775808 % -1"), L(0));
        assert_eq!(ev("abs(-9223372036854775808)"), L(i64::MIN));
        assert_eq!(
            ev("timestamp_shift(9223372036854775807, 'P1Y', 1000)"),
            Null
        );
        assert_eq!(ev("timestamp_floor(-9223372036854775808, 'P1M')"), Null);
        assert_eq!(
            ev("timestamp_format(9223372036854775807)"),
            s("9223372036854775807")
        );
        assert_eq!(ev("round(1e308, -400)"), D(0.0));
    }

    #[test]
    fn double_formatting_matches_java() {
        assert_eq!(format_double(300.0), "300.0");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.001), "0.001");
        assert_eq!(format_double(0.0001), "1.0E-4");
        assert_eq!(format_double(1e7), "1.0E7");
        assert_eq!(format_double(1234567.5), "1234567.5");
        assert_eq!(format_double(-1.25e-5), "-1.25E-5");
        assert_eq!(format_double(f64::NAN), "NaN");
        assert_eq!(format_double(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(format_double(-0.0), "-0.0");
    }

    #[test]
    fn json_conversion() {
        assert_eq!(ExprValue::from_json(&json!(true)), s("true"));
        assert_eq!(ExprValue::from_json(&json!(36)), L(36));
        assert_eq!(ExprValue::from_json(&json!(u64::MAX)), D(u64::MAX as f64));
        assert_eq!(ExprValue::from_json(&json!({"a": 1})), s(r#"{"a":1}"#));
        assert_eq!(D(f64::NAN).to_json(), Value::Null);
        assert_eq!(D(1.5).to_json(), json!(1.5));
        assert_eq!(L(3).to_json(), json!(3));
        assert_eq!(D(2.0).to_string(), "2.0");
        assert_eq!(Null.to_string(), "null");
    }

    #[test]
    fn transforms() {
        let ts: Vec<Transform> = serde_json::from_value(json!([
            {"type": "expression", "name": "animal", "expression": "concat('super-', animal)"},
            {"type": "expression", "name": "triple-number", "expression": "number * 3"}
        ]))
        .unwrap();
        let compiled = compile_transforms(&ts).unwrap();
        assert_eq!(compiled.len(), 2);
        assert_eq!(compiled[1].0, "triple-number");
        let dup = vec![ts[0].clone(), ts[0].clone()];
        assert!(
            compile_transforms(&dup)
                .unwrap_err()
                .message
                .contains("[animal]")
        );
        let bad = vec![Transform::Expression {
            name: "x".into(),
            expression: "1 +".into(),
        }];
        assert!(
            compile_transforms(&bad)
                .unwrap_err()
                .message
                .starts_with("transform [x]")
        );
        let unknown = serde_json::from_value::<Transform>(
            json!({"type": "expression", "name": "a", "expression": "1", "extra": 1}),
        );
        assert!(unknown.is_err());
        assert_eq!(
            serde_json::to_value(&ts[0]).unwrap(),
            json!({"type": "expression", "name": "animal", "expression": "concat('super-', animal)"})
        );
    }

    /// The JSON functions of transforms: paths, scalars from `json_value`, JSON from
    /// `json_query`, `json_object` and `parse_json`.
    #[test]
    fn json_functions() {
        use serde_json::json;
        assert_eq!(
            parse_json_path("$.a[1]['b c'].d"),
            Some(vec![
                PathStep::Field("a".into()),
                PathStep::Index(1),
                PathStep::Field("b c".into()),
                PathStep::Field("d".into()),
            ])
        );
        assert_eq!(parse_json_path("$."), Some(vec![]));
        assert_eq!(parse_json_path("a.b"), None);
        let row: InputRow = serde_json::from_value(json!({
            "o": {"a": {"b": 2.5, "s": "x"}, "l": [1, 2]},
            "p": "q"
        }))
        .unwrap();
        let ev = |src: &str| {
            Expr::parse(src)
                .unwrap()
                .eval(&RowBindings::new(&row, None))
        };
        assert_eq!(ev("json_value(o, '$.a.b')"), ExprValue::Double(2.5));
        assert_eq!(ev("json_value(o, '$.a.s')"), ExprValue::String("x".into()));
        assert_eq!(ev("json_value(o, '$.l')"), ExprValue::Null);
        assert_eq!(ev("json_query(o, '$.l')"), ExprValue::Json(json!([1, 2])));
        assert_eq!(
            ev("json_object('k', p, 'o', json_query(o, '$.l'))").to_json(),
            json!({"k": "q", "o": [1, 2]})
        );
        assert_eq!(
            ev("parse_json('{\"x\":1}')"),
            ExprValue::Json(json!({"x": 1}))
        );
        assert_eq!(
            ev("to_json_string(json_query(o, '$.l'))"),
            ExprValue::String("[1,2]".into())
        );
    }
}
