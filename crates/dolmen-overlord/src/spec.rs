//! Task specs the overlord accepts (`POST /indexer/v1/task`): native batch ingestion
//! (`index_parallel`, `index`; [`IndexTaskSpec`], parsed by `dolmen-ingest`) and `kill`
//! ([`KillTaskSpec`], Druid's `KillUnusedSegmentsTask`).
//!
//! [`TaskSpec::from_json`] dispatches on `type` and rejects anything else with a 400 that names
//! the field. [`TaskSpec::with_defaults`] fills in what the stored payload carries beyond the
//! submission (`id`, `groupId`, `dataSource`, `resource`, `context`, and a kill task's
//! `batchSize`), so `GET /task/{id}` echoes a complete payload.

use dolmen_common::Interval;
use dolmen_common::time::{format_iso_millis, parse_iso_instant};
use dolmen_ingest::IndexTaskSpec;
use dolmen_ingest::spec::{validate_data_source_name, validate_task_id};
use dolmen_stream::task::StreamTaskSpec;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::OverlordError;
use crate::compact::CompactTaskSpec;
use crate::controller::ControllerSpec;

/// Druid's default number of segments a kill task deletes per metadata transaction
/// (`KillUnusedSegmentsTask.DEFAULT_SEGMENT_NUKE_BATCH_SIZE`).
pub const DEFAULT_KILL_BATCH_SIZE: i64 = 100;

/// A parsed task submission.
#[derive(Debug, Clone)]
pub enum TaskSpec {
    /// `index_parallel` or `index`: batch ingestion (boxed: the spec is large).
    Index(Box<IndexTaskSpec>),
    /// `kill`: permanent deletion of unused segments.
    Kill(Box<KillTaskSpec>),
    /// `query_controller`: a SQL statement run as a task (see [`crate::controller`]).
    Controller(Box<ControllerSpec>),
    /// `index_logstream`: a streaming task reading Kafka partitions (created by a `logstream`
    /// supervisor, see [`crate::supervisor`]).
    Logstream(Box<StreamTaskSpec>),
    /// `compact`: rewrites the segments of an interval (see [`crate::compact`]).
    Compact(Box<CompactTaskSpec>),
}

/// A `kill` task: deletes the *unused* segments of a datasource lying fully inside `interval`
/// from the metadata store and from deep storage (Druid's `KillUnusedSegmentsTask`,
/// `docs/ingestion/tasks.md` "kill"). Used segments are never touched; mark them unused first
/// (`POST /coordinator/v1/datasources/{ds}/markUnused`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KillTaskSpec {
    /// Always `kill`.
    #[serde(rename = "type")]
    pub task_type: String,
    /// Task id chosen by the caller (generated when absent:
    /// `kill_<dataSource>_<random>_<start>_<end>_<now>`, as Druid's `AbstractTask.getOrMakeId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Group id (defaults to the task id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Task resource (read-back field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Value>,
    /// The datasource whose unused segments are deleted.
    pub data_source: String,
    /// Only unused segments whose interval lies fully inside this one are deleted; the task
    /// holds an EXCLUSIVE lock on it while it runs.
    pub interval: Interval,
    /// Only segments of these versions (all versions when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<String>>,
    /// Task context (kept and echoed; no key changes a kill task's behaviour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Map<String, Value>>,
    /// Segments deleted per metadata transaction (positive; default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<i64>,
    /// At most this many segments are deleted (positive; no limit when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// Only segments whose used flag last changed at or before this ISO 8601 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_used_status_last_updated_time: Option<String>,
    /// Deprecated in Druid; only `false` is accepted (mark segments unused with the
    /// coordinator API first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark_as_unused: Option<bool>,
}

impl KillTaskSpec {
    /// Checks what serde cannot: type, datasource name, id, positive `batchSize`/`limit`, the
    /// instant in `maxUsedStatusLastUpdatedTime`, and `markAsUnused`.
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] naming the field.
    pub fn validate(&self) -> Result<(), OverlordError> {
        let invalid = |m: String| Err(OverlordError::InvalidTask(m));
        if self.task_type != "kill" {
            return invalid(format!("type: expected [kill], got [{}]", self.task_type));
        }
        validate_data_source_name(&self.data_source, "dataSource")
            .map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
        if let Some(id) = &self.id {
            validate_task_id(id).map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
        }
        if let Some(b) = self.batch_size
            && b <= 0
        {
            return invalid(format!("batchSize [{b}] must be a positive integer"));
        }
        if let Some(l) = self.limit
            && l <= 0
        {
            return invalid(format!("limit [{l}] must be a positive integer"));
        }
        if let Some(t) = &self.max_used_status_last_updated_time {
            parse_iso_instant(t).map_err(|e| {
                OverlordError::InvalidTask(format!(
                    "maxUsedStatusLastUpdatedTime [{t}] is not an ISO 8601 instant: {}",
                    e.0
                ))
            })?;
        }
        if self.mark_as_unused == Some(true) {
            return invalid(
                "markAsUnused: true is not supported; mark the segments unused first (POST /coordinator/v1/datasources/{dataSource}/markUnused), then kill them".into(),
            );
        }
        Ok(())
    }

    /// Segments deleted per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size.unwrap_or(DEFAULT_KILL_BATCH_SIZE).max(1) as usize
    }

    /// The last-update bound in ms, if given (validated by [`KillTaskSpec::validate`]).
    pub fn max_used_status_last_updated_ms(&self) -> Option<i64> {
        self.max_used_status_last_updated_time
            .as_deref()
            .and_then(|t| parse_iso_instant(t).ok())
    }
}

/// Parses a JSON value into `T`, naming the path of the first bad field.
pub(crate) fn parse_named<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, OverlordError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || path.is_empty() {
            OverlordError::InvalidTask(inner)
        } else {
            OverlordError::InvalidTask(format!("{path}: {inner}"))
        }
    })
}

impl TaskSpec {
    /// Parses a task submission by its `type`.
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] naming the bad field (`type` when it is missing or not
    /// one of `index_parallel`, `index`, `kill`).
    pub fn from_json(payload: &Value) -> Result<TaskSpec, OverlordError> {
        let task_type = payload
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match task_type {
            "" => Err(OverlordError::InvalidTask("type: missing task type".into())),
            "index_parallel" | "index" => IndexTaskSpec::from_json(payload)
                .map(|s| TaskSpec::Index(Box::new(s)))
                .map_err(|e| OverlordError::InvalidTask(e.to_string())),
            "kill" => {
                let spec: KillTaskSpec = parse_named(payload)?;
                spec.validate()?;
                Ok(TaskSpec::Kill(Box::new(spec)))
            }
            "query_controller" => {
                let spec: ControllerSpec = parse_named(payload)?;
                spec.validate()?;
                Ok(TaskSpec::Controller(Box::new(spec)))
            }
            crate::compact::TASK_TYPE => {
                CompactTaskSpec::from_json(payload).map(|s| TaskSpec::Compact(Box::new(s)))
            }
            dolmen_stream::task::TASK_TYPE | dolmen_stream::task::SHARDSTREAM_TASK_TYPE => {
                StreamTaskSpec::from_json(payload)
                    .map(|s| TaskSpec::Logstream(Box::new(s)))
                    .map_err(OverlordError::InvalidTask)
            }
            other => Err(OverlordError::InvalidTask(format!(
                "type: unsupported task type [{other}]; supported: index_parallel, index, kill, query_controller, index_logstream, index_shardstream, compact"
            ))),
        }
    }

    /// The task type name (`index_parallel`, `index`, `kill`).
    pub fn task_type(&self) -> &str {
        match self {
            TaskSpec::Index(s) => &s.task_type,
            TaskSpec::Kill(s) => &s.task_type,
            TaskSpec::Controller(s) => &s.task_type,
            TaskSpec::Logstream(s) => dolmen_stream::task::task_type(s.spec.kind),
            TaskSpec::Compact(s) => &s.task_type,
        }
    }

    /// The datasource the task writes or deletes from.
    pub fn data_source(&self) -> &str {
        match self {
            TaskSpec::Index(s) => s.data_source(),
            TaskSpec::Kill(s) => &s.data_source,
            TaskSpec::Controller(s) => &s.data_source,
            TaskSpec::Logstream(s) => &s.spec.data_source,
            TaskSpec::Compact(s) => &s.data_source,
        }
    }

    /// The caller-chosen id, if any.
    pub fn id(&self) -> Option<&str> {
        match self {
            TaskSpec::Index(s) => s.id.as_deref(),
            TaskSpec::Kill(s) => s.id.as_deref(),
            TaskSpec::Controller(s) => s.id.as_deref(),
            TaskSpec::Logstream(s) => Some(&s.id),
            TaskSpec::Compact(s) => s.id.as_deref(),
        }
    }

    /// The group id (the task id unless the caller chose one).
    pub fn group_id(&self) -> Option<&str> {
        match self {
            TaskSpec::Index(s) => s.group_id.as_deref(),
            TaskSpec::Kill(s) => s.group_id.as_deref(),
            TaskSpec::Controller(s) => s.group_id.as_deref(),
            TaskSpec::Logstream(_) => None,
            TaskSpec::Compact(s) => s.group_id.as_deref(),
        }
    }

    /// The spec as stored: `id`, `groupId`, `dataSource`, `resource` and `context` filled in
    /// (and `batchSize` for kill tasks).
    pub fn with_defaults(&self, id: &str) -> TaskSpec {
        let group = self.group_id().unwrap_or(id).to_string();
        let resource = || serde_json::json!({"availabilityGroup": id, "requiredCapacity": 1});
        match self {
            TaskSpec::Index(s) => {
                let mut s = s.clone();
                s.data_source = Some(s.data_source().to_string());
                s.id = Some(id.to_string());
                s.group_id = Some(group);
                s.resource.get_or_insert_with(resource);
                s.context.get_or_insert_with(serde_json::Map::new);
                TaskSpec::Index(s)
            }
            TaskSpec::Kill(s) => {
                let mut s = s.clone();
                s.id = Some(id.to_string());
                s.group_id = Some(group);
                s.resource.get_or_insert_with(resource);
                s.context.get_or_insert_with(serde_json::Map::new);
                s.batch_size.get_or_insert(DEFAULT_KILL_BATCH_SIZE);
                TaskSpec::Kill(s)
            }
            TaskSpec::Controller(s) => {
                let mut s = s.clone();
                s.id = Some(id.to_string());
                s.group_id = Some(group);
                s.resource.get_or_insert_with(resource);
                s.context.get_or_insert_with(serde_json::Map::new);
                TaskSpec::Controller(s)
            }
            TaskSpec::Logstream(s) => TaskSpec::Logstream(s.clone()),
            TaskSpec::Compact(s) => {
                let mut s = Box::new(s.normalized());
                s.id = Some(id.to_string());
                s.group_id = Some(group);
                s.resource.get_or_insert_with(resource);
                s.context.get_or_insert_with(serde_json::Map::new);
                TaskSpec::Compact(s)
            }
        }
    }

    /// The payload `GET /task/{id}` returns.
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] if the spec cannot be serialized (not expected).
    pub fn to_payload(&self) -> Result<Value, OverlordError> {
        match self {
            TaskSpec::Index(s) => serde_json::to_value(s),
            TaskSpec::Kill(s) => serde_json::to_value(s),
            TaskSpec::Controller(s) => serde_json::to_value(s),
            TaskSpec::Logstream(s) => Ok(s.to_json()),
            TaskSpec::Compact(s) => serde_json::to_value(s),
        }
        .map_err(|e| OverlordError::InvalidTask(e.to_string()))
    }

    /// A new task id for this spec, as Druid makes them: `<type>_<dataSource>_<random>_<now>`,
    /// with the interval's start and end before `<now>` for kill tasks.
    pub fn generate_id(&self, now_ms: i64) -> String {
        match self {
            TaskSpec::Index(s) => generate_task_id(&s.task_type, s.data_source(), now_ms),
            TaskSpec::Kill(s) => generate_kill_task_id(&s.data_source, s.interval, now_ms),
            // Druid names statements `query-<uuid>`.
            TaskSpec::Controller(_) => format!("query-{}", uuid::Uuid::new_v4()),
            TaskSpec::Logstream(s) => s.id.clone(),
            TaskSpec::Compact(s) => generate_task_id(&s.task_type, &s.data_source, now_ms),
        }
    }
}

/// Eight random lowercase letters, the random part of Druid's task ids.
pub(crate) fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..8)
        .map(|_| (b'a' + rng.random_range(0..26u8)) as char)
        .collect()
}

/// A task id as Druid makes them: `<type>_<dataSource>_<8 random letters>_<ISO time>`.
pub fn generate_task_id(task_type: &str, data_source: &str, now_ms: i64) -> String {
    format!(
        "{task_type}_{data_source}_{}_{}",
        random_suffix(),
        format_iso_millis(now_ms)
    )
}

/// A kill task id as Druid makes them: `kill_<dataSource>_<8 random letters>_<start>_<end>_<now>`.
pub fn generate_kill_task_id(data_source: &str, interval: Interval, now_ms: i64) -> String {
    format!(
        "kill_{data_source}_{}_{}_{}_{}",
        random_suffix(),
        format_iso_millis(interval.start),
        format_iso_millis(interval.end),
        format_iso_millis(now_ms)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn err(v: Value) -> String {
        match TaskSpec::from_json(&v) {
            Err(OverlordError::InvalidTask(m)) => m,
            other => panic!("expected InvalidTask, got {other:?}"),
        }
    }

    #[test]
    fn kill_spec_parses_and_fills_defaults() {
        let spec = TaskSpec::from_json(&json!({
            "type": "kill", "dataSource": "wiki", "interval": "2015-09-12/2015-09-13"
        }))
        .unwrap();
        assert_eq!(spec.task_type(), "kill");
        assert_eq!(spec.data_source(), "wiki");
        let id = spec.generate_id(0);
        assert!(
            id.starts_with("kill_wiki_")
                && id.ends_with(
                    "_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_1970-01-01T00:00:00.000Z"
                ),
            "{id}"
        );
        let stored = spec.with_defaults("k1").to_payload().unwrap();
        assert_eq!(stored["id"], "k1");
        assert_eq!(stored["groupId"], "k1");
        assert_eq!(stored["batchSize"], 100);
        assert_eq!(
            stored["interval"],
            "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
        );
        assert_eq!(stored["resource"]["availabilityGroup"], "k1");
        assert_eq!(stored["context"], json!({}));
        // The stored payload parses again (restart, read-back).
        assert!(TaskSpec::from_json(&stored).is_ok());
    }

    #[test]
    fn bad_kill_specs_name_the_field() {
        let base = || json!({"type": "kill", "dataSource": "wiki", "interval": "2015/2016"});
        let with = |k: &str, v: Value| {
            let mut s = base();
            s[k] = v;
            s
        };
        assert!(err(with("interval", json!("yesterday"))).contains("interval"));
        assert!(err(with("batchSize", json!(0))).contains("batchSize"));
        assert!(err(with("limit", json!(-3))).contains("limit"));
        assert!(err(with("markAsUnused", json!(true))).contains("markAsUnused"));
        assert!(err(with("maxUsedStatusLastUpdatedTime", json!("x"))).contains("maxUsedStatus"));
        assert!(err(with("bogus", json!(1))).contains("bogus"));
        assert!(err(with("dataSource", json!("../x"))).contains("dataSource"));
        let mut missing = base();
        missing.as_object_mut().unwrap().remove("interval");
        assert!(err(missing).contains("interval"));
        assert!(err(json!({"type": "compact"})).contains("dataSource"));
        assert!(err(json!({"dataSource": "x"})).contains("type"));
    }
}
