//! HTML extraction: a readability pass rendered to Markdown, or the whole page.
//!
//! Both paths share one HTML5 parser (`dom_query`, on `html5ever`); `dom_smoothie` is a
//! port of Mozilla's readability.js on the same DOM, and `dom_query`'s Markdown serializer
//! renders either the isolated article or the whole `<body>`.

use std::fmt;

use dom_query::NodeRef;
use dom_smoothie::{Config, ParsePolicy, Readability, TextMode};

use crate::cleanup::{self, Dropped};
use crate::streaming;

/// An article shorter than this many characters falls back to the whole page.
pub const MIN_ARTICLE_CHARS: usize = 100;

/// The element `dom_smoothie` wraps the isolated article in.
const ARTICLE_ROOT: &str = "#readability-page-1";

/// Elements never rendered (with their contents): dropped from a whole-page render, and the
/// serializer's guard on the article (whose cleanup already removed them).
const NOT_RENDERED: &[&str] = &[
    "script", "style", "meta", "head", "noscript", "template", "svg", "iframe", "object", "embed",
    "canvas", "link",
];

/// Which processing path produced a fetch's text (the `extraction:` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extraction {
    /// The readability pass isolated an article.
    Readability,
    /// The whole HTML page was rendered ([`Rendering::WholePage`], or the article was too
    /// short).
    RawHtml,
    /// Non-HTML text, returned decoded and verbatim.
    Plain,
}

impl Extraction {
    /// The header value: `readability`, `raw-html` or `plain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Readability => "readability",
            Self::RawHtml => "raw-html",
            Self::Plain => "plain",
        }
    }
}

impl fmt::Display for Extraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an HTML page is rendered (the tool's `raw` argument, decided once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Rendering {
    /// A readability pass isolates the article; a page without one falls back to the
    /// whole page (`raw: false`, the default).
    #[default]
    Article,
    /// The readability pass's article as it stands, without the cleanup rules: captions,
    /// galleries, author boxes and link lists inside the article are kept, as readability.js
    /// keeps them (a [`crate::FetchConfig`] with `article_cleanup(false)`). A page without
    /// an article falls back to the whole page, as with [`Rendering::Article`].
    FullArticle,
    /// The whole page, with scripts, styles and embeds dropped (`raw: true`).
    WholePage,
}

impl Rendering {
    /// The rendering the tool's `raw` flag asks for.
    pub fn from_raw(raw: bool) -> Self {
        if raw { Self::WholePage } else { Self::Article }
    }
}

/// Renders an HTML page to Markdown. With [`Rendering::Article`] (or
/// [`Rendering::FullArticle`]) a readability pass isolates the article first; an article
/// under [`MIN_ARTICLE_CHARS`] characters (or a page the pass cannot read) falls back to
/// the whole page. `base_url` (absolute) resolves relative links.
pub fn html_to_markdown(
    html: &str,
    base_url: Option<&str>,
    rendering: Rendering,
) -> (String, Extraction) {
    let article = match rendering {
        Rendering::Article => readability_markdown(html, base_url),
        Rendering::FullArticle => full_article_markdown(html, base_url),
        Rendering::WholePage => None,
    };
    match article {
        Some(article) => (article, Extraction::Readability),
        None => (whole_page_markdown(html, base_url), Extraction::RawHtml),
    }
}

/// The readability path alone: `None` when no article of at least
/// [`MIN_ARTICLE_CHARS`] characters is found.
///
/// After readability picks the article element (widened to the sections' common container
/// when it holds one section of a longer article: the crate README, "Candidate
/// selection"), the content-level cleanup rules (see
/// the crate README, "Article cleanup") drop what that element holds besides the article:
/// captions and galleries, related-link lists, newsletter and author boxes, embedded
/// frames, repeated blocks, and the headline repeated as the first body line. The Markdown
/// then starts with `# Title` (when the page has a title) and the body.
pub fn readability_markdown(html: &str, base_url: Option<&str>) -> Option<String> {
    match article_markdown(html, base_url, Cleanup::Apply(None))? {
        Some(markdown) => Some(markdown),
        // the cleanup left less than an article: the uncleaned article beats the whole page
        None => full_article_markdown(html, base_url),
    }
}

/// The readability path without the cleanup rules ([`Rendering::FullArticle`]): the
/// article element chosen exactly as [`readability_markdown`] chooses it, rendered whole.
/// `None` when no article of at least [`MIN_ARTICLE_CHARS`] characters is found.
pub fn full_article_markdown(html: &str, base_url: Option<&str>) -> Option<String> {
    article_markdown(html, base_url, Cleanup::Skip).flatten()
}

/// What the article cleanup did to a page's readability article: for diagnosing and
/// measuring the rules (the comparison script's per-rule table), not needed to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupExplanation {
    /// The Markdown the article path returns ([`readability_markdown`]).
    pub markdown: String,
    /// The article before the cleanup, as Markdown (title line included).
    pub uncleaned: String,
    /// Every element the rules removed, in the order they removed them.
    pub dropped: Vec<Dropped>,
    /// `false` when the rules would have left under [`MIN_ARTICLE_CHARS`] characters, so
    /// the uncleaned article is returned and `dropped` did not take effect.
    pub applied: bool,
}

/// The article path with its cleanup explained: `None` when readability finds no article
/// of at least [`MIN_ARTICLE_CHARS`] characters (the tool then renders the whole page).
pub fn explain_cleanup(html: &str, base_url: Option<&str>) -> Option<CleanupExplanation> {
    let uncleaned = article_markdown(html, base_url, Cleanup::Skip)??;
    let mut dropped = Vec::new();
    let cleaned = article_markdown(html, base_url, Cleanup::Apply(Some(&mut dropped)))?;
    Some(CleanupExplanation {
        applied: cleaned.is_some(),
        markdown: cleaned.unwrap_or_else(|| uncleaned.clone()),
        uncleaned,
        dropped,
    })
}

/// Whether a readability pass runs the cleanup rules, recording what they drop.
enum Cleanup<'t> {
    Skip,
    Apply(Option<&'t mut Vec<Dropped>>),
}

/// One readability pass. `None` when readability finds nothing; `Some(None)` when the
/// article (after the cleanup, when applied) is under [`MIN_ARTICLE_CHARS`].
fn article_markdown(
    html: &str,
    base_url: Option<&str>,
    cleanup: Cleanup<'_>,
) -> Option<Option<String>> {
    let cfg = || Config {
        // the cleanup rules read `class` / `id` words; the Markdown never shows them
        keep_classes: true,
        text_mode: TextMode::Raw,
        ..Config::default()
    };
    // the parts of a page streamed by server rendering, put where a browser's scripts move
    // them (readability reads each pass's own parse)
    let streamed = streaming::may_have_streamed_segments(html);
    let new_reader = || {
        let reader = Readability::new(html, base_url, Some(cfg()))
            .or_else(|_| Readability::new(html, None, Some(cfg())))
            .ok()?;
        if streamed {
            streaming::reveal_streamed_segments(&reader.doc);
        }
        let page_prose = reader
            .doc
            .select_single("body")
            .nodes()
            .first()
            .map_or(0, cleanup::prepare_page);
        Some((reader, page_prose))
    };
    let (mut reader, page_prose) = new_reader()?;
    let headings = first_headings(&reader.doc);
    let article = reader.parse().ok()?;
    let first = chosen_root(&reader, page_prose)?;
    let weak = (first.prose as f64) < RETRY_BELOW_PROSE_SHARE * page_prose as f64;
    // readability's cleaning (its class weights, rather) threw the article away: once more
    // without class weights, the unlikely candidates stripped as before
    let retry = weak
        .then(|| {
            let (mut other, _) = new_reader()?;
            if let Some(body) = other.doc.select_single("body").nodes().first() {
                cleanup::strip_unlikely(body, page_prose);
            }
            let found = other.parse_with_policy(ParsePolicy::Clean).ok()?;
            Some((other, found))
        })
        .flatten();
    let (
        Chosen {
            picked, container, ..
        },
        article,
    ) = match retry
        .as_ref()
        .and_then(|(other, found)| Some((chosen_root(other, page_prose)?, found)))
    {
        Some((second, found))
            if second.prose > 0 && second.prose as f64 >= RETRY_MIN_GAIN * first.prose as f64 =>
        {
            (second, found)
        }
        _ => (first, &article),
    };
    if article.text_content.trim().chars().count() < MIN_ARTICLE_CHARS {
        return None;
    }
    let root = match container {
        Some(container) => {
            restore_order(&picked, html, streamed);
            absolute_links(&container, base_url);
            container
        }
        None => picked,
    };
    let root = &root;
    let title = site_free_title(article.title.trim(), &headings);
    if let Cleanup::Apply(trace) = cleanup {
        let facts = cleanup::ArticleFacts {
            title,
            authors: article
                .byline
                .as_deref()
                .map(cleanup::author_names)
                .unwrap_or_default(),
        };
        cleanup::clean_article(root, &facts, trace);
    }
    let markdown = root.md(Some(NOT_RENDERED));
    let body = markdown.trim();
    if body.chars().count() < MIN_ARTICLE_CHARS {
        return Some(None);
    }
    Some(Some(if title.is_empty() {
        body.to_owned()
    } else {
        format!("# {title}\n\n{body}")
    }))
}

/// A second readability pass runs when the first one's article (widened as
/// [`cleanup::prose_container`] says) holds under this share of the page's prose.
const RETRY_BELOW_PROSE_SHARE: f64 = 0.5;

/// The second pass's article replaces the first's when it holds at least this many times
/// its prose.
const RETRY_MIN_GAIN: f64 = 2.0;

/// What a readability pass chose to render.
struct Chosen<'d> {
    /// Readability's article element.
    picked: NodeRef<'d>,
    /// The wider element to render instead, if any ([`cleanup::prose_container`]).
    container: Option<NodeRef<'d>>,
    /// The prose (characters of body paragraphs) of what would be rendered.
    prose: usize,
}

/// What `reader` (after its pass) would render: `None` when it has no article element.
/// An article holding most of the page's prose gets the sections of the article before it
/// that readability left out ([`cleanup::lead_sections`]), put first in it; one holding less
/// may be widened ([`cleanup::prose_container`]).
/// `page_prose` is the page's prose before readability: an article holding
/// [`cleanup::ARTICLE_MIN_PROSE_SHARE`] of it holds at least that share of what readability
/// left, so the page is not measured again.
fn chosen_root(reader: &Readability, page_prose: usize) -> Option<Chosen<'_>> {
    let picked = *reader.doc.select_single(ARTICLE_ROOT).nodes().first()?;
    let own = cleanup::prose_chars(&picked);
    let body = reader.doc.select_single("body").nodes().first().copied();
    if own as f64 >= cleanup::ARTICLE_MIN_PROSE_SHARE * page_prose as f64 {
        // the article's first sections, when readability took a later one (only a page
        // with enough prose outside the article can have them: most pages skip the census)
        let room = page_prose.saturating_sub(own) >= cleanup::LEAD_MIN_PROSE;
        let leads = match body {
            Some(body) if room => cleanup::lead_sections(&body, &picked),
            _ => Vec::new(),
        };
        for lead in leads.iter().rev() {
            picked.prepend_child(lead);
        }
        return Some(Chosen {
            picked,
            container: None,
            prose: if leads.is_empty() {
                own
            } else {
                cleanup::prose_chars(&picked)
            },
        });
    }
    let container = body.and_then(|body| cleanup::prose_container(&body, &picked));
    let prose = container.as_ref().map_or(own, cleanup::prose_chars);
    Some(Chosen {
        picked,
        container,
        prose,
    })
}

/// How many of the page's `<h1>` texts are kept to refine the title.
const TITLE_HEADINGS: usize = 5;

/// The text of the page's first `<h1>` elements, whitespace collapsed.
fn first_headings(doc: &dom_query::Document) -> Vec<String> {
    doc.select("h1")
        .nodes()
        .iter()
        .take(TITLE_HEADINGS)
        .map(|h| h.text().split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|t| !t.is_empty())
        .collect()
}

/// The page title without the site's name: when the `<title>` is a page heading plus a
/// separator and more (`Council expands bus network | Daily Example`, `Daily Example - Council
/// expands bus network`), the heading alone.
fn site_free_title<'a>(title: &'a str, headings: &'a [String]) -> &'a str {
    const SEPARATORS: &[char] = &[
        '|', '-', '\u{2013}', '\u{2014}', ':', '\u{00bb}', '\u{00b7}', '/', '~',
    ];
    let lower = title.to_lowercase();
    for heading in headings {
        let h = heading.to_lowercase();
        if h.len() >= title.len() || h.split_whitespace().count() < 2 {
            continue;
        }
        let site_after = lower
            .strip_prefix(&h)
            .is_some_and(|rest| rest.trim_start().starts_with(SEPARATORS));
        let site_before = lower
            .strip_suffix(&h)
            .is_some_and(|rest| rest.trim_end().ends_with(SEPARATORS));
        if site_after || site_before {
            return heading;
        }
    }
    title
}

/// The whole-page path: the document rendered to Markdown, without scripts, styles and
/// other non-content elements. Links and images are made absolute against `base_url`, and
/// the parts of a page streamed by server rendering are first put where a browser's
/// scripts would move them (the crate README, "Candidate selection").
pub fn whole_page_markdown(html: &str, base_url: Option<&str>) -> String {
    let doc = dom_query::Document::from(html);
    if streaming::may_have_streamed_segments(html) {
        streaming::reveal_streamed_segments(&doc);
    }
    if let Some(root) = doc.root().first_element_child() {
        absolute_links(&root, base_url);
    }
    doc.md(Some(NOT_RENDERED)).trim().to_owned()
}

/// Puts the blocks readability gathered into `article` back where they stood in the page.
///
/// Readability moves its top candidate and the siblings it joins into a new element at the
/// end of their parent; when a wider container is rendered instead, that would move one
/// section of the article behind the others. A fresh parse of the same `html` has the
/// same node ids, so each block goes back after the nearest of its former previous
/// siblings still in that parent (or first, when none is). Elements readability made
/// itself (not in the fresh parse) stay where they are, as does the article element if anything
/// is left in it. `streamed`: the streamed parts were put in place before readability ran, so
/// they are put in place in the fresh parse too (moving nodes keeps their ids).
fn restore_order(article: &dom_query::NodeRef<'_>, html: &str, streamed: bool) {
    let Some(parent) = article.parent() else {
        return;
    };
    let pristine = dom_query::Document::from(html);
    if streamed {
        streaming::reveal_streamed_segments(&pristine);
    }
    for block in article.element_children() {
        let before = dom_query::NodeRef::new(block.id, &pristine.tree);
        if !before.is_element() {
            // past the fresh parse's nodes: an element readability made
            continue;
        }
        let mut anchor = before.prev_sibling();
        let mut placed = false;
        while let Some(prev) = anchor {
            let now = dom_query::NodeRef::new(prev.id, article.tree);
            if now.parent().is_some_and(|p| p.id == parent.id) {
                now.insert_after(&block);
                placed = true;
                break;
            }
            anchor = prev.prev_sibling();
        }
        if !placed {
            parent.prepend_child(&block);
        }
    }
    if article.children().is_empty() {
        article.remove_from_parent();
    }
}

/// Makes the links and images under `root` absolute against `base_url` (readability does
/// this for its own article only).
fn absolute_links(root: &dom_query::NodeRef<'_>, base_url: Option<&str>) {
    let Some(base) = base_url.and_then(|b| url::Url::parse(b).ok()) else {
        return;
    };
    let root = dom_query::Selection::from(*root);
    for (selector, attr) in [("a[href]", "href"), ("img[src]", "src")] {
        for node in root.select(selector).nodes() {
            let Some(value) = node.attr(attr) else {
                continue;
            };
            if let Ok(abs) = base.join(value.trim()) {
                node.set_attr(attr, abs.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARTICLE: &str = r#"<!doctype html><html><head><title>Rust Ownership</title>
<style>p { color: red }</style><script>var tracker = 1;</script></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Rust Ownership</h1>
<p>Ownership is a set of rules that govern how a Rust program manages memory. All programs
have to manage the way they use a computer's memory while running.</p>
<p>Some languages have garbage collection that regularly looks for no-longer-used memory as
the program runs; in other languages, the programmer must explicitly allocate and free the
memory. Rust uses a third approach: memory is managed through a system of ownership with a
set of rules that the compiler checks.</p>
<p>If any of the rules are violated, the program won't compile. None of the features of
ownership will slow down your program while it's running. See <a href="/book/ch04">the
chapter</a>.</p></article>
<footer>Copyright footer text</footer></body></html>"#;

    #[test]
    fn article_is_isolated_and_rendered() {
        let (md, how) = html_to_markdown(
            ARTICLE,
            Some("https://example.com/post"),
            Rendering::Article,
        );
        assert_eq!(how, Extraction::Readability);
        assert!(md.contains("Ownership is a set of rules"), "{md}");
        assert!(md.contains("Rust Ownership"), "{md}");
        assert!(md.contains("(https://example.com/book/ch04)"), "{md}");
        assert!(!md.contains("tracker"), "{md}");
        assert!(!md.contains("Copyright footer"), "{md}");
    }

    #[test]
    fn raw_renders_the_whole_page_without_scripts() {
        let (md, how) = html_to_markdown(
            ARTICLE,
            Some("https://example.com/post"),
            Rendering::WholePage,
        );
        assert_eq!(how, Extraction::RawHtml);
        assert!(md.contains("Copyright footer"), "{md}");
        assert!(md.contains("Home"), "{md}");
        assert!(
            !md.contains("tracker") && !md.contains("color: red"),
            "{md}"
        );
    }

    #[test]
    fn short_article_falls_back_to_whole_page() {
        let html = "<html><body><table><tr><td>Plan</td><td>Price</td></tr>\
                    <tr><td>Pro</td><td>$10</td></tr></table></body></html>";
        for rendering in [Rendering::Article, Rendering::FullArticle] {
            let (md, how) = html_to_markdown(html, None, rendering);
            assert_eq!(how, Extraction::RawHtml, "{rendering:?}");
            assert!(md.contains("Pro") && md.contains("$10"), "{md}");
        }
    }

    #[test]
    fn the_site_name_leaves_the_title_when_a_heading_says_the_rest() {
        let h = vec!["Council expands bus network".to_owned()];
        assert_eq!(
            site_free_title("Council expands bus network | Daily Example", &h),
            "Council expands bus network"
        );
        assert_eq!(
            site_free_title("Daily Example \u{2013} Council expands bus network", &h),
            "Council expands bus network"
        );
        assert_eq!(
            site_free_title("Council expands bus network", &h),
            "Council expands bus network"
        );
        let other = vec!["Something else".to_owned()];
        assert_eq!(
            site_free_title("Council expands bus network | Daily Example", &other),
            "Council expands bus network | Daily Example"
        );
        // a heading that merely starts the title is not a site split
        let short = vec!["Council expands".to_owned()];
        assert_eq!(
            site_free_title("Council expands bus network", &short),
            "Council expands bus network"
        );
    }

    #[test]
    fn extraction_names() {
        assert_eq!(Extraction::Readability.to_string(), "readability");
        assert_eq!(Extraction::RawHtml.to_string(), "raw-html");
        assert_eq!(Extraction::Plain.to_string(), "plain");
    }
}
