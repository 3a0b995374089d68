//! The composition root: boot, the live plan, and the transactional profile switch.
//!
//! A profile becomes live in two steps. **Prepare** (fallible, changes nothing live):
//! load and validate the configuration, build the web-search client, provision the local
//! models, start the children the new profile does not share with the live one
//! ([`Fleet::start`]), stage the admission handles ([`Staged`]) and build the [`Plan`].
//! **Commit** (infallible, synchronous): apply the new admission limits, swap the plan in,
//! retire the live profile's children the new one does not share, keep the new env layer.
//! A failure anywhere in the first step drops what it started (the new children die) and
//! leaves the live profile exactly as it was: its plan, its children, its admission
//! limits and its env layer.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::admission::shared::Shared;
use crate::config::{
    self, Config, ConfigError, ConfigErrorKind, EnvLayers, ServerConfig, ServerLimits,
};
use crate::local::{self, Fleet, LocalError};
use crate::metrics::Metrics;
use crate::otel::{Export, OtlpConfig};
use crate::plan::{Current, Plan, Staged};
use crate::relay::Transport;
use crate::relay::failover::Cooldowns;
use crate::relay::http::HttpTransport;
use crate::routes::{Control, Ctx, Service};
use crate::shutdown::{self, ShutdownTrigger};

/// Everything boot produces: the service to serve and what the server needs around it.
#[derive(Debug)]
pub(crate) struct Booted {
    /// What each connection serves.
    pub service: Service,
    /// `[server] bind`.
    pub bind: String,
    /// `[server]`'s connection limits.
    pub limits: ServerLimits,
    /// Ends in-flight requests and streams with `shutting_down` when the drain ends.
    pub shutdown: ShutdownTrigger,
    /// The live plan (each I/O thread warms its clients for it).
    pub plans: Arc<Current>,
    /// The OTLP span export, when the environment turns it on (finished after the drain).
    pub export: Option<Export>,
    /// The shared dominions' store client, with `[dominion_store]` (the replica leaves
    /// the store's replica set after the drain).
    pub shared: Option<Arc<Shared>>,
}

/// The boot sequence up to (not including) binding: env files, the boot file's
/// `[server]`, the profile's include chain, validation, local children, the plan. `env` is
/// the environment lookup (the process environment, or a fixed one in tests) and
/// `transport` sends attempts upstream.
pub(crate) async fn boot(
    boot_file: &Path,
    profile: &str,
    env: EnvLayers,
    transport: Arc<dyn Transport>,
) -> Result<Booted, ConfigError> {
    boot_traced(boot_file, profile, env, transport, export_from_env).await
}

/// The OTLP export the environment asks for (`OTEL_EXPORTER_OTLP_ENDPOINT`, ...; see
/// `otel`), started on the current runtime. A setting this build cannot honour is
/// logged and leaves export off: tracing never keeps the gateway from serving.
fn export_from_env(env: &EnvLayers) -> Option<Export> {
    let started = OtlpConfig::from_env(env.env()).and_then(|config| {
        config
            .map(|config| Export::start(&config).map(|export| (export, config)))
            .transpose()
    });
    match started {
        Ok(Some((export, config))) => {
            tracing::info!(endpoint = %config.endpoint, "exporting request spans over OTLP");
            Some(export)
        }
        Ok(None) => None,
        Err(err) => {
            tracing::warn!(error = %err, "OTLP export is off");
            None
        }
    }
}

/// [`boot`], with the span export `export` makes (from the environment once the env
/// files are loaded; tests pass their own exporter).
pub(crate) async fn boot_traced(
    boot_file: &Path,
    profile: &str,
    mut env: EnvLayers,
    transport: Arc<dyn Transport>,
    export: impl FnOnce(&EnvLayers) -> Option<Export>,
) -> Result<Booted, ConfigError> {
    let source = config::profile_source(boot_file, profile).map_err(|err| {
        // On the command line the name came from `--profile`.
        if err.kind() == ConfigErrorKind::ProfileName {
            err.with_key("--profile")
        } else {
            err
        }
    })?;
    env.load_file(&source.env_file)?;
    let stem = boot_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    env.load_file(&boot_file.with_file_name(format!("{stem}.env")))?;
    let server = config::load_boot_server(boot_file, &env)?;
    let config = config::load_profile(&source, boot_file, &server, &env)?;
    log_chain(&config, boot_file);
    let search = search_client(&config, &source.path)?;
    // Everything local is checked and provisioned before any child starts, and every
    // child is ready before the socket is bound.
    let prepared = local::prepare(&config)
        .await
        .map_err(|err| local_error(&source.path, &err))?;
    let fleet = Fleet::start(prepared.as_ref(), &Fleet::default())
        .await
        .map_err(|err| local_error(&source.path, &err))?;
    let shared = match &server.dominion_store {
        None => None,
        Some(store) => Some(Shared::start(store).await.map_err(|message| {
            ConfigError::new(
                ConfigErrorKind::Validation,
                boot_file,
                Some("dominion_store.url".into()),
                message,
            )
        })?),
    };
    let staged = Staged::new(&config, &fleet, None, shared.as_deref());
    let plan = Plan::build(profile, config, &fleet, &staged, search);
    check_clients(&plan, &source.path)?;
    staged.commit();
    let export = export(&env);
    let plans = Arc::new(Current::new(plan));
    let (trigger, signal) = shutdown::channel();
    let control = Arc::new(Switcher {
        plans: plans.clone(),
        boot: boot_file.to_path_buf(),
        server: server.clone(),
        shared: shared.clone(),
        live: tokio::sync::Mutex::new(Live { env, fleet }),
    });
    let ctx = Arc::new(Ctx {
        plans: plans.clone(),
        transport,
        cooldowns: Cooldowns::default(),
        metrics: Metrics::new(),
        shutdown: signal,
        api_key: server.api_key.clone(),
        control,
        tracing: export.as_ref().map(Export::tracing),
        shared: shared.clone(),
    });
    Ok(Booted {
        service: Service::new(ctx),
        bind: server.bind.clone(),
        limits: server.limits,
        shutdown: trigger,
        plans,
        export,
        shared,
    })
}

/// Boots `boot_toml` as `gateway.toml` in a new temporary directory, with a profile `main`
/// that includes it, over `transport` and a fixed environment (for the in-process tests;
/// the directory lives as long as the returned guard).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) async fn boot_in_tempdir(
    boot_toml: &str,
    transport: Arc<dyn Transport>,
) -> (Booted, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("gateway.toml", boot_toml),
        ("profiles/main.toml", "include = [\"../gateway.toml\"]\n"),
    ] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let env = EnvLayers::fixed(std::collections::HashMap::new());
    let booted = boot(&dir.path().join("gateway.toml"), "main", env, transport)
        .await
        .unwrap();
    (booted, dir)
}

/// Logs the include chain, and warns when the boot file is not in it (edits to it then
/// change nothing). Paths are compared canonical: the boot file may be given relative.
fn log_chain(config: &Config, boot_file: &Path) {
    let chain: Vec<String> = config
        .include_chain
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    tracing::info!(chain = %chain.join(" -> "), "resolved include chain");
    if !boot_in_chain(config, boot_file) {
        tracing::warn!(
            boot = %boot_file.display(),
            "the boot file is not in the profile's include chain: edits to it have no effect on the loaded set"
        );
    }
}

/// Whether the profile's include chain loads `boot_file`.
fn boot_in_chain(config: &Config, boot_file: &Path) -> bool {
    let boot = std::fs::canonicalize(boot_file).unwrap_or_else(|_| boot_file.to_path_buf());
    config.canonical_chain.contains(&boot)
}

/// The web-search provider's client, when `config` has `[tools.web_search]`.
fn search_client(config: &Config, file: &Path) -> Result<Option<reqwest::Client>, ConfigError> {
    if config.web_search.is_none() {
        return Ok(None);
    }
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map(Some)
        .map_err(|err| client_error(file, "tools.web_search".into(), &err))
}

/// Builds the calling thread's upstream clients for `plan`'s endpoints, so a client that
/// cannot be built fails the profile rather than its first request.
fn check_clients(plan: &Plan, file: &Path) -> Result<(), ConfigError> {
    HttpTransport
        .warm(plan)
        .map_err(|err| client_error(file, "endpoint".into(), &err))
}

fn client_error(file: &Path, key: String, err: &reqwest::Error) -> ConfigError {
    ConfigError::new(
        ConfigErrorKind::Validation,
        file,
        Some(key),
        format!("cannot build an HTTP client: {err}"),
    )
}

/// A local runtime failure as a configuration error of the profile.
fn local_error(file: &Path, err: &LocalError) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Local, file, None, err.to_string())
}

/// What the live profile holds besides its plan; changed only by a commit.
#[derive(Debug)]
struct Live {
    /// The env files loaded so far (the boot file's and every switched-to profile's).
    env: EnvLayers,
    /// The live profile's local children.
    fleet: Fleet,
}

/// The profile switch (see the module documentation).
#[derive(Debug)]
struct Switcher {
    plans: Arc<Current>,
    boot: PathBuf,
    server: ServerConfig,
    /// The store shared dominions go through, with `[dominion_store]`.
    shared: Option<Arc<Shared>>,
    /// Serialises switches; what a commit changes besides the plan.
    live: tokio::sync::Mutex<Live>,
}

impl Switcher {
    async fn switch(&self, name: &str) -> Result<Arc<Plan>, ConfigError> {
        let mut live = self.live.lock().await;
        // Prepare: nothing live changes until the commit below.
        let boot_file = self.boot.clone();
        let server = self.server.clone();
        let profile = name.to_owned();
        let mut env = live.env.clone();
        // Every file read (the profiles directory, the env file, the include chain) stays
        // off the async workers.
        let (config, env, source) = tokio::task::spawn_blocking(move || {
            let source = config::profile_source(&boot_file, &profile)?;
            env.load_file(&source.env_file)?;
            let config = config::load_profile(&source, &boot_file, &server, &env)?;
            log_chain(&config, &boot_file);
            Ok::<_, ConfigError>((config, env, source.path))
        })
        .await
        .map_err(|err| {
            ConfigError::new(
                ConfigErrorKind::Io,
                &self.boot,
                None,
                format!("profile load task failed: {err}"),
            )
        })??;
        let search = search_client(&config, &source)?;
        let prepared = local::prepare(&config)
            .await
            .map_err(|err| local_error(&source, &err))?;
        // The new profile's children start beside the live ones; on failure the ones
        // started here are killed and the live ones never notice.
        let fleet = Fleet::start(prepared.as_ref(), &live.fleet)
            .await
            .map_err(|err| local_error(&source, &err))?;
        let previous = self.plans.load();
        let staged = Staged::new(&config, &fleet, Some(&previous), self.shared.as_deref());
        let plan = Arc::new(Plan::build(name, config, &fleet, &staged, search));
        check_clients(&plan, &source)?;
        // Commit: infallible from here on.
        staged.commit();
        self.plans.store(plan.clone());
        live.fleet.retire_unshared(&fleet);
        live.fleet = fleet;
        live.env = env;
        tracing::info!(profile = name, "switched profile");
        Ok(plan)
    }
}

impl Control for Switcher {
    fn switch_profile<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<Plan>, ConfigError>> {
        Box::pin(self.switch(name))
    }
}
