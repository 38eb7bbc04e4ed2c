//! What listing and reading input needs from the task that reads it: the input source settings,
//! the task's metadata store and deep storage (for the `druid` input source), a tokio runtime
//! to drive async clients from the reading thread, and a scratch directory.
//!
//! # Async I/O from blocking threads
//! Ingestion lists and reads input on dedicated threads (the blocking pool and the reader
//! thread of `build_segments`), never on a runtime worker. Async clients (S3 through
//! `object_store`, the metadata store, deep storage) are driven from those threads with
//! [`IoRuntime::block_on`]: the future is polled on the calling thread while the runtime's own
//! threads keep driving sockets and timers, so the reactor is never blocked. The runtime is the
//! task's (captured by [`InputContext::for_task`]); without one (a plain thread, a benchmark) a
//! small current-thread runtime is created for the source and driven the same way.
//! `block_on` must not be called from a runtime worker thread; nothing in this module does.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use dolmen_metadata::MetadataStore;
use dolmen_storage::DeepStorage;
use tokio::runtime::{Handle, Runtime};

use super::InputError;
use super::config::{InputSourceConfig, input_source_config};
use crate::task::IndexTaskEnv;

/// Services the `druid` input source reads segments through.
#[derive(Debug, Clone)]
pub struct SegmentAccess {
    /// Where the used segments of the datasource are listed.
    pub metadata: Arc<dyn MetadataStore>,
    /// Where segment files are fetched from.
    pub deep: DeepStorage,
}

/// The environment input sources are listed and read in.
#[derive(Debug, Clone, Default)]
pub struct InputContext {
    /// Input source settings; `None` means the process-wide ones
    /// ([`super::input_source_config`]).
    pub config: Option<Arc<InputSourceConfig>>,
    /// The metadata store and deep storage (needed by the `druid` input source only).
    pub segments: Option<SegmentAccess>,
    /// The runtime that drives async clients; `None` creates a small one when needed.
    pub runtime: Option<Handle>,
    /// Where fetched files are kept while they are read (the task's work directory); `None`
    /// uses the system temporary directory.
    pub scratch_dir: Option<PathBuf>,
}

impl InputContext {
    /// The context of a running batch task: its metadata store, deep storage and work
    /// directory, the process-wide settings, and the current tokio runtime (if any).
    pub fn for_task(env: &IndexTaskEnv) -> InputContext {
        InputContext {
            config: None,
            segments: Some(SegmentAccess {
                metadata: Arc::clone(&env.metadata),
                deep: env.deep.clone(),
            }),
            runtime: Handle::try_current().ok(),
            scratch_dir: Some(env.work_dir.join("input")),
        }
    }

    /// The input source settings in effect.
    pub fn config(&self) -> &InputSourceConfig {
        match &self.config {
            Some(c) => c,
            None => input_source_config(),
        }
    }

    /// The runtime to drive async clients with: the context's, else a new current-thread
    /// runtime.
    ///
    /// # Errors
    /// When a runtime cannot be created.
    pub(super) fn io_runtime(&self) -> Result<IoRuntime, InputError> {
        match &self.runtime {
            Some(h) => Ok(IoRuntime::Shared(h.clone())),
            None => IoRuntime::dedicated(),
        }
    }

    /// A new temporary file in the scratch directory (created if missing).
    pub(super) fn temp_file(&self) -> std::io::Result<tempfile::NamedTempFile> {
        match &self.scratch_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                tempfile::NamedTempFile::new_in(dir)
            }
            None => tempfile::NamedTempFile::new(),
        }
    }
}

/// A runtime that blocking threads drive async I/O with (see the module docs).
#[derive(Clone)]
pub(super) enum IoRuntime {
    /// The task's runtime.
    Shared(Handle),
    /// A runtime owned by the input source.
    Dedicated(Arc<Runtime>),
}

impl fmt::Debug for IoRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoRuntime::Shared(_) => "IoRuntime::Shared",
            IoRuntime::Dedicated(_) => "IoRuntime::Dedicated",
        })
    }
}

impl IoRuntime {
    /// A new current-thread runtime with I/O and timers.
    pub(super) fn dedicated() -> Result<IoRuntime, InputError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| IoRuntime::Dedicated(Arc::new(rt)))
            .map_err(|e| InputError::Io {
                path: "<input runtime>".to_string(),
                source: e,
            })
    }

    /// Runs `fut` to completion on the calling thread (never a runtime worker).
    pub(super) fn block_on<F: Future>(&self, fut: F) -> F::Output {
        match self {
            IoRuntime::Shared(h) => h.block_on(fut),
            IoRuntime::Dedicated(rt) => rt.block_on(fut),
        }
    }
}
