//! Test fixtures shared by this crate's tests and by dolmen-query's tests of the catalogue
//! (through the `test-fixtures` feature, a dev-dependency feature only): sessions with the
//! catalogue registered and Druid's test datasources.

use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};

/// A session with the catalogue registered, case-sensitive identifiers and 4 target
/// partitions (so that partial aggregates are merged).
pub fn context() -> SessionContext {
    let config = SessionConfig::new()
        .set_bool("datafusion.sql_parser.enable_ident_normalization", false)
        .with_target_partitions(4);
    let ctx = SessionContext::new_with_config(config);
    crate::register_druid_functions(&ctx);
    ctx
}

/// Registers `batches` as the in-memory table `name`, one partition per batch.
///
/// # Panics
/// When `batches` is empty or their schemas differ.
pub fn register(ctx: &SessionContext, name: &str, batches: Vec<RecordBatch>) {
    let schema = batches[0].schema();
    let parts = batches.into_iter().map(|b| vec![b]).collect();
    ctx.register_table(name, Arc::new(MemTable::try_new(schema, parts).unwrap()))
        .unwrap();
}

/// Druid's `druid.foo` test datasource (SQL-compatible null handling), as used by Druid's
/// `HllSketchSqlAggregatorTest` and `DoublesSketchSqlAggregatorTest`: `dim1`, `dim2`
/// (VARCHAR), `m1` (DOUBLE), `cnt` (BIGINT), 6 rows in 2 partitions.
///
/// # Panics
/// Never in practice (the batches are well-formed).
pub fn foo(ctx: &SessionContext) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("dim1", DataType::Utf8, true),
        Field::new("dim2", DataType::Utf8, true),
        Field::new("m1", DataType::Float64, true),
        Field::new("cnt", DataType::Int64, true),
    ]));
    let batch = |dim1: Vec<&str>, dim2: Vec<Option<&str>>, m1: Vec<f64>| {
        let n = m1.len();
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(dim1)),
                Arc::new(StringArray::from(dim2)),
                Arc::new(Float64Array::from(m1)),
                Arc::new(Int64Array::from(vec![1; n])),
            ],
        )
        .unwrap()
    };
    register(
        ctx,
        "foo",
        vec![
            batch(
                vec!["", "10.1", "2"],
                vec![Some("a"), None, Some("")],
                vec![1.0, 2.0, 3.0],
            ),
            batch(
                vec!["1", "def", "abc"],
                vec![Some("a"), Some("abc"), None],
                vec![4.0, 5.0, 6.0],
            ),
        ],
    );
}
