//! The plan cache ([`crate::plan_cache`]) in a real engine: repeated queries reuse their
//! plan, and every change of the segment view (publish, hydrants) is seen at once. Also the
//! sessions the engine derives for segment builds, which must plan like queries do.

use super::realtime_tests::Fixture;

#[tokio::test]
async fn a_cached_plan_is_reused_until_the_view_changes() {
    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[
            ("2024-01-01T01:00:00Z", "a", 1, None),
            ("2024-01-01T02:00:00Z", "b", 2, None),
        ],
    )
    .await;
    let count = "SELECT COUNT(*), SUM(added) FROM rt";
    assert_eq!(f.query(count).await.unwrap(), vec![vec!["2", "3"]]);
    assert_eq!(f.engine.cached_plans(), 1);
    assert_eq!(f.query(count).await.unwrap(), vec![vec!["2", "3"]]);
    assert_eq!(
        f.engine.cached_plans(),
        1,
        "the second run reuses the entry"
    );

    // A publish changes the view: the cached plan (holding the old timeline) must not serve.
    f.publish(
        "day2",
        "2024-01-02/2024-01-03",
        &[("2024-01-02T01:00:00Z", "c", 10, Some("#en"))],
    )
    .await;
    assert_eq!(f.query(count).await.unwrap(), vec![vec!["3", "13"]]);
    // The new column (from the new segment's schema) is visible to the same text too.
    assert_eq!(
        f.one("SELECT COUNT(channel) FROM rt").await,
        "1",
        "schema from the new snapshot"
    );

    // Hydrants of a streaming task change the view too.
    let h = f.hydrant("h1", 1, &[("2024-01-03T00:00:00Z", "a", 100, None)]);
    f.view.add_hydrants("rt", "sup/0/0", "task-a", vec![h]);
    assert_eq!(f.query(count).await.unwrap(), vec![vec!["4", "113"]]);
    f.view.drop_task_hydrants("rt", "task-a");
    assert_eq!(f.query(count).await.unwrap(), vec![vec!["3", "13"]]);
}

#[tokio::test]
async fn time_dependent_and_system_table_queries_are_not_cached() {
    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[("2024-01-01T01:00:00Z", "a", 1, None)],
    )
    .await;
    for sql in [
        "SELECT COUNT(*) FROM rt WHERE __time < CURRENT_TIMESTAMP",
        "SELECT CURRENT_TIMESTAMP",
        "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES",
        "SELECT COUNT(*) FROM rt WHERE page IN (SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES)",
        "EXPLAIN PLAN FOR SELECT COUNT(*) FROM rt",
    ] {
        f.query(sql).await.unwrap();
        assert_eq!(f.engine.cached_plans(), 0, "{sql} was cached");
    }
    // CURRENT_TIMESTAMP is the time of each query, not of the first.
    let first = f.one("SELECT TIMESTAMP_TO_MILLIS(CURRENT_TIMESTAMP)").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = f.one("SELECT TIMESTAMP_TO_MILLIS(CURRENT_TIMESTAMP)").await;
    assert!(second.parse::<i64>().unwrap() > first.parse::<i64>().unwrap());
}

#[tokio::test]
async fn the_key_covers_parameters_and_planning_context() {
    use crate::engine::{SqlParameter, SqlQuery};
    use futures::TryStreamExt;

    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[
            ("2024-01-01T01:00:00Z", "a", 1, None),
            ("2024-01-01T23:30:00Z", "b", 2, None),
        ],
    )
    .await;
    let run = |query: &str, parameters: Option<Vec<SqlParameter>>, context: serde_json::Value| {
        let q = SqlQuery {
            query: query.to_string(),
            parameters,
            context: context.as_object().cloned(),
            ..SqlQuery::default()
        };
        let engine = &f.engine;
        async move {
            let r = engine.execute(&q).await.unwrap();
            let batches: Vec<_> = r.stream.try_collect().await.unwrap();
            arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string()
        }
    };
    let by_page = "SELECT SUM(added) FROM rt WHERE page = ?";
    let p = |v: &str| {
        Some(vec![SqlParameter {
            sql_type: "VARCHAR".into(),
            value: serde_json::json!(v),
        }])
    };
    let a = run(by_page, p("a"), serde_json::json!({})).await;
    let b = run(by_page, p("b"), serde_json::json!({})).await;
    assert!(a.contains("| 1 "), "{a}");
    assert!(b.contains("| 2 "), "{b}");
    // The day of 23:30 UTC depends on sqlTimeZone.
    let days = "SELECT COUNT(DISTINCT TIME_FLOOR(__time, 'P1D')) FROM rt";
    let utc = run(days, None, serde_json::json!({})).await;
    let la = run(days, None, serde_json::json!({"sqlTimeZone": "Asia/Tokyo"})).await;
    assert!(utc.contains("| 1 "), "{utc}");
    assert!(la.contains("| 2 "), "{la}");
    let limited = run(
        "SELECT page FROM rt",
        None,
        serde_json::json!({"sqlOuterLimit": 1}),
    )
    .await;
    let all = run("SELECT page FROM rt", None, serde_json::json!({})).await;
    assert_eq!(limited.lines().count() + 1, all.lines().count());
}

/// A segment build's session (SQL-based ingestion) must resolve every function name to the
/// same implementation as queries do: rebuilding a session state re-registers functions
/// under their aliases, which could put a DataFusion built-in back over a Druid override.
#[tokio::test]
async fn build_sessions_keep_the_druid_function_overrides() {
    let f = Fixture::new().await;
    let build = f
        .engine
        .build_session(1, 64 << 20, f.dir.path())
        .expect("build session");
    let query = f.engine.state_for_tests();
    let build = build.state();
    let mut checked = 0;
    let mut different = Vec::new();
    for (name, udf) in query.scalar_functions() {
        let other = build
            .scalar_functions()
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from the build session"));
        // Same implementation type and name (instances may be re-created: Dolmen's are
        // registered again, DataFusion re-creates its time-zone-aware ones).
        let kind = |u: &datafusion::logical_expr::ScalarUDF| {
            let inner: &dyn std::any::Any = u.inner().as_ref();
            (inner.type_id(), u.name().to_string())
        };
        if kind(udf) != kind(other) {
            different.push(name.clone());
        }
        checked += 1;
    }
    different.sort();
    assert!(
        different.is_empty(),
        "the build session resolves these to other implementations: {different:?}"
    );
    assert!(checked > 100, "{checked}");
}
