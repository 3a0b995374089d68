//! In-process tests of [`app`]: the router driven with `tower::ServiceExt::oneshot`, no
//! socket and no child process (the spawned-binary tests live in `tests/gateway/`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::Value;
use tower::ServiceExt;

use super::app;
use crate::state::{self, AppState};

const KEY: &str = "in-process-key";

/// A booted state over a temporary configuration: one chat and one embedding model on an
/// endpoint nothing listens on (no test here goes upstream).
async fn state() -> (AppState, tempfile::TempDir) {
    let boot = format!(
        r#"
[server]
bind = "127.0.0.1:0"
api_key = "{KEY}"

[[endpoint]]
id = "up"
base_url = "http://127.0.0.1:1/v1"

[[model]]
name = "chat-a"
description = "A chat model"
context = 4096
upstream = "up-chat"
endpoints = ["up"]
thinking = "switchable"
max_output = 1024

[[model]]
name = "embed-b"
kind = "embedding"
description = "An embedding model"
context = 512
upstream = "up-embed"
endpoints = ["up"]
"#
    );
    let (booted, dir) = state::boot_in_tempdir(&boot).await;
    (booted.state, dir)
}

async fn send(state: &AppState, request: Request<Body>) -> (StatusCode, Option<String>, Value) {
    let response = app(state.clone()).oneshot(request).await.unwrap();
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
async fn health_needs_no_bearer() {
    let (state, _dir) = state().await;
    let (status, _, body) = send(&state, get("/health", None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, serde_json::json!({"status": "serving"}));
}

#[tokio::test]
async fn models_are_listed_only_with_the_bearer() {
    let (state, _dir) = state().await;
    for key in [None, Some("wrong-key")] {
        let (status, challenge, body) = send(&state, get("/v1/models", key)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert_eq!(challenge.as_deref(), Some("Bearer"));
        assert_eq!(body["error"]["code"], "unauthorized");
        assert_eq!(body["error"]["type"], "authentication_error");
    }
    let (status, _, body) = send(&state, get("/v1/models", Some(KEY))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["object"], "list");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["id"], "chat-a");
    assert_eq!(data[0]["object"], "model");
    assert_eq!(data[0]["owned_by"], "promptforge-gateway");
    assert_eq!(data[0]["kind"], "chat");
    assert_eq!(data[0]["thinking"], "switchable");
    assert_eq!(data[0]["max_output"], 1024);
    assert_eq!(data[0]["effort_levels"], serde_json::json!([]));
    assert!(data[0].get("default_temperature").is_none());
    assert_eq!(data[1]["kind"], "embedding");
    assert_eq!(data[1]["thinking"], "never");
    // The client side of the contract reads what the gateway writes.
    let list = promptforge_wire::ModelList::from_slice(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        list.data[1].kind,
        Some(promptforge_wire::ModelKind::Embedding)
    );
}

#[tokio::test]
async fn errors_are_enveloped_with_the_status_of_their_code() {
    let (state, _dir) = state().await;
    let (status, _, body) = send(&state, get("/v1/nothing-here", Some(KEY))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        serde_json::json!({"error": {"message": "no such route",
            "type": "invalid_request_error", "code": "not_found"}})
    );
    let (status, _, body) = send(
        &state,
        post("/v1/embeddings", r#"{"model": "chat-a", "input": "x"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "kind_mismatch");
    let (status, _, body) = send(&state, post("/v1/chat/completions", "{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");
    let (status, _, body) = send(&state, post("/v1/tools/web_search", r#"{"query": "q"}"#)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
}
