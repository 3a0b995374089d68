//! Test support: runs async work on its own thread and runtime and waits for it with a
//! deadline, so a run that never yields (an endless Lua loop whose cancellation broke)
//! fails the test instead of hanging it.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

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
