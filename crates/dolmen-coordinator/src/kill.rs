//! Auto-kill of unused segments (Druid's `duty/KillUnusedSegments.java`,
//! `config/KillUnusedSegmentsConfig.java`): on its own period the coordinator submits `kill`
//! tasks (id prefix `coordinator-issued`) that delete unused segments for good.
//!
//! Off unless `service.coordinator.kill.on=true`. Datasources: `killDataSourceWhitelist`, or
//! every datasource with segments when it is empty. Eligible segments are unused, with their
//! used flag last changed at least `bufferPeriod` ago, and (unless `ignoreDurationToRetain`)
//! ending before `now - durationToRetain`. One task per datasource and run covers at most
//! `maxSegments` segments whose umbrella interval spans at most `maxInterval`. Concurrent
//! coordinator-issued kill tasks are capped at `min(floor(capacity * killTaskSlotRatio),
//! maxKillTaskSlots)`: with the default ratio 0.1 a node with fewer than 10 task slots runs no
//! auto-kill unless the ratio is raised, exactly as Druid.

use std::sync::Arc;
use std::time::Duration;

use dolmen_common::{Interval, Period, Zone};
use dolmen_metadata::{MetadataStore, UnusedSegmentsQuery};
use serde_json::{Value, json};

use crate::config::CoordinatorDynamicConfig;

/// Prefix of the ids of kill tasks the coordinator submits (Druid's).
pub const KILL_TASK_ID_PREFIX: &str = "coordinator-issued_kill_";

/// `service.coordinator.kill.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillSettings {
    /// `period` (default PT1800S): time between auto-kill runs.
    pub period: Duration,
    /// `bufferPeriod` (default P30D): how long a segment stays unused before it may be killed.
    pub buffer_period: Period,
    /// `durationToRetain` (default P90D): segments ending after `now - durationToRetain` are kept.
    pub duration_to_retain: Period,
    /// `ignoreDurationToRetain` (default false).
    pub ignore_duration_to_retain: bool,
    /// `maxSegments` (default 100): most segments per kill task.
    pub max_segments: usize,
    /// `maxInterval` (default P30D): longest umbrella interval of one kill task.
    pub max_interval: Period,
}

impl Default for KillSettings {
    fn default() -> Self {
        let p = |s: &str| Period::parse(s).expect("constant period");
        KillSettings {
            period: Duration::from_secs(1800),
            buffer_period: p("P30D"),
            duration_to_retain: p("P90D"),
            ignore_duration_to_retain: false,
            max_segments: 100,
            max_interval: p("P30D"),
        }
    }
}

/// What auto-kill needs from the overlord.
#[async_trait::async_trait]
pub trait KillTaskSubmitter: Send + Sync + 'static {
    /// Total task slots of the workers (this process's capacity).
    fn total_worker_capacity(&self) -> usize;
    /// Ids of tasks not complete yet.
    fn active_task_ids(&self) -> Vec<String>;
    /// Submits a task; returns its id.
    ///
    /// # Errors
    /// The overlord's refusal, as text.
    async fn submit(&self, spec: Value) -> Result<String, String>;
}

fn minus(period: &Period, now: i64) -> i64 {
    period
        .checked_add_to(now, -1, &Zone::Utc)
        .unwrap_or(i64::MIN)
}

/// Kill task slots available now (Druid's `getAvailableKillTaskSlots`).
pub fn available_slots(
    config: &CoordinatorDynamicConfig,
    capacity: usize,
    running_kill_tasks: usize,
) -> usize {
    let by_ratio = (capacity as f64 * config.kill_task_slot_ratio()).floor() as i64;
    let cap = by_ratio.min(config.max_kill_task_slots()).max(0) as usize;
    cap.saturating_sub(running_kill_tasks)
}

/// One auto-kill pass; returns the ids of the tasks submitted.
///
/// # Errors
/// When the metadata store fails (a refused submission is logged and skipped).
pub async fn run_kill(
    metadata: &Arc<dyn MetadataStore>,
    submitter: &dyn KillTaskSubmitter,
    settings: &KillSettings,
    config: &CoordinatorDynamicConfig,
    now: i64,
) -> Result<Vec<String>, dolmen_metadata::MetadataError> {
    let running = submitter
        .active_task_ids()
        .iter()
        .filter(|id| id.starts_with(KILL_TASK_ID_PREFIX))
        .count();
    let mut slots = available_slots(config, submitter.total_worker_capacity(), running);
    if slots == 0 {
        tracing::debug!("auto-kill: no kill task slot available");
        return Ok(Vec::new());
    }
    let whitelist = config.kill_data_source_whitelist();
    let data_sources = if whitelist.is_empty() {
        metadata.all_data_source_names().await?
    } else {
        whitelist
    };
    let end = if settings.ignore_duration_to_retain {
        Interval::ETERNITY.end
    } else {
        minus(&settings.duration_to_retain, now)
    };
    let max_updated = minus(&settings.buffer_period, now);
    let mut submitted = Vec::new();
    for ds in data_sources {
        if slots == 0 {
            break;
        }
        let Ok(window) = Interval::new(Interval::ETERNITY.start, end) else {
            break;
        };
        let segments = metadata
            .unused_segments(&UnusedSegmentsQuery {
                data_source: ds.clone(),
                interval: window,
                versions: None,
                max_used_status_last_updated_ms: Some(max_updated),
                limit: settings.max_segments,
            })
            .await?;
        let Some(first) = segments.first() else {
            continue;
        };
        let start = first.segment.interval.start;
        let limit_end = settings
            .max_interval
            .checked_add_to(start, 1, &Zone::Utc)
            .unwrap_or(i64::MAX);
        let umbrella_end = segments
            .iter()
            .map(|s| s.segment.interval.end)
            .filter(|e| *e <= limit_end)
            .max()
            .unwrap_or(first.segment.interval.end);
        let Ok(umbrella) = Interval::new(start, umbrella_end) else {
            continue;
        };
        let id = format!(
            "coordinator-issued_{}",
            crate::kill::kill_id(&ds, umbrella, now)
        );
        let spec = json!({
            "type": "kill",
            "id": id,
            "dataSource": ds,
            "interval": umbrella.to_string(),
            "limit": settings.max_segments,
            "maxUsedStatusLastUpdatedTime": dolmen_common::time::format_iso_millis(max_updated),
        });
        match submitter.submit(spec).await {
            Ok(id) => {
                tracing::info!(task_id = %id, datasource = %ds, interval = %umbrella, "auto-kill submitted a kill task");
                submitted.push(id);
                slots -= 1;
            }
            Err(e) => {
                tracing::warn!(datasource = %ds, error = %e, "auto-kill could not submit a kill task")
            }
        }
    }
    Ok(submitted)
}

/// `kill_<ds>_<start>_<end>_<now>` (the tail of Druid's kill task ids).
fn kill_id(data_source: &str, interval: Interval, now: i64) -> String {
    use dolmen_common::time::format_iso_millis;
    format!(
        "kill_{data_source}_{}_{}_{}",
        format_iso_millis(interval.start),
        format_iso_millis(interval.end),
        format_iso_millis(now)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_ratio_and_cap() {
        let base = CoordinatorDynamicConfig::default();
        assert_eq!(available_slots(&base, 1, 0), 0);
        assert_eq!(available_slots(&base, 20, 0), 2);
        assert_eq!(available_slots(&base, 20, 1), 1);
        let c = base
            .merged(&json!({"killTaskSlotRatio": 1.0, "maxKillTaskSlots": 3}))
            .unwrap();
        assert_eq!(available_slots(&c, 8, 0), 3);
        assert_eq!(available_slots(&c, 2, 0), 2);
        assert_eq!(available_slots(&c, 8, 5), 0);
    }
}
