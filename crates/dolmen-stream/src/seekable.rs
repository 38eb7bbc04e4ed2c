//! The generic seekable-stream core's partition ids and sequence numbers (ADR 0024).
//!
//! The streaming task (`crate::task`) and the supervisor (`dolmen-overlord`) are one code path
//! for `logstream` (Kafka) and `shardstream` (Kinesis). They keep positions as
//! [`PartitionKey`] → [`Offset`] maps, and read through [`Core`], which adapts any typed
//! [`RecordSupplier`] (Kafka's `i32`/`i64`, Kinesis's shard id/[`KinesisSequence`]) to those
//! types. Druid does the same with `SeekableStreamSupervisor<PartitionIdType,
//! SequenceOffsetType, RecordType>` and one subclass per stream.
//!
//! The JSON forms (task payloads, the stored datasource offsets, status reports, `resetOffsets`
//! bodies) are per [`StreamKind`]: Kafka writes partition numbers as keys and offsets as JSON
//! numbers, "next to read"; Kinesis writes shard ids as keys and sequence numbers as strings in
//! Druid's form, the *last record read* (`position - 1`), or `EOS` for a fully read closed
//! shard. [`offset_to_json`] and [`offset_from_json`] convert, so the core never sees Druid's
//! inclusive form.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::kinesis::KinesisSequence;
use crate::spec::StreamKind;
use crate::supplier::{OrderedRecord, RecordSupplier, StreamPartition, SupplierError};

/// A partition id of either stream kind: a Kafka partition number or a Kinesis shard id.
///
/// Ordered by partition number (Kafka) or shard id text (Kinesis); the two never meet in one
/// map.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PartitionKey {
    /// A Kafka partition.
    Kafka(i32),
    /// A Kinesis shard id (`shardId-000000000000`).
    Shard(String),
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kafka(p) => write!(f, "{p}"),
            Self::Shard(s) => f.write_str(s),
        }
    }
}

impl PartitionKey {
    /// The task group reading this partition among `task_count` groups: Kafka partition `p`
    /// goes to `p % taskCount` (Druid's Kafka supervisor); a Kinesis shard goes by the number
    /// in its id (`shardId-000000000007` → 7), so a shard keeps its group when shards are
    /// added (a stable hash of the id when it has no number).
    pub fn task_group(&self, task_count: u32) -> u32 {
        let n = task_count.max(1);
        match self {
            Self::Kafka(p) => (*p).unsigned_abs() % n,
            Self::Shard(s) => {
                let digits: String = s
                    .chars()
                    .rev()
                    .take_while(char::is_ascii_digit)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                match digits.parse::<u64>() {
                    Ok(v) => (v % u64::from(n)) as u32,
                    Err(_) => {
                        // FNV-1a: stable across runs and builds.
                        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                        for b in s.bytes() {
                            h ^= u64::from(b);
                            h = h.wrapping_mul(0x0100_0000_01b3);
                        }
                        (h % u64::from(n)) as u32
                    }
                }
            }
        }
    }
}

/// A sequence number of either stream kind, "next to read" (see the crate docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Offset {
    /// A Kafka offset.
    Kafka(i64),
    /// A Kinesis sequence number (numerically ordered), or `EOS`.
    Kinesis(KinesisSequence),
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kafka(o) => write!(f, "{o}"),
            Self::Kinesis(s) => write!(f, "{s}"),
        }
    }
}

impl Offset {
    /// The position after reading the record at this offset.
    pub fn successor(&self) -> Offset {
        match self {
            Self::Kafka(o) => Self::Kafka(o.saturating_add(1)),
            Self::Kinesis(s) => Self::Kinesis(s.successor()),
        }
    }

    /// Whether this is the end of a closed partition (Kinesis `EOS`): nothing more will come.
    pub fn is_end_of_partition(&self) -> bool {
        matches!(self, Self::Kinesis(KinesisSequence::EndOfShard))
    }

    /// How many records lie between `self` (a position) and `latest`, when the kind can tell:
    /// Kafka offsets are counted (`latest - self`, at least 0); Kinesis sequence numbers are
    /// not contiguous, so only "none" (`Some(0)`, caught up) or unknown (`None`) is known.
    pub fn record_lag(&self, latest: &Offset) -> Option<i64> {
        match (self, latest) {
            (Self::Kafka(c), Self::Kafka(l)) => Some((l - c).max(0)),
            (c, l) if c >= l => Some(0),
            _ => None,
        }
    }
}

/// A typed supplier's partition id that converts to and from [`PartitionKey`].
pub trait CorePartition: Sized {
    /// The core form.
    fn into_core(self) -> PartitionKey;
    /// Back from the core form; `None` when it is another kind's.
    fn from_core(key: &PartitionKey) -> Option<Self>;
}

/// A typed supplier's sequence number that converts to and from [`Offset`].
pub trait CoreOffset: Sized {
    /// The core form.
    fn into_core(self) -> Offset;
    /// Back from the core form; `None` when it is another kind's.
    fn from_core(offset: &Offset) -> Option<Self>;
}

impl CorePartition for i32 {
    fn into_core(self) -> PartitionKey {
        PartitionKey::Kafka(self)
    }
    fn from_core(key: &PartitionKey) -> Option<Self> {
        match key {
            PartitionKey::Kafka(p) => Some(*p),
            PartitionKey::Shard(_) => None,
        }
    }
}

impl CorePartition for String {
    fn into_core(self) -> PartitionKey {
        PartitionKey::Shard(self)
    }
    fn from_core(key: &PartitionKey) -> Option<Self> {
        match key {
            PartitionKey::Shard(s) => Some(s.clone()),
            PartitionKey::Kafka(_) => None,
        }
    }
}

impl CoreOffset for i64 {
    fn into_core(self) -> Offset {
        Offset::Kafka(self)
    }
    fn from_core(offset: &Offset) -> Option<Self> {
        match offset {
            Offset::Kafka(o) => Some(*o),
            Offset::Kinesis(_) => None,
        }
    }
}

impl CoreOffset for KinesisSequence {
    fn into_core(self) -> Offset {
        Offset::Kinesis(self)
    }
    fn from_core(offset: &Offset) -> Option<Self> {
        match offset {
            Offset::Kinesis(s) => Some(s.clone()),
            Offset::Kafka(_) => None,
        }
    }
}

/// Any typed [`RecordSupplier`] seen through the core's types.
#[derive(Debug)]
pub struct Core<R>(pub R);

type CoreError = SupplierError<PartitionKey, Offset>;

fn core_err<P: CorePartition, S: CoreOffset>(e: SupplierError<P, S>) -> CoreError {
    match e {
        SupplierError::InvalidConfig(m) => SupplierError::InvalidConfig(m),
        SupplierError::CannotConnect { target, reason } => {
            SupplierError::CannotConnect { target, reason }
        }
        SupplierError::StreamNotFound(s) => SupplierError::StreamNotFound(s),
        SupplierError::NotAssigned { stream, partition } => SupplierError::NotAssigned {
            stream,
            partition: partition.into_core(),
        },
        SupplierError::OffsetOutOfRange {
            stream,
            partition,
            offset,
            earliest,
            latest,
        } => SupplierError::OffsetOutOfRange {
            stream,
            partition: partition.into_core(),
            offset: offset.into_core(),
            earliest: earliest.into_core(),
            latest: latest.into_core(),
        },
        SupplierError::Client(m) => SupplierError::Client(m),
    }
}

fn typed_partition<P: CorePartition>(
    sp: &StreamPartition<PartitionKey>,
) -> Result<StreamPartition<P>, CoreError> {
    P::from_core(&sp.partition)
        .map(|p| StreamPartition::new(sp.stream.clone(), p))
        .ok_or_else(|| {
            SupplierError::InvalidConfig(format!(
                "partition [{}] is not a partition of this kind of stream",
                sp.partition
            ))
        })
}

impl<R> RecordSupplier for Core<R>
where
    R: RecordSupplier,
    R::PartitionId: CorePartition,
    R::SequenceNumber: CoreOffset,
{
    type PartitionId = PartitionKey;
    type SequenceNumber = Offset;

    fn partition_ids(&self, stream: &str) -> Result<Vec<PartitionKey>, CoreError> {
        Ok(self
            .0
            .partition_ids(stream)
            .map_err(core_err)?
            .into_iter()
            .map(CorePartition::into_core)
            .collect())
    }

    fn assign(&mut self, partitions: &[StreamPartition<PartitionKey>]) -> Result<(), CoreError> {
        let typed = partitions
            .iter()
            .map(typed_partition)
            .collect::<Result<Vec<_>, _>>()?;
        self.0.assign(&typed).map_err(core_err)
    }

    fn assignment(&self) -> Vec<StreamPartition<PartitionKey>> {
        self.0
            .assignment()
            .into_iter()
            .map(|sp| StreamPartition::new(sp.stream, sp.partition.into_core()))
            .collect()
    }

    fn seek(
        &mut self,
        partition: &StreamPartition<PartitionKey>,
        offset: Offset,
    ) -> Result<(), CoreError> {
        let sp = typed_partition(partition)?;
        let o = R::SequenceNumber::from_core(&offset).ok_or_else(|| {
            SupplierError::InvalidConfig(format!(
                "offset [{offset}] is not an offset of this kind of stream"
            ))
        })?;
        self.0.seek(&sp, o).map_err(core_err)
    }

    fn seek_to_earliest(
        &mut self,
        partitions: &[StreamPartition<PartitionKey>],
    ) -> Result<(), CoreError> {
        let typed = partitions
            .iter()
            .map(typed_partition)
            .collect::<Result<Vec<_>, _>>()?;
        self.0.seek_to_earliest(&typed).map_err(core_err)
    }

    fn seek_to_latest(
        &mut self,
        partitions: &[StreamPartition<PartitionKey>],
    ) -> Result<(), CoreError> {
        let typed = partitions
            .iter()
            .map(typed_partition)
            .collect::<Result<Vec<_>, _>>()?;
        self.0.seek_to_latest(&typed).map_err(core_err)
    }

    fn poll(
        &mut self,
        timeout: Duration,
    ) -> Result<Vec<OrderedRecord<PartitionKey, Offset>>, CoreError> {
        Ok(self
            .0
            .poll(timeout)
            .map_err(core_err)?
            .into_iter()
            .map(|r| OrderedRecord {
                stream: r.stream,
                partition: r.partition.into_core(),
                offset: r.offset.into_core(),
                key: r.key,
                value: r.value,
                headers: r.headers,
                timestamp_ms: r.timestamp_ms,
            })
            .collect())
    }

    fn latest_offset(
        &self,
        partition: &StreamPartition<PartitionKey>,
    ) -> Result<Offset, CoreError> {
        let sp = typed_partition(partition)?;
        Ok(self.0.latest_offset(&sp).map_err(core_err)?.into_core())
    }

    fn earliest_offset(
        &self,
        partition: &StreamPartition<PartitionKey>,
    ) -> Result<Offset, CoreError> {
        let sp = typed_partition(partition)?;
        Ok(self.0.earliest_offset(&sp).map_err(core_err)?.into_core())
    }

    fn position(&self, partition: &StreamPartition<PartitionKey>) -> Option<Offset> {
        let sp = typed_partition::<R::PartitionId>(partition).ok()?;
        self.0.position(&sp).map(CoreOffset::into_core)
    }

    fn millis_behind_latest(&self, partition: &StreamPartition<PartitionKey>) -> Option<i64> {
        let sp = typed_partition::<R::PartitionId>(partition).ok()?;
        self.0.millis_behind_latest(&sp)
    }
}

/// Parses a partition id of the JSON forms (an object key).
///
/// # Errors
/// A message naming the id: Kafka partitions are non-negative integers, shard ids non-empty.
pub fn partition_from_str(kind: StreamKind, s: &str) -> Result<PartitionKey, String> {
    match kind {
        StreamKind::Logstream => s
            .parse::<i32>()
            .ok()
            .filter(|p| *p >= 0)
            .map(PartitionKey::Kafka)
            .ok_or_else(|| format!("bad partition [{s}]: must be a non-negative integer")),
        StreamKind::Shardstream if !s.trim().is_empty() => Ok(PartitionKey::Shard(s.to_string())),
        StreamKind::Shardstream => Err("bad shard id [] : must not be empty".into()),
    }
}

/// Druid's marker of an unbounded Kinesis end sequence number (a task still reading).
pub const NO_END_SEQUENCE_NUMBER: &str = "NO_END_SEQUENCE_NUMBER";

/// An offset in its JSON form: a Kafka offset as a number ("next to read"); a Kinesis position
/// as the string of the last record read (`position - 1`, Druid's stored form) or `EOS`.
pub fn offset_to_json(offset: &Offset) -> Value {
    match offset {
        Offset::Kafka(o) => json!(o),
        Offset::Kinesis(KinesisSequence::EndOfShard) => json!(crate::kinesis::END_OF_SHARD_MARKER),
        Offset::Kinesis(s) => json!(s.predecessor().unwrap_or_else(|| s.clone()).to_string()),
    }
}

/// An offset from its JSON form (see [`offset_to_json`]).
///
/// # Errors
/// A message describing the value: Kafka offsets are non-negative integers; Kinesis sequence
/// numbers are strings of decimal digits or `EOS`.
pub fn offset_from_json(kind: StreamKind, v: &Value) -> Result<Offset, String> {
    match kind {
        StreamKind::Logstream => v
            .as_i64()
            .filter(|o| *o >= 0)
            .map(Offset::Kafka)
            .ok_or_else(|| format!("must be a non-negative offset, got {v}")),
        StreamKind::Shardstream => {
            let s = v
                .as_str()
                .ok_or_else(|| format!("must be a sequence number string, got {v}"))?;
            let seq: KinesisSequence = s.parse().map_err(|e| format!("{e}"))?;
            Ok(Offset::Kinesis(match seq {
                KinesisSequence::EndOfShard => KinesisSequence::EndOfShard,
                n => n.successor(),
            }))
        }
    }
}

/// Offsets in their JSON form, keyed by partition id text.
pub fn offsets_to_json(m: &BTreeMap<PartitionKey, Offset>) -> BTreeMap<String, Value> {
    m.iter()
        .map(|(p, o)| (p.to_string(), offset_to_json(o)))
        .collect()
}

/// The JSON object of [`offsets_to_json`].
pub fn offsets_object(m: &BTreeMap<PartitionKey, Offset>) -> Value {
    Value::Object(offsets_to_json(m).into_iter().collect())
}

/// Offsets from their JSON form; entries that do not parse as `kind`'s are skipped (another
/// kind's stored offsets are refused earlier, by stream name).
pub fn offsets_from_json<'a>(
    kind: StreamKind,
    m: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> BTreeMap<PartitionKey, Offset> {
    m.into_iter()
        .filter_map(|(p, o)| {
            Some((
                partition_from_str(kind, p).ok()?,
                offset_from_json(kind, o).ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinesis_json_form_is_the_last_record_read() {
        let pos = Offset::Kinesis(KinesisSequence::number("100").unwrap());
        assert_eq!(offset_to_json(&pos), json!("99"));
        assert_eq!(
            offset_from_json(StreamKind::Shardstream, &json!("99")).unwrap(),
            pos
        );
        let eos = Offset::Kinesis(KinesisSequence::EndOfShard);
        assert_eq!(offset_to_json(&eos), json!("EOS"));
        assert_eq!(
            offset_from_json(StreamKind::Shardstream, &json!("EOS")).unwrap(),
            eos
        );
        assert!(offset_from_json(StreamKind::Shardstream, &json!(5)).is_err());
        assert!(offset_from_json(StreamKind::Logstream, &json!("5")).is_err());
        assert_eq!(
            offset_from_json(StreamKind::Logstream, &json!(5)).unwrap(),
            Offset::Kafka(5)
        );
    }

    #[test]
    fn sequence_numbers_compare_numerically() {
        let a = Offset::Kinesis(KinesisSequence::number("9").unwrap());
        let b = Offset::Kinesis(KinesisSequence::number("10").unwrap());
        assert!(a < b);
        assert!(b < Offset::Kinesis(KinesisSequence::EndOfShard));
        assert_eq!(a.record_lag(&b), None);
        assert_eq!(b.record_lag(&a), Some(0));
        assert_eq!(Offset::Kafka(3).record_lag(&Offset::Kafka(10)), Some(7));
    }

    #[test]
    fn shards_keep_their_task_group() {
        assert_eq!(
            PartitionKey::Shard("shardId-000000000007".into()).task_group(3),
            1
        );
        assert_eq!(PartitionKey::Kafka(7).task_group(3), 1);
        let g = PartitionKey::Shard("odd".into()).task_group(4);
        assert_eq!(g, PartitionKey::Shard("odd".into()).task_group(4));
    }
}
