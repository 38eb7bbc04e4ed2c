//! Password hashes as Druid's basic authenticator stores them (`BasicAuthenticatorCredentials`,
//! `PasswordHashGenerator`): PBKDF2 with HMAC-SHA512, a 512-bit key, a 32-byte random salt per
//! user, 10,000 iterations by default; `salt` and `hash` serialize as standard base64.

use std::num::NonZeroU32;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SecureRandom;
use serde::{Deserialize, Serialize};

use crate::AuthError;

/// Druid's default `credentialIterations`.
pub const DEFAULT_ITERATIONS: u32 = 10_000;
/// Salt length, bytes.
pub const SALT_LEN: usize = 32;
/// Hash length, bytes (512 bits).
pub const HASH_LEN: usize = 64;

/// Stored credentials of a user: `{"salt","hash","iterations"}` (never the password).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// Random per-user salt (base64 on the wire).
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    /// PBKDF2-HMAC-SHA512(password, salt, iterations) (base64 on the wire).
    #[serde(with = "b64")]
    pub hash: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
}

impl Credentials {
    /// Hashes `password` with a fresh random salt.
    ///
    /// # Errors
    /// [`AuthError::BadRequest`] for an empty password (Druid: `Cannot assign empty password.`)
    /// or zero iterations; [`AuthError::Internal`] when the system random source fails.
    pub fn generate(password: &str, iterations: u32) -> Result<Credentials, AuthError> {
        if password.is_empty() {
            return Err(AuthError::BadRequest(
                "Cannot assign empty password.".into(),
            ));
        }
        let Some(iters) = NonZeroU32::new(iterations) else {
            return Err(AuthError::BadRequest(
                "iterations must be a positive integer".into(),
            ));
        };
        let mut salt = vec![0u8; SALT_LEN];
        ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .map_err(|_| AuthError::Internal("the system random source failed".into()))?;
        let mut hash = vec![0u8; HASH_LEN];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA512,
            iters,
            &salt,
            password.as_bytes(),
            &mut hash,
        );
        Ok(Credentials {
            salt,
            hash,
            iterations,
        })
    }

    /// Whether `password` matches, in constant time (ring's `pbkdf2::verify`).
    pub fn verify(&self, password: &str) -> bool {
        let Some(iters) = NonZeroU32::new(self.iterations) else {
            return false;
        };
        ring::pbkdf2::verify(
            ring::pbkdf2::PBKDF2_HMAC_SHA512,
            iters,
            &self.salt,
            password.as_bytes(),
            &self.hash,
        )
        .is_ok()
    }
}

/// Equality of two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

mod b64 {
    use super::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// Decodes `base64(user:password)` of a `Basic` header value; `None` when it is not base64 or
/// has no `:` (the password may contain `:`).
pub fn decode_basic(token: &str) -> Option<(String, String)> {
    let bytes = STANDARD.decode(token.trim().as_bytes()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_shape_and_verification() {
        let c = Credentials::generate("s3cret:with colon", DEFAULT_ITERATIONS).unwrap();
        let json = serde_json::to_value(&c).unwrap();
        // Druid's sizes: 44 base64 characters of salt, 88 of hash.
        assert_eq!(json["salt"].as_str().unwrap().len(), 44);
        assert_eq!(json["hash"].as_str().unwrap().len(), 88);
        assert_eq!(json["iterations"], 10000);
        let back: Credentials = serde_json::from_value(json).unwrap();
        assert!(back.verify("s3cret:with colon"));
        assert!(!back.verify("s3cret"));
        // Per-user salt: the same password hashes differently.
        let d = Credentials::generate("s3cret:with colon", DEFAULT_ITERATIONS).unwrap();
        assert_ne!(c.salt, d.salt);
        assert_ne!(c.hash, d.hash);
        assert!(Credentials::generate("", 10).is_err());
    }

    #[test]
    fn matches_an_independent_pbkdf2_vector() {
        // RFC 6070-style check of the primitive with SHA-512 (value from Python's
        // hashlib.pbkdf2_hmac('sha512', b'password', b'salt', 1)).
        let c = Credentials {
            salt: b"salt".to_vec(),
            hash: hex(
                "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce",
            ),
            iterations: 1,
        };
        assert!(c.verify("password"));
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn basic_header_decoding() {
        let t = STANDARD.encode("admin:pa:ss");
        assert_eq!(
            decode_basic(&t),
            Some(("admin".to_string(), "pa:ss".to_string()))
        );
        assert_eq!(decode_basic("!!!"), None);
        assert_eq!(decode_basic(&STANDARD.encode("nocolon")), None);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
