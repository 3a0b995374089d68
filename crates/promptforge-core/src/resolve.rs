//! What a run may bind: the resolution context.

use promptforge_tool_picker::{LazyPicker, ToolPicker};

use crate::client::ModelCatalog;
use crate::tools::ToolCatalog;

/// The catalogs a run resolves tool and model descriptions against.
///
/// The picker must be built over [`ToolCatalog::picker_catalog`] of the same tool catalog;
/// model descriptions are resolved with the picker's embedding model over the model
/// catalog. Model-free, tool-free prompts need none of it: use
/// [`ResolutionContext::empty`], or [`ResolutionContext::lazy`], which loads the model and
/// indexes the catalog only when a prompt first binds a tool or a model.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResolutionContext<'a> {
    pub(crate) picker: Option<PickerSource<'a>>,
    pub(crate) models: Option<&'a ModelCatalog>,
    pub(crate) tools: Option<&'a ToolCatalog>,
}

impl<'a> ResolutionContext<'a> {
    /// A context over a picker, a model catalog and the live tool catalog.
    pub fn new(picker: &'a ToolPicker, models: &'a ModelCatalog, tools: &'a ToolCatalog) -> Self {
        Self {
            picker: Some(PickerSource::Ready(picker)),
            models: Some(models),
            tools: Some(tools),
        }
    }

    /// A context whose picker is built on first use: a run loads the model and indexes the
    /// catalog only when the prompt first needs them (`tools.bind`, `tools.always`,
    /// `models.bind`, `models.default`), and never when it binds nothing. The build runs
    /// outside every lock a Lua callback or a fanout arm waits on; arms that need the
    /// picker at the same time wait for the one build. Ask
    /// [`LazyPicker::is_loaded`] afterwards whether it was needed.
    ///
    /// The picker must be over [`ToolCatalog::picker_catalog`] of `tools`.
    pub fn lazy(picker: &'a LazyPicker, models: &'a ModelCatalog, tools: &'a ToolCatalog) -> Self {
        Self {
            picker: Some(PickerSource::Lazy(picker)),
            models: Some(models),
            tools: Some(tools),
        }
    }

    /// A context with no tools, no models and no picker: binding anything fails.
    pub fn empty() -> Self {
        Self::default()
    }
}

/// Where a run's picker comes from: built already, or built on first use.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PickerSource<'a> {
    Ready(&'a ToolPicker),
    Lazy(&'a LazyPicker),
}

impl PickerSource<'_> {
    /// The run's own handle: a clone of the ready picker, or the shared lazy one.
    pub(crate) fn to_lazy(self) -> LazyPicker {
        match self {
            Self::Ready(picker) => LazyPicker::ready(picker.clone()),
            Self::Lazy(lazy) => lazy.clone(),
        }
    }
}
