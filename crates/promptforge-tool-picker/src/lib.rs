//! Bind a plain-English need to a tool, with no LLM call, no network and no weights to ship.
//!
//! You describe your tools in prose, build a [`ToolPicker`] over the [`Catalog`], and ask it
//! which tool a need refers to. [`ToolPicker::resolve`] answers with one of four
//! [`Outcome`]s: one bound tool, a duplicate report (same-server twins), an ambiguous
//! shortlist, or an abstention. [`ToolPicker::shortlist`] offers the relevant tools without
//! deciding, and never contradicts `resolve`.
//!
//! The embedding model (`sentence-transformers/all-MiniLM-L6-v2`, 384 dimensions, mean
//! pooling, L2-normalised) is compiled into the library as fp16 weights, pinned by SHA-256
//! and checked for provenance at load. Inference is a hand-written, single-threaded forward
//! pass on the CPU. A tool's relevance to a need is a hybrid score: the cosine similarity of
//! their embeddings mixed with an IDF-weighted lexical coverage of the need's terms (see
//! [`Config::lexical_weight`]).
//!
//! ```
//! use promptforge_tool_picker::{Catalog, Config, Outcome, ToolDescriptor, ToolId, ToolPicker};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let catalog = Catalog::new(vec![
//!     ToolDescriptor::new(
//!         ToolId::new("files", "read_file"),
//!         "Read a file from disk",
//!         json!({"properties": {"path": {"type": "string"}}}),
//!     ),
//!     ToolDescriptor::new(
//!         ToolId::new("net", "fetch_url"),
//!         "Fetch a web page over HTTP",
//!         json!({"properties": {"url": {"type": "string"}}}),
//!     ),
//! ]);
//! let picker = ToolPicker::build(catalog, Config::default())?;
//! match picker.resolve("read a file from disk")? {
//!     Outcome::Bind(tool) => assert_eq!(tool.name(), "read_file"),
//!     other => panic!("unexpected {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Determinism
//!
//! The same model bytes, dependency versions, target, execution environment, catalog,
//! configuration and need always produce the same scores, bit for bit, and so the same
//! outcome. Every text is embedded on its own (never padded into a batch), so a tool's
//! vector does not depend on the rest of the catalog. Byte-identical vectors across
//! platforms are not promised.
//!
//! # Crate features
//!
//! * `serde` (default): `Serialize`/`Deserialize` for [`Catalog`], [`ToolDescriptor`],
//!   [`ToolId`], [`ToolAnnotations`] and [`Config`] (checked deserialisation).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bert;
mod catalog;
mod config;
mod decision;
mod error;
mod lazy;
mod lexical;
mod model;
mod picker;

pub use catalog::{Catalog, ToolAnnotations, ToolDescriptor, ToolId};
pub use config::{
    Config, ConfigError, ConfigField, DEFAULT_DUPLICATE_THRESHOLD, DEFAULT_LEXICAL_WEIGHT,
    DEFAULT_MARGIN, DEFAULT_SIMILARITY_FLOOR, DEFAULT_SOLO_FLOOR, DEFAULT_TOP_K,
};
pub use error::{
    BuildError, IndexError, ModelLoadError, ModelLoadErrorKind, QueryError, QueryErrorKind,
    SelectionError,
};
pub use lazy::LazyPicker;
pub use model::{
    EMBEDDING_CACHE_ENTRIES, EMBEDDING_CACHE_TEXT_BYTES, EMBEDDING_DIM, MAX_TOKENS,
    MODEL_REPOSITORY, MODEL_REVISION, MODEL_SHA256, Model, Provenance,
};
pub use picker::{
    CandidateGroup, NearDuplicate, NearDuplicates, Outcome, Scored, Shortlist, ToolPicker,
};

/// The README's examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
