//! Multi-value string dimensions and first/last metrics through whole batch tasks
//! (`run_index_task`), read back from the published segment files.
//!
//! Druid references: `docs/querying/multi-value-dimensions.md` (`multiValueHandling`,
//! rollup on the whole row of values), `docs/querying/aggregations.md` (first/last
//! aggregators).

use std::path::Path;

use dolmen_segment::{ColumnType, DataSegment, LoadSpec};
use serde_json::{Map, Value, json};

use crate::support;

/// Runs one task; returns the published segments and every row of their files, sorted by
/// `__time` then by the row's JSON text.
async fn ingest(spec: Value) -> (Vec<DataSegment>, Vec<Map<String, Value>>) {
    let dir = tempfile::tempdir().unwrap();
    ingest_in(dir.path(), spec).await
}

/// [`ingest`] with its metadata store and deep storage under `dir`.
async fn ingest_in(dir: &Path, spec: Value) -> (Vec<DataSegment>, Vec<Map<String, Value>>) {
    let (result, _) = support::run_task(dir, "mv-task", &spec).await;
    let segs = result.unwrap();
    let mut rows = support::segment_rows(&segs);
    rows.sort_by_key(|r| (r["__time"].as_i64(), Value::Object(r.clone()).to_string()));
    (segs, rows)
}

fn spec(data: &str, format: Value, dimensions: Value, metrics: Value, tuning: Value) -> Value {
    json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "mv",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {"dimensions": dimensions},
                "metricsSpec": metrics,
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": true}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": data},
                "inputFormat": format
            },
            "tuningConfig": tuning
        }
    })
}

fn project(rows: &[Map<String, Value>], cols: &[&str]) -> Vec<Value> {
    rows.iter()
        .map(|r| Value::Array(cols.iter().map(|c| r[*c].clone()).collect()))
        .collect()
}

#[tokio::test]
async fn json_arrays_become_multi_value_dimensions_with_their_handling() {
    let data = [
        json!({"ts": "2020-01-01T00:10:00Z", "tags": ["b", "a", "b"], "tset": ["b", "a", "b"], "tarr": ["b", "a"]}),
        json!({"ts": "2020-01-01T00:20:00Z", "tags": ["a", "b", "b"], "tset": ["a", "b"], "tarr": ["b", "a"]}),
        json!({"ts": "2020-01-01T00:30:00Z", "tags": ["x"], "tset": [], "tarr": "x"}),
        json!({"ts": "2020-01-01T00:40:00Z", "tags": "x", "tset": null, "tarr": ["x"]}),
        json!({"ts": "2020-01-01T00:50:00Z", "tags": ["a", "b", "b"], "tset": ["b", "a"], "tarr": ["a", "b"]}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let (segs, rows) = ingest(spec(
        &data,
        json!({"type": "json"}),
        json!([
            "tags",
            {"type": "string", "name": "tset", "multiValueHandling": "SORTED_SET"},
            {"type": "string", "name": "tarr", "multiValueHandling": "array"}
        ]),
        json!([{"type": "count", "name": "count"}]),
        json!({"type": "index_parallel", "maxRowsInMemory": 2}),
    ))
    .await;
    let cols = &segs[0].columns;
    assert!(cols[..3].iter().all(|c| c.multi_value), "{cols:?}");
    // The whole handled list is the rollup key: rows 1 and 2 combine, rows 3 and 4 combine,
    // row 5 differs in `tarr` (input order kept).
    assert_eq!(
        project(&rows, &["tags", "tset", "tarr", "count"]),
        vec![
            json!([["a", "b", "b"], ["a", "b"], ["a", "b"], 1]),
            json!([["a", "b", "b"], ["a", "b"], ["b", "a"], 2]),
            json!([["x"], null, ["x"], 2]),
        ]
    );
    // The payload marks the columns as multi-value strings.
    let payload = serde_json::to_value(&segs[0]).unwrap();
    assert_eq!(payload["columns"][0]["hasMultipleValues"], json!(true));
    assert_eq!(payload["columns"][0]["type"], json!("string"));
}

#[tokio::test]
async fn delimited_list_values_and_discovery() {
    // CSV with listDelimiter; a column that never has two values stays a plain string.
    let (segs, rows) = ingest(spec(
        "ts,page,tags\n2020-01-01T00:00:00Z,a,z|y\n2020-01-01T00:00:00Z,b,w\n",
        json!({"type": "csv", "findColumnsFromHeader": true, "listDelimiter": "|"}),
        json!(["page", "tags"]),
        json!([{"type": "count", "name": "count"}]),
        json!({"type": "index_parallel"}),
    ))
    .await;
    assert!(!segs[0].columns[0].multi_value);
    assert!(segs[0].columns[1].multi_value);
    assert_eq!(
        project(&rows, &["page", "tags"]),
        vec![json!(["a", ["y", "z"]]), json!(["b", ["w"]])]
    );

    // TSV with Druid's default list delimiter \u0001, and schema discovery of a JSON array.
    let (segs, rows) = ingest(spec(
        "ts\tpage\n2020-01-01T00:00:00Z\tp\u{1}q\n",
        json!({"type": "tsv", "findColumnsFromHeader": true}),
        json!([]),
        json!([]),
        json!({"type": "index_parallel"}),
    ))
    .await;
    assert!(segs[0].columns[0].multi_value);
    assert_eq!(rows[0]["page"], json!(["p", "q"]));
    let (segs, _) = ingest(spec(
        &json!({"ts": "2020-01-01T00:00:00Z", "k": ["1", 2]}).to_string(),
        json!({"type": "json"}),
        json!([]),
        json!([]),
        json!({"type": "index_parallel"}),
    ))
    .await;
    assert_eq!(segs[0].columns[0].name, "k");
    assert!(segs[0].columns[0].multi_value);
}

#[tokio::test]
async fn first_and_last_metrics_roll_up_exactly_across_spills() {
    // One key; the earliest and latest rows are in the middle, every row spills on its own.
    let rows = [
        json!({"ts": "2020-01-01T00:30:00Z", "v": 3, "s": "thirty", "t": 5}),
        json!({"ts": "2020-01-01T00:10:00Z", "v": 1, "s": "ten", "t": 9}),
        json!({"ts": "2020-01-01T00:50:00Z", "v": 5, "s": "fifty", "t": 1}),
        json!({"ts": "2020-01-01T00:10:00Z", "v": 7, "s": "ten-again", "t": 9}),
        json!({"ts": "2020-01-01T00:50:00Z", "v": null, "s": "fifty-again"}),
        json!({"ts": "2020-01-01T00:40:00Z", "v": 4, "s": "forty", "t": 3}),
    ];
    let data = rows
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    let first = tempfile::tempdir().unwrap();
    let (segs, out) = ingest_in(
        first.path(),
        spec(
            &data,
            json!({"type": "json"}),
            json!([]),
            json!([
                {"type": "longFirst", "name": "vFirst", "fieldName": "v"},
                {"type": "longLast", "name": "vLast", "fieldName": "v"},
                {"type": "doubleLast", "name": "vLastByT", "fieldName": "v", "timeColumn": "t"},
                {"type": "floatFirst", "name": "fFirst", "fieldName": "v"},
                {"type": "stringFirst", "name": "sFirst", "fieldName": "s", "maxStringBytes": 3},
                {"type": "stringLast", "name": "sLast", "fieldName": "s"},
                {"type": "count", "name": "count"}
            ]),
            json!({"type": "index_parallel", "maxRowsInMemory": 1}),
        ),
    )
    .await;
    assert_eq!(out.len(), 1, "{out:?}");
    let r = &out[0];
    assert_eq!(r["count"], json!(6));
    assert_eq!(r["vFirst"], json!(1), "earliest time, first seen on a tie");
    assert_eq!(
        r["vLast"],
        Value::Null,
        "latest time, last seen on a tie: a null value"
    );
    assert_eq!(
        r["vLastByT"],
        json!(7.0),
        "by timeColumn t: the later-seen row of the two at t=9 (the row without t is skipped)"
    );
    assert_eq!(r["fFirst"], json!(1.0));
    assert_eq!(r["sFirst"], json!("ten"));
    assert_eq!(r["sLast"], json!("fifty-again"));
    // Metric columns are typed like the input; the input fields and the timeColumn are not
    // discovered as dimensions.
    let types: Vec<(String, ColumnType)> = segs[0]
        .columns
        .iter()
        .map(|c| (c.name.clone(), c.ty))
        .collect();
    assert_eq!(
        types,
        vec![
            ("vFirst".to_string(), ColumnType::Long),
            ("vLast".to_string(), ColumnType::Long),
            ("vLastByT".to_string(), ColumnType::Double),
            ("fFirst".to_string(), ColumnType::Float),
            ("sFirst".to_string(), ColumnType::String),
            ("sLast".to_string(), ColumnType::String),
            ("count".to_string(), ColumnType::Long),
        ]
    );
    // The times of the kept values are in hidden columns of the file.
    assert_eq!(
        r["__dolmen_time:vFirst"],
        json!(1_577_837_400_000i64),
        "{r:?}"
    );
    assert_eq!(r["__dolmen_time:vLastByT"], json!(9));

    // Reading such a segment file back as input: schema discovery skips the hidden columns.
    let file = tempfile::tempdir().unwrap();
    let LoadSpec::Local { path } = &segs[0].load_spec else {
        panic!("local load spec")
    };
    std::fs::copy(path, file.path().join("seg.parquet")).unwrap();
    let mut again = spec(
        "",
        json!({"type": "parquet"}),
        json!([]),
        json!([]),
        json!({"type": "index_parallel"}),
    );
    again["spec"]["ioConfig"]["inputSource"] = json!({"type": "local", "baseDir": file.path().display().to_string(), "filter": "*.parquet"});
    again["spec"]["dataSchema"]["timestampSpec"] = json!({"column": "__time", "format": "millis"});
    // A filter keeps this on the row-by-row path.
    again["spec"]["dataSchema"]["transformSpec"] = json!({"filter": {"type": "true"}});
    let (segs, _) = ingest(again).await;
    let names: Vec<&str> = segs[0].columns.iter().map(|c| c.name.as_str()).collect();
    // (`vLast` holds only a null, which discovery does not pick up.)
    assert_eq!(
        names,
        vec!["vFirst", "vLastByT", "fFirst", "sFirst", "sLast", "count"]
    );
}
