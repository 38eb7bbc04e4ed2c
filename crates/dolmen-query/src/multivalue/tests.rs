//! Tests of [`super`]: the analyzer rule and the mapping of expressions over multi-value columns.

use super::*;
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, ListBuilder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};

fn ctx() -> SessionContext {
    let config =
        SessionConfig::new().set_bool("datafusion.sql_parser.enable_ident_normalization", false);
    let mut rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = vec![Arc::new(MultiValueRule)];
    rules.extend(datafusion::optimizer::Analyzer::new().rules);
    let state = datafusion::execution::SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rules(rules)
        .build();
    let ctx = SessionContext::new_with_state(state);
    crate::functions::register_druid_functions(&ctx);
    let multi_value = |name: &str| {
        Field::new(name, dolmen_segment::multi_value_string_type(), true).with_metadata(
            HashMap::from([(
                dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
                "true".to_string(),
            )]),
        )
    };
    let schema = Arc::new(Schema::new(vec![
        multi_value("tags"),
        Field::new("n", DataType::Int64, true),
        Field::new("dim", DataType::Utf8, true),
        multi_value("more"),
    ]));
    // `None` is a null row.
    let list = |rows: &[Option<&[&str]>]| {
        let mut b = ListBuilder::new(StringBuilder::new());
        for row in rows {
            match row {
                Some(values) => {
                    for v in *values {
                        b.values().append_value(v);
                    }
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        b.finish()
    };
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(list(&[
                Some(&["a", "b"]),
                Some(&["b", "c"]),
                Some(&[]),
                Some(&["a"]),
                None,
            ])),
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
            Arc::new(arrow::array::StringArray::from(vec![
                "x", "y", "x", "y", "x",
            ])),
            Arc::new(list(&[
                Some(&["u", "v"]),
                Some(&["c", "w"]),
                None,
                Some(&[]),
                Some(&["u"]),
            ])),
        ],
    )
    .unwrap();
    ctx.register_table(
        "t",
        Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
    )
    .unwrap();
    ctx
}

/// Rows of `sql` planned by DataFusion alone, every cell cast to text (`null` for nulls).
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    text_rows(batches)
}

/// Rows of `sql` planned as the engine plans it ([`crate::rewrite::plan_sql`]: the AST
/// rewrites, [`map_multi_value_expressions`] among them), as text.
async fn planned_rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let df = crate::rewrite::plan_sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    text_rows(df.collect().await.unwrap())
}

fn text_rows(batches: Vec<RecordBatch>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| {
                        if c.is_null(r) {
                            "null".to_string()
                        } else {
                            let s = arrow::compute::cast(c, &DataType::Utf8).unwrap();
                            s.as_string::<i32>().value(r).to_string()
                        }
                    })
                    .collect(),
            );
        }
    }
    out
}

// Rows (tags, n, dim, more): [a, b] 1 x [u, v]; [b, c] 2 y [c, w]; [] 3 x null; [a] 4 y [];
// null 5 x [u].

#[tokio::test]
async fn group_by_unnests_values_and_empty_rows_group_as_null() {
    let ctx = ctx();
    assert_eq!(
        rows(
            &ctx,
            "SELECT tags, COUNT(*), SUM(n) FROM t GROUP BY tags ORDER BY tags NULLS FIRST"
        )
        .await,
        vec![
            vec!["null", "2", "8"],
            vec!["a", "2", "5"],
            vec!["b", "2", "3"],
            vec!["c", "1", "2"],
        ]
    );
    // A filter keeps whole rows: row 1 matches `a` and still groups under `b` too.
    assert_eq!(
        rows(
            &ctx,
            "SELECT tags, COUNT(*) FROM t WHERE tags = 'a' GROUP BY tags ORDER BY tags"
        )
        .await,
        vec![vec!["a", "2"], vec!["b", "1"]]
    );
}

#[tokio::test]
async fn several_multi_value_keys_group_by_every_combination() {
    let ctx = ctx();
    assert_eq!(
        rows(
            &ctx,
            "SELECT tags, MV_FILTER_ONLY(tags, ARRAY['a', 'b']) AS f, COUNT(*) AS c FROM t \
             GROUP BY 1, 2 ORDER BY 1 NULLS FIRST, 2 NULLS FIRST"
        )
        .await,
        vec![
            vec!["null", "null", "2"],
            vec!["a", "a", "2"],
            vec!["a", "b", "1"],
            vec!["b", "a", "1"],
            vec!["b", "b", "2"],
            vec!["c", "b", "1"],
        ]
    );
}

#[tokio::test]
async fn group_by_multi_value_expressions_unnests_their_values() {
    let ctx = ctx();
    assert_eq!(
        rows(
            &ctx,
            "SELECT MV_FILTER_ONLY(tags, ARRAY['a', 'c']) AS f, COUNT(*) AS c FROM t \
             GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        vec![vec!["null", "2"], vec!["a", "2"], vec!["c", "1"]]
    );
    assert_eq!(
        rows(
            &ctx,
            "SELECT STRING_TO_MV('x,y', ','), SUM(n) FROM t GROUP BY 1 ORDER BY 1"
        )
        .await,
        vec![vec!["x", "15"], vec!["y", "15"]]
    );
}

#[tokio::test]
async fn filters_match_any_value() {
    let ctx = ctx();
    let ns = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            rows(&ctx, sql)
                .await
                .into_iter()
                .map(|r| r[0].clone())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ns("SELECT n FROM t WHERE tags = 'b' ORDER BY n").await,
        ["1", "2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE 'c' = tags ORDER BY n").await,
        ["2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags <> 'a' ORDER BY n").await,
        ["2", "3"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags IN ('c', 'a') ORDER BY n").await,
        ["1", "2", "4"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags NOT IN ('a') ORDER BY n").await,
        ["2", "3"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags IS NULL ORDER BY n").await,
        ["3", "5"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags IS NOT NULL ORDER BY n").await,
        ["1", "2", "4"]
    );
    // Inside a subquery too.
    assert_eq!(
        ns("SELECT n FROM t WHERE n IN (SELECT n FROM t WHERE tags = 'c')").await,
        ["2"]
    );
}

/// `rows` as string literals, for comparisons.
fn table(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|c| c.to_string()).collect())
        .collect()
}

#[tokio::test]
async fn group_by_scalar_expression_maps_each_value() {
    let ctx = ctx();
    let expected = table(&[
        &["null", "2", "8"],
        &["A", "2", "5"],
        &["B", "2", "3"],
        &["C", "1", "2"],
    ]);
    // By ordinal, by the expression itself (repeated in the select list and ORDER BY) and
    // by alias: each value of a row is upper-cased and is a group of its own; empty and null
    // rows group as null.
    for sql in [
        "SELECT UPPER(tags), COUNT(*), SUM(n) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST",
        "SELECT UPPER(tags), COUNT(*), SUM(n) FROM t GROUP BY UPPER(tags) \
         ORDER BY UPPER(tags) NULLS FIRST",
        "SELECT UPPER(t.tags) AS u, COUNT(*), SUM(n) FROM t GROUP BY u ORDER BY u NULLS FIRST",
    ] {
        assert_eq!(planned_rows(&ctx, sql).await, expected, "{sql}");
    }
    // Named as Calcite names it.
    let df = crate::rewrite::plan_sql(&ctx, "SELECT UPPER(tags), COUNT(*) FROM t GROUP BY 1")
        .await
        .unwrap();
    let names: Vec<&str> = df
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["EXPR$0", "EXPR$1"]);
    let batches = df.collect().await.unwrap();
    assert_eq!(
        batches[0].schema().field(0).data_type(),
        &DataType::Utf8,
        "one value per group"
    );
    // HAVING on the key sees single values.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(tags) AS u, COUNT(*) FROM t GROUP BY 1 \
             HAVING UPPER(tags) <> 'A' ORDER BY 1"
        )
        .await,
        table(&[&["B", "2"], &["C", "1"]])
    );
    // A filter still matches whole rows before they are split into values.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(tags), COUNT(*) FROM t WHERE tags = 'a' GROUP BY 1 ORDER BY 1"
        )
        .await,
        table(&[&["A", "2"], &["B", "1"]])
    );
}

#[tokio::test]
async fn group_by_expression_with_a_literal_maps_each_value() {
    let ctx = ctx();
    let expected = table(&[&["null", "2"], &["a-x", "2"], &["b-x", "2"], &["c-x", "1"]]);
    for sql in [
        "SELECT CONCAT(tags, '-x') AS k, COUNT(*) FROM t GROUP BY CONCAT(tags, '-x') \
         ORDER BY k NULLS FIRST",
        // `||` is string concatenation of each value, not DataFusion's array append.
        "SELECT tags || '-x', COUNT(*) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST",
    ] {
        assert_eq!(planned_rows(&ctx, sql).await, expected, "{sql}");
    }
    // The empty row (n=3) and the null row (n=5) are one null group, not `-x`.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT CONCAT(tags, '-x'), SUM(n) FROM t GROUP BY 1 HAVING CONCAT(tags, '-x') \
             IS NULL"
        )
        .await,
        table(&[&["null", "8"]])
    );
}

#[tokio::test]
async fn group_by_mapped_expression_with_a_plain_dimension() {
    let ctx = ctx();
    // The expression also reads the row's plain column.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT dim, LOWER(CONCAT(tags, dim)) AS k, COUNT(*) FROM t \
             GROUP BY dim, LOWER(CONCAT(tags, dim)) ORDER BY 1, 2 NULLS FIRST"
        )
        .await,
        table(&[
            &["x", "null", "2"],
            &["x", "ax", "1"],
            &["x", "bx", "1"],
            &["y", "ay", "1"],
            &["y", "by", "1"],
            &["y", "cy", "1"],
        ])
    );
    // A row with two values counts once in each of its groups; aggregates over the
    // multi-value column itself still see the whole row.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT dim, UPPER(tags) AS u, COUNT(*), SUM(MV_LENGTH(tags)) FROM t \
             GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST"
        )
        .await,
        table(&[
            &["x", "null", "2", "0"],
            &["x", "A", "1", "2"],
            &["x", "B", "1", "2"],
            &["y", "A", "1", "1"],
            &["y", "B", "1", "2"],
            &["y", "C", "1", "2"],
        ])
    );
}

#[tokio::test]
async fn multi_value_and_array_functions_take_the_whole_row() {
    let ctx = ctx();
    // MV_* and ARRAY_* functions take the row's array: not mapped value by value.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(MV_TO_STRING(tags, ',')) AS s, COUNT(*) FROM t GROUP BY 1 \
             ORDER BY 1 NULLS FIRST"
        )
        .await,
        planned_rows(
            &ctx,
            "SELECT UPPER(ARRAY_TO_STRING(tags, ',')) AS s, COUNT(*) FROM t GROUP BY 1 \
             ORDER BY 1 NULLS FIRST"
        )
        .await
    );
    let joined = planned_rows(
        &ctx,
        "SELECT UPPER(MV_TO_STRING(tags, ',')) AS s, COUNT(*) FROM t GROUP BY 1 \
         ORDER BY 1 NULLS FIRST",
    )
    .await;
    assert!(
        joined.contains(&vec!["A,B".to_string(), "1".to_string()]),
        "{joined:?}"
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT MV_LENGTH(tags) + 1 AS l, COUNT(*) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        rows(
            &ctx,
            "SELECT MV_LENGTH(tags) + 1 AS l, COUNT(*) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await
    );
    // Next to a mapped key, MV_LENGTH still counts the whole row (a mapped MV_LENGTH would
    // be 1 for every value).
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(tags), MV_LENGTH(tags), COUNT(*) FROM t GROUP BY 1, 2 \
             ORDER BY 1 NULLS FIRST, 2 NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "null", "1"],
            &["null", "0", "1"],
            &["A", "1", "1"],
            &["A", "2", "1"],
            &["B", "2", "2"],
            &["C", "2", "1"],
        ])
    );
    // A multi-value result is still unnested as a multi-value column.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT MV_FILTER_ONLY(tags, ARRAY['a', 'c']) AS f, COUNT(*) FROM t \
             GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[&["null", "2"], &["a", "2"], &["c", "1"]])
    );
    // The plain column, through the same path.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, COUNT(*) FROM t GROUP BY tags ORDER BY tags NULLS FIRST"
        )
        .await,
        table(&[&["null", "2"], &["a", "2"], &["b", "2"], &["c", "1"]])
    );
}

/// Rows of `sql` planned as the engine plans it, rendered as Druid's `array` result format
/// (multi-value results as Druid's `SqlResults.coerce` writes a VARCHAR: one value as itself,
/// several as the JSON text of the list).
async fn druid_rows(ctx: &SessionContext, sql: &str) -> Vec<serde_json::Value> {
    use crate::writer::{ResultFormat, ResultWriter, column_infos, render_all};
    let df = crate::rewrite::plan_sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = df.collect().await.unwrap();
    let Some(first) = batches.first() else {
        return Vec::new();
    };
    let mut w = ResultWriter::new(
        ResultFormat::Array,
        column_infos(&first.schema()),
        false,
        false,
        false,
        dolmen_common::zone::Zone::Utc,
    );
    let out = render_all(&mut w, &batches).unwrap();
    match serde_json::from_slice(&out).unwrap() {
        serde_json::Value::Array(rows) => rows,
        other => panic!("{other}"),
    }
}

/// The planning error of `sql`, as text.
async fn plan_error(ctx: &SessionContext, sql: &str) -> String {
    match crate::rewrite::plan_sql(ctx, sql).await {
        Ok(_) => panic!("{sql}: planned"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn group_by_expression_over_two_columns_maps_every_combination() {
    let ctx = ctx();
    // Druid's cartesian_map (MultiValuedDimensionTest.testGroupByExpressionMultiMultiAutoAuto):
    // every value of `tags` with every value of `more`; a null or empty row is one null value,
    // and CONCAT with a null is null.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT CONCAT(tags, more) AS k, COUNT(*) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "3"],
            &["au", "1"],
            &["av", "1"],
            &["bc", "1"],
            &["bu", "1"],
            &["bv", "1"],
            &["bw", "1"],
            &["cc", "1"],
            &["cw", "1"],
        ])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags || '-' || more, SUM(n) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "12"],
            &["a-u", "1"],
            &["a-v", "1"],
            &["b-c", "2"],
            &["b-u", "1"],
            &["b-v", "1"],
            &["b-w", "2"],
            &["c-c", "2"],
            &["c-w", "2"],
        ])
    );
    // With a plain column too, captured per row.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT CONCAT(tags, more, dim), COUNT(*) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "3"],
            &["aux", "1"],
            &["avx", "1"],
            &["bcy", "1"],
            &["bux", "1"],
            &["bvx", "1"],
            &["bwy", "1"],
            &["ccy", "1"],
            &["cwy", "1"],
        ])
    );
    // One column twice is one mapping, not a product
    // (testGroupByExpressionMultiMultiAutoAutoDupeIdentifier).
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT CONCAT(tags, '-', tags), COUNT(*) FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[&["null", "2"], &["a-a", "2"], &["b-b", "2"], &["c-c", "1"]])
    );
}

#[tokio::test]
async fn select_distinct_groups_by_values() {
    let ctx = ctx();
    assert_eq!(
        planned_rows(&ctx, "SELECT DISTINCT tags FROM t ORDER BY 1 NULLS FIRST").await,
        table(&[&["null"], &["a"], &["b"], &["c"]])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT DISTINCT UPPER(tags) AS u FROM t ORDER BY u NULLS FIRST"
        )
        .await,
        table(&[&["null"], &["A"], &["B"], &["C"]])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT DISTINCT dim, tags FROM t ORDER BY 1, 2 NULLS FIRST"
        )
        .await,
        table(&[
            &["x", "null"],
            &["x", "a"],
            &["x", "b"],
            &["y", "a"],
            &["y", "b"],
            &["y", "c"],
        ])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT DISTINCT CONCAT(tags, more) FROM t ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[
            &["null"],
            &["au"],
            &["av"],
            &["bc"],
            &["bu"],
            &["bv"],
            &["bw"],
            &["cc"],
            &["cw"],
        ])
    );
    // Without a multi-value column, DISTINCT is DataFusion's.
    assert_eq!(
        planned_rows(&ctx, "SELECT DISTINCT dim FROM t ORDER BY 1").await,
        table(&[&["x"], &["y"]])
    );
    let e = plan_error(&ctx, "SELECT DISTINCT * FROM t").await;
    assert!(
        e.contains("SELECT DISTINCT * over multi-value columns"),
        "{e}"
    );
}

#[tokio::test]
async fn select_items_computed_from_a_grouped_key() {
    let ctx = ctx();
    // Computed from the group's value (a post-aggregation expression in Druid).
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(tags) AS u, COUNT(*) FROM t GROUP BY tags ORDER BY u NULLS FIRST"
        )
        .await,
        table(&[&["null", "2"], &["A", "2"], &["B", "2"], &["C", "1"]])
    );
    // The key itself next to it keeps its name.
    let df = crate::rewrite::plan_sql(
        &ctx,
        "SELECT tags, UPPER(tags) AS u, COUNT(*) FROM t GROUP BY tags",
    )
    .await
    .unwrap();
    let names: Vec<&str> = df
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["tags", "u", "EXPR$2"]);
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, UPPER(tags) AS u, COUNT(*) FROM t GROUP BY tags \
             ORDER BY tags NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "null", "2"],
            &["a", "A", "2"],
            &["b", "B", "2"],
            &["c", "C", "1"],
        ])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT CONCAT(tags, '-x') || '!' AS k, COUNT(*) FROM t GROUP BY CONCAT(tags, '-x') \
             ORDER BY 1 NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "2"],
            &["a-x!", "2"],
            &["b-x!", "2"],
            &["c-x!", "1"]
        ])
    );
    // HAVING and ORDER BY computed from the key.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, COUNT(*) FROM t GROUP BY tags HAVING UPPER(tags) <> 'A' ORDER BY tags"
        )
        .await,
        table(&[&["b", "2"], &["c", "1"]])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, COUNT(*) FROM t GROUP BY tags \
             ORDER BY CASE WHEN tags = 'b' THEN 0 ELSE 1 END, tags NULLS FIRST"
        )
        .await,
        table(&[&["b", "2"], &["null", "2"], &["a", "2"], &["c", "1"]])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(tags) AS u, COUNT(*) FROM t GROUP BY tags ORDER BY tags NULLS FIRST"
        )
        .await,
        table(&[&["null", "2"], &["A", "2"], &["B", "2"], &["C", "1"]])
    );
    // An MV_* function of the grouped value sees that one value (Druid's post-aggregator
    // `array_length("d0")`).
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, MV_LENGTH(tags) AS l, COUNT(*) FROM t GROUP BY tags \
             ORDER BY tags NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "null", "2"],
            &["a", "1", "2"],
            &["b", "1", "2"],
            &["c", "1", "1"],
        ])
    );
}

#[tokio::test]
async fn scalar_expressions_outside_group_by_map_each_value() {
    let ctx = ctx();
    let rows = |sql: &'static str| {
        let ctx = ctx.clone();
        async move { druid_rows(&ctx, sql).await }
    };
    use serde_json::json;
    // Druid's CalciteMultiValueStringQueryTest.testMultiValueStringWorksLikeStringScan: each
    // value mapped, a multi-value result.
    assert_eq!(
        rows("SELECT n, UPPER(tags) AS u FROM t ORDER BY n").await,
        [
            json!([1, "[\"A\",\"B\"]"]),
            json!([2, "[\"B\",\"C\"]"]),
            json!([3, null]),
            json!([4, "A"]),
            json!([5, null]),
        ]
    );
    // A null or empty row is mapped as one null value
    // (testMultiValueStringOverlapFilterCoalesceNvl: COALESCE(dim3, 'other')).
    assert_eq!(
        rows("SELECT n, COALESCE(tags, 'none') AS c FROM t ORDER BY n").await,
        [
            json!([1, "[\"a\",\"b\"]"]),
            json!([2, "[\"b\",\"c\"]"]),
            json!([3, "none"]),
            json!([4, "a"]),
            json!([5, "none"]),
        ]
    );
    // A single-valued column is read from the row, next to each value.
    assert_eq!(
        rows("SELECT n, CONCAT(tags, '-', dim) AS k, COALESCE(tags, dim) AS c FROM t ORDER BY n")
            .await,
        [
            json!([1, "[\"a-x\",\"b-x\"]", "[\"a\",\"b\"]"]),
            json!([2, "[\"b-y\",\"c-y\"]", "[\"b\",\"c\"]"]),
            json!([3, null, "x"]),
            json!([4, "a-y", "a"]),
            json!([5, null, "x"]),
        ]
    );
    // CASE and comparisons inside it are mapped with the rest of the expression.
    assert_eq!(
        rows("SELECT n, CASE WHEN tags = 'a' THEN 'yes' ELSE 'no' END AS k FROM t ORDER BY n")
            .await,
        [
            json!([1, "[\"yes\",\"no\"]"]),
            json!([2, "[\"no\",\"no\"]"]),
            json!([3, "no"]),
            json!([4, "yes"]),
            json!([5, "no"]),
        ]
    );
    // Two columns: every combination, the first one varying slowest.
    assert_eq!(
        rows("SELECT n, CONCAT(tags, more) AS k FROM t ORDER BY n").await,
        [
            json!([1, "[\"au\",\"av\",\"bu\",\"bv\"]"]),
            json!([2, "[\"bc\",\"bw\",\"cc\",\"cw\"]"]),
            json!([3, null]),
            json!([4, null]),
            json!([5, null]),
        ]
    );
    // Mapped inside a function taking the array (Druid's applyUnappliedBindings).
    assert_eq!(
        rows("SELECT n, MV_TO_STRING(UPPER(tags), '|') AS s FROM t ORDER BY n").await,
        [
            json!([1, "A|B"]),
            json!([2, "B|C"]),
            json!([3, null]),
            json!([4, "A"]),
            json!([5, null]),
        ]
    );
    // The column itself is unchanged.
    assert_eq!(
        rows("SELECT n, tags FROM t WHERE n < 3 ORDER BY n").await,
        [json!([1, "[\"a\",\"b\"]"]), json!([2, "[\"b\",\"c\"]"])]
    );
    // A mapped value that is not a string has no Druid rendering (Druid fails the query with
    // "Cannot coerce field"): a plan error.
    for sql in [
        "SELECT tags = 'a' FROM t",
        "SELECT CASE WHEN tags = 'a' THEN 1 ELSE 0 END FROM t",
    ] {
        let e = plan_error(&ctx, sql).await;
        assert!(
            e.contains("is applied to each value of a multi-value column"),
            "{sql}: {e}"
        );
    }
    // A column used both as an array and value by value: Druid rejects the expression.
    let e = plan_error(&ctx, "SELECT MV_LENGTH(tags) + LENGTH(tags) FROM t").await;
    assert!(e.contains("used both as an array"), "{e}");
    let e = plan_error(
        &ctx,
        "SELECT UPPER(tags) AS u, COUNT(*) FROM t GROUP BY CONCAT(MV_TO_STRING(tags, ','), tags)",
    )
    .await;
    assert!(e.contains("used both as an array"), "{e}");
}

#[tokio::test]
async fn filters_over_expressions_match_any_value() {
    let ctx = ctx();
    let ns = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            planned_rows(&ctx, sql)
                .await
                .into_iter()
                .map(|r| r[0].clone())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ns("SELECT n FROM t WHERE UPPER(tags) = 'A' ORDER BY n").await,
        ["1", "4"]
    );
    // `<>` is "no value equals" (Druid plans it as not(equals)); a null row is unknown.
    assert_eq!(
        ns("SELECT n FROM t WHERE UPPER(tags) <> 'A' ORDER BY n").await,
        ["2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE UPPER(tags) IN ('B', 'Z') ORDER BY n").await,
        ["1", "2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags LIKE 'b%' ORDER BY n").await,
        ["1", "2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags NOT LIKE 'b%' ORDER BY n").await,
        ["4"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags BETWEEN 'b' AND 'c' ORDER BY n").await,
        ["1", "2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE UPPER(tags) IS NULL ORDER BY n").await,
        ["3", "5"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE UPPER(tags) IS NOT NULL ORDER BY n").await,
        ["1", "2", "4"]
    );
    // A null or empty row is one null value.
    assert_eq!(
        ns("SELECT n FROM t WHERE COALESCE(tags, 'none') = 'none' ORDER BY n").await,
        ["3", "5"]
    );
    // Two columns: any combination; compared with each other: any overlap (Druid's column
    // comparison filter).
    assert_eq!(
        ns("SELECT n FROM t WHERE CONCAT(tags, more) = 'bw' ORDER BY n").await,
        ["2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE tags = more ORDER BY n").await,
        ["2"]
    );
    // With a plain column, and with AND / OR / NOT kept around each predicate.
    assert_eq!(
        ns(
            "SELECT n FROM t WHERE CONCAT(tags, dim) = 'by' OR (UPPER(tags) = 'A' AND dim = 'x') \
            ORDER BY n"
        )
        .await,
        ["1", "2"]
    );
    assert_eq!(
        ns("SELECT n FROM t WHERE NOT (UPPER(tags) = 'B') ORDER BY n").await,
        ["4"]
    );
    // `IS NOT TRUE` is `NOT (.. IS TRUE)`: no value is `A` (a null row is one null value).
    assert_eq!(
        ns("SELECT n FROM t WHERE (UPPER(tags) = 'A') IS NOT TRUE ORDER BY n").await,
        ["2", "3", "5"]
    );
    // Rows are kept whole: the group keys are all values of matching rows.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, COUNT(*) FROM t WHERE UPPER(tags) = 'C' GROUP BY tags ORDER BY tags"
        )
        .await,
        table(&[&["b", "1"], &["c", "1"]])
    );
    // Aggregate filters too.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT COUNT(*) FILTER (WHERE UPPER(tags) = 'B'), \
             COUNT(*) FILTER (WHERE tags = 'a'), COUNT(*) FILTER (WHERE tags IS NULL) FROM t"
        )
        .await,
        table(&[&["2", "2", "2"]])
    );
}

#[tokio::test]
async fn a_grouped_column_is_matched_however_it_is_qualified() {
    let ctx = ctx();
    let df = crate::rewrite::plan_sql(
        &ctx,
        "SELECT t.tags, UPPER(t.tags) AS u FROM t GROUP BY tags",
    )
    .await
    .unwrap();
    let names: Vec<&str> = df
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["tags", "u"]);
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT t.tags, UPPER(t.tags) AS u, COUNT(*) FROM t GROUP BY tags \
             ORDER BY t.tags NULLS FIRST"
        )
        .await,
        table(&[
            &["null", "null", "2"],
            &["a", "A", "2"],
            &["b", "B", "2"],
            &["c", "C", "1"],
        ])
    );
}

/// The error of running `sql` planned as the engine plans it (planning or the analyzer rule).
async fn run_error(ctx: &SessionContext, sql: &str) -> String {
    let df = crate::rewrite::plan_sql(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    match df.collect().await {
        Ok(_) => panic!("{sql}: ran"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn distinct_counts_count_each_value() {
    let ctx = ctx();
    // Exact COUNT(DISTINCT): Druid groups by the column (unnesting it) and counts the non-null
    // groups: a, b, c (null and empty rows add nothing).
    assert_eq!(
        planned_rows(&ctx, "SELECT COUNT(DISTINCT tags) FROM t").await,
        table(&[&["3"]])
    );
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT dim, COUNT(DISTINCT tags) AS c, COUNT(DISTINCT more) FILTER (WHERE n > 1), \
             COUNT(DISTINCT dim) FROM t GROUP BY dim ORDER BY dim"
        )
        .await,
        // x: [a, b], [], null / [u, v], null, [u] (n > 1: null, [u]); y: [b, c], [a] / [c, w], [].
        table(&[&["x", "2", "1", "1"], &["y", "3", "2", "1"]])
    );
    // In HAVING, in an expression, through a derived table's alias.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT COUNT(DISTINCT x) + 1 FROM (SELECT tags AS x FROM t) \
             HAVING COUNT(DISTINCT x) > 2"
        )
        .await,
        table(&[&["4"]])
    );
    // A grouped multi-value key is one value in its group.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT tags, COUNT(DISTINCT tags) FROM t GROUP BY tags ORDER BY tags"
        )
        .await,
        table(&[&["a", "1"], &["b", "1"], &["c", "1"], &["null", "0"]])
    );
    // Grouped by an expression over the column, the group's rows count all their values
    // (Druid's cartesian grouping on UPPER(tags), tags).
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT UPPER(tags) AS u, COUNT(DISTINCT tags) FROM t GROUP BY 1 ORDER BY 1"
        )
        .await,
        table(&[&["A", "2"], &["B", "3"], &["C", "2"], &["null", "0"]])
    );
    // Approximate (Druid's default): the cardinality aggregator and the sketches add every
    // value, as before.
    let approximate = crate::rewrite::RewriteOptions {
        approximate_count_distinct: true,
        ..Default::default()
    };
    let df = crate::rewrite::plan_sql_with(
        &ctx,
        "SELECT COUNT(DISTINCT tags), APPROX_COUNT_DISTINCT(tags), \
         APPROX_COUNT_DISTINCT_DS_HLL(tags), APPROX_COUNT_DISTINCT_DS_THETA(tags), \
         HLL_SKETCH_ESTIMATE(DS_HLL(tags), true), THETA_SKETCH_ESTIMATE(DS_THETA(tags)) FROM t",
        &approximate,
        crate::rewrite::read_only(),
    )
    .await
    .unwrap();
    assert_eq!(
        text_rows(df.collect().await.unwrap()),
        table(&[&["3", "3", "3", "3", "3.0", "3.0"]])
    );
}

#[tokio::test]
async fn other_aggregates_over_a_multi_value_column_are_plan_errors() {
    let ctx = ctx();
    for (sql, call) in [
        ("SELECT MIN(tags) FROM t", "MIN(tags)"),
        ("SELECT dim, MAX(tags) FROM t GROUP BY dim", "MAX(tags)"),
        ("SELECT ANY_VALUE(tags) FROM t", "ANY_VALUE(tags)"),
        ("SELECT STRING_AGG(tags, ',') FROM t", "STRING_AGG(tags)"),
        ("SELECT ARRAY_AGG(more) FROM t", "ARRAY_AGG(more)"),
        ("SELECT COUNT(DISTINCT tags, dim) FROM t", "COUNT(tags)"),
    ] {
        let e = run_error(&ctx, sql).await;
        assert!(
            e.contains(&format!("{call}: aggregating a multi-value column")),
            "{sql}: {e}"
        );
    }
    // Aggregates over a value computed from the whole row, and those taking whole rows, plan.
    assert_eq!(
        planned_rows(
            &ctx,
            "SELECT MAX(MV_LENGTH(tags)), COUNT(tags), ARRAY_CONCAT_AGG(tags) FROM t"
        )
        .await,
        table(&[&["2", "4", "[a, b, b, c, a]"]])
    );
}
