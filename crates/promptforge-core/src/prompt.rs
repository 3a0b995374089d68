//! The parsed prompt: frontmatter, the H1 region and the section tree.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::observe::{Observation, Observer};
use crate::parse::template::Template;
use crate::parse::{self, Frontmatter, ParseError};

/// Index of a section in the prompt's section arena.
pub(crate) type SectionId = usize;

/// A parsed, structurally valid prompt whose Lua is compiled.
///
/// A `Prompt` that exists can be run: parsing checked every structural rule, parsed every
/// template and compiled every Lua block. It is cheap to clone (the parsed data is shared).
#[derive(Clone)]
pub struct Prompt {
    pub(crate) data: Arc<PromptData>,
}

impl fmt::Debug for Prompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prompt")
            .field("name", &self.data.frontmatter.name())
            .field("origin", &self.data.origin)
            .field("sections", &self.data.sections.len())
            .finish()
    }
}

pub(crate) struct PromptData {
    pub(crate) origin: String,
    pub(crate) frontmatter: Frontmatter,
    pub(crate) title: String,
    pub(crate) h1_blocks: Vec<Block>,
    pub(crate) shared: Vec<LuaChunk>,
    /// The engine's prelude, compiled once.
    pub(crate) prelude: Arc<[u8]>,
    /// Every Lua block's bytecode (with absolute-line debug info), by chunk index.
    pub(crate) chunks: Vec<Arc<[u8]>>,
    pub(crate) sections: Vec<Section>,
    pub(crate) roots: Vec<SectionId>,
    /// Every section by (parent, name): sibling names are unique, so this addresses all.
    pub(crate) names: std::collections::HashMap<(Option<SectionId>, String), SectionId>,
}

/// A heading-delimited section of a prompt (H2 to H6).
#[derive(Debug)]
pub struct Section {
    pub(crate) level: u8,
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) span: Range<usize>,
    pub(crate) off_walk: bool,
    pub(crate) blocks: Vec<Block>,
    pub(crate) items: Vec<String>,
    pub(crate) parent: Option<SectionId>,
    /// The index of the section in its level (its parent's children, or the roots).
    pub(crate) position: usize,
    pub(crate) children: Vec<SectionId>,
}

impl Section {
    /// The heading level, 2 to 6.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The heading text.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of the section: `#` repeated `level` times, a space, the name.
    pub fn heading(&self) -> String {
        heading(self.level, &self.name)
    }

    /// The 1-based line of the heading.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The byte range of the heading in the prompt file.
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// Whether a leading `---` takes the section off the walk.
    pub fn is_off_walk(&self) -> bool {
        self.off_walk
    }

    /// The pre-parsed list items (bullets or numbered lines), markers stripped.
    pub fn items(&self) -> &[String] {
        &self.items
    }

    /// How many Lua blocks the section runs.
    pub fn lua_block_count(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Lua(_)))
            .count()
    }

    /// How many prose blocks reach the model.
    pub fn prose_block_count(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Prose(_)))
            .count()
    }
}

pub(crate) fn heading(level: u8, name: &str) -> String {
    format!("{} {}", "#".repeat(usize::from(level)), name)
}

/// One executable piece of a region, in source order.
#[derive(Debug)]
pub(crate) enum Block {
    Lua(LuaChunk),
    Prose(Prose),
}

/// A compiled Lua block.
pub(crate) struct LuaChunk {
    /// The index of the block's bytecode in [`PromptData::chunks`].
    pub(crate) index: usize,
    /// The 1-based line of the first line of code.
    pub(crate) line: usize,
}

impl fmt::Debug for LuaChunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LuaChunk(line {})", self.line)
    }
}

/// A prose block: the model-facing text between Lua blocks.
#[derive(Debug)]
pub(crate) struct Prose {
    pub(crate) template: Template,
    pub(crate) line: usize,
}

impl Prompt {
    /// Parses a prompt. `execution` and `observer` receive the parse observations.
    pub fn parse(
        source: &str,
        execution: &str,
        observer: &dyn Observer,
    ) -> Result<Self, ParseError> {
        Self::parse_named("prompt", source, execution, observer)
    }

    /// Parses a prompt whose diagnostics and Lua errors name `origin` (usually the file path).
    pub fn parse_named(
        origin: &str,
        source: &str,
        execution: &str,
        observer: &dyn Observer,
    ) -> Result<Self, ParseError> {
        observer.observe(execution, "", Observation::ParseStarted { origin });
        match parse::parse(origin, source) {
            Ok(data) => {
                observer.observe(
                    execution,
                    "",
                    Observation::ParseCompleted {
                        sections: data.sections.len(),
                    },
                );
                Ok(Self {
                    data: Arc::new(data),
                })
            }
            Err(error) => {
                observer.observe(execution, "", Observation::ParseFailed { error: &error });
                Err(error)
            }
        }
    }

    /// The validated frontmatter.
    pub fn frontmatter(&self) -> &Frontmatter {
        &self.data.frontmatter
    }

    /// The prompt's `name`.
    pub fn name(&self) -> &str {
        self.data.frontmatter.name()
    }

    /// The prompt's `description`.
    pub fn description(&self) -> &str {
        self.data.frontmatter.description()
    }

    /// The H1 title text.
    pub fn title(&self) -> &str {
        &self.data.title
    }

    /// The name diagnostics use for this prompt.
    pub fn origin(&self) -> &str {
        &self.data.origin
    }

    /// Every section in document order.
    pub fn sections(&self) -> impl Iterator<Item = &Section> {
        self.data.sections.iter()
    }

    /// The top-level (H2) sections in walk order, off-walk ones included.
    pub fn root_sections(&self) -> impl Iterator<Item = &Section> {
        self.data.roots.iter().map(|&id| &self.data.sections[id])
    }

    /// The direct children of a section, in order.
    pub fn children<'a>(&'a self, section: &'a Section) -> impl Iterator<Item = &'a Section> {
        section.children.iter().map(|&id| &self.data.sections[id])
    }

    /// How many `lua shared` blocks the H1 region defines.
    pub fn shared_block_count(&self) -> usize {
        self.data.shared.len()
    }
}
