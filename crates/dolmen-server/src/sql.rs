//! `POST /v2/sql`: the synchronous SQL endpoint (spec "SQL"; reference-behaviour "SQL API").
//!
//! Request handling follows Druid's `SqlQuery.java`: JSON, `text/plain` or form-urlencoded
//! bodies (the latter two carry only the SQL text and always answer `object` with no header);
//! a missing Content-Type is 400, another type 415, an empty body 400 "Empty query", bad JSON
//! 400 "Malformed SQL query wrapped in JSON: ...".
//!
//! The response streams in pieces of about 64 KiB: the first piece is computed before the
//! status line is sent, so an error at planning or in the first 64 KiB of results is a proper
//! JSON error; an error after streaming began aborts the connection, leaving a body without
//! its final newline (the spec's truncation rule). An answer that fits in one piece is sent
//! whole, with a `Content-Length` (no chunked framing).
//!
//! Every running query is registered under its `sqlQueryId` ([`RunningQueries`]);
//! `DELETE /v2/sql/{sqlQueryId}` cancels all of them (ids need not be unique): their execution
//! is dropped at once, which stops DataFusion's work, and their clients get "Query cancelled"
//! (or a truncated body when streaming had begun). The context `timeout` (ms) ends a query the
//! same way with "Query timeout" (504).
//!
//! Every request that reads as a SQL query is measured and logged once its response is
//! written ([`crate::request_log`]): the query metrics (`query/*`, `sqlQuery/*`) and a line of
//! the SQL request log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dolmen_query::writer::{ResultWriter, column_infos};
use dolmen_query::{PreparedQuery, QueryError, SqlQuery};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::error::SqlError;
use crate::request_log::{Failure, Planned, RemoteAddr, SqlRequestLog};

/// A request that cannot become a query: its status (400 or 415) and the error.
#[derive(Debug)]
pub(crate) struct RequestError {
    pub(crate) status: StatusCode,
    pub(crate) error: QueryError,
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)
    }
}

impl From<QueryError> for RequestError {
    fn from(error: QueryError) -> Self {
        RequestError {
            status: StatusCode::BAD_REQUEST,
            error,
        }
    }
}

/// The synchronous queries now running, by `sqlQueryId`.
#[derive(Debug, Default)]
pub struct RunningQueries {
    next: std::sync::atomic::AtomicU64,
    by_id: Mutex<HashMap<String, Vec<RunningQuery>>>,
}

/// One running query: its number, cancellation token, and the resources it uses (empty with
/// security off).
type RunningQuery = (u64, CancellationToken, Arc<[dolmen_auth::ResourceAction]>);

impl RunningQueries {
    /// Registers a query using `resources`; it stays registered until the returned guard is
    /// dropped.
    fn register(
        self: &Arc<Self>,
        id: &str,
        resources: Vec<dolmen_auth::ResourceAction>,
    ) -> (CancellationToken, Registration) {
        let token = CancellationToken::new();
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.by_id
            .lock()
            .expect("running queries lock")
            .entry(id.to_string())
            .or_default()
            .push((n, token.clone(), resources.into()));
        (
            token,
            Registration {
                queries: Arc::clone(self),
                id: id.to_string(),
                n,
            },
        )
    }

    /// Cancels every running query with `id`; how many there were.
    pub fn cancel(&self, id: &str) -> usize {
        let map = self.by_id.lock().expect("running queries lock");
        let Some(list) = map.get(id) else { return 0 };
        for (_, t, _) in list {
            t.cancel();
        }
        list.len()
    }

    /// The resources used by the running queries with `id` (each once); `None` when none runs.
    pub fn resources(&self, id: &str) -> Option<Vec<dolmen_auth::ResourceAction>> {
        let map = self.by_id.lock().expect("running queries lock");
        let list = map.get(id)?;
        let mut out: Vec<dolmen_auth::ResourceAction> = Vec::new();
        for (_, _, r) in list {
            for ra in r.iter() {
                if !out.contains(ra) {
                    out.push(ra.clone());
                }
            }
        }
        Some(out)
    }
}

/// Removes a query from [`RunningQueries`] when dropped.
#[derive(Debug)]
struct Registration {
    queries: Arc<RunningQueries>,
    id: String,
    n: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = self.queries.by_id.lock().expect("running queries lock");
        if let Some(list) = map.get_mut(&self.id) {
            list.retain(|(n, _, _)| *n != self.n);
            if list.is_empty() {
                map.remove(&self.id);
            }
        }
    }
}

/// `DELETE /v2/sql/{sqlQueryId}`: 202 with an empty body when queries with that id were
/// running (all are cancelled), 404 when none is (unknown id, or already finished).
pub(crate) async fn cancel_sql(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Response {
    if state.queries.cancel(&id) > 0 {
        tracing::info!(sql_query_id = %id, "sql query cancelled");
        StatusCode::ACCEPTED.into_response()
    } else {
        let mut r = axum::Json(serde_json::json!({
            "error": "Query not found",
            "errorMessage": format!("No running query has sqlQueryId [{id}]"),
        }))
        .into_response();
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    }
}

/// Reads the SQL request from the body according to its Content-Type.
pub(crate) fn parse_request(headers: &HeaderMap, body: &Bytes) -> Result<SqlQuery, RequestError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    let Some(ct) = ct else {
        return Err(RequestError::from(QueryError::InvalidInput(
            "Missing Content-Type header".into(),
        )));
    };
    match ct.as_str() {
        "application/json" => {
            if body.iter().all(u8::is_ascii_whitespace) {
                return Err(RequestError::from(QueryError::InvalidInput(
                    "Empty query".into(),
                )));
            }
            let q: SqlQuery = serde_json::from_slice(body).map_err(|e| {
                QueryError::InvalidInput(format!("Malformed SQL query wrapped in JSON: {e}"))
            })?;
            if (q.types_header || q.sql_types_header) && !q.header {
                let which = if q.types_header {
                    "typesHeader"
                } else {
                    "sqlTypesHeader"
                };
                return Err(RequestError::from(QueryError::InvalidInput(format!(
                    "Cannot include '{which}' without 'header'"
                ))));
            }
            Ok(q)
        }
        "text/plain" | "application/x-www-form-urlencoded" => {
            let text = std::str::from_utf8(body)
                .map_err(|_| QueryError::InvalidInput("the query is not valid UTF-8".into()))?;
            let text = if ct == "text/plain" {
                text.to_string()
            } else {
                form_decode(text)
            };
            if text.trim().is_empty() {
                return Err(RequestError::from(QueryError::InvalidInput(
                    "Empty query".into(),
                )));
            }
            Ok(SqlQuery {
                query: text,
                ..Default::default()
            })
        }
        other => Err(RequestError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            error: QueryError::InvalidInput(format!(
                "Unsupported Content-Type: {other}. Only application/json, text/plain or application/x-www-form-urlencoded is supported."
            )),
        }),
    }
}

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space, `%XX` a byte; invalid
/// escapes are kept as they are).
fn form_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// `POST /v2/sql`.
///
/// Planning, execution and result encoding run on the query runtime (a thread pool separate
/// from the HTTP reactor); encoded chunks come back over a bounded channel. When the client
/// goes away the channel closes, the query task stops, and dropping its stream stops
/// DataFusion's work.
pub(crate) async fn post_sql(
    State(state): State<Arc<AppState>>,
    remote: RemoteAddr,
    access: Option<axum::Extension<dolmen_query::system::SystemTableAccess>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let host = state.host_port();
    let q = match parse_request(&headers, &body) {
        Ok(q) => q,
        Err(RequestError { status, error }) => {
            let mut r = SqlError { error, host }.into_response();
            *r.status_mut() = status;
            return r;
        }
    };
    let mut log = SqlRequestLog::new(
        &state.metrics,
        dolmen_metrics::SqlEndpoint::Sync,
        started,
        remote,
        &q,
    );
    let failed = |log: SqlRequestLog, error: QueryError, host: String| {
        let failure = Failure::of_query(&error);
        let id = log.query_id.clone();
        log.attach(
            with_query_id(SqlError { error, host }.into_response(), &id),
            Some(failure),
        )
    };
    let mut prepared = match state.engine.prepare(&q) {
        Ok(p) => p,
        Err(error) => return failed(log, error, host),
    };
    // With security on: which rows of system tables this user sees (set by the SQL guard).
    prepared.system_table_access = access.map(|a| a.0);
    log.prepared(&prepared);
    if let Some(dml) = prepared.dml() {
        let error = QueryError::InvalidInput(format!(
            "{} operations are not supported by the synchronous SQL endpoint; submit the statement to /druid/v2/sql/task or to /druid/v2/sql/statements with context executionMode ASYNC",
            dml.kind.operation()
        ));
        return failed(log, error, host);
    }
    let query_id = prepared.query_id.clone();
    let format = q.result_format.unwrap_or_default();
    let header = q.header;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Chunk, QueryError>>(4);
    let engine = Arc::clone(&state.engine);
    // With security on, what the query uses (cached since the check): cancelling it needs READ
    // on each (spec).
    let resources = match &state.security {
        None => Vec::new(),
        Some(security) => match state.engine.resources_of(&prepared).await {
            Ok(r) => crate::security::sql_resource_actions(
                &r,
                security.authorize_system_tables_directly(),
            )
            .into_iter()
            .map(|mut ra| {
                ra.action = dolmen_auth::Action::Read;
                ra
            })
            .collect(),
            Err(error) => return failed(log, error, host),
        },
    };
    let (cancel, registration) = state.queries.register(&query_id, resources);
    let planned = Planning {
        slot: log.planned_slot(),
        before: log.elapsed(),
    };
    state.query_runtime.spawn(supervise(
        engine,
        q,
        prepared,
        tx,
        cancel,
        registration,
        planned,
    ));
    // The first message decides the status: an error before any byte is a JSON error.
    let first = match rx.recv().await {
        // The whole answer in one piece: a plain body with its length, no chunked framing.
        Some(Ok(Chunk { bytes, last: true })) => {
            let resp = with_query_id(
                response_head(Response::new(Body::from(bytes)), format, header),
                &query_id,
            );
            return log.attach(resp, None);
        }
        Some(Ok(Chunk { bytes, last: false })) => bytes,
        Some(Err(error)) => return failed(log, error, host),
        None => {
            let error = QueryError::Execution("the query task ended without a result".into());
            return failed(log, error, host);
        }
    };
    let stream_error: Arc<Mutex<Option<QueryError>>> = Arc::default();
    let told = Arc::clone(&stream_error);
    let rest = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(move |item| {
        item.map(|c| c.bytes).map_err(|e| {
            tracing::warn!(error = %e, "sql query failed while streaming; truncating the response");
            let io = std::io::Error::other(e.to_string());
            *told.lock().expect("stream error lock") = Some(e);
            io
        })
    });
    let head = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(first) });
    let resp = Response::new(Body::from_stream(head.chain(rest)));
    log.attach_streaming(
        with_query_id(response_head(resp, format, header), &query_id),
        None,
        Some(stream_error),
    )
}

/// Where the query task reports planning (see [`crate::request_log::Planned`]): the slot and
/// the time already spent reading the request before the task started.
struct Planning {
    slot: Arc<OnceLock<Planned>>,
    before: Duration,
}

/// Sets the headers of a successful answer: its Content-Type, and
/// `X-Service-SQL-Header-Included: yes` when the request asked for a header.
fn response_head(
    mut resp: Response,
    format: dolmen_query::writer::ResultFormat,
    header: bool,
) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if header {
        h.insert(
            "X-Service-SQL-Header-Included",
            HeaderValue::from_static("yes"),
        );
    }
    resp
}

/// Encoded result bytes on their way from the query task to the HTTP response.
struct Chunk {
    bytes: Bytes,
    /// The final piece: the answer ends with these bytes.
    last: bool,
}

/// Encoded bytes are sent on once this many are buffered (and at the end): small answers
/// leave in one piece, large ones stream in pieces of about this size (bytes).
const SEND_BYTES: usize = 64 * 1024;

/// Runs a query until it ends, is cancelled, passes its `timeout`, or its client goes away; all
/// but the first drop the execution (stopping its work), cancel and timeout send their error.
async fn supervise(
    engine: Arc<dolmen_query::QueryEngine>,
    q: SqlQuery,
    prepared: PreparedQuery,
    tx: tokio::sync::mpsc::Sender<Result<Chunk, QueryError>>,
    cancel: CancellationToken,
    registration: Registration,
    planned: Planning,
) {
    let id = prepared.query_id.clone();
    let deadline = prepared.timeout;
    let timeout = async {
        match deadline {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let gone = tx.clone();
    let stopped = tokio::select! {
        () = run_query(engine, q, prepared, tx.clone(), planned) => None,
        // The client went away (the handler, and with it the receiver, was dropped): stop the
        // work even while no batch is ready to send (an aggregate over a long scan).
        () = gone.closed() => None,
        () = cancel.cancelled() => Some(QueryError::Cancelled(format!("Query [{id}] was cancelled"))),
        () = timeout => Some(QueryError::Timeout(format!("Query [{id}] timed out"))),
    };
    drop(registration);
    if let Some(e) = stopped {
        tracing::info!(sql_query_id = %id, error = %e, "sql query stopped");
        let _ = tx.send(Err(e)).await;
    }
}

/// Druid's `sqlStringifyArrays` context parameter (`QueryContexts.getAsBoolean`: a boolean or
/// its text; default true): whether result writers print arrays as JSON text strings.
fn stringify_arrays(context: &serde_json::Map<String, serde_json::Value>) -> bool {
    match context.get("sqlStringifyArrays") {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(s)) => !s.trim().eq_ignore_ascii_case("false"),
        _ => true,
    }
}

/// Plans and runs a query, sending encoded chunks of about [`SEND_BYTES`]: the first carries
/// the opening bytes and the first batches (computed before the HTTP status is sent), the
/// last (marked so) the closing bytes. Stops as soon as the receiver is gone.
async fn run_query(
    engine: Arc<dolmen_query::QueryEngine>,
    q: SqlQuery,
    prepared: PreparedQuery,
    tx: tokio::sync::mpsc::Sender<Result<Chunk, QueryError>>,
    planned: Planning,
) {
    let result = match engine.execute_prepared(&prepared).await {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    let _ = planned.slot.set(Planned {
        data_sources: result.data_sources.clone(),
        planning: planned.before + result.planning,
    });
    let mut stream = result.stream;
    let mut writer = ResultWriter::new(
        q.result_format.unwrap_or_default(),
        column_infos(&result.schema),
        q.header,
        q.types_header,
        q.sql_types_header,
        result.time_zone,
    )
    .with_stringify_arrays(stringify_arrays(&prepared.context));
    let mut out = Vec::with_capacity(4096);
    writer.start(&mut out);
    loop {
        match stream.next().await {
            None => {
                writer.finish(&mut out);
                let last = Chunk {
                    bytes: Bytes::from(out),
                    last: true,
                };
                let _ = tx.send(Ok(last)).await;
                return;
            }
            Some(Err(e)) => {
                let _ = tx.send(Err(QueryError::from_datafusion(e, false))).await;
                return;
            }
            Some(Ok(batch)) => {
                if let Err(e) = writer.write_batch(&batch, &mut out) {
                    let _ = tx.send(Err(QueryError::Execution(e.to_string()))).await;
                    return;
                }
                if out.len() < SEND_BYTES {
                    // Buffering: still stop as soon as the client is gone.
                    if tx.is_closed() {
                        return;
                    }
                    continue;
                }
                let chunk = Chunk {
                    bytes: Bytes::from(std::mem::replace(&mut out, Vec::with_capacity(SEND_BYTES))),
                    last: false,
                };
                if tx.send(Ok(chunk)).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn with_query_id(mut r: Response, id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert("X-Service-SQL-Query-Id", v.clone());
        r.headers_mut().insert("X-Service-Query-Id", v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_bodies_decode() {
        assert_eq!(form_decode("SELECT+1%2C2"), "SELECT 1,2");
        assert_eq!(form_decode("100%"), "100%");
        assert_eq!(form_decode("%zz"), "%zz");
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert!(
            parse_request(&h, &Bytes::from_static(b"{}"))
                .unwrap_err()
                .to_string()
                .contains("Missing Content-Type")
        );
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        assert!(
            parse_request(&h, &Bytes::from_static(b"x"))
                .unwrap_err()
                .to_string()
                .starts_with("Unsupported Content-Type")
        );
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        assert_eq!(
            parse_request(&h, &Bytes::from_static(b"  "))
                .unwrap_err()
                .to_string(),
            "Empty query"
        );
        assert!(
            parse_request(&h, &Bytes::from_static(b"{bad"))
                .unwrap_err()
                .to_string()
                .starts_with("Malformed SQL query wrapped in JSON")
        );
        assert!(
            parse_request(
                &h,
                &Bytes::from_static(br#"{"query":"SELECT 1","typesHeader":true}"#)
            )
            .unwrap_err()
            .to_string()
            .contains("Cannot include 'typesHeader' without 'header'")
        );
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        assert_eq!(
            parse_request(&h, &Bytes::from_static(b"SELECT 1"))
                .unwrap()
                .query,
            "SELECT 1"
        );
    }
}
