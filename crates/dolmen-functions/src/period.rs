//! `TIME_FLOOR` and `TIME_CEIL` over Arrow timestamp arrays.
//!
//! The bucketing itself, with Druid's `PeriodGranularity` semantics, is
//! [`dolmen_common::period::PeriodBucketer`]; this module applies it to whole arrays. Fixed-length
//! buckets (see [`PeriodBucketer::fixed_buckets`]) are one integer expression per value;
//! calendar buckets cache the last bucket, so time-ordered or clustered input is almost always
//! answered from the cache.

use arrow::array::{Array, PrimitiveArray, PrimitiveBuilder};
use arrow::datatypes::TimestampMillisecondType;
use dolmen_common::period::PeriodBucketer;

/// Floors every value of `arr` (`TIME_FLOOR`); nulls stay null, out-of-range values become
/// null.
pub fn floor_array(
    bucketer: &PeriodBucketer,
    arr: &PrimitiveArray<TimestampMillisecondType>,
) -> PrimitiveArray<TimestampMillisecondType> {
    if let Some(fixed) = bucketer.fixed_buckets() {
        return arr.unary(|t| fixed.start(t));
    }
    map_cached(bucketer, arr, |_, s, _| s)
}

/// Ceils every value of `arr` (`TIME_CEIL`: the value itself when it starts a bucket, else the
/// end of its bucket).
pub fn ceil_array(
    bucketer: &PeriodBucketer,
    arr: &PrimitiveArray<TimestampMillisecondType>,
) -> PrimitiveArray<TimestampMillisecondType> {
    if let Some(fixed) = bucketer.fixed_buckets() {
        return arr.unary(|t| {
            let s = fixed.start(t);
            if s == t { t } else { s.wrapping_add(fixed.len) }
        });
    }
    map_cached(bucketer, arr, |t, s, e| if t == s { t } else { e })
}

fn map_cached(
    bucketer: &PeriodBucketer,
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
        match bucketer.bucket(t) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use dolmen_common::period::Period;
    use dolmen_common::time::{parse_iso_instant, parse_time_zone};
    use dolmen_common::zone::Zone;

    #[test]
    fn cache_across_rows() {
        let b = PeriodBucketer::new(Period::parse("P1M").unwrap(), None, Zone::Utc).unwrap();
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
        let out = floor_array(&b, &arr);
        for (i, x) in v.iter().enumerate() {
            match x {
                None => assert!(out.is_null(i)),
                Some(t) => assert_eq!(out.value(i), b.bucket(*t).unwrap().0),
            }
        }
    }

    #[test]
    fn arrays_match_scalar_buckets() {
        let base = parse_iso_instant("2015-10-30T00:00:00Z").unwrap();
        let values: Vec<i64> = (0..200).map(|i| base + i * 1_234_567).collect();
        let arr = PrimitiveArray::<TimestampMillisecondType>::from(values.clone());
        for tz in ["UTC", "America/Los_Angeles", "Asia/Kolkata", "+05:30"] {
            for p in ["PT1H", "PT15M", "P1D", "P1W", "P1M", "PT1H30M"] {
                let b = PeriodBucketer::new(
                    Period::parse(p).unwrap(),
                    None,
                    parse_time_zone(tz).unwrap(),
                )
                .unwrap();
                let floors = floor_array(&b, &arr);
                let ceils = ceil_array(&b, &arr);
                for (i, t) in values.iter().enumerate() {
                    assert_eq!(Some(floors.value(i)), b.floor(*t), "{tz} {p}");
                    assert_eq!(Some(ceils.value(i)), b.ceil(*t), "{tz} {p}");
                }
            }
        }
    }
}
