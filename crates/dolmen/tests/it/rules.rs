//! Retention rules, the coordinator loop, dynamic configuration and the audit history against
//! the real binary (issue 21).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, wikipedia_spec};

/// Starts a server whose coordinator runs every second (first run right away).
fn start_fast(dir: &Path, extra_props: &str) -> Server {
    let props = dir.join("runtime.properties");
    std::fs::write(
        &props,
        format!(
            "service.coordinator.startDelay=PT0S\nservice.coordinator.period=PT1S\n{extra_props}"
        ),
    )
    .unwrap();
    let data = dir.join("data");
    Server::start_with_args(&data, &["--config", props.to_str().unwrap()])
}

impl Server {
    /// POSTs JSON with audit headers (the `X-Druid-*` spelling on `/druid`, `X-Service-*` on
    /// `/service`); returns the status and the body text.
    fn post_audited(&self, path: &str, body: &Value, author: &str, comment: &str) -> (u16, String) {
        let prefix = if path.starts_with("/druid") {
            "X-Druid"
        } else {
            "X-Service"
        };
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .header(format!("{prefix}-Author"), author)
            .header(format!("{prefix}-Comment"), comment)
            .json(body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.text().unwrap())
    }

    fn count_rows(&self) -> i64 {
        self.sql("SELECT COUNT(*) AS c FROM wikipedia")[0]["c"]
            .as_i64()
            .unwrap()
    }

    fn used_segments(&self) -> i64 {
        self.sql("SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'wikipedia' AND is_active = 1")[0]["c"]
            .as_i64()
            .unwrap()
    }

    /// Polls until `f` holds (the coordinator runs every second).
    fn eventually(&self, what: &str, f: impl Fn(&Server) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn hourly_wikipedia() -> Value {
    let mut spec = wikipedia_spec();
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = json!("hour");
    spec
}

/// The issue's scenario: 24 HOUR segments; loadByInterval for the second half of the day,
/// then dropForever; the coordinator drops the first twelve hours; rules back and mark used
/// brings everything back.
#[test]
fn interval_load_then_drop_forever_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path(), "");
    let st = s.run_task(&hourly_wikipedia());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(s.used_segments(), 24);
    assert_eq!(s.count_rows(), 39_244);
    let second_half = s
        .sql("SELECT COUNT(*) AS c FROM wikipedia WHERE __time >= TIMESTAMP '2015-09-12 12:00:00'")
        [0]["c"]
        .as_i64()
        .unwrap();

    let (code, body) = s.post_audited(
        "/druid/coordinator/v1/rules/wikipedia",
        &json!([
            {"type": "loadByInterval", "interval": "2015-09-12T12:00/2015-09-13", "tieredReplicants": {"_default_tier": 1}},
            {"type": "dropForever"}
        ]),
        "ops",
        "keep the afternoon",
    );
    assert_eq!((code, body.as_str()), (200, ""));
    s.eventually("12 used segments", |s| s.used_segments() == 12);
    assert_eq!(s.count_rows(), second_half);
    // The segment cache keeps what is served: the dropped hours leave it a run later.
    let cache = dir.path().join("data/segment-cache");
    s.eventually("12 cached segments", |_| walk(&cache).len() == 12);
    // One replica asked for and served by this process: fully loaded, nothing missing.
    let rows = s.sql("SELECT replication_factor, num_replicas, is_available, COUNT(*) AS c FROM sys.segments WHERE datasource = 'wikipedia' GROUP BY 1, 2, 3");
    assert_eq!(
        rows,
        vec![json!({"replication_factor": 1, "num_replicas": 1, "is_available": 1, "c": 12})]
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/loadstatus").1,
        json!({"wikipedia": 100.0})
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/loadstatus?full").1,
        json!({"_default_tier": {"wikipedia": 0}})
    );
    let (_, meta) =
        s.get_json("/druid/coordinator/v1/metadata/datasources/wikipedia/segments?includeUnused");
    assert_eq!(meta.as_array().unwrap().len(), 24);

    // Change the rules back, mark everything used: all 24 and every row again.
    let (code, _) = s.post_audited(
        "/service/coordinator/v1/rules/wikipedia",
        &json!([]),
        "ops",
        "",
    );
    assert_eq!(code, 200);
    let (code, body) = s.post_json("/druid/coordinator/v1/datasources/wikipedia", &json!({}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["numChangedSegments"], 12);
    // Several coordinator runs later nothing is dropped again.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(s.used_segments(), 24);
    assert_eq!(s.count_rows(), 39_244);
    // The default rule asks for 2 replicas on `_default_tier`; one process holds one, so each
    // segment is under-replicated by one.
    let rows = s.sql("SELECT replication_factor, num_replicas, COUNT(*) AS c FROM sys.segments WHERE datasource = 'wikipedia' GROUP BY 1, 2");
    assert_eq!(
        rows,
        vec![json!({"replication_factor": 2, "num_replicas": 1, "c": 24})]
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/loadstatus?full").1,
        json!({"_default_tier": {"wikipedia": 24}})
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/loadstatus?simple").1,
        json!({"wikipedia": 0})
    );

    // The history holds both changes, newest first with count, with author, comment and IP.
    let (code, h) = s.get_json("/druid/coordinator/v1/rules/wikipedia/history?count=5");
    assert_eq!(code, 200);
    let h = h.as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0]["payload"], "[]");
    assert_eq!(h[1]["key"], "wikipedia");
    assert_eq!(h[1]["type"], "rules");
    assert_eq!(
        h[1]["auditInfo"],
        json!({"author": "ops", "comment": "keep the afternoon", "ip": "127.0.0.1"})
    );
    let payload: Value = serde_json::from_str(h[1]["payload"].as_str().unwrap()).unwrap();
    assert_eq!(payload[1], json!({"type": "dropForever"}));
    assert!(h[1]["auditTime"].as_str().unwrap().ends_with('Z'));
}

/// A load rule with no replicas keeps segments used but out of plain queries; the
/// `_default` rules apply to datasources without rules of their own.
#[test]
fn zero_replica_rules_unload_and_default_rules_apply() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path(), "");
    let st = s.run_task(&hourly_wikipedia());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let (code, _) = s.post_audited(
        "/service/coordinator/v1/rules/_default",
        &json!([{"type": "loadForever", "tieredReplicants": {}, "useDefaultTierForNull": false}]),
        "ops",
        "cold",
    );
    assert_eq!(code, 200);
    s.eventually("nothing served", |s| {
        let (code, body) = s.post_json(
            "/service/v2/sql",
            &json!({"query": "SELECT COUNT(*) AS c FROM wikipedia"}),
        );
        code == 200 && body[0]["c"] == 0
    });
    // Their cached copies go a run later.
    let cache = dir.path().join("data/segment-cache");
    s.eventually("an empty segment cache", |_| walk(&cache).is_empty());
    // A query from deep storage still reads them.
    let (code, body) = s.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT COUNT(*) AS c FROM wikipedia", "context": {"readFromDeepStorage": true}}),
    );
    assert_eq!((code, body), (200, json!([{"c": 39_244}])));
    // Still used: the metadata and sys.segments keep them, unavailable, with no replica asked.
    assert_eq!(s.used_segments(), 24);
    let rows = s.sql("SELECT is_active, is_available, num_replicas, replication_factor, COUNT(*) AS c FROM sys.segments GROUP BY 1, 2, 3, 4");
    assert_eq!(
        rows,
        vec![
            json!({"is_active": 1, "is_available": 0, "num_replicas": 0, "replication_factor": 0, "c": 24})
        ]
    );
    assert!(s.sql("SELECT * FROM sys.server_segments").is_empty());
    let servers =
        s.sql("SELECT tier, current_size FROM sys.servers WHERE server_type = 'historical'");
    assert_eq!(
        servers,
        vec![json!({"tier": "_default_tier", "current_size": 0})]
    );
    // Nothing is meant to be loaded: fully "loaded", nothing missing.
    assert_eq!(
        s.get_json("/druid/coordinator/v1/loadstatus").1,
        json!({"wikipedia": 100.0})
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/loadstatus?full").1,
        json!({"_default_tier": {"wikipedia": 0}})
    );
    assert_eq!(s.get_json("/druid/coordinator/v1/datasources").1, json!([]));
    let (_, rules) = s.get_json("/druid/coordinator/v1/rules");
    assert_eq!(
        rules["_default"],
        json!([{"tieredReplicants": {}, "useDefaultTierForNull": false, "type": "loadForever"}])
    );
    // Back to the initial default: served again.
    let (code, _) = s.post_audited(
        "/druid/coordinator/v1/rules/_default",
        &json!([{"type": "loadForever"}]),
        "",
        "",
    );
    assert_eq!(code, 200);
    s.eventually("all rows served", |s| {
        let (code, body) = s.post_json(
            "/service/v2/sql",
            &json!({"query": "SELECT COUNT(*) AS c FROM wikipedia"}),
        );
        code == 200 && body[0]["c"] == 39_244
    });
    // Served segments are loaded into the cache by the coordinator, without a query.
    s.eventually("24 cached segments", |_| walk(&cache).len() == 24);
}

/// The rules API: initial `_default`, `?full`, empty arrays, bad bodies (400 naming the rule
/// and field), history filters; rules survive a kill -9.
#[test]
fn rules_api_validation_history_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path(), "");
    let default = json!([{"tieredReplicants": {"_default_tier": 2}, "useDefaultTierForNull": true, "type": "loadForever"}]);
    let (code, all) = s.get_json("/druid/coordinator/v1/rules");
    assert_eq!(code, 200);
    assert_eq!(all, json!({"_default": default}));
    assert_eq!(
        s.get_json("/service/coordinator/v1/rules/nope").1,
        json!([])
    );
    assert_eq!(
        s.get_json("/service/coordinator/v1/rules/nope?full").1,
        default
    );

    let rules = json!([{"type": "loadByPeriod", "period": "P1M", "tieredReplicants": {"_default_tier": 1}}, {"type": "dropForever"}]);
    assert_eq!(
        s.post_audited("/service/coordinator/v1/rules/ds1", &rules, "a", "c1")
            .0,
        200
    );
    let (_, got) = s.get_json("/druid/coordinator/v1/rules/ds1?full");
    assert_eq!(got.as_array().unwrap().len(), 3);
    assert_eq!(got[0]["includeFuture"], true);
    assert_eq!(got[2], default[0]);
    assert_eq!(
        s.post_audited("/service/coordinator/v1/rules/empty", &json!([]), "", "")
            .0,
        200
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/rules").1["empty"],
        json!([])
    );

    for (body, needle) in [
        (json!([{"type": "keepForever"}]), "rule [0]"),
        (
            json!([{"type": "loadForever"}, {"type": "loadForever", "tieredReplicants": {"hot": -1}}]),
            "rule [1] (loadForever): tieredReplicants",
        ),
        (
            json!([{"type": "loadByPeriod", "period": "P1X"}]),
            "rule [0] (loadByPeriod): period",
        ),
        (
            json!([{"type": "dropByInterval", "interval": "foo"}]),
            "rule [0] (dropByInterval): interval",
        ),
        (json!({"type": "loadForever"}), "JSON array"),
        (Value::Null, "Rules cannot be null."),
    ] {
        let (code, text) = s.post_audited("/druid/coordinator/v1/rules/ds1", &body, "", "");
        assert_eq!(code, 400, "{body}: {text}");
        let err: Value = serde_json::from_str(&text).unwrap();
        assert!(
            err["error"].as_str().unwrap().contains(needle),
            "{body}: {text}"
        );
    }
    let (code, text) = s.post_audited("/druid/coordinator/v1/rules/_default", &json!([]), "", "");
    assert_eq!(
        (code, text.as_str()),
        (400, r#"{"error":"Cluster-level rules cannot be empty."}"#)
    );

    // History over all datasources; count and interval filter; bad count is 400.
    let (_, h) = s.get_json("/service/coordinator/v1/rules/history");
    assert_eq!(h.as_array().unwrap().len(), 2);
    let (_, h) = s.get_json("/service/coordinator/v1/rules/history?count=1");
    assert_eq!(h.as_array().unwrap().len(), 1);
    assert_eq!(h[0]["key"], "empty");
    let (_, h) =
        s.get_json("/service/coordinator/v1/rules/history?interval=2000-01-01%2F2001-01-01");
    assert_eq!(h, json!([]));
    let (code, e) = s.get_json("/druid/coordinator/v1/rules/history?count=0");
    assert_eq!(
        (code, e),
        (400, json!({"error": "Limit must be greater than zero!"}))
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/rules/ds1/history?count=x")
            .0,
        400
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/rules/ds1/history?interval=bad")
            .0,
        400
    );

    s.kill9();
    let s = start_fast(dir.path(), "");
    let (_, got) = s.get_json("/druid/coordinator/v1/rules/ds1");
    assert_eq!(got.as_array().unwrap().len(), 2);
    let (_, h) = s.get_json("/service/coordinator/v1/rules/ds1/history");
    assert_eq!(h[0]["auditInfo"]["author"], "a");
}

/// Coordinator and overlord dynamic configuration: defaults, partial merge, validation,
/// history, persistence; workers and scaling.
#[test]
fn dynamic_config_and_workers() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(
        dir.path(),
        "service.worker.capacity=3\nservice.worker.category=cat1\n",
    );
    let (code, c) = s.get_json("/druid/coordinator/v1/config");
    assert_eq!(code, 200);
    assert_eq!(c["millisToWaitBeforeDeleting"], 900_000);
    assert_eq!(c["pauseCoordination"], false);
    assert_eq!(c["killDataSourceWhitelist"], json!([]));
    assert_eq!(
        s.get_json("/druid/coordinator/v1/config/history").1,
        json!([])
    );

    let (code, _) = s.post_audited(
        "/druid/coordinator/v1/config",
        &json!({"maxSegmentsToMove": 5, "killDataSourceWhitelist": "a,b"}),
        "me",
        "tune",
    );
    assert_eq!(code, 200);
    let (_, c) = s.get_json("/service/coordinator/v1/config");
    assert_eq!(c["maxSegmentsToMove"], 5);
    assert_eq!(c["killDataSourceWhitelist"], json!(["a", "b"]));
    assert_eq!(c["replicantLifetime"], 15);
    // `{}` changes nothing but is audited.
    assert_eq!(
        s.post_audited("/service/coordinator/v1/config", &json!({}), "", "")
            .0,
        200
    );
    for (body, field) in [
        (json!({"killTaskSlotRatio": 2}), "killTaskSlotRatio"),
        (json!({"maxSegmentsToMove": "x"}), "maxSegmentsToMove"),
        (json!({"nope": true}), "nope"),
    ] {
        let (code, text) = s.post_audited("/druid/coordinator/v1/config", &body, "", "");
        assert_eq!(code, 400, "{text}");
        assert!(text.contains(field), "{text}");
    }
    let (_, h) = s.get_json("/druid/coordinator/v1/config/history");
    let h = h.as_array().unwrap().clone();
    assert_eq!(h.len(), 2);
    // Interval results are oldest first.
    assert_eq!(h[0]["auditInfo"]["author"], "me");
    assert_eq!(h[0]["key"], "coordinator.config");
    assert_eq!(h[0]["type"], "coordinator.config");
    let payload: Value = serde_json::from_str(h[0]["payload"].as_str().unwrap()).unwrap();
    assert_eq!(payload["maxSegmentsToMove"], 5);
    let (_, h1) = s.get_json("/druid/coordinator/v1/config/history?count=1");
    assert_eq!(h1.as_array().unwrap().len(), 1);
    assert_eq!(h1[0]["auditInfo"]["author"], "");

    // Overlord: empty body until set; normalized read-back; history.
    let r = s.get("/druid/indexer/v1/worker");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.text().unwrap(), "");
    let (code, _) = s.post_audited(
        "/druid/indexer/v1/worker",
        &json!({"selectStrategy": {"type": "equalDistribution"}}),
        "w",
        "",
    );
    assert_eq!(code, 200);
    assert_eq!(
        s.get_json("/service/indexer/v1/worker").1,
        json!({"type": "default", "selectStrategy": {"type": "equalDistribution", "affinityConfig": null,
               "taskLimits": {"maxSlotCountByType": {}, "maxSlotRatioByType": {}}}, "autoScaler": null})
    );
    let (code, text) = s.post_audited(
        "/druid/indexer/v1/worker",
        &json!({"selectStrategy": {"type": "fillCapacity", "taskLimits": {"maxSlotRatioByType": {"index": 3}}}}),
        "",
        "",
    );
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("maxSlotRatioByType"), "{text}");
    let (_, h) = s.get_json("/druid/indexer/v1/worker/history?count=10");
    assert_eq!(h.as_array().unwrap().len(), 1);
    assert_eq!(h[0]["type"], "worker.config");

    let (code, w) = s.get_json("/druid/indexer/v1/workers");
    assert_eq!(code, 200);
    assert_eq!(w[0]["worker"]["capacity"], 3);
    assert_eq!(w[0]["worker"]["category"], "cat1");
    assert_eq!(w[0]["currCapacityUsed"], 0);
    assert_eq!(w[0]["runningTasks"], json!([]));
    let r = s.get("/service/indexer/v1/scaling");
    assert_eq!(
        (r.status().as_u16(), r.text().unwrap()),
        (200, String::new())
    );

    // Restart keeps both configurations and their history.
    s.kill9();
    let s = start_fast(dir.path(), "");
    assert_eq!(
        s.get_json("/druid/coordinator/v1/config").1["maxSegmentsToMove"],
        5
    );
    assert_eq!(
        s.get_json("/druid/indexer/v1/worker").1["selectStrategy"]["type"],
        "equalDistribution"
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/config/history")
            .1
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// `pauseCoordination` stops rule application until it is lifted.
#[test]
fn pause_coordination_stops_drops() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path(), "");
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/config",
            &json!({"pauseCoordination": true}),
            "",
            ""
        )
        .0,
        200
    );
    let st = s.run_task(&hourly_wikipedia());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/rules/wikipedia",
            &json!([{"type": "dropForever"}]),
            "",
            ""
        )
        .0,
        200
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(s.used_segments(), 24);
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/config",
            &json!({"pauseCoordination": false}),
            "",
            ""
        )
        .0,
        200
    );
    s.eventually("all dropped", |s| s.used_segments() == 0);
}

/// Auto-kill: dropped segments are deleted for good by coordinator-issued kill tasks once the
/// dynamic config gives them a task slot; only whitelisted datasources.
#[test]
fn auto_kill_deletes_dropped_segments() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(
        dir.path(),
        "service.worker.capacity=2\nservice.coordinator.kill.on=true\nservice.coordinator.kill.period=PT1S\n\
         service.coordinator.kill.bufferPeriod=PT0S\nservice.coordinator.kill.durationToRetain=PT0S\n",
    );
    let st = s.run_task(&hourly_wikipedia());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/rules/wikipedia",
            &json!([{"type": "dropForever"}]),
            "",
            ""
        )
        .0,
        200
    );
    s.eventually("all dropped", |s| s.used_segments() == 0);
    // Ratio 0.1 of 2 slots: no kill slot, the unused segments stay.
    std::thread::sleep(Duration::from_millis(2000));
    let unused = |s: &Server| {
        let (code, body) = s.get_json(
            "/druid/coordinator/v1/metadata/datasources/wikipedia/segments?includeUnused",
        );
        if code == 200 {
            body.as_array().map_or(0, Vec::len)
        } else {
            0
        }
    };
    assert_eq!(unused(&s), 24);
    let tasks = s.sql("SELECT COUNT(*) AS c FROM sys.tasks WHERE type = 'kill'");
    assert_eq!(tasks[0]["c"], 0);
    // A whitelist without the datasource: still nothing.
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/config",
            &json!({"killTaskSlotRatio": 1.0, "killDataSourceWhitelist": ["other"]}),
            "",
            ""
        )
        .0,
        200
    );
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(unused(&s), 24);
    assert_eq!(walk(&dir.path().join("data/deep-storage")).len(), 24);
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/config",
            &json!({"killDataSourceWhitelist": []}),
            "",
            ""
        )
        .0,
        200
    );
    s.eventually("killed", |s| unused(s) == 0);
    // A kill task removes metadata rows first and files after them (Druid's order): wait
    // for the tasks to finish before looking at deep storage.
    s.eventually("kill tasks finished", |s| {
        s.sql("SELECT status FROM sys.tasks WHERE type = 'kill'")
            .iter()
            .all(|t| t["status"] == "SUCCESS")
    });
    let tasks = s.sql("SELECT task_id, status FROM sys.tasks WHERE type = 'kill'");
    assert!(!tasks.is_empty());
    assert!(tasks.iter().all(|t| {
        t["task_id"]
            .as_str()
            .unwrap()
            .starts_with("coordinator-issued_kill_wikipedia_")
    }));
    // Deep storage holds no segment file any more, nor any value index sidecar.
    let files = walk_all(&dir.path().join("data/deep-storage"));
    assert_eq!(files, Vec::<String>::new());
}

/// The segment files under `dir` (not their value index sidecars).
fn walk(dir: &Path) -> Vec<String> {
    walk_all(dir)
        .into_iter()
        .filter(|p| !p.ends_with(".indexes.arrow"))
        .collect()
}

/// Every file under `dir`.
fn walk_all(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk_all(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// The overlord's worker configuration is honoured: a strong category spec sending
/// `index_parallel` tasks to another category keeps them PENDING, and so does a zero slot
/// limit for the type; lifting it lets the task run.
#[test]
fn worker_config_category_and_limits_hold_tasks_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path(), "");
    let status = |s: &Server, id: &str| {
        s.get_json(&format!("/service/indexer/v1/task/{id}/status"))
            .1["status"]
            .clone()
    };
    for strategy in [
        json!({"type": "equalDistributionWithCategorySpec",
               "workerCategorySpec": {"strong": true, "categoryMap": {"index_parallel": {"defaultCategory": "big"}}}}),
        json!({"type": "fillCapacity", "taskLimits": {"maxSlotCountByType": {"index_parallel": 0}}}),
    ] {
        assert_eq!(
            s.post_audited(
                "/druid/indexer/v1/worker",
                &json!({"selectStrategy": strategy}),
                "",
                ""
            )
            .0,
            200
        );
        let (code, body) = s.post_json("/service/indexer/v1/task", &hourly_wikipedia());
        assert_eq!(code, 200, "{body}");
        let id = body["task"].as_str().unwrap().to_string();
        std::thread::sleep(Duration::from_millis(2500));
        let st = status(&s, &id);
        assert_eq!(
            (st["status"].as_str(), st["runnerStatusCode"].as_str()),
            (Some("RUNNING"), Some("PENDING")),
            "{st}"
        );
        assert_eq!(
            s.get_json("/druid/indexer/v1/workers").1[0]["currCapacityUsed"],
            0
        );
        assert_eq!(
            s.post_audited(
                "/druid/indexer/v1/worker",
                &json!({"selectStrategy": {"type": "fillCapacity"}}),
                "",
                ""
            )
            .0,
            200
        );
        let st = s.wait_task(&id);
        assert_eq!(st["status"], "SUCCESS", "{st}");
    }
}

/// kill -9 at moments around coordinator runs loses nothing: a datasource's drops are one
/// transaction (all 24 or none after the crash), the rules and their history are kept, and
/// the next run after the restart finishes the job.
#[test]
fn kill9_around_coordinator_runs_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_fast(dir.path(), "");
    let st = s.run_task(&hourly_wikipedia());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        s.post_audited(
            "/druid/coordinator/v1/rules/wikipedia",
            &json!([{"type": "dropForever"}]),
            "k",
            "9"
        )
        .0,
        200
    );
    // The coordinator runs every second; die somewhere in the next one.
    std::thread::sleep(Duration::from_millis(700));
    s.kill9();
    // Restart without running the coordinator: the state is whole.
    let props = dir.path().join("slow.properties");
    std::fs::write(&props, "service.coordinator.startDelay=PT300S\n").unwrap();
    let s = Server::start_with_args(
        &dir.path().join("data"),
        &["--config", props.to_str().unwrap()],
    );
    let used = s.used_segments();
    assert!(
        used == 0 || used == 24,
        "{used} used segments after kill -9"
    );
    assert_eq!(s.count_rows_or_zero(), if used == 24 { 39_244 } else { 0 });
    assert_eq!(
        s.get_json("/druid/coordinator/v1/rules/wikipedia").1,
        json!([{"type": "dropForever"}])
    );
    assert_eq!(
        s.get_json("/druid/coordinator/v1/rules/wikipedia/history")
            .1[0]["auditInfo"],
        json!({"author": "k", "comment": "9", "ip": "127.0.0.1"})
    );
    s.kill9();
    // The next run finishes the job.
    let s = start_fast(dir.path(), "");
    s.eventually("all dropped", |s| s.used_segments() == 0);
}

impl Server {
    /// `COUNT(*)` of wikipedia, 0 when the table has no rows or is unknown.
    fn count_rows_or_zero(&self) -> i64 {
        let (code, body) = self.post_json(
            "/service/v2/sql",
            &json!({"query": "SELECT COUNT(*) AS c FROM wikipedia"}),
        );
        if code == 200 {
            body[0]["c"].as_i64().unwrap_or(0)
        } else {
            0
        }
    }
}
