//! The `druid` schema: one table per datasource, scanning the visible segments of a timeline
//! snapshot plus the hydrants of running streaming tasks (realtime data, queryable before
//! handoff).
//!
//! Planning a scan: take the datasource's timeline snapshot, derive the `__time` intervals the
//! query's filters allow (`__time >= / > / < / <= / = literal`, `BETWEEN`, conjunctions, and
//! `TIME_IN_INTERVAL`, which simplifies to such ranges), look up only the visible entries
//! overlapping them, make sure their files are in the segment cache, and read them with
//! DataFusion's Parquet scan (row groups and pages pruned by statistics through the pushed
//! predicate). Entries visible over only part of their time chunk (a higher version covers the
//! rest) are read with a filter restricting `__time` to the visible part.
//!
//! A scan lists its files in time order (timeline entries by interval, then the hydrants) and
//! gives each partition a contiguous run of them, so that reading the partitions in turn reads
//! the segments in time order, as Druid's scan does ([`crate::scan_order`]).
//!
//! Equality filters on string dimensions (`dim = 'value'`, `dim IN (..)`, in a conjunction)
//! and array filters on multi-value and array columns (`ARRAY_CONTAINS`, `ARRAY_OVERLAP`,
//! `MV_CONTAINS`, `MV_OVERLAP`, and `mv = 'value'`: [`crate::index::IndexPredicate`]) go through
//! the value indexes of [`crate::index`]: a segment without the value is not read, and one with
//! it is read through a row selection of the matching rows only. `dim = 'value'` is pushed down
//! `Exact`: where every equality's column has a sorted index in a file, that file's selection
//! is the answer and the column is not read to be compared again; other files (hash indexes,
//! no index, hydrants) apply the equality inside the scan.
//!
//! Multi-value string dimensions (`SegmentColumn::multi_value`) are `List<Utf8>` columns whose
//! field carries [`dolmen_segment::MULTI_VALUE_METADATA_KEY`], so result writers report them as
//! Druid's `STRING`. A column that is multi-value in any visible segment is a list in the table
//! schema; segments that stored it as a plain string are read through Arrow's cast (each value
//! becomes a one-element list). Multi-value SQL semantics (implicit unnest in `GROUP BY`,
//! filters matching any value) are applied by [`crate::multivalue`].
//!
//! Realtime data (Druid's `SinkQuerySegmentWalker`): a table is built from a
//! [`DataSourceSnapshot`], which pairs the timeline with the visible [`Hydrant`]s of running
//! streaming tasks, taken under one lock so a handoff is seen whole or not at all. Hydrants are
//! local segment files; their rows are added to the segments' (never overshadowed), their
//! columns are merged into the table schema (a datasource may have only hydrants so far), and
//! a hydrant whose interval misses the query's `__time` ranges is not opened. Their exact row
//! counts are the scan's statistics, like the segments'.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{DFSchema, ScalarValue, Statistics};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, DefaultParquetFileReaderFactory, ParquetFileReaderFactory,
    ParquetRowSelection,
};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{
    BinaryExpr, Expr, Operator, TableProviderFilterPushDown, TableType,
};
use datafusion::physical_expr::expressions::{
    BinaryExpr as PhysBinary, Column as PhysColumn, Literal as PhysLiteral,
};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::filter::FilterExecBuilder;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use dolmen_common::Interval;
use dolmen_common::time::{MAX_INSTANT, MIN_INSTANT};
use dolmen_segment::{SegmentColumn, TIME_COLUMN, Timeline, TimelineEntry};
use dolmen_storage::SegmentLocation;
use dolmen_storage::{DataSourceSnapshot, Hydrant, SegmentCache, SegmentView};
use parquet::arrow::arrow_reader::RowSelection;

use crate::index::{IndexPredicate, ValueIndexes, split_conjunction};

/// Session extension: read used segments that are not in the segment cache straight from deep
/// storage instead of loading them into the cache first (issue "query from deep storage";
/// Druid's statements read segments that exist only in deep storage). On by default for async
/// statements; a synchronous query asks for it with the context key
/// [`READ_FROM_DEEP_STORAGE_KEY`]. Deep storage is local today, so this reads the file in place.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFromDeepStorage(pub bool);

/// Context key of [`ReadFromDeepStorage`] (boolean).
pub const READ_FROM_DEEP_STORAGE_KEY: &str = "readFromDeepStorage";

/// The `druid` catalog: schema `druid` with one table per datasource, the `lookup` schema
/// ([`crate::lookup_schema`]), and the metadata schemas `INFORMATION_SCHEMA` and `sys`
/// ([`crate::system`]).
#[derive(Debug)]
pub struct DruidCatalog {
    schema: Arc<DruidSchema>,
    lookup: Arc<crate::lookup_schema::LookupSchema>,
    information_schema: Arc<crate::system::InformationSchema>,
    sys: Option<Arc<crate::system::SysSchema>>,
}

impl DruidCatalog {
    /// A catalog over the live segment view, its tables narrowing scans with `indexes`
    /// ([`crate::index`]); `routines` are the functions `ROUTINES` lists;
    /// `sys` is the `sys` schema (absent in engines without a metadata store); `lookups` are
    /// the tables of the `lookup` schema.
    pub fn new(
        view: Arc<SegmentView>,
        cache: Arc<SegmentCache>,
        indexes: Arc<ValueIndexes>,
        routines: Vec<crate::system::Routine>,
        sys: Option<crate::system::SysSchema>,
        lookups: Arc<dolmen_lookup::LookupRegistry>,
    ) -> DruidCatalog {
        DruidCatalog {
            information_schema: Arc::new(crate::system::InformationSchema::new(
                Arc::clone(&view),
                routines,
                sys.is_some(),
                Arc::clone(&lookups),
            )),
            lookup: Arc::new(crate::lookup_schema::LookupSchema::new(lookups)),
            schema: Arc::new(DruidSchema {
                view,
                cache,
                indexes,
            }),
            sys: sys.map(Arc::new),
        }
    }
}

impl CatalogProvider for DruidCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names = vec![
            crate::system::DRUID_SCHEMA.to_string(),
            crate::system::INFORMATION_SCHEMA.to_string(),
            crate::lookup_schema::LOOKUP_SCHEMA.to_string(),
        ];
        if self.sys.is_some() {
            names.push(crate::system::SYS_SCHEMA.to_string());
        }
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        match name {
            crate::system::DRUID_SCHEMA => {
                Some(Arc::clone(&self.schema) as Arc<dyn SchemaProvider>)
            }
            crate::system::INFORMATION_SCHEMA => {
                Some(Arc::clone(&self.information_schema) as Arc<dyn SchemaProvider>)
            }
            crate::lookup_schema::LOOKUP_SCHEMA => {
                Some(Arc::clone(&self.lookup) as Arc<dyn SchemaProvider>)
            }
            crate::system::SYS_SCHEMA => self
                .sys
                .as_ref()
                .map(|s| Arc::clone(s) as Arc<dyn SchemaProvider>),
            _ => None,
        }
    }
}

/// The `druid` schema.
#[derive(Debug)]
pub struct DruidSchema {
    view: Arc<SegmentView>,
    cache: Arc<SegmentCache>,
    /// Value indexes of loaded segments, shared by every query ([`crate::index`]).
    indexes: Arc<ValueIndexes>,
}

#[async_trait]
impl SchemaProvider for DruidSchema {
    fn table_names(&self) -> Vec<String> {
        self.view.data_sources()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.view.snapshot(name).map(|snapshot| {
            Arc::new(
                DatasourceTable::from_snapshot(name.to_string(), snapshot, Arc::clone(&self.cache))
                    .with_value_indexes(Arc::clone(&self.indexes)),
            ) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.view.snapshot(name).is_some()
    }
}

/// A datasource as a table, bound to one timeline snapshot and the hydrants of running
/// streaming tasks visible with it ([`DataSourceSnapshot`]).
///
/// Its schema may end with hidden shredded sub-columns of JSON columns
/// ([`DatasourceTable::with_nested_column`]), which only [`crate::nested`]'s plan rewrite adds.
#[derive(Debug, Clone)]
pub struct DatasourceTable {
    name: String,
    timeline: Arc<Timeline>,
    /// Every visible used segment, unloaded ones included: what a query from deep storage
    /// ([`ReadFromDeepStorage`]) reads.
    all_used: Arc<Timeline>,
    /// Realtime data: rows in addition to the timeline's, never overshadowed by it.
    hydrants: Arc<[Arc<Hydrant>]>,
    cache: Arc<SegmentCache>,
    schema: SchemaRef,
    indexes: Option<Arc<ValueIndexes>>,
}

impl DatasourceTable {
    /// A table over `timeline` (published segments only); its schema is `__time` followed by
    /// the columns of the visible segments, newest time chunk first (a column keeps the type it
    /// has in the newest segment).
    pub fn new(name: String, timeline: Arc<Timeline>, cache: Arc<SegmentCache>) -> DatasourceTable {
        DatasourceTable::from_snapshot(
            name,
            DataSourceSnapshot {
                all_used: Arc::clone(&timeline),
                timeline,
                hydrants: Arc::from(Vec::new()),
            },
            cache,
        )
    }

    /// A table over a snapshot of the live view: the visible segments of its timeline plus its
    /// hydrants (Druid's `SinkQuerySegmentWalker` adds a running task's hydrants to what
    /// historicals serve). The schema is [`datasource_schema`] of both.
    pub fn from_snapshot(
        name: String,
        snapshot: DataSourceSnapshot,
        cache: Arc<SegmentCache>,
    ) -> DatasourceTable {
        let schema = datasource_schema(&snapshot.all_used, &snapshot.hydrants);
        DatasourceTable {
            name,
            timeline: snapshot.timeline,
            all_used: snapshot.all_used,
            hydrants: snapshot.hydrants,
            cache,
            schema,
            indexes: None,
        }
    }

    /// Uses `indexes` to narrow scans with equality filters on string dimensions
    /// ([`crate::index`]).
    pub fn with_value_indexes(mut self, indexes: Arc<ValueIndexes>) -> DatasourceTable {
        self.indexes = Some(indexes);
        self
    }

    /// The datasource name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shredded sub-column of JSON column `column` at `path` (object keys) if every
    /// segment and hydrant holding `column` stores it ([`dolmen_segment::nested`]), with the
    /// type they agree on: `Int64` and `Utf8` files read as `Utf8` (Arrow's cast writes an
    /// integer's digits, its `JSON_VALUE` text), `Int64` and `Float64` as `Float64` (then only
    /// numeric reads may use it). A file whose column lists all its paths
    /// (`nested_complete`) and not this one has no value there: its rows read as nulls, as
    /// `JSON_VALUE` gives. `None` when one of them stores the column as another type or left
    /// the path to the text (written before shredding, with it off, past the path cap, doubles
    /// mixed with text), or no file holds the path.
    pub fn nested_sub_column(&self, column: &str, path: &[String]) -> Option<NestedSubColumn> {
        let segments = self
            .all_used
            .entries()
            .iter()
            .flat_map(|e| e.segments.iter().map(|s| &s.columns));
        let hydrants = self.hydrants.iter().map(|h| &h.columns);
        let mut found: Option<(dolmen_segment::ColumnType, bool)> = None;
        for columns in segments.chain(hydrants) {
            let Some(c) = columns.iter().find(|c| c.name == column) else {
                continue;
            };
            if c.ty != dolmen_segment::ColumnType::Json {
                return None;
            }
            let Some(p) = c.nested.iter().find(|p| p.path == path) else {
                if c.nested_complete {
                    continue;
                }
                return None;
            };
            found = Some(match found {
                None => (p.ty, p.integers),
                Some(prev) => unify_nested_types(prev, (p.ty, p.integers))?,
            });
        }
        let (ty, integers) = found?;
        Some(NestedSubColumn {
            name: dolmen_segment::nested::nested_column_name(column, path),
            data_type: ty.arrow_type(),
            integers,
        })
    }

    /// This table with `sub` appended to its schema (unless there already), and the index of
    /// `sub` in the new schema. Scans read it from the segment files like any column.
    pub fn with_nested_column(&self, sub: &NestedSubColumn) -> (DatasourceTable, usize) {
        if let Ok(i) = self.schema.index_of(&sub.name) {
            return (self.clone(), i);
        }
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(&sub.name, sub.data_type.clone(), true));
        let index = fields.len() - 1;
        let table = DatasourceTable {
            schema: Arc::new(Schema::new_with_metadata(
                fields,
                self.schema.metadata().clone(),
            )),
            ..self.clone()
        };
        (table, index)
    }
}

/// A shredded JSON sub-column readable from every file of a table
/// ([`DatasourceTable::nested_sub_column`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NestedSubColumn {
    /// Its name in the files and in the table schema.
    pub name: String,
    /// `Int64`, `Float64` or `Utf8`.
    pub data_type: DataType,
    /// For `Float64`: some values were integers, so the column does not give `JSON_VALUE`'s
    /// text, only its numeric value.
    pub integers: bool,
}

/// The type two files' sub-columns of one path read as together (see
/// [`DatasourceTable::nested_sub_column`]).
fn unify_nested_types(
    a: (dolmen_segment::ColumnType, bool),
    b: (dolmen_segment::ColumnType, bool),
) -> Option<(dolmen_segment::ColumnType, bool)> {
    use dolmen_segment::ColumnType::{Double, Long, String};
    Some(match (a.0, b.0) {
        (x, y) if x == y => (x, a.1 || b.1),
        (Long, String) | (String, Long) => (String, false),
        (Long, Double) | (Double, Long) => (Double, true),
        _ => return None,
    })
}

/// The merged schema of a timeline's visible segments and a datasource's hydrants: `__time`,
/// then the dimensions in the order the newest data lists them, then the metrics sorted by
/// name. The hydrants (realtime data) count as newer than every segment, the last registered
/// first; a column keeps the type it has in the newest data that has it.
///
/// This is Druid's row signature of a datasource (`SELECT *`, `INFORMATION_SCHEMA.COLUMNS`):
/// the broker merges the segments' signatures newest first
/// (`AbstractSegmentMetadataCache.buildDataSourceRowSignature`), each segment's being its
/// column order (`SegmentAnalyzer.analyze` keeps it), which is `__time`, the dimensions in
/// order, then the metrics as `IndexMergerV9` wrote them: `IndexMerger.mergeIndexed`, a
/// `TreeSet`, sorts them by name (Java's `String` order, UTF-16 code units).
pub fn datasource_schema(timeline: &Timeline, hydrants: &[Arc<Hydrant>]) -> SchemaRef {
    let mut fields = vec![Field::new(
        TIME_COLUMN,
        DataType::Timestamp(TimeUnit::Millisecond, None),
        false,
    )];
    let mut seen = HashSet::new();
    let mut multi: HashSet<&str> = HashSet::new();
    let mut dims: Vec<&SegmentColumn> = Vec::new();
    let mut metrics: Vec<&SegmentColumn> = Vec::new();
    let newest_first = hydrants.iter().rev().map(|h| &h.columns).chain(
        timeline
            .entries()
            .iter()
            .rev()
            .flat_map(|e| e.segments.iter().map(|s| &s.columns)),
    );
    for columns in newest_first {
        for c in columns {
            if c.is_multi_value() {
                multi.insert(c.name.as_str());
            }
            if seen.insert(c.name.as_str()) {
                match c.kind {
                    dolmen_segment::ColumnKind::Dimension => dims.push(c),
                    dolmen_segment::ColumnKind::Metric => metrics.push(c),
                }
            }
        }
    }
    metrics.sort_by(|a, b| a.name.encode_utf16().cmp(b.name.encode_utf16()));
    for c in dims.into_iter().chain(metrics) {
        if multi.contains(c.name.as_str()) && c.ty == dolmen_segment::ColumnType::String {
            let mut mv = c.clone();
            mv.multi_value = true;
            fields.push(mv.arrow_field());
        } else {
            fields.push(c.arrow_field());
        }
    }
    Arc::new(Schema::new(fields))
}

#[async_trait]
impl TableProvider for DatasourceTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // `string_column = 'literal'` is answered by the scan itself: exactly by the value
        // indexes where every file has a sorted one for the column, by a filter inside the
        // scan elsewhere ([`DatasourceTable::scan`]), so the column is not read only to be
        // compared again. Other filters are used for segment pruning and Parquet statistics;
        // DataFusion still applies them to the rows.
        Ok(filters
            .iter()
            .map(|f| {
                if exact_equality(f, &self.schema).is_some() {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let projected_schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => Arc::clone(&self.schema),
        };
        let allowed = time_ranges(filters);
        // Query from deep storage: segments not in the segment cache are read where deep
        // storage keeps them instead of being loaded first, and segments the coordinator left
        // unloaded are read too (see [`ReadFromDeepStorage`]).
        let direct = state
            .config()
            .get_extension::<ReadFromDeepStorage>()
            .is_some_and(|r| r.0);
        let timeline = if direct {
            &self.all_used
        } else {
            &self.timeline
        };
        let entries = timeline.lookup(&allowed);
        let hydrants = self.hydrants_in(&allowed);
        if entries.is_empty() && hydrants.is_empty() {
            return Ok(Arc::new(EmptyExec::new(projected_schema)));
        }
        // The equalities pushed down exactly (see `supports_filters_pushdown`): this scan
        // answers them, from sorted value indexes or with a filter of its own.
        let mut exact: Vec<Expr> = Vec::new();
        let mut exact_columns: Vec<String> = Vec::new();
        let mut rest: Vec<&Expr> = Vec::new();
        for f in filters {
            match exact_equality(f, &self.schema) {
                Some(column) => {
                    exact_columns.push(column.to_string());
                    exact.push(f.clone());
                }
                None => rest.push(f),
            }
        }
        // What the value indexes can narrow: the equalities, and `IN` and array filters.
        let predicates = IndexPredicate::from_filters(filters, &self.schema);
        // Physical predicates for Parquet row-group and page pruning: every filter for files
        // read with a filter, the others for files whose indexes answered the equalities.
        let df_schema = DFSchema::try_from(self.schema.as_ref().clone())?;
        let conjunction = |fs: &[&Expr]| -> Option<Arc<dyn PhysicalExpr>> {
            let f = fs.iter().map(|f| (*f).clone()).reduce(|a, b| a.and(b))?;
            state.create_physical_expr(f, &df_schema).ok()
        };
        let predicate = conjunction(&filters.iter().collect::<Vec<_>>());
        let rest_predicate = conjunction(&rest);
        // Parquet footers (and page indexes) of segment files are cached in the runtime's
        // file-metadata cache: segment files are immutable, so a hot query does not re-read them.
        let runtime = state.runtime_env();
        let reader_factory: Arc<dyn ParquetFileReaderFactory> =
            Arc::new(CachedParquetFileReaderFactory::new(
                runtime.object_store(ObjectStoreUrl::local_filesystem())?,
                runtime.cache_manager.get_file_metadata_cache(),
            ));
        let target = state.config().target_partitions().max(1);
        // Load every visible segment first, then consult the value indexes of all of them at
        // once (indexes built for the first time are built in parallel).
        let mut loaded: Vec<(usize, &dolmen_segment::DataSegment, std::path::PathBuf)> = Vec::new();
        // Segments read straight from an object store (S3 deep storage): their keys, by entry.
        let mut remote: Vec<(usize, &dolmen_segment::DataSegment, String, String)> = Vec::new();
        let mut remote_store: Option<(ObjectStoreUrl, Arc<dyn object_store::ObjectStore>)> = None;
        for (i, e) in entries.iter().enumerate() {
            for s in &e.segments {
                if direct && !self.cache.is_loaded(s) {
                    let location = self
                        .cache
                        .deep_storage()
                        .location(&s.load_spec)
                        .map_err(|err| DataFusionError::External(Box::new(err)))?;
                    match location {
                        SegmentLocation::Local(path) => loaded.push((i, s, path)),
                        SegmentLocation::Object { store, bucket, key } => {
                            if remote_store.is_none() {
                                let url = ObjectStoreUrl::parse(format!("s3://{bucket}"))?;
                                runtime.register_object_store(url.as_ref(), Arc::clone(&store));
                                remote_store = Some((url, store));
                            }
                            remote.push((i, s, key.to_string(), bucket));
                        }
                    }
                } else {
                    let path = self
                        .cache
                        .ensure_loaded(s)
                        .await
                        .map_err(|err| DataFusionError::External(Box::new(err)))?;
                    loaded.push((i, s, path));
                }
            }
        }
        // The local object store reads a relative path as rooted at `/`; a segment cache
        // under a relative data directory (`dolmen server` defaults to `./var`) needs the
        // absolute form. Value indexes are keyed by it too.
        let loaded = loaded
            .into_iter()
            .map(|(i, s, path)| {
                std::path::absolute(path)
                    .map(|p| (i, s, p))
                    .map_err(|e| DataFusionError::External(Box::new(e)))
            })
            .collect::<Result<Vec<_>>>()?;
        // The value indexes of the segments, loaded from their sidecars (built with the
        // segments); never built here.
        if let Some(indexes) = &self.indexes {
            futures::future::join_all(loaded.iter().map(|(_, _, path)| indexes.load(path))).await;
        }
        let selections: Vec<(IndexSelection, bool)> = loaded
            .iter()
            .map(|(_, _, path)| self.index_selection(path, &predicates, &exact_columns))
            .collect();
        // A file whose indexes answered every equality exactly, with no other filter left to
        // prune by, reads exactly the rows it counts.
        let selected_rows = |n: usize, covered: bool| {
            if covered && rest_predicate.is_none() {
                Precision::Exact(n)
            } else {
                Precision::Inexact(n)
            }
        };
        // Each local file's Arrow schema, with the string columns that are dictionary-encoded
        // throughout (remembered per file; [`crate::dictionary`] reads those as dictionaries
        // for aggregations).
        let file_schemas =
            match &self.indexes {
                Some(indexes) => {
                    futures::future::try_join_all(loaded.iter().map(|(_, _, path)| async move {
                        indexes.file_schema(path).await.map(Some)
                    }))
                    .await?
                }
                None => vec![None; loaded.len()],
            };
        // Files by timeline entry, each with whether its indexes answered the equalities.
        let mut per_entry: Vec<Vec<(PartitionedFile, bool)>> = vec![Vec::new(); entries.len()];
        for (((i, s, path), (selection, covered)), file_schema) in
            loaded.into_iter().zip(selections).zip(file_schemas)
        {
            // The segment's row count is exact (recorded at publish), so an unfiltered
            // COUNT(*) is answered from it without reading the file.
            let stats = Statistics {
                num_rows: Precision::Exact(usize::try_from(s.num_rows).unwrap_or(usize::MAX)),
                total_byte_size: Precision::Exact(usize::try_from(s.size).unwrap_or(usize::MAX)),
                column_statistics: Statistics::unknown_column(&self.schema),
            };
            let mut file = PartitionedFile::new(path.to_string_lossy().to_string(), s.size);
            // The reader's type hints: the file's own schema, so reading is the same as
            // without; its metadata marks the file as a segment file for crate::dictionary.
            file.arrow_schema = file_schema;
            match selection {
                IndexSelection::All => {
                    per_entry[i].push((file.with_statistics(Arc::new(stats)), covered));
                }
                // No row of the segment matches: not read at all.
                IndexSelection::NoRows => {}
                IndexSelection::Rows(selection, n) => {
                    let stats = Statistics {
                        num_rows: selected_rows(n, covered),
                        ..stats
                    };
                    per_entry[i].push((
                        file.with_statistics(Arc::new(stats))
                            .with_extension(ParquetRowSelection::new(selection)),
                        covered,
                    ));
                }
            }
        }
        // Segments read from an object store in place use their value indexes too: each
        // one's sidecar is read from deep storage (one GET) the first time.
        let remote_ids: Vec<std::path::PathBuf> = remote
            .iter()
            .map(|(_, _, key, bucket)| std::path::PathBuf::from(format!("s3://{bucket}/{key}")))
            .collect();
        if let Some(indexes) = &self.indexes {
            let deep = self.cache.deep_storage();
            futures::future::join_all(remote.iter().zip(&remote_ids).map(|((_, s, _, _), id)| {
                indexes.load_remote(id, deep.read_sidecar(&s.load_spec))
            }))
            .await;
        }
        let mut per_entry_remote: Vec<Vec<(PartitionedFile, bool)>> =
            vec![Vec::new(); entries.len()];
        for ((i, s, key, _), id) in remote.into_iter().zip(&remote_ids) {
            let stats = Statistics {
                num_rows: Precision::Exact(usize::try_from(s.num_rows).unwrap_or(usize::MAX)),
                total_byte_size: Precision::Exact(usize::try_from(s.size).unwrap_or(usize::MAX)),
                column_statistics: Statistics::unknown_column(&self.schema),
            };
            let file = PartitionedFile::new(key, s.size);
            let (selection, covered) = self.index_selection(id, &predicates, &exact_columns);
            match selection {
                IndexSelection::All => {
                    per_entry_remote[i].push((file.with_statistics(Arc::new(stats)), covered));
                }
                IndexSelection::NoRows => {}
                IndexSelection::Rows(selection, n) => {
                    let stats = Statistics {
                        num_rows: selected_rows(n, covered),
                        ..stats
                    };
                    per_entry_remote[i].push((
                        file.with_statistics(Arc::new(stats))
                            .with_extension(ParquetRowSelection::new(selection)),
                        covered,
                    ));
                }
            }
        }
        let local = (ObjectStoreUrl::local_filesystem(), reader_factory);
        let remote = remote_store.map(|(url, store)| {
            let factory: Arc<dyn ParquetFileReaderFactory> =
                Arc::new(CachedParquetFileReaderFactory::new(
                    store,
                    runtime.cache_manager.get_file_metadata_cache(),
                ));
            (url, factory)
        });
        // The scans in time order (`crate::scan_order`: a plain scan reads them, and each
        // one's partitions, one after the other): consecutive whole entries read from the same
        // store, and answered by their indexes alike, share one scan; an entry visible over
        // only part of its time chunk is a scan of its own, restricted to the visible part.
        type Run<'e> = (bool, bool, Option<&'e TimelineEntry>, Vec<PartitionedFile>);
        let mut runs: Vec<Run<'_>> = Vec::new();
        for ((e, local_files), remote_files) in entries.iter().zip(per_entry).zip(per_entry_remote)
        {
            for (is_remote, files) in [(false, local_files), (true, remote_files)] {
                for (file, covered) in files {
                    // The same run: whole entries together, a partial entry's files together.
                    let same_part = |p: &Option<&TimelineEntry>| match p {
                        None => e.is_whole(),
                        Some(p) => std::ptr::eq(*p, *e),
                    };
                    match runs.last_mut() {
                        Some((r, c, p, run))
                            if *r == is_remote && *c == covered && same_part(p) =>
                        {
                            run.push(file);
                        }
                        _ => runs.push((
                            is_remote,
                            covered,
                            (!e.is_whole()).then_some(*e),
                            vec![file],
                        )),
                    }
                }
            }
        }
        let mut plans: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        for (is_remote, covered, partial, files) in runs {
            let Some((url, factory)) = (if is_remote {
                remote.as_ref()
            } else {
                Some(&local)
            }) else {
                continue;
            };
            let scan = ScanTarget {
                url,
                reader_factory: factory,
            };
            // Files whose indexes answered the equalities need only the other filters to
            // prune by; the others apply the equalities here.
            let (pruning, apply): (_, &[Expr]) = if covered {
                (rest_predicate.clone(), &[])
            } else {
                (predicate.clone(), &exact)
            };
            let time = partial.map(|e| e.interval);
            // An entry visible over part of its chunk is one scan (its partitions in order).
            let partitions = if time.is_some() { 1 } else { target };
            plans.push(self.filtered_scan(
                state,
                projection,
                apply,
                time,
                limit,
                |columns, limit| {
                    self.parquet_scan(&scan, files, partitions, columns, pruning, limit)
                },
            )?);
        }
        if !hydrants.is_empty() {
            plans.push(self.filtered_scan(
                state,
                projection,
                &exact,
                None,
                limit,
                |columns, limit| {
                    self.hydrant_scan(state, hydrants, target, columns, predicate, limit)
                },
            )?);
        }
        if plans.is_empty() {
            return Ok(Arc::new(EmptyExec::new(projected_schema)));
        }
        UnionExec::try_new(plans)
    }
}

impl DatasourceTable {
    /// The hydrants whose rows may fall in `allowed` (the `__time` ranges of the filters).
    fn hydrants_in(&self, allowed: &[Interval]) -> Vec<&Hydrant> {
        self.hydrants
            .iter()
            .filter(|h| allowed.iter().any(|iv| iv.overlaps(&h.interval)))
            .map(AsRef::as_ref)
            .collect()
    }

    /// The scan of `hydrants`: local Parquet files read like segment files (statistics pruning
    /// through `predicate`), with their exact row counts as statistics so an unfiltered
    /// `COUNT(*)` adds them without reading the files. No value indexes: hydrants are small
    /// and short-lived. Their footers are not cached either (a restarted task may write a new
    /// hydrant under an old path).
    fn hydrant_scan(
        &self,
        state: &dyn Session,
        hydrants: Vec<&Hydrant>,
        target: usize,
        projection: Option<&Vec<usize>>,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let url = ObjectStoreUrl::local_filesystem();
        let factory: Arc<dyn ParquetFileReaderFactory> = Arc::new(
            DefaultParquetFileReaderFactory::new(state.runtime_env().object_store(&url)?),
        );
        let mut files = Vec::with_capacity(hydrants.len());
        for h in hydrants {
            let path =
                std::path::absolute(&h.path).map_err(|e| DataFusionError::External(Box::new(e)))?;
            let stats = Statistics {
                num_rows: Precision::Exact(usize::try_from(h.num_rows).unwrap_or(usize::MAX)),
                total_byte_size: Precision::Exact(usize::try_from(h.size).unwrap_or(usize::MAX)),
                column_statistics: Statistics::unknown_column(&self.schema),
            };
            files.push(
                PartitionedFile::new(path.to_string_lossy().to_string(), h.size)
                    .with_statistics(Arc::new(stats)),
            );
        }
        let at = ScanTarget {
            url: &url,
            reader_factory: &factory,
        };
        self.parquet_scan(&at, files, target, projection, predicate, limit)
    }
}

/// What the value indexes say to read of one segment file.
enum IndexSelection {
    /// The whole file (no usable equality filter, or no index).
    All,
    /// Nothing: no row holds the wanted values.
    NoRows,
    /// These rows (a selection over the whole file) and how many they are.
    Rows(RowSelection, usize),
}

impl DatasourceTable {
    /// Rows of the segment file at `path` that may match every one of `predicates` (equality
    /// and array filters, [`IndexPredicate`]), from the value indexes loaded for it (the whole
    /// file when there are none).
    ///
    /// With it, whether those rows are exactly the matches of the equalities pushed down
    /// `Exact` (on `exact_columns`): each of those columns has a sorted index in the file (a
    /// hash index only narrows), so no equality is left to check on the rows. Trivially so
    /// when there are none, or when no row can match.
    fn index_selection(
        &self,
        path: &std::path::Path,
        predicates: &[IndexPredicate],
        exact_columns: &[String],
    ) -> (IndexSelection, bool) {
        let Some(indexes) = &self.indexes else {
            return (IndexSelection::All, exact_columns.is_empty());
        };
        // Columns whose equality a sorted index of this file answered exactly.
        let mut answered: Vec<&str> = Vec::new();
        let mut rows: Option<Vec<u32>> = None;
        let mut total = 0;
        for p in predicates {
            let Some(Some(index)) = indexes.peek(path, &p.column) else {
                continue;
            };
            let Some(matching) = p.rows(&index) else {
                continue;
            };
            if !p.list && p.values.len() == 1 && !index.is_hashed() && index.elements().is_none() {
                answered.push(&p.column);
            }
            total = index.num_rows();
            rows = Some(match rows {
                None => matching,
                Some(r) => crate::index::intersect(&r, &matching),
            });
            if rows.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
        }
        let selection = match rows {
            None => IndexSelection::All,
            Some(r) if r.is_empty() => {
                indexes.note_rows_skipped(total);
                // No row can match, whatever is left to check.
                return (IndexSelection::NoRows, true);
            }
            Some(r) => {
                indexes.note_rows_skipped(total - r.len());
                IndexSelection::Rows(crate::index::row_selection(&r, total), r.len())
            }
        };
        let covered = exact_columns.iter().all(|c| answered.contains(&c.as_str()));
        (selection, covered)
    }

    /// A scan that applies `exprs` (over this table's columns) and, with `time`, keeps the rows
    /// of that interval, then projects to `projection`: `scan` is called with the columns
    /// to read (the projection and the filters' columns, in table order) and no limit. With
    /// nothing to apply, `scan` itself, called with `projection` and `limit`.
    ///
    /// # Errors
    /// Planning errors of the filter expressions or of `scan`.
    fn filtered_scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        exprs: &[Expr],
        time: Option<Interval>,
        limit: Option<usize>,
        scan: impl FnOnce(Option<&Vec<usize>>, Option<usize>) -> Result<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if exprs.is_empty() && time.is_none() {
            return scan(projection, limit);
        }
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let mut columns: std::collections::BTreeSet<usize> = wanted.iter().copied().collect();
        for e in exprs {
            for c in e.column_refs() {
                columns.insert(self.schema.index_of(&c.name)?);
            }
        }
        if time.is_some() {
            columns.insert(self.schema.index_of(TIME_COLUMN)?);
        }
        let columns: Vec<usize> = columns.into_iter().collect();
        let read = Arc::new(self.schema.project(&columns)?);
        let mut condition: Option<Arc<dyn PhysicalExpr>> =
            match exprs.iter().cloned().reduce(|a, b| a.and(b)) {
                Some(f) => Some(
                    state.create_physical_expr(f, &DFSchema::try_from(read.as_ref().clone())?)?,
                ),
                None => None,
            };
        if let Some(iv) = time {
            let within = time_restriction(&read, iv)?;
            condition = Some(match condition {
                Some(c) => Arc::new(PhysBinary::new(c, Operator::And, within)),
                None => within,
            });
        }
        let input = scan(Some(&columns), None)?;
        let Some(condition) = condition else {
            return Ok(input);
        };
        // Where each wanted column sits among the columns read.
        let positions: Vec<usize> = wanted
            .iter()
            .map(|w| columns.binary_search(w).unwrap_or_default())
            .collect();
        Ok(Arc::new(
            FilterExecBuilder::new(condition, input)
                .apply_projection(Some(positions))?
                .build()?,
        ))
    }
}

/// The column when `filter` is `column = 'literal'` on a plain (not multi-value) string
/// column of `schema` other than `__time`: the filters a segment scan answers itself
/// (`Exact` pushdown), by value indexes or by a filter of its own. A fixed point of
/// DataFusion's simplifications, so the scan recognises the filters it accepted.
fn exact_equality<'a>(filter: &'a Expr, schema: &Schema) -> Option<&'a str> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Eq,
        right,
    }) = filter
    else {
        return None;
    };
    let col = match (left.as_ref(), right.as_ref()) {
        (Expr::Column(col), Expr::Literal(ScalarValue::Utf8(Some(_)), _))
        | (Expr::Literal(ScalarValue::Utf8(Some(_)), _), Expr::Column(col)) => col,
        _ => return None,
    };
    let is_plain_string = schema
        .field_with_name(&col.name)
        .is_ok_and(|f| f.data_type() == &DataType::Utf8);
    (is_plain_string && col.name != TIME_COLUMN).then_some(col.name.as_str())
}

/// The object store segment files of one scan are read from: the local filesystem (the segment
/// cache, local deep storage) or an S3-compatible bucket (query from S3 deep storage).
struct ScanTarget<'a> {
    url: &'a ObjectStoreUrl,
    reader_factory: &'a Arc<dyn ParquetFileReaderFactory>,
}

impl DatasourceTable {
    fn parquet_scan(
        &self,
        at: &ScanTarget<'_>,
        files: Vec<PartitionedFile>,
        target: usize,
        projection: Option<&Vec<usize>>,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut source = ParquetSource::new(Arc::clone(&self.schema))
            .with_parquet_file_reader_factory(Arc::clone(at.reader_factory));
        if let Some(p) = predicate {
            source = source.with_predicate(p);
        }
        // Table statistics: the sum of the segments' exact row counts and sizes (DataFusion
        // marks them inexact itself once a predicate is pushed into the scan).
        let mut stats = Statistics::new_unknown(&self.schema);
        let mut rows = Precision::Exact(0usize);
        let mut bytes = Precision::Exact(0usize);
        for f in &files {
            match &f.statistics {
                Some(fs) => {
                    rows = rows.add(&fs.num_rows);
                    bytes = bytes.add(&fs.total_byte_size);
                }
                None => {
                    rows = Precision::Absent;
                    bytes = Precision::Absent;
                }
            }
        }
        stats.num_rows = rows;
        stats.total_byte_size = bytes;
        // Contiguous runs of the (time-ordered) files, so that reading the partitions one after
        // the other reads the files in order ([`crate::scan_order`]); the first `len % n`
        // groups take one file more.
        let n = target.min(files.len()).max(1);
        let (per, extra) = (files.len() / n, files.len() % n);
        let mut groups: Vec<Vec<PartitionedFile>> = Vec::with_capacity(n);
        let mut files = files.into_iter();
        for g in 0..n {
            groups.push(files.by_ref().take(per + usize::from(g < extra)).collect());
        }
        let config = FileScanConfigBuilder::new(at.url.clone(), Arc::new(source))
            .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
            .with_statistics(stats)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }
}

/// `__time >= start AND __time < end` as a physical expression over `schema`.
fn time_restriction(schema: &SchemaRef, iv: Interval) -> Result<Arc<dyn PhysicalExpr>> {
    let idx = schema.index_of(TIME_COLUMN)?;
    let col: Arc<dyn PhysicalExpr> = Arc::new(PhysColumn::new(TIME_COLUMN, idx));
    let lit = |v: i64| -> Arc<dyn PhysicalExpr> {
        Arc::new(PhysLiteral::new(ScalarValue::TimestampMillisecond(
            Some(v),
            None,
        )))
    };
    let ge: Arc<dyn PhysicalExpr> = Arc::new(PhysBinary::new(
        Arc::clone(&col),
        Operator::GtEq,
        lit(iv.start),
    ));
    let lt: Arc<dyn PhysicalExpr> = Arc::new(PhysBinary::new(col, Operator::Lt, lit(iv.end)));
    Ok(Arc::new(PhysBinary::new(ge, Operator::And, lt)))
}

/// The `__time` intervals the filters allow (all time when they say nothing about `__time`).
///
/// Only top-level conjuncts of the forms `__time <op> literal`, `literal <op> __time`
/// (with `__time` possibly under a cast) and `__time BETWEEN a AND b` are used; anything else
/// leaves the range unrestricted (DataFusion still evaluates every filter on the rows).
pub fn time_ranges(filters: &[Expr]) -> Vec<Interval> {
    let mut lo = MIN_INSTANT;
    let mut hi = MAX_INSTANT;
    let mut conjuncts = Vec::new();
    for f in filters {
        split_conjunction(f, &mut conjuncts);
    }
    for c in conjuncts {
        match c {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                let (op, value) = if is_time_column(left) {
                    match literal_millis(right) {
                        Some(v) => (*op, v),
                        None => continue,
                    }
                } else if is_time_column(right) {
                    match (literal_millis(left), op.swap()) {
                        (Some(v), Some(sw)) => (sw, v),
                        _ => continue,
                    }
                } else {
                    continue;
                };
                match op {
                    Operator::Gt => lo = lo.max(value.saturating_add(1)),
                    Operator::GtEq => lo = lo.max(value),
                    Operator::Lt => hi = hi.min(value),
                    Operator::LtEq => hi = hi.min(value.saturating_add(1)),
                    Operator::Eq => {
                        lo = lo.max(value);
                        hi = hi.min(value.saturating_add(1));
                    }
                    _ => {}
                }
            }
            Expr::Between(b) if !b.negated && is_time_column(&b.expr) => {
                if let (Some(a), Some(z)) = (literal_millis(&b.low), literal_millis(&b.high)) {
                    lo = lo.max(a);
                    hi = hi.min(z.saturating_add(1));
                }
            }
            _ => {}
        }
    }
    if lo >= hi {
        return Vec::new();
    }
    vec![Interval { start: lo, end: hi }]
}

fn is_time_column(e: &Expr) -> bool {
    match e {
        Expr::Column(c) => c.name == TIME_COLUMN,
        Expr::Cast(c) => is_time_column(&c.expr),
        Expr::TryCast(c) => is_time_column(&c.expr),
        _ => false,
    }
}

/// A timestamp (or integer millisecond) literal as ms; floors finer units.
fn literal_millis(e: &Expr) -> Option<i64> {
    let v = match e {
        Expr::Literal(v, _) => v,
        Expr::Cast(c) => return literal_millis(&c.expr).or_else(|| cast_string_literal(&c.expr)),
        _ => return None,
    };
    match v {
        ScalarValue::TimestampMillisecond(Some(x), _) => Some(*x),
        ScalarValue::TimestampSecond(Some(x), _) => x.checked_mul(1000),
        ScalarValue::TimestampMicrosecond(Some(x), _) => Some(x.div_euclid(1000)),
        ScalarValue::TimestampNanosecond(Some(x), _) => Some(x.div_euclid(1_000_000)),
        ScalarValue::Date32(Some(d)) => Some(i64::from(*d) * 86_400_000),
        ScalarValue::Date64(Some(d)) => Some(*d),
        _ => None,
    }
}

fn cast_string_literal(e: &Expr) -> Option<i64> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => {
            dolmen_common::time::parse_iso_instant(s).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod realtime_tests;

#[cfg(test)]
mod dictionary_tests;

#[cfg(test)]
mod plan_cache_tests;

#[cfg(test)]
mod semantics_tests;

#[cfg(test)]
mod nested_tests;

#[cfg(test)]
mod equality_tests;

#[cfg(test)]
mod array_index_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    fn ts(s: &str) -> Expr {
        lit(ScalarValue::TimestampMillisecond(
            Some(dolmen_common::time::parse_iso_instant(s).unwrap()),
            None,
        ))
    }

    #[test]
    fn extracts_time_ranges() {
        let f = col("__time")
            .gt_eq(ts("2015-09-12"))
            .and(col("__time").lt(ts("2015-09-13")));
        assert_eq!(
            time_ranges(&[f]),
            vec![Interval::parse("2015-09-12/2015-09-13").unwrap()]
        );
        let b = col("__time").between(ts("2015-09-12T02"), ts("2015-09-12T03"));
        let r = time_ranges(&[b]);
        assert_eq!(
            r[0].start,
            dolmen_common::time::parse_iso_instant("2015-09-12T02").unwrap()
        );
        assert_eq!(
            r[0].end,
            dolmen_common::time::parse_iso_instant("2015-09-12T03").unwrap() + 1
        );
        // Reversed operands and unrelated filters.
        let rev = ts("2015-09-12")
            .lt_eq(col("__time"))
            .and(col("page").eq(lit("x")));
        assert_eq!(r.len(), 1);
        assert_eq!(
            time_ranges(&[rev])[0].start,
            dolmen_common::time::parse_iso_instant("2015-09-12").unwrap()
        );
        // Contradiction: nothing to read.
        let none = col("__time")
            .lt(ts("2015-09-12"))
            .and(col("__time").gt(ts("2015-09-13")));
        assert!(time_ranges(&[none]).is_empty());
        // An OR says nothing usable: everything.
        let or = col("__time")
            .lt(ts("2015-09-12"))
            .or(col("page").eq(lit("x")));
        assert_eq!(
            time_ranges(&[or]),
            vec![Interval {
                start: MIN_INSTANT,
                end: MAX_INSTANT
            }]
        );
    }

    /// Writes one segment file with `__time` and a `tags` dimension (multi-value or not) and
    /// returns its payload.
    async fn tags_segment(
        deep: &dolmen_storage::DeepStorage,
        dir: &std::path::Path,
        interval: &str,
        tags: arrow::array::ArrayRef,
        multi: bool,
    ) -> dolmen_segment::DataSegment {
        use dolmen_segment::{ColumnKind, ColumnType, DataSegment, SegmentSchema, ShardSpec};
        let mut col = SegmentColumn::new("tags", ColumnType::String, ColumnKind::Dimension);
        col.multi_value = multi;
        let schema = SegmentSchema { columns: vec![col] };
        let iv = Interval::parse(interval).unwrap();
        let n = tags.len();
        // Files may hold hidden columns after the listed ones (first/last metric times).
        let mut fields: Vec<Field> = schema
            .arrow_schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("__dolmen_time:m", DataType::Int64, true));
        let file_schema = Arc::new(Schema::new(fields));
        let batch = arrow::record_batch::RecordBatch::try_new(
            Arc::clone(&file_schema),
            vec![
                Arc::new(arrow::array::TimestampMillisecondArray::from(vec![
                    iv.start;
                    n
                ])),
                tags,
                Arc::new(arrow::array::Int64Array::from(vec![iv.start; n])),
            ],
        )
        .unwrap();
        let file = dir.join(format!("{}.parquet", iv.start));
        let size = dolmen_segment::file::write_segment_file(
            &file,
            file_schema,
            &[batch],
            dolmen_segment::file::compression_for(None),
        )
        .unwrap();
        let load_spec = deep
            .push(&file, &format!("mv/{}/index.parquet", iv.start))
            .await
            .unwrap();
        DataSegment {
            data_source: "mv".into(),
            interval: iv,
            version: "v1".into(),
            load_spec,
            dimensions: "tags".into(),
            metrics: String::new(),
            shard_spec: ShardSpec::Numbered {
                partition_num: 0,
                partitions: 1,
            },
            binary_version: 9,
            size,
            num_rows: n as u64,
            columns: schema.columns,
            last_compaction_state: None,
            identifier: format!("mv_{interval}_v1"),
        }
    }

    /// A segment payload with `columns` (no file: only the schema is read).
    fn payload(interval: &str, columns: Vec<SegmentColumn>) -> dolmen_segment::DataSegment {
        use dolmen_segment::{DataSegment, ShardSpec};
        DataSegment {
            data_source: "ds".into(),
            interval: Interval::parse(interval).unwrap(),
            version: "v1".into(),
            load_spec: dolmen_segment::LoadSpec::Local {
                path: "/nowhere".into(),
            },
            dimensions: String::new(),
            metrics: String::new(),
            shard_spec: ShardSpec::Numbered {
                partition_num: 0,
                partitions: 1,
            },
            binary_version: 9,
            size: 0,
            num_rows: 0,
            columns,
            last_compaction_state: None,
            identifier: format!("ds_{interval}_v1"),
        }
    }

    /// Druid's datasource row signature: `__time`, dimensions in the newest segment's order,
    /// metrics sorted by name (`IndexMerger.mergeIndexed` writes them sorted), whatever order
    /// the metricsSpec gave.
    #[test]
    fn metrics_follow_the_dimensions_sorted_by_name() {
        use dolmen_segment::{ColumnKind, ColumnType};
        let dim = |n: &str| SegmentColumn::new(n, ColumnType::String, ColumnKind::Dimension);
        let metric = |n: &str| SegmentColumn::new(n, ColumnType::Long, ColumnKind::Metric);
        let old = payload(
            "2020-01-01/2020-01-02",
            vec![
                dim("page"),
                metric("sum_z"),
                metric("count"),
                dim("old_dim"),
            ],
        );
        let new = payload(
            "2020-01-02/2020-01-03",
            vec![
                dim("user"),
                dim("page"),
                metric("sum_z"),
                metric("count"),
                metric("a_b"),
            ],
        );
        let timeline = Timeline::build([Arc::new(old), Arc::new(new)]);
        let schema = datasource_schema(&timeline, &[]);
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            ["__time", "user", "page", "old_dim", "a_b", "count", "sum_z"]
        );
    }

    #[tokio::test]
    async fn multi_value_columns_read_as_lists() {
        use arrow::array::{Array, AsArray, ListBuilder, StringArray, StringBuilder};
        use datafusion::prelude::SessionContext;
        let dir = tempfile::tempdir().unwrap();
        let deep = dolmen_storage::DeepStorage::local(&dir.path().join("deep")).unwrap();
        let cache = Arc::new(SegmentCache::new(&dir.path().join("cache"), deep.clone()).unwrap());
        // An older segment stored `tags` as a plain string, a newer one as a list.
        let old = tags_segment(
            &deep,
            dir.path(),
            "2020-01-01/2020-01-02",
            Arc::new(StringArray::from(vec![Some("x"), None])),
            false,
        )
        .await;
        let mut b = ListBuilder::new(StringBuilder::new());
        b.values().append_value("a");
        b.values().append_value("b");
        b.append(true);
        b.values().append_value("c");
        b.append(true);
        let new = tags_segment(
            &deep,
            dir.path(),
            "2020-01-02/2020-01-03",
            Arc::new(b.finish()),
            true,
        )
        .await;
        let timeline = Arc::new(Timeline::build([Arc::new(old), Arc::new(new)]));
        let schema = datasource_schema(&timeline, &[]);
        let f = schema.field_with_name("tags").unwrap();
        assert_eq!(f.data_type(), &dolmen_segment::multi_value_string_type());
        assert_eq!(
            f.metadata()
                .get(dolmen_segment::MULTI_VALUE_METADATA_KEY)
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(
            schema.fields().len(),
            2,
            "hidden file columns are not in the table"
        );
        let ctx = SessionContext::new();
        ctx.register_table(
            "mv",
            Arc::new(DatasourceTable::new("mv".into(), timeline, cache)),
        )
        .unwrap();
        let df = ctx
            .sql("SELECT tags FROM mv ORDER BY __time")
            .await
            .unwrap();
        let out_schema = df.schema().as_arrow().clone();
        assert!(
            out_schema
                .field(0)
                .metadata()
                .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY),
            "the multi-value marker reaches the result schema"
        );
        let batches = df.collect().await.unwrap();
        let mut rows: Vec<Option<Vec<Option<String>>>> = Vec::new();
        for batch in &batches {
            let l = batch.column(0).as_list::<i32>();
            for i in 0..l.len() {
                rows.push(l.is_valid(i).then(|| {
                    l.value(i)
                        .as_string::<i32>()
                        .iter()
                        .map(|s| s.map(str::to_string))
                        .collect()
                }));
            }
        }
        let some = |v: &[&str]| Some(v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>());
        assert_eq!(rows.len(), 4);
        assert!(rows.contains(&some(&["x"])));
        assert!(rows.contains(&some(&["a", "b"])));
        assert!(rows.contains(&some(&["c"])));
        // A plain-string null is read as a null list or a list holding null; both render null.
        assert!(
            rows.iter()
                .any(|r| r.is_none() || r.as_deref() == Some(&[None][..]))
        );

        // GROUP BY groups by the whole list (no implicit unnest yet).
        let grouped = ctx
            .sql("SELECT tags, COUNT(*) AS n FROM mv GROUP BY tags")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(grouped.iter().map(|b| b.num_rows()).sum::<usize>(), 4);

        // Comparing the list with a string is a planning error, not a panic.
        let err = match ctx.sql("SELECT tags FROM mv WHERE tags = 'a'").await {
            Ok(df) => df.collect().await.map(|_| ()).unwrap_err(),
            Err(e) => e,
        };
        assert!(
            err.to_string()
                .contains("comparison operation List(Utf8) = Utf8"),
            "{err}"
        );
    }
}
