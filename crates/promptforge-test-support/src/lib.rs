//! Test support shared by the workspace's integration tests (a dev-dependency only; never
//! part of a shipped binary).
//!
//! Every crate that talks to a model tests against a scripted OpenAI-compatible upstream.
//! What each script answers differs by crate, so the scripts stay with their tests; what
//! they share lives here: serving an axum app on `127.0.0.1`, port 0, for exactly as long
//! as a value lives ([`Loopback`]), the bearer check ([`has_bearer`]), and a chat route
//! that replays queued replies and records every request ([`Replay`]).

pub mod browser;
mod replay;

pub use replay::{Replay, Reply};

use axum::Router;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// An axum app served on `127.0.0.1` at a port the kernel chose; dropping it stops the
/// server (gracefully: requests in flight finish).
#[derive(Debug)]
pub struct Loopback {
    url: String,
    _stop: oneshot::Sender<()>,
}

impl Loopback {
    /// Binds `127.0.0.1:0` and serves `app` on a task of the current runtime.
    ///
    /// # Errors
    /// When the socket cannot be bound or its address read.
    pub async fn serve(app: Router) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // A serve error ends the task; the test sees it as refused connections.
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self { url, _stop: stop })
    }

    /// The base URL, `http://127.0.0.1:PORT` (no trailing slash).
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Every way `document` breaks the JSON Schema `schema` (empty when it is valid): the
/// trace tests check each trace they produce against `trace.schema.json` with it.
///
/// # Panics
/// When `schema` is not a valid JSON Schema (a bug in the schema file, not in a test).
#[must_use]
#[allow(clippy::expect_used)]
pub fn schema_errors(schema: &str, document: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value = serde_json::from_str(schema).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(document)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Whether `headers` carry `Authorization: Bearer <key>` exactly (the scheme as every
/// client under test sends it).
#[must_use]
pub fn has_bearer(headers: &HeaderMap, key: &str) -> bool {
    headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|token| token == key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::http::HeaderValue;
    use axum::routing::get;

    #[test]
    fn the_bearer_must_match_exactly() {
        let mut headers = HeaderMap::new();
        assert!(!has_bearer(&headers, "k"));
        for (value, expected) in [
            ("Bearer k", true),
            ("Bearer k2", false),
            ("bearer k", false),
            ("Basic k", false),
            ("Bearer ", false),
        ] {
            headers.insert(AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(has_bearer(&headers, "k"), expected, "{value}");
        }
    }

    #[tokio::test]
    async fn serves_until_dropped() {
        let app = Router::new().route("/ping", get(|| async { "pong" }));
        let server = Loopback::serve(app).await.unwrap();
        assert!(server.url().starts_with("http://127.0.0.1:"));
        let url = format!("{}/ping", server.url());
        let client = reqwest::Client::new();
        let body = client.get(&url).send().await.unwrap().text().await.unwrap();
        assert_eq!(body, "pong");
        drop(server);
        // The graceful shutdown closes the listener once the stop signal arrives.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let fresh = reqwest::Client::new();
            if fresh.get(&url).send().await.is_err() {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "still serving");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}
