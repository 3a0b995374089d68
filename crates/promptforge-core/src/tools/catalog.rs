//! The live tool catalog: the concrete tools a process can call.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use promptforge_tool_picker::{
    BuildError, Catalog, Config, LazyPicker, ToolDescriptor, ToolPicker,
};

use super::{Tool, ToolId};

/// A tool set that cannot form a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CatalogError {}

/// The tools a run may bind, each callable. Cheap to clone.
///
/// Identities and wire names are unique; wire names match `[A-Za-z0-9_.-]{1,64}`. Build the
/// tool picker over [`ToolCatalog::picker_catalog`] so every identity the picker can choose
/// has a callable tool here.
#[derive(Clone, Default)]
pub struct ToolCatalog {
    tools: Arc<Vec<Arc<dyn Tool>>>,
}

impl fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.id()))
            .finish()
    }
}

impl ToolCatalog {
    /// A catalog of these tools.
    pub fn new(tools: &[Arc<dyn Tool>]) -> Result<Self, CatalogError> {
        let mut ids = HashSet::new();
        let mut wires = HashSet::new();
        for tool in tools {
            let wire = tool.wire_name();
            if !is_wire_name(wire) {
                return Err(CatalogError {
                    message: format!(
                        "tool {} has the wire name `{wire}`; wire names match [A-Za-z0-9_.-] (1 to 64 characters)",
                        tool.id()
                    ),
                });
            }
            if !ids.insert(tool.id().clone()) {
                return Err(CatalogError {
                    message: format!("two tools share the identity {}", tool.id()),
                });
            }
            if !wires.insert(wire.to_owned()) {
                return Err(CatalogError {
                    message: format!("two tools share the wire name `{wire}`"),
                });
            }
        }
        Ok(Self {
            tools: Arc::new(tools.to_vec()),
        })
    }

    /// A catalog with no tools.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The tool with this identity.
    pub fn get(&self, id: &ToolId) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|tool| tool.id() == id)
    }

    /// The tools, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The descriptors to build a tool picker over.
    pub fn picker_catalog(&self) -> Catalog {
        self.tools
            .iter()
            .map(|tool| {
                ToolDescriptor::new(
                    tool.id().clone(),
                    tool.description(),
                    tool.parameters().clone(),
                )
            })
            .collect()
    }

    /// The tool picker over this catalog with the default configuration, built now: it
    /// loads the compiled-in embedding model (about a second) and embeds every tool. This
    /// is the picker [`ResolutionContext::new`](crate::ResolutionContext::new) wants.
    pub fn picker(&self) -> Result<ToolPicker, BuildError> {
        ToolPicker::build(self.picker_catalog(), Config::default())
    }

    /// The tool picker over this catalog, built only when a run first binds a tool or a
    /// model: the picker [`ResolutionContext::lazy`](crate::ResolutionContext::lazy) wants.
    pub fn lazy_picker(&self) -> LazyPicker {
        LazyPicker::new(self.picker_catalog(), Config::default())
    }
}

/// Whether `name` is a valid wire name.
pub(crate) fn is_wire_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}
