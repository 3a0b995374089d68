//! Author-shaped prompt fixtures run offline through the public API. Every `fixtures/run/*.md`
//! is parsed and run (args from `<name>.args`, the declared input seeded from `<name>.seed`);
//! every `fixtures/parse/*.md` must fail to parse. What each produces (structure, result or
//! error, Lua `log` checkpoints, the store's contents; or the parse error's kind, line, span
//! and message) is compared with `<name>.expected` beside it. `UPDATE_EXPECT=1` rewrites the
//! expected files instead of comparing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use promptforge_core::{
    NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig, StoreRef, run,
};

fn dir(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind)
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {kind}");
    out
}

fn sidecar(path: &Path, ext: &str) -> Option<String> {
    std::fs::read_to_string(path.with_extension(ext)).ok()
}

fn q(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// Compares every actual rendering with its `.expected` file (or rewrites them).
fn compare(actual: Vec<(PathBuf, String)>) {
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for (path, text) in actual {
        let expected_path = path.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &text).unwrap();
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == text => {}
            Ok(expected) => failures.push(format!(
                "{}:\n--- expected\n{expected}--- actual\n{text}",
                path.display()
            )),
            Err(e) => failures.push(format!("{}: {e}", expected_path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture(s) differ (UPDATE_EXPECT=1 refreshes):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[derive(Default)]
struct Logs {
    lines: Mutex<Vec<(String, String)>>,
}

impl Observer for Logs {
    fn observe(&self, execution: &str, _section: &str, event: Observation<'_>) {
        let line = match event {
            Observation::LuaLog { message, .. } => format!("log {}", q(message)),
            Observation::StoreWrite { operation, path } => format!("store {operation} {path}"),
            Observation::ArmFinished { index, ok, .. } => format!("arm {index} ok={ok}"),
            _ => return,
        };
        self.lines
            .lock()
            .unwrap()
            .push((execution.to_owned(), line));
    }
}

fn structure(prompt: &Prompt) -> String {
    let fm = prompt.frontmatter();
    let mut out = format!("title: {}\n", q(prompt.title()));
    if let Some(input) = fm.input() {
        writeln!(out, "input: {}", input.path()).unwrap();
    }
    if let Some(output) = fm.output() {
        writeln!(out, "output: {}", output.path()).unwrap();
    }
    writeln!(out, "max_tool_iterations: {}", fm.max_tool_iterations()).unwrap();
    writeln!(out, "shared_blocks: {}", prompt.shared_block_count()).unwrap();
    for s in prompt.sections() {
        writeln!(
            out,
            "section: {} line={} lua={} prose={} off_walk={} items={}",
            s.heading(),
            s.line(),
            s.lua_block_count(),
            s.prose_block_count(),
            s.is_off_walk(),
            s.items().len()
        )
        .unwrap();
    }
    out
}

/// Runs one fixture with its own execution id; returns its rendering and the observer lines.
async fn render_run(path: &Path, execution: &str) -> (String, Vec<(String, String)>) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let source = std::fs::read_to_string(path).unwrap();
    let prompt = Prompt::parse_named(&name, &source, execution, &NullObserver)
        .unwrap_or_else(|e| panic!("{e}"));
    let args = sidecar(path, "args").unwrap_or_default();
    let args = args.strip_suffix('\n').unwrap_or(&args).to_owned();
    let store = StoreRef::memory();
    if let (Some(input), Some(seed)) = (prompt.frontmatter().input(), sidecar(path, "seed")) {
        store.write(input.path(), &seed).unwrap();
    }
    let logs = Arc::new(Logs::default());
    let config = RunConfig::new(execution).observer(logs.clone());
    let result = run(&prompt, &args, ResolutionContext::empty(), &store, config).await;
    let mut out = structure(&prompt);
    match result {
        Ok(value) => writeln!(out, "result: {}", q(&value)).unwrap(),
        Err(e) => writeln!(out, "error: {} {}", e.kind(), q(&e.to_string())).unwrap(),
    }
    let lines = logs.lines.lock().unwrap().clone();
    for (_, line) in lines.iter().filter(|(_, l)| l.starts_with("log ")) {
        writeln!(out, "{line}").unwrap();
    }
    let mut paths = store.paths().unwrap();
    paths.sort();
    for p in paths {
        writeln!(out, "file {p}: {}", q(&store.read(&p).unwrap())).unwrap();
    }
    (out, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_fixtures_match_their_expected_outputs() {
    let mut actual = Vec::new();
    for path in fixtures("run") {
        let (text, _) = render_run(&path, "fixture").await;
        actual.push((path, text));
    }
    compare(actual);
}

#[test]
fn parse_fixtures_fail_with_their_expected_errors() {
    let mut actual = Vec::new();
    for path in fixtures("parse") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&path).unwrap();
        let error = match Prompt::parse_named(&name, &source, "fixture", &NullObserver) {
            Ok(_) => panic!("{name} parsed but must be rejected"),
            Err(e) => e,
        };
        let mut out = format!("kind: {}\n", error.kind().as_str());
        match error.line() {
            Some(line) => writeln!(out, "line: {line}").unwrap(),
            None => out.push_str("line: none\n"),
        }
        match error.span() {
            Some(span) => writeln!(out, "span: {}", q(&source[span])).unwrap(),
            None => out.push_str("span: none\n"),
        }
        writeln!(out, "origin: {}", error.origin()).unwrap();
        writeln!(out, "message: {}", q(&error.to_string())).unwrap();
        actual.push((path, out));
    }
    compare(actual);
}

/// Several fixtures at once in one process: each run sees only its own execution id in its
/// observations, leaves its own store, and renders exactly as when run alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_executions_stay_separate() {
    let names = ["map_reduce.md", "router.md", "research_pipeline.md"];
    let mut handles = Vec::new();
    for round in 0..2 {
        for name in names {
            let path = dir("run").join(name);
            let execution = format!("exec-{round}-{name}");
            handles.push(tokio::spawn(async move {
                let (text, lines) = render_run(&path, &execution).await;
                (path, execution, text, lines)
            }));
        }
    }
    let mut outputs = Vec::new();
    for handle in handles {
        let (path, execution, text, lines) = handle.await.unwrap();
        assert!(!lines.is_empty(), "{execution}: nothing observed");
        for (seen, line) in &lines {
            assert_eq!(seen, &execution, "{line} reported under another execution");
        }
        outputs.push((path, text));
    }
    // Every concurrent rendering equals the checked-in expectation.
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v != "0");
    if !update {
        compare(outputs);
    }
}
