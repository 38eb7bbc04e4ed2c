//! `APPROX_QUANTILE(expr, probability[, resolution])`: Druid's deprecated approximate-histogram
//! quantile (`druid-histogram` extension: `ApproximateHistogram`, SQL `QuantileSqlAggregator`).
//!
//! The values, read as FLOATs as Druid reads them, go into a Ben-Haim & Tom-Tov streaming
//! histogram of at most `resolution` bins (default 50, Druid's `DEFAULT_HISTOGRAM_SIZE`; Druid's
//! SQL also fixes `numBuckets` 7 and limits of minus/plus infinity, which only matter to the
//! `toHistogram` views SQL never uses). [`ApproximateHistogram`] follows Druid's class step by
//! step, in `float` arithmetic where Druid uses it: `offer` (a new value becomes a bin while there
//! is room; then it is merged into its nearest bin, or the two closest bins are merged to make room,
//! whichever is closer), `foldFast` (the rule-based merge of partial histograms: bins closer than
//! `(max - min) / (resolution - 1)` are merged in one pass) and `getQuantiles` (the trapezoid
//! interpolation of the paper's "uniform procedure", clamped to `max`, `min` inside the first
//! bin). The result is that `float` widened to a DOUBLE, so it equals Druid's for the same values
//! in the same order and the same merge order; with fewer distinct values than `resolution`
//! every bin is exact and the order does not matter. With no value the result is NaN (Druid's
//! empty histogram). Nulls are skipped; NaN is offered as Druid offers it.
//!
//! `probability` must be a numeric literal that is strictly between 0 and 1 once read as a FLOAT
//! (Druid accepts 0 and 1 at planning and then fails every query with them) and `resolution` a
//! positive integer literal (at most 10,000,000); anything else is a planning error naming the
//! argument. Partial histograms travel between partitions in Druid's `toBytes` form (compact when
//! that is smaller, else sparse; see [`ApproximateHistogram::to_bytes`]). `expr` may also be a
//! BINARY column of serialized histograms in any of Druid's three forms (dense, sparse,
//! compact), which are folded as Druid's `approxHistogramFold` does.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Float32Type};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

const NAME: &str = "APPROX_QUANTILE";

/// Druid's `ApproximateHistogram.DEFAULT_HISTOGRAM_SIZE`, the default `resolution`.
pub const DEFAULT_RESOLUTION: usize = 50;

/// The largest `resolution` accepted (Druid has no limit; each bin takes 12 bytes).
const MAX_RESOLUTION: usize = 10_000_000;

/// The sign bit of a bin marks it approximate (values were merged into it).
const APPROX_FLAG: u64 = 1 << 63;
/// The count bits of a bin.
const COUNT_BITS: u64 = !APPROX_FLAG;

/// Java's `Float.floatToIntBits` (NaNs collapse to the canonical NaN).
fn float_to_int_bits(v: f32) -> i32 {
    if v.is_nan() {
        0x7fc0_0000
    } else {
        v.to_bits() as i32
    }
}

/// Java's `Float.compare`.
fn java_compare(a: f32, b: f32) -> std::cmp::Ordering {
    if a < b {
        std::cmp::Ordering::Less
    } else if a > b {
        std::cmp::Ordering::Greater
    } else {
        float_to_int_bits(a).cmp(&float_to_int_bits(b))
    }
}

/// Java's `Arrays.binarySearch(float[], from, to, key)`: `Ok(index)` of a match, else
/// `Err(insertion point)`; the same probe order, so the same match among equal positions.
fn java_binary_search(a: &[f32], key: f32) -> std::result::Result<usize, usize> {
    let (mut low, mut high) = (0isize, a.len() as isize - 1);
    while low <= high {
        let mid = ((low + high) as usize) >> 1;
        match java_compare(a[mid], key) {
            std::cmp::Ordering::Less => low = mid as isize + 1,
            std::cmp::Ordering::Greater => high = mid as isize - 1,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(low as usize)
}

/// Druid's `ApproximateHistogram`. `positions` and `bins` hold the `bin_count` used bins
/// (Druid's arrays hold `size` slots of which the first `binCount` are used).
#[derive(Debug, Clone, PartialEq)]
pub struct ApproximateHistogram {
    /// The most bins kept (Druid's `size`, SQL's `resolution`).
    size: usize,
    positions: Vec<f32>,
    /// Counts, with [`APPROX_FLAG`] on merged bins.
    bins: Vec<u64>,
    min: f32,
    max: f32,
    count: u64,
    lower_limit: f32,
    upper_limit: f32,
}

impl ApproximateHistogram {
    /// An empty histogram of at most `size` bins without limits (`new ApproximateHistogram(size)`).
    pub fn new(size: usize) -> Self {
        ApproximateHistogram {
            size,
            positions: Vec::new(),
            bins: Vec::new(),
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            count: 0,
            lower_limit: f32::NEG_INFINITY,
            upper_limit: f32::INFINITY,
        }
    }

    /// Druid's constructor from used bins: count is the sum of the bins, no limits.
    fn from_bins(size: usize, positions: Vec<f32>, bins: Vec<u64>, min: f32, max: f32) -> Self {
        let count = bins
            .iter()
            .fold(0u64, |s, b| s.wrapping_add(b & COUNT_BITS));
        ApproximateHistogram {
            size,
            positions,
            bins,
            min,
            max,
            count,
            lower_limit: f32::NEG_INFINITY,
            upper_limit: f32::INFINITY,
        }
    }

    /// The number of values offered.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bin positions.
    pub fn positions(&self) -> &[f32] {
        &self.positions
    }

    /// Bin counts, without the approximate flag (Druid's `bins()`).
    pub fn counts(&self) -> Vec<u64> {
        self.bins.iter().map(|b| b & COUNT_BITS).collect()
    }

    fn bin_count(&self) -> usize {
        self.positions.len()
    }

    /// Druid's `offer(float)`.
    pub fn offer(&mut self, value: f32) {
        if value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
        if self.positions.is_empty() {
            self.positions.push(value);
            self.bins.push(1);
            self.count += 1;
            return;
        }
        let insert_at = match java_binary_search(&self.positions, value) {
            Ok(i) => {
                // An exact match: one more, keeping the approximate flag.
                let b = self.bins[i];
                self.bins[i] = (b & APPROX_FLAG) | ((b & COUNT_BITS) + 1);
                self.count += 1;
                return;
            }
            Err(i) => i,
        };
        let bin_count = self.bin_count();
        if bin_count < self.size {
            self.positions.insert(insert_at, value);
            self.bins.insert(insert_at, 1);
            self.count += 1;
            return;
        }
        // No room: merge the value into its nearest bin, or merge the two closest bins and
        // insert the value, whichever is the smaller move.
        let mut min_pos = self.min_delta_index();
        let mut min_delta = match min_pos {
            Some(i) => self.positions[i + 1] - self.positions[i],
            None => f32::INFINITY,
        };
        let delta_right = if insert_at < bin_count {
            self.positions[insert_at] - value
        } else {
            f32::INFINITY
        };
        let delta_left = if insert_at > 0 {
            value - self.positions[insert_at - 1]
        } else {
            f32::INFINITY
        };
        let mut merge_value = false;
        if delta_right < min_delta {
            min_delta = delta_right;
            min_pos = Some(insert_at);
            merge_value = true;
        }
        if delta_left < min_delta {
            min_pos = Some(insert_at - 1);
            merge_value = true;
        }
        match min_pos {
            Some(p) if merge_value => {
                let k = self.bins[p] & COUNT_BITS;
                self.positions[p] = (self.positions[p] * k as f32 + value) / (k + 1) as f32;
                self.bins[p] = (k + 1) | APPROX_FLAG;
                self.count += 1;
            }
            Some(p) => self.merge_insert(p, insert_at, value, 1),
            // Only with size 1 and an infinite value: Druid would fail on index -1.
            None => {}
        }
    }

    /// Druid's `minDeltaIndex`: the first bin of the closest pair.
    fn min_delta_index(&self) -> Option<usize> {
        let mut min_delta = f32::INFINITY;
        let mut min_pos = None;
        for i in 0..self.bin_count().saturating_sub(1) {
            let delta = self.positions[i + 1] - self.positions[i];
            if delta < min_delta {
                min_delta = delta;
                min_pos = Some(i);
            }
        }
        min_pos
    }

    /// Druid's `mergeInsert` (with `insertAt >= 0`): bins `merge_at` and `merge_at + 1` merged,
    /// `(v, c)` inserted at `insert_at`, with Druid's array shifts.
    fn merge_insert(&mut self, merge_at: usize, insert_at: usize, v: f32, c: u64) {
        let k0 = self.bins[merge_at] & COUNT_BITS;
        let k1 = self.bins[merge_at + 1] & COUNT_BITS;
        let sum = k0 + k1;
        self.positions[merge_at] = ((f64::from(self.positions[merge_at]) * k0 as f64
            + f64::from(self.positions[merge_at + 1]) * k1 as f64)
            / sum as f64) as f32;
        self.bins[merge_at] = sum | APPROX_FLAG;
        let unused = merge_at + 1;
        if insert_at == unused {
            // Druid's shiftLeft over an empty range, then a write at `merge_at`: the merged
            // bin is overwritten and the bin after it kept (unreachable in practice, kept as is).
            self.positions[merge_at] = v;
            self.bins[merge_at] = c;
        } else {
            self.positions.remove(unused);
            self.bins.remove(unused);
            let at = if insert_at < unused {
                insert_at
            } else {
                insert_at - 1
            };
            self.positions.insert(at, v);
            self.bins.insert(at, c);
        }
        self.count += 1;
    }

    /// Druid's `foldFast(h)`: `h` merged into this histogram (`foldRule`).
    pub fn fold_fast(&mut self, h: &ApproximateHistogram) {
        if self.size == 0 {
            // Druid's `copy`.
            if h.size > self.size {
                self.size = h.size;
            }
            self.positions = h.positions.clone();
            self.bins = h.bins.clone();
            self.min = h.min;
            self.max = h.max;
            self.count = h.count;
            return;
        }
        if h.bin_count() == 0 {
            return;
        }
        self.min = if self.min < h.min { self.min } else { h.min };
        self.max = if self.max > h.max { self.max } else { h.max };
        let merged_count = self.count.wrapping_add(h.count);
        let (positions, bins) = if self.bin_count() + h.bin_count() <= self.size {
            combine_bins(&self.positions, &self.bins, &h.positions, &h.bins)
        } else {
            self.rule_combine_bins(h)
        };
        self.positions = positions;
        self.bins = bins;
        self.count = merged_count;
    }

    /// Druid's `ruleCombineBins`: one merge-sorted pass merging each bin into the previous one
    /// when closer than the cutoff; values beyond the limits gather in one bin at each end.
    fn rule_combine_bins(&self, h: &ApproximateHistogram) -> (Vec<f32>, Vec<u64>) {
        let size = self.size as f32;
        let (lower, upper) = (self.lower_limit, self.upper_limit);
        let cutoff = if upper != f32::INFINITY && lower != f32::NEG_INFINITY {
            (upper - lower) / (size - 2.0 - 1.0)
        } else if upper != f32::INFINITY {
            (upper - self.min) / (size - 2.0)
        } else if lower != f32::NEG_INFINITY {
            (self.max - lower) / (size - 2.0)
        } else {
            (self.max - self.min) / (size - 1.0)
        };
        let (lp, lb, rp, rb) = (&self.positions, &self.bins, &h.positions, &h.bins);
        let (ln, rn) = (lp.len(), rp.len());
        let mut positions: Vec<f32> = Vec::with_capacity(self.size + 2);
        let mut bins: Vec<u64> = Vec::with_capacity(self.size + 2);
        // Merges (m1, k1) into (position, bin) as Druid does.
        let gather = |position: &mut f32, bin: &mut u64, m1: f32, k1: u64| {
            let delta = m1 - *position;
            let k0 = *bin & COUNT_BITS;
            let sum = k0 + k1;
            let w = k0 as f32 / sum as f32;
            *position = -delta * w + m1;
            *bin = sum | APPROX_FLAG;
        };
        let (mut lower_position, mut lower_bin) = (0f32, 0u64);
        let (mut upper_position, mut upper_bin) = (0f32, 0u64);
        let (mut j, mut k) = (0, 0);
        while j != ln && lp[j] < lower {
            gather(
                &mut lower_position,
                &mut lower_bin,
                lp[j],
                lb[j] & COUNT_BITS,
            );
            j += 1;
        }
        while k != rn && rp[k] < lower {
            gather(
                &mut lower_position,
                &mut lower_bin,
                rp[k],
                rb[k] & COUNT_BITS,
            );
            k += 1;
        }
        if lower_bin & COUNT_BITS > 0 {
            positions.push(lower_position);
            bins.push(lower_bin);
        }
        // The first bin past the lower limit is taken as is.
        if j != ln || k != rn {
            if j != ln && (k == rn || lp[j] < rp[k]) {
                positions.push(lp[j]);
                bins.push(lb[j]);
                j += 1;
            } else {
                positions.push(rp[k]);
                bins.push(rb[k]);
                k += 1;
            }
        }
        while j != ln || k != rn {
            let (m1, k1) = if j != ln && (k == rn || lp[j] < rp[k]) {
                j += 1;
                (lp[j - 1], lb[j - 1] & COUNT_BITS)
            } else {
                k += 1;
                (rp[k - 1], rb[k - 1] & COUNT_BITS)
            };
            if m1 > upper {
                gather(&mut upper_position, &mut upper_bin, m1, k1);
                continue;
            }
            let last = positions.len() - 1;
            let delta = m1 - positions[last];
            if delta <= cutoff {
                gather(&mut positions[last], &mut bins[last], m1, k1);
            } else {
                positions.push(m1);
                bins.push(k1);
            }
        }
        if upper_bin & COUNT_BITS > 0 {
            positions.push(upper_position);
            bins.push(upper_bin);
        }
        (positions, bins)
    }

    /// Druid's `getQuantiles` for one probability (strictly between 0 and 1): NaN when empty.
    pub fn quantile(&self, probability: f32) -> f32 {
        if self.count == 0 {
            return f32::NAN;
        }
        let bins = self.counts();
        // Druid multiplies the float probability by the long count in float.
        let s = f64::from(probability * self.count as f32);
        let mut i = 0;
        let mut sum: u64 = 0;
        for (k, &count) in bins.iter().enumerate() {
            if (sum.wrapping_add(count)) as f64 > s {
                i = k;
                break;
            }
            sum = sum.wrapping_add(count);
        }
        if i == 0 {
            // Inside the first bin: nothing to its left but the minimum.
            return self.min;
        }
        let d = s - sum as f64;
        let c = -2.0 * d;
        let a = (bins[i] as i64).wrapping_sub(bins[i - 1] as i64);
        let b = (bins[i - 1] as i64).wrapping_mul(2);
        let z = if a == 0 {
            -c / b as f64
        } else {
            (-(b as f64) + (b.wrapping_mul(b) as f64 - a.wrapping_mul(4) as f64 * c).sqrt())
                / a.wrapping_mul(2) as f64
        };
        let uj = f64::from(self.positions[i - 1])
            + f64::from(self.positions[i] - self.positions[i - 1]) * z;
        if (uj as f32) < self.max {
            uj as f32
        } else {
            self.max
        }
    }

    /// The bins' total count of exact (unmerged) bins (Druid's `getExactCount`).
    fn exact_count(&self) -> u64 {
        self.bins
            .iter()
            .filter(|b| *b & APPROX_FLAG == 0)
            .fold(0u64, |s, b| s.wrapping_add(b & COUNT_BITS))
    }

    fn can_store_compact(&self) -> bool {
        let exact = self.exact_count();
        self.size <= i16::MAX as usize
            && exact <= i8::MAX as u64
            && self.count.wrapping_sub(exact) <= i8::MAX as u64
    }

    fn sparse_size(&self) -> usize {
        4 * 2 + 12 * self.bin_count() + 4 * 2
    }

    fn compact_size(&self) -> usize {
        let exact = self.exact_count() as usize;
        if exact as u64 == self.count {
            2 + 1 + 4 * exact
        } else {
            2 + 1 + 4 * exact + 1 + 4 * (self.count as usize - exact) + 4 * 2
        }
    }

    /// Druid's `toBytes`: the compact form (the values themselves; at most 127 exact and 127
    /// approximate values) when it is smaller, else the sparse form (big-endian `int size`,
    /// `int -binCount`, positions, bins, `float min`, `float max`).
    pub fn to_bytes(&self) -> Vec<u8> {
        if self.can_store_compact() && self.compact_size() < self.sparse_size() {
            self.to_bytes_compact()
        } else {
            self.to_bytes_sparse()
        }
    }

    fn to_bytes_sparse(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.sparse_size());
        out.extend_from_slice(&(self.size as i32).to_be_bytes());
        out.extend_from_slice(&(-(self.bin_count() as i32)).to_be_bytes());
        for p in &self.positions {
            out.extend_from_slice(&p.to_be_bytes());
        }
        for b in &self.bins {
            out.extend_from_slice(&b.to_be_bytes());
        }
        out.extend_from_slice(&self.min.to_be_bytes());
        out.extend_from_slice(&self.max.to_be_bytes());
        out
    }

    fn to_bytes_compact(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.compact_size());
        out.extend_from_slice(&(-(self.size as i16)).to_be_bytes());
        let exact = self.exact_count();
        let values = |out: &mut Vec<u8>, approx: bool| {
            for (p, b) in self.positions.iter().zip(&self.bins) {
                if (b & APPROX_FLAG != 0) == approx {
                    for _ in 0..(b & COUNT_BITS) {
                        out.extend_from_slice(&p.to_be_bytes());
                    }
                }
            }
        };
        if exact != self.count {
            out.push((-((self.count - exact) as i8)) as u8);
            values(&mut out, true);
            out.extend_from_slice(&self.min.to_be_bytes());
            out.extend_from_slice(&self.max.to_be_bytes());
        }
        out.push(exact as u8);
        values(&mut out, false);
        out
    }

    /// Druid's `fromBytes`: the dense, sparse or compact form.
    ///
    /// # Errors
    /// When the bytes are not a serialized histogram.
    pub fn from_bytes(bytes: &[u8]) -> Result<ApproximateHistogram> {
        let bad = || DataFusionError::Execution(format!("{NAME}: bad serialized histogram"));
        let mut r = Reader { bytes, at: 0 };
        if bytes.len() < 2 {
            return Err(bad());
        }
        if i16::from_be_bytes([bytes[0], bytes[1]]) < 0 {
            return r.compact().ok_or_else(bad);
        }
        let size = usize::try_from(r.i32().ok_or_else(bad)?).map_err(|_| bad())?;
        let bin_count = r.i32().ok_or_else(bad)?;
        let (used, slots) = if bin_count < 0 {
            let n = bin_count.unsigned_abs() as usize;
            (n, n)
        } else {
            (bin_count as usize, size)
        };
        if used > size || used > bytes.len() || slots > bytes.len() {
            return Err(bad());
        }
        let mut positions = Vec::with_capacity(used);
        for i in 0..slots {
            let p = r.f32().ok_or_else(bad)?;
            if i < used {
                positions.push(p);
            }
        }
        let mut bins = Vec::with_capacity(used);
        for i in 0..slots {
            let b = r.u64().ok_or_else(bad)?;
            if i < used {
                bins.push(b);
            }
        }
        let min = r.f32().ok_or_else(bad)?;
        let max = r.f32().ok_or_else(bad)?;
        Ok(ApproximateHistogram::from_bins(
            size, positions, bins, min, max,
        ))
    }
}

/// Druid's `combineBins`: both bin lists merge-sorted, bins at equal positions added (their raw
/// longs, approximate flags included, as Druid adds them).
fn combine_bins(lp: &[f32], lb: &[u64], rp: &[f32], rb: &[u64]) -> (Vec<f32>, Vec<u64>) {
    let (ln, rn) = (lp.len(), rp.len());
    let mut positions = Vec::with_capacity(ln + rn);
    let mut bins = Vec::with_capacity(ln + rn);
    let (mut j, mut k) = (0, 0);
    while j < ln || k < rn {
        if j < ln && (k == rn || lp[j] < rp[k]) {
            positions.push(lp[j]);
            bins.push(lb[j]);
            j += 1;
        } else if k < rn && (j == ln || lp[j] > rp[k]) {
            positions.push(rp[k]);
            bins.push(rb[k]);
            k += 1;
        } else {
            positions.push(lp[j]);
            bins.push(lb[j].wrapping_add(rb[k]));
            j += 1;
            k += 1;
        }
    }
    (positions, bins)
}

/// Big-endian reads.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let b = self.bytes.get(self.at..self.at + N)?;
        self.at += N;
        b.try_into().ok()
    }

    fn i8(&mut self) -> Option<i8> {
        self.take::<1>().map(i8::from_be_bytes)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take::<2>().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take::<4>().map(i32::from_be_bytes)
    }

    fn f32(&mut self) -> Option<f32> {
        self.take::<4>().map(f32::from_be_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take::<8>().map(u64::from_be_bytes)
    }

    /// Druid's `fromBytesCompact`.
    fn compact(&mut self) -> Option<ApproximateHistogram> {
        let size = usize::from(self.i16()?.unsigned_abs());
        let count = self.i8()?;
        if count >= 0 {
            let mut h = ApproximateHistogram::new(size);
            for _ in 0..count {
                h.offer(self.f32()?);
            }
            return Some(h);
        }
        // Counts by value (Java's Map<Float, Long>: keys equal by their bits).
        fn tally(r: &mut Reader<'_>, n: usize) -> Option<(Vec<f32>, HashMap<i32, u64>)> {
            let mut keys = Vec::new();
            let mut counts = HashMap::new();
            for _ in 0..n {
                let v = r.f32()?;
                let c = counts.entry(float_to_int_bits(v)).or_insert(0u64);
                if *c == 0 {
                    keys.push(v);
                }
                *c += 1;
            }
            Some((keys, counts))
        }
        let (approx_keys, approx) = tally(self, usize::from(count.unsigned_abs()))?;
        let min = self.f32()?;
        let max = self.f32()?;
        let exact_count = usize::try_from(self.i8()?).ok()?;
        let (exact_keys, exact) = tally(self, exact_count)?;
        let mut positions: Vec<f32> = exact_keys.into_iter().chain(approx_keys).collect();
        // Java's Collections.sort: stable, Float.compareTo.
        positions.sort_by(|a, b| java_compare(*a, *b));
        let bins = positions
            .iter()
            .map(|p| {
                let key = float_to_int_bits(*p);
                match exact.get(&key) {
                    Some(c) => *c,
                    None => approx.get(&key).copied().unwrap_or(0) | APPROX_FLAG,
                }
            })
            .collect();
        Some(ApproximateHistogram::from_bins(
            size, positions, bins, min, max,
        ))
    }
}

/// The `APPROX_QUANTILE` aggregate function.
pub fn approx_quantile() -> AggregateUDF {
    AggregateUDF::new_from_impl(ApproxQuantile {
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ApproxQuantile {
    signature: Signature,
}

/// The literal parameters.
#[derive(Debug, Clone, Copy)]
struct Params {
    probability: f32,
    resolution: usize,
}

impl Params {
    fn from_literals(params: &[Option<ScalarValue>]) -> Result<Params> {
        let probability = params
            .first()
            .and_then(Option::as_ref)
            .filter(|v| !v.is_null() && v.data_type().is_numeric())
            .and_then(|v| v.cast_to(&DataType::Float64).ok())
            .and_then(|v| match v {
                ScalarValue::Float64(Some(f)) => Some(f),
                _ => None,
            });
        let Some(probability) = probability else {
            return plan_err!("{NAME}: probability must be a numeric literal");
        };
        // Druid reads it as a float, and getQuantiles wants it strictly inside (0, 1).
        let p = probability as f32;
        if !(p > 0.0 && p < 1.0) {
            return plan_err!(
                "{NAME}: probability must be strictly between 0 and 1, got [{probability}]"
            );
        }
        let resolution = match params.get(1) {
            None => DEFAULT_RESOLUTION,
            Some(v) => {
                let r = v
                    .as_ref()
                    .filter(|v| !v.is_null() && v.data_type().is_integer())
                    .and_then(|v| v.cast_to(&DataType::Int64).ok())
                    .and_then(|v| match v {
                        ScalarValue::Int64(Some(i)) => Some(i),
                        _ => None,
                    });
                match r {
                    Some(r) if r >= 1 && r as u64 <= MAX_RESOLUTION as u64 => r as usize,
                    Some(r) => {
                        return plan_err!(
                            "{NAME}: resolution must be a positive integer (at most {MAX_RESOLUTION}), got [{r}]"
                        );
                    }
                    None => return plan_err!("{NAME}: resolution must be an integer literal"),
                }
            }
        };
        Ok(Params {
            probability: p,
            resolution,
        })
    }
}

fn is_binary(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView
    )
}

impl AggregateUDFImpl for ApproxQuantile {
    fn name(&self) -> &str {
        "approx_quantile"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(2..=3).contains(&arg_types.len()) {
            return plan_err!(
                "{NAME} takes 2 or 3 arguments (expr, probability[, resolution]), got {}",
                arg_types.len()
            );
        }
        let first = &arg_types[0];
        let input = if is_binary(first) {
            DataType::Binary
        } else if first.is_numeric() || first == &DataType::Null {
            DataType::Float32
        } else {
            return plan_err!(
                "{NAME}: the first argument must be numeric (or serialized approximate histograms), got {first}"
            );
        };
        let mut out = vec![input, DataType::Float64];
        if let Some(r) = arg_types.get(2) {
            if !(r.is_integer() || r == &DataType::Null) {
                return plan_err!("{NAME}: resolution must be an integer literal, got {r}");
            }
            out.push(DataType::Int64);
        }
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let literals = super::literal_args(args.exprs);
        let params = Params::from_literals(&literals)?;
        Ok(Box::new(QuantileAccumulator {
            params,
            histogram: ApproximateHistogram::new(params.resolution),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[approxHistogram]", args.name),
            DataType::Binary,
            true,
        ))])
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(Some(f64::NAN)))
    }
}

#[derive(Debug)]
struct QuantileAccumulator {
    params: Params,
    histogram: ApproximateHistogram,
}

impl QuantileAccumulator {
    /// Folds serialized histograms in (Druid's `approxHistogramFold`).
    fn fold_serialized(&mut self, values: &ArrayRef) -> Result<()> {
        let b = cast(values, &DataType::Binary)?;
        let b: &BinaryArray = b.as_binary::<i32>();
        for i in 0..b.len() {
            if b.is_valid(i) {
                let h = ApproximateHistogram::from_bytes(b.value(i))?;
                self.histogram.fold_fast(&h);
            }
        }
        Ok(())
    }
}

impl Accumulator for QuantileAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(v) = values.first() else {
            return Ok(());
        };
        if is_binary(v.data_type()) {
            return self.fold_serialized(v);
        }
        let v = cast(v, &DataType::Float32)?;
        for x in v.as_primitive::<Float32Type>().iter().flatten() {
            self.histogram.offer(x);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(Some(f64::from(
            self.histogram.quantile(self.params.probability),
        ))))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.histogram.positions.capacity() * 4
            + self.histogram.bins.capacity() * 8
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.histogram.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        match states.first() {
            Some(s) => self.fold_serialized(s),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{ctx, one};
    use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{Float64Type, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// Druid's `ApproximateHistogramTest` data sets.
    const VALUES: [f32; 10] = [23., 19., 10., 16., 36., 2., 9., 32., 30., 45.];
    const VALUES5: [f32; 10] = [1., 2., 3., 4., 5., 6., 7., 8., 9., 10.];
    const VALUES7: [f32; 18] = [
        1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 12., 12., 12., 15., 20., 25., 25., 25.,
    ];

    fn build(size: usize, values: &[f32]) -> ApproximateHistogram {
        let mut h = ApproximateHistogram::new(size);
        for v in values {
            h.offer(*v);
        }
        h
    }

    fn assert_close(got: &[f32], want: &[f32], tolerance: f32) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tolerance, "{got:?} vs {want:?}");
        }
    }

    /// `ApproximateHistogramTest.testOffer`: 10 values into 5 bins.
    #[test]
    fn offer_merges_the_closest_bins() {
        let h = build(5, &VALUES);
        // (2, 1), (9.5, 2), (19.33, 3), (32.67, 3), (45, 1)
        assert_close(h.positions(), &[2., 9.5, 19.33, 32.67, 45.], 0.1);
        assert_eq!(h.counts(), [1, 2, 3, 3, 1]);
        assert_eq!((h.min, h.max, h.count()), (2., 45., 10));
    }

    /// `ApproximateHistogramTest.testFold` (`mergedFast`): the rule-based merge of a 5-bin
    /// histogram of the first 5 values and a 10-bin one of the rest, into an empty one.
    #[test]
    fn fold_fast_merges_by_the_cutoff_rule() {
        let mut h1 = ApproximateHistogram::new(5);
        let mut h2 = ApproximateHistogram::new(10);
        VALUES[..5].iter().for_each(|v| h1.offer(*v));
        VALUES[5..].iter().for_each(|v| h2.offer(*v));
        let mut merged = ApproximateHistogram::new(0);
        merged.fold_fast(&h1);
        merged.fold_fast(&h2);
        assert_close(merged.positions(), &[11.2, 30.25, 45.], 0.1);
        assert_eq!(merged.counts(), [5, 4, 1]);
        assert_eq!((merged.min, merged.max, merged.count()), (2., 45., 10));

        // Room for every bin: bins at equal positions add up (the second half of testFold).
        let mut a = build(10, &[1., 2., 3., 4., 5., 6.]);
        a.fold_fast(&build(5, &[3., 4., 5., 6.]));
        assert_eq!(a.positions(), [1., 2., 3., 4., 5., 6.]);
        assert_eq!(a.counts(), [1, 1, 2, 2, 2, 2]);
        assert_eq!(a.count(), 10);
        // Folding an empty histogram changes nothing (testFoldNothing2).
        let before = a.clone();
        a.fold_fast(&ApproximateHistogram::new(10));
        assert_eq!(a, before);
    }

    /// `ApproximateHistogramTest.testQuantileSmaller`, `testQuantileBigger` and
    /// `testQuantileBetweenMinMax` (Druid's tolerance 0.1).
    #[test]
    fn quantiles_interpolate_as_druid() {
        let q = |h: &ApproximateHistogram, ps: &[f32]| -> Vec<f32> {
            ps.iter().map(|p| h.quantile(*p)).collect()
        };
        let deciles = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
        let h = build(20, &VALUES5);
        assert_close(&q(&h, &[0.5]), &[5.], 0.1);
        assert_close(&q(&h, &[0.333, 0.666]), &[3.33, 6.67], 0.1);
        assert_close(&q(&h, &deciles), &[1., 2., 3., 4., 5., 6., 7., 8., 9.], 0.1);
        let h = build(5, &VALUES5);
        assert_close(&q(&h, &[0.5]), &[4.5], 0.1);
        assert_close(&q(&h, &[0.333, 0.666]), &[2.83, 6.17], 0.1);
        assert_close(&q(&h, &[0.25, 0.5, 0.75]), &[2., 4.5, 7.], 0.1);
        assert_close(&q(&h, &[0.2, 0.4, 0.6, 0.8]), &[1.5, 3.5, 5.5, 7.5], 0.1);
        let h = build(20, &VALUES7);
        assert_close(
            &q(&h, &deciles),
            &[1.8, 3.6, 5.4, 7.2, 9., 11.05, 12.37, 17., 23.5],
            0.1,
        );
        // Outliers stay inside [min, max].
        assert_eq!(q(&h, &[0.05, 0.95]), [1., 25.]);
        assert!(ApproximateHistogram::new(5).quantile(0.5).is_nan());
    }

    /// Druid's `toBytes`/`fromBytes` round trips (testSerializeCompact, testSerializeSparse,
    /// testSerializeCompactExact, testSerializeEmpty), and its dense form.
    #[test]
    fn serialized_forms_round_trip() {
        let approx = build(5, &VALUES);
        let exact = build(50, &[1., 2., 3., 4., 5.]);
        let mut big = ApproximateHistogram::new(50);
        (0..400).for_each(|i| big.offer((i % 97) as f32 * 0.5));
        for h in [&approx, &exact, &big, &ApproximateHistogram::new(50)] {
            let bytes = h.to_bytes();
            let back = ApproximateHistogram::from_bytes(&bytes).unwrap();
            assert_eq!(&back, h, "{bytes:?}");
        }
        // Compact: a short of -size, then the values; sparse: size, -binCount, ...
        assert_eq!(exact.to_bytes()[..3], [0xff, 0xce, 5]);
        assert_eq!(big.to_bytes()[..8], [0, 0, 0, 50, 0xff, 0xff, 0xff, 0xce]);
        // Dense: size, binCount, every slot, min, max.
        let mut dense = Vec::new();
        dense.extend_from_slice(&5i32.to_be_bytes());
        dense.extend_from_slice(&2i32.to_be_bytes());
        for p in [1f32, 3., 0., 0., 0.] {
            dense.extend_from_slice(&p.to_be_bytes());
        }
        for b in [2u64, 1 | APPROX_FLAG, 0, 0, 0] {
            dense.extend_from_slice(&b.to_be_bytes());
        }
        dense.extend_from_slice(&1f32.to_be_bytes());
        dense.extend_from_slice(&3.5f32.to_be_bytes());
        let h = ApproximateHistogram::from_bytes(&dense).unwrap();
        assert_eq!(h.positions(), [1., 3.]);
        assert_eq!(h.counts(), [2, 1]);
        assert_eq!((h.count(), h.max), (3, 3.5));
        assert!(ApproximateHistogram::from_bytes(&[0, 0, 0, 5, 0, 0]).is_err());
    }

    /// Druid's `foo` table of the SQL tests (m1 1..6, dim1, cnt 1).
    fn foo() -> SessionContext {
        let ctx = ctx();
        let schema = Arc::new(Schema::new(vec![
            Field::new("dim1", DataType::Utf8, true),
            Field::new("m1", DataType::Float32, true),
            Field::new("cnt", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(vec!["", "10.1", "2", "1", "def", "abc"])),
                Arc::new(arrow::array::Float32Array::from(vec![
                    1f32, 2., 3., 4., 5., 6.,
                ])),
                Arc::new(Int64Array::from(vec![1; 6])),
            ],
        )
        .unwrap();
        ctx.register_table(
            "foo",
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
        )
        .unwrap();
        ctx
    }

    /// `QuantileSqlAggregatorTest.testQuantileOnFloatAndLongs`, with Druid's expected doubles.
    #[tokio::test]
    async fn druid_sql_results() {
        let ctx = foo();
        for (expr, want) in [
            ("APPROX_QUANTILE(m1, 0.01)", "1.0"),
            ("APPROX_QUANTILE(m1, 0.5, 50)", "3.0"),
            ("APPROX_QUANTILE(m1, 0.98, 200)", "5.880000114440918"),
            ("APPROX_QUANTILE(m1, 0.99)", "5.940000057220459"),
            ("APPROX_QUANTILE(m1 * 2, 0.97)", "11.640000343322754"),
            (
                "APPROX_QUANTILE(m1, 0.99) FILTER(WHERE dim1 = 'abc')",
                "6.0",
            ),
            (
                "APPROX_QUANTILE(m1, 0.999) FILTER(WHERE dim1 <> 'abc')",
                "4.994999885559082",
            ),
            (
                "APPROX_QUANTILE(m1, 0.999) FILTER(WHERE dim1 = 'abc')",
                "6.0",
            ),
            ("APPROX_QUANTILE(cnt, 0.5)", "1.0"),
            // Nulls are skipped: 4, 5, 6 (s = 1.5 falls half way from bin 4 to bin 5); no value
            // at all gives NaN, as Druid's empty histogram.
            ("APPROX_QUANTILE(CASE WHEN m1 > 3 THEN m1 END, 0.5)", "4.5"),
            ("APPROX_QUANTILE(m1, 0.5) FILTER(WHERE dim1 = 'x')", "NaN"),
        ] {
            let got = one(&ctx, &format!("SELECT {expr} FROM foo")).await.unwrap();
            assert_eq!(got, want, "{expr}");
        }
        // testQuantileBigger through SQL: 1..10 in 5 bins.
        let got = one(
            &ctx,
            "SELECT APPROX_QUANTILE(x, 0.5, 5) FROM generate_series(1, 10) s(x)",
        )
        .await
        .unwrap();
        let want = f64::from(build(5, &VALUES5).quantile(0.5));
        assert_eq!(got, want.to_string());
        assert!((want - 4.5).abs() <= 0.1);
    }

    /// Groups spread over several partitions: partial histograms are serialized and folded.
    #[tokio::test]
    async fn groups_merge_partial_histograms() {
        let config = SessionConfig::new().with_target_partitions(4);
        let ctx = SessionContext::new_with_config(config);
        crate::register_druid_functions(&ctx);
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, false),
            Field::new("x", DataType::Float64, true),
        ]));
        // 4 partitions of 2 batches; group g holds (i * 7) % 40 + g for i = g, g + 3, ...:
        // at most 40 distinct values per group, under the resolution of 50, so every bin stays
        // exact and any merge order gives one answer.
        let all: Vec<(i64, f64)> = (0..600)
            .map(|i| (i % 3, ((i * 7) % 40 + i % 3) as f64))
            .collect();
        let partitions: Vec<Vec<RecordBatch>> = all
            .chunks(75)
            .map(|c| {
                RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int64Array::from_iter_values(c.iter().map(|r| r.0))),
                        Arc::new(Float64Array::from_iter_values(c.iter().map(|r| r.1))),
                    ],
                )
                .unwrap()
            })
            .collect::<Vec<_>>()
            .chunks(2)
            .map(<[RecordBatch]>::to_vec)
            .collect();
        assert_eq!(partitions.len(), 4);
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(schema, partitions).unwrap()),
        )
        .unwrap();
        let df = ctx
            .sql(
                "SELECT g, APPROX_QUANTILE(x, 0.3), APPROX_QUANTILE(x, 0.9, 10) FROM t \
             GROUP BY g ORDER BY g",
            )
            .await
            .unwrap();
        // Partial aggregates per partition, then the final one over their states.
        let plan = df.clone().create_physical_plan().await.unwrap();
        let shown = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        assert!(shown.contains("mode=Partial"), "{shown}");
        let batches = df.collect().await.unwrap();
        let b = &batches[0];
        assert_eq!(b.num_rows(), 3);
        let q30 = b.column(1).as_primitive::<Float64Type>();
        let q90 = b.column(2).as_primitive::<Float64Type>();
        for g in 0..3 {
            let values: Vec<f32> = all
                .iter()
                .filter(|r| r.0 == g as i64)
                .map(|r| r.1 as f32)
                .collect();
            let exact = build(50, &values);
            assert!(exact.bins.iter().all(|b| b & APPROX_FLAG == 0));
            assert_eq!(q30.value(g), f64::from(exact.quantile(0.3)), "group {g}");
            // With 10 bins the answer depends on the merge order; it stays a quantile of the
            // group's range.
            let (lo, hi) = (exact.min as f64, exact.max as f64);
            assert!((lo..=hi).contains(&q90.value(g)), "{}", q90.value(g));
        }
    }

    /// Serialized histograms (Druid's bytes, here as a hex literal) are folded.
    #[tokio::test]
    async fn serialized_histograms_are_folded() {
        let ctx = ctx();
        let hex = |h: &ApproximateHistogram| -> String {
            h.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
        };
        let (a, b) = (build(5, &VALUES[..5]), build(5, &VALUES[5..]));
        let sql = format!(
            "SELECT APPROX_QUANTILE(h, 0.5, 5) FROM (VALUES (X'{}'), (X'{}'), (NULL)) t(h)",
            hex(&a),
            hex(&b)
        );
        let mut want = ApproximateHistogram::new(5);
        want.fold_fast(&a);
        want.fold_fast(&b);
        assert_eq!(
            one(&ctx, &sql).await.unwrap(),
            f64::from(want.quantile(0.5)).to_string()
        );
        let e = one(&ctx, "SELECT APPROX_QUANTILE(X'01', 0.5)")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad serialized histogram"), "{e}");
    }

    #[tokio::test]
    async fn bad_parameters_are_errors() {
        let ctx = foo();
        for (args, needle) in [
            (
                "m1, 1.5",
                "probability must be strictly between 0 and 1, got [1.5]",
            ),
            ("m1, 0", "probability must be strictly between 0 and 1"),
            ("m1, 1", "probability must be strictly between 0 and 1"),
            (
                "m1, 0.999999999",
                "probability must be strictly between 0 and 1",
            ),
            ("m1, cnt", "probability must be a numeric literal"),
            ("m1, 0.5, 0", "resolution must be a positive integer"),
            ("m1, 0.5, 2.5", "resolution must be an integer literal"),
            ("m1, 0.5, cnt", "resolution must be an integer literal"),
            ("dim1, 0.5", "first argument must be numeric"),
            ("m1", "takes 2 or 3 arguments"),
        ] {
            let sql = format!("SELECT APPROX_QUANTILE({args}) FROM foo");
            let e = one(&ctx, &sql).await.unwrap_err().to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }
}
