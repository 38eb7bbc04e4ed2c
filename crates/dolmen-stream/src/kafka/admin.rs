//! Topic creation and a record producer, for tests and benchmarks.
//!
//! Both are blocking, like the supplier: call them from plain threads, not from the async
//! reactor.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::partition::Compression;
use rskafka::record::Record;

use super::config::ClientSettings;
use super::{BOOTSTRAP_SERVERS, ClientRuntime, Connection, KafkaSupplierError};
use crate::supplier::SupplierError;

/// `consumerProperties`-style properties naming only the brokers.
fn servers_only(bootstrap_servers: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(BOOTSTRAP_SERVERS.to_string(), bootstrap_servers.to_string())])
}

/// A connection configured from client properties (as `consumerProperties`).
fn connect(
    properties: &BTreeMap<String, String>,
) -> Result<(ClientRuntime, Arc<Connection>), KafkaSupplierError> {
    let settings = ClientSettings::from_properties(properties)?;
    Ok((ClientRuntime::new()?, Arc::new(Connection::new(settings))))
}

/// Creates Kafka topics, for tests and benchmarks.
pub struct KafkaAdmin {
    connection: Arc<Connection>,
    runtime: ClientRuntime,
}

impl fmt::Debug for KafkaAdmin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaAdmin")
            .field("settings", &self.connection.settings)
            .finish_non_exhaustive()
    }
}

impl KafkaAdmin {
    /// An admin client for the brokers `bootstrap_servers` (`host:port[,host:port...]`); each
    /// request waits up to [`super::DEFAULT_REQUEST_TIMEOUT`].
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] when `bootstrap_servers` is blank.
    pub fn new(bootstrap_servers: &str) -> Result<Self, KafkaSupplierError> {
        Self::with_properties(&servers_only(bootstrap_servers))
    }

    /// An admin client configured as a supplier is, from client properties (TLS, SASL...; see
    /// [`super::config`]).
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] naming an unusable property.
    pub fn with_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, KafkaSupplierError> {
        let (runtime, connection) = connect(properties)?;
        Ok(Self {
            connection,
            runtime,
        })
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1) and waits until its
    /// metadata shows them.
    ///
    /// # Errors
    /// [`SupplierError::CannotConnect`] when no broker answers; [`SupplierError::Client`] when the
    /// broker refuses (e.g. the topic exists).
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), KafkaSupplierError> {
        let connection = &self.connection;
        self.runtime.block_on(async {
            let client = connection.client().await?;
            let controller = client
                .controller_client()
                .map_err(|e| connection.error(e, Some(topic)))?;
            let timeout_ms = i32::try_from(connection.request_timeout.as_millis()).unwrap_or(i32::MAX);
            connection
                .timed("creating a topic", async {
                    controller
                        .create_topic(topic, partitions, 1, timeout_ms)
                        .await
                        .map_err(|e| {
                            SupplierError::Client(format!("creating topic `{topic}`: {e}"))
                        })
                })
                .await?;
            let deadline = Instant::now() + connection.request_timeout;
            loop {
                match connection.partition_ids(topic).await {
                    Ok(ids) if ids.len() == usize::try_from(partitions).unwrap_or(0) => {
                        return Ok(());
                    }
                    Ok(_) | Err(SupplierError::StreamNotFound(_)) => {}
                    Err(e) => return Err(e),
                }
                if Instant::now() >= deadline {
                    return Err(SupplierError::Client(format!(
                        "topic `{topic}` was created but its {partitions} partitions did not appear in the metadata"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    }
}

/// One record for [`KafkaTestProducer`] to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The target partition; `None` picks one from the key's hash (round robin without a key).
    pub partition: Option<i32>,
    /// The record key.
    pub key: Option<Vec<u8>>,
    /// The record value; `None` sends a tombstone.
    pub value: Option<Vec<u8>>,
    /// Record headers (a `None` value is sent as an empty one).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The record's create time in milliseconds since the Unix epoch; `None` uses the current
    /// time.
    pub timestamp_ms: Option<i64>,
}

impl ProducerRecord {
    /// A record with a value, for a given partition.
    pub fn to_partition(partition: i32, value: impl Into<Vec<u8>>) -> Self {
        Self {
            partition: Some(partition),
            value: Some(value.into()),
            ..Self::default()
        }
    }
}

/// Where the broker stored a produced record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Delivery {
    /// The partition the record went to.
    pub partition: i32,
    /// The record's offset in that partition.
    pub offset: i64,
}

/// A blocking Kafka producer that reports where each record went, for tests and benchmarks.
///
/// It sends one record per produce request, in order: tansu's in-memory engine reports a wrong
/// latest offset for multi-record batches (TEST-SERVICES.md).
pub struct KafkaTestProducer {
    connection: Arc<Connection>,
    /// Round-robin counter for records with neither partition nor key.
    next_partition: usize,
    runtime: ClientRuntime,
}

impl fmt::Debug for KafkaTestProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaTestProducer")
            .field("settings", &self.connection.settings)
            .finish_non_exhaustive()
    }
}

impl KafkaTestProducer {
    /// A producer for the brokers `bootstrap_servers`; each send waits up to
    /// [`super::DEFAULT_REQUEST_TIMEOUT`] per record.
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] when `bootstrap_servers` is blank.
    pub fn new(bootstrap_servers: &str) -> Result<Self, KafkaSupplierError> {
        Self::with_properties(&servers_only(bootstrap_servers))
    }

    /// A producer configured as a supplier is, from client properties (TLS, SASL...; see
    /// [`super::config`]).
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] naming an unusable property.
    pub fn with_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, KafkaSupplierError> {
        let (runtime, connection) = connect(properties)?;
        Ok(Self {
            connection,
            next_partition: 0,
            runtime,
        })
    }

    /// Sends one record to `topic` and waits for the broker's acknowledgement.
    ///
    /// # Errors
    /// As [`KafkaTestProducer::send_all`].
    pub fn send(
        &mut self,
        topic: &str,
        record: &ProducerRecord,
    ) -> Result<Delivery, KafkaSupplierError> {
        let mut deliveries = self.send_all(topic, std::slice::from_ref(record))?;
        deliveries
            .pop()
            .ok_or_else(|| SupplierError::Client("no delivery report".into()))
    }

    /// Sends `records` to `topic` in order and waits for each acknowledgement; returns where each
    /// went, in the order given.
    ///
    /// # Errors
    /// [`SupplierError::StreamNotFound`] when the topic does not exist;
    /// [`SupplierError::Client`] when a record is refused; [`SupplierError::CannotConnect`]
    /// when it is not acknowledged within the request timeout.
    pub fn send_all(
        &mut self,
        topic: &str,
        records: &[ProducerRecord],
    ) -> Result<Vec<Delivery>, KafkaSupplierError> {
        let connection = Arc::clone(&self.connection);
        let next_partition = &mut self.next_partition;
        self.runtime.block_on(async {
            let mut partition_count = None;
            let mut deliveries = Vec::with_capacity(records.len());
            for record in records {
                let partition = match record.partition {
                    Some(p) => p,
                    None => {
                        let count = match partition_count {
                            Some(n) => n,
                            None => {
                                let n = connection.partition_ids(topic).await?.len();
                                partition_count = Some(n);
                                n
                            }
                        };
                        let slot = match &record.key {
                            Some(key) => murmur2(key) as usize,
                            None => {
                                *next_partition += 1;
                                *next_partition
                            }
                        };
                        i32::try_from(slot % count.max(1)).unwrap_or(0)
                    }
                };
                let pc = connection.partition(topic, partition).await?;
                let timestamp = record
                    .timestamp_ms
                    .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
                    .unwrap_or_else(Utc::now);
                let kafka_record = Record {
                    key: record.key.clone(),
                    value: record.value.clone(),
                    headers: record
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
                        .collect(),
                    timestamp,
                };
                let offsets = connection
                    .timed("producing", async {
                        pc.produce(vec![kafka_record], Compression::NoCompression)
                            .await
                            .map_err(|e| match connection.error(e, Some(topic)) {
                                SupplierError::Client(m) => {
                                    SupplierError::Client(format!("producing to `{topic}`: {m}"))
                                }
                                other => other,
                            })
                    })
                    .await?;
                let offset = offsets.first().copied().ok_or_else(|| {
                    SupplierError::Client(format!("producing to `{topic}`: no offset returned"))
                })?;
                deliveries.push(Delivery { partition, offset });
            }
            Ok(deliveries)
        })
    }
}

/// Kafka's default partitioner hash (murmur2 with Kafka's seed, made non-negative), so keyed
/// records land where Kafka's own producers would put them. Kafka:
/// `org.apache.kafka.common.utils.Utils.murmur2` and `toPositive`.
fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h & 0x7fff_ffff
}

#[cfg(test)]
mod tests {
    use super::murmur2;

    #[test]
    fn murmur2_matches_kafkas_partitioner() {
        // Kafka's UtilsTest.testMurmur2: "21" -> -973932308, "foobar" -> -790332482,
        // "a-little-bit-long-string" -> -985981536, "a-little-bit-longer-string" -> -1486304829,
        // "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8" -> -58897971; made positive.
        for (input, java) in [
            ("21", -973_932_308_i32),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
        ] {
            assert_eq!(
                murmur2(input.as_bytes()),
                (java as u32) & 0x7fff_ffff,
                "{input}"
            );
        }
    }
}
