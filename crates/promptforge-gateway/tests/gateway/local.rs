//! Local inference: real `llama-server` children (built by `scripts/build-llama-server.sh`)
//! serving the real SmolLM2-135M-Instruct GGUF (fetched by `scripts/fetch-smollm2.sh`),
//! through the gateway. Tests that need the binary or the model print why they skip when
//! either is absent; the provisioning failures run everywhere.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::harness::*;

const SMOL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const SMOL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn cache() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".promptforge")
}

/// The built `llama-server` and the verified SmolLM2 GGUF, or `None` (with a printed
/// reason) when either is missing.
fn real_parts(test: &str) -> Option<(PathBuf, PathBuf)> {
    let binary = std::env::var_os("PROMPTFORGE_LLAMA_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache().join("llama.cpp/llama-server"));
    let model = std::env::var_os("PROMPTFORGE_SMOLLM2_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache().join("models").join(SMOL_FILE));
    for (what, path, script) in [
        ("llama-server", &binary, "scripts/build-llama-server.sh"),
        ("SmolLM2 GGUF", &model, "scripts/fetch-smollm2.sh"),
    ] {
        if !path.is_file() {
            // Under CI, `scripts/test.sh` provisions both: a missing one is a failure there,
            // so a green CI run never hides a skipped real-model test.
            let in_ci =
                std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
            assert!(
                !in_ci,
                "{test}: no {what} at {} under CI (run {script})",
                path.display()
            );
            // A skip must be visible in the test output.
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "SKIPPED {test}: no {what} at {} (run {script} from the workspace root)",
                    path.display()
                );
            }
            return None;
        }
    }
    Some((binary, model))
}

fn chat_model(name: &str, source: &str, sha: &str) -> String {
    format!(
        "\n[[local_model]]\nname = \"{name}\"\ndescription = \"SmolLM2 135M instruct, local\"\nsource = \"{source}\"\nsha256 = \"{sha}\"\ncontext = 2048\nthreads = 1\nparallel = 1\n"
    )
}

fn rerank_model(name: &str, source: &str) -> String {
    format!(
        "\n[[local_model]]\nname = \"{name}\"\nkind = \"classifier\"\ndescription = \"SmolLM2 as a reranker\"\nsource = \"{source}\"\nsha256 = \"{SMOL_SHA256}\"\ncontext = 2048\nthreads = 1\n"
    )
}

fn embed_model(name: &str, source: &str) -> String {
    format!(
        "\n[[local_model]]\nname = \"{name}\"\nkind = \"embedding\"\ndescription = \"SmolLM2 as an embedder\"\nsource = \"{source}\"\nsha256 = \"{SMOL_SHA256}\"\ncontext = 2048\nthreads = 1\n"
    )
}

/// A config dir: the standard boot file plus `[local]` and `models`.
fn local_dir(upstream: &Upstream, local: &str, models: &str) -> ConfigDir {
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        &format!(
            "{}\n[local]\n{local}\n{models}",
            standard_boot(&upstream.url)
        ),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    dir
}

fn local_section(binary: Option<&Path>, cache_dir: &Path) -> String {
    let mut s = format!("cache_dir = \"{}\"\n", cache_dir.display());
    if let Some(b) = binary {
        s.push_str(&format!("llama_server = \"{}\"\n", b.display()));
    }
    s
}

/// Every live (non-zombie) descendant of `pid`, with its command line.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut cmd: HashMap<u32, String> = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        if let Some(pp) = fields.get(1).and_then(|f| f.parse().ok()) {
            parent.insert(p, pp);
        }
        let line = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        cmd.insert(p, String::from_utf8_lossy(&line).replace('\0', " "));
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (&child, &pp) in &parent {
            if pp == p {
                out.push((child, cmd.get(&child).cloned().unwrap_or_default()));
                frontier.push(child);
            }
        }
    }
    out
}

/// The `llama-server` processes under `pid` whose `--alias` is `model` (any when `None`):
/// the launched servers themselves, not their `sh` guards.
fn servers(pid: u32, model: Option<&str>) -> Vec<u32> {
    descendants(pid)
        .into_iter()
        .filter(|(_, c)| {
            !c.starts_with("/bin/sh ")
                && c.contains(" --api-key-file ")
                && model.is_none_or(|m| c.contains(&format!(" --alias {m} ")))
        })
        .map(|(p, _)| p)
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

async fn all_gone(pids: &[u32]) -> bool {
    for _ in 0..200 {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Switches to `name` expecting a local model to fail: the error message.
async fn failed_switch(gw: &Gateway, name: &str) -> String {
    let (code, reply) = gw
        .post("/admin/switch-profile", &json!({"name": name}))
        .await;
    assert_eq!(
        (code, reply["error"]["code"].clone()),
        (503, json!("local_start_failed")),
        "{reply}"
    );
    reply["error"]["message"].as_str().unwrap().to_owned()
}

async fn ask(gw: &Gateway, model: &str) -> (u16, Value) {
    let req = json!({
        "model": model,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 16,
        "temperature": 0,
    });
    gw.post("/v1/chat/completions", &req).await
}

fn assert_answer(status: u16, body: &Value, model: &str) {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], model, "{body}");
    let content = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(!content.trim().is_empty(), "empty answer: {body}");
}

/// A loopback HTTP server serving fixed files at `/NAME`.
struct FileServer {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl FileServer {
    async fn start(files: Vec<(&str, Vec<u8>)>) -> Self {
        let files: Arc<HashMap<String, axum::body::Bytes>> = Arc::new(
            files
                .into_iter()
                .map(|(n, b)| (n.to_owned(), axum::body::Bytes::from(b)))
                .collect(),
        );
        let app = axum::Router::new().route(
            "/{name}",
            axum::routing::get(
                move |axum::extract::Path(name): axum::extract::Path<String>| {
                    let files = files.clone();
                    async move {
                        match files.get(&name) {
                            Some(b) => Ok(b.clone()),
                            None => Err(axum::http::StatusCode::NOT_FOUND),
                        }
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, task }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---- provisioning failures: no llama-server needed ----

#[tokio::test(flavor = "multi_thread")]
async fn a_local_file_with_the_wrong_digest_refuses_to_boot() {
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let model = cache_dir.path().join("fake.gguf");
    std::fs::write(&model, b"not really a model").unwrap();
    let wrong = "0".repeat(64);
    let dir = local_dir(
        &upstream,
        &local_section(Some(Path::new("/bin/sh")), cache_dir.path()),
        &chat_model("l", model.to_str().unwrap(), &wrong),
    );
    let err = boot_failure(&dir, "main").await;
    let actual = sha_hex(b"not really a model");
    assert!(err.contains("sha256 mismatch"), "{err}");
    assert!(err.contains(&wrong) && err.contains(&actual), "{err}");
    assert!(err.contains("local model l"), "{err}");

    // A relative source resolves beside the file that declares it.
    let dir = local_dir(
        &upstream,
        &local_section(Some(Path::new("/bin/sh")), cache_dir.path()),
        &chat_model("l", "models/rel.gguf", &wrong),
    );
    dir.write("models/rel.gguf", "not really a model");
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("sha256 mismatch") && err.contains(&actual),
        "{err}"
    );
    assert!(
        err.contains(&dir.path().join("models/rel.gguf").display().to_string()),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_with_the_wrong_digest_leaves_nothing_and_refuses_to_boot() {
    let upstream = Upstream::start().await;
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let actual = sha_hex(&payload);
    let files = FileServer::start(vec![("m.gguf", payload)]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let wrong = "f".repeat(64);
    let dir = local_dir(
        &upstream,
        &local_section(Some(Path::new("/bin/sh")), cache_dir.path()),
        &chat_model("dl", &format!("{}/m.gguf", files.url), &wrong),
    );
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("sha256 mismatch") && err.contains(&wrong) && err.contains(&actual),
        "{err}"
    );
    assert!(
        err.contains("download progress") && err.contains("percent=100"),
        "{err}"
    );
    let models = cache_dir.path().join("models");
    let left: Vec<_> = std::fs::read_dir(&models)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_download_leaves_no_file_that_looks_complete() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = Upstream::start().await;
    // Declares a megabyte, sends a kilobyte, hangs up.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/cut.gguf", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                .await;
            let _ = socket.write_all(&[7u8; 1024]).await;
            drop(socket);
        }
    });
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = local_dir(
        &upstream,
        &local_section(Some(Path::new("/bin/sh")), cache_dir.path()),
        &chat_model("cut", &url, SMOL_SHA256),
    );
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("download of") && err.contains("cut.gguf failed"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(cache_dir.path().join("models"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    server.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_binary_and_plain_http_elsewhere_refuse_to_boot() {
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = local_dir(
        &upstream,
        &local_section(None, cache_dir.path()),
        &chat_model("l", "/nonexistent.gguf", SMOL_SHA256),
    );
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("no llama-server binary") && err.contains("scripts/build-llama-server.sh"),
        "{err}"
    );
    let dir = local_dir(
        &upstream,
        &local_section(Some(Path::new("/bin/sh")), cache_dir.path()),
        &chat_model("l", "http://example.invalid/m.gguf", SMOL_SHA256),
    );
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("plain http:// is allowed only to loopback"),
        "{err}"
    );
    let dir = local_dir(
        &upstream,
        &local_section(Some(Path::new("/bin/sh")), cache_dir.path()),
        &chat_model("l", "/nonexistent.gguf", SMOL_SHA256),
    );
    let err = boot_failure(&dir, "main").await;
    assert!(err.contains("/nonexistent.gguf is not a file"), "{err}");
}

// ---- real llama-server + SmolLM2 ----

#[tokio::test(flavor = "multi_thread")]
async fn chat_streaming_and_embeddings_through_local_children() {
    let Some((binary, model)) = real_parts("chat_streaming_and_embeddings_through_local_children")
    else {
        return;
    };
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let source = model.to_str().unwrap();
    let dir = local_dir(
        &upstream,
        &local_section(Some(&binary), cache_dir.path()),
        &format!(
            "{}{}{}",
            chat_model("smol", source, SMOL_SHA256),
            embed_model("smol-embed", source),
            rerank_model("smol-rerank", source)
        ),
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let logs = gw.logs();
    assert!(logs.contains("llama-server ready"), "{logs}");
    // The children's own log lines reach the gateway's log, tagged with the model.
    assert!(
        logs.lines().any(|l| l.contains("llama_server:")
            && l.contains("load_model")
            && l.contains("model=\"smol\"")),
        "{logs}"
    );
    let (_, status) = gw.get("/admin/status").await;
    let locals = status["local_models"].as_array().unwrap();
    assert_eq!(locals.len(), 3, "{status}");
    assert_eq!(locals[0]["name"], "smol");
    assert_eq!(locals[0]["dialect"], "gemma3_tool_code", "{status}");
    assert_eq!(locals[1]["dialect"], "openai", "{status}");
    assert_eq!(locals[2]["dialect"], "openai", "{status}");
    assert_eq!(locals[0]["running"], true);
    assert!(
        logs.contains("Gemma3ToolCode"),
        "SmolLM2's template has no tool syntax: {logs}"
    );

    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");

    // Streaming.
    let req = json!({
        "model": "smol",
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 12,
        "stream": true,
    });
    let response = gw.send("/v1/chat/completions", &req).await;
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(120), response.text())
        .await
        .unwrap()
        .unwrap();
    let mut content = String::new();
    for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(line).unwrap();
        assert_eq!(chunk["model"], "smol", "{chunk}");
        if let Some(c) = chunk["choices"][0]["delta"]["content"].as_str() {
            content.push_str(c);
        }
    }
    assert!(text.contains("data: [DONE]"), "{text}");
    assert!(!content.is_empty(), "{text}");

    // Tools through the emulated dialect: the model does not call them, but the reply
    // is a well-formed assistant message.
    let req = json!({
        "model": "smol",
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "max_tokens": 24,
    });
    let (status, body) = gw.post("/v1/chat/completions", &req).await;
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    assert_eq!(message["role"], "assistant", "{body}");
    assert!(
        message["content"].is_string() || message["tool_calls"].is_array(),
        "{body}"
    );

    // Embeddings on the same GGUF.
    let (status, body) = gw
        .post(
            "/v1/embeddings",
            &json!({"model": "smol-embed", "input": ["hello", "world"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "smol-embed");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{body}");
    assert!(
        data[0]["embedding"]
            .as_array()
            .is_some_and(|e| e.len() > 100),
        "{body}"
    );

    // Rerank with `kind = "classifier"` on the same GGUF (`--reranking`).
    let (status, body) = gw
        .post(
            "/v1/rerank",
            &json!({"model": "smol-rerank", "query": "capital of France", "documents": ["Paris is the capital of France", "Bananas are yellow"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "smol-rerank");
    assert_eq!(body["results"].as_array().map(Vec::len), Some(2), "{body}");

    // Kind checks are the remote ones.
    let (status, body) = ask(&gw, "smol-embed").await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("kind_mismatch"))
    );

    // The bearer never reaches a command line.
    for (_, cmdline) in descendants(gw.pid()) {
        assert!(
            cmdline.contains("--api-key-file") || !cmdline.contains("llama-server"),
            "{cmdline}"
        );
        assert!(!cmdline.contains("--api-key "), "{cmdline}");
    }
    gw.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkilled_child_is_respawned_and_the_request_succeeds() {
    let Some((binary, model)) =
        real_parts("a_sigkilled_child_is_respawned_and_the_request_succeeds")
    else {
        return;
    };
    let (_upstream, _cache_dir, dir) = smol_dir(&binary, &model).await;
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let before = servers(gw.pid(), Some("smol"));
    assert_eq!(before.len(), 1, "{:?}", descendants(gw.pid()));
    signal(before[0], "-KILL");
    assert!(all_gone(&before).await);
    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");
    let after = servers(gw.pid(), Some("smol"));
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
    assert!(gw.logs().contains("respawning"), "{}", gw.logs());
    let (_, status) = gw.get("/admin/status").await;
    assert_eq!(status["local_models"][0]["respawns"], 1, "{status}");
    assert_eq!(status["local_models"][0]["pid"], after[0], "{status}");
    // The metrics saw the respawn, and the child is up again.
    let (samples, _) = scrape_url(&gw.client, &gw.url).await;
    let smol = [("model", "smol")];
    assert_eq!(
        total(&samples, "promptforge_gateway_local_respawns_total", &smol),
        1.0
    );
    assert_eq!(
        total(&samples, "promptforge_gateway_local_children_up", &smol),
        1.0
    );
    gw.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_child_outlives_a_sigtermed_or_sigkilled_gateway() {
    let Some((binary, model)) = real_parts("no_child_outlives_a_sigtermed_or_sigkilled_gateway")
    else {
        return;
    };
    let (_upstream, _cache_dir, dir) = smol_dir(&binary, &model).await;
    for sig in ["-TERM", "-KILL"] {
        let mut gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
        let family: Vec<u32> = descendants(gw.pid()).into_iter().map(|(p, _)| p).collect();
        assert_eq!(servers(gw.pid(), None).len(), 1);
        if sig == "-TERM" {
            assert_eq!(gw.terminate().await, Some(0));
        } else {
            signal(gw.pid(), sig);
            gw.terminate_wait().await;
        }
        assert!(all_gone(&family).await, "{sig}: survivors {family:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_profile_switch_stops_old_children_and_rolls_back_a_failed_start() {
    let Some((binary, model)) =
        real_parts("a_profile_switch_stops_old_children_and_rolls_back_a_failed_start")
    else {
        return;
    };
    let (_upstream, _cache_dir, dir) = smol_dir(&binary, &model).await;
    dir.write(
        "profiles/remote.toml",
        "include = [\"../gateway.toml\"]\nmodels = [\"fast-draft\"]\n",
    );
    let bogus = dir.write("bogus.gguf", "this is not a GGUF file\n");
    dir.write(
        "profiles/broken.toml",
        &format!(
            "include = [\"../gateway.toml\"]\nmodels = [\"bad\"]\n{}",
            chat_model(
                "bad",
                bogus.to_str().unwrap(),
                &sha_hex(b"this is not a GGUF file\n")
            )
        ),
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let first = servers(gw.pid(), Some("smol"));
    assert_eq!(first.len(), 1);

    let (code, reply) = gw
        .post("/admin/switch-profile", &json!({"name": "remote"}))
        .await;
    assert_eq!(code, 200, "{reply}");
    assert!(all_gone(&first).await, "the old child survived the switch");
    assert!(servers(gw.pid(), None).is_empty());

    let (code, reply) = gw
        .post("/admin/switch-profile", &json!({"name": "main"}))
        .await;
    assert_eq!(code, 200, "{reply}");
    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");
    let second = servers(gw.pid(), Some("smol"));
    assert_eq!(second.len(), 1);

    // A new child that cannot start: the old set keeps serving.
    let message = failed_switch(&gw, "broken").await;
    assert!(
        message.contains("local model bad") && message.contains("last stderr lines"),
        "{message}"
    );
    let (_, status) = gw.get("/admin/status").await;
    assert_eq!(status["profile"], "main");
    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");
    assert!(servers(gw.pid(), Some("bad")).is_empty());
    gw.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_that_cannot_start_fails_the_boot_with_its_stderr() {
    let Some((binary, _)) = real_parts("a_child_that_cannot_start_fails_the_boot_with_its_stderr")
    else {
        return;
    };
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = ConfigDir::new();
    let bogus = dir.write("bogus.gguf", "this is not a GGUF file\n");
    let models = chat_model(
        "bad",
        bogus.to_str().unwrap(),
        &sha_hex(b"this is not a GGUF file\n"),
    );
    dir.write(
        "gateway.toml",
        &format!(
            "{}\n[local]\n{}\n{models}",
            standard_boot(&upstream.url),
            local_section(Some(&binary), cache_dir.path())
        ),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("local model bad: llama-server exited before it was ready"),
        "{err}"
    );
    assert!(err.contains("last stderr lines:\n"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn binary_and_model_download_from_loopback_then_the_cache_is_reused() {
    let Some((binary, model)) =
        real_parts("binary_and_model_download_from_loopback_then_the_cache_is_reused")
    else {
        return;
    };
    let upstream = Upstream::start().await;
    let binary_bytes = std::fs::read(&binary).unwrap();
    let binary_sha = sha_hex(&binary_bytes);
    let files = FileServer::start(vec![
        ("llama-server", binary_bytes),
        (SMOL_FILE, std::fs::read(&model).unwrap()),
    ])
    .await;
    let cache_dir = tempfile::tempdir().unwrap();
    let local = format!(
        "cache_dir = \"{}\"\nllama_server_url = \"{}/llama-server\"\nllama_server_sha256 = \"{binary_sha}\"\n",
        cache_dir.path().display(),
        files.url
    );
    let dir = local_dir(
        &upstream,
        &local,
        &chat_model("smol", &format!("{}/{SMOL_FILE}", files.url), SMOL_SHA256),
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let logs = gw.logs();
    assert!(logs.contains("installed llama-server"), "{logs}");
    assert!(
        logs.contains("download progress") && logs.contains("percent=100"),
        "{logs}"
    );
    assert!(cache_dir.path().join("llama.cpp/llama-server").is_file());
    assert!(cache_dir.path().join("models").join(SMOL_FILE).is_file());
    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");
    gw.kill().await;

    // A second boot downloads nothing.
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let logs = gw.logs();
    assert!(logs.contains("reusing cached model"), "{logs}");
    assert!(!logs.contains("download started"), "{logs}");
    gw.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_dominion_governs_admission_of_its_models() {
    let Some((binary, model)) = real_parts("a_local_dominion_governs_admission_of_its_models")
    else {
        return;
    };
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let models = format!(
        "\n[[dominion]]\nid = \"cpu\"\nkind = \"local\"\nmax_concurrency = 1\npolicy = \"reject\"\n{}dominion = \"cpu\"\n",
        chat_model("smol", model.to_str().unwrap(), SMOL_SHA256)
    );
    let dir = local_dir(
        &upstream,
        &local_section(Some(&binary), cache_dir.path()),
        &models,
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    // A long stream holds the dominion's only slot until it ends (thousands of tokens:
    // far longer than the requests below take).
    let held = hold_the_slot(&gw, "smol").await;
    let (_, status) = gw.get("/admin/status").await;
    let cpu = status["dominions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "cpu")
        .cloned()
        .unwrap();
    assert_eq!(cpu["in_flight"], 1, "{status}");
    // Bound to a dominion, the model has no queue of its own.
    assert!(
        local_entry(&gw, "smol").await["queue"].is_null(),
        "{status}"
    );
    let (code, body) = ask(&gw, "smol").await;
    assert_eq!(
        (code, body["error"]["code"].clone()),
        (429, json!("queue_rejected")),
        "{body}"
    );
    drop(held);
    gw.kill().await;
}

/// The `local_models` entry of `model` in `/admin/status`.
async fn local_entry(gw: &Gateway, model: &str) -> Value {
    let (code, status) = gw.get("/admin/status").await;
    assert_eq!(code, 200, "{status}");
    status["local_models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == model)
        .cloned()
        .unwrap_or_else(|| panic!("no local model {model}: {status}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_model_without_a_dominion_queues_past_its_slot_then_answers() {
    let Some((binary, model)) =
        real_parts("a_local_model_without_a_dominion_queues_past_its_slot_then_answers")
    else {
        return;
    };
    // `parallel = 1`, no dominion: the model's own queue, 1 slot and 100 waiting.
    let (_upstream, _cache_dir, dir) = smol_dir(&binary, &model).await;
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let queue = local_entry(&gw, "smol").await["queue"].clone();
    assert_eq!(
        (
            &queue["max_concurrency"],
            &queue["max_queue"],
            &queue["in_flight"],
            &queue["waiting"]
        ),
        (&json!(1), &json!(100), &json!(0), &json!(0)),
        "{queue}"
    );

    // A long stream holds the only slot until it ends or its client goes away
    // (thousands of tokens: far longer than queueing the requests below takes).
    let held = hold_the_slot(&gw, "smol").await;
    assert_eq!(local_entry(&gw, "smol").await["queue"]["in_flight"], 1);

    let short = json!({
        "model": "smol",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 4,
        "temperature": 0,
    });
    let waiters =
        futures::future::join_all((0..100).map(|_| gw.post("/v1/chat/completions", &short)));
    let overflow = async {
        // Every one of the 100 waits in the gateway's queue (none reached the child).
        let queued = eventually_async(|| async {
            let q = local_entry(&gw, "smol").await["queue"].clone();
            q["waiting"] == 100 && q["in_flight"] == 1
        })
        .await;
        assert!(queued, "{}", local_entry(&gw, "smol").await["queue"]);
        // One more is refused with the documented error, at once.
        let (code, body) = gw.post("/v1/chat/completions", &short).await;
        assert_eq!(
            (code, body["error"]["code"].clone()),
            (503, json!("queue_full")),
            "{body}"
        );
        assert_eq!(local_entry(&gw, "smol").await["queue"]["waiting"], 100);
        // The holder goes away: its slot passes down the queue.
        drop(held);
    };
    let (answers, ()) = tokio::time::timeout(Duration::from_secs(600), async {
        tokio::join!(waiters, overflow)
    })
    .await
    .expect("the queued requests were not all answered");
    assert_eq!(answers.len(), 100);
    for (status, body) in &answers {
        assert_answer(*status, body, "smol");
    }
    let queue = local_entry(&gw, "smol").await["queue"].clone();
    assert_eq!(
        (&queue["in_flight"], &queue["waiting"]),
        (&json!(0), &json!(0)),
        "{queue}"
    );
    gw.kill().await;
}

/// A `.tar.gz` of `files` (relative path, bytes, mode) made with the system `tar`.
fn tar_gz(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    let src = tempfile::tempdir().unwrap();
    for (rel, bytes, mode) in files {
        let path = src.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("a.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(src.path())
        .arg(".")
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(&archive).unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tar_gz_llama_server_is_verified_unpacked_made_executable_and_reused() {
    use std::os::unix::fs::PermissionsExt;
    let Some((binary, model)) =
        real_parts("a_tar_gz_llama_server_is_verified_unpacked_made_executable_and_reused")
    else {
        return;
    };
    let upstream = Upstream::start().await;
    let binary_bytes = std::fs::read(&binary).unwrap();
    // Laid out like a release archive: nested, beside other files, and not executable in
    // the archive (the install makes it so).
    let archive = tar_gz(&[
        ("llama-b0000/bin/llama-server", &binary_bytes, 0o644),
        ("llama-b0000/bin/llama-cli", b"#!/bin/sh\nexit 1\n", 0o755),
        ("llama-b0000/LICENSE", b"MIT\n", 0o644),
    ]);
    let archive_sha = sha_hex(&archive);
    let files = FileServer::start(vec![("llama-b0000-bin-linux.tar.gz", archive)]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let local = format!(
        "cache_dir = \"{}\"\nllama_server_url = \"{}/llama-b0000-bin-linux.tar.gz\"\nllama_server_sha256 = \"{archive_sha}\"\n",
        cache_dir.path().display(),
        files.url
    );
    let dir = local_dir(
        &upstream,
        &local,
        &chat_model("smol", model.to_str().unwrap(), SMOL_SHA256),
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let logs = gw.logs();
    assert!(logs.contains("installed llama-server"), "{logs}");
    let llama_dir = cache_dir.path().join("llama.cpp");
    let installed = llama_dir.join("llama-server");
    // Only the binary is left: no download, part file or unpack scratch directory.
    assert_eq!(entries(&llama_dir), vec!["llama-server"]);
    assert!(std::fs::read(&installed).unwrap() == binary_bytes);
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "not executable: {mode:o}");
    // The gateway runs the installed binary.
    let (_, status) = gw.get("/admin/status").await;
    let pid = status["local_models"][0]["pid"].as_u64().unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, installed, "{status}");
    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");
    gw.kill().await;

    // The next boot reuses the install: the mirror is gone and nothing is downloaded.
    drop(files);
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let logs = gw.logs();
    assert!(!logs.contains("installed llama-server"), "{logs}");
    assert!(!logs.contains("download started"), "{logs}");
    assert_eq!(entries(&llama_dir), vec!["llama-server"]);
    let (status, body) = ask(&gw, "smol").await;
    assert_answer(status, &body, "smol");
    gw.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tar_gz_llama_server_with_the_wrong_digest_or_no_binary_leaves_nothing() {
    let upstream = Upstream::start().await;
    let script = b"#!/bin/sh\necho fake llama-server\n";
    let good = tar_gz(&[("bin/llama-server", script, 0o755)]);
    let good_sha = sha_hex(&good);
    let empty = tar_gz(&[("bin/llama-cli", script, 0o755)]);
    let empty_sha = sha_hex(&empty);
    let files = FileServer::start(vec![("good.tar.gz", good), ("empty.tgz", empty)]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let fake_model = cache_dir.path().join("fake.gguf");
    std::fs::write(&fake_model, b"never read").unwrap();
    let llama_dir = cache_dir.path().join("llama.cpp");
    let boot = |file: &str, sha: &str| {
        local_dir(
            &upstream,
            &format!(
                "cache_dir = \"{}\"\nllama_server_url = \"{}/{file}\"\nllama_server_sha256 = \"{sha}\"\n",
                cache_dir.path().display(),
                files.url
            ),
            &chat_model("l", fake_model.to_str().unwrap(), &"0".repeat(64)),
        )
    };

    // The archive's digest is not the pinned one: refused before unpacking.
    let wrong = "e".repeat(64);
    let err = boot_failure(&boot("good.tar.gz", &wrong), "main").await;
    assert!(
        err.contains("sha256 mismatch") && err.contains(&wrong) && err.contains(&good_sha),
        "{err}"
    );
    assert!(err.contains("llama-server"), "{err}");
    assert_eq!(entries(&llama_dir), Vec::<String>::new());

    // A verified archive without a llama-server: refused, nothing left either.
    let err = boot_failure(&boot("empty.tgz", &empty_sha), "main").await;
    assert!(err.contains("the archive holds no llama-server"), "{err}");
    assert_eq!(entries(&llama_dir), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tar_gz_whose_llama_server_is_a_symlink_touches_nothing_outside() {
    use std::os::unix::fs::PermissionsExt;
    let upstream = Upstream::start().await;
    // Files outside the cache that an archive's symlinks point at.
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"not a binary").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = outside.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("llama-server"), b"someone else's").unwrap();
    let archives: Vec<(&str, Vec<u8>)> = [
        ("file-link.tar.gz", "bin/llama-server", &victim),
        ("dir-link.tar.gz", "bin", &elsewhere),
    ]
    .into_iter()
    .map(|(name, link, target)| {
        let src = tempfile::tempdir().unwrap();
        let path = src.path().join("pkg").join(link);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &path).unwrap();
        let out = tempfile::tempdir().unwrap();
        let archive = out.path().join(name);
        let status = std::process::Command::new("tar")
            .arg("czf")
            .arg(&archive)
            .arg("-C")
            .arg(src.path())
            .arg("pkg")
            .status()
            .unwrap();
        assert!(status.success());
        (name, std::fs::read(&archive).unwrap())
    })
    .collect();
    let shas: HashMap<&str, String> = archives.iter().map(|(n, b)| (*n, sha_hex(b))).collect();
    let files = FileServer::start(archives).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let fake_model = cache_dir.path().join("fake.gguf");
    std::fs::write(&fake_model, b"never read").unwrap();
    let llama_dir = cache_dir.path().join("llama.cpp");
    for name in ["file-link.tar.gz", "dir-link.tar.gz"] {
        let dir = local_dir(
            &upstream,
            &format!(
                "cache_dir = \"{}\"\nllama_server_url = \"{}/{name}\"\nllama_server_sha256 = \"{}\"\n",
                cache_dir.path().display(),
                files.url,
                shas[name]
            ),
            &chat_model("l", fake_model.to_str().unwrap(), &"0".repeat(64)),
        );
        let err = boot_failure(&dir, "main").await;
        assert!(
            err.contains("the archive holds no llama-server"),
            "{name}: {err}"
        );
        assert_eq!(entries(&llama_dir), Vec::<String>::new(), "{name}");
    }
    // Neither the linked file's mode nor the linked directory's content changed.
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert_eq!(
        std::fs::read(elsewhere.join("llama-server")).unwrap(),
        b"someone else's"
    );
}

/// Starts a long stream (1,900 tokens, `ignore_eos`) on `model` that holds its one slot
/// until it ends or the returned response is dropped; asserts it was admitted.
async fn hold_the_slot(gw: &Gateway, model: &str) -> reqwest::Response {
    let long = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Tell a very long story."}],
        "max_tokens": 1900,
        "ignore_eos": true,
        "stream": true,
    });
    let held = gw.send("/v1/chat/completions", &long).await;
    assert_eq!(held.status(), 200);
    held
}

/// A scripted upstream, a fresh cache directory and a configuration with the one local
/// chat model `smol` (SmolLM2, one thread, one slot, no dominion) on the real binary; keep
/// all three alive for the test's length.
async fn smol_dir(
    binary: &std::path::Path,
    model: &std::path::Path,
) -> (Upstream, tempfile::TempDir, ConfigDir) {
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = local_dir(
        &upstream,
        &local_section(Some(binary), cache_dir.path()),
        &chat_model("smol", model.to_str().unwrap(), SMOL_SHA256),
    );
    (upstream, cache_dir, dir)
}

// ---- the profile switch is transactional: a stand-in llama-server, no model needed ----

/// A stand-in `llama-server` (`tests/stand-in-llama-server.py`, Python, standard library
/// only; the in-process span tests start it too): it reads `--port`,
/// `--api-key-file` and `--alias` as the gateway passes them, answers `/health`, `/props`
/// (a template with native tool syntax) and `/v1/chat/completions` (behind the bearer; a
/// last message `wait:PATH` is answered once PATH exists, a last message `tools?` with
/// the names of the `tools` it received and its `tool_choice`, as JSON text), and, when
/// its alias starts
/// with `broken`, prints one stderr line and exits 1 before listening, as a model that
/// cannot load does.
const STAND_IN: &str = include_str!("../stand-in-llama-server.py");

/// Writes the stand-in as an executable file in `dir`.
fn stand_in(dir: &ConfigDir) -> std::path::PathBuf {
    let path = dir.write("stand-in-llama-server", STAND_IN);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

fn stand_in_model(name: &str, source: &Path, dominion: &str) -> String {
    format!(
        "\n[[local_model]]\nname = \"{name}\"\ndescription = \"a stand-in\"\nsource = \"{}\"\ncontext = 512\nthreads = 1\ndominion = \"{dominion}\"\nvram_gb = 1\n",
        source.display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_switch_whose_new_child_fails_leaves_the_old_profile_exactly_as_it_was() {
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = ConfigDir::new();
    let binary = stand_in(&dir);
    let gguf = dir.write("model.gguf", "not read by the stand-in\n");
    // Profile `main`: model `one` in dominion `gpu` (2 slots). Profile `next`: the same
    // dominion with 5 slots, then `two` (starts) and `broken-three` (exits at start):
    // the switch fails half-way through starting the new children.
    dir.write(
        "gateway.toml",
        &format!(
            "{}\n[local]\n{}\n[[dominion]]\nid = \"gpu\"\nkind = \"local\"\nmax_concurrency = 2\nvram_gb = 8\n{}",
            standard_boot(&upstream.url),
            local_section(Some(&binary), cache_dir.path()),
            stand_in_model("one", &gguf, "gpu"),
        ),
    );
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\"]\nmodels = [\"one\", \"fast-draft\"]\n",
    );
    dir.write(
        "profiles/next.toml",
        &format!(
            "include = [\"../gateway.toml\"]\nmodels = [\"two\", \"broken-three\"]\n[[dominion]]\nid = \"gpu\"\nkind = \"local\"\nmax_concurrency = 5\nvram_gb = 8\n{}{}",
            stand_in_model("two", &gguf, "gpu"),
            stand_in_model("broken-three", &gguf, "gpu"),
        ),
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let (status, body) = gw
        .post(
            "/v1/chat/completions",
            &json!({"model": "one", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, before) = gw.get("/admin/status").await;
    assert_eq!(before["dominions"][0]["max_concurrency"], 2, "{before}");
    let children = servers(gw.pid(), Some("one"));
    assert_eq!(children.len(), 1);

    let message = failed_switch(&gw, "next").await;
    assert!(
        message.contains("local model broken-three") && message.contains("cannot be loaded"),
        "{message}"
    );

    // Exactly as it was: the same status (profile, models, the dominion's limits and
    // queue, the child's port, pid, liveness and respawns), the same child process, and
    // the same answer from it.
    let (_, after) = gw.get("/admin/status").await;
    assert_eq!(after, before);
    assert_eq!(servers(gw.pid(), Some("one")), children);
    let (status, body) = gw
        .post(
            "/v1/chat/completions",
            &json!({"model": "one", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], answer);
    // The child the failed switch had started is gone.
    assert!(servers(gw.pid(), Some("two")).is_empty());

    // The dominion still admits 2 at once (the failed profile's 5 never applied): with
    // two requests holding the slots, a third one waits in the queue.
    let gw = Arc::new(gw);
    let gate = dir.path().join("gate");
    let ask_one = |text: String| {
        let gw = gw.clone();
        tokio::spawn(async move {
            gw.post(
                "/v1/chat/completions",
                &json!({"model": "one", "messages": [{"role": "user", "content": text}]}),
            )
            .await
            .0
        })
    };
    let holding = [
        ask_one(format!("wait:{}", gate.display())),
        ask_one(format!("wait:{}", gate.display())),
    ];
    let pool =
        |gw: Arc<Gateway>| async move { gw.get("/admin/status").await.1["dominions"][0].clone() };
    assert!(eventually_async(|| async { pool(gw.clone()).await["in_flight"] == 2 }).await);
    let third = ask_one("hi".into());
    assert!(
        eventually_async(|| async { pool(gw.clone()).await["waiting"] == 1 }).await,
        "the third request was not queued behind the two held slots"
    );
    assert!(!third.is_finished());
    std::fs::write(&gate, "open").unwrap();
    for request in holding.into_iter().chain([third]) {
        assert_eq!(request.await.unwrap(), 200);
    }
}

// ---- tool_choice reaches a local child translated: a stand-in llama-server ----

#[tokio::test(flavor = "multi_thread")]
async fn a_local_child_gets_only_the_named_tool_and_required() {
    let upstream = Upstream::start().await;
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = ConfigDir::new();
    let binary = stand_in(&dir);
    let gguf = dir.write("model.gguf", "not read by the stand-in\n");
    let models = format!(
        "[[local_model]]\nname = \"one\"\ndescription = \"a stand-in\"\nsource = \"{}\"\ncontext = 512\nthreads = 1\n",
        gguf.display()
    );
    let local = local_dir(
        &upstream,
        &local_section(Some(&binary), cache_dir.path()),
        &models,
    );
    let gw = Gateway::start(&local.boot(), "main", &base_env()).await;
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    ]);
    // What the child received, as the stand-in reports it.
    let seen = |choice: Value| {
        let gw = &gw;
        let request = json!({
            "model": "one",
            "messages": [{"role": "user", "content": "tools?"}],
            "tools": tools.clone(),
            "tool_choice": choice,
        });
        async move {
            let (status, body) = gw.post("/v1/chat/completions", &request).await;
            assert_eq!(status, 200, "{body}");
            let content = body["choices"][0]["message"]["content"].as_str().unwrap();
            serde_json::from_str::<Value>(content).unwrap()
        }
    };
    // The object form: only the named tool, and "required".
    assert_eq!(
        seen(json!({"type": "function", "function": {"name": "get_time"}})).await,
        json!({"tools": ["get_time"], "tool_choice": "required"})
    );
    // The modes (and null) go to the child as they came, with every tool.
    for mode in [json!("auto"), json!("none"), json!("required"), Value::Null] {
        assert_eq!(
            seen(mode.clone()).await,
            json!({"tools": ["get_weather", "get_time"], "tool_choice": mode})
        );
    }
    // A named tool the request does not offer never reaches the child.
    let (status, body) = gw
        .post(
            "/v1/chat/completions",
            &json!({
                "model": "one",
                "messages": [{"role": "user", "content": "tools?"}],
                "tools": tools,
                "tool_choice": {"type": "function", "function": {"name": "get_stock"}},
            }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tool_choice") && message.contains("`get_stock`"),
        "{message}"
    );
}
