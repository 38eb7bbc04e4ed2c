//! `DECODE_BASE64_COMPLEX(dataType, expr)`: the base64 text of a complex value (the form
//! sketches take in JSON results and ingestion inputs) decoded into that complex type, as in
//! Druid's `docs/querying/sql-scalar.md` ("Other scalar functions").
//!
//! `dataType` is a string literal naming the complex type, with or without `COMPLEX<...>`:
//! `HLLSketch`, `thetaSketch`, `quantilesDoublesSketch`, `arrayOfDoublesSketch` or
//! `hyperUnique`. The result is a Binary column marked with that Druid type ([`super::sketches::DRUID_TYPE_METADATA_KEY`]), so
//! the sketch functions and the result writers treat it like a sketch column. Each value is
//! deserialized to check it (Druid's `ComplexMetricSerde.fromBytes`): text that is not base64,
//! or bytes that are not a value of the type, are an execution error naming the function. A
//! null string gives null. Unknown type names are a planning error.

use std::sync::Arc;

use arrow::array::{AsArray, BinaryBuilder};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef};
use base64::Engine as _;
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use dolmen_sketch::hyper_unique::HyperLogLogCollector;
use dolmen_sketch::quantiles::DoublesSketch;
use dolmen_sketch::tuple::ArrayOfDoublesCompactSketch;
use dolmen_sketch::{HllSketchView, ThetaSketchView};

use super::sketches::DRUID_TYPE_METADATA_KEY;

const NAME: &str = "DECODE_BASE64_COMPLEX";

/// The complex types `DECODE_BASE64_COMPLEX` decodes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ComplexType {
    Hll,
    Theta,
    Quantiles,
    Tuple,
    HyperUnique,
}

impl ComplexType {
    fn parse(name: &str) -> Option<ComplexType> {
        let bare = name
            .strip_prefix("COMPLEX<")
            .and_then(|n| n.strip_suffix('>'))
            .unwrap_or(name);
        match bare {
            "HLLSketch" | "HLLSketchBuild" | "HLLSketchMerge" => Some(ComplexType::Hll),
            "thetaSketch" => Some(ComplexType::Theta),
            "quantilesDoublesSketch" => Some(ComplexType::Quantiles),
            "arrayOfDoublesSketch" => Some(ComplexType::Tuple),
            "hyperUnique" => Some(ComplexType::HyperUnique),
            _ => None,
        }
    }

    fn druid_type(self) -> &'static str {
        match self {
            ComplexType::Hll => "COMPLEX<HLLSketch>",
            ComplexType::Theta => "COMPLEX<thetaSketch>",
            ComplexType::Quantiles => "COMPLEX<quantilesDoublesSketch>",
            ComplexType::Tuple => super::tuple::TUPLE_DRUID_TYPE,
            ComplexType::HyperUnique => "COMPLEX<hyperUnique>",
        }
    }

    /// Checks that `bytes` deserialize as a value of this type.
    fn check(self, bytes: &[u8]) -> std::result::Result<(), String> {
        match self {
            ComplexType::Hll => HllSketchView::from_bytes(bytes)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            ComplexType::Theta => ThetaSketchView::from_bytes(bytes)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            ComplexType::Quantiles => DoublesSketch::deserialize(bytes)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            ComplexType::Tuple => ArrayOfDoublesCompactSketch::from_bytes(bytes)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            ComplexType::HyperUnique => HyperLogLogCollector::from_bytes(bytes)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }
}

/// The `DECODE_BASE64_COMPLEX` scalar function.
pub fn decode_base64_complex() -> ScalarUDF {
    ScalarUDF::new_from_impl(DecodeBase64Complex {
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DecodeBase64Complex {
    signature: Signature,
}

/// The type named by a literal first argument.
fn type_argument(arg: Option<&ScalarValue>) -> Result<ComplexType> {
    let name = match arg {
        Some(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)))
        | Some(ScalarValue::LargeUtf8(Some(s))) => s.as_str(),
        _ => {
            return plan_err!(
                "{NAME}: the first argument must be a string literal naming the complex type"
            );
        }
    };
    ComplexType::parse(name).ok_or_else(|| {
        DataFusionError::Plan(format!(
            "{NAME}: unknown complex type [{name}]; takes HLLSketch, thetaSketch, quantilesDoublesSketch, arrayOfDoublesSketch or hyperUnique"
        ))
    })
}

impl ScalarUDFImpl for DecodeBase64Complex {
    fn name(&self) -> &str {
        "decode_base64_complex"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if arg_types.len() != 2 {
            return plan_err!(
                "{NAME} takes 2 arguments (dataType, expr), got {}",
                arg_types.len()
            );
        }
        Ok(vec![DataType::Utf8, DataType::Utf8])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let ty = type_argument(args.scalar_arguments.first().copied().flatten())?;
        Ok(Arc::new(
            Field::new(self.name(), DataType::Binary, true).with_metadata(
                [(
                    DRUID_TYPE_METADATA_KEY.to_string(),
                    ty.druid_type().to_string(),
                )]
                .into_iter()
                .collect(),
            ),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let ty = match &args.args[0] {
            ColumnarValue::Scalar(s) => type_argument(Some(s))?,
            ColumnarValue::Array(_) => {
                return exec_err!("{NAME}: the first argument must be a string literal");
            }
        };
        let n = args.number_rows;
        let text = cast(&args.args[1].to_array(n)?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = BinaryBuilder::with_capacity(n, n * 64);
        for v in text.iter() {
            match v {
                None => out.append_null(),
                Some(v) => {
                    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                        .decode(v.trim().trim_end_matches('='))
                        .map_err(|e| {
                            DataFusionError::Execution(format!("{NAME}: invalid base64: {e}"))
                        })?;
                    ty.check(&bytes).map_err(|e| {
                        DataFusionError::Execution(format!(
                            "{NAME}: the value is not a {}: {e}",
                            ty.druid_type()
                        ))
                    })?;
                    out.append_value(&bytes);
                }
            }
        }
        let array = out.finish();
        Ok(
            if matches!(args.args[1], ColumnarValue::Scalar(_)) && n == 1 {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
            } else {
                ColumnarValue::Array(Arc::new(array))
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{ctx, one};

    #[tokio::test]
    async fn decoded_sketches_feed_the_sketch_functions() {
        let ctx = ctx();
        // Sketches built here, round-tripped through their base64 text.
        let sql = "SELECT HLL_SKETCH_ESTIMATE(DECODE_BASE64_COMPLEX('HLLSketch', \
                   (SELECT encode(DS_HLL(x), 'base64') FROM (VALUES ('a'), ('b'), ('c')) t(x))), true)";
        assert_eq!(one(&ctx, sql).await.unwrap(), "3.0");
        let sql = "SELECT THETA_SKETCH_ESTIMATE(DECODE_BASE64_COMPLEX('COMPLEX<thetaSketch>', \
                   (SELECT encode(DS_THETA(x), 'base64') FROM (VALUES ('a'), ('b')) t(x))))";
        assert_eq!(one(&ctx, sql).await.unwrap(), "2.0");
        assert_eq!(
            one(&ctx, "SELECT DECODE_BASE64_COMPLEX('hyperUnique', NULL)")
                .await
                .unwrap(),
            "null"
        );
    }

    #[tokio::test]
    async fn bad_types_and_values_are_errors() {
        let ctx = ctx();
        let e = one(&ctx, "SELECT DECODE_BASE64_COMPLEX('nope', 'AAAA')")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown complex type [nope]"), "{e}");
        let e = one(&ctx, "SELECT DECODE_BASE64_COMPLEX('HLLSketch', '***')")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid base64"), "{e}");
        let e = one(&ctx, "SELECT DECODE_BASE64_COMPLEX('thetaSketch', 'AAAA')")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a COMPLEX<thetaSketch>"), "{e}");
    }
}
