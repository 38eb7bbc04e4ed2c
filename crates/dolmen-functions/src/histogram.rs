//! `APPROX_QUANTILE_FIXED_BUCKETS(expr, probability, numBuckets, lowerLimit, upperLimit
//! [, outlierHandlingMode])`: Druid's fixed-buckets histogram quantile
//! (`druid-histogram` extension, `FixedBucketsHistogram`).
//!
//! The values are counted into `numBuckets` equal buckets over `[lowerLimit, upperLimit)`;
//! the result is the `probability` quantile interpolated linearly inside its bucket (Druid's
//! `percentilesFloat`, after Netflix Spectator's `PercentileBuckets`), computed in `float`
//! precision as Druid does and returned as a `DOUBLE`. Values outside the range follow
//! `outlierHandlingMode`: `ignore` (the default: dropped), `overflow` (counted apart, not in
//! the quantile) or `clip` (counted in the first or last bucket). Nulls are not counted. With
//! no counted value the result is 0.0 (Druid's empty histogram).
//!
//! The parameters must be literals: `probability` in `[0, 1]`, `numBuckets` > 0,
//! `upperLimit` > `lowerLimit`; anything else is an error naming the parameter. Partial
//! histograms of one query always share their buckets, so merging adds counts (Druid's
//! `combineHistogramSameBuckets`). A `fixedBucketsHistogram` column built at ingestion is not
//! supported (no such metric exists in Dolmen).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

const NAME: &str = "APPROX_QUANTILE_FIXED_BUCKETS";

/// The `APPROX_QUANTILE_FIXED_BUCKETS` aggregate function.
pub fn approx_quantile_fixed_buckets() -> AggregateUDF {
    AggregateUDF::new_from_impl(ApproxQuantileFixedBuckets {
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ApproxQuantileFixedBuckets {
    signature: Signature,
}

/// Druid's `OutlierHandlingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutlierMode {
    Ignore,
    Overflow,
    Clip,
}

/// The literal parameters.
#[derive(Debug, Clone, Copy)]
struct Params {
    probability: f64,
    num_buckets: usize,
    lower: f64,
    upper: f64,
    mode: OutlierMode,
}

fn number(v: Option<&ScalarValue>, what: &str) -> Result<f64> {
    let f = v
        .filter(|v| !v.is_null())
        .and_then(|v| v.cast_to(&DataType::Float64).ok())
        .and_then(|v| match v {
            ScalarValue::Float64(Some(f)) => Some(f),
            _ => None,
        });
    f.ok_or_else(|| DataFusionError::Plan(format!("{NAME}: {what} must be a numeric literal")))
}

impl Params {
    fn from_literals(params: &[Option<ScalarValue>]) -> Result<Params> {
        let probability = number(params.first().and_then(Option::as_ref), "probability")?;
        if !(0.0..=1.0).contains(&probability) {
            return plan_err!("{NAME}: probability must be between 0 and 1, got [{probability}]");
        }
        let buckets = number(params.get(1).and_then(Option::as_ref), "numBuckets")?;
        if buckets < 1.0 || buckets.fract() != 0.0 || buckets > 1e7 {
            return plan_err!(
                "{NAME}: numBuckets must be a positive integer (at most 10000000), got [{buckets}]"
            );
        }
        let lower = number(params.get(2).and_then(Option::as_ref), "lowerLimit")?;
        let upper = number(params.get(3).and_then(Option::as_ref), "upperLimit")?;
        if upper <= lower {
            return plan_err!(
                "{NAME}: upperLimit [{upper}] must be greater than lowerLimit [{lower}]"
            );
        }
        let mode = match params.get(4) {
            None => OutlierMode::Ignore,
            Some(Some(ScalarValue::Utf8(Some(m)) | ScalarValue::Utf8View(Some(m)))) => {
                match m.to_ascii_lowercase().as_str() {
                    "ignore" => OutlierMode::Ignore,
                    "overflow" => OutlierMode::Overflow,
                    "clip" => OutlierMode::Clip,
                    _ => {
                        return plan_err!(
                            "{NAME}: outlierHandlingMode must be 'ignore', 'overflow' or 'clip', got [{m}]"
                        );
                    }
                }
            }
            Some(_) => {
                return plan_err!("{NAME}: outlierHandlingMode must be a string literal");
            }
        };
        Ok(Params {
            probability,
            num_buckets: buckets as usize,
            lower,
            upper,
            mode,
        })
    }
}

impl AggregateUDFImpl for ApproxQuantileFixedBuckets {
    fn name(&self) -> &str {
        "approx_quantile_fixed_buckets"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(5..=6).contains(&arg_types.len()) {
            return plan_err!(
                "{NAME} takes 5 or 6 arguments (expr, probability, numBuckets, lowerLimit, upperLimit[, outlierHandlingMode]), got {}",
                arg_types.len()
            );
        }
        let first = &arg_types[0];
        if !(first.is_numeric() || first == &DataType::Null) {
            return plan_err!("{NAME}: the first argument must be numeric, got {first}");
        }
        let mut out = vec![DataType::Float64; 5];
        if arg_types.len() == 6 {
            out.push(DataType::Utf8);
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
        Ok(Box::new(HistogramAccumulator::new(Params::from_literals(
            &literals,
        )?)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[histogram]", args.name),
            DataType::Binary,
            true,
        ))])
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(Some(0.0)))
    }
}

/// Druid's `FixedBucketsHistogram` (the parts SQL uses).
#[derive(Debug)]
struct HistogramAccumulator {
    params: Params,
    bucket_size: f64,
    histogram: Vec<u64>,
    count: u64,
    lower_outliers: u64,
    upper_outliers: u64,
    missing: u64,
    max: f64,
    min: f64,
}

impl HistogramAccumulator {
    fn new(params: Params) -> HistogramAccumulator {
        HistogramAccumulator {
            bucket_size: (params.upper - params.lower) / params.num_buckets as f64,
            histogram: vec![0; params.num_buckets],
            params,
            count: 0,
            lower_outliers: 0,
            upper_outliers: 0,
            missing: 0,
            max: f64::NEG_INFINITY,
            min: f64::INFINITY,
        }
    }

    /// Druid's `add(double)`.
    fn add(&mut self, value: f64) {
        let p = self.params;
        if value < p.lower || value >= p.upper {
            let upper = value >= p.upper;
            match p.mode {
                OutlierMode::Ignore => {}
                OutlierMode::Overflow => {
                    if upper {
                        self.upper_outliers += 1;
                    } else {
                        self.lower_outliers += 1;
                    }
                }
                OutlierMode::Clip => {
                    self.count += 1;
                    let clipped = if upper {
                        *self.histogram.last_mut().unwrap_or(&mut 0) += 1;
                        p.upper
                    } else {
                        self.histogram[0] += 1;
                        p.lower
                    };
                    self.max = self.max.max(clipped);
                    self.min = self.min.min(clipped);
                }
            }
            return;
        }
        self.count += 1;
        self.max = self.max.max(value);
        self.min = self.min.min(value);
        let bucket =
            (((value - p.lower) / self.bucket_size) as usize).min(self.histogram.len() - 1);
        self.histogram[bucket] += 1;
    }

    /// Druid's `percentilesFloat` for one percentile.
    fn quantile(&self) -> f32 {
        let pct = self.params.probability * 100.0;
        let total = self.count as f64;
        let mut prev = 0u64;
        let mut prev_p = 0.0f64;
        let mut prev_b = self.params.lower;
        for (i, n) in self.histogram.iter().enumerate() {
            let next = prev + n;
            let next_p = 100.0 * next as f64 / total;
            let next_b = (i + 1) as f64 * self.bucket_size + self.params.lower;
            if next_p >= pct {
                let f = (pct - prev_p) / (next_p - prev_p);
                return (f * (next_b - prev_b) + prev_b) as f32;
            }
            prev = next;
            prev_p = next_p;
            prev_b = next_b;
        }
        0.0
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + 8 * self.histogram.len());
        for v in [
            self.count,
            self.lower_outliers,
            self.upper_outliers,
            self.missing,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.max.to_le_bytes());
        out.extend_from_slice(&self.min.to_le_bytes());
        for b in &self.histogram {
            out.extend_from_slice(&b.to_le_bytes());
        }
        out
    }

    /// Druid's `combineHistogramSameBuckets` with a partial state from [`Self::to_bytes`].
    fn merge_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || DataFusionError::Internal(format!("{NAME}: bad partial histogram"));
        if bytes.len() != 48 + 8 * self.histogram.len() {
            return Err(bad());
        }
        let word = |i: usize| -> [u8; 8] {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            w
        };
        self.count += u64::from_le_bytes(word(0));
        self.lower_outliers += u64::from_le_bytes(word(1));
        self.upper_outliers += u64::from_le_bytes(word(2));
        self.missing += u64::from_le_bytes(word(3));
        self.max = self.max.max(f64::from_le_bytes(word(4)));
        self.min = self.min.min(f64::from_le_bytes(word(5)));
        for (i, b) in self.histogram.iter_mut().enumerate() {
            *b += u64::from_le_bytes(word(6 + i));
        }
        Ok(())
    }
}

impl Accumulator for HistogramAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(v) = values.first() else {
            return Ok(());
        };
        let v = cast(v, &DataType::Float64)?;
        let v = v.as_primitive::<Float64Type>();
        for x in v.iter() {
            match x {
                Some(x) => self.add(x),
                None => self.missing += 1,
            }
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(Some(f64::from(self.quantile()))))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.histogram.capacity() * 8
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.to_bytes()))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = states.first() else {
            return Ok(());
        };
        let b: &BinaryArray = s.as_binary::<i32>();
        for i in 0..b.len() {
            if b.is_valid(i) {
                self.merge_bytes(b.value(i))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{ctx, one};

    #[tokio::test]
    async fn quantiles_interpolate_inside_buckets() {
        let ctx = ctx();
        // Druid's javadoc example: buckets of 2 over [0, 10) holding 1, 2, 0, 4, 0 values
        // (cumulative 1, 3, 3, 7); the 75th percentile is 6 + ((5.25 - 3) / 4) * 2 = 7.125.
        let data = "(VALUES (1.0), (2.5), (3.0), (6.5), (7.0), (7.5), (7.9)) t(x)";
        let q = |args: &str| format!("SELECT APPROX_QUANTILE_FIXED_BUCKETS(x, {args}) FROM {data}");
        assert_eq!(one(&ctx, &q("0.75, 5, 0, 10")).await.unwrap(), "7.125");
        assert_eq!(one(&ctx, &q("0, 5, 0, 10")).await.unwrap(), "0.0");
        assert_eq!(one(&ctx, &q("1, 5, 0, 10")).await.unwrap(), "8.0");
        // float precision, as Druid computes it: 2 + (100/7 - 14.28...)... -> a float widened.
        let median = one(&ctx, &q("0.5, 5, 0, 10")).await.unwrap();
        let expected = {
            let (prev_p, next_p) = (100.0 * 3.0 / 7.0, 100.0 * 7.0 / 7.0);
            let f = (50.0 - prev_p) / (next_p - prev_p);
            f64::from((f * 2.0 + 6.0) as f32)
        };
        assert_eq!(median, expected.to_string());
        // Outliers: ignored by default, clipped into the edge buckets with 'clip'.
        let data = "(VALUES (-5.0), (1.0), (2.0), (50.0), (60.0), (NULL)) t(x)";
        let q = |args: &str| format!("SELECT APPROX_QUANTILE_FIXED_BUCKETS(x, {args}) FROM {data}");
        assert_eq!(one(&ctx, &q("0.5, 10, 0, 10")).await.unwrap(), "2.0");
        assert_eq!(one(&ctx, &q("1, 10, 0, 10, 'clip'")).await.unwrap(), "10.0");
        assert_eq!(
            one(&ctx, &q("0.5, 10, 0, 10, 'overflow'")).await.unwrap(),
            "2.0"
        );
        // No value in range: Druid's empty histogram gives 0.
        assert_eq!(
            one(
                &ctx,
                "SELECT APPROX_QUANTILE_FIXED_BUCKETS(x, 0.5, 10, 0, 10) FROM (VALUES (50.0)) t(x)"
            )
            .await
            .unwrap(),
            "0.0"
        );
    }

    #[tokio::test]
    async fn groups_merge_partial_histograms() {
        let ctx = ctx();
        let sql = "SELECT g, APPROX_QUANTILE_FIXED_BUCKETS(x, 0.5, 100, 0, 100) FROM \
                   (SELECT x % 2 AS g, CAST(x AS DOUBLE) AS x FROM generate_series(0, 99) s(x)) \
                   GROUP BY g ORDER BY g";
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let v = cast(batches[0].column(1), &DataType::Float64).unwrap();
        let v = v.as_primitive::<Float64Type>();
        // Evens 0..98 and odds 1..99, one value per bucket of width 1: the 25th value's
        // bucket (48 or 49) holds the 50% mark at its upper edge.
        assert_eq!(v.value(0), 49.0);
        assert_eq!(v.value(1), 50.0);
    }

    #[test]
    fn merged_partials_equal_one_histogram() {
        let params = Params::from_literals(&[
            Some(ScalarValue::Float64(Some(0.9))),
            Some(ScalarValue::Float64(Some(7.0))),
            Some(ScalarValue::Float64(Some(-3.0))),
            Some(ScalarValue::Float64(Some(40.0))),
            Some(ScalarValue::Utf8(Some("clip".into()))),
        ])
        .unwrap();
        let values: Vec<f64> = (0..200).map(|i| f64::from((i * 37) % 53) - 5.5).collect();
        let array =
            |v: &[f64]| -> ArrayRef { Arc::new(arrow::array::Float64Array::from(v.to_vec())) };
        let mut whole = HistogramAccumulator::new(params);
        whole.update_batch(&[array(&values)]).unwrap();
        let mut merged = HistogramAccumulator::new(params);
        for part in values.chunks(60) {
            let mut a = HistogramAccumulator::new(params);
            a.update_batch(&[array(part)]).unwrap();
            let state = a.state().unwrap()[0].to_array().unwrap();
            merged.merge_batch(&[state]).unwrap();
        }
        assert_eq!(merged.histogram, whole.histogram);
        assert_eq!(merged.count, whole.count);
        assert_eq!(merged.evaluate().unwrap(), whole.evaluate().unwrap());
        assert!(merged.merge_bytes(&[1, 2, 3]).is_err());
    }

    #[tokio::test]
    async fn bad_parameters_are_errors() {
        let ctx = ctx();
        for (args, needle) in [
            ("1.5, 10, 0, 10", "probability"),
            ("0.5, 0, 0, 10", "numBuckets"),
            ("0.5, 10, 10, 0", "upperLimit"),
            ("0.5, 10, 0, 10, 'wrap'", "outlierHandlingMode"),
        ] {
            let sql =
                format!("SELECT APPROX_QUANTILE_FIXED_BUCKETS(x, {args}) FROM (VALUES (1.0)) t(x)");
            let e = one(&ctx, &sql).await.unwrap_err().to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
        let e = one(
            &ctx,
            "SELECT APPROX_QUANTILE_FIXED_BUCKETS('a', 0.5, 10, 0, 10)",
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("must be numeric"), "{e}");
    }
}
