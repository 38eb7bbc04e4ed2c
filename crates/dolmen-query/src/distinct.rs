//! Distinct values of string dimensions from the value indexes of loaded segments.
//!
//! A distinct count only needs each segment's distinct values, not its rows: adding a value
//! twice to a `HyperLogLog` or a `GROUP BY` changes nothing. Druid's segments keep a sorted
//! dictionary per string column for exactly this kind of work; Dolmen's in-memory form of a
//! loaded segment column is its value index ([`crate::index::ValueIndex`]: sorted distinct
//! values and a code per row). [`DistinctFromIndexes`], a physical optimizer rule, replaces the
//! segment scan under two aggregation shapes with [`DistinctValuesExec`], which emits each
//! scanned segment file's distinct values (and one null when the file has a null or lacks the
//! column):
//!
//! 1. a `Partial`/`Single` `AggregateExec` grouping by one string column with no aggregates:
//!    `SELECT DISTINCT col` and exact `COUNT(DISTINCT col)`, which DataFusion plans as a
//!    `GROUP BY col` below the count;
//! 2. a `Partial`/`Single` `AggregateExec` without `GROUP BY` whose aggregates are all
//!    `APPROX_COUNT_DISTINCT` of that one column, without `FILTER` (also `COUNT(DISTINCT col)`
//!    under `useApproximateCountDistinct`).
//!
//! Only whole-file scans qualify: a Dolmen segment scan (files from the segment cache with
//! their schemas, see [`crate::dictionary`]) without a predicate, limit or row selection that
//! outputs just that column, possibly through a round-robin `RepartitionExec`; time filters,
//! partly overshadowed segments and hydrants keep the row scan. The results are the row scan's
//! exactly (same values, same hashes).
//!
//! Indexes are built with the segment and loaded with it (ADR 0025; a scan loads the indexes of
//! the files it reads before this rule runs). The rule never makes a query wait for them: when
//! one is missing (a segment written before index sidecars existed, whose sidecar is being
//! built), the query scans rows as before and the missing indexes are loaded in the background
//! ([`crate::index::ValueIndexes::load_in_background`]), so a later distinct count on that
//! column reads indexes. Their memory counts against the value index budget.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, new_null_array};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::Result;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};

use crate::index::{ValueIndex, ValueIndexes};

/// The physical optimizer rule of the [module docs](self), over the engine's value indexes.
#[derive(Debug)]
pub struct DistinctFromIndexes {
    indexes: Arc<ValueIndexes>,
}

impl DistinctFromIndexes {
    /// The rule reading (and building in the background) `indexes`.
    pub fn new(indexes: Arc<ValueIndexes>) -> DistinctFromIndexes {
        DistinctFromIndexes { indexes }
    }

    /// The replacement of `agg`, when it has one of the shapes of the module docs and every
    /// index it needs is built.
    fn rewrite(&self, agg: &AggregateExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        if !crate::dictionary::is_plain_first_phase(agg)
            || agg.filter_expr().iter().any(Option::is_some)
        {
            return Ok(None);
        }
        let column: Option<Column> = match (agg.group_expr().expr(), agg.aggr_expr()) {
            ([(expr, _)], []) => expr.downcast_ref::<Column>().cloned(),
            ([], aggs) if !aggs.is_empty() => {
                let mut columns = aggs.iter().map(|a| {
                    let args = a.expressions();
                    match args.as_slice() {
                        [arg] if a.fun().name() == "approx_count_distinct" => {
                            arg.downcast_ref::<Column>().cloned()
                        }
                        _ => None,
                    }
                });
                let first = columns.next().flatten();
                first.filter(|c| columns.all(|o| o.as_ref() == Some(c)))
            }
            _ => None,
        };
        let Some(column) = column else {
            return Ok(None);
        };
        let input = agg.input();
        let (scan_plan, repartition) = match input.downcast_ref::<RepartitionExec>() {
            Some(r) if matches!(r.partitioning(), Partitioning::RoundRobinBatch(_)) => {
                (r.input(), Some(input))
            }
            Some(_) => return Ok(None),
            None => (input, None),
        };
        let Some(scan) = scan_plan.downcast_ref::<DataSourceExec>() else {
            return Ok(None);
        };
        let Some(values) = self.distinct_scan(scan, column.name())? else {
            return Ok(None);
        };
        #[expect(deprecated, reason = "the plans implement only with_new_children")]
        let rebuilt = match repartition {
            Some(r) => Arc::clone(r).with_new_children(vec![values])?,
            None => values,
        };
        #[expect(deprecated, reason = "AggregateExec implements only with_new_children")]
        let agg = Arc::new(agg.clone()).with_new_children(vec![rebuilt])?;
        Ok(Some(agg))
    }

    /// A [`DistinctValuesExec`] standing for `scan`, when it reads whole segment files and
    /// only `column` (a plain string column) and all their indexes are built; otherwise
    /// `None`, after starting the build of missing indexes.
    fn distinct_scan(
        &self,
        scan: &DataSourceExec,
        column: &str,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(config) = scan.data_source().downcast_ref::<FileScanConfig>() else {
            return Ok(None);
        };
        let Some(parquet) = config.file_source().downcast_ref::<ParquetSource>() else {
            return Ok(None);
        };
        let out = scan.schema();
        let only_column = out.fields().len() == 1
            && out.field(0).name() == column
            && out.field(0).data_type() == &DataType::Utf8;
        // The scan must read the column itself: DataFusion pushes projections with expressions
        // into the file source (`SELECT DISTINCT f(col)` scans `f(col) AS EXPR$0`), and such an
        // output column is not a file column.
        let plain_projection = parquet.projection().is_none_or(|p| {
            p.iter().all(|e| {
                e.expr
                    .downcast_ref::<Column>()
                    .is_some_and(|c| c.name() == e.alias)
            })
        });
        if !only_column || !plain_projection || parquet.filter().is_some() || config.limit.is_some()
        {
            return Ok(None);
        }
        let mut files: Vec<FileValues> = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut missing: Vec<PathBuf> = Vec::new();
        for f in config.file_groups.iter().flat_map(|g| g.iter()) {
            let Some(hint) = &f.arrow_schema else {
                return Ok(None);
            };
            if !f.extensions.is_empty() {
                return Ok(None);
            }
            // Segment cache paths are absolute; object store locations drop the root.
            let path = PathBuf::from("/").join(f.object_meta.location.as_ref());
            // A file split into byte ranges over several partitions counts once.
            if seen.contains(&path) {
                continue;
            }
            seen.push(path.clone());
            match hint.field_with_name(column) {
                Err(_) => files.push(FileValues::Null),
                Ok(field) if field.data_type() == &DataType::Utf8 => {
                    match self.indexes.peek(&path, column) {
                        // A hash index has no distinct values to read.
                        Some(Some(index)) if index.is_hashed() => return Ok(None),
                        Some(Some(index)) => files.push(FileValues::Index(index)),
                        Some(None) => return Ok(None),
                        None => missing.push(path),
                    }
                }
                Ok(_) => return Ok(None),
            }
        }
        if !missing.is_empty() {
            self.indexes.load_in_background(missing);
            return Ok(None);
        }
        let n = scan
            .properties()
            .output_partitioning()
            .partition_count()
            .max(1);
        let mut partitions: Vec<Vec<FileValues>> = (0..n).map(|_| Vec::new()).collect();
        for (i, f) in files.into_iter().enumerate() {
            partitions[i % n].push(f);
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&out)),
            Partitioning::UnknownPartitioning(n),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(Some(Arc::new(DistinctValuesExec {
            column: column.to_string(),
            schema: out,
            partitions,
            properties,
        })))
    }
}

impl PhysicalOptimizerRule for DistinctFromIndexes {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        crate::dictionary::rewrite_aggregates(plan, |agg| self.rewrite(agg))
    }

    fn name(&self) -> &str {
        "dolmen_distinct_from_indexes"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What one segment file contributes.
#[derive(Debug, Clone)]
enum FileValues {
    /// Its distinct values (and a null when it has null rows).
    Index(Arc<ValueIndex>),
    /// The file lacks the column: every row is null.
    Null,
}

/// The distinct values of one string column in segment files, from their value indexes (see
/// the [module docs](self)): one batch per file, in the scan's one-column schema.
#[derive(Debug)]
pub struct DistinctValuesExec {
    column: String,
    schema: SchemaRef,
    partitions: Vec<Vec<FileValues>>,
    properties: Arc<PlanProperties>,
}

impl DisplayAs for DistinctValuesExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let files: usize = self.partitions.iter().map(Vec::len).sum();
        write!(
            f,
            "DistinctValuesExec: column={}, files={files}",
            self.column
        )
    }
}

impl ExecutionPlan for DistinctValuesExec {
    fn name(&self) -> &str {
        "DistinctValuesExec"
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
        let schema = Arc::clone(&self.schema);
        let null = || -> Result<RecordBatch> {
            Ok(RecordBatch::try_new(
                Arc::clone(&schema),
                vec![new_null_array(&DataType::Utf8, 1)],
            )?)
        };
        let mut batches: Vec<Result<RecordBatch>> = Vec::new();
        for f in self.partitions.get(partition).into_iter().flatten() {
            match f {
                FileValues::Index(index) => {
                    let values: ArrayRef = Arc::new(index.values().clone());
                    batches.push(
                        RecordBatch::try_new(Arc::clone(&schema), vec![values]).map_err(Into::into),
                    );
                    if index.has_nulls() {
                        batches.push(null());
                    }
                }
                FileValues::Null => batches.push(null()),
            }
        }
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::iter(batches),
        )))
    }
}
