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
//! - `tool_choice`: absent, `null`, `"none"`, `"auto"`, `"required"` or the object form
//!   `{"type": "function", "function": {"name": NAME}}` (further members pass through),
//!   and a NAME must be the `function.name` of an entry of `tools` ([`ToolChoice`]);
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
//! - a `tool_choice` that is not a string or `null` (the object form names a tool the
//!   general path checks against `tools`, and a local child gets it translated), or a
//!   repeated `tool_choice`;
//! - a `role` that is not a string;
//! - a model whose tool calls are emulated (`tool_dialect = "gemma3_tool_code"`, not
//!   streaming).

use promptforge_env::quote as quoted;
use serde_json::Value;

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

/// The string values `tool_choice` may take.
pub(crate) const TOOL_CHOICES: [&str; 3] = ["none", "auto", "required"];

/// What a request's `tool_choice` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolChoice<'a> {
    /// Absent or `null`: the backend's default.
    Unset,
    /// `"none"`, `"auto"` or `"required"` (one of [`TOOL_CHOICES`]).
    Mode(&'a str),
    /// The object form: this function must be called.
    Named(&'a str),
}

/// A string `tool_choice` must be one of [`TOOL_CHOICES`].
pub(crate) fn tool_choice_mode(mode: &str) -> Result<ToolChoice<'_>, Invalid> {
    match TOOL_CHOICES.iter().find(|known| **known == mode) {
        Some(known) => Ok(ToolChoice::Mode(known)),
        None => Err(Invalid(format!(
            "tool_choice `{}` is not one of {}, or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
            quoted(mode),
            TOOL_CHOICES.join(", ")
        ))),
    }
}

/// `tool_choice` as the general path read it (`None`: absent).
pub(crate) fn tool_choice(value: Option<&Value>) -> Result<ToolChoice<'_>, Invalid> {
    let object = match value {
        None | Some(Value::Null) => return Ok(ToolChoice::Unset),
        Some(Value::String(mode)) => return tool_choice_mode(mode),
        Some(Value::Object(object)) => object,
        Some(_) => {
            return Err(Invalid(
                "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}".to_owned(),
            ));
        }
    };
    if object.get("type").and_then(Value::as_str) != Some("function") {
        return Err(Invalid(
            "tool_choice.type must be \"function\" (the only object form)".to_owned(),
        ));
    }
    match object
        .get("function")
        .and_then(|f| f.get("name"))
        .and_then(Value::as_str)
    {
        Some(name) if !name.is_empty() => Ok(ToolChoice::Named(name)),
        _ => Err(Invalid(
            "tool_choice.function.name must be a non-empty string".to_owned(),
        )),
    }
}

/// The `function.name` of a `tools` entry, when it has one.
pub(crate) fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")?.get("name")?.as_str()
}

/// A function `tool_choice` names must be offered in `tools`.
pub(crate) fn named_tool_offered(name: &str, tools: Option<&Value>) -> Result<(), Invalid> {
    let offered = tools
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|tool| tool_name(tool) == Some(name)));
    if offered {
        Ok(())
    } else {
        Err(Invalid(format!(
            "tool_choice names the function `{}`, which is not in tools",
            quoted(name)
        )))
    }
}
