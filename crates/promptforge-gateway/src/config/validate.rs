//! Phase two: from the merged raw document to a validated [`Config`].

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use promptforge_wire::UnknownValue;

use super::load::{Merged, Sourced};
use super::raw::{
    RawDominion, RawDominionStore, RawEndpoint, RawLocalModel, RawModel, RawServer, RawWebSearch,
};
use super::{
    Config, ConfigError, ConfigErrorKind, DominionConfig, DominionKind, EndpointConfig,
    EndpointLimits, EndpointRefs, LocalLaunch, LocalSettings, ModelBackend, ModelConfig, ModelKind,
    QueuePolicy, ServerLimits, StoreConfig, StoreFailure, Thinking, ToolDialect, WebSearchConfig,
};

/// Default connect deadline for upstream requests.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default whole-request deadline for non-streaming upstream requests.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default waiting-queue bound of a dominion.
const DEFAULT_MAX_QUEUE: u32 = 100;
/// Default deadline for a streaming upstream's response head.
const DEFAULT_STREAM_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default longest silence between two chunks of an upstream stream.
const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// `[[endpoint]] failover_cooldown` default.
pub(crate) const DEFAULT_FAILOVER_COOLDOWN: Duration = Duration::from_secs(30);
/// Default cap of a non-streaming upstream body (the request cap).
const DEFAULT_MAX_RESPONSE_BYTES: usize = super::MAX_REQUEST_BODY_BYTES;
/// Default cap of one SSE line or event.
const DEFAULT_MAX_STREAM_EVENT_BYTES: usize = 1024 * 1024;
/// Largest byte limit accepted in configuration (1 GiB).
const MAX_BYTE_LIMIT: usize = 1024 * 1024 * 1024;
/// Largest `max_connections` accepted.
const MAX_CONNECTIONS_LIMIT: usize = 1_000_000;
/// Smallest `max_header_bytes` (hyper's smallest read buffer).
const MIN_HEADER_BYTES: usize = 8192;
/// Largest `max_header_bytes` accepted (16 MiB).
const MAX_HEADER_BYTES_LIMIT: usize = 16 * 1024 * 1024;
/// The Brave Search API.
const BRAVE_BASE_URL: &str = "https://api.search.brave.com/res/v1";

fn invalid(file: &Path, key: String, message: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Validation, file, Some(key), message)
}

/// Builds the validated configuration.
pub(crate) fn build(merged: Merged) -> Result<Config, ConfigError> {
    let Merged {
        chain,
        canonical_chain,
        models_allowlist,
        server: _,
        local,
        local_file,
        endpoints,
        mut models,
        mut local_models,
        dominions,
        web_search,
        dominion_store_files: _,
    } = merged;

    // The allowlist filters the catalog before any other check.
    let remote_names: HashSet<&str> = models.iter().map(|m| m.item.name.as_str()).collect();
    if let Some(allow) = &models_allowlist {
        let local_names: HashSet<&str> =
            local_models.iter().map(|m| m.item.name.as_str()).collect();
        for (i, name) in allow.item.iter().enumerate() {
            let known = remote_names.contains(name.as_str()) || local_names.contains(name.as_str());
            if !known {
                return Err(invalid(
                    &allow.file,
                    format!("models[{i}]"),
                    format!(
                        "`{}` is not defined by any [[model]] or [[local_model]]",
                        super::files::quote(name)
                    ),
                ));
            }
        }
        let allowed: HashSet<&str> = allow.item.iter().map(String::as_str).collect();
        models.retain(|m| allowed.contains(m.item.name.as_str()));
        local_models.retain(|m| allowed.contains(m.item.name.as_str()));
    }
    let remote_names: HashSet<String> = models.iter().map(|m| m.item.name.clone()).collect();

    let dominions = dominions
        .iter()
        .map(dominion)
        .collect::<Result<Vec<_>, _>>()?;
    let endpoints = endpoints
        .iter()
        .map(|e| endpoint(e, &dominions))
        .collect::<Result<Vec<_>, _>>()?;

    let endpoint_index: HashMap<String, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.clone(), i))
        .collect();
    let mut loaded = Vec::with_capacity(models.len() + local_models.len());
    for m in &models {
        loaded.push(remote_model(m, &endpoint_index)?);
    }
    for m in &local_models {
        if remote_names.contains(&m.item.name) {
            return Err(invalid(
                &m.file,
                format!("local_model[{}].name", m.item.name),
                "a [[model]] already has this name",
            ));
        }
        loaded.push(local_model(m, &dominions)?);
    }
    check_vram(&local_models, &dominions)?;

    let web_search = web_search.as_ref().map(web_search_config).transpose()?;
    Ok(Config {
        endpoints,
        models: loaded,
        dominions,
        web_search,
        local: local_settings(local, local_file.as_deref())?,
        model_allowlist: models_allowlist.map(|a| a.item),
        include_chain: chain,
        canonical_chain,
    })
}

/// `[local]`: the binary download pair comes together, and digests are hex.
fn local_settings(
    local: super::raw::RawLocal,
    file: Option<&Path>,
) -> Result<LocalSettings, ConfigError> {
    let file = file.unwrap_or(Path::new("[local]"));
    if let Some(sha) = &local.llama_server_sha256
        && (sha.len() != 64 || !sha.chars().all(|ch| ch.is_ascii_hexdigit()))
    {
        return Err(invalid(
            file,
            "local.llama_server_sha256".into(),
            "must be 64 hexadecimal digits",
        ));
    }
    if local.llama_server_url.is_some() != local.llama_server_sha256.is_some() {
        return Err(invalid(
            file,
            "local.llama_server_url".into(),
            "llama_server_url and llama_server_sha256 must be set together (a download is always verified)",
        ));
    }
    let ready_timeout = duration(
        file,
        "local.ready_timeout".into(),
        local.ready_timeout.as_deref(),
        Duration::from_secs(60),
    )?;
    Ok(LocalSettings {
        cache_dir: local.cache_dir,
        llama_server: local.llama_server,
        llama_server_url: local.llama_server_url,
        llama_server_sha256: local.llama_server_sha256.map(|s| s.to_ascii_lowercase()),
        ready_timeout,
    })
}

fn non_empty(file: &Path, key: String, value: &str) -> Result<(), ConfigError> {
    if value.trim().is_empty() {
        Err(invalid(file, key, "must not be empty"))
    } else {
        Ok(())
    }
}

fn positive(file: &Path, key: String, value: i64) -> Result<u64, ConfigError> {
    u64::try_from(value)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| invalid(file, key, format!("must be at least 1 (got {value})")))
}

fn small_positive(file: &Path, key: String, value: i64) -> Result<u32, ConfigError> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            invalid(
                file,
                key,
                format!("must be between 1 and {} (got {value})", u32::MAX),
            )
        })
}

fn duration(
    file: &Path,
    key: String,
    value: Option<&str>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(value) = value else {
        return Ok(default);
    };
    let parsed = humantime::parse_duration(value).map_err(|err| {
        invalid(
            file,
            key.clone(),
            format!("`{value}` is not a duration like 30s or 5m: {err}"),
        )
    })?;
    if parsed.is_zero() {
        return Err(invalid(file, key, "must be longer than zero"));
    }
    Ok(parsed)
}

fn dominion(d: &Sourced<RawDominion>) -> Result<DominionConfig, ConfigError> {
    let (file, raw) = (&d.file, &d.item);
    let key = |field: &str| format!("dominion[{}].{field}", raw.id);
    non_empty(file, "dominion.id".into(), &raw.id)?;
    let kind = match raw.kind.as_str() {
        "remote" => DominionKind::Remote,
        "local" => DominionKind::Local,
        other => {
            return Err(invalid(
                file,
                key("kind"),
                format!("`{other}` is not \"remote\" or \"local\""),
            ));
        }
    };
    let policy = match raw.policy.as_deref() {
        None | Some("queue") => QueuePolicy::Queue,
        Some("reject") => QueuePolicy::Reject,
        Some(other) => {
            return Err(invalid(
                file,
                key("policy"),
                format!("`{other}` is not \"queue\" or \"reject\""),
            ));
        }
    };
    let max_concurrency = raw
        .max_concurrency
        .map(|v| small_positive(file, key("max_concurrency"), v))
        .transpose()?;
    let max_queue = raw
        .max_queue
        .map(|v| small_positive(file, key("max_queue"), v))
        .transpose()?
        .unwrap_or(DEFAULT_MAX_QUEUE);
    if let Some(vram) = raw.vram_gb {
        if kind == DominionKind::Remote {
            return Err(invalid(
                file,
                key("vram_gb"),
                "only a local dominion has a VRAM budget",
            ));
        }
        if !(vram.is_finite() && vram > 0.0) {
            return Err(invalid(file, key("vram_gb"), "must be a positive number"));
        }
    }
    let on_store_failure = match raw.on_store_failure.as_deref() {
        None | Some("local_share") => StoreFailure::LocalShare,
        Some("fail_closed") => StoreFailure::FailClosed,
        Some(other) => {
            return Err(invalid(
                file,
                key("on_store_failure"),
                format!("`{other}` is not \"local_share\" or \"fail_closed\""),
            ));
        }
    };
    Ok(DominionConfig {
        id: raw.id.clone(),
        kind,
        max_concurrency,
        max_queue,
        policy,
        fair_scheduling: raw.fair_scheduling.unwrap_or(true),
        vram_gb: raw.vram_gb,
        on_store_failure,
    })
}

fn bound_dominion(
    file: &Path,
    key: String,
    id: Option<&String>,
    dominions: &[DominionConfig],
    want: DominionKind,
) -> Result<(), ConfigError> {
    let Some(id) = id else { return Ok(()) };
    match dominions.iter().find(|d| &d.id == id) {
        None => Err(invalid(file, key, format!("unknown dominion `{id}`"))),
        Some(d) if d.kind != want => {
            let (is, must) = match want {
                DominionKind::Remote => ("local", "an endpoint must bind a remote dominion"),
                DominionKind::Local => ("remote", "a local model must bind a local dominion"),
            };
            Err(invalid(
                file,
                key,
                format!("dominion `{id}` is {is}; {must}"),
            ))
        }
        Some(_) => Ok(()),
    }
}

/// Parses an http(s) base URL: no credentials, query or fragment; a trailing slash of its
/// path is removed.
fn base_url(file: &Path, key: String, value: &str) -> Result<reqwest::Url, ConfigError> {
    let url = reqwest::Url::parse(value)
        .map_err(|err| invalid(file, key.clone(), format!("`{value}` is not a URL: {err}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(file, key, "must be an http or https URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            file,
            key,
            "must not embed credentials; use api_key",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(file, key, "must not carry a query or fragment"));
    }
    let mut url = url;
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&path);
    Ok(url)
}

fn endpoint(
    e: &Sourced<RawEndpoint>,
    dominions: &[DominionConfig],
) -> Result<EndpointConfig, ConfigError> {
    let (file, raw) = (&e.file, &e.item);
    let key = |field: &str| format!("endpoint[{}].{field}", raw.id);
    non_empty(file, "endpoint.id".into(), &raw.id)?;
    if let Some(protocol) = raw.protocol.as_deref().filter(|p| *p != "openai") {
        return Err(invalid(
            file,
            key("protocol"),
            format!("`{protocol}` is not supported (only \"openai\")"),
        ));
    }
    let base_url = base_url(file, key("base_url"), &raw.base_url)?;
    if raw.api_key.as_ref().is_some_and(|k| k.is_blank()) {
        return Err(invalid(
            file,
            key("api_key"),
            "must not be empty (omit it for a keyless backend)",
        ));
    }
    if let Some(api_key) = &raw.api_key {
        header_safe(file, key("api_key"), api_key.expose())?;
    }
    bound_dominion(
        file,
        key("dominion"),
        raw.dominion.as_ref(),
        dominions,
        DominionKind::Remote,
    )?;
    Ok(EndpointConfig {
        id: raw.id.clone(),
        base_url,
        api_key: raw.api_key.clone(),
        dominion: raw.dominion.clone(),
        limits: endpoint_limits(file, &raw.id, raw)?,
    })
}

/// The bounds of `[[endpoint]]` `id`, defaults filled in.
fn endpoint_limits(
    file: &Path,
    id: &str,
    raw: &RawEndpoint,
) -> Result<EndpointLimits, ConfigError> {
    let key = |field: &str| format!("endpoint[{id}].{field}");
    Ok(EndpointLimits {
        connect_timeout: duration(
            file,
            key("connect_timeout"),
            raw.connect_timeout.as_deref(),
            DEFAULT_CONNECT_TIMEOUT,
        )?,
        timeout: duration(
            file,
            key("timeout"),
            raw.timeout.as_deref(),
            DEFAULT_TIMEOUT,
        )?,
        stream_first_byte_timeout: duration(
            file,
            key("stream_first_byte_timeout"),
            raw.stream_first_byte_timeout.as_deref(),
            DEFAULT_STREAM_FIRST_BYTE_TIMEOUT,
        )?,
        stream_idle_timeout: duration(
            file,
            key("stream_idle_timeout"),
            raw.stream_idle_timeout.as_deref(),
            DEFAULT_STREAM_IDLE_TIMEOUT,
        )?,
        max_response_bytes: byte_limit(
            file,
            key("max_response_bytes"),
            raw.max_response_bytes,
            DEFAULT_MAX_RESPONSE_BYTES,
        )?,
        max_stream_event_bytes: byte_limit(
            file,
            key("max_stream_event_bytes"),
            raw.max_stream_event_bytes,
            DEFAULT_MAX_STREAM_EVENT_BYTES,
        )?,
        failover_cooldown: duration(
            file,
            key("failover_cooldown"),
            raw.failover_cooldown.as_deref(),
            DEFAULT_FAILOVER_COOLDOWN,
        )?,
    })
}

/// A byte count: at least 1, at most [`MAX_BYTE_LIMIT`].
fn byte_limit(
    file: &Path,
    key: String,
    value: Option<i64>,
    default: usize,
) -> Result<usize, ConfigError> {
    let Some(value) = value else {
        return Ok(default);
    };
    usize::try_from(value)
        .ok()
        .filter(|v| (1..=MAX_BYTE_LIMIT).contains(v))
        .ok_or_else(|| {
            invalid(
                file,
                key,
                format!("must be between 1 and {MAX_BYTE_LIMIT} bytes (got {value})"),
            )
        })
}

/// A credential travels in an HTTP header, so it must be a valid header value: visible
/// ASCII and spaces, no control characters (a newline pasted with the key is the usual
/// culprit).
pub(crate) fn header_safe(file: &Path, key: String, value: &str) -> Result<(), ConfigError> {
    match value
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_graphic() || *c == ' '))
    {
        None => Ok(()),
        Some((at, c)) => {
            let what = match c {
                '\n' => "a newline".to_owned(),
                '\r' => "a carriage return".to_owned(),
                '\t' => "a tab".to_owned(),
                c if c.is_control() => format!("the control character U+{:04X}", u32::from(c)),
                _ => "a non-ASCII character".to_owned(),
            };
            Err(invalid(
                file,
                key,
                format!(
                    "contains {what} at character {} (an HTTP header value allows only visible ASCII and spaces; check the file or variable for a trailing newline)",
                    value[..at].chars().count() + 1
                ),
            ))
        }
    }
}

/// `[server]`'s connection limits.
pub(crate) fn server_limits(file: &Path, raw: &RawServer) -> Result<ServerLimits, ConfigError> {
    let defaults = ServerLimits::default();
    let key = |field: &str| format!("server.{field}");
    let max_connections = match raw.max_connections {
        None => defaults.max_connections,
        Some(v) => usize::try_from(v)
            .ok()
            .filter(|v| (1..=MAX_CONNECTIONS_LIMIT).contains(v))
            .ok_or_else(|| {
                invalid(
                    file,
                    key("max_connections"),
                    format!("must be between 1 and {MAX_CONNECTIONS_LIMIT} (got {v})"),
                )
            })?,
    };
    let max_header_bytes = match raw.max_header_bytes {
        None => defaults.max_header_bytes,
        Some(v) => usize::try_from(v)
            .ok()
            .filter(|v| (MIN_HEADER_BYTES..=MAX_HEADER_BYTES_LIMIT).contains(v))
            .ok_or_else(|| {
                invalid(
                    file,
                    key("max_header_bytes"),
                    format!(
                        "must be between {MIN_HEADER_BYTES} and {MAX_HEADER_BYTES_LIMIT} (got {v})"
                    ),
                )
            })?,
    };
    Ok(ServerLimits {
        header_read_timeout: duration(
            file,
            key("header_read_timeout"),
            raw.header_read_timeout.as_deref(),
            defaults.header_read_timeout,
        )?,
        keep_alive_timeout: duration(
            file,
            key("keep_alive_timeout"),
            raw.keep_alive_timeout.as_deref(),
            defaults.keep_alive_timeout,
        )?,
        max_connections,
        max_header_bytes,
        drain_timeout: duration(
            file,
            key("drain_timeout"),
            raw.drain_timeout.as_deref(),
            defaults.drain_timeout,
        )?,
        write_timeout: duration(
            file,
            key("write_timeout"),
            raw.write_timeout.as_deref(),
            defaults.write_timeout,
        )?,
    })
}

/// A closed wire enumeration read from a configuration string; `None` when absent.
fn wire_value<T: FromStr<Err = UnknownValue>>(
    file: &Path,
    key: String,
    value: Option<&str>,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|text| {
            text.parse()
                .map_err(|e: UnknownValue| invalid(file, key, e.reason()))
        })
        .transpose()
}

fn model_kind(file: &Path, key: String, value: Option<&str>) -> Result<ModelKind, ConfigError> {
    Ok(wire_value(file, key, value)?.unwrap_or(ModelKind::Chat))
}

fn thinking(file: &Path, key: String, value: Option<&str>) -> Result<Thinking, ConfigError> {
    Ok(wire_value(file, key, value)?.unwrap_or(Thinking::Never))
}

/// The catalog fields shared by `[[model]]` and `[[local_model]]`.
struct CatalogFields<'a> {
    name: &'a str,
    kind: Option<&'a str>,
    description: &'a str,
    context: i64,
    max_output: Option<i64>,
    default_temperature: Option<f64>,
    thinking: Option<&'a str>,
    effort_levels: Option<&'a [String]>,
    default_effort: Option<&'a str>,
    images: Option<bool>,
    parallel_tool_calls: Option<bool>,
    adaptive_thinking: Option<bool>,
}

/// Validated catalog fields.
struct Catalog {
    name: String,
    kind: ModelKind,
    description: String,
    context: u64,
    max_output: Option<u64>,
    default_temperature: Option<f64>,
    thinking: Thinking,
    effort_levels: Vec<String>,
    default_effort: Option<String>,
    images: bool,
    parallel_tool_calls: bool,
    adaptive_thinking: bool,
}

impl Catalog {
    /// The model entry: these catalog fields plus what only one table has.
    fn into_model(
        self,
        default_max_tokens: Option<u64>,
        tool_dialect: ToolDialect,
        backend: ModelBackend,
    ) -> ModelConfig {
        ModelConfig {
            name: self.name,
            kind: self.kind,
            description: self.description,
            context: self.context,
            thinking: self.thinking,
            max_output: self.max_output,
            default_max_tokens,
            default_temperature: self.default_temperature,
            images: self.images,
            parallel_tool_calls: self.parallel_tool_calls,
            effort_levels: self.effort_levels,
            default_effort: self.default_effort,
            adaptive_thinking: self.adaptive_thinking,
            tool_dialect,
            backend,
        }
    }
}

/// Checks the rules shared by both model tables; `chat_only` lists the chat-only fields
/// present on the entry.
fn catalog(
    file: &Path,
    table: &str,
    f: &CatalogFields<'_>,
    chat_only: &[&str],
) -> Result<Catalog, ConfigError> {
    let key = |field: &str| format!("{table}[{}].{field}", f.name);
    non_empty(file, format!("{table}.name"), f.name)?;
    non_empty(file, key("description"), f.description)?;
    let kind = model_kind(file, key("kind"), f.kind)?;
    if kind != ModelKind::Chat
        && let Some(field) = chat_only.first()
    {
        return Err(invalid(
            file,
            key(field),
            format!(
                "`{field}` is chat-only and not allowed for kind = \"{}\"",
                kind.as_str()
            ),
        ));
    }
    let context = positive(file, key("context"), f.context)?;
    let max_output = f
        .max_output
        .map(|v| positive(file, key("max_output"), v))
        .transpose()?;
    if let Some(max) = max_output.filter(|m| *m > context) {
        return Err(invalid(
            file,
            key("max_output"),
            format!("{max} exceeds context ({context})"),
        ));
    }
    if let Some(t) = f
        .default_temperature
        .filter(|t| !(t.is_finite() && (0.0..=2.0).contains(t)))
    {
        return Err(invalid(
            file,
            key("default_temperature"),
            format!("{t} is not between 0 and 2"),
        ));
    }
    let thinking = thinking(file, key("thinking"), f.thinking)?;
    if thinking == Thinking::Never {
        if f.effort_levels.is_some() {
            return Err(invalid(
                file,
                key("effort_levels"),
                "effort knobs are not allowed with thinking = \"never\"",
            ));
        }
        if f.default_effort.is_some() {
            return Err(invalid(
                file,
                key("default_effort"),
                "effort knobs are not allowed with thinking = \"never\"",
            ));
        }
    }
    let effort_levels = f.effort_levels.map(<[String]>::to_vec).unwrap_or_default();
    for (i, level) in effort_levels.iter().enumerate() {
        non_empty(file, key(&format!("effort_levels[{i}]")), level)?;
        if effort_levels[..i].contains(level) {
            return Err(invalid(
                file,
                key("effort_levels"),
                format!("`{level}` is listed twice"),
            ));
        }
    }
    if let Some(effort) = f.default_effort
        && !effort_levels.iter().any(|l| l == effort)
    {
        return Err(invalid(
            file,
            key("default_effort"),
            format!("`{effort}` is not one of effort_levels"),
        ));
    }
    Ok(Catalog {
        name: f.name.to_owned(),
        kind,
        description: f.description.to_owned(),
        context,
        max_output,
        default_temperature: f.default_temperature,
        thinking,
        effort_levels,
        default_effort: f.default_effort.map(str::to_owned),
        images: f.images.unwrap_or(false),
        parallel_tool_calls: f.parallel_tool_calls.unwrap_or(false),
        adaptive_thinking: f.adaptive_thinking.unwrap_or(false),
    })
}

fn remote_model(
    m: &Sourced<RawModel>,
    endpoints: &HashMap<String, usize>,
) -> Result<ModelConfig, ConfigError> {
    let (file, raw) = (&m.file, &m.item);
    let key = |field: &str| format!("model[{}].{field}", raw.name);
    let chat_only: Vec<&str> = [
        ("thinking", raw.thinking.is_some()),
        ("default_max_tokens", raw.default_max_tokens.is_some()),
        ("tool_dialect", raw.tool_dialect.is_some()),
        ("effort_levels", raw.effort_levels.is_some()),
        ("default_effort", raw.default_effort.is_some()),
        ("adaptive_thinking", raw.adaptive_thinking.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
    .collect();
    let fields = CatalogFields {
        name: &raw.name,
        kind: raw.kind.as_deref(),
        description: &raw.description,
        context: raw.context,
        max_output: raw.max_output,
        default_temperature: raw.default_temperature,
        thinking: raw.thinking.as_deref(),
        effort_levels: raw.effort_levels.as_deref(),
        default_effort: raw.default_effort.as_deref(),
        images: raw.images,
        parallel_tool_calls: raw.parallel_tool_calls,
        adaptive_thinking: raw.adaptive_thinking,
    };
    let c = catalog(file, "model", &fields, &chat_only)?;
    non_empty(file, key("upstream"), &raw.upstream)?;
    let mut positions = Vec::with_capacity(raw.endpoints.len());
    for (i, id) in raw.endpoints.iter().enumerate() {
        let Some(&position) = endpoints.get(id) else {
            return Err(invalid(
                file,
                key(&format!("endpoints[{i}]")),
                format!("unknown endpoint `{id}`"),
            ));
        };
        positions.push(position);
    }
    let Some((&first, rest)) = positions.split_first() else {
        return Err(invalid(
            file,
            key("endpoints"),
            "must name at least one endpoint",
        ));
    };
    let default_max_tokens = raw
        .default_max_tokens
        .map(|v| positive(file, key("default_max_tokens"), v))
        .transpose()?;
    if let (Some(d), Some(limit)) = (default_max_tokens, c.max_output.or(Some(c.context)))
        && d > limit
    {
        return Err(invalid(
            file,
            key("default_max_tokens"),
            format!("{d} exceeds max_output/context ({limit})"),
        ));
    }
    let tool_dialect = match raw.tool_dialect.as_deref() {
        None | Some("openai") => ToolDialect::OpenAi,
        Some("gemma3_tool_code") => ToolDialect::Gemma3ToolCode,
        Some(other) => {
            return Err(invalid(
                file,
                key("tool_dialect"),
                format!("`{other}` is not \"openai\" or \"gemma3_tool_code\""),
            ));
        }
    };
    let backend = ModelBackend::Remote {
        upstream: raw.upstream.clone(),
        endpoints: EndpointRefs {
            first,
            rest: rest.to_vec(),
        },
    };
    Ok(c.into_model(default_max_tokens, tool_dialect, backend))
}

fn local_model(
    m: &Sourced<RawLocalModel>,
    dominions: &[DominionConfig],
) -> Result<ModelConfig, ConfigError> {
    let (file, raw) = (&m.file, &m.item);
    let key = |field: &str| format!("local_model[{}].{field}", raw.name);
    let chat_only: Vec<&str> = [
        ("thinking", raw.thinking.is_some()),
        ("chat_template_file", raw.chat_template_file.is_some()),
        ("effort_levels", raw.effort_levels.is_some()),
        ("default_effort", raw.default_effort.is_some()),
        ("adaptive_thinking", raw.adaptive_thinking.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
    .collect();
    let fields = CatalogFields {
        name: &raw.name,
        kind: raw.kind.as_deref(),
        description: &raw.description,
        context: raw.context,
        max_output: raw.max_output,
        default_temperature: raw.default_temperature,
        thinking: raw.thinking.as_deref(),
        effort_levels: raw.effort_levels.as_deref(),
        default_effort: raw.default_effort.as_deref(),
        images: raw.images,
        parallel_tool_calls: raw.parallel_tool_calls,
        adaptive_thinking: raw.adaptive_thinking,
    };
    let c = catalog(file, "local_model", &fields, &chat_only)?;
    non_empty(file, key("source"), &raw.source)?;
    if let Some(sha) = &raw.sha256
        && (sha.len() != 64 || !sha.chars().all(|ch| ch.is_ascii_hexdigit()))
    {
        return Err(invalid(
            file,
            key("sha256"),
            "must be 64 hexadecimal digits",
        ));
    }
    let gpu_layers = raw
        .gpu_layers
        .map(|v| {
            u32::try_from(v)
                .map_err(|_| invalid(file, key("gpu_layers"), format!("{v} is not a layer count")))
        })
        .transpose()?;
    for (field, value) in [
        ("cache_type_k", &raw.cache_type_k),
        ("cache_type_v", &raw.cache_type_v),
    ] {
        if let Some(v) = value {
            const TYPES: [&str; 9] = [
                "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1",
            ];
            if !TYPES.contains(&v.as_str()) {
                return Err(invalid(
                    file,
                    key(field),
                    format!("`{v}` is not one of {}", TYPES.join(", ")),
                ));
            }
        }
    }
    let parallel = raw
        .parallel
        .map(|v| small_positive(file, key("parallel"), v))
        .transpose()?
        .unwrap_or(1);
    if let Some(vram) = raw.vram_gb.filter(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(invalid(
            file,
            key("vram_gb"),
            format!("{vram} is not a positive number"),
        ));
    }
    bound_dominion(
        file,
        key("dominion"),
        raw.dominion.as_ref(),
        dominions,
        DominionKind::Local,
    )?;
    // Relative paths resolve against the directory of the file that declares them, as
    // includes do.
    let beside = |path: &str| -> String {
        if path.contains("://") || Path::new(path).is_absolute() {
            return path.to_owned();
        }
        match file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.join(path).display().to_string(),
            _ => path.to_owned(),
        }
    };
    let backend = ModelBackend::Local(LocalLaunch {
        source: beside(&raw.source),
        sha256: raw.sha256.as_ref().map(|s| s.to_ascii_lowercase()),
        chat_template_file: raw.chat_template_file.as_deref().map(beside),
        gpu_layers,
        flash_attention: raw.flash_attention,
        cache_type_k: raw.cache_type_k.clone(),
        cache_type_v: raw.cache_type_v.clone(),
        parallel,
        threads: raw
            .threads
            .map(|v| small_positive(file, key("threads"), v))
            .transpose()?,
        vram_gb: raw.vram_gb,
        dominion: raw.dominion.clone(),
    });
    Ok(c.into_model(None, ToolDialect::OpenAi, backend))
}

/// The co-residency budget of every local dominion with `vram_gb`, over the loaded set.
fn check_vram(
    local_models: &[Sourced<RawLocalModel>],
    dominions: &[DominionConfig],
) -> Result<(), ConfigError> {
    for d in dominions {
        let Some(budget) = d.vram_gb else { continue };
        let mut total = 0.0;
        let mut last_file = None;
        for m in local_models
            .iter()
            .filter(|m| m.item.dominion.as_deref() == Some(d.id.as_str()))
        {
            let Some(need) = m.item.vram_gb else {
                return Err(invalid(
                    &m.file,
                    format!("local_model[{}].vram_gb", m.item.name),
                    format!(
                        "dominion `{}` has a vram_gb budget, so every bound model must declare vram_gb",
                        d.id
                    ),
                ));
            };
            total += need;
            last_file = Some(m);
        }
        if let Some(m) = last_file.filter(|_| total > budget) {
            return Err(invalid(
                &m.file,
                format!("dominion[{}].vram_gb", d.id),
                format!("bound local models need {total} GB, over the budget of {budget} GB"),
            ));
        }
    }
    Ok(())
}

fn web_search_config(w: &Sourced<RawWebSearch>) -> Result<WebSearchConfig, ConfigError> {
    let (file, raw) = (&w.file, &w.item);
    let key = |field: &str| format!("tools.web_search.{field}");
    if raw.provider != "brave" {
        return Err(invalid(
            file,
            key("provider"),
            format!("`{}` is not supported (only \"brave\")", raw.provider),
        ));
    }
    if raw.api_key.is_blank() {
        return Err(invalid(file, key("api_key"), "must not be empty"));
    }
    header_safe(file, key("api_key"), raw.api_key.expose())?;
    let base_url = base_url(
        file,
        key("base_url"),
        raw.base_url.as_deref().unwrap_or(BRAVE_BASE_URL),
    )?
    .as_str()
    .trim_end_matches('/')
    .to_owned();
    let count = |field: &str, value: Option<i64>, default: u32| -> Result<u32, ConfigError> {
        match value {
            None => Ok(default),
            Some(v) if (1..=20).contains(&v) => Ok(u32::try_from(v).unwrap_or(default)),
            Some(v) => Err(invalid(
                file,
                key(field),
                format!("{v} is not between 1 and 20"),
            )),
        }
    };
    let max_count = count("max_count", raw.max_count, 20)?;
    let default_count = count("default_count", raw.default_count, 10.min(max_count))?;
    if default_count > max_count {
        return Err(invalid(
            file,
            key("default_count"),
            format!("{default_count} exceeds max_count ({max_count})"),
        ));
    }
    let max_per_host = match raw.max_per_host {
        None => 2,
        Some(v) => small_positive(file, key("max_per_host"), v)?,
    };
    let default_freshness = wire_value(
        file,
        key("default_freshness"),
        raw.default_freshness.as_deref().filter(|f| !f.is_empty()),
    )?;
    let default_safesearch = wire_value(
        file,
        key("default_safesearch"),
        raw.default_safesearch.as_deref().filter(|f| !f.is_empty()),
    )?;
    Ok(WebSearchConfig {
        api_key: raw.api_key.clone(),
        base_url,
        default_count,
        max_count,
        max_per_host,
        default_freshness,
        default_safesearch,
        strip_tracking: raw.strip_tracking.unwrap_or(true),
    })
}

/// The shortest and longest accepted `[dominion_store] lease_ttl`.
const LEASE_TTL_RANGE: (Duration, Duration) =
    (Duration::from_millis(500), Duration::from_secs(600));

/// `[dominion_store]` of the boot file `file`.
pub(super) fn dominion_store(
    file: &Path,
    raw: &RawDominionStore,
) -> Result<StoreConfig, ConfigError> {
    let key = |field: &str| format!("dominion_store.{field}");
    let url = raw.url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(invalid(
            file,
            key("url"),
            format!("`{url}` is not a redis://host:port or rediss://host:port address"),
        ));
    };
    if !matches!(scheme, "redis" | "rediss") || rest.is_empty() {
        return Err(invalid(
            file,
            key("url"),
            format!("`{scheme}://` is not supported: use redis://host:port or rediss://host:port"),
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(invalid(
            file,
            key("url"),
            "must not carry credentials: set dominion_store.password (from the env file) and dominion_store.username instead",
        ));
    }
    if authority.is_empty() {
        return Err(invalid(file, key("url"), "has no host"));
    }
    let key_prefix = raw
        .key_prefix
        .clone()
        .unwrap_or_else(|| "promptforge".into());
    if key_prefix.is_empty()
        || key_prefix.len() > 64
        || !key_prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))
    {
        return Err(invalid(
            file,
            key("key_prefix"),
            "must be 1-64 characters of A-Z a-z 0-9 . _ - :",
        ));
    }
    if let Some(password) = &raw.password
        && password.is_blank()
    {
        return Err(invalid(file, key("password"), "must not be empty"));
    }
    let lease_ttl = duration(
        file,
        key("lease_ttl"),
        raw.lease_ttl.as_deref(),
        Duration::from_secs(5),
    )?;
    if !(LEASE_TTL_RANGE.0..=LEASE_TTL_RANGE.1).contains(&lease_ttl) {
        return Err(invalid(
            file,
            key("lease_ttl"),
            "must be between 500ms and 10m",
        ));
    }
    let timeout = duration(
        file,
        key("timeout"),
        raw.timeout.as_deref(),
        Duration::from_millis(500),
    )?;
    if timeout >= lease_ttl {
        return Err(invalid(
            file,
            key("timeout"),
            "must be shorter than lease_ttl (a renewal must fit in a lease)",
        ));
    }
    Ok(StoreConfig {
        url: url.to_owned(),
        username: raw.username.clone().filter(|u| !u.is_empty()),
        password: raw.password.clone(),
        key_prefix,
        timeout,
        connect_timeout: duration(
            file,
            key("connect_timeout"),
            raw.connect_timeout.as_deref(),
            Duration::from_secs(2),
        )?,
        lease_ttl,
    })
}

#[cfg(test)]
mod tests {
    //! Table tests of the rules phase: a TOML document (parsed to the raw shapes, as one
    //! file of the chain) → the key and message of the error `build` gives.

    use std::path::PathBuf;

    use super::*;
    use crate::config::raw::RawFile;

    const FILE: &str = "/cfg/gateway.toml";

    fn sourced<T>(items: Vec<T>) -> Vec<Sourced<T>> {
        items
            .into_iter()
            .map(|item| Sourced {
                file: PathBuf::from(FILE),
                item,
            })
            .collect()
    }

    fn build_toml(text: &str) -> Result<Config, ConfigError> {
        let raw: RawFile = toml::from_str(text).expect("the table's TOML parses");
        let local_file = raw.local.is_some().then(|| PathBuf::from(FILE));
        build(Merged {
            chain: vec![PathBuf::from(FILE)],
            canonical_chain: vec![PathBuf::from(FILE)],
            local: raw.local.unwrap_or_default(),
            local_file,
            endpoints: sourced(raw.endpoint),
            models: sourced(raw.model),
            local_models: sourced(raw.local_model),
            dominions: sourced(raw.dominion),
            web_search: raw.tools.and_then(|t| t.web_search).map(|item| Sourced {
                file: PathBuf::from(FILE),
                item,
            }),
            ..Merged::default()
        })
    }

    const ENDPOINT: &str = "[[endpoint]]\nid = \"up\"\nbase_url = \"http://127.0.0.1:9/v1\"\n";

    fn model(extra: &str) -> String {
        format!(
            "{ENDPOINT}[[model]]\nname = \"m\"\ndescription = \"d\"\ncontext = 100\nupstream = \"u\"\nendpoints = [\"up\"]\n{extra}\n"
        )
    }

    fn search(extra: &str) -> String {
        format!("[tools.web_search]\nprovider = \"brave\"\napi_key = \"k\"\n{extra}\n")
    }

    #[test]
    fn valid_documents_build() {
        let config = build_toml(&model("thinking = \"switchable\"")).unwrap();
        assert_eq!(config.models[0].thinking, Thinking::Switchable);
        assert_eq!(config.models[0].kind, ModelKind::Chat);
        let config = build_toml(&search("default_freshness = \"pw\"")).unwrap();
        let web_search = config.web_search.unwrap();
        assert_eq!(
            web_search.default_freshness,
            Some(promptforge_wire::Freshness::PastWeek)
        );
        assert_eq!(web_search.default_count, 10);
    }

    #[test]
    fn each_broken_rule_names_its_key() {
        let table: Vec<(String, &str, &str)> = vec![
            (
                model("kind = \"vector\""),
                "model[m].kind",
                "`vector` is not chat, embedding or classifier",
            ),
            (
                model("thinking = \"maybe\""),
                "model[m].thinking",
                "`maybe` is not never, always or switchable",
            ),
            (
                search("default_freshness = \"pz\""),
                "tools.web_search.default_freshness",
                "`pz` is not pd, pw, pm or py",
            ),
            (
                search("default_safesearch = \"high\""),
                "tools.web_search.default_safesearch",
                "`high` is not off, moderate or strict",
            ),
            (
                model("").replace("context = 100", "context = 0"),
                "model[m].context",
                "must be at least 1 (got 0)",
            ),
            (
                ENDPOINT.replace("http://127.0.0.1:9/v1", "http://u:p@127.0.0.1:9/v1"),
                "endpoint[up].base_url",
                "must not embed credentials; use api_key",
            ),
            (
                model("").replace("endpoints = [\"up\"]", "endpoints = [\"nowhere\"]"),
                "model[m].endpoints[0]",
                "unknown endpoint `nowhere`",
            ),
            (
                ENDPOINT.replace("http://127.0.0.1:9/v1", "ftp://x"),
                "endpoint[up].base_url",
                "must be an http or https URL",
            ),
        ];
        for (text, key, message) in table {
            let error = build_toml(&text).map(|_| ()).unwrap_err();
            assert_eq!(error.key(), Some(key), "{text}\n{error}");
            assert_eq!(error.kind(), ConfigErrorKind::Validation, "{error}");
            assert!(error.to_string().contains(message), "{text}\n{error}");
            assert!(error.to_string().starts_with(FILE), "{error}");
        }
    }
}
