//! The HTTP error every route returns: an OpenAI error envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The OpenAI `error.type` of an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// The request is wrong (4xx).
    InvalidRequest,
    /// The bearer key is missing or wrong (401).
    Authentication,
    /// The backend failed (5xx).
    Upstream,
    /// The gateway itself failed (5xx).
    Server,
    /// A capacity limit was hit (429/503).
    RateLimit,
}

impl ErrorType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request_error",
            Self::Authentication => "authentication_error",
            Self::Upstream => "upstream_error",
            Self::Server => "server_error",
            Self::RateLimit => "rate_limit_error",
        }
    }
}

/// An error answered as `{"error": {"message", "type", "code"}}` with an HTTP status.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    status: StatusCode,
    kind: ErrorType,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// A new error.
    pub fn new(
        status: StatusCode,
        kind: ErrorType,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            kind,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request_error` with `code`.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorType::InvalidRequest,
            code,
            message,
        )
    }

    /// 401 with no detail.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            ErrorType::Authentication,
            "unauthorized",
            "unauthorized",
        )
    }

    /// 404 `model_not_found`.
    pub fn model_not_found(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorType::InvalidRequest,
            "model_not_found",
            format!("unknown model {name}"),
        )
    }

    /// 502 `upstream_transport`: the backend could not be reached.
    pub fn upstream_transport(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            ErrorType::Upstream,
            "upstream_transport",
            message,
        )
    }

    /// 502 `upstream_protocol`: the backend answered something undecodable.
    pub fn upstream_protocol(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            ErrorType::Upstream,
            "upstream_protocol",
            message,
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable `error.code`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The envelope body.
    pub fn envelope(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind.as_str(),
                "code": self.code,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, code = self.code, message = %self.message, "request failed");
        }
        let mut response = (self.status, axum::Json(self.envelope())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
