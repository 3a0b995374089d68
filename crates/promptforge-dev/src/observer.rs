//! The stderr observer: one `[run-id] Section: detail` line per observation, plus the
//! counters of the end-of-run summary.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use promptforge_core::{Observation, Observer};

use crate::console::Console;

/// The counts the summary line reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Model turns completed (nested `infer` calls and fanout arms included).
    pub model_turns: u64,
    /// Tool calls by wire name, successful and failed.
    pub tool_calls: BTreeMap<String, u64>,
}

impl RunStats {
    /// The summary line: `[id] summary: 12 ms elapsed, 2 model turns, tool calls: web_fetch=1,
    /// 3 files in the store`.
    pub fn summary(&self, id: &str, elapsed: Duration, files: usize) -> String {
        let tools = if self.tool_calls.is_empty() {
            "none".to_owned()
        } else {
            self.tool_calls
                .iter()
                .map(|(name, count)| format!("{name}={count}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let turns = plural(self.model_turns, "model turn");
        let files = plural(files as u64, "file");
        format!(
            "[{id}] summary: {} elapsed, {turns}, tool calls: {tools}, {files} in the store",
            elapsed_text(elapsed)
        )
    }
}

fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// `850 ms` below ten seconds, else `12.3 s`.
pub fn elapsed_text(elapsed: Duration) -> String {
    if elapsed < Duration::from_secs(10) {
        format!("{} ms", elapsed.as_millis())
    } else {
        format!("{:.1} s", elapsed.as_secs_f64())
    }
}

/// Prints observations to a [`Console`] and counts turns and tool calls.
pub struct StderrObserver {
    console: Console,
    prompt: String,
    stats: Mutex<RunStats>,
}

impl std::fmt::Debug for StderrObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrObserver")
            .field("prompt", &self.prompt)
            .finish_non_exhaustive()
    }
}

impl StderrObserver {
    /// An observer for a run of the prompt named `prompt`.
    pub fn new(console: Console, prompt: impl Into<String>) -> Self {
        Self {
            console,
            prompt: prompt.into(),
            stats: Mutex::new(RunStats::default()),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> RunStats {
        match self.stats.lock() {
            Ok(stats) => stats.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn count(&self, update: impl FnOnce(&mut RunStats)) {
        match self.stats.lock() {
            Ok(mut stats) => update(&mut stats),
            Err(poisoned) => update(&mut poisoned.into_inner()),
        }
    }
}

/// The detail text of an observation.
fn detail(event: &Observation<'_>) -> String {
    match event {
        Observation::ParseStarted { origin } => format!("Parse started: {origin}"),
        Observation::ParseCompleted { sections } => format!("Parsed {sections} sections"),
        Observation::ParseFailed { error } => format!("Parse failed: {error}"),
        Observation::RunStarted { .. } => "Run started".to_owned(),
        Observation::RunSucceeded { elapsed, .. } => {
            format!("Run succeeded in {}", elapsed_text(*elapsed))
        }
        Observation::RunFailed { error } => format!("Run failed: {error}"),
        Observation::SectionStarted { id } => format!("Section started (unit {id})"),
        Observation::SectionFinished { id } => format!("Section finished (unit {id})"),
        Observation::LuaLog { message, .. } => format!("Lua: {message}"),
        Observation::StoreWrite { operation, path } => format!("Store {operation}: {path}"),
        Observation::ModelTurnCompleted {
            model,
            finish_reason,
            turn,
        } => format!(
            "Model turn {} completed: {model} (finish: {})",
            turn + 1,
            finish_reason.unwrap_or("none")
        ),
        Observation::ModelTurnTruncated { model, turn } => {
            format!("Model turn {} hit its token cap: {model}", turn + 1)
        }
        Observation::ToolCallSucceeded { tool } => format!("Tool call succeeded: {tool}"),
        Observation::ToolCallFailed { tool, error } => format!("Tool call failed: {tool}: {error}"),
        Observation::ArmStarted { id, index } => format!("Fanout arm {index} started (unit {id})"),
        Observation::ArmFinished { id, index, ok } => format!(
            "Fanout arm {index} {} (unit {id})",
            if *ok { "finished" } else { "exhausted" }
        ),
        _ => "Event".to_owned(),
    }
}

/// The section label of a record: the heading without its `#` marks, or the prompt's name
/// for run-level events.
fn label<'a>(section: &'a str, prompt: &'a str) -> &'a str {
    let heading = section.trim_start_matches('#').trim();
    if heading.is_empty() { prompt } else { heading }
}

impl Observer for StderrObserver {
    fn observe(&self, execution: &str, section: &str, event: Observation<'_>) {
        match &event {
            Observation::ModelTurnCompleted { .. } => self.count(|s| s.model_turns += 1),
            Observation::ToolCallSucceeded { tool } | Observation::ToolCallFailed { tool, .. } => {
                self.count(|s| *s.tool_calls.entry((*tool).to_owned()).or_default() += 1);
            }
            _ => {}
        }
        self.console.line(&format!(
            "[{execution}] {}: {}",
            label(section, &self.prompt),
            detail(&event)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_count() {
        let mut stats = RunStats {
            model_turns: 2,
            ..RunStats::default()
        };
        stats.tool_calls.insert("web_search".into(), 2);
        stats.tool_calls.insert("web_fetch".into(), 1);
        assert_eq!(
            stats.summary("dev-x", Duration::from_millis(12), 1),
            "[dev-x] summary: 12 ms elapsed, 2 model turns, tool calls: web_fetch=1 web_search=2, 1 file in the store"
        );
        assert_eq!(
            RunStats::default().summary("dev-x", Duration::from_secs(12), 0),
            "[dev-x] summary: 12.0 s elapsed, 0 model turns, tool calls: none, 0 files in the store"
        );
        assert_eq!(label("## Research", "p"), "Research");
        assert_eq!(label("", "p"), "p");
    }
}
