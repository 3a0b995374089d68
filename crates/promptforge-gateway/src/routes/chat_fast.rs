//! The chat route's fast path: the caller's body is checked without building a JSON tree
//! and forwarded as it came with only the `model` value replaced (and `max_tokens`
//! added when the model has a default and the caller set none); the upstream's reply
//! goes back the same way, with only its `model` value replaced.
//!
//! Whenever a body is anything but the plain case (not an object, a duplicate key, a
//! field of an unexpected type, `stream: null`, a message that is not an object, a role
//! the route refuses, a reply without `model` or without a `choices` array), the fast
//! path declines (`None`) and the route takes its general path, which parses into a
//! tree and answers every problem with its usual error. So the fast path only ever
//! changes how an accepted request is handled, never what is accepted.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::chat::ROLES;

/// Deserialises a present field as `Some` even when its value is `null` (a plain
/// `Option` turns `null` into `None`, which the splice could not tell from absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The request fields the fast path reads; every other field is skipped.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    model: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default, deserialize_with = "present")]
    stream: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    max_tokens: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    max_completion_tokens: Option<&'a RawValue>,
}

/// The message fields the checks read.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<&'a RawValue>,
    #[serde(borrow, default)]
    function_call: Option<&'a RawValue>,
}

/// The reply fields the route reads.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    model: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    choices: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    usage: Option<&'a RawValue>,
}

/// A request the fast path accepted.
#[derive(Debug)]
pub(super) struct FastRequest<'a> {
    /// The caller's model name.
    pub model: String,
    /// `stream: true`.
    pub streaming: bool,
    /// Where the `model` value lies in the body.
    model_span: (usize, usize),
    /// Whether the caller set `max_tokens` or `max_completion_tokens`.
    has_max_tokens: bool,
    body: &'a [u8],
}

/// A reply the fast path accepted.
#[derive(Debug)]
pub(super) struct FastReply<'a> {
    /// The reply's `usage`, parsed, when present.
    pub usage: Option<serde_json::Value>,
    model_span: (usize, usize),
    body: &'a [u8],
}

/// Whether the first non-blank byte of `body` opens an object (serde would also accept
/// an array for a struct, which the general path refuses).
fn is_object(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Where `part` (a slice of `body`) lies in `body`.
fn span(body: &[u8], part: &RawValue) -> Option<(usize, usize)> {
    let start = (part.get().as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let end = start.checked_add(part.get().len())?;
    (body.get(start..end)? == part.get().as_bytes()).then_some((start, end))
}

/// `body` with `span` replaced by `value` as a JSON string, and `extra` (a `"key":value,`
/// member) inserted right after the opening brace.
fn splice(body: &[u8], span: (usize, usize), value: &str, extra: Option<&str>) -> Vec<u8> {
    let quoted = serde_json::Value::from(value).to_string();
    let extra = extra.unwrap_or_default();
    let mut out = Vec::with_capacity(body.len() + quoted.len() + extra.len());
    let (start, end) = span;
    let brace = body
        .iter()
        .position(|b| *b == b'{')
        .filter(|brace| *brace < start);
    match brace {
        Some(brace) => {
            out.extend_from_slice(&body[..=brace]);
            out.extend_from_slice(extra.as_bytes());
            out.extend_from_slice(&body[brace + 1..start]);
        }
        None => out.extend_from_slice(&body[..start]),
    }
    out.extend_from_slice(quoted.as_bytes());
    out.extend_from_slice(&body[end..]);
    out
}

impl<'a> FastRequest<'a> {
    /// Checks `body` as [`super::chat`]'s validation does; `None` when it is not the
    /// plain case (see the module documentation).
    pub(super) fn parse(body: &'a [u8]) -> Option<Self> {
        if !is_object(body) {
            return None;
        }
        let head: Head<'a> = serde_json::from_slice(body).ok()?;
        let raw_model = head.model?;
        let model: String = serde_json::from_str(raw_model.get()).ok()?;
        if model.is_empty() {
            return None;
        }
        let messages = head.messages?;
        if messages.is_empty() {
            return None;
        }
        for message in messages {
            if !is_object(message.get().as_bytes()) {
                return None;
            }
            let message: Message<'_> = serde_json::from_str(message.get()).ok()?;
            if !ROLES.contains(&message.role?.as_ref()) {
                return None;
            }
            if message.content.is_none()
                && message.tool_calls.is_none()
                && message.function_call.is_none()
            {
                return None;
            }
        }
        let streaming = match head.stream {
            None => false,
            Some(raw) => serde_json::from_str::<bool>(raw.get()).ok()?,
        };
        Some(Self {
            model,
            streaming,
            model_span: span(body, raw_model)?,
            has_max_tokens: head.max_tokens.is_some() || head.max_completion_tokens.is_some(),
            body,
        })
    }

    /// The body to send upstream: the caller's, with `model` set to `upstream_model` and
    /// `max_tokens` set to `default_max_tokens` when the caller set no limit.
    pub(super) fn outgoing(
        &self,
        upstream_model: &str,
        default_max_tokens: Option<u64>,
    ) -> Vec<u8> {
        let extra = default_max_tokens
            .filter(|_| !self.has_max_tokens)
            .map(|n| format!("\"max_tokens\":{n},"));
        splice(self.body, self.model_span, upstream_model, extra.as_deref())
    }
}

impl<'a> FastReply<'a> {
    /// Reads a chat completion reply; `None` when it is not the plain case.
    pub(super) fn parse(body: &'a [u8]) -> Option<Self> {
        if !is_object(body) {
            return None;
        }
        let reply: Reply<'a> = serde_json::from_slice(body).ok()?;
        if !reply.choices?.get().starts_with('[') {
            return None;
        }
        let usage = match reply.usage {
            None => None,
            Some(raw) => Some(serde_json::from_str(raw.get()).ok()?),
        };
        Some(Self {
            usage,
            model_span: span(body, reply.model?)?,
            body,
        })
    }

    /// The reply with `model` set to the caller's name.
    pub(super) fn with_model(&self, caller_model: &str) -> Vec<u8> {
        splice(self.body, self.model_span, caller_model, None)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    fn parsed(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn a_plain_request_keeps_every_field_and_gets_the_upstream_model() {
        let body = br#" {"temperature":0.5, "model" : "caller\u00e9", "messages":[{"role":"user","content":"hi","name":"x"}],"stream":false,"seed":{"a":[1,2]}}"#;
        let fast = FastRequest::parse(body).unwrap();
        assert_eq!(fast.model, "caller\u{e9}");
        assert!(!fast.streaming);
        let out = parsed(&fast.outgoing("up \"q\"", None));
        assert_eq!(
            out,
            json!({"temperature":0.5,"model":"up \"q\"","messages":[{"role":"user","content":"hi","name":"x"}],"stream":false,"seed":{"a":[1,2]}})
        );
    }

    #[test]
    fn the_default_max_tokens_is_added_only_without_a_limit() {
        let body = br#"{"messages":[{"role":"user","content":"hi"}],"model":"m"}"#;
        let out = parsed(&FastRequest::parse(body).unwrap().outgoing("up", Some(64)));
        assert_eq!(
            out,
            json!({"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"model":"up"})
        );
        let body = br#"{"model":"m","max_completion_tokens":null,"messages":[{"role":"user","content":"hi"}]}"#;
        let out = parsed(&FastRequest::parse(body).unwrap().outgoing("up", Some(64)));
        assert_eq!(out.get("max_tokens"), None);
    }

    #[test]
    fn anything_but_the_plain_case_is_left_to_the_general_path() {
        for body in [
            r#"["model","messages"]"#,
            r#"{"model":"m","model":"n","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":7,"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[]}"#,
            r#"{"model":"m","messages":[["user","hi"]]}"#,
            r#"{"model":"m","messages":[{"role":"robot","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":null}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":null}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":"yes"}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}]} x"#,
        ] {
            assert!(FastRequest::parse(body.as_bytes()).is_none(), "{body}");
        }
        let body =
            br#"{"model":"m","messages":[{"role":"assistant","tool_calls":[]}],"stream":true}"#;
        assert!(FastRequest::parse(body).unwrap().streaming);
    }

    #[test]
    fn a_reply_gets_the_callers_model_and_its_usage_is_read() {
        let body =
            br#"{"id":"x","model":"up","choices":[{"index":0}],"usage":{"prompt_tokens":3}}"#;
        let fast = FastReply::parse(body).unwrap();
        assert_eq!(fast.usage, Some(json!({"prompt_tokens":3})));
        assert_eq!(
            parsed(&fast.with_model("caller")),
            json!({"id":"x","model":"caller","choices":[{"index":0}],"usage":{"prompt_tokens":3}})
        );
        for body in [
            r#"{"id":"x","choices":[]}"#,
            r#"{"model":"up","choices":{}}"#,
            r#"{"model":"up"}"#,
            r#"[1]"#,
            r#"{"model":"up","choices":[],"usage":{"a":}"#,
        ] {
            assert!(FastReply::parse(body.as_bytes()).is_none(), "{body}");
        }
    }
}
