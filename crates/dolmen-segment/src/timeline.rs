//! The versioned timeline of a datasource: which used segments are *visible*.
//!
//! Follows Druid's `VersionedIntervalTimeline` (`processing/.../timeline/VersionedIntervalTimeline.java`):
//! segments are grouped into partition sets by `(interval, version)`. A set takes part in the
//! timeline only when it is *complete* (every core partition `0..partitions` is present; appended
//! partitions numbered past the core are complete on their own). Where complete sets overlap,
//! the higher version (compared as strings, as Druid does) wins; a lower version stays visible
//! in the parts of its interval that no higher version covers, so a lookup returns entries whose
//! visible interval may be narrower than the segments' own interval. A segment whose whole
//! interval is covered by higher complete versions is *overshadowed*.
//!
//! Building is `O(n log n)` in the number of partition sets plus the cost of interval
//! subtraction against the covered set (sorted, disjoint intervals; binary search).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use dolmen_common::Interval;

use crate::id::{DataSegment, SegmentId};

/// One visible piece of the timeline: a complete partition set and the part of its interval
/// in which it is visible.
#[derive(Debug, Clone)]
pub struct TimelineEntry {
    /// The part of `full_interval` where this version is visible.
    pub interval: Interval,
    /// The segments' own interval (time chunk).
    pub full_interval: Interval,
    /// The version of the partition set.
    pub version: String,
    /// The partition set, sorted by partition number.
    pub segments: Vec<Arc<DataSegment>>,
}

impl TimelineEntry {
    /// True when the entry is visible over its whole time chunk (no row filtering needed).
    pub fn is_whole(&self) -> bool {
        self.interval == self.full_interval
    }
}

/// A snapshot of the visible segments of one datasource.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Visible entries sorted by `interval.start`; their intervals are disjoint.
    entries: Vec<TimelineEntry>,
    overshadowed: HashSet<SegmentId>,
}

struct PartitionSet {
    interval: Interval,
    version: String,
    segments: BTreeMap<u32, Arc<DataSegment>>,
}

impl PartitionSet {
    fn is_complete(&self) -> bool {
        let core = self
            .segments
            .values()
            .map(|s| s.shard_spec.core_partitions())
            .max()
            .unwrap_or(0);
        (0..core).all(|p| self.segments.contains_key(&p))
    }
}

impl Timeline {
    /// Builds the timeline from the used segments of one datasource.
    pub fn build(segments: impl IntoIterator<Item = Arc<DataSegment>>) -> Timeline {
        let mut sets: BTreeMap<(String, Interval), PartitionSet> = BTreeMap::new();
        for seg in segments {
            let key = (seg.version.clone(), seg.interval);
            let set = sets.entry(key).or_insert_with(|| PartitionSet {
                interval: seg.interval,
                version: seg.version.clone(),
                segments: BTreeMap::new(),
            });
            set.segments.insert(seg.shard_spec.partition_num(), seg);
        }
        // Highest version first; among equal versions, earlier intervals first.
        let mut ordered: Vec<PartitionSet> = sets.into_values().collect();
        ordered.sort_by(|a, b| b.version.cmp(&a.version).then(a.interval.cmp(&b.interval)));

        let mut covered = CoveredSet::default();
        let mut entries = Vec::new();
        let mut overshadowed = HashSet::new();
        for set in ordered {
            let pieces = covered.subtract(&set.interval);
            if pieces.is_empty() {
                overshadowed.extend(set.segments.values().map(|s| s.id()));
                continue;
            }
            if !set.is_complete() {
                continue;
            }
            let segs: Vec<Arc<DataSegment>> = set.segments.values().cloned().collect();
            for p in pieces {
                entries.push(TimelineEntry {
                    interval: p,
                    full_interval: set.interval,
                    version: set.version.clone(),
                    segments: segs.clone(),
                });
            }
            covered.insert(set.interval);
        }
        entries.sort_by_key(|e| (e.interval.start, e.interval.end));
        Timeline {
            entries,
            overshadowed,
        }
    }

    /// All visible entries, sorted by start.
    pub fn entries(&self) -> &[TimelineEntry] {
        &self.entries
    }

    /// The visible entries overlapping any of `intervals`, each once, sorted by start.
    pub fn lookup(&self, intervals: &[Interval]) -> Vec<&TimelineEntry> {
        self.entries
            .iter()
            .filter(|e| intervals.iter().any(|i| i.overlaps(&e.interval)))
            .collect()
    }

    /// Every visible segment (a segment visible in several pieces appears once).
    pub fn visible_segments(&self) -> Vec<Arc<DataSegment>> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for e in &self.entries {
            for s in &e.segments {
                if seen.insert(s.identifier.clone()) {
                    out.push(Arc::clone(s));
                }
            }
        }
        out
    }

    /// True when the segment is fully covered by higher complete versions.
    pub fn is_overshadowed(&self, id: &SegmentId) -> bool {
        self.overshadowed.contains(id)
    }

    /// The ids of all overshadowed segments.
    pub fn overshadowed(&self) -> &HashSet<SegmentId> {
        &self.overshadowed
    }

    /// The smallest interval spanning all visible entries, if any.
    pub fn span(&self) -> Option<Interval> {
        let start = self.entries.first()?.interval.start;
        let end = self.entries.iter().map(|e| e.interval.end).max()?;
        Some(Interval { start, end })
    }

    /// True when nothing is visible.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// This timeline without the segments `keep` rejects (e.g. segments the coordinator has not
    /// loaded: a Druid broker's timeline only holds served segments). Entries left with no
    /// segment disappear; nothing that was hidden becomes visible.
    pub fn filtered(&self, keep: impl Fn(&DataSegment) -> bool) -> Timeline {
        let entries = self
            .entries
            .iter()
            .filter_map(|e| {
                let segments: Vec<Arc<DataSegment>> =
                    e.segments.iter().filter(|s| keep(s)).cloned().collect();
                (!segments.is_empty()).then(|| TimelineEntry {
                    segments,
                    ..e.clone()
                })
            })
            .collect();
        Timeline {
            entries,
            overshadowed: self.overshadowed.clone(),
        }
    }
}

/// A set of disjoint intervals kept sorted by start.
#[derive(Debug, Default)]
struct CoveredSet {
    spans: Vec<Interval>,
}

impl CoveredSet {
    /// The parts of `i` not covered by the set, in order.
    fn subtract(&self, i: &Interval) -> Vec<Interval> {
        let mut out = Vec::new();
        let mut cursor = i.start;
        // First span that ends after i.start.
        let first = self.spans.partition_point(|s| s.end <= i.start);
        for s in &self.spans[first..] {
            if s.start >= i.end {
                break;
            }
            if s.start > cursor {
                out.push(Interval {
                    start: cursor,
                    end: s.start,
                });
            }
            cursor = cursor.max(s.end);
            if cursor >= i.end {
                break;
            }
        }
        if cursor < i.end {
            out.push(Interval {
                start: cursor,
                end: i.end,
            });
        }
        out
    }

    /// Adds `i`, merging with overlapping or touching spans.
    fn insert(&mut self, i: Interval) {
        let lo = self.spans.partition_point(|s| s.end < i.start);
        let hi = self.spans.partition_point(|s| s.start <= i.end);
        let mut merged = i;
        for s in &self.spans[lo..hi] {
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
        }
        self.spans.splice(lo..hi, std::iter::once(merged));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{LoadSpec, ShardSpec};

    fn seg(interval: &str, version: &str, partition: u32, core: u32) -> Arc<DataSegment> {
        let interval = Interval::parse(interval).unwrap();
        let id = SegmentId {
            data_source: "ds".into(),
            interval,
            version: version.into(),
            partition_num: partition,
        };
        Arc::new(DataSegment {
            data_source: "ds".into(),
            interval,
            version: version.into(),
            load_spec: LoadSpec::Local {
                path: format!("/{id}"),
            },
            dimensions: String::new(),
            metrics: String::new(),
            shard_spec: ShardSpec::Numbered {
                partition_num: partition,
                partitions: core,
            },
            binary_version: 9,
            size: 1,
            num_rows: 1,
            columns: vec![],
            last_compaction_state: None,
            identifier: id.to_string(),
        })
    }

    fn ids(t: &Timeline) -> Vec<String> {
        let mut v: Vec<String> = t
            .visible_segments()
            .iter()
            .map(|s| s.identifier.clone())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn higher_version_overshadows_lower() {
        let t = Timeline::build([
            seg("2015-09-12/2015-09-13", "v1", 0, 1),
            seg("2015-09-12/2015-09-13", "v2", 0, 1),
        ]);
        assert_eq!(t.entries().len(), 1);
        assert_eq!(t.entries()[0].version, "v2");
        assert!(t.is_overshadowed(&seg("2015-09-12/2015-09-13", "v1", 0, 1).id()));
    }

    #[test]
    fn incomplete_partition_set_is_invisible_and_does_not_overshadow() {
        // v2 has core partitions 0..2 but only partition 1 is published.
        let t = Timeline::build([
            seg("2015-09-12/2015-09-13", "v1", 0, 1),
            seg("2015-09-12/2015-09-13", "v2", 1, 2),
        ]);
        assert_eq!(t.entries().len(), 1);
        assert_eq!(t.entries()[0].version, "v1");
        assert!(t.overshadowed().is_empty());
    }

    #[test]
    fn complete_set_of_many_partitions_is_visible() {
        let t = Timeline::build([
            seg("2015-09-12/2015-09-13", "v1", 0, 2),
            seg("2015-09-12/2015-09-13", "v1", 1, 2),
            // Appended partition beyond the core.
            seg("2015-09-12/2015-09-13", "v1", 2, 2),
        ]);
        assert_eq!(t.entries().len(), 1);
        assert_eq!(t.entries()[0].segments.len(), 3);
    }

    #[test]
    fn partial_overlap_keeps_lower_version_visible_outside() {
        // A DAY segment at v1, then an HOUR segment at v2 inside it.
        let t = Timeline::build([
            seg("2015-09-12/2015-09-13", "v1", 0, 1),
            seg("2015-09-12T05/2015-09-12T06", "v2", 0, 1),
        ]);
        let e = t.entries();
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0].interval,
            Interval::parse("2015-09-12/2015-09-12T05").unwrap()
        );
        assert_eq!(e[0].version, "v1");
        assert!(!e[0].is_whole());
        assert_eq!(e[1].version, "v2");
        assert!(e[1].is_whole());
        assert_eq!(
            e[2].interval,
            Interval::parse("2015-09-12T06/2015-09-13").unwrap()
        );
        assert!(t.overshadowed().is_empty());
        assert_eq!(ids(&t).len(), 2);
    }

    #[test]
    fn coarse_higher_version_overshadows_many_fine_segments() {
        let t = Timeline::build([
            seg("2015-09-12T00/2015-09-12T01", "v1", 0, 1),
            seg("2015-09-12T01/2015-09-12T02", "v1", 0, 1),
            seg("2015-09-12/2015-09-13", "v2", 0, 1),
        ]);
        assert_eq!(t.entries().len(), 1);
        assert_eq!(t.overshadowed().len(), 2);
    }

    #[test]
    fn lookup_filters_by_interval() {
        let t = Timeline::build([
            seg("2015-09-12/2015-09-13", "v1", 0, 1),
            seg("2015-09-13/2015-09-14", "v1", 0, 1),
        ]);
        let hits = t.lookup(&[Interval::parse("2015-09-13T05/2015-09-13T06").unwrap()]);
        assert_eq!(hits.len(), 1);
        assert_eq!(
            hits[0].interval.start,
            Interval::parse("2015-09-13/P1D").unwrap().start
        );
        assert_eq!(
            t.span().unwrap(),
            Interval::parse("2015-09-12/2015-09-14").unwrap()
        );
    }

    #[test]
    fn covered_set_subtracts_and_merges() {
        let mut c = CoveredSet::default();
        c.insert(Interval { start: 10, end: 20 });
        c.insert(Interval { start: 30, end: 40 });
        assert_eq!(
            c.subtract(&Interval { start: 0, end: 50 }),
            vec![
                Interval { start: 0, end: 10 },
                Interval { start: 20, end: 30 },
                Interval { start: 40, end: 50 }
            ]
        );
        c.insert(Interval { start: 20, end: 30 });
        assert_eq!(c.spans, vec![Interval { start: 10, end: 40 }]);
        assert!(c.subtract(&Interval { start: 12, end: 38 }).is_empty());
    }
}
