//! Post-processing of provider results, in the guide's fixed order: sanitize text, strip
//! tracking parameters, set `site_name`, apply the domain filters, diversify by host, cap
//! at `count`. Over-long URLs are dropped whole, never truncated.

use std::collections::HashMap;

use super::request::Search;

/// URLs longer than this are dropped.
pub(crate) const MAX_URL_LEN: usize = 2048;

/// One result as the provider gave it (already trimmed to the fields we keep).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RawHit {
    /// Title (may hold HTML).
    pub title: String,
    /// Result URL.
    pub url: String,
    /// Snippet (may hold HTML).
    pub description: String,
    /// Provider's age string, e.g. "2 days ago".
    pub age: Option<String>,
    /// Extra snippets, when the provider sends them.
    pub extra_snippets: Vec<String>,
}

/// One result as returned to the caller.
pub(crate) use promptforge_wire::WebSearchHit as Hit;

/// Runs the whole pipeline.
pub(crate) fn process(
    hits: Vec<RawHit>,
    search: &Search,
    max_per_host: usize,
    strip_tracking: bool,
) -> Vec<Hit> {
    // 1. Sanitize text.
    let hits = hits.into_iter().map(|h| RawHit {
        title: sanitize(&h.title),
        description: sanitize(&h.description),
        age: h.age.map(|a| sanitize(&a)).filter(|a| !a.is_empty()),
        extra_snippets: h
            .extra_snippets
            .iter()
            .map(|s| sanitize(s))
            .filter(|s| !s.is_empty())
            .collect(),
        url: h.url,
    });
    // 2. Strip tracking parameters (and drop unusable or over-long URLs whole).
    let hits = hits.filter_map(|h| {
        let mut url = reqwest::Url::parse(h.url.trim()).ok()?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return None;
        }
        if strip_tracking {
            strip_tracking_params(&mut url);
        }
        let url = String::from(url);
        (url.len() <= MAX_URL_LEN).then_some(RawHit { url, ..h })
    });
    // 3. Set site_name.
    let hits = hits.filter_map(|h| {
        let host = reqwest::Url::parse(&h.url)
            .ok()?
            .host_str()?
            .to_ascii_lowercase();
        let site_name = host.strip_prefix("www.").unwrap_or(&host).to_owned();
        Some((
            host,
            Hit {
                title: h.title,
                url: h.url,
                description: h.description,
                age: h.age,
                site_name,
                extra_snippets: h.extra_snippets,
            },
        ))
    });
    // 4. Domain filters.
    let hits = hits.filter(|(host, _)| {
        (search.domains_include.is_empty()
            || search.domains_include.iter().any(|d| host_matches(host, d)))
            && !search.domains_exclude.iter().any(|d| host_matches(host, d))
    });
    // 5. Diversify by host.
    let mut per_host: HashMap<String, usize> = HashMap::new();
    let hits = hits.filter(|(_, hit)| {
        let seen = per_host.entry(hit.site_name.clone()).or_default();
        *seen += 1;
        *seen <= max_per_host
    });
    // 6. Cap.
    hits.map(|(_, hit)| hit).take(search.count).collect()
}

/// A host matches a domain when it equals it or ends with `.<domain>`.
pub(crate) fn host_matches(host: &str, domain: &str) -> bool {
    host == domain
        || host
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

fn is_tracking(key: &str) -> bool {
    const EXACT: [&str; 12] = [
        "fbclid",
        "gclid",
        "gclsrc",
        "dclid",
        "msclkid",
        "yclid",
        "igshid",
        "twclid",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "li_fat_id",
    ];
    let key = key.to_ascii_lowercase();
    key.starts_with("utm_") || key.starts_with("mc_") || EXACT.contains(&key.as_str())
}

fn strip_tracking_params(url: &mut reqwest::Url) {
    if url.query().is_none() {
        return;
    }
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| !is_tracking(k))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
}

/// Removes tags, decodes entities, drops control characters, collapses whitespace.
pub(crate) fn sanitize(text: &str) -> String {
    let mut without_tags = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => without_tags.push(c),
            _ => {}
        }
    }
    let decoded = decode_entities(&without_tags);
    let mut out = String::with_capacity(decoded.len());
    for word in decoded
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        let decoded = after.find(';').filter(|end| *end <= 10).and_then(|end| {
            let name = &after[1..end];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => name
                    .strip_prefix("#x")
                    .or_else(|| name.strip_prefix("#X"))
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .or_else(|| name.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                    .and_then(char::from_u32),
            }?;
            Some((c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes() {
        assert_eq!(
            sanitize("  <strong>Rust</strong> &amp; async\n\t&#39;runtimes&#x27; &lt;3 "),
            "Rust & async 'runtimes' <3"
        );
        assert_eq!(sanitize("a &bogus; b & c"), "a &bogus; b & c");
        assert_eq!(sanitize("x\u{0007}y"), "x y");
    }

    #[test]
    fn strips_tracking_parameters() {
        let mut url =
            reqwest::Url::parse("https://a.com/p?utm_source=x&id=3&fbclid=y&MC_eid=z#frag")
                .unwrap();
        strip_tracking_params(&mut url);
        assert_eq!(url.as_str(), "https://a.com/p?id=3#frag");
        let mut url = reqwest::Url::parse("https://a.com/p?utm_medium=x&gclid=1").unwrap();
        strip_tracking_params(&mut url);
        assert_eq!(url.as_str(), "https://a.com/p");
    }

    #[test]
    fn host_matching() {
        assert!(host_matches("example.com", "example.com"));
        assert!(host_matches("docs.example.com", "example.com"));
        assert!(!host_matches("badexample.com", "example.com"));
        assert!(!host_matches("example.com.evil.org", "example.com"));
    }
}
