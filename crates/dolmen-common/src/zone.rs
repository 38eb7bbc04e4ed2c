//! Time zones as Druid accepts them: Joda-Time's `DateTimeZone.forID`.
//!
//! A [`Zone`] is UTC, a fixed offset from UTC (`+05:30`, `-0800`, `+01`, `-08:00:15`) or an IANA
//! region id from the tz database (`America/Los_Angeles`, `Asia/Kolkata`, `Etc/GMT+5`, via
//! `chrono-tz`). Druid takes such ids in `sqlTimeZone`, in the `timeZone` of `period`
//! granularities and in the timezone argument of the time functions (`TIME_FLOOR`,
//! `timestamp_format`, ...).
//!
//! Instants are `i64` milliseconds since the epoch (UTC). *Local* time is the wall clock of the
//! zone, represented the same way "as if the wall clock were UTC" (local millis), or as a
//! `chrono::NaiveDateTime`. Converting local time back to an instant follows Joda-Time:
//!
//! - [`Zone::local_to_utc`] is Joda's lenient conversion (`convertLocalToUTC(local, false)`): a
//!   local time inside a daylight-saving gap uses the offset in force before the gap, so the
//!   result lands after the gap (`02:30` on the spring-forward day in Los Angeles becomes
//!   `03:30` PDT); an ambiguous local time (the repeated hour in autumn) takes the earlier
//!   instant. [`Zone::local_to_utc_hinted`] prefers a given offset in the overlap, as Joda does
//!   when rounding or adding to an existing instant (`convertLocalToUTC(local, false, original)`).
//! - [`Zone::local_to_utc_strict`] is what Joda's parsers do: a local time inside a gap does not
//!   exist (`IllegalInstantException`, here `None`); ambiguous times take the earlier instant.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone};
use chrono_tz::{OffsetName, Tz};

use crate::time::TimeError;

/// A time zone: UTC, a fixed offset, or a tz-database region (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Zone {
    /// UTC (also `Z`, `GMT`, `UT`, `+00:00`).
    #[default]
    Utc,
    /// A fixed offset, in seconds east of UTC (never zero: that is [`Zone::Utc`]).
    Fixed(i32),
    /// A tz-database region such as `America/Los_Angeles`.
    Named(Tz),
}

impl Zone {
    /// Parses a zone id as Joda's `DateTimeZone.forID` (and Druid's `sqlTimeZone`) accepts it:
    /// `UTC`, `Z`, `GMT` or `UT` (any case), an offset `±hh`, `±hhmm`, `±hh:mm`, `±hh:mm:ss`,
    /// or a tz-database id (`America/Los_Angeles`; case-sensitive, as in Joda).
    ///
    /// # Errors
    /// A [`TimeError`] naming the text when it is none of these.
    pub fn parse(s: &str) -> Result<Zone, TimeError> {
        let t = s.trim();
        if t == "Z"
            || t.eq_ignore_ascii_case("UTC")
            || t.eq_ignore_ascii_case("GMT")
            || t.eq_ignore_ascii_case("UT")
        {
            return Ok(Zone::Utc);
        }
        if t.starts_with(['+', '-']) {
            let b = t.as_bytes();
            let mut pos = 0;
            if let Some(secs) = parse_offset(b, &mut pos)
                && pos == b.len()
            {
                return Ok(Zone::from_offset_secs(secs));
            }
        } else if let Ok(tz) = Tz::from_str(t) {
            return Ok(Zone::from(tz));
        }
        Err(TimeError(format!("unknown time zone [{s}]")))
    }

    /// The zone with a fixed offset of `secs` seconds east of UTC ([`Zone::Utc`] for zero).
    pub fn from_offset_secs(secs: i32) -> Zone {
        if secs == 0 {
            Zone::Utc
        } else {
            Zone::Fixed(secs)
        }
    }

    /// True for [`Zone::Utc`].
    pub fn is_utc(&self) -> bool {
        matches!(self, Zone::Utc)
    }

    /// True when the zone never changes its UTC offset (UTC, fixed offsets, and the `Etc/*`
    /// and UTC-alias regions), so that days and weeks are fixed durations in it.
    pub fn is_fixed_offset(&self) -> bool {
        match self {
            Zone::Utc | Zone::Fixed(_) => true,
            Zone::Named(tz) => {
                let name = tz.name();
                *tz == Tz::UTC
                    || name.starts_with("Etc/")
                    || matches!(
                        name,
                        "UTC"
                            | "UCT"
                            | "GMT"
                            | "GMT0"
                            | "GMT+0"
                            | "GMT-0"
                            | "Greenwich"
                            | "Universal"
                            | "Zulu"
                    )
            }
        }
    }

    /// The zone id as Joda prints it (pattern `ZZZ`, `timeZone` read-back): `UTC`, `+05:30`,
    /// `America/Los_Angeles`. [`Zone::parse`] reads it back.
    pub fn id(&self) -> Cow<'static, str> {
        match self {
            Zone::Utc => Cow::Borrowed("UTC"),
            Zone::Fixed(secs) => {
                let mut s = String::with_capacity(9);
                push_offset(&mut s, i64::from(*secs) * 1000, true, true);
                Cow::Owned(s)
            }
            Zone::Named(tz) => Cow::Borrowed(tz.name()),
        }
    }

    /// The short name of the zone at instant `utc_ms` (Joda pattern `z`): `UTC`, the
    /// abbreviation (`PDT`, `CET`) when the tz database has one, else the offset `+05:30`.
    pub fn short_name(&self, utc_ms: i64) -> Cow<'static, str> {
        match self {
            Zone::Utc => Cow::Borrowed("UTC"),
            Zone::Fixed(_) => self.id(),
            Zone::Named(tz) => {
                let off = DateTime::from_timestamp_millis(utc_ms)
                    .map(|d| tz.offset_from_utc_datetime(&d.naive_utc()));
                match off.as_ref().and_then(|o| o.abbreviation()) {
                    Some(a) => Cow::Owned(a.to_string()),
                    None => {
                        let mut s = String::with_capacity(6);
                        push_offset(&mut s, self.offset_ms(utc_ms), true, false);
                        Cow::Owned(s)
                    }
                }
            }
        }
    }

    /// The UTC offset in force at instant `utc_ms`, in seconds (0 when out of range).
    #[inline]
    pub fn offset_secs(&self, utc_ms: i64) -> i32 {
        match self {
            Zone::Utc => 0,
            Zone::Fixed(secs) => *secs,
            Zone::Named(tz) => match DateTime::from_timestamp_millis(utc_ms) {
                Some(dt) => tz
                    .offset_from_utc_datetime(&dt.naive_utc())
                    .fix()
                    .local_minus_utc(),
                None => 0,
            },
        }
    }

    /// The UTC offset in force at instant `utc_ms`, in milliseconds (0 when out of range).
    #[inline]
    pub fn offset_ms(&self, utc_ms: i64) -> i64 {
        i64::from(self.offset_secs(utc_ms)) * 1000
    }

    /// The local wall-clock time of instant `utc_ms` as local millis (saturating at the ends of
    /// the `i64` range).
    #[inline]
    pub fn to_local(&self, utc_ms: i64) -> i64 {
        utc_ms.saturating_add(self.offset_ms(utc_ms))
    }

    /// The local wall-clock time of instant `utc_ms`, or `None` out of `chrono`'s range.
    #[inline]
    pub fn to_local_datetime(&self, utc_ms: i64) -> Option<NaiveDateTime> {
        let local = utc_ms.checked_add(self.offset_ms(utc_ms))?;
        DateTime::from_timestamp_millis(local).map(|d| d.naive_utc())
    }

    /// Local millis to an instant, leniently (Joda's `convertLocalToUTC(local, false)`): a time
    /// in a daylight-saving gap takes the offset before the gap (landing after it), an ambiguous
    /// time the earlier instant. `None` out of range.
    pub fn local_to_utc(&self, local_ms: i64) -> Option<i64> {
        match self.resolve(local_ms)? {
            Resolved::Instant(t) => Some(t),
            Resolved::Gap => self.across_gap(local_ms),
        }
    }

    /// As [`Zone::local_to_utc`], but an ambiguous time takes offset `hint_offset_ms` when that
    /// is one of its two offsets (Joda's `convertLocalToUTC(local, false, originalInstant)`,
    /// used when a field of an existing instant is rounded or added to).
    pub fn local_to_utc_hinted(&self, local_ms: i64, hint_offset_ms: i64) -> Option<i64> {
        match self {
            Zone::Utc | Zone::Fixed(_) => self.local_to_utc(local_ms),
            Zone::Named(_) => {
                let candidate = local_ms.checked_sub(hint_offset_ms)?;
                if self.offset_ms(candidate) == hint_offset_ms {
                    Some(candidate)
                } else {
                    self.local_to_utc(local_ms)
                }
            }
        }
    }

    /// Local millis to an instant, strictly (Joda's parsers): `None` for a time inside a
    /// daylight-saving gap or out of range; an ambiguous time takes the earlier instant.
    pub fn local_to_utc_strict(&self, local_ms: i64) -> Option<i64> {
        match self.resolve(local_ms)? {
            Resolved::Instant(t) => Some(t),
            Resolved::Gap => None,
        }
    }

    /// [`Zone::local_to_utc`] for a `chrono` local date-time.
    pub fn local_datetime_to_utc(&self, local: NaiveDateTime) -> Option<i64> {
        self.local_to_utc(local.and_utc().timestamp_millis())
    }

    fn resolve(&self, local_ms: i64) -> Option<Resolved> {
        match self {
            Zone::Utc => Some(Resolved::Instant(local_ms)),
            Zone::Fixed(secs) => local_ms
                .checked_sub(i64::from(*secs) * 1000)
                .map(Resolved::Instant),
            Zone::Named(tz) => {
                let local = DateTime::from_timestamp_millis(local_ms)?.naive_utc();
                Some(match tz.from_local_datetime(&local) {
                    LocalResult::Single(d) | LocalResult::Ambiguous(d, _) => {
                        Resolved::Instant(d.timestamp_millis())
                    }
                    LocalResult::None => Resolved::Gap,
                })
            }
        }
    }

    /// The instant for a local time inside a gap: the offset before the gap is the smaller of
    /// the offsets at the local time read as an instant and at that instant shifted by its
    /// offset (the two lie on either side of the transition, as in Joda's algorithm).
    fn across_gap(&self, local_ms: i64) -> Option<i64> {
        let first = self.offset_ms(local_ms);
        let second = self.offset_ms(local_ms.checked_sub(first)?);
        local_ms.checked_sub(first.min(second))
    }
}

/// How a local time maps to an instant.
enum Resolved {
    /// The instant (the earlier one of an ambiguous local time).
    Instant(i64),
    /// The local time falls into a daylight-saving gap.
    Gap,
}

impl From<Tz> for Zone {
    /// `Tz::UTC` becomes [`Zone::Utc`], any other region [`Zone::Named`].
    fn from(tz: Tz) -> Zone {
        if tz == Tz::UTC {
            Zone::Utc
        } else {
            Zone::Named(tz)
        }
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

impl FromStr for Zone {
    type Err = TimeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Zone::parse(s)
    }
}

/// Reads a UTC offset at `*pos` of `b`: `Z`/`z` (zero) or `±hh`, `±hhmm`, `±hh:mm`, `±hhmmss`,
/// `±hh:mm:ss` (hours up to 23), returning seconds east of UTC and advancing `*pos` past it. A
/// separator not followed by two digits is left unread. `None` (and `*pos` unchanged) when no
/// offset starts there.
pub(crate) fn parse_offset(b: &[u8], pos: &mut usize) -> Option<i32> {
    let i = *pos;
    let sign = match b.get(i)? {
        b'Z' | b'z' => {
            *pos = i + 1;
            return Some(0);
        }
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let two = |at: usize| -> Option<i32> {
        match (b.get(at), b.get(at + 1)) {
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                Some(i32::from(x - b'0') * 10 + i32::from(y - b'0'))
            }
            _ => None,
        }
    };
    let mut j = i + 1;
    let h = two(j)?;
    if h > 23 {
        return None;
    }
    j += 2;
    let colon = b.get(j) == Some(&b':');
    let mut secs = h * 3600;
    // Minutes, then seconds, each in the separator style the offset started with.
    for (unit, limit) in [(60, 59), (1, 59)] {
        let at = if colon {
            if b.get(j) != Some(&b':') {
                break;
            }
            j + 1
        } else {
            j
        };
        match two(at) {
            Some(v) if v <= limit => {
                secs += v * unit;
                j = at + 2;
            }
            Some(_) => return None,
            None => break,
        }
    }
    *pos = j;
    Some(sign * secs)
}

/// Appends an offset as `+hhmm`, or `+hh:mm` with `colon`, plus the seconds when `seconds` is
/// set and they are not zero; zero prints as `+0000`/`+00:00` (Joda's `Z`/`ZZ` printers print
/// hours and minutes only, its ISO printer and zone ids up to the seconds).
pub(crate) fn push_offset(out: &mut String, off_ms: i64, colon: bool, seconds: bool) {
    let secs = off_ms.abs() / 1000;
    out.push(if off_ms < 0 { '-' } else { '+' });
    crate::time::push_2(out, (secs / 3600) as u32);
    if colon {
        out.push(':');
    }
    crate::time::push_2(out, (secs / 60 % 60) as u32);
    if seconds && secs % 60 != 0 {
        if colon {
            out.push(':');
        }
        crate::time::push_2(out, (secs % 60) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    /// Local millis of a wall-clock time.
    fn wall(y: i32, m: u32, d: u32, h: u32, min: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(h, min, 0)
            .unwrap()
            .and_utc()
            .timestamp_millis()
    }

    #[test]
    fn zones() {
        assert_eq!(Zone::parse("+05:30").ok(), Some(Zone::Fixed(19800)));
        assert_eq!(Zone::parse("-0800").ok(), Some(Zone::Fixed(-28800)));
        assert_eq!(Zone::parse("UTC").ok(), Some(Zone::Utc));
        assert_eq!(Zone::parse("Nowhere/Land").ok(), None);
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

    #[test]
    fn ids_and_aliases() {
        for utc in ["UTC", "utc", "Z", "GMT", "gmt", "UT", "+00:00", "-00"] {
            assert_eq!(Zone::parse(utc), Ok(Zone::Utc), "{utc}");
        }
        assert_eq!(Zone::parse("+05").unwrap(), Zone::Fixed(5 * 3600));
        assert_eq!(Zone::parse("+0530").unwrap().id(), "+05:30");
        assert_eq!(Zone::parse("-08:00:15").unwrap(), Zone::Fixed(-28815));
        assert_eq!(Zone::parse("-08:00:15").unwrap().id(), "-08:00:15");
        assert_eq!(Zone::parse(" Asia/Kolkata ").unwrap().id(), "Asia/Kolkata");
        for bad in [
            "",
            "+5",
            "+24:00",
            "+05:60",
            "+05:30x",
            "america/los_angeles",
        ] {
            let err = Zone::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("[{bad}]")), "{err}");
        }
        assert!(Zone::parse("Etc/GMT+5").unwrap().is_fixed_offset());
        assert!(Zone::parse("+05:30").unwrap().is_fixed_offset());
        assert!(!Zone::parse("Europe/Paris").unwrap().is_fixed_offset());
        assert_eq!(Zone::from(Tz::UTC), Zone::Utc);
    }

    #[test]
    fn offsets_and_conversions() {
        let la = Zone::parse("America/Los_Angeles").unwrap();
        let summer = 1_442_018_818_771; // 2015-09-12T00:46:58.771Z
        assert_eq!(la.offset_secs(summer), -7 * 3600);
        assert_eq!(la.short_name(summer), "PDT");
        assert_eq!(Zone::Fixed(19800).short_name(summer), "+05:30");
        let kolkata = Zone::Fixed(19800);
        assert_eq!(kolkata.to_local(0), 19_800_000);
        assert_eq!(kolkata.local_to_utc(19_800_000), Some(0));
        // The repeated hour of 2015-11-01 01:30 local: earlier (PDT) unless hinted to PST.
        let local = wall(2015, 11, 1, 1, 30);
        let pdt = local + 7 * 3_600_000;
        assert_eq!(la.local_to_utc(local), Some(pdt));
        assert_eq!(la.local_to_utc_strict(local), Some(pdt));
        assert_eq!(
            la.local_to_utc_hinted(local, -8 * 3_600_000),
            Some(pdt + 3_600_000)
        );
        // The gap: lenient moves past it, strict rejects it; also east of UTC.
        let gap = wall(2015, 3, 8, 2, 30);
        assert_eq!(la.local_to_utc_strict(gap), None);
        assert_eq!(la.local_to_utc(gap), Some(gap + 8 * 3_600_000));
        let paris = Zone::parse("Europe/Paris").unwrap();
        let paris_gap = NaiveDate::from_ymd_opt(2015, 3, 29)
            .unwrap()
            .and_hms_opt(2, 30, 0)
            .unwrap();
        let utc = paris.local_datetime_to_utc(paris_gap).unwrap();
        assert_eq!(
            paris.to_local_datetime(utc).unwrap().to_string(),
            "2015-03-29 03:30:00"
        );
    }

    #[test]
    fn offset_reader() {
        let read = |s: &str| {
            let mut pos = 0;
            parse_offset(s.as_bytes(), &mut pos).map(|v| (v, pos))
        };
        assert_eq!(read("Z"), Some((0, 1)));
        assert_eq!(read("+05"), Some((18000, 3)));
        assert_eq!(read("+05:30"), Some((19800, 6)));
        assert_eq!(read("-0530"), Some((-19800, 5)));
        assert_eq!(read("+05:30:15"), Some((19815, 9)));
        assert_eq!(read("+05:x"), Some((18000, 3)));
        assert_eq!(read("+5"), None);
        assert_eq!(read("x"), None);
    }
}
