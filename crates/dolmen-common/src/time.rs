//! Time: instants (i64 milliseconds since the epoch, UTC), ISO 8601 periods and intervals,
//! and Druid granularities.
//!
//! Druid prints instants as `2015-09-12T00:46:58.771Z` (Joda `dateTime()` in UTC, always with
//! milliseconds) and intervals as `start/end` of two such instants; segment ids, payloads and
//! API responses depend on exactly these strings, so every formatter here produces them.
//!
//! Periods follow ISO 8601 (`P1D`, `PT1H`, `P1Y2M`, `PT0.5S`, `P1W`); calendar fields (years,
//! months, weeks, days) are applied in a time zone, fixed fields (hours and below) as durations,
//! as Joda-Time's `Period` does. Granularities are Druid's (`docs/querying/granularities.md`):
//! the simple names (`none`, `second`, ..., `year`, `all`) and the `period` and `duration` objects.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Smallest instant Dolmen represents (Druid's `JodaUtils.MIN_INSTANT` is `Long.MIN_VALUE / 2`).
pub const MIN_INSTANT: i64 = i64::MIN / 2;
/// Largest instant Dolmen represents (Druid's `JodaUtils.MAX_INSTANT` is `Long.MAX_VALUE / 2`).
pub const MAX_INSTANT: i64 = i64::MAX / 2;

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

/// Formats an instant in a time zone as Joda does: `2015-09-11T17:47:53.259-07:00`, or with `Z`
/// when the zone is UTC.
pub fn format_iso_millis_tz(ms: i64, tz: &Tz) -> String {
    if *tz == Tz::UTC {
        return format_iso_millis(ms);
    }
    match tz.timestamp_millis_opt(ms).single() {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%S%.3f%:z").to_string(),
        None => format_iso_millis(ms),
    }
}

/// Parses a time zone id (`UTC`, `America/Los_Angeles`, `+05:30`, `Z`).
///
/// Fixed offsets map to the nearest `Etc/GMT` zone only when whole hours; other offsets are
/// rejected with an error naming the value.
pub fn parse_time_zone(s: &str) -> Result<Tz, TimeError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("utc") || t == "Z" || t.eq_ignore_ascii_case("gmt") {
        return Ok(Tz::UTC);
    }
    if let Ok(tz) = Tz::from_str(t) {
        return Ok(tz);
    }
    if let Some(off) = parse_offset_secs(t)
        && off % 3600 == 0
    {
        let h = off / 3600;
        // Etc/GMT zones have inverted signs.
        let name = if h == 0 {
            "Etc/GMT".to_string()
        } else if h > 0 {
            format!("Etc/GMT-{h}")
        } else {
            format!("Etc/GMT+{}", -h)
        };
        if let Ok(tz) = Tz::from_str(&name) {
            return Ok(tz);
        }
    }
    err(format!("unknown time zone [{s}]"))
}

fn parse_offset_secs(s: &str) -> Option<i32> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits[..2].parse::<i32>().ok()?,
            digits[2..].parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
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
            let off = parse_offset_secs(&time[i..])?;
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

/// An ISO 8601 period (`P1Y2M3W4DT5H6M7.5S`), as Joda-Time's `Period` with the standard type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Period {
    /// Years (calendar field).
    pub years: i64,
    /// Months (calendar field).
    pub months: i64,
    /// Weeks (calendar field).
    pub weeks: i64,
    /// Days (calendar field).
    pub days: i64,
    /// Hours.
    pub hours: i64,
    /// Minutes.
    pub minutes: i64,
    /// Seconds.
    pub seconds: i64,
    /// Milliseconds.
    pub millis: i64,
}

impl Period {
    /// Parses `P[nY][nM][nW][nD][T[nH][nM][n[.fff]S]]` (a leading `-` negates every field).
    ///
    /// # Errors
    /// A [`TimeError`] naming the text when it is not an ISO 8601 period.
    pub fn parse(s: &str) -> Result<Period, TimeError> {
        let bad = || TimeError(format!("invalid ISO 8601 period [{s}]"));
        let t = s.trim();
        let (neg, t) = match t.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, t),
        };
        let rest = t
            .strip_prefix('P')
            .or_else(|| t.strip_prefix('p'))
            .ok_or_else(bad)?;
        if rest.is_empty() {
            return Err(bad());
        }
        let mut p = Period::default();
        let mut in_time = false;
        let mut num = String::new();
        let mut any = false;
        for c in rest.chars() {
            match c {
                'T' | 't' => {
                    if in_time || !num.is_empty() {
                        return Err(bad());
                    }
                    in_time = true;
                }
                '0'..='9' | '.' | ',' | '-' => num.push(if c == ',' { '.' } else { c }),
                _ => {
                    if num.is_empty() {
                        return Err(bad());
                    }
                    let unit = c.to_ascii_uppercase();
                    if unit == 'S' && in_time && num.contains('.') {
                        let v: f64 = num.parse().map_err(|_| bad())?;
                        let total_ms = (v * 1000.0).round() as i64;
                        p.seconds += total_ms / 1000;
                        p.millis += total_ms % 1000;
                    } else {
                        let v: i64 = num.parse().map_err(|_| bad())?;
                        match (in_time, unit) {
                            (false, 'Y') => p.years = v,
                            (false, 'M') => p.months = v,
                            (false, 'W') => p.weeks = v,
                            (false, 'D') => p.days = v,
                            (true, 'H') => p.hours = v,
                            (true, 'M') => p.minutes = v,
                            (true, 'S') => p.seconds = v,
                            _ => return Err(bad()),
                        }
                    }
                    num.clear();
                    any = true;
                }
            }
        }
        if !num.is_empty() || !any {
            return Err(bad());
        }
        if neg {
            p = p.negate();
        }
        Ok(p)
    }

    /// The period with every field negated.
    pub fn negate(self) -> Period {
        Period {
            years: -self.years,
            months: -self.months,
            weeks: -self.weeks,
            days: -self.days,
            hours: -self.hours,
            minutes: -self.minutes,
            seconds: -self.seconds,
            millis: -self.millis,
        }
    }

    /// True when the period has only hour, minute, second and millisecond fields, so that it is
    /// a fixed duration in every time zone.
    pub fn is_fixed(&self) -> bool {
        self.years == 0 && self.months == 0 && self.weeks == 0 && self.days == 0
    }

    /// The length in milliseconds of the fixed part (hours and below), plus days and weeks
    /// counted as 24 h (exact in UTC).
    pub fn fixed_millis(&self) -> i64 {
        ((self.weeks * 7 + self.days) * 24 + self.hours) * 3_600_000
            + self.minutes * 60_000
            + self.seconds * 1000
            + self.millis
    }

    /// True when all fields are zero.
    pub fn is_zero(&self) -> bool {
        *self == Period::default()
    }

    /// Adds `n` times this period to instant `ms` in zone `tz` (calendar fields in local time,
    /// then the fixed fields as a duration), as Joda's `DateTime.plus(Period)`.
    ///
    /// # Errors
    /// When the result leaves the representable range.
    pub fn add_to(&self, ms: i64, n: i64, tz: &Tz) -> Result<i64, TimeError> {
        let overflow = || TimeError(format!("time arithmetic overflow adding {self} x {n}"));
        let mut out = ms;
        let months = (self.years * 12 + self.months)
            .checked_mul(n)
            .ok_or_else(overflow)?;
        let days = (self.weeks * 7 + self.days)
            .checked_mul(n)
            .ok_or_else(overflow)?;
        if months != 0 || days != 0 {
            let dt = tz
                .timestamp_millis_opt(out)
                .single()
                .ok_or_else(overflow)?
                .naive_local();
            let mut nd = dt;
            if months != 0 {
                nd = add_months(nd, months).ok_or_else(overflow)?;
            }
            if days != 0 {
                nd = nd
                    .checked_add_signed(Duration::days(days))
                    .ok_or_else(overflow)?;
            }
            out = local_to_utc_millis(tz, nd).ok_or_else(overflow)?;
        }
        let fixed =
            (self.hours * 3_600_000 + self.minutes * 60_000 + self.seconds * 1000 + self.millis)
                .checked_mul(n)
                .ok_or_else(overflow)?;
        out.checked_add(fixed).ok_or_else(overflow)
    }
}

fn add_months(dt: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let total = i64::from(dt.year()) * 12 + i64::from(dt.month0()) + months;
    let y = i32::try_from(total.div_euclid(12)).ok()?;
    let m = total.rem_euclid(12) as u32 + 1;
    let last = last_day_of_month(y, m)?;
    let d = dt.day().min(last);
    Some(NaiveDateTime::new(
        NaiveDate::from_ymd_opt(y, m, d)?,
        dt.time(),
    ))
}

fn last_day_of_month(y: i32, m: u32) -> Option<u32> {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Some(NaiveDate::from_ymd_opt(ny, nm, 1)?.pred_opt()?.day())
}

/// Converts a local date-time in `tz` to UTC milliseconds, resolving DST gaps forward and
/// overlaps to the earlier instant (Joda's behaviour).
fn local_to_utc_millis(tz: &Tz, nd: NaiveDateTime) -> Option<i64> {
    match tz.from_local_datetime(&nd) {
        chrono::LocalResult::Single(d) => Some(d.timestamp_millis()),
        chrono::LocalResult::Ambiguous(a, _) => Some(a.timestamp_millis()),
        chrono::LocalResult::None => {
            let later = nd.checked_add_signed(Duration::hours(1))?;
            tz.from_local_datetime(&later)
                .earliest()
                .map(|d| d.timestamp_millis())
        }
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("PT0S");
        }
        f.write_str("P")?;
        for (v, u) in [
            (self.years, 'Y'),
            (self.months, 'M'),
            (self.weeks, 'W'),
            (self.days, 'D'),
        ] {
            if v != 0 {
                write!(f, "{v}{u}")?;
            }
        }
        if self.hours != 0 || self.minutes != 0 || self.seconds != 0 || self.millis != 0 {
            f.write_str("T")?;
            if self.hours != 0 {
                write!(f, "{}H", self.hours)?;
            }
            if self.minutes != 0 {
                write!(f, "{}M", self.minutes)?;
            }
            if self.millis != 0 {
                let total = self.seconds * 1000 + self.millis;
                let s = format!("{}.{:03}", total / 1000, (total % 1000).abs());
                write!(f, "{}S", s.trim_end_matches('0'))?;
            } else if self.seconds != 0 {
                write!(f, "{}S", self.seconds)?;
            }
        }
        Ok(())
    }
}

impl FromStr for Period {
    type Err = TimeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Period::parse(s)
    }
}

/// Floors `ms` to the start of the bucket of `period` that contains it, buckets being counted
/// from `origin` (default: the epoch in local time of `tz`), as Druid's `PeriodGranularity`.
///
/// # Errors
/// When the period is zero or negative, or arithmetic overflows.
pub fn floor_to_period(
    ms: i64,
    period: &Period,
    origin: Option<i64>,
    tz: &Tz,
) -> Result<i64, TimeError> {
    if period.is_zero() {
        return err("period must not be zero");
    }
    // Fast path: fixed periods in UTC (and days/weeks in UTC) are pure integer arithmetic.
    let single_calendar_unit = period.years == 0 && period.months == 0;
    if single_calendar_unit && (*tz == Tz::UTC || period.is_fixed()) {
        let len = period.fixed_millis();
        if len <= 0 {
            return err(format!("period [{period}] must be positive"));
        }
        let o = match origin {
            Some(o) => o,
            None if period.weeks != 0
                && period.days == 0
                && period.hours == 0
                && period.minutes == 0
                && period.seconds == 0
                && period.millis == 0 =>
            {
                // Druid (Joda) aligns weeks to Monday: 1970-01-05 is the first Monday.
                4 * 86_400_000
            }
            None => 0,
        };
        return Ok(o + (ms - o).div_euclid(len) * len);
    }
    // Calendar periods: truncate in local time to the period's largest unit, counting from origin.
    let local = tz
        .timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| TimeError(format!("instant {ms} out of range")))?
        .naive_local();
    let origin_local = match origin {
        Some(o) => tz
            .timestamp_millis_opt(o)
            .single()
            .ok_or_else(|| TimeError(format!("origin {o} out of range")))?
            .naive_local(),
        None => NaiveDate::from_ymd_opt(1970, 1, 1)
            .expect("valid date")
            .and_time(NaiveTime::MIN),
    };
    if period.years != 0 || period.months != 0 {
        if !(period.weeks == 0
            && period.days == 0
            && period.hours == 0
            && period.minutes == 0
            && period.seconds == 0
            && period.millis == 0)
        {
            return err(format!(
                "period [{period}] mixes months or years with smaller units; not supported"
            ));
        }
        let step = period.years * 12 + period.months;
        if step <= 0 {
            return err(format!("period [{period}] must be positive"));
        }
        let months_since = (i64::from(local.year()) * 12 + i64::from(local.month0()))
            - (i64::from(origin_local.year()) * 12 + i64::from(origin_local.month0()));
        let mut k = months_since.div_euclid(step);
        loop {
            let start = add_months(origin_local, k * step)
                .ok_or_else(|| TimeError("time arithmetic overflow".into()))?;
            if start <= local {
                return local_to_utc_millis(tz, start)
                    .ok_or_else(|| TimeError("time arithmetic overflow".into()));
            }
            k -= 1;
        }
    }
    // Days/weeks (possibly with a fixed part) in a non-UTC zone: count local-day steps.
    let step_days = period.weeks * 7 + period.days;
    let fixed =
        period.hours * 3_600_000 + period.minutes * 60_000 + period.seconds * 1000 + period.millis;
    if fixed != 0 {
        return err(format!(
            "period [{period}] mixes days with hours in a non-UTC time zone; not supported"
        ));
    }
    if step_days <= 0 {
        return err(format!("period [{period}] must be positive"));
    }
    let days_since = (local.date() - origin_local.date()).num_days()
        - i64::from(local.time() < origin_local.time());
    let k = days_since.div_euclid(step_days);
    let start = origin_local
        .checked_add_signed(Duration::days(k * step_days))
        .ok_or_else(|| TimeError("time arithmetic overflow".into()))?;
    local_to_utc_millis(tz, start).ok_or_else(|| TimeError("time arithmetic overflow".into()))
}

/// A half-open interval `[start, end)` of instants in milliseconds, as Joda's `Interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Interval {
    /// Inclusive start, ms since epoch.
    pub start: i64,
    /// Exclusive end, ms since epoch.
    pub end: i64,
}

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

    /// Parses `start/end`, `start/period` or `period/end` (ISO 8601 instants and periods).
    /// `_` is also accepted as the separator (Druid uses it in URLs and some parameters).
    ///
    /// # Errors
    /// A [`TimeError`] naming the text.
    pub fn parse(s: &str) -> Result<Interval, TimeError> {
        let t = s.trim();
        let (a, b) = t
            .split_once('/')
            .or_else(|| t.split_once('_'))
            .ok_or_else(|| {
                TimeError(format!(
                    "invalid ISO 8601 interval [{s}]: expected start/end"
                ))
            })?;
        let wrap = |e: TimeError| TimeError(format!("invalid ISO 8601 interval [{s}]: {}", e.0));
        let is_period = |x: &str| x.starts_with('P') || x.starts_with('p');
        let (start, end) = if is_period(a) {
            let end = parse_iso_instant(b).map_err(wrap)?;
            let p = Period::parse(a).map_err(wrap)?;
            (p.add_to(end, -1, &Tz::UTC).map_err(wrap)?, end)
        } else if is_period(b) {
            let start = parse_iso_instant(a).map_err(wrap)?;
            let p = Period::parse(b).map_err(wrap)?;
            (start, p.add_to(start, 1, &Tz::UTC).map_err(wrap)?)
        } else {
            (
                parse_iso_instant(a).map_err(wrap)?,
                parse_iso_instant(b).map_err(wrap)?,
            )
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
        tz: Tz,
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
                    tz: Tz::UTC,
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
            tz: Tz::UTC,
            origin: None,
            name,
        })
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
                o.insert("timeZone".into(), json!(tz.name()));
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
                            None => Tz::UTC,
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

#[cfg(test)]
mod tests {
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
    fn periods() {
        let p = Period::parse("P1D").unwrap();
        assert_eq!(p.days, 1);
        assert_eq!(p.to_string(), "P1D");
        assert_eq!(Period::parse("PT1H30M").unwrap().fixed_millis(), 5_400_000);
        assert_eq!(Period::parse("PT0.5S").unwrap().fixed_millis(), 500);
        assert!(Period::parse("P").is_err());
        assert!(Period::parse("1D").is_err());
        assert!(Period::parse("PT1D").is_err());
        let jan31 = parse_iso_instant("2015-01-31").unwrap();
        let feb = Period::parse("P1M")
            .unwrap()
            .add_to(jan31, 1, &Tz::UTC)
            .unwrap();
        assert_eq!(format_iso_millis(feb), "2015-02-28T00:00:00.000Z");
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
    }

    #[test]
    fn negative_instants_floor_down() {
        let hour = Granularity::from_name("hour").unwrap();
        assert_eq!(hour.bucket_start(-1), -3_600_000);
    }
}
