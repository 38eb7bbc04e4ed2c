//! `INFORMATION_SCHEMA`: Druid's SQL metadata tables `SCHEMATA`, `TABLES`, `COLUMNS` and
//! `ROUTINES` (reference-behaviour "Metadata tables", `docs/querying/sql-metadata-tables.md`;
//! column values as Druid's `InformationSchema.java` fills them), built from the live segment
//! view each time a query names one, so they always show the datasources queryable right now.
//!
//! Values, per column of `COLUMNS`:
//! - `ORDINAL_POSITION` 1-based; `COLUMN_DEFAULT` the empty string; `IS_NULLABLE` `NO` for
//!   `__time`, `YES` otherwise (SQL-compatible nulls).
//! - `DATA_TYPE` the SQL type name the result headers use (`VARCHAR`, `BIGINT`, `DOUBLE`,
//!   `FLOAT`, `TIMESTAMP`, `OTHER` for sketch columns, ...); a multi-value string is `VARCHAR`.
//! - `NUMERIC_PRECISION` / `_RADIX` / `_SCALE`: Calcite's precisions (`BIGINT` 19, `INTEGER`
//!   10, `DOUBLE` 15, `FLOAT` 7), radix 10, scale 0 for integer types and null for floating
//!   ones; `DATETIME_PRECISION` 3 for `TIMESTAMP` (milliseconds); `CHARACTER_SET_NAME`
//!   `UTF-16LE` and `COLLATION_NAME` `UTF-16LE$en_US$primary` for `VARCHAR` (Calcite's
//!   defaults, as Druid reports them); `JDBC_TYPE` the `java.sql.Types` code.
//!
//! Schemas listed are the ones Dolmen answers: `druid` (`TABLE_TYPE` `TABLE`), `lookup`
//! (`TABLE`, with `IS_JOINABLE` and `IS_BROADCAST` `YES`, as Druid's `LookupTable`; columns
//! `k`, `v` VARCHAR, see [`crate::lookup_schema`]), `INFORMATION_SCHEMA` and `sys`
//! (`SYSTEM_TABLE`). `IS_JOINABLE` and `IS_BROADCAST` are `NO` for every other table.
//! Identifiers are case-sensitive, as in Druid: `INFORMATION_SCHEMA.TABLES`, not
//! `information_schema.tables`.
//!
//! `sys` ([`SysSchema`]) has Druid's `segments`, `server_segments`, `servers`, `tasks`,
//! `supervisors` and `server_properties` with Druid's columns, read from the metadata store and
//! the live timelines when a query names them. One Dolmen process plays every role, so
//! `sys.servers` lists it once per role (`coordinator`, `overlord`, `broker`, `router`,
//! `historical`, `indexer`) under the same `host:port`; the historical row serves every used,
//! non-overshadowed segment the coordinator has not decided to keep unloaded (Dolmen loads them
//! on demand), which is what `is_available`, `num_replicas` and `sys.server_segments` say;
//! `replication_factor` is the replica count the segment's load rule asks for over all tiers
//! (-1 until the coordinator has evaluated the rules for it, as in Druid). `sys.supervisors` lists
//! the running supervisors ([`SupervisorRows`], bound once they start).
//!
//! With security on, rows of `sys.segments`, `sys.server_segments`, `sys.tasks`,
//! `sys.supervisors` and the `druid` schema's rows of `INFORMATION_SCHEMA.TABLES`/`COLUMNS`
//! show only for datasources the user may read ([`SystemTableAccess`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use dolmen_common::time::format_iso_millis;
use dolmen_lookup::LookupRegistry;
use dolmen_metadata::{MetadataStore, TaskFilter};
use dolmen_segment::DataSegment;
use dolmen_storage::SegmentView;

use crate::lookup_schema::{LOOKUP_SCHEMA, lookup_table_schema};
use crate::table::datasource_schema;
use crate::writer::ColumnInfo;

/// The catalog name Druid reports.
pub const CATALOG: &str = "druid";
/// Name of the metadata schema.
pub const INFORMATION_SCHEMA: &str = "INFORMATION_SCHEMA";
/// Name of the datasource schema.
pub const DRUID_SCHEMA: &str = "druid";
/// Name of the system schema.
pub const SYS_SCHEMA: &str = "sys";

const TABLE_NAMES: [&str; 4] = ["COLUMNS", "ROUTINES", "SCHEMATA", "TABLES"];
const SYS_TABLE_NAMES: [&str; 6] = [
    "segments",
    "server_properties",
    "server_segments",
    "servers",
    "supervisors",
    "tasks",
];

/// A SQL function as `ROUTINES` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Routine {
    /// Upper-case function name.
    pub name: String,
    /// An aggregate function (`IS_AGGREGATOR` `YES`).
    pub aggregator: bool,
}

/// The `INFORMATION_SCHEMA` schema.
#[derive(Debug)]
pub struct InformationSchema {
    view: Arc<SegmentView>,
    routines: Vec<Routine>,
    with_sys: bool,
    lookups: Arc<LookupRegistry>,
}

/// One row of `TABLES` and the columns `COLUMNS` lists for it.
struct TableInfo {
    schema: &'static str,
    name: String,
    table_type: &'static str,
    /// `IS_JOINABLE` and `IS_BROADCAST` (Druid's `DruidTable.isJoinable`/`isBroadcast`).
    joinable_broadcast: bool,
    columns: SchemaRef,
}

impl InformationSchema {
    /// The schema over the live view; `routines` are the session's functions; `with_sys` when
    /// the catalog has the `sys` schema; `lookups` are the `lookup` schema's tables.
    pub fn new(
        view: Arc<SegmentView>,
        mut routines: Vec<Routine>,
        with_sys: bool,
        lookups: Arc<LookupRegistry>,
    ) -> InformationSchema {
        routines.sort();
        routines.dedup();
        InformationSchema {
            view,
            routines,
            with_sys,
            lookups,
        }
    }

    /// Every table, datasources first, then lookups, then the metadata tables.
    fn tables(&self) -> Vec<TableInfo> {
        let mut out = Vec::new();
        let mut names = self.view.data_sources();
        names.sort();
        for ds in names {
            if let Some(snap) = self.view.snapshot(&ds) {
                out.push(TableInfo {
                    schema: DRUID_SCHEMA,
                    name: ds,
                    table_type: "TABLE",
                    joinable_broadcast: false,
                    columns: datasource_schema(&snap.all_used, &snap.hydrants),
                });
            }
        }
        for name in self.lookups.loaded_names() {
            out.push(TableInfo {
                schema: LOOKUP_SCHEMA,
                name,
                table_type: "TABLE",
                joinable_broadcast: true,
                columns: lookup_table_schema(),
            });
        }
        for t in TABLE_NAMES {
            out.push(TableInfo {
                schema: INFORMATION_SCHEMA,
                name: t.to_string(),
                table_type: "SYSTEM_TABLE",
                joinable_broadcast: false,
                columns: table_schema(t).expect("known table"),
            });
        }
        for t in SYS_TABLE_NAMES.iter().filter(|_| self.with_sys) {
            out.push(TableInfo {
                schema: SYS_SCHEMA,
                name: t.to_string(),
                table_type: "SYSTEM_TABLE",
                joinable_broadcast: false,
                columns: sys_schema(t).expect("known table"),
            });
        }
        out
    }

    fn build(&self, name: &str) -> Option<RecordBatch> {
        let schema = table_schema(name)?;
        let mut b = Columns::new(&schema);
        match name {
            "SCHEMATA" => {
                let schemas: &[&str] = if self.with_sys {
                    &[DRUID_SCHEMA, INFORMATION_SCHEMA, LOOKUP_SCHEMA, SYS_SCHEMA]
                } else {
                    &[DRUID_SCHEMA, INFORMATION_SCHEMA, LOOKUP_SCHEMA]
                };
                for s in schemas {
                    b.text(0, Some(CATALOG));
                    b.text(1, Some(s));
                    for i in 2..7 {
                        b.text(i, None);
                    }
                }
            }
            "TABLES" => {
                for t in self.tables() {
                    let flag = if t.joinable_broadcast { "YES" } else { "NO" };
                    for (i, v) in [CATALOG, t.schema, &t.name, t.table_type, flag, flag]
                        .into_iter()
                        .enumerate()
                    {
                        b.text(i, Some(v));
                    }
                }
            }
            "COLUMNS" => self.columns(&mut b),
            "ROUTINES" => {
                for r in &self.routines {
                    b.text(0, Some(CATALOG));
                    b.text(1, Some(INFORMATION_SCHEMA));
                    b.text(2, Some(&r.name));
                    b.text(3, Some("FUNCTION"));
                    b.text(4, Some(if r.aggregator { "YES" } else { "NO" }));
                    b.text(5, None);
                }
            }
            _ => return None,
        }
        RecordBatch::try_new(schema, b.finish()).ok()
    }

    fn columns(&self, b: &mut Columns) {
        for t in self.tables() {
            let (schema, table) = (t.schema, t.name);
            for (i, f) in t.columns.fields().iter().enumerate() {
                let info = ColumnInfo::from_field(f);
                let sql = info.sql_type.as_str();
                let t = sql_type_facts(sql);
                let varchar = sql == "VARCHAR";
                b.text(0, Some(CATALOG));
                b.text(1, Some(schema));
                b.text(2, Some(&table));
                b.text(3, Some(f.name()));
                b.long(4, Some(i as i64 + 1));
                b.text(5, Some(""));
                b.text(6, Some(if f.is_nullable() { "YES" } else { "NO" }));
                // Druid's `InformationSchema`: a complex type's DATA_TYPE is its type string
                // (`COMPLEX<json>`), not `OTHER`.
                let data_type = if sql == "OTHER" && info.native_type.starts_with("COMPLEX<") {
                    info.native_type.as_str()
                } else {
                    sql
                };
                b.text(7, Some(data_type));
                // CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH: not reported.
                b.long(8, None);
                b.long(9, None);
                b.long(10, t.precision);
                b.long(11, t.precision.map(|_| 10));
                b.long(12, t.scale);
                b.long(13, t.datetime_precision);
                b.text(14, varchar.then_some("UTF-16LE"));
                b.text(15, varchar.then_some("UTF-16LE$en_US$primary"));
                b.long(16, Some(t.jdbc));
            }
        }
    }
}

/// What `COLUMNS` reports for a SQL type.
struct SqlTypeFacts {
    precision: Option<i64>,
    scale: Option<i64>,
    datetime_precision: Option<i64>,
    jdbc: i64,
}

/// Calcite's precision and scale and the `java.sql.Types` code of a SQL type name.
fn sql_type_facts(sql: &str) -> SqlTypeFacts {
    let (precision, scale, datetime_precision, jdbc) = match sql {
        "BIGINT" => (Some(19), Some(0), None, -5),
        "INTEGER" => (Some(10), Some(0), None, 4),
        "SMALLINT" => (Some(5), Some(0), None, 5),
        "TINYINT" => (Some(3), Some(0), None, -6),
        "DOUBLE" => (Some(15), None, None, 8),
        "FLOAT" => (Some(7), None, None, 6),
        "DECIMAL" => (Some(19), Some(0), None, 3),
        "BOOLEAN" => (None, None, None, 16),
        "TIMESTAMP" => (None, None, Some(3), 93),
        "DATE" => (None, None, Some(0), 91),
        "VARCHAR" => (None, None, None, 12),
        "ARRAY" => (None, None, None, 2003),
        _ => (None, None, None, 1111),
    };
    SqlTypeFacts {
        precision,
        scale,
        datetime_precision,
        jdbc,
    }
}

/// The columns of an `INFORMATION_SCHEMA` table, in Druid's order.
fn table_schema(name: &str) -> Option<SchemaRef> {
    let text = |n: &str| Field::new(n, DataType::Utf8, true);
    let long = |n: &str| Field::new(n, DataType::Int64, true);
    let fields = match name {
        "SCHEMATA" => [
            "CATALOG_NAME",
            "SCHEMA_NAME",
            "SCHEMA_OWNER",
            "DEFAULT_CHARACTER_SET_CATALOG",
            "DEFAULT_CHARACTER_SET_SCHEMA",
            "DEFAULT_CHARACTER_SET_NAME",
            "SQL_PATH",
        ]
        .map(text)
        .to_vec(),
        "TABLES" => [
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_TYPE",
            "IS_JOINABLE",
            "IS_BROADCAST",
        ]
        .map(text)
        .to_vec(),
        "COLUMNS" => vec![
            text("TABLE_CATALOG"),
            text("TABLE_SCHEMA"),
            text("TABLE_NAME"),
            text("COLUMN_NAME"),
            long("ORDINAL_POSITION"),
            text("COLUMN_DEFAULT"),
            text("IS_NULLABLE"),
            text("DATA_TYPE"),
            long("CHARACTER_MAXIMUM_LENGTH"),
            long("CHARACTER_OCTET_LENGTH"),
            long("NUMERIC_PRECISION"),
            long("NUMERIC_PRECISION_RADIX"),
            long("NUMERIC_SCALE"),
            long("DATETIME_PRECISION"),
            text("CHARACTER_SET_NAME"),
            text("COLLATION_NAME"),
            long("JDBC_TYPE"),
        ],
        "ROUTINES" => [
            "ROUTINE_CATALOG",
            "ROUTINE_SCHEMA",
            "ROUTINE_NAME",
            "ROUTINE_TYPE",
            "IS_AGGREGATOR",
            "SIGNATURES",
        ]
        .map(text)
        .to_vec(),
        _ => return None,
    };
    Some(Arc::new(Schema::new(fields)))
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        TABLE_NAMES.iter().map(|t| (*t).to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(batch) = self.build(name) else {
            return Ok(None);
        };
        // `TABLES` and `COLUMNS` rows of a datasource show only to users who may read it
        // (Druid's `InformationSchema` filters the `druid` schema's tables the same way).
        let owners = match name {
            "TABLES" | "COLUMNS" => Some(druid_table_owners(&batch)),
            _ => None,
        };
        Ok(Some(Arc::new(AccessFilteredTable { batch, owners })))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLE_NAMES.contains(&name)
    }
}

/// What `sys.servers` and `sys.server_properties` report about this process.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Advertised host.
    pub host: String,
    /// HTTP port.
    pub port: u16,
    /// Process start, epoch ms.
    pub start_time_ms: i64,
    /// Dolmen's version.
    pub version: String,
    /// Effective configuration properties (`service.*`), name and value.
    pub properties: Vec<(String, String)>,
    /// The tier this process serves as a historical (`service.server.tier`).
    pub tier: String,
    /// Where `sys.supervisors` reads the running supervisors (set once they are started).
    pub supervisors: SupervisorSource,
}

/// One row of `sys.supervisors` (Druid's `SystemSchema.SupervisorsTable` columns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorRow {
    /// The supervisor id.
    pub supervisor_id: String,
    /// Its datasource.
    pub data_source: String,
    /// `state` (`RUNNING`, `SUSPENDED`, `UNHEALTHY_SUPERVISOR`, ...).
    pub state: String,
    /// `detailed_state`.
    pub detailed_state: String,
    /// Whether it is healthy (1/0 in the table).
    pub healthy: bool,
    /// The spec's `type` (`logstream`, `shardstream`, or a Druid alias as posted).
    pub supervisor_type: String,
    /// The topic or stream it reads.
    pub source: String,
    /// Whether it is suspended (1/0 in the table).
    pub suspended: bool,
    /// The spec as read back, JSON text.
    pub spec: String,
}

/// What lists the running supervisors for `sys.supervisors` (the overlord's supervisor
/// manager, adapted by the binary).
pub trait SupervisorRows: std::fmt::Debug + Send + Sync {
    /// One row per active supervisor, in id order.
    fn supervisor_rows(&self) -> Vec<SupervisorRow>;
}

/// The late-bound [`SupervisorRows`] of a process: the query engine starts before the
/// supervisors do. Until [`SupervisorSource::set`] is called `sys.supervisors` is empty.
#[derive(Debug, Clone, Default)]
pub struct SupervisorSource(Arc<std::sync::OnceLock<Arc<dyn SupervisorRows>>>);

impl SupervisorSource {
    /// Binds the source (a second call is ignored).
    pub fn set(&self, rows: Arc<dyn SupervisorRows>) {
        let _ = self.0.set(rows);
    }

    fn rows(&self) -> Vec<SupervisorRow> {
        self.0
            .get()
            .map(|r| r.supervisor_rows())
            .unwrap_or_default()
    }
}

impl NodeInfo {
    fn server(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The `sys` schema.
#[derive(Debug)]
pub struct SysSchema {
    view: Arc<SegmentView>,
    metadata: Arc<dyn MetadataStore>,
    node: NodeInfo,
}

/// The roles one Dolmen process plays, as `sys.servers` names them.
const ROLES: [&str; 6] = [
    "coordinator",
    "overlord",
    "broker",
    "router",
    "historical",
    "indexer",
];

impl SysSchema {
    /// The schema over the live view and the metadata store.
    pub fn new(view: Arc<SegmentView>, metadata: Arc<dyn MetadataStore>, node: NodeInfo) -> Self {
        SysSchema {
            view,
            metadata,
            node,
        }
    }

    /// Every used segment with whether it is overshadowed, by datasource then id.
    async fn used_segments(&self) -> Result<Vec<(DataSegment, bool)>> {
        let mut segs = self
            .metadata
            .all_used_segments()
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        segs.sort_by(|a, b| {
            (
                &a.data_source,
                a.interval.start,
                &a.version,
                a.shard_spec.partition_num(),
            )
                .cmp(&(
                    &b.data_source,
                    b.interval.start,
                    &b.version,
                    b.shard_spec.partition_num(),
                ))
        });
        Ok(segs
            .into_iter()
            .map(|s| {
                let overshadowed = self
                    .view
                    .timeline(&s.data_source)
                    .is_some_and(|t| t.is_overshadowed(&s.id()));
                (s, overshadowed)
            })
            .collect())
    }

    /// The rows of table `name`, with the datasource each row belongs to when the table's rows
    /// are filtered per datasource ([`AccessFilteredTable`]): `segments`, `server_segments`,
    /// `tasks` and `supervisors`, as Druid's `SystemSchema` filters them.
    async fn build(
        &self,
        name: &str,
    ) -> Result<Option<(RecordBatch, Option<Vec<Option<String>>>)>> {
        let Some(schema) = sys_schema(name) else {
            return Ok(None);
        };
        let mut b = Columns::new(&schema);
        let mut owners: Option<Vec<Option<String>>> = None;
        match name {
            "segments" => {
                let decisions = self.view.load_decisions();
                for (s, overshadowed) in self.used_segments().await? {
                    let id = s.id().to_string();
                    let active = !overshadowed;
                    let available = active && self.view.is_loaded(&s.identifier);
                    let replication = decisions
                        .segments
                        .get(&s.identifier)
                        .map_or(-1, |l| i64::from(l.replication_factor()));
                    b.text(0, Some(&id));
                    b.text(1, Some(&s.data_source));
                    b.text(2, Some(&format_iso_millis(s.interval.start)));
                    b.text(3, Some(&format_iso_millis(s.interval.end)));
                    b.long(4, i64::try_from(s.size).ok());
                    b.text(5, Some(&s.version));
                    b.long(6, Some(i64::from(s.shard_spec.partition_num())));
                    b.long(7, Some(i64::from(available))); // num_replicas: this process
                    b.long(8, i64::try_from(s.num_rows).ok());
                    b.long(9, Some(i64::from(active))); // is_active: published and not overshadowed
                    b.long(10, Some(1)); // is_published
                    b.long(11, Some(i64::from(available)));
                    b.long(12, Some(0)); // is_realtime
                    b.long(13, Some(i64::from(overshadowed)));
                    b.text(14, serde_json::to_string(&s.shard_spec).ok().as_deref());
                    b.text(15, Some(&name_list_json(&s.dimensions)));
                    b.text(16, Some(&name_list_json(&s.metrics)));
                    b.text(
                        17,
                        s.last_compaction_state
                            .as_ref()
                            .map(ToString::to_string)
                            .as_deref(),
                    );
                    b.long(18, Some(replication));
                }
            }
            "server_segments" => {
                let server = self.node.server();
                for (s, overshadowed) in self.used_segments().await? {
                    if !overshadowed && self.view.is_loaded(&s.identifier) {
                        b.text(0, Some(&server));
                        b.text(1, Some(&s.id().to_string()));
                        owners
                            .get_or_insert_with(Vec::new)
                            .push(Some(s.data_source.clone()));
                    }
                }
            }
            "servers" => {
                let served: i64 = self
                    .used_segments()
                    .await?
                    .iter()
                    .filter(|(s, o)| !o && self.view.is_loaded(&s.identifier))
                    .map(|(s, _)| i64::try_from(s.size).unwrap_or(i64::MAX))
                    .sum();
                let processors = std::thread::available_parallelism().map_or(1, |n| n.get());
                for role in ROLES {
                    let historical = role == "historical";
                    b.text(0, Some(&self.node.server()));
                    b.text(1, Some(&self.node.host));
                    b.long(2, Some(i64::from(self.node.port)));
                    b.long(3, Some(-1)); // tls_port
                    b.text(4, Some(role));
                    b.text(5, historical.then_some(self.node.tier.as_str()));
                    b.long(6, Some(if historical { served } else { 0 }));
                    b.long(7, Some(0)); // max_size: the segment cache has no fixed bound
                    b.long(8, matches!(role, "coordinator" | "overlord").then_some(1));
                    b.text(9, Some(&format_iso_millis(self.node.start_time_ms)));
                    b.text(10, Some(&self.node.version));
                    b.text(11, None); // build_revision
                    b.text(12, None); // labels
                    b.long(13, i64::try_from(processors).ok());
                    b.long(14, None); // total_memory
                }
            }
            "tasks" => {
                let tasks = self
                    .metadata
                    .list_tasks(&TaskFilter::default())
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                for t in tasks {
                    let loc = &t.location;
                    let host = loc.host.as_deref();
                    b.text(0, Some(&t.id));
                    b.text(1, Some(&t.group_id));
                    b.text(2, Some(&t.task_type));
                    b.text(3, Some(&t.data_source));
                    b.text(4, Some(&format_iso_millis(t.created_ms)));
                    b.text(5, Some(&format_iso_millis(t.queue_insertion_ms)));
                    b.text(6, Some(t.status.as_str()));
                    b.text(7, Some(t.runner_status.as_str()));
                    b.long(8, Some(t.duration_ms));
                    b.text(9, host.map(|h| format!("{h}:{}", loc.port)).as_deref());
                    b.text(10, host);
                    b.long(11, Some(i64::from(loc.port)));
                    b.long(12, Some(i64::from(loc.tls_port)));
                    b.text(13, t.error_msg.as_deref());
                }
            }
            "supervisors" => {
                for r in self.node.supervisors.rows() {
                    b.text(0, Some(&r.supervisor_id));
                    b.text(1, Some(&r.data_source));
                    b.text(2, Some(&r.state));
                    b.text(3, Some(&r.detailed_state));
                    b.long(4, Some(i64::from(r.healthy)));
                    b.text(5, Some(&r.supervisor_type));
                    b.text(6, Some(&r.source));
                    b.long(7, Some(i64::from(r.suspended)));
                    b.text(8, Some(&r.spec));
                }
            }
            "server_properties" => {
                let roles = ROLES.join(",");
                for (k, v) in &self.node.properties {
                    b.text(0, Some(&self.node.server()));
                    b.text(1, Some("dolmen"));
                    b.text(2, Some(&roles));
                    b.text(3, Some(k));
                    b.text(4, Some(v));
                    b.text(5, None);
                }
            }
            _ => return Ok(None),
        }
        let batch = RecordBatch::try_new(schema, b.finish())?;
        let owners = match name {
            "segments" | "tasks" | "supervisors" => Some(column_owners(&batch, "datasource")),
            "server_segments" => Some(owners.unwrap_or_default()),
            _ => None,
        };
        Ok(Some((batch, owners)))
    }
}

/// Which datasources the user of a query may read: decides which rows of `sys.segments`,
/// `sys.server_segments`, `sys.tasks`, `sys.supervisors` and of `INFORMATION_SCHEMA.TABLES` /
/// `COLUMNS` (the `druid` schema's tables) the query sees, as Druid's `SystemSchema` and
/// `InformationSchema` filter them with `AuthorizationUtils.filterAuthorizedResources`.
/// Implemented by the server over the request's identity (security on); no access set means
/// every row.
pub trait DatasourceReadAccess: std::fmt::Debug + Send + Sync {
    /// Whether the user holds `DATASOURCE` READ on `data_source`.
    fn can_read(&self, data_source: &str) -> bool;
}

/// The session extension carrying a query's [`DatasourceReadAccess`] (set by
/// `QueryEngine` from `PreparedQuery::system_table_access`).
#[derive(Debug, Clone)]
pub struct SystemTableAccess(pub Arc<dyn DatasourceReadAccess>);

/// A metadata table's rows, built when the query named the table, of which a scan returns the
/// ones the session's [`SystemTableAccess`] may see: a row whose owner is `Some(datasource)`
/// needs READ on it; `None` rows, and every row of a table without owners, always show.
#[derive(Debug)]
struct AccessFilteredTable {
    batch: RecordBatch,
    /// One entry per row of `batch`, or `None` for a table that is not filtered.
    owners: Option<Vec<Option<String>>>,
}

#[async_trait]
impl TableProvider for AccessFilteredTable {
    fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        datafusion::datasource::TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::prelude::Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        let access = state.config().get_extension::<SystemTableAccess>();
        let batch = match (&self.owners, access) {
            (Some(owners), Some(access)) => {
                let keep: arrow::array::BooleanArray = owners
                    .iter()
                    .map(|o| Some(o.as_deref().is_none_or(|ds| access.0.can_read(ds))))
                    .collect();
                arrow::compute::filter_record_batch(&self.batch, &keep)?
            }
            _ => self.batch.clone(),
        };
        MemTable::try_new(batch.schema(), vec![vec![batch]])?
            .scan(state, projection, filters, limit)
            .await
    }
}

/// Owners of rows that name their datasource in string column `column`.
fn column_owners(batch: &RecordBatch, column: &str) -> Vec<Option<String>> {
    let Some(col) = batch
        .column_by_name(column)
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::StringArray>())
    else {
        return vec![None; batch.num_rows()];
    };
    col.iter().map(|v| v.map(str::to_string)).collect()
}

/// Owners of `INFORMATION_SCHEMA.TABLES` / `COLUMNS` rows: the table name of rows in the
/// `druid` schema; other schemas' rows (lookups, metadata tables) always show.
fn druid_table_owners(batch: &RecordBatch) -> Vec<Option<String>> {
    let schemas = column_owners(batch, "TABLE_SCHEMA");
    let names = column_owners(batch, "TABLE_NAME");
    schemas
        .into_iter()
        .zip(names)
        .map(|(schema, name)| name.filter(|_| schema.as_deref() == Some(DRUID_SCHEMA)))
        .collect()
}

/// Druid's comma-separated name list (`DataSegment.dimensions`) as a JSON array string.
fn name_list_json(names: &str) -> String {
    let list: Vec<&str> = names.split(',').filter(|n| !n.is_empty()).collect();
    serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
}

/// Column builders for a schema of `Utf8` and `Int64` fields (every metadata table's).
enum ColumnBuilder {
    Text(StringBuilder),
    Long(Int64Builder),
}

struct Columns(Vec<ColumnBuilder>);

impl Columns {
    fn new(schema: &Schema) -> Columns {
        Columns(
            schema
                .fields()
                .iter()
                .map(|f| match f.data_type() {
                    DataType::Int64 => ColumnBuilder::Long(Int64Builder::new()),
                    _ => ColumnBuilder::Text(StringBuilder::new()),
                })
                .collect(),
        )
    }

    fn text(&mut self, i: usize, v: Option<&str>) {
        if let ColumnBuilder::Text(b) = &mut self.0[i] {
            b.append_option(v);
        }
    }

    fn long(&mut self, i: usize, v: Option<i64>) {
        if let ColumnBuilder::Long(b) = &mut self.0[i] {
            b.append_option(v);
        }
    }

    fn finish(self) -> Vec<ArrayRef> {
        self.0
            .into_iter()
            .map(|b| match b {
                ColumnBuilder::Text(mut b) => Arc::new(b.finish()) as ArrayRef,
                ColumnBuilder::Long(mut b) => Arc::new(b.finish()) as ArrayRef,
            })
            .collect()
    }
}

/// The columns of a `sys` table, in Druid's order (`docs/querying/sql-metadata-tables.md`).
fn sys_schema(name: &str) -> Option<SchemaRef> {
    let cols: &[(&str, bool)] = match name {
        "segments" => &[
            ("segment_id", false),
            ("datasource", false),
            ("start", false),
            ("end", false),
            ("size", true),
            ("version", false),
            ("partition_num", true),
            ("num_replicas", true),
            ("num_rows", true),
            ("is_active", true),
            ("is_published", true),
            ("is_available", true),
            ("is_realtime", true),
            ("is_overshadowed", true),
            ("shard_spec", false),
            ("dimensions", false),
            ("metrics", false),
            ("last_compaction_state", false),
            ("replication_factor", true),
        ],
        "server_segments" => &[("server", false), ("segment_id", false)],
        "servers" => &[
            ("server", false),
            ("host", false),
            ("plaintext_port", true),
            ("tls_port", true),
            ("server_type", false),
            ("tier", false),
            ("current_size", true),
            ("max_size", true),
            ("is_leader", true),
            ("start_time", false),
            ("version", false),
            ("build_revision", false),
            ("labels", false),
            ("available_processors", true),
            ("total_memory", true),
        ],
        "tasks" => &[
            ("task_id", false),
            ("group_id", false),
            ("type", false),
            ("datasource", false),
            ("created_time", false),
            ("queue_insertion_time", false),
            ("status", false),
            ("runner_status", false),
            ("duration", true),
            ("location", false),
            ("host", false),
            ("plaintext_port", true),
            ("tls_port", true),
            ("error_msg", false),
        ],
        "supervisors" => &[
            ("supervisor_id", false),
            ("datasource", false),
            ("state", false),
            ("detailed_state", false),
            ("healthy", true),
            ("type", false),
            ("source", false),
            ("suspended", true),
            ("spec", false),
        ],
        "server_properties" => &[
            ("server", false),
            ("service_name", false),
            ("node_roles", false),
            ("property", false),
            ("value", false),
            ("error_message", false),
        ],
        _ => return None,
    };
    Some(Arc::new(Schema::new(
        cols.iter()
            .map(|(n, long)| {
                Field::new(
                    *n,
                    if *long {
                        DataType::Int64
                    } else {
                        DataType::Utf8
                    },
                    true,
                )
            })
            .collect::<Vec<_>>(),
    )))
}

#[async_trait]
impl SchemaProvider for SysSchema {
    fn table_names(&self) -> Vec<String> {
        SYS_TABLE_NAMES.iter().map(|t| (*t).to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some((batch, owners)) = self.build(name).await? else {
            return Ok(None);
        };
        Ok(Some(Arc::new(AccessFilteredTable { batch, owners })))
    }

    fn table_exist(&self, name: &str) -> bool {
        SYS_TABLE_NAMES.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_table_builds_with_its_schema() {
        let metadata: Arc<dyn dolmen_metadata::MetadataStore> = Arc::new(
            dolmen_metadata::SqlMetadataStore::connect("sqlite::memory:")
                .await
                .unwrap(),
        );
        let view = Arc::new(SegmentView::new(metadata));
        let s = InformationSchema::new(
            view,
            vec![
                Routine {
                    name: "TIME_FLOOR".into(),
                    aggregator: false,
                },
                Routine {
                    name: "SUM".into(),
                    aggregator: true,
                },
            ],
            true,
            Arc::new(LookupRegistry::default()),
        );
        for t in TABLE_NAMES {
            let b = s.build(t).unwrap();
            assert_eq!(b.schema(), table_schema(t).unwrap());
        }
        // With no datasources, TABLES lists the 4 + 6 metadata tables; COLUMNS their columns.
        assert_eq!(s.build("TABLES").unwrap().num_rows(), 10);
        assert_eq!(
            s.build("COLUMNS").unwrap().num_rows(),
            7 + 6 + 17 + 6 + 19 + 6 + 2 + 15 + 9 + 14
        );
        assert_eq!(s.build("ROUTINES").unwrap().num_rows(), 2);
        assert_eq!(s.build("SCHEMATA").unwrap().num_rows(), 4);
        assert!(s.build("NOPE").is_none());
    }

    #[tokio::test]
    async fn lookups_are_joinable_broadcast_tables_of_two_varchar_columns() {
        use arrow::array::{Array, AsArray};
        let metadata: Arc<dyn dolmen_metadata::MetadataStore> = Arc::new(
            dolmen_metadata::SqlMetadataStore::connect("sqlite::memory:")
                .await
                .unwrap(),
        );
        let lookups = Arc::new(LookupRegistry::from_maps([(
            "country".to_string(),
            dolmen_lookup::LookupMap::default(),
        )]));
        let s =
            InformationSchema::new(Arc::new(SegmentView::new(metadata)), vec![], false, lookups);
        let text = |b: &RecordBatch, col: usize| -> Vec<String> {
            let c = b.column(col).as_string::<i32>();
            (0..c.len()).map(|i| c.value(i).to_string()).collect()
        };
        let schemata = s.build("SCHEMATA").unwrap();
        assert_eq!(
            text(&schemata, 1),
            ["druid", "INFORMATION_SCHEMA", "lookup"]
        );
        let tables = s.build("TABLES").unwrap();
        assert_eq!(
            [0, 1, 2, 3, 4, 5].map(|c| text(&tables, c)[0].clone()),
            ["druid", "lookup", "country", "TABLE", "YES", "YES"]
        );
        assert_eq!(
            text(&tables, 4)[1],
            "NO",
            "metadata tables are not joinable"
        );
        let columns = s.build("COLUMNS").unwrap();
        assert_eq!(text(&columns, 3)[..2], ["k", "v"]);
        assert_eq!(text(&columns, 6)[..2], ["YES", "YES"]);
        assert_eq!(text(&columns, 7)[..2], ["VARCHAR", "VARCHAR"]);
    }
}
