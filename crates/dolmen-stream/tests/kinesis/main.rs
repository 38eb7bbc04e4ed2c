//! `KinesisRecordSupplier` against a real Kinesis-API emulator (kinesalite, started by
//! `scripts/install-test-deps.sh`; `scripts/test.sh` exports `DOLMEN_TEST_KINESIS_ENDPOINT`), through
//! the real AWS SDK. Each test uses its own stream.

#[path = "../support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use dolmen_stream::kinesis::{
    KinesisAdmin, KinesisConfig, KinesisRecordSupplier, KinesisSequence, StaticCredentials,
};
use dolmen_stream::{OrderedRecord, RecordSupplier, StreamPartition, SupplierError};

/// The emulator's endpoint, or `None` when the caller opted out with
/// `DOLMEN_SKIP_KINESIS_TESTS=1`. Fails the test when the service is not configured.
fn endpoint() -> Option<String> {
    support::service(
        "DOLMEN_TEST_KINESIS_ENDPOINT",
        "DOLMEN_SKIP_KINESIS_TESTS",
        "run scripts/install-test-deps.sh (it starts the kinesalite Kinesis emulator) and export DOLMEN_TEST_KINESIS_ENDPOINT=http://127.0.0.1:4567, or run scripts/test.sh",
    )
}

/// A stream name no other test (or earlier run against the same emulator) uses.
fn unique_stream(prefix: &str) -> String {
    support::unique_name(prefix)
}

fn config(endpoint: &str) -> KinesisConfig {
    KinesisConfig {
        // kinesalite checks that requests are signed, not the keys.
        credentials: Some(StaticCredentials {
            access_key: "dolmen-test".into(),
            secret_key: "dolmen-test-secret".into(),
        }),
        records_per_fetch: 100,
        ..KinesisConfig::new(Some(endpoint.to_owned()), Some("us-east-1".into()))
    }
}

fn sp(stream: &str, shard: &str) -> StreamPartition<String> {
    StreamPartition::new(stream, shard.to_owned())
}

/// Polls until `want` records came or 20 s passed.
fn poll_n(
    supplier: &mut KinesisRecordSupplier,
    want: usize,
) -> Vec<OrderedRecord<String, KinesisSequence>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        out.extend(supplier.poll(Duration::from_millis(500)).unwrap());
    }
    out
}

/// Puts `n` records with keys `k{i}` and values `v{i}`; returns their shard and sequence number.
fn put(
    admin: &KinesisAdmin,
    stream: &str,
    from: usize,
    n: usize,
) -> Vec<(String, KinesisSequence)> {
    let records: Vec<(String, Vec<u8>)> = (from..from + n)
        .map(|i| (format!("k{i}"), format!("v{i}").into_bytes()))
        .collect();
    admin.put_records(stream, &records).unwrap()
}

#[test]
fn reads_every_shard_from_the_earliest_in_sequence_order() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("read");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 3).unwrap();
    let placed = put(&admin, &stream, 0, 60);

    let mut supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let shards = supplier.partition_ids(&stream).unwrap();
    assert_eq!(shards.len(), 3, "{shards:?}");
    let partitions: Vec<_> = shards.iter().map(|s| sp(&stream, s)).collect();
    supplier.assign(&partitions).unwrap();
    assert_eq!(supplier.assignment(), partitions);
    supplier.seek_to_earliest(&partitions).unwrap();
    let records = poll_n(&mut supplier, 60);
    assert_eq!(records.len(), 60);

    // Every record once, with the shard and sequence number PutRecords gave, in sequence order
    // within each shard.
    let mut by_shard: BTreeMap<String, Vec<KinesisSequence>> = BTreeMap::new();
    let mut values = BTreeSet::new();
    for r in &records {
        by_shard
            .entry(r.partition.clone())
            .or_default()
            .push(r.offset.clone());
        let value = String::from_utf8(r.value.clone().unwrap()).unwrap();
        let i: usize = value[1..].parse().unwrap();
        assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
        assert_eq!((r.partition.clone(), r.offset.clone()), placed[i]);
        assert!(r.timestamp_ms.is_some());
        values.insert(i);
    }
    assert_eq!(values.len(), 60);
    for (shard, seqs) in &by_shard {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{shard}: {seqs:?}");
        let p = sp(&stream, shard);
        // Position: one past the last record read; caught up means position == latest.
        assert_eq!(
            supplier.position(&p),
            Some(seqs.last().unwrap().successor())
        );
        assert_eq!(
            supplier.latest_offset(&p).unwrap(),
            seqs.last().unwrap().successor()
        );
        assert_eq!(supplier.earliest_offset(&p).unwrap(), seqs[0]);
        // Kinesis's own lag report, kept for the supervisor: caught up.
        assert_eq!(supplier.millis_behind_latest(&p), Some(0));
    }
    // Nothing more.
    assert!(
        supplier
            .poll(Duration::from_millis(300))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn seek_reads_from_a_sequence_number_and_rejects_out_of_range() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("seek");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 1).unwrap();
    let placed = put(&admin, &stream, 0, 20);
    let shard = placed[0].0.clone();
    let p = sp(&stream, &shard);

    let mut supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    supplier.assign(std::slice::from_ref(&p)).unwrap();
    // Seek to the 10th record's sequence number: records 10.. come back.
    supplier.seek(&p, placed[10].1.clone()).unwrap();
    let records = poll_n(&mut supplier, 10);
    let offsets: Vec<_> = records.iter().map(|r| r.offset.clone()).collect();
    let expected: Vec<_> = placed[10..].iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(offsets, expected);

    // Seek to "one past" record 4 (a position as a task stores it): records 5.. come back.
    supplier.seek(&p, placed[4].1.successor()).unwrap();
    let records = poll_n(&mut supplier, 15);
    assert_eq!(records.len(), 15);
    assert_eq!(records[0].offset, placed[5].1);

    // Past the latest: out of range, naming the range.
    let latest = supplier.latest_offset(&p).unwrap();
    assert_eq!(latest, placed[19].1.successor());
    let beyond = latest.successor().successor();
    match supplier.seek(&p, beyond.clone()).unwrap_err() {
        SupplierError::OffsetOutOfRange {
            offset,
            earliest,
            latest: l,
            ..
        } => {
            assert_eq!(offset, beyond);
            assert_eq!(earliest, placed[0].1);
            assert_eq!(l, latest);
        }
        other => panic!("{other}"),
    }
    // Before the earliest: out of range too.
    let before = placed[0].1.predecessor().unwrap();
    assert!(matches!(
        supplier.seek(&p, before),
        Err(SupplierError::OffsetOutOfRange { .. })
    ));
    // A shard that is not assigned.
    assert!(matches!(
        supplier.seek(&sp(&stream, "shardId-000000000099"), placed[0].1.clone()),
        Err(SupplierError::NotAssigned { .. })
    ));
}

#[test]
fn seek_to_latest_reads_only_new_records_and_an_empty_shard_has_a_range() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("latest");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 1).unwrap();
    let mut supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let shard = supplier.partition_ids(&stream).unwrap().remove(0);
    let p = sp(&stream, &shard);
    // Empty shard: earliest == latest, and a poll from there returns nothing.
    let (earliest, latest) = (
        supplier.earliest_offset(&p).unwrap(),
        supplier.latest_offset(&p).unwrap(),
    );
    assert_eq!(earliest, latest);
    supplier.assign(std::slice::from_ref(&p)).unwrap();
    supplier.seek_to_earliest(std::slice::from_ref(&p)).unwrap();
    assert!(
        supplier
            .poll(Duration::from_millis(200))
            .unwrap()
            .is_empty()
    );

    put(&admin, &stream, 0, 5);
    supplier.seek_to_latest(std::slice::from_ref(&p)).unwrap();
    let placed = put(&admin, &stream, 5, 3);
    let records = poll_n(&mut supplier, 3);
    let offsets: Vec<_> = records.iter().map(|r| r.offset.clone()).collect();
    let expected: Vec<_> = placed.iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(offsets, expected);
}

#[test]
fn a_split_shard_is_read_to_its_end_then_marked_eos() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("split");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 2).unwrap();
    let before = put(&admin, &stream, 0, 30);
    let mut supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let parents = supplier.partition_ids(&stream).unwrap();
    admin.split_shard(&stream, &parents[0]).unwrap();
    let after = put(&admin, &stream, 30, 30);

    let lineage = supplier.shard_lineage(&stream).unwrap();
    assert_eq!(lineage.len(), 4, "{lineage:?}");
    let closed: Vec<_> = lineage
        .iter()
        .filter(|s| s.closed)
        .map(|s| s.shard_id.clone())
        .collect();
    assert_eq!(closed, vec![parents[0].clone()]);
    let children: Vec<_> = lineage
        .iter()
        .filter(|s| s.parents == vec![parents[0].clone()])
        .map(|s| s.shard_id.clone())
        .collect();
    assert_eq!(children.len(), 2, "{lineage:?}");
    // Nothing written after the split lands in the closed parent.
    assert!(after.iter().all(|(shard, _)| shard != &parents[0]));

    // The closed parent: read to its end, then its position is EOS, which is also its latest.
    let parent = sp(&stream, &parents[0]);
    assert_eq!(
        supplier.latest_offset(&parent).unwrap(),
        KinesisSequence::EndOfShard
    );
    supplier.assign(std::slice::from_ref(&parent)).unwrap();
    supplier
        .seek_to_earliest(std::slice::from_ref(&parent))
        .unwrap();
    let in_parent = before.iter().filter(|(s, _)| s == &parents[0]).count();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut records = Vec::new();
    while supplier.position(&parent) != Some(KinesisSequence::EndOfShard)
        && Instant::now() < deadline
    {
        records.extend(supplier.poll(Duration::from_millis(300)).unwrap());
    }
    assert_eq!(records.len(), in_parent);
    assert_eq!(
        supplier.position(&parent),
        Some(KinesisSequence::EndOfShard)
    );
    assert!(
        supplier
            .poll(Duration::from_millis(100))
            .unwrap()
            .is_empty()
    );
    // Seeking a closed shard to EOS is in range: nothing is left to read.
    supplier.seek(&parent, KinesisSequence::EndOfShard).unwrap();
    assert!(
        supplier
            .poll(Duration::from_millis(100))
            .unwrap()
            .is_empty()
    );

    // The children hold everything written after the split to that hash range.
    let child_parts: Vec<_> = children.iter().map(|c| sp(&stream, c)).collect();
    supplier.assign(&child_parts).unwrap();
    supplier.seek_to_earliest(&child_parts).unwrap();
    let want = after.iter().filter(|(s, _)| children.contains(s)).count();
    assert_eq!(poll_n(&mut supplier, want).len(), want);
}

#[test]
fn merged_shards_close_and_their_child_has_two_parents() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("merge");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 2).unwrap();
    put(&admin, &stream, 0, 10);
    let supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let parents = supplier.partition_ids(&stream).unwrap();
    admin
        .merge_shards(&stream, &parents[0], &parents[1])
        .unwrap();
    let lineage = supplier.shard_lineage(&stream).unwrap();
    assert_eq!(lineage.len(), 3, "{lineage:?}");
    let child = lineage.iter().find(|s| !s.closed).unwrap();
    let mut child_parents = child.parents.clone();
    child_parents.sort();
    assert_eq!(child_parents, parents);
}

#[test]
fn a_missing_stream_is_stream_not_found() {
    let Some(endpoint) = endpoint() else { return };
    let supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let stream = unique_stream("missing");
    match supplier.partition_ids(&stream).unwrap_err() {
        SupplierError::StreamNotFound(s) => assert_eq!(s, stream),
        other => panic!("{other}"),
    }
}

/// The task's fetching honours the record buffer and poll bounds: with a buffer of 64 bytes,
/// one fetch worker and 20 bytes per poll, every record still arrives once and in order, no
/// poll returns more than 20 bytes' worth (one record when a record alone is larger), and a seek
/// in the middle drops what was fetched before it.
#[test]
fn a_small_record_buffer_and_one_fetch_thread_read_everything_once_in_order() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("buffer");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 2).unwrap();
    let placed = put(&admin, &stream, 0, 80);

    let mut small = config(&endpoint);
    small.record_buffer_bytes = 64;
    small.fetch_threads = 1;
    small.max_bytes_per_poll = 20;
    let mut supplier = KinesisRecordSupplier::new(small).unwrap();
    let partitions: Vec<_> = supplier
        .partition_ids(&stream)
        .unwrap()
        .iter()
        .map(|s| sp(&stream, s))
        .collect();
    supplier.assign(&partitions).unwrap();
    supplier.seek_to_earliest(&partitions).unwrap();
    let mut got: Vec<OrderedRecord<String, KinesisSequence>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < 80 && Instant::now() < deadline {
        let batch = supplier.poll(Duration::from_millis(500)).unwrap();
        let bytes: usize = batch
            .iter()
            .map(|r| r.value.as_ref().unwrap().len() + r.key.as_ref().unwrap().len())
            .sum();
        assert!(
            batch.len() <= 1 || bytes <= 20,
            "{} records, {bytes} bytes",
            batch.len()
        );
        got.extend(batch);
    }
    assert_eq!(got.len(), 80);
    for shard in &partitions {
        let read: Vec<&KinesisSequence> = got
            .iter()
            .filter(|r| r.partition == shard.partition)
            .map(|r| &r.offset)
            .collect();
        let put: Vec<&KinesisSequence> = placed
            .iter()
            .filter(|(s, _)| *s == shard.partition)
            .map(|(_, q)| q)
            .collect();
        assert_eq!(read, put, "{shard}");
        // The task's position follows what poll returned.
        assert_eq!(
            supplier.position(shard),
            Some(put.last().unwrap().successor())
        );
    }

    // Back to the third record of the first shard: reading resumes exactly there (nothing
    // fetched before the seek comes out).
    let first = &partitions[0];
    let seqs: Vec<&KinesisSequence> = placed
        .iter()
        .filter(|(s, _)| *s == first.partition)
        .map(|(_, q)| q)
        .collect();
    supplier.seek(first, seqs[2].clone()).unwrap();
    // The other shard is read to its latest: only the first one's records come.
    let again = poll_n(&mut supplier, seqs.len() - 2);
    let again: Vec<&KinesisSequence> = again.iter().map(|r| &r.offset).collect();
    assert_eq!(again, seqs[2..].to_vec());
}

/// The supervisor's time lag of a shard: above 0 while a record waits after the position, 0 at
/// the latest, 0 for `EOS`.
#[test]
fn time_lag_is_the_wait_of_the_first_unread_record() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("lag");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 1).unwrap();
    let placed = put(&admin, &stream, 0, 5);
    std::thread::sleep(Duration::from_millis(300));
    let supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let shard = placed[0].0.clone();
    let positions = BTreeMap::from([(shard.clone(), placed[0].1.clone())]);
    let lag = supplier.time_lag(&stream, &positions);
    assert!(lag[&shard] >= 300, "{lag:?}");
    let latest = supplier.latest_offset(&sp(&stream, &shard)).unwrap();
    let lag = supplier.time_lag(&stream, &BTreeMap::from([(shard.clone(), latest)]));
    assert_eq!(lag[&shard], 0);
    let lag = supplier.time_lag(
        &stream,
        &BTreeMap::from([(shard.clone(), KinesisSequence::EndOfShard)]),
    );
    assert_eq!(lag[&shard], 0);
}

/// What the supervisor asks before starting tasks: the earliest sequence number always, the
/// latest only when cheap (a closed shard's `EOS`, or after a first search left a hint).
#[test]
fn earliest_and_known_latest_asks_no_scan_before_the_first_search() {
    let Some(endpoint) = endpoint() else { return };
    let stream = unique_stream("cheap");
    let admin = KinesisAdmin::new(config(&endpoint)).unwrap();
    admin.create_stream(&stream, 1).unwrap();
    let placed = put(&admin, &stream, 0, 10);
    let supplier = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let shard = sp(&stream, &placed[0].0);
    let (earliest, latest) = supplier.earliest_and_known_latest(&shard).unwrap();
    assert_eq!(earliest, placed[0].1);
    assert_eq!(latest, None);
    let found = supplier.latest_offset(&shard).unwrap();
    assert_eq!(found, placed[9].1.successor());
    assert_eq!(
        supplier.earliest_and_known_latest(&shard).unwrap(),
        (placed[0].1.clone(), Some(found))
    );
    // A closed shard: `EOS`, known from the shard list.
    admin.split_shard(&stream, &placed[0].0).unwrap();
    let fresh = KinesisRecordSupplier::new(config(&endpoint)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, latest) = fresh.earliest_and_known_latest(&shard).unwrap();
        if latest == Some(KinesisSequence::EndOfShard) {
            break;
        }
        assert!(Instant::now() < deadline, "the split shard never closed");
        std::thread::sleep(Duration::from_millis(100));
    }
}
