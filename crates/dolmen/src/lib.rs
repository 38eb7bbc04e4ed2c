//! The `dolmen` binary's library: configuration resolution and the wiring of every role into
//! one process (router, broker, overlord, historical, indexer), with an ordered graceful
//! shutdown.
//!
//! Start-up order: data directories, metadata store (migrations), deep storage and segment
//! cache, timelines from the metadata store, overlord (recovers interrupted tasks), lookups
//! (the stored configuration, every table loaded), query engine, HTTP listener. Shutdown order
//! is the reverse of need: stop accepting HTTP requests, stop the overlord (running tasks are
//! cancelled and recorded FAILED; publishing is atomic, so nothing is half-published), then
//! close the metadata store.
//!
//! Metrics (`dolmen_metrics`, `service.emitter`) are created before the roles, which record
//! into them; once the roles are up, the scrape-time sources (segment counts from the view,
//! segment cache bytes, task slots and running tasks' counters from the overlord, supervisor
//! lag) are registered. `GET /metrics` serves them.

pub mod config;
pub mod quickstart;
mod sys_supervisors;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use dolmen_lookup::{LookupManager, LookupRegistry};
use dolmen_metadata::{MetadataStore, SqlMetadataStore};
use dolmen_overlord::supervisor::SupervisorManager;
use dolmen_overlord::{Overlord, OverlordConfig, TaskLogs};
use dolmen_query::QueryEngine;
use dolmen_query::statement::{ResultStore, ResultStores, StatementRunner};
use dolmen_server::AppState;
use dolmen_storage::{DeepStorage, SegmentCache, SegmentView};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::ServerConfig;

/// How often due `pollPeriod`s of lookups are looked for (the finest poll period honoured).
pub const LOOKUP_POLL_TICK: Duration = Duration::from_secs(1);

/// A running all-in-one server.
#[derive(Debug)]
pub struct RunningServer {
    /// The bound address (the real port when 0 was asked for): the plaintext listener's, or
    /// the TLS listener's when plaintext is off.
    pub addr: SocketAddr,
    /// The TLS listener's address, when it runs.
    pub tls_addr: Option<SocketAddr>,
    /// Whether the plaintext listener runs.
    plaintext: bool,
    /// Handler state (overlord, engine, view, metadata).
    pub state: Arc<AppState>,
    sql_store: Arc<SqlMetadataStore>,
    query_runtime: Option<tokio::runtime::Runtime>,
    http_shutdown: CancellationToken,
    background: TaskTracker,
    background_shutdown: CancellationToken,
}

impl RunningServer {
    /// The base URL, e.g. `http://127.0.0.1:8888` (`https://` when only TLS runs).
    pub fn url(&self) -> String {
        if self.plaintext {
            format!("http://{}", self.addr)
        } else {
            format!("https://{}", self.addr)
        }
    }

    /// The TLS listener's base URL, e.g. `https://127.0.0.1:9088`.
    pub fn tls_url(&self) -> Option<String> {
        self.tls_addr.map(|a| format!("https://{a}"))
    }

    /// Graceful shutdown: HTTP first, then background loops, then running tasks, then the
    /// metadata store.
    pub async fn shutdown(mut self) {
        tracing::info!("shutting down");
        self.http_shutdown.cancel();
        self.background_shutdown.cancel();
        self.background.close();
        self.state.supervisors.stop().await;
        self.state.overlord.stop().await;
        self.background.wait().await;
        if let Some(rt) = self.query_runtime.take() {
            // Queries still running are abandoned (their clients are gone with the listener).
            rt.shutdown_background();
        }
        self.sql_store.close().await;
        tracing::info!("shutdown complete");
    }
}

/// Starts every role in this process.
///
/// # Errors
/// When a directory, the metadata store or the listener cannot be set up.
pub async fn start(config: &ServerConfig, logs: TaskLogs) -> anyhow::Result<RunningServer> {
    // Process-wide; the first server started in a process sets it.
    let _ = dolmen_ingest::input::set_input_source_config(config.input_sources.clone());
    let data = &config.data_dir;
    std::fs::create_dir_all(data)
        .with_context(|| format!("cannot create data directory [{}]", data.display()))?;
    let sql_store = Arc::new(
        SqlMetadataStore::open_sqlite(&data.join("metadata.db"))
            .await
            .context("cannot open the metadata store")?,
    );
    let metadata: Arc<dyn MetadataStore> = Arc::clone(&sql_store) as Arc<dyn MetadataStore>;
    let deep = match &config.deep_storage {
        crate::config::DeepStorageConfig::Local(dir) => {
            DeepStorage::local(dir).context("cannot open deep storage")?
        }
        crate::config::DeepStorageConfig::S3 { bucket, base_key } => {
            let store =
                s3_store(config, bucket).context("service.storage: cannot create the S3 client")?;
            DeepStorage::s3(store, bucket, base_key).context("service.storage.baseKey")?
        }
    };
    let cache = Arc::new(
        SegmentCache::new(&data.join("segment-cache"), deep.clone())
            .context("cannot open the segment cache")?,
    );
    let metrics = dolmen_metrics::Metrics::new(&config.metrics);
    let view = Arc::new(SegmentView::new(Arc::clone(&metadata)));
    view.refresh()
        .await
        .context("cannot load timelines from the metadata store")?;
    logs.set_dir(&data.join("task-logs"))
        .context("cannot create the task log directory")?;

    // The TLS key store first: a bad one stops start-up before anything listens.
    let tls = match &config.tls {
        Some(t) => Some((
            t.port,
            t.key_store
                .server_config()
                .map_err(anyhow::Error::msg)
                .context("cannot set up the TLS listener")?,
        )),
        None => None,
    };
    let bind = |port: u16| {
        let host = config.host.clone();
        async move {
            TcpListener::bind((host.as_str(), port))
                .await
                .with_context(|| format!("cannot listen on {host}:{port}"))
        }
    };
    let listener = match config.plaintext {
        true => Some(bind(config.port).await?),
        false => None,
    };
    let tls_listener = match &tls {
        Some((port, server_config)) => Some((bind(*port).await?, Arc::clone(server_config))),
        None => None,
    };
    let tls_addr = match &tls_listener {
        Some((l, _)) => Some(l.local_addr()?),
        None => None,
    };
    let addr = match &listener {
        Some(l) => l.local_addr()?,
        // One of the two is on (checked with the configuration).
        None => tls_addr.context("no listener")?,
    };

    let overlord = Overlord::start(
        Arc::clone(&metadata),
        deep,
        Arc::clone(&view),
        Arc::clone(&cache),
        logs,
        OverlordConfig {
            work_dir: data.join("task-work"),
            capacity: config.worker_capacity,
            host: advertised_host(&config.host),
            port: addr.port(),
            metrics: metrics.clone(),
            category: config.coordinator.worker_category.clone(),
            kinesis_credentials: config.kinesis_credentials.clone(),
        },
    )
    .await
    .context("cannot start the overlord")?;
    let sys_supervisors = dolmen_query::system::SupervisorSource::default();
    let node = dolmen_query::system::NodeInfo {
        host: advertised_host(&config.host),
        port: addr.port(),
        start_time_ms: dolmen_common::time::now_millis(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        properties: config.properties(addr.port()),
        tier: config.coordinator.tier.clone(),
        supervisors: sys_supervisors.clone(),
    };
    // Lookups before the engine: queries read their tables from the first one on.
    let lookups = LookupManager::start(
        Arc::clone(&metadata),
        Arc::new(LookupRegistry::default()),
        format!("{}:{}", advertised_host(&config.host), addr.port()),
    )
    .await
    .context("cannot load the lookups")?;
    let engine = Arc::new(QueryEngine::new(
        Arc::clone(&view),
        Arc::clone(&cache),
        config.query_threads,
        Some((Arc::clone(&metadata), node)),
        Arc::clone(lookups.registry()),
    ));
    // The segments already in the local cache (a restart) are loaded with their indexes and
    // footers before the server answers, so the first query is not the one that pays.
    engine.warm_up(&cache).await;
    // Queries run on their own worker threads so that a heavy query never stalls the HTTP
    // reactor (DataFusion's recommended set-up for CPU-bound work).
    let query_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.query_threads)
        .thread_name("dolmen-query")
        .enable_all()
        .build()
        .context("cannot start the query runtime")?;
    // One warm-up query per query thread, on the query runtime, run concurrently so that the
    // scheduler spreads them over its threads (per-thread state: QueryEngine::warm_up_sql).
    let warm_ups: Vec<_> = (0..config.query_threads.max(1))
        .map(|_| {
            let engine = Arc::clone(&engine);
            query_runtime.spawn(async move { engine.warm_up_sql().await })
        })
        .collect();
    for w in warm_ups {
        let _ = w.await;
    }
    let results = Arc::new(result_stores(config)?);
    overlord.set_controller_runner(Arc::new(StatementRunner::new(
        Arc::clone(&engine),
        Arc::clone(&results),
        query_runtime.handle().clone(),
    )));
    let supervisors = SupervisorManager::start(Arc::clone(&overlord), Arc::clone(&metadata))
        .await
        .context("cannot start the supervisors")?;
    sys_supervisors.set(Arc::new(sys_supervisors::ManagerRows::new(&supervisors)));
    register_metric_sources(
        &metrics,
        &view,
        &cache,
        &overlord,
        &supervisors,
        Arc::clone(engine.value_indexes()),
    );
    let coordinator = dolmen_coordinator::Coordinator::new(
        Arc::clone(&metadata),
        Arc::clone(&view),
        dolmen_coordinator::CoordinatorOptions {
            start_delay: config.coordinator.start_delay,
            period: config.coordinator.period,
            tier: config.coordinator.tier.clone(),
            clock: Arc::new(dolmen_common::time::now_millis),
            kill: config.coordinator.kill.clone(),
            audit_cleanup: config.coordinator.audit_cleanup.clone(),
            rules_cleanup: config.coordinator.rules_cleanup.clone(),
        },
    )
    .await
    .context("cannot start the coordinator")?;
    coordinator.set_kill_submitter(Arc::new(OverlordKillSubmitter(Arc::clone(&overlord))));
    coordinator.set_segment_cache(Arc::clone(&cache));
    let compaction = Arc::new(dolmen_overlord::auto_compact::CompactionDuty::new(
        Arc::clone(&overlord),
        Arc::clone(&metadata),
    ));
    let security = match &config.security {
        None => None,
        Some(c) => Some(
            dolmen_auth::Security::start(c, Arc::clone(&metadata))
                .await
                .context("cannot start security (service.auth.*)")?,
        ),
    };
    let state = Arc::new(AppState {
        security: security.clone(),
        compaction: Arc::clone(&compaction),
        coordinator: Arc::clone(&coordinator),
        audit_history_ms: config.coordinator.audit_history_ms,
        worker_category: config.coordinator.worker_category.clone(),
        started_ms: dolmen_common::time::now_millis(),
        overlord,
        supervisors,
        engine,
        view: Arc::clone(&view),
        metadata,
        query_runtime: query_runtime.handle().clone(),
        host: advertised_host(&config.host),
        port: addr.port(),
        queries: Arc::default(),
        results,
        lookups: Arc::clone(&lookups),
        metrics,
    });

    let http_shutdown = CancellationToken::new();
    let background_shutdown = CancellationToken::new();
    let background = TaskTracker::new();
    {
        let state = Arc::clone(&state);
        let token = http_shutdown.clone();
        if let Some(listener) = listener {
            let state = Arc::clone(&state);
            let token = token.clone();
            background.spawn(async move {
                if let Err(e) = dolmen_server::serve(listener, state, token).await {
                    tracing::error!(error = %e, "http server failed");
                }
            });
        }
        if let Some((listener, server_config)) = tls_listener {
            background.spawn(async move {
                if let Err(e) =
                    dolmen_server::tls::serve_tls(listener, server_config, state, token).await
                {
                    tracing::error!(error = %e, "https server failed");
                }
            });
        }
    }
    {
        // Timelines are refreshed after every publish; this loop also picks up changes made by
        // other processes sharing the metadata store (segments and lookups).
        let view = Arc::clone(&view);
        let lookups = Arc::clone(&lookups);
        let security = security.clone();
        let token = background_shutdown.clone();
        let period = config.view_refresh;
        background.spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(period) => {
                        if let Err(e) = view.refresh().await {
                            tracing::warn!(error = %e, "timeline refresh failed");
                        }
                        if let Err(e) = lookups.refresh_from_store().await {
                            tracing::warn!(error = %e, "lookups refresh failed");
                        }
                        // Users and roles changed by another process sharing the store.
                        if let Some(s) = &security {
                            s.invalidate_all();
                        }
                    }
                }
            }
        });
    }
    if config.plaintext {
        warm_up_http(addr).await;
    }
    background.spawn(coordinator.run(background_shutdown.clone()));
    {
        // The compaction duty of the coordinator's indexing group: first run after
        // `startDelay`, then every `indexingPeriod` (Druid's `druid.coordinator.period.indexingPeriod`).
        // Skipped while the coordinator's dynamic config says `pauseCoordination`.
        let token = background_shutdown.clone();
        let (delay, period) = (
            config.coordinator.start_delay,
            config.coordinator.indexing_period,
        );
        let store = Arc::clone(&state.metadata);
        background.spawn(async move {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            loop {
                let paused = match store
                    .config(dolmen_coordinator::config::COORDINATOR_CONFIG_KEY)
                    .await
                {
                    Ok(doc) => {
                        dolmen_coordinator::CoordinatorDynamicConfig::from_stored(doc.as_ref())
                            .pause_coordination()
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the coordinator config");
                        true
                    }
                };
                let outcome = if paused {
                    Ok(Vec::new())
                } else {
                    compaction.run_once().await
                };
                match outcome {
                    Ok(ids) if !ids.is_empty() => {
                        tracing::info!(tasks = ids.len(), "compaction duty submitted tasks");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "compaction duty failed"),
                }
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(period) => {}
                }
            }
        });
    }
    {
        // `pollPeriod` of uri lookups: due ones are re-checked once a tick.
        let lookups = Arc::clone(&lookups);
        let token = background_shutdown.clone();
        background.spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(LOOKUP_POLL_TICK) => lookups.poll().await,
                }
            }
        });
    }
    tracing::info!(%addr, data_dir = %data.display(), "dolmen started");
    Ok(RunningServer {
        addr,
        tls_addr,
        plaintext: config.plaintext,
        state,
        sql_store,
        query_runtime: Some(query_runtime),
        http_shutdown,
        background,
        background_shutdown,
    })
}

/// Auto-kill submits its kill tasks to the overlord ([`dolmen_coordinator::kill`]).
struct OverlordKillSubmitter(Arc<Overlord>);

#[async_trait::async_trait]
impl dolmen_coordinator::kill::KillTaskSubmitter for OverlordKillSubmitter {
    fn total_worker_capacity(&self) -> usize {
        self.0.task_slots().0
    }

    fn active_task_ids(&self) -> Vec<String> {
        self.0.active_task_ids()
    }

    async fn submit(&self, spec: serde_json::Value) -> Result<String, String> {
        self.0.submit(spec).await.map_err(|e| e.to_string())
    }
}

/// What every scrape computes ([`dolmen_metrics::Metrics::add_source`]): segment counts and
/// sizes from the live view, segment cache bytes, value index counters, task slots, stream lag;
/// and the running
/// tasks' ingestion counters are brought up to date first.
fn register_metric_sources(
    metrics: &dolmen_metrics::Metrics,
    view: &Arc<SegmentView>,
    cache: &Arc<SegmentCache>,
    overlord: &Arc<Overlord>,
    supervisors: &Arc<SupervisorManager>,
    indexes: Arc<dolmen_query::index::ValueIndexes>,
) {
    let (view, cache) = (Arc::clone(view), Arc::clone(cache));
    // Weak: the overlord holds the metrics, which hold this source (no cycle).
    let overlord = Arc::downgrade(overlord);
    let supervisors = Arc::downgrade(supervisors);
    metrics.add_source(move |snap| {
        if let Some(overlord) = overlord.upgrade() {
            overlord.report_ingest_metrics();
            let (total, used) = overlord.task_slots();
            snap.task_slots(total as u64, used as u64);
        }
        for (ds, count, bytes) in view.segment_stats() {
            snap.segments(&ds, count, bytes);
        }
        for (ds, bytes) in cache.used_bytes() {
            snap.segment_cache(&ds, bytes);
        }
        snap.value_indexes(indexes.loaded_count(), indexes.built_count());
        snap.value_index_rows_skipped(indexes.rows_skipped());
        if let Some(s) = supervisors.upgrade() {
            for lag in s.stream_lags() {
                snap.stream_lag(lag);
            }
            for lag in s.stream_time_lags() {
                snap.stream_time_lag(lag);
            }
        }
    });
}

/// The stores of statement results: the task-report store under the data directory and, when
/// enabled, durable storage (local directory or S3, see [`crate::config::DurableStorageConfig`]).
fn result_stores(config: &ServerConfig) -> anyhow::Result<ResultStores> {
    let task_report = ResultStore::local(&config.data_dir.join("statement-results"))
        .map_err(|e| anyhow::anyhow!(e))?;
    let durable = match &config.durable_storage {
        None => None,
        Some(crate::config::DurableStorageConfig::Local(dir)) => {
            Some(ResultStore::local(dir).map_err(|e| anyhow::anyhow!(e))?)
        }
        Some(crate::config::DurableStorageConfig::S3 { bucket, prefix }) => {
            let store = s3_store(config, bucket)
                .context("service.msq.intermediate.storage: cannot create the S3 client")?;
            Some(ResultStore::new(store, prefix))
        }
    };
    Ok(ResultStores {
        task_report,
        durable,
    })
}

/// An `object_store` client for `bucket` with the `service.s3.*` client settings (endpoint,
/// region, keys; path-style requests, plain HTTP allowed for a configured endpoint), falling
/// back to the standard `AWS_*` environment variables.
fn s3_store(
    config: &ServerConfig,
    bucket: &str,
) -> object_store::Result<Arc<dyn object_store::ObjectStore>> {
    let s3 = &config.input_sources.s3;
    let mut b = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_virtual_hosted_style_request(false);
    // `service.client.https.trustStore*`: extra roots, e.g. a private CA.
    let mut options = object_store::ClientOptions::new();
    for der in &config.input_sources.client_trusted_certificates {
        options = options.with_root_certificate(object_store::Certificate::from_der(der)?);
    }
    // Client options first (`with_allow_http` below sets one of them), and only with
    // a trust store: they replace those `from_env` read.
    if !config.input_sources.client_trusted_certificates.is_empty() {
        b = b.with_client_options(options);
    }
    if let Some(e) = &s3.endpoint {
        b = b.with_endpoint(e).with_allow_http(true);
    }
    if let Some(r) = &s3.region {
        b = b.with_region(r);
    }
    if let (Some(a), Some(k)) = (&s3.access_key, &s3.secret_key) {
        b = b.with_access_key_id(a).with_secret_access_key(k);
    }
    Ok(Arc::new(b.build()?))
}

fn advertised_host(bind: &str) -> String {
    if bind == "0.0.0.0" || bind == "::" {
        "localhost".to_string()
    } else {
        bind.to_string()
    }
}

/// Resolves when SIGINT or SIGTERM arrives.
pub async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// Default period of the timeline refresh loop.
pub const DEFAULT_VIEW_REFRESH: Duration = Duration::from_secs(30);

/// One request over the plaintext listener's own socket before the server is announced: the
/// first connection and request of a process run HTTP code (connection set-up, routing, the
/// middleware) that nothing else has touched, which cost the first user request about 1.3 ms
/// against 0.14 ms for the next (issue 25, ADR 0025 fourth round). `GET /status/health` is
/// open under every security configuration and is not a query (no request log line, no
/// metrics). A failure is only logged: the listener is already serving.
async fn warm_up_http(addr: SocketAddr) {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let url = format!("http://{}/status/health", SocketAddr::new(ip, addr.port()));
    let client = match reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(2))
        .no_proxy()
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "no warm-up request");
            return;
        }
    };
    if let Err(e) = client.get(&url).send().await {
        tracing::debug!(error = %e, %url, "warm-up request failed");
    }
}
