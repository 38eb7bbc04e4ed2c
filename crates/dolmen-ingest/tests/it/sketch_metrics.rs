//! Sketch metrics (`HLLSketchBuild`, `HLLSketchMerge`, `thetaSketch`,
//! `quantilesDoublesSketch`, `hyperUnique`) through whole batch tasks: the stored column bytes
//! are read back with the DataSketches library itself (not Dolmen's wrappers) where it has the
//! family, across spills and rollup.
//!
//! Druid references: `docs/development/extensions-core/datasketches-hll.md`,
//! `datasketches-theta.md`, `datasketches-quantiles.md`, `docs/querying/aggregations.md`
//! (`hyperUnique`).

use crate::support;

use arrow::array::{AsArray, RecordBatch};
use base64::Engine as _;
use datasketches::hll::HllSketch;
use datasketches::theta::CompactThetaSketch;
use dolmen_segment::ColumnType;
use dolmen_sketch::hyper_unique::HyperLogLogCollector;
use dolmen_sketch::quantiles::DoublesSketch;
use serde_json::{Value, json};

fn spec(data: &str, metrics: Value, tuning: Value) -> Value {
    json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "sk",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {"dimensions": ["channel"]},
                "metricsSpec": metrics,
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "day", "rollup": true}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": data},
                "inputFormat": {"type": "json"}
            },
            "tuningConfig": tuning
        }
    })
}

/// 4,000 events over two channels: channel `a` sees users u0..u999 and values 1..2000, channel
/// `b` users u500..u1499 and values 2001..4000.
fn events() -> String {
    (0..4000)
        .map(|i| {
            let (channel, user) = if i < 2000 {
                ("a", i % 1000)
            } else {
                ("b", 500 + i % 1000)
            };
            json!({"ts": "2020-01-01T05:00:00Z", "channel": channel, "user": format!("u{user}"), "value": i + 1})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The binary column `name` of the batches, by the string dimension `channel`.
fn by_channel(batches: &[RecordBatch], name: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for b in batches {
        let ch = b.column_by_name("channel").unwrap().as_string::<i32>();
        let col = b.column_by_name(name).unwrap().as_binary::<i32>();
        for i in 0..b.num_rows() {
            out.push((ch.value(i).to_string(), col.value(i).to_vec()));
        }
    }
    out.sort();
    out
}

fn near(actual: f64, expected: f64, rel: f64) -> bool {
    (actual - expected).abs() <= expected * rel
}

#[tokio::test]
async fn sketch_metrics_are_built_rolled_up_across_spills_and_stored_in_reference_formats() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = json!([
        {"type": "count", "name": "count"},
        {"type": "HLLSketchBuild", "name": "users_hll", "fieldName": "user", "lgK": 12, "tgtHllType": "HLL_4"},
        {"type": "HLLSketchBuild", "name": "values_hll8", "fieldName": "value", "lgK": 10, "tgtHllType": "HLL_8"},
        {"type": "thetaSketch", "name": "users_theta", "fieldName": "user"},
        {"type": "quantilesDoublesSketch", "name": "value_q", "fieldName": "value", "k": 128},
        {"type": "hyperUnique", "name": "users_hu", "fieldName": "user"}
    ]);
    // maxRowsInMemory 1: every input row is its own spilled run, so every sketch is
    // serialized, read back and merged by the k-way merge.
    let (result, _) = support::run_task(
        dir.path(),
        "sk1",
        &spec(
            &events(),
            metrics,
            json!({"type": "index_parallel", "maxRowsInMemory": 1}),
        ),
    )
    .await;
    let segments = result.unwrap();
    assert_eq!(segments.len(), 1);
    let types: Vec<(String, ColumnType)> = segments[0]
        .columns
        .iter()
        .map(|c| (c.name.clone(), c.ty))
        .collect();
    assert!(types.contains(&("users_hll".into(), ColumnType::HllSketch)));
    assert!(types.contains(&("users_theta".into(), ColumnType::ThetaSketch)));
    assert!(types.contains(&("value_q".into(), ColumnType::QuantilesDoublesSketch)));
    assert!(types.contains(&("users_hu".into(), ColumnType::HyperUnique)));
    let payload = serde_json::to_value(&segments[0]).unwrap();
    assert!(
        payload["columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == json!("COMPLEX<HLLSketch>")),
        "{payload}"
    );

    let batches = support::read_segment(&segments[0]);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 2, "rolled up to one row per channel");

    for (channel, bytes) in by_channel(&batches, "users_hll") {
        let sketch = HllSketch::deserialize(&bytes).unwrap();
        assert_eq!(sketch.lg_config_k(), 12);
        assert!(
            near(sketch.estimate(), 1000.0, 0.03),
            "{channel}: {}",
            sketch.estimate()
        );
    }
    for (_, bytes) in by_channel(&batches, "values_hll8") {
        let sketch = HllSketch::deserialize(&bytes).unwrap();
        assert_eq!(sketch.lg_config_k(), 10);
        assert!(
            near(sketch.estimate(), 2000.0, 0.08),
            "{}",
            sketch.estimate()
        );
    }
    let theta = by_channel(&batches, "users_theta");
    for (_, bytes) in &theta {
        // Below `size` (16384) a theta sketch is exact.
        let sketch = CompactThetaSketch::deserialize(bytes).unwrap();
        assert_eq!(sketch.estimate(), 1000.0);
    }
    // The two channels' theta sketches merge to the 1,500 distinct users.
    let mut union = datasketches::theta::ThetaUnionBuilder::default()
        .build()
        .unwrap();
    for (_, bytes) in &theta {
        union
            .update(&CompactThetaSketch::deserialize(bytes).unwrap())
            .unwrap();
    }
    assert_eq!(union.to_sketch(true).estimate(), 1500.0);

    for (channel, bytes) in by_channel(&batches, "value_q") {
        let q = DoublesSketch::deserialize(&bytes).unwrap();
        assert_eq!(q.n(), 2000);
        let (lo, hi) = if channel == "a" {
            (1.0, 2000.0)
        } else {
            (2001.0, 4000.0)
        };
        assert_eq!(q.min_value(), Some(lo));
        assert_eq!(q.max_value(), Some(hi));
        let median = q.quantile(0.5).unwrap();
        assert!(
            (median - (lo + 1000.0)).abs() <= 2000.0 * 0.02,
            "{channel}: median {median}"
        );
    }
    for (channel, bytes) in by_channel(&batches, "users_hu") {
        let hu = HyperLogLogCollector::from_bytes(&bytes).unwrap();
        assert!(
            near(hu.estimate(), 1000.0, 0.05),
            "{channel}: {}",
            hu.estimate()
        );
    }
}

#[tokio::test]
async fn merge_aggregators_combine_serialized_input_sketches() {
    // Each input row carries a base64 HLL sketch of 100 distinct users (offset by 50 per row):
    // HLLSketchMerge over 4 rows sees 250 distinct users.
    let dir = tempfile::tempdir().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let data = (0..4)
        .map(|r| {
            let mut s = HllSketch::new(12, datasketches::hll::HllType::Hll8).unwrap();
            let mut hu = HyperLogLogCollector::new();
            let mut q = DoublesSketch::new(128).unwrap();
            for u in 0..100 {
                let user = format!("u{}", r * 50 + u);
                s.update(datasketches::hash::value::raw_bytes::from_str(&user));
                hu.add_str(&user);
                q.update(f64::from(r * 50 + u));
            }
            json!({
                "ts": "2020-01-01T00:00:00Z",
                "channel": "a",
                "hll": b64.encode(s.serialize()),
                "hu": b64.encode(hu.to_bytes()),
                "q": b64.encode(q.serialize()),
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (result, _) = support::run_task(
        dir.path(),
        "sk2",
        &spec(
            &data,
            json!([
                {"type": "HLLSketchMerge", "name": "hll", "fieldName": "hll"},
                {"type": "hyperUnique", "name": "hu", "fieldName": "hu", "isInputHyperUnique": true},
                {"type": "quantilesDoublesSketch", "name": "q", "fieldName": "q"}
            ]),
            json!({"type": "index_parallel"}),
        ),
    )
    .await;
    let segments = result.unwrap();
    let batches = support::read_segment(&segments[0]);
    let hll = HllSketch::deserialize(&by_channel(&batches, "hll")[0].1).unwrap();
    assert!(near(hll.estimate(), 250.0, 0.03), "{}", hll.estimate());
    let hu = HyperLogLogCollector::from_bytes(&by_channel(&batches, "hu")[0].1).unwrap();
    assert!(near(hu.estimate(), 250.0, 0.06), "{}", hu.estimate());
    let q = DoublesSketch::deserialize(&by_channel(&batches, "q")[0].1).unwrap();
    assert_eq!(q.n(), 400);
    assert_eq!(q.max_value(), Some(249.0));
}

#[tokio::test]
async fn bad_sketch_parameters_and_inputs_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    for (metric, needle) in [
        (
            json!({"type": "HLLSketchBuild", "name": "h", "fieldName": "user", "lgK": 30}),
            "lgK",
        ),
        (
            json!({"type": "HLLSketchBuild", "name": "h", "fieldName": "user", "tgtHllType": "HLL_5"}),
            "tgtHllType",
        ),
        (
            json!({"type": "thetaSketch", "name": "t", "fieldName": "user", "size": 1000}),
            "size",
        ),
        (
            json!({"type": "quantilesDoublesSketch", "name": "q", "fieldName": "value", "k": 100}),
            "k",
        ),
        (
            json!({"type": "thetaSketch", "name": "t", "fieldName": "user", "bogus": 1}),
            "bogus",
        ),
    ] {
        let (result, _) = support::run_task(
            dir.path(),
            "bad",
            &spec(
                &events(),
                json!([metric]),
                json!({"type": "index_parallel"}),
            ),
        )
        .await;
        let err = result.unwrap_err().to_string();
        assert!(err.contains("metricsSpec") && err.contains(needle), "{err}");
    }
    // A merge input that is not a sketch is a parse exception for that row, not a crash.
    let (result, stats) = support::run_task(
        dir.path(),
        "badinput",
        &spec(
            r#"{"ts": "2020-01-01T00:00:00Z", "channel": "a", "hll": "not base64!"}
{"ts": "2020-01-01T00:00:00Z", "channel": "a", "hll": null}"#,
            json!([{"type": "HLLSketchMerge", "name": "hll", "fieldName": "hll"}]),
            json!({"type": "index_parallel", "maxParseExceptions": 5}),
        ),
    )
    .await;
    result.unwrap();
    let counters = stats.counters_json();
    assert_eq!(counters["processedWithError"], json!(1), "{counters}");
    assert_eq!(counters["processed"], json!(1), "{counters}");
}
