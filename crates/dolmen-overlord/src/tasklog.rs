//! Per-task logs: every `tracing` event emitted inside a task's span (a span named `task` with
//! a `task_id` field) is appended to `<dir>/<task_id>.log`, one line per event:
//! `2026-11-22T02:10:30.123Z INFO message key=value ...`.
//!
//! [`TaskLogs`] is created before the global subscriber; its [`TaskLogs::layer`] is installed
//! into that subscriber, and the overlord keeps the same handle to read logs and to write the
//! lines it produces itself (so a task's log is complete even without the layer installed).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dolmen_common::time::now_iso;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{Filtered, LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Task log files under one directory.
#[derive(Debug, Clone)]
pub struct TaskLogs {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: Mutex<Option<PathBuf>>,
    open: Mutex<HashMap<String, File>>,
}

impl Default for TaskLogs {
    fn default() -> Self {
        TaskLogs::new()
    }
}

impl TaskLogs {
    /// A handle with no directory yet (events are dropped until [`TaskLogs::set_dir`]).
    pub fn new() -> TaskLogs {
        TaskLogs {
            inner: Arc::new(Inner {
                dir: Mutex::new(None),
                open: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Sets the directory logs are written to (created if missing).
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn set_dir(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        *self.inner.dir.lock().expect("log lock") = Some(dir.to_path_buf());
        Ok(())
    }

    /// The log file of a task, if a directory is set.
    pub fn path(&self, task_id: &str) -> Option<PathBuf> {
        self.inner
            .dir
            .lock()
            .expect("log lock")
            .as_ref()
            .map(|d| d.join(format!("{task_id}.log")))
    }

    /// Appends one line to a task's log.
    pub fn append(&self, task_id: &str, line: &str) {
        let Some(path) = self.path(task_id) else {
            return;
        };
        let mut open = self.inner.open.lock().expect("log lock");
        let file = match open.get_mut(task_id) {
            Some(f) => f,
            None => match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => open.entry(task_id.to_string()).or_insert(f),
                Err(_) => return,
            },
        };
        let _ = file.write_all(line.as_bytes());
        if !line.ends_with('\n') {
            let _ = file.write_all(b"\n");
        }
    }

    /// Closes (and flushes) a finished task's log file.
    pub fn close(&self, task_id: &str) {
        if let Some(f) = self.inner.open.lock().expect("log lock").remove(task_id) {
            let _ = f.sync_all();
        }
    }

    /// Reads a task's log, skipping `offset` leading lines. `None` when there is no log.
    pub fn read(&self, task_id: &str, offset: usize) -> Option<String> {
        let path = self.path(task_id)?;
        let f = File::open(path).ok()?;
        let mut out = String::new();
        for line in BufReader::new(f).lines().skip(offset) {
            let line = line.ok()?;
            out.push_str(&line);
            out.push('\n');
        }
        Some(out)
    }

    /// The `tracing` layer that routes task events to their log files: Dolmen's own events at
    /// `DEBUG` and above (spilled runs, merges), every library's (DataFusion, sqlx, object_store,
    /// ...) at `INFO` and above, as Druid task logs keep to `INFO`. Unfiltered, the layer would
    /// also switch on every library's `DEBUG`/`TRACE` call site process-wide: measured on the
    /// 10M-row NDJSON benchmark, a task log of ~700 sqlx and DataFusion lines and their cost on
    /// every query path.
    pub fn layer<S>(&self) -> Filtered<TaskLogLayer, Targets, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let targets = Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("dolmen", LevelFilter::DEBUG);
        TaskLogLayer { logs: self.clone() }.with_filter(targets)
    }
}

/// A `tracing_subscriber` layer writing events inside `task` spans to task logs.
#[derive(Debug, Clone)]
pub struct TaskLogLayer {
    logs: TaskLogs,
}

struct TaskIdExt(String);

#[derive(Default)]
struct TaskIdVisitor(Option<String>);

impl Visit for TaskIdVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "task_id" {
            self.0 = Some(value.to_string());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "task_id" {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_string());
        }
    }
}

#[derive(Default)]
struct LineVisitor {
    message: String,
    fields: String,
}

impl Visit for LineVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

impl<S> Layer<S> for TaskLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "task" {
            return;
        }
        let mut v = TaskIdVisitor::default();
        attrs.record(&mut v);
        if let (Some(task_id), Some(span)) = (v.0, ctx.span(id)) {
            span.extensions_mut().insert(TaskIdExt(task_id));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let mut task_id = None;
        for span in scope {
            if let Some(ext) = span.extensions().get::<TaskIdExt>() {
                task_id = Some(ext.0.clone());
                break;
            }
        }
        let Some(task_id) = task_id else { return };
        let mut v = LineVisitor::default();
        event.record(&mut v);
        let line = format!(
            "{} {} {}{}",
            now_iso(),
            event.metadata().level(),
            v.message,
            v.fields
        );
        self.logs.append(&task_id, &line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::prelude::*;

    #[test]
    fn events_in_task_span_reach_the_task_log() {
        let dir = tempfile::tempdir().unwrap();
        let logs = TaskLogs::new();
        logs.set_dir(dir.path()).unwrap();
        let subscriber = tracing_subscriber::registry().with(logs.layer());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("task", task_id = "t1");
            let _g = span.enter();
            tracing::info!(rows = 5, "hello");
            let inner = tracing::info_span!("inner");
            let _g2 = inner.enter();
            tracing::warn!("nested");
            tracing::debug!(target: "dolmen_ingest::index", "own debug line");
            tracing::debug!(target: "sqlx::query", "library debug line");
            tracing::trace!(target: "dolmen_ingest::index", "own trace line");
        });
        tracing::info!("outside any task");
        logs.close("t1");
        let text = logs.read("t1", 0).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("INFO hello rows=5"));
        assert!(text.contains("WARN nested"));
        assert!(text.contains("DEBUG own debug line"));
        assert_eq!(logs.read("t1", 1).unwrap().lines().count(), 2);
        assert!(logs.read("nope", 0).is_none());
    }
}
