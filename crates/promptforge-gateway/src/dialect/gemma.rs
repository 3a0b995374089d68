//! `tool_dialect = "gemma3_tool_code"`: tool calls through `tool_code` fences.
//!
//! Outbound, the OpenAI `tools` array becomes a plain-language system guide prepended to
//! the messages, and `tools` / `tool_choice` are stripped (`tool_choice` first decides
//! which tools the guide offers and whether it asks for a call). Earlier tool turns in the
//! history are rendered the same way (assistant `tool_calls` as a `tool_code` fence, `tool`
//! results as a user `tool_output` fence) so the backend never sees roles it lacks.
//! Inbound, a reply whose content starts with a `tool_code` fence (or a `json` fence
//! carrying a `tool_calls` blob) becomes OpenAI `tool_calls`; a recognised but malformed
//! fence becomes empty content plus a `gateway_warning`, logged at warn.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// A request whose `tools` cannot be emulated (`routes/` answers it with 400
/// `invalid_request`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DialectError(String);

/// The per-response part of emitted tool-call ids: 12 hex digits of the SHA-256 of the
/// upstream's completion `id` (which llama-server makes unique per completion), or of the
/// whole response body when it has none. Ids depend on the response alone, never on other
/// traffic in the process.
fn response_nonce(response: &Map<String, Value>) -> String {
    let digest = match response.get("id").and_then(Value::as_str) {
        Some(id) => Sha256::digest(id.as_bytes()),
        None => Sha256::digest(Value::Object(response.clone()).to_string().as_bytes()),
    };
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Rewrites an outgoing chat body. Returns whether the request carried tools.
///
/// `tool_choice` (already checked by the chat contract) shapes the guide: `"none"` offers
/// no tools (the history is still rendered), the object form offers only the function it
/// names and tells the model to call it, `"required"` tells it to call one of the tools.
pub(crate) fn outbound(body: &mut Map<String, Value>) -> Result<bool, DialectError> {
    let tools = body.remove("tools");
    let choice = Choice::of(body.remove("tool_choice"));
    let mut tools = match tools {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => {
            return Err(DialectError("tools must be an array".to_owned()));
        }
    };
    match &choice {
        Choice::Off => tools.clear(),
        Choice::Named(name) => tools.retain(|tool| {
            tool.get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                == Some(name.as_str())
        }),
        Choice::Auto | Choice::Required => {}
    }
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return Ok(false);
    };
    for message in messages.iter_mut() {
        render_history(message);
    }
    if tools.is_empty() {
        return Ok(false);
    }
    let mut guide = system_guide(&tools)?;
    match &choice {
        Choice::Named(name) => guide.push_str(&format!(
            "\nCall the tool {name} now: reply with only the tool_code fence.\n"
        )),
        Choice::Required => {
            guide.push_str("\nCall one of these tools now: reply with only the tool_code fence.\n")
        }
        Choice::Off | Choice::Auto => {}
    }
    messages.insert(0, json!({"role": "system", "content": guide}));
    Ok(true)
}

/// What the request's `tool_choice` asks of the guide.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Choice {
    /// `"none"`: no tools offered.
    Off,
    /// Absent, `null` or `"auto"`: the tools offered, the model decides.
    Auto,
    /// `"required"`: the model must call one of the tools.
    Required,
    /// The object form: only this function is offered, and it must be called.
    Named(String),
}

impl Choice {
    fn of(value: Option<Value>) -> Self {
        match value {
            Some(Value::String(mode)) if mode == "none" => Self::Off,
            Some(Value::String(mode)) if mode == "required" => Self::Required,
            Some(Value::Object(object)) => {
                match object
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                {
                    Some(name) => Self::Named(name.to_owned()),
                    None => Self::Auto,
                }
            }
            _ => Self::Auto,
        }
    }
}

fn system_guide(tools: &[Value]) -> Result<String, DialectError> {
    let mut text = String::from(
        "You can call tools. To call tools, reply with only a fenced block that starts with \
         ```tool_code, holds one call per line and ends with ```, and write nothing after it:\n\
         ```tool_code\nfunction_name(argument=\"value\", count=3)\n```\n\
         Pass every argument by keyword, with JSON-style values: strings in double quotes, \
         numbers, true, false, null, [lists] and {\"objects\"}. Tool results come back to you \
         in a ```tool_output block. When no tool is needed, answer normally without a fence.\n\n\
         Available tools:\n",
    );
    for (i, tool) in tools.iter().enumerate() {
        let function = tool.get("function").filter(|f| f.is_object());
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        let (Some(function), Some(name)) = (function, name) else {
            return Err(DialectError(format!(
                "tools[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
            )));
        };
        text.push_str(&format!("- {name}"));
        if let Some(description) = function.get("description").and_then(Value::as_str) {
            text.push_str(&format!(": {description}"));
        }
        if let Some(parameters) = function.get("parameters") {
            text.push_str(&format!("\n  Parameters (JSON Schema): {parameters}"));
        }
        text.push('\n');
    }
    Ok(text)
}

/// Renders native tool turns of the history as fences.
fn render_history(message: &mut Value) {
    let Some(obj) = message.as_object_mut() else {
        return;
    };
    match obj.get("role").and_then(Value::as_str) {
        Some("assistant") => {
            let Some(Value::Array(calls)) = obj.remove("tool_calls") else {
                return;
            };
            let mut lines = Vec::new();
            for call in &calls {
                let Some(function) = call.get("function") else {
                    continue;
                };
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let args = match function.get("arguments") {
                    Some(Value::String(s)) => {
                        serde_json::from_str::<Value>(s).unwrap_or(Value::Null)
                    }
                    Some(other) => other.clone(),
                    None => Value::Null,
                };
                let rendered: Vec<String> = args
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                lines.push(format!("{name}({})", rendered.join(", ")));
            }
            let prior = obj
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let fence = format!("```tool_code\n{}\n```", lines.join("\n"));
            let content = if prior.trim().is_empty() {
                fence
            } else {
                format!("{prior}\n{fence}")
            };
            obj.insert("content".into(), Value::String(content));
        }
        Some("tool" | "function") => {
            let result = match obj.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            obj.clear();
            obj.insert("role".into(), json!("user"));
            obj.insert(
                "content".into(),
                Value::String(format!("```tool_output\n{result}\n```")),
            );
        }
        _ => {}
    }
}

/// What the start of a reply holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Scan {
    /// No recognised fence: leave the reply alone.
    NoFence,
    /// Well-formed calls: (name, arguments object).
    Calls(Vec<(String, Map<String, Value>)>),
    /// A recognised fence that is broken, with the reason.
    Malformed(String),
}

/// Scans reply content for a leading `tool_code` (or `json` + `tool_calls`) fence.
pub(crate) fn scan(content: &str) -> Scan {
    let text = content.trim_start();
    if let Some(rest) = fence_body_start(text, "```tool_code") {
        let Some(end) = rest.find("```") else {
            return Scan::Malformed("unterminated tool_code fence".into());
        };
        if !rest[end + 3..].trim().is_empty() {
            return Scan::Malformed("trailing prose after the tool_code fence".into());
        }
        let lines: Vec<&str> = rest[..end]
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            return Scan::Malformed("empty tool_code fence".into());
        }
        let mut calls = Vec::with_capacity(lines.len());
        for line in lines {
            match parse_call(line) {
                Ok(call) => calls.push(call),
                Err(why) => return Scan::Malformed(format!("invalid call line `{line}`: {why}")),
            }
        }
        return Scan::Calls(calls);
    }
    if let Some(rest) = fence_body_start(text, "```json") {
        let (body, after) = match rest.find("```") {
            Some(end) => (&rest[..end], Some(&rest[end + 3..])),
            None => (rest, None),
        };
        let Ok(Value::Object(blob)) = serde_json::from_str::<Value>(body.trim()) else {
            return if after.is_none() && body.contains("\"tool_calls\"") {
                Scan::Malformed("unterminated json tool_calls fence".into())
            } else {
                Scan::NoFence
            };
        };
        let Some(tool_calls) = blob.get("tool_calls") else {
            return Scan::NoFence;
        };
        let Some(after) = after else {
            return Scan::Malformed("unterminated json tool_calls fence".into());
        };
        if !after.trim().is_empty() {
            return Scan::Malformed("trailing prose after the json tool_calls fence".into());
        }
        return json_calls(tool_calls);
    }
    Scan::NoFence
}

/// The text after `marker` when `text` opens with that fence marker.
fn fence_body_start<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(marker)?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(rest)
}

fn json_calls(tool_calls: &Value) -> Scan {
    let Some(items) = tool_calls.as_array().filter(|a| !a.is_empty()) else {
        return Scan::Malformed("tool_calls is not a non-empty array".into());
    };
    let mut calls = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let call = item.get("function").unwrap_or(item);
        let Some(name) = call
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Scan::Malformed(format!("tool_calls[{i}] has no name"));
        };
        let arguments = match call.get("arguments").or_else(|| call.get("parameters")) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(map)) => map,
                _ => {
                    return Scan::Malformed(format!(
                        "tool_calls[{i}].arguments is not a JSON object"
                    ));
                }
            },
            Some(_) => {
                return Scan::Malformed(format!("tool_calls[{i}].arguments is not an object"));
            }
        };
        calls.push((name.to_owned(), arguments));
    }
    Scan::Calls(calls)
}

/// Rewrites every choice of a non-streaming response in place.
///
/// Tool-call ids are `call_pf<nonce>_<n>`: the response's nonce ([`response_nonce`]) and a
/// counter over the whole response, so they are unique within it.
pub(crate) fn inbound(response: &mut Map<String, Value>, model: &str) {
    let nonce = response_nonce(response);
    let mut next_call = 0u64;
    let Some(Value::Array(choices)) = response.get_mut("choices") else {
        return;
    };
    for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
        let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(content) = message.get("content").and_then(Value::as_str) else {
            continue;
        };
        match scan(content) {
            Scan::NoFence => {}
            Scan::Calls(calls) => {
                let tool_calls: Vec<Value> = calls
                    .into_iter()
                    .map(|(name, args)| {
                        next_call += 1;
                        json!({
                            "id": format!("call_pf{nonce}_{next_call}"),
                            "type": "function",
                            "function": {"name": name, "arguments": Value::Object(args).to_string()},
                        })
                    })
                    .collect();
                message.insert("content".into(), Value::Null);
                message.insert("tool_calls".into(), Value::Array(tool_calls));
                choice.insert("finish_reason".into(), json!("tool_calls"));
            }
            Scan::Malformed(reason) => {
                tracing::warn!(model, %reason, "malformed tool_code reply; returning empty content with gateway_warning");
                message.insert("content".into(), json!(""));
                message.insert("gateway_warning".into(), Value::String(reason));
            }
        }
    }
}

/// Parses `name(key=value, ...)`.
fn parse_call(line: &str) -> Result<(String, Map<String, Value>), String> {
    let mut p = Parser {
        chars: line.chars().collect(),
        pos: 0,
    };
    let name = p.ident().ok_or("expected a function name")?;
    p.ws();
    p.expect('(')?;
    let mut args = Map::new();
    loop {
        p.ws();
        if p.eat(')') {
            break;
        }
        let key = p.ident().ok_or("expected a keyword argument name")?;
        p.ws();
        p.expect('=')?;
        p.ws();
        let value = p.value(0)?;
        if args.insert(key.clone(), value).is_some() {
            return Err(format!("argument `{key}` given twice"));
        }
        p.ws();
        if p.eat(',') {
            continue;
        }
        p.expect(')')?;
        break;
    }
    p.ws();
    if p.pos != p.chars.len() {
        return Err("unexpected text after the call".into());
    }
    Ok((name, args))
}

/// A small parser for Python/JSON-style literals.
struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{c}`"))
        }
    }

    fn ident(&mut self) -> Option<String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            self.pos += 1;
        }
        let ident: String = self.chars[start..self.pos].iter().collect();
        (!ident.is_empty() && !ident.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
            .then_some(ident)
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > 32 {
            return Err("value nests too deeply".into());
        }
        match self.peek() {
            Some(q @ ('"' | '\'')) => self.string(q).map(Value::String),
            Some('[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.eat(']') {
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if !self.eat(',') {
                        self.ws();
                        self.expect(']')?;
                        break;
                    }
                }
                Ok(Value::Array(items))
            }
            Some('{') => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.ws();
                    if self.eat('}') {
                        break;
                    }
                    let key = match self.peek() {
                        Some(q @ ('"' | '\'')) => self.string(q)?,
                        _ => return Err("object keys must be quoted strings".into()),
                    };
                    self.ws();
                    self.expect(':')?;
                    self.ws();
                    map.insert(key, self.value(depth + 1)?);
                    self.ws();
                    if !self.eat(',') {
                        self.ws();
                        self.expect('}')?;
                        break;
                    }
                }
                Ok(Value::Object(map))
            }
            Some(c) if c == '-' || c == '+' || c.is_ascii_digit() => self.number(),
            Some(_) => {
                let word = self.ident().ok_or("expected a value")?;
                match word.as_str() {
                    "true" | "True" => Ok(Value::Bool(true)),
                    "false" | "False" => Ok(Value::Bool(false)),
                    "null" | "None" => Ok(Value::Null),
                    other => Err(format!("`{other}` is not a value (quote strings)")),
                }
            }
            None => Err("expected a value".into()),
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
        {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        let text = text.strip_prefix('+').unwrap_or(&text);
        serde_json::from_str::<serde_json::Number>(text)
            .map(Value::Number)
            .or_else(|_| {
                text.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or(())
            })
            .map_err(|()| format!("`{text}` is not a number"))
    }

    fn string(&mut self, quote: char) -> Result<String, String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or("unterminated string")?;
            self.pos += 1;
            if c == quote {
                return Ok(out);
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let escaped = self.peek().ok_or("unterminated string")?;
            self.pos += 1;
            match escaped {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'u' => {
                    let hex: String = self
                        .chars
                        .get(self.pos..self.pos + 4)
                        .ok_or("bad \\u escape")?
                        .iter()
                        .collect();
                    let code = u32::from_str_radix(&hex, 16).map_err(|_| "bad \\u escape")?;
                    out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                    self.pos += 4;
                }
                other => out.push(other),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(content: &str) -> Vec<(String, Value)> {
        match scan(content) {
            Scan::Calls(calls) => calls
                .into_iter()
                .map(|(n, a)| (n, Value::Object(a)))
                .collect(),
            other => panic!("expected calls, got {other:?}"),
        }
    }

    fn malformed(content: &str) -> String {
        match scan(content) {
            Scan::Malformed(reason) => reason,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[test]
    fn parses_tool_code_fences() {
        let got =
            calls("```tool_code\nget_weather(city=\"Paris\", days=3, metric=True)\nnoop()\n```\n");
        assert_eq!(got[0].0, "get_weather");
        assert_eq!(
            got[0].1,
            json!({"city": "Paris", "days": 3, "metric": true})
        );
        assert_eq!(got[1], ("noop".to_owned(), json!({})));
        let got = calls("  ```tool_code\nf(a=[1, 'x', None], b={'k': -2.5},)\n```");
        assert_eq!(got[0].1, json!({"a": [1, "x", null], "b": {"k": -2.5}}));
    }

    #[test]
    fn recognises_json_tool_calls_blobs() {
        let got = calls(
            "```json\n{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"x\": 1}}, {\"function\": {\"name\": \"g\", \"arguments\": \"{\\\"y\\\":2}\"}}]}\n```",
        );
        assert_eq!(
            got,
            vec![
                ("f".to_owned(), json!({"x": 1})),
                ("g".to_owned(), json!({"y": 2}))
            ]
        );
        assert_eq!(scan("```json\n{\"answer\": 1}\n```"), Scan::NoFence);
        assert!(malformed("```json\n{\"tool_calls\": []}\n```").contains("non-empty"));
    }

    #[test]
    fn reports_malformed_fences() {
        assert!(malformed("```tool_code\nf(a=1)\n").contains("unterminated"));
        assert!(malformed("```tool_code\n\n```").contains("empty"));
        assert!(malformed("```tool_code\nf(a=1)\n```\nand then prose").contains("trailing prose"));
        assert!(malformed("```tool_code\nf(a=unquoted)\n```").contains("invalid call line"));
        assert!(malformed("```tool_code\nf(1)\n```").contains("invalid call line"));
        assert!(malformed("```tool_code\nf(a=1) extra\n```").contains("invalid call line"));
    }

    #[test]
    fn leaves_ordinary_content_alone() {
        assert_eq!(scan("Hello"), Scan::NoFence);
        assert_eq!(scan("Sure:\n```tool_code\nf()\n```"), Scan::NoFence);
        assert_eq!(scan("```python\nprint(1)\n```"), Scan::NoFence);
        assert_eq!(scan("```tool_codex\nf()\n```"), Scan::NoFence);
    }

    #[test]
    fn outbound_moves_tools_into_a_system_guide() {
        let mut body = json!({
            "model": "u",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "w", "arguments": "{\"c\":\"P\"}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "sunny"}
            ],
            "tools": [{"type": "function", "function": {"name": "w", "description": "Weather", "parameters": {"type": "object"}}}],
            "tool_choice": "auto",
            "temperature": 0.1
        });
        let map = body.as_object_mut().unwrap();
        assert!(outbound(map).unwrap());
        assert!(map.get("tools").is_none() && map.get("tool_choice").is_none());
        assert_eq!(map["temperature"], 0.1);
        let messages = map["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        assert!(
            messages[0]["content"]
                .as_str()
                .unwrap()
                .contains("- w: Weather")
        );
        assert_eq!(messages[2]["content"], "```tool_code\nw(c=\"P\")\n```");
        assert_eq!(
            messages[3],
            json!({"role": "user", "content": "```tool_output\nsunny\n```"})
        );
    }

    #[test]
    fn tool_choice_decides_which_tools_the_guide_offers() {
        let tools = json!([
            {"type": "function", "function": {"name": "w", "description": "Weather"}},
            {"type": "function", "function": {"name": "t", "description": "Time"}}
        ]);
        let guide = |choice: Value| {
            let mut body = json!({
                "messages": [{"role": "user", "content": "hi"}],
                "tools": tools.clone(),
                "tool_choice": choice,
            });
            let map = body.as_object_mut().unwrap();
            let offered = outbound(map).unwrap();
            assert!(map.get("tools").is_none() && map.get("tool_choice").is_none());
            let first = &map["messages"][0];
            let text =
                (first["role"] == "system").then(|| first["content"].as_str().unwrap().to_owned());
            (offered, text)
        };
        let (offered, text) = guide(json!({"type": "function", "function": {"name": "t"}}));
        let text = text.unwrap();
        assert!(offered);
        assert!(
            text.contains("- t: Time") && !text.contains("- w: Weather"),
            "{text}"
        );
        assert!(text.contains("Call the tool t now"), "{text}");
        let (_, text) = guide(json!("required"));
        let text = text.unwrap();
        assert!(
            text.contains("- t: Time") && text.contains("- w: Weather"),
            "{text}"
        );
        assert!(text.contains("Call one of these tools now"), "{text}");
        let (_, text) = guide(json!("auto"));
        assert!(!text.unwrap().contains("now: reply"));
        assert_eq!(guide(json!("none")), (false, None));
    }

    #[test]
    fn inbound_rewrites_choices() {
        let mut response = json!({"choices": [
            {"index": 0, "message": {"role": "assistant", "content": "```tool_code\nf(a=1)\n```"}, "finish_reason": "stop"},
            {"index": 1, "message": {"role": "assistant", "content": "```tool_code\nf(a=\n```"}, "finish_reason": "stop"},
            {"index": 2, "message": {"role": "assistant", "content": "plain"}, "finish_reason": "stop"}
        ]});
        inbound(response.as_object_mut().unwrap(), "m");
        let c = &response["choices"];
        assert_eq!(c[0]["finish_reason"], "tool_calls");
        assert!(c[0]["message"]["content"].is_null());
        assert_eq!(c[0]["message"]["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(
            c[0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(c[1]["message"]["content"], "");
        assert!(
            c[1]["message"]["gateway_warning"]
                .as_str()
                .unwrap()
                .contains("invalid call line")
        );
        assert_eq!(c[2]["message"]["content"], "plain");
    }

    /// Three calls over two choices, as the upstream would answer.
    fn two_choice_reply(completion_id: &str) -> Value {
        json!({"id": completion_id, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "```tool_code\nf(a=1)\ng(b=2)\n```"}},
            {"index": 1, "message": {"role": "assistant", "content": "```tool_code\nf(a=1)\n```"}}
        ]})
    }

    fn call_ids(response: &Value) -> Vec<String> {
        response["choices"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["message"]["tool_calls"].as_array().unwrap().clone())
            .map(|call| call["id"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn tool_call_ids_depend_on_the_response_only() {
        let mut first = two_choice_reply("chatcmpl-1");
        inbound(first.as_object_mut().unwrap(), "m");
        // Other traffic in between: it must not shift the ids of the next response.
        for other in ["chatcmpl-x", "chatcmpl-y"] {
            inbound(two_choice_reply(other).as_object_mut().unwrap(), "m");
        }
        let mut again = two_choice_reply("chatcmpl-1");
        inbound(again.as_object_mut().unwrap(), "m");
        let ids = call_ids(&first);
        assert_eq!(ids, call_ids(&again));
        assert_eq!(ids.len(), 3);
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), 3, "{ids:?}");
        assert!(ids.iter().all(|id| id.starts_with("call_pf")), "{ids:?}");
        let mut other = two_choice_reply("chatcmpl-2");
        inbound(other.as_object_mut().unwrap(), "m");
        assert!(call_ids(&other).iter().all(|id| !ids.contains(id)));
        let mut anonymous = two_choice_reply("x");
        anonymous.as_object_mut().unwrap().remove("id");
        let mut anonymous_again = anonymous.clone();
        inbound(anonymous.as_object_mut().unwrap(), "m");
        inbound(anonymous_again.as_object_mut().unwrap(), "m");
        assert_eq!(call_ids(&anonymous), call_ids(&anonymous_again));
    }
}
