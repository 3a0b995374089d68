//! The run registry: admission slots, run records, retention and eviction.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use promptforge_core::CancelHandle;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// The most run records kept at once (live and finished); past it the oldest finished
/// records are evicted early.
pub const MAX_RECORDS: usize = 10_000;

/// A run's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Still executing.
    Running,
    /// Finished with a value.
    Completed,
    /// Finished with an error.
    Failed,
}

/// The result record, exactly `run_id, prompt, status, value, turns, elapsed_ms, error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// 32 lower-case hex digits.
    pub run_id: String,
    /// The prompt's catalog name (or the name as requested, when it resolved to nothing).
    pub prompt: String,
    /// `running`, `completed` or `failed`.
    pub status: Status,
    /// The artifact (completed only).
    pub value: Option<String>,
    /// Model turns taken so far.
    pub turns: u32,
    /// Wall time so far, in milliseconds.
    pub elapsed_ms: u64,
    /// Why it failed (failed only).
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
enum Outcome {
    Running,
    Done {
        value: Result<String, String>,
        elapsed: Duration,
        at: Instant,
    },
}

/// One run, live or finished.
#[derive(Debug)]
pub struct Run {
    id: String,
    prompt: String,
    started: Instant,
    turns: AtomicU32,
    attached: AtomicBool,
    cancel: CancelHandle,
    outcome: Mutex<Outcome>,
    done: watch::Sender<bool>,
    created: std::time::SystemTime,
    call_cancel: tokio_util::sync::CancellationToken,
    cancel_requested: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Run {
    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The prompt's catalog name (or the name as requested).
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// The run's cancel handle.
    pub fn cancel_handle(&self) -> &CancelHandle {
        &self.cancel
    }

    /// When the run was registered.
    pub fn created(&self) -> std::time::SystemTime {
        self.created
    }

    /// The token that stands for the run's call when it has no request of its own (a
    /// task): cancelling it cancels an attached run.
    pub fn call_cancel(&self) -> &tokio_util::sync::CancellationToken {
        &self.call_cancel
    }

    /// Records that a client asked for this run to be cancelled (`tasks/cancel`) and
    /// cancels it.
    pub fn request_cancel(&self) {
        self.cancel_requested.store(true, Ordering::Release);
        self.call_cancel.cancel();
        self.cancel.cancel();
    }

    /// Whether a client asked for this run to be cancelled.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::Acquire)
    }

    /// Counts one model turn.
    pub fn add_turn(&self) {
        self.turns.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a call is still waiting for this run.
    pub fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Acquire)
    }

    /// Marks the run as detached from its call: it runs on and is not cancelled with it.
    pub fn detach(&self) {
        self.attached.store(false, Ordering::Release);
    }

    /// Records the final outcome (once; later calls are ignored).
    pub fn finish(&self, value: Result<String, String>) {
        let mut outcome = lock(&self.outcome);
        if matches!(*outcome, Outcome::Running) {
            *outcome = Outcome::Done {
                value,
                elapsed: self.started.elapsed(),
                at: Instant::now(),
            };
            drop(outcome);
            self.done.send_replace(true);
        }
    }

    /// Whether the run has finished.
    pub fn is_finished(&self) -> bool {
        *self.done.borrow()
    }

    /// Waits until the run has finished.
    pub async fn finished(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives as long as `self`, so this only ends when the value is true.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// The record as of now.
    pub fn record(&self) -> Record {
        let turns = self.turns.load(Ordering::Relaxed);
        let outcome = lock(&self.outcome).clone();
        let (status, value, error, elapsed) = match outcome {
            Outcome::Running => (Status::Running, None, None, self.started.elapsed()),
            Outcome::Done {
                value: Ok(v),
                elapsed,
                ..
            } => (Status::Completed, Some(v), None, elapsed),
            Outcome::Done {
                value: Err(e),
                elapsed,
                ..
            } => (Status::Failed, None, Some(e), elapsed),
        };
        Record {
            run_id: self.id.clone(),
            prompt: self.prompt.clone(),
            status,
            value,
            turns,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            error,
        }
    }

    fn finished_at(&self) -> Option<Instant> {
        match &*lock(&self.outcome) {
            Outcome::Running => None,
            Outcome::Done { at, .. } => Some(*at),
        }
    }
}

/// Why admission failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionError {
    /// No slot came free in time (retryable).
    Busy(Duration),
    /// The registry is shutting down.
    Closed,
}

impl std::fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Busy(d) => write!(
                f,
                "every run slot is busy and none came free within {}. Retry in a moment.",
                humantime::format_duration(*d)
            ),
            Self::Closed => f.write_str("the server is shutting down and accepts no new runs"),
        }
    }
}

/// The registry of runs.
#[derive(Debug)]
pub struct Registry {
    slots: Arc<Semaphore>,
    admission_timeout: Duration,
    retain: Duration,
    runs: Mutex<HashMap<String, Arc<Run>>>,
}

impl Registry {
    /// A registry with `slots` concurrent runs.
    pub fn new(slots: usize, admission_timeout: Duration, retain: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots)),
            admission_timeout,
            retain,
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// Registers a new run (status `running`, attached) under a fresh id.
    pub fn start(&self, prompt: &str) -> Arc<Run> {
        let (done, _) = watch::channel(false);
        let run = Arc::new(Run {
            id: new_run_id(),
            prompt: prompt.to_owned(),
            started: Instant::now(),
            turns: AtomicU32::new(0),
            attached: AtomicBool::new(true),
            cancel: CancelHandle::new(),
            outcome: Mutex::new(Outcome::Running),
            done,
            created: std::time::SystemTime::now(),
            call_cancel: tokio_util::sync::CancellationToken::new(),
            cancel_requested: AtomicBool::new(false),
        });
        let mut runs = lock(&self.runs);
        evict(&mut runs, self.retain);
        if runs.len() >= MAX_RECORDS {
            let mut finished: Vec<(Instant, String)> = runs
                .values()
                .filter_map(|r| r.finished_at().map(|at| (at, r.id.clone())))
                .collect();
            finished.sort();
            let excess = runs.len() + 1 - MAX_RECORDS;
            for (_, id) in finished.into_iter().take(excess) {
                runs.remove(&id);
            }
        }
        runs.insert(run.id.clone(), Arc::clone(&run));
        run
    }

    /// Waits for a run slot for at most the admission timeout.
    pub async fn admit(&self) -> Result<OwnedSemaphorePermit, AdmissionError> {
        match tokio::time::timeout(
            self.admission_timeout,
            Arc::clone(&self.slots).acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(AdmissionError::Closed),
            Err(_) => Err(AdmissionError::Busy(self.admission_timeout)),
        }
    }

    /// How long finished runs are retained.
    pub fn retain(&self) -> Duration {
        self.retain
    }

    /// Stops admitting runs.
    pub fn close(&self) {
        self.slots.close();
    }

    /// The run with this id, if it is live or still retained.
    pub fn get(&self, id: &str) -> Option<Arc<Run>> {
        let mut runs = lock(&self.runs);
        evict(&mut runs, self.retain);
        runs.get(id.trim()).cloned()
    }

    /// Every run still executing.
    pub fn live(&self) -> Vec<Arc<Run>> {
        lock(&self.runs)
            .values()
            .filter(|r| !r.is_finished())
            .cloned()
            .collect()
    }
}

fn evict(runs: &mut HashMap<String, Arc<Run>>, retain: Duration) {
    runs.retain(|_, run| run.finished_at().is_none_or(|at| at.elapsed() < retain));
}

/// A fresh run id: 128 random bits as 32 lower-case hex digits.
pub fn new_run_id() -> String {
    let bits: u128 = rand::random();
    format!("{bits:032x}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn records_carry_exactly_the_seven_fields() {
        let registry = Registry::new(1, Duration::from_secs(1), Duration::from_secs(60));
        let run = registry.start("echo");
        let json = serde_json::to_value(run.record()).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            [
                "elapsed_ms",
                "error",
                "prompt",
                "run_id",
                "status",
                "turns",
                "value"
            ]
        );
        assert_eq!(json["status"], "running");
        assert!(json["value"].is_null() && json["error"].is_null());
        assert_eq!(run.id().len(), 32);
        run.add_turn();
        run.finish(Ok("v".into()));
        run.finish(Err("ignored".into()));
        let record = registry.get(run.id()).unwrap().record();
        assert_eq!(record.status, Status::Completed);
        assert_eq!(record.value.as_deref(), Some("v"));
        assert_eq!(record.turns, 1);
    }

    #[test]
    fn finished_runs_are_evicted_after_retention() {
        let registry = Registry::new(1, Duration::from_secs(1), Duration::from_millis(1));
        let run = registry.start("echo");
        run.finish(Err("boom".into()));
        std::thread::sleep(Duration::from_millis(5));
        assert!(registry.get(run.id()).is_none());
        let live = registry.start("echo");
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            registry.get(live.id()).is_some(),
            "live runs are never evicted"
        );
    }

    #[tokio::test]
    async fn admission_times_out_with_the_configured_duration() {
        let registry = Registry::new(1, Duration::from_millis(20), Duration::from_secs(60));
        let held = registry.admit().await.unwrap();
        let err = registry.admit().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "every run slot is busy and none came free within 20ms. Retry in a moment."
        );
        drop(held);
        assert!(registry.admit().await.is_ok());
        let thirty = AdmissionError::Busy(Duration::from_secs(30)).to_string();
        assert_eq!(
            thirty,
            "every run slot is busy and none came free within 30s. Retry in a moment."
        );
    }
}
