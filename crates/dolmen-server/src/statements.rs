//! The async statements API (`/v2/sql/statements`) and `POST /v2/sql/task` (spec "SQL"
//! endpoints 3-6; reference-behaviour "Async statements API").
//!
//! A statement is a `query_controller` task ([`dolmen_overlord::controller`]): `POST` checks the
//! request, plans the SQL once (so bad SQL is a 400 at once, with the schema known), stores the
//! task and answers ACCEPTED; the task's state maps to the statement's (Druid's
//! `SqlStatementResourceHelper`): RUNNING without a slot yet -> ACCEPTED, RUNNING -> RUNNING,
//! SUCCESS -> SUCCESS, FAILED (also cancelled) -> FAILED. Results are read back from the
//! pages the task wrote ([`dolmen_query::statement`]), in any result format.
//!
//! A submission is measured and logged like a synchronous query ([`crate::request_log`]):
//! `sqlQuery/*` metrics and a request log line for the `POST`, written once its response is;
//! as in Druid, the `query/*` metrics are not emitted for it.
//!
//! Errors use Druid's `DruidException` shape `{error: "druidException", errorCode, persona,
//! category, errorMessage, context}`; `POST` adds `errorClass` and `host`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dolmen_common::time::format_iso_millis;
use dolmen_metadata::{RunnerStatus, TaskRecord, TaskState};
use dolmen_overlord::controller::{SELECT_DATA_SOURCE, split_error_code};
use dolmen_overlord::{ControllerQuerySpec, ControllerSpec, Destination};
use dolmen_query::dml::{DmlKind, Overwrite};
use dolmen_query::writer::{ResultFormat, ResultWriter, column_infos};
use dolmen_query::{PreparedQuery, QueryError, SqlQuery};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::request_log::{Failure, Planned, RemoteAddr, SqlRequestLog};

/// A statement API error: status plus Druid's `DruidException` fields.
#[derive(Debug)]
pub(crate) struct StatementError {
    status: StatusCode,
    code: &'static str,
    category: &'static str,
    message: String,
    context: Vec<(&'static str, Value)>,
    /// `errorClass` and `host`, on the submit endpoints.
    submit_host: Option<String>,
}

impl StatementError {
    fn invalid_input(message: impl Into<String>) -> Self {
        StatementError {
            status: StatusCode::BAD_REQUEST,
            code: "invalidInput",
            category: "INVALID_INPUT",
            message: message.into(),
            context: Vec::new(),
            submit_host: None,
        }
    }

    fn not_found(message: impl Into<String>) -> Self {
        StatementError {
            status: StatusCode::NOT_FOUND,
            code: "notFound",
            category: "NOT_FOUND",
            message: message.into(),
            context: Vec::new(),
            submit_host: None,
        }
    }

    fn internal(message: impl Into<String>) -> Self {
        StatementError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "runtimeFailure",
            category: "RUNTIME_FAILURE",
            message: message.into(),
            context: Vec::new(),
            submit_host: None,
        }
    }

    fn unsupported_media(message: impl Into<String>) -> Self {
        StatementError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ..StatementError::invalid_input(message)
        }
    }

    fn from_query(e: &QueryError) -> Self {
        let mut s = match e {
            QueryError::Parse(_) | QueryError::Plan(_) | QueryError::InvalidInput(_) => {
                StatementError::invalid_input(e.to_string())
            }
            QueryError::ResourceLimit(_) => StatementError {
                code: "resourceLimitExceeded",
                category: "CAPACITY_EXCEEDED",
                ..StatementError::invalid_input(e.to_string())
            },
            _ => StatementError::internal(e.to_string()),
        };
        if matches!(e, QueryError::Parse(_)) {
            s.context.push(("sourceType", json!("sql")));
        }
        s
    }

    fn on_submit(mut self, host: &str) -> Self {
        self.submit_host = Some(host.to_string());
        self
    }
}

impl IntoResponse for StatementError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(error = %self.message, "statement request failed");
        }
        let mut body = json!({
            "error": "druidException",
            "errorCode": self.code,
            "persona": "USER",
            "category": self.category,
            "errorMessage": self.message,
            "context": self.context.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<String, Value>>(),
        });
        if let Some(host) = self.submit_host {
            body["errorClass"] = json!("org.apache.druid.error.DruidException");
            body["host"] = json!(host);
        }
        (self.status, axum::Json(body)).into_response()
    }
}

/// `GET /v2/sql/statements/enabled` and `GET /v2/sql/task/enabled`.
pub(crate) async fn enabled() -> Response {
    axum::Json(json!({"enabled": true})).into_response()
}

/// Reads a statement request's body (the synchronous endpoint's rules).
fn read_request(headers: &HeaderMap, body: &Bytes) -> Result<SqlQuery, StatementError> {
    crate::sql::parse_request(headers, body).map_err(|e| {
        if e.status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            StatementError::unsupported_media(e.to_string())
        } else {
            StatementError::invalid_input(e.to_string())
        }
    })
}

/// Checks a statement request's context; `require_async` for the statements API.
fn check_request(q: &SqlQuery, require_async: bool) -> Result<(), StatementError> {
    let ctx = q.context.clone().unwrap_or_default();
    if require_async {
        match ctx.get("executionMode") {
            None | Some(Value::Null) => {
                return Err(StatementError::invalid_input(
                    "Execution mode is not provided to the sql statement api. Please set [executionMode] to [ASYNC] in the query context",
                ));
            }
            Some(Value::String(m)) if m.eq_ignore_ascii_case("ASYNC") => {}
            Some(v) => {
                let shown = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                return Err(StatementError::invalid_input(format!(
                    "The sql statement api currently does not support the provided execution mode [{shown}]. Please set [executionMode] to [ASYNC] in the query context"
                )));
            }
        }
    }
    if ctx.contains_key("resultFormat") {
        return Err(StatementError::invalid_input(
            "Query context parameter [resultFormat] is not allowed",
        ));
    }
    Ok(())
}

/// Plans the request and makes the `query_controller` payload; returns it with the status
/// schema (`[{name, type, nativeType}]`).
async fn controller_payload(
    state: &AppState,
    q: &SqlQuery,
    log: &mut SqlRequestLog,
    submitted_by: Option<String>,
) -> Result<(Value, Vec<Value>), StatementError> {
    let prepared: PreparedQuery = state
        .engine
        .prepare(q)
        .map_err(|e| StatementError::from_query(&e))?;
    log.prepared(&prepared);
    let select_destination = match prepared.context.get("selectDestination") {
        None | Some(Value::Null) => Destination::TaskReport,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("taskReport") => Destination::TaskReport,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("durableStorage") => {
            if state.results.durable.is_none() {
                return Err(StatementError::invalid_input(
                    "selectDestination [durableStorage] needs durable storage for the multi-stage engine; set service.msq.intermediate.storage.enable=true",
                ));
            }
            Destination::DurableStorage
        }
        Some(v) => {
            return Err(StatementError::invalid_input(format!(
                "context.selectDestination: [{v}] is not one of [taskReport, durableStorage]"
            )));
        }
    };
    let (destination, data_source, schema, names, sql_types, native_types) = match prepared.dml() {
        Some(dml) => {
            let mut data_sources = dolmen_query::sql_ingest::validate(&state.engine, &prepared)
                .await
                .map_err(|e| StatementError::from_query(&e))?;
            // Druid names every resource of the statement: those read and the one written.
            data_sources.push(dml.data_source.clone());
            data_sources.sort();
            data_sources.dedup();
            let _ = log.planned_slot().set(Planned {
                data_sources,
                planning: log.elapsed(),
            });
            let replace = match &dml.kind {
                DmlKind::Insert => None,
                DmlKind::Replace(Overwrite::All) => Some(vec![dolmen_common::Interval::ETERNITY]),
                DmlKind::Replace(Overwrite::Intervals(v)) => Some(v.clone()),
            };
            let dest = Destination::DataSource {
                data_source: dml.data_source.clone(),
                segment_granularity: dml.partitioned_by.to_json(),
                replace_time_chunks: replace,
            };
            // Druid answers an ingestion statement with one TASK column.
            let schema = vec![json!({"name": "TASK", "type": "VARCHAR", "nativeType": "STRING"})];
            (
                dest,
                dml.data_source.clone(),
                schema,
                Vec::new(),
                Vec::new(),
                Vec::new(),
            )
        }
        None => {
            let (_, plan) = state
                .engine
                .plan(&prepared)
                .await
                .map_err(|e| StatementError::from_query(&e))?;
            let _ = log.planned_slot().set(Planned {
                data_sources: dolmen_query::engine::data_sources_read(&plan),
                planning: log.elapsed(),
            });
            let cols = column_infos(plan.schema().as_arrow());
            let schema = cols
                .iter()
                .map(|c| json!({"name": c.name, "type": c.sql_type, "nativeType": c.native_type}))
                .collect();
            (
                select_destination,
                SELECT_DATA_SOURCE.to_string(),
                schema,
                cols.iter().map(|c| c.name.clone()).collect(),
                cols.iter().map(|c| c.sql_type.clone()).collect(),
                cols.iter().map(|c| c.native_type.clone()).collect(),
            )
        }
    };
    let spec = ControllerSpec {
        task_type: "query_controller".into(),
        // Druid names a statement's task `query-<sqlQueryId>` (generated when absent).
        id: Some(format!("query-{}", prepared.query_id)),
        group_id: None,
        resource: None,
        data_source,
        sql_query: q.query.clone(),
        sql_query_context: q.context.clone().unwrap_or_default(),
        sql_parameters: q
            .parameters
            .as_ref()
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null)),
        sql_type_names: sql_types,
        native_type_names: native_types,
        column_names: names,
        spec: ControllerQuerySpec {
            destination,
            other: Map::new(),
        },
        submitted_by,
        context: Some(q.context.clone().unwrap_or_default()),
    };
    let payload = serde_json::to_value(&spec)
        .map_err(|e| StatementError::internal(format!("cannot encode the task: {e}")))?;
    Ok((payload, schema))
}

/// Checks, plans and queues a statement; returns its id, creation time (ms) and schema.
async fn submit(
    state: &AppState,
    q: &SqlQuery,
    require_async: bool,
    log: &mut SqlRequestLog,
    submitted_by: Option<String>,
) -> Result<(String, i64, Vec<Value>), StatementError> {
    check_request(q, require_async)?;
    let (payload, schema) = controller_payload(state, q, log, submitted_by).await?;
    let id = state
        .overlord
        .submit(payload)
        .await
        .map_err(|e| StatementError::invalid_input(e.to_string()))?;
    let created = state
        .overlord
        .task(&id)
        .await
        .map_err(|e| StatementError::internal(e.to_string()))?
        .map_or_else(dolmen_common::time::now_millis, |r| r.created_ms);
    Ok((id, created, schema))
}

/// Reads a statement request and submits it; the answer comes from `answer`. A request that
/// reads as SQL is measured and logged ([`crate::request_log`]).
async fn submit_and_answer(
    state: &AppState,
    remote: RemoteAddr,
    headers: &HeaderMap,
    body: &Bytes,
    require_async: bool,
    submitted_by: Option<String>,
    answer: impl FnOnce(String, i64, Vec<Value>) -> Response,
) -> Response {
    let started = Instant::now();
    let q = match read_request(headers, body) {
        Ok(q) => q,
        Err(e) => return e.on_submit(&state.host_port()).into_response(),
    };
    let mut log = SqlRequestLog::new(
        &state.metrics,
        dolmen_metrics::SqlEndpoint::Async,
        started,
        remote,
        &q,
    );
    match submit(state, &q, require_async, &mut log, submitted_by).await {
        Ok((id, created, schema)) => log.attach(answer(id, created, schema), None),
        Err(e) => {
            let failure = Failure::failed(&e.message);
            log.attach(
                e.on_submit(&state.host_port()).into_response(),
                Some(failure),
            )
        }
    }
}

/// `POST /v2/sql/statements`: the status object with state ACCEPTED.
pub(crate) async fn submit_statement(
    State(state): State<Arc<AppState>>,
    remote: RemoteAddr,
    identity: Option<axum::Extension<dolmen_auth::Identity>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    submit_and_answer(
        &state,
        remote,
        &headers,
        &body,
        true,
        identity.map(|i| i.0.name),
        |id, created, schema| {
            axum::Json(json!({
                "queryId": id,
                "state": "ACCEPTED",
                "createdAt": format_iso_millis(created),
                "schema": schema,
                "durationMs": -1,
            }))
            .into_response()
        },
    )
    .await
}

/// `POST /v2/sql/task`: runs the statement as a task; `{taskId, state}`.
pub(crate) async fn submit_task(
    State(state): State<Arc<AppState>>,
    remote: RemoteAddr,
    identity: Option<axum::Extension<dolmen_auth::Identity>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = identity.map(|i| i.0.name);
    submit_and_answer(&state, remote, &headers, &body, false, who, |id, _, _| {
        axum::Json(json!({"taskId": id, "state": "RUNNING"})).into_response()
    })
    .await
}

/// The statement state of a task.
fn statement_state(r: &TaskRecord) -> &'static str {
    match r.status {
        TaskState::Success => "SUCCESS",
        TaskState::Failed => "FAILED",
        _ if r.runner_status == RunnerStatus::Running => "RUNNING",
        _ => "ACCEPTED",
    }
}

async fn find_statement(state: &AppState, id: &str) -> Result<TaskRecord, StatementError> {
    let rec = state
        .overlord
        .task(id)
        .await
        .map_err(|e| StatementError::internal(e.to_string()))?;
    match rec {
        Some(r) if r.task_type == "query_controller" => Ok(r),
        _ => Err(StatementError::not_found(format!(
            "Query [{id}] was not found. The query details are no longer present or might not be of the type [query_controller]. Verify that the id is correct."
        ))),
    }
}

/// The schema of a statement from its payload.
fn payload_schema(spec: &ControllerSpec) -> Vec<Value> {
    if spec.is_ingestion() {
        return vec![json!({"name": "TASK", "type": "VARCHAR", "nativeType": "STRING"})];
    }
    spec.column_names
        .iter()
        .zip(&spec.sql_type_names)
        .zip(&spec.native_type_names)
        .map(|((n, s), t)| json!({"name": n, "type": s, "nativeType": t}))
        .collect()
}

/// `?detail=`.
#[derive(Debug, Deserialize)]
pub(crate) struct DetailParams {
    #[serde(default)]
    detail: Option<String>,
}

/// `GET /v2/sql/statements/{queryId}`.
pub(crate) async fn get_statement(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(params): Query<DetailParams>,
) -> Response {
    let detail = match params.detail.as_deref() {
        None => false,
        Some(s) if s.eq_ignore_ascii_case("true") => true,
        Some(s) if s.eq_ignore_ascii_case("false") => false,
        Some(other) => {
            return StatementError::invalid_input(format!("detail: [{other}] is not a boolean"))
                .into_response();
        }
    };
    match statement_status(&state, &id, detail).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn statement_status(
    state: &AppState,
    id: &str,
    detail: bool,
) -> Result<Value, StatementError> {
    let rec = find_statement(state, id).await?;
    let spec: ControllerSpec = serde_json::from_value(rec.payload.clone())
        .map_err(|e| StatementError::internal(format!("stored statement is unreadable: {e}")))?;
    let st = statement_state(&rec);
    let mut out = json!({
        "queryId": id,
        "state": st,
        "createdAt": format_iso_millis(rec.created_ms),
        "schema": payload_schema(&spec),
        "durationMs": if matches!(st, "SUCCESS" | "FAILED") { rec.duration_ms } else { -1 },
    });
    let report = state.overlord.report(id).await.ok();
    let payload = report
        .as_ref()
        .and_then(|r| r.get("multiStageQuery"))
        .and_then(|m| m.get("payload"));
    if st == "SUCCESS" {
        let results = payload.and_then(|p| p.get("results"));
        out["result"] = if spec.is_ingestion() {
            let rows = payload
                .and_then(|p| p.pointer("/status/segmentLoadWaiterStatus/rowsWritten"))
                .cloned()
                .unwrap_or(json!(0));
            json!({
                "numTotalRows": rows,
                "totalSizeInBytes": 0,
                "dataSource": spec.data_source,
                "sampleRecords": [],
                "pages": [],
            })
        } else {
            json!({
                "numTotalRows": results.and_then(|r| r.get("numTotalRows")).cloned().unwrap_or(json!(0)),
                "totalSizeInBytes": results.and_then(|r| r.get("totalSizeInBytes")).cloned().unwrap_or(json!(0)),
                "dataSource": SELECT_DATA_SOURCE,
                "sampleRecords": results.and_then(|r| r.get("results")).cloned().unwrap_or(json!([])),
                "pages": results.and_then(|r| r.get("pages")).cloned().unwrap_or(json!([])),
            })
        };
    }
    if st == "FAILED" {
        let msg = rec
            .error_msg
            .clone()
            .unwrap_or_else(|| "the statement failed".into());
        let canceled = msg == dolmen_ingest::IngestError::Canceled.to_string();
        let (code, message) = if canceled {
            ("Canceled", "Query canceled by user or by task shutdown.")
        } else {
            split_error_code(&msg)
        };
        out["errorDetails"] = json!({
            "error": "druidException",
            "errorCode": code,
            "persona": "USER",
            "category": if canceled { "CANCELED" } else { "RUNTIME_FAILURE" },
            "errorMessage": message,
            "context": {"taskId": id, "host": rec.location.host},
        });
    }
    if detail {
        out["stages"] = payload
            .and_then(|p| p.get("stages"))
            .cloned()
            .unwrap_or(json!([]));
        out["counters"] = payload
            .and_then(|p| p.get("counters"))
            .cloned()
            .unwrap_or(json!({}));
        out["warnings"] = payload
            .and_then(|p| p.pointer("/status/warnings"))
            .cloned()
            .unwrap_or(json!([]));
    }
    Ok(out)
}

/// `DELETE /v2/sql/statements/{queryId}`: 202 when it was cancellable, 200 when finished.
pub(crate) async fn cancel_statement(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Response {
    let rec = match find_statement(&state, &id).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    match rec.status {
        TaskState::Success | TaskState::Failed => StatusCode::OK.into_response(),
        _ => match state.overlord.shutdown_task(&id) {
            Ok(()) => {
                tracing::info!(query_id = %id, "statement cancelled");
                StatusCode::ACCEPTED.into_response()
            }
            // It finished in between.
            Err(_) => StatusCode::OK.into_response(),
        },
    }
}

/// `GET .../results` parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResultParams {
    #[serde(default)]
    page: Option<String>,
    #[serde(default)]
    result_format: Option<String>,
    #[serde(default)]
    filename: Option<String>,
}

/// `GET /v2/sql/statements/{queryId}/results`.
pub(crate) async fn get_results(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(params): Query<ResultParams>,
) -> Response {
    match results(&state, &id, params).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn results(
    state: &AppState,
    id: &str,
    params: ResultParams,
) -> Result<Response, StatementError> {
    let page: Option<usize> = match params.page.as_deref() {
        None => None,
        Some(p) => match p.trim().parse::<i64>() {
            Ok(n) if n < 0 => {
                return Err(StatementError::invalid_input(
                    "Page cannot be negative. Please pass a positive number.",
                ));
            }
            Ok(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Err(_) => {
                return Err(StatementError::invalid_input(format!(
                    "page: [{p}] is not a number"
                )));
            }
        },
    };
    let format: ResultFormat = match params.result_format.as_deref() {
        None => ResultFormat::Object,
        Some(f) => f.parse().map_err(|_| {
            StatementError::invalid_input(format!(
                "resultFormat: [{f}] is not one of [object, array, objectLines, arrayLines, csv]"
            ))
        })?,
    };
    if let Some(name) = &params.filename
        && (name.is_empty()
            || name.contains(['/', '\\', '"', '\r', '\n'])
            || name.chars().any(char::is_control))
    {
        return Err(StatementError::invalid_input(format!(
            "filename: [{name}] must be a plain file name"
        )));
    }
    let rec = find_statement(state, id).await?;
    match statement_state(&rec) {
        "SUCCESS" => {}
        "FAILED" => {
            return Err(StatementError::not_found(format!(
                "Query[{id}] failed. Check the status api for more details."
            )));
        }
        other => {
            return Err(StatementError::invalid_input(format!(
                "Query[{id}] is currently in [{other}] state. Please wait for it to complete."
            )));
        }
    }
    let spec: ControllerSpec = serde_json::from_value(rec.payload.clone())
        .map_err(|e| StatementError::internal(format!("stored statement is unreadable: {e}")))?;
    if spec.is_ingestion() {
        return Ok(StatusCode::OK.into_response());
    }
    let store = state
        .results
        .for_destination(&spec.spec.destination)
        .cloned()
        .ok_or_else(|| StatementError::internal("the results' store is not configured"))?;
    let report = state
        .overlord
        .report(id)
        .await
        .map_err(|e| StatementError::internal(e.to_string()))?;
    let pages = report
        .pointer("/multiStageQuery/payload/results/pages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let wanted: Vec<usize> = match page {
        Some(p) if p >= pages => {
            return Err(StatementError::invalid_input(format!(
                "Invalid page id [{p}] passed."
            )));
        }
        Some(p) => vec![p],
        None => (0..pages).collect(),
    };
    // The zone the statement ran with (SET statements included), as its report records it.
    let tz = report
        .pointer("/multiStageQuery/payload/results/sqlTimeZone")
        .or_else(|| spec.sql_query_context.get("sqlTimeZone"))
        .and_then(Value::as_str)
        .and_then(|z| dolmen_common::time::parse_time_zone(z).ok())
        .unwrap_or(dolmen_common::zone::Zone::Utc);
    // The first page is read before answering, so a missing page is a proper error.
    let first = match wanted.first() {
        Some(p) => Some(
            store
                .read_page(id, *p)
                .await
                .map_err(StatementError::internal)?,
        ),
        None => None,
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let query_id = id.to_string();
    state.query_runtime.spawn(async move {
        let Some((schema, batches)) = first else {
            return;
        };
        let mut writer = ResultWriter::new(format, column_infos(&schema), false, false, false, tz);
        let mut out = Vec::with_capacity(64 * 1024);
        writer.start(&mut out);
        let mut current = Some(batches);
        let mut next = 1;
        loop {
            let Some(batches) = current.take() else { break };
            for b in &batches {
                if let Err(e) = writer.write_batch(b, &mut out) {
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    return;
                }
                if out.len() >= 64 * 1024
                    && tx
                        .send(Ok(Bytes::from(std::mem::take(&mut out))))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            if next < wanted.len() {
                match store.read_page(&query_id, wanted[next]).await {
                    Ok((_, b)) => current = Some(b),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read result page; truncating");
                        let _ = tx.send(Err(std::io::Error::other(e))).await;
                        return;
                    }
                }
                next += 1;
            }
        }
        writer.finish(&mut out);
        let _ = tx.send(Ok(Bytes::from(out))).await;
    });
    let mut rx = rx;
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if let Some(name) = params.filename
        && let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
    {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}
