//! A real `redis-server` for the shared-dominion tests: the distribution's binary (which
//! `scripts/test.sh` installs), started per test on a free loopback port with no
//! persistence, stopped on drop. Shared by the in-process and the process tests.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running `redis-server` on 127.0.0.1; killed on drop.
pub struct Redis {
    child: Option<Child>,
    /// `requirepass`, when set.
    password: Option<String>,
    /// Its port (kept across [`Redis::stop`] and [`Redis::start_again`]).
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Redis {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Starts a server that demands `password` (`requirepass`).
    pub async fn start_with_password(password: &str) -> Self {
        Self::start_with(Some(password.to_owned())).await
    }

    async fn start_with(password: Option<String>) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = Self {
            child: None,
            password,
            port,
            dir: tempfile::tempdir().unwrap(),
        };
        redis.start_again().await;
        redis
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the (stopped) server again on the same port, empty.
    pub async fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        let mut command = Command::new("redis-server");
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        let child = command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", self.dir.path().to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| {
                panic!("cannot start redis-server ({err}); scripts/test.sh installs it (apt package redis-server)")
            });
        self.child = Some(child);
        for _ in 0..200 {
            if self.ping().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server on port {} did not answer PING", self.port);
    }

    /// Kills the server (SIGKILL: nothing is saved) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends the server `signal` (`STOP` freezes it: connections stay open and nothing
    /// answers, a store that is slow rather than gone; `CONT` resumes it).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("the server is running").id();
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Whether the server answers `PING` right now (a server with a password answers
    /// that it wants one: it is up).
    pub async fn ping(&self) -> bool {
        self.command(&["PING"])
            .await
            .is_some_and(|line| line == "+PONG" || line.starts_with("-NOAUTH"))
    }

    /// Sends one command (RESP) and returns the first line of the answer.
    pub async fn command(&self, args: &[&str]) -> Option<String> {
        let connect = tokio::net::TcpStream::connect(("127.0.0.1", self.port));
        let mut stream = tokio::time::timeout(Duration::from_secs(1), connect)
            .await
            .ok()?
            .ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        text.lines().next().map(str::to_owned)
    }
}

/// A `[dominion_store]` table for `redis` under `prefix`, with a short lease (2 s).
pub fn store_table(redis: &Redis, prefix: &str) -> String {
    store_table_with_lease(redis, prefix, "2s")
}

/// A `[dominion_store]` table for `redis` under `prefix` with leases of `lease_ttl`.
pub fn store_table_with_lease(redis: &Redis, prefix: &str, lease_ttl: &str) -> String {
    format!(
        "\n[dominion_store]\nurl = \"{}\"\nkey_prefix = \"{prefix}\"\nlease_ttl = \"{lease_ttl}\"\ntimeout = \"500ms\"\nconnect_timeout = \"500ms\"\n",
        redis.url()
    )
}
