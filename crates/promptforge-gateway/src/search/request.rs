//! `POST /v1/tools/web_search` request fields and their validation.

use promptforge_wire::{Freshness, SafeSearch, UnknownValue};
pub(crate) use promptforge_wire::{MAX_COUNT, MAX_DOMAINS, WebSearchRequest as SearchRequest};

use super::SearchError;
use crate::config::WebSearchConfig;

/// A validated search, defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Search {
    /// The trimmed query.
    pub query: String,
    /// Results to return.
    pub count: usize,
    /// Freshness filter.
    pub freshness: Option<Freshness>,
    /// Safe-search level.
    pub safe_search: Option<SafeSearch>,
    /// Lowercased include list.
    pub domains_include: Vec<String>,
    /// Lowercased exclude list.
    pub domains_exclude: Vec<String>,
    /// Uppercased country code.
    pub country: Option<String>,
    /// Lowercased language code.
    pub language: Option<String>,
}

fn bad(message: impl Into<String>) -> SearchError {
    SearchError::Invalid(message.into())
}

/// Whether `domain` is a bare hostname: labels of `a-z 0-9 -`, no scheme, path or port.
pub(crate) fn is_bare_hostname(domain: &str) -> bool {
    domain.len() <= 253
        && domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn domains(field: &str, list: &[String]) -> Result<Vec<String>, SearchError> {
    if list.len() > MAX_DOMAINS {
        return Err(bad(format!(
            "{field} accepts at most {MAX_DOMAINS} domains"
        )));
    }
    list.iter()
        .map(|d| {
            let d = d.trim().to_ascii_lowercase();
            if is_bare_hostname(&d) {
                Ok(d)
            } else {
                Err(bad(format!(
                    "{field}: `{d}` is not a bare hostname (no scheme, path or port)"
                )))
            }
        })
        .collect()
}

/// Validates a request and applies the configured defaults.
pub(crate) fn validate(
    request: SearchRequest,
    config: &WebSearchConfig,
) -> Result<Search, SearchError> {
    let query = request.query.trim().to_owned();
    if query.is_empty() {
        return Err(bad("query must be a non-empty string"));
    }
    let count = match request.count {
        None => config.default_count,
        Some(n) if (1..=i64::from(MAX_COUNT)).contains(&n) => u32::try_from(n).unwrap_or(MAX_COUNT),
        Some(n) => {
            return Err(bad(format!(
                "count must be between 1 and {MAX_COUNT} (got {n})"
            )));
        }
    }
    .min(config.max_count);
    let unknown = |e: UnknownValue| bad(e.to_string());
    let freshness = match request.freshness {
        Some(f) => Some(f.parse().map_err(unknown)?),
        None => config.default_freshness,
    };
    let safe_search = match request.safe_search {
        Some(s) => Some(s.parse().map_err(unknown)?),
        None => config.default_safesearch,
    };
    let country = match request.country {
        Some(c)
            if (c.len() == 2 && c.chars().all(|ch| ch.is_ascii_alphabetic()))
                || c.eq_ignore_ascii_case("all") =>
        {
            Some(c.to_ascii_uppercase())
        }
        Some(c) => return Err(bad(format!("country `{c}` is not a two-letter code"))),
        None => None,
    };
    let language = match request.language {
        Some(l) if valid_language(&l) => Some(l.to_ascii_lowercase()),
        Some(l) => {
            return Err(bad(format!(
                "language `{l}` is not a language code like en or pt-br"
            )));
        }
        None => None,
    };
    Ok(Search {
        query,
        count: usize::try_from(count).unwrap_or(1),
        freshness,
        safe_search,
        domains_include: domains("domains_include", &request.domains_include)?,
        domains_exclude: domains("domains_exclude", &request.domains_exclude)?,
        country,
        language,
    })
}

fn valid_language(code: &str) -> bool {
    let mut parts = code.split('-');
    let primary = parts.next().unwrap_or_default();
    let region = parts.next();
    parts.next().is_none()
        && (2..=3).contains(&primary.len())
        && primary.chars().all(|c| c.is_ascii_alphabetic())
        && region.is_none_or(|r| {
            (2..=4).contains(&r.len()) && r.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_hostnames() {
        for ok in ["example.com", "docs.rs", "a-b.co.uk"] {
            assert!(is_bare_hostname(ok), "{ok}");
        }
        for bad in [
            "https://example.com",
            "example.com/path",
            "example.com:443",
            "localhost",
            "-a.com",
            "a..com",
            "user@a.com",
            "",
        ] {
            assert!(!is_bare_hostname(bad), "{bad}");
        }
        assert!(valid_language("en") && valid_language("pt-br") && valid_language("zh-hans"));
        assert!(!valid_language("english") && !valid_language("e"));
    }
}
