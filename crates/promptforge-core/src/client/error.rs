//! The completion error type.

use std::fmt;

/// The class of a [`CompletionError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompletionErrorKind {
    /// The gateway could not be reached (DNS, connection, TLS, timeout). Retryable.
    Transport,
    /// The gateway or its upstream answered with an error status.
    Backend,
    /// The response body could not be decoded.
    MalformedResponse,
    /// The model returned no usable content.
    EmptyReply,
    /// The client was built with [`GatewayClient::disabled`](super::GatewayClient::disabled).
    Disabled,
    /// The client configuration is missing or invalid (bad URL, empty key).
    Config,
}

impl CompletionErrorKind {
    /// A stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport",
            Self::Backend => "backend",
            Self::MalformedResponse => "malformed_response",
            Self::EmptyReply => "empty_reply",
            Self::Disabled => "disabled",
            Self::Config => "config",
        }
    }
}

/// A model call that failed.
///
/// `Display` never includes the backend's error body: read it through
/// [`CompletionError::backend_body`] when you want it.
#[derive(Debug, Clone)]
pub struct CompletionError {
    kind: CompletionErrorKind,
    message: String,
    status: Option<u16>,
    timeout: bool,
    body: Option<String>,
}

impl CompletionError {
    pub(crate) fn new(kind: CompletionErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            timeout: false,
            body: None,
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Self::new(CompletionErrorKind::Config, message)
    }

    pub(crate) fn transport(error: &reqwest::Error, what: &str) -> Self {
        let timeout = error.is_timeout();
        let reason = if timeout {
            "the request timed out".to_owned()
        } else if error.is_connect() {
            "could not connect".to_owned()
        } else {
            // reqwest errors can carry the URL; keep only the cause chain.
            let mut cause = String::new();
            let mut source = std::error::Error::source(error);
            while let Some(inner) = source {
                cause = inner.to_string();
                source = inner.source();
            }
            if cause.is_empty() {
                "transport failure".to_owned()
            } else {
                cause
            }
        };
        Self {
            timeout,
            ..Self::new(CompletionErrorKind::Transport, format!("{what}: {reason}"))
        }
    }

    pub(crate) fn backend(status: u16, what: &str, body: String) -> Self {
        Self {
            status: Some(status),
            body: Some(body),
            ..Self::new(
                CompletionErrorKind::Backend,
                format!("{what}: the gateway answered HTTP {status}"),
            )
        }
    }

    pub(crate) fn malformed(what: &str, why: impl fmt::Display) -> Self {
        Self::new(
            CompletionErrorKind::MalformedResponse,
            format!("{what}: the response could not be decoded: {why}"),
        )
    }

    pub(crate) fn empty_reply(message: impl Into<String>) -> Self {
        Self::new(CompletionErrorKind::EmptyReply, message)
    }

    /// The class of failure.
    pub fn kind(&self) -> CompletionErrorKind {
        self.kind
    }

    /// The HTTP status, when the backend answered with one.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Whether trying again may succeed: transport failures, and 429/5xx answers.
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            CompletionErrorKind::Transport => true,
            CompletionErrorKind::Backend => self
                .status
                .is_some_and(|s| s == 429 || s == 408 || s >= 500),
            _ => false,
        }
    }

    /// Whether the request timed out.
    pub fn is_timeout(&self) -> bool {
        self.timeout
    }

    /// The backend's error body (opt-in: it may echo request content).
    pub fn backend_body(&self) -> Option<&str> {
        self.body.as_deref()
    }
}

impl fmt::Display for CompletionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CompletionError {}
