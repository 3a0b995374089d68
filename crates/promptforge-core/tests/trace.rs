//! Run traces against the scripted upstream: the span tree a prompt with a jump, an
//! execute, a fanout, a tool loop with two tool calls and store writes produces (structure,
//! not timings), valid against `trace.schema.json`; the bounds; redaction; `traceparent`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use promptforge_core::client::{GatewayClient, RequestLimits};
use promptforge_core::tools::{Tool, ToolCatalog};
use promptforge_core::trace::{SCHEMA_VERSION, Span, SpanListener, TraceLimits, Tracer};
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
use serde_json::Value as Json;
use support::{FakeTool, KEY, Reply, Upstream, calls, text};

fn fixture(name: &str) -> (String, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/trace")
        .join(name);
    (name.to_owned(), std::fs::read_to_string(path).unwrap())
}

/// Validates a trace document against the published schema.
#[track_caller]
fn assert_valid(document: &serde_json::Value) {
    let errors = promptforge_test_support::schema_errors(promptforge_core::trace::SCHEMA, document);
    assert!(errors.is_empty(), "invalid trace:\n{}", errors.join("\n"));
}

/// The span tree as indented lines `kind name [status] :line`, children in start order
/// except fanout arms (concurrent), which are ordered by their index.
fn tree(document: &Json) -> String {
    let spans = document["spans"].as_array().unwrap();
    let mut children: HashMap<String, Vec<&Json>> = HashMap::new();
    let mut roots = Vec::new();
    for span in spans {
        match span["parent"].as_str() {
            Some(parent) => children.entry(parent.to_owned()).or_default().push(span),
            None => roots.push(span),
        }
    }
    fn render(span: &Json, depth: usize, children: &HashMap<String, Vec<&Json>>, out: &mut String) {
        let line = span["line"]
            .as_u64()
            .map(|l| format!(" :{l}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{}{} {} [{}]{}\n",
            "  ".repeat(depth),
            span["kind"].as_str().unwrap(),
            span["name"].as_str().unwrap(),
            span["status"].as_str().unwrap(),
            line
        ));
        let mut kids = children
            .get(span["id"].as_str().unwrap())
            .cloned()
            .unwrap_or_default();
        kids.sort_by_key(|k| {
            (
                k["kind"] == "arm",
                k["attrs"]["index"].as_u64().unwrap_or(0),
                k["start_us"].as_u64().unwrap(),
            )
        });
        for kid in kids {
            render(kid, depth + 1, children, out);
        }
    }
    let mut out = String::new();
    for root in roots {
        render(root, 0, &children, &mut out);
    }
    out
}

fn find<'a>(document: &'a Json, kind: &str, name: &str) -> Vec<&'a Json> {
    document["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == kind && s["name"] == name)
        .collect()
}

struct Traced {
    document: Json,
    result: Result<String, promptforge_core::RunError>,
    upstream: Upstream,
    search: Arc<FakeTool>,
}

async fn traced(
    name: &str,
    input: &str,
    replies: Vec<Reply>,
    tracer: impl FnOnce(promptforge_core::trace::TraceBuilder) -> promptforge_core::trace::TraceBuilder,
) -> Traced {
    let (origin, source) = fixture(name);
    let tracer = tracer(Tracer::builder().source(&origin, &source)).build();
    let mut out = run_fixture(name, input, replies, Some(tracer.clone())).await;
    out.document = tracer.document();
    out
}

/// Runs a fixture against the scripted upstream with a fake `web_search`, traced when a
/// tracer is given.
async fn run_fixture(
    name: &str,
    input: &str,
    replies: Vec<Reply>,
    tracer: Option<Tracer>,
) -> Traced {
    let upstream = Upstream::start(replies).await;
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let models = client.models(RequestLimits::default()).await.unwrap();
    let search = FakeTool::new(
        "web_search",
        "Search the web for current news and information",
        false,
    );
    let tools: Vec<Arc<dyn Tool>> = vec![search.clone()];
    let catalog = ToolCatalog::new(&tools).unwrap();
    let picker = support::picker(&catalog);
    let (origin, source) = fixture(name);
    let prompt = Prompt::parse_named(&origin, &source, "t", &NullObserver).unwrap();
    let mut config = RunConfig::new("trace-test").client(client);
    if let Some(tracer) = tracer {
        config = config.tracer(tracer);
    }
    let result = run(
        &prompt,
        input,
        ResolutionContext::new(&picker, &models, &catalog),
        &StoreRef::memory(),
        config,
    )
    .await;
    Traced {
        document: Json::Null,
        result,
        upstream,
        search,
    }
}

fn tool_loop_replies() -> Vec<Reply> {
    vec![
        calls(&[
            ("web_search", r#"{"query":"rust"}"#),
            ("web_search", r#"{"query":"lua"}"#),
        ]),
        text("Rust and Lua."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_every_construct_produces_the_expected_span_tree() {
    let out = traced("traced.md", "languages", tool_loop_replies(), |b| b).await;
    assert_eq!(
        out.result.unwrap(),
        "summary of Rust and Lua. | arm a #1,arm b #2"
    );
    let document = &out.document;
    assert_valid(document);
    assert_eq!(document["version"], SCHEMA_VERSION);
    assert_eq!(document["format"], "promptforge-trace");
    assert_eq!(document["run"]["status"], "ok");
    assert_eq!(document["source"]["path"], "traced.md");
    let expected = "\
run traced [ok]
  preamble # Traced [ok] :10
    store notes.md [ok] :13
    log preamble done [ok] :14
  section ## Plan [ok] :17
    store notes.md [ok] :20
    jump ## Research [ok] :21
  section ## Research [ok] :30
    model_turn code-pro [ok] :32
    tool_call web_search [ok] :32
    tool_call web_search [ok] :32
    model_turn code-pro [ok] :32
    store notes.md [ok] :35
    execute ### Summarize [ok] :36
      section ### Summarize [ok] :39
  section ## Fan [ok] :45
    fanout ### Worker [ok] :48
      arm ### Worker [ok] :53
      arm ### Worker [ok] :53
    store fan.txt [ok] :49
    store fan.txt [ok] :50
";
    assert_eq!(tree(document), expected);

    // Units carry `sys.id`; arms their index and item.
    let arms = find(document, "arm", "### Worker");
    let mut items: Vec<(u64, &str)> = arms
        .iter()
        .map(|a| {
            (
                a["attrs"]["index"].as_u64().unwrap(),
                a["attrs"]["item"].as_str().unwrap(),
            )
        })
        .collect();
    items.sort_unstable();
    assert_eq!(items, [(1, "a"), (2, "b")]);
    assert!(arms.iter().all(|a| a["unit"].as_u64().unwrap() >= 1));
    assert_eq!(find(document, "preamble", "# Traced")[0]["unit"], 0);

    // The store operations: the new bytes, the replaced text, in the order they were made.
    let stores: Vec<&Json> = document["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "store" && s["attrs"]["seq"].is_u64())
        .collect();
    let ops: Vec<(u64, &str, &str)> = stores
        .iter()
        .map(|s| {
            (
                s["attrs"]["seq"].as_u64().unwrap(),
                s["attrs"]["op"].as_str().unwrap(),
                s["attrs"]["path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            (0, "write", "notes.md"),
            (1, "append", "notes.md"),
            (2, "str_replace", "notes.md"),
            (3, "write", "fan.txt"),
        ]
    );
    assert_eq!(stores[0]["attrs"]["content"], "start\n");
    assert_eq!(stores[1]["attrs"]["content"], "plan\n");
    assert_eq!(stores[2]["attrs"]["old"], "plan");
    assert_eq!(stores[2]["attrs"]["new"], "planned");
    let read = find(document, "store", "fan.txt")
        .into_iter()
        .find(|s| s["attrs"]["op"] == "read")
        .unwrap();
    assert_eq!(read["attrs"]["bytes"], 17);

    // The model turns: the request as sent, the reply, the finish reason.
    let turns = find(document, "model_turn", "code-pro");
    assert_eq!(
        turns[0]["attrs"]["request"]["messages"][0]["content"],
        "Find out about languages."
    );
    assert_eq!(
        turns[0]["attrs"]["request"]["tools"][0]["function"]["name"],
        "web_search"
    );
    assert_eq!(turns[0]["attrs"]["finish_reason"], "tool_calls");
    assert_eq!(
        turns[0]["attrs"]["reply"]["tool_calls"][1]["arguments"],
        r#"{"query":"lua"}"#
    );
    assert_eq!(turns[1]["attrs"]["turn"], 1);
    assert_eq!(turns[1]["attrs"]["reply"]["content"], "Rust and Lua.");
    assert_eq!(
        turns[1]["attrs"]["request"]["messages"]
            .as_array()
            .unwrap()
            .len(),
        4
    );

    // The tool calls: alias, arguments as JSON, the result that went back to the model.
    let tools = find(document, "tool_call", "web_search");
    assert_eq!(tools[0]["attrs"]["alias"], "search");
    assert_eq!(tools[0]["attrs"]["source"], "catalog");
    assert_eq!(tools[0]["attrs"]["arguments"]["query"], "rust");
    assert_eq!(tools[1]["attrs"]["arguments"]["query"], "lua");
    assert_eq!(tools[1]["attrs"]["trusted"], false);
    assert!(
        tools[1]["attrs"]["result"]
            .as_str()
            .unwrap()
            .contains("web_search result for")
    );
    assert_eq!(out.search.calls.lock().unwrap().len(), 2);

    // Execute and the section results.
    let execute = &find(document, "execute", "### Summarize")[0];
    assert_eq!(execute["attrs"]["input"], "Rust and Lua.");
    assert_eq!(execute["attrs"]["result"], "summary of Rust and Lua.");
    assert_eq!(
        find(document, "section", "## Plan")[0]["attrs"]["end"],
        "jump"
    );
    assert_eq!(
        find(document, "section", "## Fan")[0]["attrs"]["end"],
        "return"
    );

    // Every model request carried a traceparent of this trace, naming its turn's span.
    let trace_id = document["trace_id"].as_str().unwrap();
    let sent = out.upstream.traceparents();
    assert_eq!(sent.len(), 2);
    for (header, turn) in sent.iter().zip(&turns) {
        let header = header.as_deref().unwrap();
        assert_eq!(
            header,
            format!("00-{trace_id}-{}-01", turn["id"].as_str().unwrap())
        );
        assert_eq!(turn["attrs"]["traceparent"], header);
    }

    // Every span ended, after it started, inside the run.
    let run_end = document["spans"][0]["end_us"].as_u64().unwrap();
    for span in document["spans"].as_array().unwrap() {
        let (start, end) = (
            span["start_us"].as_u64().unwrap(),
            span["end_us"].as_u64().unwrap(),
        );
        assert!(start <= end && end <= run_end, "{span}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untraced_run_sends_no_traceparent() {
    let out = run_fixture("traced.md", "x", tool_loop_replies(), None).await;
    out.result.unwrap();
    assert_eq!(out.upstream.traceparents(), [None, None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_key_never_appears_in_a_trace() {
    // The key reaches the trace through the input, the model's arguments and its reply.
    let replies = vec![
        calls(&[
            ("web_search", &format!(r#"{{"query":"{KEY}"}}"#)),
            ("web_search", r#"{"query":"lua"}"#),
        ]),
        text(&format!("the key is {KEY}")),
    ];
    let out = traced("traced.md", &format!("find {KEY}"), replies, |b| b).await;
    out.result.unwrap();
    let text = serde_json::to_string(&out.document).unwrap();
    assert!(!text.contains(KEY), "the key leaked into the trace: {text}");
    assert!(text.contains("<redacted>"));
    assert_valid(&out.document);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_past_the_cap_are_cut_with_a_marker() {
    let long = "x".repeat(5000);
    let out = traced("traced.md", &long, tool_loop_replies(), |b| {
        b.limits(TraceLimits::new().field_bytes(100))
    })
    .await;
    out.result.unwrap();
    let document = &out.document;
    assert_valid(document);
    let input = document["spans"][0]["attrs"]["input"].as_str().unwrap();
    assert_eq!(
        input,
        format!("{}\u{2026}[cut: 5000 bytes in all]", "x".repeat(100))
    );
    assert!(document["dropped"]["cut_fields"].as_u64().unwrap() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_trace_budget_spans_keep_their_shape_and_lose_their_attributes() {
    let out = traced("traced.md", "x", tool_loop_replies(), |b| {
        b.limits(TraceLimits::new().trace_bytes(2000).max_spans(12))
    })
    .await;
    out.result.unwrap();
    let document = &out.document;
    assert_valid(document);
    let spans = document["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 12);
    assert!(document["dropped"]["spans"].as_u64().unwrap() > 0);
    assert!(document["dropped"]["attributes"].as_u64().unwrap() > 0);
    assert!(
        spans
            .iter()
            .any(|s| s["attrs"] == serde_json::json!({"dropped": true}))
    );
    // Whatever was dropped, the kept spans still form a tree under the run.
    let ids: Vec<&str> = spans.iter().map(|s| s["id"].as_str().unwrap()).collect();
    for span in &spans[1..] {
        assert!(ids.contains(&span["parent"].as_str().unwrap()), "{span}");
    }
}

#[derive(Default)]
struct Events(Mutex<Vec<String>>);

impl SpanListener for Events {
    fn span_started(&self, span: &Span) {
        self.0
            .lock()
            .unwrap()
            .push(format!("+{} {}", span.kind().as_str(), span.name()));
    }
    fn span_ended(&self, span: &Span) {
        self.0
            .lock()
            .unwrap()
            .push(format!("-{} {}", span.kind().as_str(), span.name()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_see_every_span_start_and_end_and_the_run_ends_last() {
    let events = Arc::new(Events::default());
    let listener = Arc::clone(&events);
    let out = traced("traced.md", "x", tool_loop_replies(), |b| {
        b.listener(listener)
    })
    .await;
    out.result.unwrap();
    let events = events.0.lock().unwrap().clone();
    let spans = out.document["spans"].as_array().unwrap().len();
    assert_eq!(events.len(), spans * 2);
    assert_eq!(events.first().unwrap(), "+run traced");
    assert_eq!(events.last().unwrap(), "-run traced");
    assert!(events.contains(&"-tool_call web_search".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_records_the_error_on_its_span_and_the_run() {
    // The second model turn fails: the upstream script is exhausted (HTTP 500).
    let replies = vec![calls(&[("web_search", r#"{"query":"rust"}"#)])];
    let out = traced("traced.md", "x", replies, |b| b).await;
    assert!(out.result.is_err());
    let document = &out.document;
    assert_valid(document);
    assert_eq!(document["run"]["status"], "error");
    assert_eq!(document["run"]["error"]["kind"], "model");
    let turns = find(document, "model_turn", "code-pro");
    assert_eq!(turns[1]["status"], "error");
    assert_eq!(turns[1]["error"]["kind"], "model");
    assert_eq!(
        find(document, "section", "## Research")[0]["status"],
        "error"
    );
    assert!(find(document, "section", "## Fan").is_empty());
}
