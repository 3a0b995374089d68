//! Dominions shared through a real Redis, across gateway processes: a replica killed with
//! SIGKILL while it holds slots gives them back through its leases' lapse, and the
//! surviving replica loses nothing. (The in-process suite, `src/tests/shared.rs`, covers
//! bursts, fairness, outages and joins.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;

#[path = "../../src/tests/redis.rs"]
mod redis;
use redis::{Redis, store_table};

fn chat(user: &str) -> Value {
    json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}], "user": user})
}

async fn waiting(gw: &Gateway) -> Value {
    let (_, status) = gw.get("/admin/status").await;
    status["dominions"][0]["waiting"].clone()
}

#[tokio::test]
async fn a_replica_killed_while_holding_slots_frees_them_when_its_leases_lapse() {
    let redis = Redis::start().await;
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Gated(Box::new(Reply::Json(200, chat_reply("up-fast", "ok")))),
    );
    let boot = format!(
        "{}\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\nmax_concurrency = 2\n{}",
        standard_boot(&upstream.url).replace("id = \"up\"\n", "id = \"up\"\ndominion = \"pool\"\n"),
        store_table(&redis, "kill")
    );
    let mut gws = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..2 {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", &boot);
        dir.write("profiles/main.toml", MAIN_PROFILE);
        gws.push(Gateway::start(&dir.boot(), "main", &base_env()).await);
        dirs.push(dir);
    }
    let survivor = gws.pop().unwrap();
    let doomed = gws.pop().unwrap();
    // The doomed replica takes both slots.
    let mut held = Vec::new();
    for i in 0..2 {
        let (client, url) = (doomed.client.clone(), doomed.url.clone());
        held.push(tokio::spawn(async move {
            client
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(KEY)
                .json(&chat(&format!("doomed{i}")))
                .send()
                .await
        }));
    }
    assert!(upstream.until(|u| u.recorded().len() == 2).await);
    // Two requests wait on the survivor.
    let mut waiters = Vec::new();
    for i in 0..2 {
        let (client, url) = (survivor.client.clone(), survivor.url.clone());
        waiters.push(tokio::spawn(async move {
            let res = client
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(KEY)
                .json(&chat(&format!("survivor{i}")))
                .send()
                .await
                .unwrap();
            res.status().as_u16()
        }));
    }
    let mut both_waiting = false;
    for _ in 0..400 {
        if waiting(&survivor).await == 2 {
            both_waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        both_waiting,
        "the survivor's requests wait in the shared queue"
    );
    let killed = Instant::now();
    doomed.kill().await;
    for task in held {
        assert!(
            task.await.unwrap().is_err(),
            "the killed replica's clients see it die"
        );
    }
    // The dead replica's leases lapse (lease_ttl = 2 s) and its slots go to the waiters.
    assert!(
        upstream.until(|u| u.recorded().len() == 4).await,
        "the survivor's waiters got the dead replica's slots"
    );
    eprintln!(
        "slots regained {:?} after SIGKILL (lease_ttl 2s)",
        killed.elapsed()
    );
    upstream.open_gate(4);
    for task in waiters {
        assert_eq!(
            task.await.unwrap(),
            200,
            "no request on the survivor is lost"
        );
    }
}
