//! `promptforge run --trace/--trace-html`: the trace file (valid against the published
//! schema), the self-contained viewer in a real headless Chromium, and the checks made
//! before a run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../promptforge-core/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};

use promptforge_test_support::browser::{Browser, artifacts_dir};
use serde_json::{Value, json};
use support::{KEY, Upstream, calls, text};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const TRACED: &str = "crates/promptforge-core/tests/fixtures/trace/traced.md";

async fn promptforge(args: &[&str], gateway: Option<&str>) -> std::process::Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge"));
    command
        .args(args)
        .current_dir(repo())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    match gateway {
        Some(url) => command
            .env("PROMPTFORGE_GATEWAY_URL", url)
            .env("PROMPTFORGE_GATEWAY_API_KEY", KEY),
        None => command
            .env_remove("PROMPTFORGE_GATEWAY_URL")
            .env_remove("PROMPTFORGE_GATEWAY_API_KEY"),
    };
    command.output().await.unwrap()
}

#[track_caller]
fn assert_valid(document: &serde_json::Value) {
    let errors = promptforge_test_support::schema_errors(promptforge_core::trace::SCHEMA, document);
    assert!(errors.is_empty(), "invalid trace:\n{}", errors.join("\n"));
}

fn kinds(document: &Value, kind: &str) -> Vec<Value> {
    document["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == kind)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_run_writes_a_valid_trace_and_a_viewer_a_browser_renders() {
    let upstream = Upstream::start(vec![
        calls(&[
            ("web_search", r#"{"query":"rust"}"#),
            ("web_search", r#"{"query":"lua"}"#),
        ]),
        text("Rust and Lua."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("run.json");
    let html_path = dir.path().join("run.html");
    let output = promptforge(
        &[
            "run",
            "--trace",
            json_path.to_str().unwrap(),
            "--trace-html",
            html_path.to_str().unwrap(),
            TRACED,
            "languages",
        ],
        Some(&upstream.url),
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "summary of Rust and Lua. | arm a #1,arm b #2"
    );

    let document: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_valid(&document);
    assert_eq!(document["run"]["status"], "ok");
    assert_eq!(document["source"]["path"], TRACED);
    assert_eq!(kinds(&document, "tool_call").len(), 2);
    assert_eq!(kinds(&document, "arm").len(), 2);
    // The real web_search tool called the gateway; the model requests carried the trace.
    assert_eq!(upstream.searches().len(), 2);
    let trace_id = document["trace_id"].as_str().unwrap();
    for header in upstream.traceparents() {
        assert!(header.unwrap().starts_with(&format!("00-{trace_id}-")));
    }
    assert!(!std::fs::read_to_string(&json_path).unwrap().contains(KEY));

    check_viewer(&html_path).await;
}

/// Loads the viewer file in headless Chromium and reads the section names, a tool call's
/// arguments and a store diff from the rendered page.
async fn check_viewer(html: &Path) {
    let browser = Browser::locate().unwrap();
    let shots = artifacts_dir();
    std::fs::create_dir_all(&shots).unwrap();
    let trace_png = shots.join("viewer-file-trace.png");
    let store_png = shots.join("viewer-file-store.png");
    let url = format!("file://{}", html.display());
    let report = browser
        .run(&json!([
            {"goto": url},
            {"wait": "body[data-ready='1']", "state": "attached"},
            {"texts": "#tree .row .name", "as": "names"},
            {"text": "#status", "as": "status"},
            {"click": "#tree .row[data-kind='tool_call'] .name"},
            {"text": "#details pre.args", "as": "arguments"},
            {"text": "#details", "as": "tool_details"},
            {"screenshot": trace_png.to_str().unwrap(), "clip": {"x": 0, "y": 0, "width": 1400, "height": 760}},
            {"click": "nav button[data-tab='store']"},
            {"click": "#store-steps .row[data-step='2'] .name"},
            {"texts": "#store-view .diff .del", "as": "removed"},
            {"texts": "#store-view .diff .add", "as": "added"},
            {"text": "#store-view h2", "as": "store_heading"},
            {"screenshot": store_png.to_str().unwrap(), "clip": {"x": 0, "y": 0, "width": 1400, "height": 760}},
            {"click": "nav button[data-tab='sections']"},
            {"texts": "#sections td:first-child", "as": "section_rows"},
        ]))
        .await
        .unwrap();
    assert_eq!(report["errors"], json!([]), "{report}");
    let names: Vec<&str> = report["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for section in [
        "# Traced",
        "## Plan",
        "## Research",
        "### Summarize",
        "## Fan",
        "### Worker",
    ] {
        assert!(names.contains(&section), "{section} is not in {names:?}");
    }
    assert_eq!(report["status"], "ok");
    assert!(
        report["arguments"]
            .as_str()
            .unwrap()
            .contains("\"query\": \"rust\""),
        "{report}"
    );
    assert!(
        report["tool_details"]
            .as_str()
            .unwrap()
            .contains("Rust 2026"),
        "{report}"
    );
    assert_eq!(report["removed"], json!(["plan"]), "{report}");
    assert_eq!(report["added"], json!(["planned"]), "{report}");
    assert!(
        report["store_heading"]
            .as_str()
            .unwrap()
            .contains("str_replace notes.md")
    );
    let rows = report["section_rows"].as_array().unwrap();
    assert!(rows.contains(&json!("### Worker")), "{report}");
    assert!(std::fs::metadata(&trace_png).unwrap().len() > 10_000);
    assert!(std::fs::metadata(&store_png).unwrap().len() > 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_still_writes_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = dir.path().join("fails.md");
    std::fs::write(
        &prompt,
        "---\nname: fails\ndescription: d\npromptforge: 1\n---\n\n# Fails\n\n## Step\n\n```lua\nstore.write(\"a.txt\", \"x\")\nerror(\"boom\")\n```\n",
    )
    .unwrap();
    let trace = dir.path().join("t.json");
    let output = promptforge(
        &[
            "run",
            "--trace",
            trace.to_str().unwrap(),
            prompt.to_str().unwrap(),
        ],
        None,
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    let document: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert_valid(&document);
    assert_eq!(document["run"]["status"], "error");
    let step = &kinds(&document, "section")[0];
    assert_eq!(step["status"], "error");
    assert!(step["error"]["message"].as_str().unwrap().contains("boom"));
    assert_eq!(step["line"], 9);
    assert_eq!(kinds(&document, "store")[0]["line"], 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_trace_path_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/t.json");
    let output = promptforge(
        &[
            "run",
            "--trace",
            missing.to_str().unwrap(),
            "prompts/echo.md",
            "x",
        ],
        None,
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: --trace "), "{stderr}");
    assert!(stderr.contains("cannot use the directory"), "{stderr}");
    let output = promptforge(
        &[
            "run",
            "--trace-html",
            dir.path().to_str().unwrap(),
            "prompts/echo.md",
            "x",
        ],
        None,
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is a directory"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_trace_flags_nothing_is_written_and_no_traceparent_is_sent() {
    let upstream = Upstream::start(vec![text("Hello, World!")]).await;
    upstream.set_catalog(json!({"object": "list", "data": [
        {"id": "smol-chat", "object": "model", "kind": "chat",
         "description": "A small friendly general-purpose chat model that follows instructions",
         "context": 2048, "thinking": "never"}]}));
    let output = promptforge(&["run", "prompts/greet.md", "World"], Some(&upstream.url)).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(upstream.traceparents(), [None]);
}
