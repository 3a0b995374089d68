//! Benchmarks of the development runner (a bench binary, `harness = false`):
//!
//! - `reconcile`: the store dump of a 1,000-file store (1 KiB each, 20 directories): the
//!   first dump, an unchanged re-dump, a re-dump with 100 files changed, and one with all
//!   1,000 changed.
//! - `watch`: save-to-result latency of `promptforge-dev --watch` on a model-free prompt,
//!   against a loopback gateway that serves the catalog: the time from writing the file to
//!   the new result on stdout. The debounce quiet period (300 ms) is part of it.
//!
//! `cargo bench -p promptforge-dev --bench dev` (add `-- reconcile` or `-- watch` for one).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use promptforge_dev::dump::DumpTarget;

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let median = samples[samples.len() / 2];
    println!(
        "{name:<40} median {:>9.2} ms  min {:>9.2} ms  max {:>9.2} ms  ({} runs)",
        median.as_secs_f64() * 1e3,
        samples[0].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3,
        samples.len()
    );
}

fn store(version: usize, changed: usize) -> Vec<(String, String)> {
    (0..1000)
        .map(|i| {
            let v = if i < changed { version } else { 0 };
            let body = format!("file {i} version {v}\n").repeat(1024 / 24);
            (format!("dir{:02}/file{i:04}.md", i % 20), body)
        })
        .collect()
}

fn reconcile() {
    const RUNS: usize = 10;
    let mut first = Vec::new();
    let mut unchanged = Vec::new();
    let mut some = Vec::new();
    let mut all = Vec::new();
    for run in 0..RUNS {
        let base = tempfile::tempdir().unwrap();
        let target = DumpTarget::in_dir(base.path(), "bench.store").unwrap();
        let files = store(0, 0);
        let start = Instant::now();
        let report = target.reconcile(&files).unwrap();
        first.push(start.elapsed());
        assert_eq!(report.written.len(), 1000);

        let start = Instant::now();
        let report = target.reconcile(&files).unwrap();
        unchanged.push(start.elapsed());
        assert_eq!(report.unchanged, 1000);

        let files = store(run + 1, 100);
        let start = Instant::now();
        let report = target.reconcile(&files).unwrap();
        some.push(start.elapsed());
        assert_eq!(report.written.len(), 100);

        let files = store(run + 2, 1000);
        let start = Instant::now();
        let report = target.reconcile(&files).unwrap();
        all.push(start.elapsed());
        assert_eq!(report.written.len(), 1000);
    }
    stats("reconcile 1,000 files: first dump", first);
    stats("reconcile 1,000 files: unchanged", unchanged);
    stats("reconcile 1,000 files: 100 changed", some);
    stats("reconcile 1,000 files: all changed", all);
}

fn prompt(marker: usize) -> String {
    format!(
        "---\nname: bench\ndescription: Model-free watch benchmark\npromptforge: 1\n---\n\n# Bench\n\n```lua\nstore.write(\"out.txt\", \"{marker}\")\nreturn \"v{marker}\"\n```\n"
    )
}

/// A loopback gateway that only needs to serve the catalog.
fn gateway() -> (String, tokio::sync::oneshot::Sender<()>) {
    let (url_tx, url_rx) = mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/models",
                axum::routing::get(|| async {
                    axum::Json(serde_json::json!({"object": "list", "data": []}))
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            url_tx
                .send(format!("http://{}", listener.local_addr().unwrap()))
                .unwrap();
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    (url_rx.recv().unwrap(), stop)
}

fn watch() {
    const SAVES: usize = 20;
    let (url, stop) = gateway();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.md");
    std::fs::write(&path, prompt(0)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_promptforge-dev"))
        .args(["--watch", "bench.md"])
        .current_dir(dir.path())
        .env("PROMPTFORGE_GATEWAY_URL", &url)
        .env("PROMPTFORGE_GATEWAY_API_KEY", "bench-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::channel::<(String, Instant)>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send((line, Instant::now())).is_err() {
                break;
            }
        }
    });
    let wait_for = |wanted: &str| -> Instant {
        loop {
            let (line, at) = lines
                .recv_timeout(Duration::from_secs(120))
                .expect("the watcher answers");
            if line == wanted {
                return at;
            }
        }
    };
    wait_for("v0");
    // Let the watcher settle after the first run.
    std::thread::sleep(Duration::from_millis(500));
    let mut samples = Vec::new();
    for save in 1..=SAVES {
        let start = Instant::now();
        std::fs::write(&path, prompt(save)).unwrap();
        let at = wait_for(&format!("v{save}"));
        samples.push(at - start);
        std::thread::sleep(Duration::from_millis(400));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = stop.send(());
    let beyond: Vec<Duration> = samples
        .iter()
        .map(|s| s.saturating_sub(Duration::from_millis(300)))
        .collect();
    stats("watch: save to result", samples);
    stats("watch: save to result minus 300 ms debounce", beyond);
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if wants("reconcile") {
        reconcile();
    }
    if wants("watch") {
        watch();
    }
}
