//! Newline-delimited JSON reader: one object per line, blank lines skipped, malformed lines
//! reported with their file and line number while reading continues.
//!
//! Each line is read as Druid's JSON line reader reads it: Jackson's `ObjectMapper.readValue`
//! takes the first JSON value of the line and ignores what follows it
//! (`FAIL_ON_TRAILING_TOKENS` is off by default), so `{"a":1},` is the row `{"a":1}` (Druid's
//! UNNEST tutorial writes its inline data that way). See [`parse_json_line`].

use super::flatten::FlattenSpec;
use super::format::{Line, LineReader, MAX_LINE_BYTES};
use super::{InputRow, RowParseError};

/// Parses the JSON value at the start of `line`, ignoring anything after it (see the module
/// docs: Druid's JSON lines are read with Jackson's `readValue`, which stops after the first
/// value). A line that does not start with a complete value is an error.
///
/// # Errors
/// serde_json's error for the first value.
pub fn parse_json_line<T: serde::de::DeserializeOwned>(line: &[u8]) -> serde_json::Result<T> {
    match serde_json::Deserializer::from_slice(line)
        .into_iter::<T>()
        .next()
    {
        Some(value) => value,
        None => Err(<serde_json::Error as serde::de::Error>::custom(
            "expected a JSON value, found an empty line",
        )),
    }
}

/// Longest raw line kept in a [`RowParseError`].
const MAX_RAW_CHARS: usize = 64 * 1024;

pub(super) struct JsonLineRows {
    name: String,
    lines: LineReader,
    buf: Vec<u8>,
    flatten: Option<FlattenSpec>,
    done: bool,
}

impl JsonLineRows {
    pub(super) fn new(name: String, lines: LineReader, flatten: Option<FlattenSpec>) -> Self {
        Self {
            name,
            lines,
            buf: Vec::with_capacity(4096),
            flatten,
            done: false,
        }
    }
}

/// The raw text of a line for error reports, truncated to a sane length.
pub(super) fn raw_text(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.len() <= MAX_RAW_CHARS {
        s.into_owned()
    } else {
        let mut end = MAX_RAW_CHARS;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    }
}

impl Iterator for JsonLineRows {
    type Item = Result<InputRow, RowParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            match self.lines.next_line(&mut self.buf) {
                Ok(Line::Eof) => {
                    self.done = true;
                    return None;
                }
                Ok(Line::TooLong) => {
                    return Some(Err(RowParseError::row(
                        format!(
                            "line {} of [{}] is longer than {MAX_LINE_BYTES} bytes",
                            self.lines.line_no, self.name
                        ),
                        Some(raw_text(&self.buf)),
                    )));
                }
                Ok(Line::Ok) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(RowParseError::fatal(format!(
                        "error reading [{}] after line {}: {e}",
                        self.name, self.lines.line_no
                    ))));
                }
            }
            let line = self.buf.trim_ascii();
            if line.is_empty() {
                continue;
            }
            return Some(match parse_json_line::<InputRow>(line) {
                Ok(row) => Ok(match &self.flatten {
                    Some(f) => f.apply(row),
                    None => row,
                }),
                Err(e) => Err(RowParseError::row(
                    format!(
                        "unable to parse row at line {} of [{}]: {e}",
                        self.lines.line_no, self.name
                    ),
                    Some(raw_text(line)),
                )),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{InputEntity, InputFormat};
    use bytes::Bytes;
    use serde_json::json;
    use std::io::Write;

    fn read(data: &str, format: serde_json::Value) -> Vec<Result<serde_json::Value, String>> {
        let format: InputFormat = serde_json::from_value(format).unwrap();
        format
            .reader(&InputEntity::Inline(Bytes::from(data.to_string())))
            .unwrap()
            .map(|r| r.map(serde_json::Value::Object).map_err(|e| e.message))
            .collect()
    }

    #[test]
    fn reads_lines_and_reports_bad_ones() {
        let rows = read(
            "{\"a\":1,\"b\":\"x\"}\n\n  \nnot json\n[1,2]\n{\"a\":2}\r\n{\"a\":",
            json!({"type": "json"}),
        );
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[0], Ok(json!({"a": 1, "b": "x"})));
        let e = rows[1].as_ref().unwrap_err();
        assert!(e.contains("line 4") && e.contains("[inline data]"), "{e}");
        assert!(rows[2].as_ref().unwrap_err().contains("line 5"));
        assert_eq!(rows[3], Ok(json!({"a": 2})));
        assert!(rows[4].as_ref().unwrap_err().contains("line 7"));
        // Field order is preserved.
        let rows = read("{\"z\":1,\"a\":2,\"m\":3}\n", json!({"type": "json"}));
        let keys: Vec<String> = rows[0]
            .as_ref()
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, vec!["z", "a", "m"]);
    }

    #[test]
    fn trailing_characters_after_a_lines_object_are_ignored_as_in_druid() {
        // The inline data of Druid's UNNEST tutorial (docs/tutorials/tutorial-unnest-arrays.md):
        // objects separated by ",\n".
        let rows = read(
            "{\"t\":\"2000-01-01\",\"dim3\":[\"a\",\"b\"]},\n{\"t\":\"2000-01-02\"} trailing\n{\"t\":3}",
            json!({"type": "json"}),
        );
        assert_eq!(
            rows,
            vec![
                Ok(json!({"t": "2000-01-01", "dim3": ["a", "b"]})),
                Ok(json!({"t": "2000-01-02"})),
                Ok(json!({"t": 3})),
            ]
        );
        // A line that does not start with a whole value is still an error.
        assert!(read("{\"t\": }, {}\n", json!({"type": "json"}))[0].is_err());
    }

    #[test]
    fn raw_line_is_kept() {
        let format: InputFormat = serde_json::from_value(json!({"type": "json"})).unwrap();
        let errs: Vec<_> = format
            .reader(&InputEntity::Inline(Bytes::from("{bad}\n")))
            .unwrap()
            .filter_map(Result::err)
            .collect();
        assert_eq!(errs[0].raw.as_deref(), Some("{bad}"));
        assert!(!errs[0].fatal);
    }

    #[test]
    fn flatten_is_applied() {
        let rows = read(
            "{\"a\":{\"b\":5},\"c\":1}\n",
            json!({"type": "json", "flattenSpec": {"useFieldDiscovery": false, "fields": [{"type": "path", "name": "b", "expr": "$.a.b"}]}}),
        );
        assert_eq!(rows[0], Ok(json!({"b": 5})));
    }

    #[test]
    fn hostile_input() {
        let deep = "[".repeat(100_000);
        let rows = read(
            &format!("{deep}\n{{\"ok\":1}}\n\u{0}\u{ff}\n"),
            json!({"type": "json"}),
        );
        assert!(rows[0].is_err());
        assert_eq!(rows[1], Ok(json!({"ok": 1})));
        assert!(rows[2].is_err());
        let format: InputFormat = serde_json::from_value(json!({"type": "json"})).unwrap();
        let bytes: Vec<u8> = vec![b'{', 0xff, 0xfe, b'}', b'\n'];
        let out: Vec<_> = format
            .reader(&InputEntity::Inline(Bytes::from(bytes)))
            .unwrap()
            .collect();
        assert!(out[0].is_err());
    }

    #[test]
    fn truncated_gzip_is_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for i in 0..10_000 {
            writeln!(enc, "{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(50)).unwrap();
        }
        let bytes = enc.finish().unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let format: InputFormat = serde_json::from_value(json!({"type": "json"})).unwrap();
        let results: Vec<_> = format.reader(&InputEntity::File(path)).unwrap().collect();
        let last = results.last().unwrap().as_ref().unwrap_err();
        assert!(last.fatal, "{}", last.message);
        assert!(results.iter().filter(|r| r.is_ok()).count() > 100);
    }

    #[test]
    fn wikiticker_sample() {
        let path = std::path::Path::new("/work/shared/data/wikiticker-2015-09-12-sampled.json.gz");
        if !path.exists() {
            return;
        }
        let format: InputFormat = serde_json::from_value(json!({"type": "json"})).unwrap();
        let start = std::time::Instant::now();
        let mut n = 0;
        for r in format
            .reader(&InputEntity::File(path.to_path_buf()))
            .unwrap()
        {
            let row = r.unwrap();
            assert!(row.contains_key("time"));
            n += 1;
        }
        assert_eq!(n, 39244);
        eprintln!("wikiticker: {n} rows in {:?}", start.elapsed());
    }
}
