//! [`MemorySupplier`]: an in-memory stream behind the [`RecordSupplier`] trait.
//!
//! A test double for code that consumes the trait (streaming tasks, the supervisor's lag and
//! offset checks): Kafka-shaped (`i32` partitions, `i64` offsets), with real logic rather than
//! canned answers. Records are appended to per-partition logs held in [`MemoryStreams`]; a
//! retention step can drop a log's prefix ([`MemoryStreams::truncate_before`]), offsets can skip
//! ahead as Kafka's transaction markers make them ([`MemoryStreams::skip_offsets`]), and the
//! service can be made unreachable ([`MemoryStreams::set_reachable`]). The supplier reports
//! [`SupplierError::OffsetOutOfRange`] exactly where a Kafka consumer with
//! `auto.offset.reset=none` would: on a seek or read below the earliest retained offset or above
//! the log end.
//!
//! Several suppliers can read the same [`MemoryStreams`] (it is a cheap, shared handle), and a
//! [`RecordSupplier::poll`] blocked on an empty stream wakes as soon as a record is appended.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::supplier::{
    OrderedRecord, RecordSupplier, StreamPartition, SupplierError, SupplierResult,
};

type Error = SupplierError<i32, i64>;

/// The most records one [`MemorySupplier::poll`] returns unless changed with
/// [`MemorySupplier::with_max_poll_records`] (the Kafka consumer's `max.poll.records` default).
pub const DEFAULT_MAX_POLL_RECORDS: usize = 500;

/// One record to append to an in-memory stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryRecord {
    /// The record key.
    pub key: Option<Vec<u8>>,
    /// The record value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// Record headers.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The broker timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
}

impl MemoryRecord {
    /// A record with only a value.
    pub fn value(value: impl Into<Vec<u8>>) -> Self {
        Self {
            value: Some(value.into()),
            ..Self::default()
        }
    }
}

/// The shared state of a set of in-memory streams; clone it to hand the same streams to a
/// producer side (the test) and to one or more [`MemorySupplier`]s.
#[derive(Debug, Clone, Default)]
pub struct MemoryStreams {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Notified on every append, so blocked polls wake up.
    appended: Condvar,
}

#[derive(Debug, Default)]
struct State {
    streams: BTreeMap<String, Vec<PartitionLog>>,
    unreachable: bool,
}

/// One partition: the retained records in offset order, the earliest retained offset and the
/// offset the next append gets.
#[derive(Debug, Default)]
struct PartitionLog {
    records: VecDeque<(i64, MemoryRecord)>,
    earliest: i64,
    next: i64,
}

impl PartitionLog {
    /// Index of the first retained record with an offset `>= offset`.
    fn index_of(&self, offset: i64) -> usize {
        self.records.partition_point(|(o, _)| *o < offset)
    }
}

impl State {
    fn check_reachable(&self) -> Result<(), Error> {
        if self.unreachable {
            return Err(Error::CannotConnect {
                target: "memory streams".into(),
                reason: "the in-memory stream service is set unreachable".into(),
            });
        }
        Ok(())
    }

    fn log(&self, stream: &str, partition: i32) -> Result<&PartitionLog, Error> {
        self.check_reachable()?;
        let logs = self
            .streams
            .get(stream)
            .ok_or_else(|| Error::StreamNotFound(stream.to_string()))?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| logs.get(p))
            .ok_or_else(|| {
                Error::Client(format!(
                    "partition {partition} of stream `{stream}` does not exist"
                ))
            })
    }

    fn log_mut(&mut self, stream: &str, partition: i32) -> Result<&mut PartitionLog, Error> {
        let logs = self
            .streams
            .get_mut(stream)
            .ok_or_else(|| Error::StreamNotFound(stream.to_string()))?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| logs.get_mut(p))
            .ok_or_else(|| {
                Error::Client(format!(
                    "partition {partition} of stream `{stream}` does not exist"
                ))
            })
    }

    /// Fails with `OffsetOutOfRange` unless `earliest <= offset <= next`.
    fn check_in_range(&self, partition: &StreamPartition<i32>, offset: i64) -> Result<(), Error> {
        let log = self.log(&partition.stream, partition.partition)?;
        if offset < log.earliest || offset > log.next {
            return Err(Error::OffsetOutOfRange {
                stream: partition.stream.clone(),
                partition: partition.partition,
                offset,
                earliest: log.earliest,
                latest: log.next,
            });
        }
        Ok(())
    }
}

impl MemoryStreams {
    /// An empty set of streams.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the logs half-updated (every update is a
        // single push/pop/assignment), so a poisoned lock is still consistent.
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates `stream` with `partitions` empty partitions, or grows an existing stream to that
    /// many (partitions are never removed, as in Kafka).
    pub fn create_stream(&self, stream: &str, partitions: i32) {
        let mut state = self.lock();
        let logs = state.streams.entry(stream.to_string()).or_default();
        let wanted = usize::try_from(partitions).unwrap_or(0);
        while logs.len() < wanted {
            logs.push(PartitionLog::default());
        }
    }

    /// Appends `record` to a partition and returns its offset.
    ///
    /// # Errors
    /// [`SupplierError::StreamNotFound`] or [`SupplierError::Client`] when the stream or the
    /// partition does not exist.
    pub fn append(&self, stream: &str, partition: i32, record: MemoryRecord) -> Result<i64, Error> {
        let mut state = self.lock();
        let log = state.log_mut(stream, partition)?;
        let offset = log.next;
        log.records.push_back((offset, record));
        log.next += 1;
        drop(state);
        self.shared.appended.notify_all();
        Ok(offset)
    }

    /// Appends a record with only a value; returns its offset.
    ///
    /// # Errors
    /// As [`MemoryStreams::append`].
    pub fn append_value(
        &self,
        stream: &str,
        partition: i32,
        value: impl Into<Vec<u8>>,
    ) -> Result<i64, Error> {
        self.append(stream, partition, MemoryRecord::value(value))
    }

    /// Advances a partition's next offset by `count` without writing records, leaving a gap as
    /// Kafka's transaction markers (and aborted transactions under `read_committed`) do.
    ///
    /// # Errors
    /// As [`MemoryStreams::append`].
    pub fn skip_offsets(&self, stream: &str, partition: i32, count: i64) -> Result<(), Error> {
        let mut state = self.lock();
        let log = state.log_mut(stream, partition)?;
        log.next += count.max(0);
        drop(state);
        self.shared.appended.notify_all();
        Ok(())
    }

    /// Retention: drops every record of a partition below `offset` (capped at the log end), so
    /// the earliest offset becomes `offset`. Readers positioned below it then get
    /// [`SupplierError::OffsetOutOfRange`].
    ///
    /// # Errors
    /// As [`MemoryStreams::append`].
    pub fn truncate_before(&self, stream: &str, partition: i32, offset: i64) -> Result<(), Error> {
        let mut state = self.lock();
        let log = state.log_mut(stream, partition)?;
        let earliest = offset.min(log.next);
        if earliest > log.earliest {
            let drop_count = log.index_of(earliest);
            log.records.drain(..drop_count);
            log.earliest = earliest;
        }
        Ok(())
    }

    /// Makes every supplier call fail with [`SupplierError::CannotConnect`] (`false`), or work
    /// again (`true`).
    pub fn set_reachable(&self, reachable: bool) {
        self.lock().unreachable = !reachable;
    }

    /// A new supplier reading these streams, with nothing assigned.
    pub fn supplier(&self) -> MemorySupplier {
        MemorySupplier {
            streams: self.clone(),
            positions: BTreeMap::new(),
            max_poll_records: DEFAULT_MAX_POLL_RECORDS,
        }
    }
}

/// A [`RecordSupplier`] over [`MemoryStreams`]: the test double for code that consumes the trait.
/// See the module docs.
#[derive(Debug)]
pub struct MemorySupplier {
    streams: MemoryStreams,
    /// The assignment, with the next offset to read where known.
    positions: BTreeMap<StreamPartition<i32>, Option<i64>>,
    max_poll_records: usize,
}

impl MemorySupplier {
    /// Caps how many records one poll returns (at least one).
    pub fn with_max_poll_records(mut self, max_poll_records: usize) -> Self {
        self.max_poll_records = max_poll_records.max(1);
        self
    }

    fn assigned(&self, partition: &StreamPartition<i32>) -> Result<(), Error> {
        if self.positions.contains_key(partition) {
            Ok(())
        } else {
            Err(Error::NotAssigned {
                stream: partition.stream.clone(),
                partition: partition.partition,
            })
        }
    }

    /// Reads up to the poll budget from the assigned partitions, advancing positions. Checks
    /// every position first, so an out-of-range partition fails the poll before anything moves.
    fn read_available(&mut self, state: &State) -> Result<Vec<OrderedRecord<i32, i64>>, Error> {
        state.check_reachable()?;
        let mut starts = Vec::with_capacity(self.positions.len());
        for (partition, position) in &self.positions {
            let log = state.log(&partition.stream, partition.partition)?;
            let start = position.unwrap_or(log.earliest);
            state.check_in_range(partition, start)?;
            starts.push(start);
        }
        let mut out = Vec::new();
        for ((partition, position), start) in self.positions.iter_mut().zip(starts) {
            let budget = self.max_poll_records - out.len();
            if budget == 0 {
                break;
            }
            let log = state.log(&partition.stream, partition.partition)?;
            let first = log.index_of(start);
            for (offset, record) in log.records.range(first..).take(budget) {
                out.push(OrderedRecord {
                    stream: partition.stream.clone(),
                    partition: partition.partition,
                    offset: *offset,
                    key: record.key.clone(),
                    value: record.value.clone(),
                    headers: record.headers.clone(),
                    timestamp_ms: record.timestamp_ms,
                });
                *position = Some(offset + 1);
            }
        }
        Ok(out)
    }
}

impl RecordSupplier for MemorySupplier {
    type PartitionId = i32;
    type SequenceNumber = i64;

    fn partition_ids(&self, stream: &str) -> SupplierResult<Vec<i32>, Self> {
        let state = self.streams.lock();
        state.check_reachable()?;
        let logs = state
            .streams
            .get(stream)
            .ok_or_else(|| Error::StreamNotFound(stream.to_string()))?;
        let count = i32::try_from(logs.len())
            .map_err(|_| Error::Client(format!("stream `{stream}` has too many partitions")))?;
        Ok((0..count).collect())
    }

    fn assign(&mut self, partitions: &[StreamPartition<i32>]) -> SupplierResult<(), Self> {
        let mut positions = BTreeMap::new();
        for partition in partitions {
            let kept = self.positions.get(partition).copied().flatten();
            positions.insert(partition.clone(), kept);
        }
        self.positions = positions;
        Ok(())
    }

    fn assignment(&self) -> Vec<StreamPartition<i32>> {
        self.positions.keys().cloned().collect()
    }

    fn seek(&mut self, partition: &StreamPartition<i32>, offset: i64) -> SupplierResult<(), Self> {
        self.assigned(partition)?;
        self.streams.lock().check_in_range(partition, offset)?;
        self.positions.insert(partition.clone(), Some(offset));
        Ok(())
    }

    fn seek_to_earliest(
        &mut self,
        partitions: &[StreamPartition<i32>],
    ) -> SupplierResult<(), Self> {
        for partition in partitions {
            self.assigned(partition)?;
            let earliest = self.earliest_offset(partition)?;
            self.positions.insert(partition.clone(), Some(earliest));
        }
        Ok(())
    }

    fn seek_to_latest(&mut self, partitions: &[StreamPartition<i32>]) -> SupplierResult<(), Self> {
        for partition in partitions {
            self.assigned(partition)?;
            let latest = self.latest_offset(partition)?;
            self.positions.insert(partition.clone(), Some(latest));
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration) -> SupplierResult<Vec<OrderedRecord<i32, i64>>, Self> {
        let deadline = Instant::now() + timeout;
        let streams = self.streams.clone();
        let mut state = streams.lock();
        loop {
            let records = self.read_available(&state)?;
            let now = Instant::now();
            if !records.is_empty() || now >= deadline {
                return Ok(records);
            }
            state = streams
                .shared
                .appended
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    fn latest_offset(&self, partition: &StreamPartition<i32>) -> SupplierResult<i64, Self> {
        let state = self.streams.lock();
        Ok(state.log(&partition.stream, partition.partition)?.next)
    }

    fn earliest_offset(&self, partition: &StreamPartition<i32>) -> SupplierResult<i64, Self> {
        let state = self.streams.lock();
        Ok(state.log(&partition.stream, partition.partition)?.earliest)
    }

    fn position(&self, partition: &StreamPartition<i32>) -> Option<i64> {
        self.positions.get(partition).copied().flatten()
    }
}

#[cfg(test)]
mod tests;
