//! Request spans (issue 28, the gateway's half of a run trace): booted with an in-memory
//! exporter in place of the OTLP one, each request's spans continue the caller's
//! `traceparent` and form the documented tree.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::Value as OtelValue;
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::json;

use super::harness::*;
use crate::otel::Export;

/// An exporter that keeps what it is given.
#[derive(Debug, Clone, Default)]
struct Captured(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Captured {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

impl Captured {
    /// The spans of `trace`, once `count` of them arrived (bounded wait).
    async fn trace(&self, trace: TraceId, count: usize) -> Vec<SpanData> {
        let of_trace = || {
            self.0
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.span_context.trace_id() == trace)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert!(
            eventually(|| of_trace().len() >= count).await,
            "{} of {count} spans arrived: {:#?}",
            of_trace().len(),
            of_trace()
        );
        of_trace()
    }

    fn all(&self) -> Vec<SpanData> {
        self.0.lock().unwrap().clone()
    }
}

/// Boots `dir` (profile `main`) with span export into a fresh [`Captured`].
async fn traced(dir: &ConfigDir) -> (Gateway, Captured) {
    let captured = Captured::default();
    let exporter = captured.clone();
    let gw = Gateway::start_traced(&dir.boot(), "main", &base_env(), move |_| {
        Some(Export::over(exporter, Duration::from_secs(5)))
    })
    .await;
    (gw, captured)
}

fn standard_dir(upstream: &Upstream, extra: &str) -> ConfigDir {
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        &format!("{}{extra}", standard_boot(&upstream.url)),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    dir
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> String {
    match attr(span, key) {
        Some(value) => value.as_str().into_owned(),
        None => panic!("{} has no {key}: {:?}", span.name, span.attributes),
    }
}

fn int(span: &SpanData, key: &str) -> i64 {
    match attr(span, key) {
        Some(OtelValue::I64(n)) => *n,
        other => panic!("{} has {key} = {other:?}", span.name),
    }
}

/// The spans by name, each name's spans in start order.
fn by_name(spans: &[SpanData]) -> HashMap<String, Vec<SpanData>> {
    let mut out: HashMap<String, Vec<SpanData>> = HashMap::new();
    for span in spans {
        out.entry(span.name.to_string())
            .or_default()
            .push(span.clone());
    }
    for list in out.values_mut() {
        list.sort_by_key(|s| s.start_time);
    }
    out
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";

async fn post_traced(gw: &Gateway, traceparent: Option<&str>, body: &serde_json::Value) -> u16 {
    let mut request = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .json(body);
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let _ = response.bytes().await.unwrap();
    status
}

#[tokio::test]
async fn a_request_continues_the_callers_trace_with_the_documented_tree() {
    let upstream = Upstream::start().await;
    let (gw, captured) = traced(&standard_dir(&upstream, "")).await;
    let status = post_traced(
        &gw,
        Some(&format!("00-{TRACE}-{CALLER}-01")),
        &json!({"model": "fast-draft", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let trace = TraceId::from_hex(TRACE).unwrap();
    let spans = captured.trace(trace, 4).await;
    let named = by_name(&spans);
    let one = |name: &str| {
        let list = named
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in {spans:#?}"));
        assert_eq!(list.len(), 1, "{list:#?}");
        list[0].clone()
    };
    let request = one("gateway.request");
    let validate = one("gateway.validate");
    let attempt = one("gateway.attempt");
    let call = one("gateway.upstream");
    assert_eq!(spans.len(), 4, "{spans:#?}");

    // The request span hangs under the caller's span, marked remote.
    assert_eq!(request.parent_span_id, SpanId::from_hex(CALLER).unwrap());
    assert!(request.parent_span_is_remote);
    assert_eq!(request.span_kind, SpanKind::Server);
    let request_id = request.span_context.span_id();
    assert_eq!(validate.parent_span_id, request_id);
    assert_eq!(attempt.parent_span_id, request_id);
    assert_eq!(call.parent_span_id, attempt.span_context.span_id());
    assert_eq!(call.span_kind, SpanKind::Client);
    for span in [&validate, &attempt, &call] {
        assert!(!span.parent_span_is_remote, "{}", span.name);
        assert!(span.start_time >= request.start_time, "{}", span.name);
    }

    assert_eq!(text(&request, "http.request.method"), "POST");
    assert_eq!(text(&request, "http.route"), "/v1/chat/completions");
    assert_eq!(int(&request, "http.response.status_code"), 200);
    assert_eq!(text(&request, "promptforge.model"), "fast-draft");
    assert_eq!(text(&attempt, "promptforge.endpoint"), "up");
    assert_eq!(text(&attempt, "promptforge.outcome"), "answered");
    assert_eq!(text(&call, "gen_ai.operation.name"), "chat");
    assert_eq!(text(&call, "gen_ai.request.model"), "up-fast");
    assert_eq!(text(&call, "gen_ai.response.model"), "up-fast");
    assert_eq!(int(&call, "gen_ai.usage.input_tokens"), 3);
    assert_eq!(int(&call, "gen_ai.usage.output_tokens"), 4);
    assert_eq!(text(&call, "server.address"), "127.0.0.1");
    assert!(int(&call, "server.port") > 0);
    for span in &spans {
        assert_eq!(span.status, Status::Unset, "{}", span.name);
        // Nothing secret is exported: no key, no header.
        for kv in &span.attributes {
            let value = kv.value.as_str();
            assert!(
                !value.contains(KEY) && !value.contains(UPSTREAM_KEY),
                "{}: {kv:?}",
                span.name
            );
            assert!(!kv.key.as_str().contains("authorization"), "{kv:?}");
        }
    }
}

#[tokio::test]
async fn failover_and_a_dominion_wait_show_as_attempts() {
    let upstream = Upstream::start().await;
    let extra = r#"
[[dominion]]
id = "pool"
kind = "remote"
max_concurrency = 2

[[endpoint]]
id = "gated"
base_url = "@UPSTREAM@/v1"
api_key = "${GW_UPSTREAM_KEY}"
dominion = "pool"

[[model]]
name = "failing-over"
description = "dead first, then a dominion"
context = 1000
upstream = "up-fo"
endpoints = ["dead", "gated"]
"#
    .replace("@UPSTREAM@", &upstream.url);
    let (gw, captured) = traced(&standard_dir(&upstream, &extra)).await;
    let status = post_traced(
        &gw,
        Some(&format!("00-{TRACE}-{CALLER}-01")),
        &json!({"model": "failing-over", "messages": [{"role": "user", "content": "hi"}], "stream": true}),
    )
    .await;
    assert_eq!(status, 200);
    let spans = captured.trace(TraceId::from_hex(TRACE).unwrap(), 6).await;
    let named = by_name(&spans);
    let attempts = &named["gateway.attempt"];
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    let (dead, gated) = (&attempts[0], &attempts[1]);
    assert_eq!(text(dead, "promptforge.endpoint"), "dead");
    assert_eq!(text(dead, "error.type"), "upstream_transport");
    assert_eq!(text(dead, "promptforge.failover.reason"), "transport");
    assert!(matches!(dead.status, Status::Error { .. }), "{dead:?}");
    assert_eq!(text(gated, "promptforge.endpoint"), "gated");
    assert_eq!(text(gated, "promptforge.outcome"), "answered");
    let wait = &named["gateway.queue_wait"][0];
    assert_eq!(wait.parent_span_id, gated.span_context.span_id());
    assert_eq!(text(wait, "promptforge.dominion"), "pool");
    assert_eq!(text(wait, "promptforge.admission"), "admitted");
    let calls = &named["gateway.upstream"];
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(calls[0].parent_span_id, dead.span_context.span_id());
    assert_eq!(text(&calls[0], "error.type"), "upstream_transport");
    assert_eq!(calls[1].parent_span_id, gated.span_context.span_id());
    assert_eq!(text(&calls[1], "gen_ai.request.model"), "up-fo");
    // The stream's upstream call lasts until the stream ended.
    assert!(calls[1].end_time >= named["gateway.request"][0].end_time);
}

#[tokio::test]
async fn without_traceparent_a_trace_starts_and_unsampled_or_unauthenticated_records_nothing() {
    let upstream = Upstream::start().await;
    let (gw, captured) = traced(&standard_dir(&upstream, "")).await;
    let body = json!({"model": "fast-draft", "messages": [{"role": "user", "content": "hi"}]});
    // Without the bearer: refused, and no spans (queued before the ones awaited below,
    // so they would have arrived by then).
    let intruder = "00-33333333333333333333333333333333-2222222222222222-01";
    let refused = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth("not-the-key")
        .header("traceparent", intruder)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let unsampled = "00-11111111111111111111111111111111-2222222222222222-00";
    assert_eq!(post_traced(&gw, Some(unsampled), &body).await, 200);
    // A malformed traceparent is ignored: a new trace, as without one.
    assert_eq!(post_traced(&gw, Some("00-nonsense"), &body).await, 200);
    assert!(eventually(|| captured.all().len() >= 4).await);
    let spans = captured.all();
    assert!(
        spans.iter().all(|s| s.span_context.trace_id()
            != TraceId::from_hex("11111111111111111111111111111111").unwrap()),
        "an unsampled trace was recorded"
    );
    assert!(
        spans.iter().all(|s| s.span_context.trace_id()
            != TraceId::from_hex("33333333333333333333333333333333").unwrap()),
        "an unauthenticated request was recorded"
    );
    let request = spans.iter().find(|s| s.name == "gateway.request").unwrap();
    assert_eq!(request.parent_span_id, SpanId::INVALID);
    assert!(!request.parent_span_is_remote);
    assert_ne!(request.span_context.trace_id(), TraceId::INVALID);

    // A refused request: the validation span carries the refusal, and no attempt is made.
    let status = post_traced(
        &gw,
        Some(&format!("00-{TRACE}-{CALLER}-01")),
        &json!({"model": "fast-draft", "messages": [], "tool_choice": "sometimes"}),
    )
    .await;
    assert_eq!(status, 400);
    let spans = captured.trace(TraceId::from_hex(TRACE).unwrap(), 2).await;
    let named = by_name(&spans);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let validate = &named["gateway.validate"][0];
    assert_eq!(text(validate, "error.type"), "invalid_request");
    assert_eq!(validate.status, Status::error("invalid_request"));
    let request = &named["gateway.request"][0];
    assert_eq!(int(request, "http.response.status_code"), 400);
    assert_eq!(text(request, "error.type"), "400");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_model_names_the_child_that_served_it() {
    let upstream = Upstream::start().await;
    let cache = tempfile::tempdir().unwrap();
    let dir = ConfigDir::new();
    let binary = dir.write("stand-in-llama-server", STAND_IN);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let gguf = dir.write("model.gguf", "not read by the stand-in\n");
    let extra = format!(
        "\n[local]\ncache_dir = \"{}\"\nllama_server = \"{}\"\n\n[[local_model]]\nname = \"one\"\ndescription = \"a stand-in\"\nsource = \"{}\"\ncontext = 512\nthreads = 1\n",
        cache.path().display(),
        binary.display(),
        gguf.display()
    );
    let dir = {
        dir.write(
            "gateway.toml",
            &format!("{}{extra}", standard_boot(&upstream.url)),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        dir
    };
    let (gw, captured) = traced(&dir).await;
    let status = post_traced(
        &gw,
        Some(&format!("00-{TRACE}-{CALLER}-01")),
        &json!({"model": "one", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let spans = captured.trace(TraceId::from_hex(TRACE).unwrap(), 4).await;
    let call = &by_name(&spans)["gateway.upstream"][0];
    let (_, status) = gw.get("/admin/status").await;
    let child = &status["local_models"][0];
    assert_eq!(text(call, "promptforge.local.model"), "one");
    assert_eq!(
        int(call, "promptforge.local.port"),
        child["port"].as_i64().unwrap()
    );
    assert_eq!(
        int(call, "promptforge.local.pid"),
        child["pid"].as_i64().unwrap()
    );
    assert_eq!(text(call, "gen_ai.request.model"), "one");
    assert_eq!(
        text(
            &by_name(&spans)["gateway.attempt"][0],
            "promptforge.endpoint"
        ),
        "local:one"
    );
}

/// The stand-in `llama-server` the process tests use (`tests/stand-in-llama-server.py`).
const STAND_IN: &str = include_str!("../../tests/stand-in-llama-server.py");

/// Every string a span exports: name, attribute keys and values, status description.
fn strings(span: &SpanData) -> Vec<String> {
    let mut out = vec![span.name.to_string()];
    for kv in &span.attributes {
        out.push(kv.key.to_string());
        out.push(kv.value.to_string());
    }
    if let Status::Error { description } = &span.status {
        out.push(description.to_string());
    }
    out
}

#[tokio::test]
async fn what_a_request_or_an_upstream_says_is_never_exported() {
    let upstream = Upstream::start().await;
    // An upstream whose error echoes the prompt, and one whose `model` is text.
    upstream.script(
        "up-fast",
        Reply::Json(
            400,
            json!({"error": {"message": "PFLEAK_ECHO your prompt was: PFLEAK_CONTENT"}}),
        ),
    );
    upstream.script(
        "up-chat",
        Reply::Json(200, chat_reply("PFLEAK model <b>", "PFLEAK_REPLY")),
    );
    let (gw, captured) = traced(&standard_dir(&upstream, "")).await;
    let parent = format!("00-{TRACE}-{CALLER}-01");
    // Refusals quoting the request: a role and a tool choice.
    for body in [
        json!({"model": "fast-draft", "messages": [{"role": "PFLEAK_ROLE", "content": "x"}]}),
        json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}],
               "tool_choice": "PFLEAK_CHOICE"}),
    ] {
        assert_eq!(post_traced(&gw, Some(&parent), &body).await, 400);
    }
    let content = json!([{"role": "user", "content": "PFLEAK_CONTENT"}]);
    let rejected = json!({"model": "fast-draft", "messages": content});
    assert_ne!(post_traced(&gw, Some(&parent), &rejected).await, 200);
    let answered = json!({"model": "reasoning-large", "messages": content});
    assert_eq!(post_traced(&gw, Some(&parent), &answered).await, 200);
    // Two refusals (request, validate), the rejection and the answer (request, validate,
    // attempt, upstream each).
    let spans = captured.trace(TraceId::from_hex(TRACE).unwrap(), 12).await;
    for span in &spans {
        for text in strings(span) {
            assert!(!text.contains("PFLEAK"), "{} exports `{text}`", span.name);
        }
    }
    let named = by_name(&spans);
    let calls = &named["gateway.upstream"];
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let failed = calls
        .iter()
        .find(|c| attr(c, "error.type").is_some())
        .unwrap();
    assert_eq!(text(failed, "error.type"), "upstream_rejected");
    assert_eq!(failed.status, Status::error("upstream_rejected"));
    let answer = calls
        .iter()
        .find(|c| attr(c, "error.type").is_none())
        .unwrap();
    assert_eq!(attr(answer, "gen_ai.response.model"), None);
    assert_eq!(text(answer, "gen_ai.request.model"), "up-chat");
}
