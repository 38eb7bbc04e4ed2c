//! Gauges taken at scrape time: segment counts and sizes from the live timeline view, segment
//! cache usage, task slots, and stream lag. Each scrape asks every registered source to fill a
//! fresh [`Snapshot`]; [`SnapshotCollector`] encodes it (a prometheus-client `Collector`), so a
//! datasource that went away leaves no stale series behind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::defs::{self, MetricDef};
use crate::names::label_value;

/// Lag of one stream read into one datasource: per partition, the latest offset in the stream
/// minus the offset consumed (records, never negative).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamLag {
    /// The datasource the supervisor writes.
    pub data_source: String,
    /// The stream (Kafka topic).
    pub stream: String,
    /// Partition to lag (records).
    pub partitions: BTreeMap<i32, i64>,
}

/// Time lag of one Kinesis stream read into one datasource: per shard, how far in ms reading
/// stands behind the stream's latest record (the supervisor's `minimumLagMillis`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamTimeLag {
    /// The datasource the supervisor writes.
    pub data_source: String,
    /// The stream (Kinesis stream name).
    pub stream: String,
    /// Shard id to lag (ms, never negative).
    pub partitions: BTreeMap<String, i64>,
}

/// What the gauge sources report for one scrape.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Snapshot {
    segments: BTreeMap<String, (u64, u64)>,
    segment_cache: BTreeMap<String, u64>,
    task_slots: Option<(u64, u64)>,
    lags: Vec<StreamLag>,
    time_lags: Vec<StreamTimeLag>,
    value_indexes: Option<(u64, u64)>,
    value_index_rows_skipped: Option<u64>,
}

impl Snapshot {
    /// The visible segments of a datasource: how many and their total size (bytes):
    /// `segment/count` and `segment/size`.
    pub fn segments(&mut self, data_source: &str, count: u64, size_bytes: u64) {
        let e = self.segments.entry(data_source.to_string()).or_default();
        e.0 += count;
        e.1 += size_bytes;
    }

    /// Bytes of a datasource's segments held in the local segment cache: `segment/used`.
    pub fn segment_cache(&mut self, data_source: &str, bytes: u64) {
        *self
            .segment_cache
            .entry(data_source.to_string())
            .or_default() += bytes;
    }

    /// Task slots of this server: the capacity and how many run a task now
    /// (`taskSlot/total/count`, `taskSlot/used/count`).
    pub fn task_slots(&mut self, total: u64, used: u64) {
        self.task_slots = Some((total, used));
    }

    /// Value indexes since start: column indexes loaded from segment sidecars, and segments
    /// whose indexes were built from the file (`segment/valueIndex/loaded`, `.../built`).
    pub fn value_indexes(&mut self, loaded: u64, built: u64) {
        self.value_indexes = Some((loaded, built));
    }

    /// Rows of segment files that scans left unread thanks to the value indexes, since start:
    /// `segment/valueIndex/rowsSkipped`.
    pub fn value_index_rows_skipped(&mut self, rows: u64) {
        self.value_index_rows_skipped = Some(rows);
    }

    /// The lag of a supervisor's stream: `ingest/kafka/lag` (sum), `maxLag`, `avgLag` (sum
    /// divided by the number of partitions, whole records as Druid's `long` division) and
    /// `partitionLag`.
    pub fn stream_lag(&mut self, lag: StreamLag) {
        self.lags.push(lag);
    }

    /// The time lag of a Kinesis supervisor's stream, Druid's `KinesisSupervisor.computeLagStats`:
    /// `ingest/kinesis/lag/time` (sum over shards, ms), `maxLag/time`, `avgLag/time` (sum divided
    /// by the number of shards, whole ms) and `partitionLag/time`.
    pub fn stream_time_lag(&mut self, lag: StreamTimeLag) {
        self.time_lags.push(lag);
    }
}

/// Encodes the latest [`Snapshot`] (set by [`crate::Metrics::encode`] just before the
/// registry is encoded).
#[derive(Debug, Default)]
pub(crate) struct SnapshotCollector {
    pub(crate) current: Arc<Mutex<Snapshot>>,
}

type Labels = Vec<(&'static str, String)>;

fn gauge_family(
    encoder: &mut DescriptorEncoder<'_>,
    def: &MetricDef,
    rows: impl IntoIterator<Item = (Labels, i64)>,
) -> Result<(), std::fmt::Error> {
    let name = def.formatted_name();
    let help = format!("{}.", def.help_stem());
    let mut family = encoder.encode_descriptor(&name, &help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        debug_assert_eq!(
            labels.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            def.dimensions
        );
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

fn ds(name: &str) -> (&'static str, String) {
    ("dataSource", label_value(name))
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let snap = self.current.lock().expect("snapshot lock").clone();
        gauge_family(
            &mut encoder,
            &defs::SEGMENT_COUNT,
            snap.segments
                .iter()
                .map(|(d, (n, _))| (vec![ds(d)], int(*n))),
        )?;
        gauge_family(
            &mut encoder,
            &defs::SEGMENT_SIZE,
            snap.segments
                .iter()
                .map(|(d, (_, b))| (vec![ds(d)], int(*b))),
        )?;
        gauge_family(
            &mut encoder,
            &defs::SEGMENT_USED,
            snap.segment_cache.iter().map(|(d, b)| {
                (
                    vec![
                        ds(d),
                        ("priority", defs::DEFAULT_PRIORITY.to_string()),
                        ("tier", defs::DEFAULT_TIER.to_string()),
                    ],
                    int(*b),
                )
            }),
        )?;
        gauge_family(
            &mut encoder,
            &defs::SEGMENT_VALUE_INDEX_LOADED,
            snap.value_indexes.map(|(l, _)| (vec![], int(l))),
        )?;
        gauge_family(
            &mut encoder,
            &defs::SEGMENT_VALUE_INDEX_BUILT,
            snap.value_indexes.map(|(_, b)| (vec![], int(b))),
        )?;
        gauge_family(
            &mut encoder,
            &defs::SEGMENT_VALUE_INDEX_ROWS_SKIPPED,
            snap.value_index_rows_skipped.map(|r| (vec![], int(r))),
        )?;
        let category = || vec![("category", defs::DEFAULT_WORKER_CATEGORY.to_string())];
        gauge_family(
            &mut encoder,
            &defs::TASK_SLOT_TOTAL_COUNT,
            snap.task_slots.map(|(t, _)| (category(), int(t))),
        )?;
        gauge_family(
            &mut encoder,
            &defs::TASK_SLOT_USED_COUNT,
            snap.task_slots.map(|(_, u)| (category(), int(u))),
        )?;
        let stream_labels =
            |l: &StreamLag| vec![ds(&l.data_source), ("stream", label_value(&l.stream))];
        gauge_family(
            &mut encoder,
            &defs::INGEST_KAFKA_LAG,
            snap.lags
                .iter()
                .map(|l| (stream_labels(l), l.partitions.values().sum())),
        )?;
        gauge_family(
            &mut encoder,
            &defs::INGEST_KAFKA_MAX_LAG,
            snap.lags.iter().map(|l| {
                (
                    stream_labels(l),
                    l.partitions.values().copied().max().unwrap_or(0),
                )
            }),
        )?;
        gauge_family(
            &mut encoder,
            &defs::INGEST_KAFKA_AVG_LAG,
            snap.lags.iter().map(|l| {
                let n = i64::try_from(l.partitions.len().max(1)).unwrap_or(i64::MAX);
                (stream_labels(l), l.partitions.values().sum::<i64>() / n)
            }),
        )?;
        gauge_family(
            &mut encoder,
            &defs::INGEST_KAFKA_PARTITION_LAG,
            snap.lags.iter().flat_map(|l| {
                l.partitions.iter().map(move |(p, lag)| {
                    (
                        vec![
                            ds(&l.data_source),
                            ("partition", p.to_string()),
                            ("stream", label_value(&l.stream)),
                        ],
                        *lag,
                    )
                })
            }),
        )?;
        let time_labels =
            |l: &StreamTimeLag| vec![ds(&l.data_source), ("stream", label_value(&l.stream))];
        gauge_family(
            &mut encoder,
            &defs::INGEST_KINESIS_LAG_TIME,
            snap.time_lags
                .iter()
                .map(|l| (time_labels(l), l.partitions.values().sum())),
        )?;
        gauge_family(
            &mut encoder,
            &defs::INGEST_KINESIS_MAX_LAG_TIME,
            snap.time_lags.iter().map(|l| {
                (
                    time_labels(l),
                    l.partitions.values().copied().max().unwrap_or(0).max(0),
                )
            }),
        )?;
        gauge_family(
            &mut encoder,
            &defs::INGEST_KINESIS_AVG_LAG_TIME,
            snap.time_lags.iter().map(|l| {
                let n = i64::try_from(l.partitions.len().max(1)).unwrap_or(i64::MAX);
                (time_labels(l), l.partitions.values().sum::<i64>() / n)
            }),
        )?;
        gauge_family(
            &mut encoder,
            &defs::INGEST_KINESIS_PARTITION_LAG_TIME,
            snap.time_lags.iter().flat_map(|l| {
                l.partitions.iter().map(move |(p, lag)| {
                    (
                        vec![
                            ds(&l.data_source),
                            ("partition", label_value(p)),
                            ("stream", label_value(&l.stream)),
                        ],
                        *lag,
                    )
                })
            }),
        )?;
        Ok(())
    }
}
