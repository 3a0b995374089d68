//! The binary as a process: usage, boot faults, gateway classification, the HTTP checks,
//! stdio framing and shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use support::{Catalog, Knobs, MCP_KEY, Server, Upstream, binary, standard_prompts, write_config};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

async fn output(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = tokio::process::Command::new(binary());
    command.args(args).stdin(Stdio::null()).kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the server did not exit")
        .unwrap()
}

#[tokio::test]
async fn usage_errors_exit_2_with_usage() {
    for args in [
        &[][..],
        &["serve"][..],
        &["serve", "--bogus", "x.toml"][..],
        &["frobnicate"][..],
    ] {
        let out = output(args, &[]).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Usage"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_boot_fault_is_printed_before_a_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let p = dir.path().join("prompts");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("a.md"), support::prompt("same", "d", "return 1")).unwrap();
    std::fs::write(p.join("b.md"), support::prompt("same", "d", "return 1")).unwrap();
    std::fs::write(
        p.join("c.md"),
        support::prompt("check_run", "d", "return 1"),
    )
    .unwrap();
    std::fs::write(
        p.join("d.md"),
        "---\nname: d\npromptforge: 1\nwat: 1\n---\n# T\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(&config).unwrap() + "\n[prompts.ghost]\nenabled = false\n";
    std::fs::write(&config, text).unwrap();
    let out = output(&["serve", "--stdio", config.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "a.md and b.md",
        "`check_run` is reserved",
        "d.md",
        "wat",
        "[prompts.ghost]",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_says_it_ignores_the_bind_and_the_key() {
    // Issue 26 item 7: a `[server].bind` was ignored over stdio without a word.
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let out = output(&["serve", "--stdio", config.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[server].bind 127.0.0.1:0 is ignored over stdio"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[server].api_key is not checked over stdio"),
        "{stderr}"
    );
    // Without them, nothing is said.
    let text = std::fs::read_to_string(&config).unwrap();
    let bare: String = text
        .lines()
        .filter(|l| !l.starts_with("bind =") && !l.starts_with("api_key = \"${PF_TEST_MCP_KEY}"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, bare).unwrap();
    let out = output(&["serve", "--stdio", config.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ignored over stdio"), "{stderr}");
    assert!(!stderr.contains("not checked over stdio"), "{stderr}");
}

#[tokio::test]
async fn an_unknown_key_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prompts.toml");
    std::fs::write(&config, "[gateway]\nurl = \"http://127.0.0.1:9\"\napi_key = \"k\"\n\n[server]\nreply_deadlin = \"1s\"\n").unwrap();
    let out = output(&["serve", "--stdio", config.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:6:", config.display())),
        "{stderr}"
    );
    assert!(stderr.contains("reply_deadlin"), "{stderr}");
}

async fn boot_with_catalog(catalog: Catalog) -> (std::process::Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    upstream.set_catalog(catalog);
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    // stdin is closed at once, so a server that boots ends at EOF with status 0.
    let out = output(&["serve", "--stdio", config.to_str().unwrap()], &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_catalog_fetch_fails_soft_on_5xx_and_hard_on_401_or_garbage() {
    let (out, stderr) = boot_with_catalog(Catalog::Ok).await;
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("model catalog fetched models=1"),
        "{stderr}"
    );
    let (out, stderr) = boot_with_catalog(Catalog::Unavailable).await;
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("serving with an empty model catalog"),
        "{stderr}"
    );
    for refused in [Catalog::Unauthorized, Catalog::Malformed] {
        let (out, stderr) = boot_with_catalog(refused).await;
        assert_eq!(out.status.code(), Some(1), "{refused:?}: {stderr}");
        assert!(stderr.contains("will not boot"), "{refused:?}: {stderr}");
        if matches!(refused, Catalog::Unauthorized) {
            // The refusal names the setting that holds the key.
            assert!(
                stderr.contains("the gateway refused [gateway] api_key"),
                "{stderr}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_to_start_without_a_key_or_on_an_open_bind_without_hosts() {
    let dir = tempfile::tempdir().unwrap();
    standard_prompts(dir.path());
    let config = write_config(dir.path(), "http://127.0.0.1:9", &Knobs::default());
    std::fs::remove_file(dir.path().join("prompts.env")).unwrap();
    let env = [("PF_TEST_GATEWAY_KEY", "k")];
    let out = output(&["serve", config.to_str().unwrap()], &env).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[server].api_key is required to serve over HTTP"),
        "{stderr}"
    );
    // The same file boots over stdio: the unset key is dropped.
    let out = output(&["serve", "--stdio", config.to_str().unwrap()], &env).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let open = write_config(
        dir.path(),
        "http://127.0.0.1:9",
        &Knobs {
            bind: "0.0.0.0:0".into(),
            ..Knobs::default()
        },
    );
    let out = output(&["serve", open.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("allowed_hosts must list"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_checks_bearer_host_and_origin_on_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let server = Server::http(&config).await;
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    let client = reqwest::Client::new();
    let mcp = format!("{}/mcp", server.url);
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let post = |token: Option<&str>| {
        let mut r = client
            .post(&mcp)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(init.to_string());
        if let Some(t) = token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r
    };

    let health = client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(support::json(health).await["status"], "ok");

    for token in [None, Some("wrong"), Some("")] {
        let r = post(token).send().await.unwrap();
        assert_eq!(r.status(), 401, "{token:?}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
    }
    let r = post(Some(MCP_KEY)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let session = r.headers().get("mcp-session-id").cloned();
    assert!(session.is_some());
    // The bearer is checked per request, not per session.
    let mut r = post(None);
    r = r.header("mcp-session-id", session.unwrap());
    assert_eq!(r.send().await.unwrap().status(), 401);

    let r = post(Some(MCP_KEY))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = post(Some(MCP_KEY))
        .header("host", format!("localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = post(Some(MCP_KEY))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = post(Some(MCP_KEY))
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let huge = "x".repeat(5 * 1024 * 1024);
    let r = client
        .post(&mcp)
        .header("authorization", format!("Bearer {MCP_KEY}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);

    let status = server.terminate().await;
    assert!(
        status.success(),
        "SIGTERM ends the server with status 0: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_stdout_carries_only_json_rpc_and_an_endless_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let mut child = tokio::process::Command::new(binary())
        .args(["serve", "--stdio"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("no line from the server")
            .unwrap()
            .expect("stdout closed")
    };
    let send = |v: serde_json::Value| format!("{v}\n");
    stdin
        .write_all(
            send(
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&next().await).unwrap();
    assert_eq!(reply["id"], 1);
    assert_eq!(
        reply["result"]["serverInfo"]["name"],
        "promptforge-mcp-server"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();

    // A peer that sends 5 MiB without a newline costs a fixed buffer: the line is dropped
    // with a logged error, and the session lives on.
    let endless = vec![b'x'; 5 * 1024 * 1024];
    stdin.write_all(&endless).await.unwrap();
    stdin.write_all(b"\n").await.unwrap();

    stdin
        .write_all(
            send(
                serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_prompt", "arguments": {"prompt": "echo", "args": "hi"}}}),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&next().await).unwrap();
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["result"]["structuredContent"]["value"], "hi");
    assert_eq!(reply["result"]["isError"], false);

    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("EOF on stdin ends the server")
        .unwrap();
    assert!(status.success());
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)
        .await
        .unwrap();
    assert!(
        stderr.contains("catalog resolved"),
        "logs go to stderr: {stderr}"
    );
    assert!(
        stderr.contains("exceeded the maximum line length"),
        "the oversized line is reported: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_prompts_toml_boots_as_shipped() {
    let repo = support::repo();
    let config = repo.join("prompts.toml");
    // Over stdio (EOF at once ends it cleanly)...
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(binary())
            .args(["serve", "--stdio"])
            .arg(&config)
            .current_dir(&repo)
            .env_remove("PROMPTFORGE_MCP_SERVER_API_KEY")
            .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("catalog resolved prompts="), "{stderr}");
}

/// Issue 38 item 8: sessions were unbounded (2,000 idle ones held 111 MB for rmcp's
/// 5-minute keep-alive). An `initialize` over `[server].max_sessions` gets 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_over_the_session_cap_is_refused_with_503() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("[server]\n", "[server]\nmax_sessions = 2\n"),
    )
    .unwrap();
    let server = Server::http(&config).await;
    let client = reqwest::Client::new();
    let mcp = format!("{}/mcp", server.url);
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let post = || {
        client
            .post(&mcp)
            .header("authorization", format!("Bearer {MCP_KEY}"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(init.to_string())
    };
    let end_session = |id: reqwest::header::HeaderValue| {
        let request = client
            .delete(&mcp)
            .header("authorization", format!("Bearer {MCP_KEY}"))
            .header("mcp-session-id", id);
        async move {
            let r = request.send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
        }
    };
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let r = post().send().await.unwrap();
        assert_eq!(r.status(), 200);
        sessions.push(r.headers()["mcp-session-id"].clone());
    }
    let r = post().send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let message = r.text().await.unwrap();
    assert!(
        message.contains("max_sessions") && message.contains('2'),
        "{message}"
    );
    // Ending a session frees its place.
    end_session(sessions.pop().unwrap()).await;
    assert_eq!(post().send().await.unwrap().status(), 200);
    // Initializes that arrive together cannot pass the cap together: with the two places
    // taken again, none of eight concurrent ones opens a session, and after one place is
    // freed exactly one of eight does.
    let burst = || futures::future::join_all((0..8).map(|_| post().send()));
    let opened = |answers: Vec<reqwest::Result<reqwest::Response>>| {
        answers
            .into_iter()
            .map(|r| r.unwrap().status())
            .inspect(|status| assert!(*status == 200 || *status == 503, "{status}"))
            .filter(|status| *status == 200)
            .count()
    };
    assert_eq!(opened(burst().await), 0);
    end_session(sessions.pop().unwrap()).await;
    assert_eq!(opened(burst().await), 1);
    assert!(server.terminate().await.success());
}
