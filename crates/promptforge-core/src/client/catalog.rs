//! The model catalog: what models a run may bind.

use promptforge_wire::ModelList;
pub use promptforge_wire::{CatalogError, ModelKind, Thinking};

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
    /// `never`, the id as description. A `kind` or `thinking` outside its enumeration is an
    /// error naming the value and the model id, never a default.
    pub fn from_models_json(body: &[u8]) -> Result<Self, CatalogError> {
        let list = ModelList::from_slice(body)?;
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
                    thinking: entry.thinking.unwrap_or(Thinking::Never),
                    kind: entry.kind.unwrap_or(ModelKind::Chat),
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
    fn unknown_kinds_and_thinking_modes_are_errors_not_defaults() {
        let body = br#"{"object":"list","data":[
            {"id":"chat-a","kind":"chat"},
            {"id":"vector-b","object":"model","kind":"vector"}]}"#;
        let error = ModelCatalog::from_models_json(body).unwrap_err();
        assert_eq!(
            error.to_string(),
            "model `vector-b`: kind `vector` is not chat, embedding or classifier"
        );
        let body = br#"{"data":[{"id":"m","thinking":"sometimes"}]}"#;
        let error = ModelCatalog::from_models_json(body).unwrap_err();
        assert_eq!(
            error.to_string(),
            "model `m`: thinking `sometimes` is not never, always or switchable"
        );
    }
}
