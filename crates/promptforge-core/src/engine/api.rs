//! The host functions a unit's Lua sees: `store.*`, `log`, `untrusted`, `jump`, `execute`,
//! `fanout` and `list_from_section`.

use std::sync::Arc;

use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use super::unit::{Phase, Unit};
use super::{Entry, Target, WalkEnd, WalkState, deeper, fanout, vm, walk};
use crate::agent::InferCall;
use crate::error::{RunError, RunErrorKind};
use crate::observe::Observation;
use crate::sandbox::HELPERS_KEY;
use crate::sandbox::values::{raise, to_json};

/// The longest `log()` message, in Unicode scalar values.
const MAX_LOG_CHARS: usize = 256;

pub(crate) fn install(lua: &Lua, unit: &Arc<Unit>) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.set("store", store_table(lua, unit)?)?;
    let (models, tools) = crate::agent::install(lua, unit)?;
    globals.set("models", models)?;
    globals.set("tools", tools)?;

    let log_unit = Arc::clone(unit);
    globals.set(
        "log",
        lua.create_function(move |lua, message: String| {
            check_log(&message).map_err(|e| raise(lua, e))?;
            if log_unit.run.take_log_slot() {
                log_unit.run.observe(
                    &log_unit.heading,
                    Observation::LuaLog {
                        id: log_unit.id,
                        message: &message,
                    },
                );
            }
            Ok(())
        })?,
    )?;

    let nonce = unit.run.nonce.clone();
    globals.set(
        "untrusted",
        lua.create_function(move |_, text: String| Ok(crate::envelope::wrap(&text, &nonce)))?,
    )?;

    // `jump`, `execute`, `fanout` and the infer forms are prelude closures over this one
    // async host function (each async function costs mlua a chunk compile per VM).
    let host_unit = Arc::clone(unit);
    let host = lua.create_async_function(move |lua, (op, a, b): (String, Value, Value)| {
        let unit = Arc::clone(&host_unit);
        let call = HostCall::prepare(&lua, &unit, &op, a, b).map_err(|e| raise(&lua, e));
        async move { call?.run(&lua, &unit).await }
    })?;
    let helpers: Table = lua.named_registry_value(HELPERS_KEY)?;
    helpers
        .get::<mlua::Function>("bind_host")?
        .call::<()>((host, globals.get::<Table>("models")?))?;

    let list_unit = Arc::clone(unit);
    globals.set(
        "list_from_section",
        lua.create_function(move |lua, address: String| {
            let data = &list_unit.run.prompt.data;
            let target = list_unit.resolve(&address).map_err(|e| raise(lua, e))?;
            let items = &data.sections[target.section()].items;
            if items.is_empty() {
                return Err(raise(
                    lua,
                    RunError::new(
                        RunErrorKind::Control,
                        format!(
                            "section `{address}` has no list items (bullets or numbered lines)"
                        ),
                    ),
                ));
            }
            lua.create_sequence_from(items.iter().map(String::as_str))
        })?,
    )?;
    Ok(())
}

/// One call of the async host function, validated before it runs.
enum HostCall {
    Jump(Target),
    Execute(Target, WalkState, u32),
    Fanout(fanout::Plan),
    Infer(InferCall),
}

impl HostCall {
    fn prepare(
        lua: &Lua,
        unit: &Arc<Unit>,
        op: &str,
        a: Value,
        b: Value,
    ) -> Result<Self, RunError> {
        match op {
            "jump" => {
                let address = text(a, "jump's target")?;
                match unit.phase() {
                    Phase::SharedLoad => Err(RunError::new(
                        RunErrorKind::Control,
                        "jump is not available during shared library load",
                    )),
                    Phase::ToolHandler => Err(RunError::new(
                        RunErrorKind::Control,
                        "jump is not available inside a local tool handler",
                    )),
                    Phase::Body => Ok(Self::Jump(unit.resolve(&address)?)),
                }
            }
            "execute" => {
                let (target, state, depth) =
                    prepare_execute(lua, unit, &text(a, "execute's target")?, b)?;
                Ok(Self::Execute(target, state, depth))
            }
            "fanout" => Ok(Self::Fanout(fanout::prepare(
                lua,
                unit,
                &text(a, "fanout's worker")?,
                b,
            )?)),
            "infer" => {
                let prompt = text(a, "models.infer's prompt")?;
                Ok(Self::Infer(InferCall::section_model(&**unit, prompt)?))
            }
            "model_infer" => {
                let alias = text(a, "the model alias")?;
                Ok(Self::Infer(InferCall::declared(
                    &**unit,
                    &alias,
                    text(b, "infer's prompt")?,
                )?))
            }
            other => Err(RunError::new(
                RunErrorKind::Control,
                format!("internal: unknown host call `{other}`"),
            )),
        }
    }

    async fn run(self, lua: &Lua, unit: &Arc<Unit>) -> mlua::Result<Value> {
        // Waiting on a nested walk, a fanout or a model is not the block's running time.
        let started = std::time::Instant::now();
        let result = self.run_inner(lua, unit).await;
        unit.waited(started.elapsed());
        result.map_err(|error| {
            // A budget that ran out below this call (an execute chain or a fanout arm
            // over its instructions, the run's section entries) ends the run: the calling
            // unit dies of it too, so a `pcall` around the call cannot swallow it.
            let error = if error.ends_run() {
                unit.kill(error)
            } else {
                error
            };
            mlua::Error::external(error)
        })
    }

    async fn run_inner(self, lua: &Lua, unit: &Arc<Unit>) -> Result<Value, RunError> {
        let lua_error = |e: mlua::Error| crate::sandbox::values::from_lua_error(&e);
        match self {
            Self::Jump(target) => {
                unit.request_jump(target);
                // The walk drops this VM as soon as it sees the pending jump.
                std::future::pending::<()>().await;
                Ok(Value::Nil)
            }
            Self::Execute(target, mut state, depth) => {
                let ctx = unit.nested_ctx(depth, unit.scopes.clone(), unit.cancel.clone());
                let end = walk(&ctx, target.section(), Entry::Executed, &mut state).await?;
                let reply = match end {
                    WalkEnd::Returned(value) => Some(value),
                    WalkEnd::Exhausted => state.reply,
                };
                reply.map_or(Ok(Value::Nil), |r| {
                    lua.create_string(r).map(Value::String).map_err(lua_error)
                })
            }
            Self::Fanout(plan) => {
                let results = fanout::run(unit, plan).await?;
                fanout::results_table(lua, results)
                    .map(Value::Table)
                    .map_err(lua_error)
            }
            Self::Infer(call) => {
                let text = call.run(&**unit).await?;
                lua.create_string(text)
                    .map(Value::String)
                    .map_err(lua_error)
            }
        }
    }
}

/// A string argument (numbers are accepted and rendered as Lua prints them).
fn text(value: Value, what: &str) -> Result<String, RunError> {
    match value {
        Value::String(s) => Ok(s.to_string_lossy()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(RunError::new(
            RunErrorKind::Control,
            format!("{what} must be a string, not a {}", other.type_name()),
        )),
    }
}

/// Validates an `execute` call and builds the chain's starting state.
fn prepare_execute(
    lua: &Lua,
    unit: &Arc<Unit>,
    address: &str,
    input: Value,
) -> Result<(Target, WalkState, u32), RunError> {
    let target = unit.resolve(address)?;
    let depth = deeper(unit, "execute", address)?;
    let args = match input {
        Value::Nil => Json::String(String::new()),
        other => to_json(lua, other, "execute's input")?,
    };
    let state = WalkState {
        var: vm::var_snapshot(lua)?,
        reply: None,
        args,
    };
    Ok((target, state, depth))
}

fn check_log(message: &str) -> Result<(), RunError> {
    let chars = message.chars().count();
    if chars > MAX_LOG_CHARS {
        return Err(RunError::new(
            RunErrorKind::Lua,
            format!("log() messages are at most {MAX_LOG_CHARS} characters; this one has {chars}"),
        ));
    }
    if message.chars().any(char::is_control) {
        return Err(RunError::new(
            RunErrorKind::Lua,
            "log() messages are one line: no newlines or control characters",
        ));
    }
    Ok(())
}

fn store_table(lua: &Lua, unit: &Arc<Unit>) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    let store = || unit.run.store.clone();
    let fail = |lua: &Lua, e: crate::store::StoreError| raise(lua, RunError::from(e));

    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "write",
        lua.create_function(move |lua, (path, contents): (String, String)| {
            u.scopes.record_write(&path).map_err(|e| fail(lua, e))?;
            let size = contents.len() as u64;
            u.run
                .store_change(&path, |_| size, || s.write(&path, &contents))
                .map_err(|e| raise(lua, e))?;
            u.run.observe(
                &u.heading,
                Observation::StoreWrite {
                    operation: "write",
                    path: &path,
                },
            );
            Ok(())
        })?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "append",
        lua.create_function(move |lua, (path, contents): (String, String)| {
            let size = contents.len() as u64;
            u.run
                .store_change(&path, |old| old + size, || s.append(&path, &contents))
                .map_err(|e| raise(lua, e))?;
            u.run.observe(
                &u.heading,
                Observation::StoreWrite {
                    operation: "append",
                    path: &path,
                },
            );
            Ok(())
        })?,
    )?;
    let s = store();
    table.set(
        "read",
        lua.create_function(
            move |lua, (path, start, end): (String, Option<i64>, Option<i64>)| {
                match (start, end) {
                    (None, None) => s.read(&path),
                    _ => {
                        let (start, end) = bounds(start, end).map_err(|e| raise(lua, e))?;
                        s.read_lines(&path, start, end)
                    }
                }
                .map_err(|e| fail(lua, e))
            },
        )?,
    )?;
    let s = store();
    table.set(
        "read_numbered",
        lua.create_function(
            move |lua, (path, start, end): (String, Option<i64>, Option<i64>)| {
                let (start, end) = bounds(start, end).map_err(|e| raise(lua, e))?;
                s.read_numbered(&path, start, end).map_err(|e| fail(lua, e))
            },
        )?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "str_replace",
        lua.create_function(move |lua, (path, old, new): (String, String, String)| {
            let (removed, added) = (old.len() as u64, new.len() as u64);
            u.run
                .store_change(
                    &path,
                    |size| size.saturating_sub(removed) + added,
                    || s.str_replace(&path, &old, &new),
                )
                .map_err(|e| raise(lua, e))?;
            u.run.observe(
                &u.heading,
                Observation::StoreWrite {
                    operation: "str_replace",
                    path: &path,
                },
            );
            Ok(())
        })?,
    )?;
    let s = store();
    table.set(
        "glob",
        lua.create_function(move |lua, pattern: String| {
            let paths = s.glob(&pattern).map_err(|e| fail(lua, e))?;
            lua.create_sequence_from(paths)
        })?,
    )?;
    let s = store();
    table.set(
        "exists",
        lua.create_function(move |lua, path: String| s.exists(&path).map_err(|e| fail(lua, e)))?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "delete",
        lua.create_function(move |lua, path: String| {
            u.run
                .store_change(&path, |_| 0, || s.delete(&path))
                .map_err(|e| raise(lua, e))?;
            u.run.observe(
                &u.heading,
                Observation::StoreWrite {
                    operation: "delete",
                    path: &path,
                },
            );
            Ok(())
        })?,
    )?;
    Ok(table)
}

/// Converts optional Lua line bounds; a missing start means line 1.
fn bounds(start: Option<i64>, end: Option<i64>) -> Result<(usize, Option<usize>), RunError> {
    let line = |value: i64, which: &str| {
        usize::try_from(value)
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| {
                RunError::new(
                    RunErrorKind::Store,
                    format!("the {which} line must be 1 or more, got {value}"),
                )
            })
    };
    let start = start.map_or(Ok(1), |v| line(v, "start"))?;
    let end = end.map(|v| line(v, "end")).transpose()?;
    Ok((start, end))
}
