//! Sending one request upstream and mapping every failure to an [`ApiError`].

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use serde_json::{Map, Value};

use crate::error::{ApiError, ErrorCode};
use crate::state::Upstream;

/// The JSON body of an outgoing request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// An object, serialised for each attempt.
    Json(&'a Map<String, Value>),
    /// Bytes that already are the JSON text to send (e.g. the caller's body with only the
    /// model rewritten).
    Raw(&'a Bytes),
}

/// One outgoing request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpstreamCall<'a> {
    /// The endpoint.
    pub upstream: &'a Upstream,
    /// Path below the base URL, e.g. `/chat/completions`.
    pub path: &'a str,
    /// The JSON body.
    pub body: Payload<'a>,
    /// Use the connect-timeout-only client.
    pub streaming: bool,
    /// Map "this upstream has no such route" (404, 405, 501) to 400 `model_unavailable`.
    pub capability_route: bool,
}

/// A failed attempt: the error, and whether failover may move on to the next endpoint
/// (a transport failure or timeout, a 5xx, or a 429).
#[derive(Debug)]
pub(crate) struct AttemptError {
    /// The mapped error.
    pub(crate) error: ApiError,
    /// Another endpoint may succeed where this one failed.
    pub(crate) retryable: bool,
}

impl AttemptError {
    /// A transport-level failure (always retryable).
    pub(crate) fn transport(error: ApiError) -> Self {
        Self {
            error,
            retryable: true,
        }
    }
}

/// Sends `call` and returns the response when its status is a success; a failure says
/// whether failover may retry it at another endpoint.
pub(crate) async fn send_attempt(
    call: UpstreamCall<'_>,
) -> Result<reqwest::Response, AttemptError> {
    let client = call.upstream.client(call.streaming);
    let request = client.post(call.upstream.url(call.path));
    let mut request = match call.body {
        Payload::Json(body) => request.json(body),
        Payload::Raw(bytes) => request
            .header(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )
            .body(bytes.clone()),
    };
    if let Some(key) = &call.upstream.api_key {
        request = request.bearer_auth(key.expose());
    }
    let sent = request.send();
    let response = if call.streaming {
        // The streaming client has no whole-request deadline; the response head still
        // has to arrive in time.
        let limit = call.upstream.stream_first_byte_timeout;
        match tokio::time::timeout(limit, sent).await {
            Ok(result) => result,
            Err(_) => {
                return Err(AttemptError::transport(timeout_error(format!(
                    "endpoint {} sent no response within {} (stream_first_byte_timeout)",
                    call.upstream.id,
                    humantime::format_duration(limit)
                ))));
            }
        }
    } else {
        sent.await
    }
    .map_err(|err| AttemptError::transport(transport_error(&call.upstream.id, &err)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    // Only the start of an error body is read (for the upstream's message).
    let body = match read_capped(response, MAX_ERROR_BODY_BYTES).await {
        Ok(Capped::Whole(body) | Capped::Cut(body)) => body,
        Err(_) => Vec::new(),
    };
    Err(AttemptError {
        error: status_error(&call.upstream.id, status, &body, call.capability_route),
        retryable: status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS,
    })
}

/// How much of an upstream error body is read.
pub(super) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// A body read up to a cap.
#[derive(Debug)]
pub(crate) enum Capped {
    /// The whole body.
    Whole(Vec<u8>),
    /// The first `cap` bytes; the body goes on (the rest is never read).
    Cut(Vec<u8>),
}

/// Reads at most `cap` bytes of `response`'s body. A declared `Content-Length` over the
/// cap is refused before any byte is read; the rest of a longer body is never read
/// (dropping the response closes its connection).
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Capped, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|declared| declared > cap as u64)
    {
        return Ok(Capped::Cut(Vec::new()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok(Capped::Cut(body));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Capped::Whole(body))
}

/// 502 `upstream_protocol`: a buffered body over the endpoint's `max_response_bytes`.
pub(crate) fn too_large(upstream: &Upstream, cap: usize) -> ApiError {
    ApiError::upstream_protocol(format!(
        "endpoint {} answered a body larger than {cap} bytes (max_response_bytes)",
        upstream.id
    ))
}

/// 504 `upstream_timeout`.
pub(crate) fn timeout_error(message: String) -> ApiError {
    ApiError::new(ErrorCode::UpstreamTimeout, message)
}

/// Parses a whole upstream body as a JSON object (502 `upstream_protocol` otherwise).
pub(crate) fn parse_json_object(
    upstream: &Upstream,
    bytes: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::upstream_protocol(format!(
            "endpoint {} answered JSON that is not an object",
            upstream.id
        ))),
        Err(err) => Err(ApiError::upstream_protocol(format!(
            "endpoint {} answered a body that is not JSON: {err}",
            upstream.id
        ))),
    }
}

/// A failure to get a response or to read its body (the connection failed or was cut;
/// decoding is the gateway's own job and maps to `upstream_protocol` elsewhere).
pub(crate) fn transport_error(endpoint: &str, err: &reqwest::Error) -> ApiError {
    if err.is_timeout() {
        return timeout_error(format!("endpoint {endpoint} did not answer in time"));
    }
    // reqwest's Display never includes headers, so no credential can appear here.
    let mut message = format!("endpoint {endpoint} unreachable: {err}");
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        message.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    ApiError::upstream_transport(message)
}

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

/// Maps a non-success upstream status.
pub(super) fn status_error(
    endpoint: &str,
    status: StatusCode,
    body: &[u8],
    capability_route: bool,
) -> ApiError {
    let detail = upstream_message(body)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let message = format!("endpoint {endpoint} answered {status}{detail}");
    match status.as_u16() {
        404 | 405 | 501 if capability_route => ApiError::new(
            ErrorCode::ModelUnavailable,
            format!("endpoint {endpoint} cannot serve this kind of request ({status})"),
        ),
        400 | 413 | 422 => ApiError::new(ErrorCode::UpstreamRejected, message),
        429 => ApiError::new(ErrorCode::UpstreamRateLimited, message),
        _ => ApiError::new(ErrorCode::UpstreamStatus, message),
    }
}
