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

/// `IS [NOT] DISTINCT FROM` binds like a comparison, tighter than `AND`/`OR` (Calcite's
/// `SqlStdOperatorTable.IS_NOT_DISTINCT_FROM`, precedence 30 against `AND`'s 24), so this
/// query of the held-out suite returns its row instead of failing to plan.
#[tokio::test]
async fn is_distinct_from_binds_like_a_comparison() {
    let f = Fixture::new().await;
    for (sql, want) in [
        (
            "SELECT 1 WHERE 1 IS NOT DISTINCT FROM 1 AND 2 <> 3",
            vec!["1"],
        ),
        ("SELECT 1 WHERE 1 IS DISTINCT FROM 1 AND 2 <> 3", vec![]),
        ("SELECT 1 WHERE 1 IS DISTINCT FROM 2 OR 1 = 0", vec!["1"]),
        (
            "SELECT 1 WHERE NULL IS NOT DISTINCT FROM NULL AND NOT 1 IS NULL",
            vec!["1"],
        ),
        ("SELECT 1 IS NOT DISTINCT FROM 0 + 1 AND TRUE", vec!["true"]),
    ] {
        assert_eq!(column(&f, sql).await, want, "{sql}");
    }
}

/// Druid's niladic functions: `PI` (in `DruidOperatorTable`) and Calcite's time functions of
/// `DruidConvertletTable` (`CURRENT_TIMESTAMP`, `CURRENT_TIME`, `CURRENT_DATE`,
/// `LOCALTIMESTAMP`, `LOCALTIME`), written without parentheses. `USER` is not one of them:
/// `user` is a column.
#[tokio::test]
async fn niladic_functions_and_user_as_a_column() {
    let f = Fixture::new().await;
    assert_eq!(column(&f, "SELECT PI").await, ["3.141592653589793"]);
    assert_eq!(column(&f, "SELECT ROUND(pi * 2, 2)").await, ["6.28"]);
    assert_eq!(
        column(
            &f,
            "SELECT CURRENT_TIMESTAMP IS NOT NULL AND LOCALTIMESTAMP IS NOT NULL \
                    AND CURRENT_DATE IS NOT NULL AND LOCALTIME IS NOT NULL \
                    AND CURRENT_TIME IS NOT NULL"
        )
        .await,
        ["true"]
    );
    // LOCALTIMESTAMP is CURRENT_TIMESTAMP; CURRENT_DATE its day.
    assert_eq!(
        column(
            &f,
            "SELECT TIME_FLOOR(LOCALTIMESTAMP, 'P1D') = CAST(CURRENT_DATE AS TIMESTAMP)"
        )
        .await,
        ["true"]
    );
    assert_eq!(
        column(&f, "SELECT user FROM (VALUES ('u1')) t(\"user\")").await,
        ["u1"]
    );
    assert_eq!(
        column(&f, "SELECT t.user FROM (VALUES ('u2')) t(\"user\")").await,
        ["u2"]
    );
    let e = f.query("SELECT user").await.unwrap_err();
    assert!(e.contains("user"), "{e}");
}
