//! Druid SQL result writers with Druid's exact bytes (`docs/api-reference/sql-api.md`;
//! `sql/src/main/java/org/apache/druid/sql/http/{Object,Array,ObjectLines,ArrayLines,Csv}Writer.java`).
//!
//! | Format | Body |
//! |---|---|
//! | `object` | `[{"a":1,"b":"x"},{"a":2,"b":null}]` then `\n` |
//! | `array` | `[[1,"x"],[2,null]]` then `\n` |
//! | `objectLines` | `{"a":1,"b":"x"}\n{"a":2,"b":null}` then `\n\n` (the body ends with a blank line) |
//! | `arrayLines` | `[1,"x"]\n[2,null]` then `\n\n` |
//! | `csv` | `1,x\n2,\n` then `\n` |
//!
//! JSON is compact, as Jackson writes it. With `header`, the first value is
//! `{"col":null,..}` (object formats; `{"col":{"type":..,"sqlType":..}}` with the type flags) or
//! rows of column names, native types and SQL types (array and CSV formats).
//!
//! Values are rendered as Druid's `SqlResourceQueryResultPusher` and `SqlResults.coerce` do:
//! - TIMESTAMP: ISO string in `sqlTimeZone` (`2015-09-12T00:46:58.771Z`,
//!   `2015-09-11T17:46:58.771-07:00`); DATE: midnight of that day in the zone, same format.
//! - BIGINT etc.: integers. BOOLEAN: `true`/`false`.
//! - FLOAT/DOUBLE: Java's `Float.toString`/`Double.toString` (`1.0`, `0.001`, `1.0E7`,
//!   `1.2E-4`) since Jackson writes doubles that way; NaN and infinities are written as the JSON
//!   strings `"NaN"`, `"Infinity"`, `"-Infinity"` (Jackson's default `QUOTE_NON_NUMERIC_NUMBERS`).
//! - Arrays: with `sqlStringifyArrays` (Druid's default, [`ResultWriter::with_stringify_arrays`])
//!   the JSON text of the array as a string (`"[\"a\",\"b\"]"`), else a JSON array.
//! - Multi-value strings (a `List<Utf8>` field marked with
//!   [`dolmen_segment::MULTI_VALUE_METADATA_KEY`], reported as `STRING`/`VARCHAR`): as Druid's
//!   `SqlResults.coerce` does for VARCHAR, a row with one value is that string, a null (or empty)
//!   row is null, and a row with several values is the JSON text of the string list, a JSON
//!   string (`"[\"a\",\"b\"]"`) whatever `sqlStringifyArrays` says; CSV gets the same text.
//! - Structs and maps (`COMPLEX<json>`): JSON objects. Binary: base64 strings.
//! - JSON values (a string field marked as `COMPLEX<json>`, see
//!   [`crate::functions::scalar::json_field`]): the JSON value itself (not a JSON string) in the
//!   JSON formats and its JSON text in CSV; arrays of them (`ARRAY<COMPLEX<json>>`) likewise.
//! - Strings are escaped as Jackson does (`\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`, other control
//!   characters as `\u00XX`; non-ASCII is written as UTF-8).
//! - CSV (opencsv `CSVWriter`, default settings): a null is an empty field; a field containing
//!   `"`, `,`, CR or LF is quoted with inner quotes doubled; a row whose only value is empty is
//!   written as `""`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float32Array, Float64Array, GenericListArray,
    OffsetSizeTrait, PrimitiveArray, RecordBatch,
};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Field, Int8Type, Int16Type, Int32Type, Int64Type,
    Schema, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow::error::ArrowError;
use dolmen_common::java_number::{non_finite, write_java_double, write_java_float};
use dolmen_common::time::push_iso_millis;
use dolmen_common::zone::Zone;

/// A `resultFormat` of the SQL API (`sql/src/main/java/org/apache/druid/sql/http/ResultFormat.java`).
///
/// Serializes to the camelCase names; deserializes and parses ([`FromStr`]) them
/// case-insensitively, as Druid (`ResultFormat.fromString` upper-cases the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ResultFormat {
    /// JSON array of JSON objects (the default).
    #[default]
    Object,
    /// JSON array of JSON arrays.
    Array,
    /// Newline-delimited JSON objects.
    ObjectLines,
    /// Newline-delimited JSON arrays.
    ArrayLines,
    /// Comma-separated values.
    Csv,
}

impl ResultFormat {
    /// Every format.
    pub const ALL: [ResultFormat; 5] = [
        ResultFormat::Object,
        ResultFormat::Array,
        ResultFormat::ObjectLines,
        ResultFormat::ArrayLines,
        ResultFormat::Csv,
    ];

    /// The response `Content-Type`: `application/json` (object, array), `text/plain` (lines
    /// formats) or `text/csv`.
    pub fn content_type(self) -> &'static str {
        match self {
            ResultFormat::Object | ResultFormat::Array => "application/json",
            ResultFormat::ObjectLines | ResultFormat::ArrayLines => "text/plain",
            ResultFormat::Csv => "text/csv",
        }
    }

    /// The API name (`object`, `array`, `objectLines`, `arrayLines`, `csv`).
    pub fn as_str(self) -> &'static str {
        match self {
            ResultFormat::Object => "object",
            ResultFormat::Array => "array",
            ResultFormat::ObjectLines => "objectLines",
            ResultFormat::ArrayLines => "arrayLines",
            ResultFormat::Csv => "csv",
        }
    }
}

impl fmt::Display for ResultFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown `resultFormat` name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unknown resultFormat [{0}]; expected one of object, array, objectLines, arrayLines, csv")]
pub struct UnknownResultFormat(pub String);

impl FromStr for ResultFormat {
    type Err = UnknownResultFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ResultFormat::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownResultFormat(s.to_string()))
    }
}

impl<'de> serde::Deserialize<'de> for ResultFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A result column: name, Druid native (runtime) type and SQL type, as reported by the
/// `typesHeader` and `sqlTypesHeader` rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnInfo {
    /// Column name (the JSON key in object formats).
    pub name: String,
    /// Druid runtime type (`TypeSignature.asTypeString`): `STRING`, `LONG`, `FLOAT`, `DOUBLE`,
    /// `ARRAY<STRING>`, `COMPLEX<json>`, ...
    pub native_type: String,
    /// SQL type name (`SqlTypeName.getName`): `VARCHAR`, `BIGINT`, `TIMESTAMP`, `ARRAY`, `OTHER`, ...
    pub sql_type: String,
    /// A multi-value string column (rendered as described in the module docs).
    pub multi_value: bool,
}

impl ColumnInfo {
    /// The column info for a field of Arrow type `dt`.
    pub fn from_arrow(name: &str, dt: &DataType) -> ColumnInfo {
        let (native_type, sql_type) = druid_types(dt);
        ColumnInfo {
            name: name.to_string(),
            native_type,
            sql_type: sql_type.to_string(),
            multi_value: false,
        }
    }

    /// The column info for `field`: a list field carrying
    /// [`dolmen_segment::MULTI_VALUE_METADATA_KEY`] is a multi-value `STRING`/`VARCHAR`
    /// column; a binary field carrying [`dolmen_segment::DRUID_TYPE_METADATA_KEY`] has that
    /// `COMPLEX<...>` native type (SQL type `OTHER`); a string field marked as JSON
    /// ([`crate::functions::scalar::is_json_field`]) is `COMPLEX<json>`/`OTHER`; a list of such
    /// is `ARRAY<COMPLEX<json>>`/`ARRAY`; anything else as [`ColumnInfo::from_arrow`].
    pub fn from_field(field: &Field) -> ColumnInfo {
        if let Some(native) = field
            .metadata()
            .get(dolmen_segment::DRUID_TYPE_METADATA_KEY)
            && native.starts_with("COMPLEX<")
            && matches!(
                field.data_type(),
                DataType::Binary | DataType::LargeBinary | DataType::BinaryView
            )
        {
            return ColumnInfo {
                name: field.name().to_string(),
                native_type: native.clone(),
                sql_type: "OTHER".to_string(),
                multi_value: false,
            };
        }
        if let Some(native) = json_native_type(field) {
            return ColumnInfo {
                name: field.name().to_string(),
                native_type: native.to_string(),
                sql_type: if native == JSON_NATIVE_TYPE {
                    "OTHER"
                } else {
                    "ARRAY"
                }
                .to_string(),
                multi_value: false,
            };
        }
        let marked = field
            .metadata()
            .get(dolmen_segment::MULTI_VALUE_METADATA_KEY)
            .is_some_and(|v| v == "true");
        if marked && is_list(field.data_type()) {
            ColumnInfo {
                name: field.name().to_string(),
                native_type: "STRING".to_string(),
                sql_type: "VARCHAR".to_string(),
                multi_value: true,
            }
        } else {
            ColumnInfo::from_arrow(field.name(), field.data_type())
        }
    }
}

const JSON_NATIVE_TYPE: &str = "COMPLEX<json>";

/// `COMPLEX<json>` for a string field marked as JSON, `ARRAY<COMPLEX<json>>` for a list of
/// them, else `None`.
fn json_native_type(field: &Field) -> Option<&'static str> {
    use crate::functions::scalar::is_json_field;
    match field.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if is_json_field(field) => {
            Some(JSON_NATIVE_TYPE)
        }
        DataType::List(f) | DataType::LargeList(f)
            if json_native_type(f) == Some(JSON_NATIVE_TYPE) =>
        {
            Some("ARRAY<COMPLEX<json>>")
        }
        _ => None,
    }
}

/// Whether the values of list-like type `dt` are JSON text (their field is marked as JSON).
fn is_json_list(dt: &DataType) -> bool {
    match dt {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => json_native_type(f) == Some(JSON_NATIVE_TYPE),
        _ => false,
    }
}

/// Column infos for every field of `schema`; see [`druid_types`] and
/// [`ColumnInfo::from_field`].
pub fn column_infos(schema: &Schema) -> Vec<ColumnInfo> {
    schema
        .fields()
        .iter()
        .map(|f| ColumnInfo::from_field(f))
        .collect()
}

/// Maps an Arrow type to Druid's (native type, SQL type name), following
/// `docs/querying/sql-data-types.md`:
///
/// | Arrow | native | SQL |
/// |---|---|---|
/// | Utf8, LargeUtf8, Utf8View, Null | STRING | VARCHAR |
/// | Int64, UInt32, UInt64 / Int32, UInt16 / Int16, UInt8 / Int8 | LONG | BIGINT / INTEGER / SMALLINT / TINYINT |
/// | Boolean | LONG | BOOLEAN |
/// | Float16, Float32 | FLOAT | FLOAT |
/// | Float64 / Decimal* | DOUBLE | DOUBLE / DECIMAL |
/// | Timestamp(*) / Date32, Date64 | LONG | TIMESTAMP / DATE |
/// | Duration(*) | LONG | BIGINT |
/// | List-like of T | `ARRAY<native(T)>` | ARRAY |
/// | Struct, Map | `COMPLEX<json>` | OTHER |
/// | Binary and anything else | COMPLEX | OTHER |
///
/// Dictionary and run-end encoded types map as their value type.
pub fn druid_types(dt: &DataType) -> (String, &'static str) {
    let (native, sql): (&str, &str) = match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
            ("STRING", "VARCHAR")
        }
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => ("LONG", "BIGINT"),
        DataType::Int32 | DataType::UInt16 => ("LONG", "INTEGER"),
        DataType::Int16 | DataType::UInt8 => ("LONG", "SMALLINT"),
        DataType::Int8 => ("LONG", "TINYINT"),
        DataType::Boolean => ("LONG", "BOOLEAN"),
        DataType::Float16 | DataType::Float32 => ("FLOAT", "FLOAT"),
        DataType::Float64 => ("DOUBLE", "DOUBLE"),
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => ("DOUBLE", "DECIMAL"),
        DataType::Timestamp(..) => ("LONG", "TIMESTAMP"),
        DataType::Date32 | DataType::Date64 => ("LONG", "DATE"),
        DataType::Duration(_) => ("LONG", "BIGINT"),
        DataType::Time32(_) | DataType::Time64(_) | DataType::Interval(_) => ("STRING", "VARCHAR"),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => {
            return (format!("ARRAY<{}>", druid_types(f.data_type()).0), "ARRAY");
        }
        DataType::Struct(_) | DataType::Map(..) => ("COMPLEX<json>", "OTHER"),
        DataType::Dictionary(_, v) => return druid_types(v),
        DataType::RunEndEncoded(_, v) => return druid_types(v.data_type()),
        _ => ("COMPLEX", "OTHER"),
    };
    (native.to_string(), sql)
}

/// Streams query results in one of Druid's formats (see the module docs). Call
/// [`start`](ResultWriter::start) once, [`write_batch`](ResultWriter::write_batch) per batch and
/// [`finish`](ResultWriter::finish) once; each appends bytes to `out`, so the caller can flush
/// `out` to the response between calls. A body without the final bytes of `finish` tells
/// clients the response was truncated.
#[derive(Debug)]
pub struct ResultWriter {
    format: ResultFormat,
    columns: Vec<ColumnInfo>,
    header: bool,
    types_header: bool,
    sql_types_header: bool,
    tz: Zone,
    stringify_arrays: bool,
    /// `"name":` per column, JSON-escaped (object formats).
    keys: Vec<Vec<u8>>,
    /// Whether a top-level value was written (separators).
    any_value: bool,
    scratch: Vec<u8>,
    text: String,
}

impl ResultWriter {
    /// A writer for `format` with the result `columns`. `types_header` and `sql_types_header`
    /// only apply when `header` is set (the API rejects them otherwise). TIMESTAMP and DATE
    /// values are printed in `tz` (`sqlTimeZone`).
    pub fn new(
        format: ResultFormat,
        columns: Vec<ColumnInfo>,
        header: bool,
        types_header: bool,
        sql_types_header: bool,
        tz: Zone,
    ) -> Self {
        let keys = columns
            .iter()
            .map(|c| {
                let mut k = Vec::with_capacity(c.name.len() + 3);
                write_json_string(&mut k, &c.name);
                k.push(b':');
                k
            })
            .collect();
        ResultWriter {
            format,
            columns,
            header,
            types_header: header && types_header,
            sql_types_header: header && sql_types_header,
            tz,
            stringify_arrays: true,
            keys,
            any_value: false,
            scratch: Vec::new(),
            text: String::new(),
        }
    }

    /// Sets Druid's `sqlStringifyArrays` (default true): arrays rendered as JSON text strings
    /// rather than JSON arrays.
    pub fn with_stringify_arrays(mut self, stringify: bool) -> Self {
        self.stringify_arrays = stringify;
        self
    }

    /// The format.
    pub fn format(&self) -> ResultFormat {
        self.format
    }

    /// The columns.
    pub fn columns(&self) -> &[ColumnInfo] {
        &self.columns
    }

    /// Separator before a top-level value (array element or line).
    fn begin_value(&mut self, out: &mut Vec<u8>) {
        if self.any_value {
            match self.format {
                ResultFormat::Object | ResultFormat::Array => out.push(b','),
                ResultFormat::ObjectLines | ResultFormat::ArrayLines => out.push(b'\n'),
                ResultFormat::Csv => {}
            }
        }
        self.any_value = true;
    }

    /// Writes the opening bytes and the header rows, if any.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        if matches!(self.format, ResultFormat::Object | ResultFormat::Array) {
            out.push(b'[');
        }
        if !self.header {
            return;
        }
        match self.format {
            ResultFormat::Object | ResultFormat::ObjectLines => {
                self.begin_value(out);
                out.push(b'{');
                for (i, c) in self.columns.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&self.keys[i]);
                    if !self.types_header && !self.sql_types_header {
                        out.extend_from_slice(b"null");
                        continue;
                    }
                    out.push(b'{');
                    if self.types_header {
                        out.extend_from_slice(b"\"type\":");
                        write_json_string(out, &c.native_type);
                    }
                    if self.sql_types_header {
                        if self.types_header {
                            out.push(b',');
                        }
                        out.extend_from_slice(b"\"sqlType\":");
                        write_json_string(out, &c.sql_type);
                    }
                    out.push(b'}');
                }
                out.push(b'}');
            }
            ResultFormat::Array | ResultFormat::ArrayLines => {
                let mut rows: Vec<Vec<String>> =
                    vec![self.columns.iter().map(|c| c.name.clone()).collect()];
                if self.types_header {
                    rows.push(self.columns.iter().map(|c| c.native_type.clone()).collect());
                }
                if self.sql_types_header {
                    rows.push(self.columns.iter().map(|c| c.sql_type.clone()).collect());
                }
                for row in rows {
                    self.begin_value(out);
                    out.push(b'[');
                    for (i, v) in row.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        write_json_string(out, v);
                    }
                    out.push(b']');
                }
            }
            ResultFormat::Csv => {
                let mut rows: Vec<Vec<String>> =
                    vec![self.columns.iter().map(|c| c.name.clone()).collect()];
                if self.types_header {
                    rows.push(self.columns.iter().map(|c| c.native_type.clone()).collect());
                }
                if self.sql_types_header {
                    rows.push(self.columns.iter().map(|c| c.sql_type.clone()).collect());
                }
                for row in rows {
                    for (i, v) in row.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        write_csv_field(out, v.as_bytes(), false);
                    }
                    out.push(b'\n');
                }
            }
        }
    }

    /// Appends the rows of `batch`. Its columns are matched to [`ColumnInfo`]s by position.
    ///
    /// # Errors
    /// When the batch has a different number of columns, or a column cannot be converted.
    pub fn write_batch(
        &mut self,
        batch: &RecordBatch,
        out: &mut Vec<u8>,
    ) -> Result<(), ArrowError> {
        if batch.num_columns() != self.columns.len() {
            return Err(ArrowError::InvalidArgumentError(format!(
                "result batch has {} columns but the writer expects {}",
                batch.num_columns(),
                self.columns.len()
            )));
        }
        let normalized: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(normalize)
            .collect::<Result<_, _>>()?;
        let cols: Vec<Col<'_>> = normalized.iter().map(|a| Col::new(a.as_ref())).collect();
        let multi: Vec<bool> = self.columns.iter().map(|c| c.multi_value).collect();
        // JSON text columns: written as raw JSON (JSON formats) or as text (CSV).
        let raw_json: Vec<bool> = self
            .columns
            .iter()
            .zip(&normalized)
            .map(|(c, a)| c.native_type == JSON_NATIVE_TYPE && string_like(a.data_type()))
            .collect();
        let ctx = RenderCtx {
            tz: self.tz,
            stringify_arrays: self.stringify_arrays,
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut text = std::mem::take(&mut self.text);
        let result = (|| {
            for row in 0..batch.num_rows() {
                match self.format {
                    ResultFormat::Object | ResultFormat::ObjectLines => {
                        self.begin_value(out);
                        out.push(b'{');
                        for (i, col) in cols.iter().enumerate() {
                            if i > 0 {
                                out.push(b',');
                            }
                            out.extend_from_slice(&self.keys[i]);
                            if raw_json[i] {
                                write_raw_json(normalized[i].as_ref(), row, out);
                            } else if multi[i] {
                                write_multi_value(normalized[i].as_ref(), row, true, out)?;
                            } else {
                                col.write_json(row, &ctx, out, &mut scratch, &mut text)?;
                            }
                        }
                        out.push(b'}');
                    }
                    ResultFormat::Array | ResultFormat::ArrayLines => {
                        self.begin_value(out);
                        out.push(b'[');
                        for (i, col) in cols.iter().enumerate() {
                            if i > 0 {
                                out.push(b',');
                            }
                            if raw_json[i] {
                                write_raw_json(normalized[i].as_ref(), row, out);
                            } else if multi[i] {
                                write_multi_value(normalized[i].as_ref(), row, true, out)?;
                            } else {
                                col.write_json(row, &ctx, out, &mut scratch, &mut text)?;
                            }
                        }
                        out.push(b']');
                    }
                    ResultFormat::Csv => {
                        let only_one = cols.len() == 1;
                        for (i, col) in cols.iter().enumerate() {
                            if i > 0 {
                                out.push(b',');
                            }
                            scratch.clear();
                            if multi[i] {
                                write_multi_value(
                                    normalized[i].as_ref(),
                                    row,
                                    false,
                                    &mut scratch,
                                )?;
                            } else {
                                col.write_text(row, &ctx, &mut scratch, &mut text)?;
                            }
                            write_csv_field(out, &scratch, only_one && scratch.is_empty());
                        }
                        out.push(b'\n');
                    }
                }
            }
            Ok(())
        })();
        self.scratch = scratch;
        self.text = text;
        result
    }

    /// Writes the closing bytes: `]\n` (object, array), `\n\n` (lines formats: ends the last
    /// line and adds a blank one) or `\n` (CSV: a blank line).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match self.format {
            ResultFormat::Object | ResultFormat::Array => out.extend_from_slice(b"]\n"),
            ResultFormat::ObjectLines | ResultFormat::ArrayLines => out.extend_from_slice(b"\n\n"),
            ResultFormat::Csv => out.push(b'\n'),
        }
    }
}

fn string_like(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// Writes JSON text value `row` of string array `a` as is (`null` for null). Text that is not
/// valid JSON (a plain string that reached a JSON column, e.g. through `UNION ALL`) is written as
/// a JSON string, so the output stays valid JSON.
fn write_raw_json(a: &dyn Array, row: usize, out: &mut Vec<u8>) {
    match string_value(a, row) {
        Some(s) if !a.is_null(row) => {
            if serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok() {
                out.extend_from_slice(s.as_bytes());
            } else {
                write_json_string(out, s);
            }
        }
        _ => out.extend_from_slice(b"null"),
    }
}

/// Writes an opencsv field: quoted (inner quotes doubled) when it contains `"`, `,`, CR or LF,
/// or when `force_quotes`.
fn write_csv_field(out: &mut Vec<u8>, v: &[u8], force_quotes: bool) {
    let special = v.iter().any(|b| matches!(b, b'"' | b',' | b'\n' | b'\r'));
    if !special && !force_quotes {
        out.extend_from_slice(v);
        return;
    }
    out.push(b'"');
    for &b in v {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// Appends `s` as a JSON string literal, escaped as Jackson does.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xF)]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn push_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0_u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0_u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn write_json_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        write_java_double(out, v);
    } else {
        out.push(b'"');
        out.extend_from_slice(non_finite(v).as_bytes());
        out.push(b'"');
    }
}

fn write_json_f32(out: &mut Vec<u8>, v: f32) {
    if v.is_finite() {
        write_java_float(out, v);
    } else {
        out.push(b'"');
        out.extend_from_slice(non_finite(f64::from(v)).as_bytes());
        out.push(b'"');
    }
}

fn base64(out: &mut Vec<u8>, data: &[u8]) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63]);
        out.push(T[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63]
        } else {
            b'='
        });
    }
}

/// Casts types the renderer does not handle directly: dictionaries to their values, decimals to
/// Float64 (Druid DOUBLE), Float16 to Float32, run-end encoded to their values.
fn normalize(arr: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    match arr.data_type() {
        DataType::Dictionary(_, v) => {
            let values = arrow::compute::cast(arr, v)?;
            normalize(&values)
        }
        DataType::RunEndEncoded(_, v) => {
            let values = arrow::compute::cast(arr, v.data_type())?;
            normalize(&values)
        }
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => arrow::compute::cast(arr, &DataType::Float64),
        DataType::Float16 => arrow::compute::cast(arr, &DataType::Float32),
        _ => Ok(Arc::clone(arr)),
    }
}

#[derive(Debug, Clone, Copy)]
struct RenderCtx {
    tz: Zone,
    stringify_arrays: bool,
}

/// A column resolved to its concrete array type once per batch.
enum Col<'a> {
    Null,
    Bool(&'a BooleanArray),
    I8(&'a PrimitiveArray<Int8Type>),
    I16(&'a PrimitiveArray<Int16Type>),
    I32(&'a PrimitiveArray<Int32Type>),
    I64(&'a PrimitiveArray<Int64Type>),
    U8(&'a PrimitiveArray<UInt8Type>),
    U16(&'a PrimitiveArray<UInt16Type>),
    U32(&'a PrimitiveArray<UInt32Type>),
    U64(&'a PrimitiveArray<UInt64Type>),
    F32(&'a Float32Array),
    F64(&'a Float64Array),
    Utf8(&'a arrow::array::StringArray),
    LargeUtf8(&'a arrow::array::LargeStringArray),
    Utf8View(&'a arrow::array::StringViewArray),
    /// Timestamp values with the divisor to milliseconds (or multiplier for seconds, negative).
    Ts(&'a [i64], &'a dyn Array, i64),
    Date32(&'a PrimitiveArray<Date32Type>),
    Date64(&'a PrimitiveArray<Date64Type>),
    /// Lists, structs, maps, binary and everything else: generic recursive rendering.
    Other(&'a dyn Array),
}

impl<'a> Col<'a> {
    fn new(a: &'a dyn Array) -> Col<'a> {
        match a.data_type() {
            DataType::Null => Col::Null,
            DataType::Boolean => Col::Bool(a.as_boolean()),
            DataType::Int8 => Col::I8(a.as_primitive()),
            DataType::Int16 => Col::I16(a.as_primitive()),
            DataType::Int32 => Col::I32(a.as_primitive()),
            DataType::Int64 => Col::I64(a.as_primitive()),
            DataType::UInt8 => Col::U8(a.as_primitive()),
            DataType::UInt16 => Col::U16(a.as_primitive()),
            DataType::UInt32 => Col::U32(a.as_primitive()),
            DataType::UInt64 => Col::U64(a.as_primitive()),
            DataType::Float32 => Col::F32(a.as_primitive()),
            DataType::Float64 => Col::F64(a.as_primitive()),
            DataType::Utf8 => Col::Utf8(a.as_string()),
            DataType::LargeUtf8 => Col::LargeUtf8(a.as_string()),
            DataType::Utf8View => Col::Utf8View(a.as_string_view()),
            DataType::Timestamp(unit, _) => {
                let (values, factor): (&[i64], i64) = match unit {
                    TimeUnit::Second => (a.as_primitive::<TimestampSecondType>().values(), -1000),
                    TimeUnit::Millisecond => {
                        (a.as_primitive::<TimestampMillisecondType>().values(), 1)
                    }
                    TimeUnit::Microsecond => {
                        (a.as_primitive::<TimestampMicrosecondType>().values(), 1000)
                    }
                    TimeUnit::Nanosecond => (
                        a.as_primitive::<TimestampNanosecondType>().values(),
                        1_000_000,
                    ),
                };
                Col::Ts(values, a, factor)
            }
            DataType::Date32 => Col::Date32(a.as_primitive()),
            DataType::Date64 => Col::Date64(a.as_primitive()),
            _ => Col::Other(a),
        }
    }

    fn is_null(&self, row: usize) -> bool {
        match self {
            Col::Null => true,
            Col::Bool(a) => a.is_null(row),
            Col::I8(a) => a.is_null(row),
            Col::I16(a) => a.is_null(row),
            Col::I32(a) => a.is_null(row),
            Col::I64(a) => a.is_null(row),
            Col::U8(a) => a.is_null(row),
            Col::U16(a) => a.is_null(row),
            Col::U32(a) => a.is_null(row),
            Col::U64(a) => a.is_null(row),
            Col::F32(a) => a.is_null(row),
            Col::F64(a) => a.is_null(row),
            Col::Utf8(a) => a.is_null(row),
            Col::LargeUtf8(a) => a.is_null(row),
            Col::Utf8View(a) => a.is_null(row),
            Col::Ts(_, a, _) => a.is_null(row),
            Col::Date32(a) => a.is_null(row),
            Col::Date64(a) => a.is_null(row),
            Col::Other(a) => a.is_null(row),
        }
    }

    /// Writes the value as JSON.
    fn write_json(
        &self,
        row: usize,
        ctx: &RenderCtx,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        text: &mut String,
    ) -> Result<(), ArrowError> {
        if self.is_null(row) {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        match self {
            Col::Null => out.extend_from_slice(b"null"),
            Col::Bool(a) => out.extend_from_slice(if a.value(row) { b"true" } else { b"false" }),
            Col::I8(a) => push_i64(out, i64::from(a.value(row))),
            Col::I16(a) => push_i64(out, i64::from(a.value(row))),
            Col::I32(a) => push_i64(out, i64::from(a.value(row))),
            Col::I64(a) => push_i64(out, a.value(row)),
            Col::U8(a) => push_u64(out, u64::from(a.value(row))),
            Col::U16(a) => push_u64(out, u64::from(a.value(row))),
            Col::U32(a) => push_u64(out, u64::from(a.value(row))),
            Col::U64(a) => push_u64(out, a.value(row)),
            Col::F32(a) => write_json_f32(out, a.value(row)),
            Col::F64(a) => write_json_f64(out, a.value(row)),
            Col::Utf8(a) => write_json_string(out, a.value(row)),
            Col::LargeUtf8(a) => write_json_string(out, a.value(row)),
            Col::Utf8View(a) => write_json_string(out, a.value(row)),
            Col::Ts(..) | Col::Date32(_) | Col::Date64(_) => {
                out.push(b'"');
                text.clear();
                self.push_time_text(row, ctx, text);
                out.extend_from_slice(text.as_bytes());
                out.push(b'"');
            }
            Col::Other(a) => {
                if is_list(a.data_type()) && ctx.stringify_arrays {
                    scratch.clear();
                    write_json_any(*a, row, scratch)?;
                    let s = String::from_utf8_lossy(scratch);
                    write_json_string(out, &s);
                } else {
                    write_json_any(*a, row, out)?;
                }
            }
        }
        Ok(())
    }

    /// Appends the ISO text of a TIMESTAMP or DATE value.
    fn push_time_text(&self, row: usize, ctx: &RenderCtx, text: &mut String) {
        match self {
            Col::Ts(values, _, factor) => {
                let v = values[row];
                let ms = if *factor < 0 {
                    v.saturating_mul(-factor)
                } else {
                    v.div_euclid(*factor)
                };
                push_iso_millis(text, ms, &ctx.tz);
            }
            Col::Date32(a) => push_date(text, i64::from(a.value(row)), &ctx.tz),
            Col::Date64(a) => push_date(text, a.value(row).div_euclid(86_400_000), &ctx.tz),
            _ => {}
        }
    }

    /// Writes the value as CSV text (`Object.toString()` of Druid's value): empty for null.
    fn write_text(
        &self,
        row: usize,
        ctx: &RenderCtx,
        out: &mut Vec<u8>,
        text: &mut String,
    ) -> Result<(), ArrowError> {
        if self.is_null(row) {
            return Ok(());
        }
        match self {
            Col::F32(a) => write_java_float(out, a.value(row)),
            Col::F64(a) => write_java_double(out, a.value(row)),
            Col::Utf8(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Col::LargeUtf8(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Col::Utf8View(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Col::Ts(..) | Col::Date32(_) | Col::Date64(_) => {
                text.clear();
                self.push_time_text(row, ctx, text);
                out.extend_from_slice(text.as_bytes());
            }
            Col::Other(a) => {
                if is_list(a.data_type()) && !ctx.stringify_arrays {
                    write_java_list(*a, row, out)?;
                } else if let DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
                | DataType::FixedSizeBinary(_) = a.data_type()
                {
                    // Base64 text, without the JSON quotes.
                    let mut tmp = Vec::new();
                    write_json_any(*a, row, &mut tmp)?;
                    out.extend_from_slice(tmp.get(1..tmp.len().saturating_sub(1)).unwrap_or(&[]));
                } else {
                    write_json_any(*a, row, out)?;
                }
            }
            _ => {
                let mut scratch = Vec::new();
                self.write_json(row, ctx, out, &mut scratch, text)?;
            }
        }
        Ok(())
    }
}

/// Appends the ISO text of local midnight of `days` since the epoch in `tz`, as Druid prints
/// DATE values (`Calcites.calciteDateToJoda`).
fn push_date(text: &mut String, days: i64, tz: &Zone) {
    let ms = days.saturating_mul(86_400_000);
    let utc = if tz.is_utc() {
        ms
    } else {
        tz.local_to_utc(ms).unwrap_or(ms)
    };
    push_iso_millis(text, utc, tz);
}

fn is_list(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
    )
}

/// The elements of list-like `a` at `row`, as a sliced array.
fn list_values(a: &dyn Array, row: usize) -> Option<ArrayRef> {
    fn generic<O: OffsetSizeTrait>(l: &GenericListArray<O>, row: usize) -> ArrayRef {
        l.value(row)
    }
    match a.data_type() {
        DataType::List(_) => Some(generic(a.as_list::<i32>(), row)),
        DataType::LargeList(_) => Some(generic(a.as_list::<i64>(), row)),
        DataType::FixedSizeList(..) => Some(a.as_fixed_size_list().value(row)),
        DataType::ListView(_) => Some(a.as_list_view::<i32>().value(row)),
        DataType::LargeListView(_) => Some(a.as_list_view::<i64>().value(row)),
        _ => None,
    }
}

/// Writes a multi-value string row of list-like `a`: as JSON (`json`) or as CSV text. One
/// value is the plain string, null or no value is null (empty in CSV), several values are the
/// JSON text of the list (as a JSON string in JSON formats), as Druid's `SqlResults.coerce`.
fn write_multi_value(
    a: &dyn Array,
    row: usize,
    json: bool,
    out: &mut Vec<u8>,
) -> Result<(), ArrowError> {
    let values = match (a.is_null(row), list_values(a, row)) {
        (false, Some(v)) => normalize(&v)?,
        _ => {
            if json {
                out.extend_from_slice(b"null");
            }
            return Ok(());
        }
    };
    let element = |i: usize, buf: &mut Vec<u8>| -> Result<Option<String>, ArrowError> {
        if values.is_null(i) {
            return Ok(None);
        }
        if let Some(s) = string_value(values.as_ref(), i) {
            return Ok(Some(s.to_string()));
        }
        buf.clear();
        write_json_any(values.as_ref(), i, buf)?;
        Ok(Some(String::from_utf8_lossy(buf).into_owned()))
    };
    let mut buf = Vec::new();
    match values.len() {
        0 => {
            if json {
                out.extend_from_slice(b"null");
            }
        }
        1 => match element(0, &mut buf)? {
            Some(s) if json => write_json_string(out, &s),
            Some(s) => out.extend_from_slice(s.as_bytes()),
            None if json => out.extend_from_slice(b"null"),
            None => {}
        },
        n => {
            let mut text = Vec::with_capacity(n * 8);
            text.push(b'[');
            for i in 0..n {
                if i > 0 {
                    text.push(b',');
                }
                match element(i, &mut buf)? {
                    Some(s) => write_json_string(&mut text, &s),
                    None => text.extend_from_slice(b"null"),
                }
            }
            text.push(b']');
            if json {
                write_json_string(out, &String::from_utf8_lossy(&text));
            } else {
                out.extend_from_slice(&text);
            }
        }
    }
    Ok(())
}

/// Writes `[a, b]` as Java's `List.toString` (CSV with `sqlStringifyArrays` off).
fn write_java_list(a: &dyn Array, row: usize, out: &mut Vec<u8>) -> Result<(), ArrowError> {
    let Some(values) = list_values(a, row) else {
        return write_json_any(a, row, out);
    };
    let values = normalize(&values)?;
    out.push(b'[');
    for i in 0..values.len() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        if values.is_null(i) {
            out.extend_from_slice(b"null");
        } else if let Some(s) = string_value(values.as_ref(), i) {
            out.extend_from_slice(s.as_bytes());
        } else if is_list(values.data_type()) {
            write_java_list(values.as_ref(), i, out)?;
        } else {
            write_json_any(values.as_ref(), i, out)?;
        }
    }
    out.push(b']');
    Ok(())
}

fn string_value(a: &dyn Array, i: usize) -> Option<&str> {
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Some(a.as_string_view().value(i)),
        _ => None,
    }
}

/// Appends the JSON of value `row` of `a`, for any Arrow type (nested values: lists as JSON
/// arrays, structs and maps as objects, timestamps and dates as epoch milliseconds (Druid
/// arrays hold LONGs), binary as base64 strings, other types as their display text).
pub fn write_json_any(a: &dyn Array, row: usize, out: &mut Vec<u8>) -> Result<(), ArrowError> {
    if a.is_null(row) {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    match a.data_type() {
        DataType::Null => out.extend_from_slice(b"null"),
        DataType::Boolean => out.extend_from_slice(if a.as_boolean().value(row) {
            b"true"
        } else {
            b"false"
        }),
        DataType::Int8 => push_i64(out, i64::from(a.as_primitive::<Int8Type>().value(row))),
        DataType::Int16 => push_i64(out, i64::from(a.as_primitive::<Int16Type>().value(row))),
        DataType::Int32 => push_i64(out, i64::from(a.as_primitive::<Int32Type>().value(row))),
        DataType::Int64 => push_i64(out, a.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => push_u64(out, u64::from(a.as_primitive::<UInt8Type>().value(row))),
        DataType::UInt16 => push_u64(out, u64::from(a.as_primitive::<UInt16Type>().value(row))),
        DataType::UInt32 => push_u64(out, u64::from(a.as_primitive::<UInt32Type>().value(row))),
        DataType::UInt64 => push_u64(out, a.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => write_json_f32(
            out,
            a.as_primitive::<arrow::datatypes::Float32Type>().value(row),
        ),
        DataType::Float64 => write_json_f64(
            out,
            a.as_primitive::<arrow::datatypes::Float64Type>().value(row),
        ),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            write_json_string(out, string_value(a, row).unwrap_or_default())
        }
        DataType::Timestamp(unit, _) => {
            let (v, factor) = match unit {
                TimeUnit::Second => (a.as_primitive::<TimestampSecondType>().value(row), -1000),
                TimeUnit::Millisecond => {
                    (a.as_primitive::<TimestampMillisecondType>().value(row), 1)
                }
                TimeUnit::Microsecond => (
                    a.as_primitive::<TimestampMicrosecondType>().value(row),
                    1000,
                ),
                TimeUnit::Nanosecond => (
                    a.as_primitive::<TimestampNanosecondType>().value(row),
                    1_000_000,
                ),
            };
            push_i64(
                out,
                if factor < 0 {
                    v.saturating_mul(-factor)
                } else {
                    v.div_euclid(factor)
                },
            );
        }
        DataType::Date32 => push_i64(
            out,
            i64::from(a.as_primitive::<Date32Type>().value(row)).saturating_mul(86_400_000),
        ),
        DataType::Date64 => push_i64(out, a.as_primitive::<Date64Type>().value(row)),
        DataType::Duration(unit) => {
            let v = match unit {
                TimeUnit::Second => a.as_primitive::<DurationSecondType>().value(row),
                TimeUnit::Millisecond => a.as_primitive::<DurationMillisecondType>().value(row),
                TimeUnit::Microsecond => a.as_primitive::<DurationMicrosecondType>().value(row),
                TimeUnit::Nanosecond => a.as_primitive::<DurationNanosecondType>().value(row),
            };
            push_i64(out, v);
        }
        DataType::Binary => binary_json(out, a.as_binary::<i32>().value(row)),
        DataType::LargeBinary => binary_json(out, a.as_binary::<i64>().value(row)),
        DataType::BinaryView => binary_json(out, a.as_binary_view().value(row)),
        DataType::FixedSizeBinary(_) => binary_json(out, a.as_fixed_size_binary().value(row)),
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(..)
        | DataType::ListView(_)
        | DataType::LargeListView(_) => {
            let values = list_values(a, row)
                .ok_or_else(|| ArrowError::InvalidArgumentError("not a list".into()))?;
            let values = normalize(&values)?;
            let raw = is_json_list(a.data_type()) && string_like(values.data_type());
            out.push(b'[');
            for i in 0..values.len() {
                if i > 0 {
                    out.push(b',');
                }
                if raw {
                    write_raw_json(values.as_ref(), i, out);
                } else {
                    write_json_any(values.as_ref(), i, out)?;
                }
            }
            out.push(b']');
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            out.push(b'{');
            for (i, (f, c)) in fields.iter().zip(s.columns()).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_string(out, f.name());
                out.push(b':');
                let c = normalize(c)?;
                write_json_any(c.as_ref(), row, out)?;
            }
            out.push(b'}');
        }
        DataType::Map(..) => {
            let m = a.as_map();
            let entries = m.value(row);
            let keys = normalize(entries.column(0))?;
            let values = normalize(entries.column(1))?;
            out.push(b'{');
            for i in 0..entries.len() {
                if i > 0 {
                    out.push(b',');
                }
                match string_value(keys.as_ref(), i) {
                    Some(k) => write_json_string(out, k),
                    None => {
                        let mut k = Vec::new();
                        write_json_any(keys.as_ref(), i, &mut k)?;
                        write_json_string(out, &String::from_utf8_lossy(&k));
                    }
                }
                out.push(b':');
                write_json_any(values.as_ref(), i, out)?;
            }
            out.push(b'}');
        }
        DataType::Dictionary(..)
        | DataType::RunEndEncoded(..)
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..)
        | DataType::Float16 => {
            let single = a.slice(row, 1);
            let n = normalize(&single)?;
            write_json_any(n.as_ref(), 0, out)?;
        }
        _ => {
            let fmt = arrow::util::display::ArrayFormatter::try_new(a, &Default::default())?;
            write_json_string(out, &fmt.value(row).to_string());
        }
    }
    Ok(())
}

fn binary_json(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'"');
    base64(out, data);
    out.push(b'"');
}

/// Appends the JSON of value `row` of `array` as the `object`/`array` formats render it
/// (TIMESTAMP/DATE as ISO strings in `tz`, arrays as JSON arrays, i.e. without
/// `sqlStringifyArrays`). Useful for rendering single values elsewhere (e.g. statement results).
///
/// # Errors
/// When the array cannot be converted.
pub fn render_value_json(
    array: &ArrayRef,
    row: usize,
    tz: &Zone,
    out: &mut Vec<u8>,
) -> Result<(), ArrowError> {
    let normalized = normalize(array)?;
    let col = Col::new(normalized.as_ref());
    let ctx = RenderCtx {
        tz: *tz,
        stringify_arrays: false,
    };
    col.write_json(row, &ctx, out, &mut Vec::new(), &mut String::new())
}

/// Renders all rows of `batches` in one go (start, batches, finish) into a new buffer.
///
/// # Errors
/// As [`ResultWriter::write_batch`].
pub fn render_all(
    writer: &mut ResultWriter,
    batches: &[RecordBatch],
) -> Result<Vec<u8>, ArrowError> {
    let mut out = Vec::new();
    writer.start(&mut out);
    for b in batches {
        writer.write_batch(b, &mut out)?;
    }
    writer.finish(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Date32Array, Int64Array, ListBuilder, StringArray, StringBuilder, StructArray,
        TimestampMillisecondArray, TimestampNanosecondArray,
    };
    use arrow::datatypes::{Field, Fields};
    use dolmen_common::time::parse_time_zone;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "__time",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new("channel", DataType::Utf8, true),
            Field::new("added", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampMillisecondArray::from(vec![
                    1_442_018_818_771,
                    1_442_018_820_000,
                ])),
                Arc::new(StringArray::from(vec![Some("#en.wiki"), None])),
                Arc::new(Int64Array::from(vec![Some(36), None])),
            ],
        )
        .unwrap()
    }

    fn render(format: ResultFormat, header: bool, types: bool, sql_types: bool) -> String {
        let b = batch();
        let mut w = ResultWriter::new(
            format,
            column_infos(&b.schema()),
            header,
            types,
            sql_types,
            Zone::Utc,
        );
        String::from_utf8(render_all(&mut w, &[b]).unwrap()).unwrap()
    }

    const ROW1_OBJ: &str =
        r##"{"__time":"2015-09-12T00:46:58.771Z","channel":"#en.wiki","added":36}"##;
    const ROW2_OBJ: &str = r##"{"__time":"2015-09-12T00:47:00.000Z","channel":null,"added":null}"##;
    const ROW1_ARR: &str = r##"["2015-09-12T00:46:58.771Z","#en.wiki",36]"##;
    const ROW2_ARR: &str = r##"["2015-09-12T00:47:00.000Z",null,null]"##;
    const NAMES: &str = r#"["__time","channel","added"]"#;
    const TYPES: &str = r#"["LONG","STRING","LONG"]"#;
    const SQL_TYPES: &str = r#"["TIMESTAMP","VARCHAR","BIGINT"]"#;

    #[test]
    fn object_format_every_header_combination() {
        let rows = format!("{ROW1_OBJ},{ROW2_OBJ}");
        assert_eq!(
            render(ResultFormat::Object, false, false, false),
            format!("[{rows}]\n")
        );
        assert_eq!(
            render(ResultFormat::Object, true, false, false),
            format!("[{{\"__time\":null,\"channel\":null,\"added\":null}},{rows}]\n")
        );
        assert_eq!(
            render(ResultFormat::Object, true, true, false),
            format!(
                "[{{\"__time\":{{\"type\":\"LONG\"}},\"channel\":{{\"type\":\"STRING\"}},\"added\":{{\"type\":\"LONG\"}}}},{rows}]\n"
            )
        );
        assert_eq!(
            render(ResultFormat::Object, true, true, true),
            format!(
                "[{{\"__time\":{{\"type\":\"LONG\",\"sqlType\":\"TIMESTAMP\"}},\"channel\":{{\"type\":\"STRING\",\"sqlType\":\"VARCHAR\"}},\"added\":{{\"type\":\"LONG\",\"sqlType\":\"BIGINT\"}}}},{rows}]\n"
            )
        );
        assert_eq!(
            render(ResultFormat::Object, true, false, true),
            format!(
                "[{{\"__time\":{{\"sqlType\":\"TIMESTAMP\"}},\"channel\":{{\"sqlType\":\"VARCHAR\"}},\"added\":{{\"sqlType\":\"BIGINT\"}}}},{rows}]\n"
            )
        );
        // Type flags without header are ignored (the API rejects them earlier).
        assert_eq!(
            render(ResultFormat::Object, false, true, true),
            format!("[{rows}]\n")
        );
    }

    #[test]
    fn array_format_every_header_combination() {
        let rows = format!("{ROW1_ARR},{ROW2_ARR}");
        assert_eq!(
            render(ResultFormat::Array, false, false, false),
            format!("[{rows}]\n")
        );
        assert_eq!(
            render(ResultFormat::Array, true, false, false),
            format!("[{NAMES},{rows}]\n")
        );
        assert_eq!(
            render(ResultFormat::Array, true, true, false),
            format!("[{NAMES},{TYPES},{rows}]\n")
        );
        assert_eq!(
            render(ResultFormat::Array, true, true, true),
            format!("[{NAMES},{TYPES},{SQL_TYPES},{rows}]\n")
        );
        assert_eq!(
            render(ResultFormat::Array, true, false, true),
            format!("[{NAMES},{SQL_TYPES},{rows}]\n")
        );
    }

    #[test]
    fn lines_formats_every_header_combination() {
        assert_eq!(
            render(ResultFormat::ObjectLines, false, false, false),
            format!("{ROW1_OBJ}\n{ROW2_OBJ}\n\n")
        );
        assert_eq!(
            render(ResultFormat::ObjectLines, true, false, false),
            format!(
                "{{\"__time\":null,\"channel\":null,\"added\":null}}\n{ROW1_OBJ}\n{ROW2_OBJ}\n\n"
            )
        );
        assert_eq!(
            render(ResultFormat::ObjectLines, true, true, true),
            format!(
                "{{\"__time\":{{\"type\":\"LONG\",\"sqlType\":\"TIMESTAMP\"}},\"channel\":{{\"type\":\"STRING\",\"sqlType\":\"VARCHAR\"}},\"added\":{{\"type\":\"LONG\",\"sqlType\":\"BIGINT\"}}}}\n{ROW1_OBJ}\n{ROW2_OBJ}\n\n"
            )
        );
        assert_eq!(
            render(ResultFormat::ObjectLines, true, true, false),
            format!(
                "{{\"__time\":{{\"type\":\"LONG\"}},\"channel\":{{\"type\":\"STRING\"}},\"added\":{{\"type\":\"LONG\"}}}}\n{ROW1_OBJ}\n{ROW2_OBJ}\n\n"
            )
        );
        assert_eq!(
            render(ResultFormat::ObjectLines, true, false, true),
            format!(
                "{{\"__time\":{{\"sqlType\":\"TIMESTAMP\"}},\"channel\":{{\"sqlType\":\"VARCHAR\"}},\"added\":{{\"sqlType\":\"BIGINT\"}}}}\n{ROW1_OBJ}\n{ROW2_OBJ}\n\n"
            )
        );
        assert_eq!(
            render(ResultFormat::ArrayLines, false, false, false),
            format!("{ROW1_ARR}\n{ROW2_ARR}\n\n")
        );
        assert_eq!(
            render(ResultFormat::ArrayLines, true, false, false),
            format!("{NAMES}\n{ROW1_ARR}\n{ROW2_ARR}\n\n")
        );
        assert_eq!(
            render(ResultFormat::ArrayLines, true, true, false),
            format!("{NAMES}\n{TYPES}\n{ROW1_ARR}\n{ROW2_ARR}\n\n")
        );
        assert_eq!(
            render(ResultFormat::ArrayLines, true, true, true),
            format!("{NAMES}\n{TYPES}\n{SQL_TYPES}\n{ROW1_ARR}\n{ROW2_ARR}\n\n")
        );
        assert_eq!(
            render(ResultFormat::ArrayLines, true, false, true),
            format!("{NAMES}\n{SQL_TYPES}\n{ROW1_ARR}\n{ROW2_ARR}\n\n")
        );
    }

    #[test]
    fn csv_every_header_combination() {
        let rows = "2015-09-12T00:46:58.771Z,#en.wiki,36\n2015-09-12T00:47:00.000Z,,\n";
        assert_eq!(
            render(ResultFormat::Csv, false, false, false),
            format!("{rows}\n")
        );
        assert_eq!(
            render(ResultFormat::Csv, true, false, false),
            format!("__time,channel,added\n{rows}\n")
        );
        assert_eq!(
            render(ResultFormat::Csv, true, true, false),
            format!("__time,channel,added\nLONG,STRING,LONG\n{rows}\n")
        );
        assert_eq!(
            render(ResultFormat::Csv, true, true, true),
            format!("__time,channel,added\nLONG,STRING,LONG\nTIMESTAMP,VARCHAR,BIGINT\n{rows}\n")
        );
        assert_eq!(
            render(ResultFormat::Csv, true, false, true),
            format!("__time,channel,added\nTIMESTAMP,VARCHAR,BIGINT\n{rows}\n")
        );
    }

    #[test]
    fn empty_results() {
        let cols = vec![ColumnInfo::from_arrow("x", &DataType::Int64)];
        let expect = [
            (ResultFormat::Object, "[]\n"),
            (ResultFormat::Array, "[]\n"),
            (ResultFormat::ObjectLines, "\n\n"),
            (ResultFormat::ArrayLines, "\n\n"),
            (ResultFormat::Csv, "\n"),
        ];
        for (f, want) in expect {
            let mut w = ResultWriter::new(f, cols.clone(), false, false, false, Zone::Utc);
            assert_eq!(
                String::from_utf8(render_all(&mut w, &[]).unwrap()).unwrap(),
                want,
                "{f}"
            );
        }
        let mut w = ResultWriter::new(ResultFormat::Object, cols, true, false, false, Zone::Utc);
        assert_eq!(
            String::from_utf8(render_all(&mut w, &[]).unwrap()).unwrap(),
            "[{\"x\":null}]\n"
        );
    }

    #[test]
    fn csv_quoting() {
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let b = RecordBatch::try_new(
            schema,
            vec![Arc::new(StringArray::from(vec![
                Some("a,b"),
                Some("say \"hi\""),
                Some("line\nbreak"),
                Some("cr\r"),
                Some(""),
                None,
                Some("plain"),
            ]))],
        )
        .unwrap();
        let mut w = ResultWriter::new(
            ResultFormat::Csv,
            column_infos(&b.schema()),
            true,
            false,
            false,
            Zone::Utc,
        );
        let got = String::from_utf8(render_all(&mut w, &[b]).unwrap()).unwrap();
        assert_eq!(
            got,
            "s\n\"a,b\"\n\"say \"\"hi\"\"\"\n\"line\nbreak\"\n\"cr\r\"\n\"\"\n\"\"\nplain\n\n"
        );
        // Two columns: empty fields are not quoted.
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("b,c", DataType::Utf8, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![None::<&str>])),
                Arc::new(StringArray::from(vec![Some("")])),
            ],
        )
        .unwrap();
        let mut w = ResultWriter::new(
            ResultFormat::Csv,
            column_infos(&b.schema()),
            true,
            false,
            false,
            Zone::Utc,
        );
        assert_eq!(
            String::from_utf8(render_all(&mut w, &[b]).unwrap()).unwrap(),
            "a,\"b,c\"\n,\n\n"
        );
    }

    #[test]
    fn value_rendering() {
        let la = parse_time_zone("America/Los_Angeles").unwrap();
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("a");
        list.values().append_null();
        list.values().append_value("b\"c");
        list.append(true);
        list.append(false);
        let list = list.finish();
        let structs = StructArray::from(vec![
            (
                Arc::new(Field::new("k", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec!["v", "w"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("n", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
            ),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
            Field::new("d", DataType::Date32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("g", DataType::Float32, true),
            Field::new("b", DataType::Boolean, true),
            Field::new("l", list.data_type().clone(), true),
            Field::new(
                "s",
                DataType::Struct(Fields::from(vec![
                    Field::new("k", DataType::Utf8, true),
                    Field::new("n", DataType::Int64, true),
                ])),
                true,
            ),
            Field::new("e", DataType::Utf8, true),
        ]));
        let b = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(TimestampNanosecondArray::from(vec![
                    1_442_018_818_771_000_000,
                    0,
                ])),
                Arc::new(Date32Array::from(vec![16_690, 0])),
                Arc::new(Float64Array::from(vec![1.0e7, f64::NAN])),
                Arc::new(Float32Array::from(vec![0.5, 1.0e-4])),
                Arc::new(BooleanArray::from(vec![true, false])),
                Arc::new(list),
                Arc::new(structs),
                Arc::new(StringArray::from(vec!["tab\tctl\u{1}é", "x"])),
            ],
        )
        .unwrap();
        let cols = column_infos(&schema);
        assert_eq!(cols[5].native_type, "ARRAY<STRING>");
        assert_eq!(cols[5].sql_type, "ARRAY");
        assert_eq!(cols[6].native_type, "COMPLEX<json>");
        assert_eq!(cols[1].sql_type, "DATE");
        assert_eq!(cols[3].native_type, "FLOAT");

        let mut w = ResultWriter::new(ResultFormat::Array, cols.clone(), false, false, false, la);
        let got = String::from_utf8(render_all(&mut w, std::slice::from_ref(&b)).unwrap()).unwrap();
        assert_eq!(
            got,
            "[[\"2015-09-11T17:46:58.771-07:00\",\"2015-09-12T00:00:00.000-07:00\",1.0E7,0.5,true,\"[\\\"a\\\",null,\\\"b\\\\\\\"c\\\"]\",{\"k\":\"v\",\"n\":1},\"tab\\tctl\\u0001é\"],\
             [\"1969-12-31T16:00:00.000-08:00\",\"1970-01-01T00:00:00.000-08:00\",\"NaN\",1.0E-4,false,null,{\"k\":\"w\",\"n\":2},\"x\"]]\n"
        );
        let mut w = ResultWriter::new(
            ResultFormat::Array,
            cols.clone(),
            false,
            false,
            false,
            Zone::Utc,
        )
        .with_stringify_arrays(false);
        let got = String::from_utf8(render_all(&mut w, std::slice::from_ref(&b)).unwrap()).unwrap();
        assert!(got.starts_with("[[\"2015-09-12T00:46:58.771Z\",\"2015-09-12T00:00:00.000Z\",1.0E7,0.5,true,[\"a\",null,\"b\\\"c\"],"), "{got}");
        let mut w = ResultWriter::new(ResultFormat::Csv, cols, false, false, false, Zone::Utc);
        let got = String::from_utf8(render_all(&mut w, &[b]).unwrap()).unwrap();
        assert_eq!(
            got,
            "2015-09-12T00:46:58.771Z,2015-09-12T00:00:00.000Z,1.0E7,0.5,true,\"[\"\"a\"\",null,\"\"b\\\"\"c\"\"]\",\"{\"\"k\"\":\"\"v\"\",\"\"n\"\":1}\",tab\tctl\u{1}é\n\
             1970-01-01T00:00:00.000Z,1970-01-01T00:00:00.000Z,NaN,1.0E-4,false,,\"{\"\"k\"\":\"\"w\"\",\"\"n\"\":2}\",x\n\n"
        );
    }

    #[test]
    fn result_format_names() {
        assert_eq!(
            "objectLines".parse::<ResultFormat>().unwrap(),
            ResultFormat::ObjectLines
        );
        assert_eq!(
            "OBJECT".parse::<ResultFormat>().unwrap(),
            ResultFormat::Object
        );
        assert_eq!(
            "arraylines".parse::<ResultFormat>().unwrap(),
            ResultFormat::ArrayLines
        );
        assert!("xml".parse::<ResultFormat>().is_err());
        assert_eq!(
            serde_json::to_string(&ResultFormat::ArrayLines).unwrap(),
            "\"arrayLines\""
        );
        assert_eq!(
            serde_json::from_str::<ResultFormat>("\"CSV\"").unwrap(),
            ResultFormat::Csv
        );
        assert_eq!(ResultFormat::default(), ResultFormat::Object);
        assert_eq!(ResultFormat::Csv.content_type(), "text/csv");
        assert_eq!(ResultFormat::ObjectLines.content_type(), "text/plain");
        assert_eq!(ResultFormat::Array.content_type(), "application/json");
    }

    #[test]
    fn type_mapping() {
        let t = |dt: DataType| {
            let (n, s) = druid_types(&dt);
            format!("{n}/{s}")
        };
        assert_eq!(t(DataType::Utf8View), "STRING/VARCHAR");
        assert_eq!(t(DataType::Int32), "LONG/INTEGER");
        assert_eq!(t(DataType::Int16), "LONG/SMALLINT");
        assert_eq!(t(DataType::Int8), "LONG/TINYINT");
        assert_eq!(t(DataType::Decimal128(10, 2)), "DOUBLE/DECIMAL");
        assert_eq!(t(DataType::Boolean), "LONG/BOOLEAN");
        assert_eq!(
            t(DataType::Timestamp(
                TimeUnit::Nanosecond,
                Some("+00:00".into())
            )),
            "LONG/TIMESTAMP"
        );
        assert_eq!(
            t(DataType::new_list(DataType::Int64, true)),
            "ARRAY<LONG>/ARRAY"
        );
        assert_eq!(
            t(DataType::new_list(DataType::Float64, true)),
            "ARRAY<DOUBLE>/ARRAY"
        );
        assert_eq!(
            t(DataType::Dictionary(
                Box::new(DataType::Int32),
                Box::new(DataType::Utf8)
            )),
            "STRING/VARCHAR"
        );
        assert_eq!(t(DataType::Binary), "COMPLEX/OTHER");
    }

    #[test]
    fn mismatched_batch_is_an_error() {
        let b = batch();
        let mut w = ResultWriter::new(ResultFormat::Object, vec![], false, false, false, Zone::Utc);
        assert!(w.write_batch(&b, &mut Vec::new()).is_err());
    }

    #[test]
    fn multi_value_strings_render_as_druid_varchar() {
        let mut b = ListBuilder::new(StringBuilder::new());
        b.values().append_value("a");
        b.values().append_value("b\"");
        b.append(true);
        b.values().append_value("only");
        b.append(true);
        b.append(false);
        b.values().append_null();
        b.append(true);
        b.values().append_value("x");
        b.values().append_null();
        b.append(true);
        let tags = b.finish();
        let field = Field::new("tags", tags.data_type().clone(), true).with_metadata(
            [(
                dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
                "true".to_string(),
            )]
            .into_iter()
            .collect(),
        );
        let batch =
            RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![Arc::new(tags)]).unwrap();
        let infos = column_infos(&batch.schema());
        assert_eq!(infos[0].native_type, "STRING");
        assert_eq!(infos[0].sql_type, "VARCHAR");
        assert!(infos[0].multi_value);
        let render = |format: ResultFormat, stringify: bool| {
            let mut w = ResultWriter::new(format, infos.clone(), true, true, true, Zone::Utc)
                .with_stringify_arrays(stringify);
            String::from_utf8(render_all(&mut w, std::slice::from_ref(&batch)).unwrap()).unwrap()
        };
        let want = concat!(
            r#"[{"tags":{"type":"STRING","sqlType":"VARCHAR"}},"#,
            r#"{"tags":"[\"a\",\"b\\\"\"]"},{"tags":"only"},{"tags":null},{"tags":null},"#,
            r#"{"tags":"[\"x\",null]"}]"#,
            "\n"
        );
        assert_eq!(render(ResultFormat::Object, true), want);
        assert_eq!(render(ResultFormat::Object, false), want);
        assert_eq!(
            render(ResultFormat::Csv, true),
            "tags\nSTRING\nVARCHAR\n\"[\"\"a\"\",\"\"b\\\"\"\"\"]\"\nonly\n\"\"\n\"\"\n\"[\"\"x\"\",null]\"\n\n"
        );
        // The same list without the marker is an ARRAY.
        let plain = ColumnInfo::from_arrow("tags", batch.column(0).data_type());
        assert_eq!(plain.native_type, "ARRAY<STRING>");
        assert!(!plain.multi_value);
    }

    #[test]
    fn json_fields_render_as_complex_json() {
        use crate::functions::scalar::json_field;
        let json = StringArray::from(vec![Some(r#"{"a":[1,"x"]}"#), None, Some("3")]);
        // Not JSON: written as a string.
        let not_json = StringArray::from(vec!["a b"]);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![json_field("j")])),
            vec![Arc::new(not_json)],
        )
        .unwrap();
        let mut w = ResultWriter::new(
            ResultFormat::Array,
            column_infos(&batch.schema()),
            false,
            false,
            false,
            Zone::Utc,
        );
        assert_eq!(
            String::from_utf8(render_all(&mut w, &[batch]).unwrap()).unwrap(),
            "[[\"a b\"]]\n"
        );
        let plain = json.clone();
        let mut items =
            ListBuilder::new(StringBuilder::new()).with_field(Arc::new(json_field("item")));
        items.values().append_value(r#"{"b":1}"#);
        items.values().append_value("2");
        items.append(true);
        items.append(false);
        items.append(true);
        let items = items.finish();
        let schema = Schema::new(vec![
            json_field("j"),
            Field::new("s", DataType::Utf8, true),
            Field::new("l", items.data_type().clone(), true),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(json), Arc::new(plain), Arc::new(items)],
        )
        .unwrap();
        let infos = column_infos(&batch.schema());
        let types: Vec<(&str, &str)> = infos
            .iter()
            .map(|c| (c.native_type.as_str(), c.sql_type.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("COMPLEX<json>", "OTHER"),
                ("STRING", "VARCHAR"),
                ("ARRAY<COMPLEX<json>>", "ARRAY")
            ]
        );
        let render = |format: ResultFormat, stringify: bool| {
            let mut w = ResultWriter::new(format, infos.clone(), false, false, false, Zone::Utc)
                .with_stringify_arrays(stringify);
            String::from_utf8(render_all(&mut w, std::slice::from_ref(&batch)).unwrap()).unwrap()
        };
        assert_eq!(
            render(ResultFormat::Array, false),
            concat!(
                r#"[[{"a":[1,"x"]},"{\"a\":[1,\"x\"]}",[{"b":1},2]],"#,
                r#"[null,null,null],"#,
                r#"[3,"3",[]]]"#,
                "\n"
            )
        );
        assert_eq!(
            render(ResultFormat::ObjectLines, true),
            concat!(
                r#"{"j":{"a":[1,"x"]},"s":"{\"a\":[1,\"x\"]}","l":"[{\"b\":1},2]"}"#,
                "\n",
                r#"{"j":null,"s":null,"l":null}"#,
                "\n",
                r#"{"j":3,"s":"3","l":"[]"}"#,
                "\n\n"
            )
        );
        assert_eq!(
            render(ResultFormat::Csv, true),
            concat!(
                "\"{\"\"a\"\":[1,\"\"x\"\"]}\",\"{\"\"a\"\":[1,\"\"x\"\"]}\",\"[{\"\"b\"\":1},2]\"\n",
                ",,\n",
                "3,3,[]\n",
                "\n"
            )
        );
    }
}
