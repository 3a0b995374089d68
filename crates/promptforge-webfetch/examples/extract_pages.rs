//! Batch extraction for the comparison script (`scripts/compare.py`): reads a manifest of
//! pages as JSON lines (`{"id": "...", "path": "...", "url": "..."}`; `url` optional, a
//! `.gz` path is gunzipped) from standard input, runs `html_to_markdown` (article rendering)
//! on each, and writes one JSON line per page to standard output:
//! `{"id": "...", "markdown": "...", "extraction": "readability", "seconds": 0.0123}`.
//!
//! `seconds` times `html_to_markdown` alone (the file is read and decoded before the clock
//! starts), so the figure is comparable to the peers timed in-process on an in-memory string.
//!
//! With `--explain`, each record also carries `uncleaned` (the article before the cleanup
//! rules) and `dropped` (`[{"rule": "...", "text": "..."}]`, what each rule removed), from
//! `explain_cleanup`, run after the timed call.
//!
//! With `--full-article`, pages are rendered with `Rendering::FullArticle` (the article
//! without the cleanup rules) instead.
//!
//! Build it in release for speed figures:
//! `cargo run --release -p promptforge-webfetch --example extract_pages < manifest.jsonl`.
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;
use std::time::Instant;

use promptforge_webfetch::{Rendering, explain_cleanup, html_to_markdown};

fn read_page(path: &str) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let bytes = if path.ends_with(".gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice()).read_to_end(&mut out)?;
        out
    } else {
        bytes
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn main() -> ExitCode {
    let (mut explain, mut rendering) = (false, Rendering::Article);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--explain" => explain = true,
            "--full-article" => rendering = Rendering::FullArticle,
            other => {
                eprintln!(
                    "unknown argument {other:?} (the flags are --explain and --full-article)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("manifest line {}: {e}", n + 1);
                return ExitCode::FAILURE;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let entry: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("manifest line {}: not JSON: {e}", n + 1);
                return ExitCode::FAILURE;
            }
        };
        let (Some(id), Some(path)) = (entry["id"].as_str(), entry["path"].as_str()) else {
            eprintln!("manifest line {}: needs string fields id and path", n + 1);
            return ExitCode::FAILURE;
        };
        let html = match read_page(path) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{path}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let url = entry["url"].as_str();
        let start = Instant::now();
        let (markdown, how) = html_to_markdown(&html, url, rendering);
        let seconds = start.elapsed().as_secs_f64();
        let mut record = serde_json::json!({
            "id": id,
            "markdown": markdown,
            "extraction": how.as_str(),
            "seconds": seconds,
        });
        if explain && let Some(explained) = explain_cleanup(&html, url) {
            let dropped: Vec<serde_json::Value> = explained
                .dropped
                .iter()
                .map(|d| serde_json::json!({"rule": d.rule.as_str(), "text": d.text}))
                .collect();
            record["uncleaned"] = explained.uncleaned.into();
            record["dropped"] = dropped.into();
            record["applied"] = explained.applied.into();
        }
        if writeln!(out, "{record}").is_err() {
            return ExitCode::FAILURE;
        }
    }
    if out.flush().is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
