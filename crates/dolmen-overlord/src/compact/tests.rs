use dolmen_segment::{LoadSpec, SegmentColumn, ShardSpec};
use serde_json::json;

use super::*;

fn seg(interval: &str, version: &str, partition: u32) -> DataSegment {
    let interval = Interval::parse(interval).unwrap();
    let id = dolmen_segment::SegmentId {
        data_source: "ds".into(),
        interval,
        version: version.into(),
        partition_num: partition,
    };
    DataSegment {
        data_source: "ds".into(),
        interval,
        version: version.into(),
        load_spec: LoadSpec::Local { path: "/x".into() },
        dimensions: "page,added".into(),
        metrics: "count,sum_delta".into(),
        shard_spec: ShardSpec::Numbered {
            partition_num: partition,
            partitions: 0,
        },
        binary_version: 9,
        size: 10,
        num_rows: 1,
        columns: vec![
            SegmentColumn::new("page", ColumnType::String, ColumnKind::Dimension),
            SegmentColumn::new("added", ColumnType::Long, ColumnKind::Dimension),
            SegmentColumn::new("count", ColumnType::Long, ColumnKind::Metric),
            SegmentColumn::new("sum_delta", ColumnType::Double, ColumnKind::Metric),
        ],
        last_compaction_state: None,
        identifier: id.to_string(),
    }
}

fn spec(v: Value) -> CompactTaskSpec {
    CompactTaskSpec::from_json(&v).unwrap()
}

fn err(v: Value) -> String {
    match CompactTaskSpec::from_json(&v) {
        Err(OverlordError::InvalidTask(m)) => m,
        other => panic!("expected InvalidTask, got {other:?}"),
    }
}

#[test]
fn tutorial_specs_parse_and_normalize() {
    for name in [
        "compaction-keep-granularity.json",
        "compaction-day-granularity.json",
    ] {
        let path = format!(
            "{}/../../examples/quickstart/specs/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let s = spec(v).normalized();
        assert_eq!(
            s.input_spec(),
            Some(CompactionInputSpec::Interval {
                interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
                sha256_of_sorted_segment_ids: None
            })
        );
        let stored = serde_json::to_value(&s).unwrap();
        assert_eq!(stored["ioConfig"]["inputSpec"]["type"], "interval");
        assert!(stored.get("interval").is_none());
    }
}

#[test]
fn bad_specs_name_the_field() {
    let base = || json!({"type": "compact", "dataSource": "ds", "interval": "2015/2016"});
    let with = |k: &str, v: Value| {
        let mut s = base();
        s[k] = v;
        s
    };
    assert!(err(with("interval", json!("soon"))).contains("interval"));
    assert!(err(with("bogus", json!(1))).contains("bogus"));
    assert!(
        err(with(
            "granularitySpec",
            json!({"segmentGranularity": "fortnight"})
        ))
        .contains("granularitySpec.segmentGranularity")
    );
    assert!(
        err(with(
            "tuningConfig",
            json!({"partitionsSpec": {"type": "nope"}})
        ))
        .contains("tuningConfig")
    );
    assert!(err(with("metricsSpec", json!([{"type": "longSum"}]))).contains("metricsSpec"));
    let mut no_input = base();
    no_input.as_object_mut().unwrap().remove("interval");
    assert!(err(no_input).contains("ioConfig"));
    assert!(
        err(
            json!({"type": "compact", "dataSource": "ds", "ioConfig": {"type": "compact",
            "inputSpec": {"type": "segments", "segments": ["other_2015"]}}})
        )
        .contains("ioConfig.inputSpec.segments")
    );
}

#[test]
fn plan_keeps_the_input_granularity_and_aligns_the_interval() {
    let s = spec(json!({"type": "compact", "dataSource": "ds",
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2015-09-12T01:30/2015-09-12T03"}}}));
    let used = vec![
        seg("2015-09-12T01/2015-09-12T02", "v1", 0),
        seg("2015-09-12T01/2015-09-12T02", "v1", 1),
        seg("2015-09-12T02/2015-09-12T03", "v1", 0),
        seg("2015-09-12T02/2015-09-12T03", "v0", 0), // overshadowed
    ];
    let p = plan(&s, used).unwrap();
    assert_eq!(p.granularity, Granularity::from_name("HOUR").unwrap());
    assert_eq!(
        p.interval,
        Interval::parse("2015-09-12T01/2015-09-12T03").unwrap()
    );
    assert_eq!(p.inputs.len(), 3);

    let day = spec(
        json!({"type": "compact", "dataSource": "ds", "interval": "2015-09-12T01/2015-09-12T02",
        "granularitySpec": {"segmentGranularity": "DAY"}}),
    );
    let p = plan(&day, vec![seg("2015-09-12T01/2015-09-12T02", "v1", 0)]).unwrap();
    assert_eq!(
        p.interval,
        Interval::parse("2015-09-12/2015-09-13").unwrap()
    );

    let e = plan(&day, vec![]).unwrap_err();
    assert!(e.starts_with("No segments found for compaction"), "{e}");
}

#[test]
fn segments_input_must_be_the_visible_segments() {
    let a = seg("2015-09-12T01/2015-09-12T02", "v1", 0);
    let b = seg("2015-09-12T01/2015-09-12T02", "v1", 1);
    let only_a = spec(
        json!({"type": "compact", "dataSource": "ds", "ioConfig": {"type": "compact",
        "inputSpec": {"type": "segments", "segments": [a.identifier]}}}),
    );
    let e = plan(&only_a, vec![a.clone(), b.clone()]).unwrap_err();
    assert!(
        e.contains("different from the current used segments"),
        "{e}"
    );
    let both = spec(
        json!({"type": "compact", "dataSource": "ds", "ioConfig": {"type": "compact",
        "inputSpec": {"type": "segments", "segments": [a.identifier, b.identifier]}}}),
    );
    assert_eq!(plan(&both, vec![a, b]).unwrap().inputs.len(), 2);
}

#[test]
fn default_schema_comes_from_the_segments_and_state_is_recorded() {
    let s =
        spec(json!({"type": "compact", "dataSource": "ds", "interval": "2015-09-12/2015-09-13"}));
    let inputs = vec![seg("2015-09-12T01/2015-09-12T02", "v1", 0)];
    let iv = Interval::parse("2015-09-12T01/2015-09-12T02").unwrap();
    let v = s.index_spec("t", iv, &Granularity::from_name("HOUR").unwrap(), &inputs);
    let schema = &v["spec"]["dataSchema"];
    assert_eq!(
        schema["dimensionsSpec"]["dimensions"],
        json!([{"type": "string", "name": "page"}, {"type": "long", "name": "added"}])
    );
    assert_eq!(
        schema["metricsSpec"],
        json!([{"type": "longSum", "name": "count", "fieldName": "count"},
               {"type": "doubleSum", "name": "sum_delta", "fieldName": "sum_delta"}])
    );
    assert_eq!(schema["granularitySpec"]["rollup"], false);
    assert_eq!(v["spec"]["ioConfig"]["inputSource"]["type"], "druid");
    let index = IndexTaskSpec::from_json(&v).unwrap();
    let state = compaction_state(&index);
    assert_eq!(
        state["partitionsSpec"],
        json!({"type": "dynamic", "maxRowsPerSegment": 5000000, "maxTotalRows": null})
    );
    assert_eq!(state["granularitySpec"]["segmentGranularity"], "HOUR");
    assert_eq!(state["metricsSpec"][0]["type"], "longSum");
    for k in ["dimensionsSpec", "transformSpec", "indexSpec"] {
        assert!(state.get(k).is_some(), "{k}");
    }
}

#[test]
fn rollup_without_metrics_spec_needs_recorded_aggregators() {
    let iv = "2015-09-12T01/2015-09-12T02";
    let rollup = spec(
        json!({"type": "compact", "dataSource": "ds", "interval": "2015-09-12/2015-09-13",
        "granularitySpec": {"queryGranularity": "DAY", "rollup": true}}),
    );
    // `seg` builds metrics without a recorded aggregator (as older segments have them).
    let old = vec![seg(iv, "v1", 0)];
    let e = check_rollup_metrics(&rollup, &old).unwrap_err();
    assert!(e.starts_with("metricsSpec: metric [count]"), "{e}");
    // Recorded aggregators are used, and make the compaction possible.
    let mut recorded = seg(iv, "v1", 0);
    for c in recorded
        .columns
        .iter_mut()
        .filter(|c| c.kind == ColumnKind::Metric)
    {
        c.aggregator = Some(
            if c.name == "count" {
                "longSum"
            } else {
                "doubleMax"
            }
            .into(),
        );
    }
    check_rollup_metrics(&rollup, std::slice::from_ref(&recorded)).unwrap();
    let v = rollup.index_spec(
        "t",
        Interval::parse(iv).unwrap(),
        &Granularity::from_name("HOUR").unwrap(),
        &[recorded],
    );
    assert_eq!(
        v["spec"]["dataSchema"]["metricsSpec"],
        json!([{"type": "longSum", "name": "count", "fieldName": "count"},
               {"type": "doubleMax", "name": "sum_delta", "fieldName": "sum_delta"}])
    );
    // Without rollup, or with a metricsSpec, nothing is combined by guess.
    let plain =
        spec(json!({"type": "compact", "dataSource": "ds", "interval": "2015-09-12/2015-09-13"}));
    check_rollup_metrics(&plain, &old).unwrap();
    let given = spec(
        json!({"type": "compact", "dataSource": "ds", "interval": "2015-09-12/2015-09-13",
        "granularitySpec": {"rollup": true}, "metricsSpec": [{"type": "count", "name": "count"}]}),
    );
    check_rollup_metrics(&given, &old).unwrap();
}
