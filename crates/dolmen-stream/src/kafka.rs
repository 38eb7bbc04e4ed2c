//! Kafka (`logstream`): [`KafkaRecordSupplier`], the [`RecordSupplier`] over a pure-Rust Kafka
//! client.
//!
//! Druid: `org.apache.druid.indexing.kafka.KafkaRecordSupplier`. The client is [`rskafka`]
//! (with a small patch vendored in `vendor/rskafka`: read_committed filtering of aborted
//! transactions, the next fetch offset past transaction markers; see ADR 0016). It needs nothing
//! but the Rust toolchain to build and speaks TLS through rustls. It is used as Druid uses the
//! Java consumer: partitions are assigned by hand at explicit offsets, there is no consumer
//! group and no offset commit, and `isolation.level` is `read_committed` unless the
//! `consumerProperties` say otherwise. Offsets live in Dolmen's metadata store, not in Kafka.
//! [`config`] maps the `consumerProperties` (Java client names, librdkafka names) onto the
//! client: TLS, SASL (PLAIN, SCRAM), fetch sizes and waits.
//!
//! # Threads
//! The supplier is blocking, like every [`RecordSupplier`]: each call runs the client's async
//! code with `block_on` on the tokio runtime the supplier was created in (the server's, when it
//! is created on a `spawn_blocking` thread), or on a one-thread runtime of its own when created
//! outside any runtime (tests, benchmarks). Never call it from async code.
//!
//! # Fetching
//! After an assignment or a seek, the next [`RecordSupplier::poll`] starts one fetch loop per
//! assigned partition on the runtime (as librdkafka and the Java consumer prefetch). Each loop
//! long-polls the partition's leader (`fetch.max.wait.ms`, `max.partition.fetch.bytes`) and
//! hands its batches to a bounded channel, so fetching overlaps with the task's parsing and
//! memory stays bounded (a few batches per partition). A poll takes records from that channel,
//! at most `max.poll.records`, and moves each partition's position past what it returned; a
//! batch of only transaction markers or aborted records moves the position too.
//!
//! # Offset out of range
//! Kafka brokers answer a fetch outside the retained range with `OFFSET_OUT_OF_RANGE`, which
//! [`KafkaRecordSupplier::poll`] reports as [`SupplierError::OffsetOutOfRange`] with the
//! partition's current range. Some Kafka-protocol brokers (tansu, the test broker) instead answer
//! a fetch past the log end with an empty batch, which would look like "no new data" forever, so
//! [`RecordSupplier::seek`] also checks the requested offset against the partition's range and
//! fails at once when it is outside `[earliest, latest]`.
//!
//! [`KafkaAdmin`] (create topics) and [`KafkaTestProducer`] (produce records and learn their
//! offsets) serve tests and benchmarks.

mod admin;
pub mod config;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rskafka::BackoffConfig;
use rskafka::client::error::{Error as KafkaError, ProtocolError};
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::RecordAndOffset;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use admin::{Delivery, KafkaAdmin, KafkaTestProducer, ProducerRecord};
use config::ClientSettings;
pub use config::{
    BOOTSTRAP_SERVERS, DEFAULT_FETCH_MAX_WAIT, DEFAULT_MAX_POLL_RECORDS, DEFAULT_REQUEST_TIMEOUT,
};

use crate::supplier::{
    OrderedRecord, RecordSupplier, StreamPartition, SupplierError, SupplierResult,
};

/// The error type of the Kafka supplier: partitions are `i32`, offsets `i64`.
pub type KafkaSupplierError = SupplierError<i32, i64>;

/// Where a stream client's async work runs: the runtime it was created in, or one of its own.
/// Shared by the Kafka and the Kinesis suppliers.
pub(crate) enum ClientRuntime {
    Shared(tokio::runtime::Handle),
    Owned(Option<tokio::runtime::Runtime>),
}

impl ClientRuntime {
    /// The current runtime when there is one, else a new one-thread runtime.
    fn new() -> Result<Self, KafkaSupplierError> {
        Self::with_thread_name("dolmen-kafka").map_err(|e| {
            SupplierError::Client(format!("cannot start the Kafka client runtime: {e}"))
        })
    }

    /// The current runtime when there is one, else a new one-thread runtime whose thread is
    /// called `thread_name`.
    pub(crate) fn with_thread_name(thread_name: &str) -> std::io::Result<Self> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => Ok(Self::Shared(handle)),
            Err(_) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(thread_name)
                .enable_all()
                .build()
                .map(|rt| Self::Owned(Some(rt))),
        }
    }

    pub(crate) fn handle(&self) -> tokio::runtime::Handle {
        match self {
            Self::Shared(handle) => handle.clone(),
            Self::Owned(rt) => rt
                .as_ref()
                .expect("runtime present until drop")
                .handle()
                .clone(),
        }
    }

    /// Runs `future` to completion on this thread (which must not be a runtime thread).
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle().block_on(future)
    }
}

impl Drop for ClientRuntime {
    fn drop(&mut self) {
        if let Self::Owned(rt) = self
            && let Some(rt) = rt.take()
        {
            // Never blocks, so a supplier may be dropped anywhere.
            rt.shutdown_background();
        }
    }
}

/// A lazily connected Kafka client and its partition clients, shared with fetch loops.
struct Connection {
    settings: ClientSettings,
    request_timeout: Duration,
    client: tokio::sync::OnceCell<Arc<Client>>,
    partitions: Mutex<HashMap<(String, i32), Arc<PartitionClient>>>,
}

impl Connection {
    fn new(settings: ClientSettings) -> Self {
        let request_timeout = settings.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        Self {
            settings,
            request_timeout,
            client: tokio::sync::OnceCell::new(),
            partitions: Mutex::new(HashMap::new()),
        }
    }

    fn cannot_connect(&self, reason: impl fmt::Display) -> KafkaSupplierError {
        SupplierError::CannotConnect {
            target: format!("Kafka brokers {}", self.settings.bootstrap_servers),
            reason: reason.to_string(),
        }
    }

    /// Bounds `future` by the request timeout.
    async fn timed<T>(
        &self,
        what: &str,
        future: impl Future<Output = Result<T, KafkaSupplierError>>,
    ) -> Result<T, KafkaSupplierError> {
        match tokio::time::timeout(self.request_timeout, future).await {
            Ok(result) => result,
            Err(_) => Err(self.cannot_connect(format!(
                "{what}: no answer within {} ms",
                self.request_timeout.as_millis()
            ))),
        }
    }

    /// The client, connecting (bootstrap, metadata) on first use.
    async fn client(&self) -> Result<Arc<Client>, KafkaSupplierError> {
        self.timed("connecting", async {
            self.client
                .get_or_try_init(|| async {
                    let s = &self.settings;
                    let mut builder =
                        ClientBuilder::new(s.brokers.clone()).backoff_config(BackoffConfig {
                            init_backoff: Duration::from_millis(50),
                            max_backoff: Duration::from_secs(2),
                            base: 2.0,
                            deadline: Some(self.request_timeout),
                        });
                    if let Some(id) = &s.client_id {
                        builder = builder.client_id(id.as_str());
                    }
                    if let Some(tls) = &s.tls {
                        builder = builder.tls_config(Arc::clone(tls));
                    }
                    if let Some(sasl) = &s.sasl {
                        builder = builder.sasl_config(sasl.clone());
                    }
                    builder
                        .build()
                        .await
                        .map(Arc::new)
                        .map_err(|e| self.error(e, None))
                })
                .await
                .cloned()
        })
        .await
    }

    /// The client of one partition (its leader's connection), cached.
    async fn partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<PartitionClient>, KafkaSupplierError> {
        let key = (topic.to_string(), partition);
        if let Some(pc) = self.partitions.lock().expect("partitions lock").get(&key) {
            return Ok(Arc::clone(pc));
        }
        let client = self.client().await?;
        let pc = self
            .timed("finding the partition leader", async {
                client
                    .partition_client(topic, partition, UnknownTopicHandling::Error)
                    .await
                    .map_err(|e| self.error(e, Some(topic)))
            })
            .await?;
        let pc = Arc::new(pc);
        self.partitions
            .lock()
            .expect("partitions lock")
            .insert(key, Arc::clone(&pc));
        Ok(pc)
    }

    /// The partition ids of `topic`, sorted.
    async fn partition_ids(&self, topic: &str) -> Result<Vec<i32>, KafkaSupplierError> {
        let client = self.client().await?;
        let topics = self
            .timed("reading metadata", async {
                client
                    .list_topics()
                    .await
                    .map_err(|e| self.error(e, Some(topic)))
            })
            .await?;
        let ids: Vec<i32> = topics
            .into_iter()
            .find(|t| t.name == topic)
            .map(|t| t.partitions.into_iter().collect())
            .unwrap_or_default();
        if ids.is_empty() {
            return Err(SupplierError::StreamNotFound(topic.to_string()));
        }
        Ok(ids)
    }

    /// `(earliest, latest)` offsets of a partition; latest under the configured isolation level
    /// (the last stable offset under `read_committed`).
    async fn offsets(
        &self,
        partition: &StreamPartition<i32>,
    ) -> Result<(i64, i64), KafkaSupplierError> {
        let pc = self
            .partition(&partition.stream, partition.partition)
            .await?;
        let isolation = self.settings.isolation;
        self.timed("listing offsets", async {
            let (earliest, latest) = tokio::join!(
                pc.get_offset_with_isolation(OffsetAt::Earliest, isolation),
                pc.get_offset_with_isolation(OffsetAt::Latest, isolation),
            );
            let earliest = earliest.map_err(|e| self.error(e, Some(&partition.stream)))?;
            let latest = latest.map_err(|e| self.error(e, Some(&partition.stream)))?;
            Ok((earliest, latest.max(earliest)))
        })
        .await
    }

    /// Maps a client error about `stream` to the supplier's error.
    fn error(&self, err: KafkaError, stream: Option<&str>) -> KafkaSupplierError {
        match classify(&err) {
            ErrorKind::Connection => self.cannot_connect(err),
            ErrorKind::UnknownTopic => match stream {
                Some(stream) => SupplierError::StreamNotFound(stream.to_string()),
                None => SupplierError::Client(err.to_string()),
            },
            ErrorKind::Authentication => SupplierError::Client(format!(
                "authentication with Kafka brokers {} failed: {err}",
                self.settings.bootstrap_servers
            )),
            ErrorKind::OffsetOutOfRange | ErrorKind::Other => {
                SupplierError::Client(err.to_string())
            }
        }
    }
}

/// What a client error means to the supplier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorKind {
    Connection,
    UnknownTopic,
    OffsetOutOfRange,
    Authentication,
    Other,
}

fn classify(err: &KafkaError) -> ErrorKind {
    match err {
        KafkaError::Connection(rskafka::ConnectionError::SaslFailed(_)) => {
            ErrorKind::Authentication
        }
        KafkaError::Connection(_) | KafkaError::Request(_) | KafkaError::Timeout => {
            ErrorKind::Connection
        }
        KafkaError::ServerError { protocol_error, .. } => match protocol_error {
            ProtocolError::UnknownTopicOrPartition => ErrorKind::UnknownTopic,
            ProtocolError::OffsetOutOfRange => ErrorKind::OffsetOutOfRange,
            ProtocolError::SaslAuthenticationFailed
            | ProtocolError::IllegalSaslState
            | ProtocolError::UnsupportedSaslMechanism
            | ProtocolError::TopicAuthorizationFailed
            | ProtocolError::ClusterAuthorizationFailed => ErrorKind::Authentication,
            ProtocolError::LeaderNotAvailable
            | ProtocolError::NotLeaderOrFollower
            | ProtocolError::NetworkException
            | ProtocolError::RequestTimedOut
            | ProtocolError::BrokerNotAvailable => ErrorKind::Connection,
            _ => ErrorKind::Other,
        },
        KafkaError::RetryFailed(rskafka::BackoffError::DeadlineExceded { source, .. }) => {
            if let Some(inner) = source.downcast_ref::<KafkaError>() {
                classify(inner)
            } else if let Some(rskafka::ConnectionError::SaslFailed(_)) =
                source.downcast_ref::<rskafka::ConnectionError>()
            {
                ErrorKind::Authentication
            } else {
                ErrorKind::Connection
            }
        }
        _ => ErrorKind::Other,
    }
}

/// What a fetch loop hands to the supplier.
enum FetchEvent {
    /// Records of one partition (possibly none, when the fetch only moved past transaction
    /// markers or aborted records), and the offset to read next once they are all handed out.
    Batch {
        partition: StreamPartition<i32>,
        records: VecDeque<RecordAndOffset>,
        next_offset: i64,
    },
    /// The partition's position is outside its retained range; the loop has stopped.
    OutOfRange {
        partition: StreamPartition<i32>,
        offset: i64,
    },
    /// The partition cannot be read (the topic is gone); the loop has stopped.
    Failed(KafkaSupplierError),
}

/// The fetch loops of the current assignment.
struct Fetchers {
    events: mpsc::Receiver<FetchEvent>,
    loops: Vec<JoinHandle<()>>,
    /// Batches received and not yet fully handed out, in arrival order.
    pending: VecDeque<(StreamPartition<i32>, VecDeque<RecordAndOffset>, i64)>,
}

impl Drop for Fetchers {
    fn drop(&mut self) {
        for l in &self.loops {
            l.abort();
        }
    }
}

/// Batches each fetch loop may have waiting in the channel: bounds prefetched memory to about
/// this many times `max.partition.fetch.bytes` per partition.
const PREFETCH_BATCHES_PER_PARTITION: usize = 2;

/// Logs a fetch loop's failures once they have lasted a while, then again every such while.
struct FailureLog {
    every: Duration,
    since: Option<Instant>,
}

impl FailureLog {
    fn new(every: Duration) -> Self {
        Self { every, since: None }
    }

    fn note(&mut self, partition: &StreamPartition<i32>, err: &KafkaSupplierError) {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.every {
            tracing::warn!(partition = %partition, error = %err, "kafka fetch failing; retrying");
            self.since = Some(Instant::now());
        }
    }

    fn clear(&mut self) {
        self.since = None;
    }
}

/// Reads one partition from `offset` (its earliest offset when `None`) until stopped.
async fn fetch_loop(
    connection: Arc<Connection>,
    partition: StreamPartition<i32>,
    offset: Option<i64>,
    events: mpsc::Sender<FetchEvent>,
) {
    let mut backoff = Duration::from_millis(50);
    // Transient failures are retried forever, as the Java consumer does; they are logged once
    // they last longer than a request timeout.
    let mut failing = FailureLog::new(connection.request_timeout);
    let pc = loop {
        match connection
            .partition(&partition.stream, partition.partition)
            .await
        {
            Ok(pc) => break pc,
            Err(SupplierError::StreamNotFound(stream)) => {
                let _ = events
                    .send(FetchEvent::Failed(SupplierError::Client(format!(
                        "partition {} of topic `{stream}` does not exist",
                        partition.partition
                    ))))
                    .await;
                return;
            }
            Err(e) => failing.note(&partition, &e),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    };
    let settings = &connection.settings;
    let mut offset = match offset {
        Some(o) => o,
        None => loop {
            match connection.offsets(&partition).await {
                Ok((earliest, _)) => break earliest,
                Err(e) => failing.note(&partition, &e),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        },
    };
    let max_wait = settings.fetch_max_wait;
    let max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
    let bytes = settings.fetch_min_bytes..settings.max_partition_fetch_bytes.saturating_add(1);
    loop {
        let started = Instant::now();
        let fetched = pc
            .fetch_records_with_isolation(offset, bytes.clone(), max_wait_ms, settings.isolation)
            .await;
        match fetched {
            Ok(fetched) => {
                backoff = Duration::from_millis(50);
                failing.clear();
                let moved = fetched.next_offset != offset;
                if !fetched.records.is_empty() || moved {
                    offset = fetched.next_offset;
                    let event = FetchEvent::Batch {
                        partition: partition.clone(),
                        records: fetched.records.into(),
                        next_offset: offset,
                    };
                    if events.send(event).await.is_err() {
                        return;
                    }
                } else if let Some(rest) = max_wait.checked_sub(started.elapsed()) {
                    // Nothing new and the broker did not wait: do not spin on it.
                    tokio::time::sleep(rest).await;
                }
            }
            Err(err) => match classify(&err) {
                ErrorKind::OffsetOutOfRange => {
                    let _ = events
                        .send(FetchEvent::OutOfRange {
                            partition: partition.clone(),
                            offset,
                        })
                        .await;
                    return;
                }
                ErrorKind::UnknownTopic => {
                    let _ = events
                        .send(FetchEvent::Failed(
                            connection.error(err, Some(&partition.stream)),
                        ))
                        .await;
                    return;
                }
                _ => {
                    failing.note(&partition, &connection.error(err, Some(&partition.stream)));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            },
        }
    }
}

/// Reads Kafka topics for streaming ingestion. See the module docs.
pub struct KafkaRecordSupplier {
    /// Dropped before the runtime: stops the fetch loops.
    fetchers: Option<Fetchers>,
    connection: Arc<Connection>,
    /// The assignment, with the next offset to read where known.
    positions: BTreeMap<StreamPartition<i32>, Option<i64>>,
    /// An error met by a poll that had already read records; the next poll reports it.
    pending_error: Option<KafkaSupplierError>,
    /// The positions changed since the fetch loops were started: the next poll restarts them.
    assignment_dirty: bool,
    max_poll_records: usize,
    runtime: ClientRuntime,
}

impl fmt::Debug for KafkaRecordSupplier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaRecordSupplier")
            .field("settings", &self.connection.settings)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

impl KafkaRecordSupplier {
    /// A supplier configured from a supervisor's `consumerProperties` (see [`config`] for the
    /// properties read; `bootstrap.servers` is required). No connection is made until the first
    /// call that needs one.
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] naming the property when `bootstrap.servers` is missing
    /// or a property is unusable (an unknown `security.protocol`, an unreadable truststore...).
    pub fn new(consumer_properties: &BTreeMap<String, String>) -> Result<Self, KafkaSupplierError> {
        let settings = ClientSettings::from_properties(consumer_properties)?;
        let max_poll_records = settings
            .max_poll_records
            .unwrap_or(DEFAULT_MAX_POLL_RECORDS);
        Ok(Self {
            fetchers: None,
            connection: Arc::new(Connection::new(settings)),
            positions: BTreeMap::new(),
            pending_error: None,
            assignment_dirty: false,
            max_poll_records,
            runtime: ClientRuntime::new()?,
        })
    }

    /// Bounds each metadata and offsets request (default [`DEFAULT_REQUEST_TIMEOUT`], or
    /// `request.timeout.ms`); an unreachable broker fails a call with
    /// [`SupplierError::CannotConnect`] after about this long.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        let mut connection = Connection::new(self.connection.settings.clone());
        connection.request_timeout = timeout;
        self.fetchers = None;
        self.connection = Arc::new(connection);
        self.assignment_dirty = true;
        self
    }

    /// Caps how many records one poll returns (at least one; default
    /// [`DEFAULT_MAX_POLL_RECORDS`], or `max.poll.records`).
    pub fn with_max_poll_records(mut self, max_poll_records: usize) -> Self {
        self.max_poll_records = max_poll_records.max(1);
        self
    }

    /// The brokers this supplier reads from (`bootstrap.servers`).
    pub fn bootstrap_servers(&self) -> &str {
        &self.connection.settings.bootstrap_servers
    }

    /// `(earliest, latest)` offsets of a partition.
    fn watermarks(
        &self,
        partition: &StreamPartition<i32>,
    ) -> Result<(i64, i64), KafkaSupplierError> {
        self.runtime.block_on(self.connection.offsets(partition))
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

    /// Starts one fetch loop per assigned partition at its position, replacing any running.
    fn start_fetchers(&mut self) {
        self.fetchers = None;
        let capacity = (self.positions.len() * PREFETCH_BATCHES_PER_PARTITION).max(1);
        let (sender, events) = mpsc::channel(capacity);
        let handle = self.runtime.handle();
        let loops = self
            .positions
            .iter()
            .map(|(partition, position)| {
                handle.spawn(fetch_loop(
                    Arc::clone(&self.connection),
                    partition.clone(),
                    *position,
                    sender.clone(),
                ))
            })
            .collect();
        self.fetchers = Some(Fetchers {
            events,
            loops,
            pending: VecDeque::new(),
        });
    }

    /// The error to report for an out-of-range position, with the partition's current range.
    fn out_of_range(&self, partition: StreamPartition<i32>, offset: i64) -> KafkaSupplierError {
        match self.watermarks(&partition) {
            Ok((earliest, latest)) => SupplierError::OffsetOutOfRange {
                stream: partition.stream,
                partition: partition.partition,
                offset,
                earliest,
                latest,
            },
            Err(e) => e,
        }
    }
}

impl RecordSupplier for KafkaRecordSupplier {
    type PartitionId = i32;
    type SequenceNumber = i64;

    fn partition_ids(&self, stream: &str) -> SupplierResult<Vec<i32>, Self> {
        self.runtime.block_on(self.connection.partition_ids(stream))
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
        if self.positions.is_empty() {
            std::thread::sleep(timeout);
            return Ok(Vec::new());
        }
        if self.assignment_dirty || self.fetchers.is_none() {
            self.start_fetchers();
            self.assignment_dirty = false;
        }
        let deadline = Instant::now() + timeout;
        let max = self.max_poll_records;
        let mut out = Vec::new();
        loop {
            let fetchers = self.fetchers.as_mut().expect("started above");
            // Hand out what was already received, oldest first.
            while out.len() < max {
                let Some((partition, records, next_offset)) = fetchers.pending.front_mut() else {
                    break;
                };
                let Some(position) = self.positions.get_mut(partition) else {
                    fetchers.pending.pop_front();
                    continue;
                };
                while out.len() < max {
                    let Some(r) = records.pop_front() else { break };
                    *position = Some(r.offset + 1);
                    let timestamp_ms = r.record.timestamp.timestamp_millis();
                    out.push(OrderedRecord {
                        stream: partition.stream.clone(),
                        partition: partition.partition,
                        offset: r.offset,
                        key: r.record.key,
                        value: r.record.value,
                        headers: r
                            .record
                            .headers
                            .into_iter()
                            .map(|(k, v)| (k, Some(v)))
                            .collect(),
                        // Kafka writes -1 for a record without a timestamp.
                        timestamp_ms: (timestamp_ms >= 0).then_some(timestamp_ms),
                    });
                }
                if records.is_empty() {
                    *position = Some(position.map_or(*next_offset, |p| p.max(*next_offset)));
                    fetchers.pending.pop_front();
                }
            }
            if out.len() >= max {
                break;
            }
            // Wait for the first records; after that take only what has already arrived.
            let event = if out.is_empty() {
                let wait = deadline.saturating_duration_since(Instant::now());
                let events = &mut fetchers.events;
                self.runtime
                    .block_on(async { tokio::time::timeout(wait, events.recv()).await })
                    .unwrap_or_default()
            } else {
                fetchers.events.try_recv().ok()
            };
            let error = match event {
                None => break,
                Some(FetchEvent::Batch {
                    partition,
                    records,
                    next_offset,
                }) => {
                    fetchers
                        .pending
                        .push_back((partition, records, next_offset));
                    continue;
                }
                Some(FetchEvent::OutOfRange { partition, offset }) => {
                    self.out_of_range(partition, offset)
                }
                Some(FetchEvent::Failed(e)) => e,
            };
            // The failed partition's loop has stopped: unless the caller seeks, the next poll
            // restarts the loops and meets the same error again, as the Java consumer does.
            self.assignment_dirty = true;
            if out.is_empty() {
                return Err(error);
            }
            // Hand out what was read (positions already moved past it) first.
            self.pending_error = Some(error);
            break;
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
