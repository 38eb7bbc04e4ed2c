//! The clauses of SQL-based ingestion statements (Druid's multi-stage query engine,
//! `docs/multi-stage-query/reference.md`; reference-behaviour "SQL-based ingestion"):
//!
//! ```text
//! INSERT INTO <ds> <query> PARTITIONED BY <granularity> [CLUSTERED BY <col>, ...]
//! REPLACE INTO <ds> OVERWRITE ALL | OVERWRITE WHERE <__time ranges>
//!   <query> PARTITIONED BY <granularity> [CLUSTERED BY <col>, ...]
//! ```
//!
//! DataFusion's parser knows none of `PARTITIONED BY`, `CLUSTERED BY` or `OVERWRITE`, so
//! [`parse_dml`] reads them at the token level (parentheses tracked, so only clauses at the top
//! level count) and returns the bare query with everything else blanked out in place: parse
//! errors in the query still point at the user's line and column.
//!
//! `<granularity>`: `HOUR`, `DAY`, `MONTH`, `YEAR` (any of Druid's simple granularity names),
//! `ALL` / `ALL TIME`, an ISO period literal (`'PT1H'`), `TIME_FLOOR(__time, 'P1D')` or
//! `FLOOR(__time TO DAY)`. `OVERWRITE WHERE` takes comparisons of `__time` with `TIMESTAMP`
//! literals (`>=`, `>`, `<`, `<=`, `=`, `BETWEEN`), combined with `AND` / `OR` and
//! parentheses; the time chunks it selects must be aligned with the granularity, as in Druid.
//! `CLUSTERED BY` takes column names or 1-based ordinals of the select list (resolved by the
//! planner, see `crate::sql_ingest`).

use datafusion::common::{DataFusionError, Result};
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use dolmen_common::time::{MAX_INSTANT, MIN_INSTANT, parse_iso_instant};
use dolmen_common::{Granularity, Interval};

/// What `REPLACE` overwrites.
#[derive(Debug, Clone, PartialEq)]
pub enum Overwrite {
    /// `OVERWRITE ALL`: every time chunk.
    All,
    /// `OVERWRITE WHERE ...`: these half-open intervals (sorted, disjoint, aligned with the
    /// `PARTITIONED BY` granularity).
    Intervals(Vec<Interval>),
}

/// `INSERT` or `REPLACE`.
#[derive(Debug, Clone, PartialEq)]
pub enum DmlKind {
    /// Appends segments.
    Insert,
    /// Replaces the time chunks it names.
    Replace(Overwrite),
}

impl DmlKind {
    /// `INSERT` or `REPLACE` (as Druid's messages name the operation).
    pub fn operation(&self) -> &'static str {
        match self {
            DmlKind::Insert => "INSERT",
            DmlKind::Replace(_) => "REPLACE",
        }
    }
}

/// The clauses of an `INSERT` / `REPLACE` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct DmlStatement {
    /// `INSERT` or `REPLACE` (with what it overwrites).
    pub kind: DmlKind,
    /// The target datasource (a `druid.` schema prefix is dropped).
    pub data_source: String,
    /// The statement's text with everything but its query blanked out (same length and line
    /// breaks, so positions match the original).
    pub query: String,
    /// `PARTITIONED BY`: the segment granularity.
    pub partitioned_by: Granularity,
    /// `CLUSTERED BY` columns (names, or ordinals as digits), in order.
    pub clustered_by: Vec<String>,
}

fn err<T>(m: impl Into<String>) -> Result<T> {
    Err(DataFusionError::Plan(m.into()))
}

/// The non-whitespace tokens of a statement with their byte offsets.
struct Tokens<'a> {
    sql: &'a str,
    toks: Vec<(Token, usize, usize)>,
}

impl<'a> Tokens<'a> {
    fn new(sql: &'a str, dialect: &dyn Dialect) -> Result<Self> {
        let raw = Tokenizer::new(dialect, sql)
            .tokenize_with_location()
            .map_err(|e| DataFusionError::SQL(Box::new(e.into()), None))?;
        let starts = crate::external::token_offsets(sql, &raw);
        let mut toks = Vec::new();
        for (i, t) in raw.iter().enumerate() {
            if matches!(t.token, Token::Whitespace(_)) {
                continue;
            }
            let end = starts.get(i + 1).copied().unwrap_or(sql.len());
            toks.push((t.token.clone(), starts[i], end));
        }
        Ok(Tokens { sql, toks })
    }

    fn tok(&self, i: usize) -> Option<&Token> {
        self.toks.get(i).map(|t| &t.0)
    }

    fn is_word(&self, i: usize, w: &str) -> bool {
        matches!(self.tok(i), Some(Token::Word(x)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
    }

    fn start(&self, i: usize) -> usize {
        self.toks.get(i).map_or(self.sql.len(), |t| t.1)
    }

    fn text(&self, from: usize, to: usize) -> &str {
        let a = self.start(from);
        let b = if to == 0 {
            a
        } else {
            self.toks.get(to - 1).map_or(self.sql.len(), |t| t.2)
        };
        self.sql[a..b.max(a)].trim()
    }
}

/// Parses an `INSERT` / `REPLACE` statement; `Ok(None)` when `sql` is another statement.
///
/// # Errors
/// A plan error naming the clause: missing or misplaced `PARTITIONED BY`, a `REPLACE` without
/// `OVERWRITE`, an `OVERWRITE WHERE` that is not a `__time` range or not aligned with the
/// granularity, a bad granularity or `CLUSTERED BY` item, a target column list, `INSERT INTO
/// EXTERN` (export), or no query.
pub fn parse_dml(sql: &str, dialect: &dyn Dialect) -> Result<Option<DmlStatement>> {
    let t = Tokens::new(sql, dialect)?;
    let op = if t.is_word(0, "insert") {
        "INSERT"
    } else if t.is_word(0, "replace") {
        "REPLACE"
    } else {
        return Ok(None);
    };
    if !t.is_word(1, "into") {
        return err(format!("{op}: expected INTO after {op}"));
    }
    // Target: [druid.]name
    let mut i = 2;
    let mut name = match t.tok(i) {
        Some(Token::Word(w)) => w.value.clone(),
        Some(Token::SingleQuotedString(s)) => s.clone(),
        _ => return err(format!("{op} INTO: expected a datasource name")),
    };
    i += 1;
    if t.tok(i) == Some(&Token::Period) {
        if !name.eq_ignore_ascii_case("druid") {
            return err(format!(
                "{op} INTO: cannot write to schema [{name}]; datasources live in the druid schema"
            ));
        }
        match t.tok(i + 1) {
            Some(Token::Word(w)) => name = w.value.clone(),
            _ => {
                return err(format!(
                    "{op} INTO: expected a datasource name after [druid.]"
                ));
            }
        }
        i += 2;
    }
    if name.eq_ignore_ascii_case("extern") && t.tok(i) == Some(&Token::LParen) {
        return err(format!(
            "{op} INTO EXTERN(...) (export to external storage) is not supported; write into a datasource"
        ));
    }
    if t.tok(i) == Some(&Token::LParen) && !t.is_word(i + 1, "select") && !t.is_word(i + 1, "with")
    {
        return err(format!(
            "Operation [{op}] cannot be run with a target column list, given [{op} INTO {name} (...)]; columns map by name from the SELECT"
        ));
    }
    let mut overwrite_where: Option<(usize, usize)> = None;
    let mut kind = DmlKind::Insert;
    if op == "REPLACE" {
        if !t.is_word(i, "overwrite") {
            return err(
                "Missing time chunk information in OVERWRITE clause for REPLACE. Use OVERWRITE WHERE <__time based condition> or OVERWRITE ALL to overwrite the entire table.",
            );
        }
        i += 1;
        if t.is_word(i, "all") {
            kind = DmlKind::Replace(Overwrite::All);
            i += 1;
        } else if t.is_word(i, "where") {
            i += 1;
            let from = i;
            let mut depth = 0i32;
            while i < t.toks.len() {
                match t.tok(i) {
                    Some(Token::LParen)
                        if depth == 0
                            && (t.is_word(i + 1, "select") || t.is_word(i + 1, "with")) =>
                    {
                        break;
                    }
                    Some(Token::LParen) => depth += 1,
                    Some(Token::RParen) => depth -= 1,
                    _ if depth == 0 && (t.is_word(i, "select") || t.is_word(i, "with")) => break,
                    _ => {}
                }
                i += 1;
            }
            overwrite_where = Some((from, i));
            kind = DmlKind::Replace(Overwrite::Intervals(Vec::new()));
        } else {
            return err("OVERWRITE: expected ALL or WHERE <__time based condition>");
        }
    }
    // The query: up to a top-level PARTITIONED BY.
    let q_from = i;
    let mut depth = 0i32;
    let mut partitioned = None;
    while i < t.toks.len() {
        match t.tok(i) {
            Some(Token::LParen) => depth += 1,
            Some(Token::RParen) => depth -= 1,
            _ if depth == 0 && t.is_word(i, "partitioned") && t.is_word(i + 1, "by") => {
                partitioned = Some(i);
                break;
            }
            _ if depth == 0 && t.is_word(i, "clustered") && t.is_word(i + 1, "by") => {
                return err(
                    "CLUSTERED BY found before PARTITIONED BY, CLUSTERED BY must come after the PARTITIONED BY clause",
                );
            }
            _ => {}
        }
        i += 1;
    }
    let Some(p_at) = partitioned else {
        return err(format!(
            "Operation [{op}] requires a PARTITIONED BY to be explicitly defined, but none was found."
        ));
    };
    if p_at == q_from {
        return err(format!(
            "{op}: the statement has no query before PARTITIONED BY"
        ));
    }
    // PARTITIONED BY <granularity>
    let mut j = p_at + 2;
    let g_from = j;
    let partitioned_by = parse_granularity(&t, &mut j)?;
    let g_text = t.text(g_from, j).to_string();
    // [CLUSTERED BY items]
    let mut clustered_by = Vec::new();
    if t.is_word(j, "clustered") && t.is_word(j + 1, "by") {
        j += 2;
        loop {
            let item = match t.tok(j) {
                Some(Token::Word(w)) => w.value.clone(),
                Some(Token::Number(n, _)) if n.parse::<usize>().is_ok_and(|n| n > 0) => n.clone(),
                _ => {
                    return err(
                        "CLUSTERED BY: expected column names or ordinals of the select list",
                    );
                }
            };
            j += 1;
            if matches!(t.tok(j), Some(Token::Period | Token::LParen)) {
                return err(format!(
                    "CLUSTERED BY: [{item}...] is not a column name or ordinal; alias the expression in the SELECT and cluster by the alias"
                ));
            }
            if clustered_by.contains(&item) {
                return err(format!("CLUSTERED BY: column [{item}] appears twice"));
            }
            clustered_by.push(item);
            if t.tok(j) == Some(&Token::Comma) {
                j += 1;
            } else {
                break;
            }
        }
    }
    while t.tok(j) == Some(&Token::SemiColon) {
        j += 1;
    }
    if j < t.toks.len() {
        return err(format!(
            "{op}: unexpected [{}] after the PARTITIONED BY / CLUSTERED BY clauses",
            t.tok(j).map_or(String::new(), ToString::to_string)
        ));
    }
    if let (Some((a, b)), DmlKind::Replace(_)) = (overwrite_where, &kind) {
        let intervals = parse_overwrite_where(&t, a, b)?;
        if intervals.is_empty() {
            return err(
                "OVERWRITE WHERE: the condition selects no time; nothing would be replaced",
            );
        }
        check_aligned(&intervals, &partitioned_by, &g_text)?;
        kind = DmlKind::Replace(Overwrite::Intervals(intervals));
    }
    // The query text, everything else blanked (line breaks kept).
    let a = t.start(q_from);
    let b = t.start(p_at);
    let mut query = String::with_capacity(sql.len());
    let blank = |s: &str, out: &mut String| {
        out.extend(s.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
    };
    blank(&sql[..a], &mut query);
    query.push_str(&sql[a..b]);
    blank(&sql[b..], &mut query);
    Ok(Some(DmlStatement {
        kind,
        data_source: name,
        query,
        partitioned_by,
        clustered_by,
    }))
}

/// `PARTITIONED BY` granularity at `*j`; advances past it.
fn parse_granularity(t: &Tokens<'_>, j: &mut usize) -> Result<Granularity> {
    let bad = |what: &str| -> Result<Granularity> {
        err(format!(
            "PARTITIONED BY: [{what}] is not a granularity; use HOUR, DAY, MONTH, YEAR, ALL, an ISO period such as 'PT1H', TIME_FLOOR(__time, 'P1D') or FLOOR(__time TO DAY)"
        ))
    };
    let from_name = |s: &str| {
        Granularity::from_name(s)
            .or_else(|_| bad(s))
            .and_then(|g| match g {
                Granularity::None => bad(s),
                g => Ok(g),
            })
    };
    let period = |s: &str| Granularity::from_period_str(s).or_else(|_| bad(s));
    match t.tok(*j).cloned() {
        Some(Token::SingleQuotedString(s)) => {
            *j += 1;
            period(&s)
        }
        Some(Token::Word(w)) if t.is_word(*j, "all") => {
            *j += 1;
            if t.is_word(*j, "time") {
                *j += 1;
            }
            let _ = w;
            Ok(Granularity::All)
        }
        Some(Token::Word(_))
            if t.is_word(*j, "time_floor") && t.tok(*j + 1) == Some(&Token::LParen) =>
        {
            // TIME_FLOOR(__time, 'period')
            let ok = matches!(t.tok(*j + 2), Some(Token::Word(w)) if w.value == "__time")
                && t.tok(*j + 3) == Some(&Token::Comma)
                && t.tok(*j + 5) == Some(&Token::RParen);
            match (ok, t.tok(*j + 4)) {
                (true, Some(Token::SingleQuotedString(p))) => {
                    let p = p.clone();
                    *j += 6;
                    period(&p)
                }
                _ => bad(t.text(*j, (*j + 6).min(t.toks.len()))),
            }
        }
        Some(Token::Word(_)) if t.is_word(*j, "floor") && t.tok(*j + 1) == Some(&Token::LParen) => {
            // FLOOR(__time TO unit)
            let ok = matches!(t.tok(*j + 2), Some(Token::Word(w)) if w.value == "__time")
                && t.is_word(*j + 3, "to")
                && t.tok(*j + 5) == Some(&Token::RParen);
            match (ok, t.tok(*j + 4)) {
                (true, Some(Token::Word(u))) => {
                    let u = u.value.clone();
                    *j += 6;
                    from_name(&u)
                }
                _ => bad(t.text(*j, (*j + 6).min(t.toks.len()))),
            }
        }
        Some(Token::Word(w)) => {
            *j += 1;
            from_name(&w.value)
        }
        Some(other) => bad(&other.to_string()),
        None => bad(""),
    }
}

/// Union of sorted, disjoint intervals.
fn union(mut a: Vec<Interval>, b: Vec<Interval>) -> Vec<Interval> {
    a.extend(b);
    a.sort_by_key(|i| i.start);
    let mut out: Vec<Interval> = Vec::with_capacity(a.len());
    for iv in a {
        match out.last_mut() {
            Some(last) if iv.start <= last.end => last.end = last.end.max(iv.end),
            _ => out.push(iv),
        }
    }
    out
}

/// Intersection of sorted, disjoint intervals.
fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let s = x.start.max(y.start);
            let e = x.end.min(y.end);
            if s < e {
                out.push(Interval { start: s, end: e });
            }
        }
    }
    union(Vec::new(), out)
}

/// Parses the `OVERWRITE WHERE` condition in tokens `[a, b)` into intervals.
fn parse_overwrite_where(t: &Tokens<'_>, a: usize, b: usize) -> Result<Vec<Interval>> {
    let mut p = CondParser { t, at: a, end: b };
    let v = p.or()?;
    if p.at != b {
        return err(format!(
            "OVERWRITE WHERE: unexpected [{}]; only __time comparisons with TIMESTAMP literals, AND, OR and parentheses are allowed",
            t.tok(p.at).map_or(String::new(), ToString::to_string)
        ));
    }
    Ok(v)
}

struct CondParser<'a, 'b> {
    t: &'a Tokens<'b>,
    at: usize,
    end: usize,
}

impl CondParser<'_, '_> {
    fn tok(&self) -> Option<&Token> {
        if self.at < self.end {
            self.t.tok(self.at)
        } else {
            None
        }
    }

    fn word(&self, w: &str) -> bool {
        self.at < self.end && self.t.is_word(self.at, w)
    }

    fn or(&mut self) -> Result<Vec<Interval>> {
        let mut v = self.and()?;
        while self.word("or") {
            self.at += 1;
            let r = self.and()?;
            v = union(v, r);
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<Vec<Interval>> {
        let mut v = self.factor()?;
        while self.word("and") {
            self.at += 1;
            let r = self.factor()?;
            v = intersect(&v, &r);
        }
        Ok(v)
    }

    fn factor(&mut self) -> Result<Vec<Interval>> {
        if self.tok() == Some(&Token::LParen) {
            self.at += 1;
            let v = self.or()?;
            if self.tok() != Some(&Token::RParen) {
                return err("OVERWRITE WHERE: missing ')'");
            }
            self.at += 1;
            return Ok(v);
        }
        let time_first = self.is_time();
        if time_first {
            self.at += 1;
            if self.word("between") {
                self.at += 1;
                let lo = self.instant()?;
                if !self.word("and") {
                    return err("OVERWRITE WHERE: expected AND in BETWEEN");
                }
                self.at += 1;
                let hi = self.instant()?;
                return Ok(range(lo, hi.saturating_add(1)));
            }
            let op = self.op()?;
            let v = self.instant()?;
            return Ok(compare(&op, v));
        }
        // literal op __time
        let v = self.instant()?;
        let op = self.op()?;
        if !self.is_time() {
            return err("OVERWRITE WHERE: a comparison must involve __time");
        }
        self.at += 1;
        let flipped = match op.as_str() {
            "<" => ">",
            "<=" => ">=",
            ">" => "<",
            ">=" => "<=",
            o => o,
        }
        .to_string();
        Ok(compare(&flipped, v))
    }

    fn is_time(&self) -> bool {
        matches!(self.tok(), Some(Token::Word(w)) if w.value == "__time")
    }

    fn op(&mut self) -> Result<String> {
        let op = match self.tok() {
            Some(Token::GtEq) => ">=",
            Some(Token::Gt) => ">",
            Some(Token::LtEq) => "<=",
            Some(Token::Lt) => "<",
            Some(Token::Eq) => "=",
            other => {
                return err(format!(
                    "OVERWRITE WHERE: expected a comparison of __time (>=, >, <, <=, =, BETWEEN), found [{}]",
                    other.map_or("end".to_string(), ToString::to_string)
                ));
            }
        };
        self.at += 1;
        Ok(op.to_string())
    }

    /// `TIMESTAMP 'text'` or `'text'`, in epoch ms (UTC).
    fn instant(&mut self) -> Result<i64> {
        if self.word("timestamp") {
            self.at += 1;
        }
        let Some(Token::SingleQuotedString(s)) = self.tok().cloned() else {
            return err(format!(
                "OVERWRITE WHERE: expected a TIMESTAMP literal, found [{}]",
                self.tok().map_or("end".to_string(), ToString::to_string)
            ));
        };
        self.at += 1;
        let text = s.trim().replacen(' ', "T", 1);
        parse_iso_instant(&text).map_err(|e| {
            DataFusionError::Plan(format!("OVERWRITE WHERE: bad timestamp ['{s}']: {}", e.0))
        })
    }
}

fn range(start: i64, end: i64) -> Vec<Interval> {
    if start < end {
        vec![Interval { start, end }]
    } else {
        Vec::new()
    }
}

fn compare(op: &str, v: i64) -> Vec<Interval> {
    match op {
        ">=" => range(v, MAX_INSTANT),
        ">" => range(v.saturating_add(1), MAX_INSTANT),
        "<" => range(MIN_INSTANT, v),
        "<=" => range(MIN_INSTANT, v.saturating_add(1)),
        _ => range(v, v.saturating_add(1)),
    }
}

/// Druid requires the replaced intervals to be whole time chunks.
fn check_aligned(intervals: &[Interval], g: &Granularity, g_text: &str) -> Result<()> {
    for iv in intervals {
        let aligned = match g {
            Granularity::All => iv.start == MIN_INSTANT && iv.end == MAX_INSTANT,
            _ => {
                (iv.start == MIN_INSTANT || g.bucket(iv.start).start == iv.start)
                    && (iv.end == MAX_INSTANT || g.bucket(iv.end).start == iv.end)
            }
        };
        if !aligned {
            return err(format!(
                "OVERWRITE WHERE clause identified interval [{iv}] which is not aligned with PARTITIONED BY granularity [{g_text}]"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    fn parse(sql: &str) -> Result<Option<DmlStatement>> {
        parse_dml(sql, &GenericDialect {})
    }

    fn msg(sql: &str) -> String {
        parse(sql).unwrap_err().to_string()
    }

    #[test]
    fn insert_with_clauses() {
        let sql = "INSERT INTO \"Wiki\"\nSELECT __time, a FROM t WHERE x IN (SELECT 1)\nPARTITIONED BY DAY\nCLUSTERED BY a, 2;";
        let d = parse(sql).unwrap().unwrap();
        assert_eq!(d.kind, DmlKind::Insert);
        assert_eq!(d.data_source, "Wiki");
        assert_eq!(d.partitioned_by, Granularity::from_name("DAY").unwrap());
        assert_eq!(d.clustered_by, vec!["a", "2"]);
        assert_eq!(d.query.len(), sql.len());
        assert_eq!(
            d.query.lines().nth(1).unwrap(),
            "SELECT __time, a FROM t WHERE x IN (SELECT 1)"
        );
        assert!(d.query.lines().next().unwrap().trim().is_empty());
        assert!(parse("SELECT 1").unwrap().is_none());
        let d = parse("insert into druid.w select 1 partitioned by all time")
            .unwrap()
            .unwrap();
        assert_eq!(
            (d.data_source.as_str(), d.partitioned_by),
            ("w", Granularity::All)
        );
    }

    #[test]
    fn granularity_forms() {
        let g = |p: &str| {
            parse(&format!("INSERT INTO t SELECT 1 PARTITIONED BY {p}"))
                .unwrap()
                .unwrap()
                .partitioned_by
        };
        let hour = Granularity::from_name("HOUR").unwrap();
        assert_eq!(g("HOUR"), hour);
        assert_eq!(g("'PT1H'"), hour);
        assert_eq!(g("TIME_FLOOR(__time, 'PT1H')"), hour);
        assert_eq!(g("FLOOR(__time TO HOUR)"), hour);
        assert_eq!(g("ALL"), Granularity::All);
        assert!(
            msg("INSERT INTO t SELECT 1 PARTITIONED BY fortnight")
                .contains("[fortnight] is not a granularity")
        );
        assert!(msg("INSERT INTO t SELECT 1 PARTITIONED BY NONE").contains("is not a granularity"));
    }

    #[test]
    fn replace_overwrite_forms() {
        let d = parse("REPLACE INTO t OVERWRITE ALL SELECT 1 PARTITIONED BY DAY")
            .unwrap()
            .unwrap();
        assert_eq!(d.kind, DmlKind::Replace(Overwrite::All));
        let d = parse(
            "REPLACE INTO t OVERWRITE WHERE (__time >= TIMESTAMP '2015-09-12' AND __time < TIMESTAMP '2015-09-13 00:00:00') OR __time BETWEEN '2015-09-20T00:00:00Z' AND '2015-09-20T23:59:59.999Z' SELECT 1 PARTITIONED BY DAY",
        )
        .unwrap()
        .unwrap();
        let DmlKind::Replace(Overwrite::Intervals(iv)) = d.kind else {
            panic!()
        };
        let shown: Vec<String> = iv.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            vec![
                "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
                "2015-09-20T00:00:00.000Z/2015-09-21T00:00:00.000Z"
            ]
        );
        assert!(
            msg("REPLACE INTO t SELECT 1 PARTITIONED BY DAY").starts_with(
                "Error during planning: Missing time chunk information in OVERWRITE clause"
            )
        );
        assert!(msg("REPLACE INTO t OVERWRITE WHERE __time >= TIMESTAMP '2015-09-12 05:00:00' SELECT 1 PARTITIONED BY DAY").contains("not aligned with PARTITIONED BY granularity [DAY]"));
        assert!(
            msg("REPLACE INTO t OVERWRITE WHERE dim = 'x' SELECT 1 PARTITIONED BY DAY")
                .contains("TIMESTAMP literal")
        );
        assert!(msg("REPLACE INTO t OVERWRITE WHERE __time < TIMESTAMP '2000-01-01' AND __time > TIMESTAMP '2001-01-01' SELECT 1 PARTITIONED BY DAY").contains("selects no time"));
    }

    #[test]
    fn clause_errors() {
        assert_eq!(
            msg("INSERT INTO t SELECT 1"),
            "Error during planning: Operation [INSERT] requires a PARTITIONED BY to be explicitly defined, but none was found."
        );
        assert!(
            msg("INSERT INTO t SELECT 1 CLUSTERED BY a PARTITIONED BY DAY")
                .contains("CLUSTERED BY found before PARTITIONED BY")
        );
        assert!(
            msg("INSERT INTO t (a, b) SELECT 1 PARTITIONED BY DAY").contains("target column list")
        );
        assert!(
            msg("INSERT INTO EXTERN(local(exportPath => '/tmp')) SELECT 1 PARTITIONED BY DAY")
                .contains("export")
        );
        assert!(msg("INSERT INTO t PARTITIONED BY DAY").contains("no query"));
        assert!(
            msg("INSERT INTO t SELECT 1 PARTITIONED BY DAY CLUSTERED BY UPPER(a)")
                .contains("alias the expression")
        );
        assert!(
            msg("INSERT INTO t SELECT 1 PARTITIONED BY DAY LIMIT 5").contains("unexpected [LIMIT]")
        );
        // A PARTITIONED BY inside a string or a subquery does not count.
        assert!(
            msg("INSERT INTO t SELECT 'PARTITIONED BY DAY'").contains("requires a PARTITIONED BY")
        );
    }
}
