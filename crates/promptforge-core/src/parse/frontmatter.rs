//! The YAML frontmatter: identity, version and the optional fields of the format.

use std::num::NonZeroU32;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::{ParseError, ParseErrorKind};
use crate::store::validate_path;

/// The one `promptforge:` major version this runtime executes.
pub const SUPPORTED_MAJOR: u32 = 1;

/// How deeply maps and lists may nest in the frontmatter YAML, the top-level map counting as
/// the first level (64). The format's fields need three; the bound keeps the YAML reader's
/// stack and time small on hostile input.
pub const MAX_FRONTMATTER_DEPTH: usize = 64;

/// The default and the bounds of `max_tool_iterations`.
const DEFAULT_MAX_TOOL_ITERATIONS: u32 = 24;
const MAX_TOOL_ITERATIONS_CEILING: u32 = 1000;

/// A declared store file: the `input:` or `output:` frontmatter entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDeclaration {
    path: String,
    description: String,
}

impl FileDeclaration {
    /// The store path the prompt reads or writes.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the file is, for callers and catalog listings.
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// The validated frontmatter of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    name: String,
    description: String,
    promptforge: u32,
    version: Option<String>,
    max_tool_iterations: NonZeroU32,
    input: Option<FileDeclaration>,
    output: Option<FileDeclaration>,
    default_return: Option<String>,
}

impl Frontmatter {
    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The prompt's one-line description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The declared `promptforge:` major version (always the supported one).
    pub fn promptforge(&self) -> u32 {
        self.promptforge
    }

    /// The author's own revision of the prompt, if declared.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Model round-trips allowed per tool loop (1..=1000, default 24).
    pub fn max_tool_iterations(&self) -> NonZeroU32 {
        self.max_tool_iterations
    }

    /// The declared input file, if any.
    pub fn input(&self) -> Option<&FileDeclaration> {
        self.input.as_ref()
    }

    /// The declared output file, if any.
    pub fn output(&self) -> Option<&FileDeclaration> {
        self.output.as_ref()
    }

    /// The run result when the walk falls off its last section.
    pub fn default_return(&self) -> Option<&str> {
        self.default_return.as_deref()
    }
}

impl Frontmatter {
    /// A minimal valid frontmatter, standing in for one in error while `check` reads on.
    pub(crate) fn stand_in() -> Self {
        Self {
            name: "check".to_owned(),
            description: "check".to_owned(),
            promptforge: SUPPORTED_MAJOR,
            version: None,
            max_tool_iterations: NonZeroU32::MIN.saturating_add(DEFAULT_MAX_TOOL_ITERATIONS - 1),
            input: None,
            output: None,
            default_return: None,
        }
    }
}

/// The frontmatter as written: each value with where it is, so an error can point at it.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFrontmatter {
    name: Option<Spanned<Scalar>>,
    description: Option<Spanned<Scalar>>,
    promptforge: Option<Spanned<Scalar>>,
    version: Option<Spanned<Scalar>>,
    max_tool_iterations: Option<Spanned<i64>>,
    input: Option<RawFileDeclaration>,
    output: Option<RawFileDeclaration>,
    default_return: Option<Spanned<Scalar>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileDeclaration {
    path: Spanned<String>,
    #[serde(default)]
    description: String,
}

/// A YAML scalar that we read as text (`version: 1.2` and `version: "1.2"` are the same).
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

impl Scalar {
    fn into_text(self) -> String {
        match self {
            Self::Int(value) => value.to_string(),
            Self::Float(value) => value.to_string(),
            Self::Bool(value) => value.to_string(),
            Self::Text(value) => value,
        }
    }
}

/// The frontmatter block split off a prompt source.
pub(crate) struct Split<'a> {
    /// The YAML between the delimiters.
    pub(crate) yaml: &'a str,
    /// The 1-based line of the first YAML line.
    pub(crate) yaml_line: usize,
    /// The byte offset of the first YAML line in the source.
    pub(crate) yaml_offset: usize,
    /// The byte offset where the Markdown body starts.
    pub(crate) body_offset: usize,
}

/// Splits `---` delimited frontmatter off the source, if the source starts with one.
pub(crate) fn split(source: &str) -> Option<Split<'_>> {
    let rest = source.strip_prefix("---")?;
    let first_newline = rest.find('\n')?;
    if !rest[..first_newline].trim().is_empty() {
        return None;
    }
    let yaml_start = 3 + first_newline + 1;
    let mut offset = yaml_start;
    for line in source[yaml_start..].split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            return Some(Split {
                yaml: &source[yaml_start..offset],
                yaml_line: 2,
                yaml_offset: yaml_start,
                body_offset: offset + line.len(),
            });
        }
        offset += line.len();
    }
    None
}

/// Whether the source opens a frontmatter block (a first line of `---`).
pub(crate) fn opens(source: &str) -> bool {
    source
        .strip_prefix("---")
        .is_some_and(|rest| rest.split('\n').next().is_some_and(|l| l.trim().is_empty()))
}

/// The `promptforge:` value as written on its line, for messages.
fn written_version(yaml: &str) -> Option<String> {
    yaml.lines().find_map(|line| {
        let value = line.strip_prefix("promptforge:")?;
        let value = value.split('#').next().unwrap_or("").trim();
        Some(value.trim_matches(|c| c == '"' || c == '\'').to_owned())
    })
}

/// Detects the declared `promptforge:` major version without a full parse.
///
/// Returns `None` when the source has no frontmatter, no top-level `promptforge:` key, or a
/// value that is not a version number. Use it to filter files cheaply before [`parse`]:
/// a file for which this returns `None` is not a PromptForge prompt.
///
/// [`parse`]: crate::Prompt::parse
pub fn promptforge_version(source: &str) -> Option<u32> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let split = split(source)?;
    split.yaml.lines().find_map(|line| {
        let value = line.strip_prefix("promptforge:")?;
        let value = value.split('#').next().unwrap_or("").trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        major_of(value)
    })
}

/// The major component of a version written as `1`, `1.0` or `1.2.3`.
fn major_of(value: &str) -> Option<u32> {
    let major = value.split('.').next()?;
    if major.is_empty() || !major.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    major.parse().ok()
}

impl Split<'_> {
    /// The error located at a YAML position: its line in the file, and a span (so a
    /// column) over the value when the library knows the bytes.
    fn locate(&self, error: ParseError, location: &serde_saphyr::Location) -> ParseError {
        let Ok(line) = usize::try_from(location.line()) else {
            return error;
        };
        if line == 0 {
            return error;
        }
        let file_line = line + self.yaml_line - 1;
        let span = location.span();
        let start = span
            .byte_offset()
            .and_then(|b| usize::try_from(b).ok())
            .or_else(|| {
                // From the 1-based column (in characters) on the line.
                let text = self.yaml.split_inclusive('\n').nth(line - 1)?;
                let line_start = self
                    .yaml
                    .split_inclusive('\n')
                    .take(line - 1)
                    .map(str::len)
                    .sum::<usize>();
                let column = usize::try_from(location.column()).ok()?.max(1);
                let within = text
                    .char_indices()
                    .nth(column - 1)
                    .map_or(text.len(), |(i, _)| i);
                Some(line_start + within)
            });
        let Some(start) = start.filter(|&s| s <= self.yaml.len()) else {
            return error.at(file_line, None);
        };
        let len = span
            .byte_len()
            .and_then(|b| usize::try_from(b).ok())
            .filter(|&l| l > 0)
            .unwrap_or_else(|| {
                // The rest of the line: a value the library gave no length for.
                self.yaml[start..]
                    .find('\n')
                    .unwrap_or(self.yaml.len() - start)
            });
        let end = (start + len).min(self.yaml.len());
        error.at(
            file_line,
            Some(self.yaml_offset + start..self.yaml_offset + end),
        )
    }
}

/// Parses and validates the frontmatter YAML. Every error points at the line and column of
/// the value it is about (a missing field at the opening `---`).
pub(crate) fn parse(split: &Split<'_>) -> Result<Frontmatter, ParseError> {
    let raw: RawFrontmatter = if split.yaml.trim().is_empty() {
        RawFrontmatter::default()
    } else {
        serde_saphyr::from_str_with_options(split.yaml, yaml_options())
            .map_err(|error| yaml_error(&error, split))?
    };

    let promptforge_spanned = raw.promptforge.ok_or_else(|| missing("promptforge"))?;
    let promptforge_at = promptforge_spanned.referenced;
    let promptforge = promptforge_spanned.value.into_text();
    // A number too large for any version is an unsupported version, named as written.
    let written = written_version(split.yaml).unwrap_or_else(|| promptforge.clone());
    let digits = written.split('.').next().unwrap_or("");
    if major_of(&promptforge).is_none()
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(split.locate(
            ParseError::new(
                ParseErrorKind::UnsupportedVersion,
                format!(
                    "this prompt declares `promptforge: {}`, but this runtime supports only \
                     major version {SUPPORTED_MAJOR}",
                    crate::error::quote_text(&written, 40, false)
                ),
            ),
            &promptforge_at,
        ));
    }
    let major = major_of(&promptforge).ok_or_else(|| {
        split.locate(
            ParseError::new(
                ParseErrorKind::InvalidField,
                format!(
                    "frontmatter field `promptforge` must be a version number, found `{}`",
                    crate::error::quote_text(&promptforge, 40, false)
                ),
            ),
            &promptforge_at,
        )
    })?;
    if major != SUPPORTED_MAJOR {
        return Err(split.locate(
            ParseError::new(
                ParseErrorKind::UnsupportedVersion,
                format!(
                    "this prompt declares `promptforge: {promptforge}`, but this runtime \
                     supports only major version {SUPPORTED_MAJOR}; upgrade promptforge to run it"
                ),
            ),
            &promptforge_at,
        ));
    }

    let name_spanned = raw.name.ok_or_else(|| missing("name"))?;
    let name = name_spanned.value.into_text();
    if name.trim().is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(split.locate(
            invalid(
                "name",
                "must be a non-empty single line of at most 128 bytes",
            ),
            &name_spanned.referenced,
        ));
    }
    let description_spanned = raw.description.ok_or_else(|| missing("description"))?;
    let description = description_spanned.value.into_text();
    if description.trim().is_empty() {
        return Err(split.locate(
            invalid("description", "must not be empty"),
            &description_spanned.referenced,
        ));
    }

    let max_tool_iterations = match &raw.max_tool_iterations {
        None => NonZeroU32::new(DEFAULT_MAX_TOOL_ITERATIONS),
        Some(value) => u32::try_from(value.value)
            .ok()
            .filter(|v| *v <= MAX_TOOL_ITERATIONS_CEILING)
            .and_then(NonZeroU32::new),
    }
    .ok_or_else(|| {
        let error = invalid(
            "max_tool_iterations",
            &format!("must be an integer between 1 and {MAX_TOOL_ITERATIONS_CEILING}"),
        );
        match &raw.max_tool_iterations {
            Some(value) => split.locate(error, &value.referenced),
            None => error,
        }
    })?;

    Ok(Frontmatter {
        name,
        description,
        promptforge: major,
        version: raw.version.map(|v| v.value.into_text()),
        max_tool_iterations,
        input: raw
            .input
            .map(|d| declaration(split, "input", d))
            .transpose()?,
        output: raw
            .output
            .map(|d| declaration(split, "output", d))
            .transpose()?,
        default_return: raw.default_return.map(|v| v.value.into_text()),
    })
}

fn declaration(
    split: &Split<'_>,
    field: &str,
    raw: RawFileDeclaration,
) -> Result<FileDeclaration, ParseError> {
    validate_path(&raw.path.value).map_err(|error| {
        split.locate(
            invalid(&format!("{field}.path"), &error.to_string()),
            &raw.path.referenced,
        )
    })?;
    Ok(FileDeclaration {
        path: raw.path.value,
        description: raw.description,
    })
}

fn missing(field: &str) -> ParseError {
    ParseError::new(
        ParseErrorKind::MissingField,
        format!("frontmatter is missing the required field `{field}`"),
    )
    .at(1, Some(0..3))
}

fn invalid(field: &str, why: &str) -> ParseError {
    ParseError::new(
        ParseErrorKind::InvalidField,
        format!("frontmatter field `{field}` {why}"),
    )
}

/// The YAML reader's options: the library's budget, with both nesting limits (block
/// collections through the budget, flow collections in the scanner) at
/// [`MAX_FRONTMATTER_DEPTH`].
fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    let mut budget = options.budget.take().unwrap_or_default();
    budget.max_depth = MAX_FRONTMATTER_DEPTH;
    budget.flow_nesting_limit = MAX_FRONTMATTER_DEPTH;
    options.budget = Some(budget);
    options
}

/// Whether the YAML reader stopped at [`MAX_FRONTMATTER_DEPTH`]: the budget's depth breach
/// for block collections, the scanner's recursion limit for flow ones.
fn too_deep(error: &serde_saphyr::Error) -> bool {
    use serde_saphyr::budget::BudgetBreach;
    use serde_saphyr::granit_parser::ErrorKind;
    use serde_saphyr::{Error, ExternalMessageSource};
    let mut error = error;
    while let Error::WithSnippet { error: inner, .. } | Error::AliasError { error: inner, .. } =
        error
    {
        error = inner;
    }
    match error {
        Error::Budget { breach, .. } => matches!(breach, BudgetBreach::Depth { .. }),
        Error::ExternalMessage { source, .. } => matches!(
            &**source,
            ExternalMessageSource::Parser(scan)
                if matches!(scan.kind(), ErrorKind::RecursionLimitExceeded)
        ),
        _ => false,
    }
}

fn yaml_error(error: &serde_saphyr::Error, split: &Split<'_>) -> ParseError {
    let text = error.to_string();
    let lower = text.to_lowercase();
    let kind = if text.contains("unknown field") {
        ParseErrorKind::UnknownField
    } else {
        ParseErrorKind::InvalidFrontmatter
    };
    let line = error
        .location()
        .map(|location| usize::try_from(location.line()).unwrap_or(1) + split.yaml_line - 1);
    let message = if lower.contains("duplicate") {
        // The key as written on the line the library points at.
        let written = line
            .and_then(|l| split.yaml.lines().nth(l.checked_sub(split.yaml_line)?))
            .and_then(|l| l.split_once(':'))
            .map(|(key, _)| key.trim().trim_matches(|c| c == '"' || c == '\''))
            .filter(|key| !key.is_empty() && key.len() <= 64)
            .map(|key| format!("`{key}`"));
        let key = written
            .or_else(|| backticked(&text))
            .unwrap_or_else(|| "a key".to_owned());
        format!("frontmatter: the key {key} appears more than once; keep one of them")
    } else if too_deep(error) {
        format!(
            "frontmatter: its YAML nests maps and lists more than {MAX_FRONTMATTER_DEPTH} levels \
             deep (the top-level map is the first); the format's fields need at most three"
        )
    } else if lower.contains("alias") || lower.contains("nodes") || lower.contains("budget") {
        "frontmatter: its YAML aliases expand to too much data; write the values out instead \
         of repeating `*alias` references"
            .to_owned()
    } else if lower.contains("tab") {
        "frontmatter: a tab character indents this line; YAML indentation uses spaces only"
            .to_owned()
    } else {
        format!("frontmatter: {}", first_line_without_location(&text))
    };
    let parsed = ParseError::new(kind, crate::error::quote_text(&message, 400, false));
    match error.location() {
        Some(location) => split.locate(parsed, &location),
        None => match line {
            Some(line) => parsed.at(line, None),
            None => parsed,
        },
    }
}

/// The first `` `name` `` or `'name'` quoted in a library message, re-quoted with backticks.
fn backticked(text: &str) -> Option<String> {
    for quote in ['`', '\'', '"'] {
        if let Some((_, rest)) = text.split_once(quote)
            && let Some((name, _)) = rest.split_once(quote)
            && !name.is_empty()
            && name.len() <= 64
        {
            return Some(format!("`{name}`"));
        }
    }
    None
}

/// A library message's first line without its own `at line N column M` (the error carries
/// the file's line already).
fn first_line_without_location(text: &str) -> String {
    let mut first = text.lines().next().unwrap_or("invalid YAML").trim();
    first = first.strip_prefix("error:").unwrap_or(first).trim_start();
    // A leading `line N column M: ` goes; the error already carries the file's line.
    if let Some(rest) = first.strip_prefix("line ")
        && let Some((_, after)) = rest.split_once(": ")
    {
        first = after;
    }
    let cut = [" at line ", ", line "]
        .iter()
        .filter_map(|marker| first.find(marker))
        .min()
        .unwrap_or(first.len());
    first[..cut].trim_end_matches([',', ':', ' ']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frontmatter error for `yaml` (the lines between the `---` delimiters).
    fn error_of(yaml: &str) -> ParseError {
        let source = format!("---\n{yaml}---\n\n# T\n");
        let Some(split) = split(&source) else {
            panic!("the test source has a frontmatter");
        };
        match parse(&split) {
            Ok(_) => panic!("the frontmatter parsed"),
            Err(error) => error,
        }
    }

    const FIELDS: &str = "name: t\ndescription: t\npromptforge: 1\n";

    #[test]
    fn nesting_too_deep_names_the_depth_limit_and_its_line() {
        // Block maps, no alias: `version:` holds 70 maps inside each other.
        let mut yaml = format!("{FIELDS}version:\n");
        for level in 1..=70 {
            yaml.push_str(&format!("{}a:\n", "  ".repeat(level)));
        }
        yaml.push_str(&format!("{}b: 1\n", "  ".repeat(71)));
        let error = error_of(&yaml);
        assert_eq!(error.kind(), ParseErrorKind::InvalidFrontmatter);
        let message = error.message();
        assert!(
            message.contains(&format!("more than {MAX_FRONTMATTER_DEPTH} levels deep")),
            "{message}"
        );
        assert!(!message.contains("alias"), "{message}");
        // The map that goes one level too deep opens on the 64th `a:` line: YAML line
        // 4 + 64, file line 69 (the YAML starts on the file's line 2).
        assert_eq!(error.line(), Some(69));

        // Flow lists nested past the limit stop in the scanner, under the same limit.
        for depth in [MAX_FRONTMATTER_DEPTH, 300] {
            let yaml = format!(
                "{FIELDS}version: {}{}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let error = error_of(&yaml);
            let message = error.message();
            assert!(
                message.contains(&format!("more than {MAX_FRONTMATTER_DEPTH} levels deep")),
                "{depth}: {message}"
            );
            assert_eq!(error.line(), Some(5), "{depth}");
        }
    }
}
