//! SQL-based ingestion: `INSERT INTO ds SELECT ... PARTITIONED BY ... [CLUSTERED BY ...]` and
//! `REPLACE INTO ds OVERWRITE ALL | WHERE ... SELECT ...` (Druid's multi-stage query engine,
//! `docs/multi-stage-query/reference.md`; reference-behaviour "SQL-based ingestion").
//!
//! # How a statement becomes segments
//! The `SELECT` is planned by the same engine as any query (so `EXTERN`, datasources, joins,
//! `GROUP BY` all work) in a session that has the batch build's memory pool and spill
//! directory ([`QueryEngine::build_session`]). On top of its output the statement adds the
//! time chunk of each row (`PARTITIONED BY` is the `segmentGranularity`) and hands the plan to
//! the columnar build's sort-and-write stage
//! ([`dolmen_ingest::columnar::write_sorted_segments`]): rows are hash-partitioned by chunk,
//! sorted by `__time` then the `CLUSTERED BY` columns, cut into segments of `rowsPerSegment`
//! rows (context; default 3,000,000 as Druid), pushed to deep storage and published in one
//! metadata transaction ([`dolmen_ingest::push_and_publish`]).
//!
//! * `INSERT` appends (new segments next to what a chunk holds).
//! * `REPLACE` writes a new version of its time chunks and, in the same transaction, marks
//!   every older segment of the `OVERWRITE` intervals unused, so chunks the query produced no
//!   rows for become empty (Druid writes tombstones for them). A row outside the `OVERWRITE
//!   WHERE` intervals fails the statement (`InsertTimeOutOfBounds`), as in Druid.
//! * `CLUSTERED BY` string columns also drive range partitioning inside each chunk (range
//!   shard specs, as MSQ does), with `rowsPerSegment` as the target.
//!
//! # Columns
//! Output columns map by name; `__time` must be produced (TIMESTAMP, or BIGINT epoch ms) and
//! may not be null (`InsertTimeNull`). Types: VARCHAR -> string, BIGINT/INTEGER/BOOLEAN ->
//! long, DOUBLE/DECIMAL -> double, FLOAT/REAL -> float, TIMESTAMP (other than `__time`) ->
//! long (epoch ms), `VARCHAR ARRAY` -> multi-value string, sketch columns -> their complex
//! type. With a top-level `GROUP BY` the aggregate outputs are metrics and the segments are
//! rolled up; other columns are dimensions.

use arrow::datatypes::{DataType, Field, TimeUnit};
use datafusion::common::{Column, DFSchemaRef, DataFusionError, Result as DfResult, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility, cast,
};
use dolmen_common::{Granularity, Interval};
use dolmen_ingest::IngestError;
use dolmen_ingest::columnar::{
    CHUNK_COLUMN, SegmentLayout, chunk_udf, memory_budget, sort_partitions, write_sorted_segments,
};
use dolmen_ingest::partition::PartitionedSegment;
use dolmen_ingest::spec::PartitionsSpec;
use dolmen_metadata::PublishMode;
use dolmen_overlord::ControllerTask;
use dolmen_segment::file::{ColumnKind, ColumnType, SegmentColumn, SegmentSchema};
use serde_json::json;

use crate::dml::{DmlKind, Overwrite};
use crate::engine::{PreparedQuery, QueryEngine, QueryError};
use crate::statement::{query_failure, stage_json};

/// Druid's default `rowsPerSegment` for SQL-based ingestion
/// (`MultiStageQueryContext.DEFAULT_ROWS_PER_SEGMENT`).
pub const DEFAULT_ROWS_PER_SEGMENT: u64 = 3_000_000;

/// The time column.
const TIME: &str = dolmen_segment::TIME_COLUMN;

/// Runs an `INSERT` / `REPLACE` statement of a `query_controller` task; returns the number of
/// segments published.
///
/// # Errors
/// `InvalidInput: ...` for a statement that cannot be ingested (no `__time`, a column type
/// segments cannot hold, unknown `CLUSTERED BY` column); `InsertTimeNull` /
/// `InsertTimeOutOfBounds` for rows that break the time rules; runtime errors of the query,
/// the build or the publish; [`IngestError::Canceled`].
pub async fn run(
    engine: &QueryEngine,
    prepared: &PreparedQuery,
    task: &ControllerTask,
) -> Result<usize, IngestError> {
    let dml = prepared
        .dml()
        .ok_or_else(|| IngestError::Runtime("not an INSERT or REPLACE statement".into()))?;
    let ctx_u64 = |key: &str| -> Result<Option<u64>, IngestError> {
        match prepared.context.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or_else(|| {
                    IngestError::InvalidSpec(format!(
                        "InvalidInput: context.{key}: [{v}] is not a positive integer"
                    ))
                }),
        }
    };
    let rows_per_segment = ctx_u64("rowsPerSegment")?.unwrap_or(DEFAULT_ROWS_PER_SEGMENT);
    let memory = memory_budget(ctx_u64("maxBytesInMemory")?.and_then(|n| i64::try_from(n).ok()));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = ctx_u64("maxNumTasks")?
        .and_then(|n| usize::try_from(n).ok())
        .map_or(cores, |n| n.clamp(1, cores));
    let dir = task.env.work_dir.join("build");
    std::fs::create_dir_all(&dir)
        .map_err(|e| IngestError::Runtime(format!("cannot create [{}]: {e}", dir.display())))?;
    let df_err = |e: DataFusionError| query_failure(&QueryError::from_datafusion(e, true));
    let session = engine
        .build_session(threads, memory, &dir)
        .map_err(df_err)?;
    let (ctx, plan) = engine
        .plan_in(session, prepared)
        .await
        .map_err(|e| query_failure(&e))?;
    let metrics = aggregate_outputs(&plan);
    let clustered_by = resolve_clustered_by(plan.schema(), &dml.clustered_by)
        .map_err(|m| IngestError::InvalidSpec(format!("InvalidInput: {m}")))?;
    let mode = ArrayIngestMode::from_context(&prepared.context)
        .map_err(|m| IngestError::InvalidSpec(format!("InvalidInput: {m}")))?;
    let shape = IngestShape::of(plan.schema(), &metrics, &clustered_by, mode)
        .map_err(|m| IngestError::InvalidSpec(format!("InvalidInput: {m}")))?;
    let input = shape.project(plan, &dml.partitioned_by).map_err(df_err)?;
    let physical = ctx
        .state()
        .create_physical_plan(&input)
        .await
        .map_err(df_err)?;
    task.progress.set_stages(json!([
        stage_json(0, "scan", "READING_INPUT"),
        stage_json(1, "segmentGenerator", "NEW"),
    ]));
    let range = !clustered_by.is_empty() && shape.clustered_are_strings;
    let layout = SegmentLayout {
        schema: shape.schema.clone(),
        segment_granularity: dml.partitioned_by.clone(),
        // Range partitioning cuts the chunk files afterwards.
        max_rows_per_segment: if range { u64::MAX } else { rows_per_segment },
        compression: dolmen_segment::file::compression_for(None),
        sort_after_time: clustered_by
            .iter()
            .filter(|c| *c != TIME)
            .cloned()
            .collect(),
        partitions: sort_partitions(threads, memory),
    };
    let started = std::time::Instant::now();
    // Until the publish, a cancel drops the build (DataFusion stops at its next yield).
    let build = write_sorted_segments(physical, ctx.task_ctx(), &layout, &dir, &task.env.cancel);
    let built = tokio::select! {
        r = build => r,
        () = task.env.cancel.cancelled() => return Err(IngestError::Canceled),
    }
    .map_err(|e| {
        if task.env.cancel.is_cancelled() {
            return IngestError::Canceled;
        }
        let msg = e.find_root().to_string();
        match msg.find("InsertTimeNull: ") {
            Some(at) => IngestError::Runtime(msg[at..].trim_end().to_string()),
            None => query_failure(&QueryError::from_datafusion(e, false)),
        }
    })?;
    let rows: u64 = built.iter().map(|b| b.num_rows).sum();
    tracing::info!(
        segments = built.len(),
        rows,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "built segments"
    );
    let replaced: Option<Vec<Interval>> = match &dml.kind {
        DmlKind::Insert => None,
        DmlKind::Replace(Overwrite::All) => Some(vec![Interval::ETERNITY]),
        DmlKind::Replace(Overwrite::Intervals(v)) => Some(v.clone()),
    };
    if let Some(bounds) = &replaced
        && let Some(out) = built
            .iter()
            .find(|b| !bounds.iter().any(|iv| iv.contains(&b.interval)))
    {
        return Err(IngestError::Runtime(format!(
            "InsertTimeOutOfBounds: Query generated time chunk [{}] out of bounds specified by replaceExistingTimeChunks [{}]",
            out.interval,
            bounds
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let parts: Vec<PartitionedSegment> = if range {
        let spec = PartitionsSpec::Range {
            partition_dimensions: clustered_by.clone(),
            target_rows_per_segment: Some(rows_per_segment),
            max_rows_per_segment: None,
            assume_grouped: None,
            max_total_rows: None,
        };
        let work = task.env.work_dir.clone();
        let cancel = task.env.cancel.clone();
        let compression = layout.compression;
        tokio::task::spawn_blocking(move || {
            dolmen_ingest::partition::partition(built, &spec, compression, &work, threads, &|| {
                cancel.is_cancelled()
            })
        })
        .await
        .map_err(|e| IngestError::Runtime(format!("partitioning thread failed: {e}")))??
    } else {
        built
            .into_iter()
            .map(|b| PartitionedSegment {
                built: b,
                shard: None,
            })
            .collect()
    };
    let segments = parts.len();
    let (mode, drop_existing) = match &replaced {
        None => (
            PublishMode::Append {
                version_if_new: task.env.lock_version.clone(),
            },
            Vec::new(),
        ),
        Some(bounds) => (
            PublishMode::Overwrite {
                version: task.env.lock_version.clone(),
            },
            bounds.clone(),
        ),
    };
    task.progress.set_stages(json!([
        stage_json(0, "scan", "FINISHED"),
        stage_json(1, "segmentGenerator", "FINISHED"),
    ]));
    task.progress.set_counters(json!({
        "0": {"0": {"output": {"type": "channel", "rows": [rows]}}},
        "1": {"0": {"segmentGenerationProgress": {
            "type": "segmentGenerationProgress",
            "rowsProcessed": rows,
            "rowsPersisted": rows,
            "rowsMerged": rows,
            "rowsPushed": rows,
        }}},
    }));
    let published =
        dolmen_ingest::push_and_publish(&task.env, &dml.data_source, parts, mode, drop_existing)
            .await?;
    task.progress.set_status_field(
        "segmentLoadWaiterStatus",
        json!({
            "state": "SUCCESS",
            "dataSource": dml.data_source,
            "totalSegments": published.len(),
            "usedSegments": published.len(),
            "precachedSegments": published.len(),
            "onDemandSegments": 0,
            "pendingSegments": 0,
            "unknownSegments": 0,
            "rowsWritten": rows,
        }),
    );
    debug_assert_eq!(published.len(), segments);
    Ok(published.len())
}

/// Checks an `INSERT` / `REPLACE` statement before it is queued: its `SELECT` plans, produces
/// `__time`, has only storable column types and its `CLUSTERED BY` columns exist. Returns the
/// datasources the `SELECT` reads (sorted; see [`crate::engine::data_sources_read`]).
///
/// # Errors
/// Planning errors and [`QueryError::InvalidInput`] naming the problem.
pub async fn validate(
    engine: &QueryEngine,
    prepared: &PreparedQuery,
) -> Result<Vec<String>, QueryError> {
    let dml = prepared
        .dml()
        .ok_or_else(|| QueryError::InvalidInput("not an INSERT or REPLACE statement".into()))?;
    let (_, plan) = engine.plan(prepared).await?;
    let metrics = aggregate_outputs(&plan);
    let clustered_by =
        resolve_clustered_by(plan.schema(), &dml.clustered_by).map_err(QueryError::InvalidInput)?;
    let mode =
        ArrayIngestMode::from_context(&prepared.context).map_err(QueryError::InvalidInput)?;
    IngestShape::of(plan.schema(), &metrics, &clustered_by, mode)
        .map_err(QueryError::InvalidInput)?;
    Ok(crate::engine::data_sources_read(&plan))
}

/// `CLUSTERED BY` items as output column names: a 1-based ordinal of the select list becomes
/// that column's name (as Calcite resolves them); names are kept.
fn resolve_clustered_by(schema: &DFSchemaRef, items: &[String]) -> Result<Vec<String>, String> {
    items
        .iter()
        .map(|c| {
            if schema.fields().iter().any(|f| f.name() == c) {
                return Ok(c.clone());
            }
            match c.parse::<usize>() {
                Ok(n) if n >= 1 && n <= schema.fields().len() => {
                    Ok(schema.field(n - 1).name().clone())
                }
                Ok(n) => Err(format!(
                    "CLUSTERED BY ordinal [{n}] is out of range: the SELECT has {} columns",
                    schema.fields().len()
                )),
                Err(_) => Ok(c.clone()),
            }
        })
        .collect()
}

/// Names of the output columns of `plan` computed by its top-level aggregate (`GROUP BY`):
/// they become metrics of a rolled-up datasource.
fn aggregate_outputs(plan: &LogicalPlan) -> Vec<String> {
    // Output column name -> the name it has in the input of the top projection.
    let mut p = plan;
    let mut renames: Option<Vec<(String, Option<String>)>> = None;
    loop {
        match p {
            LogicalPlan::Projection(proj) if renames.is_none() => {
                renames = Some(
                    proj.expr
                        .iter()
                        .zip(proj.schema.fields())
                        .map(|(e, f)| {
                            let inner = match e.clone().unalias_nested().data {
                                Expr::Column(c) => Some(c.name),
                                _ => None,
                            };
                            (f.name().clone(), inner)
                        })
                        .collect(),
                );
                p = proj.input.as_ref();
            }
            LogicalPlan::Sort(s) => p = s.input.as_ref(),
            LogicalPlan::Limit(l) => p = l.input.as_ref(),
            LogicalPlan::Filter(f) => p = f.input.as_ref(),
            LogicalPlan::SubqueryAlias(a) => p = a.input.as_ref(),
            LogicalPlan::Aggregate(a) => {
                let group_fields = a.group_expr.len();
                let agg_names: Vec<String> = a
                    .schema
                    .fields()
                    .iter()
                    .skip(group_fields)
                    .map(|f| f.name().clone())
                    .collect();
                return match renames {
                    None => agg_names,
                    Some(r) => r
                        .into_iter()
                        .filter(|(_, inner)| inner.as_ref().is_some_and(|n| agg_names.contains(n)))
                        .map(|(out, _)| out)
                        .collect(),
                };
            }
            _ => return Vec::new(),
        }
    }
}

/// The segment layout of a statement's output.
#[derive(Debug)]
struct IngestShape {
    /// Qualified references to the output columns after `__time`, in order.
    columns: Vec<(Column, DataType)>,
    time: (Column, DataType),
    schema: SegmentSchema,
    clustered_are_strings: bool,
}

impl IngestShape {
    fn of(
        schema: &DFSchemaRef,
        metrics: &[String],
        clustered_by: &[String],
        mode: ArrayIngestMode,
    ) -> Result<Self, String> {
        let mut time = None;
        let mut columns = Vec::new();
        let mut seg = Vec::new();
        for (q, f) in schema.iter() {
            let col = Column::from((q, f));
            if f.name() == TIME {
                time = Some((col, f.data_type().clone()));
                continue;
            }
            if columns
                .iter()
                .any(|(c, _): &(Column, DataType)| c.name == *f.name())
            {
                return Err(format!(
                    "Duplicate field in SELECT: [{}]; give each output column its own name",
                    f.name()
                ));
            }
            let (ty, multi) = segment_type(f, mode)?;
            seg.push(SegmentColumn {
                name: f.name().clone(),
                ty,
                kind: if metrics.contains(f.name()) {
                    ColumnKind::Metric
                } else {
                    ColumnKind::Dimension
                },
                multi_value: multi,
                // A SQL aggregate's combining form is not recorded (compaction with rollup
                // needs its metricsSpec).
                aggregator: None,
                nested: Vec::new(),
                nested_complete: false,
            });
            columns.push((col, f.data_type().clone()));
        }
        let time = time.ok_or_else(|| {
            "the SELECT of an INSERT or REPLACE must produce a column named [__time] (TIMESTAMP or BIGINT epoch ms): alias the row time AS \"__time\", e.g. TIME_PARSE(\"timestamp\") AS \"__time\"".to_string()
        })?;
        match &time.1 {
            DataType::Timestamp(..) | DataType::Int64 | DataType::Date32 | DataType::Date64 => {}
            other => {
                return Err(format!(
                    "Field [__time] was the wrong type [{}], expected TIMESTAMP",
                    crate::writer::druid_types(other).1
                ));
            }
        }
        let mut clustered_are_strings = true;
        for c in clustered_by {
            if c == TIME {
                continue;
            }
            let Some(sc) = seg.iter().find(|s| &s.name == c) else {
                return Err(format!(
                    "CLUSTERED BY column [{c}] is not an output column of the SELECT"
                ));
            };
            clustered_are_strings &= sc.ty == ColumnType::String && !sc.multi_value;
        }
        Ok(IngestShape {
            columns,
            time,
            schema: SegmentSchema { columns: seg },
            clustered_are_strings,
        })
    }

    /// `plan` with `[chunk, __time (epoch ms, not null), columns as their segment types]`.
    fn project(&self, plan: LogicalPlan, granularity: &Granularity) -> DfResult<LogicalPlan> {
        let (tcol, ttype) = &self.time;
        let t = Expr::Column(tcol.clone());
        let ms = match ttype {
            DataType::Int64 => t,
            _ => cast(
                cast(t, DataType::Timestamp(TimeUnit::Millisecond, None)),
                DataType::Int64,
            ),
        };
        let ms = ScalarUDF::new_from_impl(RequireTimeUdf::new()).call(vec![ms]);
        let mut exprs = vec![
            chunk_udf(granularity)
                .call(vec![ms.clone()])
                .alias(CHUNK_COLUMN),
            ms.alias(TIME),
        ];
        for ((c, dt), sc) in self.columns.iter().zip(&self.schema.columns) {
            let e = Expr::Column(c.clone());
            let target = sc.arrow_field();
            let e = match (dt, target.data_type()) {
                (a, b) if a == b => e,
                (DataType::Timestamp(..), DataType::Int64) => cast(
                    cast(e, DataType::Timestamp(TimeUnit::Millisecond, None)),
                    DataType::Int64,
                ),
                (_, b) => cast(e, b.clone()),
            };
            exprs.push(e.alias(&sc.name));
        }
        LogicalPlanBuilder::from(plan).project(exprs)?.build()
    }
}

/// How SQL ingestion stores SQL `ARRAY` columns: the `arrayIngestMode` query context parameter
/// (Druid's `MultiStageQueryContext.CTX_ARRAY_INGEST_MODE`, `docs/querying/arrays.md`).
///
/// | SQL type | `array` (default) | `mvd` | `none` |
/// |---|---|---|---|
/// | `VARCHAR ARRAY` | `ARRAY<STRING>` | multi-value `STRING` | error |
/// | `BIGINT ARRAY` | `ARRAY<LONG>` | error | error |
/// | `DOUBLE ARRAY` | `ARRAY<DOUBLE>` | error | error |
///
/// A column marked multi-value (`ARRAY_TO_MV`, `MV_*` results, multi-value inputs) is stored as
/// a multi-value `STRING` in every mode. Druid's default became `array` in Druid 31.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArrayIngestMode {
    /// SQL arrays become array columns.
    #[default]
    Array,
    /// `VARCHAR ARRAY` becomes a multi-value string; numeric arrays are rejected.
    Mvd,
    /// Every SQL array is rejected.
    None,
}

impl ArrayIngestMode {
    /// Reads `arrayIngestMode` from a query context (absent or null: [`ArrayIngestMode::Array`]).
    ///
    /// # Errors
    /// A message naming `context.arrayIngestMode` for a value other than `array`, `mvd`, `none`.
    pub fn from_context(
        context: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<ArrayIngestMode, String> {
        match context.get("arrayIngestMode") {
            None | Some(serde_json::Value::Null) => Ok(ArrayIngestMode::Array),
            Some(v) => match v.as_str().map(str::to_ascii_lowercase).as_deref() {
                Some("array") => Ok(ArrayIngestMode::Array),
                Some("mvd") => Ok(ArrayIngestMode::Mvd),
                Some("none") => Ok(ArrayIngestMode::None),
                _ => Err(format!(
                    "context.arrayIngestMode: [{v}] is not one of [array, mvd, none]"
                )),
            },
        }
    }

    fn name(self) -> &'static str {
        match self {
            ArrayIngestMode::Array => "array",
            ArrayIngestMode::Mvd => "mvd",
            ArrayIngestMode::None => "none",
        }
    }
}

/// The segment column type of an output field: `(type, multi_value)`; SQL arrays follow `mode`
/// ([`ArrayIngestMode`]).
fn segment_type(f: &Field, mode: ArrayIngestMode) -> Result<(ColumnType, bool), String> {
    if let Some(native) = f.metadata().get(dolmen_segment::DRUID_TYPE_METADATA_KEY) {
        let ty = match native.as_str() {
            "COMPLEX<HLLSketch>" => Some(ColumnType::HllSketch),
            "COMPLEX<thetaSketch>" => Some(ColumnType::ThetaSketch),
            "COMPLEX<quantilesDoublesSketch>" => Some(ColumnType::QuantilesDoublesSketch),
            "COMPLEX<hyperUnique>" => Some(ColumnType::HyperUnique),
            _ => None,
        };
        if let Some(t) = ty {
            return Ok((t, false));
        }
    }
    if crate::functions::scalar::is_json_field(f) {
        return Ok((ColumnType::Json, false));
    }
    let unsupported = || {
        format!(
            "Cannot store column [{}] of type [{}] in a segment; cast it to VARCHAR, BIGINT, DOUBLE, FLOAT or an ARRAY of them",
            f.name(),
            crate::writer::druid_types(f.data_type()).0
        )
    };
    let mode_error = |ty: &str| {
        if mode == ArrayIngestMode::None {
            format!(
                "Cannot store column [{}] of type [{ty}]: arrays cannot be ingested when 'arrayIngestMode' is set to 'none'; set it to 'array' or 'mvd', or wrap the column in ARRAY_TO_MV",
                f.name()
            )
        } else {
            format!(
                "Numeric arrays can only be ingested when 'arrayIngestMode' is set to 'array' in the MSQ query's context. Current value of the parameter [{}]",
                mode.name()
            )
        }
    };
    Ok(match f.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
            (ColumnType::String, false)
        }
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Timestamp(..)
        | DataType::Date32
        | DataType::Date64 => (ColumnType::Long, false),
        DataType::Float16 | DataType::Float32 => (ColumnType::Float, false),
        DataType::Float64 | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            (ColumnType::Double, false)
        }
        DataType::List(inner) | DataType::LargeList(inner) => {
            let marked = f
                .metadata()
                .get(dolmen_segment::MULTI_VALUE_METADATA_KEY)
                .is_some_and(|v| v == "true");
            let element = match inner.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                    ColumnType::String
                }
                DataType::Boolean
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64 => ColumnType::Long,
                DataType::Float16
                | DataType::Float32
                | DataType::Float64
                | DataType::Decimal128(..)
                | DataType::Decimal256(..) => ColumnType::Double,
                _ => return Err(unsupported()),
            };
            match (element, marked, mode) {
                (ColumnType::String, true, _)
                | (ColumnType::String, false, ArrayIngestMode::Mvd) => (ColumnType::String, true),
                (_, _, ArrayIngestMode::Array) => (
                    ColumnType::array_of(element).ok_or_else(unsupported)?,
                    false,
                ),
                (e, _, _) => {
                    let ty = ColumnType::array_of(e).ok_or_else(unsupported)?;
                    return Err(mode_error(ty.druid_name()));
                }
            }
        }
        _ => return Err(unsupported()),
    })
}

/// `druid_require_time(ms)`: its Int64 argument unchanged; fails the statement with Druid's
/// `InsertTimeNull` fault on a null.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RequireTimeUdf {
    signature: Signature,
}

impl RequireTimeUdf {
    fn new() -> Self {
        RequireTimeUdf {
            signature: Signature::exact(vec![DataType::Int64], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for RequireTimeUdf {
    fn name(&self) -> &str {
        "druid_require_time"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let null = match &args.args[0] {
            ColumnarValue::Array(a) => a.null_count() > 0,
            ColumnarValue::Scalar(s) => s.is_null(),
        };
        if null {
            return exec_err!(
                "InsertTimeNull: Encountered a null timestamp in the __time field during INSERT or REPLACE"
            );
        }
        Ok(args.args[0].clone())
    }
}
