//! Deep storage through `object_store`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dolmen_segment::LoadSpec;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{StorageError, io_err};

/// Size of the parts a segment file is uploaded in, bytes.
const PART_SIZE: usize = 8 * 1024 * 1024;

/// The durable home of segment files.
#[derive(Debug, Clone)]
pub struct DeepStorage {
    store: Arc<dyn ObjectStore>,
    /// Root directory when deep storage is the local filesystem.
    local_root: PathBuf,
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
            local_root: root,
        })
    }

    /// The root directory of local deep storage.
    pub fn local_root(&self) -> &Path {
        &self.local_root
    }

    /// Stores a finished local file at `key` (a relative `/`-separated path) and returns its
    /// load spec. The file must not change afterwards (segment files never do).
    ///
    /// Local deep storage on the same filesystem as `local_file` takes a hard link (linked
    /// under a temporary name, renamed into place, directory synced): no bytes are copied, so
    /// publishing a 10M-row ingestion's 30 segments takes milliseconds instead of a 300 MB copy.
    /// Otherwise (another filesystem, or linking refused) the bytes are uploaded through
    /// `object_store` in parts.
    ///
    /// # Errors
    /// On an invalid key or I/O failure; a failed upload is aborted and leaves no object.
    pub async fn push(&self, local_file: &Path, key: &str) -> Result<LoadSpec, StorageError> {
        let path = object_path(key)?;
        let load_spec = LoadSpec::Local {
            path: self.local_root.join(key).display().to_string(),
        };
        let (src, dest) = (local_file.to_path_buf(), self.local_root.join(key));
        let linked = tokio::task::spawn_blocking(move || link_into_place(&src, &dest))
            .await
            .unwrap_or(false);
        if linked {
            return Ok(load_spec);
        }
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

    /// Copies the object behind `load_spec` to `dest` (written to a temporary name and renamed).
    /// When deep storage is local and `dest` is on the same filesystem, hard-links instead.
    ///
    /// # Errors
    /// When the object is missing or I/O fails.
    pub async fn fetch(&self, load_spec: &LoadSpec, dest: &Path) -> Result<(), StorageError> {
        if let Some(dir) = dest.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(io_err(dir))?;
        }
        let key = self.key_of(load_spec)?;
        let LoadSpec::Local { path } = load_spec;
        let src = PathBuf::from(path);
        let tmp = dest.with_extension("part");
        let _ = tokio::fs::remove_file(&tmp).await;
        if tokio::fs::hard_link(&src, &tmp).await.is_err() {
            let mut stream = self.store.get(&key).await?.into_stream();
            let mut out = tokio::fs::File::create(&tmp).await.map_err(io_err(&tmp))?;
            while let Some(chunk) = stream.next().await {
                out.write_all(&chunk?).await.map_err(io_err(&tmp))?;
            }
            out.sync_all().await.map_err(io_err(&tmp))?;
        }
        tokio::fs::rename(&tmp, dest).await.map_err(io_err(dest))?;
        Ok(())
    }

    /// Deletes the object behind `load_spec` (missing objects are not an error).
    ///
    /// # Errors
    /// On I/O failure.
    pub async fn delete(&self, load_spec: &LoadSpec) -> Result<(), StorageError> {
        let key = self.key_of(load_spec)?;
        match self.store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn key_of(&self, load_spec: &LoadSpec) -> Result<ObjectPath, StorageError> {
        let LoadSpec::Local { path } = load_spec;
        let rel = Path::new(path)
            .strip_prefix(&self.local_root)
            .map_err(|_| StorageError::InvalidPath(path.clone()))?;
        object_path(&rel.to_string_lossy())
    }
}

/// Hard-links `src` to `dest` atomically: link to a temporary name beside `dest`, rename over
/// any earlier object, then sync the directory so the new entry survives a crash. `false` when
/// linking is not possible (other filesystem, no permission, ...): the caller copies instead,
/// and no temporary name is left behind.
fn link_into_place(src: &Path, dest: &Path) -> bool {
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
    std::fs::File::open(dir).and_then(|d| d.sync_all()).is_ok()
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
    async fn push_on_the_same_filesystem_links_and_replaces() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let deep = DeepStorage::local(&dir.path().join("deep")).unwrap();
        let src = dir.path().join("a.bin");
        std::fs::write(&src, b"first").unwrap();
        let spec = deep.push(&src, "ds/i/t/0/index.parquet").await.unwrap();
        let LoadSpec::Local { path } = &spec;
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
        let LoadSpec::Local { path } = &spec;
        drop(shm);
        assert_eq!(std::fs::read(path).unwrap(), vec![3u8; 9 * 1024 * 1024 + 1]);
    }
}
