//! Kafka client settings read from a supervisor's `consumerProperties`.
//!
//! Druid hands `consumerProperties` to Kafka's Java consumer, so Druid users write Java client
//! property names (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
//! `ssl.truststore.location`, `fetch.max.wait.ms`, ...). Dolmen's client is pure Rust
//! ([`rskafka`], TLS through rustls; ADR 0016), so the properties are read here and mapped onto
//! it. librdkafka's names for the same settings (`sasl.mechanisms`, `sasl.username`,
//! `ssl.ca.location`, `fetch.wait.max.ms`, ...) are accepted too, because Dolmen's earlier
//! releases passed properties to librdkafka.
//!
//! | property | meaning |
//! |---|---|
//! | `bootstrap.servers` | required: `host:port[,host:port...]` |
//! | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` |
//! | `sasl.mechanism` / `sasl.mechanisms` | `PLAIN` (default with SASL), `SCRAM-SHA-256`, `SCRAM-SHA-512` |
//! | `sasl.jaas.config` | `...PlainLoginModule required username="u" password="p";` (or `ScramLoginModule`) |
//! | `sasl.username`, `sasl.password` | the credentials, librdkafka style |
//! | `ssl.truststore.location`, `ssl.truststore.type`, `ssl.truststore.password` | CAs to trust: a `PKCS12` (default type here) or `PEM` file; `JKS` is refused with a hint |
//! | `ssl.truststore.certificates` | CAs as inline PEM (Java's `PEM` truststore type) |
//! | `ssl.ca.location`, `ssl.ca.pem` | CAs as a PEM file or inline PEM (librdkafka) |
//! | `ssl.keystore.location`, `ssl.keystore.type`, `ssl.keystore.password`, `ssl.key.password` | client certificate and key (mutual TLS): `PKCS12` or `PEM` |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` | client certificate chain and key as inline PEM |
//! | `ssl.certificate.location`, `ssl.key.location`, `ssl.certificate.pem`, `ssl.key.pem` | client certificate and key as PEM (librdkafka) |
//! | `ssl.endpoint.identification.algorithm` | `https` (default): the broker certificate must name the host; empty: chain checked, name not |
//! | `enable.ssl.certificate.verification` | `false` trusts any broker certificate (librdkafka; for tests only) |
//! | `isolation.level` | `read_committed` (default, as Druid) or `read_uncommitted` |
//! | `fetch.max.wait.ms` / `fetch.wait.max.ms` | longest a fetch waits for data (default 50 ms here, see [`DEFAULT_FETCH_MAX_WAIT`]) |
//! | `fetch.min.bytes` | bytes a fetch waits for (default 1) |
//! | `max.partition.fetch.bytes` | most bytes one fetch of one partition returns (default 1 MiB) |
//! | `max.poll.records` | most records one poll returns (default 500) |
//! | `request.timeout.ms` | bound on a metadata or offsets request (default 10 s) |
//! | `client.id` | the client id the brokers see |
//!
//! Properties of consumer-group membership and offset commits (`group.id`,
//! `enable.auto.commit`, `auto.offset.reset`, deserializers, session and heartbeat settings)
//! have no meaning here: Druid assigns partitions by hand and keeps offsets in its metadata
//! store. They, and any other property, are accepted and ignored (the Java client does the same
//! with unknown ones); properties Dolmen does not know are logged once per client.
//!
//! A property value that is present but unusable (an unknown `security.protocol`, a truststore
//! that cannot be read, a `JKS` store, `GSSAPI`) is a [`SupplierError::InvalidConfig`] naming the
//! property: failing when the supervisor starts beats a task that can never connect.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rskafka::client::partition::IsolationLevel;
use rskafka::client::{Credentials, SaslConfig};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::KafkaSupplierError;
use crate::supplier::SupplierError;

/// The consumer property that names the brokers; required in `consumerProperties`.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";

/// The default bound on one metadata or offsets request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most records one poll returns unless `max.poll.records` says otherwise (the Java
/// consumer's default, which Druid keeps).
pub const DEFAULT_MAX_POLL_RECORDS: usize = 500;

/// How long a fetch waits for data unless `fetch.max.wait.ms` says otherwise.
///
/// The Java client's default is 500 ms. A broker answers a fetch as soon as it has
/// `fetch.min.bytes` (1), but some (tansu, the test broker) hold every fetch until this wait
/// expires, which alone would put half a second between produce and queryable; 50 ms keeps the
/// sub-second target at the cost of more empty fetches on an idle topic. Measured with tansu at
/// 10k events/s: produce-to-fetch p99 598 ms at 500 ms, 212 ms at 100, 122 ms at 20.
pub const DEFAULT_FETCH_MAX_WAIT: Duration = Duration::from_millis(50);

/// The most bytes one fetch of one partition returns unless `max.partition.fetch.bytes` says
/// otherwise (the Java consumer's default, 1 MiB).
pub const DEFAULT_MAX_PARTITION_FETCH_BYTES: i32 = 1024 * 1024;

/// Properties that only matter to consumer groups, offset commits or the Java client's
/// internals: accepted and ignored without a log line.
const IGNORED: &[&str] = &[
    "group.id",
    "group.instance.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "enable.partition.eof",
    "fetch.max.bytes",
    "receive.buffer.bytes",
    "send.buffer.bytes",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "connections.max.idle.ms",
    "default.api.timeout.ms",
    "check.crcs",
    "exclude.internal.topics",
    "allow.auto.create.topics",
    "client.rack",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "sasl.kerberos.service.name",
];

/// Every property this module reads.
const KNOWN: &[&str] = &[
    BOOTSTRAP_SERVERS,
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.certificate.pem",
    "ssl.key.pem",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    "isolation.level",
    "fetch.max.wait.ms",
    "fetch.wait.max.ms",
    "fetch.min.bytes",
    "max.partition.fetch.bytes",
    "max.poll.records",
    "request.timeout.ms",
    "client.id",
];

/// The Kafka client settings of one supplier, parsed from `consumerProperties`.
#[derive(Clone)]
pub(crate) struct ClientSettings {
    /// `bootstrap.servers` as given (trimmed), for messages.
    pub(crate) bootstrap_servers: String,
    /// The bootstrap brokers, one `host:port` each.
    pub(crate) brokers: Vec<String>,
    /// `client.id`, when given.
    pub(crate) client_id: Option<String>,
    /// The TLS configuration when `security.protocol` is `SSL` or `SASL_SSL`.
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    /// The SASL configuration when `security.protocol` is `SASL_PLAINTEXT` or `SASL_SSL`.
    pub(crate) sasl: Option<SaslConfig>,
    /// `isolation.level`.
    pub(crate) isolation: IsolationLevel,
    /// `fetch.max.wait.ms`.
    pub(crate) fetch_max_wait: Duration,
    /// `fetch.min.bytes`.
    pub(crate) fetch_min_bytes: i32,
    /// `max.partition.fetch.bytes`.
    pub(crate) max_partition_fetch_bytes: i32,
    /// `max.poll.records`, when given.
    pub(crate) max_poll_records: Option<usize>,
    /// `request.timeout.ms`, when given.
    pub(crate) request_timeout: Option<Duration>,
}

impl std::fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials stay out of logs.
        f.debug_struct("ClientSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("client_id", &self.client_id)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(sasl_mechanism_name))
            .field("isolation", &self.isolation)
            .field("fetch_max_wait", &self.fetch_max_wait)
            .field("fetch_min_bytes", &self.fetch_min_bytes)
            .field("max_partition_fetch_bytes", &self.max_partition_fetch_bytes)
            .finish_non_exhaustive()
    }
}

/// The SASL mechanism's standard name.
fn sasl_mechanism_name(sasl: &SaslConfig) -> &'static str {
    match sasl {
        SaslConfig::Plain(_) => "PLAIN",
        SaslConfig::ScramSha256(_) => "SCRAM-SHA-256",
        SaslConfig::ScramSha512(_) => "SCRAM-SHA-512",
        SaslConfig::Oauthbearer(_) => "OAUTHBEARER",
    }
}

fn invalid(property: &str, message: impl std::fmt::Display) -> KafkaSupplierError {
    SupplierError::InvalidConfig(format!("consumerProperties.{property}: {message}"))
}

/// The first of `names` that is set, with its value.
fn first<'a>(
    properties: &'a BTreeMap<String, String>,
    names: &[&'static str],
) -> Option<(&'static str, &'a str)> {
    names
        .iter()
        .find_map(|name| properties.get(*name).map(|v| (*name, v.as_str())))
}

fn parse_number<T>(
    properties: &BTreeMap<String, String>,
    names: &[&'static str],
    min: T,
) -> Result<Option<T>, KafkaSupplierError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some((name, value)) = first(properties, names) else {
        return Ok(None);
    };
    match value.trim().parse::<T>() {
        Ok(n) if n >= min => Ok(Some(n)),
        _ => Err(invalid(
            name,
            format!("expected a whole number of at least {min}, got `{value}`"),
        )),
    }
}

impl ClientSettings {
    /// Reads `consumerProperties` (see the module docs for the table).
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] naming the property when `bootstrap.servers` is missing
    /// or blank, or a present property is unusable.
    pub(crate) fn from_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, KafkaSupplierError> {
        let bootstrap_servers = properties
            .get(BOOTSTRAP_SERVERS)
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                SupplierError::InvalidConfig(format!(
                    "consumerProperties.{BOOTSTRAP_SERVERS} is required: the Kafka brokers to read from, as host:port[,host:port...]"
                ))
            })?
            .to_string();
        let brokers: Vec<String> = bootstrap_servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = brokers.iter().find(|b| !is_host_port(b)) {
            return Err(invalid(
                BOOTSTRAP_SERVERS,
                format!("`{bad}` is not host:port"),
            ));
        }

        let protocol = properties
            .get("security.protocol")
            .map_or("PLAINTEXT".to_string(), |p| p.trim().to_ascii_uppercase());
        let (use_tls, use_sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => {
                return Err(invalid(
                    "security.protocol",
                    format!("`{other}` is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
                ));
            }
        };
        let tls = if use_tls {
            Some(Arc::new(tls_config(properties)?))
        } else {
            None
        };
        let sasl = if use_sasl {
            Some(sasl_config(properties)?)
        } else {
            None
        };

        let isolation = match properties
            .get("isolation.level")
            .map(|s| s.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("read_committed") => IsolationLevel::ReadCommitted,
            Some("read_uncommitted") => IsolationLevel::ReadUncommitted,
            Some(other) => {
                return Err(invalid(
                    "isolation.level",
                    format!("`{other}` is not read_committed or read_uncommitted"),
                ));
            }
        };
        let fetch_max_wait =
            parse_number::<u64>(properties, &["fetch.max.wait.ms", "fetch.wait.max.ms"], 0)?
                .map_or(DEFAULT_FETCH_MAX_WAIT, Duration::from_millis)
                .min(Duration::from_millis(i32::MAX as u64));
        let fetch_min_bytes =
            parse_number::<i32>(properties, &["fetch.min.bytes"], 0)?.unwrap_or(1);
        let max_partition_fetch_bytes =
            parse_number::<i32>(properties, &["max.partition.fetch.bytes"], 1)?
                .unwrap_or(DEFAULT_MAX_PARTITION_FETCH_BYTES)
                .min(i32::MAX - 1);
        let max_poll_records = parse_number::<usize>(properties, &["max.poll.records"], 1)?;
        let request_timeout =
            parse_number::<u64>(properties, &["request.timeout.ms"], 1)?.map(Duration::from_millis);
        let client_id = properties
            .get("client.id")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());

        let unknown: Vec<&str> = properties
            .keys()
            .map(String::as_str)
            .filter(|k| !KNOWN.contains(k) && !IGNORED.contains(k))
            .collect();
        if !unknown.is_empty() {
            tracing::warn!(
                properties = ?unknown,
                "consumerProperties not used by Dolmen's Kafka client; ignored"
            );
        }

        Ok(Self {
            bootstrap_servers,
            brokers,
            client_id,
            tls,
            sasl,
            isolation,
            fetch_max_wait,
            fetch_min_bytes,
            max_partition_fetch_bytes,
            max_poll_records,
            request_timeout,
        })
    }
}

/// Whether `s` looks like `host:port` (a bracketed IPv6 host is allowed).
fn is_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok(),
        None => false,
    }
}

/// The SASL settings: the mechanism and the credentials from `sasl.jaas.config` or
/// `sasl.username`/`sasl.password`.
fn sasl_config(properties: &BTreeMap<String, String>) -> Result<SaslConfig, KafkaSupplierError> {
    let (mechanism_property, mechanism) = first(properties, &["sasl.mechanism", "sasl.mechanisms"])
        .map_or(("sasl.mechanism", "PLAIN".to_string()), |(name, value)| {
            (name, value.trim().to_ascii_uppercase())
        });
    let (username, password) = match properties.get("sasl.jaas.config") {
        Some(jaas) => {
            let options = parse_jaas(jaas).map_err(|m| invalid("sasl.jaas.config", m))?;
            let get = |key: &str| {
                options.get(key).cloned().ok_or_else(|| {
                    invalid(
                        "sasl.jaas.config",
                        format!("the login module options have no `{key}`"),
                    )
                })
            };
            (get("username")?, get("password")?)
        }
        None => {
            let get = |key: &'static str| {
                properties.get(key).cloned().ok_or_else(|| {
                    SupplierError::InvalidConfig(format!(
                        "consumerProperties.sasl.jaas.config (or sasl.username and sasl.password) is required with security.protocol SASL_*: {key} is missing"
                    ))
                })
            };
            (get("sasl.username")?, get("sasl.password")?)
        }
    };
    let credentials = Credentials::new(username, password);
    match mechanism.as_str() {
        "PLAIN" => Ok(SaslConfig::Plain(credentials)),
        "SCRAM-SHA-256" => Ok(SaslConfig::ScramSha256(credentials)),
        "SCRAM-SHA-512" => Ok(SaslConfig::ScramSha512(credentials)),
        other => Err(invalid(
            mechanism_property,
            format!(
                "`{other}` is not supported; Dolmen's Kafka client supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"
            ),
        )),
    }
}

/// Parses a JAAS login configuration entry as Kafka's `sasl.jaas.config` holds it:
/// `<LoginModule class> <flag> key=value ... ;` where values may be double-quoted (with `\`
/// escapes). Returns the options. Kafka: `org.apache.kafka.common.security.JaasConfig`.
fn parse_jaas(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut chars = text.trim().chars().peekable();
    let token = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut t = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == ';' || c == '=' {
                break;
            }
            t.push(c);
            chars.next();
        }
        t
    };
    let module = token(&mut chars);
    if module.is_empty() {
        return Err("expected `<LoginModule class> required key=\"value\" ...;`".into());
    }
    if module.ends_with("GssapiLoginModule") || module.contains("Krb5LoginModule") {
        return Err(format!(
            "the login module `{module}` (Kerberos) is not supported"
        ));
    }
    let flag = token(&mut chars);
    if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
        return Err(format!(
            "expected a control flag (required, requisite, sufficient, optional) after `{module}`, got `{flag}`"
        ));
    }
    let mut options = BTreeMap::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None => return Err("the entry must end with `;`".into()),
            Some(';') => break,
            _ => {}
        }
        let key = token(&mut chars);
        if key.is_empty() || chars.next() != Some('=') {
            return Err(format!("expected key=value, found `{key}`"));
        }
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            let mut v = String::new();
            loop {
                match chars.next() {
                    None => return Err(format!("the value of `{key}` has no closing quote")),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => v.push(c),
                        None => return Err(format!("the value of `{key}` ends in `\\`")),
                    },
                    Some(c) => v.push(c),
                }
            }
            v
        } else {
            token(&mut chars)
        };
        options.insert(key, value);
    }
    Ok(options)
}

/// Reads a file named by `property`, naming the property when it cannot.
fn read_file(property: &str, path: &str) -> Result<Vec<u8>, KafkaSupplierError> {
    std::fs::read(Path::new(path.trim()))
        .map_err(|e| invalid(property, format!("cannot read `{}`: {e}", path.trim())))
}

/// Certificates from PEM text, naming `property` when there are none or they do not parse.
fn pem_certificates(
    property: &str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, KafkaSupplierError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(property, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(property, "holds no PEM certificate"));
    }
    Ok(certs)
}

/// A private key from PEM text (PKCS#8, PKCS#1 or SEC1), naming `property` when there is none.
fn pem_private_key(
    property: &str,
    pem: &[u8],
) -> Result<PrivateKeyDer<'static>, KafkaSupplierError> {
    if std::str::from_utf8(pem).is_ok_and(|s| s.contains("ENCRYPTED PRIVATE KEY")) {
        return Err(invalid(
            property,
            "encrypted PEM private keys are not supported; give an unencrypted key or a PKCS12 keystore",
        ));
    }
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| invalid(property, format!("no usable PEM private key: {e}")))
}

/// The store type of `type_property` (default PKCS12, Java's default since Java 9), refusing
/// JKS with a conversion hint.
fn store_type(
    properties: &BTreeMap<String, String>,
    type_property: &str,
) -> Result<String, KafkaSupplierError> {
    let store_type = properties
        .get(type_property)
        .map_or("PKCS12".to_string(), |t| t.trim().to_ascii_uppercase());
    match store_type.as_str() {
        "PKCS12" | "PEM" => Ok(store_type),
        "JKS" => Err(invalid(
            type_property,
            "JKS stores cannot be read without a JVM; convert the store with `keytool -importkeystore -srcstoretype JKS -deststoretype PKCS12 ...` and set PKCS12, or use PEM",
        )),
        other => Err(invalid(
            type_property,
            format!("`{other}` is not one of PKCS12, PEM, JKS"),
        )),
    }
}

/// Opens a PKCS#12 file.
fn pkcs12(
    property: &str,
    path: &str,
    password: &str,
) -> Result<p12_keystore::KeyStore, KafkaSupplierError> {
    let data = read_file(property, path)?;
    p12_keystore::KeyStore::from_pkcs12(&data, password, p12_keystore::Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| {
            invalid(
                property,
                format!(
                    "cannot open `{}` as PKCS12 (is the password right?): {e}",
                    path.trim()
                ),
            )
        })
}

/// The CAs to trust: the configured truststore, or the system's roots when none is configured.
fn root_store(properties: &BTreeMap<String, String>) -> Result<RootCertStore, KafkaSupplierError> {
    let mut certs: Vec<(&str, CertificateDer<'static>)> = Vec::new();
    if let Some(location) = properties.get("ssl.truststore.location") {
        let property = "ssl.truststore.location";
        match store_type(properties, "ssl.truststore.type")?.as_str() {
            "PEM" => certs.extend(
                pem_certificates(property, &read_file(property, location)?)?
                    .into_iter()
                    .map(|c| (property, c)),
            ),
            _ => {
                let password = properties
                    .get("ssl.truststore.password")
                    .map_or("", String::as_str);
                let store = pkcs12(property, location, password)?;
                for (_, entry) in store.entries() {
                    match entry {
                        p12_keystore::KeyStoreEntry::Certificate(cert) => {
                            certs.push((property, CertificateDer::from(cert.as_der().to_vec())));
                        }
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => {
                            // A store holding a key entry: trust the chain's top certificate.
                            if let Some(ca) = chain.certs().last() {
                                certs.push((property, CertificateDer::from(ca.as_der().to_vec())));
                            }
                        }
                        _ => {}
                    }
                }
                if certs.is_empty() {
                    return Err(invalid(property, "the truststore holds no certificate"));
                }
            }
        }
    }
    for (property, pem) in [
        (
            "ssl.truststore.certificates",
            properties
                .get("ssl.truststore.certificates")
                .map(|s| s.as_bytes().to_vec()),
        ),
        (
            "ssl.ca.pem",
            properties.get("ssl.ca.pem").map(|s| s.as_bytes().to_vec()),
        ),
    ] {
        if let Some(pem) = pem {
            certs.extend(
                pem_certificates(property, &pem)?
                    .into_iter()
                    .map(|c| (property, c)),
            );
        }
    }
    if let Some(location) = properties.get("ssl.ca.location") {
        let property = "ssl.ca.location";
        let path = Path::new(location.trim());
        if path.is_dir() {
            let entries = std::fs::read_dir(path)
                .map_err(|e| invalid(property, format!("cannot list `{}`: {e}", path.display())))?;
            for entry in entries.flatten() {
                if let Ok(pem) = std::fs::read(entry.path())
                    && let Ok(found) = pem_certificates(property, &pem)
                {
                    certs.extend(found.into_iter().map(|c| (property, c)));
                }
            }
        } else {
            certs.extend(
                pem_certificates(property, &read_file(property, location)?)?
                    .into_iter()
                    .map(|c| (property, c)),
            );
        }
    }

    let mut roots = RootCertStore::empty();
    if certs.is_empty() {
        let native = rustls_native_certs::load_native_certs();
        for err in &native.errors {
            tracing::debug!(error = %err, "reading a system CA certificate");
        }
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            return Err(SupplierError::InvalidConfig(
                "consumerProperties.ssl.truststore.location (or ssl.ca.location) is required: no system CA certificates were found to check the brokers' certificates".into(),
            ));
        }
    } else {
        for (property, cert) in certs {
            roots
                .add(cert)
                .map_err(|e| invalid(property, format!("unusable CA certificate: {e}")))?;
        }
    }
    Ok(roots)
}

/// The client certificate chain and key for mutual TLS, when configured.
#[allow(clippy::type_complexity)]
fn client_identity(
    properties: &BTreeMap<String, String>,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, KafkaSupplierError> {
    if let Some(location) = properties.get("ssl.keystore.location") {
        let property = "ssl.keystore.location";
        return match store_type(properties, "ssl.keystore.type")?.as_str() {
            "PEM" => {
                let pem = read_file(property, location)?;
                Ok(Some((
                    pem_certificates(property, &pem)?,
                    pem_private_key(property, &pem)?,
                )))
            }
            _ => {
                let password = first(properties, &["ssl.keystore.password", "ssl.key.password"])
                    .map_or("", |(_, v)| v);
                let store = pkcs12(property, location, password)?;
                let chain = store
                    .entries()
                    .find_map(|(_, e)| match e {
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => Some(chain),
                        _ => None,
                    })
                    .ok_or_else(|| invalid(property, "the keystore holds no private key entry"))?;
                let certs = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                let key = PrivateKeyDer::try_from(chain.key().as_der().to_vec())
                    .map_err(|e| invalid(property, format!("unusable private key: {e}")))?;
                Ok(Some((certs, key)))
            }
        };
    }
    let certificate = first(
        properties,
        &[
            "ssl.keystore.certificate.chain",
            "ssl.certificate.pem",
            "ssl.certificate.location",
        ],
    );
    let key = first(
        properties,
        &["ssl.keystore.key", "ssl.key.pem", "ssl.key.location"],
    );
    let read = |(property, value): (&str, &str)| -> Result<Vec<u8>, KafkaSupplierError> {
        if property.ends_with(".location") {
            read_file(property, value)
        } else {
            Ok(value.as_bytes().to_vec())
        }
    };
    match (certificate, key) {
        (None, None) => Ok(None),
        (Some(c), Some(k)) => {
            let certs = pem_certificates(c.0, &read(c)?)?;
            let key = pem_private_key(k.0, &read(k)?)?;
            Ok(Some((certs, key)))
        }
        (Some((property, _)), None) => Err(invalid(
            property,
            "a client certificate needs its private key (ssl.keystore.key, ssl.key.location or ssl.key.pem)",
        )),
        (None, Some((property, _))) => Err(invalid(
            property,
            "a private key needs its client certificate (ssl.keystore.certificate.chain, ssl.certificate.location or ssl.certificate.pem)",
        )),
    }
}

/// The rustls configuration of `security.protocol` `SSL`/`SASL_SSL`.
fn tls_config(
    properties: &BTreeMap<String, String>,
) -> Result<rustls::ClientConfig, KafkaSupplierError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| SupplierError::InvalidConfig(format!("TLS set-up failed: {e}")))?;
    let verify_chain = match properties
        .get("enable.ssl.certificate.verification")
        .map(|s| s.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(invalid(
                "enable.ssl.certificate.verification",
                format!("`{other}` is not true or false"),
            ));
        }
    };
    let verify_name = properties
        .get("ssl.endpoint.identification.algorithm")
        .is_none_or(|a| !a.trim().is_empty());
    let verifier: Arc<dyn ServerCertVerifier> = if verify_chain {
        let roots = Arc::new(root_store(properties)?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
            .build()
            .map_err(|e| SupplierError::InvalidConfig(format!("TLS set-up failed: {e}")))?;
        if verify_name {
            webpki
        } else {
            Arc::new(ChainOnlyVerifier { inner: webpki })
        }
    } else {
        tracing::warn!(
            "consumerProperties.enable.ssl.certificate.verification=false: any broker certificate is trusted"
        );
        Arc::new(AnyCertificate { provider })
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match client_identity(properties)? {
        Some((certs, key)) => builder.with_client_auth_cert(certs, key).map_err(|e| {
            invalid(
                "ssl.keystore.location",
                format!("unusable client certificate: {e}"),
            )
        }),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// Checks the broker's certificate chain but not that it names the host
/// (`ssl.endpoint.identification.algorithm` set to empty, as in Kafka's Java client).
#[derive(Debug)]
struct ChainOnlyVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Trusts any broker certificate (`enable.ssl.certificate.verification=false`); signatures are
/// still checked so the handshake is sound against the presented key.
#[derive(Debug)]
struct AnyCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests;
