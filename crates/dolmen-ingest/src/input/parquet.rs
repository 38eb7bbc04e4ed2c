//! Parquet reader: record batches from the `parquet` crate's Arrow reader, converted row by row.
//!
//! Type mapping (Druid's parquet extension behaves the same way for these types):
//! integers → JSON integers; floats and decimals → JSON numbers (NaN/±inf → null); booleans →
//! JSON booleans; strings → strings; binary → UTF-8 string with `binaryAsString`, else base64;
//! timestamps (any unit, including INT96) and dates → epoch millis; times → millis of day;
//! lists → arrays; structs and maps → objects; dictionary-encoded columns → their values. Other
//! types are rendered with Arrow's display formatter.
//!
//! The reader streams one batch (4096 rows) at a time. Panics inside the `parquet` crate on
//! corrupt files are caught and reported as fatal errors.

use std::collections::VecDeque;
use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Decimal256Type, DurationMicrosecondType,
    DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use serde_json::{Map, Value};

use super::flatten::FlattenSpec;
use super::{InputEntity, InputError, InputRow, RowParseError};

const BATCH_SIZE: usize = 4096;

pub(super) struct ParquetRows {
    name: String,
    reader: Option<ParquetRecordBatchReader>,
    pending: VecDeque<InputRow>,
    binary_as_string: bool,
    flatten: Option<FlattenSpec>,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

impl ParquetRows {
    pub(super) fn open(
        entity: &InputEntity,
        binary_as_string: bool,
        flatten: Option<FlattenSpec>,
    ) -> Result<Self, InputError> {
        let name = entity.name();
        let perr = |message: String| InputError::Parquet {
            path: name.clone(),
            message,
        };
        let built = match entity {
            InputEntity::File(p) => {
                let file = File::open(p).map_err(|e| InputError::Io {
                    path: name.clone(),
                    source: e,
                })?;
                catch_unwind(AssertUnwindSafe(|| {
                    ParquetRecordBatchReaderBuilder::try_new(file)
                        .and_then(|b| b.with_batch_size(BATCH_SIZE).build())
                }))
            }
            InputEntity::Inline(bytes) => {
                let bytes = bytes.clone();
                catch_unwind(AssertUnwindSafe(|| {
                    ParquetRecordBatchReaderBuilder::try_new(bytes)
                        .and_then(|b| b.with_batch_size(BATCH_SIZE).build())
                }))
            }
            // Remote objects are copied to a local file first (`input::open_rows`); segments
            // yield rows themselves.
            InputEntity::Remote(_) | InputEntity::Segment(_) => {
                return Err(perr(
                    "parquet needs a local file or in-memory data".to_string(),
                ));
            }
        };
        let reader = built
            .map_err(|p| {
                perr(format!(
                    "parquet reader panicked: {}",
                    panic_message(p.as_ref())
                ))
            })?
            .map_err(|e| perr(e.to_string()))?;
        Ok(Self {
            name,
            reader: Some(reader),
            pending: VecDeque::new(),
            binary_as_string,
            flatten,
        })
    }

    fn convert_batch(&mut self, batch: &RecordBatch) {
        let schema = batch.schema();
        let columns: Vec<(String, ArrayRef)> = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, c)| (f.name().clone(), undictionary(c)))
            .collect();
        for i in 0..batch.num_rows() {
            let mut row = Map::with_capacity(columns.len());
            for (name, col) in &columns {
                row.insert(name.clone(), cell(col.as_ref(), i, self.binary_as_string));
            }
            self.pending.push_back(match &self.flatten {
                Some(f) => f.apply(row),
                None => row,
            });
        }
    }
}

impl Iterator for ParquetRows {
    type Item = Result<InputRow, RowParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.pending.pop_front() {
                return Some(Ok(row));
            }
            let reader = self.reader.as_mut()?;
            let next = catch_unwind(AssertUnwindSafe(|| reader.next()));
            match next {
                Ok(None) => {
                    self.reader = None;
                    return None;
                }
                Ok(Some(Ok(batch))) => {
                    let converted = catch_unwind(AssertUnwindSafe(|| self.convert_batch(&batch)));
                    if let Err(p) = converted {
                        self.reader = None;
                        self.pending.clear();
                        return Some(Err(RowParseError::fatal(format!(
                            "error converting parquet rows of [{}]: {}",
                            self.name,
                            panic_message(p.as_ref())
                        ))));
                    }
                }
                Ok(Some(Err(e))) => {
                    self.reader = None;
                    return Some(Err(RowParseError::fatal(format!(
                        "error reading parquet file [{}]: {e}",
                        self.name
                    ))));
                }
                Err(p) => {
                    self.reader = None;
                    return Some(Err(RowParseError::fatal(format!(
                        "parquet reader panicked on [{}]: {}",
                        self.name,
                        panic_message(p.as_ref())
                    ))));
                }
            }
        }
    }
}

/// Replaces dictionary-encoded arrays by their decoded values.
fn undictionary(col: &ArrayRef) -> ArrayRef {
    match col.data_type() {
        DataType::Dictionary(_, value_type) => {
            arrow::compute::cast(col, value_type).unwrap_or_else(|_| col.clone())
        }
        _ => col.clone(),
    }
}

fn f64_value(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

fn timestamp_millis(v: i64, unit: &TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => v.saturating_mul(1000),
        TimeUnit::Millisecond => v,
        TimeUnit::Microsecond => v.div_euclid(1000),
        TimeUnit::Nanosecond => v.div_euclid(1_000_000),
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(BASE64[(n >> 18) as usize & 63] as char);
        out.push(BASE64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            BASE64[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            BASE64[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

fn binary_value(bytes: &[u8], as_string: bool) -> Value {
    if as_string {
        Value::String(String::from_utf8_lossy(bytes).into_owned())
    } else {
        Value::String(base64(bytes))
    }
}

fn list_value(values: ArrayRef, as_string: bool) -> Value {
    let values = undictionary(&values);
    Value::Array(
        (0..values.len())
            .map(|j| cell(values.as_ref(), j, as_string))
            .collect(),
    )
}

macro_rules! prim {
    ($a:expr, $t:ty, $i:expr) => {
        $a.as_primitive_opt::<$t>().map(|p| p.value($i))
    };
}

/// Converts one Arrow cell to JSON.
fn cell(a: &dyn Array, i: usize, bin_str: bool) -> Value {
    if i >= a.len() || a.is_null(i) {
        return Value::Null;
    }
    let v: Option<Value> = match a.data_type() {
        DataType::Null => Some(Value::Null),
        DataType::Boolean => a.as_boolean_opt().map(|b| Value::Bool(b.value(i))),
        DataType::Int8 => prim!(a, Int8Type, i).map(Value::from),
        DataType::Int16 => prim!(a, Int16Type, i).map(Value::from),
        DataType::Int32 => prim!(a, Int32Type, i).map(Value::from),
        DataType::Int64 => prim!(a, Int64Type, i).map(Value::from),
        DataType::UInt8 => prim!(a, UInt8Type, i).map(Value::from),
        DataType::UInt16 => prim!(a, UInt16Type, i).map(Value::from),
        DataType::UInt32 => prim!(a, UInt32Type, i).map(Value::from),
        DataType::UInt64 => prim!(a, UInt64Type, i).map(Value::from),
        DataType::Float16 => prim!(a, Float16Type, i).map(|f| f64_value(f.to_f64())),
        DataType::Float32 => prim!(a, Float32Type, i).map(|f| f64_value(f64::from(f))),
        DataType::Float64 => prim!(a, Float64Type, i).map(f64_value),
        DataType::Utf8 => a.as_string_opt::<i32>().map(|s| Value::from(s.value(i))),
        DataType::LargeUtf8 => a.as_string_opt::<i64>().map(|s| Value::from(s.value(i))),
        DataType::Utf8View => a.as_string_view_opt().map(|s| Value::from(s.value(i))),
        DataType::Binary => a
            .as_binary_opt::<i32>()
            .map(|b| binary_value(b.value(i), bin_str)),
        DataType::LargeBinary => a
            .as_binary_opt::<i64>()
            .map(|b| binary_value(b.value(i), bin_str)),
        DataType::BinaryView => a
            .as_binary_view_opt()
            .map(|b| binary_value(b.value(i), bin_str)),
        DataType::FixedSizeBinary(_) => a
            .as_fixed_size_binary_opt()
            .map(|b| binary_value(b.value(i), bin_str)),
        DataType::Timestamp(unit, _) => {
            let raw = match unit {
                TimeUnit::Second => prim!(a, TimestampSecondType, i),
                TimeUnit::Millisecond => prim!(a, TimestampMillisecondType, i),
                TimeUnit::Microsecond => prim!(a, TimestampMicrosecondType, i),
                TimeUnit::Nanosecond => prim!(a, TimestampNanosecondType, i),
            };
            raw.map(|v| Value::from(timestamp_millis(v, unit)))
        }
        DataType::Date32 => prim!(a, Date32Type, i).map(|d| Value::from(i64::from(d) * 86_400_000)),
        DataType::Date64 => prim!(a, Date64Type, i).map(Value::from),
        DataType::Time32(TimeUnit::Second) => {
            prim!(a, Time32SecondType, i).map(|v| Value::from(i64::from(v) * 1000))
        }
        DataType::Time32(_) => prim!(a, Time32MillisecondType, i).map(Value::from),
        DataType::Time64(TimeUnit::Nanosecond) => {
            prim!(a, Time64NanosecondType, i).map(|v| Value::from(v / 1_000_000))
        }
        DataType::Time64(_) => prim!(a, Time64MicrosecondType, i).map(|v| Value::from(v / 1000)),
        DataType::Duration(unit) => {
            let raw = match unit {
                TimeUnit::Second => prim!(a, DurationSecondType, i),
                TimeUnit::Millisecond => prim!(a, DurationMillisecondType, i),
                TimeUnit::Microsecond => prim!(a, DurationMicrosecondType, i),
                TimeUnit::Nanosecond => prim!(a, DurationNanosecondType, i),
            };
            raw.map(|v| Value::from(timestamp_millis(v, unit)))
        }
        DataType::Decimal128(_, _) => a
            .as_primitive_opt::<Decimal128Type>()
            .and_then(|d| d.value_as_string(i).parse::<f64>().ok())
            .map(f64_value),
        DataType::Decimal256(_, _) => a
            .as_primitive_opt::<Decimal256Type>()
            .and_then(|d| d.value_as_string(i).parse::<f64>().ok())
            .map(f64_value),
        DataType::List(_) => a
            .as_list_opt::<i32>()
            .map(|l| list_value(l.value(i), bin_str)),
        DataType::LargeList(_) => a
            .as_list_opt::<i64>()
            .map(|l| list_value(l.value(i), bin_str)),
        DataType::FixedSizeList(_, _) => a
            .as_fixed_size_list_opt()
            .map(|l| list_value(l.value(i), bin_str)),
        DataType::Struct(fields) => a.as_struct_opt().map(|s| {
            let mut m = Map::with_capacity(fields.len());
            for (f, col) in fields.iter().zip(s.columns()) {
                let col = undictionary(col);
                m.insert(f.name().clone(), cell(col.as_ref(), i, bin_str));
            }
            Value::Object(m)
        }),
        DataType::Map(_, _) => a.as_map_opt().map(|map| {
            let entries = map.value(i);
            let keys = undictionary(entries.column(0));
            let values = undictionary(entries.column(1));
            let mut m = Map::with_capacity(entries.len());
            for j in 0..entries.len() {
                let key = match cell(keys.as_ref(), j, true) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                m.insert(key, cell(values.as_ref(), j, bin_str));
            }
            Value::Object(m)
        }),
        _ => None,
    };
    v.unwrap_or_else(|| display_value(a, i))
}

fn display_value(a: &dyn Array, i: usize) -> Value {
    let opts = arrow::util::display::FormatOptions::default();
    match arrow::util::display::ArrayFormatter::try_new(a, &opts) {
        Ok(f) => Value::String(f.value(i).to_string()),
        Err(_) => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{InputEntity, InputFormat};
    use super::*;
    use arrow::array::{
        BinaryArray, Float64Array, Int64Array, ListArray, StringArray, StructArray,
        TimestampMicrosecondArray,
    };
    use arrow::datatypes::{Field, Schema};
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use serde_json::json;
    use std::sync::Arc;

    fn parquet_bytes() -> Vec<u8> {
        let ts = TimestampMicrosecondArray::from(vec![Some(1_442_018_818_771_000), None]);
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
        ]);
        let strct = StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int64, true)),
            Arc::new(Int64Array::from(vec![Some(7), None])) as ArrayRef,
        )]);
        let schema = Schema::new(vec![
            Field::new("time", ts.data_type().clone(), true),
            Field::new("page", DataType::Utf8, true),
            Field::new("added", DataType::Int64, true),
            Field::new("ratio", DataType::Float64, true),
            Field::new("bin", DataType::Binary, true),
            Field::new("list", list.data_type().clone(), true),
            Field::new("s", strct.data_type().clone(), true),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(ts),
                Arc::new(StringArray::from(vec![Some("Main"), None])),
                Arc::new(Int64Array::from(vec![36, -1])),
                Arc::new(Float64Array::from(vec![1.5, f64::NAN])),
                Arc::new(BinaryArray::from(vec![
                    Some(b"hi".as_ref()),
                    Some(b"\xff".as_ref()),
                ])),
                Arc::new(list),
                Arc::new(strct),
            ],
        )
        .unwrap();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        buf
    }

    #[test]
    fn reads_parquet_rows() {
        let bytes = parquet_bytes();
        let format: InputFormat = serde_json::from_value(json!({"type": "parquet"})).unwrap();
        let rows: Vec<_> = format
            .reader(&InputEntity::Inline(Bytes::from(bytes.clone())))
            .unwrap()
            .map(|r| Value::Object(r.unwrap()))
            .collect();
        assert_eq!(
            rows[0],
            json!({"time": 1442018818771i64, "page": "Main", "added": 36, "ratio": 1.5, "bin": "aGk=", "list": [1, 2], "s": {"x": 7}})
        );
        assert_eq!(
            rows[1],
            json!({"time": null, "page": null, "added": -1, "ratio": null, "bin": "/w==", "list": null, "s": {"x": null}})
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.parquet");
        std::fs::write(&path, &bytes).unwrap();
        let format: InputFormat = serde_json::from_value(json!({
            "type": "parquet", "binaryAsString": true,
            "flattenSpec": {"fields": [{"type": "path", "name": "sx", "expr": "$.s.x"}]}
        }))
        .unwrap();
        let rows: Vec<_> = format
            .reader(&InputEntity::File(path))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows[0]["bin"], json!("hi"));
        assert_eq!(rows[0]["sx"], json!(7));
    }

    #[test]
    fn corrupt_parquet() {
        let format: InputFormat = serde_json::from_value(json!({"type": "parquet"})).unwrap();
        let err = format
            .reader(&InputEntity::Inline(Bytes::from_static(
                b"not a parquet file",
            )))
            .err()
            .unwrap();
        assert!(err.to_string().contains("inline data"), "{err}");
        let mut bytes = parquet_bytes();
        // Damage the column data but keep the footer.
        for b in bytes.iter_mut().skip(8).take(200) {
            *b = 0x5a;
        }
        match format.reader(&InputEntity::Inline(Bytes::from(bytes))) {
            Err(_) => {}
            Ok(reader) => {
                for r in reader {
                    if let Err(e) = r {
                        assert!(e.fatal);
                    }
                }
            }
        }
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b""), "");
    }
}
