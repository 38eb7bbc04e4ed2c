//! Golden bytes of the synchronous SQL endpoint: every `resultFormat` with every valid
//! `header`/`typesHeader`/`sqlTypesHeader` combination, the Content-Type and the
//! `X-*-SQL-Header-Included` header, under both path prefixes (spec "Result formats of the
//! synchronous endpoint"; reference-behaviour "Exact bytes").

use serde_json::json;

use crate::common::Server;

/// Two rows covering a TIMESTAMP, a string that needs CSV quoting, a non-ASCII string, a null,
/// a negative BIGINT and DOUBLEs; ordered so the row order is fixed.
const QUERY: &str = "SELECT t, s, n, l, d FROM (VALUES \
     (TIMESTAMP '2015-09-12 00:46:58.771', 'a,\"b\"', CAST(NULL AS VARCHAR), 7, 1.5), \
     (TIMESTAMP '2015-09-12 01:00:00', 'é', 'x', -3, 0.25)) AS v(t, s, n, l, d) ORDER BY l";

const NAMES: [&str; 5] = ["t", "s", "n", "l", "d"];
const TYPES: [&str; 5] = ["LONG", "STRING", "STRING", "LONG", "DOUBLE"];
const SQL_TYPES: [&str; 5] = ["TIMESTAMP", "VARCHAR", "VARCHAR", "BIGINT", "DOUBLE"];

const OBJECT_ROWS: [&str; 2] = [
    r#"{"t":"2015-09-12T01:00:00.000Z","s":"é","n":"x","l":-3,"d":0.25}"#,
    r#"{"t":"2015-09-12T00:46:58.771Z","s":"a,\"b\"","n":null,"l":7,"d":1.5}"#,
];
const ARRAY_ROWS: [&str; 2] = [
    r#"["2015-09-12T01:00:00.000Z","é","x",-3,0.25]"#,
    r#"["2015-09-12T00:46:58.771Z","a,\"b\"",null,7,1.5]"#,
];
const CSV_ROWS: [&str; 2] = [
    "2015-09-12T01:00:00.000Z,é,x,-3,0.25",
    "2015-09-12T00:46:58.771Z,\"a,\"\"b\"\"\",,7,1.5",
];

/// The header object of the `object` formats.
fn object_header(types: bool, sql_types: bool) -> String {
    let cells: Vec<String> = (0..5)
        .map(|i| {
            let v = match (types, sql_types) {
                (false, false) => "null".to_string(),
                (true, false) => format!(r#"{{"type":"{}"}}"#, TYPES[i]),
                (false, true) => format!(r#"{{"sqlType":"{}"}}"#, SQL_TYPES[i]),
                (true, true) => {
                    format!(r#"{{"type":"{}","sqlType":"{}"}}"#, TYPES[i], SQL_TYPES[i])
                }
            };
            format!(r#""{}":{v}"#, NAMES[i])
        })
        .collect();
    format!("{{{}}}", cells.join(","))
}

/// The header rows of the `array` formats (JSON arrays) or `csv` (comma-joined).
fn row_headers(types: bool, sql_types: bool, json: bool) -> Vec<String> {
    let render = |cells: &[&str]| {
        if json {
            format!(
                "[{}]",
                cells
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        } else {
            cells.join(",")
        }
    };
    let mut out = vec![render(&NAMES)];
    if types {
        out.push(render(&TYPES));
    }
    if sql_types {
        out.push(render(&SQL_TYPES));
    }
    out
}

/// The exact body Druid's writers produce for this format and header combination.
fn expected(format: &str, header: bool, types: bool, sql_types: bool) -> String {
    let mut rows: Vec<String> = Vec::new();
    match format {
        "object" | "objectLines" => {
            if header {
                rows.push(object_header(types, sql_types));
            }
            rows.extend(OBJECT_ROWS.iter().map(|r| r.to_string()));
        }
        "array" | "arrayLines" => {
            if header {
                rows.extend(row_headers(types, sql_types, true));
            }
            rows.extend(ARRAY_ROWS.iter().map(|r| r.to_string()));
        }
        _ => {
            if header {
                rows.extend(row_headers(types, sql_types, false));
            }
            rows.extend(CSV_ROWS.iter().map(|r| r.to_string()));
        }
    }
    match format {
        // `[...]` then a newline.
        "object" | "array" => format!("[{}]\n", rows.join(",")),
        // One value per line, then one more newline; csv: each line ends `\n`, plus one more.
        _ => format!("{}\n\n", rows.join("\n")),
    }
}

#[test]
fn every_format_and_header_combination_has_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let combos = [
        (false, false, false),
        (true, false, false),
        (true, true, false),
        (true, false, true),
        (true, true, true),
    ];
    for (format, content_type) in [
        ("object", "application/json"),
        ("array", "application/json"),
        ("objectLines", "text/plain"),
        ("arrayLines", "text/plain"),
        ("csv", "text/csv"),
    ] {
        for (header, types, sql_types) in combos {
            for (prefix, header_name) in [
                ("/druid", "x-druid-sql-header-included"),
                ("/service", "x-service-sql-header-included"),
            ] {
                let body = json!({
                    "query": QUERY,
                    "resultFormat": format,
                    "header": header,
                    "typesHeader": types,
                    "sqlTypesHeader": sql_types,
                });
                let what =
                    format!("{prefix} {format} header={header} types={types} sql={sql_types}");
                let (code, headers, text) = server.post_raw(
                    &format!("{prefix}/v2/sql"),
                    Some("application/json"),
                    &body.to_string(),
                );
                assert_eq!(code, 200, "{what}: {text}");
                assert_eq!(text, expected(format, header, types, sql_types), "{what}");
                let ct = headers["content-type"].to_str().unwrap();
                assert!(ct.starts_with(content_type), "{what}: Content-Type {ct}");
                assert_eq!(
                    headers.get(header_name).map(|v| v.to_str().unwrap()),
                    header.then_some("yes"),
                    "{what}: {header_name}"
                );
            }
        }
    }

    // Type headers need `header`.
    for flag in ["typesHeader", "sqlTypesHeader"] {
        let (code, body) = server.post_json(
            "/druid/v2/sql",
            &json!({"query": QUERY, "resultFormat": "csv", flag: true}),
        );
        assert_eq!(code, 400, "{flag}: {body}");
        assert!(
            body["errorMessage"].as_str().unwrap().contains(flag),
            "{body}"
        );
    }

    // An empty result: only the header (and the closing bytes).
    let (code, _, text) = server.post_raw(
        "/druid/v2/sql",
        Some("application/json"),
        &json!({"query": format!("{QUERY} LIMIT 0"), "resultFormat": "csv", "header": true})
            .to_string(),
    );
    assert_eq!(code, 200);
    assert_eq!(text, "t,s,n,l,d\n\n");
    let (code, _, text) = server.post_raw(
        "/druid/v2/sql",
        Some("application/json"),
        &json!({"query": format!("{QUERY} LIMIT 0"), "resultFormat": "object"}).to_string(),
    );
    assert_eq!(code, 200);
    assert_eq!(text, "[]\n");
}
