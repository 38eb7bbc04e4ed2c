//! The columnar build against the row path: the same specs over the same CSV, TSV, NDJSON and
//! Parquet files must give the same rows, segments and counters; dirty input must fall back to
//! the row path and get its exact accounting.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use arrow::util::display::{ArrayFormatter, FormatOptions};
use dolmen_ingest::{IndexTaskEnv, IndexTaskSpec, IngestError, RowStats, run_index_task};
use dolmen_metadata::MetadataStore;
use dolmen_segment::{DataSegment, LoadSpec};
use dolmen_storage::DeepStorage;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;

struct Env {
    dir: tempfile::TempDir,
    metadata: Arc<dyn MetadataStore>,
    deep: DeepStorage,
    n: std::sync::atomic::AtomicU32,
}

/// What a task produced: rows per segment interval (sorted), and its counters.
#[derive(Debug, PartialEq)]
struct Output {
    segments: BTreeMap<String, Vec<String>>,
    segment_count: usize,
    processed: u64,
    thrown_away: u64,
    unparseable: u64,
    processed_with_error: u64,
    columns: Vec<String>,
    /// Which path built the segments (not compared between the two runs).
    columnar: bool,
}

impl Env {
    async fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let (metadata, deep) = support::open_stores(dir.path()).await;
        Env {
            dir,
            metadata,
            deep,
            n: Default::default(),
        }
    }

    fn write(&self, name: &str, data: &[u8]) -> String {
        let d = self.dir.path().join("input");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), data).unwrap();
        d.to_string_lossy().into_owned()
    }

    async fn run(&self, spec: &Value, columnar: bool) -> Result<Output, IngestError> {
        let (segs, stats) = self.run_task(spec, columnar).await?;
        Ok(Output {
            segments: read_segments(&segs),
            segment_count: segs.len(),
            processed: stats.processed.load(Ordering::Relaxed),
            thrown_away: stats.thrown_away.load(Ordering::Relaxed),
            unparseable: stats.unparseable.load(Ordering::Relaxed),
            processed_with_error: stats.processed_with_error.load(Ordering::Relaxed),
            columnar: stats.columnar.load(Ordering::Relaxed),
            columns: segs
                .first()
                .map(|s| {
                    s.dimensions
                        .split(',')
                        .chain(s.metrics.split(','))
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        })
    }

    /// Runs `spec` both ways and asserts equal output and that the second run took the
    /// columnar path exactly when `expect_columnar`; returns the second run's output.
    async fn same_both_ways(&self, spec: &Value, expect_columnar: bool) -> Output {
        let row = self.run(spec, false).await.expect("row path");
        assert!(!row.columnar);
        let mut col = self.run(spec, true).await.expect("columnar path");
        assert_eq!(col.columnar, expect_columnar, "path taken");
        col.columnar = false;
        assert_eq!(col, row, "columnar output differs from the row path");
        col
    }
}

fn read_segments(segs: &[DataSegment]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in segs {
        let path = match &s.load_spec {
            LoadSpec::Local { path } => path,
            other => panic!("local load spec expected, got {other:?}"),
        };
        let rows = out.entry(s.interval.to_string()).or_default();
        rows.extend(read_rows(Path::new(path)));
    }
    for rows in out.values_mut() {
        rows.sort();
    }
    out
}

fn read_rows(path: &Path) -> Vec<String> {
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let opts = FormatOptions::default().with_null("∅");
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let fmts: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for i in 0..batch.num_rows() {
            rows.push(
                fmts.iter()
                    .map(|f| f.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    rows
}

fn spec(base_dir: &str, filter: &str, input_format: Value, extra: Value) -> Value {
    let mut s = json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "x",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {"dimensions": [
                    "page",
                    "country",
                    {"type": "long", "name": "num"},
                    {"type": "double", "name": "ratio"},
                    {"type": "float", "name": "f"}
                ]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "added", "fieldName": "added"},
                    {"type": "doubleSum", "name": "dsum", "fieldName": "ratio"},
                    {"type": "floatSum", "name": "fsum", "fieldName": "ratio"},
                    {"type": "longMin", "name": "amin", "fieldName": "added"},
                    {"type": "doubleMax", "name": "rmax", "fieldName": "ratio"}
                ],
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": false}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": base_dir, "filter": filter},
                "inputFormat": input_format
            },
            "tuningConfig": {"type": "index_parallel"}
        }
    });
    merge(&mut s, extra);
    s
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

const CSV: &str = "ts,page,country,num,ratio,f,added\n\
2024-01-01T01:00:00Z,a,US,1,0.5,1.5,10\n\
2024-01-01T01:00:00Z,a,US,1,0.5,1.5,5\n\
2024-01-01T01:30:00Z,b,,2,,2.25,\n\
2024-01-01T02:00:00.123Z,\"c, quoted\",FR, 3 ,1e2,0,7\n\
2024-01-02T00:00:00Z,a,US,,0.25,,1\n\
2024-01-02T23:59:59.999Z,d,DE,4,4.5,-1,2\n\
1704240000000,e,US,5,1,1,3\n\
2024-01-05T00:00:00Z,f,JP,6,2.5,3,4\n";

#[tokio::test]
async fn csv_matches_the_row_path_with_and_without_rollup() {
    let env = Env::new().await;
    let dir = env.write("a.csv", CSV.as_bytes());
    let fmt = json!({"type": "csv", "findColumnsFromHeader": true});
    let out = env
        .same_both_ways(&spec(&dir, "*.csv", fmt.clone(), json!({})), true)
        .await;
    assert_eq!(out.processed, 8);
    assert_eq!(out.segment_count, 4);

    // Rollup at hour granularity with intervals dropping the last row.
    let rolled = env
        .same_both_ways(
            &spec(
                &dir,
                "*.csv",
                fmt.clone(),
                json!({"spec": {"dataSchema": {"granularitySpec": {
                "queryGranularity": "hour", "rollup": true,
                "intervals": ["2024-01-01/2024-01-04"]}}}}),
            ),
            true,
        )
        .await;
    assert_eq!(rolled.processed, 7);
    assert_eq!(rolled.thrown_away, 1);
    let day1 = &rolled.segments["2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"];
    // The two identical 01:00 rows combine (count 2, added 15); the 01:30 row joins the 01:00
    // hour with different dimensions.
    assert_eq!(day1.len(), 3, "{day1:?}");

    // Small segments: cut every 2 rows.
    let cut = env
        .same_both_ways(&spec(
            &dir,
            "*.csv",
            fmt,
            json!({"spec": {"tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 2}}}}),
        ), true)
        .await;
    assert_eq!(cut.segment_count, 5);
}

#[tokio::test]
async fn discovery_tsv_and_columns_match_the_row_path() {
    let env = Env::new().await;
    let tsv = CSV.replace(',', "\t").replace("\"c\t quoted\"", "c quoted");
    let dir = env.write("a.tsv", tsv.as_bytes());
    let fmt = json!({"type": "tsv", "findColumnsFromHeader": true});
    env.same_both_ways(&spec(&dir, "*.tsv", fmt, json!({})), true)
        .await;

    // Schema discovery: every column but the timestamp and metric inputs, as strings.
    let mut s = spec(
        &dir,
        "*.tsv",
        json!({"type": "tsv", "findColumnsFromHeader": true}),
        json!({}),
    );
    s["spec"]["dataSchema"]["dimensionsSpec"] =
        json!({"dimensions": [], "dimensionExclusions": ["f"]});
    let out = env.same_both_ways(&s, true).await;
    assert_eq!(
        out.columns,
        [
            "page", "country", "num", "count", "added", "dsum", "fsum", "amin", "rmax"
        ]
    );

    // Explicit columns without a header line.
    let body = CSV.split_once('\n').unwrap().1;
    let dir = env.write("b.csv", body.as_bytes());
    let fmt =
        json!({"type": "csv", "columns": ["ts", "page", "country", "num", "ratio", "f", "added"]});
    let out = env
        .same_both_ways(&spec(&dir, "b.csv", fmt, json!({})), true)
        .await;
    assert_eq!(out.processed, 8);
}

#[tokio::test]
async fn json_matches_the_row_path() {
    let env = Env::new().await;
    let data = r#"{"ts":"2024-01-01T01:00:00Z","page":"a","country":"US","num":1,"ratio":0.5,"f":1.5,"added":10}
{"ts":"2024-01-01T01:00:00Z","page":"a","country":null,"num":1,"ratio":1,"f":1.5,"added":5}
{"ts":"2024-01-01T02:00:00Z","page":"b","num":2,"ratio":2.5,"added":-3,"other":{"x":1}}
{"ts":"2024-01-02T02:00:00Z","page":"c","country":"FR","num":3,"ratio":3.5,"f":2,"added":1}
"#;
    let dir = env.write("a.json", data.as_bytes());
    let out = env
        .same_both_ways(
            &spec(&dir, "*.json", json!({"type": "json"}), json!({})),
            true,
        )
        .await;
    assert_eq!(out.processed, 4);
    assert_eq!(out.segment_count, 2);
}

#[tokio::test]
async fn parquet_matches_the_row_path() {
    let env = Env::new().await;
    let dir = env.dir.path().join("input");
    std::fs::create_dir_all(&dir).unwrap();
    // Write a Parquet file with typed columns through Arrow.
    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::record_batch::RecordBatch;
    let cols: Vec<(&str, ArrayRef)> = vec![
        (
            "ts",
            Arc::new(StringArray::from(vec![
                "2024-01-01T01:00:00Z",
                "2024-01-01T03:00:00Z",
                "2024-01-03T00:00:00Z",
            ])),
        ),
        (
            "page",
            Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
        ),
        (
            "country",
            Arc::new(Int64Array::from(vec![Some(7), Some(8), None])),
        ),
        ("num", Arc::new(Int64Array::from(vec![1, 2, 3]))),
        ("ratio", Arc::new(Float64Array::from(vec![0.5, 1.0, 2.0]))),
        (
            "f",
            Arc::new(Float64Array::from(vec![Some(1.5), None, Some(2.0)])),
        ),
        ("added", Arc::new(Int64Array::from(vec![1, 2, 3]))),
    ];
    let batch = RecordBatch::try_from_iter(cols).unwrap();
    let file = std::fs::File::create(dir.join("a.parquet")).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let out = env
        .same_both_ways(
            &spec(
                &dir.to_string_lossy(),
                "*.parquet",
                json!({"type": "parquet"}),
                json!({}),
            ),
            true,
        )
        .await;
    assert_eq!(out.processed, 3);
}

#[tokio::test]
async fn dirty_input_falls_back_to_the_row_path_accounting() {
    let env = Env::new().await;
    let dirty = format!("{CSV}not-a-time,z,US,1,1,1,1\n2024-01-01T05:00:00Z,y,US,abc,1,1,1\n");
    let dir = env.write("dirty.csv", dirty.as_bytes());
    let fmt = json!({"type": "csv", "findColumnsFromHeader": true});
    let out = env
        .same_both_ways(&spec(&dir, "*.csv", fmt, json!({})), false)
        .await;
    assert_eq!(out.unparseable, 1);
    assert_eq!(out.processed_with_error, 1);
    assert_eq!(out.processed, 8);

    // A CSV value holding the default list delimiter is multi-value for the row path.
    let mv = format!("{CSV}2024-01-01T06:00:00Z,x\u{1}y,US,1,1,1,1\n");
    let dir = env.write("mv.csv", mv.as_bytes());
    let fmt = json!({"type": "csv", "findColumnsFromHeader": true});
    let out = env
        .same_both_ways(&spec(&dir, "mv.csv", fmt, json!({})), false)
        .await;
    assert_eq!(out.processed, 9);

    // JSON whose string dimension holds numbers in some rows only past the sample, and an
    // array (multi-value) value.
    let mut lines = String::new();
    for i in 0..1200 {
        lines.push_str(&format!(
            "{{\"ts\":\"2024-01-01T00:00:00Z\",\"page\":\"p{i}\",\"num\":{i},\"added\":1}}\n"
        ));
    }
    lines.push_str("{\"ts\":\"2024-01-01T00:00:00Z\",\"page\":17,\"num\":1,\"added\":1}\n");
    let dir = env.write("late.json", lines.as_bytes());
    let out = env
        .same_both_ways(
            &spec(&dir, "late.json", json!({"type": "json"}), json!({})),
            false,
        )
        .await;
    assert_eq!(out.processed, 1201);
}

/// Rows of every segment with its shard spec, from a task's published segments.
fn shards(segs: &[DataSegment]) -> Vec<(String, Value, Vec<String>)> {
    segs.iter()
        .map(|s| {
            let path = match &s.load_spec {
                LoadSpec::Local { path } => path,
                other => panic!("local load spec expected, got {other:?}"),
            };
            let mut rows = read_rows(Path::new(path));
            rows.sort();
            (
                s.interval.to_string(),
                serde_json::to_value(&s.shard_spec).unwrap(),
                rows,
            )
        })
        .collect()
}

impl Env {
    async fn run_segments(&self, spec: &Value, columnar: bool) -> Vec<DataSegment> {
        self.run_task(spec, columnar).await.unwrap().0
    }

    /// Runs `spec` as a new datasource, with the columnar path allowed or not.
    async fn run_task(
        &self,
        spec: &Value,
        columnar: bool,
    ) -> Result<(Vec<DataSegment>, Arc<RowStats>), IngestError> {
        let mut spec = spec.clone();
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        spec["spec"]["dataSchema"]["dataSource"] = json!(format!("ds{n}"));
        spec["context"] = json!({ "useColumnarIngestion": columnar });
        let spec = IndexTaskSpec::from_json(&spec)?;
        let stats = Arc::new(RowStats::new());
        let env = IndexTaskEnv {
            task_id: format!("task-{n}"),
            work_dir: self.dir.path().join(format!("work-{n}")),
            deep: self.deep.clone(),
            metadata: Arc::clone(&self.metadata),
            cancel: CancellationToken::new(),
            stats: Arc::clone(&stats),
            lock_version: format!("2026-01-01T00:00:00.{n:03}Z"),
            last_compaction_state: None,
        };
        Ok((run_index_task(&env, &spec).await?, stats))
    }
}

fn partitioned(dir: &str, partitions: Value) -> Value {
    let mut s = spec(
        dir,
        "p.csv",
        json!({"type": "csv", "findColumnsFromHeader": true}),
        json!({"spec": {
            "dataSchema": {"granularitySpec": {"rollup": true}},
            "tuningConfig": {"forceGuaranteedRollup": true, "partitionsSpec": partitions}}}),
    );
    s["spec"]["dataSchema"]["dimensionsSpec"] = json!({"dimensions": ["page", "country"]});
    s
}

#[tokio::test]
async fn hashed_and_range_partitioning_on_both_paths() {
    let env = Env::new().await;
    let mut csv = String::from("ts,page,country,num,ratio,f,added\n");
    for i in 0..300 {
        let day = 1 + i % 2;
        csv.push_str(&format!(
            "2024-01-0{day}T00:00:00Z,page-{:02},c{},1,1,1,{i}\n",
            i % 37,
            i % 3
        ));
    }
    let dir = env.write("p.csv", csv.as_bytes());

    // hashed, numShards 3 on page: every page lands in exactly one bucket.
    let spec = partitioned(
        &dir,
        json!({"type": "hashed", "numShards": 3, "partitionDimensions": ["page"]}),
    );
    let row = shards(&env.run_segments(&spec, false).await);
    let col = shards(&env.run_segments(&spec, true).await);
    assert_eq!(row, col);
    assert_eq!(row.len(), 6, "{row:?}");
    let mut page_bucket: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut total = 0;
    for (interval, shard, rows) in &row {
        assert_eq!(shard["type"], "hashed");
        assert_eq!(shard["numBuckets"], 3);
        assert_eq!(shard["partitions"], 3);
        for r in rows {
            let page = r.split('|').nth(1).unwrap().to_string();
            let b = shard["bucketId"].as_u64().unwrap();
            assert_eq!(
                *page_bucket.entry((interval.clone(), page)).or_insert(b),
                b,
                "a page in two buckets"
            );
            total += 1;
        }
    }
    // Rollup combined nothing (every row has its own `added` ... but rollup is on `page`,
    // `country` and time): 37 pages x 3 countries per day at most.
    assert!(total <= 2 * 37 * 3);

    // single_dim on page with 40 target rows per segment (rows before rollup are 150/day, after
    // rollup <= 111/day).
    let spec = partitioned(
        &dir,
        json!({"type": "single_dim", "partitionDimension": "page", "targetRowsPerSegment": 40}),
    );
    let row = shards(&env.run_segments(&spec, false).await);
    let col = shards(&env.run_segments(&spec, true).await);
    assert_eq!(row, col);
    for (i, (interval, shard, rows)) in row.iter().enumerate() {
        assert_eq!(shard["type"], "single");
        let start = shard["start"].as_str();
        let end = shard["end"].as_str();
        if i == 0 || row[i - 1].0 != *interval {
            assert!(start.is_none(), "first range of a chunk starts unbounded");
        }
        for r in rows {
            let page = r.split('|').nth(1).unwrap();
            assert!(start.is_none_or(|s| page >= s) && end.is_none_or(|e| page < e));
        }
    }
    assert!(row.len() >= 4, "{row:?}");

    // range on (country, page) with at most 50 rows per segment.
    let spec = partitioned(
        &dir,
        json!({"type": "range", "partitionDimensions": ["country", "page"], "maxRowsPerSegment": 50}),
    );
    let row = shards(&env.run_segments(&spec, false).await);
    let col = shards(&env.run_segments(&spec, true).await);
    assert_eq!(row, col);
    for (_, shard, rows) in &row {
        assert_eq!(shard["type"], "range");
        assert!(rows.len() <= 50);
    }
}

#[tokio::test]
async fn partitioning_rules_are_validated() {
    let dir = "/nonexistent";
    let cases = [
        (
            json!({"partitionsSpec": {"type": "hashed", "numShards": 2}}),
            "forceGuaranteedRollup = true",
        ),
        (
            json!({"forceGuaranteedRollup": true}),
            "forceGuaranteedRollup",
        ),
        (
            json!({"forceGuaranteedRollup": true, "partitionsSpec": {"type": "hashed", "numShards": 2, "targetRowsPerSegment": 5}}),
            "cannot both be set",
        ),
        (
            json!({"forceGuaranteedRollup": true, "partitionsSpec": {"type": "range", "partitionDimensions": ["page"]}}),
            "exactly one of targetRowsPerSegment or maxRowsPerSegment",
        ),
        (
            json!({"forceGuaranteedRollup": true, "partitionsSpec": {"type": "single_dim", "partitionDimension": "num", "maxRowsPerSegment": 5}}),
            "must be a string dimension",
        ),
        (
            json!({"forceGuaranteedRollup": true, "partitionsSpec": {"type": "single_dim", "partitionDimension": "nope", "maxRowsPerSegment": 5}}),
            "is not in spec.dataSchema.dimensionsSpec.dimensions",
        ),
    ];
    for (tuning, want) in cases {
        let s = spec(
            dir,
            "*",
            json!({"type": "json"}),
            json!({"spec": {"tuningConfig": tuning}}),
        );
        let err = IndexTaskSpec::from_json(&s).unwrap_err().to_string();
        assert!(err.contains(want), "{err} should contain {want}");
        assert!(err.contains("spec.tuningConfig"), "{err}");
    }
    let mut s = spec(
        dir,
        "*",
        json!({"type": "json"}),
        json!({"spec": {"tuningConfig": {"forceGuaranteedRollup": true,
            "partitionsSpec": {"type": "hashed", "numShards": 2}}}}),
    );
    s["spec"]["ioConfig"]["appendToExisting"] = json!(true);
    let err = IndexTaskSpec::from_json(&s).unwrap_err().to_string();
    assert!(err.contains("appending"), "{err}");
}

/// An input whose sort does not fit `maxBytesInMemory` (600,000 rows in random time order over
/// 20 days against the 64 MiB floor; the sort holds about 120 MB) spills, and stays on the
/// columnar path: time chunks hash unevenly to the sort partitions, and a partition that starts
/// late must still get memory (a fallback to the row path would fail `columnar`). Every row
/// arrives in the right day, each segment sorted by `__time`.
#[tokio::test]
async fn a_sort_larger_than_memory_spills_and_stays_columnar() {
    let env = Env::new().await;
    const ROWS: u64 = 600_000;
    const DAY: i64 = 86_400_000;
    let start = 1_704_067_200_000i64; // 2024-01-01
    let mut csv = String::from("ts,page,country,num,ratio,f,added\n");
    let mut expected: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
    let mut x: u64 = 42;
    for i in 0..ROWS {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let t = start + ((x >> 20) % (20 * DAY as u64)) as i64;
        let added = (i % 1000) as i64;
        let e = expected.entry(t - t.rem_euclid(DAY)).or_default();
        e.0 += 1;
        e.1 += added;
        csv.push_str(&format!(
            "{t},page-{},c{},{},0.5,1.5,{added}\n",
            x % 50_000,
            i % 20,
            i % 7
        ));
    }
    let base = env.write("big.csv", csv.as_bytes());
    let s = spec(
        &base,
        "big.csv",
        json!({"type": "csv", "findColumnsFromHeader": true}),
        json!({"spec": {"tuningConfig": {"maxBytesInMemory": 64 << 20}}}),
    );
    let (segs, stats) = env.run_task(&s, true).await.expect("task");
    assert!(
        stats.columnar.load(Ordering::Relaxed),
        "fell back to the row path"
    );
    assert_eq!(stats.processed.load(Ordering::Relaxed), ROWS);
    let mut got: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
    for seg in &segs {
        let LoadSpec::Local { path } = &seg.load_spec else {
            panic!("local load spec")
        };
        let file = std::fs::File::open(path).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let mut last = i64::MIN;
        for batch in reader {
            let batch = batch.unwrap();
            let time = arrow::compute::cast(
                batch.column_by_name("__time").unwrap(),
                &arrow::datatypes::DataType::Int64,
            )
            .unwrap();
            let time = time
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .unwrap();
            let added = batch
                .column_by_name("added")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .unwrap();
            for (t, a) in time.values().iter().zip(added.values()) {
                assert!(*t >= last, "segment {} is not sorted by __time", seg.id());
                last = *t;
                assert_eq!(
                    t - t.rem_euclid(DAY),
                    seg.interval.start,
                    "row in the wrong day"
                );
                let e = got.entry(seg.interval.start).or_default();
                e.0 += 1;
                e.1 += a;
            }
        }
    }
    assert_eq!(got, expected);
}
