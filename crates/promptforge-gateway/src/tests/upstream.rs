//! The scripted OpenAI-compatible upstream on loopback and the test configurations,
//! shared by the in-process tests (`src/tests/`) and the process tests (`tests/gateway/`,
//! which include this file by path): nothing here names the gateway's own code.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

/// The bearer key every test gateway uses.
pub const KEY: &str = "test-gateway-key";
/// The upstream credential the gateway must send.
pub const UPSTREAM_KEY: &str = "upstream-secret-key";

/// One piece of a scripted SSE stream.
#[derive(Debug, Clone)]
pub enum Part {
    /// `data: <payload>\n\n`.
    Data(String),
    /// Raw bytes, verbatim.
    Raw(String),
    /// A pause.
    Sleep(u64),
    /// Never finish (until the reader goes away).
    Hang,
    /// Fail the body mid-flight (the connection is cut).
    Abort,
    /// These bytes, repeated forever (until the reader goes away).
    Endless(String),
}

/// What the upstream answers for one upstream model string.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with a status.
    Json(u16, Value),
    /// A raw body with a status.
    Raw(u16, String),
    /// An SSE stream.
    Stream(Vec<Part>),
    /// Another reply after a pause.
    Delayed(u64, Box<Reply>),
    /// Another reply once the test opens the gate for it ([`Upstream::open_gate`]).
    Gated(Box<Reply>),
    /// Accept the request and never answer (no status line, no byte).
    Never,
    /// `200` with a body that starts with the first string and then repeats the second
    /// forever (until the reader goes away).
    EndlessBody(String, String),
}

/// A request the upstream received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

struct UpstreamInner {
    replies: Mutex<HashMap<String, Reply>>,
    recorded: Mutex<Vec<Recorded>>,
    streams_dropped: AtomicUsize,
    /// Bumped with `streams_dropped` and `recorded`: waiters see every change.
    changed: watch::Sender<()>,
    gate: tokio::sync::Semaphore,
    /// Requests being handled right now, and the most at once since the start.
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// Counts a request in flight while it lives.
struct InFlight(Arc<UpstreamInner>);
impl InFlight {
    fn enter(inner: &Arc<UpstreamInner>) -> Self {
        let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(inner.clone())
    }
}
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The scripted upstream on 127.0.0.1:0.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<UpstreamInner>,
    pub url: String,
    shutdown: Arc<tokio::sync::Notify>,
}

impl Upstream {
    pub async fn start() -> Self {
        let inner = Arc::new(UpstreamInner {
            replies: Mutex::default(),
            recorded: Mutex::default(),
            streams_dropped: AtomicUsize::new(0),
            changed: watch::channel(()).0,
            gate: tokio::sync::Semaphore::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let shutdown = Arc::new(tokio::sync::Notify::new());
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.notified().await })
                .await
                .unwrap();
        });
        Self {
            inner,
            url: format!("http://{addr}"),
            shutdown,
        }
    }

    /// Scripts the reply for an upstream model string.
    pub fn script(&self, model: &str, reply: Reply) {
        self.inner
            .replies
            .lock()
            .unwrap()
            .insert(model.to_owned(), reply);
    }

    pub fn recorded(&self) -> Vec<Recorded> {
        self.inner.recorded.lock().unwrap().clone()
    }

    pub fn last(&self) -> Recorded {
        self.recorded()
            .pop()
            .expect("the upstream received no request")
    }

    pub fn streams_dropped(&self) -> usize {
        self.inner.streams_dropped.load(Ordering::SeqCst)
    }

    /// Waits (bounded: a test that never sees it fails) until `cond` holds for the
    /// upstream, woken by each recorded request and each dropped stream, never by a timer.
    pub async fn until(&self, mut cond: impl FnMut(&Self) -> bool) -> bool {
        let mut changed = self.inner.changed.subscribe();
        let wait = async {
            loop {
                if cond(self) {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), wait)
            .await
            .is_ok()
    }

    /// The most requests the upstream was handling at one instant (a request counts from
    /// its arrival until its reply is handed back; a stream's body is not counted).
    pub fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }

    /// Starts counting [`Upstream::max_in_flight`] afresh from what is in flight now.
    pub fn reset_max_in_flight(&self) {
        let now = self.inner.in_flight.load(Ordering::SeqCst);
        self.inner.max_in_flight.store(now, Ordering::SeqCst);
    }

    /// Lets `n` gated replies through.
    pub fn open_gate(&self, n: usize) {
        self.inner.gate.add_permits(n);
    }

    pub fn stop(&self) {
        self.shutdown.notify_waiters();
    }
}

/// Sets a counter when the stream body is dropped (the gateway went away).
struct DropFlag(Arc<UpstreamInner>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.streams_dropped.fetch_add(1, Ordering::SeqCst);
        self.0.changed.send_replace(());
    }
}

/// The default chat reply: content "hello from upstream", model echoed.
pub fn chat_reply(model: &str, content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        "system_fingerprint": "fp-upstream"
    })
}

/// A chunk of a streamed chat completion.
pub fn chunk(model: &str, content: &str) -> String {
    json!({
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]
    })
    .to_string()
}

async fn handle(
    State(inner): State<Arc<UpstreamInner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _in_flight = InFlight::enter(&inner);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    inner.recorded.lock().unwrap().push(Recorded {
        path: uri.path().to_owned(),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: body.clone(),
    });
    inner.changed.send_replace(());
    let scripted = inner.replies.lock().unwrap().get(&model).cloned();
    let reply = scripted.unwrap_or_else(|| match uri.path() {
        "/v1/embeddings" => Reply::Json(
            200,
            json!({"object": "list", "model": model, "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}], "usage": {"prompt_tokens": 2, "total_tokens": 2}}),
        ),
        "/v1/rerank" => Reply::Json(
            200,
            json!({"model": model, "results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}], "usage": {"total_tokens": 5}}),
        ),
        "/v1/chat/completions" if body.get("stream") == Some(&Value::Bool(true)) => Reply::Stream(vec![
            Part::Data(chunk(&model, "Hel")),
            Part::Data(chunk(&model, "lo")),
            Part::Data("[DONE]".into()),
        ]),
        "/v1/chat/completions" => Reply::Json(200, chat_reply(&model, "hello from upstream")),
        _ => Reply::Json(404, json!({"error": {"message": "no route"}})),
    });
    let reply = match reply {
        Reply::Delayed(ms, inner) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            *inner
        }
        Reply::Gated(next) => {
            inner.gate.acquire().await.unwrap().forget();
            *next
        }
        Reply::Never => {
            let _flag = DropFlag(inner.clone());
            std::future::pending::<()>().await;
            unreachable!()
        }
        other => other,
    };
    match reply {
        Reply::Delayed(..) | Reply::Gated(..) | Reply::Never => {
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Reply::EndlessBody(start, repeat) => {
            let flag = DropFlag(inner.clone());
            let first =
                futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(start)) });
            let rest = futures::stream::repeat(Bytes::from(repeat)).map(move |b| {
                let _keep = &flag;
                Ok::<_, std::io::Error>(b)
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(first.chain(rest)))
                .unwrap()
        }
        Reply::Json(status, value) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(value)).into_response()
        }
        Reply::Raw(status, text) => (StatusCode::from_u16(status).unwrap(), text).into_response(),
        Reply::Stream(parts) => {
            let parts_copy = parts.clone();
            // The flag lives as long as the whole body, endless tail included.
            let flag = Arc::new(DropFlag(inner.clone()));
            let tail_flag = flag.clone();
            let stream = futures::stream::iter(parts).then(move |part| {
                let _keep = &flag;
                async move {
                    match part {
                        Part::Data(d) => {
                            Ok::<_, std::io::Error>(Some(Bytes::from(format!("data: {d}\n\n"))))
                        }
                        Part::Raw(r) => Ok(Some(Bytes::from(r))),
                        Part::Sleep(ms) => {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            Ok(None)
                        }
                        Part::Hang => {
                            std::future::pending::<()>().await;
                            Ok(None)
                        }
                        Part::Abort => Err(std::io::Error::other("scripted abort")),
                        Part::Endless(_) => Ok(None),
                    }
                }
            });
            let stream = stream.filter_map(|item| async move { item.transpose() });
            let endless = parts_tail(&parts_copy).map(move |item| {
                let _keep = &tail_flag;
                item
            });
            let stream = stream.chain(endless);
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
    }
}

/// The endless tail of a scripted stream: the bytes of its `Part::Endless`, forever.
fn parts_tail(
    parts: &[Part],
) -> futures::stream::BoxStream<'static, Result<Bytes, std::io::Error>> {
    match parts.iter().find_map(|p| match p {
        Part::Endless(bytes) => Some(bytes.clone()),
        _ => None,
    }) {
        Some(bytes) => futures::stream::repeat(Bytes::from(bytes)).map(Ok).boxed(),
        None => futures::stream::empty().boxed(),
    }
}

/// The standard boot file with extra lines in `[server]` and in the `up` endpoint.
pub fn boot_with(upstream_url: &str, server_extra: &str, endpoint_extra: &str) -> String {
    standard_boot(upstream_url)
        .replacen(
            "api_key = \"${GW_TEST_KEY}\"\n",
            &format!("api_key = \"${{GW_TEST_KEY}}\"\n{server_extra}\n"),
            1,
        )
        .replacen(
            "api_key = \"${GW_UPSTREAM_KEY}\"\n",
            &format!("api_key = \"${{GW_UPSTREAM_KEY}}\"\n{endpoint_extra}\n"),
            1,
        )
}

/// Files of a test configuration directory.
pub struct ConfigDir {
    pub dir: tempfile::TempDir,
}

impl ConfigDir {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `rel` (creating directories) and returns its path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn boot(&self) -> PathBuf {
        self.dir.path().join("gateway.toml")
    }
}

/// The standard boot file against `upstream_url`: one endpoint, chat/embedding/classifier
/// models, a tool_code model.
pub fn standard_boot(upstream_url: &str) -> String {
    format!(
        r#"
[server]
bind = "127.0.0.1:0"
api_key = "${{GW_TEST_KEY}}"

[[endpoint]]
id = "up"
protocol = "openai"
base_url = "{upstream_url}/v1/"
api_key = "${{GW_UPSTREAM_KEY}}"

[[endpoint]]
id = "dead"
base_url = "http://127.0.0.1:1/v1"

[[model]]
name = "reasoning-large"
description = "A careful reasoning model"
context = 200000
upstream = "up-chat"
endpoints = ["up"]
thinking = "switchable"
max_output = 64000
images = true
parallel_tool_calls = true
effort_levels = ["low", "high"]
default_effort = "low"

[[model]]
name = "fast-draft"
description = "A fast drafting model"
context = 8192
upstream = "up-fast"
endpoints = ["up"]
default_max_tokens = 256

[[model]]
name = "gemma-remote"
description = "A Gemma 3 instruct model behind an OpenAI-shaped server"
context = 8192
tool_dialect = "gemma3_tool_code"
upstream = "gemma3-it"
endpoints = ["up"]

[[model]]
name = "embed-large"
kind = "embedding"
description = "Embeddings"
context = 512
upstream = "up-embed"
endpoints = ["up"]

[[model]]
name = "rerank-large"
kind = "classifier"
description = "A reranker"
context = 512
upstream = "up-rerank"
endpoints = ["up"]

[[model]]
name = "unreachable"
description = "Nobody listens"
context = 1000
upstream = "gone"
endpoints = ["dead"]
"#
    )
}

pub const MAIN_PROFILE: &str = "include = [\"../gateway.toml\"]\n";

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the OpenMetrics / Prometheus text exposition: `# HELP` / `# TYPE` / `# EOF`
/// lines, and samples `name{key="value",...} value`. Panics on a line it cannot read.
pub fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
    let mut samples = Vec::new();
    let mut types = BTreeMap::new();
    for line in text.lines() {
        if line.is_empty() || line == "# EOF" || line.starts_with("# HELP ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("a TYPE line has a type");
            types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment line: {line}");
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("labels end with }");
                let mut labels = BTreeMap::new();
                let mut chars = body.chars().peekable();
                while chars.peek().is_some() {
                    let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    assert_eq!(chars.next(), Some('"'), "label value is quoted in {line}");
                    let mut value = String::new();
                    loop {
                        match chars.next().expect("label value ends") {
                            '\\' => value.push(chars.next().expect("escape")),
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                    labels.insert(key, value);
                }
                (name.to_owned(), labels)
            }
        };
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    (samples, types)
}

/// The sum of every sample named `name` whose labels include all of `want`.
pub fn total(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

/// `GET /metrics` of the gateway at `url` with the bearer, checked and parsed.
pub async fn scrape_url(
    client: &reqwest::Client,
    url: &str,
) -> (Vec<Sample>, BTreeMap<String, String>) {
    let response = client
        .get(format!("{url}/metrics"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    parse(&text)
}

/// A gateway's HTTP address and a client for it, with the bearer helpers both test
/// harnesses' gateways offer (each `Gateway` dereferences to one).
pub struct Http {
    pub url: String,
    pub client: reqwest::Client,
}

impl Http {
    /// `url` with a fresh client.
    pub fn new(url: String) -> Self {
        Self {
            url,
            client: reqwest::Client::new(),
        }
    }

    /// The gateway's `host:port`.
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_owned()
    }

    /// POSTs `body` as JSON to `path` with the bearer; the response, unread.
    pub async fn send(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.url))
            .bearer_auth(KEY)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// POSTs `body` to `path` with the bearer: the status and the body (JSON, else text).
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self.send(path, body).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// GETs `path` with the bearer: the status and the JSON body (`null` when not JSON).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.url))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}
