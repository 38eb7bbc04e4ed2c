//! [`ThreadReadExec`]: the leaf `ExecutionPlan` of the input readers, each output partition
//! read by blocking code on a thread of its own (parsing and decoding are CPU and file work,
//! kept off the async runtime). Used by the columnar build's text reader
//! ([`super::ranges::RangeTable`]) and by SQL ingestion's `EXTERN` table (dolmen-query).

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions,
};

/// Reads one partition: calls `send` with each batch (or an error) until done or until `send`
/// returns false (the stream was dropped: a cancelled query, or a limit reached).
pub type ReadPartition =
    dyn Fn(usize, &mut dyn FnMut(Result<RecordBatch>) -> bool) + Send + Sync + 'static;

/// A leaf plan of `partitions` partitions of `schema`, each read by `read` on its own thread
/// (named `dolmen-<name>`); two batches are buffered per partition. Shown in plans as
/// `<Name>: <detail>`.
pub struct ThreadReadExec {
    name: &'static str,
    detail: String,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    read: Arc<ReadPartition>,
}

impl ThreadReadExec {
    /// The plan; `name` as the plan shows it (`RangeExec`), `detail` the text after it.
    pub fn new(
        name: &'static str,
        detail: String,
        schema: SchemaRef,
        partitions: usize,
        read: Arc<ReadPartition>,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        ThreadReadExec {
            name,
            detail,
            schema,
            properties,
            read,
        }
    }
}

impl fmt::Debug for ThreadReadExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.detail)
    }
}

impl DisplayAs for ThreadReadExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.detail)
    }
}

impl ExecutionPlan for ThreadReadExec {
    fn name(&self) -> &str {
        self.name
    }
    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }
    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }
    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }
    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }
    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(2);
        let read = Arc::clone(&self.read);
        // A plain thread: reading is blocking work; it ends when the receiver is dropped.
        std::thread::Builder::new()
            .name(format!(
                "dolmen-{}",
                self.name.trim_end_matches("Exec").to_lowercase()
            ))
            .spawn(move || read(partition, &mut |r| tx.blocking_send(r).is_ok()))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }
}
