//! `prompts.toml` and its name-matched `.env`: loading, `${VAR}` interpolation, validation.
//!
//! One flat file, no includes. Every string value supports `${VAR}` (process environment
//! first, then the `.env` beside the TOML) and `$$` for a literal dollar. An unset
//! variable fails the load, except in `[server].api_key`, where it drops the key.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::catalog::valid_name;

/// The largest `prompts.toml` (and `.env`) the server reads: 1 MiB.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// A configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The TOML is malformed or has an unknown key or a wrong type.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong (for an unknown key, its name).
        message: String,
    },
    /// A value is invalid.
    #[error("{path}: `{key}`: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The dotted key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// The `[server]` table, resolved.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where the HTTP transport binds (default `127.0.0.1:9310`).
    pub bind: SocketAddr,
    /// Whether the file sets `bind` (stdio says it ignores one).
    pub bind_set: bool,
    /// The shared bearer for HTTP; `None` when absent or its variable is unset.
    pub api_key: Option<String>,
    /// Concurrent runs (default 4).
    pub max_concurrent_runs: usize,
    /// How long a call waits for a run slot (default 30 s).
    pub admission_timeout: Duration,
    /// How long a call waits for its run before answering `running` (default 240 s).
    pub reply_deadline: Duration,
    /// How long a finished run stays collectable (default 1 h).
    pub retain_completed: Duration,
    /// Whether prompt files and `prompts.toml` are watched (default true).
    pub watch: bool,
    /// The settle window of the watcher (default 500 ms).
    pub watch_debounce: Duration,
    /// Allowed `Host` values (`host` or `host:port`); empty on loopback means localhost.
    pub allowed_hosts: Vec<String>,
    /// How long an HTTP client whose call stream dropped may resume it (`Last-Event-ID`)
    /// before the call's attached run is cancelled (default 10 s).
    pub resume_grace: Duration,
    /// The most HTTP sessions held at once (default [`DEFAULT_MAX_SESSIONS`]); an
    /// `initialize` past it is refused with 503.
    pub max_sessions: usize,
}

/// How many HTTP sessions the server holds at once unless `[server].max_sessions` says
/// otherwise. rmcp keeps an idle session for 5 minutes (about 55 KiB each).
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// The largest `[server].max_sessions` accepted.
pub const MAX_SESSIONS_LIMIT: i64 = 65_536;

/// The `[files]` table: where `run_prompt`'s `input_file` and `output_file` may be when the
/// client declares no MCP roots, and a bound on them when it does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesConfig {
    /// `allowed_dirs`, resolved against the TOML's directory (default none: no file
    /// parameter is accepted from a client without roots).
    pub allowed_dirs: Vec<PathBuf>,
}

/// The `[gateway]` table, resolved.
#[derive(Clone)]
pub struct GatewayConfig {
    /// The gateway's base URL (a trailing `/v1` is accepted and dropped).
    pub url: String,
    /// The bearer sent on every model call.
    pub api_key: String,
}

impl std::fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("url", &self.url)
            .field("api_key", &"<redacted>")
            .finish()
    }
}

/// The catalog tables (`[catalog]`, `[prompts.*]`): the part a reload re-reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogConfig {
    /// Include globs, relative to the prompts directory (default `["**/*.md"]`).
    pub include: Vec<String>,
    /// Exclude globs (default none).
    pub exclude: Vec<String>,
    /// Per-prompt overrides by frontmatter name.
    pub overrides: BTreeMap<String, PromptOverride>,
}

/// One `[prompts.NAME]` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptOverride {
    /// `enabled = false` drops a prompt the globs caught.
    pub enabled: bool,
    /// `file = "path.md"` adds a file no glob matches (relative to the prompts directory).
    pub file: Option<String>,
}

/// A loaded `prompts.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The TOML file itself.
    pub path: PathBuf,
    /// `[server]`.
    pub server: ServerConfig,
    /// `[gateway]`.
    pub gateway: GatewayConfig,
    /// `[paths].prompts`, resolved against the TOML's directory.
    pub prompts_dir: PathBuf,
    /// The catalog tables.
    pub catalog: CatalogConfig,
    /// `[files]`.
    pub files: FilesConfig,
    /// Warnings met while loading (a malformed `.env`), for the log.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    paths: RawPaths,
    gateway: Option<RawGateway>,
    #[serde(default)]
    catalog: RawCatalog,
    #[serde(default)]
    prompts: BTreeMap<String, RawOverride>,
    #[serde(default)]
    files: RawFiles,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFiles {
    allowed_dirs: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    bind: Option<String>,
    api_key: Option<String>,
    max_concurrent_runs: Option<i64>,
    admission_timeout: Option<String>,
    reply_deadline: Option<String>,
    retain_completed: Option<String>,
    watch: Option<bool>,
    watch_debounce: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    resume_grace: Option<String>,
    max_sessions: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPaths {
    prompts: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGateway {
    url: Option<String>,
    api_key: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    include: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    enabled: Option<bool>,
    file: Option<String>,
}

/// Where `${VAR}` values come from: the process environment, then the `.env` file (the
/// lookup `promptforge-env` defines for every PromptForge configuration).
pub use promptforge_env::Env as EnvSource;

/// The `.env` beside a TOML: `prompts.toml` -> `prompts.env`.
pub fn env_path(toml: &Path) -> PathBuf {
    toml.with_extension("env")
}

/// Parses a `.env` file (`promptforge-env`'s syntax): `KEY=VALUE` lines, `#` comments,
/// blank lines, an optional `export ` prefix and optional matching single or double quotes
/// around the value; a later line wins.
pub fn parse_env(text: &str) -> Result<HashMap<String, String>, String> {
    promptforge_env::parse_env_file(text)
        .map(|lines| lines.into_iter().map(|a| (a.name, a.value)).collect())
        .map_err(|err| err.to_string())
}

struct Ctx<'a> {
    path: &'a str,
    env: &'a EnvSource,
}

impl Ctx<'_> {
    fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    fn string(&self, key: &str, raw: &str) -> Result<String, ConfigError> {
        self.env
            .expand(raw)
            .map_err(|e| self.invalid(key, e.to_string()))
    }

    fn duration(
        &self,
        key: &str,
        raw: Option<&str>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        let Some(raw) = raw else {
            return Ok(default);
        };
        let text = self.string(key, raw)?;
        let value = humantime::parse_duration(text.trim()).map_err(|e| {
            self.invalid(
                key,
                format!("`{text}` is not a duration (like \"500ms\", \"30s\", \"1h\"): {e}"),
            )
        })?;
        if value.is_zero() {
            return Err(self.invalid(key, "must be longer than zero"));
        }
        Ok(value)
    }

    fn strings(&self, key: &str, raw: &[String]) -> Result<Vec<String>, ConfigError> {
        raw.iter()
            .enumerate()
            .map(|(i, s)| self.string(&format!("{key}[{i}]"), s))
            .collect()
    }
}

impl Config {
    /// Loads `path` and the `.env` beside it, reading variables from the process
    /// environment first.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let (file_env, warning) = read_env_file(&env_path(path));
        let mut config = Self::load_with(path, &EnvSource::process_then(file_env))?;
        config.warnings.extend(warning);
        Ok(config)
    }

    /// Loads `path` with the given variables (the `.env` is not read).
    pub fn load_with(path: &Path, env: &EnvSource) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let text = read_bounded(path).map_err(|reason| ConfigError::Read {
            path: shown.clone(),
            reason,
        })?;
        Self::parse(path, &text, env)
    }

    /// Parses the text of a `prompts.toml` that lives at `path`.
    pub fn parse(path: &Path, text: &str, env: &EnvSource) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let raw: RawFile = toml::from_str(text).map_err(|e| syntax(&shown, text, &e))?;
        let ctx = Ctx { path: &shown, env };

        let server = resolve_server(&ctx, &raw.server)?;

        let gateway = raw
            .gateway
            .as_ref()
            .ok_or_else(|| ctx.invalid("gateway", "the [gateway] table is required"))?;
        let url = gateway
            .url
            .as_deref()
            .ok_or_else(|| ctx.invalid("gateway.url", "required"))
            .and_then(|u| ctx.string("gateway.url", u))?;
        let url = check_gateway_url(&url).map_err(|m| ctx.invalid("gateway.url", m))?;
        let api_key = gateway
            .api_key
            .as_deref()
            .ok_or_else(|| ctx.invalid("gateway.api_key", "required"))
            .and_then(|k| ctx.string("gateway.api_key", k))?;
        if api_key.trim().is_empty() {
            return Err(ctx.invalid("gateway.api_key", "is empty"));
        }

        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        let prompts = match raw.paths.prompts.as_deref() {
            Some(p) => ctx.string("paths.prompts", p)?,
            None => "prompts".to_owned(),
        };
        if prompts.trim().is_empty() {
            return Err(ctx.invalid("paths.prompts", "is empty"));
        }
        let prompts_dir = base.join(prompts);

        let catalog = resolve_catalog(&ctx, &raw)?;
        let mut allowed_dirs = Vec::new();
        for (i, dir) in ctx
            .strings(
                "files.allowed_dirs",
                raw.files.allowed_dirs.as_deref().unwrap_or_default(),
            )?
            .iter()
            .enumerate()
        {
            if dir.trim().is_empty() {
                return Err(ctx.invalid(&format!("files.allowed_dirs[{i}]"), "is empty"));
            }
            allowed_dirs.push(base.join(dir));
        }
        Ok(Self {
            path: path.to_path_buf(),
            server,
            gateway: GatewayConfig { url, api_key },
            prompts_dir,
            catalog,
            files: FilesConfig { allowed_dirs },
            warnings: Vec::new(),
        })
    }
}

/// Reads the `.env` beside a TOML: missing is skipped, malformed is a warning and ignored.
pub fn read_env_file(path: &Path) -> (HashMap<String, String>, Option<String>) {
    if !path.exists() {
        return (HashMap::new(), None);
    }
    let shown = path.display();
    match read_bounded(path) {
        Ok(text) => match parse_env(&text) {
            Ok(map) => (map, None),
            Err(e) => (
                HashMap::new(),
                Some(format!("{shown} is malformed and was ignored: {e}")),
            ),
        },
        Err(e) => (
            HashMap::new(),
            Some(format!("{shown} could not be read and was ignored: {e}")),
        ),
    }
}

fn read_bounded(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "the file is {} bytes, over the {MAX_CONFIG_BYTES}-byte limit",
            meta.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

fn syntax(path: &str, text: &str, error: &toml::de::Error) -> ConfigError {
    let (line, column) = match error.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (line, column)
        }
        None => (1, 1),
    };
    ConfigError::Syntax {
        path: path.to_owned(),
        line,
        column,
        message: error.message().trim().to_owned(),
    }
}

fn resolve_server(ctx: &Ctx<'_>, raw: &RawServer) -> Result<ServerConfig, ConfigError> {
    let bind = match raw.bind.as_deref() {
        Some(b) => {
            let text = ctx.string("server.bind", b)?;
            text.trim().parse::<SocketAddr>().map_err(|_| {
                ctx.invalid(
                    "server.bind",
                    format!("`{text}` is not an address like 127.0.0.1:9310"),
                )
            })?
        }
        None => SocketAddr::from(([127, 0, 0, 1], 9310)),
    };
    let api_key = match raw.api_key.as_deref() {
        None => None,
        Some(k) => match ctx.env.expand(k) {
            Ok(value) if value.trim().is_empty() => {
                return Err(ctx.invalid(
                    "server.api_key",
                    "is empty; leave it out (stdio) or give it a value",
                ));
            }
            Ok(value) => Some(value),
            Err(promptforge_env::ExpandError::Unset(_)) => None,
            Err(e) => return Err(ctx.invalid("server.api_key", e.to_string())),
        },
    };
    let max_concurrent_runs = match raw.max_concurrent_runs {
        None => 4,
        Some(n) if (1..=1024).contains(&n) => usize::try_from(n).unwrap_or(4),
        Some(n) => {
            return Err(ctx.invalid(
                "server.max_concurrent_runs",
                format!("{n} is out of range 1..=1024"),
            ));
        }
    };
    let max_sessions = match raw.max_sessions {
        None => DEFAULT_MAX_SESSIONS,
        Some(n) if (1..=MAX_SESSIONS_LIMIT).contains(&n) => {
            usize::try_from(n).unwrap_or(DEFAULT_MAX_SESSIONS)
        }
        Some(n) => {
            return Err(ctx.invalid(
                "server.max_sessions",
                format!("{n} is out of range 1..={MAX_SESSIONS_LIMIT}"),
            ));
        }
    };
    let allowed_hosts = ctx.strings(
        "server.allowed_hosts",
        raw.allowed_hosts.as_deref().unwrap_or_default(),
    )?;
    Ok(ServerConfig {
        bind,
        bind_set: raw.bind.is_some(),
        api_key,
        max_concurrent_runs,
        admission_timeout: ctx.duration(
            "server.admission_timeout",
            raw.admission_timeout.as_deref(),
            Duration::from_secs(30),
        )?,
        reply_deadline: ctx.duration(
            "server.reply_deadline",
            raw.reply_deadline.as_deref(),
            Duration::from_secs(240),
        )?,
        retain_completed: ctx.duration(
            "server.retain_completed",
            raw.retain_completed.as_deref(),
            Duration::from_secs(3600),
        )?,
        watch: raw.watch.unwrap_or(true),
        watch_debounce: ctx.duration(
            "server.watch_debounce",
            raw.watch_debounce.as_deref(),
            Duration::from_millis(500),
        )?,
        allowed_hosts,
        resume_grace: ctx.duration(
            "server.resume_grace",
            raw.resume_grace.as_deref(),
            crate::attach::DEFAULT_RESUME_GRACE,
        )?,
        max_sessions,
    })
}

fn resolve_catalog(ctx: &Ctx<'_>, raw: &RawFile) -> Result<CatalogConfig, ConfigError> {
    let include = match &raw.catalog.include {
        Some(list) => ctx.strings("catalog.include", list)?,
        None => vec!["**/*.md".to_owned()],
    };
    let exclude = ctx.strings(
        "catalog.exclude",
        raw.catalog.exclude.as_deref().unwrap_or_default(),
    )?;
    for (key, list) in [("catalog.include", &include), ("catalog.exclude", &exclude)] {
        for (i, pattern) in list.iter().enumerate() {
            if let Err(e) = crate::catalog::glob(pattern) {
                return Err(ctx.invalid(&format!("{key}[{i}]"), e));
            }
        }
    }
    let mut overrides = BTreeMap::new();
    for (name, block) in &raw.prompts {
        let key = format!("prompts.{name}");
        if !valid_name(name) {
            return Err(ctx.invalid(
                &key,
                format!("`{name}` is not a prompt name (^[a-z][a-z0-9_]{{0,47}}$)"),
            ));
        }
        let file = match &block.file {
            Some(f) => Some(ctx.string(&format!("{key}.file"), f)?),
            None => None,
        };
        overrides.insert(
            name.clone(),
            PromptOverride {
                enabled: block.enabled.unwrap_or(true),
                file,
            },
        );
    }
    Ok(CatalogConfig {
        include,
        exclude,
        overrides,
    })
}

/// Checks a gateway URL (http/https with a host, no credentials, query or fragment) and
/// drops a trailing `/v1` so the guide's `http://host:port/v1` form works.
pub fn check_gateway_url(url: &str) -> Result<String, String> {
    let trimmed = url.trim();
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| format!("`{trimmed}` is not an http:// or https:// URL"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(format!("`{trimmed}` has no host"));
    }
    if host.contains('@') {
        return Err(format!("`{trimmed}` carries credentials; use api_key"));
    }
    if rest.contains(['?', '#']) {
        return Err(format!("`{trimmed}` has a query or fragment"));
    }
    let mut base = trimmed.trim_end_matches('/').to_owned();
    if let Some(stripped) = base.strip_suffix("/v1") {
        base = stripped.to_owned();
    }
    Ok(base)
}

/// Whether an address is loopback.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The settings a reload cannot change, by name, that differ between two configurations.
pub fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    let (a, b) = (&old.server, &new.server);
    let checks: [(&'static str, bool); 13] = [
        ("server.bind", a.bind != b.bind),
        ("server.api_key", a.api_key != b.api_key),
        (
            "server.max_concurrent_runs",
            a.max_concurrent_runs != b.max_concurrent_runs,
        ),
        (
            "server.admission_timeout",
            a.admission_timeout != b.admission_timeout,
        ),
        (
            "server.reply_deadline",
            a.reply_deadline != b.reply_deadline,
        ),
        (
            "server.retain_completed",
            a.retain_completed != b.retain_completed,
        ),
        ("server.resume_grace", a.resume_grace != b.resume_grace),
        ("server.watch", a.watch != b.watch),
        (
            "server.watch_debounce",
            a.watch_debounce != b.watch_debounce,
        ),
        ("server.allowed_hosts", a.allowed_hosts != b.allowed_hosts),
        ("server.max_sessions", a.max_sessions != b.max_sessions),
        ("paths.prompts", old.prompts_dir != new.prompts_dir),
        ("files.allowed_dirs", old.files != new.files),
    ];
    out.extend(
        checks
            .iter()
            .filter(|(_, changed)| *changed)
            .map(|(n, _)| *n),
    );
    if old.gateway.url != new.gateway.url {
        out.push("gateway.url");
    }
    if old.gateway.api_key != new.gateway.api_key {
        out.push("gateway.api_key");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvSource {
        EnvSource::fixed(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    const MINIMAL: &str = "[gateway]\nurl = \"http://127.0.0.1:8081/v1\"\napi_key = \"k\"\n";

    fn parse(text: &str, env: &EnvSource) -> Result<Config, ConfigError> {
        Config::parse(Path::new("/srv/pf/prompts.toml"), text, env)
    }

    #[test]
    fn defaults_follow_the_guide() {
        let c = parse(MINIMAL, &env(&[])).unwrap();
        assert_eq!(c.server.bind.to_string(), "127.0.0.1:9310");
        assert_eq!(c.server.api_key, None);
        assert_eq!(c.server.max_concurrent_runs, 4);
        assert_eq!(c.server.admission_timeout, Duration::from_secs(30));
        assert_eq!(c.server.reply_deadline, Duration::from_secs(240));
        assert_eq!(c.server.retain_completed, Duration::from_secs(3600));
        assert!(c.server.watch);
        assert_eq!(c.server.watch_debounce, Duration::from_millis(500));
        assert!(c.server.allowed_hosts.is_empty());
        assert_eq!(c.prompts_dir, PathBuf::from("/srv/pf/prompts"));
        assert_eq!(c.gateway.url, "http://127.0.0.1:8081");
        assert_eq!(c.catalog.include, vec!["**/*.md"]);
        assert_eq!(c.server.max_sessions, DEFAULT_MAX_SESSIONS);
        assert!(c.files.allowed_dirs.is_empty());
    }

    #[test]
    fn allowed_dirs_resolve_against_the_toml_directory() {
        let text = format!("{MINIMAL}[files]\nallowed_dirs = [\"work\", \"/abs/dir\"]\n");
        let c = parse(&text, &env(&[])).unwrap();
        assert_eq!(
            c.files.allowed_dirs,
            vec![PathBuf::from("/srv/pf/work"), PathBuf::from("/abs/dir")]
        );
        let err = parse(
            &format!("{MINIMAL}[files]\nallowed_dirs = [\" \"]\n"),
            &env(&[]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("files.allowed_dirs[0]"), "{err}");
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let text = format!("{MINIMAL}\n[server]\nbind = \"127.0.0.1:1\"\nmax_runs = 3\n");
        let err = parse(&text, &env(&[])).unwrap_err().to_string();
        assert!(err.starts_with("/srv/pf/prompts.toml:7:"), "{err}");
        assert!(err.contains("max_runs"), "{err}");
        let err = parse(
            &format!("{MINIMAL}[prompts.x]\nenable = false\n"),
            &env(&[]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(":5:") && err.contains("enable"), "{err}");
    }

    #[test]
    fn interpolation_uses_process_then_file_and_escapes_dollars() {
        let source = EnvSource::fixed_then(
            [("A".to_owned(), "from-process".to_owned())].into(),
            [
                ("A".to_owned(), "from-file".to_owned()),
                ("B".to_owned(), "file-only".to_owned()),
            ]
            .into(),
        );
        let text = "[gateway]\nurl = \"http://h\"\napi_key = \"${A}:${B}:$$x\"\n";
        let c = parse(text, &source).unwrap();
        assert_eq!(c.gateway.api_key, "from-process:file-only:$x");
    }

    #[test]
    fn an_unset_variable_fails_except_in_the_server_key() {
        let text = "[gateway]\nurl = \"http://h\"\napi_key = \"${NOPE}\"\n";
        let err = parse(text, &env(&[])).unwrap_err().to_string();
        assert!(
            err.contains("gateway.api_key")
                && err.contains("environment variable `NOPE` is not set"),
            "{err}"
        );
        let text = format!("[server]\napi_key = \"${{NOPE}}\"\n{MINIMAL}");
        let c = parse(&text, &env(&[])).unwrap();
        assert_eq!(c.server.api_key, None);
        let c = parse(&text, &env(&[("NOPE", "s3cret")])).unwrap();
        assert_eq!(c.server.api_key.as_deref(), Some("s3cret"));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (snippet, key) in [
            (
                "[server]\nreply_deadline = \"soon\"\n",
                "server.reply_deadline",
            ),
            ("[server]\nbind = \"nowhere\"\n", "server.bind"),
            (
                "[server]\nmax_concurrent_runs = 0\n",
                "server.max_concurrent_runs",
            ),
            ("[prompts.Bad-Name]\nenabled = false\n", "prompts.Bad-Name"),
            ("[server]\nmax_sessions = 0\n", "server.max_sessions"),
            ("[catalog]\ninclude = [\"a/[\"]\n", "catalog.include[0]"),
        ] {
            let err = parse(&format!("{snippet}{MINIMAL}"), &env(&[]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{snippet}: {err}");
        }
        let err = parse("[server]\n", &env(&[])).unwrap_err().to_string();
        assert!(err.contains("[gateway] table is required"), "{err}");
        let err = parse("[gateway]\nurl = \"ftp://h\"\napi_key = \"k\"\n", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("gateway.url"), "{err}");
    }

    #[test]
    fn gateway_urls_are_checked() {
        assert_eq!(
            check_gateway_url("https://g.example/v1/").unwrap(),
            "https://g.example"
        );
        assert!(check_gateway_url("http://").is_err());
        assert!(check_gateway_url("http://u:p@h").is_err());
        assert!(check_gateway_url("http://h/?q").is_err());
    }

    #[test]
    fn env_files_parse_and_malformed_ones_are_reported() {
        let map = parse_env("# c\nexport A=1\nB = \"two words\"\n\nC='x'\n").unwrap();
        assert_eq!(map["A"], "1");
        assert_eq!(map["B"], "two words");
        assert_eq!(map["C"], "x");
        assert!(parse_env("JUSTTEXT\n").unwrap_err().contains("line 1"));
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("prompts.toml");
        std::fs::write(&toml, MINIMAL.replace("\"k\"", "\"${FROM_ENV_FILE_X}\"")).unwrap();
        std::fs::write(env_path(&toml), "FROM_ENV_FILE_X=v\n").unwrap();
        assert_eq!(Config::load(&toml).unwrap().gateway.api_key, "v");
        std::fs::write(env_path(&toml), "garbage line\n").unwrap();
        let err = Config::load(&toml).unwrap_err().to_string();
        assert!(err.contains("FROM_ENV_FILE_X"), "{err}");
        std::fs::write(&toml, MINIMAL).unwrap();
        let c = Config::load(&toml).unwrap();
        assert!(c.warnings[0].contains("malformed"), "{:?}", c.warnings);
    }
}
