//! `promptforge-lsp`: a language server for PromptForge prompt files.
//!
//! It knows what a prompt will do before it runs: `promptforge check`'s diagnostics (the
//! same code path in core) published as you type, section references followed with the
//! guide's visibility rules (definition, references, rename, quick fixes), `var` followed
//! between Lua and prose, hover and completion for the sandbox's Lua API and the
//! frontmatter, and what each `tools.bind` / `models.bind` will bind to, decided by the
//! run's own resolution over the same picker and catalogs.
//!
//! The binary speaks LSP over stdio ([`transport::stdio`] + [`serve`]); tests and embedders
//! can run [`serve`] over any [`lsp_server::Connection`], such as
//! `Connection::memory()`.
//!
//! ```no_run
//! let (connection, io) = promptforge_lsp::transport::stdio()?;
//! let ended = promptforge_lsp::serve(connection, promptforge_lsp::Options::default());
//! io.finish(std::time::Duration::from_secs(2));
//! std::process::exit(if ended == promptforge_lsp::Ended::Clean { 0 } else { 1 });
//! # Ok::<(), std::io::Error>(())
//! ```
#![forbid(unsafe_code)]

mod analysis;
mod api;
mod features;
mod index;
mod lua;
mod picker;
mod server;
mod text;
pub mod transport;

pub use picker::Resources;
pub use server::{DEFAULT_DEBOUNCE, Ended, MAX_DOCUMENT_BYTES, MAX_OPEN_DOCUMENTS, Options, serve};

/// The re-exported protocol crates, so embedders use the same versions.
pub use lsp_server;
pub use lsp_types;
