//! The `lookup` schema: every loaded lookup as a two-column table, `SELECT k, v FROM
//! lookup."name"` (Druid's `LookupSchema`, `LookupTable`; `docs/querying/datasource.md`
//! "lookup", `docs/querying/lookups.md` "Query Syntax").
//!
//! Columns `k` and `v`, both VARCHAR and nullable (Druid's `LookupColumnSelectorFactory` key and
//! value columns, typed STRING). Rows are the table's entries sorted by key (Druid's order is
//! its map's). The tables join like any other: `FROM sales JOIN lookup.store_to_country l ON
//! sales.store = l.k`. `INFORMATION_SCHEMA.TABLES` lists them with `TABLE_TYPE` `TABLE`,
//! `IS_JOINABLE` and `IS_BROADCAST` `YES`, as Druid's `LookupTable` reports (see
//! [`crate::system`]). Only lookups whose table is loaded are listed; a lookup that failed to
//! load is not a table, as in Druid where the broker does not hold it.
//!
//! A table takes its lookup's table snapshot when the query is planned. It is not a
//! [`crate::table::DatasourceTable`], so the plan cache ([`crate::plan_cache::cacheable`]) never
//! keeps a plan scanning it: a changed lookup is read by the very next query.

use std::sync::Arc;

use arrow::array::{RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use dolmen_lookup::{LookupMap, LookupRegistry};

/// The schema's name.
pub const LOOKUP_SCHEMA: &str = "lookup";
/// The key column (Druid's `LookupColumnSelectorFactory.KEY_COLUMN`).
pub const KEY_COLUMN: &str = "k";
/// The value column (Druid's `LookupColumnSelectorFactory.VALUE_COLUMN`).
pub const VALUE_COLUMN: &str = "v";

/// Rows per batch of a lookup table scan.
const BATCH_ROWS: usize = 8192;

/// The columns of every lookup table: `k`, `v`, nullable VARCHAR.
pub fn lookup_table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY_COLUMN, DataType::Utf8, true),
        Field::new(VALUE_COLUMN, DataType::Utf8, true),
    ]))
}

/// The `lookup` schema over the process's lookups.
#[derive(Debug)]
pub struct LookupSchema {
    lookups: Arc<LookupRegistry>,
}

impl LookupSchema {
    /// The schema over `lookups`.
    pub fn new(lookups: Arc<LookupRegistry>) -> LookupSchema {
        LookupSchema { lookups }
    }
}

#[async_trait]
impl SchemaProvider for LookupSchema {
    fn table_names(&self) -> Vec<String> {
        self.lookups.loaded_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.lookups.map(name).ok().map(|map| {
            Arc::new(LookupTable {
                name: name.to_string(),
                map,
            }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.lookups.map(name).is_ok()
    }
}

/// One lookup as a table, bound to the lookup's table as it was when the query was planned.
#[derive(Debug)]
pub struct LookupTable {
    name: String,
    map: Arc<LookupMap>,
}

impl LookupTable {
    /// The lookup's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The rows, sorted by key, in batches of [`BATCH_ROWS`].
    fn batches(&self) -> Result<Vec<RecordBatch>> {
        let schema = lookup_table_schema();
        let entries = self.map.sorted_entries();
        let mut out = Vec::with_capacity(entries.len().div_ceil(BATCH_ROWS));
        for chunk in entries.chunks(BATCH_ROWS) {
            let bytes = |f: fn(&(&str, &str)) -> usize| chunk.iter().map(f).sum::<usize>();
            let mut k = StringBuilder::with_capacity(chunk.len(), bytes(|e| e.0.len()));
            let mut v = StringBuilder::with_capacity(chunk.len(), bytes(|e| e.1.len()));
            for (key, value) in chunk {
                k.append_value(key);
                v.append_value(value);
            }
            out.push(RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(k.finish()), Arc::new(v.finish())],
            )?);
        }
        Ok(out)
    }
}

#[async_trait]
impl TableProvider for LookupTable {
    fn schema(&self) -> SchemaRef {
        lookup_table_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        MemTable::try_new(lookup_table_schema(), vec![self.batches()?])?
            .scan(state, projection, filters, limit)
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn rows_are_sorted_by_key_in_batches() {
        let entries: HashMap<String, String> = (0..BATCH_ROWS + 5)
            .map(|i| (format!("k{i:06}"), format!("v{i}")))
            .collect();
        let table = LookupTable {
            name: "l".into(),
            map: Arc::new(LookupMap::new(entries, false)),
        };
        let batches = table.batches().unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[1].num_rows(), 5);
        let keys = arrow::array::AsArray::as_string::<i32>(batches[0].column(0));
        assert_eq!(keys.value(0), "k000000");
        assert_eq!(keys.value(1), "k000001");
        let empty = LookupTable {
            name: "e".into(),
            map: Arc::new(LookupMap::default()),
        };
        assert!(empty.batches().unwrap().is_empty());
    }
}
