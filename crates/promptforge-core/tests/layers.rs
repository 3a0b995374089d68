//! The module layering inside core, checked on the sources: the walk (`engine/`) calls the
//! model and tool layer (`agent/`) and never the reverse; `sandbox/` (the prelude and the
//! Lua value conversions) and `parse/` sit below both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines of the files under `dir` (code only: comment lines are skipped) that name
/// one of `forbidden`, as `path:line: text`.
fn offending_lines(dir: &str, forbidden: &[&str]) -> (usize, Vec<String>) {
    let files = rust_files(&src().join(dir));
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if forbidden.iter().any(|f| code.contains(f)) {
                found.push(format!("{}:{}: {}", file.display(), number + 1, code));
            }
        }
    }
    (files.len(), found)
}

fn assert_layer(dir: &str, at_least: usize, forbidden: &[&str]) {
    let (files, found) = offending_lines(dir, forbidden);
    assert!(
        files >= at_least,
        "expected at least {at_least} files under src/{dir}, found {files}: did the layer move?"
    );
    assert!(
        found.is_empty(),
        "src/{dir} must not depend on {forbidden:?}:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_agent_layer_never_names_the_walk() {
    assert_layer(
        "agent",
        5,
        &[
            "crate::engine",
            "super::engine",
            "engine::",
            "use super::super",
        ],
    );
}

#[test]
fn the_sandbox_names_neither_layer() {
    assert_layer(
        "sandbox",
        2,
        &["crate::engine", "crate::agent", "engine::", "agent::"],
    );
}

#[test]
fn the_parser_names_neither_layer() {
    assert_layer(
        "parse",
        5,
        &["crate::engine", "crate::agent", "engine::", "agent::"],
    );
}

#[test]
fn the_trace_names_neither_layer() {
    // The walk and the agent layer record through `trace`; it never reaches back.
    assert_layer(
        "trace",
        4,
        &["crate::engine", "crate::agent", "engine::", "agent::"],
    );
}

#[test]
fn the_checker_sees_a_reverse_dependency() {
    // The check itself can fail: the walk does name the agent layer.
    let (files, found) = offending_lines("engine", &["crate::agent"]);
    assert!(files >= 5);
    assert!(!found.is_empty(), "the walk should call the agent layer");
}
