//! The `http` input source: files fetched with HTTP(S) GET (Druid docs, "Input sources" →
//! "HTTP input source").
//!
//! ```json
//! {"type": "http", "uris": ["https://example.com/data.json.gz"],
//!  "httpAuthenticationUsername": "user", "httpAuthenticationPassword": {"type": "default", "password": "pw"},
//!  "requestHeaders": {"X-Token": "abc"}, "systemFields": ["__file_uri", "__file_path"]}
//! ```
//!
//! Every URI must pass the allow-lists of [`super::config`] (protocols, hosts), at submission
//! and again at run time; redirects are followed (at most 10) only to allowed URLs. Request
//! headers must be listed in `service.ingestion.http.allowedHeaders`. Bodies are streamed;
//! gzip content is detected by its magic bytes. A non-2xx answer fails the task with the URL
//! and the status. Requests time out after 60 s without progress (connect, or any single
//! read); a slow but steady download is not cut off.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::InputSourceConfig;
use super::context::InputContext;
use super::remote::{Fetch, PasswordProvider, RemoteObject, check_system_fields};
use super::{InputEntity, InputError};

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 10;
/// Connect and per-read timeout.
const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// `systemFields` the `http` source offers.
const SYSTEM_FIELDS: &[&str] = &["__file_uri", "__file_path"];

/// `{"type": "http", ...}` (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpInputSource {
    /// The URLs to read, in order.
    pub uris: Vec<String>,
    /// User name for HTTP basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_authentication_username: Option<String>,
    /// Password for HTTP basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_authentication_password: Option<PasswordProvider>,
    /// Extra request headers (names must be allowed by `service.ingestion.http.allowedHeaders`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<BTreeMap<String, String>>,
    /// Fields added to every row: `__file_uri` (the URL) and `__file_path` (its path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_fields: Option<Vec<String>>,
}

impl HttpInputSource {
    /// Checks the spec against `config`; errors name the field under `path`.
    ///
    /// # Errors
    /// [`InputError::InvalidSpec`], e.g. `spec.ioConfig.inputSource.uris[1]: host [10.0.0.1:80]
    /// is not in the allow-list ...`.
    pub fn validate(&self, config: &InputSourceConfig, path: &str) -> Result<(), InputError> {
        if self.uris.is_empty() {
            return Err(InputError::InvalidSpec(format!(
                "{path}.uris: at least one URI is required"
            )));
        }
        for (i, uri) in self.uris.iter().enumerate() {
            config
                .check_url(uri)
                .map_err(|e| InputError::InvalidSpec(format!("{path}.uris[{i}]: {e}")))?;
        }
        if let Some(p) = &self.http_authentication_password {
            p.secret().map_err(|e| {
                InputError::InvalidSpec(format!("{path}.httpAuthenticationPassword: {e}"))
            })?;
            if self.http_authentication_username.is_none() {
                return Err(InputError::InvalidSpec(format!(
                    "{path}.httpAuthenticationUsername: required when httpAuthenticationPassword is given"
                )));
            }
        }
        for (name, value) in self.request_headers.iter().flatten() {
            config
                .check_header(name)
                .map_err(|e| InputError::InvalidSpec(format!("{path}.requestHeaders: {e}")))?;
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(value).is_err()
            {
                return Err(InputError::InvalidSpec(format!(
                    "{path}.requestHeaders: [{name}] is not a valid header name and value"
                )));
            }
        }
        check_system_fields(self.system_fields.as_deref(), SYSTEM_FIELDS, path)
    }

    /// One entity per URI, in order (nothing is fetched yet).
    ///
    /// # Errors
    /// When the spec is invalid under `config`.
    pub(super) fn entities(
        &self,
        ctx: &InputContext,
        path: &str,
    ) -> Result<Vec<InputEntity>, InputError> {
        let config = ctx.config();
        self.validate(config, path)?;
        let password = match &self.http_authentication_password {
            Some(p) => Some(
                p.secret()
                    .map_err(|e| {
                        InputError::InvalidSpec(format!("{path}.httpAuthenticationPassword: {e}"))
                    })?
                    .to_string(),
            ),
            None => None,
        };
        let fetcher = Arc::new(HttpFetcher {
            client: OnceLock::new(),
            config: Arc::new(config.clone()),
            username: self.http_authentication_username.clone(),
            password,
            headers: self
                .request_headers
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        });
        let wanted = self.system_fields.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(self.uris.len());
        for (i, uri) in self.uris.iter().enumerate() {
            let url = config
                .check_url(uri)
                .map_err(|e| InputError::InvalidSpec(format!("{path}.uris[{i}]: {e}")))?;
            let mut fields = Vec::new();
            for f in wanted {
                let v = match f.as_str() {
                    "__file_uri" => Value::String(uri.clone()),
                    _ => Value::String(url.path().to_string()),
                };
                fields.push((f.clone(), v));
            }
            out.push(InputEntity::Remote(Arc::new(RemoteObject::new(
                uri.clone(),
                None,
                fields,
                Fetch::Http {
                    fetcher: Arc::clone(&fetcher),
                    url,
                },
                ctx.scratch_dir.clone(),
            ))));
        }
        Ok(out)
    }
}

/// The HTTP client and request settings shared by the entities of one `http` source.
pub(super) struct HttpFetcher {
    /// Created on first use, on the reading thread (a blocking client must not be created on
    /// a runtime worker).
    client: OnceLock<Result<reqwest::blocking::Client, String>>,
    config: Arc<InputSourceConfig>,
    username: Option<String>,
    password: Option<String>,
    headers: Vec<(String, String)>,
}

impl std::fmt::Debug for HttpFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpFetcher")
            .field("username", &self.username)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

impl HttpFetcher {
    fn client(&self) -> io::Result<&reqwest::blocking::Client> {
        let built = self.client.get_or_init(|| {
            let config = Arc::clone(&self.config);
            let policy = reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match config.check_parsed_url(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(e) => {
                        let msg = format!("redirect to [{}] refused: {e}", attempt.url());
                        attempt.error(msg)
                    }
                }
            });
            let mut builder = reqwest::blocking::Client::builder()
                .redirect(policy)
                .connect_timeout(IO_TIMEOUT)
                .timeout(IO_TIMEOUT)
                .no_proxy();
            // `service.client.https.trustStore*`: extra roots, e.g. a private CA.
            for der in &self.config.client_trusted_certificates {
                let cert = reqwest::Certificate::from_der(der)
                    .map_err(|e| format!("service.client.https.trustStorePath: {e}"))?;
                builder = builder.add_root_certificate(cert);
            }
            builder
                .build()
                .map_err(|e| format!("cannot create HTTP client: {e}"))
        });
        built.as_ref().map_err(|e| io::Error::other(e.clone()))
    }

    /// Sends the GET and returns the body as a stream.
    pub(super) fn open(&self, url: &reqwest::Url) -> io::Result<Box<dyn Read + Send>> {
        let mut req = self.client()?.get(url.clone());
        if let Some(user) = &self.username {
            req = req.basic_auth(user, self.password.as_ref());
        }
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let resp = req
            .send()
            .map_err(|e| io::Error::other(format!("GET [{url}] failed: {}", error_chain(&e))))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(io::Error::other(format!(
                "GET [{url}] answered HTTP {status}"
            )));
        }
        Ok(Box::new(resp))
    }
}

/// An error with its causes, `: `-separated (reqwest's top-level message omits the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputSource;
    use dolmen_common::config::Properties;
    use serde_json::json;

    fn allow(hosts: &str) -> InputSourceConfig {
        InputSourceConfig::from_properties(&Properties::parse(&format!(
            "service.ingestion.http.allowedHosts={hosts}\nservice.ingestion.http.allowedHeaders=x-token\n"
        )))
        .unwrap()
    }

    fn http(v: Value) -> HttpInputSource {
        match serde_json::from_value::<InputSource>(v).unwrap() {
            InputSource::Http(h) => *h,
            other => panic!("not http: {other:?}"),
        }
    }

    #[test]
    fn serde_shape() {
        let v = json!({
            "type": "http",
            "uris": ["http://example.com/uri1", "http://example2.com/uri2"],
            "httpAuthenticationUsername": "username",
            "httpAuthenticationPassword": {"type": "default", "password": "password123"},
            "requestHeaders": {"x-token": "t"},
            "systemFields": ["__file_uri"]
        });
        let s: InputSource = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        let plain = http(
            json!({"type": "http", "uris": ["http://a/"], "httpAuthenticationUsername": "u", "httpAuthenticationPassword": "p"}),
        );
        assert_eq!(
            plain
                .http_authentication_password
                .as_ref()
                .unwrap()
                .secret()
                .unwrap(),
            "p"
        );
        let e = serde_json::from_value::<InputSource>(json!({"type": "http", "uri": ["x"]}))
            .unwrap_err();
        assert!(e.to_string().contains("uri"), "{e}");
    }

    #[test]
    fn validation_names_paths() {
        let p = "spec.ioConfig.inputSource";
        let s = http(
            json!({"type": "http", "uris": ["https://data.example.com/a.json", "http://169.254.169.254/latest/meta-data/"]}),
        );
        let e = s
            .validate(&allow("data.example.com"), p)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("spec.ioConfig.inputSource.uris[1]") && e.contains("169.254.169.254"),
            "{e}"
        );
        // Denied by default.
        let e = s
            .validate(&InputSourceConfig::default(), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("uris[0]") && e.contains("allowedHosts"), "{e}");
        let cases = [
            (json!({"type": "http", "uris": []}), "uris: at least one"),
            (
                json!({"type": "http", "uris": ["file:///etc/passwd"]}),
                "uris[0]: protocol [file]",
            ),
            (
                json!({"type": "http", "uris": ["http://ok.com@evil.io/"]}),
                "uris[0]: URLs must not carry credentials",
            ),
            (
                json!({"type": "http", "uris": ["http://[::1]/"]}),
                "uris[0]: host [[::1]:80]",
            ),
            (
                json!({"type": "http", "uris": ["http://ok.com/"], "httpAuthenticationPassword": "p"}),
                "httpAuthenticationUsername",
            ),
            (
                json!({"type": "http", "uris": ["http://ok.com/"], "httpAuthenticationUsername": "u", "httpAuthenticationPassword": {"type": "environment", "variable": "AWS_SECRET_ACCESS_KEY"}}),
                "httpAuthenticationPassword: password provider type [environment]",
            ),
            (
                json!({"type": "http", "uris": ["http://ok.com/"], "requestHeaders": {"Host": "internal"}}),
                "requestHeaders: header [Host] is not allowed",
            ),
            (
                json!({"type": "http", "uris": ["http://ok.com/"], "requestHeaders": {"x-token": "a\nb"}}),
                "requestHeaders: [x-token]",
            ),
            (
                json!({"type": "http", "uris": ["http://ok.com/"], "systemFields": ["__file_bucket"]}),
                "systemFields[0]: unknown system field [__file_bucket]",
            ),
        ];
        for (spec, want) in cases {
            let e = http(spec.clone())
                .validate(&allow("ok.com"), p)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("{p}.")) && e.contains(want),
                "{spec}: {e}"
            );
        }
        let ok = http(
            json!({"type": "http", "uris": ["http://ok.com/a", "https://ok.com/b"], "requestHeaders": {"X-Token": "t"}, "systemFields": ["__file_uri", "__file_path"]}),
        );
        ok.validate(&allow("ok.com"), p).unwrap();
        let ctx = InputContext {
            config: Some(Arc::new(allow("ok.com"))),
            ..InputContext::default()
        };
        let entities = ok.entities(&ctx, p).unwrap();
        assert_eq!(entities.len(), 2);
        let InputEntity::Remote(r) = &entities[1] else {
            panic!("remote entity expected")
        };
        assert_eq!(r.uri, "https://ok.com/b");
        assert_eq!(
            r.system_fields,
            vec![
                ("__file_uri".to_string(), json!("https://ok.com/b")),
                ("__file_path".to_string(), json!("/b"))
            ]
        );
        assert_eq!(entities[0].name(), "http://ok.com/a");
        assert_eq!(entities[0].size_bytes(), 0);
    }
}
