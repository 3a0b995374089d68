//! `fanout(worker, collection)`: one arm per collection member, run concurrently.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mlua::{Lua, LuaSerdeExt, Table, Value};
use serde_json::{Map, Value as Json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::unit::{Unit, WriteRegistry};
use super::vm::var_snapshot;
use super::{Entry, Target, UnitEnd, WalkEnd, WalkState, deeper, run_unit, walk};
use crate::error::{RunError, RunErrorKind};
use crate::observe::Observation;
use crate::prompt::SectionId;
use crate::sandbox::HELPERS_KEY;
use crate::sandbox::values::{from_lua_error, to_json};
use crate::trace::{End, Scope, SpanKind};

/// A validated fanout call.
pub(crate) struct Plan {
    worker: SectionId,
    members: Vec<Json>,
    var: Map<String, Json>,
    depth: u32,
}

/// What one arm produced.
pub(crate) struct ArmResult {
    text: String,
    ok: bool,
    exhausted: bool,
    item: Json,
    _held: Held,
}

/// Result bytes counted against `RunLimits::max_fanout_result_bytes` until dropped.
struct Held {
    run: Arc<super::Run>,
    bytes: u64,
}

impl Held {
    fn reserve(run: &Arc<super::Run>, bytes: u64) -> Result<Self, RunError> {
        let max = run.limits.max_fanout_result_bytes.get();
        let before = run.fanout_bytes.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > max {
            run.fanout_bytes.fetch_sub(bytes, Ordering::Relaxed);
            return Err(RunError::new(
                RunErrorKind::Limit,
                format!(
                    "fanout results would hold more than {max} bytes at once \
                     (RunLimits::max_fanout_result_bytes); return less from each arm, or \
                     write results to the store"
                ),
            ));
        }
        Ok(Self {
            run: Arc::clone(run),
            bytes,
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.run
            .fanout_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

pub(crate) fn prepare(
    lua: &Lua,
    unit: &Arc<Unit>,
    address: &str,
    collection: Value,
) -> Result<Plan, RunError> {
    let worker = unit.resolve(address)?.section();
    let Value::Table(table) = collection else {
        return Err(RunError::new(
            RunErrorKind::Control,
            format!(
                "fanout's second argument must be a table (the collection), not a {}; to fan \
                 out over a list section pass list_from_section(\"### List\")",
                collection.type_name()
            ),
        ));
    };
    let members = members(lua, &table)?;
    if members.is_empty() {
        return Err(RunError::new(
            RunErrorKind::Control,
            "fanout over an empty collection: there is no work to do (is the list empty?)",
        ));
    }
    unit.run.check_fanout_entries(members.len())?;
    Ok(Plan {
        worker,
        members,
        var: var_snapshot(lua)?,
        depth: deeper(unit.depth)?,
    })
}

/// The array part in order, then the hash part as `{key, value}` pairs.
fn members(lua: &Lua, table: &Table) -> Result<Vec<Json>, RunError> {
    let length = table.raw_len();
    let mut out = Vec::with_capacity(length);
    for index in 1..=length {
        let value: Value = table.raw_get(index).map_err(|e| from_lua_error(&e))?;
        out.push(member(lua, value, &format!("member {index}"))?);
    }
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair.map_err(|e| from_lua_error(&e))?;
        if let Value::Integer(i) = key
            && usize::try_from(i).is_ok_and(|i| (1..=length).contains(&i))
        {
            continue;
        }
        let key_json = match &key {
            Value::String(_) | Value::Integer(_) | Value::Number(_) | Value::Boolean(_) => {
                to_json(lua, key.clone(), "a fanout key")?
            }
            other => {
                return Err(RunError::new(
                    RunErrorKind::Control,
                    format!(
                        "fanout collection has a {} key; keys must be strings, numbers or booleans",
                        other.type_name()
                    ),
                ));
            }
        };
        let value = member(lua, value, &format!("member at key {key_json}"))?;
        let mut pair = Map::new();
        pair.insert("key".to_owned(), key_json);
        pair.insert("value".to_owned(), value);
        out.push(Json::Object(pair));
    }
    Ok(out)
}

fn member(lua: &Lua, value: Value, name: &str) -> Result<Json, RunError> {
    match value {
        Value::Function(_) | Value::UserData(_) | Value::Thread(_) => Err(RunError::new(
            RunErrorKind::Control,
            format!(
                "fanout collection {name} is a {}; members must be data",
                value.type_name()
            ),
        )),
        other => to_json(lua, other, &format!("fanout collection {name}")),
    }
}

/// Runs every arm, at most `max_fanout_concurrency` at once, and returns results in
/// collection order. The first fatal arm error cancels the siblings and is returned.
pub(crate) async fn run(
    unit: &Arc<Unit>,
    plan: Plan,
    line: Option<usize>,
) -> Result<Vec<ArmResult>, RunError> {
    let span = unit.trace.current().start(
        SpanKind::Fanout,
        &unit.run.prompt.data.sections[plan.worker].heading(),
        line,
        None,
        |attrs| {
            attrs.number("items", plan.members.len() as u64);
            attrs.number(
                "concurrency",
                unit.run.limits.max_fanout_concurrency.get() as u64,
            );
        },
    );
    let results = run_arms(unit, plan, span.scope()).await;
    match &results {
        Ok(results) => span.end(End::Ok, |attrs| {
            attrs.number("ok", results.iter().filter(|r| r.ok).count() as u64);
            attrs.number(
                "exhausted",
                results.iter().filter(|r| r.exhausted).count() as u64,
            );
        }),
        Err(error) => span.end(End::Error(error), |_| {}),
    }
    results
}

async fn run_arms(unit: &Arc<Unit>, plan: Plan, trace: Scope) -> Result<Vec<ArmResult>, RunError> {
    let registry = Arc::new(WriteRegistry::default());
    let cancel = unit.cancel.child_token();
    let permits = Arc::new(Semaphore::new(unit.run.limits.max_fanout_concurrency.get()));
    let mut arms = JoinSet::new();
    let count = plan.members.len();
    let mut results: Vec<Option<ArmResult>> = Vec::with_capacity(count);
    results.resize_with(count, || None);
    // Arms are spawned as permits free up, so only running arms hold a copy of the state.
    let mut pending = plan.members.into_iter().enumerate();
    let mut next = pending.next();
    loop {
        tokio::select! {
            biased;
            joined = arms.join_next(), if !arms.is_empty() => {
                let Some(joined) = joined else { continue };
                let outcome = joined.map_err(|error| {
                    RunError::new(
                        RunErrorKind::Lua,
                        format!("a fanout arm stopped unexpectedly: {error}"),
                    )
                });
                match outcome {
                    Ok((position, Ok(result))) => results[position] = Some(result),
                    Ok((_, Err(error))) | Err(error) => {
                        cancel.cancel();
                        arms.abort_all();
                        while arms.join_next().await.is_some() {}
                        return Err(error);
                    }
                }
            }
            permit = Arc::clone(&permits).acquire_owned(), if next.is_some() => {
                let Some((position, item)) = next.take() else { continue };
                next = pending.next();
                let index = position + 1;
                let ctx = unit.nested_ctx(
                    plan.depth,
                    unit.scopes.enter(&registry, index),
                    cancel.clone(),
                    trace.clone(),
                );
                let state = WalkState {
                    var: plan.var.clone(),
                    reply: unit.start_reply.clone(),
                    args: unit.args.clone(),
                };
                let worker = plan.worker;
                arms.spawn(async move {
                    let _permit = permit;
                    let result = run_arm(ctx, worker, item, index, state).await;
                    (position, result)
                });
            }
            else => break,
        }
    }
    results
        .into_iter()
        .map(|r| {
            r.ok_or_else(|| RunError::new(RunErrorKind::Lua, "internal: a fanout arm is missing"))
        })
        .collect()
}

async fn run_arm(
    ctx: super::WalkCtx,
    worker: SectionId,
    item: Json,
    index: usize,
    mut state: WalkState,
) -> Result<ArmResult, RunError> {
    let started_with = state.reply.clone();
    let unit = Unit::section(&ctx, worker, &state, Some((item.clone(), index)))?;
    let run = Arc::clone(&unit.run);
    run.observe(
        &unit.heading,
        Observation::ArmStarted { id: unit.id, index },
    );
    let blocks = &run.prompt.data.sections[worker].blocks;
    let end = run_unit(&unit, blocks, &mut state).await?;
    let exhausted = matches!(end, UnitEnd::Exhausted);
    let text = match end {
        UnitEnd::Returned(value) => value,
        UnitEnd::Jump(target) => {
            let start = match target {
                Target::Sibling { section } | Target::Child { section } => section,
            };
            // The arm's continuation walk nests under the arm's span.
            let ctx = if unit.trace.is_on() {
                ctx.under(unit.trace.base())
            } else {
                ctx
            };
            match walk(&ctx, start, Entry::Addressed, &mut state).await? {
                WalkEnd::Returned(value) => value,
                WalkEnd::Exhausted => state.reply.unwrap_or_default(),
            }
        }
        UnitEnd::Fallthrough | UnitEnd::Exhausted if state.reply != started_with => {
            state.reply.unwrap_or_default()
        }
        UnitEnd::Fallthrough | UnitEnd::Exhausted => String::new(),
    };
    let ok = !exhausted;
    run.observe(
        &unit.heading,
        Observation::ArmFinished {
            id: unit.id,
            index,
            ok,
        },
    );
    let held = Held::reserve(&run, text.len() as u64)?;
    Ok(ArmResult {
        text,
        ok,
        exhausted,
        item,
        _held: held,
    })
}

/// Builds the Lua result array: each entry has `.text`, `.ok`, `.item`, `.exhausted` and
/// converts to its text through `__tostring`.
pub(crate) fn results_table(lua: &Lua, results: Vec<ArmResult>) -> mlua::Result<Table> {
    let helpers: Table = lua.named_registry_value(HELPERS_KEY)?;
    let make: mlua::Function = helpers.get("result")?;
    let table = lua.create_table_with_capacity(results.len(), 0)?;
    for (position, result) in results.into_iter().enumerate() {
        let entry: Table = make.call((
            result.text,
            result.ok,
            lua.to_value(&result.item)?,
            result.exhausted,
        ))?;
        table.raw_set(position + 1, entry)?;
    }
    Ok(table)
}
