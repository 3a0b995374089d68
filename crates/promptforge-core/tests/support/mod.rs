//! Test support: a scripted OpenAI-compatible upstream on loopback, fake tools, and a
//! shared embedding model.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use promptforge_core::tools::{Tool, ToolError, ToolId, ToolOutput};
pub use promptforge_test_support::Reply;
use promptforge_test_support::{Loopback, Replay, has_bearer};
use promptforge_tool_picker::{Config, Model, ToolPicker};
use serde_json::{Value as Json, json};

pub const KEY: &str = "test-key";

/// A chat completion with text content.
pub fn text(content: &str) -> Reply {
    finish(content, "stop")
}

/// A chat completion with text content and a finish reason.
pub fn finish(content: &str, reason: &str) -> Reply {
    Reply::Json(json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": reason,
                     "message": {"role": "assistant", "content": content}}]
    }))
}

/// A chat completion that calls tools: `(name, arguments JSON)`.
pub fn calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<Json> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    Reply::Json(json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": calls}}]
    }))
}

#[derive(Default)]
struct Script {
    searches: Mutex<Vec<Json>>,
    catalog: Mutex<Json>,
}

/// The scripted upstream: replays chat replies in order and records every request; also
/// serves a settable model catalog and a canned web search.
pub struct Upstream {
    pub url: String,
    replay: Arc<Replay>,
    script: Arc<Script>,
    _server: Loopback,
}

impl Upstream {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let replay = Replay::new(KEY, replies);
        let script = Arc::new(Script::default());
        *script.catalog.lock().unwrap() = default_catalog();
        let app = Router::new()
            .route("/v1/models", get(models))
            .route("/v1/tools/web_search", post(search))
            .with_state(Arc::clone(&script))
            .merge(replay.router());
        let server = Loopback::serve(app).await.unwrap();
        Self {
            url: server.url().to_owned(),
            replay,
            script,
            _server: server,
        }
    }

    pub fn requests(&self) -> Vec<Json> {
        self.replay.requests()
    }

    pub fn traceparents(&self) -> Vec<Option<String>> {
        self.replay.traceparents()
    }

    pub fn searches(&self) -> Vec<Json> {
        self.script.searches.lock().unwrap().clone()
    }

    pub fn set_catalog(&self, catalog: Json) {
        *self.script.catalog.lock().unwrap() = catalog;
    }

    pub fn remaining(&self) -> usize {
        self.replay.remaining()
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    has_bearer(headers, KEY)
}

async fn models(State(script): State<Arc<Script>>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    axum::Json(script.catalog.lock().unwrap().clone()).into_response()
}

async fn search(State(script): State<Arc<Script>>, headers: HeaderMap, body: String) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let body: Json = serde_json::from_str(&body).unwrap();
    script.searches.lock().unwrap().push(body.clone());
    axum::Json(json!({"query": body["query"], "results": [
        {"title": "Rust 2026", "url": "https://example.com/rust", "description": "News"}]}))
    .into_response()
}

/// Three chat models and an embedding model with distinct descriptions.
pub fn default_catalog() -> Json {
    json!({"object": "list", "data": [
        {"id": "story-writer-v2", "object": "model", "kind": "chat",
         "description": "A creative writing model for stories, poems and marketing prose",
         "context": 32768, "thinking": "never"},
        {"id": "code-pro", "object": "model", "kind": "chat",
         "description": "A code generation model for programming, debugging and refactoring software",
         "context": 131072, "thinking": "never", "max_output": 8192},
        {"id": "deep-reasoner", "object": "model", "kind": "chat",
         "description": "A careful reasoning model for mathematics, logic puzzles and analysis",
         "context": 200000, "thinking": "switchable"},
        {"id": "embedder", "object": "model", "kind": "embedding",
         "description": "Text embeddings for semantic search"}
    ]})
}

/// The compiled-in embedding model, loaded once per test binary.
pub fn model() -> Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL
        .get_or_init(|| Model::load().expect("the embedding model loads"))
        .clone()
}

/// A fake tool that records its calls.
pub struct FakeTool {
    id: ToolId,
    wire: String,
    description: String,
    parameters: Json,
    trusted: bool,
    pub calls: Mutex<Vec<String>>,
    fail: bool,
}

impl FakeTool {
    pub fn new(name: &str, description: &str, trusted: bool) -> Arc<Self> {
        Self::on("test", name, description, trusted)
    }

    pub fn on(server: &str, name: &str, description: &str, trusted: bool) -> Arc<Self> {
        Arc::new(Self {
            id: ToolId::new(server, name),
            wire: name.to_owned(),
            description: description.to_owned(),
            parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
            trusted,
            calls: Mutex::new(Vec::new()),
            fail: false,
        })
    }

    pub fn failing(name: &str, description: &str) -> Arc<Self> {
        Arc::new(Self {
            fail: true,
            ..Arc::try_unwrap(Self::new(name, description, true))
                .ok()
                .unwrap()
        })
    }
}

#[async_trait]
impl Tool for FakeTool {
    fn id(&self) -> &ToolId {
        &self.id
    }
    fn wire_name(&self) -> &str {
        &self.wire
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Json {
        &self.parameters
    }
    async fn call(&self, arguments: &str) -> Result<ToolOutput, ToolError> {
        self.calls.lock().unwrap().push(arguments.to_owned());
        if self.fail {
            return Err(ToolError::backend("the backend is down"));
        }
        let text = format!("{} result for {arguments}", self.wire);
        Ok(if self.trusted {
            ToolOutput::trusted(text)
        } else {
            ToolOutput::untrusted(text)
        })
    }
    fn untrusted(&self) -> bool {
        !self.trusted
    }
}

/// A picker over these tools.
pub fn picker(tools: &promptforge_core::ToolCatalog) -> ToolPicker {
    picker_with(tools, Config::default())
}

/// A picker over these tools with a custom configuration.
pub fn picker_with(tools: &promptforge_core::ToolCatalog, config: Config) -> ToolPicker {
    ToolPicker::build_with_model(&model(), tools.picker_catalog(), config).unwrap()
}
