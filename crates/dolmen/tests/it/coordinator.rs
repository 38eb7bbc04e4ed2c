//! Datasource and segment management (`/coordinator/v1/...`) and the `kill` task, end to end:
//! served and metadata views, marking segments used and unused (visible to SQL at once), and
//! permanent deletion from deep storage and the metadata store.

use serde_json::{Value, json};

use crate::common::{Server, deep_storage_files, inline_spec};

const DAY_MS: i64 = 86_400_000;
/// 2015-09-12T00:00:00Z.
const SEP_12: i64 = 1_442_016_000_000;
const COORD: &str = "/service/coordinator/v1";

/// Ingests 2, 3 and 4 rows on 2015-09-12, 13 and 14 (one DAY segment each) and returns the
/// segment ids, oldest first.
fn ingest_three_days(server: &Server, data_source: &str) -> Vec<String> {
    let mut data = String::new();
    for (day, n) in [(0, 2), (1, 3), (2, 4)] {
        for i in 0..n {
            data.push_str(&format!(
                "{{\"ts\":{},\"page\":\"p{i}\"}}\n",
                SEP_12 + day * DAY_MS + i * 3_600_000
            ));
        }
    }
    let st = server.run_task(&inline_spec(data_source, &data, &[], false));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let (code, ids) = server.get_json(&format!(
        "{COORD}/metadata/datasources/{data_source}/segments"
    ));
    assert_eq!(code, 200, "{ids}");
    let ids: Vec<String> = serde_json::from_value(ids).unwrap();
    assert_eq!(ids.len(), 3);
    ids
}

fn strings(v: &Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap_or_else(|_| panic!("not a string array: {v}"))
}

#[test]
fn served_and_metadata_views_describe_datasources() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ids = ingest_three_days(&server, "coord");

    // Served view.
    for prefix in ["/service", "/druid"] {
        let (code, body) = server.get_json(&format!("{prefix}/coordinator/v1/datasources"));
        assert_eq!((code, body), (200, json!(["coord"])));
    }
    let (code, simple) = server.get_json(&format!("{COORD}/datasources/coord"));
    assert_eq!(code, 200);
    let size = simple["segments"]["size"].as_u64().unwrap();
    assert!(size > 0);
    assert_eq!(
        simple,
        json!({
            "tiers": {"_default_tier": {"size": size, "segmentCount": 3, "replicatedSize": size}},
            "segments": {
                "maxTime": "2015-09-15T00:00:00.000Z", "size": size,
                "minTime": "2015-09-12T00:00:00.000Z", "count": 3, "replicatedSize": size
            }
        })
    );
    let (_, full) = server.get_json(&format!("{COORD}/datasources/coord?full"));
    assert_eq!(full["name"], "coord");
    assert_eq!(full["segments"].as_array().unwrap().len(), 3);
    assert_eq!(full["segments"][0]["identifier"], ids[0].as_str());
    let (_, listed) = server.get_json(&format!("{COORD}/datasources?simple"));
    assert_eq!(listed[0]["name"], "coord");
    assert_eq!(listed[0]["properties"]["segments"]["count"], 3);
    let (_, listed) = server.get_json(&format!("{COORD}/datasources?full"));
    assert_eq!(listed[0]["segments"].as_array().unwrap().len(), 3);

    let (_, segs) = server.get_json(&format!("{COORD}/datasources/coord/segments"));
    assert_eq!(strings(&segs), ids);
    let (_, segs) = server.get_json(&format!("{COORD}/datasources/coord/segments?full"));
    assert_eq!(segs[2]["identifier"], ids[2].as_str());
    assert!(segs[2]["size"].as_u64().unwrap() > 0);
    let (code, one) = server.get_json(&format!("{COORD}/datasources/coord/segments/{}", ids[1]));
    assert_eq!(code, 200);
    assert_eq!(one["metadata"]["identifier"], ids[1].as_str());
    assert_eq!(one["servers"].as_array().unwrap().len(), 1);

    let (_, ivs) = server.get_json(&format!("{COORD}/datasources/coord/intervals"));
    assert_eq!(
        ivs,
        json!([
            "2015-09-14T00:00:00.000Z/2015-09-15T00:00:00.000Z",
            "2015-09-13T00:00:00.000Z/2015-09-14T00:00:00.000Z",
            "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
        ])
    );
    let (_, ivs) = server.get_json(&format!("{COORD}/datasources/coord/intervals?simple"));
    assert_eq!(
        ivs["2015-09-13T00:00:00.000Z/2015-09-14T00:00:00.000Z"]["count"],
        1
    );
    let (_, inside) = server.get_json(&format!(
        "{COORD}/datasources/coord/intervals/2015-09-12_2015-09-14"
    ));
    assert_eq!(strings(&inside), ids[..2].to_vec());
    let (_, tiers) = server.get_json(&format!("{COORD}/datasources/coord/tiers"));
    assert_eq!(tiers, json!(["_default_tier"]));

    // Load status: everything used is in the timeline.
    let (code, ls) = server.get_json(&format!(
        "{COORD}/datasources/coord/loadstatus?forceMetadataRefresh=true&interval=2015-09-01_2015-10-01"
    ));
    assert_eq!((code, ls), (200, json!({"coord": 100.0})));
    let (_, ls) = server.get_json(&format!(
        "{COORD}/datasources/coord/loadstatus?simple&interval=2015-09-01/2015-10-01"
    ));
    assert_eq!(ls, json!({"coord": 0}));
    let (_, ls) = server.get_json(&format!(
        "{COORD}/datasources/coord/loadstatus?full&interval=2015-09-01_2015-10-01"
    ));
    assert_eq!(ls, json!({"_default_tier": {"coord": 0}}));
    // Default window: the last 14 days hold no data.
    let (code, _) = server.get_json(&format!("{COORD}/datasources/coord/loadstatus"));
    assert_eq!(code, 204);
    assert_eq!(
        server.get_json(&format!("{COORD}/loadstatus")),
        (200, json!({"coord": 100.0}))
    );
    assert_eq!(
        server.get_json(&format!("{COORD}/loadstatus?simple")).1,
        json!({"coord": 0})
    );
    assert_eq!(
        server.get_json(&format!("{COORD}/loadstatus?full")).1,
        json!({"_default_tier": {"coord": 0}})
    );

    // Metadata view.
    assert_eq!(
        server.get_json(&format!("{COORD}/metadata/datasources")),
        (200, json!(["coord"]))
    );
    let (_, md) = server.get_json(&format!("{COORD}/metadata/datasources?full"));
    assert_eq!(md[0]["name"], "coord");
    assert!(md[0]["properties"]["created"].is_string(), "{md}");
    let (code, md) = server.get_json(&format!("{COORD}/metadata/datasources/coord"));
    assert_eq!(code, 200);
    assert_eq!(md["segments"].as_array().unwrap().len(), 3);
    let (_, md) = server.get_json(&format!("{COORD}/metadata/datasources/coord/segments?full"));
    assert_eq!(md[0]["identifier"], ids[0].as_str());
    let (code, md) = server.get_json(&format!(
        "{COORD}/metadata/datasources/coord/segments/{}",
        ids[0]
    ));
    assert_eq!(code, 200);
    assert_eq!(md["identifier"], ids[0].as_str());
    assert_eq!(md["dataSource"], "coord");

    // Unknown datasource, segment, interval.
    for path in [
        "/datasources/nope",
        "/datasources/nope/segments",
        "/datasources/nope/intervals",
        "/datasources/coord/segments/nope",
        "/datasources/nope/loadstatus?interval=2015-09-01_2015-10-01",
    ] {
        let r = server.get(&format!("{COORD}{path}"));
        assert_eq!(r.status().as_u16(), 204, "{path}");
        assert!(r.text().unwrap().is_empty(), "{path}");
    }
    assert_eq!(
        server.get_json(&format!("{COORD}/datasources/nope/tiers")),
        (200, json!([]))
    );
    for path in [
        "/metadata/datasources/nope".to_string(),
        "/metadata/datasources/nope/segments".to_string(),
        "/metadata/datasources/coord/segments/nope".to_string(),
        format!("/metadata/datasources/other/segments/{}", ids[0]),
    ] {
        let (code, body) = server.get_json(&format!("{COORD}{path}"));
        assert_eq!(code, 404, "{path}: {body}");
        assert!(body["error"].is_string(), "{path}: {body}");
    }
    for path in [
        "/datasources/coord/intervals/yesterday",
        "/datasources/coord/loadstatus?interval=2015-13-01_2015-10-01",
        "/datasources/coord/loadstatus?forceMetadataRefresh=maybe",
    ] {
        let (code, body) = server.get_json(&format!("{COORD}{path}"));
        assert_eq!(code, 400, "{path}: {body}");
        let msg = body["error"].as_str().unwrap();
        assert!(
            msg.contains("interval") || msg.contains("forceMetadataRefresh"),
            "{msg}"
        );
    }
}

#[test]
fn marking_segments_unused_and_used_changes_sql_results_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ids = ingest_three_days(&server, "marks");
    assert_eq!(server.count("marks"), Some(9));
    let files = deep_storage_files(dir.path());
    assert_eq!(files.len(), 3);

    // By interval: only segments fully inside change.
    let (code, body) = server.post_json(
        &format!("{COORD}/datasources/marks/markUnused"),
        &json!({"interval": "2015-09-12/2015-09-13T12:00:00Z"}),
    );
    assert_eq!((code, body), (200, json!({"numChangedSegments": 1})));
    assert_eq!(server.count("marks"), Some(7));
    let (_, served) = server.get_json(&format!("{COORD}/datasources/marks/segments"));
    assert_eq!(strings(&served), ids[1..].to_vec());
    let (_, used) = server.get_json(&format!("{COORD}/metadata/datasources/marks/segments"));
    assert_eq!(strings(&used), ids[1..].to_vec());
    let (_, all) = server.get_json(&format!(
        "{COORD}/metadata/datasources/marks/segments?includeUnused"
    ));
    assert_eq!(strings(&all), ids);
    let unused_path = format!("{COORD}/metadata/datasources/marks/segments/{}", ids[0]);
    assert_eq!(server.get_json(&unused_path).0, 404);
    assert_eq!(
        server
            .get_json(&format!("{unused_path}?includeUnused=true"))
            .0,
        200
    );

    // By ids (under the Druid prefix too).
    let (code, body) = server.post_json(
        "/druid/coordinator/v1/datasources/marks/markUsed",
        &json!({"segmentIds": [ids[0]]}),
    );
    assert_eq!((code, body), (200, json!({"numChangedSegments": 1})));
    assert_eq!(server.count("marks"), Some(9));
    let (_, body) = server.post_json(
        &format!("{COORD}/datasources/marks/markUsed"),
        &json!({"segmentIds": [ids[0]]}),
    );
    assert_eq!(body, json!({"numChangedSegments": 0}), "already used");

    // One segment.
    let one = format!("{COORD}/datasources/marks/segments/{}", ids[2]);
    assert_eq!(
        server.delete(&one),
        (200, json!({"segmentStateChanged": true}))
    );
    assert_eq!(server.count("marks"), Some(5));
    assert_eq!(
        server.delete(&one),
        (200, json!({"segmentStateChanged": false}))
    );
    assert_eq!(
        server.post_empty(&one),
        (200, json!({"segmentStateChanged": true}))
    );
    assert_eq!(server.count("marks"), Some(9));
    assert_eq!(
        server.delete(&format!("{COORD}/datasources/marks/segments/nope")),
        (200, json!({"segmentStateChanged": false}))
    );

    // The whole datasource.
    assert_eq!(
        server.delete(&format!("{COORD}/datasources/marks")),
        (200, json!({"numChangedSegments": 3}))
    );
    assert_eq!(server.count("marks"), None, "no visible segment left");
    assert_eq!(
        server.get_json(&format!("{COORD}/datasources")),
        (200, json!([]))
    );
    assert_eq!(
        server.get_json(&format!("{COORD}/metadata/datasources")).1,
        json!([])
    );
    assert_eq!(
        server
            .get_json(&format!("{COORD}/metadata/datasources?includeUnused"))
            .1,
        json!(["marks"])
    );
    assert_eq!(
        server.get(&format!("{COORD}/datasources/marks")).status(),
        204
    );
    assert_eq!(deep_storage_files(dir.path()), files, "nothing deleted");
    assert_eq!(
        server.post_empty(&format!("{COORD}/datasources/marks")),
        (200, json!({"numChangedSegments": 3}))
    );
    assert_eq!(server.count("marks"), Some(9));
    assert_eq!(
        server.post_empty(&format!("{COORD}/datasources/nope")),
        (200, json!({"numChangedSegments": 0}))
    );
    assert_eq!(
        server.delete(&format!("{COORD}/datasources/nope")),
        (200, json!({"numChangedSegments": 0}))
    );

    // Marking survives a restart (committed before the answer).
    server.post_json(
        &format!("{COORD}/datasources/marks/markUnused"),
        &json!({"segmentIds": [ids[1]]}),
    );
    server.kill9();
    let server = Server::start(dir.path());
    assert_eq!(server.count("marks"), Some(6));
}

#[test]
fn bad_mark_requests_are_rejected_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ids = ingest_three_days(&server, "bad");
    let mark = format!("{COORD}/datasources/bad/markUnused");
    for (body, needle) in [
        (json!({}), "interval"),
        (
            json!({"interval": "2015/2016", "segmentIds": [ids[0]]}),
            "segmentIds",
        ),
        (json!({"interval": "not an interval"}), "interval"),
        (json!({"segmentIds": []}), "segmentIds"),
        (json!({"segmentIds": "x"}), "segmentIds"),
        (
            json!({"segmentIds": [ids[0]], "versions": ["v"]}),
            "versions",
        ),
        (json!({"interval": "2015/2016", "colour": "red"}), "colour"),
        (json!([ids[0]]), "payload"),
    ] {
        for path in [&mark, &format!("{COORD}/datasources/bad/markUsed")] {
            let (code, resp) = server.post_json(path, &body);
            assert_eq!(code, 400, "{body}: {resp}");
            let msg = resp["error"].as_str().unwrap();
            assert!(msg.contains(needle), "{body}: {msg}");
        }
    }
    let (code, _, text) = server.post_raw(&mark, Some("text/plain"), r#"{"interval":"2015/2016"}"#);
    assert_eq!(code, 415, "{text}");
    let (code, _, text) = server.post_raw(&mark, Some("application/json"), "");
    assert_eq!(code, 400, "{text}");
    let (code, _, text) = server.post_raw(&mark, Some("application/json"), "{not json");
    assert_eq!(code, 400, "{text}");
    // Unknown datasource: 204 as Druid; unknown segment ids: 404 naming them, nothing changed.
    let (code, body) = server.post_json(
        &format!("{COORD}/datasources/nope/markUnused"),
        &json!({"interval": "2015/2016"}),
    );
    assert_eq!((code, body), (204, serde_json::Value::Null));
    let (code, body) = server.post_json(&mark, &json!({"segmentIds": [ids[0], "nope_1"]}));
    assert_eq!(code, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("nope_1"), "{body}");
    assert_eq!(server.count("bad"), Some(9), "nothing changed");
}

#[test]
fn kill_deletes_unused_segments_from_deep_storage_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ids = ingest_three_days(&server, "killme");
    let (_, segs) = server.get_json(&format!(
        "{COORD}/metadata/datasources/killme/segments?full"
    ));
    let file_of =
        |i: usize| std::path::PathBuf::from(segs[i]["loadSpec"]["path"].as_str().unwrap());
    assert_eq!(deep_storage_files(dir.path()).len(), 3);

    // Days 1 and 2 unused; a kill over the whole month leaves day 3 (used) alone.
    let (_, body) = server.post_json(
        &format!("{COORD}/datasources/killme/markUnused"),
        &json!({"interval": "2015-09-12/2015-09-14"}),
    );
    assert_eq!(body["numChangedSegments"], 2);
    let st = server.run_task(&json!({
        "type": "kill", "dataSource": "killme", "interval": "2015-09-01/2015-10-01", "batchSize": 1
    }));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(st["type"], "kill");
    assert_eq!(st["dataSource"], "killme");
    assert_eq!(st["errorMsg"], Value::Null);
    let id = st["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("kill_killme_"), "{id}");

    assert!(!file_of(0).exists() && !file_of(1).exists());
    assert!(file_of(2).exists());
    assert_eq!(deep_storage_files(dir.path()), vec![file_of(2)]);
    let (_, left) = server.get_json(&format!(
        "{COORD}/metadata/datasources/killme/segments?includeUnused"
    ));
    assert_eq!(strings(&left), vec![ids[2].clone()]);
    assert_eq!(server.count("killme"), Some(4));

    // Report, log, payload and listing.
    let (_, report) = server.get_json(&format!("/service/indexer/v1/task/{id}/reports"));
    assert_eq!(
        report["killUnusedSegments"]["payload"],
        json!({"numSegmentsKilled": 2, "numBatchesProcessed": 2})
    );
    assert_eq!(report["killUnusedSegments"]["taskId"], id.as_str());
    let log = server
        .get(&format!("/service/indexer/v1/task/{id}/log"))
        .text()
        .unwrap();
    assert!(log.contains("kill"), "{log}");
    let (_, payload) = server.get_json(&format!("/service/indexer/v1/task/{id}"));
    assert_eq!(payload["payload"]["type"], "kill");
    assert_eq!(
        payload["payload"]["interval"],
        "2015-09-01T00:00:00.000Z/2015-10-01T00:00:00.000Z"
    );
    let (_, listed) = server.get_json("/service/indexer/v1/tasks?type=kill");
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["id"], id.as_str());

    // The coordinator's kill endpoint submits a kill task too.
    let r = server
        .client
        .delete(format!(
            "{}{COORD}/datasources/killme/intervals/2015-09-01_2015-10-01",
            server.url
        ))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (_, listed) = server.get_json("/service/indexer/v1/tasks?type=kill&datasource=killme");
    let issued = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["id"]
                .as_str()
                .unwrap()
                .starts_with("api-issued_kill_killme_")
        })
        .unwrap_or_else(|| panic!("{listed}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(server.wait_task(&issued)["status"], "SUCCESS");
    assert_eq!(server.count("killme"), Some(4), "used data is never killed");

    // Bad kill specs and requests.
    for (spec, needle) in [
        (json!({"type": "kill", "dataSource": "killme"}), "interval"),
        (
            json!({"type": "kill", "dataSource": "killme", "interval": "soon"}),
            "interval",
        ),
        (
            json!({"type": "kill", "interval": "2015/2016"}),
            "dataSource",
        ),
        (
            json!({"type": "kill", "dataSource": "killme", "interval": "2015/2016", "batchSize": 0}),
            "batchSize",
        ),
    ] {
        let (code, body) = server.post_json("/service/indexer/v1/task", &spec);
        assert_eq!(code, 400, "{spec}: {body}");
        assert!(body["error"].as_str().unwrap().contains(needle), "{body}");
    }
    assert_eq!(
        server
            .delete(&format!("{COORD}/datasources/killme/intervals/never"))
            .0,
        400
    );
    assert_eq!(
        server
            .delete(&format!(
                "{COORD}/datasources/killme?kill=true&interval=bad"
            ))
            .0,
        400
    );
}
