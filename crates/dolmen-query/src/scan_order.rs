//! Rows of a plain scan come back in time order ([`TimeOrderedScans`], a physical optimizer
//! rule).
//!
//! Druid's scan without `ORDER BY` reads the segments of a datasource one after the other in
//! time order (the broker's timeline lookup lists them by interval, then partition number, and
//! `ScanQueryRunnerFactory` concatenates their results for the default `order: none`), and a
//! segment's rows are sorted by `__time`; so `SELECT ... FROM ds LIMIT 1` answers the earliest
//! row, and Druid's docs and clients rely on it. DataFusion reads partitions concurrently and
//! interleaves their batches as they arrive.
//!
//! [`crate::table`] lists a scan's files in time order, and gives each scan partition a
//! contiguous run of them (DataFusion's byte-range repartitioning keeps that order: it cuts the
//! flattened file list into consecutive ranges). Reading the partitions one after the other is
//! then reading the segments in time order, once the scan is marked order-sensitive
//! (`preserve_order`: otherwise an idle partition steals files from another's group, DataFusion's
//! file-stream work stealing). This rule does that for *plain* plans only: a
//! tree of projections, filters, limits, `UNION ALL`s and partition merges over scans, either
//! the whole plan or the input of a `LIMIT`. Everything else (aggregations, sorts, joins,
//! windows) is left alone, so its scans keep reading on every core. A plain plan outputs its
//! partitions in turn ([`OrderedConcatExec`]): under a `LIMIT` it reads them one after the
//! other (it stops after the first rows, reading less than before); without one it still reads
//! them all at once, each into a small buffer (two batches), and passes the buffers on in
//! order, so a filtered full scan keeps its parallelism. Round-robin repartitions in a plain
//! plan only spread batches over cores and would reorder them, so they are removed.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use futures::{Stream, StreamExt};

/// The physical optimizer rule of the module docs; runs after DataFusion's own rules.
#[derive(Debug, Default)]
pub struct TimeOrderedScans;

impl PhysicalOptimizerRule for TimeOrderedScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if is_plain(&plan) {
            return in_order(plan);
        }
        // A LIMIT (or a partition merge that took over its fetch) deeper in the plan picks
        // the first rows of its input: the earliest ones, as in Druid.
        plan.transform_down(|node| {
            let limits = node.is::<GlobalLimitExec>()
                || (node.is::<CoalescePartitionsExec>() && node.fetch().is_some());
            if limits && node.children().into_iter().all(is_plain) {
                Ok(Transformed::new(
                    in_order(node)?,
                    true,
                    TreeNodeRecursion::Jump,
                ))
            } else {
                Ok(Transformed::no(node))
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "TimeOrderedScans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `plan` is a round-robin repartition (it only spreads batches over partitions).
fn is_round_robin(plan: &dyn ExecutionPlan) -> bool {
    plan.downcast_ref::<RepartitionExec>()
        .is_some_and(|r| matches!(r.partitioning(), Partitioning::RoundRobinBatch(_)))
}

/// Whether `plan` only passes rows of its leaves through, in each partition's order: leaves
/// (scans, empty and one-row relations) under projections, filters, limits, unions,
/// partition merges, round-robin repartitions and cooperative wrappers.
fn is_plain(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let p = plan.as_ref();
    if p.is::<DataSourceExec>() || p.is::<EmptyExec>() || p.is::<PlaceholderRowExec>() {
        return true;
    }
    let passes = p.is::<ProjectionExec>()
        || p.is::<FilterExec>()
        || p.is::<GlobalLimitExec>()
        || p.is::<LocalLimitExec>()
        || p.is::<CoalescePartitionsExec>()
        || p.is::<CooperativeExec>()
        || p.is::<UnionExec>()
        || is_round_robin(p);
    passes && p.children().into_iter().all(is_plain)
}

/// Whether a node of `plan` stops after some rows (a limit, or a fetch pushed into an
/// operator or a scan).
fn has_limit(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.is::<GlobalLimitExec>()
        || plan.is::<LocalLimitExec>()
        || plan.fetch().is_some()
        || plan.children().into_iter().any(has_limit)
}

/// `plan` (plain) as one partition that outputs its partitions one after the other.
fn in_order(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let prefetch = !has_limit(&plan);
    let plan = sequential(plan, prefetch)?;
    Ok(if plan.output_partitioning().partition_count() > 1 {
        Arc::new(OrderedConcatExec::new(plan, None, prefetch))
    } else {
        plan
    })
}

/// Replaces the partition merges of a plain plan with [`OrderedConcatExec`] and drops its
/// round-robin repartitions.
fn sequential(plan: Arc<dyn ExecutionPlan>, prefetch: bool) -> Result<Arc<dyn ExecutionPlan>> {
    if is_round_robin(plan.as_ref()) {
        let input = Arc::clone(plan.children()[0]);
        return sequential(input, prefetch);
    }
    if let Some(c) = plan.downcast_ref::<CoalescePartitionsExec>() {
        let input = sequential(Arc::clone(c.input()), prefetch)?;
        let prefetch = prefetch && c.fetch().is_none();
        return Ok(Arc::new(OrderedConcatExec::new(input, c.fetch(), prefetch)));
    }
    if plan.is::<DataSourceExec>() {
        // A file scan may otherwise let a partition take files from its siblings' groups
        // (DataFusion's file-stream work stealing); order-sensitive, each partition reads its
        // own group in order.
        return Ok(plan.with_preserve_order(true).unwrap_or(plan));
    }
    let children = plan
        .children()
        .into_iter()
        .map(|c| sequential(Arc::clone(c), prefetch))
        .collect::<Result<Vec<_>>>()?;
    if children.is_empty() {
        return Ok(plan);
    }
    datafusion::physical_plan::execution_plan::replace_children_if_necessary(plan, children)
}

/// One partition: the batches of `input`'s partitions, partition after partition; at most
/// `fetch` rows. With `prefetch`, every partition runs at once from the start, each into a
/// buffer of [`PREFETCH_BATCHES`]; without it, a partition starts when the one before is
/// exhausted.
#[derive(Debug)]
pub struct OrderedConcatExec {
    input: Arc<dyn ExecutionPlan>,
    fetch: Option<usize>,
    prefetch: bool,
    properties: Arc<PlanProperties>,
}

/// How many batches each partition of a prefetching [`OrderedConcatExec`] may read ahead.
pub const PREFETCH_BATCHES: usize = 2;

impl OrderedConcatExec {
    /// Concatenates the partitions of `input`, stopping after `fetch` rows when given, reading
    /// them all at once when `prefetch`.
    pub fn new(input: Arc<dyn ExecutionPlan>, fetch: Option<usize>, prefetch: bool) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        OrderedConcatExec {
            input,
            fetch,
            prefetch,
            properties,
        }
    }
}

impl DisplayAs for OrderedConcatExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OrderedConcatExec: prefetch={}", self.prefetch)?;
        if let Some(n) = self.fetch {
            write!(f, ", fetch={n}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for OrderedConcatExec {
    fn name(&self) -> &str {
        "OrderedConcatExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = children
            .into_iter()
            .next()
            .unwrap_or_else(|| Arc::clone(&self.input));
        Ok(Arc::new(OrderedConcatExec::new(
            input,
            self.fetch,
            self.prefetch,
        )))
    }

    fn fetch(&self) -> Option<usize> {
        self.fetch
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(datafusion::error::DataFusionError::Internal(format!(
                "OrderedConcatExec has one partition, asked for {partition}"
            )));
        }
        let partitions = self.input.output_partitioning().partition_count();
        let mut prefetched = Vec::new();
        if self.prefetch {
            for i in 0..partitions {
                let mut stream = self.input.execute(i, Arc::clone(&context))?;
                let (tx, rx) = tokio::sync::mpsc::channel(PREFETCH_BATCHES);
                let task = datafusion::common::runtime::SpawnedTask::spawn(async move {
                    while let Some(item) = stream.next().await {
                        let stop = item.is_err();
                        if tx.send(item).await.is_err() || stop {
                            break;
                        }
                    }
                });
                prefetched.push(Some((rx, task)));
            }
        }
        Ok(Box::pin(ConcatStream {
            schema: self.input.schema(),
            partitions,
            input: Arc::clone(&self.input),
            context,
            next: 0,
            current: None,
            prefetched,
            remaining: self.fetch,
        }))
    }
}

/// A partition read ahead by its own task (aborted when dropped).
type Prefetched = (
    tokio::sync::mpsc::Receiver<Result<RecordBatch>>,
    datafusion::common::runtime::SpawnedTask<()>,
);

/// The stream of [`OrderedConcatExec`].
struct ConcatStream {
    schema: SchemaRef,
    input: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    partitions: usize,
    next: usize,
    current: Option<SendableRecordBatchStream>,
    /// With prefetch: each partition's buffer, taken in turn.
    prefetched: Vec<Option<Prefetched>>,
    remaining: Option<usize>,
}

impl ConcatStream {
    /// The next item of the prefetched partition `i`, `None` once it is exhausted.
    fn poll_prefetched(
        &mut self,
        i: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<RecordBatch>>> {
        let Some(Some((rx, _))) = self.prefetched.get_mut(i) else {
            return Poll::Ready(None);
        };
        let polled = rx.poll_recv(cx);
        if let Poll::Ready(None) = polled {
            // Exhausted: drop the finished task and its channel.
            self.prefetched[i] = None;
        }
        polled
    }
}

impl ConcatStream {
    /// The next batch of the partitions in order, before `fetch` applies.
    fn poll_batch(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<RecordBatch>>> {
        loop {
            if self.next >= self.partitions {
                return Poll::Ready(None);
            }
            if !self.prefetched.is_empty() {
                match self.poll_prefetched(self.next, cx) {
                    Poll::Ready(None) => self.next += 1,
                    other => return other,
                }
                continue;
            }
            if self.current.is_none() {
                match self.input.execute(self.next, Arc::clone(&self.context)) {
                    Ok(s) => self.current = Some(s),
                    Err(e) => return Poll::Ready(Some(Err(e))),
                }
            }
            let Some(current) = self.current.as_mut() else {
                continue;
            };
            match current.poll_next_unpin(cx) {
                Poll::Ready(None) => {
                    self.current = None;
                    self.next += 1;
                }
                other => return other,
            }
        }
    }
}

impl Stream for ConcatStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.remaining == Some(0) {
            // Done: stop reading (and abort any read-ahead).
            self.current = None;
            self.prefetched.clear();
            return Poll::Ready(None);
        }
        match self.poll_batch(cx) {
            Poll::Ready(Some(Ok(batch))) => {
                let batch = match &mut self.remaining {
                    Some(r) if batch.num_rows() > *r => {
                        let b = batch.slice(0, *r);
                        *r = 0;
                        b
                    }
                    Some(r) => {
                        *r -= batch.num_rows();
                        batch
                    }
                    None => batch,
                };
                Poll::Ready(Some(Ok(batch)))
            }
            other => other,
        }
    }
}

impl RecordBatchStream for ConcatStream {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// A session with four partitions and the rule, over a table of four partitions whose
    /// rows are 0..8, 8..16, 16..24, 24..32 (partition order is time order).
    async fn ctx() -> SessionContext {
        use arrow::array::Int64Array;
        use arrow::datatypes::{DataType, Field, Schema};
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(4))
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(TimeOrderedScans))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
        let partitions: Vec<Vec<RecordBatch>> = (0..4)
            .map(|p| {
                (0..4)
                    .map(|b| {
                        let start = p * 8 + b * 2;
                        RecordBatch::try_new(
                            Arc::clone(&schema),
                            vec![Arc::new(Int64Array::from(vec![start, start + 1]))],
                        )
                        .unwrap()
                    })
                    .collect()
            })
            .collect();
        let table = datafusion::datasource::MemTable::try_new(schema, partitions).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx
    }

    async fn values(ctx: &SessionContext, sql: &str) -> Vec<i64> {
        use arrow::array::AsArray;
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    async fn plan(ctx: &SessionContext, sql: &str) -> String {
        let p = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        datafusion::physical_plan::displayable(p.as_ref())
            .indent(false)
            .to_string()
    }

    #[tokio::test]
    async fn plain_scans_read_partitions_in_order() {
        let ctx = ctx().await;
        assert_eq!(
            values(&ctx, "SELECT t FROM t").await,
            (0..32).collect::<Vec<_>>()
        );
        assert_eq!(values(&ctx, "SELECT t FROM t LIMIT 3").await, [0, 1, 2]);
        assert_eq!(
            values(&ctx, "SELECT t FROM t WHERE t % 5 = 0 LIMIT 4").await,
            [0, 5, 10, 15]
        );
        assert_eq!(
            values(&ctx, "SELECT t * 2 FROM t LIMIT 2 OFFSET 9").await,
            [18, 20]
        );
        // A LIMIT inside a query that is not plain still takes the first rows.
        assert_eq!(
            values(&ctx, "SELECT SUM(t) FROM (SELECT t FROM t LIMIT 5)").await,
            [10]
        );
        // Under a LIMIT the partitions are read in turn; without one, all at once.
        let text = plan(&ctx, "SELECT t FROM t LIMIT 3").await;
        assert!(text.contains("OrderedConcatExec: prefetch=false"), "{text}");
        let text = plan(&ctx, "SELECT t FROM t WHERE t > 3").await;
        assert!(text.contains("OrderedConcatExec: prefetch=true"), "{text}");
    }

    /// Aggregations keep reading every partition at once.
    #[tokio::test]
    async fn aggregations_are_left_alone() {
        let ctx = ctx().await;
        let text = plan(&ctx, "SELECT t % 3, COUNT(*) FROM t GROUP BY 1").await;
        assert!(!text.contains("OrderedConcatExec"), "{text}");
        let text = plan(&ctx, "SELECT t FROM t ORDER BY t DESC LIMIT 2").await;
        assert!(!text.contains("OrderedConcatExec"), "{text}");
        assert_eq!(
            values(&ctx, "SELECT t FROM t ORDER BY t DESC LIMIT 2").await,
            [31, 30]
        );
    }
}
