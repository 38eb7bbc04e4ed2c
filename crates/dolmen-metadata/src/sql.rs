//! [`SqlMetadataStore`]: the metadata store over sqlx's `Any` driver.
//!
//! The SQL is portable (`$N` placeholders in order, TEXT and BIGINT columns), so the same
//! statements run on SQLite and PostgreSQL. On SQLite the store enables WAL with
//! `synchronous=FULL` (an acknowledged write survives `kill -9` and power loss) and a busy
//! timeout; write transactions are serialized inside the process by a mutex, which avoids
//! SQLite's lock-upgrade deadlocks between concurrent writers.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::str::FromStr;

use async_trait::async_trait;
use dolmen_common::Interval;
use dolmen_common::time::now_millis;
use dolmen_segment::{DataSegment, SegmentId, ShardSpec};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use tokio::sync::Mutex;

use crate::{
    AuditEntry, AuditInfo, AuditQuery, AuditTarget, AuthnUserRecord, AuthzRoleRecord,
    AuthzSnapshot, AuthzUserRecord, MetadataError, MetadataStore, PublishMode, PublishRequest,
    Result, RulesRecord, RunnerStatus, SegmentRecord, SegmentSelector, StreamCommit, StreamOffsets,
    SupervisorRecord, TaskFilter, TaskLocation, TaskLockRecord, TaskRecord, TaskState,
    TaskStatusUpdate, UnusedSegmentsQuery,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A metadata store in a SQL database (SQLite by default).
#[derive(Debug)]
pub struct SqlMetadataStore {
    pool: AnyPool,
    write_lock: Mutex<()>,
}

impl SqlMetadataStore {
    /// Opens (creating if needed) a SQLite metadata store file and applies migrations.
    ///
    /// # Errors
    /// When the file cannot be created or opened, or a migration fails.
    pub async fn open_sqlite(path: &Path) -> Result<SqlMetadataStore> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| MetadataError::Database(sqlx::Error::Io(e)))?;
        }
        let url = format!("sqlite://{}?mode=rwc", path.display());
        SqlMetadataStore::connect(&url).await
    }

    /// Connects to a metadata store by URL (`sqlite://path?mode=rwc`, `sqlite::memory:`) and
    /// applies migrations.
    ///
    /// # Errors
    /// When the database is unreachable or a migration fails.
    pub async fn connect(url: &str) -> Result<SqlMetadataStore> {
        sqlx::any::install_default_drivers();
        let is_sqlite = url.starts_with("sqlite:");
        let is_memory = url.contains(":memory:");
        let opts = AnyConnectOptions::from_str(url)?;
        let mut pool_opts = AnyPoolOptions::new().max_connections(if is_memory { 1 } else { 8 });
        if is_memory {
            // One connection that never closes, or the in-memory database would vanish.
            pool_opts = pool_opts
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        if is_sqlite {
            pool_opts = pool_opts.after_connect(|conn, _meta| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute("PRAGMA journal_mode=WAL").await?;
                    conn.execute("PRAGMA synchronous=FULL").await?;
                    conn.execute("PRAGMA busy_timeout=10000").await?;
                    conn.execute("PRAGMA foreign_keys=ON").await?;
                    Ok(())
                })
            });
        }
        let pool = pool_opts.connect_with(opts).await?;
        MIGRATOR.run(&pool).await?;
        Ok(SqlMetadataStore {
            pool,
            write_lock: Mutex::new(()),
        })
    }

    /// Closes the connection pool (flushing SQLite's WAL).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn corrupt(what: &'static str, id: &str, e: impl std::fmt::Display) -> MetadataError {
    MetadataError::Corrupt {
        what,
        id: id.to_string(),
        reason: e.to_string(),
    }
}

fn decode_segment(row: &AnyRow) -> Result<DataSegment> {
    let id: String = row.try_get("id")?;
    let payload: String = row.try_get("payload")?;
    serde_json::from_str(&payload).map_err(|e| corrupt("segment", &id, e))
}

/// Columns read by [`decode_segment_record`].
const SEGMENT_RECORD_COLUMNS: &str = "id, payload, used, created_ms, used_status_last_updated";

fn decode_segment_record(row: &AnyRow) -> Result<SegmentRecord> {
    Ok(SegmentRecord {
        segment: decode_segment(row)?,
        used: row.try_get::<i64, _>("used")? != 0,
        created_ms: row.try_get("created_ms")?,
        used_status_last_updated_ms: row.try_get("used_status_last_updated")?,
    })
}

/// `$first, $first+1, ...` for an `IN (...)` list of `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn decode_task(row: &AnyRow) -> Result<TaskRecord> {
    let id: String = row.try_get("id")?;
    let status: String = row.try_get("status")?;
    let runner: String = row.try_get("runner_status")?;
    let payload: String = row.try_get("payload")?;
    let location: Option<String> = row.try_get("location")?;
    Ok(TaskRecord {
        status: TaskState::parse(&status)
            .ok_or_else(|| corrupt("task", &id, format!("status {status}")))?,
        runner_status: RunnerStatus::parse(&runner)
            .ok_or_else(|| corrupt("task", &id, format!("runner status {runner}")))?,
        payload: serde_json::from_str(&payload).map_err(|e| corrupt("task", &id, e))?,
        location: match location {
            Some(l) => serde_json::from_str(&l).map_err(|e| corrupt("task", &id, e))?,
            None => TaskLocation::unknown(),
        },
        task_type: row.try_get("task_type")?,
        group_id: row.try_get("group_id")?,
        data_source: row.try_get("datasource")?,
        created_ms: row.try_get("created_ms")?,
        queue_insertion_ms: row.try_get("queue_insertion_ms")?,
        duration_ms: row.try_get("duration_ms")?,
        error_msg: row.try_get("error_msg")?,
        id,
    })
}

const TASK_COLUMNS: &str = "id, task_type, group_id, datasource, created_ms, queue_insertion_ms, status, runner_status, duration_ms, error_msg, location, payload";

#[async_trait]
impl MetadataStore for SqlMetadataStore {
    async fn publish_segments(&self, req: PublishRequest) -> Result<Vec<DataSegment>> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let now = now_millis();

        // Group the new segments by time chunk, keeping their order.
        let mut by_chunk: BTreeMap<Interval, Vec<&crate::NewSegment>> = BTreeMap::new();
        for s in &req.segments {
            by_chunk.entry(s.interval).or_default().push(s);
        }

        let mut published = Vec::with_capacity(req.segments.len());
        for (interval, segs) in by_chunk {
            // Existing used segments overlapping this chunk.
            let rows = sqlx::query(
                "SELECT id, payload FROM segments WHERE datasource = $1 AND used = 1 AND start_ms < $2 AND end_ms > $3",
            )
            .bind(&req.data_source)
            .bind(interval.end)
            .bind(interval.start)
            .fetch_all(&mut *tx)
            .await?;
            let existing: Vec<DataSegment> =
                rows.iter().map(decode_segment).collect::<Result<_>>()?;

            let (version, first_partition, core) = match &req.mode {
                PublishMode::Overwrite { version } => {
                    if existing
                        .iter()
                        .any(|s| s.interval == interval && &s.version == version)
                    {
                        return Err(MetadataError::Conflict(format!(
                            "segments of datasource [{}] interval [{interval}] version [{version}] already exist",
                            req.data_source
                        )));
                    }
                    (version.clone(), 0u32, segs.len() as u32)
                }
                PublishMode::Append { version_if_new } => {
                    if let Some(other) = existing.iter().find(|s| s.interval != interval) {
                        return Err(MetadataError::Conflict(format!(
                            "cannot append to datasource [{}]: new time chunk [{interval}] overlaps existing segment [{}] with a different time chunk; use the existing segmentGranularity",
                            req.data_source, other.identifier
                        )));
                    }
                    match existing.iter().map(|s| s.version.as_str()).max() {
                        None => (version_if_new.clone(), 0, 0),
                        Some(v) => {
                            let same: Vec<&DataSegment> =
                                existing.iter().filter(|s| s.version == v).collect();
                            let next = same
                                .iter()
                                .map(|s| s.shard_spec.partition_num())
                                .max()
                                .unwrap_or(0)
                                + 1;
                            let core = same
                                .iter()
                                .map(|s| s.shard_spec.core_partitions())
                                .max()
                                .unwrap_or(0);
                            (v.to_string(), next, core)
                        }
                    }
                }
            };

            for (i, s) in segs.into_iter().enumerate() {
                let partition_num = first_partition + i as u32;
                let id = SegmentId {
                    data_source: req.data_source.clone(),
                    interval,
                    version: version.clone(),
                    partition_num,
                };
                let seg = DataSegment {
                    data_source: req.data_source.clone(),
                    interval,
                    version: version.clone(),
                    load_spec: s.load_spec.clone(),
                    dimensions: s.dimensions.join(","),
                    metrics: s.metrics.join(","),
                    shard_spec: match &s.shard {
                        Some(t) => t.renumbered(partition_num, core),
                        None => ShardSpec::Numbered {
                            partition_num,
                            partitions: core,
                        },
                    },
                    binary_version: 9,
                    size: s.size,
                    num_rows: s.num_rows,
                    columns: s.columns.clone(),
                    last_compaction_state: req.last_compaction_state.clone(),
                    identifier: id.to_string(),
                };
                let payload = serde_json::to_string(&seg)
                    .map_err(|e| corrupt("segment", &seg.identifier, e))?;
                let res = sqlx::query(
                    "INSERT INTO segments (id, datasource, start_ms, end_ms, version, partition_num, used, used_status_last_updated, created_ms, payload) VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9)",
                )
                .bind(&seg.identifier)
                .bind(&seg.data_source)
                .bind(interval.start)
                .bind(interval.end)
                .bind(&seg.version)
                .bind(i64::from(partition_num))
                .bind(now)
                .bind(now)
                .bind(payload)
                .execute(&mut *tx)
                .await;
                if let Err(e) = res {
                    if let sqlx::Error::Database(db) = &e
                        && db.is_unique_violation()
                    {
                        return Err(MetadataError::Conflict(format!(
                            "segment [{}] already exists",
                            seg.identifier
                        )));
                    }
                    return Err(e.into());
                }
                published.push(seg);
            }
        }

        // dropExisting: older used segments fully inside the listed intervals become unused.
        if !req.drop_existing.is_empty() {
            let new_ids: HashSet<&str> = published.iter().map(|s| s.identifier.as_str()).collect();
            let new_version = match &req.mode {
                PublishMode::Overwrite { version } => version.clone(),
                PublishMode::Append { version_if_new } => version_if_new.clone(),
            };
            for iv in &req.drop_existing {
                let rows = sqlx::query(
                    "SELECT id, version FROM segments WHERE datasource = $1 AND used = 1 AND start_ms >= $2 AND end_ms <= $3",
                )
                .bind(&req.data_source)
                .bind(iv.start)
                .bind(iv.end)
                .fetch_all(&mut *tx)
                .await?;
                for r in rows {
                    let id: String = r.try_get("id")?;
                    let version: String = r.try_get("version")?;
                    if !new_ids.contains(id.as_str()) && version < new_version {
                        sqlx::query("UPDATE segments SET used = 0, used_status_last_updated = $1 WHERE id = $2")
                            .bind(now)
                            .bind(&id)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
            }
        }
        // Stream offsets: compare-and-swap in the same transaction as the segments.
        if let Some(commit) = &req.commit {
            let stored = read_stream_offsets(&mut tx, &req.data_source).await?;
            let next = apply_commit(&req.data_source, stored.as_ref(), commit)?;
            write_stream_offsets(&mut tx, &req.data_source, Some(&next), now).await?;
        }
        tx.commit().await?;
        Ok(published)
    }

    async fn used_segments(
        &self,
        data_source: &str,
        interval: Option<Interval>,
    ) -> Result<Vec<DataSegment>> {
        let iv = interval.unwrap_or(Interval::ETERNITY);
        let rows = sqlx::query(
            "SELECT id, payload FROM segments WHERE datasource = $1 AND used = 1 AND start_ms < $2 AND end_ms > $3 ORDER BY start_ms, version, partition_num",
        )
        .bind(data_source)
        .bind(iv.end)
        .bind(iv.start)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_segment).collect()
    }

    async fn all_used_segments(&self) -> Result<Vec<DataSegment>> {
        let rows = sqlx::query("SELECT id, payload FROM segments WHERE used = 1 ORDER BY datasource, start_ms, version, partition_num")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode_segment).collect()
    }

    async fn data_sources(&self) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT DISTINCT datasource FROM segments WHERE used = 1 ORDER BY datasource",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("datasource").map_err(Into::into))
            .collect()
    }

    async fn mark_segments_unused(&self, segment_ids: &[String]) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let now = now_millis();
        let mut n = 0;
        for id in segment_ids {
            n += sqlx::query("UPDATE segments SET used = 0, used_status_last_updated = $1 WHERE id = $2 AND used = 1")
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(n)
    }

    async fn max_used_version(
        &self,
        data_source: &str,
        interval: Interval,
    ) -> Result<Option<String>> {
        let row = sqlx::query(
            "SELECT MAX(version) AS v FROM segments WHERE datasource = $1 AND used = 1 AND start_ms < $2 AND end_ms > $3",
        )
        .bind(data_source)
        .bind(interval.end)
        .bind(interval.start)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<Option<String>, _>("v")?)
    }

    async fn all_data_source_names(&self) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT DISTINCT datasource FROM segments ORDER BY datasource")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("datasource").map_err(Into::into))
            .collect()
    }

    async fn segments(
        &self,
        data_source: &str,
        include_unused: bool,
    ) -> Result<Vec<SegmentRecord>> {
        let used_clause = if include_unused { "" } else { " AND used = 1" };
        // Safe: only fixed column lists and clauses are interpolated.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {SEGMENT_RECORD_COLUMNS} FROM segments WHERE datasource = $1{used_clause} ORDER BY start_ms, end_ms, version, partition_num"
        )))
        .bind(data_source)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_segment_record).collect()
    }

    async fn segment(&self, segment_id: &str) -> Result<Option<SegmentRecord>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {SEGMENT_RECORD_COLUMNS} FROM segments WHERE id = $1"
        )))
        .bind(segment_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(decode_segment_record).transpose()
    }

    async fn set_segments_used(
        &self,
        data_source: &str,
        selector: &SegmentSelector,
        used: bool,
    ) -> Result<u64> {
        let (to, from) = if used { (1i64, 0i64) } else { (0i64, 1i64) };
        let _guard = self.write_lock.lock().await;
        let now = now_millis();
        let mut tx = self.pool.begin().await?;
        let set = "UPDATE segments SET used = $1, used_status_last_updated = $2";
        let n = match selector {
            SegmentSelector::All => sqlx::query(sqlx::AssertSqlSafe(format!(
                "{set} WHERE datasource = $3 AND used = $4"
            )))
            .bind(to)
            .bind(now)
            .bind(data_source)
            .bind(from)
            .execute(&mut *tx)
            .await?
            .rows_affected(),
            SegmentSelector::Interval { interval, versions } => {
                let version_clause = match versions {
                    Some(v) if v.is_empty() => return Ok(0),
                    Some(v) => format!(" AND version IN ({})", placeholders(7, v.len())),
                    None => String::new(),
                };
                // Safe: only fixed text and numbered placeholders are interpolated.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{set} WHERE datasource = $3 AND used = $4 AND start_ms >= $5 AND end_ms <= $6{version_clause}"
                )))
                .bind(to)
                .bind(now)
                .bind(data_source)
                .bind(from)
                .bind(interval.start)
                .bind(interval.end);
                for v in versions.iter().flatten() {
                    q = q.bind(v.clone());
                }
                q.execute(&mut *tx).await?.rows_affected()
            }
            SegmentSelector::Ids(ids) => {
                let mut n = 0;
                for id in ids {
                    n += sqlx::query(sqlx::AssertSqlSafe(format!(
                        "{set} WHERE id = $3 AND datasource = $4 AND used = $5"
                    )))
                    .bind(to)
                    .bind(now)
                    .bind(id)
                    .bind(data_source)
                    .bind(from)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                }
                n
            }
        };
        tx.commit().await?;
        Ok(n)
    }

    async fn unused_segments(&self, query: &UnusedSegmentsQuery) -> Result<Vec<SegmentRecord>> {
        let mut sql = format!(
            "SELECT {SEGMENT_RECORD_COLUMNS} FROM segments WHERE datasource = $1 AND used = 0 AND start_ms >= $2 AND end_ms <= $3"
        );
        let mut next = 4;
        if query.max_used_status_last_updated_ms.is_some() {
            sql.push_str(&format!(" AND used_status_last_updated <= ${next}"));
            next += 1;
        }
        match &query.versions {
            Some(v) if v.is_empty() => return Ok(Vec::new()),
            Some(v) => sql.push_str(&format!(
                " AND version IN ({})",
                placeholders(next, v.len())
            )),
            None => {}
        }
        sql.push_str(&format!(
            " ORDER BY start_ms, end_ms, version, partition_num LIMIT {}",
            query.limit
        ));
        // Safe: only fixed text, numbered placeholders and an integer are interpolated.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&query.data_source)
            .bind(query.interval.start)
            .bind(query.interval.end);
        if let Some(t) = query.max_used_status_last_updated_ms {
            q = q.bind(t);
        }
        for v in query.versions.iter().flatten() {
            q = q.bind(v.clone());
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter().map(decode_segment_record).collect()
    }

    async fn delete_unused_segments(&self, segment_ids: &[String]) -> Result<Vec<String>> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let mut deleted = Vec::new();
        for id in segment_ids {
            let n = sqlx::query("DELETE FROM segments WHERE id = $1 AND used = 0")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n > 0 {
                deleted.push(id.clone());
            }
        }
        tx.commit().await?;
        Ok(deleted)
    }

    async fn insert_task(&self, task: &TaskRecord) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let location =
            serde_json::to_string(&task.location).map_err(|e| corrupt("task", &task.id, e))?;
        let res = sqlx::query(
            "INSERT INTO tasks (id, task_type, group_id, datasource, created_ms, queue_insertion_ms, status, runner_status, duration_ms, error_msg, location, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&task.id)
        .bind(&task.task_type)
        .bind(&task.group_id)
        .bind(&task.data_source)
        .bind(task.created_ms)
        .bind(task.queue_insertion_ms)
        .bind(task.status.as_str())
        .bind(task.runner_status.as_str())
        .bind(task.duration_ms)
        .bind(task.error_msg.clone())
        .bind(location)
        .bind(task.payload.to_string())
        .execute(&self.pool)
        .await;
        match res {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Err(
                MetadataError::Conflict(format!("Task [{}] already exists", task.id)),
            ),
            Err(e) => Err(e.into()),
        }
    }

    async fn update_task_status(&self, u: &TaskStatusUpdate) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let location = serde_json::to_string(&u.location).map_err(|e| corrupt("task", &u.id, e))?;
        let n = sqlx::query(
            "UPDATE tasks SET status = $1, runner_status = $2, duration_ms = $3, error_msg = $4, location = $5 WHERE id = $6",
        )
        .bind(u.status.as_str())
        .bind(u.runner_status.as_str())
        .bind(u.duration_ms)
        .bind(u.error_msg.clone())
        .bind(location)
        .bind(&u.id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if n == 0 {
            return Err(MetadataError::NotFound(format!(
                "Cannot find any task with id: [{}]",
                u.id
            )));
        }
        Ok(())
    }

    async fn set_task_report(&self, task_id: &str, report: &serde_json::Value) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let n = sqlx::query("UPDATE tasks SET report = $1 WHERE id = $2")
            .bind(report.to_string())
            .bind(task_id)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(MetadataError::NotFound(format!(
                "Cannot find any task with id: [{task_id}]"
            )));
        }
        Ok(())
    }

    async fn task_report(&self, task_id: &str) -> Result<Option<serde_json::Value>> {
        let row = sqlx::query("SELECT report FROM tasks WHERE id = $1")
            .bind(task_id)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            None => Ok(None),
            Some(r) => match r.try_get::<Option<String>, _>("report")? {
                None => Ok(None),
                Some(s) => Ok(Some(
                    serde_json::from_str(&s).map_err(|e| corrupt("task report", task_id, e))?,
                )),
            },
        }
    }

    async fn get_task(&self, task_id: &str) -> Result<Option<TaskRecord>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"
        )))
        .bind(task_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(decode_task).transpose()
    }

    async fn list_tasks(&self, f: &TaskFilter) -> Result<Vec<TaskRecord>> {
        // Build the WHERE clause with numbered placeholders in order of appearance.
        let mut clauses: Vec<String> = Vec::new();
        let mut text_args: Vec<String> = Vec::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("${n}")
        };
        if let Some(statuses) = &f.statuses {
            if statuses.is_empty() {
                return Ok(Vec::new());
            }
            let ps: Vec<String> = statuses
                .iter()
                .map(|s| {
                    text_args.push(s.as_str().to_string());
                    next()
                })
                .collect();
            clauses.push(format!("status IN ({})", ps.join(", ")));
        }
        if let Some(ds) = &f.data_source {
            text_args.push(ds.clone());
            clauses.push(format!("datasource = {}", next()));
        }
        if let Some(t) = &f.task_type {
            text_args.push(t.clone());
            clauses.push(format!("task_type = {}", next()));
        }
        let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks");
        let created = f.created;
        let (p_start, p_end) = if created.is_some() {
            (next(), next())
        } else {
            (String::new(), String::new())
        };
        if created.is_some() {
            clauses.push(format!("created_ms >= {p_start} AND created_ms < {p_end}"));
        }
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY created_ms DESC, id DESC");
        if let Some(max) = f.max {
            sql.push_str(&format!(" LIMIT {max}"));
        }
        // Safe: only fixed column names and numbered placeholders are interpolated.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for a in &text_args {
            q = q.bind(a.clone());
        }
        if let Some(c) = created {
            q = q.bind(c.start).bind(c.end);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter().map(decode_task).collect()
    }

    async fn insert_lock(&self, lock: &TaskLockRecord) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        sqlx::query(
            "INSERT INTO task_locks (id, task_id, datasource, start_ms, end_ms, version, lock_type) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&lock.id)
        .bind(&lock.task_id)
        .bind(&lock.data_source)
        .bind(lock.interval.start)
        .bind(lock.interval.end)
        .bind(&lock.version)
        .bind(&lock.lock_type)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn delete_locks(&self, task_id: &str) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        Ok(sqlx::query("DELETE FROM task_locks WHERE task_id = $1")
            .bind(task_id)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    async fn list_locks(&self) -> Result<Vec<TaskLockRecord>> {
        let rows = sqlx::query("SELECT id, task_id, datasource, start_ms, end_ms, version, lock_type FROM task_locks ORDER BY task_id, start_ms")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TaskLockRecord {
                    id: r.try_get("id")?,
                    task_id: r.try_get("task_id")?,
                    data_source: r.try_get("datasource")?,
                    interval: Interval {
                        start: r.try_get("start_ms")?,
                        end: r.try_get("end_ms")?,
                    },
                    version: r.try_get("version")?,
                    lock_type: r.try_get("lock_type")?,
                })
            })
            .collect()
    }

    async fn insert_supervisor(
        &self,
        spec_id: &str,
        payload: &serde_json::Value,
    ) -> Result<SupervisorRecord> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let seq: i64 =
            sqlx::query("SELECT COALESCE(MAX(seq), 0) AS seq FROM supervisors WHERE spec_id = $1")
                .bind(spec_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("seq")?;
        // Versions are ISO timestamps in the history: keep them strictly increasing even when
        // two changes land within one millisecond.
        let last_ms: i64 = sqlx::query(
            "SELECT COALESCE(MAX(created_ms), 0) AS created_ms FROM supervisors WHERE spec_id = $1",
        )
        .bind(spec_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("created_ms")?;
        let created_ms = now_millis().max(last_ms + 1);
        sqlx::query(
            "INSERT INTO supervisors (spec_id, seq, created_ms, payload) VALUES ($1, $2, $3, $4)",
        )
        .bind(spec_id)
        .bind(seq + 1)
        .bind(created_ms)
        .bind(payload.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(SupervisorRecord {
            spec_id: spec_id.to_string(),
            created_ms,
            payload: payload.clone(),
        })
    }

    async fn supervisor_history(&self, spec_id: Option<&str>) -> Result<Vec<SupervisorRecord>> {
        let rows = match spec_id {
            Some(id) => {
                sqlx::query("SELECT spec_id, created_ms, payload FROM supervisors WHERE spec_id = $1 ORDER BY seq DESC")
                    .bind(id)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                sqlx::query("SELECT spec_id, created_ms, payload FROM supervisors ORDER BY spec_id, seq DESC")
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter().map(decode_supervisor).collect()
    }

    async fn latest_supervisors(&self) -> Result<Vec<SupervisorRecord>> {
        let rows = sqlx::query(
            "SELECT s.spec_id, s.created_ms, s.payload FROM supervisors s JOIN (SELECT spec_id, MAX(seq) AS seq FROM supervisors GROUP BY spec_id) m ON s.spec_id = m.spec_id AND s.seq = m.seq ORDER BY s.spec_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_supervisor).collect()
    }

    async fn stream_offsets(&self, data_source: &str) -> Result<Option<StreamOffsets>> {
        let mut conn = self.pool.acquire().await?;
        read_stream_offsets(&mut conn, data_source).await
    }

    async fn set_stream_offsets(
        &self,
        data_source: &str,
        expected: Option<&Option<StreamOffsets>>,
        offsets: Option<&StreamOffsets>,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if let Some(expected) = expected {
            let stored = read_stream_offsets(&mut tx, data_source).await?;
            if &stored != expected {
                return Err(MetadataError::Conflict(format!(
                    "stream offsets of datasource [{data_source}] changed meanwhile: stored {}, expected {}",
                    offsets_text(stored.as_ref()),
                    offsets_text(expected.as_ref())
                )));
            }
        }
        write_stream_offsets(&mut tx, data_source, offsets, now_millis()).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn config(&self, name: &str) -> Result<Option<serde_json::Value>> {
        let mut conn = self.pool.acquire().await?;
        read_config(&mut conn, name).await
    }

    async fn set_config(
        &self,
        name: &str,
        expected: Option<&Option<serde_json::Value>>,
        value: &serde_json::Value,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if let Some(expected) = expected {
            let stored = read_config(&mut tx, name).await?;
            if &stored != expected {
                return Err(MetadataError::Conflict(format!(
                    "configuration [{name}] changed meanwhile in the metadata store; read it again and retry"
                )));
            }
        }
        sqlx::query("DELETE FROM config WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO config (name, payload, updated_ms) VALUES ($1, $2, $3)")
            .bind(name)
            .bind(value.to_string())
            .bind(now_millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_config_audited(
        &self,
        name: &str,
        value: &serde_json::Value,
        target: &AuditTarget,
        info: &AuditInfo,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let now = now_millis();
        let text = value.to_string();
        sqlx::query("DELETE FROM config WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO config (name, payload, updated_ms) VALUES ($1, $2, $3)")
            .bind(name)
            .bind(&text)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        insert_audit(&mut tx, target, info, &text, now).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn rules(&self) -> Result<BTreeMap<String, RulesRecord>> {
        let rows = sqlx::query(
            "SELECT r.datasource, r.version, r.payload FROM rules r JOIN (SELECT datasource, MAX(seq) AS seq FROM rules GROUP BY datasource) m ON r.datasource = m.datasource AND r.seq = m.seq",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out = BTreeMap::new();
        for row in &rows {
            let rec = decode_rules(row)?;
            out.insert(rec.data_source.clone(), rec);
        }
        Ok(out)
    }

    async fn set_rules(
        &self,
        data_source: &str,
        rules: &serde_json::Value,
        info: &AuditInfo,
    ) -> Result<bool> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let current = latest_rules(&mut tx, data_source).await?;
        if current.as_ref().map(|(_, r)| &r.rules) == Some(rules) {
            return Ok(false);
        }
        let now = now_millis();
        let text = rules.to_string();
        insert_rules(&mut tx, data_source, current.as_ref(), &text, now).await?;
        let target = AuditTarget {
            key: data_source.to_string(),
            audit_type: crate::RULES_AUDIT_TYPE.to_string(),
        };
        insert_audit(&mut tx, &target, info, &text, now).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn init_rules(&self, data_source: &str, rules: &serde_json::Value) -> Result<bool> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if latest_rules(&mut tx, data_source).await?.is_some() {
            return Ok(false);
        }
        insert_rules(&mut tx, data_source, None, &rules.to_string(), now_millis()).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn delete_audit_before(&self, before_ms: i64) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        let n = sqlx::query("DELETE FROM audit WHERE created_ms < $1")
            .bind(before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(n)
    }

    async fn delete_rules_of_absent_data_sources(&self, before_ms: i64) -> Result<Vec<String>> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(
            "SELECT r.datasource, r.version, r.payload FROM rules r JOIN (SELECT datasource, MAX(seq) AS seq FROM rules GROUP BY datasource) m ON r.datasource = m.datasource AND r.seq = m.seq WHERE r.datasource <> $1 AND NOT EXISTS (SELECT 1 FROM segments s WHERE s.datasource = r.datasource)",
        )
        .bind(DEFAULT_RULES_NAME)
        .fetch_all(&mut *tx)
        .await?;
        let mut cleaned = Vec::new();
        for row in &rows {
            let rec = decode_rules(row)?;
            let old =
                dolmen_common::time::parse_iso_instant(&rec.version).is_ok_and(|t| t < before_ms);
            if old {
                sqlx::query("DELETE FROM rules WHERE datasource = $1")
                    .bind(&rec.data_source)
                    .execute(&mut *tx)
                    .await?;
                cleaned.push(rec.data_source);
            }
        }
        tx.commit().await?;
        cleaned.sort();
        Ok(cleaned)
    }

    async fn audit_history(
        &self,
        audit_type: &str,
        key: Option<&str>,
        query: &AuditQuery,
    ) -> Result<Vec<AuditEntry>> {
        let key_filter = if key.is_some() {
            " AND audit_key = $2"
        } else {
            ""
        };
        let n = if key.is_some() { 3 } else { 2 };
        let sql = match query {
            AuditQuery::Interval(_) => format!(
                "SELECT {AUDIT_COLUMNS} FROM audit WHERE audit_type = $1{key_filter} AND created_ms >= ${n} AND created_ms <= ${} ORDER BY created_ms, id",
                n + 1
            ),
            AuditQuery::Count(_) => format!(
                "SELECT {AUDIT_COLUMNS} FROM audit WHERE audit_type = $1{key_filter} ORDER BY created_ms DESC, id DESC LIMIT ${n}"
            ),
        };
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(audit_type);
        if let Some(k) = key {
            q = q.bind(k);
        }
        q = match query {
            AuditQuery::Interval(i) => q.bind(i.start).bind(i.end),
            AuditQuery::Count(c) => q.bind(i64::from(*c)),
        };
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter().map(decode_audit).collect()
    }

    async fn authn_users(&self, authenticator: &str) -> Result<Vec<AuthnUserRecord>> {
        let rows = sqlx::query(
            "SELECT name, credentials FROM authn_users WHERE authenticator = $1 ORDER BY name",
        )
        .bind(authenticator)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let credentials: Option<String> = r.try_get("credentials")?;
                let credentials = match credentials {
                    None => None,
                    Some(t) => Some(
                        serde_json::from_str(&t)
                            .map_err(|e| corrupt("user credentials", &name, e))?,
                    ),
                };
                Ok(AuthnUserRecord { name, credentials })
            })
            .collect()
    }

    async fn create_authn_user(&self, authenticator: &str, name: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if row_exists(&mut tx, "authn_users", "authenticator", authenticator, name).await? {
            return Err(MetadataError::Conflict(format!(
                "User [{name}] already exists."
            )));
        }
        sqlx::query(
            "INSERT INTO authn_users (authenticator, name, credentials) VALUES ($1, $2, NULL)",
        )
        .bind(authenticator)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn delete_authn_user(&self, authenticator: &str, name: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let n = sqlx::query("DELETE FROM authn_users WHERE authenticator = $1 AND name = $2")
            .bind(authenticator)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(no_user(name));
        }
        Ok(())
    }

    async fn set_authn_credentials(
        &self,
        authenticator: &str,
        name: &str,
        credentials: &serde_json::Value,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let n = sqlx::query(
            "UPDATE authn_users SET credentials = $1 WHERE authenticator = $2 AND name = $3",
        )
        .bind(credentials.to_string())
        .bind(authenticator)
        .bind(name)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if n == 0 {
            return Err(no_user(name));
        }
        Ok(())
    }

    async fn authz_snapshot(&self, authorizer: &str) -> Result<AuthzSnapshot> {
        let mut tx = self.pool.begin().await?;
        let users = sqlx::query("SELECT name FROM authz_users WHERE authorizer = $1 ORDER BY name")
            .bind(authorizer)
            .fetch_all(&mut *tx)
            .await?;
        let assignments = sqlx::query(
            "SELECT user_name, role_name FROM authz_user_roles WHERE authorizer = $1 ORDER BY user_name, role_name",
        )
        .bind(authorizer)
        .fetch_all(&mut *tx)
        .await?;
        let roles = sqlx::query(
            "SELECT name, permissions FROM authz_roles WHERE authorizer = $1 ORDER BY name",
        )
        .bind(authorizer)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut by_user: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in &assignments {
            by_user
                .entry(r.try_get("user_name")?)
                .or_default()
                .push(r.try_get("role_name")?);
        }
        let users = users
            .iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let roles = by_user.remove(&name).unwrap_or_default();
                Ok(AuthzUserRecord { name, roles })
            })
            .collect::<Result<Vec<_>>>()?;
        let roles = roles
            .iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let text: String = r.try_get("permissions")?;
                let permissions =
                    serde_json::from_str(&text).map_err(|e| corrupt("role", &name, e))?;
                Ok(AuthzRoleRecord { name, permissions })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AuthzSnapshot { users, roles })
    }

    async fn create_authz_user(&self, authorizer: &str, name: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if row_exists(&mut tx, "authz_users", "authorizer", authorizer, name).await? {
            return Err(MetadataError::Conflict(format!(
                "User [{name}] already exists."
            )));
        }
        sqlx::query("INSERT INTO authz_users (authorizer, name) VALUES ($1, $2)")
            .bind(authorizer)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn delete_authz_user(&self, authorizer: &str, name: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if !delete_with_assignments(&mut tx, "authz_users", "user_name", authorizer, name).await? {
            return Err(no_user(name));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn create_authz_role(
        &self,
        authorizer: &str,
        name: &str,
        permissions: &serde_json::Value,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if row_exists(&mut tx, "authz_roles", "authorizer", authorizer, name).await? {
            return Err(MetadataError::Conflict(format!(
                "Role [{name}] already exists."
            )));
        }
        sqlx::query("INSERT INTO authz_roles (authorizer, name, permissions) VALUES ($1, $2, $3)")
            .bind(authorizer)
            .bind(name)
            .bind(permissions.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn delete_authz_role(&self, authorizer: &str, name: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if !delete_with_assignments(&mut tx, "authz_roles", "role_name", authorizer, name).await? {
            return Err(no_role(name));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn set_authz_role_permissions(
        &self,
        authorizer: &str,
        role: &str,
        permissions: &serde_json::Value,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let n = sqlx::query(
            "UPDATE authz_roles SET permissions = $1 WHERE authorizer = $2 AND name = $3",
        )
        .bind(permissions.to_string())
        .bind(authorizer)
        .bind(role)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if n == 0 {
            return Err(no_role(role));
        }
        Ok(())
    }

    async fn set_authz_user_role(
        &self,
        authorizer: &str,
        user: &str,
        role: &str,
        assigned: bool,
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        if !row_exists(&mut tx, "authz_users", "authorizer", authorizer, user).await? {
            return Err(no_user(user));
        }
        if !row_exists(&mut tx, "authz_roles", "authorizer", authorizer, role).await? {
            return Err(no_role(role));
        }
        let has = sqlx::query(
            "SELECT 1 AS one FROM authz_user_roles WHERE authorizer = $1 AND user_name = $2 AND role_name = $3",
        )
        .bind(authorizer)
        .bind(user)
        .bind(role)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        match (assigned, has) {
            (true, true) => {
                return Err(MetadataError::Conflict(format!(
                    "User [{user}] already has role [{role}]."
                )));
            }
            (false, false) => {
                return Err(MetadataError::Conflict(format!(
                    "User [{user}] does not have role [{role}]."
                )));
            }
            (true, false) => {
                sqlx::query(
                    "INSERT INTO authz_user_roles (authorizer, user_name, role_name) VALUES ($1, $2, $3)",
                )
                .bind(authorizer)
                .bind(user)
                .bind(role)
                .execute(&mut *tx)
                .await?;
            }
            (false, true) => {
                sqlx::query(
                    "DELETE FROM authz_user_roles WHERE authorizer = $1 AND user_name = $2 AND role_name = $3",
                )
                .bind(authorizer)
                .bind(user)
                .bind(role)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }
}

fn no_user(name: &str) -> MetadataError {
    MetadataError::NotFound(format!("User [{name}] does not exist."))
}

fn no_role(name: &str) -> MetadataError {
    MetadataError::NotFound(format!("Role [{name}] does not exist."))
}

/// Deletes the authorizer's user or role `name` from `table` and its role assignments (the rows
/// of `authz_user_roles` whose `assignment_column` is `name`); false, deleting nothing, when
/// there is no such row. `table` and `assignment_column` are constants of this file.
async fn delete_with_assignments(
    conn: &mut sqlx::AnyConnection,
    table: &str,
    assignment_column: &str,
    authorizer: &str,
    name: &str,
) -> Result<bool> {
    let sql = format!("DELETE FROM {table} WHERE authorizer = $1 AND name = $2");
    let n = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(authorizer)
        .bind(name)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if n == 0 {
        return Ok(false);
    }
    let sql =
        format!("DELETE FROM authz_user_roles WHERE authorizer = $1 AND {assignment_column} = $2");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(authorizer)
        .bind(name)
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// Whether `table` has the row `(owner_column = owner, name = name)`; `table` and
/// `owner_column` are constants of this file, never user input.
async fn row_exists(
    conn: &mut sqlx::AnyConnection,
    table: &str,
    owner_column: &str,
    owner: &str,
    name: &str,
) -> Result<bool> {
    let sql = format!("SELECT 1 AS one FROM {table} WHERE {owner_column} = $1 AND name = $2");
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(owner)
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?
        .is_some())
}

/// The rules entry that cleanup never deletes (the cluster-wide defaults).
const DEFAULT_RULES_NAME: &str = "_default";

const AUDIT_COLUMNS: &str =
    "id, audit_key, audit_type, author, comment, ip, identity, payload, created_ms";

fn decode_audit(row: &AnyRow) -> Result<AuditEntry> {
    Ok(AuditEntry {
        key: row.try_get("audit_key")?,
        audit_type: row.try_get("audit_type")?,
        info: AuditInfo {
            author: row.try_get("author")?,
            identity: row.try_get("identity")?,
            comment: row.try_get("comment")?,
            ip: row.try_get("ip")?,
        },
        payload: row.try_get("payload")?,
        created_ms: row.try_get("created_ms")?,
    })
}

/// Appends an audit entry inside a write transaction (ids assigned under the write lock).
async fn insert_audit(
    conn: &mut sqlx::AnyConnection,
    target: &AuditTarget,
    info: &AuditInfo,
    payload: &str,
    created_ms: i64,
) -> Result<()> {
    let id: i64 = sqlx::query("SELECT COALESCE(MAX(id), 0) AS id FROM audit")
        .fetch_one(&mut *conn)
        .await?
        .try_get("id")?;
    sqlx::query(
        "INSERT INTO audit (id, audit_key, audit_type, author, comment, ip, identity, payload, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(id + 1)
    .bind(&target.key)
    .bind(&target.audit_type)
    .bind(&info.author)
    .bind(&info.comment)
    .bind(&info.ip)
    .bind(&info.identity)
    .bind(payload)
    .bind(created_ms)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

fn decode_rules(row: &AnyRow) -> Result<RulesRecord> {
    let data_source: String = row.try_get("datasource")?;
    let payload: String = row.try_get("payload")?;
    Ok(RulesRecord {
        rules: serde_json::from_str(&payload).map_err(|e| corrupt("rules", &data_source, e))?,
        version: row.try_get("version")?,
        data_source,
    })
}

/// The newest rules row of a datasource with its sequence number.
async fn latest_rules(
    conn: &mut sqlx::AnyConnection,
    data_source: &str,
) -> Result<Option<(i64, RulesRecord)>> {
    let row = sqlx::query(
        "SELECT seq, datasource, version, payload FROM rules WHERE datasource = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(data_source)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| Ok((r.try_get("seq")?, decode_rules(&r)?)))
        .transpose()
}

/// Appends a rules version after `current`; versions are ISO times, strictly increasing.
async fn insert_rules(
    conn: &mut sqlx::AnyConnection,
    data_source: &str,
    current: Option<&(i64, RulesRecord)>,
    payload: &str,
    now: i64,
) -> Result<()> {
    let seq = current.map_or(1, |(s, _)| s + 1);
    let last_ms = current
        .and_then(|(_, r)| dolmen_common::time::parse_iso_instant(&r.version).ok())
        .unwrap_or(i64::MIN);
    let version = dolmen_common::time::format_iso_millis(now.max(last_ms.saturating_add(1)));
    sqlx::query("INSERT INTO rules (datasource, seq, version, payload) VALUES ($1, $2, $3, $4)")
        .bind(data_source)
        .bind(seq)
        .bind(version)
        .bind(payload)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

async fn read_config(
    conn: &mut sqlx::AnyConnection,
    name: &str,
) -> Result<Option<serde_json::Value>> {
    let row = sqlx::query("SELECT payload FROM config WHERE name = $1")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
    match row {
        None => Ok(None),
        Some(r) => {
            let text: String = r.try_get("payload")?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| corrupt("configuration", name, e))
        }
    }
}

fn decode_supervisor(row: &AnyRow) -> Result<SupervisorRecord> {
    let spec_id: String = row.try_get("spec_id")?;
    let payload: String = row.try_get("payload")?;
    Ok(SupervisorRecord {
        payload: serde_json::from_str(&payload).map_err(|e| corrupt("supervisor", &spec_id, e))?,
        created_ms: row.try_get("created_ms")?,
        spec_id,
    })
}

fn offsets_text(o: Option<&StreamOffsets>) -> String {
    match o {
        None => "none".to_string(),
        Some(o) => serde_json::to_string(o).unwrap_or_default(),
    }
}

async fn read_stream_offsets(
    conn: &mut sqlx::AnyConnection,
    data_source: &str,
) -> Result<Option<StreamOffsets>> {
    let row = sqlx::query("SELECT commit_metadata FROM datasource_metadata WHERE datasource = $1")
        .bind(data_source)
        .fetch_optional(&mut *conn)
        .await?;
    match row {
        None => Ok(None),
        Some(r) => {
            let text: String = r.try_get("commit_metadata")?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| corrupt("datasource metadata", data_source, e))
        }
    }
}

async fn write_stream_offsets(
    conn: &mut sqlx::AnyConnection,
    data_source: &str,
    offsets: Option<&StreamOffsets>,
    now: i64,
) -> Result<()> {
    sqlx::query("DELETE FROM datasource_metadata WHERE datasource = $1")
        .bind(data_source)
        .execute(&mut *conn)
        .await?;
    if let Some(o) = offsets {
        let text =
            serde_json::to_string(o).map_err(|e| corrupt("datasource metadata", data_source, e))?;
        sqlx::query(
            "INSERT INTO datasource_metadata (datasource, created_ms, commit_metadata) VALUES ($1, $2, $3)",
        )
        .bind(data_source)
        .bind(now)
        .bind(text)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The stored offsets after committing `commit` over `stored` (see [`StreamCommit`]).
///
/// # Errors
/// [`MetadataError::Conflict`] when the commit's start does not match what is stored, or names
/// another stream.
fn apply_commit(
    data_source: &str,
    stored: Option<&StreamOffsets>,
    commit: &StreamCommit,
) -> Result<StreamOffsets> {
    let mut next = match stored {
        None => StreamOffsets {
            stream: commit.stream.clone(),
            partitions: Default::default(),
        },
        Some(s) => {
            if s.stream != commit.stream {
                return Err(MetadataError::Conflict(format!(
                    "datasource [{data_source}] holds offsets of stream [{}], not [{}]; reset the supervisor to switch streams",
                    s.stream, commit.stream
                )));
            }
            for (p, start) in &commit.start {
                if let Some(have) = s.partitions.get(p)
                    && have != start
                {
                    return Err(MetadataError::Conflict(format!(
                        "stored offsets of datasource [{data_source}] do not match the task's start: partition [{p}] is at [{have}], the task started at [{start}]"
                    )));
                }
            }
            s.clone()
        }
    };
    for (p, end) in &commit.end {
        next.partitions.insert(p.clone(), end.clone());
    }
    Ok(next)
}
