//! Gateway overhead on loopback: added latency (p50, p99) and throughput of the gateway
//! against the same upstream called directly, at 64 concurrent connections, measured in
//! one run and reported as ratios; plus the gateway's RSS under that load.
//!
//! `cargo bench -p promptforge-gateway --bench overhead`
//!
//! Phases alternate (direct, gateway, direct, gateway, ...) so background load on the
//! machine affects both sides alike. Each phase is bounded in time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};

const CONCURRENCY: usize = 64;
const PHASE: Duration = Duration::from_secs(5);
const WARMUP: Duration = Duration::from_secs(1);
const ROUNDS: usize = 3;
const KEY: &str = "bench-key";

fn reply() -> Value {
    json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "up-bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "The capital of France is Paris."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}
    })
}

async fn upstream() -> String {
    let body = Arc::new(reply());
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(_req): axum::Json<Value>| {
            let body = body.clone();
            async move { axum::Json((*body).clone()) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

struct Gateway {
    child: tokio::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

async fn gateway(upstream: &str) -> Gateway {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("gateway.toml");
    std::fs::write(
        &boot,
        format!(
            "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"{KEY}\"\n\n[[endpoint]]\nid = \"up\"\nbase_url = \"{upstream}/v1\"\napi_key = \"upstream-key\"\n\n\
             [[model]]\nname = \"bench\"\ndescription = \"bench\"\ncontext = 8192\nupstream = \"up-bench\"\nendpoints = [\"up\"]\n"
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("profiles")).unwrap();
    std::fs::write(
        dir.path().join("profiles/main.toml"),
        "include = [\"../gateway.toml\"]\n",
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge-gateway"))
        .args(["serve", boot.to_str().unwrap(), "--profile", "main"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next_line().await.unwrap().expect("gateway exited");
        if let Some(url) = line.strip_prefix("listening on ") {
            break url.to_owned();
        }
    };
    Gateway {
        child,
        url,
        _dir: dir,
    }
}

/// Runs `CONCURRENCY` closed-loop clients against `url` for `duration`; returns sorted
/// latencies in microseconds and the number of completed requests.
async fn load(client: &reqwest::Client, url: &str, duration: Duration) -> (Vec<u64>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let body = json!({"model": "bench", "messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0.2});
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, url, stop, errors, body) = (
            client.clone(),
            url.to_owned(),
            stop.clone(),
            errors.clone(),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let start = Instant::now();
                let ok = match client.post(&url).bearer_auth(KEY).json(&body).send().await {
                    Ok(res) => res.status().is_success() && res.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if ok {
                    latencies.push(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX));
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            latencies
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "requests failed during the benchmark"
    );
    all.sort_unstable();
    let n = all.len() as u64;
    (all, n)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx] as f64 / 1000.0
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let upstream = upstream().await;
    let gw = gateway(&upstream).await;
    let pid = gw.child.id().unwrap();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONCURRENCY)
        .build()
        .unwrap();
    let direct_url = format!("{upstream}/v1/chat/completions");
    let gateway_url = format!("{}/v1/chat/completions", gw.url);
    let idle_rss = rss_kib(pid, "VmRSS:");

    load(&client, &direct_url, WARMUP).await;
    load(&client, &gateway_url, WARMUP).await;

    let mut direct = (Vec::new(), 0);
    let mut via = (Vec::new(), 0);
    let peak = Arc::new(AtomicU64::new(0));
    for _ in 0..ROUNDS {
        let (lat, n) = load(&client, &direct_url, PHASE).await;
        direct.0.extend(lat);
        direct.1 += n;
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (sampling, peak) = (sampling.clone(), peak.clone());
            tokio::spawn(async move {
                while sampling.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(pid, "VmRSS:"), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let (lat, n) = load(&client, &gateway_url, PHASE).await;
        sampling.store(false, Ordering::Relaxed);
        sampler.await.unwrap();
        via.0.extend(lat);
        via.1 += n;
    }
    direct.0.sort_unstable();
    via.0.sort_unstable();
    let secs = (PHASE * ROUNDS as u32).as_secs_f64();
    let (d50, d99, g50, g99) = (
        percentile(&direct.0, 0.5),
        percentile(&direct.0, 0.99),
        percentile(&via.0, 0.5),
        percentile(&via.0, 0.99),
    );
    let (drps, grps) = (direct.1 as f64 / secs, via.1 as f64 / secs);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "| path | requests | throughput (req/s) | p50 (ms) | p99 (ms) |"
    )
    .unwrap();
    writeln!(out, "| --- | --- | --- | --- | --- |").unwrap();
    writeln!(
        out,
        "| direct to upstream | {} | {drps:.0} | {d50:.2} | {d99:.2} |",
        direct.1
    )
    .unwrap();
    writeln!(
        out,
        "| through the gateway | {} | {grps:.0} | {g50:.2} | {g99:.2} |",
        via.1
    )
    .unwrap();
    writeln!(out).unwrap();
    writeln!(
        out,
        "- added latency: p50 +{:.2} ms, p99 +{:.2} ms",
        g50 - d50,
        g99 - d99
    )
    .unwrap();
    writeln!(
        out,
        "- latency ratio gateway/direct: p50 {:.2}x, p99 {:.2}x",
        g50 / d50,
        g99 / d99
    )
    .unwrap();
    writeln!(out, "- throughput ratio gateway/direct: {:.2}", grps / drps).unwrap();
    writeln!(
        out,
        "- gateway RSS: idle {:.1} MiB, peak under load {:.1} MiB (VmHWM {:.1} MiB)",
        idle_rss as f64 / 1024.0,
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        rss_kib(pid, "VmHWM:") as f64 / 1024.0
    )
    .unwrap();
}
