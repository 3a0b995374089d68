//! Model fixtures: every `fixtures/models/*.md` runs against a scripted OpenAI-compatible
//! upstream on loopback replaying `<name>.script.json`. The rendering (result or error, Lua
//! `log` checkpoints, store files, and each request's model, offered tools and message
//! roles, with the tool results sent back) must equal `<name>.expected` (`UPDATE_EXPECT=1`
//! rewrites it). Every script entry must be consumed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use promptforge_core::client::{GatewayClient, RequestLimits};
use promptforge_core::{
    NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig, StoreRef,
    ToolCatalog, run,
};
use promptforge_tool_picker::{Config, ToolPicker};
use serde_json::Value as Json;

fn q(text: &str) -> String {
    Json::String(text.to_owned()).to_string()
}

#[derive(Default)]
struct Logs(Mutex<Vec<String>>);

impl Observer for Logs {
    fn observe(&self, _execution: &str, _section: &str, event: Observation<'_>) {
        if let Observation::LuaLog { message, .. } = event {
            self.0.lock().unwrap().push(message.to_owned());
        }
    }
}

fn describe(request: &Json) -> String {
    let tools: Vec<String> = request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default();
    let messages = request["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect();
    let mut out = format!(
        "request model={} tools=[{}] roles=[{}]\n",
        request["model"].as_str().unwrap_or("?"),
        tools.join(","),
        roles.join(",")
    );
    for m in messages.iter().filter(|m| m["role"] == "tool") {
        writeln!(
            out,
            "  tool {}: {}",
            m["tool_call_id"].as_str().unwrap_or("?"),
            q(m["content"].as_str().unwrap_or(""))
        )
        .unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_fixtures_match_their_expected_outputs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    let tools = ToolCatalog::new(&[]).unwrap();
    let picker = ToolPicker::build(tools.picker_catalog(), Config::default()).unwrap();
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let script: Vec<Json> = serde_json::from_str(
            &std::fs::read_to_string(path.with_extension("script.json")).unwrap(),
        )
        .unwrap();
        let upstream = support::Upstream::start(&script).await;
        let client = GatewayClient::new(&upstream.url, support::KEY).unwrap();
        let models = client.models(RequestLimits::default()).await.unwrap();
        let source = std::fs::read_to_string(&path).unwrap();
        let prompt = Prompt::parse_named(&name, &source, "fixture", &NullObserver).unwrap();
        let logs = Arc::new(Logs::default());
        let store = StoreRef::memory();
        let config = RunConfig::new("fixture")
            .client(client)
            .observer(logs.clone());
        let result = run(
            &prompt,
            "",
            ResolutionContext::new(&picker, &models, &tools),
            &store,
            config,
        )
        .await;
        let mut out = String::new();
        match result {
            Ok(value) => writeln!(out, "result: {}", q(&value)).unwrap(),
            Err(e) => writeln!(out, "error: {} {}", e.kind(), q(&e.to_string())).unwrap(),
        }
        for line in logs.0.lock().unwrap().iter() {
            writeln!(out, "log {}", q(line)).unwrap();
        }
        let mut files = store.paths().unwrap();
        files.sort();
        for p in files {
            writeln!(out, "file {p}: {}", q(&store.read(&p).unwrap())).unwrap();
        }
        for request in upstream.requests() {
            out.push_str(&describe(&request));
        }
        assert_eq!(
            upstream.remaining(),
            0,
            "{name}: script entries left unused"
        );
        let expected_path = path.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &out).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != out {
            failures.push(format!(
                "{name}:\n--- expected\n{expected}--- actual\n{out}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "model fixtures differ (UPDATE_EXPECT=1 refreshes):\n{}",
        failures.join("\n")
    );
}
