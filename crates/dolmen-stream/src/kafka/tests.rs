use std::collections::BTreeMap;

use rskafka::client::error::RequestContext;

use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn missing_or_blank_bootstrap_servers_names_the_property() {
    for properties in [
        props(&[]),
        props(&[("bootstrap.servers", "  ")]),
        props(&[("group.id", "g")]),
    ] {
        match KafkaRecordSupplier::new(&properties) {
            Err(SupplierError::InvalidConfig(message)) => {
                assert!(
                    message.contains("consumerProperties.bootstrap.servers"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn defaults_read_committed_and_druids_poll_size() {
    let supplier =
        KafkaRecordSupplier::new(&props(&[("bootstrap.servers", " 127.0.0.1:1 ")])).unwrap();
    assert_eq!(supplier.bootstrap_servers(), "127.0.0.1:1");
    let settings = &supplier.connection.settings;
    assert!(matches!(
        settings.isolation,
        rskafka::client::partition::IsolationLevel::ReadCommitted
    ));
    assert_eq!(settings.fetch_max_wait, DEFAULT_FETCH_MAX_WAIT);
    assert_eq!(supplier.max_poll_records, DEFAULT_MAX_POLL_RECORDS);
    assert_eq!(supplier.connection.request_timeout, DEFAULT_REQUEST_TIMEOUT);
}

#[test]
fn consumer_properties_set_poll_size_and_request_timeout() {
    let supplier = KafkaRecordSupplier::new(&props(&[
        ("bootstrap.servers", "127.0.0.1:1"),
        ("max.poll.records", "42"),
        ("request.timeout.ms", "1500"),
    ]))
    .unwrap();
    assert_eq!(supplier.max_poll_records, 42);
    assert_eq!(
        supplier.connection.request_timeout,
        Duration::from_millis(1500)
    );
    let supplier = supplier.with_request_timeout(Duration::from_secs(3));
    assert_eq!(supplier.connection.request_timeout, Duration::from_secs(3));
}

#[test]
fn java_client_only_properties_are_accepted() {
    // Druid users write Java client properties; those of consumer groups mean nothing here.
    KafkaRecordSupplier::new(&props(&[
        ("bootstrap.servers", "127.0.0.1:1"),
        ("group.id", "g"),
        ("auto.offset.reset", "earliest"),
        (
            "key.deserializer",
            "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        ),
        ("some.future.property", "x"),
    ]))
    .unwrap();
}

#[test]
fn seeking_an_unassigned_partition_fails_without_a_broker() {
    let mut supplier =
        KafkaRecordSupplier::new(&props(&[("bootstrap.servers", "127.0.0.1:1")])).unwrap();
    assert!(matches!(
        supplier.seek(&StreamPartition::new("t", 3), 0),
        Err(SupplierError::NotAssigned { partition: 3, .. })
    ));
}

#[test]
fn polling_without_an_assignment_waits_and_returns_nothing() {
    let mut supplier =
        KafkaRecordSupplier::new(&props(&[("bootstrap.servers", "127.0.0.1:1")])).unwrap();
    let t = Instant::now();
    assert!(supplier.poll(Duration::from_millis(50)).unwrap().is_empty());
    assert!(t.elapsed() >= Duration::from_millis(50));
}

fn server_error(protocol_error: ProtocolError) -> KafkaError {
    KafkaError::ServerError {
        protocol_error,
        error_message: None,
        request: RequestContext::Topic("t".into()),
        response: None,
        is_virtual: false,
    }
}

#[test]
fn client_errors_map_to_connect_missing_topic_authentication_or_client() {
    let connection = Connection::new(
        ClientSettings::from_properties(&props(&[("bootstrap.servers", "h:1")])).unwrap(),
    );
    assert!(matches!(
        connection.error(KafkaError::Timeout, Some("t")),
        SupplierError::CannotConnect { target, .. } if target.contains("h:1")
    ));
    assert!(matches!(
        connection.error(server_error(ProtocolError::UnknownTopicOrPartition), Some("t")),
        SupplierError::StreamNotFound(s) if s == "t"
    ));
    assert!(matches!(
        connection.error(server_error(ProtocolError::SaslAuthenticationFailed), Some("t")),
        SupplierError::Client(m) if m.contains("authentication") && m.contains("h:1")
    ));
    assert!(matches!(
        connection.error(server_error(ProtocolError::LeaderNotAvailable), Some("t")),
        SupplierError::CannotConnect { .. }
    ));
    assert!(matches!(
        connection.error(server_error(ProtocolError::InvalidRequest), Some("t")),
        SupplierError::Client(_)
    ));
    // A retry deadline is classified by the error that kept failing.
    let retried = KafkaError::RetryFailed(rskafka::BackoffError::DeadlineExceded {
        deadline: Duration::from_secs(1),
        source: Box::new(server_error(ProtocolError::UnknownTopicOrPartition)),
    });
    assert_eq!(classify(&retried), ErrorKind::UnknownTopic);
    assert_eq!(
        classify(&server_error(ProtocolError::OffsetOutOfRange)),
        ErrorKind::OffsetOutOfRange
    );
}
