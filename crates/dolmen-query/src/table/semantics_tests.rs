//! Druid SQL semantics in a real engine (issue 19): where DataFusion's defaults differ from
//! Druid's, the engine answers as Druid does. Each test names the Druid source it follows.

use super::realtime_tests::Fixture;

/// The single column of `sql`'s rows.
async fn column(f: &Fixture, sql: &str) -> Vec<String> {
    f.query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

/// Druid sorts NULL first ascending and last descending (`calcite/tests/window/
/// orderByDescNulls.sqlTest`: `ORDER BY cityName NULLS FIRST` is a plain ascending sort, and
/// the null cities get row numbers 1..6); explicit `NULLS FIRST` / `NULLS LAST` win.
#[tokio::test]
async fn nulls_sort_first_ascending_and_last_descending() {
    let f = Fixture::new().await;
    let values = "(VALUES (1), (NULL), (0)) t(x)";
    for (order, want) in [
        ("x", ["null", "0", "1"]),
        ("x ASC", ["null", "0", "1"]),
        ("x DESC", ["1", "0", "null"]),
        ("x NULLS LAST", ["0", "1", "null"]),
        ("x DESC NULLS FIRST", ["null", "1", "0"]),
    ] {
        let sql = format!("SELECT x FROM {values} ORDER BY {order}");
        assert_eq!(column(&f, &sql).await, want, "{sql}");
    }
    // Window ordering too: the null row is numbered first ascending, last descending.
    let sql = format!(
        "SELECT ROW_NUMBER() OVER (ORDER BY x) AS a, ROW_NUMBER() OVER (ORDER BY x DESC) AS d \
         FROM {values} WHERE x IS NULL OR x IS NOT NULL ORDER BY x"
    );
    let rows = f.query(&sql).await.unwrap();
    assert_eq!(rows[0], ["1", "3"], "{sql}: the null row");
    // A window over the unordered input gets the same order as the query's own ORDER BY.
    let sql = format!("SELECT x, RANK() OVER (ORDER BY x) AS r FROM {values} ORDER BY r");
    assert_eq!(
        f.query(&sql).await.unwrap(),
        [["null", "1"], ["0", "2"], ["1", "3"]]
    );
}
