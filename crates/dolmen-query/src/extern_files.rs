//! The fast path of `EXTERN` ([`crate::external`]) for local files: NDJSON, CSV/TSV and Parquet
//! decoded straight into Arrow batches, in parallel byte ranges (text) or row groups
//! (Parquet), instead of row by row through JSON maps. Text files are split and decoded by
//! native ingestion's reader ([`dolmen_ingest::input::ranges`]: the same line-aligned ranges
//! and Arrow decoders, with every value read as text).
//!
//! Values get exactly the general path's Druid conversions ([`crate::external::convert`]),
//! applied a column at a time ([`to_signature`]): text columns are decoded as strings (NDJSON
//! numbers and booleans as their text) and parsed leniently (unparseable numbers are null),
//! Parquet columns are cast (timestamps as epoch ms, as Druid reads them).
//!
//! NDJSON that the vectorized decoder rejects (an object where the signature has a scalar, a
//! scalar in an array column) is re-read row by row for that byte range, skipping the rows
//! already sent, so the answer is always the general path's. Not taken here (the general path
//! reads them): gzip files, `flattenSpec` fields, CSV `skipHeaderRows`/`tryParseNumbers`,
//! multi-byte TSV delimiters, `COMPLEX<json>` columns, and non-local sources.

use std::fs::File;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Float32Array, Float64Array, Int64Array, ListBuilder, StringArray,
    StringBuilder, new_null_array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use dolmen_ingest::input::ranges::{
    DelimitedText, TextFormat, decode_range, open_range, split_ranges,
};
use dolmen_ingest::input::{InputEntity, InputFormat, InputSource};

use crate::external::convert;

/// Rows per decoded batch.
const BATCH_ROWS: usize = 16 * 1024;

/// How the files are decoded.
#[derive(Debug, Clone)]
pub(crate) enum FileFormat {
    /// Newline-delimited JSON.
    Json,
    /// CSV or TSV, every column read as text.
    Delimited(DelimitedText),
    /// Parquet.
    Parquet,
}

/// One unit of work of a partition.
#[derive(Debug, Clone)]
pub(crate) enum FileTask {
    /// Bytes `[start, end)` of a text file, starting at a line start.
    Range { file: usize, start: u64, end: u64 },
    /// Row groups of a Parquet file.
    RowGroups { file: usize, groups: Vec<usize> },
}

/// Local files eligible for the fast path, and their format.
#[derive(Debug, Clone)]
pub(crate) struct FilePlan {
    pub(crate) format: FileFormat,
    pub(crate) files: Vec<PathBuf>,
}

/// The fast-path plan for `entities`, or `None` when the general path must read them.
pub(crate) fn plan(
    source: &InputSource,
    format: &InputFormat,
    schema: &SchemaRef,
    entities: &[InputEntity],
) -> Option<FilePlan> {
    if !matches!(source, InputSource::Local { .. }) || entities.is_empty() {
        return None;
    }
    if schema.fields().iter().any(|f| {
        crate::functions::scalar::is_json_field(f)
            || f.metadata()
                .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
    }) {
        return None;
    }
    let mut files = Vec::with_capacity(entities.len());
    for e in entities {
        let InputEntity::File(p) = e else { return None };
        let name = p.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".gz") || name.ends_with(".gzip") {
            return None;
        }
        files.push(p.clone());
    }
    let flatten_fields = |f: &Option<serde_json::Value>| {
        f.as_ref()
            .and_then(|v| v.get("fields"))
            .and_then(serde_json::Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    let format = match format {
        InputFormat::Json { flatten_spec, .. } if !flatten_fields(flatten_spec) => FileFormat::Json,
        InputFormat::Parquet { flatten_spec, .. } if !flatten_fields(flatten_spec) => {
            FileFormat::Parquet
        }
        InputFormat::Csv { .. } | InputFormat::Tsv { .. } => {
            FileFormat::Delimited(DelimitedText::of(format, &files).ok()?)
        }
        _ => return None,
    };
    Some(FilePlan { format, files })
}

impl FilePlan {
    /// Splits the files into about `partitions` groups of tasks: text files in line-aligned
    /// byte ranges, Parquet files by row group.
    pub(crate) fn tasks(&self, partitions: usize) -> Result<Vec<Vec<FileTask>>> {
        let partitions = partitions.max(1);
        let mut tasks = Vec::new();
        match self.format {
            FileFormat::Parquet => {
                for (i, f) in self.files.iter().enumerate() {
                    let file = File::open(f).map_err(|e| io_err(f, e))?;
                    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
                        .parse_and_finish(&file)
                        .map_err(|e| {
                            DataFusionError::Execution(format!("EXTERN: [{}]: {e}", f.display()))
                        })?;
                    for g in 0..meta.num_row_groups() {
                        tasks.push(FileTask::RowGroups {
                            file: i,
                            groups: vec![g],
                        });
                    }
                }
            }
            _ => {
                // Line-aligned byte ranges, split and grouped as native ingestion does.
                return Ok(split_ranges(&self.files, partitions)
                    .map_err(|e| match e {
                        DataFusionError::Execution(m) => {
                            DataFusionError::Execution(format!("EXTERN: {m}"))
                        }
                        e => e,
                    })?
                    .into_iter()
                    .map(|g| {
                        g.into_iter()
                            .map(|(file, start, end)| FileTask::Range { file, start, end })
                            .collect()
                    })
                    .collect());
            }
        }
        let mut groups: Vec<Vec<FileTask>> = vec![Vec::new(); partitions.min(tasks.len()).max(1)];
        let n = groups.len();
        for (i, t) in tasks.into_iter().enumerate() {
            groups[i % n].push(t);
        }
        Ok(groups)
    }
}

fn io_err(path: &std::path::Path, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!("EXTERN: cannot read [{}]: {e}", path.display()))
}

/// Runs `tasks` in order, calling `send` with each converted batch; stops when `send`
/// returns false.
pub(crate) fn run(
    plan: &FilePlan,
    tasks: &[FileTask],
    schema: &SchemaRef,
    send: &mut dyn FnMut(Result<RecordBatch>) -> bool,
) {
    for t in tasks {
        let ok = match t {
            FileTask::Range { file, start, end } => {
                read_range(plan, &plan.files[*file], *start, *end, schema, send)
            }
            FileTask::RowGroups { file, groups } => {
                read_row_groups(&plan.files[*file], groups, schema, send)
            }
        };
        if !ok {
            return;
        }
    }
}

/// Reads one byte range of a text file with dolmen-ingest's decoder
/// ([`decode_range`]: every value as text), converting each batch to the signature; false when
/// the receiver is gone or an error was sent. NDJSON the decoder rejects is re-read row by
/// row from the rows not sent yet ([`json_rows`]).
fn read_range(
    plan: &FilePlan,
    path: &Path,
    start: u64,
    end: u64,
    schema: &SchemaRef,
    send: &mut dyn FnMut(Result<RecordBatch>) -> bool,
) -> bool {
    let (format, read_schema, list_delimiter) = match &plan.format {
        FileFormat::Json => {
            // Everything as text (numbers and booleans as their JSON text), arrays as lists.
            let read_schema = Schema::new(
                schema
                    .fields()
                    .iter()
                    .map(|f| match f.data_type() {
                        DataType::List(_) => Field::new(
                            f.name(),
                            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                            true,
                        ),
                        _ => Field::new(f.name(), DataType::Utf8, true),
                    })
                    .collect::<Vec<_>>(),
            );
            let format = TextFormat::Json {
                primitives_as_text: true,
            };
            (format, read_schema, None)
        }
        FileFormat::Delimited(text) => {
            let read_schema = Schema::new(
                text.columns
                    .iter()
                    .map(|c| Field::new(c, DataType::Utf8, true))
                    .collect::<Vec<_>>(),
            );
            (
                text.text_format(true),
                read_schema,
                Some(text.list_delimiter.as_str()),
            )
        }
        FileFormat::Parquet => return send(Err(DataFusionError::Internal("parquet range".into()))),
    };
    let mut sent_rows = 0usize;
    let mut open = true;
    let decoded = decode_range(
        path,
        start,
        end,
        &Arc::new(read_schema),
        &format,
        BATCH_ROWS,
        &mut |b| {
            open = send(convert_batch(&b, schema, list_delimiter));
            sent_rows += b.num_rows();
            open
        },
    );
    match (decoded, &plan.format) {
        (Ok(()), _) => open,
        // Values of unexpected JSON types: this range row by row, as the general path reads
        // them.
        (Err(_), FileFormat::Json) => json_rows(path, start, end, sent_rows, schema, send),
        (Err(ArrowError::ExternalError(e)), _) if e.is::<std::io::Error>() => send(Err(
            DataFusionError::Execution(format!("EXTERN: cannot read [{}]: {e}", path.display())),
        )),
        (Err(e), _) => send(Err(DataFusionError::Execution(format!(
            "CannotParseExternalData: [{}]: {e}",
            path.display()
        )))),
    }
}

/// The general path over one byte range of an NDJSON file, skipping `skip` rows.
fn json_rows(
    path: &Path,
    start: u64,
    end: u64,
    skip: usize,
    schema: &SchemaRef,
    send: &mut dyn FnMut(Result<RecordBatch>) -> bool,
) -> bool {
    let reader = match open_range(path, start, end) {
        Ok(r) => r,
        Err(e) => return send(Err(io_err(path, e))),
    };
    let mut builders = crate::external::Builders::new(schema);
    let mut seen = 0usize;
    for line in reader.lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => return send(Err(io_err(path, e))),
        };
        if line.trim().is_empty() {
            continue;
        }
        // As Druid reads a JSON line: the first value, trailing characters ignored.
        let row: serde_json::Map<String, serde_json::Value> =
            match dolmen_ingest::input::parse_json_line(line.as_bytes()) {
                Ok(r) => r,
                Err(e) => {
                    return send(Err(DataFusionError::Execution(format!(
                        "CannotParseExternalData: [{}]: {e}",
                        path.display()
                    ))));
                }
            };
        seen += 1;
        if seen <= skip {
            continue;
        }
        builders.push(&row);
        if builders.len() >= BATCH_ROWS && !send(builders.finish()) {
            return false;
        }
    }
    builders.len() == 0 || send(builders.finish())
}

/// Reads row groups of a Parquet file.
fn read_row_groups(
    path: &Path,
    groups: &[usize],
    schema: &SchemaRef,
    send: &mut dyn FnMut(Result<RecordBatch>) -> bool,
) -> bool {
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let build = || -> std::result::Result<_, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
        let file_schema = b.schema().clone();
        let wanted: Vec<usize> = file_schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| schema.field_with_name(f.name()).is_ok())
            .map(|(i, _)| i)
            .collect();
        let mask = ProjectionMask::roots(b.parquet_schema(), wanted);
        b.with_projection(mask)
            .with_row_groups(groups.to_vec())
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| e.to_string())
    };
    let reader = match build() {
        Ok(r) => r,
        Err(e) => {
            return send(Err(DataFusionError::Execution(format!(
                "EXTERN: cannot read [{}]: {e}",
                path.display()
            ))));
        }
    };
    for b in reader {
        let r = b
            .map_err(|e| DataFusionError::Execution(format!("EXTERN: [{}]: {e}", path.display())))
            .and_then(|b| convert_batch(&b, schema, None));
        if !send(r) {
            return false;
        }
    }
    true
}

/// A decoded batch as the signature's columns (by name; absent columns are null).
fn convert_batch(
    b: &RecordBatch,
    schema: &SchemaRef,
    list_delimiter: Option<&str>,
) -> Result<RecordBatch> {
    let rows = b.num_rows();
    let cols = schema
        .fields()
        .iter()
        .map(|f| {
            let src = b.schema().index_of(f.name()).ok().map(|i| b.column(i));
            to_signature(src, f, rows, list_delimiter)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        cols,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// One column as the signature type `target`, by Druid's conversion rules. `list_delimiter`
/// is set for CSV/TSV text, whose empty fields are null (the arrow decoder's reading, and
/// Druid's `Strings.emptyToNull`) and whose array values are delimited text.
pub(crate) fn to_signature(
    src: Option<&ArrayRef>,
    target: &Field,
    rows: usize,
    list_delimiter: Option<&str>,
) -> Result<ArrayRef> {
    let Some(src) = src else {
        return Ok(new_null_array(target.data_type(), rows));
    };
    let dt = src.data_type();
    let text = matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let strings = || -> Result<ArrayRef> { Ok(cast(src, &DataType::Utf8)?) };
    Ok(match target.data_type() {
        DataType::Utf8 if text => strings()?,
        DataType::Utf8 => match dt {
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => {
                cast(&millis(src)?, &DataType::Utf8)?
            }
            DataType::Float32 | DataType::Float64 => {
                let f = cast(src, &DataType::Float64)?;
                Arc::new(
                    f.as_primitive::<arrow::datatypes::Float64Type>()
                        .iter()
                        .map(|v| {
                            v.map(|x| convert::to_text(&serde_json::json!(x)).unwrap_or_default())
                        })
                        .collect::<StringArray>(),
                )
            }
            _ => {
                cast(src, &DataType::Utf8).unwrap_or_else(|_| new_null_array(&DataType::Utf8, rows))
            }
        },
        DataType::Int64 if text => {
            let s = strings()?;
            Arc::new(
                s.as_string::<i32>()
                    .iter()
                    .map(|v| v.and_then(parse_long))
                    .collect::<Int64Array>(),
            )
        }
        DataType::Int64 => match dt {
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => millis(src)?,
            _ => cast(src, &DataType::Int64)
                .unwrap_or_else(|_| new_null_array(&DataType::Int64, rows)),
        },
        DataType::Float64 | DataType::Float32 if text => {
            let s = strings()?;
            let f: Float64Array = s
                .as_string::<i32>()
                .iter()
                .map(|v| v.and_then(|x| x.trim().parse::<f64>().ok()))
                .collect();
            if *target.data_type() == DataType::Float32 {
                Arc::new(
                    f.iter()
                        .map(|v| v.map(|x| x as f32))
                        .collect::<Float32Array>(),
                )
            } else {
                Arc::new(f)
            }
        }
        DataType::Float64 | DataType::Float32 => cast(src, target.data_type())
            .unwrap_or_else(|_| new_null_array(target.data_type(), rows)),
        DataType::List(item) => {
            let as_strings: ArrayRef = match (dt, list_delimiter) {
                (DataType::List(_) | DataType::LargeList(_), _) => cast(
                    src,
                    &DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                )?,
                (_, Some(delim)) if text => {
                    let s = strings()?;
                    let mut lb = ListBuilder::new(StringBuilder::new());
                    for v in s.as_string::<i32>().iter() {
                        match v {
                            // An empty field (the decoder's null) is null, as the row reader
                            // gives it; so is an empty part.
                            None => lb.append(false),
                            Some(v) => {
                                for part in v.split(delim) {
                                    lb.values()
                                        .append_option(Some(part).filter(|p| !p.is_empty()));
                                }
                                lb.append(true);
                            }
                        }
                    }
                    Arc::new(lb.finish())
                }
                _ => {
                    let s = to_signature(
                        Some(src),
                        &Field::new("v", DataType::Utf8, true),
                        rows,
                        None,
                    )?;
                    let mut lb = ListBuilder::new(StringBuilder::new());
                    for v in s.as_string::<i32>().iter() {
                        match v {
                            None => lb.append(false),
                            Some(v) => {
                                lb.values().append_value(v);
                                lb.append(true);
                            }
                        }
                    }
                    Arc::new(lb.finish())
                }
            };
            if *item.data_type() == DataType::Utf8 {
                cast(&as_strings, target.data_type())?
            } else {
                // Numeric arrays: each element by the scalar rule.
                let list = as_strings.as_list::<i32>();
                let values = to_signature(
                    Some(list.values()),
                    &Field::new("item", item.data_type().clone(), true),
                    list.values().len(),
                    None,
                )?;
                Arc::new(arrow::array::ListArray::try_new(
                    Arc::clone(item),
                    list.offsets().clone(),
                    values,
                    list.nulls().cloned(),
                )?)
            }
        }
        other => {
            return Err(DataFusionError::Internal(format!(
                "EXTERN: no conversion to {other}"
            )));
        }
    })
}

/// Timestamps and dates as epoch milliseconds.
fn millis(src: &ArrayRef) -> Result<ArrayRef> {
    let ms = cast(src, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
    Ok(cast(&ms, &DataType::Int64)?)
}

/// [`convert::to_long`] for text.
fn parse_long(s: &str) -> Option<i64> {
    let t = s.trim();
    t.parse::<i64>().ok().or_else(|| {
        t.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| f as i64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_conversions_match_the_general_path() {
        let src: ArrayRef = Arc::new(StringArray::from(vec![
            Some("12"),
            Some("1.9"),
            Some("x"),
            None,
        ]));
        let long =
            to_signature(Some(&src), &Field::new("a", DataType::Int64, true), 4, None).unwrap();
        let long = long.as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(
            long.iter().collect::<Vec<_>>(),
            vec![Some(12), Some(1), None, None]
        );
        for (s, want) in [("12", Some(12)), ("1.9", Some(1)), ("x", None)] {
            assert_eq!(convert::to_long(&serde_json::json!(s)), want);
        }
        // CSV: empty fields are null; list values split on the delimiter.
        let s = to_signature(
            Some(&src),
            &Field::new("s", DataType::Utf8, true),
            4,
            Some("|"),
        )
        .unwrap();
        assert!(s.is_null(3));
        let src: ArrayRef = Arc::new(StringArray::from(vec![Some("a|b"), None, Some("c|")]));
        let t = Field::new(
            "t",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        );
        let l = to_signature(Some(&src), &t, 3, Some("|")).unwrap();
        let l = l.as_list::<i32>();
        assert_eq!(
            l.value(0).as_string::<i32>().iter().collect::<Vec<_>>(),
            vec![Some("a"), Some("b")]
        );
        assert!(l.is_null(1));
        assert_eq!(
            l.value(2).as_string::<i32>().iter().collect::<Vec<_>>(),
            vec![Some("c"), None]
        );
    }
}
