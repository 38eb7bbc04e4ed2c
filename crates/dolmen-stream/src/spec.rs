//! The `logstream` supervisor spec (Druid's `KafkaSupervisorSpec`): parsing with the spec's
//! defaults, validation naming the offending field, and the read-back shape.
//!
//! Accepted bodies are `{"type": "logstream", "spec": {"dataSchema", "ioConfig",
//! "tuningConfig"}, "context"?, "suspended"?}` and Druid's older flat form with `dataSchema`,
//! `ioConfig` and `tuningConfig` at the top level. `kafka` is accepted as another name of
//! `logstream` (what Druid clients send), and `kinesis` of `shardstream`. A `shardstream` spec
//! (Kinesis) has the same `dataSchema` and shared `ioConfig`/`tuningConfig` fields, plus the
//! Kinesis ones ([`KinesisIoConfig`], [`KinesisTuning`]), with the defaults and read-back shape of
//! Druid's Kinesis supervisor (`reference-behaviour-2.md` section 7): the read-back `ioConfig`
//! has no `type`, always an `endpoint`, never `region`, and leaves out `fetchDelayMillis` when 0,
//! `deaggregate` when false and `recordsPerFetch`, `awsAssumedRoleArn`, `awsExternalId` when
//! unset. Credentials are never part of a spec: they come from the runtime properties or the
//! AWS chain ([`KinesisIoConfig::kinesis_config`]), so `awsAccessKeyId`/`awsSecretAccessKey` in a
//! spec are refused.
//!
//! The `dataSchema`, `ioConfig.inputFormat` and the row-related tuning fields are checked by
//! the batch ingestion spec parser (the same code parses streamed rows, see
//! [`SupervisorSpec::batch_spec`]), so errors name the same paths as a batch task's.
//!
//! Defaults are the values the spec lists as "observed when omitted" (`ioConfig`: replicas 1,
//! taskCount 1, taskDuration PT3600S, pollTimeout 100, startDelay PT5S, period PT30S,
//! completionTimeout PT1800S; `tuningConfig`: maxRowsInMemory 150000, maxBytesInMemory 0,
//! maxRowsPerSegment 5000000, intermediatePersistPeriod PT10M, maxPendingPersists 0, chatRetries
//! 8, httpTimeout PT10S, shutdownTimeout PT80S, offsetFetchPeriod PT30S,
//! intermediateHandoffPeriod P2147483647D, repartitionTransitionDuration PT120S,
//! maxParseExceptions 2147483647).

use std::collections::BTreeMap;

use dolmen_common::Period;
use dolmen_common::time::parse_iso_instant;
use dolmen_ingest::IndexTaskSpec;
use serde_json::{Map, Value, json};

/// A spec error: the message names the field path (`spec.ioConfig.topic: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn err(msg: impl Into<String>) -> SpecError {
    SpecError(msg.into())
}

/// A parsed, validated `logstream` supervisor spec.
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorSpec {
    /// `logstream` (Kafka) or `shardstream` (Kinesis).
    pub kind: StreamKind,
    /// Supervisor id: the datasource (Druid's `KafkaSupervisorSpec.getId`), or `spec.id`.
    pub id: String,
    /// Target datasource.
    pub data_source: String,
    /// The `dataSchema` as submitted (validated by the batch spec parser).
    pub data_schema: Value,
    /// Connection and task-layout settings.
    pub io: IoConfig,
    /// Tuning.
    pub tuning: TuningConfig,
    /// `context`, kept and echoed.
    pub context: Option<Value>,
    /// True when created suspended or suspended later.
    pub suspended: bool,
}

/// `ioConfig` of a `logstream` supervisor, with defaults applied. Durations are ms.
#[derive(Debug, Clone, PartialEq)]
pub struct IoConfig {
    /// The topic (`topic`, or `stream`).
    pub topic: String,
    /// `inputFormat` as submitted.
    pub input_format: Value,
    /// Tasks per task group (default 1).
    pub replicas: u32,
    /// Task groups (default 1); partition `p` belongs to group `p % taskCount`.
    pub task_count: u32,
    /// How long a task reads before it stops and publishes, ms (default 3,600,000).
    pub task_duration_ms: i64,
    /// The Kafka client's properties (Java client names; see [`crate::kafka::config`]);
    /// `bootstrap.servers` is required.
    pub consumer_properties: BTreeMap<String, String>,
    /// Longest wait of one poll, ms (default 100).
    pub poll_timeout_ms: i64,
    /// Delay before the supervisor's first run, ms (default 5,000).
    pub start_delay_ms: i64,
    /// Period of the supervisor's run loop, ms (default 30,000).
    pub period_ms: i64,
    /// Start from the earliest offset when the datasource has no stored offsets (default
    /// false: the latest).
    pub use_earliest_offset: bool,
    /// How long publishing tasks may take before they are stopped, ms (default 1,800,000).
    pub completion_timeout_ms: i64,
    /// Rows with timestamps earlier than task start minus this are thrown away, ms.
    pub late_message_rejection_period_ms: Option<i64>,
    /// Rows with timestamps later than task end plus this are thrown away, ms.
    pub early_message_rejection_period_ms: Option<i64>,
    /// Rows earlier than this instant (ms since the epoch) are thrown away.
    pub late_message_rejection_start_ms: Option<i64>,
    /// The Kinesis connection fields (`shardstream` only).
    pub kinesis: Option<KinesisIoConfig>,
    /// The fields as submitted with defaults filled in (the read-back `ioConfig`).
    read_back: Map<String, Value>,
}

/// The two kinds of supervisor: Druid's Kafka (`logstream`) and Kinesis (`shardstream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Kafka topics: integer partitions, integer offsets.
    Logstream,
    /// Kinesis streams: shard ids, sequence number strings.
    Shardstream,
}

impl StreamKind {
    /// The type name Dolmen reads back (`logstream` / `shardstream`).
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Logstream => "logstream",
            Self::Shardstream => "shardstream",
        }
    }

    /// Whether `name` is this kind's type name or Druid's (`kafka` / `kinesis`).
    fn accepts(self, name: &str) -> bool {
        match self {
            Self::Logstream => name == "logstream" || name == "kafka",
            Self::Shardstream => name == "shardstream" || name == "kinesis",
        }
    }
}

/// The Kinesis fields of a `shardstream` `ioConfig` (Druid's `KinesisSupervisorIOConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisIoConfig {
    /// `endpoint` as read back: given, or derived from `region`, or
    /// `kinesis.us-east-1.amazonaws.com`. A bare host name means HTTPS.
    pub endpoint: String,
    /// `region` as given (input only, never read back), or the one in an AWS endpoint's host.
    pub region: Option<String>,
    /// `fetchDelayMillis`: the wait between fetches of a shard with nothing new (default 0).
    pub fetch_delay_ms: u64,
    /// `recordsPerFetch` (deprecated in Druid): the `Limit` of each `GetRecords` call; `None`:
    /// Dolmen's default, 4,000.
    pub records_per_fetch: Option<u32>,
    /// `awsAssumedRoleArn`: a role assumed through STS.
    pub aws_assumed_role_arn: Option<String>,
    /// `awsExternalId`: the external id given when assuming the role.
    pub aws_external_id: Option<String>,
    /// `deaggregate` (deprecated in Druid, default false): split KPL aggregated records into
    /// their user records (`crate::kpl`).
    pub deaggregate: bool,
}

impl KinesisIoConfig {
    /// The endpoint as a URL: `https://` is added to a bare host name.
    pub fn endpoint_url(&self) -> String {
        if self.endpoint.contains("://") {
            self.endpoint.clone()
        } else {
            format!("https://{}", self.endpoint)
        }
    }

    /// The supplier configuration: this endpoint and region, `credentials` (the
    /// `service.kinesis.accessKey`/`secretKey` runtime properties; `None` for the standard AWS
    /// chain), the assumed role, `recordsPerFetch` and `fetchDelayMillis`.
    pub fn kinesis_config(
        &self,
        credentials: Option<crate::kinesis::StaticCredentials>,
    ) -> crate::kinesis::KinesisConfig {
        let mut config =
            crate::kinesis::KinesisConfig::new(Some(self.endpoint_url()), self.region.clone());
        config.credentials = credentials;
        config.assumed_role_arn = self.aws_assumed_role_arn.clone();
        config.external_id = self.aws_external_id.clone();
        if let Some(n) = self.records_per_fetch {
            config.records_per_fetch = i32::try_from(n).unwrap_or(i32::MAX);
        }
        config.fetch_delay = std::time::Duration::from_millis(self.fetch_delay_ms);
        config.deaggregate = self.deaggregate;
        config
    }
}

/// The Kinesis fields of a `shardstream` `tuningConfig` (Druid's `KinesisSupervisorTuningConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisTuning {
    /// `recordBufferOfferTimeout`, ms (default 5,000).
    pub record_buffer_offer_timeout_ms: u64,
    /// `recordBufferFullWait`, ms (default 5,000).
    pub record_buffer_full_wait_ms: u64,
    /// `fetchThreads`; `None`: two per core.
    pub fetch_threads: Option<u64>,
    /// `maxBytesPerPoll` (default 1,000,000).
    pub max_bytes_per_poll: u64,
    /// `recordBufferSizeBytes`; `None`: 100 MB.
    pub record_buffer_size_bytes: Option<u64>,
    /// `repartitionTransitionDuration`, ms (default 120,000): how soon tasks stop after the shard
    /// set changed.
    pub repartition_transition_ms: i64,
    /// `skipSequenceNumberAvailabilityCheck` (default false).
    pub skip_sequence_number_availability_check: bool,
}

/// `tuningConfig` of a `logstream` supervisor, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningConfig {
    /// Rows kept in memory before they are persisted (default 150,000).
    pub max_rows_in_memory: u64,
    /// Rows per segment before a task publishes (default 5,000,000).
    pub max_rows_per_segment: u64,
    /// Rows a task holds in all before it publishes, when set.
    pub max_total_rows: Option<u64>,
    /// Longest time rows stay unpersisted, ms (default 600,000).
    pub intermediate_persist_period_ms: i64,
    /// Longest time between publishes of one task, ms (default: never).
    pub intermediate_handoff_period_ms: i64,
    /// Reset to the earliest retained offset when a stored offset fell out of retention
    /// (default false: the task fails and the supervisor reports it).
    pub reset_offset_automatically: bool,
    /// The Kinesis fields (`shardstream` only).
    pub kinesis: Option<KinesisTuning>,
    /// The fields as submitted with defaults filled in (the read-back `tuningConfig`).
    read_back: Map<String, Value>,
}

/// Druid's default `indexSpec` on read-back.
fn default_index_spec() -> Value {
    json!({
        "bitmap": {"type": "roaring"},
        "dimensionCompression": "lz4",
        "stringDictionaryEncoding": {"type": "utf8"},
        "metricCompression": "lz4",
        "longEncoding": "longs"
    })
}

const IO_FIELDS: &[&str] = &[
    "type",
    "topic",
    "topicPattern",
    "inputFormat",
    "replicas",
    "taskCount",
    "taskDuration",
    "consumerProperties",
    "autoScalerConfig",
    "pollTimeout",
    "startDelay",
    "period",
    "useEarliestOffset",
    "completionTimeout",
    "lateMessageRejectionPeriod",
    "earlyMessageRejectionPeriod",
    "lateMessageRejectionStartDateTime",
    "configOverrides",
    "idleConfig",
    "stream",
    "useEarliestSequenceNumber",
];

/// The `ioConfig` fields of a `shardstream` spec.
const KINESIS_IO_FIELDS: &[&str] = &[
    "type",
    "stream",
    "inputFormat",
    "endpoint",
    "region",
    "replicas",
    "taskCount",
    "taskDuration",
    "autoScalerConfig",
    "startDelay",
    "period",
    "useEarliestSequenceNumber",
    "completionTimeout",
    "lateMessageRejectionPeriod",
    "earlyMessageRejectionPeriod",
    "lateMessageRejectionStartDateTime",
    "fetchDelayMillis",
    "recordsPerFetch",
    "awsAssumedRoleArn",
    "awsExternalId",
    "deaggregate",
    "idleConfig",
    "awsAccessKeyId",
    "awsSecretAccessKey",
];

/// The `tuningConfig` fields only a `shardstream` spec has.
const KINESIS_TUNING_FIELDS: &[&str] = &[
    "recordBufferSize",
    "recordBufferSizeBytes",
    "recordBufferOfferTimeout",
    "recordBufferFullWait",
    "fetchThreads",
    "maxBytesPerPoll",
    "maxRecordsPerPoll",
    "useListShards",
];

const TUNING_FIELDS: &[&str] = &[
    "type",
    "appendableIndexSpec",
    "maxRowsInMemory",
    "maxBytesInMemory",
    "skipBytesInMemoryOverheadCheck",
    "maxRowsPerSegment",
    "maxTotalRows",
    "intermediatePersistPeriod",
    "maxPendingPersists",
    "indexSpec",
    "indexSpecForIntermediatePersists",
    "reportParseExceptions",
    "handoffConditionTimeout",
    "resetOffsetAutomatically",
    "segmentWriteOutMediumFactory",
    "workerThreads",
    "chatRetries",
    "httpTimeout",
    "shutdownTimeout",
    "offsetFetchPeriod",
    "intermediateHandoffPeriod",
    "logParseExceptions",
    "maxParseExceptions",
    "maxSavedParseExceptions",
    "skipSequenceNumberAvailabilityCheck",
    "repartitionTransitionDuration",
];

impl SupervisorSpec {
    /// Parses and validates a create/update body.
    ///
    /// # Errors
    /// [`SpecError`] naming the field: a missing or wrong-typed field, an unknown field, an
    /// unsupported type, a `dataSchema` the batch parser refuses, a non-positive count, a bad
    /// ISO 8601 period.
    pub fn parse(body: &Value) -> Result<SupervisorSpec, SpecError> {
        let top = body
            .as_object()
            .ok_or_else(|| err("request body must be a JSON object (a supervisor spec)"))?;
        let ty = top
            .get("type")
            .ok_or_else(|| err("type: missing; expected logstream or shardstream"))?
            .as_str()
            .ok_or_else(|| err("type: must be a string"))?;
        let kind = match ty {
            "logstream" | "kafka" => StreamKind::Logstream,
            "shardstream" | "kinesis" => StreamKind::Shardstream,
            other => {
                return Err(err(format!(
                    "type: unknown supervisor type [{other}]; expected logstream or shardstream"
                )));
            }
        };
        // `spec` wrapper, or the flat form.
        let (inner, prefix) = match top.get("spec") {
            Some(Value::Object(s)) => (s, "spec."),
            Some(_) => return Err(err("spec: must be an object")),
            None => (top, ""),
        };
        let data_schema = inner
            .get("dataSchema")
            .cloned()
            .ok_or_else(|| err(format!("{prefix}dataSchema: missing")))?;
        let io_v = inner
            .get("ioConfig")
            .ok_or_else(|| err(format!("{prefix}ioConfig: missing")))?;
        let io = parse_io(kind, io_v, &format!("{prefix}ioConfig"))?;
        let tuning = parse_tuning(
            kind,
            inner.get("tuningConfig").unwrap_or(&Value::Null),
            &format!("{prefix}tuningConfig"),
        )?;
        let data_source = data_schema
            .get("dataSource")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                err(format!(
                    "{prefix}dataSchema.dataSource: missing or not a string"
                ))
            })?
            .to_string();
        let id = match top.get("id").or_else(|| inner.get("id")) {
            None | Some(Value::Null) => data_source.clone(),
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(_) => return Err(err("id: must be a non-empty string")),
        };
        dolmen_ingest::spec::validate_task_id(&id).map_err(|e| err(format!("id: {e}")))?;
        let suspended = match top.get("suspended") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(err("suspended: must be a boolean")),
        };
        let context = top.get("context").cloned().filter(|c| !c.is_null());
        if context.as_ref().is_some_and(|c| !c.is_object()) {
            return Err(err("context: must be an object"));
        }
        // The granularitySpec as read back: `type` uniform and the defaults filled in.
        let mut data_schema = data_schema;
        if let Some(g) = data_schema
            .as_object_mut()
            .map(|ds| ds.entry("granularitySpec").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        {
            g.entry("type").or_insert_with(|| json!("uniform"));
            g.entry("segmentGranularity")
                .or_insert_with(|| json!("DAY"));
            g.entry("queryGranularity").or_insert_with(|| json!("NONE"));
            g.entry("rollup").or_insert_with(|| json!(true));
            g.entry("intervals").or_insert_with(|| json!([]));
        }
        let spec = SupervisorSpec {
            kind,
            id,
            data_source,
            data_schema,
            io,
            tuning,
            context,
            suspended,
        };
        // The batch parser checks dataSchema, inputFormat and the row tuning fields, naming
        // `spec.dataSchema...` paths.
        spec.batch_spec(&[], &[])
            .map_err(|e| err(e.0.replace("spec.ioConfig.inputSource", "spec.ioConfig")))?;
        Ok(spec)
    }

    /// The spec as `GET /supervisor/{id}` returns it: `type`, `spec` with the three configs
    /// (defaults filled in), copies of them at the top level, `context`, `suspended`.
    pub fn read_back(&self) -> Value {
        let data_schema = self.data_schema.clone();
        let io = Value::Object(self.io.read_back.clone());
        let tuning = Value::Object(self.tuning.read_back.clone());
        json!({
            "type": self.kind.type_name(),
            "id": self.id,
            "spec": {"dataSchema": data_schema, "ioConfig": io, "tuningConfig": tuning},
            "dataSchema": data_schema,
            "ioConfig": io,
            "tuningConfig": tuning,
            "context": self.context.clone().unwrap_or(Value::Null),
            "suspended": self.suspended,
        })
    }

    /// The batch ingestion spec that parses this supervisor's rows: the same `dataSchema` and
    /// `inputFormat`, reading local `files` (records a task wrote down), appending, with
    /// `intervals` as the accepted time range (rows outside are thrown away, as Druid's
    /// message rejection periods do) and the row tuning fields.
    ///
    /// # Errors
    /// [`SpecError`] when the batch parser refuses the schema or format.
    pub fn batch_spec(
        &self,
        files: &[std::path::PathBuf],
        intervals: &[dolmen_common::Interval],
    ) -> Result<IndexTaskSpec, SpecError> {
        let mut data_schema = self.data_schema.clone();
        if !intervals.is_empty()
            && let Some(ds) = data_schema.as_object_mut()
        {
            let g = ds.entry("granularitySpec").or_insert_with(|| json!({}));
            if let Some(g) = g.as_object_mut() {
                g.insert(
                    "intervals".into(),
                    json!(
                        intervals
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                    ),
                );
            }
        }
        let t = &self.tuning.read_back;
        let mut tuning = Map::new();
        tuning.insert("type".into(), json!("index_parallel"));
        for key in [
            "maxRowsInMemory",
            "maxBytesInMemory",
            "maxRowsPerSegment",
            "maxParseExceptions",
            "maxSavedParseExceptions",
            "logParseExceptions",
            "indexSpec",
        ] {
            if let Some(v) = t.get(key).filter(|v| !v.is_null()) {
                tuning.insert(key.into(), v.clone());
            }
        }
        let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        let input_source = if files.is_empty() {
            json!({"type": "inline", "data": ""})
        } else {
            json!({"type": "local", "files": files})
        };
        let v = json!({
            "type": "index_parallel",
            "spec": {
                "dataSchema": data_schema,
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": input_source,
                    "inputFormat": self.io.input_format,
                    "appendToExisting": true
                },
                "tuningConfig": tuning
            }
        });
        IndexTaskSpec::from_json(&v).map_err(|e| err(e.to_string()))
    }
}

fn period_ms(v: Option<&Value>, default: &str, field: &str) -> Result<(i64, Value), SpecError> {
    let text = match v {
        None | Some(Value::Null) => default.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(err(format!("{field}: must be an ISO 8601 period string"))),
    };
    let p = Period::parse(&text).map_err(|e| err(format!("{field}: {e}")))?;
    let ms = p
        .checked_fixed_millis()
        .filter(|ms| *ms >= 0)
        .ok_or_else(|| {
            err(format!(
                "{field}: [{text}] must be a fixed, non-negative duration (weeks, days, hours, minutes, seconds)"
            ))
        })?;
    Ok((ms, Value::String(text)))
}

fn opt_period_ms(v: Option<&Value>, field: &str) -> Result<Option<i64>, SpecError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(_) => period_ms(v, "PT0S", field).map(|(ms, _)| Some(ms)),
    }
}

fn positive(v: Option<&Value>, default: u64, field: &str) -> Result<u64, SpecError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(x) => x
            .as_u64()
            .filter(|n| *n > 0)
            .ok_or_else(|| err(format!("{field}: must be a positive integer, got {x}"))),
    }
}

fn boolean(v: Option<&Value>, default: bool, field: &str) -> Result<bool, SpecError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(x) => Err(err(format!("{field}: must be a boolean, got {x}"))),
    }
}

fn check_fields(o: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), SpecError> {
    for k in o.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err(format!(
                "{path}.{k}: unknown field; expected one of [{}]",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

fn parse_io(kind: StreamKind, v: &Value, path: &str) -> Result<IoConfig, SpecError> {
    let o = v
        .as_object()
        .ok_or_else(|| err(format!("{path}: must be an object")))?;
    let (topic, input_format, consumer_properties, kinesis) = match kind {
        StreamKind::Logstream => {
            check_fields(o, IO_FIELDS, path)?;
            let (topic, input_format, consumer_properties) = parse_kafka_io(o, path)?;
            (topic, input_format, consumer_properties, None)
        }
        StreamKind::Shardstream => {
            check_fields(o, KINESIS_IO_FIELDS, path)?;
            let (stream, input_format, kinesis) = parse_kinesis_io(o, path)?;
            (stream, input_format, BTreeMap::new(), Some(kinesis))
        }
    };
    if o.get("autoScalerConfig")
        .and_then(|a| a.get("enableTaskAutoScaler"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Err(err(format!(
            "{path}.autoScalerConfig.enableTaskAutoScaler: task autoscaling is not supported; set taskCount"
        )));
    }
    let replicas = positive(o.get("replicas"), 1, &format!("{path}.replicas"))?;
    let task_count = positive(o.get("taskCount"), 1, &format!("{path}.taskCount"))?;
    let (task_duration_ms, task_duration) = period_ms(
        o.get("taskDuration"),
        "PT3600S",
        &format!("{path}.taskDuration"),
    )?;
    if task_duration_ms == 0 {
        return Err(err(format!(
            "{path}.taskDuration: must be longer than zero"
        )));
    }
    let poll_timeout_ms = i64::try_from(positive(
        o.get("pollTimeout"),
        100,
        &format!("{path}.pollTimeout"),
    )?)
    .unwrap_or(i64::MAX);
    let (start_delay_ms, start_delay) =
        period_ms(o.get("startDelay"), "PT5S", &format!("{path}.startDelay"))?;
    let (period_ms_v, period) = period_ms(o.get("period"), "PT30S", &format!("{path}.period"))?;
    if period_ms_v == 0 {
        return Err(err(format!("{path}.period: must be longer than zero")));
    }
    let (completion_timeout_ms, completion_timeout) = period_ms(
        o.get("completionTimeout"),
        "PT1800S",
        &format!("{path}.completionTimeout"),
    )?;
    let earliest_field = match kind {
        StreamKind::Logstream => "useEarliestOffset",
        StreamKind::Shardstream => "useEarliestSequenceNumber",
    };
    let use_earliest_offset = boolean(
        o.get(earliest_field),
        false,
        &format!("{path}.{earliest_field}"),
    )?;
    let late = opt_period_ms(
        o.get("lateMessageRejectionPeriod"),
        &format!("{path}.lateMessageRejectionPeriod"),
    )?;
    let early = opt_period_ms(
        o.get("earlyMessageRejectionPeriod"),
        &format!("{path}.earlyMessageRejectionPeriod"),
    )?;
    let late_start = match o.get("lateMessageRejectionStartDateTime") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            parse_iso_instant(s)
                .map_err(|e| err(format!("{path}.lateMessageRejectionStartDateTime: {e}")))?,
        ),
        Some(x) => {
            return Err(err(format!(
                "{path}.lateMessageRejectionStartDateTime: must be an ISO 8601 instant, got {x}"
            )));
        }
    };
    if late.is_some() && late_start.is_some() {
        return Err(err(format!(
            "{path}: lateMessageRejectionPeriod and lateMessageRejectionStartDateTime cannot both be set"
        )));
    }
    // The read-back: Druid's Kinesis and Kafka ioConfigs name and order fields differently.
    let mut rb = Map::new();
    if let Some(k) = &kinesis {
        rb.insert("stream".into(), json!(topic));
        rb.insert("inputFormat".into(), input_format.clone());
        rb.insert("endpoint".into(), json!(k.endpoint));
        rb.insert("replicas".into(), json!(replicas));
        rb.insert("taskCount".into(), json!(task_count));
        rb.insert("taskDuration".into(), task_duration);
        rb.insert(
            "autoScalerConfig".into(),
            o.get("autoScalerConfig").cloned().unwrap_or(Value::Null),
        );
        rb.insert("startDelay".into(), start_delay);
        rb.insert("period".into(), period);
        rb.insert(
            "useEarliestSequenceNumber".into(),
            json!(use_earliest_offset),
        );
        rb.insert("completionTimeout".into(), completion_timeout);
        for key in [
            "lateMessageRejectionPeriod",
            "earlyMessageRejectionPeriod",
            "lateMessageRejectionStartDateTime",
        ] {
            rb.insert(key.into(), o.get(key).cloned().unwrap_or(Value::Null));
        }
        // Left out when default or unset, as Druid's NON_DEFAULT / NON_NULL fields are.
        if k.fetch_delay_ms != 0 {
            rb.insert("fetchDelayMillis".into(), json!(k.fetch_delay_ms));
        }
        if let Some(n) = k.records_per_fetch {
            rb.insert("recordsPerFetch".into(), json!(n));
        }
        if let Some(a) = &k.aws_assumed_role_arn {
            rb.insert("awsAssumedRoleArn".into(), json!(a));
        }
        if let Some(x) = &k.aws_external_id {
            rb.insert("awsExternalId".into(), json!(x));
        }
        if k.deaggregate {
            rb.insert("deaggregate".into(), json!(true));
        }
    } else {
        rb.insert("type".into(), json!("logstream"));
        rb.insert("topic".into(), json!(topic));
        rb.insert("inputFormat".into(), input_format.clone());
        rb.insert("replicas".into(), json!(replicas));
        rb.insert("taskCount".into(), json!(task_count));
        rb.insert("taskDuration".into(), task_duration);
        rb.insert("consumerProperties".into(), json!(consumer_properties));
        rb.insert(
            "autoScalerConfig".into(),
            o.get("autoScalerConfig").cloned().unwrap_or(Value::Null),
        );
        rb.insert("pollTimeout".into(), json!(poll_timeout_ms));
        rb.insert("startDelay".into(), start_delay);
        rb.insert("period".into(), period);
        rb.insert("useEarliestOffset".into(), json!(use_earliest_offset));
        rb.insert("completionTimeout".into(), completion_timeout);
        for k in [
            "lateMessageRejectionPeriod",
            "earlyMessageRejectionPeriod",
            "lateMessageRejectionStartDateTime",
            "configOverrides",
            "idleConfig",
        ] {
            rb.insert(k.into(), o.get(k).cloned().unwrap_or(Value::Null));
        }
        rb.insert("stream".into(), json!(topic));
        rb.insert(
            "useEarliestSequenceNumber".into(),
            json!(use_earliest_offset),
        );
    }
    Ok(IoConfig {
        topic,
        input_format,
        replicas: u32::try_from(replicas).unwrap_or(u32::MAX),
        task_count: u32::try_from(task_count).unwrap_or(u32::MAX),
        task_duration_ms,
        consumer_properties,
        poll_timeout_ms,
        start_delay_ms,
        period_ms: period_ms_v,
        use_earliest_offset,
        completion_timeout_ms,
        late_message_rejection_period_ms: late,
        early_message_rejection_period_ms: early,
        late_message_rejection_start_ms: late_start,
        kinesis,
        read_back: rb,
    })
}

/// The Kafka fields of a `logstream` `ioConfig`: the topic, the input format and the
/// consumer properties.
fn parse_kafka_io(
    o: &Map<String, Value>,
    path: &str,
) -> Result<(String, Value, BTreeMap<String, String>), SpecError> {
    if let Some(t) = o.get("type").filter(|t| !t.is_null())
        && t != "logstream"
        && t != "kafka"
    {
        return Err(err(format!("{path}.type: must be logstream, got {t}")));
    }
    if o.get("topicPattern").is_some_and(|p| !p.is_null()) {
        return Err(err(format!(
            "{path}.topicPattern: topic patterns are not supported; name one topic in {path}.topic"
        )));
    }
    let topic = match (o.get("topic"), o.get("stream")) {
        (Some(Value::String(t)), _) | (None | Some(Value::Null), Some(Value::String(t)))
            if !t.is_empty() =>
        {
            t.clone()
        }
        (Some(Value::String(_)) | None | Some(Value::Null), _) => {
            return Err(err(format!("{path}.topic: missing; name the Kafka topic")));
        }
        (Some(x), _) => return Err(err(format!("{path}.topic: must be a string, got {x}"))),
    };
    let input_format = o
        .get("inputFormat")
        .filter(|f| !f.is_null())
        .cloned()
        .ok_or_else(|| err(format!("{path}.inputFormat: missing")))?;
    let mut consumer_properties = BTreeMap::new();
    match o.get("consumerProperties") {
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let s = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(err(format!(
                            "{path}.consumerProperties.{k}: must be a string, got {other}"
                        )));
                    }
                };
                consumer_properties.insert(k.clone(), s);
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err(err(format!("{path}.consumerProperties: must be an object"))),
    }
    if consumer_properties
        .get("bootstrap.servers")
        .is_none_or(|s| s.trim().is_empty())
    {
        return Err(err(format!(
            "{path}.consumerProperties.bootstrap.servers: missing; the Kafka brokers to read from"
        )));
    }
    // Refuse unusable client settings (protocol, stores, SASL) now rather than in every task.
    if let Err(e) = crate::kafka::config::ClientSettings::from_properties(&consumer_properties) {
        let message = match e {
            crate::SupplierError::InvalidConfig(m) => m,
            other => other.to_string(),
        };
        return Err(err(format!("{path}.{message}")));
    }
    Ok((topic, input_format, consumer_properties))
}

/// The Kinesis fields of a `shardstream` `ioConfig`: the stream, the input format and the
/// connection settings.
fn parse_kinesis_io(
    o: &Map<String, Value>,
    path: &str,
) -> Result<(String, Value, KinesisIoConfig), SpecError> {
    if let Some(t) = o.get("type").filter(|t| !t.is_null())
        && !t
            .as_str()
            .is_some_and(|t| StreamKind::Shardstream.accepts(t))
    {
        return Err(err(format!("{path}.type: must be shardstream, got {t}")));
    }
    for secret in ["awsAccessKeyId", "awsSecretAccessKey"] {
        if o.get(secret).is_some_and(|v| !v.is_null()) {
            return Err(err(format!(
                "{path}.{secret}: credentials are not accepted in a spec (it is read back and stored); set service.kinesis.accessKey/secretKey in the runtime properties or use the AWS credential chain"
            )));
        }
    }
    let stream = match o.get("stream") {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => {
            return Err(err(format!(
                "{path}.stream: missing; name the Kinesis stream"
            )));
        }
        Some(x) => return Err(err(format!("{path}.stream: must be a string, got {x}"))),
    };
    let input_format = o
        .get("inputFormat")
        .filter(|f| !f.is_null())
        .cloned()
        .ok_or_else(|| err(format!("{path}.inputFormat: missing")))?;
    let opt_string = |k: &str| -> Result<Option<String>, SpecError> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(x) => Err(err(format!(
                "{path}.{k}: must be a non-empty string, got {x}"
            ))),
        }
    };
    let region = opt_string("region")?;
    if let Some(r) = &region
        && !r
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(err(format!(
            "{path}.region: [{r}] is not an AWS region name (e.g. us-east-1)"
        )));
    }
    let endpoint = match (opt_string("endpoint")?, &region) {
        (Some(e), _) => e,
        (None, Some(r)) if r.starts_with("cn-") => format!("kinesis.{r}.amazonaws.com.cn"),
        (None, Some(r)) => format!("kinesis.{r}.amazonaws.com"),
        (None, None) => "kinesis.us-east-1.amazonaws.com".to_owned(),
    };
    if endpoint.contains("://")
        && !endpoint.starts_with("http://")
        && !endpoint.starts_with("https://")
    {
        return Err(err(format!(
            "{path}.endpoint: [{endpoint}] must be a host name or an http(s) URL"
        )));
    }
    // The signing region: given, or the one in an AWS endpoint (kinesis.<region>.amazonaws.com).
    let region = region.or_else(|| {
        let host = endpoint.split("://").last().unwrap_or(&endpoint);
        let mut parts = host.split('.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("kinesis"), Some(r), Some("amazonaws")) => Some(r.to_owned()),
            _ => None,
        }
    });
    let fetch_delay_ms = match o.get("fetchDelayMillis") {
        None | Some(Value::Null) => 0,
        Some(x) => x.as_u64().ok_or_else(|| {
            err(format!(
                "{path}.fetchDelayMillis: must be a non-negative integer, got {x}"
            ))
        })?,
    };
    let records_per_fetch = match o.get("recordsPerFetch") {
        None | Some(Value::Null) => None,
        Some(x) => Some(
            x.as_u64()
                .filter(|n| (1..=10_000).contains(n))
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    err(format!(
                        "{path}.recordsPerFetch: must be an integer from 1 to 10000 (the GetRecords limit), got {x}"
                    ))
                })?,
        ),
    };
    let deaggregate = boolean(o.get("deaggregate"), false, &format!("{path}.deaggregate"))?;
    Ok((
        stream,
        input_format,
        KinesisIoConfig {
            endpoint,
            region,
            fetch_delay_ms,
            records_per_fetch,
            aws_assumed_role_arn: opt_string("awsAssumedRoleArn")?,
            aws_external_id: opt_string("awsExternalId")?,
            deaggregate,
        },
    ))
}

fn parse_tuning(kind: StreamKind, v: &Value, path: &str) -> Result<TuningConfig, SpecError> {
    let empty = Map::new();
    let o = match v {
        Value::Null => &empty,
        Value::Object(o) => o,
        _ => return Err(err(format!("{path}: must be an object"))),
    };
    match kind {
        StreamKind::Logstream => check_fields(o, TUNING_FIELDS, path)?,
        StreamKind::Shardstream => {
            let all: Vec<&str> = TUNING_FIELDS
                .iter()
                .chain(KINESIS_TUNING_FIELDS)
                .copied()
                .collect();
            check_fields(o, &all, path)?;
        }
    }
    if let Some(t) = o.get("type").filter(|t| !t.is_null())
        && !t.as_str().is_some_and(|t| kind.accepts(t))
    {
        return Err(err(format!(
            "{path}.type: must equal the supervisor type ({}), got {t}",
            kind.type_name()
        )));
    }
    let max_rows_in_memory = positive(
        o.get("maxRowsInMemory"),
        150_000,
        &format!("{path}.maxRowsInMemory"),
    )?;
    let max_rows_per_segment = positive(
        o.get("maxRowsPerSegment"),
        5_000_000,
        &format!("{path}.maxRowsPerSegment"),
    )?;
    let max_total_rows = match o.get("maxTotalRows") {
        None | Some(Value::Null) => None,
        x => Some(positive(x, 1, &format!("{path}.maxTotalRows"))?),
    };
    let (persist_ms, persist) = period_ms(
        o.get("intermediatePersistPeriod"),
        "PT10M",
        &format!("{path}.intermediatePersistPeriod"),
    )?;
    let (handoff_ms, handoff) = period_ms(
        o.get("intermediateHandoffPeriod"),
        "P2147483647D",
        &format!("{path}.intermediateHandoffPeriod"),
    )?;
    let reset = boolean(
        o.get("resetOffsetAutomatically"),
        false,
        &format!("{path}.resetOffsetAutomatically"),
    )?;
    let defaults: [(&str, Value); 24] = [
        ("type", json!(kind.type_name())),
        (
            "appendableIndexSpec",
            json!({"type": "onheap", "preserveExistingMetrics": false}),
        ),
        ("maxRowsInMemory", json!(max_rows_in_memory)),
        ("maxBytesInMemory", json!(0)),
        ("skipBytesInMemoryOverheadCheck", json!(false)),
        ("maxRowsPerSegment", json!(max_rows_per_segment)),
        ("maxTotalRows", json!(max_total_rows)),
        ("intermediatePersistPeriod", persist),
        ("maxPendingPersists", json!(0)),
        ("indexSpec", default_index_spec()),
        ("indexSpecForIntermediatePersists", default_index_spec()),
        ("reportParseExceptions", json!(false)),
        ("handoffConditionTimeout", json!(900_000)),
        ("resetOffsetAutomatically", json!(reset)),
        ("segmentWriteOutMediumFactory", Value::Null),
        ("workerThreads", Value::Null),
        ("chatRetries", json!(8)),
        ("httpTimeout", json!("PT10S")),
        ("shutdownTimeout", json!("PT80S")),
        ("offsetFetchPeriod", json!("PT30S")),
        ("intermediateHandoffPeriod", handoff),
        ("logParseExceptions", json!(false)),
        ("maxParseExceptions", json!(2_147_483_647)),
        ("maxSavedParseExceptions", json!(0)),
    ];
    let mut rb = Map::new();
    for (k, d) in defaults {
        let given = o.get(k).filter(|v| !v.is_null());
        let keep_given = !matches!(
            k,
            "type"
                | "maxRowsInMemory"
                | "maxRowsPerSegment"
                | "maxTotalRows"
                | "intermediatePersistPeriod"
                | "intermediateHandoffPeriod"
                | "resetOffsetAutomatically"
        );
        rb.insert(
            k.into(),
            match given {
                Some(v) if keep_given => v.clone(),
                _ => d,
            },
        );
    }
    let kinesis = match kind {
        StreamKind::Logstream => {
            rb.insert(
                "skipSequenceNumberAvailabilityCheck".into(),
                o.get("skipSequenceNumberAvailabilityCheck")
                    .cloned()
                    .unwrap_or(json!(false)),
            );
            rb.insert(
                "repartitionTransitionDuration".into(),
                o.get("repartitionTransitionDuration")
                    .cloned()
                    .unwrap_or(json!("PT120S")),
            );
            None
        }
        StreamKind::Shardstream => Some(parse_kinesis_tuning(o, path, reset, &mut rb)?),
    };
    Ok(TuningConfig {
        max_rows_in_memory,
        max_rows_per_segment,
        max_total_rows,
        intermediate_persist_period_ms: persist_ms,
        intermediate_handoff_period_ms: handoff_ms,
        reset_offset_automatically: reset,
        kinesis,
        read_back: rb,
    })
}

impl KinesisTuning {
    /// Sets the task's fetching in `config` from these fields: the record buffer's bytes,
    /// `fetchThreads` (Druid's computation, [`crate::kinesis::fetch_threads`]), the buffer waits
    /// and `maxBytesPerPoll`.
    pub fn apply(&self, config: &mut crate::kinesis::KinesisConfig) {
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        config.record_buffer_bytes = self
            .record_buffer_size_bytes
            .map_or(crate::kinesis::DEFAULT_RECORD_BUFFER_BYTES, to_usize);
        config.fetch_threads = crate::kinesis::fetch_threads(
            self.fetch_threads.map(to_usize),
            config.record_buffer_bytes,
        );
        config.record_buffer_offer_timeout =
            std::time::Duration::from_millis(self.record_buffer_offer_timeout_ms);
        config.record_buffer_full_wait =
            std::time::Duration::from_millis(self.record_buffer_full_wait_ms);
        config.max_bytes_per_poll = to_usize(self.max_bytes_per_poll);
    }
}

/// The Kinesis fields of a `shardstream` `tuningConfig`, added to the read-back `rb` with
/// Druid's defaults (deprecated `recordBufferSize`/`maxRecordsPerPoll` only when given).
fn parse_kinesis_tuning(
    o: &Map<String, Value>,
    path: &str,
    reset_offset_automatically: bool,
    rb: &mut Map<String, Value>,
) -> Result<KinesisTuning, SpecError> {
    let field = |k: &str| format!("{path}.{k}");
    let offer = positive(
        o.get("recordBufferOfferTimeout"),
        5_000,
        &field("recordBufferOfferTimeout"),
    )?;
    let full_wait = positive(
        o.get("recordBufferFullWait"),
        5_000,
        &field("recordBufferFullWait"),
    )?;
    let fetch_threads = match o.get("fetchThreads") {
        None | Some(Value::Null) => None,
        x => Some(positive(x, 1, &field("fetchThreads"))?),
    };
    let max_bytes_per_poll = positive(
        o.get("maxBytesPerPoll"),
        1_000_000,
        &field("maxBytesPerPoll"),
    )?;
    let buffer_bytes = match o.get("recordBufferSizeBytes") {
        None | Some(Value::Null) => None,
        x => Some(positive(x, 1, &field("recordBufferSizeBytes"))?),
    };
    for deprecated in ["recordBufferSize", "maxRecordsPerPoll"] {
        if let Some(x) = o.get(deprecated).filter(|v| !v.is_null()) {
            positive(Some(x), 1, &field(deprecated))?;
            rb.insert(deprecated.into(), x.clone());
        }
    }
    let (transition_ms, transition) = period_ms(
        o.get("repartitionTransitionDuration"),
        "PT120S",
        &field("repartitionTransitionDuration"),
    )?;
    let skip = boolean(
        o.get("skipSequenceNumberAvailabilityCheck"),
        false,
        &field("skipSequenceNumberAvailabilityCheck"),
    )?;
    if skip && reset_offset_automatically {
        return Err(err(format!(
            "{path}.resetOffsetAutomatically: resetOffsetAutomatically cannot be used if skipSequenceNumberAvailabilityCheck=true"
        )));
    }
    let use_list_shards = boolean(o.get("useListShards"), false, &field("useListShards"))?;
    rb.insert("recordBufferSizeBytes".into(), json!(buffer_bytes));
    rb.insert("recordBufferOfferTimeout".into(), json!(offer));
    rb.insert("recordBufferFullWait".into(), json!(full_wait));
    rb.insert("fetchThreads".into(), json!(fetch_threads));
    rb.insert("maxBytesPerPoll".into(), json!(max_bytes_per_poll));
    rb.insert("repartitionTransitionDuration".into(), transition);
    rb.insert("skipSequenceNumberAvailabilityCheck".into(), json!(skip));
    rb.insert("useListShards".into(), json!(use_list_shards));
    Ok(KinesisTuning {
        record_buffer_offer_timeout_ms: offer,
        record_buffer_full_wait_ms: full_wait,
        fetch_threads,
        max_bytes_per_poll,
        record_buffer_size_bytes: buffer_bytes,
        repartition_transition_ms: transition_ms,
        skip_sequence_number_availability_check: skip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({
            "type": "logstream",
            "spec": {
                "dataSchema": {
                    "dataSource": "events",
                    "timestampSpec": {"column": "ts", "format": "millis"},
                    "dimensionsSpec": {"dimensions": ["channel"]},
                    "granularitySpec": {"segmentGranularity": "HOUR", "rollup": false}
                },
                "ioConfig": {
                    "topic": "edits",
                    "inputFormat": {"type": "json"},
                    "consumerProperties": {"bootstrap.servers": "127.0.0.1:9092"}
                }
            }
        })
    }

    #[test]
    fn defaults_are_the_observed_values() {
        let s = SupervisorSpec::parse(&minimal()).unwrap();
        assert_eq!(s.id, "events");
        assert_eq!(s.io.topic, "edits");
        assert_eq!((s.io.replicas, s.io.task_count), (1, 1));
        assert_eq!(s.io.task_duration_ms, 3_600_000);
        assert_eq!(s.io.period_ms, 30_000);
        assert_eq!(s.io.start_delay_ms, 5_000);
        assert_eq!(s.io.completion_timeout_ms, 1_800_000);
        assert_eq!(s.io.poll_timeout_ms, 100);
        assert_eq!(s.tuning.max_rows_in_memory, 150_000);
        assert_eq!(s.tuning.max_rows_per_segment, 5_000_000);
        let rb = s.read_back();
        assert_eq!(rb["type"], "logstream");
        assert_eq!(rb["suspended"], false);
        assert_eq!(rb["context"], Value::Null);
        assert_eq!(rb["spec"]["ioConfig"], rb["ioConfig"]);
        assert_eq!(rb["ioConfig"]["taskDuration"], "PT3600S");
        assert_eq!(rb["ioConfig"]["startDelay"], "PT5S");
        assert_eq!(rb["ioConfig"]["period"], "PT30S");
        assert_eq!(rb["ioConfig"]["completionTimeout"], "PT1800S");
        assert_eq!(rb["ioConfig"]["stream"], "edits");
        assert_eq!(rb["tuningConfig"]["type"], "logstream");
        assert_eq!(rb["tuningConfig"]["maxBytesInMemory"], 0);
        assert_eq!(rb["tuningConfig"]["intermediatePersistPeriod"], "PT10M");
        assert_eq!(
            rb["tuningConfig"]["intermediateHandoffPeriod"],
            "P2147483647D"
        );
        assert_eq!(rb["tuningConfig"]["chatRetries"], 8);
        assert_eq!(rb["tuningConfig"]["maxParseExceptions"], 2_147_483_647);
        assert_eq!(rb["tuningConfig"]["indexSpec"]["bitmap"]["type"], "roaring");
        assert_eq!(rb["dataSchema"]["granularitySpec"]["type"], "uniform");
        assert_eq!(rb["dataSchema"]["granularitySpec"]["intervals"], json!([]));
        // Read-back parses again to the same spec.
        assert_eq!(SupervisorSpec::parse(&rb).unwrap(), s);
    }

    #[test]
    fn flat_form_and_kafka_alias() {
        let m = minimal();
        let flat = json!({
            "type": "kafka",
            "dataSchema": m["spec"]["dataSchema"],
            "ioConfig": m["spec"]["ioConfig"],
            "suspended": true
        });
        let s = SupervisorSpec::parse(&flat).unwrap();
        assert!(s.suspended);
        assert_eq!(s.read_back()["type"], "logstream");
    }

    #[test]
    fn errors_name_the_field() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| v["spec"]["ioConfig"]["consumerProperties"] = json!({})),
                "spec.ioConfig.consumerProperties.bootstrap.servers",
            ),
            (
                Box::new(|v| {
                    v["spec"]["ioConfig"]["consumerProperties"]["security.protocol"] =
                        json!("SASL_SSL");
                    v["spec"]["ioConfig"]["consumerProperties"]["ssl.truststore.type"] =
                        json!("JKS");
                    v["spec"]["ioConfig"]["consumerProperties"]["ssl.truststore.location"] =
                        json!("/etc/kafka/truststore.jks");
                }),
                "spec.ioConfig.consumerProperties.ssl.truststore.type",
            ),
            (
                Box::new(|v| {
                    v["spec"]["ioConfig"]
                        .as_object_mut()
                        .unwrap()
                        .remove("topic");
                }),
                "spec.ioConfig.topic",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["taskCount"] = json!(0)),
                "spec.ioConfig.taskCount",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["taskDuration"] = json!("PT1X")),
                "spec.ioConfig.taskDuration",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["bogus"] = json!(1)),
                "spec.ioConfig.bogus",
            ),
            (
                Box::new(|v| v["spec"]["tuningConfig"] = json!({"type": "index_parallel"})),
                "spec.tuningConfig.type",
            ),
            (Box::new(|v| v["type"] = json!("pulsar")), "type"),
            (
                Box::new(|v| {
                    v["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] =
                        json!("FORTNIGHT")
                }),
                "spec.dataSchema.granularitySpec.segmentGranularity",
            ),
            (
                Box::new(|v| {
                    v["spec"]["dataSchema"]
                        .as_object_mut()
                        .unwrap()
                        .remove("dataSource");
                }),
                "spec.dataSchema",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["inputFormat"] = json!({"type": "xml"})),
                "spec.ioConfig.inputFormat",
            ),
        ];
        for (edit, field) in cases {
            let mut v = minimal();
            edit(&mut v);
            let e = SupervisorSpec::parse(&v).unwrap_err();
            assert!(e.0.starts_with(field), "expected [{field}] in: {e}");
        }
    }

    fn kinesis_minimal() -> Value {
        json!({
            "type": "shardstream",
            "spec": {
                "dataSchema": minimal()["spec"]["dataSchema"],
                "ioConfig": {
                    "stream": "edits",
                    "inputFormat": {"type": "json"}
                },
                "tuningConfig": {"type": "shardstream"}
            }
        })
    }

    #[test]
    fn shardstream_defaults_and_read_back_follow_druids_kinesis_supervisor() {
        let s = SupervisorSpec::parse(&kinesis_minimal()).unwrap();
        assert_eq!(s.kind, StreamKind::Shardstream);
        assert_eq!(s.io.topic, "edits");
        assert!(s.io.consumer_properties.is_empty());
        assert_eq!(s.io.completion_timeout_ms, 1_800_000);
        let k = s.io.kinesis.clone().unwrap();
        assert_eq!(k.endpoint, "kinesis.us-east-1.amazonaws.com");
        assert_eq!(k.endpoint_url(), "https://kinesis.us-east-1.amazonaws.com");
        assert_eq!(k.region.as_deref(), Some("us-east-1"));
        assert_eq!(
            (k.fetch_delay_ms, k.records_per_fetch, k.deaggregate),
            (0, None, false)
        );
        let t = s.tuning.kinesis.clone().unwrap();
        assert_eq!(t.record_buffer_offer_timeout_ms, 5_000);
        assert_eq!(t.record_buffer_full_wait_ms, 5_000);
        assert_eq!(t.max_bytes_per_poll, 1_000_000);
        assert_eq!(t.repartition_transition_ms, 120_000);
        assert!(!t.skip_sequence_number_availability_check);

        let rb = s.read_back();
        assert_eq!(rb["type"], "shardstream");
        let io = &rb["ioConfig"];
        assert!(io.get("type").is_none(), "{io}");
        assert!(io.get("region").is_none());
        assert!(io.get("topic").is_none() && io.get("consumerProperties").is_none());
        for absent in [
            "fetchDelayMillis",
            "deaggregate",
            "recordsPerFetch",
            "awsAssumedRoleArn",
            "awsExternalId",
        ] {
            assert!(io.get(absent).is_none(), "{absent} in {io}");
        }
        assert_eq!(io["stream"], "edits");
        assert_eq!(io["endpoint"], "kinesis.us-east-1.amazonaws.com");
        assert_eq!(io["useEarliestSequenceNumber"], false);
        assert_eq!(io["taskDuration"], "PT3600S");
        assert_eq!(io["completionTimeout"], "PT1800S");
        let tuning = &rb["tuningConfig"];
        assert_eq!(tuning["type"], "shardstream");
        assert_eq!(tuning["recordBufferOfferTimeout"], 5000);
        assert_eq!(tuning["recordBufferFullWait"], 5000);
        assert_eq!(tuning["maxBytesPerPoll"], 1_000_000);
        assert_eq!(tuning["repartitionTransitionDuration"], "PT120S");
        assert_eq!(tuning["offsetFetchPeriod"], "PT30S");
        assert_eq!(tuning["useListShards"], false);
        assert_eq!(tuning["skipSequenceNumberAvailabilityCheck"], false);
        assert_eq!(tuning["handoffConditionTimeout"], 900_000);
        assert!(tuning.get("recordBufferSize").is_none());
        // Read-back parses again to the same spec.
        assert_eq!(SupervisorSpec::parse(&rb).unwrap(), s);
    }

    #[test]
    fn shardstream_buffer_and_fetch_threads_reach_the_client_configuration() {
        use crate::kinesis::{DEFAULT_RECORD_BUFFER_BYTES, fetch_threads};
        let mut v = kinesis_minimal();
        v["spec"]["tuningConfig"]["recordBufferSizeBytes"] = json!(25_000_000);
        v["spec"]["tuningConfig"]["fetchThreads"] = json!(8);
        v["spec"]["tuningConfig"]["recordBufferOfferTimeout"] = json!(100);
        v["spec"]["tuningConfig"]["recordBufferFullWait"] = json!(200);
        v["spec"]["tuningConfig"]["maxBytesPerPoll"] = json!(4096);
        let s = SupervisorSpec::parse(&v).unwrap();
        let mut config = s.io.kinesis.as_ref().unwrap().kinesis_config(None);
        s.tuning.kinesis.as_ref().unwrap().apply(&mut config);
        assert_eq!(config.record_buffer_bytes, 25_000_000);
        // Druid's cap: one fetch thread per 10 MB of buffer.
        assert_eq!(config.fetch_threads, 2);
        assert_eq!(
            config.record_buffer_offer_timeout,
            std::time::Duration::from_millis(100)
        );
        assert_eq!(
            config.record_buffer_full_wait,
            std::time::Duration::from_millis(200)
        );
        assert_eq!(config.max_bytes_per_poll, 4096);
        // Defaults: 100 MB, two threads per core (at most 10), 5 s waits, 1,000,000 bytes.
        let s = SupervisorSpec::parse(&kinesis_minimal()).unwrap();
        let mut config = s.io.kinesis.as_ref().unwrap().kinesis_config(None);
        s.tuning.kinesis.as_ref().unwrap().apply(&mut config);
        assert_eq!(config.record_buffer_bytes, DEFAULT_RECORD_BUFFER_BYTES);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(config.fetch_threads, (2 * cores).min(10));
        assert_eq!(config.max_bytes_per_poll, 1_000_000);
        assert_eq!(fetch_threads(Some(3), 1), 1);
        assert_eq!(fetch_threads(Some(3), 100_000_000), 3);
    }

    #[test]
    fn shardstream_endpoint_region_and_the_set_fields_read_back() {
        let mut v = kinesis_minimal();
        v["type"] = json!("kinesis");
        v["spec"]["ioConfig"]["region"] = json!("cn-north-1");
        v["spec"]["ioConfig"]["fetchDelayMillis"] = json!(250);
        v["spec"]["ioConfig"]["recordsPerFetch"] = json!(500);
        v["spec"]["ioConfig"]["awsAssumedRoleArn"] = json!("arn:aws:iam::1:role/r");
        v["spec"]["ioConfig"]["awsExternalId"] = json!("ext");
        v["spec"]["ioConfig"]["useEarliestSequenceNumber"] = json!(true);
        v["spec"]["tuningConfig"]["maxRecordsPerPoll"] = json!(100);
        let s = SupervisorSpec::parse(&v).unwrap();
        let k = s.io.kinesis.clone().unwrap();
        assert_eq!(k.endpoint, "kinesis.cn-north-1.amazonaws.com.cn");
        assert!(s.io.use_earliest_offset);
        let rb = s.read_back();
        assert_eq!(rb["type"], "shardstream");
        assert_eq!(rb["ioConfig"]["fetchDelayMillis"], 250);
        assert_eq!(rb["ioConfig"]["recordsPerFetch"], 500);
        assert_eq!(rb["ioConfig"]["awsAssumedRoleArn"], "arn:aws:iam::1:role/r");
        assert_eq!(rb["tuningConfig"]["maxRecordsPerPoll"], 100);
        assert!(rb["ioConfig"].get("region").is_none());
        let config = k.kinesis_config(None);
        assert_eq!(config.records_per_fetch, 500);
        assert_eq!(config.fetch_delay, std::time::Duration::from_millis(250));
        assert_eq!(config.external_id.as_deref(), Some("ext"));

        // An explicit endpoint wins over the region; an emulator URL is kept as given.
        let mut v = kinesis_minimal();
        v["spec"]["ioConfig"]["endpoint"] = json!("http://127.0.0.1:4567");
        v["spec"]["ioConfig"]["region"] = json!("eu-west-1");
        let s = SupervisorSpec::parse(&v).unwrap();
        let k = s.io.kinesis.unwrap();
        assert_eq!(k.endpoint_url(), "http://127.0.0.1:4567");
        assert_eq!(k.region.as_deref(), Some("eu-west-1"));
    }

    #[test]
    fn shardstream_errors_name_the_field_and_credentials_are_refused() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| {
                    v["spec"]["ioConfig"]
                        .as_object_mut()
                        .unwrap()
                        .remove("stream");
                }),
                "spec.ioConfig.stream",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["topic"] = json!("t")),
                "spec.ioConfig.topic",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["awsSecretAccessKey"] = json!("s3cr3t")),
                "spec.ioConfig.awsSecretAccessKey",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["awsAccessKeyId"] = json!("AKID")),
                "spec.ioConfig.awsAccessKeyId",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["recordsPerFetch"] = json!(0)),
                "spec.ioConfig.recordsPerFetch",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["fetchDelayMillis"] = json!(-1)),
                "spec.ioConfig.fetchDelayMillis",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["region"] = json!("US East")),
                "spec.ioConfig.region",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["endpoint"] = json!("ftp://x")),
                "spec.ioConfig.endpoint",
            ),
            (
                Box::new(|v| v["spec"]["ioConfig"]["deaggregate"] = json!("yes")),
                "spec.ioConfig.deaggregate",
            ),
            (
                Box::new(|v| v["spec"]["tuningConfig"]["type"] = json!("logstream")),
                "spec.tuningConfig.type",
            ),
            (
                Box::new(|v| v["spec"]["tuningConfig"]["fetchThreads"] = json!(0)),
                "spec.tuningConfig.fetchThreads",
            ),
            (
                Box::new(|v| {
                    v["spec"]["tuningConfig"]["skipSequenceNumberAvailabilityCheck"] = json!(true);
                    v["spec"]["tuningConfig"]["resetOffsetAutomatically"] = json!(true);
                }),
                "spec.tuningConfig.resetOffsetAutomatically",
            ),
            (
                Box::new(|v| {
                    v["spec"]["tuningConfig"]["repartitionTransitionDuration"] = json!("P1M")
                }),
                "spec.tuningConfig.repartitionTransitionDuration",
            ),
        ];
        for (edit, field) in cases {
            let mut v = kinesis_minimal();
            edit(&mut v);
            let e = SupervisorSpec::parse(&v).unwrap_err();
            assert!(e.0.starts_with(field), "expected [{field}] in: {e}");
            assert!(!e.0.contains("s3cr3t"), "{e}");
        }
        // Kinesis tuning fields are not logstream fields.
        let mut v = minimal();
        v["spec"]["tuningConfig"] = json!({"fetchThreads": 2});
        let e = SupervisorSpec::parse(&v).unwrap_err();
        assert!(e.0.starts_with("spec.tuningConfig.fetchThreads"), "{e}");
    }

    #[test]
    fn batch_spec_reads_the_given_files_and_intervals() {
        let s = SupervisorSpec::parse(&minimal()).unwrap();
        let iv = dolmen_common::Interval::parse("2020-01-01/2020-01-02").unwrap();
        let b = s
            .batch_spec(&[std::path::PathBuf::from("/tmp/a.json")], &[iv])
            .unwrap();
        assert!(b.spec.io_config.append_to_existing);
        assert_eq!(b.spec.data_schema.granularity_spec.intervals, vec![iv]);
        assert_eq!(b.spec.data_schema.data_source, "events");
    }
}
