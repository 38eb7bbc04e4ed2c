//! The indexer: turns parsed input rows into sorted, rolled-up segment files with bounded
//! memory.
//!
//! Rows are added to an in-memory index (a hash map keyed by truncated time and dimension
//! values when rollup is on; a plain vector otherwise). When it holds `maxRowsInMemory` rows it
//! is sorted and spilled to disk as an Arrow IPC run. At the end, the runs and the in-memory rest
//! are k-way merged in segment order (`__time`, then dimensions), equal keys are combined when
//! rolling up, and the merged stream is cut into segment files at time-chunk boundaries
//! (`segmentGranularity`) and every `maxRowsPerSegment` rows. Memory is bounded by
//! `maxRowsInMemory` plus one batch per run during the merge.
//!
//! This is Druid's incremental-index / persist / merge design (`IncrementalIndex`,
//! `IndexMerger`), with Arrow batches as the persisted form.
//!
//! # Column forms
//! Spilled runs (Arrow IPC): `t` (Int64 ms), `d0..dn` (dimensions), `m0..mk` (metric values:
//! Int64 for long kinds, Float64 for double and float kinds, Utf8 for string kinds), then one
//! Int64 column per first/last metric holding the time of its value (null while no row had a
//! time). Segment files (Parquet): `__time`, the dimensions, the metrics typed as the segment
//! schema says, then the same hidden time columns, named [`hidden_time_column`] and absent from
//! the segment schema (queries do not see them).
//!
//! # Multi-value dimensions
//! A string dimension becomes multi-value ([`dolmen_segment::SegmentColumn::multi_value`],
//! Arrow `List<Utf8>`) once any row of the task gives it several values ([`Val::Multi`]); then
//! every segment of the task stores it as a list (a single value as a one-element list, null as
//! a null list). Spilled runs written before the first multi-value row keep the plain `Utf8`
//! form; each run is read back by its own schema.
//!
//! # First/last metrics and re-rollup
//! Druid stores a `(time, value)` pair for `*First`/`*Last` aggregators. Dolmen stores the
//! finalized value in the metric column, typed like the input (long, double, float, string),
//! and keeps the time beside it: in spilled runs, so that combining rows across runs stays exact
//! (the earliest/latest time wins, whatever run it is in; equal times keep input order, because
//! runs are merged in spill order), and as a hidden column in segment files, so that a later
//! re-rollup of segments (compaction) can stay exact too.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, Float32Array, Float32Builder, Float64Array,
    Float64Builder, Int64Array, Int64Builder, ListBuilder, StringArray, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;
use dolmen_common::{Granularity, Interval};
use dolmen_segment::{ColumnKind, ColumnType, SegmentColumn, SegmentFileWriter, SegmentSchema};

use crate::IngestError;
use crate::rows::{Acc, MetricKind, Row, SketchAcc, Val, compare_keys, multi_value, trim_nulls};
use crate::spec::MultiValueHandling;

/// Rows per Arrow batch when writing spills and segments.
const BATCH_ROWS: usize = 16 * 1024;

/// Prefix of [`hidden_time_column`] names.
const HIDDEN_TIME_PREFIX: &str = "__dolmen_time:";

/// Name of the hidden segment-file column holding the time of first/last metric `metric`'s
/// value (epoch ms, Int64; null when no row had a time).
pub fn hidden_time_column(metric: &str) -> String {
    format!("{HIDDEN_TIME_PREFIX}{metric}")
}

/// Whether `name` is a hidden segment-file column ([`hidden_time_column`], or a shredded JSON
/// sub-column, [`dolmen_segment::nested`]); no dimension or metric may take such a name.
/// Readers of segment files as input rows (the `druid` input source) see the time columns,
/// not the sub-columns; schema discovery skips both.
pub fn is_hidden_column(name: &str) -> bool {
    name.starts_with(HIDDEN_TIME_PREFIX) || dolmen_segment::nested::is_nested_column(name)
}

/// A dimension of the datasource being built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DimSlot {
    /// Column name.
    pub name: String,
    /// Value type.
    pub ty: ColumnType,
}

/// A segment file written by the indexer, not yet in deep storage.
#[derive(Debug, Clone)]
pub struct BuiltSegment {
    /// Its time chunk.
    pub interval: Interval,
    /// Local file.
    pub path: PathBuf,
    /// Rows.
    pub num_rows: u64,
    /// File size, bytes.
    pub size: u64,
    /// Columns after `__time`.
    pub schema: SegmentSchema,
}

/// Settings of an [`Indexer`].
#[derive(Debug, Clone)]
pub struct IndexerConfig {
    /// Whether to roll up.
    pub rollup: bool,
    /// Time chunk granularity.
    pub segment_granularity: Granularity,
    /// Rows in memory before a spill.
    pub max_rows_in_memory: usize,
    /// Estimated heap bytes of in-memory rows before a spill (see [`row_heap_bytes`]);
    /// `usize::MAX` for no limit.
    pub max_bytes_in_memory: usize,
    /// Rows per segment.
    pub max_rows_per_segment: u64,
    /// Parquet compression.
    pub compression: parquet::basic::Compression,
    /// Directory for spills and segment files.
    pub work_dir: PathBuf,
}

/// Key of the in-memory rollup index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    time: i64,
    dims: Vec<Val>,
}

/// Builds segments from rows.
#[derive(Debug)]
pub struct Indexer {
    config: IndexerConfig,
    metric_kinds: Vec<MetricKind>,
    metric_names: Vec<String>,
    /// Per dimension index: whether a row gave it several values.
    multi: Vec<bool>,
    rolled: HashMap<Key, Vec<Acc>>,
    plain: Vec<Row>,
    runs: Vec<PathBuf>,
    spill_seq: usize,
    /// Estimated heap bytes of the rows in memory.
    bytes_in_memory: usize,
}

/// The `maxBytesInMemory` budget of the row path: the tuning value when positive, no limit
/// when negative (Druid's -1), else a sixth of physical memory (Druid's default is a sixth of
/// the JVM heap).
pub fn bytes_in_memory_budget(max_bytes_in_memory: Option<i64>) -> usize {
    match max_bytes_in_memory {
        Some(b) if b > 0 => usize::try_from(b).unwrap_or(usize::MAX),
        Some(b) if b < 0 => usize::MAX,
        _ => crate::columnar::physical_memory() / 6,
    }
}

/// Estimated heap bytes of one in-memory row with dimension values `dims`: the row and its
/// vectors, each dimension value with its string bytes, and each metric's
/// [`MetricKind::max_heap_bytes`] (sketches at their largest, as Druid's
/// `getMaxIntermediateSize`), plus a hash-map entry's overhead. Counted once per in-memory row:
/// rows that roll into an existing one add nothing.
pub fn row_heap_bytes(dims: &[Val], kinds: &[MetricKind]) -> usize {
    let dims: usize = dims
        .iter()
        .map(|v| {
            std::mem::size_of::<Val>()
                + match v {
                    Val::Str(s) => s.len(),
                    Val::Multi(vs) => vs
                        .iter()
                        .map(|x| {
                            std::mem::size_of::<Option<Box<str>>>()
                                + x.as_ref().map_or(0, |s| s.len())
                        })
                        .sum(),
                    Val::Json(s) => s.len(),
                    Val::Array(vs) => vs
                        .iter()
                        .map(|x| {
                            std::mem::size_of::<Val>()
                                + match x {
                                    Val::Str(s) => s.len(),
                                    _ => 0,
                                }
                        })
                        .sum(),
                    _ => 0,
                }
        })
        .sum();
    let metrics: usize = kinds
        .iter()
        .map(|k| std::mem::size_of::<Acc>() + k.max_heap_bytes())
        .sum();
    64 + std::mem::size_of::<Row>() + dims + metrics
}

impl Indexer {
    /// A new indexer for metrics `(name, kind)`.
    pub fn new(config: IndexerConfig, metrics: Vec<(String, MetricKind)>) -> Indexer {
        let (metric_names, metric_kinds) = metrics.into_iter().unzip();
        Indexer {
            config,
            metric_kinds,
            metric_names,
            multi: Vec::new(),
            rolled: HashMap::new(),
            plain: Vec::new(),
            runs: Vec::new(),
            spill_seq: 0,
            bytes_in_memory: 0,
        }
    }

    fn in_memory(&self) -> usize {
        if self.config.rollup {
            self.rolled.len()
        } else {
            self.plain.len()
        }
    }

    /// Adds one row; spills when `maxRowsInMemory` is reached.
    ///
    /// # Errors
    /// When a spill fails.
    pub fn add(&mut self, row: Row, dims: &[DimSlot]) -> Result<(), IngestError> {
        for (i, v) in row.dims.iter().enumerate() {
            if matches!(v, Val::Multi(_)) {
                if self.multi.len() <= i {
                    self.multi.resize(i + 1, false);
                }
                self.multi[i] = true;
            }
        }
        if self.config.rollup {
            let key = Key {
                time: row.time,
                dims: trim_nulls(row.dims),
            };
            match self.rolled.get_mut(&key) {
                Some(accs) => {
                    for ((a, b), k) in accs.iter_mut().zip(&row.metrics).zip(&self.metric_kinds) {
                        k.combine(a, b);
                    }
                }
                None => {
                    self.bytes_in_memory += row_heap_bytes(&key.dims, &self.metric_kinds);
                    self.rolled.insert(key, row.metrics);
                }
            }
        } else {
            self.bytes_in_memory += row_heap_bytes(&row.dims, &self.metric_kinds);
            self.plain.push(row);
        }
        if self.in_memory() >= self.config.max_rows_in_memory
            || self.bytes_in_memory >= self.config.max_bytes_in_memory
        {
            self.spill(dims)?;
        }
        Ok(())
    }

    /// Whether dimension `i` has had a row with several values.
    fn is_multi(&self, i: usize) -> bool {
        self.multi.get(i).copied().unwrap_or(false)
    }

    /// The per-dimension multi-value flags for `n` dimensions.
    fn multi_flags(&self, n: usize) -> Vec<bool> {
        (0..n).map(|i| self.is_multi(i)).collect()
    }

    /// Number of sorted runs spilled to disk so far.
    pub fn spill_count(&self) -> usize {
        self.runs.len()
    }

    fn take_sorted(&mut self) -> Vec<Row> {
        self.bytes_in_memory = 0;
        let mut rows: Vec<Row> = if self.config.rollup {
            self.rolled
                .drain()
                .map(|(k, metrics)| Row {
                    time: k.time,
                    dims: k.dims,
                    metrics,
                })
                .collect()
        } else {
            std::mem::take(&mut self.plain)
        };
        rows.sort_unstable_by(|a, b| compare_keys(a.time, &a.dims, b.time, &b.dims));
        rows
    }

    fn spill(&mut self, dims: &[DimSlot]) -> Result<(), IngestError> {
        let rows = self.take_sorted();
        if rows.is_empty() {
            return Ok(());
        }
        let (path, multi, schema, mut w) = self.spill_writer(dims)?;
        let layout = Layout {
            dims,
            multi: &multi,
            metrics: &self.metric_kinds,
            segment: false,
        };
        for chunk in rows.chunks(SPILL_BATCH_ROWS) {
            let batch = rows_to_batch(chunk, &layout, &schema)?;
            w.write(&batch).map_err(|e| arrow_error(&path, e))?;
        }
        w.finish().map_err(|e| arrow_error(&path, e))?;
        tracing::debug!(rows = rows.len(), path = %path.display(), "spilled sorted run");
        self.runs.push(path);
        Ok(())
    }

    /// Merges spilled runs and in-memory rows into segment files.
    ///
    /// More than [`MAX_MERGE_FAN_IN`] spilled runs are first merged in groups into larger runs
    /// (a multi-level external merge), so open files and read buffers stay bounded however
    /// large the input.
    ///
    /// # Errors
    /// I/O or Arrow failures; [`IngestError::Canceled`] when `should_stop` says so.
    pub fn finish(
        mut self,
        dims: &[DimSlot],
        should_stop: &dyn Fn() -> bool,
    ) -> Result<Vec<BuiltSegment>, IngestError> {
        let last = self.take_sorted();
        self.reduce_runs(dims, should_stop)?;
        let mut sources: Vec<RunReader> = Vec::with_capacity(self.runs.len() + 1);
        for p in &self.runs {
            sources.push(RunReader::open(p, self.metric_kinds.clone())?);
        }
        sources.push(RunReader::memory(last));

        let multi = self.multi_flags(dims.len());
        let schema = segment_schema(dims, &multi, &self.metric_names, &self.metric_kinds);
        let arrow_schema = segment_file_schema(&schema, &self.metric_names, &self.metric_kinds);
        let mut out = SegmentSink::new(
            &self.config,
            schema,
            arrow_schema,
            self.metric_kinds.clone(),
            multi,
        );
        merge_sorted(
            sources,
            self.config.rollup,
            &self.metric_kinds,
            should_stop,
            |row| out.push(row, dims),
        )?;
        let built = out.close(dims)?;
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
        Ok(built)
    }

    /// Merges spilled runs [`MAX_MERGE_FAN_IN`] at a time into new runs until at most that many
    /// are left.
    fn reduce_runs(
        &mut self,
        dims: &[DimSlot],
        should_stop: &dyn Fn() -> bool,
    ) -> Result<(), IngestError> {
        while self.runs.len() > MAX_MERGE_FAN_IN {
            let group: Vec<PathBuf> = self.runs.drain(..MAX_MERGE_FAN_IN).collect();
            let sources = group
                .iter()
                .map(|p| RunReader::open(p, self.metric_kinds.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            let (path, multi, schema, mut w) = self.spill_writer(dims)?;
            let layout = Layout {
                dims,
                multi: &multi,
                metrics: &self.metric_kinds,
                segment: false,
            };
            let mut buffer: Vec<Row> = Vec::with_capacity(SPILL_BATCH_ROWS);
            let mut write = |rows: &mut Vec<Row>| -> Result<(), IngestError> {
                let batch = rows_to_batch(rows, &layout, &schema)?;
                rows.clear();
                w.write(&batch).map_err(|e| arrow_error(&path, e))
            };
            merge_sorted(
                sources,
                self.config.rollup,
                &self.metric_kinds,
                should_stop,
                |row| {
                    buffer.push(row);
                    if buffer.len() >= SPILL_BATCH_ROWS {
                        write(&mut buffer)?;
                    }
                    Ok(())
                },
            )?;
            if !buffer.is_empty() {
                write(&mut buffer)?;
            }
            w.finish().map_err(|e| arrow_error(&path, e))?;
            for p in &group {
                let _ = std::fs::remove_file(p);
            }
            tracing::debug!(runs = group.len(), path = %path.display(), "merged spilled runs");
            self.runs.push(path);
        }
        Ok(())
    }

    /// A new spill file for the current dimensions: its path, per-dimension multi-value
    /// flags, schema and writer.
    #[allow(clippy::type_complexity)]
    fn spill_writer(
        &mut self,
        dims: &[DimSlot],
    ) -> Result<(PathBuf, Vec<bool>, SchemaRef, FileWriter<File>), IngestError> {
        let path = self.next_spill_path()?;
        let multi = self.multi_flags(dims.len());
        let schema = spill_schema(dims, &multi, &self.metric_kinds);
        let file = File::create(&path).map_err(|e| io_error(&path, e))?;
        let w = FileWriter::try_new(file, &schema).map_err(|e| arrow_error(&path, e))?;
        Ok((path, multi, schema, w))
    }

    /// A fresh spill file path under the work directory (created if missing).
    fn next_spill_path(&mut self) -> Result<PathBuf, IngestError> {
        std::fs::create_dir_all(&self.config.work_dir)
            .map_err(|e| io_error(&self.config.work_dir, e))?;
        let path = self
            .config
            .work_dir
            .join(format!("spill-{:05}.arrow", self.spill_seq));
        self.spill_seq += 1;
        Ok(path)
    }
}

/// Most sorted runs merged at once (files open and batches buffered by one merge).
pub const MAX_MERGE_FAN_IN: usize = 64;

/// Rows per record batch of a spill file. A merge holds one decoded batch per run, so this
/// times [`MAX_MERGE_FAN_IN`] bounds the rows a merge keeps in memory (64 Ki rows).
pub const SPILL_BATCH_ROWS: usize = 1024;

/// K-way merge of sorted runs; with `rollup`, rows with equal time and dimensions are combined.
/// Each merged row goes to `emit` in sort order.
fn merge_sorted(
    mut sources: Vec<RunReader>,
    rollup: bool,
    kinds: &[MetricKind],
    should_stop: &dyn Fn() -> bool,
    mut emit: impl FnMut(Row) -> Result<(), IngestError>,
) -> Result<(), IngestError> {
    let mut heap = BinaryHeap::new();
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some(r) = s.next_row()? {
            heap.push(HeapItem { row: r, run: i });
        }
    }
    let mut pending: Option<Row> = None;
    let mut n: u64 = 0;
    while let Some(HeapItem { row, run }) = heap.pop() {
        if let Some(next) = sources[run].next_row()? {
            heap.push(HeapItem { row: next, run });
        }
        n += 1;
        if n.is_multiple_of(8192) && should_stop() {
            return Err(IngestError::Canceled);
        }
        match pending.as_mut() {
            Some(p)
                if rollup
                    && compare_keys(p.time, &p.dims, row.time, &row.dims) == Ordering::Equal =>
            {
                for ((a, b), k) in p.metrics.iter_mut().zip(&row.metrics).zip(kinds) {
                    k.combine(a, b);
                }
            }
            _ => {
                if let Some(done) = pending.replace(row) {
                    emit(done)?;
                }
            }
        }
    }
    if let Some(done) = pending {
        emit(done)?;
    }
    Ok(())
}

struct HeapItem {
    row: Row,
    run: usize,
}

impl PartialEq for HeapItem {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeapItem {}
impl PartialOrd for HeapItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapItem {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the smallest key first; ties by run
        // keep the merge stable.
        compare_keys(
            other.row.time,
            &other.row.dims,
            self.row.time,
            &self.row.dims,
        )
        .then_with(|| other.run.cmp(&self.run))
    }
}

/// A spilled run being read back.
struct FileRun {
    reader: FileReader<File>,
    batch: Vec<Row>,
    pos: usize,
    metrics: Vec<MetricKind>,
    path: PathBuf,
}

/// A sorted run: in memory, or an Arrow IPC spill file read one batch at a time.
enum RunReader {
    Memory(std::vec::IntoIter<Row>),
    File(Box<FileRun>),
}

impl RunReader {
    fn memory(rows: Vec<Row>) -> RunReader {
        RunReader::Memory(rows.into_iter())
    }

    fn open(path: &Path, metrics: Vec<MetricKind>) -> Result<RunReader, IngestError> {
        let f = File::open(path).map_err(|e| io_error(path, e))?;
        let reader = FileReader::try_new(f, None).map_err(|e| arrow_error(path, e))?;
        Ok(RunReader::File(Box::new(FileRun {
            reader,
            batch: Vec::new(),
            pos: 0,
            metrics,
            path: path.to_path_buf(),
        })))
    }

    fn next_row(&mut self) -> Result<Option<Row>, IngestError> {
        match self {
            RunReader::Memory(it) => Ok(it.next()),
            RunReader::File(run) => {
                let FileRun {
                    reader,
                    batch,
                    pos,
                    metrics,
                    path,
                } = run.as_mut();
                while *pos >= batch.len() {
                    match reader.next() {
                        None => return Ok(None),
                        Some(b) => {
                            let b = b.map_err(|e| arrow_error(path, e))?;
                            *batch =
                                batch_to_rows(&b, metrics).map_err(|e| arrow_error(path, e))?;
                            *pos = 0;
                        }
                    }
                }
                let r = std::mem::replace(
                    &mut batch[*pos],
                    Row {
                        time: 0,
                        dims: Vec::new(),
                        metrics: Vec::new(),
                    },
                );
                *pos += 1;
                Ok(Some(r))
            }
        }
    }
}

/// The Arrow type of dimension `d` in spills and segments.
fn dim_arrow_type(d: &DimSlot, multi: bool) -> DataType {
    if multi && d.ty == ColumnType::String {
        dolmen_segment::multi_value_string_type()
    } else {
        d.ty.arrow_type()
    }
}

/// The spill type of a metric's value column.
fn spill_metric_type(k: MetricKind) -> DataType {
    match k.column_type() {
        ColumnType::Long => DataType::Int64,
        ColumnType::String => DataType::Utf8,
        ColumnType::Float | ColumnType::Double => DataType::Float64,
        ColumnType::HllSketch
        | ColumnType::ThetaSketch
        | ColumnType::QuantilesDoublesSketch
        | ColumnType::HyperUnique => DataType::Binary,
        // Metrics are never arrays or JSON.
        ty @ (ColumnType::StringArray
        | ColumnType::LongArray
        | ColumnType::DoubleArray
        | ColumnType::Json) => ty.arrow_type(),
    }
}

/// Field metadata key marking a spilled dimension column as an array dimension (a
/// `List<Utf8>` spill column is otherwise a multi-value string).
const SPILL_ARRAY_KEY: &str = "dolmen.array";

/// Field metadata key marking a spilled dimension column as `COMPLEX<json>` (JSON text).
const SPILL_JSON_KEY: &str = "dolmen.json";

/// Spill schema: `t`, then `d0..dn` typed, then `m0..mk` (see [`spill_metric_type`]), then
/// `t0..` (Int64), the times of the first/last metrics in metric order.
fn spill_schema(dims: &[DimSlot], multi: &[bool], metrics: &[MetricKind]) -> SchemaRef {
    let mut fields = vec![Field::new("t", DataType::Int64, false)];
    for (i, d) in dims.iter().enumerate() {
        let f = Field::new(
            format!("d{i}"),
            dim_arrow_type(d, multi.get(i).copied().unwrap_or(false)),
            true,
        );
        fields.push(if d.ty.is_array() {
            f.with_metadata([(SPILL_ARRAY_KEY.to_string(), "true".to_string())].into())
        } else if d.ty == ColumnType::Json {
            f.with_metadata([(SPILL_JSON_KEY.to_string(), "true".to_string())].into())
        } else {
            f
        });
    }
    for (i, m) in metrics.iter().enumerate() {
        fields.push(Field::new(format!("m{i}"), spill_metric_type(*m), true));
    }
    for (i, _) in metrics.iter().enumerate().filter(|(_, m)| m.is_timed()) {
        fields.push(Field::new(format!("t{i}"), DataType::Int64, true));
    }
    Arc::new(Schema::new(fields))
}

fn segment_schema(
    dims: &[DimSlot],
    multi: &[bool],
    names: &[String],
    kinds: &[MetricKind],
) -> SegmentSchema {
    let mut columns: Vec<SegmentColumn> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut c = SegmentColumn::new(d.name.clone(), d.ty, ColumnKind::Dimension);
            c.multi_value = d.ty == ColumnType::String && multi.get(i).copied().unwrap_or(false);
            c
        })
        .collect();
    for (n, k) in names.iter().zip(kinds) {
        let mut c = SegmentColumn::new(n.clone(), k.column_type(), ColumnKind::Metric);
        c.aggregator = k.combining_type().map(str::to_string);
        columns.push(c);
    }
    SegmentSchema { columns }
}

/// The Arrow schema of segment files: the segment schema's, then the hidden time columns of
/// first/last metrics ([`hidden_time_column`]).
fn segment_file_schema(
    schema: &SegmentSchema,
    names: &[String],
    kinds: &[MetricKind],
) -> SchemaRef {
    let base = schema.arrow_schema();
    let mut fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (n, _) in names.iter().zip(kinds).filter(|(_, k)| k.is_timed()) {
        fields.push(Field::new(hidden_time_column(n), DataType::Int64, true));
    }
    Arc::new(Schema::new(fields))
}

/// The elements of an array dimension value: the array's, or a scalar read before the
/// dimension's type widened to an array as a one-element array; `None` for null.
fn array_elements(v: Option<&Val>) -> Option<Vec<&Val>> {
    match v {
        None | Some(Val::Null) => None,
        Some(Val::Array(vs)) => Some(vs.iter().collect()),
        Some(other) => Some(vec![other]),
    }
}

/// A scalar dimension value as text (numbers as Druid prints them: `Long.toString`,
/// `Double.toString`).
fn scalar_text(v: &Val) -> Option<String> {
    match v {
        Val::Str(s) => Some(s.to_string()),
        Val::Long(n) => Some(n.to_string()),
        Val::Double(d) => Some(crate::expr::format_double(*d)),
        Val::Float(f) => Some(crate::expr::format_double(f64::from(*f))),
        _ => None,
    }
}

/// A dimension value as JSON text (a `COMPLEX<json>` column; values read before the column
/// widened to JSON are written as the JSON they were).
fn json_text(v: &Val) -> Option<String> {
    match v {
        Val::Null => None,
        Val::Json(t) => Some(t.to_string()),
        Val::Str(s) => Some(serde_json::Value::String(s.to_string()).to_string()),
        Val::Long(n) => Some(n.to_string()),
        Val::Double(d) => Some(serde_json::json!(d).to_string()),
        Val::Float(f) => Some(serde_json::json!(f64::from(*f)).to_string()),
        Val::Multi(vs) => Some(serde_json::json!(vs).to_string()),
        Val::Array(vs) => Some(format!(
            "[{}]",
            vs.iter()
                .map(|x| json_text(x).unwrap_or_else(|| "null".to_string()))
                .collect::<Vec<_>>()
                .join(",")
        )),
    }
}

/// A numeric dimension value as a double.
fn scalar_f64(v: &Val) -> Option<f64> {
    match v {
        Val::Long(n) => Some(*n as f64),
        Val::Double(d) => Some(*d),
        Val::Float(f) => Some(f64::from(*f)),
        _ => None,
    }
}

/// How rows map to batch columns.
struct Layout<'a> {
    dims: &'a [DimSlot],
    /// Per dimension: stored as a list.
    multi: &'a [bool],
    metrics: &'a [MetricKind],
    /// Segment form (`__time` as a timestamp, float metrics as Float32) or spill form.
    segment: bool,
}

/// Builds a batch from rows in the spill or segment form of `layout`.
fn rows_to_batch(
    rows: &[Row],
    layout: &Layout<'_>,
    schema: &SchemaRef,
) -> Result<RecordBatch, IngestError> {
    let Layout {
        dims,
        multi,
        metrics,
        segment,
    } = *layout;
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(1 + dims.len() + metrics.len() * 2);
    if segment {
        let mut b = TimestampMillisecondBuilder::with_capacity(rows.len());
        for r in rows {
            b.append_value(r.time);
        }
        cols.push(Arc::new(b.finish()));
    } else {
        cols.push(Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.time),
        )));
    }
    for (i, d) in dims.iter().enumerate() {
        let get = |r: &Row| r.dims.get(i).cloned().unwrap_or(Val::Null);
        let arr: ArrayRef = match d.ty {
            ColumnType::String if multi.get(i).copied().unwrap_or(false) => {
                let mut b = ListBuilder::with_capacity(StringBuilder::new(), rows.len());
                for r in rows {
                    match r.dims.get(i) {
                        Some(Val::Str(s)) => {
                            b.values().append_value(s);
                            b.append(true);
                        }
                        Some(Val::Multi(vs)) => {
                            for v in vs.iter() {
                                b.values().append_option(v.as_deref());
                            }
                            b.append(true);
                        }
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::String => {
                let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 8);
                for r in rows {
                    match r.dims.get(i) {
                        Some(Val::Str(s)) => b.append_value(s),
                        // A discovered dimension widened to STRING after numbers were read.
                        Some(v @ (Val::Long(_) | Val::Double(_) | Val::Float(_))) => {
                            b.append_option(scalar_text(v))
                        }
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::Json => {
                let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 16);
                for r in rows {
                    b.append_option(r.dims.get(i).and_then(json_text));
                }
                Arc::new(b.finish())
            }
            ColumnType::StringArray => {
                let mut b = ListBuilder::with_capacity(StringBuilder::new(), rows.len());
                for r in rows {
                    match array_elements(r.dims.get(i)) {
                        Some(vs) => {
                            for v in vs {
                                b.values().append_option(scalar_text(v));
                            }
                            b.append(true);
                        }
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::LongArray => {
                let mut b = ListBuilder::with_capacity(Int64Builder::new(), rows.len());
                for r in rows {
                    match array_elements(r.dims.get(i)) {
                        Some(vs) => {
                            for v in vs {
                                b.values().append_option(match v {
                                    Val::Long(n) => Some(*n),
                                    _ => None,
                                });
                            }
                            b.append(true);
                        }
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::DoubleArray => {
                let mut b = ListBuilder::with_capacity(Float64Builder::new(), rows.len());
                for r in rows {
                    match array_elements(r.dims.get(i)) {
                        Some(vs) => {
                            for v in vs {
                                b.values().append_option(scalar_f64(v));
                            }
                            b.append(true);
                        }
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::Long => {
                let mut b = Int64Builder::with_capacity(rows.len());
                for r in rows {
                    match get(r) {
                        Val::Long(v) => b.append_value(v),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::Float => {
                let mut b = Float32Builder::with_capacity(rows.len());
                for r in rows {
                    match get(r) {
                        Val::Float(v) => b.append_value(v),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            ColumnType::Double => {
                let mut b = Float64Builder::with_capacity(rows.len());
                for r in rows {
                    // A discovered dimension widened to DOUBLE after longs were read.
                    b.append_option(scalar_f64(&get(r)));
                }
                Arc::new(b.finish())
            }
            // Dimensions are never sketches.
            ty => arrow::array::new_null_array(&ty.arrow_type(), rows.len()),
        };
        cols.push(arr);
    }
    for (j, k) in metrics.iter().enumerate() {
        let arr: ArrayRef = match (k.column_type(), segment) {
            (ty, _) if ty.is_sketch() => {
                let mut b = BinaryBuilder::with_capacity(rows.len(), rows.len() * 64);
                for r in rows {
                    match r.metrics.get(j) {
                        Some(Acc::Sketch(s)) => b.append_value(s.to_bytes()),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            (ColumnType::Long, _) => {
                let mut b = Int64Builder::with_capacity(rows.len());
                for r in rows {
                    match r.metrics.get(j) {
                        Some(Acc::Long(Some(v)) | Acc::TimedLong(_, Some(v))) => b.append_value(*v),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            (ColumnType::String, _) => {
                let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 8);
                for r in rows {
                    match r.metrics.get(j) {
                        Some(Acc::TimedStr(_, Some(v))) => b.append_value(v),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            (ColumnType::Float, true) => {
                let mut b = Float32Builder::with_capacity(rows.len());
                for r in rows {
                    match r.metrics.get(j) {
                        Some(Acc::Double(Some(v)) | Acc::TimedDouble(_, Some(v))) => {
                            b.append_value(*v as f32)
                        }
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            _ => {
                let mut b = Float64Builder::with_capacity(rows.len());
                for r in rows {
                    match r.metrics.get(j) {
                        Some(Acc::Double(Some(v)) | Acc::TimedDouble(_, Some(v))) => {
                            b.append_value(*v)
                        }
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
        };
        cols.push(arr);
    }
    for (j, k) in metrics.iter().enumerate().filter(|(_, k)| k.is_timed()) {
        let empty = k.empty_time();
        let mut b = Int64Builder::with_capacity(rows.len());
        for r in rows {
            match r.metrics.get(j).and_then(Acc::time) {
                Some(t) if t != empty => b.append_value(t),
                _ => b.append_null(),
            }
        }
        cols.push(Arc::new(b.finish()));
    }
    RecordBatch::try_new(Arc::clone(schema), cols)
        .map_err(|e| IngestError::Runtime(format!("cannot build row batch: {e}")))
}

/// Reads a spill batch back into rows (columns by position: `t`, dims, metric values, metric
/// times; see [`spill_schema`]).
fn batch_to_rows(
    b: &RecordBatch,
    metrics: &[MetricKind],
) -> Result<Vec<Row>, arrow::error::ArrowError> {
    let bad = |what: &str| arrow::error::ArrowError::SchemaError(format!("spill run: {what}"));
    let n = b.num_rows();
    let ncols = b.num_columns();
    let timed = metrics.iter().filter(|k| k.is_timed()).count();
    let ndims = ncols
        .checked_sub(1 + metrics.len() + timed)
        .ok_or_else(|| bad("too few columns"))?;
    let t = b
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| bad("time column is not Int64"))?;
    let mut rows: Vec<Row> = (0..n)
        .map(|i| Row {
            time: t.value(i),
            dims: Vec::with_capacity(ndims),
            metrics: Vec::with_capacity(metrics.len()),
        })
        .collect();
    for c in 1..=ndims {
        let col = b.column(c);
        let schema = b.schema();
        let meta = schema.field(c).metadata();
        let array = meta.contains_key(SPILL_ARRAY_KEY);
        let json = meta.contains_key(SPILL_JSON_KEY);
        for (i, row) in rows.iter_mut().enumerate() {
            row.dims.push(if array {
                array_val_at(col.as_ref(), i)
            } else if json {
                match val_at(col.as_ref(), i) {
                    Val::Str(s) => Val::Json(s),
                    other => other,
                }
            } else {
                val_at(col.as_ref(), i)
            });
        }
    }
    let mut time_col = 1 + ndims + metrics.len();
    for (j, k) in metrics.iter().enumerate() {
        let col = b.column(1 + ndims + j);
        let times = if k.is_timed() {
            let tc = b
                .column(time_col)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| bad("metric time column is not Int64"))?;
            time_col += 1;
            Some(tc)
        } else {
            None
        };
        if k.is_sketch() {
            let bin = col
                .as_binary_opt::<i32>()
                .ok_or_else(|| bad("sketch column is not Binary"))?;
            for (i, row) in rows.iter_mut().enumerate() {
                let acc = if bin.is_valid(i) {
                    SketchAcc::from_bytes(*k, bin.value(i))
                        .map_err(|e| bad(&format!("sketch column: {e}")))?
                } else {
                    SketchAcc::new(*k).map_err(|e| bad(&e.to_string()))?
                };
                row.metrics.push(Acc::Sketch(Box::new(acc)));
            }
            continue;
        }
        for (i, row) in rows.iter_mut().enumerate() {
            let valid = col.is_valid(i);
            let acc = match (times, k.column_type()) {
                (Some(tc), ty) => {
                    let time = if tc.is_valid(i) {
                        tc.value(i)
                    } else {
                        k.empty_time()
                    };
                    match ty {
                        ColumnType::Long => Acc::TimedLong(
                            time,
                            col.as_primitive_opt::<arrow::datatypes::Int64Type>()
                                .filter(|_| valid)
                                .map(|a| a.value(i)),
                        ),
                        ColumnType::String => Acc::TimedStr(
                            time,
                            col.as_string_opt::<i32>()
                                .filter(|_| valid)
                                .map(|a| a.value(i).into()),
                        ),
                        _ => Acc::TimedDouble(
                            time,
                            col.as_primitive_opt::<arrow::datatypes::Float64Type>()
                                .filter(|_| valid)
                                .map(|a| a.value(i)),
                        ),
                    }
                }
                (None, ColumnType::Long) => Acc::Long(
                    col.as_primitive_opt::<arrow::datatypes::Int64Type>()
                        .filter(|_| valid)
                        .map(|a| a.value(i)),
                ),
                (None, _) => Acc::Double(
                    col.as_primitive_opt::<arrow::datatypes::Float64Type>()
                        .filter(|_| valid)
                        .map(|a| a.value(i)),
                ),
            };
            row.metrics.push(acc);
        }
    }
    Ok(rows)
}

fn val_at(col: &dyn Array, i: usize) -> Val {
    if col.is_null(i) {
        return Val::Null;
    }
    let any = col.as_any();
    if let Some(a) = any.downcast_ref::<StringArray>() {
        Val::Str(a.value(i).into())
    } else if let Some(a) = any.downcast_ref::<Int64Array>() {
        Val::Long(a.value(i))
    } else if let Some(a) = any.downcast_ref::<Float32Array>() {
        Val::Float(a.value(i))
    } else if let Some(a) = any.downcast_ref::<Float64Array>() {
        Val::Double(a.value(i))
    } else if let Some(l) = col.as_list_opt::<i32>() {
        let items = l.value(i);
        match items.as_string_opt::<i32>() {
            // Already handled when first indexed: keep the stored order.
            Some(s) => multi_value(
                s.iter().map(|v| v.map(Box::<str>::from)).collect(),
                MultiValueHandling::Array,
            ),
            None => Val::Null,
        }
    } else {
        Val::Null
    }
}

/// Row `i` of a spilled array dimension column (a list of strings, longs or doubles).
fn array_val_at(col: &dyn Array, i: usize) -> Val {
    if col.is_null(i) {
        return Val::Null;
    }
    let Some(l) = col.as_list_opt::<i32>() else {
        return Val::Null;
    };
    let items = l.value(i);
    Val::Array(
        (0..items.len())
            .map(|j| val_at(items.as_ref(), j))
            .collect(),
    )
}

/// Receives merged rows in order and cuts them into segment files.
struct SegmentSink<'a> {
    config: &'a IndexerConfig,
    schema: SegmentSchema,
    arrow_schema: SchemaRef,
    metrics: Vec<MetricKind>,
    multi: Vec<bool>,
    current: Option<OpenSegment>,
    buffer: Vec<Row>,
    built: Vec<BuiltSegment>,
    seq: usize,
}

struct OpenSegment {
    interval: Interval,
    writer: SegmentFileWriter,
    path: PathBuf,
}

impl<'a> SegmentSink<'a> {
    fn new(
        config: &'a IndexerConfig,
        schema: SegmentSchema,
        arrow_schema: SchemaRef,
        metrics: Vec<MetricKind>,
        multi: Vec<bool>,
    ) -> Self {
        SegmentSink {
            config,
            schema,
            arrow_schema,
            metrics,
            multi,
            current: None,
            buffer: Vec::new(),
            built: Vec::new(),
            seq: 0,
        }
    }

    fn push(&mut self, row: Row, dims: &[DimSlot]) -> Result<(), IngestError> {
        let bucket = self.config.segment_granularity.bucket(row.time);
        let rotate = match &self.current {
            None => true,
            Some(open) => {
                open.interval != bucket
                    || open.writer.rows() + self.buffer.len() as u64
                        >= self.config.max_rows_per_segment
            }
        };
        if rotate {
            self.flush(dims)?;
            self.finish_current()?;
            let path = self
                .config
                .work_dir
                .join(format!("segment-{:05}.parquet", self.seq));
            self.seq += 1;
            let writer = SegmentFileWriter::create(
                &path,
                Arc::clone(&self.arrow_schema),
                self.config.compression,
            )
            .map_err(|e| IngestError::Runtime(e.to_string()))?;
            self.current = Some(OpenSegment {
                interval: bucket,
                writer,
                path,
            });
        }
        self.buffer.push(row);
        if self.buffer.len() >= BATCH_ROWS {
            self.flush(dims)?;
        }
        Ok(())
    }

    fn flush(&mut self, dims: &[DimSlot]) -> Result<(), IngestError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let layout = Layout {
            dims,
            multi: &self.multi,
            metrics: &self.metrics,
            segment: true,
        };
        let batch = rows_to_batch(&self.buffer, &layout, &self.arrow_schema)?;
        self.buffer.clear();
        let open = self
            .current
            .as_mut()
            .expect("open segment while rows are buffered");
        open.writer
            .write(&batch)
            .map_err(|e| IngestError::Runtime(e.to_string()))
    }

    fn finish_current(&mut self) -> Result<(), IngestError> {
        if let Some(open) = self.current.take() {
            let rows = open.writer.rows();
            let (size, layout) = open
                .writer
                .finish_with_layout()
                .map_err(|e| IngestError::Runtime(e.to_string()))?;
            self.built.push(BuiltSegment {
                interval: open.interval,
                path: open.path,
                num_rows: rows,
                size,
                schema: self.schema.clone().with_nested_layout(&layout),
            });
        }
        Ok(())
    }

    fn close(mut self, dims: &[DimSlot]) -> Result<Vec<BuiltSegment>, IngestError> {
        self.flush(dims)?;
        self.finish_current()?;
        Ok(self.built)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> IngestError {
    IngestError::Runtime(format!("i/o error at [{}]: {e}", path.display()))
}

fn arrow_error(path: &Path, e: arrow::error::ArrowError) -> IngestError {
    IngestError::Runtime(format!("cannot read or write [{}]: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn config(dir: &Path, rollup: bool, in_mem: usize, per_seg: u64) -> IndexerConfig {
        IndexerConfig {
            rollup,
            segment_granularity: Granularity::from_name("hour").unwrap(),
            max_rows_in_memory: in_mem,
            max_bytes_in_memory: usize::MAX,
            max_rows_per_segment: per_seg,
            compression: dolmen_segment::file::compression_for(None),
            work_dir: dir.to_path_buf(),
        }
    }

    fn row(t: i64, page: &str, n: i64) -> Row {
        Row {
            time: t,
            dims: vec![Val::Str(page.into())],
            metrics: vec![Acc::Long(Some(1)), Acc::Long(Some(n))],
        }
    }

    fn read_all(segs: &[BuiltSegment]) -> Vec<(i64, String, i64, i64)> {
        let mut out = Vec::new();
        for s in segs {
            let r = ParquetRecordBatchReaderBuilder::try_new(File::open(&s.path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for b in r {
                let b = b.unwrap();
                let t = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::TimestampMillisecondArray>()
                    .unwrap();
                let p = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
                let c = b.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
                let a = b.column(3).as_any().downcast_ref::<Int64Array>().unwrap();
                for i in 0..b.num_rows() {
                    out.push((t.value(i), p.value(i).to_string(), c.value(i), a.value(i)));
                }
            }
        }
        out
    }

    #[test]
    fn rollup_across_spills_sorts_and_combines() {
        let dir = tempfile::tempdir().unwrap();
        let dims = vec![DimSlot {
            name: "page".into(),
            ty: ColumnType::String,
        }];
        let mut ix = Indexer::new(
            config(dir.path(), true, 2, 1000),
            vec![
                ("count".into(), MetricKind::Count),
                ("added".into(), MetricKind::LongSum),
            ],
        );
        // Duplicates land in different spilled runs; the merge must combine them.
        for (t, p, n) in [
            (10, "b", 1),
            (10, "a", 2),
            (10, "b", 3),
            (5, "a", 4),
            (10, "a", 5),
            (3_600_000, "a", 6),
        ] {
            ix.add(row(t, p, n), &dims).unwrap();
        }
        assert!(ix.spill_count() >= 2);
        let segs = ix.finish(&dims, &|| false).unwrap();
        assert_eq!(segs.len(), 2, "two hours, two time chunks");
        let rows = read_all(&segs);
        assert_eq!(
            rows,
            vec![
                (5, "a".into(), 1, 4),
                (10, "a".into(), 2, 7),
                (10, "b".into(), 2, 4),
                (3_600_000, "a".into(), 1, 6)
            ]
        );
        assert_eq!(segs[0].num_rows, 3);
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("spill")
        }));
    }

    #[test]
    fn no_rollup_keeps_every_row_and_cuts_by_max_rows() {
        let dir = tempfile::tempdir().unwrap();
        let dims = vec![DimSlot {
            name: "page".into(),
            ty: ColumnType::String,
        }];
        let mut ix = Indexer::new(
            config(dir.path(), false, 3, 2),
            vec![
                ("count".into(), MetricKind::Count),
                ("added".into(), MetricKind::LongSum),
            ],
        );
        for i in 0..5 {
            ix.add(row(10, "a", i), &dims).unwrap();
        }
        let segs = ix.finish(&dims, &|| false).unwrap();
        assert_eq!(
            segs.iter().map(|s| s.num_rows).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        assert_eq!(read_all(&segs).len(), 5);
    }

    #[test]
    fn cancellation_stops_the_merge() {
        let dir = tempfile::tempdir().unwrap();
        let dims = vec![DimSlot {
            name: "page".into(),
            ty: ColumnType::String,
        }];
        let mut ix = Indexer::new(
            config(dir.path(), false, 1_000_000, 1_000_000),
            vec![("count".into(), MetricKind::Count)],
        );
        for i in 0..20_000 {
            ix.add(
                Row {
                    time: i,
                    dims: vec![Val::Null],
                    metrics: vec![Acc::Long(Some(1))],
                },
                &dims,
            )
            .unwrap();
        }
        assert!(matches!(
            ix.finish(&dims, &|| true),
            Err(IngestError::Canceled)
        ));
    }

    #[test]
    fn multi_value_dims_roll_up_as_whole_lists_across_spills() {
        use arrow::array::ListArray;
        let dir = tempfile::tempdir().unwrap();
        let dims = vec![DimSlot {
            name: "tags".into(),
            ty: ColumnType::String,
        }];
        let mut ix = Indexer::new(
            config(dir.path(), true, 2, 1000),
            vec![("count".into(), MetricKind::Count)],
        );
        let multi = |v: &[&str]| Val::Multi(v.iter().map(|s| Some((*s).into())).collect());
        // The first spilled run has only plain strings (Utf8), later ones lists.
        for v in [
            Val::Str("a".into()),
            Val::Str("b".into()),
            multi(&["a", "b"]),
            Val::Null,
            multi(&["a", "b"]),
            Val::Str("a".into()),
            multi(&["a", "c"]),
        ] {
            ix.add(
                Row {
                    time: 10,
                    dims: vec![v],
                    metrics: vec![Acc::Long(Some(1))],
                },
                &dims,
            )
            .unwrap();
        }
        assert!(ix.spill_count() >= 2);
        let segs = ix.finish(&dims, &|| false).unwrap();
        assert_eq!(segs.len(), 1);
        let col = &segs[0].schema.columns[0];
        assert!(col.multi_value && col.is_multi_value(), "{col:?}");
        let r = ParquetRecordBatchReaderBuilder::try_new(File::open(&segs[0].path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let mut got = Vec::new();
        for b in r {
            let b = b.unwrap();
            let l = b.column(1).as_any().downcast_ref::<ListArray>().unwrap();
            let c = b.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
            for i in 0..b.num_rows() {
                let v: Option<Vec<String>> = l.is_valid(i).then(|| {
                    l.value(i)
                        .as_string::<i32>()
                        .iter()
                        .map(|s| s.unwrap_or("null").to_string())
                        .collect()
                });
                got.push((v, c.value(i)));
            }
        }
        let s = |v: &[&str]| Some(v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(
            got,
            vec![
                (None, 1),
                (s(&["a"]), 2),
                (s(&["a", "b"]), 2),
                (s(&["a", "c"]), 1),
                (s(&["b"]), 1),
            ]
        );
    }

    #[test]
    fn first_last_roll_up_exactly_across_spills() {
        let dir = tempfile::tempdir().unwrap();
        let dims = vec![DimSlot {
            name: "page".into(),
            ty: ColumnType::String,
        }];
        let kinds = [
            MetricKind::LongFirst,
            MetricKind::StringLast,
            MetricKind::FloatFirst,
        ];
        let mut ix = Indexer::new(
            config(dir.path(), true, 1, 1000),
            vec![
                ("first".into(), kinds[0]),
                ("last".into(), kinds[1]),
                ("ffirst".into(), kinds[2]),
            ],
        );
        // (row time, value time, value): every row spills on its own; the earliest and latest
        // values are in the middle of the input.
        for (vt, v) in [(50, 5), (20, 2), (90, 9), (20, 3), (90, 8), (60, 6)] {
            let metrics = vec![
                kinds[0]
                    .init_at(Some(&serde_json::json!(v)), Some(vt), 1024)
                    .unwrap(),
                kinds[1]
                    .init_at(Some(&serde_json::json!(format!("s{v}"))), Some(vt), 1024)
                    .unwrap(),
                kinds[2]
                    .init_at(Some(&serde_json::json!(v)), None, 1024)
                    .unwrap(),
            ];
            ix.add(
                Row {
                    time: 0,
                    dims: vec![Val::Str("p".into())],
                    metrics,
                },
                &dims,
            )
            .unwrap();
        }
        assert!(ix.spill_count() >= 5);
        let segs = ix.finish(&dims, &|| false).unwrap();
        let b = ParquetRecordBatchReaderBuilder::try_new(File::open(&segs[0].path).unwrap())
            .unwrap()
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(b.num_rows(), 1);
        let long = |c: usize| b.column(c).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(long(2).value(0), 2, "earliest time, first seen on a tie");
        assert_eq!(
            b.column(3).as_string::<i32>().value(0),
            "s8",
            "latest, last seen"
        );
        assert!(b.column(4).is_null(0), "no time: nothing to keep");
        // Hidden time columns follow the listed ones.
        let schema = b.schema();
        assert_eq!(schema.field(5).name(), &hidden_time_column("first"));
        assert_eq!(long(5).value(0), 20);
        assert_eq!(long(6).value(0), 90);
        assert!(b.column(7).is_null(0));
        assert_eq!(segs[0].schema.columns.len(), 4);
        assert_eq!(segs[0].schema.columns[2].ty, ColumnType::String);
        assert_eq!(segs[0].schema.columns[3].ty, ColumnType::Float);
    }
}
