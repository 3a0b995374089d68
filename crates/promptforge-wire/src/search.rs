//! `POST /v1/tools/web_search`: the request, its enumerated fields and bounds, the response.

use serde::{Deserialize, Serialize};

use crate::catalog::wire_enum;

/// Most domains accepted in each of `domains_include` / `domains_exclude`.
pub const MAX_DOMAINS: usize = 20;
/// Largest `count`.
pub const MAX_COUNT: u32 = 20;

wire_enum! {
    /// The `freshness` filter: results from the past day, week, month or year.
    Freshness, field = "freshness", expected = "pd, pw, pm or py", {
        /// Past day.
        PastDay => "pd",
        /// Past week.
        PastWeek => "pw",
        /// Past month.
        PastMonth => "pm",
        /// Past year.
        PastYear => "py",
    }
}

wire_enum! {
    /// The `safe_search` level.
    SafeSearch, field = "safe_search", expected = "off, moderate or strict", {
        /// No filtering.
        Off => "off",
        /// The provider's default filtering.
        Moderate => "moderate",
        /// Strict filtering.
        Strict => "strict",
    }
}

/// The request body as sent. Unknown fields are refused.
///
/// The enumerated and bounded fields travel as given (`count` any integer, `freshness`
/// and `safe_search` any string) so that the receiver can name the field it refuses, in
/// its own order: query first, then count, freshness, safe search, country, language,
/// domains.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchRequest {
    /// The query (required, non-empty).
    #[serde(default)]
    pub query: String,
    /// Results wanted, 1 to [`MAX_COUNT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// A [`Freshness`] spelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<String>,
    /// A [`SafeSearch`] spelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_search: Option<String>,
    /// Keep only results on these hosts (bare hostnames; subdomains match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains_include: Vec<String>,
    /// Drop results on these hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains_exclude: Vec<String>,
    /// Two-letter country code (or `ALL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// Language code such as `en` or `pt-br`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

impl WebSearchRequest {
    /// The field names, as the wire spells them.
    pub const FIELDS: &'static [&'static str] = &[
        "query",
        "count",
        "freshness",
        "safe_search",
        "domains_include",
        "domains_exclude",
        "country",
        "language",
    ];
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebSearchHit {
    /// Plain-text title.
    pub title: String,
    /// The URL, tracking parameters removed.
    pub url: String,
    /// Plain-text description.
    pub description: String,
    /// Age, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age: Option<String>,
    /// The host the result lives on, without `www.`.
    pub site_name: String,
    /// Extra snippets, when any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_snippets: Vec<String>,
}

/// The response body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebSearchResponse {
    /// The query as searched (trimmed).
    pub query: String,
    /// The results, at most `count`.
    pub results: Vec<WebSearchHit>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn enums_name_the_field_and_the_choices() {
        assert_eq!("pw".parse::<Freshness>().unwrap(), Freshness::PastWeek);
        assert_eq!(
            "pz".parse::<Freshness>().unwrap_err().to_string(),
            "freshness `pz` is not pd, pw, pm or py"
        );
        assert_eq!(
            "none".parse::<SafeSearch>().unwrap_err().to_string(),
            "safe_search `none` is not off, moderate or strict"
        );
        assert_eq!(SafeSearch::ALL.len(), 3);
    }

    #[test]
    fn requests_refuse_unknown_fields_and_omit_absent_ones() {
        let request: WebSearchRequest =
            serde_json::from_str(r#"{"query":"q","count":3,"domains_include":["a.com"]}"#).unwrap();
        assert_eq!(request.count, Some(3));
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::json!({"query": "q", "count": 3, "domains_include": ["a.com"]})
        );
        assert!(serde_json::from_str::<WebSearchRequest>(r#"{"query":"q","x":1}"#).is_err());
        let every: serde_json::Value = serde_json::from_str(
            r#"{"query":"q","count":1,"freshness":"pd","safe_search":"off","domains_include":["a.b"],
                "domains_exclude":["c.d"],"country":"US","language":"en"}"#,
        )
        .unwrap();
        let keys: Vec<&str> = every
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut fields = WebSearchRequest::FIELDS.to_vec();
        fields.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, fields);
        assert!(serde_json::from_value::<WebSearchRequest>(every).is_ok());
    }
}
