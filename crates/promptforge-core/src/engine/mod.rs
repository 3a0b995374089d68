//! The walk: the H1 preamble, the section walk, `jump`, `execute` chains and fanout arms.
//!
//! A run is a tree of *execution units*: the H1 region (id 0), every section entry and every
//! fanout arm. Each unit gets a fresh sandboxed Lua VM ([`vm`]). Walks move through one
//! level of sibling sections; `var` and `reply` travel with the walk as JSON and text.
//!
//! Models and tools are the agent layer's ([`crate::agent`]): the walk holds its run-wide
//! [`RunAgent`] and each unit's `SectionScope`, and calls it through `agent::{install,
//! install_aliases, prose_turn, InferCall}`; a [`Unit`] is the agent layer's `Host` and a
//! [`vm::Vm`] its `TurnVm`. Nothing in `crate::agent` names this module.

mod api;
mod fanout;
mod patterns;
mod render;
mod unit;
mod vm;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value as Json};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentConfig, ProseOutcome, Rounds, RunAgent};
use crate::error::{RunError, RunErrorKind};
use crate::limits::{MAX_NESTING, RunConfig, RunLimits};
use crate::observe::{Observation, Observer};
use crate::prompt::{Block, Prompt, SectionId};
use crate::resolve::ResolutionContext;
use crate::store::StoreRef;
use crate::trace::{End, Scope, SpanGuard, SpanKind};

pub(crate) use unit::{Scopes, Unit};

/// Runs a parsed prompt with `input` as `args` and returns its result.
///
/// The H1 region runs once, then the top-level sections walk top to bottom. The result is
/// the value of the first top-level `return`; a run that falls off its last section returns
/// the frontmatter's `default_return`, else the last reply, else `"done"`.
///
/// Must be awaited inside a tokio runtime; fanout arms run as tokio tasks, in parallel on
/// a multi-threaded runtime.
pub async fn run(
    prompt: &Prompt,
    input: &str,
    resolution: ResolutionContext<'_>,
    store: &StoreRef,
    config: RunConfig,
) -> Result<String, RunError> {
    let started = Instant::now();
    let run_span = config.tracer.as_ref().and_then(|tracer| {
        // The key is redacted from the first recorded string on (the input included).
        if let Some(key) = config.client.as_ref().and_then(|c| c.key_for_redaction()) {
            tracer.add_secret(key);
        }
        tracer.begin_run(prompt, &config.execution, input, store)
    });
    let trace = run_span.as_ref().map_or_else(Scope::off, SpanGuard::scope);
    let tracer = config.tracer.clone();
    let run = Arc::new(Run::new(
        prompt.clone(),
        store.clone(),
        config,
        resolution,
        trace,
    ));
    let observer = Arc::clone(&run.observer);
    observer.observe(
        &run.execution,
        "",
        Observation::RunStarted {
            prompt: prompt.name(),
        },
    );
    let token = run.cancel.clone();
    let result = tokio::select! {
        result = execute_run(&run, input) => result,
        () = token.cancelled() => Err(RunError::cancelled()),
    };
    match &result {
        Ok(value) => observer.observe(
            &run.execution,
            "",
            Observation::RunSucceeded {
                result: value,
                elapsed: started.elapsed(),
            },
        ),
        Err(error) => observer.observe(&run.execution, "", Observation::RunFailed { error }),
    }
    if let (Some(tracer), Some(span)) = (tracer, run_span) {
        tracer.end_run(span, &result);
    }
    result
}

/// State shared by every unit of one run.
pub(crate) struct Run {
    pub(crate) prompt: Prompt,
    pub(crate) store: StoreRef,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) execution: String,
    pub(crate) limits: RunLimits,
    pub(crate) cancel: CancellationToken,
    pub(crate) launched: String,
    pub(crate) nonce: String,
    /// The model and tool layer's run-wide state.
    pub(crate) agent: RunAgent,
    next_id: AtomicU64,
    sections_entered: AtomicU64,
    log_events: AtomicU32,
    /// The store's size as this run sees it (built at the first change).
    ledger: Mutex<Option<StoreLedger>>,
    /// Bytes of fanout results held at once, across every fanout in flight.
    pub(crate) fanout_bytes: AtomicU64,
    /// The run's span (off when the run is not traced).
    pub(crate) trace: Scope,
    /// Orders the store changes the trace records (taken under the store ledger's lock).
    store_seq: AtomicU64,
}

/// The sizes of the store's files, for `RunLimits::max_store_bytes`.
struct StoreLedger {
    total: u64,
    sizes: std::collections::HashMap<String, u64>,
}

impl StoreLedger {
    fn scan(store: &StoreRef) -> Self {
        let mut sizes = std::collections::HashMap::new();
        for path in store.paths().unwrap_or_default() {
            let size = store.read(&path).map_or(0, |text| text.len() as u64);
            sizes.insert(path, size);
        }
        Self {
            total: sizes.values().sum(),
            sizes,
        }
    }
}

impl Run {
    fn new(
        prompt: Prompt,
        store: StoreRef,
        config: RunConfig,
        resolution: ResolutionContext<'_>,
        trace: Scope,
    ) -> Self {
        let nonce = crate::envelope::new_nonce();
        let agent = RunAgent::new(AgentConfig {
            prompt: &prompt,
            resolution,
            limits: &config.limits,
            execution: &config.execution,
            nonce: &nonce,
            client: config.client,
            debug: config.debug,
            trace: trace.clone(),
        });
        Self {
            prompt,
            store,
            observer: config.observer,
            execution: config.execution,
            limits: config.limits,
            cancel: config.cancel.token().clone(),
            launched: rfc3339(SystemTime::now()),
            nonce,
            agent,
            next_id: AtomicU64::new(1),
            sections_entered: AtomicU64::new(0),
            log_events: AtomicU32::new(0),
            ledger: Mutex::new(None),
            fanout_bytes: AtomicU64::new(0),
            trace,
            store_seq: AtomicU64::new(0),
        }
    }

    /// Takes the next execution-unit id and counts a section entry.
    fn enter(&self) -> Result<(u64, u64), RunError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entered = self.sections_entered.fetch_add(1, Ordering::Relaxed) + 1;
        let max = self.limits.max_section_entries.get();
        if entered > max {
            return Err(RunError::new(
                RunErrorKind::Limit,
                format!(
                    "the run reached its limit of {max} section entries \
                     (RunLimits::max_section_entries): a `jump` cycle without an exit, or more \
                     sections walked, executed or fanned out than the limit allows"
                ),
            ));
        }
        Ok((id, entered))
    }

    /// Checks that a fanout of `items` arms fits in the section entries left.
    pub(crate) fn check_fanout_entries(&self, items: usize) -> Result<(), RunError> {
        let max = self.limits.max_section_entries.get();
        let left = max.saturating_sub(self.sections_entered.load(Ordering::Relaxed));
        if items as u64 > left {
            return Err(RunError::new(
                RunErrorKind::Limit,
                format!(
                    "fanout over {items} items needs {items} section entries, but the run may \
                     enter at most {max} sections (RunLimits::max_section_entries) and has \
                     {left} left"
                ),
            ));
        }
        Ok(())
    }

    /// Applies one store change under `RunLimits::max_store_bytes`: `size` maps the file's
    /// current size to its size after `change`, which runs only when the result fits.
    pub(crate) fn store_change(
        &self,
        path: &str,
        size: impl FnOnce(u64) -> u64,
        change: impl FnOnce() -> Result<(), crate::store::StoreError>,
    ) -> Result<u64, RunError> {
        let mut guard = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        let ledger = guard.get_or_insert_with(|| StoreLedger::scan(&self.store));
        let old = ledger.sizes.get(path).copied().unwrap_or(0);
        let new = size(old);
        let total = ledger.total.saturating_sub(old).saturating_add(new);
        let max = self.limits.max_store_bytes.get();
        if new > old && total > max {
            return Err(RunError::new(
                RunErrorKind::Limit,
                format!(
                    "store path '{}': this change would make the store hold {total} bytes, past \
                     the run's limit of {max} bytes (RunLimits::max_store_bytes)",
                    crate::error::quote_text(path, 128, false)
                ),
            ));
        }
        change()?;
        ledger.total = total;
        if new == 0 {
            ledger.sizes.remove(path);
        } else {
            ledger.sizes.insert(path.to_owned(), new);
        }
        // Taken under the ledger's lock: the order the trace gives changes is the order
        // they were made in.
        Ok(self.store_seq.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether one more `log()` checkpoint may be reported.
    pub(crate) fn take_log_slot(&self) -> bool {
        self.log_events.fetch_add(1, Ordering::Relaxed) < self.limits.lua_log_events.get()
    }

    pub(crate) fn observe(&self, section: &str, event: Observation<'_>) {
        self.observer.observe(&self.execution, section, event);
    }
}

pub(crate) fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

/// The state a walk carries from section to section.
#[derive(Debug, Clone)]
pub(crate) struct WalkState {
    pub(crate) var: Map<String, Json>,
    pub(crate) reply: Option<String>,
    pub(crate) args: Json,
}

/// How a unit's blocks ended.
#[derive(Debug)]
pub(crate) enum UnitEnd {
    /// Every block ran: fall through.
    Fallthrough,
    /// A block returned a value.
    Returned(String),
    /// A block called `jump`.
    Jump(Target),
    /// A fanout arm's tool loop ran out of iterations (soft-degraded).
    Exhausted,
}

/// How a walk ended.
#[derive(Debug)]
pub(crate) enum WalkEnd {
    /// A `return` fired.
    Returned(String),
    /// The level ran out of sections; the reply is in the walk state.
    Exhausted,
}

/// A resolved section address, relative to the section that named it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// A sibling: the walk moves within the same level.
    Sibling { section: SectionId },
    /// A direct child: a child-level walk starts.
    Child { section: SectionId },
}

impl Target {
    pub(crate) fn section(self) -> SectionId {
        match self {
            Self::Sibling { section } | Self::Child { section } => section,
        }
    }
}

/// Where a walk happens: which unit context spawns its sections.
#[derive(Clone)]
pub(crate) struct WalkCtx {
    pub(crate) run: Arc<Run>,
    pub(crate) depth: u32,
    pub(crate) scopes: Scopes,
    pub(crate) cancel: CancellationToken,
    /// Where the walk's section spans go.
    pub(crate) trace: Scope,
}

impl WalkCtx {
    /// The same walk context, its section spans under `trace`.
    pub(crate) fn under(&self, trace: Scope) -> Self {
        Self {
            trace,
            ..self.clone()
        }
    }
}

async fn execute_run(run: &Arc<Run>, input: &str) -> Result<String, RunError> {
    let mut state = WalkState {
        var: Map::new(),
        reply: None,
        args: Json::String(input.to_owned()),
    };
    let ctx = WalkCtx {
        run: Arc::clone(run),
        depth: 0,
        scopes: Scopes::default(),
        cancel: run.cancel.clone(),
        trace: run.trace.clone(),
    };
    let h1 = Unit::h1(&ctx, &state);
    let blocks = &run.prompt.data.h1_blocks;
    let end = run_unit(&h1, blocks, &mut state).await?;
    let walked = match end {
        UnitEnd::Returned(value) => return Ok(value),
        UnitEnd::Exhausted => WalkEnd::Exhausted,
        UnitEnd::Jump(target) => walk(&ctx, target.section(), Entry::Addressed, &mut state).await?,
        UnitEnd::Fallthrough => match run.prompt.data.roots.first() {
            Some(&first) => walk(&ctx, first, Entry::Walked, &mut state).await?,
            None => WalkEnd::Exhausted,
        },
    };
    Ok(match walked {
        WalkEnd::Returned(value) => value,
        WalkEnd::Exhausted => fall_off_result(&run.prompt, state.reply),
    })
}

fn fall_off_result(prompt: &Prompt, reply: Option<String>) -> String {
    prompt
        .frontmatter()
        .default_return()
        .map(str::to_owned)
        .or(reply)
        .unwrap_or_else(|| "done".to_owned())
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a walk reaches its first section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The walk starts at the top of its level: an off-walk first section is skipped.
    Walked,
    /// `jump` or `execute` named the section: it runs even when it is off the walk.
    Addressed,
}

/// Walks one level: the siblings of `start` (the children of its parent), beginning at
/// `start`, which runs even off the walk when `entry` is [`Entry::Addressed`].
pub(crate) fn walk<'a>(
    ctx: &'a WalkCtx,
    start: SectionId,
    entry: Entry,
    state: &'a mut WalkState,
) -> BoxFuture<'a, Result<WalkEnd, RunError>> {
    Box::pin(async move {
        let prompt = ctx.run.prompt.clone();
        let data = &prompt.data;
        let level = unit::level_of(data, start);
        let Some(mut index) =
            Some(data.sections[start].position).filter(|&i| level.get(i) == Some(&start))
        else {
            return Err(RunError::new(
                RunErrorKind::Control,
                "internal: walk start is not in its level",
            ));
        };
        let mut forced = entry == Entry::Addressed;
        while let Some(&section) = level.get(index) {
            if data.sections[section].off_walk && !forced {
                index += 1;
                continue;
            }
            forced = false;
            let unit = Unit::section(ctx, section, state, None)?;
            let end = run_unit(&unit, &data.sections[section].blocks, state).await?;
            match end {
                UnitEnd::Fallthrough | UnitEnd::Exhausted => index += 1,
                UnitEnd::Returned(value) => return Ok(WalkEnd::Returned(value)),
                UnitEnd::Jump(Target::Sibling { section: target }) => {
                    index = Some(data.sections[target].position)
                        .filter(|&i| level.get(i) == Some(&target))
                        .unwrap_or(level.len());
                    forced = true;
                }
                UnitEnd::Jump(Target::Child { section: child }) => {
                    // A child-level walk; the parent resumes after the jumper with the
                    // child walk's last reply (a `return` there ends only the child walk).
                    let span = ctx.trace.start(
                        SpanKind::Walk,
                        &data.sections[child].heading(),
                        Some(data.sections[child].line),
                        None,
                        |_| {},
                    );
                    let walked = if span.is_on() {
                        walk(&ctx.under(span.scope()), child, Entry::Addressed, state).await
                    } else {
                        walk(ctx, child, Entry::Addressed, state).await
                    };
                    trace_walk_end(span, &walked);
                    if let WalkEnd::Returned(value) = walked? {
                        state.reply = Some(value);
                    }
                    index += 1;
                }
            }
        }
        Ok(WalkEnd::Exhausted)
    })
}

/// Runs one unit: a fresh VM, the shared library replay, then the blocks in order.
pub(crate) async fn run_unit(
    unit: &Arc<Unit>,
    blocks: &[Block],
    state: &mut WalkState,
) -> Result<UnitEnd, RunError> {
    let heading = unit.heading.clone();
    unit.run
        .observe(&heading, Observation::SectionStarted { id: unit.id });
    let result = run_blocks(unit, blocks, state)
        .await
        .map_err(|error| error.in_section(&heading));
    unit.run
        .observe(&heading, Observation::SectionFinished { id: unit.id });
    trace_unit_end(unit, &result, state);
    result
}

/// Ends a unit's span: how it ended and the reply it left.
fn trace_unit_end(unit: &Unit, result: &Result<UnitEnd, RunError>, state: &WalkState) {
    if !unit.trace.is_on() {
        return;
    }
    let end = match result {
        Ok(_) => End::Ok,
        Err(error) => End::Error(error),
    };
    unit.trace.finish(end, |attrs| {
        if let Ok(how) = result {
            attrs.text(
                "end",
                match how {
                    UnitEnd::Fallthrough => "fallthrough",
                    UnitEnd::Returned(_) => "return",
                    UnitEnd::Jump(_) => "jump",
                    UnitEnd::Exhausted => "exhausted",
                },
            );
            if let UnitEnd::Returned(value) = how {
                attrs.text("returned", value);
            }
        }
        if let Some(reply) = &state.reply {
            attrs.text("reply", reply);
        }
    });
}

/// Ends a child walk's span.
fn trace_walk_end(span: SpanGuard, walked: &Result<WalkEnd, RunError>) {
    match walked {
        Ok(WalkEnd::Returned(value)) => span.end(End::Ok, |attrs| attrs.text("returned", value)),
        Ok(WalkEnd::Exhausted) => span.end(End::Ok, |_| {}),
        Err(error) => span.end(End::Error(error), |_| {}),
    }
}

async fn run_blocks(
    unit: &Arc<Unit>,
    blocks: &[Block],
    state: &mut WalkState,
) -> Result<UnitEnd, RunError> {
    let vm = vm::Vm::new(unit, state)?;
    if unit.section.is_some() {
        // The shared library replays into every section VM (not the H1 preamble); its
        // scalar return is discarded.
        unit.set_phase(unit::Phase::SharedLoad);
        for chunk in &unit.run.prompt.data.shared {
            vm.call_chunk(unit, chunk).await?;
        }
        unit.set_phase(unit::Phase::Body);
    }
    // Declared aliases become globals after the replay, so they win over shared globals.
    vm.install_aliases(unit)?;
    let last_prose = blocks.iter().rposition(|b| matches!(b, Block::Prose(_)));
    let mut end = UnitEnd::Fallthrough;
    for (index, block) in blocks.iter().enumerate() {
        match block {
            Block::Lua(chunk) => match vm.call_chunk(unit, chunk).await? {
                vm::ChunkEnd::Value(None) => {}
                vm::ChunkEnd::Value(Some(value)) => {
                    end = UnitEnd::Returned(value);
                    break;
                }
                vm::ChunkEnd::Jump(target) => {
                    end = UnitEnd::Jump(target);
                    break;
                }
            },
            Block::Prose(prose) => {
                let text = render::render(vm.lua(), unit, prose)?;
                if text.trim().is_empty() {
                    continue;
                }
                // The last prose block runs the tool loop; earlier ones take one round.
                let rounds = if Some(index) == last_prose {
                    Rounds::ToolLoop
                } else {
                    Rounds::Single
                };
                match crate::agent::prose_turn(&**unit, &vm, prose.line, text, rounds).await? {
                    ProseOutcome::Reply(reply) => vm.set_reply(&reply)?,
                    ProseOutcome::Exhausted => {
                        end = UnitEnd::Exhausted;
                        break;
                    }
                }
            }
        }
    }
    vm.save(state)?;
    Ok(end)
}

/// Checks the execute/fanout nesting cap for a unit about to nest one level deeper.
pub(crate) fn deeper(depth: u32) -> Result<u32, RunError> {
    let next = depth + 1;
    if next > MAX_NESTING {
        return Err(RunError::new(
            RunErrorKind::Limit,
            format!("execute and fanout nest at most {MAX_NESTING} levels deep"),
        ));
    }
    Ok(next)
}
