//! Configuration: boot file, profiles, includes, env files, and the validated [`Config`].
//!
//! Loading has two phases. The `raw` module parses each file into serde structs with
//! `deny_unknown_fields` (after `${VAR}` interpolation of its strings); the `load` module resolves
//! the include chain, merges, applies the profile's `models` allowlist and builds a
//! [`Config`], which exists only when every rule holds. Every error names the file and
//! the key.

mod env;
mod files;
#[cfg(test)]
mod fuzz;
mod interpolate;
mod load;
mod raw;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use env::EnvLayers;
pub(crate) use files::MAX_INCLUDE_FILES;
pub(crate) use load::{load_boot_server, load_profile, profile_source};

pub(crate) use promptforge_wire::{Freshness, ModelKind, SafeSearch, Thinking};
pub(crate) use validate::DEFAULT_FAILOVER_COOLDOWN;

use crate::secret::Secret;

/// Largest request body the gateway accepts (images travel inline as base64), 32 MiB;
/// also the default cap of a buffered upstream body.
pub(crate) const MAX_REQUEST_BODY_BYTES: usize = 32 * 1024 * 1024;

/// What went wrong while loading configuration, for programmatic handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A file could not be read.
    Io,
    /// A file is not valid TOML, or has an unknown or mistyped key.
    Parse,
    /// A `${VAR}` reference is unresolved or malformed.
    Interpolation,
    /// An include is missing, cyclic or nested too deep.
    Include,
    /// A rule across fields or entries is broken.
    Validation,
    /// The profile name, directory or file is wrong.
    Profile,
    /// The profile's merged `[server]` differs from the boot file's.
    ServerMismatch,
    /// The profile name is not a single path component.
    ProfileName,
    /// A local model could not be provisioned or started.
    Local,
}

/// A configuration error naming the file and, where there is one, the key.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    file: PathBuf,
    key: Option<String>,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(
        kind: ConfigErrorKind,
        file: &Path,
        key: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            file: file.to_path_buf(),
            key,
            message: message.into(),
        }
    }

    /// The stable classification of this error.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The file the error is in.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The same error about `key` instead (e.g. `--profile` when the name came from the
    /// command line).
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{}: {key}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// A validated, merged configuration: the loaded set of one profile.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Upstream backends, in merge order.
    pub endpoints: Vec<EndpointConfig>,
    /// The loaded models (remote and local), in merge order.
    pub models: Vec<ModelConfig>,
    /// Compute pools.
    pub dominions: Vec<DominionConfig>,
    /// `[tools.web_search]`, when present.
    pub web_search: Option<WebSearchConfig>,
    /// `[local]`.
    pub local: LocalSettings,
    /// The profile's `models` allowlist; `None` loads the full catalog.
    pub model_allowlist: Option<Vec<String>>,
    /// Every file merged, in merge order, named as the user gave it.
    pub include_chain: Vec<PathBuf>,
    /// The same files, canonical (what the boot file is compared with).
    pub canonical_chain: Vec<PathBuf>,
}

/// `[server]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerConfig {
    /// The socket address to listen on.
    pub bind: String,
    /// The bearer key every route but `/health` demands.
    pub api_key: Secret,
    /// Connection-level bounds.
    pub limits: ServerLimits,
    /// `[dominion_store]`: dominions shared between replicas, when set.
    pub dominion_store: Option<StoreConfig>,
}

/// Connection-level bounds of the listening socket (`[server]`, owned by the boot file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerLimits {
    /// Deadline for a whole request head, from the connection's accept or from the first
    /// byte of a later request on a kept-alive connection (default 10 s).
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may sit idle between requests (default 60 s).
    pub keep_alive_timeout: Duration,
    /// Open client connections at once; one more is answered 503 and closed (default 1024).
    pub max_connections: usize,
    /// Largest request head (request line plus headers) in bytes (default 64 KiB).
    pub max_header_bytes: usize,
    /// How long shutdown waits for in-flight requests and streams before they are ended
    /// with a `shutting_down` error (default 10 s).
    pub drain_timeout: Duration,
    /// Longest a response write may stall because the client does not read; past it the
    /// connection is closed (default 60 s).
    pub write_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_header_bytes: 64 * 1024,
            drain_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(60),
        }
    }
}

/// `[local]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocalSettings {
    /// Cache directory for models and the llama.cpp binary (`~/.promptforge` when unset).
    pub cache_dir: Option<String>,
    /// An explicit `llama-server` binary, used instead of provisioning one.
    pub llama_server: Option<String>,
    /// Where the pinned `llama-server` build is downloaded from when neither
    /// `llama_server` nor the cache has one (a mirror; tests use a loopback server).
    pub llama_server_url: Option<String>,
    /// The SHA-256 (lowercase hex) the downloaded `llama-server` must have.
    pub llama_server_sha256: Option<String>,
    /// How long a child may take to answer `/health` 200 (default 60 s).
    pub ready_timeout: Duration,
}

/// `[[endpoint]]`: one upstream backend.
#[derive(Debug, Clone)]
pub(crate) struct EndpointConfig {
    /// The operator's handle, referenced by models.
    pub id: String,
    /// The base URL (its path without a trailing slash), e.g.
    /// `https://api.example.com/v1`.
    pub base_url: reqwest::Url,
    /// The upstream credential, sent as `Authorization: Bearer`.
    pub api_key: Option<Secret>,
    /// The remote dominion the endpoint is bound to.
    pub dominion: Option<String>,
    /// The bounds of its requests.
    pub limits: EndpointLimits,
}

/// The bounds of an endpoint's requests (`[[endpoint]]`, or the fixed ones of a local
/// child).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndpointLimits {
    /// TCP/TLS connect deadline (default 10 s).
    pub connect_timeout: Duration,
    /// Whole-request deadline for non-streaming requests (default 600 s).
    pub timeout: Duration,
    /// Streaming: deadline for the upstream's response head (default 120 s).
    pub stream_first_byte_timeout: Duration,
    /// Streaming: longest silence between two body chunks (default 120 s).
    pub stream_idle_timeout: Duration,
    /// Largest non-streaming response body read from the upstream (default 32 MiB).
    pub max_response_bytes: usize,
    /// Longest SSE line, and largest joined `data` of one event (default 1 MiB).
    pub max_stream_event_bytes: usize,
    /// How long the endpoint is skipped by failover after it failed (default 30 s).
    pub failover_cooldown: Duration,
}

/// How tool calls reach the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolDialect {
    /// Native OpenAI `tools` (default).
    OpenAi,
    /// Emulated through `tool_code` fences in content.
    Gemma3ToolCode,
}

/// One loaded model: catalog metadata plus where it runs.
#[derive(Debug, Clone)]
pub(crate) struct ModelConfig {
    /// The caller-facing name.
    pub name: String,
    /// What the model serves.
    pub kind: ModelKind,
    /// Catalog prose.
    pub description: String,
    /// Context window in tokens.
    pub context: u64,
    /// Thinking mode (`never` for non-chat kinds).
    pub thinking: Thinking,
    /// Maximum output tokens, when configured.
    pub max_output: Option<u64>,
    /// `max_tokens` inserted when a chat request sets neither `max_tokens` nor
    /// `max_completion_tokens`.
    pub default_max_tokens: Option<u64>,
    /// Advertised default temperature, when configured.
    pub default_temperature: Option<f64>,
    /// Accepts images.
    pub images: bool,
    /// Can emit several tool calls in one turn.
    pub parallel_tool_calls: bool,
    /// Reasoning effort levels the model accepts.
    pub effort_levels: Vec<String>,
    /// The effort used when a request names none, when configured.
    pub default_effort: Option<String>,
    /// Whether the model decides by itself how much to think.
    pub adaptive_thinking: bool,
    /// Tool-calling dialect.
    pub tool_dialect: ToolDialect,
    /// Where requests go.
    pub backend: ModelBackend,
}

/// Where a model's requests go.
#[derive(Debug, Clone)]
pub(crate) enum ModelBackend {
    /// A `[[model]]` on a remote endpoint.
    Remote {
        /// The backend's own model string.
        upstream: String,
        /// The endpoints that serve it, in failover order.
        endpoints: EndpointRefs,
    },
    /// A `[[local_model]]` served by a llama-server child.
    Local(LocalLaunch),
}

/// A model's endpoints, as positions in [`Config::endpoints`], in failover order; never
/// empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndpointRefs {
    /// The first endpoint.
    pub first: usize,
    /// The others, in order.
    pub rest: Vec<usize>,
}

/// The launch settings of a `[[local_model]]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocalLaunch {
    /// A URL or a local path to the GGUF file.
    pub source: String,
    /// Expected SHA-256 of the GGUF, lowercase hex.
    pub sha256: Option<String>,
    /// A chat template file overriding the GGUF's.
    pub chat_template_file: Option<String>,
    /// `--gpu-layers`.
    pub gpu_layers: Option<u32>,
    /// `--flash-attn`.
    pub flash_attention: Option<bool>,
    /// `--cache-type-k`.
    pub cache_type_k: Option<String>,
    /// `--cache-type-v`.
    pub cache_type_v: Option<String>,
    /// `--parallel` and the per-model queue limit without a dominion (default 1).
    pub parallel: u32,
    /// `-t`: CPU threads for generation (default: llama-server's own, all physical cores).
    pub threads: Option<u32>,
    /// VRAM footprint estimate in GB.
    pub vram_gb: Option<f64>,
    /// The local dominion the model is bound to.
    pub dominion: Option<String>,
}

/// Remote provider pool or local GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DominionKind {
    /// Remote endpoints bind here.
    Remote,
    /// Local models bind here.
    Local,
}

/// What a full dominion does with a new request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueuePolicy {
    /// Wait in the bounded queue; 503 `queue_full` past `max_queue`.
    Queue,
    /// 429 `queue_rejected` when no slot is free.
    Reject,
}

/// `[[dominion]]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DominionConfig {
    /// Unique id.
    pub id: String,
    /// Remote or local.
    pub kind: DominionKind,
    /// Concurrency slots; `None` is unlimited.
    pub max_concurrency: Option<u32>,
    /// Waiting requests beyond the slots (default 100).
    pub max_queue: u32,
    /// Full-pool behaviour (default `queue`).
    pub policy: QueuePolicy,
    /// Round-robin by `X-PromptForge-Client` (default true).
    pub fair_scheduling: bool,
    /// Co-residency budget (local only).
    pub vram_gb: Option<f64>,
    /// What admission does while `[dominion_store]` cannot be reached (default
    /// `local_share`; only a remote dominion is shared).
    pub on_store_failure: StoreFailure,
}

/// `[[dominion]] on_store_failure`: admission while the dominion store is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StoreFailure {
    /// Each replica admits `max_concurrency / replicas` (at least 1) on its own, the
    /// replica count being the last one the heartbeats showed.
    #[default]
    LocalShare,
    /// New requests get 503 `dominion_store_unavailable`; waiters leave with it.
    FailClosed,
}

/// `[dominion_store]` (boot file only): share every remote dominion through Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreConfig {
    /// `redis://host:port[/db]` or `rediss://...`, without credentials.
    pub url: String,
    /// The ACL user, when the server has one for the gateway.
    pub username: Option<String>,
    /// The password (from the env file; never printed).
    pub password: Option<Secret>,
    /// Prefix of every key and channel (default `promptforge`).
    pub key_prefix: String,
    /// Longest one store command may take before the store counts as unreachable
    /// (default 500 ms).
    pub timeout: Duration,
    /// Longest a connection attempt may take (default 2 s).
    pub connect_timeout: Duration,
    /// A slot's lease: renewed every third of it while its request lives; a dead
    /// replica's slots free themselves after it (default 5 s).
    pub lease_ttl: Duration,
}

/// `[tools.web_search]`.
#[derive(Debug, Clone)]
pub(crate) struct WebSearchConfig {
    /// The Brave subscription token.
    pub api_key: Secret,
    /// The Brave API base URL without a trailing slash.
    pub base_url: String,
    /// `count` when the request has none (default 10).
    pub default_count: u32,
    /// Upper bound of `count` (default 20).
    pub max_count: u32,
    /// Results kept per host (default 2).
    pub max_per_host: u32,
    /// Freshness when the request has none.
    pub default_freshness: Option<Freshness>,
    /// Safe-search level when the request has none.
    pub default_safesearch: Option<SafeSearch>,
    /// Drop tracking query parameters from result URLs (default true).
    pub strip_tracking: bool,
}
