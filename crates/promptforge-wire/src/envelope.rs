//! The OpenAI error envelope: `{"error": {"message", "type", "code"}}`.

use serde::{Deserialize, Serialize};

/// The `error.type` values the gateway sends.
///
/// Reading an envelope keeps `type` as text ([`ErrorBody::error_type`]): a client reads
/// envelopes from any OpenAI-compatible server, whose types are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// The whole error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorBody,
}

/// The `error` object of an [`ErrorEnvelope`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Human-readable text.
    pub message: String,
    /// The OpenAI error class, e.g. `invalid_request_error` (see [`ErrorType`]).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The stable machine-readable code, e.g. `model_not_found`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl ErrorEnvelope {
    /// An envelope as the gateway sends it: every field present.
    pub fn new(error_type: ErrorType, code: &str, message: impl Into<String>) -> Self {
        Self {
            error: ErrorBody {
                message: message.into(),
                error_type: Some(error_type.as_str().to_owned()),
                code: Some(code.to_owned()),
            },
        }
    }

    /// Reads an envelope from a response body; `None` when the body is not one (no
    /// `error.message` string). A `code` that is not a string reads as absent.
    pub fn from_body(body: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(body).ok()?;
        let error = value.get("error")?;
        let text = |key: &str| error.get(key).and_then(serde_json::Value::as_str);
        Some(Self {
            error: ErrorBody {
                message: text("message")?.to_owned(),
                error_type: text("type").map(str::to_owned),
                code: text("code").map(str::to_owned),
            },
        })
    }

    /// The envelope as a JSON value (what `Serialize` writes: absent fields are left out).
    pub fn to_value(&self) -> serde_json::Value {
        let mut error = serde_json::Map::new();
        error.insert("message".into(), self.error.message.clone().into());
        if let Some(error_type) = &self.error.error_type {
            error.insert("type".into(), error_type.clone().into());
        }
        if let Some(code) = &self.error.code {
            error.insert("code".into(), code.clone().into());
        }
        serde_json::json!({ "error": error })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn written_and_read_back() {
        let envelope = ErrorEnvelope::new(ErrorType::Upstream, "upstream_transport", "down");
        let json = envelope.to_value();
        assert_eq!(
            json,
            serde_json::json!({"error": {"message": "down", "type": "upstream_error",
                "code": "upstream_transport"}})
        );
        assert_eq!(serde_json::to_value(&envelope).unwrap(), json);
        assert_eq!(ErrorEnvelope::from_body(&json.to_string()), Some(envelope));
    }

    #[test]
    fn lenient_reading_of_other_servers() {
        let read = ErrorEnvelope::from_body(
            r#"{"error":{"message":"m","type":"not_found_error","code":404}}"#,
        )
        .unwrap();
        assert_eq!(read.error.error_type.as_deref(), Some("not_found_error"));
        assert_eq!(read.error.code, None);
        assert_eq!(ErrorEnvelope::from_body("secret echo"), None);
        assert_eq!(ErrorEnvelope::from_body(r#"{"error":{"code":"x"}}"#), None);
        let bare = ErrorEnvelope::from_body(r#"{"error":{"message":"m"}}"#).unwrap();
        assert_eq!(bare.to_value(), serde_json::to_value(&bare).unwrap());
        assert_eq!(
            bare.to_value(),
            serde_json::json!({"error": {"message": "m"}})
        );
    }
}
