//! The `kill` task's work: permanent deletion of unused segments (Druid's
//! `KillUnusedSegmentsTask.runTask`).
//!
//! Under its EXCLUSIVE lock on the interval the task repeats, until nothing is left, the
//! `limit` is reached or it is shut down:
//! 1. fetch at most `batchSize` unused segments lying fully inside the interval;
//! 2. delete their rows from the metadata store in one transaction (only rows still unused:
//!    a segment marked used meanwhile is spared);
//! 3. delete the files of the deleted rows from deep storage (skipping a file whose load spec a
//!    used segment still references) and drop them from the local segment cache.
//!
//! Rows go before files, as in Druid: a crash between the two leaves orphaned files in deep
//! storage, never a row that points at a missing file. Each batch is atomic in the metadata
//! store; a task shut down between batches keeps what it already deleted.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use dolmen_ingest::IngestError;
use dolmen_metadata::{MetadataStore, UnusedSegmentsQuery};
use dolmen_storage::{DeepStorage, SegmentCache};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::spec::KillTaskSpec;

/// Live counters of a kill task (`killUnusedSegments` report).
#[derive(Debug, Default)]
pub struct KillProgress {
    /// Segments deleted so far (rows and files).
    pub killed: AtomicU64,
    /// Batches processed so far.
    pub batches: AtomicU64,
}

impl KillProgress {
    /// The task report, shaped as Druid's `KillTaskReport`:
    /// `{"killUnusedSegments": {"type", "taskId", "payload": {"numSegmentsKilled",
    /// "numBatchesProcessed"}}}`.
    pub fn report(&self, task_id: &str) -> Value {
        json!({
            "killUnusedSegments": {
                "type": "killUnusedSegments",
                "taskId": task_id,
                "payload": {
                    "numSegmentsKilled": self.killed.load(Ordering::Relaxed),
                    "numBatchesProcessed": self.batches.load(Ordering::Relaxed),
                }
            }
        })
    }
}

/// What a kill task needs from the overlord.
pub(crate) struct KillEnv<'a> {
    pub(crate) metadata: &'a dyn MetadataStore,
    pub(crate) deep: &'a DeepStorage,
    pub(crate) cache: &'a SegmentCache,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) progress: &'a KillProgress,
}

fn runtime(e: impl std::fmt::Display) -> IngestError {
    IngestError::Runtime(e.to_string())
}

fn load_spec_key(spec: &dolmen_segment::LoadSpec) -> String {
    serde_json::to_string(spec).unwrap_or_default()
}

/// Deletes the unused segments the spec selects; returns how many were deleted. Call with the
/// task's EXCLUSIVE lock on `spec.interval` held.
///
/// # Errors
/// [`IngestError::Canceled`] when shut down between batches; [`IngestError::Runtime`] when
/// the metadata store or deep storage fails (batches already done stay done).
pub(crate) async fn run_kill(env: &KillEnv<'_>, spec: &KillTaskSpec) -> Result<u64, IngestError> {
    let batch_size = spec.batch_size();
    let limit = spec.limit.map(|l| l.max(0) as u64);
    tracing::info!(
        data_source = %spec.data_source,
        interval = %spec.interval,
        versions = ?spec.versions,
        batch_size,
        limit = ?limit,
        max_used_status_last_updated_time = ?spec.max_used_status_last_updated_time,
        "starting kill of unused segments"
    );
    // Files still referenced by used segments must stay (Druid fetches these load specs once,
    // before the first batch).
    let used_specs: HashSet<String> = env
        .metadata
        .used_segments(&spec.data_source, Some(spec.interval))
        .await
        .map_err(runtime)?
        .iter()
        .map(|s| load_spec_key(&s.load_spec))
        .collect();
    let mut killed: u64 = 0;
    loop {
        if env.cancel.is_cancelled() {
            return Err(IngestError::Canceled);
        }
        let next = match limit {
            Some(l) => (l.saturating_sub(killed) as usize).min(batch_size),
            None => batch_size,
        };
        if next == 0 {
            break;
        }
        let batch = env
            .metadata
            .unused_segments(&UnusedSegmentsQuery {
                data_source: spec.data_source.clone(),
                interval: spec.interval,
                versions: spec.versions.clone(),
                max_used_status_last_updated_ms: spec.max_used_status_last_updated_ms(),
                limit: next,
            })
            .await
            .map_err(runtime)?;
        if batch.is_empty() {
            break;
        }
        let ids: Vec<String> = batch.iter().map(|r| r.segment.identifier.clone()).collect();
        let deleted: HashSet<String> = env
            .metadata
            .delete_unused_segments(&ids)
            .await
            .map_err(runtime)?
            .into_iter()
            .collect();
        if deleted.is_empty() {
            // Every segment of the batch was marked used meanwhile; the next fetch moves on.
            continue;
        }
        for rec in batch
            .iter()
            .filter(|r| deleted.contains(&r.segment.identifier))
        {
            let seg = &rec.segment;
            if used_specs.contains(&load_spec_key(&seg.load_spec)) {
                tracing::info!(segment = %seg.identifier, "keeping segment file shared with a used segment");
            } else {
                env.deep.delete(&seg.load_spec).await.map_err(|e| {
                    IngestError::Runtime(format!(
                        "segment [{}] was removed from the metadata store but its file could not be deleted from deep storage: {e}",
                        seg.identifier
                    ))
                })?;
            }
            if let Err(e) = env.cache.drop_segment(seg).await {
                tracing::warn!(segment = %seg.identifier, error = %e, "cannot drop killed segment from the segment cache");
            }
        }
        killed += deleted.len() as u64;
        env.progress.killed.store(killed, Ordering::Relaxed);
        let batches = env.progress.batches.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(
            batch = batches,
            segments = deleted.len(),
            total = killed,
            "deleted a batch of unused segments"
        );
    }
    tracing::info!(
        segments = killed,
        batches = env.progress.batches.load(Ordering::Relaxed),
        "kill finished"
    );
    Ok(killed)
}
