//! The `promptforge-dev` binary against a scripted OpenAI-compatible gateway on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../promptforge-core/tests/support/mod.rs"]
mod support;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use support::{KEY, Reply, Upstream, calls, text};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_promptforge-dev");
/// The bound of every wait in these tests.
const WAIT: Duration = Duration::from_secs(60);

fn chat_catalog() -> serde_json::Value {
    json!({"object": "list", "data": [
        {"id": "smol-chat", "object": "model", "kind": "chat",
         "description": "A small friendly general-purpose chat model that follows instructions",
         "context": 2048, "thinking": "never"}
    ]})
}

async fn gateway(replies: Vec<Reply>) -> Upstream {
    let upstream = Upstream::start(replies).await;
    upstream.set_catalog(chat_catalog());
    upstream
}

fn frontmatter(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: A development runner test prompt\npromptforge: 1\n---\n\n"
    )
}

/// A model-free prompt: writes two store files, logs, returns its input with a marker.
fn echo_prompt(marker: &str) -> String {
    format!(
        "{}# Echo\n\n```lua\nstore.write(\"evidence.md\", \"evidence {marker}\")\nstore.write(\"notes/deep.txt\", \"deep\")\nlog(\"checkpoint\")\nreturn \"{marker}:\" .. args\n```\n",
        frontmatter("echo")
    )
}

/// A prompt that asks the model once.
fn model_prompt() -> String {
    format!(
        "{}# Ask\n\n```lua\nmodels.default(\"writer\", \"a small instruction-following chat model\")\n```\n\n## Main\n\nSay hello to {{{{ args }}}}.\n",
        frontmatter("ask")
    )
}

struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn command(
    dir: &Path,
    args: &[&str],
    url: Option<&str>,
    key: Option<&str>,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(args)
        .current_dir(dir)
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(url) = url {
        command.env("PROMPTFORGE_GATEWAY_URL", url);
    }
    if let Some(key) = key {
        command.env("PROMPTFORGE_GATEWAY_API_KEY", key);
    }
    command
}

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(dir: &Path, args: &[&str], url: Option<&str>, key: Option<&str>) -> Output {
    let output = tokio::time::timeout(WAIT, command(dir, args, url, key).output())
        .await
        .expect("the run finishes")
        .unwrap();
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn dev(dir: &Path, args: &[&str], upstream: &Upstream) -> Output {
    run(dir, args, Some(&upstream.url), Some(KEY)).await
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn run_ids(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("run id: "))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------- command line, environment

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_removed_flags_are_refused_with_usage() {
    let dir = Dir::new();
    dir.write("p.md", &echo_prompt("x"));
    for flag in ["--context", "--max-tokens", "--no-think", "--verbose"] {
        let out = run(
            dir.path(),
            &[flag, "p.md"],
            Some("http://127.0.0.1:9"),
            Some(KEY),
        )
        .await;
        assert_eq!(out.code, Some(2), "{flag}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("unknown flag `{flag}`")),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains(
            "usage: promptforge-dev [--watch] [--capture-raw] [--trace FILE] \
                 [--trace-html FILE] [--ui] <prompt.md> [input]"
        ));
        assert_eq!(out.stdout, "");
    }
    let out = run(dir.path(), &[], Some("http://127.0.0.1:9"), Some(KEY)).await;
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("missing the prompt file"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_gateway_variables_are_required_before_the_prompt_is_read() {
    let dir = Dir::new();
    // The prompt does not exist: the environment error must come first.
    for (url, key, missing) in [
        (None, Some(KEY), "PROMPTFORGE_GATEWAY_URL"),
        (
            Some("http://127.0.0.1:9"),
            None,
            "PROMPTFORGE_GATEWAY_API_KEY",
        ),
        (Some(""), Some(KEY), "PROMPTFORGE_GATEWAY_URL"),
        (
            Some("http://127.0.0.1:9"),
            Some("  "),
            "PROMPTFORGE_GATEWAY_API_KEY",
        ),
        (None, None, "PROMPTFORGE_GATEWAY_URL"),
    ] {
        let out = run(dir.path(), &["missing.md"], url, key).await;
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert!(
            out.stderr
                .starts_with(&format!("error: {missing} is not set")),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("start promptforge-gateway"),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains("missing.md"), "{}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delimiter_passes_an_input_that_starts_with_dashes() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write("p.md", &echo_prompt("m"));
    let out = dev(
        dir.path(),
        &["p.md", "--", "--this-is-input-not-a-flag"],
        &upstream,
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "m:--this-is-input-not-a-flag");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_without_promptforge_is_refused() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write("notes.md", "---\nname: notes\n---\n\n# Just notes\n");
    let out = dev(dir.path(), &["notes.md"], &upstream).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("dev run failed: notes.md is not a promptforge prompt"),
        "{}",
        out.stderr
    );
    assert!(!dir.path().join("notes.store").exists());
    let summary = out.stderr.lines().last().unwrap();
    assert!(
        summary.ends_with("0 model turns, tool calls: none, 0 files in the store"),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gateway_fails_at_the_catalog() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let dir = Dir::new();
    dir.write("p.md", &echo_prompt("x"));
    let out = run(dir.path(), &["p.md"], Some(&url), Some(KEY)).await;
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr
            .starts_with("error: cannot fetch the model catalog from the gateway:"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_never_printed() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write("p.md", &echo_prompt("x"));
    let wrong = "sekrit-wrong-key-4242";
    let out = run(dir.path(), &["p.md"], Some(&upstream.url), Some(wrong)).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error: cannot fetch the model catalog from the gateway:"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("sekrit") && !out.stdout.contains("sekrit"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the gateway refused PROMPTFORGE_GATEWAY_API_KEY"),
        "{}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------- a run

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_prints_its_id_first_records_on_stderr_and_the_result_alone_on_stdout() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write("p.md", &echo_prompt("ok"));
    let out = dev(dir.path(), &["p.md", "in"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "ok:in");
    let first = out.stderr.lines().next().unwrap();
    let id = first.strip_prefix("run id: dev-").expect(first);
    assert_eq!(id.len(), 32);
    assert!(
        id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{id}"
    );
    let tag = format!("[dev-{id}]");
    assert!(
        out.stderr.contains(&format!("{tag} echo: Run started")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("{tag} Echo: Lua: checkpoint")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("{tag} Echo: Store write: evidence.md"))
    );
    let summary = out.stderr.lines().last().unwrap();
    assert!(
        summary.starts_with(&format!("{tag} summary: ")),
        "{summary}"
    );
    assert!(
        summary.ends_with(" elapsed, 0 model turns, tool calls: none, 2 files in the store"),
        "{summary}"
    );
    // A second run gets a fresh id.
    let again = dev(dir.path(), &["p.md", "in"], &upstream).await;
    assert_ne!(run_ids(&again.stderr), run_ids(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_run_counts_turns_and_tool_calls_and_never_prints_the_key() {
    let upstream = gateway(vec![
        calls(&[("web_search", r#"{"query": "rust news"}"#)]),
        text("Hello, World!"),
    ])
    .await;
    let dir = Dir::new();
    dir.write(
        "p.md",
        &format!(
            "{}# Ask\n\n```lua\nmodels.default(\"writer\", \"a small instruction-following chat model\")\ntools.bind(\"search\", \"web search capability\")\ntools.always(\"search\")\n```\n\n## Main\n\nFind news, then greet {{{{ args }}}}.\n",
            frontmatter("ask")
        ),
    );
    let out = dev(dir.path(), &["p.md", "World"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "Hello, World!");
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "smol-chat");
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "web_search");
    assert_eq!(
        upstream.searches().len(),
        1,
        "web_search went through the gateway"
    );
    assert_eq!(upstream.searches()[0]["query"], "rust news");
    assert!(
        out.stderr.contains("Main: Tool call succeeded: web_search"),
        "{}",
        out.stderr
    );
    let summary = out.stderr.lines().last().unwrap();
    assert!(
        summary.contains(", 2 model turns, tool calls: web_search=1, 0 files in the store"),
        "{summary}"
    );
    assert!(!out.stderr.contains(KEY) && !out.stdout.contains(KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lua_error_leads_with_file_and_line_and_still_dumps_the_partial_store() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write(
        "briefer.md",
        &format!(
            "{}# Briefer\n\n```lua\nstore.write(\"partial.txt\", \"so far\")\n```\n\n## Step\n\n```lua\nlocal x = 1\nassert(false)\n```\n",
            frontmatter("briefer")
        ),
    );
    let out = dev(dir.path(), &["briefer.md"], &upstream).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("\ndev run failed: briefer.md:17: in section '## Step': assertion failed!\n"),
        "{}",
        out.stderr
    );
    let dumped = dir.path().join("briefer.store/partial.txt");
    assert_eq!(std::fs::read_to_string(dumped).unwrap(), "so far");
    assert!(
        out.stderr
            .lines()
            .last()
            .unwrap()
            .ends_with("1 file in the store")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_without_a_prompt_line_has_no_prefix() {
    // The script is empty: the chat call gets a 500 from the gateway.
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write("ask.md", &model_prompt());
    let out = dev(dir.path(), &["ask.md", "x"], &upstream).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("dev run failed: "))
        .expect(&out.stderr);
    assert!(!line.starts_with("dev run failed: ask.md:"), "{line}");
}

// ---------------------------------------------------------------------------- the dump

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dump_is_owner_only_and_reconciled_every_run() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    let writes = |files: &[(&str, &str)]| {
        let body: String = files
            .iter()
            .map(|(p, c)| format!("store.write(\"{p}\", \"{c}\")\n"))
            .collect();
        format!(
            "{}# Dump\n\n```lua\n{body}return \"done\"\n```\n",
            frontmatter("dump")
        )
    };
    dir.write(
        "p.md",
        &writes(&[("evidence.md", "one"), ("notes/deep.txt", "deep")]),
    );
    let out = dev(dir.path(), &["p.md"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let store = dir.path().join("p.store");
    assert_eq!(mode(&store), 0o700);
    assert_eq!(mode(&store.join("notes")), 0o700);
    assert_eq!(mode(&store.join("evidence.md")), 0o600);
    assert_eq!(mode(&store.join("notes/deep.txt")), 0o600);

    std::fs::create_dir(store.join(".trace")).unwrap();
    std::fs::write(store.join(".trace/turn-1-request.json"), "{}").unwrap();
    dir.write("p.md", &writes(&[("evidence.md", "two")]));
    let out = dev(dir.path(), &["p.md"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(store.join("evidence.md")).unwrap(),
        "two"
    );
    assert!(
        !store.join("notes").exists(),
        "stale files and emptied dirs are deleted"
    );
    assert!(
        store.join(".trace/turn-1-request.json").exists(),
        ".trace is kept"
    );
    assert!(
        out.stderr
            .contains("dump: p.store: 1 written, 0 unchanged, 1 deleted"),
        "{}",
        out.stderr
    );
    let names: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "no temporaries left: {names:?}");

    dir.write("p.md", &writes(&[]));
    dev(dir.path(), &["p.md"], &upstream).await;
    assert!(
        store.join(".trace").exists(),
        "an empty store keeps a remaining trace"
    );
    assert!(!store.join("evidence.md").exists());
    std::fs::remove_file(store.join(".trace/turn-1-request.json")).unwrap();
    let out = dev(dir.path(), &["p.md"], &upstream).await;
    assert!(
        !store.exists(),
        "empty store and no trace: the directory goes"
    );
    assert!(
        out.stderr
            .contains("dump: p.store removed (the store is empty)"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_links_are_refused_and_nothing_is_written_through_them() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.md"), "keep").unwrap();
    dir.write("p.md", &echo_prompt("x"));
    let store = dir.path().join("p.store");
    std::fs::create_dir(&store).unwrap();
    // A link at a target file and a link at an ancestor directory.
    symlink(outside.path().join("victim.md"), store.join("evidence.md")).unwrap();
    symlink(outside.path(), store.join("notes")).unwrap();
    let out = dev(dir.path(), &["p.md"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("dump: not written \"evidence.md\": refusing to follow the symbolic link at"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "dump: not written \"notes/deep.txt\": refusing to follow the symbolic link at"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim.md")).unwrap(),
        "keep"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);

    // A linked dump root is refused as a whole.
    std::fs::remove_dir_all(&store).unwrap();
    symlink(outside.path(), &store).unwrap();
    let out = dev(dir.path(), &["p.md"], &upstream).await;
    assert!(
        out.stderr
            .contains("dump: p.store not written: refusing to follow the symbolic link at"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_store_paths_are_skipped_and_the_rest_dumps() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    dir.write(
        "p.md",
        &format!(
            "{}# Paths\n\n```lua\nstore.write(\"a*b.txt\", \"x\")\nstore.write(\"q?.txt\", \"x\")\nstore.write(\"pipe|.txt\", \"x\")\nstore.write(\"COM\u{b9}.txt\", \"x\")\nstore.write(\"ok.txt\", \"fine\")\nreturn \"done\"\n```\n",
            frontmatter("paths")
        ),
    );
    let out = dev(dir.path(), &["p.md"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for path in ["a*b.txt", "q?.txt", "pipe|.txt", "COM\u{b9}.txt"] {
        assert!(
            out.stderr
                .contains(&format!("dump: skipped store path {path:?}: ")),
            "{path}: {}",
            out.stderr
        );
    }
    let names: Vec<_> = std::fs::read_dir(dir.path().join("p.store"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["ok.txt"]);
}

// ---------------------------------------------------------------------------- --capture-raw

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_raw_warns_and_writes_each_turn_verbatim() {
    let reply = json!({"id": "r1", "object": "chat.completion", "model": "smol-chat",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Hi there"}}]});
    let upstream = gateway(vec![Reply::Json(reply.clone())]).await;
    let dir = Dir::new();
    dir.write("my-prompt.md", &model_prompt());
    let out = dev(
        dir.path(),
        &["--capture-raw", "my-prompt.md", "you"],
        &upstream,
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "Hi there");
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "warning: --capture-raw persists verbatim prompts, tool arguments and results, and model output to my-prompt.store/.trace"
    );
    let trace = dir.path().join("my-prompt.store/.trace");
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(trace.join(name)).unwrap()).unwrap()
    };
    assert_eq!(read("turn-1-request.json"), upstream.requests()[0]);
    assert_eq!(read("turn-1-response.json"), reply);
    assert_eq!(mode(&trace), 0o700);
    assert_eq!(mode(&trace.join("turn-1-request.json")), 0o600);
    assert_eq!(std::fs::read_dir(&trace).unwrap().count(), 2);
    for name in ["turn-1-request.json", "turn-1-response.json"] {
        let raw = std::fs::read_to_string(trace.join(name)).unwrap();
        assert!(!raw.contains(KEY), "{name} holds the bearer key");
    }
    assert!(!out.stderr.contains("dropped"), "{}", out.stderr);

    // Off by default: no trace is written, and the kept one is left alone.
    let upstream = gateway(vec![text("Again")]).await;
    let out = dev(dir.path(), &["my-prompt.md", "you"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning: --capture-raw"));
    assert_eq!(read("turn-1-response.json"), reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_writes_refuse_a_planted_trace_link() {
    let upstream = gateway(vec![text("Hi")]).await;
    let dir = Dir::new();
    let outside = tempfile::tempdir().unwrap();
    dir.write("p.md", &model_prompt());
    std::fs::create_dir(dir.path().join("p.store")).unwrap();
    symlink(outside.path(), dir.path().join("p.store/.trace")).unwrap();
    let out = dev(dir.path(), &["--capture-raw", "p.md", "you"], &upstream).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("capture: cannot write .trace/turn-1-request.json: refusing to follow the symbolic link at"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------- watch, Ctrl-C

/// A spawned binary whose stdout and stderr lines are collected as they arrive.
struct Live {
    child: tokio::process::Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

fn collect(stream: impl AsyncRead + Unpin + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

impl Live {
    fn spawn(dir: &Path, args: &[&str], upstream: &Upstream) -> Self {
        let mut child = command(dir, args, Some(&upstream.url), Some(KEY))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Self {
            child,
            stdout,
            stderr,
        }
    }

    fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    fn stdout(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Waits (bounded) until `count` stderr lines satisfy `wanted`.
    async fn wait_stderr(&self, count: usize, wanted: impl Fn(&str) -> bool) {
        let done = tokio::time::timeout(WAIT, async {
            loop {
                if self.stderr().iter().filter(|l| wanted(l)).count() >= count {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "timed out; stderr so far:\n{}",
            self.stderr().join("\n")
        );
    }

    async fn wait_stdout(&self, line: &str) {
        let done = tokio::time::timeout(WAIT, async {
            while !self.stdout().iter().any(|l| l == line) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "timed out waiting for {line:?}; stdout {:?}; stderr:\n{}",
            self.stdout(),
            self.stderr().join("\n")
        );
    }

    /// Waits (bounded) until `upstream` has received at least `count` requests.
    async fn wait_requests(&self, upstream: &Upstream, count: usize) {
        let arrived = tokio::time::timeout(WAIT, async {
            while upstream.requests().len() < count {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(arrived.is_ok(), "{}", self.stderr().join("\n"));
    }

    /// Sends Ctrl-C and waits for the exit; returns the exit code, stderr (once its
    /// `summary:` line has arrived, bounded) and stdout.
    async fn interrupted(self) -> (Option<i32>, String, Vec<String>) {
        self.interrupt();
        let stderr = Arc::clone(&self.stderr);
        let stdout = Arc::clone(&self.stdout);
        let code = self.exit_code().await;
        // Give the collectors a moment to drain the closed pipes (bounded).
        for _ in 0..50 {
            if stderr
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("summary:"))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let stderr = stderr.lock().unwrap().join("\n");
        let stdout = stdout.lock().unwrap().clone();
        (code, stderr, stdout)
    }

    fn interrupt(&self) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn exit_code(mut self) -> Option<i32> {
        let status = tokio::time::timeout(WAIT, self.child.wait()).await;
        match status {
            Ok(status) => status.unwrap().code(),
            Err(_) => {
                let _ = self.child.kill().await;
                panic!(
                    "the child did not exit; stderr:\n{}",
                    self.stderr().join("\n")
                );
            }
        }
    }
}

const WATCHING: &str = "watching p.md for changes; press Ctrl-C to stop";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reruns_on_save_survives_a_broken_edit_and_exits_130_on_ctrl_c() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    let prompt = dir.write("p.md", &echo_prompt("v1"));
    let live = Live::spawn(dir.path(), &["--watch", "p.md", "in"], &upstream);
    live.wait_stdout("v1:in").await;
    live.wait_stderr(1, |l| l == WATCHING).await;

    // The catalog was fetched once: emptying it now changes nothing for reruns.
    upstream.set_catalog(json!({"object": "list", "data": []}));

    std::fs::write(&prompt, echo_prompt("v2")).unwrap();
    live.wait_stdout("v2:in").await;
    live.wait_stderr(2, |l| l == WATCHING).await;

    std::fs::write(&prompt, "---\nname: broken\n---\n\n# Nope\n").unwrap();
    live.wait_stderr(1, |l| {
        l.starts_with("dev run failed: p.md is not a promptforge prompt")
    })
    .await;
    live.wait_stderr(3, |l| l == WATCHING).await;

    std::fs::write(&prompt, echo_prompt("v3")).unwrap();
    live.wait_stdout("v3:in").await;
    live.wait_stderr(4, |l| l == WATCHING).await;

    let ids = run_ids(&live.stderr().join("\n"));
    assert_eq!(ids.len(), 4, "{ids:?}");
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "each rerun has a fresh id: {ids:?}");
    live.interrupt();
    assert_eq!(live.exit_code().await, Some(130));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_save_burst_is_one_rerun_and_dump_writes_never_retrigger() {
    let upstream = gateway(vec![]).await;
    let dir = Dir::new();
    let prompt = dir.write("p.md", &echo_prompt("v1"));
    let live = Live::spawn(dir.path(), &["--watch", "p.md"], &upstream);
    live.wait_stdout("v1:").await;
    live.wait_stderr(1, |l| l == WATCHING).await;

    // An editor's save: write a backup, write the new text to a temporary, rename it over
    // the file, touch it again - all within far less than the quiet period.
    std::fs::write(dir.path().join("p.md~"), echo_prompt("v1")).unwrap();
    let temporary = dir.path().join(".p.md.swp");
    std::fs::write(&temporary, echo_prompt("v2")).unwrap();
    std::fs::rename(&temporary, &prompt).unwrap();
    std::fs::write(&prompt, echo_prompt("v2")).unwrap();
    live.wait_stdout("v2:").await;
    live.wait_stderr(2, |l| l == WATCHING).await;

    // One more distinct save: had the burst (or the rerun's own dump writes into p.store)
    // triggered extra reruns, they would show up as extra run ids before this one.
    std::fs::write(&prompt, echo_prompt("v3")).unwrap();
    live.wait_stdout("v3:").await;
    live.wait_stderr(3, |l| l == WATCHING).await;
    let stdout = live.stdout();
    assert_eq!(stdout, vec!["v1:", "v2:", "v3:"], "{stdout:?}");
    assert_eq!(
        run_ids(&live.stderr().join("\n")).len(),
        3,
        "{}",
        live.stderr().join("\n")
    );
    assert!(dir.path().join("p.store/evidence.md").exists());
    live.interrupt();
    assert_eq!(live.exit_code().await, Some(130));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_a_running_prompt_dumps_it_and_exits_130() {
    let upstream = gateway(vec![Reply::Slow(
        Duration::from_secs(120),
        json!({"choices": [{"finish_reason": "stop",
                            "message": {"role": "assistant", "content": "late"}}]}),
    )])
    .await;
    let dir = Dir::new();
    dir.write(
        "p.md",
        &format!(
            "{}# Slow\n\n```lua\nmodels.default(\"writer\", \"a small instruction-following chat model\")\nstore.write(\"before.txt\", \"written before the model call\")\n```\n\n## Main\n\nTake your time.\n",
            frontmatter("slow")
        ),
    );
    let live = Live::spawn(dir.path(), &["p.md"], &upstream);
    live.wait_requests(&upstream, 1).await;
    let (code, stderr, stdout) = live.interrupted().await;
    assert_eq!(code, Some(130));
    assert!(stderr.contains("dev run failed: "), "{stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("p.store/before.txt")).unwrap(),
        "written before the model call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_fanout_waits_for_the_arms_and_exits_130() {
    let slow = || {
        Reply::Slow(
            Duration::from_secs(120),
            json!({"choices": [{"finish_reason": "stop",
                                "message": {"role": "assistant", "content": "late"}}]}),
        )
    };
    let upstream = gateway(vec![slow(), slow(), slow()]).await;
    let dir = Dir::new();
    dir.write(
        "p.md",
        &format!(
            "{}# Fan\n\n```lua\nmodels.default(\"writer\", \"a small instruction-following chat model\")\nstore.write(\"started.txt\", \"yes\")\n```\n\n## Gather\n\n```lua\nreturn fanout(\"## Arm\", {{\"a\", \"b\", \"c\"}})[1].text\n```\n\n## Arm\n\n---\n\nWrite about {{{{ item }}}}.\n",
            frontmatter("fan")
        ),
    );
    let live = Live::spawn(dir.path(), &["p.md"], &upstream);
    live.wait_requests(&upstream, 3).await;
    let (code, stderr, _) = live.interrupted().await;
    assert_eq!(code, Some(130));
    assert!(stderr.contains("Fanout arm 1 started"), "{stderr}");
    assert!(stderr.contains("dev run failed: "), "{stderr}");
    assert!(stderr.contains("summary:"), "{stderr}");
    assert!(dir.path().join("p.store/started.txt").exists());
}

// ---------------------------------------------------------------- traces and the live viewer

/// A prompt with a local tool that changes the store, and a model turn that calls it.
fn traced_prompt(marker: &str) -> String {
    format!(
        "{}# Live\n\n```lua\nmodels.default(\"writer\", \"a small instruction-following chat model\")\nstore.write(\"notes.md\", \"draft {marker}\\n\")\n```\n\n## Main\n\n```lua\ntools.add_local(\"lookup\", \"Look up a fact by key\", {{key = {{\"string\", \"the key\"}}}}, function(a)\n  store.str_replace(\"notes.md\", \"draft\", \"final\")\n  return \"fact \" .. a.key\nend)\n```\n\nTell me about {{{{ args }}}}.\n",
        frontmatter("live")
    )
}

#[track_caller]
fn assert_valid_trace(document: &serde_json::Value) {
    let errors = promptforge_test_support::schema_errors(promptforge_core::trace::SCHEMA, document);
    assert!(errors.is_empty(), "invalid trace:\n{}", errors.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_flags_write_a_valid_trace_and_viewer() {
    let upstream = gateway(vec![
        calls(&[("lookup", r#"{"key":"rust"}"#)]),
        text("done v1"),
    ])
    .await;
    let dir = Dir::new();
    dir.write("p.md", &traced_prompt("v1"));
    let out = dev(
        dir.path(),
        &["--trace", "t.json", "--trace-html=t.html", "p.md", "in"],
        &upstream,
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "done v1");
    let document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("t.json")).unwrap()).unwrap();
    assert_valid_trace(&document);
    assert_eq!(document["run"]["status"], "ok");
    let spans = document["spans"].as_array().unwrap();
    let tool = spans.iter().find(|s| s["kind"] == "tool_call").unwrap();
    assert_eq!(tool["attrs"]["source"], "local");
    assert_eq!(tool["attrs"]["result"], "fact rust");
    // The handler's store change nests under its tool call.
    let change = spans
        .iter()
        .find(|s| s["kind"] == "store" && s["attrs"]["op"] == "str_replace")
        .unwrap();
    assert_eq!(change["parent"], tool["id"]);
    let html = std::fs::read_to_string(dir.path().join("t.html")).unwrap();
    assert!(html.contains(document["trace_id"].as_str().unwrap()));
    // A trace target in a missing directory is a usage error before anything runs.
    let out = dev(
        dir.path(),
        &["--trace", "no/such/t.json", "p.md"],
        &upstream,
    )
    .await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("error: --trace no/such/t.json"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_ui_streams_each_run_live_to_a_browser_and_compares_two_runs() {
    let slow_reply = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "done v2"}}]});
    let upstream = gateway(vec![
        calls(&[("lookup", r#"{"key":"rust"}"#)]),
        text("done v1"),
        calls(&[("lookup", r#"{"key":"lua"}"#)]),
        Reply::Slow(Duration::from_secs(4), slow_reply),
    ])
    .await;
    let dir = Dir::new();
    let prompt = dir.write("p.md", &traced_prompt("v1"));
    let live = Live::spawn(dir.path(), &["--watch", "--ui", "p.md", "in"], &upstream);
    live.wait_stderr(1, |l| l.starts_with("ui: http://127.0.0.1:"))
        .await;
    live.wait_stdout("done v1").await;
    let url = live
        .stderr()
        .iter()
        .find_map(|l| {
            l.strip_prefix("ui: ")
                .map(|rest| rest.split(' ').next().unwrap().to_owned())
        })
        .unwrap();
    assert!(
        url.ends_with('/') && url.len() > "http://127.0.0.1:1/".len() + 32,
        "{url}"
    );

    let browser = promptforge_test_support::browser::Browser::locate().unwrap();
    let shots = promptforge_test_support::browser::artifacts_dir();
    std::fs::create_dir_all(&shots).unwrap();
    let signal = dir.path().join("page-ready");
    let steps = json!([
        {"goto": url},
        {"wait": "body[data-ready='1']", "state": "attached"},
        {"wait": "#tree .row[data-kind='tool_call']", "state": "attached"},
        {"texts": "#tree .row .name", "as": "names"},
        {"click": "#tree .row[data-kind='tool_call'] .name"},
        {"text": "#details pre.args", "as": "arguments"},
        {"screenshot": shots.join("viewer-live-trace.png").to_str().unwrap(), "clip": {"x": 0, "y": 0, "width": 1400, "height": 760}},
        {"click": "nav button[data-tab='store']"},
        {"click": "#store-steps .row[data-step='1'] .name"},
        {"texts": "#store-view .diff .del", "as": "removed"},
        {"texts": "#store-view .diff .add", "as": "added"},
        {"click": "nav button[data-tab='trace']"},
        {"signal": signal.to_str().unwrap()},
        // The save starts run 2: the page follows it while its model turn is still open.
        {"wait": "#status.running", "state": "attached"},
        {"wait": "#tree .row[data-kind='model_turn']", "state": "attached"},
        {"texts": "#tree .row .dur", "as": "live_durations"},
        {"wait": "#status.ok", "state": "attached"},
        {"click": "nav button[data-tab='compare']"},
        {"wait": "#compare-summary"},
        {"text": "#compare-summary", "as": "compare"},
        {"texts": "#compare .cell.changed > div:first-child", "as": "changed"},
        {"screenshot": shots.join("viewer-live-compare.png").to_str().unwrap(), "clip": {"x": 0, "y": 0, "width": 1400, "height": 760}},
    ]);
    let save = async {
        tokio::time::timeout(WAIT, async {
            while !signal.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the page signals it is ready");
        std::fs::write(&prompt, traced_prompt("v2")).unwrap();
    };
    let (report, ()) = tokio::join!(browser.run(&steps), save);
    let report = report.unwrap();
    assert_eq!(
        report["errors"],
        json!([]),
        "{report}\n{}",
        live.stderr().join("\n")
    );
    let names = report["names"].as_array().unwrap();
    for section in ["# Live", "## Main", "lookup", "notes.md"] {
        assert!(
            names.contains(&json!(section)),
            "{section} not in {names:?}"
        );
    }
    assert!(
        report["arguments"]
            .as_str()
            .unwrap()
            .contains("\"key\": \"rust\""),
        "{report}"
    );
    assert_eq!(report["removed"], json!(["draft v1"]), "{report}");
    assert_eq!(report["added"], json!(["final v1"]), "{report}");
    // While run 2 waited on the model, its open span showed as running.
    assert!(
        report["live_durations"]
            .as_array()
            .unwrap()
            .contains(&json!("running")),
        "{report}"
    );
    assert!(
        report["compare"]
            .as_str()
            .unwrap()
            .contains("with different results"),
        "{report}"
    );
    let changed = report["changed"].as_array().unwrap();
    assert!(changed.contains(&json!("model smol-chat")), "{report}");
    live.wait_stdout("done v2").await;
    let (code, _, _) = live.interrupted().await;
    assert_eq!(code, Some(130));
}
