//! Segment files: Parquet with Druid column types, sorted by `__time` then dimensions.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde::{Deserialize, Serialize};

use crate::TIME_COLUMN;

/// Rows per Parquet row group of a segment file.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Most rows per Parquet data page of a segment file: Druid's compressed column blocks (64 KiB,
/// 8192 longs). Reading one row decompresses and decodes its page, so small pages keep
/// index-driven point reads (the query engine's value indexes) cheap; the page index
/// (statistics per page) lets scans skip pages.
pub const PAGE_ROWS: usize = 8192;

/// Largest Parquet dictionary page of a column chunk, bytes. A column whose distinct values
/// outgrow it (high-cardinality dimensions such as page titles or user names) falls back to
/// plain pages: reading one row of a dictionary-encoded chunk decodes the whole dictionary, so a
/// large dictionary would make every point read cost a full column chunk. Low-cardinality
/// columns keep their dictionaries.
pub const DICTIONARY_PAGE_BYTES: usize = 64 * 1024;

/// Druid column value types that segments store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// UTF-8 string (nullable).
    String,
    /// 64-bit signed integer.
    Long,
    /// 32-bit float.
    Float,
    /// 64-bit float.
    Double,
    /// An Apache DataSketches HLL sketch (`COMPLEX<HLLSketch>`), stored as its serialized bytes.
    #[serde(rename = "COMPLEX<HLLSketch>")]
    HllSketch,
    /// An Apache DataSketches compact theta sketch (`COMPLEX<thetaSketch>`), serialized bytes.
    #[serde(rename = "COMPLEX<thetaSketch>")]
    ThetaSketch,
    /// An Apache DataSketches classic quantiles doubles sketch
    /// (`COMPLEX<quantilesDoublesSketch>`), serialized bytes.
    #[serde(rename = "COMPLEX<quantilesDoublesSketch>")]
    QuantilesDoublesSketch,
    /// Druid's `HyperLogLogCollector` (`COMPLEX<hyperUnique>`), serialized bytes.
    #[serde(rename = "COMPLEX<hyperUnique>")]
    HyperUnique,
    /// An `ARRAY<STRING>` column (SQL `VARCHAR ARRAY`): a Parquet LIST of nullable UTF-8
    /// strings. Unlike a multi-value STRING dimension, a row is one whole array value: `[]`,
    /// `null` and `[null]` are three different values, and grouping keys on the whole array.
    #[serde(rename = "ARRAY<STRING>")]
    StringArray,
    /// An `ARRAY<LONG>` column (SQL `BIGINT ARRAY`): a Parquet LIST of nullable 64-bit integers.
    #[serde(rename = "ARRAY<LONG>")]
    LongArray,
    /// An `ARRAY<DOUBLE>` column (SQL `DOUBLE ARRAY`): a Parquet LIST of nullable 64-bit floats.
    #[serde(rename = "ARRAY<DOUBLE>")]
    DoubleArray,
    /// A nested JSON column (`COMPLEX<json>`, Druid's `docs/querying/nested-columns.md`): each
    /// row's JSON value as compact JSON text (UTF-8), the field marked with
    /// [`COMPLEX_METADATA_KEY`] = `json` so that queries read it as JSON (ADR 0020).
    #[serde(rename = "COMPLEX<json>")]
    Json,
}

impl ColumnType {
    /// The Arrow type used for this column in segment files and queries.
    pub fn arrow_type(self) -> DataType {
        match self {
            ColumnType::String => DataType::Utf8,
            ColumnType::Long => DataType::Int64,
            ColumnType::Float => DataType::Float32,
            ColumnType::Double => DataType::Float64,
            ColumnType::HllSketch
            | ColumnType::ThetaSketch
            | ColumnType::QuantilesDoublesSketch
            | ColumnType::HyperUnique => DataType::Binary,
            ColumnType::StringArray => list_of(DataType::Utf8),
            ColumnType::LongArray => list_of(DataType::Int64),
            ColumnType::DoubleArray => list_of(DataType::Float64),
            ColumnType::Json => DataType::Utf8,
        }
    }

    /// Druid's runtime type name (`STRING`, `LONG`, `FLOAT`, `DOUBLE`, `COMPLEX<HLLSketch>`,
    /// `COMPLEX<thetaSketch>`, `COMPLEX<quantilesDoublesSketch>`, `COMPLEX<hyperUnique>`,
    /// `ARRAY<STRING>`, `ARRAY<LONG>`, `ARRAY<DOUBLE>`).
    pub fn druid_name(self) -> &'static str {
        match self {
            ColumnType::String => "STRING",
            ColumnType::Long => "LONG",
            ColumnType::Float => "FLOAT",
            ColumnType::Double => "DOUBLE",
            ColumnType::HllSketch => "COMPLEX<HLLSketch>",
            ColumnType::ThetaSketch => "COMPLEX<thetaSketch>",
            ColumnType::QuantilesDoublesSketch => "COMPLEX<quantilesDoublesSketch>",
            ColumnType::HyperUnique => "COMPLEX<hyperUnique>",
            ColumnType::StringArray => "ARRAY<STRING>",
            ColumnType::LongArray => "ARRAY<LONG>",
            ColumnType::DoubleArray => "ARRAY<DOUBLE>",
            ColumnType::Json => "COMPLEX<json>",
        }
    }

    /// Whether this is one of the array types (`ARRAY<STRING|LONG|DOUBLE>`).
    pub fn is_array(self) -> bool {
        matches!(
            self,
            ColumnType::StringArray | ColumnType::LongArray | ColumnType::DoubleArray
        )
    }

    /// The array type whose elements have type `element` (`String`, `Long`, `Double`; a
    /// `Float` element widens to `Double`, as Druid stores float arrays as `ARRAY<DOUBLE>`).
    pub fn array_of(element: ColumnType) -> Option<ColumnType> {
        match element {
            ColumnType::String => Some(ColumnType::StringArray),
            ColumnType::Long => Some(ColumnType::LongArray),
            ColumnType::Float | ColumnType::Double => Some(ColumnType::DoubleArray),
            _ => None,
        }
    }

    /// The element type of an array type (`None` for scalar and sketch types).
    pub fn element(self) -> Option<ColumnType> {
        match self {
            ColumnType::StringArray => Some(ColumnType::String),
            ColumnType::LongArray => Some(ColumnType::Long),
            ColumnType::DoubleArray => Some(ColumnType::Double),
            _ => None,
        }
    }

    /// Whether values are serialized sketches (Arrow `Binary`).
    pub fn is_sketch(self) -> bool {
        self.arrow_type() == DataType::Binary
    }

    /// Maps an Arrow type back to a column type, if it is one segments store (a list of strings,
    /// the form of a multi-value dimension, maps to [`ColumnType::String`]; lists of integers
    /// and floats map to [`ColumnType::LongArray`] and [`ColumnType::DoubleArray`]).
    pub fn from_arrow(dt: &DataType) -> Option<ColumnType> {
        match dt {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(ColumnType::String),
            DataType::List(f) if matches!(f.data_type(), DataType::Utf8) => {
                Some(ColumnType::String)
            }
            DataType::List(f) | DataType::LargeList(f) => match f.data_type() {
                DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 => {
                    Some(ColumnType::LongArray)
                }
                DataType::Float32 | DataType::Float64 => Some(ColumnType::DoubleArray),
                _ => None,
            },
            DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 => {
                Some(ColumnType::Long)
            }
            DataType::Float32 => Some(ColumnType::Float),
            DataType::Float64 => Some(ColumnType::Double),
            _ => None,
        }
    }
}

/// What role a column plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    /// A dimension (grouping/filtering column).
    Dimension,
    /// A metric (aggregated column).
    Metric,
}

/// Arrow field metadata key marking a `List<Utf8>` column as a Druid multi-value STRING
/// dimension (value `"true"`), so that the query side can tell it from an `ARRAY<STRING>`.
pub const MULTI_VALUE_METADATA_KEY: &str = "dolmen.multiValue";

/// Arrow field metadata key naming the Druid native type of a column whose Arrow type alone
/// does not say it: sketch columns (`Binary`) carry `COMPLEX<HLLSketch>`,
/// `COMPLEX<thetaSketch>`, `COMPLEX<quantilesDoublesSketch>` or `COMPLEX<hyperUnique>`, so
/// result headers and `INFORMATION_SCHEMA` report the type Druid reports.
pub const DRUID_TYPE_METADATA_KEY: &str = "dolmen.druidType";

/// `List<element>` with nullable items named `item` (Arrow's default list field): the Arrow
/// form of array columns (a Parquet LIST column on disk).
pub fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

/// Arrow field metadata key naming the complex type of a `Utf8` field holding JSON text
/// (value `json`: a `COMPLEX<json>` column or expression result).
pub const COMPLEX_METADATA_KEY: &str = "dolmen.complex";

/// The Arrow type of a multi-value string dimension: `List<Utf8>` with nullable items named
/// `item` (Arrow's default list field).
pub fn multi_value_string_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

/// One non-time column of a segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentColumn {
    /// Column name.
    pub name: String,
    /// Value type.
    #[serde(rename = "type")]
    pub ty: ColumnType,
    /// Dimension or metric.
    pub kind: ColumnKind,
    /// A multi-value STRING dimension (Druid's segment metadata reports it as type `STRING` with
    /// `hasMultipleValues: true`). Stored as Arrow `List<Utf8>`: a row with one value is a
    /// one-element list, null is a null list. Absent (false) in payloads written before
    /// multi-value support.
    #[serde(
        default,
        rename = "hasMultipleValues",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub multi_value: bool,
    /// For a metric built by ingestion: the Druid type of the aggregator that combines its
    /// stored values (`longSum` for a `count`, `longMax` for a `longMax`, `doubleMin`, ...), as
    /// Druid keeps a segment's aggregators in its metadata. Compaction with rollup combines the
    /// column with it. Absent for dimensions, sketches (combined by their type) and segments
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregator: Option<String>,
    /// For a `COMPLEX<json>` column: the paths shredded into hidden typed sub-columns of the
    /// segment file, in sub-column order ([`crate::nested`], ADR 0026). Empty for other
    /// columns and for files written without them.
    #[serde(default, rename = "nestedPaths", skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<crate::nested::NestedPath>,
    /// For a `COMPLEX<json>` column: [`Self::nested`] lists every path of the file's values
    /// ([`crate::nested::NestedColumn::complete`]), so a path it lacks is null in every row.
    #[serde(
        default,
        rename = "nestedComplete",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub nested_complete: bool,
}

impl SegmentColumn {
    /// A single-valued column.
    pub fn new(name: impl Into<String>, ty: ColumnType, kind: ColumnKind) -> SegmentColumn {
        SegmentColumn {
            name: name.into(),
            ty,
            kind,
            multi_value: false,
            aggregator: None,
            nested: Vec::new(),
            nested_complete: false,
        }
    }

    /// Whether this is a multi-value string column (only string columns can be).
    pub fn is_multi_value(&self) -> bool {
        self.multi_value && self.ty == ColumnType::String
    }

    /// The Arrow type in segment files and queries: [`ColumnType::arrow_type`], or
    /// [`multi_value_string_type`] for a multi-value string column.
    pub fn arrow_type(&self) -> DataType {
        if self.is_multi_value() {
            multi_value_string_type()
        } else {
            self.ty.arrow_type()
        }
    }

    /// The nullable Arrow field; a multi-value column carries [`MULTI_VALUE_METADATA_KEY`].
    pub fn arrow_field(&self) -> Field {
        let f = Field::new(&self.name, self.arrow_type(), true);
        if self.is_multi_value() {
            f.with_metadata(
                [(MULTI_VALUE_METADATA_KEY.to_string(), "true".to_string())]
                    .into_iter()
                    .collect(),
            )
        } else if self.ty == ColumnType::Json {
            f.with_metadata(
                [(COMPLEX_METADATA_KEY.to_string(), "json".to_string())]
                    .into_iter()
                    .collect(),
            )
        } else if self.ty.is_sketch() {
            f.with_metadata(
                [(
                    DRUID_TYPE_METADATA_KEY.to_string(),
                    self.ty.druid_name().to_string(),
                )]
                .into_iter()
                .collect(),
            )
        } else {
            f
        }
    }
}

/// The columns of a segment after `__time`: dimensions in order, then metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentSchema {
    /// The columns, dimensions first.
    pub columns: Vec<SegmentColumn>,
}

impl SegmentSchema {
    /// The Arrow schema: `__time` (Timestamp ms, not null) followed by the columns (nullable).
    pub fn arrow_schema(&self) -> SchemaRef {
        let mut fields = vec![Field::new(
            TIME_COLUMN,
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        )];
        for c in &self.columns {
            fields.push(c.arrow_field());
        }
        Arc::new(Schema::new(fields))
    }

    /// Dimension columns in order.
    pub fn dimensions(&self) -> impl Iterator<Item = &SegmentColumn> {
        self.columns
            .iter()
            .filter(|c| c.kind == ColumnKind::Dimension)
    }

    /// Metric columns in order.
    pub fn metrics(&self) -> impl Iterator<Item = &SegmentColumn> {
        self.columns.iter().filter(|c| c.kind == ColumnKind::Metric)
    }

    /// This schema with the shredded paths of a file's JSON columns recorded
    /// ([`SegmentColumn::nested`]), as [`SegmentFileWriter::finish_with_layout`] reports them.
    pub fn with_nested_layout(mut self, layout: &crate::nested::NestedLayout) -> SegmentSchema {
        for c in &mut self.columns {
            let n = layout.get(&c.name).cloned().unwrap_or_default();
            c.nested = n.paths;
            c.nested_complete = n.complete;
        }
        self
    }
}

/// Errors writing a segment file.
#[derive(Debug, thiserror::Error)]
pub enum SegmentFileError {
    /// Filesystem error.
    #[error("segment file i/o error at [{path}]: {source}")]
    Io {
        /// The file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Parquet encoding error.
    #[error("cannot encode segment file [{path}]: {source}")]
    Parquet {
        /// The file.
        path: String,
        /// Cause.
        source: parquet::errors::ParquetError,
    },
    /// Error building, encoding or decoding the value index sidecar
    /// ([`crate::value_index`]).
    #[error("value index sidecar [{path}]: {message}")]
    Index {
        /// The sidecar (or segment) file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Parquet compression codec for an `indexSpec` compression name (`lz4` default, `zstd`,
/// `uncompressed`/`none`, `snappy`).
pub fn compression_for(name: Option<&str>) -> Compression {
    match name.map(str::to_ascii_lowercase).as_deref() {
        Some("zstd") => Compression::ZSTD(Default::default()),
        Some("uncompressed") | Some("none") => Compression::UNCOMPRESSED,
        Some("snappy") => Compression::SNAPPY,
        _ => Compression::LZ4_RAW,
    }
}

/// Streams sorted batches into a new segment file, then publishes it at its final path
/// atomically (temporary file, `fsync`, rename). Dropping the writer without
/// [`SegmentFileWriter::finish`] removes the temporary file.
///
/// It builds the file's value indexes as it goes ([`crate::value_index`]) and publishes their
/// sidecar ([`crate::value_index::sidecar_path`]) just before the segment file, so a segment
/// file never exists without its indexes. Every segment file is written here (batch and SQL
/// ingestion, streaming hydrants and handoff, compaction).
#[derive(Debug)]
pub struct SegmentFileWriter {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    writer: Option<ArrowWriter<File>>,
    index: Option<crate::value_index::ValueIndexBuilder>,
    props: WriterProperties,
    /// Whether the file has `COMPLEX<json>` columns to shred when finished.
    shred: bool,
    rows: u64,
}

impl SegmentFileWriter {
    /// Starts a segment file at `path` with `schema`.
    ///
    /// # Errors
    /// When the directory or file cannot be created.
    pub fn create(
        path: &Path,
        schema: SchemaRef,
        compression: Compression,
    ) -> Result<SegmentFileWriter, SegmentFileError> {
        let io = |source| SegmentFileError::Io {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension("parquet.tmp");
        let file = File::create(&tmp).map_err(io)?;
        let props = WriterProperties::builder()
            .set_compression(compression)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_data_page_row_count_limit(PAGE_ROWS)
            .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
            .set_created_by("dolmen".to_string())
            .build();
        let index = crate::value_index::enabled()
            .then(|| crate::value_index::ValueIndexBuilder::new(&schema));
        let shred = crate::nested::has_json_columns(&schema) && crate::nested::shredding_enabled();
        let writer = ArrowWriter::try_new(file, schema, Some(props.clone())).map_err(|source| {
            SegmentFileError::Parquet {
                path: path.display().to_string(),
                source,
            }
        })?;
        Ok(SegmentFileWriter {
            path: path.to_path_buf(),
            tmp,
            writer: Some(writer),
            index,
            props,
            shred,
            rows: 0,
        })
    }

    /// Appends a batch (rows must continue the sort order).
    ///
    /// # Errors
    /// On encoding or I/O failure.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), SegmentFileError> {
        let w = self.writer.as_mut().expect("writer used after finish");
        w.write(batch).map_err(|source| SegmentFileError::Parquet {
            path: self.path.display().to_string(),
            source,
        })?;
        if let Some(index) = self.index.as_mut() {
            index.push(batch).map_err(|e| SegmentFileError::Index {
                path: self.path.display().to_string(),
                message: e.to_string(),
            })?;
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Finishes the file and moves it to its final path; returns its size in bytes.
    ///
    /// # Errors
    /// On encoding or I/O failure (the temporary file is removed).
    pub fn finish(self) -> Result<u64, SegmentFileError> {
        self.finish_with_layout().map(|(size, _)| size)
    }

    /// Finishes the file like [`Self::finish`], shredding its `COMPLEX<json>` columns into
    /// hidden typed sub-columns first ([`crate::nested`]); returns its size in bytes and the
    /// shredded paths per JSON column, for the segment payload
    /// ([`SegmentSchema::with_nested_layout`]).
    ///
    /// # Errors
    /// On encoding or I/O failure (the temporary file is removed).
    pub fn finish_with_layout(
        mut self,
    ) -> Result<(u64, crate::nested::NestedLayout), SegmentFileError> {
        let path = self.path.clone();
        let io = |source| SegmentFileError::Io {
            path: path.display().to_string(),
            source,
        };
        let w = self.writer.take().expect("writer finished twice");
        let f = w.into_inner().map_err(|source| SegmentFileError::Parquet {
            path: path.display().to_string(),
            source,
        })?;
        f.sync_all().map_err(io)?;
        drop(f);
        let layout = if self.shred {
            crate::nested::shred_file(&self.tmp, &self.props).map_err(|source| {
                let _ = std::fs::remove_file(&self.tmp);
                SegmentFileError::Parquet {
                    path: path.display().to_string(),
                    source,
                }
            })?
        } else {
            crate::nested::NestedLayout::new()
        };
        let sidecar = crate::value_index::sidecar_path(&path);
        if let Some(index) = self.index.take()
            && let Err(e) = index.write(&sidecar)
        {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(e);
        }
        if let Err(e) = std::fs::rename(&self.tmp, &path) {
            let _ = std::fs::remove_file(&sidecar);
            return Err(io(e));
        }
        Ok((std::fs::metadata(&path).map_err(io)?.len(), layout))
    }
}

impl Drop for SegmentFileWriter {
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes sorted batches into a new segment file at `path`, atomically (a temporary file in the
/// same directory renamed into place after `fsync`). Returns the file size in bytes.
///
/// The batches must already be sorted by `__time` then dimensions and match `schema`.
///
/// # Errors
/// [`SegmentFileError`] on I/O or encoding failure; no partial file is left at `path`.
pub fn write_segment_file(
    path: &Path,
    schema: SchemaRef,
    batches: &[RecordBatch],
    compression: Compression,
) -> Result<u64, SegmentFileError> {
    let mut w = SegmentFileWriter::create(path, schema, compression)?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array, StringArray, TimestampMillisecondArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn writes_readable_parquet() {
        let schema = SegmentSchema {
            columns: vec![
                SegmentColumn::new("page", ColumnType::String, ColumnKind::Dimension),
                SegmentColumn::new("count", ColumnType::Long, ColumnKind::Metric),
            ],
        };
        let arrow_schema = schema.arrow_schema();
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(TimestampMillisecondArray::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/index.parquet");
        let size =
            write_segment_file(&path, arrow_schema, &[batch], compression_for(None)).unwrap();
        assert!(size > 0);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 2);
        assert!(!path.with_extension("parquet.tmp").exists());
        // The value index sidecar is published with the file.
        let (rows, indexes) =
            crate::value_index::read_sidecar(&crate::value_index::sidecar_path(&path)).unwrap();
        assert_eq!(rows, 2);
        assert_eq!(indexes.len(), 1);
        assert_eq!(indexes[0].column, "page");
        assert_eq!(indexes[0].values.len(), 1);
        assert_eq!(
            indexes[0].codes.values().to_vec(),
            vec![0, crate::value_index::NULL_CODE]
        );
    }

    #[test]
    fn multi_value_columns() {
        let mut c = SegmentColumn::new("tags", ColumnType::String, ColumnKind::Dimension);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"name": "tags", "type": "string", "kind": "dimension"})
        );
        assert_eq!(c.arrow_type(), DataType::Utf8);
        c.multi_value = true;
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["hasMultipleValues"], serde_json::json!(true));
        assert_eq!(serde_json::from_value::<SegmentColumn>(v).unwrap(), c);
        let f = c.arrow_field();
        assert_eq!(f.data_type(), &multi_value_string_type());
        assert_eq!(
            f.metadata()
                .get(MULTI_VALUE_METADATA_KEY)
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(
            ColumnType::from_arrow(f.data_type()),
            Some(ColumnType::String)
        );
        // Only strings can be multi-value.
        let mut n = SegmentColumn::new("n", ColumnType::Long, ColumnKind::Dimension);
        n.multi_value = true;
        assert_eq!(n.arrow_type(), DataType::Int64);
    }
}
