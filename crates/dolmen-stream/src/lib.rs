//! Seekable-stream record suppliers for Dolmen's streaming ingestion.
//!
//! Streaming ingestion reads ordered, partitioned, replayable streams: Kafka topics (the
//! `logstream` supervisor, Druid's Kafka supervisor) and Kinesis streams (`shardstream`, Druid's
//! Kinesis supervisor).
//! This crate holds the client side of that: the [`RecordSupplier`] trait, modelled on Druid's
//! `org.apache.druid.indexing.seekablestream.common.RecordSupplier`, and its implementations:
//!
//! - [`kafka::KafkaRecordSupplier`]: Kafka through `rskafka`, a pure-Rust client (patched copy in
//!   `vendor/rskafka`; TLS through rustls; ADR 0016), configured from Druid's `consumerProperties`
//!   by [`kafka::config`], plus [`kafka::KafkaAdmin`] and [`kafka::KafkaTestProducer`] for tests
//!   and benchmarks;
//! - [`kinesis::KinesisRecordSupplier`]: Kinesis through the AWS SDK (`aws-sdk-kinesis`, rustls +
//!   ring; ADR 0023): shard ids as partitions, numerically ordered sequence numbers
//!   ([`kinesis::KinesisSequence`]), closed shards read to Druid's end-of-shard marker, plus
//!   [`kinesis::KinesisAdmin`] (create, split, merge, put) for tests and benchmarks;
//! - [`memory::MemorySupplier`]: an in-memory stream, the test double for code that consumes the
//!   trait.
//!
//! # The contract
//! - **Blocking calls on dedicated threads.** A supplier wraps a client that blocks on the
//!   network; tasks and the supervisor run it on their own threads (or `spawn_blocking`), never on
//!   the async reactor (ADR 0008).
//! - **Offsets are "next to read".** Seeking to offset `o` makes `o` the next offset read; the
//!   position is the next offset to read; the latest offset is the one the next record written
//!   will get (what Druid reports as `latestOffsets`). A task that started at `start` and stops at
//!   `end` has read exactly the records with `start <= offset < end`.
//! - **Offset out of range is an error, not a silent reset.** [`SupplierError::OffsetOutOfRange`]
//!   names the partition, the offset and the retained range, so the caller applies
//!   `resetOffsetAutomatically` or fails the task.
//! - **At-least-once reads, exactly-once ingestion by the caller.** Suppliers never commit
//!   offsets to the stream. A task restarted from the offsets last committed in the metadata
//!   store re-reads what followed them; exactly-once comes from publishing segments together with
//!   their end offsets in one metadata transaction (ARCHITECTURE.md, decision 3).

pub mod kafka;
pub mod kinesis;
pub mod kpl;
pub mod memory;
pub mod seekable;
pub mod spec;
pub mod supplier;
pub mod task;

pub use supplier::{
    OrderedRecord, RecordOf, RecordSupplier, StreamPartition, SupplierError, SupplierErrorOf,
    SupplierResult,
};
