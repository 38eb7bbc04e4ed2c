//! One query per Druid SQL function family through the real server, on the Wikipedia sample
//! and a small datasource with sketch metrics: the functions are registered, plan, run and
//! give Druid's values over HTTP (each family's edge cases are unit-tested beside its code).

use serde_json::{Value, json};

use crate::common::{Server, wikipedia_spec};

fn loaded() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = server.run_task(&wikipedia_spec());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    (dir, server)
}

fn one(server: &Server, sql: &str) -> Value {
    let rows = server.sql(sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0].clone()
}

#[test]
fn aggregation_families() {
    let (_dir, server) = loaded();
    // EARLIEST/LATEST read the row with the earliest/latest __time.
    let first = one(
        &server,
        "SELECT channel, page FROM wikipedia ORDER BY __time ASC LIMIT 1",
    );
    let last = one(
        &server,
        "SELECT channel, page FROM wikipedia ORDER BY __time DESC LIMIT 1",
    );
    let got = one(
        &server,
        "SELECT EARLIEST(channel) AS ec, LATEST(page, 1024) AS lp, \
                EARLIEST_BY(page, __time) AS ep, ANY_VALUE(channel) IS NOT NULL AS av \
         FROM wikipedia",
    );
    assert_eq!(got["ec"], first["channel"]);
    assert_eq!(got["lp"], last["page"]);
    assert_eq!(got["ep"], first["page"]);
    assert_eq!(got["av"], true);

    // Statistics, bitwise, string and array aggregates, FILTER, GROUPING.
    let got = one(
        &server,
        "SELECT VARIANCE(added) > 0 AS v, STDDEV(added) > 0 AS s, BIT_OR(1) AS b, \
                LISTAGG(DISTINCT channel) FILTER (WHERE channel = '#nl.wikipedia') AS l, \
                ARRAY_LENGTH(ARRAY_AGG(DISTINCT channel)) AS n, \
                ARRAY_LENGTH(ARRAY_CONCAT_AGG(DISTINCT ARRAY[channel, 'x'])) AS cn \
         FROM wikipedia",
    );
    assert_eq!(
        got,
        json!({"v": true, "s": true, "b": 1, "l": "#nl.wikipedia", "n": 51, "cn": 52})
    );

    // DataSketches: HLL and theta agree with the exact count closely on 10,730 users;
    // DS_HLL then HLL_SKETCH_ESTIMATE equals APPROX_COUNT_DISTINCT_DS_HLL.
    let got = one(
        &server,
        "SELECT COUNT(DISTINCT user) FILTER (WHERE 1 = 1) AS approx_builtin, \
                APPROX_COUNT_DISTINCT_DS_HLL(user) AS hll, \
                HLL_SKETCH_ESTIMATE(DS_HLL(user), TRUE) AS hll2, \
                APPROX_COUNT_DISTINCT_DS_THETA(user) AS theta, \
                APPROX_QUANTILE_DS(added, 0.5) AS median, \
                DS_GET_QUANTILE(DS_QUANTILES_SKETCH(added), 1.0) AS max_added \
         FROM wikipedia",
    );
    let max_added = one(&server, "SELECT MAX(added) AS m FROM wikipedia")["m"].as_f64();
    assert_eq!(got["max_added"].as_f64(), max_added, "{got}");
    assert_eq!(got["hll"].as_f64(), got["hll2"].as_f64(), "{got}");
    for k in ["approx_builtin", "hll", "theta"] {
        let v = got[k].as_f64().unwrap();
        assert!((v - 10_730.0).abs() / 10_730.0 < 0.05, "{k}: {got}");
    }
    let median = got["median"].as_f64().unwrap();
    assert!((0.0..=1000.0).contains(&median), "{got}");
}

#[test]
fn scalar_families() {
    let (_dir, server) = loaded();
    // Multi-value and array functions.
    let got = one(
        &server,
        "SELECT MV_LENGTH(STRING_TO_MV('a,b,c', ',')) AS l, \
                MV_TO_STRING(MV_APPEND(STRING_TO_MV('a,b', ','), 'c'), '|') AS s, \
                ARRAY_OFFSET(ARRAY[10, 20, 30], 1) AS o, ARRAY_ORDINAL(ARRAY[10, 20], 1) AS ord, \
                ARRAY_CONTAINS(ARRAY['a', 'b'], 'b') AS c, \
                ARRAY_TO_STRING(ARRAY_SLICE(ARRAY[1, 2, 3, 4], 1, 3), '-') AS sl",
    );
    assert_eq!(
        got,
        json!({"l": 3, "s": "a|b|c", "o": 20, "ord": 10, "c": true, "sl": "2-3"})
    );
    // Window functions and a join with a subquery.
    let rows = server.sql(
        "SELECT w.channel, c, RANK() OVER (ORDER BY c DESC) AS r \
         FROM (SELECT channel, COUNT(*) AS c FROM wikipedia GROUP BY channel) w \
         JOIN (SELECT DISTINCT channel FROM wikipedia WHERE channel LIKE '#e%') e \
           ON w.channel = e.channel ORDER BY r LIMIT 2",
    );
    assert_eq!(rows[0]["channel"], "#en.wikipedia");
    assert_eq!(rows[0]["r"], 1);
    assert_eq!(rows[1]["r"], 2);
    // Unnest.
    let rows = server.sql("SELECT x FROM UNNEST(ARRAY[3, 1, 2]) AS t(x) ORDER BY x");
    assert_eq!(
        rows,
        vec![json!({"x": 1}), json!({"x": 2}), json!({"x": 3})]
    );
}

#[test]
fn ingested_sketch_columns_merge_with_query_time_sketches() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut data = String::new();
    for i in 0..500i64 {
        data.push_str(&format!(
            "{{\"ts\": {}, \"page\": \"p{}\", \"n\": {}}}\n",
            1_442_016_000_000 + i * 1000,
            i % 7,
            i % 100
        ));
    }
    let mut spec = crate::common::inline_spec("sk", &data, &[], false);
    spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] =
        json!(["page", {"type": "long", "name": "n"}]);
    spec["spec"]["dataSchema"]["metricsSpec"] = json!([
        {"type": "count", "name": "count"},
        {"type": "thetaSketch", "name": "n_theta", "fieldName": "n"},
        {"type": "HLLSketchBuild", "name": "n_hll", "fieldName": "n"},
        {"type": "quantilesDoublesSketch", "name": "n_q", "fieldName": "n"}
    ]);
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    // Stored sketches merge, and hash numbers as query-time sketches do: a union with a sketch
    // of the raw column still counts 100 distinct values.
    let got = one(
        &server,
        "SELECT APPROX_COUNT_DISTINCT_DS_THETA(n_theta) AS t, \
                THETA_SKETCH_ESTIMATE(THETA_SKETCH_UNION(DS_THETA(n_theta), DS_THETA(n))) AS tu, \
                APPROX_COUNT_DISTINCT_DS_HLL(n_hll) AS h, \
                HLL_SKETCH_ESTIMATE(HLL_SKETCH_UNION(DS_HLL(n_hll), DS_HLL(n)), TRUE) AS hu, \
                DS_GET_QUANTILE(DS_QUANTILES_SKETCH(n_q), 1.0) AS qmax \
         FROM sk",
    );
    assert_eq!(
        got,
        json!({"t": 100, "tu": 100.0, "h": 100, "hu": 100.0, "qmax": 99.0}),
        "{got}"
    );
    // Stored and computed sketches report their COMPLEX types, as Druid does.
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT n_hll, DS_THETA(n) AS t, DS_QUANTILES_SKETCH(n) AS q FROM sk                           GROUP BY n_hll LIMIT 1",
                "resultFormat": "array", "header": true, "typesHeader": true,
                "sqlTypesHeader": true}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body[1],
        json!([
            "COMPLEX<HLLSketch>",
            "COMPLEX<thetaSketch>",
            "COMPLEX<quantilesDoublesSketch>"
        ])
    );
    assert_eq!(body[2], json!(["OTHER", "OTHER", "OTHER"]));
    // INFORMATION_SCHEMA gives a complex column's type string (Druid's `InformationSchema`:
    // `ComplexSqlType.asTypeString()`), the result headers `OTHER`.
    assert_eq!(
        server.sql(
            "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS \
             WHERE TABLE_NAME = 'sk' AND COLUMN_NAME IN ('n_hll', 'n_q', 'n_theta') ORDER BY 1"
        ),
        vec![
            json!({"COLUMN_NAME": "n_hll", "DATA_TYPE": "COMPLEX<HLLSketch>"}),
            json!({"COLUMN_NAME": "n_q", "DATA_TYPE": "COMPLEX<quantilesDoublesSketch>"}),
            json!({"COLUMN_NAME": "n_theta", "DATA_TYPE": "COMPLEX<thetaSketch>"}),
        ]
    );
}
