//! Dolmen ingestion: spec types, input sources and formats, parsing, transforms, filters,
//! rollup, and the native batch tasks (`index_parallel`, `index`).
//!
//! Flow of a batch task ([`task::run_index_task`]): the input source lists entities (files,
//! inline data); the input format turns each into rows ([`input::InputRow`]); the timestamp spec
//! gives `__time`; transforms add or replace fields; the filter and `granularitySpec.intervals`
//! throw rows away; dimensions and metrics are extracted; the [`index::Indexer`] rolls rows up
//! in memory, spills sorted runs when `maxRowsInMemory` is reached, and merges them into
//! Parquet segment files per time chunk; the files are pushed to deep storage and published in
//! one metadata transaction.

pub mod columnar;
pub mod expr;
pub mod filter;
pub mod index;
pub mod input;
mod memory_pool;
pub mod partition;
pub mod rows;
pub mod spec;
pub mod task;
pub mod timestamp;

pub use spec::IndexTaskSpec;
pub use task::{IndexTaskEnv, RowStats, push_and_publish, run_index_task};

use dolmen_common::ErrorCategory;

/// Name of the time column.
pub const TIME_COLUMN: &str = dolmen_segment::TIME_COLUMN;

/// Why an ingestion spec was rejected or a task failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IngestError {
    /// The spec is invalid; the message names the field.
    #[error("{0}")]
    InvalidSpec(String),
    /// Too many unparseable rows.
    #[error("{0}")]
    ParseExceptions(String),
    /// The task was shut down.
    #[error("task was shut down before it completed")]
    Canceled,
    /// Reading, writing or publishing failed.
    #[error("{0}")]
    Runtime(String),
}

impl IngestError {
    /// The error category.
    pub fn category(&self) -> ErrorCategory {
        match self {
            IngestError::InvalidSpec(_) => ErrorCategory::InvalidInput,
            IngestError::Canceled => ErrorCategory::Canceled,
            _ => ErrorCategory::RuntimeFailure,
        }
    }
}
