//! A scripted OpenAI-compatible upstream on loopback for the model fixtures: it lists one
//! chat model, replays `<name>.script.json` in order and records every request.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use promptforge_test_support::{Loopback, Replay, Reply, has_bearer};
use serde_json::{Value as Json, json};

pub const KEY: &str = "fixture-key";
pub const MODEL: &str = "chat-general";

/// The scripted upstream; stopped when dropped.
pub struct Upstream {
    pub url: String,
    replay: Arc<Replay>,
    _server: Loopback,
}

/// Turns a script entry (`{"text": ...}` or `{"calls": [[name, args], ...]}`) into a chat
/// completion body.
fn completion(entry: &Json) -> Json {
    if let Some(text) = entry["text"].as_str() {
        return json!({"id": "x", "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]});
    }
    let calls: Vec<Json> = entry["calls"]
        .as_array()
        .expect("a script entry has `text` or `calls`")
        .iter()
        .enumerate()
        .map(|(i, call)| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": call[0], "arguments": call[1]}})
        })
        .collect();
    json!({"id": "x", "object": "chat.completion", "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": calls}}]})
}

impl Upstream {
    pub async fn start(script: &[Json]) -> Self {
        let replay = Replay::new(
            KEY,
            script.iter().map(|entry| Reply::Json(completion(entry))),
        );
        let app = Router::new()
            .route("/v1/models", get(models))
            .merge(replay.router());
        let server = Loopback::serve(app).await.unwrap();
        Self {
            url: server.url().to_owned(),
            replay,
            _server: server,
        }
    }

    pub fn requests(&self) -> Vec<Json> {
        self.replay.requests()
    }

    pub fn remaining(&self) -> usize {
        self.replay.remaining()
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    has_bearer(headers, KEY)
}

async fn models(headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    axum::Json(json!({"object": "list", "data": [
        {"id": MODEL, "object": "model", "kind": "chat",
         "description": "A general chat model", "context": 8192, "thinking": "never"}
    ]}))
    .into_response()
}
