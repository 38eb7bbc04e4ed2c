//! Dolmen's SQL conformance corpus: Druid's own quidem test files (`.iq`), transcribed verbatim
//! under `tests/corpus/quidem/`, replayed against the real server with the datasets their `!use`
//! lines name (ingestion specs under `tests/corpus/datasets/`, also Druid's, verbatim).
//!
//! Each `!ok` case compares the column names and the rows of Druid's expected table (quidem's
//! `mysql` output) with Dolmen's answer: in order only where quidem compares in order (the last
//! `ORDER BY` outside parentheses: [`probably_deterministic`]), numbers compared
//! as numbers (relative 1e-6, Druid prints floats through Java's `Float.toString`), timestamps in
//! Druid's JDBC text (`yyyy-MM-dd HH:mm:ss.SSS`), `COMPLEX<json>` values as their JSON text (a
//! JSON string quoted, as JDBC prints it). Each `!error` case must be refused with a 4xx.
//! Plan checks (`!plan`, `!nativePlan`, ...) are Druid internals and are skipped.
//!
//! The test is a ratchet: every case id in `tests/corpus/passing.txt` must still pass, no SQL text
//! may answer a 5xx, and the report (`target/corpus-report.txt`, path printed) lists the failures
//! with both tables. After a fix, `DOLMEN_CORPUS_UPDATE=1` rewrites `passing.txt` (only ever adding
//! cases unless a case was removed from the corpus). Source and licence: `tests/corpus/README.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::Server;

/// One runnable case of a `.iq` file.
#[derive(Debug, Clone, PartialEq)]
struct Case {
    /// `family/file.iq#N`: N counts the file's SQL statements from 1.
    id: String,
    /// Dataset folders the file's `!use` line names (relative to `qatests/`).
    datasets: Vec<String>,
    /// Query context from `!set` lines (quidem's own settings left out).
    context: BTreeMap<String, Value>,
    sql: String,
    expect: Expect,
}

#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// Column names and rows of the expected table.
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// The statement must be refused; the text is Druid's error (for the report only).
    Error(String),
}

/// Parses one `.iq` file (quidem syntax: `!set`, `!use`, then blocks of a SQL statement ending
/// in `;` and its expected output, each closed by a command: `!ok`, `!error`, or a plan check
/// whose block is plan text for the previous statement).
fn parse_iq(id_prefix: &str, text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    let mut context: BTreeMap<String, Value> = BTreeMap::new();
    let mut datasets: Vec<String> = Vec::new();
    let mut sql: Option<String> = None;
    let mut statement_no = 0usize;
    let mut block: Vec<&str> = Vec::new();
    let mut skip_depth = 0usize;
    for (line_no, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if skip_depth > 0 {
            if trimmed.starts_with("!if") {
                skip_depth += 1;
            } else if trimmed == "!}" {
                skip_depth -= 1;
            }
            continue;
        }
        let Some(cmd) = trimmed.strip_prefix('!') else {
            block.push(line);
            continue;
        };
        let (name, rest) = cmd.split_once(' ').unwrap_or((cmd, ""));
        // The block before this command: leading comments, maybe a statement, then output.
        let body: Vec<&str> = block
            .iter()
            .copied()
            .skip_while(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
            .collect();
        block.clear();
        let starts_statement = body.first().is_some_and(|l| {
            !is_output_line(l.trim()) && (name == "ok" || name == "error" || looks_like_sql(l))
        });
        let mut output: &[&str] = &body;
        if starts_statement {
            let end = body
                .iter()
                .position(|l| l.trim_end().ends_with(';'))
                .ok_or_else(|| format!("{id_prefix}:{}: statement without ';'", line_no + 1))?;
            let joined = body[..=end].join("\n");
            let joined = joined.trim_end();
            sql = Some(joined[..joined.len() - 1].to_string());
            statement_no += 1;
            output = &body[end + 1..];
        }
        match name {
            "set" => {
                let (k, v) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
                if k != "outputformat" && k != "dartQueryId" {
                    context.insert(k.to_string(), context_value(v.trim()));
                }
            }
            "use" => datasets = use_datasets(rest.trim()),
            "if" => skip_depth = 1,
            "ok" | "error" => {
                let Some(q) = &sql else {
                    return Err(format!("{id_prefix}:{}: !{name} without SQL", line_no + 1));
                };
                let expect = if name == "ok" {
                    let (columns, rows) = parse_table(output)
                        .map_err(|e| format!("{id_prefix}:{}: {e}", line_no + 1))?;
                    Expect::Rows { columns, rows }
                } else {
                    Expect::Error(output.join("\n").trim().to_string())
                };
                cases.push(Case {
                    id: format!("{id_prefix}#{statement_no}"),
                    datasets: datasets.clone(),
                    context: context.clone(),
                    sql: q.clone(),
                    expect,
                });
            }
            // Plan checks and the rest of quidem's commands: nothing to run.
            _ => {}
        }
    }
    Ok(cases)
}

/// Whether a line opens a SQL statement (rather than plan text of a plan check).
fn looks_like_sql(line: &str) -> bool {
    let l = line.trim_start().to_ascii_lowercase();
    [
        "select", "with", "explain", "insert", "replace", "values", "(", "set ",
    ]
    .iter()
    .any(|k| l.starts_with(k))
}

/// A line of an expected table (or of an error text right after a statement).
fn is_output_line(trimmed: &str) -> bool {
    trimmed.starts_with('+') || trimmed.starts_with('|') || trimmed.starts_with("(")
}

fn context_value(v: &str) -> Value {
    match v {
        "true" => json!(true),
        "false" => json!(false),
        _ => v
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(v.to_string())),
    }
}

/// `druidtest://?componentSupplier=...&datasets=sql/src/test/quidem/qatests/qaAggFuncs` ->
/// `["qaAggFuncs"]`.
fn use_datasets(url: &str) -> Vec<String> {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("datasets="))
        .flat_map(|v| v.split(','))
        .map(|d| {
            d.trim_start_matches("sql/src/test/quidem/qatests/")
                .trim_end_matches('/')
                .to_string()
        })
        .filter(|d| !d.is_empty())
        .collect()
}

/// Parses quidem's `mysql` table: column boundaries come from the `+---+` border, so cells may
/// hold `|` themselves.
fn parse_table(lines: &[&str]) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let border = lines
        .iter()
        .find(|l| l.trim_start().starts_with('+'))
        .ok_or("no table border before !ok")?;
    let chars: Vec<char> = border.chars().collect();
    let plus: Vec<usize> = chars
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == '+')
        .map(|(i, _)| i)
        .collect();
    let split = |line: &str| -> Vec<String> {
        let cs: Vec<char> = line.chars().collect();
        plus.windows(2)
            .map(|w| {
                let from = (w[0] + 1).min(cs.len());
                let to = w[1].min(cs.len());
                cs[from..to].iter().collect::<String>().trim().to_string()
            })
            .collect()
    };
    let mut columns = None;
    let mut rows = Vec::new();
    for l in &lines {
        let t = l.trim_start();
        if t.starts_with('+') || t.starts_with('(') {
            continue;
        }
        if !t.starts_with('|') {
            return Err(format!("unexpected line in table: {l}"));
        }
        if columns.is_none() {
            columns = Some(split(l));
        } else {
            rows.push(split(l));
        }
    }
    Ok((columns.ok_or("table without header")?, rows))
}

/// Dolmen's answer as quidem prints it (JDBC values through Avatica): one string per cell.
/// Arrays arrive as JSON text (`sqlStringifyArrays`, on by default over HTTP) or as JSON arrays.
fn format_cell(v: &Value, sql_type: &str) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) if sql_type.contains("ARRAY") && s.starts_with('[') => {
            match serde_json::from_str::<Value>(s) {
                Ok(parsed @ Value::Array(_)) => format_cell(&parsed, sql_type),
                _ => s.clone(),
            }
        }
        Value::String(s) if sql_type == "TIMESTAMP" => jdbc_timestamp(s),
        // A `COMPLEX<json>` value (SQL type `OTHER`) reaches JDBC as its JSON text, so quidem
        // prints a JSON string quoted (`JSON_QUERY(s, '$')` is `"A"`); over HTTP the value is
        // the JSON value itself.
        Value::String(_) if sql_type == "OTHER" => v.to_string(),
        // A JSON array or object of a `COMPLEX<json>` value: its compact JSON text.
        Value::Array(_) | Value::Object(_) if sql_type == "OTHER" => v.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| match i {
                    Value::Null => "null".to_string(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// `2020-01-01T01:01:01.000Z` -> `2020-01-01 01:01:01.000` (JDBC's TIMESTAMP text).
fn jdbc_timestamp(s: &str) -> String {
    s.trim_end_matches('Z').replacen('T', " ", 1)
}

/// Cells equal as text (trimmed: quidem's table pads cells, so edge spaces do not show), or as
/// numbers within a relative 1e-6.
fn cell_matches(expected: &str, actual: &str) -> bool {
    let actual = actual.trim();
    if expected == actual {
        return true;
    }
    match (expected.parse::<f64>(), actual.parse::<f64>()) {
        (Ok(e), Ok(a)) => {
            e == a || (e - a).abs() <= 1e-6 * e.abs().max(a.abs()) || (e.is_nan() && a.is_nan())
        }
        _ => false,
    }
}

/// Quidem's `isProbablyDeterministic` (net.hydromatic.quidem.Quidem): the rows are compared in
/// order only if the SQL has an `ORDER BY` and its last one is not inside parentheses (an
/// `ORDER BY` of a sub-query or of a window does not order the result).
fn probably_deterministic(sql: &str) -> bool {
    let upper = sql.to_ascii_uppercase();
    let Some(i) = upper.rfind("ORDER BY") else {
        return false;
    };
    let tail = &upper[i..];
    tail.matches(')').count() <= tail.matches('(').count()
}

fn rows_match(expected: &[Vec<String>], actual: &[Vec<String>], ordered: bool) -> bool {
    if expected.len() != actual.len() {
        return false;
    }
    let row_eq = |e: &Vec<String>, a: &Vec<String>| {
        e.len() == a.len() && e.iter().zip(a).all(|(x, y)| cell_matches(x, y))
    };
    if ordered {
        return expected.iter().zip(actual).all(|(e, a)| row_eq(e, a));
    }
    // Unordered: match each expected row with a distinct actual row.
    let mut used = vec![false; actual.len()];
    expected.iter().all(
        |e| match (0..actual.len()).find(|&i| !used[i] && row_eq(e, &actual[i])) {
            Some(i) => {
                used[i] = true;
                true
            }
            None => false,
        },
    )
}

/// Outcome of one case.
enum Outcome {
    Pass,
    Fail(String),
    ServerError(String),
}

fn run_case(server: &Server, case: &Case) -> Outcome {
    let mut context = serde_json::Map::new();
    for (k, v) in &case.context {
        context.insert(k.clone(), v.clone());
    }
    let body = json!({
        "query": case.sql,
        "resultFormat": "array",
        "header": true,
        "typesHeader": true,
        "sqlTypesHeader": true,
        "context": context,
    });
    let (status, answer) = server.post_json("/druid/v2/sql", &body);
    if status >= 500 {
        return Outcome::ServerError(format!("{status}: {answer}"));
    }
    match &case.expect {
        Expect::Error(druid) => {
            if status >= 400 {
                Outcome::Pass
            } else {
                Outcome::Fail(format!(
                    "Druid refuses it ({druid}); Dolmen answered {status}"
                ))
            }
        }
        Expect::Rows { columns, rows } => {
            if status != 200 {
                return Outcome::Fail(format!("{status}: {answer}"));
            }
            let all = answer.as_array().cloned().unwrap_or_default();
            if all.len() < 3 {
                return Outcome::Fail(format!("no header rows: {answer}"));
            }
            let names: Vec<String> = all[0]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            let sql_types: Vec<String> = all[2]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            let actual: Vec<Vec<String>> = all[3..]
                .iter()
                .map(|r| {
                    r.as_array()
                        .into_iter()
                        .flatten()
                        .zip(&sql_types)
                        .map(|(v, t)| format_cell(v, t))
                        .collect()
                })
                .collect();
            let ordered = probably_deterministic(&case.sql);
            if &names != columns {
                Outcome::Fail(format!("columns: Druid {columns:?}, Dolmen {names:?}"))
            } else if rows_match(rows, &actual, ordered) {
                Outcome::Pass
            } else {
                Outcome::Fail(format!(
                    "rows differ{}:\n  Druid:  {rows:?}\n  Dolmen: {actual:?}",
                    if ordered { " (ordered)" } else { "" }
                ))
            }
        }
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every `.iq` file under `quidem/`, sorted, as `(family/file, text)`.
fn corpus_files() -> Vec<(String, String)> {
    let root = corpus_dir().join("quidem");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "iq") {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Loads a dataset folder: every ingestion spec (`*.json`) in it, as Druid's quidem tests do.
fn load_dataset(server: &Server, name: &str) -> Result<(), String> {
    let dir = corpus_dir().join("datasets").join(name);
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("dataset {name}: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    specs.sort();
    for p in specs {
        let spec: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
            .map_err(|e| format!("{}: {e}", p.display()))?;
        let (code, body) = server.post_json("/druid/indexer/v1/task", &spec);
        if code != 200 {
            return Err(format!("{}: submit {code}: {body}", p.display()));
        }
        let status = server.wait_task(body["task"].as_str().unwrap_or_default());
        if status["status"] != "SUCCESS" {
            return Err(format!("{}: {status}", p.display()));
        }
    }
    Ok(())
}

#[test]
fn parser_reads_quidem_files() {
    let text = "!set useApproximateCountDistinct false\n\
        !use druidtest://?componentSupplier=X&datasets=sql/src/test/quidem/qatests/qaAggFuncs\n\
        !set outputformat mysql\n\
        SELECT count(*) cnt\nFROM t;\n\
        +-----+\n| cnt |\n+-----+\n|  18 |\n+-----+\n(1 row)\n\n!ok\n\
        # TESTCASE\nSELECT string_agg(s, '|') AS col FROM t;\n\
        +-----------+\n| col       |\n+-----------+\n| A|B       |\n|           |\n+-----------+\n(2 rows)\n\n!ok\n\
        [ plan text ]\n!nativePlan\n\
        SELECT x('A') AS col;\nQueryInterruptedException\n!error\n\
        !if (false) {\nSELECT 1;\n!ok\n!}\n";
    let cases = parse_iq("f/a.iq", text).unwrap();
    assert_eq!(cases.len(), 3, "{cases:#?}");
    assert_eq!(cases[0].datasets, vec!["qaAggFuncs".to_string()]);
    assert_eq!(
        cases[0].context["useApproximateCountDistinct"],
        json!(false)
    );
    assert!(!cases[0].context.contains_key("outputformat"));
    assert_eq!(cases[0].sql, "SELECT count(*) cnt\nFROM t");
    assert_eq!(
        cases[1].expect,
        Expect::Rows {
            columns: vec!["col".into()],
            rows: vec![vec!["A|B".into()], vec![String::new()]],
        }
    );
    assert_eq!(cases[1].id, "f/a.iq#2");
    assert_eq!(
        cases[2].expect,
        Expect::Error("QueryInterruptedException".into())
    );
    assert_eq!(format_cell(&json!("A"), "OTHER"), "\"A\"");
    assert_eq!(format_cell(&json!({"a": 1}), "OTHER"), "{\"a\":1}");
    assert_eq!(format_cell(&json!("A"), "VARCHAR"), "A");
    assert!(cell_matches("11.11111111", "11.111111111"));
    assert!(probably_deterministic("SELECT a FROM t ORDER BY a"));
    assert!(!probably_deterministic("SELECT a FROM t"));
    assert!(!probably_deterministic(
        "SELECT a FROM (SELECT a FROM t ORDER BY a)"
    ));
    assert!(!probably_deterministic(
        "SELECT ROW_NUMBER() OVER (PARTITION BY b ORDER BY a) FROM t"
    ));
    assert!(probably_deterministic(
        "SELECT ROW_NUMBER() OVER (ORDER BY a) r FROM t ORDER BY r"
    ));
    assert!(!cell_matches("11.1", "11.2"));
    assert!(rows_match(
        &[vec!["a".into()], vec!["b".into()]],
        &[vec!["b".into()], vec!["a".into()]],
        false
    ));
    assert!(!rows_match(
        &[vec!["a".into()], vec!["b".into()]],
        &[vec!["b".into()], vec!["a".into()]],
        true
    ));
}

/// Replays the corpus; fails on a regression of a case listed in `passing.txt` or on any 5xx.
#[test]
fn druid_quidem_corpus() {
    // `DOLMEN_CORPUS_ONLY=<prefix>` replays only the case ids starting with it (a family, a
    // file): a development aid; the ratchet then checks only those cases and `passing.txt` is
    // never rewritten.
    let only = std::env::var("DOLMEN_CORPUS_ONLY").ok();
    let selected = |id: &str| only.as_deref().is_none_or(|p| id.starts_with(p));
    let files = corpus_files();
    let mut cases = Vec::new();
    for (name, text) in &files {
        cases.extend(parse_iq(name, text).unwrap_or_else(|e| panic!("{e}")));
    }
    cases.retain(|c| selected(&c.id));
    assert!(!cases.is_empty(), "the corpus is empty");
    let passing_path = corpus_dir().join("passing.txt");
    let listed: Vec<String> = std::fs::read_to_string(&passing_path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && selected(l))
        .map(String::from)
        .collect();
    // Each file runs against its own datasets, as quidem's `!use` gives it a fresh environment
    // (two dataset folders may load the same datasource name): one server per dataset set.
    let mut groups: BTreeMap<Vec<String>, Vec<&Case>> = BTreeMap::new();
    for case in &cases {
        let mut key = case.datasets.clone();
        key.sort();
        groups.entry(key).or_default().push(case);
    }
    let mut report = String::new();
    let mut missing_datasets = Vec::new();
    let mut passed = Vec::new();
    let mut server_errors = Vec::new();
    let mut by_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // Passing and total `!ok` (result table) and `!error` (refusal) cases.
    let mut tables = (0usize, 0usize);
    let mut refusals = (0usize, 0usize);
    for (datasets, group) in &groups {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(dir.path());
        for d in datasets {
            if let Err(e) = load_dataset(&server, d) {
                writeln!(report, "dataset {d} not loaded: {e}").unwrap();
                missing_datasets.push(d.clone());
            }
        }
        for case in group {
            let family = case.id.split('/').next().unwrap_or_default().to_string();
            let entry = by_family.entry(family).or_default();
            entry.1 += 1;
            let kind = match case.expect {
                Expect::Rows { .. } => &mut tables,
                Expect::Error(_) => &mut refusals,
            };
            kind.1 += 1;
            match run_case(&server, case) {
                Outcome::Pass => {
                    entry.0 += 1;
                    kind.0 += 1;
                    passed.push(case.id.clone());
                }
                Outcome::Fail(why) => {
                    writeln!(report, "FAIL {}\n  {}\n  {why}\n", case.id, case.sql).unwrap();
                }
                Outcome::ServerError(why) => {
                    writeln!(report, "5XX {}\n  {}\n  {why}\n", case.id, case.sql).unwrap();
                    server_errors.push(case.id.clone());
                }
            }
        }
    }
    passed.sort();
    let mut summary = format!(
        "Druid quidem corpus: {} of {} cases pass ({} files)\n",
        passed.len(),
        cases.len(),
        files.len()
    );
    writeln!(
        summary,
        "  result tables (!ok) {}/{}, refusals (!error) {}/{}",
        tables.0, tables.1, refusals.0, refusals.1
    )
    .unwrap();
    for (family, (p, n)) in &by_family {
        writeln!(summary, "  {family}: {p}/{n}").unwrap();
    }
    eprintln!("{summary}");
    let report_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/corpus-report.txt");
    let _ = std::fs::write(&report_path, format!("{summary}\n{report}"));
    eprintln!("corpus report: {}", report_path.display());
    if only.is_none() && std::env::var_os("DOLMEN_CORPUS_UPDATE").is_some() {
        let mut text = String::from(
            "# Cases of tests/corpus that give Druid's answer (a ratchet: see it/corpus.rs).\n",
        );
        for id in &passed {
            text.push_str(id);
            text.push('\n');
        }
        std::fs::write(&passing_path, text).unwrap();
    }
    let regressed: Vec<&String> = listed.iter().filter(|id| !passed.contains(id)).collect();
    assert!(
        missing_datasets.is_empty(),
        "datasets not loaded: {missing_datasets:?}\n{report}"
    );
    assert!(
        server_errors.is_empty(),
        "5xx answers: {server_errors:?} (report: {})",
        report_path.display()
    );
    assert!(
        regressed.is_empty(),
        "cases that passed before fail now: {regressed:?} (report: {})",
        report_path.display()
    );
}
