//! The OTLP mapping against hostile values: a real run (against the scripted upstream) puts
//! attacker-chosen text in every place a run records — the input, `log()`, store paths and
//! contents, an `execute`'s input and result, a fanout item, a model's reply, tool
//! arguments and results, a tool name no prompt offered, the provider's ids, error
//! messages — and the spans it exports are checked attribute by attribute: without content
//! capture none of that text leaves, span names are fixed vocabulary, and each kind exports
//! exactly the attributes the README's audit table lists; with capture, it all does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../promptforge-core/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use opentelemetry::InstrumentationScope;
use opentelemetry::trace::Status;
use opentelemetry_sdk::trace::SpanData;
use promptforge_core::client::{GatewayClient, RequestLimits};
use promptforge_core::tools::{Tool, ToolCatalog};
use promptforge_core::trace::{Span, Tracer};
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
use promptforge_trace::otlp::to_span_data;
use serde_json::json;
use support::{KEY, Reply, Upstream};

/// Hostile values the run records and that content capture alone exports.
const RECORDED_MARKS: [&str; 8] = [
    "PFLEAK_ARGS",
    "PFLEAK_NEW",
    "PFLEAK_TOOLARGS",
    "PFLEAK_TOOLRESULT",
    "PFLEAK_UNKNOWN_TOOL",
    "PFLEAK_REPLY",
    "PFLEAK response id",
    "PFLEAK call id",
];

/// What every hostile value carries; nothing with it may leave without content capture.
const MARK: &str = "PFLEAK";

/// The run's input: the marker, markup, quotes and a bidirectional override.
const INPUT: &str = "PFLEAK_ARGS user said <script>alert(1)</script> \"q\" \u{202e}x";

const PROMPT: &str = r####"---
name: hostile
description: hostile values in every place a run records
promptforge: 1
---

# Hostile

```lua
models.default("coder", "a code generation model for programming")
log("user said: " .. args)
local key = args:match("^%w+")
store.write("notes/" .. key .. ".md", "stored " .. args)
store.str_replace("notes/" .. key .. ".md", "stored", "PFLEAK_NEW text")
pcall(store.read, "missing/" .. key .. ".md")
store.read("notes/" .. key .. ".md")
store.exists("notes/" .. key .. ".md")
store.glob("notes/" .. key .. "*")
```

## Ask

```lua
var.echo = execute("### Echo", args)
fanout("### Item", {args})
tools.add_local("lookup", "Look up a fact by key", {key = {"string", "the key"}}, function(a)
  return "PFLEAK_TOOLRESULT for " .. a.key
end)
```

Tell me about {{ args }}.

### Echo

```lua
return "echo " .. args
```

### Item

```lua
return "item " .. item
```
"####;

/// The model's two turns: a call of the local tool and of a tool nobody offered (with a
/// call id no provider would make), then a reply, its id and model hostile too.
fn replies() -> Vec<Reply> {
    vec![
        Reply::Json(json!({
            "id": "PFLEAK response id", "model": "PFLEAK model",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "PFLEAK call id", "type": "function", "function":
                        {"name": "lookup", "arguments": "{\"key\":\"PFLEAK_TOOLARGS said\"}"}},
                    {"id": "call_1", "type": "function", "function":
                        {"name": "PFLEAK_UNKNOWN_TOOL", "arguments": "{}"}}]}}]
        })),
        Reply::Json(json!({
            "id": "resp-2", "object": "chat.completion", "model": "code-pro",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "PFLEAK_REPLY the answer"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        })),
    ]
}

/// The spans of one hostile run.
async fn hostile_run() -> Vec<Span> {
    let upstream = Upstream::start(replies()).await;
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let models = client.models(RequestLimits::default()).await.unwrap();
    let tools: Vec<Arc<dyn Tool>> = Vec::new();
    let catalog = ToolCatalog::new(&tools).unwrap();
    let picker = support::picker(&catalog);
    let prompt = Prompt::parse_named("hostile.md", PROMPT, "t", &NullObserver).unwrap();
    let tracer = Tracer::builder().source("hostile.md", PROMPT).build();
    let result = run(
        &prompt,
        INPUT,
        ResolutionContext::new(&picker, &models, &catalog),
        &StoreRef::memory(),
        RunConfig::new("hostile-test")
            .client(client)
            .tracer(tracer.clone()),
    )
    .await;
    assert_eq!(result.unwrap(), "PFLEAK_REPLY the answer");
    assert_eq!(upstream.remaining(), 0);
    tracer.spans()
}

fn export(spans: &[Span], content: bool) -> Vec<SpanData> {
    let scope = InstrumentationScope::builder("test").build();
    spans
        .iter()
        .map(|span| to_span_data(span, content, &scope))
        .collect()
}

/// Every string a span exports: its name, its attributes' keys and values, its status.
fn strings(span: &SpanData) -> Vec<String> {
    let mut out = vec![span.name.to_string()];
    for kv in &span.attributes {
        out.push(kv.key.to_string());
        out.push(kv.value.to_string());
    }
    if let Status::Error { description } = &span.status {
        out.push(description.to_string());
    }
    out.extend(span.events.iter().map(|e| format!("{e:?}")));
    out.extend(span.links.iter().map(|l| format!("{l:?}")));
    out
}

fn keys(span: &SpanData) -> BTreeSet<String> {
    span.attributes
        .iter()
        .map(|kv| kv.key.to_string())
        .collect()
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_content_capture_no_hostile_value_is_exported() {
    let spans = hostile_run().await;
    // The run recorded the hostile text (the trace file keeps it) ...
    let recorded: String = spans
        .iter()
        .map(|s| format!("{} {:?} {:?}", s.name(), s.attrs(), s.error()))
        .collect();
    for mark in RECORDED_MARKS {
        assert!(recorded.contains(mark), "the trace recorded no {mark}");
    }
    // ... and the export, without capture, carries none of it anywhere.
    let exported = export(&spans, false);
    assert_eq!(exported.len(), spans.len());
    for span in &exported {
        for text in strings(span) {
            assert!(!text.contains(MARK), "{} exports `{text}`", span.name);
        }
    }
    // Span names are fixed vocabulary.
    let names: BTreeSet<&str> = exported.iter().map(|s| s.name.as_ref()).collect();
    let vocabulary: BTreeSet<&str> = [
        "invoke_agent",
        "preamble",
        "section",
        "arm",
        "execute",
        "fanout",
        "chat",
        "execute_tool",
        "store",
        "log",
    ]
    .into();
    assert_eq!(names, vocabulary);
    // Exactly the attributes the audit table lists as exported by default, per kind.
    let mut by_kind: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for span in &exported {
        by_kind
            .entry(attr(span, "promptforge.kind").unwrap())
            .or_default()
            .extend(keys(span));
    }
    let expected = |names: &[&str]| -> BTreeSet<String> {
        names
            .iter()
            .map(|n| (*n).to_owned())
            .chain(["promptforge.kind".to_owned()])
            .collect()
    };
    let unit = [
        "promptforge.section",
        "promptforge.unit",
        "code.line.number",
    ];
    let section = [
        &unit[..],
        &[
            "promptforge.depth",
            "promptforge.entered",
            "promptforge.end",
        ],
    ]
    .concat();
    let arm = [&section[..], &["promptforge.index"]].concat();
    let table: BTreeMap<String, BTreeSet<String>> = [
        (
            "run",
            expected(&[
                "gen_ai.operation.name",
                "gen_ai.agent.name",
                "gen_ai.conversation.id",
                "code.file.path",
            ]),
        ),
        ("preamble", expected(&section)),
        ("section", expected(&section)),
        ("arm", expected(&arm)),
        (
            "execute",
            expected(&["promptforge.section", "code.line.number"]),
        ),
        (
            "fanout",
            expected(&[
                "promptforge.section",
                "code.line.number",
                "promptforge.items",
                "promptforge.concurrency",
                "promptforge.ok",
                "promptforge.exhausted",
            ]),
        ),
        (
            "model_turn",
            expected(&[
                "gen_ai.operation.name",
                "gen_ai.provider.name",
                "gen_ai.request.model",
                "gen_ai.response.model",
                "gen_ai.response.id",
                "gen_ai.response.finish_reasons",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
                "gen_ai.response.time_to_first_chunk",
                "server.address",
                "server.port",
                "code.line.number",
                "promptforge.turn",
                "promptforge.infer",
                "promptforge.traceparent",
            ]),
        ),
        (
            "tool_call",
            expected(&[
                "gen_ai.operation.name",
                "gen_ai.tool.name",
                "gen_ai.tool.type",
                "gen_ai.tool.call.id",
                "promptforge.tool.alias",
                "promptforge.tool.source",
                "promptforge.trusted",
                "code.line.number",
                "error.type",
            ]),
        ),
        (
            "store",
            expected(&[
                "promptforge.op",
                "promptforge.seq",
                "promptforge.bytes",
                "promptforge.exists",
                "promptforge.matches",
                "code.line.number",
                "error.type",
            ]),
        ),
        ("log", expected(&["code.line.number"])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(by_kind, table);

    // What is exported is the safe part: the heading, the offered tool's name, the ids
    // shaped like ids; hostile ids and the unoffered tool's name are not.
    let tools: Vec<&SpanData> = exported
        .iter()
        .filter(|s| s.name == "execute_tool")
        .collect();
    assert_eq!(tools.len(), 2);
    let offered = tools
        .iter()
        .find(|t| attr(t, "promptforge.tool.source").as_deref() == Some("local"))
        .unwrap();
    assert_eq!(attr(offered, "gen_ai.tool.name").as_deref(), Some("lookup"));
    assert_eq!(attr(offered, "gen_ai.tool.call.id"), None);
    let unknown = tools
        .iter()
        .find(|t| attr(t, "promptforge.tool.source").as_deref() == Some("unknown"))
        .unwrap();
    assert_eq!(attr(unknown, "gen_ai.tool.name"), None);
    assert_eq!(
        attr(unknown, "gen_ai.tool.call.id").as_deref(),
        Some("call_1")
    );
    assert_eq!(attr(unknown, "error.type").as_deref(), Some("tool"));
    assert_eq!(unknown.status, Status::error("tool"));
    let chats: Vec<&SpanData> = exported.iter().filter(|s| s.name == "chat").collect();
    assert_eq!(attr(chats[0], "gen_ai.response.id"), None);
    assert_eq!(
        attr(chats[1], "gen_ai.response.id").as_deref(),
        Some("resp-2")
    );
    assert_eq!(
        attr(chats[1], "gen_ai.request.model").as_deref(),
        Some("code-pro")
    );
    let sections: BTreeSet<String> = exported
        .iter()
        .filter_map(|s| attr(s, "promptforge.section"))
        .collect();
    assert_eq!(
        sections,
        ["# Hostile", "## Ask", "### Echo", "### Item"]
            .map(str::to_owned)
            .into()
    );
    let failed_read = exported
        .iter()
        .find(|s| s.name == "store" && attr(s, "error.type").is_some())
        .unwrap();
    assert_eq!(attr(failed_read, "error.type").as_deref(), Some("store"));
    assert_eq!(failed_read.status, Status::error("store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_content_capture_the_contents_are_exported() {
    let spans = hostile_run().await;
    let exported = export(&spans, true);
    let all: Vec<String> = exported.iter().flat_map(strings).collect();
    let holding = |mark: &str| all.iter().filter(|t| t.contains(mark)).count();
    for mark in RECORDED_MARKS {
        assert!(holding(mark) > 0, "nothing exports {mark}");
    }
    // Still never in a span name.
    assert!(exported.iter().all(|s| !s.name.contains(MARK)));
    let log = exported.iter().find(|s| s.name == "log").unwrap();
    assert_eq!(
        attr(log, "promptforge.message"),
        Some(format!("user said: {INPUT}"))
    );
    let unknown = exported
        .iter()
        .find(|s| attr(s, "promptforge.tool.source").as_deref() == Some("unknown"))
        .unwrap();
    let Status::Error { description } = &unknown.status else {
        panic!("{:?}", unknown.status);
    };
    assert!(
        description.starts_with("tool: ") && description.contains("PFLEAK_UNKNOWN_TOOL"),
        "{description}"
    );
}
