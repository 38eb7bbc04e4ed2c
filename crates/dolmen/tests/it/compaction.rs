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

/// Rollup compaction without a `metricsSpec` combines each metric with the aggregator its
/// ingestion recorded in the segment (Druid reads them from the segment's metadata): a max
/// stays a max, a min a min, a count is summed; a sum by type would have added the maxima.
#[test]
fn rollup_compaction_combines_metrics_with_their_recorded_aggregators() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let mut spec = tutorial_spec("compaction-init-index.json");
    let schema = &mut spec["spec"]["dataSchema"];
    schema["dataSource"] = json!("rolled");
    schema["dimensionsSpec"] = json!({"dimensions": ["channel", "namespace"]});
    schema["metricsSpec"] = json!([
        {"type": "count", "name": "cnt"},
        {"type": "longMax", "name": "max_added", "fieldName": "added"},
        {"type": "longMin", "name": "min_delta", "fieldName": "delta"},
        {"type": "doubleMax", "name": "max_deleted", "fieldName": "deleted"},
        {"type": "longFirst", "name": "first_added", "fieldName": "added"}
    ]);
    schema["granularitySpec"]["queryGranularity"] = json!("hour");
    schema["granularitySpec"]["rollup"] = json!(true);
    let st = s.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let per_channel = |s: &Server| {
        s.sql(
            "SELECT channel, SUM(cnt) AS c, MAX(max_added) AS mx, MIN(min_delta) AS mn, \
                    MAX(max_deleted) AS md, COUNT(*) AS \"rows\" \
             FROM rolled GROUP BY channel ORDER BY channel",
        )
    };
    let before = per_channel(&s);
    assert_eq!(
        before.iter().map(|r| r["c"].as_u64().unwrap()).sum::<u64>(),
        39244
    );
    // The segments record the combining aggregators.
    let (_, segments) =
        s.get_json("/druid/coordinator/v1/metadata/datasources/rolled/segments?full");
    let text = segments.to_string();
    for t in ["longSum", "longMax", "longMin", "doubleMax", "longFirst"] {
        assert!(
            text.contains(&format!("\"aggregator\":\"{t}\"")),
            "{t}: {text}"
        );
    }
    // Compact the day into one DAY segment, one row per channel and namespace, no metricsSpec.
    let st = s.run_task(&json!({
        "type": "compact", "dataSource": "rolled",
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2015-09-12/2015-09-13"}},
        "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "DAY", "rollup": true}
    }));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let after = per_channel(&s);
    assert_eq!(after.len(), before.len());
    for (b, a) in before.iter().zip(&after) {
        for k in ["channel", "c", "mx", "mn", "md"] {
            assert_eq!(a[k], b[k], "{k}: before {b}, after {a}");
        }
        assert!(a["rows"].as_u64() <= b["rows"].as_u64(), "{a} {b}");
    }
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

/// Starts a server whose compaction duty runs every second (first run right away).
fn start_fast(dir: &std::path::Path) -> Server {
    let props = dir.join("runtime.properties");
    std::fs::write(
        &props,
        "service.coordinator.startDelay=PT0S\nservice.coordinator.period=PT1S\nservice.coordinator.period.indexingPeriod=PT1S\n",
    )
    .unwrap();
    Server::start_with_args(&dir.join("data"), &["--config", props.to_str().unwrap()])
}

impl Server {
    fn post_with_author(&self, path: &str, body: &Value, author: &str) -> (u16, String) {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .header("X-Service-Author", author)
            .header("X-Service-Comment", "why not")
            .json(body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.text().unwrap())
    }

    fn post_query(&self, path: &str) -> (u16, String) {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .send()
            .unwrap();
        (r.status().as_u16(), r.text().unwrap())
    }
}

const CONFIG: &str = "/service/coordinator/v1/config/compaction";

#[test]
fn compaction_config_api_statuses_defaults_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path());
    // Nothing stored: the defaults.
    assert_eq!(
        s.get_json(CONFIG),
        (
            200,
            json!({"compactionConfigs": [], "compactionTaskSlotRatio": 0.1,
                   "maxCompactionTaskSlots": 2147483647, "useAutoScaleSlots": false})
        )
    );
    assert_eq!(s.get_json(&format!("{CONFIG}/nope")).0, 404);
    assert_eq!(s.delete(&format!("{CONFIG}/nope")).0, 404);
    // Create for an unknown datasource: 200, empty body; read back with Druid's defaults.
    assert_eq!(
        s.post_with_author(CONFIG, &json!({"dataSource": "wiki"}), "alice"),
        (200, String::new())
    );
    let (code, c) = s.get_json("/druid/coordinator/v1/config/compaction/wiki");
    assert_eq!(code, 200);
    assert_eq!(
        c,
        json!({"dataSource": "wiki", "taskPriority": 25, "inputSegmentSizeBytes": 100000000000000i64,
               "maxRowsPerSegment": null, "skipOffsetFromLatest": "P1D", "tuningConfig": null,
               "granularitySpec": null, "dimensionsSpec": null, "metricsSpec": null,
               "transformSpec": null, "ioConfig": null, "taskContext": null})
    );
    // Bad configs: 400 naming the field.
    for (body, field) in [
        (json!({"taskPriority": 1}), "dataSource"),
        (
            json!({"dataSource": "wiki", "skipOffsetFromLatest": "x"}),
            "skipOffsetFromLatest",
        ),
        (
            json!({"dataSource": "wiki", "tuningConfig": {"partitionsSpec": {"type": "hashed", "numShards": "two"}}}),
            "tuningConfig",
        ),
    ] {
        let (code, text) = s.post_with_author(CONFIG, &body, "x");
        assert_eq!(code, 400, "{text}");
        assert!(text.contains(field), "{field}: {text}");
    }
    // An update, the same again (no audit entry), task slots.
    let updated = json!({"dataSource": "wiki", "skipOffsetFromLatest": "PT0S",
        "granularitySpec": {"segmentGranularity": "DAY"}});
    assert_eq!(s.post_with_author(CONFIG, &updated, "bob").0, 200);
    assert_eq!(s.post_with_author(CONFIG, &updated, "bob").0, 200);
    assert_eq!(
        s.post_query(&format!("{CONFIG}/taskslots?ratio=0.5&max=3")),
        (200, String::new())
    );
    assert_eq!(s.post_query(&format!("{CONFIG}/taskslots?max=x")).0, 404);
    assert_eq!(s.post_query(&format!("{CONFIG}/taskslots?ratio=y")).0, 404);
    let (_, all) = s.get_json(CONFIG);
    assert_eq!(all["compactionTaskSlotRatio"], 0.5);
    assert_eq!(all["maxCompactionTaskSlots"], 3);
    assert_eq!(all["compactionConfigs"][0]["skipOffsetFromLatest"], "PT0S");
    assert_eq!(
        all["compactionConfigs"][0]["granularitySpec"]["segmentGranularity"],
        "DAY"
    );

    // History: create, update, slots change; newest first with count.
    let (code, h) = s.get_json(&format!("{CONFIG}/wiki/history"));
    assert_eq!(code, 200);
    let h = h.as_array().unwrap();
    assert_eq!(h.len(), 3, "{h:?}");
    assert_eq!(h[0]["auditInfo"]["author"], "alice");
    assert_eq!(h[0]["compactionConfig"]["skipOffsetFromLatest"], "P1D");
    assert_eq!(h[1]["auditInfo"]["author"], "bob");
    assert_eq!(h[1]["auditInfo"]["comment"], "why not");
    assert_eq!(h[2]["globalConfig"]["maxCompactionTaskSlots"], 3);
    assert!(h[0]["auditTime"].as_str().unwrap().ends_with('Z'));
    let (_, last) = s.get_json(&format!("{CONFIG}/wiki/history?count=1"));
    assert_eq!(last.as_array().unwrap().len(), 1);
    assert_eq!(s.get_json(&format!("{CONFIG}/wiki/history?count=0")).0, 400);
    assert_eq!(
        s.get_json(&format!("{CONFIG}/wiki/history?count=abc")).0,
        400
    );
    assert_eq!(
        s.get_json(&format!("{CONFIG}/other/history")),
        (200, json!([]))
    );

    // The newer overlord endpoints see the same configuration.
    let (code, dss) = s.get_json("/druid/indexer/v1/compaction/config/datasources");
    assert_eq!(code, 200);
    assert_eq!(dss["compactionConfigs"][0]["dataSource"], "wiki");
    assert_eq!(
        s.get_json("/druid/indexer/v1/compaction/config/cluster").1["maxCompactionTaskSlots"],
        3
    );
    let (code, body) = s.post_json(
        "/druid/indexer/v1/compaction/config/datasources/other",
        &json!({"dataSource": "wiki"}),
    );
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        s.post_json(
            "/druid/indexer/v1/compaction/config/cluster",
            &json!({"maxCompactionTaskSlots": 4})
        ),
        (200, json!({"success": true}))
    );
    let (_, entries) = s.get_json("/druid/indexer/v1/compaction/config/datasources/wiki/history");
    assert_eq!(entries["entries"].as_array().unwrap().len(), 4);
    assert_eq!(
        s.get_json("/druid/indexer/v1/compaction/isSupervisorEnabled"),
        (200, json!(false))
    );

    // Status: a datasource without segments has no snapshot.
    assert_eq!(
        s.get_json("/service/coordinator/v1/compaction/progress").0,
        400
    );
    assert_eq!(
        s.get_json("/service/coordinator/v1/compaction/progress?dataSource=wiki")
            .0,
        404
    );
    assert_eq!(
        s.get_json("/service/coordinator/v1/compaction/status?dataSource=wiki")
            .0,
        404
    );

    // Delete: 200, then 404; the history shows the deletion.
    assert_eq!(s.delete(&format!("{CONFIG}/wiki")).0, 200);
    assert_eq!(s.get_json(&format!("{CONFIG}/wiki")).0, 404);
    let (_, h) = s.get_json(&format!("{CONFIG}/wiki/history"));
    assert_eq!(
        h.as_array().unwrap().last().unwrap()["compactionConfig"],
        Value::Null
    );

    // Durable: the configuration survives a kill -9.
    s.post_with_author(CONFIG, &json!({"dataSource": "kept"}), "carol");
    s.kill9();
    let s = start_fast(dir.path());
    assert_eq!(s.get_json(&format!("{CONFIG}/kept")).0, 200);
}

#[test]
fn auto_compaction_of_500_appended_segments_reaches_the_configured_layout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path());
    let ds = "events";
    // 10 appends of 50 rows each, one segment per row: 500 segments over three days.
    let start = 1_442_016_000_000i64 - 2 * 86_400_000; // 2015-09-10
    for i in 0..10i64 {
        let data = crate::common::inline_rows(start + i * 60_000, 5_184_000, 50);
        let mut spec = crate::common::inline_spec(ds, &data, &[], true);
        spec["spec"]["tuningConfig"] = json!({"type": "index_parallel",
            "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 1}});
        let st = s.run_task(&spec);
        assert_eq!(st["status"], "SUCCESS", "{st}");
    }
    let before = s.sql(&format!(
        "SELECT COUNT(*) AS c, COUNT(DISTINCT page) AS p FROM \"{ds}\""
    ));
    assert_eq!(before[0]["c"], 500);
    assert_eq!(s.segment_counts(ds).0, 500);

    // Configure: DAY layout at most 100 rows per segment, nothing skipped; while coordination
    // is paused the duty does nothing.
    let pause = |on: bool| {
        let (code, _) = s.post_json(
            "/service/coordinator/v1/config",
            &json!({"pauseCoordination": on}),
        );
        assert_eq!(code, 200);
    };
    pause(true);
    let (code, text) = s.post_with_author(
        CONFIG,
        &json!({"dataSource": ds, "skipOffsetFromLatest": "PT0S", "maxRowsPerSegment": 100}),
        "ops",
    );
    assert_eq!(code, 200, "{text}");
    std::thread::sleep(Duration::from_millis(2500));
    let compact_tasks = |s: &Server| {
        s.get_json("/service/indexer/v1/tasks?type=compact")
            .1
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(compact_tasks(&s), 0);
    assert_eq!(
        s.get_json(&format!(
            "/service/coordinator/v1/compaction/status?dataSource={ds}"
        ))
        .0,
        404
    );
    pause(false);
    // Let the duty see it once with tasks still to run, then reach the layout.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut saw_awaiting_or_running = false;
    loop {
        let (code, st) = s.get_json(&format!(
            "/service/coordinator/v1/compaction/status?dataSource={ds}"
        ));
        if code == 200 {
            let st = &st["latestStatus"][0];
            assert_eq!(st["scheduleStatus"], "RUNNING");
            let compacted_rows = s.sql(&format!(
                "SELECT COUNT(*) AS n FROM sys.segments WHERE datasource = '{ds}' AND is_overshadowed = 0 AND last_compaction_state IS NULL"
            ));
            if compacted_rows[0]["n"] != 0 {
                saw_awaiting_or_running = true;
            }
            if compacted_rows[0]["n"] == 0
                && st["segmentCountAwaitingCompaction"] == 0
                && st["intervalCountAwaitingCompaction"] == 0
                && st["intervalCountCompacted"] == 3
                && st["segmentCountCompacted"] == s.segment_counts(ds).0
            {
                let (_, p) = s.get_json(&format!(
                    "/service/coordinator/v1/compaction/progress?dataSource={ds}"
                ));
                assert_eq!(p, json!({"remainingSegmentSize": 0}));
                break;
            }
        }
        assert!(Instant::now() < deadline, "auto-compaction did not finish");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(saw_awaiting_or_running);
    // The layout: three DAY chunks of segments with at most 100 rows each, rows unchanged.
    let rows = s.sql(&format!(
        "SELECT \"start\", \"end\", num_rows, last_compaction_state FROM sys.segments \
         WHERE datasource = '{ds}' AND is_overshadowed = 0"
    ));
    assert!(rows.len() >= 5 && rows.len() <= 8, "{rows:?}");
    for r in &rows {
        assert!(r["num_rows"].as_u64().unwrap() <= 100, "{r}");
        let state: Value =
            serde_json::from_str(r["last_compaction_state"].as_str().unwrap()).unwrap();
        assert_eq!(state["partitionsSpec"]["maxRowsPerSegment"], 100);
    }
    let after = s.sql(&format!(
        "SELECT COUNT(*) AS c, COUNT(DISTINCT page) AS p FROM \"{ds}\""
    ));
    assert_eq!(after, before);
    let (_, st) = s.get_json(&format!(
        "/druid/indexer/v1/compaction/status/datasources/{ds}"
    ));
    assert_eq!(st["segmentCountCompacted"], rows.len());
    // Nothing further to do: no more compact tasks after the layout is reached.
    let n = compact_tasks(&s);
    assert!(n >= 3, "{n}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(compact_tasks(&s), n);
}

/// Auto-compaction of the very intervals a `logstream` supervisor is appending to
/// (`skipOffsetFromLatest` PT0S, the worst case): the compact task's EXCLUSIVE lock waits for
/// the streaming task's APPEND lock and the other way round, so a reader never sees a row lost
/// or counted twice, and every row ends up published once.
#[test]
fn auto_compaction_while_a_supervisor_appends_never_loses_or_duplicates_rows() {
    use crate::supervisors::{brokers, new_topic, produce, spec};
    let Some(brokers) = brokers() else { return };
    const N: i64 = 3000;
    let topic = new_topic(&brokers, 2);
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path());
    let ds = "streamed";
    let mut sup = spec(
        ds,
        &topic,
        &brokers,
        json!({"taskDuration": "PT2S", "completionTimeout": "PT30S"}),
    );
    sup["spec"]["tuningConfig"]["maxRowsPerSegment"] = json!(50);
    assert_eq!(s.post_json("/druid/indexer/v1/supervisor", &sup).0, 200);
    let (code, text) = s.post_with_author(
        CONFIG,
        &json!({"dataSource": ds, "skipOffsetFromLatest": "PT0S", "maxRowsPerSegment": 100000}),
        "ops",
    );
    assert_eq!(code, 200, "{text}");
    let producer = {
        let (brokers, topic) = (brokers.clone(), topic.clone());
        std::thread::spawn(move || {
            for start in (0..N).step_by(100) {
                produce(&brokers, &topic, 2, start..(start + 100).min(N));
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    // The reader: the count never goes down and never exceeds what was produced.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (url, stop) = (s.url.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let mut last = (0i64, 0i64);
            while !stop.load(Ordering::Relaxed) {
                let r = client
                    .post(format!("{url}/druid/v2/sql"))
                    .json(&json!({"query": format!("SELECT COUNT(*) AS c, SUM(\"id\") AS s FROM \"{ds}\"")}))
                    .send()
                    .unwrap();
                if r.status().as_u16() == 200 {
                    let body: Value = r.json().unwrap();
                    let now = (
                        body[0]["c"].as_i64().unwrap_or(0),
                        body[0]["s"].as_i64().unwrap_or(0),
                    );
                    assert!(now.0 >= last.0, "rows went from {last:?} to {now:?}");
                    assert!(now.0 <= N, "{now:?}: more rows than produced");
                    last = now;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            last
        })
    };
    producer.join().unwrap();
    let want = (N, (0..N).sum::<i64>());
    s.wait_for_rows(ds, want, Duration::from_secs(120));
    // Compaction ran on the appended intervals, and the totals held.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = s
            .get_json("/service/indexer/v1/tasks?type=compact&state=complete")
            .1
            .as_array()
            .map_or(0, |a| a.iter().filter(|t| t["status"] == "SUCCESS").count());
        if done >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "no compaction task succeeded");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(s.count_and_sum(ds), want);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(reader.join().unwrap(), want);
    let compacted = s.sql(&format!(
        "SELECT COUNT(*) AS n FROM sys.segments WHERE datasource = '{ds}' AND last_compaction_state IS NOT NULL"
    ));
    assert!(compacted[0]["n"].as_u64().unwrap() > 0);
}
