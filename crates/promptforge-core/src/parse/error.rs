//! The parse error type.

use std::fmt;
use std::ops::Range;

/// The stable class of a [`ParseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The file does not start with a `---` delimited frontmatter block, or it is unterminated.
    MissingFrontmatter,
    /// The frontmatter is not valid YAML, or a field has the wrong type.
    InvalidFrontmatter,
    /// A required frontmatter field (`name`, `description`, `promptforge`) is absent.
    MissingField,
    /// The frontmatter holds a key the format does not define.
    UnknownField,
    /// A frontmatter field holds a value outside its domain.
    InvalidField,
    /// The `promptforge:` major version is not one this runtime supports.
    UnsupportedVersion,
    /// The document has no H1 title.
    MissingTitle,
    /// The document has more than one H1.
    MultipleTitles,
    /// Non-blank content appears between the frontmatter and the H1.
    ContentBeforeTitle,
    /// A root section heading is not H2.
    RootNotH2,
    /// A heading skips a level below its parent (for example an H4 directly under an H2).
    OrphanHeading,
    /// Two sibling sections share a name.
    DuplicateSection,
    /// A heading has no text.
    EmptyHeading,
    /// A `lua shared` block appears outside the H1 region.
    MisplacedShared,
    /// A `{{ placeholder }}` in prose is malformed.
    Template,
    /// A Lua block does not compile.
    LuaSyntax,
    /// The source is larger than [`MAX_PROMPT_BYTES`](crate::parse::MAX_PROMPT_BYTES).
    TooLarge,
    /// The source bytes are not UTF-8.
    InvalidEncoding,
}

impl ParseErrorKind {
    /// A stable snake_case name for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingFrontmatter => "missing_frontmatter",
            Self::InvalidFrontmatter => "invalid_frontmatter",
            Self::MissingField => "missing_field",
            Self::UnknownField => "unknown_field",
            Self::InvalidField => "invalid_field",
            Self::UnsupportedVersion => "unsupported_version",
            Self::MissingTitle => "missing_title",
            Self::MultipleTitles => "multiple_titles",
            Self::ContentBeforeTitle => "content_before_title",
            Self::RootNotH2 => "root_not_h2",
            Self::OrphanHeading => "orphan_heading",
            Self::DuplicateSection => "duplicate_section",
            Self::EmptyHeading => "empty_heading",
            Self::MisplacedShared => "misplaced_shared",
            Self::Template => "template",
            Self::LuaSyntax => "lua_syntax",
            Self::TooLarge => "too_large",
            Self::InvalidEncoding => "invalid_encoding",
        }
    }
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A prompt file that is not structurally valid.
///
/// Displays as `origin:line: message` when the problem has a location, so editors and
/// terminals can jump to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    kind: ParseErrorKind,
    message: String,
    origin: String,
    line: Option<usize>,
    span: Option<Range<usize>>,
}

impl ParseError {
    pub(crate) fn new(kind: ParseErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            origin: String::new(),
            line: None,
            span: None,
        }
    }

    pub(crate) fn at(mut self, line: usize, span: Option<Range<usize>>) -> Self {
        self.line = Some(line);
        self.span = span;
        self
    }

    pub(crate) fn with_origin(mut self, origin: &str) -> Self {
        self.origin = origin.to_owned();
        self
    }

    /// The stable class of the problem.
    pub fn kind(&self) -> ParseErrorKind {
        self.kind
    }

    /// The problem, without location.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The 1-based line in the prompt file, where one applies.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The byte range in the prompt file, for editor diagnostics.
    pub fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }

    /// The name the prompt was parsed under (usually its file path).
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.origin.is_empty(), self.line) {
            (false, Some(line)) => write!(f, "{}:{}: {}", self.origin, line, self.message),
            (false, None) => write!(f, "{}: {}", self.origin, self.message),
            (true, Some(line)) => write!(f, "line {}: {}", line, self.message),
            (true, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ParseError {}
