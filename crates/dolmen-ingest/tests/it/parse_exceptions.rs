//! Parse exceptions through a whole batch task (`run_index_task`): `maxParseExceptions` fails
//! the task with Druid's message, `maxSavedParseExceptions` keeps the newest reports in the
//! completion report (`ingestionStatsAndErrors.payload.unparseableEvents.buildSegments`, Druid's
//! `ParseExceptionReport` shape), and `logParseExceptions` logs each one.
//!
//! Druid references: `ParseExceptionHandler`, `ParseExceptionReport`,
//! `IndexTaskUtils.getReportListFromSavedParseExceptions` (newest first) and
//! `docs/ingestion/tasks.md` ("Task reports").

use std::sync::{Arc, Mutex, OnceLock};

use dolmen_ingest::IngestError;
use serde_json::{Value, json};

use crate::support;

/// Runs a task over inline `data` with `tuning`; returns the outcome and the task report.
async fn run(data: &str, tuning: Value) -> (Result<u64, IngestError>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut tuning = tuning;
    tuning["type"] = json!("index_parallel");
    let spec = json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "pe",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "n"}]},
                "metricsSpec": [{"type": "count", "name": "count"}],
                "granularitySpec": {"segmentGranularity": "day", "rollup": false}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": data},
                "inputFormat": {"type": "json"}
            },
            "tuningConfig": tuning
        }
    });
    let (result, stats) = support::run_task(dir.path(), "pe-task", &spec).await;
    let result = result.map(|segs| segs.iter().map(|s| s.num_rows).sum());
    let msg = result.as_ref().err().map(ToString::to_string);
    let report = stats.report("pe-task", msg.as_deref());
    (result, report)
}

fn payload(report: &Value) -> &Value {
    &report["ingestionStatsAndErrors"]["payload"]
}

/// Two good rows and four bad ones: a JSON syntax error, a bad timestamp, a non-numeric long
/// dimension (processed with error) and another syntax error. `tag` makes the lines unique.
fn mixed_input(tag: &str) -> String {
    format!(
        "{{\"ts\":\"2020-01-01T00:00:00Z\",\"page\":\"{tag}-ok1\",\"n\":1}}\n\
         {tag}-broken-1\n\
         {{\"ts\":\"not a time\",\"page\":\"{tag}-badts\"}}\n\
         {{\"ts\":\"2020-01-01T01:00:00Z\",\"page\":\"{tag}-ok2\",\"n\":2}}\n\
         {{\"ts\":\"2020-01-01T02:00:00Z\",\"page\":\"{tag}-pwe\",\"n\":\"abc\"}}\n\
         {tag}-broken-2\n"
    )
}

#[tokio::test]
async fn too_many_parse_exceptions_fail_the_task_with_druids_message() {
    let (result, report) = run(
        &mixed_input("fail"),
        json!({"maxParseExceptions": 2, "maxSavedParseExceptions": 10}),
    )
    .await;
    let err = result.unwrap_err();
    assert!(matches!(err, IngestError::ParseExceptions(_)), "{err:?}");
    assert_eq!(err.to_string(), "Max parse exceptions[2] exceeded");
    let p = payload(&report);
    assert_eq!(p["errorMsg"], json!("Max parse exceptions[2] exceeded"));
    // The third error (the processed-with-error row) tipped it over; nothing after it was read.
    let stats = &p["rowStats"]["buildSegments"];
    assert_eq!(stats["unparseable"], json!(2), "{report}");
    assert_eq!(stats["processedWithError"], json!(1), "{report}");
    assert_eq!(stats["processed"], json!(2), "{report}");
    let events = p["unparseableEvents"]["buildSegments"].as_array().unwrap();
    assert_eq!(events.len(), 3, "{report}");
    assert_eq!(events[0]["errorType"], json!("processedWithError"));

    // maxParseExceptions 0: the first error fails the task.
    let (result, report) = run(&mixed_input("zero"), json!({"maxParseExceptions": 0})).await;
    assert_eq!(
        result.unwrap_err().to_string(),
        "Max parse exceptions[0] exceeded"
    );
    assert_eq!(
        payload(&report)["rowStats"]["buildSegments"]["unparseable"],
        json!(1)
    );
    // Nothing saved by default.
    assert_eq!(payload(&report)["unparseableEvents"], json!({}));

    // Within the limit the task succeeds and indexes the good rows and the row with an error.
    let (result, report) = run(&mixed_input("ok"), json!({"maxParseExceptions": 4})).await;
    assert_eq!(result.unwrap(), 3, "{report}");
}

#[tokio::test]
async fn saved_parse_exceptions_are_capped_newest_first_in_druids_shape() {
    let before = dolmen_common::time::now_millis();
    let (result, report) = run(
        &mixed_input("cap"),
        json!({"maxSavedParseExceptions": 2, "maxParseExceptions": 100}),
    )
    .await;
    assert_eq!(result.unwrap(), 3);
    let p = payload(&report);
    assert_eq!(p["rowStats"]["buildSegments"]["unparseable"], json!(3));
    let events = p["unparseableEvents"]["buildSegments"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{report}");
    // Newest first: the last syntax error, then the processed-with-error row.
    let e0 = events[0].as_object().unwrap();
    let mut keys: Vec<&str> = e0.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec!["details", "errorType", "input", "timeOfExceptionMillis"]
    );
    assert_eq!(e0["errorType"], json!("unparseable"));
    assert_eq!(e0["input"], json!("cap-broken-2"));
    let details = e0["details"].as_array().unwrap();
    assert_eq!(details.len(), 1);
    assert!(
        details[0].as_str().unwrap().contains("line 6"),
        "{details:?}"
    );
    assert!(e0["timeOfExceptionMillis"].as_i64().unwrap() >= before);
    let e1 = &events[1];
    assert_eq!(e1["errorType"], json!("processedWithError"));
    assert!(e1["input"].as_str().unwrap().contains("cap-pwe"), "{e1}");
    assert!(
        e1["details"][0].as_str().unwrap().contains("dimension [n]"),
        "{e1}"
    );
}

/// Every tracing event of the test process, as text (the global subscriber is set once).
fn captured() -> &'static Mutex<Vec<String>> {
    static LINES: OnceLock<Arc<Mutex<Vec<String>>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let _ = tracing::subscriber::set_global_default(Capture(Arc::clone(&lines)));
        lines
    })
}

/// A minimal subscriber that keeps each event's message and fields.
struct Capture(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let _ = write!(self.0, " {}={value:?}", field.name());
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        use std::fmt::Write as _;
        let _ = write!(self.0, " {}={value}", field.name());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(format!("{}", event.metadata().level()));
        event.record(&mut f);
        self.0.lock().unwrap().push(f.0);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn log_parse_exceptions_logs_each_one() {
    let lines = captured();
    let (result, _) = run(
        &mixed_input("logged"),
        json!({"logParseExceptions": true, "maxParseExceptions": 100}),
    )
    .await;
    assert_eq!(result.unwrap(), 3);
    let logged: Vec<String> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("encountered parse exception") && l.contains("logged-"))
        .cloned()
        .collect();
    assert_eq!(logged.len(), 4, "{logged:#?}");
    assert!(logged.iter().all(|l| l.starts_with("WARN")), "{logged:#?}");
    assert!(
        logged
            .iter()
            .any(|l| l.contains("error_type=processedWithError") && l.contains("dimension [n]")),
        "{logged:#?}"
    );
    assert!(
        logged
            .iter()
            .any(|l| l.contains("error_type=unparseable") && l.contains("input=logged-broken-1")),
        "{logged:#?}"
    );

    // Off by default: the same input logs nothing of the kind.
    let (result, _) = run(&mixed_input("quiet"), json!({"maxParseExceptions": 100})).await;
    assert_eq!(result.unwrap(), 3);
    assert!(
        !lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("encountered parse exception") && l.contains("quiet-")),
    );
}
