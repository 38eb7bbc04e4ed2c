//! Memory stays bounded on inputs many times `maxRowsInMemory` / `maxBytesInMemory`: the peak
//! resident set of a process that runs only this test grows by far less than the rows would take
//! if they were all held at once. The test binary holds every integration test of the crate, so
//! the test re-runs the binary on itself alone (`--exact`) and measures in that child.

use crate::support;

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

/// Peak resident set size of this process in bytes (`VmHWM` of `/proc/self/status`).
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// A CSV of `rows` events with a 120-byte, all-distinct `session` dimension (so rollup cannot
/// shrink anything); returns its size in bytes.
fn write_events(path: &Path, rows: usize) -> usize {
    let mut out = String::with_capacity(rows * 180);
    out.push_str("ts,channel,session,added\n");
    for i in 0..rows {
        let minute = i % 1440;
        writeln!(
            out,
            "2020-01-01T{:02}:{:02}:00Z,c{},{:0>120},{}",
            minute / 60,
            minute % 60,
            i % 50,
            i,
            i % 1000
        )
        .unwrap();
    }
    std::fs::write(path, &out).unwrap();
    out.len()
}

fn spec(dir: &Path, file: &str, tuning: Value) -> Value {
    let datasource = format!("big_{}", file.replace('.', "_"));
    json!({
        "type": "index_parallel",
        "context": {"useColumnarIngestion": false},
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["channel", "session"]},
                "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": true}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": dir.to_str().unwrap(), "filter": file},
                "inputFormat": {"type": "csv", "findColumnsFromHeader": true}
            },
            "tuningConfig": tuning
        }
    })
}

/// Set in the child process that runs the measurement.
const CHILD_ENV: &str = "DOLMEN_BOUNDED_MEMORY_CHILD";

#[test]
fn row_path_memory_is_bounded_by_max_rows_and_max_bytes_in_memory() {
    if std::env::var_os(CHILD_ENV).is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(measure_row_path_memory());
        return;
    }
    // The test's name as libtest filters it: the module path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::row_path_memory_is_bounded_by_max_rows_and_max_bytes_in_memory");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    // A filter that matched nothing would also succeed: the child must have run exactly this test.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "child did not run {name}:\n{stdout}"
    );
}

async fn measure_row_path_memory() {
    let dir = tempfile::tempdir().unwrap();
    write_events(&dir.path().join("small.csv"), 40_000);
    let big_rows = 600_000;
    let big_bytes = write_events(&dir.path().join("big.csv"), big_rows);

    // Warm-up on the small file: allocator arenas, runtime threads, Parquet writers.
    let (r, _) = support::run_task(
        dir.path(),
        "small",
        &spec(
            dir.path(),
            "small.csv",
            json!({"type": "index_parallel", "maxRowsInMemory": 5000}),
        ),
    )
    .await;
    r.unwrap();
    let base = peak_rss();

    // 120 times maxRowsInMemory.
    let (r, stats) = support::run_task(
        dir.path(),
        "rows",
        &spec(
            dir.path(),
            "big.csv",
            json!({"type": "index_parallel", "maxRowsInMemory": 5000}),
        ),
    )
    .await;
    let segments = r.unwrap();
    assert_eq!(stats.counters_json()["processed"], json!(big_rows));
    let total: u64 = segments.iter().map(|s| s.num_rows).sum();
    assert_eq!(total, big_rows as u64);
    let after_rows = peak_rss();

    // Rows unbounded, bytes bounded at 4 MiB: many times smaller than the input.
    let (r, _) = support::run_task(
        dir.path(),
        "bytes",
        &spec(
            dir.path(),
            "big*.csv",
            json!({"type": "index_parallel", "maxRowsInMemory": 100_000_000, "maxBytesInMemory": 4 << 20}),
        ),
    )
    .await;
    let total: u64 = r.unwrap().iter().map(|s| s.num_rows).sum();
    assert_eq!(total, big_rows as u64);
    let after_bytes = peak_rss();
    eprintln!(
        "input {big_bytes} B; peak base {base}, after rows-bounded {after_rows}, after bytes-bounded {after_bytes}"
    );

    // Held at once, the big file's rows take well over its 90 MB of text (boxed strings, row
    // vectors, hash-map entries). Bounded, the peak grows by a small fraction of that.
    let limit = big_bytes / 2;
    assert!(
        after_rows.saturating_sub(base) < limit,
        "peak grew by {} bytes with maxRowsInMemory (limit {limit}, input {big_bytes})",
        after_rows - base
    );
    assert!(
        after_bytes.saturating_sub(base) < limit,
        "peak grew by {} bytes with maxBytesInMemory (limit {limit}, input {big_bytes})",
        after_bytes - base
    );
}
