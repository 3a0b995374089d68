//! Extraction throughput on a large real-world-shaped HTML page: the readability path and
//! the whole-page path, reported in bytes of HTML per second.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

#[path = "support/page.rs"]
mod page;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use promptforge_webfetch::{Extraction, Rendering, html_to_markdown};

fn extraction(c: &mut Criterion) {
    let html = page::realistic_page(160);
    let url = Some("https://news.example/2025/03/01/memory");
    let (md, how) = html_to_markdown(&html, url, Rendering::Article);
    assert_eq!(how, Extraction::Readability);
    println!(
        "page: {} bytes of HTML -> {} chars of article Markdown",
        html.len(),
        md.chars().count()
    );
    let mut group = c.benchmark_group("extraction");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(html.len() as u64));
    group.bench_function("readability", |b| {
        b.iter(|| html_to_markdown(black_box(&html), url, Rendering::Article))
    });
    group.bench_function("raw-html", |b| {
        b.iter(|| html_to_markdown(black_box(&html), url, Rendering::WholePage))
    });
    group.finish();
}

criterion_group!(benches, extraction);
criterion_main!(benches);
