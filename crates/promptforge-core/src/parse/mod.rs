//! Parsing a prompt file: frontmatter, Markdown structure, templates and Lua compilation.
//!
//! The Markdown body is read with pulldown-cmark's offset iterator, so every decision
//! (heading levels, fences, thematic breaks, list items) follows CommonMark and every
//! diagnostic carries a byte span and a line.

mod check;
mod error;
mod frontmatter;
mod lines;
mod lua;
mod outline;
pub(crate) mod template;

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

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
    parse_inner(origin, source).map_err(|error| error.with_origin(origin))
}

fn parse_inner(origin: &str, source: &str) -> Result<PromptData, ParseError> {
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
    let frontmatter = frontmatter::parse(&split)?;
    let lines = Lines::new(source);
    let elements = elements(source, split.body_offset);

    let mut builder = Builder {
        source,
        lines: &lines,
        compiler: lua::Compiler::new(origin)?,
    };
    builder.build(frontmatter, elements, origin)
}

/// Reads the body into top-level elements.
fn elements(source: &str, body_offset: usize) -> Vec<Element> {
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

/// Walks a region's executable content with the `---` roles: in a section, a rule as the
/// first content takes it off the walk (the result is `true`); any other rule ends what
/// executes. The parser and [`outline`] both read regions through it.
fn walk_region<E>(
    elements: &[Element],
    kind: RegionKind,
    mut visit: impl FnMut(Piece<'_>) -> Result<(), E>,
) -> Result<bool, E> {
    let Some(first) = elements.first() else {
        return Ok(false);
    };
    let end = elements
        .last()
        .map_or(first.range().start, |e| e.range().end);
    let mut prose_from = first.range().start;
    let mut off_walk = false;
    for (index, element) in elements.iter().enumerate() {
        match element {
            Element::Rule { range } if index == 0 && kind == RegionKind::Section => {
                off_walk = true;
                prose_from = range.end;
            }
            Element::Rule { range } => {
                visit(Piece::Prose(prose_from..range.start))?;
                return Ok(off_walk);
            }
            Element::Fence {
                range,
                role: role @ (FenceRole::Lua | FenceRole::Shared),
                code,
            } => {
                visit(Piece::Prose(prose_from..range.start))?;
                visit(Piece::Fence {
                    range,
                    role: *role,
                    code,
                })?;
                prose_from = range.end;
            }
            Element::List { items, .. } => visit(Piece::List(items))?,
            _ => {}
        }
    }
    visit(Piece::Prose(prose_from..end))?;
    Ok(off_walk)
}

struct Builder<'a> {
    source: &'a str,
    lines: &'a Lines,
    compiler: lua::Compiler,
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
struct Region {
    blocks: Vec<Block>,
    shared: Vec<LuaChunk>,
    items: Vec<String>,
    off_walk: bool,
}

impl Builder<'_> {
    fn build(
        &mut self,
        frontmatter: Frontmatter,
        elements: Vec<Element>,
        origin: &str,
    ) -> Result<PromptData, ParseError> {
        let heading_at = heading_indices(&elements);
        let Some(&title_index) = heading_at.first() else {
            return Err(ParseError::new(
                ParseErrorKind::MissingTitle,
                "the prompt has no `# Title` heading (H1)",
            ));
        };
        if let Some(first) = elements.first().filter(|_| title_index > 0) {
            let range = first.range();
            return Err(ParseError::new(
                ParseErrorKind::ContentBeforeTitle,
                "content before the `# Title` heading: the H1 must come first after the frontmatter",
            )
            .at(self.lines.line_of(range.start), Some(range)));
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

        let region_end = |k: usize| heading_at.get(k + 1).copied().unwrap_or(elements.len());
        let h1 = self.region(&elements[title_index + 1..region_end(0)], RegionKind::H1)?;

        let mut sections: Vec<Section> = Vec::new();
        let mut roots: Vec<SectionId> = Vec::new();
        let mut stack: Vec<SectionId> = Vec::new();
        // Sibling names by parent, so the uniqueness check is O(1) per heading.
        let mut names: std::collections::HashMap<(Option<SectionId>, String), SectionId> =
            std::collections::HashMap::new();
        for (k, &at) in heading_at.iter().enumerate().skip(1) {
            let Element::Heading { level, text, range } = &elements[at] else {
                return Err(not_a_heading());
            };
            let line = self.lines.line_of(range.start);
            let name = text.trim().to_owned();
            let located = |kind, message: String| {
                ParseError::new(kind, message).at(line, Some(range.clone()))
            };
            if *level == 1 {
                return Err(located(
                    ParseErrorKind::MultipleTitles,
                    format!(
                        "a second H1 `# {name}`: a prompt has exactly one title (the first is on line {})",
                        self.lines.line_of(title_range.start)
                    ),
                ));
            }
            if name.is_empty() {
                return Err(located(
                    ParseErrorKind::EmptyHeading,
                    "a heading has no text".into(),
                ));
            }
            while stack
                .last()
                .is_some_and(|&top| sections[top].level >= *level)
            {
                stack.pop();
            }
            let parent = stack.last().copied();
            match parent {
                None if *level != 2 => {
                    return Err(located(
                        ParseErrorKind::RootNotH2,
                        format!(
                            "`{}` is a top-level section, so it must be an H2 (`## {name}`)",
                            crate::prompt::heading(*level, &name)
                        ),
                    ));
                }
                Some(p) if *level != sections[p].level + 1 => {
                    return Err(located(
                        ParseErrorKind::OrphanHeading,
                        format!(
                            "`{}` sits directly under `{}` (line {}) and skips a level; use `{}`",
                            crate::prompt::heading(*level, &name),
                            sections[p].heading(),
                            sections[p].line,
                            crate::prompt::heading(sections[p].level + 1, &name)
                        ),
                    ));
                }
                _ => {}
            }
            if let Some(&twin) = names.get(&(parent, name.clone())) {
                return Err(located(
                    ParseErrorKind::DuplicateSection,
                    format!(
                        "duplicate sibling section `{}` on lines {} and {}; sibling names must be unique",
                        crate::prompt::heading(*level, &name),
                        sections[twin].line,
                        line
                    ),
                ));
            }
            let region = self.region(&elements[at + 1..region_end(k)], RegionKind::Section)?;
            let id = sections.len();
            names.insert((parent, name.clone()), id);
            sections.push(Section {
                level: *level,
                name,
                line,
                span: range.clone(),
                off_walk: region.off_walk,
                blocks: region.blocks,
                items: region.items,
                parent,
                position: parent.map_or(roots.len(), |p| sections[p].children.len()),
                children: Vec::new(),
            });
            match parent {
                Some(p) => sections[p].children.push(id),
                None => roots.push(id),
            }
            stack.push(id);
        }

        Ok(PromptData {
            origin: origin.to_owned(),
            frontmatter,
            title: title.trim().to_owned(),
            h1_blocks: h1.blocks,
            shared: h1.shared,
            prelude: self.compiler.compile_prelude()?,
            chunks: self.compiler.finish()?,
            sections,
            roots,
            names,
        })
    }

    /// Splits a region's elements into Lua and prose blocks, applying the `---` roles.
    fn region(&mut self, elements: &[Element], kind: RegionKind) -> Result<Region, ParseError> {
        let mut region = Region {
            blocks: Vec::new(),
            shared: Vec::new(),
            items: Vec::new(),
            off_walk: false,
        };
        let off_walk = walk_region(elements, kind, |piece| match piece {
            Piece::Prose(range) => self.prose(&mut region, range),
            Piece::Fence { range, role, code } => {
                let line = self.lines.line_of(range.start);
                if role == FenceRole::Shared && kind == RegionKind::Section {
                    return Err(ParseError::new(
                        ParseErrorKind::MisplacedShared,
                        "a `lua shared` block belongs in the H1 region, before the first section",
                    )
                    .at(line, Some(range.clone())));
                }
                let chunk = self.compiler.compile(code, line + 1, range.clone())?;
                if role == FenceRole::Shared {
                    region.shared.push(chunk);
                } else {
                    region.blocks.push(Block::Lua(chunk));
                }
                Ok(())
            }
            Piece::List(items) => {
                region
                    .items
                    .extend(items.iter().map(|r| list_item(&self.source[r.clone()])));
                Ok(())
            }
        })?;
        region.off_walk = off_walk;
        Ok(region)
    }

    fn prose(&self, region: &mut Region, range: Range<usize>) -> Result<(), ParseError> {
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
        let template = Template::parse(text, offset, line)?;
        region.blocks.push(Block::Prose(Prose { template, line }));
        Ok(())
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
