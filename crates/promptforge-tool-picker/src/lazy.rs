//! A picker that loads its model and indexes its catalog only when first asked.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::{BuildError, Catalog, Config, Model, ToolPicker};

/// A [`ToolPicker`] built on first use: the model is loaded and the catalog indexed the
/// first time [`get`](Self::get) is called, never before, and at most once.
///
/// Cloning shares the one build (an `Arc`), so a caller can hand a clone to a run and ask
/// the original afterwards whether the run needed it ([`is_loaded`](Self::is_loaded)).
/// Concurrent first callers wait for the one build; nothing else is locked while it runs,
/// and a caller that never calls `get` never waits. A failed build is kept and returned to
/// every later caller (it is not retried: the model and catalog do not change).
#[derive(Clone)]
pub struct LazyPicker {
    inner: Arc<Inner>,
}

struct Inner {
    catalog: Catalog,
    config: Config,
    model: Option<Model>,
    built: OnceLock<Result<ToolPicker, BuildError>>,
}

impl fmt::Debug for LazyPicker {
    /// Shows the catalog size and whether the picker has been built.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyPicker")
            .field("tools", &self.inner.catalog.len())
            .field("loaded", &self.is_loaded())
            .finish_non_exhaustive()
    }
}

impl LazyPicker {
    /// A picker over `catalog` that loads the compiled-in model on first use.
    pub fn new(catalog: Catalog, config: Config) -> Self {
        Self::from_parts(catalog, config, None, OnceLock::new())
    }

    /// A picker over `catalog` that indexes with an already loaded `model` on first use.
    pub fn with_model(model: &Model, catalog: Catalog, config: Config) -> Self {
        Self::from_parts(catalog, config, Some(model.clone()), OnceLock::new())
    }

    /// An already built picker (so [`is_loaded`](Self::is_loaded) is `true` from the start).
    pub fn ready(picker: ToolPicker) -> Self {
        let catalog = picker.catalog().clone();
        let config = *picker.config();
        let model = Some(picker.model().clone());
        Self::from_parts(catalog, config, model, OnceLock::from(Ok(picker)))
    }

    fn from_parts(
        catalog: Catalog,
        config: Config,
        model: Option<Model>,
        built: OnceLock<Result<ToolPicker, BuildError>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                catalog,
                config,
                model,
                built,
            }),
        }
    }

    /// The picker, building it first if this is the first call: loads the model (unless
    /// one was given) and embeds every tool. The same answer (the picker or the build
    /// error) is returned to every caller.
    pub fn get(&self) -> Result<&ToolPicker, &BuildError> {
        self.inner
            .built
            .get_or_init(|| {
                let catalog = self.inner.catalog.clone();
                match &self.inner.model {
                    Some(model) => Ok(ToolPicker::build_with_model(
                        model,
                        catalog,
                        self.inner.config,
                    )?),
                    None => ToolPicker::build(catalog, self.inner.config),
                }
            })
            .as_ref()
    }

    /// Whether the build has run (the model is loaded and the catalog indexed, or the
    /// attempt failed). `false` until the first [`get`](Self::get).
    pub fn is_loaded(&self) -> bool {
        self.inner.built.get().is_some()
    }

    /// The catalog the picker indexes (available without building).
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The configuration the picker uses (available without building).
    pub fn config(&self) -> &Config {
        &self.inner.config
    }
}

impl From<ToolPicker> for LazyPicker {
    fn from(picker: ToolPicker) -> Self {
        Self::ready(picker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ToolDescriptor, ToolId};

    fn catalog() -> Catalog {
        Catalog::new(vec![ToolDescriptor::new(
            ToolId::new("files", "read_file"),
            "Read a file from disk",
            serde_json::json!({}),
        )])
    }

    #[test]
    fn builds_on_first_get_only_and_once() {
        let lazy = LazyPicker::new(catalog(), Config::default());
        let clone = lazy.clone();
        assert!(!lazy.is_loaded());
        assert_eq!(lazy.catalog().len(), 1);
        assert!(!clone.is_loaded(), "asking for the catalog builds nothing");
        let first: *const ToolPicker = clone.get().unwrap();
        assert!(lazy.is_loaded(), "clones share the build");
        let second: *const ToolPicker = lazy.get().unwrap();
        assert_eq!(first, second, "built once");
        assert!(format!("{lazy:?}").contains("loaded: true"));
    }

    #[test]
    fn a_ready_picker_is_loaded() {
        let picker = ToolPicker::build(catalog(), Config::default()).unwrap();
        let lazy = LazyPicker::from(picker);
        assert!(lazy.is_loaded());
        assert_eq!(lazy.get().unwrap().len(), 1);
    }

    #[test]
    fn concurrent_first_callers_share_one_build() {
        let model = Model::load().unwrap();
        let lazy = LazyPicker::with_model(&model, catalog(), Config::default());
        let addresses: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| std::ptr::from_ref(lazy.get().unwrap()) as usize))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(addresses.windows(2).all(|w| w[0] == w[1]), "{addresses:?}");
    }
}
