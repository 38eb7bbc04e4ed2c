//! Joda-Time date patterns (`org.joda.time.format.DateTimeFormat.forPattern`), formatting and
//! parsing in a [`Zone`].
//!
//! Druid uses them in `timestampSpec.format` (ingestion), in the expression functions
//! `timestamp_parse` and `timestamp_format`, and in the SQL functions `TIME_PARSE` and
//! `TIME_FORMAT` (`docs/querying/sql-scalar.md`, `docs/querying/math-expr.md`).
//!
//! Pattern letters (all of Joda's): `G` era, `C` century of era, `Y` year of era, `x` week year,
//! `w` week of week year, `e` day of week (number, Monday = 1), `E` day of week (text), `y` year,
//! `D` day of year, `M` month (number, or text from `MMM`), `d` day of month, `a` half day, `K`
//! hour of half day (0-11), `h` clock hour of half day (1-12), `H` hour of day (0-23), `k` clock
//! hour of day (1-24), `m` minute, `s` second, `S` fraction of second, `z` zone name (`PDT`;
//! `zzzz` prints the zone id), `Z` zone offset (`Z` `-0800`, `ZZ` `-08:00`, `ZZZ` zone id
//! `America/Los_Angeles`), `'text'` literals and `''` for a quote; any other non-letter is a
//! literal. Other letters are rejected, as Joda does. Text is English, as Druid's (which uses
//! the JVM default locale, normally `en`). `yy` prints the last two digits of the year.
//!
//! Parsing follows Joda:
//! - literals and text (month and day names, `AM`/`PM`, zone names) match case-insensitively;
//! - a numeric field directly followed by another numeric field takes exactly as many digits as
//!   its pattern letters (`yyyyMMdd`), otherwise up to its natural width (`M` reads `9` or `09`);
//! - `yy` reads a two-digit year in the century around the current year minus 30 (Joda's
//!   pivot), more digits as they are;
//! - missing date fields default to 1970-01-01, missing time fields to midnight; `w`/`e`/`x`
//!   without month and day resolve as an ISO week date;
//! - the whole input must be consumed;
//! - without a parsed offset or zone the text is local time in the zone passed in, and a local
//!   time that falls into a daylight-saving gap is invalid (Joda's `IllegalInstantException`).
//!
//! [`JodaFormat::parse`] errors name the value, the pattern and what went wrong (the position
//! and the expected field, the unparsed rest, or the impossible date or time).

use std::fmt;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Weekday};

use crate::time::TimeError;
use crate::zone::{self, Zone};

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
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Zone abbreviations the `z` parser understands, as Joda's default name provider (the first
/// match wins, so longer names come first).
const ZONE_NAMES: [(&str, &str); 11] = [
    ("UTC", "UTC"),
    ("UT", "UTC"),
    ("GMT", "UTC"),
    ("EST", "America/New_York"),
    ("EDT", "America/New_York"),
    ("CST", "America/Chicago"),
    ("CDT", "America/Chicago"),
    ("MST", "America/Denver"),
    ("MDT", "America/Denver"),
    ("PST", "America/Los_Angeles"),
    ("PDT", "America/Los_Angeles"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Era,
    CenturyOfEra,
    YearOfEra,
    WeekYear,
    WeekOfWeekYear,
    DayOfWeek,
    DayOfWeekText,
    Year,
    DayOfYear,
    Month,
    DayOfMonth,
    HalfDay,
    HourOfHalfDay,
    ClockHourOfHalfDay,
    HourOfDay,
    ClockHourOfDay,
    Minute,
    Second,
    Fraction,
    ZoneName,
    ZoneOffset,
}

/// Every pattern letter and its field.
const LETTERS: [(char, Field); 21] = [
    ('G', Field::Era),
    ('C', Field::CenturyOfEra),
    ('Y', Field::YearOfEra),
    ('x', Field::WeekYear),
    ('w', Field::WeekOfWeekYear),
    ('e', Field::DayOfWeek),
    ('E', Field::DayOfWeekText),
    ('y', Field::Year),
    ('D', Field::DayOfYear),
    ('M', Field::Month),
    ('d', Field::DayOfMonth),
    ('a', Field::HalfDay),
    ('K', Field::HourOfHalfDay),
    ('h', Field::ClockHourOfHalfDay),
    ('H', Field::HourOfDay),
    ('k', Field::ClockHourOfDay),
    ('m', Field::Minute),
    ('s', Field::Second),
    ('S', Field::Fraction),
    ('z', Field::ZoneName),
    ('Z', Field::ZoneOffset),
];

impl Field {
    fn letter(self) -> char {
        LETTERS
            .iter()
            .find(|(_, f)| *f == self)
            .map_or('?', |(c, _)| *c)
    }

    /// What the field is, for parse errors.
    fn describe(self, n: usize) -> &'static str {
        match self {
            Field::Era => "era",
            Field::CenturyOfEra => "century of era",
            Field::YearOfEra => "year of era",
            Field::WeekYear => "week year",
            Field::WeekOfWeekYear => "week of week year",
            Field::DayOfWeek => "day of week",
            Field::DayOfWeekText => "day of week name",
            Field::Year => "year",
            Field::DayOfYear => "day of year",
            Field::Month if n >= 3 => "month name",
            Field::Month => "month",
            Field::DayOfMonth => "day of month",
            Field::HalfDay => "AM/PM",
            Field::HourOfHalfDay
            | Field::ClockHourOfHalfDay
            | Field::HourOfDay
            | Field::ClockHourOfDay => "hour",
            Field::Minute => "minute",
            Field::Second => "second",
            Field::Fraction => "fraction of second",
            Field::ZoneName => "time zone name",
            Field::ZoneOffset if n >= 3 => "time zone id",
            Field::ZoneOffset => "time zone offset",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(String),
    F(Field, usize),
}

impl Tok {
    fn is_numeric(&self) -> bool {
        match self {
            Tok::Lit(_) => false,
            Tok::F(f, n) => match f {
                Field::Era
                | Field::DayOfWeekText
                | Field::HalfDay
                | Field::ZoneName
                | Field::ZoneOffset => false,
                Field::Month => *n < 3,
                _ => true,
            },
        }
    }

    fn describe(&self) -> String {
        match self {
            Tok::Lit(l) => format!("literal [{l}]"),
            Tok::F(f, n) => f.describe(*n).to_string(),
        }
    }
}

/// A compiled Joda-Time pattern (see the module docs for the letters and the parsing rules).
#[derive(Clone, PartialEq, Eq)]
pub struct JodaFormat {
    pattern: String,
    tokens: Vec<Tok>,
}

impl fmt::Debug for JodaFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JodaFormat")
            .field("pattern", &self.pattern)
            .finish()
    }
}

/// Why a parse failed (turned into a message by [`JodaFormat::parse`]).
enum Failure {
    /// Token `index` did not match at byte `pos`.
    Token { index: usize, pos: usize },
    /// Input left over from byte `pos`.
    Trailing { pos: usize },
    /// The fields do not make a valid instant.
    Invalid(Invalid),
}

enum Invalid {
    Year(i64),
    DayOfYear(i64, i64),
    Date(i64, i64, i64),
    WeekDate(i64, i64, i64),
    Time(i64, i64, i64),
    Gap,
}

impl JodaFormat {
    /// Compiles a Joda pattern such as `yyyy-MM-dd HH:mm:ss` or `dd/MMM/yyyy:HH:mm:ss Z`.
    ///
    /// # Errors
    /// A [`TimeError`] naming the pattern when it is empty, has an unknown letter or an
    /// unterminated quote (Joda's `IllegalArgumentException`).
    pub fn compile(pattern: &str) -> Result<JodaFormat, TimeError> {
        if pattern.is_empty() {
            return Err(TimeError("empty Joda pattern".into()));
        }
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens: Vec<Tok> = Vec::new();
        let mut i = 0;
        let push_lit = |tokens: &mut Vec<Tok>, s: &str| {
            if let Some(Tok::Lit(prev)) = tokens.last_mut() {
                prev.push_str(s);
            } else {
                tokens.push(Tok::Lit(s.to_string()));
            }
        };
        while i < chars.len() {
            let c = chars[i];
            if c.is_ascii_alphabetic() {
                let mut n = 1;
                while i + n < chars.len() && chars[i + n] == c {
                    n += 1;
                }
                i += n;
                let Some((_, f)) = LETTERS.iter().find(|(l, _)| *l == c) else {
                    return Err(TimeError(format!(
                        "illegal pattern component [{}] in pattern [{pattern}]",
                        c.to_string().repeat(n)
                    )));
                };
                tokens.push(Tok::F(*f, n));
            } else if c == '\'' {
                if chars.get(i + 1) == Some(&'\'') {
                    push_lit(&mut tokens, "'");
                    i += 2;
                    continue;
                }
                let mut lit = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(TimeError(format!(
                                "unterminated quote in pattern [{pattern}]"
                            )));
                        }
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            lit.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            lit.push(*ch);
                            i += 1;
                        }
                    }
                }
                push_lit(&mut tokens, &lit);
            } else {
                let mut lit = String::new();
                while i < chars.len() && !chars[i].is_ascii_alphabetic() && chars[i] != '\'' {
                    lit.push(chars[i]);
                    i += 1;
                }
                push_lit(&mut tokens, &lit);
            }
        }
        Ok(JodaFormat {
            pattern: pattern.to_string(),
            tokens,
        })
    }

    /// The source pattern.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The pattern letters used, in order (a letter repeated in the pattern once per run),
    /// for callers that support only some fields.
    pub fn letters(&self) -> impl Iterator<Item = char> + '_ {
        self.tokens.iter().filter_map(|t| match t {
            Tok::F(f, _) => Some(f.letter()),
            Tok::Lit(_) => None,
        })
    }

    /// Formats instant `ms` in `zone` into a new string (empty when out of range).
    pub fn format(&self, ms: i64, zone: &Zone) -> String {
        let mut s = String::with_capacity(self.pattern.len() + 8);
        self.format_into(ms, zone, &mut s);
        s
    }

    /// Appends instant `ms` formatted in `zone` to `out` (nothing when out of range).
    pub fn format_into(&self, ms: i64, zone: &Zone, out: &mut String) {
        let off = zone.offset_ms(ms);
        let Some(dt) = ms
            .checked_add(off)
            .and_then(DateTime::from_timestamp_millis)
            .map(|d| d.naive_utc())
        else {
            return;
        };
        let year = i64::from(dt.year());
        for tok in &self.tokens {
            let (f, n) = match tok {
                Tok::Lit(s) => {
                    out.push_str(s);
                    continue;
                }
                Tok::F(f, n) => (*f, *n),
            };
            match f {
                Field::Era => out.push_str(if year > 0 { "AD" } else { "BC" }),
                Field::CenturyOfEra => {
                    let yoe = if year > 0 { year } else { 1 - year };
                    push_padded(out, yoe / 100, n);
                }
                Field::YearOfEra => {
                    let yoe = if year > 0 { year } else { 1 - year };
                    push_year(out, yoe, n);
                }
                Field::WeekYear => push_year(out, i64::from(dt.iso_week().year()), n),
                Field::WeekOfWeekYear => push_padded(out, i64::from(dt.iso_week().week()), n),
                Field::DayOfWeek => {
                    push_padded(out, i64::from(dt.weekday().number_from_monday()), n)
                }
                Field::DayOfWeekText => {
                    let name = DAYS[dt.weekday().num_days_from_monday() as usize];
                    out.push_str(if n >= 4 { name } else { &name[..3] });
                }
                Field::Year => push_year(out, year, n),
                Field::DayOfYear => push_padded(out, i64::from(dt.ordinal()), n),
                Field::Month => {
                    if n >= 3 {
                        let name = MONTHS[dt.month0() as usize];
                        out.push_str(if n >= 4 { name } else { &name[..3] });
                    } else {
                        push_padded(out, i64::from(dt.month()), n);
                    }
                }
                Field::DayOfMonth => push_padded(out, i64::from(dt.day()), n),
                Field::HalfDay => out.push_str(if dt.hour() < 12 { "AM" } else { "PM" }),
                Field::HourOfHalfDay => push_padded(out, i64::from(dt.hour() % 12), n),
                Field::ClockHourOfHalfDay => {
                    let h = dt.hour() % 12;
                    push_padded(out, i64::from(if h == 0 { 12 } else { h }), n);
                }
                Field::HourOfDay => push_padded(out, i64::from(dt.hour()), n),
                Field::ClockHourOfDay => push_padded(
                    out,
                    i64::from(if dt.hour() == 0 { 24 } else { dt.hour() }),
                    n,
                ),
                Field::Minute => push_padded(out, i64::from(dt.minute()), n),
                Field::Second => push_padded(out, i64::from(dt.second()), n),
                Field::Fraction => {
                    // The millisecond digits, cut or right-padded with zeros to `n` digits.
                    let millis = dt.and_utc().timestamp_subsec_millis();
                    let digits = [millis / 100, millis / 10 % 10, millis % 10];
                    for i in 0..n {
                        let d = digits.get(i).copied().unwrap_or(0);
                        out.push(char::from(b'0' + d as u8));
                    }
                }
                Field::ZoneName => {
                    if zone.is_utc() {
                        out.push_str("UTC");
                    } else if n >= 4 {
                        out.push_str(&zone.id());
                    } else {
                        out.push_str(&zone.short_name(ms));
                    }
                }
                Field::ZoneOffset => match n {
                    1 => zone::push_offset(out, off, false, false),
                    2 => zone::push_offset(out, off, true, false),
                    _ => out.push_str(&zone.id()),
                },
            }
        }
    }

    /// Parses `s` with this pattern into an instant (ms); fields without a parsed offset or
    /// zone are local time in `zone`.
    ///
    /// # Errors
    /// A [`TimeError`] naming the value, the pattern and the problem: the position and the
    /// field expected there, input left over, an impossible date or time, or a local time in a
    /// daylight-saving gap.
    pub fn parse(&self, s: &str, zone: &Zone) -> Result<i64, TimeError> {
        self.parse_inner(s, zone).map_err(|failure| {
            let p = &self.pattern;
            TimeError(match failure {
                Failure::Token { index, pos } => format!(
                    "value [{s}] does not match pattern [{p}] at position {pos} (expected {})",
                    self.tokens[index].describe()
                ),
                Failure::Trailing { pos } => format!(
                    "value [{s}] is malformed at [{}] for pattern [{p}]",
                    s.get(pos..).unwrap_or("")
                ),
                Failure::Invalid(why) => {
                    let why = match why {
                        Invalid::Year(y) => format!("year {y} is out of range"),
                        Invalid::DayOfYear(y, d) => {
                            format!("day of year {d} is out of range for year {y}")
                        }
                        Invalid::Date(y, m, d) => format!("invalid date {y:04}-{m:02}-{d:02}"),
                        Invalid::WeekDate(y, w, d) => {
                            format!("invalid week date {y:04}-W{w:02}-{d}")
                        }
                        Invalid::Time(h, m, sec) => {
                            format!("invalid time {h:02}:{m:02}:{sec:02}")
                        }
                        Invalid::Gap => format!(
                            "the local time does not exist in time zone [{zone}] (daylight-saving gap)"
                        ),
                    };
                    format!("value [{s}] for pattern [{p}]: {why}")
                }
            })
        })
    }

    /// [`JodaFormat::parse`] without the error message (`None` when `s` does not parse), for
    /// callers that only need to know (Druid's `TIME_PARSE` returns null).
    pub fn parse_opt(&self, s: &str, zone: &Zone) -> Option<i64> {
        self.parse_inner(s, zone).ok()
    }

    fn parse_inner(&self, s: &str, zone: &Zone) -> Result<i64, Failure> {
        let b = s.as_bytes();
        let mut pos = 0_usize;
        let mut p = Parsed::default();
        for (index, tok) in self.tokens.iter().enumerate() {
            let start = pos;
            let matched = match tok {
                Tok::Lit(lit) => {
                    let lb = lit.as_bytes();
                    let ok = b
                        .get(pos..pos + lb.len())
                        .is_some_and(|part| part.eq_ignore_ascii_case(lb));
                    if ok {
                        pos += lb.len();
                    }
                    ok
                }
                Tok::F(f, n) => {
                    let next_numeric = self.tokens.get(index + 1).is_some_and(Tok::is_numeric);
                    parse_field(*f, *n, next_numeric, b, &mut pos, &mut p).is_some()
                }
            };
            if !matched {
                return Err(Failure::Token { index, pos: start });
            }
        }
        if pos != b.len() {
            return Err(Failure::Trailing { pos });
        }
        p.resolve(zone).map_err(Failure::Invalid)
    }
}

/// Reads field `f` (`n` pattern letters) at `*pos` into `p`; `None` when it does not match.
fn parse_field(
    f: Field,
    n: usize,
    next_numeric: bool,
    b: &[u8],
    pos: &mut usize,
    p: &mut Parsed,
) -> Option<()> {
    // Adjacent numeric fields take exactly `n` digits; others up to `max`.
    let num = |pos: &mut usize, max: usize, signed: bool| -> Option<i64> {
        if next_numeric {
            parse_int(b, pos, n, n, signed)
        } else {
            parse_int(b, pos, 1, max, signed)
        }
    };
    match f {
        Field::Era => {
            let v = parse_text(b, pos, &[("AD", 1), ("BC", 0), ("CE", 1), ("BCE", 0)])?;
            p.bc = v == 0;
        }
        Field::CenturyOfEra => p.century = Some(num(pos, 7, false)?),
        Field::YearOfEra | Field::Year | Field::WeekYear => {
            let signed = f != Field::YearOfEra;
            let v = if n == 2 {
                let start = *pos;
                let v = if next_numeric {
                    parse_int(b, pos, 2, 2, false)?
                } else {
                    parse_int(b, pos, 1, 9, true)?
                };
                if *pos - start == 2 {
                    two_digit_year(v)
                } else {
                    v
                }
            } else {
                num(pos, 9, signed)?
            };
            match f {
                Field::YearOfEra => p.year_of_era = Some(v),
                Field::Year => p.year = Some(v),
                _ => p.week_year = Some(v),
            }
        }
        Field::WeekOfWeekYear => p.week = Some(num(pos, 2, false)?),
        Field::DayOfWeek => p.dow = Some(num(pos, 1, false)?),
        Field::DayOfWeekText => {
            let mut names: Vec<(&str, i64)> = Vec::with_capacity(14);
            for (i, d) in DAYS.iter().enumerate() {
                names.push((d, i as i64 + 1));
                names.push((&d[..3], i as i64 + 1));
            }
            p.dow = Some(parse_text(b, pos, &names)?);
        }
        Field::DayOfYear => p.doy = Some(num(pos, 3, false)?),
        Field::Month => {
            if n >= 3 {
                let mut names: Vec<(&str, i64)> = Vec::with_capacity(24);
                for (i, m) in MONTHS.iter().enumerate() {
                    names.push((m, i as i64 + 1));
                    names.push((&m[..3], i as i64 + 1));
                }
                p.month = Some(parse_text(b, pos, &names)?);
            } else {
                p.month = Some(num(pos, 2, false)?);
            }
        }
        Field::DayOfMonth => p.day = Some(num(pos, 2, false)?),
        Field::HalfDay => p.pm = Some(parse_text(b, pos, &[("AM", 0), ("PM", 1)])? == 1),
        Field::HourOfHalfDay => p.hour_of_half = Some(num(pos, 2, false)?),
        Field::ClockHourOfHalfDay => {
            let v = num(pos, 2, false)?;
            if !(1..=12).contains(&v) {
                return None;
            }
            p.hour_of_half = Some(v % 12);
        }
        Field::HourOfDay => p.hour = Some(num(pos, 2, false)?),
        Field::ClockHourOfDay => {
            let v = num(pos, 2, false)?;
            if !(1..=24).contains(&v) {
                return None;
            }
            p.hour = Some(v % 24);
        }
        Field::Minute => p.minute = Some(num(pos, 2, false)?),
        Field::Second => p.second = Some(num(pos, 2, false)?),
        Field::Fraction => {
            let start = *pos;
            let v = parse_int(b, pos, 1, n, false)?;
            let digits = (*pos - start) as u32;
            p.millis = Some(if digits <= 3 {
                v * 10_i64.pow(3 - digits)
            } else {
                v / 10_i64.checked_pow(digits - 3)?
            });
        }
        Field::ZoneName => {
            let found = ZONE_NAMES.iter().find(|(abbr, _)| {
                b.get(*pos..*pos + abbr.len())
                    .is_some_and(|part| part.eq_ignore_ascii_case(abbr.as_bytes()))
            });
            match found {
                Some((abbr, id)) => {
                    *pos += abbr.len();
                    p.zone = Zone::parse(id).ok();
                }
                None => p.zone = Some(parse_zone_id(b, pos)?),
            }
        }
        Field::ZoneOffset => {
            if n >= 3 {
                p.zone = Some(parse_zone_id(b, pos)?);
            } else {
                p.offset_secs = Some(zone::parse_offset(b, pos)?);
            }
        }
    }
    Some(())
}

/// Appends `v` in decimal, zero-padded to at least `width` digits (a `-` sign comes first).
fn push_padded(out: &mut String, v: i64, width: usize) {
    use std::fmt::Write;
    if v < 0 {
        out.push('-');
    }
    let _ = write!(out, "{:0width$}", v.unsigned_abs());
}

fn push_year(out: &mut String, year: i64, n: usize) {
    if n == 2 {
        push_padded(out, year.abs() % 100, 2);
    } else {
        push_padded(out, year, n);
    }
}

/// Joda's `appendTwoDigitYear(now.year - 30)`: a 100-year window from pivot-50 to pivot+49.
fn two_digit_year(v: i64) -> i64 {
    let pivot = i64::from(chrono::Utc::now().year()) - 30;
    let low = pivot - 50;
    let mut y = low - low.rem_euclid(100) + v;
    if y < low {
        y += 100;
    }
    y
}

/// Reads `min..=max` ASCII digits (after a sign when `signed`) at `*pos`.
fn parse_int(b: &[u8], pos: &mut usize, min: usize, max: usize, signed: bool) -> Option<i64> {
    let mut i = *pos;
    let mut neg = false;
    if signed && i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        neg = b[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: i64 = 0;
    while i < b.len() && i - start < max && b[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add(i64::from(b[i] - b'0'))?;
        i += 1;
    }
    if i - start < min || i == start {
        return None;
    }
    *pos = i;
    Some(if neg { -v } else { v })
}

/// The longest of `names` at `*pos` (case-insensitive), returning its value.
fn parse_text(b: &[u8], pos: &mut usize, names: &[(&str, i64)]) -> Option<i64> {
    let mut best: Option<(usize, i64)> = None;
    for (name, v) in names {
        let nb = name.as_bytes();
        if b.get(*pos..*pos + nb.len())
            .is_some_and(|part| part.eq_ignore_ascii_case(nb))
            && best.is_none_or(|(l, _)| nb.len() > l)
        {
            best = Some((nb.len(), *v));
        }
    }
    let (len, v) = best?;
    *pos += len;
    Some(v)
}

/// The longest run of `[A-Za-z0-9/_+-]` at `*pos` that names a zone.
fn parse_zone_id(b: &[u8], pos: &mut usize) -> Option<Zone> {
    let start = *pos;
    let mut end = start;
    while end < b.len()
        && (b[end].is_ascii_alphanumeric() || matches!(b[end], b'/' | b'_' | b'+' | b'-'))
    {
        end += 1;
    }
    while end > start {
        if let Ok(s) = std::str::from_utf8(&b[start..end])
            && let Ok(zone) = Zone::parse(s)
        {
            *pos = end;
            return Some(zone);
        }
        end -= 1;
    }
    None
}

#[derive(Debug, Default)]
struct Parsed {
    bc: bool,
    century: Option<i64>,
    year: Option<i64>,
    year_of_era: Option<i64>,
    week_year: Option<i64>,
    week: Option<i64>,
    dow: Option<i64>,
    doy: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    pm: Option<bool>,
    hour: Option<i64>,
    hour_of_half: Option<i64>,
    minute: Option<i64>,
    second: Option<i64>,
    millis: Option<i64>,
    offset_secs: Option<i32>,
    zone: Option<Zone>,
}

impl Parsed {
    fn resolve(&self, zone: &Zone) -> Result<i64, Invalid> {
        let year = match (self.year, self.year_of_era, self.century) {
            (Some(y), _, _) => y,
            (None, Some(yoe), _) => {
                if self.bc {
                    1 - yoe
                } else {
                    yoe
                }
            }
            (None, None, Some(c)) => c * 100,
            (None, None, None) => 1970,
        };
        let y = i32::try_from(year).map_err(|_| Invalid::Year(year))?;
        let date = if let Some(doy) = self.doy {
            u32::try_from(doy)
                .ok()
                .and_then(|d| NaiveDate::from_yo_opt(y, d))
                .ok_or(Invalid::DayOfYear(year, doy))?
        } else if self.month.is_none()
            && self.day.is_none()
            && (self.week.is_some() || self.week_year.is_some() || self.dow.is_some())
        {
            let wy = self.week_year.unwrap_or(year);
            let week = self.week.unwrap_or(1);
            let dow = self.dow.unwrap_or(1);
            let bad = Invalid::WeekDate(wy, week, dow);
            let weekday = match dow {
                1 => Weekday::Mon,
                2 => Weekday::Tue,
                3 => Weekday::Wed,
                4 => Weekday::Thu,
                5 => Weekday::Fri,
                6 => Weekday::Sat,
                7 => Weekday::Sun,
                _ => return Err(bad),
            };
            match (i32::try_from(wy), u32::try_from(week)) {
                (Ok(wy), Ok(week)) => NaiveDate::from_isoywd_opt(wy, week, weekday).ok_or(bad)?,
                _ => return Err(bad),
            }
        } else {
            let (m, d) = (self.month.unwrap_or(1), self.day.unwrap_or(1));
            match (u32::try_from(m), u32::try_from(d)) {
                (Ok(mu), Ok(du)) => {
                    NaiveDate::from_ymd_opt(y, mu, du).ok_or(Invalid::Date(year, m, d))?
                }
                _ => return Err(Invalid::Date(year, m, d)),
            }
        };
        let hour = match (self.hour, self.hour_of_half) {
            (Some(h), _) => h,
            (None, Some(h)) => h + if self.pm == Some(true) { 12 } else { 0 },
            (None, None) => {
                if self.pm == Some(true) {
                    12
                } else {
                    0
                }
            }
        };
        let (minute, second) = (self.minute.unwrap_or(0), self.second.unwrap_or(0));
        let bad_time = || Invalid::Time(hour, minute, second);
        let half_day_ok = self.hour.is_some() || self.hour_of_half.is_none_or(|h| h < 12);
        let time = match (
            u32::try_from(hour),
            u32::try_from(minute),
            u32::try_from(second),
            u32::try_from(self.millis.unwrap_or(0)),
        ) {
            (Ok(h), Ok(m), Ok(s), Ok(ms)) if half_day_ok => {
                NaiveTime::from_hms_milli_opt(h, m, s, ms).ok_or_else(bad_time)?
            }
            _ => return Err(bad_time()),
        };
        let local = NaiveDateTime::new(date, time).and_utc().timestamp_millis();
        if let Some(off) = self.offset_secs {
            return Ok(local - i64::from(off) * 1000);
        }
        self.zone
            .as_ref()
            .unwrap_or(zone)
            .local_to_utc_strict(local)
            .ok_or(Invalid::Gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{format_iso_millis, parse_iso_instant, parse_time_zone};

    fn la() -> Zone {
        parse_time_zone("America/Los_Angeles").unwrap()
    }

    const UTC: Zone = Zone::Utc;

    #[test]
    fn formats() {
        let t = parse_iso_instant("2015-09-12T13:04:05.007Z").unwrap();
        let f = |p: &str, tz: &Zone| JodaFormat::compile(p).unwrap().format(t, tz);
        assert_eq!(
            f("yyyy-MM-dd HH:mm:ss.SSS", &UTC),
            "2015-09-12 13:04:05.007"
        );
        assert_eq!(f("yy/M/d h:mm a", &UTC), "15/9/12 1:04 PM");
        assert_eq!(f("EEE, dd MMM yyyy", &UTC), "Sat, 12 Sep 2015");
        assert_eq!(f("EEEE MMMM", &UTC), "Saturday September");
        assert_eq!(
            f("yyyy-MM-dd'T'HH:mm:ssZZ", &la()),
            "2015-09-12T06:04:05-07:00"
        );
        assert_eq!(f("HH:mm Z", &UTC), "13:04 +0000");
        assert_eq!(f("HH:mm z", &la()), "06:04 PDT");
        assert_eq!(f("ZZZ", &la()), "America/Los_Angeles");
        assert_eq!(f("D w e x", &UTC), "255 37 6 2015");
        assert_eq!(f("'quote''s' k K", &UTC), "quote's 13 1");
        assert_eq!(f("S SS SSSS", &UTC), "0 00 0070");
        assert!(JodaFormat::compile("yyyy-QQ").is_err());
        assert!(JodaFormat::compile("yyyy 'open").is_err());
    }

    #[test]
    fn parses() {
        let p = |pat: &str, s: &str, tz: &Zone| {
            JodaFormat::compile(pat)
                .unwrap()
                .parse_opt(s, tz)
                .map(format_iso_millis)
        };
        assert_eq!(
            p("yyyy-MM-dd HH:mm:ss", "2015-09-12 13:04:05", &UTC).as_deref(),
            Some("2015-09-12T13:04:05.000Z")
        );
        assert_eq!(
            p("yyyy-MM-dd HH:mm:ss", "2015-09-12 13:04:05", &la()).as_deref(),
            Some("2015-09-12T20:04:05.000Z")
        );
        assert_eq!(
            p("dd/MMM/yyyy:HH:mm:ss Z", "12/Sep/2015:13:04:05 -0700", &UTC).as_deref(),
            Some("2015-09-12T20:04:05.000Z")
        );
        assert_eq!(
            p("yyyyMMddHHmm", "201509121304", &UTC).as_deref(),
            Some("2015-09-12T13:04:00.000Z")
        );
        assert_eq!(
            p("M/d/yy h:mm a", "9/12/15 1:04 pm", &UTC).as_deref(),
            Some("2015-09-12T13:04:00.000Z")
        );
        assert_eq!(p("yyyy-MM-dd", "2015-02-30", &UTC), None);
        assert_eq!(p("yyyy-MM-dd", "2015-09-12x", &UTC), None);
        assert_eq!(p("yyyy-MM-dd", "garbage", &UTC), None);
        assert_eq!(p("yyyy-MM-dd HH:mm", "2015-03-08 02:30", &la()), None); // DST gap
        assert_eq!(
            p(
                "yyyy-MM-dd'T'HH:mm:ss.SSSZZ",
                "2015-09-12T13:04:05.120+02:00",
                &UTC
            )
            .as_deref(),
            Some("2015-09-12T11:04:05.120Z")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let p = |format: &str, s: &str| JodaFormat::compile(format).unwrap().parse(s, &UTC);
        for (format, value, message) in [
            (
                "yyyy-MM-dd",
                "2015-09",
                "value [2015-09] does not match pattern [yyyy-MM-dd] at position 7 (expected literal [-])",
            ),
            (
                "yyyy-MM-dd",
                "2015-09-12x",
                "value [2015-09-12x] is malformed at [x] for pattern [yyyy-MM-dd]",
            ),
            (
                "yyyy-MM-dd",
                "2015-02-30",
                "value [2015-02-30] for pattern [yyyy-MM-dd]: invalid date 2015-02-30",
            ),
            (
                "HH:mm",
                "25:00",
                "value [25:00] for pattern [HH:mm]: invalid time 25:00:00",
            ),
            (
                "dd MMM",
                "12 Se",
                "value [12 Se] does not match pattern [dd MMM] at position 3 (expected month name)",
            ),
        ] {
            assert_eq!(p(format, value).unwrap_err().to_string(), message);
        }
        let gap = JodaFormat::compile("yyyy-MM-dd HH:mm")
            .unwrap()
            .parse("2015-03-08 02:30", &la())
            .unwrap_err();
        assert!(gap.to_string().contains("daylight-saving gap"), "{gap}");
        for bad in ["yyyy-QQ", "yyyy 'unterminated", ""] {
            let err = JodaFormat::compile(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("[{bad}]")) || bad.is_empty(), "{err}");
        }
    }

    #[test]
    fn joda_format_roundtrip() {
        let f = JodaFormat::compile("yyyy-MM-dd'T'HH:mm:ss.SSSZZ").unwrap();
        assert_eq!(
            f.format(1442018818771, &UTC),
            "2015-09-12T00:46:58.771+00:00"
        );
        let f = JodaFormat::compile("EEEE dd MMM yy hh:mm a Z ZZZ").unwrap();
        assert_eq!(
            f.format(1442064600000, &UTC),
            "Saturday 12 Sep 15 01:30 PM +0000 UTC"
        );
        let paris = Zone::parse("Europe/Paris").unwrap();
        let f = JodaFormat::compile("yyyy-MM-dd HH:mm ZZ").unwrap();
        assert_eq!(f.format(1442018818771, &paris), "2015-09-12 02:46 +02:00");
        assert_eq!(
            f.parse("2015-09-12 02:46 +02:00", &paris).unwrap(),
            1442018760000
        );
        let g = JodaFormat::compile("yyyy-MM-dd HH:mm").unwrap();
        assert_eq!(g.parse("2015-09-12 02:46", &paris).unwrap(), 1442018760000);
    }

    #[test]
    fn fixed_offsets_and_letters() {
        let ist = Zone::parse("+05:30").unwrap();
        let f = JodaFormat::compile("yyyy-MM-dd HH:mm Z ZZ ZZZ z").unwrap();
        assert_eq!(
            f.format(1442018818771, &ist),
            "2015-09-12 06:16 +0530 +05:30 +05:30 +05:30"
        );
        let g = JodaFormat::compile("yyyy-MM-dd HH:mm").unwrap();
        assert_eq!(g.parse("2015-09-12 06:16", &ist).unwrap(), 1442018760000);
        let letters: String = JodaFormat::compile("yyyy-MM-dd'T'HH G")
            .unwrap()
            .letters()
            .collect();
        assert_eq!(letters, "yMdHG");
        assert_eq!(
            JodaFormat::compile("SSSSSSSSSSSSSSSSSSSSSSSS")
                .unwrap()
                .format(1442018818771, &UTC),
            "771000000000000000000000"
        );
    }
}
