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
    /// A model turn finished.
    ModelTurnCompleted {
        /// The catalog model id.
        model: &'a str,
        /// The finish reason the backend sent, if any.
        finish_reason: Option<&'a str>,
        /// The section's 0-based turn index.
        turn: u32,
    },
    /// A model turn stopped at its token cap (`finish_reason: "length"`).
    ModelTurnTruncated {
        /// The catalog model id.
        model: &'a str,
        /// The section's 0-based turn index.
        turn: u32,
    },
    /// A tool call succeeded.
    ToolCallSucceeded {
        /// The tool's wire name.
        tool: &'a str,
    },
    /// A tool call failed (the failure went back to the model).
    ToolCallFailed {
        /// The tool's wire name.
        tool: &'a str,
        /// Why.
        error: &'a str,
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

/// A shared observer is an observer: one `Arc<dyn Observer>` (or `Arc<MyObserver>`) goes
/// both to [`Prompt::parse`](crate::Prompt::parse) (as `&observer`) and to
/// [`RunConfig::observer`](crate::RunConfig::observer).
impl<T: Observer + ?Sized> Observer for std::sync::Arc<T> {
    fn observe(&self, execution: &str, section: &str, event: Observation<'_>) {
        (**self).observe(execution, section, event);
    }
}

/// A shared debug sink is a debug sink, as for [`Observer`].
impl<T: DebugCapture + ?Sized> DebugCapture for std::sync::Arc<T> {
    fn on_event(&self, execution: &str, section: &str, turn_index: u32, event: DebugEvent<'_>) {
        (**self).on_event(execution, section, turn_index, event);
    }
}

/// An observer that discards everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullObserver;

impl Observer for NullObserver {
    fn observe(&self, _execution: &str, _section: &str, _event: Observation<'_>) {}
}

/// One raw model exchange, for [`DebugCapture`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum DebugEvent<'a> {
    /// The request body about to be sent.
    Request {
        /// The JSON body.
        body: &'a serde_json::Value,
    },
    /// The response body received.
    Response {
        /// The JSON body.
        body: &'a serde_json::Value,
        /// The first choice's finish reason.
        finish_reason: Option<&'a str>,
        /// The first choice's reasoning text.
        reasoning: Option<&'a str>,
    },
}

/// Receives the raw request and response JSON of every model turn, including nested
/// `infer` calls and fanout arms.
pub trait DebugCapture: Send + Sync {
    /// Called before each request and after each response.
    fn on_event(&self, execution: &str, section: &str, turn_index: u32, event: DebugEvent<'_>);
}
