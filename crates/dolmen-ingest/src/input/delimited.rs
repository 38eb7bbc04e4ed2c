//! CSV and TSV readers with Druid's `DelimitedValueReader` semantics.
//!
//! * `skipHeaderRows` rows are skipped first; with `findColumnsFromHeader` the next row gives the
//!   column names, otherwise `columns` does.
//! * Values are strings. An empty field stays the empty string `""` (Druid's SQL-compatible null
//!   handling keeps it; it is not turned into null). With `tryParseNumbers`, numeric fields become
//!   longs or doubles.
//! * A field containing `listDelimiter` (default `\u0001`) becomes a JSON array of its parts.
//! * Rows with fewer values than columns omit the trailing columns; values beyond the last column
//!   are dropped (Druid's `Utils.zipMapPartial`).
//! * Blank lines are skipped.
//! * CSV uses RFC 4180 quoting (quoted fields may contain commas, quotes and newlines); TSV splits
//!   on the delimiter string with no quoting, as Druid does.

use std::io::Read;

use serde_json::{Map, Value};

use super::format::{Line, LineReader, check_columns};
use super::json::raw_text;
use super::{InputRow, RowParseError};

pub(super) enum Splitting {
    /// RFC 4180 CSV.
    Csv,
    /// Plain split on a delimiter string.
    Delimiter(String),
}

pub(super) struct DelimitedConfig {
    pub(super) splitting: Splitting,
    /// `None` when the columns come from the header row.
    pub(super) columns: Option<Vec<String>>,
    pub(super) list_delimiter: String,
    pub(super) skip_rows: usize,
    pub(super) try_parse_numbers: bool,
}

enum Source {
    Csv {
        reader: csv::Reader<Box<dyn Read + Send>>,
        record: csv::ByteRecord,
    },
    Lines {
        lines: LineReader,
        buf: Vec<u8>,
        delimiter: String,
    },
}

pub(super) struct DelimitedRows {
    name: String,
    source: Source,
    columns: Option<Vec<String>>,
    list_delimiter: String,
    try_parse_numbers: bool,
    to_skip: usize,
    done: bool,
    fields: Vec<String>,
}

/// One physical row from the source.
enum Raw {
    Eof,
    Row { line: u64 },
    Error(RowParseError),
}

impl DelimitedRows {
    pub(super) fn new(name: String, input: Box<dyn Read + Send>, cfg: DelimitedConfig) -> Self {
        let source = match cfg.splitting {
            Splitting::Csv => Source::Csv {
                reader: csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .from_reader(input),
                record: csv::ByteRecord::new(),
            },
            Splitting::Delimiter(delimiter) => Source::Lines {
                lines: LineReader::new(input),
                buf: Vec::new(),
                delimiter,
            },
        };
        Self {
            name,
            source,
            columns: cfg.columns,
            list_delimiter: cfg.list_delimiter,
            try_parse_numbers: cfg.try_parse_numbers,
            to_skip: cfg.skip_rows,
            done: false,
            fields: Vec::new(),
        }
    }

    /// Reads the next non-blank physical row into `self.fields`.
    fn next_raw(&mut self) -> Raw {
        loop {
            match &mut self.source {
                Source::Csv { reader, record } => match reader.read_byte_record(record) {
                    Ok(false) => return Raw::Eof,
                    Ok(true) => {
                        if record.is_empty() || (record.len() == 1 && record[0].is_empty()) {
                            continue;
                        }
                        self.fields.clear();
                        self.fields.extend(
                            record
                                .iter()
                                .map(|f| String::from_utf8_lossy(f).into_owned()),
                        );
                        let line = record.position().map_or(0, csv::Position::line);
                        return Raw::Row { line };
                    }
                    Err(e) => {
                        let line = e.position().map_or(0, csv::Position::line);
                        if matches!(e.kind(), csv::ErrorKind::Io(_)) {
                            return Raw::Error(RowParseError::fatal(format!(
                                "error reading [{}] near line {line}: {e}",
                                self.name
                            )));
                        }
                        return Raw::Error(RowParseError::row(
                            format!("unable to parse row at line {line} of [{}]: {e}", self.name),
                            None,
                        ));
                    }
                },
                Source::Lines {
                    lines,
                    buf,
                    delimiter,
                } => match lines.next_line(buf) {
                    Ok(Line::Eof) => return Raw::Eof,
                    Ok(Line::TooLong) => {
                        return Raw::Error(RowParseError::row(
                            format!("line {} of [{}] is too long", lines.line_no, self.name),
                            Some(raw_text(buf)),
                        ));
                    }
                    Ok(Line::Ok) => {
                        if buf.is_empty() {
                            continue;
                        }
                        let text = String::from_utf8_lossy(buf);
                        self.fields.clear();
                        self.fields
                            .extend(text.split(delimiter.as_str()).map(str::to_string));
                        return Raw::Row {
                            line: lines.line_no as u64,
                        };
                    }
                    Err(e) => {
                        return Raw::Error(RowParseError::fatal(format!(
                            "error reading [{}] after line {}: {e}",
                            self.name, lines.line_no
                        )));
                    }
                },
            }
        }
    }

    fn convert(&self, field: &str) -> Value {
        if !self.list_delimiter.is_empty() && field.contains(self.list_delimiter.as_str()) {
            Value::Array(
                field
                    .split(self.list_delimiter.as_str())
                    .map(|p| self.scalar(p))
                    .collect(),
            )
        } else {
            self.scalar(field)
        }
    }

    /// One field (or one part of a multi-value field). An empty field is null, as Druid's
    /// `ParserUtils` reads delimited text (`Strings.emptyToNull`): `a,,b` has a null middle column.
    fn scalar(&self, field: &str) -> Value {
        if field.is_empty() {
            return Value::Null;
        }
        if self.try_parse_numbers {
            if let Ok(l) = field.parse::<i64>() {
                return Value::from(l);
            }
            if field.bytes().any(|b| b.is_ascii_digit())
                && field
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
                && let Some(n) = field
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
            {
                return Value::Number(n);
            }
        }
        Value::String(field.to_string())
    }
}

impl Iterator for DelimitedRows {
    type Item = Result<InputRow, RowParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let line = match self.next_raw() {
                Raw::Eof => {
                    self.done = true;
                    return None;
                }
                Raw::Error(e) => {
                    if e.fatal {
                        self.done = true;
                    }
                    return Some(Err(e));
                }
                Raw::Row { line } => line,
            };
            if self.to_skip > 0 {
                self.to_skip -= 1;
                continue;
            }
            let Some(columns) = &self.columns else {
                let header = std::mem::take(&mut self.fields);
                if let Err(m) = check_columns(&header) {
                    self.done = true;
                    return Some(Err(RowParseError::fatal(format!(
                        "invalid header at line {line} of [{}]: {m}",
                        self.name
                    ))));
                }
                self.columns = Some(header);
                continue;
            };
            let mut row = Map::with_capacity(columns.len());
            for (col, field) in columns.iter().zip(self.fields.iter()) {
                row.insert(col.clone(), self.convert(field));
            }
            return Some(Ok(row));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{InputEntity, InputFormat};
    use bytes::Bytes;
    use serde_json::{Value, json};

    fn read(data: &str, format: Value) -> Vec<Result<Value, String>> {
        let format: InputFormat = serde_json::from_value(format).unwrap();
        format
            .reader(&InputEntity::Inline(Bytes::from(data.to_string())))
            .unwrap()
            .map(|r| r.map(Value::Object).map_err(|e| e.message))
            .collect()
    }

    #[test]
    fn csv_with_header() {
        let rows = read(
            "# comment line\ntime,page,count\n2015-09-12,\"Main, Page\",3\n\n2015-09-13,,\"q\"\"uote\"\n2015-09-14,x\n2015-09-15,a,1,extra\n",
            json!({"type": "csv", "findColumnsFromHeader": true, "skipHeaderRows": 1}),
        );
        assert_eq!(
            rows,
            vec![
                Ok(json!({"time": "2015-09-12", "page": "Main, Page", "count": "3"})),
                // An empty field is null (Druid's `Strings.emptyToNull`).
                Ok(json!({"time": "2015-09-13", "page": null, "count": "q\"uote"})),
                Ok(json!({"time": "2015-09-14", "page": "x"})),
                Ok(json!({"time": "2015-09-15", "page": "a", "count": "1"})),
            ]
        );
    }

    #[test]
    fn csv_with_columns_lists_and_numbers() {
        let rows = read(
            "a|b,1,2.5\nx,-3,1e3\n",
            json!({"type": "csv", "columns": ["tags", "n", "d"], "listDelimiter": "|", "tryParseNumbers": true}),
        );
        assert_eq!(rows[0], Ok(json!({"tags": ["a", "b"], "n": 1, "d": 2.5})));
        assert_eq!(rows[1], Ok(json!({"tags": "x", "n": -3, "d": 1000.0})));
        let rows = read("a\u{1}b,c\n", json!({"type": "csv", "columns": ["x", "y"]}));
        assert_eq!(rows[0], Ok(json!({"x": ["a", "b"], "y": "c"})));
    }

    #[test]
    fn csv_bad_quotes_and_header() {
        let rows = read(
            "a,b\n1,\"unterminated\n",
            json!({"type": "csv", "findColumnsFromHeader": true}),
        );
        // The csv crate reads an unterminated quote to end of input as one field.
        assert_eq!(rows.len(), 1);
        let rows = read(
            "a,a\n1,2\n",
            json!({"type": "csv", "findColumnsFromHeader": true}),
        );
        assert_eq!(rows.len(), 1);
        assert!(
            rows[0]
                .as_ref()
                .unwrap_err()
                .contains("duplicate column [a]")
        );
    }

    #[test]
    fn tsv() {
        let rows = read(
            "time\tpage\n2015\tA \"quoted\"\tignored\n\n2016\t\n",
            json!({"type": "tsv", "findColumnsFromHeader": true}),
        );
        assert_eq!(
            rows,
            vec![
                Ok(json!({"time": "2015", "page": "A \"quoted\""})),
                Ok(json!({"time": "2016", "page": null})),
            ]
        );
        let rows = read(
            "1::2\n",
            json!({"type": "tsv", "delimiter": "::", "columns": ["a", "b"]}),
        );
        assert_eq!(rows[0], Ok(json!({"a": "1", "b": "2"})));
    }
}
