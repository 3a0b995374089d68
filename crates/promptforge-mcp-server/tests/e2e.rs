//! End-to-end: the official `mcp` Python SDK client against the real binary, over stdio
//! and streamable HTTP, with prompts that call a scripted upstream on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{
    Knobs, Server, Upstream, http_target, python, scenario, scenario_with, skip, standard_prompts,
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

/// Runs the Python `scenario` once per connection `mode` against a server spawned over
/// stdio by the client; `prepare` may add files to the fixture first.
async fn over_stdio(
    name: &str,
    modes: &[&str],
    knobs: Knobs,
    prepare: impl FnOnce(&std::path::Path),
) {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&knobs).await;
    prepare(dir.path());
    for mode in modes {
        scenario(
            name,
            mode,
            dir.path(),
            &upstream.url,
            &stdio_target(&config),
        )
        .await;
    }
}

/// Runs the Python `scenario` once per connection `mode` against one server over
/// streamable HTTP on a loopback port the server picks, then stops it (it must exit 0).
async fn over_http(name: &str, modes: &[&str], knobs: Knobs) {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let (dir, upstream, config) = fixture(&knobs).await;
    let server = Server::http(&config).await;
    for mode in modes {
        scenario(
            name,
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
async fn stdio_basics_with_the_default_connection_and_the_classic_handshake() {
    over_stdio("basics", &["auto", "legacy"], Knobs::default(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_basics_with_the_default_connection_and_the_classic_handshake() {
    over_http("basics", &["auto", "legacy"], Knobs::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_prompts_pages_by_one_hundred() {
    let knobs = Knobs {
        watch: false,
        ..Knobs::default()
    };
    over_stdio("paging", &["auto"], knobs, |dir| {
        for i in 0..100 {
            std::fs::write(
                dir.join(format!("prompts/p{i:03}.md")),
                support::prompt(&format!("p{i:03}"), "filler", "return args"),
            )
            .unwrap();
        }
    })
    .await;
}

/// One slot, a 1 s reply deadline and a 300 ms admission timeout.
fn deadline_knobs() -> Knobs {
    Knobs {
        reply_deadline: "1s",
        max_runs: 1,
        admission: "300ms",
        ..Knobs::default()
    }
}

/// One slot and a long admission timeout, so a cancelled run must free it.
fn cancel_knobs() -> Knobs {
    Knobs {
        max_runs: 1,
        admission: "10s",
        ..Knobs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_reply_deadline_detaches_and_holds_its_slot_over_stdio() {
    over_stdio("deadline", &["auto"], deadline_knobs(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_reply_deadline_detaches_over_http() {
    over_http("deadline", &["legacy"], deadline_knobs()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_attached_call_cancels_its_run_over_stdio() {
    over_stdio("cancel", &["legacy"], cancel_knobs(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_attached_call_cancels_its_run_over_http() {
    over_http("cancel", &["legacy"], cancel_knobs()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_prompts_are_callable_without_a_reconnect() {
    over_stdio("reload", &["auto"], Knobs::default(), |_| {}).await;
}

// ---- Issue 26: MCP logging, and a client that goes away mid-call ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_logs_reach_the_client_that_started_the_run_over_stdio() {
    // `legacy`: logging/setLevel governs; `auto` (2026-07-28): the call's `_meta` opts in.
    over_stdio("logging", &["legacy", "auto"], Knobs::default(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_logs_reach_only_the_client_that_started_the_run_over_http() {
    over_http("logging", &["legacy", "auto"], Knobs::default()).await;
}

/// Runs `steps` (scenario names, each a fresh client) against one HTTP server with
/// `knobs`, passing the resume grace to the scripts.
async fn http_steps(steps: &[&str], knobs: Knobs) {
    if python().is_none() {
        return skip(NO_VENV);
    }
    let grace = humantime::parse_duration(knobs.resume_grace)
        .unwrap()
        .as_secs_f64()
        .to_string();
    let (dir, upstream, config) = fixture(&knobs).await;
    let server = Server::http(&config).await;
    for step in steps {
        scenario_with(
            step,
            "legacy",
            dir.path(),
            &upstream.url,
            &http_target(&server.url),
            &[("PF_RESUME_GRACE_S", &grace)],
        )
        .await;
    }
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_an_attached_call_has_its_run_cancelled() {
    // The client process dies mid-call: no resume follows, so after resume_grace the run
    // is cancelled and its slot comes free.
    let knobs = Knobs {
        max_runs: 1,
        admission: "30s",
        resume_grace: "2s",
        ..Knobs::default()
    };
    http_steps(&["drop", "after_drop"], knobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_resumes_its_stream_keeps_its_run() {
    // The call's stream is cut; the SDK resumes it with Last-Event-ID after the server's
    // 3 s retry hint, inside resume_grace: the run goes on and its answer arrives.
    let knobs = Knobs {
        resume_grace: "6s",
        ..Knobs::default()
    };
    http_steps(&["resume"], knobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_run_outlives_its_client() {
    // Past reply_deadline the call answered `running` with the run id: the client going
    // away cancels nothing.
    let knobs = Knobs {
        reply_deadline: "1s",
        resume_grace: "2s",
        ..Knobs::default()
    };
    http_steps(&["background", "after_background"], knobs).await;
}

/// Issue 38 item 3: a client that declares roots (handshake-era: 2026-07-28 cannot be asked
/// for them) bounds `input_file` and `output_file` by them, within `[files] allowed_dirs`,
/// and a `notifications/roots/list_changed` makes the server list them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_roots_bound_the_files_over_stdio() {
    over_stdio("roots", &["legacy"], Knobs::default(), |_| {}).await;
}

/// [`client_roots_bound_the_files_over_stdio`] over streamable HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_roots_bound_the_files_over_http() {
    over_http("roots", &["legacy"], Knobs::default()).await;
}
