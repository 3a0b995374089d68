//! A large, deterministic, real-world-shaped HTML page: a news article with the usual
//! clutter (inline scripts and styles, JSON-LD, a mega-menu, sidebars, share widgets, ad
//! slots, a comment thread, a fat footer) around a long article body with headings,
//! paragraphs, lists, tables, code, quotes, figures and inline links.

const WORDS: &[&str] = &[
    "memory",
    "ownership",
    "borrow",
    "compiler",
    "safety",
    "thread",
    "runtime",
    "latency",
    "network",
    "request",
    "response",
    "cache",
    "storage",
    "index",
    "query",
    "server",
    "client",
    "protocol",
    "buffer",
    "stream",
    "parser",
    "token",
    "schema",
    "deploy",
    "cluster",
    "replica",
    "metric",
    "trace",
    "budget",
    "policy",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "with",
    "as",
    "on",
    "by",
    "this",
    "we",
    "it",
    "from",
];

/// A tiny deterministic generator (xorshift), so every run measures the same page.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn sentence(&mut self, words: usize) -> String {
        let mut s = String::new();
        for i in 0..words {
            let w = WORDS[self.below(WORDS.len())];
            if i == 0 {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    s.extend(f.to_uppercase());
                    s.push_str(c.as_str());
                }
            } else {
                s.push(' ');
                if self.below(12) == 0 {
                    s.push_str(&format!("<a href=\"/topics/{w}\">{w}</a>"));
                } else if self.below(20) == 0 {
                    s.push_str(&format!("<em>{w}</em>"));
                } else {
                    s.push_str(w);
                }
            }
        }
        s.push('.');
        s
    }

    fn paragraph(&mut self) -> String {
        let n = 3 + self.below(4);
        let body: Vec<String> = (0..n)
            .map(|_| {
                let w = 12 + self.below(14);
                self.sentence(w)
            })
            .collect();
        format!("<p>{}</p>\n", body.join(" "))
    }
}

/// Builds the page; `sections` scales it (about 5.5 KB of HTML per section; 160 sections
/// make a 905,123-byte page).
pub(crate) fn realistic_page(sections: usize) -> String {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut h = String::with_capacity(sections * 20_000);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str("<title>How Systems Languages Manage Memory - The Daily Byte</title>\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<meta property=\"og:title\" content=\"How Systems Languages Manage Memory\">\n");
    h.push_str("<link rel=\"stylesheet\" href=\"/static/site.css\">\n<style>\n");
    for i in 0..200 {
        h.push_str(&format!(
            ".c{i}{{margin:{i}px;padding:0 {}px;color:#{:06x}}}\n",
            i % 17,
            i * 4099
        ));
    }
    h.push_str("</style>\n<script type=\"application/ld+json\">{\"@context\":\"https://schema.org\",\"@type\":\"NewsArticle\",\"headline\":\"How Systems Languages Manage Memory\",\"author\":{\"@type\":\"Person\",\"name\":\"Ada Writer\"},\"datePublished\":\"2025-03-01T08:00:00Z\"}</script>\n");
    h.push_str(
        "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}",
    );
    for i in 0..300 {
        h.push_str(&format!(
            "gtag('event','impression_{i}',{{slot:{i},value:{}}});",
            i * 7
        ));
    }
    h.push_str("</script>\n</head>\n<body class=\"article-page\">\n");
    h.push_str("<header class=\"site-header\"><a class=\"logo\" href=\"/\">The Daily Byte</a>\n<nav class=\"mega-menu\"><ul>\n");
    for s in 0..12 {
        h.push_str(&format!(
            "<li class=\"menu-section\"><a href=\"/section/{s}\">Section {s}</a><ul>"
        ));
        for t in 0..15 {
            h.push_str(&format!(
                "<li><a href=\"/section/{s}/topic/{t}\">Topic {s}-{t}</a></li>"
            ));
        }
        h.push_str("</ul></li>\n");
    }
    h.push_str("</ul></nav>\n<form class=\"search\" action=\"/search\"><input name=\"q\" placeholder=\"Search\"><button>Go</button></form></header>\n");
    h.push_str("<div class=\"ad-slot leaderboard\" id=\"ad-top\"><iframe src=\"/ads/top\"></iframe></div>\n");
    h.push_str("<main class=\"layout\"><aside class=\"share-bar\"><a href=\"/share/x\">Share</a> <a href=\"/share/mail\">Email</a> <a href=\"/share/link\">Copy link</a></aside>\n");
    h.push_str("<article class=\"story\"><h1 class=\"headline\">How Systems Languages Manage Memory</h1>\n");
    h.push_str("<p class=\"byline\">By <a href=\"/authors/ada\">Ada Writer</a> | <time datetime=\"2025-03-01\">March 1, 2025</time></p>\n");
    h.push_str("<figure><img src=\"/img/hero.jpg\" alt=\"A memory diagram\" width=\"1200\" height=\"600\"><figcaption>Memory, drawn as boxes.</figcaption></figure>\n");
    for s in 0..sections {
        h.push_str(&format!(
            "<h2 id=\"s{s}\">Part {s}: {}</h2>\n",
            WORDS[r.below(30)]
        ));
        for _ in 0..6 {
            h.push_str(&r.paragraph());
        }
        match s % 4 {
            0 => {
                h.push_str("<ul>");
                for _ in 0..6 {
                    let w = 6 + r.below(6);
                    h.push_str(&format!("<li>{}</li>", r.sentence(w)));
                }
                h.push_str("</ul>\n");
            }
            1 => {
                h.push_str("<table class=\"data\"><thead><tr><th>Language</th><th>Model</th><th>Pause (ms)</th></tr></thead><tbody>");
                for row in 0..8 {
                    h.push_str(&format!(
                        "<tr><td>lang{row}</td><td>{}</td><td>{}</td></tr>",
                        WORDS[r.below(30)],
                        r.below(500)
                    ));
                }
                h.push_str("</tbody></table>\n");
            }
            2 => {
                h.push_str("<pre><code class=\"language-rust\">fn main() {\n    let s = String::from(\"hello\");\n    let t = &amp;s;\n    println!(\"{t}\");\n}\n</code></pre>\n");
            }
            _ => {
                let w = 20 + r.below(10);
                h.push_str(&format!(
                    "<blockquote><p>{}</p></blockquote>\n",
                    r.sentence(w)
                ));
            }
        }
        if s % 5 == 4 {
            h.push_str("<div class=\"ad-slot inline\"><script>loadAd('inline');</script><a href=\"/promo\">Subscribe for $1</a></div>\n");
            h.push_str("<div class=\"related\"><h3>Related</h3><ul>");
            for k in 0..5 {
                h.push_str(&format!(
                    "<li><a href=\"/story/{s}-{k}\">Related story {s}-{k}</a></li>"
                ));
            }
            h.push_str("</ul></div>\n");
        }
    }
    h.push_str("</article>\n<aside class=\"sidebar\"><h3>Most read</h3><ol>");
    for k in 0..20 {
        h.push_str(&format!(
            "<li><a href=\"/popular/{k}\">Popular story number {k}</a></li>"
        ));
    }
    h.push_str("</ol><div class=\"newsletter\"><h3>Newsletter</h3><form><input type=\"email\"><button>Sign up</button></form></div></aside></main>\n");
    h.push_str("<section class=\"comments\"><h2>Comments</h2>\n");
    for c in 0..(sections * 2) {
        let w = 10 + r.below(20);
        h.push_str(&format!("<div class=\"comment\"><span class=\"author\">user{c}</span><p>{}</p><a href=\"/reply/{c}\">Reply</a></div>\n", r.sentence(w)));
    }
    h.push_str("</section>\n<footer class=\"site-footer\"><div class=\"links\">");
    for k in 0..60 {
        h.push_str(&format!("<a href=\"/footer/{k}\">Footer link {k}</a> "));
    }
    h.push_str("</div><p>&copy; 2025 The Daily Byte. All rights reserved.</p></footer>\n");
    h.push_str("<script>(function(){var s=document.createElement('script');s.src='/analytics.js';document.body.appendChild(s);})();</script>\n");
    h.push_str("</body></html>\n");
    h
}
