//! The service in process with a scripted transport: no socket, no child process, no
//! timer. The direct chat dispatch against the router, request by request (both run the
//! one layer function; these tests pin that they answer alike), and the basics of auth,
//! the catalog and the envelopes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::layer::{ENDPOINT_HEADER, OVERHEAD_HEADER};
use super::{CHAT_ROUTE, MAX_BODY_BYTES, Service};
use crate::app::{Booted, boot_in_tempdir};
use crate::tests::scripted::{Act, Scripted, completion, refused};

const KEY: &str = "in-process-key";

/// A booted gateway over a scripted transport: `chat-a` fails over from `refused` to
/// `live`, `solo` has only `refused`, `embed-b` is on `live`.
async fn boot() -> (Booted, Arc<Scripted>, tempfile::TempDir) {
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
base_url = "http://127.0.0.1:2/v1"

[[model]]
name = "chat-a"
description = "A chat model"
context = 4096
upstream = "up-chat"
endpoints = ["refused", "live"]
thinking = "switchable"
max_output = 1024

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
    let scripted = Arc::new(Scripted::default());
    scripted.always("refused", refused("refused"));
    scripted.always("live", completion("up-chat", "hi"));
    let (booted, dir) = boot_in_tempdir(&boot, scripted.clone()).await;
    (booted, scripted, dir)
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

const BEARER: (&str, &str) = ("authorization", "Bearer in-process-key");

/// Serves `make()` through the router and through the direct dispatch; both must agree.
async fn both(service: &Service, make: impl Fn() -> Request<Body>) -> Seen {
    let routed = seen(service.router().oneshot(make()).await.unwrap()).await;
    let direct = seen(service.handle(make()).await).await;
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

#[tokio::test]
async fn the_direct_chat_route_answers_as_the_router_does() {
    let (booted, scripted, _dir) = boot().await;
    let service = &booted.service;
    let plain = r#"{"model":"chat-a","messages":[{"role":"user","content":"hi"}]}"#;
    let ct = ("content-type", "application/json");

    // The plain case, failing over from the refused endpoint to the live one.
    let ok = both(service, || chat_request(plain, &[BEARER, ct])).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.body["model"], "chat-a");
    assert!(
        ok.headers
            .contains(&(ENDPOINT_HEADER.to_string(), "live".into()))
    );
    // The second way skips `refused`: it is cooling down after the first way's failure.
    assert_eq!(scripted.tried(), ["refused", "live", "live"]);
    assert_eq!(scripted.sent()[1].body["model"], "up-chat");

    // Bad, missing and malformed bearers.
    for auth in [
        Some("Bearer wrong"),
        Some("Basic in-process-key"),
        Some("in-process-key"),
        None,
    ] {
        let refused = both(service, || {
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
    // A lowercase scheme and padding around the token pass.
    let ok = both(service, || {
        chat_request(plain, &[("authorization", "bearer  in-process-key "), ct])
    })
    .await;
    assert_eq!(ok.status, StatusCode::OK);

    // A declared oversize body is refused before the bearer is even looked at; an
    // undeclared (streamed) one is cut at the cap.
    let declared = (MAX_BODY_BYTES + 1).to_string();
    let oversize = both(service, || {
        chat_request(plain, &[("content-length", declared.as_str()), ct])
    })
    .await;
    assert_eq!(oversize.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(oversize.body["error"]["code"], "payload_too_large");
    let streamed = both(service, || {
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
        let declined = both(service, || chat_request(body, &[BEARER, ct])).await;
        assert!(declined.status.is_client_error(), "{body}: {declined:?}");
    }
    // A declined body that is still valid (`stream: null`) goes upstream by the general
    // path.
    let general = both(service, || {
        chat_request(
            r#"{"model":"chat-a","messages":[{"role":"user","content":"hi"}],"stream":null}"#,
            &[BEARER, ct],
        )
    })
    .await;
    assert_eq!(general.status, StatusCode::OK);
    assert_eq!(general.body["model"], "chat-a");

    // Every endpoint failing: the last error, and the endpoint tried last.
    let failed = both(service, || {
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

    // The metrics count both ways alike, under the route pattern: three successes each
    // way (plain, padded bearer, general path).
    let ctx = service.ctx();
    let exposition = ctx.metrics.render(&ctx.plans.load(), ctx.shared.as_deref());
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
    let (booted, scripted, _dir) = boot().await;
    scripted.always("live", Act::Hang);
    let request = || {
        chat_request(
            r#"{"model":"chat-a","messages":[{"role":"user","content":"hi"}]}"#,
            &[BEARER],
        )
    };
    let routed = tokio::spawn({
        let router = booted.service.router();
        async move { seen(router.oneshot(request()).await.unwrap()).await }
    });
    let direct = tokio::spawn({
        let service = booted.service.clone();
        async move { seen(service.handle(request()).await).await }
    });
    // Both requests reach the hanging endpoint (the second skips `refused`, cooling down
    // after the first one's failure); then the drain ends.
    while scripted.tried().len() < 3 {
        tokio::task::yield_now().await;
    }
    assert!(!routed.is_finished() && !direct.is_finished());
    booted.shutdown.fire();
    let within = Duration::from_secs(10);
    let routed = tokio::time::timeout(within, routed).await.unwrap().unwrap();
    let direct = tokio::time::timeout(within, direct).await.unwrap().unwrap();
    assert_eq!(routed, direct);
    assert_eq!(direct.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(direct.body["error"]["code"], "shutting_down");
}

async fn send(service: &Service, request: Request<Body>) -> (StatusCode, Option<String>, Value) {
    let response = service.handle(request).await;
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, challenge, serde_json::from_slice(&bytes).unwrap())
}

fn get(path: &str, key: Option<&str>) -> Request<Body> {
    let mut request = Request::get(path);
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    request.body(Body::empty()).unwrap()
}

fn post(path: &str, body: &'static str) -> Request<Body> {
    Request::post(path)
        .header(header::AUTHORIZATION, format!("Bearer {KEY}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap()
}

#[tokio::test]
async fn health_needs_no_bearer_and_models_need_it() {
    let (booted, _scripted, _dir) = boot().await;
    let service = &booted.service;
    let (status, _, body) = send(service, get("/health", None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"status": "serving"}));
    for key in [None, Some("wrong-key")] {
        let (status, challenge, body) = send(service, get("/v1/models", key)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert_eq!(challenge.as_deref(), Some("Bearer"));
        assert_eq!(body["error"]["code"], "unauthorized");
        assert_eq!(body["error"]["type"], "authentication_error");
    }
    let (status, _, body) = send(service, get("/v1/models", Some(KEY))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["object"], "list");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data[0]["id"], "chat-a");
    assert_eq!(data[0]["object"], "model");
    assert_eq!(data[0]["owned_by"], "promptforge-gateway");
    assert_eq!(data[0]["kind"], "chat");
    assert_eq!(data[0]["thinking"], "switchable");
    assert_eq!(data[0]["max_output"], 1024);
    assert_eq!(data[0]["effort_levels"], json!([]));
    assert!(data[0].get("default_temperature").is_none());
    assert_eq!(data[2]["kind"], "embedding");
    assert_eq!(data[2]["thinking"], "never");
    // The client side of the contract reads what the gateway writes.
    let list = promptforge_wire::ModelList::from_slice(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        list.data[2].kind,
        Some(promptforge_wire::ModelKind::Embedding)
    );
}

#[tokio::test]
async fn errors_are_enveloped_with_the_status_of_their_code() {
    let (booted, _scripted, _dir) = boot().await;
    let service = &booted.service;
    let (status, _, body) = send(service, get("/v1/nothing-here", Some(KEY))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": {"message": "no such route",
            "type": "invalid_request_error", "code": "not_found"}})
    );
    let (status, _, body) = send(
        service,
        post("/v1/embeddings", r#"{"model": "chat-a", "input": "x"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "kind_mismatch");
    let (status, _, body) = send(service, post(CHAT_ROUTE, "{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");
    let (status, _, body) = send(service, post("/v1/tools/web_search", r#"{"query": "q"}"#)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
}
