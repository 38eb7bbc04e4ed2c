//! Conformance tests for [`MetadataStore`](crate::MetadataStore) backends.
//!
//! Each function takes a fresh, empty store. Backends instantiate the whole suite with
//! [`metadata_store_conformance!`](crate::metadata_store_conformance), passing an async
//! expression that builds a fresh store (QW's `metastore_test_suite!` pattern).

use std::sync::Arc;

use dolmen_common::Interval;
use dolmen_segment::{LoadSpec, Timeline};

use crate::{
    MetadataError, MetadataStore, NewSegment, PublishMode, PublishRequest, RunnerStatus,
    SegmentSelector, TaskFilter, TaskLocation, TaskLockRecord, TaskRecord, TaskState,
    TaskStatusUpdate, UnusedSegmentsQuery,
};

fn new_segment(interval: &str, path: &str) -> NewSegment {
    NewSegment {
        interval: Interval::parse(interval).unwrap(),
        load_spec: LoadSpec::Local { path: path.into() },
        dimensions: vec!["page".into()],
        metrics: vec!["count".into()],
        columns: vec![],
        size: 100,
        num_rows: 10,
        shard: None,
    }
}

/// Overwrite publishes number partitions 0..n with n core partitions; a higher version
/// overshadows.
pub async fn publish_overwrite_and_overshadow(store: &dyn MetadataStore) {
    let out = store
        .publish_segments(PublishRequest {
            data_source: "ds".into(),
            segments: vec![
                new_segment("2015-09-12/2015-09-13", "/a"),
                new_segment("2015-09-12/2015-09-13", "/b"),
            ],
            mode: PublishMode::Overwrite {
                version: "v1".into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].shard_spec.partition_num(), 1);
    assert_eq!(out[1].shard_spec.core_partitions(), 2);
    assert!(out[1].identifier.ends_with("_v1_1"));
    store
        .publish_segments(PublishRequest {
            data_source: "ds".into(),
            segments: vec![new_segment("2015-09-12/2015-09-13", "/c")],
            mode: PublishMode::Overwrite {
                version: "v2".into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap();
    let used = store.used_segments("ds", None).await.unwrap();
    assert_eq!(used.len(), 3);
    let tl = Timeline::build(used.into_iter().map(Arc::new));
    assert_eq!(tl.visible_segments().len(), 1);
    assert_eq!(tl.visible_segments()[0].version, "v2");
    // Same version again is a conflict, and nothing of the failed request is visible.
    let err = store
        .publish_segments(PublishRequest {
            data_source: "ds".into(),
            segments: vec![
                new_segment("2015-09-13/2015-09-14", "/x"),
                new_segment("2015-09-12/2015-09-13", "/d"),
            ],
            mode: PublishMode::Overwrite {
                version: "v2".into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, MetadataError::Conflict(_)), "{err}");
    assert_eq!(store.used_segments("ds", None).await.unwrap().len(), 3);
    assert_eq!(store.data_sources().await.unwrap(), vec!["ds".to_string()]);
    assert_eq!(
        store
            .max_used_version("ds", Interval::parse("2015-09-12/2015-09-13").unwrap())
            .await
            .unwrap()
            .as_deref(),
        Some("v2")
    );
}

/// Appends continue the partition numbering of the visible version.
pub async fn publish_append(store: &dyn MetadataStore) {
    let req = |path: &str| PublishRequest {
        data_source: "ds".into(),
        segments: vec![new_segment("2015-09-12/2015-09-13", path)],
        mode: PublishMode::Append {
            version_if_new: format!("v{path}"),
        },
        drop_existing: vec![],
        commit: None,
        last_compaction_state: None,
    };
    let a = store.publish_segments(req("1")).await.unwrap();
    assert_eq!(a[0].version, "v1");
    assert_eq!(a[0].shard_spec.partition_num(), 0);
    let b = store.publish_segments(req("2")).await.unwrap();
    assert_eq!(b[0].version, "v1");
    assert_eq!(b[0].shard_spec.partition_num(), 1);
    let tl = Timeline::build(
        store
            .used_segments("ds", None)
            .await
            .unwrap()
            .into_iter()
            .map(Arc::new),
    );
    assert_eq!(tl.visible_segments().len(), 2);
    // Appending an HOUR chunk into a DAY chunk is refused.
    let err = store
        .publish_segments(PublishRequest {
            data_source: "ds".into(),
            segments: vec![new_segment("2015-09-12T01/2015-09-12T02", "/h")],
            mode: PublishMode::Append {
                version_if_new: "v9".into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, MetadataError::Conflict(_)));
}

/// `dropExisting` marks older segments inside the intervals unused in the same transaction.
pub async fn publish_drop_existing(store: &dyn MetadataStore) {
    for (iv, p) in [
        ("2015-09-12/2015-09-13", "/a"),
        ("2015-09-13/2015-09-14", "/b"),
    ] {
        store
            .publish_segments(PublishRequest {
                data_source: "ds".into(),
                segments: vec![new_segment(iv, p)],
                mode: PublishMode::Overwrite {
                    version: "v1".into(),
                },
                drop_existing: vec![],
                commit: None,
                last_compaction_state: None,
            })
            .await
            .unwrap();
    }
    store
        .publish_segments(PublishRequest {
            data_source: "ds".into(),
            segments: vec![new_segment("2015-09-12/2015-09-13", "/c")],
            mode: PublishMode::Overwrite {
                version: "v2".into(),
            },
            drop_existing: vec![Interval::parse("2015-09-12/2015-09-14").unwrap()],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap();
    let used = store.used_segments("ds", None).await.unwrap();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].version, "v2");
    let ids: Vec<String> = used.iter().map(|s| s.identifier.clone()).collect();
    assert_eq!(store.mark_segments_unused(&ids).await.unwrap(), 1);
    assert!(store.data_sources().await.unwrap().is_empty());
}

/// Publishes one overwrite segment per interval at `version`; returns their ids.
async fn publish_days(
    store: &dyn MetadataStore,
    ds: &str,
    version: &str,
    intervals: &[&str],
) -> Vec<String> {
    let mut ids = Vec::new();
    for iv in intervals {
        let out = store
            .publish_segments(PublishRequest {
                data_source: ds.into(),
                segments: vec![new_segment(iv, &format!("/{ds}/{iv}/{version}"))],
                mode: PublishMode::Overwrite {
                    version: version.into(),
                },
                drop_existing: vec![],
                commit: None,
                last_compaction_state: None,
            })
            .await
            .unwrap();
        ids.push(out[0].identifier.clone());
    }
    ids
}

/// Used flags change by interval (fully contained segments only), by ids (other
/// datasources' ids skipped) and for a whole datasource; nothing is deleted.
pub async fn segments_used_flag(store: &dyn MetadataStore) {
    let days = [
        "2015-09-12/2015-09-13",
        "2015-09-13/2015-09-14",
        "2015-09-14/2015-09-15",
    ];
    let ids = publish_days(store, "ds", "v1", &days).await;
    let other = publish_days(store, "other", "v1", &days[..1]).await;
    let iv = |s: &str| Interval::parse(s).unwrap();

    // Interval: only segments fully inside change.
    let n = store
        .set_segments_used(
            "ds",
            &SegmentSelector::Interval {
                interval: iv("2015-09-12/2015-09-13T12:00"),
                versions: None,
            },
            false,
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let rec = store.segment(&ids[0]).await.unwrap().unwrap();
    assert!(!rec.used);
    assert!(rec.used_status_last_updated_ms >= rec.created_ms);
    assert_eq!(rec.segment.identifier, ids[0]);
    assert!(store.segment(&ids[1]).await.unwrap().unwrap().used);
    assert!(store.segment("nope").await.unwrap().is_none());
    assert_eq!(store.used_segments("ds", None).await.unwrap().len(), 2);
    assert_eq!(store.segments("ds", false).await.unwrap().len(), 2);
    let all = store.segments("ds", true).await.unwrap();
    assert_eq!(
        all.iter()
            .map(|r| r.segment.identifier.clone())
            .collect::<Vec<_>>(),
        ids,
        "ordered by interval"
    );
    // Already unused: no change.
    assert_eq!(
        store
            .set_segments_used("ds", &SegmentSelector::Ids(vec![ids[0].clone()]), false)
            .await
            .unwrap(),
        0
    );
    // Versions filter.
    let versioned = |v: &str| SegmentSelector::Interval {
        interval: iv("2015-09-01/2015-10-01"),
        versions: Some(vec![v.to_string()]),
    };
    assert_eq!(
        store
            .set_segments_used("ds", &versioned("v0"), false)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .set_segments_used("ds", &versioned("v1"), false)
            .await
            .unwrap(),
        2
    );
    assert!(store.data_sources().await.unwrap() == vec!["other".to_string()]);
    assert_eq!(
        store.all_data_source_names().await.unwrap(),
        vec!["ds".to_string(), "other".to_string()]
    );
    // Ids: an id of another datasource and an unknown id are skipped.
    let n = store
        .set_segments_used(
            "ds",
            &SegmentSelector::Ids(vec![ids[1].clone(), other[0].clone(), "nope".into()]),
            true,
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(store.segment(&other[0]).await.unwrap().unwrap().used);
    // All.
    assert_eq!(
        store
            .set_segments_used("ds", &SegmentSelector::All, true)
            .await
            .unwrap(),
        2
    );
    assert_eq!(store.used_segments("ds", None).await.unwrap().len(), 3);
    assert_eq!(
        store
            .set_segments_used("ds", &SegmentSelector::All, false)
            .await
            .unwrap(),
        3
    );
    assert!(store.used_segments("ds", None).await.unwrap().is_empty());
    assert_eq!(store.segments("ds", true).await.unwrap().len(), 3);
    assert_eq!(store.used_segments("other", None).await.unwrap().len(), 1);
}

/// Kill queries select unused segments fully inside the interval (versions, last-update
/// bound, limit), and deleting spares segments that are used again.
pub async fn unused_segments_and_delete(store: &dyn MetadataStore) {
    let days = [
        "2015-09-12/2015-09-13",
        "2015-09-13/2015-09-14",
        "2015-09-14/2015-09-15",
    ];
    let v1 = publish_days(store, "ds", "v1", &days).await;
    let v2 = publish_days(store, "ds", "v2", &days[..1]).await;
    let iv = |s: &str| Interval::parse(s).unwrap();
    let query = |interval: &str| UnusedSegmentsQuery {
        data_source: "ds".into(),
        interval: iv(interval),
        versions: None,
        max_used_status_last_updated_ms: None,
        limit: 100,
    };
    assert!(
        store
            .unused_segments(&query("2015/2016"))
            .await
            .unwrap()
            .is_empty()
    );
    store
        .set_segments_used("ds", &SegmentSelector::Ids(v1.clone()), false)
        .await
        .unwrap();
    let all = store.unused_segments(&query("2015/2016")).await.unwrap();
    assert_eq!(
        all.iter()
            .map(|r| r.segment.identifier.clone())
            .collect::<Vec<_>>(),
        v1
    );
    assert!(all.iter().all(|r| !r.used));
    // Fully inside only.
    assert_eq!(
        store
            .unused_segments(&query("2015-09-12/2015-09-13T12:00"))
            .await
            .unwrap()
            .len(),
        1
    );
    // Limit and versions.
    let limited = store
        .unused_segments(&UnusedSegmentsQuery {
            limit: 2,
            ..query("2015/2016")
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 2);
    assert_eq!(limited[0].segment.identifier, v1[0]);
    let none = store
        .unused_segments(&UnusedSegmentsQuery {
            versions: Some(vec!["v2".into()]),
            ..query("2015/2016")
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "v2 is used");
    // Last-update bound.
    let before = store
        .unused_segments(&UnusedSegmentsQuery {
            max_used_status_last_updated_ms: Some(0),
            ..query("2015/2016")
        })
        .await
        .unwrap();
    assert!(before.is_empty());
    // Delete: the used v2 segment and a re-used v1 segment survive.
    store
        .set_segments_used("ds", &SegmentSelector::Ids(vec![v1[2].clone()]), true)
        .await
        .unwrap();
    let mut ask = v1.clone();
    ask.push(v2[0].clone());
    ask.push("nope".into());
    let deleted = store.delete_unused_segments(&ask).await.unwrap();
    assert_eq!(deleted, v1[..2].to_vec());
    assert!(store.segment(&v1[0]).await.unwrap().is_none());
    assert!(store.segment(&v1[2]).await.unwrap().unwrap().used);
    assert!(store.segment(&v2[0]).await.unwrap().unwrap().used);
    assert_eq!(store.segments("ds", true).await.unwrap().len(), 2);
}

fn task(id: &str, ds: &str, created: i64) -> TaskRecord {
    TaskRecord {
        id: id.into(),
        task_type: "index_parallel".into(),
        group_id: id.into(),
        data_source: ds.into(),
        created_ms: created,
        queue_insertion_ms: created,
        status: TaskState::Running,
        runner_status: RunnerStatus::Waiting,
        duration_ms: -1,
        error_msg: None,
        location: TaskLocation::unknown(),
        payload: serde_json::json!({"type": "index_parallel", "id": id}),
    }
}

/// Tasks insert, update, list with filters, and keep reports.
pub async fn tasks_round_trip(store: &dyn MetadataStore) {
    store.insert_task(&task("t1", "a", 1000)).await.unwrap();
    store.insert_task(&task("t2", "b", 2000)).await.unwrap();
    store.insert_task(&task("t3", "a", 3000)).await.unwrap();
    assert!(matches!(
        store.insert_task(&task("t1", "a", 1)).await,
        Err(MetadataError::Conflict(_))
    ));
    store
        .update_task_status(&TaskStatusUpdate {
            id: "t1".into(),
            status: TaskState::Failed,
            runner_status: RunnerStatus::None,
            duration_ms: 5,
            error_msg: Some("boom".into()),
            location: TaskLocation {
                host: Some("localhost".into()),
                port: 8888,
                tls_port: -1,
            },
        })
        .await
        .unwrap();
    let t1 = store.get_task("t1").await.unwrap().unwrap();
    assert_eq!(t1.status, TaskState::Failed);
    assert_eq!(t1.error_msg.as_deref(), Some("boom"));
    assert_eq!(t1.location.port, 8888);
    assert!(store.get_task("nope").await.unwrap().is_none());
    let running = store
        .list_tasks(&TaskFilter {
            statuses: Some(vec![TaskState::Running]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        running.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        vec!["t3", "t2"]
    );
    let a = store
        .list_tasks(&TaskFilter {
            data_source: Some("a".into()),
            max: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].id, "t3");
    let created = store
        .list_tasks(&TaskFilter {
            created: Some(Interval {
                start: 1500,
                end: 2500,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].id, "t2");
    store
        .set_task_report("t1", &serde_json::json!({"x": 1}))
        .await
        .unwrap();
    assert_eq!(store.task_report("t1").await.unwrap().unwrap()["x"], 1);
    assert!(store.task_report("t2").await.unwrap().is_none());
    assert!(matches!(
        store.set_task_report("nope", &serde_json::json!({})).await,
        Err(MetadataError::NotFound(_))
    ));
}

/// Locks insert, list and delete per task.
pub async fn locks_round_trip(store: &dyn MetadataStore) {
    let lock = TaskLockRecord {
        id: "l1".into(),
        task_id: "t1".into(),
        data_source: "ds".into(),
        interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
        version: "v1".into(),
        lock_type: "EXCLUSIVE".into(),
    };
    store.insert_lock(&lock).await.unwrap();
    assert_eq!(store.list_locks().await.unwrap(), vec![lock]);
    assert_eq!(store.delete_locks("t1").await.unwrap(), 1);
    assert!(store.list_locks().await.unwrap().is_empty());
}

/// Supervisor specs are versioned append-only: history newest first, the latest version per
/// id, tombstones kept.
pub async fn supervisors_history(store: &dyn MetadataStore) {
    assert!(store.latest_supervisors().await.unwrap().is_empty());
    let a1 = store
        .insert_supervisor("a", &serde_json::json!({"type": "logstream", "v": 1}))
        .await
        .unwrap();
    let a2 = store
        .insert_supervisor("a", &serde_json::json!({"type": "logstream", "v": 2}))
        .await
        .unwrap();
    assert!(a2.created_ms > a1.created_ms, "versions strictly increase");
    store
        .insert_supervisor("b", &serde_json::json!({"type": "logstream", "v": 1}))
        .await
        .unwrap();
    let tomb = store
        .insert_supervisor(
            "b",
            &serde_json::json!({"type": crate::SupervisorRecord::TOMBSTONE_TYPE}),
        )
        .await
        .unwrap();
    assert!(tomb.is_tombstone());
    let latest = store.latest_supervisors().await.unwrap();
    assert_eq!(latest.len(), 2);
    assert_eq!(latest[0].spec_id, "a");
    assert_eq!(latest[0].payload["v"], 2);
    assert!(!latest[0].is_tombstone());
    assert!(latest[1].is_tombstone());
    let hist = store.supervisor_history(Some("a")).await.unwrap();
    assert_eq!(
        hist.iter()
            .map(|r| r.payload["v"].clone())
            .collect::<Vec<_>>(),
        vec![serde_json::json!(2), serde_json::json!(1)]
    );
    assert_eq!(store.supervisor_history(None).await.unwrap().len(), 4);
    assert!(
        store
            .supervisor_history(Some("zz"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Stream offsets are compare-and-swapped together with the segments they cover.
pub async fn stream_commit_compare_and_swap(store: &dyn MetadataStore) {
    use std::collections::BTreeMap;
    let offsets = |pairs: &[(&str, i64)]| -> BTreeMap<String, serde_json::Value> {
        pairs
            .iter()
            .map(|(p, o)| (p.to_string(), serde_json::json!(o)))
            .collect()
    };
    let publish = |path: &'static str, start: &[(&str, i64)], end: &[(&str, i64)]| PublishRequest {
        data_source: "rt".into(),
        segments: vec![new_segment("2015-09-12/2015-09-13", path)],
        mode: PublishMode::Append {
            version_if_new: "v1".into(),
        },
        drop_existing: vec![],
        commit: Some(crate::StreamCommit {
            stream: "topic".into(),
            start: offsets(start),
            end: offsets(end),
        }),
        last_compaction_state: None,
    };
    assert_eq!(store.stream_offsets("rt").await.unwrap(), None);
    // No stored offsets: any start is accepted.
    store
        .publish_segments(publish("/1", &[("0", 5), ("1", 0)], &[("0", 10), ("1", 7)]))
        .await
        .unwrap();
    let stored = store.stream_offsets("rt").await.unwrap().unwrap();
    assert_eq!(stored.stream, "topic");
    assert_eq!(stored.partitions, offsets(&[("0", 10), ("1", 7)]));
    // A replica that read the same range publishes again: rejected, nothing written.
    let err = store
        .publish_segments(publish(
            "/dup",
            &[("0", 5), ("1", 0)],
            &[("0", 10), ("1", 7)],
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, MetadataError::Conflict(_)), "{err}");
    assert_eq!(store.used_segments("rt", None).await.unwrap().len(), 1);
    // The next range of partition 0 only: partition 1 keeps its offset.
    store
        .publish_segments(publish("/2", &[("0", 10)], &[("0", 12)]))
        .await
        .unwrap();
    assert_eq!(
        store
            .stream_offsets("rt")
            .await
            .unwrap()
            .unwrap()
            .partitions,
        offsets(&[("0", 12), ("1", 7)])
    );
    // Offsets only (no segments: every row was filtered out) still move.
    let mut req = publish("/x", &[("1", 7)], &[("1", 9)]);
    req.segments.clear();
    store.publish_segments(req).await.unwrap();
    assert_eq!(
        store
            .stream_offsets("rt")
            .await
            .unwrap()
            .unwrap()
            .partitions,
        offsets(&[("0", 12), ("1", 9)])
    );
    // Another stream is refused.
    let mut other = publish("/y", &[], &[("0", 1)]);
    other.commit.as_mut().unwrap().stream = "other".into();
    assert!(store.publish_segments(other).await.is_err());
    // Resets: compare-and-swap against what is stored.
    let current = store.stream_offsets("rt").await.unwrap();
    let reset = crate::StreamOffsets {
        stream: "topic".into(),
        partitions: offsets(&[("0", 3), ("1", 9)]),
    };
    assert!(matches!(
        store
            .set_stream_offsets("rt", Some(&None), Some(&reset))
            .await
            .unwrap_err(),
        MetadataError::Conflict(_)
    ));
    store
        .set_stream_offsets("rt", Some(&current), Some(&reset))
        .await
        .unwrap();
    assert_eq!(store.stream_offsets("rt").await.unwrap(), Some(reset));
    store.set_stream_offsets("rt", None, None).await.unwrap();
    assert_eq!(store.stream_offsets("rt").await.unwrap(), None);
}

/// Configuration documents: absent until stored, replaced as a whole, compare-and-swapped.
pub async fn config_documents(store: &dyn MetadataStore) {
    use serde_json::json;
    let key = crate::LOOKUPS_CONFIG_KEY;
    assert_eq!(store.config(key).await.unwrap(), None);
    // Nothing stored yet: `Some(None)` is the expected state.
    store
        .set_config(key, Some(&None), &json!({}))
        .await
        .unwrap();
    assert_eq!(store.config(key).await.unwrap(), Some(json!({})));
    let v1 = json!({"__default": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"a": "x"}}}}});
    store
        .set_config(key, Some(&Some(json!({}))), &v1)
        .await
        .unwrap();
    assert_eq!(store.config(key).await.unwrap(), Some(v1.clone()));
    // A writer that read an older document is refused, and nothing changes.
    let err = store
        .set_config(key, Some(&Some(json!({}))), &json!({"x": {}}))
        .await
        .unwrap_err();
    assert!(matches!(err, MetadataError::Conflict(_)), "{err}");
    assert!(matches!(
        store
            .set_config(key, Some(&None), &json!({}))
            .await
            .unwrap_err(),
        MetadataError::Conflict(_)
    ));
    assert_eq!(store.config(key).await.unwrap(), Some(v1));
    // Without `expected`, a plain replace; other names are independent.
    store
        .set_config(key, None, &json!({"t": {}}))
        .await
        .unwrap();
    assert_eq!(store.config(key).await.unwrap(), Some(json!({"t": {}})));
    assert_eq!(store.config("other").await.unwrap(), None);
}

/// Rules are versioned per datasource; an unchanged array writes nothing; every change is
/// audited with its author, comment and address; `init_rules` only fills an absent entry.
pub async fn rules_versions_and_audit(store: &dyn MetadataStore) {
    use crate::{AuditInfo, AuditQuery, RULES_AUDIT_TYPE};
    use serde_json::json;
    let default = json!([{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]);
    assert!(store.rules().await.unwrap().is_empty());
    assert!(store.init_rules("_default", &default).await.unwrap());
    assert!(!store.init_rules("_default", &json!([])).await.unwrap());
    let info = AuditInfo {
        author: "ann".into(),
        identity: "allowAll".into(),
        comment: "keep a day".into(),
        ip: "127.0.0.1".into(),
    };
    let r1 = json!([{"type": "loadByPeriod", "period": "P1D"}, {"type": "dropForever"}]);
    assert!(store.set_rules("wiki", &r1, &info).await.unwrap());
    assert!(!store.set_rules("wiki", &r1, &info).await.unwrap());
    let r2 = json!([{"type": "loadForever"}]);
    assert!(
        store
            .set_rules("wiki", &r2, &AuditInfo::default())
            .await
            .unwrap()
    );
    assert!(store.set_rules("empty", &json!([]), &info).await.unwrap());
    let all = store.rules().await.unwrap();
    assert_eq!(
        all.keys().cloned().collect::<Vec<_>>(),
        vec!["_default", "empty", "wiki"]
    );
    assert_eq!(all["_default"].rules, default);
    assert_eq!(all["wiki"].rules, r2);
    assert!(all["wiki"].version.ends_with('Z'));

    // Newest first by count; oldest first by interval; the init wrote no entry.
    let newest = store
        .audit_history(RULES_AUDIT_TYPE, Some("wiki"), &AuditQuery::Count(5))
        .await
        .unwrap();
    assert_eq!(newest.len(), 2);
    assert_eq!(newest[0].payload, r2.to_string());
    assert_eq!(newest[1].info, info);
    assert_eq!(newest[1].key, "wiki");
    assert_eq!(newest[1].audit_type, RULES_AUDIT_TYPE);
    let one = store
        .audit_history(RULES_AUDIT_TYPE, None, &AuditQuery::Count(1))
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].key, "empty");
    let window = Interval::new(newest[1].created_ms, one[0].created_ms + 1).unwrap();
    let all_in = store
        .audit_history(RULES_AUDIT_TYPE, None, &AuditQuery::Interval(window))
        .await
        .unwrap();
    assert_eq!(all_in.len(), 3);
    assert_eq!(all_in[0].payload, r1.to_string());
    let before = Interval::new(0, newest[1].created_ms - 1).unwrap();
    assert!(
        store
            .audit_history(RULES_AUDIT_TYPE, None, &AuditQuery::Interval(before))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .audit_history("coordinator.config", None, &AuditQuery::Count(5))
            .await
            .unwrap()
            .is_empty()
    );
}

/// An audited configuration write stores the document and an entry in one step, every time.
pub async fn audited_config(store: &dyn MetadataStore) {
    use crate::{AuditInfo, AuditQuery, AuditTarget};
    use serde_json::json;
    let target = AuditTarget::config("coordinator.config");
    let info = AuditInfo {
        author: "bo".into(),
        ..AuditInfo::default()
    };
    let v = json!({"pauseCoordination": true});
    store
        .set_config_audited("coordinator.config", &v, &target, &info)
        .await
        .unwrap();
    store
        .set_config_audited("coordinator.config", &v, &target, &info)
        .await
        .unwrap();
    assert_eq!(
        store.config("coordinator.config").await.unwrap(),
        Some(v.clone())
    );
    let h = store
        .audit_history(
            "coordinator.config",
            Some("coordinator.config"),
            &AuditQuery::Count(10),
        )
        .await
        .unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].payload, v.to_string());
    assert_eq!(h[0].info.author, "bo");
}

/// Cleanup: old audit entries go; rules of datasources without any segment go once old, never
/// `_default` and never those of datasources with segments.
pub async fn audit_and_rules_cleanup(store: &dyn MetadataStore) {
    use crate::{AuditInfo, AuditQuery};
    use serde_json::json;
    let info = AuditInfo::default();
    store
        .init_rules("_default", &json!([{"type": "loadForever"}]))
        .await
        .unwrap();
    store
        .set_rules("gone", &json!([{"type": "dropForever"}]), &info)
        .await
        .unwrap();
    store
        .set_rules("ds", &json!([{"type": "dropForever"}]), &info)
        .await
        .unwrap();
    store
        .publish_segments(PublishRequest {
            data_source: "ds".into(),
            segments: vec![new_segment("2015-09-12/2015-09-13", "/a")],
            mode: PublishMode::Overwrite {
                version: "v1".into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        })
        .await
        .unwrap();
    // Nothing is old enough yet.
    assert_eq!(
        store.delete_rules_of_absent_data_sources(0).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(store.delete_audit_before(0).await.unwrap(), 0);
    let later = dolmen_common::time::now_millis() + 1000;
    assert_eq!(
        store
            .delete_rules_of_absent_data_sources(later)
            .await
            .unwrap(),
        vec!["gone".to_string()]
    );
    let rules = store.rules().await.unwrap();
    assert_eq!(
        rules.keys().cloned().collect::<Vec<_>>(),
        vec!["_default", "ds"]
    );
    assert_eq!(store.delete_audit_before(later).await.unwrap(), 2);
    assert!(
        store
            .audit_history(crate::RULES_AUDIT_TYPE, None, &AuditQuery::Count(10))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Basic-security users, credentials, roles, assignments and permissions: Druid's messages on
/// conflicts and unknown names, cascades on delete, authenticators and authorizers apart.
pub async fn security_users_and_roles(store: &dyn MetadataStore) {
    use serde_json::json;
    let msg = |e: MetadataError| e.to_string();
    assert!(store.authn_users("basic").await.unwrap().is_empty());
    store.create_authn_user("basic", "bob").await.unwrap();
    let err = store.create_authn_user("basic", "bob").await.unwrap_err();
    assert!(matches!(err, MetadataError::Conflict(_)));
    assert_eq!(msg(err), "User [bob] already exists.");
    // Another authenticator has its own users.
    store.create_authn_user("other", "bob").await.unwrap();
    let users = store.authn_users("basic").await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].credentials, None);
    let creds = json!({"salt": "c2FsdA==", "hash": "aGFzaA==", "iterations": 10000});
    store
        .set_authn_credentials("basic", "bob", &creds)
        .await
        .unwrap();
    assert_eq!(
        store.authn_users("basic").await.unwrap()[0].credentials,
        Some(creds.clone())
    );
    let err = store
        .set_authn_credentials("basic", "nobody", &creds)
        .await
        .unwrap_err();
    assert!(matches!(err, MetadataError::NotFound(_)));
    assert_eq!(msg(err), "User [nobody] does not exist.");
    store.delete_authn_user("basic", "bob").await.unwrap();
    assert!(store.authn_users("basic").await.unwrap().is_empty());
    assert_eq!(store.authn_users("other").await.unwrap().len(), 1);
    assert_eq!(
        msg(store.delete_authn_user("basic", "bob").await.unwrap_err()),
        "User [bob] does not exist."
    );

    // Authorizer: users, roles, assignments.
    let perms = json!([{"resource": {"name": "wiki.*", "type": "DATASOURCE"}, "action": "READ"}]);
    store.create_authz_user("basic", "bob").await.unwrap();
    store
        .create_authz_role("basic", "reader", &json!([]))
        .await
        .unwrap();
    assert_eq!(
        msg(store
            .create_authz_role("basic", "reader", &json!([]))
            .await
            .unwrap_err()),
        "Role [reader] already exists."
    );
    store
        .set_authz_role_permissions("basic", "reader", &perms)
        .await
        .unwrap();
    assert_eq!(
        msg(store
            .set_authz_role_permissions("basic", "nope", &perms)
            .await
            .unwrap_err()),
        "Role [nope] does not exist."
    );
    store
        .set_authz_user_role("basic", "bob", "reader", true)
        .await
        .unwrap();
    assert_eq!(
        msg(store
            .set_authz_user_role("basic", "bob", "reader", true)
            .await
            .unwrap_err()),
        "User [bob] already has role [reader]."
    );
    assert_eq!(
        msg(store
            .set_authz_user_role("basic", "carol", "reader", true)
            .await
            .unwrap_err()),
        "User [carol] does not exist."
    );
    assert_eq!(
        msg(store
            .set_authz_user_role("basic", "bob", "nope", true)
            .await
            .unwrap_err()),
        "Role [nope] does not exist."
    );
    let snap = store.authz_snapshot("basic").await.unwrap();
    assert_eq!(snap.users.len(), 1);
    assert_eq!(snap.users[0].roles, vec!["reader".to_string()]);
    assert_eq!(snap.roles[0].permissions, perms);
    assert_eq!(
        store.authz_snapshot("other").await.unwrap(),
        crate::AuthzSnapshot::default()
    );
    // Removing the assignment, then deleting the role and the user (assignments go with them).
    store
        .set_authz_user_role("basic", "bob", "reader", false)
        .await
        .unwrap();
    assert_eq!(
        msg(store
            .set_authz_user_role("basic", "bob", "reader", false)
            .await
            .unwrap_err()),
        "User [bob] does not have role [reader]."
    );
    store
        .set_authz_user_role("basic", "bob", "reader", true)
        .await
        .unwrap();
    store.delete_authz_role("basic", "reader").await.unwrap();
    let snap = store.authz_snapshot("basic").await.unwrap();
    assert!(snap.roles.is_empty());
    assert!(snap.users[0].roles.is_empty());
    store
        .create_authz_role("basic", "reader", &perms)
        .await
        .unwrap();
    // A re-created role is not assigned to anybody.
    assert!(
        store.authz_snapshot("basic").await.unwrap().users[0]
            .roles
            .is_empty()
    );
    store
        .set_authz_user_role("basic", "bob", "reader", true)
        .await
        .unwrap();
    store.delete_authz_user("basic", "bob").await.unwrap();
    store.create_authz_user("basic", "bob").await.unwrap();
    assert!(
        store.authz_snapshot("basic").await.unwrap().users[0]
            .roles
            .is_empty()
    );
    assert_eq!(
        msg(store.delete_authz_user("basic", "zed").await.unwrap_err()),
        "User [zed] does not exist."
    );
    assert_eq!(
        msg(store.delete_authz_role("basic", "zed").await.unwrap_err()),
        "Role [zed] does not exist."
    );
}

/// Instantiates the conformance suite for a backend: `metadata_store_conformance!(async { store })`.
#[macro_export]
macro_rules! metadata_store_conformance {
    ($make:expr) => {
        #[tokio::test]
        async fn conformance_publish_overwrite_and_overshadow() {
            let s = $make;
            $crate::conformance::publish_overwrite_and_overshadow(&s).await;
        }
        #[tokio::test]
        async fn conformance_publish_append() {
            let s = $make;
            $crate::conformance::publish_append(&s).await;
        }
        #[tokio::test]
        async fn conformance_publish_drop_existing() {
            let s = $make;
            $crate::conformance::publish_drop_existing(&s).await;
        }
        #[tokio::test]
        async fn conformance_segments_used_flag() {
            let s = $make;
            $crate::conformance::segments_used_flag(&s).await;
        }
        #[tokio::test]
        async fn conformance_unused_segments_and_delete() {
            let s = $make;
            $crate::conformance::unused_segments_and_delete(&s).await;
        }
        #[tokio::test]
        async fn conformance_tasks_round_trip() {
            let s = $make;
            $crate::conformance::tasks_round_trip(&s).await;
        }
        #[tokio::test]
        async fn conformance_locks_round_trip() {
            let s = $make;
            $crate::conformance::locks_round_trip(&s).await;
        }
        #[tokio::test]
        async fn conformance_supervisors_history() {
            let s = $make;
            $crate::conformance::supervisors_history(&s).await;
        }
        #[tokio::test]
        async fn conformance_stream_commit_compare_and_swap() {
            let s = $make;
            $crate::conformance::stream_commit_compare_and_swap(&s).await;
        }
        #[tokio::test]
        async fn conformance_config_documents() {
            let s = $make;
            $crate::conformance::config_documents(&s).await;
        }
        #[tokio::test]
        async fn conformance_rules_versions_and_audit() {
            let s = $make;
            $crate::conformance::rules_versions_and_audit(&s).await;
        }
        #[tokio::test]
        async fn conformance_audited_config() {
            let s = $make;
            $crate::conformance::audited_config(&s).await;
        }
        #[tokio::test]
        async fn conformance_audit_and_rules_cleanup() {
            let s = $make;
            $crate::conformance::audit_and_rules_cleanup(&s).await;
        }
        #[tokio::test]
        async fn conformance_security_users_and_roles() {
            let s = $make;
            $crate::conformance::security_users_and_roles(&s).await;
        }
    };
}

#[cfg(test)]
mod sqlite_in_memory {
    crate::metadata_store_conformance!(
        crate::SqlMetadataStore::connect("sqlite::memory:")
            .await
            .unwrap()
    );
}

#[cfg(test)]
mod sqlite_file {
    use std::sync::OnceLock;
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    fn path(name: &str) -> std::path::PathBuf {
        DIR.get_or_init(|| tempfile::tempdir().unwrap())
            .path()
            .join(format!("{name}-{}.db", uuid_like()))
    }
    fn uuid_like() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    }
    crate::metadata_store_conformance!(
        crate::SqlMetadataStore::open_sqlite(&path("m"))
            .await
            .unwrap()
    );
}
