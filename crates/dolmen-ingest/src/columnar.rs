//! The columnar (vectorized) batch build: reads input files as Arrow batches in parallel,
//! parses timestamps and converts values a batch at a time, rolls up, partitions by time chunk,
//! sorts and writes segment files, all on DataFusion's execution engine.
//!
//! # Why DataFusion here
//! Parallel range-split scans of CSV/TSV/NDJSON/Parquet files, hash aggregation and sorting with
//! spilling to disk under a memory budget are exactly what a query engine already does well;
//! Dolmen's own part is the Druid semantics: the timestamp spec, the value conversions of Druid's
//! dimension handlers, `queryGranularity` bucketing, `granularitySpec.intervals`, the time-chunk
//! partitioning and the segment layout. Those are DataFusion scalar functions defined below
//! (`IngestTimeUdf`, `ConvertUdf`, `BucketUdf`) that call the same code the row path uses.
//!
//! # The plan
//! ```text
//! scan(files, target_partitions = cores)            -- range splits, one stream per core
//!   -> project  chunk, __time, dims..., metric inputs   (UDFs; rows outside intervals -> null)
//!   -> filter   __time IS NOT NULL
//!   -> [aggregate GROUP BY chunk, __time, dims  (rollup)]
//!   -> repartition hash(chunk) into 8 streams per core (fewer on a small memory budget)
//!   -> sort per stream by __time[, dims]          (spills to the task's work dir)
//!   -> per stream: cut at chunk changes and maxRowsPerSegment, write Parquet segment files
//! ```
//! Memory is bounded by the memory pool (`tuningConfig.maxBytesInMemory`, default a sixth of
//! physical memory, Druid's rule of a sixth of the heap); sort and aggregation spill beyond it.
//! The pool is `crate::memory_pool`'s fair pool that lends idle shares, because time chunks
//! hash to sort streams unevenly.
//!
//! # When it applies, and the fallback
//! [`plan`] decides whether a spec is eligible: local files in `json` (no `flattenSpec` fields),
//! `csv`, `tsv` (one-byte delimiter) or `parquet` (no `flattenSpec`), no `transformSpec`,
//! metrics that read a field (not an expression), single-valued dimensions, `dynamic`
//! partitioning. Everything else uses the row-by-row path in `task.rs`.
//!
//! Druid counts a bad row as a parse exception and goes on; a vectorized decoder rejects the
//! whole batch. So the columnar build treats any data error (an unparseable timestamp or number,
//! a JSON value of an unexpected type, a ragged CSV line, a multi-value array) as "this input
//! needs row-by-row treatment": it discards what it wrote and returns [`Outcome::Fallback`], and
//! the caller runs the row path, which applies Druid's exact per-row rules and accounting. Clean
//! input, the common case, takes the fast path; dirty input still gets exactly Druid's answer.
//!
//! # Differences from the row path, by design
//! * Without rollup, rows in a segment are sorted by `__time` only (ties in input order are not
//!   preserved), not by `__time` then dimensions: sorting on every dimension costs more than it
//!   gains when no rows are combined. With rollup, the order is `__time` then dimensions, as in
//!   Druid.
//! * Schema discovery over CSV/TSV/Parquet takes every column of the file schema (except the
//!   timestamp column, metric names and inputs, and `dimensionExclusions`), including columns
//!   that hold only nulls; JSON schema discovery uses the row path.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float32Array, Float64Array, Int64Array, StringArray,
};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{
    DataType, Field, FieldRef, Float32Type, Float64Type, Int64Type, Schema, SchemaRef, TimeUnit,
};
use arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue, exec_err};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::physical_expr::expressions::col as pcol;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, execute_stream_partitioned};
use datafusion::prelude::{DataFrame, ParquetReadOptions, SessionConfig, SessionContext, col, lit};
use dolmen_common::time::PreparedGranularity;
use dolmen_common::{Granularity, Interval};
use dolmen_segment::{ColumnKind, ColumnType, SegmentColumn, SegmentFileWriter, SegmentSchema};
use futures::StreamExt;
use parquet::basic::Compression;
use tokio_util::sync::CancellationToken;

use crate::IngestError;
use crate::index::{BuiltSegment, DimSlot};
use crate::input::ranges::DelimitedText;
use crate::input::{InputEntity, InputFormat};
use crate::memory_pool::LendingFairPool;
use crate::rows::MetricKind;
use crate::spec::{DimensionSchema, IndexTaskSpec, MetricSpec};
use crate::task::RowStats;
use crate::timestamp::TimestampParser;

/// Internal column holding each row's time-chunk start (epoch ms).
const CHUNK: &str = "__dolmen_chunk";

/// What [`build`] produced.
#[derive(Debug)]
pub enum Outcome {
    /// The segments were built.
    Built(Vec<BuiltSegment>),
    /// The input needs the row-by-row path; the reason is for the task log.
    Fallback(String),
}

/// A spec the columnar build can run, with everything resolved up front.
#[derive(Debug)]
pub struct ColumnarPlan {
    files: Vec<PathBuf>,
    total_bytes: u64,
    source: SourceKind,
    dims: Vec<DimSlot>,
    metrics: Vec<MetricPlan>,
    ts: TimestampParser,
    rollup: bool,
    query_granularity: Granularity,
    segment_granularity: Granularity,
    intervals: Vec<Interval>,
    max_rows_per_segment: u64,
    compression: Compression,
    memory_bytes: usize,
    threads: usize,
}

#[derive(Debug)]
enum SourceKind {
    /// CSV or TSV: every column read as text, in file order.
    Delimited {
        columns: Vec<String>,
        header: bool,
        delimiter: u8,
        quote: u8,
    },
    /// NDJSON with an explicit schema of the needed fields, typed from a sample of each file.
    Json { types: Vec<(String, DataType)> },
    /// Parquet with its own schema.
    Parquet { schema: SchemaRef },
}

#[derive(Debug, Clone)]
struct MetricPlan {
    name: String,
    kind: MetricKind,
    field: Option<String>,
    rollup: Combine,
}

/// How rows' metric values combine under rollup.
#[derive(Debug, Clone, Copy)]
enum Combine {
    Sum,
    Min,
    Max,
}

impl ColumnarPlan {
    /// Input size in bytes (for the report's `processedBytes`).
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The dimensions the segments get.
    pub fn dimensions(&self) -> &[DimSlot] {
        &self.dims
    }
}

/// Decides whether `spec` can take the columnar build over `entities`; `Err` carries the
/// reason it cannot (for the task log).
///
/// `threads` is the parallelism (`maxNumConcurrentSubTasks` capped by the cores).
///
/// # Errors
/// A human-readable reason when the spec needs the row path.
pub fn plan(
    spec: &IndexTaskSpec,
    entities: &[InputEntity],
    threads: usize,
) -> Result<ColumnarPlan, String> {
    let ds = &spec.spec.data_schema;
    let io = &spec.spec.io_config;
    let tuning = &spec.spec.tuning_config;
    if !ds.transform_spec.transforms.is_empty() || ds.transform_spec.filter.is_some() {
        return Err("transformSpec needs per-row evaluation".into());
    }
    let mut files = Vec::with_capacity(entities.len());
    let mut total_bytes = 0;
    for e in entities {
        match e {
            InputEntity::File(path) => {
                if is_gzip(path) {
                    return Err(format!("[{}] is compressed", path.display()));
                }
                files.push(path.clone());
                total_bytes += e.size_bytes();
            }
            _ => return Err("input source is not local files".into()),
        }
    }
    if files.is_empty() {
        return Err("no input files".into());
    }
    let ts = TimestampParser::new(&ds.timestamp_spec).map_err(|e| e.to_string())?;

    let mut metrics = Vec::new();
    for m in &ds.metrics_spec {
        let rollup = match m {
            MetricSpec::Count(_)
            | MetricSpec::LongSum(_)
            | MetricSpec::DoubleSum(_)
            | MetricSpec::FloatSum(_) => Combine::Sum,
            MetricSpec::LongMin(_) | MetricSpec::DoubleMin(_) => Combine::Min,
            MetricSpec::LongMax(_) | MetricSpec::DoubleMax(_) => Combine::Max,
            _ => return Err(format!("metric [{}] needs the row path", m.name())),
        };
        let kind = MetricKind::of(m);
        let field = match m.input() {
            (Some(f), _) => Some(f.to_string()),
            (None, Some(_)) => return Err(format!("metric [{}] uses an expression", m.name())),
            (None, None) => None,
        };
        if kind != MetricKind::Count && field.is_none() {
            return Err(format!("metric [{}] has no fieldName", m.name()));
        }
        metrics.push(MetricPlan {
            name: m.name().to_string(),
            kind,
            field,
            rollup,
        });
    }

    let dspec = &ds.dimensions_spec;
    let mut dims = Vec::new();
    for d in &dspec.dimensions {
        let ty = match d {
            DimensionSchema::Name(_) => ColumnType::String,
            DimensionSchema::Typed(t) => {
                if t.multi_value_handling.is_some() {
                    return Err(format!("dimension [{}] sets multiValueHandling", t.name));
                }
                match t.dim_type.as_str() {
                    "long" => ColumnType::Long,
                    "float" => ColumnType::Float,
                    "double" => ColumnType::Double,
                    "string" => ColumnType::String,
                    other => return Err(format!("dimension type [{other}]")),
                }
            }
        };
        dims.push(DimSlot {
            name: d.name().to_string(),
            ty,
        });
    }
    let discover = dspec.dimensions.is_empty() || dspec.include_all_dimensions;
    if discover && dspec.use_schema_discovery {
        return Err("typed schema discovery needs the row path".into());
    }
    let excluded = crate::task::discovery_exclusions(spec);

    let source = match &io.input_format {
        InputFormat::Csv { .. } | InputFormat::Tsv { .. } => {
            let text = DelimitedText::of(&io.input_format, &files)?;
            // Values holding the default delimiter are checked per batch (druid_single_valued);
            // any other one makes values multi-value.
            if text.list_delimiter != crate::input::DEFAULT_LIST_DELIMITER {
                return Err("listDelimiter (multi-value) needs the row path".into());
            }
            SourceKind::Delimited {
                columns: text.columns,
                header: text.header,
                delimiter: text.delimiter,
                quote: text.quote,
            }
        }
        InputFormat::Json { flatten_spec, .. } => {
            if flatten_has_fields(flatten_spec.as_ref()) {
                return Err("flattenSpec fields need the row path".into());
            }
            if discover {
                return Err("JSON schema discovery needs the row path".into());
            }
            let mut wanted: Vec<&str> = vec![ts.column()];
            wanted.extend(dims.iter().map(|d| d.name.as_str()));
            wanted.extend(metrics.iter().filter_map(|m| m.field.as_deref()));
            SourceKind::Json {
                types: sample_json_types(&files, &wanted)?,
            }
        }
        InputFormat::Parquet {
            flatten_spec,
            binary_as_string,
        } => {
            if flatten_has_fields(flatten_spec.as_ref()) {
                return Err("flattenSpec fields need the row path".into());
            }
            let schema = parquet_schema(&files)?;
            for f in schema.fields() {
                let needed = !excluded.contains(f.name()) && discover
                    || dims.iter().any(|d| &d.name == f.name())
                    || f.name() == ts.column()
                    || metrics.iter().any(|m| m.field.as_deref() == Some(f.name()));
                if needed && !flat_type(f.data_type(), binary_as_string.unwrap_or(false)) {
                    return Err(format!("parquet column [{}] is nested or binary", f.name()));
                }
            }
            SourceKind::Parquet { schema }
        }
        #[allow(unreachable_patterns)]
        _ => return Err("input format needs the row path".into()),
    };

    if discover {
        let known: Vec<String> = match &source {
            SourceKind::Delimited { columns, .. } => columns.clone(),
            SourceKind::Parquet { schema } => {
                schema.fields().iter().map(|f| f.name().clone()).collect()
            }
            SourceKind::Json { .. } => Vec::new(),
        };
        for c in known {
            if !excluded.contains(&c)
                && !crate::index::is_hidden_column(&c)
                && !dims.iter().any(|d| d.name == c)
            {
                dims.push(DimSlot {
                    name: c,
                    ty: ColumnType::String,
                });
            }
        }
    }
    let mut seen = HashSet::new();
    for d in &dims {
        if !seen.insert(d.name.as_str()) || d.name == CHUNK || d.name == crate::TIME_COLUMN {
            return Err(format!("dimension name [{}] needs the row path", d.name));
        }
    }

    let g = &ds.granularity_spec;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.clamp(1, cores.max(1));
    Ok(ColumnarPlan {
        files,
        total_bytes,
        source,
        dims,
        metrics,
        ts,
        rollup: g.rollup,
        query_granularity: g.query_granularity.clone(),
        segment_granularity: g.segment_granularity.clone(),
        intervals: g.intervals.clone(),
        max_rows_per_segment: tuning.rows_per_segment(),
        compression: dolmen_segment::file::compression_for(tuning.compression().as_deref()),
        memory_bytes: memory_budget(tuning.max_bytes_in_memory),
        threads,
    })
}

/// The DataFusion memory pool size: `maxBytesInMemory` when positive, else a sixth of physical
/// memory (Druid's default is a sixth of the JVM heap), at least 64 MiB.
pub fn memory_budget(max_bytes_in_memory: Option<i64>) -> usize {
    const MIN: usize = 64 << 20;
    if let Some(b) = max_bytes_in_memory.filter(|b| *b > 0) {
        return usize::try_from(b).unwrap_or(usize::MAX).max(MIN);
    }
    (physical_memory() / 6).max(MIN)
}

/// Physical memory in bytes (`MemTotal` of `/proc/meminfo`; 1 GiB when unknown).
pub(crate) fn physical_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024)
}

fn flatten_has_fields(spec: Option<&serde_json::Value>) -> bool {
    let Some(s) = spec else { return false };
    let fields = s
        .get("fields")
        .and_then(|f| f.as_array())
        .is_some_and(|a| !a.is_empty());
    let no_discovery = s.get("useFieldDiscovery").and_then(|v| v.as_bool()) == Some(false);
    fields || no_discovery
}

fn flat_type(dt: &DataType, binary_as_string: bool) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float32
        | DataType::Float64
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64 => true,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => binary_as_string,
        DataType::Dictionary(_, v) => flat_type(v, binary_as_string),
        _ => false,
    }
}

fn is_gzip(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == [0x1f, 0x8b])
}

fn parquet_schema(files: &[PathBuf]) -> Result<SchemaRef, String> {
    let mut first: Option<SchemaRef> = None;
    for f in files {
        let file = std::fs::File::open(f).map_err(|e| format!("[{}]: {e}", f.display()))?;
        let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| format!("[{}]: {e}", f.display()))?;
        let schema = Arc::clone(builder.schema());
        match &first {
            None => first = Some(schema),
            Some(s) if s.fields() == schema.fields() => {}
            Some(_) => return Err("parquet files have different schemas".into()),
        }
    }
    first.ok_or_else(|| "no input files".into())
}

/// Runs the columnar build of `plan` into segment files under `work_dir`.
///
/// Counters in `stats` advance as batches are read. Returns [`Outcome::Fallback`] (after
/// removing its files and resetting the counters it moved) when the input needs the row path.
///
/// # Errors
/// [`IngestError::Canceled`] when `cancel` fires; [`IngestError::Runtime`] when the build
/// engine cannot start.
pub fn build(
    plan: &ColumnarPlan,
    work_dir: &Path,
    stats: &RowStats,
    cancel: &CancellationToken,
) -> Result<Outcome, IngestError> {
    let dir = work_dir.join("columnar");
    std::fs::create_dir_all(&dir)
        .map_err(|e| IngestError::Runtime(format!("cannot create [{}]: {e}", dir.display())))?;
    let counters = Arc::new(Counters::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.threads)
        .thread_name("dolmen-ingest")
        .enable_all()
        .build()
        .map_err(|e| IngestError::Runtime(format!("cannot start ingestion threads: {e}")))?;
    // The report's counters follow the scan live (published every 250 ms by a ticker thread)
    // and are taken back if the build falls back to the row path, which counts again.
    let published = Counters::default();
    let publish = |c: &Counters| {
        let seen = c.seen.load(Ordering::Relaxed);
        let kept = c.kept.load(Ordering::Relaxed);
        let d_kept = kept - published.kept.swap(kept, Ordering::Relaxed);
        let d_seen = seen - published.seen.swap(seen, Ordering::Relaxed);
        stats.processed.fetch_add(d_kept, Ordering::Relaxed);
        stats
            .thrown_away
            .fetch_add(d_seen - d_kept, Ordering::Relaxed);
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        let ticker = scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                std::thread::park_timeout(std::time::Duration::from_millis(250));
                publish(&counters);
            }
        });
        let r = runtime.block_on(run(plan, &dir, Arc::clone(&counters), cancel));
        done.store(true, Ordering::Relaxed);
        ticker.thread().unpark();
        r
    });
    runtime.shutdown_background();
    match result {
        Ok(built) => {
            publish(&counters);
            stats
                .processed_bytes
                .fetch_add(plan.total_bytes, Ordering::Relaxed);
            Ok(Outcome::Built(built))
        }
        Err(e) => {
            let kept = published.kept.load(Ordering::Relaxed);
            let seen = published.seen.load(Ordering::Relaxed);
            stats.processed.fetch_sub(kept, Ordering::Relaxed);
            stats.thrown_away.fetch_sub(seen - kept, Ordering::Relaxed);
            let _ = std::fs::remove_dir_all(&dir);
            if cancel.is_cancelled() {
                return Err(IngestError::Canceled);
            }
            Ok(Outcome::Fallback(e.to_string()))
        }
    }
}

/// Rows the time UDF has seen and kept (inside the intervals).
#[derive(Debug, Default)]
struct Counters {
    seen: AtomicU64,
    kept: AtomicU64,
}

async fn run(
    plan: &ColumnarPlan,
    dir: &Path,
    counters: Arc<Counters>,
    cancel: &CancellationToken,
) -> DfResult<Vec<BuiltSegment>> {
    let partitions = sort_partitions(plan.threads, plan.memory_bytes);
    let config = tune_build_config(SessionConfig::new(), plan.threads, plan.memory_bytes);
    let runtime = build_runtime(plan.memory_bytes, dir)?;
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    let paths: Vec<String> = plan
        .files
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();

    let df = scan(&ctx, plan, paths).await?;
    let time_udf = ScalarUDF::new_from_impl(IngestTimeUdf::new(plan, Arc::clone(&counters)));
    let chunk_udf = ScalarUDF::new_from_impl(BucketUdf::new("chunk", &plan.segment_granularity));
    let ts_col = ident(plan.ts.column());
    let time_expr = time_udf.call(vec![ts_col]);
    // DataFusion's CSV reader turns every empty field into null, as the row path does (Druid's
    // `Strings.emptyToNull` on delimited text).
    let text = matches!(plan.source, SourceKind::Delimited { .. });
    let dim_expr = |d: &DimSlot| {
        let e = input_expr(&d.name, d.ty);
        if text && d.ty == ColumnType::String {
            // The row path splits CSV/TSV values on the default list delimiter even when the
            // spec sets none; a value holding it is multi-value and needs the row path.
            ScalarUDF::new_from_impl(NoListDelimiterUdf::new()).call(vec![e])
        } else {
            e
        }
    };
    let df = df.select(
        vec![time_expr.alias(crate::TIME_COLUMN)]
            .into_iter()
            .chain(plan.dims.iter().map(|d| dim_expr(d).alias(&d.name)))
            .chain(plan.metrics.iter().map(|m| metric_input(m).alias(&m.name)))
            .collect::<Vec<_>>(),
    )?;
    let df = df.filter(col(crate::TIME_COLUMN).is_not_null())?;
    let time = if matches!(plan.query_granularity, Granularity::None) {
        col(crate::TIME_COLUMN)
    } else {
        ScalarUDF::new_from_impl(BucketUdf::new("query", &plan.query_granularity))
            .call(vec![col(crate::TIME_COLUMN)])
    };
    let mut df = df.select(
        vec![
            chunk_udf.call(vec![time.clone()]).alias(CHUNK),
            time.alias(crate::TIME_COLUMN),
        ]
        .into_iter()
        .chain(plan.dims.iter().map(|d| ident(&d.name)))
        .chain(plan.metrics.iter().map(|m| ident(&m.name)))
        .collect::<Vec<_>>(),
    )?;
    if plan.rollup {
        let group: Vec<Expr> = [ident(CHUNK), ident(crate::TIME_COLUMN)]
            .into_iter()
            .chain(plan.dims.iter().map(|d| ident(&d.name)))
            .collect();
        let aggs: Vec<Expr> = plan
            .metrics
            .iter()
            .map(|m| rollup_expr(m).alias(&m.name))
            .collect();
        df = df.aggregate(group, aggs)?;
    }
    let physical = df.create_physical_plan().await?;
    let sort_after_time = if plan.rollup {
        plan.dims.iter().map(|d| d.name.clone()).collect()
    } else {
        Vec::new()
    };
    let layout = SegmentLayout {
        schema: segment_schema(plan),
        segment_granularity: plan.segment_granularity.clone(),
        max_rows_per_segment: plan.max_rows_per_segment,
        compression: plan.compression,
        sort_after_time,
        partitions,
    };
    write_sorted_segments(physical, ctx.task_ctx(), &layout, dir, cancel).await
}

/// `config` set up for a segment build on `threads` threads within `memory_bytes`: target
/// partitions, large batches (`batch_rows`), file scans split by range, sort runs and merge
/// reservations sized to the budget.
pub fn tune_build_config(
    config: SessionConfig,
    threads: usize,
    memory_bytes: usize,
) -> SessionConfig {
    let threads = threads.max(1);
    let partitions = sort_partitions(threads, memory_bytes);
    let mut config = config
        .with_target_partitions(threads)
        .with_batch_size(batch_rows(memory_bytes, partitions))
        .with_repartition_file_scans(true)
        .with_repartition_file_min_size(4 << 20);
    config.options_mut().execution.parquet.pushdown_filters = false;
    // Each sort partition sorts its buffered batches in runs of up to this size (a batch
    // alone when it is bigger) and merges the runs. Small runs sort within the CPU's caches
    // and need no concatenation first; see [`SORT_RUN_BYTES`].
    config.options_mut().execution.sort_in_place_threshold_bytes =
        (memory_bytes / threads).clamp(1 << 20, SORT_RUN_BYTES);
    // Each sort partition keeps this much aside for its final merge; DataFusion's default
    // (10 MiB) times the partitions would not fit a small budget.
    config.options_mut().execution.sort_spill_reservation_bytes =
        (memory_bytes / (8 * partitions)).min(10 << 20);
    config
}

/// The runtime of a segment build: `LendingFairPool` of `memory_bytes` (fair shares, so one
/// sort partition cannot take the memory another needs for its first batch, with idle shares
/// lent out because chunks hash to partitions unevenly) and spill files under `dir`.
///
/// # Errors
/// When the runtime cannot be built.
pub fn build_runtime(
    memory_bytes: usize,
    dir: &Path,
) -> DfResult<Arc<datafusion::execution::runtime_env::RuntimeEnv>> {
    RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(LendingFairPool::new(memory_bytes)))
        .with_disk_manager_builder(
            DiskManagerBuilder::default()
                .with_mode(DiskManagerMode::Directories(vec![dir.to_path_buf()])),
        )
        .build_arc()
}

/// Name of the time-chunk column [`write_sorted_segments`] expects first in its input: each
/// row's time-chunk start (epoch ms), see [`chunk_udf`].
pub const CHUNK_COLUMN: &str = CHUNK;

/// `druid_chunk(time_ms)`: the start (epoch ms) of the `granularity` bucket holding each
/// Int64 epoch-ms value; the first column [`write_sorted_segments`] expects.
pub fn chunk_udf(granularity: &Granularity) -> ScalarUDF {
    ScalarUDF::new_from_impl(BucketUdf::new("chunk", granularity))
}

/// How [`write_sorted_segments`] lays rows out in segment files.
#[derive(Debug, Clone)]
pub struct SegmentLayout {
    /// The columns after `__time`, in the order the input carries them.
    pub schema: SegmentSchema,
    /// One segment (or several, see `max_rows_per_segment`) per bucket of this granularity.
    pub segment_granularity: Granularity,
    /// A segment file is cut after this many rows.
    pub max_rows_per_segment: u64,
    /// Parquet compression of the files.
    pub compression: Compression,
    /// Sort keys after `__time` (rows of one segment are ordered by `__time`, then these).
    pub sort_after_time: Vec<String>,
    /// Sort streams (see [`sort_partitions`]); a time chunk always goes to one stream.
    pub partitions: usize,
}

/// Sorts and writes the rows of `input` into segment files under `dir`: hash-partitioned by
/// time chunk into `layout.partitions` streams, each sorted by `__time` then
/// `layout.sort_after_time` (spilling under the memory pool of `task_ctx`), then cut at
/// time-chunk changes and every `max_rows_per_segment` rows.
///
/// `input` yields `[CHUNK_COLUMN Int64, __time Int64 epoch ms, <layout.schema columns>]`;
/// values are cast to the segment types as they are written.
///
/// # Errors
/// Execution errors of `input` or the sort, Parquet encoding errors, and "canceled" when
/// `cancel` fires (the files written so far are left in `dir` for the caller to remove).
pub async fn write_sorted_segments(
    input: Arc<dyn ExecutionPlan>,
    task_ctx: Arc<datafusion::execution::TaskContext>,
    layout: &SegmentLayout,
    dir: &Path,
    cancel: &CancellationToken,
) -> DfResult<Vec<BuiltSegment>> {
    let schema = input.schema();
    let repartitioned: Arc<dyn ExecutionPlan> = Arc::new(RepartitionExec::try_new(
        input,
        Partitioning::Hash(vec![pcol(CHUNK, &schema)?], layout.partitions.max(1)),
    )?);
    // The chunk is a function of `__time` (its floor to segmentGranularity), so sorting by
    // `__time` also groups rows by chunk. Without further keys a single-column sort compares
    // primitives instead of row-encoded keys; DataFusion sorts the buffered batches in runs of
    // up to [`SORT_RUN_BYTES`] and merges them.
    let mut order = vec![PhysicalSortExpr::new_default(pcol(
        crate::TIME_COLUMN,
        &schema,
    )?)];
    for name in &layout.sort_after_time {
        order.push(PhysicalSortExpr::new_default(pcol(name, &schema)?).nulls_first());
    }
    let ordering = LexOrdering::new(order).expect("non-empty ordering");
    let sorted: Arc<dyn ExecutionPlan> =
        Arc::new(SortExec::new(ordering, repartitioned).with_preserve_partitioning(true));
    let streams = execute_stream_partitioned(Arc::clone(&sorted), task_ctx)?;

    let arrow_schema = layout.schema.arrow_schema();
    let mut handles = Vec::with_capacity(streams.len());
    for (p, mut stream) in streams.into_iter().enumerate() {
        let mut writer = SegmentCutter {
            dir: dir.to_path_buf(),
            partition: p,
            seq: 0,
            max_rows: layout.max_rows_per_segment,
            granularity: layout.segment_granularity.clone(),
            compression: layout.compression,
            schema: layout.schema.clone(),
            arrow_schema: Arc::clone(&arrow_schema),
            open: None,
            built: Vec::new(),
        };
        let cancel = cancel.clone();
        handles.push(tokio::spawn(async move {
            while let Some(batch) = stream.next().await {
                if cancel.is_cancelled() {
                    return exec_err!("canceled");
                }
                let batch = batch?;
                // Parquet encoding is CPU work: keep it off the stream's polling.
                writer = tokio::task::spawn_blocking(move || writer.push(&batch).map(|()| writer))
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))??;
            }
            tokio::task::spawn_blocking(move || writer.close())
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        }));
    }
    let mut built = Vec::new();
    for h in handles {
        let segs = h
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
        built.extend(segs);
    }
    built.sort_by_key(|b| (b.interval.start, b.path.clone()));
    if let Some(m) = sorted.metrics() {
        tracing::info!(
            spills = m.spill_count().unwrap_or(0),
            spilled_bytes = m.spilled_bytes().unwrap_or(0),
            sort_ms = m.elapsed_compute().unwrap_or(0) / 1_000_000,
            "sorted rows by time"
        );
    }
    Ok(built)
}

/// Sort partitions for `threads` threads: more than threads, so each partition sorts a smaller
/// share (in cache, sooner) and while one partition's segments are being encoded another is
/// sorting, keeping every thread busy in both stages (measured: 16 partitions on 2 threads cut
/// the 10M-row CSV and Parquet benchmark times by about a fifth against 2). A time chunk still
/// goes to one partition, so one chunk still makes one segment (up to maxRowsPerSegment).
/// Capped at 32 because each partition splits every input batch further, and at one partition
/// per 64 MiB of `memory_bytes` so that each sorts runs of a useful size before it spills (a
/// small budget split 16 ways spills every few hundred rows).
pub fn sort_partitions(threads: usize, memory_bytes: usize) -> usize {
    (threads * 8)
        .min(32)
        .min(memory_bytes / (64 << 20))
        .max(threads)
}

/// Largest sorted run of a sort partition, in bytes (DataFusion's `sort_in_place_threshold_bytes`).
///
/// Measured on the 10M-row benchmark (CPU seconds of the whole build, 2 cores, two runs each):
/// runs of up to 512 MiB (each partition's rows concatenated, then sorted in one piece) took
/// 12.4-13.0 s for NDJSON and 10.1-11.4 s for CSV; runs of 8 MiB (about one 65,536-row batch
/// each, sorted where it is, then merged) 11.5-12.2 s and 9.0-9.1 s; 2 MiB was no better. The
/// gather of a sorted run's rows misses the caches when the run is large, and the merge of a
/// dozen runs per partition costs less than concatenating them.
const SORT_RUN_BYTES: usize = 8 << 20;

/// Rows per record batch: large batches, because every batch costs a call of each conversion
/// function, a split into every sort partition and a sorted run (measured on the 10M-row
/// benchmark: 65,536 rows took a quarter off the CSV and Parquet times against 8,192), but small
/// enough that each sort partition's share of `memory_bytes` holds a few batches of rows up to
/// 1 KiB wide.
fn batch_rows(memory_bytes: usize, partitions: usize) -> usize {
    (memory_bytes / (partitions.max(1) * 4 * 1024)).clamp(8192, 65536)
}

/// A column reference that keeps case and odd characters.
fn ident(name: &str) -> Expr {
    Expr::Column(datafusion::common::Column::new_unqualified(name))
}

async fn scan(
    ctx: &SessionContext,
    plan: &ColumnarPlan,
    paths: Vec<String>,
) -> DfResult<DataFrame> {
    use crate::input::ranges::{RangeTable, TextFormat};
    let batch_rows = ctx.state().config().batch_size();
    let text = |schema: Schema, format: TextFormat| {
        ctx.read_table(Arc::new(RangeTable::new(
            plan.files.clone(),
            Arc::new(schema),
            format,
            batch_rows,
        )))
    };
    match &plan.source {
        SourceKind::Delimited {
            columns,
            header,
            delimiter,
            quote,
        } => {
            let schema = Schema::new(
                columns
                    .iter()
                    .map(|c| Field::new(c, DataType::Utf8, true))
                    .collect::<Vec<_>>(),
            );
            text(
                schema,
                TextFormat::Delimited {
                    delimiter: *delimiter,
                    quote: *quote,
                    header: *header,
                    truncated_rows: false,
                },
            )
        }
        SourceKind::Json { types } => {
            let schema = Schema::new(
                types
                    .iter()
                    .map(|(n, t)| Field::new(n, t.clone(), true))
                    .collect::<Vec<_>>(),
            );
            text(
                schema,
                TextFormat::Json {
                    primitives_as_text: false,
                },
            )
        }
        SourceKind::Parquet { schema } => {
            let opts = ParquetReadOptions::default()
                .schema(schema)
                .file_extension("");
            ctx.read_parquet(paths, opts).await
        }
    }
}

/// Lines sampled from the start of each NDJSON file to type its fields.
const JSON_SAMPLE_LINES: usize = 1000;

/// Types the `wanted` NDJSON fields from the first [`JSON_SAMPLE_LINES`] lines of each file:
/// all strings -> Utf8, booleans -> Boolean, integers -> Int64, any decimal -> Float64, never
/// seen -> Utf8. Mixed kinds, arrays and objects need the row path (`Err`). A later line that
/// breaks the sampled type fails its batch at decode time, which also sends the task to the row
/// path.
fn sample_json_types(
    files: &[PathBuf],
    wanted: &[&str],
) -> Result<Vec<(String, DataType)>, String> {
    use std::io::BufRead;
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        None,
        Str,
        Bool,
        Int,
        Float,
    }
    let mut seen: Vec<Seen> = vec![Seen::None; wanted.len()];
    for f in files {
        let file = std::fs::File::open(f).map_err(|e| format!("[{}]: {e}", f.display()))?;
        for line in std::io::BufReader::new(file)
            .lines()
            .take(JSON_SAMPLE_LINES)
        {
            let line = line.map_err(|e| format!("[{}]: {e}", f.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| format!("[{}]: unparseable line: {e}", f.display()))?;
            let Some(obj) = v.as_object() else {
                return Err("a line is not a JSON object".into());
            };
            for (i, name) in wanted.iter().enumerate() {
                let now = match obj.get(*name) {
                    None | Some(serde_json::Value::Null) => continue,
                    Some(serde_json::Value::String(_)) => Seen::Str,
                    Some(serde_json::Value::Bool(_)) => Seen::Bool,
                    Some(serde_json::Value::Number(n)) if n.is_i64() => Seen::Int,
                    Some(serde_json::Value::Number(_)) => Seen::Float,
                    Some(_) => return Err(format!("field [{name}] holds arrays or objects")),
                };
                seen[i] = match (seen[i], now) {
                    (Seen::None, x) => x,
                    (a, b) if a == b => a,
                    (Seen::Int, Seen::Float) | (Seen::Float, Seen::Int) => Seen::Float,
                    _ => return Err(format!("field [{name}] holds values of several types")),
                };
            }
        }
    }
    let mut out: Vec<(String, DataType)> = Vec::new();
    for (name, s) in wanted.iter().zip(seen) {
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        let dt = match s {
            Seen::None | Seen::Str => DataType::Utf8,
            Seen::Bool => DataType::Boolean,
            Seen::Int => DataType::Int64,
            Seen::Float => DataType::Float64,
        };
        out.push((name.to_string(), dt));
    }
    Ok(out)
}

/// A dimension's input converted to its type; an absent column is all nulls.
fn input_expr(name: &str, ty: ColumnType) -> Expr {
    ScalarUDF::new_from_impl(ConvertUdf::new(ty)).call(vec![ident(name)])
}

fn metric_input(m: &MetricPlan) -> Expr {
    match (&m.field, m.kind) {
        (_, MetricKind::Count) => lit(1i64),
        (Some(f), k) => {
            let ty = if k.column_type() == ColumnType::Long {
                ColumnType::Long
            } else {
                ColumnType::Double
            };
            ScalarUDF::new_from_impl(ConvertUdf::new(ty)).call(vec![ident(f)])
        }
        (None, _) => lit(ScalarValue::Int64(None)),
    }
}

fn rollup_expr(m: &MetricPlan) -> Expr {
    use datafusion::functions_aggregate::expr_fn::{max, min, sum};
    let c = ident(&m.name);
    match m.rollup {
        Combine::Sum => sum(c),
        Combine::Min => min(c),
        Combine::Max => max(c),
    }
}

fn segment_schema(plan: &ColumnarPlan) -> SegmentSchema {
    let mut columns: Vec<SegmentColumn> = plan
        .dims
        .iter()
        .map(|d| SegmentColumn::new(d.name.clone(), d.ty, ColumnKind::Dimension))
        .collect();
    for m in &plan.metrics {
        columns.push(SegmentColumn {
            aggregator: m.kind.combining_type().map(str::to_string),
            ..SegmentColumn::new(m.name.clone(), m.kind.column_type(), ColumnKind::Metric)
        });
    }
    SegmentSchema { columns }
}

/// Cuts one sorted stream into segment files at time-chunk changes and every
/// `maxRowsPerSegment` rows.
struct SegmentCutter {
    dir: PathBuf,
    partition: usize,
    seq: usize,
    max_rows: u64,
    granularity: Granularity,
    compression: Compression,
    schema: SegmentSchema,
    arrow_schema: SchemaRef,
    open: Option<(Interval, PathBuf, SegmentFileWriter)>,
    built: Vec<BuiltSegment>,
}

impl SegmentCutter {
    fn push(&mut self, batch: &RecordBatch) -> DfResult<()> {
        let chunk = batch
            .column(0)
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| DataFusionError::Internal("chunk column is not Int64".into()))?;
        let n = batch.num_rows();
        let mut start = 0;
        while start < n {
            let c = chunk.value(start);
            let mut end = start + 1;
            while end < n && chunk.value(end) == c {
                end += 1;
            }
            // Rows [start, end) share a chunk; split further at maxRowsPerSegment.
            let mut at = start;
            while at < end {
                let interval = self.granularity.bucket(c);
                let rotate = match &self.open {
                    None => true,
                    Some((i, _, w)) => *i != interval || w.rows() >= self.max_rows,
                };
                if rotate {
                    self.finish()?;
                    let path = self.dir.join(format!(
                        "segment-{}-{:05}.parquet",
                        self.partition, self.seq
                    ));
                    self.seq += 1;
                    let w = SegmentFileWriter::create(
                        &path,
                        Arc::clone(&self.arrow_schema),
                        self.compression,
                    )
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    self.open = Some((interval, path, w));
                }
                let written = self.open.as_ref().map_or(0, |(_, _, w)| w.rows());
                let room = usize::try_from(self.max_rows - written).unwrap_or(usize::MAX);
                let take = room.min(end - at);
                let slice = self.to_segment_batch(&batch.slice(at, take))?;
                let (_, _, w) = self.open.as_mut().expect("opened above");
                w.write(&slice)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                at += take;
            }
            start = end;
        }
        Ok(())
    }

    /// Drops the chunk column and gives `__time` and float metrics their segment types.
    fn to_segment_batch(&self, b: &RecordBatch) -> DfResult<RecordBatch> {
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(b.num_columns() - 1);
        for (i, field) in self.arrow_schema.fields().iter().enumerate() {
            let c = b.column(i + 1);
            cols.push(if c.data_type() == field.data_type() {
                Arc::clone(c)
            } else {
                cast(c, field.data_type())?
            });
        }
        Ok(RecordBatch::try_new(Arc::clone(&self.arrow_schema), cols)?)
    }

    fn finish(&mut self) -> DfResult<()> {
        if let Some((interval, path, w)) = self.open.take() {
            let rows = w.rows();
            let (size, layout) = w
                .finish_with_layout()
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            self.built.push(BuiltSegment {
                interval,
                path,
                num_rows: rows,
                size,
                schema: self.schema.clone().with_nested_layout(&layout),
            });
        }
        Ok(())
    }

    fn close(mut self) -> DfResult<Vec<BuiltSegment>> {
        self.finish()?;
        Ok(self.built)
    }
}

/// `druid_ingest_time(column)`: the row's timestamp in epoch ms by the task's
/// `timestampSpec` (the row path's parser), null when it falls outside
/// `granularitySpec.intervals`; an unparseable or missing timestamp (without `missingValue`) is
/// an error, which sends the task to the row path. Counts rows seen and kept.
#[derive(Debug)]
struct IngestTimeUdf {
    parser: TimestampParser,
    text_source: bool,
    intervals: Vec<Interval>,
    counters: Arc<Counters>,
    signature: Signature,
}

impl IngestTimeUdf {
    fn new(plan: &ColumnarPlan, counters: Arc<Counters>) -> Self {
        IngestTimeUdf {
            parser: plan.ts.clone(),
            text_source: matches!(plan.source, SourceKind::Delimited { .. }),
            intervals: plan.intervals.clone(),
            counters,
            signature: Signature::any(1, Volatility::Volatile),
        }
    }

    fn keep(&self, t: i64) -> bool {
        self.intervals.is_empty() || self.intervals.iter().any(|i| i.contains_instant(t))
    }
}

impl PartialEq for IngestTimeUdf {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for IngestTimeUdf {}
impl Hash for IngestTimeUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        "druid_ingest_time".hash(state);
    }
}

impl ScalarUDFImpl for IngestTimeUdf {
    fn name(&self) -> &str {
        "druid_ingest_time"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let input = args.args[0].to_array(n)?;
        let mut out = Vec::with_capacity(n);
        let mut valid = Vec::with_capacity(n);
        // In CSV/TSV a null is an empty field: unparseable for the row path, not missing.
        let missing = if self.text_source {
            None
        } else {
            self.parser.missing_value()
        };
        let mut push = |t: Option<i64>| -> DfResult<()> {
            let t = match t.or(missing) {
                Some(t) => t,
                None => {
                    return exec_err!("missing timestamp in column [{}]", self.parser.column());
                }
            };
            let k = self.keep(t);
            out.push(t);
            valid.push(k);
            Ok(())
        };
        match input.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let s = cast(&input, &DataType::Utf8)?;
                for v in s.as_string::<i32>() {
                    match v {
                        None => push(None)?,
                        Some(v) => push(Some(
                            self.parser
                                .parse_text(v)
                                .map_err(|e| DataFusionError::Execution(e.to_string()))?,
                        ))?,
                    }
                }
            }
            DataType::Int64 | DataType::Int32 | DataType::UInt32 | DataType::UInt64 => {
                let a = cast(&input, &DataType::Int64)?;
                for v in a.as_primitive::<Int64Type>() {
                    match v {
                        None => push(None)?,
                        Some(v) => push(Some(
                            self.parser
                                .parse_integer(v)
                                .map_err(|e| DataFusionError::Execution(e.to_string()))?,
                        ))?,
                    }
                }
            }
            DataType::Float64 | DataType::Float32 => {
                let a = cast(&input, &DataType::Float64)?;
                for v in a.as_primitive::<Float64Type>() {
                    match v {
                        None => push(None)?,
                        Some(v) => push(Some(
                            self.parser
                                .parse_float(v)
                                .map_err(|e| DataFusionError::Execution(e.to_string()))?,
                        ))?,
                    }
                }
            }
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => {
                let a = cast(&input, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
                let a = cast(&a, &DataType::Int64)?;
                for v in a.as_primitive::<Int64Type>() {
                    push(v)?;
                }
            }
            DataType::Null => {
                for _ in 0..n {
                    push(None)?;
                }
            }
            other => return exec_err!("timestamp column of type {other}"),
        }
        let kept = valid.iter().filter(|v| **v).count() as u64;
        self.counters.seen.fetch_add(n as u64, Ordering::Relaxed);
        self.counters.kept.fetch_add(kept, Ordering::Relaxed);
        let array = Int64Array::new(
            out.into(),
            Some(BooleanArray::from(valid).values().clone().into()),
        );
        Ok(ColumnarValue::Array(Arc::new(array)))
    }
}

/// `druid_convert_<type>(value)`: a value converted to a dimension or metric type as the row
/// path's `to_val` does (Druid's `DimensionHandlerUtils`): text to numbers with trimming, the
/// empty string to null, doubles truncated to longs, numbers and booleans to text. A value that
/// cannot convert is an error (-> row path, which counts it as `processedWithError`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ConvertUdf {
    ty: ColumnType,
    name: String,
    signature: Signature,
}

impl ConvertUdf {
    fn new(ty: ColumnType) -> Self {
        ConvertUdf {
            ty,
            name: format!("druid_convert_{}", ty.druid_name().to_ascii_lowercase()),
            signature: Signature::any(1, Volatility::Immutable),
        }
    }

    fn out_type(&self) -> DataType {
        match self.ty {
            ColumnType::Long => DataType::Int64,
            ColumnType::Float => DataType::Float32,
            ColumnType::Double => DataType::Float64,
            _ => DataType::Utf8,
        }
    }
}

impl ScalarUDFImpl for ConvertUdf {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(self.out_type())
    }
    fn return_field_from_args(&self, _: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(Field::new(self.name(), self.out_type(), true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let input = args.args[0].to_array(args.number_rows)?;
        Ok(ColumnarValue::Array(convert(&input, self.ty)?))
    }
}

fn convert(input: &ArrayRef, ty: ColumnType) -> DfResult<ArrayRef> {
    let dt = input.data_type();
    if matches!(dt, DataType::Null) {
        return Ok(arrow::array::new_null_array(
            &ConvertUdf::new(ty).out_type(),
            input.len(),
        ));
    }
    let is_text = matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    match ty {
        ColumnType::Long if is_text => {
            let s = cast(input, &DataType::Utf8)?;
            let s = s.as_string::<i32>();
            let out: Int64Array = s
                .iter()
                .map(|v| v.map_or(Ok(None), text_to_i64))
                .collect::<DfResult<_>>()?;
            Ok(Arc::new(out))
        }
        ColumnType::Long => match dt {
            DataType::Float32 | DataType::Float64 => {
                let f = cast(input, &DataType::Float64)?;
                let out: Int64Array = f
                    .as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| v.map(|x| x as i64))
                    .collect();
                Ok(Arc::new(out))
            }
            _ if is_integer(dt) => Ok(cast(input, &DataType::Int64)?),
            DataType::Boolean => Ok(cast(input, &DataType::Int64)?),
            other => exec_err!("cannot convert {other} to LONG"),
        },
        ColumnType::Float | ColumnType::Double => {
            let f = if is_text {
                let s = cast(input, &DataType::Utf8)?;
                let out: Float64Array = s
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.map_or(Ok(None), text_to_f64))
                    .collect::<DfResult<_>>()?;
                Arc::new(out) as ArrayRef
            } else if is_integer(dt)
                || matches!(
                    dt,
                    DataType::Float32 | DataType::Float64 | DataType::Boolean
                )
            {
                cast(input, &DataType::Float64)?
            } else {
                return exec_err!("cannot convert {dt} to a number");
            };
            if ty == ColumnType::Float {
                let out: Float32Array = f
                    .as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| v.map(|x| x as f32))
                    .collect();
                Ok(Arc::new(out))
            } else {
                Ok(f)
            }
        }
        _ => {
            if is_text {
                return Ok(cast(input, &DataType::Utf8)?);
            }
            match dt {
                DataType::Float32 => Ok(Arc::new(float_text(
                    input
                        .as_primitive::<Float32Type>()
                        .iter()
                        .map(|v| v.map(f64::from)),
                ))),
                DataType::Float64 => Ok(Arc::new(float_text(
                    input.as_primitive::<Float64Type>().iter(),
                ))),
                DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
                    let b = cast(input, &DataType::Binary)?;
                    let out: StringArray = b
                        .as_binary::<i32>()
                        .iter()
                        .map(|v| v.map(|x| String::from_utf8_lossy(x).into_owned()))
                        .collect();
                    Ok(Arc::new(out))
                }
                DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => {
                    // Parquet timestamps read by the row path become epoch millis, then text.
                    let ms = cast(input, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
                    Ok(cast(&cast(&ms, &DataType::Int64)?, &DataType::Utf8)?)
                }
                DataType::Dictionary(_, _) => {
                    let values = cast(input, &DataType::Utf8)?;
                    Ok(values)
                }
                _ => Ok(cast(input, &DataType::Utf8)?),
            }
        }
    }
}

fn float_text(values: impl Iterator<Item = Option<f64>>) -> StringArray {
    values
        .map(|v| {
            v.map(|x| {
                serde_json::Number::from_f64(x).map_or_else(|| x.to_string(), |n| n.to_string())
            })
        })
        .collect()
}

fn is_integer(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
    )
}

/// Text to a long as the row path does: trimmed; the empty string is null; a decimal is
/// truncated.
fn text_to_i64(s: &str) -> DfResult<Option<i64>> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Some(i));
    }
    Ok(text_to_f64(t)?.map(|f| f as i64))
}

/// Text to a double as the row path does (`rows::json_to_f64`): trimmed; the empty string is
/// null; anything Rust's `f64` parser rejects is an error.
fn text_to_f64(s: &str) -> DfResult<Option<f64>> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(f) => Ok(Some(f)),
        Err(_) => exec_err!("could not convert value [{s}] to a number"),
    }
}

/// `druid_single_valued(text)`: its argument, or an error when a value holds the default CSV/TSV
/// list delimiter `\u0001` (the value is multi-value for the row path).
#[derive(Debug, PartialEq, Eq, Hash)]
struct NoListDelimiterUdf {
    signature: Signature,
}

impl NoListDelimiterUdf {
    fn new() -> Self {
        NoListDelimiterUdf {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for NoListDelimiterUdf {
    fn name(&self) -> &str {
        "druid_single_valued"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let a = args.args[0].to_array(args.number_rows)?;
        if a.as_string::<i32>().values().contains(&1u8) {
            return exec_err!("a value holds the list delimiter \\u0001 (multi-value)");
        }
        Ok(ColumnarValue::Array(a))
    }
}

/// `druid_bucket_<role>(t)`: the start of `t`'s bucket of a granularity (epoch ms).
#[derive(Debug)]
struct BucketUdf {
    name: String,
    granularity: Granularity,
    prepared: PreparedGranularity,
    signature: Signature,
}

impl BucketUdf {
    fn new(role: &str, granularity: &Granularity) -> Self {
        BucketUdf {
            name: format!("druid_bucket_{role}"),
            granularity: granularity.clone(),
            prepared: granularity.prepared(),
            signature: Signature::exact(vec![DataType::Int64], Volatility::Immutable),
        }
    }
}

impl PartialEq for BucketUdf {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.granularity == other.granularity
    }
}
impl Eq for BucketUdf {}
impl Hash for BucketUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for BucketUdf {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let a = args.args[0].to_array(args.number_rows)?;
        let t = a.as_primitive::<Int64Type>();
        let g = &self.prepared;
        let out: Int64Array = arrow::compute::kernels::arity::unary(t, |v| g.bucket_start(v));
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// Task context key that turns the columnar build off (`false`) for a task: an escape hatch,
/// and how tests compare the two paths.
pub const COLUMNAR_CONTEXT_KEY: &str = "useColumnarIngestion";

/// Runs the columnar build when `spec` is eligible and its input is clean; `None` means the
/// caller must run the row path (the reason is logged to the task log).
///
/// # Errors
/// [`IngestError::Canceled`] when the task is shut down; [`IngestError::Runtime`] when the
/// build engine cannot start.
pub fn try_build(
    spec: &IndexTaskSpec,
    work_dir: &Path,
    stats: &RowStats,
    cancel: &CancellationToken,
) -> Result<Option<Vec<BuiltSegment>>, IngestError> {
    let disabled = spec
        .context
        .as_ref()
        .and_then(|c| c.get(COLUMNAR_CONTEXT_KEY))
        .and_then(serde_json::Value::as_bool)
        == Some(false);
    if disabled {
        tracing::info!("row-by-row ingestion: {COLUMNAR_CONTEXT_KEY} is false");
        return Ok(None);
    }
    // Only local files take the columnar path; do not list remote sources twice.
    if !matches!(
        spec.spec.io_config.input_source,
        crate::input::InputSource::Local { .. }
    ) {
        tracing::info!("row-by-row ingestion: the input source is not local files");
        return Ok(None);
    }
    let entities = match spec.spec.io_config.input_source.entities() {
        Ok(e) => e,
        // The row path reports listing errors with its own message.
        Err(_) => return Ok(None),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = spec
        .spec
        .tuning_config
        .max_num_concurrent_sub_tasks
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(cores);
    let plan = match plan(spec, &entities, threads) {
        Ok(p) => p,
        Err(reason) => {
            tracing::info!(%reason, "row-by-row ingestion");
            return Ok(None);
        }
    };
    tracing::info!(
        files = plan.files.len(),
        bytes = plan.total_bytes,
        threads = plan.threads,
        memory_bytes = plan.memory_bytes,
        "columnar ingestion"
    );
    match build(&plan, work_dir, stats, cancel)? {
        Outcome::Built(b) => {
            stats.columnar.store(true, Ordering::Relaxed);
            Ok(Some(b))
        }
        Outcome::Fallback(reason) => {
            tracing::warn!(%reason, "input needs row-by-row ingestion; starting over on the row path");
            Ok(None)
        }
    }
}
