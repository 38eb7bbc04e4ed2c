use dolmen_metadata::AuditInfo;
use dolmen_segment::{LoadSpec, ShardSpec};
use serde_json::json;

use super::*;

fn seg(interval: &str, partition: u32, state: Option<Value>) -> Arc<DataSegment> {
    let interval = Interval::parse(interval).unwrap();
    Arc::new(DataSegment {
        data_source: "ds".into(),
        interval,
        version: "v1".into(),
        load_spec: LoadSpec::Local { path: "/x".into() },
        dimensions: String::new(),
        metrics: String::new(),
        shard_spec: ShardSpec::Numbered {
            partition_num: partition,
            partitions: 0,
        },
        binary_version: 9,
        size: 100,
        num_rows: 1,
        columns: vec![],
        last_compaction_state: state,
        identifier: format!("ds_{interval}_v1_{partition}"),
    })
}

#[test]
fn config_reads_back_with_druid_defaults_and_rejects_bad_fields() {
    let c = DataSourceCompactionConfig::from_json(&json!({"dataSource": "wiki"})).unwrap();
    let v = serde_json::to_value(&c).unwrap();
    assert_eq!(
        v,
        json!({"dataSource": "wiki", "taskPriority": 25, "inputSegmentSizeBytes": 100000000000000i64,
               "maxRowsPerSegment": null, "skipOffsetFromLatest": "P1D", "tuningConfig": null,
               "granularitySpec": null, "dimensionsSpec": null, "metricsSpec": null,
               "transformSpec": null, "ioConfig": null, "taskContext": null})
    );
    let bad = |v: Value| match DataSourceCompactionConfig::from_json(&v) {
        Err(OverlordError::InvalidTask(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(bad(json!({})).contains("dataSource"));
    assert!(
        bad(json!({"dataSource": "w", "skipOffsetFromLatest": "soon"}))
            .contains("skipOffsetFromLatest")
    );
    assert!(bad(json!({"dataSource": "w", "taskPriority": "high"})).contains("taskPriority"));
    assert!(
        bad(json!({"dataSource": "w", "granularitySpec": {"segmentGranularity": "often"}}))
            .contains("granularitySpec.segmentGranularity")
    );
    assert!(
        bad(json!({"dataSource": "w", "tuningConfig": {"partitionsSpec": {"type": "x"}}}))
            .contains("tuningConfig")
    );
    assert!(bad(json!({"dataSource": "w", "engine": "msq"})).contains("MSQ"));
}

#[test]
fn slots_follow_druids_formula() {
    let mut c = CompactionClusterConfig::default();
    assert_eq!(c.total_slots(4), 1); // floor(0.4) = 0, at least one
    c.compaction_task_slot_ratio = 0.5;
    assert_eq!(c.total_slots(8), 4);
    c.max_compaction_task_slots = 2;
    assert_eq!(c.total_slots(8), 2);
    c.max_compaction_task_slots = 0;
    assert_eq!(c.total_slots(8), 0);
}

#[test]
fn candidates_are_newest_first_and_regrouped_by_granularity() {
    let segs = vec![
        seg("2015-09-12T00/2015-09-12T01", 0, None),
        seg("2015-09-12T01/2015-09-12T02", 0, None),
        seg("2015-09-13T00/2015-09-13T01", 0, None),
    ];
    let c = candidates(segs.clone(), None);
    assert_eq!(c.len(), 3);
    assert_eq!(
        c[0].0,
        Interval::parse("2015-09-13T00/2015-09-13T01").unwrap()
    );
    let day = Granularity::from_name("DAY").unwrap();
    let c = candidates(segs, Some(&day));
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].0, Interval::parse("2015-09-13/2015-09-14").unwrap());
    assert_eq!(c[1].1.len(), 2);
}

#[test]
fn compaction_state_decides_what_needs_compacting() {
    let config = DataSourceCompactionConfig::from_json(
        &json!({"dataSource": "ds", "maxRowsPerSegment": 1000}),
    )
    .unwrap();
    let iv = Interval::parse("2015-09-12T00/2015-09-12T01").unwrap();
    assert_eq!(
        needs_compaction(&config, iv, &[seg("2015-09-12T00/2015-09-12T01", 0, None)]).as_deref(),
        Some("not compacted yet")
    );
    let desired =
        desired_state(&config, iv, &[seg("2015-09-12T00/2015-09-12T01", 0, None)]).unwrap();
    let done = seg("2015-09-12T00/2015-09-12T01", 0, Some(desired.clone()));
    assert_eq!(needs_compaction(&config, iv, &[done]), None);
    let mut other = desired;
    other["partitionsSpec"]["maxRowsPerSegment"] = json!(5000);
    let reason = needs_compaction(
        &config,
        iv,
        &[seg("2015-09-12T00/2015-09-12T01", 0, Some(other))],
    )
    .unwrap();
    assert!(reason.starts_with("'partitionsSpec' mismatch"), "{reason}");
}

#[test]
fn history_keeps_changes_of_one_datasource() {
    let entry = |t: i64, doc: Value| AuditEntry {
        key: COMPACTION_CONFIG_KEY.into(),
        audit_type: COMPACTION_CONFIG_KEY.into(),
        info: AuditInfo {
            author: "a".into(),
            comment: "c".into(),
            ip: "127.0.0.1".into(),
            identity: "allowAll".into(),
        },
        payload: doc.to_string(),
        created_ms: t,
    };
    let a = json!({"dataSource": "a"});
    let b = json!({"dataSource": "b"});
    let entries = vec![
        entry(1, json!({"compactionConfigs": [b]})),
        entry(2, json!({"compactionConfigs": [a, b]})),
        entry(
            3,
            json!({"compactionConfigs": [a, b], "maxCompactionTaskSlots": 3}),
        ),
        entry(
            4,
            json!({"compactionConfigs": [b], "maxCompactionTaskSlots": 3}),
        ),
        entry(
            5,
            json!({"compactionConfigs": [b, {"dataSource": "b", "taskPriority": 1}], "maxCompactionTaskSlots": 3}),
        ),
    ];
    let h = datasource_history("a", &entries);
    assert_eq!(h.len(), 3);
    assert_eq!(h[0]["compactionConfig"]["dataSource"], "a");
    assert_eq!(h[1]["globalConfig"]["maxCompactionTaskSlots"], 3);
    assert_eq!(h[2]["compactionConfig"], Value::Null);
    assert_eq!(h[0]["auditInfo"]["author"], "a");
    assert!(datasource_history("zzz", &entries).is_empty());
}
