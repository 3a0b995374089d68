//! Profiles, include resolution and merging.

use std::path::{Component, Path, PathBuf};

use super::env::EnvLayers;
use super::interpolate::{InterpolateError, interpolate_value};
use super::raw::{
    RawDominion, RawEndpoint, RawFile, RawLocal, RawLocalModel, RawModel, RawServer, RawWebSearch,
};
use super::{Config, ConfigError, ConfigErrorKind, ServerConfig, validate};

/// The deepest include nesting accepted.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 16;

/// Where a named profile lives.
#[derive(Debug, Clone)]
pub struct ProfileSource {
    /// The profile's name.
    pub name: String,
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
pub fn available_profiles(boot: &Path) -> Vec<String> {
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
pub fn profile_source(boot: &Path, name: &str) -> Result<ProfileSource, ConfigError> {
    let dir = profiles_dir(boot);
    if !is_single_component(name) {
        return Err(ConfigError::new(
            ConfigErrorKind::Profile,
            &dir,
            Some("--profile".into()),
            format!("profile name `{name}` must be a single path component"),
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
        name: name.to_owned(),
        env_file: dir.join(format!("{name}.env")),
        path,
    })
}

/// Reads one file: structural parse (for precise errors), interpolation, typed parse.
fn read_file(path: &Path, env: &EnvLayers) -> Result<RawFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Io,
            path,
            None,
            format!("cannot read: {err}"),
        )
    })?;
    // Phase one on the text itself: line numbers and key names in every shape error.
    toml::from_str::<RawFile>(&text).map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Parse,
            path,
            None,
            err.to_string().trim().to_owned(),
        )
    })?;
    let mut value: toml::Value = toml::from_str(&text).map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Parse,
            path,
            None,
            err.to_string().trim().to_owned(),
        )
    })?;
    interpolate_value(&mut value, env, "").map_err(|(key, err)| {
        let message = match err {
            InterpolateError::Unresolved(name) => {
                format!("environment variable `{name}` is not set")
            }
            InterpolateError::Malformed(why) => why,
        };
        ConfigError::new(ConfigErrorKind::Interpolation, path, Some(key), message)
    })?;
    value.try_into::<RawFile>().map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Parse,
            path,
            None,
            err.to_string().trim().to_owned(),
        )
    })
}

/// Reads the boot file's own `[server]` (its includes are not followed).
pub fn load_boot_server(boot: &Path, env: &EnvLayers) -> Result<ServerConfig, ConfigError> {
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
    Ok(ServerConfig { bind, api_key })
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
    pub(crate) models_allowlist: Option<Sourced<Vec<String>>>,
    pub(crate) server: RawServer,
    pub(crate) local: RawLocal,
    pub(crate) endpoints: Vec<Sourced<RawEndpoint>>,
    pub(crate) models: Vec<Sourced<RawModel>>,
    pub(crate) local_models: Vec<Sourced<RawLocalModel>>,
    pub(crate) dominions: Vec<Sourced<RawDominion>>,
    pub(crate) web_search: Option<Sourced<RawWebSearch>>,
}

/// Appends `items` to `into`; an entry whose key matches an earlier file's entry replaces
/// it in place, a key repeated within one file is an error.
fn merge_array<T>(
    into: &mut Vec<Sourced<T>>,
    items: Vec<T>,
    file: &Path,
    table: &str,
    key_name: &str,
    key: impl Fn(&T) -> &str,
) -> Result<(), ConfigError> {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        let k = key(&item).to_owned();
        if seen.contains(&k) {
            return Err(ConfigError::new(
                ConfigErrorKind::Validation,
                file,
                Some(format!("{table}.{key_name}")),
                format!("`{k}` is defined twice in this file"),
            ));
        }
        seen.push(k.clone());
        let sourced = Sourced {
            file: file.to_path_buf(),
            item,
        };
        match into.iter_mut().find(|existing| key(&existing.item) == k) {
            Some(slot) => *slot = sourced,
            None => into.push(sourced),
        }
    }
    Ok(())
}

impl Merged {
    fn absorb(&mut self, file: &Path, raw: RawFile) -> Result<(), ConfigError> {
        self.chain.push(file.to_path_buf());
        if let Some(models) = raw.models {
            self.models_allowlist = Some(Sourced {
                file: file.to_path_buf(),
                item: models,
            });
        }
        if let Some(server) = raw.server {
            self.server.bind = server.bind.or(self.server.bind.take());
            self.server.api_key = server.api_key.or(self.server.api_key.take());
        }
        if let Some(local) = raw.local {
            self.local.cache_dir = local.cache_dir.or(self.local.cache_dir.take());
            self.local.llama_server = local.llama_server.or(self.local.llama_server.take());
        }
        if let Some(web_search) = raw.tools.and_then(|t| t.web_search) {
            self.web_search = Some(Sourced {
                file: file.to_path_buf(),
                item: web_search,
            });
        }
        merge_array(
            &mut self.endpoints,
            raw.endpoint,
            file,
            "endpoint",
            "id",
            |e| &e.id,
        )?;
        merge_array(&mut self.models, raw.model, file, "model", "name", |m| {
            &m.name
        })?;
        merge_array(
            &mut self.local_models,
            raw.local_model,
            file,
            "local_model",
            "name",
            |m| &m.name,
        )?;
        merge_array(
            &mut self.dominions,
            raw.dominion,
            file,
            "dominion",
            "id",
            |d| &d.id,
        )?;
        Ok(())
    }
}

/// Resolves `path` and its includes depth-first into `merged`.
fn resolve(
    path: &Path,
    depth: usize,
    stack: &mut Vec<PathBuf>,
    merged: &mut Merged,
    env: &EnvLayers,
) -> Result<(), ConfigError> {
    let canonical = std::fs::canonicalize(path).map_err(|err| {
        ConfigError::new(
            ConfigErrorKind::Io,
            path,
            None,
            format!("cannot open: {err}"),
        )
    })?;
    if let Some(start) = stack.iter().position(|p| *p == canonical) {
        let cycle: Vec<String> = stack[start..]
            .iter()
            .chain(std::iter::once(&canonical))
            .map(|p| p.display().to_string())
            .collect();
        return Err(ConfigError::new(
            ConfigErrorKind::Include,
            stack.last().map_or(path, |p| p.as_path()),
            Some("include".into()),
            format!("include cycle: {}", cycle.join(" -> ")),
        ));
    }
    let raw = read_file(&canonical, env)?;
    let parent = canonical
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf();
    stack.push(canonical.clone());
    for (i, include) in raw.include.iter().enumerate() {
        if depth + 1 > MAX_INCLUDE_DEPTH {
            return Err(ConfigError::new(
                ConfigErrorKind::Include,
                &canonical,
                Some(format!("include[{i}]")),
                format!("includes nest deeper than {MAX_INCLUDE_DEPTH} levels"),
            ));
        }
        let target = parent.join(include);
        if !target.is_file() {
            return Err(ConfigError::new(
                ConfigErrorKind::Include,
                &canonical,
                Some(format!("include[{i}]")),
                format!("included file `{}` does not exist", target.display()),
            ));
        }
        resolve(&target, depth + 1, stack, merged, env)?;
    }
    stack.pop();
    merged.absorb(&canonical, raw)
}

/// Loads the profile at `source`: includes, merge, allowlist, validation, and the check
/// that its merged `[server]` equals `boot_server`.
pub fn load_profile(
    source: &ProfileSource,
    boot: &Path,
    boot_server: &ServerConfig,
    env: &EnvLayers,
) -> Result<Config, ConfigError> {
    let mut merged = Merged::default();
    resolve(&source.path, 0, &mut Vec::new(), &mut merged, env)?;
    check_server(&merged, &source.path, boot, boot_server)?;
    validate::build(merged, boot_server.clone())
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
