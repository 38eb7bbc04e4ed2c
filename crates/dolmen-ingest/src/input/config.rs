//! Server-side settings of the remote input sources, and the URL allow-list of the `http`
//! input source (and of spec-supplied S3 endpoints).
//!
//! | property | default | meaning |
//! |---|---|---|
//! | `service.ingestion.http.allowedProtocols` | `http,https` | URL schemes an `http` input source may use (Druid's `druid.ingestion.http.allowedProtocols`) |
//! | `service.ingestion.http.allowedHosts` | *(empty: every host denied)* | comma-separated host patterns an `http` source (or an S3 `endpointConfig.url`) may reach |
//! | `service.ingestion.http.allowedHeaders` | *(empty)* | header names an `http` source's `requestHeaders` may set (Druid's `druid.ingestion.http.allowedHeaders`) |
//! | `service.ingestion.local.allowedBaseDirs` | *(unset: no limit, as in Druid)* | directories (JSON array or comma-separated) the `local` input source may read under, native and `EXTERN`; paths are compared after `..` is resolved, and each file found is checked again after symbolic links are resolved |
//! | `service.client.https.trustStorePath` | *(none: the system's roots only)* | certificates the HTTPS clients (the `http` and `s3` input sources, S3 deep storage) trust besides the system's, e.g. a private CA (Druid's `simple-client-sslcontext`) |
//! | `service.client.https.trustStoreType` | `pkcs12` | `pkcs12` or `pem` |
//! | `service.client.https.trustStorePassword` | *(empty)* | the PKCS#12 password (a password provider: plain, or `{"type":"environment","variable":...}`) |
//! | `service.s3.endpoint` | AWS | S3 endpoint URL (e.g. `http://127.0.0.1:9000` for a local S3-compatible server) |
//! | `service.s3.region` | `AWS_REGION` or `us-east-1` | S3 region |
//! | `service.s3.accessKey`, `service.s3.secretKey` | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` | S3 credentials |
//! | `service.indexer.task.ignoreTimestampSpecForDruidInputSource` | `false` | `true`: a task reading the `druid` input source takes each row's time from `__time` and ignores its `timestampSpec` (Druid's `druid.indexer.task.ignoreTimestampSpecForDruidInputSource`, the pre-0.22 behaviour some of Druid's re-indexing tutorials rely on) |
//!
//! # Why hosts are denied by default
//! Anyone who may submit a task chooses the URLs the server fetches. Without a host allow-list
//! the server can be made to read internal services (cloud metadata endpoints such as
//! `169.254.169.254`, admin ports on localhost) and ingest their answers into a datasource the
//! submitter can query: server-side request forgery. Druid only restricts protocols; Dolmen also
//! denies every host until the operator lists the ones ingestion may reach.
//!
//! Host patterns: `example.com` (that host, any port), `example.com:8080` (that host and port),
//! `*.example.com` (any subdomain, not `example.com` itself), `10.0.0.5`, `[::1]` or
//! `[::1]:9000` (IP literals, IPv6 in brackets), and `*` (every host). Host names compare
//! case-insensitively after URL normalization (so `http://0x7f.1/` is `127.0.0.1`); a URL's
//! port is its explicit port or its scheme's default. URLs that carry credentials
//! (`http://user@host/`) are rejected outright.
//!
//! The allow-list limits the URL named in the spec and every redirect the server follows;
//! it does not pin DNS answers: allow host names whose resolution you trust.

use std::sync::OnceLock;

use dolmen_common::config::{ConfigError, Properties};
use reqwest::Url;

/// Property: URL schemes allowed for the `http` input source.
pub const PROP_HTTP_ALLOWED_PROTOCOLS: &str = "service.ingestion.http.allowedProtocols";
/// Property: host patterns allowed for the `http` input source and S3 `endpointConfig.url`.
pub const PROP_HTTP_ALLOWED_HOSTS: &str = "service.ingestion.http.allowedHosts";
/// Property: header names allowed in the `http` input source's `requestHeaders`.
pub const PROP_HTTP_ALLOWED_HEADERS: &str = "service.ingestion.http.allowedHeaders";
/// Property: directories the `local` input source may read under (unset: no limit).
pub const PROP_LOCAL_ALLOWED_BASE_DIRS: &str = "service.ingestion.local.allowedBaseDirs";
/// Property: a trust store of extra roots for the HTTPS clients.
pub const PROP_CLIENT_TRUST_STORE_PATH: &str = "service.client.https.trustStorePath";
/// Property: its type (`pkcs12` or `pem`).
pub const PROP_CLIENT_TRUST_STORE_TYPE: &str = "service.client.https.trustStoreType";
/// Property: its password.
pub const PROP_CLIENT_TRUST_STORE_PASSWORD: &str = "service.client.https.trustStorePassword";
/// Property: default S3 endpoint.
pub const PROP_S3_ENDPOINT: &str = "service.s3.endpoint";
/// Property: default S3 region.
pub const PROP_S3_REGION: &str = "service.s3.region";
/// Property: default S3 access key.
pub const PROP_S3_ACCESS_KEY: &str = "service.s3.accessKey";
/// Property: default S3 secret key.
pub const PROP_S3_SECRET_KEY: &str = "service.s3.secretKey";
/// Property: the `druid` input source ignores `timestampSpec` and reads `__time` (Druid's
/// `druid.indexer.task.ignoreTimestampSpecForDruidInputSource`).
pub const PROP_IGNORE_TIMESTAMP_SPEC_FOR_DRUID_INPUT_SOURCE: &str =
    "service.indexer.task.ignoreTimestampSpecForDruidInputSource";

/// Settings of the remote input sources (see the module docs for the properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSourceConfig {
    /// Who the `http` input source may talk to.
    pub http: HttpAccess,
    /// Server-side S3 defaults (a spec's `properties` and `endpointConfig` override them).
    pub s3: S3Defaults,
    /// Whether tasks reading the `druid` input source ignore `timestampSpec` and take `__time`
    /// (default `false`).
    pub ignore_timestamp_spec_for_druid_input_source: bool,
    /// `service.ingestion.local.allowedBaseDirs`: absolute, normalized directories the `local`
    /// input source may read under; `None` (the default) allows every path.
    pub local_allowed_base_dirs: Option<Vec<std::path::PathBuf>>,
    /// `service.client.https.trustStore*`: DER certificates the HTTPS clients trust besides the
    /// system's roots.
    pub client_trusted_certificates: Vec<Vec<u8>>,
}

impl Default for InputSourceConfig {
    /// `http` and `https` allowed, no host allowed, no request header allowed, S3 from the
    /// `AWS_*` environment.
    fn default() -> Self {
        InputSourceConfig {
            http: HttpAccess {
                allowed_protocols: vec!["http".to_string(), "https".to_string()],
                allowed_hosts: Vec::new(),
                allowed_headers: Vec::new(),
            },
            s3: S3Defaults::default(),
            ignore_timestamp_spec_for_druid_input_source: false,
            local_allowed_base_dirs: None,
            client_trusted_certificates: Vec::new(),
        }
    }
}

/// The `http` input source's allow-lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAccess {
    /// Allowed URL schemes, lower case.
    pub allowed_protocols: Vec<String>,
    /// Allowed hosts; empty denies every host.
    pub allowed_hosts: Vec<HostPattern>,
    /// Header names `requestHeaders` may set, lower case.
    pub allowed_headers: Vec<String>,
}

/// Server-side S3 settings; `None` falls back to the `AWS_*` environment variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Defaults {
    /// Endpoint URL (`service.s3.endpoint`); plain `http` endpoints are allowed.
    pub endpoint: Option<String>,
    /// Region (`service.s3.region`).
    pub region: Option<String>,
    /// Access key id (`service.s3.accessKey`).
    pub access_key: Option<String>,
    /// Secret key (`service.s3.secretKey`).
    pub secret_key: Option<String>,
}

/// One entry of `service.ingestion.http.allowedHosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// `*`: every host.
    Any,
    /// `*.suffix`: hosts ending in `.suffix` (lower case, without the leading dot).
    Subdomains(String),
    /// One host, lower case; IPv6 literals in brackets, as URLs print them.
    Exact(String),
}

impl HostPattern {
    /// Parses `host`, `host:port`, `*.domain[:port]`, `[v6][:port]` or `*`.
    ///
    /// # Errors
    /// A message naming the pattern when it is empty, has an invalid port, or is not a valid
    /// host.
    pub fn parse(pattern: &str) -> Result<HostPattern, String> {
        let p = pattern.trim();
        let bad = |why: &str| format!("invalid host pattern [{pattern}]: {why}");
        if p.is_empty() {
            return Err(bad("it is empty"));
        }
        if p == "*" {
            return Ok(HostPattern {
                host: HostMatch::Any,
                port: None,
            });
        }
        // Split off a port: after `]` for IPv6 literals, else after the only colon.
        let (host, port) = if p.starts_with('[') {
            let end = p.find(']').ok_or_else(|| bad("unclosed '['"))?;
            match &p[end + 1..] {
                "" => (&p[..=end], None),
                rest => match rest.strip_prefix(':') {
                    Some(port) => (&p[..=end], Some(port)),
                    None => return Err(bad("unexpected text after ']'")),
                },
            }
        } else {
            match p.split_once(':') {
                Some((h, port)) => (h, Some(port)),
                None => (p, None),
            }
        };
        let port = match port {
            None => None,
            Some(s) => Some(
                s.parse::<u16>()
                    .map_err(|_| bad("the port is not a number from 0 to 65535"))?,
            ),
        };
        let host = host.to_ascii_lowercase();
        let matcher = if let Some(suffix) = host.strip_prefix("*.") {
            normalize_host(suffix).map_err(|e| bad(&e))?;
            HostMatch::Subdomains(suffix.to_string())
        } else {
            if host.contains('*') {
                return Err(bad("'*' is allowed only alone or as a leading '*.'"));
            }
            HostMatch::Exact(normalize_host(&host).map_err(|e| bad(&e))?)
        };
        Ok(HostPattern {
            host: matcher,
            port,
        })
    }

    /// Whether this pattern admits `host` (normalized as [`Url::host_str`] prints it) on
    /// `port`.
    fn matches(&self, host: &str, port: Option<u16>) -> bool {
        if self.port.is_some() && self.port != port {
            return false;
        }
        let host = host.to_ascii_lowercase();
        match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(h) => *h == host,
            HostMatch::Subdomains(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

/// Normalizes a host the way URL parsing does (IDNA, IPv4 forms, IPv6 brackets).
fn normalize_host(host: &str) -> Result<String, String> {
    let url = Url::parse(&format!("http://{host}/")).map_err(|e| e.to_string())?;
    match url.host_str() {
        Some(h) if url.port().is_none() && url.path() == "/" && url.username().is_empty() => {
            Ok(h.to_string())
        }
        _ => Err("not a plain host".to_string()),
    }
}

/// The certificates of the client trust store (`service.client.https.trustStore*`), as DER.
fn read_trust_store(props: &Properties, path: &str) -> Result<Vec<Vec<u8>>, ConfigError> {
    use base64::Engine;
    let invalid = |key: &str, reason: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: path.to_string(),
        reason,
    };
    let data = std::fs::read(path)
        .map_err(|e| invalid(PROP_CLIENT_TRUST_STORE_PATH, format!("cannot read it: {e}")))?;
    let store_type = props
        .get(PROP_CLIENT_TRUST_STORE_TYPE)
        .map_or("pkcs12".to_string(), |t| t.trim().to_ascii_lowercase());
    let certs: Vec<Vec<u8>> = match store_type.as_str() {
        "pem" => {
            let text = String::from_utf8_lossy(&data);
            let mut out = Vec::new();
            let mut rest = text.as_ref();
            while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
                let body = &rest[start + "-----BEGIN CERTIFICATE-----".len()..];
                let Some(end) = body.find("-----END CERTIFICATE-----") else {
                    break;
                };
                let b64: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
                out.push(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64.as_bytes())
                        .map_err(|e| {
                            invalid(
                                PROP_CLIENT_TRUST_STORE_PATH,
                                format!("bad PEM certificate: {e}"),
                            )
                        })?,
                );
                rest = &body[end..];
            }
            out
        }
        "pkcs12" => {
            let password =
                dolmen_auth::config::password_property(props, PROP_CLIENT_TRUST_STORE_PASSWORD)?
                    .map(|s| s.expose().to_string())
                    .unwrap_or_default();
            let store = p12_keystore::KeyStore::from_pkcs12(
                &data,
                &password,
                p12_keystore::Pkcs12ImportPolicy::Relaxed,
            )
            .map_err(|e| {
                invalid(
                    PROP_CLIENT_TRUST_STORE_PATH,
                    format!("cannot open it as PKCS12 (is {PROP_CLIENT_TRUST_STORE_PASSWORD} right?): {e}"),
                )
            })?;
            store
                .entries()
                .filter_map(|(_, e)| match e {
                    p12_keystore::KeyStoreEntry::Certificate(c) => Some(c.as_der().to_vec()),
                    _ => None,
                })
                .collect()
        }
        "jks" => {
            return Err(invalid(
                PROP_CLIENT_TRUST_STORE_TYPE,
                "JKS stores cannot be read without a JVM; convert with `keytool -importkeystore -deststoretype PKCS12`, or use pem".into(),
            ));
        }
        other => {
            return Err(invalid(
                PROP_CLIENT_TRUST_STORE_TYPE,
                format!("[{other}] is not one of [pkcs12, pem]"),
            ));
        }
    };
    if certs.is_empty() {
        return Err(invalid(
            PROP_CLIENT_TRUST_STORE_PATH,
            "the trust store holds no certificate".into(),
        ));
    }
    Ok(certs)
}

/// `path` made absolute (from the working directory) with `.` and `..` resolved lexically.
pub fn normalize_path(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = std::path::PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Splits a comma-separated property value into trimmed, non-empty items.
fn list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

impl InputSourceConfig {
    /// Reads the settings from runtime properties (see the module docs); unset properties keep
    /// their defaults.
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming the property when a host pattern or protocol is
    /// invalid.
    pub fn from_properties(props: &Properties) -> Result<InputSourceConfig, ConfigError> {
        let mut cfg = InputSourceConfig::default();
        let invalid = |key: &str, value: &str, reason: String| ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            reason,
        };
        if let Some(v) = props.get(PROP_HTTP_ALLOWED_PROTOCOLS) {
            let mut protocols = Vec::new();
            for p in list(v) {
                let p = p.to_ascii_lowercase();
                if !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                {
                    return Err(invalid(
                        PROP_HTTP_ALLOWED_PROTOCOLS,
                        v,
                        format!("[{p}] is not a URL scheme"),
                    ));
                }
                protocols.push(p);
            }
            cfg.http.allowed_protocols = protocols;
        }
        if let Some(v) = props.get(PROP_HTTP_ALLOWED_HOSTS) {
            cfg.http.allowed_hosts = list(v)
                .map(HostPattern::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| invalid(PROP_HTTP_ALLOWED_HOSTS, v, e))?;
        }
        if let Some(v) = props.get(PROP_LOCAL_ALLOWED_BASE_DIRS) {
            let items: Vec<String> = if v.trim_start().starts_with('[') {
                serde_json::from_str(v.trim()).map_err(|e| {
                    invalid(
                        PROP_LOCAL_ALLOWED_BASE_DIRS,
                        v,
                        format!("not a JSON array of directories: {e}"),
                    )
                })?
            } else {
                list(v).map(str::to_string).collect()
            };
            let mut dirs = Vec::new();
            for d in items {
                let abs = normalize_path(std::path::Path::new(&d));
                // Compare against the real directory when it exists (symbolic links resolved).
                dirs.push(std::fs::canonicalize(&abs).unwrap_or(abs));
            }
            cfg.local_allowed_base_dirs = Some(dirs);
        }
        if let Some(path) = props
            .get(PROP_CLIENT_TRUST_STORE_PATH)
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            cfg.client_trusted_certificates = read_trust_store(props, path)?;
        }
        if let Some(v) = props.get(PROP_HTTP_ALLOWED_HEADERS) {
            cfg.http.allowed_headers = list(v).map(str::to_ascii_lowercase).collect();
        }
        let get = |k: &str| props.get(k).map(str::trim).filter(|s| !s.is_empty());
        cfg.s3 = S3Defaults {
            endpoint: get(PROP_S3_ENDPOINT).map(str::to_string),
            region: get(PROP_S3_REGION).map(str::to_string),
            access_key: get(PROP_S3_ACCESS_KEY).map(str::to_string),
            secret_key: get(PROP_S3_SECRET_KEY).map(str::to_string),
        };
        if let Some(v) = get(PROP_IGNORE_TIMESTAMP_SPEC_FOR_DRUID_INPUT_SOURCE) {
            cfg.ignore_timestamp_spec_for_druid_input_source = match v.to_ascii_lowercase().as_str()
            {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(invalid(
                        PROP_IGNORE_TIMESTAMP_SPEC_FOR_DRUID_INPUT_SOURCE,
                        v,
                        "expected true or false".to_string(),
                    ));
                }
            };
        }
        Ok(cfg)
    }

    /// Checks a path of the `local` input source against `allowedBaseDirs` (lexically: `..`
    /// resolved, relative paths taken from the working directory).
    ///
    /// # Errors
    /// Why the path is refused, naming the property.
    pub fn check_local_path(&self, path: &std::path::Path) -> Result<(), String> {
        let Some(allowed) = &self.local_allowed_base_dirs else {
            return Ok(());
        };
        let p = normalize_path(path);
        if allowed.iter().any(|d| p.starts_with(d)) {
            Ok(())
        } else {
            Err(format!(
                "[{}] is not under a directory of {PROP_LOCAL_ALLOWED_BASE_DIRS} {:?}",
                path.display(),
                allowed
            ))
        }
    }

    /// Checks a URL against the protocol and host allow-lists.
    ///
    /// # Errors
    /// Why the URL is refused: unparseable, a scheme not in `allowedProtocols`, credentials in
    /// the URL, no host, or a host not in `allowedHosts`.
    pub fn check_url(&self, url: &str) -> Result<Url, String> {
        let parsed = Url::parse(url).map_err(|e| format!("[{url}] is not a valid URL: {e}"))?;
        self.check_parsed_url(&parsed)?;
        Ok(parsed)
    }

    /// [`InputSourceConfig::check_url`] on a parsed URL (also used for redirects).
    ///
    /// # Errors
    /// See [`InputSourceConfig::check_url`].
    pub fn check_parsed_url(&self, url: &Url) -> Result<(), String> {
        let scheme = url.scheme();
        if !self.http.allowed_protocols.iter().any(|p| p == scheme) {
            return Err(format!(
                "protocol [{scheme}] is not allowed; allowed protocols: {:?} (property {PROP_HTTP_ALLOWED_PROTOCOLS})",
                self.http.allowed_protocols
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "URLs must not carry credentials; use httpAuthenticationUsername and httpAuthenticationPassword"
                    .to_string(),
            );
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(format!("[{url}] has no host"));
        };
        let port = url.port_or_known_default();
        if self
            .http
            .allowed_hosts
            .iter()
            .any(|p| p.matches(host, port))
        {
            Ok(())
        } else {
            Err(format!(
                "host [{host}{}] is not in the allow-list (property {PROP_HTTP_ALLOWED_HOSTS}; every host is denied by default)",
                port.map(|p| format!(":{p}")).unwrap_or_default()
            ))
        }
    }

    /// Checks a request header name against `allowedHeaders` (case-insensitive).
    ///
    /// # Errors
    /// When the header is not allowed.
    pub fn check_header(&self, name: &str) -> Result<(), String> {
        let lower = name.to_ascii_lowercase();
        if self.http.allowed_headers.contains(&lower) {
            Ok(())
        } else {
            Err(format!(
                "header [{name}] is not allowed; allowed headers: {:?} (property {PROP_HTTP_ALLOWED_HEADERS})",
                self.http.allowed_headers
            ))
        }
    }
}

static PROCESS_CONFIG: OnceLock<InputSourceConfig> = OnceLock::new();

/// Sets the process-wide input source settings; call once at start-up, before tasks are
/// submitted. Returns `false` (and changes nothing) when they were already set.
pub fn set_input_source_config(config: InputSourceConfig) -> bool {
    PROCESS_CONFIG.set(config).is_ok()
}

/// The process-wide input source settings ([`InputSourceConfig::default`] until
/// [`set_input_source_config`] is called).
pub fn input_source_config() -> &'static InputSourceConfig {
    static DEFAULT: OnceLock<InputSourceConfig> = OnceLock::new();
    PROCESS_CONFIG
        .get()
        .unwrap_or_else(|| DEFAULT.get_or_init(InputSourceConfig::default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_allowed_base_dirs() {
        let dir = tempfile_dir();
        let c = InputSourceConfig::from_properties(&Properties::parse(&format!(
            "{PROP_LOCAL_ALLOWED_BASE_DIRS}=[\"{}\", \"/srv/other\"]\n",
            dir.display()
        )))
        .unwrap();
        c.check_local_path(&dir.join("a/b.json")).unwrap();
        c.check_local_path(std::path::Path::new("/srv/other/x"))
            .unwrap();
        let e = c
            .check_local_path(&dir.join("../../etc/passwd"))
            .unwrap_err();
        assert!(e.contains(PROP_LOCAL_ALLOWED_BASE_DIRS), "{e}");
        assert!(
            c.check_local_path(std::path::Path::new("/srv/otherwise"))
                .is_err()
        );
        // Unset: no limit.
        InputSourceConfig::default()
            .check_local_path(std::path::Path::new("/etc/passwd"))
            .unwrap();
    }

    #[test]
    fn client_trust_store_errors_name_the_property() {
        let dir = tempfile_dir().join(format!("trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here").unwrap();
        let err = |text: String| {
            InputSourceConfig::from_properties(&Properties::parse(&text))
                .unwrap_err()
                .to_string()
        };
        let e = err(format!(
            "{PROP_CLIENT_TRUST_STORE_PATH}={}\n{PROP_CLIENT_TRUST_STORE_TYPE}=pem\n",
            empty.display()
        ));
        assert!(
            e.contains("holds no certificate") && e.contains(PROP_CLIENT_TRUST_STORE_PATH),
            "{e}"
        );
        let e = err(format!(
            "{PROP_CLIENT_TRUST_STORE_PATH}={}\n",
            empty.display()
        ));
        assert!(e.contains("PKCS12"), "{e}");
        let e = err(format!(
            "{PROP_CLIENT_TRUST_STORE_PATH}={}\n{PROP_CLIENT_TRUST_STORE_TYPE}=jks\n",
            empty.display()
        ));
        assert!(e.contains(PROP_CLIENT_TRUST_STORE_TYPE), "{e}");
        let e = err(format!(
            "{PROP_CLIENT_TRUST_STORE_PATH}={}\n",
            dir.join("missing").display()
        ));
        assert!(e.contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        std::fs::canonicalize(std::env::temp_dir()).unwrap()
    }

    fn cfg(hosts: &str) -> InputSourceConfig {
        InputSourceConfig::from_properties(&Properties::parse(&format!(
            "{PROP_HTTP_ALLOWED_HOSTS}={hosts}\n"
        )))
        .unwrap()
    }

    #[test]
    fn default_denies_every_host() {
        let c = InputSourceConfig::default();
        let e = c.check_url("https://example.com/data.json").unwrap_err();
        assert!(
            e.contains("example.com") && e.contains("allowedHosts"),
            "{e}"
        );
        let e = c.check_url("http://169.254.169.254/latest/").unwrap_err();
        assert!(e.contains("169.254.169.254"), "{e}");
    }

    #[test]
    fn protocols() {
        let c = cfg("*");
        assert!(c.check_url("https://example.com/a").is_ok());
        for url in [
            "file:///etc/passwd",
            "ftp://example.com/a",
            "jar:file:/x!/y",
            "gopher://x/",
        ] {
            let e = c.check_url(url).unwrap_err();
            assert!(e.contains("protocol"), "{url}: {e}");
        }
        let e = c.check_url("not a url").unwrap_err();
        assert!(e.contains("not a valid URL"), "{e}");
        let only_https = InputSourceConfig::from_properties(&Properties::parse(&format!(
            "{PROP_HTTP_ALLOWED_HOSTS}=*\n{PROP_HTTP_ALLOWED_PROTOCOLS}=HTTPS\n"
        )))
        .unwrap();
        assert!(only_https.check_url("https://a/").is_ok());
        assert!(only_https.check_url("http://a/").is_err());
    }

    #[test]
    fn hosts_and_ports() {
        let c = cfg("data.example.com, files.example.org:8080, *.cdn.net, 127.0.0.1:9000, [::1]");
        for ok in [
            "https://data.example.com/x.json",
            "http://DATA.example.com:1234/x",
            "http://files.example.org:8080/x",
            "https://a.cdn.net/x",
            "https://a.b.cdn.net/x",
            "http://127.0.0.1:9000/x",
            "http://[::1]:5/x",
            "http://[0:0:0:0:0:0:0:1]/x",
        ] {
            assert!(c.check_url(ok).is_ok(), "{ok}: {:?}", c.check_url(ok));
        }
        for bad in [
            "http://files.example.org/x",      // default port 80, not 8080
            "https://files.example.org:8080x", // unparseable port
            "https://cdn.net/x",               // *.cdn.net does not cover cdn.net
            "https://evilcdn.net/x",
            "http://127.0.0.1/x",
            "http://127.0.0.1:9001/x",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::2]/x",
            "http://data.example.com.evil.io/x",
            "http://localhost/x",
        ] {
            assert!(c.check_url(bad).is_err(), "{bad} should be denied");
        }
    }

    #[test]
    fn hostile_urls() {
        let c = cfg("allowed.example.com,127.0.0.1:9000");
        // Userinfo tricks: the real host is after the '@'.
        let e = c
            .check_url("http://allowed.example.com@evil.io/")
            .unwrap_err();
        assert!(e.contains("credentials"), "{e}");
        let e = c
            .check_url("http://user:pw@allowed.example.com/")
            .unwrap_err();
        assert!(e.contains("credentials"), "{e}");
        // Alternative IPv4 spellings normalize to 127.0.0.1 and keep the port check.
        assert!(c.check_url("http://0x7f.0.0.1:9000/x").is_ok());
        assert!(c.check_url("http://2130706433:9000/x").is_ok());
        assert!(c.check_url("http://0x7f.0.0.1/x").is_err());
        // IPv6-mapped and other literals are not the IPv4 host.
        assert!(c.check_url("http://[::ffff:127.0.0.1]:9000/x").is_err());
        assert!(c.check_url("http://[::ffff:a9fe:a9fe]/x").is_err());
        // Backslashes and encoded characters do not change the host.
        assert!(
            c.check_url("http://evil.io\\@allowed.example.com/")
                .is_err()
        );
        assert!(
            c.check_url("http://allowed.example.com%2eevil.io/")
                .is_err()
        );
        assert!(
            c.check_url("file://allowed.example.com/etc/passwd")
                .is_err()
        );
    }

    #[test]
    fn patterns_and_properties() {
        assert!(HostPattern::parse("").is_err());
        assert!(HostPattern::parse("a*b.com").is_err());
        assert!(HostPattern::parse("host:http").is_err());
        assert!(HostPattern::parse("[::1").is_err());
        assert!(HostPattern::parse("[::1]x").is_err());
        assert!(HostPattern::parse("a/b").is_err());
        let e = InputSourceConfig::from_properties(&Properties::parse(&format!(
            "{PROP_HTTP_ALLOWED_HOSTS}=ok.com, bad host\n"
        )))
        .unwrap_err();
        assert!(e.to_string().contains(PROP_HTTP_ALLOWED_HOSTS), "{e}");
        let c = InputSourceConfig::from_properties(&Properties::parse(
            "service.ingestion.http.allowedHeaders=X-Token, Accept\nservice.s3.endpoint=http://127.0.0.1:5000\nservice.s3.region=eu-west-1\n",
        ))
        .unwrap();
        assert!(c.check_header("x-token").is_ok());
        assert!(c.check_header("ACCEPT").is_ok());
        assert!(c.check_header("Host").unwrap_err().contains("Host"));
        assert_eq!(c.s3.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(c.s3.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.s3.access_key, None);
        assert!(!c.ignore_timestamp_spec_for_druid_input_source);
        assert!(!input_source_config().http.allowed_protocols.is_empty());
        let c = InputSourceConfig::from_properties(&Properties::parse(&format!(
            "{PROP_IGNORE_TIMESTAMP_SPEC_FOR_DRUID_INPUT_SOURCE}=TRUE\n"
        )))
        .unwrap();
        assert!(c.ignore_timestamp_spec_for_druid_input_source);
        let e = InputSourceConfig::from_properties(&Properties::parse(&format!(
            "{PROP_IGNORE_TIMESTAMP_SPEC_FOR_DRUID_INPUT_SOURCE}=yes\n"
        )))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains(PROP_IGNORE_TIMESTAMP_SPEC_FOR_DRUID_INPUT_SOURCE),
            "{e}"
        );
    }
}
