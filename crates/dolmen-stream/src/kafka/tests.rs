use std::collections::BTreeMap;

use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn missing_or_blank_bootstrap_servers_names_the_property() {
    for properties in [props(&[]), props(&[("bootstrap.servers", "  ")])] {
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
fn user_properties_override_defaults_but_not_the_no_commit_settings() {
    let (config, servers) = client_config(
        &props(&[
            ("bootstrap.servers", " a:1,b:2 "),
            ("isolation.level", "read_uncommitted"),
            ("enable.auto.commit", "true"),
            ("security.protocol", "SASL_SSL"),
        ]),
        CONSUMER_DEFAULTS,
        CONSUMER_FORCED,
    )
    .unwrap();
    assert_eq!(servers, "a:1,b:2");
    assert_eq!(config.get("isolation.level"), Some("read_uncommitted"));
    assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
    assert_eq!(config.get("auto.offset.reset"), Some("error"));
    assert_eq!(config.get("enable.auto.commit"), Some("false"));
    assert_eq!(config.get("enable.auto.offset.store"), Some("false"));
}

#[test]
fn defaults_read_committed_without_commits() {
    let supplier =
        KafkaRecordSupplier::new(&props(&[("bootstrap.servers", "127.0.0.1:1")])).unwrap();
    assert_eq!(supplier.bootstrap_servers(), "127.0.0.1:1");
    let (config, _) = client_config(
        &props(&[("bootstrap.servers", "x:1")]),
        CONSUMER_DEFAULTS,
        CONSUMER_FORCED,
    )
    .unwrap();
    assert_eq!(config.get("isolation.level"), Some("read_committed"));
    assert_eq!(config.get("enable.auto.commit"), Some("false"));
}

#[test]
fn a_property_librdkafka_does_not_know_is_invalid_config_naming_it() {
    let properties = props(&[
        ("bootstrap.servers", "127.0.0.1:1"),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
    ]);
    match KafkaRecordSupplier::new(&properties) {
        Err(SupplierError::InvalidConfig(message)) => {
            assert!(message.contains("sasl.jaas.config"), "{message}");
        }
        other => panic!("{other:?}"),
    }
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
fn request_errors_map_to_connect_missing_topic_or_client() {
    let timeout = KafkaError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut);
    assert!(matches!(
        request_error(&timeout, "h:1", "t"),
        SupplierError::CannotConnect { target, .. } if target.contains("h:1")
    ));
    let unknown = KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownTopicOrPartition);
    assert!(matches!(
        request_error(&unknown, "h:1", "t"),
        SupplierError::StreamNotFound(s) if s == "t"
    ));
    let other = KafkaError::MetadataFetch(RDKafkaErrorCode::InvalidRequest);
    assert!(matches!(
        request_error(&other, "h:1", "t"),
        SupplierError::Client(_)
    ));
}
