//! `ioConfig.inputFormat`: the spec type and reader dispatch.

use std::io::{self, BufRead, BufReader, Read};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::avro::AvroRows;
use super::delimited::{DelimitedConfig, DelimitedRows, Splitting};
use super::flatten::FlattenSpec;
use super::json::JsonLineRows;
use super::parquet::ParquetRows;
use super::{InputEntity, InputError, InputRow, RowParseError};

/// A streaming row iterator over one entity.
pub type RowReader = Box<dyn Iterator<Item = Result<InputRow, RowParseError>> + Send>;

/// Druid's default multi-value delimiter for CSV/TSV (`Parsers.DEFAULT_LIST_DELIMITER`).
pub const DEFAULT_LIST_DELIMITER: &str = "\u{1}";

/// `ioConfig.inputFormat`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum InputFormat {
    /// Newline-delimited JSON objects.
    Json {
        /// Nested-field extraction (see [`FlattenSpec`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flatten_spec: Option<Value>,
        /// Jackson parser features; accepted and ignored.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feature_spec: Option<Value>,
        /// Whether schema discovery keeps all-null columns (see [`super::is_discoverable`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keep_null_columns: Option<bool>,
        /// Accepted and ignored: batch JSON is always read line by line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assume_newline_delimited: Option<bool>,
        /// Accepted and ignored.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        use_json_node_reader: Option<bool>,
    },
    /// Comma-separated values (RFC 4180 quoting).
    Csv {
        /// Column names, required unless `findColumnsFromHeader`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        columns: Option<Vec<String>>,
        /// Multi-value delimiter inside a field (default `\u0001`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        list_delimiter: Option<String>,
        /// Take column names from the first (non-skipped) row.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        find_columns_from_header: Option<bool>,
        /// Rows to skip before the header/data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skip_header_rows: Option<usize>,
        /// Legacy alias of `findColumnsFromHeader`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        has_header_row: Option<bool>,
        /// Parse numeric-looking values into longs/doubles (Druid 30+).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        try_parse_numbers: Option<bool>,
    },
    /// Delimiter-separated values (no quoting; default delimiter tab).
    Tsv {
        /// Field delimiter (default `\t`; may be several characters).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delimiter: Option<String>,
        /// Column names, required unless `findColumnsFromHeader`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        columns: Option<Vec<String>>,
        /// Multi-value delimiter inside a field (default `\u0001`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        list_delimiter: Option<String>,
        /// Take column names from the first (non-skipped) row.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        find_columns_from_header: Option<bool>,
        /// Rows to skip before the header/data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skip_header_rows: Option<usize>,
        /// Legacy alias of `findColumnsFromHeader`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        has_header_row: Option<bool>,
        /// Parse numeric-looking values into longs/doubles (Druid 30+).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        try_parse_numbers: Option<bool>,
    },
    /// Apache Parquet files.
    Parquet {
        /// Decode binary columns without a string annotation as UTF-8 (else base64).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary_as_string: Option<bool>,
        /// Nested-field extraction (see [`FlattenSpec`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flatten_spec: Option<Value>,
    },
    /// Avro object container files (Druid's `avro_ocf`, see `input/avro.rs` for the type
    /// mapping).
    #[serde(rename = "avro_ocf")]
    AvroOcf {
        /// Nested-field extraction (see [`FlattenSpec`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flatten_spec: Option<Value>,
        /// Reader schema (Avro schema JSON) the records are resolved to; default: each file's
        /// own schema.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        /// Decode `bytes` and `fixed` values as UTF-8 (else base64).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary_as_string: Option<bool>,
        /// Turn union values into `{"<type name>": value}` objects.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extract_unions_by_type: Option<bool>,
    },
}

impl InputFormat {
    /// The Druid type name (`json`, `csv`, `tsv`, `parquet`, `avro_ocf`).
    pub fn type_name(&self) -> &'static str {
        match self {
            InputFormat::Json { .. } => "json",
            InputFormat::Csv { .. } => "csv",
            InputFormat::Tsv { .. } => "tsv",
            InputFormat::Parquet { .. } => "parquet",
            InputFormat::AvroOcf { .. } => "avro_ocf",
        }
    }

    /// `keepNullColumns` (JSON only; default false).
    pub fn keep_null_columns(&self) -> bool {
        matches!(
            self,
            InputFormat::Json {
                keep_null_columns: Some(true),
                ..
            }
        )
    }

    /// Validates the spec (column/header settings, delimiters, flattenSpec, Avro reader
    /// schema).
    ///
    /// # Errors
    /// [`InputError::InvalidSpec`] naming the offending field.
    pub fn validate(&self) -> Result<(), InputError> {
        match self {
            InputFormat::Json { flatten_spec, .. } | InputFormat::Parquet { flatten_spec, .. } => {
                compile_flatten(flatten_spec.as_ref()).map(|_| ())
            }
            InputFormat::AvroOcf {
                flatten_spec,
                schema,
                ..
            } => {
                compile_flatten(flatten_spec.as_ref())?;
                if let Some(s) = schema {
                    super::avro::parse_reader_schema(s)?;
                }
                Ok(())
            }
            InputFormat::Csv { .. } | InputFormat::Tsv { .. } => {
                self.delimited_config().map(|_| ())
            }
        }
    }

    /// Opens a streaming reader over one entity.
    pub fn reader(&self, entity: &InputEntity) -> Result<RowReader, InputError> {
        let name = entity.name();
        let open = || {
            entity.open().map_err(|e| InputError::Io {
                path: name.clone(),
                source: e,
            })
        };
        match self {
            InputFormat::Json { flatten_spec, .. } => {
                let flatten = compile_flatten(flatten_spec.as_ref())?;
                Ok(Box::new(JsonLineRows::new(
                    name.clone(),
                    LineReader::new(open()?),
                    flatten,
                )))
            }
            InputFormat::Csv { .. } | InputFormat::Tsv { .. } => {
                let cfg = self.delimited_config()?;
                Ok(Box::new(DelimitedRows::new(name.clone(), open()?, cfg)))
            }
            InputFormat::Parquet {
                binary_as_string,
                flatten_spec,
            } => {
                let flatten = compile_flatten(flatten_spec.as_ref())?;
                Ok(Box::new(ParquetRows::open(
                    entity,
                    binary_as_string.unwrap_or(false),
                    flatten,
                )?))
            }
            InputFormat::AvroOcf {
                flatten_spec,
                schema,
                binary_as_string,
                extract_unions_by_type,
            } => {
                let flatten = compile_flatten(flatten_spec.as_ref())?;
                let reader_schema = schema
                    .as_ref()
                    .map(super::avro::parse_reader_schema)
                    .transpose()?;
                Ok(Box::new(AvroRows::open(
                    entity,
                    reader_schema,
                    binary_as_string.unwrap_or(false),
                    extract_unions_by_type.unwrap_or(false),
                    flatten,
                )?))
            }
        }
    }

    /// The CSV/TSV settings of this format, validated as the row readers take them.
    pub(super) fn delimited_config(&self) -> Result<DelimitedConfig, InputError> {
        let (kind, delimiter, columns, list_delimiter, find, skip, has_header, numbers) = match self
        {
            InputFormat::Csv {
                columns,
                list_delimiter,
                find_columns_from_header,
                skip_header_rows,
                has_header_row,
                try_parse_numbers,
            } => (
                "csv",
                None,
                columns,
                list_delimiter,
                find_columns_from_header,
                skip_header_rows,
                has_header_row,
                try_parse_numbers,
            ),
            InputFormat::Tsv {
                delimiter,
                columns,
                list_delimiter,
                find_columns_from_header,
                skip_header_rows,
                has_header_row,
                try_parse_numbers,
            } => (
                "tsv",
                Some(delimiter.clone().unwrap_or_else(|| "\t".to_string())),
                columns,
                list_delimiter,
                find_columns_from_header,
                skip_header_rows,
                has_header_row,
                try_parse_numbers,
            ),
            InputFormat::Json { .. }
            | InputFormat::Parquet { .. }
            | InputFormat::AvroOcf { .. } => {
                return Err(InputError::InvalidSpec(format!(
                    "{} is not a delimited input format",
                    self.type_name()
                )));
            }
        };
        let find_header = find.or(*has_header).unwrap_or(false);
        let columns = columns.clone().filter(|c| !c.is_empty());
        if columns.is_none() && !find_header {
            return Err(InputError::InvalidSpec(format!(
                "{kind} inputFormat needs [columns] or [findColumnsFromHeader] = true"
            )));
        }
        if let Some(cols) = &columns {
            check_columns(cols).map_err(|m| {
                InputError::InvalidSpec(format!("{kind} inputFormat [columns]: {m}"))
            })?;
        }
        let list_delimiter = list_delimiter
            .clone()
            .unwrap_or_else(|| DEFAULT_LIST_DELIMITER.to_string());
        let splitting = match delimiter {
            None => Splitting::Csv,
            Some(d) if d.is_empty() => {
                return Err(InputError::InvalidSpec(
                    "tsv inputFormat [delimiter] must not be empty".to_string(),
                ));
            }
            Some(d) => Splitting::Delimiter(d),
        };
        if let Splitting::Delimiter(d) = &splitting
            && *d == list_delimiter
        {
            return Err(InputError::InvalidSpec(format!(
                "tsv inputFormat [delimiter] and [listDelimiter] must differ, both are [{}]",
                d.escape_default()
            )));
        }
        Ok(DelimitedConfig {
            splitting,
            columns: if find_header { None } else { columns },
            list_delimiter,
            skip_rows: skip.unwrap_or(0),
            try_parse_numbers: numbers.unwrap_or(false),
        })
    }
}

/// Rejects empty column lists, empty names and duplicates (Druid: "Duplicate column entries
/// found").
pub(super) fn check_columns(cols: &[String]) -> Result<(), String> {
    if cols.is_empty() {
        return Err("no columns".to_string());
    }
    let mut seen = std::collections::HashSet::new();
    for c in cols {
        if !seen.insert(c.as_str()) {
            return Err(format!("duplicate column [{c}]"));
        }
    }
    Ok(())
}

fn compile_flatten(spec: Option<&Value>) -> Result<Option<FlattenSpec>, InputError> {
    match spec {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let f = FlattenSpec::parse(v)?;
            Ok(if f.is_identity() { None } else { Some(f) })
        }
    }
}

/// Longest line accepted by the line-based readers; longer lines are reported and skipped so
/// hostile input cannot exhaust memory.
pub(super) const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Outcome of [`LineReader::next_line`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// End of input.
    Eof,
    /// A line is in the buffer (without its terminator).
    Ok,
    /// The line exceeded [`MAX_LINE_BYTES`]; it was skipped and the buffer holds its prefix.
    TooLong,
}

/// A buffered line splitter with a length cap, 1-based line numbers and BOM stripping.
pub(super) struct LineReader {
    inner: BufReader<Box<dyn Read + Send>>,
    pub(super) line_no: usize,
    max: usize,
}

impl LineReader {
    pub(super) fn new(r: Box<dyn Read + Send>) -> Self {
        Self::with_limit(r, MAX_LINE_BYTES)
    }

    pub(super) fn with_limit(r: Box<dyn Read + Send>, max: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(256 * 1024, r),
            line_no: 0,
            max,
        }
    }

    /// Reads the next line into `buf` (cleared first), stripping `\n`/`\r\n`.
    pub(super) fn next_line(&mut self, buf: &mut Vec<u8>) -> io::Result<Line> {
        buf.clear();
        let mut too_long = false;
        let mut saw_any = false;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                if !saw_any {
                    return Ok(Line::Eof);
                }
                break;
            }
            saw_any = true;
            let (chunk, used, done) = match avail.iter().position(|b| *b == b'\n') {
                Some(p) => (&avail[..p], p + 1, true),
                None => (avail, avail.len(), false),
            };
            if !too_long {
                if buf.len() + chunk.len() > self.max {
                    too_long = true;
                    let room = self.max.saturating_sub(buf.len());
                    buf.extend_from_slice(&chunk[..room.min(chunk.len())]);
                } else {
                    buf.extend_from_slice(chunk);
                }
            }
            self.inner.consume(used);
            if done {
                break;
            }
        }
        self.line_no += 1;
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        if self.line_no == 1 && buf.starts_with(b"\xEF\xBB\xBF") {
            buf.drain(..3);
        }
        Ok(if too_long { Line::TooLong } else { Line::Ok })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    fn lines(data: &str, max: usize) -> Vec<(Line, String)> {
        let mut r =
            LineReader::with_limit(Box::new(io::Cursor::new(data.as_bytes().to_vec())), max);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let l = r.next_line(&mut buf).unwrap();
            if l == Line::Eof {
                return out;
            }
            out.push((l, String::from_utf8_lossy(&buf).to_string()));
        }
    }

    #[test]
    fn line_reader() {
        assert_eq!(
            lines("\u{feff}a\r\nb\n\nc", 100),
            vec![
                (Line::Ok, "a".into()),
                (Line::Ok, "b".into()),
                (Line::Ok, "".into()),
                (Line::Ok, "c".into())
            ]
        );
        assert_eq!(lines("", 100), vec![]);
        assert_eq!(
            lines("abcdef\nxy\n", 3),
            vec![(Line::TooLong, "abc".into()), (Line::Ok, "xy".into())]
        );
    }

    #[test]
    fn serde_shapes_and_validation() {
        let f: InputFormat = serde_json::from_value(json!({"type": "json"})).unwrap();
        assert_eq!(f.type_name(), "json");
        assert_eq!(serde_json::to_value(&f).unwrap(), json!({"type": "json"}));
        let f: InputFormat = serde_json::from_value(json!({"type": "json", "keepNullColumns": true, "featureSpec": {"ALLOW_COMMENTS": true}})).unwrap();
        assert!(f.keep_null_columns());
        let err = serde_json::from_value::<InputFormat>(json!({"type": "json", "flatenSpec": {}}))
            .unwrap_err();
        assert!(err.to_string().contains("flatenSpec"), "{err}");
        let err =
            serde_json::from_value::<InputFormat>(json!({"type": "avro_stream"})).unwrap_err();
        assert!(err.to_string().contains("avro_stream"), "{err}");
        let f: InputFormat = serde_json::from_value(json!({"type": "avro_ocf"})).unwrap();
        assert_eq!(f.type_name(), "avro_ocf");
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"type": "avro_ocf"})
        );
        let f: InputFormat = serde_json::from_value(
            json!({"type": "csv", "findColumnsFromHeader": true, "skipHeaderRows": 1}),
        )
        .unwrap();
        f.validate().unwrap();
        let f: InputFormat = serde_json::from_value(json!({"type": "csv"})).unwrap();
        assert!(
            f.validate()
                .unwrap_err()
                .to_string()
                .contains("findColumnsFromHeader")
        );
        let f: InputFormat =
            serde_json::from_value(json!({"type": "tsv", "columns": ["a", "a"]})).unwrap();
        assert!(
            f.validate()
                .unwrap_err()
                .to_string()
                .contains("duplicate column [a]")
        );
        let f: InputFormat =
            serde_json::from_value(json!({"type": "tsv", "columns": ["a"], "delimiter": ""}))
                .unwrap();
        assert!(f.validate().is_err());
        let f: InputFormat = serde_json::from_value(json!({"type": "json", "flattenSpec": {"fields": [{"type": "path", "name": "x", "expr": "nope"}]}})).unwrap();
        assert!(f.validate().unwrap_err().to_string().contains("nope"));
        let err = f
            .reader(&InputEntity::Inline(Bytes::from("{}")))
            .err()
            .unwrap();
        assert!(err.to_string().contains("flattenSpec"));
        let f: InputFormat =
            serde_json::from_value(json!({"type": "parquet", "binaryAsString": true})).unwrap();
        f.validate().unwrap();
    }
}
