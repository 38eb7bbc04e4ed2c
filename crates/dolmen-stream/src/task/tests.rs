//! Streaming task tests over an in-memory stream, the real SQLite metadata store, local deep
//! storage and the segment view.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dolmen_metadata::{MetadataStore, SqlMetadataStore, StreamOffsets};
use dolmen_storage::{DeepStorage, SegmentView};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::memory::MemoryStreams;
use crate::supplier::{RecordOf, SupplierResult};

struct Fixture {
    _dir: tempfile::TempDir,
    metadata: Arc<dyn MetadataStore>,
    deep: DeepStorage,
    view: Arc<SegmentView>,
    root: PathBuf,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let metadata: Arc<dyn MetadataStore> = Arc::new(
        SqlMetadataStore::open_sqlite(&root.join("m.db"))
            .await
            .unwrap(),
    );
    let deep = DeepStorage::local(&root.join("deep")).unwrap();
    let view = Arc::new(SegmentView::new(Arc::clone(&metadata)));
    Fixture {
        _dir: dir,
        metadata,
        deep,
        view,
        root,
    }
}

fn spec(replicas: u32) -> SupervisorSpec {
    SupervisorSpec::parse(&json!({
        "type": "logstream",
        "spec": {
            "dataSchema": {
                "dataSource": "rt",
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["k"]},
                "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "v", "fieldName": "v"}],
                "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "NONE", "rollup": false}
            },
            "ioConfig": {
                "topic": "t", "inputFormat": {"type": "json"}, "replicas": replicas,
                "consumerProperties": {"bootstrap.servers": "memory:9092"}, "pollTimeout": 20
            }
        }
    }))
    .unwrap()
}

/// Kafka-typed offsets in the core's form.
fn om(o: &[(i32, i64)]) -> BTreeMap<PartitionKey, Offset> {
    o.iter()
        .map(|(p, o)| (PartitionKey::Kafka(*p), Offset::Kafka(*o)))
        .collect()
}

fn task(id: &str, spec: SupervisorSpec, start: &[(i32, i64)]) -> StreamTaskSpec {
    StreamTaskSpec {
        id: id.into(),
        supervisor_id: "rt".into(),
        task_group_id: 0,
        spec,
        start_offsets: om(start),
        end_offsets: None,
        minimum_message_time: None,
        maximum_message_time: None,
    }
}

fn env(f: &Fixture, id: &str, start: &BTreeMap<PartitionKey, Offset>) -> StreamTaskEnv {
    StreamTaskEnv {
        task_id: id.into(),
        work_dir: f.root.join("work").join(id),
        deep: f.deep.clone(),
        metadata: Arc::clone(&f.metadata),
        view: Arc::clone(&f.view),
        cancel: CancellationToken::new(),
        control: Arc::new(TaskControl::new(start)),
        lock_version: "2020-01-01T00:00:00.000Z".into(),
        runtime: tokio::runtime::Handle::current(),
    }
}

/// `n` records `{"ts", "k", "v": i}` with i from `from`.
fn produce(streams: &MemoryStreams, partition: i32, from: i64, n: i64) {
    for i in from..from + n {
        let v = json!({"ts": 1_577_836_800_000i64 + i * 1000, "k": format!("k{}", i % 3), "v": i});
        streams
            .append_value("t", partition, v.to_string().into_bytes())
            .unwrap();
    }
}

/// Rows and SUM(v) of the datasource as queries would see them: published segments plus
/// visible hydrants (read from the files).
fn visible(view: &SegmentView) -> (u64, i64) {
    let Some(snap) = view.snapshot("rt") else {
        return (0, 0);
    };
    let mut rows = 0;
    let mut sum = 0;
    let mut files: Vec<PathBuf> = snap.hydrants.iter().map(|h| h.path.clone()).collect();
    for s in snap.timeline.visible_segments() {
        if let dolmen_segment::LoadSpec::Local { path } = &s.load_spec {
            files.push(PathBuf::from(path));
        }
    }
    for f in files {
        let file = std::fs::File::open(&f).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            rows += b.num_rows() as u64;
            let v = b
                .column_by_name("v")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .unwrap();
            sum += v.iter().flatten().sum::<i64>();
        }
    }
    (rows, sum)
}

async fn wait_until(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not reached");
}

fn stored(o: &[(i32, i64)]) -> StreamOffsets {
    StreamOffsets {
        stream: "t".into(),
        partitions: o.iter().map(|(p, v)| (p.to_string(), json!(v))).collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_makes_rows_queryable_and_publishes_with_offsets() {
    let f = fixture().await;
    let streams = MemoryStreams::new();
    streams.create_stream("t", 2);
    produce(&streams, 0, 0, 50);
    produce(&streams, 1, 100, 30);
    let t = task("task1", spec(1), &[(0, 0), (1, 0)]);
    let e = env(&f, "task1", &t.start_offsets);
    let control = Arc::clone(&e.control);
    let supplier = streams.supplier();
    let run = {
        let (e, t) = (e.clone(), t.clone());
        tokio::task::spawn_blocking(move || run_stream_task(&e, &t, supplier))
    };
    // Queryable before any publish: every row, counted once.
    let view = Arc::clone(&f.view);
    wait_until(|| visible(&view).0 == 80).await;
    let expected_sum: i64 = (0..50).sum::<i64>() + (100..130).sum::<i64>();
    assert_eq!(visible(&f.view), (80, expected_sum));
    assert!(f.metadata.stream_offsets("rt").await.unwrap().is_none());
    // More rows while reading.
    produce(&streams, 0, 50, 10);
    wait_until(|| visible(&view).0 == 90).await;
    // The supervisor ends the task at what it read.
    let current = control.current_offsets();
    assert_eq!(current, om(&[(0, 60), (1, 30)]));
    control.set_end_offsets(&current);
    let published = run.await.unwrap().unwrap();
    assert!(published >= 1);
    assert_eq!(
        f.metadata.stream_offsets("rt").await.unwrap(),
        Some(stored(&[(0, 60), (1, 30)]))
    );
    // The same rows, now from segments only: no hydrant left, nothing counted twice.
    let snap = f.view.snapshot("rt").unwrap();
    assert!(snap.hydrants.is_empty());
    assert_eq!(visible(&f.view), (90, expected_sum + (50..60).sum::<i64>()));
    assert_eq!(
        control
            .stats
            .processed
            .load(std::sync::atomic::Ordering::Relaxed),
        90
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_task_resumes_from_the_stored_offsets_without_duplicates() {
    let f = fixture().await;
    let streams = MemoryStreams::new();
    streams.create_stream("t", 1);
    produce(&streams, 0, 0, 40);
    // First task: shut down (as after a crash) before publishing anything.
    let t1 = task("a", spec(1), &[(0, 0)]);
    let e1 = env(&f, "a", &t1.start_offsets);
    let cancel = e1.cancel.clone();
    let supplier = streams.supplier();
    let run = {
        let (e, t) = (e1.clone(), t1.clone());
        tokio::task::spawn_blocking(move || run_stream_task(&e, &t, supplier))
    };
    let view = Arc::clone(&f.view);
    wait_until(|| visible(&view).0 == 40).await;
    cancel.cancel();
    assert!(matches!(run.await.unwrap(), Err(IngestError::Canceled)));
    assert_eq!(
        visible(&f.view),
        (0, 0),
        "a stopped task's rows leave queries"
    );
    assert!(f.metadata.stream_offsets("rt").await.unwrap().is_none());
    // Its replacement starts at the stored offsets (none: the start) and publishes once.
    produce(&streams, 0, 40, 10);
    let t2 = task("b", spec(1), &[(0, 0)]);
    let mut e2 = env(&f, "b", &t2.start_offsets);
    e2.control.set_end_offsets(&om(&[(0, 50)]));
    e2.cancel = CancellationToken::new();
    let supplier = streams.supplier();
    let n = tokio::task::spawn_blocking(move || run_stream_task(&e2, &t2, supplier))
        .await
        .unwrap()
        .unwrap();
    assert!(n >= 1);
    assert_eq!(visible(&f.view), (50, (0..50).sum::<i64>()));
    // A stale task that read the same range again finds it committed (as a replica would)
    // and publishes nothing.
    let t3 = task("c", spec(1), &[(0, 0)]);
    let e3 = env(&f, "c", &t3.start_offsets);
    e3.control.set_end_offsets(&om(&[(0, 50)]));
    let supplier = streams.supplier();
    let r = tokio::task::spawn_blocking(move || run_stream_task(&e3, &t3, supplier))
        .await
        .unwrap();
    assert_eq!(r.unwrap(), 0, "the committed range is not published again");
    assert_eq!(visible(&f.view), (50, (0..50).sum::<i64>()));
    // One that read another range from stale offsets fails and publishes nothing.
    let t4 = task("d", spec(1), &[(0, 0)]);
    let e4 = env(&f, "d", &t4.start_offsets);
    e4.control.set_end_offsets(&om(&[(0, 45)]));
    let supplier = streams.supplier();
    let r = tokio::task::spawn_blocking(move || run_stream_task(&e4, &t4, supplier))
        .await
        .unwrap();
    assert!(r.is_err(), "stale start offsets must not publish: {r:?}");
    assert_eq!(visible(&f.view), (50, (0..50).sum::<i64>()));
    assert_eq!(
        f.metadata.stream_offsets("rt").await.unwrap(),
        Some(stored(&[(0, 50)]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_publish_once_and_queries_show_one_replica() {
    let f = fixture().await;
    let streams = MemoryStreams::new();
    streams.create_stream("t", 1);
    produce(&streams, 0, 0, 25);
    let t1 = task("r1", spec(2), &[(0, 0)]);
    let t2 = task("r2", spec(2), &[(0, 0)]);
    let (e1, e2) = (
        env(&f, "r1", &t1.start_offsets),
        env(&f, "r2", &t2.start_offsets),
    );
    let (c1, c2) = (Arc::clone(&e1.control), Arc::clone(&e2.control));
    let s1 = streams.supplier();
    let s2 = streams.supplier();
    let h1 = tokio::task::spawn_blocking(move || run_stream_task(&e1, &t1, s1));
    let h2 = tokio::task::spawn_blocking(move || run_stream_task(&e2, &t2, s2));
    let view = Arc::clone(&f.view);
    wait_until(|| {
        c1.current_offsets()[&PartitionKey::Kafka(0)] == Offset::Kafka(25)
            && c2.current_offsets()[&PartitionKey::Kafka(0)] == Offset::Kafka(25)
    })
    .await;
    wait_until(|| visible(&view).0 == 25).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(visible(&f.view).0, 25, "one replica visible");
    let end = om(&[(0, 25)]);
    c1.set_end_offsets(&end);
    c2.set_end_offsets(&end);
    let n1 = h1.await.unwrap().unwrap();
    let n2 = h2.await.unwrap().unwrap();
    assert_eq!(n1 + n2, n1.max(n2), "only one replica publishes: {n1} {n2}");
    assert_eq!(visible(&f.view), (25, (0..25).sum::<i64>()));
    assert_eq!(
        f.metadata.stream_offsets("rt").await.unwrap(),
        Some(stored(&[(0, 25)]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_out_of_range_fail_or_reset_automatically() {
    let f = fixture().await;
    let streams = MemoryStreams::new();
    streams.create_stream("t", 1);
    produce(&streams, 0, 0, 20);
    streams.truncate_before("t", 0, 10).unwrap();
    let t = task("o1", spec(1), &[(0, 0)]);
    let e = env(&f, "o1", &t.start_offsets);
    let supplier = streams.supplier();
    let err = tokio::task::spawn_blocking(move || run_stream_task(&e, &t, supplier))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        err.to_string().contains("resetOffsetAutomatically"),
        "{err}"
    );
    // With resetOffsetAutomatically the task reads from the earliest retained offset, and the
    // commit records the skipped range as consumed.
    let mut s = spec(1);
    s.tuning.reset_offset_automatically = true;
    let t = task("o2", s, &[(0, 0)]);
    let e = env(&f, "o2", &t.start_offsets);
    e.control.set_end_offsets(&om(&[(0, 20)]));
    let supplier = streams.supplier();
    tokio::task::spawn_blocking(move || run_stream_task(&e, &t, supplier))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(visible(&f.view), (10, (10..20).sum::<i64>()));
    assert_eq!(
        f.metadata.stream_offsets("rt").await.unwrap(),
        Some(stored(&[(0, 20)]))
    );
}

#[test]
fn payload_round_trips() {
    let mut t = task("x", spec(1), &[(0, 5), (3, 7)]);
    t.minimum_message_time = Some(1_000);
    let v = t.to_json();
    assert_eq!(v["type"], "index_logstream");
    assert_eq!(
        v["ioConfig"]["startSequenceNumbers"]["partitionSequenceNumberMap"],
        json!({"0": 5, "3": 7})
    );
    assert_eq!(
        v["ioConfig"]["endSequenceNumbers"]["partitionSequenceNumberMap"]["0"],
        json!(i64::MAX)
    );
    assert_eq!(StreamTaskSpec::from_json(&v).unwrap(), t);
}

#[test]
fn shardstream_payload_carries_druids_kinesis_forms_and_round_trips() {
    use crate::kinesis::KinesisSequence;
    let spec = SupervisorSpec::parse(&json!({
        "type": "shardstream",
        "spec": {
            "dataSchema": {
                "dataSource": "kin",
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["k"]}
            },
            "ioConfig": {"stream": "s", "endpoint": "http://127.0.0.1:4567", "inputFormat": {"type": "json"}}
        }
    }))
    .unwrap();
    let seq = |d: &str| Offset::Kinesis(KinesisSequence::number(d).unwrap());
    let t = StreamTaskSpec {
        id: "k".into(),
        supervisor_id: "kin".into(),
        task_group_id: 1,
        spec,
        start_offsets: BTreeMap::from([
            (
                PartitionKey::Shard("shardId-000000000000".into()),
                seq("49600000000000000000000000000000000000000000000000000100"),
            ),
            (
                PartitionKey::Shard("shardId-000000000001".into()),
                Offset::Kinesis(KinesisSequence::EndOfShard),
            ),
        ]),
        end_offsets: None,
        minimum_message_time: None,
        maximum_message_time: None,
    };
    let v = t.to_json();
    assert_eq!(v["type"], "index_shardstream");
    let start = &v["ioConfig"]["startSequenceNumbers"];
    // The last record read (position - 1), as a string; EOS as Druid writes it.
    assert_eq!(
        start["partitionSequenceNumberMap"],
        json!({"shardId-000000000000": "49600000000000000000000000000000000000000000000000000099",
               "shardId-000000000001": "EOS"})
    );
    assert_eq!(
        start["exclusivePartitions"],
        json!(["shardId-000000000000", "shardId-000000000001"])
    );
    assert!(start.get("partitionOffsetMap").is_none());
    assert_eq!(
        v["ioConfig"]["endSequenceNumbers"]["partitionSequenceNumberMap"]["shardId-000000000000"],
        json!("NO_END_SEQUENCE_NUMBER")
    );
    assert_eq!(StreamTaskSpec::from_json(&v).unwrap(), t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_hydrants_are_merged_without_changing_what_queries_see() {
    let f = fixture().await;
    let streams = MemoryStreams::new();
    streams.create_stream("t", 1);
    let t = task("m", spec(1), &[(0, 0)]);
    let e = env(&f, "m", &t.start_offsets);
    let control = Arc::clone(&e.control);
    let supplier = streams.supplier();
    let run = {
        let (e, t) = (e.clone(), t.clone());
        tokio::task::spawn_blocking(move || run_stream_task(&e, &t, supplier))
    };
    // One small batch per hydrant period, 20 times: more hydrants than MERGE_FANOUT.
    let view = Arc::clone(&f.view);
    let mut max_files = 0;
    for i in 0..20 {
        produce(&streams, 0, i * 5, 5);
        let n = (i + 1) as u64 * 5;
        wait_until(|| visible(&view).0 == n).await;
        let files = view.snapshot("rt").map_or(0, |s| s.hydrants.len());
        max_files = max_files.max(files);
        tokio::time::sleep(HYDRANT_PERIOD + Duration::from_millis(30)).await;
        assert_eq!(visible(&view), (n, (0..n as i64).sum::<i64>()));
    }
    let files = view.snapshot("rt").unwrap().hydrants.len();
    assert!(
        files < 12,
        "{files} hydrant files for 20 hydrants: not merged"
    );
    assert!(max_files <= 2 * MERGE_FANOUT, "{max_files}");
    control.set_end_offsets(&om(&[(0, 100)]));
    run.await.unwrap().unwrap();
    assert_eq!(visible(&f.view), (100, (0..100).sum::<i64>()));
    assert!(f.view.snapshot("rt").unwrap().hydrants.is_empty());
    // Every batch was persisted at least once (a batch split across two polls makes two
    // hydrants); merges are not persists, and each row was persisted once (no rollup).
    let (persists, rows) = control.persisted();
    assert!((20..=40).contains(&persists), "{persists}");
    assert_eq!(rows, 100);
}

/// A supplier that sets the task's end offsets to its position at the start of its `at`-th
/// poll, as the supervisor does when it hands a group off while the task waits in a poll.
#[derive(Debug)]
struct EndDuringPoll {
    inner: crate::memory::MemorySupplier,
    control: Arc<TaskControl>,
    polls: usize,
    at: usize,
}

impl RecordSupplier for EndDuringPoll {
    type PartitionId = i32;
    type SequenceNumber = i64;

    fn partition_ids(&self, stream: &str) -> SupplierResult<Vec<i32>, Self> {
        self.inner.partition_ids(stream)
    }
    fn assign(&mut self, partitions: &[StreamPartition<i32>]) -> SupplierResult<(), Self> {
        self.inner.assign(partitions)
    }
    fn assignment(&self) -> Vec<StreamPartition<i32>> {
        self.inner.assignment()
    }
    fn seek(&mut self, partition: &StreamPartition<i32>, offset: i64) -> SupplierResult<(), Self> {
        self.inner.seek(partition, offset)
    }
    fn seek_to_earliest(
        &mut self,
        partitions: &[StreamPartition<i32>],
    ) -> SupplierResult<(), Self> {
        self.inner.seek_to_earliest(partitions)
    }
    fn seek_to_latest(&mut self, partitions: &[StreamPartition<i32>]) -> SupplierResult<(), Self> {
        self.inner.seek_to_latest(partitions)
    }
    fn poll(&mut self, timeout: Duration) -> SupplierResult<Vec<RecordOf<Self>>, Self> {
        self.polls += 1;
        if self.polls == self.at {
            let position = self.control.current_offsets();
            self.control.set_end_offsets(&position);
        }
        self.inner.poll(timeout)
    }
    fn latest_offset(&self, partition: &StreamPartition<i32>) -> SupplierResult<i64, Self> {
        self.inner.latest_offset(partition)
    }
    fn earliest_offset(&self, partition: &StreamPartition<i32>) -> SupplierResult<i64, Self> {
        self.inner.earliest_offset(partition)
    }
    fn position(&self, partition: &StreamPartition<i32>) -> Option<i64> {
        self.inner.position(partition)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_offsets_set_during_a_poll_stop_the_records_it_returns() {
    let f = fixture().await;
    let streams = MemoryStreams::new();
    streams.create_stream("t", 1);
    produce(&streams, 0, 0, 100);
    let t = task("task-end", spec(1), &[(0, 0)]);
    let e = env(&f, "task-end", &t.start_offsets);
    // 10 records per poll: the end is set (to 20) when the third poll starts, and that poll
    // returns records 20..30, which belong to the next task.
    let supplier = EndDuringPoll {
        inner: streams.supplier().with_max_poll_records(10),
        control: Arc::clone(&e.control),
        polls: 0,
        at: 3,
    };
    let published = {
        let (e, t) = (e.clone(), t.clone());
        tokio::task::spawn_blocking(move || run_stream_task(&e, &t, supplier))
            .await
            .unwrap()
            .unwrap()
    };
    assert!(published >= 1);
    assert_eq!(
        f.metadata.stream_offsets("rt").await.unwrap(),
        Some(stored(&[(0, 20)]))
    );
    assert_eq!(visible(&f.view), (20, (0..20).sum::<i64>()));
}
