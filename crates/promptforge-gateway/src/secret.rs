//! The one credential type of the gateway.

use std::fmt;

use serde::{Deserialize, Deserializer};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A credential: an upstream API key, the gateway's own bearer key, a search key.
///
/// `Secret` redacts itself in both `Debug` and `Display`, implements no `Serialize`, and
/// hands out its plaintext only through [`Secret::expose`], so a credential cannot reach a
/// log line, an error message or a JSON body by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a plaintext credential.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The plaintext: the single accessor, for building an outgoing request.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the credential is empty or whitespace only.
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// Compares `candidate` with this secret in constant time.
    ///
    /// Both values are hashed with SHA-256 to fixed-length digests first, so neither the
    /// content nor the length of the secret leaks through timing.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let ours = Sha256::digest(self.0.as_bytes());
        let theirs = Sha256::digest(candidate);
        ours.as_slice().ct_eq(theirs.as_slice()).into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_in_debug_and_display() {
        let secret = Secret::new("sk-very-secret");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert!(!format!("{secret:?}").contains("very"));
        assert_eq!(secret.expose(), "sk-very-secret");
    }

    #[test]
    fn matches_only_the_same_bytes() {
        let secret = Secret::new("token");
        assert!(secret.matches(b"token"));
        assert!(!secret.matches(b"token2"));
        assert!(!secret.matches(b""));
        assert!(Secret::new(" ").is_blank());
    }
}
