//! The chat request contract, written once: which fields the gateway reads, what each
//! must be, and which requests the fast path may leave to the general path.
//!
//! Both readers of a request body go through these checks: the general path
//! ([`super::General`], a JSON tree) answers a failed check with its error; the fast path
//! ([`super::fast::FastRequest`], no tree) declines (`None`) on a failed check or on
//! anything in the list below, and the general path then takes the request. So
//! the fast path never accepts what the general path refuses, and answers what it accepts
//! as the general path would (a property test in `fast.rs` checks both over generated
//! bodies).
//!
//! The rules:
//! - `model`: a non-empty string (the name of a loaded model);
//! - `messages`: a non-empty array of objects, each with a `role` among [`ROLES`] and a
//!   non-null `content`, `tool_calls` or `function_call`;
//! - `stream`: `true` streams; absent, `false` or `null` do not;
//! - every other field passes through verbatim; only `model` is rewritten (and
//!   `max_tokens` added from `default_max_tokens` when the request sets neither
//!   `max_tokens` nor `max_completion_tokens`).
//!
//! What the fast path leaves to the general path even when every check holds (each one
//! the general path handles differently from a plain splice: it refuses the body, drops a
//! field, or keeps one of several values):
//! - a body whose first non-blank byte is not `{` (not an object), or with anything after
//!   the object;
//! - a body the general path cannot parse, even in a field the fast path skips (a number
//!   out of range, an invalid escape, nesting deeper than serde_json's limit);
//! - a repeated `model`, `messages`, `stream`, `max_tokens` or `max_completion_tokens`,
//!   or a repeated `role`, `content`, `tool_calls` or `function_call` within a message;
//! - `stream` that is not `true` or `false` (`null` is dropped by the general path);
//! - a `role` that is not a string;
//! - a model whose tool calls are emulated (`tool_dialect = "gemma3_tool_code"`, not
//!   streaming).

use super::super::error::ApiError;

/// Roles a message may carry.
pub(crate) const ROLES: [&str; 6] = [
    "system",
    "user",
    "assistant",
    "tool",
    "function",
    "developer",
];

/// A request that breaks the contract (answered 400 `invalid_request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid(String);

impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> Self {
        ApiError::invalid_request(invalid.0)
    }
}

/// `model` must be a non-empty string.
pub(crate) fn model(model: Option<&str>) -> Result<&str, Invalid> {
    model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| Invalid("model must be a non-empty string".to_owned()))
}

/// `messages` must be a non-empty array (`len` is `None` when it is not an array).
pub(crate) fn messages(len: Option<usize>) -> Result<(), Invalid> {
    match len {
        Some(len) if len > 0 => Ok(()),
        _ => Err(Invalid("messages must be a non-empty array".to_owned())),
    }
}

/// What one message says, as a reader saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Message<'a> {
    /// The message is a JSON object.
    pub object: bool,
    /// `role`, when it is a string.
    pub role: Option<&'a str>,
    /// `content` is present and not `null`.
    pub content: bool,
    /// `tool_calls` is present and not `null`.
    pub tool_calls: bool,
    /// `function_call` is present and not `null`.
    pub function_call: bool,
}

/// Message `index` must be an object with a known role and something to say.
pub(crate) fn message(index: usize, message: &Message<'_>) -> Result<(), Invalid> {
    if !message.object {
        return Err(Invalid(format!("messages[{index}] must be an object")));
    }
    match message.role {
        Some(role) if ROLES.contains(&role) => {}
        Some(role) => {
            return Err(Invalid(format!(
                "messages[{index}].role `{role}` is not one of {}",
                ROLES.join(", ")
            )));
        }
        None => {
            return Err(Invalid(format!("messages[{index}].role is missing")));
        }
    }
    if !(message.content || message.tool_calls || message.function_call) {
        return Err(Invalid(format!(
            "messages[{index}] needs content or a tool/function call"
        )));
    }
    Ok(())
}
