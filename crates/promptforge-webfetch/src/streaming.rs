//! Streamed server rendering: the page as a browser shows it once React's streaming
//! scripts have run, without running them.
//!
//! React 18+ renders on the server in parts (`renderToPipeableStream`, the Next.js app
//! router). What is ready first is sent as the page; a part that was still loading is sent
//! as a placeholder, and its real content follows later in the same response, at the end of
//! `<body>`, in a hidden container, with an inline script that moves it into place:
//!
//! - a **Suspense boundary** still loading is marked by comments around its fallback:
//!   `<!--$?--><template id="B:1"></template>FALLBACK<!--/$-->`. Its content arrives as
//!   `<div hidden id="S:1">CONTENT</div>` and `$RC("B:1","S:1")` replaces everything from
//!   the template up to the boundary's closing comment (boundaries nest, so the comments are
//!   counted) with the container's children;
//! - a **segment** still loading is a bare `<template id="P:2"></template>`; its content
//!   arrives as `<div hidden id="S:2">` and `$RS("S:2","P:2")` puts the container's
//!   children in the template's place.
//!
//! The container is removed either way. The ids may carry a prefix (React's
//! `identifierPrefix`); a container that is not a `div` (inside an `svg`, a `table`) is
//! hidden by `aria-hidden` or sits in a hidden `table`. The scripts (`$RC`, `$RR` with
//! stylesheets, `$RS`), or the `data-rci` / `data-rri` / `data-rsi` templates of React's
//! external runtime, say which container fills which placeholder; a page saved without its
//! scripts (an archive, a benchmark) pairs `S:n` with `B:n` or `P:n`, which is what React
//! 19 emits (React 18 numbered boundaries apart, and needs the scripts). A page saved
//! without its comments keeps the fallback beside the content: without the closing comment
//! the fallback's extent is unknown, and guessing it could drop the page's own text.
//!
//! The whole step is one walk over the page (iterative: a hostile page may nest elements
//! thousands deep), then at most [`MAX_STREAMED_SEGMENTS`] moves, each checking that its
//! placeholder is still in the page and outside the container (as a browser would find it),
//! by a walk up its ancestors within a budget proportional to the page's size. It runs only
//! on pages that hold a `<template id="`.

use std::collections::{HashMap, HashSet};

use dom_query::{Document, NodeData, NodeId, NodeRef, local_name};

/// The most streamed containers put in place on one page; the others stay where the page
/// has them (hidden).
pub const MAX_STREAMED_SEGMENTS: usize = 1_000;

/// The longest id read from an instruction: React's ids are a short prefix and a number.
const MAX_ID_LEN: usize = 64;

/// Each ancestor walk's steps are charged to a budget of this many per node of the page.
const ANCESTOR_STEPS_PER_NODE: usize = 4;

/// Whether `html` may hold streamed parts: React writes every placeholder as
/// `<template id="...">`. A page without one is left alone at the cost of this search.
pub(crate) fn may_have_streamed_segments(html: &str) -> bool {
    html.contains("<template id=\"")
}

/// Puts each streamed container of `doc` in the place its placeholder holds (see the module
/// documentation), returning how many were put in place. Moves nodes only (no node is
/// created), so two parses of the same HTML still share node ids after it.
pub(crate) fn reveal_streamed_segments(doc: &Document) -> usize {
    let page = Page::read(doc.root());
    page.reveal()
}

/// A placeholder filled by a container, as an instruction names them.
enum Instruction {
    /// `$RC(boundary, segment)`: a Suspense boundary's fallback is replaced.
    Boundary { boundary: String, segment: String },
    /// `$RS(segment, placeholder)`: a placeholder template is replaced.
    Segment {
        segment: String,
        placeholder: String,
    },
}

/// A Suspense comment: `<!--$-->`, `<!--$?-->`, `<!--$!-->`, `<!--$~-->` open a boundary
/// (`<!--&-->` an activity), `<!--/$-->` (`<!--/&-->`) closes it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Marker {
    Open,
    Close,
}

fn marker(text: &str) -> Option<Marker> {
    match text {
        "$" | "$?" | "$!" | "$~" | "&" => Some(Marker::Open),
        "/$" | "/&" => Some(Marker::Close),
        _ => None,
    }
}

/// What one walk over the page found.
struct Page<'a> {
    /// `<template>` elements by id (the first one in document order, as `getElementById`).
    templates: HashMap<String, NodeRef<'a>>,
    /// Hidden streamed containers by id, and their ids in document order.
    containers: HashMap<String, NodeRef<'a>>,
    container_order: Vec<String>,
    /// Each boundary's opening comment and its closing comment, in the same parent.
    closing: HashMap<NodeId, NodeId>,
    /// The instructions of the page's scripts and instruction templates, in order.
    instructions: Vec<Instruction>,
    /// Nodes seen: the ancestor walks' budget is proportional to it.
    nodes: usize,
}

impl<'a> Page<'a> {
    fn read(root: NodeRef<'a>) -> Self {
        let mut page = Page {
            templates: HashMap::new(),
            containers: HashMap::new(),
            container_order: Vec::new(),
            closing: HashMap::new(),
            instructions: Vec::new(),
            nodes: 0,
        };
        let mut stack = vec![root];
        let mut children = Vec::new();
        let mut open: Vec<NodeId> = Vec::new();
        while let Some(node) = stack.pop() {
            if page.element(&node) == Walk::Skip {
                continue;
            }
            // the child list in order: boundary comments are matched among siblings
            open.clear();
            for child in node.children_it(false) {
                page.nodes += 1;
                let comment = child.query_or(None, |n| match &n.data {
                    NodeData::Comment { contents } => Some(marker(contents)),
                    _ => None,
                });
                match comment {
                    Some(Some(Marker::Open)) => open.push(child.id),
                    Some(Some(Marker::Close)) => {
                        if let Some(start) = open.pop() {
                            page.closing.insert(start, child.id);
                        }
                    }
                    Some(None) => {}
                    None => {
                        if child.is_element() {
                            children.push(child);
                        }
                    }
                }
            }
            stack.extend(children.drain(..).rev());
        }
        page
    }

    /// Records what `node` is (a template, a streamed container, a script's instructions);
    /// [`Walk::Skip`] when its children need no walk.
    fn element(&mut self, node: &NodeRef<'a>) -> Walk {
        let Some(el) = node.element_ref() else {
            return Walk::Children;
        };
        let attr = |name: &str| {
            el.attrs
                .iter()
                .find(|a| &a.name.local == name)
                .map(|a| &*a.value)
        };
        let id = attr("id").filter(|id| id.len() <= MAX_ID_LEN);
        if el.name.local == local_name!("script") {
            drop(el);
            if self.instructions.len() < MAX_STREAMED_SEGMENTS {
                for child in node.children_it(false) {
                    child.query(|n| {
                        if let NodeData::Text { contents } = &n.data {
                            scan_instructions(contents, &mut self.instructions);
                        }
                    });
                }
            }
            return Walk::Skip;
        }
        if el.name.local == local_name!("template") {
            if let Some(id) =
                id.filter(|id| split_id(id, "B:").is_some() || split_id(id, "P:").is_some())
            {
                self.templates.entry(id.to_owned()).or_insert(*node);
            }
            // React's external runtime: instructions as data attributes
            if self.instructions.len() < MAX_STREAMED_SEGMENTS {
                let pair = |a: &str, b: &str| Some((attr(a)?.to_owned(), attr(b)?.to_owned()));
                if attr("data-rci").is_some() || attr("data-rri").is_some() {
                    if let Some((boundary, segment)) = pair("data-bid", "data-sid") {
                        self.instructions
                            .push(Instruction::Boundary { boundary, segment });
                    }
                } else if attr("data-rsi").is_some()
                    && let Some((segment, placeholder)) = pair("data-sid", "data-pid")
                {
                    self.instructions.push(Instruction::Segment {
                        segment,
                        placeholder,
                    });
                }
            }
            return Walk::Skip;
        }
        if let Some(id) = id.filter(|id| split_id(id, "S:").is_some()) {
            let hidden = attr("hidden").is_some()
                || attr("aria-hidden").is_some_and(|v| v.eq_ignore_ascii_case("true"));
            let id = id.to_owned();
            drop(el);
            if (hidden || in_hidden_table(node)) && !self.containers.contains_key(&id) {
                self.containers.insert(id.clone(), *node);
                self.container_order.push(id);
            }
        }
        Walk::Children
    }

    /// Applies the pairs the instructions name (or, on a page without any, the pairs the
    /// ids make), at most [`MAX_STREAMED_SEGMENTS`] of them.
    fn reveal(&self) -> usize {
        let mut pairs: Vec<(NodeRef<'a>, NodeRef<'a>, bool)> = Vec::new();
        let find = |map: &HashMap<String, NodeRef<'a>>, id: &str| map.get(id).copied();
        if self.instructions.is_empty() {
            for id in &self.container_order {
                let Some((prefix, n)) = split_id(id, "S:") else {
                    continue;
                };
                let boundary = find(&self.templates, &format!("{prefix}B:{n}"));
                let placeholder = find(&self.templates, &format!("{prefix}P:{n}"));
                if let (Some(target), Some(container)) =
                    (boundary.or(placeholder), find(&self.containers, id))
                {
                    pairs.push((target, container, boundary.is_some()));
                }
            }
        } else {
            for instruction in &self.instructions {
                let (target, segment, is_boundary) = match instruction {
                    Instruction::Boundary { boundary, segment } => (boundary, segment, true),
                    Instruction::Segment {
                        segment,
                        placeholder,
                    } => (placeholder, segment, false),
                };
                if let (Some(target), Some(container)) = (
                    find(&self.templates, target),
                    find(&self.containers, segment),
                ) {
                    pairs.push((target, container, is_boundary));
                }
            }
        }
        let mut budget = ANCESTOR_STEPS_PER_NODE * self.nodes;
        let mut used: HashSet<NodeId> = HashSet::new();
        let mut revealed = 0;
        for (target, container, is_boundary) in pairs.into_iter().take(MAX_STREAMED_SEGMENTS) {
            if used.contains(&container.id) {
                continue;
            }
            // both still in the page, the placeholder outside the container: what
            // `getElementById` would find after the container is taken out
            match (
                in_page_outside(&target, Some(&container), &mut budget),
                in_page_outside(&container, None, &mut budget),
            ) {
                (Some(true), Some(true)) => {}
                (Some(_), Some(_)) => continue,
                _ => break,
            }
            used.insert(container.id);
            if is_boundary {
                self.fill_boundary(&target, &container);
            } else {
                move_children_before(&container, &target);
                target.remove_from_parent();
            }
            container.remove_from_parent();
            revealed += 1;
        }
        revealed
    }

    /// Replaces the boundary's fallback (its template and what follows up to its closing
    /// comment) with the container's children. Without the comments (a page saved without
    /// them) the content goes in the template's place and what follows stays.
    fn fill_boundary(&self, template: &NodeRef<'a>, container: &NodeRef<'a>) {
        let parent = template.parent().map(|p| p.id);
        let end = template
            .prev_sibling()
            .and_then(|start| self.closing.get(&start.id))
            .map(|&end| NodeRef::new(end, template.tree))
            .filter(|end| end.parent().map(|p| p.id) == parent);
        match end {
            Some(end) => {
                let mut next = Some(*template);
                while let Some(node) = next.filter(|n| n.id != end.id) {
                    next = node.next_sibling();
                    node.remove_from_parent();
                }
                move_children_before(container, &end);
            }
            None => {
                move_children_before(container, template);
                template.remove_from_parent();
            }
        }
    }
}

/// Whether the walk goes into an element's children.
#[derive(PartialEq, Eq)]
enum Walk {
    Children,
    Skip,
}

/// The prefix and the hexadecimal number of an id `<prefix><kind><number>` (`S:1f`,
/// `R1:B:3`), the number as React writes it (lowercase hexadecimal).
fn split_id<'i>(id: &'i str, kind: &str) -> Option<(&'i str, &'i str)> {
    let at = id.rfind(kind)?;
    let number = &id[at + kind.len()..];
    let hex = !number.is_empty()
        && number
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    hex.then_some((&id[..at], number))
}

/// Whether a container without `hidden` of its own sits in a hidden `table` (React's
/// containers for table rows and sections: `<table hidden><tbody id="S:1">`; the parser
/// puts a `tbody` between the table and a row).
fn in_hidden_table(node: &NodeRef<'_>) -> bool {
    let mut up = node.parent();
    for _ in 0..2 {
        let Some(p) = up else {
            return false;
        };
        if p.has_name("table") {
            return p.has_attr("hidden");
        }
        up = p.parent();
    }
    false
}

/// Whether `node` is in the document (its ancestors reach the document node) and not inside
/// `outside`; `None` when the walk would overspend `budget`.
fn in_page_outside(
    node: &NodeRef<'_>,
    outside: Option<&NodeRef<'_>>,
    budget: &mut usize,
) -> Option<bool> {
    let mut up = node.parent();
    while let Some(p) = up {
        *budget = budget.checked_sub(1)?;
        if outside.is_some_and(|o| o.id == p.id) {
            return Some(false);
        }
        if p.is_document() {
            return Some(true);
        }
        up = p.parent();
    }
    Some(false)
}

/// Moves every child of `container`, in order, before `target`.
fn move_children_before(container: &NodeRef<'_>, target: &NodeRef<'_>) {
    if let Some(first) = container.first_child() {
        target.insert_siblings_before(&first);
    }
}

/// Appends the instructions in a script's text: `$RC("B:1","S:1")` and `$RR("B:1","S:1",
/// ...)` complete a boundary, `$RS("S:2","P:2")` a segment. Stops at
/// [`MAX_STREAMED_SEGMENTS`] instructions.
fn scan_instructions(text: &str, out: &mut Vec<Instruction>) {
    let mut rest = text;
    while let Some(at) = rest.find("$R") {
        rest = &rest[at + 2..];
        if out.len() >= MAX_STREAMED_SEGMENTS {
            return;
        }
        let kind = rest.as_bytes().first().copied();
        if !matches!(kind, Some(b'C' | b'R' | b'S')) {
            continue;
        }
        let Some((first, second)) = two_string_args(&rest[1..]) else {
            continue;
        };
        out.push(if kind == Some(b'S') {
            Instruction::Segment {
                segment: first.to_owned(),
                placeholder: second.to_owned(),
            }
        } else {
            Instruction::Boundary {
                boundary: first.to_owned(),
                segment: second.to_owned(),
            }
        });
    }
}

/// The two string arguments of a call's text `("a","b"...`, each at most [`MAX_ID_LEN`]
/// bytes (so a call with a runaway argument costs a bounded look).
fn two_string_args(call: &str) -> Option<(&str, &str)> {
    let quoted =
        |s: &str| -> Option<usize> { s.bytes().take(MAX_ID_LEN + 1).position(|b| b == b'"') };
    let args = call.strip_prefix("(\"")?;
    let first_len = quoted(args)?;
    let tail = args[first_len..].strip_prefix("\",\"")?;
    let second_len = quoted(tail)?;
    Some((&args[..first_len], &tail[..second_len]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn body_html(doc: &Document) -> String {
        doc.select("body").inner_html().to_string()
    }

    #[test]
    fn instructions_are_read_from_script_text() {
        let mut out = Vec::new();
        scan_instructions(
            r#"$RC=function(b,c){};$RC("B:0","S:0");$RS("S:9","P:9");$RR("B:2","S:3",[["/a.css"]]);$RX("B:4","digest");$RC("B:5""#,
            &mut out,
        );
        let got: Vec<String> = out
            .iter()
            .map(|i| match i {
                Instruction::Boundary { boundary, segment } => format!("C {boundary} {segment}"),
                Instruction::Segment {
                    segment,
                    placeholder,
                } => format!("S {segment} {placeholder}"),
            })
            .collect();
        assert_eq!(got, ["C B:0 S:0", "S S:9 P:9", "C B:2 S:3"]);
        assert!(two_string_args(&format!("(\"{}\",\"S:1\")", "x".repeat(100))).is_none());
    }

    #[test]
    fn ids_split_into_prefix_and_number() {
        assert_eq!(split_id("S:1f", "S:"), Some(("", "1f")));
        assert_eq!(split_id("R1:B:3", "B:"), Some(("R1:", "3")));
        assert_eq!(split_id("S:", "S:"), None);
        assert_eq!(split_id("S:1F", "S:"), None);
        assert_eq!(split_id("toc", "S:"), None);
    }

    #[test]
    fn a_boundary_takes_its_content_and_loses_its_fallback() {
        let doc = Document::from(
            r#"<html><body><main><h1>T</h1><!--$?--><template id="B:0"></template><p>Loading</p><!--$--><i>inner</i><!--/$--><!--/$--><p>after</p></main>
<div hidden id="S:0"><p>one</p><p>two</p></div></body></html>"#,
        );
        assert_eq!(reveal_streamed_segments(&doc), 1);
        let html = body_html(&doc);
        assert!(
            html.contains("<h1>T</h1><!--$?--><p>one</p><p>two</p><!--/$--><p>after</p>"),
            "{html}"
        );
        assert!(
            !html.contains("Loading") && !html.contains("hidden"),
            "{html}"
        );
    }

    #[test]
    fn instructions_pair_boundaries_numbered_apart() {
        // React 18 numbers boundaries and segments apart: the script says which is which
        let doc = Document::from(
            r#"<html><body><!--$?--><template id="B:0"></template>wait<!--/$--><!--$?--><template id="B:1"></template>wait<!--/$-->
<div hidden id="S:1"><p>first</p></div><script>$RC("B:0","S:1")</script>
<div hidden id="S:2"><p>second</p></div><script>$RC("B:1","S:2")</script></body></html>"#,
        );
        assert_eq!(reveal_streamed_segments(&doc), 2);
        let html = body_html(&doc);
        let (a, b) = (html.find("first").unwrap(), html.find("second").unwrap());
        assert!(a < b && !html.contains("wait"), "{html}");
    }

    #[test]
    fn a_container_holding_its_own_placeholder_is_left_alone() {
        let doc = Document::from(
            r#"<html><body><p>x</p><div hidden id="S:0"><p>a</p><template id="P:0"></template></div></body></html>"#,
        );
        assert_eq!(reveal_streamed_segments(&doc), 0);
        assert!(body_html(&doc).contains(r#"<div hidden="" id="S:0">"#));
    }

    #[test]
    fn prefixed_ids_and_a_table_container_are_understood() {
        // React's `identifierPrefix`, and a segment of table rows streamed in a hidden table
        let doc = Document::from(
            r#"<html><body><table><tbody><tr><td>head</td></tr><template id="R:P:1"></template></tbody></table>
<table hidden><tbody id="R:S:1"><tr><td>streamed row</td></tr></tbody></table></body></html>"#,
        );
        assert_eq!(reveal_streamed_segments(&doc), 1);
        let first = doc.select("table").first().text().to_string();
        assert!(
            first.contains("head") && first.contains("streamed row"),
            "{first}"
        );
        assert!(doc.select("template").is_empty());
    }

    #[test]
    fn at_most_the_cap_of_containers_is_put_in_place() {
        let n = MAX_STREAMED_SEGMENTS + 200;
        let slots: String = (0..n)
            .map(|i| format!(r#"<template id="P:{i:x}"></template>"#))
            .collect();
        let containers: String = (0..n)
            .map(|i| format!(r#"<div hidden id="S:{i:x}">{i}</div>"#))
            .collect();
        let doc = Document::from(format!(
            "<html><body><main>{slots}</main>{containers}</body></html>"
        ));
        assert_eq!(reveal_streamed_segments(&doc), MAX_STREAMED_SEGMENTS);
        assert_eq!(doc.select("div[hidden]").length(), 200);
    }

    #[test]
    fn a_deep_page_is_walked_without_recursion() {
        // boundaries nested thousands deep, each with its container: one iterative walk, and
        // the ancestor checks stop when their budget (proportional to the page) is spent
        let depth = 5_000;
        let open: String = (0..depth)
            .map(|n| format!(r#"<div><!--$?--><template id="B:{n:x}"></template>wait<!--/$-->"#))
            .collect();
        let containers: String = (0..depth)
            .map(|n| format!(r#"<div hidden id="S:{n:x}"><b>{n}</b></div>"#))
            .collect();
        let doc = Document::from(format!(
            "<html><body>{open}{}{containers}</body></html>",
            "</div>".repeat(depth)
        ));
        let revealed = reveal_streamed_segments(&doc);
        assert!(
            revealed > 0 && revealed <= MAX_STREAMED_SEGMENTS,
            "{revealed}"
        );
    }
}
