//! HLL and theta accumulators on the `datasketches` crate (Apache DataSketches' Rust port).
//!
//! Hashing follows Druid's ingestion-time aggregators so that sketches built by Dolmen merge
//! with sketches built by Druid or DataSketches from the same values:
//! - `HLLSketchBuild` (`HllSketchBuildUtil.updateSketch`): a long hashes as its 8 little-endian
//!   bytes, a double as the bits of its value with -0.0 folded into 0.0 (Java's
//!   `HllSketch.update(double)`), a string as its UTF-16LE code units (`stringEncoding` `utf16le`,
//!   Druid's default) or its UTF-8 bytes (`utf8`); empty strings and nulls are skipped.
//! - `thetaSketch` (`SketchAggregator.updateUnion`): a string hashes as its UTF-8 bytes (Java's
//!   `UpdateSketch.update(String)`); numbers as the UTF-8 bytes of their decimal text; empty
//!   strings and nulls are skipped. [`ThetaAcc::update_i64`] and [`ThetaAcc::update_f64`] hash
//!   a long as its 8 little-endian bytes and a double as its canonical bits (Java's
//!   `update(long)`/`update(double)`, what `SketchAggregator.updateUnion` does with `Long` and
//!   `Double` values, e.g. SQL `DS_THETA` over a numeric column).
//!
//! Both use MurmurHash3 x64-128 with DataSketches' default seed 9001 (the crate's default).

use datasketches::common::NumStdDev;
use datasketches::hash::value::raw_bytes;
use datasketches::hll::{HllSketch, HllType, HllUnion};
use datasketches::theta::{
    CompactThetaSketch, ThetaANotB, ThetaIntersection, ThetaSketch, ThetaSketchBuilder, ThetaUnion,
    ThetaUnionBuilder,
};

use crate::SketchError;

/// Druid's `tgtHllType`: register width of the stored HLL sketch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HllTargetType {
    /// `HLL_4` (Druid's default): 4-bit registers, smallest.
    #[default]
    Hll4,
    /// `HLL_6`.
    Hll6,
    /// `HLL_8`.
    Hll8,
}

impl HllTargetType {
    /// Parses Druid's name (`HLL_4`, `HLL_6`, `HLL_8`).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `tgtHllType` for any other name.
    pub fn from_name(name: &str) -> Result<Self, SketchError> {
        match name {
            "HLL_4" => Ok(HllTargetType::Hll4),
            "HLL_6" => Ok(HllTargetType::Hll6),
            "HLL_8" => Ok(HllTargetType::Hll8),
            other => Err(SketchError::InvalidParameter(format!(
                "tgtHllType must be HLL_4, HLL_6 or HLL_8, got [{other}]"
            ))),
        }
    }

    /// Druid's name: `HLL_4`, `HLL_6` or `HLL_8`.
    pub fn name(self) -> &'static str {
        match self {
            HllTargetType::Hll4 => "HLL_4",
            HllTargetType::Hll6 => "HLL_6",
            HllTargetType::Hll8 => "HLL_8",
        }
    }

    fn to_ds(self) -> HllType {
        match self {
            HllTargetType::Hll4 => HllType::Hll4,
            HllTargetType::Hll6 => HllType::Hll6,
            HllTargetType::Hll8 => HllType::Hll8,
        }
    }
}

/// Druid's `stringEncoding` of `HLLSketchBuild`: which bytes of a string are hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HllStringEncoding {
    /// `utf16le` (Druid's default): the string's UTF-16 code units, little-endian.
    #[default]
    Utf16Le,
    /// `utf8`: the string's UTF-8 bytes.
    Utf8,
}

impl HllStringEncoding {
    /// Parses Druid's name (`utf16le`, `utf8`, any case).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `stringEncoding` for any other name.
    pub fn from_name(name: &str) -> Result<Self, SketchError> {
        match name.to_ascii_lowercase().as_str() {
            "utf16le" => Ok(HllStringEncoding::Utf16Le),
            "utf8" => Ok(HllStringEncoding::Utf8),
            _ => Err(SketchError::InvalidParameter(format!(
                "stringEncoding must be utf16le or utf8, got [{name}]"
            ))),
        }
    }
}

/// Smallest and largest `lgK` of an HLL sketch (DataSketches' bounds).
pub const HLL_LG_K_RANGE: std::ops::RangeInclusive<u8> = 4..=21;

/// The accumulator of `HLLSketchBuild`/`HLLSketchMerge`: an HLL union of everything seen, stored
/// as a DataSketches HLL sketch of the target type.
#[derive(Debug, Clone)]
pub struct HllAcc {
    union: HllUnion,
    target: HllTargetType,
}

impl HllAcc {
    /// An empty accumulator with `lg_k` (4..=21; Druid's default 12) and target type.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `lgK` when out of range.
    pub fn new(lg_k: u8, target: HllTargetType) -> Result<Self, SketchError> {
        if !HLL_LG_K_RANGE.contains(&lg_k) {
            return Err(SketchError::InvalidParameter(format!(
                "lgK must be between 4 and 21, got [{lg_k}]"
            )));
        }
        let union =
            HllUnion::new(lg_k).map_err(|e| SketchError::InvalidParameter(e.to_string()))?;
        Ok(HllAcc { union, target })
    }

    /// Adds a string (skipped when empty), hashed per `encoding`.
    pub fn update_str(&mut self, value: &str, encoding: HllStringEncoding) {
        if value.is_empty() {
            return;
        }
        match encoding {
            HllStringEncoding::Utf8 => self.union.update_value(raw_bytes::from_str(value)),
            HllStringEncoding::Utf16Le => {
                let bytes: Vec<u8> = value.encode_utf16().flat_map(u16::to_le_bytes).collect();
                self.union.update_value(raw_bytes::from_vec(bytes));
            }
        }
    }

    /// Adds a long (its 8 little-endian bytes, as Java's `HllSketch.update(long)`).
    pub fn update_i64(&mut self, value: i64) {
        self.union
            .update_value(raw_bytes::from_slice(&value.to_le_bytes()));
    }

    /// Adds a double (the little-endian bits of the value, -0.0 as 0.0, as Java's
    /// `HllSketch.update(double)`).
    pub fn update_f64(&mut self, value: f64) {
        self.union
            .update_value(raw_bytes::from_slice(&canonical_bits(value).to_le_bytes()));
    }

    /// Merges another accumulator into this one.
    pub fn merge(&mut self, other: &HllAcc) {
        self.union.update(&other.union.to_sketch(HllType::Hll8));
    }

    /// Merges a serialized DataSketches HLL sketch (any type and lgK).
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] when `bytes` is not an HLL sketch.
    pub fn merge_bytes(&mut self, bytes: &[u8]) -> Result<(), SketchError> {
        let sketch =
            HllSketch::deserialize(bytes).map_err(|e| SketchError::InvalidBytes(e.to_string()))?;
        self.union.update(&sketch);
        Ok(())
    }

    /// The distinct-count estimate.
    pub fn estimate(&self) -> f64 {
        self.union.estimate()
    }

    /// The distinct-count estimate of the result sketch ([`to_bytes`](Self::to_bytes) read back
    /// gives the same value), which can differ from [`estimate`](Self::estimate) (the union's own
    /// estimate) in the last digits once the sketch is in HLL mode.
    pub fn sketch_estimate(&self) -> f64 {
        self.union.to_sketch(self.target.to_ds()).estimate()
    }

    /// Approximate heap bytes held by the union; cheap, for memory accounting.
    pub fn memory_size(&self) -> usize {
        self.union.estimated_size()
    }

    /// `lgK` of the result sketch (the smallest `lgK` merged in, at most the configured one).
    pub fn lg_k(&self) -> u8 {
        self.union.lg_config_k()
    }

    /// The target type of the result sketch.
    pub fn target(&self) -> HllTargetType {
        self.target
    }

    /// The serialized sketch (DataSketches HLL format of the target type, as Druid's
    /// `HllSketchHolder.toByteArray`, readable by `HllSketch.heapify`).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.union.to_sketch(self.target.to_ds()).serialize()
    }
}

/// Druid's default `size` of `thetaSketch` (nominal entries).
pub const THETA_DEFAULT_SIZE: u32 = 16384;

/// The accumulator of `thetaSketch`: an update sketch of the values added directly and a theta
/// union of merged sketches, stored as one compact, ordered DataSketches theta sketch (as
/// Druid's `SketchHolder` stores it).
#[derive(Debug)]
pub struct ThetaAcc {
    lg_k: u8,
    update: ThetaSketch,
    union: ThetaUnion,
}

impl ThetaAcc {
    /// An empty accumulator of `size` nominal entries (a power of two, 16..=2^26; Druid's
    /// default 16384).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `size` otherwise.
    pub fn new(size: u32) -> Result<Self, SketchError> {
        if !size.is_power_of_two() || !(16..=(1 << 26)).contains(&size) {
            return Err(SketchError::InvalidParameter(format!(
                "size must be a power of 2 between 16 and 67108864, got [{size}]"
            )));
        }
        let lg_k = size.trailing_zeros() as u8;
        Self::with_lg_k(lg_k)
    }

    fn with_lg_k(lg_k: u8) -> Result<Self, SketchError> {
        let union = ThetaUnionBuilder::default()
            .lg_k(lg_k)
            .build()
            .map_err(|e| SketchError::InvalidParameter(e.to_string()))?;
        let update = ThetaSketchBuilder::default()
            .lg_k(lg_k)
            .build()
            .map_err(|e| SketchError::InvalidParameter(e.to_string()))?;
        Ok(ThetaAcc {
            lg_k,
            update,
            union,
        })
    }

    /// Adds a string (skipped when empty): its UTF-8 bytes.
    pub fn update_str(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        self.update.update(raw_bytes::from_str(value));
    }

    /// Adds a long: its 8 little-endian bytes (Java's `UpdateSketch.update(long)`, what Druid's
    /// query-time `thetaSketch` aggregator does with a LONG column).
    pub fn update_i64(&mut self, value: i64) {
        self.update
            .update(raw_bytes::from_slice(&value.to_le_bytes()));
    }

    /// Adds a double: the little-endian bits of the value, -0.0 as 0.0 and NaN canonical (Java's
    /// `UpdateSketch.update(double)`, what Druid's query-time `thetaSketch` aggregator does with
    /// a DOUBLE column).
    pub fn update_f64(&mut self, value: f64) {
        self.update
            .update(raw_bytes::from_slice(&canonical_bits(value).to_le_bytes()));
    }

    /// The union of the update sketch and the merged sketches.
    fn result(&self) -> CompactThetaSketch {
        if self.update.is_empty() {
            return self.union.to_sketch(true);
        }
        let mut all = ThetaUnionBuilder::default()
            .lg_k(self.lg_k)
            .build()
            .expect("lg_k validated at construction");
        all.update(&self.union.to_sketch(true))
            .and_then(|()| all.update(&self.update))
            .expect("sketches of one accumulator share the default seed");
        all.to_sketch(true)
    }

    /// Merges another accumulator into this one.
    pub fn merge(&mut self, other: &ThetaAcc) {
        let compact = other.result();
        self.union
            .update(&compact)
            .expect("sketches of one accumulator share the default seed");
    }

    /// Merges a serialized DataSketches theta sketch (compact; default seed).
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] when `bytes` is not a theta sketch of the default seed.
    pub fn merge_bytes(&mut self, bytes: &[u8]) -> Result<(), SketchError> {
        let sketch = CompactThetaSketch::deserialize(bytes)
            .map_err(|e| SketchError::InvalidBytes(e.to_string()))?;
        self.union
            .update(&sketch)
            .map_err(|e| SketchError::InvalidBytes(e.to_string()))
    }

    /// The distinct-count estimate.
    pub fn estimate(&self) -> f64 {
        self.result().estimate()
    }

    /// Approximate heap bytes held (the update sketch's and the union's hash tables); cheap,
    /// for memory accounting.
    pub fn memory_size(&self) -> usize {
        self.update.estimated_size() + self.union.estimated_size()
    }

    /// The serialized compact, ordered theta sketch (DataSketches format).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.result().serialize()
    }
}

impl Clone for ThetaAcc {
    fn clone(&self) -> Self {
        let mut copy = Self::with_lg_k(self.lg_k).expect("lg_k validated at construction");
        copy.merge(self);
        copy
    }
}

fn num_std_dev(n: u8) -> Result<NumStdDev, SketchError> {
    match n {
        1 => Ok(NumStdDev::One),
        2 => Ok(NumStdDev::Two),
        3 => Ok(NumStdDev::Three),
        other => Err(SketchError::InvalidParameter(format!(
            "numStdDev must be 1, 2 or 3, got [{other}]"
        ))),
    }
}

fn theta_num_std_dev(n: i32) -> Result<NumStdDev, SketchError> {
    u8::try_from(n)
        .map_err(|_| {
            SketchError::InvalidParameter(format!("numStdDev must be 1, 2 or 3, got [{n}]"))
        })
        .and_then(num_std_dev)
}

/// Which representation an HLL sketch is in (DataSketches `CurMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HllMode {
    /// `LIST`: a short list of coupons (few distinct values).
    List,
    /// `SET`: a hash set of coupons.
    Set,
    /// `HLL`: the register array.
    Hll,
}

impl HllMode {
    /// DataSketches' name: `LIST`, `SET` or `HLL`.
    pub fn name(self) -> &'static str {
        match self {
            HllMode::List => "LIST",
            HllMode::Set => "SET",
            HllMode::Hll => "HLL",
        }
    }
}

/// The preamble fields of a serialized HLL sketch that Java's `HllSketch.toString` summary
/// shows (DataSketches `PreambleUtil` layout).
#[derive(Debug, Clone, PartialEq)]
pub struct HllPreamble {
    /// `lgK`.
    pub lg_k: u8,
    /// Target type.
    pub target: HllTargetType,
    /// Current mode.
    pub mode: HllMode,
    /// The out-of-order flag (estimates use the composite estimator instead of HIP).
    pub out_of_order: bool,
    /// The rebuild-curMin/numAtCurMin/KxQ flag (Java's `Rebuild KxQ Flg`).
    pub rebuild_kxq: bool,
    /// Coupons held (LIST and SET modes; 0 in HLL mode).
    pub coupon_count: u32,
    /// Smallest register value (HLL mode).
    pub cur_min: u8,
    /// Registers at `cur_min` (HLL mode).
    pub num_at_cur_min: u32,
    /// HIP accumulator (HLL mode).
    pub hip_accum: f64,
    /// KxQ0 (HLL mode).
    pub kxq0: f64,
    /// KxQ1 (HLL mode).
    pub kxq1: f64,
}

/// A serialized DataSketches HLL sketch read back, for post-processing (estimate, bounds,
/// summary).
#[derive(Debug, Clone)]
pub struct HllSketchView {
    sketch: HllSketch,
    preamble: HllPreamble,
}

impl HllSketchView {
    /// Reads a serialized HLL sketch (any type, lgK, mode; compact or updatable).
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] when `bytes` is not an HLL sketch.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SketchError> {
        let sketch =
            HllSketch::deserialize(bytes).map_err(|e| SketchError::InvalidBytes(e.to_string()))?;
        let bad = || SketchError::InvalidBytes("HLL sketch preamble too short".to_string());
        let byte = |i: usize| bytes.get(i).copied().ok_or_else(bad);
        let u32_at = |i: usize| -> Result<u32, SketchError> {
            let b = bytes.get(i..i + 4).ok_or_else(bad)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let f64_at = |i: usize| -> Result<f64, SketchError> {
            let b = bytes.get(i..i + 8).ok_or_else(bad)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Ok(f64::from_le_bytes(a))
        };
        let flags = byte(5)?;
        let mode_byte = byte(7)?;
        let target = match (mode_byte >> 2) & 3 {
            0 => HllTargetType::Hll4,
            1 => HllTargetType::Hll6,
            _ => HllTargetType::Hll8,
        };
        let mut preamble = HllPreamble {
            lg_k: byte(3)?,
            target,
            mode: HllMode::List,
            out_of_order: flags & 16 != 0,
            rebuild_kxq: flags & 32 != 0,
            coupon_count: 0,
            cur_min: 0,
            num_at_cur_min: 0,
            hip_accum: 0.0,
            kxq0: 0.0,
            kxq1: 0.0,
        };
        match mode_byte & 3 {
            0 => {
                preamble.coupon_count = if flags & 4 != 0 {
                    0
                } else {
                    u32::from(byte(6)?)
                };
            }
            1 => {
                preamble.mode = HllMode::Set;
                preamble.coupon_count = u32_at(8)?;
            }
            _ => {
                preamble.mode = HllMode::Hll;
                preamble.cur_min = byte(6)?;
                preamble.hip_accum = f64_at(8)?;
                preamble.kxq0 = f64_at(16)?;
                preamble.kxq1 = f64_at(24)?;
                preamble.num_at_cur_min = u32_at(32)?;
            }
        }
        Ok(HllSketchView { sketch, preamble })
    }

    /// The distinct-count estimate.
    pub fn estimate(&self) -> f64 {
        self.sketch.estimate()
    }

    /// The lower bound at `num_std_dev` (1, 2 or 3) standard deviations.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `numStdDev` for other values.
    pub fn lower_bound(&self, num_std_dev: u8) -> Result<f64, SketchError> {
        Ok(self.sketch.lower_bound(self::num_std_dev(num_std_dev)?))
    }

    /// The upper bound at `num_std_dev` (1, 2 or 3) standard deviations.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `numStdDev` for other values.
    pub fn upper_bound(&self, num_std_dev: u8) -> Result<f64, SketchError> {
        Ok(self.sketch.upper_bound(self::num_std_dev(num_std_dev)?))
    }

    /// The preamble fields (mode, flags, HIP state, ...).
    pub fn preamble(&self) -> &HllPreamble {
        &self.preamble
    }
}

/// A serialized DataSketches theta sketch read back (compact, default seed), for
/// post-processing: estimate, bounds, and Druid's set operations (`SketchHolder
/// .sketchSetOperation`).
#[derive(Debug, Clone)]
pub struct ThetaSketchView {
    sketch: CompactThetaSketch,
}

impl ThetaSketchView {
    /// Reads a serialized compact theta sketch of the default seed.
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] when `bytes` is not one.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SketchError> {
        let sketch = CompactThetaSketch::deserialize(bytes)
            .map_err(|e| SketchError::InvalidBytes(e.to_string()))?;
        Ok(ThetaSketchView { sketch })
    }

    /// The distinct-count estimate.
    pub fn estimate(&self) -> f64 {
        self.sketch.estimate()
    }

    /// The lower bound at `num_std_dev` standard deviations. In exact mode (theta 1) it is
    /// the estimate whatever `num_std_dev` is, as in DataSketches-java (Druid answers
    /// `THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(.., 10)` on a small sketch).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `numStdDev` when it is not 1, 2 or 3 and the
    /// sketch is in estimation mode.
    pub fn lower_bound(&self, num_std_dev: i32) -> Result<f64, SketchError> {
        if !self.sketch.is_estimation_mode() {
            return Ok(self.sketch.estimate());
        }
        Ok(self.sketch.lower_bound(theta_num_std_dev(num_std_dev)?))
    }

    /// The upper bound at `num_std_dev` standard deviations; see
    /// [`lower_bound`](Self::lower_bound).
    ///
    /// # Errors
    /// As [`lower_bound`](Self::lower_bound).
    pub fn upper_bound(&self, num_std_dev: i32) -> Result<f64, SketchError> {
        if !self.sketch.is_estimation_mode() {
            return Ok(self.sketch.estimate());
        }
        Ok(self.sketch.upper_bound(theta_num_std_dev(num_std_dev)?))
    }

    /// The sketch bytes (compact, ordered).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.sketch.serialize()
    }

    /// The intersection of `sketches` (at least one), as a compact ordered sketch (Java's
    /// `Intersection.intersect` over each, then `getResult`).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] when `sketches` is empty, [`SketchError::InvalidBytes`]
    /// when the sketches disagree on the seed.
    pub fn intersect(sketches: &[ThetaSketchView]) -> Result<ThetaSketchView, SketchError> {
        let mut inter = ThetaIntersection::default();
        for s in sketches {
            inter
                .update(&s.sketch)
                .map_err(|e| SketchError::InvalidBytes(e.to_string()))?;
        }
        inter
            .to_sketch(true)
            .map(|sketch| ThetaSketchView { sketch })
            .ok_or_else(|| {
                SketchError::InvalidParameter("an intersection needs at least one sketch".into())
            })
    }

    /// `sketches[0]` minus each following sketch in turn (Java's `AnotB.aNotB` chained, as
    /// Druid's `SketchHolder.sketchSetOperation(NOT, ..)`).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] when `sketches` is empty, [`SketchError::InvalidBytes`]
    /// when the sketches disagree on the seed.
    pub fn a_not_b(sketches: &[ThetaSketchView]) -> Result<ThetaSketchView, SketchError> {
        let (first, rest) = sketches.split_first().ok_or_else(|| {
            SketchError::InvalidParameter("a set difference needs at least one sketch".into())
        })?;
        let op = ThetaANotB::default();
        let mut result = first.sketch.clone();
        for b in rest {
            result = op
                .compute(&result, &b.sketch, true)
                .map_err(|e| SketchError::InvalidBytes(e.to_string()))?;
        }
        Ok(ThetaSketchView { sketch: result })
    }
}

/// The bits Java's `Double.doubleToLongBits` gives for `v` after folding -0.0 into 0.0 (NaN
/// becomes the canonical NaN, as in Java).
fn canonical_bits(v: f64) -> u64 {
    if v == 0.0 {
        0.0f64.to_bits()
    } else if v.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        v.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hll_counts_distinct_values_and_round_trips() {
        let mut acc = HllAcc::new(12, HllTargetType::Hll4).unwrap();
        for i in 0..10_000 {
            acc.update_str(&format!("user{}", i % 5000), HllStringEncoding::Utf16Le);
        }
        let est = acc.estimate();
        assert!((est - 5000.0).abs() < 5000.0 * 0.05, "estimate {est}");
        let bytes = acc.to_bytes();
        let back = HllSketch::deserialize(&bytes).unwrap();
        assert!((back.estimate() - est).abs() < 1e-6);
        // Family id 7 (HLL) at byte 2, lgK 12 at byte 3: DataSketches' HLL preamble.
        assert_eq!(bytes[2], 7);
        assert_eq!(bytes[3], 12);
    }

    #[test]
    fn hll_merge_is_a_union() {
        let mut a = HllAcc::new(12, HllTargetType::Hll8).unwrap();
        let mut b = HllAcc::new(12, HllTargetType::Hll8).unwrap();
        for i in 0..1000 {
            a.update_i64(i);
            b.update_i64(i + 500);
        }
        a.merge(&b);
        assert!((a.estimate() - 1500.0).abs() < 1500.0 * 0.05);
        let mut c = HllAcc::new(12, HllTargetType::Hll8).unwrap();
        c.merge_bytes(&b.to_bytes()).unwrap();
        assert!((c.estimate() - 1000.0).abs() < 1000.0 * 0.05);
        assert!(c.merge_bytes(&[1, 2, 3]).is_err());
    }

    #[test]
    fn hll_skips_empty_strings_and_folds_negative_zero() {
        let mut acc = HllAcc::new(12, HllTargetType::Hll4).unwrap();
        acc.update_str("", HllStringEncoding::Utf8);
        assert_eq!(acc.estimate(), 0.0);
        acc.update_f64(0.0);
        acc.update_f64(-0.0);
        assert!((acc.estimate() - 1.0).abs() < 0.01, "{}", acc.estimate());
    }

    #[test]
    fn hll_string_encodings_hash_different_bytes() {
        let mut a = HllAcc::new(12, HllTargetType::Hll8).unwrap();
        a.update_str("x", HllStringEncoding::Utf8);
        a.update_str("x", HllStringEncoding::Utf16Le);
        assert!((a.estimate() - 2.0).abs() < 0.01, "{}", a.estimate());
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            HllAcc::new(3, HllTargetType::Hll4)
                .unwrap_err()
                .to_string()
                .contains("lgK")
        );
        assert!(
            ThetaAcc::new(1000)
                .unwrap_err()
                .to_string()
                .contains("size")
        );
        assert!(
            HllTargetType::from_name("HLL_5")
                .unwrap_err()
                .to_string()
                .contains("tgtHllType")
        );
        assert!(HllStringEncoding::from_name("latin1").is_err());
    }

    #[test]
    fn theta_counts_merges_clones_and_round_trips() {
        let mut a = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        let mut b = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        for i in 0..3000 {
            a.update_str(&format!("v{i}"));
            b.update_str(&format!("v{}", i + 1000));
        }
        a.merge(&b);
        assert!((a.estimate() - 4000.0).abs() < 1.0, "exact below size");
        let copy = a.clone();
        assert!((copy.estimate() - 4000.0).abs() < 1.0);
        let bytes = a.to_bytes();
        // Family id 3 (compact theta) at byte 2.
        assert_eq!(bytes[2], 3);
        let mut c = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        c.merge_bytes(&bytes).unwrap();
        assert!((c.estimate() - 4000.0).abs() < 1.0);
        assert!(c.merge_bytes(&[0xff; 5]).is_err());
    }

    fn b64(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }

    #[test]
    fn hll_bytes_and_estimates_match_druid() {
        // Druid's HllSketchSqlAggregatorTest (EXPECTED_PA_RESULT): DS_HLL(dim2) over the test
        // datasource holds "a" and "abc" (utf16le), DS_HLL(cnt) the long 1.
        let mut dim2 = HllAcc::new(12, HllTargetType::Hll4).unwrap();
        for v in ["a", "", "a", "abc"] {
            dim2.update_str(v, HllStringEncoding::Utf16Le);
        }
        assert_eq!(dim2.to_bytes(), b64("AgEHDAMIAgDhUv8P63iABQ=="));
        let mut cnt = HllAcc::new(12, HllTargetType::Hll4).unwrap();
        cnt.update_i64(1);
        assert_eq!(cnt.to_bytes(), b64("AgEHDAMIAQAr8vsG"));
        let view = HllSketchView::from_bytes(&dim2.to_bytes()).unwrap();
        assert_eq!(view.estimate(), 2.000000004967054);
        assert_eq!(view.lower_bound(2).unwrap(), 2.0);
        assert_eq!(view.upper_bound(2).unwrap(), 2.0001997319422404);
        assert_eq!(view.upper_bound(1).unwrap(), 2.000099863468538);
        assert!(view.upper_bound(4).is_err());
        let p = view.preamble();
        assert_eq!((p.lg_k, p.mode, p.coupon_count), (12, HllMode::List, 2));
        assert_eq!(p.target, HllTargetType::Hll4);
        assert_eq!(dim2.sketch_estimate(), view.estimate());
        // HLL mode preamble.
        let mut big = HllAcc::new(10, HllTargetType::Hll8).unwrap();
        for i in 0..50_000 {
            big.update_i64(i);
        }
        let view = HllSketchView::from_bytes(&big.to_bytes()).unwrap();
        let p = view.preamble();
        assert_eq!(
            (p.lg_k, p.mode, p.target),
            (10, HllMode::Hll, HllTargetType::Hll8)
        );
        assert!(p.hip_accum > 0.0 || p.out_of_order, "{p:?}");
        assert!((view.estimate() - 50_000.0).abs() < 50_000.0 * 0.1);
        assert_eq!(big.sketch_estimate(), view.estimate());
        assert!(HllSketchView::from_bytes(&[2, 1, 7]).is_err());
    }

    #[test]
    fn theta_numbers_bounds_and_set_operations() {
        let mut a = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        let mut b = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        for i in 0..1000 {
            a.update_i64(i);
            b.update_f64((i + 600) as f64);
        }
        // Longs and doubles hash differently (as in Java): no overlap between 600.0 and 600.
        let va = ThetaSketchView::from_bytes(&a.to_bytes()).unwrap();
        let vb = ThetaSketchView::from_bytes(&b.to_bytes()).unwrap();
        assert_eq!(va.estimate(), 1000.0);
        assert_eq!(va.lower_bound(2).unwrap(), 1000.0);
        assert_eq!(
            va.upper_bound(10).unwrap(),
            1000.0,
            "exact mode takes any numStdDev"
        );
        assert_eq!(
            ThetaSketchView::intersect(&[va.clone(), vb.clone()])
                .unwrap()
                .estimate(),
            0.0
        );
        let mut c = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        for i in 500..2000 {
            c.update_i64(i);
        }
        let vc = ThetaSketchView::from_bytes(&c.to_bytes()).unwrap();
        let inter = ThetaSketchView::intersect(&[va.clone(), vc.clone()]).unwrap();
        assert_eq!(inter.estimate(), 500.0);
        let diff = ThetaSketchView::a_not_b(&[vc.clone(), va.clone()]).unwrap();
        assert_eq!(diff.estimate(), 1000.0);
        let diff2 = ThetaSketchView::a_not_b(&[vc.clone(), va, inter]).unwrap();
        assert_eq!(diff2.estimate(), 1000.0);
        assert_eq!(
            ThetaSketchView::a_not_b(std::slice::from_ref(&vc))
                .unwrap()
                .estimate(),
            1500.0
        );
        assert!(ThetaSketchView::a_not_b(&[]).is_err());
        assert!(ThetaSketchView::intersect(&[]).is_err());
        // -0.0 and 0.0 are one value.
        let mut z = ThetaAcc::new(THETA_DEFAULT_SIZE).unwrap();
        z.update_f64(0.0);
        z.update_f64(-0.0);
        assert_eq!(z.estimate(), 1.0);
        // Estimation mode: bounds bracket the estimate.
        let mut e = ThetaAcc::new(1024).unwrap();
        for i in 0..100_000 {
            e.update_i64(i);
        }
        let ve = ThetaSketchView::from_bytes(&e.to_bytes()).unwrap();
        let (lo, est, hi) = (
            ve.lower_bound(1).unwrap(),
            ve.estimate(),
            ve.upper_bound(1).unwrap(),
        );
        assert!(lo < est && est < hi, "{lo} {est} {hi}");
        assert!((est - 100_000.0).abs() < 100_000.0 * 0.1, "{est}");
        assert!(ve.upper_bound(4).is_err());
    }
}
