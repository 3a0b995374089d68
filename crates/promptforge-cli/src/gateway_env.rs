//! The gateway environment: `PROMPTFORGE_GATEWAY_URL` and `PROMPTFORGE_GATEWAY_API_KEY`.

/// The URL variable.
pub(crate) const URL_VAR: &str = "PROMPTFORGE_GATEWAY_URL";
/// The bearer-token variable.
pub(crate) const KEY_VAR: &str = "PROMPTFORGE_GATEWAY_API_KEY";

/// Whether the CLI reaches a gateway.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Neither variable set (or both empty): no gateway, no remote catalog.
    Local,
    /// Both set.
    Remote { url: String, key: String },
}

impl Mode {
    /// Reads the mode from the process environment.
    pub(crate) fn from_env() -> Result<Self, String> {
        Self::from_values(non_empty(URL_VAR), non_empty(KEY_VAR))
    }

    /// Decides the mode from the two values (empty counts as unset).
    pub(crate) fn from_values(url: Option<String>, key: Option<String>) -> Result<Self, String> {
        match (url, key) {
            (None, None) => Ok(Self::Local),
            (Some(url), Some(key)) => Ok(Self::Remote { url, key }),
            (None, Some(_)) => Err(format!(
                "{KEY_VAR} is set but {URL_VAR} is missing or empty; both are required to reach the gateway"
            )),
            (Some(_), None) => Err(format!(
                "{URL_VAR} is set but {KEY_VAR} is missing or empty; both are required to reach the gateway"
            )),
        }
    }
}

fn non_empty(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_or_neither() {
        assert_eq!(Mode::from_values(None, None), Ok(Mode::Local));
        assert!(matches!(
            Mode::from_values(Some("http://x".into()), Some("k".into())),
            Ok(Mode::Remote { .. })
        ));
        assert!(Mode::from_values(None, Some("k".into())).is_err());
        assert!(Mode::from_values(Some("u".into()), None).is_err());
    }
}
