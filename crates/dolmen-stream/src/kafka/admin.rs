//! Topic creation and a record producer, for tests and benchmarks.
//!
//! Both are blocking, like the supplier: call them from plain threads, not from the async
//! reactor.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};

use super::{
    BOOTSTRAP_SERVERS, DEFAULT_REQUEST_TIMEOUT, KafkaSupplierError, client_config, creation_error,
    request_error,
};
use crate::supplier::SupplierError;

fn servers_only(bootstrap_servers: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(BOOTSTRAP_SERVERS.to_string(), bootstrap_servers.to_string())])
}

/// Creates Kafka topics (`rdkafka` `AdminClient`), for tests and benchmarks.
pub struct KafkaAdmin {
    client: AdminClient<DefaultClientContext>,
    bootstrap_servers: String,
    timeout: Duration,
}

impl fmt::Debug for KafkaAdmin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaAdmin")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KafkaAdmin {
    /// An admin client for the brokers `bootstrap_servers` (`host:port[,host:port...]`); each
    /// request waits up to [`DEFAULT_REQUEST_TIMEOUT`].
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] when `bootstrap_servers` is blank.
    pub fn new(bootstrap_servers: &str) -> Result<Self, KafkaSupplierError> {
        let (config, bootstrap_servers) =
            client_config(&servers_only(bootstrap_servers), &[], &[])?;
        let client = config.create().map_err(creation_error)?;
        Ok(Self {
            client,
            bootstrap_servers,
            timeout: DEFAULT_REQUEST_TIMEOUT,
        })
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1) and waits until its
    /// metadata shows them.
    ///
    /// # Errors
    /// [`SupplierError::CannotConnect`] when no broker answers; [`SupplierError::Client`] when the
    /// broker refuses (e.g. the topic exists).
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), KafkaSupplierError> {
        let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new()
            .request_timeout(Some(self.timeout))
            .operation_timeout(Some(self.timeout));
        let results =
            futures::executor::block_on(self.client.create_topics([&new_topic], &options))
                .map_err(|e| request_error(&e, &self.bootstrap_servers, topic))?;
        for result in results {
            if let Err((name, code)) = result {
                return Err(SupplierError::Client(format!(
                    "creating topic `{name}`: {code}"
                )));
            }
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let metadata = self
                .client
                .inner()
                .fetch_metadata(Some(topic), self.timeout)
                .map_err(|e| request_error(&e, &self.bootstrap_servers, topic))?;
            let visible = metadata.topics().iter().any(|t| {
                t.name() == topic
                    && t.error().is_none()
                    && t.partitions().len() == usize::try_from(partitions).unwrap_or(0)
            });
            if visible {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SupplierError::Client(format!(
                    "topic `{topic}` was created but its {partitions} partitions did not appear in the metadata"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One record for [`KafkaTestProducer`] to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The target partition; `None` lets the producer's partitioner choose.
    pub partition: Option<i32>,
    /// The record key.
    pub key: Option<Vec<u8>>,
    /// The record value; `None` sends a tombstone.
    pub value: Option<Vec<u8>>,
    /// Record headers.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The record's create time in milliseconds since the Unix epoch; `None` lets the producer
    /// use the current time.
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

/// Collects delivery reports by the sequence number given to each record.
#[derive(Debug, Default)]
struct DeliveryReports {
    reports: Mutex<HashMap<usize, Result<Delivery, String>>>,
}

impl ClientContext for DeliveryReports {}

impl ProducerContext for DeliveryReports {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, id: Self::DeliveryOpaque) {
        let report = match result {
            Ok(message) => Ok(Delivery {
                partition: message.partition(),
                offset: message.offset(),
            }),
            Err((err, _)) => Err(err.to_string()),
        };
        self.reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(*id, report);
    }
}

/// A blocking Kafka producer that reports where each record went, for tests and benchmarks.
///
/// It sends one record per produce batch (`linger.ms=0`, `batch.num.messages=1`): tansu's
/// in-memory engine reports a wrong latest offset for multi-record batches (TEST-SERVICES.md).
pub struct KafkaTestProducer {
    producer: BaseProducer<DeliveryReports>,
    bootstrap_servers: String,
    timeout: Duration,
}

impl fmt::Debug for KafkaTestProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaTestProducer")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KafkaTestProducer {
    /// A producer for the brokers `bootstrap_servers`; a send waits up to
    /// [`DEFAULT_REQUEST_TIMEOUT`] for its delivery reports.
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] when `bootstrap_servers` is blank.
    pub fn new(bootstrap_servers: &str) -> Result<Self, KafkaSupplierError> {
        let timeout_ms = DEFAULT_REQUEST_TIMEOUT.as_millis().to_string();
        let (config, bootstrap_servers) = client_config(
            &servers_only(bootstrap_servers),
            &[],
            &[
                ("linger.ms", "0"),
                ("batch.num.messages", "1"),
                ("message.timeout.ms", timeout_ms.as_str()),
            ],
        )?;
        let producer = config
            .create_with_context(DeliveryReports::default())
            .map_err(creation_error)?;
        Ok(Self {
            producer,
            bootstrap_servers,
            timeout: DEFAULT_REQUEST_TIMEOUT,
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

    /// Sends `records` to `topic` in order and waits for all acknowledgements; returns where each
    /// went, in the order given.
    ///
    /// # Errors
    /// [`SupplierError::Client`] when a record is refused or not acknowledged within the timeout.
    pub fn send_all(
        &mut self,
        topic: &str,
        records: &[ProducerRecord],
    ) -> Result<Vec<Delivery>, KafkaSupplierError> {
        let reports = &self.producer.context().reports;
        reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let deadline = Instant::now() + self.timeout;
        for (id, record) in records.iter().enumerate() {
            let mut base = BaseRecord::with_opaque_to(topic, Box::new(id));
            if let Some(partition) = record.partition {
                base = base.partition(partition);
            }
            if let Some(key) = &record.key {
                base = base.key(key);
            }
            if let Some(value) = &record.value {
                base = base.payload(value);
            }
            if let Some(timestamp) = record.timestamp_ms {
                base = base.timestamp(timestamp);
            }
            if !record.headers.is_empty() {
                let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
                for (key, value) in &record.headers {
                    headers = headers.insert(Header {
                        key: key.as_str(),
                        value: value.as_ref(),
                    });
                }
                base = base.headers(headers);
            }
            // A full local queue hands the record back: serve delivery reports and retry.
            loop {
                match self.producer.send(base) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                        if Instant::now() < deadline =>
                    {
                        self.producer.poll(Duration::from_millis(10));
                        base = back;
                    }
                    Err((err, _)) => {
                        return Err(SupplierError::Client(format!(
                            "producing to `{topic}`: {err}"
                        )));
                    }
                }
            }
        }
        loop {
            self.producer.poll(Duration::from_millis(10));
            let done = reports
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len()
                >= records.len();
            if done {
                break;
            }
            if Instant::now() >= deadline {
                return Err(SupplierError::Client(format!(
                    "producing to `{topic}`: not every record was acknowledged within {:?}",
                    self.timeout
                )));
            }
        }
        let mut reports = reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (0..records.len())
            .map(|id| match reports.remove(&id) {
                Some(Ok(delivery)) => Ok(delivery),
                Some(Err(message)) => Err(SupplierError::Client(format!(
                    "producing to `{topic}`: {message}"
                ))),
                None => Err(SupplierError::Client(format!(
                    "producing to `{topic}`: no delivery report for record {id}"
                ))),
            })
            .collect()
    }
}
