//! Shredded sub-columns of nested JSON columns (ADR 0026): Druid's nested-column layout, one
//! typed field column per literal path, next to the JSON text of a `COMPLEX<json>` column.
//!
//! When a segment file is finished ([`crate::SegmentFileWriter::finish_with_layout`]), each
//! `COMPLEX<json>` column (a `Utf8` field marked [`crate::COMPLEX_METADATA_KEY`] = `json`) is
//! read back twice: the first pass finds its *paths* (chains of object keys from the root to a
//! non-null primitive, objects nested to any depth) and the kinds of value each holds; the
//! second writes one hidden column per path whose type is decided ([`NestedPath`]), holding
//! per row what `JSON_VALUE(column, path)` gives:
//!
//! | values found at the path | sub-column | row value |
//! |---|---|---|
//! | integers (fit in a signed 64-bit) | `Int64` (`long`) | the integer |
//! | numbers, at least one not an integer | `Float64` (`double`; `integers` when some were integers) | the number as a double |
//! | strings, booleans, integers (no other numbers) | `Utf8` (`string`) | `JSON_VALUE`'s text: the string, `true`/`false`, the integer's digits |
//! | non-integer numbers mixed with strings or booleans | not shredded | |
//!
//! A row where the path is missing, `null`, an object or an array is null, as `JSON_VALUE`
//! returns there. Arrays are not descended: a path through an array (`$.a[0].b`) is not
//! shredded, and `JSON_VALUE` with an array index reads the text. Only the first
//! [`MAX_NESTED_PATHS`] paths of a column (in the order the file first shows them) are
//! shredded; the rest are read from the text.
//!
//! The file is rewritten with the sub-columns appended after every other column (the query
//! side reads files by column name, and readers of segment files as rows drop them), named
//! [`nested_column_name`] after the column and the path, the same in every file (prefix
//! [`NESTED_COLUMN_PREFIX`], which no user column may take),
//! each field carrying its JSONPath under [`NESTED_PATH_METADATA_KEY`]. The file's key-value
//! metadata [`NESTED_METADATA_KEY`] holds the [`NestedLayout`] as JSON, and the segment payload
//! lists each JSON column's paths ([`crate::SegmentColumn::nested`]) so that queries are
//! planned without opening files, and whether they are all the paths of the file's values
//! ([`NestedColumn::complete`]: then a path not listed is null in every row). Setting the environment variable [`SHRED_ENV`] to `false`
//! turns shredding off (segments are then written as before it existed).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, Float64Builder, Int64Builder, RecordBatch, StringArray,
    StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::file::{COMPLEX_METADATA_KEY, ColumnType};

/// Prefix of the hidden sub-column names ([`nested_column_name`]).
pub const NESTED_COLUMN_PREFIX: &str = "__dolmen_nested:";

/// Key of the file's key-value metadata holding the [`NestedLayout`] (JSON).
pub const NESTED_METADATA_KEY: &str = "dolmen.nested";

/// Field metadata key of a sub-column: its JSONPath (`$.a.b`), for people reading the file.
pub const NESTED_PATH_METADATA_KEY: &str = "dolmen.nestedPath";

/// Most paths shredded per JSON column.
pub const MAX_NESTED_PATHS: usize = 256;

/// Environment variable that turns shredding off when `false` (or `0`, `off`, `no`).
pub const SHRED_ENV: &str = "DOLMEN_SHRED_NESTED";

/// Rows per batch while rewriting a file.
const BATCH_ROWS: usize = 64 * 1024;

/// One shredded path of a JSON column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NestedPath {
    /// The object keys from the root (empty: the root itself is a primitive).
    pub path: Vec<String>,
    /// `long`, `double` or `string` (see the module docs).
    #[serde(rename = "type")]
    pub ty: ColumnType,
    /// For a `double` path: some values were integers, whose `JSON_VALUE` text (`1`) the
    /// double (`1.0`) does not give back, so only numeric reads may use the sub-column.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub integers: bool,
}

impl NestedPath {
    /// The sub-column's Arrow type.
    pub fn arrow_type(&self) -> DataType {
        self.ty.arrow_type()
    }

    /// The path as Druid's normalized JSONPath (`$.a.b`, `$.['a.b']`, `$` for the root).
    pub fn json_path(&self) -> String {
        if self.path.is_empty() {
            return "$".to_string();
        }
        let mut out = String::from("$");
        for k in &self.path {
            if k.is_empty() || k.contains(['.', '\'', '"', '[', ']']) {
                out.push_str(".['");
                out.push_str(k);
                out.push_str("']");
            } else {
                out.push('.');
                out.push_str(k);
            }
        }
        out
    }
}

/// The shredded paths of one JSON column of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NestedColumn {
    /// The shredded paths, in sub-column order.
    pub paths: Vec<NestedPath>,
    /// Every path holding a primitive in some row of the file is listed (none was left out
    /// for mixing doubles with text, or past [`MAX_NESTED_PATHS`]): a path not listed is null
    /// in every row, so its sub-column may be read as all nulls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub complete: bool,
}

/// The shredded paths of each JSON column of a file.
pub type NestedLayout = BTreeMap<String, NestedColumn>;

/// Name of the sub-column of JSON column `column` at `path` (object keys): the same in every
/// file, so that a query reads one column across segments. When the column name and every key
/// are ASCII letters, digits and `_`, it is readable: the prefix, the column name, then `/` and
/// each key (`__dolmen_nested:nested/c/d`); otherwise the prefix, `#` and the hexadecimal UTF-8
/// of the JSON array `[column, [keys..]]`. Either way distinct (column, path) pairs get
/// distinct names, and none holds `.` (which SQL column references would split on).
pub fn nested_column_name(column: &str, path: &[String]) -> String {
    let plain =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain(column) && path.iter().all(|k| plain(k)) {
        let mut name = format!("{NESTED_COLUMN_PREFIX}{column}");
        for k in path {
            name.push('/');
            name.push_str(k);
        }
        return name;
    }
    let json = serde_json::json!([column, path]).to_string();
    let mut name = format!("{NESTED_COLUMN_PREFIX}#");
    for b in json.bytes() {
        name.push_str(&format!("{b:02x}"));
    }
    name
}

/// Whether `name` is a shredded sub-column ([`nested_column_name`]).
pub fn is_nested_column(name: &str) -> bool {
    name.starts_with(NESTED_COLUMN_PREFIX)
}

/// Whether shredding is on ([`SHRED_ENV`]).
pub fn shredding_enabled() -> bool {
    !std::env::var(SHRED_ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "false" | "0" | "off" | "no"
        )
    })
}

/// The layout recorded in a segment file's key-value metadata (empty when none).
pub fn layout_from_metadata(kv: Option<&Vec<KeyValue>>) -> NestedLayout {
    kv.into_iter()
        .flatten()
        .find(|e| e.key == NESTED_METADATA_KEY)
        .and_then(|e| e.value.as_deref())
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// A primitive found at a path.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Primitive<'a> {
    Int(i64),
    /// An integer past `i64` (`u64`): its digits are its text.
    BigInt(&'a serde_json::Number),
    Float(f64),
    Str(&'a str),
    Bool(bool),
}

impl<'a> Primitive<'a> {
    fn of(v: &'a Value) -> Option<Primitive<'a>> {
        Some(match v {
            Value::String(s) => Primitive::Str(s),
            Value::Bool(b) => Primitive::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Primitive::Int(i),
                None if n.is_f64() => Primitive::Float(n.as_f64()?),
                None => Primitive::BigInt(n),
            },
            Value::Null | Value::Array(_) | Value::Object(_) => return None,
        })
    }

    fn as_f64(self) -> Option<f64> {
        match self {
            Primitive::Int(i) => Some(i as f64),
            Primitive::BigInt(n) => n.as_f64(),
            Primitive::Float(f) => Some(f),
            Primitive::Str(_) | Primitive::Bool(_) => None,
        }
    }
}

/// The kinds of value seen at one path.
#[derive(Debug, Default, Clone, Copy)]
struct Kinds {
    int: bool,
    big_int: bool,
    float: bool,
    text: bool,
}

impl Kinds {
    fn add(&mut self, p: Primitive<'_>) {
        match p {
            Primitive::Int(_) => self.int = true,
            Primitive::BigInt(_) => self.big_int = true,
            Primitive::Float(_) => self.float = true,
            Primitive::Str(_) | Primitive::Bool(_) => self.text = true,
        }
    }

    /// The sub-column type, if the path is shredded (module docs' table).
    fn decide(self) -> Option<(ColumnType, bool)> {
        match self {
            Kinds {
                float: true,
                text: true,
                ..
            } => None,
            Kinds {
                float: true,
                int,
                big_int,
                ..
            } => Some((ColumnType::Double, int || big_int)),
            Kinds { text: true, .. } | Kinds { big_int: true, .. } => {
                Some((ColumnType::String, false))
            }
            Kinds { int: true, .. } => Some((ColumnType::Long, false)),
            Kinds { .. } => None,
        }
    }
}

/// The paths of one JSON column as a trie of object keys: following a document's keys down
/// the trie finds each primitive's path slot without building path strings.
#[derive(Debug, Default)]
struct PathTrie {
    children: HashMap<String, PathTrie>,
    /// The slot of the path ending here, if some primitive was found at it.
    slot: Option<usize>,
}

/// First pass over one JSON column: the paths and the kinds of value each holds.
#[derive(Debug, Default)]
pub struct PathDiscovery {
    trie: PathTrie,
    /// Per slot: the path and its kinds.
    paths: Vec<(Vec<String>, Kinds)>,
    /// Some key or path was not followed for the cap.
    truncated: bool,
}

impl PathDiscovery {
    /// Records the primitives of one document.
    pub fn add_document(&mut self, doc: &Value) {
        let mut path = Vec::new();
        let mut d = Discovering {
            path: &mut path,
            paths: &mut self.paths,
            truncated: &mut self.truncated,
        };
        d.discover(doc, &mut self.trie);
    }

    /// The shredded paths with their types, in discovery order.
    pub fn layout(&self) -> Vec<NestedPath> {
        self.column().paths
    }

    /// The shredded paths and whether they are all the column's.
    pub fn column(&self) -> NestedColumn {
        let paths: Vec<NestedPath> = self
            .paths
            .iter()
            .filter_map(|(path, kinds)| {
                kinds.decide().map(|(ty, integers)| NestedPath {
                    path: path.clone(),
                    ty,
                    integers,
                })
            })
            .collect();
        NestedColumn {
            complete: !self.truncated && paths.len() == self.paths.len(),
            paths,
        }
    }
}

/// One document's walk in [`PathDiscovery::add_document`].
struct Discovering<'a> {
    path: &'a mut Vec<String>,
    paths: &'a mut Vec<(Vec<String>, Kinds)>,
    truncated: &'a mut bool,
}

impl Discovering<'_> {
    fn discover(&mut self, v: &Value, node: &mut PathTrie) {
        if let Value::Object(m) = v {
            for (k, child) in m {
                // Past the cap, only paths already known are followed.
                let next = if self.paths.len() < MAX_NESTED_PATHS {
                    Some(node.children.entry(k.clone()).or_default())
                } else {
                    node.children.get_mut(k)
                };
                match next {
                    Some(next) => {
                        self.path.push(k.clone());
                        self.discover(child, next);
                        self.path.pop();
                    }
                    None => *self.truncated = true,
                }
            }
            return;
        }
        let Some(p) = Primitive::of(v) else {
            return;
        };
        let slot = match node.slot {
            Some(s) => s,
            None if self.paths.len() < MAX_NESTED_PATHS => {
                self.paths.push((self.path.clone(), Kinds::default()));
                node.slot = Some(self.paths.len() - 1);
                self.paths.len() - 1
            }
            None => {
                *self.truncated = true;
                return;
            }
        };
        self.paths[slot].1.add(p);
    }
}

/// Builds the sub-columns of one JSON column for a batch (second pass).
#[derive(Debug)]
pub struct Shredder {
    trie: PathTrie,
    layout: Vec<NestedPath>,
}

/// One sub-column being built.
enum SubBuilder {
    Long(Int64Builder),
    Double(Float64Builder),
    Text(StringBuilder),
}

impl Shredder {
    /// A shredder writing `layout`'s paths.
    pub fn new(layout: Vec<NestedPath>) -> Shredder {
        let mut trie = PathTrie::default();
        for (i, p) in layout.iter().enumerate() {
            let mut node = &mut trie;
            for k in &p.path {
                node = node.children.entry(k.clone()).or_default();
            }
            node.slot = Some(i);
        }
        Shredder { trie, layout }
    }

    /// The sub-columns of `texts` (compact JSON text, one document per row), one array per
    /// path of the layout.
    pub fn shred(&self, texts: &StringArray) -> Vec<ArrayRef> {
        let n = texts.len();
        let mut builders: Vec<SubBuilder> = self
            .layout
            .iter()
            .map(|p| match p.ty {
                ColumnType::Long => SubBuilder::Long(Int64Builder::with_capacity(n)),
                ColumnType::Double => SubBuilder::Double(Float64Builder::with_capacity(n)),
                _ => SubBuilder::Text(StringBuilder::with_capacity(n, n * 8)),
            })
            .collect();
        for (r, text) in texts.iter().enumerate() {
            if let Some(t) = text {
                collect(&document(t), &self.trie, r, &mut builders);
            }
        }
        builders.into_iter().map(|b| b.finish(n)).collect()
    }
}

/// The JSON value `JSON_VALUE` reads from `text`: the parsed document, or the text itself as a
/// string when it is not JSON (as the query side's JSON functions read text).
fn document(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

impl SubBuilder {
    fn len(&self) -> usize {
        match self {
            SubBuilder::Long(b) => b.len(),
            SubBuilder::Double(b) => b.len(),
            SubBuilder::Text(b) => b.len(),
        }
    }

    /// Nulls up to row `r` (exclusive).
    fn fill_to(&mut self, r: usize) {
        let missing = r.saturating_sub(self.len());
        match self {
            SubBuilder::Long(b) => b.append_nulls(missing),
            SubBuilder::Double(b) => b.append_nulls(missing),
            SubBuilder::Text(b) => {
                for _ in 0..missing {
                    b.append_null();
                }
            }
        }
    }

    /// Row `r`'s value (rows before it without one are null).
    fn push(&mut self, r: usize, p: Primitive<'_>) {
        self.fill_to(r);
        match self {
            SubBuilder::Long(b) => b.append_option(match p {
                Primitive::Int(i) => Some(i),
                _ => None,
            }),
            SubBuilder::Double(b) => b.append_option(p.as_f64()),
            SubBuilder::Text(b) => match p {
                Primitive::Str(s) => b.append_value(s),
                Primitive::Bool(x) => b.append_value(if x { "true" } else { "false" }),
                Primitive::Int(i) => b.append_value(i.to_string()),
                Primitive::BigInt(x) => b.append_value(x.to_string()),
                Primitive::Float(_) => b.append_null(),
            },
        }
    }

    fn finish(mut self, n: usize) -> ArrayRef {
        self.fill_to(n);
        match self {
            SubBuilder::Long(mut b) => Arc::new(b.finish()),
            SubBuilder::Double(mut b) => Arc::new(b.finish()),
            SubBuilder::Text(mut b) => Arc::new(b.finish()),
        }
    }
}

fn collect(v: &Value, node: &PathTrie, r: usize, builders: &mut [SubBuilder]) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if let Some(next) = node.children.get(k) {
                    collect(child, next, r, builders);
                }
            }
        }
        _ => {
            if let (Some(slot), Some(p)) = (node.slot, Primitive::of(v)) {
                builders[slot].push(r, p);
            }
        }
    }
}

/// The `COMPLEX<json>` columns of `schema`: their positions and names.
fn json_columns(schema: &Schema) -> Vec<(usize, String)> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            f.data_type() == &DataType::Utf8
                && f.metadata()
                    .get(COMPLEX_METADATA_KEY)
                    .is_some_and(|v| v == "json")
        })
        .map(|(i, f)| (i, f.name().clone()))
        .collect()
}

/// Whether `schema` has a `COMPLEX<json>` column (a file to shred).
pub fn has_json_columns(schema: &Schema) -> bool {
    !json_columns(schema).is_empty()
}

/// Shreds the JSON columns of the Parquet file at `path` in place (module docs): when some
/// column has paths to shred, writes the file again with the sub-columns appended and `props`
/// (plus the layout metadata), `fsync`s it and renames it over `path`. Returns the layout
/// (empty when the file was left as it was).
///
/// # Errors
/// A Parquet or I/O error; `path` is then unchanged.
pub fn shred_file(path: &Path, props: &WriterProperties) -> Result<NestedLayout, ParquetError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
    let schema = Arc::clone(builder.schema());
    let columns = json_columns(&schema);
    if columns.is_empty() {
        return Ok(NestedLayout::new());
    }
    // First pass: the JSON columns only.
    let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().map(|(i, _)| *i));
    let reader = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()?;
    let mut discovery: Vec<PathDiscovery> =
        columns.iter().map(|_| PathDiscovery::default()).collect();
    for batch in reader {
        let batch = batch?;
        for (k, d) in discovery.iter_mut().enumerate() {
            for text in batch.column(k).as_string::<i32>().iter().flatten() {
                d.add_document(&document(text));
            }
        }
    }
    let layout: NestedLayout = columns
        .iter()
        .zip(&discovery)
        .map(|((_, name), d)| (name.clone(), d.column()))
        .collect();
    if layout.values().all(|c| c.paths.is_empty()) {
        return Ok(layout);
    }
    // Second pass: every column, the sub-columns appended.
    let shredders: Vec<(usize, Shredder)> = columns
        .iter()
        .filter_map(|(i, name)| {
            let paths = &layout.get(name)?.paths;
            (!paths.is_empty()).then(|| (*i, Shredder::new(paths.clone())))
        })
        .collect();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    // In the order of `shredders` (the file's), which is how the batches get them.
    for (name, c) in columns.iter().filter_map(|(_, n)| layout.get_key_value(n)) {
        for p in &c.paths {
            fields.push(
                Field::new(nested_column_name(name, &p.path), p.arrow_type(), true).with_metadata(
                    [(NESTED_PATH_METADATA_KEY.to_string(), p.json_path())]
                        .into_iter()
                        .collect(),
                ),
            );
        }
    }
    let out_schema: SchemaRef =
        Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let tmp = path.with_extension("shred.tmp");
    let result = (|| -> Result<(), ParquetError> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?
            .with_batch_size(BATCH_ROWS)
            .build()?;
        let mut writer = ArrowWriter::try_new(
            File::create(&tmp)?,
            Arc::clone(&out_schema),
            Some(props.clone()),
        )?;
        writer.append_key_value_metadata(KeyValue::new(
            NESTED_METADATA_KEY.to_string(),
            serde_json::to_string(&layout).map_err(|e| ParquetError::External(Box::new(e)))?,
        ));
        for batch in reader {
            let batch = batch?;
            let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
            for (i, s) in &shredders {
                cols.extend(s.shred(batch.column(*i).as_string::<i32>()));
            }
            writer.write(&RecordBatch::try_new(Arc::clone(&out_schema), cols)?)?;
        }
        writer.into_inner()?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(layout)
}

#[cfg(test)]
mod tests;
