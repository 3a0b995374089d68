//! Model turns: single rounds, the tool-call loop, and `infer`.

use std::sync::Arc;

use promptforge_tool_picker::{ToolDescriptor, ToolId};
use serde_json::Value as Json;

use super::bindings::{ModelBinding, ToolBinding, binding_error, listing};
use super::lua_tools::{ParamKind, check_local_args, local_handler};
use super::{Host, TurnVm};
use crate::client::{ChatMessage, ChatRequest, ChatResponse, CompletionError, ToolCall, ToolSpec};
use crate::error::{RunError, RunErrorKind};
use crate::observe::{DebugEvent, Observation};
use crate::tools::Tool;
use crate::trace::{Attrs, End, SpanGuard, SpanKind};

/// How many model rounds a prose block may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rounds {
    /// One tool-free round (every prose block but the unit's last).
    Single,
    /// The full tool loop, up to `max_tool_iterations` rounds (the unit's last prose block).
    ToolLoop,
}

/// How a prose block ended.
pub(crate) enum ProseOutcome {
    /// The model's final reply (possibly `""` after a silent tool-only exit).
    Reply(String),
    /// A fanout arm's tool loop ran out of iterations.
    Exhausted,
}

/// A tool offered to the model in one round.
enum Offered {
    Catalog {
        alias: String,
        tool: Arc<dyn Tool>,
        description: String,
    },
    Local {
        alias: String,
        description: String,
        parameters: Json,
        params: Vec<(String, ParamKind)>,
    },
}

impl Offered {
    fn wire_name(&self) -> &str {
        match self {
            Self::Catalog { tool, .. } => tool.wire_name(),
            Self::Local { alias, .. } => alias,
        }
    }

    fn alias(&self) -> &str {
        match self {
            Self::Catalog { alias, .. } | Self::Local { alias, .. } => alias,
        }
    }

    fn spec(&self) -> ToolSpec {
        match self {
            Self::Catalog {
                tool, description, ..
            } => ToolSpec {
                name: tool.wire_name().to_owned(),
                description: description.clone(),
                parameters: tool.parameters().clone(),
            },
            Self::Local {
                alias,
                description,
                parameters,
                ..
            } => ToolSpec {
                name: alias.clone(),
                description: description.clone(),
                parameters: parameters.clone(),
            },
        }
    }
}

/// The section's model: its `models.use` selection, else the `models.default` baseline.
fn section_model<H: Host>(host: &H, line: usize) -> Result<Arc<ModelBinding>, RunError> {
    let selected = host.scope().model_use.clone();
    let bindings = host.agent().bindings();
    let alias = selected.or_else(|| bindings.default_model.clone()).ok_or_else(|| {
        RunError::new(
            RunErrorKind::NoModel,
            format!(
                "{}:{}: this section has prose for the model but no model is bound; declare one \
                 with models.default(alias, description) in the H1 or select one with \
                 models.use(alias)",
                host.agent().origin,
                line
            ),
        )
    })?;
    bindings.model(&alias)
}

/// Runs one prose block: a single round, or the full tool loop for the last prose block.
pub(crate) async fn prose_turn<H: Host, V: TurnVm>(
    host: &H,
    vm: &V,
    line: usize,
    text: String,
    rounds: Rounds,
) -> Result<ProseOutcome, RunError> {
    let model = section_model(host, line)?;
    {
        let mut scope = host.scope();
        scope.visible_locals = scope.locals.len();
        scope.conversation.push(ChatMessage::User(text));
    }
    if rounds == Rounds::Single {
        let response = model_round(vm, host, &model, Vec::new(), line).await?;
        let reply = response.content.clone().unwrap_or_default();
        if reply.trim().is_empty() {
            return Err(empty_reply(&response));
        }
        host.scope().conversation.push(ChatMessage::Assistant {
            content: Some(reply.clone()),
            tool_calls: Vec::new(),
        });
        return Ok(ProseOutcome::Reply(reply));
    }

    let offered = offered_tools(host)?;
    check_near_duplicates(host, &offered)?;
    let specs: Vec<ToolSpec> = offered.iter().map(Offered::spec).collect();
    let iterations = host.agent().max_tool_iterations;
    let mut calls_done = 0u32;
    for _ in 0..iterations {
        let response = model_round(vm, host, &model, specs.clone(), line).await?;
        if response.tool_calls.is_empty() {
            let reply = response.content.clone().unwrap_or_default();
            if reply.trim().is_empty() {
                if response.finish_reason.as_deref() == Some("stop") && calls_done > 0 {
                    return Ok(ProseOutcome::Reply(String::new()));
                }
                return Err(empty_reply(&response));
            }
            host.scope().conversation.push(ChatMessage::Assistant {
                content: Some(reply.clone()),
                tool_calls: Vec::new(),
            });
            return Ok(ProseOutcome::Reply(reply));
        }
        host.scope().conversation.push(ChatMessage::Assistant {
            content: response.content.clone().filter(|c| !c.is_empty()),
            tool_calls: response.tool_calls.clone(),
        });
        for call in &response.tool_calls {
            let content = dispatch(vm, host, &offered, call, line).await?;
            calls_done += 1;
            host.scope().conversation.push(ChatMessage::Tool {
                tool_call_id: call.id.clone(),
                content,
            });
        }
    }
    if host.in_fanout_arm() {
        return Ok(ProseOutcome::Exhausted);
    }
    Err(RunError::new(
        RunErrorKind::ToolLoopExhausted,
        format!(
            "{}:{}: the tool loop used all {iterations} iterations (max_tool_iterations) without \
             a final reply",
            host.agent().origin,
            line
        ),
    ))
}

fn empty_reply(response: &ChatResponse) -> RunError {
    let finish = response.finish_reason.as_deref().unwrap_or("none");
    RunError::from(CompletionError::empty_reply(format!(
        "the model returned an empty reply (finish reason: {finish})"
    )))
}

/// One model request on the section's conversation; updates `sys` and observes.
async fn model_round<H: Host, V: TurnVm>(
    vm: &V,
    host: &H,
    model: &ModelBinding,
    tools: Vec<ToolSpec>,
    line: usize,
) -> Result<ChatResponse, RunError> {
    let messages = host.scope().conversation.clone();
    let response = request(host, model, messages, tools, Some(line), false).await?;
    vm.set_sys_model(&model.model_id, response.finish_reason.as_deref())?;
    Ok(response)
}

/// `models.infer` / `handle:infer`: one tool-free round on a fresh conversation. Never
/// touches `reply` or `sys`.
pub(crate) async fn infer<H: Host>(
    host: &H,
    model: &ModelBinding,
    prompt: String,
    line: Option<usize>,
) -> Result<String, RunError> {
    let messages = vec![ChatMessage::User(prompt)];
    let response = request(host, model, messages, Vec::new(), line, true).await?;
    match response.content.clone() {
        Some(text) if !text.trim().is_empty() => Ok(text),
        _ => Err(empty_reply(&response)),
    }
}

/// Sends one request with cancellation, debug capture, observations and its trace span.
async fn request<H: Host>(
    host: &H,
    model: &ModelBinding,
    messages: Vec<ChatMessage>,
    tools: Vec<ToolSpec>,
    line: Option<usize>,
    infer: bool,
) -> Result<ChatResponse, RunError> {
    let run = host.agent();
    let client = run.client()?;
    let request = ChatRequest {
        model: model.model_id.clone(),
        messages,
        tools,
        temperature: model.temperature,
        max_tokens: model.max_tokens,
        thinking: model.thinking_request,
    };
    let turn = {
        let mut scope = host.scope();
        scope.turns += 1;
        scope.turns - 1
    };
    let trace = host.trace().current();
    let body = (run.debug.is_some() || trace.is_on()).then(|| request.to_json());
    let span = trace.start(SpanKind::ModelTurn, &model.model_id, line, None, |attrs| {
        attrs.text("model", &model.model_id);
        attrs.number("turn", u64::from(turn));
        attrs.flag("infer", infer);
        if let Some(endpoint) = client.endpoint() {
            attrs.text("gateway", endpoint);
        }
        if let Some(body) = &body {
            attrs.json("request", body);
        }
    });
    if let (Some(debug), Some(body)) = (&run.debug, &body) {
        debug.on_event(
            &run.execution,
            host.heading(),
            turn,
            DebugEvent::Request { body },
        );
    }
    let traceparent = span.scope().traceparent();
    let sent = tokio::select! {
        response = client.chat_traced(&request, run.request_limits, traceparent.as_deref()) => {
            response.map_err(RunError::from)
        }
        () = host.cancel().cancelled() => Err(RunError::cancelled()),
    };
    let (response, first_byte) = match sent {
        Ok(sent) => sent,
        Err(error) => {
            span.end(End::Error(&error), |_| {});
            return Err(error);
        }
    };
    span.end(End::Ok, |attrs| {
        trace_reply(attrs, &response, first_byte, traceparent)
    });
    if let Some(debug) = &run.debug {
        debug.on_event(
            &run.execution,
            host.heading(),
            turn,
            DebugEvent::Response {
                body: &response.raw,
                finish_reason: response.finish_reason.as_deref(),
                reasoning: response.reasoning.as_deref(),
            },
        );
    }
    host.observe(Observation::ModelTurnCompleted {
        model: &model.model_id,
        finish_reason: response.finish_reason.as_deref(),
        turn,
    });
    if response.finish_reason.as_deref() == Some("length") {
        host.observe(Observation::ModelTurnTruncated {
            model: &model.model_id,
            turn,
        });
    }
    Ok(response)
}

/// A model turn's end-time trace attributes: the reply, finish reason, token usage and
/// timing.
fn trace_reply(
    attrs: &mut Attrs,
    response: &ChatResponse,
    first_byte: Option<std::time::Duration>,
    traceparent: Option<String>,
) {
    let calls: Vec<Json> = response
        .tool_calls
        .iter()
        .map(|call| serde_json::json!({"id": call.id, "name": call.name, "arguments": call.arguments}))
        .collect();
    let mut reply = serde_json::Map::new();
    reply.insert(
        "content".into(),
        response.content.clone().map_or(Json::Null, Json::String),
    );
    reply.insert("tool_calls".into(), Json::Array(calls));
    if let Some(reasoning) = &response.reasoning {
        reply.insert("reasoning".into(), Json::String(reasoning.clone()));
    }
    attrs.json("reply", &Json::Object(reply));
    if let Some(reason) = &response.finish_reason {
        attrs.text("finish_reason", reason);
    }
    let raw = &response.raw;
    if let Some(usage) = raw.get("usage") {
        let count = |key: &str| usage.get(key).and_then(Json::as_u64);
        let mut tokens = serde_json::Map::new();
        for (from, to) in [
            ("prompt_tokens", "input_tokens"),
            ("completion_tokens", "output_tokens"),
            ("total_tokens", "total_tokens"),
        ] {
            if let Some(n) = count(from) {
                tokens.insert(to.into(), Json::from(n));
            }
        }
        attrs.json("usage", &Json::Object(tokens));
    }
    if let Some(model) = raw.get("model").and_then(Json::as_str) {
        attrs.text("response_model", model);
    }
    if let Some(id) = raw.get("id").and_then(Json::as_str) {
        attrs.text("response_id", id);
    }
    if let Some(first_byte) = first_byte {
        attrs.number(
            "first_byte_us",
            u64::try_from(first_byte.as_micros()).unwrap_or(u64::MAX),
        );
    }
    if let Some(traceparent) = traceparent {
        attrs.text("traceparent", &traceparent);
    }
}

/// The tools the section offers: `tools.always`, then `tools.add`, then the local tools
/// declared before this prose block. Description precedence: add, then bind/always, then
/// the catalog.
fn offered_tools<H: Host>(host: &H) -> Result<Vec<Offered>, RunError> {
    let scope = host.scope();
    let bindings = host.agent().bindings();
    let mut offered: Vec<Offered> = Vec::new();
    let mut push = |binding: &Arc<ToolBinding>, description: Option<&String>| {
        if offered
            .iter()
            .any(|o| o.wire_name() == binding.tool.wire_name())
        {
            if let Some(description) = description {
                for entry in &mut offered {
                    if let Offered::Catalog {
                        tool,
                        description: d,
                        ..
                    } = entry
                        && tool.wire_name() == binding.tool.wire_name()
                    {
                        d.clone_from(description);
                    }
                }
            }
            return;
        }
        offered.push(Offered::Catalog {
            alias: binding.alias.clone(),
            tool: Arc::clone(&binding.tool),
            description: description.unwrap_or(&binding.description).clone(),
        });
    };
    for alias in &bindings.always {
        push(&bindings.tool(alias)?, None);
    }
    for (alias, description) in &scope.added {
        push(&bindings.tool(alias)?, description.as_ref());
    }
    for local in scope.locals.iter().take(scope.visible_locals) {
        offered.push(Offered::Local {
            alias: local.alias.clone(),
            description: local.description.clone(),
            parameters: local.parameters.clone(),
            params: local.params.clone(),
        });
    }
    Ok(offered)
}

/// Rejects a scope holding near-duplicate tools, before any model call: every tool the
/// section offers is compared, catalog and local alike (a local tool by its description and
/// parameters). Fails closed: when a comparison cannot be made (no picker, a catalog tool
/// the picker does not index, a tool that cannot be embedded) the section does not run.
fn check_near_duplicates<H: Host>(host: &H, offered: &[Offered]) -> Result<(), RunError> {
    if offered.len() < 2 {
        return Ok(());
    }
    let names: Vec<String> = offered.iter().map(offered_name).collect();
    let Some(picker) = host.agent().picker()? else {
        return Err(binding_error(format!(
            "the tools {} offered to this section cannot be checked for near-duplicates:              this run has no tool picker",
            names.join(", ")
        )));
    };
    let mut descriptors = Vec::with_capacity(offered.len());
    for (entry, name) in offered.iter().zip(&names) {
        descriptors.push(match entry {
            Offered::Catalog { tool, .. } => picker.get(tool.id()).cloned().ok_or_else(|| {
                binding_error(format!(
                    "the tool {name} offered to this section cannot be checked for                      near-duplicates: the tool picker does not index it"
                ))
            })?,
            Offered::Local {
                alias,
                description,
                parameters,
                ..
            } => ToolDescriptor::new(
                ToolId::new(LOCAL_SERVER, alias.clone()),
                description.clone(),
                parameters.clone(),
            ),
        });
    }
    let pairs = picker.near_duplicates_among(&descriptors).map_err(|e| {
        binding_error(format!(
            "the tool {} offered to this section cannot be checked for near-duplicates: {}",
            names.get(e.position()).map_or("?", String::as_str),
            e
        ))
    })?;
    if let Some(pair) = pairs.iter().next() {
        let position = |t: &ToolDescriptor| {
            descriptors
                .iter()
                .position(|d| std::ptr::eq(d, t))
                .and_then(|i| names.get(i))
                .map_or("?", String::as_str)
        };
        return Err(binding_error(format!(
            "the tools {} and {} offered to this section are near-duplicates (similarity {:.3}); \
             offer only one of them",
            position(pair.first()),
            position(pair.second()),
            pair.similarity()
        )));
    }
    Ok(())
}

/// The pseudo-server local tools are compared under (never shown: names come from
/// [`offered_name`]).
const LOCAL_SERVER: &str = "\u{0}local";

/// How a message names an offered tool: a catalog tool by its identity, a local one by its
/// alias.
fn offered_name(entry: &Offered) -> String {
    match entry {
        Offered::Catalog { tool, .. } => tool.id().to_string(),
        Offered::Local { alias, .. } => format!("local tool `{alias}`"),
    }
}

/// Runs one tool call; failures become text for the model. Cancellation is fatal.
async fn dispatch<H: Host, V: TurnVm>(
    vm: &V,
    host: &H,
    offered: &[Offered],
    call: &ToolCall,
    line: usize,
) -> Result<String, RunError> {
    let entry = offered.iter().find(|o| o.wire_name() == call.name);
    let span =
        host.trace()
            .current()
            .start(SpanKind::ToolCall, &call.name, Some(line), None, |attrs| {
                attrs.text("tool", &call.name);
                attrs.text("call_id", &call.id);
                match serde_json::from_str::<Json>(&call.arguments) {
                    Ok(arguments) => attrs.json("arguments", &arguments),
                    Err(_) => attrs.text("arguments", &call.arguments),
                }
                if let Some(entry) = entry {
                    attrs.text("alias", entry.alias());
                    match entry {
                        Offered::Catalog { tool, .. } => {
                            attrs.text("source", "catalog");
                            attrs.text("tool_id", &tool.id().to_string());
                        }
                        Offered::Local { .. } => attrs.text("source", "local"),
                    }
                } else {
                    attrs.text("source", "unknown");
                }
            });
    let outcome = dispatch_inner(vm, host, offered, call, &span).await;
    match &outcome {
        Ok((text, Ok(trusted))) => span.end(End::Ok, |attrs| {
            attrs.text("result", text);
            attrs.flag("trusted", *trusted);
        }),
        Ok((text, Err(why))) => span.end(End::Failed("tool", why), |attrs| {
            attrs.text("result", text);
        }),
        Err(error) => span.end(End::Error(error), |_| {}),
    }
    outcome.map(|(text, _)| text)
}

/// Runs one tool call: `(text for the model, Ok(trusted) or Err(why it failed))`.
async fn dispatch_inner<H: Host, V: TurnVm>(
    vm: &V,
    host: &H,
    offered: &[Offered],
    call: &ToolCall,
    span: &SpanGuard,
) -> Result<(String, Result<bool, String>), RunError> {
    let run = host.agent();
    let Some(entry) = offered.iter().find(|o| o.wire_name() == call.name) else {
        let declared = run
            .bindings()
            .tools
            .values()
            .any(|binding| binding.tool.wire_name() == call.name);
        let available: Vec<&str> = offered.iter().map(Offered::wire_name).collect();
        let why = if declared {
            format!(
                "error: the tool `{}` is declared in this prompt but not available in this \
                 section; available tools: {}",
                call.name,
                listing(&available)
            )
        } else {
            format!(
                "error: unknown tool `{}`; available tools: {}",
                call.name,
                listing(&available)
            )
        };
        host.observe(Observation::ToolCallFailed {
            tool: &call.name,
            error: &why,
        });
        return Ok((why.clone(), Err(why)));
    };
    *host
        .scope()
        .calls
        .entry(entry.alias().to_owned())
        .or_insert(0) += 1;
    let outcome = match entry {
        Offered::Catalog { tool, .. } => {
            let call_future = tool.call(&call.arguments);
            let result = tokio::select! {
                result = call_future => result,
                () = host.cancel().cancelled() => return Err(RunError::cancelled()),
            };
            match result {
                Ok(output) if output.is_trusted() => Ok((output.into_text(), true)),
                Ok(output) => Ok((crate::envelope::wrap(output.text(), &run.nonce), false)),
                Err(error) if error.is_cancelled() => return Err(RunError::tool_cancelled(error)),
                Err(error) => Err(error.to_string()),
            }
        }
        Offered::Local { alias, params, .. } => {
            // A handler that ran out of its budget (or was cancelled) killed the unit: that
            // error ends the section; every other failure is text for the model.
            let handled = match check_local_args(params, &call.arguments) {
                Ok(args) => match local_handler(vm.lua(), alias) {
                    Ok(handler) => {
                        // The handler's store writes and logs nest under its tool call.
                        let _entered = host.trace().enter(span.scope());
                        vm.run_handler(alias, handler, args).await?
                    }
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            };
            handled
                .map(|text| (text, true))
                .map_err(|error| error.message().to_owned())
        }
    };
    match outcome {
        Ok((text, trusted)) => {
            host.observe(Observation::ToolCallSucceeded { tool: &call.name });
            Ok((text, Ok(trusted)))
        }
        Err(why) => {
            host.observe(Observation::ToolCallFailed {
                tool: &call.name,
                error: &why,
            });
            Ok((format!("error: {why}"), Err(why)))
        }
    }
}
