//! The TLS listener (Druid's `druid.enableTlsPort`, `druid.server.https.*`) over rustls.
//!
//! The server key store is a PKCS#12 file (`keyStoreType=pkcs12`, Java's default type since
//! Java 9; `certAlias` picks the private-key entry when it holds several) or a PEM file holding
//! the certificate chain and an unencrypted private key (`keyStoreType=pem`). JKS needs a JVM:
//! convert it with `keytool -importkeystore -deststoretype PKCS12`.
//!
//! TLS handshakes run on their own tasks (a slow client never holds up the others) and are
//! bounded by [`HANDSHAKE_TIMEOUT`]; accepted connections are served by the same router as the
//! plaintext listener.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::ServiceExt;
use axum::extract::Request;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::Layer;
use tower_http::normalize_path::NormalizePathLayer;

use crate::AppState;

/// Longest a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The format of the server key store (`service.server.https.keyStoreType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStoreType {
    /// A PKCS#12 file (`pkcs12`).
    Pkcs12,
    /// A PEM file with the certificate chain and the private key (`pem`).
    Pem,
}

/// `service.server.https.*`: where the server's certificate and key come from.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerKeyStore {
    /// The format.
    pub store_type: KeyStoreType,
    /// The file.
    pub path: PathBuf,
    /// The PKCS#12 password (empty when none).
    pub password: String,
    /// The alias of the PKCS#12 entry to serve (the first private key entry when `None`).
    pub cert_alias: Option<String>,
}

impl std::fmt::Debug for ServerKeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKeyStore")
            .field("store_type", &self.store_type)
            .field("path", &self.path)
            .field("password", &"<redacted>")
            .field("cert_alias", &self.cert_alias)
            .finish()
    }
}

impl ServerKeyStore {
    /// Reads the certificate chain and key and builds the rustls configuration (TLS 1.2 and
    /// 1.3, HTTP/1.1 by ALPN).
    ///
    /// # Errors
    /// A message naming the `service.server.https.*` property at fault: an unreadable file, a
    /// wrong password, no private key entry, no entry of alias `certAlias`, an unusable key.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, String> {
        let path_prop = "service.server.https.keyStorePath";
        let data = std::fs::read(&self.path)
            .map_err(|e| format!("{path_prop}: cannot read [{}]: {e}", self.path.display()))?;
        let (certs, key) = match self.store_type {
            KeyStoreType::Pem => {
                let certs = CertificateDer::pem_slice_iter(&data)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("{path_prop}: not PEM certificates: {e}"))?;
                if certs.is_empty() {
                    return Err(format!("{path_prop}: holds no PEM certificate"));
                }
                let key = PrivateKeyDer::from_pem_slice(&data).map_err(|e| {
                    format!("{path_prop}: no usable unencrypted PEM private key: {e}")
                })?;
                (certs, key)
            }
            KeyStoreType::Pkcs12 => {
                let store = p12_keystore::KeyStore::from_pkcs12(
                    &data,
                    &self.password,
                    p12_keystore::Pkcs12ImportPolicy::Relaxed,
                )
                .map_err(|e| {
                    format!(
                        "{path_prop}: cannot open [{}] as PKCS12 (is service.server.https.keyStorePassword right?): {e}",
                        self.path.display()
                    )
                })?;
                let chain = store
                    .entries()
                    .find_map(|(alias, e)| match e {
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain)
                            if self.cert_alias.as_deref().is_none_or(|a| a == alias) =>
                        {
                            Some(chain)
                        }
                        _ => None,
                    })
                    .ok_or_else(|| match &self.cert_alias {
                        Some(a) => format!(
                            "service.server.https.certAlias: the keystore has no private key entry [{a}]"
                        ),
                        None => format!("{path_prop}: the keystore holds no private key entry"),
                    })?;
                let certs = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                let key = PrivateKeyDer::try_from(chain.key().as_der().to_vec())
                    .map_err(|e| format!("{path_prop}: unusable private key: {e}"))?;
                (certs, key)
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("{path_prop}: the certificate and key do not fit: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Connections that completed the TLS handshake.
#[derive(Debug)]
struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(c) => c,
            // The acceptor stopped (shutdown): no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Serves the router over TLS on a bound listener until `shutdown` is cancelled (as
/// [`crate::serve`]).
///
/// # Errors
/// On a listener failure.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<AppState>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let (tx, rx) = mpsc::channel(64);
    let acceptor = TlsAcceptor::from(tls);
    let stop = shutdown.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = tokio::select! {
                _ = stop.cancelled() => break,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "tls accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send((stream, addr)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, %addr, "tls handshake failed"),
                    Err(_) => tracing::debug!(%addr, "tls handshake timed out"),
                }
            });
        }
    });
    let listener = axum::serve::ListenerExt::tap_io(
        TlsListener {
            accepted: rx,
            local,
        },
        |_| {},
    );
    let app = NormalizePathLayer::trim_trailing_slash().layer(crate::router(state));
    axum::serve(
        listener,
        ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app),
    )
    .with_graceful_shutdown(async move { shutdown.cancelled().await })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its key, as PEM.
    fn pem() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn pem_key_stores_and_errors_name_the_property() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pem();
        let both = dir.path().join("server.pem");
        std::fs::write(&both, format!("{cert}{key}")).unwrap();
        let store = |path: PathBuf, store_type| ServerKeyStore {
            store_type,
            path,
            password: String::new(),
            cert_alias: None,
        };
        let config = store(both.clone(), KeyStoreType::Pem)
            .server_config()
            .unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let only_cert = dir.path().join("cert.pem");
        std::fs::write(&only_cert, &cert).unwrap();
        let e = store(only_cert, KeyStoreType::Pem)
            .server_config()
            .unwrap_err();
        assert!(e.contains("service.server.https.keyStorePath"), "{e}");
        let e = store(both, KeyStoreType::Pkcs12)
            .server_config()
            .unwrap_err();
        assert!(e.contains("keyStorePassword"), "{e}");
        let e = store(dir.path().join("missing"), KeyStoreType::Pem)
            .server_config()
            .unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
        // The password never prints.
        let mut s = store(PathBuf::from("x"), KeyStoreType::Pkcs12);
        s.password = "hunter2".into();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
