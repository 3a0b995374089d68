//! Cooperative cancellation.

use tokio_util::sync::CancellationToken;

/// A caller-held handle that cancels a run.
///
/// Cancellation is cooperative: it reaches the Lua instruction hook, tool calls, model calls
/// and every fanout arm, and the run returns a [`RunError`](crate::RunError) whose
/// `is_cancelled()` is true. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct CancelHandle {
    token: CancellationToken,
}

impl CancelHandle {
    /// A handle that has not been cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every run holding this handle (or a clone of it).
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Whether [`CancelHandle::cancel`] has been called.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}
