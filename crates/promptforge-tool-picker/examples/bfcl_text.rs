//! Experiment: dense recall@1/@5 on the BFCL pools for several tool-text variants
//! (0: name in words + description; 1: + parameter names as a list; 2: + parameter names;
//! 3: + parameter names and descriptions), each with the raw question and with the
//! question's number-bearing words removed. Not part of the test run.
//!
//! ```text
//! cargo run -p promptforge-tool-picker --example bfcl_text -- "$DATA"
//! ```
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::collections::{HashMap, HashSet};
use std::path::Path;

use promptforge_tool_picker::Model;
use serde_json::Value;

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn words(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !out.ends_with(' ') {
                out.push(' ');
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            out.extend(c.to_lowercase());
        } else {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            prev_lower = false;
        }
    }
    out.trim_end().to_owned()
}

fn variant(f: &Value, v: usize) -> String {
    let name = words(f["name"].as_str().unwrap_or_default());
    let desc = f["description"].as_str().unwrap_or_default().trim();
    let props = f["parameters"]["properties"].as_object();
    let mut s = format!("{name}: {desc}");
    if v == 0 {
        return s;
    }
    if let Some(props) = props {
        let names: Vec<String> = props.keys().map(|k| words(k)).collect();
        if v == 1 {
            s.push_str(&format!(" Parameters: {}.", names.join(", ")));
        } else {
            s.push_str(" Parameters:");
            for (k, p) in props {
                s.push_str(&format!(" {}", words(k)));
                if v == 3
                    && let Some(d) = p["description"].as_str()
                {
                    s.push_str(&format!(" ({})", d.trim().trim_end_matches('.')));
                }
                s.push(',');
            }
        }
    }
    s
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn strip_numbers(q: &str) -> String {
    q.split_whitespace()
        .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let dir = Path::new(&dir);
    let model = Model::load().unwrap();
    for file in ["BFCL_v4_multiple.json", "BFCL_v4_live_simple.json"] {
        let data = lines(&dir.join(file));
        let truth: HashMap<String, String> = lines(&dir.join("possible_answer").join(file))
            .into_iter()
            .map(|v| {
                (
                    v["id"].as_str().unwrap().to_owned(),
                    v["ground_truth"][0]
                        .as_object()
                        .unwrap()
                        .keys()
                        .next()
                        .unwrap()
                        .clone(),
                )
            })
            .collect();
        let mut seen = HashSet::new();
        let mut funcs = Vec::new();
        for e in &data {
            for f in e["function"].as_array().unwrap() {
                let key = (f["name"].to_string(), f["description"].to_string());
                if seen.insert(key) {
                    funcs.push(f.clone());
                }
            }
        }
        let questions: Vec<(String, String)> = data
            .iter()
            .map(|v| {
                let q = v["question"][0]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .filter_map(|m| m["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                (q, truth[v["id"].as_str().unwrap()].clone())
            })
            .collect();
        let qe: Vec<Vec<f32>> = questions
            .iter()
            .map(|(q, _)| model.embed(q).unwrap())
            .collect();
        let qs: Vec<Vec<f32>> = questions
            .iter()
            .map(|(q, _)| model.embed(&strip_numbers(q)).unwrap())
            .collect();
        for v in 0..4 {
            let te: Vec<Vec<f32>> = funcs
                .iter()
                .map(|f| model.embed(&variant(f, v)).unwrap())
                .collect();
            for (label, qv) in [("raw", &qe), ("no-numbers", &qs)] {
                let (mut r1, mut r5) = (0, 0);
                for ((_, t), q) in questions.iter().zip(qv.iter()) {
                    let mut ranked: Vec<(usize, f32)> =
                        te.iter().enumerate().map(|(i, e)| (i, dot(q, e))).collect();
                    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    let hit = |k: usize| {
                        ranked
                            .iter()
                            .take(k)
                            .any(|&(i, _)| funcs[i]["name"].as_str() == Some(t))
                    };
                    r1 += usize::from(hit(1));
                    r5 += usize::from(hit(5));
                }
                let n = questions.len() as f64;
                println!(
                    "{file} variant {v} {label}: recall@1 {:.3} recall@5 {:.3}",
                    r1 as f64 / n,
                    r5 as f64 / n
                );
            }
        }
    }
}
