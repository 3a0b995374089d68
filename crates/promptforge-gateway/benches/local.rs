//! Local inference benchmark (one run): boot-to-ready time of a gateway with one
//! SmolLM2-135M `llama-server` child, and the gateway's overhead on that local model
//! against the same `llama-server` called directly (tokens/s and added latency).
//!
//! Needs the built `llama-server` and the SmolLM2 GGUF (`scripts/build-llama-server.sh`,
//! `scripts/fetch-smollm2.sh`); prints why and exits when either is absent.
//!
//! `cargo bench -p promptforge-gateway --bench local`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const KEY: &str = "bench-key";
const SMOL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const ROUNDS: usize = 8;
const SHORT_ROUNDS: usize = 20;

fn main() {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let binary = home.join(".promptforge/llama.cpp/llama-server");
    let model = home.join(".promptforge/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !binary.is_file() || !model.is_file() {
        println!(
            "local bench skipped: need {} and {} (scripts/build-llama-server.sh, scripts/fetch-smollm2.sh)",
            binary.display(),
            model.display()
        );
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(binary, model));
}

struct Gateway {
    child: tokio::process::Child,
    url: String,
    ready: Duration,
}

async fn boot(dir: &std::path::Path) -> Gateway {
    use tokio::io::AsyncBufReadExt;
    let boot = dir.join("gateway.toml");
    let started = Instant::now();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge-gateway"))
        .args(["serve", boot.to_str().unwrap(), "--profile", "main"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("gateway exited");
            if let Some(url) = line.strip_prefix("listening on ") {
                break url.to_owned();
            }
        }
    })
    .await
    .expect("gateway did not get ready");
    Gateway {
        child,
        url,
        ready: started.elapsed(),
    }
}

/// One chat request; returns (wall time, completion tokens).
async fn chat(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    model: &str,
    max_tokens: u32,
) -> (Duration, u64) {
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": true,
    });
    let started = Instant::now();
    let response = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let reply: Value = response.json().await.unwrap();
    let tokens = reply["usage"]["completion_tokens"].as_u64().unwrap_or(0);
    (started.elapsed(), tokens)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn run(binary: PathBuf, model: PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"{KEY}\"\n\n[local]\ncache_dir = \"{}\"\nllama_server = \"{}\"\n\n\
             [[local_model]]\nname = \"smol\"\ndescription = \"SmolLM2\"\nsource = \"{}\"\nsha256 = \"{SMOL_SHA256}\"\ncontext = 2048\nthreads = 1\nparallel = 1\n",
            dir.path().join("cache").display(),
            binary.display(),
            model.display()
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("profiles")).unwrap();
    std::fs::write(
        dir.path().join("profiles/main.toml"),
        "include = [\"../gateway.toml\"]\n",
    )
    .unwrap();

    // Boot to ready (includes hashing the 98 MB GGUF for its digest), three boots.
    let mut boots = Vec::new();
    for _ in 0..3 {
        let mut gw = boot(dir.path()).await;
        boots.push(gw.ready);
        let _ = gw.child.kill().await;
        let _ = gw.child.wait().await;
    }
    println!(
        "boot to ready (spawn -> listening, digest check + child /health 200): {:?}",
        boots
            .iter()
            .map(|d| format!("{:.0} ms", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
    );

    let gw = boot(dir.path()).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    // The child's port from the gateway's status; its bearer from its key file.
    let status: Value = client
        .get(format!("{}/admin/status", gw.url))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let port = status["local_models"][0]["port"]
        .as_u64()
        .expect("no local child");
    let key_file = dir.path().join(format!("cache/run/smol-{port}.key"));
    let direct_key = std::fs::read_to_string(&key_file).unwrap();
    let direct = format!("http://127.0.0.1:{port}");
    // Warm-up both paths.
    chat(&client, &gw.url, KEY, "smol", 8).await;
    chat(&client, &direct, &direct_key, "smol", 8).await;

    // Generation throughput: alternating requests of 64 tokens.
    let (mut gw_time, mut gw_tokens, mut d_time, mut d_tokens) =
        (Duration::ZERO, 0, Duration::ZERO, 0);
    for _ in 0..ROUNDS {
        let (t, n) = chat(&client, &gw.url, KEY, "smol", 64).await;
        gw_time += t;
        gw_tokens += n;
        let (t, n) = chat(&client, &direct, &direct_key, "smol", 64).await;
        d_time += t;
        d_tokens += n;
    }
    let gw_tps = gw_tokens as f64 / gw_time.as_secs_f64();
    let d_tps = d_tokens as f64 / d_time.as_secs_f64();
    println!(
        "64-token completions x{ROUNDS}: direct {d_tps:.1} tokens/s, through the gateway {gw_tps:.1} tokens/s (ratio {:.3})",
        gw_tps / d_tps
    );

    // Added latency: 1-token completions, alternating.
    let (mut gw_lat, mut d_lat) = (Vec::new(), Vec::new());
    for _ in 0..SHORT_ROUNDS {
        gw_lat.push(chat(&client, &gw.url, KEY, "smol", 1).await.0);
        d_lat.push(chat(&client, &direct, &direct_key, "smol", 1).await.0);
    }
    let (g, d) = (median(gw_lat), median(d_lat));
    println!(
        "1-token completions x{SHORT_ROUNDS}, median: direct {:.2} ms, through the gateway {:.2} ms (added {:.2} ms, ratio {:.3})",
        d.as_secs_f64() * 1000.0,
        g.as_secs_f64() * 1000.0,
        (g.as_secs_f64() - d.as_secs_f64()) * 1000.0,
        g.as_secs_f64() / d.as_secs_f64()
    );
    let mut child = gw.child;
    let _ = child.kill().await;
    let _ = child.wait().await;
}
