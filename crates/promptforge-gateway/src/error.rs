//! The HTTP error every route returns: an OpenAI error envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use promptforge_wire::ErrorEnvelope;
pub use promptforge_wire::ErrorType;
use serde_json::Value;

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
        ErrorEnvelope::new(self.kind, self.code, self.message.clone()).to_value()
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
