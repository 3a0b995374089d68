//! A real `promptforge-gateway serve` child with two local models (SmolLM2 for text,
//! Qwen2.5-Coder for tool calls) and web search pointed at a loopback stub, killed on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::ScenarioError;

/// The SmolLM2 GGUF's file name in the cache.
pub const SMOL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The SmolLM2 GGUF's SHA-256 (see `scripts/fetch-smollm2.sh`).
pub const SMOL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The model name the profile gives SmolLM2.
pub const MODEL_NAME: &str = "smollm2-135m";
/// The model description the profile gives SmolLM2; the text scenario prompts bind this text.
pub const MODEL_DESCRIPTION: &str = "a small general chat assistant model for short answers";

/// The Qwen2.5-Coder GGUF's file name in the cache (see `scripts/fetch-qwen-coder.sh`).
pub const TOOL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// The Qwen2.5-Coder GGUF's SHA-256.
pub const TOOL_SHA256: &str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";
/// The model name the profile gives Qwen2.5-Coder.
pub const TOOL_MODEL_NAME: &str = "qwen2.5-coder-0.5b";
/// The model description the profile gives Qwen2.5-Coder; the tool scenario prompts bind
/// this text.
pub const TOOL_MODEL_DESCRIPTION: &str =
    "a small coding model that calls tools to look things up before answering";

/// The tool model's context window: room for the tool guide, a few rounds of calls and
/// results, and the reply.
pub const TOOL_CONTEXT: u32 = 4096;

/// The loopback search provider the gateway's `[tools.web_search]` points at.
#[derive(Debug, Clone)]
pub struct SearchProvider {
    /// Its base URL (`http://127.0.0.1:<port>`).
    pub url: String,
    /// The subscription token the gateway must send.
    pub key: String,
}

/// How long the gateway may take to print its listening line (it provisions and starts
/// `llama-server` first).
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `/health` and `/v1/models` may take to answer once listening.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the guard waits after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(10);

/// Where the real parts live.
#[derive(Debug, Clone)]
pub struct Parts {
    /// The gateway binary.
    pub gateway: PathBuf,
    /// The `llama-server` binary.
    pub llama_server: PathBuf,
    /// The SmolLM2 GGUF.
    pub model: PathBuf,
    /// The Qwen2.5-Coder GGUF.
    pub tool_model: PathBuf,
    /// The chat template Qwen2.5-Coder is started with (the shipped
    /// `profiles/qwen2.5-coder.jinja`, see the crate README).
    pub tool_template: PathBuf,
}

/// The shipped chat template of the tool model: the repository's
/// `profiles/qwen2.5-coder.jinja`, which the quick-start profile uses too.
pub fn tool_template() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../profiles/qwen2.5-coder.jinja")
}

impl Parts {
    /// Finds the parts: `PROMPTFORGE_GATEWAY_BIN`, else `promptforge-gateway` beside the
    /// current executable; `PROMPTFORGE_LLAMA_SERVER`, else `~/.promptforge/llama.cpp/llama-server`;
    /// `PROMPTFORGE_SMOLLM2_GGUF`, else `~/.promptforge/models/<SMOL_FILE>`;
    /// `PROMPTFORGE_QWEN_CODER_GGUF`, else `~/.promptforge/models/<TOOL_FILE>`;
    /// `PROMPTFORGE_TOOL_TEMPLATE`, else [`tool_template`].
    pub fn locate() -> Result<Self, ScenarioError> {
        let cache =
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".promptforge");
        let gateway = match std::env::var_os("PROMPTFORGE_GATEWAY_BIN") {
            Some(path) => PathBuf::from(path),
            None => std::env::current_exe()
                .map_err(|e| {
                    ScenarioError::Setup(format!("cannot find the current executable: {e}"))
                })?
                .with_file_name("promptforge-gateway"),
        };
        let llama_server = std::env::var_os("PROMPTFORGE_LLAMA_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache.join("llama.cpp/llama-server"));
        let model = std::env::var_os("PROMPTFORGE_SMOLLM2_GGUF")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache.join("models").join(SMOL_FILE));
        let tool_model = std::env::var_os("PROMPTFORGE_QWEN_CODER_GGUF")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache.join("models").join(TOOL_FILE));
        let tool_template = std::env::var_os("PROMPTFORGE_TOOL_TEMPLATE")
            .map(PathBuf::from)
            .unwrap_or_else(tool_template);
        for (what, path, fix) in [
            (
                "promptforge-gateway",
                &gateway,
                "run `cargo build -p promptforge-gateway`",
            ),
            (
                "llama-server",
                &llama_server,
                "run scripts/build-llama-server.sh",
            ),
            ("SmolLM2 GGUF", &model, "run scripts/fetch-smollm2.sh"),
            (
                "Qwen2.5-Coder GGUF",
                &tool_model,
                "run scripts/fetch-qwen-coder.sh",
            ),
            (
                "tool model chat template",
                &tool_template,
                "restore profiles/qwen2.5-coder.jinja from git",
            ),
        ] {
            if !path.is_file() {
                return Err(ScenarioError::Setup(format!(
                    "no {what} at {} ({fix})",
                    path.display()
                )));
            }
        }
        Ok(Self {
            gateway,
            llama_server,
            model,
            tool_model,
            tool_template,
        })
    }
}

/// A running gateway. Dropping it sends SIGTERM, waits up to [`TERM_GRACE`], then SIGKILLs;
/// the gateway's own child guards stop `llama-server` when the gateway goes away.
#[derive(Debug)]
pub struct GatewayGuard {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The random bearer key.
    pub key: String,
    _dir: tempfile::TempDir,
}

/// Quotes a path as a TOML basic string.
fn toml_str(path: &Path) -> String {
    toml_text(&path.display().to_string())
}

/// Quotes text as a TOML basic string (JSON string escapes are valid TOML ones).
fn toml_text(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

impl GatewayGuard {
    /// Writes a temporary boot file and profile, starts `serve` on a free loopback port with a
    /// random bearer, and waits for `/health` and for `/v1/models` to list both models.
    /// `search` is the loopback search provider `[tools.web_search]` points at.
    pub async fn start(parts: &Parts, search: &SearchProvider) -> Result<Self, ScenarioError> {
        let setup =
            |what: &str, e: &dyn std::fmt::Display| ScenarioError::Setup(format!("{what}: {e}"));
        let dir = tempfile::tempdir().map_err(|e| setup("temporary directory", &e))?;
        let key = format!("pf-{:032x}", rand::rng().random::<u128>());
        let boot = format!(
            "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"${{PF_SCENARIO_KEY}}\"\n\n\
             [local]\ncache_dir = {cache}\nllama_server = {server}\nready_timeout = \"90s\"\n\n\
             [tools.web_search]\nprovider = \"brave\"\napi_key = \"${{PF_SCENARIO_SEARCH_KEY}}\"\n\
             base_url = {search_url}\n",
            cache = toml_str(&dir.path().join("cache")),
            server = toml_str(&parts.llama_server),
            search_url = toml_text(&search.url),
        );
        let profile = format!(
            "include = [\"../gateway.toml\"]\nmodels = [\"{MODEL_NAME}\", \"{TOOL_MODEL_NAME}\"]\n\n\
             [[local_model]]\nname = \"{MODEL_NAME}\"\ndescription = \"{MODEL_DESCRIPTION}\"\n\
             source = {source}\nsha256 = \"{SMOL_SHA256}\"\ncontext = 2048\nthreads = 1\nparallel = 1\n\n\
             [[local_model]]\nname = \"{TOOL_MODEL_NAME}\"\ndescription = \"{TOOL_MODEL_DESCRIPTION}\"\n\
             source = {tool_source}\nsha256 = \"{TOOL_SHA256}\"\nchat_template_file = {template}\n\
             context = {TOOL_CONTEXT}\nthreads = 1\nparallel = 1\n",
            source = toml_str(&parts.model),
            tool_source = toml_str(&parts.tool_model),
            template = toml_str(&parts.tool_template),
        );
        let boot_path = dir.path().join("gateway.toml");
        std::fs::write(&boot_path, boot).map_err(|e| setup("gateway.toml", &e))?;
        std::fs::create_dir_all(dir.path().join("profiles")).map_err(|e| setup("profiles", &e))?;
        std::fs::write(dir.path().join("profiles/scenarios.toml"), profile)
            .map_err(|e| setup("profiles/scenarios.toml", &e))?;

        let mut child = Command::new(&parts.gateway)
            .arg("serve")
            .arg(&boot_path)
            .args(["--profile", "scenarios"])
            .env_remove("PROMPTFORGE_GATEWAY_CONFIG")
            .env("PF_SCENARIO_KEY", &key)
            .env("PF_SCENARIO_SEARCH_KEY", &search.key)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| setup(&format!("cannot start {}", parts.gateway.display()), &e))?;
        let stdout = child.stdout.take();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(stdout) = stdout else { return };
            let mut sent = false;
            // Keep draining after the listening line so the gateway never blocks on stdout.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(url) = line.strip_prefix("listening on ") {
                    sent = tx.send(url.trim().to_owned()).is_ok();
                }
            }
        });
        let mut guard = Self {
            child,
            url: String::new(),
            key,
            _dir: dir,
        };
        let url = tokio::task::spawn_blocking(move || rx.recv_timeout(LISTEN_TIMEOUT))
            .await
            .map_err(|e| setup("waiting for the listening line", &e))?
            .map_err(|_| {
                ScenarioError::Setup(format!(
                    "the gateway printed no `listening on` line within {LISTEN_TIMEOUT:?} (see its stderr above)"
                ))
            })?;
        guard.url = url;
        guard.wait_ready().await?;
        Ok(guard)
    }

    async fn wait_ready(&self) -> Result<(), ScenarioError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ScenarioError::Setup(format!("http client: {e}")))?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            let health = http.get(format!("{}/health", self.url)).send().await;
            match health {
                Ok(r) if r.status().is_success() => {
                    let models = http
                        .get(format!("{}/v1/models", self.url))
                        .bearer_auth(&self.key)
                        .send()
                        .await;
                    match models {
                        Ok(r) if r.status().is_success() => {
                            let body: serde_json::Value = r.json().await.unwrap_or_default();
                            let ids: Vec<&str> = body["data"]
                                .as_array()
                                .map(|d| d.iter().filter_map(|m| m["id"].as_str()).collect())
                                .unwrap_or_default();
                            if [MODEL_NAME, TOOL_MODEL_NAME]
                                .iter()
                                .all(|m| ids.contains(m))
                            {
                                return Ok(());
                            }
                            last = format!(
                                "/v1/models lacks {MODEL_NAME} or {TOOL_MODEL_NAME}: {body}"
                            );
                        }
                        Ok(r) => last = format!("/v1/models answered {}", r.status()),
                        Err(e) => last = format!("/v1/models: {e}"),
                    }
                }
                Ok(r) => last = format!("/health answered {}", r.status()),
                Err(e) => last = format!("/health: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(ScenarioError::Setup(format!(
            "the gateway was not ready within {READY_TIMEOUT:?}: {last}"
        )))
    }
}

/// How long [`wait_gone`] waits for the gateway's descendants to exit after the guard drops.
pub const CHILDREN_GONE_TIMEOUT: Duration = Duration::from_secs(15);

/// The live (non-zombie) state of a process, from `/proc/<pid>/stat`: `(ppid, alive)`.
fn proc_stat(pid: u32) -> Option<(u32, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state != "Z" && state != "X"))
}

/// Every live descendant of `pid` (read from `/proc`).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some((pp, true)) = proc_stat(p) {
                parent.push((p, pp));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, pp) in &parent {
            if pp == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Waits until none of `pids` is alive (bounded by [`CHILDREN_GONE_TIMEOUT`]); returns the
/// ones still alive.
pub fn wait_gone(pids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + CHILDREN_GONE_TIMEOUT;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| proc_stat(p).is_some_and(|(_, alive)| alive))
            .collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl GatewayGuard {
    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for GatewayGuard {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + TERM_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
