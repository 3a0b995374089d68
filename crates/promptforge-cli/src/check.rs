//! `promptforge check [PATH ...]`: every problem in every prompt, without running anything.
//!
//! Paths are files or directories; directories are searched recursively for `*.md` files
//! (hidden directories and symbolic links are not followed). Markdown without a
//! `promptforge:` version is skipped silently when found in a directory, and reported when
//! named explicitly. Diagnostics print as `file:line:col: error[kind]: message`, the format
//! editors and CI annotators read, or as one JSON document with `--format json`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use promptforge_core::parse::{self, Diagnostic};
use promptforge_core::promptforge_version;
use serde_json::{Value as Json, json};

use crate::source::{SourceError, attempts_prompt, claims_promptforge, read_prompt};

/// How many files one check reads at most (directories can be huge).
pub(crate) const MAX_FILES: usize = 100_000;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// `file:line:col: error[kind]: message` lines and a summary line.
    Text,
    /// One JSON document: `{"files": N, "failed": N, "diagnostics": [...]}`.
    Json,
}

/// Whether a file was named on the command line or found in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Named,
    Found,
}

/// One problem, ready to print.
struct Problem {
    file: String,
    line: usize,
    column: usize,
    kind: String,
    message: String,
}

/// What one check found.
pub(crate) struct Report {
    checked: usize,
    failed_files: usize,
    problems: Vec<Problem>,
}

impl Report {
    /// Whether any file had a problem.
    pub(crate) fn failed(&self) -> bool {
        self.failed_files > 0
    }

    /// The report in `format`.
    pub(crate) fn render(&self, format: Format) -> String {
        match format {
            Format::Text => {
                let mut out = String::new();
                for p in &self.problems {
                    let _ = writeln!(
                        out,
                        "{}:{}:{}: error[{}]: {}",
                        one_line(&p.file),
                        p.line,
                        p.column,
                        p.kind,
                        one_line(&p.message)
                    );
                }
                let noun = if self.checked == 1 {
                    "prompt"
                } else {
                    "prompts"
                };
                let _ = if self.failed() {
                    writeln!(
                        out,
                        "checked {} {noun}: {} with problems, {} diagnostic{}",
                        self.checked,
                        self.failed_files,
                        self.problems.len(),
                        if self.problems.len() == 1 { "" } else { "s" }
                    )
                } else {
                    writeln!(out, "checked {} {noun}: no problems", self.checked)
                };
                out
            }
            Format::Json => {
                let diagnostics: Vec<Json> = self
                    .problems
                    .iter()
                    .map(|p| {
                        json!({"file": p.file, "line": p.line, "column": p.column,
                               "kind": p.kind, "message": p.message})
                    })
                    .collect();
                let mut text = json!({
                    "files": self.checked,
                    "failed": self.failed_files,
                    "diagnostics": diagnostics,
                })
                .to_string();
                text.push('\n');
                text
            }
        }
    }
}

/// `text` for one report line, uncut: a file name or a message quoting the prompt's own text
/// (a heading, say) cannot break the line or reorder it with bidirectional controls.
fn one_line(text: &str) -> String {
    promptforge_core::error::quote_text(text, usize::MAX, false)
}

/// Checks every prompt under `paths` (the current directory when empty).
pub(crate) fn check(paths: &[PathBuf]) -> Report {
    let mut files: Vec<(PathBuf, Origin)> = Vec::new();
    let mut problems = Vec::new();
    let defaults = [PathBuf::from(".")];
    let roots = if paths.is_empty() {
        &defaults[..]
    } else {
        paths
    };
    for root in roots {
        match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => collect(root, &mut files, &mut problems),
            Ok(_) => files.push((root.clone(), Origin::Named)),
            Err(error) => problems.push(io_problem(root, &format!("cannot read it: {error}"))),
        }
    }
    let mut failed_files = problems.len();
    let mut checked = 0;
    for (path, origin) in &files {
        let found = check_file(path, *origin);
        match found {
            None => {}
            Some(found) => {
                checked += 1;
                if !found.is_empty() {
                    failed_files += 1;
                }
                problems.extend(found);
            }
        }
    }
    Report {
        checked,
        failed_files,
        problems,
    }
}

/// The problems of one file; `None` when it is not a prompt and was found, not named.
fn check_file(path: &Path, origin: Origin) -> Option<Vec<Problem>> {
    let shown = path.display().to_string();
    let source = match read_prompt(path, &shown) {
        Ok(source) => source,
        Err(SourceError::Encoding(error)) => {
            return Some(vec![Problem {
                file: shown,
                line: error.line().unwrap_or(1),
                column: 1,
                kind: error.kind().as_str().to_owned(),
                message: error.message().to_owned(),
            }]);
        }
        Err(SourceError::Unreadable(error)) => {
            return Some(vec![io_problem(path, &format!("cannot read it: {error}"))]);
        }
        Err(error) => return Some(vec![io_problem(path, &error.to_string())]),
    };
    let is_prompt = match origin {
        Origin::Found => claims_promptforge(&source),
        Origin::Named => promptforge_version(&source).is_some() || attempts_prompt(&source),
    };
    if !is_prompt {
        return match origin {
            Origin::Found => None,
            Origin::Named => Some(vec![Problem {
                file: shown,
                line: 1,
                column: 1,
                kind: "not_a_prompt".to_owned(),
                message: "not a promptforge prompt: its frontmatter declares no `promptforge:` \
                          version"
                    .to_owned(),
            }]),
        };
    }
    Some(
        parse::check(&shown, &source)
            .iter()
            .map(|d| problem(&shown, d))
            .collect(),
    )
}

fn problem(file: &str, diagnostic: &Diagnostic) -> Problem {
    Problem {
        file: file.to_owned(),
        line: diagnostic.line().unwrap_or(1),
        column: diagnostic.column().unwrap_or(1),
        kind: diagnostic.error().kind().as_str().to_owned(),
        message: diagnostic.error().message().to_owned(),
    }
}

fn io_problem(path: &Path, why: &str) -> Problem {
    Problem {
        file: path.display().to_string(),
        line: 1,
        column: 1,
        kind: "io".to_owned(),
        message: why.to_owned(),
    }
}

/// Collects `*.md` files below `dir`, sorted, skipping hidden directories and symlinks.
fn collect(dir: &Path, files: &mut Vec<(PathBuf, Origin)>, problems: &mut Vec<Problem>) {
    let first = files.len();
    walk(dir, files, problems);
    files[first..].sort_by(|a, b| a.0.cmp(&b.0));
}

fn walk(dir: &Path, files: &mut Vec<(PathBuf, Origin)>, problems: &mut Vec<Problem>) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) => {
                problems.push(io_problem(&dir, &format!("cannot list it: {error}")));
                continue;
            }
        };
        let mut found: Vec<(PathBuf, bool)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let kind = entry.file_type().ok()?;
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                if kind.is_symlink() || hidden {
                    return None;
                }
                let path = entry.path();
                // `promptforge check` with no path names files as `prompts/x.md`, not `./prompts/x.md`.
                let path = match path.strip_prefix(".") {
                    Ok(inner) if dir == Path::new(".") => inner.to_path_buf(),
                    _ => path,
                };
                Some((path, kind.is_dir()))
            })
            .collect();
        found.sort();
        for (path, is_dir) in found.into_iter().rev() {
            if is_dir {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                if files.len() == MAX_FILES {
                    problems.push(io_problem(
                        &path,
                        &format!("more than {MAX_FILES} Markdown files; check fewer at a time"),
                    ));
                    return;
                }
                files.push((path, Origin::Found));
            }
        }
    }
}
