//! Druid SQL array (`ARRAY_*`) and multi-value string (`MV_*`) functions, and the `ARRAY_CONCAT_AGG` aggregation (`docs/querying/sql-array-functions.md`, `sql-multivalue-string-functions.md`).

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

/// The scalar functions of this module, registered by [`super::register_druid_functions`].
pub fn udfs() -> Vec<ScalarUDF> {
    Vec::new()
}

/// The aggregate functions of this module, registered by [`super::register_druid_functions`].
pub fn udafs() -> Vec<AggregateUDF> {
    Vec::new()
}
