//! Apache DataSketches *classic* quantiles sketch of doubles (`DoublesSketch`), the state of
//! Druid's `quantilesDoublesSketch` aggregator (`COMPLEX<quantilesDoublesSketch>`).
//!
//! The `datasketches` crate has no classic quantiles sketch, so this is a Rust implementation
//! written from the reference sources: datasketches-java `org.apache.datasketches.quantiles`
//! (`HeapUpdateDoublesSketch`, `DoublesUpdateImpl`, `DoublesMergeImpl`, `DoublesUnionImpl`,
//! `DoublesByteArrayImpl`, `PreambleUtil`, `QuantilesDoublesSketch` sorted view,
//! `quantilescommon.IncludeMinMax`/`QuantilesUtil`) and datasketches-cpp
//! `quantiles/include/quantiles_sketch_impl.hpp`. The serialized form is byte-compatible with
//! both, so Druid, Java, C++ and Python can read what we write and we can read theirs.
//!
//! # Algorithm (Agarwal et al., "Mergeable Summaries", low-discrepancy quantiles sketch)
//!
//! * A *base buffer* of up to `2k` unsorted items of weight 1.
//! * *Levels* `0, 1, 2, ...`, each either empty or exactly `k` sorted items of weight
//!   `2^(level + 1)`. Which levels are full is the binary *bit pattern* `n / (2k)`; the base
//!   buffer holds `n % (2k)` items.
//! * When the base buffer reaches `2k` items it is sorted and *zipped* (every other item,
//!   starting at a random offset 0 or 1) into `k` items, which are carried up: while the target
//!   level is full, it is merged with the carry (`2k` sorted items) and zipped again, like a
//!   binary ripple-carry addition.
//! * Merging (union) of sketches with equal `k` streams the other base buffer and carries each
//!   of its levels in; a larger-`k` sketch is first down-sampled level by level (every
//!   `k_other / k`-th item from a random offset) into levels `lg(k_other / k)` higher.
//!
//! Normalized rank error for `k = 128` is about 1.4% single-sided / 1.7% double-sided (99%
//! confidence; `1.576 / k^0.9726`, `1.854 / k^0.9657` in `ClassicUtil.getNormalizedRankError`).
//!
//! # Serialized form (little-endian)
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0      | preamble longs: 1 when empty, else 2 |
//! | 1      | serial version, 3 |
//! | 2      | family id, 8 (`QUANTILES`) |
//! | 3      | flags: 1 big-endian (never), 2 read-only, 4 empty, 8 compact, 16 ordered |
//! | 4..6   | `k` (`u16`) |
//! | 6..8   | unused, 0 |
//! | 8..16  | `n` (`u64`), absent when empty |
//! | 16..24 | min item (`f64`) |
//! | 24..32 | max item (`f64`) |
//! | 32..   | base buffer items, then the items of each full level, lowest level first |
//!
//! *Compact* form (what we write, Java `toByteArray(true)`, flags `0x1A` = read-only | compact |
//! ordered, or `0x1E` with empty): the base buffer is written sorted with exactly `n % 2k`
//! items, and only full levels are written. The *updatable* (non-compact) form, which we read,
//! reserves `2k` slots for the base buffer and `k` slots for every level up to the highest one.
//! Serial versions 1 (five preamble longs) and 2 (always compact) are read as the Java library
//! does.

use std::cell::RefCell;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::SketchError;

/// Serial version written (`DoublesSketch.DOUBLES_SER_VER`).
const SER_VER: u8 = 3;
/// Family id of the quantiles family (`Family.QUANTILES`).
const FAMILY_ID: u8 = 8;
/// Flags (`PreambleUtil`).
const BIG_ENDIAN_FLAG: u8 = 1;
const READ_ONLY_FLAG: u8 = 2;
const EMPTY_FLAG: u8 = 4;
const COMPACT_FLAG: u8 = 8;
const ORDERED_FLAG: u8 = 16;
/// Smallest and largest `k` (`DoublesSketch.MIN_K`, `MAX_K`).
const MIN_K: u16 = 2;
const MAX_K: u16 = 1 << 15;
/// Bytes before the data in the current format: 2 preamble longs + min + max.
const DATA_START: usize = 32;
/// At or below this `n`, natural ranks are rounded to 7 decimals before ceil/floor
/// (`QuantilesUtil.tailRoundingFactor`).
const TAIL_ROUNDING_FACTOR: f64 = 1e7;

thread_local! {
    /// Source of the random zip/down-sample offsets (the Java library uses a static
    /// `java.util.Random`). Seeded from the OS-seeded thread RNG.
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::from_rng(&mut rand::rng()));
}

/// A fair coin: the random offset (0 or 1) of a zip.
fn random_offset_bit() -> usize {
    RNG.with(|r| usize::from(r.borrow_mut().random::<bool>()))
}

/// A random offset in `0..stride` for down-sampling.
fn random_offset(stride: usize) -> usize {
    RNG.with(|r| r.borrow_mut().random_range(0..stride))
}

/// Makes this thread's random offsets reproducible (tests only).
#[cfg(test)]
fn reseed(seed: u64) {
    RNG.with(|r| *r.borrow_mut() = SmallRng::seed_from_u64(seed));
}

/// `k` must be a power of two in `2..=32768` (`ClassicUtil.checkK`).
fn check_k(k: u16) -> Result<(), SketchError> {
    if (MIN_K..=MAX_K).contains(&k) && k.is_power_of_two() {
        Ok(())
    } else {
        Err(SketchError::InvalidParameter(format!(
            "quantiles sketch k must be a power of 2 in {MIN_K}..={MAX_K}, got k={k}"
        )))
    }
}

/// Every other item of the sorted `2k` buffer, starting at a random offset 0 or 1.
fn zip(buf: &[f64]) -> Vec<f64> {
    buf.iter()
        .skip(random_offset_bit())
        .step_by(2)
        .copied()
        .collect()
}

/// Merges two sorted buffers of equal length; on ties the item of `level` comes first
/// (`DoublesUpdateImpl.mergeTwoSizeKBuffers`).
fn merge_sorted(level: &[f64], carry: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(level.len() + carry.len());
    let (mut i, mut j) = (0, 0);
    while i < level.len() && j < carry.len() {
        if carry[j] < level[i] {
            out.push(carry[j]);
            j += 1;
        } else {
            out.push(level[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&level[i..]);
    out.extend_from_slice(&carry[j..]);
    out
}

/// The classic quantiles sketch of `f64` (Apache DataSketches `DoublesSketch`, Druid's
/// `quantilesDoublesSketch`).
///
/// Shape: `k` (a power of two, 2..=32768, Druid's default 128) controls accuracy and size; the
/// sketch retains `n % 2k` base-buffer items plus `k` items per full level (about
/// `k * (2 + log2(n / k))` items at most). Items are `f64` values in the caller's unit; NaN
/// inputs are ignored. See the module documentation for the algorithm and byte layout.
///
/// Equality compares `k`, `n`, min, max, the levels, and the base buffer as a multiset (its
/// order is not meaningful, and serialization sorts it).
#[derive(Debug, Clone)]
pub struct DoublesSketch {
    /// Accuracy parameter.
    k: u16,
    /// Number of (non-NaN) items presented.
    n: u64,
    /// Smallest item seen (meaningless when `n == 0`).
    min: f64,
    /// Largest item seen (meaningless when `n == 0`).
    max: f64,
    /// Unsorted base buffer, `n % 2k` items.
    base: Vec<f64>,
    /// `levels[i]` is empty or `k` sorted items of weight `2^(i + 1)`; the non-empty ones follow
    /// the bit pattern `n / 2k`, and the last entry is never empty.
    levels: Vec<Vec<f64>>,
}

impl PartialEq for DoublesSketch {
    fn eq(&self, other: &Self) -> bool {
        if self.k != other.k || self.n != other.n {
            return false;
        }
        if self.n == 0 {
            return true;
        }
        let sorted = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_unstable_by(f64::total_cmp);
            v
        };
        self.min == other.min
            && self.max == other.max
            && self.levels == other.levels
            && sorted(&self.base) == sorted(&other.base)
    }
}

impl DoublesSketch {
    /// Druid's default k.
    pub const DEFAULT_K: u16 = 128;

    /// An empty sketch with accuracy parameter `k`.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `k` unless `k` is a power of two in `2..=32768`
    /// (`ClassicUtil.checkK`).
    pub fn new(k: u16) -> Result<Self, SketchError> {
        check_k(k)?;
        Ok(Self::with_valid_k(k))
    }

    /// An empty sketch; `k` already validated.
    fn with_valid_k(k: u16) -> Self {
        Self {
            k,
            n: 0,
            min: f64::NAN,
            max: f64::NAN,
            base: Vec::new(),
            levels: Vec::new(),
        }
    }

    /// The accuracy parameter `k`.
    pub fn k(&self) -> u16 {
        self.k
    }

    /// `2k` as `usize`.
    fn two_k(&self) -> usize {
        2 * usize::from(self.k)
    }

    /// Adds one item (`HeapUpdateDoublesSketch.update`). NaN is ignored, as in DataSketches;
    /// infinities are ordinary items.
    pub fn update(&mut self, value: f64) {
        if value.is_nan() {
            return;
        }
        if self.n == 0 {
            self.min = value;
            self.max = value;
        } else {
            if value > self.max {
                self.max = value;
            }
            if value < self.min {
                self.min = value;
            }
        }
        self.base.push(value);
        self.n += 1;
        if self.base.len() == self.two_k() {
            // Sort the full base buffer, zip it into k items and carry them into level 0.
            self.base.sort_unstable_by(f64::total_cmp);
            let carry = zip(&self.base);
            self.base.clear();
            self.propagate_carry(carry, 0);
        }
    }

    /// `DoublesUpdateImpl.inPlacePropagateCarry`: puts the `k` sorted items `carry` at the
    /// lowest empty level at or above `start`, merging and zipping each full level on the way.
    fn propagate_carry(&mut self, mut carry: Vec<f64>, start: usize) {
        let mut lvl = start;
        loop {
            if lvl >= self.levels.len() {
                self.levels.resize_with(lvl + 1, Vec::new);
            }
            if self.levels[lvl].is_empty() {
                self.levels[lvl] = carry;
                return;
            }
            let level = std::mem::take(&mut self.levels[lvl]);
            carry = zip(&merge_sorted(&level, &carry));
            lvl += 1;
        }
    }

    /// Merges `other` into `self` with DataSketches union semantics (`DoublesUnionImpl
    /// .updateLogic` with `self` as the union's gadget); `other` is unchanged.
    ///
    /// * `other` empty: no-op.
    /// * `other` exact (`n < 2k_other`): its items are streamed in; `k` is unchanged.
    /// * `other` in estimation mode: the result has `min(k_self, k_other)`. With
    ///   `k_self <= k_other`, `other` is merged in (`DoublesMergeImpl.mergeInto`, down-sampling
    ///   `other` when `k_other > k_self`); otherwise `self` is first down-sampled to `k_other`
    ///   (or replaced by a copy of `other` when empty) and `other` merged into that.
    ///
    /// `k` ratios are always powers of two here, since every `k` is.
    pub fn merge(&mut self, other: &DoublesSketch) {
        if other.n == 0 {
            return;
        }
        if other.n < 2 * u64::from(other.k) {
            // Exact mode: all of other's items are in its base buffer.
            for &v in &other.base {
                self.update(v);
            }
            return;
        }
        if self.k <= other.k {
            self.merge_into(other);
        } else if self.n == 0 {
            *self = other.clone();
        } else {
            let mut target = Self::with_valid_k(other.k);
            target.merge_into(self);
            target.merge_into(other);
            *self = target;
        }
    }

    /// `DoublesMergeImpl.mergeInto` / `downSamplingMergeInto`: merges `src` (with
    /// `src.k = self.k * 2^j`) into `self`.
    fn merge_into(&mut self, src: &DoublesSketch) {
        if src.n == 0 {
            return;
        }
        let down_factor = usize::from(src.k / self.k);
        let lg_down_factor = down_factor.trailing_zeros() as usize;
        let n_final = self.n + src.n;
        for &v in &src.base {
            self.update(v);
        }
        let k = usize::from(self.k);
        for (lvl, level) in src.levels.iter().enumerate() {
            if level.is_empty() {
                continue;
            }
            let carry = if down_factor == 1 {
                level.clone()
            } else {
                // justZipWithStride: every down_factor-th item from a random offset.
                let offset = random_offset(down_factor);
                level
                    .iter()
                    .skip(offset)
                    .step_by(down_factor)
                    .take(k)
                    .copied()
                    .collect()
            };
            self.propagate_carry(carry, lvl + lg_down_factor);
        }
        self.n = n_final;
        // Both are non-empty now (src.n > 0); min/max of the union.
        if src.max > self.max || self.max.is_nan() {
            self.max = src.max;
        }
        if src.min < self.min || self.min.is_nan() {
            self.min = src.min;
        }
    }

    /// Number of (non-NaN) items presented to the sketch, including through merges.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// True when no item has been presented (`n == 0`).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Smallest item seen, `None` when empty.
    pub fn min_value(&self) -> Option<f64> {
        (self.n > 0).then_some(self.min)
    }

    /// Largest item seen, `None` when empty.
    pub fn max_value(&self) -> Option<f64> {
        (self.n > 0).then_some(self.max)
    }

    /// The sorted view (`QuantilesDoublesSketch.getSV` + `quantilescommon.DoublesSketchSortedView`):
    /// retained items sorted ascending with cumulative natural weights, then adjusted by
    /// `IncludeMinMax.includeDoublesMinMax` so that the first item is the min and the last the
    /// max. Requires `n > 0`.
    fn sorted_view(&self) -> (Vec<f64>, Vec<u64>) {
        let mut pairs: Vec<(f64, u64)> =
            Vec::with_capacity(self.base.len() + self.levels.len() * usize::from(self.k));
        for (lvl, level) in self.levels.iter().enumerate() {
            let weight = 2u64 << lvl;
            pairs.extend(level.iter().map(|&v| (v, weight)));
        }
        pairs.extend(self.base.iter().map(|&v| (v, 1)));
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut quantiles = Vec::with_capacity(pairs.len() + 2);
        let mut cum_weights = Vec::with_capacity(pairs.len() + 2);
        let mut total = 0u64;
        for (v, w) in pairs {
            total += w;
            quantiles.push(v);
            cum_weights.push(total);
        }
        // IncludeMinMax: make the min and max part of the view.
        if quantiles.first() != Some(&self.min) {
            quantiles.insert(0, self.min);
            cum_weights.insert(0, 1);
        }
        if quantiles.last() != Some(&self.max) {
            let len = cum_weights.len();
            let top = cum_weights[len - 1];
            cum_weights[len - 1] = top - 1;
            quantiles.push(self.max);
            cum_weights.push(top);
        }
        (quantiles, cum_weights)
    }

    /// The approximate item at normalized `rank`, as DataSketches `getQuantile(rank)` with the
    /// library's default `QuantileSearchCriteria.INCLUSIVE` (which Druid's
    /// `quantilesDoublesSketchToQuantile` and SQL `APPROX_QUANTILE_DS` use): the smallest
    /// retained item whose cumulative weight is `>= ceil(rank * n)` (the natural rank rounded to
    /// 7 decimals first when `n <= 1e7`), over the sorted view that includes the min and max
    /// (so `quantile(0.0)` is the min and `quantile(1.0)` the max).
    ///
    /// Returns `None` when the sketch is empty or `rank` is not in `[0, 1]` (DataSketches
    /// throws). Exact (a real item at that rank) while `n < 2k`.
    pub fn quantile(&self, rank: f64) -> Option<f64> {
        if self.n == 0 || !(0.0..=1.0).contains(&rank) {
            return None;
        }
        let (quantiles, cum_weights) = self.sorted_view();
        let n = self.n as f64;
        let mut natural_rank = rank * n;
        if n <= TAIL_ROUNDING_FACTOR {
            natural_rank = (natural_rank * TAIL_ROUNDING_FACTOR).round() / TAIL_ROUNDING_FACTOR;
        }
        let natural_rank = natural_rank.ceil();
        // InequalitySearch.GE: first cumulative weight >= natural rank.
        let index = cum_weights.partition_point(|&w| (w as f64) < natural_rank);
        Some(quantiles[index.min(quantiles.len() - 1)])
    }

    /// The approximate normalized rank of `value` in `[0, 1]`, as DataSketches
    /// `getRank(value)` with the default `INCLUSIVE` criterion: the cumulative weight of the
    /// retained items `<= value`, divided by `n`.
    ///
    /// Returns `None` when the sketch is empty or `value` is NaN.
    pub fn rank(&self, value: f64) -> Option<f64> {
        if self.n == 0 || value.is_nan() {
            return None;
        }
        let (quantiles, cum_weights) = self.sorted_view();
        // InequalitySearch.LE: last item <= value.
        let count = quantiles.partition_point(|&q| q <= value);
        Some(if count == 0 {
            0.0
        } else {
            cum_weights[count - 1] as f64 / self.n as f64
        })
    }

    /// Checks split points as DataSketches does (`QuantilesUtil.checkDoublesSplitPointsOrder`):
    /// none NaN, strictly increasing.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] otherwise.
    pub fn check_split_points(split_points: &[f64]) -> Result<(), SketchError> {
        if split_points.iter().any(|v| v.is_nan()) || split_points.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(SketchError::InvalidParameter(format!(
                "split points must be unique, monotonically increasing and not NaN, got {split_points:?}"
            )));
        }
        Ok(())
    }

    /// The approximate CDF at `split_points` (DataSketches `getCDF(splitPoints)` with the
    /// default `INCLUSIVE` criterion): `split_points.len() + 1` normalized ranks, the `i`-th the
    /// fraction of items `<= split_points[i]`, the last 1.0.
    ///
    /// Returns `None` when the sketch is empty (DataSketches throws; Druid's
    /// `quantilesDoublesSketchToCDF` returns NaNs).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] when the split points fail
    /// [`check_split_points`](Self::check_split_points).
    pub fn cdf(&self, split_points: &[f64]) -> Result<Option<Vec<f64>>, SketchError> {
        Self::check_split_points(split_points)?;
        if self.n == 0 {
            return Ok(None);
        }
        let (quantiles, cum_weights) = self.sorted_view();
        let n = self.n as f64;
        let mut out: Vec<f64> = split_points
            .iter()
            .map(|&sp| {
                let count = quantiles.partition_point(|&q| q <= sp);
                if count == 0 {
                    0.0
                } else {
                    cum_weights[count - 1] as f64 / n
                }
            })
            .collect();
        out.push(1.0);
        Ok(Some(out))
    }

    /// The approximate PMF over the bins the split points define (DataSketches
    /// `getPMF(splitPoints)`, `INCLUSIVE`): `split_points.len() + 1` fractions of the items in
    /// `(-inf, sp0]`, `(sp0, sp1]`, ..., `(sp_last, +inf)`, summing to 1.
    ///
    /// Returns `None` when the sketch is empty.
    ///
    /// # Errors
    /// As [`cdf`](Self::cdf).
    pub fn pmf(&self, split_points: &[f64]) -> Result<Option<Vec<f64>>, SketchError> {
        Ok(self.cdf(split_points)?.map(|mut buckets| {
            for i in (1..buckets.len()).rev() {
                buckets[i] -= buckets[i - 1];
            }
            buckets
        }))
    }

    /// Items in the base buffer (`n % 2k`).
    pub fn base_buffer_count(&self) -> usize {
        self.base.len()
    }

    /// Which levels are full: `n / 2k`.
    pub fn bit_pattern(&self) -> u64 {
        self.n / (2 * u64::from(self.k))
    }

    /// Items the sketch retains (base buffer plus `k` per full level).
    pub fn retained_items(&self) -> usize {
        self.base.len() + self.levels.iter().map(Vec::len).sum::<usize>()
    }

    /// The summary DataSketches-java prints for a heap update sketch (`DoublesSketch.toString()`,
    /// `DoublesUtil.toString`; Druid's `quantilesDoublesSketchToString` and SQL
    /// `DS_QUANTILE_SUMMARY`), with the library's formats: `%,d` counts, `%.3f%%` rank errors,
    /// `%12.6e` min/max. "Combined Buffer Capacity" and "Updatable Storage Bytes" are those of a
    /// `HeapUpdateDoublesSketch` that received the items one by one (its base buffer starts at 4
    /// items and doubles up to `2k`; `(2 + levels) * k` items in estimation mode).
    pub fn summary(&self) -> String {
        let k = u64::from(self.k);
        let n = self.n;
        let bb = self.base.len() as u64;
        let bit_pattern = self.bit_pattern();
        let levels = u64::from(64 - bit_pattern.leading_zeros());
        let valid = u64::from(bit_pattern.count_ones());
        let comb_cap = if n >= 2 * k {
            (2 + levels) * k
        } else {
            (2 * k).min(bb.next_power_of_two().max(4))
        };
        let retained = self.retained_items() as u64;
        let compact_bytes = if n == 0 { 8 } else { (4 + retained) * 8 };
        let updatable_bytes = if n == 0 {
            8
        } else if n <= k {
            (4 + n.next_power_of_two().max(4)) * 8
        } else {
            (4 + (2 + levels) * k) * 8
        };
        let kf = f64::from(self.k);
        let eps = 1.576 / kf.powf(0.9726);
        let eps_pmf = 1.854 / kf.powf(0.9657);
        let (min, max) = if n == 0 {
            (f64::NAN, f64::NAN)
        } else {
            (self.min, self.max)
        };
        let mut s = String::with_capacity(1024);
        s.push_str("\n### Quantiles HeapUpdateDoublesSketch SUMMARY: \n");
        let mut line = |label: &str, value: String| {
            s.push_str("   ");
            s.push_str(label);
            s.push_str(": ");
            s.push_str(&value);
            s.push('\n');
        };
        line("Empty                        ", (n == 0).to_string());
        line("Memory, Capacity bytes       ", "false, ".to_string());
        line("Estimation Mode              ", (n >= 2 * k).to_string());
        line("K                            ", grouped(k));
        line("N                            ", grouped(n));
        line(
            "Levels (Needed, Total, Valid)",
            format!("{levels}, {levels}, {valid}"),
        );
        line("Level Bit Pattern            ", format!("{bit_pattern:b}"));
        line("BaseBufferCount              ", grouped(bb));
        line("Combined Buffer Capacity     ", grouped(comb_cap));
        line("Retained Items               ", grouped(retained));
        line("Compact Storage Bytes        ", grouped(compact_bytes));
        line("Updatable Storage Bytes      ", grouped(updatable_bytes));
        line(
            "Normalized Rank Error        ",
            format!("{:.3}%", eps * 100.0),
        );
        line(
            "Normalized Rank Error (PMF)  ",
            format!("{:.3}%", eps_pmf * 100.0),
        );
        line("Min Item                     ", java_sci(min));
        line("Max Item                     ", java_sci(max));
        s.push_str("### END SKETCH SUMMARY\n");
        s
    }

    /// Serializes in the compact, ordered form (Java `toByteArray(true)`, which Druid's
    /// `DoublesSketchObjectStrategy.toBytes` uses; C++ `serialize()` differs only by not setting
    /// the read-only flag): `32 + 8 * retained` bytes, or the 8-byte preamble
    /// `[1, 3, 8, 0x1E, k_lo, k_hi, 0, 0]` when empty. See the module documentation.
    ///
    /// (Druid itself stores an empty sketch as zero bytes; [`deserialize`](Self::deserialize)
    /// accepts that too.)
    pub fn serialize(&self) -> Vec<u8> {
        let k = self.k.to_le_bytes();
        if self.n == 0 {
            return vec![
                1,
                SER_VER,
                FAMILY_ID,
                EMPTY_FLAG | READ_ONLY_FLAG | COMPACT_FLAG | ORDERED_FLAG,
                k[0],
                k[1],
                0,
                0,
            ];
        }
        let retained = self.base.len() + self.levels.iter().map(Vec::len).sum::<usize>();
        let mut out = Vec::with_capacity(DATA_START + 8 * retained);
        out.extend_from_slice(&[
            2,
            SER_VER,
            FAMILY_ID,
            READ_ONLY_FLAG | COMPACT_FLAG | ORDERED_FLAG,
            k[0],
            k[1],
            0,
            0,
        ]);
        out.extend_from_slice(&self.n.to_le_bytes());
        out.extend_from_slice(&self.min.to_le_bytes());
        out.extend_from_slice(&self.max.to_le_bytes());
        let mut base = self.base.clone();
        base.sort_unstable_by(f64::total_cmp);
        for v in base.iter().chain(self.levels.iter().flatten()) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads a serialized `DoublesSketch` from any of the DataSketches layouts: compact or
    /// updatable (non-compact), ordered or not, serial versions 1, 2 and 3, little-endian
    /// (as Java `DoublesSketch.heapify` / C++ `quantiles_sketch<double>::deserialize`).
    /// Zero bytes (Druid's stored form of an empty sketch) give an empty sketch with
    /// [`DEFAULT_K`](Self::DEFAULT_K). Trailing bytes after the data are ignored, as in Java.
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] when the input is shorter than its preamble says, the
    /// family is not 8, the serial version not 1..=3, flags unknown or big-endian, the
    /// preamble-longs/flags/version combination invalid (`checkPreLongsFlagsSerVer`), `k`
    /// invalid, `n >= 2^63`, min/max or any item NaN, or a level not sorted. Never panics.
    pub fn deserialize(bytes: &[u8]) -> Result<Self, SketchError> {
        let bad = |msg: String| SketchError::InvalidBytes(format!("quantilesDoublesSketch: {msg}"));
        if bytes.is_empty() {
            return Ok(Self::with_valid_k(Self::DEFAULT_K));
        }
        if bytes.len() < 8 {
            return Err(bad(format!("{} bytes, need at least 8", bytes.len())));
        }
        let pre_longs = bytes[0];
        let ser_ver = bytes[1];
        let family = bytes[2];
        let flags = bytes[3];
        let k = u16::from_le_bytes([bytes[4], bytes[5]]);
        if !(1..=SER_VER).contains(&ser_ver) {
            return Err(bad(format!("unsupported serial version {ser_ver}")));
        }
        if flags & !(READ_ONLY_FLAG | EMPTY_FLAG | COMPACT_FLAG | ORDERED_FLAG) != 0 {
            return Err(bad(format!(
                "invalid flags {flags:#04x} (big-endian bit {BIG_ENDIAN_FLAG} not supported)"
            )));
        }
        let empty = flags & EMPTY_FLAG != 0;
        let compact_flag = flags & COMPACT_FLAG != 0;
        // HeapUpdateDoublesSketch.checkPreLongsFlagsSerVer: the valid combinations.
        let sw = u32::from(compact_flag)
            + 2 * u32::from(empty)
            + 4 * u32::from(ser_ver & 0xf)
            + 32 * u32::from(pre_longs & 0x3f);
        if ![38, 164, 42, 72, 47, 46, 79, 78, 77, 76].contains(&sw) {
            return Err(bad(format!(
                "inconsistent preamble: preLongs={pre_longs}, empty={empty}, serVer={ser_ver}, compact={compact_flag}"
            )));
        }
        if family != FAMILY_ID {
            return Err(bad(format!("family id {family}, expected {FAMILY_ID}")));
        }
        check_k(k).map_err(|_| bad(format!("invalid k={k}")))?;
        if empty {
            return Ok(Self::with_valid_k(k));
        }
        if bytes.len() < 16 {
            return Err(bad(format!(
                "{} bytes, need at least 16 for n",
                bytes.len()
            )));
        }
        let n = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default());
        if n > i64::MAX as u64 {
            return Err(bad(format!("n={n} out of range")));
        }
        if n == 0 {
            return Ok(Self::with_valid_k(k));
        }
        let compact = ser_ver == 2 || compact_flag;
        let k_us = usize::from(k);
        let two_k = 2 * u64::from(k);
        let bb_count = (n % two_k) as usize;
        let bit_pattern = n / two_k;
        let num_levels = (64 - bit_pattern.leading_zeros()) as usize;
        let pre_bytes = if ser_ver == 1 { 40 } else { DATA_START };
        // Items the layout must hold (checkHeapMemCapacity); at most (2 + 63) * 32768.
        let items = if compact {
            bb_count + k_us * bit_pattern.count_ones() as usize
        } else if num_levels == 0 {
            bb_count
        } else {
            (2 + num_levels) * k_us
        };
        let required = pre_bytes + 8 * items;
        if bytes.len() < required {
            return Err(bad(format!(
                "{} bytes, need {required} for k={k}, n={n}",
                bytes.len()
            )));
        }
        let read_f64 = |offset: usize| {
            f64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap_or_default())
        };
        let read_items = |offset: usize, count: usize| -> Vec<f64> {
            (0..count).map(|i| read_f64(offset + 8 * i)).collect()
        };

        let min = read_f64(16);
        let max = read_f64(24);
        if min.is_nan() || max.is_nan() || min > max {
            return Err(bad(format!("invalid min/max {min}/{max}")));
        }
        let base = read_items(pre_bytes, bb_count);
        let mut levels = Vec::with_capacity(num_levels);
        let mut offset = pre_bytes + 8 * bb_count;
        for lvl in 0..num_levels {
            if !compact {
                offset = pre_bytes + 8 * (2 * k_us + lvl * k_us);
            }
            if bit_pattern >> lvl & 1 == 1 {
                let level = read_items(offset, k_us);
                if !level.is_sorted_by(|a, b| a <= b) {
                    return Err(bad(format!("level {lvl} is not sorted")));
                }
                levels.push(level);
                offset += 8 * k_us;
            } else {
                levels.push(Vec::new());
            }
        }
        if base
            .iter()
            .chain(levels.iter().flatten())
            .any(|v| v.is_nan())
        {
            return Err(bad("NaN item".to_string()));
        }
        Ok(Self {
            k,
            n,
            min,
            max,
            base,
            levels,
        })
    }
}

/// Java's `String.format("%,d", v)` (US grouping).
fn grouped(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Java's `String.format("%12.6e", v)`: six fraction digits, a signed exponent of at least two
/// digits, right-aligned in 12 characters (`1.000000e+00`, `         NaN`).
fn java_sci(v: f64) -> String {
    let body = if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        let s = format!("{v:.6e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => {
                let e: i32 = exp.parse().unwrap_or(0);
                let sign = if e < 0 { '-' } else { '+' };
                format!("{mantissa}e{sign}{:02}", e.abs())
            }
            None => s,
        }
    };
    format!("{body:>12}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("test vector is base64")
    }

    /// Deterministic shuffled stream of `0..n` as f64 (an LCG permutation-ish sequence).
    fn stream(n: u64, seed: u64) -> Vec<f64> {
        let mut v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut rng = SmallRng::seed_from_u64(seed);
        for i in (1..v.len()).rev() {
            let j = rng.random_range(0..=i);
            v.swap(i, j);
        }
        v
    }

    /// Max |true rank - requested rank| over ranks 0.01..0.99 for a stream of `0..n`.
    fn max_rank_error(sk: &DoublesSketch, n: u64) -> f64 {
        (1..100)
            .map(|i| {
                let r = f64::from(i) / 100.0;
                let q = sk.quantile(r).unwrap();
                // Items are 0..n, so the true (inclusive) rank of q is (q + 1) / n.
                ((q + 1.0) / n as f64 - r).abs()
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn new_validates_k() {
        for k in [2u16, 4, 128, 256, 32768] {
            assert_eq!(DoublesSketch::new(k).unwrap().k(), k);
        }
        for k in [0u16, 1, 3, 100, 129, 65535] {
            match DoublesSketch::new(k) {
                Err(SketchError::InvalidParameter(msg)) => assert!(msg.contains(&format!("k={k}"))),
                other => panic!("k={k}: {other:?}"),
            }
        }
    }

    #[test]
    fn empty_sketch() {
        let sk = DoublesSketch::new(DoublesSketch::DEFAULT_K).unwrap();
        assert!(sk.is_empty());
        assert_eq!(sk.n(), 0);
        assert_eq!(sk.min_value(), None);
        assert_eq!(sk.max_value(), None);
        assert_eq!(sk.quantile(0.5), None);
        assert_eq!(sk.rank(1.0), None);
        // preLongs 1, serVer 3, family 8, flags empty|compact|ordered|read-only, k = 128 LE.
        assert_eq!(sk.serialize(), vec![1, 3, 8, 0x1E, 128, 0, 0, 0]);
        assert_eq!(DoublesSketch::deserialize(&sk.serialize()).unwrap(), sk);
        assert_eq!(DoublesSketch::deserialize(&[]).unwrap(), sk);
    }

    #[test]
    fn nan_is_ignored() {
        let mut sk = DoublesSketch::new(16).unwrap();
        sk.update(f64::NAN);
        assert!(sk.is_empty());
        sk.update(2.0);
        sk.update(f64::NAN);
        assert_eq!(sk.n(), 1);
        assert_eq!(sk.quantile(0.5), Some(2.0));
    }

    #[test]
    fn exact_when_n_at_most_2k() {
        let k = 128u16;
        for n in [1u64, 2, 3, 10, 100, 255] {
            let mut sk = DoublesSketch::new(k).unwrap();
            let values = stream(n, n);
            for &v in &values {
                sk.update(v);
            }
            assert_eq!(sk.n(), n);
            assert_eq!(sk.min_value(), Some(0.0));
            assert_eq!(sk.max_value(), Some((n - 1) as f64));
            // Exact inclusive quantile: the item of natural rank ceil(r * n) (1-based).
            for i in 0..=100 {
                let r = f64::from(i) / 100.0;
                let natural = ((r * n as f64 * 1e7).round() / 1e7).ceil().max(1.0);
                assert_eq!(sk.quantile(r), Some(natural - 1.0), "n={n} r={r}");
            }
            for v in 0..n {
                assert_eq!(sk.rank(v as f64), Some((v + 1) as f64 / n as f64));
            }
            assert_eq!(sk.rank(-1.0), Some(0.0));
            assert_eq!(sk.quantile(1.5), None);
            assert_eq!(sk.quantile(f64::NAN), None);
        }
        // n == 2k: the first propagation happened; still exact at the ends (min/max).
        let mut sk = DoublesSketch::new(k).unwrap();
        for v in stream(256, 7) {
            sk.update(v);
        }
        assert_eq!(sk.quantile(0.0), Some(0.0));
        assert_eq!(sk.quantile(1.0), Some(255.0));
    }

    #[test]
    fn accuracy_one_million_values() {
        reseed(1);
        let n = 1_000_000u64;
        let mut sk = DoublesSketch::new(DoublesSketch::DEFAULT_K).unwrap();
        for v in stream(n, 42) {
            sk.update(v);
        }
        assert_eq!(sk.n(), n);
        assert_eq!(sk.min_value(), Some(0.0));
        assert_eq!(sk.max_value(), Some((n - 1) as f64));
        assert_eq!(sk.quantile(0.0), Some(0.0));
        assert_eq!(sk.quantile(1.0), Some((n - 1) as f64));
        // Documented double-sided bound for k = 128: 1.854 / 128^0.9657 ~ 1.725%.
        let eps = 1.854 / 128f64.powf(0.9657);
        let err = max_rank_error(&sk, n);
        assert!(err <= eps, "max rank error {err} > {eps}");
        for i in 1..100 {
            let v = f64::from(i) * 10_000.0;
            let r = sk.rank(v).unwrap();
            assert!((r - (v + 1.0) / n as f64).abs() <= eps, "rank({v}) = {r}");
        }
        // Retained items: n % 2k in the base buffer plus k per full level.
        let bits = n / 256;
        let bytes = sk.serialize();
        assert_eq!(
            bytes.len(),
            32 + 8 * ((n % 256) as usize + 128 * bits.count_ones() as usize)
        );
    }

    #[test]
    fn merge_equals_single_sketch_within_error() {
        reseed(2);
        let n = 400_000u64;
        let values = stream(n, 9);
        let mut whole = DoublesSketch::new(128).unwrap();
        let mut parts: Vec<DoublesSketch> =
            (0..7).map(|_| DoublesSketch::new(128).unwrap()).collect();
        for (i, &v) in values.iter().enumerate() {
            whole.update(v);
            parts[i % 7].update(v);
        }
        let mut merged = DoublesSketch::new(128).unwrap();
        for p in &parts {
            merged.merge(p);
        }
        assert_eq!(merged.n(), n);
        assert_eq!(merged.k(), 128);
        assert_eq!(merged.min_value(), Some(0.0));
        assert_eq!(merged.max_value(), Some((n - 1) as f64));
        let eps = 1.854 / 128f64.powf(0.9657);
        assert!(max_rank_error(&merged, n) <= eps);
        assert!(max_rank_error(&whole, n) <= eps);
        for i in 1..20 {
            let r = f64::from(i) / 20.0;
            let diff = (merged.quantile(r).unwrap() - whole.quantile(r).unwrap()).abs() / n as f64;
            assert!(diff <= 2.0 * eps, "r={r} diff={diff}");
        }
    }

    #[test]
    fn merge_exact_into_estimation_and_back() {
        reseed(3);
        let mut big = DoublesSketch::new(64).unwrap();
        for v in stream(10_000, 1) {
            big.update(v);
        }
        let mut small = DoublesSketch::new(64).unwrap();
        for v in [10_000.0, 10_001.0, 10_002.0] {
            small.update(v);
        }
        let mut a = big.clone();
        a.merge(&small);
        assert_eq!(a.n(), 10_003);
        assert_eq!(a.max_value(), Some(10_002.0));
        let mut b = small.clone();
        b.merge(&big);
        assert_eq!(b.n(), 10_003);
        assert_eq!(b.max_value(), Some(10_002.0));
        assert_eq!(b.min_value(), Some(0.0));
        // Merging an empty sketch is a no-op.
        let before = a.clone();
        a.merge(&DoublesSketch::new(8).unwrap());
        assert_eq!(a, before);
    }

    #[test]
    fn merge_different_k_downsamples_to_smaller_k() {
        reseed(4);
        let n = 200_000u64;
        let values = stream(n, 5);
        let mut k256 = DoublesSketch::new(256).unwrap();
        let mut k64 = DoublesSketch::new(64).unwrap();
        for (i, &v) in values.iter().enumerate() {
            if i % 2 == 0 {
                k256.update(v)
            } else {
                k64.update(v)
            }
        }
        let eps64 = 1.854 / 64f64.powf(0.9657);
        // Larger k merged into smaller k.
        let mut a = k64.clone();
        a.merge(&k256);
        assert_eq!((a.k(), a.n()), (64, n));
        assert!(max_rank_error(&a, n) <= eps64);
        // Smaller k merged into larger k: the result takes the smaller k.
        let mut b = k256.clone();
        b.merge(&k64);
        assert_eq!((b.k(), b.n()), (64, n));
        assert!(max_rank_error(&b, n) <= eps64);
        assert_eq!(b.min_value(), Some(0.0));
        assert_eq!(b.max_value(), Some((n - 1) as f64));
        // Into an empty larger-k sketch: a copy of the other.
        let mut c = DoublesSketch::new(1024).unwrap();
        c.merge(&k64);
        assert_eq!(c, k64);
        // An exact (n < 2k) other is streamed in and keeps our k.
        let mut d = DoublesSketch::new(256).unwrap();
        let mut tiny = DoublesSketch::new(2).unwrap();
        tiny.update(1.0);
        d.merge(&tiny);
        assert_eq!((d.k(), d.n()), (256, 1));
        // Serialization is consistent after merges (bit pattern matches n).
        let back = DoublesSketch::deserialize(&b.serialize()).unwrap();
        assert_eq!(back, b);
    }

    #[test]
    fn serialize_round_trip() {
        reseed(5);
        for (k, n) in [
            (2u16, 1000u64),
            (16, 33),
            (128, 5),
            (128, 256),
            (128, 257),
            (128, 100_000),
            (1024, 70_000),
        ] {
            let mut sk = DoublesSketch::new(k).unwrap();
            for v in stream(n, n) {
                sk.update(v * 0.5 - 17.0);
            }
            let bytes = sk.serialize();
            let back = DoublesSketch::deserialize(&bytes).unwrap();
            assert_eq!(back, sk, "k={k} n={n}");
            assert_eq!(back.serialize(), bytes);
            assert_eq!(back.quantile(0.5), sk.quantile(0.5));
        }
    }

    /// Golden, hand-computed from the layout: k = 128, items 1.0..=5.0 (inserted out of order).
    #[test]
    fn golden_bytes_k128_one_to_five() {
        let mut sk = DoublesSketch::new(128).unwrap();
        for v in [3.0, 1.0, 5.0, 2.0, 4.0] {
            sk.update(v);
        }
        let expected: Vec<u8> = [
            // byte 0: preamble longs = 2 (not empty); 1: serial version 3; 2: family 8;
            // 3: flags 0x1A = read-only (2) | compact (8) | ordered (16); 4..6: k = 128 LE;
            // 6..8: unused.
            &[0x02, 0x03, 0x08, 0x1A, 0x80, 0x00, 0x00, 0x00][..],
            // 8..16: n = 5 (u64 LE).
            &[5, 0, 0, 0, 0, 0, 0, 0],
            // 16..24: min = 1.0 = 0x3FF0000000000000 (f64 LE).
            &[0, 0, 0, 0, 0, 0, 0xF0, 0x3F],
            // 24..32: max = 5.0 = 0x4014000000000000.
            &[0, 0, 0, 0, 0, 0, 0x14, 0x40],
            // 32..72: base buffer, n % 2k = 5 items, sorted: 1.0, 2.0, 3.0, 4.0, 5.0.
            &[0, 0, 0, 0, 0, 0, 0xF0, 0x3F],
            &[0, 0, 0, 0, 0, 0, 0x00, 0x40],
            &[0, 0, 0, 0, 0, 0, 0x08, 0x40],
            &[0, 0, 0, 0, 0, 0, 0x10, 0x40],
            &[0, 0, 0, 0, 0, 0, 0x14, 0x40],
            // No levels: n / 2k = 0.
        ]
        .concat();
        assert_eq!(sk.serialize(), expected);
        assert_eq!(DoublesSketch::deserialize(&expected).unwrap(), sk);
    }

    /// Cross-implementation golden: bytes written by DataSketches Java
    /// (`UpdateDoublesSketch` k = 128, `update(42.5); update(1); update(24.0);
    /// compact().toByteArray()`), published base64 in OpenTSDB/opentsdb-datasketches README.md.
    #[test]
    fn golden_java_compact_bytes_from_opentsdb() {
        let java = base64_decode(
            "AgMIGoAAAAADAAAAAAAAAAAAAAAAAPA/AAAAAABARUAAAAAAAADwPwAAAAAAADhAAAAAAABARUA=",
        );
        let mut sk = DoublesSketch::new(128).unwrap();
        sk.update(42.5);
        sk.update(1.0);
        sk.update(24.0);
        assert_eq!(sk.serialize(), java);
        let read = DoublesSketch::deserialize(&java).unwrap();
        assert_eq!(read, sk);
        assert_eq!(read.n(), 3);
        assert_eq!(
            (read.min_value(), read.max_value()),
            (Some(1.0), Some(42.5))
        );
        // OpenTSDB's test expects the 95th percentile to be 42.5.
        assert_eq!(read.quantile(0.95), Some(42.5));
    }

    /// Cross-implementation golden: the first sketch of Druid's
    /// `extensions-core/datasketches/src/test/resources/quantiles/doubles_sketch_data.tsv`
    /// (apache/druid), written by DataSketches Java in the *updatable* form: flags 0x10 (ordered,
    /// not compact), k = 128, n = 20, 2k = 256 base-buffer slots (2080 bytes). Only the first 256
    /// base64 characters (192 bytes) are non-zero; the rest of the line is zero bytes.
    #[test]
    fn golden_druid_updatable_form() {
        let prefix = base64_decode(concat!(
            "AgMIEIAAAAAUAAAAAAAAALAmWsjfb7A/pV7y+yiq7T+wJlrI32+wPwDcwrvurLY/+Ie4E36zvj+Q6JXEs4zNPy76",
            "4HN4PNA/kLgyi1uh2D9OQGR8FnbfP1J6Rjgkvd8/F3Pzw8LO4T/jOtta7+DjPwwhdIAtbeQ/Ns2gDuPk5D/DJ4ic",
            "0i3lPzgUyxYhBOY/rZQ/Lqqb6D+RgJ4vWNHoP0DJ25fCQek/FY7FMO3h6T/5JWCQ1h/qP6Ve8vsoqu0/",
        ));
        assert_eq!(prefix.len(), 192);
        let mut bytes = prefix.clone();
        bytes.resize(32 + 8 * 256, 0);
        let sk = DoublesSketch::deserialize(&bytes).unwrap();
        assert_eq!((sk.k(), sk.n()), (128, 20));
        assert_eq!(sk.min_value(), Some(0.06420706406984311));
        assert_eq!(sk.max_value(), Some(0.9270214958987323));
        assert_eq!(sk.quantile(0.0), Some(0.06420706406984311));
        assert_eq!(sk.quantile(0.5), Some(0.6212078833139824)); // 10th of 20 sorted items
        assert_eq!(sk.quantile(1.0), Some(0.9270214958987323));
        assert_eq!(sk.rank(0.5), Some(0.4));
        // Re-serialized compact: same preamble/n/min/max, flags 0x1A, the 20 items.
        let compact = sk.serialize();
        assert_eq!(compact.len(), 32 + 8 * 20);
        assert_eq!(&compact[..3], &[2, 3, 8]);
        assert_eq!(compact[3], 0x1A);
        assert_eq!(&compact[4..], &prefix[4..]);
        // Java also accepts the truncated updatable form while n < 2k (only n items needed).
        assert_eq!(DoublesSketch::deserialize(&prefix).unwrap(), sk);
    }

    #[test]
    fn reads_updatable_form_with_levels() {
        reseed(6);
        let k = 16u16;
        let mut sk = DoublesSketch::new(k).unwrap();
        for v in stream(1000, 3) {
            sk.update(v);
        }
        // Build the Java updatable (non-compact) image: 2k base slots, k slots per level up to
        // the highest, unordered base buffer, flags 0 (serVer 3, preLongs 2).
        let k_us = usize::from(k);
        let mut img = vec![2, 3, 8, 0, 16, 0, 0, 0];
        img.extend_from_slice(&sk.n.to_le_bytes());
        img.extend_from_slice(&sk.min.to_le_bytes());
        img.extend_from_slice(&sk.max.to_le_bytes());
        let mut slots = vec![0.0f64; 2 * k_us + sk.levels.len() * k_us];
        slots[..sk.base.len()].copy_from_slice(&sk.base);
        for (i, level) in sk.levels.iter().enumerate() {
            slots[2 * k_us + i * k_us..][..level.len()].copy_from_slice(level);
        }
        for v in slots {
            img.extend_from_slice(&v.to_le_bytes());
        }
        let back = DoublesSketch::deserialize(&img).unwrap();
        assert_eq!(back, sk);
        // Truncating any level slot is rejected.
        assert!(DoublesSketch::deserialize(&img[..img.len() - 8]).is_err());
    }

    #[test]
    fn hostile_bytes_are_rejected_without_panic() {
        let mut sk = DoublesSketch::new(32).unwrap();
        for v in stream(5000, 11) {
            sk.update(v);
        }
        let good = sk.serialize();
        // Every truncation of a valid image is an error.
        for len in 1..good.len() {
            assert!(
                DoublesSketch::deserialize(&good[..len]).is_err(),
                "len={len}"
            );
        }
        let corrupt = |i: usize, b: u8| {
            let mut v = good.clone();
            v[i] = b;
            DoublesSketch::deserialize(&v)
        };
        assert!(corrupt(2, 7).is_err()); // family
        assert!(corrupt(1, 4).is_err()); // serial version
        assert!(corrupt(1, 0).is_err());
        assert!(corrupt(3, 0x1B).is_err()); // big-endian flag
        assert!(corrupt(0, 3).is_err()); // preamble longs
        assert!(corrupt(4, 33).is_err()); // k not a power of two
        assert!(corrupt(15, 0x80).is_err()); // n >= 2^63
        assert!(corrupt(14, 0x01).is_err()); // n much larger than the data
        let mut v = good.clone();
        v[16..24].copy_from_slice(&f64::NAN.to_le_bytes()); // min = NaN
        assert!(DoublesSketch::deserialize(&v).is_err());
        let mut v = good.clone();
        v[24..32].copy_from_slice(&(-1.0f64).to_le_bytes()); // max < min
        assert!(DoublesSketch::deserialize(&v).is_err());
        // An unsorted level.
        let level0 = 32 + 8 * (5000 % 64);
        let mut v = good.clone();
        v[level0..level0 + 8].copy_from_slice(&1e300f64.to_le_bytes());
        assert!(DoublesSketch::deserialize(&v).is_err());
        // Random garbage: never panics; anything accepted is usable.
        let mut rng = SmallRng::seed_from_u64(99);
        for len in 0..600 {
            for _ in 0..4 {
                let mut bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                if len >= 8 && rng.random::<bool>() {
                    // Plausible preamble to reach the deeper checks.
                    bytes[..4].copy_from_slice(&[2, 3, 8, 0x1A]);
                    bytes[4..6].copy_from_slice(&4u16.to_le_bytes());
                    if len >= 16 {
                        bytes[8..16].copy_from_slice(&(rng.random_range(0..64u64)).to_le_bytes());
                    }
                }
                if let Ok(mut s) = DoublesSketch::deserialize(&bytes) {
                    let _ = s.quantile(0.5);
                    let _ = s.rank(0.0);
                    let other = s.clone();
                    s.merge(&other);
                    s.update(1.0);
                    let _ = s.serialize();
                }
            }
        }
    }

    #[test]
    fn cdf_pmf_and_summary_match_druid() {
        // Druid's DoublesSketchSqlAggregatorTest.testDoublesSketchPostAggs: six rows of cnt = 1.
        let mut sk = DoublesSketch::new(128).unwrap();
        for _ in 0..6 {
            sk.update(1.0);
        }
        assert_eq!(sk.cdf(&[0.2, 0.6]).unwrap(), Some(vec![0.0, 0.0, 1.0]));
        assert_eq!(sk.pmf(&[0.2, 0.6]).unwrap(), Some(vec![0.0, 0.0, 1.0]));
        assert_eq!(sk.rank(3.0), Some(1.0));
        let want = concat!(
            "\n### Quantiles HeapUpdateDoublesSketch SUMMARY: \n",
            "   Empty                        : false\n",
            "   Memory, Capacity bytes       : false, \n",
            "   Estimation Mode              : false\n",
            "   K                            : 128\n",
            "   N                            : 6\n",
            "   Levels (Needed, Total, Valid): 0, 0, 0\n",
            "   Level Bit Pattern            : 0\n",
            "   BaseBufferCount              : 6\n",
            "   Combined Buffer Capacity     : 8\n",
            "   Retained Items               : 6\n",
            "   Compact Storage Bytes        : 80\n",
            "   Updatable Storage Bytes      : 96\n",
            "   Normalized Rank Error        : 1.406%\n",
            "   Normalized Rank Error (PMF)  : 1.711%\n",
            "   Min Item                     : 1.000000e+00\n",
            "   Max Item                     : 1.000000e+00\n",
            "### END SKETCH SUMMARY\n",
        );
        assert_eq!(sk.summary(), want);
        // Split points: 0..=100 step 10 over 0..1000 counts each decile.
        let mut big = DoublesSketch::new(128).unwrap();
        for v in stream(1000, 7) {
            big.update(v);
        }
        let pmf = big.pmf(&[249.5, 499.5, 749.5]).unwrap().unwrap();
        assert_eq!(pmf.len(), 4);
        assert!((pmf.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        for p in &pmf {
            assert!((p - 0.25).abs() < 0.03, "{pmf:?}");
        }
        let summary = big.summary();
        assert!(
            summary.contains("   N                            : 1,000\n"),
            "{summary}"
        );
        assert!(
            summary.contains("Estimation Mode              : true"),
            "{summary}"
        );
        assert!(
            summary.contains("Min Item                     : 0.000000e+00"),
            "{summary}"
        );
        assert!(
            summary.contains("Max Item                     : 9.990000e+02"),
            "{summary}"
        );
        // The counts of Druid's documented DS_QUANTILE_SUMMARY example (k 128, N 566,138; the
        // example's sketch is a compact one, whose buffer capacity is its retained items).
        let mut doc = DoublesSketch::new(128).unwrap();
        for i in 0..566_138u32 {
            doc.update(f64::from(i % 4962));
        }
        let summary = doc.summary();
        for line in [
            "   N                            : 566,138\n",
            "   Levels (Needed, Total, Valid): 12, 12, 5\n",
            "   Level Bit Pattern            : 100010100011\n",
            "   BaseBufferCount              : 122\n",
            "   Combined Buffer Capacity     : 1,792\n",
            "   Retained Items               : 762\n",
            "   Compact Storage Bytes        : 6,128\n",
            "   Updatable Storage Bytes      : 14,368\n",
        ] {
            assert!(summary.contains(line), "{line}{summary}");
        }
        assert!(big.cdf(&[1.0, 1.0]).is_err());
        assert!(big.cdf(&[f64::NAN]).is_err());
        let empty = DoublesSketch::new(128).unwrap();
        assert_eq!(empty.cdf(&[1.0]).unwrap(), None);
        assert!(
            empty
                .summary()
                .contains("Min Item                     :          NaN\n")
        );
        assert_eq!(java_sci(-1.5e-7), "-1.500000e-07");
        assert_eq!(java_sci(f64::INFINITY), "    Infinity");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
