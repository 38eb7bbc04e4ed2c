//! ARRAY columns (issue 20): Druid's `docs/querying/arrays.md` examples verbatim: the
//! `array_example` SQL ingestion, its documented queries and answers (object results with
//! `sqlStringifyArrays`, Druid's default, so arrays print as JSON text), the types
//! `INFORMATION_SCHEMA` and the result headers report, and `arrayIngestMode`.

use serde_json::{Value, json};

use crate::common::Server;

/// The `data` of the docs' inline input: five rows, JSON text with arrays of strings, longs and
/// doubles, nulls inside and as whole values, and empty arrays.
const ARRAY_EXAMPLE_SOURCE: &str = r#"'{"type":"inline","data":"{\"timestamp\": \"2023-01-01T00:00:00\", \"label\": \"row1\", \"arrayString\": [\"a\", \"b\"],  \"arrayLong\":[1, null,3], \"arrayDouble\":[1.1, 2.2, null]}\n{\"timestamp\": \"2023-01-01T00:00:00\", \"label\": \"row2\", \"arrayString\": [null, \"b\"], \"arrayLong\":null,        \"arrayDouble\":[999, null, 5.5]}\n{\"timestamp\": \"2023-01-01T00:00:00\", \"label\": \"row3\", \"arrayString\": [],          \"arrayLong\":[1, 2, 3],   \"arrayDouble\":[null, 2.2, 1.1]} \n{\"timestamp\": \"2023-01-01T00:00:00\", \"label\": \"row4\", \"arrayString\": [\"a\", \"b\"],  \"arrayLong\":[1, 2, 3],   \"arrayDouble\":[]}\n{\"timestamp\": \"2023-01-01T00:00:00\", \"label\": \"row5\", \"arrayString\": null,        \"arrayLong\":[],          \"arrayDouble\":null}"}'"#;

/// `docs/querying/arrays.md`, "SQL-based ingestion", first example, verbatim.
fn array_example_replace() -> String {
    format!(
        r#"REPLACE INTO "array_example" OVERWRITE ALL
WITH "ext" AS (
  SELECT *
  FROM TABLE(
    EXTERN(
      {ARRAY_EXAMPLE_SOURCE},
      '{{"type":"json"}}'
    )
  ) EXTEND (
    "timestamp" VARCHAR,
    "label" VARCHAR,
    "arrayString" VARCHAR ARRAY,
    "arrayLong" BIGINT ARRAY,
    "arrayDouble" DOUBLE ARRAY
  )
)
SELECT
  TIME_PARSE("timestamp") AS "__time",
  "label",
  "arrayString",
  "arrayLong",
  "arrayDouble"
FROM "ext"
PARTITIONED BY DAY"#
    )
}

/// `docs/querying/arrays.md`, "Arrays can also be used as `GROUP BY` keys for rollup", verbatim.
fn array_example_rollup_replace() -> String {
    format!(
        r#"REPLACE INTO "array_example_rollup" OVERWRITE ALL
WITH "ext" AS (
  SELECT *
  FROM TABLE(
    EXTERN(
      {ARRAY_EXAMPLE_SOURCE},
      '{{"type":"json"}}'
    )
  ) EXTEND (
    "timestamp" VARCHAR,
    "label" VARCHAR,
    "arrayString" VARCHAR ARRAY,
    "arrayLong" BIGINT ARRAY,
    "arrayDouble" DOUBLE ARRAY
  )
)
SELECT
  TIME_PARSE("timestamp") AS "__time",
  "label",
  "arrayString",
  "arrayLong",
  "arrayDouble",
  COUNT(*) as "count"
FROM "ext"
GROUP BY 1,2,3,4,5
PARTITIONED BY DAY"#
    )
}

/// Runs an ingestion statement with `context` through `/druid/v2/sql/task`; the task status.
pub(crate) fn ingest(server: &Server, sql: &str, context: Value) -> Value {
    let (code, body) = server.post_json(
        "/druid/v2/sql/task",
        &json!({"query": sql, "context": context}),
    );
    assert_eq!(code, 200, "{body}");
    server.wait_task(body["taskId"].as_str().unwrap())
}

/// A server holding `array_example`, loaded with the docs' statement and context.
pub(crate) fn with_array_example() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = ingest(
        &server,
        &array_example_replace(),
        json!({"arrayIngestMode": "array"}),
    );
    assert_eq!(st["status"], "SUCCESS", "{st}");
    (dir, server)
}

/// Parses JSON lines as the docs print results.
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Rows of `sql`, sorted by their JSON text (the docs do not order them).
fn sorted(server: &Server, sql: &str) -> Vec<Value> {
    let mut rows = server.sql(sql);
    rows.sort_by_key(|r| r.to_string());
    rows
}

fn sorted_lines(text: &str) -> Vec<Value> {
    let mut rows = lines(text);
    rows.sort_by_key(|r| r.to_string());
    rows
}

/// The docs' statement loads; `INFORMATION_SCHEMA.COLUMNS` reports `ARRAY` for the three array
/// columns (the docs' "You can tell which type you have" query), the result headers Druid's
/// native names, and `SELECT *` prints the arrays as Druid does.
#[test]
fn array_example_loads_with_array_types() {
    let (_dir, server) = with_array_example();
    let got = server.sql(
        "SELECT COLUMN_NAME, DATA_TYPE\nFROM INFORMATION_SCHEMA.COLUMNS\nWHERE TABLE_NAME = 'array_example'",
    );
    assert_eq!(
        got,
        vec![
            json!({"COLUMN_NAME": "__time", "DATA_TYPE": "TIMESTAMP"}),
            json!({"COLUMN_NAME": "label", "DATA_TYPE": "VARCHAR"}),
            json!({"COLUMN_NAME": "arrayString", "DATA_TYPE": "ARRAY"}),
            json!({"COLUMN_NAME": "arrayLong", "DATA_TYPE": "ARRAY"}),
            json!({"COLUMN_NAME": "arrayDouble", "DATA_TYPE": "ARRAY"}),
        ]
    );
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({
            "query": "SELECT label, arrayString, arrayLong, arrayDouble FROM array_example WHERE label = 'row1'",
            "resultFormat": "array", "header": true, "typesHeader": true, "sqlTypesHeader": true
        }),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!([
            ["label", "arrayString", "arrayLong", "arrayDouble"],
            ["STRING", "ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>"],
            ["VARCHAR", "ARRAY", "ARRAY", "ARRAY"],
            ["row1", "[\"a\",\"b\"]", "[1,null,3]", "[1.1,2.2,null]"]
        ])
    );
    let got = sorted(&server, "SELECT * FROM \"array_example\"");
    let want = sorted_lines(
        r#"{"__time":"2023-01-01T00:00:00.000Z","label":"row1","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,null,3]","arrayDouble":"[1.1,2.2,null]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row2","arrayString":"[null,\"b\"]","arrayLong":null,"arrayDouble":"[999.0,null,5.5]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row3","arrayString":"[]","arrayLong":"[1,2,3]","arrayDouble":"[null,2.2,1.1]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row4","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,2,3]","arrayDouble":"[]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row5","arrayString":null,"arrayLong":"[]","arrayDouble":null}"#,
    );
    assert_eq!(got, want);
    // CSV: the arrays' JSON text, quoted as opencsv quotes it; a null array is empty.
    let (code, _, text) = server.post_raw(
        "/druid/v2/sql",
        Some("application/json"),
        &json!({
            "query": "SELECT label, arrayString, arrayLong, arrayDouble FROM array_example WHERE label IN ('row1','row2','row5') ORDER BY label",
            "resultFormat": "csv", "header": true
        })
        .to_string(),
    );
    assert_eq!(code, 200, "{text}");
    assert_eq!(
        text,
        "label,arrayString,arrayLong,arrayDouble\nrow1,\"[\"\"a\"\",\"\"b\"\"]\",\"[1,null,3]\",\"[1.1,2.2,null]\"\nrow2,\"[null,\"\"b\"\"]\",,\"[999.0,null,5.5]\"\nrow5,,[],\n\n"
    );
    // The segment payload lists the columns with Druid's type names.
    let (code, segs) =
        server.get_json("/druid/coordinator/v1/metadata/datasources/array_example/segments?full");
    assert_eq!(code, 200, "{segs}");
    assert_eq!(
        segs[0]["columns"],
        json!([
            {"name": "label", "type": "string", "kind": "dimension"},
            {"name": "arrayString", "type": "ARRAY<STRING>", "kind": "dimension"},
            {"name": "arrayLong", "type": "ARRAY<LONG>", "kind": "dimension"},
            {"name": "arrayDouble", "type": "ARRAY<DOUBLE>", "kind": "dimension"}
        ])
    );
    // sqlStringifyArrays=false prints JSON arrays.
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({
            "query": "SELECT arrayLong, arrayDouble FROM array_example WHERE label = 'row2'",
            "context": {"sqlStringifyArrays": false}
        }),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!([{"arrayLong": null, "arrayDouble": [999.0, null, 5.5]}])
    );
}

/// `docs/querying/arrays.md`, "Filtering" and "Grouping": each documented query gives the
/// documented rows.
#[test]
fn array_example_documented_queries() {
    let (_dir, server) = with_array_example();
    let cases = [
        (
            "SELECT *\nFROM \"array_example\"\nWHERE arrayLong = ARRAY[1,2,3]",
            r#"{"__time":"2023-01-01T00:00:00.000Z","label":"row3","arrayString":"[]","arrayLong":"[1,2,3]","arrayDouble":"[null,2.2,1.1]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row4","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,2,3]","arrayDouble":"[]"}"#,
        ),
        (
            "SELECT *\nFROM \"array_example\"\nWHERE arrayLong IS NULL",
            r#"{"__time":"2023-01-01T00:00:00.000Z","label":"row2","arrayString":"[null,\"b\"]","arrayLong":null,"arrayDouble":"[999.0,null,5.5]"}"#,
        ),
        (
            "SELECT *\nFROM \"array_example\"\nWHERE arrayString >= ARRAY['a','b']",
            r#"{"__time":"2023-01-01T00:00:00.000Z","label":"row1","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,null,3]","arrayDouble":"[1.1,2.2,null]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row4","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,2,3]","arrayDouble":"[]"}"#,
        ),
        (
            "SELECT *\nFROM \"array_example\"\nWHERE ARRAY_CONTAINS(arrayString, 'a')",
            r#"{"__time":"2023-01-01T00:00:00.000Z","label":"row1","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,null,3]","arrayDouble":"[1.1,2.2,null]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row4","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,2,3]","arrayDouble":"[]"}"#,
        ),
        (
            "SELECT label, arrayString\nFROM \"array_example\"\nGROUP BY 1,2",
            r#"{"label":"row1","arrayString":"[\"a\",\"b\"]"}
{"label":"row2","arrayString":"[null,\"b\"]"}
{"label":"row3","arrayString":"[]"}
{"label":"row4","arrayString":"[\"a\",\"b\"]"}
{"label":"row5","arrayString":null}"#,
        ),
        (
            "SELECT label, arrayString\nFROM \"array_example\"\nWHERE arrayLong = ARRAY[1,2,3]\nGROUP BY 1,2",
            r#"{"label":"row3","arrayString":"[]"}
{"label":"row4","arrayString":"[\"a\",\"b\"]"}"#,
        ),
        (
            "SELECT label, strings\nFROM \"array_example\" CROSS JOIN UNNEST(arrayString) as u(strings)\nGROUP BY 1,2",
            r#"{"label":"row1","strings":"a"}
{"label":"row1","strings":"b"}
{"label":"row2","strings":null}
{"label":"row2","strings":"b"}
{"label":"row4","strings":"a"}
{"label":"row4","strings":"b"}"#,
        ),
    ];
    let mut failures = Vec::new();
    for (sql, want) in cases {
        let (code, body) = server.post_json("/druid/v2/sql", &json!({"query": sql}));
        if code != 200 {
            failures.push(format!("{sql}\n-> {code} {body}"));
            continue;
        }
        let mut got = body.as_array().cloned().unwrap_or_default();
        got.sort_by_key(|r| r.to_string());
        let want = sorted_lines(want);
        if got != want {
            failures.push(format!(
                "{sql}\n-> {}\nwant {}",
                Value::from(got),
                Value::from(want)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The rollup example groups on whole arrays: every row differs in some array, so five rows
/// with `count` 1 each.
#[test]
fn array_example_rollup_groups_on_whole_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = ingest(
        &server,
        &array_example_rollup_replace(),
        json!({"arrayIngestMode": "array"}),
    );
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let got = sorted(
        &server,
        "SELECT label, arrayLong, \"count\" FROM array_example_rollup",
    );
    assert_eq!(
        got,
        sorted_lines(
            r#"{"label":"row1","arrayLong":"[1,null,3]","count":1}
{"label":"row2","arrayLong":null,"count":1}
{"label":"row3","arrayLong":"[1,2,3]","count":1}
{"label":"row4","arrayLong":"[1,2,3]","count":1}
{"label":"row5","arrayLong":"[]","count":1}"#
        )
    );
    // Without the label, rows 3 and 4 share an arrayLong but differ in arrayString/arrayDouble.
    let st = ingest(
        &server,
        r#"REPLACE INTO "longs" OVERWRITE ALL
SELECT TIME_PARSE("timestamp") AS "__time", "arrayLong", COUNT(*) AS "count"
FROM TABLE(EXTERN('{"type":"inline","data":"{\"timestamp\":\"2023-01-01\",\"arrayLong\":[1,2]}\n{\"timestamp\":\"2023-01-01\",\"arrayLong\":[1,2]}\n{\"timestamp\":\"2023-01-01\",\"arrayLong\":[2,1]}\n{\"timestamp\":\"2023-01-01\",\"arrayLong\":null}\n{\"timestamp\":\"2023-01-01\",\"arrayLong\":[]}"}', '{"type":"json"}'))
  EXTEND ("timestamp" VARCHAR, "arrayLong" BIGINT ARRAY)
GROUP BY 1, 2
PARTITIONED BY DAY"#,
        json!({}),
    );
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        sorted(&server, "SELECT arrayLong, \"count\" FROM longs"),
        sorted_lines(
            r#"{"arrayLong":"[1,2]","count":2}
{"arrayLong":"[2,1]","count":1}
{"arrayLong":null,"count":1}
{"arrayLong":"[]","count":1}"#
        )
    );
}

/// `arrayIngestMode`: `array` is the default; `mvd` stores `VARCHAR ARRAY` as a multi-value
/// string (`INFORMATION_SCHEMA` says `VARCHAR`) and rejects numeric arrays with Druid's
/// message; an unknown mode is a 400 naming the parameter.
#[test]
fn array_ingest_mode_chooses_the_stored_type() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let strings_only = |table: &str| {
        format!(
            r#"REPLACE INTO "{table}" OVERWRITE ALL
SELECT TIME_PARSE("timestamp") AS "__time", "arrayString"
FROM TABLE(EXTERN({ARRAY_EXAMPLE_SOURCE}, '{{"type":"json"}}'))
  EXTEND ("timestamp" VARCHAR, "arrayString" VARCHAR ARRAY)
PARTITIONED BY DAY"#
        )
    };
    let st = ingest(&server, &strings_only("as_default"), json!({}));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let st = ingest(
        &server,
        &strings_only("as_mvd"),
        json!({"arrayIngestMode": "mvd"}),
    );
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let types = server.sql(
        "SELECT TABLE_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS \
         WHERE COLUMN_NAME = 'arrayString' ORDER BY TABLE_NAME",
    );
    assert_eq!(
        types,
        vec![
            json!({"TABLE_NAME": "as_default", "DATA_TYPE": "ARRAY"}),
            json!({"TABLE_NAME": "as_mvd", "DATA_TYPE": "VARCHAR"}),
        ]
    );
    // Multi-value rows: grouping unnests them, as Druid does for multi-value strings.
    assert_eq!(
        server.sql("SELECT arrayString, COUNT(*) AS n FROM as_mvd GROUP BY 1 ORDER BY 1"),
        vec![
            json!({"arrayString": null, "n": 3}),
            json!({"arrayString": "a", "n": 2}),
            json!({"arrayString": "b", "n": 3}),
        ]
    );
    let (code, body) = server.post_json(
        "/druid/v2/sql/task",
        &json!({"query": array_example_replace(), "context": {"arrayIngestMode": "mvd"}}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.to_string().contains(
            "Numeric arrays can only be ingested when 'arrayIngestMode' is set to 'array' in the MSQ query's context. Current value of the parameter [mvd]"
        ),
        "{body}"
    );
    let (code, body) = server.post_json(
        "/druid/v2/sql/task",
        &json!({"query": array_example_replace(), "context": {"arrayIngestMode": "lists"}}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.to_string().contains("arrayIngestMode"), "{body}");
}

/// The docs' example data as JSON lines (`docs/querying/arrays.md`, verbatim).
const ARRAY_EXAMPLE_ROWS: &str = r#"{"timestamp": "2023-01-01T00:00:00", "label": "row1", "arrayString": ["a", "b"],  "arrayLong":[1, null,3], "arrayDouble":[1.1, 2.2, null]}
{"timestamp": "2023-01-01T00:00:00", "label": "row2", "arrayString": [null, "b"], "arrayLong":null,        "arrayDouble":[999, null, 5.5]}
{"timestamp": "2023-01-01T00:00:00", "label": "row3", "arrayString": [],          "arrayLong":[1, 2, 3],   "arrayDouble":[null, 2.2, 1.1]} 
{"timestamp": "2023-01-01T00:00:00", "label": "row4", "arrayString": ["a", "b"],  "arrayLong":[1, 2, 3],   "arrayDouble":[]}
{"timestamp": "2023-01-01T00:00:00", "label": "row5", "arrayString": null,        "arrayLong":[],          "arrayDouble":null}
"#;

/// A native `index_parallel` spec over inline `data` with `dimensionsSpec`.
fn native_spec(data_source: &str, data: &str, dimensions_spec: Value, rollup: bool) -> Value {
    json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": data_source,
                "timestampSpec": {"column": "timestamp", "format": "auto"},
                "dimensionsSpec": dimensions_spec,
                "metricsSpec": if rollup { json!([{"type": "count", "name": "count"}]) } else { json!([]) },
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": rollup}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": data},
                "inputFormat": {"type": "json"}
            }
        }
    })
}

/// `DATA_TYPE` of every column of `table` (`COLUMN_NAME` -> `DATA_TYPE`), in order.
fn column_types(server: &Server, table: &str) -> Vec<(String, String)> {
    server
        .sql(&format!(
            "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS \
             WHERE TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION"
        ))
        .into_iter()
        .map(|r| {
            (
                r["COLUMN_NAME"].as_str().unwrap().to_string(),
                r["DATA_TYPE"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Native batch ingestion with the docs' `dimensionsSpec` (every dimension `auto`) and with
/// `useSchemaDiscovery` stores the same arrays as the SQL statement does.
#[test]
fn native_auto_dimensions_and_schema_discovery_store_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let docs_dimensions = json!({"dimensions": [
        {"type": "auto", "name": "label"},
        {"type": "auto", "name": "arrayString"},
        {"type": "auto", "name": "arrayLong"},
        {"type": "auto", "name": "arrayDouble"}
    ]});
    let st = server.run_task(&native_spec(
        "auto_dims",
        ARRAY_EXAMPLE_ROWS,
        docs_dimensions,
        false,
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let st = server.run_task(&native_spec(
        "discovered",
        ARRAY_EXAMPLE_ROWS,
        json!({"useSchemaDiscovery": true}),
        false,
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let want_types: Vec<(String, String)> = [
        ("__time", "TIMESTAMP"),
        ("label", "VARCHAR"),
        ("arrayString", "ARRAY"),
        ("arrayLong", "ARRAY"),
        ("arrayDouble", "ARRAY"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let want_rows = sorted_lines(
        r#"{"__time":"2023-01-01T00:00:00.000Z","label":"row1","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,null,3]","arrayDouble":"[1.1,2.2,null]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row2","arrayString":"[null,\"b\"]","arrayLong":null,"arrayDouble":"[999.0,null,5.5]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row3","arrayString":"[]","arrayLong":"[1,2,3]","arrayDouble":"[null,2.2,1.1]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row4","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,2,3]","arrayDouble":"[]"}
{"__time":"2023-01-01T00:00:00.000Z","label":"row5","arrayString":null,"arrayLong":"[]","arrayDouble":null}"#,
    );
    for table in ["auto_dims", "discovered"] {
        assert_eq!(column_types(&server, table), want_types, "{table}");
        let (code, body) = server.post_json(
            "/druid/v2/sql",
            &json!({
                "query": format!("SELECT arrayString, arrayLong, arrayDouble FROM {table} LIMIT 1"),
                "resultFormat": "array", "header": true, "typesHeader": true
            }),
        );
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            body[1],
            json!(["ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>"]),
            "{table}"
        );
        assert_eq!(
            sorted(
                &server,
                &format!("SELECT __time, label, arrayString, arrayLong, arrayDouble FROM {table}")
            ),
            want_rows,
            "{table}"
        );
        assert_eq!(
            server.sql(&format!(
                "SELECT label FROM {table} WHERE ARRAY_CONTAINS(arrayString, 'a') ORDER BY label"
            )),
            vec![json!({"label": "row1"}), json!({"label": "row4"})],
            "{table}"
        );
    }
}

/// `castToType` fixes an `auto` dimension's type (scalars become one-element arrays, elements
/// that do not convert become null); without it mixed values get Druid's least restrictive
/// type: longs and doubles `DOUBLE`, numbers and strings `STRING`, a scalar and an array the
/// array type, long and double arrays `ARRAY<DOUBLE>`. Rollup groups on whole arrays.
#[test]
fn auto_dimension_types_cast_and_widen_like_druid() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let data = r#"{"timestamp": "2023-01-01", "ints": [1, 2], "mixed": 1, "nums": 1, "words": 1, "grow": [1], "cast": 7}
{"timestamp": "2023-01-01", "ints": [1, 2], "mixed": [2.5], "nums": 2.5, "words": "x", "grow": [1, 2.5], "cast": ["8", "x", 9.7]}
{"timestamp": "2023-01-01", "ints": [2, 1], "mixed": null, "nums": null, "words": null, "grow": ["a"], "cast": null}
"#;
    let spec = native_spec(
        "typed",
        data,
        json!({"dimensions": [
            {"type": "auto", "name": "ints"},
            {"type": "auto", "name": "mixed"},
            {"type": "auto", "name": "nums"},
            {"type": "auto", "name": "words"},
            {"type": "auto", "name": "grow"},
            {"type": "auto", "name": "cast", "castToType": "ARRAY<LONG>"}
        ]}),
        true,
    );
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({
            "query": "SELECT ints, mixed, nums, words, grow, \"cast\", \"count\" FROM typed ORDER BY \"count\" DESC, nums NULLS FIRST",
            "resultFormat": "array", "header": true, "typesHeader": true
        }),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body[1],
        json!([
            "ARRAY<LONG>",
            "ARRAY<DOUBLE>",
            "DOUBLE",
            "STRING",
            "ARRAY<STRING>",
            "ARRAY<LONG>",
            "LONG"
        ])
    );
    let rows: Vec<Value> = body.as_array().unwrap()[2..].to_vec();
    assert_eq!(
        rows,
        vec![
            json!(["[2,1]", null, null, null, "[\"a\"]", null, 1]),
            json!(["[1,2]", "[1.0]", 1.0, "1", "[\"1\"]", "[7]", 1]),
            // [1, 2.5] is an ARRAY<DOUBLE> value ([1.0, 2.5]) before the column widens to
            // ARRAY<STRING>.
            json!([
                "[1,2]",
                "[2.5]",
                2.5,
                "x",
                "[\"1.0\",\"2.5\"]",
                "[8,null,9]",
                1
            ]),
        ]
    );
    // Two identical rows roll up into one.
    let spec = native_spec(
        "rolled",
        "{\"timestamp\": \"2023-01-01\", \"a\": [1, 2]}\n{\"timestamp\": \"2023-01-01\", \"a\": [1, 2]}\n{\"timestamp\": \"2023-01-01\", \"a\": [2]}\n{\"timestamp\": \"2023-01-01\", \"a\": []}\n",
        json!({"dimensions": [{"type": "auto", "name": "a"}]}),
        true,
    );
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        sorted(&server, "SELECT a, \"count\" FROM rolled"),
        sorted_lines(
            r#"{"a":"[1,2]","count":2}
{"a":"[2]","count":1}
{"a":"[]","count":1}"#
        )
    );
    // A bad castToType is a 400 naming the dimension.
    let mut bad = spec.clone();
    bad["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"][0]["castToType"] =
        json!("ARRAY<MAP>");
    let (code, body) = server.post_json("/druid/indexer/v1/task", &bad);
    assert_eq!(code, 400, "{body}");
    assert!(body.to_string().contains("castToType"), "{body}");
}

/// Druid's `docs/release-info/migr-mvd-array.md`, "Examples": each query pair verbatim, over
/// `tags` stored as an `ARRAY<STRING>` (`array_example`) and as a multi-value string
/// (`mvd_example`, ingested through `ARRAY_TO_MV` as the guide says). The guide shows rows
/// `row1` `["t1","t2","t3"]` and `row2` `["t3","t4","t5"]`; a third row `["t5","t6","t7"]`
/// matches none of the `t3` filters.
#[test]
fn mvd_to_array_migration_guide_examples() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let data = r#"{"ts":"2024-01-01","label":"row1","tags":["t1","t2","t3"]}\n{"ts":"2024-01-01","label":"row2","tags":["t3","t4","t5"]}\n{"ts":"2024-01-01","label":"row3","tags":["t5","t6","t7"]}"#;
    for (table, tags) in [
        ("array_example", "\"tags\""),
        ("mvd_example", "ARRAY_TO_MV(\"tags\") AS \"tags\""),
    ] {
        let sql = format!(
            r#"REPLACE INTO "{table}" OVERWRITE ALL
SELECT TIME_PARSE("ts") AS "__time", "label", {tags}
FROM TABLE(EXTERN('{{"type":"inline","data":"{}"}}', '{{"type":"json"}}'))
  EXTEND ("ts" VARCHAR, "label" VARCHAR, "tags" VARCHAR ARRAY)
PARTITIONED BY DAY"#,
            data.replace('"', "\\\"")
        );
        let st = ingest(&server, &sql, json!({"arrayIngestMode": "array"}));
        assert_eq!(st["status"], "SUCCESS", "{st}");
    }
    let labels = |sql: &str| -> Vec<String> {
        let mut v: Vec<String> = server
            .sql(sql)
            .iter()
            .map(|r| r["label"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    // Filter by an array element.
    assert_eq!(
        labels("SELECT label, tags\nFROM \"array_example\"\nWHERE ARRAY_CONTAINS(tags, 't3')"),
        ["row1", "row2"]
    );
    assert_eq!(
        labels("SELECT label, tags\nFROM \"mvd_example\"\nWHERE tags = 't3'"),
        ["row1", "row2"]
    );
    // Filter by one or more elements.
    assert_eq!(
        labels("SELECT *\nFROM \"array_example\"\nWHERE ARRAY_OVERLAP(tags, ARRAY['t1', 't7'])"),
        ["row1", "row3"]
    );
    assert_eq!(
        labels("SELECT *\nFROM \"mvd_example\"\nWHERE tags = 't1' OR tags = 't7'"),
        ["row1", "row3"]
    );
    // Filter using array equality.
    assert_eq!(
        labels("SELECT *\nFROM \"array_example\"\nWHERE tags = ARRAY['t1', 't2', 't3']"),
        ["row1"]
    );
    assert_eq!(
        labels("SELECT *\nFROM \"mvd_example\"\nWHERE MV_TO_ARRAY(tags) = ARRAY['t1', 't2', 't3']"),
        ["row1"]
    );
    // Group results by array: one group per row, the whole array as the key.
    assert_eq!(
        sorted(
            &server,
            "SELECT label, tags\nFROM \"array_example\"\nGROUP BY 1, 2"
        ),
        sorted_lines(
            r#"{"label":"row1","tags":"[\"t1\",\"t2\",\"t3\"]"}
{"label":"row2","tags":"[\"t3\",\"t4\",\"t5\"]"}
{"label":"row3","tags":"[\"t5\",\"t6\",\"t7\"]"}"#
        )
    );
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT label, MV_TO_ARRAY(tags)\nFROM \"mvd_example\"\nGROUP BY 1, 2", "resultFormat": "array"}),
    );
    assert_eq!(code, 200, "{body}");
    let mut got = body.as_array().unwrap().clone();
    got.sort_by_key(|r| r.to_string());
    assert_eq!(
        got,
        vec![
            json!(["row1", "[\"t1\",\"t2\",\"t3\"]"]),
            json!(["row2", "[\"t3\",\"t4\",\"t5\"]"]),
            json!(["row3", "[\"t5\",\"t6\",\"t7\"]"]),
        ]
    );
    // Group by array elements: UNNEST for the array, implicit for the MVD.
    let by_element = sorted(
        &server,
        "SELECT label, strings\nFROM \"array_example\" CROSS JOIN UNNEST(tags) as u(strings)\nGROUP BY 1, 2",
    );
    assert_eq!(by_element.len(), 9, "{by_element:?}");
    let mvd = sorted(
        &server,
        "SELECT label, tags\nFROM \"mvd_example\"\nGROUP BY 1, 2",
    );
    let renamed: Vec<Value> = by_element
        .iter()
        .map(|r| json!({"label": r["label"], "tags": r["strings"]}))
        .collect();
    assert_eq!(mvd, renamed);
    // Filter and group by array elements: the guide's documented answers.
    assert_eq!(
        sorted(
            &server,
            "SELECT label, tags\nFROM \"array_example\"\nWHERE ARRAY_CONTAINS(tags, 't3')\nGROUP BY 1, 2"
        ),
        sorted_lines(
            r#"{"label":"row1","tags":"[\"t1\",\"t2\",\"t3\"]"}
{"label":"row2","tags":"[\"t3\",\"t4\",\"t5\"]"}"#
        )
    );
    assert_eq!(
        sorted(
            &server,
            "SELECT label, tags\nFROM \"mvd_example\"\nWHERE tags = 't3'\nGROUP BY 1, 2"
        ),
        sorted_lines(
            r#"{"label":"row1","tags":"t1"}
{"label":"row1","tags":"t2"}
{"label":"row1","tags":"t3"}
{"label":"row2","tags":"t3"}
{"label":"row2","tags":"t4"}
{"label":"row2","tags":"t5"}"#
        )
    );
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": "SELECT label, MV_FILTER_ONLY(tags, ARRAY['t3'])\nFROM \"mvd_example\"\nWHERE tags = 't3'\nGROUP BY 1, 2", "resultFormat": "array"}),
    );
    assert_eq!(code, 200, "{body}");
    let mut got = body.as_array().unwrap().clone();
    got.sort_by_key(|r| r.to_string());
    assert_eq!(got, vec![json!(["row1", "t3"]), json!(["row2", "t3"])]);
}

/// Streaming ingestion (a `logstream` supervisor) with the docs' `auto` dimensions: the arrays
/// are queryable from the running task's hydrants as `ARRAY<...>` columns, and the same after
/// an early handoff publishes the segment.
#[test]
fn streaming_ingestion_stores_arrays_in_hydrants_and_handoff() {
    use crate::supervisors::{brokers, new_topic, spec};
    use dolmen_stream::kafka::{KafkaTestProducer, ProducerRecord};
    let Some(brokers) = brokers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let topic = new_topic(&brokers, 1);
    let records: Vec<ProducerRecord> = ARRAY_EXAMPLE_ROWS
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["ts"] = json!(1_672_531_200_000i64 + i as i64);
            ProducerRecord::to_partition(0, v.to_string().into_bytes())
        })
        .collect();
    KafkaTestProducer::new(&brokers)
        .unwrap()
        .send_all(&topic, &records)
        .unwrap();
    let mut sup = spec("arrays_stream", &topic, &brokers, json!({}));
    sup["spec"]["dataSchema"]["dimensionsSpec"] = json!({"dimensions": [
        {"type": "auto", "name": "label"},
        {"type": "auto", "name": "arrayString"},
        {"type": "auto", "name": "arrayLong"},
        {"type": "auto", "name": "arrayDouble"}
    ]});
    sup["spec"]["dataSchema"]["metricsSpec"] = json!([]);
    let (code, body) = server.post_json("/druid/indexer/v1/supervisor", &sup);
    assert_eq!(code, 200, "{body}");
    let want = sorted_lines(
        r#"{"label":"row1","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,null,3]","arrayDouble":"[1.1,2.2,null]"}
{"label":"row2","arrayString":"[null,\"b\"]","arrayLong":null,"arrayDouble":"[999.0,null,5.5]"}
{"label":"row3","arrayString":"[]","arrayLong":"[1,2,3]","arrayDouble":"[null,2.2,1.1]"}
{"label":"row4","arrayString":"[\"a\",\"b\"]","arrayLong":"[1,2,3]","arrayDouble":"[]"}
{"label":"row5","arrayString":null,"arrayLong":"[]","arrayDouble":null}"#,
    );
    let query = "SELECT label, arrayString, arrayLong, arrayDouble FROM arrays_stream";
    let rows_now = || -> Vec<Value> {
        let (code, body) = server.post_json("/druid/v2/sql", &json!({"query": query}));
        if code != 200 {
            return Vec::new();
        }
        let mut rows = body.as_array().cloned().unwrap_or_default();
        rows.sort_by_key(|r| r.to_string());
        rows
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while rows_now().len() < 5 {
        assert!(std::time::Instant::now() < deadline, "rows not queryable");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(rows_now(), want);
    assert_eq!(
        column_types(&server, "arrays_stream")[2..],
        [
            ("arrayString".to_string(), "ARRAY".to_string()),
            ("arrayLong".to_string(), "ARRAY".to_string()),
            ("arrayDouble".to_string(), "ARRAY".to_string()),
        ]
    );
    let (code, body) = server.post_json(
        "/druid/indexer/v1/supervisor/arrays_stream/taskGroups/handoff",
        &json!({"taskGroupIds": [0]}),
    );
    assert_eq!(code, 202, "{body}");
    let published = || {
        server
            .sql("SELECT COALESCE(SUM(num_rows), 0) AS n FROM sys.segments WHERE datasource = 'arrays_stream' AND is_published = 1")[0]["n"]
            .as_i64()
            .unwrap_or(0)
    };
    while published() < 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "handoff did not publish"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(rows_now(), want);
    let (code, _) = server.post_json(
        "/druid/indexer/v1/supervisor/arrays_stream/terminate",
        &json!({}),
    );
    assert_eq!(code, 200);
}
