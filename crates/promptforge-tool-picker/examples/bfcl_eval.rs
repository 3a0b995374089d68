//! Quality of the picker on the Berkeley Function Calling Leaderboard (BFCL v4) data, and
//! the threshold sweep the defaults were calibrated with. Not part of the test run.
//!
//! ```text
//! DATA=$(crates/promptforge-tool-picker/scripts/fetch-bfcl.sh)
//! cargo run --release -p promptforge-tool-picker --example bfcl_eval -- "$DATA" [--sweep]
//! ```
//!
//! * `BFCL_v4_multiple.json`, `BFCL_v4_live_simple.json`: each question against the pool of
//!   every distinct function in its file; the answer is the function the question calls.
//! * `BFCL_v4_live_irrelevance.json`: each question against its own functions, none of
//!   which answers it; the right outcome is `Absent`.
//!
//! `--sweep` grid-searches the lexical weight and thresholds on the even-numbered questions
//! (the calibration half) and shows the best settings on both halves.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use promptforge_tool_picker::{
    Catalog, Config, Model, Outcome, ToolDescriptor, ToolId, ToolPicker,
};
use serde_json::Value;

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One BFCL entry: the user's words and the functions offered with them.
struct Entry {
    question: String,
    functions: Vec<ToolDescriptor>,
}

fn read_lines(path: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Ok(serde_json::from_str(l)?))
        .collect()
}

fn entries(path: &Path) -> Result<Vec<(String, Entry)>, Error> {
    read_lines(path)?
        .into_iter()
        .map(|v| {
            let id = v["id"].as_str().ok_or("entry without id")?.to_owned();
            // The first turn's user messages.
            let question = v["question"][0]
                .as_array()
                .ok_or("entry without question")?
                .iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let functions = v["function"]
                .as_array()
                .ok_or("entry without functions")?
                .iter()
                .map(|f| {
                    ToolDescriptor::new(
                        ToolId::new("bfcl", f["name"].as_str().unwrap_or_default()),
                        f["description"].as_str().unwrap_or_default(),
                        f["parameters"].clone(),
                    )
                })
                .collect();
            Ok((
                id,
                Entry {
                    question,
                    functions,
                },
            ))
        })
        .collect()
}

/// The name of the function each entry's ground truth calls.
fn answers(path: &Path) -> Result<HashMap<String, String>, Error> {
    read_lines(path)?
        .into_iter()
        .map(|v| {
            let id = v["id"].as_str().ok_or("answer without id")?.to_owned();
            let name = v["ground_truth"][0]
                .as_object()
                .and_then(|o| o.keys().next())
                .ok_or("answer without a function")?
                .clone();
            Ok((id, name))
        })
        .collect()
}

/// A relevant question with every pool tool's dense and lexical scores.
struct Scored {
    question: String,
    truth: String,
    dense: Vec<f32>,
    lexical: Vec<f32>,
}

struct Pool {
    name: &'static str,
    picker: ToolPicker,
    questions: Vec<Scored>,
}

fn dense_only() -> Result<Config, Error> {
    Ok(Config::default().with_lexical_weight(0.0)?)
}

fn lexical_only() -> Result<Config, Error> {
    Ok(Config::default().with_lexical_weight(1.0)?)
}

/// Per-tool scores in catalog order, read back through the public ranking.
fn scores(picker: &ToolPicker, need: &str) -> Result<Vec<f32>, Error> {
    let tools = picker.catalog().as_slice();
    let mut out = vec![0.0; tools.len()];
    for s in picker.rank(need, tools.len())? {
        let i = tools
            .iter()
            .position(|t| std::ptr::eq(t, s.tool()))
            .ok_or("ranked tool not in catalog")?;
        out[i] = s.score();
    }
    Ok(out)
}

fn pool(model: &Model, dir: &Path, file: &'static str, sweep: bool) -> Result<Pool, Error> {
    let data = entries(&dir.join(file))?;
    let truth = answers(&dir.join("possible_answer").join(file))?;
    let mut seen = std::collections::HashSet::new();
    let catalog: Catalog = data
        .iter()
        .flat_map(|(_, e)| e.functions.iter())
        .filter(|f| seen.insert((f.name().to_owned(), f.description().to_owned())))
        .cloned()
        .collect();
    let started = Instant::now();
    let picker = ToolPicker::build_with_model(model, catalog, Config::default())?;
    eprintln!(
        "{file}: {} questions, pool of {} functions indexed in {:.1} s",
        data.len(),
        picker.len(),
        started.elapsed().as_secs_f64()
    );
    let dense = picker.with_config(dense_only()?);
    let lexical = picker.with_config(lexical_only()?);
    let mut questions = Vec::new();
    for (id, entry) in data {
        let truth = truth.get(&id).ok_or(format!("no answer for {id}"))?.clone();
        let (d, l) = if sweep {
            (
                scores(&dense, &entry.question)?,
                scores(&lexical, &entry.question)?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        questions.push(Scored {
            dense: d,
            lexical: l,
            question: entry.question,
            truth,
        });
    }
    Ok(Pool {
        name: file,
        picker,
        questions,
    })
}

/// An irrelevant question with its own small catalog.
struct Irrelevant {
    question: String,
    picker: ToolPicker,
    dense: Vec<f32>,
    lexical: Vec<f32>,
}

fn irrelevance(model: &Model, dir: &Path, sweep: bool) -> Result<Vec<Irrelevant>, Error> {
    let file = "BFCL_v4_live_irrelevance.json";
    let started = Instant::now();
    let mut out = Vec::new();
    for (_, entry) in entries(&dir.join(file))? {
        let picker =
            ToolPicker::build_with_model(model, entry.functions.into(), Config::default())?;
        let (dense, lexical) = if sweep {
            (
                scores(&picker.with_config(dense_only()?), &entry.question)?,
                scores(&picker.with_config(lexical_only()?), &entry.question)?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        out.push(Irrelevant {
            dense,
            lexical,
            question: entry.question,
            picker,
        });
    }
    eprintln!(
        "{file}: {} questions scored in {:.1} s",
        out.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(out)
}

/// The library's hybrid, computed the same way (so the bits agree).
fn hybrid(dense: &[f32], lexical: &[f32], w: f32) -> Vec<(usize, f32)> {
    let mut ranked: Vec<(usize, f32)> = dense
        .iter()
        .zip(lexical)
        .map(|(d, l)| (1.0 - w) * d + w * l)
        .enumerate()
        .collect();
    ranked.sort_by(|&(a, sa), &(b, sb)| sb.total_cmp(&sa).then(a.cmp(&b)));
    ranked
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Bind,
    Duplicate,
    Ambiguous,
    Absent,
}

/// A replica of the library's decision for the sweep. Twins are same-name entries (the
/// pools have one server); the reported figures come from the library itself.
fn decide(
    ranked: &[(usize, f32)],
    names: &[&str],
    floor: f32,
    solo: f32,
    margin: f32,
    top_k: usize,
) -> (Kind, Vec<usize>) {
    let Some(&(lead, top)) = ranked.first() else {
        return (Kind::Absent, vec![]);
    };
    if top < floor {
        let runner = ranked.get(1).map(|&(_, s)| s);
        return if top >= solo && runner.is_none_or(|s| s < solo) {
            (Kind::Bind, vec![lead])
        } else {
            (Kind::Absent, vec![])
        };
    }
    let n = ranked.iter().take_while(|&&(_, s)| s >= floor).count();
    let cands = &ranked[..n];
    let twins: Vec<usize> = std::iter::once(lead)
        .chain(
            cands[1..]
                .iter()
                .map(|&(i, _)| i)
                .filter(|&i| names[i] == names[lead]),
        )
        .collect();
    if twins.len() > 1 {
        return (Kind::Duplicate, twins);
    }
    if n == 1 || top - cands[1].1 >= margin {
        return (Kind::Bind, vec![lead]);
    }
    let group = cands
        .iter()
        .take_while(|&&(_, s)| top - s < margin)
        .take(top_k.max(2))
        .map(|&(i, _)| i)
        .collect();
    (Kind::Ambiguous, group)
}

#[derive(Default, Clone, Copy)]
struct Tally {
    questions: usize,
    top1: usize,
    top5: usize,
    bind: usize,
    bind_right: usize,
    duplicate: usize,
    ambiguous: usize,
    group_right: usize,
    absent: usize,
}

impl Tally {
    fn rate(&self, n: usize) -> f64 {
        if self.questions == 0 {
            0.0
        } else {
            n as f64 / self.questions as f64
        }
    }
    /// Questions whose outcome offers the right function (bound, or in the group).
    fn useful(&self) -> f64 {
        self.rate(self.bind_right + self.group_right)
    }
    fn wrong_bind(&self) -> f64 {
        self.rate(self.bind - self.bind_right)
    }
}

#[derive(Clone, Copy)]
struct Params {
    w: f32,
    floor: f32,
    solo: f32,
    margin: f32,
}

fn tally_pool(
    pool: &Pool,
    rankings: &[Vec<(usize, f32)>],
    p: &Params,
    keep: impl Fn(usize) -> bool,
) -> Tally {
    let names: Vec<&str> = pool.picker.iter().map(ToolDescriptor::name).collect();
    let mut t = Tally::default();
    for (q, ranked) in pool
        .questions
        .iter()
        .zip(rankings)
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, x)| x)
    {
        t.questions += 1;
        let hit = |k: usize| ranked.iter().take(k).any(|&(i, _)| names[i] == q.truth);
        t.top1 += usize::from(hit(1));
        t.top5 += usize::from(hit(5));
        let (kind, group) = decide(ranked, &names, p.floor, p.solo, p.margin, 5);
        let right = group.iter().any(|&i| names[i] == q.truth);
        match kind {
            Kind::Bind => {
                t.bind += 1;
                t.bind_right += usize::from(right);
            }
            Kind::Duplicate => {
                t.duplicate += 1;
                t.group_right += usize::from(right);
            }
            Kind::Ambiguous => {
                t.ambiguous += 1;
                t.group_right += usize::from(right);
            }
            Kind::Absent => t.absent += 1,
        }
    }
    t
}

fn abstention(
    irrelevant: &[Irrelevant],
    rankings: &[Vec<(usize, f32)>],
    p: &Params,
    keep: impl Fn(usize) -> bool,
) -> (f64, f64) {
    let mut n = 0usize;
    let mut absent = 0usize;
    let mut bound = 0usize;
    for (i, (q, ranked)) in irrelevant.iter().zip(rankings).enumerate() {
        if !keep(i) {
            continue;
        }
        let names: Vec<&str> = q.picker.iter().map(ToolDescriptor::name).collect();
        n += 1;
        match decide(ranked, &names, p.floor, p.solo, p.margin, 5).0 {
            Kind::Absent => absent += 1,
            Kind::Bind => bound += 1,
            Kind::Duplicate | Kind::Ambiguous => {}
        }
    }
    let rate = |x: usize| x as f64 / n.max(1) as f64;
    (rate(absent), rate(bound))
}

/// One question's ranking: (catalog position, score), best first.
type Ranking = Vec<(usize, f32)>;

const WEIGHTS: [f32; 7] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6];

fn sweep(pools: &[Pool], irrelevant: &[Irrelevant]) {
    let even = |i: usize| i.is_multiple_of(2);
    let odd = |i: usize| i % 2 == 1;
    // Rankings per weight, computed once.
    let pool_rankings: Vec<Vec<Vec<Ranking>>> = WEIGHTS
        .iter()
        .map(|&w| {
            pools
                .iter()
                .map(|pool| {
                    pool.questions
                        .iter()
                        .map(|q| hybrid(&q.dense, &q.lexical, w))
                        .collect()
                })
                .collect()
        })
        .collect();
    let irrelevant_rankings: Vec<Vec<Ranking>> = WEIGHTS
        .iter()
        .map(|&w| {
            irrelevant
                .iter()
                .map(|q| hybrid(&q.dense, &q.lexical, w))
                .collect()
        })
        .collect();

    println!("\n## Recall by lexical weight (all questions)\n");
    println!("| lexical weight | pool | recall@1 | recall@5 |");
    println!("| --- | --- | --- | --- |");
    for w in WEIGHTS.into_iter().chain([0.8, 1.0]) {
        for pool in pools {
            let p = Params {
                w,
                floor: 0.0,
                solo: 0.0,
                margin: 0.0,
            };
            let rankings: Vec<Ranking> = pool
                .questions
                .iter()
                .map(|q| hybrid(&q.dense, &q.lexical, w))
                .collect();
            let t = tally_pool(pool, &rankings, &p, |_| true);
            println!(
                "| {w:.1} | {} | {:.3} | {:.3} |",
                pool.name,
                t.rate(t.top1),
                t.rate(t.top5)
            );
        }
    }

    // Objective on the calibration half: relevant and irrelevant questions weigh the same.
    // A relevant question earns 1 for binding the right function, 0.5 for a group that
    // offers it, and loses 1 for binding a wrong one (an unattended wrong binding is the
    // costly failure); an irrelevant question earns 1 for abstaining and loses 1 for a bind.
    let evaluate =
        |wi: usize, p: &Params, keep: &dyn Fn(usize) -> bool| -> (f64, Vec<Tally>, f64, f64) {
            let tallies: Vec<Tally> = pools
                .iter()
                .enumerate()
                .map(|(pi, pool)| tally_pool(pool, &pool_rankings[wi][pi], p, keep))
                .collect();
            let (abstains, binds) = abstention(irrelevant, &irrelevant_rankings[wi], p, keep);
            let relevant: f64 = tallies
                .iter()
                .map(|t| t.rate(t.bind_right) + 0.5 * t.rate(t.group_right) - t.wrong_bind())
                .sum::<f64>();
            let relevant = relevant / pools.len() as f64;
            let score = (relevant + abstains - binds) / 2.0;
            (score, tallies, abstains, binds)
        };
    let mut best: Vec<(f64, usize, Params)> = Vec::new();
    for (wi, &w) in WEIGHTS.iter().enumerate() {
        for fi in 0..=28 {
            let floor = 0.10 + fi as f32 * 0.025;
            for solo_gap in [0.0f32, 0.05, 0.1, 0.15] {
                for margin in [0.0f32, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2] {
                    let p = Params {
                        w,
                        floor,
                        solo: floor - solo_gap,
                        margin,
                    };
                    let (score, _, _, _) = evaluate(wi, &p, &even);
                    best.push((score, wi, p));
                }
            }
        }
    }
    // The goals as constraints on the calibration half: wrong binds at most 3% of relevant
    // questions on every pool and abstention at least 0.90 on irrelevant ones; among the
    // settings that meet them, the most right binds (averaged over the pools).
    let mut constrained: Vec<(f64, usize, Params)> = Vec::new();
    for (score, wi, p) in &best {
        let (_, tallies, abstains, _) = evaluate(*wi, p, &even);
        if abstains >= 0.90 && tallies.iter().all(|t| t.wrong_bind() <= 0.03) {
            let right =
                tallies.iter().map(|t| t.rate(t.bind_right)).sum::<f64>() / tallies.len() as f64;
            constrained.push((right + score * 1e-6, *wi, Params { ..*p }));
        }
    }
    constrained.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "\n## Most right binds with wrong binds <= 0.03 per pool and abstention >= 0.90 (even half), checked on the odd half\n"
    );
    println!(
        "| right binds (even) | w | floor | solo | margin | half | multiple: right bind / offered / wrong bind | live_simple: right bind / offered / wrong bind | irrelevance: abstains / binds |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (score, wi, p) in constrained.iter().take(6) {
        for (label, keep) in [("even", &even as &dyn Fn(usize) -> bool), ("odd", &odd)] {
            let (_, tallies, abstains, binds) = evaluate(*wi, p, keep);
            let cells: Vec<String> = tallies
                .iter()
                .map(|t| {
                    format!(
                        "{:.3} / {:.3} / {:.3}",
                        t.rate(t.bind_right),
                        t.useful(),
                        t.wrong_bind()
                    )
                })
                .collect();
            println!(
                "| {score:.4} | {:.1} | {:.3} | {:.3} | {:.3} | {label} | {} | {abstains:.3} / {binds:.3} |",
                p.w,
                p.floor,
                p.solo,
                p.margin,
                cells.join(" | "),
            );
        }
    }
    best.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "\n## Best settings on the calibration half (even questions), checked on the odd half\n"
    );
    println!(
        "| objective (even) | w | floor | solo | margin | half | multiple: right bind / offered / wrong bind | live_simple: right bind / offered / wrong bind | irrelevance: abstains / binds |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut shown = 0;
    let mut last_w = Vec::new();
    for (score, wi, p) in &best {
        // The best few overall, then the best for each weight.
        if shown >= 8 && last_w.contains(wi) {
            continue;
        }
        shown += 1;
        last_w.push(*wi);
        for (label, keep) in [("even", &even as &dyn Fn(usize) -> bool), ("odd", &odd)] {
            let (_, tallies, abstains, binds) = evaluate(*wi, p, keep);
            let cells: Vec<String> = tallies
                .iter()
                .map(|t| {
                    format!(
                        "{:.3} / {:.3} / {:.3}",
                        t.rate(t.bind_right),
                        t.useful(),
                        t.wrong_bind()
                    )
                })
                .collect();
            println!(
                "| {score:.4} | {:.1} | {:.3} | {:.3} | {:.3} | {label} | {} | {abstains:.3} / {binds:.3} |",
                p.w,
                p.floor,
                p.solo,
                p.margin,
                cells.join(" | "),
            );
        }
        if shown >= 8 + WEIGHTS.len() {
            break;
        }
    }
}

/// Settings around the defaults at the default lexical weight, on both halves.
fn detail(pools: &[Pool], irrelevant: &[Irrelevant]) {
    let c = Config::default();
    let w = c.lexical_weight();
    let pool_rankings: Vec<Vec<Ranking>> = pools
        .iter()
        .map(|pool| {
            pool.questions
                .iter()
                .map(|q| hybrid(&q.dense, &q.lexical, w))
                .collect()
        })
        .collect();
    let irrelevant_rankings: Vec<Ranking> = irrelevant
        .iter()
        .map(|q| hybrid(&q.dense, &q.lexical, w))
        .collect();
    println!("\n## Around the defaults (lexical weight {w}), all questions\n");
    println!(
        "| floor | solo | margin | multiple: right bind / offered / wrong bind | live_simple: right bind / offered / wrong bind | irrelevance: abstains / binds |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let f = c.similarity_floor();
    let m = c.margin();
    let mut rows = Vec::new();
    for floor in [f - 0.1, f - 0.05, f, f + 0.05, f + 0.1] {
        rows.push((floor, floor, m));
    }
    for solo in [f - 0.1, f - 0.05, f - 0.025, f] {
        rows.push((f, solo, m));
    }
    for margin in [0.0, 0.01, 0.02, 0.05, 0.1] {
        rows.push((f, c.solo_floor(), margin));
    }
    rows.push((f, c.solo_floor(), m));
    for (floor, solo, margin) in rows {
        let p = Params {
            w,
            floor,
            solo,
            margin,
        };
        let cells: Vec<String> = pools
            .iter()
            .zip(&pool_rankings)
            .map(|(pool, r)| {
                let t = tally_pool(pool, r, &p, |_| true);
                format!(
                    "{:.3} / {:.3} / {:.3}",
                    t.rate(t.bind_right),
                    t.useful(),
                    t.wrong_bind()
                )
            })
            .collect();
        let (abstains, binds) = abstention(irrelevant, &irrelevant_rankings, &p, |_| true);
        println!(
            "| {floor:.3} | {solo:.3} | {margin:.3} | {} | {abstains:.3} / {binds:.3} |",
            cells.join(" | ")
        );
    }
    // How alike the pools' own tools are: pairs at or above a few duplicate thresholds.
    for pool in pools {
        let ids: Vec<ToolId> = pool.picker.iter().map(|t| t.id().clone()).collect();
        let mut line = format!("\n{}: tool pairs with cosine at or above", pool.name);
        for threshold in [0.85, 0.90, 0.95, 0.98] {
            let Ok(config) = Config::default().with_duplicate_threshold(threshold) else {
                continue;
            };
            let pairs = pool
                .picker
                .with_config(config)
                .near_duplicates(&ids)
                .map(|p| {
                    p.iter()
                        .filter(|d| d.first().name() != d.second().name())
                        .count()
                })
                .unwrap_or(0);
            line.push_str(&format!(" {threshold}: {pairs} (different names);"));
        }
        println!("{line}");
    }
}

/// One question's result under the library's own `rank` and `resolve`.
#[derive(Clone, Copy)]
struct Result1 {
    top1: bool,
    top5: bool,
    kind: Kind,
    right: bool,
}

fn tally(results: &[Result1], keep: impl Fn(usize) -> bool) -> Tally {
    let mut t = Tally::default();
    for r in results
        .iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, r)| r)
    {
        t.questions += 1;
        t.top1 += usize::from(r.top1);
        t.top5 += usize::from(r.top5);
        match r.kind {
            Kind::Bind => {
                t.bind += 1;
                t.bind_right += usize::from(r.right);
            }
            Kind::Duplicate => {
                t.duplicate += 1;
                t.group_right += usize::from(r.right);
            }
            Kind::Ambiguous => {
                t.ambiguous += 1;
                t.group_right += usize::from(r.right);
            }
            Kind::Absent => t.absent += 1,
        }
    }
    t
}

/// The reported figures: the library's own `rank` and `resolve` under `Config::default()`,
/// on every question and on the held-out (odd-numbered) half.
fn report(pools: &[Pool], irrelevant: &[Irrelevant]) -> Result<(), Error> {
    let c = Config::default();
    println!(
        "\n## Config::default() (similarity_floor {}, solo_floor {}, margin {}, duplicate_threshold {}, top_k {}, lexical_weight {})\n",
        c.similarity_floor(),
        c.solo_floor(),
        c.margin(),
        c.duplicate_threshold(),
        c.top_k(),
        c.lexical_weight()
    );
    println!(
        "| data | half | questions | pool | recall@1 | recall@5 | Bind-correct | Bind-wrong | Duplicate | Ambiguous | Absent | right function offered |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for pool in pools {
        let started = Instant::now();
        let mut results = Vec::new();
        for q in &pool.questions {
            let top = pool.picker.rank(&q.question, 5)?;
            let (kind, right) = match pool.picker.resolve(&q.question)? {
                Outcome::Bind(tool) => (Kind::Bind, tool.name() == q.truth),
                Outcome::Duplicate(g) => (Kind::Duplicate, g.iter().any(|x| x.name() == q.truth)),
                Outcome::Ambiguous(g) => (Kind::Ambiguous, g.iter().any(|x| x.name() == q.truth)),
                _ => (Kind::Absent, false),
            };
            results.push(Result1 {
                top1: top.first().is_some_and(|s| s.tool().name() == q.truth),
                top5: top.iter().any(|s| s.tool().name() == q.truth),
                kind,
                right,
            });
        }
        let per = started.elapsed().as_secs_f64() * 1000.0 / results.len().max(1) as f64;
        eprintln!(
            "{}: resolved in {per:.1} ms per question (rank + resolve)",
            pool.name
        );
        for (half, keep) in [
            ("all", &(|_: usize| true) as &dyn Fn(usize) -> bool),
            ("held-out (odd)", &|i: usize| i % 2 == 1),
        ] {
            let t = tally(&results, keep);
            println!(
                "| {} | {half} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                pool.name,
                t.questions,
                pool.picker.len(),
                t.rate(t.top1),
                t.rate(t.top5),
                t.rate(t.bind_right),
                t.wrong_bind(),
                t.rate(t.duplicate),
                t.rate(t.ambiguous),
                t.rate(t.absent),
                t.useful()
            );
        }
    }
    let mut results = Vec::new();
    for q in irrelevant {
        let kind = match q.picker.resolve(&q.question)? {
            Outcome::Bind(_) => Kind::Bind,
            Outcome::Duplicate(_) => Kind::Duplicate,
            Outcome::Ambiguous(_) => Kind::Ambiguous,
            _ => Kind::Absent,
        };
        results.push(Result1 {
            top1: false,
            top5: false,
            kind,
            right: false,
        });
    }
    for (half, keep) in [
        ("all", &(|_: usize| true) as &dyn Fn(usize) -> bool),
        ("held-out (odd)", &|i: usize| i % 2 == 1),
    ] {
        let t = tally(&results, keep);
        println!(
            "| BFCL_v4_live_irrelevance.json | {half} | {} | own functions | - | - | - | {:.3} (any bind) | {:.3} | {:.3} | **{:.3}** (abstention) | - |",
            t.questions,
            t.rate(t.bind),
            t.rate(t.duplicate),
            t.rate(t.ambiguous),
            t.rate(t.absent)
        );
    }
    Ok(())
}

fn run() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .ok_or("usage: bfcl_eval DATA_DIR [--sweep]  (DATA_DIR from scripts/fetch-bfcl.sh)")?;
    let do_sweep = args.any(|a| a == "--sweep");
    let dir = Path::new(&dir);
    let model = Model::load()?;
    let pools = vec![
        pool(&model, dir, "BFCL_v4_multiple.json", do_sweep)?,
        pool(&model, dir, "BFCL_v4_live_simple.json", do_sweep)?,
    ];
    let irrelevant = irrelevance(&model, dir, do_sweep)?;
    if do_sweep {
        sweep(&pools, &irrelevant);
        detail(&pools, &irrelevant);
    }
    report(&pools, &irrelevant)
}
