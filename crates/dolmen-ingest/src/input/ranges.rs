//! Parallel, vectorized reading of local NDJSON and CSV/TSV files as a DataFusion table: each
//! output partition decodes line-aligned byte ranges of the files with arrow's own decoders
//! (`arrow::json`, `arrow::csv`) straight from a buffered file reader.
//!
//! Why not DataFusion's file scans: they read local files through `object_store` range
//! requests; on the 10M-row ingestion benchmark this reader is faster (SQL-based ingestion
//! through the same decoders loaded the NDJSON and CSV files 1.2x and 1.4x faster than the
//! native build did on DataFusion's scans, same run). Decoding is the same code either way.
//!
//! [`DelimitedText`] says how a CSV or TSV input format is read this way (or why it cannot be).
//!
//! A decode error (a value of another type than the schema's, a ragged CSV line) fails the
//! stream; the columnar build then reruns the task on the row path (see `crate::columnar`).

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableType;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use super::InputFormat;
use super::delimited::Splitting;
use super::thread_exec::ThreadReadExec;

/// Smallest byte range worth its own task.
const MIN_RANGE_BYTES: u64 = 8 << 20;

/// The text format of the files.
#[derive(Debug, Clone)]
pub enum TextFormat {
    /// Newline-delimited JSON objects, decoded into the table schema's types.
    Json {
        /// Numbers and booleans decode into string columns as their JSON text (SQL-based
        /// ingestion reads every scalar as text and converts it by Druid's rules); when false
        /// such a value is a decode error.
        primitives_as_text: bool,
    },
    /// CSV or TSV, every column of the schema read as text, in file order.
    Delimited {
        /// Field delimiter.
        delimiter: u8,
        /// Quote byte; 0 for none (Druid's TSV).
        quote: u8,
        /// The first line of each file is a header (skipped).
        header: bool,
        /// A line with fewer fields than the schema gets nulls for the missing ones (as Druid's
        /// CSV parser reads it; SQL-based ingestion); when false it is a decode error.
        truncated_rows: bool,
    },
}

/// How [`decode_range`] reads the files of a CSV or TSV input format: the settings both native
/// batch ingestion (the columnar build) and SQL-based ingestion (`EXTERN`) decode with, every
/// column as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelimitedText {
    /// Field delimiter (`,` for CSV; TSV's `delimiter`, default tab).
    pub delimiter: u8,
    /// Quote byte: `"` for CSV, 0 (none) for TSV, which Druid does not quote.
    pub quote: u8,
    /// Each file starts with a header line naming its columns (`findColumnsFromHeader`, or
    /// the older `hasHeaderRow`).
    pub header: bool,
    /// The column names, in file order: the files' common header, else `columns`.
    pub columns: Vec<String>,
    /// The format's `listDelimiter` (default Druid's `\u0001`, [`DEFAULT_LIST_DELIMITER`](super::DEFAULT_LIST_DELIMITER)):
    /// values holding it are multi-value.
    pub list_delimiter: String,
}

impl DelimitedText {
    /// The text reading of `format` over the local `files`.
    ///
    /// # Errors
    /// The reason the row readers must read them instead: not CSV or TSV, an invalid CSV/TSV
    /// format (the row readers' own check and message), a multi-byte TSV delimiter, `skipHeaderRows`, `tryParseNumbers`, a file whose header cannot be read or
    /// differs from the first file's, no columns, or empty or repeated column names.
    pub fn of(format: &InputFormat, files: &[PathBuf]) -> std::result::Result<Self, String> {
        let config = format.delimited_config().map_err(|e| e.to_string())?;
        let (delimiter, quote) = match &config.splitting {
            Splitting::Csv => (b',', b'"'),
            Splitting::Delimiter(d) if d.len() == 1 => (d.as_bytes()[0], 0),
            Splitting::Delimiter(_) => return Err("multi-byte TSV delimiter".into()),
        };
        if config.skip_rows > 0 {
            return Err("skipHeaderRows needs the row path".into());
        }
        if config.try_parse_numbers {
            return Err("tryParseNumbers needs the row path".into());
        }
        let header = config.columns.is_none();
        let columns = if header {
            // Every file must carry the same header: each file's own header names its columns.
            let mut first: Option<Vec<String>> = None;
            for f in files {
                let h = read_header(f, delimiter, quote)?;
                match &first {
                    None => first = Some(h),
                    Some(c) if *c == h => {}
                    Some(_) => return Err("files have different headers".into()),
                }
            }
            first.unwrap_or_default()
        } else {
            config.columns.unwrap_or_default()
        };
        let mut seen = HashSet::new();
        if columns
            .iter()
            .any(|c| c.is_empty() || !seen.insert(c.as_str()))
        {
            return Err("empty or repeated column names".into());
        }
        Ok(DelimitedText {
            delimiter,
            quote,
            header,
            columns,
            list_delimiter: config.list_delimiter,
        })
    }

    /// The [`TextFormat`] of these settings; `truncated_rows` as there.
    pub fn text_format(&self, truncated_rows: bool) -> TextFormat {
        TextFormat::Delimited {
            delimiter: self.delimiter,
            quote: self.quote,
            header: self.header,
            truncated_rows,
        }
    }
}

/// The first record of a CSV/TSV file as column names (`quote` 0: no quoting, as TSV).
///
/// # Errors
/// When the file cannot be read, is empty, or its first record does not parse.
pub fn read_header(
    path: &Path,
    delimiter: u8,
    quote: u8,
) -> std::result::Result<Vec<String>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("[{}]: {e}", path.display()))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .delimiter(delimiter)
        .quoting(quote != 0)
        .quote(if quote == 0 { b'"' } else { quote })
        .from_reader(BufReader::new(file));
    let mut rec = csv::StringRecord::new();
    match rdr.read_record(&mut rec) {
        Ok(true) => Ok(rec.iter().map(str::to_string).collect()),
        Ok(false) => Err(format!("[{}] is empty", path.display())),
        Err(e) => Err(format!("[{}]: {e}", path.display())),
    }
}

/// A table over local text files (see the module docs). Empty CSV fields are null; Druid's
/// row parsers read them as empty strings, so callers fill those in where it matters.
#[derive(Debug, Clone)]
pub struct RangeTable {
    files: Vec<PathBuf>,
    schema: SchemaRef,
    format: TextFormat,
    batch_rows: usize,
}

impl RangeTable {
    /// A table over `files` with `schema`, decoded `batch_rows` rows at a time.
    pub fn new(
        files: Vec<PathBuf>,
        schema: SchemaRef,
        format: TextFormat,
        batch_rows: usize,
    ) -> RangeTable {
        RangeTable {
            files,
            schema,
            format,
            batch_rows: batch_rows.max(1),
        }
    }

    /// The line-aligned byte ranges of the table's files ([`split_ranges`]).
    ///
    /// # Errors
    /// When a file cannot be read.
    pub fn ranges(&self, partitions: usize) -> Result<Vec<Vec<(usize, u64, u64)>>> {
        split_ranges(&self.files, partitions)
    }
}

/// Line-aligned byte ranges `(file, start, end)` of `files` (`file` an index into it) of about
/// `total / partitions` bytes (at least 8 MiB; a file's last range may be up to half a range
/// longer), grouped round-robin into at most `partitions` lists: the units of work of a
/// parallel read, for native batch and SQL-based ingestion alike.
///
/// # Errors
/// When a file cannot be read: an execution error `cannot read [path]: ..`.
pub fn split_ranges(files: &[PathBuf], partitions: usize) -> Result<Vec<Vec<(usize, u64, u64)>>> {
    let partitions = partitions.max(1);
    let sizes = files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .map(|m| m.len())
                .map_err(|e| io_err(f, e))
        })
        .collect::<Result<Vec<_>>>()?;
    let total: u64 = sizes.iter().sum();
    let target = (total / partitions as u64).max(MIN_RANGE_BYTES);
    let mut ranges = Vec::new();
    for (i, (f, len)) in files.iter().zip(sizes).enumerate() {
        let mut start = 0u64;
        while start < len {
            let end = if len - start <= target + target / 2 {
                len
            } else {
                line_start_after(f, start + target)?.min(len)
            };
            ranges.push((i, start, end));
            start = end;
        }
    }
    let n = partitions.min(ranges.len()).max(1);
    let mut groups = vec![Vec::new(); n];
    for (i, r) in ranges.into_iter().enumerate() {
        groups[i % n].push(r);
    }
    Ok(groups)
}

fn io_err(path: &Path, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!("cannot read [{}]: {e}", path.display()))
}

/// The offset just past the first `\n` at or after `at` (the file length when none).
fn line_start_after(path: &Path, at: u64) -> Result<u64> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    f.seek(SeekFrom::Start(at)).map_err(|e| io_err(path, e))?;
    let mut r = BufReader::with_capacity(64 * 1024, f);
    let mut skipped = Vec::new();
    let n = r
        .read_until(b'\n', &mut skipped)
        .map_err(|e| io_err(path, e))?;
    Ok(at + n as u64)
}

/// Bytes `[start, end)` of a file, buffered.
pub fn open_range(
    path: &Path,
    start: u64,
    end: u64,
) -> std::io::Result<BufReader<std::io::Take<File>>> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(start))?;
    Ok(BufReader::with_capacity(1 << 20, f.take(end - start)))
}

/// Rows the JSON decoder takes at a time: its tape for this many lines stays in the CPU's
/// caches (a 65,536-line tape is ~10 MiB). The decoded batches go downstream as they are:
/// putting them together into batches of the requested size cost ~9% of an NDJSON build's
/// CPU (a profile of the 10M-row benchmark), and the build's repartition gathers rows into
/// full batches anyway.
const JSON_DECODE_ROWS: usize = 8192;

/// Decodes one byte range, calling `send` per batch of at most `batch_rows` rows (NDJSON: at
/// most `JSON_DECODE_ROWS` (8,192)); stops when `send` returns false.
///
/// # Errors
/// I/O and decode errors.
pub fn decode_range(
    path: &Path,
    start: u64,
    end: u64,
    schema: &SchemaRef,
    format: &TextFormat,
    batch_rows: usize,
    send: &mut dyn FnMut(RecordBatch) -> bool,
) -> std::result::Result<(), ArrowError> {
    let mut reader =
        open_range(path, start, end).map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
    match format {
        TextFormat::Json { primitives_as_text } => {
            let step = batch_rows.min(JSON_DECODE_ROWS);
            let mut decoder = arrow::json::ReaderBuilder::new(Arc::clone(schema))
                .with_batch_size(step)
                .with_coerce_primitive(*primitives_as_text)
                .build_decoder()?;
            loop {
                loop {
                    let buf = reader
                        .fill_buf()
                        .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
                    if buf.is_empty() {
                        break;
                    }
                    let read = buf.len();
                    let used = decoder.decode(buf)?;
                    reader.consume(used);
                    if used != read {
                        break;
                    }
                }
                match decoder.flush()? {
                    Some(b) => {
                        if !send(b) {
                            return Ok(());
                        }
                    }
                    None => return Ok(()),
                }
            }
        }
        TextFormat::Delimited {
            delimiter,
            quote,
            header,
            truncated_rows,
        } => {
            let mut decoder = arrow::csv::ReaderBuilder::new(Arc::clone(schema))
                .with_batch_size(batch_rows)
                .with_delimiter(*delimiter)
                .with_quote(*quote)
                .with_header(*header && start == 0)
                .with_truncated_rows(*truncated_rows)
                // Empty fields decode as null (arrow's cheap default check; a never-matching
                // null regex cost ~9% of the CSV build's CPU in a profile): callers that want
                // Druid's empty strings fill them in.
                .build_decoder();
            loop {
                // arrow-csv's own read loop: stop at a full batch or when nothing more decodes
                // (the end of the input; skipping the header consumes bytes and goes on).
                loop {
                    let buf = reader
                        .fill_buf()
                        .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
                    let used = decoder.decode(buf)?;
                    reader.consume(used);
                    if used == 0 || decoder.capacity() == 0 {
                        break;
                    }
                }
                match decoder.flush()? {
                    Some(b) => {
                        if !send(b) {
                            return Ok(());
                        }
                    }
                    None => return Ok(()),
                }
            }
        }
    }
}

#[async_trait]
impl TableProvider for RangeTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
    fn table_type(&self) -> TableType {
        TableType::Base
    }
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let this = self.clone();
        let partitions = state.config().target_partitions();
        let groups = tokio::task::spawn_blocking(move || this.ranges(partitions))
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
        let out_schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => Arc::clone(&self.schema),
        };
        let detail = format!("files={}, partitions={}", self.files.len(), groups.len());
        let partitions = groups.len();
        let table = self.clone();
        let projection = projection.cloned();
        let read = move |partition: usize, send: &mut dyn FnMut(Result<RecordBatch>) -> bool| {
            for &(file, start, end) in groups.get(partition).into_iter().flatten() {
                let path = &table.files[file];
                let mut open = true;
                let r = decode_range(
                    path,
                    start,
                    end,
                    &table.schema,
                    &table.format,
                    table.batch_rows,
                    &mut |b| {
                        open = send(match &projection {
                            Some(p) => b.project(p).map_err(DataFusionError::from),
                            None => Ok(b),
                        });
                        open
                    },
                );
                if let Err(e) = r {
                    send(Err(DataFusionError::Execution(format!(
                        "[{}]: {e}",
                        path.display()
                    ))));
                    return;
                }
                if !open {
                    return;
                }
            }
        };
        Ok(Arc::new(ThreadReadExec::new(
            "RangeExec",
            detail,
            out_schema,
            partitions,
            Arc::new(read),
        )))
    }
}
