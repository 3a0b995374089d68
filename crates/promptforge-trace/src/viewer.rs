//! The trace viewer: one self-contained HTML file (no network, works from `file://`).
//!
//! [`html`] embeds a trace document in the page; [`live_html`] is the same page in live
//! mode, which reads `api/runs`, `api/runs/<n>` and the `api/events` server-sent events
//! relative to its own URL (what `promptforge-dev --ui` serves).

use serde_json::{Value as Json, json};

/// The page, with `/*PF_DATA*/` where the boot data goes.
const PAGE: &str = include_str!("viewer.html");

/// The marker the boot data replaces.
const SLOT: &str = "/*PF_DATA*/";

/// The viewer page showing `document` (a trace file).
pub fn html(document: &Json) -> String {
    page(&json!({"mode": "file", "trace": document}))
}

/// The viewer page in live mode.
pub fn live_html() -> String {
    page(&json!({"mode": "live"}))
}

fn page(boot: &Json) -> String {
    // In a `<script type="application/json">` element only `</script` could end the data
    // early; JSON never has `<` outside strings, and inside strings `\u003c` means the same.
    let data = boot.to_string().replace('<', "\\u003c");
    PAGE.replacen(SLOT, &data, 1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_document_is_embedded_once_and_cannot_close_its_script() {
        let doc = json!({"run": {"prompt": "</script><script>alert(1)</script>"}});
        let page = html(&doc);
        assert_eq!(
            page.matches("</script>").count(),
            PAGE.matches("</script>").count()
        );
        assert!(!page.contains(SLOT));
        let start = page.find("type=\"application/json\">").unwrap() + 24;
        let end = start + page[start..].find("</script>").unwrap();
        let boot: Json = serde_json::from_str(&page[start..end]).unwrap();
        assert_eq!(boot["trace"], doc);
        assert_eq!(boot["mode"], "file");
    }

    #[test]
    fn the_page_loads_nothing_from_the_network() {
        let page = live_html();
        for needle in ["http://", "https://", "src=\"//", "@import"] {
            assert!(!page.contains(needle), "the viewer references {needle}");
        }
        assert!(page.contains("\"mode\":\"live\""));
    }
}
