//! The live view of every datasource's timeline.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use dolmen_metadata::MetadataStore;
use dolmen_segment::{DataSegment, Timeline};

use crate::StorageError;

/// One timeline snapshot per datasource, rebuilt from the metadata store's used segments.
///
/// Readers take an `Arc<Timeline>` and keep planning against it even if a publish replaces it
/// meanwhile. Refreshes run one at a time (read from the metadata store, then install), so a
/// refresh that read older state can never install its snapshot after a newer one.
#[derive(Debug)]
pub struct SegmentView {
    metadata: Arc<dyn MetadataStore>,
    timelines: RwLock<HashMap<String, Arc<Timeline>>>,
    refreshing: tokio::sync::Mutex<()>,
}

impl SegmentView {
    /// An empty view over `metadata`; call [`SegmentView::refresh`] to fill it.
    pub fn new(metadata: Arc<dyn MetadataStore>) -> SegmentView {
        SegmentView {
            metadata,
            timelines: RwLock::new(HashMap::new()),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// Rebuilds every timeline from the used segments in the metadata store.
    ///
    /// # Errors
    /// When the metadata store fails; the previous snapshots stay in place.
    pub async fn refresh(&self) -> Result<(), StorageError> {
        let _one_at_a_time = self.refreshing.lock().await;
        let segments = self.metadata.all_used_segments().await?;
        let mut by_ds: HashMap<String, Vec<Arc<DataSegment>>> = HashMap::new();
        for s in segments {
            by_ds
                .entry(s.data_source.clone())
                .or_default()
                .push(Arc::new(s));
        }
        let timelines = by_ds
            .into_iter()
            .map(|(ds, segs)| (ds, Arc::new(Timeline::build(segs))))
            .collect();
        *self.timelines.write().expect("view lock") = timelines;
        Ok(())
    }

    /// Rebuilds one datasource's timeline.
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn refresh_data_source(&self, data_source: &str) -> Result<(), StorageError> {
        let _one_at_a_time = self.refreshing.lock().await;
        let segs = self.metadata.used_segments(data_source, None).await?;
        let mut t = self.timelines.write().expect("view lock");
        if segs.is_empty() {
            t.remove(data_source);
        } else {
            t.insert(
                data_source.to_string(),
                Arc::new(Timeline::build(segs.into_iter().map(Arc::new))),
            );
        }
        Ok(())
    }

    /// The current timeline snapshot of a datasource.
    pub fn timeline(&self, data_source: &str) -> Option<Arc<Timeline>> {
        self.timelines
            .read()
            .expect("view lock")
            .get(data_source)
            .cloned()
    }

    /// Datasources with visible segments, sorted.
    pub fn data_sources(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .timelines
            .read()
            .expect("view lock")
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }
}
