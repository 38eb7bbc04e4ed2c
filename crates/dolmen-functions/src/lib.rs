//! The Druid SQL function catalogue for DataFusion: Druid's scalar functions, aggregates and
//! their registration in a session.
//!
//! DataFusion keeps its functions in `datafusion-functions*` crates apart from its planner;
//! Dolmen does the same. This crate holds every Druid function a query can call by name, each a
//! [`ScalarUDFImpl`](datafusion::logical_expr::ScalarUDFImpl) or
//! [`AggregateUDFImpl`](datafusion::logical_expr::AggregateUDFImpl) over Arrow arrays:
//!
//! | module | functions (Druid docs: `docs/querying/sql-*.md`) |
//! |---|---|
//! | [`time`] | `TIME_FLOOR`, `TIME_CEIL`, `TIME_SHIFT`, `TIME_EXTRACT`, `TIME_PARSE`, `TIME_FORMAT`, `MILLIS_TO_TIMESTAMP`, `TIMESTAMP_TO_MILLIS`, `TIME_IN_INTERVAL`, `SUBTRACT_MONTHS` ([`period`]: their vectorized bucketing kernels) |
//! | [`scalar`] | string, numeric, JSON (`JSON_VALUE`, `JSON_QUERY`, ..), IP, `NVL`, `LATEST`/`EARLIEST`, .. scalar functions and aggregates |
//! | [`arrays`] | `ARRAY_*` and `MV_*` functions and array aggregates |
//! | [`json_array`] | `JSON_QUERY_ARRAY` |
//! | [`sketches`], [`tuple`](mod@tuple), [`complex`] | DataSketches HLL, theta, quantiles and tuple sketch aggregates and post-aggregation functions; `DECODE_BASE64_COMPLEX` |
//! | [`approx`], [`approx_histogram`], [`histogram`] | `APPROX_COUNT_DISTINCT` (Druid's HyperUnique), `APPROX_QUANTILE`, `APPROX_QUANTILE_FIXED_BUCKETS` |
//! | [`bloom`] | `BLOOM_FILTER`, `BLOOM_FILTER_TEST` |
//! | [`lookup`] | `LOOKUP` over a [`dolmen_lookup::LookupRegistry`] (registered per session by [`lookup::register`]) |
//! | [`agg_size`] | the helpers of Druid's expression aggregations |
//!
//! [`register_druid_functions`] puts all of them (and the `SUBSTRING` planner) in a
//! `SessionContext`. What stays in dolmen-query is what needs the SQL planner or the query
//! engine: the Druid SQL rewrites that call these functions (`FLOOR(ts TO unit)`, `sqlTimeZone`,
//! the multi-value rewrite and its internal `__mv_*` functions), the `EXTERN` table function of
//! SQL ingestion, the result writers and the dictionary-aware grouping; dolmen-query registers
//! those beside this catalogue (ADR 0028). Number text follows Java's rules
//! ([`dolmen_common::java_number`]), shared with the result writers.
//!
//! This crate depends on Arrow, DataFusion and Dolmen's lower crates only (common, segment,
//! sketch, lookup), never on dolmen-query, so it builds beside the rest of the workspace.

pub mod agg_size;
pub mod approx;
pub mod approx_histogram;
pub mod arrays;
pub mod bloom;
pub mod complex;
pub mod dictionary_memo;
pub mod histogram;
pub mod json_array;
pub mod lookup;
pub mod period;
pub mod scalar;
pub mod sketches;
#[cfg(any(test, feature = "test-fixtures"))]
pub mod test_fixtures;
pub mod time;
pub mod tuple;

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;

pub use time::{DruidTimeFunction, DruidTimeUdf, ExtractUnit, TIMESTAMP_TYPE, druid_udfs};

/// Registers the catalogue in `ctx` (every function of this crate but `LOOKUP`, which
/// [`lookup::register`] adds with a session's lookups) and Druid's `SUBSTRING` planner,
/// replacing functions of the same names.
pub fn register_druid_functions(ctx: &SessionContext) {
    // SUBSTRING/SUBSTR reach DataFusion as an expression its planners (tried in order) turn into
    // a call, not a function looked up by name: Druid's planner goes first. The state is
    // rebuilt before anything else is registered, while its functions are DataFusion's own
    // (rebuilding re-registers every function under its aliases).
    {
        let state = ctx.state_ref();
        let mut state = state.write();
        let mut builder =
            datafusion::execution::SessionStateBuilder::new_from_existing(state.clone())
                .with_session_id(state.session_id().to_string());
        let planners = builder.expr_planners().get_or_insert_with(Vec::new);
        planners.insert(0, Arc::new(scalar::DruidSubstringPlanner));
        *state = builder.build();
    }
    register_druid_udfs(ctx);
}

/// Registers Dolmen's functions (the part of [`register_druid_functions`] that a session
/// rebuilt with `SessionStateBuilder::new_from_existing` must get again: the rebuild
/// re-registers every function under its aliases, which can put a DataFusion built-in back
/// over a Druid override of one of its names).
pub fn register_druid_udfs(ctx: &SessionContext) {
    for udf in time::druid_udfs() {
        ctx.register_udf(udf);
    }
    ctx.register_udaf(approx::approx_count_distinct());
    ctx.register_udaf(histogram::approx_quantile_fixed_buckets());
    ctx.register_udaf(approx_histogram::approx_quantile());
    ctx.register_udaf(bloom::bloom_filter());
    for udf in scalar::udfs()
        .into_iter()
        .chain(arrays::udfs())
        .chain(sketches::udfs())
        .chain(tuple::udfs())
        .chain([
            complex::decode_base64_complex(),
            bloom::bloom_filter_test(),
            agg_size::udf(),
            agg_size::input_udf(),
            json_array::udf(),
        ])
    {
        ctx.register_udf(udf);
    }
    for udaf in arrays::udafs()
        .into_iter()
        .chain(scalar::udafs())
        .chain(sketches::udafs())
        .chain(tuple::udafs())
    {
        ctx.register_udaf(udaf);
    }
}

/// The values of the literal arguments of an aggregate call after its first (`None` where an
/// argument is not a literal): the parameters aggregators read when they are built.
pub(crate) fn literal_args(
    exprs: &[Arc<dyn datafusion::physical_expr::PhysicalExpr>],
) -> Vec<Option<datafusion::common::ScalarValue>> {
    exprs
        .iter()
        .skip(1)
        .map(|e| {
            e.downcast_ref::<datafusion::physical_expr::expressions::Literal>()
                .map(|l| l.value().clone())
        })
        .collect()
}

pub(crate) fn is_string(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

pub(crate) fn is_integer(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
    )
}

/// The text of a string literal value (any of Arrow's string types).
pub(crate) fn scalar_str(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use arrow::array::{Array, AsArray};
    use arrow::compute::kernels::cast::cast;
    use arrow::datatypes::DataType;
    use datafusion::common::Result;
    use datafusion::prelude::SessionContext;

    /// A session with the Druid functions registered.
    pub(crate) fn ctx() -> SessionContext {
        let ctx = SessionContext::new();
        super::register_druid_functions(&ctx);
        ctx
    }

    /// The batches of `sql` (planned by DataFusion alone); a failure panics naming `sql`.
    pub(crate) async fn batches(ctx: &SessionContext, sql: &str) -> Vec<arrow::array::RecordBatch> {
        ctx.sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The first value of `sql` (planned by DataFusion alone) as text, `null` for null.
    pub(crate) async fn one(ctx: &SessionContext, sql: &str) -> Result<String> {
        let batches = ctx.sql(sql).await?.collect().await?;
        let c = cast(batches[0].column(0), &DataType::Utf8)?;
        let s = c.as_string::<i32>();
        Ok(if s.is_valid(0) {
            s.value(0).to_string()
        } else {
            "null".into()
        })
    }
}
