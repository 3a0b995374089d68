//! Execution units and section addressing.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;

use super::{Run, Target, WalkCtx, WalkState, rfc3339};
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
        Arc::new(Self::build(ctx, None, heading(1, title), 0, 0, state, None))
    }

    pub(crate) fn section(
        ctx: &WalkCtx,
        section: SectionId,
        state: &WalkState,
        arm: Option<(Json, usize)>,
    ) -> Result<Arc<Self>, RunError> {
        let (id, entered) = ctx.run.enter()?;
        let heading = ctx.run.prompt.data.sections[section].heading();
        Ok(Arc::new(Self::build(
            ctx,
            Some(section),
            heading,
            id,
            entered,
            state,
            arm,
        )))
    }

    fn build(
        ctx: &WalkCtx,
        section: Option<SectionId>,
        heading: String,
        id: u64,
        entered: u64,
        state: &WalkState,
        arm: Option<(Json, usize)>,
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
                    "a Lua block ran for more than {} s (RunLimits::lua_block_time) and was aborted",
                    limit.as_secs_f64()
                ),
            )));
        }
        if used > budget {
            return Err(self.kill(RunError::new(
                RunErrorKind::InstructionBudget,
                format!(
                    "a Lua block ran past its budget of {budget} instructions                      (RunLimits::lua_instructions) and was aborted (an endless loop?)"
                ),
            )));
        }
        Ok(())
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

    /// Resolves a heading address against this unit's visible set: its siblings (not
    /// itself) and its direct children. The H1 sees the top-level sections.
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
        // O(1) lookups: a level may hold many thousands of sections.
        let lookup = |parent: Option<SectionId>| {
            data.names
                .get(&(parent, name.to_owned()))
                .copied()
                .filter(|&id| data.sections[id].level == level)
        };
        match self.section {
            None => {
                if let Some(section) = lookup(None) {
                    return Ok(Target::Child { section });
                }
            }
            Some(id) => {
                if let Some(section) = lookup(data.sections[id].parent).filter(|&s| s != id) {
                    return Ok(Target::Sibling { section });
                }
                if let Some(section) = lookup(Some(id)) {
                    return Ok(Target::Child { section });
                }
            }
        }
        let (siblings, children) = self.visible(data);
        // The listing is capped: a level may hold thousands of sections.
        const LISTED: usize = 20;
        let total = siblings.len() + children.len();
        let mut visible: Vec<String> = siblings
            .iter()
            .chain(children.iter())
            .take(LISTED)
            .map(|&id| format!("`{}`", data.sections[id].heading()))
            .collect();
        if total > LISTED {
            visible.push(format!("and {} more", total - LISTED));
        }
        let listing = if visible.is_empty() {
            "none".to_owned()
        } else {
            visible.join(", ")
        };
        Err(RunError::new(
            RunErrorKind::Control,
            format!(
                "no section `{shown}` is visible from `{}`; visible sections: {listing}",
                self.heading
            ),
        ))
    }

    fn visible<'d>(&self, data: &'d PromptData) -> (Vec<SectionId>, &'d [SectionId]) {
        match self.section {
            None => (Vec::new(), &data.roots),
            Some(id) => {
                let siblings = level_of(data, id)
                    .iter()
                    .copied()
                    .filter(|&s| s != id)
                    .collect();
                (siblings, &data.sections[id].children)
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
