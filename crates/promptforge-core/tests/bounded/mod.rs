//! Test support: runs async work on its own thread and runtime and waits for it with a
//! deadline, so a run that never yields (an endless Lua loop whose cancellation broke)
//! fails the test instead of hanging it.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

use promptforge_core::{RunError, RunErrorKind};

/// Runs `work()` on a fresh two-worker tokio runtime on its own thread; `None` when it has
/// not finished within `deadline` (the thread is left to the process's end).
pub fn on_own_runtime<T, F, Fut>(deadline: Duration, work: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let _ = tx.send(runtime.block_on(work()));
    });
    rx.recv_timeout(deadline).ok()
}

/// The error of a run that had to fail with `kind`, its text holding every fragment. Every
/// error a suite checks this way is also checked to read as one clean line: no newline and
/// no run of spaces (issue 26: messages once carried source indentation).
#[track_caller]
pub fn expect(
    result: Result<String, RunError>,
    kind: RunErrorKind,
    fragments: &[&str],
) -> RunError {
    let error = match result {
        Ok(value) => panic!("expected a {kind} error, got Ok({value:?})"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), kind, "{error}");
    let shown = error.to_string();
    for fragment in fragments {
        assert!(shown.contains(fragment), "`{shown}` lacks `{fragment}`");
    }
    assert!(
        !shown.contains("   ") && !shown.contains('\n'),
        "not one clean line: {shown:?}"
    );
    error
}
