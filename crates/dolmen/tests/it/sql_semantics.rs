//! Druid SQL semantics through the real server, each test citing the Druid source of the
//! behaviour: timestamps as text, NULL ordering, operator precedence, names and niladic
//! functions, `SELECT *` column order, row order without `ORDER BY`, window frames, type
//! coercion and error statuses (the classes of issue 19).

use serde_json::{Value, json};

use crate::common::Server;

/// A server without data.
fn empty() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    (dir, server)
}

/// Rows of `events`: two days, three rows each day, ingested as two DAY segments.
/// Times: 2019-08-25T03:04:05.678Z, +1 h, +2 h; 2019-08-26T03:04:05.678Z, +1 h, +2 h.
const EVENTS: &str = "\
{\"ts\": 1566702245678, \"page\": \"a\", \"user\": \"u1\", \"city\": \"x\", \"added\": 1, \"delta\": 1.5}
{\"ts\": 1566705845678, \"page\": \"b\", \"user\": \"u2\", \"added\": 2, \"delta\": 2.5}
{\"ts\": 1566709445678, \"page\": \"c\", \"user\": \"u3\", \"city\": \"y\", \"added\": 3, \"delta\": 3.5}
{\"ts\": 1566788645678, \"page\": \"d\", \"user\": \"u4\", \"city\": \"x\", \"added\": 4, \"delta\": 4.5}
{\"ts\": 1566792245678, \"page\": \"e\", \"user\": \"u5\", \"added\": 5, \"delta\": 5.5}
{\"ts\": 1566795845678, \"page\": \"f\", \"user\": \"u6\", \"city\": \"z\", \"added\": 6, \"delta\": 6.5}
";

/// A server with the datasource `events` ([`EVENTS`]): dimensions `page`, `user`, `city` in
/// that order; metrics `count`, `sum_z` (of `added`) and `sum_a` (of `delta`), in that order.
fn with_events() -> (tempfile::TempDir, Server) {
    let (dir, server) = empty();
    let spec = json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "events",
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["page", "user", "city"]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "sum_z", "fieldName": "added"},
                    {"type": "doubleSum", "name": "sum_a", "fieldName": "delta"}
                ],
                "granularitySpec": {
                    "segmentGranularity": "day", "queryGranularity": "none", "rollup": false
                }
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": EVENTS},
                "inputFormat": {"type": "json"}
            }
        }
    });
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    (dir, server)
}

/// Runs `sql` with `context`, expecting 200; the rows of the `object` format.
fn rows_with(server: &Server, sql: &str, context: Value) -> Vec<Value> {
    let (status, body) =
        server.post_json("/druid/v2/sql", &json!({"query": sql, "context": context}));
    assert_eq!(status, 200, "{sql}: {body}");
    body.as_array().cloned().unwrap_or_default()
}

/// `CAST(__time AS VARCHAR)` and every other TIMESTAMP-to-text conversion give
/// `yyyy-MM-dd HH:mm:ss` in `sqlTimeZone`, a DATE `yyyy-MM-dd` (Druid's
/// `CastOperatorConversion.castDateTimeToChar`; `docs/querying/sql-data-types.md`: "Casts
/// between string and timestamp types assume standard SQL formatting, such as
/// `2000-01-02 03:04:05`"), while a TIMESTAMP result column keeps Druid's ISO result format.
#[test]
fn timestamps_turned_into_text_read_like_druid() {
    let (_dir, server) = with_events();
    let sql = "SELECT __time, CAST(__time AS VARCHAR) AS t, __time || '!' AS c, \
                      CAST(CAST(__time AS DATE) AS VARCHAR) AS d \
               FROM events WHERE page = 'a'";
    let got = server.sql(sql);
    assert_eq!(
        got,
        vec![json!({
            "__time": "2019-08-25T03:04:05.678Z",
            "t": "2019-08-25 03:04:05",
            "c": "2019-08-25 03:04:05!",
            "d": "2019-08-25",
        })]
    );
    // In Los Angeles the same instant is the evening before.
    let got = rows_with(
        &server,
        "SELECT CAST(__time AS VARCHAR) AS t, CAST(CAST(__time AS DATE) AS VARCHAR) AS d \
         FROM events WHERE page = 'a'",
        json!({"sqlTimeZone": "America/Los_Angeles"}),
    );
    assert_eq!(
        got,
        vec![json!({"t": "2019-08-24 20:04:05", "d": "2019-08-24"})]
    );
    // Grouping on the text groups by the second, not by the millisecond.
    let got = server.sql(
        "SELECT SUBSTRING(CAST(__time AS VARCHAR), 1, 10) AS day, COUNT(*) AS n \
         FROM events GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(
        got,
        vec![
            json!({"day": "2019-08-25", "n": 3}),
            json!({"day": "2019-08-26", "n": 3})
        ]
    );
}

/// NULL sorts first ascending and last descending, in `ORDER BY` and window ordering (Druid's
/// `calcite/tests/window/orderByDescNulls.sqlTest`: null cities rank first in `ORDER BY
/// cityName NULLS FIRST`, which plans as a plain ascending sort, and last in `ORDER BY cityName
/// DESC NULLS LAST`, a plain descending sort); the other placements are 400s, as in Druid.
#[test]
fn nulls_sort_first_ascending_and_last_descending() {
    let (_dir, server) = with_events();
    let cities = |sql: &str| -> Vec<Value> {
        server
            .sql(sql)
            .into_iter()
            .map(|r| r["city"].clone())
            .collect()
    };
    assert_eq!(
        cities("SELECT x AS city FROM (VALUES (1), (NULL), (0)) t(x) ORDER BY x"),
        [json!(null), json!(0), json!(1)]
    );
    assert_eq!(
        cities("SELECT city FROM events GROUP BY city ORDER BY city"),
        [json!(null), json!("x"), json!("y"), json!("z")]
    );
    assert_eq!(
        cities("SELECT city FROM events GROUP BY city ORDER BY city DESC"),
        [json!("z"), json!("y"), json!("x"), json!(null)]
    );
    // The other placements Druid rejects (`DruidSqlValidator.validateCall`).
    for (sql, message) in [
        (
            "SELECT city FROM events GROUP BY city ORDER BY city NULLS LAST",
            "ASCENDING ordering with NULLS LAST is not supported!",
        ),
        (
            "SELECT city FROM events GROUP BY city ORDER BY city DESC NULLS FIRST",
            "DESCENDING ordering with NULLS FIRST is not supported!",
        ),
    ] {
        let (status, body) = server.post_json("/druid/v2/sql", &json!({ "query": sql }));
        assert_eq!(status, 400, "{sql}: {body}");
        assert_eq!(body["errorMessage"], message, "{sql}: {body}");
    }
    let got = server.sql(
        "SELECT page, ROW_NUMBER() OVER (ORDER BY city, page) AS asc_n, \
                ROW_NUMBER() OVER (ORDER BY city DESC, page) AS desc_n \
         FROM events ORDER BY page",
    );
    let numbers: Vec<(i64, i64)> = got
        .iter()
        .map(|r| (r["asc_n"].as_i64().unwrap(), r["desc_n"].as_i64().unwrap()))
        .collect();
    // Pages a..f with cities x, null, y, x, null, z.
    assert_eq!(numbers, [(3, 3), (1, 5), (5, 2), (4, 4), (2, 6), (6, 1)]);
}

/// `IS [NOT] DISTINCT FROM` binds like a comparison (Calcite's precedence 30, `AND` 24): the
/// held-out suite's `SELECT 1 WHERE 1 IS NOT DISTINCT FROM 1 AND 2 <> 3` on an empty server.
#[test]
fn is_not_distinct_from_binds_tighter_than_and() {
    let (_dir, server) = empty();
    assert_eq!(
        server.sql("SELECT 1 AS x WHERE 1 IS NOT DISTINCT FROM 1 AND 2 <> 3"),
        vec![json!({"x": 1})]
    );
    assert_eq!(
        server.sql("SELECT 1 AS x WHERE 1 IS DISTINCT FROM 1 OR 2 = 3"),
        Vec::<Value>::new()
    );
}

/// `PI` without parentheses is Calcite's constant (in Druid's `DruidOperatorTable`), named
/// `EXPR$0` like any expression; `user` is a column (Druid's operator table has no `USER`
/// function), named as the column.
#[test]
fn pi_is_a_constant_and_user_a_column() {
    let (_dir, server) = empty();
    assert_eq!(
        server.sql("SELECT PI, user FROM (VALUES ('u1')) t(\"user\")"),
        vec![json!({"EXPR$0": std::f64::consts::PI, "user": "u1"})]
    );
}

/// Druid's SQL-ingestion tutorial (`docs/tutorials/tutorial-msq-extern.md`) verbatim, but
/// for its input source: a local file with the tutorial's fields instead of the
/// `https://druid.apache.org/data/wikipedia.json.gz` download. The unquoted `user` select item
/// is the `user` column of the new datasource, not a function named `EXPR$16`.
#[test]
fn the_sql_ingestion_tutorial_keeps_the_user_column() {
    let (dir, server) = empty();
    let file = dir.path().join("wikipedia.json");
    let mut data = String::new();
    for (i, (user, channel)) in [
        ("Alice", "#en.wikipedia"),
        ("Bob", "#fr.wikipedia"),
        ("Alice", "#en.wikipedia"),
    ]
    .iter()
    .enumerate()
    {
        data.push_str(
            &json!({
                "timestamp": format!("2016-06-27T00:0{i}:11.080Z"),
                "isRobot": "false", "channel": channel, "flags": "NB", "isUnpatrolled": "false",
                "page": format!("Page {i}"), "diffUrl": "https://example.org/diff", "added": 10 + i,
                "comment": "c", "commentLength": 1, "isNew": "true", "isMinor": "false",
                "delta": 10 + i, "isAnonymous": "false", "user": user, "deltaBucket": 0,
                "deleted": 0, "namespace": "Main", "cityName": null, "countryName": null,
                "regionIsoCode": null, "metroCode": null, "countryIsoCode": null,
                "regionName": null
            })
            .to_string(),
        );
        data.push('\n');
    }
    std::fs::write(&file, data).unwrap();
    let input = json!({"type": "local", "files": [file.display().to_string()]}).to_string();
    let sql = r#"REPLACE INTO "wikipedia" OVERWRITE ALL
WITH ext AS (SELECT *
FROM TABLE(
  EXTERN(
    'INPUT_SOURCE',
    '{"type":"json"}',
    '[{"name":"isRobot","type":"string"},{"name":"channel","type":"string"},{"name":"timestamp","type":"string"},{"name":"flags","type":"string"},{"name":"isUnpatrolled","type":"string"},{"name":"page","type":"string"},{"name":"diffUrl","type":"string"},{"name":"added","type":"long"},{"name":"comment","type":"string"},{"name":"commentLength","type":"long"},{"name":"isNew","type":"string"},{"name":"isMinor","type":"string"},{"name":"delta","type":"long"},{"name":"isAnonymous","type":"string"},{"name":"user","type":"string"},{"name":"deltaBucket","type":"long"},{"name":"deleted","type":"long"},{"name":"namespace","type":"string"},{"name":"cityName","type":"string"},{"name":"countryName","type":"string"},{"name":"regionIsoCode","type":"string"},{"name":"metroCode","type":"long"},{"name":"countryIsoCode","type":"string"},{"name":"regionName","type":"string"}]'
  )
))
SELECT
  TIME_PARSE("timestamp") AS __time,
  isRobot,
  channel,
  flags,
  isUnpatrolled,
  page,
  diffUrl,
  added,
  comment,
  commentLength,
  isNew,
  isMinor,
  delta,
  isAnonymous,
  user,
  deltaBucket,
  deleted,
  namespace,
  cityName,
  countryName,
  regionIsoCode,
  metroCode,
  countryIsoCode,
  regionName
FROM ext
PARTITIONED BY DAY"#
        .replace("INPUT_SOURCE", &input);
    let (code, body) = server.post_json("/druid/v2/sql/task", &json!({ "query": sql }));
    assert_eq!(code, 200, "{body}");
    let st = server.wait_task(body["taskId"].as_str().unwrap());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let columns: Vec<Value> = server
        .sql(
            "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS \
             WHERE TABLE_NAME = 'wikipedia' ORDER BY ORDINAL_POSITION",
        )
        .into_iter()
        .map(|r| r["COLUMN_NAME"].clone())
        .collect();
    assert!(columns.contains(&json!("user")), "{columns:?}");
    assert!(
        !columns
            .iter()
            .any(|c| c.as_str().is_some_and(|c| c.starts_with("EXPR$"))),
        "{columns:?}"
    );
    assert_eq!(
        server.sql("SELECT user, COUNT(*) AS n FROM wikipedia GROUP BY user ORDER BY user"),
        vec![
            json!({"user": "Alice", "n": 2}),
            json!({"user": "Bob", "n": 1})
        ]
    );
}

/// `SELECT *` lists `__time`, the dimensions in spec order, then the metrics sorted by name
/// (Druid's datasource row signature: each segment lists its metrics as `IndexMergerV9` wrote
/// them, sorted by `IndexMerger.mergeIndexed`'s `TreeSet`), as does
/// `INFORMATION_SCHEMA.COLUMNS`. The spec here lists the metrics `count`, `sum_z`, `sum_a`.
#[test]
fn select_star_lists_metrics_sorted_by_name_after_the_dimensions() {
    let (_dir, server) = with_events();
    let (status, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT * FROM events LIMIT 1", "resultFormat": "array", "header": true}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body[0],
        json!(["__time", "page", "user", "city", "count", "sum_a", "sum_z"])
    );
    let columns: Vec<Value> = server
        .sql(
            "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS \
             WHERE TABLE_NAME = 'events' ORDER BY ORDINAL_POSITION",
        )
        .into_iter()
        .map(|r| r["COLUMN_NAME"].clone())
        .collect();
    assert_eq!(
        columns,
        ["__time", "page", "user", "city", "count", "sum_a", "sum_z"]
    );
}

/// Without `ORDER BY`, rows come back segment after segment in time order, each segment's
/// rows in time order (Druid's scan concatenates the segments the timeline lists by interval),
/// so `LIMIT 1` is the earliest row, as Druid's docs assume.
#[test]
fn rows_without_order_by_come_in_time_order() {
    let (_dir, server) = with_events();
    let pages = |sql: &str| -> Vec<Value> {
        server
            .sql(sql)
            .into_iter()
            .map(|r| r["page"].clone())
            .collect()
    };
    assert_eq!(pages("SELECT page FROM events LIMIT 1"), [json!("a")]);
    assert_eq!(
        pages("SELECT page FROM events"),
        ["a", "b", "c", "d", "e", "f"].map(|p| json!(p))
    );
    assert_eq!(
        pages("SELECT page FROM events WHERE sum_z > 3 LIMIT 2"),
        [json!("d"), json!("e")]
    );
}

/// Window frames Druid accepts and DataFusion did not: the short forms `ROWS 1 FOLLOWING` and
/// `RANGE UNBOUNDED FOLLOWING` (`BETWEEN CURRENT ROW AND ...`, Calcite's `SqlWindow.create`;
/// Druid's quidem `qaWin/orderby_rows_1_following_*` counts 2 rows but on the last), frames
/// whose start is after their end (empty: SUM null; Druid's `past_and_future_frames.sqlTest`),
/// on an empty server.
#[test]
fn window_frames_druid_accepts_answer_like_druid() {
    let (_dir, server) = empty();
    let got = server.sql(
        "SELECT x, COUNT(x) OVER (ORDER BY x ROWS 1 FOLLOWING) AS c, \
                SUM(x) OVER (ORDER BY x ROWS BETWEEN 0 PRECEDING AND 1 PRECEDING) AS s, \
                SUM(x) OVER (ORDER BY x RANGE UNBOUNDED FOLLOWING) AS r \
         FROM (VALUES (1), (2), (3)) t(x) ORDER BY x",
    );
    assert_eq!(
        got,
        vec![
            json!({"x": 1, "c": 2, "s": null, "r": 6}),
            json!({"x": 2, "c": 2, "s": null, "r": 5}),
            json!({"x": 3, "c": 1, "s": null, "r": 3}),
        ]
    );
}

/// Calcite's type coercion with Druid's casts: `COALESCE(null, null, 5, 'abc')` is 5,
/// `NULLIF(<string>, <long>)` is the string when they differ (`SqlNullifFunction`: `CASE WHEN
/// a = b THEN NULL ELSE a END`), mixed `IS [NOT] DISTINCT FROM` runs, and text that does not
/// convert is NULL (`sql-data-types.md`: "If a value cannot be cast to the target type, as in
/// `CAST('foo' AS BIGINT)`, Druid substitutes NULL").
#[test]
fn mixed_types_coerce_without_failing() {
    let (_dir, server) = with_events();
    assert_eq!(
        server.sql(
            "SELECT COALESCE(null, null, 5, 'abc') AS a, NULLIF(page, 1) AS b, \
                    sum_z IS DISTINCT FROM 'x' AS c, CAST(page AS BIGINT) AS d \
             FROM events WHERE page = 'a'"
        ),
        vec![json!({"a": 5, "b": "a", "c": true, "d": null})]
    );
}

/// Errors read as Druid's: JSON functions read text that is not JSON as a string (Druid's
/// `NestedDataExpressions.unwrap`), `'$.'` is the root path, malformed `PARSE_JSON` input and
/// non-string `JSON_OBJECT` keys are the client's mistakes (400), and so are what Calcite
/// rejects: `ARRAY[]` and ranking without `ORDER BY`. No SQL text gets a 5xx.
#[test]
fn bad_input_is_a_400_and_never_a_500() {
    let (_dir, server) = with_events();
    assert_eq!(
        server.sql(
            "SELECT JSON_VALUE('ABCD', '$') AS a, JSON_VALUE('ABCD', '$.x') AS b, \
                    JSON_VALUE(PARSE_JSON('{\"x\": 1}'), '$.x') AS c, \
                    TO_JSON_STRING(JSON_QUERY(PARSE_JSON('{\"x\": 1}'), '$.')) AS d"
        ),
        vec![json!({"a": "ABCD", "b": null, "c": "1", "d": "{\"x\":1}"})]
    );
    for (sql, message) in [
        ("SELECT PARSE_JSON('{')", "PARSE_JSON"),
        ("SELECT JSON_OBJECT(123: 'A')", "JSON_OBJECT"),
        ("SELECT PARSE_JSON(page) FROM events", "PARSE_JSON"),
        (
            "SELECT ARRAY[]",
            "Invalid number of arguments to function 'ARRAY'",
        ),
        (
            "SELECT PERCENT_RANK() OVER ()",
            "RANK or DENSE_RANK functions require ORDER BY clause in window specification",
        ),
    ] {
        let (status, body) = server.post_json("/druid/v2/sql", &json!({ "query": sql }));
        assert_eq!(status, 400, "{sql}: {body}");
        let got = body["errorMessage"].as_str().unwrap_or_default();
        assert!(got.contains(message), "{sql}: {body}");
    }
    // Odd SQL of every kind: a 200 or a 4xx, never a 5xx.
    for sql in [
        "SELECT 1/0",
        "SELECT CAST('x' AS BIGINT) + 1",
        "SELECT SUBSTRING('abc', 0, 1)",
        "SELECT TIME_PARSE('nope')",
        "SELECT JSON_VALUE(page, '$.a.b[3]') FROM events",
        "SELECT MV_OFFSET(ARRAY['a'], 5)",
        "SELECT x FROM (VALUES (1)) t(x) ORDER BY x NULLS LAST",
        "SELECT SUM(sum_z) OVER (ORDER BY __time ROWS BETWEEN 5 FOLLOWING AND 2 FOLLOWING) FROM events",
        "SELECT * FROM events WHERE __time = 'yesterday'",
        "SELECT LOOKUP(page, 'missing') FROM events",
        "SELEC 1",
        "SELECT",
        "SELECT 'unterminated",
    ] {
        let (status, body) = server.post_json("/druid/v2/sql", &json!({ "query": sql }));
        assert!(status < 500, "{sql}: {status} {body}");
    }
}

/// `JSON_PATHS` writes paths as Druid's `NestedPathFinder.toNormalizedJsonPath` does: `$` for
/// a literal at the root, `$.a.b`, `$['x.y']` for a key needing quotes, and `[$]` for a NULL
/// input, which `JsonPathsExprMacro` walks as a literal at the root (the qaUnnest corpus case
/// `array_sql_json_funcs.all.iq#10` counts those rows).
#[test]
fn json_paths_in_druid_normalized_form() {
    let (_dir, server) = empty();
    let rows = rows_with(
        &server,
        "SELECT JSON_PATHS(1) AS a, JSON_PATHS(NULL) AS b, \
         JSON_PATHS(PARSE_JSON('{\"a\": {\"b\": 1}, \"x.y\": [1, 2]}')) AS c, \
         JSON_PATHS(NULL) IS NULL AS d",
        json!({"sqlStringifyArrays": false}),
    );
    assert_eq!(
        rows,
        vec![json!({"a": ["$"], "b": ["$"], "c": ["$.a.b", "$['x.y']"], "d": false})]
    );
}

/// The JSON functions read a TIMESTAMP as Druid's expressions do, as its epoch milliseconds
/// (LONG): `JSON_VALUE(__time, '$')` is `1566702245678`, not the time's text (qaJsonCols
/// corpus cases `funcs_and_sql_func_json_value.01.all.iq#2..4`, `json_query` likewise).
#[test]
fn json_functions_read_a_timestamp_as_its_millis() {
    let (_dir, server) = with_events();
    let rows = rows_with(
        &server,
        "SELECT JSON_VALUE(__time, '$') AS v, JSON_QUERY(__time, '$') AS q, \
         JSON_PATHS(__time) AS p FROM events ORDER BY __time LIMIT 1",
        json!({"sqlStringifyArrays": false}),
    );
    assert_eq!(
        rows,
        vec![json!({"v": "1566702245678", "q": 1566702245678_i64, "p": ["$"]})]
    );
    let rows = rows_with(
        &server,
        "SELECT COUNT(*) AS c FROM events \
         WHERE JSON_VALUE(__time, '$' RETURNING BIGINT) = 1566702245678",
        json!({}),
    );
    assert_eq!(rows, vec![json!({"c": 1})]);
}
