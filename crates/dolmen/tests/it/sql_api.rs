//! The synchronous SQL endpoint's request features: `?` parameters, `SET` statements, context
//! keys (`sqlOuterLimit`, `timeout`, `priority`), and cancellation by `sqlQueryId`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, wikipedia_spec};

/// A query that runs for a long time: a sum over the self cross join of the 39,244 Wikipedia
/// rows (1.5 billion pairs). No join filter, so each step of the work is one row of one side
/// against one batch of the other (a join filter would make each step a whole side against a
/// batch: seconds of work that a cancellation cannot cut short on a loaded debug build).
const ENDLESS: &str = "SELECT SUM(a.added + b.added) AS c FROM wikipedia a CROSS JOIN wikipedia b";

fn loaded() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = server.run_task(&wikipedia_spec());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    (dir, server)
}

/// CPU seconds the server process has used so far (`/proc/<pid>/stat` utime + stime).
pub(crate) fn cpu_seconds(server: &Server) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", server.child.id())).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[test]
fn parameters_set_statements_and_context_keys() {
    let (_dir, server) = loaded();
    let sql = |body: Value| server.post_json("/service/v2/sql", &body);

    // `?` parameters bind by position; a `?` inside a literal is text.
    let (code, body) = sql(json!({
        "query": "SELECT COUNT(*) AS c, '?' AS q FROM wikipedia \
                  WHERE channel = ? AND added > ? AND __time >= ?",
        "parameters": [
            {"type": "VARCHAR", "value": "#en.wikipedia"},
            {"type": "BIGINT", "value": 100},
            {"type": "TIMESTAMP", "value": "2015-09-12 00:00:00"}
        ]
    }));
    assert_eq!(code, 200, "{body}");
    let expected = server
        .sql("SELECT COUNT(*) AS c FROM wikipedia WHERE channel = '#en.wikipedia' AND added > 100")
        [0]["c"]
        .clone();
    assert_eq!(body, json!([{"c": expected, "q": "?"}]));
    assert!(expected.as_i64().unwrap() > 0);

    // A `?` without a value names its position.
    let (code, body) = sql(json!({
        "query": "SELECT COUNT(*) FROM wikipedia WHERE channel = ? AND added > ?",
        "parameters": [{"type": "VARCHAR", "value": "#en.wikipedia"}]
    }));
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("position [1]"),
        "{body}"
    );

    // SET statements before the query set context values, and win over `context`.
    let (code, body) = sql(json!({
        "query": "SET sqlTimeZone = 'America/Los_Angeles';\nSET sqlOuterLimit = 3;\n\
                  SELECT __time FROM wikipedia ORDER BY __time",
        "context": {"sqlTimeZone": "Asia/Tokyo", "sqlOuterLimit": 10}
    }));
    assert_eq!(code, 200, "{body}");
    let rows = body.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{body}");
    let first = rows[0]["__time"].as_str().unwrap();
    // The first edit is at 2015-09-12T00:46:58.771Z: 17:46 the day before in Los Angeles.
    assert_eq!(first, "2015-09-11T17:46:58.771-07:00", "{body}");

    // sqlOuterLimit from the context alone; unknown keys, an integer priority and a timeout of 0
    // (none, as in Druid) are accepted.
    let (code, body) = sql(json!({
        "query": "SELECT channel FROM wikipedia",
        "context": {"sqlOuterLimit": 2, "priority": 5, "someFutureKey": {"x": 1}, "timeout": 0}
    }));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body.as_array().unwrap().len(), 2);

    // Bad SET statements and context values are 400s naming the problem.
    for (query, context, needle) in [
        ("SELECT 1; SET a = 1", json!({}), "a query must follow"),
        ("SET a = b; SELECT 1", json!({}), "not a literal"),
        ("SELECT 1; SELECT 2", json!({}), "Only SET statements"),
        ("SELECT 1", json!({"timeout": "soon"}), "context.timeout"),
        (
            "SELECT 1",
            json!({"sqlOuterLimit": -1}),
            "context.sqlOuterLimit",
        ),
        ("SELECT 1", json!({"priority": "high"}), "context.priority"),
    ] {
        let (code, body) = sql(json!({"query": query, "context": context}));
        assert_eq!(code, 400, "{query}: {body}");
        let msg = body["errorMessage"].as_str().unwrap();
        assert!(msg.contains(needle), "{query}: {msg}");
    }
}

#[test]
fn a_query_past_its_timeout_gets_the_timeout_error() {
    let (_dir, server) = loaded();
    let t = Instant::now();
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": ENDLESS, "context": {"timeout": 300, "sqlQueryId": "slow-1"}}),
    );
    assert_eq!(code, 504, "{body}");
    assert_eq!(body["error"], "Query timeout", "{body}");
    assert_eq!(
        body["errorClass"], "org.apache.druid.query.QueryTimeoutException",
        "{body}"
    );
    assert!(body["errorMessage"].as_str().unwrap().contains("slow-1"));
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn cancelling_by_sql_query_id_stops_the_work() {
    let (_dir, server) = loaded();
    let url = format!("{}/druid/v2/sql", server.url);
    let client = server.client.clone();
    let running = std::thread::spawn(move || {
        let r = client
            .post(url)
            .json(&json!({"query": ENDLESS, "context": {"sqlQueryId": "cancel-me"}}))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.text().unwrap())
    });
    // Cancel as soon as the query is registered (it runs for minutes otherwise).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, _) = server.delete("/druid/v2/sql/cancel-me");
        if code == 202 {
            break;
        }
        assert_eq!(code, 404);
        assert!(
            Instant::now() < deadline,
            "the query never became cancellable"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, text) = running.join().unwrap();
    assert_eq!(status, 500, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"], "Query cancelled", "{body}");
    assert_eq!(
        body["errorClass"],
        "org.apache.druid.query.QueryInterruptedException"
    );

    // The work really stopped: within a few seconds the server burns (next to) no CPU, where
    // the query kept every query thread busy for minutes. (A join batch already being
    // computed finishes first; under a loaded test machine that can spill into the first
    // window.)
    std::thread::sleep(Duration::from_millis(300));
    let mut used = f64::MAX;
    for _ in 0..5 {
        let before = cpu_seconds(&server);
        std::thread::sleep(Duration::from_secs(1));
        used = cpu_seconds(&server) - before;
        if used < 0.3 {
            break;
        }
    }
    assert!(
        used < 0.3,
        "server still used {used:.2} CPU s per second 5 s after the cancel"
    );

    // Finished (cancelled) or unknown ids are 404.
    assert_eq!(server.delete("/druid/v2/sql/cancel-me").0, 404);
    assert_eq!(server.delete("/service/v2/sql/never-was").0, 404);
}

#[test]
fn information_schema_describes_the_live_datasources() {
    let (_dir, server) = loaded();
    let schemas = server.sql("SELECT CATALOG_NAME, SCHEMA_NAME FROM INFORMATION_SCHEMA.SCHEMATA");
    assert_eq!(
        schemas,
        vec![
            json!({"CATALOG_NAME": "druid", "SCHEMA_NAME": "druid"}),
            json!({"CATALOG_NAME": "druid", "SCHEMA_NAME": "INFORMATION_SCHEMA"}),
            json!({"CATALOG_NAME": "druid", "SCHEMA_NAME": "lookup"}),
            json!({"CATALOG_NAME": "druid", "SCHEMA_NAME": "sys"}),
        ]
    );
    let tables = server.sql(
        "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, IS_JOINABLE FROM INFORMATION_SCHEMA.TABLES \
         ORDER BY TABLE_SCHEMA, TABLE_NAME",
    );
    // wikipedia, 4 INFORMATION_SCHEMA tables, 6 sys tables.
    assert_eq!(tables.len(), 11, "{tables:?}");
    assert!(tables.contains(&json!({
        "TABLE_SCHEMA": "druid", "TABLE_NAME": "wikipedia", "TABLE_TYPE": "TABLE", "IS_JOINABLE": "NO"
    })));
    assert!(tables.contains(&json!({
        "TABLE_SCHEMA": "INFORMATION_SCHEMA", "TABLE_NAME": "COLUMNS",
        "TABLE_TYPE": "SYSTEM_TABLE", "IS_JOINABLE": "NO"
    })));

    // The columns a SQLAlchemy dialect reads, as Druid reports them.
    let cols = server.sql(
        "SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, DATA_TYPE, JDBC_TYPE, \
         NUMERIC_PRECISION, DATETIME_PRECISION, CHARACTER_SET_NAME \
         FROM INFORMATION_SCHEMA.COLUMNS \
         WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = 'wikipedia' ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(
        cols[0],
        json!({"COLUMN_NAME": "__time", "ORDINAL_POSITION": 1, "IS_NULLABLE": "NO",
               "DATA_TYPE": "TIMESTAMP", "JDBC_TYPE": 93, "NUMERIC_PRECISION": null,
               "DATETIME_PRECISION": 3, "CHARACTER_SET_NAME": null})
    );
    let channel = cols.iter().find(|c| c["COLUMN_NAME"] == "channel").unwrap();
    assert_eq!(channel["DATA_TYPE"], "VARCHAR");
    assert_eq!(channel["JDBC_TYPE"], 12);
    assert_eq!(channel["IS_NULLABLE"], "YES");
    assert_eq!(channel["CHARACTER_SET_NAME"], "UTF-16LE");
    let added = cols.iter().find(|c| c["COLUMN_NAME"] == "added").unwrap();
    assert_eq!(added["DATA_TYPE"], "BIGINT");
    assert_eq!(added["JDBC_TYPE"], -5);
    assert_eq!(added["NUMERIC_PRECISION"], 19);
    // Every column of the datasource is listed, in the order SELECT * returns them.
    let star = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT * FROM wikipedia LIMIT 1", "resultFormat": "array", "header": true}),
    );
    let names: Vec<&Value> = cols.iter().map(|c| &c["COLUMN_NAME"]).collect();
    let header: Vec<&Value> = star.1[0].as_array().unwrap().iter().collect();
    assert_eq!(names, header);

    let routines = server.sql(
        "SELECT ROUTINE_NAME, IS_AGGREGATOR FROM INFORMATION_SCHEMA.ROUTINES \
         WHERE ROUTINE_NAME IN ('TIME_FLOOR', 'SUM') ORDER BY ROUTINE_NAME",
    );
    assert_eq!(
        routines,
        vec![
            json!({"ROUTINE_NAME": "SUM", "IS_AGGREGATOR": "YES"}),
            json!({"ROUTINE_NAME": "TIME_FLOOR", "IS_AGGREGATOR": "NO"}),
        ]
    );
    // Identifiers are case-sensitive, as in Druid.
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT * FROM information_schema.tables"}),
    );
    assert_eq!(code, 400, "{body}");
}

#[test]
fn sys_tables_report_segments_tasks_and_the_server() {
    let (_dir, server) = loaded();
    // A second, overwriting ingestion: its segment overshadows the first one.
    let st = server.run_task(&wikipedia_spec());
    assert_eq!(st["status"], "SUCCESS", "{st}");

    let segs = server.sql(
        "SELECT datasource, \"start\", \"end\", num_rows, is_published, is_active, \
         is_available, is_overshadowed, is_realtime, num_replicas, partition_num, dimensions \
         FROM sys.segments ORDER BY version",
    );
    assert_eq!(segs.len(), 2, "{segs:?}");
    for (s, old) in segs.iter().zip([true, false]) {
        assert_eq!(s["datasource"], "wikipedia");
        assert_eq!(s["start"], "2015-09-12T00:00:00.000Z");
        assert_eq!(s["end"], "2015-09-13T00:00:00.000Z");
        assert_eq!(s["num_rows"], 39244);
        assert_eq!(s["is_published"], 1);
        assert_eq!(s["is_realtime"], 0);
        assert_eq!(s["partition_num"], 0);
        assert_eq!(s["is_overshadowed"], i64::from(old), "{s}");
        assert_eq!(s["is_active"], i64::from(!old), "{s}");
        assert_eq!(s["is_available"], i64::from(!old), "{s}");
        assert_eq!(s["num_replicas"], i64::from(!old), "{s}");
        let dims: Vec<String> = serde_json::from_str(s["dimensions"].as_str().unwrap()).unwrap();
        assert!(dims.contains(&"channel".to_string()), "{dims:?}");
    }

    // The server serves exactly the active segment.
    let served = server.sql(
        "SELECT ss.segment_id FROM sys.server_segments ss \
         JOIN sys.segments s ON ss.segment_id = s.segment_id WHERE s.is_active = 1",
    );
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(server.sql("SELECT * FROM sys.server_segments").len(), 1);

    let tasks = server.sql(
        "SELECT task_id, type, datasource, status, runner_status, duration, error_msg \
         FROM sys.tasks ORDER BY created_time",
    );
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    for t in &tasks {
        assert_eq!(t["type"], "index_parallel");
        assert_eq!(t["datasource"], "wikipedia");
        assert_eq!(t["status"], "SUCCESS");
        assert_eq!(t["runner_status"], "NONE");
        assert!(t["duration"].as_i64().unwrap() >= 0, "{t}");
        assert_eq!(t["error_msg"], Value::Null);
    }
    assert_eq!(tasks[1]["task_id"], st["id"]);

    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<i64>()
        .unwrap();
    let servers = server.sql(
        "SELECT server_type, plaintext_port, tier, current_size, is_leader FROM sys.servers \
         ORDER BY server_type",
    );
    let types: Vec<&str> = servers
        .iter()
        .map(|s| s["server_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "broker",
            "coordinator",
            "historical",
            "indexer",
            "overlord",
            "router"
        ]
    );
    assert!(servers.iter().all(|s| s["plaintext_port"] == port));
    let historical = &servers[2];
    assert_eq!(historical["tier"], "_default_tier");
    let active_size =
        server.sql("SELECT \"size\" FROM sys.segments WHERE is_active = 1")[0]["size"].clone();
    assert_eq!(historical["current_size"], active_size);
    assert_eq!(servers[1]["is_leader"], 1);

    assert!(server.sql("SELECT * FROM sys.supervisors").is_empty());
    let props = server.sql(
        "SELECT \"value\" FROM sys.server_properties WHERE property = 'service.plaintextPort'",
    );
    assert_eq!(props, vec![json!({"value": port.to_string()})]);
}

#[test]
fn count_distinct_is_approximate_unless_the_context_says_otherwise() {
    let (_dir, server) = loaded();
    let exact = server.sql("SELECT COUNT(*) AS n FROM (SELECT DISTINCT \"user\" FROM wikipedia)")
        [0]["n"]
        .as_i64()
        .unwrap();
    let approx = server.sql(
        "SELECT COUNT(DISTINCT \"user\") AS a, APPROX_COUNT_DISTINCT(\"user\") AS b, \
         APPROX_COUNT_DISTINCT(added) AS c FROM wikipedia",
    );
    let (a, b) = (
        approx[0]["a"].as_i64().unwrap(),
        approx[0]["b"].as_i64().unwrap(),
    );
    assert_eq!(a, b, "COUNT(DISTINCT) is APPROX_COUNT_DISTINCT by default");
    let err = (a - exact).abs() as f64 / exact as f64;
    assert!(err < 0.05, "estimate {a} vs exact {exact}");
    assert!(approx[0]["c"].as_i64().unwrap() > 0);

    // With useApproximateCountDistinct = false (context or SET) the count is exact.
    for body in [
        json!({"query": "SELECT COUNT(DISTINCT \"user\") AS a FROM wikipedia",
               "context": {"useApproximateCountDistinct": false}}),
        json!({"query": "SET useApproximateCountDistinct = false; \
                         SELECT COUNT(DISTINCT \"user\") AS a FROM wikipedia"}),
    ] {
        let (code, rows) = server.post_json("/service/v2/sql", &body);
        assert_eq!(code, 200, "{rows}");
        assert_eq!(rows[0]["a"], exact, "{body}");
    }
    // Per group, with the other aggregates, and typed BIGINT.
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT channel, COUNT(DISTINCT \"user\") AS u FROM wikipedia \
                          GROUP BY channel ORDER BY u DESC LIMIT 1",
                "resultFormat": "array", "header": true, "sqlTypesHeader": true}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body[1], json!(["VARCHAR", "BIGINT"]));
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT 1", "context": {"useApproximateCountDistinct": "maybe"}}),
    );
    assert_eq!(code, 400, "{body}");
}

#[test]
fn an_unfiltered_count_is_answered_from_segment_row_counts() {
    let (_dir, server) = loaded();
    let plan = |sql: &str| {
        let rows = server.sql(&format!("EXPLAIN {sql}"));
        rows.iter()
            .filter(|r| r["plan_type"] == "physical_plan")
            .map(|r| r["plan"].as_str().unwrap().to_string())
            .collect::<String>()
    };
    // No filter: the exact row counts recorded at publish answer it; no file is scanned.
    let p = plan("SELECT COUNT(*) FROM wikipedia");
    assert!(!p.contains("DataSourceExec"), "{p}");
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c FROM wikipedia")[0]["c"],
        39244
    );
    // An equality on a string dimension is counted by the value indexes built with the
    // segments (Druid counts a filter's bitmap): no file is scanned either.
    let p = plan("SELECT COUNT(*) FROM wikipedia WHERE channel = '#en.wikipedia'");
    assert!(!p.contains("DataSourceExec"), "{p}");
    let c = server.sql("SELECT COUNT(*) AS c FROM wikipedia WHERE channel = '#en.wikipedia'");
    assert_eq!(c[0]["c"], 11549);
    // Another filter needs the rows: the scan stays, and the answer is right.
    let p = plan("SELECT COUNT(*) FROM wikipedia WHERE added > 100");
    assert!(p.contains("DataSourceExec"), "{p}");
    let c = server
        .sql("SELECT COUNT(*) AS c FROM wikipedia WHERE __time < TIMESTAMP '2015-09-12 12:00:00'");
    assert!(c[0]["c"].as_i64().unwrap() < 39244);
}

#[test]
fn explain_plan_for_answers_plan_resources_attributes() {
    let (_dir, server) = loaded();
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "EXPLAIN PLAN FOR SELECT channel, COUNT(*) FROM wikipedia \
                          WHERE added > ? GROUP BY channel",
                "parameters": [{"type": "BIGINT", "value": 10}]}),
    );
    assert_eq!(code, 200, "{body}");
    let row = &body[0];
    let plan: Value = serde_json::from_str(row["PLAN"].as_str().unwrap()).unwrap();
    assert_eq!(
        plan[0]["signature"],
        json!([{"name": "channel", "type": "STRING"}, {"name": "EXPR$1", "type": "LONG"}])
    );
    assert_eq!(plan[0]["columnMappings"][1]["outputColumn"], "EXPR$1");
    let text = plan[0]["query"]["plan"].as_str().unwrap();
    assert!(
        text.contains("wikipedia") && text.contains("Aggregate"),
        "{text}"
    );
    let resources: Value = serde_json::from_str(row["RESOURCES"].as_str().unwrap()).unwrap();
    assert_eq!(
        resources,
        json!([{"name": "wikipedia", "type": "DATASOURCE"}])
    );
    let attributes: Value = serde_json::from_str(row["ATTRIBUTES"].as_str().unwrap()).unwrap();
    assert_eq!(attributes, json!({"statementType": "SELECT"}));

    // A bad query under EXPLAIN is still a planning error naming the column.
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "EXPLAIN PLAN FOR SELECT nope FROM wikipedia"}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"].as_str().unwrap().contains("nope"),
        "{body}"
    );
}

#[test]
fn multi_value_dimensions_group_and_filter_like_druid() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let rows = [
        r#"{"ts": 1442016000000, "page": "p1", "tags": ["a", "b"]}"#,
        r#"{"ts": 1442016001000, "page": "p2", "tags": ["b", "c"]}"#,
        r#"{"ts": 1442016002000, "page": "p3", "tags": []}"#,
        r#"{"ts": 1442016003000, "page": "p4", "tags": "a"}"#,
        r#"{"ts": 1442016004000, "page": "p5"}"#,
    ]
    .join("\n");
    let mut spec = crate::common::inline_spec("mv", &rows, &[], false);
    spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] = json!(["page", "tags"]);
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");

    // GROUP BY unnests: a row counts once per value; no values group as null.
    assert_eq!(
        server.sql("SELECT tags, COUNT(*) AS c FROM mv GROUP BY tags ORDER BY tags NULLS FIRST"),
        vec![
            json!({"tags": null, "c": 2}),
            json!({"tags": "a", "c": 2}),
            json!({"tags": "b", "c": 2}),
            json!({"tags": "c", "c": 1}),
        ]
    );
    // Filters match any value and keep whole rows.
    assert_eq!(
        server.sql("SELECT page, tags FROM mv WHERE tags = 'b' ORDER BY page"),
        vec![
            json!({"page": "p1", "tags": "[\"a\",\"b\"]"}),
            json!({"page": "p2", "tags": "[\"b\",\"c\"]"}),
        ]
    );
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c FROM mv WHERE tags IN ('c', 'x') OR tags IS NULL"),
        vec![json!({"c": 3})]
    );
    assert_eq!(
        server.sql("SELECT tags, COUNT(*) AS c FROM mv WHERE tags = 'a' GROUP BY 1 ORDER BY 1"),
        vec![json!({"tags": "a", "c": 2}), json!({"tags": "b", "c": 1})]
    );
    // A scalar expression over the column maps each value; MV_* functions take the whole row.
    assert_eq!(
        server.sql(
            "SELECT CONCAT(UPPER(tags), '-x') AS u, COUNT(*) AS c FROM mv GROUP BY 1 \
             ORDER BY 1 NULLS FIRST"
        ),
        vec![
            json!({"u": null, "c": 2}),
            json!({"u": "A-x", "c": 2}),
            json!({"u": "B-x", "c": 2}),
            json!({"u": "C-x", "c": 1}),
        ]
    );
    assert_eq!(
        server.sql(
            "SELECT page, UPPER(tags) AS u, MV_LENGTH(tags) AS l FROM mv WHERE tags = 'b' \
             GROUP BY 1, 2, 3 ORDER BY 1, 2"
        ),
        vec![
            json!({"page": "p1", "u": "A", "l": 2}),
            json!({"page": "p1", "u": "B", "l": 2}),
            json!({"page": "p2", "u": "B", "l": 2}),
            json!({"page": "p2", "u": "C", "l": 2}),
        ]
    );
}

#[test]
fn multi_value_expressions_map_each_value_like_druid() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let rows = [
        r#"{"ts": 1442016000000, "page": "p1", "tags": ["a", "b"], "more": ["u", "v"]}"#,
        r#"{"ts": 1442016001000, "page": "p2", "tags": ["b", "c"], "more": ["c", "w"]}"#,
        r#"{"ts": 1442016002000, "page": "p3", "tags": []}"#,
        r#"{"ts": 1442016003000, "page": "p4", "tags": "a", "more": []}"#,
        r#"{"ts": 1442016004000, "page": "p5", "more": "u"}"#,
    ]
    .join("\n");
    let mut spec = crate::common::inline_spec("mv2", &rows, &[], false);
    spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] = json!(["page", "tags", "more"]);
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");

    // Two multi-value columns: every combination of their values (Druid's cartesian_map); a
    // row without values is one null value, and CONCAT with a null is null.
    assert_eq!(
        server.sql(
            "SELECT CONCAT(tags, more) AS k, COUNT(*) AS c FROM mv2 GROUP BY 1 \
             ORDER BY 1 NULLS FIRST"
        ),
        [
            json!({"k": null, "c": 3}),
            json!({"k": "au", "c": 1}),
            json!({"k": "av", "c": 1}),
            json!({"k": "bc", "c": 1}),
            json!({"k": "bu", "c": 1}),
            json!({"k": "bv", "c": 1}),
            json!({"k": "bw", "c": 1}),
            json!({"k": "cc", "c": 1}),
            json!({"k": "cw", "c": 1}),
        ]
    );
    // SELECT DISTINCT groups by the values.
    assert_eq!(
        server.sql("SELECT DISTINCT UPPER(tags) AS u FROM mv2 ORDER BY u NULLS FIRST"),
        [
            json!({"u": null}),
            json!({"u": "A"}),
            json!({"u": "B"}),
            json!({"u": "C"}),
        ]
    );
    // Computed from the group's value.
    assert_eq!(
        server.sql(
            "SELECT UPPER(tags) AS u, COUNT(*) AS c FROM mv2 GROUP BY tags \
             ORDER BY tags NULLS FIRST"
        ),
        [
            json!({"u": null, "c": 2}),
            json!({"u": "A", "c": 2}),
            json!({"u": "B", "c": 2}),
            json!({"u": "C", "c": 1}),
        ]
    );
    // Outside GROUP BY: each value mapped, rendered as Druid renders a multi-value VARCHAR;
    // a row without values is mapped as one null value.
    assert_eq!(
        server.sql(
            "SELECT page, UPPER(tags) AS u, COALESCE(tags, 'none') AS c, CONCAT(tags, '-', page) \
             AS k FROM mv2 ORDER BY page"
        ),
        [
            json!({"page": "p1", "u": "[\"A\",\"B\"]", "c": "[\"a\",\"b\"]",
                   "k": "[\"a-p1\",\"b-p1\"]"}),
            json!({"page": "p2", "u": "[\"B\",\"C\"]", "c": "[\"b\",\"c\"]",
                   "k": "[\"b-p2\",\"c-p2\"]"}),
            json!({"page": "p3", "u": null, "c": "none", "k": null}),
            json!({"page": "p4", "u": "A", "c": "a", "k": "a-p4"}),
            json!({"page": "p5", "u": null, "c": "none", "k": null}),
        ]
    );
    // Filters: a row matches when any value (any combination) does, with the time filter.
    let pages = |sql: &str| -> Vec<String> {
        server
            .sql(sql)
            .into_iter()
            .map(|r| r["page"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        pages(
            "SELECT page FROM mv2 WHERE TIME_IN_INTERVAL(__time, '2015-09-12/2015-09-13') \
             AND UPPER(tags) = 'A' ORDER BY page"
        ),
        ["p1", "p4"]
    );
    assert_eq!(
        pages("SELECT page FROM mv2 WHERE tags LIKE 'c%' OR tags = more ORDER BY page"),
        ["p2"]
    );
    assert_eq!(
        pages("SELECT page FROM mv2 WHERE UPPER(tags) <> 'A' ORDER BY page"),
        ["p2"]
    );
    // A per-value result that is not a string: Druid cannot return it either.
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT tags = 'a' AS b FROM mv2"}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("is applied to each value of a multi-value column"),
        "{body}"
    );
    // Distinct counts count each value (a, b, c; u, v, c, w), approximate (Druid's default:
    // the cardinality aggregator) or exact, and so do the sketch aggregates.
    assert_eq!(
        server.sql(
            "SELECT COUNT(DISTINCT tags) AS a, APPROX_COUNT_DISTINCT_DS_HLL(more) AS h, \
             APPROX_COUNT_DISTINCT_DS_THETA(tags) AS t FROM mv2"
        ),
        [json!({"a": 3, "h": 4, "t": 3})]
    );
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({
            "query": "SELECT page, COUNT(DISTINCT tags) AS a, COUNT(DISTINCT more) AS m \
                      FROM mv2 GROUP BY ROLLUP(page) ORDER BY page NULLS FIRST LIMIT 2",
            "context": {"useApproximateCountDistinct": false},
        }),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!([{"page": null, "a": 3, "m": 4}, {"page": "p1", "a": 2, "m": 2}])
    );
    // Other aggregates would see whole rows, which Druid never does: a plan error naming the
    // call.
    for (sql, call) in [
        ("SELECT MAX(tags) AS m FROM mv2", "MAX(tags)"),
        ("SELECT EARLIEST(tags) AS m FROM mv2", "FIRST_VALUE(tags)"),
        ("SELECT ARRAY_AGG(tags) AS m FROM mv2", "ARRAY_AGG(tags)"),
    ] {
        let (code, body) = server.post_json("/druid/v2/sql", &json!({"query": sql}));
        assert_eq!(code, 400, "{sql}: {body}");
        assert!(
            body["errorMessage"]
                .as_str()
                .unwrap()
                .contains(&format!("{call}: aggregating a multi-value column")),
            "{sql}: {body}"
        );
    }
}

#[test]
fn equality_filters_through_value_indexes_match_full_scans() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // Three daily segments; `p7` only on the first two days (`q` replaces it on the third).
    let mut rows = String::new();
    for day in 0..3i64 {
        for i in 0..3000i64 {
            let page = if day == 2 && i % 1000 == 7 {
                "q".to_string()
            } else {
                format!("p{}", i % 1000)
            };
            rows.push_str(&format!(
                "{{\"ts\": {}, \"page\": \"{page}\"}}\n",
                1_442_016_000_000 + day * 86_400_000 + i * 1000
            ));
        }
    }
    let st = server.run_task(&crate::common::inline_spec("ix", &rows, &[], false));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let count = |sql: &str| server.sql(sql)[0]["c"].as_i64().unwrap();
    for (value, want) in [("p7", 6), ("q", 3), ("p999", 9), ("p1000", 0)] {
        let indexed = count(&format!(
            "SELECT COUNT(*) AS c FROM ix WHERE page = '{value}'"
        ));
        // `LIKE` without wildcards is the same predicate, but not an equality the index serves.
        let scanned = count(&format!(
            "SELECT COUNT(*) AS c FROM ix WHERE page LIKE '{value}'"
        ));
        assert_eq!((indexed, scanned), (want, want), "{value}");
        // Twice: the second query reads the index built by the first.
        let again = count(&format!(
            "SELECT COUNT(*) AS c FROM ix WHERE '{value}' = page"
        ));
        assert_eq!(again, want, "{value} again");
    }
    // Whole rows come back, in time order, combined with a time filter and another equality.
    let got = server.sql(
        "SELECT __time, page FROM ix WHERE page = 'p7' AND __time >= TIMESTAMP '2015-09-13' \
         ORDER BY __time",
    );
    assert_eq!(
        got,
        vec![
            json!({"__time": "2015-09-13T00:00:07.000Z", "page": "p7"}),
            json!({"__time": "2015-09-13T00:16:47.000Z", "page": "p7"}),
            json!({"__time": "2015-09-13T00:33:27.000Z", "page": "p7"}),
        ]
    );
    assert_eq!(
        count("SELECT COUNT(*) AS c FROM ix WHERE page = 'p7' AND page = 'p8'"),
        0
    );
}

#[test]
fn array_parameters_bind_as_typed_arrays() {
    let (_dir, server) = loaded();
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({
            "query": "SELECT COUNT(*) AS c, ARRAY_LENGTH(?) AS n FROM wikipedia \
                      WHERE SCALAR_IN_ARRAY(channel, ?)",
            "parameters": [
                {"type": "ARRAY", "value": [1.5, null, 3]},
                {"type": "ARRAY", "value": ["#en.wikipedia", "#de.wikipedia", null]}
            ]
        }),
    );
    assert_eq!(code, 200, "{body}");
    let want = server.sql(
        "SELECT COUNT(*) AS c FROM wikipedia WHERE channel IN ('#en.wikipedia', '#de.wikipedia')",
    )[0]["c"]
        .clone();
    assert_eq!(body, json!([{"c": want, "n": 3}]));
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT ARRAY_LENGTH(?)",
                "parameters": [{"type": "ARRAY", "value": ["a", 1]}]}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("parameters[0]"),
        "{body}"
    );
}
