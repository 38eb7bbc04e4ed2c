//! Running a native batch task (`index_parallel`, `index`): read, parse, transform, filter,
//! roll up, write segment files, push them to deep storage, and publish them atomically.
//!
//! Parsing and indexing are CPU-bound and run on the blocking pool, never on the async
//! reactor. Row counters are shared with the caller ([`RowStats`]) so that the live task report
//! shows progress while the task runs. Nothing becomes visible before the single publish
//! transaction at the end: a failed or cancelled task leaves no used segment behind (files
//! already pushed to deep storage are deleted).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dolmen_common::time::now_millis;
use dolmen_common::{Granularity, Interval};
use dolmen_metadata::{MetadataStore, NewSegment, PublishMode, PublishRequest};
use dolmen_segment::{ColumnType, DataSegment};
use dolmen_storage::DeepStorage;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::IngestError;
use crate::expr::{Expr, ExprValue, RowBindings, compile_transforms};
use crate::index::{BuiltSegment, DimSlot, Indexer, IndexerConfig};
use crate::input::InputRow;
use crate::partition::PartitionedSegment;
use crate::rows::{MetricKind, Row, init_metric, to_dim_val};
use crate::spec::{DimensionSchema, IndexTaskSpec, MultiValueHandling};
use crate::timestamp::TimestampParser;

/// Row counters of a task (`rowStats.buildSegments` in the report), updated while it runs.
#[derive(Debug, Default)]
pub struct RowStats {
    /// Rows parsed and indexed.
    pub processed: AtomicU64,
    /// Input bytes read.
    pub processed_bytes: AtomicU64,
    /// Rows indexed with a value that could not be converted (stored as null).
    pub processed_with_error: AtomicU64,
    /// Rows dropped by the filter or outside `granularitySpec.intervals`.
    pub thrown_away: AtomicU64,
    /// Rows that could not be parsed at all.
    pub unparseable: AtomicU64,
    /// Saved parse exceptions (at most `maxSavedParseExceptions`).
    pub saved: Mutex<Vec<Value>>,
    /// `ingestionState`: NOT_STARTED, BUILD_SEGMENTS, COMPLETED.
    pub state: Mutex<&'static str>,
    /// Whether the segments were built by the columnar path (see [`crate::columnar`]).
    pub columnar: std::sync::atomic::AtomicBool,
}

impl RowStats {
    /// New counters in state NOT_STARTED.
    pub fn new() -> RowStats {
        RowStats {
            state: Mutex::new("NOT_STARTED"),
            ..Default::default()
        }
    }

    /// The five counters as Druid's report prints them.
    pub fn counters_json(&self) -> Value {
        json!({
            "processed": self.processed.load(Ordering::Relaxed),
            "processedBytes": self.processed_bytes.load(Ordering::Relaxed),
            "processedWithError": self.processed_with_error.load(Ordering::Relaxed),
            "thrownAway": self.thrown_away.load(Ordering::Relaxed),
            "unparseable": self.unparseable.load(Ordering::Relaxed),
        })
    }

    fn set_state(&self, s: &'static str) {
        *self.state.lock().expect("stats lock") = s;
    }

    /// The task report (`ingestionStatsAndErrors`, spec "Task completion report").
    pub fn report(&self, task_id: &str, error_msg: Option<&str>) -> Value {
        let zero = json!({"processed": 0, "processedBytes": 0, "processedWithError": 0, "thrownAway": 0, "unparseable": 0});
        let saved = self.saved.lock().expect("stats lock").clone();
        let unparseable_events = if saved.is_empty() {
            json!({})
        } else {
            json!({ "buildSegments": saved })
        };
        json!({
            "ingestionStatsAndErrors": {
                "type": "ingestionStatsAndErrors",
                "taskId": task_id,
                "payload": {
                    "ingestionState": *self.state.lock().expect("stats lock"),
                    "unparseableEvents": unparseable_events,
                    "rowStats": {
                        "determinePartitions": zero,
                        "buildSegments": self.counters_json(),
                    },
                    "errorMsg": error_msg,
                    "segmentAvailabilityConfirmed": false,
                    "segmentAvailabilityWaitTimeMs": 0,
                }
            }
        })
    }
}

/// What a batch task needs from its host.
#[derive(Debug, Clone)]
pub struct IndexTaskEnv {
    /// Task id.
    pub task_id: String,
    /// Scratch directory (removed at the end).
    pub work_dir: PathBuf,
    /// Deep storage segments are pushed to.
    pub deep: DeepStorage,
    /// Metadata store segments are published to.
    pub metadata: Arc<dyn MetadataStore>,
    /// Cancelled when the task is shut down.
    pub cancel: CancellationToken,
    /// Live counters.
    pub stats: Arc<RowStats>,
    /// Version for overwritten time chunks (from the task's lock).
    pub lock_version: String,
    /// Recorded as `lastCompactionState` in every published segment (compact tasks only).
    pub last_compaction_state: Option<Value>,
}

/// Runs a batch task to completion and returns the published segments.
///
/// # Errors
/// [`IngestError`] describing why the task failed; no segment of a failed task is visible.
pub async fn run_index_task(
    env: &IndexTaskEnv,
    spec: &IndexTaskSpec,
) -> Result<Vec<DataSegment>, IngestError> {
    let result = run_inner(env, spec).await;
    let _ = tokio::fs::remove_dir_all(&env.work_dir).await;
    result
}

async fn run_inner(
    env: &IndexTaskEnv,
    spec: &IndexTaskSpec,
) -> Result<Vec<DataSegment>, IngestError> {
    env.stats.set_state("BUILD_SEGMENTS");
    let started = std::time::Instant::now();
    let build_spec = spec.clone();
    let stats = Arc::clone(&env.stats);
    let cancel = env.cancel.clone();
    let work_dir = env.work_dir.clone();
    let span = tracing::Span::current();
    let input_ctx = crate::input::InputContext::for_task(env);
    let build_spec = with_druid_time_compat(build_spec, input_ctx.config());
    let built = tokio::task::spawn_blocking(move || {
        span.in_scope(|| build_segments(&build_spec, &work_dir, &stats, &cancel, &input_ctx))
    })
    .await
    .map_err(|e| IngestError::Runtime(format!("indexing thread failed: {e}")))??;
    tracing::info!(
        segments = built.len(),
        rows = built.iter().map(|b| b.num_rows).sum::<u64>(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "built segments"
    );
    if env.cancel.is_cancelled() {
        return Err(IngestError::Canceled);
    }
    let built = secondary_partitioning(env, spec, built).await?;
    let io = &spec.spec.io_config;
    let mode = if io.append_to_existing {
        PublishMode::Append {
            version_if_new: env.lock_version.clone(),
        }
    } else {
        PublishMode::Overwrite {
            version: env.lock_version.clone(),
        }
    };
    let drop_existing = if io.drop_existing && !io.append_to_existing {
        spec.spec.data_schema.granularity_spec.intervals.clone()
    } else {
        Vec::new()
    };
    let published = push_and_publish(env, spec.data_source(), built, mode, drop_existing).await?;
    env.stats.set_state("COMPLETED");
    Ok(published)
}

/// With `service.indexer.task.ignoreTimestampSpecForDruidInputSource=true`, a spec reading the
/// `druid` input source takes each row's time from `__time` (epoch milliseconds) whatever its
/// `timestampSpec` says, as Druid's `DruidInputSource` does in that compatibility mode.
fn with_druid_time_compat(
    mut spec: IndexTaskSpec,
    config: &crate::input::InputSourceConfig,
) -> IndexTaskSpec {
    if config.ignore_timestamp_spec_for_druid_input_source
        && matches!(
            spec.spec.io_config.input_source,
            crate::input::InputSource::Druid(_)
        )
    {
        tracing::warn!(
            "ignoring the timestampSpec of a druid input source and reading __time (service.indexer.task.ignoreTimestampSpecForDruidInputSource=true)"
        );
        spec.spec.data_schema.timestamp_spec = crate::timestamp::TimestampSpec {
            column: "__time".to_string(),
            format: "millis".to_string(),
            missing_value: None,
        };
    }
    spec
}

/// Pushes built segment files to deep storage (`<ds>/<interval>/<task id>/<n>/index.parquet`)
/// and publishes them in one metadata transaction (`mode`, and `drop_existing`: intervals
/// whose older used segments are marked unused in the same transaction). Nothing is visible
/// unless everything is: on any failure the pushed files are deleted again.
///
/// # Errors
/// [`IngestError::Canceled`] when `env.cancel` fires before the publish;
/// [`IngestError::Runtime`] when a push or the publish fails.
pub async fn push_and_publish(
    env: &IndexTaskEnv,
    data_source: &str,
    built: Vec<PartitionedSegment>,
    mode: PublishMode,
    drop_existing: Vec<dolmen_common::Interval>,
) -> Result<Vec<DataSegment>, IngestError> {
    let ds = data_source.to_string();
    let mut pushed: Vec<NewSegment> = Vec::with_capacity(built.len());
    for (i, PartitionedSegment { built: b, shard }) in built.iter().enumerate() {
        let key = format!(
            "{ds}/{}/{}/{i}/index.parquet",
            b.interval.to_underscore_string(),
            env.task_id
        );
        match env.deep.push(&b.path, &key).await {
            Ok(load_spec) => pushed.push(new_segment(b, load_spec, shard.clone())),
            Err(e) => {
                cleanup(&env.deep, &pushed).await;
                return Err(IngestError::Runtime(format!(
                    "cannot push segment to deep storage: {e}"
                )));
            }
        }
        if env.cancel.is_cancelled() {
            cleanup(&env.deep, &pushed).await;
            return Err(IngestError::Canceled);
        }
    }
    tracing::info!(segments = pushed.len(), "pushed segments to deep storage");
    let req = PublishRequest {
        data_source: ds,
        segments: pushed.clone(),
        mode,
        drop_existing,
        commit: None,
        last_compaction_state: env.last_compaction_state.clone(),
    };
    match env.metadata.publish_segments(req).await {
        Ok(published) => {
            tracing::info!(segments = published.len(), "published segments");
            Ok(published)
        }
        Err(e) => {
            cleanup(&env.deep, &pushed).await;
            Err(IngestError::Runtime(format!(
                "cannot publish segments: {e}"
            )))
        }
    }
}

/// Applies a secondary `partitionsSpec` (hashed, single_dim, range) to the chunk segments; see
/// [`crate::partition`]. Dynamic partitioning passes the segments through.
async fn secondary_partitioning(
    env: &IndexTaskEnv,
    spec: &IndexTaskSpec,
    built: Vec<BuiltSegment>,
) -> Result<Vec<PartitionedSegment>, IngestError> {
    let tuning = &spec.spec.tuning_config;
    let Some(p) = tuning.effective_partitions().filter(|p| p.is_secondary()) else {
        return Ok(built
            .into_iter()
            .map(|b| PartitionedSegment {
                built: b,
                shard: None,
            })
            .collect());
    };
    let compression = dolmen_segment::file::compression_for(tuning.compression().as_deref());
    let work_dir = env.work_dir.clone();
    let cancel = env.cancel.clone();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let span = tracing::Span::current();
    let started = std::time::Instant::now();
    let parts = tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            crate::partition::partition(built, &p, compression, &work_dir, threads, &|| {
                cancel.is_cancelled()
            })
        })
    })
    .await
    .map_err(|e| IngestError::Runtime(format!("partitioning thread failed: {e}")))??;
    tracing::info!(
        segments = parts.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "partitioned segments"
    );
    Ok(parts)
}

fn new_segment(
    b: &BuiltSegment,
    load_spec: dolmen_segment::LoadSpec,
    shard: Option<dolmen_segment::ShardSpec>,
) -> NewSegment {
    NewSegment {
        shard,
        interval: b.interval,
        load_spec,
        dimensions: b.schema.dimensions().map(|c| c.name.clone()).collect(),
        metrics: b.schema.metrics().map(|c| c.name.clone()).collect(),
        columns: b.schema.columns.clone(),
        size: b.size,
        num_rows: b.num_rows,
    }
}

/// Builds segment files for `spec` on the calling thread (blocking: call it from a blocking
/// thread), with the same parsing, transforms, rollup and segment layout as a batch task, into
/// `work_dir`. Streaming tasks build their queryable pieces (hydrants) and their handed-off
/// segments this way from the records they wrote down. Only `local` and `inline` inputs are
/// meant here (no metadata store or deep storage access is provided).
///
/// # Errors
/// As a batch task's build: invalid spec, parse-exception limit, I/O.
pub fn build_segment_files(
    spec: &IndexTaskSpec,
    work_dir: &std::path::Path,
    stats: &RowStats,
    cancel: &CancellationToken,
) -> Result<Vec<BuiltSegment>, IngestError> {
    let ctx = crate::input::InputContext {
        config: None,
        segments: None,
        runtime: None,
        scratch_dir: Some(work_dir.join("input")),
    };
    build_segments(spec, work_dir, stats, cancel, &ctx)
}

/// Pushes built segment files to deep storage under
/// `<dataSource>/<interval>/<name>/<n>/index.parquet` and returns them ready to publish. On
/// failure the files already pushed are deleted again.
///
/// # Errors
/// [`IngestError::Runtime`] when a push fails.
pub async fn push_segment_files(
    deep: &DeepStorage,
    data_source: &str,
    name: &str,
    built: &[BuiltSegment],
) -> Result<Vec<NewSegment>, IngestError> {
    let mut pushed: Vec<NewSegment> = Vec::with_capacity(built.len());
    for (i, b) in built.iter().enumerate() {
        let key = format!(
            "{data_source}/{}/{name}/{i}/index.parquet",
            b.interval.to_underscore_string()
        );
        match deep.push(&b.path, &key).await {
            Ok(load_spec) => pushed.push(new_segment(b, load_spec, None)),
            Err(e) => {
                cleanup(deep, &pushed).await;
                return Err(IngestError::Runtime(format!(
                    "cannot push segment to deep storage: {e}"
                )));
            }
        }
    }
    Ok(pushed)
}

/// Deletes pushed but unpublished segment files from deep storage (best effort, logged).
pub async fn delete_pushed(deep: &DeepStorage, pushed: &[NewSegment]) {
    cleanup(deep, pushed).await;
}

async fn cleanup(deep: &DeepStorage, pushed: &[NewSegment]) {
    for s in pushed {
        if let Err(e) = deep.delete(&s.load_spec).await {
            tracing::warn!(error = %e, "cannot delete unpublished segment file");
        }
    }
}

enum MetricInput {
    None,
    Field(String),
    Expr(Expr),
}

/// How dimensions are chosen for each row.
struct Dimensions {
    slots: Vec<DimSlot>,
    /// `multiValueHandling` of the declared dimensions by slot (discovered ones use the
    /// default).
    handling: Vec<MultiValueHandling>,
    index: HashMap<String, usize>,
    discover: bool,
    typed_discovery: bool,
    excluded: HashSet<String>,
    /// Per slot: how its type is chosen.
    typing: Vec<Typing>,
}

/// How a dimension's type is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Typing {
    /// By the spec (`string`, `long`, `float`, `double`, `auto` with `castToType`, or a name).
    Fixed,
    /// By the data, as Druid's auto column indexer: an `auto` dimension without `castToType`
    /// or one found by `useSchemaDiscovery`. The first value with a type sets it (`seen`);
    /// later values widen it ([`crate::rows::widen`]).
    Auto { seen: bool },
}

impl Dimensions {
    fn new(spec: &IndexTaskSpec) -> Dimensions {
        let ds = &spec.spec.data_schema;
        let dspec = &ds.dimensions_spec;
        let mut slots = Vec::new();
        let mut typing = Vec::new();
        for d in &dspec.dimensions {
            let ty = match d {
                DimensionSchema::Name(_) => Some(ColumnType::String),
                DimensionSchema::Typed(t) => t.column_type(),
            };
            typing.push(match ty {
                Some(_) => Typing::Fixed,
                None => Typing::Auto { seen: false },
            });
            slots.push(DimSlot {
                name: d.name().to_string(),
                ty: ty.unwrap_or(ColumnType::String),
            });
        }
        let handling = dspec
            .dimensions
            .iter()
            .map(DimensionSchema::multi_value_handling)
            .collect();
        let index = slots
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        let excluded = discovery_exclusions(spec);
        Dimensions {
            discover: dspec.dimensions.is_empty() || dspec.include_all_dimensions,
            typed_discovery: dspec.use_schema_discovery,
            slots,
            handling,
            index,
            excluded,
            typing,
        }
    }

    /// Sets or widens the types that follow the data ([`Typing::Auto`]) with `row`'s values.
    fn observe(&mut self, row: &InputRow) {
        for (slot, typing) in self.slots.iter_mut().zip(self.typing.iter_mut()) {
            let Typing::Auto { seen } = typing else {
                continue;
            };
            let Some(t) = row.get(&slot.name).and_then(crate::rows::infer_auto_type) else {
                continue;
            };
            slot.ty = if *seen {
                crate::rows::widen(slot.ty, t)
            } else {
                t
            };
            *seen = true;
        }
    }

    fn discover(&mut self, row: &InputRow) {
        if !self.discover {
            return;
        }
        for (k, v) in row {
            // Nulls, objects and nested lists are not discovered (Druid's rules); a column first
            // seen as null is discovered with its first non-null value.
            // Typed discovery also finds objects and nested arrays (`COMPLEX<json>`).
            if !(crate::input::is_discoverable(v, false) || self.typed_discovery && !v.is_null()) {
                continue;
            }
            if !self.index.contains_key(k)
                && !self.excluded.contains(k)
                && !crate::index::is_hidden_column(k)
            {
                let (ty, typing) = if self.typed_discovery {
                    match crate::rows::infer_auto_type(v) {
                        Some(t) => (t, Typing::Auto { seen: true }),
                        None => (ColumnType::String, Typing::Auto { seen: false }),
                    }
                } else {
                    (ColumnType::String, Typing::Fixed)
                };
                self.typing.push(typing);
                self.index.insert(k.clone(), self.slots.len());
                self.slots.push(DimSlot {
                    name: k.clone(),
                    ty,
                });
            }
        }
    }
}

/// Columns schema discovery never makes dimensions: explicit `dimensionExclusions`, the
/// timestamp column, `__time`, metric names and the fields metrics read (input fields,
/// first/last `timeColumn`s), Druid's defaults. Shared by both build paths.
pub(crate) fn discovery_exclusions(spec: &IndexTaskSpec) -> HashSet<String> {
    let ds = &spec.spec.data_schema;
    let mut excluded: HashSet<String> = ds
        .dimensions_spec
        .dimension_exclusions
        .iter()
        .cloned()
        .collect();
    excluded.insert(ds.timestamp_spec.column.clone());
    excluded.insert(crate::TIME_COLUMN.to_string());
    for m in &ds.metrics_spec {
        excluded.insert(m.name().to_string());
        excluded.extend(m.required_fields().map(str::to_string));
    }
    excluded
}

fn validate_granularities(spec: &IndexTaskSpec) -> Result<(), IngestError> {
    let g = &spec.spec.data_schema.granularity_spec;
    // The query granularity must not be coarser than the segment granularity: probe a few
    // instants and check each query bucket lies inside its segment bucket.
    if matches!(g.segment_granularity, Granularity::All) {
        return Ok(());
    }
    for t in [0i64, 951_782_400_000, 1_442_016_000_000 + 12_345_678] {
        let q = g.query_granularity.bucket(t);
        let s = g.segment_granularity.bucket(t);
        if !matches!(g.query_granularity, Granularity::None) && !s.contains(&q) {
            return Err(IngestError::InvalidSpec(
                "spec.dataSchema.granularitySpec: queryGranularity must not be coarser than segmentGranularity".into(),
            ));
        }
    }
    Ok(())
}

/// Rows per chunk sent from the reader thread.
const FEED_CHUNK: usize = 1024;
/// Chunks the reader may run ahead of the indexer.
const FEED_DEPTH: usize = 16;

/// What the reader thread sends to the indexing loop.
enum Feed {
    /// Parsed rows (or per-row parse errors), in input order.
    Rows(Vec<Result<InputRow, crate::input::RowParseError>>),
    /// An entity was read to its end; its size in bytes.
    EntityDone(u64),
    /// An entity could not be opened.
    OpenFailed(String),
}

/// Reads every entity in order into `tx`; stops early when the receiver is gone.
fn read_entities(
    entities: &[crate::input::InputEntity],
    format: &crate::input::InputFormat,
    tx: &std::sync::mpsc::SyncSender<Feed>,
) {
    for entity in entities {
        let reader = match crate::input::open_rows(entity, format) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Feed::OpenFailed(e.to_string()));
                return;
            }
        };
        let mut chunk = Vec::with_capacity(FEED_CHUNK);
        for item in reader {
            chunk.push(item);
            if chunk.len() == FEED_CHUNK
                && tx
                    .send(Feed::Rows(std::mem::replace(
                        &mut chunk,
                        Vec::with_capacity(FEED_CHUNK),
                    )))
                    .is_err()
            {
                return;
            }
        }
        if !chunk.is_empty() && tx.send(Feed::Rows(chunk)).is_err() {
            return;
        }
        if tx.send(Feed::EntityDone(entity.size_bytes())).is_err() {
            return;
        }
    }
}

/// The blocking part: read every input entity, build rows, index them, write segment files.
fn build_segments(
    spec: &IndexTaskSpec,
    work_dir: &std::path::Path,
    stats: &RowStats,
    cancel: &CancellationToken,
    input_ctx: &crate::input::InputContext,
) -> Result<Vec<BuiltSegment>, IngestError> {
    validate_granularities(spec)?;
    if let Some(built) = crate::columnar::try_build(spec, work_dir, stats, cancel)? {
        return Ok(built);
    }
    let ds = &spec.spec.data_schema;
    let tuning = &spec.spec.tuning_config;
    let io = &spec.spec.io_config;
    let ts_parser = TimestampParser::new(&ds.timestamp_spec)
        .map_err(|e| IngestError::InvalidSpec(format!("spec.dataSchema.timestampSpec: {e}")))?;
    let transforms = compile_transforms(&ds.transform_spec.transforms).map_err(|e| {
        IngestError::InvalidSpec(format!("spec.dataSchema.transformSpec.transforms: {e}"))
    })?;
    let filter = match &ds.transform_spec.filter {
        Some(f) => Some(f.compile().map_err(|e| {
            IngestError::InvalidSpec(format!("spec.dataSchema.transformSpec.filter: {e}"))
        })?),
        None => None,
    };
    let mut metric_inputs = Vec::with_capacity(ds.metrics_spec.len());
    let mut metric_kinds = Vec::with_capacity(ds.metrics_spec.len());
    for m in &ds.metrics_spec {
        let input = match m.input() {
            (Some(f), _) => MetricInput::Field(f.to_string()),
            (None, Some(e)) => MetricInput::Expr(Expr::parse(e).map_err(|err| {
                IngestError::InvalidSpec(format!(
                    "spec.dataSchema.metricsSpec: metric [{}] expression: {err}",
                    m.name()
                ))
            })?),
            (None, None) => MetricInput::None,
        };
        metric_inputs.push(input);
        let kind = MetricKind::try_of(m).map_err(|e| {
            IngestError::InvalidSpec(format!(
                "spec.dataSchema.metricsSpec: metric [{}]: {e}",
                m.name()
            ))
        })?;
        metric_kinds.push((m.name().to_string(), kind));
    }
    let kinds: Vec<MetricKind> = metric_kinds.iter().map(|(_, k)| *k).collect();
    let g = &ds.granularity_spec;
    let intervals: Vec<Interval> = g.intervals.clone();
    let mut dims = Dimensions::new(spec);
    let mut indexer = Indexer::new(
        IndexerConfig {
            rollup: g.rollup,
            segment_granularity: g.segment_granularity.clone(),
            max_rows_in_memory: usize::try_from(tuning.rows_in_memory()).unwrap_or(usize::MAX),
            max_bytes_in_memory: crate::index::bytes_in_memory_budget(tuning.max_bytes_in_memory),
            max_rows_per_segment: tuning.rows_per_segment(),
            compression: dolmen_segment::file::compression_for(tuning.compression().as_deref()),
            work_dir: work_dir.to_path_buf(),
        },
        metric_kinds,
    );
    let max_parse = tuning.parse_exception_limit();
    let max_saved = tuning.saved_parse_exception_limit();
    let log_parse = tuning.log_parse_exceptions.unwrap_or(false);

    // Druid's `ParseExceptionHandler`: the caller has counted the row (`unparseable` or
    // `processedWithError`); log it when `logParseExceptions`, keep the newest
    // `maxSavedParseExceptions` reports (newest first, Druid's `ParseExceptionReport` shape,
    // shown at `unparseableEvents.buildSegments`), and fail once the two counters together
    // exceed `maxParseExceptions`.
    let record_parse_error = |raw: Option<String>,
                              details: Vec<String>,
                              kind: &'static str|
     -> Result<(), IngestError> {
        if log_parse {
            tracing::warn!(
                error_type = kind,
                input = raw.as_deref().unwrap_or(""),
                "encountered parse exception: {}",
                details.join("; ")
            );
        }
        if max_saved > 0 {
            let mut saved = stats.saved.lock().expect("stats lock");
            saved.insert(
                0,
                json!({
                    "input": raw,
                    "errorType": kind,
                    "details": details,
                    "timeOfExceptionMillis": now_millis(),
                }),
            );
            saved.truncate(usize::try_from(max_saved).unwrap_or(usize::MAX));
        }
        let errors = stats.unparseable.load(Ordering::Relaxed)
            + stats.processed_with_error.load(Ordering::Relaxed);
        if errors > max_parse {
            return Err(IngestError::ParseExceptions(format!(
                "Max parse exceptions[{max_parse}] exceeded"
            )));
        }
        Ok(())
    };

    let entities = io
        .input_source
        .entities_in(input_ctx)
        .map_err(|e| IngestError::Runtime(format!("spec.ioConfig.inputSource: {e}")))?;
    tracing::info!(files = entities.len(), "reading input");
    let mut n: u64 = 0;
    // Reading (decompression and parsing) runs on its own thread, one bounded channel of row
    // chunks ahead of the indexing below, so the two overlap on separate cores.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Feed>(FEED_DEPTH);
    let format = &io.input_format;
    let query_granularity = g.query_granularity.prepared();
    let reader_span = tracing::Span::current();
    std::thread::scope(|scope| -> Result<(), IngestError> {
        scope.spawn(move || reader_span.in_scope(|| read_entities(&entities, format, &tx)));
        for msg in rx {
            let rows = match msg {
                Feed::Rows(rows) => rows,
                Feed::EntityDone(bytes) => {
                    stats.processed_bytes.fetch_add(bytes, Ordering::Relaxed);
                    continue;
                }
                Feed::OpenFailed(e) => {
                    return Err(IngestError::Runtime(format!(
                        "spec.ioConfig.inputFormat: {e}"
                    )));
                }
            };
            'rows: for item in rows {
                n += 1;
                if n.is_multiple_of(4096) && cancel.is_cancelled() {
                    return Err(IngestError::Canceled);
                }
                let mut row = match item {
                    Ok(r) => r,
                    Err(e) if e.fatal => {
                        return Err(IngestError::Runtime(format!(
                            "cannot read input: {}",
                            e.message
                        )));
                    }
                    Err(e) => {
                        stats.unparseable.fetch_add(1, Ordering::Relaxed);
                        record_parse_error(e.raw, vec![e.message], "unparseable")?;
                        continue;
                    }
                };
                let mut ts = match ts_parser.parse_row(&row) {
                    Ok(t) => t,
                    Err(e) => {
                        stats.unparseable.fetch_add(1, Ordering::Relaxed);
                        record_parse_error(
                            Some(Value::Object(row).to_string()),
                            vec![e.to_string()],
                            "unparseable",
                        )?;
                        continue;
                    }
                };
                for (name, expr) in &transforms {
                    let v = expr.eval(&RowBindings::new(&row, Some(ts)));
                    if name == crate::TIME_COLUMN {
                        match v {
                            ExprValue::Long(t) => ts = t,
                            ExprValue::Double(t) => ts = t as i64,
                            other => {
                                stats.unparseable.fetch_add(1, Ordering::Relaxed);
                                record_parse_error(
                                    Some(Value::Object(row.clone()).to_string()),
                                    vec![format!(
                                        "transform of [__time] produced a non-numeric value [{other:?}]"
                                    )],
                                    "unparseable",
                                )?;
                                continue 'rows;
                            }
                        }
                    } else {
                        row.insert(name.clone(), v.to_json());
                    }
                }
                if let Some(f) = &filter
                    && !f.matches(&row, ts)
                {
                    stats.thrown_away.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if !intervals.is_empty() && !intervals.iter().any(|i| i.contains_instant(ts)) {
                    stats.thrown_away.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                dims.discover(&row);
                dims.observe(&row);
                let mut conversion_errors: Vec<String> = Vec::new();
                let dim_vals = dims
                    .slots
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let handling = dims.handling.get(i).copied().unwrap_or_default();
                        match to_dim_val(row.get(&s.name), s.ty, handling) {
                            Ok(v) => v,
                            Err(e) => {
                                conversion_errors.push(format!("dimension [{}]: {}", s.name, e.0));
                                crate::rows::Val::Null
                            }
                        }
                    })
                    .collect();
                let mut metrics = Vec::with_capacity(kinds.len());
                for ((k, input), m) in kinds.iter().zip(&metric_inputs).zip(&ds.metrics_spec) {
                    let computed;
                    let v = match input {
                        MetricInput::None => None,
                        MetricInput::Field(f) => row.get(f),
                        MetricInput::Expr(e) => {
                            computed = e.eval(&RowBindings::new(&row, Some(ts))).to_json();
                            Some(&computed)
                        }
                    };
                    match init_metric(*k, m, v, &row, ts) {
                        Ok(a) => metrics.push(a),
                        Err(e) => {
                            conversion_errors.push(format!("metric [{}]: {}", m.name(), e.0));
                            metrics.push(k.empty());
                        }
                    }
                }
                let time = query_granularity.bucket_start(ts);
                if !conversion_errors.is_empty() {
                    stats.processed_with_error.fetch_add(1, Ordering::Relaxed);
                    record_parse_error(
                        Some(Value::Object(row.clone()).to_string()),
                        conversion_errors,
                        "processedWithError",
                    )?;
                } else {
                    stats.processed.fetch_add(1, Ordering::Relaxed);
                }
                indexer.add(
                    Row {
                        time,
                        dims: dim_vals,
                        metrics,
                    },
                    &dims.slots,
                )?;
            }
        }
        Ok(())
    })?;
    let slots = dims.slots.clone();
    let built = indexer.finish(&slots, &|| cancel.is_cancelled())?;
    Ok(built)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::input::InputSourceConfig;

    fn spec(input_source: serde_json::Value) -> IndexTaskSpec {
        IndexTaskSpec::from_json(&json!({
            "type": "index_parallel",
            "spec": {
                "dataSchema": {
                    "dataSource": "ds",
                    "timestampSpec": {"column": "timestamp", "format": "iso"},
                    "dimensionsSpec": {"dimensions": ["d"]}
                },
                "ioConfig": {"type": "index_parallel", "inputSource": input_source,
                             "inputFormat": {"type": "json"}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn druid_input_sources_read_time_from_time_column_only_when_configured() {
        let druid = json!({"type": "druid", "dataSource": "ds", "interval": "2015/2016"});
        let on = InputSourceConfig {
            ignore_timestamp_spec_for_druid_input_source: true,
            ..InputSourceConfig::default()
        };
        let ts = with_druid_time_compat(spec(druid.clone()), &on)
            .spec
            .data_schema
            .timestamp_spec;
        assert_eq!(
            (ts.column.as_str(), ts.format.as_str()),
            ("__time", "millis")
        );
        // Off (the default): the spec's timestampSpec stands.
        let ts = with_druid_time_compat(spec(druid), &InputSourceConfig::default())
            .spec
            .data_schema
            .timestamp_spec;
        assert_eq!(
            (ts.column.as_str(), ts.format.as_str()),
            ("timestamp", "iso")
        );
        // Other input sources are never changed.
        let ts = with_druid_time_compat(spec(json!({"type": "inline", "data": "{}"})), &on)
            .spec
            .data_schema
            .timestamp_spec;
        assert_eq!(ts.column, "timestamp");
    }
}
