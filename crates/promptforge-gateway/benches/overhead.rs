//! Gateway overhead on loopback: added latency (p50, p99) and throughput of the gateway
//! against the same upstream called directly, at 64 concurrent connections, measured in
//! one run and reported as ratios; the gateway's RSS under that load; the admission
//! overhead of a dominion that never fills; and the fairness figure of a burst of 1,000
//! requests (990 from one client, then 10 from another) through a dominion of 8 slots.
//!
//! `cargo bench -p promptforge-gateway --bench overhead`
//!
//! The four paths run in 1 s slices, interleaved and rotated every round (12 rounds), so
//! background load on the machine affects every path alike. Everything is bounded in time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};

const CONCURRENCY: usize = 64;
const SLICE: Duration = Duration::from_secs(1);
const WARMUP: Duration = Duration::from_secs(1);
const ROUNDS: usize = 12;
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

async fn upstream(arrivals: Arc<std::sync::Mutex<Vec<String>>>) -> String {
    let body = Arc::new(reply());
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(req): axum::Json<Value>| {
            let body = body.clone();
            let arrivals = arrivals.clone();
            async move {
                if let Some(user) = req.get("user").and_then(Value::as_str) {
                    arrivals.lock().unwrap().push(user.to_owned());
                }
                // The fairness model is slow enough for a queue to build.
                if req.get("model").and_then(Value::as_str) == Some("up-fair") {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                axum::Json((*body).clone())
            }
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
            "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"{KEY}\"\n\n\
             [[dominion]]\nid = \"wide\"\nkind = \"remote\"\nmax_concurrency = 100000\n\n\
             [[dominion]]\nid = \"narrow\"\nkind = \"remote\"\nmax_concurrency = 8\nmax_queue = 2000\n\n\
             [[endpoint]]\nid = \"up\"\nbase_url = \"{upstream}/v1\"\napi_key = \"upstream-key\"\n\n\
             [[endpoint]]\nid = \"up-wide\"\nbase_url = \"{upstream}/v1\"\napi_key = \"upstream-key\"\ndominion = \"wide\"\n\n\
             [[endpoint]]\nid = \"up-plain\"\nbase_url = \"{upstream}/v1\"\napi_key = \"upstream-key\"\n\n\
             [[endpoint]]\nid = \"up-narrow\"\nbase_url = \"{upstream}/v1\"\napi_key = \"upstream-key\"\ndominion = \"narrow\"\n\n\
             [[model]]\nname = \"bench\"\ndescription = \"bench\"\ncontext = 8192\nupstream = \"up-bench\"\nendpoints = [\"up\"]\n\n\
             [[model]]\nname = \"bench-admitted\"\ndescription = \"bench\"\ncontext = 8192\nupstream = \"up-bench\"\nendpoints = [\"up-wide\"]\n\n\
             [[model]]\nname = \"bench-plain\"\ndescription = \"bench\"\ncontext = 8192\nupstream = \"up-bench\"\nendpoints = [\"up-plain\"]\n\n\
             [[model]]\nname = \"bench-fair\"\ndescription = \"bench\"\ncontext = 8192\nupstream = \"up-fair\"\nendpoints = [\"up-narrow\"]\n"
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
async fn load(
    client: &reqwest::Client,
    url: &str,
    model: &str,
    duration: Duration,
) -> (Vec<u64>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let body = json!({"model": model, "messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0.2});
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

/// One fairness request: (client, latency in microseconds, completion rank).
async fn fair_request(
    client: reqwest::Client,
    url: String,
    label: &'static str,
    i: usize,
    done: Arc<AtomicU64>,
) -> (&'static str, u64, u64) {
    let body = json!({"model": "bench-fair", "messages": [{"role": "user", "content": "hi"}], "user": format!("{label}-{i}")});
    let start = Instant::now();
    let res = client
        .post(&url)
        .bearer_auth(KEY)
        .header("X-PromptForge-Client", label)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        res.status().is_success(),
        "fairness request failed: {}",
        res.status()
    );
    res.bytes().await.unwrap();
    let rank = done.fetch_add(1, Ordering::SeqCst) + 1;
    (
        label,
        u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        rank,
    )
}

/// The live queue state of the `narrow` dominion.
async fn narrow_status(client: &reqwest::Client, gw_url: &str) -> Value {
    let status: Value = client
        .get(format!("{gw_url}/admin/status"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["dominions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "narrow")
        .unwrap()
        .clone()
}

/// The burst: 990 requests from "heavy", then (once they queue) 10 from "light".
async fn fairness(
    client: &reqwest::Client,
    gw_url: &str,
    arrivals: &Arc<std::sync::Mutex<Vec<String>>>,
) -> String {
    arrivals.lock().unwrap().clear();
    let url = format!("{gw_url}/v1/chat/completions");
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..990 {
        tasks.push(tokio::spawn(fair_request(
            client.clone(),
            url.clone(),
            "heavy",
            i,
            done.clone(),
        )));
    }
    // Wait until the heavy client has a deep queue.
    loop {
        let narrow = narrow_status(client, gw_url).await;
        if narrow["waiting"].as_u64().unwrap_or(0) >= 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for i in 0..10 {
        tasks.push(tokio::spawn(fair_request(
            client.clone(),
            url.clone(),
            "light",
            i,
            done.clone(),
        )));
    }
    // The moment every light request is queued (or already admitted).
    let (light_start, heavy_waiting) = loop {
        let narrow = narrow_status(client, gw_url).await;
        let queued_light = narrow["waiting_by_client"]["light"].as_u64().unwrap_or(0);
        let queued_heavy = narrow["waiting_by_client"]["heavy"].as_u64().unwrap_or(0);
        let snapshot = arrivals.lock().unwrap().clone();
        let arrived_light = snapshot.iter().filter(|u| u.starts_with("light")).count() as u64;
        if queued_light + arrived_light == 10 {
            let first_light = snapshot
                .iter()
                .position(|u| u.starts_with("light"))
                .unwrap_or(snapshot.len());
            break (first_light, queued_heavy);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let mut heavy = Vec::new();
    let mut light = Vec::new();
    for task in tasks {
        let (label, latency, rank) = task.await.unwrap();
        if label == "heavy" {
            heavy.push((latency, rank))
        } else {
            light.push((latency, rank))
        }
    }
    let order = arrivals.lock().unwrap().clone();
    // Upstream arrivals after the light client showed up, until its last request arrived.
    let last_light = order.iter().rposition(|u| u.starts_with("light")).unwrap();
    let heavy_between = order[light_start..=last_light]
        .iter()
        .filter(|u| u.starts_with("heavy"))
        .count();
    let mean =
        |v: &[(u64, u64)]| v.iter().map(|(l, _)| *l as f64).sum::<f64>() / v.len() as f64 / 1000.0;
    let max_rank = light.iter().map(|(_, r)| *r).max().unwrap();
    format!(
        "- fairness burst (1,000 requests through a dominion of 8 slots, queue 2,000): once the light client's 10 requests were queued \
         behind {heavy_waiting} waiting heavy requests, {heavy_between} heavy requests were admitted before the last light one \
         (strict alternation: at most 10; FIFO: {heavy_waiting}); the light client's requests completed by rank {max_rank} of 1,000; \
         mean latency light {:.1} ms vs heavy {:.1} ms",
        mean(&light),
        mean(&heavy)
    )
}

#[tokio::main]
async fn main() {
    let arrivals = Arc::new(std::sync::Mutex::new(Vec::new()));
    let upstream = upstream(arrivals.clone()).await;
    let gw = gateway(&upstream).await;
    let pid = gw.child.id().unwrap();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()
        .unwrap();
    let direct_url = format!("{upstream}/v1/chat/completions");
    let gateway_url = format!("{}/v1/chat/completions", gw.url);
    let idle_rss = rss_kib(pid, "VmRSS:");

    load(&client, &direct_url, "bench", WARMUP).await;
    load(&client, &gateway_url, "bench", WARMUP).await;
    load(&client, &gateway_url, "bench-admitted", WARMUP).await;
    load(&client, &gateway_url, "bench-plain", WARMUP).await;

    let mut direct = (Vec::new(), 0);
    let mut via = (Vec::new(), 0);
    let mut admitted = (Vec::new(), 0);
    let mut plain = (Vec::new(), 0);
    let peak = Arc::new(AtomicU64::new(0));
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
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    for round in 0..ROUNDS {
        for k in 0..4 {
            let (url, model, acc) = match (round + k) % 4 {
                0 => (&direct_url, "bench", &mut direct),
                1 => (&gateway_url, "bench", &mut via),
                2 => (&gateway_url, "bench-admitted", &mut admitted),
                _ => (&gateway_url, "bench-plain", &mut plain),
            };
            let (lat, n) = load(&client, url, model, SLICE).await;
            acc.0.extend(lat);
            acc.1 += n;
        }
    }
    sampling.store(false, Ordering::Relaxed);
    sampler.await.unwrap();
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    direct.0.sort_unstable();
    via.0.sort_unstable();
    admitted.0.sort_unstable();
    plain.0.sort_unstable();
    let fair = tokio::time::timeout(
        Duration::from_secs(120),
        fairness(&client, &gw.url, &arrivals),
    )
    .await
    .expect("the fairness burst did not finish in 120 s");
    let secs = (SLICE * ROUNDS as u32).as_secs_f64();
    let row = |name: &str, (lat, n): &(Vec<u64>, u64)| {
        (
            name.to_owned(),
            *n,
            *n as f64 / secs,
            percentile(lat, 0.5),
            percentile(lat, 0.99),
        )
    };
    let rows = [
        row("direct to upstream", &direct),
        row("through the gateway", &via),
        row("through the gateway + dominion admission", &admitted),
        row(
            "through the gateway, a second endpoint without dominion (control)",
            &plain,
        ),
    ];
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "| path | requests | throughput (req/s) | p50 (ms) | p99 (ms) |"
    )
    .unwrap();
    writeln!(out, "| --- | --- | --- | --- | --- |").unwrap();
    for (name, n, rps, p50, p99) in &rows {
        writeln!(out, "| {name} | {n} | {rps:.0} | {p50:.2} | {p99:.2} |").unwrap();
    }
    let (d, g, a, c) = (&rows[0], &rows[1], &rows[2], &rows[3]);
    writeln!(out).unwrap();
    writeln!(
        out,
        "- added latency (gateway - direct): p50 +{:.2} ms, p99 +{:.2} ms",
        g.3 - d.3,
        g.4 - d.4
    )
    .unwrap();
    writeln!(
        out,
        "- latency ratio gateway/direct: p50 {:.2}x, p99 {:.2}x",
        g.3 / d.3,
        g.4 / d.4
    )
    .unwrap();
    writeln!(out, "- throughput ratio gateway/direct: {:.2}", g.2 / d.2).unwrap();
    writeln!(out, "- admission overhead vs the first endpoint (dominion that never fills - no dominion): p50 {:+.3} ms, p99 {:+.3} ms, throughput ratio {:.3}", a.3 - g.3, a.4 - g.4, a.2 / g.2).unwrap();
    writeln!(out, "- admission overhead vs the control endpoint (same shape, no dominion): p50 {:+.3} ms, p99 {:+.3} ms, throughput ratio {:.3}", a.3 - c.3, a.4 - c.4, a.2 / c.2).unwrap();
    writeln!(
        out,
        "- gateway RSS: idle {:.1} MiB, peak under load {:.1} MiB (VmHWM {:.1} MiB)",
        idle_rss as f64 / 1024.0,
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        rss_kib(pid, "VmHWM:") as f64 / 1024.0
    )
    .unwrap();
    writeln!(out, "{fair}").unwrap();
    writeln!(
        out,
        "- machine load average before / after: {} / {}",
        load_before.trim(),
        load_after.trim()
    )
    .unwrap();
}
