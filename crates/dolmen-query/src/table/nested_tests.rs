//! `JSON_VALUE` over shredded sub-columns ([`crate::nested`]): the same answers as from the
//! JSON text, and the plan reads the sub-column only where every segment has it.

use std::sync::Arc;

use arrow::array::{StringArray, TimestampMillisecondArray};
use arrow::record_batch::RecordBatch;
use dolmen_common::Interval;
use dolmen_metadata::{MetadataStore, NewSegment, PublishMode, PublishRequest};
use dolmen_segment::{ColumnKind, ColumnType, SegmentColumn, SegmentFileWriter, SegmentSchema};

use super::realtime_tests::Fixture;

const DAY1: [Option<&str>; 5] = [
    Some(r#"{"a":"v1","b":1,"d":1.5,"m":1,"s":"x","c":{"d":"p"},"t":true}"#),
    Some(r#"{"a":"v2","b":2,"d":2.25,"m":2.5,"s":3,"c":{"d":"q"}}"#),
    Some(r#"{"a":"v1","b":null,"c":{"d":{"deep":1}},"arr":[1,2]}"#),
    None,
    Some(r#"{"b":-4,"d":1.0E20,"x.y":"dotted","c":"flat"}"#),
];

const DAY2: [Option<&str>; 2] = [
    Some(r#"{"a":"v3","b":5,"d":0.5,"m":7,"s":"y","c":{"d":"p"}}"#),
    Some(r#"{"a":"v1","b":6,"d":-0.0,"m":3,"s":"z","c":{"d":"r"}}"#),
];

/// Publishes `docs` (a JSON column `j`, one row an hour from `day`) as one segment of
/// datasource `ds`; its payload lists the shredded paths only when `shredded`.
async fn publish(f: &Fixture, ds: &str, day: &str, docs: &[Option<&str>], shredded: bool) {
    let schema = SegmentSchema {
        columns: vec![SegmentColumn::new(
            "j",
            ColumnType::Json,
            ColumnKind::Dimension,
        )],
    };
    let arrow_schema = schema.arrow_schema();
    let start = dolmen_common::time::parse_iso_instant(day).unwrap();
    let batch = RecordBatch::try_new(
        Arc::clone(&arrow_schema),
        vec![
            Arc::new(TimestampMillisecondArray::from(
                (0..docs.len() as i64)
                    .map(|i| start + i * 3_600_000)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(docs.to_vec())),
        ],
    )
    .unwrap();
    let path = f.dir.path().join(format!("{ds}-{day}.parquet"));
    let mut w = SegmentFileWriter::create(
        &path,
        arrow_schema,
        dolmen_segment::file::compression_for(None),
    )
    .unwrap();
    w.write(&batch).unwrap();
    let (size, layout) = w.finish_with_layout().unwrap();
    assert!(!layout.is_empty());
    let columns = if shredded {
        schema.with_nested_layout(&layout).columns
    } else {
        schema.columns
    };
    let load_spec = f
        .deep
        .push(&path, &format!("{ds}/{day}/index.parquet"))
        .await
        .unwrap();
    let req = PublishRequest {
        data_source: ds.into(),
        segments: vec![NewSegment {
            interval: Interval {
                start,
                end: start + 86_400_000,
            },
            load_spec,
            dimensions: vec!["j".into()],
            metrics: vec![],
            columns,
            size,
            num_rows: docs.len() as u64,
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

/// `shredded`: both days shredded; `text`: neither payload lists paths (segments written
/// before shredding); `mixed`: only the first day's does.
async fn fixture() -> Fixture {
    let f = Fixture::new().await;
    for (ds, first, second) in [
        ("shredded", true, true),
        ("text", false, false),
        ("mixed", true, false),
    ] {
        publish(&f, ds, "2024-01-01", &DAY1, first).await;
        publish(&f, ds, "2024-01-02", &DAY2, second).await;
    }
    f
}

#[tokio::test]
async fn sub_columns_answer_as_the_text() {
    let f = fixture().await;
    let queries = [
        "SELECT JSON_VALUE(j, '$.a') AS a, COUNT(*) AS c FROM {t} GROUP BY 1 ORDER BY 1",
        "SELECT COUNT(*) FROM {t} WHERE JSON_VALUE(j, '$.a') = 'v1'",
        "SELECT JSON_VALUE(j, '$.a') AS a, COUNT(*) FROM {t} \
         WHERE JSON_VALUE(j, '$.a') IN ('v1', 'v3') GROUP BY 1 ORDER BY 1",
        "SELECT JSON_VALUE(j, '$.b'), JSON_VALUE(j, '$.b' RETURNING BIGINT), \
         JSON_VALUE(j, '$.b' RETURNING DOUBLE) FROM {t} ORDER BY __time",
        "SELECT JSON_VALUE(j, '$.d'), JSON_VALUE(j, '$.d' RETURNING DOUBLE), \
         JSON_VALUE(j, '$.d' RETURNING BIGINT) FROM {t} ORDER BY __time",
        "SELECT JSON_VALUE(j, '$.m'), JSON_VALUE(j, '$.m' RETURNING DOUBLE), \
         JSON_VALUE(j, '$.m' RETURNING BIGINT) FROM {t} ORDER BY __time",
        "SELECT JSON_VALUE(j, '$.s'), JSON_VALUE(j, '$.s' RETURNING BIGINT) FROM {t} ORDER BY __time",
        "SELECT JSON_VALUE(j, '$.c.d'), JSON_VALUE(j, '$[''c''][''d'']'), JSON_VALUE(j, '$.c'), \
         JSON_VALUE(j, '$.t'), JSON_VALUE(j, '$[''x.y'']'), JSON_VALUE(j, '$.arr[0]') \
         FROM {t} ORDER BY __time",
        "SELECT JSON_VALUE(j, '$.c.d') AS k, SUM(JSON_VALUE(j, '$.b' RETURNING BIGINT)) AS s \
         FROM {t} GROUP BY 1 ORDER BY 1",
        "SELECT COUNT(*) FROM {t} WHERE JSON_VALUE(j, '$.b' RETURNING BIGINT) > 1",
        "SELECT JSON_VALUE(x.j, '$.a') FROM {t} x WHERE JSON_VALUE(x.j, '$.b' RETURNING BIGINT) \
         >= 5 ORDER BY 1",
        "SELECT j FROM {t} WHERE JSON_VALUE(j, '$.a') = 'v3'",
        "SELECT * FROM {t} WHERE JSON_VALUE(j, '$.a') = 'v3'",
    ];
    for q in queries {
        let text = f.query(&q.replace("{t}", "text")).await.unwrap();
        for t in ["shredded", "mixed"] {
            let sql = q.replace("{t}", t);
            assert_eq!(f.query(&sql).await.unwrap(), text, "{sql}");
        }
    }
    let one = |sql: &str| sql.replace("{t}", "shredded");
    assert_eq!(
        f.query(&one(queries[0])).await.unwrap(),
        [["null", "2"], ["v1", "3"], ["v2", "1"], ["v3", "1"]]
    );
    assert_eq!(
        f.query(&one(queries[3])).await.unwrap()[4],
        ["-4", "-4", "-4.0"]
    );
    // Doubles as JSON_VALUE writes them (Java's Double.toString).
    let d: Vec<String> = f
        .query(&one(queries[4]))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(d, ["1.5", "2.25", "null", "null", "1.0E20", "0.5", "-0.0"]);
    // Integers among doubles keep their text.
    assert_eq!(
        f.query(&one(queries[5])).await.unwrap()[0],
        ["1", "1.0", "1"]
    );
    assert_eq!(
        f.query(&one(queries[8])).await.unwrap(),
        [["null", "-4"], ["p", "6"], ["q", "2"], ["r", "6"]]
    );
    assert_eq!(
        f.query(&one(queries[11])).await.unwrap(),
        [[DAY2[0].unwrap()]]
    );
}

/// Whether the physical plan of `plan` text parses the JSON text (`json_value(j@..`); a
/// rewritten call keeps only its output name.
fn parses_text(plan: &str) -> bool {
    plan.split("physical_plan")
        .nth(1)
        .is_some_and(|p| p.contains("json_value(j@"))
}

#[tokio::test]
async fn plans_read_sub_columns_only_where_every_segment_has_them() {
    let f = fixture().await;
    let filter = "SELECT COUNT(*) FROM {t} WHERE JSON_VALUE(j, '$.a') = 'v1'";
    let shredded = f.explain(&filter.replace("{t}", "shredded")).await;
    assert!(shredded.contains("__dolmen_nested:j/a"), "{shredded}");
    assert!(!parses_text(&shredded), "{shredded}");
    for t in ["text", "mixed"] {
        let p = f.explain(&filter.replace("{t}", t)).await;
        assert!(!p.contains("__dolmen_nested"), "{t}: {p}");
        assert!(parses_text(&p), "{t}: {p}");
    }
    // An array index and the text of a path that mixes integers and doubles ($.m) read the
    // text; the numeric reads of $.m use the sub-column.
    for q in [
        "SELECT JSON_VALUE(j, '$.arr[0]') FROM shredded",
        "SELECT JSON_VALUE(j, '$.m') FROM shredded",
    ] {
        let p = f.explain(q).await;
        assert!(parses_text(&p), "{q}: {p}");
    }
    // A path the second day lacks ($.t): that day lists all its paths, so its rows are null.
    for q in [
        "SELECT JSON_VALUE(j, '$.t') FROM shredded",
        "SELECT JSON_VALUE(j, '$.m' RETURNING DOUBLE) FROM shredded",
        "SELECT JSON_VALUE(j, '$.b' RETURNING BIGINT), JSON_VALUE(j, '$.d') FROM shredded",
        "SELECT JSON_VALUE(j, '$.c.d') AS k, COUNT(*) FROM shredded GROUP BY 1",
    ] {
        let p = f.explain(q).await;
        assert!(
            p.contains("__dolmen_nested:j/") && !parses_text(&p),
            "{q}: {p}"
        );
    }
    // Grouping by a string sub-column is grouping by a scan column: by dictionary id, as for a
    // plain string dimension (crate::dictionary).
    let p = f.explain("SELECT JSON_VALUE(j, '$.a') AS a, COUNT(*) AS c FROM shredded GROUP BY 1 ORDER BY 2 DESC",
    )
    .await;
    assert!(p.contains("DictionaryGroupAggregateExec"), "{p}");
    // A segment that left a path to the text ($.fs mixes doubles and text) and lacks $.t may
    // hold $.t somewhere it did not list: $.t reads the text there; $.a is still shredded.
    publish(&f, "incomplete", "2024-01-01", &DAY1, true).await;
    let mixed = [
        Some(r#"{"a":"v4","fs":1.5}"#),
        Some(r#"{"a":"v5","fs":"x"}"#),
    ];
    publish(&f, "incomplete", "2024-01-02", &mixed, true).await;
    let p = f
        .explain("SELECT JSON_VALUE(j, '$.t') FROM incomplete")
        .await;
    assert!(parses_text(&p), "{p}");
    let p = f
        .explain("SELECT JSON_VALUE(j, '$.a') FROM incomplete")
        .await;
    assert!(!parses_text(&p), "{p}");
    // The hidden columns never show in the table's columns.
    let star = f.query("SELECT * FROM shredded LIMIT 1").await.unwrap();
    assert_eq!(star[0].len(), 2);
}

/// `JSON_VALUE` outside a subquery that selects the JSON column (as it is, or renamed) reads
/// the sub-column through that projection, with the answers of the text.
#[tokio::test]
async fn json_value_reads_sub_columns_through_projections() {
    let f = fixture().await;
    let queries = [
        "SELECT JSON_VALUE(j, '$.a') AS a, COUNT(*) AS c FROM (SELECT __time, j FROM {t}) \
         GROUP BY 1 ORDER BY 1",
        "SELECT COUNT(*) FROM (SELECT j AS doc FROM {t}) s WHERE JSON_VALUE(doc, '$.a') = 'v1'",
        "SELECT JSON_VALUE(x.j, '$.c.d'), JSON_VALUE(x.j, '$.b' RETURNING BIGINT) FROM \
         (SELECT j, __time FROM {t} WHERE JSON_VALUE(j, '$.a') = 'v1') x ORDER BY x.__time",
        "SELECT JSON_VALUE(j, '$.a') AS a, a2 FROM (SELECT j, JSON_VALUE(j, '$.a') AS a2 FROM {t}) \
         WHERE a2 = 'v1'",
        "SELECT JSON_VALUE(k, '$.d'), u FROM (SELECT UPPER(JSON_VALUE(j, '$.s')) AS u, j AS k, \
         __time FROM {t}) ORDER BY __time",
        "SELECT JSON_VALUE(j, '$.a') FROM (SELECT * FROM (SELECT j FROM {t}) WHERE \
         JSON_VALUE(j, '$.b' RETURNING BIGINT) > 1) ORDER BY 1",
    ];
    for q in queries {
        let text = f.query(&q.replace("{t}", "text")).await.unwrap();
        assert!(!text.is_empty(), "{q}");
        for t in ["shredded", "mixed"] {
            let sql = q.replace("{t}", t);
            assert_eq!(f.query(&sql).await.unwrap(), text, "{sql}");
        }
    }
    for q in &queries[..2] {
        let p = f.explain(&q.replace("{t}", "shredded")).await;
        assert!(p.contains("__dolmen_nested:j/a"), "{q}: {p}");
        assert!(!parses_text(&p), "{q}: {p}");
    }
    // An expression of the column in between (not the column itself) leaves the text.
    let p = f
        .explain("SELECT JSON_VALUE(k, '$.a') FROM (SELECT COALESCE(j, j) AS k FROM shredded)")
        .await;
    assert!(!p.contains("__dolmen_nested"), "{p}");
}
