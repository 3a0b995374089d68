//! Test harness: a scripted OpenAI-compatible upstream and a spawned gateway binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
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
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

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
    gate: tokio::sync::Semaphore,
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
            gate: tokio::sync::Semaphore::new(0),
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

/// A running gateway process; killed on drop.
pub struct Gateway {
    child: Child,
    pub url: String,
    pub stderr: Arc<Mutex<String>>,
    pub client: reqwest::Client,
}

/// The environment every test gateway gets.
pub fn base_env() -> Vec<(String, String)> {
    vec![
        ("GW_TEST_KEY".into(), KEY.into()),
        ("GW_UPSTREAM_KEY".into(), UPSTREAM_KEY.into()),
    ]
}

fn command(args: &[&str], env: &[(String, String)], remove: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_promptforge-gateway"));
    for name in remove {
        cmd.env_remove(name);
    }
    cmd.args(args)
        .env_remove("PROMPTFORGE_GATEWAY_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

impl Gateway {
    /// Boots `serve <boot> --profile <profile>` and waits for the listening line.
    pub async fn start(boot: &Path, profile: &str, env: &[(String, String)]) -> Self {
        Self::start_args(
            &["serve", boot.to_str().unwrap(), "--profile", profile],
            env,
        )
        .await
    }

    /// Boots the binary with `args` and waits for the listening line.
    pub async fn start_args(args: &[&str], env: &[(String, String)]) -> Self {
        Self::start_args_without(args, env, &[]).await
    }

    /// Like [`Gateway::start_args`], with `remove` taken out of the inherited environment.
    pub async fn start_args_without(
        args: &[&str],
        env: &[(String, String)],
        remove: &[&str],
    ) -> Self {
        let mut child = command(args, env, remove).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = BufReader::new(child.stderr.take().unwrap());
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut line = String::new();
            while err_pipe.read_line(&mut line).await.unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = out.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return url.to_owned();
                }
            }
            panic!(
                "gateway exited before listening: {}",
                stderr.lock().unwrap()
            );
        })
        .await
        .expect("gateway did not start listening");
        Self {
            child,
            url,
            stderr,
            client: reqwest::Client::new(),
        }
    }

    /// Boots [`boot_with`] with the main profile.
    pub async fn with_limits(
        upstream: &Upstream,
        server_extra: &str,
        endpoint_extra: &str,
    ) -> (Self, ConfigDir) {
        let dir = ConfigDir::new();
        dir.write(
            "gateway.toml",
            &boot_with(&upstream.url, server_extra, endpoint_extra),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Self::start(&dir.boot(), "main", &base_env()).await;
        (gw, dir)
    }

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// The gateway's `host:port`.
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_owned()
    }

    /// Sends SIGTERM without waiting for the exit.
    pub fn signal_term(&self) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Boots the standard configuration with the main profile.
    pub async fn standard(upstream: &Upstream) -> (Self, ConfigDir) {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", &standard_boot(&upstream.url));
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Self::start(&dir.boot(), "main", &base_env()).await;
        (gw, dir)
    }

    pub fn logs(&self) -> String {
        self.stderr.lock().unwrap().clone()
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

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self.send(path, body).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

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

    /// Sends SIGTERM and waits (bounded) for the exit; returns the exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the gateway did not exit after SIGTERM")
            .unwrap();
        exit.code()
    }

    /// Waits (bounded) for an exit already under way; returns the exit code.
    pub async fn terminate_wait(&mut self) -> Option<i32> {
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the gateway did not exit after SIGTERM")
            .unwrap()
            .code()
    }

    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Runs the binary expecting it to exit (a boot failure); returns (code, stderr).
pub async fn run_to_exit(args: &[&str], env: &[(String, String)]) -> (Option<i32>, String) {
    let mut child = command(args, env, &[]).spawn().unwrap();
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        pipe.read_to_string(&mut stderr).await.unwrap();
        child.wait().await.unwrap()
    })
    .await
    .expect("the gateway did not exit (a broken config must never reach a listening socket)");
    (status.code(), stderr)
}

/// Boots `boot` + `profile` expecting a failure; returns stderr.
pub async fn boot_failure(dir: &ConfigDir, profile: &str) -> String {
    let boot = dir.boot();
    let (code, stderr) = run_to_exit(
        &["serve", boot.to_str().unwrap(), "--profile", profile],
        &base_env(),
    )
    .await;
    assert_ne!(
        code,
        Some(0),
        "expected a boot failure, got success: {stderr}"
    );
    assert!(
        !stderr.contains("listening"),
        "a broken config reached a socket: {stderr}"
    );
    stderr
}

/// Waits (bounded) for `cond`.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    cond()
}

/// Polls an async condition (bounded).
pub async fn eventually_async<F, Fut>(mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..400 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}
