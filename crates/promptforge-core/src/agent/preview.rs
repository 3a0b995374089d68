//! What a binding call will bind to, before any run: `tools.bind`, `models.bind` and
//! `models.default` decided by the run's own resolution code over the same picker and
//! catalogs, so a preview and a run cannot disagree.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState};
use promptforge_tool_picker::{LazyPicker, Outcome, ToolPicker};

use super::bindings::{Declaration, ModelOpts, ModelResolver, resolve_tool_inspecting};
use super::picker_of;
use crate::client::ModelCatalog;
use crate::tools::ToolCatalog;

/// The longest opts table source [`ModelConstraints::from_lua`] reads, in bytes.
pub const MAX_CONSTRAINTS_SOURCE_BYTES: usize = 4096;

/// Lua instructions an opts table may take to evaluate (a literal table takes a handful).
const CONSTRAINTS_INSTRUCTIONS: u64 = 100_000;

/// Previews binding calls against a picker, a model catalog and a tool catalog: the
/// resources a run would get (`promptforge run` offers `web_fetch`, plus `web_search` and
/// the gateway's model catalog when a gateway is configured).
///
/// The picker is the run's lazy one: nothing loads until the first preview that needs it
/// ([`Previewer::is_loaded`]), and a model preview over an empty catalog never loads it.
/// Previews take the calling thread for an embedding (a few milliseconds once loaded; the
/// first one also loads the model and indexes the tools), so callers that must stay
/// responsive run them on a thread of their own.
///
/// ```no_run
/// use promptforge_core::client::ModelCatalog;
/// use promptforge_core::preview::{ModelCall, ModelConstraints, Preview, Previewer};
/// use promptforge_core::tools::ToolCatalog;
/// use promptforge_tool_picker::{Config, LazyPicker};
///
/// let tools = ToolCatalog::new(&[])?;
/// let picker = LazyPicker::new(tools.picker_catalog(), Config::default());
/// let previewer = Previewer::new(picker, ModelCatalog::empty(), tools);
/// match previewer.tool("search", "search the web") {
///     Preview::Bound { name, score } => println!("binds {name} ({score:.2})"),
///     other => println!("the run would fail: {}", other.message().unwrap_or_default()),
/// }
/// let opts = ModelConstraints::from_lua("{ thinking = true, context = 32000 }")?;
/// let model = previewer.model(ModelCall::Default, "writer", "a careful writer", &opts);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Previewer {
    picker: LazyPicker,
    tools: ToolCatalog,
    models: ModelResolver,
}

impl std::fmt::Debug for Previewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Previewer")
            .field("tools", &self.tools.len())
            .field("loaded", &self.picker.is_loaded())
            .finish()
    }
}

/// Which model declaration a preview stands for (their error messages name the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelCall {
    /// `models.bind(alias, description, opts)`.
    Bind,
    /// `models.default(alias, description, opts)`.
    Default,
}

/// The hard constraints of a model declaration's opts table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelConstraints {
    opts: ModelOpts,
}

impl ModelConstraints {
    /// No constraints (an absent opts table): any chat model.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads an opts table written in Lua (`{ thinking = true, context = 32000 }`) and
    /// checks it exactly as `models.bind` does, so a bad opt gives the run's message.
    ///
    /// Only literal values are read: a name, a call or anything else that needs the
    /// prompt's environment is refused (the value is known only when the prompt runs), as
    /// is source longer than [`MAX_CONSTRAINTS_SOURCE_BYTES`] or one that takes more than a
    /// few thousand Lua instructions.
    pub fn from_lua(table: &str) -> Result<Self, String> {
        if table.len() > MAX_CONSTRAINTS_SOURCE_BYTES {
            return Err(format!(
                "the opts table is {} bytes; at most {MAX_CONSTRAINTS_SOURCE_BYTES} are read",
                table.len()
            ));
        }
        with_literal_table(table, super::lua_models::opts)
            .map_err(|e| e.to_string())?
            .map(|opts| Self { opts })
            .map_err(|e| e.message().to_owned())
    }
}

/// Evaluates `table` in a VM with no libraries, an environment that refuses every name,
/// a small memory ceiling and an instruction budget, and hands the value to `read` while
/// the VM lives.
fn with_literal_table<R>(table: &str, read: impl FnOnce(Value) -> R) -> mlua::Result<R> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::new())?;
    lua.set_memory_limit(1024 * 1024)?;
    let spent = Arc::new(AtomicU64::new(0));
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(100),
        move |_, _| {
            if spent.fetch_add(100, Ordering::Relaxed) >= CONSTRAINTS_INSTRUCTIONS {
                return Err(mlua::Error::runtime(
                    "the opts table takes too long to evaluate",
                ));
            }
            Ok(VmState::Continue)
        },
    )?;
    let env = lua.create_table()?;
    let refuse = lua.create_table()?;
    refuse.set(
        "__index",
        lua.create_function(|_, (_, name): (Table, Value)| -> mlua::Result<()> {
            let name = name.to_string().unwrap_or_else(|_| "a name".to_owned());
            Err(mlua::Error::runtime(format!(
                "`{name}` is not a literal value: it is known only when the prompt runs"
            )))
        })?,
    )?;
    env.set_metatable(Some(refuse))?;
    let value: Value = lua
        .load(format!("return {table}"))
        .set_name("=opts")
        .set_environment(env)
        .call(())?;
    Ok(read(value))
}

/// What a binding call would do in a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Preview {
    /// The call binds `name` (a tool's wire name or a model id); `score` is the picker's
    /// hybrid score for it.
    Bound {
        /// The bound tool's wire name or model id.
        name: String,
        /// The picker's score for the bound candidate.
        score: f32,
    },
    /// The description is ambiguous between `candidates` (best first); the run fails with
    /// `message`.
    Ambiguous {
        /// The candidates within the margin of the leader, best first.
        candidates: Vec<String>,
        /// The run's error message.
        message: String,
    },
    /// The matching candidates are near-duplicates of each other; the run fails.
    Duplicate {
        /// The twins, best first.
        candidates: Vec<String>,
        /// The run's error message.
        message: String,
    },
    /// No candidate matches the description; the run fails.
    NoMatch {
        /// The run's error message.
        message: String,
    },
    /// The call fails before any decision (no picker, an empty or filtered-out model
    /// catalog, a picker that cannot load); the run fails with `message`.
    Failed {
        /// The run's error message.
        message: String,
    },
}

impl Preview {
    /// The run's error message, for every outcome but [`Preview::Bound`].
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Bound { .. } => None,
            Self::Ambiguous { message, .. }
            | Self::Duplicate { message, .. }
            | Self::NoMatch { message }
            | Self::Failed { message } => Some(message),
        }
    }
}

/// What the inspection of a picker decision saw.
enum Seen {
    Nothing,
    Bound(f32),
    Ambiguous(Vec<String>),
    Duplicate(Vec<String>),
    Absent,
}

fn inspect(picker: &ToolPicker, outcome: &Outcome<'_>, description: &str) -> Seen {
    match outcome {
        Outcome::Bind(tool) => {
            let limit = picker.config().top_k().get().max(2);
            let score = picker
                .rank(description, limit)
                .ok()
                .and_then(|ranked| {
                    ranked
                        .iter()
                        .find(|s| s.tool().id() == tool.id())
                        .map(|s| s.score())
                })
                .unwrap_or(f32::NAN);
            Seen::Bound(score)
        }
        Outcome::Ambiguous(group) => {
            Seen::Ambiguous(group.iter().map(|t| t.name().to_owned()).collect())
        }
        Outcome::Duplicate(group) => {
            Seen::Duplicate(group.iter().map(|t| t.name().to_owned()).collect())
        }
        _ => Seen::Absent,
    }
}

fn preview<T>(
    result: Result<T, crate::error::RunError>,
    seen: Seen,
    name: impl FnOnce(&T) -> String,
) -> Preview {
    match (result, seen) {
        (Ok(bound), Seen::Bound(score)) => Preview::Bound {
            name: name(&bound),
            score,
        },
        (Ok(bound), _) => Preview::Bound {
            name: name(&bound),
            score: f32::NAN,
        },
        (Err(error), Seen::Ambiguous(candidates)) => Preview::Ambiguous {
            candidates,
            message: error.message().to_owned(),
        },
        (Err(error), Seen::Duplicate(candidates)) => Preview::Duplicate {
            candidates,
            message: error.message().to_owned(),
        },
        (Err(error), Seen::Absent) => Preview::NoMatch {
            message: error.message().to_owned(),
        },
        (Err(error), Seen::Nothing | Seen::Bound(_)) => Preview::Failed {
            message: error.message().to_owned(),
        },
    }
}

impl Previewer {
    /// A previewer over a (lazy) picker built from `tools.picker_catalog()`, the model
    /// catalog and the tool catalog a run would get.
    pub fn new(picker: LazyPicker, models: ModelCatalog, tools: ToolCatalog) -> Self {
        Self {
            models: ModelResolver::new(Some(picker.clone()), models),
            picker,
            tools,
        }
    }

    /// Whether the picker's embedding model is loaded and the tools indexed.
    pub fn is_loaded(&self) -> bool {
        self.picker.is_loaded()
    }

    /// What `tools.bind(alias, description)` would bind.
    pub fn tool(&self, alias: &str, description: &str) -> Preview {
        let picker = match picker_of(Some(&self.picker)) {
            Ok(picker) => picker,
            Err(error) => {
                return Preview::Failed {
                    message: error.message().to_owned(),
                };
            }
        };
        let mut seen = Seen::Nothing;
        let result = resolve_tool_inspecting(picker, &self.tools, alias, description, |p, o| {
            seen = inspect(p, o, description);
        });
        preview(result, seen, |tool| tool.wire_name().to_owned())
    }

    /// What `models.bind` / `models.default(alias, description, opts)` would bind.
    pub fn model(
        &self,
        call: ModelCall,
        alias: &str,
        description: &str,
        constraints: &ModelConstraints,
    ) -> Preview {
        let declaration = match call {
            ModelCall::Bind => Declaration::Bind,
            ModelCall::Default => Declaration::Default,
        };
        let mut seen = Seen::Nothing;
        let result = self.models.resolve_inspecting(
            declaration,
            alias,
            description,
            &constraints.opts,
            |p, o| seen = inspect(p, o, description),
        );
        preview(result, seen, |binding| binding.model_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_tables_are_read_as_the_run_reads_them() {
        let read =
            ModelConstraints::from_lua("{ thinking = true, context = 32000, temperature = 0.5 }");
        assert_eq!(
            read.map(|c| c.opts),
            Ok(ModelOpts {
                thinking: Some(true),
                context: Some(32000),
                temperature: Some(0.5),
                max_tokens: None,
            })
        );
        assert_eq!(
            ModelConstraints::from_lua("{ context = -1 }"),
            Err("model opt `context` must be a positive integer".to_owned())
        );
        assert!(
            ModelConstraints::from_lua("{ colour = 1 }")
                .is_err_and(|e| e.starts_with("unknown model opt `colour`"))
        );
    }

    #[test]
    fn opts_tables_that_need_the_prompt_are_refused() {
        for source in [
            "{ context = size }",
            "{ context = load('return 1')() }",
            "{ context = (function() while true do end end)() }",
            "{ context = ('x'):rep(10) }",
        ] {
            assert!(ModelConstraints::from_lua(source).is_err(), "{source}");
        }
        let long = format!(
            "{{ context = 1{} }}",
            " ".repeat(MAX_CONSTRAINTS_SOURCE_BYTES)
        );
        assert!(ModelConstraints::from_lua(&long).is_err());
    }

    #[test]
    fn an_empty_model_catalog_fails_without_loading_the_picker() {
        let tools = ToolCatalog::default();
        let picker = LazyPicker::new(
            tools.picker_catalog(),
            promptforge_tool_picker::Config::default(),
        );
        let previewer = Previewer::new(picker, ModelCatalog::empty(), tools);
        let preview = previewer.model(ModelCall::Bind, "m", "a writer", &ModelConstraints::none());
        assert!(
            matches!(&preview, Preview::Failed { message } if message.contains("the model catalog is empty")),
            "{preview:?}"
        );
        assert!(!previewer.is_loaded());
    }
}
