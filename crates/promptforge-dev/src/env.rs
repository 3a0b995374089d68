//! The gateway environment: `PROMPTFORGE_GATEWAY_URL` and `PROMPTFORGE_GATEWAY_API_KEY`,
//! both required.

use promptforge_core::client::{KEY_VAR, Secret, URL_VAR};

/// The validated gateway environment.
#[derive(Debug, Clone)]
pub struct GatewayEnv {
    /// The gateway's base URL.
    pub url: String,
    /// The bearer key.
    pub key: Secret,
}

/// A gateway variable that is missing or empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{variable} is not set (or is empty): start promptforge-gateway, then export {URL_VAR} and {KEY_VAR}"
)]
pub struct EnvError {
    /// The first missing variable.
    pub variable: &'static str,
}

impl GatewayEnv {
    /// Reads both variables from the process environment.
    pub fn from_env() -> Result<Self, EnvError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads both variables through `lookup`; a value that is empty or only whitespace
    /// counts as missing. The URL is checked first.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let read = |name: &'static str| {
            lookup(name)
                .filter(|value| !value.trim().is_empty())
                .ok_or(EnvError { variable: name })
        };
        let url = read(URL_VAR)?;
        let key = read(KEY_VAR)?;
        Ok(Self {
            url,
            key: Secret::new(key),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn both_variables_are_required_and_the_key_never_prints() {
        let env = |url: Option<&str>, key: Option<&str>| {
            GatewayEnv::from_lookup(|name| {
                match name {
                    URL_VAR => url,
                    KEY_VAR => key,
                    _ => None,
                }
                .map(str::to_owned)
            })
        };
        assert_eq!(env(None, Some("k")).unwrap_err().variable, URL_VAR);
        assert_eq!(env(Some("http://x"), None).unwrap_err().variable, KEY_VAR);
        assert_eq!(
            env(Some("http://x"), Some("  ")).unwrap_err().variable,
            KEY_VAR
        );
        let error = env(None, None).unwrap_err().to_string();
        assert!(error.contains("start promptforge-gateway"), "{error}");
        let ok = env(Some("http://x"), Some("sekrit-key")).unwrap();
        assert_eq!(ok.key.expose(), "sekrit-key");
        let shown = format!("{ok:?} {}", ok.key);
        assert!(!shown.contains("sekrit"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
