//! The SQL request log and the SQL query metrics: one record per SQL request, written when its
//! response has been written out.
//!
//! Every request to `POST /v2/sql` and to the async statement endpoints (`/v2/sql/statements`,
//! `/v2/sql/task`) whose body reads as a SQL request becomes a `SqlRequestLog`. Its response
//! body is wrapped in a `RecordedBody`, which counts the bytes handed to the connection and,
//! when the body is done (its last byte written, an error cut it short, or the client went
//! away), records the metrics ([`dolmen_metrics::Metrics::record_sql_query`]) and writes the
//! log line. A request whose body is not a SQL request at all (no Content-Type, malformed JSON,
//! an empty query) has no record, as in Druid, where such a request never reaches the SQL
//! layer.
//!
//! # The log line
//! On the `tracing` target [`REQUEST_LOG_TARGET`] (`dolmen::request`), level INFO; off unless
//! the log filter enables it (`DOLMEN_LOG=info,dolmen::request=info`, or
//! `DOLMEN_LOG=off,dolmen::request=info` for the request log alone). The message is Druid's SQL
//! request log line (`RequestLogLine.getSqlQueryLine`, as Druid's file request logger writes
//! it): tab-separated
//! 1. the request time, ISO 8601 UTC;
//! 2. the client's address;
//! 3. the query stats as JSON, the fields of Druid's `SqlExecutionReporter`: `sqlQuery/time`
//!    (ms), `sqlQuery/planningTimeMs` (ms; -1 when planning did not finish), `sqlQuery/bytes`
//!    (bytes of the response body written), `success`, `context`, and on failure `exception`
//!    (`<error class>: <message>`), plus `interrupted: true` and `reason` for a cancelled or
//!    timed-out query;
//! 4. the query as JSON: `{"query": <SQL text>, "context": <query context>}`, the context
//!    holding the `sqlQueryId`.
//!
//! The event also carries the fields `sql_query_id` and `success`.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::response::Response;
use dolmen_metrics::{Metrics, QueryOutcome, SqlEndpoint, SqlQueryReport};
use dolmen_query::QueryError;
use http_body::{Body as HttpBody, Frame, SizeHint};
use serde_json::{Map, Value, json};

/// The `tracing` target of the SQL request log.
pub const REQUEST_LOG_TARGET: &str = "dolmen::request";

/// The client's address, when the server was started with connection info (always, through
/// [`crate::serve`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RemoteAddr(pub(crate) Option<SocketAddr>);

impl<S: Send + Sync> FromRequestParts<S> for RemoteAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(RemoteAddr(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0),
        ))
    }
}

/// What planning found out: the datasources read and how long planning took.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// Datasources read (sorted), for the `dataSource` label.
    pub(crate) data_sources: Vec<String>,
    /// Planning time after the request was parsed (the parse time is added).
    pub(crate) planning: Duration,
}

/// Why a SQL request failed, as the log and the metrics tell it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) outcome: QueryOutcome,
    /// `<error class>: <message>` (Java's `Throwable.toString()`, as Druid logs it).
    pub(crate) exception: String,
}

impl Failure {
    /// The failure of a query error: cancelled is interrupted, past its timeout timed out,
    /// anything else failed.
    pub(crate) fn of_query(e: &QueryError) -> Failure {
        Failure {
            outcome: match e {
                QueryError::Cancelled(_) => QueryOutcome::Interrupted,
                QueryError::Timeout(_) => QueryOutcome::TimedOut,
                _ => QueryOutcome::Failed,
            },
            exception: format!("{}: {e}", e.error_class()),
        }
    }

    /// A failure with Druid's generic exception class.
    pub(crate) fn failed(message: &str) -> Failure {
        Failure {
            outcome: QueryOutcome::Failed,
            exception: format!("org.apache.druid.error.DruidException: {message}"),
        }
    }

    fn client_gone() -> Failure {
        Failure {
            outcome: QueryOutcome::Interrupted,
            exception: "org.apache.druid.query.QueryInterruptedException: the client closed the connection before the response was complete".into(),
        }
    }
}

/// One SQL request on its way to the request log and the metrics.
#[derive(Debug)]
pub(crate) struct SqlRequestLog {
    metrics: Metrics,
    endpoint: SqlEndpoint,
    started: Instant,
    started_ms: i64,
    remote: Option<SocketAddr>,
    /// The request's `sqlQueryId` (or the one generated for it).
    pub(crate) query_id: String,
    sql: String,
    context: Map<String, Value>,
    /// Set once planning finished (by the query task for `/v2/sql`).
    planned: Arc<OnceLock<Planned>>,
    /// Recorded already (a record is written once).
    finished: bool,
}

/// A request whose handler was dropped before it answered (the client went away while the
/// query was planned or ran) is recorded as interrupted, with no bytes written.
impl Drop for SqlRequestLog {
    fn drop(&mut self) {
        self.finish(0, Some(Failure::client_gone()));
    }
}

impl SqlRequestLog {
    /// A record for a request read at `started` (the handler's start).
    pub(crate) fn new(
        metrics: &Metrics,
        endpoint: SqlEndpoint,
        started: Instant,
        remote: RemoteAddr,
        q: &dolmen_query::SqlQuery,
    ) -> SqlRequestLog {
        let started_ms = dolmen_common::time::now_millis()
            - i64::try_from(started.elapsed().as_millis()).unwrap_or(0);
        SqlRequestLog {
            metrics: metrics.clone(),
            endpoint,
            started,
            started_ms,
            remote: remote.0,
            query_id: q
                .context_str("sqlQueryId")
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            sql: q.query.clone(),
            context: q.context.clone().unwrap_or_default(),
            planned: Arc::default(),
            finished: false,
        }
    }

    /// The query was read: its id and effective context.
    pub(crate) fn prepared(&mut self, p: &dolmen_query::PreparedQuery) {
        self.query_id = p.query_id.clone();
        self.context = p.context.clone();
    }

    /// Where planning reports what it found (see [`Planned`]).
    pub(crate) fn planned_slot(&self) -> Arc<OnceLock<Planned>> {
        Arc::clone(&self.planned)
    }

    /// Time since the request was read.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Wraps a response's body: the record is written when the body is done. `failure` is the
    /// request's failure when the response is an error; a success is one whose body was
    /// written to its end.
    pub(crate) fn attach(self, resp: Response, failure: Option<Failure>) -> Response {
        self.attach_streaming(resp, failure, None)
    }

    /// [`Self::attach`] for a streamed body whose stream error is told in `stream_error`.
    pub(crate) fn attach_streaming(
        self,
        resp: Response,
        failure: Option<Failure>,
        stream_error: Option<Arc<Mutex<Option<QueryError>>>>,
    ) -> Response {
        resp.map(|body| {
            Body::new(RecordedBody {
                inner: body,
                bytes: 0,
                done: false,
                failure,
                stream_error,
                log: Some(self),
            })
        })
    }

    /// Records the metrics and writes the log line, once.
    fn finish(&mut self, bytes: u64, failure: Option<Failure>) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let time = self.started.elapsed();
        let planned = self.planned.get();
        self.metrics.record_sql_query(&SqlQueryReport {
            endpoint: self.endpoint,
            data_sources: planned.map(|p| p.data_sources.as_slice()),
            time,
            planning: planned.map(|p| p.planning),
            bytes,
            outcome: failure
                .as_ref()
                .map_or(QueryOutcome::Success, |f| f.outcome),
        });
        if !tracing::enabled!(target: "dolmen::request", tracing::Level::INFO) {
            return;
        }
        let mut context = std::mem::take(&mut self.context);
        context.insert("sqlQueryId".into(), json!(self.query_id));
        let mut stats = json!({
            "sqlQuery/time": time.as_millis() as u64,
            "sqlQuery/planningTimeMs": planned.map_or(-1, |p| p.planning.as_millis() as i64),
            "sqlQuery/bytes": bytes,
            "success": failure.is_none(),
            "context": context,
        });
        if let Some(f) = &failure {
            stats["exception"] = json!(f.exception);
            if matches!(
                f.outcome,
                QueryOutcome::Interrupted | QueryOutcome::TimedOut
            ) {
                stats["interrupted"] = json!(true);
                stats["reason"] = json!(f.exception);
            }
        }
        let query = json!({"query": std::mem::take(&mut self.sql), "context": stats["context"]});
        let line = format!(
            "{}\t{}\t{}\t{}",
            dolmen_common::time::format_iso_millis(self.started_ms),
            self.remote.map(|a| a.ip().to_string()).unwrap_or_default(),
            stats,
            query
        );
        tracing::info!(
            target: "dolmen::request",
            sql_query_id = %self.query_id,
            success = failure.is_none(),
            "{line}"
        );
    }
}

/// A response body that counts the bytes written and finishes its [`SqlRequestLog`] once
/// done (see the module docs).
struct RecordedBody {
    inner: Body,
    bytes: u64,
    /// The body was read to its end.
    done: bool,
    failure: Option<Failure>,
    stream_error: Option<Arc<Mutex<Option<QueryError>>>>,
    log: Option<SqlRequestLog>,
}

impl HttpBody for RecordedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.bytes += data.len() as u64;
                }
                if this.inner.is_end_stream() {
                    this.done = true;
                }
            }
            Poll::Ready(Some(Err(e))) => {
                if this.failure.is_none() {
                    let told = this
                        .stream_error
                        .as_ref()
                        .and_then(|s| s.lock().expect("stream error lock").take());
                    this.failure = Some(match told {
                        Some(q) => Failure::of_query(&q),
                        None => Failure::failed(&e.to_string()),
                    });
                }
            }
            Poll::Ready(None) => this.done = true,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for RecordedBody {
    fn drop(&mut self) {
        let Some(mut log) = self.log.take() else {
            return;
        };
        let failure = match self.failure.take() {
            Some(f) => Some(f),
            None if self.done => None,
            None => Some(Failure::client_gone()),
        };
        log.finish(self.bytes, failure);
    }
}
