//! Segments: identity, the Druid-shaped payload, the versioned timeline, and the segment file
//! format.
//!
//! A segment file is Apache Parquet: one row group per at most [`file::ROW_GROUP_ROWS`] rows,
//! rows sorted by `__time` then by the dimensions in order, with column statistics and the page
//! index so that the query engine can skip data by `__time` and by dimension values. Column
//! types are Druid's: `__time` is `Timestamp(Millisecond, None)` (UTC), `string` dimensions are
//! UTF-8, `long` is Int64, `float` Float32, `double` Float64. A multi-value string dimension
//! (Druid's `docs/querying/multi-value-dimensions.md`) is `List<Utf8>` and is flagged in the
//! payload's column list ([`SegmentColumn::multi_value`], serialized as `hasMultipleValues`).
//! Array columns (Druid's `docs/querying/arrays.md`: `ARRAY<STRING>`, `ARRAY<LONG>`,
//! `ARRAY<DOUBLE>`) are Parquet LIST columns (`List<Utf8>`, `List<Int64>`, `List<Float64>`)
//! without that flag; their payload type is the Druid name (`"type": "ARRAY<LONG>"`).
//! Files may hold hidden columns after the listed ones (the indexer keeps the timestamp of
//! `*First`/`*Last` metric values there, and [`nested`] the shredded sub-columns of
//! `COMPLEX<json>` columns); readers go by the listed columns.

pub mod file;
pub mod id;
pub mod nested;
pub mod timeline;
pub mod value_index;

pub use file::{
    COMPLEX_METADATA_KEY, ColumnKind, ColumnType, DICTIONARY_PAGE_BYTES, DRUID_TYPE_METADATA_KEY,
    MULTI_VALUE_METADATA_KEY, PAGE_ROWS, SegmentColumn, SegmentFileWriter, SegmentSchema, list_of,
    multi_value_string_type,
};
pub use id::{DataSegment, LoadSpec, SegmentId, ShardSpec};
pub use timeline::{Timeline, TimelineEntry};

/// Name of the time column of every datasource.
pub const TIME_COLUMN: &str = "__time";
