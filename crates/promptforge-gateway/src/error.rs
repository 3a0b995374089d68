//! The gateway's one error map: every [`ErrorCode`] with its HTTP status and OpenAI
//! `error.type`, and [`ApiError`], the enveloped error every route returns.
//!
//! Domain modules (admission, the live state, the local runtime, configuration) return
//! their own errors; `routes/` turns them into an [`ApiError`], whose status and type come
//! from its code alone.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use promptforge_wire::ErrorEnvelope;
pub(crate) use promptforge_wire::ErrorType;
use serde_json::Value;

/// Every stable `error.code` the gateway answers with (the README's error table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ErrorCode {
    /// 400: malformed JSON, a validation failure, an unparsable HTTP request.
    InvalidRequest,
    /// 413: the request body is over the cap.
    PayloadTooLarge,
    /// 400: the model's kind does not match the route.
    KindMismatch,
    /// 400: the upstream cannot serve this kind of request.
    ModelUnavailable,
    /// 400: the upstream refused the request (it answered 400, 413 or 422).
    UpstreamRejected,
    /// 400: a profile switch names no single path component.
    InvalidProfileName,
    /// 400: the profile to switch to fails to load.
    ProfileInvalid,
    /// 401: the bearer key is missing or wrong.
    Unauthorized,
    /// 404: no loaded model has that exact name.
    ModelNotFound,
    /// 404: the profile to switch to does not exist.
    ProfileNotFound,
    /// 404: no such route (or web search is not configured).
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 414: the request URI is too long.
    UriTooLong,
    /// 429: `policy = "reject"` and no free slot.
    QueueRejected,
    /// 429: the upstream or the search provider is rate limiting.
    UpstreamRateLimited,
    /// 431: the request head is too large.
    HeadersTooLarge,
    /// 502: the upstream could not be reached.
    UpstreamTransport,
    /// 502: the upstream answered something undecodable.
    UpstreamProtocol,
    /// 502: the upstream answered another error status.
    UpstreamStatus,
    /// 503: every slot busy and the queue full.
    QueueFull,
    /// 503: a local model has no running child.
    LocalRuntimeUnavailable,
    /// 503: a local model of a new profile could not be started.
    LocalStartFailed,
    /// 503: `max_connections` client connections are open.
    TooManyConnections,
    /// 503: shutdown's drain ended before the request did.
    ShuttingDown,
    /// 504: the upstream did not answer in time.
    UpstreamTimeout,
}

impl ErrorCode {
    /// Every code.
    #[cfg(test)]
    pub(crate) const ALL: &'static [Self] = &[
        Self::InvalidRequest,
        Self::PayloadTooLarge,
        Self::KindMismatch,
        Self::ModelUnavailable,
        Self::UpstreamRejected,
        Self::InvalidProfileName,
        Self::ProfileInvalid,
        Self::Unauthorized,
        Self::ModelNotFound,
        Self::ProfileNotFound,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::UriTooLong,
        Self::QueueRejected,
        Self::UpstreamRateLimited,
        Self::HeadersTooLarge,
        Self::UpstreamTransport,
        Self::UpstreamProtocol,
        Self::UpstreamStatus,
        Self::QueueFull,
        Self::LocalRuntimeUnavailable,
        Self::LocalStartFailed,
        Self::TooManyConnections,
        Self::ShuttingDown,
        Self::UpstreamTimeout,
    ];

    /// The wire spelling of `error.code`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::PayloadTooLarge => "payload_too_large",
            Self::KindMismatch => "kind_mismatch",
            Self::ModelUnavailable => "model_unavailable",
            Self::UpstreamRejected => "upstream_rejected",
            Self::InvalidProfileName => "invalid_profile_name",
            Self::ProfileInvalid => "profile_invalid",
            Self::Unauthorized => "unauthorized",
            Self::ModelNotFound => "model_not_found",
            Self::ProfileNotFound => "profile_not_found",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::UriTooLong => "uri_too_long",
            Self::QueueRejected => "queue_rejected",
            Self::UpstreamRateLimited => "upstream_rate_limited",
            Self::HeadersTooLarge => "headers_too_large",
            Self::UpstreamTransport => "upstream_transport",
            Self::UpstreamProtocol => "upstream_protocol",
            Self::UpstreamStatus => "upstream_status",
            Self::QueueFull => "queue_full",
            Self::LocalRuntimeUnavailable => "local_runtime_unavailable",
            Self::LocalStartFailed => "local_start_failed",
            Self::TooManyConnections => "too_many_connections",
            Self::ShuttingDown => "shutting_down",
            Self::UpstreamTimeout => "upstream_timeout",
        }
    }

    /// The HTTP status the code is answered with.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Self::InvalidRequest
            | Self::KindMismatch
            | Self::ModelUnavailable
            | Self::UpstreamRejected
            | Self::InvalidProfileName
            | Self::ProfileInvalid => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::ModelNotFound | Self::ProfileNotFound | Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::UriTooLong => StatusCode::URI_TOO_LONG,
            Self::QueueRejected | Self::UpstreamRateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::UpstreamTransport | Self::UpstreamProtocol | Self::UpstreamStatus => {
                StatusCode::BAD_GATEWAY
            }
            Self::QueueFull
            | Self::LocalRuntimeUnavailable
            | Self::LocalStartFailed
            | Self::TooManyConnections
            | Self::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Self::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The OpenAI `error.type` the code is answered with.
    pub(crate) fn error_type(self) -> ErrorType {
        match self {
            Self::InvalidRequest
            | Self::PayloadTooLarge
            | Self::KindMismatch
            | Self::ModelUnavailable
            | Self::UpstreamRejected
            | Self::InvalidProfileName
            | Self::ProfileInvalid
            | Self::ModelNotFound
            | Self::ProfileNotFound
            | Self::NotFound
            | Self::MethodNotAllowed
            | Self::UriTooLong
            | Self::HeadersTooLarge => ErrorType::InvalidRequest,
            Self::Unauthorized => ErrorType::Authentication,
            Self::QueueRejected
            | Self::UpstreamRateLimited
            | Self::QueueFull
            | Self::TooManyConnections => ErrorType::RateLimit,
            Self::UpstreamTransport
            | Self::UpstreamProtocol
            | Self::UpstreamStatus
            | Self::UpstreamTimeout => ErrorType::Upstream,
            Self::LocalRuntimeUnavailable | Self::LocalStartFailed | Self::ShuttingDown => {
                ErrorType::Server
            }
        }
    }
}

/// An error answered as `{"error": {"message", "type", "code"}}`; the HTTP status and the
/// type follow from the [`ErrorCode`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} {}: {message}", code.status(), code.as_str())]
pub(crate) struct ApiError {
    code: ErrorCode,
    message: String,
}

impl ApiError {
    /// A new error.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request`.
    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// 401 with no detail.
    pub(crate) fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "unauthorized")
    }

    /// 404 `model_not_found`.
    pub(crate) fn model_not_found(name: &str) -> Self {
        Self::new(ErrorCode::ModelNotFound, format!("unknown model {name}"))
    }

    /// 502 `upstream_transport`: the backend could not be reached.
    pub(crate) fn upstream_transport(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UpstreamTransport, message)
    }

    /// 502 `upstream_protocol`: the backend answered something undecodable.
    pub(crate) fn upstream_protocol(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UpstreamProtocol, message)
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The stable `error.code`.
    pub(crate) fn code(&self) -> &'static str {
        self.code.as_str()
    }

    /// The code as the enum.
    pub(crate) fn error_code(&self) -> ErrorCode {
        self.code
    }

    /// The envelope body.
    pub(crate) fn envelope(&self) -> Value {
        ErrorEnvelope::new(
            self.code.error_type(),
            self.code.as_str(),
            self.message.clone(),
        )
        .to_value()
    }
}
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(%status, code = self.code(), message = %self.message, "request failed");
        }
        let mut response = (status, axum::Json(self.envelope())).into_response();
        if self.code == ErrorCode::Unauthorized {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_has_one_spelling_and_a_status_of_its_class() {
        let spellings: HashSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(spellings.len(), ErrorCode::ALL.len());
        for &code in ErrorCode::ALL {
            let status = code.status();
            let expected = match code.error_type() {
                ErrorType::InvalidRequest | ErrorType::Authentication => status.is_client_error(),
                ErrorType::Upstream | ErrorType::Server => status.is_server_error(),
                ErrorType::RateLimit => {
                    status == StatusCode::TOO_MANY_REQUESTS
                        || status == StatusCode::SERVICE_UNAVAILABLE
                }
            };
            assert!(expected, "{code:?} is {status} {:?}", code.error_type());
        }
    }

    #[test]
    fn the_codes_the_guide_names_have_its_statuses() {
        let table = [
            (ErrorCode::QueueFull, 503, "rate_limit_error"),
            (ErrorCode::QueueRejected, 429, "rate_limit_error"),
            (ErrorCode::KindMismatch, 400, "invalid_request_error"),
            (ErrorCode::ModelUnavailable, 400, "invalid_request_error"),
            (ErrorCode::UpstreamRejected, 400, "invalid_request_error"),
            (ErrorCode::Unauthorized, 401, "authentication_error"),
            (ErrorCode::UpstreamTimeout, 504, "upstream_error"),
            (ErrorCode::ShuttingDown, 503, "server_error"),
        ];
        for (code, status, kind) in table {
            let error = ApiError::new(code, "m");
            assert_eq!(error.status().as_u16(), status, "{code:?}");
            assert_eq!(error.envelope()["error"]["type"], kind, "{code:?}");
            assert_eq!(error.envelope()["error"]["code"], code.as_str());
        }
    }
}
