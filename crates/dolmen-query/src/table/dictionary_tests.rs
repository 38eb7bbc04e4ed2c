//! Aggregation by dictionary id ([`crate::dictionary`]): the rewritten plans give the answers
//! of the plain ones, and the rewrite happens where it should.

use super::realtime_tests::{Fixture, Row};

/// Segments with different dictionaries (and nulls), one segment without `channel`, and a
/// hydrant (realtime rows).
async fn fixture() -> Fixture {
    let f = Fixture::new().await;
    let day1: Vec<Row<'static>> = vec![
        ("2024-01-01T01:00:00Z", "a", 1, Some("#en")),
        ("2024-01-01T02:00:00Z", "b", 2, Some("#fr")),
        ("2024-01-01T03:00:00Z", "a", 3, None),
        ("2024-01-01T04:00:00Z", "c", 4, Some("#en")),
    ];
    let day2: Vec<Row<'static>> = vec![
        ("2024-01-02T01:00:00Z", "a", 10, Some("#de")),
        ("2024-01-02T02:00:00Z", "d", 20, Some("#en")),
        ("2024-01-02T03:00:00Z", "b", 30, Some("#de")),
    ];
    // No row has a channel: the file has no such column.
    let day3: Vec<Row<'static>> = vec![("2024-01-03T01:00:00Z", "e", 100, None)];
    f.publish("day1", "2024-01-01/2024-01-02", &day1).await;
    f.publish("day2", "2024-01-02/2024-01-03", &day2).await;
    f.publish("day3", "2024-01-03/2024-01-04", &day3).await;
    let h = f.hydrant(
        "h1",
        1,
        &[
            ("2024-01-04T00:10:00Z", "a", 1000, Some("#fr")),
            ("2024-01-04T00:20:00Z", "f", 2000, Some("#ja")),
        ],
    );
    f.view.add_hydrants("rt", "sup/0/0", "task-a", vec![h]);
    f
}

/// The physical plan of `sql`, as `EXPLAIN ANALYZE` prints it.
async fn plan(f: &Fixture, sql: &str) -> String {
    let rows = f.query(&format!("EXPLAIN ANALYZE {sql}")).await.unwrap();
    rows.iter()
        .map(|r| r.join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn group_by_a_string_dimension_aggregates_by_dictionary_id() {
    let f = fixture().await;
    let sql = "SELECT channel, COUNT(*), SUM(added), MAX(page) FROM rt GROUP BY channel \
               ORDER BY channel";
    // Null sorts first ascending, as in Druid.
    let expected = vec![
        vec!["null", "2", "103", "e"],
        vec!["#de", "2", "40", "b"],
        vec!["#en", "3", "25", "d"],
        vec!["#fr", "2", "1002", "b"],
        vec!["#ja", "1", "2000", "f"],
    ];
    let expected: Vec<Vec<String>> = expected
        .into_iter()
        .map(|r| r.into_iter().map(str::to_string).collect())
        .collect();
    assert_eq!(f.query(sql).await.unwrap(), expected);
    assert!(
        plan(&f, sql).await.contains("DictionaryGroupAggregateExec"),
        "{}",
        plan(&f, sql).await
    );
    // The same question without the rewrite (the group key is an expression) agrees.
    let plain = "SELECT channel || '' AS c, COUNT(*), SUM(added), MAX(page) FROM rt \
                 GROUP BY 1 ORDER BY 1";
    assert!(
        !plan(&f, plain)
            .await
            .contains("DictionaryGroupAggregateExec")
    );
    assert_eq!(f.query(plain).await.unwrap(), expected);

    // Filters on other columns, aggregate filters, and time ranges keep the rewrite.
    let filtered = "SELECT channel, COUNT(*) FILTER (WHERE added > 2), SUM(added) FROM rt \
                    WHERE page <> 'e' AND __time < TIMESTAMP '2024-01-04 00:00:00' \
                    GROUP BY channel ORDER BY channel";
    assert!(
        plan(&f, filtered)
            .await
            .contains("DictionaryGroupAggregateExec")
    );
    assert_eq!(
        f.query(filtered).await.unwrap(),
        vec![
            vec!["null", "1", "3"],
            vec!["#de", "2", "40"],
            vec!["#en", "2", "25"],
            vec!["#fr", "0", "2"],
        ]
        .into_iter()
        .map(|r| r.into_iter().map(str::to_string).collect::<Vec<_>>())
        .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn shapes_the_rewrite_does_not_take_still_answer() {
    let f = fixture().await;
    // A filter on the group column itself: the scan's strings are compared, no rewrite.
    let sql = "SELECT channel, SUM(added) FROM rt WHERE channel <> '#en' GROUP BY channel \
               ORDER BY channel";
    assert!(!plan(&f, sql).await.contains("DictionaryGroupAggregateExec"));
    assert_eq!(
        f.query(sql).await.unwrap(),
        vec![
            vec!["#de".to_string(), "40".to_string()],
            vec!["#fr".to_string(), "1002".to_string()],
            vec!["#ja".to_string(), "2000".to_string()],
        ]
    );
    // An aggregate over the group column.
    let sql = "SELECT channel, MIN(channel) FROM rt GROUP BY channel \
               ORDER BY channel DESC LIMIT 1";
    assert!(!plan(&f, sql).await.contains("DictionaryGroupAggregateExec"));
    assert_eq!(
        f.query(sql).await.unwrap(),
        vec![vec!["#ja".to_string(), "#ja".to_string()]]
    );
}

#[tokio::test]
async fn distinct_counts_over_dictionaries_match_the_plain_path() {
    let f = fixture().await;
    // Exact distinct counts (approximation off) go through GROUP BY below the count.
    assert_eq!(
        exact(
            &f,
            "SELECT COUNT(DISTINCT channel), COUNT(DISTINCT page) FROM rt"
        )
        .await,
        vec![vec!["4".to_string(), "6".to_string()]]
    );
    // Approximate (the default): the dictionary path hashes each dictionary value once; the
    // estimate is the plain path's (same hashes).
    let approx = "SELECT APPROX_COUNT_DISTINCT(channel), APPROX_COUNT_DISTINCT(page) FROM rt";
    let plain = "SELECT APPROX_COUNT_DISTINCT(channel || ''), APPROX_COUNT_DISTINCT(page || '') \
                 FROM rt";
    assert_eq!(
        f.query(approx).await.unwrap(),
        f.query(plain).await.unwrap()
    );
    assert_eq!(
        f.query(approx).await.unwrap(),
        vec![vec!["4".to_string(), "6".to_string()]]
    );
}

#[tokio::test]
async fn a_column_whose_dictionary_overflowed_is_read_as_strings() {
    let f = Fixture::new().await;
    // 3,000 distinct 100-byte channels: the column chunk's dictionary outgrows the segment
    // writer's limit and later pages are plain, so the file does not list it.
    let names: Vec<String> = (0..3000).map(|i| format!("{i:0>100}")).collect();
    let rows: Vec<Row<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| ("2024-01-01T01:00:00Z", "a", i as i64, Some(n.as_str())))
        .collect();
    f.publish("wide", "2024-01-01/2024-01-02", &rows).await;
    f.publish(
        "narrow",
        "2024-01-02/2024-01-03",
        &[("2024-01-02T01:00:00Z", "a", 5, Some("#en"))],
    )
    .await;
    let sql = "SELECT COUNT(*), SUM(s) FROM (SELECT channel, SUM(added) AS s FROM rt \
               GROUP BY channel)";
    assert!(!plan(&f, sql).await.contains("DictionaryGroupAggregateExec"));
    assert_eq!(
        f.query(sql).await.unwrap(),
        vec![vec!["3001".to_string(), "4498505".to_string()]]
    );
    // The low-cardinality segment alone is rewritten.
    let day2 = "SELECT channel, SUM(added) FROM rt WHERE __time >= TIMESTAMP '2024-01-02 00:00:00' \
                GROUP BY channel";
    let p = plan(&f, day2).await;
    assert!(p.contains("DictionaryGroupAggregateExec"), "{p}");
    assert_eq!(
        f.query(day2).await.unwrap(),
        vec![vec!["#en".to_string(), "5".to_string()]]
    );
}

/// The rows of `sql` with `useApproximateCountDistinct` off.
async fn exact(f: &Fixture, sql: &str) -> Vec<Vec<String>> {
    let context = serde_json::json!({"useApproximateCountDistinct": false});
    f.query_with(sql, context.as_object().cloned())
        .await
        .unwrap()
}

#[tokio::test]
async fn distinct_counts_read_the_value_indexes_built_with_the_segments() {
    let f = Fixture::new().await;
    f.publish(
        "d1",
        "2024-01-01/2024-01-02",
        &[
            ("2024-01-01T01:00:00Z", "a", 1, Some("#en")),
            ("2024-01-01T02:00:00Z", "b", 2, Some("#fr")),
            ("2024-01-01T03:00:00Z", "a", 3, None),
        ],
    )
    .await;
    f.publish(
        "d2",
        "2024-01-02/2024-01-03",
        &[
            ("2024-01-02T01:00:00Z", "c", 10, Some("#de")),
            ("2024-01-02T02:00:00Z", "a", 20, Some("#en")),
        ],
    )
    .await;
    // No channel column at all: its rows are nulls.
    f.publish(
        "d3",
        "2024-01-03/2024-01-04",
        &[("2024-01-03T01:00:00Z", "z", 100, None)],
    )
    .await;
    let distinct = "SELECT COUNT(DISTINCT channel), COUNT(DISTINCT page) FROM rt";
    let approx = "SELECT APPROX_COUNT_DISTINCT(channel) FROM rt";
    let listing = "SELECT DISTINCT channel FROM rt ORDER BY channel";
    let rows = |v: &[&[&str]]| -> Vec<Vec<String>> {
        v.iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect()
    };
    // The indexes were built with the segments (sidecars): the first query reads them.
    assert!(plan(&f, listing).await.contains("DistinctValuesExec"));
    assert_eq!(
        f.query(listing).await.unwrap(),
        rows(&[&["null"], &["#de"], &["#en"], &["#fr"]])
    );
    assert_eq!(exact(&f, distinct).await, rows(&[&["3", "4"]]));
    assert!(plan(&f, approx).await.contains("DistinctValuesExec"));
    assert_eq!(f.query(approx).await.unwrap(), rows(&[&["3"]]));
    // Same answers through the row scan.
    assert_eq!(
        f.query("SELECT APPROX_COUNT_DISTINCT(channel || '') FROM rt")
            .await
            .unwrap(),
        rows(&[&["3"]])
    );
    // An expression of the column, which DataFusion projects inside the scan
    // (`upper(channel) AS EXPR$0`), reads rows: the scan's output is not a file column.
    let expression = "SELECT DISTINCT UPPER(channel) FROM rt ORDER BY 1";
    assert!(!plan(&f, expression).await.contains("DistinctValuesExec"));
    assert_eq!(
        f.query(expression).await.unwrap(),
        rows(&[&["null"], &["#DE"], &["#EN"], &["#FR"]])
    );
    // A time filter keeps the row scan.
    let filtered = "SELECT DISTINCT channel FROM rt WHERE __time >= TIMESTAMP '2024-01-02 00:00:00' \
                    ORDER BY channel";
    assert!(!plan(&f, filtered).await.contains("DistinctValuesExec"));
    assert_eq!(
        f.query(filtered).await.unwrap(),
        rows(&[&["null"], &["#de"], &["#en"]])
    );
}
