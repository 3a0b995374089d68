//! The dominion store's client: one reconnecting Redis connection, the admission scripts,
//! the store's health, the replica heartbeat, and the grant notifications.
//!
//! Every change to a shared dominion is one Lua script run atomically on the server, with
//! the server's clock (`TIME`), so replicas whose clocks disagree still agree on which
//! lease has lapsed. The keys of dominion `D` under prefix `P` (one hash tag, so a
//! dominion's keys live together):
//!
//! - `P:{D}:leases` — sorted set, lease id → expiry (ms, server clock): the held slots;
//! - `P:{D}:waiting` — sorted set, waiter id → expiry: the queue's members;
//! - `P:{D}:ring` — list of client labels with waiters, in round-robin order;
//! - `P:{D}:q:<label>` — list of waiter ids of one label, oldest first.
//!
//! and `P:replicas` (sorted set, replica id → heartbeat expiry). A slot freed by a release,
//! a lapse or a raised limit goes to the next waiter round-robin across labels inside the
//! same script; the waiter's replica hears of it on its channel `P:grant:<replica>`
//! (pub/sub) and, should that message be lost, from its next renewal.
//!
//! Every command is bounded by `[dominion_store] timeout`; a command that fails or times
//! out marks the store down (see [`Store::mark_down`]), and the replica heartbeat marks
//! it up again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::ConnectionManager;
use redis::{Client, ConnectionInfo, IntoConnectionInfo, Script, Value};
use tokio::sync::{oneshot, watch};

use crate::config::StoreConfig;

/// Distinct client labels a shared dominion's queue tracks (as [`super::MAX_TRACKED_LABELS`]).
const MAX_LABELS: usize = super::MAX_TRACKED_LABELS;

/// Shared by every script: key names, the server's clock, the purge of lapsed leases and
/// waiters, and the round-robin grant of free slots to waiters.
const PRELUDE: &str = r"
local base = KEYS[1]
local leases = base .. ':leases'
local waiting = base .. ':waiting'
local ring = base .. ':ring'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function purge()
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', waiting, '-inf', now)
end
local function grant(max, ttl, channel)
  while redis.call('ZCARD', leases) < max do
    local label = redis.call('LPOP', ring)
    if not label then break end
    local q = base .. ':q:' .. label
    local id = redis.call('LPOP', q)
    if redis.call('LLEN', q) > 0 then redis.call('RPUSH', ring, label) end
    if id and redis.call('ZREM', waiting, id) == 1 then
      redis.call('ZADD', leases, now + ttl, id)
      local replica = string.match(id, '^([^/]+)/')
      if replica then redis.call('PUBLISH', channel .. replica, id) end
    end
  end
end
";

/// ARGV: id, label, max, max_queue, mode (`queue` | `reject` | `try`), ttl ms, fair
/// (`1` | `0`), channel prefix, label cap. Returns `{outcome, held, waiting, label}`:
/// 1 granted, 0 queued (under `label`), 2 rejected, 3 queue full, 4 busy (`try`).
const ACQUIRE: &str = r"
purge()
local id, label = ARGV[1], ARGV[2]
local max, max_queue, mode, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
grant(max, ttl, ARGV[8])
local held, queued = redis.call('ZCARD', leases), redis.call('ZCARD', waiting)
if held < max and queued == 0 then
  redis.call('ZADD', leases, now + ttl, id)
  return {1, held + 1, queued, ''}
end
if mode == 'try' then return {4, held, queued, ''} end
if mode == 'reject' then return {2, held, queued, ''} end
if queued >= max_queue then return {3, held, queued, ''} end
if ARGV[7] ~= '1' then
  label = 'default'
elseif redis.call('EXISTS', base .. ':q:' .. label) == 0
    and redis.call('LLEN', ring) >= tonumber(ARGV[9]) - 1 then
  label = 'default'
end
local q = base .. ':q:' .. label
if redis.call('RPUSH', q, id) == 1 then redis.call('RPUSH', ring, label) end
redis.call('ZADD', waiting, now + ttl, id)
return {0, held, queued + 1, label}
";

/// ARGV: id (may be empty: only purge and grant), max, ttl ms, channel prefix.
/// Returns `{held, waiting}`.
const RELEASE: &str = r"
if ARGV[1] ~= '' then redis.call('ZREM', leases, ARGV[1]) end
purge()
grant(tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4])
return {redis.call('ZCARD', leases), redis.call('ZCARD', waiting)}
";

/// ARGV: id, label, max, ttl ms, channel prefix. A waiter that gives up: out of the
/// queue, or, when a slot reached it meanwhile, that slot passed on. Returns
/// `{held, waiting}`.
const CANCEL: &str = r"
local id, label = ARGV[1], ARGV[2]
if redis.call('ZREM', waiting, id) == 1 then
  local q = base .. ':q:' .. label
  redis.call('LREM', q, 1, id)
  if redis.call('LLEN', q) == 0 then redis.call('LREM', ring, 0, label) end
else
  redis.call('ZREM', leases, id)
end
purge()
grant(tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5])
return {redis.call('ZCARD', leases), redis.call('ZCARD', waiting)}
";

/// ARGV: ttl ms, max, channel prefix, lease count n, n lease ids, then waiter ids.
/// Extends what still exists. Returns `{held, waiting, ms until the next lease lapses (-1:
/// none), one status per id}`: a lease 1 renewed, 0 missing; a waiter 0 still waiting, 1
/// granted (its lease renewed), 2 lost.
const RENEW: &str = r"
local ttl, n = tonumber(ARGV[1]), tonumber(ARGV[4])
local out = {0, 0, -1}
for i = 5, #ARGV do
  local id = ARGV[i]
  if i < 5 + n then
    if redis.call('ZSCORE', leases, id) then
      redis.call('ZADD', leases, now + ttl, id)
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  elseif redis.call('ZSCORE', waiting, id) then
    redis.call('ZADD', waiting, now + ttl, id)
    out[#out + 1] = 0
  elseif redis.call('ZSCORE', leases, id) then
    redis.call('ZADD', leases, now + ttl, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 2
  end
end
purge()
grant(tonumber(ARGV[2]), ttl, ARGV[3])
out[1] = redis.call('ZCARD', leases)
out[2] = redis.call('ZCARD', waiting)
local first = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
if first[2] then out[3] = math.max(0, tonumber(first[2]) - now) else out[3] = -1 end
return out
";

/// ARGV: ttl ms, lease ids. Re-registers leases this replica still holds and the store
/// lost (it restarted, or they lapsed while it was unreachable): they count again, even
/// past the limit, until released. Returns `{held, waiting}`.
const ADOPT: &str = r"
for i = 2, #ARGV do
  redis.call('ZADD', leases, 'NX', now + tonumber(ARGV[1]), ARGV[i])
end
return {redis.call('ZCARD', leases), redis.call('ZCARD', waiting)}
";

/// KEYS[1]: the replicas set. ARGV: replica id, ttl ms. Returns the live replicas.
const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
";

/// What a store command failed with (the store then counts as down).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum StoreError {
    /// The command took longer than `[dominion_store] timeout`.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Redis answered an error or the connection broke.
    #[error("{0}")]
    Redis(String),
    /// A script answered something else than its documented shape.
    #[error("unexpected answer from a store script")]
    Shape,
}

/// The answer to an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// The slot is held under the lease id asked for.
    Granted,
    /// Waiting under this label (the label the store tracks it under).
    Queued(String),
    /// `policy = "reject"` and no free slot.
    Rejected,
    /// The global queue is full.
    Full,
    /// `try`: no free slot right now.
    Busy,
}

/// How an acquire waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Queue when every slot is busy.
    Queue,
    /// Answer rejected when every slot is busy.
    Reject,
    /// Answer busy when every slot is busy or someone waits (never queues).
    Try,
}

/// The limits one script call applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Slots across all replicas.
    pub max: u32,
    /// Waiters across all replicas.
    pub max_queue: usize,
    /// Round-robin by client label.
    pub fair: bool,
}

/// What a waiter hears from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A slot was handed to it: its waiter id is now a lease.
    Granted,
    /// The store no longer knows it (lapsed, or the store lost its data): ask again.
    Lost,
}

/// What a renewal found for one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// A lease renewed, or a waiter still waiting.
    Kept,
    /// A lease the store no longer has.
    Missing,
    /// A waiter that was granted a slot.
    Granted,
    /// A waiter the store no longer has.
    Lost,
}

/// Global counts of one dominion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Live leases.
    pub held: u32,
    /// Live waiters.
    pub waiting: u32,
}

/// The connection to the store and its health (see the module documentation).
pub(crate) struct Store {
    config: StoreConfig,
    client: Client,
    conn: Mutex<Option<ConnectionManager>>,
    replica: String,
    /// `<prefix>:grant:`, the start of every replica's grant channel.
    channel_prefix: String,
    /// `<prefix>:replicas`, the heartbeat set.
    replicas_key: String,
    next_id: AtomicU64,
    up: watch::Sender<bool>,
    /// Times the store went down since boot.
    downs: AtomicU64,
    /// Live replicas, as the last heartbeat counted them (1 until one answers).
    replicas: AtomicU32,
    /// Whether the grant channel is subscribed right now.
    subscribed: AtomicBool,
    waiters: Mutex<HashMap<String, oneshot::Sender<Wake>>>,
    scripts: Scripts,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.config.url)
            .field("replica", &self.replica)
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

struct Scripts {
    acquire: Script,
    release: Script,
    cancel: Script,
    renew: Script,
    adopt: Script,
    heartbeat: Script,
}

impl Scripts {
    fn new() -> Self {
        let with_prelude = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            acquire: with_prelude(ACQUIRE),
            release: with_prelude(RELEASE),
            cancel: with_prelude(CANCEL),
            renew: with_prelude(RENEW),
            adopt: with_prelude(ADOPT),
            heartbeat: Script::new(HEARTBEAT),
        }
    }
}

impl Store {
    /// A store client for `config` (no connection yet: [`Store::connect`]). Fails only
    /// when the URL cannot be used at all.
    pub(crate) fn new(config: &StoreConfig) -> Result<Self, String> {
        let mut info: ConnectionInfo = config
            .url
            .as_str()
            .into_connection_info()
            .map_err(|err| format!("dominion_store.url: {err}"))?;
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &config.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &config.password {
            settings = settings.set_password(password.expose());
        }
        info = info.set_redis_settings(settings);
        let client = Client::open(info).map_err(|err| format!("dominion_store.url: {err}"))?;
        let replica = format!("{:016x}", rand::random::<u64>());
        Ok(Self {
            channel_prefix: format!("{}:grant:", config.key_prefix),
            replicas_key: format!("{}:replicas", config.key_prefix),
            config: config.clone(),
            client,
            conn: Mutex::new(None),
            replica,
            next_id: AtomicU64::new(0),
            up: watch::channel(false).0,
            downs: AtomicU64::new(0),
            replicas: AtomicU32::new(1),
            subscribed: AtomicBool::new(false),
            waiters: Mutex::default(),
            scripts: Scripts::new(),
        })
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// This replica's id (random per process).
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// The key base of dominion `id`.
    pub(crate) fn dominion_key(&self, id: &str) -> String {
        format!("{}:{{{id}}}", self.config.key_prefix)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// A fresh lease (or waiter) id: `<replica>/<n>`.
    pub(crate) fn new_id(&self) -> String {
        format!(
            "{}/{}",
            self.replica,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Whether the store answered the last command.
    pub(crate) fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    /// Times the store went down since boot.
    pub(crate) fn downs(&self) -> u64 {
        self.downs.load(Ordering::Relaxed)
    }

    /// Live replicas as last counted (1 before the first heartbeat).
    pub(crate) fn replicas(&self) -> u32 {
        self.replicas.load(Ordering::Relaxed).max(1)
    }

    /// Whether this replica's grant channel is subscribed right now.
    pub(crate) fn subscribed(&self) -> bool {
        self.subscribed.load(Ordering::Relaxed)
    }

    /// Resolves when the store is (or goes) down.
    pub(crate) async fn down(&self) {
        let mut rx = self.up.subscribe();
        // The sender lives as long as `self`, so this ends only when the store is down.
        let _ = rx.wait_for(|up| !*up).await;
    }

    /// The store stopped answering: logged once per outage; waiters move on.
    pub(crate) fn mark_down(&self, error: &StoreError) {
        let was_up = self.up.send_replace(false);
        if was_up {
            self.downs.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                url = %self.config.url,
                replica = %self.replica,
                error = %error,
                "dominion store unreachable: shared dominions are degraded (each follows its on_store_failure)"
            );
        }
    }

    /// The store answers; the switch back to shared mode is logged unless `quiet` (the
    /// first heartbeat at boot, which logs its own line).
    fn mark_up(&self, quiet: bool) {
        let was_up = self.up.send_replace(true);
        if !was_up && !quiet {
            tracing::info!(
                url = %self.config.url,
                replica = %self.replica,
                replicas = self.replicas(),
                "dominion store reachable: shared dominions are shared again"
            );
        }
    }

    /// Registers waiter `id` for its wake-up (before it enqueues, so no grant is missed).
    pub(crate) fn expect(&self, id: &str) -> oneshot::Receiver<Wake> {
        let (tx, rx) = oneshot::channel();
        self.lock_waiters().insert(id.to_owned(), tx);
        rx
    }

    /// Drops waiter `id`'s registration.
    pub(crate) fn forget(&self, id: &str) {
        self.lock_waiters().remove(id);
    }

    /// Delivers `wake` to waiter `id`, when this replica still has it.
    pub(crate) fn wake(&self, id: &str, wake: Wake) {
        if let Some(tx) = self.lock_waiters().remove(id) {
            let _ = tx.send(wake);
        }
    }

    fn lock_waiters(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Wake>>> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection, establishing it when there is none (bounded by `connect_timeout`).
    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        if let Some(conn) = self
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Ok(conn);
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout))
            .set_response_timeout(Some(self.config.timeout))
            .set_number_of_retries(1)
            .set_max_delay(self.config.lease_ttl / 3);
        let conn = tokio::time::timeout(
            self.config.connect_timeout + self.config.timeout,
            self.client.get_connection_manager_with_config(config),
        )
        .await
        .map_err(|_| StoreError::Timeout(self.config.connect_timeout))?
        .map_err(|err| StoreError::Redis(err.to_string()))?;
        *self.conn.lock().unwrap_or_else(PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// Runs `invocation`, bounded by `timeout`; a failure marks the store down.
    /// Runs `invocation` answering a `T`, bounded by `timeout`; a failure marks the store
    /// down.
    async fn invoke<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let result = async {
            let mut conn = self.connection().await?;
            tokio::time::timeout(self.config.timeout, invocation.invoke_async::<T>(&mut conn))
                .await
                .map_err(|_| StoreError::Timeout(self.config.timeout))?
                .map_err(|err| StoreError::Redis(err.to_string()))
        }
        .await;
        if let Err(error) = &result {
            self.mark_down(error);
        }
        result
    }

    /// One atomic acquire of a slot of dominion `key` for lease `id`.
    pub(crate) async fn acquire(
        &self,
        key: &str,
        id: &str,
        label: &str,
        bounds: Bounds,
        mode: Mode,
    ) -> Result<(Acquired, Counts), StoreError> {
        let mode = match mode {
            Mode::Queue => "queue",
            Mode::Reject => "reject",
            Mode::Try => "try",
        };
        let mut call = self.scripts.acquire.prepare_invoke();
        call.key(key)
            .arg(id)
            .arg(label)
            .arg(bounds.max)
            .arg(bounds.max_queue)
            .arg(mode)
            .arg(self.ttl_ms())
            .arg(if bounds.fair { "1" } else { "0" })
            .arg(&self.channel_prefix)
            .arg(MAX_LABELS);
        let answer = self.invoke::<Vec<Value>>(&call).await?;
        let outcome = int(&answer, 0)?;
        let counts = counts(answer.get(1..).unwrap_or_default())?;
        let acquired = match outcome {
            1 => Acquired::Granted,
            0 => Acquired::Queued(text(&answer, 3)?),
            2 => Acquired::Rejected,
            3 => Acquired::Full,
            4 => Acquired::Busy,
            _ => return Err(StoreError::Shape),
        };
        Ok((acquired, counts))
    }

    /// Frees lease `id` (none: only purge lapsed leases and grant free slots).
    pub(crate) async fn release(
        &self,
        key: &str,
        id: Option<&str>,
        max: u32,
    ) -> Result<Counts, StoreError> {
        let mut call = self.scripts.release.prepare_invoke();
        call.key(key)
            .arg(id.unwrap_or_default())
            .arg(max)
            .arg(self.ttl_ms())
            .arg(&self.channel_prefix);
        counts(&self.invoke::<Vec<Value>>(&call).await?)
    }

    /// Takes waiter `id` (queued under `label`) out of the queue, or passes on the slot
    /// it was granted meanwhile.
    pub(crate) async fn cancel(
        &self,
        key: &str,
        id: &str,
        label: &str,
        max: u32,
    ) -> Result<Counts, StoreError> {
        let mut call = self.scripts.cancel.prepare_invoke();
        call.key(key)
            .arg(id)
            .arg(label)
            .arg(max)
            .arg(self.ttl_ms())
            .arg(&self.channel_prefix);
        counts(&self.invoke::<Vec<Value>>(&call).await?)
    }

    /// Extends `leases` and `waiters` of dominion `key`; what each one's state is.
    pub(crate) async fn renew(
        &self,
        key: &str,
        leases: &[String],
        waiters: &[String],
        max: u32,
    ) -> Result<(Counts, Option<Duration>, Vec<Renewed>), StoreError> {
        let mut call = self.scripts.renew.prepare_invoke();
        call.key(key)
            .arg(self.ttl_ms())
            .arg(max)
            .arg(&self.channel_prefix)
            .arg(leases.len());
        for id in leases.iter().chain(waiters) {
            call.arg(id);
        }
        let answer = self.invoke::<Vec<Value>>(&call).await?;
        let counts = counts(&answer)?;
        let next_lapse = u64::try_from(int(&answer, 2)?)
            .ok()
            .map(Duration::from_millis);
        let mut states = Vec::with_capacity(leases.len() + waiters.len());
        for i in 0..leases.len() + waiters.len() {
            let code = int(&answer, i + 3)?;
            states.push(match (i < leases.len(), code) {
                (true, 1) => Renewed::Kept,
                (true, 0) => Renewed::Missing,
                (false, 0) => Renewed::Kept,
                (false, 1) => Renewed::Granted,
                (false, 2) => Renewed::Lost,
                _ => return Err(StoreError::Shape),
            });
        }
        Ok((counts, next_lapse, states))
    }

    /// Re-registers `leases` this replica holds and the store lost.
    pub(crate) async fn adopt(&self, key: &str, leases: &[String]) -> Result<Counts, StoreError> {
        let mut call = self.scripts.adopt.prepare_invoke();
        call.key(key).arg(self.ttl_ms());
        for id in leases {
            call.arg(id);
        }
        counts(&self.invoke::<Vec<Value>>(&call).await?)
    }

    /// The replica heartbeat: registers this replica, counts the live ones, and marks the
    /// store up when it answers (logging the switch back unless `quiet`).
    pub(crate) async fn heartbeat(&self, quiet: bool) -> Result<u32, StoreError> {
        let mut call = self.scripts.heartbeat.prepare_invoke();
        call.key(&self.replicas_key)
            .arg(&self.replica)
            .arg(self.ttl_ms());
        let n: i64 = self.invoke(&call).await?;
        let n = u32::try_from(n).unwrap_or(u32::MAX).max(1);
        self.replicas.store(n, Ordering::Relaxed);
        self.mark_up(quiet);
        Ok(n)
    }

    /// Leaves the replica set (shutdown); best effort.
    pub(crate) async fn leave(&self) {
        let Ok(mut conn) = self.connection().await else {
            return;
        };
        let _ = tokio::time::timeout(
            self.config.timeout,
            redis::cmd("ZREM")
                .arg(&self.replicas_key)
                .arg(&self.replica)
                .query_async::<i64>(&mut conn),
        )
        .await;
    }

    /// Listens on this replica's grant channel until the connection ends, waking each
    /// waiter named there. Returns when the subscription is lost (the caller retries).
    pub(crate) async fn listen(self: &Arc<Self>) -> Result<(), StoreError> {
        let mut pubsub = tokio::time::timeout(
            self.config.connect_timeout + self.config.timeout,
            self.client.get_async_pubsub(),
        )
        .await
        .map_err(|_| StoreError::Timeout(self.config.connect_timeout))?
        .map_err(|err| StoreError::Redis(err.to_string()))?;
        let channel = format!("{}{}", self.channel_prefix, self.replica);
        tokio::time::timeout(self.config.timeout, pubsub.subscribe(&channel))
            .await
            .map_err(|_| StoreError::Timeout(self.config.timeout))?
            .map_err(|err| StoreError::Redis(err.to_string()))?;
        self.subscribed.store(true, Ordering::Relaxed);
        let mut messages = pubsub.on_message();
        while let Some(message) = messages.next().await {
            if let Ok(id) = std::str::from_utf8(message.get_payload_bytes()) {
                self.wake(id, Wake::Granted);
            }
        }
        self.subscribed.store(false, Ordering::Relaxed);
        Ok(())
    }
}

fn int(answer: &[Value], i: usize) -> Result<i64, StoreError> {
    match answer.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        _ => Err(StoreError::Shape),
    }
}

fn text(answer: &[Value], i: usize) -> Result<String, StoreError> {
    match answer.get(i) {
        Some(Value::BulkString(bytes)) => {
            String::from_utf8(bytes.clone()).map_err(|_| StoreError::Shape)
        }
        Some(Value::SimpleString(s)) => Ok(s.clone()),
        _ => Err(StoreError::Shape),
    }
}

/// The `{held, waiting, ...}` head of a script's answer.
fn counts(answer: &[Value]) -> Result<Counts, StoreError> {
    let count = |i| u32::try_from(int(answer, i)?).map_err(|_| StoreError::Shape);
    Ok(Counts {
        held: count(0)?,
        waiting: count(1)?,
    })
}
