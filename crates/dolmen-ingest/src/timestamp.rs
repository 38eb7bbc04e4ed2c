//! Druid `timestampSpec`: where a row's primary timestamp comes from and how it is parsed.
//!
//! Reference: Druid docs, "Ingestion spec reference" → `timestampSpec`
//! (<https://druid.apache.org/docs/latest/ingestion/ingestion-spec#timestampspec>).
//!
//! A [`TimestampSpec`] names a `column`, a `format` and an optional `missingValue`.
//! [`TimestampParser`] compiles the spec once and then turns rows into epoch milliseconds (UTC).
//!
//! Supported formats (case-insensitive keywords, like Druid's `TimestampParser`):
//!
//! | format | JSON number input | string input |
//! |---|---|---|
//! | `auto` (default) | epoch millis | numeric string → millis; otherwise ISO 8601 (`T` or space separator, optional trailing zone id such as `2015-09-12 00:46:58 America/Los_Angeles`) |
//! | `iso` | parsed as its decimal string | ISO 8601 |
//! | `millis` | epoch millis | numeric string → millis |
//! | `posix` | epoch seconds | numeric string → seconds |
//! | `micro` | epoch microseconds | numeric string |
//! | `nano` | epoch nanoseconds | numeric string |
//! | `ruby` | seconds with fraction | numeric string |
//! | any other string | Joda-Time pattern, e.g. `yyyy-MM-dd HH:mm:ss`, `dd/MMM/yyyy:HH:mm:ss Z` | |
//!
//! Numeric inputs for `posix`, `micro`, `nano` and `millis` are truncated toward zero to whole units
//! before conversion, as Druid does with `Number.longValue()`; `ruby` keeps the fraction.
//! Dolmen is slightly more lenient than Druid for numeric *strings*: `"1442018818.5"` is accepted
//! (Druid's `Long.parseLong` rejects it). Surrounding double quotes are stripped from string inputs
//! (Druid's `ParserUtils.stripQuotes`).
//!
//! ## Joda-Time patterns
//!
//! Any other format is an `org.joda.time.format.DateTimeFormat` pattern, parsed by
//! [`dolmen_common::joda::JodaFormat`] (shared with the SQL functions and the expression functions
//! `timestamp_parse` and `timestamp_format`, whose patterns ingestion compiles here too).
//! Ingestion accepts these letters:
//!
//! `y`/`Y` year (`yy` = two-digit year with Joda's pivot), `M` month (`M`/`MM` numeric, `MMM` short
//! name, `MMMM` full name), `d` day of month, `D` day of year, `H` hour 0-23, `k` hour 1-24,
//! `h` clock hour 1-12, `K` hour 0-11, `a` AM/PM, `m` minute, `s` second, `S` fraction of second,
//! `E` day-of-week name, `e` day-of-week number, `Z` offset `-0800`, `ZZ` offset `-08:00`,
//! `ZZZ` zone id `America/Los_Angeles`, `z` zone short name (`UTC`, `PST`…), `'quoted'` literals
//! (`''` is a single quote) and any non-letter literal. Other letters (`G`, `C`, `x`, `w`, …)
//! are rejected with an error naming the letter.
//!
//! As in Joda, parsing is case-insensitive for text, missing date fields default to
//! 1970-01-01, missing time fields to midnight, and a missing zone means UTC (or the zone passed
//! by the caller). The whole input must be consumed. Errors name the value, the pattern and the
//! position of the mismatch.

use dolmen_common::joda::JodaFormat;
use dolmen_common::zone::Zone;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::input::InputRow;

fn default_column() -> String {
    "timestamp".to_string()
}

fn default_format() -> String {
    "auto".to_string()
}

/// The `timestampSpec` of a `dataSchema`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimestampSpec {
    /// Input column holding the timestamp (Druid default `timestamp`).
    #[serde(default = "default_column")]
    pub column: String,
    /// `auto`, `iso`, `millis`, `posix`, `micro`, `nano`, `ruby` or a Joda-Time pattern
    /// (Druid default `auto`).
    #[serde(default = "default_format")]
    pub format: String,
    /// Timestamp used when the column is absent or null: an ISO 8601 string or epoch millis.
    #[serde(default)]
    pub missing_value: Option<Value>,
}

impl Default for TimestampSpec {
    fn default() -> Self {
        Self {
            column: default_column(),
            format: default_format(),
            missing_value: None,
        }
    }
}

/// Errors raised while compiling a [`TimestampSpec`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimestampSpecError {
    /// The `format` is neither a keyword nor a supported Joda-Time pattern.
    #[error("invalid timestampSpec format [{format}]: {reason}")]
    InvalidFormat {
        /// The offending format string.
        format: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The `missingValue` is not a parseable timestamp.
    #[error("invalid timestampSpec missingValue [{value}]: {reason}")]
    InvalidMissingValue {
        /// The offending value, as JSON.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
}

/// Errors raised while extracting the timestamp of one row.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimestampError {
    /// The column holds a value that the format cannot parse.
    #[error(
        "could not parse timestamp [{value}] in column [{column}] with format [{format}]: {reason}"
    )]
    Unparseable {
        /// The raw value (strings unquoted, other values as JSON).
        value: String,
        /// The timestamp column.
        column: String,
        /// The configured format.
        format: String,
        /// Why parsing failed.
        reason: String,
    },
    /// The column is absent or null and the spec has no `missingValue`.
    #[error("timestamp column [{column}] is missing or null and timestampSpec has no missingValue")]
    Missing {
        /// The timestamp column.
        column: String,
    },
}

#[derive(Debug, Clone)]
enum Format {
    Auto,
    Iso,
    Millis,
    Posix,
    Micro,
    Nano,
    Ruby,
    Joda(JodaFormat),
}

impl Format {
    fn is_numeric(&self) -> bool {
        matches!(
            self,
            Format::Auto
                | Format::Millis
                | Format::Posix
                | Format::Micro
                | Format::Nano
                | Format::Ruby
        )
    }
}

/// A compiled [`TimestampSpec`]; cheap to share between threads.
#[derive(Debug, Clone)]
pub struct TimestampParser {
    column: String,
    format_name: String,
    format: Format,
    missing: Option<i64>,
}

impl TimestampParser {
    /// Compiles a spec, validating the format and the `missingValue`.
    pub fn new(spec: &TimestampSpec) -> Result<Self, TimestampSpecError> {
        let format = match spec.format.to_ascii_lowercase().as_str() {
            "auto" => Format::Auto,
            "iso" => Format::Iso,
            "millis" => Format::Millis,
            "posix" => Format::Posix,
            "micro" => Format::Micro,
            "nano" => Format::Nano,
            "ruby" => Format::Ruby,
            _ => Format::Joda(compile_pattern(&spec.format).map_err(|reason| {
                TimestampSpecError::InvalidFormat {
                    format: spec.format.clone(),
                    reason,
                }
            })?),
        };
        let missing = match &spec.missing_value {
            None | Some(Value::Null) => None,
            Some(v) => Some(parse_missing_value(v).map_err(|reason| {
                TimestampSpecError::InvalidMissingValue {
                    value: v.to_string(),
                    reason,
                }
            })?),
        };
        Ok(Self {
            column: spec.column.clone(),
            format_name: spec.format.clone(),
            format,
            missing,
        })
    }

    /// The timestamp column this parser reads.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// The `missingValue` in epoch millis, if any.
    pub fn missing_value(&self) -> Option<i64> {
        self.missing
    }

    /// Extracts the timestamp (epoch millis, UTC) of a row. An absent or null column falls back
    /// to `missingValue`.
    pub fn parse_row(&self, row: &InputRow) -> Result<i64, TimestampError> {
        match row.get(&self.column) {
            None | Some(Value::Null) => self.missing.ok_or_else(|| TimestampError::Missing {
                column: self.column.clone(),
            }),
            Some(v) => self.parse_value(v),
        }
    }

    /// Parses one non-null value with this parser's format. `Value::Null` falls back to
    /// `missingValue` like [`TimestampParser::parse_row`].
    pub fn parse_value(&self, value: &Value) -> Result<i64, TimestampError> {
        let result = match value {
            Value::Null => {
                return self.missing.ok_or_else(|| TimestampError::Missing {
                    column: self.column.clone(),
                });
            }
            Value::Number(n) if self.format.is_numeric() => self.parse_number(n),
            Value::Number(n) => self.parse_str(&n.to_string()),
            Value::String(s) => self.parse_str(s),
            Value::Bool(_) | Value::Array(_) | Value::Object(_) => {
                Err("unsupported value type for a timestamp".to_string())
            }
        };
        result.map_err(|reason| TimestampError::Unparseable {
            value: match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            column: self.column.clone(),
            format: self.format_name.clone(),
            reason,
        })
    }

    /// Parses a text value (the columnar build's path for string columns); same rules and
    /// errors as [`TimestampParser::parse_value`] on a JSON string.
    pub fn parse_text(&self, s: &str) -> Result<i64, TimestampError> {
        self.parse_str(s)
            .map_err(|reason| self.unparseable(s.to_string(), reason))
    }

    /// Parses an integer value; same rules as [`TimestampParser::parse_value`] on a JSON number.
    pub fn parse_integer(&self, v: i64) -> Result<i64, TimestampError> {
        let r = if self.format.is_numeric() {
            self.numeric_from_i64(v)
        } else {
            self.parse_str(&v.to_string())
        };
        r.map_err(|reason| self.unparseable(v.to_string(), reason))
    }

    /// Parses a floating-point value; same rules as [`TimestampParser::parse_value`] on a JSON
    /// number.
    pub fn parse_float(&self, v: f64) -> Result<i64, TimestampError> {
        let r = if self.format.is_numeric() {
            self.numeric_from_f64(v)
        } else {
            self.parse_str(&v.to_string())
        };
        r.map_err(|reason| self.unparseable(v.to_string(), reason))
    }

    fn unparseable(&self, value: String, reason: String) -> TimestampError {
        TimestampError::Unparseable {
            value,
            column: self.column.clone(),
            format: self.format_name.clone(),
            reason,
        }
    }

    fn parse_number(&self, n: &serde_json::Number) -> Result<i64, String> {
        if let Some(i) = n.as_i64() {
            return self.numeric_from_i64(i);
        }
        match n.as_f64() {
            Some(f) => self.numeric_from_f64(f),
            None => Err("number out of range".to_string()),
        }
    }

    fn numeric_from_i64(&self, v: i64) -> Result<i64, String> {
        match self.format {
            Format::Posix => v
                .checked_mul(1000)
                .ok_or_else(|| "seconds out of range".to_string()),
            Format::Micro => Ok(v / 1000),
            Format::Nano => Ok(v / 1_000_000),
            Format::Ruby => v
                .checked_mul(1000)
                .ok_or_else(|| "seconds out of range".to_string()),
            _ => Ok(v),
        }
    }

    fn numeric_from_f64(&self, v: f64) -> Result<i64, String> {
        if !v.is_finite() {
            return Err("number is not finite".to_string());
        }
        match self.format {
            Format::Ruby => f64_to_i64(v * 1000.0),
            _ => self.numeric_from_i64(f64_to_i64(v.trunc())?),
        }
    }

    fn parse_numeric_str(&self, s: &str) -> Result<i64, String> {
        let t = s.trim();
        if let Ok(i) = t.parse::<i64>() {
            return self.numeric_from_i64(i);
        }
        match t.parse::<f64>() {
            Ok(f) if looks_numeric(t) => self.numeric_from_f64(f),
            _ => Err("not a number".to_string()),
        }
    }

    fn parse_str(&self, raw: &str) -> Result<i64, String> {
        let s = strip_quotes(raw);
        if s.is_empty() {
            return Err("empty timestamp".to_string());
        }
        match &self.format {
            Format::Auto => parse_auto(s),
            Format::Iso => parse_iso(s),
            Format::Millis | Format::Posix | Format::Micro | Format::Nano | Format::Ruby => {
                self.parse_numeric_str(s)
            }
            Format::Joda(j) => j.parse(s, &Zone::Utc).map_err(|e| e.to_string()),
        }
    }
}

fn parse_missing_value(v: &Value) -> Result<i64, String> {
    match v {
        Value::String(s) => parse_iso(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(i),
            None => n
                .as_f64()
                .ok_or_else(|| "number out of range".to_string())
                .and_then(|f| f64_to_i64(f.trunc())),
        },
        _ => Err("expected an ISO 8601 string or epoch millis".to_string()),
    }
}

fn f64_to_i64(v: f64) -> Result<i64, String> {
    // 2^63 is exactly representable; anything at or above it overflows.
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v) {
        Ok(v as i64)
    } else {
        Err("number out of range".to_string())
    }
}

/// True for strings made only of an optional sign, digits, one dot and an exponent — rules out
/// `inf`/`NaN`, which Rust's float parser would accept.
fn looks_numeric(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
}

fn strip_quotes(s: &str) -> &str {
    let t = s.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        &t[1..t.len() - 1]
    } else {
        t
    }
}

/// ISO 8601 instant, as Druid's `DateTimes.of`.
pub(crate) fn parse_iso(s: &str) -> Result<i64, String> {
    dolmen_common::time::parse_iso_instant(s).map_err(|e| e.to_string())
}

/// Druid's `auto` format for strings: all-numeric strings are millis, anything else is ISO 8601
/// with an optional trailing ` <zone id>`.
fn parse_auto(s: &str) -> Result<i64, String> {
    let numeric = {
        let digits = s.strip_prefix('-').unwrap_or(s);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if numeric {
        return s
            .parse::<i64>()
            .map_err(|_| "millis out of range".to_string());
    }
    if looks_numeric(s)
        && s.contains('.')
        && let Ok(f) = s.parse::<f64>()
    {
        return f64_to_i64(f.trunc());
    }
    if let Some(idx) = s.rfind(' ')
        && idx > 0
        && let Ok(zone) = Zone::parse(&s[idx + 1..])
    {
        let local = parse_iso(&s[..idx])?;
        return zone
            .local_to_utc(local)
            .ok_or_else(|| "local time does not exist in zone".to_string());
    }
    parse_iso(s)
}

// ---------------------------------------------------------------------------------------------
// Joda-Time patterns
// ---------------------------------------------------------------------------------------------

/// The pattern letters ingestion accepts (see the module docs); [`JodaFormat`] knows all of
/// Joda's, this is the subset Dolmen documents and tests for ingestion.
const SUPPORTED_LETTERS: &str = "yYMdDHkhKamsSEeZz";

/// Compiles a Joda-Time pattern for `timestampSpec.format` and the expression functions
/// `timestamp_parse`/`timestamp_format`; the error names the pattern and the unsupported letter,
/// unknown letter or malformed quote.
pub(crate) fn compile_pattern(pattern: &str) -> Result<JodaFormat, String> {
    let format = JodaFormat::compile(pattern).map_err(|e| e.to_string())?;
    let unsupported = format.letters().find(|c| !SUPPORTED_LETTERS.contains(*c));
    match unsupported {
        Some(c) => Err(format!(
            "unsupported pattern letter [{c}] in pattern [{pattern}]"
        )),
        None => Ok(format),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(v: Value) -> InputRow {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn parser(format: &str) -> TimestampParser {
        TimestampParser::new(&TimestampSpec {
            column: "t".into(),
            format: format.into(),
            missing_value: None,
        })
        .unwrap()
    }

    fn p(format: &str, v: Value) -> Result<i64, TimestampError> {
        parser(format).parse_value(&v)
    }

    #[test]
    fn spec_defaults_and_unknown_fields() {
        let spec: TimestampSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec, TimestampSpec::default());
        assert_eq!(spec.column, "timestamp");
        assert_eq!(spec.format, "auto");
        let err = serde_json::from_str::<TimestampSpec>(r#"{"colum":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("colum"), "{err}");
        let spec: TimestampSpec =
            serde_json::from_str(r#"{"column":"time","format":"iso","missingValue":"2010-01-01"}"#)
                .unwrap();
        assert_eq!(spec.missing_value, Some(json!("2010-01-01")));
    }

    #[test]
    fn iso_and_auto() {
        assert_eq!(
            p("iso", json!("2015-09-12T00:46:58.771Z")).unwrap(),
            1442018818771
        );
        assert_eq!(
            p("auto", json!("2015-09-12T00:46:58.771Z")).unwrap(),
            1442018818771
        );
        assert_eq!(p("auto", json!(1442018818771i64)).unwrap(), 1442018818771);
        assert_eq!(p("auto", json!("1442018818771")).unwrap(), 1442018818771);
        assert_eq!(p("auto", json!(1442018818771.9)).unwrap(), 1442018818771);
        assert_eq!(
            p("auto", json!("2015-09-12 00:00:00")).unwrap(),
            1442016000000
        );
        assert_eq!(p("ISO", json!("\"2015-09-12\"")).unwrap(), 1442016000000);
        assert_eq!(
            p("auto", json!("2015-09-12 02:00:00 Europe/Paris")).unwrap(),
            1442016000000
        );
    }

    #[test]
    fn numeric_formats() {
        assert_eq!(p("posix", json!(1442018818)).unwrap(), 1442018818000);
        assert_eq!(p("posix", json!("1442018818")).unwrap(), 1442018818000);
        assert_eq!(p("posix", json!(1442018818.9)).unwrap(), 1442018818000);
        assert_eq!(p("ruby", json!(1442018818.771)).unwrap(), 1442018818771);
        assert_eq!(p("ruby", json!("1442018818.5")).unwrap(), 1442018818500);
        assert_eq!(p("millis", json!("1442018818771")).unwrap(), 1442018818771);
        assert_eq!(
            p("micro", json!(1442018818771123i64)).unwrap(),
            1442018818771
        );
        assert_eq!(
            p("nano", json!(1442018818771123456i64)).unwrap(),
            1442018818771
        );
        assert!(p("millis", json!("abc")).is_err());
        assert!(p("millis", json!("inf")).is_err());
        assert!(p("posix", json!(9.3e18)).is_err());
        assert!(p("posix", json!(i64::MAX)).is_err());
    }

    #[test]
    fn errors_name_column_value_and_format() {
        let err = p("iso", json!("abc")).unwrap_err().to_string();
        assert!(
            err.starts_with("could not parse timestamp [abc] in column [t] with format [iso]"),
            "{err}"
        );
        let err = parser("iso")
            .parse_row(&row(json!({"x": 1})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("[t]"), "{err}");
        assert!(p("auto", json!(true)).is_err());
        assert!(p("auto", json!("")).is_err());
    }

    #[test]
    fn missing_value() {
        let parser = TimestampParser::new(&TimestampSpec {
            column: "t".into(),
            format: "iso".into(),
            missing_value: Some(json!("2010-01-01T00:00:00Z")),
        })
        .unwrap();
        assert_eq!(parser.parse_row(&row(json!({}))).unwrap(), 1262304000000);
        assert_eq!(
            parser.parse_row(&row(json!({"t": null}))).unwrap(),
            1262304000000
        );
        assert_eq!(
            parser.parse_row(&row(json!({"t": "2015-09-12"}))).unwrap(),
            1442016000000
        );
        let bad = TimestampParser::new(&TimestampSpec {
            missing_value: Some(json!("nope")),
            ..Default::default()
        });
        assert!(matches!(
            bad,
            Err(TimestampSpecError::InvalidMissingValue { .. })
        ));
        let millis = TimestampParser::new(&TimestampSpec {
            missing_value: Some(json!(5)),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(millis.missing_value(), Some(5));
    }

    #[test]
    fn joda_patterns() {
        assert_eq!(
            p("yyyy-MM-dd HH:mm:ss", json!("2015-09-12 00:46:58")).unwrap(),
            1442018818000
        );
        assert_eq!(
            p(
                "dd/MMM/yyyy:HH:mm:ss Z",
                json!("12/Sep/2015:02:46:58 +0200")
            )
            .unwrap(),
            1442018818000
        );
        assert_eq!(
            p(
                "yyyy-MM-dd'T'HH:mm:ss.SSSZZ",
                json!("2015-09-12T00:46:58.771+00:00")
            )
            .unwrap(),
            1442018818771
        );
        assert_eq!(
            p(
                "yyyy-MM-dd'T'HH:mm:ss.SSSZZ",
                json!("2015-09-12T00:46:58.771Z")
            )
            .unwrap(),
            1442018818771
        );
        assert_eq!(p("yyyyMMdd", json!("20150912")).unwrap(), 1442016000000);
        assert_eq!(p("yyyyMMdd", json!(20150912)).unwrap(), 1442016000000);
        assert_eq!(p("yyyy-MM-dd", json!("2015-9-12")).unwrap(), 1442016000000);
        assert_eq!(
            p(
                "EEE, dd MMMM yyyy hh:mm a",
                json!("Sat, 12 september 2015 01:30 PM")
            )
            .unwrap(),
            1442064600000
        );
        assert_eq!(
            p(
                "yyyy-MM-dd HH:mm ZZZ",
                json!("2015-09-12 02:46 Europe/Paris")
            )
            .unwrap(),
            1442018760000
        );
        assert_eq!(
            p("yyyy-MM-dd HH:mm z", json!("2015-09-11 17:46 PDT")).unwrap(),
            1442018760000
        );
        assert_eq!(p("HH:mm", json!("01:00")).unwrap(), 3_600_000);
        assert_eq!(p("yyyy-DDD", json!("2015-255")).unwrap(), 1442016000000);
        // 2-digit year within Joda's pivot window.
        let y = p("yy-MM-dd", json!("15-09-12")).unwrap();
        assert_eq!(y, 1442016000000);
        // Fractions are scaled by their digit count.
        assert_eq!(p("ss.S", json!("01.5")).unwrap(), 1500);
        assert_eq!(p("ss.SSSSSS", json!("01.123456")).unwrap(), 1123);
    }

    #[test]
    fn joda_errors() {
        for bad in ["yyyy-MM-dd G", "xxxx", "yyyy 'unterminated"] {
            let err = TimestampParser::new(&TimestampSpec {
                format: bad.into(),
                ..Default::default()
            })
            .unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert!(p("yyyy-MM-dd", json!("2015-02-30")).is_err());
        assert!(p("yyyy-MM-dd", json!("2015-09-12x")).is_err());
        assert!(p("yyyy-MM-dd", json!("2015-09")).is_err());
        assert!(p("HH:mm", json!("25:00")).is_err());
        assert!(p("yyyy-MM-dd", json!("ü-☃-12")).is_err());
        assert!(p("MMM", json!("Se")).is_err());
    }
}
