//! Which element the article path renders (`html_to_markdown`, article rendering), on
//! synthetic pages where readability's own pick is one part of the article: a long article
//! split into sections that each sit several containers down, so that readability's
//! best-scoring element is one section and the sibling joining finds nothing beside it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use promptforge_webfetch::{Extraction, Rendering, html_to_markdown};

const URL: &str = "https://guide.example/health/sleep";

/// Paragraph `i` of section `s`: distinct prose of about 40 words.
fn para(s: usize, i: usize) -> String {
    format!(
        "Section {s} paragraph {i}: researchers followed several hundred adults for two \
         years, recording how long they slept, when they went to bed and how rested they \
         felt in the morning, and compared those diaries with the results of regular \
         memory tests taken at the clinic number {s}{i}."
    )
}

/// One section: a heading, then its paragraphs three wrappers down, and a key point after
/// them.
fn section(s: usize, paragraphs: usize) -> String {
    let body = each(paragraphs, |i| format!("<p>{}</p>", para(s, i)));
    format!(
        r#"<div class="guide-section"><h2>Part {s} of the guide</h2><div class="guide-outer">
<div class="guide-inner"><div class="guide-text">{body}</div>
<ul class="key-points"><li>Key point of part {s}: a regular bedtime helps.</li></ul></div></div></div>
"#
    )
}

/// A page whose article is `sections`, with site navigation, teaser cards and a footer.
fn page(sections: &str) -> String {
    format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<header><nav><a href="/">Home</a> <a href="/health">Health</a> <a href="/about">About</a></nav></header>
<div class="layout"><div class="main-column"><h1>How sleep shapes memory</h1>
{sections}
</div></div>
<footer><p>Guide Example footer</p></footer></body></html>"#
    )
}

/// `n` pieces of markup, `f(0)` to `f(n - 1)`, joined.
fn each(n: usize, f: impl Fn(usize) -> String) -> String {
    (0..n).map(f).collect()
}

fn article(html: &str) -> String {
    let (md, how) = html_to_markdown(html, Some(URL), Rendering::Article);
    assert_eq!(how, Extraction::Readability, "{md}");
    md
}

#[test]
fn every_section_of_a_multi_section_article_is_kept() {
    // one section longer than the others: readability's best element is its text block,
    // and the other sections are too far from it to be joined
    let mut sections = section(0, 2);
    sections.push_str(&section(1, 8));
    for s in 2..7 {
        sections.push_str(&section(s, 2));
    }
    let md = article(&page(&sections));
    for s in 0..7 {
        assert!(
            md.contains(&format!("Section {s} paragraph 0:")),
            "section {s} lost:\n{md}"
        );
    }
    assert!(md.contains("Section 1 paragraph 7:"), "{md}");
    // in the page's order: the long section stays second
    let at = |s: usize| md.find(&format!("Section {s} paragraph 0:")).unwrap();
    assert!(at(0) < at(1) && at(1) < at(2) && at(5) < at(6), "{md}");
    let key = md.find("Key point of part 1:").expect("the key point");
    assert!(
        md.find("Section 1 paragraph 7:").unwrap() < key && key < at(2),
        "{md}"
    );
    // and still without the page's furniture
    assert!(!md.contains("Guide Example footer"), "{md}");
    assert!(!md.contains("[Home]"), "{md}");
}

#[test]
fn prose_in_blocks_of_another_shape_does_not_widen_the_article() {
    // a short article, then (in the same column) teaser cards whose excerpts together hold
    // more prose than it: the cards share no shape with the article's blocks, so
    // readability's pick stands
    let cards = each(5, |c| {
        format!(
            "<div class=\"teaser-card\"><h3><a href=\"/story-{c}\">Other story {c}</a></h3>\
                 <div class=\"teaser-excerpt\"><p>Teaser {c}: a different story about the \
                 regional hospital budget, the new clinic opening hours, the waiting lists for \
                 appointments and what the health board said about staffing levels at the \
                 meeting held on Thursday evening in the town hall.</p></div></div>"
        )
    });
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<div class="layout"><div class="main-column">
<div class="story"><h1>How sleep shapes memory</h1><div class="story-text"><p>{}</p><p>{}</p></div></div>
<div class="more-stories"><div class="more-list">{cards}</div></div>
</div></div></body></html>"#,
        para(0, 0),
        para(0, 1),
    );
    let md = article(&html);
    assert!(md.contains("Section 0 paragraph 1:"), "{md}");
    assert!(!md.contains("Teaser 0:"), "{md}");
}

/// Paragraph `i` of step `s` of a how-to guide.
fn step(s: usize, i: usize) -> String {
    format!(
        "Step {s} paragraph {i}: plug the board into the computer, open the builder in the \
         browser, choose the serial port it shows, and wait until the first flash of the \
         firmware has finished before you unplug it again {s}{i}."
    )
}

/// A page builder's block: a `widget` in its class, which readability counts against it.
fn widget(kind: &str, inner: &str) -> String {
    format!(
        r#"<div class="pb-element pb-widget pb-widget-{kind}"><div class="pb-widget-container">{inner}</div></div>"#
    )
}

#[test]
fn an_article_built_of_widget_blocks_is_kept() {
    // readability's class weights count every `widget` block against it: its first pass
    // keeps the introduction alone (long enough for it not to try again)
    let intro = each(3, |i| {
        format!(
            "<p>Intro {i}: this guide shows how to track who is in each room of the house \
                 with a few cheap boards, a phone in every pocket, and an automation server \
                 that already runs at home for lights and heating.</p>"
        )
    });
    let steps = each(8, |s| {
        let text = each(2, |i| format!("<p>{}</p>", step(s, i)));
        format!(
            "{}{}{}",
            widget("heading", &format!("<h2>Step {s}</h2>")),
            widget("text-editor", &text),
            widget("image", r#"<img src="/step.png" alt="">"#)
        )
    });
    let html = format!(
        r#"<!doctype html><html><head><title>Track who is in each room</title></head><body>
<header><nav><a href="/">Home</a> <a href="/guides">Guides</a></nav></header>
<div class="pb-section"><div class="pb-column"><div class="intro">{intro}</div>{steps}</div>
<div class="pb-column">{}</div></div>
<footer><p>Guide Example footer</p></footer></body></html>"#,
        widget("search", "<form><input name=q></form>")
    );
    let md = article(&html);
    assert!(md.contains("Intro 2:"), "{md}");
    for s in 0..8 {
        for i in 0..2 {
            assert!(
                md.contains(&format!("Step {s} paragraph {i}:")),
                "step {s} lost:\n{md}"
            );
        }
    }
    let at = |s: usize| md.find(&format!("Step {s} paragraph 0:")).unwrap();
    assert!(md.find("Intro 2:").unwrap() < at(0) && at(0) < at(1) && at(6) < at(7));
    assert!(!md.contains("Guide Example footer"), "{md}");
}

#[test]
fn a_long_comment_thread_does_not_replace_a_short_article() {
    // the comments hold most of the page's prose, so the second pass runs; it strips them
    // as unlikely candidates like the first pass did, and finds nothing more
    let comments = each(8, |c| {
        format!(
            "<li class=\"comment\"><div class=\"comment-author\">Reader {c}</div>\
                 <div class=\"comment-body\"><p>Comment {c}: I tried this at home last winter \
                 and found that going to bed at the same time every night mattered far more \
                 than how long I slept, although my memory tests were never as careful as the \
                 ones the clinic ran for the study.</p></div></li>"
        )
    });
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<div class="layout"><article class="post"><h1>How sleep shapes memory</h1>
<div class="post-body"><p>{}</p><p>{}</p><p>{}</p></div></article>
<section id="comments" class="comments-area"><h2>8 comments</h2><ol class="comment-list">{comments}</ol></section>
</div></body></html>"#,
        para(0, 0),
        para(0, 1),
        para(0, 2),
    );
    let md = article(&html);
    assert!(md.contains("Section 0 paragraph 2:"), "{md}");
    assert!(!md.contains("Comment 0:"), "{md}");
}

#[test]
fn an_article_streamed_into_a_hidden_element_is_shown() {
    // server rendering in streamed parts: the page ships a placeholder where the article
    // goes, the article itself in a hidden element, and a script that swaps them (React's
    // ids, put in place before readability, or a framework's own, shown in place)
    for (slot, part) in [("B:0", "S:0"), ("article-slot", "article-stream")] {
        let html = format!(
            r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<header><nav><a href="/">Home</a> <a href="/health">Health</a></nav></header>
<main><template id="{slot}"></template><div class="skeleton">Loading the article</div></main>
<footer><p>Guide Example is an independent publication about health and sleep, written by
doctors and researchers, funded by its readers, and free of advertising since 2009.</p></footer>
<div hidden id="{part}"><article><h1>How sleep shapes memory</h1>{}</article></div>
<script>document.getElementById("{slot}").replaceWith(document.getElementById("{part}"))</script>
</body></html>"#,
            each(4, |i| format!("<p>{}</p>", para(0, i)))
        );
        let md = article(&html);
        for i in 0..4 {
            assert!(md.contains(&format!("Section 0 paragraph {i}:")), "{md}");
        }
        assert!(!md.contains("independent publication"), "{md}");
    }
}

/// An advertiser disclosure over 500 characters: long enough for readability, once it has
/// stripped the article as an unlikely candidate, to render it alone without trying again.
const DISCLOSURE: &str = "Advertiser disclosure: many of the offers that appear on this site \
    are from companies from which we may receive financial compensation when a reader clicks \
    on a link, when an application is approved, or when an account is opened. This \
    compensation may impact how and where products appear on this site, including the order \
    in which they appear within listing categories, and we do not review every company or \
    offer available in the marketplace today. Our editors choose what to cover on their own, \
    and the companies we work with never see a review before it is published, nor may they \
    ask for one to be changed or taken down afterwards.";

#[test]
fn an_article_element_with_a_furniture_word_in_its_class_is_kept() {
    // `template-with-sidebar` names the page layout, but readability strips the element as
    // an unlikely candidate and renders the disclosure box alone, long enough for it not to
    // try again (the second pass keeps the article, and joins the box beside it)
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<div class="disclosure-box"><p>{DISCLOSURE}</p></div>
<article class="post-template-with-sidebar"><h1>How sleep shapes memory</h1>{}</article>
</body></html>"#,
        each(5, |i| format!("<p>{}</p>", para(0, i)))
    );
    let md = article(&html);
    for i in 0..5 {
        assert!(md.contains(&format!("Section 0 paragraph {i}:")), "{md}");
    }
}

/// A page streamed by React in parts: the shell holds the headline and, where each part of
/// the article goes, a Suspense boundary showing a fallback (`Loading paragraph...`) or a
/// bare placeholder; the parts follow at the end of `<body>`, each in a hidden container,
/// in the order the server finished them, with the scripts that move them into place when
/// `scripts` is set (a page saved without its scripts keeps the containers alone).
fn streamed_page(scripts: bool) -> String {
    // parts 0 to 4 are boundaries, part 5 a bare placeholder (React's segments)
    let slots = each(5, |n| {
        format!(
            r#"<!--$?--><template id="B:{n}"></template><div class="skeleton">Loading paragraph...</div><!--/$-->"#
        )
    });
    let parts = [3, 0, 5, 1, 4, 2].map(|n| {
        let call = if n == 5 {
            format!(r#"$RS("S:{n}","P:{n}")"#)
        } else {
            format!(r#"$RC("B:{n}","S:{n}")"#)
        };
        let script = if scripts {
            format!("<script>{call}</script>")
        } else {
            String::new()
        };
        format!(
            r#"<div hidden id="S:{n}"><p>{}</p></div>{script}"#,
            para(0, n)
        )
    });
    format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<header><nav><a href="/">Home</a> <a href="/health">Health</a></nav></header>
<main><article><h1>How sleep shapes memory</h1>{slots}<template id="P:5"></template></article></main>
<footer><p>Guide Example footer</p></footer>
{}</body></html>"#,
        parts.concat()
    )
}

#[test]
fn parts_streamed_into_suspense_boundaries_take_their_places() {
    for scripts in [true, false] {
        let html = streamed_page(scripts);
        let md = article(&html);
        // the whole page (`raw: true`) is put together the same way
        let (page, _) = html_to_markdown(&html, Some(URL), Rendering::WholePage);
        for md in [md, page] {
            let at = |n: usize| {
                md.find(&format!("Section 0 paragraph {n}:"))
                    .unwrap_or_else(|| panic!("part {n} lost (scripts: {scripts}):\n{md}"))
            };
            for n in 0..5 {
                assert!(at(n) < at(n + 1), "parts out of order:\n{md}");
            }
            assert!(!md.contains("Loading"), "{md}");
        }
        assert!(!article(&html).contains("Guide Example footer"));
    }
}

#[test]
fn a_streamed_part_whose_boundary_is_missing_changes_nothing() {
    // the container names a boundary the page does not have (and a boundary waits for a
    // container that never came): the page renders as it would without the step
    let page = |id: &str| {
        format!(
            r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<main><article><h1>How sleep shapes memory</h1>{}
<!--$?--><template id="B:7"></template><div>Loading comments...</div><!--/$--></article></main>
<div hidden id="{id}"><p>{}</p></div></body></html>"#,
            each(4, |i| format!("<p>{}</p>", para(0, i))),
            para(1, 0)
        )
    };
    let streamed = article(&page("S:3"));
    assert_eq!(streamed, article(&page("Q:3")));
    assert!(streamed.contains("Section 0 paragraph 3:"), "{streamed}");
}

#[test]
fn nested_boundaries_are_filled() {
    // part 0 holds a boundary of its own (part 1, which the server finished first); the
    // fallback of part 2 holds a finished boundary and a pending one beside it, all removed
    // with it (the comments nest)
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<main><article><h1>How sleep shapes memory</h1>
<!--$?--><template id="B:0"></template><div>Loading the first half...</div><!--/$-->
<!--$?--><template id="B:2"></template><div>Loading the second half...</div><!--$--><span>Loading</span><!--/$-->
<!--$?--><template id="B:3"></template><span>Loading more...</span><!--/$--><!--/$-->
</article></main>
<div hidden id="S:1"><p>{}</p><p>{}</p></div><script>$RC("B:1","S:1")</script>
<div hidden id="S:0"><p>{}</p><!--$?--><template id="B:1"></template><div>Loading the inner part...</div><!--/$--><p>{}</p></div><script>$RC("B:0","S:0")</script>
<div hidden id="S:2"><p>{}</p></div><script>$RC("B:2","S:2")</script>
</body></html>"#,
        para(0, 1),
        para(0, 2),
        para(0, 0),
        para(0, 3),
        para(0, 4),
    );
    let md = article(&html);
    let at = |n: usize| {
        md.find(&format!("Section 0 paragraph {n}:"))
            .unwrap_or_else(|| panic!("paragraph {n} lost:\n{md}"))
    };
    for n in 0..4 {
        assert!(at(n) < at(n + 1), "out of order:\n{md}");
    }
    assert!(!md.contains("Loading"), "{md}");
}

#[test]
fn deeply_nested_streamed_parts_complete() {
    // a hostile page: boundaries nested thousands deep, each filled by its own container;
    // the step stays iterative and within its budget (what it leaves is not asserted)
    let depth = 3_000;
    let open = each(depth, |n| {
        format!(r#"<div><!--$?--><template id="B:{n:x}"></template>Loading<!--/$-->"#)
    });
    let containers = each(depth, |n| {
        format!(r#"<div hidden id="S:{n:x}"><span>part {n}</span></div>"#)
    });
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<main><article><h1>How sleep shapes memory</h1>{}{open}{}</article></main>{containers}</body></html>"#,
        each(4, |i| format!("<p>{}</p>", para(0, i))),
        "</div>".repeat(depth)
    );
    let (md, _) = html_to_markdown(&html, Some(URL), Rendering::Article);
    assert!(md.contains("Section 0 paragraph 3:"), "{md}");
}

#[test]
fn an_article_in_a_page_column_named_for_the_footer_is_kept() {
    // the column holding the article is `above-footer`: readability's first pass strips it
    // as an unlikely candidate (`footer`) and renders the disclosure box alone, long enough
    // for it not to try again; the second pass keeps a column whose only furniture words
    // name a page region and that holds most of the page's prose
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<div class="disclosure-box"><p>{DISCLOSURE}</p></div>
<div class="above-footer"><div class="post-wrap"><h1>How sleep shapes memory</h1>
<div class="post-text">{}</div></div></div>
<div class="site-footer"><p>Guide Example footer</p></div>
</body></html>"#,
        each(6, |i| format!("<p>{}</p>", para(0, i)))
    );
    let md = article(&html);
    for i in 0..6 {
        assert!(md.contains(&format!("Section 0 paragraph {i}:")), "{md}");
    }
    assert!(!md.contains("Guide Example footer"), "{md}");
}

#[test]
fn a_long_data_table_in_the_article_does_not_take_its_place() {
    // readability scores table cells like paragraphs: a list of 200 names and addresses
    // inside the article outscores its text, and the table's body alone would be rendered
    // (with a caption beside it, the body is not its table's only child, so readability
    // does not climb to the table's container, beside the paragraphs)
    let rows = each(200, |r| {
        format!(
            "<tr><td>District {r} of the North County</td><td>Member Name {r}</td>\
             <td>member.name.{r}@parliament.example</td></tr>"
        )
    });
    let html = format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<header><nav><a href="/">Home</a> <a href="/health">Health</a></nav></header>
<div class="story"><h1>How sleep shapes memory</h1><div class="story-body">{}
<div class="data-box"><table><caption>Members, their districts and email addresses</caption>
<tr><th>District</th><th>Member</th><th>Email</th></tr>{rows}</table></div>
</div></div>
<footer><p>Guide Example footer</p></footer></body></html>"#,
        each(5, |i| format!("<p>{}</p>", para(0, i)))
    );
    let md = article(&html);
    for i in 0..5 {
        assert!(md.contains(&format!("Section 0 paragraph {i}:")), "{md}");
    }
    assert!(md.contains("member.name.7@parliament.example"), "{md}");
}

/// A news story broken by an advertisement: its first `lead` paragraphs in one container,
/// the rest in another of the same template, in rows of the page that meet seven levels
/// above the paragraphs (readability joins siblings of its best element, not cousins).
fn broken_story(lead: usize, rest: usize) -> String {
    let part = |from: usize, n: usize| {
        format!(
            r#"<div class="page-row"><div class="page-row-inner"><div class="story-row">
<div class="story-col"><div class="story-col-inner"><div class="story-text">{}</div></div></div>
</div></div></div>"#,
            each(n, |i| format!(
                "<p class=\"story-text__paragraph\">{}</p>",
                para(0, from + i)
            ))
        )
    };
    format!(
        r#"<!doctype html><html><head><title>How sleep shapes memory</title></head><body>
<header><nav><a href="/">Home</a> <a href="/health">Health</a></nav></header>
<main><div class="page-content"><h1>How sleep shapes memory</h1>
<section class="lead-row">{}</section>
<div class="ad-slot"><div class="ad-label">Advertisement</div></div>
<section class="main-row">{}</section>
</div></main>
<footer><p>Guide Example footer</p></footer></body></html>"#,
        part(0, lead),
        part(lead, rest)
    )
}

#[test]
fn the_lead_of_a_story_broken_by_an_advertisement_is_kept() {
    let md = article(&broken_story(3, 12));
    for i in 0..15 {
        assert!(md.contains(&format!("Section 0 paragraph {i}:")), "{md}");
    }
    // in the page's order
    let at = |i: usize| md.find(&format!("Section 0 paragraph {i}:")).unwrap();
    assert!(at(0) < at(2) && at(2) < at(3) && at(3) < at(14), "{md}");
}

#[test]
fn prose_of_another_shape_before_the_article_is_not_taken_as_its_lead() {
    // the same page with its lead paragraphs in a teaser box of another class: not the
    // article's shape, so not taken
    let html = broken_story(3, 12).replacen(
        "<p class=\"story-text__paragraph\">",
        "<p class=\"teaser-text\">",
        3,
    );
    let md = article(&html);
    assert!(!md.contains("Section 0 paragraph 0:"), "{md}");
    assert!(md.contains("Section 0 paragraph 3:"), "{md}");
}
