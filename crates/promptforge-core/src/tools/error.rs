use std::fmt;

/// What class of failure a [`ToolError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The arguments the model sent are not what the tool accepts.
    InvalidArguments,
    /// The tool refused the request by policy (for example a blocked address).
    Refused,
    /// A backend behind the tool answered with an error.
    Backend,
    /// The tool could not reach its backend (connection, DNS, TLS, timeout). Retryable.
    Transport,
    /// The run was cancelled while the tool was working.
    Cancelled,
}

impl ToolErrorKind {
    /// A stable lowercase name for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => "invalid_arguments",
            Self::Refused => "refused",
            Self::Backend => "backend",
            Self::Transport => "transport",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    kind: ToolErrorKind,
    message: String,
}

impl ToolError {
    /// Creates an error of the given kind with a message the model may read.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The arguments were not acceptable.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidArguments, message)
    }

    /// The request was refused by the tool's policy.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Refused, message)
    }

    /// The tool's backend answered with an error.
    pub fn backend(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Backend, message)
    }

    /// The tool could not reach its backend.
    pub fn transport(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Transport, message)
    }

    /// The run was cancelled.
    pub fn cancelled() -> Self {
        Self::new(ToolErrorKind::Cancelled, "tool call cancelled")
    }

    /// The class of failure.
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether trying again may succeed (transport failures only).
    pub fn is_retryable(&self) -> bool {
        self.kind == ToolErrorKind::Transport
    }

    /// Whether the call ended because the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.kind == ToolErrorKind::Cancelled
    }
}
