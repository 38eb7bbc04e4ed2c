//! The seekable-stream abstraction: [`RecordSupplier`] and the types it speaks.
//!
//! Modelled on Druid's `org.apache.druid.indexing.seekablestream.common.RecordSupplier`,
//! `StreamPartition` and `OrderedPartitionableRecord`. Druid's supplier is generic over the
//! partition id, the sequence number and the record type; here the partition id and the sequence
//! number are associated types of the trait (Kafka: `i32` partitions and `i64` offsets; Kinesis:
//! string shard ids and string sequence numbers) and the record is always an [`OrderedRecord`].

use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::time::Duration;

/// One partition of one stream: a Kafka topic partition or a Kinesis shard.
///
/// Druid: `org.apache.druid.indexing.seekablestream.common.StreamPartition`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamPartition<P> {
    /// The stream name (Kafka topic, Kinesis stream).
    pub stream: String,
    /// The partition id within the stream (Kafka partition number, Kinesis shard id).
    pub partition: P,
}

impl<P> StreamPartition<P> {
    /// A partition of `stream`.
    pub fn new(stream: impl Into<String>, partition: P) -> Self {
        Self {
            stream: stream.into(),
            partition,
        }
    }
}

impl<P: Display> Display for StreamPartition<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.stream, self.partition)
    }
}

/// One record read from a stream, with its position.
///
/// Druid: `org.apache.druid.indexing.seekablestream.common.OrderedPartitionableRecord` (plus the
/// key, headers and timestamp that Druid's `KafkaRecordEntity` keeps for the `kafka` input format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedRecord<P, S> {
    /// The stream the record was read from.
    pub stream: String,
    /// The partition the record was read from.
    pub partition: P,
    /// The record's sequence number (Kafka offset) within its partition. After reading this
    /// record the partition's position is the next sequence number.
    pub offset: S,
    /// The record key; `None` when the record has none.
    pub key: Option<Vec<u8>>,
    /// The record value; `None` for a tombstone (a Kafka record with a null value).
    pub value: Option<Vec<u8>>,
    /// Record headers in the order the producer wrote them (Kafka; empty for Kinesis). A header
    /// may have a null value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The broker timestamp in milliseconds since the Unix epoch (Kafka `CreateTime` or
    /// `LogAppendTime`, Kinesis approximate arrival time); `None` when the record has none.
    pub timestamp_ms: Option<i64>,
}

/// Why a [`RecordSupplier`] call failed.
///
/// Generic over the supplier's partition id `P` and sequence number `S` so that
/// [`SupplierError::OffsetOutOfRange`] carries them typed: the caller can apply
/// `resetOffsetAutomatically` to exactly that partition.
#[derive(Debug, thiserror::Error)]
pub enum SupplierError<P, S> {
    /// The supplier's configuration is unusable, e.g. a required consumer property is missing or
    /// the client library rejects a property. The message names the property.
    #[error("invalid stream configuration: {0}")]
    InvalidConfig(String),
    /// The stream service cannot be reached (no broker answered within the request timeout).
    /// Druid surfaces this as a supervisor that cannot connect to the stream.
    #[error("cannot connect to {target}: {reason}")]
    CannotConnect {
        /// What was contacted, e.g. the bootstrap servers.
        target: String,
        /// The client's reason.
        reason: String,
    },
    /// The stream (Kafka topic) does not exist.
    #[error("stream `{0}` does not exist")]
    StreamNotFound(String),
    /// The call named a partition that is not in the current assignment.
    #[error("partition {partition} of stream `{stream}` is not assigned")]
    NotAssigned {
        /// The stream name.
        stream: String,
        /// The partition id.
        partition: P,
    },
    /// The requested offset is below the earliest offset the stream still retains or above its
    /// latest offset. A streaming task answers with `resetOffsetAutomatically` (re-seek to the
    /// earliest or latest offset) or fails. Druid: Kafka's `OffsetOutOfRangeException`.
    #[error(
        "offset {offset} is out of range for partition {partition} of stream `{stream}`: the available offsets are {earliest} to {latest}"
    )]
    OffsetOutOfRange {
        /// The stream name.
        stream: String,
        /// The partition id.
        partition: P,
        /// The offset that was requested.
        offset: S,
        /// The earliest offset the partition retains.
        earliest: S,
        /// The latest offset (the next one to be written).
        latest: S,
    },
    /// Any other failure of the stream client, with its message.
    #[error("stream client error: {0}")]
    Client(String),
}

/// The error type of a given supplier.
pub type SupplierErrorOf<R> =
    SupplierError<<R as RecordSupplier>::PartitionId, <R as RecordSupplier>::SequenceNumber>;

/// The record type of a given supplier.
pub type RecordOf<R> =
    OrderedRecord<<R as RecordSupplier>::PartitionId, <R as RecordSupplier>::SequenceNumber>;

/// The result type of a given supplier's calls.
pub type SupplierResult<T, R> = Result<T, SupplierErrorOf<R>>;

/// A client that reads records from an ordered, partitioned, seekable stream.
///
/// Druid: `org.apache.druid.indexing.seekablestream.common.RecordSupplier`. Implemented for
/// Kafka (`logstream`) by [`crate::kafka::KafkaRecordSupplier`]; [`crate::memory::MemorySupplier`]
/// is an in-memory test double.
///
/// # Contract
/// - **Blocking.** Every call may block on the network (up to the supplier's request timeout, or
///   the `timeout` given to [`RecordSupplier::poll`]). Run suppliers on dedicated threads (or
///   `spawn_blocking`), never on the async reactor.
/// - **Offsets are "next to read".** [`RecordSupplier::seek`] to `o` makes the next record read
///   from that partition the first one with an offset `>= o`; [`RecordSupplier::position`] is the
///   next offset to read; [`RecordSupplier::latest_offset`] is the offset the next record written
///   will get (Druid's "latestOffsets"), so a partition is caught up when its position equals it.
///   Offsets need not be contiguous (Kafka transaction markers and compaction leave gaps).
/// - **Out of range is reported, not repaired.** Seeking to, or reading at, an offset below the
///   earliest retained or above the latest fails with [`SupplierError::OffsetOutOfRange`]; the
///   caller decides whether to reset (`resetOffsetAutomatically`).
/// - **At-least-once reads.** A supplier commits nothing. After a restart the caller seeks to the
///   offsets it last committed, so records past them are read again; exactly-once ingestion is made
///   by the caller publishing segments and end offsets in one metadata transaction.
/// - Records of one partition come back in offset order; no order is promised across partitions.
pub trait RecordSupplier: Send + Debug {
    /// The partition id type: `i32` for Kafka, a shard id string for Kinesis.
    type PartitionId: Clone + Eq + Ord + Hash + Debug + Display + Send + Sync + 'static;
    /// The sequence number type: the `i64` offset for Kafka, a sequence string for Kinesis.
    type SequenceNumber: Clone + Eq + Ord + Debug + Display + Send + Sync + 'static;

    /// The partitions of `stream` (Druid `getPartitionIds`), sorted.
    ///
    /// # Errors
    /// [`SupplierError::StreamNotFound`] when the stream does not exist,
    /// [`SupplierError::CannotConnect`] when the service does not answer.
    fn partition_ids(&self, stream: &str) -> SupplierResult<Vec<Self::PartitionId>, Self>;

    /// Replaces the set of partitions this supplier reads (Druid `assign`). Partitions that stay
    /// assigned keep their position; new ones have no position until
    /// [`RecordSupplier::seek`] (or one of the seek-to calls) gives them one, and a poll reads a
    /// new partition from its earliest offset until then.
    ///
    /// # Errors
    /// [`SupplierError::Client`] when the client rejects the assignment.
    fn assign(
        &mut self,
        partitions: &[StreamPartition<Self::PartitionId>],
    ) -> SupplierResult<(), Self>;

    /// The partitions currently assigned, sorted (Druid `getAssignment`).
    fn assignment(&self) -> Vec<StreamPartition<Self::PartitionId>>;

    /// Sets the next offset to read from `partition` (Druid `seek`).
    ///
    /// # Errors
    /// [`SupplierError::NotAssigned`] when the partition is not assigned;
    /// [`SupplierError::OffsetOutOfRange`] when `offset` is below the earliest retained offset or
    /// above the latest offset (the position is then unchanged).
    fn seek(
        &mut self,
        partition: &StreamPartition<Self::PartitionId>,
        offset: Self::SequenceNumber,
    ) -> SupplierResult<(), Self>;

    /// Moves each of `partitions` to its earliest retained offset (Druid `seekToEarliest`).
    ///
    /// # Errors
    /// [`SupplierError::NotAssigned`], or the errors of [`RecordSupplier::earliest_offset`].
    fn seek_to_earliest(
        &mut self,
        partitions: &[StreamPartition<Self::PartitionId>],
    ) -> SupplierResult<(), Self>;

    /// Moves each of `partitions` to its latest offset, so only records written from now on are
    /// read (Druid `seekToLatest`).
    ///
    /// # Errors
    /// [`SupplierError::NotAssigned`], or the errors of [`RecordSupplier::latest_offset`].
    fn seek_to_latest(
        &mut self,
        partitions: &[StreamPartition<Self::PartitionId>],
    ) -> SupplierResult<(), Self>;

    /// Reads the next records of the assigned partitions, waiting up to `timeout` when none is
    /// available (Druid `poll`). An empty batch means nothing arrived in time. Positions advance
    /// past the returned records.
    ///
    /// # Errors
    /// [`SupplierError::OffsetOutOfRange`] when a partition's position fell out of the retained
    /// range (e.g. retention dropped it); [`SupplierError::CannotConnect`] when the service is
    /// gone.
    fn poll(&mut self, timeout: Duration) -> SupplierResult<Vec<RecordOf<Self>>, Self>;

    /// The offset the next record written to `partition` will get: Kafka's log end offset (high
    /// watermark, or last stable offset under `read_committed`). Druid `getLatestSequenceNumber`.
    /// The partition need not be assigned.
    ///
    /// # Errors
    /// [`SupplierError::StreamNotFound`], [`SupplierError::CannotConnect`],
    /// [`SupplierError::Client`].
    fn latest_offset(
        &self,
        partition: &StreamPartition<Self::PartitionId>,
    ) -> SupplierResult<Self::SequenceNumber, Self>;

    /// The earliest offset `partition` still retains (Druid `getEarliestSequenceNumber`); equals
    /// [`RecordSupplier::latest_offset`] when the partition is empty. The partition need not be
    /// assigned.
    ///
    /// # Errors
    /// As [`RecordSupplier::latest_offset`].
    fn earliest_offset(
        &self,
        partition: &StreamPartition<Self::PartitionId>,
    ) -> SupplierResult<Self::SequenceNumber, Self>;

    /// The next offset to read from `partition` (Druid `getPosition`): the sought offset, or one
    /// past the last record returned. `None` when the partition is not assigned or has no
    /// position yet (assigned, never sought, nothing read).
    fn position(
        &self,
        partition: &StreamPartition<Self::PartitionId>,
    ) -> Option<Self::SequenceNumber>;

    /// How far behind the stream's tip the last read of `partition` was, in milliseconds
    /// (Kinesis's `MillisBehindLatest` of the last `GetRecords`; 0 when caught up). `None` when
    /// the stream does not report it (Kafka) or nothing was read yet.
    fn millis_behind_latest(&self, _partition: &StreamPartition<Self::PartitionId>) -> Option<i64> {
        None
    }
}
