//! The run error type.

use std::fmt;

use crate::store::StoreError;
use crate::tools::ToolError;

/// Renders untrusted text for an error message: control characters escaped (newlines and
/// tabs kept when `multiline`), and cut at about `max` bytes with a note of the full size.
pub(crate) fn quote_text(text: &str, max: usize, multiline: bool) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for c in text.chars() {
        if out.len() >= max {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        match c {
            '\n' | '\t' if multiline => out.push(c),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// The stable class of a [`RunError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// A Lua block raised an error.
    Lua,
    /// A Lua block ran past its instruction budget.
    InstructionBudget,
    /// A Lua VM ran past its memory ceiling.
    Memory,
    /// A store operation failed.
    Store,
    /// `jump`, `execute`, `fanout` or `list_from_section` named a section that is not visible,
    /// or was misused.
    Control,
    /// `execute`/`fanout` nesting went past the depth cap, or a walk entered too many sections.
    Limit,
    /// A prose placeholder could not be rendered.
    Template,
    /// A section has prose for the model but no model is bound.
    NoModel,
    /// A model call failed (see [`CompletionError`](crate::CompletionError)).
    Model,
    /// A tool or model description could not be bound, or a binding call was misused.
    Binding,
    /// A tool loop ran out of iterations outside a fanout arm.
    ToolLoopExhausted,
    /// A tool call failed fatally.
    Tool,
    /// The run was cancelled through its [`CancelHandle`](crate::CancelHandle).
    Cancelled,
    /// Invalid input to the run itself (for example a bad execution id).
    Config,
}

impl RunErrorKind {
    /// A stable snake_case name for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lua => "lua",
            Self::InstructionBudget => "instruction_budget",
            Self::Memory => "memory",
            Self::Store => "store",
            Self::Control => "control",
            Self::Limit => "limit",
            Self::Template => "template",
            Self::NoModel => "no_model",
            Self::Model => "model",
            Self::Binding => "binding",
            Self::ToolLoopExhausted => "tool_loop_exhausted",
            Self::Tool => "tool",
            Self::Cancelled => "cancelled",
            Self::Config => "config",
        }
    }
}

impl fmt::Display for RunErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run failed.
///
/// Displays as `in section '## Name': message` when the failure happened inside a section.
#[derive(Debug, Clone)]
pub struct RunError {
    kind: RunErrorKind,
    message: String,
    section: Option<String>,
    retryable: bool,
}

impl RunError {
    pub(crate) fn new(kind: RunErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            section: None,
            retryable: false,
        }
    }

    pub(crate) fn cancelled() -> Self {
        Self::new(RunErrorKind::Cancelled, "the run was cancelled")
    }

    /// Attaches the section the error happened in, unless one is already attached (the
    /// innermost section wins).
    pub(crate) fn in_section(mut self, heading: &str) -> Self {
        if self.section.is_none() && !heading.is_empty() {
            self.section = Some(heading.to_owned());
        }
        self
    }

    /// Prefixes the message with a `file:line: ` location.
    pub(crate) fn with_location(mut self, prefix: &str) -> Self {
        self.message.insert_str(0, prefix);
        self
    }

    /// The stable class of the failure.
    pub fn kind(&self) -> RunErrorKind {
        self.kind
    }

    /// The failure, without the section.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The heading of the innermost section the failure happened in, if any.
    pub fn section(&self) -> Option<&str> {
        self.section.as_deref()
    }

    /// Whether the run ended because it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.kind == RunErrorKind::Cancelled
    }

    /// Whether running again may succeed (a transient model or tool transport failure).
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.section {
            Some(section) => write!(f, "in section '{section}': {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for RunError {}

impl From<crate::client::CompletionError> for RunError {
    fn from(error: crate::client::CompletionError) -> Self {
        Self {
            retryable: error.is_retryable(),
            ..Self::new(RunErrorKind::Model, error.to_string())
        }
    }
}

impl From<StoreError> for RunError {
    fn from(error: StoreError) -> Self {
        Self::new(RunErrorKind::Store, error.to_string())
    }
}

impl From<ToolError> for RunError {
    fn from(error: ToolError) -> Self {
        let retryable = error.is_retryable();
        let kind = if error.is_cancelled() {
            RunErrorKind::Cancelled
        } else {
            RunErrorKind::Tool
        };
        Self {
            retryable,
            ..Self::new(kind, error.to_string())
        }
    }
}
