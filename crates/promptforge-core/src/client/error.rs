//! The completion error type.

use std::fmt;

use promptforge_wire::ErrorEnvelope;
use reqwest::Url;

/// How many characters of the gateway's error message a [`CompletionError`] quotes.
pub(crate) const QUOTED_MESSAGE_CHARS: usize = 300;

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

/// The [`as_str`](CompletionErrorKind::as_str) name, as for the other error kinds.
impl fmt::Display for CompletionErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A model call that failed.
///
/// `Display` says what the gateway said in its own terms: for an error answer, the status
/// plus the `code` and `message` of its OpenAI error envelope (quoted, with control
/// characters escaped, capped at 300 characters); for a connection
/// failure, the URL it could not reach. It never includes the raw body, which may echo
/// request content: read that through [`CompletionError::backend_body`] when you want it.
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

    pub(crate) fn transport(error: &reqwest::Error, what: &str, url: &Url) -> Self {
        let timeout = error.is_timeout();
        // reqwest errors can carry the URL; keep only the innermost cause.
        let cause = innermost_cause(error);
        let reason = if timeout {
            format!("the request to {url} timed out")
        } else if error.is_connect() {
            match cause {
                None => format!("could not connect to {url}; is the gateway running?"),
                Some(cause) => {
                    format!("could not connect to {url} ({cause}); is the gateway running?")
                }
            }
        } else {
            cause.unwrap_or_else(|| "transport failure".to_owned())
        };
        Self {
            timeout,
            ..Self::new(CompletionErrorKind::Transport, format!("{what}: {reason}"))
        }
    }

    pub(crate) fn backend(status: u16, what: &str, key_source: &str, body: String) -> Self {
        let mut message = format!("{what}: the gateway answered HTTP {status}");
        if let Some((code, said)) = envelope(&body) {
            match code {
                Some(code) => message.push_str(&format!(" {code}: {said}")),
                None => message.push_str(&format!(": {said}")),
            }
        }
        if status == 401 || status == 403 {
            message.push_str(&format!(
                "; the gateway refused {key_source}: check that it matches the gateway's [server] api_key"
            ));
        }
        Self {
            status: Some(status),
            body: Some(body),
            ..Self::new(CompletionErrorKind::Backend, message)
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

/// The text of the last error in `error`'s source chain, if it has one.
fn innermost_cause(error: &dyn std::error::Error) -> Option<String> {
    let mut cause = None;
    let mut source = error.source();
    while let Some(inner) = source {
        cause = Some(inner.to_string());
        source = inner.source();
    }
    cause.filter(|text| !text.is_empty())
}

/// The `code` and `message` of an OpenAI error envelope `{"error": {"message", "code"}}`,
/// quoted safely (capped, control characters escaped); `None` when the body is not one.
fn envelope(body: &str) -> Option<(Option<String>, String)> {
    let ErrorEnvelope { error } = ErrorEnvelope::from_body(body)?;
    let code = error
        .code
        .filter(|code| !code.is_empty())
        .map(|code| quote(&code, 64));
    Some((code, quote(&error.message, QUOTED_MESSAGE_CHARS)))
}

/// At most `max` characters of `text`, control characters escaped, `…` when cut.
fn quote(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_errors_show_the_envelope_code_and_message() {
        let body = r#"{"error":{"message":"endpoint local-openai unreachable (connection refused)","type":"api_error","code":"upstream_unreachable"}}"#;
        let error = CompletionError::backend(502, "chat completion", "KEY", body.to_owned());
        assert_eq!(
            error.to_string(),
            "chat completion: the gateway answered HTTP 502 upstream_unreachable: endpoint local-openai unreachable (connection refused)"
        );
    }

    #[test]
    fn refused_keys_name_where_the_key_came_from() {
        let body = r#"{"error":{"message":"missing or invalid bearer token","type":"authentication_error","code":"unauthorized"}}"#;
        let error = CompletionError::backend(
            401,
            "model catalog",
            "PROMPTFORGE_GATEWAY_API_KEY",
            body.to_owned(),
        );
        let text = error.to_string();
        assert!(
            text.contains("HTTP 401 unauthorized: missing or invalid bearer token"),
            "{text}"
        );
        assert!(
            text.contains("the gateway refused PROMPTFORGE_GATEWAY_API_KEY"),
            "{text}"
        );
    }

    #[test]
    fn non_envelope_bodies_are_never_quoted() {
        let error = CompletionError::backend(500, "chat completion", "KEY", "secret echo".into());
        assert_eq!(
            error.to_string(),
            "chat completion: the gateway answered HTTP 500"
        );
        assert_eq!(error.backend_body(), Some("secret echo"));
    }

    #[test]
    fn quoted_messages_are_capped_and_escaped() {
        let long = "x".repeat(QUOTED_MESSAGE_CHARS + 50);
        let body =
            serde_json::json!({"error": {"message": format!("a\nb\u{0}{long}")}}).to_string();
        let text = CompletionError::backend(503, "w", "K", body).to_string();
        assert!(text.contains("a\\nb\\u{0}"), "{text}");
        assert!(!text.contains('\n'));
        assert!(text.ends_with('…'), "{text}");
        assert!(text.chars().count() < QUOTED_MESSAGE_CHARS + 60);
    }
}
