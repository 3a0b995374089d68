//! The `tools` table: `bind`, `always`, `add`, `add_local`, `calls`, and tool handles.

use std::sync::Arc;

use mlua::{Function, Lua, LuaSerdeExt, Table, Value};
use serde_json::Value as Json;

use super::Host;
use super::bindings::{
    ToolBinding, binding_error, check_alias, listing, local_schema, resolve_tool,
};
use crate::error::{RunError, RunErrorKind};
use crate::sandbox::HELPERS_KEY;
use crate::sandbox::values::{from_lua_error, raise};

/// The registry table holding local tool handlers by alias.
const LOCAL_HANDLERS_KEY: &str = "promptforge.local_tools";

/// A Lua-backed tool declared with `tools.add_local`.
pub(crate) struct LocalTool {
    pub(crate) alias: String,
    pub(crate) description: String,
    pub(crate) parameters: Json,
    /// `(name, kind)` of every parameter, for argument checks.
    pub(crate) params: Vec<(String, ParamKind)>,
}

/// The JSON type of a local tool's parameter, parsed once at `tools.add_local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ParamKind {
    /// `"string"`.
    String,
    /// `"integer"`: a JSON number without a fraction.
    Integer,
    /// `"number"`.
    Number,
    /// `"boolean"`.
    Boolean,
}

impl ParamKind {
    /// The kind a type name declares, if it is one of the supported four.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name {
            "string" => Some(Self::String),
            "integer" => Some(Self::Integer),
            "number" => Some(Self::Number),
            "boolean" => Some(Self::Boolean),
            _ => None,
        }
    }

    /// The JSON Schema type name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }

    /// Whether a model-supplied argument has this type.
    pub(crate) fn admits(self, value: &Json) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Integer => value.is_i64() || value.is_u64(),
            Self::Number => value.is_number(),
            Self::Boolean => value.is_boolean(),
        }
    }
}

/// The handler `tools.add_local` registered for `alias` in this VM.
pub(crate) fn local_handler(lua: &Lua, alias: &str) -> Result<Function, RunError> {
    let handlers: Table = lua
        .named_registry_value(LOCAL_HANDLERS_KEY)
        .map_err(|e| from_lua_error(&e))?;
    handlers.raw_get(alias).map_err(|e| from_lua_error(&e))
}

/// Checks a local tool call's arguments against its declared parameters: a JSON object
/// with every parameter present and of its declared type.
pub(crate) fn check_local_args(
    params: &[(String, ParamKind)],
    arguments: &str,
) -> Result<Json, RunError> {
    let invalid =
        |why: String| RunError::new(RunErrorKind::Lua, format!("invalid arguments: {why}"));
    let value: Json = serde_json::from_str(if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    })
    .map_err(|e| invalid(format!("not JSON ({e})")))?;
    let Json::Object(map) = &value else {
        return Err(invalid("expected a JSON object".to_owned()));
    };
    for (name, kind) in params {
        let Some(arg) = map.get(name) else {
            return Err(invalid(format!("missing required parameter `{name}`")));
        };
        if !kind.admits(arg) {
            return Err(invalid(format!(
                "parameter `{name}` must be a {}",
                kind.as_str()
            )));
        }
    }
    if let Some(extra) = map
        .keys()
        .find(|k| !params.iter().any(|(name, _)| name == *k))
    {
        return Err(invalid(format!("unknown parameter `{extra}`")));
    }
    Ok(value)
}

/// Builds the frozen Lua handle of a declared tool (see the prelude's `tool_handle`).
pub(crate) fn handle(lua: &Lua, binding: &ToolBinding) -> mlua::Result<Table> {
    let data = lua.create_table()?;
    data.set("name", binding.alias.as_str())?;
    data.set("description", binding.description.as_str())?;
    data.set("parameters", lua.to_value(binding.tool.parameters())?)?;
    data.set("wire_name", binding.tool.wire_name())?;
    data.set("untrusted", binding.tool.untrusted())?;
    let helpers: Table = lua.named_registry_value(HELPERS_KEY)?;
    helpers.get::<Function>("tool_handle")?.call(data)
}

/// An alias named by a string or a handle.
fn alias_of(value: &Value) -> Result<String, RunError> {
    match value {
        Value::String(s) => Ok(s.to_string_lossy()),
        Value::Table(handle) => handle
            .get::<String>("name")
            .map_err(|_| binding_error("expected a tool alias or a tool handle")),
        other => Err(binding_error(format!(
            "expected a tool alias or a tool handle, not a {}",
            other.type_name()
        ))),
    }
}

fn bind<H: Host>(
    host: &H,
    alias: &str,
    description: &str,
    facing: Option<String>,
) -> Result<Arc<ToolBinding>, RunError> {
    check_alias(alias)?;
    host.agent().bindings().check_free(alias)?;
    let tool = resolve_tool(
        host.agent().picker()?,
        &host.agent().tools,
        alias,
        description,
    )?;
    let binding = Arc::new(ToolBinding {
        alias: alias.to_owned(),
        description: facing.unwrap_or_else(|| tool.description().to_owned()),
        tool,
    });
    let mut bindings = host.agent().bindings();
    bindings.check_free(alias)?;
    bindings
        .tools
        .insert(alias.to_owned(), Arc::clone(&binding));
    Ok(binding)
}

fn always<H: Host>(
    host: &H,
    alias: &str,
    facing: Option<String>,
) -> Result<Arc<ToolBinding>, RunError> {
    let mut bindings = host.agent().bindings();
    let mut binding = bindings.tool(alias)?;
    if let Some(description) = facing {
        binding = Arc::new(ToolBinding {
            alias: binding.alias.clone(),
            tool: Arc::clone(&binding.tool),
            description,
        });
        bindings
            .tools
            .insert(alias.to_owned(), Arc::clone(&binding));
    }
    if !bindings.always.iter().any(|a| a == alias) {
        bindings.always.push(alias.to_owned());
    }
    Ok(binding)
}

/// `tools.add`: every entry is checked before any is added; an empty add (`tools.add()`,
/// `tools.add({})`) is a no-op, as the guide says.
fn add<H: Host>(host: &H, target: &Value, facing: Option<String>) -> Result<(), RunError> {
    let aliases: Vec<String> = match target {
        Value::Nil => Vec::new(),
        Value::Table(list) if list.get::<Value>("name").is_ok_and(|n| n.is_nil()) => list
            .sequence_values::<Value>()
            .map(|v| {
                v.map_err(|e| binding_error(e.to_string()))
                    .and_then(|v| alias_of(&v))
            })
            .collect::<Result<_, _>>()?,
        other => vec![alias_of(other)?],
    };
    {
        let bindings = host.agent().bindings();
        for alias in &aliases {
            bindings.tool(alias)?;
        }
    }
    let mut scope = host.scope();
    for alias in aliases {
        scope.added.retain(|(a, _)| *a != alias);
        scope.added.push((alias, facing.clone()));
    }
    Ok(())
}

/// Reads an `add_local` params table into `(name, type, description)`, sorted by name.
fn local_params(params: &Table) -> Result<Vec<(String, ParamKind, Option<String>)>, RunError> {
    let mut out = Vec::new();
    for pair in params.pairs::<Value, Value>() {
        let (key, value) =
            pair.map_err(|e| binding_error(format!("tools.add_local params: {e}")))?;
        let Value::String(name) = key else {
            return Err(binding_error(
                "tools.add_local params: parameter names must be strings",
            ));
        };
        let name = name.to_string_lossy();
        let (kind, description) = match value {
            Value::String(kind) => (kind.to_string_lossy(), None),
            Value::Table(spec) => {
                let kind: Option<String> = spec.raw_get(1).ok();
                let description: Option<String> = spec.raw_get(2).ok();
                match kind {
                    Some(kind) => (kind, description),
                    None => {
                        return Err(binding_error(format!(
                            "tools.add_local parameter `{name}`: write {{\"type\", \"description\"}}"
                        )));
                    }
                }
            }
            other => {
                return Err(binding_error(format!(
                    "tools.add_local parameter `{name}` is a {}; use a type string or {{type, description}}",
                    other.type_name()
                )));
            }
        };
        let Some(kind) = ParamKind::parse(&kind) else {
            return Err(binding_error(format!(
                "tools.add_local parameter `{name}` has the type `{kind}`; supported types are string, integer, number and boolean"
            )));
        };
        out.push((name, kind, description));
    }
    out.sort();
    Ok(out)
}

fn add_local<H: Host>(
    lua: &Lua,
    host: &H,
    alias: &str,
    description: &str,
    params: &Table,
    handler: Function,
) -> Result<(), RunError> {
    if !host.in_section() {
        return Err(binding_error(
            "tools.add_local is available in sections (H2 and below), not in the H1 preamble",
        ));
    }
    check_alias(alias)?;
    if host.agent().bindings().tools.contains_key(alias)
        || host.agent().bindings().models.contains_key(alias)
    {
        return Err(binding_error(format!(
            "tools.add_local(\"{alias}\"): the alias is already declared by tools.bind, tools.always or models"
        )));
    }
    if host.scope().locals.iter().any(|l| l.alias == alias) {
        return Err(binding_error(format!(
            "tools.add_local(\"{alias}\"): this section already declares a local tool with that alias"
        )));
    }
    let params = local_params(params)?;
    let handlers: Table = lua
        .named_registry_value(LOCAL_HANDLERS_KEY)
        .map_err(|e| binding_error(e.to_string()))?;
    handlers
        .raw_set(alias, handler)
        .map_err(|e| binding_error(e.to_string()))?;
    host.scope().locals.push(LocalTool {
        alias: alias.to_owned(),
        description: description.to_owned(),
        parameters: local_schema(&params),
        params: params
            .into_iter()
            .map(|(name, kind, _)| (name, kind))
            .collect(),
    });
    Ok(())
}

/// The count for `alias`, or an error listing the aliases that have counts.
fn calls<H: Host>(host: &H, alias: &str) -> Result<u32, RunError> {
    let scope = host.scope();
    let bindings = host.agent().bindings();
    let known = bindings.tools.contains_key(alias) || scope.locals.iter().any(|l| l.alias == alias);
    if known {
        return Ok(scope.calls.get(alias).copied().unwrap_or(0));
    }
    let mut available: Vec<&str> = bindings.tools.keys().map(String::as_str).collect();
    available.extend(scope.locals.iter().map(|l| l.alias.as_str()));
    Err(binding_error(format!(
        "tools.calls.{alias}: no tool is declared as `{alias}`; available tools: {}",
        listing(&available)
    )))
}

pub(crate) fn install<H: Host>(lua: &Lua, host: &Arc<H>) -> mlua::Result<Table> {
    lua.set_named_registry_value(LOCAL_HANDLERS_KEY, lua.create_table()?)?;
    let tools = lua.create_table()?;

    let u = Arc::clone(host);
    tools.set(
        "bind",
        lua.create_function(
            move |lua, (alias, description, facing): (String, String, Option<String>)| {
                let binding = bind(&*u, &alias, &description, facing).map_err(|e| raise(lua, e))?;
                handle(lua, &binding)
            },
        )?,
    )?;

    let u = Arc::clone(host);
    tools.set(
        "always",
        lua.create_function(move |lua, (target, facing): (Value, Option<String>)| {
            let binding = alias_of(&target)
                .and_then(|alias| always(&*u, &alias, facing))
                .map_err(|e| raise(lua, e))?;
            handle(lua, &binding)
        })?,
    )?;

    let u = Arc::clone(host);
    tools.set(
        "add",
        lua.create_function(move |lua, (target, facing): (Value, Option<String>)| {
            add(&*u, &target, facing).map_err(|e| raise(lua, e))
        })?,
    )?;

    let u = Arc::clone(host);
    tools.set(
        "add_local",
        lua.create_function(
            move |lua, (alias, description, params, handler): (String, String, Table, Function)| {
                add_local(lua, &*u, &alias, &description, &params, handler)
                    .map_err(|e| raise(lua, e))
            },
        )?,
    )?;

    let counts = lua.create_table()?;
    let meta = lua.create_table()?;
    let u = Arc::clone(host);
    meta.set(
        "__index",
        lua.create_function(move |lua, (_, alias): (Table, String)| {
            calls(&*u, &alias).map_err(|e| raise(lua, e))
        })?,
    )?;
    meta.set(
        "__newindex",
        lua.create_function(
            |lua, (_, _, _): (Table, Value, Value)| -> mlua::Result<()> {
                Err(raise(lua, binding_error("tools.calls is read-only")))
            },
        )?,
    )?;
    counts.set_metatable(Some(meta))?;
    tools.set("calls", counts)?;
    Ok(tools)
}

/// Installs declared aliases as bare globals (after the shared library replay).
pub(crate) fn install_aliases<H: Host>(lua: &Lua, host: &H) -> mlua::Result<()> {
    let globals = lua.globals();
    let (tools, models): (Vec<_>, Vec<_>) = {
        let bindings = host.agent().bindings();
        (
            bindings.tools.values().cloned().collect(),
            bindings.models.values().cloned().collect(),
        )
    };
    for binding in tools {
        let alias = binding.alias.clone();
        globals.set(alias, handle(lua, &binding)?)?;
    }
    for binding in models {
        let alias = binding.alias.clone();
        globals.set(alias, super::lua_models::handle(lua, &binding)?)?;
    }
    Ok(())
}
