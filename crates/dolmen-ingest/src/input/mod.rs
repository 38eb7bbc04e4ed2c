//! Input sources (where bytes come from) and input formats (how bytes become rows).
//!
//! References: Druid docs, "Input sources"
//! (<https://druid.apache.org/docs/latest/ingestion/input-sources>) and "Source input formats"
//! (<https://druid.apache.org/docs/latest/ingestion/data-formats>).
//!
//! * [`InputSource`]: `local` (`baseDir` + `filter` wildcard, and/or explicit `files`),
//!   `inline` (`data`), `http` (allow-listed URLs), `s3` (objects by URI, prefix or
//!   bucket/path), `druid` (the visible segments of an existing datasource) and `combining`
//!   (several sources in order). [`InputSource::entities_in`] lists the [`InputEntity`]s to
//!   read within an [`InputContext`] (the task's metadata store, deep storage and runtime);
//!   byte entities transparently gunzip gzip content; [`open_rows`] reads any entity as rows.
//!   Server-side settings (the URL allow-list, S3 defaults) are an [`InputSourceConfig`] set
//!   once per process with [`set_input_source_config`].
//! * [`InputFormat`]: `json` (newline-delimited), `csv`, `tsv` and `parquet`.
//!   [`InputFormat::reader`] streams [`InputRow`]s from one entity: a malformed row yields a
//!   [`RowParseError`] and reading continues; an I/O failure yields one *fatal* error and ends the
//!   stream.
//!
//! Rows are JSON objects with field order preserved. Values keep their JSON type (JSON input),
//! are strings (CSV/TSV, unless `tryParseNumbers`) or are converted from Parquet/Arrow types
//! (integers and floats → numbers, timestamps and dates → epoch millis, lists → arrays,
//! structs and maps → objects, binary → string with `binaryAsString`, else base64).
//!
//! `flattenSpec` (JSON and Parquet) supports `root`, `path` (JSONPath subset: `$`, `.name`,
//! `['name']`, `[n]`, `[-n]`, `[*]`), `jq` (`.name`, `.["name"]`, `[n]`) and `tree` fields plus
//! `useFieldDiscovery`. JSON `featureSpec`, `assumeNewlineDelimited` and `useJsonNodeReader` are
//! accepted and ignored: batch JSON input is always read line by line, as Druid does for batch
//! ingestion.

mod avro;
pub mod config;
mod context;
mod delimited;
pub mod druid;
mod flatten;
mod format;
pub mod http;
mod json;
mod parquet;
pub mod ranges;
mod remote;
pub mod s3;
mod source;
pub mod thread_exec;

use std::fmt;

use serde_json::Value;

pub use config::{InputSourceConfig, input_source_config, set_input_source_config};
pub use context::{InputContext, SegmentAccess};
pub use flatten::FlattenSpec;
pub use format::{DEFAULT_LIST_DELIMITER, InputFormat, RowReader};
pub use json::parse_json_line;
pub use remote::{PasswordProvider, RemoteObject};
pub use source::{INPUT_SOURCE_PATH, InputEntity, InputSource, open_rows};

/// One input row: column name → raw value, in input order.
pub type InputRow = serde_json::Map<String, Value>;

/// A row that could not be parsed (Druid counts these as "unparseable").
#[derive(Debug, Clone, PartialEq)]
pub struct RowParseError {
    /// What went wrong, naming the entity and line or row number.
    pub message: String,
    /// The raw input (the line, for text formats), when available.
    pub raw: Option<String>,
    /// True when the underlying entity could not be read further (I/O or decompression error).
    /// The reader yields nothing after a fatal error; Druid fails the task in that case.
    pub fatal: bool,
}

impl RowParseError {
    pub(crate) fn row(message: String, raw: Option<String>) -> Self {
        Self {
            message,
            raw,
            fatal: false,
        }
    }

    pub(crate) fn fatal(message: String) -> Self {
        Self {
            message,
            raw: None,
            fatal: true,
        }
    }
}

impl fmt::Display for RowParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RowParseError {}

/// Errors that prevent reading an input source or entity at all.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The spec is invalid; the message names the offending field.
    #[error("invalid input spec: {0}")]
    InvalidSpec(String),
    /// `baseDir` does not exist.
    #[error("baseDir [{0}] does not exist")]
    BaseDirNotFound(String),
    /// `baseDir` is not a directory.
    #[error("baseDir [{0}] is not a directory")]
    NotADirectory(String),
    /// An entry of `files` does not exist or is not a file.
    #[error("file [{0}] does not exist or is not a regular file")]
    FileNotFound(String),
    /// Nothing to read.
    #[error("no files found in baseDir [{base_dir}] matching filter [{filter}]")]
    NoFilesMatched {
        /// The `baseDir` (or `<none>`).
        base_dir: String,
        /// The effective `filter`.
        filter: String,
    },
    /// An I/O error on a named path.
    #[error("cannot read [{path}]: {source}")]
    Io {
        /// The path being read.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Parquet file could not be opened.
    #[error("cannot read parquet file [{path}]: {message}")]
    Parquet {
        /// The file.
        path: String,
        /// The cause.
        message: String,
    },
}

/// The `inputFormat` assumed when a spec gives none (newline-delimited JSON). Only sources
/// that need no format (`druid`) may omit it; [`validate_io_config`] enforces that.
pub fn absent_input_format() -> InputFormat {
    InputFormat::Json {
        flatten_spec: None,
        feature_spec: None,
        keep_null_columns: None,
        assume_newline_delimited: None,
        use_json_node_reader: None,
    }
}

/// Submission-time checks of `ioConfig`: the input source under the process-wide settings
/// (no I/O), and the presence of `inputFormat` when the source needs one.
///
/// # Errors
/// [`crate::IngestError::InvalidSpec`] naming the field, e.g.
/// `spec.ioConfig.inputSource.uris[0]: host [10.0.0.1:80] is not in the allow-list ...`.
pub fn validate_io_config(
    source: &InputSource,
    input_format_given: bool,
) -> Result<(), crate::IngestError> {
    let invalid = |m: String| crate::IngestError::InvalidSpec(m);
    match source.validate() {
        Err(InputError::InvalidSpec(m)) => return Err(invalid(m)),
        Err(e) => return Err(invalid(format!("{INPUT_SOURCE_PATH}: {e}"))),
        Ok(()) => {}
    }
    if !input_format_given && source.needs_input_format() {
        return Err(invalid(
            "spec.ioConfig.inputFormat: missing field `inputFormat` (only the druid input source reads without one)".to_string(),
        ));
    }
    Ok(())
}

/// Whether Druid's schema discovery would report this value's column as a dimension: nested
/// objects and lists of non-primitives are not discovered, nor are nulls unless
/// `keepNullColumns` (Druid's `JSONFlattenerMaker.discoverRootFields`).
pub fn is_discoverable(value: &Value, keep_null_columns: bool) -> bool {
    match value {
        Value::Null => keep_null_columns,
        Value::Object(_) => false,
        Value::Array(items) => items
            .iter()
            .all(|v| !matches!(v, Value::Array(_) | Value::Object(_))),
        _ => true,
    }
}

/// Columns of `row` that schema discovery would report, in row order (see [`is_discoverable`]).
pub fn discoverable_columns(row: &InputRow, keep_null_columns: bool) -> impl Iterator<Item = &str> {
    row.iter()
        .filter(move |(_, v)| is_discoverable(v, keep_null_columns))
        .map(|(k, _)| k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn discovery_rules() {
        let Value::Object(row) =
            json!({"a": 1, "b": null, "c": {"x": 1}, "d": [1, 2], "e": [{"x": 1}], "f": "s"})
        else {
            unreachable!()
        };
        assert_eq!(
            discoverable_columns(&row, false).collect::<Vec<_>>(),
            vec!["a", "d", "f"]
        );
        assert_eq!(
            discoverable_columns(&row, true).collect::<Vec<_>>(),
            vec!["a", "b", "d", "f"]
        );
        let e = RowParseError::row("bad".into(), None);
        assert_eq!(e.to_string(), "bad");
        assert!(!e.fatal);
    }
}
