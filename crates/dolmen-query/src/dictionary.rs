//! Aggregation over the dictionary ids of string dimensions.
//!
//! Druid never groups a string dimension by its strings: each segment column is
//! dictionary-encoded and a `groupBy`/`topN` aggregates by dictionary id, looking each distinct
//! value up once. Dolmen's segment files keep string dimensions dictionary-encoded too (a
//! Parquet dictionary page per column chunk), but DataFusion 55 decodes them to strings and its
//! hash aggregation hashes and compares every row's string. [`DictionaryAggregation`], a
//! physical optimizer rule run after DataFusion's own, brings Druid's approach back for two
//! plan shapes over Dolmen's segment scans:
//!
//! 1. A `Partial` or `Single` `AggregateExec` grouping by exactly one single-value string
//!    column that comes straight from a segment scan (possibly through `FilterExec`s that do
//!    not use that column and round-robin `RepartitionExec`s), with aggregates that have a `GroupsAccumulator` and neither read
//!    the column, `DISTINCT` nor `ORDER BY`. The scan reads the column as
//!    `Dictionary(Int32, Utf8)` (the column chunk's dictionary and the row's keys, without
//!    materializing strings), and [`DictionaryGroupAggregateExec`] maps each dictionary to
//!    group ids once, turns keys into group ids with one array lookup per row and feeds the
//!    aggregates' `GroupsAccumulator`s. Its output has exactly the replaced aggregate's schema
//!    (the group column as strings), so the plan above it is unchanged. `COUNT(DISTINCT col)`
//!    benefits too: DataFusion plans it as a `GROUP BY col` below the count.
//! 2. An aggregate without `GROUP BY` whose aggregates are all `APPROX_COUNT_DISTINCT` over
//!    string columns of the scan: the scan reads those columns as dictionaries and the
//!    accumulator hashes each dictionary value once ([`crate::functions::approx`]).
//!
//! Segment scans are recognised by their files: [`crate::table`] gives every segment file in
//! the segment cache its Arrow schema (`PartitionedFile::arrow_schema`, read once from the
//! footer by [`crate::index::ValueIndexes::file_schema`]), whose metadata
//! ([`DICTIONARY_COLUMNS_KEY`]) lists the string columns dictionary-encoded on every data page
//! of the file (high-cardinality columns overflow the segment writer's dictionary limit to
//! plain pages and are not listed, since reading those as dictionaries would re-intern every
//! batch). Hydrants and segments read in place from S3 carry no schema. The rule rewrites the schemas of a scan whose
//! files all list the columns so the Parquet reader produces dictionaries, and the scan's
//! table schema to match. Under a `UnionExec` (segments read whole and in part, hydrants),
//! inputs that cannot be rewritten are cast to dictionaries, as long as one input can. A scan
//! whose predicate reads the column is left alone (its pruning predicate was built for
//! strings), as is any shape not listed above.
//!
//! A dictionary is mapped once per distinct dictionary buffer: the Parquet reader hands out
//! the same dictionary values for every batch of a column chunk, so a 110k-row column chunk of
//! a 50-value dimension costs 50 hash lookups, not 110k. The groups live in memory (their
//! number is bounded by the distinct values of one column in the scanned segments).

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Int32Type, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{HashMap, Result};
use datafusion::config::ConfigOptions;
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfig, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{CastExpr, Column};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};
use dolmen_functions::dictionary_memo::DictionaryMemo;
use futures::StreamExt;

/// Key of the segment file schema metadata ([`crate::table`]) listing, as a JSON array, the
/// string columns whose every data page in the file is dictionary-encoded. Only such columns
/// are read as dictionaries: a column whose dictionary overflowed to plain pages would be
/// re-interned batch by batch by the reader.
pub const DICTIONARY_COLUMNS_KEY: &str = "dolmen.dictionary_columns";

/// Whether the file schema `hint` lists every column of `names` it has as dictionary-encoded
/// (a file without the column reads it as nulls of the table's type).
fn dictionary_encoded(hint: &Schema, names: &[String]) -> bool {
    let listed: Vec<String> = hint
        .metadata()
        .get(DICTIONARY_COLUMNS_KEY)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    names
        .iter()
        .all(|n| listed.contains(n) || hint.field_with_name(n).is_err())
}

/// The Arrow type string dimensions are read as by the rewritten scans.
fn dictionary_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The physical optimizer rule described in the [module docs](self). Register it after
/// DataFusion's default rules.
#[derive(Debug, Default)]
pub struct DictionaryAggregation;

impl PhysicalOptimizerRule for DictionaryAggregation {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        rewrite_aggregates(plan, rewrite)
    }

    fn name(&self) -> &str {
        "dolmen_dictionary_aggregation"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with every `AggregateExec` that `rewrite` replaces swapped for its replacement
/// (top-down; a replacement is not visited again). Shared with [`crate::distinct`].
pub(crate) fn rewrite_aggregates(
    plan: Arc<dyn ExecutionPlan>,
    rewrite: impl Fn(&AggregateExec) -> Result<Option<Arc<dyn ExecutionPlan>>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_down(|node| {
        let rewritten = match node.downcast_ref::<AggregateExec>() {
            Some(agg) => rewrite(agg)?,
            None => None,
        };
        Ok(match rewritten {
            Some(new) => Transformed::new(new, true, TreeNodeRecursion::Jump),
            None => Transformed::no(node),
        })
    })
    .data()
}

/// Whether `agg` is a first-phase aggregation (`Partial` or `Single`) without a limit, dynamic
/// filters or grouping sets: the only kind the rewrites of this module and
/// [`crate::distinct`] replace.
pub(crate) fn is_plain_first_phase(agg: &AggregateExec) -> bool {
    matches!(agg.mode(), AggregateMode::Partial | AggregateMode::Single)
        && agg.limit_options().is_none()
        && agg.dynamic_expressions_produced().is_empty()
        && agg.group_expr().is_single()
        && agg.group_expr().null_expr().is_empty()
}

/// The replacement of `agg`, when it has one of the shapes of the module docs.
fn rewrite(agg: &AggregateExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if !is_plain_first_phase(agg) {
        return Ok(None);
    }
    let input_schema = agg.input().schema();
    match agg.group_expr().expr() {
        [(expr, _)] => {
            let Some(col) = expr.downcast_ref::<Column>() else {
                return Ok(None);
            };
            if input_schema.field(col.index()).data_type() != &DataType::Utf8 {
                return Ok(None);
            }
            let uses_column = |e: &Arc<dyn PhysicalExpr>| {
                collect_columns(e).iter().any(|c| c.index() == col.index())
            };
            let supported = agg.aggr_expr().iter().all(|a| {
                a.groups_accumulator_supported()
                    && !a.is_distinct()
                    && a.order_bys().is_empty()
                    && !a.expressions().iter().any(uses_column)
            }) && !agg.filter_expr().iter().flatten().any(uses_column);
            if !supported {
                return Ok(None);
            }
            let names = [col.name().to_string()];
            let Some(input) = dictionary_input(agg.input(), &names)? else {
                return Ok(None);
            };
            Ok(Some(Arc::new(DictionaryGroupAggregateExec {
                input,
                group_index: col.index(),
                group_name: col.name().to_string(),
                mode: *agg.mode(),
                aggr_expr: agg.aggr_expr().to_vec(),
                filter_expr: agg.filter_expr().to_vec(),
                schema: agg.schema(),
                properties: Arc::clone(agg.properties()),
                metrics: ExecutionPlanMetricsSet::new(),
            })))
        }
        [] => {
            let mut names: Vec<String> = Vec::new();
            for a in agg.aggr_expr() {
                let args = a.expressions();
                let column = match args.as_slice() {
                    [arg] => arg.downcast_ref::<Column>(),
                    _ => None,
                };
                let Some(column) = column else {
                    return Ok(None);
                };
                if a.fun().name() != "approx_count_distinct"
                    || input_schema.field(column.index()).data_type() != &DataType::Utf8
                {
                    return Ok(None);
                }
                names.push(column.name().to_string());
            }
            if names.is_empty() || agg.filter_expr().iter().any(Option::is_some) {
                return Ok(None);
            }
            let Some(input) = dictionary_input(agg.input(), &names)? else {
                return Ok(None);
            };
            let new = AggregateExec::try_new(
                *agg.mode(),
                agg.group_expr().clone(),
                agg.aggr_expr().to_vec(),
                agg.filter_expr().to_vec(),
                Arc::clone(&input),
                input.schema(),
            )?;
            Ok(Some(Arc::new(new)))
        }
        _ => Ok(None),
    }
}

/// `plan` reading the columns `names` as dictionaries, when it is a segment scan or filters
/// (not using those columns) over one.
fn dictionary_input(
    plan: &Arc<dyn ExecutionPlan>,
    names: &[String],
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        if references(filter.predicate(), names) {
            return Ok(None);
        }
        let Some(child) = dictionary_input(filter.input(), names)? else {
            return Ok(None);
        };
        #[expect(deprecated, reason = "FilterExec implements only with_new_children")]
        let rebuilt = Arc::clone(plan).with_new_children(vec![child])?;
        return Ok(Some(rebuilt));
    }
    if let Some(repartition) = plan.downcast_ref::<RepartitionExec>() {
        // Round-robin spreading of a scan's batches over more partitions (hash partitioning
        // is left alone: its expressions were planned for strings).
        if !matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_)) {
            return Ok(None);
        }
        let Some(child) = dictionary_input(repartition.input(), names)? else {
            return Ok(None);
        };
        #[expect(
            deprecated,
            reason = "RepartitionExec implements only with_new_children"
        )]
        let rebuilt = Arc::clone(plan).with_new_children(vec![child])?;
        return Ok(Some(rebuilt));
    }
    if plan.downcast_ref::<UnionExec>().is_some() {
        // Each input read as dictionaries where it can be, cast to them where it cannot (a
        // hydrant, a segment whose dictionary overflowed): worth it when one input can.
        let mut any = false;
        let mut children = Vec::new();
        for child in plan.children() {
            match dictionary_input(child, names)? {
                Some(c) => {
                    any = true;
                    children.push(c);
                }
                None => match cast_to_dictionaries(child, names)? {
                    Some(c) => children.push(c),
                    None => return Ok(None),
                },
            }
        }
        if !any {
            return Ok(None);
        }
        return Ok(Some(UnionExec::try_new(children)?));
    }
    match plan.downcast_ref::<DataSourceExec>() {
        Some(scan) => dictionary_scan(scan, names),
        None => Ok(None),
    }
}

/// `plan` with its plain string columns named in `names` cast to [`dictionary_type`];
/// `None` when one of them is not a plain string column of `plan`.
fn cast_to_dictionaries(
    plan: &Arc<dyn ExecutionPlan>,
    names: &[String],
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let schema = plan.schema();
    let ok = names.iter().all(|n| {
        schema
            .field_with_name(n)
            .is_ok_and(|f| f.data_type() == &DataType::Utf8)
    });
    if !ok {
        return Ok(None);
    }
    let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let col: Arc<dyn PhysicalExpr> = Arc::new(Column::new(f.name(), i));
            let expr: Arc<dyn PhysicalExpr> = if names.iter().any(|n| n == f.name()) {
                Arc::new(CastExpr::new(col, dictionary_type(), None))
            } else {
                col
            };
            (expr, f.name().clone())
        })
        .collect();
    Ok(Some(Arc::new(ProjectionExec::try_new(
        exprs,
        Arc::clone(plan),
    )?)))
}

/// Whether `expr` reads a column named in `names`.
fn references(expr: &Arc<dyn PhysicalExpr>, names: &[String]) -> bool {
    collect_columns(expr)
        .iter()
        .any(|c| names.iter().any(|n| n == c.name()))
}

/// `schema` with the plain string fields named in `names` typed [`dictionary_type`] (and
/// without the [`DICTIONARY_COLUMNS_KEY`] metadata).
fn with_dictionaries(schema: &Schema, names: &[String]) -> SchemaRef {
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|f| {
            if f.data_type() == &DataType::Utf8 && names.iter().any(|n| n == f.name()) {
                Arc::new(
                    Field::new(f.name(), dictionary_type(), f.is_nullable())
                        .with_metadata(f.metadata().clone()),
                )
            } else {
                Arc::clone(f)
            }
        })
        .collect();
    let mut metadata = schema.metadata().clone();
    metadata.remove(DICTIONARY_COLUMNS_KEY);
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// A segment scan like `scan` that reads the string columns `names` as dictionaries; `None`
/// when `scan` is not a Dolmen segment scan (a Parquet scan whose files all carry their Arrow
/// schema), projects expressions, or has a predicate reading those columns.
fn dictionary_scan(
    scan: &DataSourceExec,
    names: &[String],
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(config) = scan.data_source().downcast_ref::<FileScanConfig>() else {
        return Ok(None);
    };
    let Some(parquet) = config.file_source().downcast_ref::<ParquetSource>() else {
        return Ok(None);
    };
    let segment_files = !config.file_groups.is_empty()
        && config.file_groups.iter().all(|g| {
            g.iter().all(|f| {
                f.arrow_schema
                    .as_ref()
                    .is_some_and(|s| dictionary_encoded(s, names))
            })
        });
    let predicate = parquet.filter();
    if !segment_files || predicate.as_ref().is_some_and(|p| references(p, names)) {
        return Ok(None);
    }
    let table_schema = config.file_schema();
    let plain_strings = names.iter().all(|n| {
        table_schema
            .field_with_name(n)
            .is_ok_and(|f| f.data_type() == &DataType::Utf8)
    });
    if !plain_strings || !config.table_partition_cols().is_empty() {
        return Ok(None);
    }
    // Only plain column projections (the names stay those of the table).
    let mut indices = Vec::new();
    if let Some(projection) = parquet.projection() {
        for p in projection.iter() {
            match p.expr.downcast_ref::<Column>() {
                Some(c) if c.name() == p.alias => indices.push(c.index()),
                _ => return Ok(None),
            }
        }
    } else {
        indices.extend(0..table_schema.fields().len());
    }
    let mut source = ParquetSource::new(with_dictionaries(table_schema, names))
        .with_table_parquet_options(parquet.table_parquet_options().clone());
    if let Some(factory) = parquet.parquet_file_reader_factory() {
        source = source.with_parquet_file_reader_factory(Arc::clone(factory));
    }
    if let Some(predicate) = predicate {
        source = source.with_predicate(predicate);
    }
    let groups = config
        .file_groups
        .iter()
        .map(|g| {
            FileGroup::new(
                g.iter()
                    .map(|f| {
                        let mut f = f.clone();
                        f.arrow_schema = f.arrow_schema.map(|s| with_dictionaries(&s, names));
                        f
                    })
                    .collect(),
            )
        })
        .collect();
    let config = FileScanConfigBuilder::from(config.clone())
        .with_source(Arc::new(source))
        .with_file_groups(groups)
        .with_projection_indices(Some(indices))?
        .build();
    Ok(Some(DataSourceExec::from_data_source(config)))
}

/// A `Partial` or `Single` aggregation grouped by one dictionary-encoded string column (see
/// the [module docs](self)). Output: the replaced `AggregateExec`'s schema, one batch per
/// partition: the group values as strings (null group last seen order), then each
/// aggregate's state (`Partial`) or value (`Single`).
#[derive(Debug)]
pub struct DictionaryGroupAggregateExec {
    input: Arc<dyn ExecutionPlan>,
    group_index: usize,
    group_name: String,
    mode: AggregateMode,
    aggr_expr: Vec<Arc<AggregateFunctionExpr>>,
    filter_expr: Vec<Option<Arc<dyn PhysicalExpr>>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl DisplayAs for DictionaryGroupAggregateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let aggs: Vec<&str> = self.aggr_expr.iter().map(|a| a.name()).collect();
        write!(
            f,
            "DictionaryGroupAggregateExec: mode={:?}, gby=[{}], aggr=[{}]",
            self.mode,
            self.group_name,
            aggs.join(", ")
        )
    }
}

impl ExecutionPlan for DictionaryGroupAggregateExec {
    fn name(&self) -> &str {
        "DictionaryGroupAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let args = self.aggr_expr.iter().flat_map(|a| a.expressions());
        let filters = self.filter_expr.iter().flatten().cloned();
        for e in args.chain(filters) {
            if f(&e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[_; 1]>::try_from(children).map_err(|_| {
            datafusion::error::DataFusionError::Internal(
                "DictionaryGroupAggregateExec takes one child".into(),
            )
        })?;
        Ok(Arc::new(DictionaryGroupAggregateExec {
            input,
            group_index: self.group_index,
            group_name: self.group_name.clone(),
            mode: self.mode,
            aggr_expr: self.aggr_expr.clone(),
            filter_expr: self.filter_expr.clone(),
            schema: Arc::clone(&self.schema),
            properties: Arc::clone(&self.properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut input = self.input.execute(partition, context)?;
        let accumulators = self
            .aggr_expr
            .iter()
            .map(|a| a.create_groups_accumulator())
            .collect::<Result<Vec<_>>>()?;
        let mut state = GroupState {
            group_index: self.group_index,
            args: self.aggr_expr.iter().map(|a| a.expressions()).collect(),
            filters: self.filter_expr.clone(),
            accumulators,
            groups: HashMap::new(),
            values: StringBuilder::new(),
            null_group: None,
            num_groups: 0,
            memo: DictionaryMemo::default(),
        };
        let schema = Arc::clone(&self.schema);
        let partial = matches!(self.mode, AggregateMode::Partial);
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let out_schema = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let _timer = baseline.elapsed_compute().timer();
                state.update(&batch)?;
            }
            let _timer = baseline.elapsed_compute().timer();
            let out = state.emit(&out_schema, partial)?;
            baseline.record_output(out.num_rows());
            Ok(out)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// One partition's groups and accumulators.
struct GroupState {
    group_index: usize,
    args: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    filters: Vec<Option<Arc<dyn PhysicalExpr>>>,
    accumulators: Vec<Box<dyn GroupsAccumulator>>,
    /// Group id of each value seen.
    groups: HashMap<String, usize>,
    /// The group values in group-id order (null for the null group).
    values: StringBuilder,
    null_group: Option<usize>,
    num_groups: usize,
    /// Group ids of the values of the last dictionary seen.
    memo: DictionaryMemo<usize>,
}

impl GroupState {
    fn num_groups(&self) -> usize {
        self.num_groups
    }

    fn group_of(&mut self, value: Option<&str>) -> usize {
        let next = self.num_groups();
        match value {
            None => *self.null_group.get_or_insert_with(|| {
                self.values.append_null();
                self.num_groups += 1;
                next
            }),
            Some(v) => {
                if let Some(g) = self.groups.get(v) {
                    return *g;
                }
                self.groups.insert(v.to_string(), next);
                self.values.append_value(v);
                self.num_groups += 1;
                next
            }
        }
    }

    /// The group id of each value of `strings` (any string type), value by value.
    fn group_ids(&mut self, strings: &ArrayRef) -> Result<Vec<usize>> {
        let strings = cast(strings, &DataType::Utf8)?;
        let strings = strings.as_string::<i32>();
        Ok((0..strings.len())
            .map(|i| self.group_of(strings.is_valid(i).then(|| strings.value(i))))
            .collect())
    }

    fn update(&mut self, batch: &RecordBatch) -> Result<()> {
        let column = batch.column(self.group_index);
        let group_ids: Vec<usize> = match column.as_dictionary_opt::<Int32Type>() {
            Some(dict) => {
                // A value gets its group when a row holds it: a dictionary also lists values
                // whose rows were filtered out (a row selection, a `FilterExec` below), and
                // those must not become groups.
                let values = dict.values();
                let mut ids = self
                    .memo
                    .take(values)
                    .unwrap_or_else(|| vec![UNASSIGNED; values.len()]);
                let mut strings: Option<ArrayRef> = None;
                let keys = dict.keys();
                let mut out = Vec::with_capacity(keys.len());
                let mut assign = |this: &mut Self, ids: &mut [usize], k: usize| -> Result<usize> {
                    let s = match &strings {
                        Some(s) => s,
                        None => strings.insert(cast(values, &DataType::Utf8)?),
                    };
                    let s = s.as_string::<i32>();
                    ids[k] = this.group_of(s.is_valid(k).then(|| s.value(k)));
                    Ok(ids[k])
                };
                if keys.null_count() == 0 {
                    // The common case (a dimension without nulls in this batch): a tight loop
                    // over the key slice, no validity test per row.
                    for &k in keys.values().iter() {
                        let k = k as usize;
                        let g = ids[k];
                        out.push(if g == UNASSIGNED {
                            assign(self, &mut ids, k)?
                        } else {
                            g
                        });
                    }
                } else {
                    for i in 0..keys.len() {
                        if keys.is_null(i) {
                            out.push(self.group_of(None));
                            continue;
                        }
                        let k = keys.value(i) as usize;
                        let g = ids[k];
                        out.push(if g == UNASSIGNED {
                            assign(self, &mut ids, k)?
                        } else {
                            g
                        });
                    }
                }
                self.memo.set(values, ids);
                out
            }
            // A file that lacks the column yields nulls of the table type; anything else is
            // taken value by value.
            None => self.group_ids(column)?,
        };
        let total = self.num_groups();
        for ((acc, args), filter) in self
            .accumulators
            .iter_mut()
            .zip(&self.args)
            .zip(&self.filters)
        {
            let values = args
                .iter()
                .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
                .collect::<Result<Vec<_>>>()?;
            let filter = match filter {
                Some(f) => {
                    let a = f.evaluate(batch)?.into_array(batch.num_rows())?;
                    Some(a.as_boolean().clone())
                }
                None => None,
            };
            acc.update_batch(&values, &group_ids, filter.as_ref(), total)?;
        }
        Ok(())
    }

    fn emit(&mut self, schema: &SchemaRef, partial: bool) -> Result<RecordBatch> {
        let keys: ArrayRef = Arc::new(self.values.finish());
        let keys = cast(&keys, schema.field(0).data_type())?;
        let mut columns = vec![keys];
        for acc in &mut self.accumulators {
            if partial {
                columns.extend(acc.state(EmitTo::All)?);
            } else {
                columns.push(acc.evaluate(EmitTo::All)?);
            }
        }
        // The accumulators' arrays may differ from the declared types only in nullability
        // metadata; the schema is the replaced aggregate's.
        Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
    }
}

/// The group id of a dictionary value no row has shown yet.
const UNASSIGNED: usize = usize::MAX;
