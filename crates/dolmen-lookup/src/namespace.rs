//! Extraction namespaces of `cachedNamespace` lookups (Druid's `druid-lookups-cached-global`
//! extension, `docs/development/extensions-core/lookups-cached-global.md`;
//! `UriExtractionNamespace`, `StaticMapExtractionNamespace`).
//!
//! - `uri`: entries read from one local file, `{"type": "uri", "uri": "file:/path/file.csv"}`,
//!   or from the newest file (by modification time) in a directory whose name matches a regex,
//!   `{"uriPrefix": "file:/path/dir/", "fileRegex": "renames-[0-9]*\\.csv"}` (default `.*`,
//!   matched against the whole file name; subdirectories are not searched). Exactly one of
//!   `uri` and `uriPrefix` (Druid: "Either uri xor uriPrefix required"); `fileRegex` only with
//!   `uriPrefix`. Only `file:` URIs (`file:/p`, `file:///p`, `file://localhost/p`) are read;
//!   other schemes (`s3:`, `hdfs:`, `http:`) are a 400 naming the field. A name ending in
//!   `.gz` is gunzipped. `pollPeriod` (ISO 8601 period of fixed length, or milliseconds; absent
//!   or zero: read once) re-checks the file: when its modification time or size changed (or
//!   another file became the newest), the entries are read again and replace the old ones
//!   atomically; a failed re-read keeps serving the previous entries. `maxHeapPercentage` is
//!   accepted and ignored.
//! - `namespaceParseSpec` (`format`), one record per line, blank lines skipped, later records
//!   overwriting earlier ones with the same key:
//!   - `csv`: `columns` (at least two; optional with `hasHeaderRow`), `keyColumn` and
//!     `valueColumn` (both or neither; default the first and second column),
//!     `hasHeaderRow` (the header then names the columns), `skipHeaderRows` (skipped before the
//!     header). Quoted fields as RFC 4180.
//!   - `tsv`: as `csv`, split on `delimiter` (default tab, may be several characters), no
//!     quoting; `listDelimiter` is accepted and ignored.
//!   - `customJson`: one JSON object per line, `keyFieldName` and `valueFieldName` required.
//!   - `simpleJson`: one JSON object per line, every field a key and its value the value.
//!
//!   As Druid's `DelegateParser`: a record without its key is an error (the load fails and
//!   says which line), a record without its value (or a null value) is skipped. Non-string
//!   scalars are their JSON text.
//! - `staticMap`: `{"type": "staticMap", "map": {key: value}}`, the entries inline.
//!
//! `jdbc` and `kafka` namespaces are not supported (a 400 naming `extractionNamespace.type`).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::spec::{FieldError, ScalarText, from_object, split_type};

/// Where a `cachedNamespace` lookup's entries come from.
#[derive(Debug, Clone)]
pub enum ExtractionNamespace {
    /// `uri`: a local file.
    Uri(UriNamespace),
    /// `staticMap`: entries given inline.
    StaticMap(HashMap<String, String>),
}

impl ExtractionNamespace {
    /// The namespace types Dolmen reads.
    pub const TYPES: [&'static str; 2] = ["uri", "staticMap"];

    /// Parses an `extractionNamespace` object.
    ///
    /// # Errors
    /// A [`FieldError`] relative to the object.
    pub fn parse(obj: &Map<String, Value>) -> Result<ExtractionNamespace, FieldError> {
        let (ty, rest) = split_type(obj, "type", &Self::TYPES)?;
        match ty.as_str() {
            "uri" => UriNamespace::parse(rest).map(ExtractionNamespace::Uri),
            "staticMap" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct StaticMapSpec {
                    map: std::collections::BTreeMap<String, ScalarText>,
                }
                let spec: StaticMapSpec = from_object(rest)?;
                Ok(ExtractionNamespace::StaticMap(
                    spec.map
                        .into_iter()
                        .filter_map(|(k, v)| v.0.map(|v| (k, v)))
                        .collect(),
                ))
            }
            other => Err(FieldError::new(
                "type",
                format!(
                    "namespace type [{other}] is not supported; Dolmen reads [{}]",
                    Self::TYPES.join(", ")
                ),
            )),
        }
    }

    /// `pollPeriod`, when the entries are to be re-read.
    pub fn poll_period(&self) -> Option<Duration> {
        match self {
            ExtractionNamespace::Uri(u) => u.poll_period,
            ExtractionNamespace::StaticMap(_) => None,
        }
    }
}

/// A `uri` namespace (see the module docs).
#[derive(Debug, Clone)]
pub struct UriNamespace {
    /// The file, or the directory and file-name pattern.
    pub source: UriSource,
    /// How to read records.
    pub parse_spec: ParseSpec,
    /// How often to check for a new file; `None`: read once.
    pub poll_period: Option<Duration>,
}

/// Where a `uri` namespace reads.
#[derive(Debug, Clone)]
pub enum UriSource {
    /// `uri`: this file.
    File(PathBuf),
    /// `uriPrefix` and `fileRegex`: the newest matching file in this directory.
    Prefix {
        /// The directory.
        dir: PathBuf,
        /// `fileRegex` as given.
        pattern: String,
        /// `fileRegex` anchored to match whole file names.
        file_regex: Regex,
    },
}

/// Identifies the file a load read, to tell on a poll whether it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStamp {
    /// The file.
    pub path: PathBuf,
    /// Its modification time.
    pub modified: SystemTime,
    /// Its size, bytes.
    pub len: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UriSpec {
    uri: Option<String>,
    uri_prefix: Option<String>,
    file_regex: Option<String>,
    namespace_parse_spec: Option<Map<String, Value>>,
    poll_period: Option<Value>,
    #[allow(dead_code)]
    max_heap_percentage: Option<f64>,
}

impl UriNamespace {
    fn parse(rest: Value) -> Result<UriNamespace, FieldError> {
        let spec: UriSpec = from_object(rest)?;
        let source = match (&spec.uri, &spec.uri_prefix) {
            (Some(uri), None) => {
                if spec.file_regex.is_some() {
                    return Err(FieldError::new(
                        "fileRegex",
                        "Cannot define both uri and fileRegex",
                    ));
                }
                UriSource::File(file_path("uri", uri)?)
            }
            (None, Some(prefix)) => {
                let text = spec.file_regex.as_deref().unwrap_or(".*");
                let file_regex = Regex::new(&format!("^(?:{text})$")).map_err(|e| {
                    FieldError::new(
                        "fileRegex",
                        format!("Could not parse `fileRegex` [{text}]: {e}"),
                    )
                })?;
                UriSource::Prefix {
                    dir: file_path("uriPrefix", prefix)?,
                    pattern: text.to_string(),
                    file_regex,
                }
            }
            _ => {
                return Err(FieldError::new("uri", "Either uri xor uriPrefix required"));
            }
        };
        let parse_spec = match &spec.namespace_parse_spec {
            Some(obj) => ParseSpec::parse(obj).map_err(|e| e.under("namespaceParseSpec"))?,
            None => return Err(FieldError::new("namespaceParseSpec", "required")),
        };
        Ok(UriNamespace {
            source,
            parse_spec,
            poll_period: poll_period(spec.poll_period.as_ref())?,
        })
    }

    /// Finds the file to read now (the newest match for a prefix).
    ///
    /// # Errors
    /// When the file or directory cannot be read, or no file matches.
    pub fn locate(&self) -> Result<SourceStamp, String> {
        let stamp = |path: &Path| -> Result<SourceStamp, String> {
            let meta = std::fs::metadata(path)
                .map_err(|e| format!("cannot read [{}]: {e}", path.display()))?;
            if !meta.is_file() {
                return Err(format!("[{}] is not a file", path.display()));
            }
            Ok(SourceStamp {
                path: path.to_path_buf(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                len: meta.len(),
            })
        };
        match &self.source {
            UriSource::File(path) => stamp(path),
            UriSource::Prefix {
                dir,
                pattern,
                file_regex,
            } => {
                let entries = std::fs::read_dir(dir)
                    .map_err(|e| format!("cannot list [{}]: {e}", dir.display()))?;
                let mut best: Option<SourceStamp> = None;
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    let Some(name) = name.to_str() else { continue };
                    if !file_regex.is_match(name) {
                        continue;
                    }
                    let Ok(s) = stamp(&entry.path()) else {
                        continue;
                    };
                    if best
                        .as_ref()
                        .is_none_or(|b| (s.modified, &s.path) > (b.modified, &b.path))
                    {
                        best = Some(s);
                    }
                }
                best.ok_or_else(|| {
                    format!(
                        "no file in [{}] matches fileRegex [{pattern}]",
                        dir.display()
                    )
                })
            }
        }
    }

    /// Reads the entries of the file `stamp` names (blocking I/O).
    ///
    /// # Errors
    /// When the file cannot be read or a record is invalid (the message names the line).
    pub fn read(&self, stamp: &SourceStamp) -> Result<HashMap<String, String>, String> {
        let path = &stamp.path;
        let file = std::fs::File::open(path)
            .map_err(|e| format!("cannot read [{}]: {e}", path.display()))?;
        let mut bytes = Vec::new();
        let gz = path.extension().is_some_and(|x| x == "gz");
        let read = if gz {
            flate2::read::MultiGzDecoder::new(file).read_to_end(&mut bytes)
        } else {
            std::io::BufReader::new(file).read_to_end(&mut bytes)
        };
        read.map_err(|e| format!("cannot read [{}]: {e}", path.display()))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| format!("[{}] is not UTF-8 text: {e}", path.display()))?;
        self.parse_spec
            .parse_text(&text)
            .map_err(|e| format!("[{}]: {e}", path.display()))
    }
}

/// The path of a `file:` URI given in `field`.
fn file_path(field: &str, uri: &str) -> Result<PathBuf, FieldError> {
    let bad = |m: String| FieldError::new(field, m);
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err(bad(format!(
            "[{uri}] is not a URI; use file:/absolute/path"
        )));
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(bad(format!(
            "scheme [{scheme}] of [{uri}] is not supported; Dolmen reads file: URIs"
        )));
    }
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let (host, path) = after.find('/').map_or((after, ""), |i| after.split_at(i));
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return Err(bad(format!(
                    "host [{host}] of [{uri}] is not supported: a file: URI names a local file"
                )));
            }
            path
        }
        None => rest,
    };
    if !path.starts_with('/') || path.contains(['?', '#']) {
        return Err(bad(format!(
            "[{uri}] must name an absolute path (file:/absolute/path), without query or fragment"
        )));
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|e| bad(format!("[{uri}] does not decode to UTF-8: {e}")))?;
    Ok(PathBuf::from(decoded.into_owned()))
}

/// `pollPeriod`: an ISO 8601 period of fixed length or a number of milliseconds; absent, null
/// or zero: none.
fn poll_period(v: Option<&Value>) -> Result<Option<Duration>, FieldError> {
    let bad = |m: String| FieldError::new("pollPeriod", m);
    let ms = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| bad(format!("[{n}] is not a whole number of milliseconds")))?,
        Some(Value::String(s)) => {
            let p = dolmen_common::period::Period::parse(s)
                .map_err(|e| bad(format!("[{s}] is not an ISO 8601 period: {e}")))?;
            p.checked_fixed_millis().ok_or_else(|| {
                bad(format!(
                    "[{s}] has no fixed length (use days, hours, minutes or seconds)"
                ))
            })?
        }
        Some(other) => return Err(bad(format!("must be a period such as PT5M, got {other}"))),
    };
    match ms {
        0 => Ok(None),
        ms if ms < 0 => Err(bad(format!("must not be negative, got {ms} ms"))),
        ms => Ok(Some(Duration::from_millis(ms as u64))),
    }
}

/// How a `uri` namespace's file is read (`namespaceParseSpec`, see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseSpec {
    /// `csv` (`delimiter: None`) or `tsv` (`delimiter: Some(..)`).
    Delimited {
        /// `None` for RFC 4180 CSV; the separator of `tsv` otherwise.
        delimiter: Option<String>,
        /// The column names, unless the header row gives them.
        columns: Option<Vec<String>>,
        /// The key column (default: the first).
        key_column: Option<String>,
        /// The value column (default: the second).
        value_column: Option<String>,
        /// The first line after the skipped ones names the columns.
        has_header_row: bool,
        /// Lines skipped first.
        skip_header_rows: usize,
    },
    /// `customJson`.
    CustomJson {
        /// The key's field.
        key_field_name: String,
        /// The value's field.
        value_field_name: String,
    },
    /// `simpleJson`.
    SimpleJson,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DelimitedSpec {
    columns: Option<Vec<String>>,
    key_column: Option<String>,
    value_column: Option<String>,
    #[serde(default)]
    has_header_row: bool,
    #[serde(default)]
    skip_header_rows: usize,
    delimiter: Option<String>,
    #[allow(dead_code)]
    list_delimiter: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CustomJsonSpec {
    key_field_name: Option<String>,
    value_field_name: Option<String>,
}

impl ParseSpec {
    /// The formats Dolmen reads.
    pub const FORMATS: [&'static str; 4] = ["csv", "tsv", "customJson", "simpleJson"];

    /// Parses a `namespaceParseSpec` object.
    ///
    /// # Errors
    /// A [`FieldError`] relative to the object.
    pub fn parse(obj: &Map<String, Value>) -> Result<ParseSpec, FieldError> {
        let (format, rest) = split_type(obj, "format", &Self::FORMATS)?;
        match format.as_str() {
            "csv" | "tsv" => {
                let s: DelimitedSpec = from_object(rest)?;
                let tsv = format == "tsv";
                if !tsv && s.delimiter.is_some() {
                    return Err(FieldError::new(
                        "delimiter",
                        "unknown field for csv (tsv takes a delimiter)",
                    ));
                }
                let nonempty = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.is_empty());
                if nonempty(&s.key_column) != nonempty(&s.value_column) {
                    return Err(FieldError::new(
                        "keyColumn",
                        "Must specify both `keyColumn` and `valueColumn` or neither `keyColumn` nor `valueColumn`",
                    ));
                }
                match &s.columns {
                    Some(cols) if cols.len() < 2 => {
                        return Err(FieldError::new(
                            "columns",
                            "Must specify more than one column to have a key value pair",
                        ));
                    }
                    Some(cols) => {
                        for (field, c) in [
                            ("keyColumn", &s.key_column),
                            ("valueColumn", &s.value_column),
                        ] {
                            if let Some(c) = c.as_ref().filter(|c| !c.is_empty())
                                && !cols.contains(c)
                            {
                                return Err(FieldError::new(
                                    field,
                                    format!("Column [{c}] not found in columns: {cols:?}"),
                                ));
                            }
                        }
                    }
                    None if !s.has_header_row => {
                        return Err(FieldError::new(
                            "columns",
                            "`columns` list required (or hasHeaderRow: true)",
                        ));
                    }
                    None => {}
                }
                let delimiter = tsv.then(|| {
                    s.delimiter
                        .filter(|d| !d.is_empty())
                        .unwrap_or_else(|| "\t".to_string())
                });
                Ok(ParseSpec::Delimited {
                    delimiter,
                    columns: s.columns,
                    key_column: s.key_column.filter(|c| !c.is_empty()),
                    value_column: s.value_column.filter(|c| !c.is_empty()),
                    has_header_row: s.has_header_row,
                    skip_header_rows: s.skip_header_rows,
                })
            }
            "customJson" => {
                let s: CustomJsonSpec = from_object(rest)?;
                let required = |field: &str, v: Option<String>| {
                    v.filter(|v| !v.is_empty())
                        .ok_or_else(|| FieldError::new(field, "required"))
                };
                Ok(ParseSpec::CustomJson {
                    key_field_name: required("keyFieldName", s.key_field_name)?,
                    value_field_name: required("valueFieldName", s.value_field_name)?,
                })
            }
            "simpleJson" => {
                let rest = rest.as_object().cloned().unwrap_or_default();
                if let Some(k) = rest.keys().next() {
                    return Err(FieldError::new(
                        k.clone(),
                        "unknown field (simpleJson takes none)",
                    ));
                }
                Ok(ParseSpec::SimpleJson)
            }
            other => Err(FieldError::new(
                "format",
                format!(
                    "unknown format [{other}]; one of [{}]",
                    Self::FORMATS.join(", ")
                ),
            )),
        }
    }

    /// The entries in `text`.
    ///
    /// # Errors
    /// A record without its key, a malformed record or header; the message names the line
    /// (1-based).
    pub fn parse_text(&self, text: &str) -> Result<HashMap<String, String>, String> {
        let mut out = HashMap::new();
        match self {
            ParseSpec::Delimited {
                delimiter,
                columns,
                key_column,
                value_column,
                has_header_row,
                skip_header_rows,
            } => {
                let mut lines = text.lines().enumerate().skip(*skip_header_rows);
                let split = |line: &str| -> Result<Vec<String>, String> {
                    match delimiter {
                        Some(d) => Ok(line.split(d.as_str()).map(str::to_string).collect()),
                        None => csv_fields(line),
                    }
                };
                let names: Vec<String> = if *has_header_row {
                    let Some((n, header)) = lines.next() else {
                        return Ok(out);
                    };
                    split(header).map_err(|e| format!("line {}: {e}", n + 1))?
                } else {
                    columns.clone().unwrap_or_default()
                };
                let index = |wanted: Option<&String>, default: usize| -> Result<usize, String> {
                    match wanted {
                        None if default < names.len() => Ok(default),
                        None => Err(format!(
                            "Must specify more than one column to have a key value pair, got {names:?}"
                        )),
                        Some(c) => names
                            .iter()
                            .position(|n| n == c)
                            .ok_or_else(|| format!("Column [{c}] not found in columns: {names:?}")),
                    }
                };
                let key_idx = index(key_column.as_ref(), 0)?;
                let value_idx = index(value_column.as_ref(), 1)?;
                for (n, line) in lines {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let fields = split(line).map_err(|e| format!("line {}: {e}", n + 1))?;
                    let Some(key) = fields.get(key_idx) else {
                        return Err(format!(
                            "line {}: Key column [{}] missing data in line [{line}]",
                            n + 1,
                            names[key_idx]
                        ));
                    };
                    if let Some(value) = fields.get(value_idx) {
                        out.insert(key.clone(), value.clone());
                    }
                }
            }
            ParseSpec::CustomJson {
                key_field_name,
                value_field_name,
            } => {
                for (n, line) in text.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let obj = json_object(line).map_err(|e| format!("line {}: {e}", n + 1))?;
                    let Some(key) = obj.get(key_field_name).and_then(text_of) else {
                        return Err(format!(
                            "line {}: Key column [{key_field_name}] missing data in line [{line}]",
                            n + 1
                        ));
                    };
                    if let Some(value) = obj.get(value_field_name).and_then(text_of) {
                        out.insert(key, value);
                    }
                }
            }
            ParseSpec::SimpleJson => {
                for (n, line) in text.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let obj = json_object(line).map_err(|e| format!("line {}: {e}", n + 1))?;
                    for (k, v) in obj {
                        if let Some(v) = text_of(&v) {
                            out.insert(k, v);
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The fields of one CSV line (RFC 4180 quoting).
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes());
    match reader.records().next() {
        None => Ok(Vec::new()),
        Some(r) => r
            .map(|r| r.iter().map(str::to_string).collect())
            .map_err(|e| format!("not a CSV record: {e}")),
    }
}

fn json_object(line: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(other) => Err(format!("expected a JSON object, got {other}")),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// A JSON value as lookup text: strings as they are, other values as JSON text, null as none.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ns(v: Value) -> Result<ExtractionNamespace, String> {
        ExtractionNamespace::parse(v.as_object().unwrap()).map_err(|e| e.to_string())
    }

    fn spec(v: Value) -> ParseSpec {
        ParseSpec::parse(v.as_object().unwrap()).unwrap()
    }

    #[test]
    fn uris_are_local_files_only() {
        let csv = json!({"format": "csv", "columns": ["k", "v"]});
        for (uri, path) in [
            ("file:/tmp/a.csv", "/tmp/a.csv"),
            ("file:///tmp/a.csv", "/tmp/a.csv"),
            ("file://localhost/tmp/a%20b.csv", "/tmp/a b.csv"),
        ] {
            let ExtractionNamespace::Uri(u) =
                ns(json!({"type": "uri", "uri": uri, "namespaceParseSpec": csv})).unwrap()
            else {
                panic!()
            };
            let UriSource::File(p) = u.source else {
                panic!()
            };
            assert_eq!(p, PathBuf::from(path));
        }
        for (v, needle) in [
            (
                json!({"type": "uri", "uri": "s3://b/k.csv", "namespaceParseSpec": csv}),
                "uri: scheme [s3]",
            ),
            (
                json!({"type": "uri", "uri": "file://host/x", "namespaceParseSpec": csv}),
                "uri: host [host]",
            ),
            (
                json!({"type": "uri", "uri": "file:x.csv", "namespaceParseSpec": csv}),
                "absolute path",
            ),
            (
                json!({"type": "uri", "uri": "/tmp/x", "namespaceParseSpec": csv}),
                "not a URI",
            ),
            (
                json!({"type": "uri", "namespaceParseSpec": csv}),
                "Either uri xor uriPrefix required",
            ),
            (
                json!({"type": "uri", "uri": "file:/a", "uriPrefix": "file:/b", "namespaceParseSpec": csv}),
                "Either uri xor uriPrefix required",
            ),
            (
                json!({"type": "uri", "uri": "file:/a", "fileRegex": "x", "namespaceParseSpec": csv}),
                "Cannot define both uri and fileRegex",
            ),
            (
                json!({"type": "uri", "uriPrefix": "file:/a", "fileRegex": "(", "namespaceParseSpec": csv}),
                "fileRegex: Could not parse",
            ),
            (
                json!({"type": "uri", "uri": "file:/a"}),
                "namespaceParseSpec: required",
            ),
            (
                json!({"type": "uri", "uri": "file:/a", "namespaceParseSpec": csv, "pollPeriod": "P1M"}),
                "pollPeriod: [P1M] has no fixed length",
            ),
            (
                json!({"type": "uri", "uri": "file:/a", "namespaceParseSpec": csv, "pollPeriod": -5}),
                "pollPeriod: must not be negative",
            ),
            (
                json!({"type": "uri", "uri": "file:/a", "namespaceParseSpec": {"format": "xml"}}),
                "namespaceParseSpec.format: unknown format [xml]",
            ),
            (
                json!({"type": "jdbc", "table": "t"}),
                "type: namespace type [jdbc] is not supported",
            ),
            (
                json!({"type": "uri", "uri": "file:/a", "namespaceParseSpec": csv, "bogus": 1}),
                "bogus",
            ),
        ] {
            let e = ns(v.clone()).unwrap_err();
            assert!(e.contains(needle), "{v}: {e}");
        }
        let ExtractionNamespace::Uri(u) = ns(json!({
            "type": "uri", "uri": "file:/a", "namespaceParseSpec": csv, "pollPeriod": "PT5M",
            "maxHeapPercentage": 10
        }))
        .unwrap() else {
            panic!()
        };
        assert_eq!(u.poll_period, Some(Duration::from_secs(300)));
        assert_eq!(
            ns(
                json!({"type": "uri", "uri": "file:/a", "namespaceParseSpec": csv, "pollPeriod": 0})
            )
            .unwrap()
            .poll_period(),
            None
        );
    }

    #[test]
    fn delimited_specs_check_their_columns() {
        let err = |v: Value| {
            ParseSpec::parse(v.as_object().unwrap())
                .unwrap_err()
                .to_string()
        };
        assert!(err(json!({"format": "csv"})).starts_with("columns:"));
        assert!(err(json!({"format": "csv", "columns": ["k"]})).contains("more than one column"));
        assert!(
            err(json!({"format": "csv", "columns": ["k", "v"], "keyColumn": "k"}))
                .contains("Must specify both")
        );
        assert!(
            err(json!({"format": "csv", "columns": ["k", "v"], "keyColumn": "x", "valueColumn": "v"}))
                .starts_with("keyColumn: Column [x] not found")
        );
        assert!(
            err(json!({"format": "csv", "columns": ["k", "v"], "delimiter": "|"}))
                .starts_with("delimiter:")
        );
        assert!(
            err(json!({"format": "customJson", "keyFieldName": "k"}))
                .starts_with("valueFieldName: required")
        );
        assert!(err(json!({"format": "simpleJson", "x": 1})).starts_with("x:"));
    }

    #[test]
    fn csv_and_tsv_records() {
        // Druid's docs example: value, something else, key.
        let csv = spec(json!({
            "format": "csv", "columns": ["value", "somethingElse", "key"],
            "keyColumn": "key", "valueColumn": "value"
        }));
        let m = csv
            .parse_text("bar,something,foo\nbat,something2,baz\n\n\"tr,uck\",x,buck\n")
            .unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m["foo"], "bar");
        assert_eq!(m["buck"], "tr,uck");
        // A short row without the value is skipped; without the key it is an error.
        let kv = spec(json!({"format": "csv", "columns": ["k", "v"]}));
        assert_eq!(
            kv.parse_text("a,1\nb\nc,\n").unwrap(),
            HashMap::from([
                ("a".to_string(), "1".to_string()),
                ("c".to_string(), String::new()),
            ])
        );
        let vk = spec(
            json!({"format": "csv", "columns": ["v", "k"], "keyColumn": "k", "valueColumn": "v"}),
        );
        let e = vk.parse_text("1,a\n2\n").unwrap_err();
        assert!(e.starts_with("line 2: Key column [k] missing data"), "{e}");
        // Header rows, after skipped lines, name the columns.
        let header = spec(json!({
            "format": "csv", "hasHeaderRow": true, "skipHeaderRows": 1,
            "keyColumn": "id", "valueColumn": "name"
        }));
        assert_eq!(
            header
                .parse_text("# exported\nname,id\nAlpha,1\nBeta,2\n")
                .unwrap()["2"],
            "Beta"
        );
        let e = header.parse_text("x\nname,code\nA,1\n").unwrap_err();
        assert!(e.contains("Column [id] not found"), "{e}");
        // TSV with a custom (multi-character) delimiter, as in Druid's docs.
        let tsv = spec(json!({
            "format": "tsv", "columns": ["value", "somethingElse", "key"],
            "keyColumn": "key", "valueColumn": "value", "delimiter": "|"
        }));
        assert_eq!(
            tsv.parse_text("bar|something,1|foo\n").unwrap()["foo"],
            "bar"
        );
        let tabs = spec(json!({"format": "tsv", "columns": ["k", "v"]}));
        assert_eq!(tabs.parse_text("a\t\"q\"\n").unwrap()["a"], "\"q\"");
        let multi = spec(json!({"format": "tsv", "columns": ["k", "v"], "delimiter": "::"}));
        assert_eq!(multi.parse_text("a::b::c\n").unwrap()["a"], "b");
    }

    #[test]
    fn json_records() {
        let custom =
            spec(json!({"format": "customJson", "keyFieldName": "key", "valueFieldName": "value"}));
        let m = custom
            .parse_text(concat!(
                "{\"key\": \"foo\", \"value\": \"bar\", \"somethingElse\": \"something\"}\n",
                "{\"key\": \"baz\", \"value\": \"bat\"}\n",
                "{\"key\": \"buck\", \"somethingElse\": \"something\", \"value\": \"truck\"}\n",
                "{\"key\": \"none\", \"value\": null}\n",
                "{\"key\": 7, \"value\": 8.5}\n",
            ))
            .unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m["buck"], "truck");
        assert_eq!(m["7"], "8.5");
        assert!(!m.contains_key("none"), "a null value skips the record");
        let e = custom.parse_text("{\"value\": \"x\"}").unwrap_err();
        assert!(e.contains("Key column [key] missing data"), "{e}");
        assert!(custom.parse_text("[1]").unwrap_err().contains("line 1"));
        assert!(custom.parse_text("nope").unwrap_err().contains("not JSON"));

        let simple = spec(json!({"format": "simpleJson"}));
        let m = simple
            .parse_text(
                "{\"foo\": \"bar\"}\n{\"baz\": \"bat\", \"buck\": \"truck\"}\n{\"n\": null}\n",
            )
            .unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m["baz"], "bat");
    }

    #[test]
    fn files_are_located_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let csv = json!({"format": "csv", "columns": ["k", "v"]});
        std::fs::write(dir.path().join("renames-1.csv"), "a,one\n").unwrap();
        std::fs::write(dir.path().join("other.csv"), "a,other\n").unwrap();
        let prefix = format!("file:{}/", dir.path().display());
        let ExtractionNamespace::Uri(u) = ns(json!({
            "type": "uri", "uriPrefix": prefix, "fileRegex": "renames-[0-9]*\\.csv",
            "namespaceParseSpec": csv
        }))
        .unwrap() else {
            panic!()
        };
        let stamp = u.locate().unwrap();
        assert!(stamp.path.ends_with("renames-1.csv"));
        assert_eq!(u.read(&stamp).unwrap()["a"], "one");
        // The newest matching file wins.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(dir.path().join("renames-2.csv"), "a,two\n").unwrap();
        let later = std::time::SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("renames-2.csv"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        let stamp2 = u.locate().unwrap();
        assert!(stamp2.path.ends_with("renames-2.csv"));
        assert_ne!(stamp, stamp2);
        // Gzip by name.
        let gz_path = dir.path().join("data.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz_path).unwrap(),
            flate2::Compression::default(),
        );
        std::io::Write::write_all(&mut enc, b"g,zipped\n").unwrap();
        enc.finish().unwrap();
        let ExtractionNamespace::Uri(g) = ns(json!({
            "type": "uri", "uri": format!("file:{}", gz_path.display()), "namespaceParseSpec": csv
        }))
        .unwrap() else {
            panic!()
        };
        assert_eq!(g.read(&g.locate().unwrap()).unwrap()["g"], "zipped");
        // Missing files and empty matches say where they looked.
        let ExtractionNamespace::Uri(missing) = ns(json!({
            "type": "uri", "uri": format!("file:{}/nope.csv", dir.path().display()),
            "namespaceParseSpec": csv
        }))
        .unwrap() else {
            panic!()
        };
        assert!(missing.locate().unwrap_err().contains("nope.csv"));
        let ExtractionNamespace::Uri(none) = ns(json!({
            "type": "uri", "uriPrefix": prefix, "fileRegex": "zzz", "namespaceParseSpec": csv
        }))
        .unwrap() else {
            panic!()
        };
        assert!(
            none.locate()
                .unwrap_err()
                .contains("matches fileRegex [zzz]")
        );
    }

    #[test]
    fn static_maps_are_inline() {
        let ExtractionNamespace::StaticMap(m) =
            ns(json!({"type": "staticMap", "map": {"a": "b", "n": null}})).unwrap()
        else {
            panic!()
        };
        assert_eq!(m, HashMap::from([("a".to_string(), "b".to_string())]));
    }
}
