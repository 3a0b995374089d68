//! `--capture-raw`: every model turn's verbatim request and response JSON, written to
//! `<stem>.store/.trace/turn-N-{request,response}.json` by a dedicated worker thread.
//!
//! The run's async tasks only copy the body into a bounded queue ([`QUEUE_CAPACITY`]
//! events); when the queue is full the event is dropped and counted, never waited for.
//! [`TraceCapture::finish`] closes the queue and joins the worker, so every queued file is
//! on disk before the store dump reconciles.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use promptforge_core::observe::{DebugCapture, DebugEvent};

use crate::dump::DumpTarget;
use crate::secure::{self, SecureError, TRACE_DIR};

/// How many events may wait for the worker.
pub const QUEUE_CAPACITY: usize = 128;

/// The most write failures kept for the report (the rest are counted).
const MAX_FAILURES_KEPT: usize = 16;

/// The warning printed when capture is on, for the prompt at `prompt`.
pub fn warning_for(prompt: &std::path::Path) -> String {
    format!(
        "warning: --capture-raw persists verbatim prompts, tool arguments and results, and model output to {}",
        crate::dump::shown_dump_dir(prompt)
            .join(TRACE_DIR)
            .display()
    )
}

struct Job {
    file: String,
    body: serde_json::Value,
}

/// What the worker did, returned by [`TraceCapture::finish`].
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct CaptureReport {
    /// Files written.
    pub written: u64,
    /// Events dropped because the queue was full.
    pub dropped: u64,
    /// Failed writes (the first few), with the file name.
    pub failures: Vec<(String, SecureError)>,
    /// Failed writes past the ones kept.
    pub more_failures: u64,
}

#[derive(Default)]
struct Pairing {
    next: u64,
    open: HashMap<(String, u32), VecDeque<u64>>,
}

/// A [`DebugCapture`] that queues each model turn for the trace worker.
pub struct TraceCapture {
    sender: Mutex<Option<SyncSender<Job>>>,
    worker: Mutex<Option<JoinHandle<CaptureReport>>>,
    pairing: Mutex<Pairing>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for TraceCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceCapture")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl TraceCapture {
    /// Starts the worker writing under `target`'s `.trace/`.
    pub fn start(target: DumpTarget) -> std::io::Result<Arc<Self>> {
        Self::start_with_capacity(target, QUEUE_CAPACITY)
    }

    /// [`TraceCapture::start`] with another queue capacity (tests and benchmarks).
    pub fn start_with_capacity(target: DumpTarget, capacity: usize) -> std::io::Result<Arc<Self>> {
        Self::spawn(target, capacity, None)
    }

    /// Starts the worker; with a `gate`, it consumes nothing until the gate fires or closes.
    fn spawn(
        target: DumpTarget,
        capacity: usize,
        gate: Option<mpsc::Receiver<()>>,
    ) -> std::io::Result<Arc<Self>> {
        let (sender, receiver) = mpsc::sync_channel::<Job>(capacity);
        let worker = std::thread::Builder::new()
            .name("promptforge-dev-trace".to_owned())
            .spawn(move || {
                if let Some(gate) = gate {
                    let _ = gate.recv();
                }
                let mut report = CaptureReport::default();
                for job in receiver {
                    let written = target.ensure(&[TRACE_DIR]).and_then(|dir| {
                        let mut bytes = serde_json::to_vec_pretty(&job.body).unwrap_or_default();
                        bytes.push(b'\n');
                        secure::write_file(&dir, &job.file, &bytes)
                    });
                    match written {
                        Ok(()) => report.written += 1,
                        Err(error) if report.failures.len() < MAX_FAILURES_KEPT => {
                            report.failures.push((job.file, error));
                        }
                        Err(_) => report.more_failures += 1,
                    }
                }
                report
            })?;
        Ok(Arc::new(Self {
            sender: Mutex::new(Some(sender)),
            worker: Mutex::new(Some(worker)),
            pairing: Mutex::new(Pairing::default()),
            dropped: AtomicU64::new(0),
        }))
    }

    /// The global 1-based turn number of this event: a request opens a new turn, its
    /// response (same section and section turn index) closes the oldest open one.
    fn turn_number(&self, section: &str, turn: u32, request: bool) -> u64 {
        let mut pairing = match self.pairing.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        let key = (section.to_owned(), turn);
        if !request
            && let Some(open) = pairing.open.get_mut(&key)
            && let Some(number) = open.pop_front()
        {
            if open.is_empty() {
                pairing.open.remove(&key);
            }
            return number;
        }
        pairing.next += 1;
        let number = pairing.next;
        if request {
            pairing.open.entry(key).or_default().push_back(number);
        }
        number
    }

    fn enqueue(&self, job: Job) {
        let sender = match self.sender.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let Some(sender) = sender else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        match sender.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Closes the queue, waits for the worker to write everything queued, and reports.
    /// Events arriving afterwards are counted as dropped. Blocking: call it off the async
    /// runtime's threads.
    pub fn finish(&self) -> CaptureReport {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        let worker = self.worker.lock().ok().and_then(|mut w| w.take());
        let mut report = worker
            .and_then(|worker| worker.join().ok())
            .unwrap_or_default();
        report.dropped = self.dropped.load(Ordering::Relaxed);
        report
    }
}

impl DebugCapture for TraceCapture {
    fn on_event(&self, _execution: &str, section: &str, turn_index: u32, event: DebugEvent<'_>) {
        let (kind, body) = match event {
            DebugEvent::Request { body } => ("request", body),
            DebugEvent::Response { body, .. } => ("response", body),
            _ => return,
        };
        let number = self.turn_number(section, turn_index, kind == "request");
        self.enqueue(Job {
            file: format!("turn-{number}-{kind}.json"),
            body: body.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn turns_are_numbered_paired_and_written() {
        let base = tempfile::tempdir().unwrap();
        let target = DumpTarget::in_dir(base.path(), "p.store").unwrap();
        let capture = TraceCapture::start(target.clone()).unwrap();
        let request = json!({"model": "m", "messages": []});
        let response = json!({"choices": []});
        capture.on_event("x", "## A", 0, DebugEvent::Request { body: &request });
        capture.on_event("x", "## B", 0, DebugEvent::Request { body: &request });
        capture.on_event(
            "x",
            "## A",
            0,
            DebugEvent::Response {
                body: &response,
                finish_reason: None,
                reasoning: None,
            },
        );
        let report = capture.finish();
        assert_eq!((report.written, report.dropped), (3, 0));
        let trace = target.dir().join(".trace");
        let read = |name: &str| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(trace.join(name)).unwrap()).unwrap()
        };
        assert_eq!(read("turn-1-request.json"), request);
        assert_eq!(read("turn-1-response.json"), response);
        assert_eq!(read("turn-2-request.json"), request);
        // After finish, events are dropped and counted, not written.
        capture.on_event("x", "## A", 1, DebugEvent::Request { body: &request });
        assert_eq!(capture.dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let base = tempfile::tempdir().unwrap();
        let target = DumpTarget::in_dir(base.path(), "p.store").unwrap();
        let (open, gate) = mpsc::channel();
        let capture = TraceCapture::spawn(target.clone(), 2, Some(gate)).unwrap();
        let body = json!({"x": 1});
        for turn in 0..5 {
            capture.on_event("x", "## A", turn, DebugEvent::Request { body: &body });
        }
        assert_eq!(capture.dropped.load(Ordering::Relaxed), 3);
        open.send(()).unwrap();
        let report = capture.finish();
        assert_eq!((report.written, report.dropped), (2, 3));
        let trace = target.dir().join(".trace");
        assert!(trace.join("turn-1-request.json").exists());
        assert!(trace.join("turn-2-request.json").exists());
        assert!(!trace.join("turn-3-request.json").exists());
    }
}
