//! Value indexes built with the segment: for every plain string column of a segment file, its
//! distinct values (sorted) and one dictionary code per row. They are Dolmen's form of Druid's
//! per-segment dictionaries and bitmap indexes (`docs/design/segments.md`, "Indexing"), which
//! Druid builds when it builds a segment; the query engine uses them for equality filters and
//! distinct counts (`dolmen_query::index`, ADR 0011, ADR 0025).
//!
//! They live in a sidecar file beside the segment file: `<segment file name>`
//! [`SIDECAR_SUFFIX`] (`index.parquet.indexes.arrow`), in deep storage under the segment's key
//! plus that suffix, and in the segment cache beside the cached copy. The sidecar is an Arrow
//! IPC file holding one record batch with one column per indexed plain string column, of type
//! `Dictionary(<smallest unsigned key>, Utf8)`: the dictionary is the column's distinct
//! non-null values sorted ascending (byte order), each row's key the position of its value
//! (null rows are null). The schema metadata [`ROWS_METADATA_KEY`] holds the row count (a
//! segment without string columns still gets a sidecar, with no columns).
//!
//! List columns of strings and longs (multi-value strings, `ARRAY<STRING>`, `ARRAY<LONG>`) get
//! an *element* index: the same dictionary (or hash) codes, one per element, as a sidecar
//! column of type `List<Dictionary(.., Utf8)>` (or `List<UInt32>`) whose field metadata
//! [`ELEMENTS_METADATA_KEY`] names the element kind; the rows holding a value are the rows
//! with an element of its code (Druid's bitmap per dictionary value of a multi-value or array
//! column). Longs are indexed by their decimal text.
//!
//! [`SegmentFileWriter`](crate::SegmentFileWriter) builds them while it writes the file (so
//! every segment writer: batch and SQL ingestion, streaming hydrants and handoff, compaction)
//! and publishes the sidecar before the segment file. [`build_sidecar`] builds one from an
//! existing segment file (segments written before sidecars existed).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, StringArray};
use arrow::array::{StringDictionaryBuilder, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, UInt8Type, UInt16Type, UInt32Type};
use arrow::error::ArrowError;

use crate::TIME_COLUMN;
use crate::file::{COMPLEX_METADATA_KEY, SegmentFileError};

/// Suffix appended to a segment file's name (and deep storage key) to name its sidecar.
pub const SIDECAR_SUFFIX: &str = ".indexes.arrow";

/// Schema metadata key of a sidecar: the segment file's row count (decimal).
pub const ROWS_METADATA_KEY: &str = "dolmen.rows";

/// The code of a null row in [`ColumnValueIndex::codes`].
pub const NULL_CODE: u32 = u32::MAX;

/// Environment variable that turns the building of value indexes off for the process when set
/// to `false`: segments are then written without sidecars, as by earlier versions, and loading
/// a segment without one builds nothing (sidecars that exist are still used). For measuring
/// what the indexes cost ingestion (`bench/ingest --compare-indexes`); not a tuning knob.
pub const DISABLE_ENV: &str = "DOLMEN_SEGMENT_VALUE_INDEXES";

/// Whether segment writers build value indexes ([`DISABLE_ENV`]).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(DISABLE_ENV).map_or(true, |v| v != "false"))
}

/// The sidecar path of the segment file at `segment_file` (its name plus [`SIDECAR_SUFFIX`]).
pub fn sidecar_path(segment_file: &Path) -> PathBuf {
    let mut name = segment_file.as_os_str().to_os_string();
    name.push(SIDECAR_SUFFIX);
    PathBuf::from(name)
}

/// The deep storage key of the sidecar of the segment file stored at `key`.
pub fn sidecar_key(key: &str) -> String {
    format!("{key}{SIDECAR_SUFFIX}")
}

/// The columns of `schema` that get a value index: top-level UTF-8 columns other than
/// `__time`, nested JSON (`COMPLEX<json>` is stored as JSON text) and its hidden sub-columns
/// ([`crate::nested`]: written after the index is built, and never filtered through it); and
/// list columns of strings or longs (multi-value strings, `ARRAY<STRING>`, `ARRAY<LONG>`),
/// which get an element index ([`ColumnValueIndex::offsets`]). `ARRAY<DOUBLE>` columns get
/// none: a double's text is not canonical (`1`, `1.0`, `-0.0`), so a lookup by text could miss.
pub fn indexed_columns(schema: &Schema) -> Vec<usize> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            (matches!(
                f.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) || element_kind(f.data_type()).is_some())
                && f.name() != TIME_COLUMN
                && !f.metadata().contains_key(COMPLEX_METADATA_KEY)
                && !crate::nested::is_nested_column(f.name())
        })
        .map(|(i, _)| i)
        .collect()
}

/// What the elements of an element index ([`ColumnValueIndex::offsets`]) were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementKind {
    /// Strings: multi-value strings and `ARRAY<STRING>` (`List<Utf8>`).
    String,
    /// Longs, indexed by their decimal text (`-12`): `ARRAY<LONG>` (`List<Int64>`).
    Long,
}

impl ElementKind {
    /// The name stored in a sidecar's field metadata [`ELEMENTS_METADATA_KEY`].
    pub fn name(self) -> &'static str {
        match self {
            ElementKind::String => "string",
            ElementKind::Long => "long",
        }
    }

    fn parse(name: &str) -> Option<ElementKind> {
        match name {
            "string" => Some(ElementKind::String),
            "long" => Some(ElementKind::Long),
            _ => None,
        }
    }
}

/// The element kind of a column of type `ty` that gets an element index, if it does.
pub fn element_kind(ty: &DataType) -> Option<ElementKind> {
    match ty {
        DataType::List(f) => match f.data_type() {
            DataType::Utf8 => Some(ElementKind::String),
            DataType::Int64 => Some(ElementKind::Long),
            _ => None,
        },
        _ => None,
    }
}

/// Field metadata key of a sidecar column holding an element index: the [`ElementKind`] name.
pub const ELEMENTS_METADATA_KEY: &str = "dolmen.elements";

/// The value index of one column of one segment file.
///
/// Of a plain string column, `codes` hold one code per row. Of a list column (a multi-value
/// string or an array: Druid's bitmap index per dictionary value of a multi-value or array
/// column), `codes` hold one code per *element* of the column, in row order, and `offsets`
/// (rows + 1 entries) say which elements each row holds: row `r` holds the elements
/// `offsets[r]..offsets[r + 1]` (a null or empty row none). In a sidecar such a column is a
/// `List` of the same dictionary (or hash) codes.
#[derive(Debug, Clone)]
pub struct ColumnValueIndex {
    /// Column name.
    pub column: String,
    /// Distinct non-null values, sorted ascending (byte order); empty when `hashed`.
    pub values: StringArray,
    /// One code per row: the position of the row's value in `values`, or [`NULL_CODE`]; when
    /// `hashed`, the row value's [`value_hash`] (or [`NULL_CODE`]).
    pub codes: UInt32Array,
    /// A hash index (near-unique columns): `codes` are value hashes, so an equality filter
    /// finds candidate rows (a superset: hashes collide), which the query still filters.
    pub hashed: bool,
    /// Of an element index (list columns), the first element of each row, and the element
    /// count last; `None` for a plain column.
    pub offsets: Option<Vec<u32>>,
    /// Of an element index, what the elements were; `None` for a plain column.
    pub elements: Option<ElementKind>,
}

/// Field metadata key marking a sidecar column as a hash index (value `hash`).
pub const INDEX_KIND_METADATA_KEY: &str = "dolmen.index";

/// The 32-bit hash of a value in a hash index: the low 32 bits of xxHash64 (seed 0) of its
/// UTF-8 bytes, with `u32::MAX` (which is [`NULL_CODE`]) folded to `u32::MAX - 1`. Stored in
/// sidecars: never change it without a sidecar format change.
pub fn value_hash(value: &str) -> u32 {
    let h = twox_hash::XxHash64::oneshot(0, value.as_bytes()) as u32;
    if h == NULL_CODE { NULL_CODE - 1 } else { h }
}

/// Builds the value indexes of a segment file from its batches, in file order.
pub struct ValueIndexBuilder {
    rows: usize,
    columns: Vec<ColumnBuilder>,
}

/// Most bytes of distinct values one column's index may hold per segment file. A column past
/// it (near-unique values: session ids, long free text) gets no index: the builder's memory
/// stays bounded whatever the segment size (ingestion's `maxBytesInMemory` bounds the rows it
/// holds, and an index holding every distinct value would not be), and queries read such a
/// column's file whole, as they do without an index. 8 MiB keeps e.g. 400k distinct 20-byte
/// page titles per segment.
pub const MAX_INDEX_VALUE_BYTES: usize = 8 << 20;

/// Rows after which a column whose values have so far nearly all been distinct (at least
/// [`NEAR_UNIQUE_EARLY_PERCENT`] percent) stops being indexed for this file.
pub const NEAR_UNIQUE_EARLY_ROWS: usize = 16 * 1024;

/// See [`NEAR_UNIQUE_EARLY_ROWS`].
pub const NEAR_UNIQUE_EARLY_PERCENT: usize = 90;

/// Smallest file (rows) to which the near-unique rule applies: below it every column is indexed.
pub const NEAR_UNIQUE_MIN_ROWS: usize = 1024;

/// How often (rows) [`ValueIndexBuilder::push`] checks a column against the limits above.
const CHECK_ROWS: usize = 4096;

/// The index of one column being built: interned values (`builder`) until the column turns
/// out near-unique or outgrows [`MAX_INDEX_VALUE_BYTES`], value hashes (`hashes`) from then on.
struct ColumnBuilder {
    position: usize,
    name: String,
    builder: Option<StringDictionaryBuilder<UInt32Type>>,
    hashes: Option<Vec<u32>>,
    distinct: usize,
    value_bytes: usize,
    /// Of a list column: the element offsets of the rows so far (starting with 0), and what
    /// the elements are.
    elements: Option<(Vec<u32>, ElementKind)>,
    /// An element index that outgrew `u32`/`i32` offsets: no index for this column.
    dropped: bool,
}

impl std::fmt::Debug for ValueIndexBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueIndexBuilder")
            .field("rows", &self.rows)
            .field(
                "columns",
                &self.columns.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ValueIndexBuilder {
    /// A builder for files of `schema` (indexes [`indexed_columns`]).
    pub fn new(schema: &Schema) -> ValueIndexBuilder {
        ValueIndexBuilder {
            rows: 0,
            columns: indexed_columns(schema)
                .into_iter()
                .map(|i| ColumnBuilder {
                    position: i,
                    name: schema.field(i).name().clone(),
                    builder: Some(StringDictionaryBuilder::new()),
                    hashes: None,
                    distinct: 0,
                    value_bytes: 0,
                    elements: element_kind(schema.field(i).data_type()).map(|k| (vec![0], k)),
                    dropped: false,
                })
                .collect(),
        }
    }

    /// Adds the rows of `batch` (same schema as the builder's). Runs of equal values (sorted
    /// segments have many) are interned once per run.
    ///
    /// # Errors
    /// More than `u32::MAX` distinct values in a column, or a column that cannot be read as
    /// UTF-8.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        let before = self.rows;
        self.rows += batch.num_rows();
        for c in &mut self.columns {
            if c.dropped {
                continue;
            }
            let column = batch.column(c.position);
            if c.elements.is_some() {
                c.push_list(column)?;
                continue;
            }
            let column = match column.data_type() {
                DataType::Utf8 => Arc::clone(column),
                _ => arrow::compute::cast(column, &DataType::Utf8)?,
            };
            c.push(column.as_string::<i32>(), before)?;
        }
        Ok(())
    }
}

/// Most elements an element index holds per segment file (offsets are stored as Arrow `i32`).
const MAX_ELEMENTS: usize = i32::MAX as usize;

impl ColumnBuilder {
    /// Indexes the elements of the list rows in `column` (`List<Utf8>` or `List<Int64>`, the
    /// longs as their decimal text). A null row holds no element (the elements Arrow may keep
    /// under a null slot are indexed with the row: a superset is harmless, as for hashes).
    fn push_list(&mut self, column: &ArrayRef) -> Result<(), ArrowError> {
        let list = column.as_list_opt::<i32>().ok_or_else(|| {
            ArrowError::InvalidArgumentError(format!("[{}] is not a list column", self.name))
        })?;
        let offsets = list.value_offsets();
        let (first, last) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
        let Some((row_offsets, _)) = self.elements.as_mut() else {
            return Ok(());
        };
        let base = row_offsets.last().copied().unwrap_or(0) as usize;
        if base + (last - first) > MAX_ELEMENTS {
            self.drop_index();
            return Ok(());
        }
        // Within MAX_ELEMENTS (checked above), so every offset fits u32.
        row_offsets.extend(
            offsets[1..]
                .iter()
                .map(|o| (base + (*o as usize - first)) as u32),
        );
        let values = list.values().slice(first, last - first);
        let values = match values.data_type() {
            DataType::Utf8 => values,
            _ => arrow::compute::cast(&values, &DataType::Utf8)?,
        };
        self.push(values.as_string::<i32>(), base)
    }

    /// Gives up the column's index (it is left out of the sidecar).
    fn drop_index(&mut self) {
        self.dropped = true;
        self.builder = None;
        self.hashes = None;
        self.elements = None;
    }
}

impl ColumnBuilder {
    /// Indexes `strings`, the rows after the file's first `before`: interned while the column
    /// repeats its values, hashed once it shows near-unique or passes
    /// [`MAX_INDEX_VALUE_BYTES`] (checked every [`CHECK_ROWS`] rows, so a large batch of a
    /// near-unique column is not interned whole for nothing).
    fn push(&mut self, strings: &StringArray, before: usize) -> Result<(), ArrowError> {
        let mut at = 0;
        if let Some(builder) = self.builder.as_mut() {
            let mut next_check = CHECK_ROWS;
            let mut switch = false;
            while at < strings.len() {
                let value = strings.is_valid(at).then(|| strings.value(at));
                let mut end = at + 1;
                while end < strings.len()
                    && strings.is_valid(end) == value.is_some()
                    && value.is_none_or(|v| strings.value(end) == v)
                {
                    end += 1;
                }
                match value {
                    Some(v) => {
                        let key = builder.append_n(v, end - at)?;
                        if key as usize == self.distinct {
                            self.distinct += 1;
                            self.value_bytes += v.len();
                        }
                    }
                    None => builder.append_nulls(end - at),
                }
                at = end;
                if at >= next_check || at == strings.len() {
                    next_check = at + CHECK_ROWS;
                    let rows = before + at;
                    // Near-unique so far (ids, titles), or too many value bytes to keep: the
                    // interned index would be the column itself.
                    if self.value_bytes > MAX_INDEX_VALUE_BYTES
                        || (rows >= NEAR_UNIQUE_EARLY_ROWS
                            && self.distinct * 100 >= rows * NEAR_UNIQUE_EARLY_PERCENT)
                    {
                        switch = true;
                        break;
                    }
                }
            }
            if !switch {
                return Ok(());
            }
            self.switch_to_hashes();
        }
        if let Some(hashes) = self.hashes.as_mut() {
            hashes.extend((at..strings.len()).map(|i| {
                if strings.is_valid(i) {
                    value_hash(strings.value(i))
                } else {
                    NULL_CODE
                }
            }));
        }
        Ok(())
    }

    /// Replaces the interned values by the hashes of the rows interned so far.
    fn switch_to_hashes(&mut self) {
        let Some(mut builder) = self.builder.take() else {
            return;
        };
        let dict = builder.finish();
        let values = dict.values().as_string::<i32>();
        let value_hashes: Vec<u32> = (0..values.len())
            .map(|i| value_hash(values.value(i)))
            .collect();
        let keys = dict.keys();
        let mut hashes = Vec::with_capacity(keys.len().max(CHECK_ROWS) * 2);
        hashes.extend(
            keys.iter()
                .map(|k| k.map_or(NULL_CODE, |k| value_hashes[k as usize])),
        );
        self.hashes = Some(hashes);
    }

    /// The finished index of a file of `rows` rows (`None`: the column was dropped). Of an
    /// element index, the near-unique rule counts elements, not rows.
    fn finish(mut self, rows: usize) -> Option<ColumnValueIndex> {
        if self.dropped {
            return None;
        }
        let (offsets, elements) = match self.elements.take() {
            Some((offsets, kind)) => (Some(offsets), Some(kind)),
            None => (None, None),
        };
        let entries = offsets
            .as_ref()
            .map_or(rows, |o| o.last().copied().unwrap_or(0) as usize);
        if entries >= NEAR_UNIQUE_MIN_ROWS
            && self.distinct * 100 >= entries * NEAR_UNIQUE_EARLY_PERCENT
        {
            self.switch_to_hashes();
        }
        if let Some(hashes) = self.hashes {
            return Some(ColumnValueIndex {
                column: self.name,
                values: StringArray::from(Vec::<&str>::new()),
                codes: hashes.into(),
                hashed: true,
                offsets,
                elements,
            });
        }
        let mut builder = self.builder.unwrap_or_default();
        let dict = builder.finish();
        let (values, codes) = sorted(dict.values().as_string::<i32>(), dict.keys());
        Some(ColumnValueIndex {
            column: self.name,
            values,
            codes,
            hashed: false,
            offsets,
            elements,
        })
    }
}

impl ValueIndexBuilder {
    /// The finished indexes: values sorted, or hashed for near-unique columns (in a file of at
    /// least [`NEAR_UNIQUE_MIN_ROWS`] rows, [`NEAR_UNIQUE_EARLY_PERCENT`] percent of its rows
    /// distinct, or of the first [`NEAR_UNIQUE_EARLY_ROWS`]) and columns past
    /// [`MAX_INDEX_VALUE_BYTES`]. A column whose values repeat even a little (users: 73% of a
    /// 33k-row file distinct) keeps sorted values, which distinct counts read instead of rows.
    ///
    /// Why hashes for near-unique columns: their sorted index would be as large as the column,
    /// and interning and sorting their values was most of what building indexes cost ingestion
    /// (issue 25 measured +55% on a load whose page titles were near-unique per segment). A
    /// hash per row costs a few nanoseconds and no memory per distinct value, and still takes
    /// an equality filter (a needle: one id, one title) straight to its rows. It answers no
    /// distinct count and no range: those read the column.
    pub fn finish(self) -> Vec<ColumnValueIndex> {
        let rows = self.rows;
        self.columns
            .into_iter()
            .filter_map(|c| c.finish(rows))
            .collect()
    }

    /// Finishes the indexes and writes them to `path` atomically (a temporary file, `fsync`,
    /// rename).
    ///
    /// # Errors
    /// On encoding or I/O failure (no file is left at `path`).
    pub fn write(self, path: &Path) -> Result<(), SegmentFileError> {
        let rows = self.rows;
        write_sidecar(path, rows, &self.finish())
    }
}

/// Distinct values sorted and codes renumbered to follow them; null keys become [`NULL_CODE`].
fn sorted(values: &StringArray, keys: &UInt32Array) -> (StringArray, UInt32Array) {
    let mut order: Vec<u32> = (0..values.len() as u32).collect();
    order.sort_unstable_by(|a, b| values.value(*a as usize).cmp(values.value(*b as usize)));
    let mut remap = vec![0u32; values.len()];
    for (new, old) in order.iter().enumerate() {
        // `new` < number of values, which is a u32 key space.
        remap[*old as usize] = new as u32;
    }
    let sorted_values =
        StringArray::from_iter_values(order.iter().map(|i| values.value(*i as usize)));
    let codes: UInt32Array = if keys.null_count() == 0 {
        keys.values()
            .iter()
            .map(|k| remap[*k as usize])
            .collect::<Vec<_>>()
            .into()
    } else {
        keys.iter()
            .map(|k| k.map_or(NULL_CODE, |k| remap[k as usize]))
            .collect::<Vec<_>>()
            .into()
    };
    (sorted_values, codes)
}

/// Writes `indexes` of a `rows`-row segment file as a sidecar at `path`, atomically.
///
/// # Errors
/// On encoding or I/O failure (no file is left at `path`).
pub fn write_sidecar(
    path: &Path,
    rows: usize,
    indexes: &[ColumnValueIndex],
) -> Result<(), SegmentFileError> {
    let display = path.display().to_string();
    let arrow_err = |e: ArrowError| SegmentFileError::Index {
        path: display.clone(),
        message: e.to_string(),
    };
    let mut fields = Vec::with_capacity(indexes.len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(indexes.len());
    for ix in indexes {
        let (codes, mut metadata): (ArrayRef, std::collections::HashMap<String, String>) =
            if ix.hashed {
                let hashes: UInt32Array = ix
                    .codes
                    .values()
                    .iter()
                    .map(|c| (*c != NULL_CODE).then_some(*c))
                    .collect();
                (
                    Arc::new(hashes),
                    [(INDEX_KIND_METADATA_KEY.to_string(), "hash".to_string())].into(),
                )
            } else {
                // Smallest key type that holds every code: sidecars of low-cardinality
                // columns stay at one or two bytes per row.
                let values: ArrayRef = Arc::new(ix.values.clone());
                let column: ArrayRef = match ix.values.len() {
                    n if n <= 1 << 8 => Arc::new(
                        narrow_dictionary::<UInt8Type>(&ix.codes, values).map_err(arrow_err)?,
                    ),
                    n if n <= 1 << 16 => Arc::new(
                        narrow_dictionary::<UInt16Type>(&ix.codes, values).map_err(arrow_err)?,
                    ),
                    _ => Arc::new(
                        narrow_dictionary::<UInt32Type>(&ix.codes, values).map_err(arrow_err)?,
                    ),
                };
                (column, Default::default())
            };
        let column: ArrayRef = match (&ix.offsets, ix.elements) {
            (Some(offsets), Some(kind)) => {
                metadata.insert(ELEMENTS_METADATA_KEY.to_string(), kind.name().to_string());
                let offsets: Vec<i32> = offsets
                    .iter()
                    .map(|o| i32::try_from(*o))
                    .collect::<Result<_, _>>()
                    .map_err(|e| arrow_err(ArrowError::InvalidArgumentError(e.to_string())))?;
                let item = Arc::new(Field::new("item", codes.data_type().clone(), true));
                Arc::new(
                    arrow::array::ListArray::try_new(
                        item,
                        arrow::buffer::OffsetBuffer::new(offsets.into()),
                        codes,
                        None,
                    )
                    .map_err(arrow_err)?,
                )
            }
            _ => codes,
        };
        fields
            .push(Field::new(&ix.column, column.data_type().clone(), true).with_metadata(metadata));
        columns.push(column);
    }
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        [(ROWS_METADATA_KEY.to_string(), rows.to_string())].into(),
    ));
    let batch = RecordBatch::try_new_with_options(
        Arc::clone(&schema),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(arrow_err)?;
    let io = |source| SegmentFileError::Io {
        path: display.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let mut w = arrow::ipc::writer::FileWriter::try_new(file, &schema).map_err(arrow_err)?;
        w.write(&batch).map_err(arrow_err)?;
        w.finish().map_err(arrow_err)?;
        // Not synced: a sidecar is derived data. After a crash the segment file (synced) is
        // the truth; a sidecar lost or torn with it fails to decode ([`decode_sidecar`] checks
        // every column against the row count) and is built again from the segment file. One
        // `fsync` per segment file less on the ingestion path.
        drop(w.into_inner().map_err(arrow_err)?);
        std::fs::rename(&tmp, path).map_err(io)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A dictionary array with `K` keys over `values` from codes ([`NULL_CODE`] for null rows).
fn narrow_dictionary<K>(
    codes: &UInt32Array,
    values: ArrayRef,
) -> Result<arrow::array::DictionaryArray<K>, ArrowError>
where
    K: arrow::datatypes::ArrowDictionaryKeyType,
    K::Native: TryFrom<u32>,
{
    let narrow = |c: u32| K::Native::try_from(c).ok();
    let keys: arrow::array::PrimitiveArray<K> = if codes.values().contains(&NULL_CODE) {
        codes
            .values()
            .iter()
            .map(|c| if *c == NULL_CODE { None } else { narrow(*c) })
            .collect()
    } else {
        // Every code is below the value count, which picked `K`: none fails to narrow.
        arrow::array::PrimitiveArray::<K>::from_iter_values(
            codes.values().iter().filter_map(|c| narrow(*c)),
        )
    };
    arrow::array::DictionaryArray::<K>::try_new(keys, values)
}

/// Reads a sidecar file.
///
/// # Errors
/// On I/O failure or a file that is not a sidecar.
pub fn read_sidecar(path: &Path) -> Result<(usize, Vec<ColumnValueIndex>), SegmentFileError> {
    let bytes = std::fs::read(path).map_err(|source| SegmentFileError::Io {
        path: path.display().to_string(),
        source,
    })?;
    decode_sidecar(&bytes, &path.display().to_string())
}

/// Decodes the bytes of a sidecar (read from a file or an object store); `name` names it in
/// errors. Returns the segment file's row count and the indexes.
///
/// # Errors
/// When the bytes are not a sidecar.
pub fn decode_sidecar(
    bytes: &[u8],
    name: &str,
) -> Result<(usize, Vec<ColumnValueIndex>), SegmentFileError> {
    let bad = |message: String| SegmentFileError::Index {
        path: name.to_string(),
        message,
    };
    let cursor = std::io::Cursor::new(bytes);
    let mut reader =
        arrow::ipc::reader::FileReader::try_new(cursor, None).map_err(|e| bad(e.to_string()))?;
    let rows: usize = reader
        .schema()
        .metadata()
        .get(ROWS_METADATA_KEY)
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| bad(format!("no {ROWS_METADATA_KEY}")))?;
    let Some(batch) = reader.next() else {
        return Ok((rows, Vec::new()));
    };
    let batch = batch.map_err(|e| bad(e.to_string()))?;
    let target = DataType::Dictionary(Box::new(DataType::UInt32), Box::new(DataType::Utf8));
    let mut out = Vec::with_capacity(batch.num_columns());
    if batch.num_rows() != rows {
        return Err(bad(format!(
            "{} codes for {rows} rows (a torn sidecar)",
            batch.num_rows()
        )));
    }
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let hashed = field
            .metadata()
            .get(INDEX_KIND_METADATA_KEY)
            .map(String::as_str)
            == Some("hash");
        let elements = field
            .metadata()
            .get(ELEMENTS_METADATA_KEY)
            .map(|k| {
                ElementKind::parse(k)
                    .ok_or_else(|| bad(format!("unknown element kind [{k}] of [{}]", field.name())))
            })
            .transpose()?;
        let (offsets, codes) = match elements {
            Some(_) => {
                let list = column.as_list_opt::<i32>().ok_or_else(|| {
                    bad(format!("element index [{}] is not a list", field.name()))
                })?;
                let offsets: Vec<u32> = list
                    .value_offsets()
                    .iter()
                    .map(|o| u32::try_from(*o).map_err(|e| bad(e.to_string())))
                    .collect::<Result<_, _>>()?;
                // The codes of every element (a sliced list cannot come out of a file).
                let first = offsets.first().copied().unwrap_or(0) as usize;
                let last = offsets.last().copied().unwrap_or(0) as usize;
                let offsets = offsets.iter().map(|o| o - first as u32).collect();
                (Some(offsets), list.values().slice(first, last - first))
            }
            None => (None, Arc::clone(column)),
        };
        let (values, codes) = if hashed {
            let hashes = codes
                .as_primitive_opt::<UInt32Type>()
                .ok_or_else(|| bad(format!("hash index [{}] is not UInt32", field.name())))?;
            (
                StringArray::from(Vec::<&str>::new()),
                hashes
                    .iter()
                    .map(|h| h.unwrap_or(NULL_CODE))
                    .collect::<Vec<_>>()
                    .into(),
            )
        } else {
            let dict = arrow::compute::cast(&codes, &target).map_err(|e| bad(e.to_string()))?;
            let dict = dict.as_dictionary::<UInt32Type>();
            let values = dict.values().as_string::<i32>().clone();
            let codes: UInt32Array = if dict.keys().null_count() == 0 {
                dict.keys().clone()
            } else {
                dict.keys()
                    .iter()
                    .map(|k| k.unwrap_or(NULL_CODE))
                    .collect::<Vec<_>>()
                    .into()
            };
            (values, codes)
        };
        out.push(ColumnValueIndex {
            column: field.name().clone(),
            values,
            codes,
            hashed,
            offsets,
            elements,
        });
    }
    Ok((rows, out))
}

/// Builds the sidecar of the existing segment file at `segment_file` (one read of its string
/// columns) and writes it at [`sidecar_path`]. For segments written before sidecars existed.
///
/// # Errors
/// On a Parquet, encoding or I/O failure.
pub fn build_sidecar(segment_file: &Path) -> Result<(), SegmentFileError> {
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let display = segment_file.display().to_string();
    let parquet_err = |source| SegmentFileError::Parquet {
        path: display.clone(),
        source,
    };
    let file = std::fs::File::open(segment_file).map_err(|source| SegmentFileError::Io {
        path: display.clone(),
        source,
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
    let columns = indexed_columns(builder.schema());
    let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
    let projected = builder
        .schema()
        .project(&columns)
        .map_err(|e| SegmentFileError::Index {
            path: display.clone(),
            message: e.to_string(),
        })?;
    let reader = builder
        .with_projection(mask)
        .with_batch_size(65_536)
        .build()
        .map_err(parquet_err)?;
    let mut index = ValueIndexBuilder::new(&projected);
    for batch in reader {
        let batch = batch.map_err(|e| SegmentFileError::Index {
            path: display.clone(),
            message: e.to_string(),
        })?;
        index.push(&batch).map_err(|e| SegmentFileError::Index {
            path: display.clone(),
            message: e.to_string(),
        })?;
    }
    index.write(&sidecar_path(segment_file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    fn batch(pages: Vec<Option<&str>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("page", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
            Field::new("doc", DataType::Utf8, true)
                .with_metadata([(COMPLEX_METADATA_KEY.to_string(), "json".to_string())].into()),
        ]));
        let n = pages.len() as i64;
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(pages)),
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from(vec![Some("{}"); n as usize])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn builds_sorted_values_and_codes_across_batches() {
        let b1 = batch(vec![Some("b"), Some("b"), None, Some("a")]);
        let b2 = batch(vec![Some("c"), Some("a"), None, None]);
        let mut builder = ValueIndexBuilder::new(&b1.schema());
        builder.push(&b1).unwrap();
        builder.push(&b2).unwrap();
        let indexes = builder.finish();
        assert_eq!(indexes.len(), 1, "only the plain string column");
        let ix = &indexes[0];
        assert_eq!(ix.column, "page");
        assert_eq!(ix.values, StringArray::from(vec!["a", "b", "c"]));
        let n = NULL_CODE;
        assert_eq!(ix.codes.values().to_vec(), vec![1, 1, n, 0, 2, 0, n, n]);
    }

    #[test]
    fn columns_past_the_value_byte_limit_get_a_hash_index() {
        let long: Vec<String> = (0..2_000).map(|i| format!("{i:0>5000}")).collect();
        let mut pages: Vec<Option<&str>> = long.iter().map(|s| Some(s.as_str())).collect();
        pages[3] = None;
        let b = batch(pages.clone());
        let mut builder = ValueIndexBuilder::new(&b.schema());
        builder.push(&b).unwrap();
        assert!(
            builder.columns[0].builder.is_none(),
            "10 MB of distinct values are not kept"
        );
        let indexes = builder.finish();
        let ix = &indexes[0];
        assert!(ix.hashed);
        assert!(ix.values.is_empty());
        let want: Vec<u32> = pages
            .iter()
            .map(|p| p.map_or(NULL_CODE, value_hash))
            .collect();
        assert_eq!(ix.codes.values().to_vec(), want);

        // Round trip through a sidecar.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.indexes.arrow");
        write_sidecar(&path, 2_000, &indexes).unwrap();
        let (rows, read) = read_sidecar(&path).unwrap();
        assert_eq!(rows, 2_000);
        assert!(read[0].hashed);
        assert_eq!(read[0].codes.values().to_vec(), want);
    }

    #[test]
    fn nested_sub_columns_are_not_indexed() {
        let schema = Schema::new(vec![
            Field::new("page", DataType::Utf8, true),
            Field::new(
                format!("{}doc/a", crate::nested::NESTED_COLUMN_PREFIX),
                DataType::Utf8,
                true,
            ),
        ]);
        assert_eq!(indexed_columns(&schema), vec![0]);
    }

    /// A multi-value string column and an `ARRAY<LONG>` column, across two batches (the
    /// second a slice, as the writer's callers pass), round trip through a sidecar with the
    /// rows of each element.
    #[test]
    fn list_columns_get_element_indexes() {
        use arrow::array::{Float64Builder, Int64Builder, ListBuilder, StringBuilder};
        let schema = Arc::new(Schema::new(vec![
            Field::new("tags", DataType::new_list(DataType::Utf8, true), true),
            Field::new("nums", DataType::new_list(DataType::Int64, true), true),
            Field::new("ds", DataType::new_list(DataType::Float64, true), true),
        ]));
        let tags: Vec<Option<Vec<Option<&str>>>> = vec![
            Some(vec![Some("a"), Some("b")]),
            None,
            Some(vec![]),
            Some(vec![Some("b"), None, Some("b")]),
            Some(vec![Some("c")]),
            Some(vec![Some("a")]),
        ];
        let nums: Vec<Option<Vec<Option<i64>>>> = vec![
            Some(vec![Some(1), Some(-20)]),
            Some(vec![Some(1)]),
            None,
            Some(vec![]),
            Some(vec![None, Some(7)]),
            Some(vec![Some(-20)]),
        ];
        let mut t = ListBuilder::new(StringBuilder::new());
        for r in &tags {
            match r {
                Some(v) => {
                    for e in v {
                        t.values().append_option(*e);
                    }
                    t.append(true);
                }
                None => t.append(false),
            }
        }
        let mut n = ListBuilder::new(Int64Builder::new());
        for r in &nums {
            match r {
                Some(v) => {
                    for e in v {
                        n.values().append_option(*e);
                    }
                    n.append(true);
                }
                None => n.append(false),
            }
        }
        let mut d = ListBuilder::new(Float64Builder::new());
        for _ in 0..tags.len() {
            d.values().append_value(1.5);
            d.append(true);
        }
        let whole = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(t.finish()),
                Arc::new(n.finish()),
                Arc::new(d.finish()),
            ],
        )
        .unwrap();
        assert_eq!(indexed_columns(&schema), vec![0, 1], "no double arrays");
        let mut builder = ValueIndexBuilder::new(&schema);
        builder.push(&whole.slice(0, 2)).unwrap();
        builder.push(&whole.slice(2, 4)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.indexes.arrow");
        builder.write(&path).unwrap();
        let (rows, read) = read_sidecar(&path).unwrap();
        assert_eq!((rows, read.len()), (6, 2));
        let rows_holding = |ix: &ColumnValueIndex, v: &str| -> Vec<usize> {
            let offsets = ix.offsets.as_ref().unwrap();
            (0..rows)
                .filter(|r| {
                    (offsets[*r]..offsets[r + 1]).any(|e| {
                        let c = ix.codes.value(e as usize);
                        c != NULL_CODE && ix.values.value(c as usize) == v
                    })
                })
                .collect()
        };
        let tags_ix = &read[0];
        assert_eq!(tags_ix.elements, Some(ElementKind::String));
        assert_eq!(tags_ix.values, StringArray::from(vec!["a", "b", "c"]));
        assert_eq!(rows_holding(tags_ix, "a"), vec![0, 5]);
        assert_eq!(rows_holding(tags_ix, "b"), vec![0, 3]);
        assert_eq!(rows_holding(tags_ix, "c"), vec![4]);
        assert_eq!(
            tags_ix.offsets.as_ref().unwrap(),
            &vec![0, 2, 2, 2, 5, 6, 7]
        );
        let nums_ix = &read[1];
        assert_eq!(nums_ix.elements, Some(ElementKind::Long));
        assert_eq!(rows_holding(nums_ix, "1"), vec![0, 1]);
        assert_eq!(rows_holding(nums_ix, "-20"), vec![0, 5]);
        assert_eq!(rows_holding(nums_ix, "7"), vec![4]);
    }

    #[test]
    fn value_hash_is_stable() {
        // Stored in sidecars: these values must never change.
        assert_eq!(value_hash(""), twox_hash::XxHash64::oneshot(0, b"") as u32);
        assert_eq!(value_hash("page-1234"), value_hash("page-1234"));
        assert_ne!(value_hash("page-1234"), value_hash("page-1235"));
        assert_ne!(value_hash("a"), NULL_CODE);
    }

    #[test]
    fn columns_whose_values_barely_repeat_get_a_hash_index() {
        let hashed = |distinct: usize, rows: usize| {
            let names: Vec<String> = (0..rows).map(|i| format!("v{}", i % distinct)).collect();
            let b = batch(names.iter().map(|s| Some(s.as_str())).collect());
            let mut builder = ValueIndexBuilder::new(&b.schema());
            builder.push(&b).unwrap();
            let ix = builder.finish().remove(0);
            assert_eq!(ix.codes.len(), rows);
            if ix.hashed {
                assert_eq!(ix.codes.value(7), value_hash(&names[7]));
            }
            ix.hashed
        };
        // 90% of the rows distinct: hashed; 75%: sorted values (distinct counts read them).
        assert!(hashed(3_600, 4_000));
        assert!(!hashed(3_000, 4_000));
        // Small files keep sorted values.
        assert!(!hashed(1_000, 1_000));

        // Nearly all distinct after 16k rows: dropped while pushing (no more interning).
        let names: Vec<String> = (0..8_192).map(|i| format!("u{i}")).collect();
        let mut builder = ValueIndexBuilder::new(&batch(vec![Some("x")]).schema());
        for round in 0..3 {
            let b = batch(
                names
                    .iter()
                    .map(|s| Some(format!("{round}{s}")))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(|s| s.as_deref())
                    .collect(),
            );
            builder.push(&b).unwrap();
            assert_eq!(
                builder.columns[0].builder.is_none(),
                round >= 1,
                "round {round}"
            );
        }
        // Hashes of every row, the interned ones included.
        let ix = builder.finish().remove(0);
        assert!(ix.hashed);
        assert_eq!(ix.codes.len(), 3 * 8_192);
        assert_eq!(ix.codes.value(5), value_hash(&format!("0{}", names[5])));
        assert_eq!(
            ix.codes.value(8_192 * 2 + 9),
            value_hash(&format!("2{}", names[9]))
        );
    }

    #[test]
    fn a_torn_sidecar_does_not_decode() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..600).map(|i| format!("v{}", i % 30)).collect();
        let b = batch(names.iter().map(|s| Some(s.as_str())).collect());
        let mut builder = ValueIndexBuilder::new(&b.schema());
        builder.push(&b).unwrap();
        let path = dir.path().join("index.parquet.indexes.arrow");
        builder.write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for cut in [0, 8, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                decode_sidecar(&bytes[..cut], "torn").is_err(),
                "cut at {cut}"
            );
        }
        assert_eq!(decode_sidecar(&bytes, "whole").unwrap().0, 600);
    }

    #[test]
    fn sidecar_round_trip_and_key_widths() {
        let dir = tempfile::tempdir().unwrap();
        // 300 distinct values: two-byte keys.
        let names: Vec<String> = (0..600).map(|i| format!("v{:03}", i % 300)).collect();
        let mut pages: Vec<Option<&str>> = names.iter().map(|s| Some(s.as_str())).collect();
        pages[7] = None;
        let b = batch(pages.clone());
        let mut builder = ValueIndexBuilder::new(&b.schema());
        builder.push(&b).unwrap();
        let path = sidecar_path(&dir.path().join("index.parquet"));
        assert!(path.ends_with("index.parquet.indexes.arrow"));
        builder.write(&path).unwrap();
        let (rows, read) = read_sidecar(&path).unwrap();
        assert_eq!(rows, 600);
        let ix = &read[0];
        assert_eq!(ix.values.len(), 300);
        for (row, want) in pages.iter().enumerate() {
            let code = ix.codes.value(row);
            match want {
                None => assert_eq!(code, NULL_CODE),
                Some(v) => assert_eq!(ix.values.value(code as usize), *v),
            }
        }
        // No string column: still a sidecar, with the row count.
        let empty = dir.path().join("e.indexes.arrow");
        write_sidecar(&empty, 5, &[]).unwrap();
        let (rows, read) = read_sidecar(&empty).unwrap();
        assert_eq!((rows, read.len()), (5, 0));
        assert!(read_sidecar(&dir.path().join("missing")).is_err());
        std::fs::write(dir.path().join("junk"), b"junk").unwrap();
        assert!(read_sidecar(&dir.path().join("junk")).is_err());
    }
}
