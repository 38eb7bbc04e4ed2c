//! Time: instants (i64 milliseconds since the epoch, UTC), their ISO 8601 text, intervals,
//! calendar fields and Druid granularities.
//!
//! Druid prints instants as `2015-09-12T00:46:58.771Z` (Joda `dateTime()` in UTC, always with
//! milliseconds) and intervals as `start/end` of two such instants; segment ids, payloads and
//! API responses depend on exactly these strings, so every formatter here produces them. In
//! another zone the same format carries the offset (`2015-09-11T17:46:58.771-07:00`, see
//! [`push_iso_millis`]); text without an offset can be read as local time in a zone
//! ([`parse_iso_in_zone`]).
//!
//! Periods (`P1D`, `PT1H`) and their arithmetic live in [`crate::period`] (re-exported here),
//! time zones in [`crate::zone`], Joda-Time patterns in [`crate::joda`]. Granularities are
//! Druid's (`docs/querying/granularities.md`): the simple names (`none`, `second`, ...,
//! `year`, `all`) and the `period` and `duration` objects. [`ExtractUnit`] is Druid's
//! `TIME_EXTRACT`/`timestamp_extract` unit (`TimestampExtractExprMacro`).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::period::{Period, floor_to_period};
use crate::zone::{self, Zone};

/// Smallest instant Dolmen represents (Druid's `JodaUtils.MIN_INSTANT` is `Long.MIN_VALUE / 2`).
pub const MIN_INSTANT: i64 = i64::MIN / 2;
/// Largest instant Dolmen represents (Druid's `JodaUtils.MAX_INSTANT` is `Long.MAX_VALUE / 2`).
pub const MAX_INSTANT: i64 = i64::MAX / 2;

const DAY_MS: i64 = 86_400_000;

/// An error parsing or computing a time value; the message names the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TimeError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, TimeError> {
    Err(TimeError(msg.into()))
}

/// Formats an instant (ms since epoch) as Druid does: `2015-09-12T00:46:58.771Z`.
pub fn format_iso_millis(ms: i64) -> String {
    match Utc.timestamp_millis_opt(ms).single() {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None if ms <= MIN_INSTANT => "-146136543-09-08T08:23:32.096Z".to_string(),
        None => "146140482-04-24T15:36:27.903Z".to_string(),
    }
}

/// Formats an instant in a time zone as Joda's `ISODateTimeFormat.dateTime()` does:
/// `2015-09-11T17:47:53.259-07:00`, or with `Z` when the offset is zero.
pub fn format_iso_in_zone(ms: i64, zone: &Zone) -> String {
    let mut s = String::with_capacity(29);
    push_iso_millis(&mut s, ms, zone);
    s
}

/// Appends instant `ms` as Druid prints TIMESTAMP values: Joda `ISODateTimeFormat.dateTime()`
/// in `zone`, e.g. `2015-09-12T00:46:58.771Z` or `2015-09-11T17:46:58.771-07:00` (the offset
/// gets `:ss` when it has seconds).
///
/// Pure integer arithmetic for years 0 to 9999; one offset lookup per value outside UTC.
pub fn push_iso_millis(out: &mut String, ms: i64, zone: &Zone) {
    let off = zone.offset_ms(ms);
    let Some(local) = ms.checked_add(off) else {
        out.push_str(&format_iso_millis(ms));
        return;
    };
    let days = local.div_euclid(DAY_MS);
    let msd = local.rem_euclid(DAY_MS);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        match DateTime::from_timestamp_millis(local) {
            Some(dt) => {
                out.push_str(&dt.format("%Y-%m-%dT%H:%M:%S%.3f").to_string());
                push_iso_offset(out, off);
            }
            None => out.push_str(&format_iso_millis(ms)),
        }
        return;
    }
    push_2(out, (y / 100) as u32);
    push_2(out, (y % 100) as u32);
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

/// Appends a UTC offset as Joda's ISO printer does: `Z` for zero, else `+hh:mm` (and `:ss` when
/// the offset has seconds).
fn push_iso_offset(out: &mut String, off_ms: i64) {
    if off_ms == 0 {
        out.push('Z');
    } else {
        zone::push_offset(out, off_ms, true, true);
    }
}

/// Appends the two low decimal digits of `v`.
#[inline]
pub(crate) fn push_2(out: &mut String, v: u32) {
    out.push(char::from(b'0' + (v / 10 % 10) as u8));
    out.push(char::from(b'0' + (v % 10) as u8));
}

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

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a time zone id (`UTC`, `America/Los_Angeles`, `+05:30`, `Z`); see [`Zone::parse`].
///
/// # Errors
/// A [`TimeError`] naming the value when it is not a zone.
pub fn parse_time_zone(s: &str) -> Result<Zone, TimeError> {
    Zone::parse(s)
}

/// Parses an ISO 8601 instant as Druid's ISO parser accepts it (Joda
/// `ISODateTimeFormat.dateTimeParser()`, extended with a space as date/time separator):
/// `2015`, `2015-09`, `2015-09-12`, `2015-09-12T00`, `2015-09-12T00:46`, `2015-09-12T00:46:58`,
/// `2015-09-12T00:46:58.771`, each optionally followed by `Z` or an offset `+hh:mm`/`+hhmm`/`+hh`.
/// A missing zone means UTC. Returns milliseconds since the epoch.
///
/// # Errors
/// A [`TimeError`] naming the text when it is not such an instant.
pub fn parse_iso_instant(s: &str) -> Result<i64, TimeError> {
    match parse_canonical_utc(s.as_bytes()) {
        Some(ms) => Ok(ms),
        None => parse_iso_instant_general(s),
    }
}

/// The common shape `yyyy-MM-ddTHH:mm:ss[.SSS]Z` read straight from the bytes (ingestion parses
/// one per row); `None` for anything else, which the general parser then handles (or rejects).
fn parse_canonical_utc(b: &[u8]) -> Option<i64> {
    let millis_digits = match b.len() {
        20 => false,
        24 if b[19] == b'.' => true,
        _ => return None,
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || !matches!(b[b.len() - 1], b'Z' | b'z')
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let date = NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(5, 7)?, num(8, 10)?)?;
    let milli = if millis_digits { num(20, 23)? } else { 0 };
    let time = NaiveTime::from_hms_milli_opt(num(11, 13)?, num(14, 16)?, num(17, 19)?, milli)?;
    Some(NaiveDateTime::new(date, time).and_utc().timestamp_millis())
}

fn parse_iso_instant_general(s: &str) -> Result<i64, TimeError> {
    let bad = || TimeError(format!("invalid ISO 8601 timestamp [{s}]"));
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    // Split off the zone designator.
    let (body, offset_secs) = split_zone(t).ok_or_else(bad)?;
    let (date_part, time_part) = match body.find(['T', ' ']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let date = parse_iso_date(date_part).ok_or_else(bad)?;
    let time = match time_part {
        None => NaiveTime::MIN,
        Some(tp) => parse_iso_time(tp).ok_or_else(bad)?,
    };
    let ndt = NaiveDateTime::new(date, time);
    let ms = ndt.and_utc().timestamp_millis() - i64::from(offset_secs) * 1000;
    Ok(ms)
}

fn split_zone(t: &str) -> Option<(&str, i32)> {
    if let Some(b) = t.strip_suffix('Z').or_else(|| t.strip_suffix('z')) {
        return Some((b, 0));
    }
    // An offset starts with + or - after the time part (a '-' inside the date is not an offset).
    if let Some(tpos) = t.find(['T', ' ']) {
        let time = &t[tpos + 1..];
        if let Some(i) = time.rfind(['+', '-']) {
            let b = &time.as_bytes()[i..];
            let mut pos = 0;
            let off = zone::parse_offset(b, &mut pos).filter(|_| pos == b.len())?;
            return Some((&t[..tpos + 1 + i], off));
        }
    }
    Some((t, 0))
}

fn parse_iso_date(s: &str) -> Option<NaiveDate> {
    let parts: Vec<&str> = s.split('-').collect();
    let num = |p: &str, len: usize| -> Option<u32> {
        if p.len() == len && p.chars().all(|c| c.is_ascii_digit()) {
            p.parse().ok()
        } else {
            None
        }
    };
    match parts.as_slice() {
        [y] => NaiveDate::from_ymd_opt(num(y, 4)? as i32, 1, 1),
        [y, m] => NaiveDate::from_ymd_opt(num(y, 4)? as i32, num(m, 2)?, 1),
        [y, m, d] => NaiveDate::from_ymd_opt(num(y, 4)? as i32, num(m, 2)?, num(d, 2)?),
        _ => None,
    }
}

fn parse_iso_time(s: &str) -> Option<NaiveTime> {
    let (hms, frac) = match s.find(['.', ',']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    let two = |p: &str| -> Option<u32> {
        if p.len() == 2 && p.chars().all(|c| c.is_ascii_digit()) {
            p.parse().ok()
        } else {
            None
        }
    };
    let (h, m, sec) = match parts.as_slice() {
        [h] => (two(h)?, 0, 0),
        [h, m] => (two(h)?, two(m)?, 0),
        [h, m, sec] => (two(h)?, two(m)?, two(sec)?),
        _ => return None,
    };
    let nanos = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.chars().all(|c| c.is_ascii_digit()) => {
            let mut padded = f.to_string();
            while padded.len() < 9 {
                padded.push('0');
            }
            padded.parse::<u32>().ok()?
        }
        Some(_) => return None,
    };
    if h == 24 && m == 0 && sec == 0 && nanos == 0 {
        return None;
    }
    NaiveTime::from_hms_nano_opt(h, m, sec, nanos)
}

/// Parses an ISO 8601 instant as Druid's `TIME_PARSE` and `timestamp_parse` do without a
/// pattern (Joda's `dateTimeParser().withZone(zone)`): the forms of [`parse_iso_instant`];
/// text without `Z` or an offset is local time in `zone`, and a local time that falls into a
/// daylight-saving gap does not exist.
///
/// # Errors
/// A [`TimeError`] naming the text when it is not such an instant.
pub fn parse_iso_in_zone(s: &str, zone: &Zone) -> Result<i64, TimeError> {
    let as_utc = parse_iso_instant(s)?;
    if zone.is_utc() || has_zone_designator(s) {
        return Ok(as_utc);
    }
    zone.local_to_utc_strict(as_utc).ok_or_else(|| {
        TimeError(format!(
            "timestamp [{s}] does not exist in time zone [{zone}] (daylight-saving gap)"
        ))
    })
}

/// Whether ISO text carries `Z` or an offset after its time part.
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

/// A `TIME_EXTRACT` / `timestamp_extract` unit (Druid's `TimestampExtractExprMacro.Unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtractUnit {
    /// Seconds since the epoch.
    Epoch,
    /// Druid computes this as epoch seconds / 1000 (sic).
    Microsecond,
    /// Millisecond of second.
    Millisecond,
    /// Second of minute.
    Second,
    /// Minute of hour.
    Minute,
    /// Hour of day.
    Hour,
    /// Day of month.
    Day,
    /// Day of week, ISO (Monday = 1 .. Sunday = 7), as Druid.
    Dow,
    /// Day of week, ISO.
    Isodow,
    /// Day of year.
    Doy,
    /// ISO week of week year.
    Week,
    /// Month of year.
    Month,
    /// Quarter of year.
    Quarter,
    /// Year.
    Year,
    /// ISO week year.
    Isoyear,
    /// Year / 10.
    Decade,
    /// ceil(year / 100).
    Century,
    /// ceil(year / 1000).
    Millennium,
}

impl ExtractUnit {
    /// Parses a unit name, case-insensitively.
    pub fn parse(s: &str) -> Option<ExtractUnit> {
        use ExtractUnit::*;
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "EPOCH" => Epoch,
            "MICROSECOND" => Microsecond,
            "MILLISECOND" => Millisecond,
            "SECOND" => Second,
            "MINUTE" => Minute,
            "HOUR" => Hour,
            "DAY" => Day,
            "DOW" => Dow,
            "ISODOW" => Isodow,
            "DOY" => Doy,
            "WEEK" => Week,
            "MONTH" => Month,
            "QUARTER" => Quarter,
            "YEAR" => Year,
            "ISOYEAR" => Isoyear,
            "DECADE" => Decade,
            "CENTURY" => Century,
            "MILLENNIUM" => Millennium,
            _ => return None,
        })
    }

    /// The unit's value for instant `utc` in `zone`.
    #[inline]
    pub fn extract_in(self, utc: i64, zone: &Zone) -> i64 {
        self.extract(utc, utc.wrapping_add(zone.offset_ms(utc)))
    }

    /// The unit's value for UTC instant `utc` whose local wall-clock time (as epoch ms) is
    /// `local`.
    #[inline]
    pub fn extract(self, utc: i64, local: i64) -> i64 {
        use ExtractUnit::*;
        let days = local.div_euclid(DAY_MS);
        let msd = local.rem_euclid(DAY_MS);
        match self {
            Epoch => utc / 1000,
            Microsecond => utc / 1000 / 1000,
            Millisecond => msd % 1000,
            Second => msd / 1000 % 60,
            Minute => msd / 60_000 % 60,
            Hour => msd / 3_600_000,
            Dow | Isodow => (days + 3).rem_euclid(7) + 1,
            _ => {
                let (y, m, d) = civil_from_days(days);
                match self {
                    Day => i64::from(d),
                    Month => i64::from(m),
                    Quarter => (i64::from(m) - 1) / 3 + 1,
                    Year => y,
                    Decade => y / 10,
                    Century => ceil_div(y, 100),
                    Millennium => ceil_div(y, 1000),
                    Doy => days - days_from_civil(y, 1, 1) + 1,
                    Week | Isoyear => {
                        let date = i32::try_from(y)
                            .ok()
                            .and_then(|y| NaiveDate::from_ymd_opt(y, m, d));
                        match date {
                            Some(date) => {
                                use chrono::Datelike;
                                let w = date.iso_week();
                                if self == Week {
                                    i64::from(w.week())
                                } else {
                                    i64::from(w.year())
                                }
                            }
                            None => 0,
                        }
                    }
                    _ => 0,
                }
            }
        }
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 { q } else { q + 1 }
}

/// A half-open interval `[start, end)` of instants in milliseconds, as Joda's `Interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Interval {
    /// Inclusive start, ms since epoch.
    pub start: i64,
    /// Exclusive end, ms since epoch.
    pub end: i64,
}

/// How Druid prints `Intervals.ETERNITY` ([`Interval::ETERNITY`]).
pub const ETERNITY_TEXT: &str = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z";

impl Interval {
    /// The interval covering all time, as Druid's `Intervals.ETERNITY`.
    pub const ETERNITY: Interval = Interval {
        start: MIN_INSTANT,
        end: MAX_INSTANT,
    };

    /// Builds `[start, end)`.
    ///
    /// # Errors
    /// When `end < start`.
    pub fn new(start: i64, end: i64) -> Result<Interval, TimeError> {
        if end < start {
            return err(format!(
                "interval end [{}] is before its start [{}]",
                format_iso_millis(end),
                format_iso_millis(start)
            ));
        }
        Ok(Interval { start, end })
    }

    /// Parses `start/end`, `start/period` or `period/end` (ISO 8601 instants and periods) in
    /// UTC. `_` is also accepted as the separator (Druid uses it in URLs and some parameters).
    ///
    /// # Errors
    /// A [`TimeError`] naming the text.
    pub fn parse(s: &str) -> Result<Interval, TimeError> {
        let t = s.trim();
        // Druid prints `Intervals.ETERNITY` with years outside ISO 8601's four digits; read it
        // back as written (e.g. MSQ's `replaceTimeChunks` for OVERWRITE ALL).
        if t == ETERNITY_TEXT || t.replace('_', "/") == ETERNITY_TEXT {
            return Ok(Interval::ETERNITY);
        }
        let parts = t.split_once('/').or_else(|| t.split_once('_'));
        Interval::from_parts(s, parts, &Zone::Utc)
    }

    /// Parses `start/end`, `start/period` or `period/end` as Joda's
    /// `new Interval(text, ISOChronology.getInstance(zone))` (Druid's `TIME_IN_INTERVAL`):
    /// instants without an offset are local time in `zone` ([`parse_iso_in_zone`]), periods are
    /// added in `zone`.
    ///
    /// # Errors
    /// A [`TimeError`] naming the text.
    pub fn parse_in_zone(s: &str, zone: &Zone) -> Result<Interval, TimeError> {
        Interval::from_parts(s, s.trim().split_once('/'), zone)
    }

    fn from_parts(
        s: &str,
        parts: Option<(&str, &str)>,
        zone: &Zone,
    ) -> Result<Interval, TimeError> {
        let (a, b) = parts.ok_or_else(|| {
            TimeError(format!(
                "invalid ISO 8601 interval [{s}]: expected start/end"
            ))
        })?;
        let wrap = |e: TimeError| TimeError(format!("invalid ISO 8601 interval [{s}]: {}", e.0));
        let instant = |x: &str| parse_iso_in_zone(x, zone).map_err(wrap);
        let period = |x: &str| Period::parse(x).map_err(wrap);
        let is_period = |x: &str| x.starts_with('P') || x.starts_with('p');
        let (start, end) = if is_period(a) {
            let end = instant(b)?;
            (period(a)?.add_to(end, -1, zone).map_err(wrap)?, end)
        } else if is_period(b) {
            let start = instant(a)?;
            (start, period(b)?.add_to(start, 1, zone).map_err(wrap)?)
        } else {
            (instant(a)?, instant(b)?)
        };
        Interval::new(start, end).map_err(wrap)
    }

    /// Length in milliseconds.
    pub fn duration_ms(&self) -> i64 {
        self.end - self.start
    }

    /// True when `ms` lies in `[start, end)`.
    pub fn contains_instant(&self, ms: i64) -> bool {
        self.start <= ms && ms < self.end
    }

    /// True when `other` lies entirely inside this interval.
    pub fn contains(&self, other: &Interval) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// True when the two intervals share at least one instant.
    pub fn overlaps(&self, other: &Interval) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// The common part, if any.
    pub fn intersect(&self, other: &Interval) -> Option<Interval> {
        let s = self.start.max(other.start);
        let e = self.end.min(other.end);
        (s < e).then_some(Interval { start: s, end: e })
    }

    /// The interval as Druid prints it inside segment ids: start and end joined by `_`.
    pub fn to_underscore_string(&self) -> String {
        format!(
            "{}_{}",
            format_iso_millis(self.start),
            format_iso_millis(self.end)
        )
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            format_iso_millis(self.start),
            format_iso_millis(self.end)
        )
    }
}

impl FromStr for Interval {
    type Err = TimeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Interval::parse(s)
    }
}

impl Serialize for Interval {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Interval::parse(&s).map_err(D::Error::custom)
    }
}

/// A Druid granularity (`docs/querying/granularities.md`): how timestamps are bucketed.
#[derive(Debug, Clone, PartialEq)]
pub enum Granularity {
    /// `none`: millisecond buckets (no truncation).
    None,
    /// `all`: one bucket for all time.
    All,
    /// A named or `period` granularity: buckets of an ISO period in a time zone from an origin.
    Period {
        /// The period.
        period: Period,
        /// The time zone buckets are aligned in.
        tz: Zone,
        /// Origin instant, ms; `None` means the epoch in `tz` (Monday alignment for weeks).
        origin: Option<i64>,
        /// The simple name when this came from one (`DAY`, `FIFTEEN_MINUTE`, ...).
        name: Option<&'static str>,
    },
    /// `duration` granularity: fixed buckets of `duration` ms from `origin`.
    Duration {
        /// Bucket length, ms.
        duration: i64,
        /// Origin instant, ms.
        origin: i64,
    },
}

const SIMPLE_GRANULARITIES: &[(&str, &str)] = &[
    ("SECOND", "PT1S"),
    ("MINUTE", "PT1M"),
    ("FIVE_MINUTE", "PT5M"),
    ("TEN_MINUTE", "PT10M"),
    ("FIFTEEN_MINUTE", "PT15M"),
    ("THIRTY_MINUTE", "PT30M"),
    ("HOUR", "PT1H"),
    ("SIX_HOUR", "PT6H"),
    ("EIGHT_HOUR", "PT8H"),
    ("DAY", "P1D"),
    ("WEEK", "P1W"),
    ("MONTH", "P1M"),
    ("QUARTER", "P3M"),
    ("YEAR", "P1Y"),
];

impl Granularity {
    /// Parses a simple granularity name (case-insensitive: `day`, `HOUR`, `fifteen_minute`,
    /// `none`, `all`).
    ///
    /// # Errors
    /// A [`TimeError`] naming the unknown value.
    pub fn from_name(s: &str) -> Result<Granularity, TimeError> {
        let up = s.trim().to_ascii_uppercase();
        match up.as_str() {
            "NONE" => return Ok(Granularity::None),
            "ALL" => return Ok(Granularity::All),
            _ => {}
        }
        for (name, p) in SIMPLE_GRANULARITIES {
            if *name == up {
                return Ok(Granularity::Period {
                    period: Period::parse(p).expect("static period"),
                    tz: Zone::Utc,
                    origin: None,
                    name: Some(name),
                });
            }
        }
        err(format!(
            "unknown granularity [{s}]; expected one of NONE, ALL, SECOND, MINUTE, FIVE_MINUTE, TEN_MINUTE, FIFTEEN_MINUTE, THIRTY_MINUTE, HOUR, SIX_HOUR, EIGHT_HOUR, DAY, WEEK, MONTH, QUARTER, YEAR"
        ))
    }

    /// Builds a granularity from an ISO period string (`PT1H`), mapping it to the simple name
    /// when one exists (as Druid's `Granularities` does for SQL `PARTITIONED BY 'PT1H'`).
    ///
    /// # Errors
    /// When the period is invalid.
    pub fn from_period_str(s: &str) -> Result<Granularity, TimeError> {
        let period = Period::parse(s)?;
        let name = SIMPLE_GRANULARITIES
            .iter()
            .find(|(_, p)| Period::parse(p).ok() == Some(period))
            .map(|(n, _)| *n);
        Ok(Granularity::Period {
            period,
            tz: Zone::Utc,
            origin: None,
            name,
        })
    }

    /// This granularity prepared for flooring many instants (a period's bucketing rules are
    /// worked out once instead of on every [`Granularity::bucket_start`] call).
    pub fn prepared(&self) -> PreparedGranularity {
        let period = match self {
            Granularity::Period {
                period, tz, origin, ..
            } => crate::period::PeriodBucketer::new(*period, *origin, *tz).ok(),
            _ => None,
        };
        PreparedGranularity {
            granularity: self.clone(),
            period,
        }
    }

    /// Start of the bucket containing `ms`.
    pub fn bucket_start(&self, ms: i64) -> i64 {
        match self {
            Granularity::None => ms,
            Granularity::All => MIN_INSTANT,
            Granularity::Period {
                period, tz, origin, ..
            } => floor_to_period(ms, period, *origin, tz).unwrap_or(ms),
            Granularity::Duration { duration, origin } => {
                if *duration <= 0 {
                    ms
                } else {
                    origin + (ms - origin).div_euclid(*duration) * duration
                }
            }
        }
    }

    /// End (exclusive) of the bucket that starts at `start`.
    pub fn bucket_end(&self, start: i64) -> i64 {
        match self {
            Granularity::None => start.saturating_add(1),
            Granularity::All => MAX_INSTANT,
            Granularity::Period { period, tz, .. } => {
                period.add_to(start, 1, tz).unwrap_or(MAX_INSTANT)
            }
            Granularity::Duration { duration, .. } => start.saturating_add((*duration).max(1)),
        }
    }

    /// The bucket containing `ms`.
    pub fn bucket(&self, ms: i64) -> Interval {
        let s = self.bucket_start(ms);
        Interval {
            start: s,
            end: self.bucket_end(s),
        }
    }

    /// The buckets overlapping `interval`, in order (at most `limit` of them).
    pub fn buckets(&self, interval: &Interval, limit: usize) -> Vec<Interval> {
        let mut out = Vec::new();
        let mut s = self.bucket_start(interval.start);
        while s < interval.end && out.len() < limit {
            let e = self.bucket_end(s);
            out.push(Interval { start: s, end: e });
            if e <= s {
                break;
            }
            s = e;
        }
        out
    }

    /// True when `interval` is exactly one bucket of this granularity.
    pub fn is_aligned(&self, interval: &Interval) -> bool {
        self.bucket_start(interval.start) == interval.start
            && self.bucket_end(interval.start) == interval.end
    }

    /// The JSON form Druid prints on read-back: the simple name (`"DAY"`) or the object.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Granularity::None => json!("NONE"),
            Granularity::All => json!("ALL"),
            Granularity::Period { name: Some(n), .. } => json!(n),
            Granularity::Period {
                period,
                tz,
                origin,
                name: None,
            } => {
                let mut o = serde_json::Map::new();
                o.insert("type".into(), json!("period"));
                o.insert("period".into(), json!(period.to_string()));
                o.insert("timeZone".into(), json!(tz.id()));
                o.insert(
                    "origin".into(),
                    origin
                        .map(|x| json!(format_iso_millis(x)))
                        .unwrap_or(serde_json::Value::Null),
                );
                serde_json::Value::Object(o)
            }
            Granularity::Duration { duration, origin } => json!({
                "type": "duration",
                "duration": duration,
                "origin": format_iso_millis(*origin),
            }),
        }
    }

    /// Parses the JSON form: a name string, or `{"type":"period","period":..,"timeZone":..,
    /// "origin":..}`, `{"type":"duration","duration":ms,"origin":..}`, `{"type":"none"|"all"|<name>}`.
    ///
    /// # Errors
    /// A [`TimeError`] naming the bad field.
    pub fn from_json(v: &serde_json::Value) -> Result<Granularity, TimeError> {
        match v {
            serde_json::Value::String(s) => Granularity::from_name(s),
            serde_json::Value::Object(o) => {
                let ty = o.get("type").and_then(|t| t.as_str()).ok_or_else(|| {
                    TimeError("granularity object needs a string field [type]".into())
                })?;
                let origin = match o.get("origin") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::String(s)) => Some(parse_iso_instant(s)?),
                    Some(serde_json::Value::Number(n)) => n.as_i64(),
                    Some(other) => return err(format!("invalid granularity origin [{other}]")),
                };
                match ty {
                    "period" => {
                        let p = o.get("period").and_then(|p| p.as_str()).ok_or_else(|| {
                            TimeError("period granularity needs a string field [period]".into())
                        })?;
                        let period = Period::parse(p)?;
                        if period.fixed_millis() <= 0 && period.years <= 0 && period.months <= 0 {
                            return err(format!("granularity period [{p}] must be positive"));
                        }
                        let tz = match o.get("timeZone").and_then(|t| t.as_str()) {
                            Some(t) => parse_time_zone(t)?,
                            None => Zone::Utc,
                        };
                        Ok(Granularity::Period {
                            period,
                            tz,
                            origin,
                            name: None,
                        })
                    }
                    "duration" => {
                        let d = o.get("duration").and_then(|d| d.as_i64()).ok_or_else(|| {
                            TimeError(
                                "duration granularity needs an integer field [duration]".into(),
                            )
                        })?;
                        if d <= 0 {
                            return err(format!("granularity duration [{d}] must be positive"));
                        }
                        Ok(Granularity::Duration {
                            duration: d,
                            origin: origin.unwrap_or(0),
                        })
                    }
                    other => Granularity::from_name(other),
                }
            }
            other => err(format!("invalid granularity [{other}]")),
        }
    }
}

impl Serialize for Granularity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Granularity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Granularity::from_json(&v).map_err(D::Error::custom)
    }
}

/// The current time in ms since the epoch.
pub fn now_millis() -> i64 {
    Utc::now().timestamp_millis()
}

/// The current time formatted as Druid prints it (`2026-11-22T01:46:59.123Z`).
pub fn now_iso() -> String {
    format_iso_millis(now_millis())
}

/// Converts ms since epoch to a chrono UTC date-time, if in range.
pub fn to_datetime(ms: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms).single()
}

/// A [`Granularity`] with its period bucketing worked out once, for flooring many instants
/// (ingestion's per-row `queryGranularity` and time-chunk bucketing).
#[derive(Debug, Clone)]
pub struct PreparedGranularity {
    granularity: Granularity,
    period: Option<crate::period::PeriodBucketer>,
}

impl PreparedGranularity {
    /// Start of the bucket containing `ms`; the same answer as [`Granularity::bucket_start`].
    pub fn bucket_start(&self, ms: i64) -> i64 {
        match &self.period {
            Some(b) => b.floor(ms).unwrap_or(ms),
            None => self.granularity.bucket_start(ms),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eternity_round_trips_as_druid_prints_it() {
        assert_eq!(Interval::ETERNITY.to_string(), ETERNITY_TEXT);
        assert_eq!(Interval::parse(ETERNITY_TEXT).unwrap(), Interval::ETERNITY);
        let json = serde_json::to_string(&Interval::ETERNITY).unwrap();
        let back: Interval = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Interval::ETERNITY);
    }

    use super::*;

    #[test]
    fn iso_round_trip() {
        let ms = parse_iso_instant("2015-09-12T00:46:58.771Z").unwrap();
        assert_eq!(ms, 1_442_018_818_771);
        assert_eq!(format_iso_millis(ms), "2015-09-12T00:46:58.771Z");
        assert_eq!(parse_iso_instant("2015-09-12").unwrap(), 1_442_016_000_000);
        assert_eq!(
            parse_iso_instant("2015-09-12 00:00:00").unwrap(),
            1_442_016_000_000
        );
        assert_eq!(
            parse_iso_instant("2015-09-12T02:00:00+02:00").unwrap(),
            1_442_016_000_000
        );
        assert_eq!(
            parse_iso_instant("2015-09-12T00:00:00.5").unwrap(),
            1_442_016_000_500
        );
        assert!(parse_iso_instant("2015-13-12").is_err());
        assert!(parse_iso_instant("yesterday").is_err());
        assert!(parse_iso_instant("").is_err());
    }

    #[test]
    fn intervals() {
        let i = Interval::parse("2015-09-12/2015-09-13").unwrap();
        assert_eq!(
            i.to_string(),
            "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
        );
        assert_eq!(i.duration_ms(), 86_400_000);
        assert_eq!(Interval::parse("2015-09-12/P1D").unwrap(), i);
        assert_eq!(Interval::parse("P1D/2015-09-13").unwrap(), i);
        assert!(Interval::parse("2015-09-13/2015-09-12").is_err());
        assert!(Interval::parse("nonsense").is_err());
        let la = parse_time_zone("America/Los_Angeles").unwrap();
        assert_eq!(
            Interval::parse_in_zone("2015-09-12/P1D", &la)
                .unwrap()
                .to_string(),
            "2015-09-12T07:00:00.000Z/2015-09-13T07:00:00.000Z"
        );
        assert_eq!(
            Interval::parse_in_zone("2015-09-12T00:00:00Z/2015-09-13", &la)
                .unwrap()
                .duration_ms(),
            31 * 3_600_000
        );
        assert!(Interval::parse_in_zone("2015-09-12_2015-09-13", &la).is_err());
    }

    #[test]
    fn canonical_fast_path_agrees_with_the_general_parser() {
        for s in [
            "2015-09-12T00:46:58.771Z",
            "2015-09-12T00:46:58Z",
            "2016-02-29T23:59:59.999z",
            "1969-12-31T23:59:59.999Z",
            "0001-01-01T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
            // Not canonical or not valid: both paths must give the same answer.
            "2015-02-29T00:00:00Z",
            "2015-09-12T24:00:00Z",
            "2015-09-12T23:60:00Z",
            "2015-09-12T23:59:60.000Z",
            "2015-13-12T00:00:00Z",
            "2015-09-12 00:46:58.771Z",
            "2015-09-12T00:46:58.77Z",
            "2015-09-12T00:46:58,771Z",
            "2015-09-1xT00:46:58.771Z",
            "+015-09-12T00:46:58.771Z",
        ] {
            let general = parse_iso_instant_general(s).ok();
            assert_eq!(parse_iso_instant(s).ok(), general, "{s}");
            if let Some(fast) = parse_canonical_utc(s.as_bytes()) {
                assert_eq!(Some(fast), general, "{s}");
            }
        }
        assert!(parse_canonical_utc(b"2015-09-12T00:46:58.771Z").is_some());
        assert!(parse_canonical_utc(b"2015-09-12T00:46:58Z").is_some());
    }

    #[test]
    fn granularity_buckets() {
        let day = Granularity::from_name("day").unwrap();
        let t = parse_iso_instant("2015-09-12T13:14:15.123Z").unwrap();
        assert_eq!(
            format_iso_millis(day.bucket_start(t)),
            "2015-09-12T00:00:00.000Z"
        );
        let hour = Granularity::from_name("HOUR").unwrap();
        assert_eq!(
            format_iso_millis(hour.bucket_start(t)),
            "2015-09-12T13:00:00.000Z"
        );
        let month = Granularity::from_name("month").unwrap();
        let b = month.bucket(t);
        assert_eq!(
            b.to_string(),
            "2015-09-01T00:00:00.000Z/2015-10-01T00:00:00.000Z"
        );
        let week = Granularity::from_name("week").unwrap();
        assert_eq!(
            format_iso_millis(week.bucket_start(t)),
            "2015-09-07T00:00:00.000Z"
        );
        let year = Granularity::from_name("year").unwrap();
        assert_eq!(
            format_iso_millis(year.bucket_start(t)),
            "2015-01-01T00:00:00.000Z"
        );
        assert_eq!(Granularity::None.bucket_start(t), t);
        assert!(Granularity::from_name("fortnight").is_err());
        let la = Granularity::from_json(
            &serde_json::json!({"type":"period","period":"P1D","timeZone":"America/Los_Angeles"}),
        )
        .unwrap();
        assert_eq!(
            format_iso_millis(la.bucket_start(t)),
            "2015-09-12T07:00:00.000Z"
        );
        assert_eq!(day.to_json(), serde_json::json!("DAY"));
        // The prepared form floors exactly as `bucket_start`, including zones and durations.
        let fifteen = Granularity::from_json(
            &serde_json::json!({"type":"duration","duration":900000,"origin":"2015-01-01T00:07:00Z"}),
        )
        .unwrap();
        for g in [
            &day,
            &hour,
            &month,
            &week,
            &year,
            &la,
            &fifteen,
            &Granularity::None,
        ] {
            let p = g.prepared();
            for ms in [
                t,
                0,
                -1,
                t - 86_400_000 * 400,
                1_446_336_000_000,
                4_102_444_800_000,
            ] {
                assert_eq!(p.bucket_start(ms), g.bucket_start(ms), "{g:?} at {ms}");
            }
        }
    }

    #[test]
    fn iso_writer_matches_joda() {
        let la = parse_time_zone("America/Los_Angeles").unwrap();
        let t = parse_iso_instant("2015-09-12T00:46:58.771Z").unwrap();
        let mut s = String::new();
        push_iso_millis(&mut s, t, &Zone::Utc);
        assert_eq!(s, "2015-09-12T00:46:58.771Z");
        s.clear();
        push_iso_millis(&mut s, t, &la);
        assert_eq!(s, "2015-09-11T17:46:58.771-07:00");
        s.clear();
        push_iso_millis(&mut s, -1, &Zone::Utc);
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
            push_iso_millis(&mut s, ms, &Zone::Utc);
            assert_eq!(s, format_iso_millis(ms));
        }
        assert_eq!(
            format_iso_in_zone(t, &parse_time_zone("+05:30").unwrap()),
            "2015-09-12T06:16:58.771+05:30"
        );
    }

    #[test]
    fn iso_parse_in_zone() {
        let la = parse_time_zone("America/Los_Angeles").unwrap();
        let utc = Zone::Utc;
        assert_eq!(
            parse_iso_in_zone("2015-09-12T00:00:00", &la)
                .map(format_iso_millis)
                .ok()
                .as_deref(),
            Some("2015-09-12T07:00:00.000Z")
        );
        assert_eq!(
            parse_iso_in_zone("2015-09-12 00:00:00Z", &la)
                .map(format_iso_millis)
                .ok()
                .as_deref(),
            Some("2015-09-12T00:00:00.000Z")
        );
        assert_eq!(
            parse_iso_in_zone("2015-09-12T00:00:00-07:00", &utc)
                .map(format_iso_millis)
                .ok()
                .as_deref(),
            Some("2015-09-12T07:00:00.000Z")
        );
        assert_eq!(
            parse_iso_in_zone("2015-09-12", &utc)
                .map(format_iso_millis)
                .ok()
                .as_deref(),
            Some("2015-09-12T00:00:00.000Z")
        );
        assert_eq!(parse_iso_in_zone("nope", &utc).ok(), None);
        let gap = parse_iso_in_zone("2015-03-08T02:30:00", &la).unwrap_err();
        assert!(gap.to_string().contains("[2015-03-08T02:30:00]"), "{gap}");
    }

    #[test]
    fn civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        for days in [-1_000_000, -1, 0, 11_016, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn extract_units() {
        let t = parse_iso_instant("2000-01-01T13:04:05.678Z").unwrap();
        let unit = |u: &str| ExtractUnit::parse(u).unwrap();
        assert_eq!(unit("year").extract_in(t, &Zone::Utc), 2000);
        assert_eq!(unit("CENTURY").extract_in(t, &Zone::Utc), 20);
        assert_eq!(unit("MILLENNIUM").extract_in(t, &Zone::Utc), 2);
        assert_eq!(unit("MICROSECOND").extract_in(t, &Zone::Utc), 946_731);
        assert_eq!(unit("DOW").extract_in(t, &Zone::Utc), 6);
        let kolkata = parse_time_zone("+05:30").unwrap();
        assert_eq!(unit("HOUR").extract_in(t, &kolkata), 18);
        assert_eq!(unit("MINUTE").extract_in(t, &kolkata), 34);
        assert!(ExtractUnit::parse("FORTNIGHT").is_none());
    }

    #[test]
    fn negative_instants_floor_down() {
        let hour = Granularity::from_name("hour").unwrap();
        assert_eq!(hour.bucket_start(-1), -3_600_000);
    }
}
