//! `BLOOM_FILTER(expr, numEntries)` and `BLOOM_FILTER_TEST(expr, filter)`: Druid's bloom
//! filters (`druid-bloom-filter` extension, `BloomKFilter`), byte-compatible with Druid's.
//!
//! A filter sized for `numEntries` values at a 5% false-positive rate has
//! `m = -n ln(0.05) / ln(2)^2` bits rounded up to whole 8-long (64-byte) blocks and
//! `k = max(1, round(m / n ln 2))` hash functions. A value's 64-bit hash is Hive's `Murmur3.hash64`
//! (seed 104729) of: a string's UTF-8 bytes; a long's 8 big-endian bytes (also booleans as 0/1
//! and timestamps as epoch ms); a double's `doubleToLongBits`; a float's 4-byte
//! `floatToIntBits`. Null (and an empty multi-value row) adds the hash of no bytes, as Druid's
//! aggregators do. The hash picks a block (`(h1 + h2) mod blocks`, flipped when negative) and
//! `k` bits inside it (`h1 + (i + 1) h2`), so a probe touches one cache line.
//!
//! `BLOOM_FILTER` returns the serialized filter (`COMPLEX<bloom>`: one byte `k`, a big-endian
//! int of long count, the longs big-endian; base64 in JSON results). `BLOOM_FILTER_TEST`
//! takes that base64 text (a literal, as Druid requires) or the bytes and answers whether the
//! value may be in the set; a filter that does not parse is an error.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BooleanBuilder};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Float32Type, Float64Type, Int64Type, TimeUnit};
use base64::Engine as _;
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::expressions::Literal;

use super::sketches::DRUID_TYPE_METADATA_KEY;

/// Druid's native type name of serialized bloom filters.
pub const BLOOM_TYPE: &str = "COMPLEX<bloom>";

const SEED: u64 = 104_729;
const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;
const BLOCK_LONGS: usize = 8;

fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn mix(k: u64) -> u64 {
    k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

/// Hive's `Murmur3.hash64(byte[])` (seed 104729): the 64-bit Murmur3 variant Druid's
/// `BloomKFilter` uses.
pub fn hash64(data: &[u8]) -> u64 {
    let mut hash = SEED;
    let mut blocks = data.chunks_exact(8);
    for b in &mut blocks {
        let k = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        hash ^= mix(k);
        hash = hash
            .rotate_left(27)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let k = tail
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, b)| acc ^ (u64::from(*b) << (8 * i)));
        hash ^= mix(k);
    }
    hash ^= data.len() as u64;
    fmix64(hash)
}

/// Hive's `Murmur3.hash64(long)`: [`hash64`] of the long's big-endian bytes.
fn hash64_long(v: i64) -> u64 {
    hash64(&v.to_be_bytes())
}

/// Hive's `Murmur3.hash64(int)`: [`hash64`] of the int's big-endian bytes.
fn hash64_int(v: i32) -> u64 {
    hash64(&v.to_be_bytes())
}

/// A Druid `BloomKFilter`.
#[derive(Debug, Clone, PartialEq)]
pub struct BloomKFilter {
    k: u8,
    bits: Vec<u64>,
}

impl BloomKFilter {
    /// An empty filter for `max_entries` values at 5% false positives (Druid's constructor).
    pub fn new(max_entries: u64) -> BloomKFilter {
        let n = max_entries.max(1) as f64;
        let ln2 = std::f64::consts::LN_2;
        // Druid's DEFAULT_FPP is the float 0.05f, widened to double for the logarithm.
        let num_bits = (-n * f64::from(0.05f32).ln() / (ln2 * ln2)) as i64;
        let k = ((num_bits as f64 / n * ln2).round() as i64).max(1);
        let longs = (num_bits as f64 / 64.0).ceil() as usize;
        let pad = BLOCK_LONGS - longs % BLOCK_LONGS;
        BloomKFilter {
            k: u8::try_from(k).unwrap_or(u8::MAX),
            bits: vec![0; longs + pad],
        }
    }

    /// The serialized form (Druid's `serialize`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + 8 * self.bits.len());
        out.push(self.k);
        out.extend_from_slice(&(self.bits.len() as i32).to_be_bytes());
        for w in &self.bits {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }

    /// Parses [`Self::to_bytes`] (Druid's `deserialize`).
    ///
    /// # Errors
    /// A message when the bytes are not a filter.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<BloomKFilter, String> {
        if bytes.len() < 5 {
            return Err(format!("{} bytes is too short", bytes.len()));
        }
        let k = bytes[0];
        let n = i32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        let Ok(n) = usize::try_from(n) else {
            return Err(format!("negative bitset length {n}"));
        };
        if k == 0 || n == 0 || n % BLOCK_LONGS != 0 || bytes.len() != 5 + 8 * n {
            return Err(format!(
                "{} bytes do not hold a filter of {n} longs and {k} hash functions",
                bytes.len()
            ));
        }
        let bits = bytes[5..]
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        Ok(BloomKFilter { k, bits })
    }

    /// The (word, bit) positions of a hash.
    fn positions(&self, hash: u64) -> impl Iterator<Item = (usize, u32)> + '_ {
        let h1 = hash as i32;
        let h2 = (hash >> 32) as i32;
        let mut first = h1.wrapping_add(h2);
        if first < 0 {
            first = !first;
        }
        let blocks = (self.bits.len() / BLOCK_LONGS) as i32;
        let base = ((first % blocks) as usize) * BLOCK_LONGS;
        (1..=i32::from(self.k)).map(move |i| {
            let mut combined = h1.wrapping_add((i + 1).wrapping_mul(h2));
            if combined < 0 {
                combined = !combined;
            }
            let word = base + (combined & 7) as usize;
            let bit = ((combined as u32) >> 3) & 63;
            (word, bit)
        })
    }

    fn add_hash(&mut self, hash: u64) {
        let positions: Vec<(usize, u32)> = self.positions(hash).collect();
        for (w, b) in positions {
            self.bits[w] |= 1u64 << b;
        }
    }

    fn test_hash(&self, hash: u64) -> bool {
        self.positions(hash)
            .all(|(w, b)| self.bits[w] & (1u64 << b) != 0)
    }

    /// ORs `other` in (Druid's `merge`).
    ///
    /// # Errors
    /// When the filters differ in size or hash functions.
    pub fn merge(&mut self, other: &BloomKFilter) -> std::result::Result<(), String> {
        if self.k != other.k || self.bits.len() != other.bits.len() {
            return Err("bloom filters of different sizes".into());
        }
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= b;
        }
        Ok(())
    }
}

/// The hashes of the values of `a` (one per row; `None` rows are nulls, hashed as no bytes).
fn hashes(a: &ArrayRef) -> Result<Vec<u64>> {
    let empty = hash64(&[]);
    Ok(match a.data_type() {
        DataType::Null => vec![empty; a.len()],
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => {
            let s = cast(a, &DataType::Utf8)?;
            s.as_string::<i32>()
                .iter()
                .map(|v| v.map_or(empty, |v| hash64(v.as_bytes())))
                .collect()
        }
        DataType::Float64 => a
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| {
                v.map_or(empty, |v| {
                    hash64_long(dolmen_sketch::hyper_unique::f64_bits_java(v))
                })
            })
            .collect(),
        DataType::Float32 | DataType::Float16 => {
            let f = cast(a, &DataType::Float32)?;
            f.as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map_or(empty, |v| hash64_int(java_float_bits(v))))
                .collect()
        }
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => {
            let ms = cast(a, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
            let l = cast(&ms, &DataType::Int64)?;
            l.as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map_or(empty, hash64_long))
                .collect()
        }
        dt if dt.is_integer() || dt == &DataType::Boolean => {
            let l = cast(a, &DataType::Int64)?;
            l.as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map_or(empty, hash64_long))
                .collect()
        }
        DataType::List(_) => {
            // A multi-value row adds each value; an empty or null row adds no bytes.
            let l = a.as_list::<i32>();
            let mut out = Vec::new();
            for r in 0..l.len() {
                let values = if l.is_valid(r) {
                    hashes(&l.value(r))?
                } else {
                    Vec::new()
                };
                if values.is_empty() {
                    out.push(empty);
                } else {
                    out.extend(values);
                }
            }
            out
        }
        other => return exec_err!("BLOOM_FILTER does not take values of type {other}"),
    })
}

/// Java's `Float.floatToIntBits` (NaNs collapse to the canonical NaN).
fn java_float_bits(v: f32) -> i32 {
    if v.is_nan() {
        0x7fc0_0000
    } else {
        v.to_bits() as i32
    }
}

/// The `BLOOM_FILTER(expr, numEntries)` aggregate.
pub fn bloom_filter() -> AggregateUDF {
    AggregateUDF::new_from_impl(BloomFilterAgg {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

/// The `BLOOM_FILTER_TEST(expr, filter)` scalar function.
pub fn bloom_filter_test() -> ScalarUDF {
    ScalarUDF::new_from_impl(BloomFilterTest {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BloomFilterAgg {
    signature: Signature,
}

fn bloom_field(name: &str) -> Field {
    Field::new(name, DataType::Binary, false).with_metadata(
        [(DRUID_TYPE_METADATA_KEY.to_string(), BLOOM_TYPE.to_string())]
            .into_iter()
            .collect(),
    )
}

impl AggregateUDFImpl for BloomFilterAgg {
    fn name(&self) -> &str {
        "bloom_filter"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn return_field(&self, _arg_fields: &[FieldRef]) -> Result<FieldRef> {
        Ok(Arc::new(bloom_field(self.name())))
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let n = args
            .exprs
            .get(1)
            .and_then(|e| e.downcast_ref::<Literal>())
            .map(|l| l.value().clone());
        let n = match n {
            Some(ScalarValue::Int64(Some(n))) => n,
            Some(v) => match v.cast_to(&DataType::Int64) {
                Ok(ScalarValue::Int64(Some(n))) if !matches!(v, ScalarValue::Utf8(_)) => n,
                _ => return plan_err!("BLOOM_FILTER: numEntries must be an integer literal"),
            },
            None => return plan_err!("BLOOM_FILTER: numEntries must be an integer literal"),
        };
        if !(1..=i64::from(i32::MAX)).contains(&n) {
            return plan_err!("BLOOM_FILTER: numEntries must be positive, got [{n}]");
        }
        Ok(Box::new(BloomAccumulator {
            filter: BloomKFilter::new(n as u64),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[bloom]", args.name),
            DataType::Binary,
            true,
        ))])
    }
}

#[derive(Debug)]
struct BloomAccumulator {
    filter: BloomKFilter,
}

impl Accumulator for BloomAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(a) = values.first() {
            for h in hashes(a)? {
                self.filter.add_hash(h);
            }
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Binary(Some(self.filter.to_bytes())))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.filter.bits.capacity() * 8
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.filter.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = states.first() else {
            return Ok(());
        };
        let b: &BinaryArray = s.as_binary::<i32>();
        for i in (0..b.len()).filter(|i| b.is_valid(*i)) {
            let other = BloomKFilter::from_bytes(b.value(i))
                .map_err(|e| DataFusionError::Internal(format!("bad partial bloom filter: {e}")))?;
            self.filter
                .merge(&other)
                .map_err(|e| DataFusionError::Internal(format!("BLOOM_FILTER: {e}")))?;
        }
        Ok(())
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BloomFilterTest {
    signature: Signature,
}

/// The filter argument: base64 text or bytes of a serialized filter.
fn filter_argument(v: &ScalarValue) -> Result<Option<BloomKFilter>> {
    let bytes = match v {
        ScalarValue::Utf8(s) | ScalarValue::Utf8View(s) | ScalarValue::LargeUtf8(s) => match s {
            None => return Ok(None),
            Some(s) => base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(s.trim().trim_end_matches('='))
                .map_err(|e| {
                    DataFusionError::Execution(format!("BLOOM_FILTER_TEST: invalid base64: {e}"))
                })?,
        },
        ScalarValue::Binary(b) | ScalarValue::LargeBinary(b) | ScalarValue::BinaryView(b) => {
            match b {
                None => return Ok(None),
                Some(b) => b.clone(),
            }
        }
        ScalarValue::Null => return Ok(None),
        other => {
            return exec_err!(
                "BLOOM_FILTER_TEST: the filter must be base64 text or bytes, got {}",
                other.data_type()
            );
        }
    };
    BloomKFilter::from_bytes(&bytes).map(Some).map_err(|e| {
        DataFusionError::Execution(format!("BLOOM_FILTER_TEST: not a bloom filter: {e}"))
    })
}

impl ScalarUDFImpl for BloomFilterTest {
    fn name(&self) -> &str {
        "bloom_filter_test"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let values = args.args[0].to_array(n)?;
        let mut out = BooleanBuilder::with_capacity(n);
        match &args.args[1] {
            ColumnarValue::Scalar(s) => {
                let filter = filter_argument(s)?;
                for h in hashes(&values)? {
                    match &filter {
                        Some(f) => out.append_value(f.test_hash(h)),
                        None => out.append_null(),
                    }
                }
            }
            ColumnarValue::Array(filters) => {
                let hs = hashes(&values)?;
                for (i, h) in hs.into_iter().enumerate().take(n) {
                    match filter_argument(&ScalarValue::try_from_array(filters, i)?)? {
                        Some(f) => out.append_value(f.test_hash(h)),
                        None => out.append_null(),
                    }
                }
            }
        }
        let result = out.finish();
        Ok(
            if n == 1 && matches!(args.args[0], ColumnarValue::Scalar(_)) {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
            } else {
                ColumnarValue::Array(Arc::new(result))
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[test]
    fn sizes_follow_druid() {
        // Druid: computeSizeBytes(1000) = 5 + 8 * (98 + 6) longs; k = 4 for 1000 entries.
        let f = BloomKFilter::new(1000);
        assert_eq!(f.bits.len(), 104);
        assert_eq!(f.k, 4);
        assert_eq!(f.to_bytes().len(), 5 + 8 * 104);
        assert_eq!(BloomKFilter::from_bytes(&f.to_bytes()).unwrap(), f);
        assert!(BloomKFilter::from_bytes(&[1, 0, 0, 0, 1, 0]).is_err());
    }

    #[test]
    fn hash64_reads_words_little_endian_and_longs_big_endian() {
        // hash64(long) is Hive's reverseBytes-then-mix, i.e. the hash of the big-endian bytes.
        let v = 0x0102_0304_0506_0708i64;
        let mut h = SEED ^ mix(v.swap_bytes() as u64);
        h = h.rotate_left(27).wrapping_mul(5).wrapping_add(0x52dc_e729);
        h ^= 8;
        assert_eq!(hash64_long(v), fmix64(h));
        // A tail-only input mixes the little-endian tail word.
        let tail = SEED ^ mix(0x0063_6261);
        assert_eq!(hash64(b"abc"), fmix64(tail ^ 3));
    }

    #[test]
    fn added_values_test_true_and_others_mostly_false() {
        let mut f = BloomKFilter::new(500);
        for i in 0..500 {
            f.add_hash(hash64(format!("v{i}").as_bytes()));
        }
        assert!((0..500).all(|i| f.test_hash(hash64(format!("v{i}").as_bytes()))));
        let false_positives = (0..10_000)
            .filter(|i| f.test_hash(hash64(format!("w{i}").as_bytes())))
            .count();
        assert!(false_positives < 1000, "{false_positives} of 10000");
    }

    #[tokio::test]
    async fn sql_builds_and_tests_filters() {
        let ctx = SessionContext::new();
        crate::register_druid_functions(&ctx);
        ctx.sql(
            "CREATE TABLE t AS SELECT * FROM (VALUES ('a', 1, 1.5), ('b', 2, 2.5), (NULL, 3, 3.5)) v(s, l, d)",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
        let encoded =
            |col: &str| format!("(SELECT encode(BLOOM_FILTER({col}, 100), 'base64') FROM t)");
        for (probe, col, want) in [
            ("'a'", "s", true),
            ("'z'", "s", false),
            ("CAST(NULL AS VARCHAR)", "s", true),
            ("2", "l", true),
            ("7", "l", false),
            ("2.5", "d", true),
            ("9.5", "d", false),
        ] {
            let sql = format!("SELECT BLOOM_FILTER_TEST({probe}, {})", encoded(col));
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let got = batches[0].column(0).as_boolean().value(0);
            assert_eq!(got, want, "{sql}");
        }
        let e = ctx
            .sql("SELECT BLOOM_FILTER_TEST('a', 'AAAA')")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a bloom filter"), "{e}");
        let e = ctx
            .sql("SELECT BLOOM_FILTER(s, 0) FROM t")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("numEntries"), "{e}");
    }
}
