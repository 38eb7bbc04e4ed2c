//! Druid's own HyperLogLog collector, the state of the `hyperUnique` aggregator
//! (`COMPLEX<hyperUnique>`).
//!
//! This is a Rust re-implementation of `org.apache.druid.hll.HyperLogLogCollector` and
//! `VersionOneHyperLogLogCollector` (Apache Druid, `processing/src/main/java/org/apache/druid/hll/`),
//! written from the Java sources so that the bytes we store are the bytes Druid stores and
//! the estimates are the estimates Druid reports.
//!
//! # Algorithm
//!
//! HyperLogLog (Flajolet, Fusy, Gandouet, Meunier 2007) with Druid's storage tricks:
//!
//! * 2048 buckets (11 bits of the hash), each a 4-bit register, two registers per byte
//!   (even bucket = upper nibble). 1024 register bytes.
//! * A shared *register offset*: a register holding `r` stands for the value
//!   `r + register_offset`. When all 2048 registers are non-zero, the offset is incremented and
//!   every register decremented (`decrementBuckets`).
//! * One *overflow register*: a value too large for 4 bits above the offset is kept as
//!   (`max_overflow_value`, `max_overflow_register`) in the header, and only the largest such.
//!
//! Hashing (as `HyperLogLogHash.getDefault()`): Guava `Hashing.murmur3_128()` (x64 variant,
//! seed 0) of the value's UTF-8 bytes, `asBytes()` = `h1` little-endian then `h2` little-endian.
//! `add(byte[])` then uses (`HyperLogLogCollector.add`):
//!
//! * bucket = big-endian `u16` of hash bytes 14..16, masked with `0x7ff`;
//! * value (`positionOf1`) = 1-based position of the lowest set bit, scanning hash bytes 0..8
//!   in order and the bits of each byte from least significant up (`ByteBitLookup`): each
//!   all-zero byte adds 8, the first non-zero byte `b` adds `b.trailing_zeros() + 1`.
//!   At most 64 (all eight bytes zero).
//!
//! # Serialized form (version 1, big-endian multi-byte fields)
//!
//! | bytes | field |
//! |-------|-------|
//! | 0     | version, `1` |
//! | 1     | register offset |
//! | 2..4  | number of non-zero registers (`u16`) |
//! | 4     | max overflow value |
//! | 5..7  | max overflow register (bucket, `u16`) |
//! | 7..   | payload |
//!
//! Dense payload: the 1024 register bytes (total 1031 bytes). Sparse payload: 3-byte entries
//! (`u16` position *counted from the start of the buffer*, i.e. register byte index + 7, then
//! the register byte), used by `toByteArray` when fewer than 128 registers are non-zero; Druid
//! sizes the sparse array as `7 + 3 * numNonZeroRegisters`, so when both nibbles of a byte are
//! set the array ends with all-zero padding entries. We reproduce that byte for byte.

use crate::SketchError;

/// Number of buckets (registers): `2^11`.
const NUM_BUCKETS: usize = 1 << 11;
/// Register bytes: two 4-bit registers per byte.
const NUM_BYTES_FOR_BUCKETS: usize = NUM_BUCKETS / 2;
/// Version 1 header length.
const HEADER_NUM_BYTES: usize = 7;
/// Dense version 1 length: header + registers = 1031.
const NUM_BYTES_FOR_DENSE_STORAGE: usize = HEADER_NUM_BYTES + NUM_BYTES_FOR_BUCKETS;
/// Below this many non-zero registers, `toByteArray` writes the sparse form.
const DENSE_THRESHOLD: u16 = 128;
/// Largest value a 4-bit register holds above the offset.
const RANGE: i32 = 15;
/// Largest `positionOf1` a 16-byte hash can produce (8 zero bytes).
const MAX_POSITION: u8 = 64;
/// Version byte of the format we write.
const VERSION: u8 = 1;

/// `2^64` as `f64`.
const TWO_TO_THE_SIXTY_FOUR: f64 = 18_446_744_073_709_551_616.0;

/// Druid's `ALPHA = 0.7213 / (1 + 1.079 / NUM_BUCKETS)`.
fn alpha() -> f64 {
    0.7213 / (1.0 + 1.079 / NUM_BUCKETS as f64)
}

/// Druid's `CORRECTION_PARAMETER = ALPHA * NUM_BUCKETS * NUM_BUCKETS` (evaluated left to right).
fn correction_parameter() -> f64 {
    alpha() * NUM_BUCKETS as f64 * NUM_BUCKETS as f64
}

/// Druid's `LOW_CORRECTION_THRESHOLD = (5 * NUM_BUCKETS) / 2.0`.
const LOW_CORRECTION_THRESHOLD: f64 = (5 * NUM_BUCKETS) as f64 / 2.0;

/// Druid's `HIGH_CORRECTION_THRESHOLD = 2^64 / 30`.
const HIGH_CORRECTION_THRESHOLD: f64 = TWO_TO_THE_SIXTY_FOUR / 30.0;

/// `1.0 / 2^exp`, computed like Java's `1.0d / Math.pow(2, exp)` (exact for the exponents that
/// occur, at most a few hundred).
fn inv_pow2(exp: i32) -> f64 {
    1.0 / 2f64.powi(exp)
}

/// Druid's `HyperLogLogCollector.applyCorrection(e, zeroCount)`: raw estimate from the harmonic
/// sum `e`, with linear counting below `5 * 2048 / 2` and the `2^64` large-range correction.
fn apply_correction(e: f64, zero_count: i32) -> f64 {
    let e = correction_parameter() / e;
    if e <= LOW_CORRECTION_THRESHOLD {
        return if zero_count == 0 {
            e
        } else {
            NUM_BUCKETS as f64 * (NUM_BUCKETS as f64 / f64::from(zero_count)).ln()
        };
    }
    if e > HIGH_CORRECTION_THRESHOLD {
        let ratio = e / TWO_TO_THE_SIXTY_FOUR;
        return if ratio >= 1.0 {
            f64::INFINITY
        } else {
            -TWO_TO_THE_SIXTY_FOUR * (1.0 - ratio).ln()
        };
    }
    e
}

/// Java's `Double.doubleToLongBits`: the IEEE bits, every NaN folded to the canonical
/// `0x7ff8000000000000`.
pub fn f64_bits_java(value: f64) -> i64 {
    if value.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        value.to_bits() as i64
    }
}

/// Guava `Hashing.murmur3_128()` (seed 0) of `bytes`, as `HashCode.asBytes()`: `h1` then `h2`,
/// each little-endian. This is Druid's `HyperLogLogHash.getDefault().hash(byte[])`.
fn murmur3_128_guava(bytes: &[u8]) -> [u8; 16] {
    // `fastmurmur3` (slice-based MurmurHash3_x64_128, several times faster than reading through
    // `std::io::Read`) returns `(h2 << 64) | h1`, so little-endian bytes are h1 LE ++ h2 LE.
    fastmurmur3::murmur3_x64_128(bytes, 0).to_le_bytes()
}

/// [`murmur3_128_guava`] of the UTF-16LE code units of the ASCII string `ascii`, without
/// building them: each ASCII byte is one code unit (the byte, then 0), so every 8-byte word
/// MurmurHash3_x64_128 reads is four bytes of `ascii` spread over 16-bit lanes. Same
/// algorithm and constants as the reference MurmurHash3_x64_128 (Austin Appleby, public
/// domain), seed 0; about three times faster than widening into a buffer first.
fn murmur3_128_ascii_utf16(ascii: &[u8]) -> [u8; 16] {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    /// Up to four bytes, each in the low byte of a 16-bit lane (little-endian).
    fn widen(chars: &[u8]) -> u64 {
        chars
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, b)| acc | (u64::from(*b) << (16 * i)))
    }
    fn widen4(chars: &[u8; 4]) -> u64 {
        let x = u64::from(u32::from_le_bytes(*chars));
        (x & 0xff) | ((x & 0xff00) << 8) | ((x & 0x00ff_0000) << 16) | ((x & 0xff00_0000) << 24)
    }
    fn fmix(mut k: u64) -> u64 {
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
    let (mut h1, mut h2) = (0u64, 0u64);
    // A 16-byte block of UTF-16 is 8 chars.
    let mut blocks = ascii.chunks_exact(8);
    for block in &mut blocks {
        let k1 = widen4(&[block[0], block[1], block[2], block[3]]);
        let k2 = widen4(&[block[4], block[5], block[6], block[7]]);
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if tail.len() > 4 {
        h2 ^= widen(&tail[4..])
            .wrapping_mul(C2)
            .rotate_left(33)
            .wrapping_mul(C1);
    }
    if !tail.is_empty() {
        h1 ^= widen(&tail[..tail.len().min(4)])
            .wrapping_mul(C1)
            .rotate_left(31)
            .wrapping_mul(C2);
    }
    let len = (ascii.len() * 2) as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&h1.to_le_bytes());
    out[8..].copy_from_slice(&h2.to_le_bytes());
    out
}

/// Druid's `HyperLogLogCollector` (version 1): the `hyperUnique` aggregator's state.
///
/// Holds 2048 four-bit registers (1024 bytes) plus a register offset and one overflow register;
/// see the module documentation for the algorithm and byte layout. Always kept dense in memory;
/// [`to_bytes`](Self::to_bytes) chooses sparse or dense exactly like Druid's `toByteArray`.
///
/// Equality compares the dense state (offset, count of non-zero registers, overflow register
/// and value, registers), like Druid's `equals` which densifies both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct HyperLogLogCollector {
    /// Value subtracted from every register (Druid's `registerOffset`).
    register_offset: u8,
    /// Number of non-zero 4-bit registers, `0..=2048` (Druid's `numNonZeroRegisters`).
    num_non_zero: u16,
    /// Largest value seen that did not fit in 4 bits above the offset (0 = none).
    max_overflow_value: u8,
    /// Bucket of `max_overflow_value`, `0..2048`.
    max_overflow_register: u16,
    /// 1024 bytes, bucket `2i` in the upper nibble of byte `i`, bucket `2i + 1` in the lower.
    registers: Box<[u8; NUM_BYTES_FOR_BUCKETS]>,
}

impl Default for HyperLogLogCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl HyperLogLogCollector {
    /// An empty collector (Druid's `HyperLogLogCollector.makeLatestCollector()`): estimate 0,
    /// serializes to the 7-byte header `[1, 0, 0, 0, 0, 0, 0]`.
    pub fn new() -> Self {
        Self {
            register_offset: 0,
            num_non_zero: 0,
            max_overflow_value: 0,
            max_overflow_register: 0,
            registers: Box::new([0u8; NUM_BYTES_FOR_BUCKETS]),
        }
    }

    /// Adds a string the way Druid's `hyperUnique` aggregator does at ingestion:
    /// `add(HyperLogLogHash.getDefault().hash(value))`, i.e. Guava `murmur3_128` (seed 0) of the
    /// UTF-8 bytes of `value`.
    ///
    /// Note (Druid issue #13950): the hash of the empty string is sixteen zero bytes, which lands
    /// in the overflow register; Druid has the same behaviour.
    pub fn add_str(&mut self, value: &str) {
        let hash = murmur3_128_guava(value.as_bytes());
        self.add_hash(&hash);
    }

    /// Adds a string the way Druid's `cardinality` aggregator does (the one behind SQL
    /// `APPROX_COUNT_DISTINCT` and approximate `COUNT(DISTINCT)`):
    /// `HASH_FUNCTION.hashUnencodedChars(value)`, i.e. murmur3_128 of the string's UTF-16 code
    /// units, each little-endian (`StringCardinalityAggregatorColumnSelectorStrategy`).
    /// `scratch` is reused between calls to avoid an allocation per value.
    pub fn add_unencoded_chars(&mut self, value: &str, scratch: &mut Vec<u8>) {
        let hash = Self::unencoded_chars_hash(value, scratch);
        self.add_hash(&hash);
    }

    /// The hash [`Self::add_unencoded_chars`] adds for `value`: Guava's
    /// `murmur3_128().hashUnencodedChars(value)` (murmur3 x64 128 of the UTF-16 code units,
    /// little-endian). `scratch` is reused between calls. Callers that add the same value
    /// many times (dictionary-encoded columns) compute it once and call [`Self::add_hash`].
    pub fn unencoded_chars_hash(value: &str, scratch: &mut Vec<u8>) -> [u8; 16] {
        if value.is_ascii() {
            return murmur3_128_ascii_utf16(value.as_bytes());
        }
        scratch.clear();
        for unit in value.encode_utf16() {
            scratch.extend_from_slice(&unit.to_le_bytes());
        }
        murmur3_128_guava(scratch)
    }

    /// Adds a long as Druid's `cardinality` aggregator does: `hashLong(value)` (its 8 bytes,
    /// little-endian). Doubles go through [`f64_bits_java`] first, as
    /// `Double.doubleToLongBits`.
    pub fn add_long(&mut self, value: i64) {
        self.add_hash(&murmur3_128_guava(&value.to_le_bytes()));
    }

    /// Adds a float as Druid's `cardinality` aggregator does: `hashInt(floatToIntBits(value))`.
    pub fn add_float(&mut self, value: f32) {
        let bits = if value.is_nan() {
            0x7fc0_0000_u32
        } else {
            value.to_bits()
        };
        self.add_hash(&murmur3_128_guava(&bits.to_le_bytes()));
    }

    /// Adds an already-hashed value (16 bytes, as Guava `HashCode.asBytes()` of a 128-bit hash),
    /// exactly like Druid's `HyperLogLogCollector.add(byte[])`: the bucket is the big-endian
    /// `u16` of bytes 14..16 masked to 11 bits, the register value the 1-based position of the
    /// lowest set bit across bytes 0..8 (see the module documentation).
    pub fn add_hash(&mut self, hash: &[u8; 16]) {
        let bucket = u16::from_be_bytes([hash[14], hash[15]]) & 0x7ff;
        // Druid scans the first 8 bytes in order for the first non-zero one and adds the
        // 1-based index of its lowest set bit (`ByteBitLookup.LOOKUP`) to 8 per zero byte
        // before it (64 when all are zero): the trailing zeros of those bytes as a
        // little-endian word, plus one.
        let word = u64::from_le_bytes([
            hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], hash[6], hash[7],
        ]);
        let position_of_1 = if word == 0 {
            64
        } else {
            word.trailing_zeros() as u8 + 1
        };
        self.add_position(bucket, position_of_1);
    }

    /// Druid's `add(short bucket, byte positionOf1)`. `bucket < 2048`, `position_of_1 <= 64`.
    fn add_position(&mut self, bucket: u16, position_of_1: u8) {
        let register_offset = self.register_offset;
        // Discard everything outside the range we care about.
        if position_of_1 <= register_offset {
            return;
        }
        if i32::from(position_of_1) > i32::from(register_offset) + RANGE {
            let curr_max = self.max_overflow_value;
            if position_of_1 > curr_max {
                if i32::from(curr_max) <= i32::from(register_offset) + RANGE {
                    // The previous overflow value now fits in a register: add it back.
                    self.add_position(self.max_overflow_register, curr_max);
                }
                self.max_overflow_value = position_of_1;
                self.max_overflow_register = bucket;
            }
            return;
        }
        // Whatever value we add must be stored in 4 bits.
        let num_non_zero = self.add_nibble_register(bucket, position_of_1 - register_offset);
        self.num_non_zero = num_non_zero;
        if usize::from(num_non_zero) == NUM_BUCKETS {
            self.register_offset = register_offset.wrapping_add(1);
            self.num_non_zero = self.decrement_buckets();
        }
    }

    /// Druid's `addNibbleRegister`: max-stores a 4-bit value, returns the new non-zero count.
    fn add_nibble_register(&mut self, bucket: u16, value: u8) -> u16 {
        let mut num_non_zero = self.num_non_zero;
        let position = usize::from(bucket >> 1) % NUM_BYTES_FOR_BUCKETS;
        let is_upper_nibble = bucket & 1 == 0;
        let shifted = if is_upper_nibble {
            value << 4
        } else {
            value & 0x0f
        };
        let orig = self.registers[position];
        let new_value_mask: u8 = if is_upper_nibble { 0xf0 } else { 0x0f };
        let original_value_mask = !new_value_mask;
        if orig & new_value_mask == 0 && shifted != 0 {
            num_non_zero += 1;
        }
        self.registers[position] =
            (orig & new_value_mask).max(shifted) | (orig & original_value_mask);
        num_non_zero
    }

    /// Druid's `decrementBuckets`: subtracts one from every register (`byte - 0x11`) and returns
    /// the new number of non-zero registers.
    fn decrement_buckets(&mut self) -> u16 {
        let mut count = 0u16;
        for byte in self.registers.iter_mut() {
            let value = byte.wrapping_sub(0x11);
            if value & 0xf0 != 0 {
                count += 1;
            }
            if value & 0x0f != 0 {
                count += 1;
            }
            *byte = value;
        }
        count
    }

    /// Merges `other` into `self` (set union), exactly as Druid's `fold(HyperLogLogCollector)`:
    /// the result takes the larger register offset (swapping roles when `other`'s is larger),
    /// the other side's registers are aligned by the offset difference and max-merged, the
    /// offset is shifted if all registers became non-zero, and finally the other side's overflow
    /// register is re-added.
    pub fn fold(&mut self, other: &HyperLogLogCollector) {
        if self.register_offset < other.register_offset {
            // "Swap" so that we fold into the one with the higher offset.
            let mine = std::mem::replace(self, other.clone());
            self.fold_aligned(&mine);
        } else {
            self.fold_aligned(other);
        }
    }

    /// Body of `fold` once `self.register_offset >= other.register_offset`.
    fn fold_aligned(&mut self, other: &HyperLogLogCollector) {
        let my_offset = self.register_offset;
        let offset_diff = i32::from(my_offset) - i32::from(other.register_offset);
        let mut num_non_zero = self.num_non_zero;
        for (position, &byte_to_add) in other.registers.iter().enumerate() {
            num_non_zero += merge_and_store_byte_register(
                &mut self.registers[position],
                offset_diff,
                byte_to_add,
            );
        }
        if usize::from(num_non_zero) == NUM_BUCKETS {
            num_non_zero = self.decrement_buckets();
            self.register_offset = my_offset.wrapping_add(1);
        }
        self.num_non_zero = num_non_zero;
        // Adds the other side's max overflow and re-checks whether the offset must shift.
        self.add_position(other.max_overflow_register, other.max_overflow_value);
    }

    /// Druid's `estimateCardinality()` (dense path, `estimateDense`): the harmonic mean of
    /// `2^-(register + offset)` over the 2048 registers (the overflow register taking
    /// `max(register, overflow value)`), then Druid's `applyCorrection` (alpha, linear counting
    /// below 5120, `2^64` large-range correction). Unit: distinct values (not rounded). `0.0`
    /// for an empty collector; `f64::INFINITY` past `2^64`.
    pub fn estimate(&self) -> f64 {
        let min_num = i32::from(self.register_offset);
        let overflow_value = i32::from(self.max_overflow_value);
        let overflow_position = usize::from(self.max_overflow_register >> 1);
        let is_upper_nibble = self.max_overflow_register & 1 == 0;

        let mut e = 0.0f64;
        let mut zero_count = 0i32;
        for (position, &register) in self.registers.iter().enumerate() {
            let upper = i32::from(register >> 4);
            let lower = i32::from(register & 0x0f);
            if overflow_value != 0 && position == overflow_position {
                let mut upper_nibble = upper + min_num;
                let mut lower_nibble = lower + min_num;
                if is_upper_nibble {
                    upper_nibble = upper_nibble.max(overflow_value);
                } else {
                    lower_nibble = lower_nibble.max(overflow_value);
                }
                e += inv_pow2(upper_nibble) + inv_pow2(lower_nibble);
                // Druid tests the already-shifted values against 0xf0 / 0x0f; kept verbatim.
                zero_count +=
                    i32::from(upper_nibble & 0xf0 == 0) + i32::from(lower_nibble & 0x0f == 0);
            } else {
                // `MIN_NUM_REGISTER_LOOKUP[minNum][register]` and `NUM_ZERO_LOOKUP[register]`.
                e += inv_pow2(upper + min_num) + inv_pow2(lower + min_num);
                zero_count += i32::from(upper == 0) + i32::from(lower == 0);
            }
        }
        apply_correction(e, zero_count)
    }

    /// Druid's `estimateCardinalityRound()`: `Math.round(estimateCardinality())`, i.e. rounded
    /// half up to an `i64` (saturating: `i64::MAX` for an infinite estimate).
    pub fn estimate_rounded(&self) -> i64 {
        // Estimates are never negative, where `f64::round` (half away from zero) equals Java's
        // `Math.round` (half up). `as` saturates like Java's cast of infinity.
        self.estimate().round() as i64
    }

    /// Druid's `toByteArray()` (version 1, big-endian fields):
    ///
    /// * fewer than 128 non-zero registers: sparse, `7 + 3 * num_non_zero` bytes, one entry per
    ///   non-zero register byte (`u16` index + 7, byte), zero-padded at the end as Druid does;
    /// * otherwise dense, 1031 bytes.
    ///
    /// An empty collector is the 7-byte header `[1, 0, 0, 0, 0, 0, 0]`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let sparse = self.num_non_zero < DENSE_THRESHOLD;
        let len = if sparse {
            HEADER_NUM_BYTES + 3 * usize::from(self.num_non_zero)
        } else {
            NUM_BYTES_FOR_DENSE_STORAGE
        };
        let mut out = Vec::with_capacity(len);
        out.push(VERSION);
        out.push(self.register_offset);
        out.extend_from_slice(&self.num_non_zero.to_be_bytes());
        out.push(self.max_overflow_value);
        out.extend_from_slice(&self.max_overflow_register.to_be_bytes());
        if sparse {
            for (i, &byte) in self.registers.iter().enumerate() {
                if byte != 0 {
                    // i < 1024, so i + 7 fits in u16.
                    let position = (i + HEADER_NUM_BYTES) as u16;
                    out.extend_from_slice(&position.to_be_bytes());
                    out.push(byte);
                }
            }
            out.resize(len, 0);
        } else {
            out.extend_from_slice(&self.registers[..]);
        }
        out
    }

    /// Reads a collector written by Druid's `toByteArray` (or by [`to_bytes`](Self::to_bytes)).
    ///
    /// Accepted, by length as Druid's `makeCollector` dispatches:
    /// * 0 bytes: an empty collector (Druid's `fold` ignores empty buffers);
    /// * 1031 bytes: version 1 dense;
    /// * `7 + 3m` bytes (length ≡ 1 mod 3): version 1 sparse. Entries with a zero register byte
    ///   are padding and skipped; others must point into the payload (`7..1031`).
    ///
    /// The version byte must be 1 (0 is tolerated: Druid can leave it zeroed after densifying a
    /// padded sparse buffer). The non-zero register count is recomputed from the registers.
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] for version 0 layouts (length ≡ 0 mod 3 or 1027, not
    /// supported), any other length, a register offset or overflow value above 64, an overflow
    /// register ≥ 2048, or a sparse position outside the payload. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SketchError> {
        if bytes.is_empty() {
            return Ok(Self::new());
        }
        let len = bytes.len();
        let dense = len == NUM_BYTES_FOR_DENSE_STORAGE;
        if !dense && (len.is_multiple_of(3) || len == 1027) {
            return Err(SketchError::InvalidBytes(format!(
                "hyperUnique: {len} bytes is a version 0 HyperLogLogCollector, which is not supported"
            )));
        }
        if len < HEADER_NUM_BYTES || (!dense && !(len - HEADER_NUM_BYTES).is_multiple_of(3)) {
            return Err(SketchError::InvalidBytes(format!(
                "hyperUnique: {len} bytes is neither a dense (1031) nor a sparse (7 + 3m) version 1 collector"
            )));
        }
        let version = bytes[0];
        if version != VERSION && version != 0 {
            return Err(SketchError::InvalidBytes(format!(
                "hyperUnique: unknown version byte {version}"
            )));
        }
        let register_offset = bytes[1];
        let max_overflow_value = bytes[4];
        let max_overflow_register = u16::from_be_bytes([bytes[5], bytes[6]]);
        if register_offset > MAX_POSITION {
            return Err(SketchError::InvalidBytes(format!(
                "hyperUnique: register offset {register_offset} > {MAX_POSITION}"
            )));
        }
        if max_overflow_value > MAX_POSITION {
            return Err(SketchError::InvalidBytes(format!(
                "hyperUnique: max overflow value {max_overflow_value} > {MAX_POSITION}"
            )));
        }
        if usize::from(max_overflow_register) >= NUM_BUCKETS {
            return Err(SketchError::InvalidBytes(format!(
                "hyperUnique: max overflow register {max_overflow_register} >= {NUM_BUCKETS}"
            )));
        }

        let mut registers = Box::new([0u8; NUM_BYTES_FOR_BUCKETS]);
        let payload = &bytes[HEADER_NUM_BYTES..];
        if dense {
            registers.copy_from_slice(payload);
        } else {
            for entry in payload.chunks_exact(3) {
                let value = entry[2];
                if value == 0 {
                    continue; // zero padding written by Druid's toByteBuffer
                }
                let position = usize::from(u16::from_be_bytes([entry[0], entry[1]]));
                if !(HEADER_NUM_BYTES..NUM_BYTES_FOR_DENSE_STORAGE).contains(&position) {
                    return Err(SketchError::InvalidBytes(format!(
                        "hyperUnique: sparse position {position} outside the register payload"
                    )));
                }
                registers[position - HEADER_NUM_BYTES] = value;
            }
        }
        let num_non_zero = registers
            .iter()
            .map(|&b| u16::from(b & 0xf0 != 0) + u16::from(b & 0x0f != 0))
            .sum();
        Ok(Self {
            register_offset,
            num_non_zero,
            max_overflow_value,
            max_overflow_register,
            registers,
        })
    }
}

/// Druid's `mergeAndStoreByteRegister`: max-merges one byte (two registers) of a collector whose
/// offset is `offset_diff` lower; returns how many registers went from zero to non-zero.
fn merge_and_store_byte_register(current: &mut u8, offset_diff: i32, byte_to_add: u8) -> u16 {
    if byte_to_add == 0 {
        return 0;
    }
    let curr_val = *current;
    let upper_nibble = i32::from(curr_val & 0xf0);
    let lower_nibble = i32::from(curr_val & 0x0f);
    // Subtract the offset difference so that the nibbles align.
    let other_upper = i32::from(byte_to_add & 0xf0) - (offset_diff << 4);
    let other_lower = i32::from(byte_to_add & 0x0f) - offset_diff;
    let new_upper = upper_nibble.max(other_upper);
    let new_lower = lower_nibble.max(other_lower);
    *current = ((new_upper | new_lower) & 0xff) as u8;
    u16::from(upper_nibble == 0 && new_upper > 0) + u16::from(lower_nibble == 0 && new_lower > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `java.util.Random` (48-bit LCG), to replay Druid's tests that draw from `new Random(0)`.
    struct JavaRandom {
        seed: u64,
    }

    impl JavaRandom {
        const MULTIPLIER: u64 = 0x5_DEEC_E66D;
        const MASK: u64 = (1 << 48) - 1;

        fn new(seed: i64) -> Self {
            Self {
                seed: (seed as u64 ^ Self::MULTIPLIER) & Self::MASK,
            }
        }

        fn next(&mut self, bits: u32) -> i32 {
            self.seed = (self.seed.wrapping_mul(Self::MULTIPLIER).wrapping_add(0xB)) & Self::MASK;
            (self.seed >> (48 - bits)) as u32 as i32
        }

        fn next_long(&mut self) -> i64 {
            (i64::from(self.next(32)) << 32).wrapping_add(i64::from(self.next(32)))
        }
    }

    /// Guava `Hashing.murmur3_128().hashLong(v).asBytes()`: the hash of the 8 little-endian bytes.
    fn hash_long(v: i64) -> [u8; 16] {
        murmur3_128_guava(&v.to_le_bytes())
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("test vector is base64")
    }

    /// Druid test helper `fillBuckets`: adds `offset` to every bucket for each offset in range.
    fn fill_buckets(c: &mut HyperLogLogCollector, start: u8, end: u8) {
        for offset in start..=end {
            for bucket in 0..NUM_BUCKETS as u16 {
                c.add_position(bucket, offset);
            }
        }
    }

    /// Druid test helper `makeCollectorBuffer(offset, initialBytes, remainingBytes)`.
    fn make_collector_buffer(offset: u8, initial: &[u8], remaining: u8) -> Vec<u8> {
        let nnz = |b: u8| u16::from(b & 0x0f != 0) + u16::from(b & 0xf0 != 0);
        let mut num_non_zero: u16 = initial.iter().map(|&b| nnz(b)).sum();
        num_non_zero += (NUM_BYTES_FOR_BUCKETS - initial.len()) as u16 * nnz(remaining);
        let mut buf = vec![VERSION, offset];
        buf.extend_from_slice(&num_non_zero.to_be_bytes());
        buf.extend_from_slice(&[0, 0, 0]);
        buf.extend_from_slice(initial);
        buf.resize(NUM_BYTES_FOR_DENSE_STORAGE, remaining);
        buf
    }

    fn collector(bytes: &[u8]) -> HyperLogLogCollector {
        HyperLogLogCollector::from_bytes(bytes).expect("valid collector bytes")
    }

    #[test]
    fn cardinality_hashing_follows_druid() {
        // hashUnencodedChars hashes UTF-16LE code units (surrogate pairs as two units).
        let mut a = HyperLogLogCollector::new();
        let mut scratch = Vec::new();
        a.add_unencoded_chars("a\u{1F600}", &mut scratch);
        let mut b = HyperLogLogCollector::new();
        b.add_hash(&murmur3_128_guava(&[0x61, 0, 0x3d, 0xd8, 0x00, 0xde]));
        assert_eq!(a, b);
        assert_eq!(f64_bits_java(f64::NAN), 0x7ff8_0000_0000_0000);
        assert_eq!(f64_bits_java(1.0), 0x3ff0_0000_0000_0000);
        let mut c = HyperLogLogCollector::new();
        for i in 0..1000 {
            c.add_unencoded_chars(&format!("user-{i}"), &mut scratch);
            c.add_long(i);
        }
        let e = c.estimate();
        assert!((1900.0..2100.0).contains(&e), "{e}");
    }

    #[test]
    fn ascii_utf16_murmur_is_murmur_of_the_widened_bytes() {
        let text = "user-12345 The quick brown fox jumps over the lazy dog #en.wikipedia";
        for end in 0..=text.len() {
            for start in [0, 1, 3, 7] {
                let s = &text[start.min(end)..end];
                let widened: Vec<u8> = s.bytes().flat_map(|b| [b, 0]).collect();
                assert_eq!(
                    murmur3_128_ascii_utf16(s.as_bytes()),
                    murmur3_128_guava(&widened),
                    "{s:?}"
                );
            }
        }
    }

    #[test]
    fn murmur3_matches_guava_known_values() {
        // Guava Murmur3Hash128Test.testKnownValues (seed 0 cases): (h1, h2) little-endian.
        let cases: [(&str, u64, u64); 2] = [
            ("hell", 0x6299_4269_3e10_f867, 0x92db_0b82_baeb_5347),
            (
                "The quick brown fox jumps over the lazy dog",
                0xe34b_bc7b_bc07_1b6c,
                0x7a43_3ca9_c49a_9347,
            ),
        ];
        for (input, h1, h2) in cases {
            let mut expected = [0u8; 16];
            expected[..8].copy_from_slice(&h1.to_le_bytes());
            expected[8..].copy_from_slice(&h2.to_le_bytes());
            assert_eq!(murmur3_128_guava(input.as_bytes()), expected, "{input}");
        }
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testEstimation` — `new Random(0L)`, values
    /// `fn.hashLong(random.nextLong())`, estimate checked after `i + 1` values when `i` is in
    /// `valsToCheck`, compared with delta 0.0 in Druid.
    #[test]
    fn druid_golden_test_estimation() {
        let vals_to_check = [
            10, 20, 50, 100, 1000, 2000, 5000, 10000, 20000, 50000, 100_000, 1_000_000, 2_000_000,
        ];
        let expected = [
            11.029647221949576,
            21.108407720752034,
            51.64575281885815,
            100.42231726408892,
            981.8579991802412,
            1943.1337257462792,
            4946.192042635218,
            9935.088157579434,
            20366.1486889433,
            49433.56029693898,
            100615.26273314281,
            980831.624899156, // 980831.624899156000 in Druid's source
            1982408.2608981386,
        ];
        let mut random = JavaRandom::new(0);
        let mut c = HyperLogLogCollector::new();
        let mut idx = 0;
        for i in 0..vals_to_check[vals_to_check.len() - 1] {
            c.add_hash(&hash_long(random.next_long()));
            if i == vals_to_check[idx] {
                assert_eq!(c.estimate(), expected[idx], "after {} values", i + 1);
                idx += 1;
            }
        }
        assert_eq!(idx + 1, expected.len());
        assert_eq!(c.estimate(), expected[idx]);
        // The same values survive a to_bytes/from_bytes round trip.
        let back = collector(&c.to_bytes());
        assert_eq!(back, c);
        assert_eq!(back.estimate(), expected[idx]);
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testFoldOrder` — four base64 collectors from
    /// Druid, folded in every order, give overflow value 29 at register 366 and an estimate of
    /// 1.0429189446653817E7 (delta 1).
    #[test]
    fn druid_golden_test_fold_order() {
        let objects = [
            "AQcH/xYEMXOjRTVSQ1NXVENEM1RTUlVTRDI1aEVnhkOjNUaCI2MkU2VVhVNkNyVTa4NEYkS0kjZYU1RDdEYzUjglNTUzVFM0NkU3ZFUjOVJCdlU0N2QjRDRUV1MyZjNmVDOUM2RVVFRzhnUzVXY1R1RHUnNziURUdmREM0VjVEQmU0aEInZYNzNZNVRFgzVFNolSJHNIQ3QklEZlNSNoNTJXpDk1dFWjJGNYNiQzQkZFNEYzc1NVhSczM2NmJDZlc3JJRCpVNiRlNEI3dmU1ZGI0Q1RCMhNFZEJDZDYyNFOCM3U0VmRlVlNIRVQ4VVw1djNDVURHVSaFU0VEY0U1JFNIVCYlVEJWM2NWU0eURDOjQ6YyNTYkZjNUVjR1ZDdnVkMzVHZFpjMzlmNEFHM0dHJlRYTHSEQjVZVVZkVVIzIjg2SUU0NSM0VFNDNCdGVlQkhBNENCVTZGZEVlxFQyQ0NYWkUmVUJUYzRlNqg4NVVTNThEJkRGNDNUNFSEYmgkR0dDR1JldCNhVEZGRENGc1NDRUNER3WJRTRHQ4JlOYZoJDVVVVMzZSREZ1Q1UjSHNkdUMlU0ODIzZThSNmNDNjQ1o2I0YiRGYyZkNUJYVEMyN2QpQyMkc2VTE4U2VCNHZFRDNTh0IzI2VFNTMlUkNGMlKTRCIyR3QiQzFUNkRTdDM6RDRFI3VyVlcyWCUlQ0YjNjU2Q2dEVFNTRyRlI7VElHVTVVNGk0JHJTQzQkQyVlV0NCVlRkhWYkQ0RVaDNYdFZHWEWFJEYpM0QjNjNVUzNCVzVkgzZGFzQkRZUzN2U1dUFGVWZTUzVUREZDciZEVVYVNjeCU0ZDdEhzIpU2RTOFRUQkWlk1OFRUVTN1MkZSM3ZFc1VDNnUmc2NKNUaUIzd3M0RWxEZTsiNENLVHU0NFUmQ2RWRFdCNUVENFkxZCEnRLQkNEU0RVNmVDQjl9ZmNkM1QVM0MzQkUjJlVHRkNEVWlENDVUIlUvRkM0RVY1UzY6OGVHVCRDIzRUUlUjM2RDWSVkVIU1U1ZiVFNlNDhTN1VWNTVEZ2RzNzVDQlY0ZUNENUM5NUdkRDJGYzRCUzIjRGR4UmJFI4GDRTUiQ0ZUhVY1ZEYoZSRoVDYnREYkQ1SUU0RWUycjp2RZIySVZkUmZDREZVJGQyVEc1JElBZENEU2VEQlVUUnNDQziLRTNidmNjVCtjRFU2Q0SGYzVHVpGTNoVDxFVSMlWTJFQyRJdV1EI3RDloYyNFQ0c1NVY0ZHVEY0dkM2QkQyVDVUVTNFUyamMUdSNrNz0mlFlERzZTSGhFRjVGM3NWU2NINDI2U1RERUhjY4FHNWNTVTV1U0U2I0VXNEZERWNDNUSjI1WmMmQ4U=",
            "AQgH+BUFUEUrZVRjM2IjMzJRESMlUnlTJjEjRhRlNBEyMSUpaGJTMjRCIzMTNCRENRdxNiNEZCQzNERYMiAyIiQmUTI+MhEzV1RWJoMjQjIySDN0QiYDUjUzNjRUVEYyQleDEiUmg0ERRjIjIzJUQjMxNlJGUTNDJFNTRzJiE1M0RjQzUzIiFDUmMjIzJWVCNENTIRJVODUzEkIVMhFEIjM0MkMyIRRCNFNxQyNCQ2UzOFQiJSM0EzU1V1M2EjhUVENDclZzImEiMTJBQlQiJCgyIyKkJSUlNBNDE2M3QSIyMicjMlJEUhJDJFQjJ0VSQ0QyYSFhZSNlQ4REUzVFIlOFRHIkYUJEM8RVMkMiMEczQwMlE1EkAlNiQlhCNkISRVI0ITUjRDU1JVNlK1QyGGRHQVM0NUVHQ1MkMyQoIzMzFCFUI0IhU1OIhCIlZUQVIUMyYzMlMUZ0RCKEIigUIlQ0QkQTM0MkM0QyJkUSM2I2tHJDUTQ0RBQ0YyNlUxUzIiIiMUiSMzUlJDNDQjM0ITQyNIM1MyNWM0MDOTZYVDRWIiZhMzc0NCJ0Q0NDZEMUElMyRyMmUhNiMkIZNjMkEyRTIzYkMzNUODUTNDJVM0ZTQjFCJCNWSTUlEiNCM1U2FCZUJzMVMyLjNkMhITVDEjIYMzNiVmIlO1VTMjMiVDQ2NTJFYyE0Q2IjRDN2IjRTRUVTFUVEYVKBVSMVJSFE0zOXNSJIqVElMVM4MiZEFSMhRlJEJUZnMycmQmQyJDl1JzVjMXQ0MzMjE1VUI1JDJUQyYRQ2JVZzQUJDM2IyInEkY1QiZTJEMRMiMxRVNEUjJUNkJHNSQiNCVCIyIjJUQlEhNUdFUhQzgkcSZaJUVUM0YiJEM2SjczUUIUIlQiM0RiQkIzZhRBJSRzQ0ZUI00UUSRSQlQmMkNINzODQhJFRTZ0FRQ3QTRhIzFTJFRBMmMzQzQhZENUMiIlV2VEMiNFRWQ1F1IyFXRSUyRTMqZ3I0YyhUNEJRMjISZRc2NDOEIjIxVGVWIXYyMiNCJBFDQSMhIzMjVFIDElgyJCUyVFgkRSQzIjJFQlNWRTQWMmQzFFOiMzVTZGMxNFZUNmIjRjETNUNURERTQjYVIkEzNEEyNDNTVUJSVzVkMjEyUlMjQ0RGgyFFNUQhRGMmRUQ2ZSOFETUYNlZCUhRiU2QhVUUiIlJDRjMhRVJDZxNSRTNBRCEoI0FGNUVRE0VFOGdCRDM2QkJCFSQhMxITRoE0VFIzVWUiUTNkRhNDMiMmIzRDQSNTFDoldaJDcnNjkSMJg3IkIiRENSQmciUhY2NFQ4RSNoJENkWDMmVCJGMxQjJGJScyNTJDVDNEEiZSMzQyIyVGRTNEIUw=",
            "AQgH+hQAFyMzlFVXNCNlRxRUYlRUUUZCMnRFJiR0WTgyZiRJZzRFQkVTVVVWc2ZFMlY1QkIxYUQTI0JDY1YkNEVENGUuQTRiNkQ0VUEzNkKUKLSIVkUhNiZURnRFMzcjVEBTdjVVVCIzJDM0hjc0RDVlVjRqMjJVZTNSM0QmQyMTRlNzVCNERFQyMxNBZHMiUSdYIUUjNlVjNzRyYWFHRHI3hKMnYnhFNCZOdlNUZBM0Q0clNTVBiEQRMUQzNSNVQ0IkEmZYNzIyNkRSUik2VBOVRCRDg0IilEMlcjRJMkJDSjRCJURTVDJBMmRTVBM1YyRRMSQoRDV2YzRDVCUkQWFFNDYnQ0IkUzRjRkQ1dGI0VUYzRERCQ1I2dFNhREOUUjJDc0NTN0JFNUZJRGFpU1Q0QyJlNiMzNCZSKFQzYnNUWTMiRGMiRWdSQzMiQnQ0QSgjVUMiE0hRM1NVUiZVIlRkRVMzI2VkRjQWQ1YyRiZWNHQXQ0UllUMSVTJDQzMkWCQiRFglMzIzKEYzJSJFMyREVIQlVFFlYzMDQyVWUZNCQlM0NUJFIkWiNnREdEJDImNWJDOIcmKyQzc5VDVRQ3PVNjQzIkJTQ3FzMjMyRFVFVTUlNUZEMzEjI0Q0M0Y2U1JTREQjIhZScUJjQkYhFRJFQyI0pTVmFTVlMkJXNDI1U3dFZkR2U0NCVRQyRih0UkIhckRUY0ZHSG00EiJUdVIxVjVGNnUVZCxEQkNTQjQ0IkZDciIkODYxM1MzRZRHQxVEZHZWJFIzRRZjVDNBMzI1Q1FEhUMiI0NkJWJWJDJzYlQiRSQjRoRiRhJTIjNSRVJEM1MiYmUiNBkjFkczRWU1SURIJUVDRFQ0QyZCUlRENEImE2FDQxRjlEdTI3RSNEU3RGJyWDNVMTVJNDM1QkJFQmNWRXUlcxNEQzNTGCtDUlNDMzMzY2VlcUQlaUIyZVMzA3NFM1NDc0JjZDUkQiFDY3QUczQzUkVDQjMiUWQ0NEQyNRVTMRJFM2RUMZNSQkQ0MkIiUgGCUkRig1UiElQkdDJFJDciVGIxMjQzI1UlNlRTM1JkRDc+RSM0VFUzMjWCU0RDMxJyJVJGI1VTEUQyM1R0I1c0NFNTM3MhIlUkNFIlZGNURkVURyNIVCMyYzQmQjITRkVHQ2NINGQ0Y0UW0icyUzMydEVBJVJIJENkUjRVIjQSNVYnEzVYMzUmYzGVNFRiQk0iVTVCM0RjJSMyRWRSQkURJBR0M0NzhnRlM3IzQxMTRDJjM1UVUkJCNUQTVGQlEzN0VDMyM0MmO2QoQzNSVURhFEAkU2IldINHRUU00zNFJVQxUkZEcVMyJSJkQjKFNCNUOzIYJEHEUyKCQjJESSY=",
            "AQcH/x0BbjQ2JTpUlkdFRERHVDRkWDU0RGR1ejRURHZ6IzUqdJN1M1VFQiNHI1NTI0J1VHOGZYVFVTRIRJVkVmUolWVShERjSDRVMlRlJDU2VFh3UmR1Mjg3K0M2SUY0Q0ZUspNiJEdZMmc3YkxGSERGOGdjgzNRVGM1Q1UnN0RHU1Y0WWUzRWVEJSRSeGQ0RlNFJVVJU3YoQkdEQ2M2MiVFUyJWRUVWNmRkM0NkVER2WXNkR0QlNGNEVlYzZSS4RDMyVEQ1ckRTM0ZoMlQ2tURGQ0OFQ0ZiY1ZFNEajdXEjVSI6ZWSjNHVRRTRVMldzUjm0NGU0dlhESFRDM0IzVCYkdjdlJJRFVDaHEzUkRmNWOEVXZTM0U0VkREdSUjRHVVViVCVFVUN0RDNDkl01VHMoNVQzYlZFZmNVVUNDQ1VjUiQ2NTV0UzZVModSNEY4Zpc2JjhjiFJVUGM0SHI0UzRTU1R2R0d3VENUZSQzRUZlY4d0aGNkhTQzWVZFZTZkJ2NEZaVDU1alJWpFJpRGRnIlZUU1ZUR2M1NzOkVEMzVjZERiVlRYSEkmU4RLM0RTQ2Q2RjM3RTNhdVVEQzRXJUZTRmM1OEZTYyJkRGRjZDVTlDhSMzdXQiU1RFUiIoRpVGlXIjY1UVVjc0RDJDNSM0NVJTNkRUU1U0lDdEVXY2NGVVNJVmJJRTREVVNiMyVIQ3U6O0U0M0MzZFVVIzJmNERWJaJjikIlRXk1hFQ2NEU0RUN4UzdENEsVgzZFVidXUnU2VRZFRUQmZmRERCQ0ZER2Q3YnZFNlVpJUkzZVREKFWEUzVVMzYzQzQhfTYzQ0IlI5UoV0RGJCVXSDkyZCRSU3ITUkNoYzJUMkYzhlVVRTNyaDNmQzRDVVRjNkVUhEJyRBR2JlOEREVUU0RjY4Nkc3ZERGUyVDNFZGNFOTY3U1OKNlkjQy1TVlRTQ0M1REU2QhgzUzUzOWlWQ1Z3RTQzIzc7RXVkI0M4NCNYRVRGNEZbhFEyVJI0R1OUZEQ3VUVEQlU1NkNYJEYzdSQ0ZSNGeEWIVVU3KEVFY1RZQ0JSNEJFNFMyM0UzN0hHNTQjMlRGNkiEMyVjRFNVRXNkZGM2M4hENCMnU1VWQjNFRkO2VmO1RndEVzWTQiiHQ0NzM2clM4NjQxpjQjZEVTNEpEdlREJzc3OjZnRlNFNWJVNFeDokNCRmQ5NURJVUZSJyRDRXikVURVITZDNGW0ITNEOUQ0RUklZDQjYjVENURDRCRmRDU1hCY2VTR0RGIzJSZzlSczdTFJJkRlZyU1M1JTdVhDYhVFczQ0hTRIc0RCNDdUJEQxNlZEQ2ZEUiJJRFU3YzVGRER0R2ZlNFOTU1MyRGI0RzMkQ2Q=",
        ];
        let collectors: Vec<HyperLogLogCollector> = objects
            .iter()
            .map(|s| collector(&base64_decode(s)))
            .collect();
        let mut results = Vec::new();
        // All 24 permutations of the four collectors.
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    for d in 0..4 {
                        let order = [a, b, c, d];
                        let mut seen = [false; 4];
                        order.iter().for_each(|&i| seen[i] = true);
                        if seen.iter().any(|s| !s) {
                            continue;
                        }
                        let mut folded = HyperLogLogCollector::new();
                        for &i in &order {
                            folded.fold(&collectors[i]);
                        }
                        assert_eq!(folded.max_overflow_value, 29);
                        assert_eq!(folded.max_overflow_register, 366);
                        assert!((folded.estimate() - 1.0429189446653817E7).abs() <= 1.0);
                        results.push(folded);
                    }
                }
            }
        }
        assert_eq!(results.len(), 24);
        assert!(results.windows(2).all(|w| w[0] == w[1]));
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testFoldWithDifferentOffsets1`.
    #[test]
    fn druid_golden_fold_with_different_offsets_1() {
        let bigger = collector(&make_collector_buffer(1, &[0x00], 0x11));
        let smaller = collector(&make_collector_buffer(0, &[0x20], 0x00));
        for order in [[&bigger, &smaller], [&smaller, &bigger]] {
            let mut c = HyperLogLogCollector::new();
            c.fold(order[0]);
            c.fold(order[1]);
            let out = c.to_bytes();
            assert_eq!(out.len(), NUM_BYTES_FOR_DENSE_STORAGE);
            assert_eq!(out[0], VERSION);
            assert_eq!(out[1], 1);
            assert_eq!(u16::from_be_bytes([out[2], out[3]]), 2047);
            assert_eq!(out[7], 0x10);
            assert!(out[8..].iter().all(|&b| b == 0x11));
        }
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testFoldWithDifferentOffsets2`.
    #[test]
    fn druid_golden_fold_with_different_offsets_2() {
        let bigger = collector(&make_collector_buffer(1, &[0x01], 0x11));
        let smaller = collector(&make_collector_buffer(0, &[0x20], 0x00));
        for order in [[&bigger, &smaller], [&smaller, &bigger]] {
            let mut c = HyperLogLogCollector::new();
            c.fold(order[0]);
            c.fold(order[1]);
            let out = c.to_bytes();
            assert_eq!(out.len(), HEADER_NUM_BYTES);
            assert_eq!(out[1], 2);
            assert_eq!(u16::from_be_bytes([out[2], out[3]]), 0);
        }
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testFoldWithUpperNibbleTriggersOffsetChange`.
    #[test]
    fn druid_golden_fold_with_upper_nibble_triggers_offset_change() {
        // Druid fills both arrays with 0x11, header included, which leaves an overflow value of
        // 17 at "register" 0x1111 (not a bucket, so never used by Druid's estimate; our reader
        // rejects registers >= 2048). Those header bytes are zeroed here; the asserted result
        // (offset 1, no non-zero register) is the same.
        let mut arr1 = vec![0x11u8; NUM_BYTES_FOR_DENSE_STORAGE];
        arr1[0] = VERSION;
        arr1[1] = 0;
        arr1[2..4].copy_from_slice(&2047u16.to_be_bytes());
        arr1[4..7].copy_from_slice(&[0, 0, 0]);
        arr1[HEADER_NUM_BYTES] = 0x01;
        let mut arr2 = vec![0x11u8; NUM_BYTES_FOR_DENSE_STORAGE];
        arr2[0] = VERSION;
        arr2[1] = 0;
        arr2[2..4].copy_from_slice(&2048u16.to_be_bytes());
        arr2[4..7].copy_from_slice(&[0, 0, 0]);
        let mut c = collector(&arr1);
        c.fold(&collector(&arr2));
        let out = c.to_bytes();
        assert_eq!(out[0], VERSION);
        assert_eq!(out[1], 1);
        assert_eq!(u16::from_be_bytes([out[2], out[3]]), 0);
        assert_eq!(out.len(), HEADER_NUM_BYTES);
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testSparseFoldWithDifferentOffsets1`.
    #[test]
    fn druid_golden_sparse_fold_with_different_offsets_1() {
        let bigger = collector(&make_collector_buffer(1, &[0x11, 0x10], 0x11));
        let sparse = collector(&make_collector_buffer(0, &[0x00, 0x02], 0x00)).to_bytes();
        assert_eq!(sparse.len(), HEADER_NUM_BYTES + 3);
        let sparse = collector(&sparse);
        for order in [[&bigger, &sparse], [&sparse, &bigger]] {
            let mut c = HyperLogLogCollector::new();
            c.fold(order[0]);
            c.fold(order[1]);
            let out = c.to_bytes();
            assert_eq!(out, vec![VERSION, 2, 0, 0, 0, 0, 0]);
        }
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testMaxOverflow` and `testMergeMaxOverflow`.
    #[test]
    fn druid_golden_max_overflow() {
        let mut c = HyperLogLogCollector::new();
        c.add_position(23, 16);
        assert_eq!((c.max_overflow_register, c.max_overflow_value), (23, 16));
        assert_eq!((c.register_offset, c.num_non_zero), (0, 0));
        c.add_position(56, 17);
        assert_eq!((c.max_overflow_register, c.max_overflow_value), (56, 17));
        c.add_position(43, 16);
        assert_eq!((c.max_overflow_register, c.max_overflow_value), (56, 17));
        assert_eq!((c.register_offset, c.num_non_zero), (0, 0));

        let mut c = HyperLogLogCollector::new();
        fill_buckets(&mut c, 0, 49);
        c.add_position(23, 65);
        let mut other = HyperLogLogCollector::new();
        fill_buckets(&mut other, 0, 43);
        other.add_position(47, 67);
        c.fold(&other);
        assert_eq!((c.max_overflow_register, c.max_overflow_value), (47, 67));
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testHighBits`.
    #[test]
    fn druid_golden_high_bits() {
        let mut c = HyperLogLogCollector::new();
        fill_buckets(&mut c, 0, 49);
        let zero_hash = [0u8; 16];
        c.add_hash(&zero_hash);
        assert!((c.estimate() - 8.508968579344168E17).abs() <= 1000.0);
        fill_buckets(&mut c, 0, 63);
        c.add_hash(&zero_hash);
        assert_eq!(c.estimate(), f64::INFINITY);
        assert_eq!(c.estimate_rounded(), i64::MAX);
    }

    /// Golden: Druid `HyperLogLogCollectorTest.testRegisterSwapWithSparse`.
    #[test]
    fn druid_golden_register_swap_with_sparse() {
        let mut c = HyperLogLogCollector::new();
        for i in 1..NUM_BUCKETS as u16 {
            c.add_position(i, 1);
            assert_eq!(c.num_non_zero, i);
            assert_eq!(c.register_offset, 0);
        }
        let est = collector(&c.to_bytes()).estimate();
        assert!((est - 15615.219683654448).abs() <= 1e-5, "{est}");
        let mut hash = [0u8; 16];
        hash[0] = 1; // bucket 0, positionOf1 = 1
        c.add_hash(&hash);
        assert_eq!((c.num_non_zero, c.register_offset), (0, 1));
        let bytes = c.to_bytes();
        assert_eq!(bytes.len(), HEADER_NUM_BYTES);
        assert_eq!(collector(&bytes).estimate(), 0.0);

        let mut dense = HyperLogLogCollector::new();
        for i in 0..NUM_BUCKETS as u16 - 1 {
            dense.add_position(i, 1);
        }
        assert_eq!(usize::from(dense.num_non_zero), NUM_BUCKETS - 1);
        // Druid only checks that this fold works (storage stays dense in memory). The empty
        // offset-1 side wins the swap and the offset-0 registers (all 1) align to nothing.
        dense.fold(&collector(&bytes));
        assert_eq!((dense.register_offset, dense.num_non_zero), (1, 0));
    }

    /// Druid `HyperLogLogCollectorTest.testFolding`: halves folded equal the whole, exactly
    /// (collector and estimate), for the sizes Druid checks.
    #[test]
    fn fold_two_halves_equals_whole() {
        let mut random = JavaRandom::new(0);
        for num_things in [10, 20, 50, 100, 1000, 2000] {
            let mut all = HyperLogLogCollector::new();
            let mut one_half = HyperLogLogCollector::new();
            let mut other_half = HyperLogLogCollector::new();
            for i in 0..num_things {
                let h = hash_long(random.next_long());
                all.add_hash(&h);
                if i % 2 == 0 {
                    one_half.add_hash(&h);
                } else {
                    other_half.add_hash(&h);
                }
            }
            let mut folded = HyperLogLogCollector::new();
            folded.fold(&one_half);
            assert_eq!(folded, one_half);
            folded.fold(&collector(&other_half.to_bytes()));
            assert_eq!(folded, all);
            assert_eq!(folded.estimate(), all.estimate());
        }
    }

    /// Past a register-offset shift the folded collector may keep a value in its overflow
    /// register that the single collector stored in a register (Druid's `fold` only re-adds an
    /// overflow when a larger one arrives), so only the estimates are compared.
    #[test]
    fn fold_two_halves_after_offset_shift_estimates_equal() {
        let mut random = JavaRandom::new(0);
        let mut all = HyperLogLogCollector::new();
        let mut one_half = HyperLogLogCollector::new();
        let mut other_half = HyperLogLogCollector::new();
        for i in 0..100_000 {
            let h = hash_long(random.next_long());
            all.add_hash(&h);
            if i % 2 == 0 {
                one_half.add_hash(&h);
            } else {
                other_half.add_hash(&h);
            }
        }
        assert!(all.register_offset > 0);
        let mut folded = HyperLogLogCollector::new();
        folded.fold(&one_half);
        folded.fold(&other_half);
        assert_eq!(folded.register_offset, all.register_offset);
        assert_eq!(folded.estimate(), all.estimate());
    }

    #[test]
    fn estimate_distinct_strings_within_a_few_percent() {
        for (n, tolerance) in [
            (10u32, 0.10),
            (1000, 0.03),
            (100_000, 0.03),
            (1_000_000, 0.03),
        ] {
            let mut c = HyperLogLogCollector::new();
            for i in 1..=n {
                c.add_str(&i.to_string());
            }
            // Adding the same values again changes nothing.
            let before = c.clone();
            for i in 1..=n.min(1000) {
                c.add_str(&i.to_string());
            }
            assert_eq!(c, before);
            let est = c.estimate();
            let err = (est - f64::from(n)).abs() / f64::from(n);
            assert!(err <= tolerance, "n={n} estimate={est} err={err}");
            assert_eq!(c.estimate_rounded(), est.round() as i64);
        }
    }

    #[test]
    fn fold_disjoint_string_halves_matches_whole() {
        let mut whole = HyperLogLogCollector::new();
        let mut a = HyperLogLogCollector::new();
        let mut b = HyperLogLogCollector::new();
        for i in 0..200_000u32 {
            let s = format!("user-{i}");
            whole.add_str(&s);
            if i < 100_000 {
                a.add_str(&s)
            } else {
                b.add_str(&s)
            }
        }
        a.fold(&b);
        assert_eq!(a, whole);
        let err = (a.estimate() - 200_000.0).abs() / 200_000.0;
        assert!(err < 0.03, "{err}");
    }

    #[test]
    fn bytes_round_trip_sparse_and_dense() {
        let empty = HyperLogLogCollector::new();
        assert_eq!(empty.to_bytes(), vec![1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(empty.estimate(), 0.0);
        assert_eq!(collector(&empty.to_bytes()), empty);
        assert_eq!(collector(&[]), empty);

        for n in [1u32, 5, 60, 127, 128, 200, 5000] {
            let mut c = HyperLogLogCollector::new();
            for i in 0..n {
                c.add_str(&format!("v{i}"));
            }
            let bytes = c.to_bytes();
            if c.num_non_zero < DENSE_THRESHOLD {
                assert_eq!(
                    bytes.len(),
                    HEADER_NUM_BYTES + 3 * usize::from(c.num_non_zero)
                );
            } else {
                assert_eq!(bytes.len(), NUM_BYTES_FOR_DENSE_STORAGE);
            }
            let back = collector(&bytes);
            assert_eq!(back, c);
            assert_eq!(back.to_bytes(), bytes);
            assert_eq!(back.estimate(), c.estimate());
        }
    }

    #[test]
    fn sparse_layout_golden_one_value() {
        // One value: the hash of "a" picks one bucket and one register value; the sparse form is
        // the header (count 1) and one entry (byte index + 7, register byte).
        let hash = murmur3_128_guava(b"a");
        let bucket = u16::from_be_bytes([hash[14], hash[15]]) & 0x7ff;
        let mut c = HyperLogLogCollector::new();
        c.add_str("a");
        let bytes = c.to_bytes();
        let index = bucket / 2 + HEADER_NUM_BYTES as u16;
        let register = c.registers[usize::from(bucket / 2)];
        let mut expected = vec![1, 0, 0, 1, 0, 0, 0];
        expected.extend_from_slice(&index.to_be_bytes());
        expected.push(register);
        assert_eq!(bytes, expected);
        if bucket.is_multiple_of(2) {
            assert_eq!(register & 0x0f, 0);
        } else {
            assert_eq!(register & 0xf0, 0);
        }
        // A single distinct value estimates ~1 (linear counting: 2048 ln(2048/2047)).
        assert!((c.estimate() - 1.000244).abs() < 1e-3);
    }

    #[test]
    fn sparse_padding_when_both_nibbles_set() {
        let mut c = HyperLogLogCollector::new();
        c.add_position(10, 3); // byte 5, upper nibble
        c.add_position(11, 2); // byte 5, lower nibble
        let bytes = c.to_bytes();
        // 7 + 3 * 2 bytes: one real entry then one all-zero padding entry (as Druid).
        assert_eq!(bytes, vec![1, 0, 0, 2, 0, 0, 0, 0, 12, 0x32, 0, 0, 0]);
        assert_eq!(collector(&bytes), c);
    }

    #[test]
    fn hostile_bytes_are_rejected_without_panic() {
        assert!(HyperLogLogCollector::from_bytes(&[1]).is_err());
        assert!(HyperLogLogCollector::from_bytes(&[1, 0, 0, 0, 0, 0]).is_err()); // 6 = v0 length
        assert!(HyperLogLogCollector::from_bytes(&[0u8; 1027]).is_err()); // v0 dense
        assert!(HyperLogLogCollector::from_bytes(&[1, 0, 0, 0, 0, 0, 0, 1]).is_err());
        // Sparse entry pointing into the header / past the end.
        assert!(HyperLogLogCollector::from_bytes(&[1, 0, 0, 1, 0, 0, 0, 0, 3, 1]).is_err());
        assert!(HyperLogLogCollector::from_bytes(&[1, 0, 0, 1, 0, 0, 0, 4, 7, 1]).is_err());
        // Bad header fields.
        assert!(HyperLogLogCollector::from_bytes(&[1, 200, 0, 0, 0, 0, 0]).is_err());
        assert!(HyperLogLogCollector::from_bytes(&[1, 0, 0, 0, 99, 0, 0]).is_err());
        assert!(HyperLogLogCollector::from_bytes(&[1, 0, 0, 0, 20, 8, 0]).is_err());
        assert!(HyperLogLogCollector::from_bytes(&[7, 0, 0, 0, 0, 0, 0]).is_err());
        // Random garbage of many lengths: Ok or Err, never a panic; Ok values stay usable.
        let mut state = 0x1234_5678_9abc_def0u64;
        for len in 0..1200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8
                })
                .collect();
            if let Ok(mut c) = HyperLogLogCollector::from_bytes(&bytes) {
                let _ = c.estimate();
                c.add_str("x");
                let other = c.clone();
                c.fold(&other);
                let _ = c.to_bytes();
            }
        }
    }
}
