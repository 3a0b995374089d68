//! The loopback search provider behind the gateway's `[tools.web_search]`: it answers the
//! Brave-shaped `GET /web/search` with results that carry a fact the scenario chose (so the
//! scenario can see that fact reach the model's final reply), and records every query.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use promptforge_test_support::Loopback;
use rand::Rng;
use serde_json::{Value as Json, json};

use crate::ScenarioError;
use crate::gateway::SearchProvider;

/// At most this many query words become result hosts.
const MAX_HOST_WORDS: usize = 8;

/// One query the provider received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The `q` parameter.
    pub query: String,
    /// Whether `X-Subscription-Token` carried the provider key.
    pub authorized: bool,
}

#[derive(Debug, Default)]
struct Shared {
    key: String,
    fact: String,
    received: Vec<Received>,
}

/// The running provider; dropping it stops the server.
#[derive(Debug)]
pub struct SearchStub {
    server: Loopback,
    key: String,
    shared: Arc<Mutex<Shared>>,
}

impl SearchStub {
    /// Serves the provider on `127.0.0.1:0` with a random subscription key.
    pub async fn start() -> Result<Self, ScenarioError> {
        let key = format!("search-{:032x}", rand::rng().random::<u128>());
        let shared = Arc::new(Mutex::new(Shared {
            key: key.clone(),
            ..Shared::default()
        }));
        let app = Router::new()
            .route("/web/search", get(search))
            .with_state(Arc::clone(&shared));
        let server = Loopback::serve(app)
            .await
            .map_err(|e| ScenarioError::Setup(format!("search provider: {e}")))?;
        Ok(Self {
            server,
            key,
            shared,
        })
    }

    /// What the gateway's `[tools.web_search]` needs to reach this provider.
    pub fn provider(&self) -> SearchProvider {
        SearchProvider {
            url: self.server.url().to_owned(),
            key: self.key.clone(),
        }
    }

    /// Sets the sentence every result's description carries from now on, and forgets the
    /// queries received so far.
    pub fn answer_with(&self, fact: &str) {
        let mut shared = self.lock();
        fact.clone_into(&mut shared.fact);
        shared.received.clear();
    }

    /// The queries received since the last [`answer_with`](Self::answer_with).
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The hosts of the results: one `<word>.com` per distinct alphanumeric query word (so a
/// `domains_include` the model derives from its query still keeps a result), then
/// `search-stub.example`.
fn hosts(query: &str) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
    {
        let host = format!("{word}.com");
        if !hosts.contains(&host) {
            hosts.push(host);
        }
        if hosts.len() == MAX_HOST_WORDS {
            break;
        }
    }
    hosts.push("search-stub.example".to_owned());
    hosts
}

async fn search(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let query = params.get("q").cloned().unwrap_or_default();
    let (authorized, fact) = {
        let mut shared = shared.lock().unwrap_or_else(|p| p.into_inner());
        let authorized = headers
            .get("x-subscription-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == shared.key);
        shared.received.push(Received {
            query: query.clone(),
            authorized,
        });
        (authorized, shared.fact.clone())
    };
    if !authorized {
        return (StatusCode::UNAUTHORIZED, "bad subscription token").into_response();
    }
    let results: Vec<Json> = hosts(&query)
        .into_iter()
        .map(|host| {
            json!({
                "title": format!("{query} - search result"),
                "url": format!("https://{host}/answer"),
                "description": fact,
            })
        })
        .collect();
    axum::Json(json!({"web": {"results": results}})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_follow_the_query_words() {
        assert_eq!(
            hosts("Quillbox latest release, Quillbox!"),
            [
                "quillbox.com",
                "latest.com",
                "release.com",
                "search-stub.example"
            ]
        );
        assert_eq!(hosts(""), ["search-stub.example"]);
        assert_eq!(hosts("a b c d e f g h i j").len(), MAX_HOST_WORDS + 1);
    }
}
