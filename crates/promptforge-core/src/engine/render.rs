//! Rendering prose templates against a unit's VM.

use mlua::{Lua, Table, Value};

use super::unit::Unit;
use crate::error::{RunError, RunErrorKind};
use crate::parse::template::Segment;
use crate::prompt::Prose;
use crate::sandbox::values::{from_lua_error, scalar_or_json};
use crate::sandbox::{SYS_KEY, VAR_KEY};

/// Substitutes every placeholder of a prose block.
pub(crate) fn render(lua: &Lua, unit: &Unit, prose: &Prose) -> Result<String, RunError> {
    let mut out = String::new();
    for segment in &prose.template.segments {
        match segment {
            Segment::Text(text) => out.push_str(text),
            Segment::Placeholder { path, raw } => {
                let value = lookup(lua, path).map_err(|e| from_lua_error(&e))?;
                let fail = |why: String| {
                    RunError::new(
                        RunErrorKind::Template,
                        format!(
                            "{}:{}: placeholder `{{{{ {raw} }}}}`: {why}",
                            unit.run.prompt.origin(),
                            prose.line
                        ),
                    )
                };
                match value {
                    Lookup::Found(Value::Nil) | Lookup::Missing(_) => {
                        let missing = match &value {
                            Lookup::Missing(prefix) => prefix.clone(),
                            Lookup::Found(_) => raw.clone(),
                        };
                        return Err(fail(format!("`{missing}` is not defined")));
                    }
                    Lookup::Found(found) => {
                        let text = scalar_or_json(lua, found, &format!("`{raw}`"))
                            .map_err(|e| fail(e.message().to_owned()))?;
                        out.push_str(&text);
                    }
                }
            }
        }
    }
    Ok(out)
}

enum Lookup {
    Found(Value),
    /// The dotted prefix that is not a table.
    Missing(String),
}

fn lookup(lua: &Lua, path: &[String]) -> mlua::Result<Lookup> {
    let Some(first) = path.first() else {
        return Ok(Lookup::Missing(String::new()));
    };
    let mut value: Value = match first.as_str() {
        "var" => Value::Table(lua.named_registry_value::<Table>(VAR_KEY)?),
        "sys" => Value::Table(lua.named_registry_value::<Table>(SYS_KEY)?),
        name => lua.globals().get(name)?,
    };
    for (depth, segment) in path.iter().enumerate().skip(1) {
        let Value::Table(table) = value else {
            return Ok(Lookup::Missing(path[..depth + 1].join(".")));
        };
        value = match segment.parse::<i64>() {
            Ok(index) => table.get(index)?,
            Err(_) => table.get(segment.as_str())?,
        };
    }
    Ok(Lookup::Found(value))
}
