//! `shardstream` supervisors against the real binary and a real Kinesis-API emulator
//! (kinesalite, started by `scripts/install-test-deps.sh`; `scripts/test.sh` exports
//! `DOLMEN_TEST_KINESIS_ENDPOINT`), through the real AWS SDK. Each test uses its own stream.
//! Credentials come from the `service.kinesis.accessKey`/`secretKey` runtime properties.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use dolmen_stream::kinesis::{KinesisAdmin, KinesisConfig, StaticCredentials};
use serde_json::{Value, json};

use crate::common::{Server, kill_schedule, sum_ids, unique_name};
use crate::supervisors::event;

const SUP: &str = "/druid/indexer/v1/supervisor";

/// The secret the server is given; it must never come back through the API.
const SECRET: &str = "dolmen-kinesis-secret-8c1f";

/// Generous bound of every wait (a busy 2-core CI machine).
const WAIT: Duration = Duration::from_secs(90);

/// The emulator's endpoint, or `None` when the run opted out with `DOLMEN_SKIP_KINESIS_TESTS=1`.
fn endpoint() -> Option<String> {
    match std::env::var("DOLMEN_TEST_KINESIS_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ if std::env::var("DOLMEN_SKIP_KINESIS_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_KINESIS_ENDPOINT is not set: run scripts/test.sh (it starts the kinesalite Kinesis emulator), or set DOLMEN_SKIP_KINESIS_TESTS=1"
        ),
    }
}

fn admin(endpoint: &str) -> KinesisAdmin {
    KinesisAdmin::new(KinesisConfig {
        credentials: Some(StaticCredentials {
            access_key: "dolmen-test".into(),
            secret_key: "dolmen-test-secret".into(),
        }),
        ..KinesisConfig::new(Some(endpoint.to_owned()), Some("us-east-1".into()))
    })
    .unwrap()
}

/// A stream of its own with `shards` shards.
fn new_stream(admin: &KinesisAdmin, shards: i32) -> String {
    let stream = unique_name("sup");
    admin.create_stream(&stream, shards).unwrap();
    stream
}

/// Puts events `ids` (partition key `k<id>`); returns each id's shard and sequence number.
fn put(
    admin: &KinesisAdmin,
    stream: &str,
    ids: std::ops::Range<i64>,
) -> Vec<(i64, String, String)> {
    let records: Vec<(String, Vec<u8>)> =
        ids.clone().map(|i| (format!("k{i}"), event(i))).collect();
    let placed = admin.put_records(stream, &records).unwrap();
    ids.zip(placed)
        .map(|(i, (shard, seq))| (i, shard, seq.to_string()))
        .collect()
}

/// A server whose runtime properties hold the Kinesis credentials.
fn server(dir: &Path) -> Server {
    let props = dir.join("runtime.properties");
    std::fs::write(
        &props,
        format!("service.kinesis.accessKey=dolmen-test\nservice.kinesis.secretKey={SECRET}\n"),
    )
    .unwrap();
    Server::start_with_args(&dir.join("data"), &["--config", props.to_str().unwrap()])
}

/// A `shardstream` spec reading `stream` into `ds` from the earliest record, checking often.
fn spec(ds: &str, stream: &str, endpoint: &str, extra_io: Value) -> Value {
    let mut io = json!({
        "stream": stream,
        "endpoint": endpoint,
        "region": "us-east-1",
        "inputFormat": {"type": "json"},
        "useEarliestSequenceNumber": true,
        "startDelay": "PT0S",
        "period": "PT1S",
        "fetchDelayMillis": 50
    });
    for (k, v) in extra_io.as_object().unwrap() {
        io[k] = v.clone();
    }
    json!({
        "type": "shardstream",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["channel", {"type": "long", "name": "id"}]},
                "metricsSpec": [{"type": "count", "name": "count"}],
                "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "NONE", "rollup": false}
            },
            "ioConfig": io,
            "tuningConfig": {"type": "shardstream"}
        }
    })
}

/// `GET /metrics` as text.
fn metrics_text(server: &Server) -> String {
    let r = server.get("/metrics");
    assert_eq!(r.status().as_u16(), 200);
    r.text().unwrap()
}

/// The value of the sample `name` whose `dataSource` label is `ds`, if any.
fn metric(text: &str, name: &str, ds: &str) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{")) && l.contains(&format!("dataSource=\"{ds}\""))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Polls `f` until it returns `Some`, up to [`WAIT`]; panics with `what`.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn shardstream_supervisor_ingests_hands_off_and_answers_every_endpoint() {
    let Some(endpoint) = endpoint() else { return };
    let admin = admin(&endpoint);
    let stream = new_stream(&admin, 2);
    put(&admin, &stream, 0..100);
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());

    // Unknown ids: 404 on every endpoint.
    for path in ["nope", "nope/status", "nope/stats", "nope/history"] {
        assert_eq!(server.get_json(&format!("{SUP}/{path}")).0, 404, "{path}");
    }
    for path in [
        "nope/suspend",
        "nope/resume",
        "nope/reset",
        "nope/terminate",
    ] {
        assert_eq!(server.post_empty(&format!("{SUP}/{path}")).0, 404, "{path}");
    }

    let (code, body) = server.post_json(
        SUP,
        &spec("kin", &stream, &endpoint, json!({"taskDuration": "PT8S"})),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!({"id": "kin", "modified": true, "restarted": false})
    );
    // Rows are queryable from the running task.
    server.wait_for_rows("kin", (100, sum_ids(0..100)), WAIT);
    let more = put(&admin, &stream, 100..150);
    server.wait_for_rows("kin", (150, sum_ids(0..150)), WAIT);

    // Read-back: shardstream, with defaults; the secret is nowhere.
    let (code, s) = server.get_json(&format!("{SUP}/kin"));
    assert_eq!(code, 200);
    assert_eq!(s["type"], "shardstream");
    assert_eq!(s["ioConfig"]["stream"], json!(stream));
    assert!(!s.to_string().contains(SECRET));

    // Status: shard ids as partitions, sequence numbers as strings (the last record read).
    let last_of = |placed: &[(i64, String, String)], shard: &str| {
        placed
            .iter()
            .rev()
            .find(|(_, s, _)| s == shard)
            .map(|(_, _, q)| q.clone())
    };
    let st = wait_for("status with the latest sequence numbers", || {
        let (code, st) = server.get_json(&format!("{SUP}/kin/status"));
        assert_eq!(code, 200, "{st}");
        let latest = &st["payload"]["latestOffsets"];
        let ok = ["shardId-000000000000", "shardId-000000000001"]
            .iter()
            .all(|sh| last_of(&more, sh).is_none_or(|q| latest[*sh] == json!(q)));
        (ok && st["payload"]["activeTasks"]
            .as_array()
            .is_some_and(|a| !a.is_empty()))
        .then_some(st)
    });
    let p = &st["payload"];
    assert_eq!(p["stream"], json!(stream));
    assert_eq!(p["partitions"], 2);
    assert!(p["minimumLagMillis"].is_object(), "{st}");
    assert!(p["aggregateLagMillis"].is_i64(), "{st}");
    let task_id = p["activeTasks"][0]["id"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("index_shardstream_kin_"), "{task_id}");
    assert!(p["activeTasks"][0]["currentOffsets"]["shardId-000000000000"].is_string());
    // The task payload carries no credentials.
    let (code, t) = server.get_json(&format!("/druid/indexer/v1/task/{task_id}"));
    assert_eq!(code, 200);
    assert_eq!(t["payload"]["type"], "index_shardstream");
    assert!(!t.to_string().contains(SECRET));
    // Lag once caught up: every shard's time lag is 0, in the status report and the metrics.
    wait_for("a time lag of 0 once caught up", || {
        let (_, st) = server.get_json(&format!("{SUP}/kin/status"));
        let p = &st["payload"];
        let lags = p["minimumLagMillis"].as_object()?;
        (lags.len() == 2 && lags.values().all(|v| v == 0) && p["aggregateLagMillis"] == 0)
            .then_some(())
    });
    wait_for("ingest/kinesis/*Lag/time of 0", || {
        let text = metrics_text(&server);
        let zero = |name: &str| metric(&text, name, "kin") == Some(0.0);
        (zero("druid_ingest_kinesis_lag_time")
            && zero("druid_ingest_kinesis_maxlag_time")
            && zero("druid_ingest_kinesis_avglag_time")
            && text
                .lines()
                .filter(|l| {
                    l.starts_with("druid_ingest_kinesis_partitionlag_time{")
                        && l.contains("dataSource=\"kin\"")
                })
                .count()
                == 2)
            .then_some(())
    });
    // Stats and health.
    let (code, stats) = server.get_json(&format!("{SUP}/kin/stats"));
    assert_eq!(code, 200, "{stats}");
    assert_eq!(server.get_json(&format!("{SUP}/kin/health")).0, 200);

    // Handoff on taskDuration: the rows move to published segments, counted once.
    wait_for("handoff of the first 150 rows", || {
        (server.published_rows("kin") >= 150).then_some(())
    });
    assert_eq!(server.count_and_sum("kin"), (150, sum_ids(0..150)));

    // An update cannot change the supervisor's type (400 naming `type`).
    let kafka = json!({"type": "logstream", "spec": {
        "dataSchema": {"dataSource": "kin", "timestampSpec": {"column": "ts", "format": "millis"},
                       "dimensionsSpec": {"dimensions": ["channel"]}},
        "ioConfig": {"topic": "t", "inputFormat": {"type": "json"},
                     "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}});
    let (code, e) = server.post_json(SUP, &kafka);
    assert_eq!(code, 400, "{e}");
    assert!(e["error"].as_str().unwrap().starts_with("type:"), "{e}");
    // Early handoff of a task group is accepted.
    let (code, e) = server.post_json(
        &format!("{SUP}/kin/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202, "{e}");

    // Suspend, twice: the second is a 400.
    assert_eq!(server.post_empty(&format!("{SUP}/kin/suspend")).0, 200);
    let (code, e) = server.post_empty(&format!("{SUP}/kin/suspend"));
    assert_eq!(code, 400, "{e}");
    // While suspended: new records, then resetOffsets of one shard past all of its new ones.
    let late = put(&admin, &stream, 150..250);
    // Records waiting behind the stored sequence numbers: a time lag above 0 on the shards
    // that hold them (the supervisor reads it from where the next task would start).
    let st = wait_for("a time lag above 0 while records wait", || {
        let (_, st) = server.get_json(&format!("{SUP}/kin/status"));
        (st["payload"]["aggregateLagMillis"].as_i64()? > 0).then_some(st)
    });
    for shard in late.iter().map(|(_, s, _)| s) {
        assert!(
            st["payload"]["minimumLagMillis"][shard].as_i64() > Some(0),
            "{shard}: {st}"
        );
    }
    // A suspended supervisor emits no lag metrics (Druid's emitLag).
    assert_eq!(
        metric(
            &metrics_text(&server),
            "druid_ingest_kinesis_lag_time",
            "kin"
        ),
        None
    );
    let (code, e) = server.post_json(
        &format!("{SUP}/kin/resetOffsets"),
        &json!({"type": "logstream", "partitions": {"type": "end", "stream": stream, "partitionOffsetMap": {"0": 1}}}),
    );
    assert_eq!(code, 400, "{e}");
    assert!(e["error"].as_str().unwrap().starts_with("type:"), "{e}");
    let (code, e) = server.post_json(
        &format!("{SUP}/kin/resetOffsets"),
        &json!({"type": "shardstream", "partitions": {"type": "end", "stream": stream, "partitionSequenceNumberMap": {"shardId-000000000000": 12}}}),
    );
    assert_eq!(code, 400, "{e}");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .starts_with("partitions.partitionSequenceNumberMap"),
        "{e}"
    );
    let skipped = "shardId-000000000000";
    let last = last_of(&late, skipped).expect("some of 150..250 went to shard 0");
    let (code, e) = server.post_json(
        &format!("{SUP}/kin/resetOffsets"),
        &json!({"type": "shardstream", "partitions": {"type": "end", "stream": stream, "partitionSequenceNumberMap": {skipped: last}}}),
    );
    assert_eq!(code, 200, "{e}");
    assert_eq!(server.post_empty(&format!("{SUP}/kin/resume")).0, 200);
    let kept: Vec<i64> = late
        .iter()
        .filter(|(_, s, _)| s != skipped)
        .map(|(i, _, _)| *i)
        .collect();
    server.wait_for_rows(
        "kin",
        (
            150 + kept.len() as i64,
            sum_ids(0..150) + sum_ids(kept.iter().copied()),
        ),
        WAIT,
    );

    // History: create, suspend, resume.
    let (code, h) = server.get_json(&format!("{SUP}/kin/history"));
    assert_eq!(code, 200);
    assert_eq!(h.as_array().unwrap().len(), 3, "{h}");
    assert!(!h.to_string().contains(SECRET));

    // Reset: the stored sequence numbers are dropped, so every record is read again from the
    // earliest (as Druid's reset does; rows published before stay).
    // (First let the running tasks hand off: a reset stops them without publishing.)
    let before = wait_for("every row read so far published", || {
        let now = server.count_and_sum("kin");
        (server.published_rows("kin") == now.0).then_some(now)
    });
    assert_eq!(server.post_empty(&format!("{SUP}/kin/reset")).0, 200);
    server.wait_for_rows("kin", (before.0 + 250, before.1 + sum_ids(0..250)), WAIT);

    // Terminate: gone from the listings, history kept; the rows stay exactly once.
    let final_rows = server.count_and_sum("kin");
    assert_eq!(server.post_empty(&format!("{SUP}/kin/terminate")).0, 200);
    assert_eq!(server.get_json(&format!("{SUP}/kin")).0, 404);
    assert_eq!(server.get_json(SUP).1, json!([]));
    assert_eq!(server.get_json(&format!("{SUP}/kin/history")).0, 200);
    wait_for("the terminated supervisor's rows published", || {
        (server.published_rows("kin") == final_rows.0).then_some(())
    });
    assert_eq!(server.count_and_sum("kin"), final_rows);
}

#[test]
fn shards_split_and_merged_while_ingesting_are_read_exactly_once() {
    let Some(endpoint) = endpoint() else { return };
    let admin = admin(&endpoint);
    let stream = new_stream(&admin, 3);
    put(&admin, &stream, 0..300);
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut s = spec("reshard", &stream, &endpoint, json!({"taskCount": 2}));
    // Groups that should read a new shard hand off 2 s after it is seen (Druid's default: 2 min).
    s["spec"]["tuningConfig"]["repartitionTransitionDuration"] = json!("PT2S");
    let (code, body) = server.post_json(SUP, &s);
    assert_eq!(code, 200, "{body}");
    server.wait_for_rows("reshard", (300, sum_ids(0..300)), WAIT);

    // Split shard 0 while the supervisor reads; the records after it go to its children.
    admin.split_shard(&stream, "shardId-000000000000").unwrap();
    put(&admin, &stream, 300..600);
    server.wait_for_rows("reshard", (600, sum_ids(0..600)), WAIT);
    // Merge shards 1 and 2 (adjacent hash ranges); later records go to the merged child.
    admin
        .merge_shards(&stream, "shardId-000000000001", "shardId-000000000002")
        .unwrap();
    put(&admin, &stream, 600..900);
    server.wait_for_rows("reshard", (900, sum_ids(0..900)), WAIT);

    // The supervisor sees the six shards; the closed parents are read to their end.
    let st = wait_for("status listing the children", || {
        let (_, st) = server.get_json(&format!("{SUP}/reshard/status"));
        (st["payload"]["partitions"] == 6).then_some(st)
    });
    let latest: BTreeMap<String, Value> =
        serde_json::from_value(st["payload"]["latestOffsets"].clone()).unwrap();
    for parent in [
        "shardId-000000000000",
        "shardId-000000000001",
        "shardId-000000000002",
    ] {
        assert_eq!(latest[parent], json!("EOS"), "{st}");
    }
    // Handing everything off keeps the counts exact.
    assert_eq!(
        server.post_empty(&format!("{SUP}/reshard/terminate")).0,
        200
    );
    wait_for("every row published", || {
        (server.published_rows("reshard") == 900).then_some(())
    });
    assert_eq!(server.count_and_sum("reshard"), (900, sum_ids(0..900)));
}

#[test]
fn exactly_once_across_sigkills_splits_and_merges() {
    let Some(endpoint) = endpoint() else { return };
    const N: i64 = 3000;
    let admin = admin(&endpoint);
    let stream = new_stream(&admin, 3);
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut s = spec(
        "crashy",
        &stream,
        &endpoint,
        json!({"taskDuration": "PT2S", "completionTimeout": "PT30S"}),
    );
    s["spec"]["tuningConfig"]["maxRowsPerSegment"] = json!(300);
    s["spec"]["tuningConfig"]["repartitionTransitionDuration"] = json!("PT1S");
    assert_eq!(server.post_json(SUP, &s).0, 200);
    // Put in the background at a steady pace (~400 records/s), splitting shard 0 after a third
    // of the records and merging shards 1 and 2 after two thirds.
    let producer = {
        let (endpoint, stream) = (endpoint.clone(), stream.clone());
        std::thread::spawn(move || {
            let admin = self::admin(&endpoint);
            for start in (0..N).step_by(100) {
                if start == N / 3 {
                    admin.split_shard(&stream, "shardId-000000000000").unwrap();
                    eprintln!("split shard 0");
                }
                if start == 2 * N / 3 {
                    admin
                        .merge_shards(&stream, "shardId-000000000001", "shardId-000000000002")
                        .unwrap();
                    eprintln!("merged shards 1 and 2");
                }
                put(&admin, &stream, start..(start + 100).min(N));
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    let mut next = kill_schedule();
    let mut server = server;
    // At least six kills, and on until the last record is put (across the split and merge).
    let mut kill = 0;
    while kill < 6 || !producer.is_finished() {
        kill += 1;
        let wait_ms = 400 + next() % 1200;
        std::thread::sleep(Duration::from_millis(wait_ms));
        let (rows, _) = server.count_and_sum("crashy");
        eprintln!("kill {kill} after {wait_ms} ms ({rows} rows visible)");
        server.kill9();
        server = self::server(dir.path());
    }
    producer.join().unwrap();
    server.wait_for_rows("crashy", (N, sum_ids(0..N)), Duration::from_secs(120));
    // Everything is eventually published once, too.
    let (code, _) = server.post_json(
        &format!("{SUP}/crashy/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202);
    wait_for("every row published", || {
        assert_eq!(server.count_and_sum("crashy"), (N, sum_ids(0..N)));
        (server.published_rows("crashy") == N).then_some(())
    });
    assert_eq!(server.count_and_sum("crashy"), (N, sum_ids(0..N)));
    // Six shards: the three parents closed and fully read.
    wait_for("the status listing six shards", || {
        let (_, st) = server.get_json(&format!("{SUP}/crashy/status"));
        (st["payload"]["partitions"] == 6).then_some(())
    });
}

#[test]
fn kpl_aggregated_records_are_deaggregated() {
    let Some(endpoint) = endpoint() else { return };
    let admin = admin(&endpoint);
    let stream = new_stream(&admin, 2);
    // 1,000 events packed 50 to a Kinesis record (as the KPL packs them), then 10 plain ones.
    let ids: Vec<i64> = (0..1000).collect();
    let mut records: Vec<(String, Vec<u8>)> = ids
        .chunks(50)
        .map(|chunk| {
            let users: Vec<(String, Vec<u8>)> =
                chunk.iter().map(|i| (format!("k{i}"), event(*i))).collect();
            (
                format!("agg{}", chunk[0]),
                dolmen_stream::kpl::aggregate(&users),
            )
        })
        .collect();
    records.extend((1000..1010).map(|i| (format!("k{i}"), event(i))));
    admin.put_records(&stream, &records).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let (code, body) = server.post_json(
        SUP,
        &spec("kpl", &stream, &endpoint, json!({"deaggregate": true})),
    );
    assert_eq!(code, 200, "{body}");
    server.wait_for_rows("kpl", (1010, sum_ids(0..1010)), WAIT);
    let (_, s) = server.get_json(&format!("{SUP}/kpl"));
    assert_eq!(s["ioConfig"]["deaggregate"], true, "{s}");
    // Handed off, still exactly once (an aggregate's records share one sequence number).
    assert_eq!(server.post_empty(&format!("{SUP}/kpl/terminate")).0, 200);
    wait_for("every row published", || {
        (server.published_rows("kpl") == 1010).then_some(())
    });
    assert_eq!(server.count_and_sum("kpl"), (1010, sum_ids(0..1010)));
}
