//! Report-only observation of a run: the [`Observer`] seam and the [`DebugCapture`] sink.
//!
//! Observers never change a result: they receive borrowed events and return nothing.

use std::time::Duration;

use crate::error::RunError;
use crate::parse::ParseError;

/// One event of a parse or a run.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Observation<'a> {
    /// Parsing began.
    ParseStarted {
        /// The name the prompt is parsed under.
        origin: &'a str,
    },
    /// Parsing succeeded.
    ParseCompleted {
        /// How many sections the prompt has.
        sections: usize,
    },
    /// Parsing failed.
    ParseFailed {
        /// Why.
        error: &'a ParseError,
    },
    /// A run began.
    RunStarted {
        /// The prompt's name.
        prompt: &'a str,
    },
    /// A run returned a value.
    RunSucceeded {
        /// The result.
        result: &'a str,
        /// Wall time of the run.
        elapsed: Duration,
    },
    /// A run failed.
    RunFailed {
        /// Why.
        error: &'a RunError,
    },
    /// A section (or the H1 region, `section == ""`) was entered.
    SectionStarted {
        /// The run-global execution-unit id (`sys.id`).
        id: u64,
    },
    /// A section finished.
    SectionFinished {
        /// The run-global execution-unit id (`sys.id`).
        id: u64,
    },
    /// A Lua `log()` checkpoint.
    LuaLog {
        /// The run-global execution-unit id of the VM that logged.
        id: u64,
        /// The message.
        message: &'a str,
    },
    /// A store mutation.
    StoreWrite {
        /// What happened: `write`, `append`, `str_replace` or `delete`.
        operation: &'a str,
        /// The path.
        path: &'a str,
    },
    /// A fanout arm started.
    ArmStarted {
        /// The arm's execution-unit id.
        id: u64,
        /// The arm's 1-based position.
        index: usize,
    },
    /// A fanout arm finished.
    ArmFinished {
        /// The arm's execution-unit id.
        id: u64,
        /// The arm's 1-based position.
        index: usize,
        /// Whether the arm completed (`false` for an exhausted stub).
        ok: bool,
    },
}

/// Receives observations. Implementations must be cheap and must not block.
pub trait Observer: Send + Sync {
    /// Called for each event, correlated by execution id and section heading.
    fn observe(&self, execution: &str, section: &str, event: Observation<'_>);
}

/// An observer that discards everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullObserver;

impl Observer for NullObserver {
    fn observe(&self, _execution: &str, _section: &str, _event: Observation<'_>) {}
}
