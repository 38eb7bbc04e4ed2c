//! Value indexes are built with the segment and loaded with it (ADR 0025): after an ingestion
//! and a restart, the first filtered query builds nothing (`segment/valueIndex/built` stays 0)
//! and reads the indexes from the sidecars stored beside the segments in deep storage; segments
//! whose sidecars are gone (written before sidecars existed) still answer, and get their
//! indexes built in the background.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Server, deep_storage_files, inline_rows, inline_spec};

const LOADED: &str = "druid_segment_valueindex_loaded";
const BUILT: &str = "druid_segment_valueindex_built";
const SIDECAR: &str = ".indexes.arrow";

fn sidecar(p: &Path) -> PathBuf {
    PathBuf::from(format!("{}{SIDECAR}", p.display()))
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, suffix, out);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, suffix, &mut out);
    out.sort();
    out
}

fn count_where(server: &Server, page: &str) -> i64 {
    let rows = server.sql(&format!(
        "SELECT COUNT(*) AS c, COUNT(DISTINCT page) AS d FROM idx WHERE page = '{page}'"
    ));
    let c = rows[0]["c"].as_i64().unwrap();
    assert_eq!(rows[0]["d"], json!(i64::from(c > 0)), "{rows:?}");
    c
}

#[test]
fn the_first_filtered_query_after_a_restart_builds_no_index() {
    let dir = tempfile::tempdir().unwrap();
    // 6,000 rows over three days (three segments), pages p0..p999.
    let day = 86_400_000;
    let data = inline_rows(
        1_600_000_000_000 - 1_600_000_000_000 % day,
        3 * day / 6_000,
        6_000,
    );
    {
        let server = Server::start(dir.path());
        let st = server.run_task(&inline_spec("idx", &data, &[], false));
        assert_eq!(st["status"], json!("SUCCESS"), "{st}");
        server.terminate();
    }
    // Each segment's sidecar is in deep storage beside it.
    let segments = deep_storage_files(dir.path());
    assert_eq!(segments.len(), 3, "{segments:?}");
    for s in &segments {
        assert!(sidecar(s).is_file(), "no sidecar beside {}", s.display());
    }

    let server = Server::start(dir.path());
    let before = server.scrape();
    assert_eq!(before.value(BUILT, &[]), 0.0);
    // Loaded at start-up, before the server answered (the segment cache is warmed up).
    assert_eq!(before.value(LOADED, &[]), 3.0, "{}", before.text);
    // p7 is in rows 7, 1007, ...: six rows.
    assert_eq!(count_where(&server, "p7"), 6);
    assert_eq!(count_where(&server, "nope"), 0);
    let after = server.scrape();
    assert_eq!(after.value(BUILT, &[]), 0.0, "{}", after.text);
    // One column (page) per segment, loaded from the sidecars.
    assert_eq!(after.value(LOADED, &[]), 3.0, "{}", after.text);
    // The segment cache holds each sidecar beside its segment.
    let cached = files_ending(&dir.path().join("segment-cache"), SIDECAR);
    assert_eq!(cached.len(), 3, "{cached:?}");
    server.terminate();

    // Segments written before sidecars existed: no sidecar anywhere.
    for p in files_ending(dir.path(), SIDECAR) {
        std::fs::remove_file(p).unwrap();
    }
    let server = Server::start(dir.path());
    // Answered at once (whole files read), then the indexes are built in the background.
    assert_eq!(count_where(&server, "p7"), 6);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = server.scrape();
        if s.get(BUILT, &[]) == Some(3.0) && s.get(LOADED, &[]) == Some(3.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "indexes never built:\n{}",
            s.text
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count_where(&server, "p7"), 6);
    assert_eq!(count_where(&server, "p999"), 6);
    let cached = files_ending(&dir.path().join("segment-cache"), SIDECAR);
    assert_eq!(
        cached.len(),
        3,
        "built sidecars are kept in the cache: {cached:?}"
    );
    server.terminate();

    // Torn sidecars (they are not synced; a crash can leave one half written): built again.
    for p in files_ending(dir.path(), SIDECAR) {
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    }
    let server = Server::start(dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.scrape().get(BUILT, &[]) != Some(3.0) {
        assert!(Instant::now() < deadline, "torn sidecars never rebuilt");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count_where(&server, "p7"), 6);
    assert_eq!(count_where(&server, "p42"), 6);
    server.terminate();
}
