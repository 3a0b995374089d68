//! Benchmarks for BENCHMARKS.md:
//!
//!     cargo build --release -p promptforge-mcp-server --examples --bins
//!     target/release/examples/bench target/release/promptforge-mcp-server
//!
//! Boot with a 1,000-prompt catalog, a `list_prompts` page, save-to-visible reload latency,
//! a model-free `run_prompt` round trip over stdio and HTTP at concurrency 1 and 16, RSS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use promptforge_mcp_server::config::Config;
use promptforge_mcp_server::serve::{Transport, boot};
use promptforge_mcp_server::tools;
use promptforge_mcp_server::watch::Watcher;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

const KEY: &str = "bench-key";

fn prompt(name: &str, description: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\npromptforge: 1\n---\n\n# T\n\n```lua\nreturn args\n```\n"
    )
}

fn fixture(dir: &Path, prompts: usize, port: u16, watch: bool) -> PathBuf {
    let p = dir.join("prompts");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(
        p.join("echo.md"),
        prompt("echo", "Return the input unchanged"),
    )
    .unwrap();
    for i in 1..prompts {
        std::fs::write(
            p.join(format!("p{i:04}.md")),
            prompt(
                &format!("p{i:04}"),
                &format!("Summarise topic number {i} into a short brief"),
            ),
        )
        .unwrap();
    }
    let path = dir.join("prompts.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nbind = \"127.0.0.1:{port}\"\napi_key = \"{KEY}\"\nmax_concurrent_runs = 32\nwatch = {watch}\nwatch_debounce = \"100ms\"\n\n[gateway]\nurl = \"http://127.0.0.1:9\"\napi_key = \"k\"\n"
        ),
    )
    .unwrap();
    path
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn report(what: &str, samples: &mut [Duration]) {
    let p50 = percentile(samples, 0.5);
    let p99 = percentile(samples, 0.99);
    println!("{what}: n={} p50={p50:?} p99={p99:?}", samples.len());
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

struct Stdio_ {
    child: tokio::process::Child,
    stdin: Mutex<tokio::process::ChildStdin>,
    waiters:
        Arc<std::sync::Mutex<std::collections::HashMap<u64, tokio::sync::oneshot::Sender<Value>>>>,
}

impl Stdio_ {
    async fn spawn(binary: &str, config: &Path) -> (Self, Duration) {
        let started = Instant::now();
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--stdio"])
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let waiters: Arc<
            std::sync::Mutex<std::collections::HashMap<u64, tokio::sync::oneshot::Sender<Value>>>,
        > = Arc::default();
        let this = Self {
            child,
            stdin: Mutex::new(stdin),
            waiters: Arc::clone(&waiters),
        };
        let init = this.request(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}));
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let v: Value = serde_json::from_str(&line).unwrap();
                if let Some(id) = v["id"].as_u64()
                    && let Some(tx) = waiters.lock().unwrap().remove(&id)
                {
                    let _ = tx.send(v);
                }
            }
        });
        std::mem::forget(reader);
        init.await;
        let boot = started.elapsed();
        this.notify("notifications/initialized").await;
        (this, boot)
    }

    async fn notify(&self, method: &str) {
        let line = format!("{}\n", json!({"jsonrpc": "2.0", "method": method}));
        self.stdin
            .lock()
            .await
            .write_all(line.as_bytes())
            .await
            .unwrap();
    }

    fn request(&self, id: u64, method: &str, params: Value) -> impl Future<Output = Value> + '_ {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiters.lock().unwrap().insert(id, tx);
        let line = format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        );
        async move {
            self.stdin
                .lock()
                .await
                .write_all(line.as_bytes())
                .await
                .unwrap();
            rx.await.unwrap()
        }
    }
}

fn run_echo() -> Value {
    json!({"name": "run_prompt", "arguments": {"prompt": "echo", "args": "x"}})
}

async fn stdio_round_trips(
    server: &Stdio_,
    concurrency: usize,
    total: usize,
    first_id: u64,
) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(total);
    let mut id = first_id;
    while samples.len() < total {
        let batch: Vec<_> = (0..concurrency)
            .map(|_| {
                id += 1;
                let started = Instant::now();
                let fut = server.request(id, "tools/call", run_echo());
                async move {
                    let reply = fut.await;
                    assert_eq!(
                        reply["result"]["structuredContent"]["status"], "completed",
                        "{reply}"
                    );
                    started.elapsed()
                }
            })
            .collect();
        samples.extend(futures_join(batch).await);
    }
    samples
}

async fn futures_join<F: Future<Output = Duration>>(futures: Vec<F>) -> Vec<Duration> {
    let mut out = Vec::new();
    let handles: Vec<_> = futures.into_iter().map(Box::pin).collect();
    // Poll all concurrently.
    let results = join_all(handles).await;
    out.extend(results);
    out
}

async fn join_all<F: Future + Unpin>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<F>> = futures.into_iter().map(Some).collect();
    let mut results: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                match std::pin::Pin::new(f).poll(cx) {
                    std::task::Poll::Ready(v) => {
                        results[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    results.into_iter().map(Option::unwrap).collect()
}

async fn http_call(client: &reqwest::Client, url: &str, session: &str, id: u64) -> Duration {
    let started = Instant::now();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": run_echo()});
    let text = client
        .post(url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("\\\"status\\\":\\\"completed\\\"") || text.contains("\"completed\""),
        "{text}"
    );
    started.elapsed()
}

async fn wait_index(shared: &promptforge_mcp_server::state::Shared) {
    while matches!(
        shared.current().index,
        promptforge_mcp_server::state::Index::Building
    ) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let binary = std::env::args()
        .nth(1)
        .expect("usage: bench <path to promptforge-mcp-server>");

    // 1. Boot with 1,000 prompts: in-process (config + catalog + model + index) and as a
    //    process (spawn -> initialize answered).
    let dir = tempfile::tempdir().unwrap();
    let config_path = fixture(dir.path(), 1000, 0, true);
    let mut boots = Vec::new();
    let mut ready = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let config = Config::load(&config_path).unwrap();
        let booted = boot(config, Transport::Stdio).await.unwrap();
        boots.push(started.elapsed());
        wait_index(&booted.shared).await;
        ready.push(started.elapsed());
    }
    report("boot in-process, 1,000 prompts (serving)", &mut boots);
    report(
        "boot in-process until the background retrieval index is ready, 1,000 prompts",
        &mut ready,
    );
    let mut spawns = Vec::new();
    for _ in 0..3 {
        let (server, took) = Stdio_::spawn(&binary, &config_path).await;
        spawns.push(took);
        drop(server);
    }
    report(
        "boot as a process until initialize answers, 1,000 prompts",
        &mut spawns,
    );

    // 2. A list_prompts page (100 of 1,000) in-process.
    let config = Config::load(&config_path).unwrap();
    let booted = boot(config.clone(), Transport::Stdio).await.unwrap();
    wait_index(&booted.shared).await;
    let mut pages = Vec::new();
    for i in 0..2000 {
        let cursor = json!({"cursor": ((i % 10) * 100).to_string()});
        let started = Instant::now();
        let result = tools::list_prompts(&booted.shared, cursor.as_object().cloned()).unwrap();
        pages.push(started.elapsed());
        assert!(result.structured_content.is_some());
    }
    report(
        "list_prompts page of 100 (in-process, incl. JSON)",
        &mut pages,
    );

    // 3. Save-to-visible reload latency (debounce 100 ms, 1,000-prompt catalog).
    let watcher = Watcher::start(config, Arc::clone(&booted.shared)).unwrap();
    let mut reloads = Vec::new();
    for i in 0..10 {
        let name = format!("fresh{i}");
        let started = Instant::now();
        std::fs::write(
            dir.path().join(format!("prompts/{name}.md")),
            prompt(&name, &format!("A brand new prompt number {i}")),
        )
        .unwrap();
        loop {
            if booted.shared.current().catalog.lookup(&name).is_some() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        reloads.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    report(
        "save-to-visible reload (watch_debounce 100ms, new prompt, index rebuilt)",
        &mut reloads,
    );
    watcher.stop();

    // 4. Model-free run_prompt round trips over stdio.
    let small = tempfile::tempdir().unwrap();
    let small_config = fixture(small.path(), 10, 0, false);
    let (server, _) = Stdio_::spawn(&binary, &small_config).await;
    let pid = server.child.id().unwrap();
    println!("RSS after boot (stdio, 10 prompts): {} KiB", rss_kib(pid));
    let _warm = stdio_round_trips(&server, 1, 200, 1_000).await;
    let mut c1 = stdio_round_trips(&server, 1, 2000, 10_000).await;
    report("run_prompt echo over stdio, concurrency 1", &mut c1);
    let mut c16 = stdio_round_trips(&server, 16, 2000, 100_000).await;
    report("run_prompt echo over stdio, concurrency 16", &mut c16);
    println!("RSS after 4,200 runs (stdio): {} KiB", rss_kib(pid));
    drop(server);

    // 5. The same over HTTP (legacy session, one session, plain reqwest).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let http_dir = tempfile::tempdir().unwrap();
    let http_config = fixture(http_dir.path(), 10, port, false);
    let mut child = tokio::process::Command::new(&binary)
        .arg("serve")
        .arg(&http_config)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = format!("{base}/mcp");
    let init = client
        .post(&url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}).to_string())
        .send()
        .await
        .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = init.text().await;
    client
        .post(&url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &session)
        .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .send()
        .await
        .unwrap();
    for id in 1..100 {
        http_call(&client, &url, &session, id).await;
    }
    let mut h1 = Vec::new();
    for id in 1000..3000 {
        h1.push(http_call(&client, &url, &session, id).await);
    }
    report("run_prompt echo over HTTP, concurrency 1", &mut h1);
    let mut h16 = Vec::new();
    let mut id = 10_000;
    while h16.len() < 2000 {
        let batch: Vec<_> = (0..16)
            .map(|_| {
                id += 1;
                Box::pin(http_call(&client, &url, &session, id))
            })
            .collect();
        h16.extend(join_all(batch).await);
    }
    report("run_prompt echo over HTTP, concurrency 16", &mut h16);
    println!(
        "RSS after 4,100 runs (HTTP): {} KiB",
        rss_kib(child.id().unwrap())
    );
    let _ = child.kill().await;
}
