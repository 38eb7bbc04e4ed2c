//! The segment cache: local copies of segments, loaded from deep storage on demand.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dolmen_segment::DataSegment;

use crate::{DeepStorage, StorageError, io_err};

/// Local copies of segment files (Druid's historical segment cache), under one directory:
/// `<dir>/<dataSource>/<start>_<end>/<version>/<partitionNum>/index.parquet`.
#[derive(Debug)]
pub struct SegmentCache {
    dir: PathBuf,
    deep: DeepStorage,
    /// Segments known to be present locally, by segment id.
    loaded: Mutex<HashMap<String, Loaded>>,
    /// One async lock per segment being fetched, so concurrent queries fetch once.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A segment present locally.
#[derive(Debug)]
struct Loaded {
    path: PathBuf,
    data_source: String,
    size: u64,
}

impl SegmentCache {
    /// A cache in `dir` (created if missing) backed by `deep`.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn new(dir: &Path, deep: DeepStorage) -> Result<SegmentCache, StorageError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(SegmentCache {
            dir: dir.to_path_buf(),
            deep,
            loaded: Mutex::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
        })
    }

    /// Deep storage behind this cache.
    pub fn deep_storage(&self) -> &DeepStorage {
        &self.deep
    }

    fn local_path(&self, seg: &DataSegment) -> PathBuf {
        self.dir
            .join(sanitize(&seg.data_source))
            .join(sanitize(&seg.interval.to_underscore_string()))
            .join(sanitize(&seg.version))
            .join(seg.shard_spec.partition_num().to_string())
            .join("index.parquet")
    }

    /// True when the segment is present locally (without fetching).
    pub fn is_loaded(&self, seg: &DataSegment) -> bool {
        self.loaded
            .lock()
            .expect("cache lock")
            .contains_key(&seg.identifier)
    }

    /// The local path of a segment's file, fetching it from deep storage first if needed.
    ///
    /// # Errors
    /// When the fetch fails.
    pub async fn ensure_loaded(&self, seg: &DataSegment) -> Result<PathBuf, StorageError> {
        if let Some(l) = self.loaded.lock().expect("cache lock").get(&seg.identifier) {
            return Ok(l.path.clone());
        }
        let gate = {
            let mut f = self.fetching.lock().expect("cache lock");
            Arc::clone(f.entry(seg.identifier.clone()).or_default())
        };
        let _held = gate.lock().await;
        if let Some(l) = self.loaded.lock().expect("cache lock").get(&seg.identifier) {
            return Ok(l.path.clone());
        }
        let path = self.local_path(seg);
        let present = tokio::fs::metadata(&path)
            .await
            .map(|m| m.len() == seg.size)
            .unwrap_or(false);
        let fetched = if present {
            Ok(())
        } else {
            tracing::debug!(segment = %seg.identifier, "loading segment from deep storage");
            self.deep.fetch(&seg.load_spec, &path).await
        };
        // Remove the gate whether or not the fetch worked, so a failed fetch can be retried.
        self.fetching
            .lock()
            .expect("cache lock")
            .remove(&seg.identifier);
        fetched?;
        self.loaded.lock().expect("cache lock").insert(
            seg.identifier.clone(),
            Loaded {
                path: path.clone(),
                data_source: seg.data_source.clone(),
                size: seg.size,
            },
        );
        Ok(path)
    }

    /// Removes a segment's local copy (it stays in deep storage).
    ///
    /// # Errors
    /// On I/O failure other than the file being absent.
    pub async fn drop_segment(&self, seg: &DataSegment) -> Result<(), StorageError> {
        self.loaded
            .lock()
            .expect("cache lock")
            .remove(&seg.identifier);
        let path = self.local_path(seg);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    /// Number of segments present locally.
    pub fn loaded_count(&self) -> usize {
        self.loaded.lock().expect("cache lock").len()
    }

    /// Bytes of the segments present locally, per datasource (their published sizes), sorted
    /// by datasource: what Druid's historical reports as `segment/used`.
    pub fn used_bytes(&self) -> Vec<(String, u64)> {
        let mut by_ds: std::collections::BTreeMap<String, u64> = Default::default();
        for l in self.loaded.lock().expect("cache lock").values() {
            *by_ds.entry(l.data_source.clone()).or_default() += l.size;
        }
        by_ds.into_iter().collect()
    }
}

/// Makes a name safe as one path component: `/`, `\`, NUL and leading dots are replaced.
pub(crate) fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c == '\0' {
                '_'
            } else {
                c
            }
        })
        .collect();
    if s.starts_with('.') {
        s.replace_range(0..1, "_");
    }
    if s.is_empty() {
        s.push('_');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use dolmen_common::Interval;
    use dolmen_segment::{LoadSpec, ShardSpec};

    #[tokio::test]
    async fn loads_once_and_drops() {
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = dir.path().join("f");
        std::fs::write(&src, b"hello").unwrap();
        let spec = deep.push(&src, "ds/x/t/0/index.parquet").await.unwrap();
        let seg = DataSegment {
            data_source: "../ds".into(),
            interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
            version: "v1".into(),
            load_spec: spec,
            dimensions: String::new(),
            metrics: String::new(),
            shard_spec: ShardSpec::Numbered {
                partition_num: 0,
                partitions: 1,
            },
            binary_version: 9,
            size: 5,
            num_rows: 1,
            columns: vec![],
            last_compaction_state: None,
            identifier: "id1".into(),
        };
        let cache = SegmentCache::new(&dir.path().join("cache"), deep).unwrap();
        let p = cache.ensure_loaded(&seg).await.unwrap();
        assert!(p.starts_with(dir.path().join("cache")));
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        assert!(cache.is_loaded(&seg));
        assert_eq!(cache.used_bytes(), vec![("../ds".to_string(), 5)]);
        cache.drop_segment(&seg).await.unwrap();
        assert!(cache.used_bytes().is_empty());
        assert!(!p.exists());
        let bad = DataSegment {
            load_spec: LoadSpec::Local {
                path: "/etc/passwd".into(),
            },
            identifier: "id2".into(),
            ..seg
        };
        assert!(cache.ensure_loaded(&bad).await.is_err());
    }
}
