//! The streaming task (`index_logstream` for Kafka, `index_shardstream` for Kinesis): reads
//! assigned partitions of a stream from explicit offsets, makes the rows queryable within a
//! fraction of a second, and publishes segments together with the offsets they cover
//! (exactly-once).
//!
//! One code path serves both kinds: positions are [`PartitionKey`] → [`Offset`] maps and the
//! typed supplier is read through [`Core`] (ADR 0024). A Kinesis shard that closes is read to
//! its end, where its position becomes `EOS`; a task whose partitions are all at `EOS` publishes
//! and finishes (Druid's task does the same).
//!
//! Druid's `SeekableStreamIndexTaskRunner`, in this shape:
//! - **Read.** A [`RecordSupplier`] is assigned the task's partitions at its start offsets.
//!   Record values are appended to a local file of the current *hydrant* (one value per line),
//!   and the task's position per partition advances past each record.
//! - **Queryable.** Every [`HYDRANT_PERIOD`] (and every `maxRowsInMemory` rows) the records of
//!   the current hydrant are built into a Parquet file by the batch builder (the same
//!   `inputFormat`, `timestampSpec`, `dimensionsSpec`, `metricsSpec`, `transformSpec` code as
//!   batch ingestion, rolled up) and registered with the segment view, which adds it to queries
//!   of the datasource (Druid's `FireHydrant` of a `Sink`). The record files are the task's
//!   persisted state.
//! - **Publish (handoff).** When the supervisor sets end offsets (task duration over, handoff
//!   requested, suspend) and the task has read up to them, or when `maxRowsPerSegment`,
//!   `maxTotalRows` or `intermediateHandoffPeriod` call for a checkpoint (one replica only), all
//!   records since the last publish are built into segments in one batch build (so rollup is
//!   perfect across hydrants), pushed to deep storage, and published with
//!   [`StreamCommit`]{start, end}: the metadata store compare-and-swaps the datasource's stored
//!   offsets in the same transaction. The segment view swaps the hydrants for the segments
//!   atomically. A replica whose twin published the same range first finds the stored offsets
//!   already at its end and publishes nothing.
//! - **Crash.** Nothing is acknowledged before the commit: a task that dies is marked FAILED and
//!   the supervisor starts a new one from the stored offsets; it re-reads what was not published.
//!
//! Rows outside the accepted time range (`minimumMessageTime`/`maximumMessageTime`, from the
//! supervisor's message rejection periods) are counted as thrown away, as in Druid.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dolmen_common::Interval;
use dolmen_ingest::IngestError;
use dolmen_ingest::RowStats;
use dolmen_metadata::{MetadataStore, PublishMode, PublishRequest, StreamCommit, StreamOffsets};
use dolmen_storage::{DeepStorage, Hydrant, SegmentView};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::seekable::{
    Core, CoreOffset, CorePartition, NO_END_SEQUENCE_NUMBER, Offset, PartitionKey,
    offset_from_json, offsets_object, partition_from_str,
};
use crate::spec::{StreamKind, SupervisorSpec};
use crate::supplier::{RecordSupplier, StreamPartition, SupplierError};

/// How often a reading task makes what it read since the last time queryable, at most (ms).
pub const HYDRANT_PERIOD: Duration = Duration::from_millis(200);

/// How long a finished task's hydrant files stay for queries already planned against them.
const HYDRANT_GRACE: Duration = Duration::from_secs(60);

/// Longest wait for the previous task of a partition to publish before this task's commit
/// gives up, when the supervisor gave no completion timeout.
const DEFAULT_PUBLISH_WAIT: Duration = Duration::from_secs(1800);

/// Task type name of `logstream` (Kafka) tasks.
pub const TASK_TYPE: &str = "index_logstream";

/// Task type name of `shardstream` (Kinesis) tasks.
pub const SHARDSTREAM_TASK_TYPE: &str = "index_shardstream";

/// The task type name of a supervisor kind's tasks.
pub fn task_type(kind: StreamKind) -> &'static str {
    match kind {
        StreamKind::Logstream => TASK_TYPE,
        StreamKind::Shardstream => SHARDSTREAM_TASK_TYPE,
    }
}

/// The payload of a streaming task (the shape of Druid's `KafkaIndexTask` and
/// `KinesisIndexTask`).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTaskSpec {
    /// Task id.
    pub id: String,
    /// The supervisor that created the task.
    pub supervisor_id: String,
    /// Its task group within the supervisor.
    pub task_group_id: u32,
    /// The supervisor spec the task reads with.
    pub spec: SupervisorSpec,
    /// Partition to first offset to read.
    pub start_offsets: BTreeMap<PartitionKey, Offset>,
    /// Partition to the offset to stop before, when known at creation (a task created to
    /// replace a failed replica of a publishing group); usually set later by the supervisor.
    pub end_offsets: Option<BTreeMap<PartitionKey, Offset>>,
    /// Rows before this instant (ms) are thrown away.
    pub minimum_message_time: Option<i64>,
    /// Rows at or after this instant (ms) are thrown away.
    pub maximum_message_time: Option<i64>,
}

/// The unbounded end offset Druid writes for a Kafka task still reading (`Long.MAX_VALUE`).
const UNBOUNDED: i64 = i64::MAX;

fn unbounded(kind: StreamKind) -> Value {
    match kind {
        StreamKind::Logstream => json!(UNBOUNDED),
        StreamKind::Shardstream => json!(NO_END_SEQUENCE_NUMBER),
    }
}

impl StreamTaskSpec {
    /// The sink id of the task's generation in its group: replicas (same group, same start
    /// offsets) share it, so queries show one of them; the next generation of the group has
    /// another.
    pub fn sink_id(&self) -> String {
        let starts: Vec<String> = self
            .start_offsets
            .iter()
            .map(|(p, o)| format!("{p}:{o}"))
            .collect();
        format!(
            "{}/{}/{}",
            self.supervisor_id,
            self.task_group_id,
            starts.join(",")
        )
    }

    /// The task payload as stored and served (`GET /task/{id}`).
    pub fn to_json(&self) -> Value {
        let rb = self.spec.read_back();
        let kind = self.spec.kind;
        let map = offsets_object;
        let end = match &self.end_offsets {
            Some(e) => map(e),
            None => Value::Object(
                self.start_offsets
                    .keys()
                    .map(|p| (p.to_string(), unbounded(kind)))
                    .collect(),
            ),
        };
        let task_type = task_type(kind);
        // Kinesis offsets are written as the last record read (see `crate::seekable`): every
        // start is exclusive, as Druid marks with `exclusivePartitions`.
        let exclusive: Vec<String> = match kind {
            StreamKind::Logstream => Vec::new(),
            StreamKind::Shardstream => self.start_offsets.keys().map(ToString::to_string).collect(),
        };
        let mut io = rb["ioConfig"].clone();
        if let Some(o) = io.as_object_mut() {
            o.insert("taskGroupId".into(), json!(self.task_group_id));
            o.insert(
                "baseSequenceName".into(),
                json!(format!("{}_{}", self.supervisor_id, self.task_group_id)),
            );
            let mut start = json!({"type": "start", "stream": self.spec.io.topic,
                       "partitionSequenceNumberMap": map(&self.start_offsets),
                       "exclusivePartitions": exclusive});
            let mut end_v = json!({"type": "end", "stream": self.spec.io.topic,
                       "partitionSequenceNumberMap": end});
            if kind == StreamKind::Logstream {
                // Druid's Kafka forms also carry the older `topic`/`partitionOffsetMap` names.
                start["topic"] = json!(self.spec.io.topic);
                start["partitionOffsetMap"] = map(&self.start_offsets);
                end_v["topic"] = json!(self.spec.io.topic);
                end_v["partitionOffsetMap"] = end;
            }
            o.insert("startSequenceNumbers".into(), start);
            o.insert("endSequenceNumbers".into(), end_v);
            o.insert("useTransaction".into(), json!(true));
            o.insert(
                "minimumMessageTime".into(),
                json!(
                    self.minimum_message_time
                        .map(dolmen_common::time::format_iso_millis)
                ),
            );
            o.insert(
                "maximumMessageTime".into(),
                json!(
                    self.maximum_message_time
                        .map(dolmen_common::time::format_iso_millis)
                ),
            );
        }
        json!({
            "type": task_type,
            "id": self.id,
            "groupId": format!("{task_type}_{}", self.supervisor_id),
            "resource": {"availabilityGroup": format!("{task_type}_{}_{}", self.supervisor_id, self.task_group_id), "requiredCapacity": 1},
            "dataSource": self.spec.data_source,
            "supervisorId": self.supervisor_id,
            "dataSchema": rb["dataSchema"],
            "tuningConfig": rb["tuningConfig"],
            "ioConfig": io,
            "supervisorSpec": rb,
            "context": {"checkpoints": null},
        })
    }

    /// Parses a stored payload (see [`StreamTaskSpec::to_json`]).
    ///
    /// # Errors
    /// A message naming the field when the payload is not a streaming task of its
    /// supervisor spec's kind.
    pub fn from_json(v: &Value) -> Result<StreamTaskSpec, String> {
        let field = |name: &str| v.get(name).ok_or_else(|| format!("{name}: missing"));
        let spec = SupervisorSpec::parse(field("supervisorSpec")?)
            .map_err(|e| format!("supervisorSpec: {e}"))?;
        let kind = spec.kind;
        let io = field("ioConfig")?;
        let offsets = |path: &str| -> Result<BTreeMap<PartitionKey, Offset>, String> {
            let m = io
                .pointer(path)
                .and_then(Value::as_object)
                .ok_or_else(|| format!("ioConfig{}: missing", path.replace('/', ".")))?;
            m.iter()
                .filter(|(_, o)| **o != unbounded(kind))
                .map(|(p, o)| {
                    Ok((
                        partition_from_str(kind, p).map_err(|e| format!("ioConfig{path}: {e}"))?,
                        offset_from_json(kind, o)
                            .map_err(|e| format!("ioConfig{path}.{p}: {e}"))?,
                    ))
                })
                .collect()
        };
        let start = offsets("/startSequenceNumbers/partitionSequenceNumberMap")?;
        let end = offsets("/endSequenceNumbers/partitionSequenceNumberMap")?;
        let end = if end.is_empty() { None } else { Some(end) };
        let time = |name: &str| -> Result<Option<i64>, String> {
            match io.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => dolmen_common::time::parse_iso_instant(s)
                    .map(Some)
                    .map_err(|e| format!("ioConfig.{name}: {e}")),
                Some(x) => Err(format!("ioConfig.{name}: bad instant {x}")),
            }
        };
        Ok(StreamTaskSpec {
            id: field("id")?
                .as_str()
                .ok_or("id: must be a string")?
                .to_string(),
            supervisor_id: field("supervisorId")?
                .as_str()
                .ok_or("supervisorId: must be a string")?
                .to_string(),
            task_group_id: io
                .get("taskGroupId")
                .and_then(Value::as_u64)
                .and_then(|g| u32::try_from(g).ok())
                .ok_or("ioConfig.taskGroupId: missing")?,
            spec,
            start_offsets: start,
            end_offsets: end,
            minimum_message_time: time("minimumMessageTime")?,
            maximum_message_time: time("maximumMessageTime")?,
        })
    }
}

/// What the supervisor and the APIs see of a running streaming task, and how they steer it
/// (Druid's task chat endpoints: `/offsets/current`, `/offsets/end`, `/pause`, `/rowStats`).
#[derive(Debug)]
pub struct TaskControl {
    inner: Mutex<ControlState>,
    /// Row counters since the task started (hydrant builds; the handoff build does not count
    /// rows again).
    pub stats: Arc<RowStats>,
    started_ms: i64,
}

#[derive(Debug, Default)]
struct ControlState {
    current: BTreeMap<PartitionKey, Offset>,
    end: Option<BTreeMap<PartitionKey, Offset>>,
    millis_behind: BTreeMap<PartitionKey, i64>,
    phase: &'static str,
    published_segments: u64,
    published_rows: u64,
    persists: u64,
    rows_persisted: u64,
    error: Option<String>,
}

impl TaskControl {
    /// Control of a task starting at `start`.
    pub fn new(start: &BTreeMap<PartitionKey, Offset>) -> TaskControl {
        TaskControl {
            inner: Mutex::new(ControlState {
                current: start.clone(),
                phase: "READING",
                ..Default::default()
            }),
            stats: Arc::new(RowStats::new()),
            started_ms: dolmen_common::time::now_millis(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ControlState> {
        self.inner.lock().expect("task control lock")
    }

    /// Partition to the next offset to read.
    pub fn current_offsets(&self) -> BTreeMap<PartitionKey, Offset> {
        self.lock().current.clone()
    }

    /// The end offsets, once set.
    pub fn end_offsets(&self) -> Option<BTreeMap<PartitionKey, Offset>> {
        self.lock().end.clone()
    }

    /// Per partition, how far behind the stream's tip the last read was, ms (Kinesis's
    /// `millisBehindLatest`); empty for streams that do not report it (Kafka).
    pub fn millis_behind_latest(&self) -> BTreeMap<PartitionKey, i64> {
        self.lock().millis_behind.clone()
    }

    /// Tells the task to stop reading each partition before `end` (offsets below the task's
    /// position are raised to it: a task never un-reads), then publish and finish. Returns the
    /// end offsets in effect.
    pub fn set_end_offsets(
        &self,
        end: &BTreeMap<PartitionKey, Offset>,
    ) -> BTreeMap<PartitionKey, Offset> {
        let mut s = self.lock();
        let mut e = BTreeMap::new();
        for (p, cur) in &s.current {
            e.insert(
                p.clone(),
                end.get(p)
                    .cloned()
                    .unwrap_or_else(|| cur.clone())
                    .max(cur.clone()),
            );
        }
        s.end = Some(e.clone());
        e
    }

    /// `READING`, `PUBLISHING` or `DONE`.
    pub fn phase(&self) -> &'static str {
        self.lock().phase
    }

    /// When the task started, ms.
    pub fn started_ms(&self) -> i64 {
        self.started_ms
    }

    /// Segments and rows published so far.
    pub fn published(&self) -> (u64, u64) {
        let s = self.lock();
        (s.published_segments, s.published_rows)
    }

    /// Hydrants built from newly read records so far (Druid's intermediate persists; merges of
    /// hydrants are not counted) and the rows written to them (after rollup): what
    /// `ingest/persists/count` and `ingest/rows/output` count.
    pub fn persisted(&self) -> (u64, u64) {
        let s = self.lock();
        (s.persists, s.rows_persisted)
    }

    /// The error that ended the task, if any.
    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    fn set_phase(&self, phase: &'static str) {
        self.lock().phase = phase;
    }
}

/// What a streaming task needs from its host.
#[derive(Debug, Clone)]
pub struct StreamTaskEnv {
    /// Task id.
    pub task_id: String,
    /// Scratch directory (removed at the end).
    pub work_dir: PathBuf,
    /// Deep storage.
    pub deep: DeepStorage,
    /// Metadata store (segments and offsets).
    pub metadata: Arc<dyn MetadataStore>,
    /// The segment view queries read (hydrants, handoff).
    pub view: Arc<SegmentView>,
    /// Cancelled when the task is shut down: it stops without publishing.
    pub cancel: CancellationToken,
    /// The task's control handle.
    pub control: Arc<TaskControl>,
    /// Version for time chunks the task creates (from its lock).
    pub lock_version: String,
    /// The runtime to run async calls on from the task's blocking thread.
    pub runtime: tokio::runtime::Handle,
}

/// The records of one hydrant: a file of record values, one per line.
#[derive(Debug)]
struct RecordFile {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    records: u64,
}

impl RecordFile {
    fn create(path: PathBuf) -> Result<RecordFile, IngestError> {
        let f = std::fs::File::create(&path).map_err(|e| runtime_err(&path, e))?;
        Ok(RecordFile {
            out: std::io::BufWriter::with_capacity(256 * 1024, f),
            path,
            records: 0,
        })
    }

    fn append(&mut self, value: &[u8]) -> Result<(), IngestError> {
        // One record per line: a record's own line breaks would split it, so they become
        // spaces (JSON allows any whitespace between tokens; delimited formats take one line
        // per record anyway).
        let trimmed = value.strip_suffix(b"\n").unwrap_or(value);
        let r = if trimmed.contains(&b'\n') {
            let v: Vec<u8> = trimmed
                .iter()
                .map(|b| if *b == b'\n' || *b == b'\r' { b' ' } else { *b })
                .collect();
            self.out.write_all(&v)
        } else {
            self.out.write_all(trimmed)
        };
        r.and_then(|()| self.out.write_all(b"\n"))
            .map_err(|e| runtime_err(&self.path, e))?;
        self.records += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<PathBuf, IngestError> {
        self.out.flush().map_err(|e| runtime_err(&self.path, e))?;
        Ok(self.path)
    }
}

fn runtime_err(path: &Path, e: impl std::fmt::Display) -> IngestError {
    IngestError::Runtime(format!("{}: {e}", path.display()))
}

/// Hydrants merged at once: every [`MERGE_FANOUT`] hydrants of one size become one of the
/// next size (a log-structured merge), so a task reading for an hour keeps a few dozen hydrant
/// files for queries to open, not thousands.
const MERGE_FANOUT: usize = 8;

/// Hydrants of the current publish period whose record files were built together.
#[derive(Debug)]
struct Run {
    first_sequence: u64,
    last_sequence: u64,
    files: Vec<PathBuf>,
}

/// The state of the rows read since the last publish.
#[derive(Debug, Default)]
struct Pending {
    /// Finished record files (their hydrants are registered).
    files: Vec<PathBuf>,
    /// Rows in them (records, before rollup).
    records: u64,
    /// Offsets at the last publish (the next commit's start).
    start: BTreeMap<PartitionKey, Offset>,
    /// Sequence number of the last hydrant built.
    last_sequence: u64,
    /// When the last publish happened.
    since: Option<Instant>,
    /// Registered hydrants by merge level (see [`MERGE_FANOUT`]).
    levels: Vec<Vec<Run>>,
}

/// Runs a streaming task to the end on the calling (blocking) thread with `supplier` (Kafka's,
/// Kinesis's or the in-memory one; it is read through [`Core`]); returns the number of segments
/// published.
///
/// # Errors
/// [`IngestError::Canceled`] when shut down (nothing more is published); a supplier error (an
/// offset out of range without `resetOffsetAutomatically`, an unreachable broker), a build
/// error, or a publish whose start offsets do not match the stored ones: [`IngestError::Runtime`].
pub fn run_stream_task<R>(
    env: &StreamTaskEnv,
    task: &StreamTaskSpec,
    supplier: R,
) -> Result<u64, IngestError>
where
    R: RecordSupplier,
    R::PartitionId: CorePartition,
    R::SequenceNumber: CoreOffset,
{
    std::fs::create_dir_all(&env.work_dir).map_err(|e| runtime_err(&env.work_dir, e))?;
    let mut supplier = Core(supplier);
    let result = run_inner(env, task, &mut supplier);
    let ds = &task.spec.data_source;
    env.view.drop_task_hydrants(ds, &env.task_id);
    if let Err(e) = &result {
        env.control.lock().error = Some(e.to_string());
    }
    env.control.set_phase("DONE");
    // Queries that planned against a snapshot listing this task's hydrants may still open their
    // files: remove the work directory after a grace period (the overlord clears leftovers at
    // start-up).
    let dir = env.work_dir.clone();
    env.runtime.spawn(async move {
        tokio::time::sleep(HYDRANT_GRACE).await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
    });
    result
}

fn supplier_err<P: std::fmt::Display, S: std::fmt::Display>(e: SupplierError<P, S>) -> IngestError {
    IngestError::Runtime(e.to_string())
}

fn run_inner<R>(
    env: &StreamTaskEnv,
    task: &StreamTaskSpec,
    supplier: &mut R,
) -> Result<u64, IngestError>
where
    R: RecordSupplier<PartitionId = PartitionKey, SequenceNumber = Offset>,
{
    let topic = &task.spec.io.topic;
    // A fully read closed shard (`EOS`) has nothing left: it is not read (the supervisor does
    // not assign such shards; a task given one keeps it at `EOS`).
    let parts: Vec<StreamPartition<PartitionKey>> = task
        .start_offsets
        .iter()
        .filter(|(_, o)| !o.is_end_of_partition())
        .map(|(p, _)| StreamPartition::new(topic.clone(), p.clone()))
        .collect();
    supplier.assign(&parts).map_err(supplier_err)?;
    for sp in &parts {
        let start = task.start_offsets[&sp.partition].clone();
        match supplier.seek(sp, start.clone()) {
            Ok(()) => {}
            Err(SupplierError::OffsetOutOfRange {
                earliest, latest, ..
            }) if task.spec.tuning.reset_offset_automatically => {
                // Druid's resetOffsetAutomatically: continue from the earliest retained offset
                // (or the latest, when the stored one lies beyond the end). The commit still
                // starts at the stored offset, so the skipped range is recorded as consumed.
                let to = if start < earliest { earliest } else { latest };
                tracing::warn!(
                    partition = %sp.partition,
                    from = %start,
                    to = %to,
                    "offset out of range; resetting automatically"
                );
                supplier.seek(sp, to.clone()).map_err(supplier_err)?;
                env.control.lock().current.insert(sp.partition.clone(), to);
            }
            Err(e) => {
                return Err(IngestError::Runtime(format!(
                    "{e}; set tuningConfig.resetOffsetAutomatically or reset the supervisor's offsets"
                )));
            }
        }
    }
    if let Some(end) = &task.end_offsets {
        env.control.set_end_offsets(end);
    }
    let accepted = accepted_interval(task);
    let poll_timeout = Duration::from_millis(task.spec.io.poll_timeout_ms.max(1) as u64);
    let mut pending = Pending {
        start: task.start_offsets.clone(),
        since: Some(Instant::now()),
        ..Default::default()
    };
    let mut published = 0u64;
    let mut file_seq = 0u64;
    let mut current_file: Option<RecordFile> = None;
    let mut last_hydrant = Instant::now();
    let max_rows_in_memory = task.spec.tuning.max_rows_in_memory;
    let checkpoints_allowed = task.spec.io.replicas == 1;
    loop {
        if env.cancel.is_cancelled() {
            return Err(IngestError::Canceled);
        }
        let end = env.control.end_offsets();
        let current = env.control.current_offsets();
        if let Some(end) = &end
            && end
                .iter()
                .all(|(p, e)| current.get(p).is_some_and(|c| c >= e))
        {
            break;
        }
        // Every partition closed and read to its end (Kinesis shards after a reshard): nothing
        // more will come, so publish and finish as Druid's task does.
        if !current.is_empty() && current.values().all(Offset::is_end_of_partition) {
            tracing::info!("every shard is closed and fully read; publishing");
            break;
        }
        let records = match supplier.poll(poll_timeout) {
            Ok(r) => r,
            Err(SupplierError::OffsetOutOfRange {
                partition,
                earliest,
                ..
            }) if task.spec.tuning.reset_offset_automatically => {
                let sp = StreamPartition::new(topic.clone(), partition.clone());
                tracing::warn!(
                    partition = %partition,
                    to = %earliest,
                    "offset out of range while reading; resetting automatically"
                );
                supplier.seek(&sp, earliest.clone()).map_err(supplier_err)?;
                env.control.lock().current.insert(partition, earliest);
                continue;
            }
            Err(e) => return Err(supplier_err(e)),
        };
        if records.is_empty() {
            // Past the last record of a partition the position can stop short of an end
            // offset that points past a transaction marker: nothing more will come below it.
            if let Some(end) = &end {
                for (p, e) in end {
                    let sp = StreamPartition::new(topic.clone(), p.clone());
                    if current.get(p).is_some_and(|cur| cur < e)
                        && let Ok(latest) = supplier.latest_offset(&sp)
                        && latest <= *e
                        && supplier.position(&sp).is_some_and(|pos| pos >= latest)
                    {
                        env.control.lock().current.insert(p.clone(), e.clone());
                    }
                }
            }
        }
        for r in records {
            // The end offsets may have been set while the poll waited: decide against the
            // current ones, and advance the position in the same critical section, so the
            // supervisor's end (raised to the position) and what this task keeps never
            // overlap with the next task's start.
            {
                let mut s = env.control.lock();
                if s.end
                    .as_ref()
                    .and_then(|e| e.get(&r.partition))
                    .is_some_and(|e| r.offset >= *e)
                {
                    continue;
                }
                s.current.insert(r.partition.clone(), r.offset.successor());
            }
            if let Some(v) = &r.value {
                let file = match &mut current_file {
                    Some(f) => f,
                    None => {
                        file_seq += 1;
                        current_file = Some(RecordFile::create(
                            env.work_dir.join(format!("records-{file_seq:06}.json")),
                        )?);
                        current_file.as_mut().expect("just created")
                    }
                };
                file.append(v)?;
            }
        }
        // After the records: a shard read to its end moves to `EOS` (unless an end offset stops
        // the task before it), and the reported time lag follows the last fetch.
        for sp in &parts {
            let pos = supplier.position(sp);
            let behind = supplier.millis_behind_latest(sp);
            let mut s = env.control.lock();
            if let Some(pos) = pos.filter(Offset::is_end_of_partition) {
                let stops_before = s
                    .end
                    .as_ref()
                    .and_then(|e| e.get(&sp.partition))
                    .is_some_and(|e| *e < pos);
                if !stops_before {
                    s.current.insert(sp.partition.clone(), pos);
                }
            }
            if let Some(ms) = behind {
                s.millis_behind.insert(sp.partition.clone(), ms);
            }
        }
        let due = current_file.as_ref().is_some_and(|f| {
            f.records >= max_rows_in_memory || last_hydrant.elapsed() >= HYDRANT_PERIOD
        });
        if due {
            let file = current_file.take().expect("due implies a file");
            pending.records += file.records;
            let path = file.finish()?;
            pending.last_sequence += 1;
            let seq = pending.last_sequence;
            build_hydrant(env, task, std::slice::from_ref(&path), seq, None, accepted)?;
            pending.files.push(path.clone());
            add_run(
                env,
                task,
                &mut pending.levels,
                Run {
                    first_sequence: seq,
                    last_sequence: seq,
                    files: vec![path],
                },
                accepted,
            )?;
            last_hydrant = Instant::now();
        }
        // Checkpoints (one replica only: replicas must end at offsets the supervisor chose).
        if checkpoints_allowed && current_file.is_none() && !pending.files.is_empty() {
            let t = &task.spec.tuning;
            let by_rows = pending.records >= t.max_rows_per_segment
                || t.max_total_rows.is_some_and(|m| pending.records >= m);
            let by_time = pending.since.is_some_and(|s| {
                s.elapsed().as_millis() as i64 >= t.intermediate_handoff_period_ms
            });
            if by_rows || by_time {
                published += publish(env, task, &mut pending, accepted)?;
            }
        }
        if current_file.is_none() && pending.files.is_empty() {
            last_hydrant = Instant::now();
        }
    }
    if let Some(file) = current_file.take() {
        pending.records += file.records;
        let path = file.finish()?;
        pending.files.push(path);
    }
    env.control.set_phase("PUBLISHING");
    pending.last_sequence = u64::MAX;
    published += publish(env, task, &mut pending, accepted)?;
    Ok(published)
}

/// The time range rows must fall in (`minimumMessageTime` inclusive to `maximumMessageTime`
/// exclusive); `None` when unrestricted.
fn accepted_interval(task: &StreamTaskSpec) -> Option<Interval> {
    if task.minimum_message_time.is_none() && task.maximum_message_time.is_none() {
        return None;
    }
    Some(Interval {
        start: task
            .minimum_message_time
            .unwrap_or(dolmen_common::time::MIN_INSTANT),
        end: task
            .maximum_message_time
            .unwrap_or(dolmen_common::time::MAX_INSTANT),
    })
}

/// Adds a hydrant run at level 0 and merges full levels upwards.
fn add_run(
    env: &StreamTaskEnv,
    task: &StreamTaskSpec,
    levels: &mut Vec<Vec<Run>>,
    run: Run,
    accepted: Option<Interval>,
) -> Result<(), IngestError> {
    if levels.is_empty() {
        levels.push(Vec::new());
    }
    levels[0].push(run);
    let mut level = 0;
    while levels[level].len() >= MERGE_FANOUT {
        let runs = std::mem::take(&mut levels[level]);
        let merged = Run {
            first_sequence: runs[0].first_sequence,
            last_sequence: runs[runs.len() - 1].last_sequence,
            files: runs.into_iter().flat_map(|r| r.files).collect(),
        };
        build_hydrant(
            env,
            task,
            &merged.files,
            merged.last_sequence,
            Some(merged.first_sequence),
            accepted,
        )?;
        if levels.len() == level + 1 {
            levels.push(Vec::new());
        }
        levels[level + 1].push(merged);
        level += 1;
    }
    Ok(())
}

/// Builds record files into hydrant Parquet files and registers them with the view: new ones
/// (`replaces` `None`), or as the merge of the hydrants `replaces..=sequence` (their rows are
/// not counted again).
fn build_hydrant(
    env: &StreamTaskEnv,
    task: &StreamTaskSpec,
    records: &[PathBuf],
    sequence: u64,
    replaces: Option<u64>,
    accepted: Option<Interval>,
) -> Result<(), IngestError> {
    let intervals: Vec<Interval> = accepted.into_iter().collect();
    let spec = task
        .spec
        .batch_spec(records, &intervals)
        .map_err(|e| IngestError::InvalidSpec(e.0))?;
    let quiet = RowStats::new();
    let (dir, stats) = match replaces {
        None => (
            env.work_dir.join(format!("hydrant-{sequence:06}")),
            env.control.stats.as_ref(),
        ),
        // Rows were counted when their first hydrants were built.
        Some(first) => (
            env.work_dir
                .join(format!("merged-{first:06}-{sequence:06}")),
            &quiet,
        ),
    };
    let built = dolmen_ingest::task::build_segment_files(&spec, &dir, stats, &env.cancel)?;
    if replaces.is_none() {
        let mut s = env.control.lock();
        s.persists += 1;
        s.rows_persisted += built.iter().map(|b| b.num_rows).sum::<u64>();
    }
    let hydrants: Vec<Hydrant> = built
        .into_iter()
        .map(|b| Hydrant {
            interval: b.interval,
            path: b.path,
            num_rows: b.num_rows,
            size: b.size,
            columns: b.schema.columns,
            sequence,
        })
        .collect();
    match replaces {
        Some(first) => env.view.replace_hydrants(
            &task.spec.data_source,
            &task.sink_id(),
            &env.task_id,
            first..=sequence,
            hydrants,
        ),
        None if !hydrants.is_empty() => env.view.add_hydrants(
            &task.spec.data_source,
            &task.sink_id(),
            &env.task_id,
            hydrants,
        ),
        None => {}
    }
    Ok(())
}

/// Builds every record file since the last publish into segments, pushes them and publishes
/// them with the offsets they cover; returns the number of segments published.
fn publish(
    env: &StreamTaskEnv,
    task: &StreamTaskSpec,
    pending: &mut Pending,
    accepted: Option<Interval>,
) -> Result<u64, IngestError> {
    let end = env.control.current_offsets();
    let ds = &task.spec.data_source;
    let built = if pending.files.is_empty() {
        Vec::new()
    } else {
        let intervals: Vec<Interval> = accepted.into_iter().collect();
        let spec = task
            .spec
            .batch_spec(&pending.files, &intervals)
            .map_err(|e| IngestError::InvalidSpec(e.0))?;
        let dir = env
            .work_dir
            .join(format!("publish-{:06}", pending.files.len()));
        // Rows were counted when their hydrants were built.
        let quiet = RowStats::new();
        dolmen_ingest::task::build_segment_files(&spec, &dir, &quiet, &env.cancel)?
    };
    if env.cancel.is_cancelled() {
        return Err(IngestError::Canceled);
    }
    let commit = StreamCommit {
        stream: task.spec.io.topic.clone(),
        start: offsets_json(&pending.start),
        end: offsets_json(&end),
    };
    let starts = pending
        .start
        .values()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("-");
    // Kinesis sequence numbers run to 56 digits a shard: long start lists become a hash.
    let name = if starts.len() <= 64 {
        format!("{}_{starts}", env.task_id)
    } else {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in starts.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{}_{h:016x}", env.task_id)
    };
    let rows: u64 = built.iter().map(|b| b.num_rows).sum();
    let deadline = Instant::now()
        + if task.spec.io.completion_timeout_ms > 0 {
            Duration::from_millis(task.spec.io.completion_timeout_ms as u64)
        } else {
            DEFAULT_PUBLISH_WAIT
        };
    let n = env.runtime.block_on(async {
        let pushed = dolmen_ingest::task::push_segment_files(&env.deep, ds, &name, &built).await?;
        loop {
            let req = PublishRequest {
                data_source: ds.clone(),
                segments: pushed.clone(),
                mode: PublishMode::Append {
                    version_if_new: env.lock_version.clone(),
                },
                drop_existing: vec![],
                commit: Some(commit.clone()),
                last_compaction_state: None,
            };
            let metadata = Arc::clone(&env.metadata);
            let outcome = env
                .view
                .handoff(ds, &task.sink_id(), pending.last_sequence, async move {
                    metadata
                        .publish_segments(req)
                        .await
                        .map_err(dolmen_storage::StorageError::from)
                })
                .await;
            match outcome {
                Ok(segments) => return Ok(segments.len() as u64),
                Err(e) => {
                    let stored = env.metadata.stream_offsets(ds).await.ok().flatten();
                    match commit_state(task.spec.kind, stored.as_ref(), &commit) {
                        CommitState::AlreadyCommitted => {
                            // A replica published this range first (its handoff removed the
                            // sink's hydrants, ours included).
                            dolmen_ingest::task::delete_pushed(&env.deep, &pushed).await;
                            tracing::info!("a replica already published these offsets");
                            return Ok(0);
                        }
                        CommitState::Behind
                            if Instant::now() < deadline && !env.cancel.is_cancelled() =>
                        {
                            // The previous task of these partitions is still publishing.
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        _ => {
                            dolmen_ingest::task::delete_pushed(&env.deep, &pushed).await;
                            return Err(IngestError::Runtime(format!(
                                "cannot publish segments with offsets {}: {e}",
                                serde_json::to_string(&commit.end).unwrap_or_default()
                            )));
                        }
                    }
                }
            }
        }
    })?;
    {
        let mut s = env.control.lock();
        s.published_segments += n;
        s.published_rows += if n > 0 { rows } else { 0 };
    }
    tracing::info!(segments = n, rows, start = ?pending.start, end = ?end, "published segments with their offsets");
    for f in pending.files.drain(..) {
        let _ = std::fs::remove_file(f);
    }
    pending.records = 0;
    pending.levels.clear();
    pending.start = end;
    pending.since = Some(Instant::now());
    Ok(n)
}

/// Partition offsets as the metadata store keeps them: Kafka partition numbers to JSON
/// numbers, Kinesis shard ids to sequence strings in Druid's form (see [`crate::seekable`]).
pub fn offsets_json(m: &BTreeMap<PartitionKey, Offset>) -> BTreeMap<String, Value> {
    crate::seekable::offsets_to_json(m)
}

/// Partition offsets from the metadata store's form; entries that are not `kind`'s are
/// skipped.
pub fn offsets_from_json(kind: StreamKind, m: &StreamOffsets) -> BTreeMap<PartitionKey, Offset> {
    crate::seekable::offsets_from_json(kind, &m.partitions)
}

#[derive(Debug, PartialEq, Eq)]
enum CommitState {
    /// The stored offsets already hold this commit's end for all its partitions.
    AlreadyCommitted,
    /// Some partition is stored before this commit's start: an earlier task has not committed.
    Behind,
    /// Anything else: a conflict no waiting resolves.
    Conflict,
}

fn commit_state(
    kind: StreamKind,
    stored: Option<&StreamOffsets>,
    commit: &StreamCommit,
) -> CommitState {
    let Some(stored) = stored else {
        return CommitState::Conflict;
    };
    if stored.stream != commit.stream {
        return CommitState::Conflict;
    }
    if !commit.end.is_empty()
        && commit
            .end
            .iter()
            .all(|(p, e)| stored.partitions.get(p) == Some(e))
        && commit.start != commit.end
    {
        return CommitState::AlreadyCommitted;
    }
    let behind = commit.start.iter().any(|(p, s)| {
        let have = stored
            .partitions
            .get(p)
            .and_then(|v| offset_from_json(kind, v).ok());
        match (have, offset_from_json(kind, s).ok()) {
            (Some(have), Some(want)) => have < want,
            _ => false,
        }
    });
    if behind {
        CommitState::Behind
    } else {
        CommitState::Conflict
    }
}

#[cfg(test)]
mod tests;
