//! The `druid` input source: re-reads the rows of an existing datasource (Druid docs, "Input
//! sources" → "Druid input source").
//!
//! ```json
//! {"type": "druid", "dataSource": "wikipedia", "interval": "2015-09-12/2015-09-13",
//!  "filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}}
//! ```
//!
//! The segments read are the *visible* ones: used, published and not overshadowed, from the
//! versioned timeline built over the metadata store's used segments overlapping `interval`
//! (`dolmen_segment::Timeline`). Each segment file is fetched from deep storage into the task's
//! work directory and read as Parquet; a row is produced only when its `__time` lies inside
//! `interval` and inside the part of the timeline where its segment is visible, and when it
//! passes `filter` (a Druid `DimFilter`, same semantics as `transformSpec.filter`).
//!
//! Rows carry `__time` as epoch milliseconds (a number) plus every dimension and metric column
//! of the segment, so the usual spec is `"timestampSpec": {"column": "__time", "format":
//! "millis"}`. No `inputFormat` is needed (one given is ignored for these rows).
//!
//! Re-indexing into the same datasource works like any overwrite: the task's lock gives it a
//! newer version, whose segments overshadow the ones read here once published.

use std::collections::HashMap;
use std::sync::Arc;

use dolmen_common::Interval;
use dolmen_segment::{DataSegment, Timeline};
use serde::{Deserialize, Serialize};

use super::context::{InputContext, IoRuntime, SegmentAccess};
use super::format::{InputFormat, RowReader};
use super::{InputEntity, InputError, InputRow, RowParseError};
use crate::filter::{CompiledFilter, DimFilter};

/// `{"type": "druid", ...}` (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DruidInputSource {
    /// The datasource to read.
    pub data_source: String,
    /// Only rows with `__time` in this interval are read.
    pub interval: Interval,
    /// Only rows passing this filter are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<DimFilter>,
}

impl DruidInputSource {
    /// Checks the spec; errors name the field under `path`.
    ///
    /// # Errors
    /// [`InputError::InvalidSpec`] for an invalid datasource name, an empty interval or an
    /// invalid filter.
    pub fn validate(&self, path: &str) -> Result<(), InputError> {
        crate::spec::validate_data_source_name(&self.data_source, &format!("{path}.dataSource"))
            .map_err(|e| InputError::InvalidSpec(e.to_string()))?;
        if self.interval.start >= self.interval.end {
            return Err(InputError::InvalidSpec(format!(
                "{path}.interval: the interval is empty"
            )));
        }
        if let Some(f) = &self.filter {
            f.compile()
                .map_err(|e| InputError::InvalidSpec(format!("{path}.filter: {e}")))?;
        }
        Ok(())
    }

    /// One entity per visible segment overlapping `interval`, in time order.
    ///
    /// # Errors
    /// When the spec is invalid, the context has no metadata store and deep storage, or the
    /// metadata store cannot be read.
    pub(super) fn entities(
        &self,
        ctx: &InputContext,
        path: &str,
    ) -> Result<Vec<InputEntity>, InputError> {
        self.validate(path)?;
        let Some(access) = &ctx.segments else {
            return Err(InputError::InvalidSpec(format!(
                "{path}: the druid input source can only be read by a task: it needs the metadata store and deep storage (list entities with InputSource::entities_in(&InputContext::for_task(env)))"
            )));
        };
        let filter = match &self.filter {
            Some(f) => {
                Some(Arc::new(f.compile().map_err(|e| {
                    InputError::InvalidSpec(format!("{path}.filter: {e}"))
                })?))
            }
            None => None,
        };
        let runtime = ctx.io_runtime()?;
        let used = runtime
            .block_on(
                access
                    .metadata
                    .used_segments(&self.data_source, Some(self.interval)),
            )
            .map_err(|e| InputError::Io {
                path: format!("datasource [{}]", self.data_source),
                source: std::io::Error::other(format!("cannot list segments: {e}")),
            })?;
        let timeline = Timeline::build(used.into_iter().map(Arc::new));
        // A segment may be visible in several pieces: gather them per segment, in time order.
        let mut order: Vec<Arc<DataSegment>> = Vec::new();
        let mut pieces: HashMap<String, Vec<Interval>> = HashMap::new();
        for entry in timeline.lookup(&[self.interval]) {
            let Some(visible) = entry.interval.intersect(&self.interval) else {
                continue;
            };
            for seg in &entry.segments {
                let list = pieces.entry(seg.identifier.clone()).or_default();
                if list.is_empty() {
                    order.push(Arc::clone(seg));
                }
                list.push(visible);
            }
        }
        Ok(order
            .into_iter()
            .map(|segment| {
                let visible = pieces.remove(&segment.identifier).unwrap_or_default();
                InputEntity::Segment(Arc::new(SegmentSlice {
                    segment,
                    visible,
                    filter: filter.clone(),
                    access: access.clone(),
                    runtime: runtime.clone(),
                    ctx: ctx.clone(),
                }))
            })
            .collect())
    }
}

/// The rows of one segment that a `druid` input source reads.
#[derive(Debug)]
pub struct SegmentSlice {
    /// The segment.
    pub segment: Arc<DataSegment>,
    /// Where its rows are taken from: the parts of the requested interval where the segment is
    /// visible.
    pub visible: Vec<Interval>,
    filter: Option<Arc<CompiledFilter>>,
    access: SegmentAccess,
    runtime: IoRuntime,
    ctx: InputContext,
}

impl PartialEq for SegmentSlice {
    fn eq(&self, other: &Self) -> bool {
        self.segment.identifier == other.segment.identifier && self.visible == other.visible
    }
}

impl SegmentSlice {
    /// Fetches the segment file and streams its rows (see the module docs).
    ///
    /// # Errors
    /// When the file cannot be fetched or opened.
    pub(super) fn rows(&self) -> Result<RowReader, InputError> {
        let id = &self.segment.identifier;
        let io_err = |e: std::io::Error| InputError::Io {
            path: format!("segment [{id}]"),
            source: e,
        };
        let tmp = self.ctx.temp_file().map_err(io_err)?;
        self.runtime
            .block_on(self.access.deep.fetch(&self.segment.load_spec, tmp.path()))
            .map_err(|e| {
                io_err(std::io::Error::other(format!(
                    "cannot fetch from deep storage: {e}"
                )))
            })?;
        let reader = InputFormat::Parquet {
            binary_as_string: Some(true),
            flatten_spec: None,
        }
        .reader(&InputEntity::File(tmp.path().to_path_buf()))?;
        let json_columns = self
            .segment
            .columns
            .iter()
            .filter(|c| c.ty == dolmen_segment::ColumnType::Json)
            .map(|c| c.name.clone())
            .collect();
        Ok(Box::new(SegmentRows {
            reader,
            json_columns,
            visible: self.visible.clone(),
            filter: self.filter.clone(),
            _file: tmp,
            id: id.clone(),
        }))
    }
}

/// Filters a segment file's rows by time and `filter`; keeps the fetched file until dropped.
struct SegmentRows {
    reader: RowReader,
    /// `COMPLEX<json>` columns: stored as JSON text, read back as the JSON values.
    json_columns: Vec<String>,
    visible: Vec<Interval>,
    filter: Option<Arc<CompiledFilter>>,
    _file: tempfile::NamedTempFile,
    id: String,
}

impl SegmentRows {
    fn keep(&self, row: &InputRow) -> Result<bool, RowParseError> {
        let Some(ts) = row
            .get(crate::TIME_COLUMN)
            .and_then(serde_json::Value::as_i64)
        else {
            return Err(RowParseError::fatal(format!(
                "segment [{}] has a row without a numeric [__time]",
                self.id
            )));
        };
        Ok(self.visible.iter().any(|i| i.contains_instant(ts))
            && self.filter.as_ref().is_none_or(|f| f.matches(row, ts)))
    }
}

impl Iterator for SegmentRows {
    type Item = Result<InputRow, RowParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut row = match self.reader.next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            // Shredded JSON sub-columns are a storage detail: rows carry the JSON column only.
            if !self.json_columns.is_empty() {
                row.retain(|k, _| !dolmen_segment::nested::is_nested_column(k));
            }
            for c in &self.json_columns {
                if let Some(v) = row.get_mut(c)
                    && let serde_json::Value::String(text) = v
                    && let Ok(parsed) = serde_json::from_str(text)
                {
                    *v = parsed;
                }
            }
            match self.keep(&row) {
                Ok(true) => return Some(Ok(row)),
                Ok(false) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputSource;
    use serde_json::json;

    fn druid(v: serde_json::Value) -> DruidInputSource {
        match serde_json::from_value::<InputSource>(v).unwrap() {
            InputSource::Druid(d) => *d,
            other => panic!("not druid: {other:?}"),
        }
    }

    #[test]
    fn serde_shape_and_validation() {
        let v = json!({"type": "druid", "dataSource": "wikipedia", "interval": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
            "filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}});
        let s: InputSource = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        let d = druid(json!({"type": "druid", "dataSource": "w", "interval": "2015-09-12/P1D"}));
        assert_eq!(d.interval.end - d.interval.start, 86_400_000);
        let p = "spec.ioConfig.inputSource";
        d.validate(p).unwrap();
        let e = serde_json::from_value::<InputSource>(
            json!({"type": "druid", "dataSource": "w", "interval": "2015-09-12/P1D", "segments": []}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("segments"), "{e}");
        assert!(
            serde_json::from_value::<InputSource>(json!({"type": "druid", "dataSource": "w"}))
                .is_err()
        );
        let bad_ds =
            druid(json!({"type": "druid", "dataSource": "a/b", "interval": "2015-09-12/P1D"}));
        let e = bad_ds.validate(p).unwrap_err().to_string();
        assert!(e.contains("spec.ioConfig.inputSource.dataSource"), "{e}");
        let bad_filter = druid(
            json!({"type": "druid", "dataSource": "w", "interval": "2015-09-12/P1D",
            "filter": {"type": "regex", "dimension": "x", "pattern": "("}}),
        );
        let e = bad_filter.validate(p).unwrap_err().to_string();
        assert!(e.contains("spec.ioConfig.inputSource.filter"), "{e}");
        // Without a task context there is nothing to read from.
        let e = d
            .entities(&InputContext::default(), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata store"), "{e}");
    }
}
