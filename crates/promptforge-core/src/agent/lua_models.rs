//! The `models` table: `bind`, `default`, `use`, `get`, `infer`, and model handles.

use std::sync::Arc;

use mlua::{Function, Lua, Table, Value};

use super::Host;
use super::bindings::{Declaration, ModelBinding, ModelOpts, binding_error, check_alias};
use crate::client::Thinking;
use crate::error::RunError;
use crate::sandbox::HELPERS_KEY;
use crate::sandbox::values::raise;

/// Builds the frozen Lua handle of a declared model (see the prelude's `model_handle`).
pub(crate) fn handle(lua: &Lua, binding: &ModelBinding) -> mlua::Result<Table> {
    let data = lua.create_table()?;
    data.set("name", binding.alias.as_str())?;
    data.set("model_id", binding.model_id.as_str())?;
    data.set("description", binding.description.as_str())?;
    data.set("context", binding.context)?;
    data.set(
        "thinking",
        binding
            .thinking_request
            .unwrap_or(binding.thinking == Thinking::Always),
    )?;
    data.set("temperature", binding.temperature)?;
    data.set("max_tokens", binding.max_tokens)?;
    let helpers: Table = lua.named_registry_value(HELPERS_KEY)?;
    helpers.get::<Function>("model_handle")?.call(data)
}

/// Reads and checks a `models.bind` opts table.
pub(super) fn opts(value: Value) -> Result<ModelOpts, RunError> {
    let mut opts = ModelOpts::default();
    let table = match value {
        Value::Nil => return Ok(opts),
        Value::Table(table) => table,
        other => {
            return Err(binding_error(format!(
                "model opts must be a table, not a {}",
                other.type_name()
            )));
        }
    };
    for pair in table.pairs::<String, Value>() {
        let (key, value) = pair.map_err(|e| binding_error(format!("model opts: {e}")))?;
        let bad = |what: &str| binding_error(format!("model opt `{key}` must be {what}"));
        match (key.as_str(), value) {
            ("thinking", Value::Boolean(flag)) => opts.thinking = Some(flag),
            ("thinking", _) => return Err(bad("a boolean")),
            ("context", Value::Integer(n)) if n > 0 => opts.context = u64::try_from(n).ok(),
            ("context", _) => return Err(bad("a positive integer")),
            ("max_tokens", Value::Integer(n)) if n > 0 => opts.max_tokens = u64::try_from(n).ok(),
            ("max_tokens", _) => return Err(bad("a positive integer")),
            ("temperature", Value::Integer(n)) if (0..=2).contains(&n) => {
                opts.temperature = Some(n as f64);
            }
            ("temperature", Value::Number(t)) if (0.0..=2.0).contains(&t) => {
                opts.temperature = Some(t);
            }
            ("temperature", _) => return Err(bad("a number from 0.0 to 2.0")),
            (other, _) => {
                return Err(binding_error(format!(
                    "unknown model opt `{other}`; the opts are thinking, context, temperature and max_tokens"
                )));
            }
        }
    }
    Ok(opts)
}

/// Resolves and records a declaration; nothing changes when any step fails.
fn declare<H: Host>(
    host: &H,
    alias: &str,
    description: &str,
    raw_opts: Value,
    declaration: Declaration,
) -> Result<Arc<ModelBinding>, RunError> {
    check_alias(alias)?;
    let opts = opts(raw_opts)?;
    {
        let bindings = host.agent().bindings();
        bindings.check_free(alias)?;
        if declaration == Declaration::Default
            && let Some(existing) = &bindings.default_model
        {
            return Err(binding_error(format!(
                "models.default was already called (the default is `{existing}`)"
            )));
        }
    }
    let binding = Arc::new(host.agent().resolver.resolve(
        declaration,
        alias,
        description,
        &opts,
    )?);
    let mut bindings = host.agent().bindings();
    // Re-check under the lock: a concurrent arm may have declared meanwhile.
    bindings.check_free(alias)?;
    if declaration == Declaration::Default && bindings.default_model.is_some() {
        return Err(binding_error("models.default was already called"));
    }
    bindings
        .models
        .insert(alias.to_owned(), Arc::clone(&binding));
    if declaration == Declaration::Default {
        bindings.default_model = Some(alias.to_owned());
    }
    Ok(binding)
}

pub(crate) fn install<H: Host>(lua: &Lua, host: &Arc<H>) -> mlua::Result<Table> {
    let models = lua.create_table()?;

    let u = Arc::clone(host);
    models.set(
        "bind",
        lua.create_function(
            move |lua, (alias, description, raw): (String, String, Value)| {
                let binding = declare(&*u, &alias, &description, raw, Declaration::Bind)
                    .map_err(|e| raise(lua, e))?;
                handle(lua, &binding)
            },
        )?,
    )?;

    let u = Arc::clone(host);
    models.set(
        "default",
        lua.create_function(
            move |lua, (alias, description, raw): (String, Option<String>, Value)| {
                let binding = match description {
                    Some(description) => declare(&*u, &alias, &description, raw, Declaration::Default),
                    None => {
                        let mut bindings = u.agent().bindings();
                        bindings.model(&alias).and_then(|binding| {
                            if let Some(existing) = &bindings.default_model {
                                return Err(binding_error(format!(
                                    "models.default was already called (the default is `{existing}`)"
                                )));
                            }
                            bindings.default_model = Some(alias.clone());
                            Ok(binding)
                        })
                    }
                }
                .map_err(|e| raise(lua, e))?;
                handle(lua, &binding)
            },
        )?,
    )?;

    let u = Arc::clone(host);
    models.set(
        "use",
        lua.create_function(move |lua, alias: String| {
            let binding = u.agent().bindings().model(&alias).map_err(|e| raise(lua, e))?;
            let mut scope = u.scope();
            if let Some(previous) = &scope.model_use {
                let error = binding_error(format!(
                    "models.use may be called once per section (this section already uses `{previous}`)"
                ));
                drop(scope);
                return Err(raise(lua, error));
            }
            scope.model_use = Some(alias);
            drop(scope);
            handle(lua, &binding)
        })?,
    )?;

    let u = Arc::clone(host);
    models.set(
        "get",
        lua.create_function(move |lua, alias: String| {
            let binding = u
                .agent()
                .bindings()
                .model(&alias)
                .map_err(|e| raise(lua, e))?;
            handle(lua, &binding)
        })?,
    )?;

    Ok(models)
}

/// The section's current model for `models.infer`: its `models.use` selection, else the
/// `models.default` baseline.
pub(crate) fn section_model<H: Host>(host: &H) -> Result<Arc<ModelBinding>, RunError> {
    let selected = host.scope().model_use.clone();
    let bindings = host.agent().bindings();
    selected
        .or_else(|| bindings.default_model.clone())
        .ok_or_else(|| {
            binding_error(
                "models.infer needs a model: call models.use(alias) in this section or \
                 models.default(...) in the H1",
            )
        })
        .and_then(|alias| bindings.model(&alias))
}
