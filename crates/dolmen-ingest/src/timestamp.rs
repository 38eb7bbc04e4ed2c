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
//! [`JodaFormat`] implements the subset of `org.joda.time.format.DateTimeFormat` patterns that
//! ingestion specs use, for both parsing and formatting (the expression functions
//! `timestamp_parse` and `timestamp_format` share it):
//!
//! `y`/`Y` year (`yy` = two-digit year with Joda's pivot), `M` month (`M`/`MM` numeric, `MMM` short
//! name, `MMMM` full name), `d` day of month, `D` day of year, `H` hour 0-23, `k` hour 1-24,
//! `h` clock hour 1-12, `K` hour 0-11, `a` AM/PM, `m` minute, `s` second, `S` fraction of second,
//! `E` day-of-week name (parsed and ignored), `e` day-of-week number, `Z` offset `-0800`,
//! `ZZ` offset `-08:00`, `ZZZ` zone id `America/Los_Angeles`, `z` zone short name (`UTC`, `PST`…),
//! `'quoted'` literals (`''` is a single quote) and any non-letter literal.
//! Other letters (`G`, `C`, `x`, `w`, …) are rejected with an error naming the letter.
//!
//! As in Joda, parsing is case-insensitive for text, missing date fields default to
//! 1970-01-01, missing time fields to midnight, and a missing zone means UTC (or the zone passed
//! by the caller). The whole input must be consumed.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike};
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
            _ => Format::Joda(JodaFormat::new(&spec.format).map_err(|reason| {
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
            Format::Joda(j) => j.parse(s),
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
        && let Some(zone) = Zone::parse(&s[idx + 1..])
    {
        let local = parse_iso(&s[..idx])?;
        return zone
            .local_to_utc(local)
            .ok_or_else(|| "local time does not exist in zone".to_string());
    }
    parse_iso(s)
}

// ---------------------------------------------------------------------------------------------
// Time zones
// ---------------------------------------------------------------------------------------------

/// A time zone as accepted by Druid (Joda `DateTimeZone.forID`): `UTC`, a fixed offset such as
/// `+05:30`, or an IANA id such as `America/Los_Angeles`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Zone {
    Utc,
    /// Fixed offset in seconds east of UTC.
    Fixed(i32),
    Named(chrono_tz::Tz),
}

impl Zone {
    /// Parses a zone id; `None` when it is not recognised.
    pub(crate) fn parse(s: &str) -> Option<Zone> {
        let s = s.trim();
        match s {
            "" => return None,
            "UTC" | "Z" | "GMT" | "UT" | "Etc/UTC" | "utc" | "Etc/GMT" => return Some(Zone::Utc),
            _ => {}
        }
        if s.starts_with('+') || s.starts_with('-') {
            return parse_offset_str(s).map(|secs| {
                if secs == 0 {
                    Zone::Utc
                } else {
                    Zone::Fixed(secs)
                }
            });
        }
        chrono_tz::Tz::from_str(s).ok().map(Zone::Named)
    }

    /// Offset from UTC in seconds at the given instant.
    pub(crate) fn offset_secs(self, utc_ms: i64) -> i32 {
        match self {
            Zone::Utc => 0,
            Zone::Fixed(s) => s,
            Zone::Named(tz) => {
                use chrono::Offset;
                match chrono::DateTime::from_timestamp_millis(utc_ms) {
                    Some(dt) => tz
                        .offset_from_utc_datetime(&dt.naive_utc())
                        .fix()
                        .local_minus_utc(),
                    None => 0,
                }
            }
        }
    }

    /// UTC millis → local wall-clock millis (as if the wall clock were UTC).
    pub(crate) fn to_local(self, utc_ms: i64) -> i64 {
        utc_ms.saturating_add(i64::from(self.offset_secs(utc_ms)) * 1000)
    }

    /// Local wall-clock millis → UTC millis. Ambiguous times take the earlier instant; times in
    /// a DST gap move forward past the gap, like Joda.
    pub(crate) fn local_to_utc(self, local_ms: i64) -> Option<i64> {
        match self {
            Zone::Utc => Some(local_ms),
            Zone::Fixed(s) => local_ms.checked_sub(i64::from(s) * 1000),
            Zone::Named(tz) => {
                let ndt = chrono::DateTime::from_timestamp_millis(local_ms)?.naive_utc();
                match tz.from_local_datetime(&ndt) {
                    chrono::LocalResult::Single(dt) => Some(dt.timestamp_millis()),
                    chrono::LocalResult::Ambiguous(a, _) => Some(a.timestamp_millis()),
                    chrono::LocalResult::None => {
                        // In a gap: use the offset in force just before the gap.
                        let before = local_ms.checked_sub(3 * 3_600_000)?;
                        let off =
                            self.offset_secs(before - i64::from(self.offset_secs(before)) * 1000);
                        local_ms.checked_sub(i64::from(off) * 1000)
                    }
                }
            }
        }
    }

    /// Zone id as Joda prints it for `ZZZ`.
    fn id(self) -> String {
        match self {
            Zone::Utc => "UTC".to_string(),
            Zone::Fixed(s) => format_offset(s, true),
            Zone::Named(tz) => tz.name().to_string(),
        }
    }

    /// Short zone name as Joda prints it for `z`.
    fn short_name(self, utc_ms: i64) -> String {
        match self {
            Zone::Utc => "UTC".to_string(),
            Zone::Fixed(s) => format_offset(s, true),
            Zone::Named(tz) => {
                use chrono::offset::TimeZone as _;
                match chrono::DateTime::from_timestamp_millis(utc_ms) {
                    Some(dt) => {
                        let off = tz.offset_from_utc_datetime(&dt.naive_utc());
                        off.to_string()
                    }
                    None => tz.name().to_string(),
                }
            }
        }
    }
}

/// Parses `+HH`, `+HHMM`, `+HH:MM`, `+HH:MM:SS` (and `-`) into seconds.
fn parse_offset_str(s: &str) -> Option<i32> {
    let mut cur = Cursor::new(s);
    let secs = cur.offset()?;
    if cur.at_end() { Some(secs) } else { None }
}

fn format_offset(secs: i32, colon: bool) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    let (h, m) = (a / 3600, (a % 3600) / 60);
    if colon {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}{m:02}")
    }
}

// ---------------------------------------------------------------------------------------------
// Joda-Time patterns
// ---------------------------------------------------------------------------------------------

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Literal(String),
    /// `y`/`Y`; `two_digit` for `yy` (with lenient parsing when the next token is not numeric).
    Year {
        count: usize,
        max: usize,
        two_digit: bool,
        lenient: bool,
    },
    MonthNum {
        count: usize,
    },
    MonthText {
        long: bool,
    },
    Day {
        count: usize,
    },
    DayOfYear {
        count: usize,
    },
    Hour24 {
        count: usize,
    },
    /// `k`: 1-24.
    ClockHour24 {
        count: usize,
    },
    /// `h`: 1-12.
    ClockHour12 {
        count: usize,
    },
    /// `K`: 0-11.
    Hour12 {
        count: usize,
    },
    HalfDay,
    Minute {
        count: usize,
    },
    Second {
        count: usize,
    },
    Fraction {
        count: usize,
    },
    WeekdayText {
        long: bool,
    },
    WeekdayNum {
        count: usize,
    },
    Offset {
        colon: bool,
    },
    ZoneId,
    ZoneName {
        long: bool,
    },
}

/// A compiled Joda-Time `DateTimeFormat` pattern (see the module docs for the supported letters).
#[derive(Clone, PartialEq)]
pub struct JodaFormat {
    pattern: String,
    toks: Vec<Tok>,
    /// Zone used when the input has none (default UTC).
    zone: Zone,
}

impl fmt::Debug for JodaFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JodaFormat")
            .field("pattern", &self.pattern)
            .finish()
    }
}

#[derive(Default)]
struct Parsed {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    doy: Option<u32>,
    hour24: Option<u32>,
    hour_of_half: Option<u32>,
    pm: Option<bool>,
    minute: Option<u32>,
    second: Option<u32>,
    nanos: Option<u32>,
    offset: Option<i32>,
    zone: Option<Zone>,
}

impl JodaFormat {
    /// Compiles a pattern; the error names the unsupported letter or malformed quote.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let mut raw: Vec<(char, usize)> = Vec::new(); // (letter, count) or ('\'', 0) literal marker
        let mut literals: Vec<String> = Vec::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_ascii_alphabetic() {
                let mut n = 1;
                while i + n < chars.len() && chars[i + n] == c {
                    n += 1;
                }
                raw.push((c, n));
                i += n;
            } else if c == '\'' {
                // Quoted literal; '' inside or outside quotes is a single quote.
                if i + 1 < chars.len() && chars[i + 1] == '\'' {
                    literals.push("'".to_string());
                    raw.push(('\'', literals.len() - 1));
                    i += 2;
                    continue;
                }
                let mut lit = String::new();
                let mut j = i + 1;
                let mut closed = false;
                while j < chars.len() {
                    if chars[j] == '\'' {
                        if j + 1 < chars.len() && chars[j + 1] == '\'' {
                            lit.push('\'');
                            j += 2;
                            continue;
                        }
                        closed = true;
                        break;
                    }
                    lit.push(chars[j]);
                    j += 1;
                }
                if !closed {
                    return Err(format!("unterminated quote in pattern [{pattern}]"));
                }
                literals.push(lit);
                raw.push(('\'', literals.len() - 1));
                i = j + 1;
            } else {
                let mut lit = String::new();
                while i < chars.len() && !chars[i].is_ascii_alphabetic() && chars[i] != '\'' {
                    lit.push(chars[i]);
                    i += 1;
                }
                literals.push(lit);
                raw.push(('\'', literals.len() - 1));
            }
        }
        if raw.is_empty() {
            return Err("empty pattern".to_string());
        }
        let is_numeric_letter = |c: char, n: usize| -> bool {
            matches!(
                c,
                'y' | 'Y' | 'd' | 'D' | 'H' | 'k' | 'h' | 'K' | 'm' | 's' | 'S' | 'e'
            ) || (c == 'M' && n <= 2)
        };
        let mut toks = Vec::with_capacity(raw.len());
        for (idx, &(c, n)) in raw.iter().enumerate() {
            let next_numeric = raw
                .get(idx + 1)
                .is_some_and(|&(nc, nn)| nc != '\'' && is_numeric_letter(nc, nn));
            let tok = match c {
                '\'' => Tok::Literal(literals[n].clone()),
                'y' | 'Y' => {
                    if n == 2 {
                        Tok::Year {
                            count: 2,
                            max: 2,
                            two_digit: true,
                            lenient: !next_numeric,
                        }
                    } else {
                        Tok::Year {
                            count: n,
                            max: if next_numeric { n } else { 9 },
                            two_digit: false,
                            lenient: false,
                        }
                    }
                }
                'M' => match n {
                    1 | 2 => Tok::MonthNum { count: n },
                    3 => Tok::MonthText { long: false },
                    _ => Tok::MonthText { long: true },
                },
                'd' => Tok::Day { count: n },
                'D' => Tok::DayOfYear { count: n },
                'H' => Tok::Hour24 { count: n },
                'k' => Tok::ClockHour24 { count: n },
                'h' => Tok::ClockHour12 { count: n },
                'K' => Tok::Hour12 { count: n },
                'a' => Tok::HalfDay,
                'm' => Tok::Minute { count: n },
                's' => Tok::Second { count: n },
                'S' => Tok::Fraction { count: n },
                'E' => Tok::WeekdayText { long: n >= 4 },
                'e' => Tok::WeekdayNum { count: n },
                'Z' => match n {
                    1 => Tok::Offset { colon: false },
                    2 => Tok::Offset { colon: true },
                    _ => Tok::ZoneId,
                },
                'z' => Tok::ZoneName { long: n >= 4 },
                other => {
                    return Err(format!(
                        "unsupported pattern letter [{other}] in pattern [{pattern}]"
                    ));
                }
            };
            toks.push(tok);
        }
        Ok(Self {
            pattern: pattern.to_string(),
            toks,
            zone: Zone::Utc,
        })
    }

    /// Returns a copy that interprets zone-less inputs (and formats output) in `zone`.
    pub(crate) fn with_zone(mut self, zone: Zone) -> Self {
        self.zone = zone;
        self
    }

    /// The source pattern.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Parses `input` into epoch millis (UTC). The whole input must match the pattern.
    pub fn parse(&self, input: &str) -> Result<i64, String> {
        let mut cur = Cursor::new(input);
        let mut p = Parsed::default();
        for tok in &self.toks {
            let at = cur.pos;
            let ok = self.parse_tok(tok, &mut cur, &mut p);
            if !ok {
                return Err(format!(
                    "value [{input}] does not match pattern [{}] at position {at} (expected {})",
                    self.pattern,
                    describe_tok(tok)
                ));
            }
        }
        if !cur.at_end() {
            return Err(format!(
                "value [{input}] is malformed at [{}] for pattern [{}]",
                cur.rest(),
                self.pattern
            ));
        }
        self.resolve(&p)
            .map_err(|e| format!("value [{input}] for pattern [{}]: {e}", self.pattern))
    }

    fn parse_tok(&self, tok: &Tok, cur: &mut Cursor<'_>, p: &mut Parsed) -> bool {
        match tok {
            Tok::Literal(l) => cur.literal(l),
            Tok::Year {
                max,
                two_digit,
                lenient,
                ..
            } => {
                if *two_digit {
                    let start = cur.pos;
                    let neg = *lenient && cur.eat(b'-');
                    let Some((v, ndigits)) = cur.digits(if *lenient { 9 } else { 2 }) else {
                        return false;
                    };
                    if ndigits == 2 && !neg && cur.pos - start == 2 {
                        p.year = Some(two_digit_year(v));
                    } else {
                        p.year = Some(if neg { -v } else { v });
                    }
                    true
                } else {
                    let neg = cur.eat(b'-');
                    if !neg {
                        cur.eat(b'+');
                    }
                    match cur.digits(*max) {
                        Some((v, _)) => {
                            p.year = Some(if neg { -v } else { v });
                            true
                        }
                        None => false,
                    }
                }
            }
            Tok::MonthNum { .. } => set_num(cur, 2, &mut p.month),
            Tok::MonthText { .. } => match cur.one_of_names(&MONTHS) {
                Some(i) => {
                    p.month = Some(i as u32 + 1);
                    true
                }
                None => false,
            },
            Tok::Day { .. } => set_num(cur, 2, &mut p.day),
            Tok::DayOfYear { .. } => set_num(cur, 3, &mut p.doy),
            Tok::Hour24 { .. } => set_num(cur, 2, &mut p.hour24),
            Tok::ClockHour24 { .. } => {
                let mut h = None;
                if !set_num(cur, 2, &mut h) {
                    return false;
                }
                p.hour24 = h.map(|h| if h == 24 { 0 } else { h });
                true
            }
            Tok::ClockHour12 { .. } => {
                let mut h = None;
                if !set_num(cur, 2, &mut h) {
                    return false;
                }
                match h {
                    Some(h @ 1..=12) => {
                        p.hour_of_half = Some(h % 12);
                        true
                    }
                    _ => false,
                }
            }
            Tok::Hour12 { .. } => {
                let mut h = None;
                if !set_num(cur, 2, &mut h) {
                    return false;
                }
                match h {
                    Some(h @ 0..=11) => {
                        p.hour_of_half = Some(h);
                        true
                    }
                    _ => false,
                }
            }
            Tok::HalfDay => {
                if cur.literal("AM") {
                    p.pm = Some(false);
                    true
                } else if cur.literal("PM") {
                    p.pm = Some(true);
                    true
                } else {
                    false
                }
            }
            Tok::Minute { .. } => set_num(cur, 2, &mut p.minute),
            Tok::Second { .. } => set_num(cur, 2, &mut p.second),
            Tok::Fraction { count } => match cur.digits((*count).min(9)) {
                Some((v, n)) => {
                    let scale = 10u32.pow(9 - n as u32);
                    p.nanos = Some((v as u32).saturating_mul(scale));
                    true
                }
                None => false,
            },
            Tok::WeekdayText { .. } => cur.one_of_names(&WEEKDAYS).is_some(),
            Tok::WeekdayNum { .. } => cur.digits(1).is_some_and(|(v, _)| (1..=7).contains(&v)),
            Tok::Offset { .. } => match cur.offset() {
                Some(s) => {
                    p.offset = Some(s);
                    true
                }
                None => false,
            },
            Tok::ZoneId | Tok::ZoneName { .. } => {
                let word = cur.zone_word();
                let zone = match word.to_ascii_uppercase().as_str() {
                    "EST" | "EDT" => Zone::parse("America/New_York"),
                    "CST" | "CDT" => Zone::parse("America/Chicago"),
                    "MST" | "MDT" => Zone::parse("America/Denver"),
                    "PST" | "PDT" => Zone::parse("America/Los_Angeles"),
                    _ => Zone::parse(word),
                };
                match zone {
                    Some(z) => {
                        p.zone = Some(z);
                        true
                    }
                    None => false,
                }
            }
        }
    }

    fn resolve(&self, p: &Parsed) -> Result<i64, String> {
        let year = p.year.unwrap_or(1970);
        let year = i32::try_from(year).map_err(|_| format!("year {year} out of range"))?;
        let date = match (p.doy, p.month, p.day) {
            (Some(doy), None, None) => NaiveDate::from_yo_opt(year, doy)
                .ok_or_else(|| format!("day of year {doy} out of range for year {year}"))?,
            (_, month, day) => {
                let (m, d) = (month.unwrap_or(1), day.unwrap_or(1));
                NaiveDate::from_ymd_opt(year, m, d)
                    .ok_or_else(|| format!("invalid date {year:04}-{m:02}-{d:02}"))?
            }
        };
        let hour = match (p.hour24, p.hour_of_half, p.pm) {
            (Some(h), _, _) => h,
            (None, Some(h), pm) => h + if pm == Some(true) { 12 } else { 0 },
            (None, None, Some(true)) => 12,
            (None, None, _) => 0,
        };
        let time = NaiveTime::from_hms_nano_opt(
            hour,
            p.minute.unwrap_or(0),
            p.second.unwrap_or(0),
            p.nanos.unwrap_or(0),
        )
        .ok_or_else(|| {
            format!(
                "invalid time {hour:02}:{:02}:{:02}",
                p.minute.unwrap_or(0),
                p.second.unwrap_or(0)
            )
        })?;
        let local = NaiveDateTime::new(date, time).and_utc().timestamp_millis();
        if let Some(off) = p.offset {
            return Ok(local - i64::from(off) * 1000);
        }
        let zone = p.zone.unwrap_or(self.zone);
        zone.local_to_utc(local)
            .ok_or_else(|| "local time out of range".to_string())
    }

    /// Formats epoch millis with this pattern, in the format's zone (UTC unless set).
    pub fn format(&self, utc_ms: i64) -> String {
        self.format_in(utc_ms, self.zone)
    }

    pub(crate) fn format_in(&self, utc_ms: i64, zone: Zone) -> String {
        let offset = zone.offset_secs(utc_ms);
        let local = utc_ms.saturating_add(i64::from(offset) * 1000);
        let Some(dt) = chrono::DateTime::from_timestamp_millis(local).map(|d| d.naive_utc()) else {
            return String::new();
        };
        let mut out = String::with_capacity(self.pattern.len() + 8);
        for tok in &self.toks {
            match tok {
                Tok::Literal(l) => out.push_str(l),
                Tok::Year {
                    count, two_digit, ..
                } => {
                    if *two_digit {
                        push_num(&mut out, i64::from(dt.year()).rem_euclid(100), 2);
                    } else {
                        push_num(&mut out, i64::from(dt.year()), *count);
                    }
                }
                Tok::MonthNum { count } => push_num(&mut out, i64::from(dt.month()), *count),
                Tok::MonthText { long } => {
                    let name = MONTHS[dt.month0() as usize];
                    out.push_str(if *long { name } else { &name[..3] });
                }
                Tok::Day { count } => push_num(&mut out, i64::from(dt.day()), *count),
                Tok::DayOfYear { count } => push_num(&mut out, i64::from(dt.ordinal()), *count),
                Tok::Hour24 { count } => push_num(&mut out, i64::from(dt.hour()), *count),
                Tok::ClockHour24 { count } => {
                    let h = if dt.hour() == 0 { 24 } else { dt.hour() };
                    push_num(&mut out, i64::from(h), *count)
                }
                Tok::ClockHour12 { count } => {
                    let h = dt.hour() % 12;
                    push_num(&mut out, i64::from(if h == 0 { 12 } else { h }), *count)
                }
                Tok::Hour12 { count } => push_num(&mut out, i64::from(dt.hour() % 12), *count),
                Tok::HalfDay => out.push_str(if dt.hour() < 12 { "AM" } else { "PM" }),
                Tok::Minute { count } => push_num(&mut out, i64::from(dt.minute()), *count),
                Tok::Second { count } => push_num(&mut out, i64::from(dt.second()), *count),
                Tok::Fraction { count } => {
                    let millis = format!("{:03}", dt.nanosecond() / 1_000_000);
                    let mut s: String = millis.chars().take(*count).collect();
                    while s.len() < *count {
                        s.push('0');
                    }
                    out.push_str(&s);
                }
                Tok::WeekdayText { long } => {
                    let name = WEEKDAYS[dt.weekday().num_days_from_monday() as usize];
                    out.push_str(if *long { name } else { &name[..3] });
                }
                Tok::WeekdayNum { count } => push_num(
                    &mut out,
                    i64::from(dt.weekday().number_from_monday()),
                    *count,
                ),
                Tok::Offset { colon } => out.push_str(&format_offset(offset, *colon)),
                Tok::ZoneId => out.push_str(&zone.id()),
                Tok::ZoneName { .. } => out.push_str(&zone.short_name(utc_ms)),
            }
        }
        out
    }
}

fn describe_tok(tok: &Tok) -> String {
    match tok {
        Tok::Literal(l) => format!("literal [{l}]"),
        Tok::Year { .. } => "year".into(),
        Tok::MonthNum { .. } | Tok::MonthText { .. } => "month".into(),
        Tok::Day { .. } => "day of month".into(),
        Tok::DayOfYear { .. } => "day of year".into(),
        Tok::Hour24 { .. }
        | Tok::ClockHour24 { .. }
        | Tok::ClockHour12 { .. }
        | Tok::Hour12 { .. } => "hour".into(),
        Tok::HalfDay => "AM/PM".into(),
        Tok::Minute { .. } => "minute".into(),
        Tok::Second { .. } => "second".into(),
        Tok::Fraction { .. } => "fraction of second".into(),
        Tok::WeekdayText { .. } | Tok::WeekdayNum { .. } => "day of week".into(),
        Tok::Offset { .. } => "zone offset".into(),
        Tok::ZoneId | Tok::ZoneName { .. } => "time zone".into(),
    }
}

fn push_num(out: &mut String, v: i64, width: usize) {
    use std::fmt::Write;
    if v < 0 {
        out.push('-');
    }
    let _ = write!(out, "{:0width$}", v.unsigned_abs(), width = width.min(20));
}

fn set_num(cur: &mut Cursor<'_>, max: usize, slot: &mut Option<u32>) -> bool {
    match cur.digits(max) {
        Some((v, _)) => match u32::try_from(v) {
            Ok(v) => {
                *slot = Some(v);
                true
            }
            Err(_) => false,
        },
        None => false,
    }
}

/// Joda's `appendTwoDigitYear(now.year - 30)`: a 100-year window from pivot-50 to pivot+49.
fn two_digit_year(v: i64) -> i64 {
    let pivot = i64::from(chrono::Utc::now().year()) - 30;
    let low = pivot - 50;
    let base = low - low.rem_euclid(100);
    let mut y = base + v;
    if y < low {
        y += 100;
    }
    y
}

/// A panic-free byte cursor over a `&str`.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Self { s, pos: 0 }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    fn rest(&self) -> &'a str {
        self.s.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Reads 1..=max ASCII digits.
    fn digits(&mut self, max: usize) -> Option<(i64, usize)> {
        let bytes = self.s.as_bytes();
        let mut v: i64 = 0;
        let mut n = 0;
        while n < max {
            match bytes.get(self.pos + n) {
                Some(b) if b.is_ascii_digit() => {
                    v = v.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
                    n += 1;
                }
                _ => break,
            }
        }
        if n == 0 {
            return None;
        }
        self.pos += n;
        Some((v, n))
    }

    /// Case-insensitive literal match.
    fn literal(&mut self, lit: &str) -> bool {
        match self.s.get(self.pos..self.pos + lit.len()) {
            Some(part) if part.eq_ignore_ascii_case(lit) || part == lit => {
                self.pos += lit.len();
                true
            }
            _ => false,
        }
    }

    /// Matches a full or three-letter name, longest first; returns its index.
    fn one_of_names(&mut self, names: &[&str]) -> Option<usize> {
        for (i, name) in names.iter().enumerate() {
            if self.literal(name) {
                return Some(i);
            }
        }
        for (i, name) in names.iter().enumerate() {
            if self.literal(&name[..3]) {
                return Some(i);
            }
        }
        None
    }

    /// `Z`, `±HH`, `±HHMM`, `±HH:MM`, `±HH:MM:SS` → seconds east of UTC.
    fn offset(&mut self) -> Option<i32> {
        let start = self.pos;
        if self.eat(b'Z') || self.eat(b'z') {
            return Some(0);
        }
        let sign = match self.peek() {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return None,
        };
        self.pos += 1;
        let parse = |cur: &mut Cursor<'_>| -> Option<i32> {
            let (h, n) = cur.digits(2)?;
            if n != 2 || h > 23 {
                return None;
            }
            let mut secs = h * 3600;
            let colon = cur.eat(b':');
            if let Some((m, n)) = cur.digits(2) {
                if n != 2 || m > 59 {
                    return None;
                }
                secs += m * 60;
                if cur.eat(b':') || (!colon && cur.peek().is_some_and(|b| b.is_ascii_digit())) {
                    let (s, n) = cur.digits(2)?;
                    if n != 2 || s > 59 {
                        return None;
                    }
                    secs += s;
                }
            } else if colon {
                return None;
            }
            i32::try_from(secs).ok()
        };
        match parse(self) {
            Some(secs) => Some(sign * secs),
            None => {
                self.pos = start;
                None
            }
        }
    }

    /// A zone id or name: `[A-Za-z0-9_/+-]+`.
    fn zone_word(&mut self) -> &'a str {
        let start = self.pos;
        let bytes = self.s.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'/' | b'+' | b'-') {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.s.get(start..self.pos).unwrap_or("")
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

    #[test]
    fn joda_format_roundtrip() {
        let f = JodaFormat::new("yyyy-MM-dd'T'HH:mm:ss.SSSZZ").unwrap();
        assert_eq!(f.format(1442018818771), "2015-09-12T00:46:58.771+00:00");
        let f = JodaFormat::new("EEEE dd MMM yy hh:mm a Z ZZZ").unwrap();
        assert_eq!(
            f.format(1442064600000),
            "Saturday 12 Sep 15 01:30 PM +0000 UTC"
        );
        let paris = Zone::parse("Europe/Paris").unwrap();
        let f = JodaFormat::new("yyyy-MM-dd HH:mm ZZ")
            .unwrap()
            .with_zone(paris);
        assert_eq!(f.format(1442018818771), "2015-09-12 02:46 +02:00");
        assert_eq!(f.parse("2015-09-12 02:46 +02:00").unwrap(), 1442018760000);
        let g = JodaFormat::new("yyyy-MM-dd HH:mm")
            .unwrap()
            .with_zone(paris);
        assert_eq!(g.parse("2015-09-12 02:46").unwrap(), 1442018760000);
    }

    #[test]
    fn zones() {
        assert_eq!(Zone::parse("+05:30"), Some(Zone::Fixed(19800)));
        assert_eq!(Zone::parse("-0800"), Some(Zone::Fixed(-28800)));
        assert_eq!(Zone::parse("UTC"), Some(Zone::Utc));
        assert_eq!(Zone::parse("Nowhere/Land"), None);
        let la = Zone::parse("America/Los_Angeles").unwrap();
        // 2015-03-08 02:30 local does not exist (spring forward); moved past the gap.
        let local = NaiveDate::from_ymd_opt(2015, 3, 8)
            .unwrap()
            .and_hms_opt(2, 30, 0)
            .unwrap()
            .and_utc()
            .timestamp_millis();
        let utc = la.local_to_utc(local).unwrap();
        assert_eq!(la.to_local(utc), local + 3_600_000);
    }
}
