//! The unpublished test crate for `promptforge-core`: author-shaped offline fixtures (under
//! `tests/`) and the real-model scenario suite (this library, driven by the binary).
#![forbid(unsafe_code)]

pub mod gateway;
pub mod scenarios;
pub mod search;

use std::time::Instant;

/// Why a scenario run failed.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The environment is not ready (missing binary or model, gateway not starting).
    #[error("setup: {0}")]
    Setup(String),
    /// A scenario's assertion failed.
    #[error("{0}")]
    Failed(String),
}

/// Starts the gateway, runs the scenarios named in `only` (all when empty), and returns the
/// report text and whether every scenario passed. The gateway is stopped before returning.
pub async fn run_scenarios(only: &[String]) -> Result<(String, bool), ScenarioError> {
    let known: Vec<&str> = scenarios::all().into_iter().map(|(name, _)| name).collect();
    if let Some(unknown) = only.iter().find(|o| !known.contains(&o.as_str())) {
        return Err(ScenarioError::Setup(format!(
            "no scenario named `{unknown}`; scenarios: {}",
            known.join(", ")
        )));
    }
    let started = Instant::now();
    let parts = gateway::Parts::locate()?;
    let search = search::SearchStub::start().await?;
    let guard = gateway::GatewayGuard::start(&parts, &search.provider()).await?;
    let boot = started.elapsed();
    let harness = scenarios::Harness::new(guard, search).await?;
    let rows = scenarios::run_all(&harness, only).await;
    let (pid, children) = harness.processes();
    drop(harness);
    let descendants = children.len();
    let mut processes = children;
    processes.push(pid);
    let alive = tokio::task::spawn_blocking(move || gateway::wait_gone(&processes))
        .await
        .map_err(|e| ScenarioError::Setup(format!("waiting for the gateway to stop: {e}")))?;
    if rows.is_empty() {
        return Err(ScenarioError::Setup(format!(
            "no scenario matches {only:?}"
        )));
    }
    let passed = rows.iter().all(|r| r.outcome.is_ok()) && alive.is_empty();
    let failed = rows.iter().filter(|r| r.outcome.is_err()).count();
    let mut report = scenarios::table(&rows);
    report.push_str(&format!(
        "\ngateway ready in {:.1}s, total {:.1}s\n",
        boot.as_secs_f64(),
        started.elapsed().as_secs_f64()
    ));
    if alive.is_empty() {
        report.push_str(&format!(
            "gateway {pid} and its {descendants} descendant process(es) stopped\n"
        ));
    } else {
        report.push_str(&format!(
            "FAIL: processes still alive after the guard dropped: {alive:?}\n"
        ));
    }
    // Last, alone on its line, in the plain `N passed, N failed` form CI summaries read.
    report.push_str(&format!(
        "scenarios: {} passed, {failed} failed\n",
        rows.len() - failed
    ));
    Ok((report, passed))
}
