use std::collections::BTreeMap;

use super::*;

/// The value of the sample `name{labels}` in an exposition, labels in any order (`series` is
/// written as `name{k="v",...}`; label values here hold no `,`, `=` or `"`).
fn sample(text: &str, series: &str) -> Option<f64> {
    fn split(series: &str) -> (&str, BTreeMap<&str, &str>) {
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let labels = labels
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k, v.trim_matches('"'))
            })
            .collect();
        (name, labels)
    }
    let want = split(series);
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (split(s) == want).then(|| v.parse().unwrap())
    })
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn sql_queries_move_the_query_and_sql_metrics() {
    let m = Metrics::new(&MetricsConfig::default());
    let wiki = names(&["wikipedia"]);
    let two = names(&["a", "b"]);
    fn ok(ds: &[String], ms: u64, bytes: u64) -> SqlQueryReport<'_> {
        SqlQueryReport {
            endpoint: SqlEndpoint::Sync,
            data_sources: Some(ds),
            time: Duration::from_millis(ms),
            planning: Some(Duration::from_millis(1)),
            bytes,
            outcome: QueryOutcome::Success,
        }
    }
    m.record_sql_query(&ok(&wiki, 51, 100));
    m.record_sql_query(&ok(&wiki, 2_001, 20));
    m.record_sql_query(&ok(&two, 11, 7));
    m.record_sql_query(&SqlQueryReport {
        data_sources: None,
        planning: None,
        outcome: QueryOutcome::Failed,
        ..ok(&wiki, 3, 90)
    });
    m.record_sql_query(&SqlQueryReport {
        outcome: QueryOutcome::TimedOut,
        ..ok(&wiki, 300, 80)
    });
    m.record_sql_query(&SqlQueryReport {
        outcome: QueryOutcome::Interrupted,
        ..ok(&wiki, 20, 0)
    });
    m.record_sql_query(&SqlQueryReport {
        endpoint: SqlEndpoint::Async,
        ..ok(&wiki, 5, 300)
    });
    let text = m.encode(Format::OpenMetrics).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let v = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    assert_eq!(v("druid_query_count_total"), 6.0);
    assert_eq!(v("druid_query_success_count_total"), 3.0);
    assert_eq!(v("druid_query_failed_count_total"), 1.0);
    assert_eq!(v("druid_query_timeout_count_total"), 1.0);
    assert_eq!(v("druid_query_interrupted_count_total"), 1.0);
    // query/*: one name as it is, several as Druid's list text (sanitized).
    let wq = "{dataSource=\"wikipedia\",type=\"sql\"}";
    assert_eq!(v(&format!("druid_query_time_count{wq}")), 4.0);
    assert_eq!(v(&format!("druid_query_bytes_total{wq}")), 200.0);
    assert_eq!(
        v("druid_query_bytes_total{dataSource=\"_a_b_\",type=\"sql\"}"),
        7.0
    );
    // query/time is the time after planning, in seconds: 0.050, 2.000, 0.299 and 0.019.
    let bucket = |le: &str| {
        v(&format!(
            "druid_query_time_bucket{{dataSource=\"wikipedia\",type=\"sql\",le=\"{le}\"}}"
        ))
    };
    assert_eq!(bucket("0.1"), 2.0);
    assert_eq!(bucket("0.25"), 2.0);
    assert_eq!(bucket("0.5"), 3.0);
    assert_eq!(bucket("1.0"), 3.0);
    assert_eq!(bucket("2.5"), 4.0);
    assert_eq!(bucket("+Inf"), 4.0);
    let sum = v(&format!("druid_query_time_sum{wq}"));
    assert!(
        (sum - (0.050 + 2.000 + 0.299 + 0.019)).abs() < 1e-9,
        "{sum}"
    );
    // sqlQuery/*: Druid's list text even for one datasource; async statements count here.
    assert_eq!(
        v("druid_sqlquery_time_count{dataSource=\"_wikipedia_\"}"),
        5.0
    );
    assert_eq!(
        v("druid_sqlquery_bytes_total{dataSource=\"_wikipedia_\"}"),
        500.0
    );
    assert_eq!(
        v("druid_sqlquery_planningtimems_count{dataSource=\"_wikipedia_\"}"),
        5.0
    );
    assert_eq!(v("druid_sqlquery_time_count{dataSource=\"unknown\"}"), 1.0);
    assert_eq!(
        v("druid_sqlquery_bytes_total{dataSource=\"unknown\"}"),
        90.0
    );
    // A query that failed planning has no planning time.
    assert_eq!(
        v("druid_sqlquery_planningtimems_count{dataSource=\"unknown\"}"),
        0.0
    );
    // Help and type lines follow Druid's definitions.
    assert!(text.contains("# HELP druid_query_time Seconds taken to complete a query.\n"));
    assert!(text.contains("# TYPE druid_query_time histogram\n"));
    assert!(text.contains("# TYPE druid_query_success_count counter\n"));
}

#[test]
fn tasks_and_ingestion_counts() {
    let m = Metrics::new(&MetricsConfig::default());
    m.record_task("wiki-edits", "index_parallel", true, Duration::from_secs(3));
    m.record_task(
        "wiki-edits",
        "index_parallel",
        false,
        Duration::from_millis(50),
    );
    m.add_ingest(
        "wiki-edits",
        &IngestCounts {
            processed: 10,
            thrown_away: 2,
            rows_output: 8,
            ..Default::default()
        },
    );
    m.add_ingest(
        "wiki-edits",
        &IngestCounts {
            processed: 5,
            persists: 1,
            ..Default::default()
        },
    );
    let text = m.encode(Format::Prometheus).unwrap();
    assert!(!text.contains("# EOF"));
    let v = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    let ds = "{dataSource=\"wiki_edits\"}";
    assert_eq!(v(&format!("druid_task_success_count_total{ds}")), 1.0);
    assert_eq!(v(&format!("druid_task_failed_count_total{ds}")), 1.0);
    assert_eq!(
        v("druid_task_run_time_count{dataSource=\"wiki_edits\",taskType=\"index_parallel\"}"),
        2.0
    );
    assert_eq!(v(&format!("druid_ingest_events_processed_total{ds}")), 15.0);
    assert_eq!(v(&format!("druid_ingest_events_thrownaway_total{ds}")), 2.0);
    assert_eq!(
        v(&format!("druid_ingest_events_unparseable_total{ds}")),
        0.0
    );
    assert_eq!(v(&format!("druid_ingest_rows_output_total{ds}")), 8.0);
    assert_eq!(v(&format!("druid_ingest_persists_count_total{ds}")), 1.0);
    assert_eq!(v(&format!("druid_ingest_handoff_count_total{ds}")), 0.0);
}

#[test]
fn ingest_counts_advance_by_high_water_marks() {
    let mut reported = IngestCounts::default();
    let at = |processed, thrown_away| IngestCounts {
        processed,
        thrown_away,
        ..Default::default()
    };
    assert_eq!(IngestCounts::advance(&mut reported, &at(10, 1)), at(10, 1));
    assert_eq!(IngestCounts::advance(&mut reported, &at(10, 1)), at(0, 0));
    // A build path took back its counts: nothing is subtracted ...
    assert!(IngestCounts::advance(&mut reported, &at(0, 0)).is_zero());
    // ... and the recount adds only what passes the earlier high.
    assert_eq!(IngestCounts::advance(&mut reported, &at(12, 1)), at(2, 0));
    assert_eq!(reported, at(12, 1));
}

#[test]
fn snapshot_gauges_are_encoded_at_scrape_time() {
    let m = Metrics::new(&MetricsConfig {
        namespace: "dolmen".into(),
        ..Default::default()
    });
    let round = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let r = Arc::clone(&round);
    m.add_source(move |s| {
        let n = r.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n == 0 {
            s.segments("gone", 1, 10);
        }
        s.segments("wikipedia", 2, 300);
        s.segment_cache("wikipedia", 200);
        s.task_slots(4, 1);
        s.stream_lag(StreamLag {
            data_source: "events".into(),
            stream: "topic-1".into(),
            partitions: BTreeMap::from([(0, 5), (1, 0), (2, 2)]),
        });
        s.stream_time_lag(StreamTimeLag {
            data_source: "kin".into(),
            stream: "clicks".into(),
            partitions: BTreeMap::from([
                ("shardId-000000000000".to_string(), 1500),
                ("shardId-000000000001".to_string(), 0),
                ("shardId-000000000002".to_string(), 250),
            ]),
        });
    });
    let first = m.encode(Format::OpenMetrics).unwrap();
    assert_eq!(
        sample(&first, "dolmen_segment_count{dataSource=\"gone\"}"),
        Some(1.0)
    );
    let text = m.encode(Format::OpenMetrics).unwrap();
    let v = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    // A datasource no source reports any more has no series left.
    assert_eq!(
        sample(&text, "dolmen_segment_count{dataSource=\"gone\"}"),
        None
    );
    assert_eq!(v("dolmen_segment_count{dataSource=\"wikipedia\"}"), 2.0);
    assert_eq!(v("dolmen_segment_size{dataSource=\"wikipedia\"}"), 300.0);
    assert_eq!(
        v("dolmen_segment_used{dataSource=\"wikipedia\",priority=\"0\",tier=\"_default_tier\"}"),
        200.0
    );
    assert_eq!(
        v("dolmen_taskslot_total_count{category=\"_default_worker_category\"}"),
        4.0
    );
    assert_eq!(
        v("dolmen_taskslot_used_count{category=\"_default_worker_category\"}"),
        1.0
    );
    let s = "{dataSource=\"events\",stream=\"topic_1\"}";
    assert_eq!(v(&format!("dolmen_ingest_kafka_lag{s}")), 7.0);
    assert_eq!(v(&format!("dolmen_ingest_kafka_maxlag{s}")), 5.0);
    assert_eq!(v(&format!("dolmen_ingest_kafka_avglag{s}")), 2.0);
    assert_eq!(
        v(
            "dolmen_ingest_kafka_partitionlag{dataSource=\"events\",partition=\"2\",stream=\"topic_1\"}"
        ),
        2.0
    );
    // Kinesis: time lag in ms, Druid's computeLagStats (sum, max, sum / shards).
    let k = "{dataSource=\"kin\",stream=\"clicks\"}";
    assert_eq!(v(&format!("dolmen_ingest_kinesis_lag_time{k}")), 1750.0);
    assert_eq!(v(&format!("dolmen_ingest_kinesis_maxlag_time{k}")), 1500.0);
    assert_eq!(v(&format!("dolmen_ingest_kinesis_avglag_time{k}")), 583.0);
    assert_eq!(
        v(
            "dolmen_ingest_kinesis_partitionlag_time{dataSource=\"kin\",partition=\"shardId_000000000002\",stream=\"clicks\"}"
        ),
        250.0
    );
    assert!(text.contains("# TYPE dolmen_ingest_kinesis_lag_time gauge\n"));
    assert!(text.contains("# TYPE dolmen_segment_count gauge\n"));
    assert!(text.contains(
        "# HELP dolmen_segment_count Number of used segments belonging to a data source.\n"
    ));
}

#[cfg(target_os = "linux")]
#[test]
fn process_metrics_come_from_proc() {
    let m = Metrics::new(&MetricsConfig::default());
    let text = m.encode(Format::OpenMetrics).unwrap();
    let v = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    assert!(v("process_resident_memory_bytes") > 1_000_000.0);
    assert!(v("process_virtual_memory_bytes") >= v("process_resident_memory_bytes"));
    assert!(v("process_open_fds") >= 3.0);
    assert!(v("process_max_fds") >= v("process_open_fds"));
    assert!(v("process_threads") >= 1.0);
    let t = std::time::Instant::now();
    let mut x = 0u64;
    while t.elapsed() < Duration::from_millis(60) {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    let text = m.encode(Format::OpenMetrics).unwrap();
    assert!(
        sample(&text, "process_cpu_seconds_total").unwrap() > 0.0,
        "{text}"
    );
    let v = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start = v("process_start_time_seconds");
    assert!(
        start <= now + 1.0 && start > now - 3600.0,
        "{start} vs {now}"
    );
}

#[test]
fn the_noop_emitter_records_and_serves_nothing() {
    let m = Metrics::new(&MetricsConfig {
        emitter: Emitter::Noop,
        ..Default::default()
    });
    assert!(!m.is_enabled());
    m.record_task("x", "index", true, Duration::from_secs(1));
    m.add_source(|_| panic!("a noop emitter runs no source"));
    assert_eq!(m.encode(Format::OpenMetrics), None);
    assert_eq!(Emitter::parse("NoOp"), Ok(Emitter::Noop));
    assert_eq!(Emitter::parse("prometheus"), Ok(Emitter::Prometheus));
    assert!(Emitter::parse("logging").unwrap_err().contains("[logging]"));
}

#[test]
fn the_format_follows_the_accept_header() {
    assert_eq!(
        Format::from_accept(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        )),
        Format::OpenMetrics
    );
    assert_eq!(Format::from_accept(Some("*/*")), Format::Prometheus);
    assert_eq!(Format::from_accept(None), Format::Prometheus);
}
