//! The main job: ingest the Wikipedia sample with Druid's quickstart spec, then answer the
//! Druid tutorial's queries with Druid's documented answers.

use serde_json::{Value, json};

use crate::common::{Server, wikipedia_spec};

#[test]
fn quickstart_spec_ingests_and_tutorial_queries_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let status = server.run_task(&wikipedia_spec());
    assert_eq!(status["status"], "SUCCESS", "{status}");
    assert_eq!(status["statusCode"], "SUCCESS");
    assert_eq!(status["runnerStatusCode"], "NONE");
    assert!(status["duration"].as_i64().unwrap() >= 0);
    assert_eq!(status["dataSource"], "wikipedia");
    let id = status["id"].as_str().unwrap().to_string();

    // Report shape and counts.
    let (code, report) = server.get_json(&format!("/service/indexer/v1/task/{id}/reports"));
    assert_eq!(code, 200);
    let payload = &report["ingestionStatsAndErrors"]["payload"];
    assert_eq!(
        report["ingestionStatsAndErrors"]["type"],
        "ingestionStatsAndErrors"
    );
    assert_eq!(report["ingestionStatsAndErrors"]["taskId"], id.as_str());
    assert_eq!(payload["ingestionState"], "COMPLETED");
    assert_eq!(payload["rowStats"]["buildSegments"]["processed"], 39244);
    assert_eq!(payload["rowStats"]["buildSegments"]["unparseable"], 0);
    assert_eq!(payload["rowStats"]["buildSegments"]["thrownAway"], 0);
    assert!(
        payload["rowStats"]["buildSegments"]["processedBytes"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Payload and log.
    let (code, task) = server.get_json(&format!("/service/indexer/v1/task/{id}"));
    assert_eq!(code, 200);
    assert_eq!(task["payload"]["type"], "index_parallel");
    assert_eq!(task["payload"]["id"], id.as_str());
    assert_eq!(
        task["payload"]["spec"]["dataSchema"]["dataSource"],
        "wikipedia"
    );
    let log = server
        .get(&format!("/service/indexer/v1/task/{id}/log"))
        .text()
        .unwrap();
    assert!(log.contains("published segments"), "{log}");
    let tail = server
        .get(&format!("/service/indexer/v1/task/{id}/log?offset=1"))
        .text()
        .unwrap();
    assert_eq!(tail.lines().count() + 1, log.lines().count());

    // Task lists.
    let (_, complete) = server.get_json("/service/indexer/v1/tasks?state=complete");
    assert!(
        complete
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id.as_str())
    );
    let (_, running) = server.get_json("/service/indexer/v1/tasks?state=running");
    assert!(running.as_array().unwrap().is_empty());
    let (_, by_ds) = server.get_json("/service/indexer/v1/tasks?datasource=nope");
    assert!(by_ds.as_array().unwrap().is_empty());

    // COUNT(*) without rollup is the number of input rows.
    let rows = server.sql("SELECT COUNT(*) AS c FROM wikipedia");
    assert_eq!(rows, vec![json!({"c": 39244})]);

    // Druid tutorial: top pages of 2015-09-12 by edit count (docs/tutorials/tutorial-query.md).
    let top = server.sql(
        "SELECT page, COUNT(*) AS Edits FROM wikipedia WHERE TIMESTAMP '2015-09-12 00:00:00' <= \"__time\" AND \"__time\" < TIMESTAMP '2015-09-13 00:00:00' GROUP BY page ORDER BY Edits DESC LIMIT 10",
    );
    let expected = [
        ("Wikipedia:Vandalismusmeldung", 33),
        (
            "User:Cyde/List of candidates for speedy deletion/Subpage",
            28,
        ),
        ("Jeremy Corbyn", 27),
        ("Wikipedia:Administrators' noticeboard/Incidents", 21),
        ("Flavia Pennetta", 20),
    ];
    for (i, (page, n)) in expected.iter().enumerate() {
        assert_eq!(top[i]["page"], *page, "{top:?}");
        assert_eq!(top[i]["Edits"], *n);
    }
    assert_eq!(top.len(), 10);
    let counts: Vec<i64> = top.iter().map(|r| r["Edits"].as_i64().unwrap()).collect();
    assert_eq!(&counts[5..], &[18, 18, 18, 17, 17]);

    // The same through the spec's sample file (TIME_IN_INTERVAL).
    let q: Value = serde_json::from_str(
        &std::fs::read_to_string(
            crate::common::examples_dir().join("specs/wikipedia-top-pages-sql.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let (code, same) = server.post_json("/service/v2/sql", &q);
    assert_eq!(code, 200, "{same}");
    assert_eq!(
        same.as_array().unwrap()[0]["page"],
        "Wikipedia:Vandalismusmeldung"
    );

    // FLOOR(__time TO HOUR) with SUM, as in the tutorial.
    let hourly = server.sql(
        "SELECT FLOOR(__time TO HOUR) AS HourTime, SUM(deleted) AS LinesDeleted FROM wikipedia WHERE TIME_IN_INTERVAL(\"__time\", '2015-09-12/2015-09-13') GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(hourly.len(), 24);
    assert_eq!(hourly[0]["HourTime"], "2015-09-12T00:00:00.000Z");
    let total: i64 = hourly
        .iter()
        .map(|r| r["LinesDeleted"].as_i64().unwrap())
        .sum();
    let all = server.sql("SELECT SUM(deleted) AS d FROM wikipedia");
    assert_eq!(all[0]["d"].as_i64().unwrap(), total);

    // TIME_FLOOR and BETWEEN, SELECT *, AVG/MIN/MAX.
    let tf = server.sql("SELECT TIME_FLOOR(__time, 'PT6H') AS t, COUNT(*) AS c FROM wikipedia GROUP BY 1 ORDER BY 1");
    assert_eq!(tf.len(), 4);
    assert_eq!(
        tf.iter().map(|r| r["c"].as_i64().unwrap()).sum::<i64>(),
        39244
    );
    let users = server.sql(
        "SELECT \"user\", page FROM wikipedia WHERE __time BETWEEN TIMESTAMP '2015-09-12 02:00:00' AND TIMESTAMP '2015-09-12 03:00:00' LIMIT 5",
    );
    assert_eq!(users.len(), 5);
    let star = server.sql("SELECT * FROM wikipedia ORDER BY __time LIMIT 1");
    assert_eq!(star[0]["__time"], "2015-09-12T00:46:58.771Z");
    assert_eq!(star[0]["channel"], "#en.wikipedia");
    assert_eq!(star[0]["isRobot"], "false");
    assert_eq!(star[0]["added"], 36);
    assert_eq!(star[0]["cityName"], Value::Null);
    let keys: Vec<&String> = star[0].as_object().unwrap().keys().collect();
    assert_eq!(keys[0], "__time");
    let agg =
        server.sql("SELECT MIN(delta) AS mn, MAX(delta) AS mx, AVG(added) AS av FROM wikipedia");
    assert!(agg[0]["mn"].as_i64().unwrap() < 0);
    assert!(agg[0]["av"].as_f64().unwrap() > 0.0);
    let by_channel = server.sql(
        "SELECT channel, page, SUM(added) AS a FROM wikipedia WHERE TIME_IN_INTERVAL(\"__time\", '2015-09-12/2015-09-13') GROUP BY channel, page ORDER BY SUM(added) DESC LIMIT 3",
    );
    assert_eq!(by_channel.len(), 3);
    // Unaliased expressions are named as Calcite names them (Druid tutorial: EXPR$2).
    let unaliased = server.sql(
        "SELECT channel, page, SUM(added) FROM wikipedia WHERE \"__time\" BETWEEN TIMESTAMP '2015-09-12 00:00:00' AND TIMESTAMP '2015-09-13 00:00:00' GROUP BY channel, page ORDER BY SUM(added) DESC LIMIT 1",
    );
    assert_eq!(
        unaliased[0],
        json!({"channel": "#en.wikipedia", "page": "User:QuackGuru/Electronic cigarettes 1", "EXPR$2": 199818})
    );
    assert_eq!(
        server.sql("SELECT COUNT(*) FROM wikipedia"),
        vec![json!({"EXPR$0": 39244})]
    );

    // Pruning: an interval with no data.
    assert_eq!(
        server.sql(
            "SELECT COUNT(*) AS c FROM wikipedia WHERE __time >= TIMESTAMP '2016-01-01 00:00:00'"
        ),
        vec![json!({"c": 0})]
    );

    // Result formats and the /druid prefix.
    let (code, headers, text) = server.post_raw(
        "/druid/v2/sql",
        Some("application/json"),
        &json!({"query": "SELECT channel, COUNT(*) AS c FROM wikipedia GROUP BY channel ORDER BY c DESC LIMIT 2", "resultFormat": "array", "header": true}).to_string(),
    );
    assert_eq!(code, 200, "{text}");
    assert!(headers.contains_key("x-druid-sql-query-id"));
    assert_eq!(headers.get("x-druid-sql-header-included").unwrap(), "yes");
    assert!(!headers.contains_key("x-service-sql-query-id"));
    assert!(text.ends_with("]\n"));
    let arr: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(arr[0], json!(["channel", "c"]));
    assert_eq!(arr[1][0], "#en.wikipedia");

    let (code, headers, _) = server.post_raw(
        "/service/v2/sql",
        Some("application/json"),
        &json!({"query": "SELECT 1 AS x", "context": {"sqlQueryId": "my-query"}}).to_string(),
    );
    assert_eq!(code, 200);
    assert_eq!(headers.get("x-service-sql-query-id").unwrap(), "my-query");
    let (code, _, text) = server.post_raw(
        "/service/v2/sql",
        Some("text/plain"),
        "SELECT COUNT(*) AS c FROM wikipedia",
    );
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!([{"c": 39244}])
    );

    // Re-ingesting with appendToExisting=false replaces (overshadows), never duplicates.
    let again = server.run_task(&wikipedia_spec());
    assert_eq!(again["status"], "SUCCESS");
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c FROM wikipedia"),
        vec![json!({"c": 39244})]
    );

    // A restart keeps everything.
    let data = dir.path().to_path_buf();
    let code = server.terminate();
    assert!(code.success(), "{code:?}");
    let server = Server::start(&data);
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c FROM wikipedia"),
        vec![json!({"c": 39244})]
    );
    let (code, st) = server.get_json(&format!("/service/indexer/v1/task/{id}/status"));
    assert_eq!(code, 200);
    assert_eq!(st["status"]["status"], "SUCCESS");
}

#[test]
fn rollup_transforms_and_filters_follow_druid() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // Druid's rollup tutorial: 9 input rows roll up to 5.
    let text =
        std::fs::read_to_string(crate::common::examples_dir().join("specs/rollup-index.json"))
            .unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] =
        json!(crate::common::examples_dir().display().to_string());
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let rows = server.sql("SELECT * FROM \"rollup-tutorial\" ORDER BY __time, srcIP, dstIP");
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert_eq!(rows[0]["__time"], "2018-01-01T01:01:00.000Z");
    assert_eq!(rows[0]["srcIP"], "1.1.1.1");
    assert_eq!(rows[0]["dstIP"], "2.2.2.2");
    assert_eq!(rows[0]["packets"], 286);
    assert_eq!(rows[0]["bytes"], 35937);
    assert_eq!(rows[0]["count"], 3);
    assert_eq!(rows[4]["__time"], "2018-01-02T21:35:00.000Z");
    assert_eq!(rows[4]["count"], 1);

    // Druid's transform tutorial: filter, expression transforms.
    let text =
        std::fs::read_to_string(crate::common::examples_dir().join("specs/transform-index.json"))
            .unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] =
        json!(crate::common::examples_dir().display().to_string());
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let rows = server.sql("SELECT * FROM \"transform-tutorial\" ORDER BY __time");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let animals: Vec<&str> = rows.iter().map(|r| r["animal"].as_str().unwrap()).collect();
    assert_eq!(
        animals,
        vec!["super-mongoose", "super-snake", "super-octopus"]
    );
    assert_eq!(rows[0]["__time"], "2018-01-01T05:01:00.000Z");
    assert_eq!(rows[0]["triple-number"], 600);
    assert_eq!(rows[2]["triple-number"], 300);
    assert_eq!(rows[1]["location"], 3);
}

fn tutorial_spec(name: &str) -> Value {
    let dir = crate::common::examples_dir();
    let text = std::fs::read_to_string(dir.join("specs").join(name)).unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = json!(dir.display().to_string());
    spec
}

#[test]
fn updates_tutorial_overwrites_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let q = "SELECT __time, animal, \"count\", number FROM \"updates-tutorial\" ORDER BY __time, animal, number";
    assert_eq!(
        server.run_task(&tutorial_spec("updates-init-index.json"))["status"],
        "SUCCESS"
    );
    let rows = server.sql(q);
    let animals: Vec<&str> = rows.iter().map(|r| r["animal"].as_str().unwrap()).collect();
    assert_eq!(animals, vec!["tiger", "aardvark", "giraffe"]);

    let animals_and_numbers = || -> Vec<(String, i64)> {
        let row = |r: &Value| {
            (
                r["animal"].as_str().unwrap().to_string(),
                r["number"].as_i64().unwrap(),
            )
        };
        server.sql(q).iter().map(row).collect()
    };

    // Overwrite: a new version replaces the whole day.
    assert_eq!(
        server.run_task(&tutorial_spec("updates-overwrite-index.json"))["status"],
        "SUCCESS"
    );
    assert_eq!(
        animals_and_numbers(),
        vec![
            ("lion".into(), 100),
            ("aardvark".into(), 9999),
            ("bear".into(), 111)
        ]
    );

    // Append: the new rows are added as extra partitions of the same version.
    assert_eq!(
        server.run_task(&tutorial_spec("updates-append-index2.json"))["status"],
        "SUCCESS"
    );
    assert_eq!(
        animals_and_numbers(),
        vec![
            ("lion".into(), 100),
            ("aardvark".into(), 9999),
            ("bear".into(), 111),
            ("bear".into(), 222),
            ("falcon".into(), 1241)
        ]
    );
    let grouped = server.sql(
        "SELECT animal, SUM(number) AS n FROM \"updates-tutorial\" GROUP BY animal ORDER BY animal",
    );
    assert_eq!(grouped[0], json!({"animal": "aardvark", "n": 9999}));
    assert_eq!(grouped[1], json!({"animal": "bear", "n": 333}));
}

#[test]
fn csv_inline_with_schema_discovery_and_small_segments() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut csv = String::from("ts,city,n,score\n");
    for i in 0..1000 {
        csv.push_str(&format!(
            "2020-01-0{}T00:00:{:02}Z,c{},{},{}.5\n",
            1 + i % 3,
            i % 60,
            i % 7,
            i,
            i
        ));
    }
    let spec = json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "csv_ds",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {"dimensions": [], "useSchemaDiscovery": false},
                "metricsSpec": [{"type": "count", "name": "cnt"}, {"type": "doubleSum", "name": "score_sum", "fieldName": "score"}],
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": false}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": csv},
                "inputFormat": {"type": "csv", "findColumnsFromHeader": true}
            },
            "tuningConfig": {"type": "index_parallel", "maxRowsPerSegment": 100, "maxRowsInMemory": 64}
        }
    });
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(
        server.sql("SELECT COUNT(*) AS c, SUM(cnt) AS s FROM csv_ds"),
        vec![json!({"c": 1000, "s": 1000})]
    );
    // Discovered dimensions are strings; the metric's input field is not a dimension.
    let row = &server.sql("SELECT * FROM csv_ds LIMIT 1")[0];
    assert!(row["city"].is_string());
    assert!(row["n"].is_string(), "{row}");
    assert!(row.get("score").is_none(), "{row}");
    let total: f64 = (0..1000).map(|i| f64::from(i) + 0.5).sum();
    let got = server.sql("SELECT SUM(score_sum) AS t FROM csv_ds")[0]["t"]
        .as_f64()
        .unwrap();
    assert!((got - total).abs() < 1e-6);
    let by_day = server.sql(
        "SELECT TIME_FLOOR(__time, 'P1D') AS d, COUNT(*) AS c FROM csv_ds GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(by_day.len(), 3);
    assert_eq!(by_day[0]["c"], 334);
}

#[test]
fn drop_existing_removes_chunks_the_new_data_does_not_cover() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let spec = |data: &str, drop_existing: bool| {
        json!({
            "type": "index_parallel",
            "spec": {
                "dataSchema": {
                    "dataSource": "drops",
                    "timestampSpec": {"column": "ts", "format": "iso"},
                    "dimensionsSpec": {"dimensions": ["k"]},
                    "granularitySpec": {"segmentGranularity": "day", "rollup": false, "intervals": ["2020-01-01/2020-01-03"]}
                },
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": {"type": "inline", "data": data},
                    "inputFormat": {"type": "json"},
                    "appendToExisting": false,
                    "dropExisting": drop_existing
                }
            }
        })
    };
    let two_days = "{\"ts\":\"2020-01-01T01:00:00Z\",\"k\":\"a\"}\n{\"ts\":\"2020-01-02T01:00:00Z\",\"k\":\"b\"}\n";
    let day_one = "{\"ts\":\"2020-01-01T02:00:00Z\",\"k\":\"c\"}\n";
    assert_eq!(server.run_task(&spec(two_days, false))["status"], "SUCCESS");
    // Without dropExisting, day two keeps its old data.
    assert_eq!(server.run_task(&spec(day_one, false))["status"], "SUCCESS");
    let ks = |server: &Server| -> Vec<String> {
        server
            .sql("SELECT k FROM drops ORDER BY __time")
            .iter()
            .map(|r| r["k"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ks(&server), vec!["c", "b"]);
    // With dropExisting, day two is dropped in the same commit.
    assert_eq!(server.run_task(&spec(day_one, true))["status"], "SUCCESS");
    assert_eq!(ks(&server), vec!["c"]);
}

/// Druid's UNNEST tutorial (docs/tutorials/tutorial-unnest-arrays.md), verbatim: its SQL-based
/// ingestion and its native ingestion spec. The inline data separates its JSON objects with
/// ",\n", which Druid reads because a JSON line's trailing characters are ignored.
const UNNEST_TUTORIAL_SQL: &str = r#"REPLACE INTO nested_data OVERWRITE ALL
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
PARTITIONED BY YEAR 
"#;

/// The same tutorial's native `index_parallel` spec, verbatim.
const UNNEST_TUTORIAL_SPEC: &str = r#"{
  "type": "index_parallel",
  "spec": {
    "ioConfig": {
      "type": "index_parallel",
      "inputSource": {
        "type": "inline",
        "data":"{\"t\":\"2000-01-01\",\"m1\":\"1.0\",\"m2\":\"1.0\",\"dim1\":\"\",\"dim2\":[\"a\"],\"dim3\":[\"a\",\"b\"],\"dim4\":[\"x\",\"y\"],\"dim5\":[\"a\",\"b\"]},\n{\"t\":\"2000-01-02\",\"m1\":\"2.0\",\"m2\":\"2.0\",\"dim1\":\"10.1\",\"dim2\":[],\"dim3\":[\"c\",\"d\"],\"dim4\":[\"e\",\"f\"],\"dim5\":[\"a\",\"b\",\"c\",\"d\"]},\n{\"t\":\"2001-01-03\",\"m1\":\"6.0\",\"m2\":\"6.0\",\"dim1\":\"abc\",\"dim2\":[\"a\"],\"dim3\":[\"k\",\"l\"]},\n{\"t\":\"2001-01-01\",\"m1\":\"4.0\",\"m2\":\"4.0\",\"dim1\":\"1\",\"dim2\":[\"a\"],\"dim3\":[\"g\",\"h\"]},\n{\"t\":\"2001-01-02\",\"m1\":\"5.0\",\"m2\":\"5.0\",\"dim1\":\"def\",\"dim2\":[\"abc\"],\"dim3\":[\"i\",\"j\"]},\n{\"t\":\"2001-01-03\",\"m1\":\"6.0\",\"m2\":\"6.0\",\"dim1\":\"abc\",\"dim2\":[\"a\"],\"dim3\":[\"k\",\"l\"]},\n{\"t\":\"2001-01-02\",\"m1\":\"5.0\",\"m2\":\"5.0\",\"dim1\":\"def\",\"dim2\":[\"abc\"],\"dim3\":[\"m\",\"n\"]}"
      },
      "inputFormat": {
        "type": "json"
      }
    },
    "tuningConfig": {
      "type": "index_parallel",
      "partitionsSpec": {
        "type": "dynamic"
      }
    },
    "dataSchema": {
      "dataSource": "nested_data",
      "granularitySpec": {
        "type": "uniform",
        "queryGranularity": "NONE",
        "rollup": false,
        "segmentGranularity": "YEAR"
      },
      "timestampSpec": {
        "column": "t",
        "format": "auto"
      },
      "dimensionsSpec": {
        "dimensions": [
          "dim1",
          "dim2",
          "dim3",
          "dim4",
          "dim5"
        ]
      },
      "metricsSpec": [
        {
          "name": "m1",
          "type": "floatSum",
          "fieldName": "m1"
        },
        {
          "name": "m2",
          "type": "doubleSum",
          "fieldName": "m2"
        }
      ]
    }
  }
}"#;

#[test]
fn the_unnest_tutorials_ingestions_run_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let check = |server: &Server| {
        let rows =
            server.sql("SELECT __time, dim1, dim3, m1, m2 FROM nested_data ORDER BY __time, dim3");
        assert_eq!(rows.len(), 7, "{rows:?}");
        assert_eq!(rows[0]["__time"], "2000-01-01T00:00:00.000Z");
        assert_eq!(rows[0]["dim1"], "");
        // Druid renders a multi-value string in SQL results as the text of a JSON array.
        assert_eq!(rows[0]["dim3"], json!("[\"a\",\"b\"]"));
        assert_eq!(rows[0]["m1"], json!(1.0));
        assert_eq!(rows[6]["dim3"], json!("[\"k\",\"l\"]"));
        // dim3 holds each row's values as a multi-value string: a filter matches any value.
        let b = server.sql("SELECT COUNT(*) AS n FROM nested_data WHERE dim3 = 'b'");
        assert_eq!(b, vec![json!({"n": 1})]);
        // The tutorial's queries: see `the_unnest_tutorials_sql_queries`.
    };
    // Native batch ingestion.
    let spec: Value = serde_json::from_str(UNNEST_TUTORIAL_SPEC).unwrap();
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    check(&server);
    // SQL-based ingestion of the same rows replaces them; its `string` columns fed JSON arrays
    // are multi-value strings, as in Druid.
    let (code, body) = server.post_json(
        "/druid/v2/sql/task",
        &json!({ "query": UNNEST_TUTORIAL_SQL }),
    );
    assert_eq!(code, 200, "{body}");
    let st = server.wait_task(body["taskId"].as_str().unwrap());
    assert_eq!(st["status"], "SUCCESS", "{st}");
    check(&server);
    let types = server.sql(
        "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS \
         WHERE TABLE_NAME = 'nested_data' AND COLUMN_NAME = 'dim3'",
    );
    assert_eq!(
        types,
        vec![json!({"COLUMN_NAME": "dim3", "DATA_TYPE": "VARCHAR"})]
    );
    let rows = server.sql("SELECT __time, dim1, m1, m2 FROM nested_data ORDER BY __time, dim1");
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(rows[0]["__time"], "2000-01-01T00:00:00.000Z");
    assert_eq!(rows[1]["dim1"], "10.1");
    assert_eq!(rows[1]["m2"], json!(2.0));
}

/// The SQL queries of Druid's UNNEST tutorial (`docs/tutorials/tutorial-unnest-arrays.md`,
/// "Unnest using SQL queries"), verbatim, over its natively ingested `nested_data`: the lateral
/// `FROM t, UNNEST(MV_TO_ARRAY(col))` form repeats each row once per value. (The two queries
/// with `UNNEST(ARRAY[dim4,dim5])`, an array of two multi-value columns, are not run: that
/// form does not plan yet.)
#[test]
fn the_unnest_tutorials_sql_queries() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let spec: Value = serde_json::from_str(UNNEST_TUTORIAL_SPEC).unwrap();
    let st = server.run_task(&spec);
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let column = |sql: &str, name: &str| -> Vec<String> {
        let mut v: Vec<String> = server
            .sql(sql)
            .iter()
            .map(|r| r[name].as_str().unwrap_or("null").to_string())
            .collect();
        v.sort();
        v
    };
    let all_d3 = vec![
        "a", "b", "c", "d", "g", "h", "i", "j", "k", "k", "l", "l", "m", "n",
    ];
    assert_eq!(
        column(
            "SELECT d3 FROM \"nested_data\", UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3) ",
            "d3"
        ),
        all_d3
    );
    let rows = server.sql(
        "SELECT dim4,dim5,d45 FROM nested_data, UNNEST(ARRAY_CONCAT(dim4,dim5)) AS example_table(d45)",
    );
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert_eq!(
        rows[0],
        json!({"dim4": "[\"x\",\"y\"]", "dim5": "[\"a\",\"b\"]", "d45": "x"})
    );
    assert_eq!(
        column(
            "SELECT d3 FROM (select dim1, dim2, dim3 from \"nested_data\"), UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3)",
            "d3"
        ),
        all_d3
    );
    assert_eq!(
        column(
            "SELECT d3 FROM (SELECT * FROM nested_data WHERE dim2 IN ('abc')), UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3)",
            "d3"
        ),
        vec!["i", "j", "m", "n"]
    );
    assert_eq!(
        server.sql("SELECT * FROM UNNEST(ARRAY[1,2,3]) AS ud(d1) WHERE d1 IN ('1','2')"),
        vec![json!({"d1": 1}), json!({"d1": 2})]
    );
    // "The query only returns a single row since only one row meets the conditions."
    assert_eq!(
        server.sql(
            "SELECT * FROM nested_data, UNNEST(MV_TO_ARRAY(\"dim3\")) AS foo(d3) WHERE d3 IN ('b', 'd') and m1 < 2"
        ),
        vec![json!({
            "__time": "2000-01-01T00:00:00.000Z", "dim1": "", "dim2": "a",
            "dim3": "[\"a\",\"b\"]", "dim4": "[\"x\",\"y\"]", "dim5": "[\"a\",\"b\"]",
            "m1": 1.0, "m2": 1.0, "d3": "b"
        })]
    );
    let mut distinct = all_d3.clone();
    distinct.dedup();
    assert_eq!(
        column(
            "SELECT d3 FROM nested_data, UNNEST(MV_TO_ARRAY(dim3)) AS example_table(d3) GROUP BY d3 ",
            "d3"
        ),
        distinct
    );
}
