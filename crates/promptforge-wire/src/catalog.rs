//! The model catalog on the wire: one `GET /v1/models` entry, [`ModelKind`] and [`Thinking`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A string that is not one of an enumeration's wire values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} `{value}` is not {expected}")]
pub struct UnknownValue {
    /// The field the value was given for, e.g. `kind`.
    pub field: &'static str,
    /// The value as given.
    pub value: String,
    /// The accepted values in prose, e.g. `chat, embedding or classifier`.
    pub expected: &'static str,
}

impl UnknownValue {
    /// The message without the field name: "`value` is not ...", for callers whose context
    /// (a configuration key, say) already names the field.
    pub fn reason(&self) -> String {
        format!("`{}` is not {}", self.value, self.expected)
    }
}

/// Declares a closed wire enumeration: `as_str`, `ALL`, `FromStr` (an [`UnknownValue`] for
/// anything else), `Display`, and serde through the wire spelling.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident, field = $field:literal, expected = $expected:literal,
        { $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::catalog::UnknownValue;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $( $text => Ok(Self::$variant), )+
                    other => Err($crate::catalog::UnknownValue {
                        field: $field,
                        value: other.to_owned(),
                        expected: $expected,
                    }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
    /// What a model serves.
    ModelKind, field = "kind", expected = "chat, embedding or classifier", {
        /// Chat completions (`POST /v1/chat/completions`).
        Chat => "chat",
        /// Embeddings (`POST /v1/embeddings`).
        Embedding => "embedding",
        /// Rerank, relevance classification (`POST /v1/rerank`).
        Classifier => "classifier",
    }
}

wire_enum! {
    /// Whether a model thinks (reasons before answering).
    Thinking, field = "thinking", expected = "never, always or switchable", {
        /// Never thinks (the default).
        Never => "never",
        /// Always thinks; it cannot be switched off.
        Always => "always",
        /// Thinking can be switched per request.
        Switchable => "switchable",
    }
}

impl Thinking {
    /// Whether a request may ask for `thinking == wanted`.
    pub fn allows(self, wanted: bool) -> bool {
        match self {
            Self::Always => wanted,
            Self::Switchable => true,
            Self::Never => !wanted,
        }
    }
}

/// One entry of `GET /v1/models`: the OpenAI fields plus PromptForge's catalog metadata.
///
/// Every field but `id` may be absent (any OpenAI-compatible server can be read); the
/// gateway always sends `object`, `owned_by`, `kind`, `description`, `context`, `thinking`,
/// `images`, `parallel_tool_calls`, `effort_levels` and `adaptive_thinking`. A `kind` or
/// `thinking` outside its enumeration is an error, never a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// The name requests use.
    pub id: String,
    /// Always `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The owner the catalog names (`promptforge-gateway` for the gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
    /// What the model serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ModelKind>,
    /// Catalog prose, which model binding resolves against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// The thinking mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Largest output in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u64>,
    /// The advertised default temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_temperature: Option<f64>,
    /// Whether the model accepts images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,
    /// Whether the model can emit several tool calls in one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The reasoning-effort levels the model accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort_levels: Option<Vec<String>>,
    /// The effort used when a request names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_effort: Option<String>,
    /// Whether the model decides by itself how much to think.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_thinking: Option<bool>,
}

impl ModelEntry {
    /// An entry with only its id (every other field absent).
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            object: None,
            owned_by: None,
            kind: None,
            description: None,
            context: None,
            thinking: None,
            max_output: None,
            default_temperature: None,
            images: None,
            parallel_tool_calls: None,
            effort_levels: None,
            default_effort: None,
            adaptive_thinking: None,
        }
    }
}

/// The `GET /v1/models` body: `{"object": "list", "data": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    /// The entries, in catalog order.
    pub data: Vec<ModelEntry>,
}

/// A `GET /v1/models` body that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The body is not JSON, or not an object with a `data` array.
    #[error("{0}")]
    Shape(#[source] serde_json::Error),
    /// One entry is malformed: a missing or mistyped field, or an unknown enum value.
    #[error("model `{id}`: {reason}")]
    Entry {
        /// The entry's `id`, or `#<index>` when it has no string id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
}

#[derive(Deserialize)]
struct RawList {
    data: Vec<Value>,
}

impl ModelList {
    /// A list of these entries.
    pub fn new(data: Vec<ModelEntry>) -> Self {
        Self {
            object: "list",
            data,
        }
    }

    /// Reads a `GET /v1/models` body. An entry error names the model id (or its position)
    /// and the problem, e.g. "model `m`: kind `vector` is not chat, embedding or classifier".
    pub fn from_slice(body: &[u8]) -> Result<Self, CatalogError> {
        let raw: RawList = serde_json::from_slice(body).map_err(CatalogError::Shape)?;
        let data = raw
            .data
            .into_iter()
            .enumerate()
            .map(|(index, value)| {
                let id = value
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("#{index}"), str::to_owned);
                serde_json::from_value::<ModelEntry>(value).map_err(|e| CatalogError::Entry {
                    id,
                    reason: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self::new(data))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn enums_round_trip_and_reject_unknown_values() {
        for kind in ModelKind::ALL {
            assert_eq!(kind.as_str().parse::<ModelKind>().unwrap(), *kind);
        }
        for thinking in Thinking::ALL {
            assert_eq!(thinking.as_str().parse::<Thinking>().unwrap(), *thinking);
        }
        let error = "vector".parse::<ModelKind>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "kind `vector` is not chat, embedding or classifier"
        );
        assert_eq!(
            error.reason(),
            "`vector` is not chat, embedding or classifier"
        );
        assert!("Chat".parse::<ModelKind>().is_err(), "spellings are exact");
        assert!("sometimes".parse::<Thinking>().is_err());
    }

    #[test]
    fn thinking_constraints() {
        assert!(Thinking::Always.allows(true) && !Thinking::Always.allows(false));
        assert!(Thinking::Never.allows(false) && !Thinking::Never.allows(true));
        assert!(Thinking::Switchable.allows(true) && Thinking::Switchable.allows(false));
    }

    #[test]
    fn entries_read_with_absent_fields_and_write_only_present_ones() {
        let list = ModelList::from_slice(
            br#"{"object":"list","data":[{"id":"bare","created":1},
                {"id":"m","kind":"embedding","thinking":null,"context":512}]}"#,
        )
        .unwrap();
        assert_eq!(list.data[0], ModelEntry::new("bare"));
        assert_eq!(list.data[1].kind, Some(ModelKind::Embedding));
        assert_eq!(list.data[1].thinking, None);
        assert_eq!(list.data[1].context, Some(512));
        let written = serde_json::to_value(ModelList::new(vec![ModelEntry {
            kind: Some(ModelKind::Classifier),
            thinking: Some(Thinking::Never),
            ..ModelEntry::new("r")
        }]))
        .unwrap();
        assert_eq!(
            written,
            serde_json::json!({"object": "list", "data": [
                {"id": "r", "kind": "classifier", "thinking": "never"}]})
        );
    }

    #[test]
    fn unknown_enum_values_name_the_value_and_the_model() {
        let error = ModelList::from_slice(
            br#"{"data":[{"id":"ok","kind":"chat"},{"id":"embed-x","kind":"vector"}]}"#,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "model `embed-x`: kind `vector` is not chat, embedding or classifier"
        );
        let error =
            ModelList::from_slice(br#"{"data":[{"id":"t","thinking":"maybe"}]}"#).unwrap_err();
        assert_eq!(
            error.to_string(),
            "model `t`: thinking `maybe` is not never, always or switchable"
        );
        let error = ModelList::from_slice(br#"{"data":[{"kind":"chat"}]}"#).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("model `#0`: missing field `id`"),
            "{error}"
        );
        assert!(matches!(
            ModelList::from_slice(b"{}"),
            Err(CatalogError::Shape(_))
        ));
    }
}
