//! The chat route's fast path: the caller's body is checked without building a JSON tree
//! and forwarded as it came with only the `model` value replaced (and `max_tokens`
//! added when the model has a default and the caller set none); the upstream's reply
//! goes back the same way, with only its `model` value replaced.
//!
//! The checks are the [`contract`]'s. Whenever a body fails one, or is anything the
//! contract lists as left to the general path (or a reply has no `model` or no `choices`
//! array),
//! the fast path declines (`None`) and the route takes its general path, which parses
//! into a tree and answers every problem with its usual error. So the fast path only ever
//! changes how an accepted request is handled, never what is accepted: the property test
//! below checks exactly that over generated bodies.
//!
//! A body is read in one pass: the fields the route uses into what it needs (the `model`
//! value's place, the messages' roles and which of their fields are given), every other
//! value checked as a JSON tree would read it but not built ([`Checked`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::contract;

/// A JSON value read the way `serde_json::Value` reads one (every number in range, every
/// string escape valid, nesting within serde_json's depth limit) without building it: only
/// whether it was `null`, an array, or something else. Every field the fast path does not
/// use is read this way (serde's `IgnoredAny` would check none of that), so a body is read
/// once, and what the general path cannot parse, the fast path declines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    /// `null`.
    Null,
    /// An array.
    Array,
    /// Anything else.
    Other,
}

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked::Other)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked::Other)
    }
}

/// Reads the map's next value into `slot`; a second value for the same key fails the
/// read, as a derived struct's duplicate field does (the fast path then declines).
fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    key: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(A::Error::duplicate_field(key));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// An object visitor: `T`'s fields read member by member, in one pass.
macro_rules! object_visitor {
    ($visitor:ident, $ty:ident, $what:literal, |$map:ident, $out:ident, $key:ident| $body:block) => {
        struct $visitor;

        impl<'de> Visitor<'de> for $visitor {
            type Value = $ty<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($what)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<$ty<'de>, A::Error> {
                let mut $out = $ty::default();
                while let Some($key) = $map.next_key::<Cow<'de, str>>()? {
                    $body
                }
                Ok($out)
            }
        }

        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_map($visitor)
            }
        }
    };
}

/// The request fields the fast path reads (`None`: absent; `null` is `Some`).
#[derive(Default)]
struct Head<'a> {
    model: Option<&'a RawValue>,
    messages: Option<Option<Vec<Message<'a>>>>,
    stream: Option<&'a RawValue>,
    max_tokens: Option<Checked>,
    max_completion_tokens: Option<Checked>,
    tool_choice: Option<Option<Cow<'a, str>>>,
}

object_visitor!(
    HeadVisitor,
    Head,
    "a chat request object",
    |map, head, key| {
        match key.as_ref() {
            "model" => once(&mut map, &mut head.model, "model")?,
            "messages" => once(&mut map, &mut head.messages, "messages")?,
            "stream" => once(&mut map, &mut head.stream, "stream")?,
            "max_tokens" => once(&mut map, &mut head.max_tokens, "max_tokens")?,
            "max_completion_tokens" => once(
                &mut map,
                &mut head.max_completion_tokens,
                "max_completion_tokens",
            )?,
            "tool_choice" => once(&mut map, &mut head.tool_choice, "tool_choice")?,
            _ => {
                map.next_value::<Checked>()?;
            }
        }
    }
);

/// The message fields the checks read.
#[derive(Default)]
struct Message<'a> {
    role: Option<Option<Cow<'a, str>>>,
    content: Option<Checked>,
    tool_calls: Option<Checked>,
    function_call: Option<Checked>,
}

object_visitor!(
    MessageVisitor,
    Message,
    "a message object",
    |map, message, key| {
        match key.as_ref() {
            "role" => once(&mut map, &mut message.role, "role")?,
            "content" => once(&mut map, &mut message.content, "content")?,
            "tool_calls" => once(&mut map, &mut message.tool_calls, "tool_calls")?,
            "function_call" => once(&mut map, &mut message.function_call, "function_call")?,
            _ => {
                map.next_value::<Checked>()?;
            }
        }
    }
);

/// The reply fields the route reads.
#[derive(Default)]
struct Reply<'a> {
    model: Option<&'a RawValue>,
    choices: Option<Checked>,
    usage: Option<Value>,
}

object_visitor!(
    ReplyVisitor,
    Reply,
    "a chat completion object",
    |map, reply, key| {
        match key.as_ref() {
            "model" => once(&mut map, &mut reply.model, "model")?,
            "choices" => once(&mut map, &mut reply.choices, "choices")?,
            "usage" => once(&mut map, &mut reply.usage, "usage")?,
            _ => {
                map.next_value::<Checked>()?;
            }
        }
    }
);

/// Whether a field read as a [`Checked`] was there and not `null`.
fn given(field: Option<Checked>) -> bool {
    field.is_some_and(|f| f != Checked::Null)
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
    /// Checks `body` against the [`contract`]; `None` when it is not the plain case (see
    /// the module documentation).
    pub(super) fn parse(body: &'a [u8]) -> Option<Self> {
        if !is_object(body) {
            return None;
        }
        let head: Head<'a> = serde_json::from_slice(body).ok()?;
        let raw_model = head.model?;
        let model: String = serde_json::from_str(raw_model.get()).ok()?;
        contract::model(Some(&model)).ok()?;
        let messages = head.messages??;
        contract::messages(Some(messages.len())).ok()?;
        for (i, message) in messages.into_iter().enumerate() {
            let role = message.role??;
            let facts = contract::Message {
                object: true,
                role: Some(&role),
                content: given(message.content),
                tool_calls: given(message.tool_calls),
                function_call: given(message.function_call),
            };
            contract::message(i, &facts).ok()?;
        }
        if let Some(Some(mode)) = &head.tool_choice {
            contract::tool_choice_mode(mode).ok()?;
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
        if reply.choices? != Checked::Array {
            return None;
        }
        let raw_model = reply.model?;
        // The model is replaced, but the general path parses it first.
        serde_json::from_str::<Checked>(raw_model.get()).ok()?;
        Some(Self {
            usage: reply.usage,
            model_span: span(body, raw_model)?,
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
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"sometimes"}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":7}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"auto","tool_choice":"auto"}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"w"}}],"tool_choice":{"type":"function","function":{"name":"w"}}}"#,
        ] {
            assert!(FastRequest::parse(body.as_bytes()).is_none(), "{body}");
        }
        let body =
            br#"{"model":"m","messages":[{"role":"assistant","tool_calls":[]}],"stream":true}"#;
        assert!(FastRequest::parse(body).unwrap().streaming);
    }

    #[test]
    fn the_tool_choice_modes_and_null_stay_on_the_fast_path_verbatim() {
        for choice in [
            r#""auto""#,
            r#""none""#,
            r#""required""#,
            r#""\u0061uto""#,
            "null",
        ] {
            let body = format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"tools":[],"tool_choice":{choice}}}"#
            );
            let fast = FastRequest::parse(body.as_bytes()).unwrap();
            let sent = String::from_utf8(fast.outgoing("up", None)).unwrap();
            assert!(
                sent.ends_with(&format!(r#""tool_choice":{choice}}}"#)),
                "{sent}"
            );
        }
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

    /// The property: over generated bodies (valid and broken, plain and not), whatever the
    /// fast path accepts the general path accepts too, reads as the same model and stream
    /// flag, and sends upstream as the same JSON; the same for replies.
    mod property {
        use proptest::prelude::*;
        use proptest::strategy::ValueTree;
        use proptest::test_runner::{Config, TestRunner};
        use serde_json::Value;

        use super::super::super::{General, general_reply};
        use super::super::{FastReply, FastRequest};

        /// JSON text of a value the gateway does not read: plain ones, and the kinds that
        /// only a full parse refuses.
        fn other_value() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => Just("0.5".to_owned()),
                2 => Just("\"x\"".to_owned()),
                2 => Just("null".to_owned()),
                2 => Just("[1,{\"a\":[true,null]}]".to_owned()),
                1 => Just("{\"nested\":{\"k\":\"v\"}}".to_owned()),
                1 => Just("-0".to_owned()),
                1 => Just("18446744073709551616".to_owned()),
                1 => Just("1e400".to_owned()),
                1 => Just("\"\\ud800\"".to_owned()),
                1 => Just("\"caf\\u00e9\"".to_owned()),
                1 => Just(format!("{}1{}", "[".repeat(200), "]".repeat(200))),
            ]
        }

        fn role() -> impl Strategy<Value = String> {
            prop_oneof![
                20 => prop::sample::select(vec!["user", "system", "assistant", "tool", "function", "developer"])
                    .prop_map(|r| format!("\"{r}\"")),
                1 => Just("\"us\\u0065r\"".to_owned()),
                1 => Just("\"robot\"".to_owned()),
                1 => Just("7".to_owned()),
                1 => Just("null".to_owned()),
            ]
        }

        /// An object text from `(key, value)` members, with blanks around the tokens.
        fn object(members: Vec<(String, String)>, spaced: bool) -> String {
            let sep = if spaced { " " } else { "" };
            let inner: Vec<String> = members
                .into_iter()
                .map(|(k, v)| format!("{sep}\"{k}\"{sep}:{sep}{v}"))
                .collect();
            format!("{{{}{sep}}}", inner.join(","))
        }

        fn message() -> impl Strategy<Value = String> {
            (
                prop::option::weighted(0.9, role()),
                prop::option::weighted(
                    0.9,
                    prop_oneof![
                        6 => Just("\"hi\"".to_owned()),
                        1 => Just("null".to_owned()),
                        2 => Just("[{\"type\":\"text\",\"text\":\"hi\"}]".to_owned()),
                    ],
                ),
                prop::option::weighted(0.15, Just("[]".to_owned())),
                prop::option::weighted(0.05, Just("{\"name\":\"f\"}".to_owned())),
                prop::option::weighted(0.2, other_value()),
                any::<bool>(),
                prop::option::weighted(0.05, Just("\"role\"".to_owned())),
            )
                .prop_map(|(role, content, tools, function, name, spaced, twice)| {
                    let mut members = Vec::new();
                    if let Some(role) = role {
                        members.push(("role".to_owned(), role));
                    }
                    if let Some(content) = content {
                        members.push(("content".to_owned(), content));
                    }
                    if let Some(tools) = tools {
                        members.push(("tool_calls".to_owned(), tools));
                    }
                    if let Some(function) = function {
                        members.push(("function_call".to_owned(), function));
                    }
                    if let Some(name) = name {
                        members.push(("name".to_owned(), name));
                    }
                    if let Some(key) = twice {
                        let key = key.trim_matches('"').to_owned();
                        members.push((key, "\"user\"".to_owned()));
                    }
                    object(members, spaced)
                })
        }

        fn messages() -> impl Strategy<Value = String> {
            prop_oneof![
                14 => prop::collection::vec(message(), 1..4).prop_map(|m| format!("[{}]", m.join(","))),
                1 => Just("[]".to_owned()),
                1 => Just("[[\"user\",\"hi\"]]".to_owned()),
                1 => Just("\"hi\"".to_owned()),
                1 => Just("null".to_owned()),
            ]
        }

        /// `tool_choice` values: the modes (one spelled with an escape), `null`, the
        /// object form naming an offered tool or another one, and values the contract
        /// refuses.
        fn tool_choice() -> impl Strategy<Value = String> {
            prop_oneof![
                3 => prop::sample::select(vec!["\"auto\"", "\"none\"", "\"required\""])
                    .prop_map(str::to_owned),
                1 => Just("\"\\u0061uto\"".to_owned()),
                1 => Just("null".to_owned()),
                2 => Just("{\"type\":\"function\",\"function\":{\"name\":\"w\"}}".to_owned()),
                1 => Just("{\"type\":\"function\",\"function\":{\"name\":\"other\"}}".to_owned()),
                1 => Just("\"sometimes\"".to_owned()),
                1 => Just("7".to_owned()),
                1 => Just("{\"type\":\"tool\"}".to_owned()),
            ]
        }

        fn request_body() -> impl Strategy<Value = Vec<u8>> {
            let model = prop_oneof![
                12 => prop::sample::select(vec!["m", "caller\u{e9}", "a \"quoted\" name"])
                    .prop_map(|m| Value::from(m).to_string()),
                1 => Just("\"\"".to_owned()),
                1 => Just("7".to_owned()),
                1 => Just("null".to_owned()),
            ];
            let stream = prop_oneof![
                3 => Just("true".to_owned()),
                3 => Just("false".to_owned()),
                1 => Just("null".to_owned()),
                1 => Just("\"yes\"".to_owned()),
            ];
            let limit = prop_oneof![Just("16".to_owned()), Just("null".to_owned())];
            (
                prop::option::weighted(0.95, model),
                prop::option::weighted(0.95, messages()),
                prop::option::weighted(0.4, stream),
                prop::option::weighted(0.2, limit.clone()),
                prop::option::weighted(0.2, limit),
                prop::collection::vec(
                    (
                        prop::sample::select(vec!["temperature", "tools", "seed", "user"]),
                        other_value(),
                    ),
                    0..3,
                ),
                prop::option::weighted(
                    0.05,
                    prop::sample::select(vec![
                        "model",
                        "messages",
                        "stream",
                        "temperature",
                        "tool_choice",
                    ]),
                ),
                any::<bool>(),
                prop::sample::select(vec!["", "", "", "", "", "", "  ", " x", "[1]"]),
                prop::option::weighted(0.3, tool_choice()),
                prop::option::weighted(
                    0.3,
                    Just("[{\"type\":\"function\",\"function\":{\"name\":\"w\"}}]".to_owned()),
                ),
            )
                .prop_map(
                    |(
                        model,
                        messages,
                        stream,
                        max,
                        max_completion,
                        others,
                        twice,
                        spaced,
                        tail,
                        choice,
                        tools,
                    )| {
                        let mut members = Vec::new();
                        for (key, value) in others {
                            members.push((key.to_owned(), value));
                        }
                        if let Some(choice) = choice {
                            members.push(("tool_choice".to_owned(), choice));
                        }
                        if let Some(tools) = tools {
                            members.push(("tools".to_owned(), tools));
                        }
                        if let Some(model) = model {
                            members.push(("model".to_owned(), model));
                        }
                        if let Some(messages) = messages {
                            members.push(("messages".to_owned(), messages));
                        }
                        if let Some(stream) = stream {
                            members.push(("stream".to_owned(), stream));
                        }
                        if let Some(max) = max {
                            members.push(("max_tokens".to_owned(), max));
                        }
                        if let Some(max) = max_completion {
                            members.push(("max_completion_tokens".to_owned(), max));
                        }
                        if let Some(key) = twice {
                            let value = members
                                .iter()
                                .find(|(k, _)| k == key)
                                .map_or_else(|| "1".to_owned(), |(_, v)| v.clone());
                            members.push((key.to_owned(), value));
                        }
                        let body = if tail == "[1]" {
                            "[1]".to_owned()
                        } else {
                            format!("{}{tail}", object(members, spaced))
                        };
                        body.into_bytes()
                    },
                )
        }

        fn reply_body() -> impl Strategy<Value = Vec<u8>> {
            (
                prop::option::weighted(0.9, Just("\"up\"".to_owned())),
                prop::option::weighted(
                    0.9,
                    prop_oneof![
                        Just("[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}]".to_owned()),
                        Just("[]".to_owned()),
                        Just("{}".to_owned()),
                    ],
                ),
                prop::option::weighted(
                    0.6,
                    prop_oneof![
                        Just("{\"prompt_tokens\":3,\"completion_tokens\":1}".to_owned()),
                        Just("null".to_owned()),
                        Just("{\"prompt_tokens\":1e400}".to_owned()),
                    ],
                ),
                prop::option::weighted(0.4, other_value()),
                prop::option::weighted(0.05, prop::sample::select(vec!["model", "choices", "usage"])),
                any::<bool>(),
            )
                .prop_map(|(model, choices, usage, extra, twice, spaced)| {
                    let mut members = vec![("id".to_owned(), "\"c1\"".to_owned())];
                    if let Some(model) = model {
                        members.push(("model".to_owned(), model));
                    }
                    if let Some(choices) = choices {
                        members.push(("choices".to_owned(), choices));
                    }
                    if let Some(usage) = usage {
                        members.push(("usage".to_owned(), usage));
                    }
                    if let Some(extra) = extra {
                        members.push(("system_fingerprint".to_owned(), extra));
                    }
                    if let Some(key) = twice {
                        members.push((key.to_owned(), "\"again\"".to_owned()));
                    }
                    object(members, spaced).into_bytes()
                })
        }

        /// What the fast path makes of `body`, checked against the general path; whether
        /// the fast path accepted it.
        fn check_request(body: &[u8], default: Option<u64>) -> Result<bool, TestCaseError> {
            let Some(fast) = FastRequest::parse(body) else {
                return Ok(false);
            };
            let text = String::from_utf8_lossy(body);
            let general = General::parse(body).map_err(|err| {
                TestCaseError::fail(format!(
                    "the fast path accepted what the general path refuses ({}): {text}",
                    err.message()
                ))
            })?;
            prop_assert_eq!(&fast.model, &general.model, "{}", text);
            prop_assert_eq!(fast.streaming, general.streaming, "{}", text);
            let sent: Value =
                serde_json::from_slice(&fast.outgoing("up \"m\"", default)).map_err(|err| {
                    TestCaseError::fail(format!("the fast path sent invalid JSON ({err}): {text}"))
                })?;
            let general = Value::Object(general.outgoing("up \"m\"", default));
            prop_assert_eq!(sent, general, "{}", text);
            Ok(true)
        }

        fn check_reply(body: &[u8]) -> Result<bool, TestCaseError> {
            let Some(fast) = FastReply::parse(body) else {
                return Ok(false);
            };
            let text = String::from_utf8_lossy(body);
            let general = general_reply("up", body, "caller").map_err(|err| {
                TestCaseError::fail(format!(
                    "the fast path accepted a reply the general path refuses ({}): {text}",
                    err.message()
                ))
            })?;
            prop_assert_eq!(&fast.usage, &general.get("usage").cloned(), "{}", text);
            let answered: Value = serde_json::from_slice(&fast.with_model("caller"))
                .map_err(|err| TestCaseError::fail(format!("invalid JSON ({err}): {text}")))?;
            prop_assert_eq!(answered, Value::Object(general), "{}", text);
            Ok(true)
        }

        proptest! {
            #![proptest_config(Config { cases: 512, ..Config::default() })]

            #[test]
            fn the_fast_path_accepts_only_what_the_general_path_accepts_and_sends_the_same(
                body in request_body(),
                default in prop::option::of(1u64..5000),
            ) {
                check_request(&body, default)?;
            }

            #[test]
            fn the_fast_reply_path_answers_as_the_general_one(body in reply_body()) {
                check_reply(&body)?;
            }
        }

        /// The property is not vacuous: a good share of the generated bodies take the fast
        /// path, and a good share do not.
        #[test]
        fn the_generators_exercise_both_paths() {
            let mut runner = TestRunner::deterministic();
            let (mut fast, mut total) = (0, 0);
            for _ in 0..400 {
                let body = request_body().new_tree(&mut runner).unwrap().current();
                total += 1;
                if check_request(&body, Some(8)).unwrap() {
                    fast += 1;
                }
            }
            assert!(
                fast * 10 > total && fast * 10 < total * 9,
                "{fast} of {total} took the fast path"
            );
            let (mut fast, mut total) = (0, 0);
            for _ in 0..400 {
                let body = reply_body().new_tree(&mut runner).unwrap().current();
                total += 1;
                if check_reply(&body).unwrap() {
                    fast += 1;
                }
            }
            assert!(
                fast * 10 > total && fast * 10 < total * 9,
                "{fast} of {total} replies took the fast path"
            );
        }

        /// What only a full parse refuses, in a field the fast path skips: declined.
        #[test]
        fn bodies_only_a_full_parse_refuses_are_declined() {
            for value in [
                "1e400",
                "\"\\ud800\"",
                &format!("{}1{}", "[".repeat(200), "]".repeat(200)),
            ] {
                let body = format!(
                    r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"temperature":{value}}}"#
                );
                assert!(FastRequest::parse(body.as_bytes()).is_none(), "{body}");
                let reply = format!(r#"{{"model":"up","choices":[],"x":{value}}}"#);
                assert!(FastReply::parse(reply.as_bytes()).is_none(), "{reply}");
            }
        }
    }
}
