//! The process-test harness: the real `promptforge-gateway` binary spawned against the
//! scripted upstream (the upstream and the configurations are the in-process tests' own,
//! `src/tests/upstream.rs`, included by path).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

#[path = "../../src/tests/upstream.rs"]
mod upstream;
pub use upstream::*;

/// A running gateway process; killed on drop.
pub struct Gateway {
    child: Child,
    pub http: Http,
    pub stderr: Arc<Mutex<String>>,
}

impl std::ops::Deref for Gateway {
    type Target = Http;

    fn deref(&self) -> &Http {
        &self.http
    }
}

/// The environment every test gateway gets.
pub fn base_env() -> Vec<(String, String)> {
    vec![
        ("GW_TEST_KEY".into(), KEY.into()),
        ("GW_UPSTREAM_KEY".into(), UPSTREAM_KEY.into()),
    ]
}

fn command(args: &[&str], env: &[(String, String)], remove: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_promptforge-gateway"));
    if let Some(cwd) = CWD.with_borrow(Clone::clone) {
        cmd.current_dir(cwd);
    }
    for name in remove {
        cmd.env_remove(name);
    }
    cmd.args(args)
        .env_remove("PROMPTFORGE_GATEWAY_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

thread_local! {
    /// The working directory of the next spawned gateway ([`Gateway::start_in`]).
    static CWD: std::cell::RefCell<Option<std::path::PathBuf>> =
        const { std::cell::RefCell::new(None) };
}

impl Gateway {
    /// Boots the binary with `args` from the working directory `cwd`.
    pub async fn start_in(cwd: &Path, args: &[&str], env: &[(String, String)]) -> Self {
        CWD.with_borrow_mut(|slot| *slot = Some(cwd.to_path_buf()));
        let gw = Self::start_args(args, env).await;
        CWD.with_borrow_mut(|slot| *slot = None);
        gw
    }

    /// Boots `serve <boot> --profile <profile>` and waits for the listening line.
    pub async fn start(boot: &Path, profile: &str, env: &[(String, String)]) -> Self {
        Self::start_args(
            &["serve", boot.to_str().unwrap(), "--profile", profile],
            env,
        )
        .await
    }

    /// Boots the binary with `args` and waits for the listening line.
    pub async fn start_args(args: &[&str], env: &[(String, String)]) -> Self {
        Self::start_args_without(args, env, &[]).await
    }

    /// Like [`Gateway::start_args`], with `remove` taken out of the inherited environment.
    pub async fn start_args_without(
        args: &[&str],
        env: &[(String, String)],
        remove: &[&str],
    ) -> Self {
        let mut child = command(args, env, remove).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = BufReader::new(child.stderr.take().unwrap());
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut line = String::new();
            while err_pipe.read_line(&mut line).await.unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = out.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return url.to_owned();
                }
            }
            panic!(
                "gateway exited before listening: {}",
                stderr.lock().unwrap()
            );
        })
        .await
        .expect("gateway did not start listening");
        Self {
            child,
            http: Http::new(url),
            stderr,
        }
    }

    /// Boots [`boot_with`] with the main profile.
    pub async fn with_limits(
        upstream: &Upstream,
        server_extra: &str,
        endpoint_extra: &str,
    ) -> (Self, ConfigDir) {
        let dir = ConfigDir::new();
        dir.write(
            "gateway.toml",
            &boot_with(&upstream.url, server_extra, endpoint_extra),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Self::start(&dir.boot(), "main", &base_env()).await;
        (gw, dir)
    }

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// Sends SIGTERM without waiting for the exit.
    pub fn signal_term(&self) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Boots the standard configuration with the main profile.
    pub async fn standard(upstream: &Upstream) -> (Self, ConfigDir) {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", &standard_boot(&upstream.url));
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Self::start(&dir.boot(), "main", &base_env()).await;
        (gw, dir)
    }

    pub fn logs(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits (bounded) for the exit; returns the exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the gateway did not exit after SIGTERM")
            .unwrap();
        exit.code()
    }

    /// Waits (bounded) for an exit already under way; returns the exit code.
    pub async fn terminate_wait(&mut self) -> Option<i32> {
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the gateway did not exit after SIGTERM")
            .unwrap()
            .code()
    }

    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Runs the binary expecting it to exit (a boot failure); returns (code, stderr).
pub async fn run_to_exit(args: &[&str], env: &[(String, String)]) -> (Option<i32>, String) {
    let mut child = command(args, env, &[]).spawn().unwrap();
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        pipe.read_to_string(&mut stderr).await.unwrap();
        child.wait().await.unwrap()
    })
    .await
    .expect("the gateway did not exit (a broken config must never reach a listening socket)");
    (status.code(), stderr)
}

/// Boots `boot` + `profile` expecting a failure; returns stderr.
pub async fn boot_failure(dir: &ConfigDir, profile: &str) -> String {
    let boot = dir.boot();
    let (code, stderr) = run_to_exit(
        &["serve", boot.to_str().unwrap(), "--profile", profile],
        &base_env(),
    )
    .await;
    assert_ne!(
        code,
        Some(0),
        "expected a boot failure, got success: {stderr}"
    );
    assert!(
        !stderr.contains("listening"),
        "a broken config reached a socket: {stderr}"
    );
    stderr
}

/// Waits (bounded) for `cond`.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    cond()
}

/// Polls an async condition (bounded).
pub async fn eventually_async<F, Fut>(mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..400 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}
