//! The configuration file as written: serde structs with `deny_unknown_fields`.
//!
//! These types are the first of the two loading phases. They check the shape of one file
//! (names, types, unknown keys); [`super::load`] merges files and builds the validated
//! [`super::Config`].

use serde::Deserialize;

use crate::secret::Secret;

/// One TOML file of the gateway configuration: the boot file, a profile or an include.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    /// Files merged before this one, relative to this file.
    #[serde(default)]
    pub(crate) include: Vec<String>,
    /// The profile's allowlist of model names.
    pub(crate) models: Option<Vec<String>>,
    /// Socket and bearer key.
    pub(crate) server: Option<RawServer>,
    /// Local runtime settings.
    pub(crate) local: Option<RawLocal>,
    /// Upstream backends.
    #[serde(default)]
    pub(crate) endpoint: Vec<RawEndpoint>,
    /// Remote models.
    #[serde(default)]
    pub(crate) model: Vec<RawModel>,
    /// Local GGUF models.
    #[serde(default)]
    pub(crate) local_model: Vec<RawLocalModel>,
    /// Compute pools.
    #[serde(default)]
    pub(crate) dominion: Vec<RawDominion>,
    /// Built-in tools.
    pub(crate) tools: Option<RawTools>,
    /// Dominions shared between replicas (boot file only).
    pub(crate) dominion_store: Option<RawDominionStore>,
}

/// `[dominion_store]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDominionStore {
    pub(crate) url: String,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<Secret>,
    pub(crate) key_prefix: Option<String>,
    pub(crate) timeout: Option<String>,
    pub(crate) connect_timeout: Option<String>,
    pub(crate) lease_ttl: Option<String>,
}

/// `[server]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub(crate) bind: Option<String>,
    pub(crate) api_key: Option<Secret>,
    pub(crate) header_read_timeout: Option<String>,
    pub(crate) keep_alive_timeout: Option<String>,
    pub(crate) max_connections: Option<i64>,
    pub(crate) max_header_bytes: Option<i64>,
    pub(crate) drain_timeout: Option<String>,
    pub(crate) write_timeout: Option<String>,
}

/// `[local]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLocal {
    pub(crate) cache_dir: Option<String>,
    pub(crate) llama_server: Option<String>,
    pub(crate) llama_server_url: Option<String>,
    pub(crate) llama_server_sha256: Option<String>,
    pub(crate) ready_timeout: Option<String>,
}

/// `[[endpoint]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEndpoint {
    pub(crate) id: String,
    pub(crate) protocol: Option<String>,
    pub(crate) base_url: String,
    pub(crate) api_key: Option<Secret>,
    pub(crate) dominion: Option<String>,
    pub(crate) connect_timeout: Option<String>,
    pub(crate) timeout: Option<String>,
    pub(crate) stream_first_byte_timeout: Option<String>,
    pub(crate) stream_idle_timeout: Option<String>,
    pub(crate) max_response_bytes: Option<i64>,
    pub(crate) max_stream_event_bytes: Option<i64>,
    pub(crate) failover_cooldown: Option<String>,
}

/// `[[model]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModel {
    pub(crate) name: String,
    pub(crate) kind: Option<String>,
    pub(crate) description: String,
    pub(crate) context: i64,
    pub(crate) upstream: String,
    pub(crate) endpoints: Vec<String>,
    pub(crate) thinking: Option<String>,
    pub(crate) max_output: Option<i64>,
    pub(crate) default_max_tokens: Option<i64>,
    pub(crate) default_temperature: Option<f64>,
    pub(crate) images: Option<bool>,
    pub(crate) parallel_tool_calls: Option<bool>,
    pub(crate) effort_levels: Option<Vec<String>>,
    pub(crate) default_effort: Option<String>,
    pub(crate) adaptive_thinking: Option<bool>,
    pub(crate) tool_dialect: Option<String>,
}

/// `[[local_model]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLocalModel {
    pub(crate) name: String,
    pub(crate) kind: Option<String>,
    pub(crate) description: String,
    pub(crate) source: String,
    pub(crate) sha256: Option<String>,
    pub(crate) context: i64,
    pub(crate) max_output: Option<i64>,
    pub(crate) default_temperature: Option<f64>,
    pub(crate) images: Option<bool>,
    pub(crate) parallel_tool_calls: Option<bool>,
    pub(crate) thinking: Option<String>,
    pub(crate) chat_template_file: Option<String>,
    pub(crate) effort_levels: Option<Vec<String>>,
    pub(crate) default_effort: Option<String>,
    pub(crate) adaptive_thinking: Option<bool>,
    pub(crate) gpu_layers: Option<i64>,
    pub(crate) flash_attention: Option<bool>,
    pub(crate) cache_type_k: Option<String>,
    pub(crate) cache_type_v: Option<String>,
    pub(crate) parallel: Option<i64>,
    pub(crate) threads: Option<i64>,
    pub(crate) vram_gb: Option<f64>,
    pub(crate) dominion: Option<String>,
}

/// `[[dominion]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDominion {
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) max_concurrency: Option<i64>,
    pub(crate) max_queue: Option<i64>,
    pub(crate) policy: Option<String>,
    pub(crate) fair_scheduling: Option<bool>,
    pub(crate) vram_gb: Option<f64>,
    pub(crate) on_store_failure: Option<String>,
}

/// `[tools]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTools {
    pub(crate) web_search: Option<RawWebSearch>,
}

/// `[tools.web_search]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWebSearch {
    pub(crate) provider: String,
    pub(crate) api_key: Secret,
    pub(crate) base_url: Option<String>,
    pub(crate) default_count: Option<i64>,
    pub(crate) max_count: Option<i64>,
    pub(crate) max_per_host: Option<i64>,
    pub(crate) default_freshness: Option<String>,
    pub(crate) default_safesearch: Option<String>,
    pub(crate) strip_tracking: Option<bool>,
}
