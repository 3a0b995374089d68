//! OpenAI chat-completion wire types, as the tool loop needs them.

use serde_json::{Map, Value as Json, json};

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    /// A system instruction.
    System(String),
    /// A user turn (rendered prose).
    User(String),
    /// An assistant turn: text, tool calls, or both.
    Assistant {
        /// The text, if any.
        content: Option<String>,
        /// The tool calls it made.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool result.
    Tool {
        /// The call this answers.
        tool_call_id: String,
        /// The result text (enveloped when untrusted).
        content: String,
    },
}

impl ChatMessage {
    fn to_json(&self) -> Json {
        match self {
            Self::System(content) => json!({"role": "system", "content": content}),
            Self::User(content) => json!({"role": "user", "content": content}),
            Self::Assistant {
                content,
                tool_calls,
            } => {
                let mut message = Map::new();
                message.insert("role".into(), json!("assistant"));
                message.insert(
                    "content".into(),
                    content.clone().map_or(Json::Null, Json::String),
                );
                if !tool_calls.is_empty() {
                    let calls = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            })
                        })
                        .collect();
                    message.insert("tool_calls".into(), Json::Array(calls));
                }
                Json::Object(message)
            }
            Self::Tool {
                tool_call_id,
                content,
            } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        }
    }
}

/// A tool call the model made. Build one with [`ToolCall::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call id the result must echo.
    pub id: String,
    /// The wire name of the tool.
    pub name: String,
    /// The raw JSON arguments string.
    pub arguments: String,
}

impl ToolCall {
    /// A call of the tool `name` with the raw JSON `arguments`, answered under `id`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool offered to the model. Build one with [`ToolSpec::new`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The wire name.
    pub name: String,
    /// The model-facing description.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Json,
}

impl ToolSpec {
    /// The tool `name` (its wire name) with the model-facing `description` and the JSON
    /// Schema of its arguments.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Json) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// A chat-completion request. Build one with [`ChatRequest::new`] and the `with_*`
/// methods:
///
/// ```
/// use promptforge_core::client::{ChatMessage, ChatRequest, ToolSpec};
///
/// let request = ChatRequest::new("fast-draft", vec![ChatMessage::User("Hello".into())])
///     .with_tools(vec![ToolSpec::new("lookup", "Look a word up", serde_json::json!({"type": "object"}))])
///     .with_temperature(0.2)
///     .with_max_tokens(256);
/// assert_eq!(request.to_json()["tools"][0]["function"]["name"], "lookup");
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The catalog model id.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// The tools offered (none for a tool-free round).
    pub tools: Vec<ToolSpec>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output cap.
    pub max_tokens: Option<u64>,
    /// The thinking switch, sent only for switchable models.
    pub thinking: Option<bool>,
}

impl ChatRequest {
    /// A request to the catalog model `model` with the conversation `messages`: no tools,
    /// no sampling settings.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        Self {
            model: model.into(),
            messages,
            ..Self::default()
        }
    }

    /// Offers `tools` to the model.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps the output tokens.
    pub fn with_max_tokens(mut self, max_tokens: u64) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the thinking switch (sent as `chat_template_kwargs.enable_thinking`).
    pub fn with_thinking(mut self, thinking: bool) -> Self {
        self.thinking = Some(thinking);
        self
    }

    /// The JSON body sent to `POST /v1/chat/completions`.
    pub fn to_json(&self) -> Json {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert(
            "messages".into(),
            Json::Array(self.messages.iter().map(ChatMessage::to_json).collect()),
        );
        if !self.tools.is_empty() {
            let tools = self
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }})
                })
                .collect();
            body.insert("tools".into(), Json::Array(tools));
        }
        if let Some(temperature) = self.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = self.max_tokens {
            body.insert("max_tokens".into(), json!(max_tokens));
        }
        if let Some(thinking) = self.thinking {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": thinking}),
            );
        }
        Json::Object(body)
    }
}

/// The first choice of a chat-completion response, decoded with
/// [`ChatResponse::from_json`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The text, if any.
    pub content: Option<String>,
    /// The tool calls, if any.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls`, ... when the backend sent one.
    pub finish_reason: Option<String>,
    /// Reasoning text (`reasoning_content`), when the backend sent it.
    pub reasoning: Option<String>,
    /// The whole response body.
    pub raw: Json,
}

impl ChatResponse {
    /// Decodes a response body.
    pub fn from_json(raw: Json) -> Result<Self, String> {
        let choice = raw
            .get("choices")
            .and_then(Json::as_array)
            .and_then(|choices| choices.first())
            .ok_or("the response has no choices")?;
        let message = choice
            .get("message")
            .ok_or("the first choice has no message")?;
        let text = |value: Option<&Json>| value.and_then(Json::as_str).map(str::to_owned);
        let mut tool_calls = Vec::new();
        if let Some(calls) = message.get("tool_calls").and_then(Json::as_array) {
            for (index, call) in calls.iter().enumerate() {
                let function = call.get("function").ok_or("a tool call has no function")?;
                let name = text(function.get("name")).ok_or("a tool call has no name")?;
                let arguments = match function.get("arguments") {
                    Some(Json::String(arguments)) => arguments.clone(),
                    Some(Json::Null) | None => "{}".to_owned(),
                    Some(other) => other.to_string(),
                };
                let id = text(call.get("id")).unwrap_or_else(|| format!("call_{index}"));
                tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
        }
        Ok(Self {
            content: text(message.get("content")),
            tool_calls,
            finish_reason: text(choice.get("finish_reason")),
            reasoning: text(message.get("reasoning_content"))
                .or_else(|| text(message.get("reasoning"))),
            raw,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_json_has_the_openai_shape() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::User("hi".into()),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "search".into(),
                        arguments: "{}".into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "c1".into(),
                    content: "result".into(),
                },
            ],
            tools: vec![ToolSpec {
                name: "search".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            temperature: Some(0.5),
            max_tokens: Some(10),
            thinking: Some(false),
        };
        let body = request.to_json();
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["name"],
            "search"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["chat_template_kwargs"]["enable_thinking"], false);
        assert_eq!(body["max_tokens"], 10);
    }

    #[test]
    fn responses_decode_content_and_tool_calls() {
        let response = ChatResponse::from_json(json!({"choices": [{"finish_reason": "tool_calls",
            "message": {"content": null, "tool_calls": [
                {"id": "a", "function": {"name": "f", "arguments": "{\"x\":1}"}}]}}]}))
        .unwrap();
        assert_eq!(response.content, None);
        assert_eq!(response.tool_calls[0].arguments, "{\"x\":1}");
        assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
        assert!(ChatResponse::from_json(json!({"choices": []})).is_err());
    }
}
