//! Joda-Time date formats, as Druid's `TIME_FORMAT` and `TIME_PARSE` use them
//! (`docs/querying/sql-scalar.md`; patterns are `org.joda.time.format.DateTimeFormat`'s), plus a
//! fast writer for Joda's ISO `dateTime()` format that Druid uses for every TIMESTAMP it prints.
//!
//! Supported pattern letters (all of Joda's): `G` era, `C` century of era, `Y` year of era,
//! `x` week year, `w` week of week year, `e` day of week (number), `E` day of week (text), `y`
//! year, `D` day of year, `M` month (number, or text from `MMM`), `d` day of month, `a` half day,
//! `K` hour of half day (0-11), `h` clock hour of half day (1-12), `H` hour of day (0-23), `k`
//! clock hour of day (1-24), `m` minute, `s` second, `S` fraction of second, `z` zone name, `Z`
//! zone offset (`Z` `-0800`, `ZZ` `-08:00`, `ZZZ` zone id), `'text'` literals and `''` for a quote.
//! Text is English, as Druid's (which uses the JVM default locale, normally `en`).
//!
//! Parsing follows Joda: literals match case-insensitively, a numeric field followed directly by
//! another numeric field takes exactly as many digits as its pattern letters, `yy` is a two-digit
//! year pivoting around the current year minus 30, the whole input must be consumed, and a local
//! time that falls into a daylight-saving gap is invalid.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Timelike};
use chrono_tz::{OffsetName, Tz};
use dolmen_common::time::{format_iso_millis_tz, parse_iso_instant};

use super::period::{local_to_utc_strict, offset_ms};

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

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day), by pure integer
/// arithmetic (H. Hinnant's `civil_from_days`).
#[inline]
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[inline]
fn push_2(out: &mut String, v: u32) {
    out.push(char::from(b'0' + (v / 10 % 10) as u8));
    out.push(char::from(b'0' + (v % 10) as u8));
}

/// Appends `v` in decimal, zero-padded to at least `width` digits (a `-` sign comes first).
pub fn push_padded(out: &mut String, v: i64, width: usize) {
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
        out.push('-');
    }
    for _ in (buf.len() - i)..width {
        out.push('0');
    }
    for b in &buf[i..] {
        out.push(char::from(*b));
    }
}

/// Appends a UTC offset as Joda's ISO printer does: `Z` for zero, else `+hh:mm` (and `:ss` when
/// the offset has seconds).
fn push_iso_offset(out: &mut String, off_ms: i64) {
    if off_ms == 0 {
        out.push('Z');
        return;
    }
    let secs = off_ms.abs() / 1000;
    out.push(if off_ms < 0 { '-' } else { '+' });
    push_2(out, (secs / 3600) as u32);
    out.push(':');
    push_2(out, (secs / 60 % 60) as u32);
    if secs % 60 != 0 {
        out.push(':');
        push_2(out, (secs % 60) as u32);
    }
}

/// Appends instant `ms` as Druid prints TIMESTAMP values: Joda `ISODateTimeFormat.dateTime()`
/// in `tz`, e.g. `2015-09-12T00:46:58.771Z` or `2015-09-11T17:46:58.771-07:00`.
///
/// Pure integer arithmetic in UTC; one offset lookup per value in other zones.
pub fn push_iso_millis(out: &mut String, ms: i64, tz: &Tz) {
    let off = offset_ms(tz, ms);
    let Some(local) = ms.checked_add(off) else {
        out.push_str(&format_iso_millis_tz(ms, tz));
        return;
    };
    let days = local.div_euclid(86_400_000);
    let msd = local.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        out.push_str(&format_iso_millis_tz(ms, tz));
        return;
    }
    push_padded(out, y, 4);
    out.push('-');
    push_2(out, m);
    out.push('-');
    push_2(out, d);
    out.push('T');
    push_2(out, (msd / 3_600_000) as u32);
    out.push(':');
    push_2(out, (msd / 60_000 % 60) as u32);
    out.push(':');
    push_2(out, (msd / 1000 % 60) as u32);
    out.push('.');
    let frac = (msd % 1000) as u32;
    out.push(char::from(b'0' + (frac / 100) as u8));
    push_2(out, frac % 100);
    push_iso_offset(out, off);
}

/// Parses an ISO 8601 instant the way Druid's `TIME_PARSE` default parser does: a date
/// (`2015`, `2015-09`, `2015-09-12`), optionally `T` or a space and a time, optionally a `Z` or
/// offset; without an offset the text is local time in `tz`. `None` when unparseable.
pub fn parse_iso_in_zone(s: &str, tz: &Tz) -> Option<i64> {
    if *tz == Tz::UTC || has_zone_designator(s) {
        return parse_iso_instant(s).ok();
    }
    let as_utc = parse_iso_instant(s).ok()?;
    let local = DateTime::from_timestamp_millis(as_utc)?.naive_utc();
    local_to_utc_strict(tz, local)
}

fn has_zone_designator(s: &str) -> bool {
    let t = s.trim();
    if t.ends_with(['Z', 'z']) {
        return true;
    }
    match t.find(['T', 't', ' ']) {
        Some(i) => t[i + 1..].contains(['+', '-']),
        None => false,
    }
}

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
}

/// A compiled Joda-Time pattern (`DateTimeFormat.forPattern`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JodaFormat {
    tokens: Vec<Tok>,
}

impl JodaFormat {
    /// Compiles a Joda pattern such as `yyyy-MM-dd HH:mm:ss` or `dd/MMM/yyyy:HH:mm:ss Z`.
    ///
    /// # Errors
    /// A message naming the pattern when it has an unknown letter or an unterminated quote
    /// (Joda's `IllegalArgumentException`).
    pub fn compile(pattern: &str) -> Result<JodaFormat, String> {
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
                let f = match c {
                    'G' => Field::Era,
                    'C' => Field::CenturyOfEra,
                    'Y' => Field::YearOfEra,
                    'x' => Field::WeekYear,
                    'w' => Field::WeekOfWeekYear,
                    'e' => Field::DayOfWeek,
                    'E' => Field::DayOfWeekText,
                    'y' => Field::Year,
                    'D' => Field::DayOfYear,
                    'M' => Field::Month,
                    'd' => Field::DayOfMonth,
                    'a' => Field::HalfDay,
                    'K' => Field::HourOfHalfDay,
                    'h' => Field::ClockHourOfHalfDay,
                    'H' => Field::HourOfDay,
                    'k' => Field::ClockHourOfDay,
                    'm' => Field::Minute,
                    's' => Field::Second,
                    'S' => Field::Fraction,
                    'z' => Field::ZoneName,
                    'Z' => Field::ZoneOffset,
                    other => {
                        return Err(format!(
                            "Illegal pattern component: {} in pattern [{pattern}]",
                            other.to_string().repeat(n)
                        ));
                    }
                };
                tokens.push(Tok::F(f, n));
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
                        None => return Err(format!("Unterminated quote in pattern [{pattern}]")),
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
        Ok(JodaFormat { tokens })
    }

    /// Appends instant `ms` formatted in `tz` to `out`.
    pub fn format_into(&self, ms: i64, tz: &Tz, out: &mut String) {
        let off = offset_ms(tz, ms);
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
                    let millis = i64::from(dt.and_utc().timestamp_subsec_millis());
                    let v = if n <= 3 {
                        millis / 10_i64.pow(3 - n as u32)
                    } else {
                        millis.saturating_mul(10_i64.saturating_pow((n - 3).min(15) as u32))
                    };
                    push_padded(out, v, n);
                }
                Field::ZoneName => {
                    if *tz == Tz::UTC {
                        out.push_str("UTC");
                    } else if n >= 4 {
                        out.push_str(tz.name());
                    } else {
                        let o = DateTime::from_timestamp_millis(ms)
                            .map(|d| tz.offset_from_utc_datetime(&d.naive_utc()));
                        match o.as_ref().and_then(|o| o.abbreviation()) {
                            Some(a) => out.push_str(a),
                            None => push_offset(out, off, true),
                        }
                    }
                }
                Field::ZoneOffset => match n {
                    1 => push_offset(out, off, false),
                    2 => push_offset(out, off, true),
                    _ => out.push_str(tz.name()),
                },
            }
        }
    }

    /// Formats instant `ms` in `tz` into a new string.
    pub fn format(&self, ms: i64, tz: &Tz) -> String {
        let mut s = String::new();
        self.format_into(ms, tz, &mut s);
        s
    }

    /// Parses `s` with this pattern; fields without a parsed offset or zone are local time in
    /// `tz`. `None` when the text does not match (Druid's `TIME_PARSE` then returns null).
    pub fn parse(&self, s: &str, tz: &Tz) -> Option<i64> {
        let b = s.as_bytes();
        let mut pos = 0_usize;
        let mut p = Parsed::default();
        for (idx, tok) in self.tokens.iter().enumerate() {
            let next_numeric = self.tokens.get(idx + 1).is_some_and(Tok::is_numeric);
            match tok {
                Tok::Lit(lit) => {
                    let lb = lit.as_bytes();
                    if b.len() < pos + lb.len() || !b[pos..pos + lb.len()].eq_ignore_ascii_case(lb)
                    {
                        return None;
                    }
                    pos += lb.len();
                }
                Tok::F(f, n) => {
                    let n = *n;
                    let fixed = if next_numeric { Some(n) } else { None };
                    let num = |pos: &mut usize, max: usize, signed: bool| -> Option<i64> {
                        match fixed {
                            Some(w) => parse_int(b, pos, w, w, signed),
                            None => parse_int(b, pos, 1, max, signed),
                        }
                    };
                    match f {
                        Field::Era => {
                            let v = parse_text(
                                b,
                                &mut pos,
                                &[("AD", 1), ("BC", 0), ("CE", 1), ("BCE", 0)],
                            )?;
                            p.bc = v == 0;
                        }
                        Field::CenturyOfEra => p.century = Some(num(&mut pos, 7, false)?),
                        Field::YearOfEra | Field::Year | Field::WeekYear => {
                            let signed = *f != Field::YearOfEra;
                            let v = if n == 2 {
                                let start = pos;
                                let v = if next_numeric {
                                    parse_int(b, &mut pos, 2, 2, false)?
                                } else {
                                    parse_int(b, &mut pos, 1, 9, true)?
                                };
                                if pos - start == 2 {
                                    two_digit_year(v)
                                } else {
                                    v
                                }
                            } else {
                                num(&mut pos, 9, signed)?
                            };
                            match f {
                                Field::YearOfEra => p.year_of_era = Some(v),
                                Field::Year => p.year = Some(v),
                                _ => p.week_year = Some(v),
                            }
                        }
                        Field::WeekOfWeekYear => p.week = Some(num(&mut pos, 2, false)?),
                        Field::DayOfWeek => p.dow = Some(num(&mut pos, 1, false)?),
                        Field::DayOfWeekText => {
                            let mut names: Vec<(&str, i64)> = Vec::with_capacity(14);
                            for (i, d) in DAYS.iter().enumerate() {
                                names.push((d, i as i64 + 1));
                                names.push((&d[..3], i as i64 + 1));
                            }
                            p.dow = Some(parse_text(b, &mut pos, &names)?);
                        }
                        Field::DayOfYear => p.doy = Some(num(&mut pos, 3, false)?),
                        Field::Month => {
                            if n >= 3 {
                                let mut names: Vec<(&str, i64)> = Vec::with_capacity(24);
                                for (i, m) in MONTHS.iter().enumerate() {
                                    names.push((m, i as i64 + 1));
                                    names.push((&m[..3], i as i64 + 1));
                                }
                                p.month = Some(parse_text(b, &mut pos, &names)?);
                            } else {
                                p.month = Some(num(&mut pos, 2, false)?);
                            }
                        }
                        Field::DayOfMonth => p.day = Some(num(&mut pos, 2, false)?),
                        Field::HalfDay => {
                            p.pm = Some(parse_text(b, &mut pos, &[("AM", 0), ("PM", 1)])? == 1)
                        }
                        Field::HourOfHalfDay => p.hour_of_half = Some(num(&mut pos, 2, false)?),
                        Field::ClockHourOfHalfDay => {
                            let v = num(&mut pos, 2, false)?;
                            if !(1..=12).contains(&v) {
                                return None;
                            }
                            p.hour_of_half = Some(v % 12);
                        }
                        Field::HourOfDay => p.hour = Some(num(&mut pos, 2, false)?),
                        Field::ClockHourOfDay => {
                            let v = num(&mut pos, 2, false)?;
                            if !(1..=24).contains(&v) {
                                return None;
                            }
                            p.hour = Some(v % 24);
                        }
                        Field::Minute => p.minute = Some(num(&mut pos, 2, false)?),
                        Field::Second => p.second = Some(num(&mut pos, 2, false)?),
                        Field::Fraction => {
                            let start = pos;
                            let v = parse_int(b, &mut pos, 1, n, false)?;
                            let digits = (pos - start) as u32;
                            p.millis = Some(if digits <= 3 {
                                v * 10_i64.pow(3 - digits)
                            } else {
                                v / 10_i64.checked_pow(digits - 3)?
                            });
                        }
                        Field::ZoneName => {
                            let names: [(&str, &str); 11] = [
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
                            let mut found = None;
                            for (abbr, id) in names {
                                let ab = abbr.as_bytes();
                                if b.len() >= pos + ab.len()
                                    && b[pos..pos + ab.len()].eq_ignore_ascii_case(ab)
                                {
                                    found = Some((ab.len(), id));
                                    break;
                                }
                            }
                            match found {
                                Some((len, id)) => {
                                    pos += len;
                                    p.zone = id.parse::<Tz>().ok();
                                }
                                None => p.zone = Some(parse_zone_id(b, &mut pos)?),
                            }
                        }
                        Field::ZoneOffset => {
                            if n >= 3 {
                                p.zone = Some(parse_zone_id(b, &mut pos)?);
                            } else {
                                p.offset_ms = Some(parse_offset(b, &mut pos)?);
                            }
                        }
                    }
                }
            }
        }
        if pos != b.len() {
            return None;
        }
        p.resolve(tz)
    }
}

fn push_year(out: &mut String, year: i64, n: usize) {
    if n == 2 {
        push_padded(out, year.abs() % 100, 2);
    } else {
        push_padded(out, year, n);
    }
}

/// `+hhmm` or `+hh:mm` (Joda's `Z`/`ZZ`, which print zero as `+0000`).
fn push_offset(out: &mut String, off_ms: i64, colon: bool) {
    let secs = off_ms.abs() / 1000;
    out.push(if off_ms < 0 { '-' } else { '+' });
    push_2(out, (secs / 3600) as u32);
    if colon {
        out.push(':');
    }
    push_2(out, (secs / 60 % 60) as u32);
}

fn two_digit_year(v: i64) -> i64 {
    let pivot = i64::from(chrono::Utc::now().year()) - 30;
    let low = pivot - 50;
    let mut y = low - low.rem_euclid(100) + v;
    if y < low {
        y += 100;
    }
    y
}

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

fn parse_text(b: &[u8], pos: &mut usize, names: &[(&str, i64)]) -> Option<i64> {
    let mut best: Option<(usize, i64)> = None;
    for (name, v) in names {
        let nb = name.as_bytes();
        if b.len() >= *pos + nb.len()
            && b[*pos..*pos + nb.len()].eq_ignore_ascii_case(nb)
            && best.is_none_or(|(l, _)| nb.len() > l)
        {
            best = Some((nb.len(), *v));
        }
    }
    let (len, v) = best?;
    *pos += len;
    Some(v)
}

fn parse_offset(b: &[u8], pos: &mut usize) -> Option<i64> {
    let i = *pos;
    match b.get(i) {
        Some(b'Z') | Some(b'z') => {
            *pos = i + 1;
            Some(0)
        }
        Some(b'+') | Some(b'-') => {
            let neg = b[i] == b'-';
            let mut j = i + 1;
            let h = parse_int(b, &mut j, 2, 2, false)?;
            let mut m = 0;
            if j < b.len() && b[j] == b':' {
                let mut k = j + 1;
                if let Some(v) = parse_int(b, &mut k, 2, 2, false) {
                    m = v;
                    j = k;
                }
            } else if j + 1 < b.len() && b[j].is_ascii_digit() {
                m = parse_int(b, &mut j, 2, 2, false)?;
            }
            if h > 23 || m > 59 {
                return None;
            }
            *pos = j;
            let ms = (h * 3600 + m * 60) * 1000;
            Some(if neg { -ms } else { ms })
        }
        _ => None,
    }
}

fn parse_zone_id(b: &[u8], pos: &mut usize) -> Option<Tz> {
    let start = *pos;
    let mut end = start;
    while end < b.len()
        && (b[end].is_ascii_alphanumeric() || matches!(b[end], b'/' | b'_' | b'+' | b'-'))
    {
        end += 1;
    }
    // Longest prefix that names a zone.
    while end > start {
        if let Ok(s) = std::str::from_utf8(&b[start..end])
            && let Ok(tz) = dolmen_common::time::parse_time_zone(s)
        {
            *pos = end;
            return Some(tz);
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
    offset_ms: Option<i64>,
    zone: Option<Tz>,
}

impl Parsed {
    fn resolve(&self, tz: &Tz) -> Option<i64> {
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
        let year = i32::try_from(year).ok()?;
        let date = if let Some(doy) = self.doy {
            NaiveDate::from_yo_opt(year, u32::try_from(doy).ok()?)?
        } else if self.month.is_none()
            && self.day.is_none()
            && (self.week.is_some() || self.week_year.is_some() || self.dow.is_some())
        {
            let wy = match self.week_year {
                Some(w) => i32::try_from(w).ok()?,
                None => year,
            };
            let wd = match self.dow.unwrap_or(1) {
                1 => chrono::Weekday::Mon,
                2 => chrono::Weekday::Tue,
                3 => chrono::Weekday::Wed,
                4 => chrono::Weekday::Thu,
                5 => chrono::Weekday::Fri,
                6 => chrono::Weekday::Sat,
                7 => chrono::Weekday::Sun,
                _ => return None,
            };
            NaiveDate::from_isoywd_opt(wy, u32::try_from(self.week.unwrap_or(1)).ok()?, wd)?
        } else {
            NaiveDate::from_ymd_opt(
                year,
                u32::try_from(self.month.unwrap_or(1)).ok()?,
                u32::try_from(self.day.unwrap_or(1)).ok()?,
            )?
        };
        let hour = match (self.hour, self.hour_of_half) {
            (Some(h), _) => h,
            (None, Some(h)) => {
                if !(0..12).contains(&h) {
                    return None;
                }
                h + if self.pm == Some(true) { 12 } else { 0 }
            }
            (None, None) => {
                if self.pm == Some(true) {
                    12
                } else {
                    0
                }
            }
        };
        let time = chrono::NaiveTime::from_hms_milli_opt(
            u32::try_from(hour).ok()?,
            u32::try_from(self.minute.unwrap_or(0)).ok()?,
            u32::try_from(self.second.unwrap_or(0)).ok()?,
            u32::try_from(self.millis.unwrap_or(0)).ok()?,
        )?;
        let local = NaiveDateTime::new(date, time);
        if let Some(off) = self.offset_ms {
            return Some(local.and_utc().timestamp_millis() - off);
        }
        let zone = self.zone.as_ref().unwrap_or(tz);
        local_to_utc_strict(zone, local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dolmen_common::time::{format_iso_millis, parse_time_zone};

    fn la() -> Tz {
        parse_time_zone("America/Los_Angeles").unwrap()
    }

    #[test]
    fn iso_writer_matches_joda() {
        let t = parse_iso_instant("2015-09-12T00:46:58.771Z").unwrap();
        let mut s = String::new();
        push_iso_millis(&mut s, t, &Tz::UTC);
        assert_eq!(s, "2015-09-12T00:46:58.771Z");
        s.clear();
        push_iso_millis(&mut s, t, &la());
        assert_eq!(s, "2015-09-11T17:46:58.771-07:00");
        s.clear();
        push_iso_millis(&mut s, -1, &Tz::UTC);
        assert_eq!(s, "1969-12-31T23:59:59.999Z");
        s.clear();
        push_iso_millis(
            &mut s,
            parse_iso_instant("2015-01-01T00:00:00Z").unwrap(),
            &parse_time_zone("Europe/London").unwrap(),
        );
        assert_eq!(s, "2015-01-01T00:00:00.000Z");
        for ms in [
            0_i64,
            951_782_400_000,
            4_102_444_800_000,
            -62_135_596_800_000,
        ] {
            s.clear();
            push_iso_millis(&mut s, ms, &Tz::UTC);
            assert_eq!(s, format_iso_millis(ms));
        }
    }

    #[test]
    fn formats() {
        let t = parse_iso_instant("2015-09-12T13:04:05.007Z").unwrap();
        let f = |p: &str, tz: &Tz| JodaFormat::compile(p).unwrap().format(t, tz);
        assert_eq!(
            f("yyyy-MM-dd HH:mm:ss.SSS", &Tz::UTC),
            "2015-09-12 13:04:05.007"
        );
        assert_eq!(f("yy/M/d h:mm a", &Tz::UTC), "15/9/12 1:04 PM");
        assert_eq!(f("EEE, dd MMM yyyy", &Tz::UTC), "Sat, 12 Sep 2015");
        assert_eq!(f("EEEE MMMM", &Tz::UTC), "Saturday September");
        assert_eq!(
            f("yyyy-MM-dd'T'HH:mm:ssZZ", &la()),
            "2015-09-12T06:04:05-07:00"
        );
        assert_eq!(f("HH:mm Z", &Tz::UTC), "13:04 +0000");
        assert_eq!(f("HH:mm z", &la()), "06:04 PDT");
        assert_eq!(f("ZZZ", &la()), "America/Los_Angeles");
        assert_eq!(f("D w e x", &Tz::UTC), "255 37 6 2015");
        assert_eq!(f("'quote''s' k K", &Tz::UTC), "quote's 13 1");
        assert_eq!(f("S SS SSSS", &Tz::UTC), "0 00 0070");
        assert!(JodaFormat::compile("yyyy-QQ").is_err());
        assert!(JodaFormat::compile("yyyy 'open").is_err());
    }

    #[test]
    fn parses() {
        let p = |pat: &str, s: &str, tz: &Tz| {
            JodaFormat::compile(pat)
                .unwrap()
                .parse(s, tz)
                .map(format_iso_millis)
        };
        assert_eq!(
            p("yyyy-MM-dd HH:mm:ss", "2015-09-12 13:04:05", &Tz::UTC).as_deref(),
            Some("2015-09-12T13:04:05.000Z")
        );
        assert_eq!(
            p("yyyy-MM-dd HH:mm:ss", "2015-09-12 13:04:05", &la()).as_deref(),
            Some("2015-09-12T20:04:05.000Z")
        );
        assert_eq!(
            p(
                "dd/MMM/yyyy:HH:mm:ss Z",
                "12/Sep/2015:13:04:05 -0700",
                &Tz::UTC
            )
            .as_deref(),
            Some("2015-09-12T20:04:05.000Z")
        );
        assert_eq!(
            p("yyyyMMddHHmm", "201509121304", &Tz::UTC).as_deref(),
            Some("2015-09-12T13:04:00.000Z")
        );
        assert_eq!(
            p("M/d/yy h:mm a", "9/12/15 1:04 pm", &Tz::UTC).as_deref(),
            Some("2015-09-12T13:04:00.000Z")
        );
        assert_eq!(p("yyyy-MM-dd", "2015-02-30", &Tz::UTC), None);
        assert_eq!(p("yyyy-MM-dd", "2015-09-12x", &Tz::UTC), None);
        assert_eq!(p("yyyy-MM-dd", "garbage", &Tz::UTC), None);
        assert_eq!(p("yyyy-MM-dd HH:mm", "2015-03-08 02:30", &la()), None); // DST gap
        assert_eq!(
            p(
                "yyyy-MM-dd'T'HH:mm:ss.SSSZZ",
                "2015-09-12T13:04:05.120+02:00",
                &Tz::UTC
            )
            .as_deref(),
            Some("2015-09-12T11:04:05.120Z")
        );
    }

    #[test]
    fn iso_parse_in_zone() {
        assert_eq!(
            parse_iso_in_zone("2015-09-12T00:00:00", &la())
                .map(format_iso_millis)
                .as_deref(),
            Some("2015-09-12T07:00:00.000Z")
        );
        assert_eq!(
            parse_iso_in_zone("2015-09-12 00:00:00Z", &la())
                .map(format_iso_millis)
                .as_deref(),
            Some("2015-09-12T00:00:00.000Z")
        );
        assert_eq!(
            parse_iso_in_zone("2015-09-12T00:00:00-07:00", &Tz::UTC)
                .map(format_iso_millis)
                .as_deref(),
            Some("2015-09-12T07:00:00.000Z")
        );
        assert_eq!(
            parse_iso_in_zone("2015-09-12", &Tz::UTC)
                .map(format_iso_millis)
                .as_deref(),
            Some("2015-09-12T00:00:00.000Z")
        );
        assert_eq!(parse_iso_in_zone("nope", &Tz::UTC), None);
    }

    #[test]
    fn civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
