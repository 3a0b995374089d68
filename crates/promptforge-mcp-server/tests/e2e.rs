//! End-to-end: the official `mcp` Python SDK client against the real binary, over stdio
//! and streamable HTTP, with prompts that call a scripted upstream on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{
    Knobs, Server, Upstream, free_port, http_target, python, scenario, skip, standard_prompts,
    stdio_target, write_config,
};

const NO_VENV: &str =
    ".venv/bin/python is missing: run scripts/test.sh, which makes it from requirements-test.txt";

async fn fixture(knobs: &Knobs) -> (tempfile::TempDir, Upstream, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, knobs);
    (dir, upstream, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_basics_with_the_default_connection_and_the_classic_handshake() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&Knobs::default()).await;
    for mode in ["auto", "legacy"] {
        scenario(
            "basics",
            mode,
            dir.path(),
            &upstream.url,
            &stdio_target(&config),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_basics_with_the_default_connection_and_the_classic_handshake() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let port = free_port();
    let knobs = Knobs {
        bind: format!("127.0.0.1:{port}"),
        ..Knobs::default()
    };
    let (dir, upstream, config) = fixture(&knobs).await;
    let server = Server::http(&config, port).await;
    for mode in ["auto", "legacy"] {
        scenario(
            "basics",
            mode,
            dir.path(),
            &upstream.url,
            &http_target(&server.url),
        )
        .await;
    }
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_prompts_pages_by_one_hundred() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&Knobs {
        watch: false,
        ..Knobs::default()
    })
    .await;
    for i in 0..100 {
        std::fs::write(
            dir.path().join(format!("prompts/p{i:03}.md")),
            support::prompt(&format!("p{i:03}"), "filler", "return args"),
        )
        .unwrap();
    }
    scenario(
        "paging",
        "auto",
        dir.path(),
        &upstream.url,
        &stdio_target(&config),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_reply_deadline_detaches_and_holds_its_slot_over_stdio() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&Knobs {
        reply_deadline: "1s",
        max_runs: 1,
        admission: "300ms",
        ..Knobs::default()
    })
    .await;
    scenario(
        "deadline",
        "auto",
        dir.path(),
        &upstream.url,
        &stdio_target(&config),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_reply_deadline_detaches_over_http() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let port = free_port();
    let (dir, upstream, config) = fixture(&Knobs {
        bind: format!("127.0.0.1:{port}"),
        reply_deadline: "1s",
        max_runs: 1,
        admission: "300ms",
        ..Knobs::default()
    })
    .await;
    let server = Server::http(&config, port).await;
    scenario(
        "deadline",
        "legacy",
        dir.path(),
        &upstream.url,
        &http_target(&server.url),
    )
    .await;
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_attached_call_cancels_its_run_over_stdio() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&Knobs {
        max_runs: 1,
        admission: "10s",
        ..Knobs::default()
    })
    .await;
    scenario(
        "cancel",
        "legacy",
        dir.path(),
        &upstream.url,
        &stdio_target(&config),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_attached_call_cancels_its_run_over_http() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let port = free_port();
    let (dir, upstream, config) = fixture(&Knobs {
        bind: format!("127.0.0.1:{port}"),
        max_runs: 1,
        admission: "10s",
        ..Knobs::default()
    })
    .await;
    let server = Server::http(&config, port).await;
    scenario(
        "cancel",
        "legacy",
        dir.path(),
        &upstream.url,
        &http_target(&server.url),
    )
    .await;
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_prompts_are_callable_without_a_reconnect() {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&Knobs::default()).await;
    scenario(
        "reload",
        "auto",
        dir.path(),
        &upstream.url,
        &stdio_target(&config),
    )
    .await;
}
