//! Bad input gets the spec's status and JSON shape, naming the problem; never a panic.

use serde_json::{Value, json};

use crate::common::{Server, wikipedia_spec};

#[test]
fn bad_task_specs_are_rejected_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    // Unknown field: 400 naming the path.
    let mut spec = wikipedia_spec();
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranulrity"] = json!("day");
    let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
    assert_eq!(code, 400, "{body}");
    let msg = body["error"].as_str().unwrap();
    assert!(msg.contains("segmentGranulrity"), "{msg}");
    assert!(msg.contains("spec.dataSchema.granularitySpec"), "{msg}");

    // Missing dataSource.
    let mut spec = wikipedia_spec();
    spec["spec"]["dataSchema"]
        .as_object_mut()
        .unwrap()
        .remove("dataSource");
    let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
    assert_eq!(code, 400);
    assert!(
        body["error"].as_str().unwrap().contains("dataSource"),
        "{body}"
    );

    // Wrong type.
    let mut spec = wikipedia_spec();
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = json!("yes");
    let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
    assert_eq!(code, 400);
    assert!(body["error"].as_str().unwrap().contains("rollup"), "{body}");

    // Bad granularity and hostile datasource name.
    let mut spec = wikipedia_spec();
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = json!("fortnight");
    let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
    assert_eq!(code, 400);
    assert!(
        body["error"].as_str().unwrap().contains("fortnight"),
        "{body}"
    );
    let mut spec = wikipedia_spec();
    spec["spec"]["dataSchema"]["dataSource"] = json!("../../etc");
    let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
    assert_eq!(code, 400);
    assert!(
        body["error"].as_str().unwrap().contains("dataSource"),
        "{body}"
    );

    // Unknown task type.
    let (code, body) = server.post_json("/service/indexer/v1/task", &json!({"type": "nonsense"}));
    assert_eq!(code, 400);
    assert!(
        body["error"].as_str().unwrap().contains("nonsense"),
        "{body}"
    );

    // Wrong media type: 415; unparseable body: 500 with a JSON error (spec).
    let (code, _, text) = server.post_raw("/service/indexer/v1/task", Some("text/plain"), "{}");
    assert_eq!(code, 415, "{text}");
    let (code, _, text) = server.post_raw(
        "/service/indexer/v1/task",
        Some("application/json"),
        "{\"type\": ",
    );
    assert_eq!(code, 500, "{text}");
    assert!(serde_json::from_str::<Value>(&text).unwrap()["error"].is_string());

    // A task whose input does not exist fails with a clear message and publishes nothing.
    let mut spec = wikipedia_spec();
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = json!("/definitely/not/here");
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "FAILED");
    assert!(
        st["errorMsg"]
            .as_str()
            .unwrap()
            .contains("/definitely/not/here"),
        "{st}"
    );

    // Parse exceptions past maxParseExceptions fail the task; nothing becomes visible.
    let spec = json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "broken",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["a"]},
                "granularitySpec": {"segmentGranularity": "day", "rollup": false}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "{\"ts\":\"2020-01-01\",\"a\":\"x\"}\nnot json\n{\"ts\":\"garbage\",\"a\":\"y\"}\n"},
                "inputFormat": {"type": "json"}
            },
            "tuningConfig": {"type": "index_parallel", "maxParseExceptions": 1, "maxSavedParseExceptions": 5}
        }
    });
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "FAILED", "{st}");
    assert!(
        st["errorMsg"]
            .as_str()
            .unwrap()
            .contains("Max parse exceptions"),
        "{st}"
    );
    let id = st["id"].as_str().unwrap();
    let (_, report) = server.get_json(&format!("/service/indexer/v1/task/{id}/reports"));
    let payload = &report["ingestionStatsAndErrors"]["payload"];
    assert_eq!(
        payload["rowStats"]["buildSegments"]["unparseable"], 2,
        "{report}"
    );
    assert_eq!(
        payload["unparseableEvents"]["buildSegments"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (code, body) =
        server.post_json("/service/v2/sql", &json!({"query": "SELECT * FROM broken"}));
    assert_eq!(code, 400, "{body}");

    // With a tolerant limit the same input succeeds and counts the bad rows.
    let mut ok = spec.clone();
    ok["spec"]["tuningConfig"]["maxParseExceptions"] = json!(10);
    let st = server.run_task(&ok);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(server.sql("SELECT a FROM broken"), vec![json!({"a": "x"})]);
}

#[test]
fn bad_sql_and_unknown_ids_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    let (code, body) = server.post_json("/service/v2/sql", &json!({"query": "SELEC 1"}));
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"], "SQL parse failed");
    assert_eq!(
        body["errorMessage"],
        "Received an unexpected token [SELEC] (line [1], column [1]), acceptable options: \
         [an SQL statement]"
    );
    assert!(body["errorClass"].is_string());
    assert!(body["host"].is_string());

    let (code, body) = server.post_json("/service/v2/sql", &json!({"query": "SELECT * FROM nope"}));
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"], "Plan validation failed");
    assert!(
        body["errorMessage"].as_str().unwrap().contains("nope"),
        "{body}"
    );

    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT no_such_column FROM (VALUES (1)) AS t(x)"}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("no_such_column"),
        "{body}"
    );

    let (code, _, text) = server.post_raw("/service/v2/sql", Some("application/json"), "{not json");
    assert_eq!(code, 400);
    assert!(
        text.contains("Malformed SQL query wrapped in JSON"),
        "{text}"
    );
    let (code, _, text) = server.post_raw("/service/v2/sql", None, "SELECT 1");
    assert_eq!(code, 400);
    assert!(text.contains("Missing Content-Type header"), "{text}");
    let (code, _, text) = server.post_raw("/service/v2/sql", Some("application/xml"), "<q/>");
    assert_eq!(code, 415, "{text}");
    let (code, _, text) = server.post_raw("/service/v2/sql", Some("application/json"), "");
    assert_eq!(code, 400);
    assert!(text.contains("Empty query"), "{text}");
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT 1", "typesHeader": true}),
    );
    assert_eq!(code, 400);
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("typesHeader"),
        "{body}"
    );
    let (code, body) = server.post_json(
        "/service/v2/sql",
        &json!({"query": "SELECT 1", "resultFormat": "xml"}),
    );
    assert_eq!(code, 400, "{body}");

    // Unknown task ids.
    let (code, body) = server.get_json("/service/indexer/v1/task/nope/status");
    assert_eq!(code, 404);
    assert_eq!(body, json!({"task": "nope", "status": null}));
    let (code, body) = server.get_json("/druid/indexer/v1/task/nope");
    assert_eq!(code, 404);
    assert_eq!(body["payload"], Value::Null);
    let (code, body) = server.get_json("/service/indexer/v1/task/nope/reports");
    assert_eq!(code, 404);
    assert!(body["error"].is_string());
    let (code, _) = server.get_json("/service/indexer/v1/task/nope/log");
    assert_eq!(code, 404);
    let (code, body) = server.get_json("/service/indexer/v1/task/nope/segments");
    assert_eq!(code, 404);
    assert!(body["error"].is_string());
    let (code, _) = server.post_json("/service/indexer/v1/task/nope/shutdown", &json!({}));
    assert_eq!(code, 404);
    let (code, body) = server.get_json("/service/indexer/v1/tasks?state=sleeping");
    assert_eq!(code, 400);
    assert!(body["error"].as_str().unwrap().contains("sleeping"));
    let (code, _) = server.get_json("/service/no/such/route");
    assert_eq!(code, 404);
}
