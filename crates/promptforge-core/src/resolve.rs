//! What a run may bind: the resolution context.

use promptforge_tool_picker::ToolPicker;

use crate::client::ModelCatalog;
use crate::tools::ToolCatalog;

/// The catalogs a run resolves tool and model descriptions against.
///
/// The picker must be built over [`ToolCatalog::picker_catalog`] of the same tool catalog;
/// model descriptions are resolved with the picker's embedding model over the model
/// catalog. Model-free, tool-free prompts need none of it: use
/// [`ResolutionContext::empty`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ResolutionContext<'a> {
    pub(crate) picker: Option<&'a ToolPicker>,
    pub(crate) models: Option<&'a ModelCatalog>,
    pub(crate) tools: Option<&'a ToolCatalog>,
}

impl<'a> ResolutionContext<'a> {
    /// A context over a picker, a model catalog and the live tool catalog.
    pub fn new(picker: &'a ToolPicker, models: &'a ModelCatalog, tools: &'a ToolCatalog) -> Self {
        Self {
            picker: Some(picker),
            models: Some(models),
            tools: Some(tools),
        }
    }

    /// A context with no tools, no models and no picker: binding anything fails.
    pub fn empty() -> Self {
        Self::default()
    }
}
