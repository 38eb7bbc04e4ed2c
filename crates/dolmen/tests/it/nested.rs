//! Nested JSON columns (`COMPLEX<json>`, issue 20): Druid's `docs/querying/nested-columns.md`
//! examples over the rows its "Retrieve JSON data" answer shows (the docs load them from an
//! `http` URL; here the same rows are inline), loaded by native ingestion with the docs'
//! `dimensionsSpec`, by SQL with `COMPLEX<json>` in the signature and `EXTEND`, and by schema
//! discovery.

use serde_json::{Value, json};

use crate::common::Server;

/// The five rows of the docs' `SELECT * FROM nested_data_example` answer, as JSON lines.
const NESTED_ROWS: &str = r#"{"time":"2022-06-13T07:52:29Z","product":"Bike","department":"Sports","shipTo":{"firstName":"Russ","lastName":"Cole","address":{"street":"77173 Rusty Station","city":"South Yeseniabury","state":"WA","country":"BL","postalCode":"01893"},"phoneNumbers":[{"type":"primary","number":"891-374-6188 x74568"},{"type":"secondary","number":"1-248-998-4426 x33037"}]},"details":{"color":"sky blue","price":542.0}}
{"time":"2022-06-13T10:10:35Z","product":"Bike","department":"Sports","shipTo":{"firstName":"Henry","lastName":"Wuckert","address":{"street":"5643 Jan Walk","city":"Lake Bridget","state":"HI","country":"ME","postalCode":"70204-2939"},"phoneNumbers":[{"type":"primary","number":"593.475.0449 x86733"},{"type":"secondary","number":"638-372-1210"}]},"details":{"color":"ivory","price":955.0}}
{"time":"2022-06-13T13:57:38Z","product":"Sausages","department":"Grocery","shipTo":{"firstName":"Forrest","lastName":"Brekke","address":{"street":"41548 Collier Divide","city":"Wintheiserborough","state":"WA","country":"AD","postalCode":"27577-6784"},"phoneNumbers":[{"type":"primary","number":"(904) 890-0696 x581"},{"type":"secondary","number":"676.895.6759"}]},"details":{"price":8.0}}
{"time":"2022-06-13T21:37:06Z","product":"Mouse","department":"Computers","shipTo":{"firstName":"Rickey","lastName":"Rempel","address":{"street":"6232 Green Glens","city":"New Fermin","state":"HI","country":"CW","postalCode":"98912-1195"},"phoneNumbers":[{"type":"primary","number":"(689) 766-4272 x60778"},{"type":"secondary","number":"375.662.4737 x24707"}]},"details":{"color":"olive","price":90.0}}
{"time":"2022-06-14T10:32:08Z","product":"Keyboard","department":"Computers","shipTo":{"firstName":"Sandra","lastName":"Beatty","address":{"street":"293 Grant Well","city":"Loischester","state":"FL","country":"TV","postalCode":"88845-0066"},"phoneNumbers":[{"type":"primary","number":"1-788-771-7028 x8627"},{"type":"secondary","number":"1-460-496-4884 x887"}]},"details":{"color":"plum","price":40.0}}
"#;

/// The docs' native spec for `nested_data_example`, with the rows inline instead of `http`.
fn native_spec(data_source: &str, dimensions_spec: Value) -> Value {
    json!({
      "type": "index_parallel",
      "spec": {
        "ioConfig": {
          "type": "index_parallel",
          "inputSource": {"type": "inline", "data": NESTED_ROWS},
          "inputFormat": {"type": "json"}
        },
        "dataSchema": {
          "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": false},
          "dataSource": data_source,
          "timestampSpec": {"column": "time", "format": "auto"},
          "dimensionsSpec": dimensions_spec,
          "transformSpec": {}
        },
        "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}}
      }
    })
}

fn docs_dimensions() -> Value {
    json!({"dimensions": [
        "product",
        "department",
        {"type": "json", "name": "shipTo"},
        {"type": "json", "name": "details"}
    ]})
}

fn array_rows(server: &Server, sql: &str) -> Value {
    let (code, body) = server.post_json(
        "/druid/v2/sql",
        &json!({"query": sql, "resultFormat": "array", "header": true, "typesHeader": true, "sqlTypesHeader": true}),
    );
    assert_eq!(code, 200, "{sql}: {body}");
    body
}

/// The docs' "Display data types" and "Extract nested data elements" (plain and `RETURNING`)
/// answers, over the native-ingested, SQL-ingested and discovered tables alike.
#[test]
fn nested_columns_documented_queries() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = server.run_task(&native_spec("nested_data_example", docs_dimensions()));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let st = server.run_task(&native_spec(
        "discovered",
        json!({"useSchemaDiscovery": true}),
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let sql = format!(
        r#"REPLACE INTO msq_nested_data_example OVERWRITE ALL
SELECT
  TIME_PARSE("time") as __time,
  product,
  department,
  shipTo,
  details
FROM (
  SELECT * FROM
  TABLE(
    EXTERN(
      '{}',
      '{{"type":"json"}}',
      '[{{"name":"time","type":"string"}},{{"name":"product","type":"string"}},{{"name":"department","type":"string"}},{{"name":"shipTo","type":"COMPLEX<json>"}},{{"name":"details","type":"COMPLEX<json>"}}]'
    )
  )
)
PARTITIONED BY ALL"#,
        json!({"type": "inline", "data": NESTED_ROWS})
            .to_string()
            .replace('\'', "''")
    );
    let st = crate::arrays::ingest(&server, &sql, json!({}));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let extend = format!(
        r#"REPLACE INTO extended OVERWRITE ALL
SELECT TIME_PARSE("time") AS __time, product, department, shipTo, details
FROM TABLE(EXTERN('{}', '{{"type":"json"}}'))
  EXTEND ("time" VARCHAR, product VARCHAR, department VARCHAR, shipTo COMPLEX<json>, details COMPLEX<json>)
PARTITIONED BY ALL"#,
        json!({"type": "inline", "data": NESTED_ROWS})
            .to_string()
            .replace('\'', "''")
    );
    let st = crate::arrays::ingest(&server, &extend, json!({}));
    assert_eq!(st["status"], "SUCCESS", "{st}");

    for table in [
        "nested_data_example",
        "msq_nested_data_example",
        "extended",
        "discovered",
    ] {
        let mut types = server.sql(&format!(
            "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE\nFROM INFORMATION_SCHEMA.COLUMNS\nWHERE TABLE_NAME = '{table}'"
        ));
        types.sort_by_key(|r| r["COLUMN_NAME"].as_str().unwrap().to_string());
        let want: Vec<Value> = [
            ("__time", "TIMESTAMP"),
            ("department", "VARCHAR"),
            ("details", "COMPLEX<json>"),
            ("product", "VARCHAR"),
            ("shipTo", "COMPLEX<json>"),
        ]
        .iter()
        .map(|(c, t)| json!({"TABLE_NAME": table, "COLUMN_NAME": c, "DATA_TYPE": t}))
        .collect();
        assert_eq!(types, want, "{table}");
        let body = array_rows(
            &server,
            &format!(
                "SELECT\n  product,\n  department,\n  JSON_VALUE(shipTo, '$.address.country') as country,\n  JSON_VALUE(shipTo, '$.phoneNumbers[0].number') as primaryPhone,\n  JSON_VALUE(details, '$.price') as price\nFROM {table} ORDER BY __time"
            ),
        );
        assert_eq!(
            body,
            json!([
                ["product", "department", "country", "primaryPhone", "price"],
                ["STRING", "STRING", "STRING", "STRING", "STRING"],
                ["VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"],
                ["Bike", "Sports", "BL", "891-374-6188 x74568", "542.0"],
                ["Bike", "Sports", "ME", "593.475.0449 x86733", "955.0"],
                ["Sausages", "Grocery", "AD", "(904) 890-0696 x581", "8.0"],
                ["Mouse", "Computers", "CW", "(689) 766-4272 x60778", "90.0"],
                [
                    "Keyboard",
                    "Computers",
                    "TV",
                    "1-788-771-7028 x8627",
                    "40.0"
                ]
            ]),
            "{table}"
        );
        let body = array_rows(
            &server,
            &format!(
                "SELECT\n  product,\n  department,\n  JSON_VALUE(shipTo, '$.address.country') as country,\n  JSON_VALUE(details, '$.price' RETURNING BIGINT) as price_int,\n  JSON_VALUE(details, '$.price' RETURNING DECIMAL) as price_decimal,\n  JSON_VALUE(details, '$.price' RETURNING VARCHAR) as price_varchar\nFROM {table} ORDER BY __time"
            ),
        );
        assert_eq!(
            body,
            json!([
                [
                    "product",
                    "department",
                    "country",
                    "price_int",
                    "price_decimal",
                    "price_varchar"
                ],
                ["STRING", "STRING", "STRING", "LONG", "DOUBLE", "STRING"],
                [
                    "VARCHAR", "VARCHAR", "VARCHAR", "BIGINT", "DECIMAL", "VARCHAR"
                ],
                ["Bike", "Sports", "BL", 542, 542.0, "542.0"],
                ["Bike", "Sports", "ME", 955, 955.0, "955.0"],
                ["Sausages", "Grocery", "AD", 8, 8.0, "8.0"],
                ["Mouse", "Computers", "CW", 90, 90.0, "90.0"],
                ["Keyboard", "Computers", "TV", 40, 40.0, "40.0"]
            ]),
            "{table}"
        );
        // The stored value is the JSON itself: a JSON object in the JSON formats, with the
        // `COMPLEX<json>` / `OTHER` headers.
        let body = array_rows(
            &server,
            &format!("SELECT details FROM {table} WHERE product = 'Sausages'"),
        );
        assert_eq!(
            body,
            json!([["details"], ["COMPLEX<json>"], ["OTHER"], [{"price": 8.0}]]),
            "{table}"
        );
    }
}

/// The docs' "Grouping and filtering", "Return results in a JSON object", "Combine multiple
/// JSON inputs" and "Examine JSON object schema" queries over the stored nested columns, and
/// the "Transform data during batch ingestion" spec (`json_value`, `json_query`, `json_object`
/// transforms into `json` dimensions).
#[test]
fn nested_columns_queries_and_transforms() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = server.run_task(&native_spec("nested_data_example", docs_dimensions()));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let body = array_rows(
        &server,
        "SELECT\n  product,\n  JSON_VALUE(shipTo, '$.address.country'),\n  SUM(JSON_VALUE(details, '$.price' RETURNING BIGINT))\nFROM nested_data_example\nWHERE JSON_VALUE(shipTo, '$.address.country') in ('BL', 'CW')\nGROUP BY 1,2\nORDER BY 3 DESC",
    );
    assert_eq!(
        body,
        json!([
            ["product", "EXPR$1", "EXPR$2"],
            ["STRING", "STRING", "LONG"],
            ["VARCHAR", "VARCHAR", "BIGINT"],
            ["Bike", "BL", 542],
            ["Mouse", "CW", 90]
        ])
    );
    // JSON_VALUE of an object or array is null (SQL-compatible mode; the docs' "" is the
    // legacy mode's null); JSON_QUERY returns the JSON.
    let body = array_rows(
        &server,
        "SELECT\n  JSON_VALUE(shipTo, '$.address'),\n  JSON_QUERY(shipTo, '$.address'),\n  JSON_VALUE(shipTo, '$.phoneNumbers'),\n  JSON_QUERY(shipTo, '$.phoneNumbers')\nFROM nested_data_example ORDER BY __time LIMIT 1",
    );
    assert_eq!(
        body,
        json!([["EXPR$0","EXPR$1","EXPR$2","EXPR$3"],["STRING","COMPLEX<json>","STRING","COMPLEX<json>"],["VARCHAR","OTHER","VARCHAR","OTHER"],
            [null, {"street":"77173 Rusty Station","city":"South Yeseniabury","state":"WA","country":"BL","postalCode":"01893"}, null,
             [{"type":"primary","number":"891-374-6188 x74568"},{"type":"secondary","number":"1-248-998-4426 x33037"}]]])
    );
    let body = array_rows(
        &server,
        "SELECT\n  JSON_OBJECT(KEY 'shipTo' VALUE JSON_QUERY(shipTo, '$'), KEY 'details' VALUE JSON_QUERY(details, '$')) as combinedJson\nFROM nested_data_example ORDER BY __time LIMIT 1",
    );
    assert_eq!(
        body[3][0],
        json!({"details":{"color":"sky blue","price":542.0},"shipTo":{"firstName":"Russ","lastName":"Cole","address":{"street":"77173 Rusty Station","city":"South Yeseniabury","state":"WA","country":"BL","postalCode":"01893"},"phoneNumbers":[{"type":"primary","number":"891-374-6188 x74568"},{"type":"secondary","number":"1-248-998-4426 x33037"}]}})
    );
    assert_eq!(body[1], json!(["COMPLEX<json>"]));
    let rows = server.sql(
        "SELECT\n  ARRAY_CONCAT_AGG(DISTINCT JSON_KEYS(shipTo, '$.')),\n  ARRAY_CONCAT_AGG(DISTINCT JSON_KEYS(shipTo, '$.address')),\n  ARRAY_CONCAT_AGG(DISTINCT JSON_PATHS(shipTo))\nFROM nested_data_example",
    );
    let sorted_list = |v: &Value| -> Vec<String> {
        let mut l: Vec<String> = serde_json::from_str(v.as_str().unwrap()).unwrap();
        l.sort();
        l
    };
    assert_eq!(
        sorted_list(&rows[0]["EXPR$0"]),
        ["address", "firstName", "lastName", "phoneNumbers"]
    );
    assert_eq!(
        sorted_list(&rows[0]["EXPR$1"]),
        ["city", "country", "postalCode", "state", "street"]
    );
    assert!(
        sorted_list(&rows[0]["EXPR$2"]).contains(&"$.address.city".to_string()),
        "{rows:?}"
    );
    // UNNEST of a JSON array inside a stored column.
    let rows = server.sql(
        "SELECT COUNT(*) AS n FROM nested_data_example CROSS JOIN UNNEST(JSON_QUERY_ARRAY(shipTo, '$.phoneNumbers')) AS p(phone)",
    );
    assert_eq!(rows, vec![json!({"n": 10})]);

    // The docs' transform spec.
    let mut spec = native_spec(
        "nested_data_transform_example",
        json!({"dimensions": [
            "firstName",
            "lastName",
            {"type": "json", "name": "address"},
            {"type": "json", "name": "productDetails"}
        ]}),
    );
    spec["spec"]["dataSchema"]["transformSpec"] = json!({"transforms": [
        { "type":"expression", "name":"firstName", "expression":"json_value(shipTo, '$.firstName')"},
        { "type":"expression", "name":"lastName", "expression":"json_value(shipTo, '$.lastName')"},
        { "type":"expression", "name":"address", "expression":"json_query(shipTo, '$.address')"},
        { "type":"expression", "name":"productDetails", "expression":"json_object('product', product, 'details', details, 'department', department)"}
    ]});
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let body = array_rows(
        &server,
        "SELECT firstName, lastName, address, productDetails, JSON_VALUE(productDetails, '$.details.price' RETURNING DOUBLE) AS price FROM nested_data_transform_example ORDER BY __time LIMIT 1",
    );
    assert_eq!(
        body,
        json!([["firstName","lastName","address","productDetails","price"],["STRING","STRING","COMPLEX<json>","COMPLEX<json>","DOUBLE"],["VARCHAR","VARCHAR","OTHER","OTHER","DOUBLE"],
            ["Russ","Cole",{"street":"77173 Rusty Station","city":"South Yeseniabury","state":"WA","country":"BL","postalCode":"01893"},
             {"product":"Bike","details":{"color":"sky blue","price":542.0},"department":"Sports"}, 542.0]])
    );
}

/// Re-indexing (the `druid` input source, as compaction and reindex tasks read) keeps nested
/// JSON and array values: JSON columns come back as JSON (not as strings of JSON text), array
/// columns as arrays.
#[test]
fn reindexing_keeps_json_and_array_columns() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let st = server.run_task(&native_spec("nested_data_example", docs_dimensions()));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let st = crate::arrays::ingest(
        &server,
        r#"REPLACE INTO arrays OVERWRITE ALL
SELECT TIME_PARSE("t") AS __time, "l", "d"
FROM TABLE(EXTERN('{"type":"inline","data":"{\"t\":\"2022-06-13\",\"l\":[1,null,3],\"d\":[2.5]}\n{\"t\":\"2022-06-13\",\"l\":[],\"d\":null}"}', '{"type":"json"}'))
  EXTEND ("t" VARCHAR, "l" BIGINT ARRAY, "d" DOUBLE ARRAY)
PARTITIONED BY DAY"#,
        json!({}),
    );
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let reindex = |from: &str, to: &str, dims: Value| {
        json!({
          "type": "index_parallel",
          "spec": {
            "ioConfig": {
              "type": "index_parallel",
              "inputSource": {"type": "druid", "dataSource": from, "interval": "2022-06-01/2022-07-01"},
              "inputFormat": null
            },
            "dataSchema": {
              "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": false},
              "dataSource": to,
              "timestampSpec": {"column": "__time", "format": "millis"},
              "dimensionsSpec": dims
            }
          }
        })
    };
    let st = server.run_task(&reindex(
        "nested_data_example",
        "nested_again",
        docs_dimensions(),
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let st = server.run_task(&reindex(
        "arrays",
        "arrays_again",
        json!({"dimensions": [{"type": "auto", "name": "l"}, {"type": "auto", "name": "d"}]}),
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    for (a, b, order) in [
        ("nested_data_example", "nested_again", "__time"),
        ("arrays", "arrays_again", "__time, ARRAY_LENGTH(l)"),
    ] {
        let q = |t: &str| array_rows(&server, &format!("SELECT * FROM {t} ORDER BY {order}"));
        assert_eq!(q(a), q(b), "{a} vs {b}");
    }
}

/// Rows of the shredding test: day `day` (0 or 1), `n` rows; `nested` holds a string `a`, an
/// integer `b`, a double `p`, an object `c` with a string `d`, and an array.
fn shred_rows(day: i64, n: i64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let k = day * n + i;
            json!({
                "ts": 1_767_225_600_000i64 + day * 86_400_000 + i * 1000,
                "a": format!("v{}", k % 5),
                "nested": {
                    "a": format!("v{}", k % 5),
                    "b": k % 7,
                    "p": (k % 4) as f64 * 0.5 + 0.25,
                    "c": {"d": format!("x{}", k % 3)},
                    "arr": [k, k + 1]
                }
            })
        })
        .collect()
}

fn json_lines(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

fn shred_spec(data_source: &str, rows: &[Value], input: Option<Value>) -> Value {
    let input = input.unwrap_or_else(|| json!({"type": "inline", "data": json_lines(rows)}));
    json!({
      "type": "index_parallel",
      "spec": {
        "ioConfig": {"type": "index_parallel", "inputSource": input, "inputFormat": {"type": "json"}},
        "dataSchema": {
          "dataSource": data_source,
          "timestampSpec": {"column": "ts", "format": "millis"},
          "dimensionsSpec": {"dimensions": ["a", {"type": "json", "name": "nested"}]},
          "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": false}
        },
        "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}}
      }
    })
}

/// The `PLAN` text of `EXPLAIN PLAN FOR sql`.
fn explain(server: &Server, sql: &str) -> String {
    let rows = server.sql(&format!("EXPLAIN PLAN FOR {sql}"));
    rows[0]["PLAN"].as_str().unwrap().to_string()
}

/// Issue 20: JSON columns are shredded into hidden typed sub-columns at segment write, and
/// `JSON_VALUE` of a literal path reads them when every segment has them. Native (`json`
/// dimension), SQL (`COMPLEX<json>`) and re-ingested (`druid` input source) datasources give
/// the answers computed from the rows; a datasource with one segment written with shredding
/// off (`DOLMEN_SHRED_NESTED=false`, as before shredding existed) falls back to the text with
/// the same answers; the plans show which columns are read; the sub-columns show nowhere.
#[test]
fn shredded_sub_columns_answer_json_value() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    let (day0, day1) = (shred_rows(0, n), shred_rows(1, n));
    let all: Vec<Value> = day0.iter().chain(&day1).cloned().collect();
    // The first day of `nested_mixed`, written without sub-columns.
    let server = Server::start_with_env(dir.path(), &[], &[("DOLMEN_SHRED_NESTED", "false")]);
    let st = server.run_task(&shred_spec("nested_mixed", &day0, None));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(server.terminate().code(), Some(0));

    let server = Server::start(dir.path());
    for (ds, rows) in [("nested_mixed", &day1), ("nested_native", &all)] {
        let st = server.run_task(&shred_spec(ds, rows, None));
        assert_eq!(st["status"], "SUCCESS", "{ds}: {st}");
    }
    let sql = format!(
        r#"REPLACE INTO nested_sql OVERWRITE ALL
SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, a, nested
FROM TABLE(EXTERN('{}', '{{"type":"json"}}'))
  EXTEND (ts BIGINT, a VARCHAR, nested COMPLEX<json>)
PARTITIONED BY DAY"#,
        json!({"type": "inline", "data": json_lines(&all)})
            .to_string()
            .replace('\'', "''")
    );
    let st = crate::arrays::ingest(&server, &sql, json!({}));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    // Secondary partitioning re-reads each chunk's file and shreds every partition anew.
    let mut hashed = shred_spec("nested_hashed", &all, None);
    hashed["spec"]["tuningConfig"] = json!({"type": "index_parallel", "forceGuaranteedRollup": true,
        "partitionsSpec": {"type": "hashed", "numShards": 2, "partitionDimensions": ["a"]}});
    let st = server.run_task(&hashed);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let reindex = shred_spec(
        "nested_reindexed",
        &[],
        Some(json!({"type": "druid", "dataSource": "nested_native",
                    "interval": "2026-01-01/2026-01-03"})),
    );
    let mut reindex = reindex;
    reindex["spec"]["dataSchema"]["timestampSpec"] =
        json!({"column": "__time", "format": "millis"});
    let st = server.run_task(&reindex);
    assert_eq!(st["status"], "SUCCESS", "{st}");

    // Expected answers, from the rows.
    let nested = |r: &Value| r["nested"].clone();
    let count_a = |v: &str| all.iter().filter(|r| nested(r)["a"] == v).count();
    let filter_want = json!([
        {"a": "v1", "c": count_a("v1")},
        {"a": "v3", "c": count_a("v3")}
    ]);
    let mut group_want: Vec<Value> = Vec::new();
    for d in ["x0", "x1", "x2"] {
        let rows: Vec<&Value> = all.iter().filter(|r| nested(r)["c"]["d"] == d).collect();
        group_want.push(json!({
            "d": d,
            "b": rows.iter().map(|r| nested(r)["b"].as_i64().unwrap()).sum::<i64>(),
            "p": rows.iter().map(|r| nested(r)["p"].as_f64().unwrap()).sum::<f64>(),
            "n": rows.len(),
        }));
    }
    let b3 = all.iter().filter(|r| nested(r)["b"] == 3).count();
    let queries = [
        (
            "SELECT JSON_VALUE(nested, '$.a') AS a, COUNT(*) AS c FROM {t} \
             WHERE JSON_VALUE(nested, '$.a') IN ('v1', 'v3') GROUP BY 1 ORDER BY 1",
            filter_want,
        ),
        (
            "SELECT JSON_VALUE(nested, '$.c.d') AS d, \
             SUM(JSON_VALUE(nested, '$.b' RETURNING BIGINT)) AS b, \
             SUM(JSON_VALUE(nested, '$.p' RETURNING DOUBLE)) AS p, COUNT(*) AS n \
             FROM {t} GROUP BY 1 ORDER BY 1",
            Value::Array(group_want),
        ),
        (
            "SELECT COUNT(*) AS n FROM {t} WHERE JSON_VALUE(nested, '$.b' RETURNING BIGINT) = 3",
            json!([{"n": b3}]),
        ),
        (
            "SELECT JSON_VALUE(nested, '$.p') AS p, JSON_VALUE(nested, '$.b') AS b, \
             JSON_VALUE(nested, '$.arr[1]') AS x FROM {t} ORDER BY __time LIMIT 2",
            json!([{"p": "0.25", "b": "0", "x": "1"}, {"p": "0.75", "b": "1", "x": "2"}]),
        ),
    ];
    for ds in [
        "nested_native",
        "nested_sql",
        "nested_hashed",
        "nested_reindexed",
        "nested_mixed",
    ] {
        for (q, want) in &queries {
            let sql = q.replace("{t}", ds);
            assert_eq!(Value::Array(server.sql(&sql)), *want, "{sql}");
        }
        // The plan reads the sub-columns where every segment has them.
        let plan = explain(&server, &queries[0].0.replace("{t}", ds));
        if ds == "nested_mixed" {
            assert!(!plan.contains("__dolmen_nested"), "{ds}: {plan}");
            assert!(plan.contains("json_value"), "{ds}: {plan}");
        } else {
            assert!(plan.contains("__dolmen_nested:nested/a"), "{ds}: {plan}");
        }
        // ... and they show nowhere: SELECT *, INFORMATION_SCHEMA, sys.segments, payloads.
        let star = server.sql(&format!("SELECT * FROM {ds} LIMIT 1"));
        let mut keys: Vec<&String> = star[0].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["__time", "a", "nested"], "{ds}");
        let columns = server.sql(&format!(
            "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = '{ds}' \
             ORDER BY 1"
        ));
        assert_eq!(
            Value::Array(columns),
            json!([{"COLUMN_NAME": "__time"}, {"COLUMN_NAME": "a"}, {"COLUMN_NAME": "nested"}]),
            "{ds}"
        );
        for seg in server.sql(&format!(
            "SELECT dimensions FROM sys.segments WHERE datasource = '{ds}'"
        )) {
            assert_eq!(seg["dimensions"], "[\"a\",\"nested\"]", "{ds}");
        }
        let (_, payloads) = server.get_json(&format!(
            "/druid/coordinator/v1/metadata/datasources/{ds}/segments?full"
        ));
        for p in payloads.as_array().unwrap() {
            assert_eq!(p["dimensions"], "a,nested", "{ds}");
        }
    }
    // The re-ingested rows carry the JSON column only (its sub-columns were written anew).
    let (_, payload) = server
        .get_json("/druid/coordinator/v1/metadata/datasources/nested_reindexed/segments?full");
    let columns = &payload[0]["columns"];
    assert_eq!(columns.as_array().unwrap().len(), 2, "{columns}");
    assert_eq!(
        columns[1]["nestedPaths"],
        json!([{"path": ["a"], "type": "string"}, {"path": ["b"], "type": "long"},
               {"path": ["p"], "type": "double"}, {"path": ["c", "d"], "type": "string"}]),
        "{columns}"
    );
    assert_eq!(columns[1]["nestedComplete"], json!(true), "{columns}");
}
