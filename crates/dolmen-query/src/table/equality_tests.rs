//! `string_column = 'literal'` filters answered by the scan (`Exact` pushdown): from sorted
//! value indexes without reading the column, with a filter inside the scan where an index
//! only narrows (hash indexes) or is missing (hydrants).

use std::collections::HashMap;

use dolmen_segment::value_index::value_hash;

use super::realtime_tests::{Fixture, Row};

fn rows(v: &[&[&str]]) -> Vec<Vec<String>> {
    v.iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[tokio::test]
async fn sorted_indexes_answer_equalities_without_reading_the_column() {
    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[
            ("2024-01-01T01:00:00Z", "a", 1, Some("#en")),
            ("2024-01-01T02:00:00Z", "b", 2, Some("#fr")),
            ("2024-01-01T03:00:00Z", "a", 3, None),
            ("2024-01-01T04:00:00Z", "c", 4, Some("#en")),
        ],
    )
    .await;
    f.publish(
        "day2",
        "2024-01-02/2024-01-03",
        &[
            ("2024-01-02T01:00:00Z", "a", 10, Some("#de")),
            ("2024-01-02T02:00:00Z", "d", 20, Some("#en")),
        ],
    )
    .await;
    let sql = "SELECT page, SUM(added) AS s FROM rt WHERE channel = '#en' GROUP BY page \
               ORDER BY page";
    assert_eq!(
        f.query(sql).await.unwrap(),
        rows(&[&["a", "1"], &["c", "4"], &["d", "20"]])
    );
    let plan = f.explain(sql).await;
    assert!(!plan.contains("FilterExec"), "{plan}");
    assert!(plan.contains("projection=[page, added]"), "{plan}");
    // Aggregation by dictionary id under a filter that removes every row of some values:
    // those values are not groups.
    assert_eq!(
        f.query("SELECT channel, COUNT(*) FROM rt WHERE added > 3 GROUP BY channel ORDER BY 1")
            .await
            .unwrap(),
        rows(&[&["#de", "1"], &["#en", "2"]])
    );
    // Counted from the selected rows; a value no segment holds reads nothing.
    assert_eq!(
        f.query("SELECT COUNT(*) FROM rt WHERE channel = '#en'")
            .await
            .unwrap(),
        rows(&[&["3"]])
    );
    assert_eq!(
        f.query("SELECT COUNT(*), SUM(added) FROM rt WHERE channel = '#xx'")
            .await
            .unwrap(),
        rows(&[&["0", "null"]])
    );
    // With another filter, and a second equality on another column.
    assert_eq!(
        f.query(
            "SELECT page, added FROM rt WHERE channel = '#en' AND page = 'a' AND added > 0 \
             ORDER BY added"
        )
        .await
        .unwrap(),
        rows(&[&["a", "1"]])
    );
    // A literal on the left; an OR is not an equality the scan answers.
    assert_eq!(
        f.query("SELECT COUNT(*) FROM rt WHERE '#de' = channel OR channel = '#fr'")
            .await
            .unwrap(),
        rows(&[&["2"]])
    );
}

#[tokio::test]
async fn hydrants_and_files_without_the_column_apply_the_equality_themselves() {
    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[
            ("2024-01-01T01:00:00Z", "a", 1, Some("#en")),
            ("2024-01-01T02:00:00Z", "b", 2, Some("#fr")),
        ],
    )
    .await;
    // No row has a channel: the file has no such column.
    f.publish(
        "day2",
        "2024-01-02/2024-01-03",
        &[("2024-01-02T01:00:00Z", "e", 100, None)],
    )
    .await;
    let h = f.hydrant(
        "h1",
        1,
        &[
            ("2024-01-04T00:10:00Z", "a", 1000, Some("#fr")),
            ("2024-01-04T00:20:00Z", "f", 2000, Some("#ja")),
        ],
    );
    f.view.add_hydrants("rt", "sup/0/0", "task-a", vec![h]);
    let sql = "SELECT page, SUM(added) FROM rt WHERE channel = '#fr' GROUP BY page ORDER BY page";
    assert_eq!(
        f.query(sql).await.unwrap(),
        rows(&[&["a", "1000"], &["b", "2"]])
    );
    assert_eq!(
        f.query("SELECT page FROM rt WHERE channel = '#fr' ORDER BY __time LIMIT 1")
            .await
            .unwrap(),
        rows(&[&["b"]])
    );
}

/// Two different strings with the same 32-bit value hash.
fn colliding_pair() -> (String, String) {
    let mut seen: HashMap<u32, String> = HashMap::new();
    for i in 0.. {
        let v = format!("c{i}");
        if let Some(other) = seen.insert(value_hash(&v), v.clone()) {
            return (other, v);
        }
    }
    unreachable!()
}

#[tokio::test]
async fn a_hash_index_collision_never_returns_the_other_value() {
    let (x, y) = colliding_pair();
    assert_ne!(x, y);
    assert_eq!(value_hash(&x), value_hash(&y));
    let f = Fixture::new().await;
    // Near-unique pages: the segment's `page` index is a hash index.
    let mut pages: Vec<String> = (0..3000).map(|i| format!("p{i}")).collect();
    pages.extend([x.clone(), y.clone(), y.clone()]);
    let data: Vec<Row<'_>> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| ("2024-01-01T01:00:00Z", p.as_str(), i as i64, Some("#en")))
        .collect();
    f.publish("day1", "2024-01-01/2024-01-02", &data).await;
    let q = |v: &str| format!("SELECT page, COUNT(*) FROM rt WHERE page = '{v}' GROUP BY page");
    assert_eq!(f.query(&q(&x)).await.unwrap(), rows(&[&[&x, "1"]]));
    assert_eq!(f.query(&q(&y)).await.unwrap(), rows(&[&[&y, "2"]]));
    assert_eq!(
        f.query(&format!("SELECT COUNT(*) FROM rt WHERE page = '{x}'"))
            .await
            .unwrap(),
        rows(&[&["1"]])
    );
    assert_eq!(
        f.query(&format!(
            "SELECT added FROM rt WHERE page = '{x}' AND channel = '#en'"
        ))
        .await
        .unwrap(),
        rows(&[&["3000"]])
    );
}
