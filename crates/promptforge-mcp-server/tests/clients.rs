//! Independent clients, offline: Claude Code's own CLI (`claude mcp add` + `claude mcp
//! list`) and the MCP Inspector CLI, over stdio and HTTP. `scripts/test.sh` installs both
//! into the git-ignored `.tools/npm` when they are absent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use support::{
    Knobs, MCP_KEY, Server, Upstream, binary, repo, skip, standard_prompts, write_config,
};

fn tool(name: &str) -> Option<PathBuf> {
    let path = repo().join(".tools/npm/node_modules/.bin").join(name);
    path.exists().then_some(path)
}

/// Runs a node CLI with a private HOME (so nothing of the user's is read or written).
async fn node(program: &Path, home: &Path, cwd: &Path, args: &[&str]) -> (bool, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .args(args)
            .current_dir(cwd)
            .env("HOME", home)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client CLI did not finish in 120 s")
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

const MISSING: &str =
    "the npm clients are missing from .tools/npm: run scripts/test.sh, which installs them";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_lists_both_attachments_as_connected() {
    let Some(claude) = tool("claude") else {
        return skip(MISSING);
    };
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let server = Server::http(&config).await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let config = config.to_str().unwrap();
    let url = format!("{}/mcp", server.url);
    let bearer = format!("Authorization: Bearer {MCP_KEY}");
    for args in [
        vec![
            "mcp",
            "add",
            "pf-stdio",
            "--",
            binary(),
            "serve",
            "--stdio",
            config,
        ],
        vec![
            "mcp",
            "add",
            "--transport",
            "http",
            "pf-http",
            &url,
            "--header",
            &bearer,
        ],
        vec![
            "mcp",
            "add",
            "--transport",
            "http",
            "pf-wrong-key",
            &url,
            "--header",
            "Authorization: Bearer wrong",
        ],
    ] {
        let (ok, text) = node(&claude, home.path(), project.path(), &args).await;
        assert!(ok, "{args:?}: {text}");
    }
    let (_, text) = node(&claude, home.path(), project.path(), &["mcp", "list"]).await;
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} not listed: {text}"))
            .to_owned()
    };
    assert!(line("pf-stdio").contains("Connected"), "{text}");
    assert!(line("pf-http").contains("Connected"), "{text}");
    assert!(!line("pf-wrong-key").contains("✔ Connected"), "{text}");
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_cli_lists_tools_and_runs_a_prompt() {
    let Some(inspector) = tool("mcp-inspector") else {
        return skip(MISSING);
    };
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    let home = tempfile::tempdir().unwrap();
    let c = config.to_str().unwrap();
    let stdio = ["--cli", binary(), "serve", "--stdio", c];
    let (ok, text) = node(
        &inspector,
        home.path(),
        dir.path(),
        &[&stdio[..], &["--method", "tools/list"]].concat(),
    )
    .await;
    assert!(ok, "{text}");
    for name in ["list_prompts", "run_prompt", "check_run"] {
        assert!(
            text.contains(&format!("\"name\": \"{name}\"")),
            "{name}: {text}"
        );
    }
    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "run_prompt",
        "--tool-arg",
        "prompt=echo",
        "args=from-inspector",
    ];
    let (ok, text) = node(
        &inspector,
        home.path(),
        dir.path(),
        &[&stdio[..], &call[..]].concat(),
    )
    .await;
    assert!(
        ok && text.contains("\"value\": \"from-inspector\""),
        "{text}"
    );

    let server = Server::http(&config).await;
    let url = format!("{}/mcp", server.url);
    let bearer = format!("Authorization: Bearer {MCP_KEY}");
    let http = [
        "--cli",
        url.as_str(),
        "--transport",
        "http",
        "--header",
        bearer.as_str(),
    ];
    let (ok, text) = node(
        &inspector,
        home.path(),
        dir.path(),
        &[&http[..], &call[..]].concat(),
    )
    .await;
    assert!(
        ok && text.contains("\"value\": \"from-inspector\""),
        "{text}"
    );
    let wrong = [
        "--cli",
        url.as_str(),
        "--transport",
        "http",
        "--header",
        "Authorization: Bearer wrong",
        "--method",
        "tools/list",
    ];
    let (ok, text) = node(&inspector, home.path(), dir.path(), &wrong).await;
    assert!(!ok, "a wrong bearer must fail: {text}");
    assert!(server.terminate().await.success());
}
