//! The viewer page in headless Chromium (Debian's, through playwright-core): the store as
//! it was after a `str_replace` whose text holds JavaScript's replacement patterns, deep
//! links that name no tab, step or line, and the Content-Security-Policy (the page's own
//! script runs, a script injected into the page does not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use promptforge_core::trace::Tracer;
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
use promptforge_test_support::browser::Browser;
use serde_json::{Value, json};

/// `$&`, `` $` ``, `$'` and `$$` mean something to `String.prototype.replace`; in a store
/// they are just text.
const NEW_TEXT: &str = "[$&|$`|$'|$$]";

const PROMPT: &str = r#"---
name: patterns
description: a store change whose text holds replacement patterns
promptforge: 1
---

# Patterns

```lua
store.write("f.txt", "A-B-C")
store.str_replace("f.txt", "B", args)
store.write("g.txt", "second")
return store.read("f.txt")
```
"#;

/// Runs the prompt traced and writes its viewer page into `dir`.
async fn viewer_page(dir: &Path) -> PathBuf {
    let prompt = Prompt::parse(PROMPT, "viewer-test", &NullObserver).unwrap();
    let tracer = Tracer::builder().source("patterns.md", PROMPT).build();
    let result = run(
        &prompt,
        NEW_TEXT,
        ResolutionContext::empty(),
        &StoreRef::memory(),
        RunConfig::new("viewer-test").tracer(tracer.clone()),
    )
    .await
    .unwrap();
    assert_eq!(result, format!("A-{NEW_TEXT}-C"));
    let page = dir.join("trace.html");
    let failures = promptforge_trace::write::write_outputs(&tracer.document(), None, Some(&page));
    assert!(failures.is_empty(), "{failures:?}");
    page
}

async fn session(steps: Value) -> Value {
    Browser::locate().unwrap().run(&steps).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_after_a_str_replace_holds_its_text_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", viewer_page(dir.path()).await.display());
    let report = session(json!([
        {"goto": format!("{url}#tab=store&step=2")},
        {"wait": "body[data-ready='1']", "state": "attached"},
        {"text": "#store-view h2", "as": "heading"},
        {"texts": "#store-view .diff .add", "as": "added"},
        {"text": "#store-view pre", "as": "contents"},
    ]))
    .await;
    assert_eq!(report["errors"], json!([]), "{report}");
    assert_eq!(
        report["heading"], "Store after change #2: str_replace f.txt",
        "{report}"
    );
    assert_eq!(
        report["added"],
        json!([format!("A-{NEW_TEXT}-C")]),
        "{report}"
    );
    assert_eq!(report["contents"], format!("A-{NEW_TEXT}-C"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_links_naming_nothing_still_show_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", viewer_page(dir.path()).await.display());
    let mut steps = Vec::new();
    // A tab that does not exist, or is an Object.prototype property: the trace tab.
    for (i, hash) in [
        "tab=nope",
        "tab=__proto__",
        "tab=constructor&span=__proto__",
    ]
    .iter()
    .enumerate()
    {
        steps.extend([
            json!({"goto": "about:blank"}),
            json!({"goto": format!("{url}#{hash}")}),
            json!({"wait": "body[data-ready='1']", "state": "attached"}),
            json!({"count": "#tree .row", "as": format!("rows{i}")}),
        ]);
    }
    // A store step out of range, or no number at all: the last step.
    for (i, hash) in [
        "tab=store&step=-5",
        "tab=store&step=abc",
        "tab=store&step=0",
    ]
    .iter()
    .enumerate()
    {
        steps.extend([
            json!({"goto": "about:blank"}),
            json!({"goto": format!("{url}#{hash}")}),
            json!({"wait": "body[data-ready='1']", "state": "attached"}),
            json!({"text": "#store-view h2", "as": format!("store{i}")}),
        ]);
    }
    // A bad line on the source tab, and a bad tab arriving after the page loaded.
    steps.extend([
        json!({"goto": "about:blank"}),
        json!({"goto": format!("{url}#tab=source&line=-3")}),
        json!({"wait": "body[data-ready='1']", "state": "attached"}),
        json!({"count": "#source .src div", "as": "source_lines"}),
        json!({"eval": "new Promise(done => { addEventListener('hashchange', () => \
            requestAnimationFrame(() => done(document.querySelectorAll('#source .src div').length)), \
            { once: true }); location.hash = '#tab=__proto__&line=x'; })", "as": "after_change"}),
    ]);
    let report = session(Value::Array(steps)).await;
    assert_eq!(report["errors"], json!([]), "{report}");
    for i in 0..3 {
        assert!(report[format!("rows{i}")].as_u64().unwrap() > 0, "{report}");
        assert_eq!(
            report[format!("store{i}")],
            "Store after change #3: write g.txt",
            "{report}"
        );
    }
    let lines = PROMPT.split('\n').count() as u64;
    assert_eq!(report["source_lines"], lines, "{report}");
    assert_eq!(report["after_change"], lines, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_runs_the_pages_script_and_refuses_an_injected_one() {
    let policy = promptforge_trace::viewer::content_security_policy();
    let script_src = policy
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("script-src"))
        .unwrap();
    assert!(!script_src.contains("'unsafe-inline'"), "{policy}");
    let dir = tempfile::tempdir().unwrap();
    let page = viewer_page(dir.path()).await;
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!("content=\"{policy}\"")));
    // What a markup injection would add: a script of its own.
    let injected = dir.path().join("injected.html");
    std::fs::write(
        &injected,
        html.replacen(
            "</body>",
            "<script>document.documentElement.dataset.injected = '1';</script></body>",
            1,
        ),
    )
    .unwrap();
    let report = session(json!([
        {"goto": format!("file://{}", page.display())},
        {"wait": "body[data-ready='1']", "state": "attached"},
        {"count": "#tree .row", "as": "rows"},
        {"goto": format!("file://{}", injected.display())},
        {"wait": "body[data-ready='1']", "state": "attached"},
        {"attr": "html", "name": "data-injected", "as": "injected"},
        {"count": "#tree .row", "as": "rows_injected"},
    ]))
    .await;
    assert!(report["rows"].as_u64().unwrap() > 0, "{report}");
    assert!(report["rows_injected"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["injected"], Value::Null, "{report}");
    // The one error is the browser refusing the injected script.
    let errors = report["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{report}");
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .contains("Content Security Policy"),
        "{report}"
    );
}
