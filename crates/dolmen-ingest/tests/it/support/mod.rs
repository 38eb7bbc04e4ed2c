//! Shared by the integration tests of this crate: run one batch task in-process against a
//! SQLite metadata store and local deep storage, and read published segment files back.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use dolmen_ingest::input::{InputEntity, InputFormat};
use dolmen_ingest::{IndexTaskEnv, IndexTaskSpec, IngestError, RowStats, run_index_task};
use dolmen_metadata::{MetadataStore, SqlMetadataStore};
use dolmen_segment::{DataSegment, LoadSpec};
use dolmen_storage::DeepStorage;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A SQLite metadata store (`dir/metadata.db`) and local deep storage (`dir/deep`).
pub async fn open_stores(dir: &Path) -> (Arc<dyn MetadataStore>, DeepStorage) {
    let metadata: Arc<dyn MetadataStore> = Arc::new(
        SqlMetadataStore::open_sqlite(&dir.join("metadata.db"))
            .await
            .unwrap(),
    );
    (metadata, DeepStorage::local(&dir.join("deep")).unwrap())
}

/// Runs the task `spec` with its metadata store, work dir and deep storage under `dir`;
/// returns the published segments (or the task's error) and its row counters.
pub async fn run_task(
    dir: &Path,
    task_id: &str,
    spec: &Value,
) -> (Result<Vec<DataSegment>, IngestError>, Arc<RowStats>) {
    let (metadata, deep) = open_stores(dir).await;
    let stats = Arc::new(RowStats::new());
    let env = IndexTaskEnv {
        task_id: task_id.into(),
        work_dir: dir.join("work").join(task_id),
        deep,
        metadata,
        cancel: CancellationToken::new(),
        stats: Arc::clone(&stats),
        lock_version: "2030-01-01T00:00:00.000Z".into(),
        last_compaction_state: None,
    };
    let result = match IndexTaskSpec::from_json(spec) {
        Ok(task) => run_index_task(&env, &task).await,
        Err(e) => Err(e),
    };
    (result, stats)
}

/// Every row of the published segments' files, as JSON objects (read with Dolmen's own
/// `parquet` input format), in file order.
pub fn segment_rows(segments: &[DataSegment]) -> Vec<serde_json::Map<String, Value>> {
    let format: InputFormat =
        serde_json::from_value(serde_json::json!({"type": "parquet"})).unwrap();
    let mut rows = Vec::new();
    for s in segments {
        let LoadSpec::Local { path } = &s.load_spec else {
            panic!("local load spec")
        };
        rows.extend(
            format
                .reader(&InputEntity::File(Path::new(path).to_path_buf()))
                .unwrap()
                .map(Result::unwrap),
        );
    }
    rows
}

/// Every record batch of a published segment's file.
pub fn read_segment(segment: &DataSegment) -> Vec<RecordBatch> {
    let LoadSpec::Local { path } = &segment.load_spec else {
        panic!("local load spec")
    };
    let file = std::fs::File::open(Path::new(path)).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}
