//! The trace viewer: one self-contained HTML file (no network, works from `file://`).
//!
//! [`html`] embeds a trace document in the page; [`live_html`] is the same page in live
//! mode, which reads `api/runs`, `api/runs/<n>` and the `api/events` server-sent events
//! relative to its own URL (what `promptforge-dev --ui` serves).
//!
//! The page carries its [`content_security_policy`] in a meta tag: scripts run only when
//! their text hashes to [`script_hash`] (the page's own inline script), so nothing a trace
//! holds can run as code even if it reached the page's markup. A server that serves the
//! page may send the same policy as a header.

use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

/// The page, with `/*PF_CSP*/` where the policy goes and `/*PF_DATA*/` where the boot data
/// goes.
const PAGE: &str = include_str!("viewer.html");

/// The marker the boot data replaces.
const SLOT: &str = "/*PF_DATA*/";

/// The marker the policy replaces (the meta tag's `content`).
const POLICY_SLOT: &str = "/*PF_CSP*/";

/// The opening tag of the page's one executable script (the boot data's element has
/// attributes, so it does not match).
const SCRIPT_OPEN: &str = "<script>";

/// What ends a script element.
const SCRIPT_CLOSE: &str = "</script>";

/// The page with its policy in place, and the policy's parts (computed once).
struct Template {
    hash: String,
    policy: String,
    page: String,
}

static TEMPLATE: LazyLock<Template> = LazyLock::new(|| {
    let digest = Sha256::digest(inline_script(PAGE).as_bytes());
    let hash = format!("'sha256-{}'", STANDARD.encode(digest));
    let policy = format!(
        "default-src 'none'; script-src {hash}; style-src 'unsafe-inline'; \
         connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'"
    );
    let page = PAGE.replacen(POLICY_SLOT, &policy, 1);
    Template { hash, policy, page }
});

/// The viewer page showing `document` (a trace file).
pub fn html(document: &Json) -> String {
    page(&json!({"mode": "file", "trace": document}))
}

/// The viewer page in live mode.
pub fn live_html() -> String {
    page(&json!({"mode": "live"}))
}

/// The page's `Content-Security-Policy`: nothing from the network but same-origin
/// requests (the live viewer's API), inline styles, and only the page's own script
/// ([`script_hash`]); no `'unsafe-inline'` for scripts. The same value is in the page's
/// meta tag; a server can send it as a header too.
pub fn content_security_policy() -> &'static str {
    &TEMPLATE.policy
}

/// The CSP source of the page's inline script: `'sha256-…'`, the base64 SHA-256 of exactly
/// the text between its `<script>` and `</script>`.
pub fn script_hash() -> &'static str {
    &TEMPLATE.hash
}

fn page(boot: &Json) -> String {
    // In a `<script type="application/json">` element only `</script` could end the data
    // early; JSON never has `<` outside strings, and inside strings `\u003c` means the same.
    // The data goes in its own element, so the executable script (and its hash) is the same
    // on every page.
    let data = boot.to_string().replace('<', "\\u003c");
    TEMPLATE.page.replacen(SLOT, &data, 1)
}

/// The text of the first `<script>` element without attributes in `page` (empty when
/// there is none: the policy then allows no script, and the tests fail).
fn inline_script(page: &str) -> &str {
    page.split_once(SCRIPT_OPEN)
        .and_then(|(_, rest)| rest.split_once(SCRIPT_CLOSE))
        .map_or("", |(script, _)| script)
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
    #[test]
    fn the_policy_allows_only_the_pages_own_script() {
        let policy = content_security_policy();
        let script_src = policy
            .split(';')
            .map(str::trim)
            .find(|d| d.starts_with("script-src "))
            .unwrap();
        assert_eq!(script_src, format!("script-src {}", script_hash()));
        assert!(!script_src.contains("unsafe"), "{script_src}");
        assert!(policy.starts_with("default-src 'none';"), "{policy}");
        // The hash is over exactly the bytes between `<script>` and `</script>` of the
        // page as served, with a trace in it (the data sits in its own element).
        let page = html(&json!({"spans": [{"name": "</script><script>x()</script>"}]}));
        let start = page.find("<script>\n").unwrap() + "<script>".len();
        let end = start + page[start..].find("</script>").unwrap();
        let digest = Sha256::digest(&page.as_bytes()[start..end]);
        assert_eq!(
            script_hash(),
            format!("'sha256-{}'", STANDARD.encode(digest))
        );
        assert!(page[start..end].contains("\"use strict\""));
        // The meta tag carries the policy, once, and no marker is left.
        let meta = format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">");
        assert_eq!(page.matches(&meta).count(), 1, "{}", &page[..600]);
        assert!(!page.contains(POLICY_SLOT) && !page.contains(SLOT));
        assert_eq!(
            PAGE.matches(SCRIPT_OPEN).count(),
            1,
            "one executable script"
        );
    }
}
