//! Deep storage through `object_store`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dolmen_segment::LoadSpec;
use dolmen_segment::value_index;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{StorageError, io_err};

/// Size of the parts a segment file is uploaded in, bytes.
const PART_SIZE: usize = 8 * 1024 * 1024;

/// The durable home of segment files: a local directory (Druid's `druid.storage.type=local`)
/// or a bucket of an S3-compatible store (`druid.storage.type=s3`), both through
/// `object_store`.
#[derive(Debug, Clone)]
pub struct DeepStorage {
    store: Arc<dyn ObjectStore>,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// Root directory of local deep storage.
    Local(PathBuf),
    /// A bucket, and the key prefix (no leading or trailing `/`; empty for none) segments are
    /// stored under.
    S3 { bucket: String, base_key: String },
}

impl DeepStorage {
    /// Deep storage in a local directory (Druid's `druid.storage.type=local`), created if
    /// missing.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn local(dir: &Path) -> Result<DeepStorage, StorageError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let root = dir.canonicalize().map_err(io_err(dir))?;
        let store = LocalFileSystem::new_with_prefix(&root)?;
        Ok(DeepStorage {
            store: Arc::new(store),
            kind: Kind::Local(root),
        })
    }

    /// Deep storage in `bucket` of an S3-compatible store (Druid's `druid.storage.type=s3`
    /// with `druid.storage.bucket` and `druid.storage.baseKey`): segment files are stored
    /// under `<base_key>/<key>`. `store` must be an `object_store` client for that bucket
    /// (its paths are keys inside the bucket).
    ///
    /// # Errors
    /// When `base_key` holds an empty, `.` or `..` path segment.
    pub fn s3(
        store: Arc<dyn ObjectStore>,
        bucket: &str,
        base_key: &str,
    ) -> Result<DeepStorage, StorageError> {
        let base_key = base_key.trim_matches('/');
        if !base_key.is_empty() {
            object_path(base_key)?;
        }
        Ok(DeepStorage {
            store,
            kind: Kind::S3 {
                bucket: bucket.to_string(),
                base_key: base_key.to_string(),
            },
        })
    }

    /// The root directory of local deep storage; `None` when deep storage is S3.
    pub fn local_root(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(root) => Some(root),
            Kind::S3 { .. } => None,
        }
    }

    /// Where a segment file behind `load_spec` can be read in place, without copying it: a
    /// local path, or the `object_store` client, bucket and key of an S3 object (query from
    /// deep storage reads it with ranged GETs).
    ///
    /// # Errors
    /// [`StorageError::InvalidPath`] when the load spec is not in this deep storage: a local
    /// path outside its root (or any local path when deep storage is S3), an S3 object of
    /// another bucket (no client for it), or an invalid key.
    pub fn location(&self, load_spec: &LoadSpec) -> Result<SegmentLocation, StorageError> {
        match load_spec {
            LoadSpec::Local { path } => match &self.kind {
                // Only files under the root: a load spec never makes us read arbitrary files.
                Kind::Local(root)
                    if Path::new(path).starts_with(root) && !path.contains("/../") =>
                {
                    Ok(SegmentLocation::Local(PathBuf::from(path)))
                }
                _ => Err(StorageError::InvalidPath(format!(
                    "{path} (not under this deep storage)"
                ))),
            },
            LoadSpec::S3 { bucket, key } => match &self.kind {
                Kind::S3 { bucket: ours, .. } if ours == bucket => Ok(SegmentLocation::Object {
                    store: Arc::clone(&self.store),
                    bucket: bucket.clone(),
                    key: object_path(key)?,
                }),
                _ => Err(StorageError::InvalidPath(format!(
                    "s3://{bucket}/{key} (deep storage is not this bucket)"
                ))),
            },
        }
    }

    /// Stores a finished local file at `key` (a relative `/`-separated path) and returns its
    /// load spec. The file must not change afterwards (segment files never do).
    ///
    /// Local deep storage on the same filesystem as `local_file` takes a hard link (linked
    /// under a temporary name, renamed into place, directory synced): no bytes are copied, so
    /// publishing a 10M-row ingestion's 30 segments takes milliseconds instead of a 300 MB copy.
    /// Otherwise (S3, another filesystem, or linking refused) the bytes are uploaded through
    /// `object_store` in parts of 8 MiB; an S3 object appears whole or not at all.
    ///
    /// # Errors
    /// On an invalid key or I/O failure; a failed upload is aborted and leaves no object.
    ///
    /// The segment file's value index sidecar (`dolmen_segment::value_index`), when one exists
    /// beside `local_file`, is stored first, under the key plus its suffix: once the load spec
    /// is published, the sidecar is in deep storage too.
    pub async fn push(&self, local_file: &Path, key: &str) -> Result<LoadSpec, StorageError> {
        object_path(key)?;
        let sidecar = value_index::sidecar_path(local_file);
        if tokio::fs::try_exists(&sidecar).await.unwrap_or(false) {
            // No directory sync of its own: the segment file's, in the same directory, right
            // after, makes both entries durable (and a sidecar lost in a crash before it is
            // built again from the segment file).
            self.push_file(&sidecar, &value_index::sidecar_key(key), false)
                .await?;
        }
        self.push_one(local_file, key).await
    }

    /// The load spec of the value index sidecar of the segment file behind `load_spec`.
    pub fn sidecar_load_spec(load_spec: &LoadSpec) -> LoadSpec {
        match load_spec {
            LoadSpec::Local { path } => LoadSpec::Local {
                path: value_index::sidecar_key(path),
            },
            LoadSpec::S3 { bucket, key } => LoadSpec::S3 {
                bucket: bucket.clone(),
                key: value_index::sidecar_key(key),
            },
        }
    }

    /// Copies the value index sidecar of the segment behind `load_spec` to `dest` (as
    /// [`DeepStorage::fetch`]); `Ok(false)` when deep storage has none (a segment written
    /// before sidecars existed).
    ///
    /// # Errors
    /// As [`DeepStorage::fetch`], other than the sidecar being absent.
    pub async fn fetch_sidecar(
        &self,
        load_spec: &LoadSpec,
        dest: &Path,
    ) -> Result<bool, StorageError> {
        let spec = DeepStorage::sidecar_load_spec(load_spec);
        if let SegmentLocation::Local(src) = self.location(&spec)?
            && !tokio::fs::try_exists(&src).await.unwrap_or(false)
        {
            return Ok(false);
        }
        match self.fetch(&spec, dest).await {
            Ok(()) => Ok(true),
            Err(StorageError::ObjectStore(object_store::Error::NotFound { .. })) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The bytes of the value index sidecar of the segment behind `load_spec`, read in place;
    /// `Ok(None)` when deep storage has none.
    ///
    /// # Errors
    /// On I/O failure other than the sidecar being absent, or a load spec outside this deep
    /// storage.
    pub async fn read_sidecar(
        &self,
        load_spec: &LoadSpec,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        let spec = DeepStorage::sidecar_load_spec(load_spec);
        match self.location(&spec)? {
            SegmentLocation::Local(path) => match tokio::fs::read(&path).await {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_err(&path)(e)),
            },
            SegmentLocation::Object { store, key, .. } => match store.get(&key).await {
                Ok(got) => Ok(Some(got.bytes().await?.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            },
        }
    }

    async fn push_one(&self, local_file: &Path, key: &str) -> Result<LoadSpec, StorageError> {
        self.push_file(local_file, key, true).await
    }

    /// [`DeepStorage::push_one`]; `sync_dir: false` skips the directory sync of a local deep
    /// storage's hard link.
    async fn push_file(
        &self,
        local_file: &Path,
        key: &str,
        sync_dir: bool,
    ) -> Result<LoadSpec, StorageError> {
        object_path(key)?;
        let (path, load_spec) = match &self.kind {
            Kind::Local(root) => {
                let load_spec = LoadSpec::Local {
                    path: root.join(key).display().to_string(),
                };
                let (src, dest) = (local_file.to_path_buf(), root.join(key));
                let linked =
                    tokio::task::spawn_blocking(move || link_into_place(&src, &dest, sync_dir))
                        .await
                        .unwrap_or(false);
                if linked {
                    return Ok(load_spec);
                }
                (object_path(key)?, load_spec)
            }
            Kind::S3 { bucket, base_key } => {
                let full = if base_key.is_empty() {
                    key.to_string()
                } else {
                    format!("{base_key}/{key}")
                };
                (
                    object_path(&full)?,
                    LoadSpec::S3 {
                        bucket: bucket.clone(),
                        key: full,
                    },
                )
            }
        };
        let mut file = tokio::fs::File::open(local_file)
            .await
            .map_err(io_err(local_file))?;
        let upload = self.store.put_multipart(&path).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
        let mut buf = vec![0u8; 1024 * 1024];
        loop {
            let n = match file.read(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(io_err(local_file)(e));
                }
            };
            if n == 0 {
                break;
            }
            writer.write(&buf[..n]);
        }
        writer.finish().await?;
        Ok(load_spec)
    }

    /// Copies the object behind `load_spec` to `dest` (written to a temporary name, synced and
    /// renamed, so `dest` is whole or absent). A local segment file on the same filesystem as
    /// `dest` is hard-linked instead.
    ///
    /// # Errors
    /// When the object is missing, belongs to a bucket this deep storage has no client for, or
    /// I/O fails.
    pub async fn fetch(&self, load_spec: &LoadSpec, dest: &Path) -> Result<(), StorageError> {
        if let Some(dir) = dest.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(io_err(dir))?;
        }
        let tmp = dest.with_extension("part");
        let _ = tokio::fs::remove_file(&tmp).await;
        match self.location(load_spec)? {
            SegmentLocation::Local(src) => {
                if tokio::fs::hard_link(&src, &tmp).await.is_err() {
                    copy_synced(&src, &tmp).await?;
                }
            }
            SegmentLocation::Object { store, key, .. } => {
                let mut stream = store.get(&key).await?.into_stream();
                let mut out = tokio::fs::File::create(&tmp).await.map_err(io_err(&tmp))?;
                while let Some(chunk) = stream.next().await {
                    let chunk = match chunk {
                        Ok(c) => c,
                        Err(e) => {
                            drop(out);
                            let _ = tokio::fs::remove_file(&tmp).await;
                            return Err(e.into());
                        }
                    };
                    out.write_all(&chunk).await.map_err(io_err(&tmp))?;
                }
                out.sync_all().await.map_err(io_err(&tmp))?;
            }
        }
        tokio::fs::rename(&tmp, dest).await.map_err(io_err(dest))?;
        Ok(())
    }

    /// Deletes the object behind `load_spec` (missing objects are not an error).
    ///
    /// # Errors
    /// On I/O failure, or a load spec outside this deep storage (a local path outside its
    /// root, another bucket): nothing is deleted then.
    ///
    /// The segment's value index sidecar is deleted with it.
    pub async fn delete(&self, load_spec: &LoadSpec) -> Result<(), StorageError> {
        self.delete_one(&DeepStorage::sidecar_load_spec(load_spec))
            .await?;
        self.delete_one(load_spec).await
    }

    async fn delete_one(&self, load_spec: &LoadSpec) -> Result<(), StorageError> {
        let (store, key): (&dyn ObjectStore, ObjectPath) = match (&self.kind, load_spec) {
            (Kind::Local(root), LoadSpec::Local { path }) => {
                let rel = Path::new(path)
                    .strip_prefix(root)
                    .map_err(|_| StorageError::InvalidPath(path.clone()))?;
                (self.store.as_ref(), object_path(&rel.to_string_lossy())?)
            }
            (_, spec) => match self.location(spec)? {
                SegmentLocation::Object { key, .. } => (self.store.as_ref(), key),
                SegmentLocation::Local(p) => {
                    return Err(StorageError::InvalidPath(p.display().to_string()));
                }
            },
        };
        match store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Where a segment file can be read in place (see [`DeepStorage::location`]).
#[derive(Debug, Clone)]
pub enum SegmentLocation {
    /// A file on the local filesystem.
    Local(PathBuf),
    /// An object of an S3-compatible store.
    Object {
        /// Client for the bucket (paths are keys inside it).
        store: Arc<dyn ObjectStore>,
        /// Bucket name (the `s3://<bucket>` object store URL a query registers it under).
        bucket: String,
        /// Key of the segment file.
        key: ObjectPath,
    },
}

/// Copies `src` to `dest` and syncs it (a local segment file that cannot be hard-linked).
async fn copy_synced(src: &Path, dest: &Path) -> Result<(), StorageError> {
    tokio::fs::copy(src, dest).await.map_err(io_err(src))?;
    tokio::fs::File::open(dest)
        .await
        .map_err(io_err(dest))?
        .sync_all()
        .await
        .map_err(io_err(dest))
}

/// Hard-links `src` to `dest` atomically: link to a temporary name beside `dest`, rename over
/// any earlier object, then sync the directory so the new entry survives a crash. `false` when
/// linking is not possible (other filesystem, no permission, ...): the caller copies instead,
/// and no temporary name is left behind.
fn link_into_place(src: &Path, dest: &Path, sync_dir: bool) -> bool {
    let Some(dir) = dest.parent() else {
        return false;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let tmp = dest.with_extension("link");
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(src, &tmp).is_err() {
        return false;
    }
    if std::fs::rename(&tmp, dest).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    !sync_dir || std::fs::File::open(dir).and_then(|d| d.sync_all()).is_ok()
}

/// Validates a relative key: no empty, `.` or `..` segments, no absolute paths.
fn object_path(key: &str) -> Result<ObjectPath, StorageError> {
    if key.starts_with('/')
        || key
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(StorageError::InvalidPath(key.to_string()));
    }
    ObjectPath::parse(key).map_err(|_| StorageError::InvalidPath(key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn push_fetch_delete() {
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = dir.path().join("src.bin");
        std::fs::write(&src, vec![7u8; 3 * 1024 * 1024 + 5]).unwrap();
        let spec = deep.push(&src, "ds/a_b/t/0/index.parquet").await.unwrap();
        let dest = dir.path().join("cache/x.parquet");
        deep.fetch(&spec, &dest).await.unwrap();
        assert_eq!(std::fs::read(&dest).unwrap().len(), 3 * 1024 * 1024 + 5);
        deep.delete(&spec).await.unwrap();
        deep.delete(&spec).await.unwrap();
        assert!(deep.push(&src, "../escape").await.is_err());
        assert!(deep.push(&src, "a//b").await.is_err());
    }

    #[tokio::test]
    async fn s3_deep_storage_keys_under_the_base_key() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let deep = DeepStorage::s3(Arc::clone(&store), "segs", "/prod/druid/").unwrap();
        assert!(deep.local_root().is_none());
        let src = dir.path().join("src.bin");
        let bytes: Vec<u8> = (0..9 * 1024 * 1024 + 3).map(|i| (i % 251) as u8).collect();
        std::fs::write(&src, &bytes).unwrap();
        let spec = deep.push(&src, "ds/a_b/v1/0/index.parquet").await.unwrap();
        assert_eq!(
            spec,
            LoadSpec::S3 {
                bucket: "segs".into(),
                key: "prod/druid/ds/a_b/v1/0/index.parquet".into()
            }
        );
        // Uploaded in parts, whole.
        let got = store
            .get(&ObjectPath::from("prod/druid/ds/a_b/v1/0/index.parquet"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(got.as_ref(), bytes.as_slice());
        match deep.location(&spec).unwrap() {
            SegmentLocation::Object { bucket, key, .. } => {
                assert_eq!(bucket, "segs");
                assert_eq!(key.as_ref(), "prod/druid/ds/a_b/v1/0/index.parquet");
            }
            SegmentLocation::Local(p) => panic!("expected an object, got {}", p.display()),
        }
        let dest = dir.path().join("cache/seg.parquet");
        deep.fetch(&spec, &dest).await.unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), bytes);
        // Another bucket: no client for it, nothing read or deleted.
        let foreign = LoadSpec::S3 {
            bucket: "other".into(),
            key: "prod/druid/ds/a_b/v1/0/index.parquet".into(),
        };
        assert!(matches!(
            deep.fetch(&foreign, &dest).await,
            Err(StorageError::InvalidPath(_))
        ));
        assert!(deep.delete(&foreign).await.is_err());
        let local = LoadSpec::Local {
            path: "/etc/passwd".into(),
        };
        assert!(deep.location(&local).is_err());
        assert!(deep.fetch(&local, &dest).await.is_err());
        deep.delete(&spec).await.unwrap();
        deep.delete(&spec).await.unwrap();
        assert!(deep.fetch(&spec, &dir.path().join("gone")).await.is_err());
        assert!(!dir.path().join("gone.part").exists());
        assert!(deep.push(&src, "../escape").await.is_err());
        assert!(DeepStorage::s3(store, "segs", "a/../b").is_err());
    }

    #[test]
    fn load_specs_serialize_in_druid_shape() {
        let s3 = LoadSpec::S3 {
            bucket: "b".into(),
            key: "k/index.parquet".into(),
        };
        let v = serde_json::to_value(&s3).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "s3", "bucket": "b", "key": "k/index.parquet"})
        );
        assert_eq!(serde_json::from_value::<LoadSpec>(v).unwrap(), s3);
    }

    #[tokio::test]
    async fn push_on_the_same_filesystem_links_and_replaces() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = dir.path().join("a.bin");
        std::fs::write(&src, b"first").unwrap();
        let spec = deep.push(&src, "ds/i/t/0/index.parquet").await.unwrap();
        let LoadSpec::Local { path } = &spec else {
            panic!("local load spec")
        };
        assert_eq!(
            std::fs::metadata(path).unwrap().ino(),
            std::fs::metadata(&src).unwrap().ino(),
            "pushed by hard link"
        );
        // A second push to the same key replaces the object; no temporary name is left.
        let other = dir.path().join("b.bin");
        std::fs::write(&other, b"second").unwrap();
        deep.push(&other, "ds/i/t/0/index.parquet").await.unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(Path::new(path).parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("index.parquet")]);
        // The task's work file can go; deep storage keeps the segment.
        std::fs::remove_file(&src).unwrap();
        std::fs::remove_file(&other).unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"second");
    }

    #[tokio::test]
    async fn push_from_another_filesystem_copies() {
        use std::os::unix::fs::MetadataExt;
        // /dev/shm is a tmpfs on Linux: a hard link from it into a disk directory fails.
        let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        if std::fs::metadata(shm.path()).unwrap().dev()
            == std::fs::metadata(dir.path()).unwrap().dev()
        {
            return;
        }
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = shm.path().join("seg.bin");
        std::fs::write(&src, vec![3u8; 9 * 1024 * 1024 + 1]).unwrap();
        let spec = deep.push(&src, "ds/i/t/0/index.parquet").await.unwrap();
        let LoadSpec::Local { path } = &spec else {
            panic!("local load spec")
        };
        drop(shm);
        assert_eq!(std::fs::read(path).unwrap(), vec![3u8; 9 * 1024 * 1024 + 1]);
    }
}
