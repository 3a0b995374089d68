//! Tool and model bindings: the run-wide registry and semantic resolution.
//!
//! Declarations (`tools.bind`, `tools.always`, `models.bind`, `models.default`) are
//! run-wide: once made, in the H1 or in any section, they hold for the rest of the run.
//! Scoping calls (`tools.add`, `tools.add_local`, `models.use`) are section-local.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use promptforge_tool_picker::{Catalog, LazyPicker, Outcome, ToolDescriptor, ToolPicker};
use serde_json::{Value as Json, json};

use super::ParamKind;
use crate::client::{ModelCatalog, ModelDescriptor, ModelKind, Thinking};
use crate::error::{RunError, RunErrorKind};
use crate::tools::{Tool, ToolCatalog, ToolId};

/// A declared model.
#[derive(Debug)]
pub(crate) struct ModelBinding {
    pub(crate) alias: String,
    pub(crate) model_id: String,
    pub(crate) description: String,
    pub(crate) context: Option<u64>,
    pub(crate) thinking: Thinking,
    /// The thinking switch to send (switchable models with an explicit `thinking` opt).
    pub(crate) thinking_request: Option<bool>,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: Option<u64>,
}

/// A declared catalog tool.
pub(crate) struct ToolBinding {
    pub(crate) alias: String,
    pub(crate) tool: Arc<dyn Tool>,
    /// The model-facing description (bind/always override, else the catalog's).
    pub(crate) description: String,
}

/// The run-wide declarations.
#[derive(Default)]
pub(crate) struct Bindings {
    pub(crate) models: BTreeMap<String, Arc<ModelBinding>>,
    pub(crate) default_model: Option<String>,
    pub(crate) tools: BTreeMap<String, Arc<ToolBinding>>,
    /// Aliases promoted with `tools.always`, in order.
    pub(crate) always: Vec<String>,
}

impl Bindings {
    /// Fails when `alias` already names a declared tool or model.
    pub(crate) fn check_free(&self, alias: &str) -> Result<(), RunError> {
        if self.models.contains_key(alias) {
            return Err(binding_error(format!(
                "the alias `{alias}` is already declared as a model"
            )));
        }
        if self.tools.contains_key(alias) {
            return Err(binding_error(format!(
                "the alias `{alias}` is already declared as a tool"
            )));
        }
        Ok(())
    }

    /// The declared model for `alias`.
    pub(crate) fn model(&self, alias: &str) -> Result<Arc<ModelBinding>, RunError> {
        self.models.get(alias).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.models.keys().map(String::as_str).collect();
            binding_error(format!(
                "no model is declared as `{alias}`; declared models: {}",
                listing(&known)
            ))
        })
    }

    /// The declared tool for `alias`.
    pub(crate) fn tool(&self, alias: &str) -> Result<Arc<ToolBinding>, RunError> {
        self.tools.get(alias).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            binding_error(format!(
                "no tool is declared as `{alias}`; declared tools: {}",
                listing(&known)
            ))
        })
    }
}

pub(crate) fn listing(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(crate) fn binding_error(message: impl Into<String>) -> RunError {
    RunError::new(RunErrorKind::Binding, message)
}

/// Checks an alias against `[A-Za-z][A-Za-z0-9_-]{0,63}`.
pub(crate) fn check_alias(alias: &str) -> Result<(), RunError> {
    let mut bytes = alias.bytes();
    let ok = bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && alias.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(binding_error(format!(
            "`{alias}` is not a valid alias: use a letter, then up to 63 letters, digits, `_` or `-`"
        )))
    }
}

/// The hard constraints of `models.bind` opts.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ModelOpts {
    pub(crate) thinking: Option<bool>,
    pub(crate) context: Option<u64>,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: Option<u64>,
}

impl ModelOpts {
    /// Whether a catalog model satisfies every constraint.
    fn admits(&self, model: &ModelDescriptor) -> bool {
        model.kind() == ModelKind::Chat
            && self
                .thinking
                .is_none_or(|wanted| model.thinking().allows(wanted))
            && self
                .context
                .is_none_or(|needed| model.context().is_some_and(|c| c >= needed))
            && self
                .max_tokens
                .is_none_or(|needed| model.max_output().is_none_or(|cap| cap >= needed))
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(thinking) = self.thinking {
            parts.push(format!("thinking = {thinking}"));
        }
        if let Some(context) = self.context {
            parts.push(format!("context >= {context}"));
        }
        if let Some(max_tokens) = self.max_tokens {
            parts.push(format!("max_tokens = {max_tokens}"));
        }
        if parts.is_empty() {
            "chat models".to_owned()
        } else {
            format!("chat models with {}", parts.join(", "))
        }
    }
}

/// Which Lua function declared a model binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declaration {
    /// `models.bind(alias, description, opts)`: a named binding.
    Bind,
    /// `models.default(alias, description, opts)`: a named binding that is also the run's
    /// default model.
    Default,
}

impl Declaration {
    /// The Lua function's name, as error messages quote it.
    pub(crate) fn function(self) -> &'static str {
        match self {
            Self::Bind => "models.bind",
            Self::Default => "models.default",
        }
    }
}

/// One filtered model catalog's picker, built once by the first arm that needs it.
type FilteredPicker = Arc<OnceLock<Result<ToolPicker, String>>>;

/// Resolves model descriptions over filtered catalogs, caching one picker per filter.
///
/// No lock is held while the base picker loads or a filtered catalog is indexed: the map's
/// lock only hands out the filter's cell, and arms that need the same filter wait on that
/// cell alone. The model's embedding cache means a filter re-embeds no description seen
/// before.
pub(crate) struct ModelResolver {
    picker: Option<LazyPicker>,
    catalog: ModelCatalog,
    cache: Mutex<HashMap<Vec<String>, FilteredPicker>>,
}

impl ModelResolver {
    pub(crate) fn new(picker: Option<LazyPicker>, catalog: ModelCatalog) -> Self {
        Self {
            picker,
            catalog,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Filters the catalog by `opts`, then resolves `description` semantically.
    pub(crate) fn resolve(
        &self,
        declaration: Declaration,
        alias: &str,
        description: &str,
        opts: &ModelOpts,
    ) -> Result<ModelBinding, RunError> {
        self.resolve_inspecting(declaration, alias, description, opts, |_, _| {})
    }

    /// [`ModelResolver::resolve`], showing `inspect` the filtered catalog's picker and its
    /// decision before the decision becomes a binding or an error (a preview's view).
    pub(crate) fn resolve_inspecting(
        &self,
        declaration: Declaration,
        alias: &str,
        description: &str,
        opts: &ModelOpts,
        inspect: impl FnOnce(&ToolPicker, &Outcome<'_>),
    ) -> Result<ModelBinding, RunError> {
        let call = declaration.function();
        let admitted: Vec<&ModelDescriptor> =
            self.catalog.iter().filter(|m| opts.admits(m)).collect();
        if admitted.is_empty() {
            let reason = if self.catalog.is_empty() {
                "the model catalog is empty (no gateway is configured, or it serves no models)"
                    .to_owned()
            } else {
                format!("no catalog model is one of the {}", opts.describe())
            };
            return Err(binding_error(format!(
                "{call}(\"{alias}\", \"{description}\"): {reason}"
            )));
        }
        let Some(base) = super::picker_of(self.picker.as_ref())? else {
            return Err(binding_error(
                "model binding needs the tool picker's embedding model, and this run has none",
            ));
        };
        let key: Vec<String> = admitted.iter().map(|m| m.id().to_owned()).collect();
        let cell = Arc::clone(
            self.cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key.clone())
                .or_default(),
        );
        let picker = cell
            .get_or_init(|| {
                let catalog: Catalog = admitted
                    .iter()
                    .map(|m| {
                        ToolDescriptor::new(
                            ToolId::new("models", m.id()),
                            m.description(),
                            json!({}),
                        )
                    })
                    .collect();
                base.rebuild(catalog).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| binding_error(format!("cannot index the model catalog: {e}")))?;
        let outcome = picker.resolve(description).map_err(|e| {
            binding_error(format!("cannot embed the description `{description}`: {e}")).caused_by(e)
        })?;
        inspect(picker, &outcome);
        let chosen = match outcome {
            Outcome::Bind(tool) => tool.name().to_owned(),
            Outcome::Absent => {
                return Err(binding_error(format!(
                    "{call}(\"{alias}\", \"{description}\"): no model matches this description \
                     among {}: {}",
                    opts.describe(),
                    listing(&key.iter().map(String::as_str).collect::<Vec<_>>())
                )));
            }
            Outcome::Duplicate(group) => {
                let names: Vec<&str> = group.iter().map(|t| t.name()).collect();
                return Err(binding_error(format!(
                    "{call}(\"{alias}\", \"{description}\"): the matching models {} are \
                     near-duplicates of each other; the catalog should tell them apart",
                    listing(&names)
                )));
            }
            Outcome::Ambiguous(group) => {
                let names: Vec<&str> = group.iter().map(|t| t.name()).collect();
                return Err(binding_error(format!(
                    "{call}(\"{alias}\", \"{description}\"): the description is ambiguous \
                     between {}; describe the one you want more precisely",
                    listing(&names)
                )));
            }
            _ => return Err(binding_error("the picker gave an unknown decision")),
        };
        let model = self
            .catalog
            .get(&chosen)
            .ok_or_else(|| binding_error("internal: resolved model is not in the catalog"))?;
        Ok(ModelBinding {
            alias: alias.to_owned(),
            model_id: model.id().to_owned(),
            description: model.description().to_owned(),
            context: model.context(),
            thinking: model.thinking(),
            thinking_request: opts
                .thinking
                .filter(|_| model.thinking() == Thinking::Switchable),
            temperature: opts.temperature,
            max_tokens: opts.max_tokens,
        })
    }
}

/// Resolves a tool description against the picker and the live catalog.
pub(crate) fn resolve_tool(
    picker: Option<&ToolPicker>,
    tools: &ToolCatalog,
    alias: &str,
    description: &str,
) -> Result<Arc<dyn Tool>, RunError> {
    resolve_tool_inspecting(picker, tools, alias, description, |_, _| {})
}

/// [`resolve_tool`], showing `inspect` the picker and its decision before the decision
/// becomes a tool or an error (a preview's view).
pub(crate) fn resolve_tool_inspecting(
    picker: Option<&ToolPicker>,
    tools: &ToolCatalog,
    alias: &str,
    description: &str,
    inspect: impl FnOnce(&ToolPicker, &Outcome<'_>),
) -> Result<Arc<dyn Tool>, RunError> {
    let Some(picker) = picker else {
        return Err(binding_error(format!(
            "tools.bind(\"{alias}\", \"{description}\"): this run has no tool picker, so no tool can be bound"
        )));
    };
    let outcome = picker.resolve(description).map_err(|e| {
        binding_error(format!("cannot embed the description `{description}`: {e}")).caused_by(e)
    })?;
    inspect(picker, &outcome);
    let id = match outcome {
        Outcome::Bind(tool) => tool.id().clone(),
        Outcome::Absent => {
            let offered: Vec<String> = tools.iter().map(|t| t.wire_name().to_owned()).collect();
            let offered: Vec<&str> = offered.iter().map(String::as_str).collect();
            return Err(binding_error(format!(
                "tools.bind(\"{alias}\", \"{description}\"): no tool this process provides \
                 matches the description; available tools: {}",
                listing(&offered)
            )));
        }
        Outcome::Duplicate(group) => {
            let names: Vec<String> = group.iter().map(|t| t.id().to_string()).collect();
            return Err(binding_error(format!(
                "tools.bind(\"{alias}\", \"{description}\"): the matching tools {} are \
                 near-duplicates published by one server",
                names.join(", ")
            )));
        }
        Outcome::Ambiguous(group) => {
            let names: Vec<String> = group.iter().map(|t| t.id().to_string()).collect();
            return Err(binding_error(format!(
                "tools.bind(\"{alias}\", \"{description}\"): the description is ambiguous \
                 between {}; describe the capability more precisely",
                names.join(", ")
            )));
        }
        _ => return Err(binding_error("the picker gave an unknown decision")),
    };
    tools.get(&id).cloned().ok_or_else(|| {
        binding_error(format!(
            "tools.bind(\"{alias}\"): the picker chose {id}, which this process cannot provide"
        ))
    })
}

/// The JSON Schema of an `add_local` params table: every parameter required.
pub(crate) fn local_schema(params: &[(String, ParamKind, Option<String>)]) -> Json {
    let mut properties = serde_json::Map::new();
    for (name, kind, description) in params {
        let mut property = serde_json::Map::new();
        property.insert("type".into(), json!(kind.as_str()));
        if let Some(description) = description {
            property.insert("description".into(), json!(description));
        }
        properties.insert(name.clone(), Json::Object(property));
    }
    let required: Vec<&String> = params.iter().map(|(name, _, _)| name).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_have_one_shape() {
        for ok in ["a", "search", "web-search_2", &"x".repeat(64)] {
            assert!(check_alias(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1x", "_x", "a b", "a.b", &"x".repeat(65), "é"] {
            assert!(check_alias(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn opts_filter_the_catalog() {
        let model = ModelDescriptor::new("m", "d")
            .with_context(8192)
            .with_max_output(1024)
            .with_thinking(Thinking::Switchable);
        assert!(ModelOpts::default().admits(&model));
        assert!(
            ModelOpts {
                context: Some(8192),
                ..Default::default()
            }
            .admits(&model)
        );
        assert!(
            !ModelOpts {
                context: Some(8193),
                ..Default::default()
            }
            .admits(&model)
        );
        assert!(
            !ModelOpts {
                max_tokens: Some(2048),
                ..Default::default()
            }
            .admits(&model)
        );
        assert!(
            ModelOpts {
                thinking: Some(true),
                ..Default::default()
            }
            .admits(&model)
        );
        let never = ModelDescriptor::new("n", "d");
        assert!(
            !ModelOpts {
                thinking: Some(true),
                ..Default::default()
            }
            .admits(&never)
        );
        assert!(
            !ModelOpts {
                context: Some(1),
                ..Default::default()
            }
            .admits(&never)
        );
        let embed = ModelDescriptor::new("e", "d").with_kind(ModelKind::Embedding);
        assert!(!ModelOpts::default().admits(&embed));
    }

    #[test]
    fn local_schemas_require_every_parameter() {
        let schema = local_schema(&[
            ("name".into(), ParamKind::String, Some("Heading".into())),
            ("count".into(), ParamKind::Integer, None),
        ]);
        assert_eq!(schema["required"], json!(["name", "count"]));
        assert_eq!(schema["properties"]["name"]["description"], "Heading");
        assert_eq!(schema["properties"]["count"], json!({"type": "integer"}));
    }
}
