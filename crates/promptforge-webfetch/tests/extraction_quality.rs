//! Extraction quality on the benchmark's large real-world-shaped page: the readability
//! path keeps the article and drops the page furniture; the whole-page path keeps both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/support/page.rs"]
mod page;

use promptforge_webfetch::{Extraction, Rendering, html_to_markdown};

#[test]
fn readability_keeps_the_article_and_drops_the_furniture() {
    let html = page::realistic_page(20);
    let (md, how) = html_to_markdown(&html, Some("https://news.example/a"), Rendering::Article);
    assert_eq!(how, Extraction::Readability);
    assert!(md.contains("How Systems Languages Manage Memory"), "title");
    for s in 0..20 {
        assert!(
            md.contains(&format!("Part {s}:")),
            "section {s} heading kept"
        );
    }
    assert!(
        md.contains("| lang0 |") || md.contains("lang0"),
        "table kept"
    );
    assert!(md.contains("String::from"), "code kept");
    for furniture in [
        "Topic 3-4",
        "Footer link 7",
        "Popular story number 3",
        "Related story",
        "Subscribe for",
        "Copy link",
        "user3",
        "gtag(",
        "margin:",
    ] {
        assert!(!md.contains(furniture), "{furniture} should be dropped");
    }
    assert!(
        md.contains("(https://news.example/topics/"),
        "links are absolute"
    );
}

#[test]
fn whole_page_keeps_the_furniture_but_not_scripts_or_styles() {
    let html = page::realistic_page(5);
    let (md, how) = html_to_markdown(&html, Some("https://news.example/a"), Rendering::WholePage);
    assert_eq!(how, Extraction::RawHtml);
    assert!(md.contains("Topic 3-4") && md.contains("Footer link 7"));
    assert!(md.contains("Part 4:"));
    assert!(
        md.contains("(https://news.example/section/3/topic/4)"),
        "links are absolute"
    );
    assert!(!md.contains("gtag(") && !md.contains("margin:") && !md.contains("loadAd"));
}
