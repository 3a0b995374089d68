//! Parsing a prompt file: frontmatter, Markdown structure, templates and Lua compilation.
//!
//! The Markdown body is read with pulldown-cmark's offset iterator, so every decision
//! (heading levels, fences, thematic breaks, list items) follows CommonMark and every
//! diagnostic carries a byte span and a line.

pub(crate) mod check;
mod error;
mod frontmatter;
mod lines;
mod lua;
mod outline;
pub(crate) mod template;

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use check::Recovery;
pub use check::{Diagnostic, MAX_DIAGNOSTICS, check};
pub use error::{ParseError, ParseErrorKind};
pub use frontmatter::{
    FileDeclaration, Frontmatter, MAX_FRONTMATTER_DEPTH, SUPPORTED_MAJOR, promptforge_version,
};
pub use outline::{
    FRONTMATTER_FIELDS, FieldDoc, FrontmatterEntry, FrontmatterOutline, LuaBlock, Outline,
    OutlineHeading, OutlineSection, Owner, Placeholder, Resolution, Scope, normalized, outline,
    parse_address,
};

use crate::prompt::{Block, LuaChunk, PromptData, Prose, Section, SectionId};
use lines::Lines;
use template::Template;

/// A top-level Markdown element of the body.
enum Element {
    Heading {
        level: u8,
        text: String,
        range: Range<usize>,
    },
    Fence {
        range: Range<usize>,
        role: FenceRole,
        code: String,
    },
    Rule {
        range: Range<usize>,
    },
    List {
        range: Range<usize>,
        items: Vec<Range<usize>>,
    },
    Other {
        range: Range<usize>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FenceRole {
    Lua,
    Shared,
    Inert,
}

impl Element {
    fn range(&self) -> Range<usize> {
        match self {
            Self::Heading { range, .. }
            | Self::Fence { range, .. }
            | Self::Rule { range }
            | Self::List { range, .. }
            | Self::Other { range } => range.clone(),
        }
    }
}

/// The largest prompt source accepted, in bytes (8 MiB): prompts are hand-written text, and
/// everything a parse builds is proportional to the source.
pub const MAX_PROMPT_BYTES: usize = 8 * 1024 * 1024;

/// Turns a prompt file's bytes into its source text: refuses sources over
/// [`MAX_PROMPT_BYTES`] and bytes that are not UTF-8 (naming the byte offset and line of the
/// first invalid sequence). `origin` names the file in the error.
pub fn source_from_bytes(origin: &str, bytes: Vec<u8>) -> Result<String, ParseError> {
    check_size(bytes.len()).map_err(|e| e.with_origin(origin))?;
    String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        let line = 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count();
        ParseError::new(
            ParseErrorKind::InvalidEncoding,
            format!(
                "the prompt is not UTF-8 text: invalid byte 0x{:02x} at byte offset {offset}",
                bytes[offset]
            ),
        )
        .at(line, Some(offset..offset + 1))
        .with_origin(origin)
    })
}

fn check_size(len: usize) -> Result<(), ParseError> {
    if len > MAX_PROMPT_BYTES {
        return Err(ParseError::new(
            ParseErrorKind::TooLarge,
            format!(
                "the prompt is {len} bytes; prompts may be at most {} MiB ({MAX_PROMPT_BYTES} bytes)",
                MAX_PROMPT_BYTES / (1024 * 1024)
            ),
        ));
    }
    Ok(())
}

pub(crate) fn parse(origin: &str, source: &str) -> Result<PromptData, ParseError> {
    parse_with(origin, source, &mut Recovery::none()).map_err(|error| error.with_origin(origin))
}

/// Parses `source`, handing each problem found to `recovery`: what it takes, parsing goes
/// on past (as if the text the problem points at were erased); the first problem it does
/// not take, or one nothing can be recovered from, is the error.
fn parse_with(
    origin: &str,
    source: &str,
    recovery: &mut Recovery,
) -> Result<PromptData, ParseError> {
    #[cfg(test)]
    check::work::parse_pass();
    check_size(source.len())?;
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let normalized;
    let source = if source.contains('\r') {
        normalized = source.replace("\r\n", "\n");
        normalized.as_str()
    } else {
        source
    };
    let split = frontmatter::split(source).ok_or_else(|| {
        if frontmatter::opens(source) {
            return ParseError::new(
                ParseErrorKind::MissingFrontmatter,
                "the frontmatter opened by `---` on line 1 has no closing `---` line; end the \
                 YAML block with a line holding only `---`",
            )
            .at(1, Some(0..3));
        }
        ParseError::new(
            ParseErrorKind::MissingFrontmatter,
            "a prompt starts with `---` delimited YAML frontmatter declaring name, description \
             and promptforge",
        )
        .at(1, Some(0..0))
    })?;
    let frontmatter = match frontmatter::parse(&split) {
        Ok(frontmatter) => frontmatter,
        Err(error) => {
            // The body does not depend on the frontmatter: it is still checked.
            recovery.recover(error)?;
            Frontmatter::stand_in()
        }
    };
    let lines = Lines::new(source);
    let elements = elements(source, split.body_offset);

    let mut builder = Builder {
        source,
        lines: &lines,
        compiler: lua::Compiler::new(origin)?,
        recovery,
    };
    builder.build(frontmatter, elements, origin)
}

/// Reads the body into top-level elements.
fn elements(source: &str, body_offset: usize) -> Vec<Element> {
    #[cfg(test)]
    check::work::markdown_pass();
    let body = &source[body_offset..];
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current: Option<Element> = None;
    for (event, range) in Parser::new_ext(body, options).into_offset_iter() {
        let range = range.start + body_offset..range.end + body_offset;
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    current = Some(match tag {
                        Tag::Heading { level, .. } => Element::Heading {
                            level: level as u8,
                            text: String::new(),
                            range,
                        },
                        Tag::CodeBlock(kind) => Element::Fence {
                            role: fence_role(source, &range, &kind),
                            range,
                            code: String::new(),
                        },
                        Tag::List(_) => Element::List {
                            range,
                            items: Vec::new(),
                        },
                        _ => Element::Other { range },
                    });
                } else if depth == 1
                    && let (Some(Element::List { items, .. }), Tag::Item) = (&mut current, &tag)
                {
                    items.push(range);
                }
                depth += 1;
            }
            Event::End(end) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    out.extend(current.take());
                }
                let _: TagEnd = end;
            }
            Event::Rule if depth == 0 => out.push(Element::Rule { range }),
            Event::Text(text) | Event::Code(text) => match &mut current {
                Some(Element::Heading { text: heading, .. }) => heading.push_str(&text),
                Some(Element::Fence { code, .. }) => code.push_str(&text),
                _ => {}
            },
            Event::SoftBreak | Event::HardBreak => {
                if let Some(Element::Heading { text, .. }) = &mut current {
                    text.push(' ');
                }
            }
            _ if depth == 0 => out.push(Element::Other { range }),
            _ => {}
        }
    }
    out
}

/// Only an unindented, exactly-three-backtick `lua` (or `lua shared`) opener is executable.
fn fence_role(source: &str, range: &Range<usize>, kind: &CodeBlockKind<'_>) -> FenceRole {
    if !matches!(kind, CodeBlockKind::Fenced(_)) {
        return FenceRole::Inert;
    }
    let at_line_start = range.start == 0 || source.as_bytes()[range.start - 1] == b'\n';
    let opener = source[range.start..]
        .lines()
        .next()
        .unwrap_or("")
        .trim_end();
    match (at_line_start, opener) {
        (true, "```lua") => FenceRole::Lua,
        (true, "```lua shared") => FenceRole::Shared,
        _ => FenceRole::Inert,
    }
}

/// The indices of the headings among `elements`.
fn heading_indices(elements: &[Element]) -> Vec<usize> {
    elements
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Element::Heading { .. }))
        .map(|(i, _)| i)
        .collect()
}

/// One piece of a region's executable content, in source order.
enum Piece<'e> {
    /// The text between code (possibly blank).
    Prose(Range<usize>),
    /// An executable ```` ```lua ```` or ```` ```lua shared ```` fence.
    Fence {
        range: &'e Range<usize>,
        role: FenceRole,
        code: &'e str,
    },
    /// A list's items.
    List(&'e [Range<usize>]),
}

/// Walks a region's executable content with the `---` roles, one element at a time: in a
/// section, a rule as the first content takes it off the walk; any other rule ends what
/// executes. The parser and [`outline`] both read regions through it.
///
/// Each piece goes to a visitor, which answers whether the piece stays: a fence that
/// `check` recovers from (as if erased) does not count as the region's first content. A
/// heading that `check` recovers from is [`Walk::skip`]ped: the walk goes on in the same
/// region. Each byte of prose is visited once.
struct Walk {
    kind: RegionKind,
    /// The region's elements walked so far, without the erased ones.
    seen: usize,
    /// Where the prose not visited yet starts; `None` before the region's first element.
    prose_from: Option<usize>,
    /// Where the last element walked ends.
    end: usize,
    /// A `---` ended the executable content: nothing more is visited.
    ended: bool,
    /// A leading `---` took the section off the walk.
    off_walk: bool,
}

impl Walk {
    fn new(kind: RegionKind) -> Self {
        Self {
            kind,
            seen: 0,
            prose_from: None,
            end: 0,
            ended: false,
            off_walk: false,
        }
    }

    /// Walks `element`, visiting the pieces it completes.
    fn step<E>(
        &mut self,
        element: &Element,
        visit: &mut impl FnMut(Piece<'_>) -> Result<bool, E>,
    ) -> Result<(), E> {
        if self.ended {
            return Ok(());
        }
        let range = element.range();
        let from = *self.prose_from.get_or_insert(range.start);
        self.end = range.end;
        let leading = self.seen == 0;
        self.seen += 1;
        match element {
            Element::Rule { range } if leading && self.kind == RegionKind::Section => {
                self.off_walk = true;
                self.prose_from = Some(range.end);
            }
            Element::Rule { range } => {
                visit(Piece::Prose(from..range.start))?;
                self.ended = true;
            }
            Element::Fence {
                range,
                role: role @ (FenceRole::Lua | FenceRole::Shared),
                code,
            } => {
                visit(Piece::Prose(from..range.start))?;
                let kept = visit(Piece::Fence {
                    range,
                    role: *role,
                    code,
                })?;
                if !kept {
                    self.seen -= 1;
                }
                self.prose_from = Some(range.end);
            }
            Element::List { items, .. } => {
                visit(Piece::List(items))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Visits the prose up to the end of the last element walked (where a region ends).
    fn flush<E>(&mut self, visit: &mut impl FnMut(Piece<'_>) -> Result<bool, E>) -> Result<(), E> {
        if self.ended {
            return Ok(());
        }
        if let Some(from) = self.prose_from {
            visit(Piece::Prose(from..self.end))?;
            self.prose_from = Some(self.end.max(from));
        }
        Ok(())
    }

    /// Goes on past an erased heading ending at `end`, in the same region.
    fn skip(&mut self, end: usize) {
        if self.prose_from.is_some() {
            self.prose_from = Some(end);
            self.end = end;
        }
    }
}

/// Walks a whole region with [`Walk`]; `true` when a leading `---` takes it off the walk.
fn walk_region<E>(
    elements: &[Element],
    kind: RegionKind,
    mut visit: impl FnMut(Piece<'_>) -> Result<(), E>,
) -> Result<bool, E> {
    let mut walk = Walk::new(kind);
    let mut visit = |piece: Piece<'_>| visit(piece).map(|()| true);
    for element in elements {
        walk.step(element, &mut visit)?;
    }
    walk.flush(&mut visit)?;
    Ok(walk.off_walk)
}

struct Builder<'a> {
    source: &'a str,
    lines: &'a Lines,
    compiler: lua::Compiler,
    recovery: &'a mut Recovery,
}

/// Which region a run of elements is: the rules for `---` and `lua shared` differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegionKind {
    /// The H1 region: `lua shared` blocks belong here; any `---`, even a leading one, ends
    /// its executable content.
    H1,
    /// A section's region: a leading `---` takes it off the walk, a later one ends its
    /// executable content; no `lua shared`.
    Section,
}

/// The executable content of one region (the H1 or a section).
#[derive(Default)]
struct Region {
    blocks: Vec<Block>,
    shared: Vec<LuaChunk>,
    items: Vec<String>,
}

/// The sections read so far, and the open path of headings a new one nests under.
#[derive(Default)]
struct Tree {
    sections: Vec<Section>,
    roots: Vec<SectionId>,
    stack: Vec<SectionId>,
    /// Sibling names by parent, so the uniqueness check is O(1) per heading.
    names: std::collections::HashMap<(Option<SectionId>, String), SectionId>,
}

impl Builder<'_> {
    fn build(
        &mut self,
        frontmatter: Frontmatter,
        elements: Vec<Element>,
        origin: &str,
    ) -> Result<PromptData, ParseError> {
        let Some(title_index) = elements
            .iter()
            .position(|e| matches!(e, Element::Heading { .. }))
        else {
            return Err(ParseError::new(
                ParseErrorKind::MissingTitle,
                "the prompt has no `# Title` heading (H1)",
            ));
        };
        // Each element before the title is one problem.
        for element in &elements[..title_index] {
            let range = element.range();
            let blank = self.source[range.clone()].trim().is_empty();
            let error = ParseError::new(
                ParseErrorKind::ContentBeforeTitle,
                "content before the `# Title` heading: the H1 must come first after the frontmatter",
            )
            .at(self.lines.line_of(range.start), Some(range));
            if blank {
                return Err(error);
            }
            self.recovery.recover(error)?;
        }
        let Element::Heading {
            level,
            text: title,
            range: title_range,
        } = &elements[title_index]
        else {
            return Err(not_a_heading());
        };
        if *level != 1 {
            return Err(ParseError::new(
                ParseErrorKind::MissingTitle,
                "the first heading must be the `# Title` (H1)",
            )
            .at(
                self.lines.line_of(title_range.start),
                Some(title_range.clone()),
            ));
        }
        let title_line = self.lines.line_of(title_range.start);

        let mut tree = Tree::default();
        let mut h1 = Region::default();
        // The region being walked: the H1's (`None`) or a section's.
        let mut owner: Option<SectionId> = None;
        let mut region = Region::default();
        let mut walk = Walk::new(RegionKind::H1);
        for element in &elements[title_index + 1..] {
            let kind = walk.kind;
            let mut visit = |piece: Piece<'_>| self.piece(&mut region, kind, piece);
            let Element::Heading { level, text, range } = element else {
                walk.step(element, &mut visit)?;
                continue;
            };
            walk.flush(&mut visit)?;
            match self.section(&tree, *level, text, range, title_line) {
                Ok(section) => {
                    close(
                        &mut tree,
                        &mut h1,
                        owner,
                        std::mem::take(&mut region),
                        &walk,
                    );
                    owner = Some(tree.open(section));
                    walk = Walk::new(RegionKind::Section);
                }
                Err(error) => {
                    self.recovery.recover(error)?;
                    walk.skip(range.end);
                }
            }
        }
        let kind = walk.kind;
        walk.flush(&mut |piece: Piece<'_>| self.piece(&mut region, kind, piece))?;
        close(&mut tree, &mut h1, owner, region, &walk);

        Ok(PromptData {
            origin: origin.to_owned(),
            frontmatter,
            title: title.trim().to_owned(),
            h1_blocks: h1.blocks,
            shared: h1.shared,
            prelude: self.compiler.compile_prelude()?,
            chunks: self.compiler.finish()?,
            sections: tree.sections,
            roots: tree.roots,
            names: tree.names,
        })
    }

    /// The section a heading opens, checked against the tree so far (which it leaves as it
    /// is: a heading in error is not part of the tree).
    fn section(
        &self,
        tree: &Tree,
        level: u8,
        text: &str,
        range: &Range<usize>,
        title_line: usize,
    ) -> Result<Section, ParseError> {
        let line = self.lines.line_of(range.start);
        let name = text.trim().to_owned();
        let located =
            |kind, message: String| ParseError::new(kind, message).at(line, Some(range.clone()));
        if level == 1 {
            return Err(located(
                ParseErrorKind::MultipleTitles,
                format!(
                    "a second H1 `# {name}`: a prompt has exactly one title (the first is on line {title_line})"
                ),
            ));
        }
        if name.is_empty() {
            return Err(located(
                ParseErrorKind::EmptyHeading,
                "a heading has no text".into(),
            ));
        }
        let sections = &tree.sections;
        let parent = tree.parent_of(level);
        match parent {
            None if level != 2 => {
                return Err(located(
                    ParseErrorKind::RootNotH2,
                    format!(
                        "`{}` is a top-level section, so it must be an H2 (`## {name}`)",
                        crate::prompt::heading(level, &name)
                    ),
                ));
            }
            Some(p) if level != sections[p].level + 1 => {
                return Err(located(
                    ParseErrorKind::OrphanHeading,
                    format!(
                        "`{}` sits directly under `{}` (line {}) and skips a level; use `{}`",
                        crate::prompt::heading(level, &name),
                        sections[p].heading(),
                        sections[p].line,
                        crate::prompt::heading(sections[p].level + 1, &name)
                    ),
                ));
            }
            _ => {}
        }
        if let Some(&twin) = tree.names.get(&(parent, name.clone())) {
            return Err(located(
                ParseErrorKind::DuplicateSection,
                format!(
                    "duplicate sibling section `{}` on lines {} and {}; sibling names must be unique",
                    crate::prompt::heading(level, &name),
                    sections[twin].line,
                    line
                ),
            ));
        }
        Ok(Section {
            level,
            name,
            line,
            span: range.clone(),
            off_walk: false,
            blocks: Vec::new(),
            items: Vec::new(),
            parent,
            position: parent.map_or(tree.roots.len(), |p| sections[p].children.len()),
            children: Vec::new(),
        })
    }

    /// Takes one piece of a region's executable content into `region`; `false` when
    /// `check` recovers from an error in it (the piece counts as erased).
    fn piece(
        &mut self,
        region: &mut Region,
        kind: RegionKind,
        piece: Piece<'_>,
    ) -> Result<bool, ParseError> {
        match piece {
            Piece::Prose(range) => self.prose(region, range).map(|()| true),
            Piece::Fence { range, role, code } => {
                let line = self.lines.line_of(range.start);
                if role == FenceRole::Shared && kind == RegionKind::Section {
                    self.recovery.recover(
                        ParseError::new(
                            ParseErrorKind::MisplacedShared,
                            "a `lua shared` block belongs in the H1 region, before the first section",
                        )
                        .at(line, Some(range.clone())),
                    )?;
                    return Ok(false);
                }
                let chunk = match self.compiler.compile(code, line + 1, range.clone()) {
                    Ok(chunk) => chunk,
                    Err(error) => {
                        self.recovery.recover(error)?;
                        return Ok(false);
                    }
                };
                if role == FenceRole::Shared {
                    region.shared.push(chunk);
                } else {
                    region.blocks.push(Block::Lua(chunk));
                }
                Ok(true)
            }
            Piece::List(items) => {
                region
                    .items
                    .extend(items.iter().map(|r| list_item(&self.source[r.clone()])));
                Ok(true)
            }
        }
    }

    fn prose(&mut self, region: &mut Region, range: Range<usize>) -> Result<(), ParseError> {
        if range.start >= range.end {
            return Ok(());
        }
        let raw = &self.source[range.clone()];
        let text = raw.trim();
        if text.is_empty() {
            return Ok(());
        }
        let offset = range.start + (raw.len() - raw.trim_start().len());
        let line = self.lines.line_of(offset);
        let template = Template::parse(text, offset, line, self.recovery)?;
        region.blocks.push(Block::Prose(Prose { template, line }));
        Ok(())
    }
}

impl Tree {
    /// The section a heading of `level` nests under: the innermost open one above it.
    fn parent_of(&self, level: u8) -> Option<SectionId> {
        let open = self.open_above(level);
        open.checked_sub(1).map(|at| self.stack[at])
    }

    /// How many of the open headings stay open under a heading of `level`.
    fn open_above(&self, level: u8) -> usize {
        self.stack
            .iter()
            .rposition(|&id| self.sections[id].level < level)
            .map_or(0, |at| at + 1)
    }

    /// Adds a checked section and opens it; returns its id.
    fn open(&mut self, section: Section) -> SectionId {
        let id = self.sections.len();
        self.stack.truncate(self.open_above(section.level));
        self.names
            .insert((section.parent, section.name.clone()), id);
        match section.parent {
            Some(p) => self.sections[p].children.push(id),
            None => self.roots.push(id),
        }
        self.sections.push(section);
        self.stack.push(id);
        id
    }
}

/// Hands a walked region's content to its owner: the H1 (`None`) or a section.
fn close(tree: &mut Tree, h1: &mut Region, owner: Option<SectionId>, region: Region, walk: &Walk) {
    match owner {
        None => *h1 = region,
        Some(id) => {
            let section = &mut tree.sections[id];
            section.blocks = region.blocks;
            section.items = region.items;
            section.off_walk = walk.off_walk;
        }
    }
}

fn not_a_heading() -> ParseError {
    ParseError::new(
        ParseErrorKind::MissingTitle,
        "internal: heading index does not hold a heading",
    )
}

/// Strips a list marker (`-`, `*`, `+`, `1.`, `1)`) and dedents continuation lines.
fn list_item(raw: &str) -> String {
    let trimmed = raw.trim_start();
    let without_marker = if let Some(rest) = trimmed.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
        match trimmed[digits..].strip_prefix(['.', ')']) {
            Some(rest) if digits > 0 => rest,
            _ => trimmed,
        }
    };
    without_marker
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
