//! The real-model scenarios: each runs a prompt from `scenarios/` (or a raw request) through
//! a real gateway against a real model (SmolLM2 for text, Qwen2.5-Coder for tool calls) and
//! checks what a real model cannot fake.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use promptforge_core::client::{GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::observe::{DebugCapture, DebugEvent};
use promptforge_core::tools::{Tool, WebSearch};
use promptforge_core::{
    NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig, RunError,
    RunErrorKind, StoreRef, ToolCatalog, run,
};
use promptforge_tool_picker::{Config, ToolPicker};
use rand::Rng;
use serde_json::{Value as Json, json};

use crate::ScenarioError;
use crate::gateway::{GatewayGuard, MODEL_NAME, TOOL_MODEL_NAME};
use crate::search::SearchStub;

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
    /// Tool calls that succeeded, by wire name, in order.
    pub tool_calls: Vec<String>,
    /// Tool calls that failed, by wire name, in order.
    pub tool_failures: Vec<String>,
    /// Arms finished not ok (exhausted stubs).
    pub arms_not_ok: usize,
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
            Observation::ArmFinished { ok: false, .. } => s.arms_not_ok += 1,
            Observation::ToolCallSucceeded { tool } => s.tool_calls.push(tool.to_owned()),
            Observation::ToolCallFailed { tool, .. } => s.tool_failures.push(tool.to_owned()),
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
    search: SearchStub,
    client: GatewayClient,
    models: ModelCatalog,
    tools: ToolCatalog,
    picker: ToolPicker,
}

/// The outcome of one prompt run that succeeded.
pub struct Ran {
    /// The run's result string.
    pub result: String,
    /// The run's store.
    pub store: StoreRef,
    /// What was observed.
    pub seen: Seen,
}

/// The outcome of one prompt run, successful or not.
pub struct Outcome {
    /// The run's result, or its error.
    pub result: Result<String, RunError>,
    /// The run's store.
    pub store: StoreRef,
    /// What was observed.
    pub seen: Seen,
}

impl Harness {
    /// Connects to a ready gateway: fetches the model catalog and builds the tool picker
    /// over the live tool catalog (`web_search`, proxied by the gateway to `search`).
    pub async fn new(gateway: GatewayGuard, search: SearchStub) -> Result<Self, ScenarioError> {
        let client = GatewayClient::new(&gateway.url, &gateway.key)
            .map_err(|e| ScenarioError::Setup(format!("gateway client: {e}")))?;
        let models = client
            .models(RequestLimits::default())
            .await
            .map_err(|e| ScenarioError::Setup(format!("model catalog: {e}")))?;
        let web_search: Arc<dyn Tool> = Arc::new(WebSearch::new(client.clone()));
        let tools =
            ToolCatalog::new(&[web_search]).map_err(|e| ScenarioError::Setup(e.to_string()))?;
        let picker = ToolPicker::build(tools.picker_catalog(), Config::default())
            .map_err(|e| ScenarioError::Setup(format!("tool picker: {e}")))?;
        Ok(Self {
            gateway,
            search,
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

    /// Parses `scenarios/<name>` and runs it with `input`, recording what it saw; a run
    /// error fails the scenario.
    pub async fn run_prompt(&self, name: &str, input: &str) -> Result<Ran, ScenarioError> {
        let outcome = self.run_outcome(name, input).await?;
        match outcome.result {
            Ok(result) => Ok(Ran {
                result,
                store: outcome.store,
                seen: outcome.seen,
            }),
            Err(e) => Err(ScenarioError::Failed(format!("run: {e}"))),
        }
    }

    /// Parses `scenarios/<name>` and runs it with `input`, recording what it saw; the run's
    /// error is part of the outcome.
    pub async fn run_outcome(&self, name: &str, input: &str) -> Result<Outcome, ScenarioError> {
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
        let result = run(&prompt, input, resolution, &store, config).await;
        let seen = std::mem::take(&mut *recorder.0.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Outcome {
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
    turns_on(&ran.seen, n, MODEL_NAME)
}

/// Exactly `n` model turns, every one on `model`.
fn turns_on(seen: &Seen, n: usize, model: &str) -> Result<(), ScenarioError> {
    check(seen.turns.len() == n, || {
        format!(
            "expected {n} model turns, the observer saw {:?}",
            seen.turns
        )
    })?;
    check(seen.turns.iter().all(|(m, _, _)| m == model), || {
        format!(
            "a turn went to another model than {model}: {:?}",
            seen.turns
        )
    })
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
        ("streaming", |h| Box::pin(streaming(h))),
        ("local_tool", |h| Box::pin(local_tool(h))),
        ("catalog_search", |h| Box::pin(catalog_search(h))),
        ("tool_budget", |h| Box::pin(tool_budget(h))),
        ("fanout_tools", |h| Box::pin(fanout_tools(h))),
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

/// A random four-digit code: a fact no model can know before a tool tells it.
fn random_code() -> String {
    rand::rng().random_range(1000..10_000).to_string()
}

/// The `n`th request body sent (0-based).
fn request(seen: &Seen, n: usize) -> Result<&Json, ScenarioError> {
    seen.requests.get(n).ok_or_else(|| {
        ScenarioError::Failed(format!(
            "expected a request #{}, only {} went out",
            n + 1,
            seen.requests.len()
        ))
    })
}

/// The names of the tools a request offered.
fn offered(request: &Json) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `name` is offered as a well-formed OpenAI tool whose parameters require `param` of
/// type `kind`.
fn check_offered(request: &Json, name: &str, param: &str, kind: &str) -> Result<(), ScenarioError> {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let tool = tools
        .iter()
        .find(|t| t["function"]["name"] == name)
        .ok_or_else(|| ScenarioError::Failed(format!("{name} not offered: {request}")))?;
    check(tool["type"] == "function", || format!("tool type: {tool}"))?;
    let params = &tool["function"]["parameters"];
    check(
        params["type"] == "object"
            && params["properties"][param]["type"] == kind
            && params["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|p| p == param)),
        || format!("malformed parameters of {name}: {params}"),
    )
}

/// The text of every `tool` message in a request.
fn tool_results(request: &Json) -> Vec<String> {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A store file holding a count.
fn count(store: &StoreRef, path: &str) -> Result<usize, ScenarioError> {
    read(store, path)?
        .trim()
        .parse()
        .map_err(|e| ScenarioError::Failed(format!("{path}: {e}")))
}

/// The tool loop's shape on the tool model: every turn but the last asked for tool calls,
/// the last did not (`ended` = true) or did too (`ended` = false: the budget ran out).
/// Returns the number of rounds that asked for calls.
fn check_loop(seen: &Seen, ended: bool) -> Result<usize, ScenarioError> {
    check(
        seen.turns.iter().all(|(m, _, _)| m == TOOL_MODEL_NAME),
        || {
            format!(
                "a turn went to another model than {TOOL_MODEL_NAME}: {:?}",
                seen.turns
            )
        },
    )?;
    let finishes: Vec<Option<&str>> = seen.turns.iter().map(|t| t.1.as_deref()).collect();
    let calling = finishes
        .iter()
        .filter(|f| **f == Some("tool_calls"))
        .count();
    let shape = match finishes.split_last() {
        Some((last, rest)) => {
            rest.iter().all(|f| *f == Some("tool_calls"))
                && ((*last == Some("tool_calls")) != ended)
        }
        None => false,
    };
    check(shape, || {
        format!(
            "expected {} turns ending {}, saw finish reasons {finishes:?}",
            if ended { "tool-call" } else { "only tool-call" },
            if ended {
                "on a final reply"
            } else {
                "on a tool call"
            }
        )
    })?;
    Ok(calling)
}

/// The observer saw exactly `counted` successful calls, all of `wire`, and no failed one.
fn check_observed(seen: &Seen, wire: &str, counted: usize) -> Result<(), ScenarioError> {
    check(
        seen.tool_calls.len() == counted
            && seen.tool_calls.iter().all(|t| t == wire)
            && seen.tool_failures.is_empty(),
        || {
            format!(
                "{counted} {wire} call(s) counted, the observer saw {:?} succeed and {:?} fail",
                seen.tool_calls, seen.tool_failures
            )
        },
    )
}

async fn local_tool(h: &Harness) -> Result<String, ScenarioError> {
    let code = random_code();
    let ran = h.run_prompt("local_tool.md", &code).await?;
    check_offered(request(&ran.seen, 0)?, "lookup_code", "name", "string")?;
    let rounds = check_loop(&ran.seen, true)?;
    check(rounds >= 1, || {
        format!("the model never called lookup_code: {:?}", ran.seen.turns)
    })?;
    // The handler really ran, with the arguments the model chose.
    let lookups = read(&ran.store, "lookups.txt")?;
    let names: Vec<&str> = lookups.lines().collect();
    check(
        !names.is_empty() && names.iter().all(|n| n.eq_ignore_ascii_case("orion")),
        || format!("the handler saw {names:?}, expected orion"),
    )?;
    // The epilog's count is the real one: handler runs, observed successful calls.
    let calls = count(&ran.store, "calls.txt")?;
    check(calls == names.len(), || {
        format!(
            "tools.calls.lookup_code {calls}, handler runs {}",
            names.len()
        )
    })?;
    check_observed(&ran.seen, "lookup_code", calls)?;
    // The result went back to the model, and the final reply carries it.
    let second = request(&ran.seen, 1)?;
    check(
        tool_results(second).iter().any(|r| r.contains(&code)),
        || format!("the second request carries no tool result with {code}: {second}"),
    )?;
    let answer = read(&ran.store, "answer.txt")?;
    check(answer.contains(&code) && ran.result == answer, || {
        format!(
            "the final reply {answer:?} (result {:?}) lacks the code {code}",
            ran.result
        )
    })?;
    Ok(format!(
        "{} turns, {calls} call(s), code in reply",
        ran.seen.turns.len()
    ))
}

async fn catalog_search(h: &Harness) -> Result<String, ScenarioError> {
    let token = format!("Zeta-{}", random_code());
    h.search.answer_with(&format!(
        "The latest Quillbox release is code-named {token}."
    ));
    let ran = h.run_prompt("catalog_search.md", "").await?;
    let received = h.search.received();
    // The picker bound the description to the catalog's web_search; the model saw its wire
    // name, not the alias.
    let first = request(&ran.seen, 0)?;
    check(offered(first) == ["web_search"], || {
        format!("offered {:?}, expected [web_search]", offered(first))
    })?;
    check_offered(first, "web_search", "query", "string")?;
    let rounds = check_loop(&ran.seen, true)?;
    check(rounds >= 1, || {
        format!("the model never called web_search: {:?}", ran.seen.turns)
    })?;
    // Dispatched under the alias: tools.calls.search counts what reached the provider.
    let calls = count(&ran.store, "calls.txt")?;
    check(calls >= 1 && received.len() == calls, || {
        format!("tools.calls.search {calls}, provider queries {received:?}")
    })?;
    check_observed(&ran.seen, "web_search", calls)?;
    check(
        received
            .iter()
            .all(|r| r.authorized && !r.query.trim().is_empty()),
        || format!("provider queries {received:?}"),
    )?;
    // The result went back (untrusted, so inside the run's envelope) and reached the reply.
    let second = request(&ran.seen, 1)?;
    check(
        tool_results(second)
            .iter()
            .any(|r| r.contains(&token) && r.starts_with("<untrusted-input nonce=")),
        || format!("the second request carries no enveloped result with {token}: {second}"),
    )?;
    let answer = read(&ran.store, "answer.txt")?;
    check(answer.contains(&token), || {
        format!("the final reply {answer:?} lacks {token}")
    })?;
    Ok(format!(
        "{} turns, {calls} search(es) {:?}",
        ran.seen.turns.len(),
        received
            .iter()
            .map(|r| r.query.as_str())
            .collect::<Vec<_>>()
    ))
}

/// The frontmatter budget of `tool_budget.md`.
const BUDGET: usize = 3;

/// A unit (`Section` or `Arm`, its heading) that ran out of the budget: exactly [`BUDGET`]
/// turns that all asked for calls, every handler run observed, and none of the unit's Lua
/// after the prose ran.
fn check_exhausted(out: &Outcome, unit: &str) -> Result<(), ScenarioError> {
    check(out.seen.turns.len() == BUDGET, || {
        format!("{unit}: expected {BUDGET} turns, saw {:?}", out.seen.turns)
    })?;
    check_loop(&out.seen, false)?;
    let pages = read(&out.store, &format!("{unit}-pages.txt"))?
        .lines()
        .count();
    check(
        pages >= BUDGET && out.seen.tool_calls.len() == pages,
        || {
            format!(
                "{unit}: {pages} handler runs, observed {:?}",
                out.seen.tool_calls
            )
        },
    )?;
    let after = format!("{}-after.txt", unit.to_ascii_lowercase());
    check(!out.store.exists(&after).unwrap_or(true), || {
        format!("{unit}: the Lua after the exhausted prose ran ({after} exists)")
    })
}

async fn tool_budget(h: &Harness) -> Result<String, ScenarioError> {
    // In a section: a run error naming the place.
    let out = h.run_outcome("tool_budget.md", "").await?;
    let error = match &out.result {
        Ok(result) => {
            return Err(ScenarioError::Failed(format!(
                "the section's run returned {result:?} instead of failing; turns {:?}",
                out.seen.turns
            )));
        }
        Err(error) => error,
    };
    check(error.kind() == RunErrorKind::ToolLoopExhausted, || {
        format!(
            "expected tool_loop_exhausted, got {:?}: {error}",
            error.kind()
        )
    })?;
    check(
        error.message().contains("tool_budget.md:") && error.message().contains("all 3 iterations"),
        || format!("the error does not name the place and budget: {error}"),
    )?;
    check_exhausted(&out, "Section")?;
    let section_error = error.message().to_owned();

    // In a fanout arm: a soft result, and the run goes on.
    let out = h.run_outcome("tool_budget.md", "arm").await?;
    let result = out
        .result
        .as_ref()
        .map_err(|e| ScenarioError::Failed(format!("the arm's exhaustion failed the run: {e}")))?;
    check(result == "fanout survived", || format!("result {result:?}"))?;
    let arm = read(&out.store, "arm-result.txt")?;
    check(arm == "false true 0", || {
        format!("the arm's result (ok exhausted #text) is {arm:?}, expected \"false true 0\"")
    })?;
    check(
        out.seen.arms_started == 1 && out.seen.arms_not_ok == 1,
        || {
            format!(
                "arms started {} not ok {}",
                out.seen.arms_started, out.seen.arms_not_ok
            )
        },
    )?;
    check_exhausted(&out, "Arm")?;
    Ok(format!("section: {section_error}; arm: soft"))
}

async fn fanout_tools(h: &Harness) -> Result<String, ScenarioError> {
    let mut codes: Vec<(&str, String)> = Vec::new();
    for name in ["orion", "lyra", "vega"] {
        let mut code = random_code();
        while codes.iter().any(|(_, c)| *c == code) {
            code = random_code();
        }
        codes.push((name, code));
    }
    let input = codes
        .iter()
        .map(|(n, c)| format!("{n}={c}"))
        .collect::<Vec<_>>()
        .join(",");
    let ran = h.run_prompt("fanout_tools.md", &input).await?;
    check(ran.result == "3", || {
        format!("{} arms finished ok, expected 3", ran.result)
    })?;
    check(ran.seen.arms_started == 3 && ran.seen.arms_ok == 3, || {
        format!(
            "arms started {} ok {}",
            ran.seen.arms_started, ran.seen.arms_ok
        )
    })?;
    check(
        ran.seen.turns.iter().all(|(m, _, _)| m == TOOL_MODEL_NAME),
        || format!("a turn went to another model: {:?}", ran.seen.turns),
    )?;
    let mut total = 0;
    for (name, code) in &codes {
        let lookups = read(&ran.store, &format!("arms/{name}-lookups.txt"))?;
        let names: Vec<&str> = lookups.lines().collect();
        check(
            !names.is_empty() && names.iter().all(|n| n.eq_ignore_ascii_case(name)),
            || format!("the {name} arm's handler saw {names:?}"),
        )?;
        let calls = count(&ran.store, &format!("arms/{name}-calls.txt"))?;
        check(calls == names.len(), || {
            format!(
                "the {name} arm: tools.calls {calls}, handler runs {}",
                names.len()
            )
        })?;
        total += calls;
        let reply = read(&ran.store, &format!("arms/{name}.txt"))?;
        check(reply.contains(code.as_str()), || {
            format!("the {name} arm's reply {reply:?} lacks its code {code}")
        })?;
    }
    check_observed(&ran.seen, "lookup_code", total)?;
    Ok(format!(
        "3 arms, {total} calls, {} turns",
        ran.seen.turns.len()
    ))
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
