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
use crate::sandbox::values::{prompt_line, raise, to_json};
use crate::trace::{Attrs, End, SpanKind};

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
                let scope = log_unit.trace.current();
                if scope.is_on() {
                    scope.instant(SpanKind::Log, &message, prompt_line(lua), End::Ok, |a| {
                        a.text("message", &message);
                    });
                }
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
        // The calling line, for the trace (read now: the Lua stack is the caller's).
        let line = if unit.trace.is_on() {
            prompt_line(&lua)
        } else {
            None
        };
        let call = HostCall::prepare(&lua, &unit, &op, a, b, line).map_err(|e| raise(&lua, e));
        async move { call?.run(&lua, &unit, line).await }
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
        line: Option<usize>,
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
                    Phase::Body => {
                        let target = unit.resolve(&address)?;
                        trace_jump(unit, target, line);
                        Ok(Self::Jump(target))
                    }
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
                Ok(Self::Infer(
                    InferCall::section_model(&**unit, prompt)?.at_line(line),
                ))
            }
            "model_infer" => {
                let alias = text(a, "the model alias")?;
                Ok(Self::Infer(
                    InferCall::declared(&**unit, &alias, text(b, "infer's prompt")?)?.at_line(line),
                ))
            }
            other => Err(RunError::new(
                RunErrorKind::Control,
                format!("internal: unknown host call `{other}`"),
            )),
        }
    }

    async fn run(self, lua: &Lua, unit: &Arc<Unit>, line: Option<usize>) -> mlua::Result<Value> {
        // Waiting on a nested walk, a fanout or a model is not the block's running time.
        let started = std::time::Instant::now();
        let result = self.run_inner(lua, unit, line).await;
        unit.waited(started.elapsed());
        result
    }

    async fn run_inner(
        self,
        lua: &Lua,
        unit: &Arc<Unit>,
        line: Option<usize>,
    ) -> mlua::Result<Value> {
        match self {
            Self::Jump(target) => {
                unit.request_jump(target);
                // The walk drops this VM as soon as it sees the pending jump.
                std::future::pending::<()>().await;
                Ok(Value::Nil)
            }
            Self::Execute(target, mut state, depth) => {
                let data = &unit.run.prompt.data;
                let section = &data.sections[target.section()];
                let span = unit.trace.current().start(
                    SpanKind::Execute,
                    &section.heading(),
                    line,
                    None,
                    |attrs| attrs.json("input", &state.args),
                );
                let ctx = unit.nested_ctx(
                    depth,
                    unit.scopes.clone(),
                    unit.cancel.clone(),
                    span.scope(),
                );
                let end = walk(&ctx, target.section(), Entry::Addressed, &mut state).await;
                let reply = match end {
                    Ok(WalkEnd::Returned(value)) => Some(value),
                    Ok(WalkEnd::Exhausted) => state.reply,
                    Err(error) => {
                        span.end(End::Error(&error), |_| {});
                        return Err(mlua::Error::external(error));
                    }
                };
                span.end(End::Ok, |attrs| {
                    if let Some(reply) = &reply {
                        attrs.text("result", reply);
                    }
                });
                reply.map_or(Ok(Value::Nil), |r| lua.create_string(r).map(Value::String))
            }
            Self::Fanout(plan) => {
                let results = fanout::run(unit, plan, line)
                    .await
                    .map_err(mlua::Error::external)?;
                fanout::results_table(lua, results).map(Value::Table)
            }
            Self::Infer(call) => {
                let text = call.run(&**unit).await.map_err(mlua::Error::external)?;
                lua.create_string(text).map(Value::String)
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
    let depth = deeper(unit.depth)?;
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
            let size = contents.len() as u64;
            let changed = u
                .scopes
                .record_write(&path)
                .map_err(RunError::from)
                .and_then(|()| {
                    u.run
                        .store_change(&path, |_| size, || s.write(&path, &contents))
                });
            trace_change(lua, &u, "write", &path, &changed, |a| {
                a.text("content", &contents);
            });
            changed.map_err(|e| raise(lua, e))?;
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
            let changed =
                u.run
                    .store_change(&path, |old| old + size, || s.append(&path, &contents));
            trace_change(lua, &u, "append", &path, &changed, |a| {
                a.text("content", &contents);
            });
            changed.map_err(|e| raise(lua, e))?;
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
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "read",
        lua.create_function(
            move |lua, (path, start, end): (String, Option<i64>, Option<i64>)| {
                let read = match (start, end) {
                    (None, None) => s.read(&path),
                    _ => {
                        let (start, end) = bounds(start, end).map_err(|e| raise(lua, e))?;
                        s.read_lines(&path, start, end)
                    }
                };
                trace_read(lua, &u, "read", &path, &read, |a, text| {
                    a.number("bytes", text.len() as u64);
                });
                read.map_err(|e| fail(lua, e))
            },
        )?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "read_numbered",
        lua.create_function(
            move |lua, (path, start, end): (String, Option<i64>, Option<i64>)| {
                let (start, end) = bounds(start, end).map_err(|e| raise(lua, e))?;
                let read = s.read_numbered(&path, start, end);
                trace_read(lua, &u, "read_numbered", &path, &read, |a, text| {
                    a.number("bytes", text.len() as u64);
                });
                read.map_err(|e| fail(lua, e))
            },
        )?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "str_replace",
        lua.create_function(move |lua, (path, old, new): (String, String, String)| {
            let (removed, added) = (old.len() as u64, new.len() as u64);
            let changed = u.run.store_change(
                &path,
                |size| size.saturating_sub(removed) + added,
                || s.str_replace(&path, &old, &new),
            );
            trace_change(lua, &u, "str_replace", &path, &changed, |a| {
                a.text("old", &old);
                a.text("new", &new);
            });
            changed.map_err(|e| raise(lua, e))?;
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
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "glob",
        lua.create_function(move |lua, pattern: String| {
            let found = s.glob(&pattern);
            trace_read(lua, &u, "glob", &pattern, &found, |a, paths| {
                a.number("matches", paths.len() as u64);
            });
            lua.create_sequence_from(found.map_err(|e| fail(lua, e))?)
        })?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "exists",
        lua.create_function(move |lua, path: String| {
            let exists = s.exists(&path);
            trace_read(lua, &u, "exists", &path, &exists, |a, exists| {
                a.flag("exists", *exists);
            });
            exists.map_err(|e| fail(lua, e))
        })?,
    )?;
    let (s, u) = (store(), Arc::clone(unit));
    table.set(
        "delete",
        lua.create_function(move |lua, path: String| {
            let changed = u.run.store_change(&path, |_| 0, || s.delete(&path));
            trace_change(lua, &u, "delete", &path, &changed, |_| {});
            changed.map_err(|e| raise(lua, e))?;
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

/// Records a store change (or its failure) in the trace, under the unit's innermost span;
/// `seq` orders changes as they were made.
fn trace_change(
    lua: &Lua,
    unit: &Unit,
    op: &str,
    path: &str,
    outcome: &Result<u64, RunError>,
    attrs: impl FnOnce(&mut Attrs),
) {
    let scope = unit.trace.current();
    if !scope.is_on() {
        return;
    }
    let end = match outcome {
        Ok(_) => End::Ok,
        Err(error) => End::Error(error),
    };
    scope.instant(SpanKind::Store, path, prompt_line(lua), end, |a| {
        a.text("op", op);
        a.text("path", path);
        if let Ok(seq) = outcome {
            a.number("seq", *seq);
        }
        attrs(a);
    });
}

/// Records a store read in the trace (what was read, not its text).
fn trace_read<T>(
    lua: &Lua,
    unit: &Unit,
    op: &str,
    path: &str,
    outcome: &Result<T, crate::store::StoreError>,
    attrs: impl FnOnce(&mut Attrs, &T),
) {
    let scope = unit.trace.current();
    if !scope.is_on() {
        return;
    }
    let error = outcome.as_ref().err().map(|e| RunError::from(e.clone()));
    let end = error.as_ref().map_or(End::Ok, End::Error);
    scope.instant(SpanKind::Store, path, prompt_line(lua), end, |a| {
        a.text("op", op);
        a.text("path", path);
        if let Ok(value) = outcome {
            attrs(a, value);
        }
    });
}

/// Records a `jump` in the trace.
fn trace_jump(unit: &Unit, target: Target, line: Option<usize>) {
    let scope = unit.trace.current();
    if !scope.is_on() {
        return;
    }
    let heading = unit.run.prompt.data.sections[target.section()].heading();
    scope.instant(SpanKind::Jump, &heading, line, End::Ok, |a| {
        a.text("target", &heading);
        a.text(
            "relation",
            match target {
                Target::Sibling { .. } => "sibling",
                Target::Child { .. } => "child",
            },
        );
    });
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
