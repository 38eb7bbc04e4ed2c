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
    /// Called with the local path of every segment the cache loads
    /// ([`SegmentCache::set_load_hook`]).
    hook: std::sync::RwLock<Option<LoadHook>>,
}

/// What [`SegmentCache::set_load_hook`] registers.
struct LoadHook(Box<dyn Fn(&Path) + Send + Sync>);

impl std::fmt::Debug for LoadHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadHook")
    }
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
            hook: std::sync::RwLock::new(None),
        })
    }

    /// Registers `hook`, called with the local path of every segment loaded from now on, and
    /// at once with those already loaded: the query engine loads the segment's value indexes
    /// there, so they are in memory with the segment (ADR 0025). It must not block.
    pub fn set_load_hook(&self, hook: impl Fn(&Path) + Send + Sync + 'static) {
        let paths: Vec<PathBuf> = self
            .loaded
            .lock()
            .expect("cache lock")
            .values()
            .map(|l| l.path.clone())
            .collect();
        for p in &paths {
            hook(p);
        }
        *self.hook.write().expect("hook lock") = Some(LoadHook(Box::new(hook)));
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

    /// The local path of a segment's file when the cache already holds it (loaded, or left on
    /// disk by an earlier run with the segment's size), registering it as loaded (which runs
    /// the load hook); `None` when it would have to be fetched from deep storage. What a
    /// restarted historical does with its segment cache before it serves queries.
    pub async fn load_if_cached(&self, seg: &DataSegment) -> Option<PathBuf> {
        if let Some(l) = self.loaded.lock().expect("cache lock").get(&seg.identifier) {
            return Some(l.path.clone());
        }
        let present = tokio::fs::metadata(self.local_path(seg))
            .await
            .is_ok_and(|m| m.len() == seg.size);
        if !present {
            return None;
        }
        self.ensure_loaded(seg).await.ok()
    }

    /// The local path of a segment's file, fetching it from deep storage first if needed,
    /// with its value index sidecar when deep storage has one
    /// (`dolmen_segment::value_index::sidecar_path` of the returned path).
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
        // The segment's value index sidecar comes with it; deep storage has none for segments
        // written before sidecars existed (the query engine builds their indexes then).
        let sidecar = dolmen_segment::value_index::sidecar_path(&path);
        if !tokio::fs::try_exists(&sidecar).await.unwrap_or(false) {
            match self.deep.fetch_sidecar(&seg.load_spec, &sidecar).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(segment = %seg.identifier, "segment has no value index sidecar")
                }
                Err(e) => {
                    tracing::warn!(segment = %seg.identifier, error = %e, "cannot load the value index sidecar")
                }
            }
        }
        self.loaded.lock().expect("cache lock").insert(
            seg.identifier.clone(),
            Loaded {
                path: path.clone(),
                data_source: seg.data_source.clone(),
                size: seg.size,
            },
        );
        if let Some(hook) = self.hook.read().expect("hook lock").as_ref() {
            (hook.0)(&path);
        }
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
        let sidecar = dolmen_segment::value_index::sidecar_path(&path);
        match tokio::fs::remove_file(&sidecar).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&sidecar)(e)),
        }
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

    /// Segment `id1` of `data_source` (one day, partition 0 of 1) whose file holds 5 bytes.
    fn five_byte_segment(data_source: &str, load_spec: LoadSpec) -> DataSegment {
        DataSegment {
            data_source: data_source.into(),
            interval: Interval::parse("2015-09-12/2015-09-13").unwrap(),
            version: "v1".into(),
            load_spec,
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
        }
    }

    #[tokio::test]
    async fn loads_once_and_drops() {
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = dir.path().join("f");
        std::fs::write(&src, b"hello").unwrap();
        let spec = deep.push(&src, "ds/x/t/0/index.parquet").await.unwrap();
        let seg = five_byte_segment("../ds", spec);
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

    #[tokio::test]
    async fn value_index_sidecars_travel_with_their_segments() {
        use dolmen_segment::value_index::sidecar_path;
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = dir.path().join("index.parquet");
        std::fs::write(&src, b"hello").unwrap();
        std::fs::write(sidecar_path(&src), b"indexes").unwrap();
        let spec = deep.push(&src, "ds/x/t/0/index.parquet").await.unwrap();
        let LoadSpec::Local { path: stored } = &spec else {
            panic!("local load spec");
        };
        let stored_sidecar = sidecar_path(Path::new(stored));
        assert_eq!(std::fs::read(&stored_sidecar).unwrap(), b"indexes");
        let seg = five_byte_segment("ds", spec.clone());
        let cache = SegmentCache::new(&dir.path().join("cache"), deep.clone()).unwrap();
        let p = cache.ensure_loaded(&seg).await.unwrap();
        assert_eq!(std::fs::read(sidecar_path(&p)).unwrap(), b"indexes");
        assert_eq!(
            deep.read_sidecar(&spec).await.unwrap().as_deref(),
            Some(&b"indexes"[..])
        );
        cache.drop_segment(&seg).await.unwrap();
        assert!(!sidecar_path(&p).exists());
        deep.delete(&spec).await.unwrap();
        assert!(!stored_sidecar.exists());
        assert!(deep.read_sidecar(&spec).await.unwrap().is_none());

        // A segment without a sidecar (written before sidecars existed) still loads.
        let old = dir.path().join("old.parquet");
        std::fs::write(&old, b"hello").unwrap();
        let spec = deep.push(&old, "ds/x/t/1/index.parquet").await.unwrap();
        let seg = DataSegment {
            load_spec: spec,
            identifier: "id2".into(),
            shard_spec: ShardSpec::Numbered {
                partition_num: 1,
                partitions: 2,
            },
            ..seg
        };
        let p = cache.ensure_loaded(&seg).await.unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        assert!(!sidecar_path(&p).exists());
    }
}
