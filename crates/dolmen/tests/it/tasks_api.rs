//! The tasks API end to end: per-state lists and their filters, `POST /taskStatus`,
//! `shutdownAllTasks`, `pendingSegments`, leadership, task summary fields, time-chunk lock
//! conflicts between tasks, and a restart while a task runs.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, inline_rows, inline_spec, long_task_spec};

const IDX: &str = "/service/indexer/v1";
/// 2020-09-13T00:00:00Z: the day `long_task_spec` writes into.
const SEP_13_2020: i64 = 1_599_955_200_000;
const LOCKED_DAY: &str = "2020-09-13/2020-09-14";

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

/// A small task writing three rows into the locked day.
fn small_spec(data_source: &str, append: bool) -> Value {
    inline_spec(
        data_source,
        &inline_rows(SEP_13_2020 + 7_200_000, 1000, 3),
        if append { &[] } else { &[LOCKED_DAY] },
        append,
    )
}

#[test]
fn task_lists_status_maps_and_summary_fields() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ok = server.submit(&small_spec("tasks", false));
    assert_eq!(server.wait_task(&ok)["status"], "SUCCESS");
    // A failing task: every row unparseable, no parse exception allowed.
    let mut bad = inline_spec("tasks", "not json\n", &[], false);
    bad["spec"]["tuningConfig"] = json!({"type": "index_parallel", "maxParseExceptions": 0});
    let failed = server.submit(&bad);
    let st = server.wait_task(&failed);
    assert_eq!(st["status"], "FAILED", "{st}");

    // Summary fields hold true values.
    let (code, complete) = server.get_json(&format!("{IDX}/completeTasks"));
    assert_eq!(code, 200);
    assert_eq!(
        ids(&complete),
        vec![failed.clone(), ok.clone()],
        "newest first"
    );
    let t = &complete[1];
    for key in [
        "id",
        "groupId",
        "type",
        "createdTime",
        "queueInsertionTime",
        "statusCode",
        "status",
        "runnerStatusCode",
        "duration",
        "location",
        "dataSource",
        "errorMsg",
    ] {
        assert!(t.get(key).is_some(), "{key} missing: {t}");
    }
    assert_eq!(t["type"], "index_parallel");
    assert_eq!(t["groupId"], ok.as_str());
    assert_eq!(t["statusCode"], "SUCCESS");
    assert_eq!(t["runnerStatusCode"], "NONE");
    assert!(t["duration"].as_i64().unwrap() >= 0);
    assert_eq!(t["errorMsg"], Value::Null);
    assert!(
        t["queueInsertionTime"].as_str().unwrap().starts_with("20"),
        "{t}"
    );
    assert_eq!(t["queueInsertionTime"], t["createdTime"]);
    assert!(t["location"]["host"].is_string(), "{t}");
    assert!(t["location"]["port"].as_i64().unwrap() > 0);
    assert_eq!(t["location"]["tlsPort"], -1);
    assert_eq!(complete[0]["statusCode"], "FAILED");
    assert!(
        complete[0]["errorMsg"].as_str().unwrap().len() > 3,
        "{}",
        complete[0]
    );

    // Filters, on every list and under the Druid prefix.
    for prefix in [IDX, "/druid/indexer/v1"] {
        let get = |q: &str| {
            let (code, body) = server.get_json(&format!("{prefix}/{q}"));
            assert_eq!(code, 200, "{q}: {body}");
            ids(&body)
        };
        assert_eq!(get("completeTasks?max=1"), vec![failed.clone()]);
        assert_eq!(
            get("completeTasks?datasource=tasks&type=index_parallel").len(),
            2
        );
        assert!(get("completeTasks?datasource=other").is_empty());
        assert!(get("completeTasks?type=kill").is_empty());
        assert!(get("completeTasks?createdTimeInterval=2000-01-01_2000-01-02").is_empty());
        assert_eq!(
            get("completeTasks?createdTimeInterval=2000-01-01_2999-01-01").len(),
            2
        );
        for list in ["runningTasks", "waitingTasks", "pendingTasks"] {
            assert!(get(list).is_empty(), "{list}");
            assert!(get(&format!("{list}?datasource=tasks&type=index")).is_empty());
        }
        assert_eq!(get("tasks?state=complete&max=5").len(), 2);
    }
    let (code, body) = server.get_json(&format!(
        "{IDX}/completeTasks?createdTimeInterval=yesterday"
    ));
    assert_eq!(code, 500, "spec: invalid parameter");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("createdTimeInterval")
    );

    // POST /taskStatus.
    let (code, map) = server.post_json(
        &format!("{IDX}/taskStatus"),
        &json!([ok, failed, "nope", ok]),
    );
    assert_eq!(code, 200, "{map}");
    let obj = map.as_object().unwrap();
    assert_eq!(obj.len(), 2, "{map}");
    assert_eq!(map[&ok]["id"], ok.as_str());
    assert_eq!(map[&ok]["status"], "SUCCESS");
    assert!(map[&ok]["duration"].as_i64().unwrap() >= 0);
    assert_eq!(map[&ok]["errorMsg"], Value::Null);
    assert_eq!(map[&ok]["location"]["tlsPort"], -1);
    assert_eq!(map[&failed]["status"], "FAILED");
    assert!(map[&failed]["errorMsg"].is_string());
    let status_path = format!("{IDX}/taskStatus");
    for (ct, body, want) in [
        (None, format!("[\"{ok}\"]"), 415),
        (Some("text/plain"), format!("[\"{ok}\"]"), 415),
        (Some("application/json"), String::new(), 415),
        (None, String::new(), 415),
        (Some("application/json"), "{\"a\":1}".into(), 400),
        (Some("application/json"), "[1, 2]".into(), 400),
        (Some("application/json"), "[".into(), 400),
        (Some("application/json"), "[]".into(), 400),
    ] {
        let (code, _, text) = server.post_raw(&status_path, ct, &body);
        assert_eq!(code, want, "{ct:?} {body}: {text}");
        let err: Value = serde_json::from_str(&text).unwrap();
        assert!(err["error"].is_string(), "{text}");
    }

    // Unknown task status; shutdownAllTasks with nothing to shut down.
    assert_eq!(
        server.get_json(&format!("{IDX}/task/nope/status")),
        (404, json!({"task": "nope", "status": null}))
    );
    let (code, body) = server.post_empty(&format!("{IDX}/datasources/tasks/shutdownAllTasks"));
    assert_eq!(code, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("tasks"), "{body}");

    // pendingSegments, leadership.
    assert_eq!(
        server.delete(&format!("{IDX}/pendingSegments/tasks")),
        (200, json!({"numDeleted": 0}))
    );
    assert_eq!(
        server.delete("/druid/indexer/v1/pendingSegments/tasks?interval=2020-01-01_2021-01-01"),
        (200, json!({"numDeleted": 0}))
    );
    let (code, body) = server.delete(&format!("{IDX}/pendingSegments/tasks?interval=bad"));
    assert_eq!(code, 400);
    assert!(body["error"].as_str().unwrap().contains("interval"));
    for path in [
        "/service/indexer/v1/isLeader",
        "/druid/indexer/v1/isLeader",
        "/druid/coordinator/v1/isLeader",
    ] {
        assert_eq!(
            server.get_json(path),
            (200, json!({"leader": true})),
            "{path}"
        );
    }
    let leader = server.get("/druid/indexer/v1/leader").text().unwrap();
    assert_eq!(leader, server.url);
}

/// Polls a task until `pred` holds for its status object, or panics after `secs`.
fn wait_for(server: &Server, id: &str, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let st = server.task_status(id);
        if pred(&st) {
            return st;
        }
        assert!(Instant::now() < deadline, "task {id}: {st}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn overwrites_of_overlapping_intervals_wait_for_each_other_and_appends_share_locks() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_args(dir.path(), &["--worker-capacity", "2"]);

    // Overwrite A holds an EXCLUSIVE lock on the day; overwrite B of the same day waits.
    let a = server.submit(&long_task_spec(dir.path(), "locks", &[LOCKED_DAY], false));
    server.wait_until_reading(&a);
    let b = server.submit(&small_spec("locks", false));
    let st = wait_for(&server, &b, 30, |s| s["runnerStatusCode"] == "WAITING");
    assert_eq!(st["statusCode"], "RUNNING");
    assert_eq!(st["duration"], -1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        server.task_status(&b)["runnerStatusCode"],
        "WAITING",
        "still waiting"
    );
    let (_, waiting) = server.get_json(&format!("{IDX}/waitingTasks?datasource=locks"));
    assert_eq!(ids(&waiting), vec![b.clone()]);
    let (_, running) = server.get_json(&format!("{IDX}/runningTasks"));
    assert_eq!(ids(&running), vec![a.clone()]);
    assert_eq!(running[0]["runnerStatusCode"], "RUNNING");
    assert!(running[0]["location"]["port"].as_i64().unwrap() > 0);
    // A kill of the day waits as well (EXCLUSIVE lock).
    let k = server.submit(&json!({"type": "kill", "dataSource": "locks", "interval": LOCKED_DAY}));
    wait_for(&server, &k, 30, |s| s["runnerStatusCode"] == "WAITING");
    // Another datasource is not blocked.
    assert_eq!(
        server.run_task(&small_spec("elsewhere", false))["status"],
        "SUCCESS"
    );

    // When A finishes (here: is shut down), B and the kill run.
    let (code, body) = server.post_empty(&format!("{IDX}/task/{a}/shutdown"));
    assert_eq!((code, body), (200, json!({"task": a})));
    let st = server.wait_task(&a);
    assert_eq!(st["status"], "FAILED");
    assert!(
        st["errorMsg"].as_str().unwrap().contains("shut down"),
        "{st}"
    );
    assert_eq!(server.wait_task(&b)["status"], "SUCCESS");
    assert_eq!(server.wait_task(&k)["status"], "SUCCESS");
    assert_eq!(server.count("locks"), Some(3));

    // Appending tasks share APPEND locks: D runs and finishes while C still runs.
    let c = server.submit(&long_task_spec(dir.path(), "appends", &[], true));
    server.wait_until_reading(&c);
    let d = server.submit(&small_spec("appends", true));
    // D can only finish before C if it did not wait for C's lock.
    let st = wait_for(&server, &d, 60, |s| s["statusCode"] != "RUNNING");
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        server.task_status(&c)["statusCode"],
        "RUNNING",
        "the long append is still running: both ran together"
    );
    assert_eq!(server.count("appends"), Some(3));

    // shutdownAllTasks stops what is left of the datasource.
    let (code, body) = server.post_empty(&format!("{IDX}/datasources/appends/shutdownAllTasks"));
    assert_eq!((code, body), (200, json!({"dataSource": "appends"})));
    let st = server.wait_task(&c);
    assert_eq!(st["status"], "FAILED");
    assert_eq!(server.count("appends"), Some(3), "nothing half-published");
}

#[test]
fn a_restart_while_a_task_runs_fails_it_and_releases_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let a = server.submit(&long_task_spec(dir.path(), "restart", &[LOCKED_DAY], false));
    server.wait_until_reading(&a);
    server.kill9();

    let server = Server::start(dir.path());
    let st = server.wait_task(&a);
    if st["status"] == "FAILED" {
        let msg = st["errorMsg"].as_str().unwrap();
        assert!(msg.contains("interrupted"), "{msg}");
        assert_eq!(st["runnerStatusCode"], "NONE");
        assert!(st["duration"].as_i64().unwrap() >= 0);
    } else {
        assert_eq!(st["status"], "SUCCESS", "finished before the kill");
    }
    let (_, active) = server.get_json(&format!("{IDX}/tasks?state=running"));
    assert!(ids(&active).is_empty(), "{active}");
    // The lock is gone: an overwrite of the same day runs at once.
    let b = server.submit(&small_spec("restart", false));
    let st = server.wait_task(&b);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(server.count("restart"), Some(3));
}
