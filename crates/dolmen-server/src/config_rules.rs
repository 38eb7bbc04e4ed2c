//! Retention rules, dynamic configuration and their audit history (Druid's `RulesResource`,
//! `CoordinatorDynamicConfigsResource` and the worker parts of `OverlordResource`;
//! `docs/api-reference/retention-rules-api.md`, `dynamic-configuration-api.md`).
//!
//! Every change is written to the metadata store together with its audit entry (one
//! transaction) before the answer, an empty 200. The audit entry records the
//! `X-Service-Author` / `X-Service-Comment` headers (`X-Druid-*` too), `""` when absent, and the
//! client's IP address. History endpoints share one query path ([`history_query`]): `interval`
//! wins over `count`; without either the window is the last `service.audit.manager.auditHistoryMillis`
//! (default one week).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dolmen_common::Interval;
use dolmen_common::time::{format_iso_millis, now_millis};
use dolmen_coordinator::config::{COORDINATOR_CONFIG_KEY, CoordinatorDynamicConfig};
use dolmen_coordinator::rules::{DEFAULT_RULES_KEY, parse_rules, rules_to_json};
use dolmen_metadata::{AuditEntry, AuditInfo, AuditQuery, AuditTarget, RULES_AUDIT_TYPE};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ResourceError;
use crate::tasks::require_json;

type Params = Query<HashMap<String, String>>;

/// Druid's default audit history window, ms (`druid.audit.manager.auditHistoryMillis`: 7 days).
pub const DEFAULT_AUDIT_HISTORY_MS: i64 = 7 * 24 * 60 * 60 * 1000;

pub use dolmen_overlord::worker_config::WORKER_CONFIG_KEY;

/// Who is making a change: author and comment headers (spec `X-Service-*`, Druid `X-Druid-*`)
/// and the client's address.
#[derive(Debug, Clone)]
pub(crate) struct Auditor(pub(crate) AuditInfo);

impl<S: Send + Sync> FromRequestParts<S> for Auditor {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let header = |name: &str| -> String {
            ["x-service-", "x-druid-"]
                .iter()
                .find_map(|p| {
                    parts
                        .headers
                        .get(format!("{p}{name}"))
                        .and_then(|v| v.to_str().ok())
                })
                .unwrap_or("")
                .to_string()
        };
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_default();
        Ok(Auditor(AuditInfo {
            author: header("author"),
            comment: header("comment"),
            ip,
            identity: "allowAll".to_string(),
        }))
    }
}

/// The history selection of `?interval=` / `?count=` (Druid's `SQLAuditManager`): `interval`
/// wins; `count` must be a positive integer; neither gives the last `history_ms`.
///
/// # Errors
/// 400 naming the parameter for a bad interval or count (`Limit must be greater than zero!`).
pub(crate) fn history_query(
    params: &HashMap<String, String>,
    history_ms: i64,
) -> Result<AuditQuery, ResourceError> {
    if let Some(text) = params.get("interval") {
        return Interval::parse(text)
            .map(AuditQuery::Interval)
            .map_err(|e| {
                ResourceError::new(400, format!("interval [{text}] is invalid: {}", e.0))
            });
    }
    if let Some(text) = params.get("count") {
        let n: i64 = text.trim().parse().map_err(|_| {
            ResourceError::new(
                400,
                format!("count [{text}] is invalid: it must be an integer"),
            )
        })?;
        if n < 1 {
            return Err(ResourceError::new(400, "Limit must be greater than zero!"));
        }
        return Ok(AuditQuery::Count(u32::try_from(n).unwrap_or(u32::MAX)));
    }
    let now = now_millis();
    Ok(AuditQuery::Interval(Interval {
        start: now.saturating_sub(history_ms),
        end: now,
    }))
}

/// An audit entry as the history endpoints answer it (spec: `{key, type, auditInfo{author,
/// comment, ip}, payload, auditTime}`, `payload` the JSON text).
fn entry_json(e: &AuditEntry) -> Value {
    json!({
        "key": e.key,
        "type": e.audit_type,
        "auditInfo": {"author": e.info.author, "comment": e.info.comment, "ip": e.info.ip},
        "payload": e.payload,
        "auditTime": format_iso_millis(e.created_ms),
    })
}

async fn history(
    state: &AppState,
    audit_type: &str,
    key: Option<&str>,
    params: &HashMap<String, String>,
) -> Result<Json<Value>, ResourceError> {
    let query = history_query(params, state.audit_history_ms)?;
    let entries = state
        .metadata
        .audit_history(audit_type, key, &query)
        .await?;
    Ok(Json(Value::Array(entries.iter().map(entry_json).collect())))
}

/// Parses a JSON request body; an empty body is `null`.
fn parse_body(body: &[u8]) -> Result<Value, ResourceError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .map_err(|e| ResourceError::new(400, format!("the request body is not valid JSON: {e}")))
}

// --- retention rules ---

/// `GET /coordinator/v1/rules`: `{datasource: [rules]}` for every datasource that ever had
/// rules, `_default` included.
pub(crate) async fn get_all_rules(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    let rules = state.metadata.rules().await?;
    Ok(Json(Value::Object(
        rules.into_iter().map(|(k, r)| (k, r.rules)).collect(),
    )))
}

/// `GET /coordinator/v1/rules/{ds}`: its rules, `[]` when none (also for unknown
/// datasources); `?full` appends the `_default` rules.
pub(crate) async fn get_rules(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    let rules = state.metadata.rules().await?;
    let list = |ds: &str| -> Vec<Value> {
        rules
            .get(ds)
            .and_then(|r| r.rules.as_array().cloned())
            .unwrap_or_default()
    };
    let mut out = list(&data_source);
    if params.contains_key("full") {
        out.extend(list(DEFAULT_RULES_KEY));
    }
    Ok(Json(Value::Array(out)))
}

/// `POST /coordinator/v1/rules/{ds}` (and `/rules/_default`): replaces the rule array. 200
/// with an empty body; 400 naming the bad rule and field; 400 for `[]` as `_default`.
pub(crate) async fn post_rules(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Auditor(info): Auditor,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    require_json(&headers, "rules")?;
    let body = parse_body(&body)?;
    let rules = parse_rules(&body).map_err(|e| ResourceError::new(400, e.0))?;
    if rules.is_empty() && data_source == DEFAULT_RULES_KEY {
        return Err(ResourceError::new(
            400,
            "Cluster-level rules cannot be empty.",
        ));
    }
    state
        .metadata
        .set_rules(&data_source, &rules_to_json(&rules), &info)
        .await?;
    Ok(StatusCode::OK.into_response())
}

/// `GET /coordinator/v1/rules/history`: rule changes of every datasource.
pub(crate) async fn all_rules_history(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    history(&state, RULES_AUDIT_TYPE, None, &params).await
}

/// `GET /coordinator/v1/rules/{ds}/history`: rule changes of one datasource.
pub(crate) async fn rules_history(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    history(&state, RULES_AUDIT_TYPE, Some(&data_source), &params).await
}

// --- coordinator dynamic configuration ---

async fn coordinator_config(state: &AppState) -> Result<CoordinatorDynamicConfig, ResourceError> {
    Ok(CoordinatorDynamicConfig::from_stored(
        state
            .metadata
            .config(COORDINATOR_CONFIG_KEY)
            .await?
            .as_ref(),
    ))
}

/// `GET /coordinator/v1/config`: every property, Druid's defaults for those never set.
pub(crate) async fn get_coordinator_config(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    Ok(Json(coordinator_config(&state).await?.to_json()))
}

/// `POST /coordinator/v1/config`: merges the posted properties into the configuration (left
/// out ones keep their value) and audits the result (always, even when nothing changed). 200
/// with an empty body; 400 naming the bad property.
pub(crate) async fn post_coordinator_config(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    require_json(&headers, "the coordinator dynamic configuration")?;
    let body = parse_body(&body)?;
    let merged = coordinator_config(&state)
        .await?
        .merged(&body)
        .map_err(|e| ResourceError::new(400, e.0))?;
    state
        .metadata
        .set_config_audited(
            COORDINATOR_CONFIG_KEY,
            &merged.to_json(),
            &AuditTarget::config(COORDINATOR_CONFIG_KEY),
            &info,
        )
        .await?;
    Ok(StatusCode::OK.into_response())
}

/// `GET /coordinator/v1/config/history`.
pub(crate) async fn coordinator_config_history(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    history(
        &state,
        COORDINATOR_CONFIG_KEY,
        Some(COORDINATOR_CONFIG_KEY),
        &params,
    )
    .await
}

// --- overlord dynamic configuration and workers ---

/// `GET /indexer/v1/worker`: the stored worker behaviour config; 200 with an empty body when
/// none was ever set.
pub(crate) async fn get_worker_config(
    State(state): State<Arc<AppState>>,
) -> Result<Response, ResourceError> {
    Ok(match state.metadata.config(WORKER_CONFIG_KEY).await? {
        Some(v) => Json(v).into_response(),
        None => StatusCode::OK.into_response(),
    })
}

/// `POST /indexer/v1/worker`: stores a worker behaviour config (normalized, see
/// [`dolmen_overlord::worker_config::parse_worker_config`]) with its audit entry. 200 with an
/// empty body; 400 naming the bad field.
pub(crate) async fn post_worker_config(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    require_json(&headers, "the worker configuration")?;
    let body = parse_body(&body)?;
    let config = dolmen_overlord::worker_config::parse_worker_config(&body)
        .map_err(|e| ResourceError::new(400, e))?;
    state
        .metadata
        .set_config_audited(
            WORKER_CONFIG_KEY,
            &config,
            &AuditTarget::config(WORKER_CONFIG_KEY),
            &info,
        )
        .await?;
    Ok(StatusCode::OK.into_response())
}

/// `GET /indexer/v1/worker/history`.
pub(crate) async fn worker_config_history(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    history(&state, WORKER_CONFIG_KEY, Some(WORKER_CONFIG_KEY), &params).await
}

/// `GET /indexer/v1/workers`: this process as the only worker, with its real capacity, the
/// slots in use, the tasks running in them and its category.
pub(crate) async fn list_workers(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    let (capacity, used) = state.overlord.task_slots();
    let mut running = Vec::new();
    let mut parallel = 0usize;
    let mut by_type: std::collections::BTreeMap<String, usize> = Default::default();
    for id in state.overlord.active_task_ids() {
        if let Some(t) = state.overlord.task(&id).await?
            && t.runner_status == dolmen_metadata::RunnerStatus::Running
        {
            if t.task_type == "index_parallel" {
                parallel += 1;
            }
            *by_type.entry(t.task_type.clone()).or_default() += 1;
            running.push(t.id);
        }
    }
    running.sort();
    let last_completed = state
        .overlord
        .tasks(&dolmen_metadata::TaskFilter {
            statuses: Some(vec![
                dolmen_metadata::TaskState::Success,
                dolmen_metadata::TaskState::Failed,
            ]),
            max: Some(1),
            ..Default::default()
        })
        .await?
        .first()
        .map(|t| format_iso_millis(t.created_ms + t.duration_ms.max(0)));
    let mut entry = json!({
        "worker": {
            "scheme": "http",
            "host": state.host_port(),
            "ip": state.host,
            "capacity": capacity,
            "version": "0",
            "category": state.worker_category,
            "disabled": false,
        },
        "currCapacityUsed": used,
        "currParallelIndexCapacityUsed": parallel,
        "availabilityGroups": [],
        "runningTasks": running,
        "lastCompletedTaskTime": last_completed.unwrap_or_else(|| format_iso_millis(state.started_ms)),
    });
    if !by_type.is_empty() {
        entry["currCapacityUsedByTaskType"] = json!(by_type);
    }
    Ok(Json(json!([entry])))
}

/// `GET /indexer/v1/scaling`: 200 with an empty body (Dolmen has no autoscaler).
pub(crate) async fn scaling() -> Response {
    StatusCode::OK.into_response()
}
