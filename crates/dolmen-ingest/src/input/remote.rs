//! Objects read over the network (`http` URIs, S3 objects): the entity type, the shared
//! password provider shape, `systemFields`, and the blocking readers that stream object bodies.
//!
//! Bodies are streamed: a reader holds one network chunk at a time, never a whole object.
//! Formats that need random access (Parquet) get the object copied to a temporary file in the
//! task's work directory first, streamed to disk chunk by chunk.

use std::fmt;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::context::IoRuntime;
use super::http::HttpFetcher;
use super::s3::S3Client;
use super::{InputError, InputRow};

/// A secret given as a plain string or as Druid's default password provider
/// `{"type": "default", "password": "..."}` (Druid docs, "Password providers"). Other provider
/// types (`environment`, ...) are rejected: they would let a task submitter read the server's
/// environment.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PasswordProvider {
    /// The secret itself.
    Plain(String),
    /// A provider object.
    Provider {
        /// Provider type; only `default` is supported.
        #[serde(rename = "type")]
        provider_type: String,
        /// The secret (for `default`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        password: Option<String>,
        /// The environment variable (for `environment`; rejected).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        variable: Option<String>,
    },
}

impl fmt::Debug for PasswordProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordProvider(<redacted>)")
    }
}

impl PasswordProvider {
    /// The secret.
    ///
    /// # Errors
    /// A message (without the secret) when the provider type is not `default` or has no
    /// `password`.
    pub fn secret(&self) -> Result<&str, String> {
        match self {
            PasswordProvider::Plain(s) => Ok(s),
            PasswordProvider::Provider {
                provider_type,
                password,
                ..
            } => {
                if provider_type != "default" {
                    return Err(format!(
                        "password provider type [{provider_type}] is not supported; use a string or {{\"type\": \"default\", \"password\": ...}}"
                    ));
                }
                password
                    .as_deref()
                    .ok_or_else(|| "the default password provider needs [password]".to_string())
            }
        }
    }
}

/// Checks a `systemFields` list against the names a source offers; returns an error message
/// naming the offending entry's path.
pub(super) fn check_system_fields(
    fields: Option<&[String]>,
    allowed: &[&str],
    path: &str,
) -> Result<(), InputError> {
    for (i, f) in fields.unwrap_or_default().iter().enumerate() {
        if !allowed.contains(&f.as_str()) {
            return Err(InputError::InvalidSpec(format!(
                "{path}.systemFields[{i}]: unknown system field [{f}]; expected one of {allowed:?}"
            )));
        }
    }
    Ok(())
}

/// How to fetch a remote object.
#[derive(Debug)]
pub(super) enum Fetch {
    /// GET over HTTP(S).
    Http {
        /// The shared client and request settings.
        fetcher: Arc<HttpFetcher>,
        /// The (allow-listed) URL.
        url: reqwest::Url,
    },
    /// An S3 object.
    S3 {
        /// The bucket's client.
        client: Arc<S3Client>,
        /// The object key.
        key: object_store::path::Path,
    },
}

/// One object of an `http` or `s3` input source.
#[derive(Debug)]
pub struct RemoteObject {
    /// The URI, for messages and `__file_uri`.
    pub uri: String,
    /// Size from a listing, when known.
    pub(super) listed_size: Option<u64>,
    /// Bytes read so far (compressed bytes for gzip objects).
    read_bytes: Arc<AtomicU64>,
    /// `systemFields` values added to every row.
    pub(super) system_fields: Vec<(String, Value)>,
    pub(super) fetch: Fetch,
    /// Where a copy is kept when a format needs random access (`None`: system temp dir).
    scratch_dir: Option<PathBuf>,
}

impl PartialEq for RemoteObject {
    fn eq(&self, other: &Self) -> bool {
        self.uri == other.uri && self.system_fields == other.system_fields
    }
}

impl RemoteObject {
    pub(super) fn new(
        uri: String,
        listed_size: Option<u64>,
        system_fields: Vec<(String, Value)>,
        fetch: Fetch,
        scratch_dir: Option<PathBuf>,
    ) -> RemoteObject {
        RemoteObject {
            uri,
            listed_size,
            read_bytes: Arc::new(AtomicU64::new(0)),
            system_fields,
            fetch,
            scratch_dir,
        }
    }

    /// Copies the whole object into a new temporary file (streamed, chunk by chunk), for
    /// formats that need random access.
    ///
    /// # Errors
    /// When the object cannot be read or the file written.
    pub(super) fn fetch_to_temp_file(&self) -> io::Result<tempfile::NamedTempFile> {
        let mut tmp = match &self.scratch_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                tempfile::NamedTempFile::new_in(dir)?
            }
            None => tempfile::NamedTempFile::new()?,
        };
        io::copy(&mut self.open_raw()?, tmp.as_file_mut())?;
        Ok(tmp)
    }

    /// Bytes read so far, or the listed size before the object was read.
    pub fn size_bytes(&self) -> u64 {
        match self.read_bytes.load(Ordering::Relaxed) {
            0 => self.listed_size.unwrap_or(0),
            n => n,
        }
    }

    /// Starts fetching the object and returns a reader streaming its raw bytes.
    ///
    /// # Errors
    /// When the request fails or the server answers with a non-success status.
    pub fn open_raw(&self) -> io::Result<Box<dyn Read + Send>> {
        self.read_bytes.store(0, Ordering::Relaxed);
        let inner: Box<dyn Read + Send> = match &self.fetch {
            Fetch::Http { fetcher, url } => fetcher.open(url)?,
            Fetch::S3 { client, key } => client.open(key)?,
        };
        Ok(Box::new(CountingRead {
            inner,
            count: Arc::clone(&self.read_bytes),
        }))
    }

    /// Adds the configured `systemFields` to each row of `rows`.
    pub(super) fn with_system_fields(&self, rows: super::RowReader) -> super::RowReader {
        if self.system_fields.is_empty() {
            return rows;
        }
        let fields = self.system_fields.clone();
        Box::new(rows.map(move |r| {
            r.map(|mut row: InputRow| {
                for (k, v) in &fields {
                    row.insert(k.clone(), v.clone());
                }
                row
            })
        }))
    }
}

/// Counts the bytes passing through a reader.
struct CountingRead {
    inner: Box<dyn Read + Send>,
    count: Arc<AtomicU64>,
}

impl Read for CountingRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A blocking [`Read`] over an async byte stream, driven with [`IoRuntime::block_on`] on the
/// reading thread. Holds at most one chunk.
pub(super) struct StreamRead {
    runtime: IoRuntime,
    stream: BoxStream<'static, Result<Bytes, object_store::Error>>,
    chunk: Bytes,
    name: String,
}

impl StreamRead {
    pub(super) fn new(
        runtime: IoRuntime,
        stream: BoxStream<'static, Result<Bytes, object_store::Error>>,
        name: String,
    ) -> StreamRead {
        StreamRead {
            runtime,
            stream,
            chunk: Bytes::new(),
            name,
        }
    }
}

impl Read for StreamRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.chunk.is_empty() {
            match self.runtime.block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Ok(b)) => self.chunk = b,
                Some(Err(e)) => {
                    return Err(io::Error::other(format!(
                        "cannot read [{}]: {e}",
                        self.name
                    )));
                }
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn password_providers() {
        let p: PasswordProvider = serde_json::from_value(json!("s3cr3t")).unwrap();
        assert_eq!(p.secret().unwrap(), "s3cr3t");
        assert_eq!(format!("{p:?}"), "PasswordProvider(<redacted>)");
        let p: PasswordProvider =
            serde_json::from_value(json!({"type": "default", "password": "pw"})).unwrap();
        assert_eq!(p.secret().unwrap(), "pw");
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"type": "default", "password": "pw"})
        );
        let p: PasswordProvider =
            serde_json::from_value(json!({"type": "environment", "variable": "HOME"})).unwrap();
        let e = p.secret().unwrap_err();
        assert!(e.contains("environment") && !e.contains("HOME"), "{e}");
        let p: PasswordProvider = serde_json::from_value(json!({"type": "default"})).unwrap();
        assert!(p.secret().unwrap_err().contains("password"));
    }

    #[test]
    fn stream_read_bridges_chunks() {
        let rt = IoRuntime::dedicated().unwrap();
        let chunks: Vec<Result<Bytes, object_store::Error>> = vec![
            Ok(Bytes::from_static(b"hello ")),
            Ok(Bytes::new()),
            Ok(Bytes::from_static(b"world")),
        ];
        let mut r = StreamRead::new(
            rt.clone(),
            futures::stream::iter(chunks).boxed(),
            "x".into(),
        );
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello world");
        let failing: Vec<Result<Bytes, object_store::Error>> = vec![
            Ok(Bytes::from_static(b"a")),
            Err(object_store::Error::NotImplemented {
                operation: "get".into(),
                implementer: "test".into(),
            }),
        ];
        let mut r = StreamRead::new(rt, futures::stream::iter(failing).boxed(), "obj".into());
        let mut s = String::new();
        let e = r.read_to_string(&mut s).unwrap_err();
        assert!(e.to_string().contains("[obj]"), "{e}");
    }
}
