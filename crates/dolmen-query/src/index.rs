//! Value indexes of string dimensions: for one segment file and one column, which rows hold
//! each value. They play the part of Druid's per-segment bitmap indexes
//! (`docs/design/segments.md`, "Indexing"): an equality filter `dim = 'value'` finds its rows
//! without decoding the column, a segment without the value is not read at all, and the rows
//! that match are read through a Parquet row selection (pages without selected rows skipped).
//!
//! Shape: the column's distinct values, sorted (an Arrow `StringArray`), and one dictionary code
//! per row (`u32`; [`NULL_CODE`] for null). A lookup is a binary search in the values and one
//! vectorized comparison over the codes: about 0.1 ms for a 330k-row segment.
//!
//! Indexes are built with the segment and stored beside it (`dolmen_segment::value_index`, ADR
//! 0025); here they are loaded from that sidecar with the segment and kept for the life of the
//! process, keyed by the segment file's path in the segment cache (segment files are immutable;
//! a dropped segment's index stays until restart, bounded by the budget). The budget
//! ([`DEFAULT_VALUE_INDEX_BUDGET_BYTES`]) caps their total memory; past it, new indexes are not
//! kept and scans read whole files as before. Filters stay applied above the scan
//! (`Inexact` pushdown), so an index only ever narrows what is read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, StringArray, UInt32Array};
use arrow::compute::kernels::cmp::eq;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use dolmen_segment::file::SegmentFileError;
use dolmen_segment::value_index;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};

/// The code of a null row.
pub const NULL_CODE: u32 = value_index::NULL_CODE;

/// Default memory budget of all value indexes together, bytes (1 GiB).
pub const DEFAULT_VALUE_INDEX_BUDGET_BYTES: usize = 1 << 30;

/// Which rows of one segment file hold each value of one string column.
#[derive(Debug)]
pub struct ValueIndex {
    /// Distinct non-null values, sorted ascending (byte order).
    values: StringArray,
    /// One code per row: the position of the row's value in `values`, or [`NULL_CODE`].
    codes: UInt32Array,
    /// Whether some row is null.
    has_nulls: bool,
    /// A hash index (`dolmen_segment::value_index::ColumnValueIndex::hashed`): `values` is
    /// empty and `codes` are value hashes.
    hashed: bool,
    /// Of an element index (a multi-value string or array column): `codes` are per element,
    /// and row `r` holds the elements `offsets[r]..offsets[r + 1]`.
    offsets: Option<Vec<u32>>,
    /// Of an element index, what its elements were.
    elements: Option<value_index::ElementKind>,
}

impl ValueIndex {
    /// Builds the index of `column` in the Parquet file at `path` (blocking file I/O).
    /// `Ok(None)` when the file has no such column or it is not a plain string column.
    ///
    /// # Errors
    /// A Parquet or I/O error reading the file.
    pub fn build(path: &Path, column: &str) -> Result<Option<ValueIndex>> {
        let file = std::fs::File::open(path)?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
        let Some(pos) = builder
            .schema()
            .fields()
            .iter()
            .position(|f| f.name() == column)
        else {
            return Ok(None);
        };
        if !matches!(
            builder.schema().field(pos).data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Ok(None);
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), [pos]);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(65_536)
            .build()?;
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut codes: Vec<u32> = Vec::new();
        for batch in reader {
            let batch = batch?;
            let col = arrow::compute::cast(batch.column(0), &DataType::Utf8)?;
            let col = col.as_string::<i32>();
            codes.reserve(col.len());
            for v in col.iter() {
                codes.push(match v {
                    None => NULL_CODE,
                    Some(s) => match ids.get(s) {
                        Some(id) => *id,
                        None => {
                            let id = u32::try_from(ids.len()).map_err(|_| {
                                DataFusionError::Execution(format!(
                                    "value index of {column}: too many distinct values"
                                ))
                            })?;
                            ids.insert(s.to_string(), id);
                            id
                        }
                    },
                });
            }
        }
        // Renumber codes so that they follow the sorted values.
        let mut distinct: Vec<(String, u32)> = ids.into_iter().collect();
        distinct.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut remap = vec![0u32; distinct.len()];
        for (new, (_, old)) in distinct.iter().enumerate() {
            // `new` < number of distinct values, which fit in u32 (checked above).
            remap[*old as usize] = new as u32;
        }
        for c in &mut codes {
            if *c != NULL_CODE {
                *c = remap[*c as usize];
            }
        }
        let has_nulls = codes.contains(&NULL_CODE);
        Ok(Some(ValueIndex {
            values: StringArray::from_iter_values(distinct.iter().map(|(s, _)| s.as_str())),
            codes: UInt32Array::from(codes),
            has_nulls,
            hashed: false,
            offsets: None,
            elements: None,
        }))
    }

    /// The index of one column as stored in a sidecar (`dolmen_segment::value_index`).
    pub fn from_column(c: value_index::ColumnValueIndex) -> ValueIndex {
        let has_nulls = c.codes.values().contains(&NULL_CODE);
        ValueIndex {
            values: c.values,
            codes: c.codes,
            has_nulls,
            hashed: c.hashed,
            offsets: c.offsets,
            elements: c.elements,
        }
    }

    /// Rows in the file.
    pub fn num_rows(&self) -> usize {
        match &self.offsets {
            Some(o) => o.len().saturating_sub(1),
            None => self.codes.len(),
        }
    }

    /// Of an element index (a multi-value string or array column, whose rows hold several
    /// values), what its elements were; `None` for a plain string column (one value per row).
    /// [`ValueIndex::values`] and [`ValueIndex::has_nulls`] then speak of elements, not rows.
    pub fn elements(&self) -> Option<value_index::ElementKind> {
        self.elements
    }

    /// Distinct non-null values.
    pub fn cardinality(&self) -> usize {
        self.values.len()
    }

    /// The distinct non-null values, sorted ascending (byte order).
    pub fn values(&self) -> &StringArray {
        &self.values
    }

    /// Whether some row is null.
    pub fn has_nulls(&self) -> bool {
        self.has_nulls
    }

    /// Memory held, bytes.
    pub fn memory_bytes(&self) -> usize {
        self.values.get_array_memory_size()
            + self.codes.get_array_memory_size()
            + self.offsets.as_ref().map_or(0, |o| o.capacity() * 4)
    }

    /// Whether this is a hash index: [`ValueIndex::rows_equal`] gives candidate rows, and
    /// [`ValueIndex::values`] is empty (no distinct values to read).
    pub fn is_hashed(&self) -> bool {
        self.hashed
    }

    /// The row numbers (ascending) whose value equals `value` (of an element index: that hold
    /// an element equal to `value`); of a hash index ([`ValueIndex::is_hashed`]), the rows
    /// whose value hashes as `value` does: every matching row and rarely a few more (the
    /// scan's filter, which DataFusion still applies, drops them). No row means no match
    /// either way.
    pub fn rows_equal(&self, value: &str) -> Vec<u32> {
        if self.hashed {
            return self.rows_with_code(value_index::value_hash(value));
        }
        let (mut lo, mut hi) = (0usize, self.values.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.values.value(mid) < value {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == self.values.len() || self.values.value(lo) != value {
            return Vec::new();
        }
        // `lo` < number of distinct values, which fit in u32.
        self.rows_with_code(lo as u32)
    }

    /// The rows (ascending, each once) holding at least one of `values`: the union of
    /// [`ValueIndex::rows_equal`].
    pub fn rows_equal_any(&self, values: &[String]) -> Vec<u32> {
        let mut rows: Vec<u32> = values.iter().flat_map(|v| self.rows_equal(v)).collect();
        if values.len() > 1 {
            rows.sort_unstable();
            rows.dedup();
        }
        rows
    }

    /// The rows (ascending) holding every one of `values` (an element index), or whose value
    /// equals each (a plain index: no row unless the values are all equal): the intersection
    /// of [`ValueIndex::rows_equal`]. Every row when `values` is empty.
    pub fn rows_equal_all(&self, values: &[String]) -> Vec<u32> {
        let mut rows: Option<Vec<u32>> = None;
        for v in values {
            let matching = self.rows_equal(v);
            rows = Some(match rows {
                None => matching,
                Some(r) => intersect(&r, &matching),
            });
            if rows.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
        }
        rows.unwrap_or_else(|| (0..self.num_rows() as u32).collect())
    }

    fn rows_with_code(&self, code: u32) -> Vec<u32> {
        let code = UInt32Array::new_scalar(code);
        let Ok(mask) = eq(&self.codes, &code) else {
            return Vec::new();
        };
        let positions = mask
            .values()
            .set_indices()
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX));
        let Some(offsets) = &self.offsets else {
            return positions.collect();
        };
        // Element positions (ascending) to the rows holding them: the last row starting at or
        // before each, found from the previous one on.
        let mut rows: Vec<u32> = Vec::new();
        let mut row = 0usize;
        for p in positions {
            row += offsets[row..].partition_point(|start| *start <= p) - 1;
            let r = u32::try_from(row).unwrap_or(u32::MAX);
            if rows.last() != Some(&r) {
                rows.push(r);
            }
        }
        rows
    }
}

/// `rows` (ascending row numbers) as a Parquet selection over a file of `total` rows.
pub fn row_selection(rows: &[u32], total: usize) -> RowSelection {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let start = rows[i] as usize;
        let mut end = start + 1;
        i += 1;
        while i < rows.len() && rows[i] as usize == end {
            end += 1;
            i += 1;
        }
        ranges.push(start..end);
    }
    RowSelection::from_consecutive_ranges(ranges.into_iter(), total)
}

/// The intersection of two ascending row lists.
pub fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// What a scan's filter conjunct asks of one column's value index: the rows holding `values`,
/// any of them or all of them. The filter stays applied above the scan, so an index answers
/// with a superset of the matching rows and never less.
///
/// | conjunct (column `c`, literal values) | predicate |
/// |---|---|
/// | `c = 'x'` (plain string `c`) | all of `[x]` |
/// | `c IN ('x', 'y')` (plain string `c`) | any of `[x, y]` |
/// | `ARRAY_CONTAINS(c, v)`, `MV_CONTAINS(c, v)`, `array_has(c, v)`, `array_has_all(c, v)` | all of `v` (a scalar or an array) |
/// | `ARRAY_OVERLAP(c, v)`, `MV_OVERLAP(c, v)`, `array_has_any(c, v)` (either argument order) | any of `v` |
///
/// `c = 'x'` and `c IN (..)` on a multi-value column reach the scan as `array_has` and
/// `array_has_any` ([`crate::multivalue`]: Druid's "any value matches"). `c` is a string column,
/// a multi-value string, an `ARRAY<STRING>` (string literals) or an `ARRAY<LONG>` (integer
/// literals, looked up by their decimal text). Anything else (a null element, which
/// `MV_CONTAINS(c, ARRAY[NULL])` matches to null rows; an empty array; a literal of another type,
/// which the function casts; a negation) is not a predicate: the rows are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPredicate {
    /// The column.
    pub column: String,
    /// The values looked for, as the index holds them (text).
    pub values: Vec<String>,
    /// Any of the values (an overlap) rather than all (a containment).
    pub any: bool,
    /// What the values are: [`value_index::ElementKind::Long`] for an `ARRAY<LONG>` column.
    pub kind: value_index::ElementKind,
    /// Whether the table column is a list (multi-value or array): a plain string column's
    /// predicate never reads an element index (a file that stored the column as a list reads
    /// differently).
    pub list: bool,
}

impl IndexPredicate {
    /// The predicates among the conjuncts of `filters` over the table `schema`.
    pub fn from_filters(filters: &[Expr], schema: &arrow::datatypes::Schema) -> Vec<Self> {
        let mut conjuncts = Vec::new();
        for f in filters {
            split_conjunction(f, &mut conjuncts);
        }
        conjuncts
            .into_iter()
            .filter_map(|c| Self::from_expr(c, schema))
            .collect()
    }

    fn from_expr(e: &Expr, schema: &arrow::datatypes::Schema) -> Option<Self> {
        match e {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) => {
                let (col, value) = match (left.as_ref(), right.as_ref()) {
                    (Expr::Column(c), v) | (v, Expr::Column(c)) => (c, v),
                    _ => return None,
                };
                Self::plain(schema, &col.name, std::slice::from_ref(value), false)
            }
            Expr::InList(InList {
                expr,
                list,
                negated: false,
            }) => match expr.as_ref() {
                Expr::Column(c) => Self::plain(schema, &c.name, list, true),
                _ => None,
            },
            Expr::ScalarFunction(f) => {
                let name = f.func.name();
                let any = match name {
                    "array_contains" | "mv_contains" | "array_has" | "array_has_all" => false,
                    "array_overlap" | "mv_overlap" | "array_has_any" => true,
                    _ => return None,
                };
                let [a, b] = f.args.as_slice() else {
                    return None;
                };
                match (a, b) {
                    (Expr::Column(c), v) => Self::list(schema, &c.name, v, any),
                    // An overlap is symmetric.
                    (v, Expr::Column(c)) if any => Self::list(schema, &c.name, v, any),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `column = value` / `column IN (values)` on a plain string column.
    fn plain(
        schema: &arrow::datatypes::Schema,
        column: &str,
        values: &[Expr],
        any: bool,
    ) -> Option<Self> {
        let field = schema.field_with_name(column).ok()?;
        if field.data_type() != &DataType::Utf8 || column == dolmen_segment::TIME_COLUMN {
            return None;
        }
        let values = values
            .iter()
            .map(|v| match v {
                Expr::Literal(v, _) => scalar_text(v, value_index::ElementKind::String),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        (!values.is_empty()).then(|| IndexPredicate {
            column: column.to_string(),
            values,
            any,
            kind: value_index::ElementKind::String,
            list: false,
        })
    }

    /// An array function of `column` and the literal `value` (a scalar or an array).
    fn list(
        schema: &arrow::datatypes::Schema,
        column: &str,
        value: &Expr,
        any: bool,
    ) -> Option<Self> {
        let field = schema.field_with_name(column).ok()?;
        let (kind, list) = match field.data_type() {
            DataType::Utf8 if column != dolmen_segment::TIME_COLUMN => {
                (value_index::ElementKind::String, false)
            }
            ty => (value_index::element_kind(ty)?, true),
        };
        let values = literal_values(value, kind)?;
        (!values.is_empty()).then(|| IndexPredicate {
            column: column.to_string(),
            values,
            any,
            kind,
            list,
        })
    }

    /// The rows of `index`'s file that may match (ascending), or `None` when this index cannot
    /// answer (another kind of column in that file).
    pub fn rows(&self, index: &ValueIndex) -> Option<Vec<u32>> {
        match index.elements() {
            Some(kind) if self.list && kind == self.kind => {}
            // A file that stored the column as a plain string (an older segment of a
            // multi-value column): a row's one value is its one element.
            None if self.kind == value_index::ElementKind::String => {}
            _ => return None,
        }
        Some(if self.any {
            index.rows_equal_any(&self.values)
        } else {
            index.rows_equal_all(&self.values)
        })
    }
}

/// The values of a literal scalar or array expression, as text of `kind`; `None` when some
/// value is null or of another type.
fn literal_values(e: &Expr, kind: value_index::ElementKind) -> Option<Vec<String>> {
    match e {
        Expr::Literal(ScalarValue::List(list), _) => {
            if list.len() != 1 || list.is_null(0) {
                return None;
            }
            let elements = list.value(0);
            (0..elements.len())
                .map(|i| {
                    let v = ScalarValue::try_from_array(&elements, i).ok()?;
                    scalar_text(&v, kind)
                })
                .collect()
        }
        Expr::Literal(v, _) => Some(vec![scalar_text(v, kind)?]),
        Expr::ScalarFunction(f) if f.func.name() == "make_array" => f
            .args
            .iter()
            .map(|a| match a {
                Expr::Literal(v, _) => scalar_text(v, kind),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The text of a non-null literal as an index of `kind` holds it: a string for strings, an
/// integer's decimal digits for longs.
fn scalar_text(v: &ScalarValue, kind: value_index::ElementKind) -> Option<String> {
    use value_index::ElementKind;
    match (kind, v) {
        (
            ElementKind::String,
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
        ) => Some(s.clone()),
        (ElementKind::Long, ScalarValue::Int64(Some(i))) => Some(i.to_string()),
        (ElementKind::Long, ScalarValue::Int32(Some(i))) => Some(i.to_string()),
        (ElementKind::Long, ScalarValue::Int16(Some(i))) => Some(i.to_string()),
        (ElementKind::Long, ScalarValue::Int8(Some(i))) => Some(i.to_string()),
        _ => None,
    }
}

/// The conjuncts of `e` (nested `AND`s), appended to `out`.
pub(crate) fn split_conjunction<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            split_conjunction(left, out);
            split_conjunction(right, out);
        }
        other => out.push(other),
    }
}

/// Kept indexes by (segment file, column); `None` records a column that has no index.
type IndexMap = HashMap<(PathBuf, String), Option<Arc<ValueIndex>>>;

/// Process-wide value indexes of loaded segment files under a memory budget, and the Arrow
/// schemas of segment files ([`ValueIndexes::file_schema`]).
///
/// Indexes are built with the segment (`dolmen_segment::value_index`: the segment writer
/// stores them in a sidecar file beside the segment, in deep storage and in the segment cache)
/// and loaded from that sidecar here, all columns of a file at once, when the segment is
/// loaded ([`ValueIndexes::load`], called for every segment a scan reads and by the segment
/// cache's load hook). A query never builds an index: a segment file without a sidecar
/// (written before sidecars existed) gets one built on a background task, written beside the
/// cached file, and read from the next query on; until then scans read the whole file.
#[derive(Debug)]
pub struct ValueIndexes {
    budget_bytes: usize,
    used_bytes: AtomicUsize,
    map: Mutex<IndexMap>,
    schemas: Mutex<HashMap<PathBuf, SchemaRef>>,
    /// Segment files whose sidecar was loaded or is being read (or built, or failed to
    /// load): a query that finds a read in flight waits for it (a read takes milliseconds).
    files: Mutex<HashMap<PathBuf, Arc<tokio::sync::OnceCell<()>>>>,
    /// Column indexes loaded from sidecars since start.
    loaded_count: AtomicU64,
    /// Sidecars built from segment files (segments without one) since start.
    built_count: AtomicU64,
    /// Rows of segment files that scans left unread because of their value indexes.
    rows_skipped: AtomicU64,
}

impl Default for ValueIndexes {
    fn default() -> Self {
        ValueIndexes::new(DEFAULT_VALUE_INDEX_BUDGET_BYTES)
    }
}

impl ValueIndexes {
    /// An empty set of indexes that keeps at most `budget_bytes` of them.
    pub fn new(budget_bytes: usize) -> ValueIndexes {
        ValueIndexes {
            budget_bytes,
            used_bytes: AtomicUsize::new(0),
            map: Mutex::new(HashMap::new()),
            schemas: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            loaded_count: AtomicU64::new(0),
            built_count: AtomicU64::new(0),
            rows_skipped: AtomicU64::new(0),
        }
    }

    /// The Arrow schema of the segment file `path` (what the Parquet reader produces for it,
    /// hidden columns included), read from its footer on a blocking thread the first time and
    /// remembered (segment files are immutable). Its metadata lists under
    /// [`crate::dictionary::DICTIONARY_COLUMNS_KEY`] (a JSON array) the top-level string
    /// columns whose every data page is dictionary-encoded (low-cardinality dimensions: their
    /// column chunks' dictionaries stayed under the segment writer's limit); such columns can
    /// be read as Arrow dictionaries at no extra cost ([`crate::dictionary`]).
    ///
    /// # Errors
    /// A Parquet or I/O error reading the footer.
    pub async fn file_schema(&self, path: &Path) -> Result<SchemaRef> {
        if let Some(found) = lock(&self.schemas).get(path) {
            return Ok(Arc::clone(found));
        }
        let p = path.to_path_buf();
        let schema = tokio::task::spawn_blocking(move || annotated_file_schema(&p))
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
        lock(&self.schemas).insert(path.to_path_buf(), Arc::clone(&schema));
        Ok(schema)
    }

    /// Memory held by the kept indexes, bytes.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// Column indexes loaded from sidecars since start.
    pub fn loaded_count(&self) -> u64 {
        self.loaded_count.load(Ordering::Relaxed)
    }

    /// Sidecars built from segment files since start: segments written before sidecars
    /// existed, built on a background task (never inside a query).
    pub fn built_count(&self) -> u64 {
        self.built_count.load(Ordering::Relaxed)
    }

    /// Rows of segment files that scans planned since start left unread because their value
    /// indexes showed no match there (`segment/valueIndex/rowsSkipped`).
    pub fn rows_skipped(&self) -> u64 {
        self.rows_skipped.load(Ordering::Relaxed)
    }

    /// Counts `rows` a scan leaves unread thanks to an index ([`ValueIndexes::rows_skipped`]).
    pub fn note_rows_skipped(&self, rows: usize) {
        self.rows_skipped.fetch_add(rows as u64, Ordering::Relaxed);
    }

    /// The index of `column` in `path` if it was loaded and kept: `Some(None)` when the column
    /// has no index, `None` when not loaded (yet, or refused by the budget). Never loads.
    pub fn peek(&self, path: &Path, column: &str) -> Option<Option<Arc<ValueIndex>>> {
        self.lock()
            .get(&(path.to_path_buf(), column.to_string()))
            .cloned()
    }

    /// Makes sure the indexes of the segment files `paths` are loaded or being built, on a
    /// background task; a no-op outside a Tokio runtime. Used by [`crate::distinct`] and the
    /// segment cache's load hook, which do not wait.
    pub fn load_in_background(self: &Arc<Self>, paths: Vec<PathBuf>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let todo: Vec<PathBuf> = {
            let files = lock(&self.files);
            paths
                .into_iter()
                .filter(|p| !files.get(p).is_some_and(|c| c.initialized()))
                .collect()
        };
        if todo.is_empty() {
            return;
        }
        let indexes = Arc::clone(self);
        runtime.spawn(async move {
            for path in todo {
                indexes.load(&path).await;
            }
        });
    }

    /// Loads the indexes of the local segment file `path` from its sidecar (on a blocking
    /// thread; every indexed column at once, each kept if it fits the budget). Without a
    /// sidecar, starts building one on a background task and returns at once: the indexes are
    /// there from a later call on. Errors are logged: a segment without indexes is read whole.
    pub async fn load(self: &Arc<Self>, path: &Path) {
        let cell = Arc::clone(lock(&self.files).entry(path.to_path_buf()).or_default());
        cell.get_or_init(|| self.read_sidecar(path)).await;
    }

    async fn read_sidecar(self: &Arc<Self>, path: &Path) {
        let sidecar = value_index::sidecar_path(path);
        let read = tokio::task::spawn_blocking(move || value_index::read_sidecar(&sidecar)).await;
        match read {
            Ok(Ok((_, columns))) => self.insert(path, columns),
            // No sidecar: build one, unless this process builds no indexes at all.
            Ok(Err(SegmentFileError::Io { source, .. }))
                if source.kind() == std::io::ErrorKind::NotFound && value_index::enabled() =>
            {
                self.build_in_background(path.to_path_buf());
            }
            Ok(Err(SegmentFileError::Io { source, .. }))
                if source.kind() == std::io::ErrorKind::NotFound => {}
            // A torn or unreadable sidecar (they are not synced: a crash can leave one behind)
            // is derived data: build it again from the segment file.
            Ok(Err(e)) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read value indexes; building them again");
                if value_index::enabled() {
                    self.build_in_background(path.to_path_buf());
                }
            }
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "value index load failed"),
        }
    }

    /// Loads the indexes of a segment file read in place from an object store, `id` naming
    /// it (`s3://bucket/key`), from the sidecar bytes `fetch` returns (`None`: no sidecar;
    /// such a file is read whole, nothing is built for it).
    pub async fn load_remote<F>(&self, id: &Path, fetch: F)
    where
        F: std::future::Future<
                Output = std::result::Result<Option<Vec<u8>>, dolmen_storage::StorageError>,
            >,
    {
        let cell = Arc::clone(lock(&self.files).entry(id.to_path_buf()).or_default());
        if cell.initialized() {
            return;
        }
        match fetch.await {
            Ok(Some(bytes)) => {
                match value_index::decode_sidecar(&bytes, &id.display().to_string()) {
                    Ok((_, columns)) => self.insert(id, columns),
                    Err(e) => {
                        tracing::warn!(id = %id.display(), error = %e, "cannot read value indexes")
                    }
                }
                let _ = cell.set(());
            }
            Ok(None) => {
                let _ = cell.set(());
            }
            // Not marked: tried again at the next query.
            Err(e) => tracing::warn!(id = %id.display(), error = %e, "cannot read value indexes"),
        }
    }

    fn build_in_background(self: &Arc<Self>, path: PathBuf) {
        let indexes = Arc::clone(self);
        let build = move || {
            value_index::build_sidecar(&path)?;
            value_index::read_sidecar(&value_index::sidecar_path(&path)).map(|(_, c)| (path, c))
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            match tokio::task::spawn_blocking(build).await {
                Ok(Ok((path, columns))) => {
                    indexes.built_count.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(path = %path.display(), "built the value indexes of a segment without a sidecar");
                    indexes.insert(&path, columns);
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot build value indexes"),
                Err(e) => tracing::warn!(error = %e, "value index build failed"),
            }
        });
    }

    /// Keeps the indexes of `columns` for the file `path`, within the budget.
    fn insert(&self, path: &Path, columns: Vec<value_index::ColumnValueIndex>) {
        let mut map = self.lock();
        for c in columns {
            let key = (path.to_path_buf(), c.column.clone());
            if map.contains_key(&key) {
                continue;
            }
            let index = ValueIndex::from_column(c);
            let bytes = index.memory_bytes();
            if self.used_bytes.load(Ordering::Relaxed) + bytes > self.budget_bytes {
                continue;
            }
            self.used_bytes.fetch_add(bytes, Ordering::Relaxed);
            self.loaded_count.fetch_add(1, Ordering::Relaxed);
            map.insert(key, Some(Arc::new(index)));
        }
    }

    /// The index of `column` in the segment file `path`, loading the file's sidecar first when
    /// it was not ([`ValueIndexes::load`]). `None` when the column has no index (not a string
    /// column, no sidecar yet, or over the budget). Never builds an index.
    pub async fn get(self: &Arc<Self>, path: &Path, column: &str) -> Option<Arc<ValueIndex>> {
        self.load(path).await;
        self.peek(path, column).flatten()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IndexMap> {
        lock(&self.map)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// See [`ValueIndexes::file_schema`]: the file's Arrow schema with the string (`BYTE_ARRAY`
/// with the String logical or UTF8 converted type) top-level columns whose page encoding
/// statistics (kept as a mask by the parquet crate) list only dictionary-encoded data pages in
/// every row group.
fn annotated_file_schema(path: &Path) -> Result<SchemaRef> {
    use parquet::basic::{ConvertedType, Encoding, LogicalType, Type as PhysicalType};
    let file = std::fs::File::open(path)?;
    let meta = parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&file)?;
    let schema = meta.file_metadata().schema_descr();
    let mut out = Vec::new();
    for (i, column) in schema.columns().iter().enumerate() {
        let is_string = column.path().parts().len() == 1
            && column.physical_type() == PhysicalType::BYTE_ARRAY
            && (matches!(column.logical_type_ref(), Some(LogicalType::String))
                || column.converted_type() == ConvertedType::UTF8);
        if !is_string || meta.num_row_groups() == 0 {
            continue;
        }
        // The parquet crate's documented test (`page_encoding_stats_mask`): a dictionary page
        // and only dictionary-encoded data pages.
        let all_dictionary = meta.row_groups().iter().all(|rg| {
            let chunk = rg.column(i);
            chunk.dictionary_page_offset().is_some()
                && chunk.page_encoding_stats_mask().is_some_and(|mask| {
                    mask.is_only(Encoding::PLAIN_DICTIONARY)
                        || mask.is_only(Encoding::RLE_DICTIONARY)
                })
        });
        if all_dictionary {
            out.push(column.name().to_string());
        }
    }
    let arrow =
        parquet::arrow::parquet_to_arrow_schema(schema, meta.file_metadata().key_value_metadata())?;
    let mut metadata = arrow.metadata().clone();
    if !out.is_empty() {
        metadata.insert(
            crate::dictionary::DICTIONARY_COLUMNS_KEY.to_string(),
            serde_json::to_string(&out).map_err(|e| DataFusionError::External(Box::new(e)))?,
        );
    }
    Ok(Arc::new(arrow::datatypes::Schema::new_with_metadata(
        arrow.fields().clone(),
        metadata,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A file with `page` (every 7th row null, values `p{i % 5}`) and a long column, in row
    /// groups of 100 rows.
    fn file(dir: &Path, rows: usize) -> PathBuf {
        let schema = Arc::new(Schema::new(vec![
            Field::new("page", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
        ]));
        let pages: StringArray = (0..rows)
            .map(|i| (i % 7 != 6).then(|| format!("p{}", i % 5)))
            .collect();
        let n = Int64Array::from_iter_values(0..rows as i64);
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(pages), Arc::new(n)]).unwrap();
        let path = dir.join("s.parquet");
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .build();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, Some(props))
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    #[test]
    fn lookups_match_a_scan() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), 1000);
        let idx = ValueIndex::build(&path, "page").unwrap().unwrap();
        assert_eq!(idx.num_rows(), 1000);
        assert_eq!(idx.cardinality(), 5);
        for v in ["p0", "p3", "p4"] {
            let want: Vec<u32> = (0..1000u32)
                .filter(|i| i % 7 != 6 && format!("p{}", i % 5) == v)
                .collect();
            assert_eq!(idx.rows_equal(v), want, "{v}");
        }
        assert!(idx.rows_equal("p5").is_empty());
        assert!(idx.rows_equal("").is_empty());
        assert!(idx.rows_equal("zz").is_empty());
        // Not a string column / no such column.
        assert!(ValueIndex::build(&path, "n").unwrap().is_none());
        assert!(ValueIndex::build(&path, "nope").unwrap().is_none());
    }

    #[test]
    fn a_hash_index_finds_every_matching_row() {
        let values: Vec<Option<String>> = (0..5_000)
            .map(|i| (i % 11 != 0).then(|| format!("id-{}", i % 4_000)))
            .collect();
        let c = value_index::ColumnValueIndex {
            column: "id".into(),
            values: StringArray::from(Vec::<&str>::new()),
            codes: values
                .iter()
                .map(|v| v.as_deref().map_or(NULL_CODE, value_index::value_hash))
                .collect::<Vec<_>>()
                .into(),
            hashed: true,
            offsets: None,
            elements: None,
        };
        let idx = ValueIndex::from_column(c);
        assert!(idx.is_hashed() && idx.has_nulls());
        for probe in ["id-1", "id-3999", "id-22", "nope", ""] {
            let want: Vec<u32> = (0..5_000u32)
                .filter(|i| values[*i as usize].as_deref() == Some(probe))
                .collect();
            let got = idx.rows_equal(probe);
            // Candidates: every match, and only rows whose value hashes alike.
            assert!(want.iter().all(|r| got.contains(r)), "{probe}");
            let h = value_index::value_hash(probe);
            assert!(got.iter().all(|r| {
                values[*r as usize]
                    .as_deref()
                    .is_some_and(|v| value_index::value_hash(v) == h)
            }));
        }
    }

    /// Element indexes (multi-value and array columns): the rows holding a value, found from
    /// element positions, with empty and null rows around them; sorted and hashed alike.
    #[test]
    fn element_indexes_find_the_rows_holding_a_value() {
        use arrow::array::{ListBuilder, StringBuilder};
        let rows: Vec<Option<Vec<String>>> = (0..3_000)
            .map(|i| match i % 7 {
                0 => None,
                1 => Some(vec![]),
                n => Some((0..n).map(|k| format!("v{}", (i * k) % 50)).collect()),
            })
            .collect();
        // Near-unique elements: a hash index.
        let unique: Vec<Option<Vec<String>>> = (0..3_000)
            .map(|i| (i % 5 != 0).then(|| vec![format!("u{i}"), format!("w{i}")]))
            .collect();
        for (data, hashed) in [(&rows, false), (&unique, true)] {
            let mut b = ListBuilder::new(StringBuilder::new());
            for r in data {
                match r {
                    Some(v) => {
                        for e in v {
                            b.values().append_value(e);
                        }
                        b.append(true);
                    }
                    None => b.append(false),
                }
            }
            let list = b.finish();
            let schema = Arc::new(Schema::new(vec![Field::new(
                "tags",
                list.data_type().clone(),
                true,
            )]));
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(list)]).unwrap();
            let mut builder = value_index::ValueIndexBuilder::new(&schema);
            builder.push(&batch).unwrap();
            let idx = ValueIndex::from_column(builder.finish().remove(0));
            assert_eq!(idx.is_hashed(), hashed);
            assert_eq!(idx.num_rows(), 3_000);
            assert_eq!(idx.elements(), Some(value_index::ElementKind::String));
            let holding = |v: &str| -> Vec<u32> {
                (0..3_000u32)
                    .filter(|i| {
                        data[*i as usize]
                            .as_ref()
                            .is_some_and(|r| r.iter().any(|e| e == v))
                    })
                    .collect()
            };
            for probe in ["v0", "v13", "v49", "u4", "w2999", "nope"] {
                assert_eq!(idx.rows_equal(probe), holding(probe), "{probe}");
            }
            let (a, b) = ("v3".to_string(), "w7".to_string());
            let mut any = holding(&a);
            any.extend(holding(&b));
            any.sort_unstable();
            any.dedup();
            assert_eq!(idx.rows_equal_any(&[a.clone(), b.clone()]), any);
            assert_eq!(
                idx.rows_equal_all(&[a.clone(), "v6".to_string()]),
                intersect(&holding(&a), &holding("v6"))
            );
        }
    }

    #[test]
    fn selections_and_intersections() {
        let sel = row_selection(&[1, 2, 3, 7, 9, 10], 12);
        let selected: usize = sel.iter().filter(|s| !s.skip).map(|s| s.row_count).sum();
        assert_eq!(selected, 6);
        assert_eq!(sel.row_count(), 6);
        let total: usize = sel.iter().map(|s| s.row_count).sum();
        assert_eq!(total, 12);
        assert_eq!(intersect(&[1, 3, 5, 7], &[2, 3, 7, 8]), vec![3, 7]);
        assert!(intersect(&[], &[1]).is_empty());
    }

    #[tokio::test]
    async fn indexes_load_from_the_sidecar_written_with_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = file(dir.path(), 1000);
        // The same rows through the segment writer, which writes the sidecar.
        let path = dir.path().join("seg/index.parquet");
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&legacy).unwrap())
                .unwrap();
        let schema = Arc::clone(reader.schema());
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        dolmen_segment::file::write_segment_file(
            &path,
            schema,
            &batches,
            dolmen_segment::file::compression_for(None),
        )
        .unwrap();
        let indexes = Arc::new(ValueIndexes::new(usize::MAX));
        let a = indexes.get(&path, "page").await.unwrap();
        let b = indexes.get(&path, "page").await.unwrap();
        assert!(Arc::ptr_eq(&a, &b), "loaded once");
        assert_eq!(indexes.used_bytes(), a.memory_bytes());
        assert_eq!((indexes.loaded_count(), indexes.built_count()), (1, 0));
        let built = ValueIndex::build(&legacy, "page").unwrap().unwrap();
        assert_eq!(a.values(), built.values());
        assert_eq!(a.rows_equal("p3"), built.rows_equal("p3"));
        assert_eq!(a.has_nulls(), built.has_nulls());
        assert!(indexes.get(&path, "n").await.is_none());
        let small = Arc::new(ValueIndexes::new(10));
        assert!(small.get(&path, "page").await.is_none());
        assert_eq!(small.used_bytes(), 0);
    }

    #[tokio::test]
    async fn a_segment_without_sidecar_is_indexed_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = file(dir.path(), 1000);
        let indexes = Arc::new(ValueIndexes::new(usize::MAX));
        // The query does not wait for a build.
        assert!(indexes.get(&legacy, "page").await.is_none());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let index = loop {
            if let Some(ix) = indexes.get(&legacy, "page").await {
                break ix;
            }
            assert!(std::time::Instant::now() < deadline, "no background build");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        assert_eq!(indexes.built_count(), 1);
        assert_eq!(index.cardinality(), 5);
        assert!(
            value_index::sidecar_path(&legacy).exists(),
            "kept for restarts"
        );
        // A later process reads the sidecar built then.
        let again = Arc::new(ValueIndexes::new(usize::MAX));
        assert!(again.get(&legacy, "page").await.is_some());
        assert_eq!(again.built_count(), 0);
    }
}
