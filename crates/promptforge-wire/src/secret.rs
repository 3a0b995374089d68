//! The one credential type of PromptForge.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// The text a [`Secret`] shows instead of its value.
pub const REDACTED: &str = "<redacted>";

/// A credential: the gateway bearer key a client sends, an upstream API key, a search key.
///
/// `Secret` redacts itself in both `Debug` (`Secret(<redacted>)`) and `Display`
/// (`<redacted>`), implements no `Serialize`, and hands out its plaintext only through
/// [`Secret::expose`], so a credential cannot reach a log line, an error message or a JSON
/// body by accident. It can be deserialized (from a configuration file).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a plaintext credential.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The plaintext: the single accessor, for building an outgoing request or comparing.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the credential is empty or whitespace only.
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn redacts_in_debug_and_display() {
        let secret = Secret::new("sk-very-secret");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(secret.expose(), "sk-very-secret");
        assert!(Secret::new(" ").is_blank() && !secret.is_blank());
    }

    #[test]
    fn deserializes_from_a_string() {
        let secret: Secret = serde_json::from_str(r#""tok""#).unwrap();
        assert_eq!(secret.expose(), "tok");
    }
}
