//! Env files and `${VAR}` references, parsed one way for every PromptForge configuration.
//!
//! `promptforge-gateway` and `promptforge-mcp-server` both read `NAME=value` env files
//! beside their TOML files and interpolate `${VAR}` in every string value. This crate is
//! that syntax, written once: [`parse_env_file`] for one file's text, [`expand`] for one
//! string, and [`Env`], the lookup both use (the process environment over the loaded
//! files). No file I/O happens here: each caller reads its files with its own bounds.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;

/// Longest piece of user-controlled text a message quotes, in characters.
pub const MAX_QUOTED_CHARS: usize = 80;

/// Quotes user-controlled text for a message: control characters escaped, at most
/// [`MAX_QUOTED_CHARS`] characters, an ellipsis when cut.
pub fn quote(text: &str) -> String {
    let mut out = String::new();
    for (i, ch) in text.chars().enumerate() {
        if i == MAX_QUOTED_CHARS {
            out.push('…');
            break;
        }
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
    }
    out
}

/// Whether `name` is a variable name: ASCII letters, digits and `_`, not starting with a
/// digit, not empty.
pub fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What is wrong with one env file line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineProblem {
    /// The line has no `=`.
    NoAssignment,
    /// The text before `=` is not a variable name (the name, as written).
    BadName(String),
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoAssignment => f.write_str("expected NAME=value"),
            Self::BadName(name) => write!(f, "`{}` is not a variable name", quote(name)),
        }
    }
}

/// An env file line that is not an assignment, a comment or blank.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct EnvFileError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub problem: LineProblem,
}

/// One `NAME=value` line of an env file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The 1-based line number.
    pub line: usize,
    /// The variable name.
    pub name: String,
    /// The value: trimmed, one pair of matching surrounding quotes removed.
    pub value: String,
}

/// Parses one line: `Ok(None)` for a blank line or a `#` comment.
pub fn parse_line(line: &str) -> Result<Option<(String, String)>, LineProblem> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
    let Some((name, value)) = line.split_once('=') else {
        return Err(LineProblem::NoAssignment);
    };
    let name = name.trim();
    if !is_variable_name(name) {
        return Err(LineProblem::BadName(name.to_owned()));
    }
    Ok(Some((name.to_owned(), unquote(value.trim()).to_owned())))
}

/// `value` without one pair of matching surrounding quotes (`"…"` or `'…'`).
fn unquote(value: &str) -> &str {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&open @ (b'"' | b'\'')), Some(&close)) if bytes.len() >= 2 && open == close => {
            &value[1..value.len() - 1]
        }
        _ => value,
    }
}

/// Every assignment of an env file's text, in order; the first bad line is an error.
pub fn parse_env_file(text: &str) -> Result<Vec<Assignment>, EnvFileError> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let parsed = parse_line(line).map_err(|problem| EnvFileError {
            line: index + 1,
            problem,
        })?;
        if let Some((name, value)) = parsed {
            out.push(Assignment {
                line: index + 1,
                name,
                value,
            });
        }
    }
    Ok(out)
}

/// Why a string could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// `${NAME}` names a variable that is set nowhere.
    #[error("environment variable `{}` is not set", quote(.0))]
    Unset(String),
    /// `${` without its closing brace, or not a variable name inside.
    #[error("{0}")]
    Malformed(String),
}

/// Expands `${NAME}` through `lookup` and `$$` to `$`; any other `$` stays literal.
pub fn expand(
    input: &str,
    mut lookup: impl FnMut(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(ExpandError::Malformed(
                    "`${` without a closing `}`".to_owned(),
                ));
            };
            let name = &tail[..end];
            if !is_variable_name(name) {
                return Err(ExpandError::Malformed(format!(
                    "`${{{}}}` is not a valid variable reference",
                    quote(name)
                )));
            }
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None => return Err(ExpandError::Unset(name.to_owned())),
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Where `${VAR}` values come from: the process environment (or a fixed map standing for
/// it, in tests) over the env files loaded so far.
///
/// The process environment is never written (editing it is `unsafe` under edition 2024):
/// the files fill a layer below it, so a variable already set always wins, exactly as if
/// the files had been loaded with "do not override".
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `None`: the real process environment.
    process: Option<HashMap<String, String>>,
    files: HashMap<String, String>,
}

impl Env {
    /// The real process environment, no file loaded yet.
    pub fn process() -> Self {
        Self::default()
    }

    /// `process` standing for the process environment (tests), no file loaded yet.
    pub fn fixed(process: HashMap<String, String>) -> Self {
        Self {
            process: Some(process),
            files: HashMap::new(),
        }
    }

    /// The real process environment over one file's variables (already parsed).
    pub fn process_then(files: HashMap<String, String>) -> Self {
        Self {
            process: None,
            files,
        }
    }

    /// `process` standing for the process environment, over one file's variables.
    pub fn fixed_then(process: HashMap<String, String>, files: HashMap<String, String>) -> Self {
        Self {
            process: Some(process),
            files,
        }
    }

    /// Looks a variable up: the process environment first, then the loaded files.
    pub fn lookup(&self, name: &str) -> Option<String> {
        let from_process = match &self.process {
            Some(map) => map.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        from_process.or_else(|| self.files.get(name).cloned())
    }

    /// Loads one env file's text below everything already visible: a variable the process
    /// environment or an earlier file sets keeps its value; within this text a later line
    /// wins. Returns how many variables the text defines.
    pub fn load(&mut self, text: &str) -> Result<usize, EnvFileError> {
        let mut defined: HashMap<String, String> = HashMap::new();
        for assignment in parse_env_file(text)? {
            defined.insert(assignment.name, assignment.value);
        }
        let count = defined.len();
        for (name, value) in defined {
            if self.lookup(&name).is_none() {
                self.files.insert(name, value);
            }
        }
        Ok(count)
    }

    /// [`expand`] through [`Env::lookup`].
    pub fn expand(&self, input: &str) -> Result<String, ExpandError> {
        expand(input, |name| self.lookup(name))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn fixed(pairs: &[(&str, &str)]) -> Env {
        Env::fixed(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn lines_parse_with_export_quotes_and_comments() {
        assert_eq!(parse_line("# c").unwrap(), None);
        assert_eq!(parse_line("  ").unwrap(), None);
        assert_eq!(
            parse_line("export A_1=\"x y\"").unwrap(),
            Some(("A_1".into(), "x y".into()))
        );
        assert_eq!(
            parse_line("export \t B = 'v' ").unwrap(),
            Some(("B".into(), "v".into()))
        );
        assert_eq!(
            parse_line("C=a=b").unwrap(),
            Some(("C".into(), "a=b".into()))
        );
        // Unmatched or lone quotes stay; nothing is unescaped.
        assert_eq!(
            parse_line("D=\"x").unwrap(),
            Some(("D".into(), "\"x".into()))
        );
        assert_eq!(parse_line("E=\"").unwrap(), Some(("E".into(), "\"".into())));
        assert_eq!(
            parse_line("F='x\"").unwrap(),
            Some(("F".into(), "'x\"".into()))
        );
        assert_eq!(
            parse_line("G=\"a\\nb\"").unwrap(),
            Some(("G".into(), "a\\nb".into()))
        );
        assert_eq!(parse_line("H=").unwrap(), Some(("H".into(), String::new())));
        assert_eq!(parse_line("no equals"), Err(LineProblem::NoAssignment));
        assert_eq!(parse_line("1X=3"), Err(LineProblem::BadName("1X".into())));
    }

    #[test]
    fn file_errors_name_the_line_and_quote_boundedly() {
        let err = parse_env_file("A=1\n\nJUSTTEXT\n").unwrap_err();
        assert_eq!(err.to_string(), "line 3: expected NAME=value");
        let long = format!("{}=1", "-".repeat(200));
        let err = parse_env_file(&long).unwrap_err().to_string();
        assert!(err.starts_with("line 1: `-----"), "{err}");
        assert!(err.contains('…') && err.chars().count() < 120, "{err}");
        let err = parse_env_file("A\u{1b}B=1").unwrap_err().to_string();
        assert_eq!(err, "line 1: `A\\u{1b}B` is not a variable name");
    }

    #[test]
    fn expansion_escapes_and_reports() {
        let env = fixed(&[("HOME_X", "/h")]);
        assert_eq!(env.expand("a${HOME_X}b").unwrap(), "a/hb");
        assert_eq!(env.expand("cost $$5").unwrap(), "cost $5");
        assert_eq!(env.expand("$$${HOME_X}").unwrap(), "$/h");
        assert_eq!(env.expand("a $ b $x").unwrap(), "a $ b $x");
        assert_eq!(
            env.expand("${PF_UNSET}"),
            Err(ExpandError::Unset("PF_UNSET".into()))
        );
        assert_eq!(
            ExpandError::Unset("PF_UNSET".into()).to_string(),
            "environment variable `PF_UNSET` is not set"
        );
        assert_eq!(
            env.expand("${HOME_X").unwrap_err().to_string(),
            "`${` without a closing `}`"
        );
        assert_eq!(
            env.expand("${}").unwrap_err().to_string(),
            "`${}` is not a valid variable reference"
        );
        assert_eq!(
            env.expand("${A B}").unwrap_err().to_string(),
            "`${A B}` is not a valid variable reference"
        );
    }

    #[test]
    fn the_process_wins_then_earlier_files_then_later_lines() {
        let mut env = fixed(&[("P", "process")]);
        assert_eq!(env.load("P=file\nA=first\nA=second\n").unwrap(), 2);
        assert_eq!(env.load("A=later-file\nB=b\n").unwrap(), 2);
        assert_eq!(env.lookup("P").as_deref(), Some("process"));
        assert_eq!(env.lookup("A").as_deref(), Some("second"));
        assert_eq!(env.lookup("B").as_deref(), Some("b"));
        assert_eq!(env.lookup("C"), None);
        // A bad file loads nothing.
        assert!(env.load("C=c\nbad line\n").is_err());
        assert_eq!(env.lookup("C"), None);
    }

    #[test]
    fn the_real_process_environment_is_read() {
        let path = std::env::var("PATH").unwrap();
        let env = Env::process_then([("PATH".to_owned(), "file".to_owned())].into());
        assert_eq!(env.lookup("PATH"), Some(path));
    }
}
