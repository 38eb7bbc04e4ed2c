//! SQL-based ingestion (`INSERT` / `REPLACE ... EXTERN`) and the async statements API against
//! the real binary.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, examples_dir};

const STATEMENTS: &str = "/druid/v2/sql/statements";

/// The Wikipedia sample as an `EXTERN` source (Druid's SQL-ingestion tutorial shape).
fn wikipedia_extern() -> String {
    let file = examples_dir().join("wikiticker-2015-09-12-sampled.json.gz");
    format!(
        r#"TABLE(EXTERN('{{"type":"local","files":["{}"]}}', '{{"type":"json"}}', '[{{"name":"time","type":"string"}},{{"name":"channel","type":"string"}},{{"name":"page","type":"string"}},{{"name":"user","type":"string"}},{{"name":"countryName","type":"string"}},{{"name":"added","type":"long"}},{{"name":"deleted","type":"long"}},{{"name":"delta","type":"long"}}]'))"#,
        file.display()
    )
}

impl Server {
    /// Submits SQL to `/v2/sql/task`, expecting 200; returns the task id.
    fn sql_task(&self, sql: &str) -> String {
        let (code, body) = self.post_json("/druid/v2/sql/task", &json!({ "query": sql }));
        assert_eq!(code, 200, "{sql}: {body}");
        assert_eq!(body["state"], "RUNNING");
        body["taskId"].as_str().unwrap().to_string()
    }

    /// Runs SQL-based ingestion to the end, expecting SUCCESS.
    fn ingest_sql(&self, sql: &str) -> String {
        let id = self.sql_task(sql);
        let st = self.wait_task(&id);
        assert_eq!(st["status"], "SUCCESS", "{sql}: {st}");
        id
    }

    /// Submits an async statement, expecting 200 and ACCEPTED; returns the query id.
    fn statement(&self, sql: &str, context: Value) -> String {
        let mut ctx = context;
        ctx["executionMode"] = json!("ASYNC");
        let (code, body) = self.post_json(STATEMENTS, &json!({ "query": sql, "context": ctx }));
        assert_eq!(code, 200, "{sql}: {body}");
        assert_eq!(body["state"], "ACCEPTED", "{body}");
        assert_eq!(body["durationMs"], -1);
        body["queryId"].as_str().unwrap().to_string()
    }

    /// Polls a statement until it leaves ACCEPTED/RUNNING; returns its last status.
    fn wait_statement(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let (code, st) = self.get_json(&format!("{STATEMENTS}/{id}"));
            assert_eq!(code, 200, "{st}");
            if st["state"] != "ACCEPTED" && st["state"] != "RUNNING" {
                return st;
            }
            assert!(Instant::now() < deadline, "statement {id} did not finish");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn results_text(&self, id: &str, query: &str) -> (u16, String) {
        let r = self.get(&format!("{STATEMENTS}/{id}/results{query}"));
        (r.status().as_u16(), r.text().unwrap())
    }
}

#[test]
fn replace_from_extern_then_insert_overwrite_and_rollup() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // The tutorial: REPLACE the Wikipedia sample from EXTERN, PARTITIONED BY DAY.
    let id = server.ingest_sql(&format!(
        r#"REPLACE INTO wikipedia OVERWRITE ALL
SELECT TIME_PARSE("time") AS __time, channel, page, "user", countryName, added, deleted, delta
FROM {}
PARTITIONED BY DAY"#,
        wikipedia_extern()
    ));
    assert_eq!(server.count("wikipedia"), Some(39_244));
    let rows = server.sql(
        "SELECT channel, SUM(added) AS a FROM wikipedia GROUP BY channel ORDER BY a DESC LIMIT 1",
    );
    assert_eq!(rows[0]["channel"], "#en.wikipedia");
    assert_eq!(rows[0]["a"], 3_045_299);
    // One DAY segment; the report counts the rows written.
    let segs = server.sql("SELECT \"start\", \"end\", num_rows FROM sys.segments WHERE datasource = 'wikipedia' AND is_active = 1");
    assert_eq!(segs.len(), 1, "{segs:?}");
    assert_eq!(segs[0]["start"], "2015-09-12T00:00:00.000Z");
    assert_eq!(segs[0]["end"], "2015-09-13T00:00:00.000Z");
    let (_, report) = server.get_json(&format!("/druid/indexer/v1/task/{id}/reports"));
    let status = &report["multiStageQuery"]["payload"]["status"];
    assert_eq!(status["status"], "SUCCESS", "{report}");
    assert_eq!(status["segmentLoadWaiterStatus"]["rowsWritten"], 39_244);
    assert_eq!(status["segmentLoadWaiterStatus"]["totalSegments"], 1);
    let tasks = server.sql(&format!(
        "SELECT type FROM sys.tasks WHERE task_id = '{id}'"
    ));
    assert_eq!(tasks[0]["type"], "query_controller");

    // INSERT appends (inline source, named-argument EXTERN with EXTEND).
    server.ingest_sql(
        r#"INSERT INTO wikipedia
SELECT TIME_PARSE(ts) AS __time, page, added
FROM TABLE(EXTERN(inputSource => '{"type":"inline","data":"{\"ts\":\"2015-09-12T10:00:00Z\",\"page\":\"P1\",\"added\":5}\n{\"ts\":\"2015-09-13T10:00:00Z\",\"page\":\"P2\",\"added\":7}"}', inputFormat => '{"type":"json"}'))
  EXTEND (ts VARCHAR, page VARCHAR, added BIGINT)
PARTITIONED BY DAY"#,
    );
    assert_eq!(server.count("wikipedia"), Some(39_246));
    // REPLACE one day: only 2015-09-13 changes; the 39,245 rows of the 12th stay.
    server.ingest_sql(
        r#"REPLACE INTO wikipedia
OVERWRITE WHERE __time >= TIMESTAMP '2015-09-13' AND __time < TIMESTAMP '2015-09-14'
SELECT TIMESTAMP '2015-09-13 05:00:00' AS __time, 'P3' AS page, 1 AS added
FROM (VALUES (1), (2), (3)) AS t(x)
PARTITIONED BY DAY"#,
    );
    assert_eq!(server.count("wikipedia"), Some(39_248));
    let day13 = server.sql(
        "SELECT page, COUNT(*) AS c FROM wikipedia WHERE __time >= TIMESTAMP '2015-09-13' GROUP BY page",
    );
    assert_eq!(day13, vec![json!({"page": "P3", "c": 3})]);

    // A row outside OVERWRITE WHERE fails the statement and changes nothing.
    let id = server.sql_task(
        r#"REPLACE INTO wikipedia
OVERWRITE WHERE __time >= TIMESTAMP '2015-09-13' AND __time < TIMESTAMP '2015-09-14'
SELECT TIMESTAMP '2015-09-20 00:00:00' AS __time, 'X' AS page
PARTITIONED BY DAY"#,
    );
    let st = server.wait_task(&id);
    assert_eq!(st["status"], "FAILED");
    assert!(
        st["errorMsg"]
            .as_str()
            .unwrap()
            .contains("InsertTimeOutOfBounds"),
        "{st}"
    );
    assert_eq!(server.count("wikipedia"), Some(39_248));

    // Rollup with GROUP BY: hourly counts per channel, CLUSTERED BY channel.
    server.ingest_sql(
        r#"INSERT INTO wiki_hourly
SELECT TIME_FLOOR(__time, 'PT1H') AS __time, channel, COUNT(*) AS cnt, SUM(added) AS added
FROM wikipedia
WHERE __time < TIMESTAMP '2015-09-13'
GROUP BY 1, 2
PARTITIONED BY DAY
CLUSTERED BY channel"#,
    );
    let r = server.sql("SELECT SUM(cnt) AS n, SUM(added) AS a FROM wiki_hourly");
    let base = server.sql(
        "SELECT COUNT(*) AS n, SUM(added) AS a FROM wikipedia WHERE __time < TIMESTAMP '2015-09-13'",
    );
    assert_eq!(r, base);
    let cols = server.sql(
        "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'wiki_hourly' ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(cols.len(), 4, "{cols:?}");
    let (_, meta) =
        server.get_json("/druid/coordinator/v1/metadata/datasources/wiki_hourly/segments?full");
    let seg = &meta[0];
    assert_eq!(seg["metrics"], "cnt,added", "{seg}");
    assert_eq!(seg["dimensions"], "channel", "{seg}");
}

#[test]
fn ingestion_statements_are_validated_before_they_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let bad = |sql: &str, needle: &str| {
        let (code, body) = server.post_json("/druid/v2/sql/task", &json!({ "query": sql }));
        assert_eq!(code, 400, "{sql}: {body}");
        assert_eq!(body["error"], "druidException", "{body}");
        assert_eq!(body["errorCode"], "invalidInput", "{body}");
        let msg = body["errorMessage"].as_str().unwrap();
        assert!(msg.contains(needle), "{sql}: {msg}");
    };
    bad(
        "INSERT INTO t SELECT TIMESTAMP '2000-01-01' AS __time, 1 AS x",
        "PARTITIONED BY",
    );
    bad("INSERT INTO t SELECT 1 AS x PARTITIONED BY DAY", "__time");
    bad(
        "REPLACE INTO t SELECT TIMESTAMP '2000-01-01' AS __time PARTITIONED BY DAY",
        "OVERWRITE",
    );
    bad(
        "INSERT INTO t SELECT TIMESTAMP '2000-01-01' AS __time, 1 AS x PARTITIONED BY DAY CLUSTERED BY nope",
        "nope",
    );
    bad(
        r#"INSERT INTO t SELECT * FROM TABLE(EXTERN('{"type":"local","files":["/x"]}', '{"type":"json"}', '[{"name":"a","type":"wat"}]')) PARTITIONED BY DAY"#,
        "wat",
    );
    // The synchronous endpoint does not run ingestion.
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "INSERT INTO t SELECT TIMESTAMP '2000-01-01' AS __time PARTITIONED BY DAY"}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("/druid/v2/sql/task"),
        "{body}"
    );
    // Nothing was created.
    assert!(server.sql("SELECT * FROM sys.tasks").is_empty());
}

#[test]
fn async_select_pages_formats_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (code, enabled) = server.get_json("/druid/v2/sql/statements/enabled");
    assert_eq!((code, enabled), (200, json!({"enabled": true})));
    let (code, enabled) = server.get_json("/druid/v2/sql/task/enabled");
    assert_eq!((code, enabled), (200, json!({"enabled": true})));

    // executionMode is required; resultFormat may not be in the context.
    let (code, body) = server.post_json(STATEMENTS, &json!({"query": "SELECT 1"}));
    assert_eq!(code, 400);
    assert_eq!(
        body["errorMessage"],
        "Execution mode is not provided to the sql statement api. Please set [executionMode] to [ASYNC] in the query context"
    );
    assert_eq!(body["errorCode"], "invalidInput");
    assert_eq!(body["persona"], "USER");
    assert_eq!(body["category"], "INVALID_INPUT");
    assert!(body["host"].is_string());
    let (code, body) = server.post_json(
        STATEMENTS,
        &json!({"query": "SELECT 1", "context": {"executionMode": "async", "resultFormat": "csv"}}),
    );
    assert_eq!(code, 400);
    assert_eq!(
        body["errorMessage"],
        "Query context parameter [resultFormat] is not allowed"
    );
    let (code, body) = server.post_json(
        STATEMENTS,
        &json!({"query": "SELEC 1", "context": {"executionMode": "ASYNC"}}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("line [1], column [1]"),
        "{body}"
    );

    // A 1M-row SELECT to durable storage in pages of 100,000 rows (the console's 'async' spelling).
    let id = server.statement(
        "SELECT \"value\" AS n, 'r' || CAST(\"value\" AS VARCHAR) AS s FROM generate_series(1, 1000000) ORDER BY n",
        json!({"executionMode": "async", "selectDestination": "durableStorage", "rowsPerPage": 100000}),
    );
    let st = server.wait_statement(&id);
    assert_eq!(st["state"], "SUCCESS", "{st}");
    assert!(st["durationMs"].as_i64().unwrap() >= 0);
    assert_eq!(
        st["schema"][0],
        json!({"name": "n", "type": "BIGINT", "nativeType": "LONG"})
    );
    let result = &st["result"];
    assert_eq!(result["numTotalRows"], 1_000_000);
    assert_eq!(result["dataSource"], "__query_select");
    let pages = result["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 10);
    assert!(
        pages
            .iter()
            .all(|p| p["numRows"] == 100_000 && p["sizeInBytes"].as_u64().unwrap() > 0)
    );
    assert_eq!(result["sampleRecords"][0], json!([1, "r1"]));
    // Page 3 holds rows 300,001..400,000, in order.
    let (code, text) = server.results_text(&id, "?page=3&resultFormat=arrayLines");
    assert_eq!(code, 200);
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 100_000);
    assert_eq!(lines[0], "[300001,\"r300001\"]");
    assert_eq!(lines[99_999], "[400000,\"r400000\"]");
    // All pages at once, in order.
    let (code, text) = server.results_text(&id, "?resultFormat=csv");
    assert_eq!(code, 200);
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1_000_000);
    assert_eq!(lines[999_999], "1000000,r1000000");
    // Page errors.
    let (code, text) = server.results_text(&id, "?page=-1");
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("Page cannot be negative"));
    let (code, _) = server.results_text(&id, "?page=10");
    assert_eq!(code, 400);
    // Task-report destination, default object format, filename; the id follows sqlQueryId.
    let id = server.statement(
        "SET sqlTimeZone = 'America/Los_Angeles'; SELECT 1 AS a, 'x' AS b, TIMESTAMP '2020-01-02 03:04:05' AS t",
        json!({"sqlQueryId": "my-query"}),
    );
    assert_eq!(id, "query-my-query");
    assert_eq!(server.wait_statement(&id)["state"], "SUCCESS");
    let r = server.get(&format!("{STATEMENTS}/{id}/results?filename=out.json"));
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        r.headers()["content-disposition"].to_str().unwrap(),
        "attachment; filename=\"out.json\""
    );
    assert_eq!(
        r.text().unwrap(),
        // Timestamp literals are read in sqlTimeZone and printed in it.
        "[{\"a\":1,\"b\":\"x\",\"t\":\"2020-01-02T03:04:05.000-08:00\"}]\n"
    );
    let (code, st) = server.get_json(&format!("{STATEMENTS}/{id}?detail=true"));
    assert_eq!(code, 200);
    assert!(
        st["stages"].is_array() && st["counters"].is_object() && st["warnings"].is_array(),
        "{st}"
    );
    // A finished statement: DELETE is a no-op 200.
    let (code, _) = server.delete(&format!("{STATEMENTS}/{id}"));
    assert_eq!(code, 200);
    // Unknown ids: 404 with Druid's message.
    let (code, body) = server.get_json(&format!("{STATEMENTS}/query-nope"));
    assert_eq!(code, 404);
    assert_eq!(body["errorCode"], "notFound");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("Query [query-nope] was not found.")
    );
    assert_eq!(server.delete(&format!("{STATEMENTS}/query-nope")).0, 404);
    assert_eq!(server.results_text("query-nope", "").0, 404);
    // A failing statement: FAILED with errorDetails; its results are 404. (A cast of text
    // that is no number is NULL, as in Druid; malformed JSON input fails while running.)
    let id = server.statement("SELECT PARSE_JSON('{') AS n", json!({}));
    let st = server.wait_statement(&id);
    assert_eq!(st["state"], "FAILED", "{st}");
    assert_eq!(st["errorDetails"]["error"], "druidException");
    assert!(st["errorDetails"]["errorMessage"].is_string());
    let (code, text) = server.results_text(&id, "");
    assert_eq!(code, 404, "{text}");
    assert!(text.contains("failed. Check the status api"), "{text}");
}

#[test]
fn cancelling_and_restarting_statements() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // A finished statement's results survive a restart.
    let done = server.statement(
        "SELECT \"value\" AS n FROM generate_series(1, 5) ORDER BY n",
        json!({}),
    );
    assert_eq!(server.wait_statement(&done)["state"], "SUCCESS");
    // A long statement is cancelled: 202, then FAILED with the cancel error; results 404.
    // Minutes of work in small batches.
    let slow = "SELECT SUM(\"value\" % 7) AS s FROM generate_series(1, 100000000000)";
    let id = server.statement(slow, json!({}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.get_json(&format!("{STATEMENTS}/{id}")).1["state"] != "RUNNING" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    // It keeps the query threads busy until cancelled (0.3 CPU s of work; wall time allowed
    // up to 10 s for a machine busy with other tests).
    let before = crate::sql_api::cpu_seconds(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while crate::sql_api::cpu_seconds(&server) - before <= 0.3 {
        assert!(Instant::now() < deadline, "the statement was not working");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, _) = server.delete(&format!("{STATEMENTS}/{id}"));
    assert_eq!(code, 202);
    let st = server.wait_statement(&id);
    assert_eq!(st["state"], "FAILED");
    assert_eq!(st["errorDetails"]["errorCode"], "Canceled", "{st}");
    assert_eq!(server.results_text(&id, "").0, 404);
    // The work really stopped: next to no CPU afterwards.
    std::thread::sleep(Duration::from_millis(300));
    let before = crate::sql_api::cpu_seconds(&server);
    std::thread::sleep(Duration::from_secs(1));
    let used = crate::sql_api::cpu_seconds(&server) - before;
    assert!(
        used < 0.3,
        "server used {used:.2} CPU s in 1 s after the cancel"
    );
    // Restart in the middle of a statement: it is FAILED afterwards, never left running.
    let id = server.statement(slow, json!({}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.get_json(&format!("{STATEMENTS}/{id}")).1["state"] != "RUNNING" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    server.kill9();
    let server = Server::start(dir.path());
    let st = server.wait_statement(&id);
    assert_eq!(st["state"], "FAILED", "{st}");
    let (code, text) = server.results_text(&done, "?resultFormat=arrayLines");
    assert_eq!(code, 200);
    assert_eq!(text, "[1]\n[2]\n[3]\n[4]\n[5]\n\n");
}

/// Files under the segment cache (what queries have loaded).
fn cached_files(data_dir: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path, n: &mut usize) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, n);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(&data_dir.join("segment-cache"), &mut n);
    n
}

#[test]
fn statements_read_segments_straight_from_deep_storage() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ingest_sql(
        r#"REPLACE INTO deep OVERWRITE ALL
SELECT MILLIS_TO_TIMESTAMP(1577836800000 + "value" * 3600000) AS __time, "value" AS x
FROM generate_series(0, 71)
PARTITIONED BY DAY"#,
    );
    assert_eq!(server.count("deep"), Some(72));
    server.terminate();
    // After a restart with an empty segment cache, no segment of `deep` is loaded.
    std::fs::remove_dir_all(dir.path().join("segment-cache")).unwrap();
    let server = Server::start(dir.path());
    let id = server.statement("SELECT COUNT(*) AS c, SUM(x) AS s FROM deep", json!({}));
    assert_eq!(server.wait_statement(&id)["state"], "SUCCESS");
    let (_, text) = server.results_text(&id, "?resultFormat=array");
    assert_eq!(text.trim_end(), "[[72,2556]]");
    assert_eq!(cached_files(dir.path()), 0, "the statement loaded segments");
    // A synchronous query reads deep storage only when asked...
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT COUNT(*) AS c FROM deep", "context": {"readFromDeepStorage": true}}),
    );
    assert_eq!((code, body), (200, json!([{"c": 72}])));
    assert_eq!(cached_files(dir.path()), 0);
    // ...and otherwise loads the segments into the cache first, as a historical does.
    assert_eq!(server.count("deep"), Some(72));
    assert_eq!(cached_files(dir.path()), 3);
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT 1", "context": {"readFromDeepStorage": "maybe"}}),
    );
    assert_eq!(code, 400, "{body}");
}

/// The S3 test server's endpoint (`scripts/test.sh` starts it), or `None` when the run opted
/// out with `DOLMEN_SKIP_S3_TESTS=1`.
fn s3_endpoint() -> Option<String> {
    match std::env::var("DOLMEN_TEST_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ if std::env::var("DOLMEN_SKIP_S3_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_S3_ENDPOINT is not set: run scripts/test.sh (it starts the S3 test server), or set DOLMEN_SKIP_S3_TESTS=1"
        ),
    }
}

/// Creates a bucket of its own for one test on the S3 test server; returns its name.
fn new_bucket(endpoint: &str, what: &str) -> String {
    let bucket = format!(
        "dolmen-{what}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let r = reqwest::blocking::Client::new()
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "create bucket: {}", r.status());
    bucket
}

/// Keys of the objects under `prefix` in `bucket` (ListObjectsV2, first 1000).
fn object_keys(endpoint: &str, bucket: &str, prefix: &str) -> Vec<String> {
    let listing = reqwest::blocking::Client::new()
        .get(format!("{endpoint}/{bucket}?list-type=2&prefix={prefix}"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    listing
        .split("<Key>")
        .skip(1)
        .filter_map(|s| s.split("</Key>").next())
        .map(str::to_string)
        .collect()
}

/// Deep storage in an S3-compatible bucket: publishing uploads the segment files under the base
/// key (nothing kept in a local deep-storage directory), queries load them into the segment
/// cache, statements and `readFromDeepStorage` queries read them in place with ranged GETs, and
/// a kill task deletes the objects of unused segments.
#[test]
fn s3_deep_storage_publishes_serves_reads_in_place_and_kills() {
    let Some(endpoint) = s3_endpoint() else {
        return;
    };
    let bucket = new_bucket(&endpoint, "deep");
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("runtime.properties");
    std::fs::write(
        &props,
        format!(
            "service.s3.endpoint={endpoint}\nservice.s3.region=us-east-1\nservice.s3.accessKey=test\nservice.s3.secretKey=test\nservice.storage.type=s3\nservice.storage.bucket={bucket}\nservice.storage.baseKey=druid/segments\n"
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let args = ["--config", props.to_str().unwrap()];
    let server = Server::start_with_args(&data, &args);
    server.ingest_sql(
        r#"REPLACE INTO deep OVERWRITE ALL
SELECT MILLIS_TO_TIMESTAMP(1577836800000 + "value" * 3600000) AS __time, "value" AS x,
  'v' || CAST("value" % 5 AS VARCHAR) AS s
FROM generate_series(0, 71)
PARTITIONED BY DAY"#,
    );
    let (_, segs) =
        server.get_json("/druid/coordinator/v1/metadata/datasources/deep/segments?full");
    let segs = segs.as_array().unwrap().clone();
    assert_eq!(segs.len(), 3);
    for s in &segs {
        assert_eq!(s["loadSpec"]["type"], "s3", "{s}");
        assert_eq!(s["loadSpec"]["bucket"], bucket.as_str());
        assert!(
            s["loadSpec"]["key"]
                .as_str()
                .unwrap()
                .starts_with("druid/segments/deep/"),
            "{s}"
        );
    }
    let mut keys = object_keys(&endpoint, &bucket, "druid/segments/");
    keys.sort();
    // Each segment file and its value index sidecar.
    let mut expected: Vec<String> = segs
        .iter()
        .map(|s| s["loadSpec"]["key"].as_str().unwrap().to_string())
        .flat_map(|k| [format!("{k}.indexes.arrow"), k])
        .collect();
    expected.sort();
    assert_eq!(keys, expected);
    assert!(crate::common::deep_storage_files(&data).is_empty());
    // A plain query loads the segments from the bucket into the segment cache.
    assert_eq!(server.count("deep"), Some(72));
    assert_eq!(cached_files(&data), 3);
    server.terminate();

    // Restarted with an empty cache: a statement reads the objects in place.
    std::fs::remove_dir_all(data.join("segment-cache")).unwrap();
    let server = Server::start_with_args(&data, &args);
    let id = server.statement(
        "SELECT COUNT(*) AS c, SUM(x) AS s FROM deep WHERE __time >= TIMESTAMP '2020-01-02 00:00:00'",
        json!({}),
    );
    let st = server.wait_statement(&id);
    assert_eq!(st["state"], "SUCCESS", "{st}");
    let (_, text) = server.results_text(&id, "?resultFormat=array");
    // Days 2 and 3: values 24..=71.
    assert_eq!(text.trim_end(), "[[48,2280]]");
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT x FROM deep ORDER BY __time DESC LIMIT 2",
                "context": {"readFromDeepStorage": true}}),
    );
    assert_eq!((code, body), (200, json!([{"x": 71}, {"x": 70}])));
    // An equality filter read in place uses the value indexes stored beside the objects
    // (x % 5 = 3: 3, 8, ..., 68): loaded from the sidecars, nothing built.
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT COUNT(*) AS c, SUM(x) AS t FROM deep WHERE s = 'v3'",
                "context": {"readFromDeepStorage": true}}),
    );
    assert_eq!((code, body), (200, json!([{"c": 14, "t": 497}])));
    let scrape = server.scrape();
    assert_eq!(scrape.value("druid_segment_valueindex_built", &[]), 0.0);
    assert!(
        scrape.value("druid_segment_valueindex_loaded", &[]) >= 3.0,
        "{}",
        scrape.text
    );
    assert_eq!(cached_files(&data), 0, "read in place, nothing loaded");

    // Kill: the unused day's object goes; the used days' objects stay.
    let (_, body) = server.post_json(
        "/druid/coordinator/v1/datasources/deep/markUnused",
        &json!({"interval": "2020-01-01/2020-01-02"}),
    );
    assert_eq!(body["numChangedSegments"], 1);
    let st = server.run_task(&json!({
        "type": "kill", "dataSource": "deep", "interval": "2020-01-01/2020-01-02"
    }));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let left = object_keys(&endpoint, &bucket, "druid/segments/");
    assert_eq!(left.len(), 4, "two segments and their sidecars: {left:?}");
    assert!(left.iter().all(|k| !k.contains("2020-01-01T")), "{left:?}");
    assert_eq!(server.count("deep"), Some(48));
}

/// Durable storage in an S3-compatible store (the test server `scripts/test.sh` starts):
/// pages are objects under the configured bucket and prefix, and read back in order.
#[test]
fn durable_storage_on_s3_holds_the_pages() {
    let Some(endpoint) = s3_endpoint() else {
        return;
    };
    let bucket = new_bucket(&endpoint, "results");
    let http = reqwest::blocking::Client::new();
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("runtime.properties");
    std::fs::write(
        &props,
        format!(
            "service.s3.endpoint={endpoint}\nservice.s3.region=us-east-1\nservice.s3.accessKey=test\nservice.s3.secretKey=test\nservice.msq.intermediate.storage.type=s3\nservice.msq.intermediate.storage.bucket={bucket}\nservice.msq.intermediate.storage.prefix=results\n"
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start_with_args(&data, &["--config", props.to_str().unwrap()]);
    let id = server.statement(
        "SELECT \"value\" AS n FROM generate_series(1, 25) ORDER BY n",
        json!({"selectDestination": "durableStorage", "rowsPerPage": 10}),
    );
    let st = server.wait_statement(&id);
    assert_eq!(st["state"], "SUCCESS", "{st}");
    assert_eq!(st["result"]["pages"].as_array().unwrap().len(), 3);
    let (code, text) = server.results_text(&id, "?page=2&resultFormat=csv");
    assert_eq!(code, 200);
    assert_eq!(
        text.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(),
        vec!["21", "22", "23", "24", "25"]
    );
    let listing = http
        .get(format!("{endpoint}/{bucket}?list-type=2&prefix=results/"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    for p in 0..3 {
        assert!(
            listing.contains(&format!("results/{id}/page-{p}.arrow")),
            "{listing}"
        );
    }
    // Nothing of it on the local disk.
    assert!(!data.join("durable-storage").join(&id).exists());
}
