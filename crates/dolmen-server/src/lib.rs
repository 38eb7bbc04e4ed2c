//! Dolmen's HTTP API (the router role): axum routes, one module per API family, and the single
//! mapping from domain errors to HTTP statuses and JSON shapes ([`error`]).
//!
//! Every API route answers under `/service/...` (canonical, spec) and under `/druid/...` (for
//! Druid clients). Handlers always write `X-Service-*` response headers; a middleware on the
//! `/druid` tree renames them to `X-Druid-*`. `/status` and `/status/health` live at the root,
//! as in Druid, and so does `/metrics` (Prometheus exposition, [`dolmen_metrics`]).
//!
//! SQL requests are measured and written to the SQL request log ([`request_log`]).
//!
//! Handlers are thin: they parse and validate the request at the edge and call the overlord or
//! the query engine.

pub mod compaction;
pub mod config_rules;
pub mod coordinator;
pub mod error;
pub mod lookups;
pub mod paths;
pub mod request_log;
pub mod security;
pub mod sql;
pub mod statements;
pub mod supervisors;
pub mod tasks;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::ServiceExt;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{delete, get, post};
use dolmen_metadata::MetadataStore;
use dolmen_overlord::Overlord;
use dolmen_query::QueryEngine;
use dolmen_storage::SegmentView;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::Layer;
use tower_http::normalize_path::NormalizePathLayer;

/// Dolmen's version string (`GET /status`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Largest request body accepted, bytes (task specs with inline data can be large).
pub const MAX_REQUEST_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Everything handlers need.
#[derive(Debug)]
pub struct AppState {
    /// Task queue and runner.
    pub overlord: Arc<Overlord>,
    /// SQL engine.
    pub engine: Arc<QueryEngine>,
    /// Live timelines.
    pub view: Arc<SegmentView>,
    /// Metadata store.
    pub metadata: Arc<dyn MetadataStore>,
    /// The runtime queries execute on (kept apart from the HTTP reactor).
    pub query_runtime: tokio::runtime::Handle,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// Synchronous SQL queries now running, for `DELETE /v2/sql/{sqlQueryId}`.
    pub queries: Arc<sql::RunningQueries>,
    /// Where statement results are kept.
    pub results: Arc<dolmen_query::statement::ResultStores>,
    /// Streaming supervisors.
    pub supervisors: Arc<dolmen_overlord::supervisor::SupervisorManager>,
    /// Lookups: their configuration and the tables queries read.
    pub lookups: Arc<dolmen_lookup::LookupManager>,
    /// Metrics (inert with `service.emitter=noop`).
    pub metrics: dolmen_metrics::Metrics,
    /// The coordinator: retention rules applied on a schedule, and its last assignments.
    pub coordinator: Arc<dolmen_coordinator::Coordinator>,
    /// Default window of the audit history endpoints, ms
    /// (`service.audit.manager.auditHistoryMillis`, default one week).
    pub audit_history_ms: i64,
    /// This process's worker category (`service.worker.category`, default
    /// `_default_worker_category`).
    pub worker_category: String,
    /// When the process started, ms since the epoch.
    pub started_ms: i64,
    /// The automatic compaction duty and its last status snapshots.
    pub compaction: Arc<dolmen_overlord::auto_compact::CompactionDuty>,
    /// Authentication and authorization; `None` with security off (the default).
    pub security: Option<Arc<dolmen_auth::Security>>,
}

impl AppState {
    /// `host:port` as reported in error bodies.
    pub fn host_port(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The API routes, relative to a prefix; each path needs an entry in
/// [`security::ROUTE_GUARDS`].
fn api_routes() -> security::ApiRoutes {
    security::ApiRoutes::new()
        .route(paths::SQL, post(sql::post_sql))
        .route(paths::SQL_QUERY, axum::routing::delete(sql::cancel_sql))
        .route(paths::SQL_STATEMENTS, post(statements::submit_statement))
        .route(paths::SQL_STATEMENTS_ENABLED, get(statements::enabled))
        .route(
            paths::SQL_STATEMENT,
            get(statements::get_statement).delete(statements::cancel_statement),
        )
        .route(paths::SQL_STATEMENT_RESULTS, get(statements::get_results))
        .route(paths::SQL_TASK, post(statements::submit_task))
        .route(paths::SQL_TASK_ENABLED, get(statements::enabled))
        .route(
            paths::SUPERVISORS,
            get(supervisors::list).post(supervisors::submit),
        )
        .route(paths::SUPERVISORS_HISTORY, get(supervisors::all_history))
        .route(
            paths::SUPERVISORS_TERMINATE_ALL,
            post(supervisors::terminate_all),
        )
        .route(
            paths::SUPERVISORS_SUSPEND_ALL,
            post(supervisors::suspend_all),
        )
        .route(paths::SUPERVISORS_RESUME_ALL, post(supervisors::resume_all))
        .route(paths::SUPERVISOR, get(supervisors::get_spec))
        .route(paths::SUPERVISOR_STATUS, get(supervisors::status))
        .route(paths::SUPERVISOR_HEALTH, get(supervisors::health))
        .route(paths::SUPERVISOR_STATS, get(supervisors::stats))
        .route(paths::SUPERVISOR_HISTORY, get(supervisors::history))
        .route(paths::SUPERVISOR_SUSPEND, post(supervisors::suspend))
        .route(paths::SUPERVISOR_RESUME, post(supervisors::resume))
        .route(paths::SUPERVISOR_RESET, post(supervisors::reset))
        .route(
            paths::SUPERVISOR_RESET_OFFSETS,
            post(supervisors::reset_offsets),
        )
        .route(paths::SUPERVISOR_TERMINATE, post(supervisors::terminate))
        .route(paths::SUPERVISOR_SHUTDOWN, post(supervisors::terminate))
        .route(paths::SUPERVISOR_HANDOFF, post(supervisors::handoff))
        .route(paths::TASK_SUBMIT, post(tasks::submit))
        .route(paths::TASK, get(tasks::get_task))
        .route(paths::TASK_STATUS, get(tasks::get_status))
        .route(paths::TASK_REPORTS, get(tasks::get_reports))
        .route(paths::TASK_LOG, get(tasks::get_log))
        .route(paths::TASK_SEGMENTS, get(tasks::get_segments))
        .route(paths::TASK_SHUTDOWN, post(tasks::shutdown))
        .route(paths::TASKS, get(tasks::list_tasks))
        .route(paths::COMPLETE_TASKS, get(tasks::complete_tasks))
        .route(paths::RUNNING_TASKS, get(tasks::running_tasks))
        .route(paths::WAITING_TASKS, get(tasks::waiting_tasks))
        .route(paths::PENDING_TASKS, get(tasks::pending_tasks))
        .route(paths::SHUTDOWN_ALL_TASKS, post(tasks::shutdown_all_tasks))
        .route(paths::TASK_STATUSES, post(tasks::task_statuses))
        .route(
            paths::PENDING_SEGMENTS,
            delete(tasks::delete_pending_segments),
        )
        .route(paths::INDEXER_IS_LEADER, get(tasks::is_leader))
        .route(paths::INDEXER_LEADER, get(tasks::leader))
        .route(paths::COORDINATOR_IS_LEADER, get(tasks::is_leader))
        .route(paths::COORDINATOR_LEADER, get(tasks::leader))
        .route(paths::LOAD_STATUS, get(coordinator::load_status))
        .route(paths::DATASOURCES, get(coordinator::list_datasources))
        .route(
            paths::DATASOURCE,
            get(coordinator::get_datasource)
                .post(coordinator::mark_all_used)
                .delete(coordinator::mark_all_unused),
        )
        .route(
            paths::DATASOURCE_INTERVALS,
            get(coordinator::list_intervals),
        )
        .route(
            paths::DATASOURCE_INTERVAL,
            get(coordinator::get_interval).delete(coordinator::kill_interval),
        )
        .route(
            paths::DATASOURCE_SEGMENTS,
            get(coordinator::list_served_segments),
        )
        .route(
            paths::DATASOURCE_SEGMENT,
            get(coordinator::get_served_segment)
                .post(coordinator::mark_segment_used)
                .delete(coordinator::mark_segment_unused),
        )
        .route(paths::DATASOURCE_MARK_USED, post(coordinator::mark_used))
        .route(
            paths::DATASOURCE_MARK_UNUSED,
            post(coordinator::mark_unused),
        )
        .route(
            paths::DATASOURCE_LOAD_STATUS,
            get(coordinator::datasource_load_status),
        )
        .route(paths::DATASOURCE_TIERS, get(coordinator::list_tiers))
        .route(
            paths::METADATA_DATASOURCES,
            get(coordinator::metadata_datasources),
        )
        .route(
            paths::METADATA_DATASOURCE,
            get(coordinator::metadata_datasource),
        )
        .route(
            paths::METADATA_SEGMENTS,
            get(coordinator::metadata_segments),
        )
        .route(paths::METADATA_SEGMENT, get(coordinator::metadata_segment))
        .route(
            paths::LOOKUPS_CONFIG,
            get(lookups::get_tiers).post(lookups::post_config),
        )
        .route(
            paths::LOOKUPS_CONFIG_ALL,
            get(lookups::get_all).delete(lookups::delete_tier_all),
        )
        .route(
            paths::LOOKUPS_TIER,
            get(lookups::get_tier).delete(lookups::delete_tier),
        )
        .route(
            paths::LOOKUPS_LOOKUP,
            get(lookups::get_lookup)
                .post(lookups::post_lookup)
                .delete(lookups::delete_lookup),
        )
        .route(paths::LOOKUPS_STATUS, get(lookups::status))
        .route(paths::LOOKUPS_TIER_STATUS, get(lookups::tier_status_route))
        .route(paths::LOOKUPS_LOOKUP_STATUS, get(lookups::lookup_status))
        .route(paths::LOOKUPS_NODE_STATUS, get(lookups::node_status))
        .route(
            paths::LOOKUPS_TIER_NODE_STATUS,
            get(lookups::tier_node_status),
        )
        .route(paths::LOOKUPS_NODE, get(lookups::one_node_status))
        .route(paths::RULES, get(config_rules::get_all_rules))
        .route(paths::RULES_HISTORY, get(config_rules::all_rules_history))
        .route(
            paths::DATASOURCE_RULES,
            get(config_rules::get_rules).post(config_rules::post_rules),
        )
        .route(
            paths::DATASOURCE_RULES_HISTORY,
            get(config_rules::rules_history),
        )
        .route(
            paths::COORDINATOR_CONFIG,
            get(config_rules::get_coordinator_config).post(config_rules::post_coordinator_config),
        )
        .route(
            paths::COORDINATOR_CONFIG_HISTORY,
            get(config_rules::coordinator_config_history),
        )
        .route(
            paths::WORKER_CONFIG,
            get(config_rules::get_worker_config).post(config_rules::post_worker_config),
        )
        .route(
            paths::WORKER_CONFIG_HISTORY,
            get(config_rules::worker_config_history),
        )
        .route(paths::WORKERS, get(config_rules::list_workers))
        .route(paths::SCALING, get(config_rules::scaling))
        .route(
            paths::COMPACTION_CONFIG,
            get(compaction::get_configs).post(compaction::post_config),
        )
        .route(
            paths::COMPACTION_TASKSLOTS,
            axum::routing::post(compaction::post_taskslots),
        )
        .route(
            paths::COMPACTION_DATASOURCE_CONFIG,
            get(compaction::get_config).delete(compaction::delete_config),
        )
        .route(
            paths::COMPACTION_DATASOURCE_HISTORY,
            get(compaction::config_history),
        )
        .route(paths::COMPACTION_PROGRESS, get(compaction::progress))
        .route(paths::COMPACTION_STATUS, get(compaction::status))
        .route(
            paths::OVERLORD_COMPACTION_CLUSTER,
            get(compaction::get_cluster).post(compaction::post_cluster),
        )
        .route(
            paths::OVERLORD_COMPACTION_DATASOURCES,
            get(compaction::get_datasource_configs),
        )
        .route(
            paths::OVERLORD_COMPACTION_DATASOURCE,
            get(compaction::get_config)
                .post(compaction::post_datasource_config)
                .delete(compaction::delete_datasource_config),
        )
        .route(
            paths::OVERLORD_COMPACTION_DATASOURCE_HISTORY,
            get(compaction::datasource_config_history),
        )
        .route(
            paths::OVERLORD_COMPACTION_STATUSES,
            get(compaction::datasource_statuses),
        )
        .route(
            paths::OVERLORD_COMPACTION_STATUS,
            get(compaction::datasource_status),
        )
        .route(
            paths::OVERLORD_COMPACTION_SUPERVISOR_ENABLED,
            get(compaction::is_supervisor_enabled),
        )
}

/// Renames `X-Service-*` response headers to `X-Druid-*` for the `/druid` tree.
async fn druid_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let renames: Vec<(HeaderName, HeaderValue)> = resp
        .headers()
        .iter()
        .filter_map(|(k, v)| {
            let name = k.as_str();
            name.strip_prefix("x-service-").and_then(|rest| {
                HeaderName::from_bytes(format!("x-druid-{rest}").as_bytes())
                    .ok()
                    .map(|n| (n, v.clone()))
            })
        })
        .collect();
    for (n, v) in renames {
        let old = format!("x-service-{}", &n.as_str()["x-druid-".len()..]);
        resp.headers_mut().remove(old.as_str());
        resp.headers_mut().append(n, v);
    }
    resp
}

/// `GET /status`: version, loaded modules (none: Dolmen has no extension mechanism) and the
/// process memory as Druid reports it (bytes; from `/proc` on Linux, omitted elsewhere).
async fn status() -> Json<serde_json::Value> {
    let mut body = json!({ "version": VERSION, "modules": [] });
    if let Some(memory) = process_memory() {
        body["memory"] = memory;
    }
    Json(body)
}

/// Resident and total memory from `/proc` (Linux only).
fn process_memory() -> Option<serde_json::Value> {
    let field = |text: &str, key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let rss = field(&status, "VmRSS:")?;
    let total = field(&meminfo, "MemTotal:")?;
    let available = field(&meminfo, "MemAvailable:").unwrap_or(0);
    Some(json!({
        "maxMemory": total,
        "totalMemory": total,
        "freeMemory": available,
        "usedMemory": rss,
        "directMemory": 0,
    }))
}

/// `GET /metrics`: every metric in the Prometheus text format, or OpenMetrics when the
/// scraper's `Accept` asks for it (Prometheus does); 404 when metrics are off
/// (`service.emitter=noop`).
async fn metrics(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    req_uri: axum::http::Uri,
) -> Response {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = dolmen_metrics::Format::from_accept(accept);
    // Encoding reads /proc and walks the timelines: off the reactor.
    let m = state.metrics.clone();
    let encoded = tokio::task::spawn_blocking(move || m.encode(format))
        .await
        .ok()
        .flatten();
    match encoded {
        Some(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            )],
            text,
        )
            .into_response(),
        None => error::ResourceError::new(
            404,
            format!(
                "no such resource: GET {} (metrics are off: service.emitter=noop)",
                req_uri.path()
            ),
        )
        .into_response(),
    }
}

async fn health() -> Json<bool> {
    Json(true)
}

async fn self_discovered() -> Json<serde_json::Value> {
    Json(json!({ "selfDiscovered": true }))
}

async fn not_found(req: Request) -> impl IntoResponse {
    error::ResourceError::new(
        404,
        format!("no such resource: {} {}", req.method(), req.uri().path()),
    )
}

/// The routes at the root.
fn root_routes() -> security::ApiRoutes {
    security::ApiRoutes::new()
        .route(paths::STATUS, get(status))
        .route(paths::STATUS_HEALTH, get(health))
        .route(paths::STATUS_SELF_DISCOVERED, get(self_discovered))
        .route(paths::METRICS, get(metrics))
}

/// The complete router. With security on, every request first goes through
/// [`security::authenticate`], and every route through its guard ([`security`]).
pub fn router(state: Arc<AppState>) -> Router {
    let mut r = root_routes()
        .into_router(&state)
        .nest(paths::SERVICE_PREFIX, api_routes().into_router(&state))
        .nest(
            paths::DRUID_PREFIX,
            api_routes()
                .into_router(&state)
                .layer(middleware::from_fn(druid_headers)),
        )
        .nest(
            paths::SERVICE_EXT_PREFIX,
            security::security_routes().into_router(&state),
        )
        .nest(
            paths::DRUID_EXT_PREFIX,
            security::security_routes().into_router(&state),
        )
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY_BYTES));
    if state.security.is_some() {
        r = r.layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            security::authenticate,
        ));
    }
    r.with_state(state)
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

/// Serves the router on a bound listener until `shutdown` is cancelled, then stops accepting
/// and finishes in-flight requests.
///
/// A trailing slash is trimmed from request paths before routing, as Druid's Jersey resources
/// accept `/druid/v2/sql/` for `/druid/v2/sql` (pydruid's default path has the slash).
///
/// # Errors
/// On a listener failure.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = NormalizePathLayer::trim_trailing_slash().layer(router(state));
    // TCP_NODELAY: a response written in pieces (headers, then a streamed body) must not wait
    // for the client's delayed ACK (Nagle): keep-alive clients saw 40 ms added to small answers.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(
        listener,
        ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app),
    )
    .with_graceful_shutdown(async move { shutdown.cancelled().await })
    .await
}
