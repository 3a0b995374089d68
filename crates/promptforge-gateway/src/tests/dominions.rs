//! Dominion admission: bounded queues, reject policy, slot release, fairness, bursts.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::harness::*;

/// The standard boot with endpoint `up` bound to dominion `pool`.
async fn gateway_with(upstream: &Upstream, dominion: &str) -> (Gateway, ConfigDir) {
    let dir = ConfigDir::new();
    let boot =
        standard_boot(&upstream.url).replace("id = \"up\"\n", "id = \"up\"\ndominion = \"pool\"\n");
    let free = format!(
        "\n[[endpoint]]\nid = \"free\"\nbase_url = \"{}/v1\"\n\n[[model]]\nname = \"free-model\"\ndescription = \"unlimited\"\ncontext = 10\nupstream = \"up-free\"\nendpoints = [\"free\"]\n",
        upstream.url
    );
    dir.write(
        "gateway.toml",
        &format!("{boot}{free}\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\n{dominion}\n"),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    (gw, dir)
}

pub(super) async fn pool(gw: &Gateway) -> Value {
    let (_, status) = gw.get("/admin/status").await;
    status["dominions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "pool")
        .unwrap()
        .clone()
}

async fn wait_for(gw: &Gateway, in_flight: u64, waiting: u64) {
    let ok = eventually_async(|| async {
        let p = pool(gw).await;
        p["in_flight"] == in_flight && p["waiting"] == waiting
    })
    .await;
    assert!(
        ok,
        "expected {in_flight} in flight and {waiting} waiting, got {}",
        pool(gw).await
    );
}

pub(super) fn chat(user: &str) -> Value {
    json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}], "user": user})
}

pub(super) async fn send(gw: &Gateway, client: Option<&str>, body: &Value) -> u16 {
    send_status_and_code(gw, client, body).await.0
}

/// Sends `body` as client `client`; the status and the error code (empty without one).
pub(super) async fn send_status_and_code(
    gw: &Gateway,
    client: Option<&str>,
    body: &Value,
) -> (u16, String) {
    let mut req = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .json(body);
    if let Some(client) = client {
        req = req.header("X-PromptForge-Client", client);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, code)
}

#[tokio::test]
async fn queue_fills_then_503() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Gated(Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let (gw, _dir) = gateway_with(&upstream, "max_concurrency = 2\nmax_queue = 3\n").await;
    let gw = Arc::new(gw);
    let mut tasks = Vec::new();
    for i in 0..5 {
        let gw = gw.clone();
        tasks.push(tokio::spawn(async move {
            send(&gw, None, &chat(&format!("r{i}"))).await
        }));
    }
    wait_for(&gw, 2, 3).await;
    let (status, body) = gw.post("/v1/chat/completions", &chat("overflow")).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "queue_full");
    let p = pool(&gw).await;
    assert_eq!(
        (
            p["max_concurrency"].clone(),
            p["max_queue"].clone(),
            p["policy"].clone()
        ),
        (json!(2), json!(3), json!("queue"))
    );
    upstream.open_gate(5);
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    // Slots freed on completion.
    wait_for(&gw, 0, 0).await;
    assert_eq!(upstream.recorded().len(), 5);
}

#[tokio::test]
async fn reject_policy_is_429_at_once() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Gated(Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let (gw, _dir) = gateway_with(&upstream, "max_concurrency = 1\npolicy = \"reject\"\n").await;
    let gw = Arc::new(gw);
    let first = {
        let gw = gw.clone();
        tokio::spawn(async move { send(&gw, None, &chat("first")).await })
    };
    wait_for(&gw, 1, 0).await;
    let (status, body) = gw.post("/v1/chat/completions", &chat("second")).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["code"], "queue_rejected");
    upstream.open_gate(2);
    assert_eq!(first.await.unwrap(), 200);
    wait_for(&gw, 0, 0).await;
    assert_eq!(gw.post("/v1/chat/completions", &chat("third")).await.0, 200);
}

#[tokio::test]
async fn slots_are_freed_on_error_and_on_disconnect() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Json(500, json!({"error": {"message": "boom"}})),
    );
    upstream.script(
        "up-chat",
        Reply::Stream(vec![Part::Data(chunk("up-chat", "first")), Part::Hang]),
    );
    upstream.script(
        "up-embed",
        Reply::Gated(Box::new(Reply::Json(200, json!({"data": []})))),
    );
    let (gw, _dir) = gateway_with(&upstream, "max_concurrency = 1\n").await;
    // Error.
    assert_eq!(gw.post("/v1/chat/completions", &chat("err")).await.0, 502);
    wait_for(&gw, 0, 0).await;
    // Client disconnect mid-stream: the slot is held while streaming, freed when it goes.
    let body = json!({"model": "reasoning-large", "messages": [{"role": "user", "content": "x"}], "stream": true});
    let res = gw.send("/v1/chat/completions", &body).await;
    let mut stream = res.bytes_stream();
    use futures::StreamExt;
    assert!(String::from_utf8_lossy(&stream.next().await.unwrap().unwrap()).contains("first"));
    wait_for(&gw, 1, 0).await;
    // A waiter that disconnects leaves the queue too.
    let waiter = {
        let client = gw.client.clone();
        let url = format!("{}/v1/embeddings", gw.url);
        tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(KEY)
                .json(&json!({"model": "embed-large", "input": "x"}))
                .send()
                .await
        })
    };
    wait_for(&gw, 1, 1).await;
    waiter.abort();
    wait_for(&gw, 1, 0).await;
    drop(stream);
    wait_for(&gw, 0, 0).await;
    assert!(upstream.until(|u| u.streams_dropped() == 1).await);
}

#[tokio::test]
async fn a_busy_client_does_not_starve_another() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Gated(Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let (gw, _dir) = gateway_with(&upstream, "max_concurrency = 1\nmax_queue = 200\n").await;
    let gw = Arc::new(gw);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let gw = gw.clone();
        tasks.push(tokio::spawn(async move {
            send(&gw, Some("batch"), &chat(&format!("batch-{i}"))).await
        }));
    }
    wait_for(&gw, 1, 99).await;
    let single = {
        let gw = gw.clone();
        tokio::spawn(async move { send(&gw, Some("interactive"), &chat("interactive")).await })
    };
    wait_for(&gw, 1, 100).await;
    let p = pool(&gw).await;
    assert_eq!(
        p["waiting_by_client"],
        json!({"batch": 99, "interactive": 1})
    );
    upstream.open_gate(101);
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    assert_eq!(single.await.unwrap(), 200);
    // Admission order is the upstream's arrival order (one slot): the single request waits
    // for at most one batch turn after the one in flight when it arrived.
    let order: Vec<String> = upstream
        .recorded()
        .iter()
        .map(|r| r.body["user"].as_str().unwrap().to_owned())
        .collect();
    let position = order.iter().position(|u| u == "interactive").unwrap();
    assert!(
        position <= 2,
        "interactive request served at position {position}: {order:?}"
    );
}

async fn burst(gw: &Arc<Gateway>, n: usize) -> HashMap<u16, usize> {
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let gw = gw.clone();
        let label = format!("client-{}", i % 8);
        tasks.push(tokio::spawn(async move {
            send(&gw, Some(&label), &chat(&format!("b{i}"))).await
        }));
    }
    let mut counts = HashMap::new();
    let all = tokio::time::timeout(std::time::Duration::from_secs(300), async {
        for task in tasks {
            *counts.entry(task.await.unwrap()).or_default() += 1;
        }
    })
    .await;
    assert!(all.is_ok(), "requests were left hanging");
    counts
}

#[tokio::test]
async fn a_burst_of_1000_never_loses_or_hangs_a_request() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Delayed(2, Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let (gw, _dir) = gateway_with(&upstream, "max_concurrency = 4\nmax_queue = 100\n").await;
    let gw = Arc::new(gw);
    let counts = burst(&gw, 1000).await;
    assert_eq!(counts.values().sum::<usize>(), 1000);
    assert!(counts.keys().all(|s| *s == 200 || *s == 503), "{counts:?}");
    // Whoever was turned away saw 104 others admitted or queued, and those all succeed.
    assert!(counts.get(&200).copied().unwrap_or(0) >= 104, "{counts:?}");
    wait_for(&gw, 0, 0).await;
    assert_eq!(upstream.recorded().len(), counts[&200]);
}

#[tokio::test]
async fn a_burst_under_the_reject_policy_is_200_or_429() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Delayed(2, Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let (gw, _dir) = gateway_with(&upstream, "max_concurrency = 4\npolicy = \"reject\"\n").await;
    let gw = Arc::new(gw);
    let counts = burst(&gw, 1000).await;
    assert_eq!(counts.values().sum::<usize>(), 1000);
    assert!(counts.keys().all(|s| *s == 200 || *s == 429), "{counts:?}");
    assert!(counts.get(&200).copied().unwrap_or(0) >= 4, "{counts:?}");
    wait_for(&gw, 0, 0).await;
}

#[tokio::test]
async fn endpoints_without_a_dominion_are_unlimited_and_switches_keep_counts() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Gated(Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let (gw, dir) = gateway_with(&upstream, "max_concurrency = 1\nmax_queue = 5\n").await;
    let gw = Arc::new(gw);
    let held = {
        let gw = gw.clone();
        tokio::spawn(async move { send(&gw, None, &chat("held")).await })
    };
    wait_for(&gw, 1, 0).await;
    // The pool is full, yet an endpoint without a dominion serves everything at once.
    let mut free = Vec::new();
    for i in 0..20 {
        let gw = gw.clone();
        let body = json!({"model": "free-model", "messages": [{"role": "user", "content": "x"}], "user": format!("f{i}")});
        free.push(tokio::spawn(async move { send(&gw, None, &body).await }));
    }
    for task in free {
        assert_eq!(task.await.unwrap(), 200);
    }
    wait_for(&gw, 1, 0).await;
    // A profile switch keeps the live admission state of a dominion it still defines.
    dir.write("profiles/other.toml", MAIN_PROFILE);
    assert_eq!(
        gw.post("/admin/switch-profile", &json!({"name": "other"}))
            .await
            .0,
        200
    );
    wait_for(&gw, 1, 0).await;
    upstream.open_gate(1);
    assert_eq!(held.await.unwrap(), 200);
    wait_for(&gw, 0, 0).await;
}
