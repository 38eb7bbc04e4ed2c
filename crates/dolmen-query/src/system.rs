//! `INFORMATION_SCHEMA`: Druid's SQL metadata tables `SCHEMATA`, `TABLES`, `COLUMNS` and
//! `ROUTINES` (reference-behaviour "Metadata tables", `docs/querying/sql-metadata-tables.md`;
//! column values as Druid's `InformationSchema.java` fills them), built from the live segment
//! view each time a query names one, so they always show the datasources queryable right now.
//!
//! Values, per column of `COLUMNS`:
//! - `ORDINAL_POSITION` 1-based; `COLUMN_DEFAULT` the empty string; `IS_NULLABLE` `NO` for
//!   `__time`, `YES` otherwise (SQL-compatible nulls).
//! - `DATA_TYPE` the SQL type name the result headers use (`VARCHAR`, `BIGINT`, `DOUBLE`,
//!   `FLOAT`, `TIMESTAMP`, `OTHER` for sketch columns, ...); a multi-value string is `VARCHAR`.
//! - `NUMERIC_PRECISION` / `_RADIX` / `_SCALE`: Calcite's precisions (`BIGINT` 19, `INTEGER`
//!   10, `DOUBLE` 15, `FLOAT` 7), radix 10, scale 0 for integer types and null for floating
//!   ones; `DATETIME_PRECISION` 3 for `TIMESTAMP` (milliseconds); `CHARACTER_SET_NAME`
//!   `UTF-16LE` and `COLLATION_NAME` `UTF-16LE$en_US$primary` for `VARCHAR` (Calcite's
//!   defaults, as Druid reports them); `JDBC_TYPE` the `java.sql.Types` code.
//!
//! Schemas listed are the ones Dolmen answers: `druid` (`TABLE_TYPE` `TABLE`) and
//! `INFORMATION_SCHEMA` (`SYSTEM_TABLE`). Identifiers are case-sensitive, as in Druid:
//! `INFORMATION_SCHEMA.TABLES`, not `information_schema.tables`.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use dolmen_storage::SegmentView;

use crate::table::datasource_schema;
use crate::writer::ColumnInfo;

/// The catalog name Druid reports.
pub const CATALOG: &str = "druid";
/// Name of the metadata schema.
pub const INFORMATION_SCHEMA: &str = "INFORMATION_SCHEMA";
/// Name of the datasource schema.
pub const DRUID_SCHEMA: &str = "druid";

const TABLE_NAMES: [&str; 4] = ["COLUMNS", "ROUTINES", "SCHEMATA", "TABLES"];

/// A SQL function as `ROUTINES` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Routine {
    /// Upper-case function name.
    pub name: String,
    /// An aggregate function (`IS_AGGREGATOR` `YES`).
    pub aggregator: bool,
}

/// The `INFORMATION_SCHEMA` schema.
#[derive(Debug)]
pub struct InformationSchema {
    view: Arc<SegmentView>,
    routines: Vec<Routine>,
}

impl InformationSchema {
    /// The schema over the live view; `routines` are the session's functions.
    pub fn new(view: Arc<SegmentView>, mut routines: Vec<Routine>) -> InformationSchema {
        routines.sort();
        routines.dedup();
        InformationSchema { view, routines }
    }

    /// Every table's (schema, name, type, columns), datasources first.
    fn tables(&self) -> Vec<(&'static str, String, &'static str, SchemaRef)> {
        let mut out = Vec::new();
        let mut names = self.view.data_sources();
        names.sort();
        for ds in names {
            if let Some(t) = self.view.timeline(&ds).filter(|t| !t.is_empty()) {
                out.push((DRUID_SCHEMA, ds, "TABLE", datasource_schema(&t)));
            }
        }
        for t in TABLE_NAMES {
            out.push((
                INFORMATION_SCHEMA,
                t.to_string(),
                "SYSTEM_TABLE",
                table_schema(t).expect("known table"),
            ));
        }
        out
    }

    fn build(&self, name: &str) -> Option<RecordBatch> {
        let schema = table_schema(name)?;
        let columns: Vec<ArrayRef> = match name {
            "SCHEMATA" => {
                let mut c = strings(7);
                for s in [DRUID_SCHEMA, INFORMATION_SCHEMA] {
                    c[0].append_value(CATALOG);
                    c[1].append_value(s);
                    for b in &mut c[2..] {
                        b.append_null();
                    }
                }
                finish(c)
            }
            "TABLES" => {
                let mut c = strings(6);
                for (schema, table, ty, _) in self.tables() {
                    for (b, v) in c.iter_mut().zip([CATALOG, schema, &table, ty, "NO", "NO"]) {
                        b.append_value(v);
                    }
                }
                finish(c)
            }
            "COLUMNS" => self.columns(),
            "ROUTINES" => {
                let mut c = strings(6);
                for r in &self.routines {
                    c[0].append_value(CATALOG);
                    c[1].append_value(INFORMATION_SCHEMA);
                    c[2].append_value(&r.name);
                    c[3].append_value("FUNCTION");
                    c[4].append_value(if r.aggregator { "YES" } else { "NO" });
                    c[5].append_null();
                }
                finish(c)
            }
            _ => return None,
        };
        RecordBatch::try_new(schema, columns).ok()
    }

    fn columns(&self) -> Vec<ArrayRef> {
        let mut text = strings(4);
        let mut ordinal = Int64Builder::new();
        let mut default_nullable_type = strings(3);
        let mut numbers: Vec<Int64Builder> = (0..6).map(|_| Int64Builder::new()).collect();
        let mut charset = strings(2);
        let mut jdbc = Int64Builder::new();
        for (schema, table, _, fields) in self.tables() {
            for (i, f) in fields.fields().iter().enumerate() {
                let info = ColumnInfo::from_field(f);
                let sql = info.sql_type.as_str();
                for (b, v) in text.iter_mut().zip([CATALOG, schema, &table, f.name()]) {
                    b.append_value(v);
                }
                ordinal.append_value(i as i64 + 1);
                default_nullable_type[0].append_value("");
                default_nullable_type[1].append_value(if f.is_nullable() { "YES" } else { "NO" });
                default_nullable_type[2].append_value(sql);
                let t = sql_type_facts(sql);
                // CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH: not reported.
                numbers[0].append_null();
                numbers[1].append_null();
                numbers[2].append_option(t.precision);
                numbers[3].append_option(t.precision.map(|_| 10));
                numbers[4].append_option(t.scale);
                numbers[5].append_option(t.datetime_precision);
                if sql == "VARCHAR" {
                    charset[0].append_value("UTF-16LE");
                    charset[1].append_value("UTF-16LE$en_US$primary");
                } else {
                    charset[0].append_null();
                    charset[1].append_null();
                }
                jdbc.append_value(t.jdbc);
            }
        }
        let mut out = finish(text);
        out.push(Arc::new(ordinal.finish()));
        out.extend(finish(default_nullable_type));
        out.extend(
            numbers
                .into_iter()
                .map(|mut b| Arc::new(b.finish()) as ArrayRef),
        );
        out.extend(finish(charset));
        out.push(Arc::new(jdbc.finish()));
        out
    }
}

/// What `COLUMNS` reports for a SQL type.
struct SqlTypeFacts {
    precision: Option<i64>,
    scale: Option<i64>,
    datetime_precision: Option<i64>,
    jdbc: i64,
}

/// Calcite's precision and scale and the `java.sql.Types` code of a SQL type name.
fn sql_type_facts(sql: &str) -> SqlTypeFacts {
    let (precision, scale, datetime_precision, jdbc) = match sql {
        "BIGINT" => (Some(19), Some(0), None, -5),
        "INTEGER" => (Some(10), Some(0), None, 4),
        "SMALLINT" => (Some(5), Some(0), None, 5),
        "TINYINT" => (Some(3), Some(0), None, -6),
        "DOUBLE" => (Some(15), None, None, 8),
        "FLOAT" => (Some(7), None, None, 6),
        "DECIMAL" => (Some(19), Some(0), None, 3),
        "BOOLEAN" => (None, None, None, 16),
        "TIMESTAMP" => (None, None, Some(3), 93),
        "DATE" => (None, None, Some(0), 91),
        "VARCHAR" => (None, None, None, 12),
        "ARRAY" => (None, None, None, 2003),
        _ => (None, None, None, 1111),
    };
    SqlTypeFacts {
        precision,
        scale,
        datetime_precision,
        jdbc,
    }
}

fn strings(n: usize) -> Vec<StringBuilder> {
    (0..n).map(|_| StringBuilder::new()).collect()
}

fn finish(builders: Vec<StringBuilder>) -> Vec<ArrayRef> {
    builders
        .into_iter()
        .map(|mut b| Arc::new(b.finish()) as ArrayRef)
        .collect()
}

/// The columns of an `INFORMATION_SCHEMA` table, in Druid's order.
fn table_schema(name: &str) -> Option<SchemaRef> {
    let text = |n: &str| Field::new(n, DataType::Utf8, true);
    let long = |n: &str| Field::new(n, DataType::Int64, true);
    let fields = match name {
        "SCHEMATA" => [
            "CATALOG_NAME",
            "SCHEMA_NAME",
            "SCHEMA_OWNER",
            "DEFAULT_CHARACTER_SET_CATALOG",
            "DEFAULT_CHARACTER_SET_SCHEMA",
            "DEFAULT_CHARACTER_SET_NAME",
            "SQL_PATH",
        ]
        .map(text)
        .to_vec(),
        "TABLES" => [
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_TYPE",
            "IS_JOINABLE",
            "IS_BROADCAST",
        ]
        .map(text)
        .to_vec(),
        "COLUMNS" => vec![
            text("TABLE_CATALOG"),
            text("TABLE_SCHEMA"),
            text("TABLE_NAME"),
            text("COLUMN_NAME"),
            long("ORDINAL_POSITION"),
            text("COLUMN_DEFAULT"),
            text("IS_NULLABLE"),
            text("DATA_TYPE"),
            long("CHARACTER_MAXIMUM_LENGTH"),
            long("CHARACTER_OCTET_LENGTH"),
            long("NUMERIC_PRECISION"),
            long("NUMERIC_PRECISION_RADIX"),
            long("NUMERIC_SCALE"),
            long("DATETIME_PRECISION"),
            text("CHARACTER_SET_NAME"),
            text("COLLATION_NAME"),
            long("JDBC_TYPE"),
        ],
        "ROUTINES" => [
            "ROUTINE_CATALOG",
            "ROUTINE_SCHEMA",
            "ROUTINE_NAME",
            "ROUTINE_TYPE",
            "IS_AGGREGATOR",
            "SIGNATURES",
        ]
        .map(text)
        .to_vec(),
        _ => return None,
    };
    Some(Arc::new(Schema::new(fields)))
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        TABLE_NAMES.iter().map(|t| (*t).to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(batch) = self.build(name) else {
            return Ok(None);
        };
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]])?;
        Ok(Some(Arc::new(table)))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLE_NAMES.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_table_builds_with_its_schema() {
        let metadata: Arc<dyn dolmen_metadata::MetadataStore> = Arc::new(
            dolmen_metadata::SqlMetadataStore::connect("sqlite::memory:")
                .await
                .unwrap(),
        );
        let view = Arc::new(SegmentView::new(metadata));
        let s = InformationSchema::new(
            view,
            vec![
                Routine {
                    name: "TIME_FLOOR".into(),
                    aggregator: false,
                },
                Routine {
                    name: "SUM".into(),
                    aggregator: true,
                },
            ],
        );
        for t in TABLE_NAMES {
            let b = s.build(t).unwrap();
            assert_eq!(b.schema(), table_schema(t).unwrap());
        }
        // With no datasources, TABLES lists the four metadata tables; COLUMNS their 36 columns.
        assert_eq!(s.build("TABLES").unwrap().num_rows(), 4);
        assert_eq!(s.build("COLUMNS").unwrap().num_rows(), 7 + 6 + 17 + 6);
        assert_eq!(s.build("ROUTINES").unwrap().num_rows(), 2);
        assert!(s.build("NOPE").is_none());
    }
}
