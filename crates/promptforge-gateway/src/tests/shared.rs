//! Dominions shared between replicas through a real Redis (`[dominion_store]`): several
//! gateways booted in this process, each with its own store connection and replica id,
//! against one `redis-server` and one scripted upstream that records how many requests
//! it handles at once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::dominions::{self, chat, pool};
use super::harness::*;
use super::redis::{Redis, store_table};

/// A boot file: the standard one with `up` bound to dominion `pool` (`dominion` lines),
/// shared through `redis` under `prefix`.
fn shared_boot(upstream: &Upstream, redis: &Redis, prefix: &str, dominion: &str) -> String {
    let boot =
        standard_boot(&upstream.url).replace("id = \"up\"\n", "id = \"up\"\ndominion = \"pool\"\n");
    format!(
        "{boot}\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\n{dominion}\n{}",
        store_table(redis, prefix)
    )
}

/// `n` replicas of one configuration (each its own directory, as separate machines).
async fn replicas(n: usize, boot: &str) -> Vec<(Arc<Gateway>, ConfigDir)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", boot);
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
        out.push((Arc::new(gw), dir));
    }
    out
}

/// A chat request from client label `client`, user `user`; the status.
async fn send(gw: &Gateway, client: &str, user: &str) -> u16 {
    dominions::send(gw, Some(client), &chat(user)).await
}

/// [`send`] on a task of its own.
fn spawn_send(gw: &Arc<Gateway>, client: &str, user: &str) -> tokio::task::JoinHandle<u16> {
    let (gw, client, user) = (gw.clone(), client.to_owned(), user.to_owned());
    tokio::spawn(async move { send(&gw, &client, &user).await })
}

/// A scripted upstream whose `up-fast` answers `reply` around an OK completion.
async fn upstream_with(reply: impl FnOnce(Reply) -> Reply) -> Upstream {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        reply(Reply::Json(200, chat_reply("up-fast", "ok"))),
    );
    upstream
}

/// Held until the test opens the gate.
fn gated(reply: Reply) -> Reply {
    Reply::Gated(Box::new(reply))
}

async fn store_mode(gw: &Gateway) -> Value {
    gw.get("/admin/status").await.1["dominion_store"]["mode"].clone()
}

/// Waits until `gw` has `waiting` requests in its part of the shared queue.
async fn wait_waiting(gw: &Gateway, waiting: u64) {
    let ok = eventually_async(|| async { pool(gw).await["waiting"] == waiting }).await;
    assert!(ok, "expected {waiting} waiting, got {}", pool(gw).await);
}

#[tokio::test]
async fn a_burst_across_two_and_three_replicas_never_exceeds_the_shared_limit() {
    let redis = Redis::start().await;
    for n in [2usize, 3] {
        let upstream = upstream_with(|r| Reply::Delayed(60, Box::new(r))).await;
        let boot = shared_boot(
            &upstream,
            &redis,
            &format!("burst{n}"),
            "max_concurrency = 2\nmax_queue = 100\n",
        );
        let gws = replicas(n, &boot).await;
        let mut tasks = Vec::new();
        for i in 0..24 {
            let gw = gws[i % n].0.clone();
            tasks.push(tokio::spawn(async move {
                send(&gw, &format!("c{}", i % 3), &format!("r{i}")).await
            }));
        }
        for task in tasks {
            assert_eq!(task.await.unwrap(), 200, "every request is answered");
        }
        assert_eq!(upstream.recorded().len(), 24);
        assert_eq!(
            upstream.max_in_flight(),
            2,
            "{n} replicas: at most (and, under a burst, exactly) max_concurrency upstream at once"
        );
        // Each replica shows its own view and the global one.
        let p = pool(&gws[0].0).await;
        assert_eq!(p["in_flight"], 0, "{p}");
        assert_eq!(p["global"]["mode"], "shared", "{p}");
        let (samples, _) = scrape(&gws[0].0).await;
        assert_eq!(
            total(&samples, "promptforge_gateway_dominion_store_up", &[]),
            1.0
        );
        assert_eq!(
            total(&samples, "promptforge_gateway_dominion_store_replicas", &[]),
            n as f64,
            "the heartbeats count every replica"
        );
    }
}

#[tokio::test]
async fn fairness_across_client_labels_holds_across_replicas() {
    let redis = Redis::start().await;
    let upstream = upstream_with(gated).await;
    let boot = shared_boot(
        &upstream,
        &redis,
        "fair",
        "max_concurrency = 1\nmax_queue = 100\n",
    );
    let gws = replicas(2, &boot).await;
    let (a, b) = (gws[0].0.clone(), gws[1].0.clone());
    let mut tasks = Vec::new();
    tasks.push(spawn_send(&a, "heavy", "holder"));
    assert!(upstream.until(|u| u.recorded().len() == 1).await);
    // Six waiters of one label on replica A, then two of another on replica B.
    for i in 0..6 {
        tasks.push(spawn_send(&a, "heavy", &format!("heavy{i}")));
        wait_waiting(&a, i + 1).await;
    }
    for i in 0..2 {
        tasks.push(spawn_send(&b, "light", &format!("light{i}")));
        wait_waiting(&b, i + 1).await;
    }
    upstream.open_gate(9);
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    let order: Vec<String> = upstream
        .recorded()
        .iter()
        .map(|r| r.body["user"].as_str().unwrap().to_owned())
        .collect();
    let position = |user: &str| order.iter().position(|u| u == user).unwrap();
    // Round-robin across labels, globally: the light label's two requests are served
    // second and fourth after the holder, not after all six heavy ones.
    assert_eq!(order[0], "holder");
    assert!(position("light0") <= 2, "order: {order:?}");
    assert!(position("light1") <= 4, "order: {order:?}");
    assert_eq!(upstream.max_in_flight(), 1);
}

#[tokio::test]
async fn a_waiter_whose_client_goes_away_leaves_the_global_queue_at_once() {
    let redis = Redis::start().await;
    let upstream = upstream_with(gated).await;
    // Leases and waiters of 60 s: only the cancel, not a lapse, can take the waiter out
    // within this test.
    let boot = shared_boot(
        &upstream,
        &redis,
        "leave",
        "max_concurrency = 1\nmax_queue = 1\n",
    )
    .replace("lease_ttl = \"2s\"", "lease_ttl = \"60s\"");
    let gws = replicas(2, &boot).await;
    let (a, b) = (gws[0].0.clone(), gws[1].0.clone());
    let holder = spawn_send(&a, "x", "holder");
    assert!(upstream.until(|u| u.recorded().len() == 1).await);
    // A waiter on B whose client gives up.
    let gone = spawn_send(&b, "x", "gone");
    wait_waiting(&b, 1).await;
    let queue_len = || async { redis.command(&["ZCARD", "leave:{pool}:waiting"]).await };
    assert_eq!(queue_len().await.as_deref(), Some(":1"));
    gone.abort();
    let _ = gone.await;
    wait_waiting(&b, 0).await;
    assert!(
        eventually_async(|| async { queue_len().await.as_deref() == Some(":0") }).await,
        "the waiter left the store's queue"
    );
    // The global queue (max_queue = 1) has room again: a new waiter on A is accepted,
    // not answered queue_full, and is served once the holder ends.
    let next = spawn_send(&a, "x", "next");
    wait_waiting(&a, 1).await;
    upstream.open_gate(2);
    assert_eq!(holder.await.unwrap(), 200);
    assert_eq!(next.await.unwrap(), 200);
    let users: Vec<Value> = upstream
        .recorded()
        .iter()
        .map(|r| r.body["user"].clone())
        .collect();
    assert_eq!(users, [json!("holder"), json!("next")]);
}

/// Sends `count` requests alternating over `gws` (user `<tag><i>`), each bounded by 20 s.
fn burst(
    gws: &[(Arc<Gateway>, ConfigDir)],
    tag: &str,
    count: usize,
) -> Vec<tokio::task::JoinHandle<Result<u16, tokio::time::error::Elapsed>>> {
    (0..count)
        .map(|i| {
            let gw = gws[i % gws.len()].0.clone();
            let user = format!("{tag}{i}");
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(20), send(&gw, "c", &user)).await
            })
        })
        .collect()
}

async fn all_answered(
    tasks: Vec<tokio::task::JoinHandle<Result<u16, tokio::time::error::Elapsed>>>,
) {
    for task in tasks {
        assert_eq!(task.await.unwrap(), Ok(200), "answered, none hangs");
    }
}

/// Waits until every replica of `gws` is in `mode`.
async fn all_in_mode(gws: &[(Arc<Gateway>, ConfigDir)], mode: &str) {
    for (gw, _) in gws {
        assert!(
            eventually_async(|| async { store_mode(gw).await == mode }).await,
            "expected {mode}, got {}",
            store_mode(gw).await
        );
    }
}

#[tokio::test]
async fn local_share_serves_through_an_outage_and_shares_again_after_it() {
    let mut redis = Redis::start().await;
    let upstream = upstream_with(|r| Reply::Delayed(40, Box::new(r))).await;
    let boot = shared_boot(
        &upstream,
        &redis,
        "outage",
        "max_concurrency = 2\nmax_queue = 100\non_store_failure = \"local_share\"\n",
    );
    let gws = replicas(2, &boot).await;
    // The local share is computed from the replica count the heartbeats last showed.
    for (gw, _) in &gws {
        assert!(
            eventually_async(|| async {
                gw.get("/admin/status").await.1["dominion_store"]["replicas"] == 2
            })
            .await
        );
    }

    // 1. The store goes away while idle: each replica admits its share (2 / 2 = 1).
    redis.stop();
    upstream.reset_max_in_flight();
    all_answered(burst(&gws, "idle", 12)).await;
    assert!(
        upstream.max_in_flight() <= 2,
        "{}",
        upstream.max_in_flight()
    );
    for (gw, _) in &gws {
        assert_eq!(store_mode(gw).await, "degraded");
        let (samples, _) = scrape(gw).await;
        assert_eq!(
            total(&samples, "promptforge_gateway_dominion_store_up", &[]),
            0.0
        );
    }
    redis.start_again().await;
    all_in_mode(&gws, "shared").await;
    upstream.reset_max_in_flight();
    all_answered(burst(&gws, "shared", 8)).await;
    assert_eq!(
        upstream.max_in_flight(),
        2,
        "shared again: the global limit"
    );

    // 2. The store goes away under load: every request answered; while the slots admitted
    // before the outage drain, the total stays within max_concurrency + (replicas - 1) x
    // share = 3 (README, "When Redis is unreachable or slow").
    let mut tasks = burst(&gws, "before", 6);
    assert!(upstream.until(|u| u.recorded().len() >= 22).await);
    upstream.reset_max_in_flight();
    redis.stop();
    tasks.extend(burst(&gws, "during", 12));
    all_answered(tasks).await;
    assert!(
        upstream.max_in_flight() <= 3,
        "{}",
        upstream.max_in_flight()
    );
    redis.start_again().await;
    all_in_mode(&gws, "shared").await;
    assert_eq!(send(&gws[1].0, "c", "after").await, 200);

    // Each switch is logged once, each way, per replica, and counted.
    let logs = gws[0].0.logs();
    for (gw, _) in &gws {
        let replica = gw.get("/admin/status").await.1["dominion_store"]["replica"]
            .as_str()
            .unwrap()
            .to_owned();
        let lines = |what: &str| {
            logs.lines()
                .filter(|l| l.contains(what) && l.contains(&replica))
                .count()
        };
        assert_eq!(lines("dominion store unreachable"), 2, "{logs}");
        assert_eq!(lines("dominion store reachable"), 2, "{logs}");
        let (samples, _) = scrape(gw).await;
        assert_eq!(
            total(
                &samples,
                "promptforge_gateway_dominion_store_outages_total",
                &[]
            ),
            2.0
        );
        assert_eq!(
            total(&samples, "promptforge_gateway_dominion_store_up", &[]),
            1.0
        );
    }
}

#[tokio::test]
async fn fail_closed_answers_503_during_an_outage_and_recovers_by_itself() {
    let mut redis = Redis::start().await;
    let upstream = upstream_with(gated).await;
    let boot = shared_boot(
        &upstream,
        &redis,
        "closed",
        "max_concurrency = 1\non_store_failure = \"fail_closed\"\n",
    );
    let gws = replicas(1, &boot).await;
    let gw = gws[0].0.clone();
    // Under load: one request holds the slot, one waits in the shared queue.
    let holder = spawn_send(&gw, "c", "holder");
    assert!(upstream.until(|u| u.recorded().len() == 1).await);
    let waiter = {
        let gw = gw.clone();
        tokio::spawn(async move {
            dominions::send_status_and_code(&gw, Some("c"), &chat("waiter")).await
        })
    };
    wait_waiting(&gw, 1).await;
    redis.stop();
    // The waiter leaves with the clear code once the replica sees the store gone (its
    // next heartbeat), a new request at once; the holder is not cut.
    let (status, code) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter does not hang")
        .unwrap();
    assert_eq!((status, code.as_str()), (503, "dominion_store_unavailable"));
    let (status, body) = gw.post("/v1/chat/completions", &chat("during")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "dominion_store_unavailable");
    assert_eq!(store_mode(&gw).await, "degraded");
    upstream.open_gate(2);
    assert_eq!(
        holder.await.unwrap(),
        200,
        "a request holding its slot finishes"
    );
    redis.start_again().await;
    assert!(eventually_async(|| async { store_mode(&gw).await == "shared" }).await);
    assert_eq!(send(&gw, "c", "after").await, 200);
}

#[tokio::test]
async fn a_replica_that_joins_mid_burst_shares_the_state_without_double_admission() {
    let redis = Redis::start().await;
    let upstream = upstream_with(|r| Reply::Delayed(50, Box::new(r))).await;
    let boot = shared_boot(&upstream, &redis, "join", "max_concurrency = 2\n");
    let mut gws = replicas(2, &boot).await;
    let mut tasks = Vec::new();
    for i in 0..10 {
        let gw = gws[i % 2].0.clone();
        tasks.push(tokio::spawn(async move {
            send(&gw, "c", &format!("a{i}")).await
        }));
    }
    // Replica 1 restarts mid-burst: it stops taking requests, a new one boots and joins.
    assert!(upstream.until(|u| u.recorded().len() >= 2).await);
    gws.pop();
    gws.extend(replicas(1, &boot).await);
    for i in 0..10 {
        let gw = gws[1].0.clone();
        tasks.push(tokio::spawn(async move {
            send(&gw, "c", &format!("b{i}")).await
        }));
    }
    let mut answered = 0;
    for task in tasks {
        if task.await.unwrap() == 200 {
            answered += 1;
        }
    }
    // The restarted replica's own in-flight requests may fail with it; everything sent
    // to the survivor and the newcomer is answered.
    assert!(answered >= 15, "answered {answered} of 20");
    assert_eq!(upstream.max_in_flight(), 2, "no double admission");
}

#[tokio::test]
async fn the_store_table_is_checked() {
    let cases = [
        (
            "url = \"redis://user:pw@127.0.0.1:6379\"",
            "dominion_store.url: must not carry credentials",
        ),
        (
            "url = \"http://127.0.0.1:6379\"",
            "dominion_store.url: `http://` is not supported",
        ),
        (
            "url = \"redis://127.0.0.1:6379\"\nlease_ttl = \"100ms\"",
            "dominion_store.lease_ttl: must be between 500ms and 10m",
        ),
        (
            "url = \"redis://127.0.0.1:6379\"\nlease_ttl = \"1s\"\ntimeout = \"2s\"",
            "dominion_store.timeout: must be shorter than lease_ttl",
        ),
        (
            "url = \"redis://127.0.0.1:6379\"\nkey_prefix = \"a b\"",
            "dominion_store.key_prefix: must be 1-64 characters",
        ),
        (
            "url = \"redis://127.0.0.1:6379\"\npasword = \"x\"",
            "unknown field `pasword`",
        ),
    ];
    for (table, expected) in cases {
        let dir = ConfigDir::new();
        dir.write(
            "gateway.toml",
            &format!(
                "{}\n[dominion_store]\n{table}\n",
                standard_boot("http://127.0.0.1:9")
            ),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let error = boot_failure(&dir, "main").await;
        assert!(error.contains(expected), "{table}: {error}");
        assert!(!error.contains("pw@"), "credentials never printed: {error}");
    }
    // Only the boot file may set it.
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:9"));
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\"]\n[dominion_store]\nurl = \"redis://127.0.0.1:6379\"\n",
    );
    let error = boot_failure(&dir, "main").await;
    assert!(
        error.contains("main.toml: dominion_store: only the boot file"),
        "{error}"
    );
    // A dominion's failure policy is one of two.
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        &format!(
            "{}\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\non_store_failure = \"open\"\n",
            standard_boot("http://127.0.0.1:9")
        ),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let error = boot_failure(&dir, "main").await;
    assert!(
        error.contains(
            "dominion[pool].on_store_failure: `open` is not \"local_share\" or \"fail_closed\""
        ),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_store_at_boot_starts_degraded_and_shares_once_it_answers() {
    let mut redis = Redis::start().await;
    redis.stop();
    let upstream = Upstream::start().await;
    let boot = shared_boot(&upstream, &redis, "late", "max_concurrency = 1\n");
    let gws = replicas(1, &boot).await;
    let gw = gws[0].0.clone();
    assert_eq!(store_mode(&gw).await, "degraded");
    assert_eq!(
        send(&gw, "c", "degraded").await,
        200,
        "local_share by default"
    );
    redis.start_again().await;
    assert!(eventually_async(|| async { store_mode(&gw).await == "shared" }).await);
    assert_eq!(send(&gw, "c", "shared").await, 200);
    assert_eq!(pool(&gw).await["global"]["mode"], "shared");
}

#[tokio::test]
async fn a_profile_switch_keeps_a_shared_dominions_state_and_applies_its_new_limits() {
    let redis = Redis::start().await;
    let upstream = upstream_with(gated).await;
    let boot = shared_boot(&upstream, &redis, "switch", "max_concurrency = 1\n");
    let gws = replicas(1, &boot).await;
    let (gw, dir) = (gws[0].0.clone(), &gws[0].1);
    // The wider profile: the same files with the limit raised to 2.
    dir.write(
        "profiles/wide.toml",
        "include = [\"../gateway.toml\"]\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\nmax_concurrency = 2\n",
    );
    let holder = spawn_send(&gw, "c", "holder");
    assert!(upstream.until(|u| u.recorded().len() == 1).await);
    let waiter = spawn_send(&gw, "c", "waiter");
    wait_waiting(&gw, 1).await;
    // A dominion the new profile still defines keeps its live state; its raised limit
    // admits the waiter at once (before the holder ends).
    let (status, body) = gw
        .post("/admin/switch-profile", &json!({"name": "wide"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(upstream.until(|u| u.recorded().len() == 2).await);
    let p = pool(&gw).await;
    assert_eq!(
        (p["in_flight"].clone(), p["max_concurrency"].clone()),
        (json!(2), json!(2)),
        "{p}"
    );
    upstream.open_gate(2);
    assert_eq!(holder.await.unwrap(), 200);
    assert_eq!(waiter.await.unwrap(), 200);
    assert!(
        eventually_async(|| async {
            redis
                .command(&["ZCARD", "switch:{pool}:leases"])
                .await
                .as_deref()
                == Some(":0")
        })
        .await,
        "both leases released"
    );
}

#[tokio::test]
async fn the_stores_password_comes_from_the_env_file_and_is_never_shown() {
    const PASSWORD: &str = "s3cret-redis-pass";
    let redis = Redis::start_with_password(PASSWORD).await;
    let upstream = Upstream::start().await;
    let boot = shared_boot(&upstream, &redis, "auth", "max_concurrency = 1\n").replace(
        "[dominion_store]\n",
        "[dominion_store]\npassword = \"${REDIS_PASSWORD}\"\n",
    );
    for (password, mode) in [(PASSWORD, "shared"), ("wrong-password", "degraded")] {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", &boot);
        dir.write("gateway.env", &format!("REDIS_PASSWORD={password}\n"));
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
        assert_eq!(store_mode(&gw).await, mode, "with {password}");
        assert_eq!(send(&gw, "c", "x").await, 200);
        let (_, status) = gw.get("/admin/status").await;
        let (_, metrics) = scrape(&gw).await;
        for text in [status.to_string(), gw.logs(), format!("{metrics:?}")] {
            assert!(!text.contains(password), "the password leaked: {text}");
        }
    }
}

#[tokio::test]
async fn a_store_that_stops_answering_degrades_within_the_timeout_and_nothing_hangs() {
    let redis = Redis::start().await;
    let upstream = upstream_with(gated).await;
    let boot = shared_boot(&upstream, &redis, "frozen", "max_concurrency = 1\n");
    let gws = replicas(1, &boot).await;
    let gw = gws[0].0.clone();
    let holder = spawn_send(&gw, "c", "holder");
    assert!(upstream.until(|u| u.recorded().len() == 1).await);
    let waiter = spawn_send(&gw, "c", "waiter");
    wait_waiting(&gw, 1).await;
    // A frozen server: its connections stay open and nothing answers.
    redis.signal("STOP");
    // The replica sees the store gone within a command timeout (500 ms) and its local
    // share (1 slot, held by the holder) admits the waiter when the holder ends.
    all_in_mode(&gws, "degraded").await;
    upstream.open_gate(4);
    assert_eq!(holder.await.unwrap(), 200);
    let answered = tokio::time::timeout(Duration::from_secs(20), waiter).await;
    assert_eq!(answered.expect("the waiter does not hang").unwrap(), 200);
    assert_eq!(send(&gw, "c", "during").await, 200);
    redis.signal("CONT");
    all_in_mode(&gws, "shared").await;
    assert_eq!(send(&gw, "c", "after").await, 200);
}

#[tokio::test]
async fn the_shared_queue_tracks_at_most_32_client_labels() {
    let redis = Redis::start().await;
    let upstream = upstream_with(gated).await;
    let boot = shared_boot(
        &upstream,
        &redis,
        "labels",
        "max_concurrency = 1\nmax_queue = 100\n",
    );
    let gws = replicas(1, &boot).await;
    let gw = gws[0].0.clone();
    let mut tasks = vec![spawn_send(&gw, "holder", "holder")];
    assert!(upstream.until(|u| u.recorded().len() == 1).await);
    for i in 0..40 {
        tasks.push(spawn_send(&gw, &format!("client-{i}"), &format!("w{i}")));
        wait_waiting(&gw, i + 1).await;
    }
    // As in one process: 31 labels of their own, the rest folded into `default`.
    let by_client = pool(&gw).await["waiting_by_client"].clone();
    let by_client = by_client.as_object().unwrap();
    assert_eq!(by_client.len(), 32, "{by_client:?}");
    assert_eq!(by_client["default"], 40 - 31);
    assert_eq!(by_client["client-0"], 1);
    upstream.open_gate(41);
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
}
