//! The server's shared state: the published catalog generation and the run resources.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use promptforge_core::client::{GatewayClient, ModelCatalog};
use promptforge_core::tools::ToolCatalog;
use promptforge_tool_picker::{Catalog as PickerCatalog, Config as PickerConfig, Model};
use promptforge_tool_picker::{ToolDescriptor, ToolId, ToolPicker};

use crate::catalog::Catalog;
use crate::files::Allowed;
use crate::runs::Registry;

/// The retrieval index behind `need_prompt`, or why there is none.
#[derive(Debug, Clone)]
pub enum Index {
    /// Built over every runnable prompt's name and description.
    Ready(Arc<ToolPicker>),
    /// Being built in the background after boot (a large catalog takes seconds).
    Building,
    /// Could not be built; `need_prompt` says so and points at `list_prompts`.
    Unavailable(String),
}

/// One catalog generation: the catalog and its retrieval index, published together.
#[derive(Debug)]
pub struct Generation {
    /// 1 at boot, then one more per published reload.
    pub number: u64,
    /// The catalog.
    pub catalog: Catalog,
    /// The retrieval index built over exactly this catalog's runnable entries.
    pub index: Index,
    /// The `(name, description)` pairs the index was built over.
    pub index_key: Vec<(String, String)>,
}

/// Everything a run and a call need, shared by every session and transport.
pub struct Shared {
    generation: RwLock<Arc<Generation>>,
    published: AtomicU64,
    closed: AtomicBool,
    /// The run registry.
    pub registry: Registry,
    /// How long a call waits for its run before answering `running`.
    pub reply_deadline: Duration,
    /// The gateway client every run goes through.
    pub gateway: GatewayClient,
    /// The gateway's model catalog as fetched at boot.
    pub models: ModelCatalog,
    /// `web_fetch` and `web_search`.
    pub tools: ToolCatalog,
    /// The execution-time tool picker over [`Shared::tools`].
    pub picker: ToolPicker,
    /// The embedding model, loaded once and shared by every index.
    pub model: Option<Model>,
    /// `[files] allowed_dirs`, resolved at boot (none until [`Shared::with_allowed`]).
    pub allowed: Arc<Allowed>,
    /// Runs in [`Shared::complete_index`] just before it takes the lock (tests use it to
    /// land a shutdown in that window).
    #[cfg(test)]
    before_install: std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("generation", &self.current().number)
            .finish_non_exhaustive()
    }
}

/// The server id under which prompts sit in the retrieval index.
pub const INDEX_SERVER: &str = "prompts";

/// Builds the retrieval index over `key` with `model`, reusing the vectors of `previous`
/// for every prompt whose name and description it already holds.
pub fn build_index(
    model: Option<&Model>,
    key: &[(String, String)],
    previous: Option<&ToolPicker>,
) -> Index {
    let Some(model) = model else {
        return Index::Unavailable("the embedding model failed to load".into());
    };
    let catalog = PickerCatalog::new(
        key.iter()
            .map(|(name, description)| {
                ToolDescriptor::new(
                    ToolId::new(INDEX_SERVER, name.as_str()),
                    description.as_str(),
                    serde_json::json!({"type": "object"}),
                )
            })
            .collect(),
    );
    let built = match previous {
        Some(previous) => previous.rebuild_reusing(catalog),
        None => ToolPicker::build_with_model(model, catalog, PickerConfig::default()),
    };
    match built {
        Ok(picker) => Index::Ready(Arc::new(picker)),
        Err(e) => Index::Unavailable(format!("the retrieval index failed to build: {e}")),
    }
}

impl Shared {
    /// The state with its first generation.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        first: Generation,
        registry: Registry,
        reply_deadline: Duration,
        gateway: GatewayClient,
        models: ModelCatalog,
        tools: ToolCatalog,
        picker: ToolPicker,
        model: Option<Model>,
    ) -> Self {
        Self {
            published: AtomicU64::new(first.number),
            generation: RwLock::new(Arc::new(first)),
            closed: AtomicBool::new(false),
            registry,
            reply_deadline,
            gateway,
            models,
            tools,
            picker,
            model,
            allowed: Arc::new(Allowed::default()),
            #[cfg(test)]
            before_install: std::sync::Mutex::new(None),
        }
    }

    /// The same state with the operator's `[files]` directories.
    pub fn with_allowed(mut self, allowed: Allowed) -> Self {
        self.allowed = Arc::new(allowed);
        self
    }

    /// The current generation (a run keeps the one it started with).
    pub fn current(&self) -> Arc<Generation> {
        Arc::clone(
            &self
                .generation
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Publishes a new catalog, reusing the index when no runnable name or description
    /// moved. Returns the new generation number, or `None` after shutdown.
    ///
    /// When the previous generation has no index to reuse vectors from (it is still being
    /// built after boot), the new catalog is published at once with its index `Building`,
    /// and the index is built on a background thread and installed for that generation.
    pub fn publish(self: &Arc<Self>, catalog: Catalog) -> Option<u64> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let previous = self.current();
        let key = catalog.index_key();
        let mut background = false;
        let index = if key == previous.index_key {
            previous.index.clone()
        } else {
            match &previous.index {
                Index::Ready(picker) => build_index(self.model.as_ref(), &key, Some(picker)),
                Index::Building => {
                    background = true;
                    Index::Building
                }
                Index::Unavailable(_) => build_index(self.model.as_ref(), &key, None),
            }
        };
        let mut slot = self
            .generation
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let number = self.published.fetch_add(1, Ordering::AcqRel) + 1;
        *slot = Arc::new(Generation {
            number,
            catalog,
            index,
            index_key: key.clone(),
        });
        drop(slot);
        if background {
            let shared = Arc::clone(self);
            std::thread::spawn(move || {
                let index = build_index(shared.model.as_ref(), &key, None);
                shared.complete_index(number, index);
            });
        }
        Some(number)
    }

    /// Installs the index built in the background for generation `number`, if that
    /// generation is still the current one (a reload may have published a newer pair).
    ///
    /// Nothing is installed after [`Shared::close`]: `closed` is read under the write lock,
    /// which `close` takes after setting it, so an index that finishes building while the
    /// server shuts down is dropped, whichever thread gets the lock first.
    pub fn complete_index(&self, number: u64, index: Index) -> bool {
        #[cfg(test)]
        if let Some(hook) = &*self
            .before_install
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            hook();
        }
        let mut slot = self
            .generation
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        if slot.number != number || !matches!(slot.index, Index::Building) {
            return false;
        }
        *slot = Arc::new(Generation {
            number,
            catalog: slot.catalog.clone(),
            index,
            index_key: slot.index_key.clone(),
        });
        true
    }

    /// Whether the last publish reused the index of the generation before it.
    pub fn index_is_shared_with(&self, other: &Generation) -> bool {
        match (&self.current().index, &other.index) {
            (Index::Ready(a), Index::Ready(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Stops publishing and admitting: called at shutdown.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _guard = self
            .generation
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.registry.close();
    }

    /// Whether [`Shared::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use promptforge_core::client::{GatewayClient, ModelCatalog};
    use promptforge_core::tools::ToolCatalog;
    use promptforge_tool_picker::{Config, Model, ToolPicker};

    use super::{Generation, Index, Shared};
    use crate::catalog::{self, Mode};
    use crate::config::CatalogConfig;
    use crate::runs::Registry;

    fn shared() -> Arc<Shared> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(
            dir.path().join("echo.md"),
            "---\nname: echo\ndescription: Return the input\npromptforge: 1\n---\n\n# E\n\n```lua\nreturn args\n```\n",
        )
        .expect("a prompt file");
        let config = CatalogConfig {
            include: vec!["*.md".into()],
            exclude: vec![],
            overrides: Default::default(),
        };
        let catalog = catalog::resolve(&config, dir.path(), Mode::Boot).expect("a catalog");
        let model = Model::load().expect("the picker's model");
        let tools = ToolCatalog::empty();
        let picker =
            ToolPicker::build_with_model(&model, tools.picker_catalog(), Config::default())
                .expect("an empty picker");
        Arc::new(Shared::new(
            Generation {
                number: 1,
                index_key: catalog.index_key(),
                catalog,
                index: Index::Building,
            },
            Registry::new(1, Duration::from_secs(1), Duration::from_secs(60)),
            Duration::from_secs(10),
            GatewayClient::disabled(),
            ModelCatalog::empty(),
            tools,
            picker,
            None,
        ))
    }

    /// Issue 26 item 8: a background index that finished while the server closed used to
    /// be installed after `close` (the `closed` check ran before the lock was taken).
    #[test]
    fn an_index_finishing_during_shutdown_is_not_installed() {
        let shared = shared();
        let arrived = Arc::new(Barrier::new(2));
        let go = Arc::new(Barrier::new(2));
        let (a, g) = (Arc::clone(&arrived), Arc::clone(&go));
        *shared
            .before_install
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(move || {
            a.wait();
            g.wait();
        }));
        let builder = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                shared.complete_index(1, Index::Unavailable("built during shutdown".into()))
            })
        };
        // The builder is inside `complete_index`, about to take the lock: shut down now.
        arrived.wait();
        shared.close();
        go.wait();
        let installed = builder.join().expect("the builder thread");
        assert!(!installed, "an index was installed after close");
        assert!(matches!(shared.current().index, Index::Building));
    }

    #[test]
    fn an_index_finishing_before_shutdown_is_installed() {
        let shared = shared();
        assert!(shared.complete_index(1, Index::Unavailable("built".into())));
        assert!(matches!(shared.current().index, Index::Unavailable(_)));
        // Not twice, and not for another generation.
        assert!(!shared.complete_index(1, Index::Unavailable("again".into())));
        assert!(!shared.complete_index(2, Index::Unavailable("other".into())));
    }
}
