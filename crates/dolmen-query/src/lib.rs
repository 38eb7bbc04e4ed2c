//! Dolmen's broker: Druid SQL over Apache DataFusion.
//!
//! - [`engine`]: the session template (case-sensitive identifiers, `druid` catalog, Druid
//!   functions), planning with Druid's AST rewrites, parameter binding, error classification.
//! - [`table`]: the `druid` schema; a datasource table scans the visible segments of a timeline
//!   snapshot and the hydrants of running streaming tasks, pruned by `__time` before any file
//!   is opened.
//! - [`functions`]: Druid SQL functions as DataFusion UDFs (`TIME_FLOOR`, `TIME_IN_INTERVAL`, ...).
//! - [`system`]: `INFORMATION_SCHEMA` (`SCHEMATA`, `TABLES`, `COLUMNS`, `ROUTINES`) and `sys`.
//! - [`lookup_schema`]: the `lookup` schema, one `k`, `v` table per loaded lookup;
//!   [`functions::lookup`] is `LOOKUP(expr, name[, replaceMissingValueWith])`.
//! - [`dialect`]: the SQL dialect (sqlparser's generic one read as Calcite reads Druid SQL:
//!   `IS [NOT] DISTINCT FROM` precedence, `user` as a column, `PI` as a constant).
//! - [`rewrite`]: AST rewrites for syntax DataFusion lacks (`FLOOR(ts TO unit)`).
//! - [`scan_order`]: plain scans read their segments in time order (Druid's scan order).
//! - [`frames`]: window frames read as Druid reads them (short forms, empty frames);
//!   [`validate`]: what Druid's validator rejects that DataFusion would run.
//! - [`naming`]: Calcite's `EXPR$n` names for unaliased select items.
//! - [`coercion`]: casts of text that does not convert give NULL (Druid's casts), `NULLIF`
//!   typed as its first argument.
//! - [`time_text`]: TIMESTAMP and DATE values turned into text as Druid writes them
//!   (`yyyy-MM-dd HH:mm:ss` in `sqlTimeZone`); [`options`] carries `sqlTimeZone` to such
//!   analyzer rules.
//! - [`request`]: a request's SQL text: leading `SET` statements, `?` parameters.
//! - [`writer`]: Druid's result formats with exact bytes.
//! - [`statement`]: SQL statements as `query_controller` tasks; `SELECT` results in pages.
//! - [`sql_ingest`]: `INSERT` / `REPLACE` into segments; [`dml`] parses their clauses and
//!   [`external`] is `TABLE(EXTERN(...))`.

pub mod coercion;
pub mod cooperative;
pub mod derived;
pub mod dialect;
pub mod dictionary;
pub mod distinct;
pub mod dml;
pub mod engine;
mod extern_files;
pub mod external;
pub mod frames;
pub mod functions;
pub mod index;
pub mod lateral_unnest;
pub mod lookup_schema;
pub mod multivalue;
pub mod naming;
pub mod nested;
pub mod options;
pub mod plan_cache;
pub mod request;
pub mod rewrite;
pub mod scan_order;
pub mod sql_ingest;
pub mod statement;
pub mod system;
pub mod table;
#[cfg(test)]
mod test_support;
pub mod time_text;
pub mod validate;
pub mod window_ties;
pub mod writer;

pub use engine::{PreparedQuery, QueryEngine, QueryError, QueryResult, SqlParameter, SqlQuery};
pub use writer::{ResultFormat, ResultWriter};
