//! Live state: the active profile's routing table, swapped atomically on a profile switch.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::admission::Admission;
use crate::config::{
    self, Config, ConfigError, ConfigErrorKind, EndpointConfig, EnvLayers, ModelBackend,
    ModelConfig, ServerConfig, ServerLimits,
};
use crate::error::ErrorCode;
use crate::local::{self, LocalChild, LocalError, LocalRuntime, Prepared};
use crate::secret::Secret;
use crate::shutdown::{Shutdown, ShutdownTrigger};

/// One upstream endpoint with its two HTTP clients.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// The endpoint's id.
    pub id: String,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// Credential sent as `Authorization: Bearer`.
    pub api_key: Option<Secret>,
    /// Connect deadline and whole-request deadline: non-streaming requests.
    pub buffered: reqwest::Client,
    /// Connect deadline only: streaming requests, which may outlive any fixed deadline.
    pub streaming: reqwest::Client,
    /// Streaming: deadline for the response head.
    pub stream_first_byte_timeout: std::time::Duration,
    /// Streaming: longest silence between two body chunks.
    pub stream_idle_timeout: std::time::Duration,
    /// Largest non-streaming body read.
    pub max_response_bytes: usize,
    /// Longest SSE line or event.
    pub max_stream_event_bytes: usize,
    /// How long failover skips the endpoint after it failed.
    pub failover_cooldown: std::time::Duration,
    /// Tells this endpoint's per-thread clients apart in [`THREAD_CLIENTS`].
    key: u64,
    /// `connect_timeout`, for the per-thread clients.
    connect_timeout: std::time::Duration,
    /// `timeout`, for the per-thread buffered client.
    timeout: std::time::Duration,
    /// The parsed base URL of a plain `http://` endpoint: its buffered requests go
    /// through the inline client ([`crate::relay::h1`]).
    plain: Option<crate::relay::h1::Plain>,
}

/// Most endpoints' clients one thread keeps (the cache is emptied past this, e.g. after
/// many profile switches, and refilled on use).
const MAX_THREAD_CLIENTS: usize = 256;

/// Source of [`Upstream::key`].
static NEXT_UPSTREAM_KEY: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Each I/O thread's own clients (buffered, streaming) per endpoint key, so an upstream
    /// connection lives on the runtime of the thread whose requests use it.
    static THREAD_CLIENTS: RefCell<HashMap<u64, (reqwest::Client, reqwest::Client)>> =
        RefCell::new(HashMap::new());
}

fn client_builder(connect_timeout: std::time::Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .pool_idle_timeout(std::time::Duration::from_secs(90))
}

impl Upstream {
    /// Builds the two clients of `endpoint`.
    pub(crate) fn new(endpoint: &EndpointConfig) -> Result<Self, reqwest::Error> {
        let base = || client_builder(endpoint.connect_timeout);
        Ok(Self {
            id: endpoint.id.clone(),
            base_url: endpoint.base_url.clone(),
            api_key: endpoint.api_key.clone(),
            buffered: base().timeout(endpoint.timeout).build()?,
            streaming: base().build()?,
            stream_first_byte_timeout: endpoint.stream_first_byte_timeout,
            stream_idle_timeout: endpoint.stream_idle_timeout,
            max_response_bytes: endpoint.max_response_bytes,
            max_stream_event_bytes: endpoint.max_stream_event_bytes,
            failover_cooldown: endpoint.failover_cooldown,
            key: NEXT_UPSTREAM_KEY.fetch_add(1, Ordering::Relaxed),
            connect_timeout: endpoint.connect_timeout,
            timeout: endpoint.timeout,
            plain: crate::relay::h1::Plain::parse(&endpoint.base_url),
        })
    }

    /// The client for a buffered (`streaming == false`) or streaming request, owned by the
    /// calling thread: each I/O thread has its own connection pool, whose connections are
    /// tasks of that thread's runtime, so a request never waits on another thread. Falls
    /// back to the shared clients if a per-thread one cannot be built.
    pub(crate) fn client(&self, streaming: bool) -> reqwest::Client {
        let pick = |clients: &(reqwest::Client, reqwest::Client)| {
            if streaming {
                clients.1.clone()
            } else {
                clients.0.clone()
            }
        };
        THREAD_CLIENTS.with_borrow_mut(|cache| {
            if let Some(clients) = cache.get(&self.key) {
                return pick(clients);
            }
            let built = client_builder(self.connect_timeout)
                .timeout(self.timeout)
                .build()
                .and_then(|buffered| Ok((buffered, client_builder(self.connect_timeout).build()?)));
            match built {
                Ok(clients) => {
                    if cache.len() >= MAX_THREAD_CLIENTS {
                        cache.clear();
                    }
                    let client = pick(&clients);
                    cache.insert(self.key, clients);
                    client
                }
                Err(_) => pick(&(self.buffered.clone(), self.streaming.clone())),
            }
        })
    }

    /// The parsed plain `http://` base URL, when buffered requests use the inline client.
    pub(crate) fn plain(&self) -> Option<&crate::relay::h1::Plain> {
        self.plain.as_ref()
    }

    /// Tells this endpoint's pooled connections apart (unique per built endpoint).
    pub(crate) fn pool_key(&self) -> u64 {
        self.key
    }

    /// The connect deadline.
    pub(crate) fn connect_timeout(&self) -> std::time::Duration {
        self.connect_timeout
    }

    /// The whole-request deadline of a buffered request.
    pub(crate) fn timeout(&self) -> std::time::Duration {
        self.timeout
    }

    /// `base_url` joined with `path` (which starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }
}

/// Why a model has no route. `routes/` answers it as an error envelope with the status of
/// [`RouteError::error_code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RouteError {
    /// A remote model whose first endpoint has no client (validation makes this unreachable).
    #[error("model has no usable endpoint")]
    NoEndpoint,
    /// A local model whose child is not running.
    #[error("local model {model} has no running llama-server")]
    LocalRuntimeUnavailable {
        /// The model's name.
        model: String,
    },
}

impl RouteError {
    /// The error code routes answer with.
    pub(crate) fn error_code(&self) -> ErrorCode {
        match self {
            Self::NoEndpoint => ErrorCode::UpstreamTransport,
            Self::LocalRuntimeUnavailable { .. } => ErrorCode::LocalRuntimeUnavailable,
        }
    }
}

/// Where a model's request goes: a remote endpoint, or a local model's child.
#[derive(Debug)]
pub(crate) struct Route<'a> {
    /// The endpoint (for a local model, the child's loopback endpoint).
    pub upstream: &'a Upstream,
    /// The admission the request must pass (`None`: unlimited).
    pub admission: Option<&'a Admission>,
    /// The local child behind `upstream`, for respawn-on-failure.
    pub child: Option<&'a LocalChild>,
}

/// The active profile: configuration plus ready clients.
#[derive(Debug)]
pub(crate) struct Runtime {
    /// The profile's name.
    pub profile: String,
    /// The validated configuration.
    pub config: Config,
    upstreams: HashMap<String, Upstream>,
    /// Admission per limited dominion id.
    admissions: HashMap<String, Admission>,
    /// The client for the search provider, when `[tools.web_search]` is present.
    search_client: Option<reqwest::Client>,
    /// The local models' children, once started (dropping the runtime kills them).
    local: Option<LocalRuntime>,
}

impl Runtime {
    /// Builds clients for every endpoint of `config`. Dominions that `previous` already
    /// has keep their admission state (in-flight and waiting requests), with the new limits.
    pub(crate) fn build(
        profile: &str,
        config: Config,
        source: &Path,
        previous: Option<&Runtime>,
    ) -> Result<Self, ConfigError> {
        let client_error = |key: String, err: reqwest::Error| {
            ConfigError::new(
                ConfigErrorKind::Validation,
                source,
                Some(key),
                format!("cannot build an HTTP client: {err}"),
            )
        };
        let search_client = match &config.web_search {
            None => None,
            Some(_) => Some(
                reqwest::Client::builder()
                    .connect_timeout(std::time::Duration::from_secs(10))
                    .timeout(std::time::Duration::from_secs(30))
                    .build()
                    .map_err(|err| client_error("tools.web_search".into(), err))?,
            ),
        };
        let mut upstreams = HashMap::new();
        for endpoint in &config.endpoints {
            let upstream = Upstream::new(endpoint)
                .map_err(|err| client_error(format!("endpoint[{}]", endpoint.id), err))?;
            upstreams.insert(endpoint.id.clone(), upstream);
        }
        // Infallible from here on: reusing a live admission happens only once the new
        // runtime is certain to be built.
        let mut admissions = HashMap::new();
        for dominion in &config.dominions {
            let reused = previous
                .and_then(|p| p.admissions.get(&dominion.id))
                .filter(|a| a.reconfigure(dominion))
                .cloned();
            if let Some(admission) = reused.or_else(|| Admission::new(dominion)) {
                admissions.insert(dominion.id.clone(), admission);
            }
        }
        Ok(Self {
            profile: profile.to_owned(),
            config,
            upstreams,
            admissions,
            search_client,
            local: None,
        })
    }

    /// Starts the prepared local models' children and records their resolved dialects.
    pub(crate) async fn start_local(
        &mut self,
        prepared: Option<&Prepared>,
    ) -> Result<(), LocalError> {
        let Some(prepared) = prepared else {
            return Ok(());
        };
        let local = LocalRuntime::start(prepared).await?;
        for model in &mut self.config.models {
            if let Some(started) = local.model(&model.name) {
                model.tool_dialect = started.dialect;
            }
        }
        self.local = Some(local);
        Ok(())
    }

    /// The running local children, when the profile has local models.
    pub(crate) fn local(&self) -> Option<&LocalRuntime> {
        self.local.as_ref()
    }

    /// The search provider client, when web search is configured.
    pub(crate) fn search_client(&self) -> Option<&reqwest::Client> {
        self.search_client.as_ref()
    }

    /// Queue state of every dominion, for `/admin/status`.
    pub(crate) fn dominion_status(&self) -> Vec<serde_json::Value> {
        use crate::config::{DominionKind, QueuePolicy};
        self.config
            .dominions
            .iter()
            .map(|d| {
                let mut entry = serde_json::json!({
                    "id": d.id,
                    "kind": match d.kind { DominionKind::Remote => "remote", DominionKind::Local => "local" },
                    "policy": match d.policy { QueuePolicy::Queue => "queue", QueuePolicy::Reject => "reject" },
                    "fair_scheduling": d.fair_scheduling,
                    "max_concurrency": d.max_concurrency,
                    "max_queue": d.max_queue,
                    "in_flight": null,
                    "waiting": 0,
                    "waiting_by_client": {},
                });
                let live = self.admissions.get(&d.id).map(Admission::snapshot);
                if let (Some(serde_json::Value::Object(live)), Some(map)) = (live, entry.as_object_mut()) {
                    for key in ["in_flight", "waiting", "waiting_by_client"] {
                        if let Some(v) = live.get(key) {
                            map.insert(key.into(), v.clone());
                        }
                    }
                }
                entry
            })
            .collect()
    }

    /// Resolves a model to every endpoint that serves it, in the configured order (the
    /// failover order); a local model has exactly one, its child.
    pub(crate) fn routes<'a>(
        &'a self,
        model: &'a ModelConfig,
    ) -> Result<Vec<Route<'a>>, RouteError> {
        let endpoints = match &model.backend {
            ModelBackend::Remote { endpoints, .. } => endpoints,
            ModelBackend::Local(launch) => {
                let started = self
                    .local
                    .as_ref()
                    .and_then(|l| l.model(&model.name))
                    .ok_or_else(|| RouteError::LocalRuntimeUnavailable {
                        model: model.name.clone(),
                    })?;
                let admission = match &launch.dominion {
                    Some(d) => self.admissions.get(d),
                    None => started.admission.as_ref(),
                };
                return Ok(vec![Route {
                    upstream: &started.upstream,
                    admission,
                    child: Some(&started.child),
                }]);
            }
        };
        let routes: Vec<Route<'a>> = endpoints
            .iter()
            .filter_map(|id| {
                let admission = self
                    .config
                    .endpoint(id)
                    .and_then(|e| e.dominion.as_ref())
                    .and_then(|d| self.admissions.get(d));
                Some(Route {
                    upstream: self.upstreams.get(id)?,
                    admission,
                    child: None,
                })
            })
            .collect();
        if routes.is_empty() {
            return Err(RouteError::NoEndpoint);
        }
        Ok(routes)
    }

    /// Live admission state per limited dominion id (for metrics).
    pub(crate) fn admissions(&self) -> impl Iterator<Item = (&str, &Admission)> {
        self.admissions.iter().map(|(id, a)| (id.as_str(), a))
    }
}

/// Shared application state: the live runtime and what a profile switch needs.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    live: RwLock<Arc<Runtime>>,
    /// Serialises profile switches; holds the env layers loaded so far.
    switch: tokio::sync::Mutex<EnvLayers>,
    boot: PathBuf,
    server: ServerConfig,
    shutdown: Shutdown,
    metrics: crate::metrics::Metrics,
    cooldowns: crate::relay::failover::Cooldowns,
}

/// Why a profile switch failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SwitchError {
    /// The name is not a single path component.
    #[error("{0}")]
    InvalidName(ConfigError),
    /// No such profile.
    #[error("{0}")]
    Unknown(ConfigError),
    /// The profile does not load or validate.
    #[error("{0}")]
    Invalid(ConfigError),
    /// A local model of the new profile failed to provision or start; the previous
    /// profile (and its children) stays live.
    #[error("{0}")]
    Local(ConfigError),
}

/// Everything boot produces: state to serve and the bind address.
#[derive(Debug)]
pub(crate) struct Booted {
    /// Application state.
    pub state: AppState,
    /// `[server] bind`.
    pub bind: String,
    /// `[server]`'s connection limits.
    pub limits: ServerLimits,
    /// Ends in-flight requests and streams with `shutting_down` when the drain ends.
    pub shutdown: ShutdownTrigger,
}

/// Boots `boot_toml` as `gateway.toml` in a new temporary directory, with a profile `main`
/// that includes it (for the in-process tests; the directory lives as long as the
/// returned guard).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) async fn boot_in_tempdir(boot_toml: &str) -> (Booted, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("gateway.toml", boot_toml),
        ("profiles/main.toml", "include = [\"../gateway.toml\"]\n"),
    ] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let booted = boot(&dir.path().join("gateway.toml"), "main")
        .await
        .unwrap();
    (booted, dir)
}

/// Boot sequence up to (not including) binding: env files, boot `[server]`, the profile's
/// include chain, validation and routing table.
pub(crate) async fn boot(boot_file: &Path, profile: &str) -> Result<Booted, ConfigError> {
    let source = config::profile_source(boot_file, profile).map_err(|err| {
        // On the command line the name came from `--profile`.
        if err.kind() == ConfigErrorKind::ProfileName {
            err.with_key("--profile")
        } else {
            err
        }
    })?;
    let mut env = EnvLayers::new();
    env.load_file(&source.env_file)?;
    let stem = boot_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    env.load_file(&boot_file.with_file_name(format!("{stem}.env")))?;
    let server = config::load_boot_server(boot_file, &env)?;
    let config = config::load_profile(&source, boot_file, &server, &env)?;
    log_chain(&config, boot_file);
    let mut runtime = Runtime::build(profile, config, &source.path, None)?;
    // Everything local is checked and provisioned before any child starts, and every
    // child is ready before the socket is bound.
    let prepared = local::prepare(&runtime.config)
        .await
        .map_err(|err| local_error(&source.path, &err))?;
    runtime
        .start_local(prepared.as_ref())
        .await
        .map_err(|err| local_error(&source.path, &err))?;
    let bind = server.bind.clone();
    let limits = server.limits;
    let (trigger, shutdown) = crate::shutdown::channel();
    let state = AppState {
        inner: Arc::new(Shared {
            live: RwLock::new(Arc::new(runtime)),
            switch: tokio::sync::Mutex::new(env),
            boot: boot_file.to_path_buf(),
            server,
            shutdown,
            metrics: crate::metrics::Metrics::new(),
            cooldowns: crate::relay::failover::Cooldowns::default(),
        }),
    };
    Ok(Booted {
        state,
        bind,
        limits,
        shutdown: trigger,
    })
}

fn log_chain(config: &Config, boot_file: &Path) {
    let chain: Vec<String> = config
        .include_chain
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    tracing::info!(chain = %chain.join(" -> "), "resolved include chain");
    let boot = std::fs::canonicalize(boot_file).unwrap_or_else(|_| boot_file.to_path_buf());
    if !config.include_chain.contains(&boot) {
        tracing::warn!(
            boot = %boot_file.display(),
            "the boot file is not in the profile's include chain: edits to it have no effect on the loaded set"
        );
    }
}

/// A local runtime failure as a configuration error of the profile.
fn local_error(file: &Path, err: &LocalError) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Local, file, None, err.to_string())
}

impl AppState {
    /// Builds the calling thread's clients for every remote endpoint of the live profile
    /// now (building one loads the system root certificates, a few milliseconds), so the
    /// first request on each I/O thread does not pay for it. Endpoints of a later profile,
    /// and local children, get theirs on first use.
    pub(crate) fn warm_thread_clients(&self) {
        for upstream in self.runtime().upstreams.values() {
            let _ = upstream.client(false);
        }
    }

    /// The live runtime (cheap: one `Arc` clone under a read lock).
    pub(crate) fn runtime(&self) -> Arc<Runtime> {
        self.inner
            .live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Resolves when shutdown's drain has ended.
    pub(crate) fn shutdown(&self) -> Shutdown {
        self.inner.shutdown.clone()
    }

    /// The process's metrics.
    pub(crate) fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    /// The process's failover cooldown table.
    pub(crate) fn cooldowns(&self) -> &crate::relay::failover::Cooldowns {
        &self.inner.cooldowns
    }

    /// The gateway's bearer key.
    pub(crate) fn api_key(&self) -> &Secret {
        &self.inner.server.api_key
    }

    /// Switches to profile `name`: loads its env file, builds and validates the new
    /// configuration, then swaps it in. On any failure the live state is untouched.
    pub(crate) async fn switch_profile(&self, name: &str) -> Result<Arc<Runtime>, SwitchError> {
        let mut env_guard = self.inner.switch.lock().await;
        let boot = &self.inner.boot;
        let boot_file = boot.clone();
        let server = self.inner.server.clone();
        let profile = name.to_owned();
        let mut env = env_guard.clone();
        let previous = self.runtime();
        let old = previous.clone();
        // Every file read (the profiles directory, the env file, the include chain) and the
        // client construction stay off the async workers.
        let built = tokio::task::spawn_blocking(move || {
            let source =
                config::profile_source(&boot_file, &profile).map_err(|err| match err.kind() {
                    ConfigErrorKind::ProfileName => SwitchError::InvalidName(err),
                    _ => SwitchError::Unknown(err),
                })?;
            env.load_file(&source.env_file)
                .map_err(SwitchError::Invalid)?;
            let config = config::load_profile(&source, &boot_file, &server, &env)
                .map_err(SwitchError::Invalid)?;
            log_chain(&config, &boot_file);
            Runtime::build(&profile, config, &source.path, Some(&previous))
                .map(|rt| (rt, env, source.path.clone()))
                .map_err(SwitchError::Invalid)
        })
        .await
        .map_err(|err| {
            SwitchError::Invalid(ConfigError::new(
                ConfigErrorKind::Io,
                boot,
                None,
                format!("profile load task failed: {err}"),
            ))
        })??;
        let (mut runtime, env, source_path) = built;
        // The new set is checked and provisioned first; then the old children stop
        // (freeing memory and VRAM) and the new ones start. If one fails, the old set is
        // restarted on its ports and bearers, and the old profile stays live.
        let prepared = local::prepare(&runtime.config)
            .await
            .map_err(|err| SwitchError::Local(local_error(&source_path, &err)))?;
        if let Some(old_local) = old.local() {
            old_local.retire_all();
        }
        if let Err(err) = runtime.start_local(prepared.as_ref()).await {
            drop(runtime);
            if let Some(old_local) = old.local()
                && let Err(restart) = old_local.restart_all().await
            {
                tracing::error!(error = %restart, "could not restart the previous local models");
            }
            return Err(SwitchError::Local(local_error(&source_path, &err)));
        }
        drop(old);
        let runtime = Arc::new(runtime);
        *self
            .inner
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner) = runtime.clone();
        *env_guard = env;
        tracing::info!(profile = name, "switched profile");
        Ok(runtime)
    }
}
