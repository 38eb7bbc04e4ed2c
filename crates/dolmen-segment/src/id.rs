//! Segment identity and the Druid-shaped segment payload.
//!
//! A segment is identified by `(dataSource, interval, version, partitionNum)`; its id string is
//! `dataSource_start_end_version` with `_partitionNum` appended when the partition number is not
//! zero, exactly as Druid's `SegmentId.toString()` prints it.
//!
//! The payload ([`DataSegment`]) is what Druid stores in `druid_segments.payload` and returns from
//! the coordinator APIs: `dataSource, interval, version, loadSpec, dimensions, metrics, shardSpec,
//! binaryVersion, size, identifier` (`server/.../timeline/DataSegment.java`). Dolmen adds
//! `numRows`, which `sys.segments` reports.

use std::fmt;

use dolmen_common::Interval;
use serde::{Deserialize, Serialize};

/// The identity of one segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentId {
    /// Datasource name.
    pub data_source: String,
    /// The time chunk this segment covers.
    pub interval: Interval,
    /// The version (an ISO timestamp string); higher versions overshadow lower ones.
    pub version: String,
    /// Partition number within `(interval, version)`.
    pub partition_num: u32,
}

impl fmt::Display for SegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}_{}_{}",
            self.data_source,
            self.interval.to_underscore_string(),
            self.version
        )?;
        if self.partition_num != 0 {
            write!(f, "_{}", self.partition_num)?;
        }
        Ok(())
    }
}

/// How a segment's partition relates to the others of its `(interval, version)`, in Druid's
/// JSON shapes (`docs/design/segments.md`, `NumberedShardSpec`, `HashBasedNumberedShardSpec`,
/// `SingleDimensionShardSpec`, `DimensionRangeShardSpec`).
///
/// Every kind has a partition number and a number of *core* partitions: the set is complete
/// once partitions `0..core` are all published; partitions numbered `>= core` are appended
/// later and are each complete on their own. `numbered` comes from dynamic partitioning and
/// appends; `hashed` from hash partitioning (a row's bucket is a hash of its partition
/// dimensions); `single` and `range` from range partitioning on one or more dimensions, where
/// a segment holds the rows whose dimension values fall in `[start, end)` (null = unbounded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ShardSpec {
    /// Druid's `NumberedShardSpec`.
    #[serde(rename_all = "camelCase")]
    Numbered {
        /// This segment's partition number.
        partition_num: u32,
        /// Number of core partitions in the set.
        partitions: u32,
    },
    /// Druid's `HashBasedNumberedShardSpec`.
    #[serde(rename_all = "camelCase")]
    Hashed {
        /// This segment's partition number.
        partition_num: u32,
        /// Number of core partitions in the set.
        partitions: u32,
        /// The hash bucket this segment holds.
        bucket_id: u32,
        /// Number of hash buckets of the time chunk.
        num_buckets: u32,
        /// Dimensions hashed (empty: all dimensions and the truncated timestamp).
        partition_dimensions: Vec<String>,
        /// Hash function name (`murmur3_32_abs`).
        partition_function: String,
    },
    /// Druid's `SingleDimensionShardSpec` (`single_dim` partitioning).
    #[serde(rename_all = "camelCase")]
    Single {
        /// The partition dimension.
        dimension: String,
        /// Inclusive lower bound (null: unbounded).
        start: Option<String>,
        /// Exclusive upper bound (null: unbounded).
        end: Option<String>,
        /// This segment's partition number.
        partition_num: u32,
        /// Number of core partitions in the set.
        num_core_partitions: u32,
    },
    /// Druid's `DimensionRangeShardSpec` (`range` partitioning).
    #[serde(rename_all = "camelCase")]
    Range {
        /// The partition dimensions, in order.
        dimensions: Vec<String>,
        /// Inclusive lower bound tuple (null: unbounded).
        start: Option<Vec<Option<String>>>,
        /// Exclusive upper bound tuple (null: unbounded).
        end: Option<Vec<Option<String>>>,
        /// This segment's partition number.
        partition_num: u32,
        /// Number of core partitions in the set.
        num_core_partitions: u32,
    },
}

impl ShardSpec {
    /// This segment's partition number.
    pub fn partition_num(&self) -> u32 {
        match self {
            ShardSpec::Numbered { partition_num, .. }
            | ShardSpec::Hashed { partition_num, .. }
            | ShardSpec::Single { partition_num, .. }
            | ShardSpec::Range { partition_num, .. } => *partition_num,
        }
    }

    /// Number of core partitions of the set this segment belongs to.
    pub fn core_partitions(&self) -> u32 {
        match self {
            ShardSpec::Numbered { partitions, .. } | ShardSpec::Hashed { partitions, .. } => {
                *partitions
            }
            ShardSpec::Single {
                num_core_partitions,
                ..
            }
            | ShardSpec::Range {
                num_core_partitions,
                ..
            } => *num_core_partitions,
        }
    }

    /// The same shard spec with partition number `num` of `core` core partitions (how the
    /// metadata store numbers a task's segments when it publishes them).
    pub fn renumbered(&self, num: u32, core: u32) -> ShardSpec {
        let mut s = self.clone();
        match &mut s {
            ShardSpec::Numbered {
                partition_num,
                partitions,
            }
            | ShardSpec::Hashed {
                partition_num,
                partitions,
                ..
            } => {
                *partition_num = num;
                *partitions = core;
            }
            ShardSpec::Single {
                partition_num,
                num_core_partitions,
                ..
            }
            | ShardSpec::Range {
                partition_num,
                num_core_partitions,
                ..
            } => {
                *partition_num = num;
                *num_core_partitions = core;
            }
        }
        s
    }

    /// The Druid type name (`numbered`, `hashed`, `single`, `range`).
    pub fn type_name(&self) -> &'static str {
        match self {
            ShardSpec::Numbered { .. } => "numbered",
            ShardSpec::Hashed { .. } => "hashed",
            ShardSpec::Single { .. } => "single",
            ShardSpec::Range { .. } => "range",
        }
    }
}

/// Where a segment's file lives in deep storage (`loadSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LoadSpec {
    /// A file under the local deep storage directory (Druid's `local` load spec).
    Local {
        /// Absolute path of the segment file.
        path: String,
    },
    /// An object in an S3-compatible bucket (`{"type":"s3","bucket","key"}`). Druid's S3 load
    /// spec is `s3_zip` because its segments are zip archives; Dolmen's are single Parquet
    /// files, so the type says `s3` rather than claim a zip (ADR 0009).
    S3 {
        /// Bucket name.
        bucket: String,
        /// Object key of the segment file.
        key: String,
    },
}

/// The Druid-shaped segment payload stored in the metadata store and served by the APIs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataSegment {
    /// Datasource name.
    pub data_source: String,
    /// The time chunk covered.
    pub interval: Interval,
    /// Version string (ISO timestamp).
    pub version: String,
    /// Location in deep storage.
    pub load_spec: LoadSpec,
    /// Dimension names, comma-separated, in segment order (Druid's wire form).
    pub dimensions: String,
    /// Metric names, comma-separated.
    pub metrics: String,
    /// Partitioning information.
    pub shard_spec: ShardSpec,
    /// Segment format version; Druid writes 9. Dolmen segments are Parquet; 9 is kept for
    /// clients that check it.
    pub binary_version: u32,
    /// Size of the segment file in bytes.
    pub size: u64,
    /// Number of rows in the segment.
    #[serde(default)]
    pub num_rows: u64,
    /// Column names, types and kinds after `__time` (a Dolmen addition, so that queries can
    /// be planned without opening segment files).
    #[serde(default)]
    pub columns: Vec<crate::SegmentColumn>,
    /// The compaction state that produced this segment, if compaction did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction_state: Option<serde_json::Value>,
    /// The segment id string (read-only copy, as Druid prints it).
    pub identifier: String,
}

impl DataSegment {
    /// The segment's identity.
    pub fn id(&self) -> SegmentId {
        SegmentId {
            data_source: self.data_source.clone(),
            interval: self.interval,
            version: self.version.clone(),
            partition_num: self.shard_spec.partition_num(),
        }
    }

    /// Dimension names as a list.
    pub fn dimension_names(&self) -> Vec<&str> {
        split_names(&self.dimensions)
    }

    /// Metric names as a list.
    pub fn metric_names(&self) -> Vec<&str> {
        split_names(&self.metrics)
    }
}

fn split_names(s: &str) -> Vec<&str> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split(',').collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_string_matches_druid() {
        let id = SegmentId {
            data_source: "wikipedia".into(),
            interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
            version: "2024-01-01T00:00:00.000Z".into(),
            partition_num: 0,
        };
        assert_eq!(
            id.to_string(),
            "wikipedia_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_2024-01-01T00:00:00.000Z"
        );
        let id1 = SegmentId {
            partition_num: 3,
            ..id
        };
        assert!(id1.to_string().ends_with("_2024-01-01T00:00:00.000Z_3"));
    }

    #[test]
    fn shard_specs_in_druid_shapes() {
        let hashed = ShardSpec::Hashed {
            partition_num: 0,
            partitions: 0,
            bucket_id: 1,
            num_buckets: 2,
            partition_dimensions: vec!["page".into()],
            partition_function: "murmur3_32_abs".into(),
        }
        .renumbered(1, 2);
        assert_eq!(
            serde_json::to_value(&hashed).unwrap(),
            serde_json::json!({"type": "hashed", "partitionNum": 1, "partitions": 2, "bucketId": 1,
                "numBuckets": 2, "partitionDimensions": ["page"], "partitionFunction": "murmur3_32_abs"})
        );
        let single = ShardSpec::Single {
            dimension: "page".into(),
            start: None,
            end: Some("m".into()),
            partition_num: 0,
            num_core_partitions: 0,
        }
        .renumbered(0, 3);
        assert_eq!(
            serde_json::to_value(&single).unwrap(),
            serde_json::json!({"type": "single", "dimension": "page", "start": null, "end": "m",
                "partitionNum": 0, "numCorePartitions": 3})
        );
        assert_eq!((single.partition_num(), single.core_partitions()), (0, 3));
        let range: ShardSpec = serde_json::from_value(serde_json::json!({"type": "range",
            "dimensions": ["a", "b"], "start": ["x", null], "end": null, "partitionNum": 2,
            "numCorePartitions": 3}))
        .unwrap();
        assert_eq!((range.partition_num(), range.core_partitions()), (2, 3));
        assert_eq!(range.type_name(), "range");
    }

    #[test]
    fn payload_round_trips_in_druid_shape() {
        let seg = DataSegment {
            data_source: "wikipedia".into(),
            interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
            version: "v1".into(),
            load_spec: LoadSpec::Local {
                path: "/x/index.parquet".into(),
            },
            dimensions: "channel,page".into(),
            metrics: "count".into(),
            shard_spec: ShardSpec::Numbered {
                partition_num: 0,
                partitions: 1,
            },
            binary_version: 9,
            size: 10,
            num_rows: 2,
            columns: vec![],
            last_compaction_state: None,
            identifier: "wikipedia_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_v1".into(),
        };
        let v = serde_json::to_value(&seg).unwrap();
        assert_eq!(
            v["interval"],
            "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
        );
        assert_eq!(v["shardSpec"]["type"], "numbered");
        assert_eq!(v["shardSpec"]["partitionNum"], 0);
        assert_eq!(v["loadSpec"]["type"], "local");
        assert_eq!(v["dataSource"], "wikipedia");
        let back: DataSegment = serde_json::from_value(v).unwrap();
        assert_eq!(back, seg);
        assert_eq!(seg.dimension_names(), vec!["channel", "page"]);
    }
}
