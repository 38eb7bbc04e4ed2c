//! Server configuration: command-line flags, `DOLMEN_*` environment variables, an optional Java
//! properties file, and defaults, in that order of precedence (see `dolmen_common::config`).
//!
//! | flag | environment | property | default |
//! |---|---|---|---|
//! | `--port` | `DOLMEN_PORT` | `service.plaintextPort` | 8888 |
//! | `--host` | `DOLMEN_HOST` | `service.host` | 127.0.0.1 |
//! | `--data-dir` | `DOLMEN_DATA_DIR` | `service.dataDir` | `./var` |
//! | `--config` | `DOLMEN_CONFIG` | | none |
//! | `--worker-capacity` | `DOLMEN_WORKER_CAPACITY` | `service.worker.capacity` | number of cores |
//! | `--query-threads` | `DOLMEN_QUERY_THREADS` | `service.processing.numThreads` | number of cores |
//! | `--emitter` | `DOLMEN_EMITTER` | `service.emitter` | `prometheus` |
//! | | | `service.emitter.prometheus.namespace` | `druid` |
//! | | | `service.coordinator.startDelay` | `PT300S` |
//! | | | `service.coordinator.period` | `PT60S` |
//! | | | `service.server.tier` | `_default_tier` |
//! | | | `service.worker.category` | `_default_worker_category` |
//! | | | `service.audit.manager.auditHistoryMillis` | 604800000 (one week) |
//! | | | `service.coordinator.kill.audit.on`, `service.coordinator.kill.rule.on` (and `.period`, `.durationToRetain`) | true (P1D, P90D) |
//! | | | `service.coordinator.kill.on` (and `.period`, `.bufferPeriod`, `.durationToRetain`, `.ignoreDurationToRetain`, `.maxSegments`, `.maxInterval`) | false (PT1800S, P30D, P90D, false, 100, P30D) |
//! | | | `service.kinesis.accessKey`, `service.kinesis.secretKey` (both or neither) | none: the standard AWS credential chain for `shardstream` supervisors |
//!
//! `service.emitter` (Druid's `druid.emitter`) is `prometheus` (metrics recorded and served at
//! `GET /metrics`) or `noop` (nothing recorded, `/metrics` is 404); see `dolmen_metrics`.
//!
//! Deep storage is set by properties only: [`DeepStorageConfig`] (`service.storage.*`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use dolmen_common::config::Properties;

/// Flags shared by `dolmen server` and `dolmen quickstart`.
#[derive(Debug, Clone, Default, Args)]
pub struct ServerArgs {
    /// HTTP port (property service.plaintextPort; default 8888; 0 picks a free port).
    #[arg(long, env = "DOLMEN_PORT")]
    pub port: Option<u16>,
    /// Address to bind (property service.host; default 127.0.0.1).
    #[arg(long, env = "DOLMEN_HOST")]
    pub host: Option<String>,
    /// Directory for all state: metadata.db, deep-storage/, segment-cache/, task-logs/
    /// (property service.dataDir; default ./var).
    #[arg(long, env = "DOLMEN_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Java properties file with spec property names.
    #[arg(long, env = "DOLMEN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Tasks that may run at once (property service.worker.capacity; default: cores).
    #[arg(long, env = "DOLMEN_WORKER_CAPACITY")]
    pub worker_capacity: Option<usize>,
    /// Query parallelism (property service.processing.numThreads; default: cores).
    #[arg(long, env = "DOLMEN_QUERY_THREADS")]
    pub query_threads: Option<usize>,
    /// Metrics: prometheus (served at GET /metrics) or noop (property service.emitter;
    /// default prometheus).
    #[arg(long, env = "DOLMEN_EMITTER")]
    pub emitter: Option<String>,
}

/// Effective server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Port to bind.
    pub port: u16,
    /// Address to bind.
    pub host: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Task slots.
    pub worker_capacity: usize,
    /// Query parallelism.
    pub query_threads: usize,
    /// Period of the timeline refresh loop.
    pub view_refresh: Duration,
    /// Input-source security and connection settings (`service.ingestion.http.*`,
    /// `service.s3.*`; see docs/ingestion.md).
    pub input_sources: dolmen_ingest::input::InputSourceConfig,
    /// Durable storage of the multi-stage engine (`service.msq.intermediate.storage.*`):
    /// where `selectDestination: durableStorage` statement results go; `None` when disabled.
    pub durable_storage: Option<DurableStorageConfig>,
    /// Deep storage (`service.storage.*`): where published segment files live.
    pub deep_storage: DeepStorageConfig,
    /// Metrics (`service.emitter`, `service.emitter.prometheus.namespace`).
    pub metrics: dolmen_metrics::MetricsConfig,
    /// The coordinator's schedule, tier and audit settings.
    pub coordinator: CoordinatorSettings,
    /// Authentication and authorization (`service.auth.*`, `service.escalator.*`); `None`
    /// with security off (the default). See `dolmen_auth::config`.
    pub security: Option<dolmen_auth::SecurityConfig>,
    /// Whether the plaintext listener runs (`service.enablePlaintextPort`, default true).
    pub plaintext: bool,
    /// The TLS listener (`service.enableTlsPort`, default false), see [`TlsConfig`].
    pub tls: Option<TlsConfig>,
    /// `service.kinesis.accessKey` and `service.kinesis.secretKey` (Druid's
    /// `druid.kinesis.accessKey`/`secretKey`): the credentials of `shardstream` supervisors and
    /// tasks; `None` (neither set) uses the standard AWS chain. Redacted in `Debug`, never listed
    /// in `sys.server_properties`.
    pub kinesis_credentials: Option<dolmen_overlord::KinesisCredentials>,
}

/// The TLS listener: `service.tlsPort` (default 9088, Druid's Router TLS port; 0 picks a free
/// port) and the server key store `service.server.https.keyStoreType` (`pkcs12`, the default,
/// or `pem`), `.keyStorePath` (required), `.keyStorePassword` (a password provider), `.certAlias`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// Port to bind.
    pub port: u16,
    /// Certificate and key.
    pub key_store: dolmen_server::tls::ServerKeyStore,
}

impl TlsConfig {
    /// Reads the listener properties (Druid's start-up checks and messages).
    fn from_properties(
        props: &Properties,
        plaintext: bool,
        plaintext_port: u16,
    ) -> anyhow::Result<Option<TlsConfig>> {
        let enabled = props
            .get_parsed::<bool>("service.enableTlsPort")?
            .unwrap_or(false);
        if !plaintext && !enabled {
            anyhow::bail!(
                "At least one of the service.enablePlaintextPort or service.enableTlsPort needs to be true."
            );
        }
        if !enabled {
            return Ok(None);
        }
        let port = props.get_parsed::<u16>("service.tlsPort")?.unwrap_or(9088);
        if plaintext && port == plaintext_port && port != 0 {
            anyhow::bail!(
                "service.tlsPort: plaintextPort and tlsPort cannot be null or same if both http and https connectors are enabled"
            );
        }
        const P: &str = "service.server.https";
        let store_type = match props
            .get(&format!("{P}.keyStoreType"))
            .map(|t| t.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("pkcs12") => dolmen_server::tls::KeyStoreType::Pkcs12,
            Some("pem") => dolmen_server::tls::KeyStoreType::Pem,
            Some("jks") => anyhow::bail!(
                "{P}.keyStoreType: JKS stores cannot be read without a JVM; convert with `keytool -importkeystore -deststoretype PKCS12` and set pkcs12, or use pem"
            ),
            Some(other) => anyhow::bail!("{P}.keyStoreType: [{other}] is not one of [pkcs12, pem]"),
        };
        let path = props
            .get(&format!("{P}.keyStorePath"))
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                anyhow::anyhow!("{P}.keyStorePath: required when service.enableTlsPort is true")
            })?;
        let password =
            dolmen_auth::config::password_property(props, &format!("{P}.keyStorePassword"))?
                .map(|s| s.expose().to_string())
                .unwrap_or_default();
        Ok(Some(TlsConfig {
            port,
            key_store: dolmen_server::tls::ServerKeyStore {
                store_type,
                path: PathBuf::from(path),
                password,
                cert_alias: props
                    .get(&format!("{P}.certAlias"))
                    .map(|a| a.trim().to_string()),
            },
        }))
    }
}

/// Coordinator, tier and audit properties (Druid's `druid.coordinator.*`, `druid.server.tier`,
/// `druid.worker.category`, `druid.audit.manager.auditHistoryMillis`).
///
/// | property | meaning | default |
/// |---|---|---|
/// | `service.coordinator.startDelay` | ISO 8601 duration before the first coordinator run | `PT300S` |
/// | `service.coordinator.period` | ISO 8601 duration between runs | `PT60S` |
/// | `service.coordinator.period.indexingPeriod` | ISO 8601 duration between runs of the automatic compaction duty | `PT1800S` |
/// | `service.server.tier` | the tier this process serves | `_default_tier` |
/// | `service.worker.category` | this process's worker category | `_default_worker_category` |
/// | `service.audit.manager.auditHistoryMillis` | default window of the history endpoints, ms | 604800000 |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorSettings {
    /// `service.coordinator.startDelay`.
    pub start_delay: Duration,
    /// `service.coordinator.period`.
    pub period: Duration,
    /// `service.coordinator.period.indexingPeriod`: the compaction duty's period.
    pub indexing_period: Duration,
    /// `service.server.tier`.
    pub tier: String,
    /// `service.worker.category`.
    pub worker_category: String,
    /// `service.audit.manager.auditHistoryMillis`.
    pub audit_history_ms: i64,
    /// Auto-kill (`service.coordinator.kill.on`, default false; then `.period` PT1800S, which
    /// must not be shorter than the coordinator period, `.bufferPeriod` P30D,
    /// `.durationToRetain` P90D, `.ignoreDurationToRetain` false, `.maxSegments` 100,
    /// `.maxInterval` P30D).
    pub kill: Option<dolmen_coordinator::kill::KillSettings>,
    /// Audit log cleanup (`service.coordinator.kill.audit.on`, default true; `.period` P1D,
    /// `.durationToRetain` P90D).
    pub audit_cleanup: Option<dolmen_coordinator::Retention>,
    /// Rules cleanup for datasources without segments (`service.coordinator.kill.rule.on`,
    /// default true; `.period` P1D, `.durationToRetain` P90D).
    pub rules_cleanup: Option<dolmen_coordinator::Retention>,
}

/// `service.coordinator.kill.<what>.{on,period,durationToRetain}`.
fn retention_property(
    props: &Properties,
    what: &str,
) -> anyhow::Result<Option<dolmen_coordinator::Retention>> {
    let p = format!("service.coordinator.kill.{what}");
    if !props
        .get_parsed::<bool>(&format!("{p}.on"))?
        .unwrap_or(true)
    {
        return Ok(None);
    }
    let d = dolmen_coordinator::Retention::default();
    let name = format!("{p}.durationToRetain");
    let duration_to_retain = match props.get(&name) {
        Some(text) => dolmen_common::Period::parse(text)
            .map_err(|e| anyhow::anyhow!("{name}: [{text}] is not an ISO 8601 period: {}", e.0))?,
        None => d.duration_to_retain,
    };
    Ok(Some(dolmen_coordinator::Retention {
        period: duration_property(props, &format!("{p}.period"), d.period)?,
        duration_to_retain,
    }))
}

/// An ISO 8601 duration property of fixed length (`PT60S`, `PT1S`, `PT0S`; no months/years).
fn duration_property(
    props: &Properties,
    name: &str,
    default: Duration,
) -> anyhow::Result<Duration> {
    let Some(text) = props.get(name) else {
        return Ok(default);
    };
    let period = dolmen_common::Period::parse(text)
        .map_err(|e| anyhow::anyhow!("{name}: [{text}] is not an ISO 8601 duration: {}", e.0))?;
    let ms = period
        .checked_fixed_millis()
        .filter(|ms| *ms >= 0)
        .ok_or_else(|| {
            anyhow::anyhow!("{name}: [{text}] must be a non-negative duration of fixed length (no months or years)")
        })?;
    Ok(Duration::from_millis(ms.unsigned_abs()))
}

impl CoordinatorSettings {
    fn from_properties(props: &Properties) -> anyhow::Result<CoordinatorSettings> {
        let period =
            duration_property(props, "service.coordinator.period", Duration::from_secs(60))?;
        if period.is_zero() {
            anyhow::bail!("service.coordinator.period: must be longer than zero");
        }
        let indexing_period = duration_property(
            props,
            "service.coordinator.period.indexingPeriod",
            Duration::from_secs(1800),
        )?;
        if indexing_period.is_zero() {
            anyhow::bail!("service.coordinator.period.indexingPeriod: must be longer than zero");
        }
        let history = props
            .get_parsed::<i64>("service.audit.manager.auditHistoryMillis")?
            .unwrap_or(7 * 24 * 60 * 60 * 1000);
        if history < 0 {
            anyhow::bail!("service.audit.manager.auditHistoryMillis: [{history}] must be >= 0");
        }
        let non_empty = |name: &str, default: &str| -> anyhow::Result<String> {
            let v = props.get(name).unwrap_or(default).trim().to_string();
            if v.is_empty() {
                anyhow::bail!("{name}: must not be empty");
            }
            Ok(v)
        };
        let kill = if props
            .get_parsed::<bool>("service.coordinator.kill.on")?
            .unwrap_or(false)
        {
            let d = dolmen_coordinator::kill::KillSettings::default();
            let period_property = |name: &str, default: dolmen_common::Period| {
                props.get(name).map_or(Ok(default), |text| {
                    dolmen_common::Period::parse(text).map_err(|e| {
                        anyhow::anyhow!("{name}: [{text}] is not an ISO 8601 period: {}", e.0)
                    })
                })
            };
            let kill_period =
                duration_property(props, "service.coordinator.kill.period", d.period)?;
            if kill_period < period {
                anyhow::bail!(
                    "service.coordinator.kill.period: must not be shorter than service.coordinator.period"
                );
            }
            let max_segments = props
                .get_parsed::<usize>("service.coordinator.kill.maxSegments")?
                .unwrap_or(d.max_segments);
            if max_segments == 0 {
                anyhow::bail!("service.coordinator.kill.maxSegments: must be positive");
            }
            Some(dolmen_coordinator::kill::KillSettings {
                period: kill_period,
                buffer_period: period_property(
                    "service.coordinator.kill.bufferPeriod",
                    d.buffer_period,
                )?,
                duration_to_retain: period_property(
                    "service.coordinator.kill.durationToRetain",
                    d.duration_to_retain,
                )?,
                ignore_duration_to_retain: props
                    .get_parsed::<bool>("service.coordinator.kill.ignoreDurationToRetain")?
                    .unwrap_or(false),
                max_segments,
                max_interval: period_property(
                    "service.coordinator.kill.maxInterval",
                    d.max_interval,
                )?,
            })
        } else {
            None
        };
        Ok(CoordinatorSettings {
            audit_cleanup: retention_property(props, "audit")?,
            rules_cleanup: retention_property(props, "rule")?,
            kill,
            start_delay: duration_property(
                props,
                "service.coordinator.startDelay",
                Duration::from_secs(300),
            )?,
            period,
            indexing_period,
            tier: non_empty("service.server.tier", "_default_tier")?,
            worker_category: non_empty("service.worker.category", "_default_worker_category")?,
            audit_history_ms: history,
        })
    }
}

/// `service.emitter` from the flag or environment, else the property, else `prometheus`; and
/// the namespace property.
fn metrics_config(
    args: &ServerArgs,
    props: &Properties,
) -> anyhow::Result<dolmen_metrics::MetricsConfig> {
    let emitter = match args
        .emitter
        .as_deref()
        .or_else(|| props.get("service.emitter"))
    {
        Some(v) => dolmen_metrics::Emitter::parse(v)
            .map_err(|e| anyhow::anyhow!("service.emitter: {e}"))?,
        None => dolmen_metrics::Emitter::Prometheus,
    };
    const NAMESPACE: &str = "service.emitter.prometheus.namespace";
    let namespace = props
        .get(NAMESPACE)
        .unwrap_or(dolmen_metrics::DEFAULT_NAMESPACE)
        .to_string();
    // A Prometheus metric name starts with a letter, `_` or `:` and goes on with those and
    // digits (Druid's emitter checks the same).
    let valid = namespace
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && namespace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if !valid {
        anyhow::bail!("{NAMESPACE}: [{namespace}] is not a valid Prometheus metric name prefix");
    }
    Ok(dolmen_metrics::MetricsConfig { emitter, namespace })
}

/// `service.storage.*` (Druid: `druid.storage.*`): the durable home of segment files.
///
/// | property | meaning | default |
/// |---|---|---|
/// | `service.storage.type` | `local` or `s3` | `local` |
/// | `service.storage.storageDirectory` | local: the directory | `<dataDir>/deep-storage` |
/// | `service.storage.bucket` | s3: the bucket (required) | |
/// | `service.storage.baseKey` | s3: key prefix of every segment file | none |
///
/// The S3 client takes `service.s3.*` (endpoint, region, keys; see docs/ingestion.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeepStorageConfig {
    /// `type=local`: a directory.
    Local(PathBuf),
    /// `type=s3`: a bucket and a key prefix.
    S3 {
        /// Bucket.
        bucket: String,
        /// Key prefix (may be empty).
        base_key: String,
    },
}

impl DeepStorageConfig {
    fn from_properties(props: &Properties, data_dir: &std::path::Path) -> anyhow::Result<Self> {
        const P: &str = "service.storage";
        match props.get(&format!("{P}.type")).unwrap_or("local") {
            "local" => Ok(DeepStorageConfig::Local(
                props
                    .get(&format!("{P}.storageDirectory"))
                    .map_or_else(|| data_dir.join("deep-storage"), PathBuf::from),
            )),
            "s3" => {
                let bucket = props
                    .get(&format!("{P}.bucket"))
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| anyhow::anyhow!("{P}.bucket: required when {P}.type is s3"))?;
                Ok(DeepStorageConfig::S3 {
                    bucket: bucket.to_string(),
                    base_key: props.get(&format!("{P}.baseKey")).unwrap_or("").to_string(),
                })
            }
            other => anyhow::bail!("{P}.type: [{other}] is not one of [local, s3]"),
        }
    }
}

/// `service.msq.intermediate.storage.*` (Druid: `druid.msq.intermediate.storage.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurableStorageConfig {
    /// `type=local`: a directory (`basePath`; default `<dataDir>/durable-storage`).
    Local(PathBuf),
    /// `type=s3`: `bucket` and `prefix`, with the `service.s3.*` client settings.
    S3 {
        /// Bucket.
        bucket: String,
        /// Key prefix.
        prefix: String,
    },
}

impl DurableStorageConfig {
    fn from_properties(
        props: &Properties,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<Option<Self>> {
        const P: &str = "service.msq.intermediate.storage";
        // Enabled by default: on one machine a local directory always works.
        if !props
            .get_parsed::<bool>(&format!("{P}.enable"))?
            .unwrap_or(true)
        {
            return Ok(None);
        }
        match props.get(&format!("{P}.type")).unwrap_or("local") {
            "local" => Ok(Some(DurableStorageConfig::Local(
                props
                    .get(&format!("{P}.basePath"))
                    .map_or_else(|| data_dir.join("durable-storage"), PathBuf::from),
            ))),
            "s3" => {
                let bucket = props
                    .get(&format!("{P}.bucket"))
                    .ok_or_else(|| anyhow::anyhow!("{P}.bucket: required when {P}.type is s3"))?;
                Ok(Some(DurableStorageConfig::S3 {
                    bucket: bucket.to_string(),
                    prefix: props.get(&format!("{P}.prefix")).unwrap_or("").to_string(),
                }))
            }
            other => anyhow::bail!("{P}.type: [{other}] is not one of [local, s3]"),
        }
    }
}

impl ServerConfig {
    /// Resolves flags/env over the properties file over defaults.
    ///
    /// # Errors
    /// When the properties file cannot be read or holds an invalid value (naming the property).
    pub fn resolve(args: &ServerArgs) -> anyhow::Result<ServerConfig> {
        let props = match &args.config {
            Some(p) => Properties::load(p)?,
            None => Properties::default(),
        };
        ServerConfig::from_parts(args, &props)
    }

    /// Resolves from already-parsed properties.
    ///
    /// # Errors
    /// When a property holds an invalid value.
    pub fn from_parts(args: &ServerArgs, props: &Properties) -> anyhow::Result<ServerConfig> {
        let cores = num_cpus::get().max(1);
        let data_dir = args
            .data_dir
            .clone()
            .or_else(|| props.get("service.dataDir").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("var"));
        let port = match args.port {
            Some(p) => p,
            None => props
                .get_parsed::<u16>("service.plaintextPort")?
                .unwrap_or(8888),
        };
        let plaintext = props
            .get_parsed::<bool>("service.enablePlaintextPort")?
            .unwrap_or(true);
        let kinesis_credentials = match (
            props.get("service.kinesis.accessKey"),
            props.get("service.kinesis.secretKey"),
        ) {
            (Some(a), Some(s)) => Some(dolmen_overlord::KinesisCredentials {
                access_key: a.to_string(),
                secret_key: s.to_string(),
            }),
            (None, None) => None,
            (Some(_), None) => anyhow::bail!(
                "service.kinesis.secretKey: required when service.kinesis.accessKey is set"
            ),
            (None, Some(_)) => anyhow::bail!(
                "service.kinesis.accessKey: required when service.kinesis.secretKey is set"
            ),
        };
        Ok(ServerConfig {
            kinesis_credentials,
            tls: TlsConfig::from_properties(props, plaintext, port)?,
            plaintext,
            coordinator: CoordinatorSettings::from_properties(props)?,
            metrics: metrics_config(args, props)?,
            durable_storage: DurableStorageConfig::from_properties(props, &data_dir)?,
            deep_storage: DeepStorageConfig::from_properties(props, &data_dir)?,
            port,
            host: args
                .host
                .clone()
                .or_else(|| props.get("service.host").map(str::to_string))
                .unwrap_or_else(|| "127.0.0.1".to_string()),
            data_dir,
            worker_capacity: match args.worker_capacity {
                Some(c) => c,
                None => props
                    .get_parsed::<usize>("service.worker.capacity")?
                    .unwrap_or(cores),
            }
            .max(1),
            query_threads: match args.query_threads {
                Some(c) => c,
                None => props
                    .get_parsed::<usize>("service.processing.numThreads")?
                    .unwrap_or(cores),
            }
            .max(1),
            view_refresh: crate::DEFAULT_VIEW_REFRESH,
            input_sources: dolmen_ingest::input::InputSourceConfig::from_properties(props)?,
            security: dolmen_auth::SecurityConfig::from_properties(props)?,
        })
    }

    /// The effective server properties, by their property names, as `sys.server_properties`
    /// lists them; `bound_port` is the port actually bound (`--port 0` picks one).
    pub fn properties(&self, bound_port: u16) -> Vec<(String, String)> {
        let mut props = vec![
            ("service.host".into(), self.host.clone()),
            ("service.plaintextPort".into(), bound_port.to_string()),
            (
                "service.dataDir".into(),
                self.data_dir.display().to_string(),
            ),
            (
                "service.worker.capacity".into(),
                self.worker_capacity.to_string(),
            ),
            (
                "service.processing.numThreads".into(),
                self.query_threads.to_string(),
            ),
            (
                "service.emitter".into(),
                self.metrics.emitter.as_str().to_string(),
            ),
            (
                "service.coordinator.startDelay".into(),
                format!("PT{}S", self.coordinator.start_delay.as_secs_f64()),
            ),
            (
                "service.coordinator.period".into(),
                format!("PT{}S", self.coordinator.period.as_secs_f64()),
            ),
            (
                "service.coordinator.period.indexingPeriod".into(),
                format!("PT{}S", self.coordinator.indexing_period.as_secs_f64()),
            ),
            ("service.server.tier".into(), self.coordinator.tier.clone()),
            (
                "service.worker.category".into(),
                self.coordinator.worker_category.clone(),
            ),
            (
                "service.audit.manager.auditHistoryMillis".into(),
                self.coordinator.audit_history_ms.to_string(),
            ),
        ];
        match &self.deep_storage {
            DeepStorageConfig::Local(dir) => {
                props.push(("service.storage.type".into(), "local".into()));
                props.push((
                    "service.storage.storageDirectory".into(),
                    dir.display().to_string(),
                ));
            }
            DeepStorageConfig::S3 { bucket, base_key } => {
                props.push(("service.storage.type".into(), "s3".into()));
                props.push(("service.storage.bucket".into(), bucket.clone()));
                props.push(("service.storage.baseKey".into(), base_key.clone()));
            }
        }
        props
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_properties_are_checked_with_druids_messages() {
        let err = |text: &str| {
            ServerConfig::from_parts(&ServerArgs::default(), &Properties::parse(text))
                .unwrap_err()
                .to_string()
        };
        let d = ServerConfig::from_parts(&ServerArgs::default(), &Properties::default()).unwrap();
        assert!(d.plaintext && d.tls.is_none() && d.security.is_none());
        assert!(
            err("service.enablePlaintextPort=false\n").contains("At least one of the service.enablePlaintextPort or service.enableTlsPort needs to be true")
        );
        assert!(
            err("service.enableTlsPort=true\nservice.tlsPort=8888\nservice.server.https.keyStorePath=/x\n")
                .contains("plaintextPort and tlsPort cannot be null or same")
        );
        assert!(err("service.enableTlsPort=true\n").contains("service.server.https.keyStorePath"));
        assert!(
            err("service.enableTlsPort=true\nservice.server.https.keyStorePath=/x\nservice.server.https.keyStoreType=jks\n")
                .contains("service.server.https.keyStoreType")
        );
        let c = ServerConfig::from_parts(
            &ServerArgs::default(),
            &Properties::parse(
                "service.enablePlaintextPort=false\nservice.enableTlsPort=true\nservice.server.https.keyStorePath=/k.pem\nservice.server.https.keyStoreType=PEM\n",
            ),
        )
        .unwrap();
        let tls = c.tls.unwrap();
        assert!(!c.plaintext);
        assert_eq!(tls.port, 9088);
        assert_eq!(
            tls.key_store.store_type,
            dolmen_server::tls::KeyStoreType::Pem
        );
    }

    #[test]
    fn flags_override_file_override_defaults() {
        let props = Properties::parse(
            "service.plaintextPort=9000\nservice.host=0.0.0.0\nservice.worker.capacity=3\n",
        );
        let c = ServerConfig::from_parts(&ServerArgs::default(), &props).unwrap();
        assert_eq!(c.port, 9000);
        assert_eq!(c.host, "0.0.0.0");
        assert_eq!(c.worker_capacity, 3);
        assert_eq!(c.data_dir, PathBuf::from("var"));
        let args = ServerArgs {
            port: Some(1234),
            ..Default::default()
        };
        let c = ServerConfig::from_parts(&args, &props).unwrap();
        assert_eq!(c.port, 1234);
        let d = ServerConfig::from_parts(&ServerArgs::default(), &Properties::default()).unwrap();
        assert_eq!(d.port, 8888);
        assert_eq!(d.host, "127.0.0.1");
        let bad = Properties::parse("service.plaintextPort=http\n");
        let e = ServerConfig::from_parts(&ServerArgs::default(), &bad).unwrap_err();
        assert!(format!("{e:#}").contains("service.plaintextPort"));
    }

    #[test]
    fn the_emitter_is_prometheus_by_default_and_can_be_turned_off() {
        let d = ServerConfig::from_parts(&ServerArgs::default(), &Properties::default()).unwrap();
        assert_eq!(d.metrics, dolmen_metrics::MetricsConfig::default());
        assert!(
            d.properties(1)
                .contains(&("service.emitter".into(), "prometheus".into()))
        );
        let props = Properties::parse(
            "service.emitter=noop\nservice.emitter.prometheus.namespace=dolmen\n",
        );
        let c = ServerConfig::from_parts(&ServerArgs::default(), &props).unwrap();
        assert_eq!(c.metrics.emitter, dolmen_metrics::Emitter::Noop);
        assert_eq!(c.metrics.namespace, "dolmen");
        // The flag (or DOLMEN_EMITTER) wins over the file.
        let args = ServerArgs {
            emitter: Some("prometheus".into()),
            ..Default::default()
        };
        let c = ServerConfig::from_parts(&args, &props).unwrap();
        assert_eq!(c.metrics.emitter, dolmen_metrics::Emitter::Prometheus);
        for bad in [
            "service.emitter=graphite\n",
            "service.emitter.prometheus.namespace=9x\n",
        ] {
            let e = ServerConfig::from_parts(&ServerArgs::default(), &Properties::parse(bad))
                .unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(format!("{e:#}").contains(key), "{e:#}");
        }
    }

    #[test]
    fn deep_storage_is_local_by_default_and_s3_needs_a_bucket() {
        let d = ServerConfig::from_parts(&ServerArgs::default(), &Properties::default()).unwrap();
        assert_eq!(
            d.deep_storage,
            DeepStorageConfig::Local(PathBuf::from("var/deep-storage"))
        );
        let s3 = Properties::parse(
            "service.storage.type=s3\nservice.storage.bucket=segs\nservice.storage.baseKey=prod/druid\n",
        );
        let c = ServerConfig::from_parts(&ServerArgs::default(), &s3).unwrap();
        assert_eq!(
            c.deep_storage,
            DeepStorageConfig::S3 {
                bucket: "segs".into(),
                base_key: "prod/druid".into()
            }
        );
        assert!(
            c.properties(1)
                .contains(&("service.storage.bucket".into(), "segs".into()))
        );
        let missing = Properties::parse("service.storage.type=s3\n");
        let e = ServerConfig::from_parts(&ServerArgs::default(), &missing).unwrap_err();
        assert!(format!("{e:#}").contains("service.storage.bucket"), "{e:#}");
        let bad = Properties::parse("service.storage.type=hdfs\n");
        let e = ServerConfig::from_parts(&ServerArgs::default(), &bad).unwrap_err();
        assert!(format!("{e:#}").contains("service.storage.type"), "{e:#}");
    }
}
