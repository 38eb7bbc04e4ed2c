//! The SQL engine: one DataFusion session template configured for Druid SQL, planning and
//! executing queries over the `druid` catalog.
//!
//! Configuration (facts from ARCHITECTURE.md): identifiers are case-sensitive (identifier
//! normalization off; function names still resolve case-insensitively), the default catalog
//! and schema are `druid.druid` so `FROM wikipedia` and `FROM druid.wikipedia` both resolve,
//! the Druid SQL functions are registered as UDFs, and [`crate::multivalue::MultiValueRule`]
//! runs first among the analyzer rules. Each query runs on a clone of the
//! session state, so per-query settings never leak between queries.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionState;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use dolmen_common::time::{parse_iso_instant, parse_time_zone};
use dolmen_common::zone::Zone;
use dolmen_storage::{SegmentCache, SegmentView};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::time::Duration;

use crate::request::RequestSql;

use crate::table::DruidCatalog;
use crate::writer::ResultFormat;

/// A SQL request body (spec: "SQL request body").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SqlQuery {
    /// The SQL text.
    pub query: String,
    /// Result format (default `object`).
    #[serde(default)]
    pub result_format: Option<ResultFormat>,
    /// Column names as the first row.
    #[serde(default)]
    pub header: bool,
    /// Runtime type names in the header.
    #[serde(default)]
    pub types_header: bool,
    /// SQL type names in the header.
    #[serde(default)]
    pub sql_types_header: bool,
    /// Query context.
    #[serde(default)]
    pub context: Option<serde_json::Map<String, Value>>,
    /// Values for `?` placeholders.
    #[serde(default)]
    pub parameters: Option<Vec<SqlParameter>>,
}

/// A query parameter: `{"type": "VARCHAR", "value": "x"}`.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct SqlParameter {
    /// SQL type name.
    #[serde(rename = "type")]
    pub sql_type: String,
    /// The value.
    pub value: Value,
}

impl SqlQuery {
    /// A context value as a string.
    pub fn context_str(&self, key: &str) -> Option<String> {
        context_text(self.context.as_ref()?, key)
    }
}

/// A context value as text: a string as it is, another JSON value as its JSON text, `null` or
/// absent as `None`.
fn context_text(ctx: &Map<String, Value>, key: &str) -> Option<String> {
    ctx.get(key).and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    })
}

/// Why a query failed; each kind carries Druid's legacy `error` code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueryError {
    /// The SQL does not parse.
    #[error("{0}")]
    Parse(String),
    /// The SQL parses but does not validate (unknown table or column, type errors).
    #[error("{0}")]
    Plan(String),
    /// A request field or context value is invalid.
    #[error("{0}")]
    InvalidInput(String),
    /// The query exceeded a resource limit.
    #[error("{0}")]
    ResourceLimit(String),
    /// The query was cancelled.
    #[error("{0}")]
    Cancelled(String),
    /// The query ran past its context `timeout`.
    #[error("{0}")]
    Timeout(String),
    /// The query failed while running.
    #[error("{0}")]
    Execution(String),
    /// The query's own expressions failed on the values they met while running (a function
    /// given input it rejects, a division by zero): the client's mistake, a 400 (Druid's
    /// `INVALID_INPUT` category of `DruidException`).
    #[error("{0}")]
    InvalidData(String),
}

impl QueryError {
    /// Druid's `error` code for this failure (`docs/querying/querying.md`).
    pub fn error_code(&self) -> &'static str {
        match self {
            QueryError::Parse(_) => "SQL parse failed",
            QueryError::Plan(_) | QueryError::InvalidInput(_) => "Plan validation failed",
            QueryError::ResourceLimit(_) => "Resource limit exceeded",
            QueryError::Cancelled(_) => "Query cancelled",
            QueryError::Timeout(_) => "Query timeout",
            QueryError::Execution(_) => "Unknown exception",
            QueryError::InvalidData(_) => "druidException",
        }
    }

    /// The `errorClass` Druid reports for this failure.
    pub fn error_class(&self) -> &'static str {
        match self {
            QueryError::Parse(_) => "org.apache.calcite.sql.parser.SqlParseException",
            QueryError::Plan(_) | QueryError::InvalidInput(_) => {
                "org.apache.calcite.tools.ValidationException"
            }
            QueryError::ResourceLimit(_) => "org.apache.druid.query.ResourceLimitExceededException",
            QueryError::Cancelled(_) => "org.apache.druid.query.QueryInterruptedException",
            QueryError::Timeout(_) => "org.apache.druid.query.QueryTimeoutException",
            QueryError::Execution(_) => "java.lang.RuntimeException",
            QueryError::InvalidData(_) => "org.apache.druid.error.DruidException",
        }
    }

    /// HTTP status: 400 for the client's mistakes, 504 for a timeout (the TIMEOUT category),
    /// 500 otherwise.
    pub fn http_status(&self) -> u16 {
        match self {
            QueryError::Parse(_)
            | QueryError::Plan(_)
            | QueryError::InvalidInput(_)
            | QueryError::InvalidData(_)
            | QueryError::ResourceLimit(_) => 400,
            QueryError::Timeout(_) => 504,
            QueryError::Cancelled(_) | QueryError::Execution(_) => 500,
        }
    }

    /// Classifies a DataFusion error raised while planning (`planning = true`) or running.
    pub fn from_datafusion(e: DataFusionError, planning: bool) -> QueryError {
        let root = e.find_root();
        let msg = druid_message(&root.to_string());
        match root {
            DataFusionError::SQL(..) => QueryError::Parse(msg),
            DataFusionError::ResourcesExhausted(_) => QueryError::ResourceLimit(msg),
            DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_) => QueryError::Plan(msg),
            _ if planning => QueryError::Plan(msg),
            // Raised by the query's expressions on the values they read (function input
            // checks, Arrow's compute kernels): the query's fault, not the server's. I/O,
            // external (storage) and internal errors stay 500s.
            DataFusionError::Execution(_) => QueryError::InvalidData(msg),
            DataFusionError::ArrowError(e, _)
                if !matches!(
                    e.as_ref(),
                    arrow::error::ArrowError::IoError(..)
                        | arrow::error::ArrowError::ExternalError(_)
                ) =>
            {
                QueryError::InvalidData(msg)
            }
            _ => QueryError::Execution(msg),
        }
    }
}

/// A SQL parse error in Druid's words (reference-behaviour "Parse-error messages"):
/// `Received an unexpected token [X] (line [L], column [C]), acceptable options: [...]` for a
/// parser error (the end of the text is `<EOF>` at the position after the last character), and
/// `Lexical error at line [L], column [C]: ...` for a tokenizer error. `None` for other errors.
/// Positions are 1-based, in characters; a `?` parameter before the error on the same line
/// shifts the column by one (parameters are renumbered `$n` before parsing).
fn druid_parse_message(e: &DataFusionError, sql: &str) -> Option<String> {
    use datafusion::sql::sqlparser::parser::ParserError;
    let DataFusionError::SQL(pe, _) = e.find_root() else {
        return None;
    };
    let split_location = |m: &str| -> (String, Option<(String, String)>) {
        match m.rsplit_once(" at Line: ") {
            Some((head, loc)) => {
                let (l, c) = loc.split_once(", Column: ").unwrap_or((loc, "?"));
                (head.to_string(), Some((l.to_string(), c.to_string())))
            }
            None => (m.to_string(), None),
        }
    };
    let end_of_text = || {
        let line = sql.split('\n').count();
        let column = sql.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line.to_string(), column.to_string())
    };
    Some(match pe.as_ref() {
        ParserError::ParserError(m) => {
            let (head, loc) = split_location(m);
            let Some((expected, found)) = head
                .strip_prefix("Expected: ")
                .and_then(|h| h.rsplit_once(", found: "))
            else {
                return Some(match loc {
                    Some((l, c)) => format!("{head} (line [{l}], column [{c}])"),
                    None => head,
                });
            };
            let token = if found == "EOF" { "<EOF>" } else { found };
            let (l, c) = loc.unwrap_or_else(end_of_text);
            format!(
                "Received an unexpected token [{token}] (line [{l}], column [{c}]), acceptable options: [{expected}]"
            )
        }
        ParserError::TokenizerError(m) => {
            let (head, loc) = split_location(m);
            let (l, c) = loc.unwrap_or_else(end_of_text);
            format!("Lexical error at line [{l}], column [{c}]: {head}")
        }
        ParserError::RecursionLimitExceeded => {
            "The query is nested too deeply to parse (recursion limit exceeded)".to_string()
        }
    })
}

/// Rewrites DataFusion's wording into Druid's where clients look for it.
fn druid_message(m: &str) -> String {
    let m = m
        .trim_start_matches("Error during planning: ")
        .trim_start_matches("SQL error: ")
        .trim_start_matches("Schema error: ")
        .trim_start_matches("Execution error: ")
        .to_string();
    // "table 'druid.druid.foo' not found" -> "Object 'foo' not found"
    if let Some(rest) = m.strip_prefix("table '")
        && let Some(end) = rest.find("' not found")
    {
        let name = rest[..end].rsplit('.').next().unwrap_or(&rest[..end]);
        return format!("Object '{name}' not found");
    }
    m
}

/// A request read and checked but not planned: the SQL split into its `SET` statements and
/// query, the effective context (request `context` with `SET` values over it), and the
/// context values the server acts on.
#[derive(Debug)]
pub struct PreparedQuery {
    /// The request's SQL text as sent (the plan cache's key).
    text: String,
    sql: RequestSql,
    parameters: Vec<SqlParameter>,
    /// The effective query context.
    pub context: Map<String, Value>,
    /// `sqlQueryId`, or a generated UUID.
    pub query_id: String,
    /// `timeout` (ms; 0 or absent: none): the query fails with "Query timeout" (504) when it
    /// runs longer.
    pub timeout: Option<Duration>,
    /// `sqlTimeZone` (UTC by default).
    pub time_zone: Zone,
    /// `sqlOuterLimit`: at most this many result rows.
    pub outer_limit: Option<usize>,
    /// `useApproximateCountDistinct` (default true): `COUNT(DISTINCT x)` is approximate.
    pub approximate_count_distinct: bool,
    /// `readFromDeepStorage` when given: read segments missing from the segment cache straight
    /// from deep storage ([`crate::table::ReadFromDeepStorage`]); absent means the endpoint's
    /// default (off for `/v2/sql`, on for statements).
    pub read_from_deep_storage: Option<bool>,
    /// With security on, which datasources the requesting user may read: the rows of `sys`
    /// and `INFORMATION_SCHEMA` tables the query sees ([`crate::system::SystemTableAccess`]).
    /// `None`: every row (security off).
    pub system_table_access: Option<crate::system::SystemTableAccess>,
}

impl PreparedQuery {
    /// The `INSERT` / `REPLACE` clauses, when the statement is SQL-based ingestion (its
    /// `SELECT` is the query [`QueryEngine::plan`] plans).
    pub fn dml(&self) -> Option<&crate::dml::DmlStatement> {
        self.sql.dml.as_ref()
    }

    /// The plan cache key of a plain query (`None` for `EXPLAIN` and SQL-based ingestion,
    /// which are not cached).
    fn plan_key(&self) -> Option<crate::plan_cache::PlanKey> {
        if self.sql.explain || self.sql.dml.is_some() {
            return None;
        }
        Some(crate::plan_cache::PlanKey {
            sql: self.text.clone(),
            parameters: serde_json::to_string(&self.parameters).unwrap_or_default(),
            time_zone: self.time_zone,
            outer_limit: self.outer_limit,
            approximate_count_distinct: self.approximate_count_distinct,
            read_from_deep_storage: self.read_from_deep_storage,
        })
    }
}

/// A context value that must be a non-negative integer (a JSON number or numeric string).
fn context_count(ctx: &Map<String, Value>, key: &str) -> Result<Option<u64>, QueryError> {
    let bad = |v: &Value| {
        QueryError::InvalidInput(format!(
            "context.{key}: [{v}] is not a non-negative integer"
        ))
    };
    match ctx.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| bad(v)),
        Some(v @ Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad(v)),
        Some(v) => Err(bad(v)),
    }
}

/// Plans and runs Druid SQL.
pub struct QueryEngine {
    ctx: SessionContext,
    /// The execution context every query runs in: the function registries and runtime
    /// (memory pool, object stores) of `ctx`, built once. Per-query settings act at planning
    /// time, so execution needs no per-query copy of the registries.
    task_ctx: Arc<TaskContext>,
    /// The live view the catalog reads: its generation tells whether a cached plan is current.
    view: Arc<SegmentView>,
    /// The lookups `LOOKUP` and the `lookup` schema read.
    lookups: Arc<dolmen_lookup::LookupRegistry>,
    /// Optimized plans of repeated queries ([`crate::plan_cache`]).
    plans: crate::plan_cache::PlanCache,
    /// What repeated statements touch ([`QueryEngine::resources_of`]), by the plan cache's key
    /// and the view generation they were planned at.
    resources: std::sync::Mutex<
        std::collections::HashMap<crate::plan_cache::PlanKey, (u64, StatementResources)>,
    >,
    /// The states a cached plan is physically planned in, without a per-query copy: cached
    /// plans call no time-dependent function, so the query start time a copy would stamp is
    /// not read. The second has `readFromDeepStorage` set.
    cached_plan_states: [SessionState; 2],
    /// The value indexes of loaded segments ([`crate::index`]).
    indexes: Arc<crate::index::ValueIndexes>,
}

impl std::fmt::Debug for QueryEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEngine")
            .field("session_id", &self.ctx.session_id())
            .finish()
    }
}

/// A planned query ready to stream.
pub struct QueryResult {
    /// Output schema.
    pub schema: SchemaRef,
    /// The result rows.
    pub stream: SendableRecordBatchStream,
    /// Time zone for rendering TIMESTAMP values (`sqlTimeZone`).
    pub time_zone: Zone,
    /// The Druid datasources the query reads, sorted, each once (`sys`, `INFORMATION_SCHEMA`
    /// and lookup tables are not datasources): what query metrics label `dataSource`.
    pub data_sources: Vec<String>,
    /// Time spent planning: from [`QueryEngine::execute_prepared`]'s start to the stream
    /// (logical planning or the plan cache, optimization, physical planning).
    pub planning: Duration,
}

impl std::fmt::Debug for QueryResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryResult")
            .field("schema", &self.schema)
            .field("time_zone", &self.time_zone)
            .field("data_sources", &self.data_sources)
            .field("planning", &self.planning)
            .finish()
    }
}

impl QueryEngine {
    /// An engine over the live segment view; `target_partitions` bounds scan parallelism.
    /// With `system` (the metadata store and this node's description) the `sys` schema is
    /// available too. `lookups` are what `LOOKUP` and the `lookup` schema read.
    pub fn new(
        view: Arc<SegmentView>,
        cache: Arc<SegmentCache>,
        target_partitions: usize,
        system: Option<(
            Arc<dyn dolmen_metadata::MetadataStore>,
            crate::system::NodeInfo,
        )>,
        lookups: Arc<dolmen_lookup::LookupRegistry>,
    ) -> QueryEngine {
        // Value indexes of loaded segments, shared by the tables and the distinct-values rule.
        let indexes = Arc::new(crate::index::ValueIndexes::default());
        // Loaded with the segments: the cache calls back for every segment it loads.
        {
            let indexes = Arc::downgrade(&indexes);
            cache.set_load_hook(move |path| {
                if let (Some(indexes), Ok(path)) = (indexes.upgrade(), std::path::absolute(path)) {
                    indexes.load_in_background(vec![path]);
                }
            });
        }
        let mut config = SessionConfig::new()
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema("druid", "druid")
            .with_information_schema(false)
            .with_target_partitions(target_partitions.max(1));
        config.options_mut().sql_parser.enable_ident_normalization = false;
        // Druid sorts NULL as the smallest value: first ascending, last descending (Druid's
        // window test `orderByDescNulls.sqlTest`: `DESC NULLS LAST` and `NULLS FIRST` plan as
        // plain DESC and ASC sorts, nulls ranked first ascending). Explicit
        // `NULLS FIRST`/`NULLS LAST` still win. Applies to ORDER BY, window and aggregate
        // ordering alike (DataFusion's SQL planner reads it for every ORDER BY).
        config.options_mut().sql_parser.default_null_ordering = "nulls_min".to_string();
        // Split segment files of 1 MiB and more across the scan partitions (by row group),
        // not only files of DataFusion's default 10 MiB: a day segment of a few hundred
        // thousand rows is a few MiB, and a query on one day should still use every core.
        config.options_mut().optimizer.repartition_file_min_size = 1 << 20;
        // Druid's multi-value semantics run before type coercion (crate::multivalue).
        // A lateral `CROSS JOIN UNNEST(t.col)` is decorrelated first (crate::lateral_unnest).
        let mut analyzer_rules: Vec<Arc<dyn datafusion::optimizer::AnalyzerRule + Send + Sync>> = vec![
            Arc::new(crate::lateral_unnest::LateralUnnestRule),
            Arc::new(crate::multivalue::MultiValueRule),
            Arc::new(crate::coercion::BooleanArraysAsLongsRule),
        ];
        analyzer_rules.extend(datafusion::optimizer::Analyzer::new().rules);
        // After type coercion: the casts it adds turn TIMESTAMP values into Druid's text.
        analyzer_rules.push(Arc::new(crate::time_text::TimeTextRule::default()));
        // And text that does not convert to a number or a time is NULL, not an error.
        analyzer_rules.push(crate::coercion::rule());
        // Last, on typed expressions: JSON_VALUE of a literal path reads the shredded
        // sub-column where every segment has it (crate::nested).
        analyzer_rules.push(Arc::new(crate::nested::NestedColumnsRule));
        // Ties of a window's order in grouping-key order, as Druid's stable window sort
        // (crate::window_ties).
        analyzer_rules.push(Arc::new(crate::window_ties::WindowTiesRule));
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rules(analyzer_rules)
            // Druid-style distinct values and aggregation by dictionary id, after DataFusion's
            // own rules (distinct values first: they read no rows at all).
            .with_physical_optimizer_rule(Arc::new(crate::distinct::DistinctFromIndexes::new(
                Arc::clone(&indexes),
            )))
            .with_physical_optimizer_rule(Arc::new(crate::dictionary::DictionaryAggregation))
            // Joins yield between output batches, so cancellation lands promptly.
            .with_physical_optimizer_rule(Arc::new(crate::cooperative::CooperativeJoins))
            // Last: plain scans and LIMITs read segments in time order, as Druid's scan does.
            .with_physical_optimizer_rule(Arc::new(crate::scan_order::TimeOrderedScans))
            .build();
        let mut state = state;
        // Text in arithmetic takes the other operand's numeric type (Calcite's coercion).
        datafusion::execution::FunctionRegistry::register_expr_planner(
            &mut state,
            Arc::new(crate::coercion::TextOperandPlanner),
        )
        .expect("registering an expression planner cannot fail");
        let ctx = SessionContext::new_with_state(state);
        crate::functions::register_druid_functions(&ctx);
        crate::functions::lookup::register(&ctx, &lookups);
        let state = ctx.state();
        let routines = state
            .scalar_functions()
            .keys()
            .map(|n| (n, false))
            .chain(state.aggregate_functions().keys().map(|n| (n, true)))
            .chain(state.window_functions().keys().map(|n| (n, false)))
            // The multi-value rewrites' internal markers are not Druid functions.
            .filter(|(n, _)| !n.starts_with("__mv_"))
            .map(|(n, aggregator)| crate::system::Routine {
                name: n.to_ascii_uppercase(),
                aggregator,
            })
            .collect();
        let view_for_plans = Arc::clone(&view);
        let sys = system.map(|(metadata, node)| {
            crate::system::SysSchema::new(Arc::clone(&view), metadata, node)
        });
        ctx.register_catalog(
            "druid",
            Arc::new(DruidCatalog::new(
                view,
                cache,
                Arc::clone(&indexes),
                routines,
                sys,
                Arc::clone(&lookups),
            )),
        );
        let task_ctx = ctx.task_ctx();
        QueryEngine {
            cached_plan_states: [ctx.state(), Self::reading_deep_storage(ctx.state())],
            ctx,
            task_ctx,
            view: view_for_plans,
            lookups,
            plans: crate::plan_cache::PlanCache::default(),
            resources: std::sync::Mutex::default(),
            indexes,
        }
    }

    /// Loads, before the first query, what the first query over each segment already in the
    /// local segment cache would otherwise load inside it: the segment's registration in the
    /// cache, its value indexes (sidecar), its annotated file schema and its Parquet footer
    /// with page indexes (the runtime's file-metadata cache). Druid's historicals likewise
    /// load their segment cache at start-up before they announce segments. Segments not in
    /// the cache are not fetched (the coordinator's load duty and queries do that). Returns
    /// the number of segment files warmed; failures are logged and leave that segment to be
    /// loaded by its first query, as before.
    ///
    /// Issue 25: the first query after a restart paid 40-80 ms for the segments on a 1M-row
    /// table ([`QueryEngine::warm_up_sql`] takes the one-time set-up).
    pub async fn warm_up(&self, cache: &dolmen_storage::SegmentCache) -> usize {
        use datafusion::datasource::physical_plan::parquet::ParquetFileReaderFactory;
        use futures::StreamExt;
        let segments: Vec<Arc<dolmen_segment::DataSegment>> = self
            .view
            .data_sources()
            .iter()
            .filter_map(|ds| self.view.snapshot(ds))
            .flat_map(|snap| snap.all_used.visible_segments())
            .collect();
        let runtime = self.ctx.runtime_env();
        let Ok(store) = runtime
            .object_store(datafusion::execution::object_store::ObjectStoreUrl::local_filesystem())
        else {
            return 0;
        };
        let factory =
            datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory::new(
                store,
                runtime.cache_manager.get_file_metadata_cache(),
            );
        let factory = &factory;
        let warmed = futures::stream::iter(segments)
            .map(|seg| async move {
                let path = cache.load_if_cached(&seg).await?;
                let path = std::path::absolute(path).ok()?;
                self.indexes.load(&path).await;
                if let Err(e) = self.indexes.file_schema(&path).await {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read a segment footer");
                    return None;
                }
                let file = datafusion::datasource::listing::PartitionedFile::new(
                    path.to_string_lossy().to_string(),
                    seg.size,
                );
                let metrics = datafusion::physical_plan::metrics::ExecutionPlanMetricsSet::new();
                let mut reader = factory.create_reader(0, file, None, &metrics).ok()?;
                // No options: with a metadata cache DataFusion reads the page index too.
                reader.get_metadata(None).await.ok()?;
                Some(())
            })
            .buffer_unordered(8)
            .filter_map(|x| async move { x })
            .count()
            .await;
        tracing::info!(segments = warmed, "segment cache warmed up");
        warmed
    }

    /// Runs one query through the whole SQL path, result rendering included (parsing, the
    /// rewrites, planning, a filtered aggregate executed, its rows written as a JSON array),
    /// so that what a process and each of its query threads set up once (the function
    /// registry, planner state, thread-local allocator arenas and caches, code paged in) is
    /// not paid by the first user query. Call it on the runtime that runs queries, once per
    /// worker thread, concurrently (the scheduler spreads them over the threads; a thread that
    /// runs none is warmed by its first query, as before).
    ///
    /// It reads the catalog, not a datasource: querying a datasource would load segments the
    /// coordinator left in deep storage. It is not a user query: no request log line, no
    /// metrics. A failure only means less was warmed.
    ///
    /// Issue 25 (ADR 0025, fourth round): after a restart the first `SELECT 1` took 3.1 ms
    /// against 0.46 ms hot, although an engine-level query had run on another runtime.
    pub async fn warm_up_sql(&self) {
        use futures::StreamExt;
        let q = SqlQuery {
            query:
                "SELECT COUNT(*) AS c FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'"
                    .to_string(),
            ..SqlQuery::default()
        };
        let result = match self.execute(&q).await {
            Ok(result) => result,
            Err(e) => {
                tracing::debug!(error = %e, "warm-up query failed");
                return;
            }
        };
        let mut writer = crate::writer::ResultWriter::new(
            crate::writer::ResultFormat::Array,
            crate::writer::column_infos(&result.schema),
            false,
            false,
            false,
            result.time_zone,
        );
        let mut out = Vec::new();
        writer.start(&mut out);
        let mut stream = result.stream;
        while let Some(batch) = stream.next().await {
            match batch {
                Ok(b) => {
                    if writer.write_batch(&b, &mut out).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "warm-up query failed");
                    return;
                }
            }
        }
        writer.finish(&mut out);
    }

    /// The value indexes of loaded segments: what the equality filters and distinct counts
    /// read, and their counters (`segment/valueIndex/*` metrics).
    pub fn value_indexes(&self) -> &Arc<crate::index::ValueIndexes> {
        &self.indexes
    }

    /// The session state for one query: a copy of the engine's, stamped with the query's
    /// start time (what `CURRENT_TIMESTAMP` reads). The one copy a query makes.
    fn query_state(&self) -> SessionState {
        self.ctx.state()
    }

    /// `state` with the settings of `p` that act through the session (`readFromDeepStorage`,
    /// and `sqlTimeZone` for the analyzer rules, [`crate::options::DruidSqlOptions`]).
    fn with_query_settings(mut state: SessionState, p: &PreparedQuery) -> SessionState {
        state
            .config_mut()
            .options_mut()
            .extensions
            .insert(crate::options::DruidSqlOptions {
                time_zone: p.time_zone,
            });
        if let Some(access) = &p.system_table_access {
            state.config_mut().set_extension(Arc::new(access.clone()));
        }
        if p.read_from_deep_storage == Some(true) {
            Self::reading_deep_storage(state)
        } else {
            state
        }
    }

    /// `state` with `readFromDeepStorage` set ([`crate::table::ReadFromDeepStorage`]).
    fn reading_deep_storage(mut state: SessionState) -> SessionState {
        state
            .config_mut()
            .set_extension(Arc::new(crate::table::ReadFromDeepStorage(true)));
        state
    }

    /// A copy of the engine's session state (for tests that compare sessions).
    #[cfg(test)]
    pub(crate) fn state_for_tests(&self) -> SessionState {
        self.ctx.state()
    }

    /// How many optimized plans the plan cache holds ([`crate::plan_cache`]).
    pub fn cached_plans(&self) -> usize {
        self.plans.len()
    }

    /// Reads a request without planning it: splits off the `SET` statements, renumbers `?`
    /// parameters, and checks the context values Dolmen acts on (`sqlQueryId`, `sqlTimeZone`,
    /// `timeout` ms, `sqlOuterLimit`, `priority`); other context keys are accepted as they are.
    ///
    /// # Errors
    /// [`QueryError::InvalidInput`] for an empty query or a bad context value (naming the key),
    /// [`QueryError::Parse`] / [`QueryError::Plan`] for SQL that does not parse or misplaced
    /// `SET` statements.
    pub fn prepare(&self, q: &SqlQuery) -> Result<PreparedQuery, QueryError> {
        if q.query.trim().is_empty() {
            return Err(QueryError::InvalidInput("Empty query".into()));
        }
        let sql = crate::request::parse_request_sql(&self.ctx.state_ref().read(), &q.query)
            .map_err(|e| match druid_parse_message(&e, &q.query) {
                Some(m) => QueryError::Parse(m),
                None => QueryError::from_datafusion(e, true),
            })?;
        let context = sql.effective_context(q.context.as_ref());
        let text = |key: &str| context_text(&context, key);
        let time_zone = match text("sqlTimeZone") {
            Some(tz) => parse_time_zone(&tz)
                .map_err(|e| QueryError::InvalidInput(format!("context.sqlTimeZone: {e}")))?,
            None => Zone::Utc,
        };
        // Druid: 0 means no timeout.
        let timeout = context_count(&context, "timeout")?
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis);
        let outer_limit = context_count(&context, "sqlOuterLimit")?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        if let Some(p) = context.get("priority")
            && !p.is_null()
            && p.as_i64().is_none()
            && p.as_str().is_none_or(|s| s.trim().parse::<i64>().is_err())
        {
            return Err(QueryError::InvalidInput(format!(
                "context.priority: [{p}] is not an integer"
            )));
        }
        let approximate_count_distinct = match context.get("useApproximateCountDistinct") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(QueryError::InvalidInput(format!(
                    "context.useApproximateCountDistinct: [{v}] is not a boolean"
                )));
            }
        };
        let read_from_deep_storage = match context.get(crate::table::READ_FROM_DEEP_STORAGE_KEY) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Some(true),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Some(false),
            Some(v) => {
                return Err(QueryError::InvalidInput(format!(
                    "context.{}: [{v}] is not a boolean",
                    crate::table::READ_FROM_DEEP_STORAGE_KEY
                )));
            }
        };
        let query_id = text("sqlQueryId").unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Ok(PreparedQuery {
            text: q.query.clone(),
            sql,
            parameters: q.parameters.clone().unwrap_or_default(),
            context,
            query_id,
            timeout,
            time_zone,
            outer_limit,
            approximate_count_distinct,
            read_from_deep_storage,
            system_table_access: None,
        })
    }

    /// Plans a prepared query (Druid rewrites, validation, parameter binding, `sqlOuterLimit`).
    ///
    /// # Errors
    /// [`QueryError::Parse`] / [`QueryError::Plan`] / [`QueryError::InvalidInput`] (a `?`
    /// without a value, a parameter of the wrong type).
    pub async fn plan(
        &self,
        p: &PreparedQuery,
    ) -> Result<(SessionContext, LogicalPlan), QueryError> {
        let (state, plan) = self.plan_state(self.query_state(), p).await?;
        Ok((SessionContext::new_with_state(state), plan))
    }

    /// A session for a segment build within `memory_bytes` on `threads` threads, spilling
    /// under `spill_dir`: the engine's catalogs and functions with the build's settings and
    /// memory pool (`dolmen_ingest::columnar::tune_build_config` / `build_runtime`).
    ///
    /// # Errors
    /// When the runtime cannot be built.
    pub fn build_session(
        &self,
        threads: usize,
        memory_bytes: usize,
        spill_dir: &std::path::Path,
    ) -> datafusion::error::Result<SessionContext> {
        let state = self.ctx.state();
        let config = dolmen_ingest::columnar::tune_build_config(
            state.config().clone(),
            threads,
            memory_bytes,
        );
        let runtime = dolmen_ingest::columnar::build_runtime(memory_bytes, spill_dir)?;
        let state = datafusion::execution::SessionStateBuilder::new_from_existing(state)
            .with_config(config)
            .with_runtime_env(runtime)
            .build();
        let ctx = SessionContext::new_with_state(state);
        // The rebuild re-registered functions under their aliases; Druid's overrides win.
        crate::functions::register_druid_udfs(&ctx);
        crate::functions::lookup::register(&ctx, &self.lookups);
        Ok(ctx)
    }

    /// [`QueryEngine::plan`] in a given session (see [`QueryEngine::build_session`]).
    ///
    /// # Errors
    /// As [`QueryEngine::plan`].
    pub async fn plan_in(
        &self,
        ctx: SessionContext,
        p: &PreparedQuery,
    ) -> Result<(SessionContext, LogicalPlan), QueryError> {
        let (state, plan) = self.plan_state(ctx.state(), p).await?;
        Ok((SessionContext::new_with_state(state), plan))
    }

    /// [`QueryEngine::plan`] on a session state of its own, which it returns with the plan.
    async fn plan_state(
        &self,
        state: SessionState,
        p: &PreparedQuery,
    ) -> Result<(SessionState, LogicalPlan), QueryError> {
        let state = Self::with_query_settings(state, p);
        let mut opts = crate::rewrite::RewriteOptions::with_time_zone(p.time_zone);
        opts.approximate_count_distinct = p.approximate_count_distinct;
        let plan_err = |e| QueryError::from_datafusion(e, true);
        let plan =
            crate::rewrite::statement_to_logical_plan(&state, p.sql.statement.clone(), &opts)
                .await
                .map_err(plan_err)?;
        crate::rewrite::read_only()
            .verify_plan(&plan)
            .map_err(plan_err)?;
        if p.sql.parameter_count > p.parameters.len() {
            return Err(QueryError::InvalidInput(format!(
                "Parameter at position [{}] is not bound",
                p.parameters.len()
            )));
        }
        let plan = if p.parameters.is_empty() {
            plan
        } else {
            let values = p
                .parameters
                .iter()
                .enumerate()
                .map(|(i, v)| parameter_value(i, v))
                .collect::<Result<Vec<_>, _>>()?;
            plan.with_param_values(values).map_err(plan_err)?
        };
        let plan = match (p.outer_limit, &plan) {
            (Some(_), LogicalPlan::Explain(_) | LogicalPlan::DescribeTable(_)) => plan,
            (Some(n), _) => LogicalPlanBuilder::from(plan)
                .limit(0, Some(n))
                .and_then(LogicalPlanBuilder::build)
                .map_err(plan_err)?,
            (None, _) => plan,
        };
        Ok((state, plan))
    }

    /// Plans and starts a prepared query; rows arrive on the returned stream.
    ///
    /// # Errors
    /// Planning errors, and errors starting execution.
    pub async fn execute_prepared(&self, p: &PreparedQuery) -> Result<QueryResult, QueryError> {
        let started = std::time::Instant::now();
        let time_zone = p.time_zone;
        let plan_err = |e| QueryError::from_datafusion(e, true);
        let key = p.plan_key();
        // Read before planning: a view change during planning makes the entry stale at once.
        let generation = self.view.generation();
        let cached = key.as_ref().and_then(|k| self.plans.get(k, generation));
        let (state, optimized) = match cached {
            Some(plan) => {
                let deep = usize::from(p.read_from_deep_storage == Some(true));
                (Cow::Borrowed(&self.cached_plan_states[deep]), plan)
            }
            None => {
                let (state, plan) = self.plan_state(self.query_state(), p).await?;
                if p.sql.explain {
                    let mut r = explain_result(&state, &plan, time_zone)?;
                    r.planning = started.elapsed();
                    return Ok(r);
                }
                let optimized = Arc::new(state.optimize(&plan).map_err(plan_err)?);
                if let Some(key) = key {
                    self.plans.insert(key, generation, &plan, &optimized);
                }
                (Cow::Owned(state), optimized)
            }
        };
        // What `SessionContext::execute_logical_plan` + `DataFrame::execute_stream` do for a
        // query, without their copies of the session state and function registries.
        let physical = state
            .query_planner()
            .create_physical_plan(&optimized, state.as_ref())
            .await
            .map_err(plan_err)?;
        let stream =
            datafusion::physical_plan::execute_stream(physical, Arc::clone(&self.task_ctx))
                .map_err(|e| QueryError::from_datafusion(e, false))?;
        // The executed schema, not the SQL planner's: analyzer rules may change output types
        // (a multi-value `GROUP BY` key is a string, not a list, once unnested).
        let schema: SchemaRef = stream.schema();
        Ok(QueryResult {
            schema,
            stream,
            time_zone,
            data_sources: data_sources_read(&optimized),
            planning: started.elapsed(),
        })
    }

    /// [`QueryEngine::prepare`] then [`QueryEngine::execute_prepared`] (no timeout applied).
    ///
    /// # Errors
    /// As those two.
    pub async fn execute(&self, q: &SqlQuery) -> Result<QueryResult, QueryError> {
        let p = self.prepare(q)?;
        self.execute_prepared(&p).await
    }
}

/// The answer to `EXPLAIN PLAN FOR <query>`: one row of Druid's three VARCHAR columns.
///
/// - `PLAN`: a JSON array with one object, in the shape Druid gives with
///   `useNativeQueryExplain`: `query` (here `{"queryType": "dolmen", "plan": <DataFusion's
///   optimized logical plan, indented text>}`: Dolmen has no native query language), `signature`
///   (`[{"name", "type"}]`, Druid runtime types) and `columnMappings`
///   (`[{"queryColumn", "outputColumn"}]`).
/// - `RESOURCES`: the tables read, `[{"name", "type"}]` with type `DATASOURCE` for datasources
///   and `SYSTEM_TABLE` for `sys`/`INFORMATION_SCHEMA` tables, sorted by name. Lookup tables
///   are not listed, as in Druid (`NamedLookupSchema` names no resource type unless
///   `authorizeLookupDirectly` is set).
/// - `ATTRIBUTES`: `{"statementType": "SELECT"}`.
///
/// # Errors
/// A planning error if the optimizer rejects the plan.
fn explain_result(
    state: &SessionState,
    plan: &LogicalPlan,
    time_zone: Zone,
) -> Result<QueryResult, QueryError> {
    use arrow::array::{RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

    let plan_err = |e| QueryError::from_datafusion(e, true);
    let optimized = state.optimize(plan).map_err(plan_err)?;
    let schema = optimized.schema().as_arrow();
    let signature: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name(),
                "type": crate::writer::ColumnInfo::from_field(f).native_type,
            })
        })
        .collect();
    let mappings: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| serde_json::json!({"queryColumn": f.name(), "outputColumn": f.name()}))
        .collect();
    let mut resources = std::collections::BTreeSet::new();
    optimized
        .apply(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let kind = match scan.table_name.schema() {
                    None | Some("druid") => Some("DATASOURCE"),
                    Some(crate::lookup_schema::LOOKUP_SCHEMA) => None,
                    Some(_) => Some("SYSTEM_TABLE"),
                };
                if let Some(kind) = kind {
                    resources.insert((scan.table_name.table().to_string(), kind));
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .map_err(plan_err)?;
    let plan_json = serde_json::json!([{
        "query": {
            "queryType": "dolmen",
            "plan": optimized.display_indent().to_string(),
        },
        "signature": signature,
        "columnMappings": mappings,
    }]);
    let resources_json: Vec<Value> = resources
        .into_iter()
        .map(|(name, kind)| serde_json::json!({"name": name, "type": kind}))
        .collect();
    let out_schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("PLAN", DataType::Utf8, true),
        Field::new("RESOURCES", DataType::Utf8, true),
        Field::new("ATTRIBUTES", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&out_schema),
        vec![
            Arc::new(StringArray::from(vec![plan_json.to_string()])),
            Arc::new(StringArray::from(vec![
                Value::from(resources_json).to_string(),
            ])),
            Arc::new(StringArray::from(vec![
                serde_json::json!({"statementType": "SELECT"}).to_string(),
            ])),
        ],
    )
    .map_err(|e| QueryError::from_datafusion(e.into(), true))?;
    let stream =
        RecordBatchStreamAdapter::new(Arc::clone(&out_schema), futures::stream::iter([Ok(batch)]));
    Ok(QueryResult {
        schema: out_schema,
        stream: Box::pin(stream),
        time_zone,
        data_sources: data_sources_read(&optimized),
        planning: Duration::ZERO,
    })
}

/// Most entries of the statement resources cache before it is emptied.
const RESOURCES_CACHE_MAX: usize = 1024;

/// Everything a statement touches, for authorization (Druid's `SqlResourceCollectorShuttle`
/// and `AbstractStatement.authorize`): read before execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatementResources {
    /// Datasources read (the `druid` schema), sorted.
    pub data_sources_read: Vec<String>,
    /// Tables of other schemas read, as `schema.table` (`sys`, `INFORMATION_SCHEMA`,
    /// `lookup`), sorted.
    pub other_tables: Vec<String>,
    /// Whether `EXTERN` is read.
    pub external: bool,
    /// The `INSERT` / `REPLACE` target.
    pub write_target: Option<String>,
}

impl QueryEngine {
    /// Plans a prepared query (without executing or caching it) and lists what it touches.
    ///
    /// # Errors
    /// As [`QueryEngine::plan`]: the statement's own validation errors.
    pub async fn resources_of(&self, p: &PreparedQuery) -> Result<StatementResources, QueryError> {
        use datafusion::common::tree_node::TreeNodeRecursion;
        // A repeated plain query touches what it touched at the same view generation (the key
        // holds the text, parameters and settings): no second planning on the hot path.
        let key = p.plan_key();
        let generation = self.view.generation();
        if let Some(k) = &key
            && let Some((g, r)) = self.resources.lock().expect("resources cache").get(k)
            && *g == generation
        {
            return Ok(r.clone());
        }
        let (_, plan) = self.plan_state(self.query_state(), p).await?;
        let mut out = StatementResources {
            write_target: p.dml().map(|d| d.data_source.clone()),
            ..StatementResources::default()
        };
        let mut read = std::collections::BTreeSet::new();
        let mut other = std::collections::BTreeSet::new();
        let _ = plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let table = scan.table_name.table();
                match scan.table_name.schema() {
                    None if table
                        .starts_with(&format!("{}(", crate::external::EXTERN_FUNCTION)) =>
                    {
                        out.external = true;
                    }
                    None | Some("druid") => {
                        read.insert(table.to_string());
                    }
                    Some(schema) => {
                        other.insert(format!("{schema}.{table}"));
                    }
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
        out.data_sources_read = read.into_iter().collect();
        out.other_tables = other.into_iter().collect();
        if let Some(k) = key {
            let mut cache = self.resources.lock().expect("resources cache");
            if cache.len() >= RESOURCES_CACHE_MAX {
                cache.clear();
            }
            cache.insert(k, (generation, out.clone()));
        }
        Ok(out)
    }
}

/// The Druid datasources a plan scans (tables of the `druid` schema), sorted, each once.
/// Subqueries and joins are plan nodes like any other, so every scan is found.
pub fn data_sources_read(plan: &LogicalPlan) -> Vec<String> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut names = std::collections::BTreeSet::new();
    // Visiting a plan cannot fail; `apply` only reports the closure's errors.
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && matches!(scan.table_name.schema(), None | Some("druid"))
        {
            names.insert(scan.table_name.table().to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    names.into_iter().collect()
}

/// Converts a request parameter to a literal (`SqlParameter.java` types).
fn parameter_value(i: usize, p: &SqlParameter) -> Result<ScalarValue, QueryError> {
    let bad = || {
        QueryError::InvalidInput(format!(
            "parameters[{i}]: value [{}] is not a valid {}",
            p.value, p.sql_type
        ))
    };
    let t = p.sql_type.to_ascii_uppercase();
    if p.value.is_null() {
        return Ok(match t.as_str() {
            "BIGINT" | "INTEGER" | "SMALLINT" | "TINYINT" => ScalarValue::Int64(None),
            "DOUBLE" | "FLOAT" | "REAL" | "DECIMAL" => ScalarValue::Float64(None),
            "BOOLEAN" => ScalarValue::Boolean(None),
            "TIMESTAMP" | "DATE" => ScalarValue::TimestampMillisecond(None, None),
            _ => ScalarValue::Utf8(None),
        });
    }
    Ok(match t.as_str() {
        "VARCHAR" | "CHAR" => ScalarValue::Utf8(Some(match &p.value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })),
        "BIGINT" | "INTEGER" | "SMALLINT" | "TINYINT" => ScalarValue::Int64(Some(match &p.value {
            Value::Number(n) => n.as_i64().ok_or_else(bad)?,
            Value::String(s) => s.trim().parse().map_err(|_| bad())?,
            _ => return Err(bad()),
        })),
        "DOUBLE" | "FLOAT" | "REAL" | "DECIMAL" => ScalarValue::Float64(Some(match &p.value {
            Value::Number(n) => n.as_f64().ok_or_else(bad)?,
            Value::String(s) => s.trim().parse().map_err(|_| bad())?,
            _ => return Err(bad()),
        })),
        "BOOLEAN" => ScalarValue::Boolean(Some(match &p.value {
            Value::Bool(b) => *b,
            Value::String(s) if s.eq_ignore_ascii_case("true") => true,
            Value::String(s) if s.eq_ignore_ascii_case("false") => false,
            _ => return Err(bad()),
        })),
        "TIMESTAMP" | "DATE" => ScalarValue::TimestampMillisecond(
            Some(match &p.value {
                Value::Number(n) => n.as_i64().ok_or_else(bad)?,
                Value::String(s) => parse_iso_instant(s).map_err(|_| bad())?,
                _ => return Err(bad()),
            }),
            None,
        ),
        "ARRAY" => array_parameter(&p.value).ok_or_else(bad)?,
        other => {
            return Err(QueryError::InvalidInput(format!(
                "parameters[{i}]: unsupported parameter type [{other}]"
            )));
        }
    })
}

/// An `ARRAY` parameter's JSON list as a list literal whose element type follows the values,
/// as Druid infers it: all integers `ARRAY<BIGINT>`, any other number `ARRAY<DOUBLE>`, strings
/// `ARRAY<VARCHAR>` (also for a list of nulls only); nulls stay null elements. `None` for a
/// value that is not a list, for nested lists or objects, and for lists mixing strings with
/// numbers or booleans.
fn array_parameter(v: &Value) -> Option<ScalarValue> {
    use arrow::datatypes::DataType;
    let items = v.as_array()?;
    let kinds: Vec<u8> = items
        .iter()
        .filter(|x| !x.is_null())
        .map(|x| match x {
            Value::Number(n) if n.is_i64() => Some(0),
            Value::Number(_) => Some(1),
            Value::String(_) => Some(2),
            Value::Bool(_) => Some(3),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let numeric = kinds.iter().all(|k| *k <= 1);
    let kind = match (kinds.iter().max(), numeric) {
        (None, _) => 2,
        (Some(_), true) => *kinds.iter().max()?,
        (Some(k), false) if kinds.iter().all(|x| x == k) => *k,
        _ => return None,
    };
    let (dt, values): (DataType, Vec<ScalarValue>) = match kind {
        0 => (
            DataType::Int64,
            items
                .iter()
                .map(|x| ScalarValue::Int64(x.as_i64()))
                .collect(),
        ),
        1 => (
            DataType::Float64,
            items
                .iter()
                .map(|x| ScalarValue::Float64(x.as_f64()))
                .collect(),
        ),
        3 => (
            DataType::Boolean,
            items
                .iter()
                .map(|x| ScalarValue::Boolean(x.as_bool()))
                .collect(),
        ),
        _ => (
            DataType::Utf8,
            items
                .iter()
                .map(|x| ScalarValue::Utf8(x.as_str().map(str::to_string)))
                .collect(),
        ),
    };
    Some(ScalarValue::List(ScalarValue::new_list_nullable(
        &values, &dt,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_parameters_take_their_element_type_from_the_values() {
        let p = |v: Value| {
            parameter_value(
                0,
                &SqlParameter {
                    sql_type: "ARRAY".into(),
                    value: v,
                },
            )
        };
        let dt = |v: Value| p(v).unwrap().data_type().to_string();
        assert_eq!(dt(serde_json::json!([1, null, 3])), "List(Int64)");
        assert_eq!(dt(serde_json::json!([1, 2.5])), "List(Float64)");
        assert_eq!(dt(serde_json::json!(["a", null])), "List(Utf8)");
        assert_eq!(dt(serde_json::json!([null])), "List(Utf8)");
        assert_eq!(dt(serde_json::json!([])), "List(Utf8)");
        assert_eq!(dt(serde_json::json!([true])), "List(Boolean)");
        for bad in [
            serde_json::json!(["a", 1]),
            serde_json::json!([[1]]),
            serde_json::json!({"a": 1}),
            serde_json::json!("x"),
        ] {
            let e = p(bad.clone()).unwrap_err().to_string();
            assert!(e.contains("parameters[0]"), "{bad}: {e}");
        }
    }

    #[test]
    fn parse_errors_read_like_druid() {
        let engine_err = |sql: &str| {
            let ctx = SessionContext::new();
            let e = crate::request::parse_request_sql(&ctx.state(), sql).unwrap_err();
            druid_parse_message(&e, sql).unwrap()
        };
        assert_eq!(
            engine_err("SELEC 1"),
            "Received an unexpected token [SELEC] (line [1], column [1]), acceptable options: [an SQL statement]"
        );
        assert_eq!(
            engine_err("SELECT *\nFROM"),
            "Received an unexpected token [<EOF>] (line [2], column [5]), acceptable options: [identifier]"
        );
        assert_eq!(
            engine_err("SELECT 'abc"),
            "Lexical error at line [1], column [8]: Unterminated string literal"
        );
    }

    /// Errors the query's own expressions raise on the values they read are the client's (400,
    /// Druid's `INVALID_INPUT`); storage and internal failures stay 500s.
    #[test]
    fn runtime_errors_of_the_query_are_400s() {
        let status = |e: DataFusionError| QueryError::from_datafusion(e, false).http_status();
        assert_eq!(status(DataFusionError::Execution("bad input".into())), 400);
        assert_eq!(
            status(DataFusionError::ArrowError(
                Box::new(arrow::error::ArrowError::DivideByZero),
                None
            )),
            400
        );
        assert_eq!(status(DataFusionError::Internal("bug".into())), 500);
        assert_eq!(
            status(DataFusionError::IoError(std::io::Error::other("disk"))),
            500
        );
        assert_eq!(
            status(DataFusionError::ArrowError(
                Box::new(arrow::error::ArrowError::IoError(
                    "disk".into(),
                    std::io::Error::other("disk")
                )),
                None
            )),
            500
        );
    }

    #[test]
    fn table_not_found_reads_like_druid() {
        assert_eq!(
            druid_message("Error during planning: table 'druid.druid.foo' not found"),
            "Object 'foo' not found"
        );
    }

    #[test]
    fn parameters_convert() {
        let p = SqlParameter {
            sql_type: "BIGINT".into(),
            value: serde_json::json!(5),
        };
        assert_eq!(parameter_value(0, &p).unwrap(), ScalarValue::Int64(Some(5)));
        let bad = SqlParameter {
            sql_type: "BIGINT".into(),
            value: serde_json::json!("x"),
        };
        assert!(
            parameter_value(0, &bad)
                .unwrap_err()
                .to_string()
                .contains("parameters[0]")
        );
        let ts = SqlParameter {
            sql_type: "TIMESTAMP".into(),
            value: serde_json::json!("2015-09-12 00:00:00"),
        };
        assert!(matches!(
            parameter_value(0, &ts).unwrap(),
            ScalarValue::TimestampMillisecond(Some(_), None)
        ));
    }
}
