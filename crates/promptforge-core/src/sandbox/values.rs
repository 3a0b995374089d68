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
        if lua_message(&error).contains("recursion limit") {
            return RunError::new(
                RunErrorKind::Lua,
                format!("{what} nests tables too deeply to be JSON data (at most 100 levels)"),
            );
        }
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
        other => RunError::new(RunErrorKind::Lua, cap_message(&lua_message(other))),
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

/// The `file:line: ` of the innermost frame of the prompt's own code on the current Lua
/// stack (skipping the prelude and mlua's async wrappers), if there is one.
pub(crate) fn prompt_location(lua: &Lua) -> Option<String> {
    let origin = lua.app_data_ref::<Origin>().map(|o| o.0.clone())?;
    prompt_line(lua).map(|line| format!("{origin}:{line}: "))
}

/// The line of the innermost frame of the prompt's own code (skipping the prelude and
/// mlua's async wrappers).
pub(crate) fn prompt_line(lua: &Lua) -> Option<usize> {
    let origin = lua.app_data_ref::<Origin>().map(|o| o.0.clone())?;
    (1..24).find_map(|level| {
        lua.inspect_stack(level, |debug| {
            let source = debug.source();
            let file = source.short_src?;
            (file == origin.as_str()).then(|| debug.current_line())?
        })
        .flatten()
    })
}

/// A host error raised into Lua, prefixed with `file:line:` of the innermost frame of the
/// prompt's own code (skipping the prelude and mlua's async wrappers).
pub(crate) fn raise(lua: &Lua, error: RunError) -> mlua::Error {
    match prompt_location(lua) {
        Some(prefix) if !error.message().starts_with(&prefix) => {
            mlua::Error::external(error.with_location(&prefix))
        }
        _ => mlua::Error::external(error),
    }
}

/// Gives an error that reached the host without a `file:line:` the location (and, for an
/// argument conversion error, the function) from the Lua traceback mlua recorded.
pub(crate) fn locate(error: &mlua::Error, converted: RunError, origin: &str) -> RunError {
    let prefix = format!("{origin}:");
    if converted.message().starts_with(&prefix) {
        return converted;
    }
    let Some(traceback) = outer_traceback(error) else {
        return converted;
    };
    let mut function = None;
    let mut location = None;
    for line in traceback.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix(&prefix) {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() {
                location = Some(format!("{origin}:{digits}: "));
                break;
            }
        }
        if function.is_none()
            && let Some(rest) = line.strip_prefix("[C]: in ")
            && let Some((_, name)) = rest.split_once('\'')
        {
            function = name.strip_suffix('\'').map(|name| {
                // Lua names a table's function by its field only; the store's are unambiguous.
                const STORE: [&str; 8] = [
                    "write",
                    "append",
                    "read",
                    "read_numbered",
                    "str_replace",
                    "glob",
                    "exists",
                    "delete",
                ];
                if rest.starts_with("field") && STORE.contains(&name) {
                    format!("store.{name}")
                } else {
                    name.to_owned()
                }
            });
        }
    }
    let Some(location) = location else {
        return converted;
    };
    let message = match (innermost(error), function) {
        (mlua::Error::BadArgument { pos, cause, .. }, Some(function)) => format!(
            "bad argument #{pos} to '{function}': {}",
            cap_message(&lua_message(cause))
        ),
        _ => converted.message().to_owned(),
    };
    let mut located = RunError::new(converted.kind(), message).with_location(&location);
    if let Some(section) = converted.section() {
        located = located.in_section(section);
    }
    located
}

fn outer_traceback(error: &mlua::Error) -> Option<&str> {
    match error {
        mlua::Error::CallbackError { traceback, .. } => Some(traceback),
        mlua::Error::WithContext { cause, .. } => outer_traceback(cause),
        _ => None,
    }
}

/// The longest message text a Lua error contributes to a [`RunError`], in bytes.
pub(crate) const MAX_MESSAGE_BYTES: usize = 2048;

/// Caps a message at [`MAX_MESSAGE_BYTES`] (on a character boundary) and escapes control
/// characters other than newline and tab, so an error never floods or corrupts a terminal.
pub(crate) fn cap_message(message: &str) -> String {
    crate::error::quote_text(message, MAX_MESSAGE_BYTES, true)
}

/// Lua appends `stack traceback:` lines to some messages; users need only the first part.
fn strip_traceback(message: &str) -> &str {
    message
        .split_once("\nstack traceback:")
        .map_or(message, |(head, _)| head)
        .trim_end()
}
