//! A tolerant map of a prompt file for editors: headings, the section tree, the Lua blocks
//! with their absolute lines, prose placeholders and frontmatter keys, with byte spans.
//!
//! [`check`](super::check) says what is wrong with a file; [`outline`] says what is in it,
//! also when it does not parse: it never fails and never compiles Lua. It reads the body
//! with the same CommonMark reader and the same region rules as the parser (a leading `---`
//! takes a section off the walk, a later one starts a comment that nothing executes, only
//! an unindented ```` ```lua ```` fence is code), so what it lists is what a run would see.
//! Where the parser would stop (a skipped heading level, a duplicate sibling, a second H1),
//! the outline records what is there and goes on.
//!
//! Every span is a byte range into [`normalized`] text (a leading byte-order mark removed,
//! CRLF line endings turned into LF), the text [`check`](super::check)'s spans point into
//! too.
//!
//! Section addresses resolve with the guide's visibility rules ([`Outline::resolve`]): from
//! a section, its siblings (not itself) and its direct children, disambiguated by level;
//! from the H1, the top-level sections; from a fanout arm, the set its worker was resolved
//! from, minus the worker, plus the worker's children.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use super::frontmatter;
use super::lines::Lines;
use super::template::parse_path;
use super::{Element, FenceRole, Piece, RegionKind, elements, heading_indices, walk_region};

/// The text every span of [`outline`] and [`check`](super::check) points into: `source`
/// without a leading byte-order mark and with CRLF line endings turned into LF.
pub fn normalized(source: &str) -> Cow<'_, str> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    if source.contains("\r\n") {
        Cow::Owned(source.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(source)
    }
}

/// Maps a prompt file without failing; see the [module documentation](self).
///
/// ```
/// use promptforge_core::parse::{Resolution, Scope, outline};
///
/// let source = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n# T\n\n## A\n\n```lua\njump(\"## B\")\n```\n\n## B\n\nHello {{ var.who }}\n";
/// let map = outline(source);
/// assert_eq!(map.sections().len(), 2);
/// let a = &map.sections()[0];
/// assert_eq!((a.level(), a.name(), a.line()), (2, "A", 9));
/// assert_eq!(map.lua_blocks()[0].line(), 12);
/// assert_eq!(map.placeholders()[0].path(), Some(&["var".to_owned(), "who".to_owned()][..]));
/// assert_eq!(map.resolve(Scope::Section(0), "## B"), Resolution::Found(1));
/// assert_eq!(map.resolve(Scope::Section(0), "## A"), Resolution::NotVisible);
/// ```
pub fn outline(source: &str) -> Outline {
    let text = normalized(source);
    let text = text.as_ref();
    let lines = Lines::new(text);
    let mut out = Outline::default();
    let body_offset = match frontmatter::split(text) {
        Some(split) => {
            out.frontmatter = Some(frontmatter_outline(text, &split, &lines));
            split.body_offset
        }
        None => 0,
    };
    let elements = elements(text, body_offset);
    let heading_at = heading_indices(&elements);
    let region_end = |k: usize| heading_at.get(k + 1).copied().unwrap_or(elements.len());
    let span_end = |k: usize| match heading_at.get(k + 1) {
        Some(&next) => elements[next].range().start,
        None => text.len(),
    };
    let mut reader = Reader {
        text,
        lines: &lines,
        out: &mut out,
    };

    // The H1 region: the first heading when it is an H1; otherwise everything before the
    // first heading (a file whose title is missing still has its preamble code read).
    let first_is_title = heading_at
        .first()
        .is_some_and(|&at| matches!(elements[at], Element::Heading { level: 1, .. }));
    let preamble_elements = match heading_at.first() {
        Some(&at) if first_is_title => &elements[at + 1..region_end(0)],
        Some(&at) => &elements[..at],
        None => &elements[..],
    };
    if first_is_title
        && let Element::Heading {
            text: title, range, ..
        } = &elements[heading_at[0]]
    {
        reader.out.title = Some(OutlineHeading {
            level: 1,
            name: title.trim().to_owned(),
            span: trim_newline(text, range.clone()),
            name_span: heading_name_span(text, range.clone()),
            line: lines.line_of(range.start),
        });
    }
    reader.region(preamble_elements, Owner::Preamble, RegionKind::H1);

    let mut stack: Vec<usize> = Vec::new();
    for (k, &at) in heading_at.iter().enumerate() {
        let Element::Heading {
            level,
            text: name,
            range,
        } = &elements[at]
        else {
            continue;
        };
        if *level == 1 {
            // The title, or a second H1 (a parse error): neither is a section, and what
            // follows a second H1 belongs to no section either.
            stack.clear();
            continue;
        }
        while stack
            .last()
            .is_some_and(|&top| reader.out.sections[top].level >= *level)
        {
            stack.pop();
        }
        let parent = stack.last().copied();
        let id = reader.out.sections.len();
        let position = match parent {
            Some(p) => reader.out.sections[p].children.len(),
            None => reader.out.roots.len(),
        };
        reader.out.sections.push(OutlineSection {
            heading: OutlineHeading {
                level: *level,
                name: name.trim().to_owned(),
                span: trim_newline(text, range.clone()),
                name_span: heading_name_span(text, range.clone()),
                line: lines.line_of(range.start),
            },
            level: *level,
            region: range.start..span_end(k),
            parent,
            position,
            children: Vec::new(),
            off_walk: false,
            has_items: false,
        });
        match parent {
            Some(p) => reader.out.sections[p].children.push(id),
            None => reader.out.roots.push(id),
        }
        reader
            .out
            .named
            .entry((parent, *level, name.trim().to_owned()))
            .or_default()
            .push(id);
        stack.push(id);
        let region = reader.region(
            &elements[at + 1..region_end(k)],
            Owner::Section(id),
            RegionKind::Section,
        );
        let section = &mut reader.out.sections[id];
        section.off_walk = region.off_walk;
        section.has_items = region.has_items;
    }
    out
}

/// What [`outline`] found in a prompt file. Sections are numbered in document order: the
/// index into [`Outline::sections`] is the number [`Scope`] and [`Resolution`] use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outline {
    frontmatter: Option<FrontmatterOutline>,
    title: Option<OutlineHeading>,
    sections: Vec<OutlineSection>,
    roots: Vec<usize>,
    lua: Vec<LuaBlock>,
    placeholders: Vec<Placeholder>,
    /// Sections by (parent, level, name), in document order: addresses resolve in O(1).
    named: HashMap<(Option<usize>, u8, String), Vec<usize>>,
}

impl Outline {
    /// The frontmatter block, when the file opens with a closed one.
    pub fn frontmatter(&self) -> Option<&FrontmatterOutline> {
        self.frontmatter.as_ref()
    }

    /// The `# Title`, when the first heading is an H1.
    pub fn title(&self) -> Option<&OutlineHeading> {
        self.title.as_ref()
    }

    /// Every section heading (H2 to H6) in document order.
    pub fn sections(&self) -> &[OutlineSection] {
        &self.sections
    }

    /// The top-level sections, in order.
    pub fn roots(&self) -> &[usize] {
        &self.roots
    }

    /// Every executable Lua block (what the parser compiles) in document order.
    pub fn lua_blocks(&self) -> &[LuaBlock] {
        &self.lua
    }

    /// Every `{{ … }}` placeholder in executable prose, in document order.
    pub fn placeholders(&self) -> &[Placeholder] {
        &self.placeholders
    }

    /// The section whose region (its heading up to the next heading) holds byte `offset`;
    /// `None` in the frontmatter, the H1 region, or after a second H1.
    pub fn section_at(&self, offset: usize) -> Option<usize> {
        let after = self.sections.partition_point(|s| s.region.start <= offset);
        let candidate = after.checked_sub(1)?;
        self.sections[candidate]
            .region
            .contains(&offset)
            .then_some(candidate)
    }

    /// The sections a Lua call in `scope` can address, in the order a "visible sections"
    /// listing names them: siblings, then children (for an arm: the caller's set without
    /// the worker, then the worker's children).
    pub fn visible(&self, scope: Scope) -> Vec<usize> {
        match scope {
            Scope::Preamble => self.roots.clone(),
            Scope::Section(id) => {
                let Some(section) = self.sections.get(id) else {
                    return Vec::new();
                };
                let mut visible: Vec<usize> = self
                    .level_of(id)
                    .iter()
                    .copied()
                    .filter(|&s| s != id)
                    .collect();
                visible.extend_from_slice(&section.children);
                visible
            }
            Scope::Arm { worker, caller } => {
                let caller = caller.map_or(Scope::Preamble, Scope::Section);
                let mut visible: Vec<usize> = self
                    .visible(caller)
                    .into_iter()
                    .filter(|&s| s != worker)
                    .collect();
                if let Some(section) = self.sections.get(worker) {
                    visible.extend_from_slice(&section.children);
                }
                visible
            }
        }
    }

    /// Resolves a heading address such as `## Research` from `scope` as a run would: the
    /// first visible section with that level and name (in the order of
    /// [`Outline::visible`]). Constant time: a level may hold thousands of sections.
    pub fn resolve(&self, scope: Scope, address: &str) -> Resolution {
        let Some((level, name)) = parse_address(address) else {
            return Resolution::NotAnAddress;
        };
        // The first section of that address under `parent`, skipping `excluded`.
        let first = |parent: Option<usize>, excluded: &[usize]| {
            self.named
                .get(&(parent, level, name.to_owned()))
                .and_then(|ids| ids.iter().copied().find(|id| !excluded.contains(id)))
        };
        let found = match scope {
            Scope::Preamble => first(None, &[]),
            Scope::Section(id) => {
                let Some(section) = self.sections.get(id) else {
                    return Resolution::NotVisible;
                };
                first(section.parent, &[id]).or_else(|| first(Some(id), &[]))
            }
            // The caller's set without the worker, then the worker's children.
            Scope::Arm { worker, caller } => match caller {
                None => first(None, &[worker]),
                Some(caller) => self.sections.get(caller).and_then(|section| {
                    first(section.parent, &[caller, worker])
                        .or_else(|| first(Some(caller), &[worker]))
                }),
            }
            .or_else(|| first(Some(worker), &[])),
        };
        found.map_or(Resolution::NotVisible, Resolution::Found)
    }

    /// The sibling list a section belongs to (its parent's children, or the roots).
    fn level_of(&self, id: usize) -> &[usize] {
        match self.sections.get(id).and_then(|s| s.parent) {
            Some(parent) => &self.sections[parent].children,
            None => &self.roots,
        }
    }
}

/// Where a Lua call runs, for [`Outline::resolve`] and [`Outline::visible`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The H1 region (the preamble).
    Preamble,
    /// A section, by its index in [`Outline::sections`].
    Section(usize),
    /// A fanout arm running `worker`, spawned from `caller` (a section, or `None` for the
    /// H1 region).
    Arm {
        /// The worker section.
        worker: usize,
        /// The section that called `fanout`, or `None` for the H1 region.
        caller: Option<usize>,
    },
}

/// What an address resolves to from a [`Scope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The visible section with that level and name.
    Found(usize),
    /// A well-formed address that names no visible section.
    NotVisible,
    /// Not a heading address (`#` marks, a space, a name).
    NotAnAddress,
}

/// A heading: the H1 title or a section's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlineHeading {
    level: u8,
    name: String,
    span: Range<usize>,
    name_span: Range<usize>,
    line: usize,
}

impl OutlineHeading {
    /// The heading level, 1 to 6.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The heading text without its `#` marks (inline markup reduced to its text).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The heading's bytes (the whole heading line, or a setext heading's lines).
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// The bytes of the heading's text as written (without `#` marks, the closing `#`
    /// sequence, the setext underline or surrounding blanks): what a rename replaces.
    pub fn name_span(&self) -> Range<usize> {
        self.name_span.clone()
    }

    /// The 1-based line of the heading.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The address of the heading: `#` repeated `level` times, a space, the name.
    pub fn address(&self) -> String {
        crate::prompt::heading(self.level, &self.name)
    }
}

/// A section heading (H2 to H6) and where it sits in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlineSection {
    heading: OutlineHeading,
    level: u8,
    region: Range<usize>,
    parent: Option<usize>,
    position: usize,
    children: Vec<usize>,
    off_walk: bool,
    has_items: bool,
}

impl OutlineSection {
    /// The heading.
    pub fn heading(&self) -> &OutlineHeading {
        &self.heading
    }

    /// The heading level, 2 to 6.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The heading text.
    pub fn name(&self) -> &str {
        &self.heading.name
    }

    /// The 1-based line of the heading.
    pub fn line(&self) -> usize {
        self.heading.line
    }

    /// The section's address, such as `## Research`.
    pub fn address(&self) -> String {
        self.heading.address()
    }

    /// The bytes from the heading to the next heading (of any level) or the end.
    pub fn region(&self) -> Range<usize> {
        self.region.clone()
    }

    /// The enclosing section, `None` for a top-level one.
    pub fn parent(&self) -> Option<usize> {
        self.parent
    }

    /// The 0-based position among its siblings.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The direct children, in order.
    pub fn children(&self) -> &[usize] {
        &self.children
    }

    /// Whether a leading `---` takes the section off the walk.
    pub fn is_off_walk(&self) -> bool {
        self.off_walk
    }

    /// Whether the section has list items (`list_from_section` can read it).
    pub fn has_items(&self) -> bool {
        self.has_items
    }
}

/// What a Lua block or placeholder belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The H1 region's plain blocks and prose (the preamble).
    Preamble,
    /// A ```` ```lua shared ```` block: replayed into every section VM.
    Shared,
    /// A section, by its index in [`Outline::sections`].
    Section(usize),
}

/// An executable Lua block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuaBlock {
    code: Range<usize>,
    line: usize,
    owner: Owner,
}

impl LuaBlock {
    /// The bytes of the code between the fence lines.
    pub fn code(&self) -> Range<usize> {
        self.code.clone()
    }

    /// The 1-based line of the first line of code (the line after the opening fence).
    pub fn line(&self) -> usize {
        self.line
    }

    /// Where the block runs.
    pub fn owner(&self) -> Owner {
        self.owner
    }
}

/// A `{{ … }}` placeholder in prose that reaches the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    span: Range<usize>,
    inner: Range<usize>,
    path: Option<Vec<String>>,
    owner: Owner,
}

impl Placeholder {
    /// The bytes from `{{` to `}}` (to the end of the prose when it is not closed).
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// The bytes of the path between the braces, blanks trimmed.
    pub fn inner(&self) -> Range<usize> {
        self.inner.clone()
    }

    /// The dotted path (`["var", "topic"]`), `None` when the placeholder is malformed.
    pub fn path(&self) -> Option<&[String]> {
        self.path.as_deref()
    }

    /// The byte range of path segment `index` (segments are written without blanks).
    pub fn segment_span(&self, index: usize) -> Option<Range<usize>> {
        let path = self.path.as_ref()?;
        let mut start = self.inner.start;
        for (i, segment) in path.iter().enumerate() {
            if i == index {
                return Some(start..start + segment.len());
            }
            start += segment.len() + 1;
        }
        None
    }

    /// The H1 region or the section whose prose holds it.
    pub fn owner(&self) -> Owner {
        self.owner
    }
}

/// The frontmatter block's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterOutline {
    yaml: Range<usize>,
    entries: Vec<FrontmatterEntry>,
}

impl FrontmatterOutline {
    /// The bytes of the YAML between the `---` lines.
    pub fn yaml(&self) -> Range<usize> {
        self.yaml.clone()
    }

    /// Every key written at the top level or nested one level under one (as under
    /// `input:`), in order.
    pub fn entries(&self) -> &[FrontmatterEntry] {
        &self.entries
    }
}

/// A key written in the frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterEntry {
    key: String,
    key_span: Range<usize>,
    line: usize,
    parent: Option<usize>,
}

impl FrontmatterEntry {
    /// The key as written (quotes removed).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The bytes of the key (inside its quotes when quoted).
    pub fn key_span(&self) -> Range<usize> {
        self.key_span.clone()
    }

    /// The 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The enclosing entry (`input` for `input.path`), by index in
    /// [`FrontmatterOutline::entries`].
    pub fn parent(&self) -> Option<usize> {
        self.parent
    }
}

/// A frontmatter field the format defines, for editors: hover text and completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDoc {
    /// The key, dotted for nested ones (`input.path`).
    pub key: &'static str,
    /// The value's type and limits, as a user writes it.
    pub kind: &'static str,
    /// Whether a prompt must declare it.
    pub required: bool,
    /// One line on what it is for.
    pub doc: &'static str,
}

/// Every frontmatter field the parser accepts (and nothing else: any other key is an
/// `unknown_field` error). Nested fields are dotted.
pub const FRONTMATTER_FIELDS: &[FieldDoc] = &[
    FieldDoc {
        key: "name",
        kind: "text, one line, 1 to 128 bytes",
        required: true,
        doc: "The prompt's name, as catalogs and the MCP server list it.",
    },
    FieldDoc {
        key: "description",
        kind: "text, not empty",
        required: true,
        doc: "One line on what the prompt does.",
    },
    FieldDoc {
        key: "promptforge",
        kind: "version number, major version 1 (`1`, `1.0`)",
        required: true,
        doc: "The format version: marks the file as a PromptForge prompt.",
    },
    FieldDoc {
        key: "version",
        kind: "text or number",
        required: false,
        doc: "The author's own revision of the prompt.",
    },
    FieldDoc {
        key: "max_tool_iterations",
        kind: "integer, 1 to 1000 (default 24)",
        required: false,
        doc: "Model round-trips allowed in each tool loop.",
    },
    FieldDoc {
        key: "input",
        kind: "mapping: `path` (required) and `description`",
        required: false,
        doc: "The store file the prompt expects (metadata: callers seed it).",
    },
    FieldDoc {
        key: "output",
        kind: "mapping: `path` (required) and `description`",
        required: false,
        doc: "The store file the prompt leaves behind (metadata).",
    },
    FieldDoc {
        key: "default_return",
        kind: "text",
        required: false,
        doc: "The run's result when the walk falls off its last section.",
    },
    FieldDoc {
        key: "input.path",
        kind: "store path: `/`-separated, no `.` or `..` segments, at most 1024 bytes",
        required: true,
        doc: "Where the input file sits in the store (`store.read(path)`).",
    },
    FieldDoc {
        key: "input.description",
        kind: "text",
        required: false,
        doc: "What the input file is, for callers and `list_prompts`.",
    },
    FieldDoc {
        key: "output.path",
        kind: "store path: `/`-separated, no `.` or `..` segments, at most 1024 bytes",
        required: true,
        doc: "Where the prompt writes its output file in the store.",
    },
    FieldDoc {
        key: "output.description",
        kind: "text",
        required: false,
        doc: "What the output file is, for callers and `list_prompts`.",
    },
];

/// Splits a section address such as `## Research` into its level and name (surrounding
/// blanks ignored), as `jump`, `execute`, `fanout` and `list_from_section` read their
/// target; `None` when it is not one.
///
/// ```
/// use promptforge_core::parse::parse_address;
/// assert_eq!(parse_address("## Research"), Some((2, "Research")));
/// assert_eq!(parse_address("Research"), None);
/// ```
pub fn parse_address(address: &str) -> Option<(u8, &str)> {
    let address = address.trim();
    let hashes = address.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &address[hashes..];
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let name = rest.trim();
    (!name.is_empty()).then_some((u8::try_from(hashes).ok()?, name))
}

/// What a region's reading found that its section records.
struct RegionFacts {
    off_walk: bool,
    has_items: bool,
}

struct Reader<'a> {
    text: &'a str,
    lines: &'a Lines,
    out: &'a mut Outline,
}

impl Reader<'_> {
    /// Reads one region's executable content with the parser's rules (a leading `---` in a
    /// section takes it off the walk; any other `---` ends what executes).
    fn region(&mut self, elements: &[Element], owner: Owner, kind: RegionKind) -> RegionFacts {
        let mut has_items = false;
        let walked: Result<bool, std::convert::Infallible> = walk_region(elements, kind, |piece| {
            match piece {
                Piece::Prose(range) => self.prose(range, owner),
                Piece::Fence { range, role, .. } => {
                    let owner = if role == FenceRole::Shared && kind == RegionKind::H1 {
                        Owner::Shared
                    } else {
                        owner
                    };
                    self.lua(range.clone(), owner);
                }
                Piece::List(_) => has_items = true,
            }
            Ok(())
        });
        RegionFacts {
            off_walk: match walked {
                Ok(off_walk) => off_walk,
            },
            has_items,
        }
    }

    /// Records the code between a fence's opening line and its closing line (or the end
    /// of an unclosed fence).
    fn lua(&mut self, fence: Range<usize>, owner: Owner) {
        let raw = &self.text[fence.clone()];
        let Some(open_end) = raw.find('\n') else {
            return;
        };
        let code_start = fence.start + open_end + 1;
        let body = &self.text[code_start..fence.end];
        // The closing fence is the last line holding only backticks (after blanks).
        let trimmed = body.trim_end_matches(['\n', ' ', '\t']);
        let last_line_start = trimmed.rfind('\n').map_or(0, |at| at + 1);
        let last = trimmed[last_line_start..].trim();
        let code_end = if last.len() >= 3 && last.bytes().all(|b| b == b'`') {
            code_start + last_line_start
        } else {
            fence.end
        };
        self.out.lua.push(LuaBlock {
            code: code_start..code_end.max(code_start),
            line: self.lines.line_of(fence.start) + 1,
            owner,
        });
    }

    /// Records the placeholders of one prose run, scanning as the template parser does;
    /// a malformed placeholder is recorded without a path, an unclosed one ends the run.
    fn prose(&mut self, range: Range<usize>, owner: Owner) {
        if range.start >= range.end {
            return;
        }
        let raw = &self.text[range.clone()];
        let text = raw.trim();
        if text.is_empty() {
            return;
        }
        let offset = range.start + (raw.len() - raw.trim_start().len());
        let mut from = 0;
        while let Some(found) = text[from..].find("{{") {
            let open = from + found;
            if open > 0 && text.as_bytes()[open - 1] == b'\\' {
                from = open + 2;
                continue;
            }
            let after = open + 2;
            let Some(close) = text[after..].find("}}") else {
                let inner = trimmed_range(text, after..text.len());
                self.out.placeholders.push(Placeholder {
                    span: offset + open..offset + text.len(),
                    inner: offset + inner.start..offset + inner.end,
                    path: None,
                    owner,
                });
                return;
            };
            let inner = trimmed_range(text, after..after + close);
            self.out.placeholders.push(Placeholder {
                span: offset + open..offset + after + close + 2,
                inner: offset + inner.start..offset + inner.end,
                path: parse_path(&text[inner]).ok(),
                owner,
            });
            from = after + close + 2;
        }
    }
}

/// `range` of `text` without its leading and trailing blanks.
fn trimmed_range(text: &str, range: Range<usize>) -> Range<usize> {
    let slice = &text[range.clone()];
    let start = range.start + (slice.len() - slice.trim_start().len());
    let end = range.end - (slice.len() - slice.trim_end().len());
    start..end.max(start)
}

/// A heading's range without its trailing line break.
fn trim_newline(text: &str, range: Range<usize>) -> Range<usize> {
    let slice = &text[range.clone()];
    range.start..range.start + slice.trim_end_matches(['\n', '\r']).len()
}

/// The bytes of a heading's text as written: an ATX heading's content between the `#`
/// marks and an optional closing sequence, or a setext heading's text lines.
fn heading_name_span(text: &str, range: Range<usize>) -> Range<usize> {
    let slice = &text[range.clone()];
    let first_line_len = slice.find('\n').unwrap_or(slice.len());
    let first = &slice[..first_line_len];
    let indent = first.len() - first.trim_start().len();
    if first[indent..].starts_with('#') {
        let after_marks = indent + first[indent..].bytes().take_while(|&b| b == b'#').count();
        let content = &first[after_marks..];
        let lead = content.len() - content.trim_start().len();
        let mut body = content.trim();
        // An optional closing sequence: blanks, then only `#` marks.
        let without_closing = body.trim_end_matches('#');
        if without_closing.is_empty() {
            body = "";
        } else if without_closing.len() != body.len() && without_closing.ends_with([' ', '\t']) {
            body = without_closing.trim_end();
        }
        let start = range.start + after_marks + lead;
        return start..start + body.len();
    }
    // Setext: every line but the underline.
    let lines: Vec<&str> = slice.trim_end_matches('\n').split('\n').collect();
    let content_lines = lines.len().saturating_sub(1).max(1);
    let content_len: usize = lines[..content_lines]
        .iter()
        .map(|l| l.len() + 1)
        .sum::<usize>()
        - 1;
    let span = trimmed_range(
        text,
        range.start..range.start + content_len.min(slice.len()),
    );
    span.start..span.end
}

/// The keys of the frontmatter YAML: unindented `key:` lines and the keys nested one level
/// under them. Comments, list items and continuation lines are skipped.
fn frontmatter_outline(
    text: &str,
    split: &frontmatter::Split<'_>,
    lines: &Lines,
) -> FrontmatterOutline {
    let yaml_start = text.find('\n').map_or(text.len(), |at| at + 1);
    let yaml = yaml_start..yaml_start + split.yaml.len();
    let mut entries: Vec<FrontmatterEntry> = Vec::new();
    let mut last_top: Option<usize> = None;
    let mut offset = yaml_start;
    for line in split.yaml.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        let indent = content.len() - content.trim_start_matches([' ', '\t']).len();
        let rest = &content[indent..];
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with('-') {
            continue;
        }
        let Some((key, key_offset)) = yaml_key(rest) else {
            continue;
        };
        let parent = if indent == 0 { None } else { last_top };
        if indent > 0 && parent.is_none() {
            continue;
        }
        let start = line_start + indent + key_offset;
        entries.push(FrontmatterEntry {
            key: key.to_owned(),
            key_span: start..start + key.len(),
            line: lines.line_of(line_start),
            parent,
        });
        if indent == 0 {
            last_top = Some(entries.len() - 1);
        }
    }
    FrontmatterOutline { yaml, entries }
}

/// The key of a `key: value` line (plain, single- or double-quoted) and its offset in the
/// line; `None` when the line is not a mapping entry.
fn yaml_key(rest: &str) -> Option<(&str, usize)> {
    if let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let close = rest[1..].find(quote)? + 1;
        let after = rest[close + 1..].trim_start();
        return after.starts_with(':').then(|| (&rest[1..close], 1));
    }
    let colon = rest.find(':')?;
    let key = rest[..colon].trim_end();
    let followed = rest[colon + 1..].chars().next();
    let valid = !key.is_empty()
        && !key.contains(['{', '[', '"', '\'', '#'])
        && followed.is_none_or(char::is_whitespace);
    valid.then_some((key, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n";

    fn names(map: &Outline, ids: &[usize]) -> Vec<String> {
        ids.iter().map(|&id| map.sections()[id].address()).collect()
    }

    #[test]
    fn addresses_carry_level_and_name() {
        assert_eq!(parse_address("## Research"), Some((2, "Research")));
        assert_eq!(parse_address("  ### Child  "), Some((3, "Child")));
        assert_eq!(parse_address("Research"), None);
        assert_eq!(parse_address("##Research"), None);
        assert_eq!(parse_address("####### Deep"), None);
        assert_eq!(parse_address("## "), None);
    }

    #[test]
    fn the_tree_and_spans_follow_the_headings() {
        let source = format!(
            "{HEAD}# Title\n\n```lua\nvar.a = 1\n```\n\n## Main ##\n\n### Child\n\n## Other\n\n---\n\n- one\n- two\n"
        );
        let map = outline(&source);
        assert_eq!(map.title().map(OutlineHeading::name), Some("Title"));
        assert_eq!(names(&map, map.roots()), ["## Main", "## Other"]);
        let main = &map.sections()[0];
        assert_eq!(&source[main.heading().name_span()], "Main");
        assert_eq!(&source[main.heading().span()], "## Main ##");
        assert_eq!(names(&map, main.children()), ["### Child"]);
        let other = &map.sections()[2];
        assert!(other.is_off_walk() && other.has_items());
        assert_eq!(map.lua_blocks().len(), 1);
        let block = &map.lua_blocks()[0];
        assert_eq!(&source[block.code()], "var.a = 1\n");
        assert_eq!((block.line(), block.owner()), (10, Owner::Preamble));
        assert_eq!(
            map.section_at(source.find("### Child").unwrap_or(0) + 4),
            Some(1)
        );
        assert_eq!(map.section_at(3), None);
    }

    #[test]
    fn visibility_follows_the_guide() {
        let source = format!(
            "{HEAD}# T\n\n## A\n\n### A1\n\n#### Deep\n\n### A2\n\n## B\n\n### B1\n\n## C\n"
        );
        let map = outline(&source);
        let id = |address: &str| {
            map.sections()
                .iter()
                .position(|s| s.address() == address)
                .unwrap_or(usize::MAX)
        };
        let a = id("## A");
        assert_eq!(
            names(&map, &map.visible(Scope::Preamble)),
            ["## A", "## B", "## C"]
        );
        assert_eq!(
            names(&map, &map.visible(Scope::Section(a))),
            ["## B", "## C", "### A1", "### A2"]
        );
        let a1 = id("### A1");
        assert_eq!(
            names(&map, &map.visible(Scope::Section(a1))),
            ["### A2", "#### Deep"]
        );
        // Not the parent, not itself, not a niece, not a grandchild.
        for hidden in ["## A", "### A1", "### B1"] {
            assert_eq!(
                map.resolve(Scope::Section(a1), hidden),
                Resolution::NotVisible
            );
        }
        assert_eq!(
            map.resolve(Scope::Section(a), "#### Deep"),
            Resolution::NotVisible
        );
        // Level disambiguates.
        assert_eq!(
            map.resolve(Scope::Section(a), "### B"),
            Resolution::NotVisible
        );
        assert_eq!(
            map.resolve(Scope::Section(a), "B"),
            Resolution::NotAnAddress
        );
        // An arm of `### A1` spawned from `## A`: A's set without A1, plus A1's children.
        let arm = Scope::Arm {
            worker: a1,
            caller: Some(a),
        };
        assert_eq!(
            names(&map, &map.visible(arm)),
            ["## B", "## C", "### A2", "#### Deep"]
        );
        assert_eq!(map.resolve(arm, "## C"), Resolution::Found(id("## C")));
    }

    #[test]
    fn comments_and_inert_fences_are_not_code() {
        let source = format!(
            "{HEAD}# T\n\n## A\n\n```lua\nlocal a = 1\n```\n\n  ```lua\nindented\n```\n\nSay {{{{ var.x }}}} and \\{{{{ not }}}}.\n\n---\n\n```lua\ncommented()\n```\n\n{{{{ var.hidden }}}}\n"
        );
        let map = outline(&source);
        assert_eq!(map.lua_blocks().len(), 1);
        assert_eq!(paths(&map), [Some("var.x".to_owned())]);
        let placeholder = &map.placeholders()[0];
        assert_eq!(&source[placeholder.span()], "{{ var.x }}");
        assert_eq!(placeholder.segment_span(1).map(|s| &source[s]), Some("x"));
    }

    fn paths(map: &Outline) -> Vec<Option<String>> {
        map.placeholders()
            .iter()
            .map(|p| p.path().map(|path| path.join(".")))
            .collect()
    }

    #[test]
    fn broken_files_still_have_an_outline() {
        let source = format!(
            "{HEAD}# T\n\n## A\n\n#### Orphan\n\n```lua\nlocal = \n```\n\n## A\n\n{{{{ bad. }}}} then {{{{ var.ok }}}}\n\n{{{{ unclosed\n"
        );
        let map = outline(&source);
        assert_eq!(names(&map, map.roots()), ["## A", "## A"]);
        assert_eq!(names(&map, map.sections()[0].children()), ["#### Orphan"]);
        assert_eq!(map.lua_blocks()[0].owner(), Owner::Section(1));
        assert_eq!(paths(&map), [None, Some("var.ok".to_owned()), None]);
    }

    #[test]
    fn frontmatter_keys_are_listed_with_nesting() {
        let source = "---\nname: x\n\"description\": d\n# a comment\ninput:\n  path: in.md\n  descrption: typo\ncolour: red\n---\n\n# T\n";
        let map = outline(source);
        let front = map
            .frontmatter()
            .map(FrontmatterOutline::entries)
            .unwrap_or(&[]);
        let keys: Vec<(&str, usize, Option<usize>)> = front
            .iter()
            .map(|e| (e.key(), e.line(), e.parent()))
            .collect();
        assert_eq!(
            keys,
            [
                ("name", 2, None),
                ("description", 3, None),
                ("input", 5, None),
                ("path", 6, Some(2)),
                ("descrption", 7, Some(2)),
                ("colour", 8, None)
            ]
        );
        assert_eq!(&source[front[1].key_span()], "description");
    }

    #[test]
    fn setext_headings_and_crlf() {
        let source =
            format!("{HEAD}# T\n\nSetext Name\n---\n\n```lua\nx = 1\n```\n").replace('\n', "\r\n");
        let text = normalized(&source);
        let map = outline(&source);
        let section = &map.sections()[0];
        assert_eq!(section.address(), "## Setext Name");
        assert_eq!(&text[section.heading().name_span()], "Setext Name");
        assert_eq!(map.lua_blocks()[0].line(), 13);
    }

    #[test]
    fn every_documented_field_parses_and_nothing_else_does() {
        let value = |key: &str| match key {
            "max_tool_iterations" => "5",
            "input" | "output" => "\n  path: notes/file.md\n  description: a file",
            _ => "some text",
        };
        for field in FRONTMATTER_FIELDS.iter().filter(|f| !f.key.contains('.')) {
            let mut source = "---\nname: x\ndescription: d\npromptforge: 1\n".to_owned();
            if !field.required {
                source.push_str(&format!("{}: {}\n", field.key, value(field.key)));
            }
            source.push_str("---\n\n# T\n");
            assert!(
                crate::parse::check("t.md", &source).is_empty(),
                "{}: {source}",
                field.key
            );
        }
        let unknown = "---\nname: x\ndescription: d\npromptforge: 1\nnmae: y\n---\n\n# T\n";
        assert_eq!(crate::parse::check("t.md", unknown).len(), 1);
    }
}
