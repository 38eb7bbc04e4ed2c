//! Process lifecycle: configuration, status, crash recovery, quickstart.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::common::{Server, Sig, send_signal, wait_for_line, wait_timeout};

/// Submits a task over 400,000 inline rows into `data_source` and returns its id once the task
/// is reading rows (so that a kill or shutdown lands mid-flight).
fn start_long_task(server: &Server, data_source: &str) -> String {
    let mut data = String::new();
    for i in 0..400_000 {
        data.push_str(&format!(
            "{{\"ts\":{},\"a\":\"v{}\"}}\n",
            1_600_000_000_000i64 + i,
            i % 1000
        ));
    }
    let spec = json!({
        "type": "index",
        "spec": {
            "dataSchema": {
                "dataSource": data_source,
                "timestampSpec": {"column": "ts", "format": "millis"},
                "granularitySpec": {"segmentGranularity": "hour", "rollup": false}
            },
            "ioConfig": {"inputSource": {"type": "inline", "data": data}, "inputFormat": {"type": "json"}},
            "tuningConfig": {"maxRowsInMemory": 1000}
        }
    });
    let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
    assert_eq!(code, 200, "{body}");
    let id = body["task"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, report) = server.get_json(&format!("/service/indexer/v1/task/{id}/reports"));
        if report["ingestionStatsAndErrors"]["payload"]["rowStats"]["buildSegments"]["processed"]
            .as_u64()
            .unwrap_or(0)
            > 0
        {
            return id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {id} did not start reading"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn status_and_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = std::fs::File::create(dir.path().join("runtime.properties")).unwrap();
    writeln!(
        props,
        "# Dolmen\nservice.plaintextPort=0\nservice.dataDir={}",
        dir.path().join("from-file").display()
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dolmen"))
        .args(["server", "--config"])
        .arg(dir.path().join("runtime.properties"))
        .env("DOLMEN_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (url, _rx) = wait_for_line(&mut child, "Dolmen listening on ", Duration::from_secs(60));
    let status: serde_json::Value = reqwest::blocking::get(format!("{url}/status"))
        .unwrap()
        .json()
        .unwrap();
    assert!(status["version"].is_string());
    assert!(
        status["memory"]["usedMemory"].as_u64().unwrap() > 0,
        "{status}"
    );
    let health: serde_json::Value = reqwest::blocking::get(format!("{url}/status/health"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(health, json!(true));
    assert!(dir.path().join("from-file/metadata.db").exists());
    send_signal(child.id(), Sig::Int);
    assert!(wait_timeout(&mut child, Duration::from_secs(30)).success());
}

#[test]
fn a_task_interrupted_by_kill_9_is_failed_on_restart_and_published_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let id = start_long_task(&server, "killed");
    server.kill9();
    let server = Server::start(dir.path());
    let st = server.wait_task(&id);
    if st["status"] == "FAILED" {
        assert!(
            st["errorMsg"].as_str().unwrap().contains("interrupted"),
            "{st}"
        );
        let (code, _) = server.post_json(
            "/service/v2/sql",
            &json!({"query": "SELECT COUNT(*) FROM killed"}),
        );
        assert_eq!(code, 400, "nothing of the interrupted task may be visible");
    } else {
        // The task finished before the kill: then all of it is visible.
        assert_eq!(st["status"], "SUCCESS");
        assert_eq!(
            server.sql("SELECT COUNT(*) AS c FROM killed"),
            vec![json!({"c": 400_000})]
        );
    }
}

/// As the README runs it: the default data directory, `var`, relative to the working directory
/// (segment files are then found by relative paths, which the query engine's object store
/// must not read as rooted at `/`).
#[test]
fn quickstart_loads_once_and_serves_until_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    for run in 0..2 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dolmen"))
            .args(["quickstart", "--port", "0"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (url, rx) = wait_for_line(&mut child, "Dolmen is running at ", Duration::from_secs(60));
        let url = url.split_whitespace().next().unwrap().to_string();
        let mut lines = Vec::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .expect("quickstart output");
            let done = line.contains("Press Ctrl-C");
            lines.push(line);
            if done {
                break;
            }
        }
        let out = lines.join("\n");
        if run == 0 {
            assert!(out.contains("loaded 39244 rows"), "{out}");
        } else {
            assert!(out.contains("already loaded"), "{out}");
        }
        assert!(out.contains("curl -s -X POST"), "{out}");
        assert!(out.contains("Wikipedia:Vandalismusmeldung"), "{out}");
        assert!(!out.contains("failed"), "{out}");
        assert!(dir.path().join("var").is_dir());
        let body: serde_json::Value = reqwest::blocking::Client::new()
            .post(format!("{url}/druid/v2/sql"))
            .json(&json!({"query": "SELECT COUNT(*) AS c FROM wikipedia"}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(body, json!([{"c": 39244}]));
        send_signal(child.id(), Sig::Int);
        assert!(wait_timeout(&mut child, Duration::from_secs(30)).success());
    }
}

#[test]
fn sigterm_stops_running_tasks_and_publishes_nothing_half_done() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let id = start_long_task(&server, "stopped");
    let code = server.terminate();
    assert!(code.success(), "{code:?}");
    let server = Server::start(dir.path());
    let st = server.wait_task(&id);
    assert_eq!(st["status"], "FAILED", "{st}");
    assert!(
        st["errorMsg"].as_str().unwrap().contains("shut down"),
        "{st}"
    );
    let (code, _) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT COUNT(*) FROM stopped"}),
    );
    assert_eq!(code, 400, "nothing of the stopped task may be visible");
}
