//! Records written by Kafka's transactional producer: librdkafka (the
//! C client Kafka's own tools are checked against), driven through Python's `confluent-kafka`
//! from the test clients' virtualenv (`DOLMEN_TEST_PYTHON`, set up by
//! `scripts/install-test-deps.sh`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use dolmen_stream::kafka::KafkaRecordSupplier;
use dolmen_stream::{RecordSupplier, StreamPartition};

use super::{brokers, read_exactly, unique_topic, values};

/// The test clients' Python interpreter, or `None` when Kafka tests are skipped.
fn python() -> Option<String> {
    match std::env::var("DOLMEN_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if std::env::var("DOLMEN_SKIP_KAFKA_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_PYTHON is not set: run scripts/install-test-deps.sh (it installs confluent-kafka) and export DOLMEN_TEST_PYTHON, or run scripts/test.sh"
        ),
    }
}

/// Creates `topic` (one partition) and writes two committed transactions with one producer
/// (`a`, `b`; `c`), then `d` without a transaction. Each transaction ends in a commit marker.
const PRODUCE: &str = r#"
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
brokers, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": brokers})
for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
    f.result()
p = Producer({"bootstrap.servers": brokers, "transactional.id": "dolmen-test-" + topic,
              "linger.ms": 0, "batch.num.messages": 1})
p.init_transactions(30)
for values in [["a", "b"], ["c"]]:
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode(), partition=0)
    p.flush(30)
    p.commit_transaction(30)
plain = Producer({"bootstrap.servers": brokers, "linger.ms": 0})
plain.produce(topic, value=b"d", partition=0)
plain.flush(30)
"#;

fn supplier_with(brokers: &str, isolation: Option<&str>) -> KafkaRecordSupplier {
    let mut properties = BTreeMap::from([("bootstrap.servers".to_string(), brokers.to_string())]);
    if let Some(level) = isolation {
        properties.insert("isolation.level".to_string(), level.to_string());
    }
    KafkaRecordSupplier::new(&properties).unwrap()
}

/// Transaction markers (control batches) are skipped, never returned, and the position moves
/// past the last one, so a task reading up to the latest offset knows it is caught up. (Before
/// the rskafka patch, a marker from a real broker failed every fetch.)
///
/// Aborted transactions are not written here: tansu 0.6 answers fetches without the list of
/// aborted transactions (checked with librdkafka's own read_committed consumer, which returns
/// aborted records from tansu too), so the read_committed filtering is tested on crafted fetch
/// responses in `vendor/rskafka` (`client::partition::dolmen_patch_tests`).
#[test]
fn transaction_markers_are_skipped_and_the_position_moves_past_them() {
    let (Some(brokers), Some(python)) = (brokers(), python()) else {
        return;
    };
    let topic = unique_topic("txn");
    let out = Command::new(&python)
        .args(["-c", PRODUCE, &brokers, &topic])
        .output()
        .expect("run the transactional producer");
    assert!(
        out.status.success(),
        "transactional producer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let partition = StreamPartition::new(topic.clone(), 0);
    for isolation in [None, Some("read_uncommitted")] {
        let mut supplier = supplier_with(&brokers, isolation);
        let latest = supplier.latest_offset(&partition).unwrap();
        supplier.assign(std::slice::from_ref(&partition)).unwrap();
        supplier.seek(&partition, 0).unwrap();
        let records = read_exactly(&mut supplier, 4);
        assert_eq!(values(&records), vec!["a", "b", "c", "d"], "{isolation:?}");
        // a, b, marker, c, marker, d.
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![0, 1, 3, 5], "{isolation:?}");
        assert_eq!(latest, 6, "{isolation:?}");
        assert_eq!(supplier.position(&partition), Some(latest), "{isolation:?}");
        assert!(
            supplier
                .poll(Duration::from_millis(200))
                .unwrap()
                .is_empty()
        );
    }
}
