//! Apache DataSketches SQL aggregations (`DS_HLL`, `DS_THETA`, `DS_QUANTILES_SKETCH`, `APPROX_COUNT_DISTINCT_DS_*`, `APPROX_QUANTILE_DS`) and their post-processing functions (`docs/development/extensions-core/datasketches-*.md`).

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

/// The scalar functions of this module, registered by [`super::register_druid_functions`].
pub fn udfs() -> Vec<ScalarUDF> {
    Vec::new()
}

/// The aggregate functions of this module, registered by [`super::register_druid_functions`].
pub fn udafs() -> Vec<AggregateUDF> {
    Vec::new()
}
