//! The built-in `web_search` tool: a proxy to the gateway's search route.

use async_trait::async_trait;
use serde_json::{Map, Value as Json, json};

use super::{Tool, ToolError, ToolId, ToolOutput};
use promptforge_wire::{Freshness, MAX_COUNT, MAX_DOMAINS, SafeSearch, WebSearchRequest};

use crate::client::{CompletionErrorKind, GatewayClient, RequestLimits};

/// The wire spellings of an enumeration's values.
fn spellings<T: Copy>(all: &[T], as_str: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|&value| as_str(value)).collect()
}

/// Searches the web through the gateway, so the provider key never leaves it. Output is
/// untrusted.
pub struct WebSearch {
    id: ToolId,
    client: GatewayClient,
    parameters: Json,
    /// Limits set with [`WebSearch::with_limits`]: a ceiling over the run's.
    limits: Option<RequestLimits>,
}

impl WebSearch {
    /// A search tool that proxies through `client`.
    pub fn new(client: GatewayClient) -> Self {
        Self {
            id: ToolId::new("builtin", "web_search"),
            client,
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for"},
                    "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "description": format!("Number of results (1-{MAX_COUNT})")},
                    "freshness": {"type": "string", "enum": spellings(Freshness::ALL, Freshness::as_str), "description": "Past day, week, month or year"},
                    "safe_search": {"type": "string", "enum": spellings(SafeSearch::ALL, SafeSearch::as_str)},
                    "domains_include": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_DOMAINS, "description": "Only these hostnames"},
                    "domains_exclude": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_DOMAINS, "description": "Never these hostnames"},
                    "country": {"type": "string", "description": "Country code, such as US"},
                    "language": {"type": "string", "description": "Language code, such as en"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            limits: None,
        }
    }

    /// Caps every search request at `limits`. In a run, the run's own limits
    /// (`RunLimits::request_timeout`, `RunLimits::max_response_bytes`) apply too and the
    /// tighter of the two wins; without this, the run's limits alone apply (and
    /// [`RequestLimits::default`] when the tool is called outside a run).
    pub fn with_limits(mut self, limits: RequestLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    async fn search(
        &self,
        arguments: &str,
        limits: RequestLimits,
    ) -> Result<ToolOutput, ToolError> {
        let body = validate(arguments)?;
        match self.client.web_search(&body, limits).await {
            Ok(text) => Ok(ToolOutput::untrusted(text)),
            Err(error) => Err(match error.kind() {
                CompletionErrorKind::Transport => ToolError::transport(error.to_string()),
                _ => ToolError::backend(error.to_string()),
            }),
        }
    }
}

/// Checks the arguments before they leave the process.
fn validate(arguments: &str) -> Result<WebSearchRequest, ToolError> {
    let value: Json = serde_json::from_str(arguments)
        .map_err(|e| ToolError::invalid_arguments(format!("arguments are not JSON: {e}")))?;
    let Json::Object(map) = &value else {
        return Err(ToolError::invalid_arguments(
            "arguments must be a JSON object",
        ));
    };
    if let Some(key) = map
        .keys()
        .find(|k| !WebSearchRequest::FIELDS.contains(&k.as_str()))
    {
        return Err(ToolError::invalid_arguments(format!(
            "unknown argument `{key}`"
        )));
    }
    match map.get("query").and_then(Json::as_str) {
        Some(query) if !query.trim().is_empty() => {}
        _ => {
            return Err(ToolError::invalid_arguments(
                "`query` must be a non-empty string",
            ));
        }
    }
    if let Some(count) = map.get("count")
        && !count
            .as_u64()
            .is_some_and(|c| (1..=u64::from(MAX_COUNT)).contains(&c))
    {
        return Err(ToolError::invalid_arguments(format!(
            "`count` must be an integer from 1 to {MAX_COUNT}"
        )));
    }
    check_enum(
        map,
        "freshness",
        &spellings(Freshness::ALL, Freshness::as_str),
    )?;
    check_enum(
        map,
        "safe_search",
        &spellings(SafeSearch::ALL, SafeSearch::as_str),
    )?;
    for key in ["domains_include", "domains_exclude"] {
        if let Some(list) = map.get(key) {
            let ok = list.as_array().is_some_and(|items| {
                items.len() <= MAX_DOMAINS && items.iter().all(|d| d.as_str().is_some())
            });
            if !ok {
                return Err(ToolError::invalid_arguments(format!(
                    "`{key}` must be a list of at most {MAX_DOMAINS} hostnames"
                )));
            }
        }
    }
    for key in ["country", "language"] {
        if map.get(key).is_some_and(|v| !v.is_string()) {
            return Err(ToolError::invalid_arguments(format!(
                "`{key}` must be a string"
            )));
        }
    }
    serde_json::from_value(value)
        .map_err(|e| ToolError::invalid_arguments(format!("invalid arguments: {e}")))
}

fn check_enum(map: &Map<String, Json>, key: &str, allowed: &[&str]) -> Result<(), ToolError> {
    match map.get(key) {
        None => Ok(()),
        Some(value) if value.as_str().is_some_and(|v| allowed.contains(&v)) => Ok(()),
        Some(_) => Err(ToolError::invalid_arguments(format!(
            "`{key}` must be one of {}",
            allowed.join(", ")
        ))),
    }
}

#[async_trait]
impl Tool for WebSearch {
    fn id(&self) -> &ToolId {
        &self.id
    }

    fn wire_name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        "Search the web for current information and return result titles, URLs and snippets"
    }

    fn parameters(&self) -> &Json {
        &self.parameters
    }

    async fn call(&self, arguments: &str) -> Result<ToolOutput, ToolError> {
        self.search(arguments, self.limits.unwrap_or_default())
            .await
    }

    async fn call_within(
        &self,
        arguments: &str,
        limits: RequestLimits,
    ) -> Result<ToolOutput, ToolError> {
        let limits = self.limits.map_or(limits, |own| own.min(limits));
        self.search(arguments, limits).await
    }
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn arguments_are_checked_before_sending() {
        let request = validate(r#"{"query": "rust", "count": 5, "freshness": "pw"}"#).unwrap();
        assert_eq!(
            (
                request.query.as_str(),
                request.count,
                request.freshness.as_deref()
            ),
            ("rust", Some(5), Some("pw"))
        );
        for bad in [
            "not json",
            "[]",
            r#"{"query": ""}"#,
            r#"{"query": "x", "count": 0}"#,
            r#"{"query": "x", "count": 21}"#,
            r#"{"query": "x", "freshness": "pz"}"#,
            r#"{"query": "x", "safe_search": "high"}"#,
            r#"{"query": "x", "domains_include": "a.com"}"#,
            r#"{"query": "x", "extra": 1}"#,
        ] {
            assert!(validate(bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..21).map(|i| format!("\"d{i}.com\"")).collect();
        let too_many = format!(
            r#"{{"query": "x", "domains_exclude": [{}]}}"#,
            many.join(",")
        );
        assert!(validate(&too_many).is_err());
    }
}
