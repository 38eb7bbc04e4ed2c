//! `APPROX_COUNT_DISTINCT(expr)`: Druid's built-in approximate distinct count
//! (`APPROX_COUNT_DISTINCT_BUILTIN`, the default of `druid.sql.approxCountDistinct.function`),
//! which is also what `COUNT(DISTINCT expr)` becomes while the context's
//! `useApproximateCountDistinct` is true (its default; see dolmen-query's `rewrite`).
//!
//! Druid runs it as the `cardinality` aggregator (`byRow: false`, rounded): a
//! `HyperLogLogCollector` (Druid's own HLL, [`dolmen_sketch::hyper_unique`], 2048 registers,
//! ~1.6% standard error) fed with Druid's hashes, so the estimates are the ones Druid returns on
//! the same values:
//! - strings: murmur3_128 of the UTF-16 code units (`hashUnencodedChars`); each value of a
//!   multi-value row counts;
//! - longs, booleans (0/1), timestamps (epoch ms): `hashLong`; doubles:
//!   `hashLong(doubleToLongBits)`; floats: `hashInt(floatToIntBits)`;
//! - `hyperUnique` columns (Binary collector bytes): folded in, as Druid's `hyperUnique`
//!   aggregator does; bytes that are not a collector are an error;
//! - nulls are skipped.
//!
//! The result is a `BIGINT` (the estimate rounded half up), 0 for no rows. Partial aggregates
//! travel as the collector's bytes (Druid's serialization).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Float32Type, Float64Type, Int32Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use dolmen_sketch::hyper_unique::{HyperLogLogCollector, f64_bits_java};

/// The `APPROX_COUNT_DISTINCT` aggregate function.
pub fn approx_count_distinct() -> AggregateUDF {
    AggregateUDF::new_from_impl(ApproxCountDistinct {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ApproxCountDistinct {
    signature: Signature,
}

impl AggregateUDFImpl for ApproxCountDistinct {
    fn name(&self) -> &str {
        "approx_count_distinct"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CardinalityAccumulator::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[hll]", args.name),
            DataType::Binary,
            true,
        ))])
    }

    fn default_value(&self, _: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(0)))
    }
}

/// Druid's `cardinality` aggregator state.
#[derive(Debug, Default)]
struct CardinalityAccumulator {
    hll: HyperLogLogCollector,
    scratch: Vec<u8>,
    /// Hashes of the values of the last dictionary of a dictionary-encoded input.
    dictionary: crate::dictionary_memo::DictionaryMemo<[u8; 16]>,
}

impl CardinalityAccumulator {
    fn add_array(&mut self, a: &ArrayRef) -> Result<()> {
        match a.data_type() {
            DataType::Null => {}
            DataType::Utf8 => {
                for v in a.as_string::<i32>().iter().flatten() {
                    self.hll.add_unencoded_chars(v, &mut self.scratch);
                }
            }
            DataType::LargeUtf8 => {
                for v in a.as_string::<i64>().iter().flatten() {
                    self.hll.add_unencoded_chars(v, &mut self.scratch);
                }
            }
            DataType::Utf8View => {
                for v in a.as_string_view().iter().flatten() {
                    self.hll.add_unencoded_chars(v, &mut self.scratch);
                }
            }
            DataType::Float64 => {
                for v in a.as_primitive::<Float64Type>().iter().flatten() {
                    self.hll.add_long(f64_bits_java(v));
                }
            }
            DataType::Float32 => {
                for v in a.as_primitive::<Float32Type>().iter().flatten() {
                    self.hll.add_float(v);
                }
            }
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
                let b = cast(a, &DataType::Binary)?;
                for bytes in b.as_binary::<i32>().iter().flatten() {
                    let other = HyperLogLogCollector::from_bytes(bytes).map_err(|e| {
                        DataFusionError::Execution(format!(
                            "APPROX_COUNT_DISTINCT: a binary value is not a hyperUnique collector: {e}"
                        ))
                    })?;
                    self.hll.fold(&other);
                }
            }
            DataType::List(_) => {
                let l = a.as_list::<i32>();
                for row in (0..l.len()).filter(|r| l.is_valid(*r)) {
                    self.add_array(&l.value(row))?;
                }
            }
            DataType::LargeList(_) => {
                let l = a.as_list::<i64>();
                for row in (0..l.len()).filter(|r| l.is_valid(*r)) {
                    self.add_array(&l.value(row))?;
                }
            }
            DataType::Dictionary(k, v)
                if k.as_ref() == &DataType::Int32 && v.as_ref() == &DataType::Utf8 =>
            {
                // Each dictionary value is hashed once (per distinct dictionary: the Parquet
                // reader shares one across a column chunk's batches), each row adds its
                // value's hash.
                let dict = a.as_dictionary::<Int32Type>();
                let values = dict.values();
                if self.dictionary.get(values).is_none() {
                    let strings = values.as_string::<i32>();
                    let hashes = (0..strings.len())
                        .map(|i| {
                            HyperLogLogCollector::unencoded_chars_hash(
                                strings.value(i),
                                &mut self.scratch,
                            )
                        })
                        .collect();
                    self.dictionary.set(values, hashes);
                }
                let hashes = self.dictionary.get(values).unwrap_or_default();
                let strings = values.as_string::<i32>();
                for k in dict.keys().iter().flatten() {
                    let k = k as usize;
                    if strings.is_valid(k) {
                        self.hll.add_hash(&hashes[k]);
                    }
                }
            }
            DataType::Dictionary(_, v) => {
                let plain = cast(a, v)?;
                self.add_array(&plain)?;
            }
            dt if super::is_integer(dt)
                || matches!(
                    dt,
                    DataType::Boolean
                        | DataType::Timestamp(_, _)
                        | DataType::Date32
                        | DataType::Date64
                ) =>
            {
                let ms = match a.data_type() {
                    DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => cast(
                        a,
                        &DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
                    )?,
                    _ => Arc::clone(a),
                };
                let longs = cast(&ms, &DataType::Int64)?;
                for v in longs.as_primitive::<Int64Type>().iter().flatten() {
                    self.hll.add_long(v);
                }
            }
            other => {
                return exec_err!("APPROX_COUNT_DISTINCT does not take values of type {other}");
            }
        }
        Ok(())
    }
}

impl Accumulator for CardinalityAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        match values.first() {
            Some(a) => self.add_array(a),
            None => Ok(()),
        }
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(self.hll.estimate_rounded())))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + 1024
            + self.scratch.capacity()
            + self.dictionary.result_bytes()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.hll.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = states.first() else {
            return Ok(());
        };
        let b: &BinaryArray = s.as_binary::<i32>();
        for bytes in b.iter().flatten() {
            let other = HyperLogLogCollector::from_bytes(bytes)
                .map_err(|e| DataFusionError::Internal(format!("bad partial collector: {e}")))?;
            self.hll.fold(&other);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    #[test]
    fn strings_and_longs_count_like_druid_and_partials_merge() {
        let mut a = CardinalityAccumulator::default();
        let strings: ArrayRef = Arc::new(StringArray::from_iter(
            (0..5000)
                .map(|i| Some(format!("u{}", i % 2500)))
                .chain([None]),
        ));
        a.update_batch(&[strings]).unwrap();
        let mut b = CardinalityAccumulator::default();
        let longs: ArrayRef = Arc::new(Int64Array::from_iter_values(0..2500));
        b.update_batch(&[longs]).unwrap();
        let ScalarValue::Int64(Some(only_a)) = a.evaluate().unwrap() else {
            panic!()
        };
        assert!((2400..2600).contains(&only_a), "{only_a}");
        // Merging the partial state of b into a counts both value sets.
        let state = b.state().unwrap();
        let ScalarValue::Binary(Some(bytes)) = &state[0] else {
            panic!()
        };
        let arr: ArrayRef = Arc::new(BinaryArray::from_iter_values([bytes.as_slice()]));
        a.merge_batch(&[arr]).unwrap();
        let ScalarValue::Int64(Some(both)) = a.evaluate().unwrap() else {
            panic!()
        };
        assert!((4800..5200).contains(&both), "{both}");
        // Multi-value rows count each value; null rows count nothing.
        let mut mv = CardinalityAccumulator::default();
        let lists: ArrayRef = Arc::new(arrow::array::ListArray::from_iter_primitive::<
            arrow::datatypes::Int64Type,
            _,
            _,
        >([
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![Some(3)]),
        ]));
        mv.update_batch(&[lists]).unwrap();
        assert_eq!(mv.evaluate().unwrap(), ScalarValue::Int64(Some(3)));
        // No rows: 0.
        assert_eq!(
            CardinalityAccumulator::default().evaluate().unwrap(),
            ScalarValue::Int64(Some(0))
        );
    }
}
