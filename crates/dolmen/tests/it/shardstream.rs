//! `shardstream` (Kinesis) supervisor specs against the real binary: validated with errors naming
//! the field and credentials refused without being echoed; nothing is stored for a refused spec.
//! Running supervisors are tested against the emulator in `kinesis.rs`.

use serde_json::{Value, json};

use crate::common::Server;

const SUP: &str = "/druid/indexer/v1/supervisor";

fn spec(stream: &str) -> Value {
    json!({
        "type": "shardstream",
        "spec": {
            "dataSchema": {
                "dataSource": "kin",
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["channel"]},
                "granularitySpec": {"segmentGranularity": "HOUR", "rollup": false}
            },
            "ioConfig": {
                "stream": stream,
                "endpoint": "http://127.0.0.1:4567",
                "inputFormat": {"type": "json"},
                "useEarliestSequenceNumber": true
            },
            "tuningConfig": {"type": "shardstream"}
        }
    })
}

#[test]
fn shardstream_specs_are_validated_and_refused_specs_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    // Invalid specs: 400 naming the field.
    type Edit = fn(&mut Value);
    let cases: [(Edit, &str); 4] = [
        (
            |v| {
                v["spec"]["ioConfig"]
                    .as_object_mut()
                    .unwrap()
                    .remove("stream");
            },
            "spec.ioConfig.stream",
        ),
        (
            |v| v["spec"]["ioConfig"]["recordsPerFetch"] = json!(20_000),
            "spec.ioConfig.recordsPerFetch",
        ),
        (
            |v| v["spec"]["tuningConfig"]["repartitionTransitionDuration"] = json!("soon"),
            "spec.tuningConfig.repartitionTransitionDuration",
        ),
        (
            |v| v["spec"]["ioConfig"]["awsSecretAccessKey"] = json!("wJalrXUtnFEMI-secret"),
            "spec.ioConfig.awsSecretAccessKey",
        ),
    ];
    for (edit, field) in cases {
        let mut s = spec("events");
        edit(&mut s);
        let (code, e) = server.post_json(SUP, &s);
        assert_eq!(code, 400, "{field}: {e}");
        let msg = e["error"].as_str().unwrap();
        assert!(msg.starts_with(field), "{field}: {e}");
        assert!(
            !msg.contains("wJalrXUtnFEMI-secret"),
            "the secret is echoed: {e}"
        );
    }

    // Nothing was stored.
    let (code, list) = server.get_json(SUP);
    assert_eq!((code, list), (200, json!([])));
    let (code, _) = server.get_json(&format!("{SUP}/kin"));
    assert_eq!(code, 404);
}
