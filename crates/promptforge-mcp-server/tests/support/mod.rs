//! Test support: a scripted OpenAI-compatible upstream on loopback, a prompt fixture and
//! the server process.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    dead_code,
    unreachable_pub
)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use promptforge_test_support::{Loopback, has_bearer};
use serde_json::{Value as Json, json};
use tokio::sync::Notify;

/// The gateway bearer the upstream expects.
pub const KEY: &str = "test-key";

/// The MCP bearer of the fixture's `prompts.toml`.
pub const MCP_KEY: &str = "mcp-test-key";

/// How the upstream answers `GET /v1/models`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Catalog {
    /// One chat model.
    Ok,
    /// 401.
    Unauthorized,
    /// 503.
    Unavailable,
    /// 200 with a body that is not a model list.
    Malformed,
}

struct Script {
    catalog: std::sync::Mutex<Catalog>,
    release: Notify,
    waiting: AtomicUsize,
    cancelled: AtomicUsize,
    chats: AtomicUsize,
}

/// The scripted upstream: chat replies "Echo: <last user message>"; a message containing
/// `SLOW` is held until `POST /control/release` (bounded at 60 s).
pub struct Upstream {
    /// Its base URL.
    pub url: String,
    script: Arc<Script>,
    _server: Loopback,
}

struct Waiting(Arc<Script>, bool);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Upstream {
    /// Starts on 127.0.0.1, port 0.
    pub async fn start() -> Self {
        let script = Arc::new(Script {
            catalog: std::sync::Mutex::new(Catalog::Ok),
            release: Notify::new(),
            waiting: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            chats: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/control/release", post(release))
            .route("/control/stats", get(stats))
            .with_state(Arc::clone(&script));
        let server = Loopback::serve(app).await.unwrap();
        Self {
            url: server.url().to_owned(),
            script,
            _server: server,
        }
    }

    /// Sets the `/v1/models` behaviour.
    pub fn set_catalog(&self, catalog: Catalog) {
        *self.script.catalog.lock().unwrap() = catalog;
    }

    /// Chat requests answered or held so far.
    pub fn chats(&self) -> usize {
        self.script.chats.load(Ordering::SeqCst)
    }

    /// Releases every held request.
    pub fn release(&self) {
        self.script.release.notify_waiters();
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    has_bearer(headers, KEY)
}

async fn chat(State(script): State<Arc<Script>>, headers: HeaderMap, body: String) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    script.chats.fetch_add(1, Ordering::SeqCst);
    let body: Json = serde_json::from_str(&body).unwrap();
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    if last.contains("SLOW") {
        let released = script.release.notified();
        script.waiting.fetch_add(1, Ordering::SeqCst);
        let mut guard = Waiting(Arc::clone(&script), false);
        let _ = tokio::time::timeout(Duration::from_secs(60), released).await;
        guard.1 = true;
    }
    axum::Json(json!({
        "id": "x", "object": "chat.completion", "model": "smol-chat",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": format!("Echo: {last}")}}]
    }))
    .into_response()
}

async fn models(State(script): State<Arc<Script>>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let catalog = *script.catalog.lock().unwrap();
    match catalog {
        Catalog::Ok => axum::Json(json!({"object": "list", "data": [
            {"id": "smol-chat", "object": "model", "kind": "chat",
             "description": "A small friendly general-purpose chat model that follows instructions",
             "context": 2048, "thinking": "never"}
        ]}))
        .into_response(),
        Catalog::Unauthorized => StatusCode::UNAUTHORIZED.into_response(),
        Catalog::Unavailable => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        Catalog::Malformed => (StatusCode::OK, "{\"nope\": true}").into_response(),
    }
}

async fn release(State(script): State<Arc<Script>>) -> Response {
    script.release.notify_waiters();
    axum::Json(json!({"released": true})).into_response()
}

async fn stats(State(script): State<Arc<Script>>) -> Response {
    axum::Json(json!({
        "waiting": script.waiting.load(Ordering::SeqCst),
        "cancelled": script.cancelled.load(Ordering::SeqCst),
        "chats": script.chats.load(Ordering::SeqCst),
    }))
    .into_response()
}

/// A prompt file's text.
pub fn prompt(name: &str, description: &str, lua: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\npromptforge: 1\n---\n\n# T\n\n```lua\n{lua}\n```\n"
    )
}

/// The prompts every end-to-end test serves.
pub fn standard_prompts(dir: &Path) {
    let p = dir.join("prompts");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(
        p.join("echo.md"),
        prompt("echo", "Return the input unchanged", "return args"),
    )
    .unwrap();
    std::fs::write(
        p.join("greet.md"),
        "---\nname: greet\ndescription: Repeat a greeting for the person named in the input\npromptforge: 1\n---\n\n# Greet\n\n```lua\nmodels.default(\"writer\", \"a small instruction-following chat model\")\n```\n\n## Main\n\n```lua\nvar.greeting = \"Hello, \" .. args .. \"!\"\n```\n\n{{ var.greeting }}\n",
    )
    .unwrap();
    std::fs::write(
        p.join("steps.md"),
        "---\nname: steps\ndescription: Walk two sections and return the input\npromptforge: 1\n---\n\n# Steps\n\n## One\n\n```lua\nvar.seen = 1\n```\n\n## Two\n\n```lua\nreturn \"two:\" .. args\n```\n",
    )
    .unwrap();
    std::fs::write(
        p.join("reader.md"),
        "---\nname: reader\ndescription: Read the input store file back\npromptforge: 1\ninput:\n  path: input.md\n  description: The text to read\n---\n\n# Reader\n\n```lua\nreturn \"read:\" .. store.read(\"input.md\")\n```\n",
    )
    .unwrap();
    std::fs::write(
        p.join("writer.md"),
        "---\nname: writer\ndescription: Write a report to the output store file\npromptforge: 1\noutput:\n  path: out/report.md\n  description: The report\n---\n\n# Writer\n\n```lua\nif args ~= \"nofile\" then store.write(\"out/report.md\", \"report for \" .. args) end\nreturn \"written\"\n```\n",
    )
    .unwrap();
    // Not a prompt: skipped in silence.
    std::fs::write(p.join("README.md"), "# Notes\n\nNot a prompt.\n").unwrap();
}

/// Knobs of the fixture's `prompts.toml`.
pub struct Knobs {
    /// `[server].bind`.
    pub bind: String,
    /// `[server].reply_deadline`.
    pub reply_deadline: &'static str,
    /// `[server].max_concurrent_runs`.
    pub max_runs: u32,
    /// `[server].admission_timeout`.
    pub admission: &'static str,
    /// `[server].watch`.
    pub watch: bool,
    /// `[server].resume_grace`.
    pub resume_grace: &'static str,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:0".into(),
            reply_deadline: "60s",
            max_runs: 4,
            admission: "30s",
            watch: true,
            resume_grace: "10s",
        }
    }
}

/// Writes `prompts.toml` for `upstream` into `dir`; `input_file` and `output_file` may be
/// inside `dir/files` (made here).
pub fn write_config(dir: &Path, upstream: &str, knobs: &Knobs) -> PathBuf {
    std::fs::create_dir_all(dir.join("files")).unwrap();
    let path = dir.join("prompts.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nbind = \"{}\"\napi_key = \"${{PF_TEST_MCP_KEY}}\"\nmax_concurrent_runs = {}\nadmission_timeout = \"{}\"\nreply_deadline = \"{}\"\nwatch = {}\nwatch_debounce = \"100ms\"\nresume_grace = \"{}\"\n\n[gateway]\nurl = \"{upstream}/v1\"\napi_key = \"${{PF_TEST_GATEWAY_KEY}}\"\n\n[catalog]\ninclude = [\"**/*.md\"]\nexclude = [\"README.md\"]\n\n[files]\nallowed_dirs = [\"files\"]\n",
            knobs.bind,
            knobs.max_runs,
            knobs.admission,
            knobs.reply_deadline,
            knobs.watch,
            knobs.resume_grace
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("prompts.env"),
        format!("PF_TEST_MCP_KEY={MCP_KEY}\nPF_TEST_GATEWAY_KEY={KEY}\n"),
    )
    .unwrap();
    path
}

/// The server binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_promptforge-mcp-server")
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test venv's Python, if `scripts/test.sh` made it.
pub fn python() -> Option<PathBuf> {
    let python = repo().join(".venv/bin/python");
    python.exists().then_some(python)
}

/// A server process, killed on drop.
pub struct Server {
    /// The child.
    pub child: tokio::process::Child,
    /// Its base URL (HTTP only).
    pub url: String,
}

impl Server {
    /// Starts `serve <config>` over HTTP (the config binds port 0), learns the bound
    /// address from the server's "serving MCP at" log line, and waits (bounded) for
    /// `/healthz`. The server's log is passed on to this process's stderr.
    pub async fn http(config: &Path) -> Self {
        use tokio::io::AsyncBufReadExt;

        let mut child = tokio::process::Command::new(binary())
            .args(["serve"])
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (found, address) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut found = Some(found);
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{line}");
                if let Some(rest) = line.split("serving MCP at ").nth(1)
                    && let Some(url) = rest.trim().strip_suffix("/mcp")
                    && let Some(found) = found.take()
                {
                    let _ = found.send(url.to_owned());
                }
            }
        });
        let url = tokio::time::timeout(Duration::from_secs(60), address)
            .await
            .expect("the server did not say where it serves within 60 s")
            .expect("the server exited before serving (its log is above)");
        let client = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = client.get(format!("{url}/healthz")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server never answered /healthz"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { child, url }
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().unwrap();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server did not exit after SIGTERM")
            .unwrap()
    }
}

/// Runs a Python scenario; panics with its output when it fails.
pub async fn scenario(name: &str, mode: &str, dir: &Path, upstream: &str, target: &[String]) {
    scenario_with(name, mode, dir, upstream, target, &[]).await;
}

/// [`scenario`] with extra environment variables for the script.
pub async fn scenario_with(
    name: &str,
    mode: &str,
    dir: &Path,
    upstream: &str,
    target: &[String],
    env: &[(&str, &str)],
) {
    let python = python().expect("checked by the caller");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/client.py");
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .arg(name)
        .args(["--mode", mode, "--upstream", upstream])
        .arg("--dir")
        .arg(dir)
        .args(target)
        .env(
            "PF_PICKER",
            if cfg!(feature = "picker") { "1" } else { "0" },
        )
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the Python scenario did not finish in 300 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "scenario {name} ({mode}) failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(stdout.contains(&format!("{name} ({mode}): ok")), "{stdout}");
}

/// The `--stdio` target arguments for a scenario.
pub fn stdio_target(config: &Path) -> Vec<String> {
    vec![
        "--stdio".into(),
        binary().into(),
        "serve".into(),
        "--stdio".into(),
        config.display().to_string(),
    ]
}

/// The `--url` target arguments for a scenario.
pub fn http_target(url: &str) -> Vec<String> {
    vec![
        "--url".into(),
        format!("{url}/mcp"),
        "--token".into(),
        MCP_KEY.into(),
    ]
}

/// Says why a test did nothing. Under CI (`CI` set to anything but `false`/`0`), where
/// `scripts/test.sh` installs every client, a missing client fails the test instead: a
/// green CI run never hides a skipped end-to-end check.
pub fn skip(why: &str) {
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!in_ci, "a required test client is missing under CI: {why}");
    eprintln!("SKIPPED: {why}");
}

/// A JSON value of a response.
pub async fn json(response: reqwest::Response) -> Json {
    response.json().await.unwrap()
}
