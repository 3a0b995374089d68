//! Boot and serve: everything between a parsed command line and a listening socket.

use std::io::Write;
use std::path::Path;

use std::net::SocketAddr;

use tokio::net::TcpSocket;
use tokio::sync::{oneshot, watch};

use std::sync::Arc;

use crate::app;
use crate::config::{ConfigError, EnvLayers};
use crate::conn;
use crate::relay::http::HttpTransport;

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

/// Most I/O threads the gateway starts, whatever the core count.
const MAX_IO_THREADS: usize = 64;
/// The listen backlog of each listener (tokio's default for `TcpListener::bind`).
const BACKLOG: u32 = 1024;

/// Loads the configuration, binds and serves until Ctrl-C or SIGTERM, then drains (see
/// [`crate::conn::drain`]).
///
/// The configuration is fully built and validated before the socket is bound, so a broken
/// configuration never reaches a listening socket. Once bound, one line
/// `listening on http://ADDR` goes to stdout (the real port when `bind` uses port 0).
///
/// Requests are served by one single-threaded runtime per core (nginx's model), each on
/// its own thread with its own listener on the same address (`SO_REUSEPORT`, so the
/// kernel spreads connections over them): a connection and everything its requests do
/// stay on the thread that accepted it, with no hop between threads per request. The
/// caller's runtime keeps the boot-time tasks (local children, signals) and the drain.
pub async fn serve(boot_file: &Path, profile: &str) -> Result<(), ServeError> {
    let booted = app::boot(
        boot_file,
        profile,
        EnvLayers::new(),
        Arc::new(HttpTransport),
    )
    .await?;
    let threads = io_threads();
    let bind_error = |source| ServeError::Bind {
        bind: booted.bind.clone(),
        source,
    };
    let sockets = bind_sockets(&booted.bind, threads)
        .await
        .map_err(bind_error)?;
    let addr = sockets
        .first()
        .map(TcpSocket::local_addr)
        .transpose()?
        .ok_or_else(|| std::io::Error::other("no socket was bound"))?;
    let limits = booted.limits;
    let plans = booted.plans.clone();
    let app = booted.service.clone();
    let gate = conn::Gate::new(&limits);
    let (closing_tx, closing) = watch::channel(false);
    let (exit_tx, exit) = watch::channel(false);
    let mut ready = Vec::with_capacity(sockets.len());
    let mut handles = Vec::with_capacity(sockets.len());
    for (index, socket) in sockets.into_iter().enumerate() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (listening_tx, listening) = oneshot::channel();
        ready.push(listening);
        let (app, gate, closing, mut exit) =
            (app.clone(), gate.clone(), closing.clone(), exit.clone());
        let plans = plans.clone();
        let handle = std::thread::Builder::new()
            .name(format!("gateway-io-{index}"))
            .spawn(move || {
                runtime.block_on(async move {
                    // This thread's upstream clients, before it serves (boot checked that
                    // they can be built).
                    let _ = HttpTransport.warm(&plans.load());
                    drop(plans);
                    // `listen` registers the socket with this thread's runtime.
                    let listener = match socket.listen(BACKLOG) {
                        Ok(listener) => listener,
                        Err(err) => {
                            let _ = listening_tx.send(Err(err));
                            return;
                        }
                    };
                    let _ = listening_tx.send(Ok(()));
                    conn::accept_loop(listener, app, limits, gate, closing).await;
                    // The connections are this runtime's tasks: keep driving them through
                    // the drain.
                    let _ = exit.wait_for(|exit| *exit).await;
                });
            })?;
        handles.push(handle);
    }
    for listening in ready {
        match listening.await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => return Err(bind_error(source)),
            Err(_) => return Err(ServeError::Io(std::io::Error::other("an I/O thread died"))),
        }
    }
    tracing::info!(%addr, profile, threads = handles.len(), "listening");
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);
    shutdown_signal().await;
    let _ = closing_tx.send(true);
    conn::drain(&gate, limits, booted.shutdown).await;
    let _ = exit_tx.send(true);
    let _ = tokio::task::spawn_blocking(move || {
        for handle in handles {
            let _ = handle.join();
        }
    })
    .await;
    if let Some(shared) = &booted.shared {
        shared.leave().await;
    }
    if let Some(export) = booted.export {
        let report = export.finish().await;
        if report.failed > 0 || report.dropped > 0 || !report.errors.is_empty() {
            tracing::warn!(
                exported = report.exported,
                failed = report.failed,
                dropped = report.dropped,
                errors = ?report.errors,
                "OTLP export incomplete"
            );
        }
    }
    Ok(())
}

/// How many I/O threads serve requests: one per core the process may use (at most
/// [`MAX_IO_THREADS`]); one where `SO_REUSEPORT` is not available.
fn io_threads() -> usize {
    if cfg!(unix) {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, MAX_IO_THREADS)
    } else {
        1
    }
}

/// Binds `count` sockets to `bind` (`SO_REUSEPORT` on each, so they share the address):
/// the first to the first resolved address that binds, the others to the exact address
/// it got (its real port when `bind` asks for port 0). Not listening yet.
async fn bind_sockets(bind: &str, count: usize) -> std::io::Result<Vec<TcpSocket>> {
    let mut last_error = None;
    let mut first = None;
    for addr in tokio::net::lookup_host(bind).await? {
        match bound_socket(addr) {
            Ok(socket) => {
                first = Some(socket);
                break;
            }
            Err(err) => last_error = Some(err),
        }
    }
    let first = match (first, last_error) {
        (Some(socket), _) => socket,
        (None, Some(err)) => return Err(err),
        (None, None) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the address resolved to nothing",
            ));
        }
    };
    let addr = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(bound_socket(addr)?);
    }
    Ok(sockets)
}

fn bound_socket(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    {
        socket.set_reuseaddr(true)?;
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    Ok(socket)
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
