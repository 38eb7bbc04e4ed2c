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
