//! The Brave Search API call.

use serde::Deserialize;

use super::SearchError;
use super::pipeline::RawHit;
use super::request::Search;
use crate::config::WebSearchConfig;
use crate::relay::pooled::{Capped, failure, read_capped};
use crate::relay::transport::{AttemptFailure, FailureKind, Phase};

/// The endpoint name the provider's failures carry.
const PROVIDER: &str = "web_search";

/// A provider failure of `kind` with `message`.
fn provider(kind: FailureKind, message: String) -> SearchError {
    SearchError::Provider(AttemptFailure {
        kind,
        message,
        retryable: false,
        phase: Phase::AfterHead,
    })
}

/// Largest search-provider body read (Brave answers are tens of KiB).
pub(crate) const MAX_SEARCH_BODY_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Deserialize)]
struct BraveResponse {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Debug, Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Debug, Deserialize)]
struct BraveResult {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    age: Option<String>,
    #[serde(default)]
    extra_snippets: Option<Vec<String>>,
}

/// Queries Brave for up to `max_count` results (over-fetching so the filters still leave
/// `count`), returning them trimmed to the fields the pipeline keeps.
pub(crate) async fn search(
    client: &reqwest::Client,
    config: &WebSearchConfig,
    search: &Search,
) -> Result<Vec<RawHit>, SearchError> {
    let mut params: Vec<(&str, String)> = vec![
        ("q", search.query.clone()),
        ("count", config.max_count.to_string()),
    ];
    if let Some(f) = &search.freshness {
        params.push(("freshness", f.as_str().to_owned()));
    }
    if let Some(s) = &search.safe_search {
        params.push(("safesearch", s.as_str().to_owned()));
    }
    if let Some(c) = &search.country {
        params.push(("country", c.clone()));
    }
    if let Some(l) = &search.language {
        params.push(("search_lang", l.clone()));
    }
    let url = reqwest::Url::parse_with_params(&format!("{}/web/search", config.base_url), &params)
        .map_err(|err| {
            provider(
                FailureKind::Transport,
                format!("bad search provider URL: {err}"),
            )
        })?;
    let response = client
        .get(url)
        .header("Accept", "application/json")
        .header("X-Subscription-Token", config.api_key.expose())
        .send()
        .await
        .map_err(|err| SearchError::Provider(failure(PROVIDER, &err, Phase::BeforeHead)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(match status.as_u16() {
            429 => provider(
                FailureKind::RateLimited,
                "the search provider is rate limiting; retry later".to_owned(),
            ),
            _ => provider(
                FailureKind::Status,
                format!("the search provider answered {status}"),
            ),
        });
    }
    let bytes = match read_capped(response, MAX_SEARCH_BODY_BYTES)
        .await
        .map_err(|err| SearchError::Provider(failure(PROVIDER, &err, Phase::AfterHead)))?
    {
        Capped::Whole(bytes) => bytes,
        Capped::Cut(_) => {
            return Err(provider(
                FailureKind::Protocol,
                format!(
                    "the search provider answered a body larger than {MAX_SEARCH_BODY_BYTES} bytes"
                ),
            ));
        }
    };
    let parsed: BraveResponse = serde_json::from_slice(&bytes).map_err(|err| {
        provider(
            FailureKind::Protocol,
            format!("the search provider answered an undecodable body: {err}"),
        )
    })?;
    Ok(parsed
        .web
        .map(|web| web.results)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            Some(RawHit {
                url: r.url?,
                title: r.title.unwrap_or_default(),
                description: r.description.unwrap_or_default(),
                age: r.age,
                extra_snippets: r.extra_snippets.unwrap_or_default(),
            })
        })
        .collect())
}
