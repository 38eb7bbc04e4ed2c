//! `GET /metrics` against the real binary: Druid's metric names, labels and types, moved by
//! exactly the right amounts by real ingestion, queries and statements; the SQL request log on
//! its own `tracing` target; `service.emitter=noop` turning it all off. Scrapes are parsed
//! with a small parser of the exposition text.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, wait_for_line, wikipedia_spec};

/// One scrape: every sample by metric name and label set.
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    samples: HashMap<(String, BTreeMap<String, String>), f64>,
    pub(crate) text: String,
}

impl Scrape {
    /// Parses the Prometheus / OpenMetrics text format: `name{k="v",...} value [timestamp]`,
    /// `#` lines skipped, label values unescaped (`\\`, `\"`, `\n`).
    fn parse(text: &str) -> Scrape {
        let mut samples = HashMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let name_end = line.find(['{', ' ']).expect("a sample line");
            let name = line[..name_end].to_string();
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if let Some(body) = rest.strip_prefix('{') {
                let mut chars = body.char_indices();
                let mut key = String::new();
                let end = loop {
                    let (i, c) = chars.next().expect("unterminated labels");
                    match c {
                        '}' => break i + 1,
                        ',' => {}
                        '=' => {
                            assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line}");
                            let mut value = String::new();
                            loop {
                                match chars.next().expect("unterminated value").1 {
                                    '\\' => match chars.next().expect("escape").1 {
                                        'n' => value.push('\n'),
                                        c => value.push(c),
                                    },
                                    '"' => break,
                                    c => value.push(c),
                                }
                            }
                            labels.insert(std::mem::take(&mut key), value);
                        }
                        c => key.push(c),
                    }
                };
                rest = &body[end..];
            }
            let value = rest.split_whitespace().next().expect("a value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value in [{line}]")),
            };
            assert!(
                samples.insert((name, labels), value).is_none(),
                "duplicate sample [{line}]"
            );
        }
        Scrape {
            samples,
            text: text.to_string(),
        }
    }

    /// The sample `name` with exactly `labels`.
    pub(crate) fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples.get(&(name.to_string(), labels)).copied()
    }

    /// [`Scrape::get`], failing the test when the sample is missing.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no {name}{labels:?} in\n{}", self.text))
    }
}

/// How much a sample grew from `before` to `after` (absent counts as 0).
fn delta(before: &Scrape, after: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    after.get(name, labels).unwrap_or(0.0) - before.get(name, labels).unwrap_or(0.0)
}

impl Server {
    /// `GET /metrics`, parsed.
    pub(crate) fn scrape(&self) -> Scrape {
        let r = self.get("/metrics");
        assert_eq!(r.status().as_u16(), 200);
        Scrape::parse(&r.text().unwrap())
    }

    /// Scrapes until `done` holds (what a response's end records lands just after the client
    /// has read the response), at most 10 s.
    fn scrape_until(&self, what: &str, done: impl Fn(&Scrape) -> bool) -> Scrape {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.scrape();
            if done(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: never true in\n{}",
                s.text
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `POST` SQL; the status, the response body's exact bytes and its JSON.
    fn sql_raw(&self, body: &Value) -> (u16, usize, Value) {
        let r = self
            .client
            .post(format!("{}/druid/v2/sql", self.url))
            .json(body)
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let bytes = r.bytes().unwrap();
        (
            status,
            bytes.len(),
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// Starts `dolmen server` with the SQL request log on (`DOLMEN_LOG=warn,dolmen::request=info`);
/// the receiver gets its stderr lines.
fn start_logging_requests(data_dir: &Path, extra: &[&str]) -> (Server, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dolmen"))
        .args(["server", "--port", "0", "--data-dir"])
        .arg(data_dir)
        .args(extra)
        .env("DOLMEN_LOG", "warn,dolmen::request=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dolmen");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (url, _rx) = wait_for_line(&mut child, "Dolmen listening on ", Duration::from_secs(60));
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    (Server { child, url, client }, rx)
}

/// One line of the SQL request log: Druid's tab-separated fields after the `tracing` prefix.
#[derive(Debug)]
struct RequestLine {
    timestamp: String,
    remote: String,
    stats: Value,
    query: Value,
}

/// Collects request log lines from `lines` until `want` of them are in (at most 10 s).
fn request_lines(lines: &mpsc::Receiver<String>, want: usize) -> Vec<RequestLine> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            panic!("{} request log lines of {want}: {out:?}", out.len())
        };
        let Some((_, msg)) = line.split_once(" dolmen::request: ") else {
            continue;
        };
        let parts: Vec<&str> = msg.splitn(4, '\t').collect();
        assert_eq!(parts.len(), 4, "{line}");
        // The last field is the query JSON, then the event's own fields.
        let mut de = serde_json::Deserializer::from_str(parts[3]).into_iter::<Value>();
        out.push(RequestLine {
            timestamp: parts[0].to_string(),
            remote: parts[1].to_string(),
            stats: serde_json::from_str(parts[2]).unwrap(),
            query: de.next().unwrap().unwrap(),
        });
    }
    out
}

/// Inline NDJSON for the ingestion test: 120 rows over three days of 2020-01 (one with a `n`
/// that is not a number), 3 rows of 2020-02 (outside the intervals: thrown away) and 2 lines
/// that are not JSON (unparseable).
fn ingest_data() -> String {
    let mut data = String::new();
    for i in 0..120i64 {
        let n = if i == 7 { json!("abc") } else { json!(i) };
        let row = json!({"ts": 1_577_836_800_000i64 + (i % 3) * 86_400_000 + i, "page": format!("p{i}"), "n": n});
        data.push_str(&format!("{row}\n"));
        if i == 50 {
            data.push_str("this is not json\n");
        }
    }
    for i in 0..3i64 {
        let row = json!({"ts": 1_580_515_200_000i64 + i, "page": "late", "n": i});
        data.push_str(&format!("{row}\n"));
    }
    data.push_str("{\"ts\": \n");
    data
}

fn ingest_spec(ds: &str, data: &str, max_parse_exceptions: u32) -> Value {
    json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "n"}]},
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none",
                                    "rollup": false, "intervals": ["2020-01-01/2020-01-04"]}
            },
            "ioConfig": {"type": "index_parallel", "inputSource": {"type": "inline", "data": data},
                         "inputFormat": {"type": "json"}},
            "tuningConfig": {"type": "index_parallel", "maxParseExceptions": max_parse_exceptions}
        }
    })
}

/// A query that runs for minutes: a sum over the self cross join of the 39,244 Wikipedia rows
/// (as in `sql_api`: one side streams against the other, so memory stays flat).
const ENDLESS: &str = "SELECT SUM(a.added + b.added) AS c FROM wikipedia a CROSS JOIN wikipedia b";

#[test]
fn ingestion_queries_and_statements_move_the_metrics_by_exact_amounts() {
    let dir = tempfile::tempdir().unwrap();
    let (server, log) = start_logging_requests(dir.path(), &["--worker-capacity", "3"]);
    let ds = [("dataSource", "metrics_ds")];

    // Before anything: the slot gauges and process metrics, no series for the datasource.
    let r = server
        .client
        .get(format!("{}/metrics", server.url))
        .header("Accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
    );
    let text = r.text().unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let m0 = Scrape::parse(&text);
    let slots = [("category", "_default_worker_category")];
    assert_eq!(m0.value("druid_taskslot_total_count", &slots), 3.0);
    assert_eq!(m0.value("druid_taskslot_used_count", &slots), 0.0);
    assert!(m0.value("process_resident_memory_bytes", &[]) > 1e6);
    assert!(m0.value("process_open_fds", &[]) > 0.0);
    assert!(m0.value("process_max_fds", &[]) >= m0.value("process_open_fds", &[]));
    assert!(m0.value("process_threads", &[]) >= 2.0);
    assert!(m0.value("process_start_time_seconds", &[]) > 1.5e9);
    assert!(m0.get("process_cpu_seconds_total", &[]).is_some());
    assert_eq!(m0.get("druid_segment_count", &ds), None);
    assert!(text.contains("# TYPE druid_query_count counter\n"));
    assert!(text.contains("# HELP druid_query_count Number of total queries.\n"));

    // Batch ingestion: 119 rows processed, 1 with an error, 2 unparseable, 3 thrown away; 120
    // rows written to 3 day segments.
    let st = server.run_task(&ingest_spec("metrics_ds", &ingest_data(), 10));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    // The Wikipedia sample, for queries that run long enough to be stopped.
    let st = server.run_task(&wikipedia_spec());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    // A task that fails: the first unparseable line is one too many.
    let st = server.run_task(&ingest_spec("metrics_failed", "not json\n", 0));
    assert_eq!(st["status"], "FAILED", "{st}");
    let m1 = server.scrape();
    let d = |name: &str, labels: &[(&str, &str)]| delta(&m0, &m1, name, labels);
    assert_eq!(d("druid_ingest_events_processed_total", &ds), 119.0);
    assert_eq!(d("druid_ingest_events_processedwitherror_total", &ds), 1.0);
    assert_eq!(d("druid_ingest_events_unparseable_total", &ds), 2.0);
    assert_eq!(d("druid_ingest_events_thrownaway_total", &ds), 3.0);
    assert_eq!(d("druid_ingest_rows_output_total", &ds), 120.0);
    assert_eq!(d("druid_ingest_persists_count_total", &ds), 0.0);
    assert_eq!(d("druid_task_success_count_total", &ds), 1.0);
    assert_eq!(d("druid_task_failed_count_total", &ds), 0.0);
    let failed_ds = [("dataSource", "metrics_failed")];
    assert_eq!(d("druid_task_failed_count_total", &failed_ds), 1.0);
    assert_eq!(d("druid_ingest_events_unparseable_total", &failed_ds), 1.0);
    let run = [("dataSource", "metrics_ds"), ("taskType", "index_parallel")];
    assert_eq!(d("druid_task_run_time_count", &run), 1.0);
    assert!(d("druid_task_run_time_sum", &run) > 0.0);
    // Segments: the visible ones, as the coordinator API lists them; all loaded in the cache.
    let (code, segs) =
        server.get_json("/druid/coordinator/v1/datasources/metrics_ds/segments?full");
    assert_eq!(code, 200, "{segs}");
    let segs = segs.as_array().unwrap();
    assert_eq!(segs.len(), 3);
    let bytes: u64 = segs.iter().map(|s| s["size"].as_u64().unwrap()).sum();
    assert_eq!(m1.value("druid_segment_count", &ds), 3.0);
    assert_eq!(m1.value("druid_segment_size", &ds), bytes as f64);
    assert_eq!(
        m1.value(
            "druid_segment_used",
            &[
                ("dataSource", "metrics_ds"),
                ("priority", "0"),
                ("tier", "_default_tier")
            ]
        ),
        bytes as f64
    );
    assert_eq!(m1.value("druid_taskslot_used_count", &slots), 0.0);

    // Queries: three that succeed, one that fails planning, one past its timeout, one
    // cancelled; and a request that is no query at all.
    let mut sent: Vec<(&str, usize)> = Vec::new();
    for (id, sql) in [
        ("m-count", "SELECT COUNT(*) AS c FROM metrics_ds"),
        (
            "m-pages",
            "SELECT page, n FROM metrics_ds ORDER BY __time LIMIT 5",
        ),
        ("m-one", "SELECT 1 AS x"),
        ("m-bad", "SELECT nope FROM nowhere"),
    ] {
        let (code, len, body) =
            server.sql_raw(&json!({"query": sql, "context": {"sqlQueryId": id}}));
        assert_eq!(code, if id == "m-bad" { 400 } else { 200 }, "{body}");
        sent.push((id, len));
    }
    let (code, len, body) = server
        .sql_raw(&json!({"query": ENDLESS, "context": {"sqlQueryId": "m-slow", "timeout": 200}}));
    assert_eq!(code, 504, "{body}");
    sent.push(("m-slow", len));
    let url = format!("{}/druid/v2/sql", server.url);
    let client = server.client.clone();
    let running = std::thread::spawn(move || {
        let r = client
            .post(url)
            .json(&json!({"query": ENDLESS, "context": {"sqlQueryId": "m-cancel"}}))
            .send()
            .unwrap();
        (r.status().as_u16(), r.bytes().unwrap().len())
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.delete("/druid/v2/sql/m-cancel").0 != 202 {
        assert!(
            Instant::now() < deadline,
            "the query never became cancellable"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, len) = running.join().unwrap();
    assert_eq!(code, 500);
    sent.push(("m-cancel", len));
    // A client that gives up before the answer: its query is interrupted, nothing written.
    let impatient = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let gone = impatient
        .post(format!("{}/druid/v2/sql", server.url))
        .json(&json!({"query": ENDLESS, "context": {"sqlQueryId": "m-gone"}}))
        .send();
    assert!(gone.is_err(), "{gone:?}");
    sent.push(("m-gone", 0));
    // ... and its work stops (it would run for minutes): within a few seconds the server
    // burns next to no CPU.
    let mut used = f64::MAX;
    for _ in 0..8 {
        let before = crate::sql_api::cpu_seconds(&server);
        std::thread::sleep(Duration::from_secs(1));
        used = crate::sql_api::cpu_seconds(&server) - before;
        if used < 0.3 {
            break;
        }
    }
    assert!(
        used < 0.3,
        "{used:.2} CPU s per second after the client left"
    );
    let (code, _, _) = server.sql_raw(&json!({"nope": 1}));
    assert_eq!(code, 400, "not a SQL request");
    let len_of = |id: &str| sent.iter().find(|(i, _)| *i == id).unwrap().1 as f64;

    let m2 = server.scrape_until("seven queries recorded", |s| {
        delta(&m1, s, "druid_query_count_total", &[]) >= 7.0
    });
    let d = |name: &str, labels: &[(&str, &str)]| delta(&m1, &m2, name, labels);
    assert!(m2.text.contains("# TYPE druid_query_time histogram\n"));
    assert!(
        m2.text
            .contains("# HELP druid_query_time Seconds taken to complete a query.\n")
    );
    assert_eq!(d("druid_query_count_total", &[]), 7.0);
    assert_eq!(d("druid_query_success_count_total", &[]), 3.0);
    assert_eq!(d("druid_query_failed_count_total", &[]), 1.0);
    assert_eq!(d("druid_query_timeout_count_total", &[]), 1.0);
    assert_eq!(d("druid_query_interrupted_count_total", &[]), 2.0);
    // The three stopped queries were stopped after planning (almost always): their datasource
    // is known; one stopped while it was still planning counts as `unknown`, like bad SQL. The
    // request log says which (`sqlQuery/planningTimeMs` is -1 when planning did not finish).
    let lines = request_lines(&log, 7);
    let by_id: HashMap<String, &RequestLine> = lines
        .iter()
        .map(|l| {
            (
                l.query["context"]["sqlQueryId"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                l,
            )
        })
        .collect();
    let planned = |id: &str| by_id[id].stats["sqlQuery/planningTimeMs"].as_i64().unwrap() >= 0;
    let stopped = ["m-slow", "m-cancel", "m-gone"];
    let (stopped_planned, stopped_unplanned): (Vec<&str>, Vec<&str>) =
        stopped.iter().partition(|id| planned(id));
    let n_planned = stopped_planned.len() as f64;
    let bytes_of = |ids: &[&str]| ids.iter().map(|id| len_of(id)).sum::<f64>();
    // query/*: dataSource is the one name, `type` is sql; two queries ran on metrics_ds, the
    // stopped ones on wikipedia, one on no datasource (Druid's `[]`, sanitized `_`).
    let q = [("dataSource", "metrics_ds"), ("type", "sql")];
    let wiki = [("dataSource", "wikipedia"), ("type", "sql")];
    let none = [("dataSource", "_"), ("type", "sql")];
    assert_eq!(d("druid_query_time_count", &q), 2.0);
    assert_eq!(d("druid_query_time_count", &wiki), n_planned);
    assert_eq!(d("druid_query_time_count", &none), 1.0);
    let ds_bytes = len_of("m-count") + len_of("m-pages");
    let wiki_bytes = bytes_of(&stopped_planned);
    assert_eq!(d("druid_query_bytes_total", &q), ds_bytes);
    assert_eq!(d("druid_query_bytes_total", &wiki), wiki_bytes);
    assert_eq!(d("druid_query_bytes_total", &none), len_of("m-one"));
    // The query whose client gave up after 500 ms ran for longer than 0.25 s.
    let le = |b: &str| {
        d(
            "druid_query_time_bucket",
            &[("dataSource", "wikipedia"), ("le", b), ("type", "sql")],
        )
    };
    assert_eq!(le("+Inf"), n_planned);
    if planned("m-gone") {
        assert!(le("0.25") <= n_planned - 1.0, "{}", m2.text);
    }
    // sqlQuery/*: dataSource is Druid's list text (`[metrics_ds]` -> `_metrics_ds_`); a query
    // that failed planning read no known datasource.
    let sq = [("dataSource", "_metrics_ds_")];
    let unknown = [("dataSource", "unknown")];
    assert_eq!(d("druid_sqlquery_time_count", &sq), 2.0);
    assert_eq!(d("druid_sqlquery_planningtimems_count", &sq), 2.0);
    assert_eq!(d("druid_sqlquery_bytes_total", &sq), ds_bytes);
    let sq_wiki = [("dataSource", "_wikipedia_")];
    assert_eq!(d("druid_sqlquery_time_count", &sq_wiki), n_planned);
    assert_eq!(
        d("druid_sqlquery_planningtimems_count", &sq_wiki),
        n_planned
    );
    assert_eq!(d("druid_sqlquery_bytes_total", &sq_wiki), wiki_bytes);
    let n_unknown = 1.0 + stopped_unplanned.len() as f64;
    assert_eq!(d("druid_sqlquery_time_count", &unknown), n_unknown);
    assert_eq!(d("druid_sqlquery_planningtimems_count", &unknown), 0.0);
    assert_eq!(
        d("druid_sqlquery_bytes_total", &unknown),
        len_of("m-bad") + bytes_of(&stopped_unplanned)
    );
    assert_eq!(d("druid_sqlquery_time_count", &[("dataSource", "_")]), 1.0);
    // Queries ingest nothing.
    assert_eq!(d("druid_ingest_events_processed_total", &ds), 0.0);

    // The request log: one line per query, Druid's fields, bytes as written.
    for (id, len) in &sent {
        let l = by_id
            .get(*id)
            .unwrap_or_else(|| panic!("no log line for {id}: {lines:?}"));
        assert_eq!(l.stats["sqlQuery/bytes"], json!(len), "{id}: {l:?}");
        assert_eq!(l.remote, "127.0.0.1", "{l:?}");
        assert!(
            l.timestamp.ends_with('Z') && l.timestamp.len() == 24,
            "{l:?}"
        );
        assert!(l.stats["sqlQuery/time"].as_u64().is_some(), "{l:?}");
        assert_eq!(l.stats["context"], l.query["context"], "{l:?}");
        let ok = matches!(*id, "m-count" | "m-pages" | "m-one");
        assert_eq!(l.stats["success"], json!(ok), "{id}: {l:?}");
        assert_eq!(l.stats.get("exception").is_some(), !ok, "{id}: {l:?}");
        let stopped = matches!(*id, "m-slow" | "m-cancel" | "m-gone");
        assert_eq!(l.stats.get("interrupted").is_some(), stopped, "{id}: {l:?}");
    }
    let count = by_id["m-count"];
    assert_eq!(count.query["query"], "SELECT COUNT(*) AS c FROM metrics_ds");
    assert!(count.stats["sqlQuery/planningTimeMs"].as_i64().unwrap() >= 0);
    let bad = by_id["m-bad"];
    assert_eq!(bad.stats["sqlQuery/planningTimeMs"], -1);
    assert!(
        bad.stats["exception"]
            .as_str()
            .unwrap()
            .starts_with("org.apache.calcite.tools.ValidationException: "),
        "{bad:?}"
    );
    let slow = by_id["m-slow"];
    assert_eq!(slow.query["context"]["timeout"], 200);
    assert!(
        slow.stats["sqlQuery/time"].as_u64().unwrap() >= 200,
        "{slow:?}"
    );
    assert!(
        slow.stats["reason"]
            .as_str()
            .unwrap()
            .starts_with("org.apache.druid.query.QueryTimeoutException"),
        "{slow:?}"
    );
    assert!(
        by_id["m-cancel"].stats["exception"]
            .as_str()
            .unwrap()
            .starts_with("org.apache.druid.query.QueryInterruptedException"),
    );

    assert!(
        by_id["m-gone"].stats["reason"]
            .as_str()
            .unwrap()
            .contains("the client closed the connection"),
    );

    // An async statement: sqlQuery/* and a log line for the submission, no query/*; its task
    // is counted when it ends.
    let r = server
        .client
        .post(format!("{}/druid/v2/sql/statements", server.url))
        .json(&json!({"query": "SELECT COUNT(*) AS c FROM metrics_ds",
                      "context": {"executionMode": "ASYNC", "sqlQueryId": "m-async"}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let submitted = r.bytes().unwrap();
    let status: Value = serde_json::from_slice(&submitted).unwrap();
    let task = status["queryId"].as_str().unwrap().to_string();
    assert_eq!(server.wait_task(&task)["status"], "SUCCESS");
    let m3 = server.scrape_until("the statement recorded", |s| {
        delta(&m2, s, "druid_sqlquery_time_count", &sq) >= 1.0
    });
    let d = |name: &str, labels: &[(&str, &str)]| delta(&m2, &m3, name, labels);
    assert_eq!(d("druid_sqlquery_time_count", &sq), 1.0);
    assert_eq!(d("druid_sqlquery_bytes_total", &sq), submitted.len() as f64);
    assert_eq!(d("druid_query_count_total", &[]), 0.0);
    assert_eq!(d("druid_query_time_count", &q), 0.0);
    assert_eq!(d("druid_sqlquery_planningtimems_count", &sq), 1.0);
    let select = [("dataSource", "__query_select")];
    assert_eq!(d("druid_task_success_count_total", &select), 1.0);
    assert_eq!(
        d(
            "druid_task_run_time_count",
            &[
                ("dataSource", "__query_select"),
                ("taskType", "query_controller")
            ]
        ),
        1.0
    );
    let async_line = &request_lines(&log, 1)[0];
    assert_eq!(async_line.query["context"]["sqlQueryId"], "m-async");
    assert_eq!(async_line.stats["success"], true);
    assert_eq!(async_line.stats["sqlQuery/bytes"], json!(submitted.len()));
}

#[test]
fn the_noop_emitter_turns_metrics_off() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("runtime.properties");
    std::fs::write(&config, "service.emitter=noop\n").unwrap();
    let server = Server::start_with_args(
        &dir.path().join("data"),
        &["--config", config.to_str().unwrap()],
    );
    let r = server.get("/metrics");
    assert_eq!(r.status().as_u16(), 404);
    let body: Value = r.json().unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("service.emitter=noop"),
        "{body}"
    );
    // Everything else works as before.
    assert_eq!(server.sql("SELECT 1 AS x"), vec![json!({"x": 1})]);
    assert_eq!(server.get("/druid/metrics").status().as_u16(), 404);
    drop(server);

    // The flag (DOLMEN_EMITTER) wins over the file; an unknown emitter is refused at start.
    let server = Server::start_with_args(
        &dir.path().join("data"),
        &[
            "--config",
            config.to_str().unwrap(),
            "--emitter",
            "prometheus",
        ],
    );
    assert_eq!(server.get("/metrics").status().as_u16(), 200);
    drop(server);
    let out = Command::new(env!("CARGO_BIN_EXE_dolmen"))
        .args([
            "server",
            "--port",
            "0",
            "--emitter",
            "graphite",
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("service.emitter: [graphite] is not one of [prometheus, noop]"),
        "{err}"
    );
}

#[test]
fn streaming_ingestion_moves_lag_persist_and_handoff_metrics() {
    use crate::common::long_task_spec;
    use crate::supervisors::{brokers, new_topic, produce, spec};
    let Some(brokers) = brokers() else { return };
    let topic = new_topic(&brokers, 2);
    produce(&brokers, &topic, 2, 0..100);
    let dir = tempfile::tempdir().unwrap();
    // One task slot, taken by a long batch task: the streaming task waits for it, so the
    // supervisor sees a lag it cannot reduce yet.
    let server = Server::start_with_args(&dir.path().join("data"), &["--worker-capacity", "1"]);
    let batch = server.submit(&long_task_spec(dir.path(), "mblocker", &[], false));
    server.wait_until_reading(&batch);
    let sup = "/druid/indexer/v1/supervisor";
    let (code, body) = server.post_json(sup, &spec("mstream", &topic, &brokers, json!({})));
    assert_eq!(code, 200, "{body}");
    // Label values go through Druid's value regex: `-` in the topic name becomes `_`.
    let stream_label = topic.replace('-', "_");
    let stream = [("dataSource", "mstream"), ("stream", stream_label.as_str())];
    let partition = |p: &'static str| {
        [
            ("dataSource", "mstream"),
            ("partition", p),
            ("stream", stream_label.as_str()),
        ]
    };
    let blocked = server.scrape_until("the lag of 100 records seen", |s| {
        s.get("druid_ingest_kafka_lag", &stream) == Some(100.0)
    });
    assert_eq!(blocked.value("druid_ingest_kafka_maxlag", &stream), 50.0);
    assert_eq!(blocked.value("druid_ingest_kafka_avglag", &stream), 50.0);
    assert_eq!(
        blocked.value("druid_ingest_kafka_partitionlag", &partition("0")),
        50.0
    );
    assert_eq!(
        blocked.value("druid_ingest_kafka_partitionlag", &partition("1")),
        50.0
    );
    let slots = [("category", "_default_worker_category")];
    assert_eq!(blocked.value("druid_taskslot_total_count", &slots), 1.0);
    assert_eq!(blocked.value("druid_taskslot_used_count", &slots), 1.0);
    let (code, _) = server.post_empty(&format!("/druid/indexer/v1/task/{batch}/shutdown"));
    assert_eq!(code, 200);
    let ds = [("dataSource", "mstream")];
    // The running task's counters reach the metrics at the next scrape, before any handoff
    // (rows count as processed while a hydrant is built, as persisted once it is).
    let live = server.scrape_until("100 rows processed and persisted", |s| {
        s.get("druid_ingest_events_processed_total", &ds) == Some(100.0)
            && s.get("druid_ingest_rows_output_total", &ds) == Some(100.0)
    });
    assert!(live.value("druid_ingest_persists_count_total", &ds) >= 1.0);
    assert_eq!(live.value("druid_ingest_rows_output_total", &ds), 100.0);
    assert_eq!(live.value("druid_ingest_handoff_count_total", &ds), 0.0);
    assert_eq!(live.value("druid_taskslot_used_count", &slots), 1.0);
    // Once the task has read everything the supervisor saw, every partition is at 0.
    let lag = server.scrape_until("lag back to zero", |s| {
        s.get("druid_ingest_kafka_lag", &stream) == Some(0.0)
    });
    assert_eq!(lag.value("druid_ingest_kafka_maxlag", &stream), 0.0);
    assert_eq!(
        lag.value("druid_ingest_kafka_partitionlag", &partition("0")),
        0.0
    );
    assert_eq!(
        lag.value("druid_ingest_kafka_partitionlag", &partition("1")),
        0.0
    );
    let (_, st) = server.get_json(&format!("{sup}/mstream/status"));
    assert_eq!(st["payload"]["aggregateLag"], 0, "{st}");

    // Handoff: the published segments are counted as handoffs, nothing is processed twice.
    let (code, _) = server.post_json(
        &format!("{sup}/mstream/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202);
    let after = server.scrape_until("segments handed off", |s| {
        s.get("druid_ingest_handoff_count_total", &ds)
            .unwrap_or(0.0)
            >= 1.0
            && s.get("druid_segment_count", &ds).unwrap_or(0.0) >= 1.0
    });
    assert_eq!(
        after.value("druid_ingest_handoff_count_total", &ds),
        after.value("druid_segment_count", &ds)
    );
    assert_eq!(
        after.value("druid_ingest_events_processed_total", &ds),
        100.0
    );
    assert_eq!(after.value("druid_ingest_rows_output_total", &ds), 100.0);
    let (code, _) = server.post_json(&format!("{sup}/mstream/terminate"), &json!({}));
    assert_eq!(code, 200);
}
