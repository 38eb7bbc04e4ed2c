//! The `s3` input source: objects in Amazon S3 or an S3-compatible store, read through
//! `object_store` (Druid docs, "Input sources" → "S3 input source").
//!
//! ```json
//! {"type": "s3", "prefixes": ["s3://bucket/logs/2024-"], "objectGlob": "**.json.gz",
//!  "properties": {"accessKeyId": "K", "secretAccessKey": {"type": "default", "password": "S"}},
//!  "endpointConfig": {"url": "http://127.0.0.1:9000", "signingRegion": "us-east-1"}}
//! ```
//!
//! Exactly one of `uris` (`s3://bucket/key`), `prefixes` (`s3://bucket/prefix`: every object
//! whose key starts with `prefix`, listed page by page, empty objects skipped, sorted by key) and
//! `objects` (`{"bucket", "path"}`) names the objects. `objectGlob` filters them by key with
//! Java's glob syntax (`*` stays within one `/`-separated part, `**` crosses them, `?`, `[...]`,
//! `{a,b}`), as Druid does.
//!
//! Connection settings, first found wins: the spec's `endpointConfig` / `properties`, the
//! server's `service.s3.*` properties, then the `AWS_*` environment variables (`AWS_ENDPOINT`,
//! `AWS_REGION`, `AWS_ACCESS_KEY_ID`, ...). Requests use path-style addressing, and plain `http`
//! endpoints are allowed. A spec-supplied `endpointConfig.url` must pass the same host
//! allow-list as the `http` input source (`service.ingestion.http.allowedHosts`): it names a
//! server this one will send requests to. `clientConfig.protocol` gives the scheme of an
//! endpoint written without one; the other `clientConfig` fields are accepted and ignored.
//! `assumeRoleArn` and `proxyConfig` are not supported and rejected.
//!
//! Objects are streamed: the async `object_store` stream is bridged to a blocking reader on
//! the reading thread (see `super::context`).

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, RetryConfig};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::InputSourceConfig;
use super::context::{InputContext, IoRuntime};
use super::remote::{Fetch, PasswordProvider, RemoteObject, StreamRead, check_system_fields};
use super::{InputEntity, InputError};

/// `systemFields` the `s3` source offers.
const SYSTEM_FIELDS: &[&str] = &["__file_uri", "__file_bucket", "__file_path"];

/// `{"type": "s3", ...}` (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct S3InputSource {
    /// Objects as `s3://bucket/key` URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uris: Option<Vec<String>>,
    /// Key prefixes as `s3://bucket/prefix` URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefixes: Option<Vec<String>>,
    /// Objects as `{"bucket", "path"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<CloudObject>>,
    /// Java glob matched against each object key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_glob: Option<String>,
    /// Fields added to every row: `__file_uri`, `__file_bucket`, `__file_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_fields: Option<Vec<String>>,
    /// Credentials overriding the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<S3Properties>,
    /// Endpoint overriding the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_config: Option<S3EndpointConfig>,
    /// Client settings for the endpoint (only `protocol` has an effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_config: Option<S3ClientConfig>,
    /// Proxy settings (not supported; rejected when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_config: Option<Value>,
}

/// An element of `objects`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloudObject {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub path: String,
}

/// `properties`: credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct S3Properties {
    /// Access key id (with `secretAccessKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<PasswordProvider>,
    /// Secret key (with `accessKeyId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<PasswordProvider>,
    /// Role to assume (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assume_role_arn: Option<String>,
    /// External id for `assumeRoleArn` (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assume_role_external_id: Option<String>,
}

/// `endpointConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct S3EndpointConfig {
    /// Endpoint URL, with or without scheme (then `clientConfig.protocol`, default `https`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Region used to sign requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_region: Option<String>,
}

/// `clientConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct S3ClientConfig {
    /// `http` or `https`: the scheme of an endpoint URL given without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_chunked_encoding: Option<bool>,
    /// Accepted; requests always use path-style addressing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_path_style_access: Option<bool>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_global_bucket_access_enabled: Option<bool>,
}

/// A parsed `s3://bucket/key` location.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Location {
    bucket: String,
    key: String,
}

impl Location {
    fn parse(uri: &str) -> Result<Location, String> {
        let rest = uri
            .strip_prefix("s3://")
            .ok_or_else(|| format!("[{uri}] is not an s3:// URI"))?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("[{uri}] has no bucket"));
        }
        Ok(Location {
            bucket: bucket.to_string(),
            key: key.to_string(),
        })
    }
}

/// Parses an object key into an `object_store` path without re-encoding it.
fn object_path(key: &str) -> Result<ObjectPath, String> {
    let path = ObjectPath::parse(key).map_err(|e| format!("invalid object key [{key}]: {e}"))?;
    if path.as_ref() != key {
        return Err(format!(
            "invalid object key [{key}]: keys with a leading or trailing '/' are not supported"
        ));
    }
    Ok(path)
}

impl S3InputSource {
    /// Checks the spec; errors name the field under `path`.
    ///
    /// # Errors
    /// [`InputError::InvalidSpec`] naming the field, e.g. `spec.ioConfig.inputSource.uris[0]:
    /// [http://x] is not an s3:// URI`.
    pub fn validate(&self, config: &InputSourceConfig, path: &str) -> Result<(), InputError> {
        let invalid =
            |field: String, msg: String| InputError::InvalidSpec(format!("{path}.{field}: {msg}"));
        let given = [
            self.uris.as_ref().is_some_and(|v| !v.is_empty()),
            self.prefixes.as_ref().is_some_and(|v| !v.is_empty()),
            self.objects.as_ref().is_some_and(|v| !v.is_empty()),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(InputError::InvalidSpec(format!(
                "{path}: exactly one of [uris], [prefixes] and [objects] must be given and not empty"
            )));
        }
        for (i, u) in self.uris.iter().flatten().enumerate() {
            let loc = Location::parse(u).map_err(|e| invalid(format!("uris[{i}]"), e))?;
            if loc.key.is_empty() {
                return Err(invalid(
                    format!("uris[{i}]"),
                    format!("[{u}] has no object key"),
                ));
            }
            object_path(&loc.key).map_err(|e| invalid(format!("uris[{i}]"), e))?;
        }
        for (i, p) in self.prefixes.iter().flatten().enumerate() {
            Location::parse(p).map_err(|e| invalid(format!("prefixes[{i}]"), e))?;
        }
        for (i, o) in self.objects.iter().flatten().enumerate() {
            if o.bucket.is_empty() || o.bucket.contains('/') {
                return Err(invalid(
                    format!("objects[{i}].bucket"),
                    format!("[{}] is not a bucket name", o.bucket),
                ));
            }
            if o.path.is_empty() {
                return Err(invalid(
                    format!("objects[{i}].path"),
                    "must not be empty".into(),
                ));
            }
            object_path(&o.path).map_err(|e| invalid(format!("objects[{i}].path"), e))?;
        }
        if let Some(g) = &self.object_glob {
            java_glob(g).map_err(|e| invalid("objectGlob".into(), e))?;
        }
        if let Some(p) = &self.properties {
            if p.assume_role_arn.is_some() || p.assume_role_external_id.is_some() {
                return Err(invalid(
                    "properties.assumeRoleArn".into(),
                    "assuming a role is not supported".into(),
                ));
            }
            match (&p.access_key_id, &p.secret_access_key) {
                (Some(a), Some(s)) => {
                    a.secret()
                        .map_err(|e| invalid("properties.accessKeyId".into(), e))?;
                    s.secret()
                        .map_err(|e| invalid("properties.secretAccessKey".into(), e))?;
                }
                (None, None) => {}
                (Some(_), None) => {
                    return Err(invalid(
                        "properties.secretAccessKey".into(),
                        "required when accessKeyId is given".into(),
                    ));
                }
                (None, Some(_)) => {
                    return Err(invalid(
                        "properties.accessKeyId".into(),
                        "required when secretAccessKey is given".into(),
                    ));
                }
            }
        }
        if let Some(proto) = self
            .client_config
            .as_ref()
            .and_then(|c| c.protocol.as_deref())
            && !matches!(proto.to_ascii_lowercase().as_str(), "http" | "https")
        {
            return Err(invalid(
                "clientConfig.protocol".into(),
                format!("[{proto}] must be http or https"),
            ));
        }
        if let Some(url) = self.spec_endpoint() {
            config
                .check_url(&url)
                .map_err(|e| invalid("endpointConfig.url".into(), e))?;
        }
        if self.proxy_config.is_some() {
            return Err(invalid(
                "proxyConfig".into(),
                "proxies are not supported".into(),
            ));
        }
        check_system_fields(self.system_fields.as_deref(), SYSTEM_FIELDS, path)
    }

    /// The spec's endpoint URL with its scheme, if any.
    fn spec_endpoint(&self) -> Option<String> {
        let url = self.endpoint_config.as_ref()?.url.as_deref()?.trim();
        if url.contains("://") {
            return Some(url.to_string());
        }
        let proto = self
            .client_config
            .as_ref()
            .and_then(|c| c.protocol.as_deref())
            .unwrap_or("https")
            .to_ascii_lowercase();
        Some(format!("{proto}://{url}"))
    }

    /// Lists the objects (paging through `prefixes`), filtered by `objectGlob`.
    ///
    /// # Errors
    /// When the spec is invalid, a client cannot be built, or listing fails.
    pub(super) fn entities(
        &self,
        ctx: &InputContext,
        path: &str,
    ) -> Result<Vec<InputEntity>, InputError> {
        let config = ctx.config();
        self.validate(config, path)?;
        let glob = match &self.object_glob {
            Some(g) => Some(
                java_glob(g)
                    .map_err(|e| InputError::InvalidSpec(format!("{path}.objectGlob: {e}")))?,
            ),
            None => None,
        };
        let clients = S3Clients {
            settings: self.settings(config),
            runtime: ctx.io_runtime()?,
            by_bucket: Mutex::new(HashMap::new()),
        };
        // (location, listed size)
        let mut found: Vec<(Location, Option<u64>)> = Vec::new();
        for u in self.uris.iter().flatten() {
            let loc = Location::parse(u).map_err(InputError::InvalidSpec)?;
            found.push((loc, None));
        }
        for o in self.objects.iter().flatten() {
            found.push((
                Location {
                    bucket: o.bucket.clone(),
                    key: o.path.clone(),
                },
                None,
            ));
        }
        for p in self.prefixes.iter().flatten() {
            let loc = Location::parse(p).map_err(InputError::InvalidSpec)?;
            let client = clients.get(&loc.bucket)?;
            let mut listed = client.list_prefix(&loc.key, p, None)?;
            listed.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, size) in listed {
                // Druid skips empty objects found under prefixes.
                if size > 0 {
                    found.push((
                        Location {
                            bucket: loc.bucket.clone(),
                            key,
                        },
                        Some(size),
                    ));
                }
            }
        }
        let wanted = self.system_fields.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(found.len());
        for (loc, size) in found {
            if glob.as_ref().is_some_and(|g| !g.is_match(&loc.key)) {
                continue;
            }
            let uri = format!("s3://{}/{}", loc.bucket, loc.key);
            let fields = wanted
                .iter()
                .map(|f| {
                    let v = match f.as_str() {
                        "__file_uri" => uri.clone(),
                        "__file_bucket" => loc.bucket.clone(),
                        _ => loc.key.clone(),
                    };
                    (f.clone(), Value::String(v))
                })
                .collect();
            let key = object_path(&loc.key).map_err(|e| InputError::Io {
                path: uri.clone(),
                source: io::Error::other(e),
            })?;
            out.push(InputEntity::Remote(Arc::new(RemoteObject::new(
                uri,
                size,
                fields,
                Fetch::S3 {
                    client: clients.get(&loc.bucket)?,
                    key,
                },
                ctx.scratch_dir.clone(),
            ))));
        }
        if out.is_empty() {
            return Err(InputError::NoFilesMatched {
                base_dir: path.to_string(),
                filter: self.object_glob.clone().unwrap_or_else(|| "*".to_string()),
            });
        }
        Ok(out)
    }

    fn settings(&self, config: &InputSourceConfig) -> S3Settings {
        let spec_keys = self.properties.as_ref().and_then(|p| {
            let a = p.access_key_id.as_ref()?.secret().ok()?;
            let s = p.secret_access_key.as_ref()?.secret().ok()?;
            Some((a.to_string(), s.to_string()))
        });
        let server_keys = match (&config.s3.access_key, &config.s3.secret_key) {
            (Some(a), Some(s)) => Some((a.clone(), s.clone())),
            _ => None,
        };
        S3Settings {
            endpoint: self.spec_endpoint().or_else(|| config.s3.endpoint.clone()),
            region: self
                .endpoint_config
                .as_ref()
                .and_then(|e| e.signing_region.clone())
                .or_else(|| config.s3.region.clone()),
            keys: spec_keys.or(server_keys),
        }
    }
}

/// Effective connection settings; `None` leaves the `AWS_*` environment in charge.
#[derive(Debug, Clone)]
struct S3Settings {
    endpoint: Option<String>,
    region: Option<String>,
    keys: Option<(String, String)>,
}

/// One client per bucket (an `AmazonS3` store is bound to a bucket).
struct S3Clients {
    settings: S3Settings,
    runtime: IoRuntime,
    by_bucket: Mutex<HashMap<String, Arc<S3Client>>>,
}

impl S3Clients {
    fn get(&self, bucket: &str) -> Result<Arc<S3Client>, InputError> {
        let mut map = self.by_bucket.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(bucket) {
            return Ok(Arc::clone(c));
        }
        let s = &self.settings;
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(false)
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(60),
                ..RetryConfig::default()
            });
        // `service.client.https.trustStore*`: extra roots, e.g. a private CA.
        let mut options = object_store::ClientOptions::new();
        for der in &super::input_source_config().client_trusted_certificates {
            let cert = object_store::Certificate::from_der(der).map_err(|e| InputError::Io {
                path: format!("s3://{bucket}"),
                source: io::Error::other(format!("service.client.https.trustStorePath: {e}")),
            })?;
            options = options.with_root_certificate(cert);
        }
        // Client options first (`with_allow_http` below sets one of them), and only with
        // a trust store: they replace those `from_env` read.
        if !super::input_source_config()
            .client_trusted_certificates
            .is_empty()
        {
            b = b.with_client_options(options);
        }
        if let Some(e) = &s.endpoint {
            b = b.with_endpoint(e).with_allow_http(true);
        }
        if let Some(r) = &s.region {
            b = b.with_region(r);
        }
        if let Some((a, k)) = &s.keys {
            b = b.with_access_key_id(a).with_secret_access_key(k);
        }
        let store = b.build().map_err(|e| InputError::Io {
            path: format!("s3://{bucket}"),
            source: io::Error::other(format!("cannot create S3 client: {e}")),
        })?;
        let client = Arc::new(S3Client {
            bucket: bucket.to_string(),
            store: Arc::new(store),
            runtime: self.runtime.clone(),
        });
        map.insert(bucket.to_string(), Arc::clone(&client));
        Ok(client)
    }
}

/// An S3 client for one bucket and the runtime that drives it.
pub(super) struct S3Client {
    bucket: String,
    store: Arc<AmazonS3>,
    runtime: IoRuntime,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Client")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl S3Client {
    /// All keys starting with `prefix` (a plain string prefix, as S3 means it) and their sizes,
    /// one `ListObjectsV2` page at a time.
    /// `page_size` is the `max-keys` of each request (`None`: the server's default, 1000 on S3).
    fn list_prefix(
        &self,
        prefix: &str,
        uri: &str,
        page_size: Option<usize>,
    ) -> Result<Vec<(String, u64)>, InputError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let opts = PaginatedListOptions {
                page_token: token.take(),
                max_keys: page_size,
                ..PaginatedListOptions::default()
            };
            let page = self
                .runtime
                .block_on(
                    self.store
                        .list_paginated((!prefix.is_empty()).then_some(prefix), opts),
                )
                .map_err(|e| InputError::Io {
                    path: uri.to_string(),
                    source: io::Error::other(format!("cannot list objects: {e}")),
                })?;
            out.extend(
                page.result
                    .objects
                    .into_iter()
                    .map(|m| (m.location.to_string(), m.size)),
            );
            match page.page_token {
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }

    /// Starts a GET and streams the object body.
    pub(super) fn open(&self, key: &ObjectPath) -> io::Result<Box<dyn Read + Send>> {
        let name = format!("s3://{}/{key}", self.bucket);
        let result = self
            .runtime
            .block_on(self.store.get(key))
            .map_err(|e| io::Error::other(format!("cannot read [{name}]: {e}")))?;
        Ok(Box::new(StreamRead::new(
            self.runtime.clone(),
            result.into_stream(),
            name,
        )))
    }
}

/// Compiles a Java `PathMatcher` glob (`glob:` syntax) into an anchored regex: `*` and `?`
/// do not cross `/`, `**` does, `[...]` classes (`!` negates), `{a,b}` alternatives (not
/// nested), `\` escapes.
fn java_glob(glob: &str) -> Result<Regex, String> {
    let mut re = String::from("(?s)^");
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    let mut in_group = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                i += 1;
                let Some(n) = chars.get(i) else {
                    return Err(format!("invalid glob [{glob}]: trailing '\\'"));
                };
                re.push_str(&regex::escape(&n.to_string()));
            }
            '*' if chars.get(i + 1) == Some(&'*') => {
                re.push_str(".*");
                i += 1;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' if !in_group => {
                in_group = true;
                re.push_str("(?:");
            }
            '{' => return Err(format!("invalid glob [{glob}]: nested '{{'")),
            ',' if in_group => re.push('|'),
            '}' if in_group => {
                in_group = false;
                re.push(')');
            }
            '[' => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|c| *c == ']')
                    .map(|p| p + i + 1)
                    .ok_or_else(|| format!("invalid glob [{glob}]: unclosed '['"))?;
                let mut class = String::from("[");
                let mut body = &chars[i + 1..close];
                let negated = body.first() == Some(&'!');
                if negated {
                    // A negated class must still not match the separator.
                    class.push_str("^/");
                    body = &body[1..];
                }
                if body.is_empty() {
                    return Err(format!("invalid glob [{glob}]: empty '[]'"));
                }
                for ch in body {
                    match ch {
                        '-' => class.push('-'),
                        '/' => return Err(format!("invalid glob [{glob}]: '/' in '[...]'")),
                        other => class.push_str(&regex::escape(&other.to_string())),
                    }
                }
                class.push(']');
                re.push_str(&class);
                i = close;
            }
            other => re.push_str(&regex::escape(&other.to_string())),
        }
        i += 1;
    }
    if in_group {
        return Err(format!("invalid glob [{glob}]: unclosed '{{'"));
    }
    re.push('$');
    Regex::new(&re).map_err(|e| format!("invalid glob [{glob}]: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputSource;
    use dolmen_common::config::Properties;
    use serde_json::json;

    fn s3(v: Value) -> S3InputSource {
        match serde_json::from_value::<InputSource>(v).unwrap() {
            InputSource::S3(s) => *s,
            other => panic!("not s3: {other:?}"),
        }
    }

    #[test]
    fn serde_shape() {
        let v = json!({
            "type": "s3",
            "uris": ["s3://foo/bar/file.json", "s3://bar/foo/file2.json"],
            "objectGlob": "**.json",
            "endpointConfig": {"url": "s3-store.aws.com", "signingRegion": "us-west-2"},
            "clientConfig": {"protocol": "http", "disableChunkedEncoding": true, "enablePathStyleAccess": true, "forceGlobalBucketAccessEnabled": false},
            "properties": {"accessKeyId": "KLJ78979SDFdS2", "secretAccessKey": {"type": "default", "password": "x"}}
        });
        let s: InputSource = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        let e = serde_json::from_value::<InputSource>(
            json!({"type": "s3", "uris": ["s3://a/b"], "objectGlobs": "x"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("objectGlobs"), "{e}");
        let e = serde_json::from_value::<InputSource>(
            json!({"type": "s3", "objects": [{"bucket": "a", "key": "b"}]}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("key"), "{e}");
    }

    #[test]
    fn validation_names_paths() {
        let p = "spec.ioConfig.inputSource";
        let cfg = InputSourceConfig::from_properties(&Properties::parse(
            "service.ingestion.http.allowedHosts=127.0.0.1:9000\n",
        ))
        .unwrap();
        let cases = [
            (json!({"type": "s3"}), "exactly one of"),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "prefixes": ["s3://a/"]}),
                "exactly one of",
            ),
            (json!({"type": "s3", "uris": []}), "exactly one of"),
            (
                json!({"type": "s3", "uris": ["s3://a/b", "http://a/b"]}),
                "uris[1]: [http://a/b] is not an s3:// URI",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a"]}),
                "uris[0]: [s3://a] has no object key",
            ),
            (
                json!({"type": "s3", "uris": ["s3:///k"]}),
                "uris[0]: [s3:///k] has no bucket",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/x//y"]}),
                "uris[0]: invalid object key",
            ),
            (
                json!({"type": "s3", "prefixes": ["gs://a/"]}),
                "prefixes[0]",
            ),
            (
                json!({"type": "s3", "objects": [{"bucket": "", "path": "k"}]}),
                "objects[0].bucket",
            ),
            (
                json!({"type": "s3", "objects": [{"bucket": "b", "path": ""}]}),
                "objects[0].path",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "objectGlob": "[a"}),
                "objectGlob: invalid glob",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "properties": {"accessKeyId": "a"}}),
                "properties.secretAccessKey: required",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "properties": {"secretAccessKey": "a"}}),
                "properties.accessKeyId: required",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "properties": {"accessKeyId": {"type": "environment", "variable": "X"}, "secretAccessKey": "s"}}),
                "properties.accessKeyId: password provider type [environment]",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "properties": {"assumeRoleArn": "arn:aws:iam::1:role/r"}}),
                "properties.assumeRoleArn",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "endpointConfig": {"url": "http://169.254.169.254"}}),
                "endpointConfig.url: host [169.254.169.254:80]",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "endpointConfig": {"url": "127.0.0.1:9001"}}),
                "endpointConfig.url: host [127.0.0.1:9001]",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/dir/"]}),
                "uris[0]: invalid object key [dir/]",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "clientConfig": {"protocol": "ftp"}}),
                "clientConfig.protocol",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "proxyConfig": {"host": "p", "port": 1}}),
                "proxyConfig",
            ),
            (
                json!({"type": "s3", "uris": ["s3://a/b"], "systemFields": ["__file_name"]}),
                "systemFields[0]",
            ),
        ];
        for (spec, want) in cases {
            let e = s3(spec.clone()).validate(&cfg, p).unwrap_err().to_string();
            assert!(e.contains(p) && e.contains(want), "{spec}: {e}");
        }
        // An endpoint without scheme takes clientConfig.protocol.
        let ok = s3(
            json!({"type": "s3", "uris": ["s3://a/b"], "endpointConfig": {"url": "127.0.0.1:9000"}, "clientConfig": {"protocol": "http"}, "systemFields": ["__file_bucket"]}),
        );
        ok.validate(&cfg, p).unwrap();
        assert_eq!(ok.spec_endpoint().as_deref(), Some("http://127.0.0.1:9000"));
        s3(json!({"type": "s3", "objects": [{"bucket": "b", "path": "a/b c.json"}]}))
            .validate(&cfg, p)
            .unwrap();
    }

    #[test]
    fn settings_precedence() {
        let cfg = InputSourceConfig::from_properties(&Properties::parse(
            "service.s3.endpoint=http://server:1\nservice.s3.region=r1\nservice.s3.accessKey=A\nservice.s3.secretKey=S\n",
        ))
        .unwrap();
        let plain = s3(json!({"type": "s3", "uris": ["s3://a/b"]}));
        let s = plain.settings(&cfg);
        assert_eq!(s.endpoint.as_deref(), Some("http://server:1"));
        assert_eq!(s.region.as_deref(), Some("r1"));
        assert_eq!(s.keys, Some(("A".to_string(), "S".to_string())));
        let own = s3(
            json!({"type": "s3", "uris": ["s3://a/b"], "endpointConfig": {"url": "http://spec:2", "signingRegion": "r2"}, "properties": {"accessKeyId": "a", "secretAccessKey": "s"}}),
        );
        let s = own.settings(&cfg);
        assert_eq!(s.endpoint.as_deref(), Some("http://spec:2"));
        assert_eq!(s.region.as_deref(), Some("r2"));
        assert_eq!(s.keys, Some(("a".to_string(), "s".to_string())));
        let none = plain.settings(&InputSourceConfig::default());
        assert!(none.endpoint.is_none() && none.region.is_none() && none.keys.is_none());
    }

    /// The endpoint of the local S3-compatible test server; fails (unless
    /// `DOLMEN_SKIP_S3_TESTS=1`) when it is not configured.
    fn test_endpoint() -> Option<String> {
        match std::env::var("DOLMEN_TEST_S3_ENDPOINT") {
            Ok(e) if !e.is_empty() => Some(e),
            _ if std::env::var("DOLMEN_SKIP_S3_TESTS").as_deref() == Ok("1") => None,
            _ => panic!(
                "DOLMEN_TEST_S3_ENDPOINT is not set: start the local S3-compatible server with \
                 `bash scripts/install-test-deps.sh` and export \
                 DOLMEN_TEST_S3_ENDPOINT=http://127.0.0.1:9010 (scripts/test.sh does both), \
                 or set DOLMEN_SKIP_S3_TESTS=1 to skip the S3 tests"
            ),
        }
    }

    #[test]
    fn prefix_listing_pages() {
        let Some(endpoint) = test_endpoint() else {
            return;
        };
        let bucket = format!(
            "dolmen-paging-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let http = reqwest::blocking::Client::new();
        let created = http.put(format!("{endpoint}/{bucket}")).send().unwrap();
        assert!(created.status().is_success(), "{:?}", created.text());
        let source = S3InputSource {
            uris: None,
            prefixes: Some(vec![format!("s3://{bucket}/logs/")]),
            objects: None,
            object_glob: None,
            system_fields: None,
            properties: Some(S3Properties {
                access_key_id: Some(PasswordProvider::Plain("test".into())),
                secret_access_key: Some(PasswordProvider::Plain("test".into())),
                assume_role_arn: None,
                assume_role_external_id: None,
            }),
            endpoint_config: Some(S3EndpointConfig {
                url: Some(endpoint.clone()),
                signing_region: Some("us-east-1".into()),
            }),
            client_config: None,
            proxy_config: None,
        };
        let clients = S3Clients {
            settings: source.settings(&InputSourceConfig::default()),
            runtime: IoRuntime::dedicated().unwrap(),
            by_bucket: Mutex::new(HashMap::new()),
        };
        let client = clients.get(&bucket).unwrap();
        let keys = [
            "logs/a.json",
            "logs/b.json",
            "logs/c/d.json",
            "logs2/e.json",
            "logs/f.json",
        ];
        for k in keys {
            client
                .runtime
                .block_on(
                    client
                        .store
                        .put(&ObjectPath::parse(k).unwrap(), "{}\n".into()),
                )
                .unwrap();
        }
        let mut listed = client
            .list_prefix("logs/", "s3://b/logs/", Some(2))
            .unwrap();
        listed.sort();
        let names: Vec<&str> = listed.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            ["logs/a.json", "logs/b.json", "logs/c/d.json", "logs/f.json"]
        );
        assert!(listed.iter().all(|(_, size)| *size == 3));
        // A plain string prefix, not a directory: `logs` also covers `logs2/`.
        assert_eq!(
            client
                .list_prefix("logs", "s3://b/logs", Some(1))
                .unwrap()
                .len(),
            5
        );
    }

    #[test]
    fn java_globs() {
        let m = |g: &str, k: &str| java_glob(g).unwrap().is_match(k);
        assert!(m("**.json", "bar/file.json"));
        assert!(m("**.json", "file.json"));
        assert!(!m("*.json", "bar/file.json"));
        assert!(m("*.json", "file.json"));
        assert!(m("bar/*.json", "bar/file.json"));
        assert!(!m("bar/*.json", "bar/x/file.json"));
        assert!(m("bar/**/*.json", "bar/x/y/file.json"));
        assert!(m("data-?.csv", "data-1.csv"));
        assert!(!m("data-?.csv", "data-12.csv"));
        assert!(m("*.{json,csv}", "a.csv"));
        assert!(!m("*.{json,csv}", "a.tsv"));
        assert!(m("[a-c]*.gz", "b1.gz"));
        assert!(!m("[!a-c]*.gz", "b1.gz"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("a.b+(c)", "a.b+(c)"));
        for bad in ["[a", "{a,b", "{a,{b}}", "x\\", "[]"] {
            assert!(java_glob(bad).is_err(), "{bad}");
        }
    }
}
