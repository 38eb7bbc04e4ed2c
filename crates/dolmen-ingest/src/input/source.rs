//! Input sources: where a batch task's bytes (or rows) come from.
//!
//! | type | reads | module |
//! |---|---|---|
//! | `local` | files under `baseDir` matching `filter`, and/or `files` | this one |
//! | `inline` | the spec's `data` | this one |
//! | `http` | URLs, fetched with GET (allow-listed hosts only) | [`super::http`] |
//! | `s3` | S3 objects by URI, prefix or bucket/path | [`super::s3`] |
//! | `druid` | the visible segments of an existing datasource (rows, not bytes) | [`super::druid`] |
//! | `combining` | the entities of each of its `delegates`, in order | this one |
//!
//! [`InputSource::validate`] checks a spec without any I/O (at submission); errors name the
//! field by its JSON path, e.g. `spec.ioConfig.inputSource.delegates[1].uris[0]: ...`.
//! [`InputSource::entities_in`] lists the [`InputEntity`]s to read, in order, and
//! [`open_rows`] turns one entity into rows: through the input format for byte entities,
//! directly for segments.
//!
//! Druid's `local` input source lists files under `baseDir` (recursively) whose *file name*
//! matches the `filter` wildcard (`*` and `?`, case-sensitive, like Commons IO's
//! `WildcardFileFilter`), plus any explicit `files`. Dolmen sorts the result by path, removes
//! duplicates and fails when nothing matches. `filter` defaults to `*` (Druid requires it when
//! `baseDir` is set). Symbolic links to files are followed; links to directories are not (to avoid
//! cycles).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::context::InputContext;
use super::druid::{DruidInputSource, SegmentSlice};
use super::format::{InputFormat, RowReader};
use super::http::HttpInputSource;
use super::remote::RemoteObject;
use super::s3::S3InputSource;
use super::{InputError, config::InputSourceConfig};

/// JSON path of the input source in a task spec, used in error messages.
pub const INPUT_SOURCE_PATH: &str = "spec.ioConfig.inputSource";

/// `ioConfig.inputSource`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum InputSource {
    /// Files on the local file system.
    Local {
        /// Directory searched recursively for files matching `filter`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_dir: Option<String>,
        /// Wildcard matched against file names (default `*`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filter: Option<String>,
        /// Explicit file paths.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<Vec<String>>,
    },
    /// Data embedded in the spec.
    Inline {
        /// The raw data.
        data: String,
    },
    /// Files fetched over HTTP(S).
    Http(Box<HttpInputSource>),
    /// Objects in S3 or an S3-compatible store.
    S3(Box<S3InputSource>),
    /// Rows of an existing datasource.
    Druid(Box<DruidInputSource>),
    /// The entities of several input sources, in order.
    Combining {
        /// The input sources to read, in order (not empty).
        delegates: Vec<InputSource>,
    },
}

/// One unit of input: a file, an inline buffer, a remote object, or a segment.
#[derive(Debug, Clone, PartialEq)]
pub enum InputEntity {
    /// A local file.
    File(PathBuf),
    /// In-memory data (the `inline` source).
    Inline(Bytes),
    /// An object read over the network (`http`, `s3`), streamed.
    Remote(Arc<RemoteObject>),
    /// A segment of a datasource (`druid`): yields rows, not bytes (see [`open_rows`]).
    Segment(Arc<SegmentSlice>),
}

impl InputSource {
    /// Checks the spec without any I/O, under the process-wide input source settings; errors
    /// name the field under `spec.ioConfig.inputSource`.
    ///
    /// # Errors
    /// [`InputError::InvalidSpec`] naming the offending field.
    pub fn validate(&self) -> Result<(), InputError> {
        self.validate_at(super::input_source_config(), INPUT_SOURCE_PATH)
    }

    /// Checks the spec under `config`; `path` is the JSON path of this input source.
    ///
    /// # Errors
    /// [`InputError::InvalidSpec`] naming the offending field.
    pub fn validate_at(&self, config: &InputSourceConfig, path: &str) -> Result<(), InputError> {
        match self {
            InputSource::Local {
                base_dir,
                files,
                filter,
            } => {
                if base_dir.is_none() && files.as_ref().is_none_or(Vec::is_empty) {
                    return Err(InputError::InvalidSpec(format!(
                        "{path}: local inputSource needs at least one of [baseDir] and [files]"
                    )));
                }
                if filter.as_deref() == Some("") {
                    return Err(InputError::InvalidSpec(format!(
                        "{path}.filter: local inputSource [filter] must not be empty"
                    )));
                }
                if let Some(dir) = base_dir {
                    config
                        .check_local_path(Path::new(dir))
                        .map_err(|e| InputError::InvalidSpec(format!("{path}.baseDir: {e}")))?;
                }
                for (i, f) in files.iter().flatten().enumerate() {
                    config
                        .check_local_path(Path::new(f))
                        .map_err(|e| InputError::InvalidSpec(format!("{path}.files[{i}]: {e}")))?;
                }
                Ok(())
            }
            InputSource::Inline { .. } => Ok(()),
            InputSource::Http(h) => h.validate(config, path),
            InputSource::S3(s) => s.validate(config, path),
            InputSource::Druid(d) => d.validate(path),
            InputSource::Combining { delegates } => {
                if delegates.is_empty() {
                    return Err(InputError::InvalidSpec(format!(
                        "{path}.delegates: at least one delegate input source is required"
                    )));
                }
                for (i, d) in delegates.iter().enumerate() {
                    d.validate_at(config, &format!("{path}.delegates[{i}]"))?;
                }
                Ok(())
            }
        }
    }

    /// Whether rows of this source need an `inputFormat` (every source but `druid`; a
    /// `combining` source needs one when any delegate does).
    pub fn needs_input_format(&self) -> bool {
        match self {
            InputSource::Druid(_) => false,
            InputSource::Combining { delegates } => {
                delegates.iter().any(InputSource::needs_input_format)
            }
            _ => true,
        }
    }

    /// Lists the entities to read without a task context (process-wide settings, no metadata
    /// store: a `druid` source fails). Tasks use [`InputSource::entities_in`].
    ///
    /// # Errors
    /// See [`InputSource::entities_in`].
    pub fn entities(&self) -> Result<Vec<InputEntity>, InputError> {
        self.entities_in(&InputContext::default())
    }

    /// Lists the entities to read, in order: `local` sorted by path, `http` and `s3` `uris` /
    /// `objects` in spec order (prefix listings sorted by key), `druid` segments in time order,
    /// `combining` delegate after delegate. Runs on a thread that may block (see
    /// `super::context`).
    ///
    /// # Errors
    /// An invalid spec, missing files, or a failed listing.
    pub fn entities_in(&self, ctx: &InputContext) -> Result<Vec<InputEntity>, InputError> {
        self.entities_at(ctx, INPUT_SOURCE_PATH)
    }

    fn entities_at(&self, ctx: &InputContext, path: &str) -> Result<Vec<InputEntity>, InputError> {
        self.validate_at(ctx.config(), path)?;
        match self {
            InputSource::Inline { data } => {
                Ok(vec![InputEntity::Inline(Bytes::from(data.clone()))])
            }
            InputSource::Local {
                base_dir,
                filter,
                files,
            } => {
                let filter = filter.as_deref().unwrap_or("*");
                let mut found: BTreeSet<PathBuf> = BTreeSet::new();
                if let Some(dir) = base_dir {
                    let root = Path::new(dir);
                    match std::fs::metadata(root) {
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            return Err(InputError::BaseDirNotFound(dir.clone()));
                        }
                        Err(e) => {
                            return Err(InputError::Io {
                                path: dir.clone(),
                                source: e,
                            });
                        }
                        Ok(m) if !m.is_dir() => return Err(InputError::NotADirectory(dir.clone())),
                        Ok(_) => {}
                    }
                    let matcher = wildcard_regex(filter)?;
                    walk(root, &matcher, &mut found)?;
                }
                for f in files.iter().flatten() {
                    let p = PathBuf::from(f);
                    if !std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                        return Err(InputError::FileNotFound(f.clone()));
                    }
                    found.insert(p);
                }
                if found.is_empty() {
                    return Err(InputError::NoFilesMatched {
                        base_dir: base_dir.clone().unwrap_or_else(|| "<none>".to_string()),
                        filter: filter.to_string(),
                    });
                }
                // Again with symbolic links resolved: a link under an allowed directory must
                // not lead out of it.
                if ctx.config().local_allowed_base_dirs.is_some() {
                    for f in &found {
                        let real = std::fs::canonicalize(f).map_err(|e| InputError::Io {
                            path: f.display().to_string(),
                            source: e,
                        })?;
                        ctx.config()
                            .check_local_path(&real)
                            .map_err(|e| InputError::InvalidSpec(format!("{path}: {e}")))?;
                    }
                }
                Ok(found.into_iter().map(InputEntity::File).collect())
            }
            InputSource::Http(h) => h.entities(ctx, path),
            InputSource::S3(s) => s.entities(ctx, path),
            InputSource::Druid(d) => d.entities(ctx, path),
            InputSource::Combining { delegates } => {
                let mut out = Vec::new();
                for (i, d) in delegates.iter().enumerate() {
                    out.extend(d.entities_at(ctx, &format!("{path}.delegates[{i}]"))?);
                }
                Ok(out)
            }
        }
    }
}

/// Opens one entity as a stream of rows: segments yield their rows directly; other entities
/// are parsed with `format` (remote objects are streamed, or first copied to a temporary file
/// for formats that need random access, i.e. Parquet), and get their `systemFields`.
///
/// # Errors
/// When the entity cannot be opened or fetched.
pub fn open_rows(entity: &InputEntity, format: &InputFormat) -> Result<RowReader, InputError> {
    match entity {
        InputEntity::Segment(s) => s.rows(),
        InputEntity::Remote(r) if matches!(format, InputFormat::Parquet { .. }) => {
            let name = entity.name();
            let io_err = |e: io::Error| InputError::Io {
                path: name.clone(),
                source: e,
            };
            let tmp = r.fetch_to_temp_file().map_err(io_err)?;
            let rows = format.reader(&InputEntity::File(tmp.path().to_path_buf()))?;
            Ok(r.with_system_fields(Box::new(KeepFile { rows, _file: tmp })))
        }
        InputEntity::Remote(r) => Ok(r.with_system_fields(format.reader(entity)?)),
        InputEntity::File(_) | InputEntity::Inline(_) => format.reader(entity),
    }
}

/// Rows read from a temporary file, deleted when the rows are dropped.
struct KeepFile {
    rows: RowReader,
    _file: tempfile::NamedTempFile,
}

impl Iterator for KeepFile {
    type Item = <RowReader as Iterator>::Item;

    fn next(&mut self) -> Option<Self::Item> {
        self.rows.next()
    }
}

/// Compiles a Druid/Commons-IO wildcard (`*`, `?`) into an anchored regex.
fn wildcard_regex(filter: &str) -> Result<Regex, InputError> {
    let mut re = String::from("(?s)^");
    for c in filter.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            other => re.push_str(&regex::escape(other.encode_utf8(&mut [0; 4]))),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|e| InputError::InvalidSpec(format!("invalid filter [{filter}]: {e}")))
}

fn walk(root: &Path, matcher: &Regex, out: &mut BTreeSet<PathBuf>) -> Result<(), InputError> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| InputError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| InputError::Io {
                path: dir.display().to_string(),
                source: e,
            })?;
            let path = entry.path();
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() {
                stack.push(path);
            } else if (ft.is_file() || (ft.is_symlink() && path.is_file()))
                && matcher.is_match(&entry.file_name().to_string_lossy())
            {
                out.insert(path);
            }
        }
    }
    Ok(())
}

impl InputEntity {
    /// A name for messages: the file path, `inline data`, the object's URI, or the segment id.
    pub fn name(&self) -> String {
        match self {
            InputEntity::File(p) => p.display().to_string(),
            InputEntity::Inline(_) => "inline data".to_string(),
            InputEntity::Remote(r) => r.uri.clone(),
            InputEntity::Segment(s) => format!("segment [{}]", s.segment.identifier),
        }
    }

    /// Size in bytes (compressed size for gzip content; 0 if the file cannot be inspected).
    /// For a remote object: the bytes read so far, or its listed size before it is read. For a
    /// segment: its file size.
    pub fn size_bytes(&self) -> u64 {
        match self {
            InputEntity::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
            InputEntity::Inline(b) => b.len() as u64,
            InputEntity::Remote(r) => r.size_bytes(),
            InputEntity::Segment(s) => s.segment.size,
        }
    }

    /// Opens the entity for reading without decompression (a remote object starts its
    /// request here).
    ///
    /// # Errors
    /// I/O or request failures; a segment has no byte stream ([`io::ErrorKind::Unsupported`]:
    /// read it with [`open_rows`]).
    pub fn open_raw(&self) -> io::Result<Box<dyn Read + Send>> {
        match self {
            InputEntity::File(p) => Ok(Box::new(File::open(p)?)),
            InputEntity::Inline(b) => Ok(Box::new(Cursor::new(b.clone()))),
            InputEntity::Remote(r) => r.open_raw(),
            InputEntity::Segment(s) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("segment [{}] yields rows, not bytes", s.segment.identifier),
            )),
        }
    }

    /// Opens the entity, transparently decompressing gzip content (detected by its magic bytes,
    /// whatever the extension; concatenated gzip members are all read).
    pub fn open(&self) -> io::Result<Box<dyn Read + Send>> {
        let mut reader = BufReader::with_capacity(64 * 1024, self.open_raw()?);
        let head = reader.fill_buf()?;
        if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
            Ok(Box::new(flate2::bufread::MultiGzDecoder::new(reader)))
        } else {
            Ok(Box::new(reader))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    fn local(dir: &Path, filter: Option<&str>) -> InputSource {
        InputSource::Local {
            base_dir: Some(dir.display().to_string()),
            filter: filter.map(str::to_string),
            files: None,
        }
    }

    fn names(entities: &[InputEntity]) -> Vec<String> {
        entities
            .iter()
            .map(|e| match e {
                InputEntity::File(p) => p.file_name().unwrap().to_string_lossy().to_string(),
                other => other.name(),
            })
            .collect()
    }

    #[test]
    fn serde_shape() {
        let s: InputSource = serde_json::from_value(
            json!({"type": "local", "baseDir": "quickstart/tutorial/", "filter": "wikiticker-2015-09-12-sampled.json.gz"}),
        )
        .unwrap();
        assert!(
            matches!(&s, InputSource::Local { base_dir: Some(d), .. } if d == "quickstart/tutorial/")
        );
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"type": "local", "baseDir": "quickstart/tutorial/", "filter": "wikiticker-2015-09-12-sampled.json.gz"})
        );
        let err = serde_json::from_value::<InputSource>(json!({"type": "local", "basedir": "x"}))
            .unwrap_err();
        assert!(err.to_string().contains("basedir"), "{err}");
        let s: InputSource =
            serde_json::from_value(json!({"type": "inline", "data": "a\nb"})).unwrap();
        assert_eq!(
            s.entities().unwrap(),
            vec![InputEntity::Inline(Bytes::from("a\nb"))]
        );
    }

    #[test]
    fn local_listing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for f in ["b.json", "a.json", "c.csv", "sub/d.json", "[x].json"] {
            std::fs::write(dir.path().join(f), "{}\n").unwrap();
        }
        let all = local(dir.path(), None).entities().unwrap();
        assert_eq!(all.len(), 5);
        let json = local(dir.path(), Some("*.json")).entities().unwrap();
        assert_eq!(names(&json), vec!["[x].json", "a.json", "b.json", "d.json"]);
        let q = local(dir.path(), Some("?.json")).entities().unwrap();
        assert_eq!(names(&q), vec!["a.json", "b.json", "d.json"]);
        let lit = local(dir.path(), Some("[x].json")).entities().unwrap();
        assert_eq!(names(&lit), vec!["[x].json"]);
        let err = local(dir.path(), Some("*.parquet"))
            .entities()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("*.parquet") && err.contains(&dir.path().display().to_string()),
            "{err}"
        );
        let err = local(&dir.path().join("nope"), None)
            .entities()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not exist") && err.contains("nope"),
            "{err}"
        );
        let err = local(&dir.path().join("a.json"), None)
            .entities()
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a directory"), "{err}");
        let files = InputSource::Local {
            base_dir: None,
            filter: None,
            files: Some(vec![dir.path().join("c.csv").display().to_string()]),
        };
        assert_eq!(names(&files.entities().unwrap()), vec!["c.csv"]);
        let missing = InputSource::Local {
            base_dir: None,
            filter: None,
            files: Some(vec!["/definitely/not/here".into()]),
        };
        assert!(
            missing
                .entities()
                .unwrap_err()
                .to_string()
                .contains("/definitely/not/here")
        );
        let empty = InputSource::Local {
            base_dir: None,
            filter: None,
            files: None,
        };
        assert!(
            empty
                .entities()
                .unwrap_err()
                .to_string()
                .contains("baseDir")
        );
    }

    #[test]
    fn gzip_detection() {
        let dir = tempfile::tempdir().unwrap();
        let gz_path = dir.path().join("data.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"hello ").unwrap();
        let mut bytes = enc.finish().unwrap();
        // A second gzip member is read too.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"world").unwrap();
        bytes.extend(enc.finish().unwrap());
        std::fs::write(&gz_path, &bytes).unwrap();
        let e = InputEntity::File(gz_path.clone());
        let mut s = String::new();
        e.open().unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello world");
        assert_eq!(e.size_bytes(), bytes.len() as u64);
        assert!(e.name().ends_with("data.json.gz"));
        let plain = InputEntity::Inline(Bytes::from("plain"));
        let mut s = String::new();
        plain.open().unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "plain");
        let empty = InputEntity::Inline(Bytes::new());
        let mut s = String::new();
        empty.open().unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "");
    }
}
