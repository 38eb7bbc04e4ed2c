//! TLS (`security.protocol=SSL`) against a real broker: a tansu broker of the test's own that
//! advertises a TLS terminator in front of it, as a load balancer or stunnel would stand in
//! front of a Kafka cluster. The terminator (tokio-rustls) holds a certificate from a CA made
//! for the test and may require client certificates (mutual TLS). The tansu binary comes from
//! `DOLMEN_TEST_TANSU` (set by `scripts/test.sh`).
//!
//! tansu's own TLS listener cannot be used: its 0.6 command line refuses `--cert` together with
//! `--key`.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dolmen_stream::kafka::{KafkaAdmin, KafkaRecordSupplier, KafkaTestProducer, ProducerRecord};
use dolmen_stream::{RecordSupplier, StreamPartition, SupplierError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{read_exactly, unique_topic, values};

/// The tansu binary, or `None` when Kafka tests are skipped.
fn tansu() -> Option<String> {
    match std::env::var("DOLMEN_TEST_TANSU") {
        Ok(t) if !t.is_empty() => Some(t),
        _ if std::env::var("DOLMEN_SKIP_KAFKA_TESTS").as_deref() == Ok("1") => None,
        _ => panic!(
            "DOLMEN_TEST_TANSU is not set: run scripts/install-test-deps.sh (it installs the tansu broker) and export DOLMEN_TEST_TANSU=<path of the tansu binary>, or run scripts/test.sh"
        ),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A certificate authority made for one test.
struct Ca {
    name: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Self {
            name: name.to_string(),
            issuer: rcgen::Issuer::new(params, key),
            pem: cert.pem(),
        }
    }

    /// A certificate for `names` (DNS names or IP addresses): (certificate PEM, key PEM).
    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A tansu broker behind a TLS terminator; both stop when dropped.
struct TlsBroker {
    tansu: Child,
    /// Runs the terminator.
    _runtime: tokio::runtime::Runtime,
    /// The terminator's address, which the broker advertises.
    address: String,
    dir: tempfile::TempDir,
}

impl Drop for TlsBroker {
    fn drop(&mut self) {
        let _ = self.tansu.kill();
        let _ = self.tansu.wait();
    }
}

impl TlsBroker {
    /// Starts one. The terminator presents a certificate for `names` signed by `ca`; with
    /// `client_ca` it requires client certificates signed by that CA.
    fn start(tansu: &str, ca: &Ca, names: &[&str], client_ca: Option<&Ca>) -> Self {
        let (broker_port, tls_port) = (free_port(), free_port());
        let address = format!("127.0.0.1:{tls_port}");
        let child = Command::new(tansu)
            .args([
                "broker",
                "--listener-url",
                &format!("tcp://127.0.0.1:{broker_port}"),
                "--advertised-listener-url",
                &format!("tcp://{address}"),
                "--storage-engine",
                "memory://tansu/",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tansu");
        let broker: SocketAddr = format!("127.0.0.1:{broker_port}").parse().unwrap();
        let started = Instant::now();
        while TcpStream::connect_timeout(&broker, Duration::from_millis(100)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "tansu did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }

        let (cert, key) = ca.issue(names);
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_ca {
            Some(client_ca) => {
                let mut roots = rustls::RootCertStore::empty();
                roots
                    .add(CertificateDer::from_pem_slice(client_ca.pem.as_bytes()).unwrap())
                    .unwrap();
                builder.with_client_cert_verifier(
                    rustls::server::WebPkiClientVerifier::builder_with_provider(
                        Arc::new(roots),
                        provider,
                    )
                    .build()
                    .unwrap(),
                )
            }
            None => builder.with_no_client_auth(),
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(
            builder.with_single_cert(certs, key).unwrap(),
        ));

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(address.as_str()))
            .unwrap();
        runtime.spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut client) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(broker).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                });
            }
        });
        Self {
            tansu: child,
            _runtime: runtime,
            address,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes `text` to a file of this broker's temp dir; returns its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path: PathBuf = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }

    /// Client properties for this broker: `SSL` plus `extra`.
    fn properties(&self, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut p = BTreeMap::from([
            ("bootstrap.servers".to_string(), self.address.clone()),
            ("security.protocol".to_string(), "SSL".to_string()),
            ("request.timeout.ms".to_string(), "5000".to_string()),
        ]);
        p.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        p
    }

    /// Client properties for this broker trusting `ca` through a PEM truststore file (Java's
    /// `PEM` truststore type, as a Druid user writes it).
    fn trusting(&self, ca: &Ca) -> BTreeMap<String, String> {
        let file = self.file(&format!("{}.pem", ca.name.replace(' ', "-")), &ca.pem);
        self.properties(&[
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &file),
        ])
    }
}

/// A supplier that gives up on a broker after 3 s (for connections expected to fail).
fn impatient_supplier(properties: &BTreeMap<String, String>) -> KafkaRecordSupplier {
    KafkaRecordSupplier::new(properties)
        .unwrap()
        .with_request_timeout(Duration::from_secs(3))
}

/// Creates a topic, writes `v0..v{n}` to its partition 0 and reads them back, all over TLS.
fn round_trip(properties: &BTreeMap<String, String>, n: usize) {
    let topic = unique_topic("tls");
    KafkaAdmin::with_properties(properties)
        .unwrap()
        .create_topic(&topic, 1)
        .unwrap();
    let mut producer = KafkaTestProducer::with_properties(properties).unwrap();
    let records: Vec<ProducerRecord> = (0..n)
        .map(|i| ProducerRecord::to_partition(0, format!("v{i}")))
        .collect();
    producer.send_all(&topic, &records).unwrap();
    let mut supplier = KafkaRecordSupplier::new(properties).unwrap();
    let partition = StreamPartition::new(topic, 0);
    supplier.assign(std::slice::from_ref(&partition)).unwrap();
    supplier.seek(&partition, 0).unwrap();
    let read = read_exactly(&mut supplier, n);
    assert_eq!(
        values(&read),
        (0..n).map(|i| format!("v{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn reads_and_writes_over_tls_trusting_a_pem_truststore() {
    let Some(tansu) = tansu() else { return };
    let ca = Ca::new("dolmen test CA");
    let broker = TlsBroker::start(&tansu, &ca, &["127.0.0.1"], None);
    round_trip(&broker.trusting(&ca), 5);
    // librdkafka's name for a CA file.
    let ca_file = broker.file("ca.pem", &ca.pem);
    round_trip(&broker.properties(&[("ssl.ca.location", &ca_file)]), 2);
}

#[test]
fn a_broker_certificate_from_another_ca_is_refused() {
    let Some(tansu) = tansu() else { return };
    let (ca, other) = (Ca::new("broker CA"), Ca::new("some other CA"));
    let broker = TlsBroker::start(&tansu, &ca, &["127.0.0.1"], None);
    let supplier = impatient_supplier(&broker.trusting(&other));
    match supplier.partition_ids("anything") {
        Err(SupplierError::CannotConnect { reason, .. }) => {
            assert!(
                reason.to_lowercase().contains("certificate"),
                "the reason should name the certificate: {reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_broker_certificate_must_name_the_host_unless_identification_is_off() {
    let Some(tansu) = tansu() else { return };
    let ca = Ca::new("dolmen test CA");
    // The certificate names `localhost` only; clients connect to 127.0.0.1.
    let broker = TlsBroker::start(&tansu, &ca, &["localhost"], None);
    let supplier = impatient_supplier(&broker.trusting(&ca));
    assert!(
        matches!(
            supplier.partition_ids("anything"),
            Err(SupplierError::CannotConnect { .. })
        ),
        "a certificate for another name must be refused"
    );
    // Kafka's `ssl.endpoint.identification.algorithm=` (empty) checks the chain only.
    let mut properties = broker.trusting(&ca);
    properties.insert(
        "ssl.endpoint.identification.algorithm".to_string(),
        String::new(),
    );
    round_trip(&properties, 2);
}

#[test]
fn mutual_tls_presents_a_client_certificate() {
    let Some(tansu) = tansu() else { return };
    let (ca, clients) = (Ca::new("broker CA"), Ca::new("client CA"));
    let broker = TlsBroker::start(&tansu, &ca, &["127.0.0.1"], Some(&clients));
    // Without a client certificate the terminator closes the connection.
    let supplier = impatient_supplier(&broker.trusting(&ca));
    assert!(supplier.partition_ids("anything").is_err());
    // With one (Java's PEM keystore given inline), everything works.
    let (cert, key) = clients.issue(&["dolmen-client"]);
    let mut properties = broker.trusting(&ca);
    properties.insert("ssl.keystore.type".to_string(), "PEM".to_string());
    properties.insert("ssl.keystore.certificate.chain".to_string(), cert);
    properties.insert("ssl.keystore.key".to_string(), key);
    round_trip(&properties, 3);
}
