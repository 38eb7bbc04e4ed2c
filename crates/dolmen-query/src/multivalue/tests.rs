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
    let schema = Arc::new(Schema::new(vec![
        Field::new("tags", dolmen_segment::multi_value_string_type(), true).with_metadata(
            HashMap::from([(
                dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
                "true".to_string(),
            )]),
        ),
        Field::new("n", DataType::Int64, true),
        Field::new("dim", DataType::Utf8, true),
    ]));
    let mut b = ListBuilder::new(StringBuilder::new());
    for row in [vec!["a", "b"], vec!["b", "c"], vec![], vec!["a"]] {
        for v in row {
            b.values().append_value(v);
        }
        b.append(true);
    }
    b.append(false);
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(b.finish()),
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
            Arc::new(arrow::array::StringArray::from(vec![
                "x", "y", "x", "y", "x",
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
/// rewrites, [`map_multi_value_group_keys`] among them), as text.
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

// Rows: n=1 [a, b] x; n=2 [b, c] y; n=3 [] x; n=4 [a] y; n=5 null x (tags, n, dim).

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
