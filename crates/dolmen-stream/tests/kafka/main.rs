//! `KafkaRecordSupplier` against a real Kafka-protocol broker (tansu, started by
//! `scripts/install-test-deps.sh`; `scripts/test.sh` exports `DOLMEN_TEST_KAFKA_BROKERS`). Each test
//! uses its own topic. [`tls`] starts brokers of its own behind a TLS terminator;
//! [`transactions`] writes with Kafka's transactional producer (librdkafka through Python's
//! confluent-kafka).

#[path = "../support/mod.rs"]
mod support;
mod tls;
mod transactions;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dolmen_stream::kafka::{KafkaAdmin, KafkaRecordSupplier, KafkaTestProducer, ProducerRecord};
use dolmen_stream::{OrderedRecord, RecordSupplier, StreamPartition, SupplierError};

/// The brokers of the test service, or `None` when the caller opted out with
/// `DOLMEN_SKIP_KAFKA_TESTS=1`. Fails the test when the service is not configured.
fn brokers() -> Option<String> {
    support::service(
        "DOLMEN_TEST_KAFKA_BROKERS",
        "DOLMEN_SKIP_KAFKA_TESTS",
        "run scripts/install-test-deps.sh (it starts the tansu Kafka broker) and export DOLMEN_TEST_KAFKA_BROKERS=127.0.0.1:9092, or run scripts/test.sh",
    )
}

/// A topic name no other test (or earlier run against the same broker) uses.
fn unique_topic(prefix: &str) -> String {
    support::unique_name(prefix)
}

fn supplier(brokers: &str) -> KafkaRecordSupplier {
    let properties = BTreeMap::from([("bootstrap.servers".to_string(), brokers.to_string())]);
    KafkaRecordSupplier::new(&properties).unwrap()
}

fn sp(topic: &str, partition: i32) -> StreamPartition<i32> {
    StreamPartition::new(topic, partition)
}

/// Creates `topic` with `partitions` partitions and writes `per_partition` records to each, with
/// values `"p-i"`; checks that they got offsets `0..per_partition`.
fn topic_with_records(brokers: &str, prefix: &str, partitions: i32, per_partition: i64) -> String {
    let topic = unique_topic(prefix);
    KafkaAdmin::new(brokers)
        .unwrap()
        .create_topic(&topic, partitions)
        .unwrap();
    let mut producer = KafkaTestProducer::new(brokers).unwrap();
    let records: Vec<ProducerRecord> = (0..partitions)
        .flat_map(|p| {
            (0..per_partition).map(move |i| ProducerRecord {
                partition: Some(p),
                key: Some(format!("k{p}-{i}").into_bytes()),
                value: Some(format!("{p}-{i}").into_bytes()),
                headers: vec![("seq".to_string(), Some(i.to_string().into_bytes()))],
                timestamp_ms: Some(1_700_000_000_000 + i),
            })
        })
        .collect();
    let deliveries = producer.send_all(&topic, &records).unwrap();
    for (record, delivery) in records.iter().zip(&deliveries) {
        assert_eq!(Some(delivery.partition), record.partition);
    }
    for p in 0..partitions {
        let offsets: Vec<i64> = deliveries
            .iter()
            .filter(|d| d.partition == p)
            .map(|d| d.offset)
            .collect();
        assert_eq!(
            offsets,
            (0..per_partition).collect::<Vec<_>>(),
            "partition {p}"
        );
    }
    topic
}

/// Polls until `count` records arrived (failing after 30 s), then keeps polling briefly to catch
/// any record beyond them.
fn read_exactly(supplier: &mut KafkaRecordSupplier, count: usize) -> Vec<OrderedRecord<i32, i64>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "only {} of {count} records arrived: {:?}",
            out.len(),
            values(&out)
        );
        out.extend(supplier.poll(Duration::from_millis(200)).unwrap());
    }
    for _ in 0..3 {
        out.extend(supplier.poll(Duration::from_millis(200)).unwrap());
    }
    assert_eq!(out.len(), count, "extra records: {:?}", values(&out));
    out
}

fn values(records: &[OrderedRecord<i32, i64>]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// The values read from one partition, in the order they came back.
fn partition_values(records: &[OrderedRecord<i32, i64>], partition: i32) -> Vec<String> {
    values(
        &records
            .iter()
            .filter(|r| r.partition == partition)
            .cloned()
            .collect::<Vec<_>>(),
    )
}

#[test]
fn discovers_the_partitions_of_a_topic() {
    let Some(brokers) = brokers() else { return };
    let topic = unique_topic("discover");
    KafkaAdmin::new(&brokers)
        .unwrap()
        .create_topic(&topic, 3)
        .unwrap();
    let supplier = supplier(&brokers);
    assert_eq!(supplier.partition_ids(&topic).unwrap(), vec![0, 1, 2]);
}

#[test]
fn a_missing_topic_is_stream_not_found() {
    let Some(brokers) = brokers() else { return };
    let topic = unique_topic("missing");
    match supplier(&brokers).partition_ids(&topic) {
        Err(SupplierError::StreamNotFound(name)) => assert_eq!(name, topic),
        other => panic!("{other:?}"),
    }
}

#[test]
fn reads_exactly_the_records_from_explicit_offsets_in_order() {
    let Some(brokers) = brokers() else { return };
    let topic = topic_with_records(&brokers, "explicit", 3, 10);
    let mut supplier = supplier(&brokers);
    let partitions = [sp(&topic, 0), sp(&topic, 1), sp(&topic, 2)];
    supplier.assign(&partitions).unwrap();
    supplier.seek(&partitions[0], 0).unwrap();
    supplier.seek(&partitions[1], 4).unwrap();
    supplier.seek(&partitions[2], 9).unwrap();

    let records = read_exactly(&mut supplier, 10 + 6 + 1);
    let expect = |p: i32, from: i64| (from..10).map(|i| format!("{p}-{i}")).collect::<Vec<_>>();
    assert_eq!(partition_values(&records, 0), expect(0, 0));
    assert_eq!(partition_values(&records, 1), expect(1, 4));
    assert_eq!(partition_values(&records, 2), expect(2, 9));

    let record = records
        .iter()
        .find(|r| r.partition == 1 && r.offset == 6)
        .unwrap();
    assert_eq!(record.stream, topic);
    assert_eq!(record.key.as_deref(), Some(&b"k1-6"[..]));
    assert_eq!(record.value.as_deref(), Some(&b"1-6"[..]));
    assert_eq!(
        record.headers,
        vec![("seq".to_string(), Some(b"6".to_vec()))]
    );
    assert_eq!(record.timestamp_ms, Some(1_700_000_000_006));
    for r in &records {
        assert_eq!(
            r.value,
            Some(format!("{}-{}", r.partition, r.offset).into_bytes())
        );
    }
    for partition in &partitions {
        assert_eq!(supplier.position(partition), Some(10));
    }
}

#[test]
fn latest_and_earliest_offsets() {
    let Some(brokers) = brokers() else { return };
    let topic = unique_topic("offsets");
    KafkaAdmin::new(&brokers)
        .unwrap()
        .create_topic(&topic, 2)
        .unwrap();
    let supplier = supplier(&brokers);
    assert_eq!(supplier.earliest_offset(&sp(&topic, 0)).unwrap(), 0);
    assert_eq!(supplier.latest_offset(&sp(&topic, 0)).unwrap(), 0);

    let mut producer = KafkaTestProducer::new(&brokers).unwrap();
    for i in 0..5 {
        let delivery = producer
            .send(&topic, &ProducerRecord::to_partition(0, format!("v{i}")))
            .unwrap();
        assert_eq!(delivery.offset, i);
        // The latest offset is the next one to be written.
        assert_eq!(supplier.latest_offset(&sp(&topic, 0)).unwrap(), i + 1);
    }
    assert_eq!(supplier.earliest_offset(&sp(&topic, 0)).unwrap(), 0);
    assert_eq!(supplier.latest_offset(&sp(&topic, 1)).unwrap(), 0);
}

#[test]
fn seeking_back_rereads() {
    let Some(brokers) = brokers() else { return };
    let topic = topic_with_records(&brokers, "reread", 1, 5);
    let mut supplier = supplier(&brokers);
    let partition = sp(&topic, 0);
    supplier.assign(std::slice::from_ref(&partition)).unwrap();
    supplier
        .seek_to_earliest(std::slice::from_ref(&partition))
        .unwrap();
    assert_eq!(
        values(&read_exactly(&mut supplier, 5)),
        vec!["0-0", "0-1", "0-2", "0-3", "0-4"]
    );
    supplier.seek(&partition, 2).unwrap();
    assert_eq!(supplier.position(&partition), Some(2));
    assert_eq!(
        values(&read_exactly(&mut supplier, 3)),
        vec!["0-2", "0-3", "0-4"]
    );
}

#[test]
fn an_offset_past_the_end_is_out_of_range() {
    let Some(brokers) = brokers() else { return };
    let topic = topic_with_records(&brokers, "range", 1, 3);
    let mut supplier = supplier(&brokers);
    let partition = sp(&topic, 0);
    supplier.assign(std::slice::from_ref(&partition)).unwrap();
    supplier.seek(&partition, 1).unwrap();
    match supplier.seek(&partition, 4) {
        Err(SupplierError::OffsetOutOfRange {
            stream,
            partition: 0,
            offset: 4,
            earliest: 0,
            latest: 3,
        }) if stream == topic => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        supplier.seek(&partition, -5),
        Err(SupplierError::OffsetOutOfRange { offset: -5, .. })
    ));
    // The failed seeks left the position alone.
    assert_eq!(supplier.position(&partition), Some(1));
    assert_eq!(values(&read_exactly(&mut supplier, 2)), vec!["0-1", "0-2"]);
}

#[test]
fn seeking_to_latest_reads_only_new_records() {
    let Some(brokers) = brokers() else { return };
    let topic = topic_with_records(&brokers, "latest", 1, 3);
    let mut supplier = supplier(&brokers);
    let partition = sp(&topic, 0);
    supplier.assign(std::slice::from_ref(&partition)).unwrap();
    supplier
        .seek_to_latest(std::slice::from_ref(&partition))
        .unwrap();
    assert_eq!(supplier.position(&partition), Some(3));
    assert!(
        supplier
            .poll(Duration::from_millis(300))
            .unwrap()
            .is_empty()
    );
    KafkaTestProducer::new(&brokers)
        .unwrap()
        .send(&topic, &ProducerRecord::to_partition(0, "new"))
        .unwrap();
    let records = read_exactly(&mut supplier, 1);
    assert_eq!(values(&records), vec!["new"]);
    assert_eq!(records[0].offset, 3);
}

#[test]
fn an_unreachable_broker_is_cannot_connect_within_the_request_timeout() {
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let servers = format!("127.0.0.1:{port}");
    let supplier = supplier(&servers).with_request_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let result = supplier.partition_ids("anything");
    let elapsed = started.elapsed();
    match result {
        Err(SupplierError::CannotConnect { target, .. }) => assert!(target.contains(&servers)),
        other => panic!("{other:?}"),
    }
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
    let started = Instant::now();
    assert!(matches!(
        supplier.latest_offset(&sp("anything", 0)),
        Err(SupplierError::CannotConnect { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(8));
}
