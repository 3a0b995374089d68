//! The model catalog: what models a run may bind.

use serde::Deserialize;

/// Whether a model thinks (reasons before answering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Thinking {
    /// Always thinks; it cannot be switched off.
    Always,
    /// Thinking can be switched per request.
    Switchable,
    /// Never thinks.
    Never,
}

impl Thinking {
    /// The catalog spelling: `always`, `switchable` or `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Switchable => "switchable",
            Self::Never => "never",
        }
    }

    /// Whether a request may ask for `thinking == wanted`.
    pub fn allows(self, wanted: bool) -> bool {
        match self {
            Self::Always => wanted,
            Self::Switchable => true,
            Self::Never => !wanted,
        }
    }
}

/// What a model serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelKind {
    /// Chat completions.
    Chat,
    /// Embeddings.
    Embedding,
    /// Rerank (relevance classification).
    Classifier,
}

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDescriptor {
    id: String,
    description: String,
    context: Option<u64>,
    max_output: Option<u64>,
    thinking: Thinking,
    kind: ModelKind,
}

impl ModelDescriptor {
    /// A chat model with no context or thinking information.
    pub fn new(id: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            description: description.into(),
            context: None,
            max_output: None,
            thinking: Thinking::Never,
            kind: ModelKind::Chat,
        }
    }

    /// Sets the context window, in tokens.
    pub fn with_context(mut self, context: u64) -> Self {
        self.context = Some(context);
        self
    }

    /// Sets the largest output, in tokens.
    pub fn with_max_output(mut self, max_output: u64) -> Self {
        self.max_output = Some(max_output);
        self
    }

    /// Sets the thinking mode.
    pub fn with_thinking(mut self, thinking: Thinking) -> Self {
        self.thinking = thinking;
        self
    }

    /// Sets the kind.
    pub fn with_kind(mut self, kind: ModelKind) -> Self {
        self.kind = kind;
        self
    }

    /// The id requests name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The prose description binding resolves against.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The context window, when known.
    pub fn context(&self) -> Option<u64> {
        self.context
    }

    /// The largest output, when known.
    pub fn max_output(&self) -> Option<u64> {
        self.max_output
    }

    /// The thinking mode.
    pub fn thinking(&self) -> Thinking {
        self.thinking
    }

    /// The kind.
    pub fn kind(&self) -> ModelKind {
        self.kind
    }
}

/// The models a run may bind, in catalog order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCatalog {
    models: Vec<ModelDescriptor>,
}

impl ModelCatalog {
    /// A catalog of these models.
    pub fn new(models: Vec<ModelDescriptor>) -> Self {
        Self { models }
    }

    /// A catalog with no models (local-only mode).
    pub fn empty() -> Self {
        Self::default()
    }

    /// The models.
    pub fn iter(&self) -> std::slice::Iter<'_, ModelDescriptor> {
        self.models.iter()
    }

    /// The model with this id.
    pub fn get(&self, id: &str) -> Option<&ModelDescriptor> {
        self.models.iter().find(|m| m.id == id)
    }

    /// How many models.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// Reads a `GET /v1/models` body. Missing fields default: kind `chat`, thinking
    /// `never`, the id as description.
    pub fn from_models_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        let list: ModelList = serde_json::from_slice(body)?;
        Ok(Self::new(
            list.data
                .into_iter()
                .map(|entry| ModelDescriptor {
                    description: entry
                        .description
                        .filter(|d| !d.trim().is_empty())
                        .unwrap_or_else(|| entry.id.clone()),
                    id: entry.id,
                    context: entry.context,
                    max_output: entry.max_output,
                    thinking: match entry.thinking.as_deref() {
                        Some("always") => Thinking::Always,
                        Some("switchable") => Thinking::Switchable,
                        _ => Thinking::Never,
                    },
                    kind: match entry.kind.as_deref() {
                        Some("embedding") => ModelKind::Embedding,
                        Some("classifier") => ModelKind::Classifier,
                        _ => ModelKind::Chat,
                    },
                })
                .collect(),
        ))
    }
}

impl<'a> IntoIterator for &'a ModelCatalog {
    type Item = &'a ModelDescriptor;
    type IntoIter = std::slice::Iter<'a, ModelDescriptor>;

    fn into_iter(self) -> Self::IntoIter {
        self.models.iter()
    }
}

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
    description: Option<String>,
    context: Option<u64>,
    max_output: Option<u64>,
    thinking: Option<String>,
    kind: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_gateway_catalog_shape() {
        let body = br#"{"object":"list","data":[
            {"id":"reasoning-large","object":"model","kind":"chat","description":"Best reasoning",
             "context":200000,"thinking":"switchable","max_output":64000,"images":true},
            {"id":"embed","object":"model","kind":"embedding","description":"Embeddings"},
            {"id":"bare","object":"model"}]}"#;
        let catalog = ModelCatalog::from_models_json(body).unwrap();
        assert_eq!(catalog.len(), 3);
        let large = catalog.get("reasoning-large").unwrap();
        assert_eq!(large.context(), Some(200_000));
        assert_eq!(large.max_output(), Some(64_000));
        assert_eq!(large.thinking(), Thinking::Switchable);
        assert_eq!(catalog.get("embed").unwrap().kind(), ModelKind::Embedding);
        assert_eq!(catalog.get("bare").unwrap().description(), "bare");
        assert!(ModelCatalog::from_models_json(b"{}").is_err());
    }

    #[test]
    fn thinking_constraints() {
        assert!(Thinking::Always.allows(true) && !Thinking::Always.allows(false));
        assert!(Thinking::Never.allows(false) && !Thinking::Never.allows(true));
        assert!(Thinking::Switchable.allows(true) && Thinking::Switchable.allows(false));
    }
}
