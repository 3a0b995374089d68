//! Provisioning: the `llama-server` binary and the GGUF files, checked before any child
//! starts.
//!
//! Binary: `[local] llama_server` (an explicit path) wins; else the cache
//! `<cache_dir>/llama.cpp/llama-server` (what `scripts/build-llama-server.sh` builds);
//! else `[local] llama_server_url` is downloaded, verified against
//! `llama_server_sha256` and installed there (a `.tar.gz`/`.tgz` archive is unpacked and
//! its `llama-server` taken, a regular file only, no symbolic link followed; any other
//! download is the binary itself).
//!
//! GGUF `source`: `https://` (or `http://` to loopback only), `file://`, or a local path.
//! Downloads stream into `<cache_dir>/models/<file name>.part`, are hashed on the way,
//! verified against `sha256` when set and renamed into place; a cached file is reused
//! when its digest matches (or, without `sha256`, when it exists).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::config::{LocalLaunch, LocalSettings};

/// Connect deadline of a download.
pub(crate) const DOWNLOAD_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest silence between two chunks of a download.
pub(crate) const DOWNLOAD_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a non-interactive download logs a progress line (also every 10%).
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Why provisioning failed; every variant names the file, URL or model concerned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProvisionError {
    /// A file could not be read, written or renamed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A download failed.
    #[error("download of {url} failed: {message}")]
    Download {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A file's SHA-256 is not the pinned one.
    #[error("sha256 mismatch for {what}: expected {expected}, got {actual}")]
    Digest {
        /// The file or URL.
        what: String,
        /// The configured digest.
        expected: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// No `llama-server` could be found or provisioned.
    #[error(
        "no llama-server binary: none at {cached}; set [local] llama_server to a binary, run scripts/build-llama-server.sh (builds into that cache), or set [local] llama_server_url with llama_server_sha256"
    )]
    NoBinary {
        /// Where the cache would hold it.
        cached: PathBuf,
    },
    /// A configured path or source is unusable.
    #[error("{0}")]
    Source(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProvisionError + '_ {
    move |source| ProvisionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `[local] cache_dir` with `~/` expanded; `~/.promptforge` when unset.
pub(crate) fn cache_dir(settings: &LocalSettings) -> PathBuf {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
    };
    match settings.cache_dir.as_deref() {
        None => home().join(".promptforge"),
        Some("~") => home(),
        Some(dir) => match dir.strip_prefix("~/") {
            Some(rest) => home().join(rest),
            None => PathBuf::from(dir),
        },
    }
}

/// Finds or provisions the `llama-server` binary (see the module docs for the order).
pub(crate) async fn llama_server(settings: &LocalSettings) -> Result<PathBuf, ProvisionError> {
    if let Some(explicit) = &settings.llama_server {
        let path = PathBuf::from(explicit);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(ProvisionError::Source(format!(
                "[local] llama_server {} is not a file",
                path.display()
            )))
        };
    }
    let dir = cache_dir(settings).join("llama.cpp");
    let cached = dir.join("llama-server");
    if cached.is_file() {
        return Ok(cached);
    }
    let (Some(url), Some(sha)) = (&settings.llama_server_url, &settings.llama_server_sha256) else {
        return Err(ProvisionError::NoBinary { cached });
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let archive = url.ends_with(".tar.gz") || url.ends_with(".tgz");
    let download = if archive {
        dir.join("llama-server.download.tar.gz")
    } else {
        dir.join("llama-server.download")
    };
    fetch(url, &download, Some(sha), "llama-server").await?;
    let staged = dir.join("llama-server.part");
    if archive {
        let result = unpack_binary(&download, &dir, &staged);
        let _ = std::fs::remove_file(&download);
        result?;
    } else {
        std::fs::rename(&download, &staged).map_err(io(&staged))?;
    }
    set_executable(&staged)?;
    std::fs::rename(&staged, &cached).map_err(io(&cached))?;
    tracing::info!(path = %cached.display(), "installed llama-server");
    Ok(cached)
}

/// Unpacks `archive` with the system `tar` into a scratch directory beside the cache and
/// moves the `llama-server` it holds to `staged`.
fn unpack_binary(archive: &Path, dir: &Path, staged: &Path) -> Result<(), ProvisionError> {
    let scratch = dir.join("unpack.part");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(io(&scratch))?;
    let status = std::process::Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(&scratch)
        .status()
        .map_err(io(archive))?;
    let found = status
        .success()
        .then(|| find_named(&scratch, "llama-server", 4))
        .flatten();
    let result = match found {
        Some(binary) => std::fs::rename(&binary, staged).map_err(io(staged)),
        None => Err(ProvisionError::Source(format!(
            "{}: the archive holds no llama-server",
            archive.display()
        ))),
    };
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// The first regular file called `name` under `dir` (at most `depth` levels down).
/// Symbolic links are never followed nor taken: an archive's link could otherwise make
/// the install move or chmod a file outside the scratch directory.
fn find_named(dir: &Path, name: &str, depth: u32) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            dirs.push(entry.path());
        } else if kind.is_file() && entry.file_name() == name {
            return Some(entry.path());
        }
    }
    if depth == 0 {
        return None;
    }
    dirs.into_iter()
        .find_map(|d| find_named(&d, name, depth - 1))
}

#[cfg(unix)]
fn set_executable(path: &Path) -> Result<(), ProvisionError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(io(path))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> Result<(), ProvisionError> {
    Ok(())
}

/// Resolves a model's GGUF to a verified local file, downloading it when `source` is a URL.
pub(crate) async fn model_file(
    settings: &LocalSettings,
    name: &str,
    launch: &LocalLaunch,
) -> Result<PathBuf, ProvisionError> {
    let source = launch.source.as_str();
    let sha = launch.sha256.as_deref();
    if source.starts_with("https://") || source.starts_with("http://") {
        check_http_source(source, name)?;
        let file_name = url_file_name(source).ok_or_else(|| {
            ProvisionError::Source(format!(
                "local_model[{name}].source {source} has no file name"
            ))
        })?;
        let dir = cache_dir(settings).join("models");
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let dest = dir.join(file_name);
        if dest.is_file() {
            match sha {
                None => return Ok(dest),
                Some(expected) => {
                    if file_sha256(&dest).await? == expected {
                        tracing::info!(model = name, path = %dest.display(), "reusing cached model");
                        return Ok(dest);
                    }
                    tracing::warn!(model = name, path = %dest.display(), "cached model has the wrong digest; downloading again");
                }
            }
        }
        fetch(source, &dest, sha, name).await?;
        return Ok(dest);
    }
    let path = match source.strip_prefix("file://") {
        Some(rest) => PathBuf::from(rest),
        None => PathBuf::from(source),
    };
    if !path.is_file() {
        return Err(ProvisionError::Source(format!(
            "local_model[{name}].source {} is not a file",
            path.display()
        )));
    }
    if let Some(expected) = sha {
        let actual = file_sha256(&path).await?;
        if actual != expected {
            return Err(ProvisionError::Digest {
                what: path.display().to_string(),
                expected: expected.to_owned(),
                actual,
            });
        }
    }
    Ok(path)
}

/// `http://` only to a loopback host (tests, a local mirror); anything else must be TLS.
fn check_http_source(source: &str, name: &str) -> Result<(), ProvisionError> {
    let Some(rest) = source.strip_prefix("http://") else {
        return Ok(());
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, _)) if !authority.ends_with(']') => host,
        _ => authority,
    };
    if matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
        Ok(())
    } else {
        Err(ProvisionError::Source(format!(
            "local_model[{name}].source {source}: plain http:// is allowed only to loopback; use https://"
        )))
    }
}

/// The last path segment of a URL, without query or fragment.
pub(crate) fn url_file_name(url: &str) -> Option<&str> {
    let path = url.split(['?', '#']).next()?;
    let (_, rest) = path.split_once("://")?;
    let (_, path) = rest.split_once('/')?;
    path.rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
}

/// SHA-256 of a file as lowercase hex (off the async workers).
pub(crate) async fn file_sha256(path: &Path) -> Result<String, ProvisionError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::open(&owned).map_err(io(&owned))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).map_err(io(&owned))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(hex(&hasher.finalize()))
    })
    .await
    .map_err(|err| ProvisionError::Source(format!("hashing task failed: {err}")))?
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Downloads `url` into `dest`: streamed into `dest.part`, hashed, verified against
/// `sha256` when set, then renamed. On any failure the part file is deleted, so nothing
/// that looks complete is left behind.
pub(crate) async fn fetch(
    url: &str,
    dest: &Path,
    sha256: Option<&str>,
    label: &str,
) -> Result<(), ProvisionError> {
    let mut part_name = dest.as_os_str().to_owned();
    part_name.push(".part");
    let part = PathBuf::from(part_name);
    let result = fetch_to_part(url, &part, sha256, label).await;
    match result {
        Ok(()) => std::fs::rename(&part, dest).map_err(io(dest)),
        Err(err) => {
            let _ = std::fs::remove_file(&part);
            Err(err)
        }
    }
}

async fn fetch_to_part(
    url: &str,
    part: &Path,
    sha256: Option<&str>,
    label: &str,
) -> Result<(), ProvisionError> {
    let fail = |message: String| ProvisionError::Download {
        url: url.to_owned(),
        message,
    };
    let client = reqwest::Client::builder()
        .connect_timeout(DOWNLOAD_CONNECT_TIMEOUT)
        .build()
        .map_err(|err| fail(err.to_string()))?;
    let mut response = tokio::time::timeout(DOWNLOAD_IDLE_TIMEOUT, client.get(url).send())
        .await
        .map_err(|_| fail("no response in time".into()))?
        .map_err(|err| fail(err.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("the server answered {}", response.status())));
    }
    let total = response.content_length();
    let mut file = std::fs::File::create(part).map_err(io(part))?;
    let mut hasher = Sha256::new();
    let mut progress = Progress::new(label, total);
    loop {
        let chunk = tokio::time::timeout(DOWNLOAD_IDLE_TIMEOUT, response.chunk())
            .await
            .map_err(|_| {
                fail(format!(
                    "no data for {}",
                    humantime::format_duration(DOWNLOAD_IDLE_TIMEOUT)
                ))
            })?
            .map_err(|err| fail(err.to_string()))?;
        let Some(chunk) = chunk else { break };
        hasher.update(&chunk);
        file.write_all(&chunk).map_err(io(part))?;
        progress.advance(chunk.len() as u64);
    }
    file.sync_all().map_err(io(part))?;
    drop(file);
    let done = progress.finish();
    if let Some(total) = total
        && done != total
    {
        return Err(fail(format!(
            "the body ended after {done} of {total} bytes"
        )));
    }
    let actual = hex(&hasher.finalize());
    if let Some(expected) = sha256
        && actual != expected
    {
        return Err(ProvisionError::Digest {
            what: url.to_owned(),
            expected: expected.to_owned(),
            actual,
        });
    }
    Ok(())
}

/// Download progress: an indicatif bar on an interactive stderr, tracing lines otherwise
/// (every [`PROGRESS_INTERVAL`] or 10%, whichever comes first).
struct Progress {
    label: String,
    total: Option<u64>,
    done: u64,
    started: Instant,
    last_line: Instant,
    last_tenth: u64,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(label: &str, total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(total) => indicatif::ProgressBar::new(total),
                None => indicatif::ProgressBar::new_spinner(),
            };
            let style = indicatif::ProgressStyle::with_template(
                "{msg} {percent:>3}% {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(label.to_owned());
            bar
        });
        tracing::info!(model = label, total_bytes = total, "download started");
        let now = Instant::now();
        Self {
            label: label.to_owned(),
            total,
            done: 0,
            started: now,
            last_line: now,
            last_tenth: 0,
            bar,
        }
    }

    fn advance(&mut self, n: u64) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            return;
        }
        let tenth = self
            .total
            .filter(|t| *t > 0)
            .map_or(0, |t| self.done.saturating_mul(10) / t);
        if tenth > self.last_tenth || self.last_line.elapsed() >= PROGRESS_INTERVAL {
            self.last_tenth = tenth;
            self.last_line = Instant::now();
            self.line();
        }
    }

    fn line(&self) {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = self.done as f64 / secs;
        match self.total {
            Some(total) if total > 0 => {
                let percent = self.done.saturating_mul(100) / total;
                let eta = if rate > 0.0 {
                    (total.saturating_sub(self.done)) as f64 / rate
                } else {
                    0.0
                };
                tracing::info!(
                    model = %self.label,
                    percent,
                    bytes = self.done,
                    total_bytes = total,
                    bytes_per_sec = rate as u64,
                    eta_secs = eta as u64,
                    "download progress"
                );
            }
            _ => tracing::info!(
                model = %self.label,
                bytes = self.done,
                bytes_per_sec = rate as u64,
                "download progress"
            ),
        }
    }

    fn finish(&mut self) -> u64 {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.line();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_file_names() {
        assert_eq!(
            url_file_name("https://h/a/b/model.gguf?x=1"),
            Some("model.gguf")
        );
        assert_eq!(url_file_name("http://127.0.0.1:9/m.gguf#f"), Some("m.gguf"));
        assert_eq!(url_file_name("https://h/"), None);
        assert_eq!(url_file_name("https://h"), None);
        assert_eq!(url_file_name("https://h/a/.."), None);
    }

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(check_http_source("http://127.0.0.1:8080/m.gguf", "m").is_ok());
        assert!(check_http_source("http://localhost/m.gguf", "m").is_ok());
        assert!(check_http_source("https://example.org/m.gguf", "m").is_ok());
        let err = check_http_source("http://example.org/m.gguf", "m").unwrap_err();
        assert!(err.to_string().contains("only to loopback"), "{err}");
    }

    #[test]
    fn cache_dir_expands_home() {
        let mut s = LocalSettings {
            cache_dir: Some("~/x".into()),
            llama_server: None,
            llama_server_url: None,
            llama_server_sha256: None,
            ready_timeout: Duration::from_secs(1),
        };
        let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
        assert_eq!(cache_dir(&s), home.join("x"));
        s.cache_dir = Some("/abs".into());
        assert_eq!(cache_dir(&s), PathBuf::from("/abs"));
        s.cache_dir = None;
        assert_eq!(cache_dir(&s), home.join(".promptforge"));
    }
}
