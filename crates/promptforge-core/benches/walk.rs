//! Executor overhead: a 1,000-section Lua-only walk and a 10,000-member pure-Lua fanout.
#![allow(clippy::expect_used, missing_docs)]

use std::fmt::Write as _;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};

fn walk_prompt(count: usize) -> Prompt {
    let mut source = String::from(
        "---\nname: walk\ndescription: a long Lua-only walk\npromptforge: 1\n---\n\n# Walk\n\n```lua\nvar.n = 0\n```\n\n",
    );
    for i in 0..count {
        let _ = write!(source, "## S{i}\n\n```lua\nvar.n = var.n + 1\n```\n\n");
    }
    source.push_str("## End\n\n```lua\nreturn var.n\n```\n");
    Prompt::parse(&source, "bench", &NullObserver).expect("parses")
}

fn fanout_prompt() -> Prompt {
    let source = "---\nname: fan\ndescription: a wide pure-Lua fanout\npromptforge: 1\n---\n\n# Fan\n\n\
        ## Main\n\n```lua\nlocal items = {}\nfor i = 1, tonumber(args) do items[i] = i end\n\
        local results = fanout(\"### Square\", items)\nreturn #results\n```\n\n\
        ### Square\n\n```lua\nreturn item * item\n```\n";
    Prompt::parse(source, "bench", &NullObserver).expect("parses")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn walk(c: &mut Criterion) {
    let rt = runtime();
    let prompt = walk_prompt(1000);
    let mut group = c.benchmark_group("walk");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(1000));
    group.bench_function("1000_sections", |b| {
        b.iter(|| {
            rt.block_on(run(
                &prompt,
                "",
                ResolutionContext::empty(),
                &StoreRef::memory(),
                RunConfig::new("bench"),
            ))
            .expect("runs")
        });
    });
    group.finish();
}

fn fanout(c: &mut Criterion) {
    let rt = runtime();
    let prompt = fanout_prompt();
    let mut group = c.benchmark_group("fanout");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15));
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("10000_arms", |b| {
        b.iter(|| {
            let result = rt
                .block_on(run(
                    &prompt,
                    "10000",
                    ResolutionContext::empty(),
                    &StoreRef::memory(),
                    RunConfig::new("bench"),
                ))
                .expect("runs");
            assert_eq!(result, "10000");
        });
    });
    group.finish();
}

criterion_group!(benches, walk, fanout);
criterion_main!(benches);
