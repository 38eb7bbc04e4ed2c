//! `POST /v2/sql`: the synchronous SQL endpoint (spec "SQL"; reference-behaviour "SQL API").
//!
//! Request handling follows Druid's `SqlQuery.java`: JSON, `text/plain` or form-urlencoded
//! bodies (the latter two carry only the SQL text and always answer `object` with no header);
//! a missing Content-Type is 400, another type 415, an empty body 400 "Empty query", bad JSON
//! 400 "Malformed SQL query wrapped in JSON: ...".
//!
//! The response streams: the first batch is computed before the status line is sent, so an
//! error at planning or at the start of execution is a proper JSON error; an error after
//! streaming began aborts the connection, leaving a body without its final newline
//! (the spec's truncation rule).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dolmen_query::writer::{ResultWriter, column_infos};
use dolmen_query::{QueryError, SqlQuery};
use futures::StreamExt;

use crate::AppState;
use crate::error::SqlError;

/// Reads the SQL request from the body according to its Content-Type.
fn parse_request(headers: &HeaderMap, body: &Bytes) -> Result<SqlQuery, QueryError> {
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
        return Err(QueryError::InvalidInput(
            "Missing Content-Type header".into(),
        ));
    };
    match ct.as_str() {
        "application/json" => {
            if body.iter().all(u8::is_ascii_whitespace) {
                return Err(QueryError::InvalidInput("Empty query".into()));
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
                return Err(QueryError::InvalidInput(format!(
                    "Cannot include '{which}' without 'header'"
                )));
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
                return Err(QueryError::InvalidInput("Empty query".into()));
            }
            Ok(SqlQuery {
                query: text,
                ..Default::default()
            })
        }
        other => Err(QueryError::InvalidInput(format!(
            "Unsupported Content-Type: {other}. Only application/json, text/plain or application/x-www-form-urlencoded is supported."
        ))),
    }
}

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space, `%XX` a byte).
fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(
                    std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                    16,
                ) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `POST /v2/sql`.
pub(crate) async fn post_sql(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let host = state.host_port();
    let q = match parse_request(&headers, &body) {
        Ok(q) => q,
        Err(e) => {
            let status = if e.to_string().starts_with("Unsupported Content-Type") {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            } else {
                StatusCode::BAD_REQUEST
            };
            let mut r = SqlError { error: e, host }.into_response();
            *r.status_mut() = status;
            return r;
        }
    };
    let query_id = q
        .context_str("sqlQueryId")
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let format = q.result_format.unwrap_or_default();
    let result = match state.engine.execute(&q).await {
        Ok(r) => r,
        Err(e) => return with_query_id(SqlError { error: e, host }.into_response(), &query_id),
    };
    let mut stream = result.stream;
    let mut writer = ResultWriter::new(
        format,
        column_infos(&result.schema),
        q.header,
        q.types_header,
        q.sql_types_header,
        result.time_zone,
    );
    // Compute the first batch before committing to 200.
    let mut first = Vec::with_capacity(4096);
    writer.start(&mut first);
    let mut done = false;
    match stream.next().await {
        None => {
            writer.finish(&mut first);
            done = true;
        }
        Some(Err(e)) => {
            return with_query_id(
                SqlError {
                    error: QueryError::from_datafusion(e, false),
                    host,
                }
                .into_response(),
                &query_id,
            );
        }
        Some(Ok(batch)) => {
            if let Err(e) = writer.write_batch(&batch, &mut first) {
                return with_query_id(
                    SqlError {
                        error: QueryError::Execution(e.to_string()),
                        host,
                    }
                    .into_response(),
                    &query_id,
                );
            }
        }
    }
    let body = if done {
        Body::from(first)
    } else {
        let rest = futures::stream::unfold(
            (stream, writer, false),
            |(mut stream, mut writer, finished)| async move {
                if finished {
                    return None;
                }
                match stream.next().await {
                    None => {
                        let mut out = Vec::new();
                        writer.finish(&mut out);
                        Some((Ok(Bytes::from(out)), (stream, writer, true)))
                    }
                    Some(Ok(batch)) => {
                        let mut out = Vec::with_capacity(batch.num_rows() * 64);
                        match writer.write_batch(&batch, &mut out) {
                            Ok(()) => Some((Ok(Bytes::from(out)), (stream, writer, false))),
                            Err(e) => Some((
                                Err(std::io::Error::other(e.to_string())),
                                (stream, writer, true),
                            )),
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "sql query failed while streaming; truncating the response");
                        Some((
                            Err(std::io::Error::other(e.to_string())),
                            (stream, writer, true),
                        ))
                    }
                }
            },
        );
        let head =
            futures::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(first)) });
        Body::from_stream(head.chain(rest))
    };
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if q.header {
        h.insert(
            "X-Service-SQL-Header-Included",
            HeaderValue::from_static("yes"),
        );
    }
    with_query_id(resp, &query_id)
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
