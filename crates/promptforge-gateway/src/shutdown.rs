//! The end of shutdown's drain: the moment in-flight requests and open streams are ended
//! with a clear `shutting_down` error instead of a bare connection close.

use tokio::sync::watch;

/// Fires [`Shutdown`] once; held by the server loop.
#[derive(Debug)]
pub(crate) struct ShutdownTrigger(watch::Sender<bool>);

/// Resolves once the drain has ended; cloned into every handler and stream.
#[derive(Debug, Clone)]
pub(crate) struct Shutdown(watch::Receiver<bool>);

/// A trigger and its first receiver.
pub(crate) fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    /// Ends every in-flight request and stream (each answers `shutting_down`).
    pub(crate) fn fire(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// Waits until the trigger fires (forever when it is dropped unfired).
    pub(crate) async fn fired(&mut self) {
        if self.0.wait_for(|fired| *fired).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
