//! The run error type.

use std::fmt;
use std::sync::Arc;

use crate::client::CompletionError;
use crate::store::StoreError;
use crate::tools::ToolError;

/// Whether `c` is escaped wherever untrusted text (a model reply, a tool result, a prompt's
/// own text) reaches a console line, a diagnostic or an error message: the C0 and C1
/// controls (CR, LF, TAB, ESC and NEL U+0085 among them) and DEL, the bidirectional
/// formatting characters (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069) and
/// the line and paragraph separators (U+2028, U+2029). Raw, each could start a line that
/// looks like the tool's own, or reorder what the reader sees.
pub fn is_console_escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// Appends `c` to `out`, written as `\t`, `\n`, `\r` or `\u{…}` (its code point in hex)
/// when [`is_console_escaped`] holds, as itself otherwise.
pub fn push_console_escaped(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if is_console_escaped(c) => out.extend(c.escape_unicode()),
        c => out.push(c),
    }
}

/// Renders untrusted text for a console line or an error message: every character
/// [`is_console_escaped`] names is escaped (newlines and tabs kept when `multiline`), and
/// the text is cut at about `max` bytes with a note of the full size.
///
/// ```
/// use promptforge_core::error::quote_text;
/// assert_eq!(quote_text("a\u{202e}b\u{2028}c\r", 100, false), "a\\u{202e}b\\u{2028}c\\r");
/// assert_eq!(quote_text("two\nlines", 100, true), "two\nlines");
/// assert_eq!(quote_text("abcdef", 3, false), "abc… (6 bytes in all)");
/// ```
pub fn quote_text(text: &str, max: usize, multiline: bool) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for c in text.chars() {
        if out.len() >= max {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        match c {
            '\n' | '\t' if multiline => out.push(c),
            c => push_console_escaped(&mut out, c),
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
    /// A model call failed (see [`CompletionError`]).
    Model,
    /// A tool or model description could not be bound, or a binding call was misused.
    Binding,
    /// A tool loop ran out of iterations outside a fanout arm.
    ToolLoopExhausted,
    /// The run was cancelled through its [`CancelHandle`](crate::CancelHandle).
    Cancelled,
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
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for RunErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The typed cause behind a [`RunError`], shared by its clones.
type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why a run failed.
///
/// Displays as `in section '## Name': message` when the failure happened inside a section.
/// A failure that came from a subsystem keeps that subsystem's error as its
/// [`source`](std::error::Error::source): a [`CompletionError`] for a model or gateway
/// call, a [`StoreError`] for a store operation, a [`ToolError`] for a tool call the
/// cancellation ended.
#[derive(Debug, Clone)]
pub struct RunError {
    kind: RunErrorKind,
    message: String,
    section: Option<String>,
    retryable: bool,
    /// Set on a run-wide budget's error: no `pcall` may swallow it (see
    /// [`RunError::ends_run`]).
    ends_run: bool,
    source: Option<Cause>,
}

impl RunError {
    pub(crate) fn new(kind: RunErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            section: None,
            retryable: false,
            ends_run: false,
            source: None,
        }
    }

    /// Marks the error as one that ends the run: a run-wide budget ran out.
    pub(crate) fn ending_the_run(mut self) -> Self {
        self.ends_run = true;
        self
    }

    /// Whether the error must end the run whatever the prompt wraps it in: a budget that
    /// ran out (instructions, block time, a VM's memory, the run's instructions or section
    /// entries) or a cancellation. A unit that sees one from a nested `execute`, `fanout`
    /// or local tool handler dies of it too, so no `pcall` around the call can swallow it.
    /// (Inside one VM a memory error stays an ordinary Lua error, as in Lua; that VM's own
    /// instruction budget bounds a loop that retries it.)
    pub(crate) fn ends_run(&self) -> bool {
        self.ends_run
            || matches!(
                self.kind,
                RunErrorKind::InstructionBudget | RunErrorKind::Memory | RunErrorKind::Cancelled
            )
    }

    /// Keeps `source` as the typed cause of this error (its text stays this error's).
    pub(crate) fn caused_by(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Arc::new(source));
        self
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

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl From<CompletionError> for RunError {
    fn from(error: CompletionError) -> Self {
        Self {
            retryable: error.is_retryable(),
            ..Self::new(RunErrorKind::Model, error.to_string())
        }
        .caused_by(error)
    }
}

impl From<StoreError> for RunError {
    fn from(error: StoreError) -> Self {
        Self::new(RunErrorKind::Store, error.to_string()).caused_by(error)
    }
}

impl RunError {
    /// A tool call that ended because the run was cancelled: a cancellation, caused by
    /// the tool's error.
    pub(crate) fn tool_cancelled(error: ToolError) -> Self {
        Self::cancelled().caused_by(error)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn subsystem_errors_stay_the_source_and_the_text() {
        let store = StoreError::not_found("a.md");
        let error = RunError::from(store.clone());
        assert_eq!(error.to_string(), store.to_string());
        let source = error.source().and_then(|s| s.downcast_ref::<StoreError>());
        assert_eq!(source, Some(&store));
        // Clones and a section keep the cause.
        let located = error.clone().in_section("## Notes");
        assert!(located.source().is_some_and(|s| s.is::<StoreError>()));

        let tool = ToolError::cancelled();
        let error = RunError::tool_cancelled(tool.clone());
        assert!(error.is_cancelled());
        assert_eq!(error.to_string(), RunError::cancelled().to_string());
        assert_eq!(
            error.source().and_then(|s| s.downcast_ref::<ToolError>()),
            Some(&tool)
        );
    }

    #[test]
    fn errors_the_host_makes_have_no_source() {
        assert!(RunError::new(RunErrorKind::Control, "x").source().is_none());
        assert!(RunError::cancelled().source().is_none());
    }
}
