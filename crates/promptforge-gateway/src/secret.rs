//! The one credential type, [`Secret`] (from `promptforge-wire`, shared with core), and the
//! gateway's constant-time comparison of a presented bearer key with it.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use promptforge_wire::Secret;

/// Constant-time comparison of a presented credential with a [`Secret`].
pub(crate) trait SecretMatch {
    /// Compares `candidate` with this secret in constant time.
    ///
    /// Both values are hashed with SHA-256 to fixed-length digests first, so neither the
    /// content nor the length of the secret leaks through timing.
    fn matches(&self, candidate: &[u8]) -> bool;
}

impl SecretMatch for Secret {
    fn matches(&self, candidate: &[u8]) -> bool {
        let ours = Sha256::digest(self.expose().as_bytes());
        let theirs = Sha256::digest(candidate);
        ours.as_slice().ct_eq(theirs.as_slice()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_same_bytes() {
        let secret = Secret::new("token");
        assert!(secret.matches(b"token"));
        assert!(!secret.matches(b"token2"));
        assert!(!secret.matches(b""));
    }
}
