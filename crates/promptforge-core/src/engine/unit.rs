//! Execution units and section addressing.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;

use super::{Cause, Run, Target, WalkCtx, WalkState, rfc3339};
use crate::agent::{Host, RunAgent, SectionScope};
use crate::error::{RunError, RunErrorKind};
use crate::observe::Observation;
use crate::prompt::{PromptData, SectionId, heading};
use crate::store::StoreError;
use crate::trace::{SpanGuard, SpanKind, UnitTrace};

/// What a unit's VM is doing, for the calls that depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Replaying the `lua shared` library.
    SharedLoad = 0,
    /// Running the unit's own blocks.
    Body = 1,
    /// Running a local tool handler (`jump` is disabled).
    ToolHandler = 2,
}

/// The fanout write registries enclosing a unit, innermost last: (registry, arm index).
#[derive(Clone, Default)]
pub(crate) struct Scopes(Arc<Vec<(Arc<WriteRegistry>, usize)>>);

/// The paths written by the arms of one fanout.
#[derive(Default)]
pub(crate) struct WriteRegistry {
    writers: Mutex<std::collections::HashMap<String, usize>>,
}

impl Scopes {
    /// The scopes of an arm of a new fanout with `registry`.
    pub(crate) fn enter(&self, registry: &Arc<WriteRegistry>, arm: usize) -> Self {
        let mut chain = (*self.0).clone();
        chain.push((Arc::clone(registry), arm));
        Self(Arc::new(chain))
    }

    /// Records a `store.write` to `path`; two arms of one fanout writing it is an error.
    pub(crate) fn record_write(&self, path: &str) -> Result<(), StoreError> {
        for (registry, arm) in self.0.iter() {
            let mut writers = registry
                .writers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match writers.get(path) {
                Some(&other) if other != *arm => {
                    let (first, second) = (other.min(*arm), other.max(*arm));
                    return Err(StoreError::write_conflict(path, first, second));
                }
                Some(_) => {}
                None => {
                    writers.insert(path.to_owned(), *arm);
                }
            }
        }
        Ok(())
    }
}

/// One execution unit: the H1 region, a section entry or a fanout arm.
pub(crate) struct Unit {
    pub(crate) run: Arc<Run>,
    /// The section, or `None` for the H1 region.
    pub(crate) section: Option<SectionId>,
    pub(crate) heading: String,
    pub(crate) id: u64,
    pub(crate) entered: u64,
    pub(crate) depth: u32,
    pub(crate) now: String,
    pub(crate) scopes: Scopes,
    pub(crate) cancel: CancellationToken,
    /// The reply the unit started with (a fanout hands it to its arms).
    pub(crate) start_reply: Option<String>,
    pub(crate) args: Json,
    /// `(item, 1-based index)` for a fanout arm.
    pub(crate) arm: Option<(Json, usize)>,
    /// The sections `jump`, `execute`, `fanout` and `list_from_section` may name.
    pub(crate) visible: Arc<Visible>,
    phase: AtomicU8,
    pub(crate) instructions: AtomicU64,
    /// When the current block started, and how long it has waited on host calls since.
    clock: Mutex<(Instant, Duration)>,
    /// Set once the unit ran out of its instruction budget or was cancelled: from then on
    /// every hook tick, `pcall` return and block start raises this error again.
    dead: Mutex<Option<RunError>>,
    /// The last `error()` raised with a non-string value: (rendered, type, location).
    noted: Mutex<Option<(String, String, Option<String>)>>,
    jump: Mutex<Option<Target>>,
    /// The agent layer's section-local state (its type; only `crate::agent` reads it).
    scope: Mutex<SectionScope>,
    /// The unit's trace span (off when the run is not traced).
    pub(crate) trace: UnitTrace,
}

impl Unit {
    pub(crate) fn h1(ctx: &WalkCtx, state: &WalkState) -> Arc<Self> {
        let title = &ctx.run.prompt.data.title;
        Arc::new(Self::build(
            ctx,
            None,
            heading(1, title),
            (0, 0),
            state,
            None,
            Arc::new(Visible::Roots),
        ))
    }

    /// A section entered by `cause` (a walk, `jump` or `execute`).
    pub(crate) fn section(
        ctx: &WalkCtx,
        section: SectionId,
        state: &WalkState,
        cause: Cause,
    ) -> Result<Arc<Self>, RunError> {
        let heading = ctx.run.prompt.data.sections[section].heading();
        let ids = ctx.run.enter(cause, &heading)?;
        Ok(Arc::new(Self::build(
            ctx,
            Some(section),
            heading,
            ids,
            state,
            None,
            Arc::new(Visible::Section(section)),
        )))
    }

    /// A fanout arm running `worker` over `item` (1-based `index`); `from` is the set the
    /// worker was resolved from (the fanout caller's).
    pub(crate) fn arm(
        ctx: &WalkCtx,
        worker: SectionId,
        state: &WalkState,
        (item, index): (Json, usize),
        from: Arc<Visible>,
    ) -> Result<Arc<Self>, RunError> {
        let heading = ctx.run.prompt.data.sections[worker].heading();
        let ids = ctx.run.enter(Cause::Fanout, &heading)?;
        Ok(Arc::new(Self::build(
            ctx,
            Some(worker),
            heading,
            ids,
            state,
            Some((item, index)),
            Arc::new(Visible::Arm { from, worker }),
        )))
    }

    fn build(
        ctx: &WalkCtx,
        section: Option<SectionId>,
        heading: String,
        (id, entered): (u64, u64),
        state: &WalkState,
        arm: Option<(Json, usize)>,
        visible: Arc<Visible>,
    ) -> Self {
        let trace = UnitTrace::new(unit_span(ctx, section, &heading, id, entered, &arm));
        Self {
            run: Arc::clone(&ctx.run),
            section,
            heading,
            id,
            entered,
            depth: ctx.depth,
            now: rfc3339(SystemTime::now()),
            scopes: ctx.scopes.clone(),
            cancel: ctx.cancel.clone(),
            start_reply: state.reply.clone(),
            args: state.args.clone(),
            arm,
            visible,
            phase: AtomicU8::new(Phase::Body as u8),
            instructions: AtomicU64::new(0),
            clock: Mutex::new((Instant::now(), Duration::ZERO)),
            dead: Mutex::new(None),
            noted: Mutex::new(None),
            jump: Mutex::new(None),
            scope: Mutex::new(SectionScope::default()),
            trace,
        }
    }

    /// The display name of the unit's section (`sys.section_name`).
    pub(crate) fn section_name(&self) -> &str {
        match self.section {
            Some(id) => &self.run.prompt.data.sections[id].name,
            None => &self.run.prompt.data.title,
        }
    }

    /// The walk context units nested under this one (execute chains) run in.
    pub(crate) fn nested_ctx(
        &self,
        depth: u32,
        scopes: Scopes,
        cancel: CancellationToken,
        trace: crate::trace::Scope,
    ) -> WalkCtx {
        WalkCtx {
            run: Arc::clone(&self.run),
            depth,
            scopes,
            cancel,
            trace,
        }
    }

    /// Why the unit is dead, if it is.
    pub(crate) fn dead(&self) -> Option<RunError> {
        self.dead
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks the unit dead (the first reason wins) and returns the reason it died of.
    pub(crate) fn kill(&self, reason: RunError) -> RunError {
        self.dead
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason)
            .clone()
    }

    /// Records an `error()` call with a non-string value, so the error that reaches the
    /// host can say where it was raised.
    pub(crate) fn note_error(&self, rendered: String, kind: String, location: Option<String>) {
        *self.noted.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((rendered, kind, location));
    }

    /// Converts a Lua error that ended one of this unit's blocks: the unit's death wins,
    /// and an `error()` with a non-string value is reported with its location and type.
    pub(crate) fn lua_error(&self, error: &mlua::Error) -> RunError {
        if let Some(reason) = self.dead() {
            return reason;
        }
        let converted = crate::sandbox::values::from_lua_error(error);
        let converted = crate::sandbox::values::locate(error, converted, self.run.prompt.origin());
        if converted.kind() != RunErrorKind::Lua {
            return converted;
        }
        let noted = self
            .noted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match noted {
            Some((rendered, kind, location)) if converted.message() == rendered => {
                let shown = match kind.as_str() {
                    "nil" => String::new(),
                    "table" => " (a table)".to_owned(),
                    _ => format!(" ({})", crate::sandbox::values::cap_message(&rendered)),
                };
                RunError::new(
                    RunErrorKind::Lua,
                    format!(
                        "{}error() was called with a {kind} value{shown} instead of a message; \
                         pass a string, such as error(\"what went wrong\")",
                        location.unwrap_or_default()
                    ),
                )
            }
            _ => converted,
        }
    }

    /// Raises the unit's death again, or kills it when the run was cancelled.
    pub(crate) fn check_alive(&self) -> Result<(), RunError> {
        if let Some(reason) = self.dead() {
            return Err(reason);
        }
        if self.cancel.is_cancelled() {
            return Err(self.kill(RunError::cancelled()));
        }
        Ok(())
    }

    /// Starts a block's budgets: instructions and running time.
    pub(crate) fn start_block(&self) {
        self.instructions.store(0, Ordering::Relaxed);
        *self.clock.lock().unwrap_or_else(PoisonError::into_inner) =
            (Instant::now(), Duration::ZERO);
    }

    /// Records time a block spent waiting on a host call (not running).
    pub(crate) fn waited(&self, time: Duration) {
        self.clock.lock().unwrap_or_else(PoisonError::into_inner).1 += time;
    }

    /// Charges `steps` instructions (VM instructions, or the equivalent work of a metered
    /// library function) to the current block's budget; past the budget the unit dies.
    pub(crate) fn charge(&self, steps: u64) -> Result<(), RunError> {
        self.check_alive()?;
        let budget = self.run.limits.lua_instructions.get();
        let used = self
            .instructions
            .fetch_add(steps, Ordering::Relaxed)
            .saturating_add(steps);
        let (started, waited) = *self.clock.lock().unwrap_or_else(PoisonError::into_inner);
        let limit = self.run.limits.lua_block_time;
        if started.elapsed().saturating_sub(waited) > limit {
            return Err(self.kill(RunError::new(
                RunErrorKind::InstructionBudget,
                format!(
                    "{} ran for more than {} s of running time (RunLimits::lua_block_time) and \
                     was aborted",
                    self.running_what(),
                    limit.as_secs_f64()
                ),
            )));
        }
        let run_max = self.run.limits.max_run_instructions.get();
        let run_used = self
            .run
            .instructions
            .fetch_add(steps, Ordering::Relaxed)
            .saturating_add(steps);
        if run_used > run_max {
            return Err(self.kill(RunError::new(
                RunErrorKind::InstructionBudget,
                format!(
                    "the run ran past its budget of {run_max} instructions across all its Lua \
                     blocks (RunLimits::max_run_instructions) in {}: the sum of many blocks (a \
                     loop over execute or fanout?)",
                    self.running_what()
                ),
            )));
        }
        if used > budget {
            return Err(self.kill(RunError::new(
                RunErrorKind::InstructionBudget,
                format!(
                    "{} ran past its budget of {budget} instructions \
                     (RunLimits::lua_instructions) and was aborted (an endless loop?)",
                    self.running_what()
                ),
            )));
        }
        Ok(())
    }

    /// What the unit's VM is running, for a budget's message.
    fn running_what(&self) -> &'static str {
        match self.phase() {
            Phase::SharedLoad => "the shared library (```lua shared```)",
            Phase::ToolHandler => "a local tool handler",
            Phase::Body => "a Lua block",
        }
    }

    pub(crate) fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    pub(crate) fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::SharedLoad,
            2 => Phase::ToolHandler,
            _ => Phase::Body,
        }
    }

    pub(crate) fn request_jump(&self, target: Target) {
        *self.jump.lock().unwrap_or_else(PoisonError::into_inner) = Some(target);
    }

    pub(crate) fn take_jump(&self) -> Option<Target> {
        self.jump
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(crate) fn jump_pending(&self) -> bool {
        self.jump
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Resolves a heading address against this unit's visible set ([`Visible`]).
    pub(crate) fn resolve(&self, address: &str) -> Result<Target, RunError> {
        let data = &self.run.prompt.data;
        let shown = crate::error::quote_text(address, 160, false);
        let Some((level, name)) = crate::parse::parse_address(address) else {
            return Err(RunError::new(
                RunErrorKind::Control,
                format!(
                    "`{shown}` is not a section address; write the heading level and name, \
                     such as `## Research`"
                ),
            ));
        };
        if let Some(target) = self.visible.find(data, level, name) {
            return Ok(target);
        }
        // The listing is capped: a level may hold thousands of sections.
        const LISTED: usize = 20;
        let all = self.visible.list(data);
        let mut listed: Vec<String> = all
            .iter()
            .take(LISTED)
            .map(|&id| format!("`{}`", data.sections[id].heading()))
            .collect();
        if all.len() > LISTED {
            listed.push(format!("and {} more", all.len() - LISTED));
        }
        let listing = if listed.is_empty() {
            "none".to_owned()
        } else {
            listed.join(", ")
        };
        let from = if self.arm.is_some() {
            format!("a fanout arm of `{}`", self.heading)
        } else {
            format!("`{}`", self.heading)
        };
        Err(RunError::new(
            RunErrorKind::Control,
            format!("no section `{shown}` is visible from {from}; visible sections: {listing}"),
        ))
    }
}

/// The sections a unit may address with `jump`, `execute`, `fanout` and
/// `list_from_section`, by heading level and name.
#[derive(Debug)]
pub(crate) enum Visible {
    /// The H1 region: the top-level sections.
    Roots,
    /// A section: its siblings (not itself) and its direct children.
    Section(SectionId),
    /// A fanout arm: the set its worker was resolved from, minus the worker, plus the
    /// worker's children (which shadow a same-named section of that set).
    Arm {
        /// The set the worker was resolved from (the fanout caller's).
        from: Arc<Visible>,
        /// The worker section.
        worker: SectionId,
    },
}

impl Visible {
    /// The visible section at `level` named `name`, as a walk target. O(nesting): each
    /// step is a map lookup.
    fn find(&self, data: &PromptData, level: u8, name: &str) -> Option<Target> {
        let lookup = |parent: Option<SectionId>| {
            data.names
                .get(&(parent, name.to_owned()))
                .copied()
                .filter(|&id| data.sections[id].level == level)
        };
        match self {
            Self::Roots => lookup(None).map(|section| Target::Child { section }),
            Self::Section(id) => lookup(data.sections[*id].parent)
                .filter(|s| s != id)
                .map(|section| Target::Sibling { section })
                .or_else(|| lookup(Some(*id)).map(|section| Target::Child { section })),
            // An arm runs outside any walk, so every target starts a walk of its own.
            Self::Arm { from, worker } => lookup(Some(*worker))
                .or_else(|| {
                    from.find(data, level, name)
                        .map(Target::section)
                        .filter(|s| s != worker)
                })
                .map(|section| Target::Child { section }),
        }
    }

    /// Every visible section, for a not-found message: the nearest first.
    fn list(&self, data: &PromptData) -> Vec<SectionId> {
        match self {
            Self::Roots => data.roots.clone(),
            Self::Section(id) => level_of(data, *id)
                .iter()
                .copied()
                .filter(|s| s != id)
                .chain(data.sections[*id].children.iter().copied())
                .collect(),
            Self::Arm { from, worker } => {
                let own = &data.sections[*worker].children;
                let names: std::collections::HashSet<(u8, &str)> = own
                    .iter()
                    .map(|&c| (data.sections[c].level, data.sections[c].name.as_str()))
                    .collect();
                let shadowed = |s: SectionId| {
                    names.contains(&(data.sections[s].level, data.sections[s].name.as_str()))
                };
                let mut all = own.clone();
                all.extend(
                    from.list(data)
                        .into_iter()
                        .filter(|&s| s != *worker && !shadowed(s)),
                );
                all
            }
        }
    }
}

/// The seam the agent layer sees a unit through.
impl Host for Unit {
    fn agent(&self) -> &RunAgent {
        &self.run.agent
    }

    fn scope(&self) -> std::sync::MutexGuard<'_, SectionScope> {
        self.scope.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn heading(&self) -> &str {
        &self.heading
    }

    fn in_section(&self) -> bool {
        self.section.is_some()
    }

    fn in_fanout_arm(&self) -> bool {
        self.arm.is_some()
    }

    fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    fn observe(&self, event: Observation<'_>) {
        self.run.observe(&self.heading, event);
    }

    fn trace(&self) -> &UnitTrace {
        &self.trace
    }
}

/// Starts a unit's span under the walk's: the preamble, a section entry or a fanout arm.
fn unit_span(
    ctx: &WalkCtx,
    section: Option<SectionId>,
    heading: &str,
    id: u64,
    entered: u64,
    arm: &Option<(Json, usize)>,
) -> SpanGuard {
    if !ctx.trace.is_on() {
        return SpanGuard::off();
    }
    let data = &ctx.run.prompt.data;
    let (kind, line) = match (section, arm) {
        (None, _) => (
            SpanKind::Preamble,
            data.h1_blocks.first().map(|block| match block {
                crate::prompt::Block::Lua(chunk) => chunk.line,
                crate::prompt::Block::Prose(prose) => prose.line,
            }),
        ),
        (Some(section), None) => (SpanKind::Section, Some(data.sections[section].line)),
        (Some(section), Some(_)) => (SpanKind::Arm, Some(data.sections[section].line)),
    };
    ctx.trace.start(kind, heading, line, Some(id), |attrs| {
        attrs.number("depth", u64::from(ctx.depth));
        attrs.number("entered", entered);
        if let Some((item, index)) = arm {
            attrs.number("index", *index as u64);
            attrs.json("item", item);
        }
    })
}

/// The sibling list a section belongs to (its parent's children, or the roots).
pub(crate) fn level_of(data: &PromptData, section: SectionId) -> &[SectionId] {
    match data.sections[section].parent {
        Some(parent) => &data.sections[parent].children,
        None => &data.roots,
    }
}
