//! One error type per fallible operation; no crate-wide error enum.

use crate::ToolId;

/// Why a need (or a tool's text) could not be embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueryErrorKind {
    /// The text could not be tokenized.
    Tokenization,
    /// The model's forward pass failed.
    Inference,
    /// The produced vector could not be normalised (zero or not finite).
    InvalidEmbedding,
}

/// A need could not be embedded, so no answer was produced at all.
///
/// An absent tool is not an error: it is [`Outcome::Absent`](crate::Outcome::Absent).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {detail}", kind_text(*.kind))]
pub struct QueryError {
    kind: QueryErrorKind,
    detail: String,
}

fn kind_text(kind: QueryErrorKind) -> &'static str {
    match kind {
        QueryErrorKind::Tokenization => "the text could not be tokenized",
        QueryErrorKind::Inference => "the embedding model's forward pass failed",
        QueryErrorKind::InvalidEmbedding => "the embedding could not be normalised",
    }
}

impl QueryError {
    pub(crate) fn new(kind: QueryErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }

    /// Classifies the failure without exposing dependency types.
    pub fn kind(&self) -> QueryErrorKind {
        self.kind
    }
}

/// Why the compiled-in model could not be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelLoadErrorKind {
    /// The embedded weights do not carry the pinned repository, revision and digest.
    Provenance,
    /// The weights or the model configuration could not be read.
    Weights,
    /// The tokenizer could not be read.
    Tokenizer,
}

/// The compiled-in model could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot load the tool picker's embedding model: {detail}")]
pub struct ModelLoadError {
    kind: ModelLoadErrorKind,
    detail: String,
}

impl ModelLoadError {
    pub(crate) fn new(kind: ModelLoadErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }

    /// What failed.
    pub fn kind(&self) -> ModelLoadErrorKind {
        self.kind
    }
}

/// A catalog entry could not be indexed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot index tool {id} (catalog position {position}): {source}")]
pub struct IndexError {
    id: ToolId,
    position: usize,
    source: QueryError,
}

impl IndexError {
    pub(crate) fn new(id: ToolId, position: usize, source: QueryError) -> Self {
        Self {
            id,
            position,
            source,
        }
    }

    /// The tool that could not be indexed.
    pub fn id(&self) -> &ToolId {
        &self.id
    }

    /// Its position in the catalog.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Why its text could not be embedded.
    pub fn query_error(&self) -> &QueryError {
        &self.source
    }
}

/// Building a picker failed: the model did not load or the catalog did not index.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The model could not be loaded.
    #[error(transparent)]
    Model(#[from] ModelLoadError),
    /// A catalog entry could not be indexed.
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// A requested identity is not in the picker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool {missing} is not in the picker's catalog")]
pub struct SelectionError {
    missing: ToolId,
}

impl SelectionError {
    pub(crate) fn new(missing: ToolId) -> Self {
        Self { missing }
    }

    /// The first requested identity that is missing.
    pub fn missing_id(&self) -> &ToolId {
        &self.missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync_static<T: Send + Sync + 'static>() {}

    #[test]
    fn errors_are_send_sync_static() {
        assert_send_sync_static::<QueryError>();
        assert_send_sync_static::<ModelLoadError>();
        assert_send_sync_static::<IndexError>();
        assert_send_sync_static::<BuildError>();
        assert_send_sync_static::<SelectionError>();
        assert_send_sync_static::<crate::ConfigError>();
    }

    #[test]
    fn messages_name_the_problem() {
        let query = QueryError::new(QueryErrorKind::InvalidEmbedding, "norm is 0");
        assert_eq!(query.kind(), QueryErrorKind::InvalidEmbedding);
        assert_eq!(
            query.to_string(),
            "the embedding could not be normalised: norm is 0"
        );
        let index = IndexError::new(ToolId::new("s", "t"), 3, query);
        assert_eq!(index.position(), 3);
        assert_eq!(index.id(), &ToolId::new("s", "t"));
        let build = BuildError::from(index);
        assert!(build.to_string().contains(r#""s"/"t""#), "{build}");
        let selection = SelectionError::new(ToolId::new("a", "b"));
        assert_eq!(selection.missing_id(), &ToolId::new("a", "b"));
        let load = ModelLoadError::new(ModelLoadErrorKind::Provenance, "revision differs");
        assert_eq!(load.kind(), ModelLoadErrorKind::Provenance);
        assert!(
            BuildError::from(load)
                .to_string()
                .contains("revision differs")
        );
    }
}
