//! Speed of the three costs a caller pays: loading the model, indexing a tool, resolving a
//! need against a 1,000-tool catalog.
//!
//! ```text
//! cargo bench -p promptforge-tool-picker --bench picker
//! ```
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use promptforge_tool_picker::{Catalog, Config, Model, ToolDescriptor, ToolId, ToolPicker};
use serde_json::json;

const VERBS: &[&str] = &[
    "read", "write", "delete", "list", "search", "create", "update", "archive", "export", "import",
];
const OBJECTS: &[&str] = &[
    "file",
    "email",
    "calendar event",
    "invoice",
    "customer record",
    "support ticket",
    "photo",
    "playlist",
    "weather report",
    "stock quote",
];
const PLACES: &[&str] = &[
    "on the local disk",
    "in the cloud drive",
    "in the company database",
    "through the public API",
    "in the user's account",
    "from the backup archive",
    "in the shared workspace",
    "on the mobile device",
    "in the analytics warehouse",
    "over the message queue",
];

/// A deterministic catalog of `n` distinct tools (at most 1,000).
fn catalog(n: usize) -> Catalog {
    (0..n)
        .map(|i| {
            let verb = VERBS[i % 10];
            let object = OBJECTS[(i / 10) % 10];
            let place = PLACES[(i / 100) % 10];
            ToolDescriptor::new(
                ToolId::new(
                    format!("server{}", i / 100),
                    format!("{verb}_{}", object.replace(' ', "_")),
                ),
                format!("{verb} a {object} {place}"),
                json!({"type": "object"}),
            )
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("picker");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));

    group.bench_function("model_load", |b| b.iter(|| Model::load().unwrap()));

    let model = Model::load().unwrap();
    let small = catalog(20);
    group.throughput(Throughput::Elements(20));
    group.bench_function(BenchmarkId::new("index_build", "20_tools"), |b| {
        b.iter(|| ToolPicker::build_with_model(&model, small.clone(), Config::default()).unwrap())
    });

    let picker = ToolPicker::build_with_model(&model, catalog(1000), Config::default()).unwrap();
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("resolve", "1000_tools"), |b| {
        b.iter(|| {
            picker
                .resolve("export the customer records from the company database")
                .unwrap()
        })
    });
    group.bench_function(BenchmarkId::new("embed_need", "short"), |b| {
        b.iter(|| {
            model
                .embed("export the customer records from the company database")
                .unwrap()
        })
    });
    group.bench_function(BenchmarkId::new("embed_need", "three_words"), |b| {
        b.iter(|| model.embed("read a file").unwrap())
    });
    group.bench_function(BenchmarkId::new("resolve", "1000_tools_three_words"), |b| {
        b.iter(|| picker.resolve("read a file").unwrap())
    });
    group.finish();
}

criterion_group!(picker, benches);
criterion_main!(picker);
