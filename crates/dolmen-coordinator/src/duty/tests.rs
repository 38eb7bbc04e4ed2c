use std::sync::atomic::AtomicI64;

use dolmen_common::Interval;
use dolmen_metadata::{AuditInfo, NewSegment, PublishMode, PublishRequest, SqlMetadataStore};
use dolmen_segment::LoadSpec;
use serde_json::{Value, json};

use super::*;

fn t(s: &str) -> i64 {
    dolmen_common::time::parse_iso_instant(s).unwrap()
}

struct Fixture {
    metadata: Arc<dyn MetadataStore>,
    view: Arc<SegmentView>,
    now: Arc<AtomicI64>,
    coordinator: Arc<Coordinator>,
}

async fn fixture() -> Fixture {
    let metadata: Arc<dyn MetadataStore> =
        Arc::new(SqlMetadataStore::connect("sqlite::memory:").await.unwrap());
    let view = Arc::new(SegmentView::new(Arc::clone(&metadata)));
    let now = Arc::new(AtomicI64::new(t("2015-09-20T00:00:00Z")));
    let clock_now = Arc::clone(&now);
    let coordinator = Coordinator::new(
        Arc::clone(&metadata),
        Arc::clone(&view),
        CoordinatorOptions {
            start_delay: Duration::ZERO,
            period: Duration::from_secs(3600),
            tier: "_default_tier".into(),
            clock: Arc::new(move || clock_now.load(Ordering::Acquire)),
            kill: Some(crate::kill::KillSettings {
                period: Duration::from_secs(3600),
                ..Default::default()
            }),
            audit_cleanup: Some(Retention::default()),
            rules_cleanup: Some(Retention::default()),
        },
    )
    .await
    .unwrap();
    Fixture {
        metadata,
        view,
        now,
        coordinator,
    }
}

/// Publishes one segment per hour of 2015-09-12 with `version`.
async fn publish_hours(metadata: &dyn MetadataStore, version: &str, hours: std::ops::Range<i64>) {
    let day = t("2015-09-12T00:00:00Z");
    let segments = hours
        .map(|h| NewSegment {
            interval: Interval::new(day + h * 3_600_000, day + (h + 1) * 3_600_000).unwrap(),
            load_spec: LoadSpec::Local {
                path: format!("/x/{version}/{h}"),
            },
            dimensions: vec![],
            metrics: vec![],
            columns: vec![],
            size: 10,
            num_rows: 1,
            shard: None,
        })
        .collect();
    metadata
        .publish_segments(PublishRequest {
            data_source: "wiki".into(),
            segments,
            mode: PublishMode::Overwrite {
                version: version.into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap();
}

async fn set_rules(f: &Fixture, ds: &str, rules: Value) {
    f.metadata
        .set_rules(ds, &rules, &AuditInfo::default())
        .await
        .unwrap();
}

fn served(f: &Fixture) -> usize {
    f.view
        .snapshot("wiki")
        .map_or(0, |s| s.timeline.visible_segments().len())
}

#[tokio::test]
async fn interval_load_then_drop_forever_keeps_half_the_day() {
    let f = fixture().await;
    publish_hours(f.metadata.as_ref(), "v1", 0..24).await;
    f.view.refresh().await.unwrap();
    assert_eq!(served(&f), 24);
    // The initial default rules load everything.
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats, RunStats::default());
    let a = f.coordinator.assignments();
    assert_eq!(a.segments.len(), 24);
    assert!(
        a.segments
            .values()
            .all(|s| s.replication_factor() == 2 && s.loaded)
    );

    set_rules(
        &f,
        "wiki",
        json!([
            {"type": "loadByInterval", "interval": "2015-09-12T12:00/2015-09-13"},
            {"type": "dropForever"}
        ]),
    )
    .await;
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.dropped, 12);
    assert_eq!(
        f.metadata.used_segments("wiki", None).await.unwrap().len(),
        12
    );
    assert_eq!(served(&f), 12);
    assert_eq!(f.coordinator.assignments().segments.len(), 12);

    // Rules back, segments marked used: all 24 stay.
    set_rules(&f, "wiki", json!([])).await;
    f.metadata
        .set_segments_used("wiki", &dolmen_metadata::SegmentSelector::All, true)
        .await
        .unwrap();
    f.view.refresh().await.unwrap();
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.dropped, 0);
    assert_eq!(served(&f), 24);
}

#[tokio::test]
async fn zero_replica_load_rule_keeps_segments_used_but_unserved() {
    let f = fixture().await;
    publish_hours(f.metadata.as_ref(), "v1", 0..4).await;
    f.view.refresh().await.unwrap();
    set_rules(
        &f,
        "wiki",
        json!([{"type": "loadByInterval", "interval": "2015-09-12T00:00/2015-09-12T02:00",
                "tieredReplicants": {}, "useDefaultTierForNull": false}]),
    )
    .await;
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!((stats.dropped, stats.unloaded), (0, 2));
    assert_eq!(
        f.metadata.used_segments("wiki", None).await.unwrap().len(),
        4
    );
    assert_eq!(served(&f), 2);
    // The full timeline still lists them as used and visible.
    assert_eq!(f.view.timeline("wiki").unwrap().visible_segments().len(), 4);
    let a = f.coordinator.assignments();
    assert_eq!(
        a.segments
            .values()
            .filter(|s| s.replication_factor() == 0 && !s.loaded)
            .count(),
        2
    );
    // Replicas on another tier only: not loaded here either.
    set_rules(
        &f,
        "wiki",
        json!([{"type": "loadForever", "tieredReplicants": {"hot": 1}}]),
    )
    .await;
    f.coordinator.run_once().await.unwrap();
    assert_eq!(served(&f), 0);
    set_rules(&f, "wiki", json!([{"type": "broadcastForever"}])).await;
    f.coordinator.run_once().await.unwrap();
    assert_eq!(served(&f), 4);
}

#[tokio::test]
async fn period_rules_follow_the_clock() {
    let f = fixture().await;
    publish_hours(f.metadata.as_ref(), "v1", 0..24).await;
    f.view.refresh().await.unwrap();
    set_rules(
        &f,
        "wiki",
        json!([{"type": "loadByPeriod", "period": "PT6H", "includeFuture": false}, {"type": "dropForever"}]),
    )
    .await;
    // At 2015-09-13T00:00 the last six hours are kept.
    f.now.store(t("2015-09-13T00:00:00Z"), Ordering::Release);
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.dropped, 18);
    // A day later, nothing matches the load rule any more.
    f.now.store(t("2015-09-14T00:00:00Z"), Ordering::Release);
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.dropped, 6);
    assert_eq!(served(&f), 0);
}

#[tokio::test]
async fn pause_stops_every_duty_and_overshadowed_segments_wait() {
    let f = fixture().await;
    publish_hours(f.metadata.as_ref(), "v1", 0..2).await;
    publish_hours(f.metadata.as_ref(), "v2", 0..1).await;
    f.view.refresh().await.unwrap();
    set_rules(&f, "wiki", json!([{"type": "dropForever"}])).await;
    f.metadata
        .set_config(
            COORDINATOR_CONFIG_KEY,
            None,
            &json!({"pauseCoordination": true, "millisToWaitBeforeDeleting": 0}),
        )
        .await
        .unwrap();
    let stats = f.coordinator.run_once().await.unwrap();
    assert!(stats.paused);
    assert_eq!(
        f.metadata.used_segments("wiki", None).await.unwrap().len(),
        3
    );

    // Unpaused: the overshadowed v1 hour goes (waiting time 0), drop rules take the rest.
    set_rules(&f, "wiki", json!([{"type": "loadForever"}])).await;
    f.metadata
        .set_config(
            COORDINATOR_CONFIG_KEY,
            None,
            &json!({"pauseCoordination": false, "millisToWaitBeforeDeleting": 0}),
        )
        .await
        .unwrap();
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.overshadowed_unused, 1);
    let used = f.metadata.used_segments("wiki", None).await.unwrap();
    assert_eq!(used.len(), 2);
    assert!(
        used.iter()
            .all(|s| s.version == "v2" || s.interval.start == t("2015-09-12T01:00:00Z"))
    );

    // With the default wait (15 minutes) a new overshadowed segment stays used.
    f.metadata
        .set_config(COORDINATOR_CONFIG_KEY, None, &json!({}))
        .await
        .unwrap();
    publish_hours(f.metadata.as_ref(), "v3", 0..1).await;
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.overshadowed_unused, 0);
    f.now.fetch_add(900_000, Ordering::AcqRel);
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!(stats.overshadowed_unused, 1);
}

#[tokio::test]
async fn the_loop_runs_on_its_period_and_stops_on_cancel() {
    let f = fixture().await;
    let cancel = CancellationToken::new();
    let handle = tokio::spawn(Arc::clone(&f.coordinator).run(cancel.clone()));
    for _ in 0..100 {
        if f.coordinator.runs() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(f.coordinator.runs() >= 1);
    f.coordinator.trigger();
    for _ in 0..100 {
        if f.coordinator.runs() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(f.coordinator.runs() >= 2);
    cancel.cancel();
    handle.await.unwrap();
    // The initial default rules were stored.
    let rules = f.metadata.rules().await.unwrap();
    assert_eq!(
        rules["_default"].rules,
        json!([{"tieredReplicants": {"_default_tier": 2}, "useDefaultTierForNull": true, "type": "loadForever"}])
    );
}

/// Records submissions instead of running tasks.
#[derive(Default)]
struct Recorder {
    submitted: std::sync::Mutex<Vec<Value>>,
    capacity: usize,
}

#[async_trait::async_trait]
impl crate::kill::KillTaskSubmitter for Recorder {
    fn total_worker_capacity(&self) -> usize {
        self.capacity
    }
    fn active_task_ids(&self) -> Vec<String> {
        Vec::new()
    }
    async fn submit(&self, spec: Value) -> Result<String, String> {
        let id = spec["id"].as_str().unwrap().to_string();
        self.submitted.lock().unwrap().push(spec);
        Ok(id)
    }
}

#[tokio::test]
async fn auto_kill_submits_for_old_unused_segments_within_slots_and_whitelist() {
    let f = fixture().await;
    publish_hours(f.metadata.as_ref(), "v1", 0..3).await;
    set_rules(&f, "wiki", json!([{"type": "dropForever"}])).await;
    let recorder = Arc::new(Recorder {
        capacity: 1,
        ..Recorder::default()
    });
    f.coordinator
        .set_kill_submitter(Arc::clone(&recorder) as Arc<dyn crate::kill::KillTaskSubmitter>);
    // Dropped now; one slot with ratio 0.1 gives no kill slot.
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!((stats.dropped, stats.kill_tasks), (3, 0));
    f.metadata
        .set_config(
            COORDINATOR_CONFIG_KEY,
            None,
            &json!({"killTaskSlotRatio": 1.0, "killDataSourceWhitelist": ["other"]}),
        )
        .await
        .unwrap();
    // Not whitelisted, and then not unused long enough (bufferPeriod P30D), nothing.
    f.now.fetch_add(3_600_000, Ordering::AcqRel);
    assert_eq!(f.coordinator.run_once().await.unwrap().kill_tasks, 0);
    f.metadata
        .set_config(
            COORDINATOR_CONFIG_KEY,
            None,
            &json!({"killTaskSlotRatio": 1.0}),
        )
        .await
        .unwrap();
    f.now.fetch_add(3_600_000, Ordering::AcqRel);
    assert_eq!(f.coordinator.run_once().await.unwrap().kill_tasks, 0);
    // Past the buffer period (the real used-status time is now; the clock moves 31 days on),
    // and the segments (2015) end long before now - P90D: one task for the three hours.
    f.now.store(
        dolmen_common::time::now_millis() + 31 * 24 * 3_600_000,
        Ordering::Release,
    );
    assert_eq!(f.coordinator.run_once().await.unwrap().kill_tasks, 1);
    let spec = recorder.submitted.lock().unwrap()[0].clone();
    assert_eq!(spec["type"], "kill");
    assert_eq!(spec["dataSource"], "wiki");
    assert_eq!(
        spec["interval"],
        "2015-09-12T00:00:00.000Z/2015-09-12T03:00:00.000Z"
    );
    assert!(
        spec["id"]
            .as_str()
            .unwrap()
            .starts_with("coordinator-issued_kill_wiki_")
    );
    // The kill period (1 hour) has not elapsed: no second task.
    assert_eq!(f.coordinator.run_once().await.unwrap().kill_tasks, 0);
}

#[tokio::test]
async fn cleanup_deletes_old_audit_entries_and_rules_of_absent_datasources() {
    let f = fixture().await;
    set_rules(&f, "gone", json!([{"type": "dropForever"}])).await;
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!((stats.audit_deleted, stats.rules_deleted), (0, 0));
    // 91 days later (and a day after the last cleanup): both go.
    f.now.store(
        dolmen_common::time::now_millis() + 91 * 24 * 3_600_000,
        Ordering::Release,
    );
    let stats = f.coordinator.run_once().await.unwrap();
    assert_eq!((stats.audit_deleted, stats.rules_deleted), (1, 1));
    assert!(!f.metadata.rules().await.unwrap().contains_key("gone"));
    assert!(f.metadata.rules().await.unwrap().contains_key("_default"));
}
