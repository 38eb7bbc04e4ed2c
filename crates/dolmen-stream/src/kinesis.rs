//! Kinesis (`shardstream`): [`KinesisRecordSupplier`], the [`RecordSupplier`] over the AWS SDK.
//!
//! Druid: `org.apache.druid.indexing.kinesis.KinesisRecordSupplier`. The client is
//! `aws-sdk-kinesis` without its default features (their TLS stack pulls aws-lc-rs, which
//! `deny.toml` bans), with `aws-smithy-http-client`'s rustls + ring HTTPS client; credentials come
//! from the `service.kinesis.accessKey`/`secretKey` runtime properties when set, else from the
//! standard AWS chain (environment, profile, web identity, container, instance metadata), and an
//! `awsAssumedRoleArn` (with `awsExternalId`) is assumed on top of them through STS (ADR 0023).
//!
//! # Partitions and sequence numbers
//! Partitions are shard ids (`shardId-000000000000`). Sequence numbers are
//! [`KinesisSequence`]s: decimal strings of up to 129 digits, ordered **numerically** (by value,
//! never as text), plus Druid's end-of-shard marker `EOS`, which orders after every number. As
//! everywhere in [`RecordSupplier`], offsets are "next to read": after reading the record with
//! sequence number `s` the shard's position is `s + 1`, and [`RecordSupplier::seek`] to `o` reads
//! next the first record with a sequence number `>= o` (`AT_SEQUENCE_NUMBER o`, or
//! `AFTER_SEQUENCE_NUMBER o - 1` when Kinesis rejects `o` because no record has it, or
//! `TRIM_HORIZON` when `o` is the shard's earliest). A closed shard (split or merged away) that
//! has been read to its end has the position `EOS`, and its [`RecordSupplier::latest_offset`] is
//! `EOS` too, so "caught up" (position equals latest) means "fully read" for it.
//!
//! # Latest and earliest
//! Kinesis has no call that returns a shard's last sequence number. The earliest offset is the
//! first record at `TRIM_HORIZON` (the shard's starting sequence number when it is empty); the
//! latest is one past the last record. The first time for a shard it is found by reading from
//! `AT_TIMESTAMP` a few seconds back, then further back (a minute, an hour, a day); after that
//! by reading forward from the latest found before (kept per shard by the client), a request or
//! two. kinesalite never answers an `AT_TIMESTAMP` iterator request with no record after the
//! timestamp: when one goes unanswered for 2 s, the client reads from the trim horizon instead
//! (up to 50 `GetRecords` of 10,000 records) and does not ask `AT_TIMESTAMP` again. A closed
//! shard's latest is `EOS`.
//!
//! # Fetching
//! As Druid's supplier, fetching runs in the background, apart from the task's reading thread:
//! `fetchThreads` fetch workers (async tasks on the client's runtime) take the assigned shards
//! in turn (round robin; one fetch per shard at a time, so its records stay in order), issue one
//! `GetRecords` (at most `recordsPerFetch` records) each, and put what comes into the record
//! buffer ([`buffer`]), which holds at most `recordBufferSizeBytes` bytes (or one larger record).
//! A worker that finds the buffer full waits `recordBufferOfferTimeout`, then again
//! `recordBufferFullWait` at a time, logging that records are processed slower than they are
//! fetched. A shard is fetched again after `fetchDelayMillis` (at least 20 ms after an empty
//! answer, a second after a failed one). [`RecordSupplier::poll`] takes up to `maxBytesPerPoll`
//! bytes of records from the buffer (at least one), waiting up to its timeout for the first; the
//! position it reports follows what it returned, and a closed shard's `EOS` comes after its last
//! record. A seek (or assign) starts the shard's fetching over: what was fetched before is
//! dropped. An expired shard iterator is obtained again from the shard's position.
//! `millisBehindLatest` of the last fetch of each shard is kept for the task's lag report.
//!
//! A seek checks only that the sequence number is not before the shard's earliest record and
//! that Kinesis grants an iterator at it (a few requests); the shard's whole range is read only
//! when that fails, to name it in the error.
//!
//! [`KinesisAdmin`] (create, split and merge streams, put records) serves tests and benchmarks.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::{BehaviorVersion, Region};
use aws_sdk_kinesis::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kinesis::primitives::{Blob, DateTime};
use aws_sdk_kinesis::types::{Shard, ShardIteratorType};

use crate::kafka::ClientRuntime;
use crate::supplier::{
    OrderedRecord, RecordSupplier, StreamPartition, SupplierError, SupplierResult,
};

/// Druid's end-of-shard marker (`KinesisSequenceNumber.END_OF_SHARD_MARKER`): the position of a
/// closed shard that has been read to its end.
pub const END_OF_SHARD_MARKER: &str = "EOS";

/// Druid's default `recordsPerFetch` for the Kinesis supervisor: records per `GetRecords` call.
pub const DEFAULT_RECORDS_PER_FETCH: i32 = 4000;

/// Druid's default `fetchDelayMillis`: the wait between fetches of a shard that had nothing new.
pub const DEFAULT_FETCH_DELAY: Duration = Duration::ZERO;

/// How long one Kinesis API call may take before the supplier reports the service unreachable.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The error type of the Kinesis supplier: partitions are shard ids, offsets
/// [`KinesisSequence`]s.
pub type KinesisSupplierError = SupplierError<String, KinesisSequence>;

/// A Kinesis sequence number, or the end-of-shard marker.
///
/// Ordered numerically: `"9" < "10"`, and leading zeros do not count. [`KinesisSequence::EndOfShard`]
/// orders after every number. Displayed and parsed as Druid writes them: the decimal digits, or
/// `EOS`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KinesisSequence {
    /// A sequence number: decimal digits without leading zeros (`"0"` for zero).
    Number(String),
    /// The end of a closed shard (Druid's `EOS`): everything in the shard has been read.
    EndOfShard,
}

/// A string that is neither a decimal sequence number nor `EOS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a Kinesis sequence number (decimal digits, or `EOS` for the end of a shard)")]
pub struct InvalidSequence(pub String);

impl KinesisSequence {
    /// The sequence number `digits` (leading zeros dropped).
    ///
    /// # Errors
    /// [`InvalidSequence`] when `digits` is empty, longer than 129 digits or not all ASCII digits.
    pub fn number(digits: &str) -> Result<Self, InvalidSequence> {
        if digits.is_empty() || digits.len() > 129 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidSequence(digits.to_owned()));
        }
        let trimmed = digits.trim_start_matches('0');
        Ok(Self::Number(if trimmed.is_empty() {
            "0".to_owned()
        } else {
            trimmed.to_owned()
        }))
    }

    /// Whether this is the end-of-shard marker.
    pub fn is_end_of_shard(&self) -> bool {
        matches!(self, Self::EndOfShard)
    }

    /// The number plus one (the position after the record with this sequence number);
    /// `EOS` stays `EOS`.
    pub fn successor(&self) -> Self {
        match self {
            Self::Number(digits) => {
                let mut bytes = digits.clone().into_bytes();
                let mut i = bytes.len();
                loop {
                    if i == 0 {
                        bytes.insert(0, b'1');
                        break;
                    }
                    i -= 1;
                    if bytes[i] == b'9' {
                        bytes[i] = b'0';
                    } else {
                        bytes[i] += 1;
                        break;
                    }
                }
                Self::Number(String::from_utf8(bytes).expect("ASCII digits"))
            }
            Self::EndOfShard => Self::EndOfShard,
        }
    }

    /// The number minus one; `None` for zero and for `EOS`.
    pub fn predecessor(&self) -> Option<Self> {
        match self {
            Self::Number(digits) if digits != "0" => {
                let mut bytes = digits.clone().into_bytes();
                let mut i = bytes.len();
                while i > 0 {
                    i -= 1;
                    if bytes[i] == b'0' {
                        bytes[i] = b'9';
                    } else {
                        bytes[i] -= 1;
                        break;
                    }
                }
                let text = String::from_utf8(bytes).expect("ASCII digits");
                Some(Self::number(&text).expect("digits stay digits"))
            }
            _ => None,
        }
    }
}

impl Ord for KinesisSequence {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (Self::EndOfShard, Self::EndOfShard) => std::cmp::Ordering::Equal,
            (Self::EndOfShard, Self::Number(_)) => std::cmp::Ordering::Greater,
            (Self::Number(_), Self::EndOfShard) => std::cmp::Ordering::Less,
            // Normalised digits: a longer number is a larger one; equal lengths compare as text.
            (Self::Number(a), Self::Number(b)) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
        }
    }
}

impl PartialOrd for KinesisSequence {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for KinesisSequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(digits) => f.write_str(digits),
            Self::EndOfShard => f.write_str(END_OF_SHARD_MARKER),
        }
    }
}

impl FromStr for KinesisSequence {
    type Err = InvalidSequence;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == END_OF_SHARD_MARKER {
            Ok(Self::EndOfShard)
        } else {
            Self::number(s)
        }
    }
}

/// AWS credentials given explicitly (`service.kinesis.accessKey`/`secretKey`). Their `Debug`
/// never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret_key: String,
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key", &"<redacted>")
            .field("secret_key", &"<redacted>")
            .finish()
    }
}

/// How to reach Kinesis: the `shardstream` ioConfig's connection fields plus the runtime
/// credentials.
#[derive(Debug, Clone, Default)]
pub struct KinesisConfig {
    /// `ioConfig.endpoint`: the service URL (`https://kinesis.us-east-1.amazonaws.com`, or an
    /// emulator's `http://127.0.0.1:4567`). `None`: the region's AWS endpoint.
    pub endpoint: Option<String>,
    /// `ioConfig.region` (Dolmen; Druid derives it from the endpoint). `None`: the region of the
    /// AWS chain (`AWS_REGION`, profile), else `us-east-1`.
    pub region: Option<String>,
    /// Explicit credentials; `None` uses the standard AWS chain.
    pub credentials: Option<StaticCredentials>,
    /// `ioConfig.awsAssumedRoleArn`: a role assumed through STS with the credentials above.
    pub assumed_role_arn: Option<String>,
    /// `ioConfig.awsExternalId`: the external id given when assuming the role.
    pub external_id: Option<String>,
    /// `ioConfig.recordsPerFetch`: the `Limit` of each `GetRecords` call (1 to 10,000).
    pub records_per_fetch: i32,
    /// `ioConfig.fetchDelayMillis`: the wait before asking a shard again after an empty fetch.
    pub fetch_delay: Duration,
    /// `ioConfig.deaggregate`: a KPL aggregated record comes back as its user records (each
    /// with the aggregate's sequence number and its own partition key; see `crate::kpl`).
    pub deaggregate: bool,
    /// The bound on each API call.
    pub request_timeout: Duration,
    /// `tuningConfig.fetchThreads`: how many shard fetches run at once (async fetch workers
    /// taking the task's shards in turn). Default: two per core, at most one per 10 MB of
    /// `recordBufferSizeBytes` (Druid's `computeFetchThreads`), at least one.
    pub fetch_threads: usize,
    /// `tuningConfig.recordBufferSizeBytes`: the bytes of fetched records held for the task
    /// before it takes them (default 100 MB; see [`buffer`]).
    pub record_buffer_bytes: usize,
    /// `tuningConfig.recordBufferOfferTimeout`: how long a fetch worker first waits for room in
    /// a full buffer (default 5 s).
    pub record_buffer_offer_timeout: Duration,
    /// `tuningConfig.recordBufferFullWait`: how long it waits again each time after that
    /// (default 5 s), logging that records are read slower than they are fetched.
    pub record_buffer_full_wait: Duration,
    /// `tuningConfig.maxBytesPerPoll`: the bytes of records one poll takes from the buffer (at
    /// least one record; default 1,000,000).
    pub max_bytes_per_poll: usize,
}

/// Druid's default `recordBufferSizeBytes` (the smaller of 100 MB and a tenth of the heap there;
/// Dolmen has no heap bound, so 100 MB).
pub const DEFAULT_RECORD_BUFFER_BYTES: usize = 100_000_000;

/// Druid's default `maxBytesPerPoll`.
pub const DEFAULT_MAX_BYTES_PER_POLL: usize = 1_000_000;

/// Druid's default `recordBufferOfferTimeout` and `recordBufferFullWait`.
pub const DEFAULT_RECORD_BUFFER_WAIT: Duration = Duration::from_secs(5);

/// What one `GetRecords` may return at most (10 MB), the unit of Druid's cap on `fetchThreads`.
const MAX_FETCH_BYTES: usize = 10_000_000;

/// `fetchThreads` as Druid computes it (`KinesisIndexTask.computeFetchThreads`): the configured
/// number, else two per core; at most one per 10 MB of the record buffer, at least one.
pub fn fetch_threads(configured: Option<usize>, record_buffer_bytes: usize) -> usize {
    let wanted = configured.unwrap_or_else(|| {
        2 * std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let cap = (record_buffer_bytes / MAX_FETCH_BYTES).max(1);
    if wanted > cap {
        tracing::warn!(
            fetch_threads = wanted,
            lowered_to = cap,
            "fetchThreads lowered to one per 10 MB of recordBufferSizeBytes"
        );
    }
    wanted.min(cap).max(1)
}

impl KinesisConfig {
    /// A configuration for `endpoint` (or the region's AWS endpoint when `None`) with Druid's
    /// defaults for the rest.
    pub fn new(endpoint: Option<String>, region: Option<String>) -> Self {
        Self {
            endpoint,
            region,
            credentials: None,
            assumed_role_arn: None,
            external_id: None,
            records_per_fetch: DEFAULT_RECORDS_PER_FETCH,
            fetch_delay: DEFAULT_FETCH_DELAY,
            deaggregate: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            fetch_threads: fetch_threads(None, DEFAULT_RECORD_BUFFER_BYTES),
            record_buffer_bytes: DEFAULT_RECORD_BUFFER_BYTES,
            record_buffer_offer_timeout: DEFAULT_RECORD_BUFFER_WAIT,
            record_buffer_full_wait: DEFAULT_RECORD_BUFFER_WAIT,
            max_bytes_per_poll: DEFAULT_MAX_BYTES_PER_POLL,
        }
    }

    /// What the errors name as the contacted service.
    fn target(&self) -> String {
        match (&self.endpoint, &self.region) {
            (Some(endpoint), _) => format!("Kinesis endpoint {endpoint}"),
            (None, Some(region)) => format!("Kinesis in region {region}"),
            (None, None) => "Kinesis".to_owned(),
        }
    }
}

/// Builds the SDK client: rustls + ring HTTPS, the endpoint and region of `config`, its explicit
/// credentials or the standard chain, and the assumed role.
async fn build_client(config: &KinesisConfig) -> Client {
    use aws_smithy_http_client::{Builder as HttpBuilder, tls};
    let http = HttpBuilder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http.clone());
    loader = match &config.region {
        Some(region) => loader.region(Region::new(region.clone())),
        // Without one (an emulator's endpoint, or a spec read back without its `region`): the
        // environment, then the profile, then us-east-1. Instance metadata is not asked: off
        // EC2 it costs a failed request and a warning for every client a task creates.
        None => loader.region(
            aws_config::meta::region::RegionProviderChain::first_try(
                aws_config::environment::EnvironmentVariableRegionProvider::new(),
            )
            .or_else(aws_config::profile::ProfileFileRegionProvider::new())
            .or_else(Some(Region::new("us-east-1"))),
        ),
    };
    if let Some(creds) = &config.credentials {
        loader = loader.credentials_provider(aws_credential_types::Credentials::new(
            creds.access_key.clone(),
            creds.secret_key.clone(),
            None,
            None,
            "service.kinesis",
        ));
    }
    let mut shared = loader.load().await;
    if shared.region().is_none() {
        shared = shared
            .into_builder()
            .region(Region::new("us-east-1"))
            .build();
    }
    if let Some(role) = &config.assumed_role_arn {
        let mut assume = aws_config::sts::AssumeRoleProvider::builder(role.clone())
            .session_name("dolmen-shardstream")
            .configure(&shared);
        if let Some(external_id) = &config.external_id {
            assume = assume.external_id(external_id.clone());
        }
        let provider = assume.build().await;
        shared = shared
            .into_builder()
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(provider),
            )
            .build();
    }
    let mut builder = aws_sdk_kinesis::config::Builder::from(&shared);
    if let Some(endpoint) = &config.endpoint {
        builder = builder.endpoint_url(endpoint.clone());
    }
    Client::from_conf(builder.build())
}

/// Whether Kinesis refused an iterator request's sequence number (`InvalidArgumentException`).
fn refused(e: &KinesisSupplierError) -> bool {
    matches!(e, SupplierError::Client(m) if m.contains("InvalidArgumentException"))
}

/// A connected client with its configuration and the runtime its calls run on.
struct Connection {
    config: KinesisConfig,
    runtime: ClientRuntime,
    client: Client,
    /// Per `stream/shard`, the latest offset found by the last scan that reached the shard's
    /// tip: the next scan starts after it, so finding the latest offset costs a request or two.
    latest_hints: std::sync::Mutex<BTreeMap<String, KinesisSequence>>,
    /// Set when an `AT_TIMESTAMP` iterator request went unanswered (kinesalite): later latest
    /// searches read from the trim horizon directly.
    at_timestamp_hangs: std::sync::atomic::AtomicBool,
}

impl Connection {
    fn new(config: KinesisConfig) -> Result<Self, KinesisSupplierError> {
        let runtime = ClientRuntime::with_thread_name("dolmen-kinesis").map_err(|e| {
            SupplierError::Client(format!("cannot start the Kinesis client runtime: {e}"))
        })?;
        let client = runtime.block_on(build_client(&config));
        Ok(Self {
            config,
            runtime,
            client,
            latest_hints: std::sync::Mutex::new(BTreeMap::new()),
            at_timestamp_hangs: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Runs `future` on the runtime, bounded by the request timeout.
    fn call<T>(
        &self,
        what: &str,
        future: impl Future<Output = Result<T, KinesisSupplierError>>,
    ) -> Result<T, KinesisSupplierError> {
        let timeout = self.config.request_timeout;
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, future).await })
            .unwrap_or_else(|_| {
                Err(SupplierError::CannotConnect {
                    target: self.config.target(),
                    reason: format!("{what}: no answer within {} ms", timeout.as_millis()),
                })
            })
    }

    /// Maps an SDK error: no response is "cannot connect", a missing stream is
    /// [`SupplierError::StreamNotFound`], anything else a client error with the service's code
    /// and message.
    fn error<E, R>(&self, what: &str, stream: &str, err: SdkError<E, R>) -> KinesisSupplierError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: fmt::Debug,
    {
        match &err {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
                SupplierError::CannotConnect {
                    target: self.config.target(),
                    reason: format!(
                        "{what}: {}",
                        aws_smithy_types::error::display::DisplayErrorContext(&err)
                    ),
                }
            }
            SdkError::ServiceError(service) => {
                let e = service.err();
                match e.code() {
                    Some("ResourceNotFoundException") => {
                        SupplierError::StreamNotFound(stream.to_owned())
                    }
                    code => SupplierError::Client(format!(
                        "{what}: {}: {}",
                        code.unwrap_or("error"),
                        e.message().unwrap_or("no message")
                    )),
                }
            }
            _ => SupplierError::Client(format!(
                "{what}: {}",
                aws_smithy_types::error::display::DisplayErrorContext(&err)
            )),
        }
    }

    /// Every shard of `stream`, open and closed, in the order ListShards gives (creation order).
    async fn list_shards(&self, stream: &str) -> Result<Vec<Shard>, KinesisSupplierError> {
        let mut shards = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = match &next {
                Some(token) => self.client.list_shards().next_token(token),
                None => self.client.list_shards().stream_name(stream),
            };
            let out = request
                .send()
                .await
                .map_err(|e| self.error("ListShards", stream, e))?;
            shards.extend(out.shards().iter().cloned());
            match out.next_token() {
                Some(token) => next = Some(token.to_owned()),
                None => return Ok(shards),
            }
        }
    }

    /// The shard `shard` of `stream`.
    async fn shard(&self, stream: &str, shard: &str) -> Result<Shard, KinesisSupplierError> {
        self.list_shards(stream)
            .await?
            .into_iter()
            .find(|s| s.shard_id() == shard)
            .ok_or_else(|| {
                SupplierError::Client(format!(
                    "shard `{shard}` does not exist in stream `{stream}`"
                ))
            })
    }

    /// A shard iterator of `kind`, at or after `sequence` or at `timestamp` where the kind needs
    /// one.
    async fn iterator(
        &self,
        stream: &str,
        shard: &str,
        kind: ShardIteratorType,
        sequence: Option<&KinesisSequence>,
        timestamp: Option<SystemTime>,
    ) -> Result<Option<String>, KinesisSupplierError> {
        let mut request = self
            .client
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(shard)
            .shard_iterator_type(kind);
        if let Some(sequence) = sequence {
            request = request.starting_sequence_number(sequence.to_string());
        }
        if let Some(timestamp) = timestamp {
            request = request.timestamp(DateTime::from(timestamp));
        }
        let out = request
            .send()
            .await
            .map_err(|e| self.error("GetShardIterator", stream, e))?;
        Ok(out.shard_iterator().map(str::to_owned))
    }

    /// A shard iterator reading from `position`: `AT_SEQUENCE_NUMBER position`, or, when Kinesis
    /// refuses it (a position `s + 1` is no record's number, and Kinesis may reject it as not of
    /// this shard), `AFTER_SEQUENCE_NUMBER s`. The refusal is returned when `position` has no
    /// predecessor.
    async fn iterator_at(
        &self,
        stream: &str,
        shard: &str,
        position: &KinesisSequence,
    ) -> Result<Option<String>, KinesisSupplierError> {
        let at = self
            .iterator(
                stream,
                shard,
                ShardIteratorType::AtSequenceNumber,
                Some(position),
                None,
            )
            .await;
        match (at, position.predecessor()) {
            (Err(e), Some(before)) if refused(&e) => {
                self.iterator(
                    stream,
                    shard,
                    ShardIteratorType::AfterSequenceNumber,
                    Some(&before),
                    None,
                )
                .await
            }
            (at, _) => at,
        }
    }

    /// One `GetRecords` call.
    async fn get_records(
        &self,
        stream: &str,
        iterator: &str,
        limit: i32,
    ) -> Result<aws_sdk_kinesis::operation::get_records::GetRecordsOutput, GetRecordsFailure> {
        self.client
            .get_records()
            .shard_iterator(iterator)
            .limit(limit)
            .send()
            .await
            .map_err(|e| {
                let expired = matches!(&e, SdkError::ServiceError(s)
                    if s.err().code() == Some("ExpiredIteratorException"));
                if expired {
                    GetRecordsFailure::Expired
                } else {
                    GetRecordsFailure::Other(self.error("GetRecords", stream, e))
                }
            })
    }

    /// The sequence number of the first record read from `iterator` onwards, following the
    /// iterator until a record comes or the shard's end (`None`) is reached; at most `max_calls`
    /// calls (Kinesis may answer empty batches before data further on).
    async fn first_record_from(
        &self,
        stream: &str,
        mut iterator: Option<String>,
        last: bool,
    ) -> Result<Option<KinesisSequence>, KinesisSupplierError> {
        let mut found = None;
        let mut calls = 0;
        while let Some(it) = iterator {
            let out = self
                .get_records(stream, &it, if last { 10_000 } else { 1 })
                .await
                .map_err(|f| match f {
                    GetRecordsFailure::Expired => {
                        SupplierError::Client("GetRecords: the shard iterator expired".to_owned())
                    }
                    GetRecordsFailure::Other(e) => e,
                })?;
            if let Some(record) = out.records().last() {
                found = Some(parse_sequence(record.sequence_number())?);
                if !last {
                    return Ok(found);
                }
            }
            calls += 1;
            // An empty batch at the shard's tip: nothing later to find. (Kinesis may answer
            // empty batches before data further on while behind, hence the bounded retries.)
            if out.records().is_empty() && out.millis_behind_latest().unwrap_or(0) == 0
                || calls >= 50
            {
                break;
            }
            iterator = out.next_shard_iterator().map(str::to_owned);
        }
        Ok(found)
    }

    /// For a seek of `shard` to `offset`: `Some((iterator, from_horizon))` when `offset` is a
    /// position within the shard, found cheaply: not before its earliest record (one
    /// `TRIM_HORIZON` read of one record) and granted an iterator (`AT_SEQUENCE_NUMBER offset`,
    /// else `AFTER_SEQUENCE_NUMBER offset - 1`; Kinesis refuses sequence numbers it has not
    /// issued). `None` when it is not, or when that cannot be told this way (an empty shard,
    /// `EOS`): the caller then reads the shard's whole range. Druid's task checks only the
    /// earliest; the latest of a shard costs a scan on an emulator that ignores `AT_TIMESTAMP`
    /// (see the module docs), which made every task start slow.
    async fn iterator_within(
        &self,
        stream: &str,
        shard: &str,
        offset: &KinesisSequence,
    ) -> Result<Option<(Option<String>, bool)>, KinesisSupplierError> {
        if offset.is_end_of_shard() {
            return Ok(None);
        }
        let horizon = self
            .iterator(stream, shard, ShardIteratorType::TrimHorizon, None, None)
            .await?;
        let Some(earliest) = self.first_record_from(stream, horizon, false).await? else {
            return Ok(None);
        };
        if *offset < earliest {
            return Ok(None);
        }
        if *offset == earliest {
            return Ok(Some((None, true)));
        }
        let iterator = match self.iterator_at(stream, shard, offset).await {
            Ok(it) => it,
            Err(e) if refused(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(iterator.map(|it| (Some(it), false)))
    }

    /// The earliest sequence number of a shard and, when it costs nothing more, its latest:
    /// `EOS` for a closed shard; for an open one only when an earlier search left a hint to read
    /// forward from (else `None`: the first search for it may read the whole shard on an
    /// emulator, see the module docs).
    async fn earliest_and_known_latest(
        &self,
        stream: &str,
        shard_id: &str,
    ) -> Result<(KinesisSequence, Option<KinesisSequence>), KinesisSupplierError> {
        let key = format!("{stream}/{shard_id}");
        let hinted = self
            .latest_hints
            .lock()
            .expect("latest hints lock")
            .contains_key(&key);
        if hinted {
            let (earliest, latest) = self.range(stream, shard_id).await?;
            return Ok((earliest, Some(latest)));
        }
        let (start, closed, earliest) = self.shard_start(stream, shard_id).await?;
        Ok((
            earliest.unwrap_or(start),
            closed.then_some(KinesisSequence::EndOfShard),
        ))
    }

    /// A shard's starting sequence number (from its range), whether it is closed, and its first
    /// record's sequence number from the trim horizon (`None`: no record left).
    async fn shard_start(
        &self,
        stream: &str,
        shard_id: &str,
    ) -> Result<(KinesisSequence, bool, Option<KinesisSequence>), KinesisSupplierError> {
        let shard = self.shard(stream, shard_id).await?;
        let range = shard.sequence_number_range().ok_or_else(|| {
            SupplierError::Client(format!("shard `{shard_id}` has no sequence number range"))
        })?;
        let start = parse_sequence(range.starting_sequence_number())?;
        let closed = range.ending_sequence_number().is_some();
        let horizon = self
            .iterator(stream, shard_id, ShardIteratorType::TrimHorizon, None, None)
            .await?;
        let earliest = self.first_record_from(stream, horizon, false).await?;
        Ok((start, closed, earliest))
    }

    /// `(earliest, latest, closed)` of a shard: see the module documentation.
    async fn range(
        &self,
        stream: &str,
        shard_id: &str,
    ) -> Result<(KinesisSequence, KinesisSequence), KinesisSupplierError> {
        let (start, closed, earliest) = self.shard_start(stream, shard_id).await?;
        let Some(earliest) = earliest else {
            // Empty: a closed empty shard is fully read from the start.
            let latest = if closed {
                KinesisSequence::EndOfShard
            } else {
                start.clone()
            };
            return Ok((start, latest));
        };
        if closed {
            return Ok((earliest, KinesisSequence::EndOfShard));
        }
        // The latest offset: read forward from after the last one found to the tip.
        let key = format!("{stream}/{shard_id}");
        let hint = self
            .latest_hints
            .lock()
            .expect("latest hints lock")
            .get(&key)
            .cloned();
        let mut from = None;
        if let Some(last) = hint.as_ref().and_then(KinesisSequence::predecessor) {
            from = self
                .iterator(
                    stream,
                    shard_id,
                    ShardIteratorType::AfterSequenceNumber,
                    Some(&last),
                    None,
                )
                .await
                .ok()
                .flatten();
        }
        // The first time: the last record among those of the last few seconds, minutes,
        // hours (cheap on a busy shard). kinesalite never answers an `AT_TIMESTAMP` request with
        // no record after the timestamp: a request without an answer in 2 s ends the search
        // there, and the shard is read from the trim horizon instead.
        if from.is_none() && hint.is_none() && !self.at_timestamp_hangs.load(Ordering::Relaxed) {
            let now = SystemTime::now();
            for back in [5u64, 60, 3600, 86_400] {
                let at = now - Duration::from_secs(back);
                let request = self.iterator(
                    stream,
                    shard_id,
                    ShardIteratorType::AtTimestamp,
                    None,
                    Some(at),
                );
                let Ok(it) = tokio::time::timeout(Duration::from_secs(2), request).await else {
                    // Not asked again on this connection.
                    self.at_timestamp_hangs.store(true, Ordering::Relaxed);
                    break;
                };
                if let Some(last) = self.first_record_from(stream, it?, true).await? {
                    let latest = last.successor();
                    self.latest_hints
                        .lock()
                        .expect("latest hints lock")
                        .insert(key, latest.clone());
                    return Ok((earliest, latest));
                }
            }
        }
        let (from, base) = match from {
            Some(it) => (Some(it), hint),
            None => (
                self.iterator(stream, shard_id, ShardIteratorType::TrimHorizon, None, None)
                    .await?,
                None,
            ),
        };
        let latest = match self.first_record_from(stream, from, true).await? {
            Some(last) => last.successor(),
            None => base.unwrap_or_else(|| earliest.successor()),
        };
        self.latest_hints
            .lock()
            .expect("latest hints lock")
            .insert(key, latest.clone());
        Ok((earliest, latest))
    }
}

/// Why a `GetRecords` call failed: an expired iterator is renewed, anything else reported.
enum GetRecordsFailure {
    Expired,
    Other(KinesisSupplierError),
}

fn parse_sequence(text: &str) -> Result<KinesisSequence, KinesisSupplierError> {
    KinesisSequence::number(text).map_err(|e| SupplierError::Client(e.to_string()))
}

/// Where the next `GetRecords` of an assigned shard starts.
#[derive(Debug, Clone)]
struct ShardState {
    /// The next sequence number to read (`EOS` once a closed shard is read to its end); `None`
    /// until sought.
    position: Option<KinesisSequence>,
    /// The current shard iterator; `None` when it must be (re)obtained from `position`.
    iterator: Option<String>,
    /// Whether `position` is the shard's earliest (read from `TRIM_HORIZON`).
    from_horizon: bool,
    /// `millisBehindLatest` of the last fetch.
    millis_behind_latest: Option<i64>,
}

/// The [`RecordSupplier`] for Kinesis streams (`shardstream`). See the module documentation.
pub struct KinesisRecordSupplier {
    connection: Arc<Connection>,
    /// Per assigned shard, where the task stands: the position after the last record
    /// [`RecordSupplier::poll`] returned (`EOS` once the shard's end was returned).
    shards: BTreeMap<StreamPartition<String>, ShardState>,
    /// The fetch workers' side: where each shard's fetching stands, the record buffer.
    fetch: Arc<Fetch>,
    /// The fetch workers, started by the first poll; stopped when the supplier is dropped.
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for KinesisRecordSupplier {
    fn drop(&mut self) {
        self.fetch.stop.store(true, Ordering::Relaxed);
        for w in &self.workers {
            w.abort();
        }
    }
}

/// What the fetch workers share with the supplier.
struct Fetch {
    /// Per assigned shard: where fetching stands.
    slots: std::sync::Mutex<BTreeMap<StreamPartition<String>, FetchSlot>>,
    /// Fetched records waiting for the task, bounded by `recordBufferSizeBytes`.
    buffer: buffer::RecordBuffer<Fetched>,
    /// Where the next worker starts looking for a shard to fetch (round robin).
    cursor: std::sync::atomic::AtomicUsize,
    /// The generation given to the next (re)positioned shard.
    next_generation: std::sync::atomic::AtomicU64,
    stop: std::sync::atomic::AtomicBool,
}

/// Where fetching one shard stands.
struct FetchSlot {
    state: ShardState,
    /// Changed whenever the shard is (re)positioned (assign, seek): a fetch started under an
    /// older generation is dropped, and so are its records still in the buffer.
    generation: u64,
    /// A worker is fetching it now (one fetch per shard at a time keeps its records in order).
    busy: bool,
    /// Not fetched again before this instant (`fetchDelayMillis`, a retry after an error).
    next_at: Instant,
}

impl FetchSlot {
    fn fetched_to_end(&self) -> bool {
        self.state.position == Some(KinesisSequence::EndOfShard)
    }
}

/// One entry of the record buffer, from the fetch of one shard under one generation.
struct Fetched {
    partition: StreamPartition<String>,
    generation: u64,
    item: FetchedItem,
}

enum FetchedItem {
    Record(OrderedRecord<String, KinesisSequence>),
    /// The shard is closed and every record in it is in the buffer before this entry.
    EndOfShard,
    /// A fetch failed (it is retried a second later from the same position).
    Failed(KinesisSupplierError),
}

/// A record's weight in the buffer: its data and partition key.
fn record_bytes(r: &OrderedRecord<String, KinesisSequence>) -> usize {
    r.value.as_ref().map_or(0, Vec::len) + r.key.as_ref().map_or(0, Vec::len)
}

/// How long a shard that answered nothing new waits before its next fetch, at least.
const EMPTY_FETCH_WAIT: Duration = Duration::from_millis(20);

/// How often an idle fetch worker looks again for a shard to fetch, at most (a seek or an
/// assign makes a shard due at once).
const IDLE_RECHECK: Duration = Duration::from_millis(10);

/// How long a shard whose fetch failed waits before it is fetched again.
const FAILED_FETCH_WAIT: Duration = Duration::from_secs(1);

impl Fetch {
    fn generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether a fetch of `partition` under `generation` still counts.
    fn current(&self, partition: &StreamPartition<String>, generation: u64) -> bool {
        !self.stop.load(Ordering::Relaxed)
            && self
                .slots
                .lock()
                .expect("fetch slots lock")
                .get(partition)
                .is_some_and(|s| s.generation == generation)
    }

    /// Claims the next shard due for a fetch, in turn from the round-robin cursor; else how
    /// long until one may be due (the earliest `next_at`, at most [`IDLE_RECHECK`]).
    fn claim(&self) -> Result<(StreamPartition<String>, ShardState, u64), Duration> {
        let now = Instant::now();
        let mut slots = self.slots.lock().expect("fetch slots lock");
        let n = slots.len();
        let start = self.cursor.fetch_add(1, Ordering::Relaxed) % n.max(1);
        let due = slots
            .iter()
            .cycle()
            .skip(start)
            .take(n)
            .find(|(_, s)| !s.busy && !s.fetched_to_end() && s.next_at <= now)
            .map(|(p, _)| p.clone());
        let Some(p) = due else {
            let soonest = slots
                .values()
                .filter(|s| !s.busy && !s.fetched_to_end())
                .map(|s| s.next_at.saturating_duration_since(now))
                .min()
                .unwrap_or(IDLE_RECHECK);
            return Err(soonest.clamp(Duration::from_millis(1), IDLE_RECHECK));
        };
        let slot = slots.get_mut(&p).expect("found above");
        slot.busy = true;
        Ok((p, slot.state.clone(), slot.generation))
    }

    /// Ends a fetch: the shard's new state and when it is due again (when still current).
    fn release(
        &self,
        partition: &StreamPartition<String>,
        generation: u64,
        state: Option<ShardState>,
        wait: Duration,
    ) {
        let mut slots = self.slots.lock().expect("fetch slots lock");
        if let Some(slot) = slots
            .get_mut(partition)
            .filter(|s| s.generation == generation)
        {
            if let Some(state) = state {
                slot.state = state;
            }
            slot.busy = false;
            slot.next_at = Instant::now() + wait;
        }
    }

    /// A fetch worker: claims due shards in turn and fetches them, one `GetRecords` at a time,
    /// putting what comes into the buffer (waiting for room as Druid's fetch threads do).
    async fn work(self: Arc<Self>, connection: Arc<Connection>) {
        let config = &connection.config;
        while !self.stop.load(Ordering::Relaxed) {
            let (partition, state, generation) = match self.claim() {
                Ok(claimed) => claimed,
                Err(wait) => {
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            let fetch = KinesisRecordSupplier::fetch_one(&connection, partition.clone(), state);
            let (partition, state, result) =
                match tokio::time::timeout(config.request_timeout, fetch).await {
                    Ok(done) => done,
                    Err(_) => (
                        partition,
                        // Not used: a failed fetch leaves the shard's state as it was.
                        ShardState {
                            position: None,
                            iterator: None,
                            from_horizon: false,
                            millis_behind_latest: None,
                        },
                        Err(SupplierError::CannotConnect {
                            target: config.target(),
                            reason: format!(
                                "GetRecords: no answer within {} ms",
                                config.request_timeout.as_millis()
                            ),
                        }),
                    ),
                };
            let records = match result {
                Ok(records) => records,
                Err(e) => {
                    self.buffer.push_control(Fetched {
                        partition: partition.clone(),
                        generation,
                        item: FetchedItem::Failed(e),
                    });
                    self.release(&partition, generation, None, FAILED_FETCH_WAIT);
                    continue;
                }
            };
            let empty = records.is_empty();
            let mut wanted = true;
            for r in records {
                let size = record_bytes(&r);
                let mut entry = Fetched {
                    partition: partition.clone(),
                    generation,
                    item: FetchedItem::Record(r),
                };
                let mut wait = config.record_buffer_offer_timeout;
                loop {
                    let still = || self.current(&partition, generation);
                    match self.buffer.offer(entry, size, wait, still).await {
                        Ok(()) => break,
                        Err(back) => entry = back,
                    }
                    if !self.current(&partition, generation) {
                        wanted = false;
                        break;
                    }
                    tracing::warn!(
                        retry_in_ms = config.record_buffer_full_wait.as_millis() as u64,
                        "Kinesis records are being processed slower than they are fetched: the record buffer is full"
                    );
                    wait = config.record_buffer_full_wait;
                }
                if !wanted {
                    break;
                }
            }
            if !wanted {
                continue;
            }
            if state.position == Some(KinesisSequence::EndOfShard) {
                self.buffer.push_control(Fetched {
                    partition: partition.clone(),
                    generation,
                    item: FetchedItem::EndOfShard,
                });
            }
            let wait = if empty {
                config.fetch_delay.max(EMPTY_FETCH_WAIT)
            } else {
                config.fetch_delay
            };
            self.release(&partition, generation, Some(state), wait);
        }
    }
}

impl fmt::Debug for KinesisRecordSupplier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KinesisRecordSupplier")
            .field("config", &self.connection.config)
            .field("shards", &self.shards.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl KinesisRecordSupplier {
    /// A supplier for the service `config` names. Builds the client (no request is made yet).
    ///
    /// # Errors
    /// [`SupplierError::InvalidConfig`] when `recordsPerFetch` is outside 1 to 10,000;
    /// [`SupplierError::Client`] when the client runtime cannot start.
    pub fn new(config: KinesisConfig) -> Result<Self, KinesisSupplierError> {
        if !(1..=10_000).contains(&config.records_per_fetch) {
            return Err(SupplierError::InvalidConfig(format!(
                "recordsPerFetch must be between 1 and 10000, got {}",
                config.records_per_fetch
            )));
        }
        let buffer = buffer::RecordBuffer::new(config.record_buffer_bytes);
        Ok(Self {
            connection: Arc::new(Connection::new(config)?),
            shards: BTreeMap::new(),
            fetch: Arc::new(Fetch {
                slots: std::sync::Mutex::new(BTreeMap::new()),
                buffer,
                cursor: std::sync::atomic::AtomicUsize::new(0),
                next_generation: std::sync::atomic::AtomicU64::new(0),
                stop: std::sync::atomic::AtomicBool::new(false),
            }),
            workers: Vec::new(),
        })
    }

    /// Fetching of `partition` starts over from the task's position (after assign and seeks):
    /// a new generation, so what was fetched before is dropped.
    fn refetch(&self, partition: &StreamPartition<String>) {
        let Some(state) = self.shards.get(partition) else {
            return;
        };
        let generation = self.fetch.generation();
        self.fetch.slots.lock().expect("fetch slots lock").insert(
            partition.clone(),
            FetchSlot {
                state: state.clone(),
                generation,
                busy: false,
                next_at: Instant::now(),
            },
        );
    }

    /// Starts the `fetchThreads` fetch workers (once).
    fn start_workers(&mut self) {
        if !self.workers.is_empty() {
            return;
        }
        let handle = self.connection.runtime.handle();
        for _ in 0..self.connection.config.fetch_threads.max(1) {
            let fetch = Arc::clone(&self.fetch);
            let connection = Arc::clone(&self.connection);
            self.workers.push(handle.spawn(fetch.work(connection)));
        }
    }

    /// `millisBehindLatest` that Kinesis reported on the last fetch of `partition`; `None` before
    /// the first fetch or when the partition is not assigned.
    pub fn millis_behind_latest(&self, partition: &StreamPartition<String>) -> Option<i64> {
        self.fetch
            .slots
            .lock()
            .expect("fetch slots lock")
            .get(partition)?
            .state
            .millis_behind_latest
    }

    /// The time lag of each shard of `stream` read up to `positions` (the next sequence number to
    /// read, as [`RecordSupplier::position`]): Druid's `KinesisRecordSupplier.getPartitionsTimeLag`,
    /// which the supervisor reports as `minimumLagMillis` and `ingest/kinesis/*Lag/time`.
    ///
    /// Per shard, one `GetShardIterator` at the position and one `GetRecords` of one record (all
    /// shards concurrently). The lag in ms is Kinesis's `millisBehindLatest` of that read, or,
    /// when a record came back, the age of that first unread record (now minus its
    /// `ApproximateArrivalTimestamp`) if larger: Kinesis reports 0 once the one returned record
    /// was the last, and an emulator (kinesalite) always reports 0, while a record is still
    /// waiting. A shard at `EOS` has lag 0. A shard whose read fails (trimmed position, throttled)
    /// is left out, as Druid leaves out shards it has no lag for.
    pub fn time_lag(
        &self,
        stream: &str,
        positions: &BTreeMap<String, KinesisSequence>,
    ) -> BTreeMap<String, i64> {
        let connection = &self.connection;
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let one = |shard: String, position: KinesisSequence| async move {
            if position.is_end_of_shard() {
                return (shard, Some(0));
            }
            let partition = StreamPartition::new(stream.to_owned(), shard.clone());
            let state = ShardState {
                position: Some(position),
                iterator: None,
                from_horizon: false,
                millis_behind_latest: None,
            };
            let Ok(Some(iterator)) = Self::open_iterator(connection, &partition, &state).await
            else {
                return (shard, None);
            };
            let Ok(out) = connection.get_records(stream, &iterator, 1).await else {
                return (shard, None);
            };
            let behind = out.millis_behind_latest().unwrap_or(0);
            let waiting = out
                .records()
                .first()
                .and_then(|r| r.approximate_arrival_timestamp()?.to_millis().ok())
                .map_or(0, |arrived| (now_ms - arrived).max(0));
            (shard, Some(behind.max(waiting)))
        };
        let lags = connection.call("GetRecords", async {
            Ok(futures::future::join_all(
                positions
                    .iter()
                    .map(|(shard, position)| one(shard.clone(), position.clone())),
            )
            .await)
        });
        lags.map(|all| {
            all.into_iter()
                .filter_map(|(shard, lag)| Some((shard, lag?)))
                .collect()
        })
        .unwrap_or_default()
    }

    /// The earliest sequence number of `partition` and its latest when that costs no more than
    /// a request or two: `EOS` for a closed shard, else only when an earlier search of this
    /// client found one to read forward from (`None` otherwise; [`RecordSupplier::latest_offset`]
    /// finds it at any cost). Lets the supervisor start tasks that read from the earliest without
    /// first scanning every shard on an emulator that ignores `AT_TIMESTAMP` (ADR 0027).
    ///
    /// # Errors
    /// As [`RecordSupplier::earliest_offset`].
    pub fn earliest_and_known_latest(
        &self,
        partition: &StreamPartition<String>,
    ) -> SupplierResult<(KinesisSequence, Option<KinesisSequence>), Self> {
        self.connection.call(
            "reading the shard's earliest sequence number",
            self.connection
                .earliest_and_known_latest(&partition.stream, &partition.partition),
        )
    }

    /// The parents of each shard of `stream` (`ParentShardId`, `AdjacentParentShardId`), and
    /// whether it is closed: what the supervisor needs to read children after their parents.
    ///
    /// # Errors
    /// As [`RecordSupplier::partition_ids`].
    pub fn shard_lineage(&self, stream: &str) -> SupplierResult<Vec<ShardLineage>, Self> {
        let shards = self
            .connection
            .call("ListShards", self.connection.list_shards(stream))?;
        Ok(shards
            .iter()
            .map(|s| ShardLineage {
                shard_id: s.shard_id().to_owned(),
                parents: s
                    .parent_shard_id()
                    .into_iter()
                    .chain(s.adjacent_parent_shard_id())
                    .map(str::to_owned)
                    .collect(),
                closed: s
                    .sequence_number_range()
                    .and_then(|r| r.ending_sequence_number())
                    .is_some(),
            })
            .collect())
    }

    fn state_mut(
        &mut self,
        partition: &StreamPartition<String>,
    ) -> SupplierResult<&mut ShardState, Self> {
        self.shards
            .get_mut(partition)
            .ok_or_else(|| SupplierError::NotAssigned {
                stream: partition.stream.clone(),
                partition: partition.partition.clone(),
            })
    }

    /// Obtains a shard iterator for `partition` from its position.
    async fn open_iterator(
        connection: &Connection,
        partition: &StreamPartition<String>,
        state: &ShardState,
    ) -> Result<Option<String>, KinesisSupplierError> {
        let (stream, shard) = (&partition.stream, &partition.partition);
        match &state.position {
            Some(KinesisSequence::EndOfShard) => Ok(None),
            None => {
                connection
                    .iterator(stream, shard, ShardIteratorType::TrimHorizon, None, None)
                    .await
            }
            Some(_) if state.from_horizon => {
                connection
                    .iterator(stream, shard, ShardIteratorType::TrimHorizon, None, None)
                    .await
            }
            // `AT_SEQUENCE_NUMBER o` reads from `o` when `o` is a record's sequence number (a
            // stored start offset, a shard's start); a position `s + 1` is no record's number, and
            // Kinesis may reject it as not of this shard, so `AFTER_SEQUENCE_NUMBER s` then.
            Some(position) => connection.iterator_at(stream, shard, position).await,
        }
    }

    /// One `GetRecords` round for one shard: the records and the new state.
    async fn fetch_one(
        connection: &Connection,
        partition: StreamPartition<String>,
        mut state: ShardState,
    ) -> (
        StreamPartition<String>,
        ShardState,
        Result<Vec<OrderedRecord<String, KinesisSequence>>, KinesisSupplierError>,
    ) {
        let result = async {
            for _attempt in 0..2 {
                if state.iterator.is_none() {
                    state.iterator = Self::open_iterator(connection, &partition, &state).await?;
                    if state.iterator.is_none() {
                        if state.position.is_some() {
                            state.position = Some(KinesisSequence::EndOfShard);
                        }
                        return Ok(Vec::new());
                    }
                }
                let iterator = state.iterator.clone().expect("iterator present");
                let out = match connection
                    .get_records(
                        &partition.stream,
                        &iterator,
                        connection.config.records_per_fetch,
                    )
                    .await
                {
                    Ok(out) => out,
                    Err(GetRecordsFailure::Expired) => {
                        state.iterator = None;
                        continue;
                    }
                    Err(GetRecordsFailure::Other(e)) => return Err(e),
                };
                let mut records = Vec::with_capacity(out.records().len());
                for r in out.records() {
                    let sequence = parse_sequence(r.sequence_number())?;
                    state.position = Some(sequence.successor());
                    state.from_horizon = false;
                    let timestamp_ms = r
                        .approximate_arrival_timestamp()
                        .and_then(|t| t.to_millis().ok());
                    if connection.config.deaggregate
                        && let Some(users) = crate::kpl::deaggregate(r.data().as_ref())
                    {
                        // All of an aggregate's user records share its sequence number: they
                        // are read (and committed) together.
                        records.extend(users.into_iter().map(|u| OrderedRecord {
                            stream: partition.stream.clone(),
                            partition: partition.partition.clone(),
                            offset: sequence.clone(),
                            key: Some(u.partition_key.into_bytes()),
                            value: Some(u.data),
                            headers: Vec::new(),
                            timestamp_ms,
                        }));
                        continue;
                    }
                    records.push(OrderedRecord {
                        stream: partition.stream.clone(),
                        partition: partition.partition.clone(),
                        offset: sequence,
                        key: Some(r.partition_key().as_bytes().to_vec()),
                        value: Some(r.data().as_ref().to_vec()),
                        headers: Vec::new(),
                        timestamp_ms: r
                            .approximate_arrival_timestamp()
                            .and_then(|t| t.to_millis().ok()),
                    });
                }
                state.millis_behind_latest = out.millis_behind_latest();
                match out.next_shard_iterator() {
                    Some(next) => state.iterator = Some(next.to_owned()),
                    None => {
                        // The shard is closed and everything in it has been returned.
                        state.iterator = None;
                        state.position = Some(KinesisSequence::EndOfShard);
                        state.from_horizon = false;
                    }
                }
                return Ok(records);
            }
            Err(SupplierError::Client(format!(
                "GetRecords: the shard iterator of {partition} expired twice in a row"
            )))
        }
        .await;
        (partition, state, result)
    }
}

/// A shard's parents and whether it is closed (see [`KinesisRecordSupplier::shard_lineage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLineage {
    /// The shard id.
    pub shard_id: String,
    /// `ParentShardId` and `AdjacentParentShardId` (a merge has two parents, a split one).
    pub parents: Vec<String>,
    /// Whether the shard is closed (has an ending sequence number): no record will be added.
    pub closed: bool,
}

impl RecordSupplier for KinesisRecordSupplier {
    type PartitionId = String;
    type SequenceNumber = KinesisSequence;

    fn partition_ids(&self, stream: &str) -> SupplierResult<Vec<String>, Self> {
        let mut ids: Vec<String> = self
            .connection
            .call("ListShards", self.connection.list_shards(stream))?
            .iter()
            .map(|s| s.shard_id().to_owned())
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn assign(&mut self, partitions: &[StreamPartition<String>]) -> SupplierResult<(), Self> {
        let mut next = BTreeMap::new();
        for partition in partitions {
            let state = self.shards.remove(partition).unwrap_or(ShardState {
                position: None,
                iterator: None,
                from_horizon: false,
                millis_behind_latest: None,
            });
            next.insert(partition.clone(), state);
        }
        self.shards = next;
        self.fetch
            .slots
            .lock()
            .expect("fetch slots lock")
            .retain(|p, _| self.shards.contains_key(p));
        let assigned: Vec<StreamPartition<String>> = self.shards.keys().cloned().collect();
        for p in &assigned {
            self.refetch(p);
        }
        Ok(())
    }

    fn assignment(&self) -> Vec<StreamPartition<String>> {
        self.shards.keys().cloned().collect()
    }

    fn seek(
        &mut self,
        partition: &StreamPartition<String>,
        offset: KinesisSequence,
    ) -> SupplierResult<(), Self> {
        self.state_mut(partition)?;
        // The cheap check first (the earliest record, and an iterator at the offset); the
        // shard's whole range only when that check fails, to name it in the error.
        if let Some((iterator, from_horizon)) = self.connection.call(
            "checking the sequence number",
            self.connection
                .iterator_within(&partition.stream, &partition.partition, &offset),
        )? {
            let state = self.state_mut(partition)?;
            state.from_horizon = from_horizon;
            state.position = Some(offset);
            state.iterator = iterator;
            self.refetch(partition);
            return Ok(());
        }
        let (earliest, latest) = self.connection.call(
            "reading the shard's range",
            self.connection
                .range(&partition.stream, &partition.partition),
        )?;
        if offset < earliest || offset > latest {
            return Err(SupplierError::OffsetOutOfRange {
                stream: partition.stream.clone(),
                partition: partition.partition.clone(),
                offset,
                earliest,
                latest,
            });
        }
        let state = self.state_mut(partition)?;
        state.from_horizon = offset == earliest && !offset.is_end_of_shard();
        state.position = Some(offset);
        state.iterator = None;
        self.refetch(partition);
        Ok(())
    }

    fn seek_to_earliest(
        &mut self,
        partitions: &[StreamPartition<String>],
    ) -> SupplierResult<(), Self> {
        for partition in partitions {
            let earliest = self.earliest_offset(partition)?;
            let state = self.state_mut(partition)?;
            state.from_horizon = true;
            state.position = Some(earliest);
            state.iterator = None;
            self.refetch(partition);
        }
        Ok(())
    }

    fn seek_to_latest(
        &mut self,
        partitions: &[StreamPartition<String>],
    ) -> SupplierResult<(), Self> {
        for partition in partitions {
            let (earliest, latest) = self.connection.call(
                "reading the shard's range",
                self.connection
                    .range(&partition.stream, &partition.partition),
            )?;
            let state = self.state_mut(partition)?;
            state.from_horizon = latest == earliest;
            state.position = Some(latest);
            state.iterator = None;
            self.refetch(partition);
        }
        Ok(())
    }

    fn poll(
        &mut self,
        timeout: Duration,
    ) -> SupplierResult<Vec<OrderedRecord<String, KinesisSequence>>, Self> {
        let deadline = Instant::now() + timeout;
        if self
            .shards
            .values()
            .all(|s| s.position == Some(KinesisSequence::EndOfShard))
        {
            std::thread::sleep(timeout);
            return Ok(Vec::new());
        }
        self.start_workers();
        // The generation of each assigned shard: entries of older ones are dropped (no seek
        // can run during this poll).
        let generations: BTreeMap<StreamPartition<String>, u64> = self
            .fetch
            .slots
            .lock()
            .expect("fetch slots lock")
            .iter()
            .map(|(p, s)| (p.clone(), s.generation))
            .collect();
        let max_bytes = self.connection.config.max_bytes_per_poll;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let entries = self.fetch.buffer.drain(max_bytes, wait);
            let mut records = Vec::with_capacity(entries.len());
            let mut ended = false;
            let mut first_error = None;
            for e in entries {
                if generations.get(&e.partition) != Some(&e.generation) {
                    continue;
                }
                let Some(state) = self.shards.get_mut(&e.partition) else {
                    continue;
                };
                match e.item {
                    FetchedItem::Record(r) => {
                        state.position = Some(r.offset.successor());
                        state.from_horizon = false;
                        state.iterator = None;
                        records.push(r);
                    }
                    FetchedItem::EndOfShard => {
                        state.position = Some(KinesisSequence::EndOfShard);
                        state.from_horizon = false;
                        ended = true;
                    }
                    FetchedItem::Failed(err) => {
                        first_error.get_or_insert(err);
                    }
                }
            }
            if !records.is_empty() || ended {
                return Ok(records);
            }
            if let Some(e) = first_error {
                return Err(e);
            }
            if Instant::now() >= deadline {
                return Ok(records);
            }
        }
    }

    fn latest_offset(
        &self,
        partition: &StreamPartition<String>,
    ) -> SupplierResult<KinesisSequence, Self> {
        self.connection
            .call(
                "reading the shard's range",
                self.connection
                    .range(&partition.stream, &partition.partition),
            )
            .map(|(_, latest)| latest)
    }

    fn earliest_offset(
        &self,
        partition: &StreamPartition<String>,
    ) -> SupplierResult<KinesisSequence, Self> {
        self.connection
            .call(
                "reading the shard's range",
                self.connection
                    .range(&partition.stream, &partition.partition),
            )
            .map(|(earliest, _)| earliest)
    }

    fn position(&self, partition: &StreamPartition<String>) -> Option<KinesisSequence> {
        self.shards.get(partition)?.position.clone()
    }

    fn millis_behind_latest(&self, partition: &StreamPartition<String>) -> Option<i64> {
        KinesisRecordSupplier::millis_behind_latest(self, partition)
    }
}

/// Stream administration and a producer for tests and benchmarks: create, describe, split and
/// merge streams, put records.
#[derive(Debug)]
pub struct KinesisAdmin {
    connection: Connection,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KinesisAdmin {
    /// An admin client for the service `config` names.
    ///
    /// # Errors
    /// [`SupplierError::Client`] when the client runtime cannot start.
    pub fn new(config: KinesisConfig) -> Result<Self, KinesisSupplierError> {
        Ok(Self {
            connection: Connection::new(config)?,
        })
    }

    /// Creates `stream` with `shards` shards and waits until it is `ACTIVE`.
    ///
    /// # Errors
    /// The service's error (e.g. `ResourceInUseException` when it exists).
    pub fn create_stream(&self, stream: &str, shards: i32) -> Result<(), KinesisSupplierError> {
        let c = &self.connection;
        c.call("CreateStream", async {
            c.client
                .create_stream()
                .stream_name(stream)
                .shard_count(shards)
                .send()
                .await
                .map_err(|e| c.error("CreateStream", stream, e))?;
            Ok(())
        })?;
        self.wait_active(stream)
    }

    /// Waits until `stream` is `ACTIVE` again (after a create, split or merge), up to 30 s.
    fn wait_active(&self, stream: &str) -> Result<(), KinesisSupplierError> {
        let c = &self.connection;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = c.call("DescribeStreamSummary", async {
                let out = c
                    .client
                    .describe_stream_summary()
                    .stream_name(stream)
                    .send()
                    .await
                    .map_err(|e| c.error("DescribeStreamSummary", stream, e))?;
                Ok(out
                    .stream_description_summary()
                    .map(|s| s.stream_status().as_str().to_owned()))
            })?;
            if status.as_deref() == Some("ACTIVE") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(SupplierError::Client(format!(
                    "stream `{stream}` is not ACTIVE after 30 s (status {status:?})"
                )));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Puts one record with `partition_key`; returns its shard id and sequence number.
    ///
    /// # Errors
    /// The service's error.
    pub fn put_record(
        &self,
        stream: &str,
        partition_key: &str,
        data: &[u8],
    ) -> Result<(String, KinesisSequence), KinesisSupplierError> {
        let c = &self.connection;
        c.call("PutRecord", async {
            let out = c
                .client
                .put_record()
                .stream_name(stream)
                .partition_key(partition_key)
                .data(Blob::new(data))
                .send()
                .await
                .map_err(|e| c.error("PutRecord", stream, e))?;
            Ok((
                out.shard_id().to_owned(),
                parse_sequence(out.sequence_number())?,
            ))
        })
    }

    /// Puts records (`(partition key, data)`) in `PutRecords` calls of up to 500; returns each
    /// record's shard id and sequence number, in order. Records the service rejected (throttled)
    /// are sent again.
    ///
    /// # Errors
    /// The service's error.
    pub fn put_records(
        &self,
        stream: &str,
        records: &[(String, Vec<u8>)],
    ) -> Result<Vec<(String, KinesisSequence)>, KinesisSupplierError> {
        let c = &self.connection;
        let mut placed = Vec::with_capacity(records.len());
        for chunk in records.chunks(500) {
            let mut todo: Vec<usize> = (0..chunk.len()).collect();
            let mut out_of_chunk: Vec<Option<(String, KinesisSequence)>> = vec![None; chunk.len()];
            for _ in 0..20 {
                if todo.is_empty() {
                    break;
                }
                let entries = todo
                    .iter()
                    .map(|&i| {
                        aws_sdk_kinesis::types::PutRecordsRequestEntry::builder()
                            .partition_key(chunk[i].0.clone())
                            .data(Blob::new(chunk[i].1.clone()))
                            .build()
                            .map_err(|e| SupplierError::Client(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let results = c.call("PutRecords", async {
                    let out = c
                        .client
                        .put_records()
                        .stream_name(stream)
                        .set_records(Some(entries))
                        .send()
                        .await
                        .map_err(|e| c.error("PutRecords", stream, e))?;
                    Ok(out.records().to_vec())
                })?;
                let mut again = Vec::new();
                for (&i, r) in todo.iter().zip(results.iter()) {
                    match (r.shard_id(), r.sequence_number()) {
                        (Some(shard), Some(seq)) => {
                            out_of_chunk[i] = Some((shard.to_owned(), parse_sequence(seq)?));
                        }
                        _ => again.push(i),
                    }
                }
                todo = again;
            }
            if !todo.is_empty() {
                return Err(SupplierError::Client(format!(
                    "PutRecords: {} records still rejected after 20 attempts",
                    todo.len()
                )));
            }
            placed.extend(out_of_chunk.into_iter().map(|r| r.expect("placed")));
        }
        Ok(placed)
    }

    /// Reads every record of every shard of `stream` from `TRIM_HORIZON` to the shard's tip with
    /// plain `GetRecords` calls of up to 10,000 records, one shard after another, and returns how
    /// many there were: the service's own read rate, the floor for benchmarks of the supplier.
    ///
    /// # Errors
    /// The service's error.
    pub fn read_all(&self, stream: &str) -> Result<usize, KinesisSupplierError> {
        let c = &self.connection;
        c.call("reading the stream", async {
            let mut total = 0;
            for shard in c.list_shards(stream).await? {
                let mut iterator = c
                    .iterator(
                        stream,
                        shard.shard_id(),
                        ShardIteratorType::TrimHorizon,
                        None,
                        None,
                    )
                    .await?;
                while let Some(it) = iterator {
                    let out = c
                        .get_records(stream, &it, 10_000)
                        .await
                        .map_err(|f| match f {
                            GetRecordsFailure::Expired => SupplierError::Client(
                                "GetRecords: the shard iterator expired".into(),
                            ),
                            GetRecordsFailure::Other(e) => e,
                        })?;
                    total += out.records().len();
                    if out.records().is_empty() && out.millis_behind_latest().unwrap_or(0) == 0 {
                        break;
                    }
                    iterator = out.next_shard_iterator().map(str::to_owned);
                }
            }
            Ok(total)
        })
    }

    /// Splits `shard` of `stream` at the middle of its hash key range and waits until the stream
    /// is `ACTIVE`. The shard closes; two children take its range.
    ///
    /// # Errors
    /// The service's error.
    pub fn split_shard(&self, stream: &str, shard: &str) -> Result<(), KinesisSupplierError> {
        let c = &self.connection;
        c.call("SplitShard", async {
            let s = c.shard(stream, shard).await?;
            let range = s.hash_key_range().ok_or_else(|| {
                SupplierError::Client(format!("shard `{shard}` has no hash key range"))
            })?;
            let start: u128 = range.starting_hash_key().parse().unwrap_or(0);
            let end: u128 = range.ending_hash_key().parse().unwrap_or(u128::MAX);
            let middle = start + (end - start) / 2 + 1;
            c.client
                .split_shard()
                .stream_name(stream)
                .shard_to_split(shard)
                .new_starting_hash_key(middle.to_string())
                .send()
                .await
                .map_err(|e| c.error("SplitShard", stream, e))?;
            Ok(())
        })?;
        self.wait_active(stream)
    }

    /// Merges two adjacent open shards of `stream` and waits until the stream is `ACTIVE`.
    ///
    /// # Errors
    /// The service's error (e.g. the shards are not adjacent).
    pub fn merge_shards(
        &self,
        stream: &str,
        shard: &str,
        adjacent: &str,
    ) -> Result<(), KinesisSupplierError> {
        let c = &self.connection;
        c.call("MergeShards", async {
            c.client
                .merge_shards()
                .stream_name(stream)
                .shard_to_merge(shard)
                .adjacent_shard_to_merge(adjacent)
                .send()
                .await
                .map_err(|e| c.error("MergeShards", stream, e))?;
            Ok(())
        })?;
        self.wait_active(stream)
    }
}

mod buffer;

#[cfg(test)]
mod tests;
