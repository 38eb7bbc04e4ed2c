//! The Druid function catalogue ([`dolmen_functions`], re-exported here under its old paths)
//! and what dolmen-query registers beside it: the internal `__mv_*` functions of the
//! multi-value rewrite ([`crate::multivalue::udfs`]) and the `EXTERN` table function of SQL
//! ingestion ([`crate::external::ExternFunction`]). Both belong to the planner and the
//! ingestion statements of this crate, not to the catalogue (ADR 0028).

use std::sync::Arc;

use datafusion::prelude::SessionContext;

pub use dolmen_functions::*;

/// Registers the catalogue ([`dolmen_functions::register_druid_functions`]: functions and the
/// `SUBSTRING` planner) and this crate's planner functions in `ctx`.
pub fn register_druid_functions(ctx: &SessionContext) {
    dolmen_functions::register_druid_functions(ctx);
    register_planner_functions(ctx);
}

/// Registers the catalogue's functions ([`dolmen_functions::register_druid_udfs`]) and this
/// crate's planner functions again, in a session rebuilt with
/// `SessionStateBuilder::new_from_existing` (see there why).
pub fn register_druid_udfs(ctx: &SessionContext) {
    dolmen_functions::register_druid_udfs(ctx);
    register_planner_functions(ctx);
}

/// The `__mv_*` functions of the multi-value rewrite and `EXTERN`.
fn register_planner_functions(ctx: &SessionContext) {
    for udf in crate::multivalue::udfs() {
        ctx.register_udf(udf);
    }
    ctx.register_udtf(
        crate::external::EXTERN_FUNCTION,
        Arc::new(crate::external::ExternFunction),
    );
}

#[cfg(test)]
mod tests;
