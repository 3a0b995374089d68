//! OTLP end to end: `promptforge run` with `OTEL_EXPORTER_OTLP_ENDPOINT` set runs a prompt
//! through a real `promptforge-gateway` binary (in front of the scripted upstream), and its
//! spans land in a real collector, Arize Phoenix from PyPI (`scripts/install-phoenix.sh`),
//! as one trace with the GenAI attributes; every model request the gateway received
//! carried a `traceparent` of that trace naming its `chat` span, and the gateway (exporting
//! to the same collector) continued that trace: its [`GATEWAY_SPANS`] hang under the
//! runner's `chat` spans.
//!
//! A recording proxy on loopback sits between the runner and the gateway, so the test sees
//! the headers the gateway was sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../promptforge-core/tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use promptforge_test_support::{Loopback, Reply};
use serde_json::{Value, json};
use support::{KEY, Upstream, calls};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The gateway's spans for each model request (its configuration has no dominion, so no
/// `gateway.queue_wait`): the request under the runner's `chat` span, validation and one
/// attempt under it, the upstream call under the attempt.
const GATEWAY_SPANS: &[&str] = &[
    "gateway.request",
    "gateway.validate",
    "gateway.attempt",
    "gateway.upstream",
];

/// The bound of every wait here (Phoenix takes seconds to start on a loaded machine).
const WAIT: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads a child's output lines into a shared list until it closes.
fn collect(
    stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    lines: Arc<Mutex<Vec<String>>>,
) {
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            lines.lock().unwrap().push(line);
        }
    });
}

/// Spawns `command` (killed on drop) with its stdout and stderr read into one list.
fn spawn_collected(
    command: &mut tokio::process::Command,
) -> (tokio::process::Child, Arc<Mutex<Vec<String>>>) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    collect(child.stdout.take().unwrap(), Arc::clone(&lines));
    collect(child.stderr.take().unwrap(), Arc::clone(&lines));
    (child, lines)
}

/// Waits (bounded) for a line of `lines` that `pick` accepts.
async fn wait_line(
    lines: &Arc<Mutex<Vec<String>>>,
    what: &str,
    pick: impl Fn(&str) -> Option<String>,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(found) = lines.lock().unwrap().iter().find_map(|l| pick(l)) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {WAIT:?}; output:\n{}",
            lines.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Phoenix server on `127.0.0.1` (HTTP and gRPC) with a fresh working directory.
struct Phoenix {
    _child: tokio::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Phoenix {
    async fn start() -> Self {
        let python = std::env::var_os("PROMPTFORGE_PHOENIX_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/promptforge/phoenix-20.26.1/bin/python")
            });
        assert!(
            python.is_file(),
            "no Phoenix at {} (run scripts/install-phoenix.sh, which scripts/test.sh calls)",
            python.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let launcher = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/phoenix_loopback.py");
        let mut command = tokio::process::Command::new(python);
        command
            .arg(launcher)
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", "0")
            .env("PHOENIX_GRPC_PORT", "0")
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("PHOENIX_ENABLE_AUTH", "false")
            .env("PHOENIX_DISABLE_AGENT_ASSISTANT", "true");
        let (child, lines) = spawn_collected(&mut command);
        let url = wait_line(&lines, "Phoenix listening line", |line| {
            let rest = line.split("Uvicorn running on ").nth(1)?;
            Some(rest.split_whitespace().next()?.to_owned())
        })
        .await;
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Self {
            _child: child,
            url,
            _dir: dir,
        }
    }

    /// The spans Phoenix holds for `trace_id`, once at least `count` have arrived (bounded).
    async fn spans(&self, trace_id: &str, count: usize) -> Vec<Value> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + WAIT;
        loop {
            let url = format!(
                "{}/v1/projects/default/spans?trace_id={trace_id}&limit=1000",
                self.url
            );
            let found: Vec<Value> = match http.get(&url).send().await {
                Ok(answer) if answer.status().is_success() => {
                    let body: Value = answer.json().await.unwrap_or_default();
                    body["data"].as_array().cloned().unwrap_or_default()
                }
                _ => Vec::new(),
            };
            if found.len() >= count {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix holds {} of {count} spans of trace {trace_id} after {WAIT:?}: {found:?}",
                found.len()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// A real `promptforge-gateway serve` child with one remote model on the scripted upstream,
/// exporting its spans to the collector at `otlp`.
struct Gateway {
    _child: tokio::process::Child,
    url: String,
    key: String,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(upstream: &str, otlp: &str) -> Self {
        let binary = std::env::var_os("PROMPTFORGE_GATEWAY_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_BIN_EXE_promptforge")).with_file_name("promptforge-gateway")
            });
        assert!(
            binary.is_file(),
            "no gateway at {} (run `cargo build -p promptforge-gateway`)",
            binary.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let key = format!("gw-{:032x}", rand_bits());
        std::fs::write(
            dir.path().join("gateway.toml"),
            format!(
                "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"${{PF_OTLP_TEST_KEY}}\"\n\n\
                 [[endpoint]]\nid = \"scripted\"\nprotocol = \"openai\"\nbase_url = \"{upstream}/v1\"\napi_key = \"{KEY}\"\n\n\
                 [[model]]\nname = \"code-pro\"\ndescription = \"A code generation model for programming, debugging and refactoring software\"\ncontext = 131072\nupstream = \"code-pro\"\nendpoints = [\"scripted\"]\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("profiles")).unwrap();
        std::fs::write(
            dir.path().join("profiles/otlp.toml"),
            "include = [\"../gateway.toml\"]\n",
        )
        .unwrap();
        let mut command = tokio::process::Command::new(binary);
        command
            .arg("serve")
            .arg(dir.path().join("gateway.toml"))
            .args(["--profile", "otlp"])
            .env_remove("PROMPTFORGE_GATEWAY_CONFIG")
            .env("PF_OTLP_TEST_KEY", &key)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_SDK_DISABLED")
            .env_remove("OTEL_TRACES_EXPORTER")
            .env("RUST_LOG", "warn");
        let (child, lines) = spawn_collected(&mut command);
        let url = wait_line(&lines, "gateway listening line", |line| {
            line.strip_prefix("listening on ")
                .map(|u| u.trim().to_owned())
        })
        .await;
        Self {
            _child: child,
            url,
            key,
            _dir: dir,
        }
    }
}

fn rand_bits() -> u128 {
    u128::from(std::process::id()) << 64
        | u128::from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos(),
        )
}

/// Forwards every request to the gateway and records the `traceparent` of each chat
/// completion request.
#[derive(Clone)]
struct Proxy {
    target: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

async fn forward(
    State(proxy): State<Proxy>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if uri.path() == "/v1/chat/completions" {
        let traceparent = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        proxy.seen.lock().unwrap().push(traceparent);
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = proxy
        .http
        .request(method, format!("{}{path}", proxy.target))
        .body(body);
    for name in ["authorization", "content-type", "traceparent", "tracestate"] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            let kind = answer
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned();
            let bytes = answer.bytes().await.unwrap_or_default();
            (status, [("content-type", kind)], bytes).into_response()
        }
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lands_in_a_real_collector_as_one_trace_with_genai_attributes() {
    let phoenix = Phoenix::start().await;
    let upstream = Upstream::start(vec![
        calls(&[("lookup", r#"{"key":"rust"}"#)]),
        Reply::Json(json!({
            "id": "resp-2", "object": "chat.completion", "model": "code-pro",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Rust is fast."}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        })),
    ])
    .await;
    let gateway = Gateway::start(&upstream.url, &phoenix.url).await;
    let proxy = Proxy {
        target: gateway.url.trim_end_matches('/').to_owned(),
        http: reqwest::Client::new(),
        seen: Arc::new(Mutex::new(Vec::new())),
    };
    let server = Loopback::serve(Router::new().fallback(forward).with_state(proxy.clone()))
        .await
        .unwrap();

    let (output, document) = run_exported(
        server.url(),
        &gateway.key,
        &phoenix,
        "crates/promptforge-cli/tests/otlp/traced.md",
        "rust",
        true,
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Rust is fast.");

    let trace_id = document["trace_id"].as_str().unwrap().to_owned();
    let local = document["spans"].as_array().unwrap().len();
    // Two model requests, each with the gateway's spans.
    let spans = phoenix
        .spans(&trace_id, local + 2 * GATEWAY_SPANS.len())
        .await;
    let by_name: HashMap<&str, Vec<&Value>> = spans.iter().fold(HashMap::new(), |mut m, s| {
        m.entry(s["name"].as_str().unwrap()).or_default().push(s);
        m
    });
    let names: Vec<&str> = by_name.keys().copied().collect();
    // Span names are fixed vocabulary; the heading and the agent are attributes.
    for name in [
        "invoke_agent",
        "preamble",
        "section",
        "chat",
        "execute_tool",
        "store",
    ] {
        assert!(by_name.contains_key(name), "{name} is not among {names:?}");
    }
    // One trace: every span but the root has its parent in it.
    let ids: Vec<&str> = spans
        .iter()
        .map(|s| s["context"]["span_id"].as_str().unwrap())
        .collect();
    let roots: Vec<&Value> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 1, "{spans:?}");
    assert_eq!(roots[0]["name"], "invoke_agent");
    for span in &spans {
        if let Some(parent) = span["parent_id"].as_str() {
            assert!(ids.contains(&parent), "{span}");
        }
    }

    // The GenAI conventions on the model turns and the tool call.
    let chats = &by_name["chat"];
    assert_eq!(chats.len(), 2);
    let ask = by_name["section"]
        .iter()
        .find(|s| attr(s, "promptforge.section") == "## Ask")
        .expect("the section span names its heading");
    let section = ask["context"]["span_id"].as_str().unwrap();
    for chat in chats {
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.provider.name"), "promptforge");
        assert_eq!(attr(chat, "gen_ai.request.model"), "code-pro");
        assert_eq!(attr(chat, "server.address"), "127.0.0.1");
        assert_eq!(chat["parent_id"], section);
        assert!(
            attr(chat, "gen_ai.input.messages")
                .as_str()
                .unwrap()
                .contains("Tell me about rust.")
        );
    }
    let last = chats
        .iter()
        .find(|c| attr(c, "gen_ai.response.id") == "resp-2")
        .expect("the final turn");
    assert_eq!(attr(last, "gen_ai.usage.input_tokens"), 12);
    assert_eq!(attr(last, "gen_ai.usage.output_tokens"), 5);
    assert!(
        attr(last, "gen_ai.output.messages")
            .as_str()
            .unwrap()
            .contains("Rust is fast.")
    );
    let tool = by_name["execute_tool"][0];
    assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(tool, "gen_ai.tool.name"), "lookup");
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), "call_0");
    assert_eq!(attr(tool, "gen_ai.tool.call.result"), "fact rust");
    let root = roots[0];
    assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(root, "gen_ai.agent.name"), "otlp");

    // The gateway was sent each chat span as the caller, in the same trace.
    let seen = proxy.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let chat_ids: Vec<&str> = chats
        .iter()
        .map(|c| c["context"]["span_id"].as_str().unwrap())
        .collect();
    for header in &seen {
        let header = header
            .as_deref()
            .expect("a traceparent on every model request");
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4, "{header}");
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1], trace_id);
        assert!(chat_ids.contains(&parts[2]), "{header} names no chat span");
        assert_eq!(parts[3], "01");
    }
    // The gateway continued the trace: for each chat span, one gateway request under it,
    // with validation and an attempt under the request and the upstream call under the
    // attempt.
    for name in GATEWAY_SPANS {
        let found = by_name
            .get(name)
            .unwrap_or_else(|| panic!("no gateway span {name} among {names:?}"));
        assert_eq!(found.len(), 2, "{name}: {found:?}");
        assert!(
            found
                .iter()
                .all(|s| s["context"]["trace_id"] == trace_id.as_str())
        );
    }
    let span_id = |s: &Value| s["context"]["span_id"].as_str().unwrap().to_owned();
    let parent = |s: &Value| s["parent_id"].as_str().unwrap_or_default().to_owned();
    let requests = &by_name["gateway.request"];
    let mut callers: Vec<String> = requests.iter().map(|r| parent(r)).collect();
    callers.sort();
    let mut chat_sorted: Vec<String> = chat_ids.iter().map(|c| (*c).to_owned()).collect();
    chat_sorted.sort();
    assert_eq!(
        callers, chat_sorted,
        "each chat span has its gateway request"
    );
    let request_ids: Vec<String> = requests.iter().map(|r| span_id(r)).collect();
    for request in requests.iter() {
        assert_eq!(attr(request, "http.route"), "/v1/chat/completions");
        assert_eq!(attr(request, "http.response.status_code"), 200);
        assert_eq!(attr(request, "promptforge.model"), "code-pro");
    }
    for name in ["gateway.validate", "gateway.attempt"] {
        for span in &by_name[name] {
            assert!(request_ids.contains(&parent(span)), "{name}: {span}");
        }
    }
    let attempt_ids: Vec<String> = by_name["gateway.attempt"]
        .iter()
        .map(|a| span_id(a))
        .collect();
    for attempt in &by_name["gateway.attempt"] {
        assert_eq!(attr(attempt, "promptforge.endpoint"), "scripted");
    }
    for call in &by_name["gateway.upstream"] {
        assert!(attempt_ids.contains(&parent(call)), "{call}");
        assert_eq!(attr(call, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(call, "gen_ai.request.model"), "code-pro");
        assert_eq!(attr(call, "server.address"), "127.0.0.1");
    }
    assert!(
        by_name["gateway.upstream"].iter().any(|c| {
            attr(c, "gen_ai.usage.input_tokens") == 12 && attr(c, "gen_ai.usage.output_tokens") == 5
        }),
        "the final turn's usage is on its upstream call"
    );
    // Nothing secret went to the collector: neither key, in any span.
    let everything = serde_json::to_string(&spans).unwrap();
    assert!(!everything.contains(&gateway.key) && !everything.contains(KEY));
    assert_eq!(upstream.remaining(), 0);
}

/// Runs `fixture` with `input` against the gateway at `url` (with `key`), exporting to
/// `phoenix`, with content capture on or off; the run must succeed. Returns its output and
/// its trace file.
async fn run_exported(
    url: &str,
    key: &str,
    phoenix: &Phoenix,
    fixture: &str,
    input: &str,
    capture: bool,
) -> (std::process::Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let trace_file = dir.path().join("t.json");
    let output = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge"))
            .args(["run", "--trace", trace_file.to_str().unwrap()])
            .arg(fixture)
            .arg(input)
            .current_dir(repo())
            .env("PROMPTFORGE_GATEWAY_URL", url)
            .env("PROMPTFORGE_GATEWAY_API_KEY", key)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.url)
            .env(
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                if capture { "true" } else { "false" },
            )
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_SDK_DISABLED")
            .output(),
    )
    .await
    .expect("the run finishes")
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document = serde_json::from_slice(&std::fs::read(&trace_file).unwrap()).unwrap();
    (output, document)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_text_reaches_the_collector_only_with_content_capture() {
    let phoenix = Phoenix::start().await;
    let turn = || {
        [
            calls(&[("lookup", r#"{"key":"PFLEAK_TOOLARGS said"}"#)]),
            Reply::Json(json!({
                "id": "resp-2", "object": "chat.completion", "model": "code-pro",
                "choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "PFLEAK_REPLY it is"}}]
            })),
        ]
    };
    let upstream = Upstream::start(turn().into_iter().chain(turn()).collect()).await;
    let gateway = Gateway::start(&upstream.url, &phoenix.url).await;
    let input = "PFLEAK_ARGS user said <script>alert(1)</script>";
    let fixture = "crates/promptforge-cli/tests/otlp/hostile.md";
    let marks = [
        "PFLEAK_ARGS",
        "PFLEAK_TOOLARGS",
        "PFLEAK_TOOLRESULT",
        "PFLEAK_REPLY",
    ];
    for capture in [false, true] {
        let (_, document) = run_exported(
            &gateway.url,
            &gateway.key,
            &phoenix,
            fixture,
            input,
            capture,
        )
        .await;
        let trace_id = document["trace_id"].as_str().unwrap();
        let local = document["spans"].as_array().unwrap().len();
        // The runner's spans and, for each of the two model requests, the gateway's.
        let spans = phoenix
            .spans(trace_id, local + 2 * GATEWAY_SPANS.len())
            .await;
        let everything = serde_json::to_string(&spans).unwrap();
        for mark in marks {
            assert_eq!(
                everything.contains(mark),
                capture,
                "{mark} with capture {capture}: {everything}"
            );
        }
        let log = spans
            .iter()
            .find(|s| s["name"] == "log")
            .expect("a log span");
        let message = attr(log, "promptforge.message");
        if capture {
            assert_eq!(
                message.as_str(),
                Some(format!("user said: {input}").as_str())
            );
        } else {
            assert!(message.is_null(), "{log}");
        }
    }
    assert_eq!(upstream.remaining(), 0);
}
