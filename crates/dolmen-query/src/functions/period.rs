//! Period bucketing with Druid's `PeriodGranularity` semantics, vectorized.
//!
//! Druid's `TIME_FLOOR`/`TIME_CEIL` (`docs/querying/sql-scalar.md`) bucket timestamps with
//! `org.apache.druid.java.util.common.granularity.PeriodGranularity#truncate`:
//!
//! - the default origin is 1970-01-01T00:00 *local* time in the zone;
//! - a single-unit period of one (`P1D`, `PT1H`, `P1M`, `P1W` ...) without an origin rounds the
//!   local field down (`P1W` to Monday);
//! - multiples (`PT15M`, `P3M`) and explicit origins count whole units from the origin;
//! - compound periods (`PT1H30M`) are standard durations counted from the origin.
//!
//! [`PeriodBucketer`] precomputes the cheapest strategy. Fixed-length buckets (anything in UTC or
//! a fixed-offset zone that has no months or years, and any hours/minutes/seconds multiple) are
//! pure `i64` arithmetic; calendar buckets go through `chrono` but cache the last bucket, so
//! time-ordered or clustered input is almost always answered from the cache.
//!
//! Known differences from Druid: pre-1970 timestamps floor mathematically (Druid has an
//! off-by-one for some negative-origin hour multiples); compound periods with calendar fields in
//! a zone with daylight saving are counted as `origin + k x period` rather than by repeated
//! addition.

use arrow::array::{Array, PrimitiveArray, PrimitiveBuilder};
use arrow::datatypes::TimestampMillisecondType;
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;
use dolmen_common::time::{Period, TimeError};

const DAY_MS: i64 = 86_400_000;
const WEEK_MS: i64 = 7 * DAY_MS;

/// True when `tz` never changes its UTC offset (UTC and the `Etc/*` zones), so that days and
/// weeks are fixed durations in it.
pub fn is_fixed_offset(tz: &Tz) -> bool {
    let name = tz.name();
    *tz == Tz::UTC
        || name.starts_with("Etc/")
        || matches!(
            name,
            "UTC" | "UCT" | "GMT" | "GMT0" | "GMT+0" | "GMT-0" | "Greenwich" | "Universal" | "Zulu"
        )
}

/// The UTC offset of `tz` at instant `ms`, in milliseconds (0 when out of range).
#[inline]
pub fn offset_ms(tz: &Tz, ms: i64) -> i64 {
    if *tz == Tz::UTC {
        return 0;
    }
    match DateTime::from_timestamp_millis(ms) {
        Some(dt) => {
            i64::from(
                tz.offset_from_utc_datetime(&dt.naive_utc())
                    .fix()
                    .local_minus_utc(),
            ) * 1000
        }
        None => 0,
    }
}

/// The local wall-clock time of instant `ms` in `tz`, as a naive date-time.
#[inline]
pub fn to_local(tz: &Tz, ms: i64) -> Option<NaiveDateTime> {
    let local = ms.checked_add(offset_ms(tz, ms))?;
    DateTime::from_timestamp_millis(local).map(|d| d.naive_utc())
}

/// Converts a local wall-clock time in `tz` to an instant as Joda's lenient conversion does:
/// a time inside a daylight-saving gap moves forward by the gap, an ambiguous time takes the
/// offset `hint_offset_ms` when it is one of the two candidates, else the earlier instant.
pub fn local_to_utc(tz: &Tz, local: NaiveDateTime, hint_offset_ms: Option<i64>) -> Option<i64> {
    if *tz == Tz::UTC {
        return Some(local.and_utc().timestamp_millis());
    }
    match tz.from_local_datetime(&local) {
        chrono::LocalResult::Single(d) => Some(d.timestamp_millis()),
        chrono::LocalResult::Ambiguous(a, b) => {
            let bo = i64::from(b.offset().fix().local_minus_utc()) * 1000;
            if hint_offset_ms == Some(bo) {
                Some(b.timestamp_millis())
            } else {
                Some(a.timestamp_millis())
            }
        }
        chrono::LocalResult::None => {
            // In a gap: Joda keeps the wall-clock distance, i.e. uses the offset before the gap.
            for shift_min in [30_i64, 60, 90, 120, 180] {
                let later = local.checked_add_signed(chrono::Duration::minutes(shift_min))?;
                if let Some(d) = tz.from_local_datetime(&later).earliest() {
                    return Some(d.timestamp_millis() - shift_min * 60_000);
                }
            }
            None
        }
    }
}

/// Strict local-to-UTC conversion for parsing: times inside a gap are invalid (as Joda's
/// parser, which throws `IllegalInstantException`), ambiguous ones take the earlier instant.
pub fn local_to_utc_strict(tz: &Tz, local: NaiveDateTime) -> Option<i64> {
    if *tz == Tz::UTC {
        return Some(local.and_utc().timestamp_millis());
    }
    tz.from_local_datetime(&local)
        .earliest()
        .map(|d| d.timestamp_millis())
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

/// The period's length in milliseconds counting weeks as 7 days and days as 24 hours (exact in
/// UTC), or `None` on overflow or when it has months or years.
pub fn checked_fixed_millis(p: &Period) -> Option<i64> {
    if p.years != 0 || p.months != 0 {
        return None;
    }
    let days = p.weeks.checked_mul(7)?.checked_add(p.days)?;
    days.checked_mul(DAY_MS)?
        .checked_add(p.hours.checked_mul(3_600_000)?)?
        .checked_add(p.minutes.checked_mul(60_000)?)?
        .checked_add(p.seconds.checked_mul(1000)?)?
        .checked_add(p.millis)
}

/// The period's hours, minutes, seconds and millis in milliseconds (`None` on overflow).
fn checked_time_millis(p: &Period) -> Option<i64> {
    p.hours
        .checked_mul(3_600_000)?
        .checked_add(p.minutes.checked_mul(60_000)?)?
        .checked_add(p.seconds.checked_mul(1000)?)?
        .checked_add(p.millis)
}

/// Adds `k` times `period` to instant `t` as Joda's `chronology.add(period, t, k)` (Druid's
/// `TIME_SHIFT`): years, months, weeks and days on the local calendar of `tz`, then hours and
/// below as a duration. `None` on overflow or out of range (never panics).
pub fn add_period(period: &Period, t: i64, k: i64, tz: &Tz) -> Option<i64> {
    let months = period
        .years
        .checked_mul(12)?
        .checked_add(period.months)?
        .checked_mul(k)?;
    let days = period
        .weeks
        .checked_mul(7)?
        .checked_add(period.days)?
        .checked_mul(k)?;
    let mut out = t;
    if months != 0 || days != 0 {
        if *tz == Tz::UTC && months == 0 {
            out = out.checked_add(days.checked_mul(DAY_MS)?)?;
        } else {
            let hint = offset_ms(tz, t);
            let mut local = to_local(tz, t)?;
            if months != 0 {
                local = add_months(local, months)?;
            }
            if days != 0 {
                local = local.checked_add_signed(chrono::Duration::try_days(days)?)?;
            }
            out = local_to_utc(tz, local, Some(hint))?;
        }
    }
    out.checked_add(checked_time_millis(period)?.checked_mul(k)?)
}

/// Whole calendar months from `from` to `to` in `tz`, truncated toward zero (Joda's
/// `Months.monthsBetween`, Druid's `subtract_months`).
pub fn months_between(from: i64, to: i64, tz: &Tz) -> Option<i64> {
    let lf = to_local(tz, from)?;
    let lt = to_local(tz, to)?;
    let mut m = (i64::from(lt.year()) * 12 + i64::from(lt.month0()))
        - (i64::from(lf.year()) * 12 + i64::from(lf.month0()));
    if m > 0 && add_months(lf, m)? > lt {
        m -= 1;
    } else if m < 0 && add_months(lf, m)? < lt {
        m += 1;
    }
    Some(m)
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Buckets of `len` ms counted from `origin`: pure integer arithmetic.
    Fixed { origin: i64, len: i64 },
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
    tz: Tz,
    /// Origin instant in UTC ms (the local epoch when none was given).
    origin: i64,
    /// The origin as local wall-clock time.
    origin_local: NaiveDateTime,
    kind: Kind,
}

impl PeriodBucketer {
    /// Prepares bucketing by `period` in `tz` counting from `origin` (ms; `None` means
    /// 1970-01-01T00:00 in `tz`, as Druid).
    ///
    /// # Errors
    /// When the period is zero, has a negative field, or the origin is out of range.
    pub fn new(period: Period, origin: Option<i64>, tz: Tz) -> Result<Self, TimeError> {
        let fields = [
            period.years,
            period.months,
            period.weeks,
            period.days,
            period.hours,
            period.minutes,
            period.seconds,
            period.millis,
        ];
        if period.is_zero() || fields.iter().any(|v| *v < 0) {
            return Err(TimeError(format!("period [{period}] must be positive")));
        }
        let epoch_local = NaiveDate::from_ymd_opt(1970, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .ok_or_else(|| TimeError("invalid epoch".into()))?;
        let has_origin = origin.is_some();
        let origin = match origin {
            Some(o) => o,
            None => local_to_utc(&tz, epoch_local, None).unwrap_or(0),
        };
        let origin_local = to_local(&tz, origin)
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
            checked_fixed_millis(&period).ok_or_else(too_long)?
        } else {
            checked_time_millis(&period).ok_or_else(too_long)?
        };
        let nonzero = fields.iter().filter(|v| **v != 0).count();
        let fixed_zone = is_fixed_offset(&tz);
        let calendar_months = months_total;
        let has_days = week_ms != 0 || day_ms != 0;
        let kind = if nonzero > 1 {
            if calendar_months == 0 && (fixed_zone || !has_days) {
                Kind::Fixed {
                    origin,
                    len: fixed_len,
                }
            } else {
                Kind::Compound
            }
        } else if calendar_months != 0 {
            Kind::Months {
                step: calendar_months,
            }
        } else if period.weeks != 0 {
            if period.weeks == 1 && !has_origin {
                if fixed_zone {
                    // Mondays: 1970-01-05 was the first Monday after the (local) epoch.
                    Kind::Fixed {
                        origin: origin.wrapping_add(4 * DAY_MS),
                        len: WEEK_MS,
                    }
                } else {
                    Kind::IsoWeek
                }
            } else if fixed_zone {
                Kind::Fixed {
                    origin,
                    len: week_ms,
                }
            } else {
                Kind::LocalDays { step_ms: week_ms }
            }
        } else if period.days != 0 {
            if fixed_zone {
                Kind::Fixed {
                    origin,
                    len: day_ms,
                }
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
                Kind::Fixed { origin: 0, len }
            } else {
                Kind::Fixed { origin, len }
            }
        };
        Ok(PeriodBucketer {
            period,
            tz,
            origin,
            origin_local,
            kind,
        })
    }

    /// The period.
    pub fn period(&self) -> &Period {
        &self.period
    }

    /// True when buckets are computed by integer arithmetic only.
    pub fn is_fixed(&self) -> bool {
        matches!(self.kind, Kind::Fixed { .. })
    }

    /// The bucket `[start, end)` containing `t`, or `None` when out of range.
    pub fn bucket(&self, t: i64) -> Option<(i64, i64)> {
        match self.kind {
            Kind::Fixed { origin, len } => {
                let start =
                    origin.wrapping_add(t.wrapping_sub(origin).div_euclid(len).wrapping_mul(len));
                Some((start, start.wrapping_add(len)))
            }
            Kind::LocalClock { len } => {
                let off = offset_ms(&self.tz, t);
                let local = t.checked_add(off)?;
                let start = local.wrapping_sub(local.rem_euclid(len)).wrapping_sub(off);
                Some((start, start.wrapping_add(len)))
            }
            Kind::Months { step } => {
                let tl = to_local(&self.tz, t)?;
                let ol = self.origin_local;
                let months_since = (i64::from(tl.year()) * 12 + i64::from(tl.month0()))
                    - (i64::from(ol.year()) * 12 + i64::from(ol.month0()));
                let mut k = months_since.div_euclid(step);
                let hint = Some(offset_ms(&self.tz, t));
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
                    return Some((
                        local_to_utc(&self.tz, s, hint)?,
                        local_to_utc(&self.tz, e, None)?,
                    ));
                }
                None
            }
            Kind::LocalDays { step_ms } => {
                let tl = to_local(&self.tz, t)?.and_utc().timestamp_millis();
                let ol = self.origin_local.and_utc().timestamp_millis();
                let k = (tl - ol).div_euclid(step_ms);
                let s = ol + k * step_ms;
                let hint = Some(offset_ms(&self.tz, t));
                let sl = DateTime::from_timestamp_millis(s)?.naive_utc();
                let el = DateTime::from_timestamp_millis(s + step_ms)?.naive_utc();
                Some((
                    local_to_utc(&self.tz, sl, hint)?,
                    local_to_utc(&self.tz, el, None)?,
                ))
            }
            Kind::IsoWeek => {
                let tl = to_local(&self.tz, t)?;
                let monday = tl.date()
                    - chrono::Duration::days(i64::from(tl.weekday().num_days_from_monday()));
                let sl = monday.and_hms_opt(0, 0, 0)?;
                let el = sl + chrono::Duration::days(7);
                let hint = Some(offset_ms(&self.tz, t));
                Some((
                    local_to_utc(&self.tz, sl, hint)?,
                    local_to_utc(&self.tz, el, None)?,
                ))
            }
            Kind::Compound => {
                let months = self
                    .period
                    .years
                    .saturating_mul(12)
                    .saturating_add(self.period.months);
                let fixed = checked_time_millis(&self.period)
                    .unwrap_or(i64::MAX)
                    .saturating_add(
                        self.period
                            .weeks
                            .saturating_mul(WEEK_MS)
                            .saturating_add(self.period.days.saturating_mul(DAY_MS)),
                    );
                let approx = fixed
                    .saturating_add(months.saturating_mul(2_629_746_000))
                    .max(1);
                let mut k = t.checked_sub(self.origin)?.div_euclid(approx);
                for _ in 0..64 {
                    let s = add_period(&self.period, self.origin, k, &self.tz)?;
                    if s > t {
                        k -= 1;
                        continue;
                    }
                    let e = add_period(&self.period, self.origin, k + 1, &self.tz)?;
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

    /// Floors every value of `arr` (`TIME_FLOOR`); nulls stay null, out-of-range values become
    /// null.
    pub fn floor_array(
        &self,
        arr: &PrimitiveArray<TimestampMillisecondType>,
    ) -> PrimitiveArray<TimestampMillisecondType> {
        if let Kind::Fixed { origin, len } = self.kind {
            return arr.unary(|t| {
                origin.wrapping_add(t.wrapping_sub(origin).div_euclid(len).wrapping_mul(len))
            });
        }
        self.map_cached(arr, |_, s, _| s)
    }

    /// Ceils every value of `arr` (`TIME_CEIL`: the value itself when it starts a bucket, else
    /// the end of its bucket).
    pub fn ceil_array(
        &self,
        arr: &PrimitiveArray<TimestampMillisecondType>,
    ) -> PrimitiveArray<TimestampMillisecondType> {
        if let Kind::Fixed { origin, len } = self.kind {
            return arr.unary(|t| {
                let s =
                    origin.wrapping_add(t.wrapping_sub(origin).div_euclid(len).wrapping_mul(len));
                if s == t { t } else { s.wrapping_add(len) }
            });
        }
        self.map_cached(arr, |t, s, e| if t == s { t } else { e })
    }

    fn map_cached(
        &self,
        arr: &PrimitiveArray<TimestampMillisecondType>,
        pick: impl Fn(i64, i64, i64) -> i64,
    ) -> PrimitiveArray<TimestampMillisecondType> {
        let mut out = PrimitiveBuilder::<TimestampMillisecondType>::with_capacity(arr.len());
        // Last bucket seen; valid when start < end.
        let (mut cs, mut ce) = (0_i64, 0_i64);
        for i in 0..arr.len() {
            if arr.is_null(i) {
                out.append_null();
                continue;
            }
            let t = arr.value(i);
            if cs < ce && cs <= t && t < ce {
                out.append_value(pick(t, cs, ce));
                continue;
            }
            match self.bucket(t) {
                Some((s, e)) => {
                    if s <= t && t < e {
                        cs = s;
                        ce = e;
                    }
                    out.append_value(pick(t, s, e));
                }
                None => out.append_null(),
            }
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dolmen_common::time::{format_iso_millis, parse_iso_instant};

    fn floor(p: &str, origin: Option<&str>, tz: &str, t: &str) -> String {
        let b = PeriodBucketer::new(
            Period::parse(p).unwrap(),
            origin.map(|o| parse_iso_instant(o).unwrap()),
            dolmen_common::time::parse_time_zone(tz).unwrap(),
        )
        .unwrap();
        let arr =
            PrimitiveArray::<TimestampMillisecondType>::from(vec![parse_iso_instant(t).unwrap()]);
        format_iso_millis(b.floor_array(&arr).value(0))
    }

    fn ceil(p: &str, tz: &str, t: &str) -> String {
        let b = PeriodBucketer::new(
            Period::parse(p).unwrap(),
            None,
            dolmen_common::time::parse_time_zone(tz).unwrap(),
        )
        .unwrap();
        let arr =
            PrimitiveArray::<TimestampMillisecondType>::from(vec![parse_iso_instant(t).unwrap()]);
        format_iso_millis(b.ceil_array(&arr).value(0))
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
    fn cache_across_rows() {
        let b = PeriodBucketer::new(Period::parse("P1M").unwrap(), None, Tz::UTC).unwrap();
        let base = parse_iso_instant("2015-09-01").unwrap();
        let v: Vec<Option<i64>> = (0..100)
            .map(|i| {
                if i % 7 == 0 {
                    None
                } else {
                    Some(base + i * 36_000_000)
                }
            })
            .collect();
        let arr = PrimitiveArray::<TimestampMillisecondType>::from(v.clone());
        let out = b.floor_array(&arr);
        for (i, x) in v.iter().enumerate() {
            match x {
                None => assert!(out.is_null(i)),
                Some(t) => assert_eq!(out.value(i), b.bucket(*t).unwrap().0),
            }
        }
    }

    #[test]
    fn rejects_bad_periods() {
        assert!(PeriodBucketer::new(Period::parse("PT0S").unwrap(), None, Tz::UTC).is_err());
        assert!(PeriodBucketer::new(Period::parse("-PT1H").unwrap(), None, Tz::UTC).is_err());
    }
}
