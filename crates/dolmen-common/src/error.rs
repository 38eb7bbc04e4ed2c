//! Error categories, as Druid's `DruidException.Category`
//! (`processing/src/main/java/org/apache/druid/error/DruidException.java`).
//!
//! Each crate has its own error enum; each variant maps to one [`ErrorCategory`], and the HTTP
//! layer maps categories to statuses in exactly one place.

use serde::Serialize;

/// Classification of an error, which fixes the HTTP status it is reported with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCategory {
    /// A should-not-happen condition inside Dolmen (500).
    Defensive,
    /// The request is wrong: bad JSON, bad SQL, bad field (400).
    InvalidInput,
    /// No credentials or bad credentials (401).
    Unauthorized,
    /// The identity may not do this (403).
    Forbidden,
    /// The named thing does not exist (404).
    NotFound,
    /// The request conflicts with current state (409).
    Conflict,
    /// A limit was reached (429).
    CapacityExceeded,
    /// The work was cancelled (500, as Druid).
    Canceled,
    /// The work failed while running (500).
    RuntimeFailure,
    /// A dependency is not available (503).
    ServiceUnavailable,
    /// The work took too long (504).
    Timeout,
    /// Not supported (501).
    Unsupported,
    /// Anything else (500).
    Uncategorized,
}

impl ErrorCategory {
    /// The HTTP status code of this category (Druid's mapping).
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCategory::InvalidInput => 400,
            ErrorCategory::Unauthorized => 401,
            ErrorCategory::Forbidden => 403,
            ErrorCategory::NotFound => 404,
            ErrorCategory::Conflict => 409,
            ErrorCategory::CapacityExceeded => 429,
            ErrorCategory::ServiceUnavailable => 503,
            ErrorCategory::Timeout => 504,
            ErrorCategory::Unsupported => 501,
            ErrorCategory::Defensive
            | ErrorCategory::Canceled
            | ErrorCategory::RuntimeFailure
            | ErrorCategory::Uncategorized => 500,
        }
    }

    /// The Druid `errorCode` conventionally used with this category.
    pub fn error_code(self) -> &'static str {
        match self {
            ErrorCategory::InvalidInput => "invalidInput",
            ErrorCategory::NotFound => "notFound",
            ErrorCategory::Forbidden => "forbidden",
            ErrorCategory::Conflict => "entryAlreadyExists",
            ErrorCategory::Unsupported => "notYetImplemented",
            _ => "internalServerError",
        }
    }
}
