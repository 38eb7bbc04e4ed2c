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
/// the null cities get row numbers 1..6), and rejects the other placements
/// (`DruidSqlValidator.validateCall`).
#[tokio::test]
async fn nulls_sort_first_ascending_and_last_descending() {
    let f = Fixture::new().await;
    let values = "(VALUES (1), (NULL), (0)) t(x)";
    for (order, want) in [
        ("x", ["null", "0", "1"]),
        ("x ASC", ["null", "0", "1"]),
        ("x NULLS FIRST", ["null", "0", "1"]),
        ("x DESC", ["1", "0", "null"]),
        ("x DESC NULLS LAST", ["1", "0", "null"]),
    ] {
        let sql = format!("SELECT x FROM {values} ORDER BY {order}");
        assert_eq!(column(&f, &sql).await, want, "{sql}");
    }
    for order in ["x NULLS LAST", "x DESC NULLS FIRST"] {
        let sql = format!("SELECT x FROM {values} ORDER BY {order}");
        let e = f.query(&sql).await.unwrap_err();
        assert!(e.contains("is not supported!"), "{sql}: {e}");
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

/// Without `ORDER BY`, a scan returns the segments in time order and each segment's rows in
/// its (time) order, as Druid's scan query does (`ScanQueryRunnerFactory` concatenates the
/// segments the timeline lists by interval), so `LIMIT 1` is the earliest row. Aggregations
/// keep reading every partition at once.
#[tokio::test]
async fn plain_scans_return_rows_in_time_order() {
    let f = Fixture::new().await;
    // Eight day segments published out of order, two rows each.
    for day in [5, 2, 8, 1, 7, 3, 6, 4] {
        let t1 = format!("2024-01-0{day}T01:00:00Z");
        let t2 = format!("2024-01-0{day}T02:00:00Z");
        let page = format!("p{day}");
        f.publish(
            &format!("day{day}"),
            &format!("2024-01-0{day}/2024-01-0{}", day + 1),
            &[(&t1, &page, day, None), (&t2, &page, day, None)],
        )
        .await;
    }
    let pages = column(&f, "SELECT page FROM rt").await;
    let want: Vec<String> = (1..=8)
        .flat_map(|d| [format!("p{d}"), format!("p{d}")])
        .collect();
    assert_eq!(pages, want);
    assert_eq!(column(&f, "SELECT page FROM rt LIMIT 1").await, ["p1"]);
    assert_eq!(
        column(&f, "SELECT added FROM rt WHERE added > 2 LIMIT 3").await,
        ["3", "3", "4"]
    );
    assert_eq!(
        column(
            &f,
            "SELECT COUNT(*) FROM (SELECT page FROM rt LIMIT 5) WHERE page = 'p3'"
        )
        .await,
        ["1"]
    );
    let text = f
        .explain("SELECT page, SUM(added) FROM rt GROUP BY page")
        .await;
    assert!(!text.contains("OrderedConcatExec"), "{text}");
    let text = f.explain("SELECT page FROM rt LIMIT 1").await;
    assert!(text.contains("OrderedConcatExec"), "{text}");
}

/// Window frames as Druid reads them (`crate::frames`): the short form `ROWS n FOLLOWING` is
/// `BETWEEN CURRENT ROW AND n FOLLOWING` (Calcite's `SqlWindow.create`), an empty frame aggregates no row (COUNT 0, SUM null;
/// Druid's `past_and_future_frames.sqlTest`: `0 = COUNT(1) OVER (.. ROWS BETWEEN 2 FOLLOWING
/// AND 1 FOLLOWING)`), an unbounded lower end is the partition's start; frames DataFusion
/// already takes keep their values (`allBoundsCombination.sqlTest`'s shapes).
#[tokio::test]
async fn window_frames_read_as_druid_reads_them() {
    let f = Fixture::new().await;
    let values = "(VALUES (1), (2), (3)) t(x)";
    let rows = |sql: String| {
        let f = &f;
        async move { f.query(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")) }
    };
    let got = rows(format!(
        "SELECT x, COUNT(x) OVER (ORDER BY x ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) AS c, \
                SUM(x) OVER (ORDER BY x ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) AS s, \
                COUNT(*) OVER (ORDER BY x ROWS BETWEEN 0 PRECEDING AND 1 PRECEDING) AS c2, \
                MAX(x) OVER (ORDER BY x ROWS BETWEEN 2 FOLLOWING AND 1 FOLLOWING) AS m, \
                ROW_NUMBER() OVER (ORDER BY x ROWS BETWEEN 2 FOLLOWING AND 1 FOLLOWING) AS r \
         FROM {values} ORDER BY x"
    ))
    .await;
    assert_eq!(
        got,
        [
            ["1", "0", "null", "0", "null", "1"],
            ["2", "0", "null", "0", "null", "2"],
            ["3", "0", "null", "0", "null", "3"],
        ]
    );
    let got = rows(format!(
        "SELECT x, SUM(x) OVER (ORDER BY x RANGE UNBOUNDED FOLLOWING) AS s, \
                COUNT(x) OVER (ORDER BY x ROWS 1 FOLLOWING) AS f, \
                COUNT(*) OVER (ORDER BY x ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS c1, \
                COUNT(*) OVER (ORDER BY x ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS c5, \
                COUNT(*) OVER (ORDER BY x ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS c10 \
         FROM {values} ORDER BY x"
    ))
    .await;
    assert_eq!(
        got,
        [
            ["1", "6", "2", "0", "0", "2"],
            ["2", "5", "2", "1", "1", "1"],
            ["3", "3", "1", "2", "2", "0"],
        ]
    );
}

/// Calcite's coercions with Druid's casts (`crate::coercion`): `COALESCE(null, null, 5,
/// 'abc')` is 5; `NULLIF(a, b)` is `CASE WHEN a = b THEN NULL ELSE a END`, typed as `a`
/// (`SqlNullifFunction`), so a string compared with a number does not fail at run time; mixed
/// `IS [NOT] DISTINCT FROM` compares the string as a number, NULL when it is none
/// (`sql-data-types.md`: a value that cannot be cast is NULL).
#[tokio::test]
async fn mixed_types_coerce_as_calcite_with_druid_casts() {
    let f = Fixture::new().await;
    let got = f
        .query(
            "SELECT COALESCE(null, null, 5, 'abc') AS a, NULLIF('a', 1) AS b, \
                    NULLIF('1', 1) AS c, NULLIF(x, 2) AS d, \
                    x IS DISTINCT FROM 'a' AS e, x IS NOT DISTINCT FROM '1' AS g, \
                    CAST('foo' AS BIGINT) AS h \
             FROM (VALUES (1)) t(x)",
        )
        .await
        .unwrap();
    assert_eq!(got, [["5", "a", "null", "1", "true", "true", "null"]]);
}
