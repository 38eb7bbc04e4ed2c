//! Kafka (`logstream`): [`KafkaRecordSupplier`], the [`RecordSupplier`] over `rdkafka`.
//!
//! Druid: `org.apache.druid.indexing.kafka.KafkaRecordSupplier`. The consumer is librdkafka's
//! (2.12, built from the sources bundled with `rdkafka-sys`; ADR 0008), used as Druid uses the
//! Java consumer: a [`BaseConsumer`] with a manual assignment at explicit offsets, no consumer
//! group membership, no offset commits (`enable.auto.commit=false`,
//! `enable.auto.offset.store=false`) and `isolation.level=read_committed`. Offsets live in
//! Dolmen's metadata store, not in Kafka.
//!
//! # Offset out of range
//! Kafka brokers answer a fetch outside the retained range with `OFFSET_OUT_OF_RANGE`; with
//! `auto.offset.reset=error` librdkafka surfaces that as a consumer error, which
//! [`KafkaRecordSupplier::poll`] turns into [`SupplierError::OffsetOutOfRange`] after finding the
//! partition by its watermarks. Some Kafka-protocol brokers (tansu, the test broker) instead answer
//! a fetch past the log end with an empty batch, which would look like "no new data" forever, so
//! [`RecordSupplier::seek`] also checks the requested offset against the partition's watermarks
//! and fails at once when it is outside `[earliest, latest]`.
//!
//! [`KafkaAdmin`] (create topics) and [`KafkaTestProducer`] (produce records and learn their
//! offsets) serve tests and benchmarks.

mod admin;

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

pub use admin::{Delivery, KafkaAdmin, KafkaTestProducer, ProducerRecord};

use crate::supplier::{
    OrderedRecord, RecordSupplier, StreamPartition, SupplierError, SupplierResult,
};

/// The error type of the Kafka supplier: partitions are `i32`, offsets `i64`.
pub type KafkaSupplierError = SupplierError<i32, i64>;

/// The consumer property that names the brokers; required in `consumerProperties`.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";

/// The default bound on one metadata or offsets request ([`KafkaRecordSupplier::partition_ids`],
/// [`RecordSupplier::latest_offset`], the range check of a seek).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most records one [`KafkaRecordSupplier::poll`] returns unless changed with
/// [`KafkaRecordSupplier::with_max_poll_records`] (the Java consumer's `max.poll.records`
/// default, which Druid keeps).
pub const DEFAULT_MAX_POLL_RECORDS: usize = 500;

/// Consumer settings applied before the user's `consumerProperties`, which may override them.
/// Druid: `KafkaConsumerConfigs.getConsumerProperties`.
const CONSUMER_DEFAULTS: &[(&str, &str)] = &[
    ("isolation.level", "read_committed"),
    // Report a fetch outside the retained range instead of silently jumping (Druid: "none").
    ("auto.offset.reset", "error"),
    ("enable.partition.eof", "false"),
    // Druid's `metadata.max.age.ms=10000`: notice new partitions within 10 s.
    ("topic.metadata.refresh.interval.ms", "10000"),
    // librdkafka's default is 500 ms. A broker answers a fetch as soon as it has
    // `fetch.min.bytes` (1), but some (tansu) hold every fetch until this wait expires, which
    // alone would put half a second between produce and queryable; 50 ms keeps the
    // sub-second target at the cost of more empty fetches on an idle topic. Measured with
    // tansu at 10k events/s: produce-to-fetch p99 598 ms at 500 ms, 212 ms at 100, 122 ms at 20.
    ("fetch.wait.max.ms", "50"),
];

/// Consumer settings applied after the user's properties: offsets are never committed to Kafka.
const CONSUMER_FORCED: &[(&str, &str)] = &[
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
];

/// Reads Kafka topics for streaming ingestion. See the module docs.
pub struct KafkaRecordSupplier {
    consumer: BaseConsumer,
    bootstrap_servers: String,
    /// The assignment, with the next offset to read where known.
    positions: BTreeMap<StreamPartition<i32>, Option<i64>>,
    /// An error met by a poll that had already read records; the next poll reports it.
    pending_error: Option<KafkaSupplierError>,
    /// The positions changed since the consumer was last assigned: the next poll assigns them
    /// once. Assigning on every seek made librdkafka 2.12 abort
    /// (`rd_kafka_assignment_partition_stopped: Assertion rktp->rktp_started failed`) when a
    /// task sought several partitions in a row, stopping partitions that had not started yet.
    assignment_dirty: bool,
    request_timeout: Duration,
    max_poll_records: usize,
}

impl fmt::Debug for KafkaRecordSupplier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaRecordSupplier")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("positions", &self.positions)
            .field("request_timeout", &self.request_timeout)
            .field("max_poll_records", &self.max_poll_records)
            .finish_non_exhaustive()
    }
}

/// Builds a librdkafka client configuration from `consumerProperties`: `defaults`, then the
/// user's properties verbatim, then `forced`.
///
/// # Errors
/// [`SupplierError::InvalidConfig`] naming `consumerProperties.bootstrap.servers` when it is
/// missing or blank.
fn client_config(
    properties: &BTreeMap<String, String>,
    defaults: &[(&str, &str)],
    forced: &[(&str, &str)],
) -> Result<(ClientConfig, String), KafkaSupplierError> {
    let servers = properties
        .get(BOOTSTRAP_SERVERS)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            SupplierError::InvalidConfig(format!(
                "consumerProperties.{BOOTSTRAP_SERVERS} is required: the Kafka brokers to read from, as host:port[,host:port...]"
            ))
        })?
        .to_string();
    let mut config = ClientConfig::new();
    for (key, value) in defaults {
        config.set(*key, *value);
    }
    for (key, value) in properties {
        config.set(key, value);
    }
    for (key, value) in forced {
        config.set(*key, *value);
    }
    Ok((config, servers))
}

/// Maps a client-creation failure (librdkafka rejects a property) to `InvalidConfig`.
fn creation_error(err: KafkaError) -> KafkaSupplierError {
    match err {
        KafkaError::ClientCreation(message) => SupplierError::InvalidConfig(format!(
            "consumerProperties rejected by the Kafka client: {message}"
        )),
        err @ KafkaError::ClientConfig(..) => SupplierError::InvalidConfig(format!(
            "consumerProperties rejected by the Kafka client: {err}"
        )),
        other => SupplierError::Client(other.to_string()),
    }
}

/// Whether an error code means that no broker could be reached.
fn is_connection_failure(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::Resolve
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::BrokerNotAvailable
    )
}

/// Whether an error code means that the topic or partition does not exist.
fn is_unknown_topic(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownPartition
    )
}

/// Maps a librdkafka error of a request about `stream` to the supplier's error.
fn request_error(err: &KafkaError, servers: &str, stream: &str) -> KafkaSupplierError {
    match err.rdkafka_error_code() {
        Some(code) if is_connection_failure(code) => SupplierError::CannotConnect {
            target: format!("Kafka brokers {servers}"),
            reason: err.to_string(),
        },
        Some(code) if is_unknown_topic(code) => SupplierError::StreamNotFound(stream.to_string()),
        _ => SupplierError::Client(err.to_string()),
    }
}

impl KafkaRecordSupplier {
    /// A supplier configured from a supervisor's `consumerProperties`.
    ///
    /// The properties are librdkafka configuration properties, passed through verbatim (so
    /// `security.protocol`, `sasl.*` and `ssl.*` work); `bootstrap.servers` is required. Unless
    /// given, `group.id` is generated (`dolmen-logstream-<uuid>`): the supplier joins no group and
    /// commits nothing, the id only labels the client. No connection is made until the first
    /// call that needs one.
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] when `bootstrap.servers` is missing or librdkafka rejects
    /// a property (the message names it). Java-client-only properties (e.g. `sasl.jaas.config`)
    /// are not librdkafka properties and are rejected.
    pub fn new(consumer_properties: &BTreeMap<String, String>) -> Result<Self, KafkaSupplierError> {
        let (mut config, bootstrap_servers) =
            client_config(consumer_properties, CONSUMER_DEFAULTS, CONSUMER_FORCED)?;
        if !consumer_properties.contains_key("group.id") {
            config.set(
                "group.id",
                format!("dolmen-logstream-{}", uuid::Uuid::new_v4()),
            );
        }
        let consumer: BaseConsumer = config.create().map_err(creation_error)?;
        Ok(Self {
            consumer,
            bootstrap_servers,
            positions: BTreeMap::new(),
            pending_error: None,
            assignment_dirty: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_poll_records: DEFAULT_MAX_POLL_RECORDS,
        })
    }

    /// Bounds each metadata and offsets request (default [`DEFAULT_REQUEST_TIMEOUT`]); an
    /// unreachable broker fails a call with [`SupplierError::CannotConnect`] after about this
    /// long.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Caps how many records one poll returns (at least one; default
    /// [`DEFAULT_MAX_POLL_RECORDS`]).
    pub fn with_max_poll_records(mut self, max_poll_records: usize) -> Self {
        self.max_poll_records = max_poll_records.max(1);
        self
    }

    /// The brokers this supplier reads from (`bootstrap.servers`).
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap_servers
    }

    /// `(earliest, latest)` offsets of a partition.
    fn watermarks(
        &self,
        partition: &StreamPartition<i32>,
    ) -> Result<(i64, i64), KafkaSupplierError> {
        self.consumer
            .fetch_watermarks(&partition.stream, partition.partition, self.request_timeout)
            .map_err(|e| request_error(&e, &self.bootstrap_servers, &partition.stream))
    }

    fn assigned(&self, partition: &StreamPartition<i32>) -> Result<(), KafkaSupplierError> {
        if self.positions.contains_key(partition) {
            Ok(())
        } else {
            Err(SupplierError::NotAssigned {
                stream: partition.stream.clone(),
                partition: partition.partition,
            })
        }
    }

    /// Hands librdkafka the whole assignment at the tracked positions. A seek re-assigns rather
    /// than calling `rd_kafka_seek`, which fails on a partition whose fetcher has not started yet
    /// (right after an assign); librdkafka discards records fetched under the old assignment.
    fn apply_assignment(&mut self) -> Result<(), KafkaSupplierError> {
        let mut list = TopicPartitionList::with_capacity(self.positions.len());
        for (partition, position) in &self.positions {
            let offset = position.map_or(Offset::Beginning, Offset::Offset);
            list.add_partition_offset(&partition.stream, partition.partition, offset)
                .map_err(|e| SupplierError::Client(e.to_string()))?;
        }
        self.consumer
            .assign(&list)
            .map_err(|e| SupplierError::Client(format!("assigning partitions: {e}")))?;
        Ok(())
    }

    /// Finds an assigned partition whose position is outside its retained range (after the
    /// consumer reported an out-of-range fetch, which does not say which partition).
    fn find_out_of_range(&self) -> Result<Option<KafkaSupplierError>, KafkaSupplierError> {
        for (partition, position) in &self.positions {
            let Some(offset) = *position else { continue };
            let (earliest, latest) = self.watermarks(partition)?;
            if offset < earliest || offset > latest {
                return Ok(Some(SupplierError::OffsetOutOfRange {
                    stream: partition.stream.clone(),
                    partition: partition.partition,
                    offset,
                    earliest,
                    latest,
                }));
            }
        }
        Ok(None)
    }

    /// Turns a consumer error met while polling into the error to report, or `None` for a
    /// transient error that librdkafka recovers from by itself.
    fn poll_error(&self, err: &KafkaError) -> Option<KafkaSupplierError> {
        let code = err.rdkafka_error_code();
        match code {
            Some(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange) => {
                Some(match self.find_out_of_range() {
                    Ok(Some(out_of_range)) => out_of_range,
                    Ok(None) => SupplierError::Client(format!(
                        "the broker reported an offset out of range but every assigned position is within its partition's range: {err}"
                    )),
                    Err(lookup) => lookup,
                })
            }
            Some(RDKafkaErrorCode::AllBrokersDown) => Some(SupplierError::CannotConnect {
                target: format!("Kafka brokers {}", self.bootstrap_servers),
                reason: err.to_string(),
            }),
            Some(c) if is_connection_failure(c) => {
                tracing::debug!(error = %err, "transient kafka consumer error");
                None
            }
            _ if matches!(err, KafkaError::PartitionEOF(_)) => None,
            _ if matches!(err, KafkaError::MessageConsumptionFatal(_)) => {
                Some(SupplierError::Client(err.to_string()))
            }
            Some(c) if is_unknown_topic(c) => Some(SupplierError::Client(err.to_string())),
            _ => {
                tracing::warn!(error = %err, "kafka consumer error");
                None
            }
        }
    }
}

impl RecordSupplier for KafkaRecordSupplier {
    type PartitionId = i32;
    type SequenceNumber = i64;

    fn partition_ids(&self, stream: &str) -> SupplierResult<Vec<i32>, Self> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(stream), self.request_timeout)
            .map_err(|e| request_error(&e, &self.bootstrap_servers, stream))?;
        let topic = metadata
            .topics()
            .iter()
            .find(|t| t.name() == stream)
            .ok_or_else(|| SupplierError::StreamNotFound(stream.to_string()))?;
        if let Some(err) = topic.error() {
            let code = RDKafkaErrorCode::from(err);
            return Err(if is_unknown_topic(code) {
                SupplierError::StreamNotFound(stream.to_string())
            } else {
                SupplierError::Client(format!("metadata of topic `{stream}`: {code}"))
            });
        }
        let mut ids: Vec<i32> = topic.partitions().iter().map(|p| p.id()).collect();
        if ids.is_empty() {
            return Err(SupplierError::StreamNotFound(stream.to_string()));
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn assign(&mut self, partitions: &[StreamPartition<i32>]) -> SupplierResult<(), Self> {
        let mut positions = BTreeMap::new();
        for partition in partitions {
            let kept = self.positions.get(partition).copied().flatten();
            positions.insert(partition.clone(), kept);
        }
        self.positions = positions;
        self.pending_error = None;
        self.assignment_dirty = true;
        Ok(())
    }

    fn assignment(&self) -> Vec<StreamPartition<i32>> {
        self.positions.keys().cloned().collect()
    }

    fn seek(&mut self, partition: &StreamPartition<i32>, offset: i64) -> SupplierResult<(), Self> {
        self.assigned(partition)?;
        let (earliest, latest) = self.watermarks(partition)?;
        if offset < earliest || offset > latest {
            return Err(SupplierError::OffsetOutOfRange {
                stream: partition.stream.clone(),
                partition: partition.partition,
                offset,
                earliest,
                latest,
            });
        }
        self.positions.insert(partition.clone(), Some(offset));
        self.pending_error = None;
        self.assignment_dirty = true;
        Ok(())
    }

    fn seek_to_earliest(
        &mut self,
        partitions: &[StreamPartition<i32>],
    ) -> SupplierResult<(), Self> {
        for partition in partitions {
            self.assigned(partition)?;
            let (earliest, _) = self.watermarks(partition)?;
            self.positions.insert(partition.clone(), Some(earliest));
        }
        self.pending_error = None;
        self.assignment_dirty = true;
        Ok(())
    }

    fn seek_to_latest(&mut self, partitions: &[StreamPartition<i32>]) -> SupplierResult<(), Self> {
        for partition in partitions {
            self.assigned(partition)?;
            let (_, latest) = self.watermarks(partition)?;
            self.positions.insert(partition.clone(), Some(latest));
        }
        self.pending_error = None;
        self.assignment_dirty = true;
        Ok(())
    }

    fn poll(&mut self, timeout: Duration) -> SupplierResult<Vec<OrderedRecord<i32, i64>>, Self> {
        if let Some(err) = self.pending_error.take() {
            return Err(err);
        }
        if self.assignment_dirty {
            self.apply_assignment()?;
            self.assignment_dirty = false;
        }
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < self.max_poll_records {
            // Wait for the first record; then take only what is already fetched.
            let wait = if out.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            let message = match self.consumer.poll(wait) {
                None => break,
                Some(Ok(message)) => message,
                Some(Err(err)) => match self.poll_error(&err) {
                    None if Instant::now() < deadline => continue,
                    None => break,
                    Some(err) if out.is_empty() => return Err(err),
                    Some(err) => {
                        // Hand out what was read (positions already moved past it) first.
                        self.pending_error = Some(err);
                        break;
                    }
                },
            };
            let key = StreamPartition::new(message.topic(), message.partition());
            let Some(position) = self.positions.get_mut(&key) else {
                // Fetched under an assignment that has since changed.
                continue;
            };
            if position.is_some_and(|p| message.offset() < p) {
                continue;
            }
            *position = Some(message.offset() + 1);
            let headers = message
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|header| (header.key.to_string(), header.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default();
            out.push(OrderedRecord {
                stream: key.stream,
                partition: key.partition,
                offset: message.offset(),
                key: message.key().map(<[u8]>::to_vec),
                value: message.payload().map(<[u8]>::to_vec),
                headers,
                timestamp_ms: message.timestamp().to_millis(),
            });
        }
        Ok(out)
    }

    fn latest_offset(&self, partition: &StreamPartition<i32>) -> SupplierResult<i64, Self> {
        Ok(self.watermarks(partition)?.1)
    }

    fn earliest_offset(&self, partition: &StreamPartition<i32>) -> SupplierResult<i64, Self> {
        Ok(self.watermarks(partition)?.0)
    }

    fn position(&self, partition: &StreamPartition<i32>) -> Option<i64> {
        self.positions.get(partition).copied().flatten()
    }
}

#[cfg(test)]
mod tests;
