//! The gateway's one error map: every [`ErrorCode`] with its HTTP status and OpenAI
//! `error.type`, [`ApiError`] (the enveloped error every answer carries), and the map from
//! each domain error to it.
//!
//! Domain modules return their own typed errors (the relay's [`AttemptFailure`],
//! [`RelayError`] and [`StreamError`], [`AdmissionError`], the configuration's
//! [`ConfigError`] for a profile switch, the search's [`SearchError`], the dialect's
//! [`DialectError`], the connection layer's [`Refusal`]); the `From` impls below are the
//! only place they become a status and an envelope, each an exhaustive `match`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use promptforge_wire::ErrorEnvelope;
pub(crate) use promptforge_wire::ErrorType;
use serde_json::Value;

use crate::admission::AdmissionError;
use crate::config::{ConfigError, ConfigErrorKind};
use crate::dialect::gemma::DialectError;
use crate::relay::failover::RelayError;
use crate::relay::sse::StreamError;
use crate::relay::{AttemptFailure, FailureKind};
use crate::search::SearchError;

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
    /// 503: a local model of a new profile could not be started.
    LocalStartFailed,
    /// 503: `max_connections` client connections are open.
    TooManyConnections,
    /// 503: shutdown's drain ended before the request did.
    ShuttingDown,
    /// 503: a dominion shared through `[dominion_store]` with `on_store_failure =
    /// "fail_closed"`, and the store cannot be reached.
    DominionStoreUnavailable,
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
        Self::LocalStartFailed,
        Self::TooManyConnections,
        Self::ShuttingDown,
        Self::DominionStoreUnavailable,
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
            Self::LocalStartFailed => "local_start_failed",
            Self::TooManyConnections => "too_many_connections",
            Self::ShuttingDown => "shutting_down",
            Self::DominionStoreUnavailable => "dominion_store_unavailable",
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
            | Self::LocalStartFailed
            | Self::TooManyConnections
            | Self::ShuttingDown
            | Self::DominionStoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
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
            Self::LocalStartFailed | Self::ShuttingDown | Self::DominionStoreUnavailable => {
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

    /// The message (the envelope carries it; only tests read it alone).
    #[cfg(test)]
    pub(crate) fn message(&self) -> &str {
        &self.message
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

/// 503 `shutting_down`: the gateway stopped before the request completed.
pub(crate) fn shutting_down() -> ApiError {
    ApiError::new(
        ErrorCode::ShuttingDown,
        "the gateway is shutting down; the request was not completed (retry against a running gateway)",
    )
}

impl From<FailureKind> for ErrorCode {
    fn from(kind: FailureKind) -> Self {
        match kind {
            FailureKind::Transport => Self::UpstreamTransport,
            FailureKind::Timeout => Self::UpstreamTimeout,
            FailureKind::Protocol => Self::UpstreamProtocol,
            FailureKind::Rejected => Self::UpstreamRejected,
            FailureKind::RateLimited => Self::UpstreamRateLimited,
            FailureKind::Status => Self::UpstreamStatus,
            FailureKind::Unavailable => Self::ModelUnavailable,
        }
    }
}

impl From<AttemptFailure> for ApiError {
    fn from(failure: AttemptFailure) -> Self {
        Self::new(failure.kind.into(), failure.message)
    }
}

impl From<AdmissionError> for ApiError {
    fn from(error: AdmissionError) -> Self {
        let code = match &error {
            AdmissionError::Rejected { .. } => ErrorCode::QueueRejected,
            AdmissionError::Full { .. } | AdmissionError::Closed => ErrorCode::QueueFull,
            AdmissionError::StoreUnavailable { .. } => ErrorCode::DominionStoreUnavailable,
        };
        Self::new(code, error.to_string())
    }
}

impl From<RelayError> for ApiError {
    fn from(error: RelayError) -> Self {
        match error {
            RelayError::Upstream(failure) => failure.into(),
            RelayError::Admission(error) => error.into(),
        }
    }
}

impl From<StreamError> for ApiError {
    fn from(error: StreamError) -> Self {
        match error {
            StreamError::Upstream(failure) => failure.into(),
            StreamError::ShuttingDown => shutting_down(),
        }
    }
}

impl From<SearchError> for ApiError {
    fn from(error: SearchError) -> Self {
        match error {
            SearchError::Invalid(message) => Self::invalid_request(message),
            SearchError::Provider(failure) => failure.into(),
        }
    }
}

impl From<DialectError> for ApiError {
    fn from(error: DialectError) -> Self {
        Self::invalid_request(error.to_string())
    }
}

/// A failed profile switch: the name, the profile, its configuration or its local models.
pub(crate) fn switch_failed(error: &ConfigError) -> ApiError {
    let code = match error.kind() {
        ConfigErrorKind::ProfileName => ErrorCode::InvalidProfileName,
        ConfigErrorKind::Profile => ErrorCode::ProfileNotFound,
        ConfigErrorKind::Local => ErrorCode::LocalStartFailed,
        ConfigErrorKind::Io
        | ConfigErrorKind::Parse
        | ConfigErrorKind::Interpolation
        | ConfigErrorKind::Include
        | ConfigErrorKind::Validation
        | ConfigErrorKind::ServerMismatch => ErrorCode::ProfileInvalid,
    };
    ApiError::new(code, error.to_string())
}

/// What the connection layer answers by itself, before a request reaches a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// hyper could not parse the request line or a header.
    Malformed,
    /// The request URI is too long.
    UriTooLong,
    /// The request head is over `max_header_bytes` (or has more than 100 headers).
    HeadersTooLarge {
        /// `max_header_bytes`.
        max: usize,
    },
    /// `max_connections` connections are open.
    TooManyConnections {
        /// `max_connections`.
        max: u32,
    },
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Malformed => Self::invalid_request(
                "malformed HTTP request: the request line or a header could not be parsed",
            ),
            Refusal::UriTooLong => Self::new(ErrorCode::UriTooLong, "the request URI is too long"),
            Refusal::HeadersTooLarge { max } => Self::new(
                ErrorCode::HeadersTooLarge,
                format!(
                    "the request head is larger than {max} bytes (max_header_bytes) or has more than 100 headers"
                ),
            ),
            Refusal::TooManyConnections { max } => Self::new(
                ErrorCode::TooManyConnections,
                format!(
                    "the gateway already has {max} open connections (max_connections); retry later"
                ),
            ),
        }
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
    fn every_failure_kind_is_counted_under_the_code_it_is_answered_with() {
        for kind in FailureKind::ALL {
            let code = ErrorCode::from(kind);
            assert_eq!(kind.label(), code.as_str(), "{kind:?}");
        }
    }

    #[test]
    fn a_switch_maps_each_configuration_error_kind() {
        let file = std::path::Path::new("profiles/x.toml");
        for (kind, code) in [
            (ConfigErrorKind::ProfileName, "invalid_profile_name"),
            (ConfigErrorKind::Profile, "profile_not_found"),
            (ConfigErrorKind::Local, "local_start_failed"),
            (ConfigErrorKind::Include, "profile_invalid"),
            (ConfigErrorKind::Io, "profile_invalid"),
        ] {
            let error = switch_failed(&ConfigError::new(kind, file, None, "m"));
            assert_eq!(error.code(), code, "{kind:?}");
            assert_eq!(error.message(), "profiles/x.toml: m");
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
