//! Issue 26: the paths of the Rust API and the Lua surface no test exercised, against a
//! scripted upstream on loopback: `RunLimits::max_tool_iterations` and
//! `max_fanout_concurrency`, `models.default(alias)`, a successful `models.use`, description
//! overrides on `tools.always`/`tools.add`, a run whose client comes from the environment,
//! `CompletionError::status()`/`is_timeout()`, `ToolError::is_retryable()`/`is_cancelled()`,
//! and the run's request limits reaching every tool call (`web_search` included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use promptforge_core::client::{
    ChatMessage, ChatRequest, CompletionErrorKind, GatewayClient, RequestLimits,
};
use promptforge_core::tools::{Tool, ToolCatalog, ToolError, ToolId, ToolOutput, WebSearch};
use promptforge_core::{
    NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig, RunError,
    RunErrorKind, RunLimits, StoreRef, async_trait, run,
};
use promptforge_test_support::Loopback;
use serde_json::{Value as Json, json};
use support::{FakeTool, KEY, Reply, Upstream, calls, text};

fn load(name: &str) -> Prompt {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/models")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    Prompt::parse_named(name, &source, "test", &NullObserver).unwrap()
}

/// Runs fixture `name` against a scripted upstream answering `replies`, with `tools`.
async fn exec(
    name: &str,
    replies: Vec<Reply>,
    tools: Vec<Arc<dyn Tool>>,
    config: impl FnOnce(RunConfig) -> RunConfig,
) -> (Result<String, RunError>, Upstream) {
    let upstream = Upstream::start(replies).await;
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let models = client.models(RequestLimits::default()).await.unwrap();
    let catalog = ToolCatalog::new(&tools).unwrap();
    let picker = support::picker(&catalog);
    let prompt = load(name);
    let result = run(
        &prompt,
        "",
        ResolutionContext::new(&picker, &models, &catalog),
        &StoreRef::memory(),
        config(RunConfig::new("test").client(client)),
    )
    .await;
    (result, upstream)
}

fn search_tool() -> Vec<Arc<dyn Tool>> {
    vec![FakeTool::new(
        "web_search",
        "Search the web for current news and information",
        false,
    )]
}

fn completion(content: &str) -> Json {
    json!({"id": "x", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content}}]})
}

fn tool_descriptions(request: &Json) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["description"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_default_use_and_description_overrides() {
    let (result, upstream) = exec(
        "api_models.md",
        vec![text("one"), text("two")],
        search_tool(),
        |c| c,
    )
    .await;
    // `models.default("writer")` designates a declared model; `models.use("coder")`
    // returns the handle and switches the section's model.
    assert_eq!(result.unwrap(), "story-writer-v2|code-pro|code-pro");
    let requests = upstream.requests();
    assert_eq!(requests[0]["model"], "story-writer-v2");
    assert_eq!(requests[1]["model"], "code-pro");
    // `tools.always` over `tools.bind`, `tools.add` over both.
    assert_eq!(
        tool_descriptions(&requests[0]),
        ["Always-level description"]
    );
    assert_eq!(tool_descriptions(&requests[1]), ["Add-level description"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_limits_override_the_frontmatters_tool_iterations() {
    let probe = || -> Vec<Arc<dyn Tool>> { vec![Probe::new(Behaviour::Answer)] };
    let replies = || vec![calls(&[("probe", "{}")]), text("done")];
    // The frontmatter's 24: two rounds are fine.
    let (result, _) = exec("tool_limits.md", replies(), probe(), |c| c).await;
    assert_eq!(result.unwrap(), "done");
    // `RunLimits::max_tool_iterations(1)` wins: the second round is one too many.
    let (result, upstream) = exec("tool_limits.md", replies(), probe(), |c| {
        c.limits(RunLimits::new().max_tool_iterations(NonZeroU32::new(1).unwrap()))
    })
    .await;
    let error = result.unwrap_err();
    assert_eq!(error.kind(), RunErrorKind::ToolLoopExhausted, "{error}");
    assert_eq!(upstream.requests().len(), 1);
}

/// Counts fanout arms between their start and their end.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Observer for InFlight {
    fn observe(&self, _execution: &str, _section: &str, event: Observation<'_>) {
        match event {
            Observation::ArmStarted { .. } => {
                let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
            }
            Observation::ArmFinished { .. } => {
                self.now.fetch_sub(1, Ordering::SeqCst);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_fanout_concurrency_bounds_the_arms_in_flight() {
    // Each arm waits on the model, so arms overlap as far as the limit lets them.
    let replies: Vec<Reply> = (1..=6)
        .map(|i| Reply::Slow(Duration::from_millis(300), completion(&i.to_string())))
        .collect();
    let observer = Arc::new(InFlight::default());
    let watching = Arc::clone(&observer);
    let (result, _) = exec("fanout_slow.md", replies, Vec::new(), move |c| {
        c.observer(watching)
            .limits(RunLimits::new().max_fanout_concurrency(NonZeroUsize::new(2).unwrap()))
    })
    .await;
    let value = result.unwrap();
    assert!(value.starts_with("6:"), "{value}");
    assert_eq!(observer.most.load(Ordering::SeqCst), 2);
}

// ---- CompletionError and ToolError queries ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_errors_report_status_and_timeouts() {
    let upstream = Upstream::start(vec![
        Reply::Status(503, json!({"error": {"message": "busy"}})),
        Reply::Status(404, json!({"error": {"message": "unknown model"}})),
        Reply::Slow(Duration::from_secs(5), completion("late")),
    ])
    .await;
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let request = ChatRequest::new("m", vec![ChatMessage::User("hi".into())]);
    let limits = RequestLimits::default();
    let busy = client.chat(&request, limits).await.unwrap_err();
    assert_eq!(busy.kind(), CompletionErrorKind::Backend);
    assert_eq!(busy.status(), Some(503));
    assert!(busy.is_retryable() && !busy.is_timeout(), "{busy}");
    let missing = client.chat(&request, limits).await.unwrap_err();
    assert_eq!(missing.status(), Some(404));
    assert!(
        !missing.is_retryable() && !missing.is_timeout(),
        "{missing}"
    );
    let late = client
        .chat(&request, limits.with_timeout(Duration::from_millis(200)))
        .await
        .unwrap_err();
    assert_eq!(late.kind(), CompletionErrorKind::Transport);
    assert_eq!(late.status(), None);
    assert!(late.is_timeout() && late.is_retryable(), "{late}");
}

#[test]
fn tool_errors_say_whether_to_retry_and_whether_cancelled() {
    let transport = ToolError::transport("connection reset");
    assert!(transport.is_retryable() && !transport.is_cancelled());
    let backend = ToolError::backend("the search provider refused");
    assert!(!backend.is_cancelled());
    let invalid = ToolError::invalid_arguments("`query` is required");
    assert!(!invalid.is_retryable() && !invalid.is_cancelled());
    let cancelled = ToolError::cancelled();
    assert!(cancelled.is_cancelled() && !cancelled.is_retryable());
}

// ---- The run's request limits reach every tool call ----

#[derive(Clone, Copy)]
enum Behaviour {
    /// Answers with the limits it was given.
    Answer,
    /// Never answers.
    Hang,
    /// Answers with this many bytes.
    Big(usize),
}

/// A tool that reports the limits the tool loop gave it.
struct Probe {
    id: ToolId,
    behaviour: Behaviour,
    seen: Mutex<Vec<RequestLimits>>,
    parameters: Json,
}

impl Probe {
    fn new(behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            id: ToolId::new("test", "probe"),
            behaviour,
            seen: Mutex::new(Vec::new()),
            parameters: json!({"type": "object", "properties": {}}),
        })
    }
}

#[async_trait]
impl Tool for Probe {
    fn id(&self) -> &ToolId {
        &self.id
    }
    fn wire_name(&self) -> &str {
        "probe"
    }
    fn description(&self) -> &str {
        "Report the request limits a tool call runs under"
    }
    fn parameters(&self) -> &Json {
        &self.parameters
    }
    async fn call(&self, _arguments: &str) -> Result<ToolOutput, ToolError> {
        Err(ToolError::backend("the tool loop calls call_within"))
    }
    async fn call_within(
        &self,
        _arguments: &str,
        limits: RequestLimits,
    ) -> Result<ToolOutput, ToolError> {
        self.seen.lock().unwrap().push(limits);
        match self.behaviour {
            Behaviour::Answer => Ok(ToolOutput::trusted(format!(
                "{} ms, {} bytes",
                limits.timeout.as_millis(),
                limits.max_response_bytes
            ))),
            Behaviour::Hang => {
                std::future::pending::<()>().await;
                Ok(ToolOutput::trusted("never"))
            }
            Behaviour::Big(bytes) => Ok(ToolOutput::trusted("x".repeat(bytes))),
        }
    }
}

/// The text of the tool result the model got back in the second request.
fn tool_result(upstream: &Upstream) -> String {
    let requests = upstream.requests();
    requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_call_runs_under_the_runs_request_limits() {
    let replies = || vec![calls(&[("probe", "{}")]), text("done")];
    let limits = RunLimits::new()
        .request_timeout(Duration::from_millis(700))
        .max_response_bytes(NonZeroU64::new(5000).unwrap());
    let tool_result_with = |behaviour| {
        let limits = limits.clone();
        async move {
            let probe = Probe::new(behaviour);
            let tools: Vec<Arc<dyn Tool>> = vec![probe.clone()];
            let (result, upstream) =
                exec("tool_limits.md", replies(), tools, |c| c.limits(limits)).await;
            assert_eq!(result.unwrap(), "done");
            let seen = probe.seen.lock().unwrap().clone();
            (tool_result(&upstream), seen)
        }
    };
    // The tool is handed the run's limits.
    let (text, seen) = tool_result_with(Behaviour::Answer).await;
    assert_eq!(seen, [RequestLimits::new(Duration::from_millis(700), 5000)]);
    assert_eq!(text, "700 ms, 5000 bytes");
    // A tool that ignores them is held to them: no answer within the timeout...
    let (text, _) = tool_result_with(Behaviour::Hang).await;
    assert_eq!(
        text,
        "error: the tool did not answer within 0.7 s (RunLimits::request_timeout)"
    );
    // ...and no output over the cap.
    let (text, _) = tool_result_with(Behaviour::Big(6000)).await;
    assert_eq!(
        text,
        "error: the tool's output is 6000 bytes, over the run's limit of 5000 bytes (RunLimits::max_response_bytes)"
    );
}

/// A gateway whose search route answers after `delay` with a body of `bytes` bytes.
async fn search_gateway(delay: Duration, bytes: usize, hits: Arc<AtomicUsize>) -> Loopback {
    let app = Router::new().route(
        "/v1/tools/web_search",
        post(move || {
            let hits = Arc::clone(&hits);
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                axum::Json(json!({"query": "q", "results": [], "pad": "p".repeat(bytes)}))
            }
        }),
    );
    Loopback::serve(app).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_honours_the_runs_timeout_and_response_cap() {
    // Issue 26 item 6: `web_search` used its own default limits whatever the run's were.
    let query = r#"{"query": "rust"}"#;
    let hits = Arc::new(AtomicUsize::new(0));
    let slow = search_gateway(Duration::from_secs(5), 10, Arc::clone(&hits)).await;
    let tool = WebSearch::new(GatewayClient::new(slow.url(), KEY).unwrap());
    let started = std::time::Instant::now();
    let error = tool
        .call_within(
            query,
            RequestLimits::new(Duration::from_millis(200), 1 << 20),
        )
        .await
        .unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert!(error.to_string().contains("timed out"), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the run's timeout was not used"
    );

    let big = search_gateway(Duration::ZERO, 4096, Arc::clone(&hits)).await;
    let tool = WebSearch::new(GatewayClient::new(big.url(), KEY).unwrap());
    let error = tool
        .call_within(query, RequestLimits::new(Duration::from_secs(10), 1024))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("exceeds 1024 bytes"), "{error}");
    // The run's limits are a ceiling under the tool's own, and the other way round.
    let capped = WebSearch::new(GatewayClient::new(big.url(), KEY).unwrap())
        .with_limits(RequestLimits::default().with_max_response_bytes(1024));
    let error = capped
        .call_within(query, RequestLimits::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("exceeds 1024 bytes"), "{error}");
    assert!(
        WebSearch::new(GatewayClient::new(big.url(), KEY).unwrap())
            .call_within(query, RequestLimits::default())
            .await
            .is_ok()
    );
    assert_eq!(hits.load(Ordering::SeqCst), 4);
}

// ---- A client built from the environment ----

/// The child side of [`a_run_without_a_client_reads_the_gateway_environment`]: runs in a
/// process of its own whose environment the parent set (Rust 2024 makes changing this
/// process's environment `unsafe`, which the workspace forbids).
async fn env_child(expect: &str) {
    let prompt = load("h1_prose.md");
    let models = promptforge_core::ModelCatalog::from_models_json(
        support::default_catalog().to_string().as_bytes(),
    )
    .unwrap();
    let catalog = ToolCatalog::empty();
    let picker = support::picker(&catalog);
    let result = run(
        &prompt,
        "text",
        ResolutionContext::new(&picker, &models, &catalog),
        &StoreRef::memory(),
        RunConfig::new("env"),
    )
    .await;
    match expect {
        "ok" => assert_eq!(result.unwrap(), "from the environment"),
        fragment => {
            let error = result.unwrap_err();
            assert_eq!(error.kind(), RunErrorKind::Model, "{error}");
            assert!(error.to_string().contains(fragment), "{error}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_a_client_reads_the_gateway_environment() {
    if let Ok(expect) = std::env::var("PF_API_ENV_CHILD") {
        return env_child(&expect).await;
    }
    let upstream = Upstream::start(vec![text("from the environment")]).await;
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[
                ("PROMPTFORGE_GATEWAY_URL", upstream.url.as_str()),
                ("PROMPTFORGE_GATEWAY_API_KEY", KEY),
            ],
            "ok",
        ),
        (&[], "PROMPTFORGE_GATEWAY_URL"),
        (
            &[("PROMPTFORGE_GATEWAY_API_KEY", KEY)],
            "PROMPTFORGE_GATEWAY_URL is missing or empty",
        ),
        (
            &[("PROMPTFORGE_GATEWAY_URL", upstream.url.as_str())],
            "PROMPTFORGE_GATEWAY_API_KEY",
        ),
    ];
    for (env, expect) in cases {
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "a_run_without_a_client_reads_the_gateway_environment",
                "--exact",
                "--nocapture",
            ])
            .env_remove("PROMPTFORGE_GATEWAY_URL")
            .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
            .env("PF_API_ENV_CHILD", expect)
            .kill_on_drop(true);
        for (key, value) in env {
            child.env(key, value);
        }
        let output = tokio::time::timeout(Duration::from_secs(120), child.output())
            .await
            .expect("the child test finishes")
            .unwrap();
        let shown = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{env:?}: {shown}");
        assert!(shown.contains("1 passed"), "{env:?}: {shown}");
    }
    assert_eq!(upstream.requests().len(), 1);
}
