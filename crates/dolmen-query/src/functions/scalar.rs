//! Druid SQL string, numeric, conditional, IP and JSON scalar functions that DataFusion lacks or spells differently (`docs/querying/sql-scalar.md`, `sql-json-functions.md`).

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

/// The scalar functions of this module, registered by [`super::register_druid_functions`].
pub fn udfs() -> Vec<ScalarUDF> {
    Vec::new()
}

/// The aggregate functions of this module, registered by [`super::register_druid_functions`].
pub fn udafs() -> Vec<AggregateUDF> {
    Vec::new()
}
