//! Deep storage, the segment cache, and the live view of every datasource's timeline.
//!
//! - [`DeepStorage`] is the durable home of segment files, through `object_store` (a local
//!   directory by default, or a bucket of an S3-compatible store).
//! - [`SegmentCache`] keeps local copies of segments that queries read (Druid's historical
//!   segment cache), fetched from deep storage on first use and hard-linked when deep storage
//!   is a local directory on the same filesystem.
//! - [`SegmentView`] holds one [`Timeline`](dolmen_segment::Timeline) snapshot per datasource,
//!   rebuilt from the metadata store after every publish and on a timer; queries plan against
//!   a snapshot, so a publish swaps what they see atomically. It also holds the [`Hydrant`]s of
//!   running streaming tasks (realtime data queryable before handoff): a
//!   [`DataSourceSnapshot`] pairs a timeline with the visible hydrants, and
//!   [`SegmentView::handoff`] swaps a sink's hydrants for its published segments atomically.

mod cache;
mod deep;
mod view;

pub use cache::SegmentCache;
pub use deep::{DeepStorage, SegmentLocation};
pub use view::{DataSourceSnapshot, Hydrant, LoadDecisions, SegmentLoad, SegmentView};

use dolmen_common::ErrorCategory;

/// Errors of deep storage and the segment cache.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Local filesystem error.
    #[error("storage i/o error at [{path}]: {source}")]
    Io {
        /// The path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Object store error.
    #[error("deep storage error: {0}")]
    ObjectStore(#[from] object_store::Error),
    /// A path or key that would escape its root.
    #[error("invalid storage path [{0}]")]
    InvalidPath(String),
    /// Metadata store error while refreshing timelines.
    #[error(transparent)]
    Metadata(#[from] dolmen_metadata::MetadataError),
}

impl StorageError {
    /// The error category.
    pub fn category(&self) -> ErrorCategory {
        match self {
            StorageError::InvalidPath(_) => ErrorCategory::InvalidInput,
            StorageError::Metadata(m) => m.category(),
            _ => ErrorCategory::RuntimeFailure,
        }
    }
}

fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.display().to_string(),
        source,
    }
}
