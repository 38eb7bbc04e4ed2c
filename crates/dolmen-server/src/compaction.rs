//! Automatic compaction configuration, status and progress (the spec's "Compaction" resources;
//! Druid's `CoordinatorCompactionConfigsResource`, `CoordinatorCompactionResource` and the newer
//! `OverlordCompactionResource`; `docs/api-reference/automatic-compaction-api.md`).
//!
//! The whole configuration is one document ([`COMPACTION_CONFIG_KEY`]) stored with an audit
//! entry in one transaction before the answer; a change that leaves it equal writes nothing.
//! Changes are serialised within the process, so two concurrent posts never lose one another.
//! Status and progress come from the snapshots of the last run of the compaction duty
//! ([`dolmen_overlord::auto_compact::CompactionDuty`]); before its first run, and for a
//! datasource without a config or without segments, they answer 404 `Unknown DataSource`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dolmen_metadata::{AuditInfo, AuditTarget};
use dolmen_overlord::auto_compact::{
    COMPACTION_CONFIG_KEY, CompactionClusterConfig, DataSourceCompactionConfig, datasource_history,
};
use serde_json::{Value, json};

use crate::AppState;
use crate::config_rules::{Auditor, history_query};
use crate::error::ResourceError;
use crate::tasks::require_json;

type Params = Query<HashMap<String, String>>;

/// Serialises read-modify-write changes of the configuration document.
static WRITE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn not_found_config() -> ResourceError {
    ResourceError::new(404, "Datasource compaction config does not exist")
}

fn unknown_data_source() -> ResourceError {
    ResourceError::new(404, "Unknown DataSource")
}

fn parse_json(body: &[u8]) -> Result<Value, ResourceError> {
    serde_json::from_slice(body)
        .map_err(|e| ResourceError::new(400, format!("the request body is not valid JSON: {e}")))
}

async fn load(state: &AppState) -> Result<CompactionClusterConfig, ResourceError> {
    Ok(CompactionClusterConfig::load(state.metadata.as_ref()).await?)
}

/// Applies `change` to the stored configuration and stores the result with its audit entry,
/// unless it is unchanged. Returns what `change` returned.
async fn update<T>(
    state: &AppState,
    info: &AuditInfo,
    change: impl FnOnce(&mut CompactionClusterConfig) -> Result<T, ResourceError>,
) -> Result<T, ResourceError> {
    let _guard = WRITE.lock().await;
    let before = load(state).await?;
    let mut after = before.clone();
    let out = change(&mut after)?;
    if after != before {
        let doc = serde_json::to_value(&after)
            .map_err(|e| ResourceError::new(500, format!("cannot serialize the config: {e}")))?;
        state
            .metadata
            .set_config_audited(
                COMPACTION_CONFIG_KEY,
                &doc,
                &AuditTarget::config(COMPACTION_CONFIG_KEY),
                info,
            )
            .await?;
    }
    Ok(out)
}

fn parse_config(body: &[u8]) -> Result<DataSourceCompactionConfig, ResourceError> {
    DataSourceCompactionConfig::from_json(&parse_json(body)?).map_err(ResourceError::from)
}

/// `POST /coordinator/v1/config/compaction`: creates or replaces a datasource's config (any
/// datasource name, existing or not). 200 with an empty body; 400 naming the bad field.
pub(crate) async fn post_config(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ResourceError> {
    require_json(&headers, "the compaction configuration")?;
    let config = parse_config(&body)?;
    update(&state, &info, |c| {
        c.upsert(config);
        Ok(())
    })
    .await?;
    Ok(StatusCode::OK.into_response())
}

/// `GET /coordinator/v1/config/compaction`: `{compactionConfigs, compactionTaskSlotRatio,
/// maxCompactionTaskSlots, useAutoScaleSlots}`.
pub(crate) async fn get_configs(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    Ok(Json(json!(load(&state).await?)))
}

/// `GET /coordinator/v1/config/compaction/{ds}`: the config with defaults; 404 when none.
pub(crate) async fn get_config(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    let all = load(&state).await?;
    let c = all.get(&data_source).ok_or_else(not_found_config)?;
    Ok(Json(json!(c)))
}

/// `DELETE /coordinator/v1/config/compaction/{ds}`: 200 with an empty body; 404 when none.
pub(crate) async fn delete_config(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    Path(data_source): Path<String>,
) -> Result<Response, ResourceError> {
    update(&state, &info, |c| {
        if c.remove(&data_source) {
            Ok(())
        } else {
            Err(not_found_config())
        }
    })
    .await?;
    Ok(StatusCode::OK.into_response())
}

/// `POST /coordinator/v1/config/compaction/taskslots?ratio=&max=` (also `useAutoScaleSlots`):
/// 200 with an empty body; a parameter that does not parse answers 404 with an empty body
/// (the spec's, from Druid's JAX-RS parameter conversion).
pub(crate) async fn post_taskslots(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    Query(params): Params,
) -> Result<Response, ResourceError> {
    let not_found = || StatusCode::NOT_FOUND.into_response();
    let ratio = match params.get("ratio") {
        Some(t) => match t.trim().parse::<f64>() {
            Ok(r) if r.is_finite() => Some(r),
            _ => return Ok(not_found()),
        },
        None => None,
    };
    let max = match params.get("max") {
        Some(t) => match t.trim().parse::<i32>() {
            Ok(m) => Some(i64::from(m)),
            Err(_) => return Ok(not_found()),
        },
        None => None,
    };
    let auto = match params.get("useAutoScaleSlots") {
        Some(t) => match t.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => return Ok(not_found()),
        },
        None => None,
    };
    update(&state, &info, |c| {
        if let Some(r) = ratio {
            c.compaction_task_slot_ratio = r;
        }
        if let Some(m) = max {
            c.max_compaction_task_slots = m;
        }
        if let Some(a) = auto {
            c.use_auto_scale_slots = a;
        }
        Ok(())
    })
    .await?;
    Ok(StatusCode::OK.into_response())
}

async fn history_entries(
    state: &AppState,
    data_source: &str,
    params: &HashMap<String, String>,
) -> Result<Vec<Value>, ResourceError> {
    let query = history_query(params, state.audit_history_ms)?;
    let mut entries = state
        .metadata
        .audit_history(COMPACTION_CONFIG_KEY, Some(COMPACTION_CONFIG_KEY), &query)
        .await?;
    // Diff oldest first (a count query answers newest first), answer in the query's order.
    let newest_first = matches!(query, dolmen_metadata::AuditQuery::Count(_));
    if newest_first {
        entries.reverse();
    }
    let mut out = datasource_history(data_source, &entries);
    if newest_first {
        out.reverse();
    }
    Ok(out)
}

/// `GET /coordinator/v1/config/compaction/{ds}/history?interval=&count=`: the changes of this
/// datasource's config (`[]` when none); 400 for a bad `interval` or `count`.
pub(crate) async fn config_history(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    Ok(Json(Value::Array(
        history_entries(&state, &data_source, &params).await?,
    )))
}

fn required_data_source(params: &HashMap<String, String>) -> Result<&str, ResourceError> {
    params
        .get("dataSource")
        .map(String::as_str)
        .filter(|d| !d.is_empty())
        .ok_or_else(|| ResourceError::new(400, "dataSource: No DataSource specified"))
}

/// `GET /coordinator/v1/compaction/progress?dataSource=`: `{"remainingSegmentSize": bytes
/// awaiting}`; 400 without `dataSource`, 404 for a datasource without a snapshot.
pub(crate) async fn progress(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    let ds = required_data_source(&params)?;
    let snap = state
        .compaction
        .snapshot(ds)
        .ok_or_else(unknown_data_source)?;
    Ok(Json(
        json!({"remainingSegmentSize": snap.bytes_awaiting_compaction}),
    ))
}

/// `GET /coordinator/v1/compaction/status?dataSource=`: `{"latestStatus": [...]}`, one element
/// per datasource of the last duty run; 404 for a named datasource without one.
pub(crate) async fn status(
    State(state): State<Arc<AppState>>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    let list = match params.get("dataSource").filter(|d| !d.is_empty()) {
        Some(ds) => vec![
            state
                .compaction
                .snapshot(ds)
                .ok_or_else(unknown_data_source)?,
        ],
        None => state.compaction.snapshots(),
    };
    Ok(Json(json!({ "latestStatus": list })))
}

// --- the newer /indexer/v1/compaction/... endpoints ---

/// `GET /indexer/v1/compaction/config/cluster`: the cluster settings.
pub(crate) async fn get_cluster(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    let c = load(&state).await?;
    Ok(Json(c.global_json()))
}

/// `POST /indexer/v1/compaction/config/cluster`: updates the cluster settings given
/// (`compactionTaskSlotRatio`, `maxCompactionTaskSlots`, `useAutoScaleSlots`). 200
/// `{"success": true}`; 400 naming a bad field.
pub(crate) async fn post_cluster(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    body: Bytes,
) -> Result<Json<Value>, ResourceError> {
    let body = parse_json(&body)?;
    let obj = body
        .as_object()
        .ok_or_else(|| ResourceError::new(400, "the cluster config must be a JSON object"))?;
    let ratio =
        match obj.get("compactionTaskSlotRatio") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_f64().filter(|r| r.is_finite()).ok_or_else(|| {
                ResourceError::new(400, "compactionTaskSlotRatio: must be a number")
            })?),
        };
    let max = match obj.get("maxCompactionTaskSlots") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or_else(|| {
            ResourceError::new(400, "maxCompactionTaskSlots: must be an integer")
        })?),
    };
    let auto = match obj.get("useAutoScaleSlots") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_bool()
                .ok_or_else(|| ResourceError::new(400, "useAutoScaleSlots: must be a boolean"))?,
        ),
    };
    update(&state, &info, |c| {
        if let Some(r) = ratio {
            c.compaction_task_slot_ratio = r;
        }
        if let Some(m) = max {
            c.max_compaction_task_slots = m;
        }
        if let Some(a) = auto {
            c.use_auto_scale_slots = a;
        }
        Ok(())
    })
    .await?;
    Ok(Json(json!({"success": true})))
}

/// `GET /indexer/v1/compaction/config/datasources`: `{"compactionConfigs": [...]}`.
pub(crate) async fn get_datasource_configs(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ResourceError> {
    Ok(Json(
        json!({"compactionConfigs": load(&state).await?.compaction_configs}),
    ))
}

/// `POST /indexer/v1/compaction/config/datasources/{ds}`: the body's `dataSource` must be the
/// path's. 200 `{"success": true}`.
pub(crate) async fn post_datasource_config(
    State(state): State<Arc<AppState>>,
    Auditor(info): Auditor,
    Path(data_source): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ResourceError> {
    let config = parse_config(&body)?;
    if config.data_source != data_source {
        return Err(ResourceError::new(
            400,
            format!(
                "dataSource: DataSource in spec[{}] does not match DataSource in path[{data_source}]",
                config.data_source
            ),
        ));
    }
    update(&state, &info, |c| {
        c.upsert(config);
        Ok(())
    })
    .await?;
    Ok(Json(json!({"success": true})))
}

/// `DELETE /indexer/v1/compaction/config/datasources/{ds}`: 200 `{"success": true}`; 404 when
/// none.
pub(crate) async fn delete_datasource_config(
    state: State<Arc<AppState>>,
    auditor: Auditor,
    path: Path<String>,
) -> Result<Json<Value>, ResourceError> {
    delete_config(state, auditor, path).await?;
    Ok(Json(json!({"success": true})))
}

/// `GET /indexer/v1/compaction/config/datasources/{ds}/history`: `{"entries": [...]}`.
pub(crate) async fn datasource_config_history(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
    Query(params): Params,
) -> Result<Json<Value>, ResourceError> {
    Ok(Json(
        json!({"entries": history_entries(&state, &data_source, &params).await?}),
    ))
}

/// `GET /indexer/v1/compaction/status/datasources`: `{"latestStatus": [...]}`.
pub(crate) async fn datasource_statuses(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"latestStatus": state.compaction.snapshots()}))
}

/// `GET /indexer/v1/compaction/status/datasources/{ds}`: one snapshot; 404 `Unknown
/// DataSource`.
pub(crate) async fn datasource_status(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    let snap = state
        .compaction
        .snapshot(&data_source)
        .ok_or_else(unknown_data_source)?;
    Ok(Json(json!(snap)))
}

/// `GET /indexer/v1/compaction/isSupervisorEnabled`: `false` (the coordinator duty compacts).
pub(crate) async fn is_supervisor_enabled() -> Json<Value> {
    Json(json!(false))
}
