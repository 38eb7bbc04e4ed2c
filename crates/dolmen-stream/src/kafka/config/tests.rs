use std::collections::BTreeMap;

use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut p: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    p.entry(BOOTSTRAP_SERVERS.to_string())
        .or_insert_with(|| "127.0.0.1:9092".to_string());
    p
}

/// The message of an `InvalidConfig`, failing otherwise.
fn invalid_message(properties: &BTreeMap<String, String>) -> String {
    match ClientSettings::from_properties(properties) {
        Err(SupplierError::InvalidConfig(m)) => m,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

/// A CA and a certificate it signed for `127.0.0.1`/`localhost`, as PEM: (ca, cert, key).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn plaintext_by_default_with_druids_defaults() {
    let s = ClientSettings::from_properties(&props(&[(BOOTSTRAP_SERVERS, " a:1 , b:2 ")])).unwrap();
    assert_eq!(s.bootstrap_servers, "a:1 , b:2");
    assert_eq!(s.brokers, vec!["a:1", "b:2"]);
    assert!(s.tls.is_none() && s.sasl.is_none());
    assert!(matches!(s.isolation, IsolationLevel::ReadCommitted));
    assert_eq!(s.fetch_max_wait, DEFAULT_FETCH_MAX_WAIT);
    assert_eq!(s.fetch_min_bytes, 1);
    assert_eq!(
        s.max_partition_fetch_bytes,
        DEFAULT_MAX_PARTITION_FETCH_BYTES
    );
    assert_eq!(s.max_poll_records, None);
}

#[test]
fn a_broker_without_a_port_is_refused_naming_it() {
    let m = invalid_message(&props(&[(BOOTSTRAP_SERVERS, "kafka:9092,kafka2")]));
    assert!(
        m.contains("bootstrap.servers") && m.contains("kafka2"),
        "{m}"
    );
}

#[test]
fn fetch_settings_take_java_and_librdkafka_names() {
    let s = ClientSettings::from_properties(&props(&[
        ("fetch.max.wait.ms", "250"),
        ("fetch.min.bytes", "1024"),
        ("max.partition.fetch.bytes", "65536"),
        ("max.poll.records", "7"),
        ("isolation.level", "READ_UNCOMMITTED"),
        ("client.id", "druid-1"),
    ]))
    .unwrap();
    assert_eq!(s.fetch_max_wait, Duration::from_millis(250));
    assert_eq!(s.fetch_min_bytes, 1024);
    assert_eq!(s.max_partition_fetch_bytes, 65536);
    assert_eq!(s.max_poll_records, Some(7));
    assert!(matches!(s.isolation, IsolationLevel::ReadUncommitted));
    assert_eq!(s.client_id.as_deref(), Some("druid-1"));
    let s = ClientSettings::from_properties(&props(&[("fetch.wait.max.ms", "20")])).unwrap();
    assert_eq!(s.fetch_max_wait, Duration::from_millis(20));
}

#[test]
fn bad_values_are_refused_naming_the_property() {
    for (property, value) in [
        ("fetch.max.wait.ms", "soon"),
        ("max.poll.records", "0"),
        ("max.partition.fetch.bytes", "-1"),
        ("isolation.level", "serializable"),
        ("security.protocol", "KERBEROS"),
    ] {
        let m = invalid_message(&props(&[(property, value)]));
        assert!(m.contains(&format!("consumerProperties.{property}")), "{m}");
    }
}

#[test]
fn sasl_credentials_from_a_jaas_config() {
    let s = ClientSettings::from_properties(&props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="druid" password="p\"w;d";"#,
        ),
    ]))
    .unwrap();
    assert!(s.tls.is_none());
    match s.sasl {
        Some(SaslConfig::ScramSha512(c)) => {
            assert_eq!(c.username, "druid");
            assert_eq!(c.password, "p\"w;d");
        }
        other => panic!("{other:?}"),
    }
    // PLAIN is the default mechanism, as in the Java client.
    let s = ClientSettings::from_properties(&props(&[
        ("security.protocol", "sasl_plaintext"),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p;",
        ),
    ]))
    .unwrap();
    assert!(matches!(s.sasl, Some(SaslConfig::Plain(c)) if c.username == "u" && c.password == "p"));
}

#[test]
fn sasl_credentials_librdkafka_style() {
    let s = ClientSettings::from_properties(&props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "SCRAM-SHA-256"),
        ("sasl.username", "a"),
        ("sasl.password", "b"),
    ]))
    .unwrap();
    assert!(
        matches!(s.sasl, Some(SaslConfig::ScramSha256(c)) if c.username == "a" && c.password == "b")
    );
}

#[test]
fn sasl_problems_name_the_property() {
    let m = invalid_message(&props(&[("security.protocol", "SASL_PLAINTEXT")]));
    assert!(m.contains("sasl.jaas.config"), "{m}");
    let m = invalid_message(&props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "GSSAPI"),
        ("sasl.username", "a"),
        ("sasl.password", "b"),
    ]));
    assert!(
        m.contains("consumerProperties.sasl.mechanism") && m.contains("GSSAPI"),
        "{m}"
    );
    for jaas in [
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\"",
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u;",
        "org.apache.kafka.common.security.plain.PlainLoginModule username=\"u\" password=\"p\";",
        "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"p\";",
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
    ] {
        let m = invalid_message(&props(&[
            ("security.protocol", "SASL_SSL"),
            ("enable.ssl.certificate.verification", "false"),
            ("sasl.jaas.config", jaas),
        ]));
        assert!(
            m.contains("consumerProperties.sasl.jaas.config"),
            "{jaas}: {m}"
        );
    }
}

#[test]
fn tls_with_a_pem_truststore_and_a_pem_client_identity() {
    let (ca, cert, key) = certificates();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let cert_file = dir.path().join("client.pem");
    std::fs::write(&cert_file, &cert).unwrap();
    let key_file = dir.path().join("client.key");
    std::fs::write(&key_file, &key).unwrap();
    // Java's PEM truststore type, with a PEM keystore given inline.
    let s = ClientSettings::from_properties(&props(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", ca_file.to_str().unwrap()),
        ("ssl.keystore.certificate.chain", &cert),
        ("ssl.keystore.key", &key),
    ]))
    .unwrap();
    let tls = s.tls.expect("tls");
    assert!(tls.client_auth_cert_resolver.has_certs());
    // librdkafka's file names.
    let s = ClientSettings::from_properties(&props(&[
        ("security.protocol", "SASL_SSL"),
        ("ssl.ca.location", ca_file.to_str().unwrap()),
        ("ssl.certificate.location", cert_file.to_str().unwrap()),
        ("ssl.key.location", key_file.to_str().unwrap()),
        ("ssl.endpoint.identification.algorithm", ""),
        ("sasl.username", "u"),
        ("sasl.password", "p"),
    ]))
    .unwrap();
    assert!(s.tls.is_some() && s.sasl.is_some());
}

#[test]
fn tls_store_problems_name_the_property() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.txt");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let (_, cert, key) = certificates();
    for (pairs, property) in [
        (
            vec![("ssl.truststore.location", "/nonexistent/ts.p12")],
            "ssl.truststore.location",
        ),
        (
            vec![
                ("ssl.truststore.location", "/etc/hosts"),
                ("ssl.truststore.type", "JKS"),
            ],
            "ssl.truststore.type",
        ),
        (
            vec![
                ("ssl.truststore.location", not_pem.to_str().unwrap()),
                ("ssl.truststore.type", "PEM"),
            ],
            "ssl.truststore.location",
        ),
        (
            vec![
                ("ssl.truststore.location", not_pem.to_str().unwrap()),
                ("ssl.truststore.password", "changeit"),
            ],
            "ssl.truststore.location",
        ),
        (
            vec![("ssl.ca.location", not_pem.to_str().unwrap())],
            "ssl.ca.location",
        ),
        (
            vec![
                ("enable.ssl.certificate.verification", "false"),
                ("ssl.keystore.certificate.chain", cert.as_str()),
            ],
            "ssl.keystore.certificate.chain",
        ),
        (
            vec![
                ("enable.ssl.certificate.verification", "false"),
                ("ssl.key.pem", key.as_str()),
            ],
            "ssl.key.pem",
        ),
    ] {
        let mut p = props(&[("security.protocol", "SSL")]);
        p.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let m = invalid_message(&p);
        assert!(
            m.contains(&format!("consumerProperties.{property}")),
            "{pairs:?}: {m}"
        );
    }
}

#[test]
fn a_pkcs12_truststore_is_read() {
    let (ca, _, _) = certificates();
    let der = CertificateDer::from_pem_slice(ca.as_bytes()).unwrap();
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "ca",
        p12_keystore::KeyStoreEntry::Certificate(
            p12_keystore::Certificate::from_der(der.as_ref()).unwrap(),
        ),
    );
    let data = store
        .writer("changeit")
        .write()
        .expect("write a PKCS12 truststore");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("truststore.p12");
    std::fs::write(&file, data).unwrap();
    let s = ClientSettings::from_properties(&props(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.location", file.to_str().unwrap()),
        ("ssl.truststore.type", "PKCS12"),
        ("ssl.truststore.password", "changeit"),
    ]))
    .unwrap();
    assert!(s.tls.is_some());
    // The wrong password names the store.
    let m = invalid_message(&props(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.location", file.to_str().unwrap()),
        ("ssl.truststore.password", "wrong"),
    ]));
    assert!(
        m.contains("consumerProperties.ssl.truststore.location"),
        "{m}"
    );
}

#[test]
fn jaas_parsing_follows_kafkas_syntax() {
    let o =
        parse_jaas("  org.example.Module  optional\n a=1  b = \"two words\" c=\"esc\\\\aped\" ; ");
    // `b = "..."` has spaces around `=`, which Kafka's parser does not accept either.
    assert!(o.is_err(), "{o:?}");
    let o =
        parse_jaas("org.example.Module optional a=1 b=\"two words\" c=\"esc\\\\aped\";").unwrap();
    assert_eq!(o.get("a").map(String::as_str), Some("1"));
    assert_eq!(o.get("b").map(String::as_str), Some("two words"));
    assert_eq!(o.get("c").map(String::as_str), Some("esc\\aped"));
}
