//! Dominions shared between gateway replicas through the dominion store
//! (`[dominion_store]`, Redis).
//!
//! A slot is a **lease** in the store with a TTL (`lease_ttl`, default 5 s) that this
//! replica renews every third of it while the request (or stream) holding it lives, so
//! the slots of a replica that dies free themselves when their leases lapse. Waiting is
//! global: a request that finds every slot busy waits in the store's queue (per
//! dominion, per client label), a freed slot goes to the next waiter round-robin across
//! labels of all replicas, and the waiter's replica is told by pub/sub (its renewal is the
//! backstop should that message be lost). The scripts are in [`super::store`].
//!
//! **When the store cannot be reached** each dominion follows its `on_store_failure`:
//! `local_share` (the default) admits through this replica's own [`Pool`] with
//! `max_concurrency / replicas` slots (at least 1; the replica count is the last the
//! heartbeats showed), and the slots this replica already held count against that share;
//! `fail_closed` answers new requests and waiters 503 `dominion_store_unavailable`. The
//! replica heartbeat brings the store back without a restart; every slot still held is
//! then re-registered as a lease (so slots admitted while degraded count globally until
//! they end).
//!
//! Only remote dominions are shared: a local dominion governs this machine's own
//! llama-server children, which no other replica can reach.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use super::store::{Acquired, Bounds, Counts, Mode, Renewed, Store, Wake};
use super::{Admission, AdmissionError, AdmissionLimits, Admit, GlobalView, Pool, Slot, Snapshot};
use crate::config::{DominionConfig, DominionKind, QueuePolicy, StoreConfig, StoreFailure};

/// The shared mode of one replica: the store client, the shared dominions, and the two
/// background tasks (heartbeat and renewals; the grant listener), stopped on drop.
#[derive(Debug)]
pub(crate) struct Shared {
    store: Arc<Store>,
    dominions: Mutex<Vec<Weak<SharedDominion>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }
}

/// The store's state as `/admin/status` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct StoreStatus {
    /// The store's address (never with credentials).
    pub url: String,
    /// `"shared"`, or `"degraded"` while the store cannot be reached.
    pub mode: &'static str,
    /// This replica's id.
    pub replica: String,
    /// Live replicas, last known.
    pub replicas: u32,
    /// Whether this replica hears grants by pub/sub right now.
    pub subscribed: bool,
    /// Times the store went unreachable since boot.
    pub outages: u64,
}

impl Shared {
    /// Starts the shared mode: one heartbeat (bounded by the configured timeouts; an
    /// unreachable store is logged and the replica starts degraded), then the background
    /// tasks. Fails only on a URL the client cannot use.
    pub(crate) async fn start(config: &StoreConfig) -> Result<Arc<Self>, String> {
        let store = Arc::new(Store::new(config)?);
        match store.heartbeat(true).await {
            Ok(replicas) => tracing::info!(
                url = %config.url,
                replica = store.replica(),
                replicas,
                "dominions shared through the dominion store"
            ),
            Err(error) => tracing::warn!(
                url = %config.url,
                error = %error,
                "dominion store unreachable at boot: shared dominions start degraded (each follows its on_store_failure) until it answers"
            ),
        }
        let shared = Arc::new(Self {
            store: store.clone(),
            dominions: Mutex::default(),
            tasks: Mutex::default(),
        });
        let every = config.lease_ttl / 3;
        let ticker = {
            let shared = Arc::downgrade(&shared);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    shared.tick().await;
                }
            })
        };
        let listener = tokio::spawn(async move {
            loop {
                if let Err(error) = store.listen().await {
                    tracing::debug!(error = %error, "dominion store grant channel lost");
                }
                tokio::time::sleep(every).await;
            }
        });
        shared
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([ticker, listener]);
        Ok(shared)
    }

    /// The admission of `config` shared through the store: `None` for a local dominion
    /// (kept per replica) or one without `max_concurrency`.
    pub(crate) fn admission(&self, config: &DominionConfig) -> Option<Admission> {
        if config.kind != DominionKind::Remote {
            return None;
        }
        let limits = AdmissionLimits::of(config)?;
        let dominion = Arc::new(SharedDominion {
            id: config.id.clone(),
            key: self.store.dominion_key(&config.id),
            store: self.store.clone(),
            limits: Mutex::new(limits),
            local: Pool::new(&config.id, limits.with_concurrency(1)),
            book: Mutex::default(),
            global: Mutex::default(),
        });
        dominion.local.apply(dominion.share());
        let mut dominions = self
            .dominions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        dominions.retain(|d| d.strong_count() > 0);
        dominions.push(Arc::downgrade(&dominion));
        Some(Admission::over(dominion))
    }

    /// The store's state.
    pub(crate) fn status(&self) -> StoreStatus {
        StoreStatus {
            url: self.store.config().url.clone(),
            mode: mode(&self.store),
            replica: self.store.replica().to_owned(),
            replicas: self.store.replicas(),
            subscribed: self.store.subscribed(),
            outages: self.store.downs(),
        }
    }

    /// Whether the store answered the last command.
    pub(crate) fn is_up(&self) -> bool {
        self.store.is_up()
    }

    /// Times the store went unreachable since boot.
    pub(crate) fn outages(&self) -> u64 {
        self.store.downs()
    }

    /// Live replicas, last known.
    pub(crate) fn replicas(&self) -> u32 {
        self.store.replicas()
    }

    /// Leaves the replica set (at shutdown, after the drain); best effort.
    pub(crate) async fn leave(&self) {
        self.store.leave().await;
    }

    /// One heartbeat, then each live dominion's renewal (while the store answers).
    async fn tick(&self) {
        let up = self.store.heartbeat(false).await.is_ok();
        let dominions: Vec<Arc<SharedDominion>> = self
            .dominions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for dominion in dominions {
            dominion.local.apply(dominion.share());
            if up {
                dominion.renew().await;
            }
        }
    }
}

fn mode(store: &Store) -> &'static str {
    if store.is_up() { "shared" } else { "degraded" }
}

/// A slot this replica holds.
#[derive(Debug)]
struct Held {
    /// Its lease id in the store.
    lease: String,
    /// Counted by the local pool (admitted while degraded, or held when the store went
    /// away): giving it back frees a local slot too.
    local: bool,
}

/// This replica's part of a shared dominion.
#[derive(Debug, Default)]
struct Book {
    next_slot: u64,
    held: HashMap<u64, Held>,
    /// Waiter id → the label the store queued it under.
    waiting: HashMap<String, String>,
    /// The outage (the store's down count) whose held slots were moved into the local
    /// pool.
    converted: u64,
}

/// One dominion shared through the store (see the module documentation).
#[derive(Debug)]
pub(crate) struct SharedDominion {
    id: String,
    key: String,
    store: Arc<Store>,
    limits: Mutex<AdmissionLimits>,
    /// Admission while the store cannot be reached (`local_share`).
    local: Pool,
    book: Mutex<Book>,
    /// The global counts as of the last script's answer.
    global: Mutex<Counts>,
}

/// A waiter's registration; dropping it before the slot is taken leaves the store's
/// queue (or passes on a slot granted meanwhile).
struct Waiting<'a> {
    dominion: &'a SharedDominion,
    id: String,
    label: Option<String>,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let dominion = self.dominion;
        dominion.store.forget(&self.id);
        if self.done {
            return;
        }
        dominion.lock_book().waiting.remove(&self.id);
        if !dominion.store.is_up() {
            // Nothing to tell an unreachable store: the waiter, unrenewed, lapses.
            return;
        }
        let (store, key, id, max) = (
            dominion.store.clone(),
            dominion.key.clone(),
            self.id.clone(),
            dominion.limits().max_concurrency,
        );
        let label = self
            .label
            .take()
            .unwrap_or_else(|| super::DEFAULT_LABEL.to_owned());
        spawn(async move {
            let _ = store.cancel(&key, &id, &label, max).await;
        });
    }
}

/// What one script call applies of `limits`.
fn bounds_of(limits: AdmissionLimits) -> Bounds {
    Bounds {
        max: limits.max_concurrency,
        max_queue: limits.max_queue,
        fair: limits.fair,
    }
}

/// Runs `task` on the current runtime, if there is one (a drop at the very end of the
/// process has none; the lease then lapses on its own).
fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(task);
    }
}

impl SharedDominion {
    fn lock_book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn limits(&self) -> AdmissionLimits {
        *self.limits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bounds(&self) -> Bounds {
        bounds_of(self.limits())
    }

    /// This replica's share of the limits while degraded.
    fn share(&self) -> AdmissionLimits {
        let limits = self.limits();
        limits.with_concurrency((limits.max_concurrency / self.store.replicas()).max(1))
    }

    fn set_global(&self, counts: Counts) {
        *self.global.lock().unwrap_or_else(PoisonError::into_inner) = counts;
    }

    /// Records a slot held under `lease`. While the store is down every held slot counts
    /// in the local pool.
    fn hold(&self, lease: String, mut local: bool) -> Slot {
        let mut book = self.lock_book();
        book.waiting.remove(&lease);
        if !local && !self.store.is_up() {
            self.local.occupy();
            local = true;
        }
        book.next_slot += 1;
        let slot = book.next_slot;
        book.held.insert(slot, Held { lease, local });
        Slot(slot)
    }

    /// The store went away: once per outage, the slots held through the store start
    /// counting against the local share.
    fn enter_degraded(&self) {
        let outage = self.store.downs();
        let mut book = self.lock_book();
        if book.converted == outage {
            return;
        }
        book.converted = outage;
        for held in book.held.values_mut().filter(|h| !h.local) {
            held.local = true;
            self.local.occupy();
        }
        drop(book);
        self.local.apply(self.share());
    }

    async fn take_degraded(&self, label: &str) -> Result<Slot, AdmissionError> {
        if self.limits().failure == StoreFailure::FailClosed {
            return Err(AdmissionError::StoreUnavailable {
                dominion: self.id.clone(),
            });
        }
        self.enter_degraded();
        self.local.wait_for_slot(label).await?;
        Ok(self.hold(self.store.new_id(), true))
    }

    async fn take_shared(&self, label: &str) -> Result<Slot, AdmissionError> {
        loop {
            if !self.store.is_up() {
                return self.take_degraded(label).await;
            }
            let limits = self.limits();
            let mode = match limits.policy {
                QueuePolicy::Queue => Mode::Queue,
                QueuePolicy::Reject => Mode::Reject,
            };
            let id = self.store.new_id();
            let mut rx = self.store.expect(&id);
            let mut waiting = Waiting {
                dominion: self,
                id: id.clone(),
                label: None,
                done: false,
            };
            let Ok((answer, counts)) = self
                .store
                .acquire(&self.key, &id, label, bounds_of(limits), mode)
                .await
            else {
                // The store is marked down; the loop takes the degraded path.
                continue;
            };
            self.set_global(counts);
            match answer {
                Acquired::Granted => {
                    waiting.done = true;
                    return Ok(self.hold(id, false));
                }
                Acquired::Rejected | Acquired::Busy => {
                    waiting.done = true;
                    return Err(AdmissionError::Rejected {
                        dominion: self.id.clone(),
                    });
                }
                Acquired::Full => {
                    waiting.done = true;
                    return Err(AdmissionError::Full {
                        dominion: self.id.clone(),
                    });
                }
                Acquired::Queued(queued_as) => {
                    self.lock_book()
                        .waiting
                        .insert(id.clone(), queued_as.clone());
                    waiting.label = Some(queued_as);
                    tokio::select! {
                        wake = &mut rx => {
                            if wake == Ok(Wake::Granted) {
                                waiting.done = true;
                                return Ok(self.hold(id, false));
                            }
                            // Lost: the store forgot the waiter; ask again.
                        }
                        () = self.store.down() => {}
                    }
                }
            }
        }
    }

    async fn try_take_shared(&self) -> Option<Slot> {
        if !self.store.is_up() {
            if self.limits().failure == StoreFailure::FailClosed {
                return None;
            }
            self.enter_degraded();
            return self
                .local
                .take_now()
                .then(|| self.hold(self.store.new_id(), true));
        }
        let id = self.store.new_id();
        let (answer, counts) = self
            .store
            .acquire(
                &self.key,
                &id,
                super::DEFAULT_LABEL,
                self.bounds(),
                Mode::Try,
            )
            .await
            .ok()?;
        self.set_global(counts);
        (answer == Acquired::Granted).then(|| self.hold(id, false))
    }

    /// Renews this replica's leases and waiters, re-registers leases the store lost,
    /// and wakes waiters it granted or lost.
    async fn renew(&self) {
        let (leases, waiters): (Vec<String>, Vec<String>) = {
            let book = self.lock_book();
            (
                book.held.values().map(|h| h.lease.clone()).collect(),
                book.waiting.keys().cloned().collect(),
            )
        };
        let max = self.limits().max_concurrency;
        let Ok((counts, next_lapse, states)) =
            self.store.renew(&self.key, &leases, &waiters, max).await
        else {
            return;
        };
        self.set_global(counts);
        // Requests wait here and a lease lapses before the next renewal: free its slot for
        // them when it lapses (a dead replica's slots come back within the lease TTL, not
        // a renewal period later).
        if let Some(lapse) = next_lapse
            && !waiters.is_empty()
            && lapse < self.store.config().lease_ttl / 3
        {
            let (store, key) = (self.store.clone(), self.key.clone());
            spawn(async move {
                tokio::time::sleep(lapse + Duration::from_millis(5)).await;
                let _ = store.release(&key, None, max).await;
            });
        }
        let (lease_states, waiter_states) = states.split_at(leases.len().min(states.len()));
        let missing: Vec<&String> = leases
            .iter()
            .zip(lease_states)
            .filter(|(_, state)| **state == Renewed::Missing)
            .map(|(lease, _)| lease)
            .collect();
        if !missing.is_empty() {
            // Only what is still held: a slot given back meanwhile stays released.
            let still: Vec<String> = {
                let book = self.lock_book();
                missing
                    .into_iter()
                    .filter(|lease| book.held.values().any(|h| &h.lease == *lease))
                    .cloned()
                    .collect()
            };
            if !still.is_empty()
                && let Ok(counts) = self.store.adopt(&self.key, &still).await
            {
                self.set_global(counts);
            }
        }
        for (id, state) in waiters.iter().zip(waiter_states) {
            match state {
                Renewed::Granted => self.store.wake(id, Wake::Granted),
                Renewed::Lost => self.store.wake(id, Wake::Lost),
                Renewed::Kept | Renewed::Missing => {}
            }
        }
    }
}

impl Admit for SharedDominion {
    fn id(&self) -> &str {
        &self.id
    }

    fn try_take(&self) -> BoxFuture<'_, Option<Slot>> {
        Box::pin(self.try_take_shared())
    }

    fn take<'a>(&'a self, label: &'a str) -> BoxFuture<'a, Result<Slot, AdmissionError>> {
        Box::pin(self.take_shared(label))
    }

    fn give_back(&self, slot: Slot) {
        let Some(held) = self.lock_book().held.remove(&slot.0) else {
            return;
        };
        if held.local {
            self.local.release();
        }
        if self.store.is_up() {
            let (store, key, max) = (
                self.store.clone(),
                self.key.clone(),
                self.limits().max_concurrency,
            );
            spawn(async move {
                let _ = store.release(&key, Some(&held.lease), max).await;
            });
        }
    }

    fn load(&self) -> (u32, usize) {
        let book = self.lock_book();
        let held = u32::try_from(book.held.len()).unwrap_or(u32::MAX);
        (held, book.waiting.len() + self.local.load().1)
    }

    fn snapshot(&self) -> Snapshot {
        let local = self.local.snapshot();
        let book = self.lock_book();
        let mut waiting_by_client: BTreeMap<String, usize> = local.waiting_by_client;
        for label in book.waiting.values() {
            *waiting_by_client.entry(label.clone()).or_default() += 1;
        }
        let limits = self.limits();
        Snapshot {
            in_flight: u32::try_from(book.held.len()).unwrap_or(u32::MAX),
            waiting: book.waiting.len() + local.waiting,
            waiting_by_client,
            max_concurrency: limits.max_concurrency,
            max_queue: limits.max_queue,
        }
    }

    fn global(&self) -> Option<GlobalView> {
        let counts = *self.global.lock().unwrap_or_else(PoisonError::into_inner);
        Some(GlobalView {
            in_flight: counts.held,
            waiting: counts.waiting,
            mode: mode(&self.store),
            replicas: self.store.replicas(),
        })
    }

    fn apply(&self, limits: AdmissionLimits) {
        *self.limits.lock().unwrap_or_else(PoisonError::into_inner) = limits;
        self.local.apply(self.share());
        if self.store.is_up() {
            // A raised limit admits global waiters at once.
            let (store, key) = (self.store.clone(), self.key.clone());
            spawn(async move {
                let _ = store.release(&key, None, limits.max_concurrency).await;
            });
        }
    }
}
