//! One `llama-server` child: launch, readiness, logs, respawn and kill.
//!
//! Lifetime design (no `unsafe`, no `PR_SET_PDEATHSIG`): the child is started through a
//! tiny POSIX `sh` guard in its own process group. The gateway holds the write end of
//! the guard's stdin; a background branch of the guard blocks reading it. When the gateway
//! goes away for any reason, SIGKILL included, the kernel closes that pipe, the read ends
//! and the guard sends `llama-server` SIGTERM. Dropping a [`LocalChild`] kills the whole
//! process group with SIGKILL and reaps it. The guard exits as soon as `llama-server`
//! does, so a dead child is visible to [`LocalChild::is_dead`].

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::secret::Secret;

/// Lines of the child's stderr kept for a boot error.
pub(crate) const STDERR_TAIL_LINES: usize = 40;
/// How long a transport failure waits for a dying child's guard to exit before the
/// failure is treated as not a death (and answered as is).
pub(crate) const DEATH_GRACE: Duration = Duration::from_secs(1);
/// Longest log line forwarded (longer lines are cut).
const MAX_LOG_LINE_BYTES: usize = 8 * 1024;

/// The guard: `$1` is the binary, the rest its arguments. Prints the server's pid first.
const GUARD: &str = r#"exec 3<&0 0</dev/null
"$@" 3<&- &
c=$!
echo "$c"
{ read -r _ <&3; kill -TERM "$c" 2>/dev/null; } &
w=$!
exec 3<&-
wait "$c"
s=$?
kill "$w" 2>/dev/null
exit "$s"
"#;

/// Why a child did not come up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChildError {
    /// The process could not be spawned.
    #[error("local model {model}: cannot start {binary}: {source}")]
    Spawn {
        /// The model.
        model: String,
        /// The binary.
        binary: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The child exited or did not answer `/health` 200 in time.
    #[error("local model {model}: llama-server {reason}; last stderr lines:\n{tail}")]
    NotReady {
        /// The model.
        model: String,
        /// What happened.
        reason: String,
        /// The tail of its stderr.
        tail: String,
    },
    /// The bearer file could not be written.
    #[error("local model {model}: cannot write the bearer file {path}: {source}")]
    KeyFile {
        /// The model.
        model: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Everything needed to (re)start one child.
#[derive(Debug, Clone)]
pub(crate) struct ChildSpec {
    /// The model name (log tag, `--alias`).
    pub model: String,
    /// The `llama-server` binary.
    pub binary: PathBuf,
    /// The loopback port, fixed for the child's life (respawns reuse it).
    pub port: u16,
    /// Arguments after the binary.
    pub args: Vec<String>,
    /// The owner-only file holding the bearer (`--api-key-file`).
    pub key_file: PathBuf,
    /// `/health` deadline.
    pub ready_timeout: Duration,
}

/// A running process group.
#[derive(Debug)]
struct Proc {
    guard: Child,
    /// Held open: closing it makes the guard stop the server.
    _lifeline: ChildStdin,
    server_pid: Option<u32>,
}

impl Proc {
    fn kill(mut self) {
        if let Some(pgid) = rustix::process::Pid::from_raw(self.guard.id() as i32) {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        let _ = self.guard.kill();
        let _ = self.guard.wait();
        // The server was in the same group; wait (bounded) until it is gone so its
        // memory and port are free before anything new starts.
        if let Some(pid) = self
            .server_pid
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let deadline = Instant::now() + Duration::from_secs(5);
            while rustix::process::test_kill_process(pid).is_ok()
                && !is_zombie(pid.as_raw_nonzero().get())
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A reparented child that died but was not reaped yet holds no resources.
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// One supervised `llama-server`.
#[derive(Debug)]
pub(crate) struct LocalChild {
    spec: ChildSpec,
    bearer: Secret,
    key_file: PathBuf,
    proc: Mutex<Option<Proc>>,
    /// Stopped for a profile switch: a dead child is not respawned.
    retired: std::sync::atomic::AtomicBool,
    /// Serialises respawns.
    respawning: tokio::sync::Mutex<()>,
    /// How many respawns happened.
    respawns: std::sync::atomic::AtomicU64,
    tail: Arc<Mutex<VecDeque<String>>>,
    http: reqwest::Client,
}

impl LocalChild {
    /// Writes the bearer file (owner-only) and starts the child; waits for readiness.
    pub(crate) async fn start(spec: ChildSpec, bearer: Secret) -> Result<Self, ChildError> {
        let key_file = spec.key_file.clone();
        write_key_file(&key_file, &bearer).map_err(|source| ChildError::KeyFile {
            model: spec.model.clone(),
            path: key_file.clone(),
            source,
        })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|err| ChildError::NotReady {
                model: spec.model.clone(),
                reason: format!("no HTTP client: {err}"),
                tail: String::new(),
            })?;
        let child = Self {
            spec,
            bearer,
            key_file,
            proc: Mutex::new(None),
            retired: std::sync::atomic::AtomicBool::new(false),
            respawning: tokio::sync::Mutex::new(()),
            respawns: std::sync::atomic::AtomicU64::new(0),
            tail: Arc::new(Mutex::new(VecDeque::new())),
            http,
        };
        child.launch().await?;
        Ok(child)
    }

    /// The spec it runs with.
    pub(crate) fn spec(&self) -> &ChildSpec {
        &self.spec
    }

    /// The bearer the child demands.
    pub(crate) fn bearer(&self) -> &Secret {
        &self.bearer
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.spec.port)
    }

    /// The `llama-server` process id, while it runs.
    pub(crate) fn server_pid(&self) -> Option<u32> {
        self.proc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|p| p.server_pid)
    }

    /// How many times it was respawned.
    pub(crate) fn respawn_count(&self) -> u64 {
        self.respawns.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the child has exited (or was stopped).
    pub(crate) fn is_dead(&self) -> bool {
        let mut guard = self.proc.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_mut() {
            None => true,
            Some(p) => !matches!(p.guard.try_wait(), Ok(None)),
        }
    }

    /// Kills the child's process group and waits until it is gone.
    pub(crate) fn stop(&self) {
        let taken = self
            .proc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(p) = taken {
            p.kill();
            tracing::info!(model = %self.spec.model, "stopped llama-server");
        }
    }

    /// Respawns the child when it is dead (once per observed death: concurrent callers that
    /// saw the same death share one respawn). `seen` is [`Self::respawn_count`] taken
    /// before the failed request. Returns whether the child is now believed alive.
    pub(crate) async fn respawn_if_dead(&self, seen: u64) -> Result<bool, ChildError> {
        let _serial = self.respawning.lock().await;
        if self.respawn_count() != seen {
            return Ok(true);
        }
        if self.retired.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(false);
        }
        // The server may be gone while its guard is still exiting: give it a moment.
        let deadline = Instant::now() + DEATH_GRACE;
        while !self.is_dead() {
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(model = %self.spec.model, port = self.spec.port, "llama-server died; respawning it");
        self.stop();
        self.launch().await?;
        self.respawns
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(true)
    }

    /// Stops the child for good (a profile switch): it is not respawned after this.
    pub(crate) fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.stop();
    }

    /// Whether [`Self::retire`] stopped it.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(std::sync::atomic::Ordering::SeqCst)
    }

    async fn launch(&self) -> Result<(), ChildError> {
        let spec = &self.spec;
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(GUARD)
            .arg("llama-server-guard")
            .arg(&spec.binary)
            .args(&spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let mut guard = command.spawn().map_err(|source| ChildError::Spawn {
            model: spec.model.clone(),
            binary: spec.binary.clone(),
            source,
        })?;
        let lifeline = guard.stdin.take();
        let stdout = guard.stdout.take();
        let stderr = guard.stderr.take();
        let (pid_tx, pid_rx) = std::sync::mpsc::channel();
        if let Some(stdout) = stdout {
            let model = spec.model.clone();
            std::thread::spawn(move || forward_stdout(stdout, &model, &pid_tx));
        }
        if let Some(stderr) = stderr {
            let model = spec.model.clone();
            let tail = self.tail.clone();
            std::thread::spawn(move || forward_stderr(stderr, &model, &tail));
        }
        let server_pid = pid_rx.recv_timeout(Duration::from_secs(5)).ok();
        let Some(lifeline) = lifeline else {
            let _ = guard.kill();
            let _ = guard.wait();
            return Err(self.not_ready("has no stdin pipe".into()));
        };
        *self.proc.lock().unwrap_or_else(PoisonError::into_inner) = Some(Proc {
            guard,
            _lifeline: lifeline,
            server_pid,
        });
        tracing::info!(model = %spec.model, port = spec.port, pid = server_pid, "started llama-server");
        match self.wait_ready().await {
            Ok(()) => {
                tracing::info!(model = %spec.model, port = spec.port, "llama-server ready");
                Ok(())
            }
            Err(reason) => {
                self.stop();
                // The stderr reader may still be draining the last lines.
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(self.not_ready(reason))
            }
        }
    }

    async fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + self.spec.ready_timeout;
        let url = format!("{}/health", self.base_url());
        loop {
            if self.is_dead() {
                return Err("exited before it was ready".into());
            }
            if let Ok(response) = self.http.get(&url).send().await
                && response.status().is_success()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "did not answer /health 200 within {}",
                    humantime::format_duration(self.spec.ready_timeout)
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn not_ready(&self, reason: String) -> ChildError {
        let tail = self
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        ChildError::NotReady {
            model: self.spec.model.clone(),
            reason,
            tail,
        }
    }

    /// `GET /props` (bearer-authenticated), for the dialect probe.
    pub(crate) async fn props(&self) -> Result<serde_json::Value, String> {
        let response = self
            .http
            .get(format!("{}/props", self.base_url()))
            .bearer_auth(self.bearer.expose())
            .send()
            .await
            .map_err(|err| format!("GET /props failed: {err}"))?;
        if !response.status().is_success() {
            return Err(format!("GET /props answered {}", response.status()));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|err| format!("GET /props body: {err}"))?;
        serde_json::from_slice(&bytes).map_err(|err| format!("GET /props is not JSON: {err}"))
    }
}

impl Drop for LocalChild {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.key_file);
    }
}

/// A file-name-safe form of a model name.
pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes the bearer to an owner-only file, atomically (temp file + rename).
fn write_key_file(path: &Path, bearer: &Secret) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp)?;
    file.write_all(bearer.expose().as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)
}

/// A fresh random bearer (32 bytes from the OS, hex).
pub(crate) fn generate_bearer() -> std::io::Result<Secret> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(Secret::new(
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    ))
}

fn lines(reader: impl Read) -> impl Iterator<Item = String> {
    let mut reader = BufReader::new(reader);
    std::iter::from_fn(move || {
        let mut buf = Vec::new();
        match (&mut reader)
            .take(MAX_LOG_LINE_BYTES as u64)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(String::from_utf8_lossy(&buf).trim_end().to_owned()),
        }
    })
}

fn forward_stdout(stdout: impl Read, model: &str, pid: &std::sync::mpsc::Sender<u32>) {
    let mut first = true;
    for line in lines(stdout) {
        if first {
            first = false;
            if let Ok(p) = line.trim().parse::<u32>() {
                let _ = pid.send(p);
                continue;
            }
        }
        tracing::info!(target: "llama_server", model, "{line}");
    }
}

fn forward_stderr(stderr: impl Read, model: &str, tail: &Mutex<VecDeque<String>>) {
    for line in lines(stderr) {
        if line.is_empty() {
            continue;
        }
        tracing::info!(target: "llama_server", model, "{line}");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}
