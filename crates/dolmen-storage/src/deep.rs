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

    /// Uploads a local file to `key` (a relative `/`-separated path) and returns its load spec.
    ///
    /// # Errors
    /// On an invalid key or I/O failure; a failed upload is aborted and leaves no object.
    pub async fn push(&self, local_file: &Path, key: &str) -> Result<LoadSpec, StorageError> {
        let path = object_path(key)?;
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
        Ok(LoadSpec::Local {
            path: self.local_root.join(key).display().to_string(),
        })
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
}
