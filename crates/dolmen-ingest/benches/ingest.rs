//! Ingestion throughput: the Wikipedia sample (39,244 rows, gzipped JSON) through the whole
//! batch pipeline with Druid's quickstart spec: read, parse, index, write Parquet segments,
//! push to local deep storage and publish to a SQLite metadata store.
//!
//! Run with `cargo bench -p dolmen-ingest --bench ingest`.

use std::path::PathBuf;
use std::sync::Arc;

use dolmen_ingest::{IndexTaskEnv, IndexTaskSpec, RowStats, run_index_task};
use dolmen_metadata::{MetadataStore, SqlMetadataStore};
use dolmen_storage::DeepStorage;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn main() {
    divan::main();
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/quickstart")
        .canonicalize()
        .unwrap()
}

fn spec(rollup: bool) -> IndexTaskSpec {
    let text = std::fs::read_to_string(examples().join("specs/wikipedia-index.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["spec"]["ioConfig"]["inputSource"]["baseDir"] = json!(examples().display().to_string());
    v["spec"]["dataSchema"]["granularitySpec"]["rollup"] = json!(rollup);
    IndexTaskSpec::from_json(&v).unwrap()
}

fn ingest(rollup: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let metadata: Arc<dyn MetadataStore> =
            Arc::new(SqlMetadataStore::connect("sqlite::memory:").await.unwrap());
        let env = IndexTaskEnv {
            task_id: "bench".into(),
            work_dir: dir.path().join("work"),
            deep: DeepStorage::local(&dir.path().join("deep")).unwrap(),
            metadata,
            cancel: CancellationToken::new(),
            stats: Arc::new(RowStats::new()),
            lock_version: "2026-01-01T00:00:00.000Z".into(),
            last_compaction_state: None,
        };
        let segs = run_index_task(&env, &spec(rollup)).await.unwrap();
        let rows: u64 = segs.iter().map(|s| s.num_rows).sum();
        assert!(rows > 0);
    });
}

/// The quickstart spec as written (no rollup, 25,000 rows in memory: one spill).
#[divan::bench(sample_count = 10)]
fn wikipedia_no_rollup() {
    ingest(false);
}

/// The same with rollup on.
#[divan::bench(sample_count = 10)]
fn wikipedia_rollup() {
    ingest(true);
}
