//! A real headless browser for the trace viewer's tests: Debian's Chromium
//! (`/usr/bin/chromium`, or `PROMPTFORGE_CHROMIUM`) driven by `playwright-core` from npm
//! (installed by `scripts/test.sh` under `.tools/npm`), through `browser/steps.cjs`.
//!
//! A test hands [`Browser::run`] a list of steps (`goto`, `wait`, `click`, `fill`, `text`,
//! `texts`, `attr`, `count`, `eval`, `screenshot`, and `signal`, which writes a file the
//! test can wait for to act while the page is open) and asserts on what they read.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// The driver script.
const SCRIPT: &str = include_str!("../browser/steps.cjs");

/// How long one browser session may take in all.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(180);

/// The repository root (this crate sits in `crates/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where tests keep artifacts such as screenshots: `target/test-artifacts/`.
pub fn artifacts_dir() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from);
    target.join("test-artifacts")
}

/// The parts of a browser session.
#[derive(Debug, Clone)]
pub struct Browser {
    chromium: PathBuf,
    playwright: PathBuf,
}

impl Browser {
    /// Finds Chromium and playwright-core; the error says how to install them.
    ///
    /// # Errors
    /// When either is missing.
    pub fn locate() -> Result<Self, String> {
        let chromium = std::env::var_os("PROMPTFORGE_CHROMIUM")
            .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
        let playwright = repo().join(".tools/npm/node_modules/playwright-core");
        if !chromium.is_file() {
            return Err(format!(
                "no Chromium at {} (scripts/test.sh installs Debian's chromium)",
                chromium.display()
            ));
        }
        if !playwright.join("package.json").is_file() {
            return Err(format!(
                "no playwright-core at {} (scripts/test.sh installs it)",
                playwright.display()
            ));
        }
        Ok(Self {
            chromium,
            playwright,
        })
    }

    /// Runs `steps` in one fresh headless session (a new profile directory) and returns
    /// what they read, plus `errors`: page errors and failed steps.
    ///
    /// # Errors
    /// When node cannot run the driver, or the session outlives [`SESSION_TIMEOUT`].
    pub async fn run(&self, steps: &Value) -> Result<Value, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        let script = dir.path().join("steps.cjs");
        let plan = dir.path().join("steps.json");
        let profile = dir.path().join("profile");
        std::fs::write(&script, SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
        std::fs::write(&plan, steps.to_string()).map_err(|e| format!("{}: {e}", plan.display()))?;
        let child = tokio::process::Command::new("node")
            .arg(&script)
            .arg(&self.playwright)
            .arg(&self.chromium)
            .arg(&profile)
            .arg(&plan)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run node: {e}"))?;
        let output = tokio::time::timeout(SESSION_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| format!("the browser session took more than {SESSION_TIMEOUT:?}"))?
            .map_err(|e| format!("the browser session failed: {e}"))?;
        serde_json::from_slice(&output.stdout).map_err(|e| {
            format!(
                "the driver printed no report ({e}); stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }
}
