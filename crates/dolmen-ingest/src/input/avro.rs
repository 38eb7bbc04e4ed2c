//! Avro object container file reader (`avro_ocf`), with the `apache-avro` crate.
//!
//! Reference: Druid docs, "Source input formats" → Avro OCF
//! (<https://druid.apache.org/docs/latest/ingestion/data-formats#avro-ocf>) and the Avro
//! extension's "Avro types" (`docs/development/extensions-core/avro.md`).
//!
//! Each record becomes a JSON-object row, as Druid's `AvroFlattenerMaker` sees it:
//! * `int`, `long`, `float`, `double`, `boolean`, `string` → JSON numbers, booleans, strings
//!   (float/double NaN and infinities → null);
//! * `bytes` and `fixed` → base64 strings, or UTF-8 strings (invalid bytes replaced) with
//!   `binaryAsString`;
//! * `enum` → its symbol;
//! * `array` → JSON array, `map` → JSON object (keys sorted), nested `record` → JSON object
//!   (fields in schema order), usable by `flattenSpec` paths;
//! * logical types are read as their underlying type, as Druid does ("Druid does not currently
//!   support Avro logical types"): `timestamp-millis`/`timestamp-micros`/`local-timestamp-*` →
//!   the long (millis, micros), `date` → days as an int, `time-millis`/`time-micros` → the
//!   number, `decimal` → its bytes (base64 unless `binaryAsString`), `duration` → its 12 bytes,
//!   `uuid` → the string;
//! * a `union` is its value; with `extractUnionsByType` a non-null union value becomes
//!   `{"<branch>": value}` where the branch is the type name of primitive and unnamed complex
//!   types (`int`, `string`, `array`, `map`, ...) and the simple name of named types (`record`,
//!   `enum`, `fixed`); a null stays null.
//!
//! `schema` (a reader schema, Avro JSON) is applied with Avro's schema resolution to every
//! record written with the file's own (writer) schema. The codecs `null`, `deflate`, `snappy`
//! and `zstandard` are read; `bzip2` and `xz` files are rejected when opened.
//!
//! A file whose header cannot be read fails to open (the task fails); a block that cannot be
//! decoded ends the file with a fatal error; a record that does not resolve against the reader
//! schema is one unparseable row. Panics inside the crate on corrupt input are caught and
//! reported as fatal errors.

use std::collections::HashMap;
use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};

use apache_avro::schema::{Name, ResolvedSchema, Schema};
use apache_avro::types::Value as AvroValue;
use base64::Engine as _;
use serde_json::{Map, Number, Value};

use super::flatten::FlattenSpec;
use super::{InputEntity, InputError, InputRow, RowParseError};

/// Parses a `schema` given in the spec (an Avro schema as JSON).
///
/// # Errors
/// [`InputError::InvalidSpec`] naming `schema` and Avro's reason.
pub(super) fn parse_reader_schema(v: &Value) -> Result<Schema, InputError> {
    Schema::parse(v).map_err(|e| InputError::InvalidSpec(format!("avro_ocf [schema]: {e}")))
}

/// How Avro values become JSON.
struct Converter {
    binary_as_string: bool,
    extract_unions_by_type: bool,
    /// Named types of the schema the values follow, to resolve references.
    names: HashMap<Name, Schema>,
}

type OcfReader = apache_avro::Reader<'static, Box<dyn Read + Send>>;

pub(super) struct AvroRows {
    name: String,
    reader: Option<OcfReader>,
    reader_schema: Option<Schema>,
    /// The schema records follow after resolution (reader schema, else the writer schema).
    schema: Schema,
    conv: Converter,
    flatten: Option<FlattenSpec>,
    record: u64,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

impl AvroRows {
    pub(super) fn open(
        entity: &InputEntity,
        reader_schema: Option<Schema>,
        binary_as_string: bool,
        extract_unions_by_type: bool,
        flatten: Option<FlattenSpec>,
    ) -> Result<Self, InputError> {
        let name = entity.name();
        let input = entity.open().map_err(|e| InputError::Io {
            path: name.clone(),
            source: e,
        })?;
        let invalid = |m: String| InputError::InvalidSpec(format!("avro_ocf file [{name}]: {m}"));
        let reader = catch_unwind(AssertUnwindSafe(|| OcfReader::new(input)))
            .map_err(|p| invalid(format!("corrupt file: {}", panic_message(p.as_ref()))))?
            .map_err(|e| invalid(format!("cannot read the header: {e}")))?;
        let schema = reader_schema
            .clone()
            .unwrap_or_else(|| reader.writer_schema().clone());
        let names = ResolvedSchema::try_from(&schema)
            .map(|r| {
                r.get_names()
                    .iter()
                    .map(|(n, s)| (n.clone(), (*s).clone()))
                    .collect()
            })
            .map_err(|e| invalid(format!("cannot resolve the schema: {e}")))?;
        // Resolve only when the reader schema differs from the file's.
        let reader_schema = reader_schema.filter(|s| s != reader.writer_schema());
        Ok(AvroRows {
            name,
            reader: Some(reader),
            reader_schema,
            schema,
            conv: Converter {
                binary_as_string,
                extract_unions_by_type,
                names,
            },
            flatten,
            record: 0,
        })
    }

    fn fatal(&mut self, msg: String) -> Option<Result<InputRow, RowParseError>> {
        self.reader = None;
        Some(Err(RowParseError::fatal(format!(
            "error reading avro_ocf file [{}] after record {}: {msg}",
            self.name, self.record
        ))))
    }
}

impl Iterator for AvroRows {
    type Item = Result<InputRow, RowParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        let reader = self.reader.as_mut()?;
        let next = match catch_unwind(AssertUnwindSafe(|| reader.next())) {
            Ok(n) => n,
            Err(p) => return self.fatal(format!("corrupt data: {}", panic_message(p.as_ref()))),
        };
        let value = match next {
            None => {
                self.reader = None;
                return None;
            }
            Some(Err(e)) => return self.fatal(e.to_string()),
            Some(Ok(v)) => v,
        };
        self.record += 1;
        let value = match &self.reader_schema {
            None => value,
            Some(rs) => {
                let raw = format!("{value:?}");
                let value = plain_numbers(value);
                match catch_unwind(AssertUnwindSafe(|| value.resolve(rs))) {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) => {
                        return Some(Err(RowParseError::row(
                            format!(
                                "record {} of [{}] does not match the reader schema: {e}",
                                self.record, self.name
                            ),
                            Some(raw),
                        )));
                    }
                    Err(p) => return self.fatal(panic_message(p.as_ref())),
                }
            }
        };
        let row = match self.conv.convert(value, Some(&self.schema)) {
            Value::Object(m) => m,
            other => {
                return Some(Err(RowParseError::row(
                    format!(
                        "record {} of [{}] is not an Avro record",
                        self.record, self.name
                    ),
                    Some(other.to_string()),
                )));
            }
        };
        Some(Ok(match &self.flatten {
            Some(f) => f.apply(row),
            None => row,
        }))
    }
}

/// Replaces int- and long-based logical values (dates, times, timestamps) with their plain
/// numbers, so that schema resolution goes by the underlying type as Avro's specification (and
/// Druid, which ignores logical types) does: the `apache-avro` crate would not resolve a
/// `timestamp-millis` value against a reader's plain `long`, while a reader's logical type
/// accepts the plain number.
fn plain_numbers(v: AvroValue) -> AvroValue {
    match v {
        AvroValue::Date(i) | AvroValue::TimeMillis(i) => AvroValue::Int(i),
        AvroValue::TimeMicros(l)
        | AvroValue::TimestampMillis(l)
        | AvroValue::TimestampMicros(l)
        | AvroValue::TimestampNanos(l)
        | AvroValue::LocalTimestampMillis(l)
        | AvroValue::LocalTimestampMicros(l)
        | AvroValue::LocalTimestampNanos(l) => AvroValue::Long(l),
        AvroValue::Union(i, inner) => AvroValue::Union(i, Box::new(plain_numbers(*inner))),
        AvroValue::Array(items) => AvroValue::Array(items.into_iter().map(plain_numbers).collect()),
        AvroValue::Map(m) => {
            AvroValue::Map(m.into_iter().map(|(k, v)| (k, plain_numbers(v))).collect())
        }
        AvroValue::Record(fields) => AvroValue::Record(
            fields
                .into_iter()
                .map(|(k, v)| (k, plain_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The name a union branch is keyed by with `extractUnionsByType`.
fn branch_name(s: &Schema) -> String {
    match s {
        Schema::Null => "null".into(),
        Schema::Boolean => "boolean".into(),
        Schema::Int | Schema::Date | Schema::TimeMillis => "int".into(),
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => "long".into(),
        Schema::Float => "float".into(),
        Schema::Double => "double".into(),
        Schema::Bytes | Schema::BigDecimal => "bytes".into(),
        Schema::String => "string".into(),
        Schema::Array(_) => "array".into(),
        Schema::Map(_) => "map".into(),
        Schema::Union(_) => "union".into(),
        Schema::Record(r) => r.name.name().to_string(),
        Schema::Enum(e) => e.name.name().to_string(),
        Schema::Fixed(f) | Schema::Duration(f) => f.name.name().to_string(),
        Schema::Decimal(d) => match &d.inner {
            apache_avro::schema::InnerDecimalSchema::Fixed(f) => f.name.name().to_string(),
            _ => "bytes".into(),
        },
        Schema::Uuid(u) => match u {
            apache_avro::schema::UuidSchema::Fixed(f) => f.name.name().to_string(),
            apache_avro::schema::UuidSchema::Bytes => "bytes".into(),
            _ => "string".into(),
        },
        Schema::Ref { name } => name.name().to_string(),
    }
}

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

impl Converter {
    /// Follows a named reference to its definition.
    fn deref<'s>(&'s self, s: Option<&'s Schema>) -> Option<&'s Schema> {
        match s {
            Some(Schema::Ref { name }) => self.names.get(name),
            other => other,
        }
    }

    fn binary(&self, bytes: &[u8]) -> Value {
        if self.binary_as_string {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        } else {
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
    }

    /// Converts `v`, which follows `schema` when known (the schema is only needed for
    /// `extractUnionsByType` and record field order).
    fn convert(&self, v: AvroValue, schema: Option<&Schema>) -> Value {
        let schema = self.deref(schema);
        match v {
            AvroValue::Null => Value::Null,
            AvroValue::Boolean(b) => Value::Bool(b),
            AvroValue::Int(i) | AvroValue::Date(i) | AvroValue::TimeMillis(i) => Value::from(i),
            AvroValue::Long(l)
            | AvroValue::TimeMicros(l)
            | AvroValue::TimestampMillis(l)
            | AvroValue::TimestampMicros(l)
            | AvroValue::TimestampNanos(l)
            | AvroValue::LocalTimestampMillis(l)
            | AvroValue::LocalTimestampMicros(l)
            | AvroValue::LocalTimestampNanos(l) => Value::from(l),
            // The shortest decimal form of the float, so 1.1f32 reads as 1.1.
            AvroValue::Float(f) => float(f.to_string().parse::<f64>().unwrap_or(f64::NAN)),
            AvroValue::Double(d) => float(d),
            AvroValue::Bytes(b) | AvroValue::Fixed(_, b) => self.binary(&b),
            AvroValue::String(s) => Value::String(s),
            AvroValue::Enum(_, symbol) => Value::String(symbol),
            AvroValue::Uuid(u) => Value::String(u.to_string()),
            AvroValue::Decimal(d) => match Vec::<u8>::try_from(&d) {
                Ok(bytes) => self.binary(&bytes),
                Err(_) => Value::Null,
            },
            AvroValue::BigDecimal(d) => Value::String(d.to_string()),
            AvroValue::Duration(d) => self.binary(&<[u8; 12]>::from(d)),
            AvroValue::Union(idx, inner) => {
                let variant = match schema {
                    Some(Schema::Union(u)) => u.variants().get(idx as usize),
                    _ => None,
                };
                if self.extract_unions_by_type && !matches!(*inner, AvroValue::Null) {
                    let key = variant
                        .map(|s| branch_name(self.deref(Some(s)).unwrap_or(s)))
                        .unwrap_or_else(|| idx.to_string());
                    let mut m = Map::new();
                    m.insert(key, self.convert(*inner, variant));
                    Value::Object(m)
                } else {
                    self.convert(*inner, variant)
                }
            }
            AvroValue::Array(items) => {
                let item_schema = match schema {
                    Some(Schema::Array(a)) => Some(a.items.as_ref()),
                    _ => None,
                };
                Value::Array(
                    items
                        .into_iter()
                        .map(|i| self.convert(i, item_schema))
                        .collect(),
                )
            }
            AvroValue::Map(m) => {
                let value_schema = match schema {
                    Some(Schema::Map(ms)) => Some(ms.types.as_ref()),
                    _ => None,
                };
                let mut entries: Vec<(String, AvroValue)> = m.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k, self.convert(v, value_schema)))
                        .collect(),
                )
            }
            AvroValue::Record(fields) => {
                let record = match schema {
                    Some(Schema::Record(r)) => Some(r),
                    _ => None,
                };
                Value::Object(
                    fields
                        .into_iter()
                        .map(|(k, v)| {
                            let fs = record.and_then(|r| {
                                r.lookup
                                    .get(&k)
                                    .and_then(|i| r.fields.get(*i))
                                    .map(|f| &f.schema)
                            });
                            let converted = self.convert(v, fs);
                            (k, converted)
                        })
                        .collect(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::InputFormat;
    use super::*;
    use apache_avro::Writer;
    use apache_avro::types::Record;
    use bytes::Bytes;
    use serde_json::json;

    fn read(data: Vec<u8>, format: Value) -> Vec<Result<Value, RowParseError>> {
        let format: InputFormat = serde_json::from_value(format).unwrap();
        format.validate().unwrap();
        format
            .reader(&InputEntity::Inline(Bytes::from(data)))
            .unwrap()
            .map(|r| r.map(Value::Object))
            .collect()
    }

    const SCHEMA: &str = r#"{
        "type": "record", "name": "Event", "namespace": "test",
        "fields": [
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "page", "type": "string"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "int"}},
            {"name": "raw", "type": "bytes"},
            {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
            {"name": "ratio", "type": "float"},
            {"name": "maybe", "type": ["null", "string", "long"]},
            {"name": "geo", "type": {"type": "record", "name": "Geo", "fields": [
                {"name": "city", "type": "string"},
                {"name": "zip", "type": ["null", "int"]}
            ]}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}}
        ]
    }"#;

    fn file(codec: apache_avro::Codec) -> Vec<u8> {
        let schema = Schema::parse_str(SCHEMA).unwrap();
        let mut w = Writer::with_codec(&schema, Vec::new(), codec).unwrap();
        for (i, maybe) in [
            AvroValue::Union(1, Box::new(AvroValue::String("s".into()))),
            AvroValue::Union(2, Box::new(AvroValue::Long(7))),
            AvroValue::Union(0, Box::new(AvroValue::Null)),
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = Record::new(&schema).unwrap();
            r.put(
                "ts",
                AvroValue::TimestampMillis(1_442_016_000_000 + i as i64),
            );
            r.put("micros", AvroValue::TimestampMicros(1_442_016_000_000_123));
            r.put("page", format!("page-{i}"));
            r.put(
                "tags",
                AvroValue::Array(vec![
                    AvroValue::String("b".into()),
                    AvroValue::String("a".into()),
                ]),
            );
            r.put(
                "attrs",
                AvroValue::Map(
                    [
                        ("z".to_string(), AvroValue::Int(1)),
                        ("a".to_string(), AvroValue::Int(2)),
                    ]
                    .into_iter()
                    .collect(),
                ),
            );
            r.put("raw", AvroValue::Bytes(b"hi".to_vec()));
            r.put("color", AvroValue::Enum(1, "GREEN".into()));
            r.put("ratio", AvroValue::Float(1.1));
            r.put("maybe", maybe);
            r.put(
                "geo",
                AvroValue::Record(vec![
                    ("city".into(), AvroValue::String("Paris".into())),
                    (
                        "zip".into(),
                        AvroValue::Union(1, Box::new(AvroValue::Int(75001))),
                    ),
                ]),
            );
            r.put("day", AvroValue::Date(16690));
            w.append_value(r).unwrap();
        }
        w.into_inner().unwrap()
    }

    #[test]
    fn reads_records_like_druid() {
        for codec in [
            apache_avro::Codec::Null,
            apache_avro::Codec::Deflate(Default::default()),
            apache_avro::Codec::Snappy,
        ] {
            let rows = read(file(codec), json!({"type": "avro_ocf"}));
            assert_eq!(rows.len(), 3);
            let r0 = rows[0].as_ref().unwrap();
            assert_eq!(
                r0,
                &json!({
                    "ts": 1_442_016_000_000i64,
                    "micros": 1_442_016_000_000_123i64,
                    "page": "page-0",
                    "tags": ["b", "a"],
                    "attrs": {"a": 2, "z": 1},
                    "raw": "aGk=",
                    "color": "GREEN",
                    "ratio": 1.1,
                    "maybe": "s",
                    "geo": {"city": "Paris", "zip": 75001},
                    "day": 16690
                })
            );
            assert_eq!(rows[1].as_ref().unwrap()["maybe"], json!(7));
            assert_eq!(rows[2].as_ref().unwrap()["maybe"], Value::Null);
        }
    }

    #[test]
    fn binary_as_string_unions_by_type_and_flatten() {
        let rows = read(
            file(apache_avro::Codec::Null),
            json!({
                "type": "avro_ocf",
                "binaryAsString": true,
                "extractUnionsByType": true,
                "flattenSpec": {"fields": [
                    {"type": "path", "name": "city", "expr": "$.geo.city"},
                    {"type": "path", "name": "zip", "expr": "$.geo.zip.int"},
                    {"type": "path", "name": "maybeLong", "expr": "$.maybe.long"},
                    {"type": "path", "name": "a", "expr": "$.attrs.a"}
                ]}
            }),
        );
        let r0 = rows[0].as_ref().unwrap();
        assert_eq!(r0["raw"], json!("hi"));
        assert_eq!(r0["maybe"], json!({"string": "s"}));
        assert_eq!(r0["city"], json!("Paris"));
        assert_eq!(r0["zip"], json!(75001));
        assert_eq!(r0["a"], json!(2));
        assert_eq!(r0["maybeLong"], Value::Null);
        assert_eq!(rows[1].as_ref().unwrap()["maybeLong"], json!(7));
        assert_eq!(rows[2].as_ref().unwrap()["maybe"], Value::Null);
    }

    #[test]
    fn reader_schema_projects_and_defaults() {
        let reader = json!({
            "type": "record", "name": "Event", "namespace": "test",
            "fields": [
                {"name": "page", "type": "string"},
                {"name": "added", "type": "long", "default": 42}
            ]
        });
        let rows = read(
            file(apache_avro::Codec::Null),
            json!({"type": "avro_ocf", "schema": reader}),
        );
        assert_eq!(
            rows[0].as_ref().unwrap(),
            &json!({"page": "page-0", "added": 42})
        );
        // A reader schema that cannot resolve: each record is unparseable, reading goes on.
        let bad = json!({
            "type": "record", "name": "Event", "namespace": "test",
            "fields": [{"name": "page", "type": "int"}]
        });
        let rows = read(
            file(apache_avro::Codec::Null),
            json!({"type": "avro_ocf", "schema": bad}),
        );
        assert_eq!(rows.len(), 3);
        let e = rows[0].as_ref().unwrap_err();
        assert!(!e.fatal && e.message.contains("reader schema"), "{e}");
    }

    #[test]
    fn bad_specs_and_corrupt_files() {
        let f: InputFormat =
            serde_json::from_value(json!({"type": "avro_ocf", "schema": {"type": "recrd"}}))
                .unwrap();
        let e = f.validate().unwrap_err().to_string();
        assert!(e.contains("[schema]"), "{e}");
        let e = serde_json::from_value::<InputFormat>(
            json!({"type": "avro_ocf", "binaryAsStrin": true}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("binaryAsStrin"), "{e}");

        let f: InputFormat = serde_json::from_value(json!({"type": "avro_ocf"})).unwrap();
        // Not an Avro file at all: the file cannot be opened.
        let e = f
            .reader(&InputEntity::Inline(Bytes::from_static(b"{\"a\": 1}\n")))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("header"), "{e}");
        // Truncated in the middle of a block: records before it, then one fatal error.
        let mut data = file(apache_avro::Codec::Null);
        data.truncate(data.len() - 20);
        let rows: Vec<_> = f
            .reader(&InputEntity::Inline(Bytes::from(data)))
            .unwrap()
            .collect();
        let last = rows.last().unwrap().as_ref().unwrap_err();
        assert!(last.fatal, "{last}");
        // Garbage after a valid header.
        let mut data = file(apache_avro::Codec::Null);
        let n = data.len();
        for b in &mut data[n - 60..n - 16] {
            *b = 0xff;
        }
        let rows: Vec<_> = f
            .reader(&InputEntity::Inline(Bytes::from(data)))
            .unwrap()
            .collect();
        assert!(rows.iter().any(|r| r.is_err()));
    }
}
