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

const ROWS_SKIPPED: &str = "druid_segment_valueindex_rowsskipped";

/// Array filters use the element indexes built with the segments (ADR 0029): Druid's
/// `docs/release-info/migr-mvd-array.md` filters verbatim over `tags` stored as an
/// `ARRAY<STRING>` (`array_example`) and as a multi-value string (`mvd_example`), plus a rare
/// element, give the right rows, and `segment/valueIndex/rowsSkipped` counts the rows of the
/// three day segments they leave unread, before and after a restart.
#[test]
fn array_filters_skip_the_rows_their_element_indexes_rule_out() {
    let dir = tempfile::tempdir().unwrap();
    // The guide's rows on the first day, then 300 rows a day over two more days; one row on
    // the third day holds the rare `needle`.
    let mut data = String::from(
        r#"{"ts":"2024-01-01","label":"row1","tags":["t1","t2","t3"]}
{"ts":"2024-01-01","label":"row2","tags":["t3","t4","t5"]}
{"ts":"2024-01-01","label":"row3","tags":["t5","t6","t7"]}
"#,
    );
    for day in ["2024-01-02", "2024-01-03"] {
        for i in 0..300 {
            let tags = if day == "2024-01-03" && i == 123 {
                r#"["x10","needle"]"#.to_string()
            } else {
                format!(r#"["x{}","y{}"]"#, 10 + i % 5, 20 + i % 3)
            };
            data.push_str(&format!(
                r#"{{"ts":"{day}T00:00:{:02}","label":"{day}-{i}","tags":{tags}}}"#,
                i % 60
            ));
            data.push('\n');
        }
    }
    let total = 603.0;
    let load = |server: &Server| {
        for (table, tags) in [
            ("array_example", "\"tags\""),
            ("mvd_example", "ARRAY_TO_MV(\"tags\") AS \"tags\""),
        ] {
            let sql = format!(
                r#"REPLACE INTO "{table}" OVERWRITE ALL
SELECT TIME_PARSE("ts") AS "__time", "label", {tags}
FROM TABLE(EXTERN('{}', '{{"type":"json"}}'))
  EXTEND ("ts" VARCHAR, "label" VARCHAR, "tags" VARCHAR ARRAY)
PARTITIONED BY DAY"#,
                json!({"type": "inline", "data": data})
            );
            let st = crate::arrays::ingest(server, &sql, json!({"arrayIngestMode": "array"}));
            assert_eq!(st["status"], "SUCCESS", "{st}");
        }
    };
    // (query, labels, rows left unread of the 603)
    let cases: &[(&str, &[&str], f64)] = &[
        (
            "SELECT label, tags\nFROM \"array_example\"\nWHERE ARRAY_CONTAINS(tags, 't3')",
            &["row1", "row2"],
            total - 2.0,
        ),
        (
            "SELECT label, tags\nFROM \"mvd_example\"\nWHERE tags = 't3'",
            &["row1", "row2"],
            total - 2.0,
        ),
        (
            "SELECT *\nFROM \"array_example\"\nWHERE ARRAY_OVERLAP(tags, ARRAY['t1', 't7'])",
            &["row1", "row3"],
            total - 2.0,
        ),
        (
            "SELECT label FROM mvd_example WHERE MV_OVERLAP(tags, ARRAY['t1', 't7'])",
            &["row1", "row3"],
            total - 2.0,
        ),
        (
            "SELECT label FROM array_example WHERE ARRAY_CONTAINS(tags, ARRAY['x10', 'needle'])",
            &["2024-01-03-123"],
            total - 1.0,
        ),
        (
            "SELECT label FROM mvd_example WHERE MV_CONTAINS(tags, 'needle')",
            &["2024-01-03-123"],
            total - 1.0,
        ),
        (
            "SELECT label FROM mvd_example WHERE tags IN ('needle', 't7')",
            &["2024-01-03-123", "row3"],
            total - 2.0,
        ),
    ];
    let check = |server: &Server| {
        for (sql, want, unread) in cases {
            let before = server.scrape().value(ROWS_SKIPPED, &[]);
            let mut got: Vec<String> = server
                .sql(sql)
                .iter()
                .map(|r| r["label"].as_str().unwrap().to_string())
                .collect();
            got.sort();
            assert_eq!(&got, want, "{sql}");
            let after = server.scrape().value(ROWS_SKIPPED, &[]);
            assert_eq!(after - before, *unread, "rows left unread by {sql}");
        }
    };
    let server = Server::start(dir.path());
    load(&server);
    check(&server);
    server.terminate();
    // After a restart, from the sidecars in deep storage: nothing built, the same skips.
    let server = Server::start(dir.path());
    check(&server);
    assert_eq!(server.scrape().value(BUILT, &[]), 0.0);
}
