//! The model and tool layer against a scripted OpenAI-compatible upstream on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use promptforge_core::client::{GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::observe::{DebugCapture, DebugEvent};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_core::{
    NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig, RunError,
    RunErrorKind, RunLimits, StoreRef, run,
};
use serde_json::{Value as Json, json};
use support::{FakeTool, KEY, Reply, Upstream, calls, finish, text};

fn load(name: &str) -> Prompt {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/models")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    Prompt::parse_named(name, &source, "test", &NullObserver).unwrap()
}

/// The tools every test offers: an untrusted search, a trusted calculator.
struct Kit {
    search: Arc<FakeTool>,
    catalog: ToolCatalog,
}

fn kit() -> Kit {
    let search = FakeTool::new(
        "web_search",
        "Search the web for current news and information",
        false,
    );
    let calc = FakeTool::new(
        "calculator",
        "Evaluate an arithmetic expression and return the numeric result",
        true,
    );
    let tools: Vec<Arc<dyn Tool>> = vec![search.clone(), calc.clone()];
    Kit {
        search,
        catalog: ToolCatalog::new(&tools).unwrap(),
    }
}

struct Outcome {
    result: Result<String, RunError>,
    upstream: Upstream,
}

async fn exec_with(
    name: &str,
    input: &str,
    replies: Vec<Reply>,
    kit: &Kit,
    config: impl FnOnce(RunConfig) -> RunConfig,
) -> Outcome {
    let upstream = Upstream::start(replies).await;
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let models = client.models(RequestLimits::default()).await.unwrap();
    let picker = support::picker(&kit.catalog);
    let prompt = load(name);
    let config = config(RunConfig::new("test").client(client));
    let result = run(
        &prompt,
        input,
        ResolutionContext::new(&picker, &models, &kit.catalog),
        &StoreRef::memory(),
        config,
    )
    .await;
    Outcome { result, upstream }
}

async fn exec(name: &str, input: &str, replies: Vec<Reply>) -> Outcome {
    exec_with(name, input, replies, &kit(), |c| c).await
}

fn user_messages(request: &Json) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[track_caller]
fn expect_error(result: &Result<String, RunError>, kind: RunErrorKind, fragment: &str) {
    match result {
        Ok(value) => panic!("expected a {kind} error, got Ok({value:?})"),
        Err(error) => {
            assert_eq!(error.kind(), kind, "{error}");
            assert!(
                error.to_string().contains(fragment),
                "`{error}` lacks `{fragment}`"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prose_goes_to_the_bound_model_and_replies_flow_back() {
    let out = exec(
        "basic.md",
        "autumn",
        vec![text("Leaves fall."), finish("Leaves fall, all.", "length")],
    )
    .await;
    assert_eq!(
        out.result.unwrap(),
        "Leaves fall. | Leaves fall, all. | story-writer-v2 | stop"
    );
    let requests = out.upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "story-writer-v2");
    assert_eq!(requests[0]["temperature"], 0.7);
    assert_eq!(requests[0]["max_tokens"], 200);
    assert_eq!(
        user_messages(&requests[0]),
        ["Write one line about autumn."]
    );
    // The second prose block continues the section's conversation, with no tools offered.
    assert_eq!(requests[1]["messages"].as_array().unwrap().len(), 3);
    assert_eq!(requests[1]["messages"][1]["content"], "Leaves fall.");
    assert!(requests[1].get("tools").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h1_only_prompt_returns_the_model_reply() {
    let out = exec("h1_prose.md", "some text", vec![text("A summary.")]).await;
    assert_eq!(out.result.unwrap(), "A summary.");
    let requests = out.upstream.requests();
    assert_eq!(requests[0]["model"], "deep-reasoner");
    assert!(user_messages(&requests[0])[0].ends_with("some text"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_loop_dispatches_calls_and_envelopes_untrusted_output() {
    let kit = kit();
    let replies = vec![
        calls(&[
            ("web_search", r#"{"query":"rust"}"#),
            ("calculator", r#"{"query":"1+1"}"#),
        ]),
        text("Rust is great; 1+1=2."),
    ];
    let out = exec_with("tool_loop.md", "rust", replies, &kit, |c| c).await;
    assert_eq!(
        out.result.unwrap(),
        "Rust is great; 1+1=2. | search=1 calc=1"
    );
    assert_eq!(
        kit.search.calls.lock().unwrap().as_slice(),
        [r#"{"query":"rust"}"#]
    );
    let requests = out.upstream.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["web_search", "calculator"]);
    assert_eq!(
        requests[0]["tools"][1]["function"]["description"],
        "Calculator for arithmetic"
    );
    let messages = requests[1]["messages"].as_array().unwrap();
    let tool_results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        tool_results[0].starts_with("<untrusted-input nonce=\""),
        "{}",
        tool_results[0]
    );
    assert!(tool_results[0].contains("web_search result for"));
    assert_eq!(tool_results[1], r#"calculator result for {"query":"1+1"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_exit_after_tool_calls_is_an_empty_reply() {
    let replies = vec![
        calls(&[("web_search", r#"{"query":"x"}"#)]),
        finish("", "stop"),
    ];
    let out = exec("silent.md", "", replies).await;
    assert_eq!(out.result.unwrap(), "reply=[]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_other_empty_reply_fails() {
    let out = exec("silent.md", "", vec![finish("", "stop")]).await;
    expect_error(&out.result, RunErrorKind::Model, "empty reply");
    let replies = vec![calls(&[("web_search", "{}")]), finish("", "length")];
    let out = exec("silent.md", "", replies).await;
    expect_error(
        &out.result,
        RunErrorKind::Model,
        "empty reply (finish reason: length)",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_loop_fails_except_in_a_fanout_arm() {
    let looping = || {
        vec![
            calls(&[("web_search", "{}")]),
            calls(&[("web_search", "{}")]),
        ]
    };
    let out = exec("exhaust.md", "x", looping()).await;
    expect_error(
        &out.result,
        RunErrorKind::ToolLoopExhausted,
        "all 2 iterations",
    );
    assert_eq!(out.upstream.requests().len(), 2);
    let out = exec("exhaust.md", "fanout", looping()).await;
    assert_eq!(out.result.unwrap(), "false true []");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infer_is_one_tool_free_round_that_leaves_reply_and_sys_alone() {
    let out = exec(
        "infer.md",
        "great day",
        vec![text("positive"), text("Too short.")],
    )
    .await;
    assert_eq!(
        out.result.unwrap(),
        "positive | Too short. | unchanged | nil | critic,deep-reasoner,true,200000,story-writer-v2"
    );
    let requests = out.upstream.requests();
    assert_eq!(requests[0]["model"], "story-writer-v2");
    assert_eq!(requests[0]["messages"].as_array().unwrap().len(), 1);
    assert_eq!(requests[1]["model"], "deep-reasoner");
    assert_eq!(requests[1]["chat_template_kwargs"]["enable_thinking"], true);
    assert!(requests[1].get("tools").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_mistakes_are_clear_errors() {
    for (case, kind, fragment) in [
        (
            "dup_alias",
            RunErrorKind::Binding,
            "already declared as a model",
        ),
        (
            "two_defaults",
            RunErrorKind::Binding,
            "models.default was already called",
        ),
        ("constraints", RunErrorKind::Binding, "context >= 10000000"),
        ("temperature", RunErrorKind::Binding, "from 0.0 to 2.0"),
        (
            "unknown_opt",
            RunErrorKind::Binding,
            "unknown model opt `speed`",
        ),
        ("absent", RunErrorKind::Binding, "no model matches"),
        (
            "absent",
            RunErrorKind::Binding,
            "models.bind(\"m\", \"a model that bakes",
        ),
        (
            "default_absent",
            RunErrorKind::Binding,
            "models.default(\"m\", \"a model that bakes sourdough bread in a wood oven\"): no model matches",
        ),
        (
            "default_constraints",
            RunErrorKind::Binding,
            "models.default(\"m\", \"a creative writing model\"): no catalog model",
        ),
        ("bad_alias", RunErrorKind::Binding, "not a valid alias"),
        ("use_twice", RunErrorKind::Binding, "once per section"),
        (
            "tool_absent",
            RunErrorKind::Binding,
            "no tool this process provides",
        ),
        (
            "add_local_h1",
            RunErrorKind::Binding,
            "not in the H1 preamble",
        ),
        (
            "undeclared_add",
            RunErrorKind::Binding,
            "no tool is declared as `nothing`",
        ),
        ("frozen", RunErrorKind::Lua, "name"),
        (
            "calls_unknown",
            RunErrorKind::Binding,
            "available tools: `search`",
        ),
    ] {
        let out = exec("binding_errors.md", case, Vec::new()).await;
        expect_error(&out.result, kind, fragment);
        assert!(
            out.upstream.requests().is_empty(),
            "{case} reached the model"
        );
    }
    let out = exec("binding_errors.md", "thinking", Vec::new()).await;
    assert_eq!(out.result.unwrap(), "deep-reasoner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_duplicate_tools_are_rejected_before_any_model_call() {
    // Two servers' tools that bind apart but sit above a (deliberately low) duplicate
    // threshold: the section scope holding both is refused with the similarity.
    let news = FakeTool::on(
        "news",
        "news_search",
        "Search the web for news articles",
        false,
    );
    let photos = FakeTool::on(
        "media",
        "photo_search",
        "Search the web for photos and images",
        false,
    );
    let tools: Vec<Arc<dyn Tool>> = vec![news.clone(), photos.clone()];
    let catalog = ToolCatalog::new(&tools).unwrap();
    let config = promptforge_tool_picker::Config::default()
        .with_duplicate_threshold(0.3)
        .unwrap();
    let picker = support::picker_with(&catalog, config);
    let upstream = Upstream::start(vec![text("never")]).await;
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let models = client.models(RequestLimits::default()).await.unwrap();
    let error = run(
        &load("near_dup.md"),
        "",
        ResolutionContext::new(&picker, &models, &catalog),
        &StoreRef::memory(),
        RunConfig::new("t").client(client),
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), RunErrorKind::Binding, "{error}");
    let text = error.to_string();
    assert!(text.contains("near-duplicates (similarity 0."), "{text}");
    assert!(
        text.contains("news_search") && text.contains("photo_search"),
        "{text}"
    );
    assert!(upstream.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_duplicate_local_tools_are_rejected_before_any_model_call() {
    // Two local tools whose descriptions differ by one word.
    let out = exec("near_dup_local.md", "local", vec![text("never")]).await;
    expect_error(
        &out.result,
        RunErrorKind::Binding,
        "near-duplicates (similarity 0.",
    );
    let message = out.result.unwrap_err().to_string();
    assert!(
        message.contains("local tool `grab`") && message.contains("local tool `fetch`"),
        "{message}"
    );
    assert!(out.upstream.requests().is_empty());

    // A local tool that restates a bound catalog tool.
    let out = exec("near_dup_local.md", "catalog", vec![text("never")]).await;
    expect_error(
        &out.result,
        RunErrorKind::Binding,
        "near-duplicates (similarity ",
    );
    let message = out.result.unwrap_err().to_string();
    assert!(
        message.contains("web_search") && message.contains("local tool `lookup`"),
        "{message}"
    );
    assert!(out.upstream.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_tools_run_in_the_section_vm_from_the_next_prose_block() {
    let replies = vec![
        text("first"),
        calls(&[
            ("grab", r#"{"key":"k","times":2}"#),
            ("grab", r#"{"key":"boom","times":1}"#),
            ("grab", r#"{"key":"jump","times":1}"#),
            ("grab", r#"{"key":"k"}"#),
            ("nowhere", "{}"),
            ("grab", r#"{"key":"declare","times":1}"#),
        ]),
        text("done"),
    ];
    let out = exec("local_tools.md", "", replies).await;
    assert_eq!(
        out.result.unwrap(),
        "first | done | calls=5 | kx2\nboomx1\njumpx1\ndeclarex1\n"
    );
    let requests = out.upstream.requests();
    assert!(
        requests[0].get("tools").is_none(),
        "an earlier prose block is a tool-free round"
    );
    let names = |request: &Json| -> Vec<String> {
        request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&requests[1]), ["grab"]);
    // `late` was declared during this loop: it is visible from the next prose block only.
    assert_eq!(names(&requests[2]), ["grab"]);
    let schema = &requests[1]["tools"][0]["function"]["parameters"];
    assert_eq!(schema["required"], json!(["key", "times"]));
    assert_eq!(
        schema["properties"]["key"]["description"],
        "Store path to read"
    );
    let results: Vec<String> = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results[0], "value of k");
    assert!(results[1].contains("handler exploded"), "{}", results[1]);
    assert!(
        results[2].contains("jump is not available inside a local tool handler"),
        "{}",
        results[2]
    );
    assert!(
        results[3].contains("missing required parameter `times`"),
        "{}",
        results[3]
    );
    assert!(
        results[4].starts_with("error: unknown tool `nowhere`"),
        "{}",
        results[4]
    );
    assert_eq!(results[5], "value of declare");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_declared_tools_outside_the_section_are_told_apart() {
    let replies = vec![calls(&[("web_search", "{}")]), text("ok")];
    let out = exec("unavailable.md", "", replies).await;
    assert_eq!(out.result.unwrap(), "ok");
    let requests = out.upstream.requests();
    let result = requests[1]["messages"][2]["content"].as_str().unwrap();
    assert!(
        result.contains("declared in this prompt but not available in this section"),
        "{result}"
    );
}

#[derive(Default)]
struct Capture(Mutex<Vec<(String, u32, String)>>);

impl DebugCapture for Capture {
    fn on_event(&self, _execution: &str, section: &str, turn: u32, event: DebugEvent<'_>) {
        let what = match event {
            DebugEvent::Request { body } => format!("request {}", body["model"]),
            DebugEvent::Response { finish_reason, .. } => format!("response {finish_reason:?}"),
            _ => "other".to_owned(),
        };
        self.0
            .lock()
            .unwrap()
            .push((section.to_owned(), turn, what));
    }
}

#[derive(Default)]
struct Turns(Mutex<Vec<String>>);

impl Observer for Turns {
    fn observe(&self, _execution: &str, section: &str, event: Observation<'_>) {
        let line = match event {
            Observation::ModelTurnCompleted { model, .. } => format!("turn {section} {model}"),
            Observation::ModelTurnTruncated { .. } => format!("truncated {section}"),
            Observation::ToolCallSucceeded { tool } => format!("tool ok {tool}"),
            _ => return,
        };
        self.0.lock().unwrap().push(line);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_capture_and_observers_see_every_turn_including_arms() {
    let capture = Arc::new(Capture::default());
    let turns = Arc::new(Turns::default());
    let (c, t) = (capture.clone(), turns.clone());
    let out = exec_with(
        "fanout_models.md",
        "",
        vec![text("soft warm purring"), finish("loyal happy", "length")],
        &kit(),
        move |config| config.debug(c).observer(t),
    )
    .await;
    let result = out.result.unwrap();
    assert!(
        result == "soft warm purring + loyal happy" || result == "loyal happy + soft warm purring"
    );
    let events = capture.0.lock().unwrap().clone();
    assert_eq!(events.len(), 4);
    assert!(
        events
            .iter()
            .all(|(section, turn, _)| section == "### Arm" && *turn == 0)
    );
    let lines = turns.0.lock().unwrap().clone();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("turn ### Arm story-writer-v2"))
            .count(),
        2
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("truncated")).count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_and_transport_failures_keep_their_retryability() {
    let out = exec(
        "h1_prose.md",
        "",
        vec![Reply::Status(
            503,
            json!({"error": {"message": "secret upstream detail"}}),
        )],
    )
    .await;
    let error = out.result.unwrap_err();
    assert_eq!(error.kind(), RunErrorKind::Model);
    assert!(error.is_retryable());
    // The gateway's own envelope message is shown, so a user sees what went wrong.
    assert!(
        error
            .to_string()
            .contains("HTTP 503: secret upstream detail"),
        "{error}"
    );

    let out = exec(
        "h1_prose.md",
        "",
        vec![Reply::Status(400, json!({"error": {}}))],
    )
    .await;
    assert!(!out.result.unwrap_err().is_retryable());

    let out = exec(
        "h1_prose.md",
        "",
        vec![Reply::Json(json!({"nonsense": true}))],
    )
    .await;
    expect_error(&out.result, RunErrorKind::Model, "could not be decoded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_and_response_cap_are_enforced() {
    let slow = Reply::Slow(Duration::from_secs(5), json!({}));
    let out = exec_with("h1_prose.md", "", vec![slow], &kit(), |c| {
        c.limits(RunLimits::new().request_timeout(Duration::from_millis(200)))
    })
    .await;
    let error = out.result.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert!(error.to_string().contains("timed out"), "{error}");

    let out = exec_with("h1_prose.md", "", vec![Reply::Huge(4096)], &kit(), |c| {
        c.limits(RunLimits::new().max_response_bytes(std::num::NonZeroU64::new(1024).unwrap()))
    })
    .await;
    expect_error(&out.result, RunErrorKind::Model, "exceeds 1024 bytes");
}

/// Runs `h1_prose.md` (one model turn in the H1) against `client`; the run must fail.
async fn h1_prose_error(client: GatewayClient) -> RunError {
    let kit = kit();
    let picker = support::picker(&kit.catalog);
    let models =
        ModelCatalog::from_models_json(support::default_catalog().to_string().as_bytes()).unwrap();
    let prompt = load("h1_prose.md");
    run(
        &prompt,
        "",
        ResolutionContext::new(&picker, &models, &kit.catalog),
        &StoreRef::memory(),
        RunConfig::new("t").client(client),
    )
    .await
    .unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_gateways_are_retryable_transport_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = GatewayClient::new(&url, KEY).unwrap();
    let missing = client.models(RequestLimits::default()).await.unwrap_err();
    assert!(
        missing
            .to_string()
            .contains(&format!("could not connect to {url}/v1/models")),
        "{missing}"
    );
    let error = h1_prose_error(client).await;
    assert_eq!(error.kind(), RunErrorKind::Model);
    assert!(error.is_retryable(), "{error}");

    let error = h1_prose_error(GatewayClient::disabled()).await;
    assert!(error.to_string().contains("disabled"), "{error}");
}

#[tokio::test]
async fn model_failures_keep_the_completion_error_as_their_source() {
    use std::error::Error as _;
    let error = h1_prose_error(GatewayClient::disabled()).await;
    assert_eq!(error.kind(), RunErrorKind::Model);
    let source = error
        .source()
        .and_then(|s| s.downcast_ref::<promptforge_core::CompletionError>())
        .unwrap_or_else(|| panic!("no CompletionError source: {error:?}"));
    assert_eq!(
        source.kind(),
        promptforge_core::CompletionErrorKind::Disabled,
        "{source}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_proxies_to_the_gateway_with_untrusted_output() {
    let upstream = Upstream::start(Vec::new()).await;
    let client = GatewayClient::new(&format!("{}/v1", upstream.url), KEY).unwrap();
    let tool = WebSearch::new(client);
    assert_eq!(tool.wire_name(), "web_search");
    let output = tool
        .call(r#"{"query": "rust news", "count": 3, "freshness": "pw"}"#)
        .await
        .unwrap();
    assert!(!output.is_trusted());
    assert!(output.text().contains("Rust 2026"));
    assert_eq!(
        upstream.searches()[0],
        json!({"query": "rust news", "count": 3, "freshness": "pw"})
    );
    let error = tool
        .call(r#"{"query": "x", "count": 50}"#)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("1 to 20"));
    assert_eq!(upstream.searches().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_add_takes_aliases_handles_and_arrays_atomically() {
    let replies = vec![text("a"), text("b"), text("c"), text("d")];
    let out = exec("tools_add.md", "", replies).await;
    assert_eq!(out.result.unwrap(), "false d");
    let requests = out.upstream.requests();
    let tools = |i: usize| -> Vec<(String, String)> {
        requests[i]["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| {
                        (
                            t["function"]["name"].as_str().unwrap().to_owned(),
                            t["function"]["description"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(tools(0).is_empty(), "an empty add is a no-op");
    assert_eq!(
        tools(1),
        [(
            "web_search".to_owned(),
            "Bind-level search description".to_owned()
        )]
    );
    let names: Vec<String> = tools(2).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["web_search", "calculator"]);
    assert!(tools(3).is_empty(), "a failed add adds nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_tool_handler_cannot_swallow_its_budget() {
    // Issue #12: the death is fatal for the run, not a tool failure shown to the model.
    let task = tokio::spawn(async {
        let replies = vec![calls(&[("spin", "{}")]), text("should not be reached")];
        let limits = RunLimits::new().lua_instructions(std::num::NonZeroU64::new(200_000).unwrap());
        exec_with("local_tool_budget.md", "", replies, &kit(), |c| {
            c.limits(limits)
        })
        .await
        .result
    });
    let result = tokio::time::timeout(std::time::Duration::from_secs(60), task)
        .await
        .expect("the run did not end within 60 s")
        .unwrap();
    expect_error(
        &result,
        RunErrorKind::InstructionBudget,
        "RunLimits::lua_instructions",
    );
}
