//! Supervisors API (`/indexer/v1/supervisor`; spec "Supervisors", reference-behaviour
//! "Supervisors", Druid's `SupervisorResource.java`). The work is done by
//! [`dolmen_overlord::supervisor::SupervisorManager`].
//!
//! Errors are `{"error": message}`: 400 for an invalid spec or body (naming the field) and for
//! suspending a suspended supervisor (or resuming a running one), 404 for an unknown id
//! (`[id] does not exist`), 415 when a body is not JSON.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dolmen_overlord::OverlordError;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ResourceError;
use crate::tasks::require_json;

type Result<T> = std::result::Result<T, ResourceError>;

fn parse_body(headers: &HeaderMap, body: &Bytes, what: &str) -> Result<Value> {
    require_json(headers, what)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ResourceError::new(
            400,
            format!("{what}: empty request body"),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ResourceError::new(400, format!("{what}: malformed JSON: {e}")))
}

/// Druid answers "already suspended/running" with 400.
fn state_error(e: OverlordError) -> ResourceError {
    match e {
        OverlordError::Conflict(m) => ResourceError::new(400, m),
        other => other.into(),
    }
}

fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name)
        .is_some_and(|v| v.is_empty() || v.eq_ignore_ascii_case("true"))
}

/// `GET /supervisor` (ids), `?full` (objects with specs), `?state=true` (objects without).
pub async fn list(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>> {
    let sup = &state.supervisors;
    let ids = sup.ids();
    if flag(&q, "full") || flag(&q, "state") {
        let with_spec = flag(&q, "full");
        let mut out = Vec::new();
        for id in ids {
            match sup.summary(&id, with_spec) {
                Ok(v) => out.push(v),
                Err(OverlordError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(Json(Value::Array(out)));
    }
    Ok(Json(json!(ids)))
}

/// `POST /supervisor`: create or update; `{"id", "modified", "restarted"}`.
pub async fn submit(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>> {
    let v = parse_body(&headers, &body, "supervisor spec")?;
    let out = state
        .supervisors
        .submit(&v, flag(&q, "skipRestartIfUnmodified"))
        .await?;
    Ok(Json(
        json!({"id": out.id, "modified": out.modified, "restarted": out.restarted}),
    ))
}

/// `GET /supervisor/{id}`: the spec as read back.
pub async fn get_spec(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(state.supervisors.spec(&id)?))
}

/// `GET /supervisor/{id}/status`.
pub async fn status(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(state.supervisors.status(&id)?))
}

/// `GET /supervisor/{id}/health`: 200 `{"healthy": true}` or 503 `{"healthy": false}`.
pub async fn health(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response> {
    let healthy = state.supervisors.healthy(&id)?;
    let code = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    Ok((code, Json(json!({"healthy": healthy}))).into_response())
}

/// `GET /supervisor/{id}/stats`.
pub async fn stats(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(state.supervisors.stats(&id)?))
}

fn history_count(q: &HashMap<String, String>) -> Result<Option<usize>> {
    match q.get("count") {
        None => Ok(None),
        Some(c) => match c.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(ResourceError::new(
                400,
                format!("count: must be a positive integer, got [{c}]"),
            )),
        },
    }
}

/// `GET /supervisor/history`: id to history entries (`?count=n` keeps the newest n).
pub async fn all_history(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>> {
    let count = history_count(&q)?;
    let mut h = state.supervisors.all_history().await?;
    if let Some(n) = count {
        for v in h.values_mut() {
            v.truncate(n);
        }
    }
    Ok(Json(json!(h)))
}

/// `GET /supervisor/{id}/history`.
pub async fn history(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>> {
    let count = history_count(&q)?;
    let mut h = state.supervisors.history(&id).await?;
    if let Some(n) = count {
        h.truncate(n);
    }
    Ok(Json(Value::Array(h)))
}

/// `POST /supervisor/{id}/suspend`: the updated spec.
pub async fn suspend(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(
        state
            .supervisors
            .set_suspended(&id, true)
            .await
            .map_err(state_error)?,
    ))
}

/// `POST /supervisor/{id}/resume`: the updated spec.
pub async fn resume(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(
        state
            .supervisors
            .set_suspended(&id, false)
            .await
            .map_err(state_error)?,
    ))
}

/// `POST /supervisor/suspendAll` and `/resumeAll`: `{"status": "success"}`.
pub async fn suspend_all(State(state): State<Arc<AppState>>) -> Result<Json<Value>> {
    state.supervisors.set_all_suspended(true).await?;
    Ok(Json(json!({"status": "success"})))
}

/// `POST /supervisor/resumeAll`.
pub async fn resume_all(State(state): State<Arc<AppState>>) -> Result<Json<Value>> {
    state.supervisors.set_all_suspended(false).await?;
    Ok(Json(json!({"status": "success"})))
}

/// `POST /supervisor/{id}/reset`: `{"id"}`.
pub async fn reset(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    state.supervisors.reset(&id).await?;
    Ok(Json(json!({"id": id})))
}

/// `POST /supervisor/{id}/resetOffsets`: `{"id"}`.
pub async fn reset_offsets(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>> {
    // The id is checked before the body, as Druid does.
    state.supervisors.spec(&id)?;
    let v = parse_body(&headers, &body, "reset offsets metadata")?;
    state.supervisors.reset_offsets(&id, &v).await?;
    Ok(Json(json!({"id": id})))
}

/// `POST /supervisor/{id}/terminate` (and the deprecated `/shutdown`): `{"id"}`.
pub async fn terminate(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    state.supervisors.terminate(&id).await?;
    Ok(Json(json!({"id": id})))
}

/// `POST /supervisor/terminateAll`: `{"status": "success"}`, also when there is none.
pub async fn terminate_all(State(state): State<Arc<AppState>>) -> Result<Json<Value>> {
    state.supervisors.terminate_all().await?;
    Ok(Json(json!({"status": "success"})))
}

/// `POST /supervisor/{id}/taskGroups/handoff` with `{"taskGroupIds": [...]}`: 202, empty body.
pub async fn handoff(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let v = parse_body(&headers, &body, "task groups")?;
    let ids = v
        .get("taskGroupIds")
        .and_then(Value::as_array)
        .ok_or_else(|| ResourceError::new(400, "taskGroupIds: missing or not an array"))?;
    let groups: Vec<u32> = ids
        .iter()
        .map(|g| {
            g.as_u64()
                .and_then(|g| u32::try_from(g).ok())
                .ok_or_else(|| {
                    ResourceError::new(400, format!("taskGroupIds: [{g}] is not a task group id"))
                })
        })
        .collect::<Result<_>>()?;
    state.supervisors.handoff(&id, &groups)?;
    Ok(StatusCode::ACCEPTED.into_response())
}
