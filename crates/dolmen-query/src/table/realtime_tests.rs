//! Realtime data in queries: hydrants of running streaming tasks next to published segments.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, StringArray, TimestampMillisecondArray};
use arrow::record_batch::RecordBatch;
use dolmen_common::Interval;
use dolmen_common::time::parse_iso_instant;
use dolmen_metadata::{MetadataStore, NewSegment, PublishMode, PublishRequest, SqlMetadataStore};
use dolmen_segment::{ColumnKind, ColumnType, SegmentColumn, SegmentSchema};
use dolmen_storage::{DeepStorage, Hydrant, SegmentCache, SegmentView};
use futures::TryStreamExt;

use crate::engine::{QueryEngine, SqlQuery};

/// One row: (`__time` ISO, `page`, `added`, `channel`).
pub(super) type Row<'a> = (&'a str, &'a str, i64, Option<&'a str>);

pub(super) struct Fixture {
    pub(super) dir: tempfile::TempDir,
    pub(super) deep: DeepStorage,
    pub(super) store: Arc<SqlMetadataStore>,
    pub(super) view: Arc<SegmentView>,
    /// Served lookups; starts with `pages`: `a` -> `Page A`, `b` -> `Page B`.
    pub(super) lookups: Arc<dolmen_lookup::LookupRegistry>,
    pub(super) engine: QueryEngine,
}

impl Fixture {
    pub(super) async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let cache = Arc::new(SegmentCache::new(&dir.path().join("cache"), deep.clone()).unwrap());
        let store = Arc::new(SqlMetadataStore::connect("sqlite::memory:").await.unwrap());
        let view = Arc::new(SegmentView::new(
            Arc::clone(&store) as Arc<dyn MetadataStore>
        ));
        let lookups = Arc::new(dolmen_lookup::LookupRegistry::from_maps([(
            "pages".to_string(),
            dolmen_lookup::LookupMap::new(
                [("a", "Page A"), ("b", "Page B")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                false,
            ),
        )]));
        let engine = QueryEngine::new(Arc::clone(&view), cache, 2, None, Arc::clone(&lookups));
        Fixture {
            dir,
            deep,
            store,
            view,
            lookups,
            engine,
        }
    }

    /// Writes a segment file of `rows` (with a `channel` column if any row has one); returns
    /// its path, size and columns.
    pub(super) fn write(&self, name: &str, rows: &[Row<'_>]) -> (PathBuf, u64, Vec<SegmentColumn>) {
        let with_channel = rows.iter().any(|r| r.3.is_some());
        let mut columns = vec![SegmentColumn::new(
            "page",
            ColumnType::String,
            ColumnKind::Dimension,
        )];
        if with_channel {
            columns.push(SegmentColumn::new(
                "channel",
                ColumnType::String,
                ColumnKind::Dimension,
            ));
        }
        columns.push(SegmentColumn::new(
            "added",
            ColumnType::Long,
            ColumnKind::Metric,
        ));
        let schema = SegmentSchema {
            columns: columns.clone(),
        }
        .arrow_schema();
        let mut arrays: Vec<arrow::array::ArrayRef> = vec![
            Arc::new(TimestampMillisecondArray::from(
                rows.iter()
                    .map(|r| parse_iso_instant(r.0).unwrap())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
        ];
        if with_channel {
            arrays.push(Arc::new(StringArray::from(
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            )));
        }
        arrays.push(Arc::new(Int64Array::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        )));
        let batch = RecordBatch::try_new(Arc::clone(&schema), arrays).unwrap();
        let path = self.dir.path().join(format!("{name}.parquet"));
        let size = dolmen_segment::file::write_segment_file(
            &path,
            schema,
            &[batch],
            dolmen_segment::file::compression_for(None),
        )
        .unwrap();
        (path, size, columns)
    }

    /// The publish request of one segment over `interval` holding the file at `path`.
    pub(super) async fn segment_request(
        &self,
        interval: &str,
        path: &Path,
        size: u64,
        num_rows: u64,
        columns: Vec<SegmentColumn>,
    ) -> PublishRequest {
        let key = format!("rt/{}/index.parquet", path.file_stem().unwrap().display());
        let load_spec = self.deep.push(path, &key).await.unwrap();
        PublishRequest {
            data_source: "rt".into(),
            segments: vec![NewSegment {
                interval: Interval::parse(interval).unwrap(),
                load_spec,
                dimensions: columns
                    .iter()
                    .filter(|c| c.kind == ColumnKind::Dimension)
                    .map(|c| c.name.clone())
                    .collect(),
                metrics: vec!["added".into()],
                columns,
                size,
                num_rows,
                shard: None,
            }],
            mode: PublishMode::Append {
                version_if_new: "2024-01-01T00:00:00.000Z".into(),
            },
            drop_existing: vec![],
            commit: None,
            last_compaction_state: None,
        }
    }

    /// Publishes `rows` as one segment of the day `interval` and refreshes the view.
    pub(super) async fn publish(&self, name: &str, interval: &str, rows: &[Row<'_>]) {
        let (path, size, columns) = self.write(name, rows);
        let req = self
            .segment_request(interval, &path, size, rows.len() as u64, columns)
            .await;
        self.store.publish_segments(req).await.unwrap();
        self.view.refresh().await.unwrap();
    }

    /// A hydrant of `rows` (their time range as its interval).
    pub(super) fn hydrant(&self, name: &str, sequence: u64, rows: &[Row<'_>]) -> Hydrant {
        let (path, size, columns) = self.write(name, rows);
        let times = rows.iter().map(|r| parse_iso_instant(r.0).unwrap());
        Hydrant {
            interval: Interval {
                start: times.clone().min().unwrap(),
                end: times.max().unwrap() + 1,
            },
            path,
            num_rows: rows.len() as u64,
            size,
            columns,
            sequence,
        }
    }

    /// The rows of `sql`, every value rendered as a string (`null` for nulls).
    pub(super) async fn query(&self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        self.query_with(sql, None).await
    }

    /// The `EXPLAIN` output of `sql`, one line per row.
    pub(super) async fn explain(&self, sql: &str) -> String {
        self.query(&format!("EXPLAIN {sql}"))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| r.join(" "))
            .collect::<Vec<_>>()
            .join(
                "
",
            )
    }

    /// [`Self::query`] with a query context.
    pub(super) async fn query_with(
        &self,
        sql: &str,
        context: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Vec<Vec<String>>, String> {
        let q = SqlQuery {
            query: sql.to_string(),
            context,
            ..SqlQuery::default()
        };
        let result = self.engine.execute(&q).await.map_err(|e| e.to_string())?;
        let batches: Vec<RecordBatch> = result
            .stream
            .try_collect()
            .await
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for b in batches {
            let cols: Vec<_> = b
                .columns()
                .iter()
                .map(|c| arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap())
                .collect();
            for i in 0..b.num_rows() {
                out.push(
                    cols.iter()
                        .map(|c| {
                            let s = c.as_string::<i32>();
                            if s.is_valid(i) {
                                s.value(i).to_string()
                            } else {
                                "null".to_string()
                            }
                        })
                        .collect(),
                );
            }
        }
        Ok(out)
    }

    pub(super) async fn one(&self, sql: &str) -> String {
        let rows = self.query(sql).await.unwrap();
        assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
        assert_eq!(rows[0].len(), 1, "{sql}: {rows:?}");
        rows[0][0].clone()
    }
}

const SEGMENT_ROWS: [Row<'static>; 3] = [
    ("2024-01-01T01:00:00Z", "a", 1, None),
    ("2024-01-01T02:00:00Z", "b", 2, None),
    ("2024-01-01T03:00:00Z", "a", 3, None),
];

#[tokio::test]
async fn hydrant_rows_add_to_the_segments_and_are_pruned_by_time() {
    let f = Fixture::new().await;
    f.publish("seg", "2024-01-01/2024-01-02", &SEGMENT_ROWS)
        .await;
    let h1 = f.hydrant(
        "h1",
        1,
        &[
            ("2024-01-02T00:10:00Z", "a", 10, Some("#en")),
            ("2024-01-02T00:20:00Z", "c", 20, Some("#fr")),
        ],
    );
    let h2 = f.hydrant("h2", 2, &[("2024-01-03T00:00:00Z", "a", 100, None)]);
    f.view
        .add_hydrants("rt", "sup/0/0", "task-a", vec![h1.clone(), h2.clone()]);
    // A replica of the same sink reads the same rows: not counted again.
    f.view.add_hydrants("rt", "sup/0/0", "task-b", vec![h1, h2]);

    assert_eq!(f.one("SELECT COUNT(*) FROM rt").await, "6");
    assert_eq!(f.one("SELECT SUM(added) FROM rt").await, "136");
    assert_eq!(
        f.one("SELECT SUM(added) FROM rt WHERE page = 'a'").await,
        "114"
    );
    // A column only the hydrants have is part of the table; segment rows read it as null.
    assert_eq!(
        f.query("SELECT channel, COUNT(*) FROM rt GROUP BY channel ORDER BY channel")
            .await
            .unwrap(),
        vec![
            vec!["null".to_string(), "4".to_string()],
            vec!["#en".to_string(), "1".to_string()],
            vec!["#fr".to_string(), "1".to_string()],
        ]
    );
    assert_eq!(
        f.one("SELECT SUM(added) FROM rt WHERE __time >= TIMESTAMP '2024-01-02 00:15:00'")
            .await,
        "120"
    );

    // A hydrant whose file is gone fails every query that reads it, so a query that succeeds
    // did not open it: `__time` filters skip hydrants outside their range before any read.
    let mut gone = f.hydrant("h3", 3, &[("2024-02-01T00:00:00Z", "z", 1000, None)]);
    std::fs::remove_file(&gone.path).unwrap();
    gone.path = f.dir.path().join("missing.parquet");
    f.view.add_hydrants("rt", "sup/0/0", "task-a", vec![gone]);
    assert!(f.query("SELECT SUM(added) FROM rt").await.is_err());
    assert_eq!(
        f.one("SELECT SUM(added) FROM rt WHERE __time < TIMESTAMP '2024-02-01 00:00:00'")
            .await,
        "136"
    );
    assert_eq!(
        f.one("SELECT COUNT(*) FROM rt WHERE TIME_IN_INTERVAL(__time, '2024-01-02/2024-01-03')")
            .await,
        "2"
    );
}

#[tokio::test]
async fn a_datasource_with_only_hydrants_is_a_table() {
    let f = Fixture::new().await;
    assert!(f.query("SELECT COUNT(*) FROM rt").await.is_err());
    let h = f.hydrant(
        "h1",
        1,
        &[
            ("2024-01-02T00:10:00Z", "a", 10, Some("#en")),
            ("2024-01-02T00:20:00Z", "c", 20, None),
        ],
    );
    f.view.add_hydrants("rt", "sup/0/0", "task-a", vec![h]);
    assert_eq!(
        f.query("SELECT page, added FROM rt ORDER BY __time")
            .await
            .unwrap(),
        vec![
            vec!["a".to_string(), "10".to_string()],
            vec!["c".to_string(), "20".to_string()],
        ]
    );
    assert_eq!(
        f.query("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'")
            .await
            .unwrap(),
        vec![vec!["rt".to_string()]]
    );
    assert_eq!(
        f.query(
            "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS \
             WHERE TABLE_NAME = 'rt' ORDER BY ORDINAL_POSITION"
        )
        .await
        .unwrap(),
        [
            ["__time", "TIMESTAMP"],
            ["page", "VARCHAR"],
            ["channel", "VARCHAR"],
            ["added", "BIGINT"],
        ]
        .map(|r| r.map(String::from).to_vec())
        .to_vec()
    );
    // Once its only task is dropped, the datasource is gone again.
    f.view.drop_task_hydrants("rt", "task-a");
    assert!(f.query("SELECT COUNT(*) FROM rt").await.is_err());
}

#[tokio::test]
async fn totals_stay_the_same_across_a_handoff() {
    let f = Fixture::new().await;
    f.publish("seg", "2024-01-01/2024-01-02", &SEGMENT_ROWS)
        .await;
    let handed = [
        ("2024-01-02T00:10:00Z", "a", 10, None),
        ("2024-01-02T00:20:00Z", "c", 20, None),
    ];
    let h1 = f.hydrant("h1", 1, &handed);
    let h2 = f.hydrant("h2", 2, &[("2024-01-02T05:00:00Z", "a", 100, None)]);
    f.view.add_hydrants("rt", "sup/0/0", "task-a", vec![h1, h2]);
    let totals = "SELECT COUNT(*), SUM(added) FROM rt";
    let before = f.query(totals).await.unwrap();
    assert_eq!(before, vec![vec!["6".to_string(), "136".to_string()]]);

    // Hydrant 1 is published as a segment of the next day (the task's build of its rows).
    let (path, size, columns) = f.write("built", &handed);
    let req = f
        .segment_request("2024-01-02/2024-01-03", &path, size, 2, columns)
        .await;
    let published = f
        .view
        .handoff("rt", "sup/0/0", 1, f.store.publish_segments(req))
        .await
        .unwrap();
    assert_eq!(published.len(), 1);
    assert_eq!(f.query(totals).await.unwrap(), before);
    let snapshot = f.view.snapshot("rt").unwrap();
    assert_eq!(snapshot.timeline.visible_segments().len(), 2);
    assert_eq!(
        snapshot
            .hydrants
            .iter()
            .map(|h| h.sequence)
            .collect::<Vec<_>>(),
        vec![2]
    );
    // A later periodic refresh changes nothing either.
    f.view.refresh().await.unwrap();
    assert_eq!(f.query(totals).await.unwrap(), before);
}
