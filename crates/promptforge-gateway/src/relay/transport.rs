//! The one seam between routing and the network: a [`Transport`] sends one request to one
//! endpoint and answers with the whole body, a stream, or a typed [`AttemptFailure`].
//!
//! The production transport ([`super::http::HttpTransport`]) composes the two HTTP clients,
//! the inline HTTP/1.1 client ([`super::h1`]) and reqwest ([`super::pooled`]); the tests
//! script one. Nothing here knows HTTP envelopes: `routes/` maps a failure's
//! [`FailureKind`] to its status and error code.

use std::fmt;
use std::pin::Pin;

use axum::body::Bytes;
use axum::http::StatusCode;
use futures::Stream;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::plan::{ApiPath, Endpoint};

/// One request to one endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outgoing<'a> {
    /// The API route below the endpoint's base URL.
    pub path: ApiPath,
    /// The JSON body, ready to send.
    pub body: &'a Bytes,
    /// A streaming request: the answer is the body as it arrives, after a success head.
    pub streaming: bool,
}

/// An upstream body as it arrives.
pub(crate) type UpstreamBytes = Pin<Box<dyn Stream<Item = Result<Bytes, AttemptFailure>> + Send>>;

/// A successful answer.
pub(crate) enum Answer {
    /// A buffered request: the whole body (within the endpoint's `max_response_bytes`).
    Whole(Vec<u8>),
    /// A streaming request: the body after a success head.
    Stream(UpstreamBytes),
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Whole(bytes) => f.debug_tuple("Whole").field(&bytes.len()).finish(),
            Self::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// Sends requests upstream (see the module documentation).
pub(crate) trait Transport: Send + Sync + fmt::Debug {
    /// Sends `request` to `endpoint` within the endpoint's bounds.
    fn send<'a>(
        &'a self,
        endpoint: &'a Endpoint,
        request: Outgoing<'a>,
    ) -> BoxFuture<'a, Result<Answer, AttemptFailure>>;
}

/// What went wrong with one attempt, in the upstream's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FailureKind {
    /// The connection failed or was cut (connect, DNS, TLS, a cut body).
    Transport,
    /// A deadline passed (`timeout`, `stream_first_byte_timeout`, `stream_idle_timeout`).
    Timeout,
    /// The upstream answered something undecodable, too large, or ended a stream early.
    Protocol,
    /// The upstream refused the request itself (400, 413, 422).
    Rejected,
    /// The upstream is rate limiting (429).
    RateLimited,
    /// Any other error status (401, 403, 404, 5xx...).
    Status,
    /// The upstream has no such route (404, 405, 501 on embeddings or rerank): it cannot
    /// serve this kind of request.
    Unavailable,
}

impl FailureKind {
    /// Every kind.
    #[cfg(test)]
    pub(crate) const ALL: [Self; 7] = [
        Self::Transport,
        Self::Timeout,
        Self::Protocol,
        Self::Rejected,
        Self::RateLimited,
        Self::Status,
        Self::Unavailable,
    ];

    /// The stable label of the kind in metrics (`upstream_errors_total{code}`): the error
    /// code the gateway answers it with (`routes/` maps each kind to that code; a test
    /// there checks they agree).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Transport => "upstream_transport",
            Self::Timeout => "upstream_timeout",
            Self::Protocol => "upstream_protocol",
            Self::Rejected => "upstream_rejected",
            Self::RateLimited => "upstream_rate_limited",
            Self::Status => "upstream_status",
            Self::Unavailable => "model_unavailable",
        }
    }
}

/// Whether an attempt failed before any response head arrived (the request may not have
/// reached the upstream) or after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No response head arrived.
    BeforeHead,
    /// A head arrived: an error status, or a body that failed.
    AfterHead,
}

/// A failed attempt: what happened, the message for the caller, and whether failover may
/// move on to the next endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct AttemptFailure {
    /// What happened.
    pub kind: FailureKind,
    /// The message (names the endpoint, never a credential).
    pub message: String,
    /// Another endpoint may succeed where this one failed.
    pub retryable: bool,
    /// Before or after the response head.
    pub phase: Phase,
}

impl AttemptFailure {
    /// A connection failure (retryable).
    pub(crate) fn transport(message: String, phase: Phase) -> Self {
        Self {
            kind: FailureKind::Transport,
            message,
            retryable: true,
            phase,
        }
    }

    /// A deadline that passed (retryable).
    pub(crate) fn timeout(message: String, phase: Phase) -> Self {
        Self {
            kind: FailureKind::Timeout,
            message,
            retryable: true,
            phase,
        }
    }

    /// An undecodable answer; `retryable` only for a stream that ended before its first
    /// chunk (nothing reached the client).
    pub(crate) fn protocol(message: String, retryable: bool) -> Self {
        Self {
            kind: FailureKind::Protocol,
            message,
            retryable,
            phase: Phase::AfterHead,
        }
    }

    /// The endpoint's buffered body is over `cap` (`max_response_bytes`).
    pub(crate) fn too_large(endpoint: &str, cap: usize) -> Self {
        Self::protocol(
            format!(
                "endpoint {endpoint} answered a body larger than {cap} bytes (max_response_bytes)"
            ),
            false,
        )
    }

    /// The endpoint did not answer a buffered request within its `timeout`.
    pub(crate) fn no_answer_in_time(endpoint: &str, phase: Phase) -> Self {
        Self::timeout(format!("endpoint {endpoint} did not answer in time"), phase)
    }

    /// A non-success status, with the start of its body (for the upstream's message).
    /// On a `capability` route 404, 405 and 501 mean the upstream cannot serve the kind
    /// (answered at once, as the README's failover rules say); otherwise 5xx and 429 are
    /// retryable.
    pub(crate) fn status(
        endpoint: &str,
        status: StatusCode,
        body: &[u8],
        capability: bool,
    ) -> Self {
        let detail = upstream_message(body)
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        let message = format!("endpoint {endpoint} answered {status}{detail}");
        let (kind, message) = match status.as_u16() {
            404 | 405 | 501 if capability => (
                FailureKind::Unavailable,
                format!("endpoint {endpoint} cannot serve this kind of request ({status})"),
            ),
            400 | 413 | 422 => (FailureKind::Rejected, message),
            429 => (FailureKind::RateLimited, message),
            _ => (FailureKind::Status, message),
        };
        let retryable = kind != FailureKind::Unavailable
            && (status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS);
        Self {
            kind,
            message,
            retryable,
            phase: Phase::AfterHead,
        }
    }
}

/// How much of an upstream error body is read (for its message).
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The upstream's own error message, when its body is an OpenAI-style envelope.
fn upstream_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map(|m| m.chars().take(500).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_classify_as_the_readme_says() {
        let cases = [
            (400, false, FailureKind::Rejected, false),
            (413, false, FailureKind::Rejected, false),
            (422, false, FailureKind::Rejected, false),
            (429, false, FailureKind::RateLimited, true),
            (401, false, FailureKind::Status, false),
            (404, false, FailureKind::Status, false),
            (404, true, FailureKind::Unavailable, false),
            (405, true, FailureKind::Unavailable, false),
            (501, true, FailureKind::Unavailable, false),
            (500, false, FailureKind::Status, true),
            (503, false, FailureKind::Status, true),
        ];
        for (code, capability, kind, retryable) in cases {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::IM_A_TEAPOT);
            let failure = AttemptFailure::status("up", status, b"", capability);
            assert_eq!(
                (failure.kind, failure.retryable),
                (kind, retryable),
                "{code}"
            );
        }
        let failure = AttemptFailure::status(
            "up",
            StatusCode::BAD_REQUEST,
            br#"{"error":{"message":"bad temperature"}}"#,
            false,
        );
        assert_eq!(
            failure.message,
            "endpoint up answered 400 Bad Request: bad temperature"
        );
    }
}
