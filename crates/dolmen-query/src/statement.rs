//! SQL statements run as `query_controller` tasks: the async statements API
//! (`/v2/sql/statements`) and `/v2/sql/task` (Druid's multi-stage query engine, "MSQ").
//!
//! [`StatementRunner`] is the overlord's [`ControllerRunner`]: it plans the task's SQL with the
//! same [`QueryEngine`] as the synchronous endpoint and then either
//! * runs a `SELECT` and writes its rows in **pages** to a [`ResultStore`]: the task-report
//!   store (local, under the data directory; default `selectDestination`) or durable storage
//!   (`selectDestination: durableStorage`, an object store, local or S3), or
//! * runs `INSERT` / `REPLACE` through [`crate::sql_ingest`].
//!
//! # Pages
//! A page is an Arrow IPC stream file `<queryId>/page-<n>.arrow` (field metadata included, so
//! complex and multi-value columns keep their Druid types). `rowsPerPage` (context; default
//! 100,000 for durable storage, everything in page 0 for the task report, as Druid) bounds a
//! page; each page is written as it fills, so a result far larger than memory streams through.
//! Pages survive restarts: the page list lives in the task report (metadata store), the files
//! in the store. The status API's `sampleRecords` holds the first [`SAMPLE_ROWS`] rows.

use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use dolmen_ingest::IngestError;
use dolmen_overlord::{ControllerRunner, ControllerTask, Destination};
use futures::StreamExt;
use futures::future::BoxFuture;
use object_store::buffered::BufWriter;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::engine::{QueryEngine, QueryError, SqlParameter, SqlQuery};
use crate::writer::{ResultFormat, ResultWriter, column_infos};

/// Rows of a result the status API shows as `sampleRecords`.
pub const SAMPLE_ROWS: usize = 20;

/// Druid's default `rowsPerPage` for `selectDestination: durableStorage`
/// (`MultiStageQueryContext.DEFAULT_ROWS_PER_PAGE`).
pub const DEFAULT_ROWS_PER_PAGE: usize = 100_000;

/// Where the pages of statement results are kept: an object store and a key prefix.
#[derive(Debug, Clone)]
pub struct ResultStore {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
}

impl ResultStore {
    /// A store in a local directory (created when missing).
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn local(dir: &Path) -> Result<ResultStore, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create [{}]: {e}", dir.display()))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| format!("cannot open [{}]: {e}", dir.display()))?;
        Ok(ResultStore {
            store: Arc::new(store),
            prefix: ObjectPath::default(),
        })
    }

    /// A store in an object store under `prefix` (e.g. an S3 bucket).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> ResultStore {
        ResultStore {
            store,
            prefix: ObjectPath::from(prefix.trim_matches('/')),
        }
    }

    fn page_path(&self, query_id: &str, page: usize) -> ObjectPath {
        self.prefix
            .clone()
            .join(query_id)
            .join(format!("page-{page}.arrow"))
    }

    /// Reads one page back: its schema and batches.
    ///
    /// # Errors
    /// When the page is missing or unreadable.
    pub async fn read_page(
        &self,
        query_id: &str,
        page: usize,
    ) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
        let path = self.page_path(query_id, page);
        let bytes = self
            .store
            .get(&path)
            .await
            .map_err(|e| format!("cannot read result page [{path}]: {e}"))?
            .bytes()
            .await
            .map_err(|e| format!("cannot read result page [{path}]: {e}"))?;
        tokio::task::spawn_blocking(move || {
            let reader = StreamReader::try_new(std::io::Cursor::new(bytes), None)
                .map_err(|e| format!("corrupt result page [{path}]: {e}"))?;
            let schema = reader.schema();
            let batches = reader
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("corrupt result page [{path}]: {e}"))?;
            Ok((schema, batches))
        })
        .await
        .map_err(|e| format!("page reader failed: {e}"))?
    }
}

/// The stores results can go to.
#[derive(Debug, Clone)]
pub struct ResultStores {
    /// The default destination (`taskReport`): kept beside the task's report.
    pub task_report: ResultStore,
    /// `durableStorage`, when configured (`service.msq.intermediate.storage.*`).
    pub durable: Option<ResultStore>,
}

impl ResultStores {
    /// The store of a destination (`None` for a datasource or unconfigured durable storage).
    pub fn for_destination(&self, d: &Destination) -> Option<&ResultStore> {
        match d {
            Destination::TaskReport => Some(&self.task_report),
            Destination::DurableStorage => self.durable.as_ref(),
            Destination::DataSource { .. } => None,
        }
    }
}

/// Runs `query_controller` tasks with the query engine (see the module docs).
#[derive(Debug, Clone)]
pub struct StatementRunner {
    engine: Arc<QueryEngine>,
    stores: Arc<ResultStores>,
    runtime: tokio::runtime::Handle,
}

impl StatementRunner {
    /// A runner over `engine`, writing pages to `stores`, doing its work on `runtime` (the
    /// query threads, off the HTTP reactor).
    pub fn new(
        engine: Arc<QueryEngine>,
        stores: Arc<ResultStores>,
        runtime: tokio::runtime::Handle,
    ) -> StatementRunner {
        StatementRunner {
            engine,
            stores,
            runtime,
        }
    }
}

impl ControllerRunner for StatementRunner {
    /// Runs the statement on the query runtime. Cancelling a `SELECT` ends it at once (its
    /// execution is aborted at its next yield and the pages written so far are left
    /// unlisted); an ingestion statement stops by itself before it publishes
    /// ([`crate::sql_ingest::run`]), so an abort never falls between pushing segment files and
    /// publishing them.
    fn run(&self, task: ControllerTask) -> BoxFuture<'static, Result<usize, IngestError>> {
        let this = self.clone();
        let cancel = task.env.cancel.clone();
        let ingestion = task.spec.is_ingestion();
        let handle = self
            .runtime
            .spawn(async move { this.run_statement(&task).await });
        let joined = |r: Result<Result<usize, IngestError>, tokio::task::JoinError>| {
            r.map_err(|e| IngestError::Runtime(format!("statement runner failed: {e}")))?
        };
        Box::pin(async move {
            if ingestion {
                return joined(handle.await);
            }
            let abort = handle.abort_handle();
            tokio::select! {
                r = handle => joined(r),
                () = cancel.cancelled() => {
                    abort.abort();
                    Err(IngestError::Canceled)
                }
            }
        })
    }
}

/// A query error as a task failure: `<ErrorCode>: <message>` with the MSQ fault code Druid
/// uses (`QueryNotSupported`, `InvalidInput`...), see `dolmen_overlord::controller`.
pub fn query_failure(e: &QueryError) -> IngestError {
    let code = match e {
        QueryError::Parse(_)
        | QueryError::Plan(_)
        | QueryError::InvalidInput(_)
        | QueryError::InvalidData(_) => "InvalidInput",
        QueryError::ResourceLimit(_) => "TooManyRowsInAWindow",
        QueryError::Cancelled(_) => return IngestError::Canceled,
        QueryError::Timeout(_) => "QueryRuntimeError",
        QueryError::Execution(_) => "QueryRuntimeError",
    };
    IngestError::Runtime(format!("{code}: {e}"))
}

impl StatementRunner {
    async fn run_statement(&self, task: &ControllerTask) -> Result<usize, IngestError> {
        let spec = &task.spec;
        let parameters: Option<Vec<SqlParameter>> = match &spec.sql_parameters {
            None | Some(Value::Null) => None,
            Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| {
                IngestError::InvalidSpec(format!("InvalidInput: sqlParameters: {e}"))
            })?),
        };
        let q = SqlQuery {
            query: spec.sql_query.clone(),
            context: Some(spec.sql_query_context.clone()),
            parameters,
            ..Default::default()
        };
        let mut prepared = self.engine.prepare(&q).map_err(|e| query_failure(&e))?;
        // Statements read segments that exist only in deep storage (as Druid's do).
        prepared.read_from_deep_storage.get_or_insert(true);
        if prepared.dml().is_some() {
            return crate::sql_ingest::run(&self.engine, &prepared, task).await;
        }
        let store = self
            .stores
            .for_destination(&spec.spec.destination)
            .ok_or_else(|| {
                IngestError::Runtime(
                    "InvalidInput: selectDestination [durableStorage] needs durable storage; set service.msq.intermediate.storage.enable=true".into(),
                )
            })?
            .clone();
        let rows_per_page = match prepared.context.get("rowsPerPage") {
            None | Some(Value::Null) => match spec.spec.destination {
                Destination::DurableStorage => DEFAULT_ROWS_PER_PAGE,
                _ => usize::MAX,
            },
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|n| *n > 0)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    IngestError::InvalidSpec(format!(
                        "InvalidInput: context.rowsPerPage: [{v}] is not a positive integer"
                    ))
                })?,
        };
        let result = self
            .engine
            .execute_prepared(&prepared)
            .await
            .map_err(|e| query_failure(&e))?;
        let schema = result.schema.clone();
        let columns = column_infos(&schema);
        task.progress
            .set_stages(json!([stage_json(0, "scan", "READING_INPUT")]));
        let mut pages = PageWriter::new(&store, &task.id, Arc::clone(&schema), rows_per_page);
        let mut stream = result.stream;
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| query_failure(&QueryError::from_datafusion(e, false)))?;
            pages.push(&batch).await?;
            task.progress.set_counters(pages.counters());
        }
        let (page_list, sample) = pages.finish().await?;
        let num_rows: u64 = page_list.iter().map(|p| p.rows).sum();
        let size: u64 = page_list.iter().map(|p| p.bytes).sum();
        let mut sample_rows = Vec::new();
        if let Some(b) = &sample {
            let mut w = ResultWriter::new(
                ResultFormat::Array,
                columns.clone(),
                false,
                false,
                false,
                result.time_zone,
            );
            let mut out = Vec::new();
            w.start(&mut out);
            w.write_batch(b, &mut out)
                .map_err(|e| IngestError::Runtime(format!("cannot render rows: {e}")))?;
            w.finish(&mut out);
            if let Ok(Value::Array(rows)) = serde_json::from_slice::<Value>(&out) {
                sample_rows = rows;
            }
        }
        task.progress
            .set_stages(json!([stage_json(0, "scan", "FINISHED")]));
        task.progress.set_results(json!({
            "signature": columns.iter().map(|c| json!({"name": c.name, "type": c.native_type})).collect::<Vec<_>>(),
            "sqlTypeNames": columns.iter().map(|c| c.sql_type.clone()).collect::<Vec<_>>(),
            "results": sample_rows,
            "numTotalRows": num_rows,
            "totalSizeInBytes": size,
            // The effective zone (SET statements included), for rendering the pages later.
            "sqlTimeZone": prepared.context.get("sqlTimeZone").cloned().unwrap_or(Value::Null),
            "destination": match spec.spec.destination {
                Destination::DurableStorage => "durableStorage",
                _ => "taskReport",
            },
            "pages": page_list.iter().map(|p| json!({"id": p.id, "numRows": p.rows, "sizeInBytes": p.bytes})).collect::<Vec<_>>(),
        }));
        Ok(0)
    }
}

/// A Druid stage object for the report (`stageNumber`, `definition`, `phase`, ...).
pub(crate) fn stage_json(number: usize, processor: &str, phase: &str) -> Value {
    json!({
        "stageNumber": number,
        "definition": {
            "id": format!("stage-{number}"),
            "input": [],
            "processor": {"type": processor},
            "signature": [],
            "maxWorkerCount": 1,
        },
        "phase": phase,
        "workerCount": 1,
        "partitionCount": 1,
    })
}

/// One written page.
#[derive(Debug, Clone, Copy)]
struct PageInfo {
    id: usize,
    rows: u64,
    bytes: u64,
}

/// Writes result batches into pages of at most `rows_per_page` rows, each streamed to the
/// store as an Arrow IPC stream (multipart upload on object stores).
struct PageWriter<'a> {
    store: &'a ResultStore,
    query_id: &'a str,
    schema: SchemaRef,
    rows_per_page: usize,
    open: Option<OpenPage>,
    done: Vec<PageInfo>,
    sample: Option<RecordBatch>,
}

struct OpenPage {
    id: usize,
    rows: u64,
    bytes: u64,
    ipc: StreamWriter<Vec<u8>>,
    out: BufWriter,
}

impl<'a> PageWriter<'a> {
    fn new(
        store: &'a ResultStore,
        query_id: &'a str,
        schema: SchemaRef,
        rows_per_page: usize,
    ) -> Self {
        PageWriter {
            store,
            query_id,
            schema,
            rows_per_page,
            open: None,
            done: Vec::new(),
            sample: None,
        }
    }

    fn io(e: impl std::fmt::Display) -> IngestError {
        IngestError::Runtime(format!("cannot write result page: {e}"))
    }

    async fn push(&mut self, batch: &RecordBatch) -> Result<(), IngestError> {
        let sample_len = self.sample.as_ref().map_or(0, RecordBatch::num_rows);
        if sample_len < SAMPLE_ROWS && batch.num_rows() > 0 {
            let take = (SAMPLE_ROWS - sample_len).min(batch.num_rows());
            let add = batch.slice(0, take);
            self.sample = Some(match self.sample.take() {
                None => add,
                Some(s) => {
                    arrow::compute::concat_batches(&self.schema, [&s, &add]).map_err(Self::io)?
                }
            });
        }
        let mut at = 0;
        while at < batch.num_rows() {
            if self.open.is_none() {
                self.open_page()?;
            }
            let page = self.open.as_mut().expect("opened above");
            let room = self.rows_per_page as u64 - page.rows;
            let take = usize::try_from(room)
                .unwrap_or(usize::MAX)
                .min(batch.num_rows() - at);
            page.ipc.write(&batch.slice(at, take)).map_err(Self::io)?;
            page.rows += take as u64;
            let chunk = std::mem::take(page.ipc.get_mut());
            page.bytes += chunk.len() as u64;
            page.out.write_all(&chunk).await.map_err(Self::io)?;
            at += take;
            if page.rows >= self.rows_per_page as u64 {
                self.close_page().await?;
            }
        }
        Ok(())
    }

    fn open_page(&mut self) -> Result<(), IngestError> {
        let id = self.done.len();
        let path = self.store.page_path(self.query_id, id);
        let out = BufWriter::new(Arc::clone(&self.store.store), path);
        let ipc = StreamWriter::try_new(Vec::new(), &self.schema).map_err(Self::io)?;
        self.open = Some(OpenPage {
            id,
            rows: 0,
            bytes: 0,
            ipc,
            out,
        });
        Ok(())
    }

    async fn close_page(&mut self) -> Result<(), IngestError> {
        if let Some(mut p) = self.open.take() {
            p.ipc.finish().map_err(Self::io)?;
            let tail = std::mem::take(p.ipc.get_mut());
            p.bytes += tail.len() as u64;
            p.out.write_all(&tail).await.map_err(Self::io)?;
            p.out.shutdown().await.map_err(Self::io)?;
            self.done.push(PageInfo {
                id: p.id,
                rows: p.rows,
                bytes: p.bytes,
            });
        }
        Ok(())
    }

    /// `counters` of the report while pages are written.
    fn counters(&self) -> Value {
        let rows: u64 = self.done.iter().map(|p| p.rows).sum::<u64>()
            + self.open.as_ref().map_or(0, |p| p.rows);
        let bytes: u64 = self.done.iter().map(|p| p.bytes).sum::<u64>()
            + self.open.as_ref().map_or(0, |p| p.bytes);
        json!({"0": {"0": {"output": {"type": "channel", "rows": [rows], "bytes": [bytes],
            "files": [self.done.len() + usize::from(self.open.is_some())]}}}})
    }

    /// Closes the last page; an empty result still gets one empty page 0 (Druid lists one).
    async fn finish(mut self) -> Result<(Vec<PageInfo>, Option<RecordBatch>), IngestError> {
        if self.open.is_none() && self.done.is_empty() {
            self.open_page()?;
        }
        self.close_page().await?;
        Ok((self.done, self.sample))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(schema: &SchemaRef, from: i64, n: i64) -> RecordBatch {
        RecordBatch::try_new(
            Arc::clone(schema),
            vec![
                Arc::new(Int64Array::from_iter_values(from..from + n)),
                Arc::new(StringArray::from_iter_values(
                    (from..from + n).map(|i| format!("v{i}")),
                )),
            ],
        )
        .unwrap()
    }

    #[tokio::test]
    async fn pages_split_at_rows_per_page_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::local(dir.path()).unwrap();
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let mut w = PageWriter::new(&store, "query-x", Arc::clone(&schema), 7);
        w.push(&batch(&schema, 0, 5)).await.unwrap();
        w.push(&batch(&schema, 5, 12)).await.unwrap();
        let (pages, sample) = w.finish().await.unwrap();
        let rows: Vec<u64> = pages.iter().map(|p| p.rows).collect();
        assert_eq!(rows, vec![7, 7, 3]);
        assert_eq!(sample.unwrap().num_rows(), 17);
        let mut all = Vec::new();
        for p in &pages {
            let (s, batches) = store.read_page("query-x", p.id).await.unwrap();
            assert_eq!(s, schema);
            for b in batches {
                let n = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                all.extend(n.values().iter().copied());
            }
        }
        assert_eq!(all, (0..17).collect::<Vec<_>>());
        assert!(store.read_page("query-x", 3).await.is_err());
    }

    #[tokio::test]
    async fn an_empty_result_has_one_empty_page() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::local(dir.path()).unwrap();
        let schema: SchemaRef =
            Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let w = PageWriter::new(&store, "q", Arc::clone(&schema), 10);
        let (pages, sample) = w.finish().await.unwrap();
        assert_eq!(pages.len(), 1);
        assert_eq!(pages[0].rows, 0);
        assert!(sample.is_none());
        let (_, batches) = store.read_page("q", 0).await.unwrap();
        assert!(batches.iter().all(|b| b.num_rows() == 0));
    }
}
