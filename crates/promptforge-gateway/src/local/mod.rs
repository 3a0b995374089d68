//! Local inference: `llama-server` children for `[[local_model]]` entries.
//!
//! [`prepare`] checks and provisions everything (binary, GGUF files and their digests)
//! without starting anything; [`Fleet::start`] then starts one child per model, waits for
//! each to be ready and resolves chat models' tool-calling dialects. A fleet is the local
//! overlay of one profile: the plan routes to its children, but the children live here.
//! A child is shared by every fleet whose model has the same launch (name, kind, context,
//! settings, GGUF and binary), so a profile switch keeps such children running; the last
//! holder of a child going away kills it.

pub(crate) mod child;
pub(crate) mod dialect;
pub(crate) mod provision;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, LocalLaunch, ModelBackend, ModelKind, ToolDialect};

pub(crate) use child::{ChildError, ChildSpec, LocalChild};
pub(crate) use provision::ProvisionError;

/// Why the local runtime could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LocalError {
    /// The binary or a GGUF could not be provisioned or verified.
    #[error("local model {model}: {source}")]
    Provision {
        /// The model (or `llama-server`).
        model: String,
        /// What failed.
        source: ProvisionError,
    },
    /// A child failed to start.
    #[error("{0}")]
    Child(#[from] ChildError),
    /// A chat model's dialect is ambiguous or has no evidence.
    #[error("local model {model}: cannot resolve the tool-calling dialect: {source}")]
    Dialect {
        /// The model.
        model: String,
        /// Why.
        source: dialect::DialectError,
    },
    /// The run directory or a port could not be set up.
    #[error("local runtime: {0}")]
    Setup(String),
}

/// One local model's provisioned launch: its name, kind, settings and GGUF file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PreparedModel {
    /// The model name.
    pub name: String,
    /// What it serves.
    pub kind: ModelKind,
    /// Context window (`-c`).
    pub context: u64,
    /// The launch settings.
    pub launch: LocalLaunch,
    /// The verified GGUF.
    pub gguf: PathBuf,
    /// The `llama-server` binary.
    pub binary: PathBuf,
}

/// Everything checked and provisioned, nothing started yet.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The cache directory.
    pub cache_dir: PathBuf,
    /// `/health` deadline.
    pub ready_timeout: Duration,
    /// The models, in configuration order.
    pub models: Vec<PreparedModel>,
}

/// Provisions the binary and every GGUF of `config`'s local models; `None` when it has
/// none. Nothing is started.
pub(crate) async fn prepare(config: &Config) -> Result<Option<Prepared>, LocalError> {
    let locals: Vec<_> = config
        .models
        .iter()
        .filter_map(|m| match &m.backend {
            ModelBackend::Local(launch) => Some((m, launch)),
            ModelBackend::Remote { .. } => None,
        })
        .collect();
    if locals.is_empty() {
        return Ok(None);
    }
    let settings = &config.local;
    let binary =
        provision::llama_server(settings)
            .await
            .map_err(|source| LocalError::Provision {
                model: "llama-server".into(),
                source,
            })?;
    let mut models = Vec::with_capacity(locals.len());
    for (model, launch) in locals {
        let gguf = provision::model_file(settings, &model.name, launch)
            .await
            .map_err(|source| LocalError::Provision {
                model: model.name.clone(),
                source,
            })?;
        if let Some(template) = &launch.chat_template_file
            && !Path::new(template).is_file()
        {
            return Err(LocalError::Provision {
                model: model.name.clone(),
                source: ProvisionError::Source(format!(
                    "chat_template_file {template} is not a file"
                )),
            });
        }
        models.push(PreparedModel {
            name: model.name.clone(),
            kind: model.kind,
            context: model.context,
            launch: launch.clone(),
            gguf,
            binary: binary.clone(),
        });
    }
    Ok(Some(Prepared {
        cache_dir: provision::cache_dir(settings),
        ready_timeout: settings.ready_timeout,
        models,
    }))
}

/// A running local model: its child and the dialect resolved from it.
#[derive(Debug)]
pub(crate) struct Running {
    /// What it was started from: a later profile with the same launch shares it.
    pub launch: PreparedModel,
    /// The child.
    pub child: LocalChild,
    /// The child's OpenAI API root, `http://127.0.0.1:PORT/v1`.
    pub base_url: reqwest::Url,
    /// The resolved tool-calling dialect.
    pub dialect: ToolDialect,
}

/// The running children of one profile, by model name.
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    models: HashMap<String, Arc<Running>>,
}

/// The arguments of one child (everything after the binary).
pub(crate) fn child_args(model: &PreparedModel, port: u16, key_file: &Path) -> Vec<String> {
    let l = &model.launch;
    let mut args: Vec<String> = vec![
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--api-key-file".into(),
        key_file.display().to_string(),
        "-m".into(),
        model.gguf.display().to_string(),
        "-c".into(),
        model.context.to_string(),
        "--parallel".into(),
        l.parallel.to_string(),
        "--alias".into(),
        model.name.clone(),
    ];
    if let Some(t) = l.threads {
        args.extend(["-t".into(), t.to_string()]);
    }
    if let Some(n) = l.gpu_layers {
        args.extend(["--gpu-layers".into(), n.to_string()]);
    }
    if let Some(on) = l.flash_attention {
        args.extend(["--flash-attn".into(), if on { "on" } else { "off" }.into()]);
    }
    if let Some(t) = &l.cache_type_k {
        args.extend(["--cache-type-k".into(), t.clone()]);
    }
    if let Some(t) = &l.cache_type_v {
        args.extend(["--cache-type-v".into(), t.clone()]);
    }
    if let Some(f) = &l.chat_template_file {
        args.extend(["--chat-template-file".into(), f.clone()]);
    }
    match model.kind {
        ModelKind::Chat => {}
        ModelKind::Embedding => {
            args.extend(["--embeddings".into(), "--pooling".into(), "mean".into()])
        }
        ModelKind::Classifier => args.push("--reranking".into()),
    }
    args
}

fn free_port() -> Result<u16, LocalError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|err| LocalError::Setup(format!("no free loopback port: {err}")))
}

fn run_dir(cache: &Path) -> Result<PathBuf, LocalError> {
    let dir = cache.join("run");
    std::fs::create_dir_all(&dir)
        .map_err(|err| LocalError::Setup(format!("cannot create {}: {err}", dir.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|err| {
            LocalError::Setup(format!("cannot restrict {}: {err}", dir.display()))
        })?;
    }
    Ok(dir)
}

impl Fleet {
    /// The fleet for `prepared` (none: no local model): every model whose launch equals
    /// one of `current`'s keeps that running child; the others get a new child, started
    /// in order, each ready and its dialect resolved before the next. `current` is never
    /// changed: on any failure the children started here are killed (dropped) and
    /// `current`'s keep running as they were.
    pub(crate) async fn start(
        prepared: Option<&Prepared>,
        current: &Fleet,
    ) -> Result<Self, LocalError> {
        let mut fleet = Self::default();
        let Some(prepared) = prepared else {
            return Ok(fleet);
        };
        let run = run_dir(&prepared.cache_dir)?;
        for model in &prepared.models {
            let running = match current.models.get(&model.name) {
                Some(running)
                    if same_process(&running.launch, model) && !running.child.is_retired() =>
                {
                    running.clone()
                }
                _ => Arc::new(start_one(model, &run, prepared.ready_timeout).await?),
            };
            fleet.models.insert(model.name.clone(), running);
        }
        Ok(fleet)
    }

    /// A running model by name.
    pub(crate) fn model(&self, name: &str) -> Option<&Arc<Running>> {
        self.models.get(name)
    }

    /// Stops for good every child of this fleet that `next` does not share (the commit of
    /// a profile switch): they are not respawned, and in-flight requests on them fail.
    pub(crate) fn retire_unshared(&self, next: &Fleet) {
        for (name, running) in &self.models {
            let shared = next
                .models
                .get(name)
                .is_some_and(|kept| Arc::ptr_eq(kept, running));
            if !shared {
                running.child.retire();
            }
        }
    }
}

/// Whether two launches run the same process: the same binary and the same arguments
/// (model name, GGUF, context and every knob; the port and key file are the child's own).
fn same_process(a: &PreparedModel, b: &PreparedModel) -> bool {
    let none = Path::new("");
    a.binary == b.binary && child_args(a, 0, none) == child_args(b, 0, none)
}

/// Starts one model's child, waits until it is ready and resolves its dialect.
async fn start_one(
    model: &PreparedModel,
    run: &Path,
    ready_timeout: Duration,
) -> Result<Running, LocalError> {
    let port = free_port()?;
    let key_file = run.join(format!("{}-{port}.key", child::sanitize(&model.name)));
    let spec = ChildSpec {
        model: model.name.clone(),
        binary: model.binary.clone(),
        port,
        args: child_args(model, port, &key_file),
        key_file,
        ready_timeout,
    };
    let bearer = child::generate_bearer()
        .map_err(|err| LocalError::Setup(format!("no random bearer: {err}")))?;
    let base_url = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/v1"))
        .map_err(|err| LocalError::Setup(format!("no URL for port {port}: {err}")))?;
    let child = LocalChild::start(spec, bearer).await?;
    let dialect = if model.kind == ModelKind::Chat {
        let props = child.props().await.unwrap_or_else(|err| {
            tracing::warn!(model = %model.name, error = %err, "no /props; trying the sidecar");
            serde_json::Value::Null
        });
        let template = props
            .get("chat_template")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        // The sidecar `.md` is read off the async workers.
        let gguf = model.gguf.clone();
        let resolved =
            tokio::task::spawn_blocking(move || dialect::resolve(template.as_deref(), &gguf))
                .await
                .map_err(|err| LocalError::Setup(format!("dialect task failed: {err}")))?
                .map_err(|source| LocalError::Dialect {
                    model: model.name.clone(),
                    source,
                })?;
        tracing::info!(model = %model.name, dialect = ?resolved, "resolved tool-calling dialect");
        resolved
    } else {
        ToolDialect::OpenAi
    };
    Ok(Running {
        launch: model.clone(),
        child,
        base_url,
        dialect,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(kind: ModelKind) -> PreparedModel {
        PreparedModel {
            name: "m".into(),
            kind,
            context: 2048,
            launch: LocalLaunch {
                source: "/m.gguf".into(),
                sha256: None,
                chat_template_file: None,
                gpu_layers: None,
                flash_attention: None,
                cache_type_k: None,
                cache_type_v: None,
                parallel: 1,
                threads: None,
                vram_gb: None,
                dominion: None,
            },
            gguf: PathBuf::from("/cache/m.gguf"),
            binary: PathBuf::from("/bin/llama-server"),
        }
    }

    fn has_pair(args: &[String], flag: &str, value: &str) -> bool {
        args.windows(2).any(|w| w[0] == flag && w[1] == value)
    }

    #[test]
    fn chat_args_carry_the_key_file_never_the_key() {
        let args = child_args(&prepared(ModelKind::Chat), 4242, Path::new("/run/m.key"));
        assert!(has_pair(&args, "--port", "4242"));
        assert!(has_pair(&args, "--host", "127.0.0.1"));
        assert!(has_pair(&args, "--api-key-file", "/run/m.key"));
        assert!(has_pair(&args, "-m", "/cache/m.gguf"));
        assert!(has_pair(&args, "-c", "2048"));
        assert!(has_pair(&args, "--parallel", "1"));
        assert!(
            !args
                .iter()
                .any(|a| a == "--api-key" || a == "-t" || a == "--embeddings")
        );
    }

    #[test]
    fn knobs_and_kinds_map_to_flags() {
        let mut m = prepared(ModelKind::Embedding);
        m.launch.threads = Some(1);
        m.launch.gpu_layers = Some(99);
        m.launch.flash_attention = Some(true);
        m.launch.cache_type_k = Some("q8_0".into());
        m.launch.cache_type_v = Some("f16".into());
        m.launch.parallel = 3;
        let args = child_args(&m, 1, Path::new("/k"));
        for (flag, value) in [
            ("-t", "1"),
            ("--gpu-layers", "99"),
            ("--flash-attn", "on"),
            ("--cache-type-k", "q8_0"),
            ("--cache-type-v", "f16"),
            ("--parallel", "3"),
            ("--pooling", "mean"),
        ] {
            assert!(has_pair(&args, flag, value), "{flag} {value}: {args:?}");
        }
        assert!(args.iter().any(|a| a == "--embeddings"));
        let args = child_args(&prepared(ModelKind::Classifier), 1, Path::new("/k"));
        assert!(args.iter().any(|a| a == "--reranking"));
        let mut chat = prepared(ModelKind::Chat);
        chat.launch.chat_template_file = Some("/t.jinja".into());
        chat.launch.flash_attention = Some(false);
        let args = child_args(&chat, 1, Path::new("/k"));
        assert!(has_pair(&args, "--chat-template-file", "/t.jinja"));
        assert!(has_pair(&args, "--flash-attn", "off"));
    }
}
