//! Tasks API (`/indexer/v1/...`; spec "Tasks", reference-behaviour "Tasks", Druid's
//! `OverlordResource.java`).
//!
//! Every row of the spec's Tasks table is served here: submit, payload, status (one task and
//! many: `POST /taskStatus`), reports, log, segments (always 404), shutdown (one task and a
//! datasource's tasks), the task lists (`/tasks` and the four per-state lists with the same
//! filters), `DELETE /pendingSegments/{ds}`; plus `GET /isLeader` and `GET /leader`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dolmen_common::Interval;
use dolmen_common::time::format_iso_millis;
use dolmen_metadata::{RunnerStatus, TaskFilter, TaskRecord, TaskState};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ResourceError;

/// The task summary object (spec "Task summary object").
pub fn task_summary(t: &TaskRecord) -> Value {
    json!({
        "id": t.id,
        "groupId": t.group_id,
        "type": t.task_type,
        "createdTime": format_iso_millis(t.created_ms),
        "queueInsertionTime": format_iso_millis(t.queue_insertion_ms),
        "statusCode": t.status.as_str(),
        "status": t.status.as_str(),
        "runnerStatusCode": t.runner_status.as_str(),
        "duration": t.duration_ms,
        "location": t.location,
        "dataSource": t.data_source,
        "errorMsg": t.error_msg,
    })
}

/// 415 unless the request's `Content-Type` is `application/json` (parameters such as
/// `charset` allowed); `what` names the expected body in the message.
pub(crate) fn require_json(headers: &HeaderMap, what: &str) -> Result<(), ResourceError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" {
        return Err(ResourceError::new(
            415,
            format!("Unsupported Content-Type [{ct}]: {what} must be sent as application/json"),
        ));
    }
    Ok(())
}

/// `POST /task`: 200 `{task}`; 415 not JSON; 500 unparseable body (spec); 400 invalid spec.
pub(crate) async fn submit(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ResourceError> {
    require_json(&headers, "task specs")?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ResourceError::new(
            400,
            "Missing task spec: the request body is empty",
        ));
    }
    let payload: Value = serde_json::from_slice(&body).map_err(|e| {
        ResourceError::new(
            500,
            format!("Unexpected token or characters in the task spec body: {e}"),
        )
    })?;
    if !payload.is_object() {
        return Err(ResourceError::new(400, "Task spec must be a JSON object"));
    }
    let id = state.overlord.submit(payload).await?;
    Ok(Json(json!({ "task": id })))
}

/// `GET /task/{id}`: `{task, payload}`; 404 `{task, payload: null}`.
pub(crate) async fn get_task(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ResourceError> {
    Ok(match state.overlord.task(&id).await? {
        Some(t) => Json(json!({ "task": id, "payload": t.payload })).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "task": id, "payload": null })),
        )
            .into_response(),
    })
}

/// `GET /task/{id}/status`: `{task, status}`; 404 `{task, status: null}`.
pub(crate) async fn get_status(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ResourceError> {
    Ok(match state.overlord.task(&id).await? {
        Some(t) => Json(json!({ "task": id, "status": task_summary(&t) })).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "task": id, "status": null })),
        )
            .into_response(),
    })
}

/// `GET /task/{id}/reports`.
pub(crate) async fn get_reports(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    Ok(Json(state.overlord.report(&id).await?))
}

/// `GET /task/{id}/log?offset=N`: the task's log lines after skipping `offset` lines.
pub(crate) async fn get_log(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ResourceError> {
    let offset = match params.get("offset") {
        None => 0,
        Some(s) => s
            .parse::<i64>()
            .map_err(|_| ResourceError::new(400, format!("offset [{s}] is not an integer")))?
            .max(0) as usize,
    };
    if state.overlord.task(&id).await?.is_none() {
        return Err(ResourceError::new(
            404,
            format!("No log was found for this task. The task may not exist: [{id}]"),
        ));
    }
    let text = state.overlord.logs().read(&id, offset).unwrap_or_default();
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// `GET /task/{id}/segments`: always 404 (deprecated in the spec).
pub(crate) async fn get_segments(Path(id): Path<String>) -> ResourceError {
    ResourceError::new(
        404,
        format!(
            "Segment listing of task [{id}] is not supported; use the segment metadata APIs or sys.segments instead"
        ),
    )
}

/// `POST /task/{id}/shutdown`.
pub(crate) async fn shutdown(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    state.overlord.shutdown_task(&id)?;
    Ok(Json(json!({ "task": id })))
}

/// `POST /datasources/{ds}/shutdownAllTasks`: shuts down every waiting, pending or running task
/// of the datasource; 200 `{"dataSource": ds}`, 404 `{error}` when it has none (spec "Tasks").
pub(crate) async fn shutdown_all_tasks(
    State(state): State<Arc<AppState>>,
    Path(data_source): Path<String>,
) -> Result<Json<Value>, ResourceError> {
    let ids = state.overlord.shutdown_data_source_tasks(&data_source)?;
    tracing::info!(data_source = %data_source, tasks = ?ids, "shutting down all tasks of datasource");
    Ok(Json(json!({ "dataSource": data_source })))
}

/// The status object of `POST /taskStatus` (spec "Status-object map", Druid's `TaskStatus`):
/// `{id, status, duration, errorMsg, location}`; `duration` is -1 while the task runs.
pub fn task_status_object(t: &TaskRecord) -> Value {
    json!({
        "id": t.id,
        "status": t.status.as_str(),
        "duration": t.duration_ms,
        "errorMsg": t.error_msg,
        "location": t.location,
    })
}

/// `POST /taskStatus` with a JSON array of task ids: 200 with a map from each known id to its
/// status object (unknown ids are left out). 415 when the body is missing or not sent as
/// `application/json` (spec); 400 when it is not a non-empty array of strings (Druid answers
/// 400 "No TaskIds provided" for an empty list).
pub(crate) async fn task_statuses(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ResourceError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ResourceError::new(
            415,
            "Missing request body: expected a JSON array of task ids sent as application/json",
        ));
    }
    require_json(&headers, "the list of task ids")?;
    let ids: Vec<String> = serde_json::from_slice(&body).map_err(|e| {
        ResourceError::new(
            400,
            format!("body: expected a JSON array of task id strings: {e}"),
        )
    })?;
    if ids.is_empty() {
        return Err(ResourceError::new(400, "body: no task ids provided"));
    }
    let mut out = serde_json::Map::new();
    for id in ids {
        if out.contains_key(&id) {
            continue;
        }
        if let Some(t) = state.overlord.task(&id).await? {
            out.insert(id, task_status_object(&t));
        }
    }
    Ok(Json(Value::Object(out)))
}

/// `DELETE /pendingSegments/{ds}[?interval=a/b]`: `{"numDeleted": 0}`.
///
/// Druid keeps a pending-segments table of segment ids allocated to streaming and appending
/// tasks before they publish, and this endpoint clears its rows for a datasource. Dolmen
/// allocates segment ids (versions and partition numbers) inside the publish transaction
/// itself (ADR 0001), so no pending segment ever exists: the true count of deleted rows is
/// always 0. The optional `interval` (`/` or `_` delimited) is validated (400 naming it) and
/// otherwise has nothing to select.
pub(crate) async fn delete_pending_segments(
    Path(data_source): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ResourceError> {
    if let Some(iv) = params.get("interval") {
        Interval::parse(iv)
            .map_err(|e| ResourceError::new(400, format!("interval [{iv}] is invalid: {}", e.0)))?;
    }
    tracing::debug!(data_source = %data_source, "no pending segments to delete");
    Ok(Json(json!({ "numDeleted": 0 })))
}

/// `GET /isLeader` (overlord and coordinator): `{"leader": true}`. Dolmen runs one overlord and
/// one coordinator per process, each always the leader (Druid answers 404
/// `{"leader": false}` on a non-leader).
pub(crate) async fn is_leader() -> Json<Value> {
    Json(json!({ "leader": true }))
}

/// `GET /leader` (overlord and coordinator): the leader's URL as plain text, e.g.
/// `http://localhost:8888` (Druid's `OverlordResource.getLeader`).
pub(crate) async fn leader(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("http://{}", state.host_port()),
    )
        .into_response()
}

/// Which tasks a list request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateFilter {
    All,
    Running,
    Complete,
    Waiting,
    Pending,
}

async fn list(
    state: &AppState,
    which: StateFilter,
    params: &HashMap<String, String>,
) -> Result<Json<Value>, ResourceError> {
    let created = match params.get("createdTimeInterval") {
        None => None,
        Some(s) => Some(Interval::parse(&s.replace('_', "/")).map_err(|e| {
            ResourceError::new(
                500,
                format!("createdTimeInterval [{s}] is invalid: {e}; expected <start>_<end>"),
            )
        })?),
    };
    let max = match params.get("max") {
        None => None,
        Some(s) => Some(s.parse::<usize>().map_err(|_| {
            ResourceError::new(500, format!("max [{s}] is not a non-negative integer"))
        })?),
    };
    let base = TaskFilter {
        data_source: params.get("datasource").cloned(),
        task_type: params.get("type").cloned(),
        created,
        ..Default::default()
    };
    let mut out = Vec::new();
    let active = TaskFilter {
        statuses: Some(vec![TaskState::Running]),
        ..base.clone()
    };
    if which != StateFilter::Complete {
        let wanted = match which {
            StateFilter::Running => Some(RunnerStatus::Running),
            StateFilter::Waiting => Some(RunnerStatus::Waiting),
            StateFilter::Pending => Some(RunnerStatus::Pending),
            _ => None,
        };
        for t in state.overlord.tasks(&active).await? {
            if wanted.is_none_or(|w| t.runner_status == w) {
                out.push(task_summary(&t));
            }
        }
    }
    if matches!(which, StateFilter::All | StateFilter::Complete) {
        let f = TaskFilter {
            statuses: Some(vec![TaskState::Success, TaskState::Failed]),
            max,
            ..base.clone()
        };
        for t in state.overlord.tasks(&f).await? {
            out.push(task_summary(&t));
        }
    }
    Ok(Json(Value::Array(out)))
}

/// `GET /tasks?state=...`.
pub(crate) async fn list_tasks(
    State(state): State<Arc<AppState>>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ResourceError> {
    let which = match params.get("state").map(|s| s.to_ascii_lowercase()) {
        None => StateFilter::All,
        Some(s) => match s.as_str() {
            "running" => StateFilter::Running,
            "complete" => StateFilter::Complete,
            "waiting" => StateFilter::Waiting,
            "pending" => StateFilter::Pending,
            _ => {
                return Err(ResourceError::new(
                    400,
                    format!(
                        "Invalid state : {s}, valid values are: [pending, waiting, running, complete]"
                    ),
                ));
            }
        },
    };
    list(&state, which, &params).await
}

/// `GET /completeTasks`.
pub(crate) async fn complete_tasks(
    State(s): State<Arc<AppState>>,
    Query(p): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ResourceError> {
    list(&s, StateFilter::Complete, &p).await
}
/// `GET /runningTasks`.
pub(crate) async fn running_tasks(
    State(s): State<Arc<AppState>>,
    Query(p): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ResourceError> {
    list(&s, StateFilter::Running, &p).await
}
/// `GET /waitingTasks`.
pub(crate) async fn waiting_tasks(
    State(s): State<Arc<AppState>>,
    Query(p): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ResourceError> {
    list(&s, StateFilter::Waiting, &p).await
}
/// `GET /pendingTasks`.
pub(crate) async fn pending_tasks(
    State(s): State<Arc<AppState>>,
    Query(p): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ResourceError> {
    list(&s, StateFilter::Pending, &p).await
}
