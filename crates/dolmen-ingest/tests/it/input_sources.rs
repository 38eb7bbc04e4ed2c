//! Batch tasks over the remote and derived input sources: `http` (an in-test HTTP server),
//! `s3` (a local S3-compatible server, see `scripts/install-test-deps.sh`), `druid` (re-indexing
//! an ingested datasource into another one and into itself) and `combining`.
//!
//! The S3 tests need `DOLMEN_TEST_S3_ENDPOINT` (e.g. `http://127.0.0.1:9010`); without it they
//! fail, unless `DOLMEN_SKIP_S3_TESTS=1` is set.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Once};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use dolmen_common::config::Properties;
use dolmen_ingest::input::{
    InputContext, InputEntity, InputFormat, InputSource, InputSourceConfig, SegmentAccess,
    open_rows, set_input_source_config,
};
use dolmen_ingest::{IndexTaskEnv, IndexTaskSpec, IngestError, RowStats, run_index_task};
use dolmen_metadata::MetadataStore;
use dolmen_segment::{DataSegment, LoadSpec, Timeline};
use dolmen_storage::DeepStorage;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;

const DATA: &str = r#"{"ts": "2024-01-01T01:00:00Z", "page": "a", "country": "US", "added": 1}
{"ts": "2024-01-01T02:00:00Z", "page": "b", "country": "FR", "added": 2}
{"ts": "2024-01-01T03:00:00Z", "page": "c", "country": "US", "added": 3}
{"ts": "2024-01-02T01:00:00Z", "page": "a", "country": "US", "added": 4}
{"ts": "2024-01-02T02:00:00Z", "page": "b", "country": "DE", "added": 5}
"#;

/// Allows 127.0.0.1 (any port) for the `http` source and S3 endpoints, and one header.
fn configure() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let cfg = InputSourceConfig::from_properties(&Properties::parse(
            "service.ingestion.http.allowedHosts=127.0.0.1\nservice.ingestion.http.allowedHeaders=X-Token\n",
        ))
        .unwrap();
        assert!(set_input_source_config(cfg));
    });
}

struct Env {
    dir: tempfile::TempDir,
    metadata: Arc<dyn MetadataStore>,
    deep: DeepStorage,
    tasks: std::sync::atomic::AtomicU32,
}

impl Env {
    async fn new() -> Env {
        configure();
        let dir = tempfile::tempdir().unwrap();
        let (metadata, deep) = support::open_stores(dir.path()).await;
        Env {
            dir,
            metadata,
            deep,
            tasks: Default::default(),
        }
    }

    /// Runs a task from its JSON; each task gets a later lock version than the previous one.
    async fn run(&self, spec: &Value) -> Result<Vec<DataSegment>, IngestError> {
        let spec = IndexTaskSpec::from_json(spec)?;
        let n = self.tasks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let env = IndexTaskEnv {
            task_id: format!("task-{n}"),
            work_dir: self.dir.path().join(format!("work-{n}")),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            cancel: CancellationToken::new(),
            stats: Arc::new(RowStats::new()),
            lock_version: format!("2030-01-01T00:00:{n:02}.000Z"),
            last_compaction_state: None,
        };
        run_index_task(&env, &spec).await
    }

    /// The visible rows of a datasource, sorted by (`__time`, `page`).
    async fn rows(&self, data_source: &str) -> Vec<Map<String, Value>> {
        let used = self
            .metadata
            .used_segments(data_source, None)
            .await
            .unwrap();
        let timeline = Timeline::build(used.into_iter().map(Arc::new));
        let mut out = Vec::new();
        for seg in timeline.visible_segments() {
            let LoadSpec::Local { path } = &seg.load_spec else {
                panic!("local load spec")
            };
            out.extend(read_parquet(Path::new(path)));
        }
        out.sort_by_key(|r| (r["__time"].as_i64(), r["page"].as_str().map(str::to_string)));
        out
    }
}

fn read_parquet(path: &Path) -> Vec<Map<String, Value>> {
    let format: InputFormat = serde_json::from_value(json!({"type": "parquet"})).unwrap();
    format
        .reader(&InputEntity::File(path.to_path_buf()))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A spec over `input_source` with the sample's schema (no rollup, DAY segments).
fn spec(data_source: &str, input_source: Value, input_format: Option<Value>) -> Value {
    let mut io = json!({"type": "index_parallel", "inputSource": input_source});
    if let Some(f) = input_format {
        io["inputFormat"] = f;
    }
    json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": data_source,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", "country"]},
                "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE", "rollup": false}
            },
            "ioConfig": io,
            "tuningConfig": {"type": "index_parallel"}
        }
    })
}

/// (hour of 2024-01-0x as "d/h", page, country, added) of each row.
fn summary(rows: &[Map<String, Value>]) -> Vec<(String, String, String, i64)> {
    rows.iter()
        .map(|r| {
            let t = r["__time"].as_i64().unwrap() - 1_704_067_200_000; // 2024-01-01
            (
                format!("{}/{}", t / 86_400_000 + 1, (t % 86_400_000) / 3_600_000),
                r.get("page")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                r.get("country")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                r["added"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn s(v: &str) -> String {
    v.to_string()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

// ------------------------------------------------------------------------------------------
// http
// ------------------------------------------------------------------------------------------

async fn serve_http() -> SocketAddr {
    async fn auth(headers: HeaderMap) -> Response {
        // "user:pw" in base64
        let ok = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            == Some("Basic dXNlcjpwdw==")
            && headers.get("x-token").and_then(|v| v.to_str().ok()) == Some("t0k");
        if ok {
            DATA.into_response()
        } else {
            StatusCode::UNAUTHORIZED.into_response()
        }
    }
    let app = Router::new()
        .route("/data.json", get(|| async { DATA }))
        .route("/data.json.gz", get(|| async { gzip(DATA.as_bytes()) }))
        .route("/auth.json", get(auth))
        .route(
            "/missing.json",
            get(|| async { (StatusCode::NOT_FOUND, "no such file") }),
        )
        .route(
            "/moved.json",
            get(|| async { Redirect::temporary("/data.json") }),
        )
        .route(
            "/escape.json",
            get(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_plain_gzip_auth_and_redirect() {
    let env = Env::new().await;
    let addr = serve_http().await;
    let json = Some(json!({"type": "json"}));
    let segs = env
        .run(&spec(
            "web",
            json!({"type": "http", "uris": [
                format!("http://{addr}/data.json"),
                format!("http://{addr}/data.json.gz"),
                format!("http://{addr}/moved.json"),
            ]}),
            json.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(segs.iter().map(|s| s.num_rows).sum::<u64>(), 15);
    let rows = env.rows("web").await;
    assert_eq!(rows.len(), 15);
    assert_eq!(
        summary(&rows)[..3],
        [
            (s("1/1"), s("a"), s("US"), 1),
            (s("1/1"), s("a"), s("US"), 1),
            (s("1/1"), s("a"), s("US"), 1)
        ]
    );

    // Basic authentication (with a password provider) and an allowed request header.
    let segs = env
        .run(&spec(
            "web_auth",
            json!({"type": "http", "uris": [format!("http://{addr}/auth.json")],
                   "httpAuthenticationUsername": "user",
                   "httpAuthenticationPassword": {"type": "default", "password": "pw"},
                   "requestHeaders": {"X-Token": "t0k"}}),
            json.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(segs.iter().map(|s| s.num_rows).sum::<u64>(), 5);

    // A non-2xx answer fails the task, naming the URL and the status.
    let e = env
        .run(&spec(
            "web_missing",
            json!({"type": "http", "uris": [format!("http://{addr}/data.json"), format!("http://{addr}/missing.json")]}),
            json.clone(),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.json") && e.contains("404"), "{e}");
    let e = env
        .run(&spec(
            "web_noauth",
            json!({"type": "http", "uris": [format!("http://{addr}/auth.json")]}),
            json.clone(),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("401"), "{e}");
    // A redirect off the allow-list is refused.
    let e = env
        .run(&spec(
            "web_escape",
            json!({"type": "http", "uris": [format!("http://{addr}/escape.json")]}),
            json.clone(),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("169.254.169.254") && e.contains("refused"),
        "{e}"
    );
    assert!(
        env.metadata
            .used_segments("web_missing", None)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_rejects_urls_outside_the_allow_list() {
    configure();
    let json = Some(json!({"type": "json"}));
    for (uri, why) in [
        ("http://169.254.169.254/latest/meta-data/", "allow-list"),
        ("http://localhost:8888/status", "allow-list"),
        ("file:///etc/passwd", "protocol [file]"),
        ("http://127.0.0.1@evil.example.com/x", "credentials"),
        ("http://[::1]:8888/x", "allow-list"),
    ] {
        let e = IndexTaskSpec::from_json(&spec(
            "x",
            json!({"type": "combining", "delegates": [
                {"type": "inline", "data": "{}"},
                {"type": "http", "uris": ["http://127.0.0.1:1/ok.json", uri]}
            ]}),
            json.clone(),
        ))
        .unwrap_err();
        assert!(matches!(e, IngestError::InvalidSpec(_)), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains("spec.ioConfig.inputSource.delegates[1].uris[1]") && e.contains(why),
            "{uri}: {e}"
        );
    }
    // Only the druid source may go without an inputFormat.
    let e = IndexTaskSpec::from_json(&spec(
        "x",
        json!({"type": "http", "uris": ["http://127.0.0.1:1/a.json"]}),
        None,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("spec.ioConfig.inputFormat"), "{e}");
    IndexTaskSpec::from_json(&spec(
        "x",
        json!({"type": "druid", "dataSource": "src", "interval": "2024-01-01/P1D"}),
        None,
    ))
    .unwrap();
    let e = IndexTaskSpec::from_json(&spec(
        "x",
        json!({"type": "combining", "delegates": [
            {"type": "druid", "dataSource": "src", "interval": "2024-01-01/P1D"},
            {"type": "inline", "data": "{}"}
        ]}),
        None,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("spec.ioConfig.inputFormat"), "{e}");
    let e = IndexTaskSpec::from_json(&spec(
        "x",
        json!({"type": "combining", "delegates": []}),
        json,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("spec.ioConfig.inputSource.delegates"), "{e}");
}

// ------------------------------------------------------------------------------------------
// druid and combining
// ------------------------------------------------------------------------------------------

/// A spec reading `__time` as millis, as users write it for the druid input source.
fn reindex_spec(data_source: &str, input_source: Value, input_format: Option<Value>) -> Value {
    let mut v = spec(data_source, input_source, input_format);
    v["spec"]["dataSchema"]["timestampSpec"] = json!({"column": "__time", "format": "millis"});
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn druid_reindex_into_another_and_the_same_datasource() {
    let env = Env::new().await;
    let json = Some(json!({"type": "json"}));
    env.run(&spec(
        "src",
        json!({"type": "inline", "data": DATA}),
        json.clone(),
    ))
    .await
    .unwrap();
    assert_eq!(env.rows("src").await.len(), 5);

    // Day 1 rows from US into a second datasource.
    env.run(&reindex_spec(
        "us_day1",
        json!({"type": "druid", "dataSource": "src", "interval": "2024-01-01/2024-01-02",
               "filter": {"type": "selector", "dimension": "country", "value": "US"}}),
        None,
    ))
    .await
    .unwrap();
    assert_eq!(
        summary(&env.rows("us_day1").await),
        [
            (s("1/1"), s("a"), s("US"), 1),
            (s("1/3"), s("c"), s("US"), 3)
        ]
    );

    // Rows outside the interval are dropped even inside a read segment (half of day 2).
    env.run(&reindex_spec(
        "half",
        json!({"type": "druid", "dataSource": "src", "interval": "2024-01-02T00:00:00Z/2024-01-02T01:30:00Z"}),
        None,
    ))
    .await
    .unwrap();
    assert_eq!(
        summary(&env.rows("half").await),
        [(s("2/1"), s("a"), s("US"), 4)]
    );

    // Re-index day 1 of `src` into itself, dropping page b: the new version overshadows the
    // old day-1 segment; day 2 is untouched.
    let mut own = reindex_spec(
        "src",
        json!({"type": "druid", "dataSource": "src", "interval": "2024-01-01/2024-01-02",
               "filter": {"type": "not", "field": {"type": "selector", "dimension": "page", "value": "b"}}}),
        None,
    );
    own["spec"]["dataSchema"]["granularitySpec"]["intervals"] = json!(["2024-01-01/2024-01-02"]);
    own["spec"]["ioConfig"]["appendToExisting"] = json!(false);
    env.run(&own).await.unwrap();
    assert_eq!(
        summary(&env.rows("src").await),
        [
            (s("1/1"), s("a"), s("US"), 1),
            (s("1/3"), s("c"), s("US"), 3),
            (s("2/1"), s("a"), s("US"), 4),
            (s("2/2"), s("b"), s("DE"), 5)
        ]
    );
    // Running it again reads the new version (no duplicates, nothing resurrected).
    env.run(&own).await.unwrap();
    assert_eq!(env.rows("src").await.len(), 4);

    // Combining: inline rows (with __time in millis) then the druid rows of day 2.
    let inline = r#"{"__time": 1704070800000, "page": "z", "country": "JP", "added": 9}"#;
    env.run(&reindex_spec(
        "combined",
        json!({"type": "combining", "delegates": [
            {"type": "inline", "data": inline},
            {"type": "druid", "dataSource": "src", "interval": "2024-01-02/2024-01-03"}
        ]}),
        json,
    ))
    .await
    .unwrap();
    assert_eq!(
        summary(&env.rows("combined").await),
        [
            (s("1/1"), s("z"), s("JP"), 9),
            (s("2/1"), s("a"), s("US"), 4),
            (s("2/2"), s("b"), s("DE"), 5)
        ]
    );

    // An interval without data publishes nothing.
    let none = env
        .run(&reindex_spec(
            "empty",
            json!({"type": "druid", "dataSource": "src", "interval": "2020-01-01/2020-01-02"}),
            None,
        ))
        .await
        .unwrap();
    assert!(none.is_empty());
}

/// Lists and reads an input source the way a task does, on a blocking thread.
async fn read_source(env: &Env, source: Value) -> Vec<Map<String, Value>> {
    let ctx = InputContext {
        config: None,
        segments: Some(SegmentAccess {
            metadata: Arc::clone(&env.metadata),
            deep: env.deep.clone(),
        }),
        runtime: Some(tokio::runtime::Handle::current()),
        scratch_dir: Some(env.dir.path().join("scratch")),
    };
    let source: InputSource = serde_json::from_value(source).unwrap();
    let format: InputFormat = serde_json::from_value(json!({"type": "json"})).unwrap();
    tokio::task::spawn_blocking(move || {
        let mut rows = Vec::new();
        for entity in source.entities_in(&ctx).unwrap() {
            rows.extend(open_rows(&entity, &format).unwrap().map(Result::unwrap));
            assert!(entity.size_bytes() > 0);
        }
        rows
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn druid_source_reads_only_visible_rows() {
    let env = Env::new().await;
    let json = Some(json!({"type": "json"}));
    env.run(&spec(
        "vis",
        json!({"type": "inline", "data": DATA}),
        json.clone(),
    ))
    .await
    .unwrap();
    let rows = read_source(
        &env,
        json!({"type": "druid", "dataSource": "vis", "interval": "2024-01-01T02:00:00Z/2024-01-02T02:00:00Z",
               "filter": {"type": "in", "dimension": "page", "values": ["a", "b"]}}),
    )
    .await;
    assert_eq!(
        summary(&rows),
        [
            (s("1/2"), s("b"), s("FR"), 2),
            (s("2/1"), s("a"), s("US"), 4)
        ]
    );
    assert_eq!(
        rows[0].keys().collect::<Vec<_>>(),
        ["__time", "page", "country", "added"]
    );
    // A newer version of day 1 overshadows the old one.
    let mut newer = spec(
        "vis",
        json!({"type": "inline", "data": r#"{"ts": "2024-01-01T05:00:00Z", "page": "n", "country": "NZ", "added": 6}"#}),
        json,
    );
    newer["spec"]["dataSchema"]["granularitySpec"]["intervals"] = json!(["2024-01-01/2024-01-02"]);
    env.run(&newer).await.unwrap();
    let rows = read_source(
        &env,
        json!({"type": "combining", "delegates": [
            {"type": "druid", "dataSource": "vis", "interval": "2024-01-01/2024-01-03"},
            {"type": "inline", "data": "{\"page\": \"inline\", \"added\": 0, \"__time\": 1704067200000}"}
        ]}),
    )
    .await;
    assert_eq!(
        summary(&rows),
        [
            (s("1/5"), s("n"), s("NZ"), 6),
            (s("2/1"), s("a"), s("US"), 4),
            (s("2/2"), s("b"), s("DE"), 5),
            (s("1/0"), s("inline"), s(""), 0)
        ]
    );
}

// ------------------------------------------------------------------------------------------
// s3
// ------------------------------------------------------------------------------------------

/// The local S3-compatible server; fails unless it is configured or the S3 tests are skipped
/// explicitly.
fn s3_endpoint() -> Option<String> {
    match std::env::var("DOLMEN_TEST_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ if std::env::var("DOLMEN_SKIP_S3_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_S3_ENDPOINT is not set: start the local S3-compatible server with \
             `bash scripts/install-test-deps.sh` and export \
             DOLMEN_TEST_S3_ENDPOINT=http://127.0.0.1:9010 (scripts/test.sh does both), or set \
             DOLMEN_SKIP_S3_TESTS=1 to skip the S3 tests"
        ),
    }
}

/// Creates a fresh bucket holding `objects`.
async fn s3_bucket(endpoint: &str, objects: &[(&str, Vec<u8>)]) -> String {
    let bucket = format!(
        "dolmen-it-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let http = reqwest::Client::new();
    let r = http
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("cannot reach the S3 test server at {endpoint}: {e}"));
    assert!(r.status().is_success(), "create bucket: {}", r.status());
    for (key, body) in objects {
        let r = http
            .put(format!("{endpoint}/{bucket}/{key}"))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "put {key}: {}", r.status());
    }
    bucket
}

fn parquet_sample() -> Vec<u8> {
    use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("page", DataType::Utf8, true),
        Field::new("country", DataType::Utf8, true),
        Field::new("added", DataType::Int64, true),
    ]));
    let batch = arrow::record_batch::RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(TimestampMillisecondArray::from(vec![
                1_704_070_800_000,
                1_704_074_400_000,
            ])),
            Arc::new(StringArray::from(vec!["p", "q"])),
            Arc::new(StringArray::from(vec!["NL", "NL"])),
            Arc::new(Int64Array::from(vec![7, 8])),
        ],
    )
    .unwrap();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_uris_prefixes_objects_and_parquet() {
    let Some(endpoint) = s3_endpoint() else {
        return;
    };
    let env = Env::new().await;
    let bucket = s3_bucket(
        &endpoint,
        &[
            ("in/2024/a.json", DATA.as_bytes().to_vec()),
            ("in/2024/b.json.gz", gzip(DATA.as_bytes())),
            ("in/2024/skip.csv", b"not,json\n".to_vec()),
            ("in/2024/empty.json", Vec::new()),
            ("in/data.parquet", parquet_sample()),
        ],
    )
    .await;
    let conn = json!({
        "properties": {"accessKeyId": "test", "secretAccessKey": {"type": "default", "password": "test"}},
        "endpointConfig": {"url": endpoint, "signingRegion": "us-east-1"}
    });
    let with = |extra: Value| {
        let mut v = json!({"type": "s3"});
        for (k, val) in conn
            .as_object()
            .unwrap()
            .iter()
            .chain(extra.as_object().unwrap())
        {
            v[k] = val.clone();
        }
        v
    };
    let json = Some(json!({"type": "json"}));

    // uris, plain and gzip; systemFields become a dimension.
    let mut sp = spec(
        "s3_uris",
        with(
            json!({"uris": [format!("s3://{bucket}/in/2024/a.json"), format!("s3://{bucket}/in/2024/b.json.gz")],
                    "systemFields": ["__file_path"]}),
        ),
        json.clone(),
    );
    sp["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] =
        json!(["page", "country", "__file_path"]);
    let segs = env.run(&sp).await.unwrap();
    assert_eq!(segs.iter().map(|s| s.num_rows).sum::<u64>(), 10);
    let rows = env.rows("s3_uris").await;
    let mut paths: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["__file_path"].as_str())
        .collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths, ["in/2024/a.json", "in/2024/b.json.gz"]);

    // prefixes with a glob: the csv is filtered out, the empty object skipped.
    env.run(&spec(
        "s3_prefix",
        with(json!({"prefixes": [format!("s3://{bucket}/in/20")], "objectGlob": "**.{json,json.gz}"})),
        json.clone(),
    ))
    .await
    .unwrap();
    assert_eq!(env.rows("s3_prefix").await.len(), 10);

    // objects, and Parquet (fetched to a local file for random access).
    let mut sp = spec(
        "s3_parquet",
        with(json!({"objects": [{"bucket": bucket, "path": "in/data.parquet"}]})),
        Some(json!({"type": "parquet"})),
    );
    sp["spec"]["dataSchema"]["timestampSpec"] = json!({"column": "ts", "format": "millis"});
    env.run(&sp).await.unwrap();
    assert_eq!(
        summary(&env.rows("s3_parquet").await),
        [
            (s("1/1"), s("p"), s("NL"), 7),
            (s("1/2"), s("q"), s("NL"), 8)
        ]
    );

    // A missing object fails the task, naming it.
    let e = env
        .run(&spec(
            "s3_missing",
            with(json!({"uris": [format!("s3://{bucket}/in/nope.json")]})),
            json.clone(),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.json"), "{e}");
    // A prefix that matches nothing fails too.
    let e = env
        .run(&spec(
            "s3_none",
            with(json!({"prefixes": [format!("s3://{bucket}/nothing/")]})),
            json,
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("spec.ioConfig.inputSource"), "{e}");
}
