//! `logstream` supervisors against the real binary and the real Kafka-protocol test broker
//! (tansu, started by `scripts/install-test-deps.sh`; `scripts/test.sh` exports
//! `DOLMEN_TEST_KAFKA_BROKERS`). Each test uses its own topic.

use std::time::{Duration, Instant};

use dolmen_stream::kafka::{KafkaAdmin, KafkaTestProducer, ProducerRecord};
use serde_json::{Value, json};

use crate::common::{Server, kill_schedule, sum_ids, unique_name};

const SUP: &str = "/druid/indexer/v1/supervisor";

/// The test broker, or `None` when the run opted out with `DOLMEN_SKIP_KAFKA_TESTS=1`.
pub(crate) fn brokers() -> Option<String> {
    match std::env::var("DOLMEN_TEST_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => Some(b),
        _ if std::env::var("DOLMEN_SKIP_KAFKA_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_KAFKA_BROKERS is not set: run scripts/test.sh (it starts the Kafka test broker), or set DOLMEN_SKIP_KAFKA_TESTS=1"
        ),
    }
}

/// A topic of its own with `partitions` partitions.
pub(crate) fn new_topic(brokers: &str, partitions: i32) -> String {
    let topic = unique_name("sup");
    KafkaAdmin::new(brokers)
        .unwrap()
        .create_topic(&topic, partitions)
        .unwrap();
    topic
}

/// Event `id` as the JSON the tests produce: `{"ts", "id", "channel", "added"}`.
pub(crate) fn event(id: i64) -> Vec<u8> {
    json!({
        "ts": 1_600_000_000_000i64 + id * 1000,
        "id": id,
        "channel": format!("#c{}", id % 4),
        "added": id % 7
    })
    .to_string()
    .into_bytes()
}

/// Produces events `ids` round-robin over `partitions` partitions (one record per batch, as the
/// test broker needs).
pub(crate) fn produce(brokers: &str, topic: &str, partitions: i32, ids: std::ops::Range<i64>) {
    let mut p = KafkaTestProducer::new(brokers).unwrap();
    let records: Vec<ProducerRecord> = ids
        .map(|i| ProducerRecord::to_partition((i % i64::from(partitions)) as i32, event(i)))
        .collect();
    for chunk in records.chunks(500) {
        p.send_all(topic, chunk).unwrap();
    }
}

/// A supervisor spec reading `topic` into `ds` from the earliest offset, checking often.
pub(crate) fn spec(ds: &str, topic: &str, brokers: &str, extra_io: Value) -> Value {
    let mut io = json!({
        "topic": topic,
        "inputFormat": {"type": "json"},
        "consumerProperties": {"bootstrap.servers": brokers},
        "useEarliestOffset": true,
        "startDelay": "PT0S",
        "period": "PT1S",
        "pollTimeout": 50
    });
    for (k, v) in extra_io.as_object().unwrap() {
        io[k] = v.clone();
    }
    json!({
        "type": "logstream",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["channel", {"type": "long", "name": "id"}]},
                "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
                "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "NONE", "rollup": false}
            },
            "ioConfig": io,
            "tuningConfig": {"type": "logstream"}
        }
    })
}

impl Server {
    /// `(COUNT(*), SUM(id))` of a datasource; `(0, 0)` while it does not exist.
    pub(crate) fn count_and_sum(&self, ds: &str) -> (i64, i64) {
        let (code, body) = self.post_json(
            "/druid/v2/sql",
            &json!({"query": format!("SELECT COUNT(*) AS c, SUM(\"id\") AS s FROM \"{ds}\"")}),
        );
        if code != 200 {
            return (0, 0);
        }
        let row = &body[0];
        (
            row["c"].as_i64().unwrap_or(0),
            row["s"].as_i64().unwrap_or(0),
        )
    }

    /// Waits until `COUNT(*)` and `SUM(id)` of `ds` equal `want`; panics with the last value.
    pub(crate) fn wait_for_rows(&self, ds: &str, want: (i64, i64), timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut last = (0, 0);
        while Instant::now() < deadline {
            last = self.count_and_sum(ds);
            if last == want {
                return;
            }
            assert!(
                last.0 <= want.0,
                "more rows than produced: {last:?} > {want:?} (duplicates)"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{ds}: expected {want:?}, have {last:?}");
    }

    /// Rows of the published (handed-off) segments of `ds`.
    pub(crate) fn published_rows(&self, ds: &str) -> i64 {
        let (_, segs) = self.get_json(&format!(
            "/druid/coordinator/v1/metadata/datasources/{ds}/segments?full"
        ));
        segs.as_array()
            .map(|a| a.iter().map(|s| s["numRows"].as_i64().unwrap_or(0)).sum())
            .unwrap_or(0)
    }
}

#[test]
fn supervisor_reads_a_topic_realtime_hands_off_and_answers_every_endpoint() {
    let Some(brokers) = brokers() else { return };
    let topic = new_topic(&brokers, 3);
    produce(&brokers, &topic, 3, 0..300);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert_eq!(server.get_json(SUP), (200, json!([])));

    let (code, body) = server.post_json(SUP, &spec("events", &topic, &brokers, json!({})));
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!({"id": "events", "modified": true, "restarted": false})
    );
    // Rows are queryable from the running task, before any handoff.
    server.wait_for_rows("events", (300, sum_ids(0..300)), Duration::from_secs(30));
    assert_eq!(server.published_rows("events"), 0, "nothing handed off yet");
    produce(&brokers, &topic, 3, 300..400);
    server.wait_for_rows("events", (400, sum_ids(0..400)), Duration::from_secs(30));

    // Spec read-back with the observed defaults.
    let (code, s) = server.get_json(&format!("{SUP}/events"));
    assert_eq!(code, 200);
    assert_eq!(s["type"], "logstream");
    assert_eq!(s["suspended"], false);
    assert_eq!(s["ioConfig"]["replicas"], 1);
    assert_eq!(s["ioConfig"]["taskDuration"], "PT3600S");
    assert_eq!(s["tuningConfig"]["maxRowsInMemory"], 150_000);
    assert_eq!(s["spec"]["ioConfig"], s["ioConfig"]);
    // Listings.
    assert_eq!(server.get_json(SUP).1, json!(["events"]));
    let (_, full) = server.get_json(&format!("{SUP}?full"));
    assert_eq!(full[0]["id"], "events");
    assert_eq!(full[0]["spec"]["type"], "logstream");
    let (_, states) = server.get_json(&format!("{SUP}?state=true"));
    assert_eq!(states[0]["state"], "RUNNING", "{states}");
    assert_eq!(states[0]["detailedState"], "RUNNING");
    assert_eq!(states[0]["healthy"], true);
    assert!(states[0].get("spec").is_none());
    // sys.supervisors lists it with Druid's columns.
    let rows = server.sql(
        "SELECT supervisor_id, datasource, state, healthy, type, source, suspended, spec \
         FROM sys.supervisors",
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["supervisor_id"], "events");
    assert_eq!(rows[0]["datasource"], "events");
    assert_eq!(rows[0]["state"], "RUNNING");
    assert_eq!(rows[0]["healthy"], 1);
    assert_eq!(rows[0]["type"], "logstream");
    assert_eq!(rows[0]["source"], topic.as_str());
    assert_eq!(rows[0]["suspended"], 0);
    let spec_text: Value = serde_json::from_str(rows[0]["spec"].as_str().unwrap()).unwrap();
    assert_eq!(spec_text["type"], "logstream");
    // Status report (latest offsets are refreshed every `period`: wait for the run after the
    // last produce).
    let deadline = Instant::now() + Duration::from_secs(15);
    let (code, st) = loop {
        let (code, st) = server.get_json(&format!("{SUP}/events/status"));
        if st["payload"]["latestOffsets"] == json!({"0": 134, "1": 133, "2": 133})
            || Instant::now() > deadline
        {
            break (code, st);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, 200);
    let p = &st["payload"];
    assert_eq!(p["dataSource"], "events");
    assert_eq!(p["stream"], topic.as_str());
    assert_eq!(p["partitions"], 3);
    assert_eq!(
        p["latestOffsets"],
        json!({"0": 134, "1": 133, "2": 133}),
        "{st}"
    );
    assert_eq!(p["aggregateLag"], 0, "{st}");
    let active = p["activeTasks"].as_array().unwrap();
    assert_eq!(active.len(), 1, "{st}");
    assert_eq!(
        active[0]["currentOffsets"],
        json!({"0": 134, "1": 133, "2": 133})
    );
    assert_eq!(
        active[0]["startingOffsets"],
        json!({"0": 0, "1": 0, "2": 0})
    );
    let task_id = active[0]["id"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("index_logstream_events_"), "{task_id}");
    // The task is in the tasks API.
    let (_, t) = server.get_json(&format!("/druid/indexer/v1/task/{task_id}/status"));
    assert_eq!(t["status"]["type"], "index_logstream");
    assert_eq!(t["status"]["status"], "RUNNING");
    // Health, stats.
    assert_eq!(
        server.get_json(&format!("{SUP}/events/health")),
        (200, json!({"healthy": true}))
    );
    let (_, stats) = server.get_json(&format!("{SUP}/events/stats"));
    assert_eq!(
        stats["0"][&task_id]["totals"]["buildSegments"]["processed"], 400,
        "{stats}"
    );
    assert!(stats["0"][&task_id]["movingAverages"]["buildSegments"]["1m"]["processed"].is_number());

    // Early handoff: segments published, same totals, nothing counted twice.
    let (code, _) = server.post_json(
        &format!("{SUP}/events/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202);
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.published_rows("events") < 400 {
        assert!(Instant::now() < deadline, "handoff did not publish");
        assert_eq!(server.count_and_sum("events"), (400, sum_ids(0..400)));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server.published_rows("events"), 400);
    assert_eq!(server.count_and_sum("events"), (400, sum_ids(0..400)));
    // A new task continues from the published offsets.
    produce(&brokers, &topic, 3, 400..430);
    server.wait_for_rows("events", (430, sum_ids(0..430)), Duration::from_secs(30));
    let (_, t) = server.get_json(&format!("/druid/indexer/v1/task/{task_id}/status"));
    assert_eq!(t["status"]["status"], "SUCCESS", "{t}");

    // Suspend (twice: 400), resume (twice: 400).
    let (code, s) = server.post_json(&format!("{SUP}/events/suspend"), &json!({}));
    assert_eq!((code, &s["suspended"]), (200, &json!(true)), "{s}");
    let (code, e) = server.post_json(&format!("{SUP}/events/suspend"), &json!({}));
    assert_eq!(
        (code, e),
        (400, json!({"error": "[events] is already suspended"}))
    );
    assert_eq!(
        server.get_json(&format!("{SUP}?state=true")).1[0]["state"],
        "SUSPENDED"
    );
    // Suspended: the reading task hands off; nothing new is read.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.published_rows("events") < 430 {
        assert!(Instant::now() < deadline, "suspend did not hand off");
        std::thread::sleep(Duration::from_millis(50));
    }
    produce(&brokers, &topic, 3, 430..460);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(server.count_and_sum("events"), (430, sum_ids(0..430)));
    let (code, s) = server.post_json(&format!("{SUP}/events/resume"), &json!({}));
    assert_eq!((code, &s["suspended"]), (200, &json!(false)));
    let (code, e) = server.post_json(&format!("{SUP}/events/resume"), &json!({}));
    assert_eq!(
        (code, e),
        (400, json!({"error": "[events] is already running"}))
    );
    server.wait_for_rows("events", (460, sum_ids(0..460)), Duration::from_secs(30));

    // Survives a restart: the supervisor comes back and continues from the stored offsets.
    server.terminate();
    let server = Server::start(dir.path());
    produce(&brokers, &topic, 3, 460..500);
    server.wait_for_rows("events", (500, sum_ids(0..500)), Duration::from_secs(30));
    assert_eq!(server.get_json(SUP).1, json!(["events"]));

    // History: newest first, one entry per change.
    let (code, h) = server.get_json(&format!("{SUP}/events/history"));
    assert_eq!(code, 200);
    let h = h.as_array().unwrap().clone();
    assert_eq!(h.len(), 3, "create, suspend, resume");
    assert_eq!(h[0]["spec"]["suspended"], false);
    assert_eq!(h[1]["spec"]["suspended"], true);
    assert!(h[0]["version"].as_str().unwrap() > h[1]["version"].as_str().unwrap());
    let (_, all) = server.get_json(&format!("{SUP}/history"));
    assert_eq!(all["events"].as_array().unwrap().len(), 3);

    // Terminate: gone from the listings, history kept, not started again after a restart.
    let (code, body) = server.post_json(&format!("{SUP}/events/terminate"), &json!({}));
    assert_eq!((code, body), (200, json!({"id": "events"})));
    assert_eq!(server.get_json(SUP).1, json!([]));
    assert_eq!(server.get_json(&format!("{SUP}/events")).0, 404);
    assert_eq!(
        server
            .get_json(&format!("{SUP}/events/history"))
            .1
            .as_array()
            .unwrap()
            .len(),
        4
    );
    assert_eq!(
        server.post_json(&format!("{SUP}/terminateAll"), &json!({})),
        (200, json!({"status": "success"}))
    );
    // The terminated supervisor's task hands off what it read.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.published_rows("events") < 500 {
        assert!(Instant::now() < deadline, "terminate did not hand off");
        assert_eq!(server.count_and_sum("events"), (500, sum_ids(0..500)));
        std::thread::sleep(Duration::from_millis(50));
    }
    server.terminate();
    let server = Server::start(dir.path());
    assert_eq!(server.get_json(SUP).1, json!([]));
    assert_eq!(server.count_and_sum("events"), (500, sum_ids(0..500)));
}

#[test]
fn supervisor_errors_name_the_problem() {
    let Some(brokers) = brokers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // 415 for a body that is not JSON.
    let r = server.post_raw(SUP, Some("text/plain"), "{}");
    assert_eq!(r.0, 415, "{}", r.2);
    // 400 naming the field.
    let mut bad = spec("x", "t", &brokers, json!({}));
    bad["spec"]["ioConfig"]["consumerProperties"] = json!({});
    let (code, e) = server.post_json(SUP, &bad);
    assert_eq!(code, 400);
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("consumerProperties.bootstrap.servers"),
        "{e}"
    );
    let (code, e) = server.post_json(SUP, &json!({"type": "nope"}));
    assert_eq!(code, 400);
    assert!(e["error"].as_str().unwrap().starts_with("type"), "{e}");
    let r = server.post_raw(SUP, Some("application/json"), "{not json");
    assert_eq!(r.0, 400);
    // 404 for unknown ids, everywhere.
    for path in ["", "/status", "/health", "/stats", "/history"] {
        let (code, e) = server.get_json(&format!("{SUP}/ghost{path}"));
        assert_eq!(code, 404, "GET {path}: {e}");
        assert!(e["error"].as_str().is_some(), "{e}");
    }
    for path in ["/suspend", "/resume", "/reset", "/terminate", "/shutdown"] {
        let (code, _) = server.post_json(&format!("{SUP}/ghost{path}"), &json!({}));
        assert_eq!(code, 404, "POST {path}");
    }
    let (code, _) = server.post_json(
        &format!("{SUP}/ghost/resetOffsets"),
        &json!({"type": "logstream", "partitions": {"type": "end", "stream": "t", "partitionOffsetMap": {"0": 1}}}),
    );
    assert_eq!(code, 404);
    let (code, e) = server.post_json(
        &format!("{SUP}/ghost/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(
        (code, e),
        (404, json!({"error": "Supervisor was not found [ghost]"}))
    );
    // A real supervisor (suspended, so it reads nothing) for the body checks.
    let topic = new_topic(&brokers, 1);
    let mut s = spec("quiet", &topic, &brokers, json!({}));
    s["suspended"] = json!(true);
    assert_eq!(server.post_json(SUP, &s).0, 200);
    let (code, e) = server.post_json(
        &format!("{SUP}/quiet/taskGroups/handoff"),
        &json!({"taskGroupIds": []}),
    );
    assert_eq!(
        (code, e),
        (
            400,
            json!({"error": "List of task groups to handoff can't be empty"})
        )
    );
    for (body, field) in [
        (
            json!({"type": "shardstream", "partitions": {"type": "end", "stream": topic, "partitionOffsetMap": {"0": 1}}}),
            "type",
        ),
        (
            json!({"type": "logstream", "partitions": {"type": "start", "stream": topic, "partitionOffsetMap": {"0": 1}}}),
            "partitions.type",
        ),
        (
            json!({"type": "logstream", "partitions": {"type": "end", "stream": "other", "partitionOffsetMap": {"0": 1}}}),
            "partitions.stream",
        ),
        (
            json!({"type": "logstream", "partitions": {"type": "end", "stream": topic, "partitionOffsetMap": {"0": -1}}}),
            "partitions.partitionOffsetMap",
        ),
    ] {
        let (code, e) = server.post_json(&format!("{SUP}/quiet/resetOffsets"), &body);
        assert_eq!(code, 400, "{body}: {e}");
        assert!(
            e["error"].as_str().unwrap().starts_with(field),
            "{field}: {e}"
        );
    }
    // The datasource cannot change on update.
    let mut other = spec("quiet", &topic, &brokers, json!({}));
    other["spec"]["dataSchema"]["dataSource"] = json!("elsewhere");
    other["id"] = json!("quiet");
    let (code, e) = server.post_json(SUP, &other);
    assert_eq!(code, 400, "{e}");
    assert!(e["error"].as_str().unwrap().contains("datasource"), "{e}");
    // The state listing reports the suspension; health of a suspended supervisor is fine.
    assert_eq!(
        server.get_json(&format!("{SUP}?state=true")).1[0]["state"],
        "SUSPENDED"
    );
    assert_eq!(server.get_json(&format!("{SUP}/quiet/health")).0, 200);
}

#[test]
fn reset_offsets_rereads_only_the_listed_partition_and_updates_keep_counts_exact() {
    let Some(brokers) = brokers() else { return };
    let topic = new_topic(&brokers, 2);
    produce(&brokers, &topic, 2, 0..100);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert_eq!(
        server
            .post_json(SUP, &spec("rs", &topic, &brokers, json!({})))
            .0,
        200
    );
    server.wait_for_rows("rs", (100, sum_ids(0..100)), Duration::from_secs(30));
    // Update with the same datasource: the reading task hands off, a new one continues.
    let updated = spec("rs", &topic, &brokers, json!({"taskDuration": "PT10M"}));
    let (code, body) = server.post_json(SUP, &updated);
    assert_eq!((code, &body["restarted"]), (200, &json!(true)), "{body}");
    produce(&brokers, &topic, 2, 100..120);
    server.wait_for_rows("rs", (120, sum_ids(0..120)), Duration::from_secs(30));
    assert_eq!(
        server.get_json(&format!("{SUP}/rs")).1["ioConfig"]["taskDuration"],
        "PT10M"
    );
    // Let everything be published, then move partition 1 back to offset 10.
    let (code, _) = server.post_json(
        &format!("{SUP}/rs/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202);
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.published_rows("rs") < 120 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, body) = server.post_json(
        &format!("{SUP}/rs/resetOffsets"),
        &json!({"type": "logstream", "partitions": {"type": "end", "stream": topic, "partitionOffsetMap": {"1": 10}}}),
    );
    assert_eq!((code, body), (200, json!({"id": "rs"})));
    // Partition 1 holds the odd ids; its offsets 10..60 are ids 21, 23, ..., 119: read again.
    let reread: Vec<i64> = (0..120).filter(|i| i % 2 == 1).skip(10).collect();
    let want = (
        120 + reread.len() as i64,
        sum_ids(0..120) + reread.iter().sum::<i64>(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let have = server.count_and_sum("rs");
        if have == want {
            break;
        }
        assert!(
            have.0 <= want.0,
            "partition 0 was read again too: {have:?} vs {want:?}"
        );
        assert!(Instant::now() < deadline, "{have:?} vs {want:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Publish the re-read rows, then reset: stored offsets deleted; with useEarliestOffset
    // everything is read once more (rows a reset stops are not published: it stops tasks
    // without handoff).
    let (code, _) = server.post_json(
        &format!("{SUP}/rs/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202);
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.published_rows("rs") < want.0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, body) = server.post_json(&format!("{SUP}/rs/reset"), &json!({}));
    assert_eq!((code, body), (200, json!({"id": "rs"})));
    let want = (want.0 + 120, want.1 + sum_ids(0..120));
    server.wait_for_rows("rs", want, Duration::from_secs(30));
}

/// Exactly-once under crashes: while events are produced, the server is killed with SIGKILL at
/// random moments (reading, persisting hydrants, publishing: task duration and segment size are
/// small, so publishes happen all the time) and restarted; at the end every event is counted
/// exactly once.
#[test]
fn exactly_once_across_sigkills() {
    let Some(brokers) = brokers() else { return };
    const N: i64 = 4000;
    let topic = new_topic(&brokers, 2);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let s = spec(
        "crashy",
        &topic,
        &brokers,
        json!({"taskDuration": "PT2S", "completionTimeout": "PT30S"}),
    );
    let mut s = s;
    s["spec"]["tuningConfig"]["maxRowsPerSegment"] = json!(300);
    assert_eq!(server.post_json(SUP, &s).0, 200);
    // Produce in the background at a steady pace (~800 events/s).
    let producer = {
        let (brokers, topic) = (brokers.clone(), topic.clone());
        std::thread::spawn(move || {
            for start in (0..N).step_by(100) {
                produce(&brokers, &topic, 2, start..(start + 100).min(N));
                std::thread::sleep(Duration::from_millis(120));
            }
        })
    };
    let mut next = kill_schedule();
    let mut server = server;
    for kill in 0..6 {
        let wait_ms = 400 + next() % 1800;
        std::thread::sleep(Duration::from_millis(wait_ms));
        let (rows, _) = server.count_and_sum("crashy");
        eprintln!("kill {kill} after {wait_ms} ms ({rows} rows visible)");
        server.kill9();
        server = Server::start(dir.path());
    }
    producer.join().unwrap();
    server.wait_for_rows("crashy", (N, sum_ids(0..N)), Duration::from_secs(90));
    // Everything is eventually published once, too.
    let (code, _) = server.post_json(
        &format!("{SUP}/crashy/taskGroups/handoff"),
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.published_rows("crashy") < N {
        assert!(
            Instant::now() < deadline,
            "published {}",
            server.published_rows("crashy")
        );
        assert_eq!(server.count_and_sum("crashy"), (N, sum_ids(0..N)));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(server.published_rows("crashy"), N);
    assert_eq!(server.count_and_sum("crashy"), (N, sum_ids(0..N)));
}
