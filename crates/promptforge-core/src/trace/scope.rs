//! The recording side the walk and the agent layer use: a [`Scope`] is "record children
//! under this span" (or nothing, when the run is not traced), a [`SpanGuard`] an open span
//! that ends as cancelled if it is dropped unended, a [`UnitTrace`] an execution unit's
//! span and the span its Lua currently runs under.

use std::sync::{Arc, Mutex, PoisonError};

use super::attrs::Attrs;
use super::{Recorder, Slot, SpanKind, SpanStatus, traceparent};
use crate::error::{RunError, RunErrorKind};

/// How a span ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End<'a> {
    /// Normally.
    Ok,
    /// With a run error (a cancellation is recorded as cancelled).
    Error(&'a RunError),
    /// With a failure that is not a run error: `(kind, message)`, such as a tool failure
    /// the model was told about.
    Failed(&'a str, &'a str),
}

impl End<'_> {
    fn status(self) -> (SpanStatus, Option<(String, String)>) {
        match self {
            Self::Ok => (SpanStatus::Ok, None),
            Self::Error(error) if error.kind() == RunErrorKind::Cancelled => {
                (SpanStatus::Cancelled, None)
            }
            Self::Error(error) => (
                SpanStatus::Error,
                Some((error.kind().as_str().to_owned(), error.to_string())),
            ),
            Self::Failed(kind, message) => (
                SpanStatus::Error,
                Some((kind.to_owned(), message.to_owned())),
            ),
        }
    }
}

/// Where new spans go: under `slot` of `recorder`, or nowhere when tracing is off.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    recorder: Option<Arc<Recorder>>,
    slot: Slot,
}

impl Scope {
    /// No tracing: every call is a no-op.
    pub(crate) fn off() -> Self {
        Self::default()
    }

    pub(super) fn root(recorder: Arc<Recorder>) -> Self {
        Self {
            recorder: Some(recorder),
            slot: None,
        }
    }

    /// Whether spans are recorded.
    pub(crate) fn is_on(&self) -> bool {
        self.recorder.is_some()
    }

    /// Starts a child span; `attrs` runs only when tracing is on.
    pub(crate) fn start(
        &self,
        kind: SpanKind,
        name: &str,
        line: Option<usize>,
        unit: Option<u64>,
        attrs: impl FnOnce(&mut Attrs),
    ) -> SpanGuard {
        let Some(recorder) = &self.recorder else {
            return SpanGuard::off();
        };
        let mut built = recorder.attrs();
        attrs(&mut built);
        let own = recorder.start(self.slot, kind, name, line, unit, built);
        SpanGuard {
            scope: Self {
                recorder: Some(Arc::clone(recorder)),
                // A span past `max_spans` is not kept: its children hang under its parent.
                slot: own.or(self.slot),
            },
            own,
        }
    }

    /// Records an instant (a span that starts and ends at once).
    pub(crate) fn instant(
        &self,
        kind: SpanKind,
        name: &str,
        line: Option<usize>,
        end: End<'_>,
        attrs: impl FnOnce(&mut Attrs),
    ) {
        if self.is_on() {
            self.start(kind, name, line, None, attrs).end(end, |_| {});
        }
    }

    /// The `traceparent` naming this scope's span as the caller.
    pub(crate) fn traceparent(&self) -> Option<String> {
        let recorder = self.recorder.as_ref()?;
        let span = recorder.span_id(self.slot?)?;
        Some(traceparent(recorder.trace_id(), span))
    }

    /// Redacts `secret` from everything recorded from now on.
    pub(crate) fn add_secret(&self, secret: &str) {
        if let Some(recorder) = &self.recorder {
            recorder.add_secret(secret);
        }
    }
}

/// An open span. Dropping it unended records it as cancelled (its future was dropped).
#[derive(Default)]
pub(crate) struct SpanGuard {
    scope: Scope,
    own: Slot,
}

impl SpanGuard {
    /// A guard that records nothing.
    pub(crate) fn off() -> Self {
        Self::default()
    }

    /// The scope for this span's children.
    pub(crate) fn scope(&self) -> Scope {
        self.scope.clone()
    }

    /// Whether tracing is on.
    pub(crate) fn is_on(&self) -> bool {
        self.scope.is_on()
    }

    /// Ends the span; `attrs` (end-time attributes) runs only when tracing is on.
    pub(crate) fn end(mut self, end: End<'_>, attrs: impl FnOnce(&mut Attrs)) {
        self.finish(end, attrs);
    }

    fn finish(&mut self, end: End<'_>, attrs: impl FnOnce(&mut Attrs)) {
        let (Some(recorder), Some(slot)) = (&self.scope.recorder, self.own.take()) else {
            return;
        };
        let mut built = recorder.attrs();
        attrs(&mut built);
        let (status, error) = end.status();
        recorder.end(slot, status, error, built);
    }
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        if let (Some(recorder), Some(slot)) = (&self.scope.recorder, self.own.take()) {
            recorder.end(slot, SpanStatus::Cancelled, None, recorder.attrs());
        }
    }
}

/// An execution unit's span, and the span its Lua runs under right now (a local tool
/// handler runs under its tool call, so its store writes nest there).
#[derive(Default)]
pub(crate) struct UnitTrace {
    span: Mutex<Option<SpanGuard>>,
    base: Scope,
    stack: Mutex<Vec<Scope>>,
}

impl UnitTrace {
    pub(crate) fn new(span: SpanGuard) -> Self {
        Self {
            base: span.scope(),
            span: Mutex::new(Some(span)),
            stack: Mutex::new(Vec::new()),
        }
    }

    /// Whether tracing is on.
    pub(crate) fn is_on(&self) -> bool {
        self.base.is_on()
    }

    /// The unit's own span.
    pub(crate) fn base(&self) -> Scope {
        self.base.clone()
    }

    /// The innermost open span of the unit.
    pub(crate) fn current(&self) -> Scope {
        if !self.base.is_on() {
            return Scope::off();
        }
        self.stack
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .cloned()
            .unwrap_or_else(|| self.base.clone())
    }

    /// Makes `scope` the unit's innermost span until the returned guard drops.
    pub(crate) fn enter(&self, scope: Scope) -> Entered<'_> {
        let pushed = scope.is_on();
        if pushed {
            self.stack
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(scope);
        }
        Entered {
            trace: self,
            pushed,
        }
    }

    /// Ends the unit's span.
    pub(crate) fn finish(&self, end: End<'_>, attrs: impl FnOnce(&mut Attrs)) {
        let span = self
            .span
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(span) = span {
            span.end(end, attrs);
        }
    }
}

/// Leaves a scope entered with [`UnitTrace::enter`] when dropped.
pub(crate) struct Entered<'a> {
    trace: &'a UnitTrace,
    pushed: bool,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if self.pushed {
            self.trace
                .stack
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
        }
    }
}
