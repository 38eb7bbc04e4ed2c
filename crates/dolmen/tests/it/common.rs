//! Starting and stopping the real binary, and helpers the stream tests share (unique names,
//! kill schedules, id sums).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// A `dolmen server` child process, killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) client: reqwest::blocking::Client,
}

/// Path of the examples directory in the repository.
pub(crate) fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/quickstart")
        .canonicalize()
        .unwrap()
}

/// Waits for a line on the child's stdout starting with `prefix`, returning the rest.
pub(crate) fn wait_for_line(
    child: &mut Child,
    prefix: &str,
    timeout: Duration,
) -> (String, mpsc::Receiver<String>) {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(rest) = line.strip_prefix(prefix) {
                    return (rest.trim().to_string(), rx);
                }
            }
            Err(_) => panic!("no line starting with [{prefix}] within {timeout:?}"),
        }
    }
}

impl Server {
    /// Starts `dolmen server --port 0 --data-dir <dir>`.
    pub(crate) fn start(data_dir: &Path) -> Server {
        Server::start_with_args(data_dir, &[])
    }

    /// Starts `dolmen server --port 0 --data-dir <dir> <extra args>`.
    pub(crate) fn start_with_args(data_dir: &Path, extra: &[&str]) -> Server {
        Server::start_with_env(data_dir, extra, &[])
    }

    /// Starts `dolmen server --port 0 --data-dir <dir> <extra args>` with environment
    /// variables `env` set.
    pub(crate) fn start_with_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dolmen"))
            .args(["server", "--port", "0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .envs(env.iter().copied())
            .env("DOLMEN_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn dolmen");
        let (url, _rx) = wait_for_line(&mut child, "Dolmen listening on ", Duration::from_secs(60));
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let s = Server { child, url, client };
        assert_eq!(s.get_json("/status/health").1, json!(true));
        s
    }

    pub(crate) fn get(&self, path: &str) -> reqwest::blocking::Response {
        self.client
            .get(format!("{}{path}", self.url))
            .send()
            .unwrap()
    }

    pub(crate) fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.get(path);
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub(crate) fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .json(body)
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub(crate) fn post_raw(
        &self,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut req = self
            .client
            .post(format!("{}{path}", self.url))
            .body(body.to_string());
        if let Some(ct) = content_type {
            req = req.header("Content-Type", ct);
        }
        let r = req.send().unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        (status, headers, r.text().unwrap())
    }

    /// Runs SQL, expecting 200; returns the rows of the default `object` format.
    pub(crate) fn sql(&self, query: &str) -> Vec<Value> {
        let (status, body) = self.post_json("/service/v2/sql", &json!({ "query": query }));
        assert_eq!(status, 200, "{query}: {body}");
        body.as_array().cloned().unwrap_or_default()
    }

    /// Submits a task and waits for it to finish; returns its final status object.
    pub(crate) fn run_task(&self, spec: &Value) -> Value {
        let (status, body) = self.post_json("/service/indexer/v1/task", spec);
        assert_eq!(status, 200, "{body}");
        let id = body["task"].as_str().unwrap().to_string();
        self.wait_task(&id)
    }

    pub(crate) fn wait_task(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let (code, st) = self.get_json(&format!("/service/indexer/v1/task/{id}/status"));
            assert_eq!(code, 200, "{st}");
            if st["status"]["status"] != "RUNNING" {
                return st["status"].clone();
            }
            assert!(Instant::now() < deadline, "task {id} did not finish");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM and wait (graceful shutdown).
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        send_signal(self.child.id(), Sig::Term);
        let status = wait_timeout(&mut self.child, Duration::from_secs(60));
        std::mem::forget(self);
        status
    }

    /// SIGKILL (crash).
    pub(crate) fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::forget(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn wait_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A signal a test sends to a server process.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sig {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM (a service manager's stop).
    Term,
}

/// Sends `sig` to process `pid` (the kill(2) system call: a minimal Debian has no `kill`
/// command).
pub(crate) fn send_signal(pid: u32, sig: Sig) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a child's pid is positive");
    let sig = match sig {
        Sig::Int => rustix::process::Signal::INT,
        Sig::Term => rustix::process::Signal::TERM,
    };
    let _ = rustix::process::kill_process(pid, sig);
}

/// Druid's quickstart spec with `baseDir` pointing at the repository's examples.
pub(crate) fn wikipedia_spec() -> Value {
    let text = std::fs::read_to_string(examples_dir().join("specs/wikipedia-index.json")).unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] =
        json!(examples_dir().display().to_string());
    spec
}

impl Server {
    /// `DELETE path`; returns the status and the JSON body (null when empty or not JSON).
    pub(crate) fn delete(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .delete(format!("{}{path}", self.url))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    /// `POST path` with no body; returns the status and the JSON body (null when empty).
    pub(crate) fn post_empty(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    /// Submits a task, expecting 200; returns its id.
    pub(crate) fn submit(&self, spec: &Value) -> String {
        let (code, body) = self.post_json("/service/indexer/v1/task", spec);
        assert_eq!(code, 200, "{body}");
        body["task"].as_str().unwrap().to_string()
    }

    /// The status object of a task (`GET /task/{id}/status`'s `status`).
    pub(crate) fn task_status(&self, id: &str) -> Value {
        let (code, st) = self.get_json(&format!("/service/indexer/v1/task/{id}/status"));
        assert_eq!(code, 200, "{st}");
        st["status"].clone()
    }

    /// Waits until a task has processed at least one row (it is mid-flight).
    pub(crate) fn wait_until_reading(&self, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (_, report) = self.get_json(&format!("/service/indexer/v1/task/{id}/reports"));
            let processed = report["ingestionStatsAndErrors"]["payload"]["rowStats"]
                ["buildSegments"]["processed"]
                .as_u64()
                .unwrap_or(0);
            if processed > 0 {
                return;
            }
            assert!(Instant::now() < deadline, "task {id} did not start reading");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs SQL and returns the single `c` column of a one-row answer, or `None` when the
    /// query fails (e.g. the datasource has no visible segments).
    pub(crate) fn count(&self, data_source: &str) -> Option<i64> {
        let (code, body) = self.post_json(
            "/service/v2/sql",
            &json!({ "query": format!("SELECT COUNT(*) AS c FROM \"{data_source}\"") }),
        );
        (code == 200).then(|| body[0]["c"].as_i64().unwrap())
    }
}

/// An `index_parallel` spec over inline JSON lines (`{"ts": <ms>, "page": ...}` rows), DAY
/// segments, no rollup; `intervals` becomes `granularitySpec.intervals` when not empty.
pub(crate) fn inline_spec(
    data_source: &str,
    data: &str,
    intervals: &[&str],
    append: bool,
) -> Value {
    let mut granularity =
        json!({"segmentGranularity": "day", "queryGranularity": "none", "rollup": false});
    if !intervals.is_empty() {
        granularity["intervals"] = json!(intervals);
    }
    json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": data_source,
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["page"]},
                "granularitySpec": granularity
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": data},
                "inputFormat": {"type": "json"},
                "appendToExisting": append
            }
        }
    })
}

/// Inline JSON lines: `n` rows starting at `start_ms`, `step_ms` apart.
pub(crate) fn inline_rows(start_ms: i64, step_ms: i64, n: usize) -> String {
    let mut data = String::new();
    for i in 0..n {
        data.push_str(&format!(
            "{{\"ts\":{},\"page\":\"p{}\"}}\n",
            start_ms + i as i64 * step_ms,
            i % 1000
        ));
    }
    data
}

/// A spec that takes seconds to run: 1,200,000 JSON rows over one hour of 2020-09-13 (inside
/// `2020-09-13/2020-09-14`) read from a file written under `dir` (a `local` input source keeps
/// the task payload small), with small in-memory buffers.
pub(crate) fn long_task_spec(
    dir: &Path,
    data_source: &str,
    intervals: &[&str],
    append: bool,
) -> Value {
    let input = dir.join("long-input");
    std::fs::create_dir_all(&input).unwrap();
    let file = input.join("rows.json");
    if !file.exists() {
        std::fs::write(&file, inline_rows(1_599_955_200_000, 1, 1_200_000)).unwrap();
    }
    let mut spec = inline_spec(data_source, "", intervals, append);
    spec["spec"]["ioConfig"]["inputSource"] =
        json!({"type": "local", "baseDir": input.display().to_string(), "filter": "rows.json"});
    spec["spec"]["tuningConfig"] = json!({"type": "index_parallel", "maxRowsInMemory": 1000});
    spec
}

/// Every `.parquet` file under `<data_dir>/deep-storage`.
pub(crate) fn deep_storage_files(data_dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&data_dir.join("deep-storage"), &mut out);
    out.sort();
    out
}

/// The sum of the event ids `ids` (what `SUM(id)` of their rows is).
pub(crate) fn sum_ids(ids: impl IntoIterator<Item = i64>) -> i64 {
    ids.into_iter().sum()
}

/// A name no other test (or earlier run against the same service) uses: `prefix-<ns>-<n>`.
pub(crate) fn unique_name(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The pseudo-random numbers (xorshift) that pick kill moments; the seed is printed so a
/// failing schedule can be replayed.
pub(crate) fn kill_schedule() -> impl FnMut() -> u64 {
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill schedule seed: {seed}");
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
