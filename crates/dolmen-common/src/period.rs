//! ISO 8601 periods and Druid's period arithmetic in a time zone.
//!
//! A [`Period`] is Joda-Time's `Period` with the standard type: `P1Y2M3W4DT5H6M7.5S`. Its
//! calendar fields (years, months, weeks, days) are applied on the local calendar of a
//! [`Zone`], its fixed fields (hours and below) as durations:
//!
//! - [`Period::add_to`] / [`Period::checked_add_to`]: Joda's `chronology.add(period, t, k)`,
//!   behind Druid's `TIME_SHIFT`/`timestamp_shift`, `PeriodGranularity#increment` and the
//!   `start/P1D` interval forms. Month arithmetic clamps the day (Jan 31 + `P1M` = Feb 28).
//! - [`PeriodBucketer`]: Druid's `PeriodGranularity#truncate`
//!   (`org.apache.druid.java.util.common.granularity.PeriodGranularity`), behind `TIME_FLOOR`,
//!   `TIME_CEIL`, `timestamp_floor`/`timestamp_ceil` and `period` granularities
//!   (`docs/querying/granularities.md`):
//!   - the default origin is 1970-01-01T00:00 *local* time in the zone;
//!   - a single-unit period of one (`P1D`, `PT1H`, `P1M`, `P1W` ...) without an origin rounds
//!     the local field down (`P1W` to Monday);
//!   - multiples (`PT15M`, `P3M`) and explicit origins count whole units from the origin;
//!   - compound periods (`PT1H30M`) are standard durations counted from the origin.
//!
//!   [`PeriodBucketer::new`] picks the cheapest strategy once: fixed-length buckets (anything
//!   in a fixed-offset zone without months or years, and any hours/minutes/seconds multiple)
//!   are pure `i64` arithmetic; calendar buckets go through `chrono`. Known differences from
//!   Druid: pre-1970 timestamps floor mathematically (Druid has an off-by-one for some
//!   negative-origin hour multiples); compound periods with calendar fields in a zone with
//!   daylight saving are counted as `origin + k x period` rather than by repeated addition.
//! - [`months_between`]: Joda's `Months.monthsBetween` (Druid's `subtract_months`).
//!
//! Nothing here panics on extreme inputs: arithmetic is checked and out-of-range results are
//! `None` (or a [`TimeError`]).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime};

use crate::time::TimeError;
use crate::zone::Zone;

const DAY_MS: i64 = 86_400_000;
const WEEK_MS: i64 = 7 * DAY_MS;

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

    /// Every field, largest unit first.
    fn fields(&self) -> [i64; 8] {
        [
            self.years,
            self.months,
            self.weeks,
            self.days,
            self.hours,
            self.minutes,
            self.seconds,
            self.millis,
        ]
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

    /// The period's length in milliseconds counting weeks as 7 days and days as 24 hours (exact
    /// in fixed-offset zones), or `None` on overflow or when it has months or years.
    pub fn checked_fixed_millis(&self) -> Option<i64> {
        if self.years != 0 || self.months != 0 {
            return None;
        }
        self.weeks
            .checked_mul(7)?
            .checked_add(self.days)?
            .checked_mul(DAY_MS)?
            .checked_add(self.checked_time_millis()?)
    }

    /// The hours, minutes, seconds and millis in milliseconds (`None` on overflow).
    fn checked_time_millis(&self) -> Option<i64> {
        self.hours
            .checked_mul(3_600_000)?
            .checked_add(self.minutes.checked_mul(60_000)?)?
            .checked_add(self.seconds.checked_mul(1000)?)?
            .checked_add(self.millis)
    }

    /// True when all fields are zero.
    pub fn is_zero(&self) -> bool {
        *self == Period::default()
    }

    /// Adds `n` times this period to instant `ms` in `zone`, as Joda's
    /// `chronology.add(period, ms, n)` (Druid's `TIME_SHIFT`): years, months, weeks and days on
    /// the local calendar, then hours and below as a duration. A local result in an ambiguous
    /// hour keeps the offset `ms` had when possible.
    ///
    /// # Errors
    /// When the result leaves the representable range.
    pub fn add_to(&self, ms: i64, n: i64, zone: &Zone) -> Result<i64, TimeError> {
        self.checked_add_to(ms, n, zone)
            .ok_or_else(|| TimeError(format!("time arithmetic overflow adding {self} x {n}")))
    }

    /// [`Period::add_to`], with `None` on overflow or out of range (never panics).
    pub fn checked_add_to(&self, ms: i64, n: i64, zone: &Zone) -> Option<i64> {
        let months = self
            .years
            .checked_mul(12)?
            .checked_add(self.months)?
            .checked_mul(n)?;
        let days = self
            .weeks
            .checked_mul(7)?
            .checked_add(self.days)?
            .checked_mul(n)?;
        let mut out = ms;
        if months != 0 || days != 0 {
            if months == 0 && zone.is_fixed_offset() {
                out = out.checked_add(days.checked_mul(DAY_MS)?)?;
            } else {
                let hint = zone.offset_ms(ms);
                let mut local = zone.to_local_datetime(ms)?;
                if months != 0 {
                    local = add_months(local, months)?;
                }
                if days != 0 {
                    local = local.checked_add_signed(chrono::Duration::try_days(days)?)?;
                }
                out = to_utc(zone, local, Some(hint))?;
            }
        }
        out.checked_add(self.checked_time_millis()?.checked_mul(n)?)
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

/// Adds calendar months to a local date-time, clamping the day to the month's length (Joda).
pub fn add_months(dt: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let total = (i64::from(dt.year()) * 12 + i64::from(dt.month0())).checked_add(months)?;
    let y = i32::try_from(total.div_euclid(12)).ok()?;
    let m = u32::try_from(total.rem_euclid(12)).ok()? + 1;
    let first_next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)?
    };
    let last = first_next.pred_opt()?.day();
    Some(NaiveDateTime::new(
        NaiveDate::from_ymd_opt(y, m, dt.day().min(last))?,
        dt.time(),
    ))
}

/// Whole calendar months from `from` to `to` in `zone`, truncated toward zero (Joda's
/// `Months.monthsBetween`, Druid's `subtract_months`). `None` out of range.
pub fn months_between(from: i64, to: i64, zone: &Zone) -> Option<i64> {
    let lf = zone.to_local_datetime(from)?;
    let lt = zone.to_local_datetime(to)?;
    let mut m = (i64::from(lt.year()) * 12 + i64::from(lt.month0()))
        - (i64::from(lf.year()) * 12 + i64::from(lf.month0()));
    if m > 0 && add_months(lf, m)? > lt {
        m -= 1;
    } else if m < 0 && add_months(lf, m)? < lt {
        m += 1;
    }
    Some(m)
}

/// A local date-time to an instant, leniently, preferring offset `hint` in an overlap.
fn to_utc(zone: &Zone, local: NaiveDateTime, hint: Option<i64>) -> Option<i64> {
    let ms = local.and_utc().timestamp_millis();
    match hint {
        Some(h) => zone.local_to_utc_hinted(ms, h),
        None => zone.local_to_utc(ms),
    }
}

/// Floors `ms` to the start of the bucket of `period` that contains it, buckets being counted
/// from `origin` (default: the epoch in local time of `zone`), as Druid's `PeriodGranularity`
/// (see [`PeriodBucketer`], which is cheaper for many instants).
///
/// # Errors
/// When the period is zero or negative, or the instant is out of range.
pub fn floor_to_period(
    ms: i64,
    period: &Period,
    origin: Option<i64>,
    zone: &Zone,
) -> Result<i64, TimeError> {
    PeriodBucketer::new(*period, origin, *zone)?
        .floor(ms)
        .ok_or_else(|| {
            TimeError(format!(
                "instant [{ms}] is out of range for period [{period}]"
            ))
        })
}

/// Buckets of one fixed length counted from an origin: `[origin + k*len, origin + (k+1)*len)`
/// for every integer `k`, computed by integer arithmetic (wrapping at the ends of `i64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedBuckets {
    /// An instant that starts a bucket, ms.
    pub origin: i64,
    /// The bucket length, ms (positive).
    pub len: i64,
}

impl FixedBuckets {
    /// The start of the bucket containing `t`.
    #[inline]
    pub fn start(&self, t: i64) -> i64 {
        let (origin, len) = (self.origin, self.len);
        origin.wrapping_add(t.wrapping_sub(origin).div_euclid(len).wrapping_mul(len))
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Buckets of fixed length: pure integer arithmetic.
    Fixed(FixedBuckets),
    /// Round the local wall clock down to a multiple of `len` ms (sub-day unit, one of it, no
    /// origin) in a zone whose offset varies: `floor(t + off) - off`.
    LocalClock { len: i64 },
    /// `step` calendar months from the local origin.
    Months { step: i64 },
    /// `step_ms` of local wall-clock time (whole days or weeks) from the local origin.
    LocalDays { step_ms: i64 },
    /// One week starting Monday 00:00 local (Joda `dayOfWeek().roundFloor()` then Monday).
    IsoWeek,
    /// Compound period with calendar fields in a zone with daylight saving.
    Compound,
}

/// Buckets instants by a Druid period in a time zone from an origin (see the module docs).
#[derive(Debug, Clone)]
pub struct PeriodBucketer {
    period: Period,
    zone: Zone,
    /// Origin instant in UTC ms (the local epoch when none was given).
    origin: i64,
    /// The origin as local wall-clock time.
    origin_local: NaiveDateTime,
    kind: Kind,
}

impl PeriodBucketer {
    /// Prepares bucketing by `period` in `zone` counting from `origin` (ms; `None` means
    /// 1970-01-01T00:00 in `zone`, as Druid).
    ///
    /// # Errors
    /// When the period is zero, has a negative field, is too long, or the origin is out of
    /// range.
    pub fn new(period: Period, origin: Option<i64>, zone: Zone) -> Result<Self, TimeError> {
        let fields = period.fields();
        if period.is_zero() || fields.iter().any(|v| *v < 0) {
            return Err(TimeError(format!("period [{period}] must be positive")));
        }
        let has_origin = origin.is_some();
        let origin = match origin {
            Some(o) => o,
            None => zone.local_to_utc(0).unwrap_or(0),
        };
        let origin_local = zone
            .to_local_datetime(origin)
            .ok_or_else(|| TimeError(format!("origin [{origin}] out of range")))?;
        let too_long = || TimeError(format!("period [{period}] is too long"));
        let months_total = period
            .years
            .checked_mul(12)
            .and_then(|m| m.checked_add(period.months))
            .ok_or_else(too_long)?;
        let week_ms = period.weeks.checked_mul(WEEK_MS).ok_or_else(too_long)?;
        let day_ms = period.days.checked_mul(DAY_MS).ok_or_else(too_long)?;
        let fixed_len = if months_total == 0 {
            period.checked_fixed_millis().ok_or_else(too_long)?
        } else {
            period.checked_time_millis().ok_or_else(too_long)?
        };
        let nonzero = fields.iter().filter(|v| **v != 0).count();
        let fixed_zone = zone.is_fixed_offset();
        let has_days = week_ms != 0 || day_ms != 0;
        let kind = if nonzero > 1 {
            if months_total == 0 && (fixed_zone || !has_days) {
                Kind::Fixed(FixedBuckets {
                    origin,
                    len: fixed_len,
                })
            } else {
                Kind::Compound
            }
        } else if months_total != 0 {
            Kind::Months { step: months_total }
        } else if period.weeks != 0 {
            if period.weeks == 1 && !has_origin {
                if fixed_zone {
                    // Mondays: 1970-01-05 was the first Monday after the (local) epoch.
                    Kind::Fixed(FixedBuckets {
                        origin: origin.wrapping_add(4 * DAY_MS),
                        len: WEEK_MS,
                    })
                } else {
                    Kind::IsoWeek
                }
            } else if fixed_zone {
                Kind::Fixed(FixedBuckets {
                    origin,
                    len: week_ms,
                })
            } else {
                Kind::LocalDays { step_ms: week_ms }
            }
        } else if period.days != 0 {
            if fixed_zone {
                Kind::Fixed(FixedBuckets {
                    origin,
                    len: day_ms,
                })
            } else {
                Kind::LocalDays { step_ms: day_ms }
            }
        } else {
            // Hours, minutes, seconds or millis: one field.
            let len = fixed_len;
            let one_unit_local = !has_origin && (period.hours == 1 || period.minutes == 1);
            if one_unit_local && !fixed_zone {
                Kind::LocalClock { len }
            } else if (period.seconds == 1 && !has_origin) || period.millis == 1 {
                Kind::Fixed(FixedBuckets { origin: 0, len })
            } else {
                Kind::Fixed(FixedBuckets { origin, len })
            }
        };
        Ok(PeriodBucketer {
            period,
            zone,
            origin,
            origin_local,
            kind,
        })
    }

    /// The period.
    pub fn period(&self) -> &Period {
        &self.period
    }

    /// The time zone buckets are aligned in.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// True when buckets are computed by integer arithmetic only.
    pub fn is_fixed(&self) -> bool {
        matches!(self.kind, Kind::Fixed(_))
    }

    /// The fixed-length buckets, when every bucket has the same length (so that callers can
    /// bucket whole arrays by integer arithmetic).
    pub fn fixed_buckets(&self) -> Option<FixedBuckets> {
        match self.kind {
            Kind::Fixed(fixed) => Some(fixed),
            _ => None,
        }
    }

    /// The start of the bucket containing `t` (`TIME_FLOOR`), or `None` out of range.
    pub fn floor(&self, t: i64) -> Option<i64> {
        self.bucket(t).map(|(s, _)| s)
    }

    /// `t` itself when it starts a bucket, else the end of its bucket (`TIME_CEIL`); `None`
    /// out of range.
    pub fn ceil(&self, t: i64) -> Option<i64> {
        self.bucket(t).map(|(s, e)| if s == t { t } else { e })
    }

    /// The bucket `[start, end)` containing `t`, or `None` when out of range.
    pub fn bucket(&self, t: i64) -> Option<(i64, i64)> {
        let zone = &self.zone;
        match self.kind {
            Kind::Fixed(fixed) => {
                let start = fixed.start(t);
                Some((start, start.wrapping_add(fixed.len)))
            }
            Kind::LocalClock { len } => {
                let off = zone.offset_ms(t);
                let local = t.checked_add(off)?;
                let start = local.wrapping_sub(local.rem_euclid(len)).wrapping_sub(off);
                Some((start, start.wrapping_add(len)))
            }
            Kind::Months { step } => {
                let tl = zone.to_local_datetime(t)?;
                let ol = self.origin_local;
                let months_since = (i64::from(tl.year()) * 12 + i64::from(tl.month0()))
                    - (i64::from(ol.year()) * 12 + i64::from(ol.month0()));
                let mut k = months_since.div_euclid(step);
                let hint = Some(zone.offset_ms(t));
                for _ in 0..4 {
                    let s = add_months(ol, k * step)?;
                    if s > tl {
                        k -= 1;
                        continue;
                    }
                    let e = add_months(ol, (k + 1) * step)?;
                    if e <= tl {
                        k += 1;
                        continue;
                    }
                    return Some((to_utc(zone, s, hint)?, to_utc(zone, e, None)?));
                }
                None
            }
            Kind::LocalDays { step_ms } => {
                let tl = zone.to_local_datetime(t)?.and_utc().timestamp_millis();
                let ol = self.origin_local.and_utc().timestamp_millis();
                let k = (tl - ol).div_euclid(step_ms);
                let s = ol + k * step_ms;
                let hint = Some(zone.offset_ms(t));
                let sl = DateTime::from_timestamp_millis(s)?.naive_utc();
                let el = DateTime::from_timestamp_millis(s + step_ms)?.naive_utc();
                Some((to_utc(zone, sl, hint)?, to_utc(zone, el, None)?))
            }
            Kind::IsoWeek => {
                let tl = zone.to_local_datetime(t)?;
                let monday = tl.date()
                    - chrono::Duration::days(i64::from(tl.weekday().num_days_from_monday()));
                let sl = monday.and_hms_opt(0, 0, 0)?;
                let el = sl + chrono::Duration::days(7);
                let hint = Some(zone.offset_ms(t));
                Some((to_utc(zone, sl, hint)?, to_utc(zone, el, None)?))
            }
            Kind::Compound => {
                let p = &self.period;
                let months = p.years.saturating_mul(12).saturating_add(p.months);
                let fixed = p.checked_time_millis().unwrap_or(i64::MAX).saturating_add(
                    p.weeks
                        .saturating_mul(WEEK_MS)
                        .saturating_add(p.days.saturating_mul(DAY_MS)),
                );
                let approx = fixed
                    .saturating_add(months.saturating_mul(2_629_746_000))
                    .max(1);
                let mut k = t.checked_sub(self.origin)?.div_euclid(approx);
                for _ in 0..64 {
                    let s = p.checked_add_to(self.origin, k, zone)?;
                    if s > t {
                        k -= 1;
                        continue;
                    }
                    let e = p.checked_add_to(self.origin, k + 1, zone)?;
                    if e <= t {
                        k += 1;
                        continue;
                    }
                    return Some((s, e));
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{format_iso_millis, parse_iso_instant, parse_time_zone};

    fn ts(s: &str) -> i64 {
        parse_iso_instant(s).unwrap()
    }

    fn bucketer(p: &str, origin: Option<&str>, tz: &str) -> PeriodBucketer {
        PeriodBucketer::new(
            Period::parse(p).unwrap(),
            origin.map(ts),
            parse_time_zone(tz).unwrap(),
        )
        .unwrap()
    }

    fn floor(p: &str, origin: Option<&str>, tz: &str, t: &str) -> String {
        format_iso_millis(bucketer(p, origin, tz).floor(ts(t)).unwrap())
    }

    fn ceil(p: &str, tz: &str, t: &str) -> String {
        format_iso_millis(bucketer(p, None, tz).ceil(ts(t)).unwrap())
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
            .add_to(jan31, 1, &Zone::Utc)
            .unwrap();
        assert_eq!(format_iso_millis(feb), "2015-02-28T00:00:00.000Z");

        assert_eq!(
            Period::parse("P1Y2M3W4DT5H6M7.5S").ok(),
            Some(Period {
                years: 1,
                months: 2,
                weeks: 3,
                days: 4,
                hours: 5,
                minutes: 6,
                seconds: 7,
                millis: 500
            })
        );
        for bad in ["", "P", "1D", "PT", "P1H", "PT1D", "P1", "PXD"] {
            assert_eq!(Period::parse(bad).ok(), None, "{bad}");
        }
        let p = Period::parse("P1M").unwrap();
        // Jan 31 + 1 month clamps to Feb 28.
        assert_eq!(
            p.checked_add_to(ts("2015-01-31"), 1, &Zone::Utc),
            Some(ts("2015-02-28"))
        );
        // Floors before the epoch round down.
        assert_eq!(
            floor_to_period(-1, &Period::parse("P1D").unwrap(), None, &Zone::Utc).ok(),
            Some(-DAY_MS)
        );
        assert_eq!(
            floor_to_period(
                ts("1969-12-15"),
                &Period::parse("P2M").unwrap(),
                None,
                &Zone::Utc
            )
            .ok(),
            Some(ts("1969-11-01"))
        );
    }

    #[test]
    fn utc_floors() {
        let t = "2015-09-12T13:47:53.259Z";
        assert_eq!(floor("PT1H", None, "UTC", t), "2015-09-12T13:00:00.000Z");
        assert_eq!(floor("PT15M", None, "UTC", t), "2015-09-12T13:45:00.000Z");
        assert_eq!(floor("PT1S", None, "UTC", t), "2015-09-12T13:47:53.000Z");
        assert_eq!(floor("P1D", None, "UTC", t), "2015-09-12T00:00:00.000Z");
        assert_eq!(floor("P1W", None, "UTC", t), "2015-09-07T00:00:00.000Z");
        assert_eq!(floor("P1M", None, "UTC", t), "2015-09-01T00:00:00.000Z");
        assert_eq!(floor("P3M", None, "UTC", t), "2015-07-01T00:00:00.000Z");
        assert_eq!(floor("P1Y", None, "UTC", t), "2015-01-01T00:00:00.000Z");
        assert_eq!(floor("PT1H30M", None, "UTC", t), "2015-09-12T13:30:00.000Z");
        assert_eq!(
            floor("PT1H", Some("2015-09-12T00:30:00Z"), "UTC", t),
            "2015-09-12T13:30:00.000Z"
        );
        assert_eq!(
            floor("P1D", None, "UTC", "1969-12-31T23:00:00Z"),
            "1969-12-31T00:00:00.000Z"
        );
        assert_eq!(
            floor("P1M", None, "UTC", "1969-12-31T23:00:00Z"),
            "1969-12-01T00:00:00.000Z"
        );
    }

    #[test]
    fn zoned_floors() {
        let t = "2015-09-12T03:47:53.259Z"; // 2015-09-11T20:47 in Los Angeles (PDT, -07:00)
        assert_eq!(
            floor("P1D", None, "America/Los_Angeles", t),
            "2015-09-11T07:00:00.000Z"
        );
        assert_eq!(
            floor("PT1H", None, "America/Los_Angeles", t),
            "2015-09-12T03:00:00.000Z"
        );
        assert_eq!(
            floor("P1M", None, "America/Los_Angeles", t),
            "2015-09-01T07:00:00.000Z"
        );
        assert_eq!(
            floor("P1W", None, "America/Los_Angeles", t),
            "2015-09-07T07:00:00.000Z"
        );
        assert_eq!(
            floor("PT1H", None, "Asia/Kolkata", t),
            "2015-09-12T03:30:00.000Z"
        );
        // Across the DST change: 2015-11-01 local midnight is PDT.
        assert_eq!(
            floor("P1D", None, "America/Los_Angeles", "2015-11-01T12:00:00Z"),
            "2015-11-01T07:00:00.000Z"
        );
        assert_eq!(
            floor("P1D", None, "America/Los_Angeles", "2015-11-02T07:30:00Z"),
            "2015-11-01T07:00:00.000Z"
        );
        assert_eq!(
            floor("P1D", None, "America/Los_Angeles", "2015-11-02T08:30:00Z"),
            "2015-11-02T08:00:00.000Z"
        );
    }

    #[test]
    fn fixed_offset_zones() {
        let t = "2015-09-12T03:47:53.259Z"; // 09:17:53 at +05:30
        assert_eq!(floor("P1D", None, "+05:30", t), "2015-09-11T18:30:00.000Z");
        assert_eq!(floor("PT1H", None, "+05:30", t), "2015-09-12T03:30:00.000Z");
        assert_eq!(floor("P1M", None, "+05:30", t), "2015-08-31T18:30:00.000Z");
        assert!(bucketer("P1D", None, "+05:30").is_fixed());
    }

    #[test]
    fn ceils() {
        assert_eq!(
            ceil("PT1H", "UTC", "2015-09-12T13:47:53.259Z"),
            "2015-09-12T14:00:00.000Z"
        );
        assert_eq!(
            ceil("PT1H", "UTC", "2015-09-12T13:00:00Z"),
            "2015-09-12T13:00:00.000Z"
        );
        assert_eq!(
            ceil("P1M", "UTC", "2015-09-12T13:00:00Z"),
            "2015-10-01T00:00:00.000Z"
        );
        assert_eq!(
            ceil("P1D", "America/Los_Angeles", "2015-09-12T03:00:00Z"),
            "2015-09-12T07:00:00.000Z"
        );
    }

    #[test]
    fn rejects_bad_periods() {
        assert!(PeriodBucketer::new(Period::parse("PT0S").unwrap(), None, Zone::Utc).is_err());
        assert!(PeriodBucketer::new(Period::parse("-PT1H").unwrap(), None, Zone::Utc).is_err());
    }

    #[test]
    fn shifts_and_month_differences() {
        let la = parse_time_zone("America/Los_Angeles").unwrap();
        // P1D across the spring-forward day keeps the local time of day.
        let before = ts("2015-03-07T18:00:00Z"); // 10:00 PST
        let p1d = Period::parse("P1D").unwrap();
        assert_eq!(
            p1d.checked_add_to(before, 1, &la).map(format_iso_millis),
            Some("2015-03-08T17:00:00.000Z".to_string())
        );
        // PT24H is a duration.
        let p24h = Period::parse("PT24H").unwrap();
        assert_eq!(p24h.checked_add_to(before, 1, &la), Some(before + DAY_MS));
        assert_eq!(p1d.checked_add_to(0, i64::MAX, &Zone::Utc), None);
        // Month ends clamp, as Joda's `Months.monthsBetween`.
        assert_eq!(
            months_between(ts("2015-01-31"), ts("2015-02-28"), &Zone::Utc),
            Some(1)
        );
        assert_eq!(
            months_between(ts("2015-01-15"), ts("2015-03-15"), &Zone::Utc),
            Some(2)
        );
        assert_eq!(
            months_between(ts("2015-03-15"), ts("2015-01-16"), &Zone::Utc),
            Some(-1)
        );
    }
}
