//! Array filters through the element indexes of multi-value and array columns
//! ([`crate::index::IndexPredicate`]): the same rows as a scan of everything, with the rows of
//! the segments the indexes rule out left unread.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Builder, ListBuilder, StringArray, StringBuilder, TimestampMillisecondArray,
};
use arrow::record_batch::RecordBatch;
use dolmen_common::Interval;
use dolmen_metadata::{MetadataStore, NewSegment, PublishMode, PublishRequest};
use dolmen_segment::{ColumnKind, ColumnType, SegmentColumn, SegmentFileWriter, SegmentSchema};

use super::realtime_tests::Fixture;

/// One row: `id`, `tags` (multi-value), `arr` (`ARRAY<STRING>`), `nums` (`ARRAY<LONG>`).
type Row<'a> = (
    &'a str,
    Option<&'a [Option<&'a str>]>,
    Option<&'a [Option<&'a str>]>,
    Option<&'a [Option<i64>]>,
);

const DAY1: &[Row<'static>] = &[
    (
        "1",
        Some(&[Some("a"), Some("b")]),
        Some(&[Some("x"), Some("y")]),
        Some(&[Some(1), Some(2)]),
    ),
    ("2", None, None, None),
    ("3", Some(&[]), Some(&[]), Some(&[])),
    (
        "4",
        Some(&[Some("b"), None]),
        Some(&[Some("y"), None]),
        Some(&[Some(2), None]),
    ),
];

const DAY2: &[Row<'static>] = &[
    (
        "5",
        Some(&[Some("c")]),
        Some(&[Some("z")]),
        Some(&[Some(3)]),
    ),
    (
        "6",
        Some(&[Some("a")]),
        Some(&[Some("x"), Some("x")]),
        Some(&[Some(1), Some(1)]),
    ),
];

fn strings(
    rows: &[Row<'static>],
    pick: impl Fn(&Row<'static>) -> Option<&'static [Option<&'static str>]>,
) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for r in rows {
        match pick(r) {
            Some(v) => {
                for e in v {
                    b.values().append_option(*e);
                }
                b.append(true);
            }
            None => b.append(false),
        }
    }
    Arc::new(b.finish())
}

/// Publishes one day segment of `columns` with `arrays`, one row an hour from `day`.
async fn publish(f: &Fixture, day: &str, columns: Vec<SegmentColumn>, arrays: Vec<ArrayRef>) {
    let schema = SegmentSchema { columns };
    let arrow_schema = schema.arrow_schema();
    let start = dolmen_common::time::parse_iso_instant(day).unwrap();
    let n = arrays[0].len();
    let mut all: Vec<ArrayRef> = vec![Arc::new(TimestampMillisecondArray::from(
        (0..n as i64)
            .map(|i| start + i * 3_600_000)
            .collect::<Vec<_>>(),
    ))];
    all.extend(arrays);
    let batch = RecordBatch::try_new(Arc::clone(&arrow_schema), all).unwrap();
    let path = f.dir.path().join(format!("arr-{day}.parquet"));
    let mut w = SegmentFileWriter::create(
        &path,
        arrow_schema,
        dolmen_segment::file::compression_for(None),
    )
    .unwrap();
    w.write(&batch).unwrap();
    let size = w.finish().unwrap();
    let load_spec = f
        .deep
        .push(&path, &format!("arr/{day}/index.parquet"))
        .await
        .unwrap();
    let req = PublishRequest {
        data_source: "arr".into(),
        segments: vec![NewSegment {
            interval: Interval {
                start,
                end: start + 86_400_000,
            },
            load_spec,
            dimensions: schema.columns.iter().map(|c| c.name.clone()).collect(),
            metrics: vec![],
            columns: schema.columns,
            size,
            num_rows: n as u64,
            shard: None,
        }],
        mode: PublishMode::Append {
            version_if_new: "2024-01-01T00:00:00.000Z".into(),
        },
        drop_existing: vec![],
        commit: None,
        last_compaction_state: None,
    };
    f.store.publish_segments(req).await.unwrap();
    f.view.refresh().await.unwrap();
}

async fn fixture() -> Fixture {
    let f = Fixture::new().await;
    for (day, rows) in [("2024-01-01", DAY1), ("2024-01-02", DAY2)] {
        let mut tags = SegmentColumn::new("tags", ColumnType::String, ColumnKind::Dimension);
        tags.multi_value = true;
        let columns = vec![
            SegmentColumn::new("id", ColumnType::String, ColumnKind::Dimension),
            tags,
            SegmentColumn::new("arr", ColumnType::StringArray, ColumnKind::Dimension),
            SegmentColumn::new("nums", ColumnType::LongArray, ColumnKind::Dimension),
        ];
        let mut nums = ListBuilder::new(Int64Builder::new());
        for r in rows {
            match r.3 {
                Some(v) => {
                    for e in v {
                        nums.values().append_option(*e);
                    }
                    nums.append(true);
                }
                None => nums.append(false),
            }
        }
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            strings(rows, |r| r.1),
            strings(rows, |r| r.2),
            Arc::new(nums.finish()),
        ];
        publish(&f, day, columns, arrays).await;
    }
    // An older segment that stored `tags` as a plain string (one value per row).
    publish(
        &f,
        "2024-01-03",
        vec![
            SegmentColumn::new("id", ColumnType::String, ColumnKind::Dimension),
            SegmentColumn::new("tags", ColumnType::String, ColumnKind::Dimension),
        ],
        vec![
            Arc::new(StringArray::from(vec!["7", "8"])),
            Arc::new(StringArray::from(vec![Some("a"), None])),
        ],
    )
    .await;
    f
}

#[tokio::test]
async fn array_filters_read_only_the_rows_their_indexes_allow() {
    let f = fixture().await;
    let skipped = || f.engine.value_indexes().rows_skipped();
    // (filter, ids, rows of the 10 the indexes leave unread)
    let cases: &[(&str, &[&str], Option<u64>)] = &[
        ("ARRAY_CONTAINS(arr, 'x')", &["1", "6"], Some(3 + 1)),
        ("ARRAY_CONTAINS(arr, ARRAY['x', 'y'])", &["1"], Some(3 + 2)),
        (
            "ARRAY_OVERLAP(arr, ARRAY['y', 'z'])",
            &["1", "4", "5"],
            Some(2 + 1),
        ),
        ("ARRAY_OVERLAP(ARRAY['z'], arr)", &["5"], Some(4 + 1)),
        ("ARRAY_CONTAINS(arr, 'nope')", &[], Some(6)),
        ("MV_CONTAINS(tags, 'b')", &["1", "4"], Some(2 + 2 + 2)),
        (
            "MV_OVERLAP(tags, ARRAY['c', 'a'])",
            &["1", "5", "6", "7"],
            Some(3 + 1),
        ),
        // Druid's multi-value equality: any value equals; the plain-string segment too.
        ("tags = 'a'", &["1", "6", "7"], Some(3 + 1 + 1)),
        ("tags IN ('c', 'zz')", &["5"], Some(4 + 1 + 2)),
        ("ARRAY_CONTAINS(nums, 2)", &["1", "4"], Some(2 + 2)),
        ("ARRAY_OVERLAP(nums, ARRAY[3, 7])", &["5"], Some(4 + 1)),
        (
            "id = '1' AND ARRAY_CONTAINS(arr, 'x')",
            &["1"],
            Some(3 + 2 + 2),
        ),
        // Not index predicates: every row is read, the answer is the same.
        ("NOT ARRAY_CONTAINS(arr, 'x')", &["3", "4", "5"], Some(0)),
        ("ARRAY_CONTAINS(arr, ARRAY['y', NULL])", &["4"], Some(0)),
        ("ARRAY_CONTAINS(nums, '2')", &["1", "4"], Some(0)),
        (
            "ARRAY_CONTAINS(arr, 'x') OR ARRAY_CONTAINS(arr, 'z')",
            &["1", "5", "6"],
            Some(0),
        ),
    ];
    for (filter, want, unread) in cases {
        let before = skipped();
        let rows = f
            .query(&format!("SELECT id FROM arr WHERE {filter} ORDER BY id"))
            .await
            .unwrap_or_else(|e| panic!("{filter}: {e}"));
        let ids: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(&ids, want, "{filter}");
        if let Some(unread) = unread {
            assert_eq!(skipped() - before, *unread, "rows left unread by {filter}");
        }
    }
}
