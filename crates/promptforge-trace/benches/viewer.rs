//! The viewer's load time for a 10,000-span trace in headless Chromium.
//!
//! Traces a 10,000-arm fanout (10,005 spans), writes the viewer page, and loads it five
//! times in a fresh headless Chromium (Debian's, through playwright-core, as the tests do):
//! "ready" is the page's own measure from its first script line to the first full render
//! (`body[data-load-ms]`), "navigation" the time `page.goto` took; then a click on a row
//! of the tree found with the filter (10,000 matches) and a switch to the Sections
//! and Store tabs, timed in the page. Prints one line per measure (median of the runs).
//! Needs `scripts/test.sh`'s Chromium and playwright-core.
#![allow(clippy::expect_used, clippy::print_stdout, missing_docs)]

use promptforge_core::trace::Tracer;
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
use promptforge_test_support::browser::Browser;
use serde_json::json;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let source = "---\nname: fan\ndescription: a traced pure-Lua fanout\npromptforge: 1\n---\n\n# Fan\n\n\
        ## Main\n\n```lua\nlocal items = {}\nfor i = 1, tonumber(args) do items[i] = i end\n\
        return #fanout(\"### Square\", items)\n```\n\n\
        ### Square\n\n```lua\nreturn item * item\n```\n";
    let prompt = Prompt::parse(source, "bench", &NullObserver).expect("parses");
    let tracer = Tracer::builder().source("fan.md", source).build();
    rt.block_on(run(
        &prompt,
        "10000",
        ResolutionContext::empty(),
        &StoreRef::memory(),
        RunConfig::new("bench").tracer(tracer.clone()),
    ))
    .expect("runs");
    let document = tracer.document();
    let spans = document["spans"].as_array().map_or(0, Vec::len);
    let dir = tempfile::tempdir().expect("temporary directory");
    let page = dir.path().join("trace.html");
    let failures = promptforge_trace::write::write_outputs(&document, None, Some(&page));
    assert!(failures.is_empty(), "{failures:?}");
    let bytes = std::fs::metadata(&page).map_or(0, |m| m.len());
    let browser = Browser::locate().expect("Chromium and playwright-core (scripts/test.sh)");
    let mut ready = Vec::new();
    let mut navigation = Vec::new();
    let mut interaction = Vec::new();
    for _ in 0..5 {
        let report = rt
            .block_on(browser.run(&json!([
                {"goto": format!("file://{}", page.display()), "as": "navigation"},
                {"wait": "body[data-ready='1']", "state": "attached"},
                {"attr": "body", "name": "data-load-ms", "as": "ready"},
                {"eval": "(async () => { const t = performance.now(); \
                    const f = document.getElementById('filter'); f.value = 'square'; f.dispatchEvent(new Event('input')); \
                    document.querySelector('#tree .row[data-kind=\"arm\"] .name').click(); \
                    document.querySelector(\"nav button[data-tab='sections']\").click(); \
                    document.querySelector(\"nav button[data-tab='store']\").click(); \
                    document.querySelector(\"nav button[data-tab='trace']\").click(); \
                    await new Promise(r => requestAnimationFrame(() => r())); \
                    return performance.now() - t; })()", "as": "interaction"},
            ])))
            .expect("the browser session runs");
        assert_eq!(report["errors"], json!([]), "{report}");
        ready.push(
            report["ready"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN),
        );
        navigation.push(report["navigation"].as_f64().unwrap_or(f64::NAN));
        interaction.push(report["interaction"].as_f64().unwrap_or(f64::NAN));
    }
    println!("viewer: {spans} spans, page {bytes} bytes, 5 loads in headless Chromium");
    println!(
        "viewer/ready (first script line to first render): {:.0} ms",
        median(ready)
    );
    println!(
        "viewer/navigation (page.goto): {:.0} ms",
        median(navigation)
    );
    println!(
        "viewer/interaction (filter, select, three tab switches): {:.0} ms",
        median(interaction)
    );
}
