//! Dominion admission: one pool of slots and one bounded waiting queue per dominion,
//! shared by every endpoint bound to it, with round-robin fairness across clients.
//!
//! A request takes a [`Permit`] before it goes upstream and holds it until its response is
//! complete (for a stream: until the stream ends or the client goes away). Dropping the
//! permit hands the slot straight to the next waiter, chosen round-robin across client
//! labels, so one busy client cannot starve another. A waiter that goes away (its future
//! is dropped) leaves the queue at once; if a slot had already been handed to it, the slot
//! moves on to the next waiter.
//!
//! The seam: [`Admission`] is what routing holds, a handle over any [`Admit`]
//! implementation. [`Pool`] is the in-process one (this process's slots and queues, the
//! default); [`shared`] shares a dominion between gateway replicas through Redis
//! (`[dominion_store]`, leases with a TTL, a global queue), over the client in [`store`].
//! Nothing above this module knows which one a dominion has.
//!
//! A profile switch never changes a live pool while the new profile is being prepared:
//! its limits are computed first ([`AdmissionLimits::of`]) and applied
//! ([`Admission::apply`]) only when the new profile is swapped in.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::config::{DominionConfig, QueuePolicy, StoreFailure};

pub(crate) mod shared;
pub(crate) mod store;

/// The label of requests without a (valid) `X-PromptForge-Client` header, and of labels
/// beyond [`MAX_TRACKED_LABELS`].
pub(crate) const DEFAULT_LABEL: &str = "default";
/// Distinct client labels tracked at once per dominion (including `default`).
pub(crate) const MAX_TRACKED_LABELS: usize = 32;
/// The longest accepted label.
const MAX_LABEL_LEN: usize = 64;

/// Why a request got no slot (`routes/` answers it with an error envelope).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AdmissionError {
    /// `policy = "reject"` and no free slot.
    #[error("dominion {dominion} has no free slot (policy = \"reject\")")]
    Rejected {
        /// The dominion's id.
        dominion: String,
    },
    /// Every slot busy and `max_queue` requests already waiting.
    #[error(
        "dominion {dominion}: every slot is busy and the queue is full; retry after a back-off"
    )]
    Full {
        /// The dominion's id.
        dominion: String,
    },
    /// The queue went away before handing over a slot (cannot happen while the dominion
    /// lives).
    #[error("admission queue closed")]
    Closed,
    /// The dominion is shared through `[dominion_store]`, the store cannot be reached and
    /// the dominion's `on_store_failure` is `"fail_closed"`.
    #[error(
        "dominion {dominion} is shared through the dominion store, which cannot be reached (on_store_failure = \"fail_closed\"); retry after a back-off"
    )]
    StoreUnavailable {
        /// The dominion's id.
        dominion: String,
    },
}

/// Normalises an `X-PromptForge-Client` value: 1-64 characters of `A-Z a-z 0-9 . _ -`,
/// else [`DEFAULT_LABEL`].
pub(crate) fn client_label(header: Option<&str>) -> String {
    match header.map(str::trim) {
        Some(label)
            if !label.is_empty()
                && label.len() <= MAX_LABEL_LEN
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) =>
        {
            label.to_owned()
        }
        _ => DEFAULT_LABEL.to_owned(),
    }
}

/// The limits of one dominion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AdmissionLimits {
    max_concurrency: u32,
    max_queue: usize,
    policy: QueuePolicy,
    fair: bool,
    failure: StoreFailure,
}

impl AdmissionLimits {
    /// The same limits with `max_concurrency` replaced (a replica's local share).
    pub(crate) fn with_concurrency(self, max_concurrency: u32) -> Self {
        Self {
            max_concurrency,
            ..self
        }
    }
}

impl AdmissionLimits {
    /// The limits `config` sets; `None` when it sets no `max_concurrency` (unlimited:
    /// nothing to admit).
    pub(crate) fn of(config: &DominionConfig) -> Option<Self> {
        Some(Self {
            max_concurrency: config.max_concurrency?,
            max_queue: usize::try_from(config.max_queue).unwrap_or(usize::MAX),
            policy: config.policy,
            fair: config.fair_scheduling,
            failure: config.on_store_failure,
        })
    }
}

/// A queue's state with its limits, as `/admin/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Snapshot {
    /// Slots held.
    pub in_flight: u32,
    /// Requests waiting.
    pub waiting: usize,
    /// Requests waiting, per client label.
    pub waiting_by_client: BTreeMap<String, usize>,
    /// The slot limit.
    pub max_concurrency: u32,
    /// The queue limit.
    pub max_queue: usize,
}

/// The view of a dominion across every replica sharing it (`[dominion_store]`), as of the
/// replica's last round trip to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct GlobalView {
    /// Slots held by all replicas (live leases).
    pub in_flight: u32,
    /// Requests waiting in the shared queue, all replicas.
    pub waiting: u32,
    /// `"shared"`, or `"degraded"` while the store cannot be reached.
    pub mode: &'static str,
    /// Live replicas (heartbeats within the lease TTL), last known.
    pub replicas: u32,
}

/// Which slot an [`Admit`] implementation handed out: the token [`Admit::give_back`] gets
/// back (the in-process pool ignores it; the shared one keys its leases by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Slot(pub(crate) u64);

/// What routing asks of a dominion's admission (see the module documentation).
pub(crate) trait Admit: Send + Sync + fmt::Debug {
    /// The dominion's id.
    fn id(&self) -> &str;
    /// Takes a slot only when one is free right now and nobody waits.
    fn try_take(&self) -> BoxFuture<'_, Option<Slot>>;
    /// Takes a slot for a request from `label`, waiting in the queue when the policy says
    /// so. Cancel-safe: dropping the future leaves no trace (a slot already handed to it
    /// moves on to the next waiter).
    fn take<'a>(&'a self, label: &'a str) -> BoxFuture<'a, Result<Slot, AdmissionError>>;
    /// Frees a slot taken by [`Admit::try_take`] or [`Admit::take`]. Never blocks (a
    /// shared store's release goes out on a task of its own).
    fn give_back(&self, slot: Slot);
    /// This replica's in flight and waiting right now.
    fn load(&self) -> (u32, usize);
    /// This replica's queue state.
    fn snapshot(&self) -> Snapshot;
    /// The view across replicas, for a dominion shared through a store.
    fn global(&self) -> Option<GlobalView> {
        None
    }
    /// New limits (the commit of a profile switch), keeping in-flight and waiting
    /// requests; a raised limit admits waiters at once.
    fn apply(&self, limits: AdmissionLimits);
}

/// A handle on one dominion's admission (cheap to clone; clones share the state).
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    admit: Arc<dyn Admit>,
}

/// A held slot; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct Permit {
    admit: Arc<dyn Admit>,
    slot: Slot,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.admit.give_back(self.slot);
    }
}

impl Admission {
    /// A fresh, idle in-process pool with `config`'s limits; `None` when the dominion sets
    /// no `max_concurrency`.
    pub(crate) fn new(config: &DominionConfig) -> Option<Self> {
        let limits = AdmissionLimits::of(config)?;
        Some(Self {
            admit: Arc::new(Pool::new(&config.id, limits)),
        })
    }

    /// A handle over another [`Admit`] implementation (a shared dominion).
    pub(crate) fn over(admit: Arc<dyn Admit>) -> Self {
        Self { admit }
    }

    /// The dominion's id.
    pub(crate) fn id(&self) -> &str {
        self.admit.id()
    }

    /// A slot when one is free right now and nobody waits (never queues, never errors):
    /// failover uses it to pass over a busy endpoint that is not the last one.
    pub(crate) async fn try_acquire(&self) -> Option<Permit> {
        let slot = self.admit.try_take().await?;
        Some(Permit {
            admit: self.admit.clone(),
            slot,
        })
    }

    /// A slot for a request from `label`, waiting as the policy says. Cancel-safe.
    pub(crate) async fn acquire(&self, label: &str) -> Result<Permit, AdmissionError> {
        let slot = self.admit.take(label).await?;
        Ok(Permit {
            admit: self.admit.clone(),
            slot,
        })
    }

    /// In flight and waiting right now (for metrics).
    pub(crate) fn load(&self) -> (u32, usize) {
        self.admit.load()
    }

    /// The queue state, for `/admin/status`.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.admit.snapshot()
    }

    /// The view across replicas, for a dominion shared through `[dominion_store]`.
    pub(crate) fn global(&self) -> Option<GlobalView> {
        self.admit.global()
    }

    /// Applies new limits (the commit of a profile switch).
    pub(crate) fn apply(&self, limits: AdmissionLimits) {
        self.admit.apply(limits);
    }
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    tx: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct Queues {
    in_flight: u32,
    waiting: usize,
    next_id: u64,
    /// Waiters per label; a label is present only while it has waiters.
    by_label: HashMap<String, VecDeque<Waiter>>,
    /// Labels with waiters, in round-robin order.
    ring: VecDeque<String>,
}

#[derive(Debug)]
struct Inner {
    limits: AdmissionLimits,
    queues: Queues,
}

/// The in-process admission of one dominion: its slots, its bounded queue and the
/// round-robin ring of client labels, under one mutex.
#[derive(Debug)]
pub(crate) struct Pool {
    id: String,
    inner: Mutex<Inner>,
}

/// Removes a waiter that gave up, or passes on a slot it was handed but never used.
struct WaitGuard<'a> {
    pool: &'a Pool,
    id: u64,
    label: String,
    rx: Option<oneshot::Receiver<()>>,
    admitted: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if self.admitted {
            return;
        }
        let removed = {
            let mut inner = self.pool.lock();
            let q = &mut inner.queues;
            let mut removed = false;
            if let Some(waiters) = q.by_label.get_mut(&self.label)
                && let Some(pos) = waiters.iter().position(|w| w.id == self.id)
            {
                waiters.remove(pos);
                removed = true;
                if waiters.is_empty() {
                    q.by_label.remove(&self.label);
                    q.ring.retain(|l| l != &self.label);
                }
            }
            if removed {
                q.waiting -= 1;
            }
            removed
        };
        // Not in the queue any more: a slot was handed over; if it arrived, pass it on.
        if !removed
            && let Some(mut rx) = self.rx.take()
            && rx.try_recv().is_ok()
        {
            self.pool.release();
        }
    }
}

impl Pool {
    /// An idle pool with `limits`.
    pub(crate) fn new(id: &str, limits: AdmissionLimits) -> Self {
        Self {
            id: id.to_owned(),
            inner: Mutex::new(Inner {
                limits,
                queues: Queues::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more slot in flight without asking the limit: a slot granted elsewhere
    /// (by a shared store that went away) that this pool now accounts for.
    pub(crate) fn occupy(&self) {
        self.lock().queues.in_flight += 1;
    }

    /// Takes a slot, waiting in the queue when the policy says so ([`Admit::take`]).
    pub(crate) async fn wait_for_slot(&self, label: &str) -> Result<(), AdmissionError> {
        let (rx, id, label) = {
            let mut inner = self.lock();
            let Inner { limits, queues } = &mut *inner;
            if queues.in_flight < limits.max_concurrency && queues.waiting == 0 {
                queues.in_flight += 1;
                return Ok(());
            }
            if limits.policy == QueuePolicy::Reject {
                return Err(AdmissionError::Rejected {
                    dominion: self.id.clone(),
                });
            }
            if queues.waiting >= limits.max_queue {
                return Err(AdmissionError::Full {
                    dominion: self.id.clone(),
                });
            }
            let label = if !limits.fair {
                DEFAULT_LABEL.to_owned()
            } else if queues.by_label.contains_key(label)
                || queues.by_label.len() < MAX_TRACKED_LABELS - 1
            {
                label.to_owned()
            } else {
                DEFAULT_LABEL.to_owned()
            };
            let (tx, rx) = oneshot::channel();
            queues.next_id += 1;
            let id = queues.next_id;
            let waiters = queues.by_label.entry(label.clone()).or_default();
            if waiters.is_empty() {
                queues.ring.push_back(label.clone());
            }
            waiters.push_back(Waiter { id, tx });
            queues.waiting += 1;
            (rx, id, label)
        };
        let mut guard = WaitGuard {
            pool: self,
            id,
            label,
            rx: Some(rx),
            admitted: false,
        };
        let received = match guard.rx.as_mut() {
            Some(rx) => rx.await.is_ok(),
            None => false,
        };
        // Either way the guard has nothing left to undo: a slot arrived (it is the
        // caller's now) or the sender vanished without one (cannot happen while `self`
        // lives).
        guard.admitted = true;
        if received {
            Ok(())
        } else {
            Err(AdmissionError::Closed)
        }
    }

    /// Frees one slot: hands it to the next waiter round-robin, or returns it to the pool.
    pub(crate) fn release(&self) {
        let mut inner = self.lock();
        let q = &mut inner.queues;
        loop {
            let Some(label) = q.ring.pop_front() else {
                q.in_flight = q.in_flight.saturating_sub(1);
                return;
            };
            let Some(waiters) = q.by_label.get_mut(&label) else {
                continue;
            };
            let waiter = waiters.pop_front();
            if waiters.is_empty() {
                q.by_label.remove(&label);
            } else {
                q.ring.push_back(label);
            }
            let Some(waiter) = waiter else { continue };
            q.waiting -= 1;
            if waiter.tx.send(()).is_ok() {
                return;
            }
        }
    }
}

impl Pool {
    /// Takes a slot only when one is free right now and nobody waits.
    pub(crate) fn take_now(&self) -> bool {
        let mut inner = self.lock();
        let Inner { limits, queues } = &mut *inner;
        if queues.in_flight < limits.max_concurrency && queues.waiting == 0 {
            queues.in_flight += 1;
            return true;
        }
        false
    }
}

impl Admit for Pool {
    fn id(&self) -> &str {
        &self.id
    }

    fn try_take(&self) -> BoxFuture<'_, Option<Slot>> {
        Box::pin(std::future::ready(self.take_now().then_some(Slot(0))))
    }

    fn take<'a>(&'a self, label: &'a str) -> BoxFuture<'a, Result<Slot, AdmissionError>> {
        Box::pin(async move {
            self.wait_for_slot(label).await?;
            Ok(Slot(0))
        })
    }

    fn give_back(&self, _slot: Slot) {
        self.release();
    }

    fn load(&self) -> (u32, usize) {
        let inner = self.lock();
        (inner.queues.in_flight, inner.queues.waiting)
    }

    fn snapshot(&self) -> Snapshot {
        let inner = self.lock();
        Snapshot {
            in_flight: inner.queues.in_flight,
            waiting: inner.queues.waiting,
            waiting_by_client: inner
                .queues
                .by_label
                .iter()
                .map(|(label, w)| (label.clone(), w.len()))
                .collect(),
            max_concurrency: inner.limits.max_concurrency,
            max_queue: inner.limits.max_queue,
        }
    }

    fn apply(&self, limits: AdmissionLimits) {
        self.lock().limits = limits;
        loop {
            let mut inner = self.lock();
            if inner.queues.waiting == 0 || inner.queues.in_flight >= inner.limits.max_concurrency {
                break;
            }
            inner.queues.in_flight += 1;
            drop(inner);
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DominionKind;

    fn dominion(max_concurrency: u32, max_queue: u32, policy: QueuePolicy) -> Admission {
        Admission::new(&DominionConfig {
            id: "d".into(),
            kind: DominionKind::Remote,
            max_concurrency: Some(max_concurrency),
            max_queue,
            policy,
            fair_scheduling: true,
            vram_gb: None,
            on_store_failure: crate::config::StoreFailure::default(),
        })
        .unwrap()
    }

    #[test]
    fn labels_are_validated() {
        assert_eq!(client_label(Some("batch-1.a_b")), "batch-1.a_b");
        assert_eq!(client_label(None), "default");
        assert_eq!(client_label(Some("")), "default");
        assert_eq!(client_label(Some("has space")), "default");
        assert_eq!(client_label(Some(&"x".repeat(65))), "default");
    }

    #[tokio::test]
    async fn queue_then_full_then_handoff() {
        let d = dominion(1, 1, QueuePolicy::Queue);
        let first = d.acquire("a").await.unwrap();
        let waiting = tokio::spawn({
            let d = d.clone();
            async move { d.acquire("a").await.map(|_| ()) }
        });
        while d.snapshot().waiting != 1 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(
            d.acquire("b").await.unwrap_err(),
            AdmissionError::Full { .. }
        ));
        drop(first);
        waiting.await.unwrap().unwrap();
        assert_eq!(d.snapshot().in_flight, 0);
    }

    #[tokio::test]
    async fn reject_policy_fails_fast() {
        let d = dominion(1, 10, QueuePolicy::Reject);
        let _held = d.acquire("a").await.unwrap();
        let err = d.acquire("a").await.unwrap_err();
        assert_eq!(
            err,
            AdmissionError::Rejected {
                dominion: "d".into()
            }
        );
    }

    #[tokio::test]
    async fn cancelled_waiters_leave_the_queue() {
        let d = dominion(1, 5, QueuePolicy::Queue);
        let held = d.acquire("a").await.unwrap();
        let waiter = tokio::spawn({
            let d = d.clone();
            async move { d.acquire("a").await.map(|_| ()) }
        });
        while d.snapshot().waiting != 1 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(d.snapshot().waiting, 0);
        drop(held);
        assert_eq!(d.snapshot().in_flight, 0);
    }

    #[tokio::test]
    async fn at_most_32_labels_are_tracked() {
        let d = dominion(1, 100, QueuePolicy::Queue);
        let _held = d.acquire("x").await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..40 {
            let dom = d.clone();
            tasks.push(tokio::spawn(async move {
                dom.acquire(&format!("client-{i}")).await.map(|_| ())
            }));
            while d.snapshot().waiting != i + 1 {
                tokio::task::yield_now().await;
            }
        }
        let snapshot = d.snapshot();
        let by_client = &snapshot.waiting_by_client;
        assert_eq!(by_client.len(), MAX_TRACKED_LABELS);
        assert_eq!(by_client["default"], 40 - (MAX_TRACKED_LABELS - 1));
        assert_eq!(by_client["client-0"], 1);
        for t in tasks {
            t.abort();
        }
    }

    #[tokio::test]
    async fn round_robin_across_labels() {
        let d = dominion(1, 100, QueuePolicy::Queue);
        let held = d.acquire("a").await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let labels = ["a", "a", "a", "a", "b"];
        for (i, label) in labels.into_iter().enumerate() {
            let (dom, order) = (d.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let permit = dom.acquire(label).await.unwrap();
                order.lock().unwrap().push(format!("{label}{i}"));
                tokio::task::yield_now().await;
                drop(permit);
            }));
            while d.snapshot().waiting != i + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["a0", "b4", "a1", "a2", "a3"]);
        assert_eq!(d.snapshot().in_flight, 0);
    }
}
