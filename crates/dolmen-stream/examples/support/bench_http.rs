//! HTTP and process helpers shared by the streaming benchmarks (`stream_bench`,
//! `kinesis_bench`), included by each with `#[path]` (a directory without `main.rs` is not an
//! example of its own).

use serde_json::{Value, json};

/// `SELECT COUNT(*)` of datasource `ds` over `/druid/v2/sql`; 0 while it does not answer yet.
pub(crate) fn count(http: &reqwest::blocking::Client, url: &str, ds: &str) -> i64 {
    let r = http
        .post(format!("{url}/druid/v2/sql"))
        .json(&json!({"query": format!("SELECT COUNT(*) AS c FROM \"{ds}\"")}))
        .send();
    match r {
        Ok(r) if r.status().is_success() => r
            .json::<Value>()
            .ok()
            .and_then(|v| v[0]["c"].as_i64())
            .unwrap_or(0),
        _ => 0,
    }
}

/// CPU seconds (user + system) of a process.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Posts a supervisor spec; panics with the answer when it is refused.
pub(crate) fn post_supervisor(http: &reqwest::blocking::Client, url: &str, body: &Value) {
    let r = http
        .post(format!("{url}/druid/indexer/v1/supervisor"))
        .json(body)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "supervisor: {}", r.text().unwrap());
}

/// Terminates supervisor `id` (best effort).
pub(crate) fn terminate(http: &reqwest::blocking::Client, url: &str, id: &str) {
    let _ = http
        .post(format!("{url}/druid/indexer/v1/supervisor/{id}/terminate"))
        .send();
}
