//! Starting and stopping the real binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
        let mut child = Command::new(env!("CARGO_BIN_EXE_dolmen"))
            .args(["server", "--port", "0", "--data-dir"])
            .arg(data_dir)
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
        let pid = self.child.id() as i32;
        unsafe_kill(pid, 15);
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

/// Sends a signal with the `kill` command (no libc dependency in tests).
pub(crate) fn unsafe_kill(pid: i32, sig: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// Druid's quickstart spec with `baseDir` pointing at the repository's examples.
pub(crate) fn wikipedia_spec() -> Value {
    let text = std::fs::read_to_string(examples_dir().join("specs/wikipedia-index.json")).unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] =
        json!(examples_dir().display().to_string());
    spec
}
