//! `query_controller` tasks: SQL statements run as tasks (Druid's multi-stage query engine,
//! "MSQ"): async `SELECT`s of the statements API (`/v2/sql/statements`) and SQL-based ingestion
//! (`INSERT` / `REPLACE`, also through `/v2/sql/task`).
//!
//! The overlord owns their lifecycle like any task (queue in the metadata store, locks, slots,
//! logs, reports, shutdown, restart recovery); the work itself (planning and running SQL,
//! writing result pages or segments) belongs to the query layer, which plugs in through
//! [`ControllerRunner`] (the overlord sits below the SQL engine and cannot call it directly).
//!
//! Locks follow the statement's destination (`ControllerSpec::destination`, the shape of
//! Druid's `MSQDestination`): `REPLACE` holds EXCLUSIVE locks on its `replaceTimeChunks` (all
//! time for `OVERWRITE ALL`), `INSERT` an APPEND lock on all time (it may write any chunk),
//! a `SELECT` none.

use std::sync::{Arc, Mutex};

use dolmen_common::Interval;
use dolmen_common::time::format_iso_millis;
use dolmen_ingest::{IndexTaskEnv, IngestError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::OverlordError;

/// Datasource name Druid reports for the results of a `SELECT` statement.
pub const SELECT_DATA_SOURCE: &str = "__query_select";

/// Where a statement's output goes (Druid's `MSQDestination`, `spec.destination`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Destination {
    /// Segments of a datasource (`INSERT` / `REPLACE`).
    DataSource {
        /// The target datasource.
        data_source: String,
        /// `segmentGranularity` (`PARTITIONED BY`), as Druid's granularity JSON.
        segment_granularity: Value,
        /// Time chunks replaced (`REPLACE`); absent for `INSERT`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replace_time_chunks: Option<Vec<Interval>>,
    },
    /// `SELECT` results kept with the task (default `selectDestination`).
    TaskReport,
    /// `SELECT` results written to durable storage in pages (`selectDestination:
    /// durableStorage`).
    DurableStorage,
}

/// The `spec` of a `query_controller` task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerQuerySpec {
    /// Where the output goes.
    pub destination: Destination,
    /// Anything else (`columnMappings`, `tuningConfig`, ...), kept and echoed.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A `query_controller` task payload: the SQL statement and how to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerSpec {
    /// Always `query_controller`.
    #[serde(rename = "type")]
    pub task_type: String,
    /// Task id (also the statement's `queryId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Group id (defaults to the task id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Task resource (read-back field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Value>,
    /// The target datasource, or [`SELECT_DATA_SOURCE`] for a `SELECT`.
    pub data_source: String,
    /// The statement's SQL text, as submitted (including `SET` statements).
    pub sql_query: String,
    /// The request's `context`.
    #[serde(default)]
    pub sql_query_context: Map<String, Value>,
    /// The request's typed `parameters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql_parameters: Option<Value>,
    /// Output column SQL types (`SELECT`), in order.
    #[serde(default)]
    pub sql_type_names: Vec<String>,
    /// Output column runtime types (`SELECT`), in order.
    #[serde(default)]
    pub native_type_names: Vec<String>,
    /// Output column names (`SELECT`), in order.
    #[serde(default)]
    pub column_names: Vec<String>,
    /// The statement's destination and settings.
    pub spec: ControllerQuerySpec,
    /// Identity that submitted the statement (only it may read the results once security is
    /// on); `null` when anonymous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<String>,
    /// Task context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Map<String, Value>>,
}

impl ControllerSpec {
    /// Checks the fields serde cannot.
    ///
    /// # Errors
    /// [`OverlordError::InvalidTask`] naming the field.
    pub fn validate(&self) -> Result<(), OverlordError> {
        if self.task_type != "query_controller" {
            return Err(OverlordError::InvalidTask(format!(
                "type: expected [query_controller], got [{}]",
                self.task_type
            )));
        }
        if self.sql_query.trim().is_empty() {
            return Err(OverlordError::InvalidTask("sqlQuery: empty".into()));
        }
        if let Some(id) = &self.id {
            dolmen_ingest::spec::validate_task_id(id)
                .map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
        }
        if let Destination::DataSource { data_source, .. } = &self.spec.destination {
            dolmen_ingest::spec::validate_data_source_name(
                data_source,
                "spec.destination.dataSource",
            )
            .map_err(|e| OverlordError::InvalidTask(e.to_string()))?;
            if data_source != &self.data_source {
                return Err(OverlordError::InvalidTask(format!(
                    "dataSource [{}] differs from spec.destination.dataSource [{data_source}]",
                    self.data_source
                )));
            }
        }
        Ok(())
    }

    /// The locks the statement needs: `(intervals, exclusive)`, or `None` for a `SELECT`.
    pub fn locks(&self) -> Option<(Vec<Interval>, bool)> {
        match &self.spec.destination {
            Destination::DataSource {
                replace_time_chunks: Some(chunks),
                ..
            } => Some((chunks.clone(), true)),
            Destination::DataSource { .. } => Some((vec![Interval::ETERNITY], false)),
            Destination::TaskReport | Destination::DurableStorage => None,
        }
    }

    /// Whether the statement writes segments (`INSERT` / `REPLACE`).
    pub fn is_ingestion(&self) -> bool {
        matches!(self.spec.destination, Destination::DataSource { .. })
    }
}

/// Live state of a running statement, shared between the overlord (which serves it as the
/// task report) and the [`ControllerRunner`] (which fills it in).
///
/// The report has the shape of Druid's `multiStageQuery` task report
/// (`MSQTaskReportPayload`): `status`, `stages`, `counters` and, for a `SELECT`, `results`.
#[derive(Debug)]
pub struct ControllerProgress {
    start_ms: i64,
    inner: Mutex<ProgressInner>,
}

#[derive(Debug, Default)]
struct ProgressInner {
    stages: Value,
    counters: Value,
    results: Option<Value>,
    warnings: Vec<Value>,
    status_fields: Map<String, Value>,
}

impl ControllerProgress {
    /// Progress of a statement that starts now.
    pub fn new() -> ControllerProgress {
        ControllerProgress {
            start_ms: dolmen_common::time::now_millis(),
            inner: Mutex::new(ProgressInner {
                stages: json!([]),
                counters: json!({}),
                ..Default::default()
            }),
        }
    }

    /// Replaces the `stages` array (Druid's stage objects: `stageNumber`, `definition`,
    /// `phase`, `workerCount`, `partitionCount`, ...).
    pub fn set_stages(&self, stages: Value) {
        self.inner.lock().expect("progress lock").stages = stages;
    }

    /// Replaces the `counters` object (stage -> worker -> channel -> counters).
    pub fn set_counters(&self, counters: Value) {
        self.inner.lock().expect("progress lock").counters = counters;
    }

    /// Sets the `results` object of a `SELECT` (`signature`, `sqlTypeNames`, `results`
    /// sample rows, `pages`, `numTotalRows`, `totalSizeInBytes`, `destination`).
    pub fn set_results(&self, results: Value) {
        self.inner.lock().expect("progress lock").results = Some(results);
    }

    /// Sets an extra field of the report's `status` object (e.g. `segmentLoadWaiterStatus`).
    pub fn set_status_field(&self, key: &str, value: Value) {
        self.inner
            .lock()
            .expect("progress lock")
            .status_fields
            .insert(key.to_string(), value);
    }

    /// Adds a warning (an object with `errorCode` and `errorMessage`).
    pub fn warn(&self, warning: Value) {
        self.inner
            .lock()
            .expect("progress lock")
            .warnings
            .push(warning);
    }

    /// The `multiStageQuery` report; `outcome` is `None` while running, else
    /// `Some(Ok(()))` / `Some(Err(message))`.
    pub fn report(&self, task_id: &str, outcome: Option<Result<(), &str>>) -> Value {
        let inner = self.inner.lock().expect("progress lock");
        let now = dolmen_common::time::now_millis();
        let mut status = json!({
            "status": match outcome {
                None => "RUNNING",
                Some(Ok(())) => "SUCCESS",
                Some(Err(_)) => "FAILED",
            },
            "startTime": format_iso_millis(self.start_ms),
            "durationMs": (now - self.start_ms).max(0),
            "pendingTasks": 0,
            "runningTasks": if outcome.is_none() { 1 } else { 0 },
        });
        if let Some(Err(msg)) = outcome {
            let (code, message) = split_error_code(msg);
            status["errorReport"] = json!({
                "taskId": task_id,
                "error": {"errorCode": code, "errorMessage": message},
            });
        }
        for (k, v) in &inner.status_fields {
            status[k.as_str()] = v.clone();
        }
        if !inner.warnings.is_empty() {
            status["warnings"] = Value::Array(inner.warnings.clone());
        }
        let mut payload = json!({
            "status": status,
            "stages": inner.stages,
            "counters": inner.counters,
        });
        if let Some(r) = &inner.results {
            payload["results"] = r.clone();
        }
        json!({
            "multiStageQuery": {
                "type": "multiStageQuery",
                "taskId": task_id,
                "payload": payload,
            }
        })
    }
}

impl Default for ControllerProgress {
    fn default() -> Self {
        ControllerProgress::new()
    }
}

/// Splits an error message `"<ErrorCode>: <message>"` (the form [`ControllerRunner`]s use
/// for Druid's MSQ fault codes, e.g. `InsertTimeOutOfBounds`, `QueryNotSupported`) into its
/// code and message; other messages get the code `UnknownError`.
pub fn split_error_code(msg: &str) -> (&str, &str) {
    match msg.split_once(": ") {
        Some((code, rest))
            if !code.is_empty() && code.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            (code, rest)
        }
        _ => ("UnknownError", msg),
    }
}

/// A `query_controller` task handed to the [`ControllerRunner`].
#[derive(Debug)]
pub struct ControllerTask {
    /// The task (and statement) id.
    pub id: String,
    /// The payload.
    pub spec: ControllerSpec,
    /// Work directory, deep storage, metadata store, cancellation, and the version of the
    /// task's locks (for `INSERT` / `REPLACE`).
    pub env: IndexTaskEnv,
    /// Live report state to fill in.
    pub progress: Arc<ControllerProgress>,
}

/// Runs the SQL of `query_controller` tasks (implemented by the query layer, installed with
/// [`crate::Overlord::set_controller_runner`]).
pub trait ControllerRunner: Send + Sync + std::fmt::Debug {
    /// Runs the statement to completion: for a `SELECT`, writes its result pages and sets
    /// [`ControllerProgress::set_results`]; for `INSERT` / `REPLACE`, builds, pushes and
    /// publishes segments (returning how many). Must stop promptly when `task.env.cancel`
    /// fires and return [`IngestError::Canceled`].
    ///
    /// # Errors
    /// Why the statement failed; a message of the form `"<ErrorCode>: <text>"` carries a
    /// Druid MSQ fault code (see [`split_error_code`]).
    fn run(&self, task: ControllerTask) -> BoxFuture<'static, Result<usize, IngestError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dest: Value) -> ControllerSpec {
        serde_json::from_value(json!({
            "type": "query_controller",
            "dataSource": "wiki",
            "sqlQuery": "INSERT INTO wiki SELECT 1",
            "spec": {"destination": dest, "tuningConfig": {"rowsPerSegment": 3}},
        }))
        .unwrap()
    }

    #[test]
    fn locks_follow_the_destination() {
        let insert = spec(json!({"type": "dataSource", "dataSource": "wiki",
            "segmentGranularity": "DAY"}));
        assert_eq!(insert.locks(), Some((vec![Interval::ETERNITY], false)));
        insert.validate().unwrap();
        let replace = spec(json!({"type": "dataSource", "dataSource": "wiki",
            "segmentGranularity": "DAY",
            "replaceTimeChunks": ["2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"]}));
        let (iv, exclusive) = replace.locks().unwrap();
        assert!(exclusive);
        assert_eq!(
            iv[0].to_string(),
            "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
        );
        let select = spec(json!({"type": "taskReport"}));
        assert_eq!(select.locks(), None);
        // Extra spec fields are kept.
        let back = serde_json::to_value(&insert).unwrap();
        assert_eq!(back["spec"]["tuningConfig"]["rowsPerSegment"], 3);
    }

    #[test]
    fn destination_must_match_the_data_source() {
        let bad = spec(json!({"type": "dataSource", "dataSource": "other",
            "segmentGranularity": "DAY"}));
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("spec.destination.dataSource"), "{e}");
    }

    #[test]
    fn report_has_druid_shape() {
        let p = ControllerProgress::new();
        p.set_results(json!({"numTotalRows": 2}));
        let r = p.report("query-1", Some(Err("InsertTimeOutOfBounds: out of range")));
        let payload = &r["multiStageQuery"]["payload"];
        assert_eq!(payload["status"]["status"], "FAILED");
        assert_eq!(
            payload["status"]["errorReport"]["error"]["errorCode"],
            "InsertTimeOutOfBounds"
        );
        assert_eq!(
            payload["status"]["errorReport"]["error"]["errorMessage"],
            "out of range"
        );
        assert_eq!(payload["results"]["numTotalRows"], 2);
        assert_eq!(
            split_error_code("plain message: with colon x"),
            ("UnknownError", "plain message: with colon x")
        );
    }
}
