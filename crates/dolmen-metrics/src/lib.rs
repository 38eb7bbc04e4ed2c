//! Dolmen's metrics: Druid's metrics, named and shaped exactly as Druid's Prometheus emitter
//! (`extensions-contrib/prometheus-emitter`) exposes them, served at `GET /metrics`, plus the
//! standard `process_*` metrics.
//!
//! # Names and labels
//! A Druid metric `query/time` becomes `druid_query_time` ([`names::prometheus_name`]: lower
//! case, Druid's regex, the namespace `druid` in front); its dimensions from Druid's
//! `defaultMetrics.json` become the labels, sorted; label values go through Druid's value regex
//! ([`names::label_value`]). `count` metrics are counters (`..._total`), `gauge` metrics gauges,
//! `timer` metrics histograms in seconds over Druid's buckets ([`defs::TIMER_BUCKETS`]). The
//! list is [`defs::ALL`].
//!
//! # Two ways in
//! - **Events** are pushed where they happen, through [`Metrics`]: a SQL query ends
//!   ([`Metrics::record_sql_query`]), a task ends ([`Metrics::record_task`]), ingestion
//!   counters move ([`Metrics::add_ingest`], fed from the running tasks' row counters at scrape
//!   time and when a task ends, never per row). Label sets of SQL queries are cached per set of
//!   datasources, so a query costs one map lookup and a few atomic adds.
//! - **Snapshots** (segment counts and sizes, segment cache bytes, task slots, stream lag,
//!   process figures) are computed at scrape time: sources registered with
//!   [`Metrics::add_source`] fill a [`Snapshot`] that a prometheus-client `Collector` encodes.
//!   Nothing runs on a timer.
//!
//! # Off switch
//! `service.emitter=noop` ([`Emitter::Noop`]) makes [`Metrics`] inert: nothing is recorded and
//! [`Metrics::encode`] answers `None` (the route answers 404).

pub mod defs;
pub mod names;
mod process;
mod snapshot;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use snapshot::{Snapshot, StreamLag, StreamTimeLag};

use crate::defs::MetricDef;
use crate::names::{UNKNOWN_LABEL, java_list, label_value, query_data_source};

/// Where metrics go (`service.emitter`, Druid's `druid.emitter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Emitter {
    /// `prometheus` (default): recorded and served at `GET /metrics`.
    #[default]
    Prometheus,
    /// `noop`: nothing is recorded, `GET /metrics` is 404.
    Noop,
}

impl Emitter {
    /// Parses a `service.emitter` value (`prometheus` or `noop`, any case).
    ///
    /// # Errors
    /// A message listing the accepted values.
    pub fn parse(value: &str) -> Result<Emitter, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "prometheus" => Ok(Emitter::Prometheus),
            "noop" => Ok(Emitter::Noop),
            other => Err(format!("[{other}] is not one of [prometheus, noop]")),
        }
    }

    /// The property value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Emitter::Prometheus => "prometheus",
            Emitter::Noop => "noop",
        }
    }
}

/// Metric settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `service.emitter`.
    pub emitter: Emitter,
    /// `service.emitter.prometheus.namespace` (Druid's `druid.emitter.prometheus.namespace`):
    /// the prefix of every Druid metric name; default [`DEFAULT_NAMESPACE`].
    pub namespace: String,
}

/// Druid's default namespace.
pub const DEFAULT_NAMESPACE: &str = "druid";

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            emitter: Emitter::Prometheus,
            namespace: DEFAULT_NAMESPACE.to_string(),
        }
    }
}

/// The exposition format of a scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (`application/openmetrics-text`), ends with `# EOF`.
    OpenMetrics,
    /// Prometheus text format 0.0.4 (`text/plain`).
    Prometheus,
}

impl Format {
    /// The format a scraper asks for in its `Accept` header: OpenMetrics when it lists
    /// `application/openmetrics-text` (Prometheus does), else the 0.0.4 text format.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The response `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => prometheus_text::CONTENT_TYPE,
        }
    }
}

/// How a SQL query ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryOutcome {
    /// The whole answer was written.
    Success,
    /// Planning or execution failed.
    Failed,
    /// Cancelled (`DELETE /v2/sql/{id}`), or the client went away before the end.
    Interrupted,
    /// Ran past its context `timeout`.
    TimedOut,
}

/// Which endpoint a SQL query came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlEndpoint {
    /// `POST /v2/sql`: the query runs and answers in the request; it also counts as a query
    /// (`query/*`).
    Sync,
    /// `POST /v2/sql/statements` or `/v2/sql/task`: the request plans the statement and submits
    /// its task (as Druid, only `sqlQuery/*` are emitted for the request).
    Async,
}

/// One SQL request, as [`Metrics::record_sql_query`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct SqlQueryReport<'a> {
    /// The endpoint.
    pub endpoint: SqlEndpoint,
    /// The datasources the query reads, sorted; `None` when planning did not get that far.
    pub data_sources: Option<&'a [String]>,
    /// From the request's arrival to the last byte of the response written.
    pub time: Duration,
    /// Planning time (parse, validate, optimize, physical plan); `None` when planning failed.
    pub planning: Option<Duration>,
    /// Bytes of the response body written.
    pub bytes: u64,
    /// How it ended.
    pub outcome: QueryOutcome,
}

/// Ingestion counters of one datasource (Druid's `RowIngestionMeters` plus the appenderator's
/// persist and handoff counts): the amounts to add, or a task's running totals.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IngestCounts {
    /// `ingest/events/processed`: rows indexed.
    pub processed: u64,
    /// `ingest/events/processedWithError`: rows indexed with a value that did not convert.
    pub processed_with_error: u64,
    /// `ingest/events/unparseable`: rows that could not be parsed.
    pub unparseable: u64,
    /// `ingest/events/thrownAway`: rows filtered out or outside the accepted time range.
    pub thrown_away: u64,
    /// `ingest/rows/output`: rows written to segments (after rollup).
    pub rows_output: u64,
    /// `ingest/persists/count`: intermediate persists (a streaming task's hydrants).
    pub persists: u64,
    /// `ingest/handoff/count`: segments handed off by streaming tasks.
    pub handoffs: u64,
}

impl IngestCounts {
    fn fields(&self) -> [u64; 7] {
        [
            self.processed,
            self.processed_with_error,
            self.unparseable,
            self.thrown_away,
            self.rows_output,
            self.persists,
            self.handoffs,
        ]
    }

    fn from_fields(f: [u64; 7]) -> IngestCounts {
        IngestCounts {
            processed: f[0],
            processed_with_error: f[1],
            unparseable: f[2],
            thrown_away: f[3],
            rows_output: f[4],
            persists: f[5],
            handoffs: f[6],
        }
    }

    /// What `current` (a task's running totals) adds over `reported` (the highest totals
    /// already reported), per counter; `reported` is raised to it. A total that went down
    /// (a build path that takes back its counts before another counts them again) adds
    /// nothing until it passes its earlier high: counters never go backwards and nothing is
    /// counted twice.
    pub fn advance(reported: &mut IngestCounts, current: &IngestCounts) -> IngestCounts {
        let (mut r, c) = (reported.fields(), current.fields());
        let mut d = [0u64; 7];
        for i in 0..7 {
            d[i] = c[i].saturating_sub(r[i]);
            r[i] = r[i].max(c[i]);
        }
        *reported = IngestCounts::from_fields(r);
        IngestCounts::from_fields(d)
    }

    /// True when every counter is zero.
    pub fn is_zero(&self) -> bool {
        self.fields().iter().all(|v| *v == 0)
    }
}

type L1 = [(&'static str, String); 1];
type L2 = [(&'static str, String); 2];
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn timer_histogram() -> Histogram {
    Histogram::new(defs::TIMER_BUCKETS)
}

/// A timer's observation in seconds: Druid emits these timers in milliseconds and its emitter
/// divides by their `conversionFactor` of 1000 (Dolmen keeps the fractions of a millisecond).
fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The handles of one `dataSource` label set of the SQL metrics.
#[derive(Debug)]
struct SqlHandles {
    sql_time: Histogram,
    sql_planning: Histogram,
    sql_bytes: Counter,
    /// `query/time` and `query/bytes`; `None` when the datasources are unknown (no query ran).
    query: Option<(Histogram, Counter)>,
}

/// Most label sets of SQL metrics kept in the handle cache; past it, queries look their
/// families up directly (the same result, a little slower).
const SQL_HANDLE_CACHE: usize = 4096;

/// The `type` of `query/*` metrics: Druid puts the native query type there (`groupBy`,
/// `scan`, ...); Dolmen runs SQL on DataFusion with no native query, so every query is `sql`.
pub const QUERY_TYPE: &str = "sql";

/// A scrape-time source (see [`Metrics::add_source`]).
type Source = Box<dyn Fn(&mut Snapshot) + Send + Sync>;

struct Inner {
    registry: Registry,
    scrape: Mutex<()>,
    sources: RwLock<Vec<Source>>,
    snapshot: Arc<Mutex<Snapshot>>,
    query_time: HistogramFamily<L2>,
    query_bytes: Family<L2, Counter>,
    query_count: Counter,
    query_success: Counter,
    query_failed: Counter,
    query_interrupted: Counter,
    query_timeout: Counter,
    sql_time: HistogramFamily<L1>,
    sql_planning: HistogramFamily<L1>,
    sql_bytes: Family<L1, Counter>,
    sql_handles: RwLock<HashMap<Vec<String>, Arc<SqlHandles>>>,
    sql_unknown: std::sync::OnceLock<Arc<SqlHandles>>,
    task_run_time: HistogramFamily<L2>,
    task_success: Family<L1, Counter>,
    task_failed: Family<L1, Counter>,
    ingest: [Family<L1, Counter>; 7],
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").finish_non_exhaustive()
    }
}

/// The metrics of one server: cheap to clone (one `Arc`), inert when the emitter is `noop`.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    inner: Option<Arc<Inner>>,
}

fn register<M: prometheus_client::registry::Metric + Clone>(
    reg: &mut Registry,
    def: &MetricDef,
    metric: &M,
) -> M {
    reg.register(def.formatted_name(), def.help_stem(), metric.clone());
    metric.clone()
}

impl Metrics {
    /// Metrics as `config` says: recording and served for `prometheus`, inert for `noop`.
    pub fn new(config: &MetricsConfig) -> Metrics {
        if config.emitter == Emitter::Noop {
            return Metrics::disabled();
        }
        let mut root = Registry::default();
        root.register_collector(Box::new(process::ProcessCollector));
        let reg = root.sub_registry_with_prefix(&config.namespace);
        let hist2 = || HistogramFamily::<L2>::new_with_constructor(timer_histogram as fn() -> _);
        let hist1 = || HistogramFamily::<L1>::new_with_constructor(timer_histogram as fn() -> _);
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let ingest_defs = [
            defs::INGEST_EVENTS_PROCESSED,
            defs::INGEST_EVENTS_PROCESSED_WITH_ERROR,
            defs::INGEST_EVENTS_UNPARSEABLE,
            defs::INGEST_EVENTS_THROWN_AWAY,
            defs::INGEST_ROWS_OUTPUT,
            defs::INGEST_PERSISTS_COUNT,
            defs::INGEST_HANDOFF_COUNT,
        ];
        let ingest = ingest_defs.map(|d| register(reg, &d, &Family::<L1, Counter>::default()));
        let query_time = register(reg, &defs::QUERY_TIME, &hist2());
        let query_bytes = register(reg, &defs::QUERY_BYTES, &Family::default());
        let query_count = register(reg, &defs::QUERY_COUNT, &Counter::default());
        let query_success = register(reg, &defs::QUERY_SUCCESS_COUNT, &Counter::default());
        let query_failed = register(reg, &defs::QUERY_FAILED_COUNT, &Counter::default());
        let query_interrupted = register(reg, &defs::QUERY_INTERRUPTED_COUNT, &Counter::default());
        let query_timeout = register(reg, &defs::QUERY_TIMEOUT_COUNT, &Counter::default());
        let sql_time = register(reg, &defs::SQL_QUERY_TIME, &hist1());
        let sql_planning = register(reg, &defs::SQL_QUERY_PLANNING_TIME, &hist1());
        let sql_bytes = register(reg, &defs::SQL_QUERY_BYTES, &Family::default());
        let task_run_time = register(reg, &defs::TASK_RUN_TIME, &hist2());
        let task_success = register(reg, &defs::TASK_SUCCESS_COUNT, &Family::default());
        let task_failed = register(reg, &defs::TASK_FAILED_COUNT, &Family::default());
        reg.register_collector(Box::new(snapshot::SnapshotCollector {
            current: Arc::clone(&snapshot),
        }));
        Metrics {
            inner: Some(Arc::new(Inner {
                registry: root,
                scrape: Mutex::new(()),
                sources: RwLock::default(),
                snapshot,
                query_time,
                query_bytes,
                query_count,
                query_success,
                query_failed,
                query_interrupted,
                query_timeout,
                sql_time,
                sql_planning,
                sql_bytes,
                sql_handles: RwLock::default(),
                sql_unknown: std::sync::OnceLock::new(),
                task_run_time,
                task_success,
                task_failed,
                ingest,
            })),
        }
    }

    /// Inert metrics (the `noop` emitter).
    pub fn disabled() -> Metrics {
        Metrics { inner: None }
    }

    /// False for the `noop` emitter.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Registers a source of scrape-time figures: it is called at every scrape, before
    /// anything is encoded, and may also push counters (e.g. the row counters of running
    /// tasks). It must not call [`Metrics::add_source`] or [`Metrics::encode`].
    pub fn add_source(&self, source: impl Fn(&mut Snapshot) + Send + Sync + 'static) {
        if let Some(inner) = &self.inner {
            inner
                .sources
                .write()
                .expect("sources lock")
                .push(Box::new(source));
        }
    }

    /// One scrape: runs the sources, then encodes everything in `format`. `None` when the
    /// emitter is `noop`. Scrapes run one at a time.
    pub fn encode(&self, format: Format) -> Option<String> {
        let inner = self.inner.as_ref()?;
        let _one_at_a_time = inner.scrape.lock().expect("scrape lock");
        let mut snap = Snapshot::default();
        for source in inner.sources.read().expect("sources lock").iter() {
            source(&mut snap);
        }
        *inner.snapshot.lock().expect("snapshot lock") = snap;
        let mut out = String::with_capacity(16 * 1024);
        let encoded = match format {
            Format::OpenMetrics => text::encode(&mut out, &inner.registry),
            Format::Prometheus => prometheus_text::encode(&mut out, &inner.registry),
        };
        // Writing to a String cannot fail; an encoder error would be a bug in a collector.
        encoded.ok().map(|()| out)
    }

    /// Records a finished SQL request: `sqlQuery/time`, `sqlQuery/planningTimeMs` (when
    /// planning finished), `sqlQuery/bytes`, labelled `dataSource` = Druid's list text of the
    /// datasources read (`[wikipedia]`, `unknown` when planning failed before that was
    /// known); for the sync endpoint also `query/count` and one of `query/success|failed|
    /// interrupted|timeout/count`, and, when the query got past planning, `query/time` (the
    /// time after planning) and `query/bytes` labelled `dataSource` (the one name, or the list
    /// text) and `type` = [`QUERY_TYPE`].
    pub fn record_sql_query(&self, r: &SqlQueryReport<'_>) {
        let Some(inner) = &self.inner else { return };
        let handles = inner.sql_handles(r.data_sources);
        handles.sql_time.observe(seconds(r.time));
        if let Some(p) = r.planning {
            handles.sql_planning.observe(seconds(p));
        }
        handles.sql_bytes.inc_by(r.bytes);
        if r.endpoint == SqlEndpoint::Async {
            return;
        }
        inner.query_count.inc();
        match r.outcome {
            QueryOutcome::Success => inner.query_success.inc(),
            QueryOutcome::Failed => inner.query_failed.inc(),
            QueryOutcome::Interrupted => inner.query_interrupted.inc(),
            QueryOutcome::TimedOut => inner.query_timeout.inc(),
        };
        if let (Some((time, bytes)), Some(planning)) = (&handles.query, r.planning) {
            time.observe(seconds(r.time.saturating_sub(planning)));
            bytes.inc_by(r.bytes);
        }
    }

    /// Records a finished task: `task/run/time` (`dataSource`, `taskType`) and
    /// `task/success/count` or `task/failed/count` (`dataSource`).
    pub fn record_task(&self, data_source: &str, task_type: &str, succeeded: bool, run: Duration) {
        let Some(inner) = &self.inner else { return };
        let ds = label_value(data_source);
        inner
            .task_run_time
            .get_or_create(&[
                ("dataSource", ds.clone()),
                ("taskType", label_value(task_type)),
            ])
            .observe(seconds(run));
        let family = if succeeded {
            &inner.task_success
        } else {
            &inner.task_failed
        };
        family.get_or_create(&[("dataSource", ds)]).inc();
    }

    /// Adds ingestion counts of a datasource (see [`IngestCounts`]).
    pub fn add_ingest(&self, data_source: &str, counts: &IngestCounts) {
        let Some(inner) = &self.inner else { return };
        let labels = [("dataSource", label_value(data_source))];
        for (family, v) in inner.ingest.iter().zip(counts.fields()) {
            family.get_or_create(&labels).inc_by(v);
        }
    }
}

impl Inner {
    /// The SQL metric handles of a set of datasources (`None`: unknown), from the cache (no
    /// allocation once a set was seen).
    fn sql_handles(&self, data_sources: Option<&[String]>) -> Arc<SqlHandles> {
        let Some(names) = data_sources else {
            return Arc::clone(self.sql_unknown.get_or_init(|| {
                let label = [("dataSource", UNKNOWN_LABEL.to_string())];
                Arc::new(SqlHandles {
                    sql_time: self.sql_time.get_or_create_owned(&label),
                    sql_planning: self.sql_planning.get_or_create_owned(&label),
                    sql_bytes: self.sql_bytes.get_or_create_owned(&label),
                    query: None,
                })
            }));
        };
        if let Some(h) = self
            .sql_handles
            .read()
            .expect("sql handles lock")
            .get(names)
        {
            return Arc::clone(h);
        }
        let sql_label = [("dataSource", label_value(&java_list(names)))];
        let query_labels = [
            ("dataSource", label_value(&query_data_source(names))),
            ("type", QUERY_TYPE.to_string()),
        ];
        let handles = Arc::new(SqlHandles {
            sql_time: self.sql_time.get_or_create_owned(&sql_label),
            sql_planning: self.sql_planning.get_or_create_owned(&sql_label),
            sql_bytes: self.sql_bytes.get_or_create_owned(&sql_label),
            query: Some((
                self.query_time.get_or_create_owned(&query_labels),
                self.query_bytes.get_or_create_owned(&query_labels),
            )),
        });
        let mut cache = self.sql_handles.write().expect("sql handles lock");
        if cache.len() < SQL_HANDLE_CACHE {
            cache.insert(names.to_vec(), Arc::clone(&handles));
        }
        handles
    }
}

#[cfg(test)]
mod tests;
