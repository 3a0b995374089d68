//! Profiles, include resolution and merging.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use super::env::EnvLayers;
use super::interpolate::interpolate_value;
use super::raw::{
    RawDominion, RawEndpoint, RawFile, RawLocal, RawLocalModel, RawModel, RawServer, RawWebSearch,
};
use super::{
    Config, ConfigError, ConfigErrorKind, MAX_INCLUDE_FILES, ServerConfig, files, validate,
};

/// The deepest include nesting accepted.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 16;

/// Where a named profile lives.
#[derive(Debug, Clone)]
pub(crate) struct ProfileSource {
    /// `profiles/<name>.toml` beside the boot file.
    pub path: PathBuf,
    /// `profiles/<name>.env` beside the boot file (may not exist).
    pub env_file: PathBuf,
}

/// The `profiles/` directory beside `boot`.
fn profiles_dir(boot: &Path) -> PathBuf {
    boot.parent()
        .unwrap_or_else(|| Path::new("."))
        .join("profiles")
}

/// Names of every `profiles/*.toml` beside `boot`, sorted.
pub(crate) fn available_profiles(boot: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(profiles_dir(boot)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            (path.extension().is_some_and(|ext| ext == "toml") && path.is_file())
                .then(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .flatten()
        })
        .collect();
    names.sort();
    names
}

/// Whether `name` is exactly one normal path component.
fn is_single_component(name: &str) -> bool {
    if name.is_empty() || name.contains(['/', '\\', '\0']) {
        return false;
    }
    let mut components = Path::new(name).components();
    matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(_)), None)
    )
}

/// Resolves a profile name to its files, checking the name, the directory and the file.
pub(crate) fn profile_source(boot: &Path, name: &str) -> Result<ProfileSource, ConfigError> {
    let dir = profiles_dir(boot);
    if !is_single_component(name) {
        return Err(ConfigError::new(
            ConfigErrorKind::ProfileName,
            &dir,
            None,
            format!(
                "profile name `{}` must be a single path component (no `/`, `\\`, `.` or `..`)",
                files::quote(name)
            ),
        ));
    }
    if !dir.is_dir() {
        return Err(ConfigError::new(
            ConfigErrorKind::Profile,
            &dir,
            None,
            "profiles directory does not exist (profiles live in profiles/ beside the boot file)",
        ));
    }
    let path = dir.join(format!("{name}.toml"));
    if !path.is_file() {
        let available = available_profiles(boot);
        let list = if available.is_empty() {
            "none".to_owned()
        } else {
            available.join(", ")
        };
        return Err(ConfigError::new(
            ConfigErrorKind::Profile,
            &path,
            None,
            format!("unknown profile `{name}`; available profiles: {list}"),
        ));
    }
    Ok(ProfileSource {
        env_file: dir.join(format!("{name}.env")),
        path,
    })
}

/// Reads one file: structural parse (for precise errors), interpolation, typed parse.
fn read_file(path: &Path, env: &EnvLayers) -> Result<RawFile, ConfigError> {
    read_file_shown(path, path, env)
}

/// Reads and parses `real`; every error names the file as `path` (as the user named it).
fn read_file_shown(real: &Path, path: &Path, env: &EnvLayers) -> Result<RawFile, ConfigError> {
    let text = files::read_text_shown(real, path, "file", false)?.unwrap_or_default();
    let parse_error = |err: toml::de::Error| {
        ConfigError::new(
            ConfigErrorKind::Parse,
            path,
            None,
            files::toml_error(&text, &err),
        )
    };
    // Phase one on the text itself: line numbers and key names in every shape error.
    toml::from_str::<RawFile>(&text).map_err(parse_error)?;
    let mut value: toml::Value = toml::from_str(&text).map_err(parse_error)?;
    interpolate_value(&mut value, env, "").map_err(|(key, err)| {
        ConfigError::new(
            ConfigErrorKind::Interpolation,
            path,
            Some(key),
            err.to_string(),
        )
    })?;
    value.try_into::<RawFile>().map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Parse,
            path,
            None,
            err.message().trim().to_owned(),
        )
    })
}

/// Reads the boot file's own `[server]` (its includes are not followed).
pub(crate) fn load_boot_server(boot: &Path, env: &EnvLayers) -> Result<ServerConfig, ConfigError> {
    let raw = read_file(boot, env)?;
    let server = raw.server.unwrap_or_default();
    let missing = |field: &str| {
        ConfigError::new(
            ConfigErrorKind::Validation,
            boot,
            Some(format!("server.{field}")),
            "missing",
        )
    };
    let limits = validate::server_limits(boot, &server)?;
    let bind = server.bind.ok_or_else(|| missing("bind"))?;
    let api_key = server.api_key.ok_or_else(|| missing("api_key"))?;
    if api_key.is_blank() {
        return Err(ConfigError::new(
            ConfigErrorKind::Validation,
            boot,
            Some("server.api_key".into()),
            "must not be empty",
        ));
    }
    validate::header_safe(boot, "server.api_key".into(), api_key.expose())?;
    let dominion_store = raw
        .dominion_store
        .as_ref()
        .map(|store| validate::dominion_store(boot, store))
        .transpose()?;
    Ok(ServerConfig {
        bind,
        api_key,
        limits,
        dominion_store,
    })
}

/// An array entry with the file it came from.
#[derive(Debug, Clone)]
pub(crate) struct Sourced<T> {
    pub(crate) file: PathBuf,
    pub(crate) item: T,
}

/// The include chain merged into one document.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    pub(crate) chain: Vec<PathBuf>,
    /// The same files, canonical (symbolic links resolved, absolute).
    pub(crate) canonical_chain: Vec<PathBuf>,
    pub(crate) models_allowlist: Option<Sourced<Vec<String>>>,
    pub(crate) server: RawServer,
    pub(crate) local: RawLocal,
    /// The last file that set a `[local]` key (named by `[local]` errors).
    pub(crate) local_file: Option<PathBuf>,
    pub(crate) endpoints: Vec<Sourced<RawEndpoint>>,
    pub(crate) models: Vec<Sourced<RawModel>>,
    pub(crate) local_models: Vec<Sourced<RawLocalModel>>,
    pub(crate) dominions: Vec<Sourced<RawDominion>>,
    pub(crate) web_search: Option<Sourced<RawWebSearch>>,
    /// The files that set `[dominion_store]`, canonical (only the boot file may).
    pub(crate) dominion_store_files: Vec<(PathBuf, PathBuf)>,
}

/// Appends `items` to `into`; an entry whose key matches an earlier file's entry replaces
/// it in place, a key repeated within one file is an error. `index` maps each key of
/// `into` to its position, so merging is linear in the number of entries.
fn merge_array<T>(
    into: &mut Vec<Sourced<T>>,
    index: &mut HashMap<String, usize>,
    items: Vec<T>,
    file: &Path,
    table: &str,
    key_name: &str,
    key: impl Fn(&T) -> &str,
) -> Result<(), ConfigError> {
    let mut seen: HashSet<String> = HashSet::with_capacity(items.len());
    for item in items {
        let k = key(&item).to_owned();
        if !seen.insert(k.clone()) {
            return Err(ConfigError::new(
                ConfigErrorKind::Validation,
                file,
                Some(format!("{table}.{key_name}")),
                format!("`{}` is defined twice in this file", files::quote(&k)),
            ));
        }
        let sourced = Sourced {
            file: file.to_path_buf(),
            item,
        };
        match index.get(&k) {
            Some(&slot) => into[slot] = sourced,
            None => {
                index.insert(k, into.len());
                into.push(sourced);
            }
        }
    }
    Ok(())
}

/// Key-to-position indexes of the merged arrays.
#[derive(Debug, Default)]
struct MergeIndex {
    endpoints: HashMap<String, usize>,
    models: HashMap<String, usize>,
    local_models: HashMap<String, usize>,
    dominions: HashMap<String, usize>,
}

impl Merged {
    fn absorb(
        &mut self,
        index: &mut MergeIndex,
        file: &Path,
        canonical: &Path,
        raw: RawFile,
    ) -> Result<(), ConfigError> {
        self.chain.push(file.to_path_buf());
        self.canonical_chain.push(canonical.to_path_buf());
        if raw.dominion_store.is_some() {
            self.dominion_store_files
                .push((file.to_path_buf(), canonical.to_path_buf()));
        }
        if let Some(models) = raw.models {
            self.models_allowlist = Some(Sourced {
                file: file.to_path_buf(),
                item: models,
            });
        }
        if let Some(server) = raw.server {
            let ours = &mut self.server;
            ours.bind = server.bind.or(ours.bind.take());
            ours.api_key = server.api_key.or(ours.api_key.take());
            ours.header_read_timeout = server
                .header_read_timeout
                .or(ours.header_read_timeout.take());
            ours.keep_alive_timeout = server.keep_alive_timeout.or(ours.keep_alive_timeout.take());
            ours.max_connections = server.max_connections.or(ours.max_connections.take());
            ours.max_header_bytes = server.max_header_bytes.or(ours.max_header_bytes.take());
            ours.drain_timeout = server.drain_timeout.or(ours.drain_timeout.take());
            ours.write_timeout = server.write_timeout.or(ours.write_timeout.take());
        }
        if let Some(local) = raw.local {
            self.local_file = Some(file.to_path_buf());
            self.local.cache_dir = local.cache_dir.or(self.local.cache_dir.take());
            self.local.llama_server = local.llama_server.or(self.local.llama_server.take());
            self.local.llama_server_url = local
                .llama_server_url
                .or(self.local.llama_server_url.take());
            self.local.llama_server_sha256 = local
                .llama_server_sha256
                .or(self.local.llama_server_sha256.take());
            self.local.ready_timeout = local.ready_timeout.or(self.local.ready_timeout.take());
        }
        if let Some(web_search) = raw.tools.and_then(|t| t.web_search) {
            self.web_search = Some(Sourced {
                file: file.to_path_buf(),
                item: web_search,
            });
        }
        merge_array(
            &mut self.endpoints,
            &mut index.endpoints,
            raw.endpoint,
            file,
            "endpoint",
            "id",
            |e| &e.id,
        )?;
        merge_array(
            &mut self.models,
            &mut index.models,
            raw.model,
            file,
            "model",
            "name",
            |m| &m.name,
        )?;
        merge_array(
            &mut self.local_models,
            &mut index.local_models,
            raw.local_model,
            file,
            "local_model",
            "name",
            |m| &m.name,
        )?;
        merge_array(
            &mut self.dominions,
            &mut index.dominions,
            raw.dominion,
            file,
            "dominion",
            "id",
            |d| &d.id,
        )?;
        Ok(())
    }
}

/// The state of one include-graph walk.
#[derive(Debug, Default)]
struct Walk {
    /// The files being resolved, outermost first (for cycle detection): canonical path and
    /// the path as shown.
    stack: Vec<(PathBuf, PathBuf)>,
    /// Every file already merged (or being merged): each is loaded once.
    seen: HashSet<PathBuf>,
    merged: Merged,
    index: MergeIndex,
}

/// Resolves `path` and its includes depth-first into `walk.merged`. `path` is the file as
/// the user named it (the boot file's path joined with `profiles/…` and the includes'
/// relative paths, lexically tidied): every error names it that way, never canonicalised. A file reached a
/// second time (a diamond of includes) is not loaded again: its entries are already
/// merged at its first position.
fn resolve(
    real: &Path,
    path: &Path,
    depth: usize,
    walk: &mut Walk,
    env: &EnvLayers,
) -> Result<(), ConfigError> {
    let canonical = std::fs::canonicalize(real).map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Io,
            path,
            None,
            format!("cannot open: {}", err.kind()),
        )
    })?;
    if let Some(start) = walk.stack.iter().position(|(p, _)| *p == canonical) {
        let cycle: Vec<String> = walk.stack[start..]
            .iter()
            .map(|(_, shown)| shown.display().to_string())
            .chain(std::iter::once(path.display().to_string()))
            .collect();
        return Err(ConfigError::new(
            ConfigErrorKind::Include,
            walk.stack.last().map_or(path, |(_, shown)| shown.as_path()),
            Some("include".into()),
            format!("include cycle: {}", cycle.join(" -> ")),
        ));
    }
    if !walk.seen.insert(canonical.clone()) {
        return Ok(());
    }
    if walk.seen.len() > MAX_INCLUDE_FILES {
        return Err(ConfigError::new(
            ConfigErrorKind::Include,
            walk.stack.last().map_or(path, |(_, shown)| shown.as_path()),
            Some("include".into()),
            format!(
                "the include graph loads more than {MAX_INCLUDE_FILES} files (the limit on distinct files per profile)"
            ),
        ));
    }
    let raw = read_file_shown(&canonical, path, env)?;
    // Includes open relative to the real (symlink-resolved) directory, and are shown
    // relative to the path the user gave.
    let real_parent = canonical
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf();
    let parent = path.parent().unwrap_or_else(|| Path::new("")).to_path_buf();
    walk.stack.push((canonical.clone(), path.to_path_buf()));
    for (i, include) in raw.include.iter().enumerate() {
        if depth + 1 > MAX_INCLUDE_DEPTH {
            return Err(ConfigError::new(
                ConfigErrorKind::Include,
                path,
                Some(format!("include[{i}]")),
                format!("includes nest deeper than {MAX_INCLUDE_DEPTH} levels"),
            ));
        }
        let real_target = real_parent.join(include);
        let target = tidy(&parent.join(include));
        if let Some(why) = files::not_a_file(&real_target) {
            return Err(ConfigError::new(
                ConfigErrorKind::Include,
                path,
                Some(format!("include[{i}]")),
                format!(
                    "included file `{}` {why}",
                    files::quote(&target.display().to_string())
                ),
            ));
        }
        resolve(&real_target, &target, depth + 1, walk, env)?;
    }
    walk.stack.pop();
    walk.merged.absorb(&mut walk.index, path, &canonical, raw)
}

/// `path` with `.` components dropped and `dir/..` pairs folded, for display only (files
/// are opened through their real, symlink-resolved directory). A `..` that would climb
/// above the start of a relative path is kept.
fn tidy(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(component),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// Loads the profile at `source`: includes, merge, allowlist, validation, and the check
/// that its merged `[server]` equals `boot_server`.
pub(crate) fn load_profile(
    source: &ProfileSource,
    boot: &Path,
    boot_server: &ServerConfig,
    env: &EnvLayers,
) -> Result<Config, ConfigError> {
    let mut walk = Walk::default();
    resolve(&source.path, &source.path, 0, &mut walk, env)?;
    let merged = walk.merged;
    check_server(&merged, &source.path, boot, boot_server)?;
    check_store_in_boot(&merged, boot)?;
    validate::build(merged)
}

/// `[dominion_store]` is read from the boot file alone (a switch cannot move a replica to
/// another store); any other file of the chain that sets it is an error.
fn check_store_in_boot(merged: &Merged, boot: &Path) -> Result<(), ConfigError> {
    let boot_canonical = std::fs::canonicalize(boot).unwrap_or_else(|_| boot.to_path_buf());
    match merged
        .dominion_store_files
        .iter()
        .find(|(_, canonical)| *canonical != boot_canonical)
    {
        None => Ok(()),
        Some((file, _)) => Err(ConfigError::new(
            ConfigErrorKind::ServerMismatch,
            file,
            Some("dominion_store".into()),
            format!(
                "only the boot file ({}) may set [dominion_store]: every profile of a replica shares one store",
                boot.display()
            ),
        )),
    }
}

/// The merged `[server]` must equal the boot file's.
fn check_server(
    merged: &Merged,
    profile: &Path,
    boot: &Path,
    boot_server: &ServerConfig,
) -> Result<(), ConfigError> {
    let bind = merged.server.bind.as_deref().unwrap_or("<unset>");
    if bind != boot_server.bind {
        return Err(ConfigError::new(
            ConfigErrorKind::ServerMismatch,
            profile,
            Some("server.bind".into()),
            format!(
                "the profile's bind `{bind}` differs from the boot file's `{}` ({}); \
                 the boot file owns [server]",
                boot_server.bind,
                boot.display()
            ),
        ));
    }
    if merged.server.api_key.as_ref() != Some(&boot_server.api_key) {
        return Err(ConfigError::new(
            ConfigErrorKind::ServerMismatch,
            profile,
            Some("server.api_key".into()),
            format!(
                "the profile's api_key ([redacted]) differs from the boot file's ([redacted], {}); \
                 the boot file owns [server]",
                boot.display()
            ),
        ));
    }
    let limits = validate::server_limits(profile, &merged.server)?;
    if limits != boot_server.limits {
        return Err(ConfigError::new(
            ConfigErrorKind::ServerMismatch,
            profile,
            Some("server".into()),
            format!(
                "the profile's connection limits (header_read_timeout, keep_alive_timeout, \
                 max_connections, max_header_bytes, drain_timeout, write_timeout) differ from the boot file's ({}); \
                 the boot file owns [server]",
                boot.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_are_single_components() {
        assert!(is_single_component("main"));
        assert!(is_single_component("dev-2.x"));
        for bad in ["", ".", "..", "a/b", "../x", "/abs", "a\\b", "a\0"] {
            assert!(!is_single_component(bad), "{bad:?}");
        }
    }
}
