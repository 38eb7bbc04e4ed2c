//! The Druid metrics Dolmen emits, as Druid's Prometheus emitter defines them in
//! `extensions-contrib/prometheus-emitter/src/main/resources/defaultMetrics.json`: the type
//! (`count` -> counter, `gauge` -> gauge, `timer` -> histogram in seconds after dividing by
//! `conversionFactor`), the dimensions (label names, sorted as Druid's `SortedSet` keeps them)
//! and the help text.
//!
//! Two metrics are not in `defaultMetrics.json` (Druid's emitter drops them unless a custom
//! dimension map lists them): `taskSlot/total/count` and `taskSlot/used/count`, emitted by
//! Druid's `TaskSlotCountStatsMonitor` with the dimension `category`. Dolmen exposes them as
//! gauges (they are snapshots), with the help text of Druid's metrics documentation.
//!
//! Three are Dolmen's own (Druid builds its indexes inside the segment, so it has none):
//! `segment/valueIndex/loaded` and `segment/valueIndex/built`, gauges of the value indexes
//! loaded from segment sidecars and built from segment files since start (ADR 0025), and
//! `segment/valueIndex/rowsSkipped`, the rows scans left unread thanks to them (ADR 0029).
//!
//! `ingest/events/thrownAway` has the dimensions `[dataSource]` as in Druid releases up to 34;
//! Druid's development branch adds `reason`, which Dolmen's row counters do not track.

/// How Druid's emitter maps a metric (`Metrics.java`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricKind {
    /// `count`: a counter (exposed as `<name>_total`).
    Count,
    /// `gauge`: a gauge.
    Gauge,
    /// `timer`: a histogram of `value / conversionFactor` (seconds for millisecond timers) over
    /// [`TIMER_BUCKETS`].
    Timer {
        /// Druid's `conversionFactor`: 1000 for a timer in milliseconds.
        conversion_factor: f64,
    },
}

/// The histogram buckets of every timer (seconds), `Metrics.java`.
pub const TIMER_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// One Druid metric as the Prometheus emitter sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricDef {
    /// Druid's metric name, e.g. `query/time`.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Label names, sorted (Druid's `SortedSet<String>` order).
    pub dimensions: &'static [&'static str],
    /// Help text, as in `defaultMetrics.json`.
    pub help: &'static str,
}

impl MetricDef {
    /// The Prometheus name without the namespace ([`crate::names::formatted_name`]).
    pub fn formatted_name(&self) -> String {
        crate::names::formatted_name(self.name)
    }

    /// The help text without a final full stop (the registry adds one).
    pub(crate) fn help_stem(&self) -> &'static str {
        self.help.trim_end().trim_end_matches('.')
    }
}

const MS: MetricKind = MetricKind::Timer {
    conversion_factor: 1000.0,
};

macro_rules! defs {
    ($($id:ident = $name:literal, $kind:expr, [$($dim:literal),*], $help:literal;)*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $help)]
            pub const $id: MetricDef = MetricDef {
                name: $name,
                kind: $kind,
                dimensions: &[$($dim),*],
                help: $help,
            };
        )*
        /// Every metric Dolmen emits under the Druid namespace.
        pub const ALL: &[MetricDef] = &[$($id),*];
    };
}

defs! {
    QUERY_TIME = "query/time", MS, ["dataSource", "type"], "Seconds taken to complete a query.";
    QUERY_BYTES = "query/bytes", MetricKind::Count, ["dataSource", "type"], "Number of bytes returned in query response.";
    QUERY_COUNT = "query/count", MetricKind::Count, [], "Number of total queries";
    QUERY_SUCCESS_COUNT = "query/success/count", MetricKind::Count, [], "Number of queries successfully processed";
    QUERY_FAILED_COUNT = "query/failed/count", MetricKind::Count, [], "Number of failed queries";
    QUERY_INTERRUPTED_COUNT = "query/interrupted/count", MetricKind::Count, [], "Number of queries interrupted due to cancellation.";
    QUERY_TIMEOUT_COUNT = "query/timeout/count", MetricKind::Count, [], "Number of timed out queries.";
    SQL_QUERY_TIME = "sqlQuery/time", MS, ["dataSource"], "Seconds taken to complete a SQL query.";
    SQL_QUERY_PLANNING_TIME = "sqlQuery/planningTimeMs", MS, ["dataSource"], "Seconds taken to plan a SQL to native query";
    SQL_QUERY_BYTES = "sqlQuery/bytes", MetricKind::Count, ["dataSource"], "Number of bytes returned in the SQL query response.";
    INGEST_EVENTS_PROCESSED = "ingest/events/processed", MetricKind::Count, ["dataSource"], "Number of events successfully processed per emission period.";
    INGEST_EVENTS_PROCESSED_WITH_ERROR = "ingest/events/processedWithError", MetricKind::Count, ["dataSource"], "Number of events processed with some partial errors per emission period.";
    INGEST_EVENTS_UNPARSEABLE = "ingest/events/unparseable", MetricKind::Count, ["dataSource"], "Number of events rejected because the events are unparseable.";
    INGEST_EVENTS_THROWN_AWAY = "ingest/events/thrownAway", MetricKind::Count, ["dataSource"], "Number of events rejected because they are outside the windowPeriod.";
    INGEST_ROWS_OUTPUT = "ingest/rows/output", MetricKind::Count, ["dataSource"], "Number of Druid rows persisted.";
    INGEST_PERSISTS_COUNT = "ingest/persists/count", MetricKind::Count, ["dataSource"], "Number of times persist occurred.";
    INGEST_HANDOFF_COUNT = "ingest/handoff/count", MetricKind::Count, ["dataSource"], "Number of handoffs that happened.";
    INGEST_KAFKA_LAG = "ingest/kafka/lag", MetricKind::Gauge, ["dataSource", "stream"], "Total lag between the offsets consumed by the Kafka indexing tasks and latest offsets in Kafka brokers across all partitions. Minimum emission period for this metric is a minute.";
    INGEST_KAFKA_MAX_LAG = "ingest/kafka/maxLag", MetricKind::Gauge, ["dataSource", "stream"], "Max lag between the offsets consumed by the Kafka indexing tasks and latest offsets in Kafka brokers across all partitions. Minimum emission period for this metric is a minute.";
    INGEST_KAFKA_AVG_LAG = "ingest/kafka/avgLag", MetricKind::Gauge, ["dataSource", "stream"], "Average lag between the offsets consumed by the Kafka indexing tasks and latest offsets in Kafka brokers across all partitions. Minimum emission period for this metric is a minute.";
    INGEST_KAFKA_PARTITION_LAG = "ingest/kafka/partitionLag", MetricKind::Gauge, ["dataSource", "partition", "stream"], "Partition-wise lag between the offsets consumed by the Kafka indexing tasks and latest offsets in Kafka brokers. Minimum emission period for this metric is a minute.";
    INGEST_KINESIS_LAG_TIME = "ingest/kinesis/lag/time", MetricKind::Gauge, ["dataSource", "stream"], "Total lag time in milliseconds between the current message sequence number consumed by the Kinesis indexing tasks and latest sequence number in Kinesis across all shards. Minimum emission period for this metric is a minute.";
    INGEST_KINESIS_MAX_LAG_TIME = "ingest/kinesis/maxLag/time", MetricKind::Gauge, ["dataSource", "stream"], "Max lag time in milliseconds between the current message sequence number consumed by the Kinesis indexing tasks and latest sequence number in Kinesis across all shards. Minimum emission period for this metric is a minute.";
    INGEST_KINESIS_AVG_LAG_TIME = "ingest/kinesis/avgLag/time", MetricKind::Gauge, ["dataSource", "stream"], "Average lag time in milliseconds between the current message sequence number consumed by the Kinesis indexing tasks and latest sequence number in Kinesis across all shards. Minimum emission period for this metric is a minute.";
    INGEST_KINESIS_PARTITION_LAG_TIME = "ingest/kinesis/partitionLag/time", MetricKind::Gauge, ["dataSource", "partition", "stream"], "Partition-wise lag time in milliseconds between the current message sequence number consumed by the Kinesis indexing tasks and latest sequence number in Kinesis. Minimum emission period for this metric is a minute.";
    SEGMENT_COUNT = "segment/count", MetricKind::Gauge, ["dataSource"], "Number of used segments belonging to a data source.";
    SEGMENT_SIZE = "segment/size", MetricKind::Gauge, ["dataSource"], "Size in bytes of available segments.";
    SEGMENT_USED = "segment/used", MetricKind::Gauge, ["dataSource", "priority", "tier"], "Bytes used for served segments.";
    SEGMENT_VALUE_INDEX_LOADED = "segment/valueIndex/loaded", MetricKind::Gauge, [], "Column value indexes loaded from the index sidecars of segments since the process started.";
    SEGMENT_VALUE_INDEX_BUILT = "segment/valueIndex/built", MetricKind::Gauge, [], "Segments whose value indexes were built from the segment file (segments without an index sidecar) since the process started; a query never builds them.";
    SEGMENT_VALUE_INDEX_ROWS_SKIPPED = "segment/valueIndex/rowsSkipped", MetricKind::Gauge, [], "Rows of segment files that query scans left unread since the process started because the value indexes showed no match in them (equality and array filters).";
    TASK_RUN_TIME = "task/run/time", MS, ["dataSource", "taskType"], "Seconds taken to run a task.";
    TASK_SUCCESS_COUNT = "task/success/count", MetricKind::Count, ["dataSource"], "Number of successful tasks per emission period.";
    TASK_FAILED_COUNT = "task/failed/count", MetricKind::Count, ["dataSource"], "Number of failed tasks per emission period.";
    TASK_SLOT_TOTAL_COUNT = "taskSlot/total/count", MetricKind::Gauge, ["category"], "Number of total task slots per emission period. This metric is only available if the TaskSlotCountStatsMonitor module is included.";
    TASK_SLOT_USED_COUNT = "taskSlot/used/count", MetricKind::Gauge, ["category"], "Number of busy task slots per emission period. This metric is only available if the TaskSlotCountStatsMonitor module is included.";
}

/// Druid's default worker category (`WorkerConfig.DEFAULT_CATEGORY`), the `category` of the
/// task slot metrics.
pub const DEFAULT_WORKER_CATEGORY: &str = "_default_worker_category";

/// Druid's default historical tier (`DruidServer.DEFAULT_TIER`), the `tier` of `segment/used`.
pub const DEFAULT_TIER: &str = "_default_tier";

/// Druid's default historical priority (`DruidServer.DEFAULT_PRIORITY`), the `priority` of
/// `segment/used`.
pub const DEFAULT_PRIORITY: &str = "0";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_are_sorted_and_names_unique() {
        let mut names = std::collections::HashSet::new();
        for d in ALL {
            let mut sorted = d.dimensions.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, d.dimensions, "{}", d.name);
            assert!(names.insert(d.formatted_name()), "{}", d.name);
        }
    }

    #[test]
    fn prometheus_names_of_the_required_metrics() {
        let got: Vec<(String, MetricKind)> = [
            QUERY_TIME,
            SQL_QUERY_PLANNING_TIME,
            INGEST_EVENTS_THROWN_AWAY,
            INGEST_KAFKA_PARTITION_LAG,
            TASK_SLOT_USED_COUNT,
        ]
        .iter()
        .map(|d| (crate::names::prometheus_name("druid", d.name), d.kind))
        .collect();
        assert_eq!(
            got,
            vec![
                ("druid_query_time".to_string(), MS),
                ("druid_sqlquery_planningtimems".to_string(), MS),
                (
                    "druid_ingest_events_thrownaway".to_string(),
                    MetricKind::Count
                ),
                (
                    "druid_ingest_kafka_partitionlag".to_string(),
                    MetricKind::Gauge
                ),
                ("druid_taskslot_used_count".to_string(), MetricKind::Gauge),
            ]
        );
        assert_eq!(QUERY_TIME.help_stem(), "Seconds taken to complete a query");
    }
}
