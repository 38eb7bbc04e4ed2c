//! API errors and their one mapping to HTTP statuses and JSON shapes.
//!
//! Two shapes exist (spec "Errors"): overlord/coordinator resources answer `{"error": msg}`;
//! the synchronous SQL endpoint answers `{error, errorMessage, errorClass, host}` with Druid's
//! legacy `error` codes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use dolmen_query::QueryError;
use serde_json::json;

/// An error of an overlord or coordinator route: `{"error": message}` with a status.
#[derive(Debug)]
pub struct ResourceError {
    /// HTTP status.
    pub status: StatusCode,
    /// Message naming the problem.
    pub message: String,
}

impl ResourceError {
    /// An error with a status and message.
    pub fn new(status: u16, message: impl Into<String>) -> ResourceError {
        ResourceError {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            message: message.into(),
        }
    }
}

impl From<dolmen_overlord::OverlordError> for ResourceError {
    fn from(e: dolmen_overlord::OverlordError) -> Self {
        ResourceError::new(e.category().http_status(), e.to_string())
    }
}

impl From<dolmen_metadata::MetadataError> for ResourceError {
    fn from(e: dolmen_metadata::MetadataError) -> Self {
        ResourceError::new(e.category().http_status(), e.to_string())
    }
}

impl From<dolmen_lookup::LookupError> for ResourceError {
    fn from(e: dolmen_lookup::LookupError) -> Self {
        ResourceError::new(e.category().http_status(), e.to_string())
    }
}

impl From<dolmen_storage::StorageError> for ResourceError {
    fn from(e: dolmen_storage::StorageError) -> Self {
        ResourceError::new(e.category().http_status(), e.to_string())
    }
}

impl IntoResponse for ResourceError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, error = %self.message, "request failed");
        }
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

/// An error of the synchronous SQL endpoint.
#[derive(Debug)]
pub struct SqlError {
    /// The failure.
    pub error: QueryError,
    /// Host name reported in the body.
    pub host: String,
}

impl IntoResponse for SqlError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.error.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        match self.error {
            // The client's or operator's doing, not a server failure.
            QueryError::Cancelled(_) | QueryError::Timeout(_) => {
                tracing::info!(error = %self.error, "sql query stopped");
            }
            _ if status.is_server_error() => {
                tracing::error!(error = %self.error, "sql query failed")
            }
            _ => {}
        }
        let body = json!({
            "error": self.error.error_code(),
            "errorMessage": self.error.to_string(),
            "errorClass": self.error.error_class(),
            "host": self.host,
        });
        (status, Json(body)).into_response()
    }
}
