//! HTML extraction: a readability pass rendered to Markdown, or the whole page.
//!
//! Both paths share one HTML5 parser (`dom_query`, on `html5ever`); `dom_smoothie` is a
//! port of Mozilla's readability.js on the same DOM, and `dom_query`'s Markdown serializer
//! renders either the isolated article or the whole `<body>`.

use std::fmt;

use dom_smoothie::{Config, Readability, TextMode};

/// An article shorter than this many characters falls back to the whole page.
pub const MIN_ARTICLE_CHARS: usize = 100;

/// Elements dropped (with their contents) from a whole-page render.
const RAW_SKIP: &[&str] = &[
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
    /// The whole page, with scripts, styles and embeds dropped (`raw: true`).
    WholePage,
}

impl Rendering {
    /// The rendering the tool's `raw` flag asks for.
    pub fn from_raw(raw: bool) -> Self {
        if raw { Self::WholePage } else { Self::Article }
    }
}

/// Renders an HTML page to Markdown. With [`Rendering::Article`] a readability pass
/// isolates the article first; an article under [`MIN_ARTICLE_CHARS`] characters (or a
/// page the pass cannot read) falls back to the whole page. `base_url` (absolute) resolves
/// relative links.
pub fn html_to_markdown(
    html: &str,
    base_url: Option<&str>,
    rendering: Rendering,
) -> (String, Extraction) {
    if rendering == Rendering::Article
        && let Some(article) = readability_markdown(html, base_url)
    {
        return (article, Extraction::Readability);
    }
    (whole_page_markdown(html, base_url), Extraction::RawHtml)
}

/// The readability path alone: `None` when no article of at least
/// [`MIN_ARTICLE_CHARS`] characters is found.
pub fn readability_markdown(html: &str, base_url: Option<&str>) -> Option<String> {
    let cfg = Config {
        text_mode: TextMode::Markdown,
        ..Config::default()
    };
    let mut reader = Readability::new(html, base_url, Some(cfg))
        .or_else(|_| {
            Readability::new(
                html,
                None,
                Some(Config {
                    text_mode: TextMode::Markdown,
                    ..Config::default()
                }),
            )
        })
        .ok()?;
    let article = reader.parse().ok()?;
    let body = article.text_content.trim();
    if body.chars().count() < MIN_ARTICLE_CHARS {
        return None;
    }
    let title = article.title.trim();
    if title.is_empty()
        || body.starts_with('#') && body.lines().next().is_some_and(|l| l.contains(title))
    {
        Some(body.to_owned())
    } else {
        Some(format!("# {title}\n\n{body}"))
    }
}

/// The whole-page path: the document rendered to Markdown, without scripts, styles and
/// other non-content elements. Links and images are made absolute against `base_url`.
pub fn whole_page_markdown(html: &str, base_url: Option<&str>) -> String {
    let doc = dom_query::Document::from(html);
    if let Some(base) = base_url.and_then(|b| url::Url::parse(b).ok()) {
        for (selector, attr) in [("a[href]", "href"), ("img[src]", "src")] {
            for node in doc.select(selector).nodes() {
                let Some(value) = node.attr(attr) else {
                    continue;
                };
                if let Ok(abs) = base.join(value.trim()) {
                    node.set_attr(attr, abs.as_str());
                }
            }
        }
    }
    doc.md(Some(RAW_SKIP)).trim().to_owned()
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
        let (md, how) = html_to_markdown(html, None, Rendering::Article);
        assert_eq!(how, Extraction::RawHtml);
        assert!(md.contains("Pro") && md.contains("$10"), "{md}");
    }

    #[test]
    fn extraction_names() {
        assert_eq!(Extraction::Readability.to_string(), "readability");
        assert_eq!(Extraction::RawHtml.to_string(), "raw-html");
        assert_eq!(Extraction::Plain.to_string(), "plain");
    }
}
