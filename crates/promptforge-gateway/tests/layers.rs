//! The gateway's module layering, checked on the sources: every `crate::` and `super::`
//! path in a module's code (comments and `#[cfg(test)]` modules left out) is an edge to
//! the module it names; the graph of top-level modules must follow the layer order of
//! `ARCHITECTURE.md` (each edge goes to a lower layer, so there is no circle), and within
//! each directory the files must not import each other in a circle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module may name modules of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["secret", "shutdown", "logging"],
    &["config"],
    &["admission", "local", "dialect"],
    &["plan"],
    &["relay"],
    &["otel"],
    &["search", "metrics"],
    &["routes"],
    &["app"],
    &["conn"],
    &["serve", "cli"],
];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module path of a source file (`relay/h1.rs` → `relay::h1`, `plan/mod.rs` → `plan`).
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
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

/// The code of a file: comment lines dropped, and everything from a `#[cfg(test)]`
/// module with a body on (test modules sit at the end). Also the names of child modules
/// the file declares test-only (`#[cfg(test)] mod name;`).
fn code(text: &str) -> (Vec<String>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut code = Vec::new();
    let mut test_children = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if line.starts_with("//") {
            i += 1;
            continue;
        }
        if line.starts_with("#[cfg(test)]") {
            let next = lines.get(i + 1).map_or("", |l| l.trim_start());
            if let Some(rest) = next
                .strip_prefix("mod ")
                .or_else(|| next.strip_prefix("pub(crate) mod "))
            {
                if let Some(name) = rest.strip_suffix(';') {
                    test_children.push(name.to_owned());
                    i += 2;
                    continue;
                }
                break;
            }
        }
        code.push(line.to_owned());
        i += 1;
    }
    (code, test_children)
}

/// The module paths a line names: `crate::a::b` and `super::…::a` resolved from `module`.
fn named(line: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !line.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let at_word_start = i == 0 || !word(bytes[i - 1]);
        let rest = &line[i..];
        if at_word_start && (rest.starts_with("crate::") || rest.starts_with("super::")) {
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut base: Vec<String> = if segments[0] == "crate" {
                Vec::new()
            } else {
                module.to_vec()
            };
            let mut rest_segments = &segments[..];
            if segments[0] == "crate" {
                rest_segments = &segments[1..];
            } else {
                while let Some(("super", tail)) = rest_segments.split_first().map(|(h, t)| (*h, t))
                {
                    base.pop();
                    rest_segments = tail;
                }
            }
            base.extend(rest_segments.iter().map(|s| (*s).to_owned()));
            out.push(base);
            i += path.len();
        } else {
            i += 1;
        }
    }
    out
}

/// The module graph: each module to the modules its code names (resolved to the longest
/// existing module path).
fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = rust_files(&src());
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for file in &files {
        let module = module_of(file);
        if matches!(
            module.first().map(String::as_str),
            Some("lib" | "main" | "tests")
        ) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let (lines, test_children) = code(&text);
        for child in test_children {
            let mut path = module.clone();
            path.push(child);
            test_only.insert(path);
        }
        modules.insert(module, lines.join("\n"));
    }
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, text) in &modules {
        if test_only.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        let mut edges = BTreeSet::new();
        for line in text.lines() {
            for mut path in named(line, module) {
                while !path.is_empty() && !known.contains(&path) {
                    path.pop();
                }
                if !path.is_empty() && path != *module && !test_only.contains(&path) {
                    edges.insert(path);
                }
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

/// A circle in `graph`, if there is one (as the nodes along it).
fn circle<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Option<Vec<N>> {
    fn visit<N: Ord + Clone>(
        node: &N,
        graph: &BTreeMap<N, BTreeSet<N>>,
        path: &mut Vec<N>,
        done: &mut BTreeSet<N>,
    ) -> Option<Vec<N>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            return Some(path[start..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(found) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` is in no layer of tests/layers.rs"))
}

#[test]
fn top_level_modules_name_only_lower_layers() {
    let graph = graph();
    assert!(graph.len() >= 40, "too few modules found: {}", graph.len());
    let mut wrong = Vec::new();
    for (module, edges) in &graph {
        let from = &module[0];
        for edge in edges {
            let to = &edge[0];
            if to != from && layer_of(to) >= layer_of(from) {
                wrong.push(format!("{} -> {}", module.join("::"), edge.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "edges to the same or a higher layer:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_directory_imports_itself_in_a_circle() {
    let graph = graph();
    // Within each directory, the graph of its files (edges to the directory's own
    // `mod.rs`, the parent, left out: children use what their parent declares).
    let parents: BTreeSet<Vec<String>> = graph
        .keys()
        .filter(|m| m.len() > 1)
        .map(|m| m[..m.len() - 1].to_vec())
        .collect();
    for parent in parents {
        let siblings: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = graph
            .iter()
            .filter(|(m, _)| m.len() == parent.len() + 1 && m.starts_with(&parent))
            .map(|(m, edges)| {
                let inside = edges
                    .iter()
                    .filter(|e| e.len() > parent.len() && e.starts_with(&parent))
                    .map(|e| e[..=parent.len()].to_vec())
                    .filter(|e| e != m)
                    .collect();
                (m.clone(), inside)
            })
            .collect();
        if let Some(found) = circle(&siblings) {
            let names: Vec<String> = found.iter().map(|m| m.join("::")).collect();
            panic!(
                "a circle in src/{}: {}",
                parent.join("/"),
                names.join(" -> ")
            );
        }
    }
}

#[test]
fn the_checker_finds_a_circle_and_resolves_paths() {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    graph.insert("a", ["b"].into());
    graph.insert("b", ["c"].into());
    graph.insert("c", ["a"].into());
    assert_eq!(circle(&graph), Some(vec!["a", "b", "c"]));
    graph.insert("c", BTreeSet::new());
    assert_eq!(circle(&graph), None);
    let module = vec![
        "routes".to_owned(),
        "chat".to_owned(),
        "contract".to_owned(),
    ];
    assert_eq!(
        named(
            "use super::super::error::ApiError; use crate::plan::Plan;",
            &module
        ),
        vec![
            vec![
                "routes".to_owned(),
                "error".to_owned(),
                "ApiError".to_owned()
            ],
            vec!["plan".to_owned(), "Plan".to_owned()],
        ]
    );
    // The real graph has the edges the layering allows, so the check can fail.
    let real = graph_edges_named("routes", "relay");
    assert!(real, "routes should name the relay");
}

/// Whether some module under `from` names some module under `to`.
fn graph_edges_named(from: &str, to: &str) -> bool {
    graph()
        .iter()
        .filter(|(m, _)| m[0] == from)
        .any(|(_, edges)| edges.iter().any(|e| e[0] == to))
}
