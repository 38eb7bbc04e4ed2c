//! Lookups end to end: the coordinator's lookups API under both prefixes (Druid's
//! `LookupCoordinatorResource`), its error shapes and version rule, persistence across a
//! `kill -9`, `cachedNamespace` lookups over local files, and SQL: `LOOKUP` with two and three
//! arguments, `GROUP BY LOOKUP(..)`, `lookup."name"` tables, `INFORMATION_SCHEMA` rows, and a
//! changed lookup read by the very next query.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, inline_spec};

const SERVICE: &str = "/service/coordinator/v1/lookups";
const DRUID: &str = "/druid/coordinator/v1/lookups";

fn map_lookup(version: &str, map: Value) -> Value {
    json!({"version": version, "lookupExtractorFactory": {"type": "map", "map": map}})
}

/// `POST path` with a JSON body given as text; returns the status and the body as JSON (null
/// when empty).
fn post_text(server: &Server, path: &str, body: &str) -> (u16, Value) {
    let (code, _, text) = server.post_raw(path, Some("application/json"), body);
    (code, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asserts a Dolmen error body `{"error": message}` whose message contains `needle`.
fn assert_error(resp: (u16, Value), status: u16, needle: &str) {
    let (code, body) = resp;
    assert_eq!(code, status, "{body}");
    let msg = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {body}"));
    assert!(msg.contains(needle), "[{needle}] not in [{msg}]");
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
}

#[test]
fn the_lookups_api_answers_as_druids_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    // Not initialized: 404 everywhere but ?discover, and only {} is accepted.
    for prefix in [SERVICE, DRUID] {
        assert_error(
            server.get_json(&format!("{prefix}/config")),
            404,
            "No lookups found",
        );
        assert_error(server.get_json(&format!("{prefix}/config/all")), 404, "");
        assert_error(
            server.get_json(&format!("{prefix}/status")),
            404,
            "No lookups found",
        );
        assert_eq!(
            server.get_json(&format!("{prefix}/config?discover=true")),
            (200, json!(["__default"]))
        );
    }
    let first = json!({"__default": {"country": map_lookup("v1", json!({"US": "United States"}))}});
    assert_error(
        server.post_json(&format!("{DRUID}/config"), &first),
        400,
        "Not initialized. If this is the first lookup, post an empty map to initialize",
    );
    assert_eq!(
        server.post_json(&format!("{DRUID}/config"), &json!({})),
        (202, json!({}))
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config")),
        (200, json!([]))
    );

    // Bulk create under /druid, read back under /service (and the other way round).
    let (code, echoed) = server.post_json(&format!("{DRUID}/config"), &first);
    assert_eq!((code, &echoed), (202, &first));
    let hot = map_lookup("v0", json!({"US": "USA"}));
    assert_eq!(
        server.post_json(&format!("{SERVICE}/config/hot/country"), &hot),
        (202, Value::Null)
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config/__default/country")),
        (200, map_lookup("v1", json!({"US": "United States"})))
    );
    assert_eq!(
        server.get_json(&format!("{DRUID}/config/hot/country")),
        (200, hot.clone())
    );
    assert_eq!(
        server.get_json(&format!("{DRUID}/config")),
        (200, json!(["__default", "hot"]))
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config/hot")),
        (200, json!(["country"]))
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config/hot?detailed=true")),
        (200, json!({"country": hot}))
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config/all")).1,
        json!({
            "__default": {"country": map_lookup("v1", json!({"US": "United States"}))},
            "hot": {"country": hot}
        })
    );

    // The version rule: an update needs a greater version, compared as strings.
    for v in ["v1", "v0", "V9"] {
        assert_error(
            server.post_json(
                &format!("{DRUID}/config/__default/country"),
                &map_lookup(v, json!({"US": "changed"})),
            ),
            400,
            "given update for lookup [__default]:[country] can't replace existing spec",
        );
    }
    assert_eq!(
        server.post_json(
            &format!("{DRUID}/config/__default/country"),
            &map_lookup("v2", json!({"US": "U.S."})),
        ),
        (202, Value::Null)
    );
    assert_eq!(
        server
            .get_json(&format!("{SERVICE}/config/__default/country"))
            .1["version"],
        "v2"
    );
    // A bulk update is all or nothing.
    assert_error(
        server.post_json(
            &format!("{DRUID}/config"),
            &json!({"__default": {
                "fresh": map_lookup("v1", json!({})),
                "country": map_lookup("v2", json!({}))
            }}),
        ),
        400,
        "[__default]:[country]",
    );
    assert_error(
        server.get_json(&format!("{SERVICE}/config/__default/fresh")),
        404,
        "lookup [fresh] not found",
    );

    // Bad input: 400 naming the field, 415 for another media type; never a 500.
    let bad = [
        ("{", "Invalid request payload"),
        ("[1, 2]", "Invalid request payload"),
        (
            r#"{"t": {"l": {"lookupExtractorFactory": {"type": "map", "map": {}}}}}"#,
            "lookup [t]:[l] does not have version",
        ),
        (
            r#"{"t": {"l": {"version": "v1"}}}"#,
            "lookupExtractorFactory",
        ),
        (
            r#"{"t": {"l": {"version": {}, "lookupExtractorFactory": {}}}}"#,
            "t.l.version",
        ),
        (
            r#"{"t": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "jdbc"}}}}"#,
            "lookupExtractorFactory.type: unknown lookup type [jdbc]",
        ),
        (
            r#"{"t": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "map"}}}}"#,
            "missing field `map`",
        ),
        (
            r#"{"t": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"a": [1]}}}}}"#,
            "lookupExtractorFactory.map.a",
        ),
        (
            r#"{"t": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {}, "colour": 1}}}}"#,
            "colour",
        ),
        (
            r#"{"t": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "cachedNamespace", "extractionNamespace": {"type": "uri", "uri": "s3://bucket/key.csv", "namespaceParseSpec": {"format": "csv", "columns": ["k", "v"]}}}}}}"#,
            "extractionNamespace.uri: scheme [s3]",
        ),
        (
            r#"{"t": {"l": {"version": "v1", "lookupExtractorFactory": {"type": "cachedNamespace", "extractionNamespace": {"type": "jdbc"}}}}}"#,
            "extractionNamespace.type",
        ),
        (r#"{"": {}}"#, "tier name must not be empty"),
        (
            r#"{"t": {"": {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {}}}}}"#,
            "lookup name in tier [t] must not be empty",
        ),
        (r#"{"t": 5}"#, "Invalid request payload: t"),
    ];
    for (body, needle) in bad {
        assert_error(
            post_text(&server, &format!("{DRUID}/config"), body),
            400,
            needle,
        );
    }
    assert_error(
        post_text(&server, &format!("{SERVICE}/config/t/l"), ""),
        400,
        "a JSON body is required",
    );
    assert_error(
        post_text(
            &server,
            &format!("{SERVICE}/config/t/l"),
            r#"{"version": "v1"}"#,
        ),
        400,
        "lookupExtractorFactory",
    );
    let (code, _, _) = server.post_raw(&format!("{DRUID}/config"), Some("text/plain"), "{}");
    assert_eq!(code, 415);
    assert_error(
        server.get_json(&format!("{SERVICE}/config/%FF")),
        400,
        "invalid path",
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config")).1,
        json!(["__default", "hot"])
    );

    // Hostile but valid names: spaces, slashes, quotes and non-ASCII, through the path.
    let weird = "a b/c'ü";
    let encoded = "a%20b%2Fc'%C3%BC";
    assert_eq!(
        server.post_json(
            &format!("{SERVICE}/config/%3Ctier%3E;--/{encoded}"),
            &map_lookup("1", json!({"k": "weird value"})),
        ),
        (202, Value::Null)
    );
    assert_eq!(
        server.get_json(&format!("{DRUID}/config/%3Ctier%3E;--")).1,
        json!([weird])
    );
    assert_eq!(
        server.sql("SELECT LOOKUP('k', 'a b/c''ü') AS v"),
        vec![json!({"v": "weird value"})]
    );

    // Status: one process, the only node of every tier.
    let node = server.url.trim_start_matches("http://").to_string();
    assert_eq!(
        server.get_json(&format!("{SERVICE}/status/__default/country")),
        (200, json!({"loaded": true}))
    );
    assert_eq!(
        server.get_json(&format!("{DRUID}/status/__default?detailed=true")),
        (
            200,
            json!({"country": {"loaded": true, "pendingNodes": []}})
        )
    );
    let (code, all) = server.get_json(&format!("{DRUID}/status"));
    assert_eq!(code, 200);
    assert_eq!(
        all["hot"]["country"],
        json!({"loaded": true}),
        "v0 is older than the served v2"
    );
    // A newer definition in another tier is not the one served.
    server.post_json(
        &format!("{SERVICE}/config/hot/country"),
        &map_lookup("v7", json!({"US": "hot"})),
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/status/hot/country?detailed=true")),
        (200, json!({"loaded": false, "pendingNodes": [node]}))
    );
    assert_error(
        server.get_json(&format!("{SERVICE}/status/nope")),
        404,
        "No lookups found for tier [nope].",
    );
    assert_error(
        server.get_json(&format!("{SERVICE}/status/hot/nope")),
        404,
        "Lookup [nope] not found for tier [hot].",
    );
    let (code, nodes) = server.get_json(&format!("{DRUID}/nodeStatus?detailed=false"));
    assert_eq!(code, 200);
    assert_eq!(nodes["__default"][&node]["current"]["country"], "v2");
    assert_eq!(
        server.get_json(&format!("{DRUID}/nodeStatus/hot/{node}")).1["current"]["country"]["version"],
        "v2"
    );
    assert_error(
        server.get_json(&format!("{DRUID}/nodeStatus/hot/elsewhere:1")),
        404,
        "Node [elsewhere:1] status is unknown.",
    );

    // Deletes: one lookup, then the tier goes with its last one; unknown ones are 404.
    assert_eq!(
        server.delete(&format!("{DRUID}/config/__default/country")),
        (202, Value::Null)
    );
    assert_error(
        server.delete(&format!("{DRUID}/config/__default/country")),
        404,
        "not found",
    );
    assert_error(
        server.get_json(&format!("{SERVICE}/config/__default")),
        404,
        "Tier [__default] not found",
    );
    // With the default tier's definition gone, hot's is served.
    assert_eq!(
        server.sql("SELECT LOOKUP('US', 'country') AS v"),
        vec![json!({"v": "hot"})]
    );
    assert_eq!(
        server.delete(&format!("{SERVICE}/config/hot")),
        (202, Value::Null)
    );
    assert_error(
        server.delete(&format!("{SERVICE}/config/hot")),
        404,
        "Tier [hot] not found",
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/config")).1,
        json!(["<tier>;--"])
    );
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT LOOKUP('US', 'country')"}),
    );
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"], "Plan validation failed");
    assert_eq!(body["errorMessage"], "Lookup [country] not found");
}

/// Waits until `query`'s single value equals `want` (polls run in the background).
fn wait_for_value(server: &Server, query: &str, want: &Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = server.sql(query);
        if rows.first().and_then(|r| r.get("v")) == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{query}: {rows:?}, waiting for {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn lookups_survive_a_kill_9_and_files_are_polled() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let csv = files.path().join("pages.csv");
    std::fs::write(&csv, "name,id\nMain Page,p1\n\"Talk, page\",p2\n").unwrap();
    std::fs::write(
        files.path().join("codes-1.json"),
        "{\"code\": \"a\", \"label\": \"Alpha\"}\n{\"code\": \"b\", \"label\": null}\n",
    )
    .unwrap();
    let server = Server::start(dir.path());
    assert_eq!(
        server.post_json(&format!("{DRUID}/config"), &json!({})).0,
        202
    );
    let config = json!({
        "__default": {
            "inline": map_lookup("v1", json!({"x": "ex"})),
            "pages": {"version": "v1", "lookupExtractorFactory": {
                "type": "cachedNamespace",
                "extractionNamespace": {
                    "type": "uri", "uri": format!("file:{}", csv.display()),
                    "namespaceParseSpec": {
                        "format": "csv", "hasHeaderRow": true,
                        "keyColumn": "id", "valueColumn": "name"
                    },
                    "pollPeriod": "PT1S"
                },
                "firstCacheTimeout": 0, "injective": true
            }},
            "codes": {"version": "v1", "lookupExtractorFactory": {
                "type": "cachedNamespace",
                "extractionNamespace": {
                    "type": "uri", "uriPrefix": format!("file://{}/", files.path().display()),
                    "fileRegex": "codes-[0-9]+\\.json",
                    "namespaceParseSpec": {
                        "format": "customJson", "keyFieldName": "code", "valueFieldName": "label"
                    }
                }
            }}
        }
    });
    assert_eq!(
        server.post_json(&format!("{SERVICE}/config"), &config).0,
        202
    );
    assert_eq!(
        server.sql("SELECT k, v FROM lookup.pages ORDER BY k"),
        vec![
            json!({"k": "p1", "v": "Main Page"}),
            json!({"k": "p2", "v": "Talk, page"})
        ]
    );
    assert_eq!(
        server.sql("SELECT k, v FROM lookup.codes"),
        vec![json!({"k": "a", "v": "Alpha"})],
        "a record with a null value is skipped"
    );
    // The file changes; the next poll (pollPeriod PT1S) swaps the table.
    std::fs::write(&csv, "name,id\nNew Main,p1\n").unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(2);
    std::fs::File::options()
        .write(true)
        .open(&csv)
        .unwrap()
        .set_modified(later)
        .unwrap();
    wait_for_value(
        &server,
        "SELECT LOOKUP('p1', 'pages') AS v",
        &json!("New Main"),
    );
    assert_eq!(
        server.sql("SELECT LOOKUP('p2', 'pages', 'gone') AS v"),
        vec![json!({"v": "gone"})]
    );

    // Acknowledged changes are durable: kill -9, restart on the same data directory.
    assert_eq!(
        server.post_json(
            &format!("{DRUID}/config/__default/inline"),
            &map_lookup("v2", json!({"x": "ex2"})),
        ),
        (202, Value::Null)
    );
    server.kill9();
    let server = Server::start(dir.path());
    let (code, all) = server.get_json(&format!("{SERVICE}/config/all"));
    assert_eq!(code, 200);
    assert_eq!(
        all["__default"]["inline"],
        map_lookup("v2", json!({"x": "ex2"}))
    );
    assert_eq!(all["__default"]["pages"], config["__default"]["pages"]);
    // Loaded at start-up, files read again.
    assert_eq!(
        server.sql(
            "SELECT LOOKUP('x', 'inline') AS a, LOOKUP('p1', 'pages') AS b, LOOKUP('a', 'codes') AS c"
        ),
        vec![json!({"a": "ex2", "b": "New Main", "c": "Alpha"})]
    );
    assert_eq!(
        server
            .get_json(&format!("{SERVICE}/status?detailed=true"))
            .1["__default"]["pages"],
        json!({"loaded": true, "pendingNodes": []})
    );

    // A file that cannot be read: accepted, reported as not loaded, a clear query error.
    let missing = json!({"version": "v1", "lookupExtractorFactory": {
        "type": "cachedNamespace",
        "extractionNamespace": {
            "type": "uri", "uri": format!("file:{}/missing.csv", files.path().display()),
            "namespaceParseSpec": {"format": "csv", "columns": ["k", "v"]}
        }
    }});
    assert_eq!(
        server
            .post_json(&format!("{SERVICE}/config/__default/missing"), &missing)
            .0,
        202
    );
    assert_eq!(
        server.get_json(&format!("{SERVICE}/status/__default/missing")),
        (200, json!({"loaded": false}))
    );
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT LOOKUP('a', 'missing')"}),
    );
    assert_eq!(code, 400, "{body}");
    let msg = body["errorMessage"].as_str().unwrap();
    assert!(
        msg.starts_with("Lookup [missing] not found: its definition (tier [__default]) failed to load: cannot read"),
        "{msg}"
    );
    assert!(
        !server
            .sql("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'lookup'")
            .contains(&json!({"TABLE_NAME": "missing"})),
        "a lookup that did not load is not a table"
    );
}

#[test]
fn lookup_in_sql() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // 2015-09-12: pages a, b, c, a, and one row without a page.
    let sep_12 = 1_442_016_000_000_i64;
    let mut data = String::new();
    for (i, page) in ["a", "b", "c", "a"].iter().enumerate() {
        data.push_str(&format!(
            "{{\"ts\":{},\"page\":\"{page}\"}}\n",
            sep_12 + i as i64
        ));
    }
    data.push_str(&format!("{{\"ts\":{}}}\n", sep_12 + 10));
    let st = server.run_task(&inline_spec("edits", &data, &[], false));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        server.post_json(&format!("{DRUID}/config"), &json!({})).0,
        202
    );
    assert_eq!(
        server
            .post_json(
                &format!("{DRUID}/config/__default/page_names"),
                &map_lookup("v1", json!({"a": "Alpha", "b": "Beta", "": "empty"})),
            )
            .0,
        202
    );

    // Two and three arguments; a missing key and a null key give null or the replacement.
    let rows = server.sql(
        "SELECT page, LOOKUP(page, 'page_names') AS name, \
         LOOKUP(page, 'page_names', 'unknown') AS named FROM edits ORDER BY __time",
    );
    assert_eq!(
        rows,
        vec![
            json!({"page": "a", "name": "Alpha", "named": "Alpha"}),
            json!({"page": "b", "name": "Beta", "named": "Beta"}),
            json!({"page": "c", "name": null, "named": "unknown"}),
            json!({"page": "a", "name": "Alpha", "named": "Alpha"}),
            json!({"page": null, "name": null, "named": "unknown"}),
        ]
    );
    // GROUP BY LOOKUP(..), and filters on it.
    let grouped = "SELECT LOOKUP(page, 'page_names', 'other') AS name, COUNT(*) AS c \
                   FROM edits GROUP BY 1 ORDER BY 1";
    assert_eq!(
        server.sql(grouped),
        vec![
            json!({"name": "Alpha", "c": 2}),
            json!({"name": "Beta", "c": 1}),
            json!({"name": "other", "c": 2}),
        ]
    );
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c FROM edits WHERE LOOKUP(page, 'page_names') = 'Alpha'"),
        vec![json!({"c": 2})]
    );
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c FROM edits WHERE LOOKUP(page, 'page_names') IS NULL"),
        vec![json!({"c": 2})]
    );

    // The lookup schema: k, v; joins like a table.
    assert_eq!(
        server.sql("SELECT k, v FROM lookup.page_names ORDER BY k"),
        vec![
            json!({"k": "", "v": "empty"}),
            json!({"k": "a", "v": "Alpha"}),
            json!({"k": "b", "v": "Beta"}),
        ]
    );
    assert_eq!(
        server.sql(
            "SELECT l.v, COUNT(*) AS c FROM edits e JOIN lookup.\"page_names\" l ON e.page = l.k \
             GROUP BY 1 ORDER BY 1"
        ),
        vec![json!({"v": "Alpha", "c": 2}), json!({"v": "Beta", "c": 1})]
    );
    assert_eq!(
        server.sql(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, IS_JOINABLE, IS_BROADCAST \
             FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'lookup'"
        ),
        vec![json!({
            "TABLE_SCHEMA": "lookup", "TABLE_NAME": "page_names", "TABLE_TYPE": "TABLE",
            "IS_JOINABLE": "YES", "IS_BROADCAST": "YES"
        })]
    );
    assert_eq!(
        server.sql(
            "SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, DATA_TYPE, JDBC_TYPE \
             FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'lookup' \
             ORDER BY ORDINAL_POSITION"
        ),
        vec![
            json!({"COLUMN_NAME": "k", "ORDINAL_POSITION": 1, "IS_NULLABLE": "YES", "DATA_TYPE": "VARCHAR", "JDBC_TYPE": 12}),
            json!({"COLUMN_NAME": "v", "ORDINAL_POSITION": 2, "IS_NULLABLE": "YES", "DATA_TYPE": "VARCHAR", "JDBC_TYPE": 12}),
        ]
    );
    assert!(
        server
            .sql("SELECT SCHEMA_NAME FROM INFORMATION_SCHEMA.SCHEMATA")
            .contains(&json!({"SCHEMA_NAME": "lookup"}))
    );

    // A changed lookup is read by the very next query of the same text (no stale plan).
    assert_eq!(
        server
            .post_json(
                &format!("{SERVICE}/config/__default/page_names"),
                &map_lookup("v2", json!({"c": "Gamma"})),
            )
            .0,
        202
    );
    assert_eq!(
        server.sql(grouped),
        vec![
            json!({"name": "Gamma", "c": 1}),
            json!({"name": "other", "c": 4})
        ]
    );
    assert_eq!(
        server.sql("SELECT k, v FROM lookup.page_names ORDER BY k"),
        vec![json!({"k": "c", "v": "Gamma"})]
    );

    // Planning errors in Druid's words, with the SQL error shape.
    for (sql, needle) in [
        (
            "SELECT LOOKUP(page, 'nope') FROM edits",
            "Lookup [nope] not found",
        ),
        ("SELECT LOOKUP(page, page) FROM edits", "must be a literal"),
        ("SELECT LOOKUP(page) FROM edits", "takes 2 to 3 arguments"),
        ("SELECT * FROM lookup.nope", "Object 'nope' not found"),
    ] {
        let (code, body) = server.post_json("/druid/v2/sql", &json!({"query": sql}));
        assert_eq!(code, 400, "{sql}: {body}");
        assert_eq!(body["error"], "Plan validation failed", "{sql}: {body}");
        let msg = body["errorMessage"].as_str().unwrap();
        assert!(msg.contains(needle), "{sql}: {msg}");
    }
}
