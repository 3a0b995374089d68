//! One 10,000-arm pure-Lua fanout: wall time and the process's peak resident memory.
//!
//! ```text
//! cargo run --release -p promptforge-core --example fanout_memory [ARMS]
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Instant;

use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};

const SOURCE: &str = "---\nname: fan\ndescription: a wide pure-Lua fanout\npromptforge: 1\n---\n\n# Fan\n\n\
## Main\n\n```lua\nlocal items = {}\nfor i = 1, tonumber(args) do items[i] = i end\n\
local results = fanout(\"### Square\", items)\nreturn #results\n```\n\n\
### Square\n\n```lua\nreturn item * item\n```\n";

/// Peak resident set size in KiB, from `/proc/self/status` (Linux).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> ExitCode {
    let arms = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "10000".to_owned());
    let prompt = match Prompt::parse(SOURCE, "fanout", &NullObserver) {
        Ok(prompt) => prompt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let before = peak_rss_kib().unwrap_or(0);
    let started = Instant::now();
    let result = runtime.block_on(run(
        &prompt,
        &arms,
        ResolutionContext::empty(),
        &StoreRef::memory(),
        RunConfig::new("fanout"),
    ));
    let elapsed = started.elapsed();
    match result {
        Ok(count) => {
            println!(
                "arms={count} wall={:.3}s peak_rss={} KiB (before run: {before} KiB)",
                elapsed.as_secs_f64(),
                peak_rss_kib().unwrap_or(0)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
