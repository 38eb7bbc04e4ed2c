//! Dolmen's security: authenticators, authorizers, the escalator's configuration and the
//! resource/action model, after Druid's basic-security extension.
//!
//! - [`config`]: `service.auth.*` and `service.escalator.*` from runtime properties; security is
//!   off (no [`Security`] at all) unless `service.auth.authenticatorChain` is set.
//! - [`hash`]: credentials as Druid stores them (PBKDF2-HMAC-SHA512, per-user 32-byte salt,
//!   10,000 iterations), checked in constant time.
//! - [`resource`]: resource types, actions and permissions (a permission's name is a regular
//!   expression matched against the whole resource name; WRITE does not imply READ).
//! - [`Security`]: the running chain and authorizers over the metadata store, with caches that
//!   every change made through it invalidates, and the operations of the user/role API.
//!
//! The HTTP side (the authentication layer, the per-route resource table, the API routes) lives
//! in `dolmen-server`'s `security` module.

pub mod config;
pub mod hash;
pub mod resource;
mod security;

pub use config::SecurityConfig;
pub use resource::{Action, Permission, Resource, ResourceAction, ResourceType};
pub use security::{AuthnOutcome, Grants, Identity, Security};

/// Errors of authentication, authorization and the user/role API.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Bad input or a state conflict the API answers with 400 `{"error": msg}` (Druid answers
    /// 400 for unknown users, roles and authenticators too).
    #[error("{0}")]
    BadRequest(String),
    /// The metadata store failed.
    #[error(transparent)]
    Metadata(dolmen_metadata::MetadataError),
    /// A fault of this process.
    #[error("{0}")]
    Internal(String),
}

impl From<dolmen_metadata::MetadataError> for AuthError {
    fn from(e: dolmen_metadata::MetadataError) -> Self {
        match e {
            dolmen_metadata::MetadataError::NotFound(m)
            | dolmen_metadata::MetadataError::Conflict(m) => AuthError::BadRequest(m),
            other => AuthError::Metadata(other),
        }
    }
}

impl AuthError {
    /// The HTTP status: 400 for [`AuthError::BadRequest`], 500 otherwise.
    pub fn http_status(&self) -> u16 {
        match self {
            AuthError::BadRequest(_) => 400,
            _ => 500,
        }
    }
}
