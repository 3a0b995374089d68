//! Boot and serve: everything between a parsed command line and a listening socket.

use std::io::Write;
use std::path::Path;

use tokio::net::TcpListener;

use crate::config::ConfigError;
use crate::routes;
use crate::state;

/// Why the gateway could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is broken; nothing was bound.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Binding the socket failed.
    #[error("cannot bind {bind}: {source}")]
    Bind {
        /// The address from `[server] bind`.
        bind: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// Loads the configuration, binds and serves until Ctrl-C or SIGTERM, then drains (see
/// [`crate::conn::serve`]).
///
/// The configuration is fully built and validated before the socket is bound, so a broken
/// configuration never reaches a listening socket. Once bound, one line
/// `listening on http://ADDR` goes to stdout (the real port when `bind` uses port 0).
pub async fn serve(boot_file: &Path, profile: &str) -> Result<(), ServeError> {
    let booted = state::boot(boot_file, profile).await?;
    let listener = TcpListener::bind(&booted.bind)
        .await
        .map_err(|source| ServeError::Bind {
            bind: booted.bind.clone(),
            source,
        })?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, profile, "listening");
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);
    let limits = booted.limits;
    crate::conn::serve(
        listener,
        routes::app(booted.state),
        limits,
        shutdown_signal(),
        booted.shutdown,
    )
    .await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
