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
//!   strings and nulls are skipped.
//!
//! Both use MurmurHash3 x64-128 with DataSketches' default seed 9001 (the crate's default).

use datasketches::hash::value::raw_bytes;
use datasketches::hll::{HllSketch, HllType, HllUnion};
use datasketches::theta::{
    CompactThetaSketch, ThetaSketch, ThetaSketchBuilder, ThetaUnion, ThetaUnionBuilder,
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
}
