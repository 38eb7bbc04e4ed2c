//! `avro_ocf` input through whole batch tasks: object container files written in the test with
//! the same `apache-avro` crate, ingested from a local directory, read back from the published
//! segment files (Druid's `docs/ingestion/data-formats.md#avro-ocf`).

use std::path::Path;

use apache_avro::types::{Record, Value as Avro};
use apache_avro::{Codec, Schema, Writer};
use dolmen_ingest::IngestError;
use dolmen_segment::DataSegment;
use serde_json::{Map, Value, json};

use crate::support;

const SCHEMA: &str = r#"{
    "type": "record", "name": "Edit", "namespace": "wiki",
    "fields": [
        {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "page", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [
            {"name": "name", "type": "string"},
            {"name": "country", "type": ["null", "string"]}
        ]}},
        {"name": "added", "type": ["null", "long"]},
        {"name": "payload", "type": "bytes"}
    ]
}"#;

/// Writes `n` edits per file into `dir/edits-<i>.avro`, deflate-compressed.
fn write_files(dir: &Path, files: usize, n: usize) {
    let schema = Schema::parse_str(SCHEMA).unwrap();
    let user_schema = match &schema {
        Schema::Record(r) => r.fields[3].schema.clone(),
        _ => unreachable!(),
    };
    for f in 0..files {
        let mut w =
            Writer::with_codec(&schema, Vec::new(), Codec::Deflate(Default::default())).unwrap();
        for i in 0..n {
            let mut r = Record::new(&schema).unwrap();
            r.put(
                "time",
                Avro::TimestampMillis(1_442_016_000_000 + (f * n + i) as i64 * 60_000),
            );
            r.put("page", format!("page-{}", i % 2));
            r.put(
                "tags",
                Avro::Array(vec![Avro::String("t2".into()), Avro::String("t1".into())]),
            );
            let mut u = Record::new(&user_schema).unwrap();
            u.put("name", format!("user-{f}"));
            u.put(
                "country",
                Avro::Union(1, Box::new(Avro::String("FR".into()))),
            );
            r.put("user", u);
            r.put("added", Avro::Union(1, Box::new(Avro::Long(i as i64))));
            r.put("payload", Avro::Bytes(b"raw".to_vec()));
            w.append_value(r).unwrap();
        }
        std::fs::write(dir.join(format!("edits-{f}.avro")), w.into_inner().unwrap()).unwrap();
    }
}

async fn ingest(
    base: &Path,
    input_format: Value,
) -> Result<(Vec<DataSegment>, Vec<Map<String, Value>>), IngestError> {
    let dir = tempfile::tempdir().unwrap();
    let spec = json!({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "avro",
                "timestampSpec": {"column": "time", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["page", "tags", "userName", "country", "payload"]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "added", "fieldName": "added"}
                ],
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "day", "rollup": true}
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": base.display().to_string(), "filter": "*.avro"},
                "inputFormat": input_format
            },
            "tuningConfig": {"type": "index_parallel"}
        }
    });
    let (result, _) = support::run_task(dir.path(), "avro-task", &spec).await;
    let segs = result?;
    let mut rows = support::segment_rows(&segs);
    rows.sort_by_key(|r| Value::Object(r.clone()).to_string());
    Ok((segs, rows))
}

fn flatten() -> Value {
    json!({"fields": [
        {"type": "path", "name": "userName", "expr": "$.user.name"},
        {"type": "path", "name": "country", "expr": "$.user.country"}
    ]})
}

#[tokio::test]
async fn ingests_ocf_files_with_flatten_and_multi_value_arrays() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 2, 4);
    let (segs, rows) = ingest(
        dir.path(),
        json!({"type": "avro_ocf", "flattenSpec": flatten(), "binaryAsString": true}),
    )
    .await
    .unwrap();
    assert_eq!(segs.len(), 1);
    let tags = segs[0].columns.iter().find(|c| c.name == "tags").unwrap();
    assert!(tags.multi_value);
    let got: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!([
                r["__time"],
                r["page"],
                r["tags"],
                r["userName"],
                r["country"],
                r["payload"],
                r["count"],
                r["added"]
            ])
        })
        .collect();
    let day = 1_442_016_000_000i64;
    assert_eq!(
        got,
        vec![
            json!([day, "page-0", ["t1", "t2"], "user-0", "FR", "raw", 2, 2]),
            json!([day, "page-0", ["t1", "t2"], "user-1", "FR", "raw", 2, 2]),
            json!([day, "page-1", ["t1", "t2"], "user-0", "FR", "raw", 2, 4]),
            json!([day, "page-1", ["t1", "t2"], "user-1", "FR", "raw", 2, 4]),
        ]
    );
}

#[tokio::test]
async fn reader_schema_and_base64_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 1, 2);
    // The reader schema drops `tags` and `user`, and adds a defaulted field.
    let reader = json!({
        "type": "record", "name": "Edit", "namespace": "wiki",
        "fields": [
            {"name": "time", "type": "long"},
            {"name": "page", "type": "string"},
            {"name": "payload", "type": "bytes"},
            {"name": "added", "type": ["null", "long"]},
            {"name": "country", "type": "string", "default": "ZZ"}
        ]
    });
    let (_, rows) = ingest(dir.path(), json!({"type": "avro_ocf", "schema": reader}))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["country"], json!("ZZ"));
        assert_eq!(r["payload"], json!("cmF3"), "base64 of the bytes");
        assert_eq!(r["tags"], Value::Null);
    }

    // A schema that is not Avro is rejected when the spec is read, naming the field.
    let e = ingest(
        dir.path(),
        json!({"type": "avro_ocf", "schema": {"type": "nope"}}),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("spec.ioConfig.inputFormat") && e.contains("[schema]"),
        "{e}"
    );
}

#[tokio::test]
async fn a_file_that_is_not_avro_fails_the_task() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.avro"), b"{\"not\": \"avro\"}\n").unwrap();
    let e = ingest(dir.path(), json!({"type": "avro_ocf"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.avro") && e.contains("header"), "{e}");
}
