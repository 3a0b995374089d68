//! The sandboxed Lua VM of one execution unit.
//!
//! Only the `string`, `table` and `math` libraries are opened; the base library's loaders
//! and raw accessors are removed, `string.dump` too. A global hook counts instructions (the
//! budget is per block) and checks cancellation; a memory ceiling turns allocation bombs
//! into clean errors.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use mlua::chunk::ChunkMode;
use mlua::{HookTriggers, Lua, LuaOptions, LuaSerdeExt, StdLib, Table, Value, VmState};
use serde_json::Value as Json;

use super::unit::Unit;
use super::{Target, WalkState, api};
use crate::agent::TurnVm;
use crate::error::{RunError, RunErrorKind};
use crate::prompt::LuaChunk;
use crate::sandbox::values::{self, from_lua_error};
use crate::sandbox::{HELPERS_KEY, SYS_KEY, VAR_KEY};

/// How often (in VM instructions) the hook runs.
const HOOK_STEP: u32 = 1000;

/// Globals the sandbox removes from the base library.
const REMOVED_GLOBALS: [&str; 9] = [
    "coroutine",
    "load",
    "loadfile",
    "dofile",
    "require",
    "print",
    "rawget",
    "rawset",
    "collectgarbage",
];

/// How a Lua block ended.
pub(crate) enum ChunkEnd {
    /// It returned; `None` for no value or `nil`.
    Value(Option<String>),
    /// It called `jump`.
    Jump(Target),
}

pub(crate) struct Vm {
    lua: Lua,
    /// The unit the VM belongs to (local tool handlers run under its budgets).
    unit: Arc<Unit>,
}

impl Vm {
    /// A fresh VM with the unit's environment installed.
    pub(crate) fn new(unit: &Arc<Unit>, state: &WalkState) -> Result<Self, RunError> {
        let lua = sandbox(unit).map_err(|e| from_lua_error(&e))?;
        install(&lua, unit, state).map_err(|e| from_lua_error(&e))?;
        Ok(Self {
            lua,
            unit: Arc::clone(unit),
        })
    }

    pub(crate) fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Runs one compiled block to its end, a `jump`, an error or cancellation.
    pub(crate) async fn call_chunk(
        &self,
        unit: &Arc<Unit>,
        chunk: &LuaChunk,
    ) -> Result<ChunkEnd, RunError> {
        let function = self
            .lua
            .load(&unit.run.prompt.data.chunks[chunk.index][..])
            .set_mode(ChunkMode::Binary)
            .into_function()
            .map_err(|e| from_lua_error(&e))?;
        unit.check_alive()?;
        unit.start_block();
        let mut call = pin!(function.call_async::<mlua::MultiValue>(()));
        let finished = poll_fn(|cx| match call.as_mut().poll(cx) {
            Poll::Ready(result) => Poll::Ready(Some(result)),
            Poll::Pending if unit.jump_pending() => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        });
        let outcome = tokio::select! {
            outcome = finished => outcome,
            () = unit.cancel.cancelled() => return Err(unit.kill(RunError::cancelled())),
        };
        // A dead unit's block failed, whatever the Lua code made of its error.
        if let Some(reason) = unit.dead() {
            return Err(reason);
        }
        match outcome {
            None => match unit.take_jump() {
                Some(target) => Ok(ChunkEnd::Jump(target)),
                None => Err(RunError::new(
                    RunErrorKind::Control,
                    "internal: lost jump target",
                )),
            },
            Some(Ok(values)) => {
                let first = values.into_iter().next().unwrap_or(Value::Nil);
                Ok(ChunkEnd::Value(values::result_string(&self.lua, first)?))
            }
            Some(Err(error)) => Err(unit.lua_error(&error)),
        }
    }

    /// Installs declared tool and model aliases as bare globals.
    pub(crate) fn install_aliases(&self, unit: &Arc<Unit>) -> Result<(), RunError> {
        crate::agent::install_aliases(&self.lua, &**unit).map_err(|e| from_lua_error(&e))
    }

    /// Sets the `reply` global after a model turn.
    pub(crate) fn set_reply(&self, reply: &str) -> Result<(), RunError> {
        self.lua
            .globals()
            .set("reply", reply)
            .map_err(|e| from_lua_error(&e))
    }

    /// Copies `reply` and `var` back into the walk state.
    pub(crate) fn save(&self, state: &mut WalkState) -> Result<(), RunError> {
        state.reply = match self.lua.globals().get::<Value>("reply") {
            Ok(Value::Nil) => None,
            Ok(value) => values::result_string(&self.lua, value)?,
            Err(error) => return Err(from_lua_error(&error)),
        };
        state.var = self.var_snapshot()?;
        Ok(())
    }

    /// The current contents of `var` as JSON.
    pub(crate) fn var_snapshot(&self) -> Result<serde_json::Map<String, Json>, RunError> {
        var_snapshot(&self.lua)
    }
}

pub(crate) fn var_snapshot(lua: &Lua) -> Result<serde_json::Map<String, Json>, RunError> {
    let data: Table = lua
        .named_registry_value(VAR_KEY)
        .map_err(|e| from_lua_error(&e))?;
    match values::to_json(lua, Value::Table(data), "var")? {
        Json::Object(map) => Ok(map),
        // An empty Lua table may read as an empty array.
        Json::Array(items) if items.is_empty() => Ok(serde_json::Map::new()),
        _ => Err(RunError::new(
            RunErrorKind::Lua,
            "var must hold named fields (var.name = value), not a list",
        )),
    }
}

fn sandbox(unit: &Arc<Unit>) -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::STRING | StdLib::TABLE | StdLib::MATH,
        LuaOptions::new(),
    )?;
    lua.set_memory_limit(unit.run.limits.lua_memory_bytes.get())?;
    lua.set_app_data(values::Origin(unit.run.prompt.origin().to_owned()));
    let hook_unit = Arc::clone(unit);
    // Every tick charges the budget and re-raises a death: once a unit is over budget or
    // cancelled, nothing it runs afterwards gets further than the next tick.
    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(HOOK_STEP),
        move |_, _| {
            hook_unit
                .charge(u64::from(HOOK_STEP))
                .map_err(mlua::Error::external)?;
            Ok(VmState::Continue)
        },
    )?;
    Ok(lua)
}

fn install(lua: &Lua, unit: &Arc<Unit>, state: &WalkState) -> mlua::Result<()> {
    // The prelude's sandbox services, behind one host function (VM setup stays cheap):
    // `alive` re-raises a death, `charge` meters library loops, `clean` turns a host error
    // into its message, `note` records where `error()` got a non-string value.
    let sys_unit = Arc::clone(unit);
    let sys = lua.create_function(move |lua, (op, a, b): (String, Value, Value)| {
        let unit = &sys_unit;
        match op.as_str() {
            "alive" => unit
                .check_alive()
                .map_err(mlua::Error::external)
                .map(|()| Value::Nil),
            "charge" => {
                let steps = match a {
                    Value::Integer(i) => u64::try_from(i).unwrap_or(0),
                    // Saturating: a huge or infinite count is simply over any budget.
                    Value::Number(n) if n.is_nan() || n < 1.0 => 0,
                    Value::Number(n) if n >= 1.8e19 => u64::MAX,
                    Value::Number(n) => n as u64,
                    _ => 0,
                };
                unit.charge(steps)
                    .map_err(mlua::Error::external)
                    .map(|()| Value::Nil)
            }
            "clean" => match a {
                Value::Error(error) => {
                    let text = values::cap_message(&unit.lua_error(&error).to_string());
                    lua.create_string(text).map(Value::String)
                }
                other => Ok(other),
            },
            "note" => {
                let text = |v: &Value| {
                    v.as_string()
                        .map(|s| s.to_string_lossy())
                        .unwrap_or_default()
                };
                unit.note_error(text(&a), text(&b), values::prompt_location(lua));
                Ok(Value::Nil)
            }
            other => Err(mlua::Error::runtime(format!(
                "internal: unknown sandbox call `{other}`"
            ))),
        }
    })?;
    let helpers: Table = lua
        .load(&unit.run.prompt.data.prelude[..])
        .set_mode(ChunkMode::Binary)
        .call((lua.null(), sys))?;
    lua.set_named_registry_value(HELPERS_KEY, &helpers)?;
    let globals = lua.globals();

    globals.set("args", lua.to_value(&state.args)?)?;
    match &state.reply {
        Some(reply) => globals.set("reply", reply.as_str())?,
        None => globals.set("reply", Value::Nil)?,
    }

    let var_data = lua.to_value(&Json::Object(state.var.clone()))?;
    lua.set_named_registry_value(VAR_KEY, &var_data)?;
    let make_var: mlua::Function = helpers.get("var")?;
    globals.set("var", make_var.call::<Table>(var_data)?)?;

    let sys = lua.create_table()?;
    sys.set("when", unit.run.launched.as_str())?;
    sys.set("now", unit.now.as_str())?;
    sys.set("id", unit.id)?;
    sys.set("section_name", unit.section_name())?;
    sys.set("execution", unit.run.execution.as_str())?;
    sys.set("section_count", unit.entered)?;
    if let Some((item, index)) = &unit.arm {
        sys.set("index", *index)?;
        globals.set("item", lua.to_value(item)?)?;
    }
    lua.set_named_registry_value(SYS_KEY, &sys)?;
    let seal: mlua::Function = helpers.get("sys")?;
    globals.set("sys", seal.call::<Table>((sys, unit.arm.is_some()))?)?;

    api::install(lua, unit)?;
    super::patterns::install(lua, unit)?;
    // Last, because creating async functions makes mlua open the coroutine library.
    for name in REMOVED_GLOBALS {
        globals.raw_remove(name)?;
    }
    globals.get::<Table>("string")?.raw_remove("dump")
}

/// The seam a model turn sees the unit's VM through.
impl TurnVm for Vm {
    fn lua(&self) -> &Lua {
        &self.lua
    }

    fn set_sys_model(&self, model: &str, finish: Option<&str>) -> Result<(), RunError> {
        let sys: Table = self
            .lua
            .named_registry_value(SYS_KEY)
            .map_err(|e| from_lua_error(&e))?;
        sys.raw_set("model", model)
            .map_err(|e| from_lua_error(&e))?;
        sys.raw_set("reply_finish_reason", finish)
            .map_err(|e| from_lua_error(&e))
    }

    async fn run_handler(
        &self,
        alias: &str,
        handler: mlua::Function,
        args: Json,
    ) -> Result<Result<String, RunError>, RunError> {
        let unit = &self.unit;
        let handled = self.call_handler(alias, handler, args).await;
        match handled {
            // A handler that ran out of its budget (or was cancelled) killed the unit.
            Err(error) if error.is_cancelled() || unit.dead().is_some() => Err(error),
            handled => Ok(handled),
        }
    }
}

impl Vm {
    /// Runs a local tool handler with the model's checked arguments; `jump` is disabled.
    async fn call_handler(
        &self,
        alias: &str,
        handler: mlua::Function,
        args: Json,
    ) -> Result<String, RunError> {
        let unit = &self.unit;
        let args = self.lua.to_value(&args).map_err(|e| from_lua_error(&e))?;
        unit.check_alive()?;
        unit.set_phase(super::unit::Phase::ToolHandler);
        unit.start_block();
        let result = tokio::select! {
            result = handler.call_async::<Value>(args) => result,
            () = unit.cancel.cancelled() => {
                unit.set_phase(super::unit::Phase::Body);
                return Err(unit.kill(RunError::cancelled()));
            }
        };
        unit.set_phase(super::unit::Phase::Body);
        if let Some(reason) = unit.dead() {
            return Err(reason);
        }
        match result.map_err(|e| unit.lua_error(&e))? {
            Value::String(text) => Ok(text.to_string_lossy()),
            value @ (Value::Integer(_) | Value::Number(_)) => {
                values::scalar_or_json(&self.lua, value, "the handler's result")
            }
            other => Err(RunError::new(
                RunErrorKind::Lua,
                format!(
                    "the local tool `{alias}` returned a {}; handlers return a string",
                    other.type_name()
                ),
            )),
        }
    }
}
