//! Compaction against the real binary (issue 22): Druid's compaction tutorial with its specs
//! verbatim (only `baseDir` points at the repository's copy of the data), queries during
//! compaction, and kill -9 during a compact task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, examples_dir};

const DS: &str = "compaction-tutorial";

/// One of the shared tutorial specs, with `baseDir` pointing at the repository's examples.
pub(crate) fn tutorial_spec(name: &str) -> Value {
    let text = std::fs::read_to_string(examples_dir().join("specs").join(name)).unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    if spec["spec"]["ioConfig"]["inputSource"]["baseDir"].is_string() {
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] =
            json!(examples_dir().display().to_string());
    }
    spec
}

impl Server {
    /// (visible segments, used segments including overshadowed) of a datasource.
    fn segment_counts(&self, ds: &str) -> (u64, u64) {
        let rows = self.sql(&format!(
            "SELECT SUM(CASE WHEN is_overshadowed = 0 THEN 1 ELSE 0 END) AS visible, COUNT(*) AS used \
             FROM sys.segments WHERE datasource = '{ds}' AND is_published = 1"
        ));
        (
            rows[0]["visible"].as_u64().unwrap(),
            rows[0]["used"].as_u64().unwrap(),
        )
    }

    /// `COUNT(*)` and `SUM(added)` of a datasource.
    fn totals(&self, ds: &str) -> (u64, u64) {
        let rows = self.sql(&format!(
            "SELECT COUNT(*) AS c, SUM(added) AS a FROM \"{ds}\""
        ));
        (
            rows[0]["c"].as_u64().unwrap(),
            rows[0]["a"].as_u64().unwrap(),
        )
    }
}

/// Reads totals in a loop until stopped; returns every distinct answer seen.
fn reader_loop(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(u64, u64)>> {
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        let mut seen: Vec<(u64, u64)> = Vec::new();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) || n == 0 {
            let body: Value = client
                .post(format!("{url}/service/v2/sql"))
                .json(&json!({"query": format!("SELECT COUNT(*) AS c, SUM(added) AS a FROM \"{DS}\"")}))
                .send()
                .unwrap()
                .json()
                .unwrap();
            let t = (
                body[0]["c"].as_u64().unwrap(),
                body[0]["a"].as_u64().unwrap(),
            );
            if !seen.contains(&t) {
                seen.push(t);
            }
            n += 1;
        }
        assert!(n > 1, "the reader ran {n} queries");
        seen
    })
}

#[test]
fn druid_compaction_tutorial_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let st = s.run_task(&tutorial_spec("compaction-init-index.json"));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    // Druid's tutorial: 51 segments, 1-3 per hour, 39,244 rows.
    assert_eq!(s.segment_counts(DS), (51, 51));
    let totals = s.totals(DS);
    assert_eq!(totals.0, 39244);
    let hours = s.sql(&format!(
        "SELECT COUNT(DISTINCT \"start\") AS h FROM sys.segments WHERE datasource = '{DS}'"
    ));
    assert_eq!(hours[0]["h"], 24);

    // Compact keeping HOUR granularity, a reader querying all along.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = reader_loop(s.url.clone(), Arc::clone(&stop));
    let st = s.run_task(&tutorial_spec("compaction-keep-granularity.json"));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(st["type"], "compact");
    // 24 new segments, one per hour; the 51 old ones overshadowed until the coordinator
    // marks them unused (75 in all, as the tutorial shows).
    assert_eq!(s.segment_counts(DS), (24, 75));
    assert_eq!(s.totals(DS), totals);

    // Then to DAY granularity: one segment.
    let st = s.run_task(&tutorial_spec("compaction-day-granularity.json"));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    stop.store(true, Ordering::Relaxed);
    assert_eq!(reader.join().unwrap(), vec![totals]);
    assert_eq!(s.segment_counts(DS).0, 1);
    assert_eq!(s.totals(DS), totals);

    // lastCompactionState in sys.segments and in the segment payload.
    let rows = s.sql(&format!(
        "SELECT segment_id, \"start\", \"end\", num_rows, last_compaction_state FROM sys.segments \
         WHERE datasource = '{DS}' AND is_overshadowed = 0"
    ));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["start"], "2015-09-12T00:00:00.000Z");
    assert_eq!(rows[0]["end"], "2015-09-13T00:00:00.000Z");
    assert_eq!(rows[0]["num_rows"], 39244);
    let state: Value =
        serde_json::from_str(rows[0]["last_compaction_state"].as_str().unwrap()).unwrap();
    assert_eq!(state["partitionsSpec"]["type"], "dynamic");
    assert_eq!(state["partitionsSpec"]["maxRowsPerSegment"], 5000000);
    assert_eq!(state["granularitySpec"]["segmentGranularity"], "DAY");
    assert_eq!(state["granularitySpec"]["rollup"], false);
    assert!(
        state["dimensionsSpec"]["dimensions"]
            .as_array()
            .unwrap()
            .len()
            >= 19,
        "{state}"
    );
    let id = rows[0]["segment_id"].as_str().unwrap();
    let (code, payload) = s.get_json(&format!(
        "/druid/coordinator/v1/metadata/datasources/{DS}/segments/{id}"
    ));
    assert_eq!(code, 200, "{payload}");
    assert_eq!(payload["lastCompactionState"], state);
}

#[test]
fn compact_task_with_segments_input_rollup_and_bad_specs() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let st = s.run_task(&tutorial_spec("compaction-init-index.json"));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let totals = s.totals(DS);

    // Bad specs: 400 naming the field.
    for (spec, field) in [
        (json!({"type": "compact", "dataSource": DS}), "ioConfig"),
        (
            json!({"type": "compact", "dataSource": DS, "interval": "2015-09-12/2015-09-13",
                   "tuningConfig": {"partitionsSpec": {"type": "hashed", "numShards": "x"}}}),
            "tuningConfig",
        ),
        (
            json!({"type": "compact", "dataSource": DS, "interval": "2015-09-12/2015-09-13",
                   "granularitySpec": {"segmentGranularity": "sometimes"}}),
            "granularitySpec.segmentGranularity",
        ),
    ] {
        let (code, body) = s.post_json("/druid/indexer/v1/task", &spec);
        assert_eq!(code, 400, "{body}");
        assert!(body.to_string().contains(field), "{field}: {body}");
    }

    // The segments of one hour by id, rewritten with hashed partitioning into 2 shards.
    let hour = s.sql(&format!(
        "SELECT segment_id FROM sys.segments WHERE datasource = '{DS}' AND \"start\" = '2015-09-12T16:00:00.000Z'"
    ));
    let ids: Vec<Value> = hour.iter().map(|r| r["segment_id"].clone()).collect();
    assert!(ids.len() > 1);
    let st = s.run_task(&json!({
        "type": "compact", "dataSource": DS,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "segments", "segments": ids}, "dropExisting": true},
        "tuningConfig": {"type": "index_parallel", "forceGuaranteedRollup": true,
                         "partitionsSpec": {"type": "hashed", "numShards": 2, "partitionDimensions": ["channel"]}}
    }));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let rows = s.sql(&format!(
        "SELECT shard_spec, last_compaction_state FROM sys.segments WHERE datasource = '{DS}' AND \"start\" = '2015-09-12T16:00:00.000Z'"
    ));
    // dropExisting: the inputs are unused, not merely overshadowed.
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        let state: Value =
            serde_json::from_str(r["last_compaction_state"].as_str().unwrap()).unwrap();
        assert_eq!(state["partitionsSpec"]["type"], "hashed");
        assert!(r["shard_spec"].as_str().unwrap().contains("hashed"));
    }
    assert_eq!(s.totals(DS), totals);

    // Stale segment list: fails visibly, nothing changes.
    let st = s.run_task(&json!({
        "type": "compact", "dataSource": DS,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "segments", "segments": ids}}
    }));
    assert_eq!(st["status"], "FAILED", "{st}");
    assert!(
        st["errorMsg"]
            .as_str()
            .unwrap()
            .contains("different from the current used segments"),
        "{st}"
    );

    // Rollup to DAY with a metricsSpec and a transform filter.
    let st = s.run_task(&json!({
        "type": "compact", "dataSource": DS,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2015-09-12/2015-09-13"}},
        "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR", "rollup": true},
        "dimensionsSpec": {"dimensions": ["channel"]},
        "metricsSpec": [{"type": "count", "name": "edits"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
        "transformSpec": {"filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}}
    }));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let en = s.sql(&format!(
        "SELECT SUM(edits) AS e, SUM(added) AS a, COUNT(*) AS c FROM \"{DS}\""
    ));
    assert_eq!(en[0]["e"], 11549, "{en:?}");
    assert!(en[0]["c"].as_u64().unwrap() <= 24, "{en:?}");
}

#[test]
fn kill9_during_compaction_leaves_the_old_segments_answering() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let st = s.run_task(&tutorial_spec("compaction-init-index.json"));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let totals = s.totals(DS);
    let (code, body) = s.post_json(
        "/druid/indexer/v1/task",
        &tutorial_spec("compaction-day-granularity.json"),
    );
    assert_eq!(code, 200, "{body}");
    let id = body["task"].as_str().unwrap().to_string();
    // Kill as soon as it runs (or has just finished: both must leave a consistent state).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, st) = s.get_json(&format!("/druid/indexer/v1/task/{id}/status"));
        if st["status"]["runnerStatusCode"] == "RUNNING" || st["status"]["status"] != "RUNNING" {
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    s.kill9();
    let s = Server::start(dir.path());
    let st = s.wait_task(&id);
    let visible = s.segment_counts(DS).0;
    match st["status"].as_str().unwrap() {
        "FAILED" => assert_eq!(visible, 51, "{st}"),
        "SUCCESS" => assert_eq!(visible, 1, "{st}"),
        other => panic!("{other}"),
    }
    assert_eq!(s.totals(DS), totals);
    // Submitting it again compacts.
    let st = s.run_task(&tutorial_spec("compaction-day-granularity.json"));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(s.segment_counts(DS).0, 1);
    assert_eq!(s.totals(DS), totals);
}
