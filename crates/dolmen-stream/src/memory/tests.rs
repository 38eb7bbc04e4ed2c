use std::thread;
use std::time::{Duration, Instant};

use super::*;

const NO_WAIT: Duration = Duration::ZERO;

fn sp(stream: &str, partition: i32) -> StreamPartition<i32> {
    StreamPartition::new(stream, partition)
}

/// Streams with `partitions` partitions of `topic`, partition p holding `per_partition` records
/// whose values are `"p-i"`.
fn filled(topic: &str, partitions: i32, per_partition: i64) -> MemoryStreams {
    let streams = MemoryStreams::new();
    streams.create_stream(topic, partitions);
    for p in 0..partitions {
        for i in 0..per_partition {
            let offset = streams.append_value(topic, p, format!("{p}-{i}")).unwrap();
            assert_eq!(offset, i);
        }
    }
    streams
}

fn values(records: &[OrderedRecord<i32, i64>]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect()
}

/// Polls without waiting until a poll comes back empty.
fn drain(supplier: &mut MemorySupplier) -> Vec<OrderedRecord<i32, i64>> {
    let mut out = Vec::new();
    loop {
        let batch = supplier.poll(NO_WAIT).unwrap();
        if batch.is_empty() {
            return out;
        }
        out.extend(batch);
    }
}

#[test]
fn partition_ids_of_a_stream_and_a_missing_one() {
    let streams = MemoryStreams::new();
    streams.create_stream("t", 3);
    let supplier = streams.supplier();
    assert_eq!(supplier.partition_ids("t").unwrap(), vec![0, 1, 2]);
    streams.create_stream("t", 5);
    assert_eq!(supplier.partition_ids("t").unwrap(), vec![0, 1, 2, 3, 4]);
    assert!(matches!(
        supplier.partition_ids("nope"),
        Err(SupplierError::StreamNotFound(s)) if s == "nope"
    ));
}

#[test]
fn reads_exactly_from_the_sought_offsets_in_order() {
    let streams = filled("t", 2, 5);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0), sp("t", 1)]).unwrap();
    supplier.seek(&sp("t", 0), 3).unwrap();
    supplier.seek(&sp("t", 1), 1).unwrap();
    let records = drain(&mut supplier);
    assert_eq!(
        values(&records),
        vec!["0-3", "0-4", "1-1", "1-2", "1-3", "1-4"]
    );
    assert!(records.iter().all(|r| r.stream == "t"));
    assert_eq!(
        records
            .iter()
            .map(|r| (r.partition, r.offset))
            .collect::<Vec<_>>(),
        vec![(0, 3), (0, 4), (1, 1), (1, 2), (1, 3), (1, 4)]
    );
    assert_eq!(supplier.position(&sp("t", 0)), Some(5));
    assert_eq!(supplier.position(&sp("t", 1)), Some(5));
    assert_eq!(supplier.position(&sp("t", 2)), None);
}

#[test]
fn an_unsought_partition_reads_from_earliest_and_has_no_position_until_then() {
    let streams = filled("t", 1, 3);
    streams.truncate_before("t", 0, 1).unwrap();
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    assert_eq!(supplier.position(&sp("t", 0)), None);
    assert_eq!(values(&drain(&mut supplier)), vec!["0-1", "0-2"]);
    assert_eq!(supplier.position(&sp("t", 0)), Some(3));
}

#[test]
fn poll_respects_the_record_cap_and_resumes() {
    let streams = filled("t", 1, 5);
    let mut supplier = streams.supplier().with_max_poll_records(2);
    supplier.assign(&[sp("t", 0)]).unwrap();
    supplier.seek_to_earliest(&[sp("t", 0)]).unwrap();
    assert_eq!(values(&supplier.poll(NO_WAIT).unwrap()), vec!["0-0", "0-1"]);
    assert_eq!(values(&supplier.poll(NO_WAIT).unwrap()), vec!["0-2", "0-3"]);
    assert_eq!(values(&supplier.poll(NO_WAIT).unwrap()), vec!["0-4"]);
    assert!(supplier.poll(NO_WAIT).unwrap().is_empty());
}

#[test]
fn seeking_back_rereads() {
    let streams = filled("t", 1, 4);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    supplier.seek(&sp("t", 0), 0).unwrap();
    assert_eq!(drain(&mut supplier).len(), 4);
    supplier.seek(&sp("t", 0), 2).unwrap();
    assert_eq!(values(&drain(&mut supplier)), vec!["0-2", "0-3"]);
}

#[test]
fn latest_and_earliest_offsets_follow_appends_and_retention() {
    let streams = filled("t", 2, 4);
    let supplier = streams.supplier();
    assert_eq!(supplier.earliest_offset(&sp("t", 0)).unwrap(), 0);
    assert_eq!(supplier.latest_offset(&sp("t", 0)).unwrap(), 4);
    streams.truncate_before("t", 0, 3).unwrap();
    assert_eq!(supplier.earliest_offset(&sp("t", 0)).unwrap(), 3);
    assert_eq!(supplier.latest_offset(&sp("t", 0)).unwrap(), 4);
    // Retention past the end empties the log at its end, and never moves backwards.
    streams.truncate_before("t", 1, 100).unwrap();
    assert_eq!(supplier.earliest_offset(&sp("t", 1)).unwrap(), 4);
    streams.truncate_before("t", 1, 2).unwrap();
    assert_eq!(supplier.earliest_offset(&sp("t", 1)).unwrap(), 4);
    assert_eq!(supplier.latest_offset(&sp("t", 1)).unwrap(), 4);
}

#[test]
fn seek_outside_the_retained_range_is_out_of_range_and_keeps_the_position() {
    let streams = filled("t", 1, 5);
    streams.truncate_before("t", 0, 2).unwrap();
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    supplier.seek(&sp("t", 0), 3).unwrap();
    for bad in [0, 1, 6, 100] {
        match supplier.seek(&sp("t", 0), bad) {
            Err(SupplierError::OffsetOutOfRange {
                stream,
                partition,
                offset,
                earliest,
                latest,
            }) => {
                assert_eq!((stream.as_str(), partition), ("t", 0));
                assert_eq!((offset, earliest, latest), (bad, 2, 5));
            }
            other => panic!("seek to {bad}: {other:?}"),
        }
    }
    assert_eq!(supplier.position(&sp("t", 0)), Some(3));
    // Both ends of the range are valid: earliest, and latest (waits for the next record).
    supplier.seek(&sp("t", 0), 2).unwrap();
    supplier.seek(&sp("t", 0), 5).unwrap();
    assert!(supplier.poll(NO_WAIT).unwrap().is_empty());
}

#[test]
fn retention_overtaking_the_reader_fails_the_poll() {
    let streams = filled("t", 2, 5);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0), sp("t", 1)]).unwrap();
    supplier.seek(&sp("t", 0), 0).unwrap();
    supplier.seek(&sp("t", 1), 1).unwrap();
    streams.truncate_before("t", 1, 4).unwrap();
    match supplier.poll(NO_WAIT) {
        Err(SupplierError::OffsetOutOfRange {
            partition: 1,
            offset: 1,
            earliest: 4,
            latest: 5,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // Nothing moved: partition 0 was not read by the failed poll.
    assert_eq!(supplier.position(&sp("t", 0)), Some(0));
    // The caller resets (resetOffsetAutomatically) and reads on.
    supplier.seek_to_earliest(&[sp("t", 1)]).unwrap();
    assert_eq!(
        values(&drain(&mut supplier)),
        vec!["0-0", "0-1", "0-2", "0-3", "0-4", "1-4"]
    );
}

#[test]
fn seek_to_latest_reads_only_new_records() {
    let streams = filled("t", 1, 3);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    supplier.seek_to_latest(&[sp("t", 0)]).unwrap();
    assert_eq!(supplier.position(&sp("t", 0)), Some(3));
    assert!(supplier.poll(NO_WAIT).unwrap().is_empty());
    streams.append_value("t", 0, "new").unwrap();
    assert_eq!(values(&supplier.poll(NO_WAIT).unwrap()), vec!["new"]);
}

#[test]
fn offset_gaps_are_skipped_and_counted_in_latest() {
    let streams = filled("t", 1, 2);
    streams.skip_offsets("t", 0, 1).unwrap();
    assert_eq!(streams.append_value("t", 0, "after-gap").unwrap(), 3);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    assert_eq!(supplier.latest_offset(&sp("t", 0)).unwrap(), 4);
    // Seeking into the gap reads the next record after it.
    supplier.seek(&sp("t", 0), 2).unwrap();
    let records = drain(&mut supplier);
    assert_eq!(
        records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![3]
    );
    assert_eq!(supplier.position(&sp("t", 0)), Some(4));
}

#[test]
fn records_keep_key_headers_timestamp_and_null_values() {
    let streams = MemoryStreams::new();
    streams.create_stream("t", 1);
    let record = MemoryRecord {
        key: Some(b"k".to_vec()),
        value: None,
        headers: vec![("h".into(), Some(b"v".to_vec())), ("n".into(), None)],
        timestamp_ms: Some(1_700_000_000_123),
    };
    streams.append("t", 0, record.clone()).unwrap();
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    let got = drain(&mut supplier);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].key, record.key);
    assert_eq!(got[0].value, None);
    assert_eq!(got[0].headers, record.headers);
    assert_eq!(got[0].timestamp_ms, Some(1_700_000_000_123));
}

#[test]
fn calls_on_unassigned_or_missing_partitions_fail() {
    let streams = filled("t", 1, 1);
    let mut supplier = streams.supplier();
    assert!(matches!(
        supplier.seek(&sp("t", 0), 0),
        Err(SupplierError::NotAssigned { partition: 0, .. })
    ));
    supplier.assign(&[sp("t", 7)]).unwrap();
    assert!(matches!(
        supplier.poll(NO_WAIT),
        Err(SupplierError::Client(m)) if m.contains("partition 7")
    ));
    assert!(matches!(
        supplier.latest_offset(&sp("u", 0)),
        Err(SupplierError::StreamNotFound(_))
    ));
    assert!(matches!(
        streams.append_value("t", 1, "x"),
        Err(SupplierError::Client(_))
    ));
}

#[test]
fn reassigning_keeps_positions_of_partitions_that_stay() {
    let streams = filled("t", 3, 3);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0), sp("t", 1)]).unwrap();
    supplier.seek(&sp("t", 0), 2).unwrap();
    supplier.seek(&sp("t", 1), 1).unwrap();
    supplier.assign(&[sp("t", 2), sp("t", 1)]).unwrap();
    assert_eq!(supplier.assignment(), vec![sp("t", 1), sp("t", 2)]);
    assert_eq!(supplier.position(&sp("t", 0)), None);
    assert_eq!(supplier.position(&sp("t", 1)), Some(1));
    assert_eq!(supplier.position(&sp("t", 2)), None);
}

#[test]
fn unreachable_streams_fail_with_cannot_connect() {
    let streams = filled("t", 1, 1);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();
    streams.set_reachable(false);
    assert!(matches!(
        supplier.partition_ids("t"),
        Err(SupplierError::CannotConnect { .. })
    ));
    assert!(matches!(
        supplier.poll(NO_WAIT),
        Err(SupplierError::CannotConnect { .. })
    ));
    assert!(matches!(
        supplier.latest_offset(&sp("t", 0)),
        Err(SupplierError::CannotConnect { .. })
    ));
    streams.set_reachable(true);
    assert_eq!(drain(&mut supplier).len(), 1);
}

#[test]
fn a_blocked_poll_wakes_on_append_and_an_idle_one_waits_its_timeout() {
    let streams = filled("t", 1, 0);
    let mut supplier = streams.supplier();
    supplier.assign(&[sp("t", 0)]).unwrap();

    let started = Instant::now();
    assert!(supplier.poll(Duration::from_millis(50)).unwrap().is_empty());
    assert!(started.elapsed() >= Duration::from_millis(50));

    let writer = streams.clone();
    let handle = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        writer.append_value("t", 0, "late").unwrap();
    });
    let started = Instant::now();
    let records = supplier.poll(Duration::from_secs(30)).unwrap();
    handle.join().unwrap();
    assert_eq!(values(&records), vec!["late"]);
    assert!(started.elapsed() < Duration::from_secs(10));
}
