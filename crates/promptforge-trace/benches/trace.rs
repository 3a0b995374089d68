//! The cost of tracing a run: off, to a trace file, to an OTLP collector.
//!
//! Two workloads with no model: a 1,000-section Lua-only walk and a 10,000-arm pure-Lua
//! fanout (the executor benchmarks of `promptforge-core/benches/walk.rs`, here traced).
//! "file" records the trace and writes its document to a temporary file; "otlp" records
//! it and exports every span to a loopback OTLP/HTTP receiver that accepts and discards
//! (so this measures the runner's side, not a collector), waiting for the export to finish.
#![allow(clippy::expect_used, missing_docs)]

use std::fmt::Write as _;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use promptforge_core::trace::Tracer;
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
use promptforge_trace::otlp::{OtlpConfig, OtlpExport};

fn sections(count: usize) -> Prompt {
    let mut source = String::from(
        "---\nname: walk\ndescription: a traced Lua-only walk\npromptforge: 1\n---\n\n# Walk\n\n```lua\nvar.n = 0\n```\n\n",
    );
    for i in 0..count {
        let _ = write!(source, "## S{i}\n\n```lua\nvar.n = var.n + 1\n```\n\n");
    }
    source.push_str("## End\n\n```lua\nreturn var.n\n```\n");
    Prompt::parse(&source, "bench", &NullObserver).expect("parses")
}

fn arms() -> Prompt {
    let source = "---\nname: fan\ndescription: a traced pure-Lua fanout\npromptforge: 1\n---\n\n# Fan\n\n\
        ## Main\n\n```lua\nlocal items = {}\nfor i = 1, tonumber(args) do items[i] = i end\n\
        return #fanout(\"### Square\", items)\n```\n\n\
        ### Square\n\n```lua\nreturn item * item\n```\n";
    Prompt::parse(source, "bench", &NullObserver).expect("parses")
}

#[derive(Clone, Copy)]
enum Mode {
    Off,
    File,
    Otlp,
}

async fn once(prompt: &Prompt, input: &str, mode: Mode, otlp: &OtlpConfig, file: &std::path::Path) {
    let mut config = RunConfig::new("bench");
    let export = matches!(mode, Mode::Otlp).then(|| OtlpExport::start(otlp).expect("exporter"));
    let tracer = match mode {
        Mode::Off => None,
        Mode::File => Some(Tracer::new()),
        Mode::Otlp => Some(
            Tracer::builder()
                .listener(export.as_ref().expect("export").listener())
                .build(),
        ),
    };
    if let Some(tracer) = &tracer {
        config = config.tracer(tracer.clone());
    }
    run(
        prompt,
        input,
        ResolutionContext::empty(),
        &StoreRef::memory(),
        config,
    )
    .await
    .expect("runs");
    if let Some(export) = export {
        let report = export.finish().await;
        assert!(
            report.errors.is_empty() && report.dropped == 0,
            "{report:?}"
        );
    }
    if let (Mode::File, Some(tracer)) = (mode, tracer) {
        let failures =
            promptforge_trace::write::write_outputs(&tracer.document(), Some(file), None);
        assert!(failures.is_empty(), "{failures:?}");
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // The OTLP receiver: accepts every export and discards it.
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("binds");
    let address = listener.local_addr().expect("address");
    rt.spawn(async move {
        let app = Router::new().route("/v1/traces", post(|| async { "" }));
        let _ = axum::serve(listener, app).await;
    });
    let otlp = OtlpConfig {
        endpoint: format!("http://{address}/v1/traces"),
        timeout: Duration::from_secs(10),
        capture_content: false,
        service_name: "bench".into(),
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("trace.json");
    for (name, prompt, input, elements) in [
        ("1000_sections", sections(1000), "", 1000),
        ("10000_arms", arms(), "10000", 10_000),
    ] {
        let mut group = c.benchmark_group(format!("trace/{name}"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(10));
        group.throughput(Throughput::Elements(elements));
        for (label, mode) in [
            ("off", Mode::Off),
            ("file", Mode::File),
            ("otlp", Mode::Otlp),
        ] {
            group.bench_function(BenchmarkId::from_parameter(label), |b| {
                b.iter(|| rt.block_on(once(&prompt, input, mode, &otlp, &file)));
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
