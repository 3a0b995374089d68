//! Conversions between Lua values, JSON, result text and errors.

use mlua::{Lua, LuaSerdeExt, Value};
use serde_json::Value as Json;

use crate::error::{RunError, RunErrorKind};

/// Renders a returned (or `reply`) value as text: scalars naturally, tables as compact JSON.
/// `nil` is `None`; functions and other host values are errors.
pub(crate) fn result_string(lua: &Lua, value: Value) -> Result<Option<String>, RunError> {
    match value {
        Value::Nil => Ok(None),
        other => scalar_or_json(lua, other, "the returned value").map(Some),
    }
}

/// Renders a non-nil value as text for results and templates.
pub(crate) fn scalar_or_json(lua: &Lua, value: Value, what: &str) -> Result<String, RunError> {
    match value {
        Value::String(text) => Ok(text.to_string_lossy()),
        Value::Boolean(flag) => Ok(flag.to_string()),
        Value::Integer(_) | Value::Number(_) => lua
            .coerce_string(value)
            .map_err(|e| from_lua_error(&e))?
            .map(|s| s.to_string_lossy())
            .ok_or_else(|| RunError::new(RunErrorKind::Lua, "a number could not be rendered")),
        Value::Table(_) => Ok(to_json(lua, value, what)?.to_string()),
        Value::LightUserData(_) => Ok("null".to_owned()),
        other => Err(RunError::new(
            RunErrorKind::Lua,
            format!("{what} is a {}, which has no text form", other.type_name()),
        )),
    }
}

/// Converts a Lua value to JSON; `what` names it in the error.
pub(crate) fn to_json(lua: &Lua, value: Value, what: &str) -> Result<Json, RunError> {
    lua.from_value::<Json>(value).map_err(|error| {
        RunError::new(
            RunErrorKind::Lua,
            format!(
                "{what} is not JSON data ({}); it may hold only strings, numbers, booleans \
                 and tables of them",
                lua_message(&error)
            ),
        )
    })
}

/// Turns an error that crossed Lua back into a [`RunError`], keeping the original kind of
/// errors raised by the host (store, control, limits, cancellation).
pub(crate) fn from_lua_error(error: &mlua::Error) -> RunError {
    if let Some(run_error) = host_error(error) {
        return run_error;
    }
    match innermost(error) {
        mlua::Error::MemoryError(_) => RunError::new(
            RunErrorKind::Memory,
            "a Lua VM ran out of memory: it reached its memory ceiling \
             (RunLimits::lua_memory_bytes)",
        ),
        other => RunError::new(RunErrorKind::Lua, lua_message(other)),
    }
}

fn host_error(error: &mlua::Error) -> Option<RunError> {
    match error {
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<RunError>().cloned(),
        mlua::Error::CallbackError { cause, .. } => host_error(cause),
        mlua::Error::WithContext { cause, .. } => host_error(cause),
        _ => None,
    }
}

fn innermost(error: &mlua::Error) -> &mlua::Error {
    match error {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            innermost(cause)
        }
        other => other,
    }
}

/// The message of a Lua error without mlua's traceback decoration.
pub(crate) fn lua_message(error: &mlua::Error) -> String {
    match innermost(error) {
        mlua::Error::RuntimeError(message) | mlua::Error::SyntaxError { message, .. } => {
            strip_traceback(message).to_owned()
        }
        mlua::Error::ExternalError(inner) => inner.to_string(),
        mlua::Error::MemoryError(_) => "out of memory".to_owned(),
        other => other.to_string(),
    }
}

/// The prompt's chunk name, stored as app data so raised errors can find the prompt's frame.
pub(crate) struct Origin(pub(crate) String);

/// A host error raised into Lua, prefixed with `file:line:` of the innermost frame of the
/// prompt's own code (skipping the prelude and mlua's async wrappers).
pub(crate) fn raise(lua: &Lua, error: RunError) -> mlua::Error {
    let origin = lua.app_data_ref::<Origin>().map(|o| o.0.clone());
    let location = origin.and_then(|origin| {
        (1..24).find_map(|level| {
            lua.inspect_stack(level, |debug| {
                let source = debug.source();
                let file = source.short_src?;
                (file == origin.as_str()).then(|| debug.current_line())?
            })
            .flatten()
            .map(|line| format!("{origin}:{line}: "))
        })
    });
    match location {
        Some(prefix) => mlua::Error::external(error.with_location(&prefix)),
        None => mlua::Error::external(error),
    }
}
/// Lua appends `stack traceback:` lines to some messages; users need only the first part.
fn strip_traceback(message: &str) -> &str {
    message
        .split_once("\nstack traceback:")
        .map_or(message, |(head, _)| head)
        .trim_end()
}
