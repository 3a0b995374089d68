//! The direct dispatch of `POST /v1/chat/completions`: the gateway's hot route skips
//! axum's router and its `from_fn` layers and runs exactly what they do, inline, in the
//! same order (outermost first):
//!
//! 1. `metrics::observe`: a fresh [`Trace`], the start time, and once the response head
//!    is ready [`crate::metrics::record`] (counters, histograms, overhead headers) under
//!    the route pattern `/v1/chat/completions`;
//! 2. `end_on_shutdown`: the request races the end of the drain (503 `shutting_down`);
//! 3. `refuse_declared_oversize`: a declared `Content-Length` over [`MAX_BODY_BYTES`] is
//!    refused with 413 before a byte is read;
//! 4. `DefaultBodyLimit::max(MAX_BODY_BYTES)` for the body extractor;
//! 5. `require_bearer`: the constant-time bearer check (401);
//! 6. the handler, [`super::chat::chat`].
//!
//! Every other request (any other path, any other method on this path) goes through the
//! router unchanged. The in-process tests check, request by request, that both ways
//! answer alike.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use std::time::Instant;

use tower::ServiceExt;

use super::{MAX_BODY_BYTES, RawBody, bearer_matches, chat, declared_oversize};
use crate::error::ApiError;
use crate::metrics::Trace;
use crate::state::AppState;

/// The route the direct dispatch serves.
pub(crate) const CHAT_ROUTE: &str = "/v1/chat/completions";

/// Which way a request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dispatch {
    /// `POST /v1/chat/completions`, inline.
    Chat,
    /// Everything else, through axum's router.
    Router,
}

impl Dispatch {
    /// The way for a request with `method` and (raw) `path`: the router matches the raw
    /// path exactly, so the same comparison here picks the same requests.
    pub(crate) fn of(method: &Method, path: &str) -> Self {
        if method == Method::POST && path == CHAT_ROUTE {
            Self::Chat
        } else {
            Self::Router
        }
    }
}

/// The gateway's HTTP application: the router, plus the direct dispatch of the chat
/// route (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct App {
    router: Router,
    state: AppState,
}

impl App {
    /// The application over `state` (the router is [`super::app`]).
    pub(crate) fn new(state: AppState) -> Self {
        Self {
            router: super::app(state.clone()),
            state,
        }
    }

    /// Serves one request, the chat route directly and the rest through the router.
    pub(crate) async fn handle(&self, request: Request) -> Response {
        match Dispatch::of(request.method(), request.uri().path()) {
            Dispatch::Chat => self.chat(request).await,
            Dispatch::Router => match self.router.clone().oneshot(request).await {
                Ok(response) => response,
                Err(infallible) => match infallible {},
            },
        }
    }

    /// `POST /v1/chat/completions` with the router's layers inline (module documentation).
    pub(crate) async fn chat(&self, request: Request) -> Response {
        let state = &self.state;
        let start = Instant::now();
        let trace = Trace::default();
        let mut shutdown = state.shutdown();
        let response = tokio::select! {
            response = guarded(state, &trace, request) => response,
            () = shutdown.fired() => crate::shutdown::shutting_down().into_response(),
        };
        let mut response =
            crate::metrics::record(state, CHAT_ROUTE.to_owned(), start, &trace, response);
        set_content_length(&mut response);
        response
    }
}

/// What axum's router does to every response of a route: a body of known length gets its
/// `Content-Length` (hyper would write the same one, but the head then matches the
/// router's exactly).
fn set_content_length(response: &mut Response) {
    if response.headers().contains_key(header::CONTENT_LENGTH) {
        return;
    }
    if let Some(size) = http_body::Body::size_hint(response.body()).exact() {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
}

/// Layers 3 to 6 of the module documentation.
async fn guarded(state: &AppState, trace: &Trace, mut request: Request) -> Response {
    if let Some(refusal) = declared_oversize(request.headers()) {
        return refusal.into_response();
    }
    if !bearer_matches(state, request.headers()) {
        return ApiError::unauthorized().into_response();
    }
    // The body extractor reads only the body (and the limit's extension), so the headers
    // can move out first.
    let headers = std::mem::take(request.headers_mut());
    DefaultBodyLimit::max(MAX_BODY_BYTES).apply(&mut request);
    let body: RawBody = Bytes::from_request(request, &()).await;
    chat::chat(state, trace, &headers, body)
        .await
        .into_response()
}

#[cfg(test)]
mod tests {
    //! The direct dispatch against the router, request by request: the same status,
    //! headers (but the measured overhead and the date) and body either way.

    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use serde_json::Value;
    use tokio::net::TcpListener;

    use super::*;
    use crate::metrics::{ENDPOINT_HEADER, OVERHEAD_HEADER};
    use crate::state::{self, Booted};

    const KEY: &str = "direct-key";
    const REPLY: &str = r#"{"id":"c","object":"chat.completion","model":"up-chat","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;

    /// A scripted upstream on 127.0.0.1:0: `/v1/chat/completions` answers `REPLY`
    /// (`hang`: never answers). Stopped when the test's runtime ends.
    async fn upstream(hang: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move || async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                ([(header::CONTENT_TYPE, "application/json")], REPLY)
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/v1")
    }

    /// A booted gateway whose model `chat-a` fails over from a refused endpoint to
    /// `live_url`, plus `solo` on the refused endpoint alone.
    async fn boot(live_url: &str) -> (Booted, tempfile::TempDir) {
        let boot = format!(
            r#"
[server]
bind = "127.0.0.1:0"
api_key = "{KEY}"

[[endpoint]]
id = "refused"
base_url = "http://127.0.0.1:1/v1"

[[endpoint]]
id = "live"
base_url = "{live_url}"

[[model]]
name = "chat-a"
description = "A chat model"
context = 4096
upstream = "up-chat"
endpoints = ["refused", "live"]

[[model]]
name = "solo"
description = "Only the refused endpoint"
context = 4096
upstream = "up-chat"
endpoints = ["refused"]

[[model]]
name = "embed-b"
kind = "embedding"
description = "An embedding model"
context = 512
upstream = "up-embed"
endpoints = ["live"]
"#
        );
        state::boot_in_tempdir(&boot).await
    }

    #[derive(Debug, PartialEq)]
    struct Seen {
        status: StatusCode,
        headers: Vec<(String, String)>,
        body: Value,
    }

    async fn seen(response: Response) -> Seen {
        let status = response.status();
        let overhead = response.headers().get(OVERHEAD_HEADER).cloned();
        assert!(
            overhead.is_some_and(|v| v.to_str().unwrap().parse::<f64>().is_ok()),
            "every answer carries the overhead header"
        );
        let mut headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(name, _)| **name != OVERHEAD_HEADER)
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        headers.sort();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        Seen {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap(),
        }
    }

    fn chat_request(body: impl Into<Body>, headers: &[(&str, &str)]) -> Request<Body> {
        let mut request = Request::post(CHAT_ROUTE);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(body.into()).unwrap()
    }

    const BEARER: (&str, &str) = ("authorization", "Bearer direct-key");

    /// Serves `make()` through the router and through [`App::chat`]; both must agree.
    async fn both(app: &App, make: impl Fn() -> Request<Body>) -> Seen {
        let routed = seen(app.router.clone().oneshot(make()).await.unwrap()).await;
        let direct = seen(app.chat(make()).await).await;
        assert_eq!(routed, direct);
        direct
    }

    fn requests_counter(exposition: &str, status: u16, model: &str, endpoint: &str) -> u64 {
        let wanted = format!(
            "promptforge_gateway_requests_total{{route=\"/v1/chat/completions\",model=\"{model}\",endpoint=\"{endpoint}\",status=\"{status}\"}} "
        );
        exposition
            .lines()
            .find_map(|line| line.strip_prefix(&wanted))
            .map_or(0, |n| n.trim().parse().unwrap())
    }

    #[test]
    fn only_post_to_the_chat_route_is_dispatched_directly() {
        assert_eq!(
            Dispatch::of(&Method::POST, "/v1/chat/completions"),
            Dispatch::Chat
        );
        for (method, path) in [
            (Method::GET, "/v1/chat/completions"),
            (Method::HEAD, "/v1/chat/completions"),
            (Method::PUT, "/v1/chat/completions"),
            (Method::POST, "/v1/chat/completions/"),
            (Method::POST, "/v1/chat/Completions"),
            (Method::POST, "/v1/chat/%63ompletions"),
            (Method::POST, "/v1/embeddings"),
            (Method::POST, "/health"),
        ] {
            assert_eq!(
                Dispatch::of(&method, path),
                Dispatch::Router,
                "{method} {path}"
            );
        }
    }

    #[tokio::test]
    async fn the_direct_chat_route_answers_as_the_router_does() {
        let live = upstream(false).await;
        let (booted, _dir) = boot(&live).await;
        let app = App::new(booted.state.clone());
        let plain = r#"{"model":"chat-a","messages":[{"role":"user","content":"hi"}]}"#;
        let ct = ("content-type", "application/json");

        // The plain case, failing over from the refused endpoint to the live one.
        let ok = both(&app, || chat_request(plain, &[BEARER, ct])).await;
        assert_eq!(ok.status, StatusCode::OK);
        assert_eq!(ok.body["model"], "chat-a");
        assert!(
            ok.headers
                .contains(&(ENDPOINT_HEADER.to_string(), "live".into()))
        );

        // Bad, missing and malformed bearers.
        for auth in [
            Some("Bearer wrong"),
            Some("Basic direct-key"),
            Some("direct-key"),
            None,
        ] {
            let refused = both(&app, || {
                let mut headers = vec![ct];
                if let Some(auth) = auth {
                    headers.push(("authorization", auth));
                }
                chat_request(plain, &headers)
            })
            .await;
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{auth:?}");
            assert_eq!(refused.body["error"]["code"], "unauthorized");
        }
        // A lowercase scheme and padding around the token pass, as before.
        let ok = both(&app, || {
            chat_request(plain, &[("authorization", "bearer  direct-key "), ct])
        })
        .await;
        assert_eq!(ok.status, StatusCode::OK);

        // A declared oversize body is refused before the bearer is even looked at; an
        // undeclared (streamed) one is cut at the cap.
        let declared = (MAX_BODY_BYTES + 1).to_string();
        let oversize = both(&app, || {
            chat_request(plain, &[("content-length", declared.as_str()), ct])
        })
        .await;
        assert_eq!(oversize.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(oversize.body["error"]["code"], "payload_too_large");
        let streamed = both(&app, || {
            let chunks = futures::stream::iter(
                (0..33).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1 << 20]))),
            );
            chat_request(Body::from_stream(chunks), &[BEARER, ct])
        })
        .await;
        assert_eq!(streamed.status, StatusCode::PAYLOAD_TOO_LARGE);

        // Bodies the fast path declines: the general path's errors, word for word.
        for body in [
            "{not json",
            r#"{"model":"chat-a","messages":[{"role":"robot","content":"hi"}]}"#,
            r#"{"model":"chat-a","messages":[]}"#,
            r#"{"model":"nobody","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"embed-b","messages":[{"role":"user","content":"hi"}]}"#,
        ] {
            let declined = both(&app, || chat_request(body, &[BEARER, ct])).await;
            assert!(declined.status.is_client_error(), "{body}: {declined:?}");
        }
        // A declined body that is still valid (`stream: null`) goes upstream by the
        // general path.
        let general = both(&app, || {
            chat_request(
                r#"{"model":"chat-a","messages":[{"role":"user","content":"hi"}],"stream":null}"#,
                &[BEARER, ct],
            )
        })
        .await;
        assert_eq!(general.status, StatusCode::OK);
        assert_eq!(general.body["model"], "chat-a");

        // Every endpoint failing: the last error, and the endpoint tried last.
        let failed = both(&app, || {
            chat_request(
                r#"{"model":"solo","messages":[{"role":"user","content":"hi"}]}"#,
                &[BEARER, ct],
            )
        })
        .await;
        assert_eq!(failed.status, StatusCode::BAD_GATEWAY);
        assert_eq!(failed.body["error"]["code"], "upstream_transport");
        assert!(
            failed
                .headers
                .contains(&(ENDPOINT_HEADER.to_string(), "refused".into()))
        );

        // The metrics count both ways alike, under the route pattern: three successes
        // each way (plain, padded bearer, general path).
        let exposition = booted.state.metrics().render(&booted.state);
        assert_eq!(requests_counter(&exposition, 200, "chat-a", "live"), 2 * 3);
        assert_eq!(requests_counter(&exposition, 401, "", ""), 2 * 4);
        assert_eq!(requests_counter(&exposition, 413, "", ""), 2 * 2);
        assert_eq!(requests_counter(&exposition, 502, "solo", "refused"), 2);
        assert!(
            exposition.contains(
                "promptforge_gateway_failovers_total{model=\"chat-a\",endpoint=\"refused\",reason=\"transport\"}"
            ),
            "{exposition}"
        );
    }

    #[tokio::test]
    async fn a_request_still_running_at_the_end_of_the_drain_gets_shutting_down() {
        let hanging = upstream(true).await;
        let (booted, _dir) = boot(&hanging).await;
        let app = App::new(booted.state.clone());
        let request = || {
            chat_request(
                r#"{"model":"chat-a","messages":[{"role":"user","content":"hi"}]}"#,
                &[BEARER],
            )
        };
        let routed = tokio::spawn({
            let router = app.router.clone();
            async move { seen(router.oneshot(request()).await.unwrap()).await }
        });
        let direct = tokio::spawn({
            let app = app.clone();
            async move { seen(app.chat(request()).await).await }
        });
        // Both requests wait on the hanging upstream; then the drain ends.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!routed.is_finished() && !direct.is_finished());
        booted.shutdown.fire();
        let within = Duration::from_secs(10);
        let routed = tokio::time::timeout(within, routed).await.unwrap().unwrap();
        let direct = tokio::time::timeout(within, direct).await.unwrap().unwrap();
        assert_eq!(routed, direct);
        assert_eq!(direct.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(direct.body["error"]["code"], "shutting_down");
    }
}
