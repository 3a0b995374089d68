//! The README's "Attaching Cursor" and "Attaching Claude Code" snippets, launched the way
//! each client launches them, with the shipped `prompts.toml`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use support::{Server, binary, python, repo, skip};

/// The fenced blocks (info string, body) of the README section titled `heading`.
fn blocks(heading: &str) -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has no section {heading}"));
    let rest = &readme[start + heading.len() + 2..];
    let section = &rest[..rest.find("\n#").unwrap_or(rest.len())];
    let mut out = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if let Some(info) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            out.push((info.to_owned(), body.join("\n")));
        }
    }
    out
}

fn entry(json: &str) -> Value {
    let value: Value = serde_json::from_str(json).unwrap();
    value["mcpServers"]["promptforge"].clone()
}

async fn smoke(server_json: &Value, path: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/client.py");
    let mut command = tokio::process::Command::new(python().unwrap());
    command
        .arg(script)
        .arg("smoke")
        .arg("--server-json")
        .arg(server_json.to_string())
        .env("PATH", path)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), command.output())
        .await
        .expect("the client did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("smoke (auto): ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn path_with_binary() -> String {
    let dir = Path::new(binary()).parent().unwrap().display().to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claude_code_snippets_launch_the_server_as_written() {
    let blocks = blocks("### Attaching Claude Code");
    let sh = &blocks.iter().find(|(info, _)| info == "sh").unwrap().1;
    let json = &blocks.iter().find(|(info, _)| info == "json").unwrap().1;
    let entry = entry(json);

    // `claude mcp add NAME -e K=V -- COMMAND ARGS...` says the same as the .mcp.json entry.
    let words: Vec<&str> = sh.split_whitespace().collect();
    assert_eq!(&words[..4], ["claude", "mcp", "add", "promptforge"], "{sh}");
    let dashes = words.iter().position(|w| *w == "--").unwrap();
    let env: Vec<&str> = words[4..dashes]
        .chunks(2)
        .map(|pair| {
            assert_eq!(pair[0], "-e", "{sh}");
            pair[1]
        })
        .collect();
    let json_env: Vec<String> = entry["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
        .collect();
    assert_eq!(env, json_env);
    assert_eq!(words[dashes + 1], entry["command"]);
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&words[dashes + 2..], &args[..]);

    if python().is_none() {
        return skip(".venv/bin/python is missing: run scripts/test.sh");
    }
    // The one substitution: the placeholder path becomes this checkout's prompts.toml.
    let config = std::fs::canonicalize(repo().join("prompts.toml")).unwrap();
    let text = serde_json::to_string(&entry)
        .unwrap()
        .replace("/abs/path/to/prompts.toml", config.to_str().unwrap());
    let entry: Value = serde_json::from_str(&text).unwrap();
    smoke(&entry, &path_with_binary()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cursor_snippet_reaches_the_shipped_server() {
    let blocks = blocks("### Attaching Cursor");
    let json = &blocks.iter().find(|(info, _)| info == "json").unwrap().1;
    let entry = entry(json);
    assert_eq!(entry["url"], "http://127.0.0.1:9310/mcp");
    if python().is_none() {
        return skip(".venv/bin/python is missing: run scripts/test.sh");
    }
    // The shipped files, with one change: port 0 (the server picks a free one) instead of
    // 9310, since tests run in parallel on shared machines. The snippet's URL gets the
    // port the server bound.
    let dir = tempfile::tempdir().unwrap();
    let prompts = std::fs::canonicalize(repo().join("prompts")).unwrap();
    let shipped = std::fs::read_to_string(repo().join("prompts.toml")).unwrap();
    assert!(shipped.contains("bind = \"127.0.0.1:9310\""));
    assert!(shipped.contains("prompts = \"prompts\""));
    let text = shipped.replace("127.0.0.1:9310", "127.0.0.1:0").replace(
        "prompts = \"prompts\"",
        &format!("prompts = \"{}\"", prompts.display()),
    );
    std::fs::write(dir.path().join("prompts.toml"), text).unwrap();
    std::fs::copy(repo().join("prompts.env"), dir.path().join("prompts.env")).unwrap();
    let server = Server::http(&dir.path().join("prompts.toml")).await;
    let bound = server.url.trim_start_matches("http://");
    let text = serde_json::to_string(&entry)
        .unwrap()
        .replace("127.0.0.1:9310", bound);
    smoke(&serde_json::from_str(&text).unwrap(), &path_with_binary()).await;
    assert!(server.terminate().await.success());
}
