//! `sys.supervisors` rows from the running supervisor manager: the adapter that binds the
//! overlord's [`SupervisorManager`] to the query engine's
//! [`dolmen_query::system::SupervisorRows`] (the engine starts before the supervisors, and
//! neither crate depends on the other).

use std::sync::{Arc, Weak};

use dolmen_overlord::supervisor::SupervisorManager;
use dolmen_query::system::{SupervisorRow, SupervisorRows};
use serde_json::Value;

/// Lists the manager's supervisors as `sys.supervisors` rows. Holds the manager weakly: the
/// engine's catalog must not keep the supervisors alive after shutdown.
#[derive(Debug)]
pub(crate) struct ManagerRows(pub(crate) Weak<SupervisorManager>);

impl ManagerRows {
    pub(crate) fn new(manager: &Arc<SupervisorManager>) -> ManagerRows {
        ManagerRows(Arc::downgrade(manager))
    }
}

/// The row of one supervisor summary (`GET /supervisor?full` element): `type` and the topic or
/// stream come from the spec as read back; the spec column is that read-back as JSON text.
fn row_of(id: &str, summary: &Value) -> SupervisorRow {
    let spec = &summary["spec"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let io = &spec["spec"]["ioConfig"];
    let source = io
        .get("topic")
        .or_else(|| io.get("stream"))
        .map(text)
        .unwrap_or_default();
    SupervisorRow {
        supervisor_id: id.to_string(),
        data_source: text(&spec["spec"]["dataSchema"]["dataSource"]),
        state: text(&summary["state"]),
        detailed_state: text(&summary["detailedState"]),
        healthy: summary["healthy"] == true,
        supervisor_type: text(&spec["type"]),
        source,
        suspended: summary["suspended"] == true,
        spec: spec.to_string(),
    }
}

impl SupervisorRows for ManagerRows {
    fn supervisor_rows(&self) -> Vec<SupervisorRow> {
        let Some(manager) = self.0.upgrade() else {
            return Vec::new();
        };
        manager
            .ids()
            .into_iter()
            // A supervisor terminated between the listing and its summary is skipped.
            .filter_map(|id| {
                let summary = manager.summary(&id, true).ok()?;
                Some(row_of(&id, &summary))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_summary_becomes_druids_row() {
        let summary = json!({
            "id": "wiki", "state": "RUNNING", "detailedState": "RUNNING", "healthy": true,
            "suspended": false,
            "spec": {"type": "logstream", "spec": {
                "dataSchema": {"dataSource": "wikipedia"},
                "ioConfig": {"topic": "edits"}}}
        });
        let row = row_of("wiki", &summary);
        assert_eq!(row.data_source, "wikipedia");
        assert_eq!(row.source, "edits");
        assert_eq!(row.supervisor_type, "logstream");
        assert!(row.healthy && !row.suspended);
        assert_eq!(
            serde_json::from_str::<Value>(&row.spec).unwrap(),
            summary["spec"]
        );
        let kinesis = json!({"spec": {"type": "shardstream", "spec": {
            "dataSchema": {"dataSource": "k"}, "ioConfig": {"stream": "s"}}}});
        assert_eq!(row_of("k", &kinesis).source, "s");
    }
}
