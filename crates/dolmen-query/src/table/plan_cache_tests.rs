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

/// Replaces the fixture's `pages` lookup with `pairs`.
fn set_pages(f: &Fixture, pairs: &[(&str, &str)]) {
    let next = dolmen_lookup::LookupRegistry::from_maps([(
        "pages".to_string(),
        dolmen_lookup::LookupMap::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            false,
        ),
    )]);
    f.lookups.replace((*next.snapshot()).clone());
}

#[tokio::test]
async fn lookup_queries_are_never_cached_and_see_changes_at_once() {
    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[
            ("2024-01-01T01:00:00Z", "a", 1, None),
            ("2024-01-01T02:00:00Z", "b", 2, None),
            ("2024-01-01T03:00:00Z", "c", 4, None),
        ],
    )
    .await;
    let by_name = "SELECT LOOKUP(page, 'pages', 'other') AS name, SUM(added) FROM rt \
                   GROUP BY 1 ORDER BY 1";
    let scan = "SELECT k, v FROM lookup.pages ORDER BY k";
    let join = "SELECT l.v, SUM(rt.added) FROM rt JOIN lookup.pages l ON rt.page = l.k \
                GROUP BY 1 ORDER BY 1";
    // Constant arguments: the optimizer folds the call into a literal, which a cached plan
    // would keep after the lookup changed.
    let folded = "SELECT LOOKUP('a', 'pages')";
    for _ in 0..2 {
        assert_eq!(f.one(folded).await, "Page A");
        assert_eq!(
            f.query(by_name).await.unwrap(),
            vec![vec!["Page A", "1"], vec!["Page B", "2"], vec!["other", "4"]]
        );
        assert_eq!(
            f.query(scan).await.unwrap(),
            vec![vec!["a", "Page A"], vec!["b", "Page B"]]
        );
        assert_eq!(
            f.query(join).await.unwrap(),
            vec![vec!["Page A", "1"], vec!["Page B", "2"]]
        );
    }
    assert_eq!(
        f.engine.cached_plans(),
        0,
        "plans calling LOOKUP or scanning lookup tables are not cached"
    );

    // A changed lookup is read by the very next query, with the same SQL text.
    set_pages(&f, &[("a", "A2"), ("c", "C2")]);
    assert_eq!(f.one(folded).await, "A2");
    assert_eq!(
        f.query(by_name).await.unwrap(),
        vec![vec!["A2", "1"], vec!["C2", "4"], vec!["other", "2"]]
    );
    assert_eq!(
        f.query(scan).await.unwrap(),
        vec![vec!["a", "A2"], vec!["c", "C2"]]
    );
    assert_eq!(
        f.query(join).await.unwrap(),
        vec![vec!["A2", "1"], vec!["C2", "4"]]
    );
    // A query without lookups beside them is still cached.
    f.query("SELECT COUNT(*) FROM rt").await.unwrap();
    assert_eq!(f.engine.cached_plans(), 1);

    // A removed lookup is a planning error in Druid's words, in both forms.
    f.lookups.replace(Default::default());
    let e = f.query(by_name).await.unwrap_err();
    assert_eq!(e, "Lookup [pages] not found");
    let e = f.query(scan).await.unwrap_err();
    assert!(e.contains("pages"), "{e}");
}

#[tokio::test]
async fn lookup_parameters_are_bound_before_the_name_is_checked() {
    use crate::engine::{SqlParameter, SqlQuery};
    use futures::TryStreamExt;

    let f = Fixture::new().await;
    let run = |name: &str| {
        let q = SqlQuery {
            query: "SELECT LOOKUP('a', ?)".to_string(),
            parameters: Some(vec![SqlParameter {
                sql_type: "VARCHAR".into(),
                value: serde_json::json!(name),
            }]),
            ..SqlQuery::default()
        };
        let engine = &f.engine;
        async move {
            let r = engine.execute(&q).await.map_err(|e| e.to_string())?;
            let batches: Vec<_> = r.stream.try_collect().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(
                arrow::util::pretty::pretty_format_batches(&batches)
                    .unwrap()
                    .to_string(),
            )
        }
    };
    assert!(run("pages").await.unwrap().contains("Page A"));
    assert_eq!(run("nope").await.unwrap_err(), "Lookup [nope] not found");
}

#[tokio::test]
async fn results_name_the_datasources_read_and_the_planning_time() {
    use crate::engine::SqlQuery;
    let f = Fixture::new().await;
    f.publish(
        "day1",
        "2024-01-01/2024-01-02",
        &[("2024-01-01T01:00:00Z", "a", 1, None)],
    )
    .await;
    let read = |sql: &str| {
        let q = SqlQuery {
            query: sql.to_string(),
            ..SqlQuery::default()
        };
        let engine = &f.engine;
        async move { engine.execute(&q).await.unwrap() }
    };
    for (sql, want) in [
        ("SELECT COUNT(*) FROM rt", vec!["rt"]),
        // Twice: the second run comes from the plan cache.
        ("SELECT COUNT(*) FROM rt", vec!["rt"]),
        (
            "SELECT a.page FROM rt a JOIN druid.rt b ON a.page = b.page",
            vec!["rt"],
        ),
        (
            "SELECT COUNT(*) FROM rt WHERE page IN (SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES)",
            vec!["rt"],
        ),
        ("SELECT 1", vec![]),
        ("SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES", vec![]),
        ("EXPLAIN PLAN FOR SELECT COUNT(*) FROM rt", vec!["rt"]),
    ] {
        let r = read(sql).await;
        assert_eq!(r.data_sources, want, "{sql}");
        assert!(r.planning > std::time::Duration::ZERO, "{sql}");
    }
}
