//! Input sources: `local` and `inline`.
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

use bytes::Bytes;
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::InputError;

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
}

/// One unit of input: a file or an inline buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum InputEntity {
    /// A local file.
    File(PathBuf),
    /// In-memory data (the `inline` source).
    Inline(Bytes),
}

impl InputSource {
    /// Checks the spec without touching the file system.
    pub fn validate(&self) -> Result<(), InputError> {
        match self {
            InputSource::Local {
                base_dir,
                files,
                filter,
            } => {
                if base_dir.is_none() && files.as_ref().is_none_or(Vec::is_empty) {
                    return Err(InputError::InvalidSpec(
                        "local inputSource needs at least one of [baseDir] and [files]".to_string(),
                    ));
                }
                if filter.as_deref() == Some("") {
                    return Err(InputError::InvalidSpec(
                        "local inputSource [filter] must not be empty".to_string(),
                    ));
                }
                Ok(())
            }
            InputSource::Inline { .. } => Ok(()),
        }
    }

    /// Lists the entities to read, sorted by path for `local`.
    pub fn entities(&self) -> Result<Vec<InputEntity>, InputError> {
        self.validate()?;
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
                Ok(found.into_iter().map(InputEntity::File).collect())
            }
        }
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
    /// A name for messages: the file path, or `inline data`.
    pub fn name(&self) -> String {
        match self {
            InputEntity::File(p) => p.display().to_string(),
            InputEntity::Inline(_) => "inline data".to_string(),
        }
    }

    /// Size in bytes (compressed size for gzip files; 0 if the file cannot be inspected).
    pub fn size_bytes(&self) -> u64 {
        match self {
            InputEntity::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
            InputEntity::Inline(b) => b.len() as u64,
        }
    }

    /// Opens the entity for reading without decompression.
    pub fn open_raw(&self) -> io::Result<Box<dyn Read + Send>> {
        match self {
            InputEntity::File(p) => Ok(Box::new(File::open(p)?)),
            InputEntity::Inline(b) => Ok(Box::new(Cursor::new(b.clone()))),
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
                InputEntity::Inline(_) => "inline".to_string(),
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
