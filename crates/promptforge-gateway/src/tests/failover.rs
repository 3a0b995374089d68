//! Failover across a model's endpoints, with two scripted upstreams (`a`, `b`) that fail
//! in every way, and the overhead/endpoint headers on what the caller gets.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;

/// A boot file with endpoints `a` and `b` (plus `dead`, where nobody listens) and models:
/// `ab` = [a, b], `deadb` = [dead, b], `solo` = [a]. `a_extra` goes into endpoint `a`;
/// `tail` is appended (dominions).
pub fn two_endpoints(a: &Upstream, b: &Upstream, a_extra: &str, tail: &str) -> String {
    format!(
        r#"
[server]
bind = "127.0.0.1:0"
api_key = "${{GW_TEST_KEY}}"

[[endpoint]]
id = "a"
base_url = "{a}/v1"
{a_extra}

[[endpoint]]
id = "b"
base_url = "{b}/v1"

[[endpoint]]
id = "dead"
base_url = "http://127.0.0.1:1/v1"

[[model]]
name = "ab"
description = "two endpoints"
context = 1000
upstream = "m"
endpoints = ["a", "b"]

[[model]]
name = "deadb"
description = "the first endpoint refuses connections"
context = 1000
upstream = "m"
endpoints = ["dead", "b"]

[[model]]
name = "solo"
description = "one endpoint"
context = 1000
upstream = "m"
endpoints = ["a"]

[[model]]
name = "ab-embed"
kind = "embedding"
description = "embeddings on two endpoints"
context = 100
upstream = "e"
endpoints = ["a", "b"]
{tail}
"#,
        a = a.url,
        b = b.url
    )
}

pub async fn boot_two(
    a: &Upstream,
    b: &Upstream,
    a_extra: &str,
    tail: &str,
) -> (Gateway, ConfigDir) {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &two_endpoints(a, b, a_extra, tail));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    (gw, dir)
}

pub fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

/// Status, the two operations headers and the body.
pub async fn post_full(gw: &Gateway, body: &Value) -> Full {
    let response = gw.send("/v1/chat/completions", body).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the body did not end")
        .unwrap();
    let endpoint = headers
        .get("x-promptforge-endpoint")
        .map(|v| v.to_str().unwrap().to_owned());
    let overhead = headers
        .get("x-promptforge-overhead-ms")
        .map(|v| v.to_str().unwrap().parse::<f64>().unwrap());
    (status, endpoint, overhead, text)
}

/// What [`post_full`] returns.
type Full = (u16, Option<String>, Option<f64>, String);

/// [`post_full`] of a one-message chat to `model`, on its own task.
fn spawn_post(gw: &Arc<Gateway>, model: &'static str) -> tokio::task::JoinHandle<Full> {
    let gw = Arc::clone(gw);
    tokio::spawn(async move { post_full(&gw, &chat(model)).await })
}

/// Waits (bounded) for a [`spawn_post`] task.
async fn join(task: tokio::task::JoinHandle<Full>) -> Full {
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the request did not finish")
        .unwrap()
}

fn content(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap();
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn code(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap();
    v["error"]["code"].as_str().unwrap_or_default().to_owned()
}

/// Upstreams `a` and `b` answering different contents for the upstream model `m`.
async fn pair() -> (Upstream, Upstream) {
    let a = Upstream::start().await;
    let b = Upstream::start().await;
    a.script("m", Reply::Json(200, chat_reply("m", "from a")));
    b.script("m", Reply::Json(200, chat_reply("m", "from b")));
    (a, b)
}

/// Upstreams `a` (held at a gate, answering "slow a") and `b`, behind a gateway where
/// endpoint `a` sits in dominion `pool` (one slot; `policy` is the dominion's last line).
async fn gated_pool(policy: &str) -> (Upstream, Upstream, Arc<Gateway>, ConfigDir) {
    let (a, b) = pair().await;
    a.script(
        "m",
        Reply::Gated(Box::new(Reply::Json(200, chat_reply("m", "slow a")))),
    );
    let tail = format!(
        "\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\nmax_concurrency = 1\n{policy}\n"
    );
    let (gw, dir) = boot_two(&a, &b, "dominion = \"pool\"", &tail).await;
    (a, b, Arc::new(gw), dir)
}

fn chat_posts(upstream: &Upstream) -> usize {
    upstream
        .recorded()
        .iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .count()
}

#[tokio::test]
async fn the_first_endpoint_answers_when_healthy() {
    let (a, b) = pair().await;
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, endpoint, overhead, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content(&text), "from a");
    assert_eq!(endpoint.as_deref(), Some("a"));
    assert!(overhead.is_some_and(|ms| ms >= 0.0));
    assert_eq!(chat_posts(&b), 0);
}

#[tokio::test]
async fn connection_refused_fails_over() {
    let (a, b) = pair().await;
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, endpoint, _, text) = post_full(&gw, &chat("deadb")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content(&text), "from b");
    assert_eq!(endpoint.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_500_fails_over() {
    let (a, b) = pair().await;
    a.script("m", Reply::Json(500, json!({"error": {"message": "boom"}})));
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, endpoint, _, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content(&text), "from b");
    assert_eq!(endpoint.as_deref(), Some("b"));
    assert_eq!(chat_posts(&a), 1);
    assert_eq!(chat_posts(&b), 1);
}

#[tokio::test]
async fn a_429_fails_over() {
    let (a, b) = pair().await;
    a.script(
        "m",
        Reply::Json(429, json!({"error": {"message": "slow down"}})),
    );
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, endpoint, _, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content(&text), "from b");
    assert_eq!(endpoint.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_400_is_returned_at_once() {
    let (a, b) = pair().await;
    a.script(
        "m",
        Reply::Json(400, json!({"error": {"message": "bad field"}})),
    );
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, endpoint, overhead, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 400, "{text}");
    assert_eq!(code(&text), "upstream_rejected");
    assert!(text.contains("bad field"), "{text}");
    // The error names the endpoint that was tried, with the overhead.
    assert_eq!(endpoint.as_deref(), Some("a"));
    assert!(overhead.is_some());
    assert_eq!(chat_posts(&b), 0);
    // Embeddings too: a 404 on a capability route is the caller's 400, no failover.
    a.script(
        "e",
        Reply::Json(404, json!({"error": {"message": "no route"}})),
    );
    let (status, body) = gw
        .post(
            "/v1/embeddings",
            &json!({"model": "ab-embed", "input": "x"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "model_unavailable");
    assert!(b.recorded().iter().all(|r| r.path != "/v1/embeddings"));
}

#[tokio::test]
async fn embeddings_fail_over_too() {
    let (a, b) = pair().await;
    a.script("e", Reply::Json(503, json!({"error": {"message": "down"}})));
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, body) = gw
        .post(
            "/v1/embeddings",
            &json!({"model": "ab-embed", "input": "x"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "ab-embed");
    assert_eq!(
        b.recorded()
            .iter()
            .filter(|r| r.path == "/v1/embeddings")
            .count(),
        1
    );
}

#[tokio::test]
async fn every_endpoint_failing_returns_the_last_error() {
    let (a, b) = pair().await;
    a.script(
        "m",
        Reply::Json(500, json!({"error": {"message": "a is down"}})),
    );
    b.script(
        "m",
        Reply::Json(429, json!({"error": {"message": "b is busy"}})),
    );
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let (status, endpoint, overhead, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(code(&text), "upstream_rate_limited");
    assert!(
        text.contains("endpoint b") && text.contains("b is busy"),
        "{text}"
    );
    assert_eq!(endpoint.as_deref(), Some("b"));
    assert!(overhead.is_some());
}

#[tokio::test]
async fn a_stream_failing_before_its_first_chunk_fails_over() {
    let (a, b) = pair().await;
    // `a` answers 200 and cuts the body before any chunk; `b` streams normally.
    a.script("m", Reply::Stream(vec![Part::Sleep(50), Part::Abort]));
    b.script(
        "m",
        Reply::Stream(vec![
            Part::Data(chunk("m", "Hel")),
            Part::Data(chunk("m", "lo")),
            Part::Data("[DONE]".into()),
        ]),
    );
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let body =
        json!({"model": "ab", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (status, endpoint, overhead, text) = post_full(&gw, &body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("b"));
    assert!(overhead.is_some_and(|ms| ms >= 0.0));
    assert!(
        text.contains("\"Hel\"") && text.contains("data: [DONE]"),
        "{text}"
    );
    assert!(text.contains("\"model\":\"ab\""), "{text}");
    assert_eq!(chat_posts(&a), 1);

    // A stream head that fails (a 503) fails over the same way.
    a.script("m", Reply::Json(503, json!({"error": {"message": "down"}})));
    let (status, endpoint, _, text) = post_full(&gw, &body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("b"));
}

#[tokio::test]
async fn after_the_first_chunk_there_is_no_retry() {
    let (a, b) = pair().await;
    a.script(
        "m",
        Reply::Stream(vec![
            Part::Data(chunk("m", "partial")),
            Part::Sleep(50),
            Part::Abort,
        ]),
    );
    let (gw, _dir) = boot_two(&a, &b, "", "").await;
    let body =
        json!({"model": "ab", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (status, endpoint, _, text) = post_full(&gw, &body).await;
    assert_eq!(status, 200);
    assert_eq!(endpoint.as_deref(), Some("a"));
    assert!(text.contains("partial"), "{text}");
    assert!(text.contains("upstream_transport"), "{text}");
    assert!(!text.contains("[DONE]"), "{text}");
    assert_eq!(chat_posts(&b), 0);
}

#[tokio::test]
async fn a_failed_endpoint_is_skipped_for_its_cooldown() {
    let (a, b) = pair().await;
    a.script("m", Reply::Json(500, json!({"error": {"message": "boom"}})));
    let (gw, _dir) = boot_two(&a, &b, "failover_cooldown = \"10m\"", "").await;
    for _ in 0..3 {
        let (status, endpoint, _, text) = post_full(&gw, &chat("ab")).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(endpoint.as_deref(), Some("b"));
    }
    // Only the first request reached `a`; the next two skipped it.
    assert_eq!(chat_posts(&a), 1);
    assert_eq!(chat_posts(&b), 3);
}

#[tokio::test]
async fn a_cooldown_expires() {
    let (a, b) = pair().await;
    a.script("m", Reply::Json(500, json!({"error": {"message": "boom"}})));
    let (gw, _dir) = boot_two(&a, &b, "failover_cooldown = \"300ms\"", "").await;
    let (_, endpoint, _, _) = post_full(&gw, &chat("ab")).await;
    assert_eq!(endpoint.as_deref(), Some("b"));
    a.script("m", Reply::Json(200, chat_reply("m", "from a")));
    let back = eventually_async(|| async {
        let (_, endpoint, _, _) = post_full(&gw, &chat("ab")).await;
        endpoint.as_deref() == Some("a")
    })
    .await;
    assert!(back, "endpoint a never came back after its cooldown");
}

#[tokio::test]
async fn the_last_endpoint_left_is_tried_even_while_cooling() {
    let (a, b) = pair().await;
    a.script("m", Reply::Json(500, json!({"error": {"message": "boom"}})));
    let (gw, _dir) = boot_two(&a, &b, "failover_cooldown = \"10m\"", "").await;
    // A model whose only endpoint is cooling still reaches it.
    for _ in 0..2 {
        let (status, endpoint, _, text) = post_full(&gw, &chat("solo")).await;
        assert_eq!(status, 502, "{text}");
        assert_eq!(code(&text), "upstream_status");
        assert_eq!(endpoint.as_deref(), Some("a"));
    }
    assert_eq!(chat_posts(&a), 2);
    // Both endpoints of `ab` cooling: the request still goes out, in order.
    b.script(
        "m",
        Reply::Json(500, json!({"error": {"message": "b down"}})),
    );
    let (status, _, _, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 502, "{text}");
    assert!(text.contains("b down"), "{text}");
    b.script("m", Reply::Json(200, chat_reply("m", "from b")));
    let (status, endpoint, _, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("b"));
    assert_eq!(content(&text), "from b");
}

#[tokio::test]
async fn a_slow_first_endpoint_with_a_full_dominion_is_passed_over() {
    let (a, b, gw, _dir) = gated_pool("max_queue = 4").await;
    // The first request takes pool's only slot and waits on `a`.
    let first = spawn_post(&gw, "ab");
    assert!(
        a.until(|a| chat_posts(a) == 1).await,
        "the first request never reached a"
    );
    // The second finds pool full and goes to `b` at once instead of queueing.
    let (status, endpoint, _, text) = post_full(&gw, &chat("ab")).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("b"));
    assert_eq!(content(&text), "from b");
    // A model whose only endpoint is `a` queues in pool as its policy says.
    let queued = spawn_post(&gw, "solo");
    let waiting = eventually_async(|| async {
        let (_, status) = gw.get("/admin/status").await;
        status["dominions"][0]["waiting"] == 1
    })
    .await;
    assert!(waiting, "the solo request did not queue in pool");
    a.open_gate(2);
    let (status, endpoint, _, text) = join(first).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("a"));
    assert_eq!(content(&text), "slow a");
    let (status, endpoint, _, text) = join(queued).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("a"));
    assert_eq!(chat_posts(&b), 1);
}

#[tokio::test]
async fn a_reject_dominion_on_the_last_endpoint_answers_queue_rejected() {
    let (a, _b, gw, _dir) = gated_pool("policy = \"reject\"").await;
    let first = spawn_post(&gw, "solo");
    assert!(a.until(|a| chat_posts(a) == 1).await);
    let (status, endpoint, _, text) = post_full(&gw, &chat("solo")).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(code(&text), "queue_rejected");
    assert_eq!(endpoint.as_deref(), Some("a"));
    a.open_gate(1);
    let (status, _, _, _) = join(first).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_bad_failover_cooldown_fails_the_boot_naming_the_key() {
    let (a, b) = pair().await;
    for bad in ["\"soon\"", "\"0s\""] {
        let dir = ConfigDir::new();
        dir.write(
            "gateway.toml",
            &two_endpoints(&a, &b, &format!("failover_cooldown = {bad}"), ""),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let stderr = boot_failure(&dir, "main").await;
        assert!(
            stderr.contains("endpoint[a].failover_cooldown"),
            "{bad}: {stderr}"
        );
    }
}
