//! What a run may bind: the resolution context.

use std::marker::PhantomData;

/// The catalogs a run resolves tool and model descriptions against.
///
/// Model-free prompts need none: use [`ResolutionContext::empty`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ResolutionContext<'a> {
    _catalogs: PhantomData<&'a ()>,
}

impl ResolutionContext<'_> {
    /// A context with no tools and no models.
    pub fn empty() -> Self {
        Self::default()
    }
}
