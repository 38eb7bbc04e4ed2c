//! Druid's `docs/tutorials/tutorial-unnest-arrays.md` ("Unnest arrays within a column"): the
//! tutorial's SQL-based ingestion of `nested_data` verbatim, then its SQL queries verbatim
//! (`enableUnnest` in the context, as the tutorial says) with the rows Druid's semantics give.
//! `UNNEST(ARRAY[dim4,dim5])` (an array literal of outer columns inside `UNNEST`) did not plan
//! before ADR 0029 ("No field named dim4").

use serde_json::{Value, json};

use crate::common::Server;

/// The tutorial's "SQL-based ingestion" statement, verbatim.
const NESTED_DATA: &str = r#"REPLACE INTO nested_data OVERWRITE ALL
SELECT
  TIME_PARSE("t") as __time,
  dim1,
  dim2,
  dim3,
  dim4,
  dim5,
  m1,
  m2
FROM TABLE(
    EXTERN(
    '{"type":"inline","data":"{\"t\":\"2000-01-01\",\"m1\":\"1.0\",\"m2\":\"1.0\",\"dim1\":\"\",\"dim2\":[\"a\"],\"dim3\":[\"a\",\"b\"],\"dim4\":[\"x\",\"y\"],\"dim5\":[\"a\",\"b\"]},\n{\"t\":\"2000-01-02\",\"m1\":\"2.0\",\"m2\":\"2.0\",\"dim1\":\"10.1\",\"dim2\":[],\"dim3\":[\"c\",\"d\"],\"dim4\":[\"e\",\"f\"],\"dim5\":[\"a\",\"b\",\"c\",\"d\"]},\n{\"t\":\"2001-01-03\",\"m1\":\"6.0\",\"m2\":\"6.0\",\"dim1\":\"abc\",\"dim2\":[\"a\"],\"dim3\":[\"k\",\"l\"]},\n{\"t\":\"2001-01-01\",\"m1\":\"4.0\",\"m2\":\"4.0\",\"dim1\":\"1\",\"dim2\":[\"a\"],\"dim3\":[\"g\",\"h\"]},\n{\"t\":\"2001-01-02\",\"m1\":\"5.0\",\"m2\":\"5.0\",\"dim1\":\"def\",\"dim2\":[\"abc\"],\"dim3\":[\"i\",\"j\"]},\n{\"t\":\"2001-01-03\",\"m1\":\"6.0\",\"m2\":\"6.0\",\"dim1\":\"abc\",\"dim2\":[\"a\"],\"dim3\":[\"k\",\"l\"]},\n{\"t\":\"2001-01-02\",\"m1\":\"5.0\",\"m2\":\"5.0\",\"dim1\":\"def\",\"dim2\":[\"abc\"],\"dim3\":[\"m\",\"n\"]}"}',
    '{"type":"json"}',
    '[{"name":"t","type":"string"},{"name":"dim1","type":"string"},{"name":"dim2","type":"string"},{"name":"dim3","type":"string"},{"name":"dim4","type":"string"},{"name":"dim5","type":"string"},{"name":"m1","type":"float"},{"name":"m2","type":"double"}]'
  )
)
PARTITIONED BY YEAR"#;

/// The rows of `sql` (object results), with `enableUnnest`.
fn rows(server: &Server, sql: &str) -> Vec<Value> {
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": sql, "context": {"enableUnnest": true}}),
    );
    assert_eq!(code, 200, "{sql}: {body}");
    body.as_array().cloned().unwrap_or_default()
}

/// The values of `column` in the rows of `sql`, sorted by their JSON text.
fn column(server: &Server, sql: &str, column: &str) -> Vec<Value> {
    let mut v: Vec<Value> = rows(server, sql)
        .into_iter()
        .map(|r| r[column].clone())
        .collect();
    v.sort_by_key(|v| v.to_string());
    v
}

fn strings(values: &[&str]) -> Vec<Value> {
    let mut v: Vec<Value> = values.iter().map(|s| json!(s)).collect();
    v.sort_by_key(|v| v.to_string());
    v
}

#[test]
fn unnest_tutorial_queries() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = crate::arrays::ingest(&server, NESTED_DATA, json!({}));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let dim3 = strings(&[
        "a", "b", "c", "d", "g", "h", "i", "j", "k", "l", "k", "l", "m", "n",
    ]);

    // "Unnest a single source expression in a datasource".
    assert_eq!(
        column(
            &server,
            "SELECT d3 FROM \"nested_data\", UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3) ",
            "d3"
        ),
        dim3
    );

    // "Unnest a virtual column": an array literal of two outer columns. Each of the seven rows
    // gives two rows (the two columns' values); rows 3 to 7 hold neither column.
    let virtual_rows = rows(
        &server,
        "SELECT dim4,dim5,d45 FROM nested_data, UNNEST(ARRAY[dim4,dim5]) AS example_table(d45)",
    );
    assert_eq!(virtual_rows.len(), 14, "{virtual_rows:?}");
    // With ARRAY_CONCAT: the elements of both.
    assert_eq!(
        column(
            &server,
            "SELECT dim4,dim5,d45 FROM nested_data, UNNEST(ARRAY_CONCAT(dim4,dim5)) AS example_table(d45)",
            "d45"
        ),
        strings(&["x", "y", "a", "b", "e", "f", "a", "b", "c", "d"])
    );

    // "Unnest multiple source expressions": 14 values of dim3, times two.
    let both = rows(
        &server,
        "SELECT dim3,dim4,dim5,d3,d45 FROM \"nested_data\", UNNEST(MV_TO_ARRAY(\"dim3\")) AS ud(d3), UNNEST(ARRAY[dim4,dim5]) AS foo(d45)",
    );
    assert_eq!(both.len(), 28, "{both:?}");

    // "Unnest a column from a subset of a table".
    assert_eq!(
        column(
            &server,
            "SELECT d3 FROM (select dim1, dim2, dim3 from \"nested_data\"), UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3)",
            "d3"
        ),
        dim3
    );

    // "Unnest with a filter".
    assert_eq!(
        column(
            &server,
            "SELECT d3 FROM (SELECT * FROM nested_data WHERE dim2 IN ('abc')), UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3)",
            "d3"
        ),
        strings(&["i", "j", "m", "n"])
    );
    assert_eq!(
        column(
            &server,
            "SELECT * FROM UNNEST(ARRAY[1,2,3]) AS ud(d1) WHERE d1 IN ('1','2')",
            "d1"
        ),
        vec![json!(1), json!(2)]
    );
    // "The query only returns a single row since only one row meets the conditions."
    let one = rows(
        &server,
        "SELECT * FROM nested_data, UNNEST(MV_TO_ARRAY(\"dim3\")) AS foo(d3) WHERE d3 IN ('b', 'd') and m1 < 2",
    );
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!(one[0]["d3"], json!("b"));
    assert_eq!(one[0]["__time"], json!("2000-01-01T00:00:00.000Z"));

    // "Unnest and then GROUP BY".
    let mut distinct = dim3.clone();
    distinct.dedup();
    assert_eq!(
        column(
            &server,
            "SELECT d3 FROM nested_data, UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3) GROUP BY d3 ",
            "d3"
        ),
        distinct
    );

    // Druid's MSQ test `testInsertWithUnnestWithVirtualColumns` shape: an array literal of two
    // numeric columns, each row twice (m1 = m2 in these rows).
    assert_eq!(
        column(
            &server,
            "select __time, d from nested_data,UNNEST(ARRAY[m1,m2]) as unnested(d)",
            "d"
        ),
        [
            1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 5.0, 5.0, 5.0, 5.0, 6.0, 6.0, 6.0, 6.0
        ]
        .iter()
        .map(|v| json!(v))
        .collect::<Vec<_>>()
    );
}
