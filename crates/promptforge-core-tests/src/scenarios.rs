//! The real-model scenarios: each runs a prompt from `scenarios/` (or a raw request) against
//! SmolLM2 through a real gateway and checks what a real model cannot fake.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use promptforge_core::client::{GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::observe::{DebugCapture, DebugEvent};
use promptforge_core::{
    NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig, StoreRef,
    ToolCatalog, run,
};
use promptforge_tool_picker::{Config, ToolPicker};
use serde_json::{Value as Json, json};

use crate::ScenarioError;
use crate::gateway::{GatewayGuard, MODEL_NAME};

/// The longest one scenario may run.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

/// What the observer and the debug sink saw during one run.
#[derive(Debug, Default)]
pub struct Seen {
    /// `(model, finish_reason, turn)` of every completed model turn.
    pub turns: Vec<(String, Option<String>, u32)>,
    /// Arms started.
    pub arms_started: usize,
    /// Arms finished ok.
    pub arms_ok: usize,
    /// Tool calls that succeeded.
    pub tool_calls: usize,
    /// Request bodies sent to the gateway, in order.
    pub requests: Vec<Json>,
    /// Finish reasons of the responses, in order.
    pub responses: Vec<Option<String>>,
}

/// Records observations and debug events into a shared [`Seen`].
#[derive(Debug, Default, Clone)]
pub struct Recorder(pub Arc<Mutex<Seen>>);

impl Recorder {
    fn with<R>(&self, f: impl FnOnce(&mut Seen) -> R) -> R {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut seen)
    }
}

impl Observer for Recorder {
    fn observe(&self, _execution: &str, _section: &str, event: Observation<'_>) {
        self.with(|s| match event {
            Observation::ModelTurnCompleted {
                model,
                finish_reason,
                turn,
            } => s
                .turns
                .push((model.to_owned(), finish_reason.map(str::to_owned), turn)),
            Observation::ArmStarted { .. } => s.arms_started += 1,
            Observation::ArmFinished { ok: true, .. } => s.arms_ok += 1,
            Observation::ToolCallSucceeded { .. } => s.tool_calls += 1,
            _ => {}
        });
    }
}

impl DebugCapture for Recorder {
    fn on_event(&self, _execution: &str, _section: &str, _turn: u32, event: DebugEvent<'_>) {
        self.with(|s| match event {
            DebugEvent::Request { body } => s.requests.push(body.clone()),
            DebugEvent::Response { finish_reason, .. } => {
                s.responses.push(finish_reason.map(str::to_owned))
            }
            _ => {}
        });
    }
}

/// The shared resources of a scenario run.
pub struct Harness {
    gateway: GatewayGuard,
    client: GatewayClient,
    models: ModelCatalog,
    tools: ToolCatalog,
    picker: ToolPicker,
}

/// The outcome of one prompt run.
pub struct Ran {
    /// The run's result string.
    pub result: String,
    /// The run's store.
    pub store: StoreRef,
    /// What was observed.
    pub seen: Seen,
}

impl Harness {
    /// Connects to a ready gateway: fetches the catalog and builds the (empty) tool picker.
    pub async fn new(gateway: GatewayGuard) -> Result<Self, ScenarioError> {
        let client = GatewayClient::new(&gateway.url, &gateway.key)
            .map_err(|e| ScenarioError::Setup(format!("gateway client: {e}")))?;
        let models = client
            .models(RequestLimits::default())
            .await
            .map_err(|e| ScenarioError::Setup(format!("model catalog: {e}")))?;
        let tools = ToolCatalog::new(&[]).map_err(|e| ScenarioError::Setup(e.to_string()))?;
        let picker = ToolPicker::build(tools.picker_catalog(), Config::default())
            .map_err(|e| ScenarioError::Setup(format!("tool picker: {e}")))?;
        Ok(Self {
            gateway,
            client,
            models,
            tools,
            picker,
        })
    }

    /// The gateway's process id and its live descendants (the llama-server guards and
    /// servers).
    pub fn processes(&self) -> (u32, Vec<u32>) {
        let pid = self.gateway.pid();
        (pid, crate::gateway::descendants(pid))
    }

    /// Parses `scenarios/<name>` and runs it with `input`, recording what it saw.
    pub async fn run_prompt(&self, name: &str, input: &str) -> Result<Ran, ScenarioError> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name);
        let source = std::fs::read_to_string(&path)
            .map_err(|e| ScenarioError::Setup(format!("{}: {e}", path.display())))?;
        let execution = format!("scenario-{name}");
        let prompt = Prompt::parse_named(name, &source, &execution, &NullObserver)
            .map_err(|e| ScenarioError::Failed(format!("parse: {e}")))?;
        let recorder = Recorder::default();
        let store = StoreRef::memory();
        let config = RunConfig::new(execution)
            .client(self.client.clone())
            .observer(Arc::new(recorder.clone()))
            .debug(Arc::new(recorder.clone()));
        let resolution = ResolutionContext::new(&self.picker, &self.models, &self.tools);
        let result = run(&prompt, input, resolution, &store, config)
            .await
            .map_err(|e| ScenarioError::Failed(format!("run: {e}")))?;
        let seen = std::mem::take(&mut *recorder.0.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Ran {
            result,
            store,
            seen,
        })
    }
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), ScenarioError> {
    if cond {
        Ok(())
    } else {
        Err(ScenarioError::Failed(what()))
    }
}

fn read(store: &StoreRef, path: &str) -> Result<String, ScenarioError> {
    store
        .read(path)
        .map_err(|e| ScenarioError::Failed(format!("store {path}: {e}")))
}

fn non_empty(store: &StoreRef, path: &str) -> Result<String, ScenarioError> {
    let text = read(store, path)?;
    check(!text.trim().is_empty(), || format!("store {path} is empty"))?;
    Ok(text)
}

fn turns(ran: &Ran, n: usize) -> Result<(), ScenarioError> {
    check(ran.seen.turns.len() == n, || {
        format!(
            "expected {n} model turns, the observer saw {:?}",
            ran.seen.turns
        )
    })?;
    check(
        ran.seen.turns.iter().all(|(m, _, _)| m == MODEL_NAME),
        || format!("a turn went to another model: {:?}", ran.seen.turns),
    )
}

fn user_text(request: &Json) -> String {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// One scenario: its name and what it does.
pub type ScenarioFn = for<'a> fn(
    &'a Harness,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<String, ScenarioError>> + Send + 'a>,
>;

/// Every scenario, in the order they run.
pub fn all() -> Vec<(&'static str, ScenarioFn)> {
    vec![
        ("plain_text", |h| Box::pin(plain_text(h))),
        ("jump_reply", |h| Box::pin(jump_reply(h))),
        ("h1_only", |h| Box::pin(h1_only(h))),
        ("fanout_arms", |h| Box::pin(fanout_arms(h))),
        ("infer_forms", |h| Box::pin(infer_forms(h))),
        ("tool_request", |h| Box::pin(tool_request(h))),
        ("streaming", |h| Box::pin(streaming(h))),
    ]
}

async fn plain_text(h: &Harness) -> Result<String, ScenarioError> {
    let ran = h.run_prompt("plain_text.md", "").await?;
    turns(&ran, 1)?;
    let answer = non_empty(&ran.store, "answer.txt")?;
    check(ran.result == answer, || {
        format!("the result {:?} is not the reply {answer:?}", ran.result)
    })?;
    check(ran.seen.requests.len() == 1, || {
        "expected one request".into()
    })?;
    let sent = user_text(&ran.seen.requests[0]);
    check(sent.contains("what colour is the sky"), || {
        format!("the rendered prose did not go out: {sent:?}")
    })?;
    Ok(format!("{} chars", answer.chars().count()))
}

async fn jump_reply(h: &Harness) -> Result<String, ScenarioError> {
    let ran = h.run_prompt("jump_reply.md", "").await?;
    turns(&ran, 2)?;
    let first = non_empty(&ran.store, "first.txt")?;
    let second = non_empty(&ran.store, "second.txt")?;
    for path in ["after_jump.txt", "skipped.txt"] {
        let exists = ran.store.exists(path).unwrap_or(true);
        check(!exists, || {
            format!("{path} was written: the jump did not skip")
        })?;
    }
    let sent = ran.seen.requests.get(1).map(user_text).unwrap_or_default();
    check(sent.contains(first.trim()), || {
        format!("the second request does not carry the first reply {first:?}: {sent:?}")
    })?;
    check(ran.result == second, || {
        "the result is not the last reply".into()
    })?;
    Ok(format!(
        "{} -> {} chars",
        first.chars().count(),
        second.chars().count()
    ))
}

async fn h1_only(h: &Harness) -> Result<String, ScenarioError> {
    let ran = h.run_prompt("h1_only.md", "Ada").await?;
    turns(&ran, 1)?;
    check(!ran.result.trim().is_empty(), || "empty H1 reply".into())?;
    let sent = ran.seen.requests.first().map(user_text).unwrap_or_default();
    check(sent.contains("named Ada"), || {
        format!("args not rendered: {sent:?}")
    })?;
    Ok(format!("{} chars", ran.result.chars().count()))
}

async fn fanout_arms(h: &Harness) -> Result<String, ScenarioError> {
    let ran = h.run_prompt("fanout_arms.md", "").await?;
    turns(&ran, 3)?;
    check(ran.seen.arms_started == 3 && ran.seen.arms_ok == 3, || {
        format!(
            "arms started {} ok {}",
            ran.seen.arms_started, ran.seen.arms_ok
        )
    })?;
    check(ran.result == "3", || {
        format!("{} arms had a non-empty reply, expected 3", ran.result)
    })?;
    for animal in ["cat", "dog", "horse"] {
        non_empty(&ran.store, &format!("arms/{animal}.txt"))?;
        check(
            ran.seen
                .requests
                .iter()
                .any(|r| user_text(r).contains(&format!("Describe a {animal}"))),
            || format!("no request for the {animal} arm"),
        )?;
    }
    Ok("3 arms".into())
}

async fn infer_forms(h: &Harness) -> Result<String, ScenarioError> {
    let ran = h.run_prompt("infer_forms.md", "").await?;
    check(ran.result == "done", || format!("result {:?}", ran.result))?;
    non_empty(&ran.store, "tag.txt")?;
    non_empty(&ran.store, "review.txt")?;
    let reply = read(&ran.store, "reply.txt")?;
    check(reply == "untouched", || {
        format!("infer changed reply to {reply:?}")
    })?;
    check(ran.seen.requests.len() == 2, || {
        format!("expected 2 requests, saw {}", ran.seen.requests.len())
    })?;
    for request in &ran.seen.requests {
        check(request.get("tools").is_none(), || {
            format!("an infer round offered tools: {request}")
        })?;
        check(request["model"] == MODEL_NAME, || {
            format!("model {}", request["model"])
        })?;
    }
    Ok("2 rounds".into())
}

async fn tool_request(h: &Harness) -> Result<String, ScenarioError> {
    let ran = h.run_prompt("tool_request.md", "").await?;
    let first = ran
        .seen
        .requests
        .first()
        .ok_or_else(|| ScenarioError::Failed("no request went out".into()))?;
    let tools = first["tools"].as_array().cloned().unwrap_or_default();
    let tool = tools
        .iter()
        .find(|t| t["function"]["name"] == "lookup_word")
        .ok_or_else(|| ScenarioError::Failed(format!("lookup_word not offered: {first}")))?;
    check(tool["type"] == "function", || format!("tool type: {tool}"))?;
    let params = &tool["function"]["parameters"];
    check(
        params["type"] == "object"
            && params["properties"]["word"]["type"] == "string"
            && params["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|w| w == "word")),
        || format!("malformed parameters: {params}"),
    )?;
    // The loop ends on the first reply without tool calls: every turn before it made calls.
    let calls: usize = read(&ran.store, "calls.txt")?
        .trim()
        .parse()
        .map_err(|e| ScenarioError::Failed(format!("calls.txt: {e}")))?;
    let n = ran.seen.turns.len();
    check((1..=3).contains(&n), || {
        format!("{n} turns for a 3-turn budget")
    })?;
    let last = ran.seen.turns.last().and_then(|t| t.1.clone());
    check(last.as_deref() != Some("tool_calls"), || {
        format!("the loop ended on a tool_calls turn: {:?}", ran.seen.turns)
    })?;
    check(calls == ran.seen.tool_calls, || {
        format!("tools.calls {calls} vs observed {}", ran.seen.tool_calls)
    })?;
    check(!ran.result.trim().is_empty(), || "empty final reply".into())?;
    Ok(format!("{n} turn(s), {calls} call(s)"))
}

async fn streaming(h: &Harness) -> Result<String, ScenarioError> {
    let http = reqwest::Client::builder()
        .timeout(SCENARIO_TIMEOUT)
        .build()
        .map_err(|e| ScenarioError::Setup(e.to_string()))?;
    let body = json!({
        "model": MODEL_NAME,
        "stream": true,
        "temperature": 0,
        "max_tokens": 32,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Count from one to five in words."}
        ]
    });
    let mut response = http
        .post(format!("{}/v1/chat/completions", h.gateway.url))
        .bearer_auth(&h.gateway.key)
        .json(&body)
        .send()
        .await
        .map_err(|e| ScenarioError::Failed(format!("stream request: {e}")))?;
    check(response.status().is_success(), || {
        format!("stream answered {}", response.status())
    })?;
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    check(content_type.starts_with("text/event-stream"), || {
        format!("content-type {content_type:?}")
    })?;
    let mut raw = Vec::new();
    let mut network_chunks = 0usize;
    while let Some(bytes) = response
        .chunk()
        .await
        .map_err(|e| ScenarioError::Failed(format!("stream read: {e}")))?
    {
        network_chunks += 1;
        raw.extend_from_slice(&bytes);
        check(raw.len() <= 4 << 20, || "stream over 4 MiB".into())?;
    }
    let text = String::from_utf8_lossy(&raw);
    let mut deltas = 0usize;
    let mut content = String::new();
    let mut done = false;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:").map(str::trim) else {
            continue;
        };
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let event: Json = serde_json::from_str(data)
            .map_err(|e| ScenarioError::Failed(format!("bad SSE event {data:?}: {e}")))?;
        check(event["model"] == MODEL_NAME, || {
            format!("event model {}", event["model"])
        })?;
        if let Some(piece) = event["choices"][0]["delta"]["content"].as_str()
            && !piece.is_empty()
        {
            deltas += 1;
            content.push_str(piece);
        }
    }
    check(done, || "no [DONE] terminator".into())?;
    check(deltas >= 2, || format!("only {deltas} content deltas"))?;
    check(!content.trim().is_empty(), || {
        "empty streamed content".into()
    })?;
    Ok(format!("{deltas} deltas in {network_chunks} reads"))
}

/// One row of the result table.
#[derive(Debug)]
pub struct Row {
    /// The scenario name.
    pub name: &'static str,
    /// `Ok(detail)` or the failure.
    pub outcome: Result<String, ScenarioError>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs every scenario (or those whose names are in `only`, when non-empty), each bounded by
/// [`SCENARIO_TIMEOUT`].
pub async fn run_all(harness: &Harness, only: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (name, scenario) in all() {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let start = Instant::now();
        let outcome = match tokio::time::timeout(SCENARIO_TIMEOUT, scenario(harness)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ScenarioError::Failed(format!(
                "timed out after {SCENARIO_TIMEOUT:?}"
            ))),
        };
        rows.push(Row {
            name,
            outcome,
            elapsed: start.elapsed(),
        });
    }
    rows
}

/// Formats the result table.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!("{:<14} {:<6} {:>8}  detail\n", "scenario", "result", "time");
    for row in rows {
        let (result, detail) = match &row.outcome {
            Ok(detail) => ("ok", detail.clone()),
            Err(e) => ("FAIL", e.to_string()),
        };
        out.push_str(&format!(
            "{:<14} {:<6} {:>7.1}s  {detail}\n",
            row.name,
            result,
            row.elapsed.as_secs_f64()
        ));
    }
    out
}
