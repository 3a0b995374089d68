//! Prose templates: `{{ path }}` placeholders, parsed once at parse time.

use std::borrow::Cow;
use std::ops::Range;

use super::check::Recovery;
use super::error::{ParseError, ParseErrorKind};

/// A prose block split into literal text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pub(crate) segments: Vec<Segment>,
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Text sent as is.
    Text(String),
    /// A `{{ a.b.c }}` placeholder: the dotted path and its source spelling.
    Placeholder { path: Vec<String>, raw: String },
}

impl Template {
    /// Parses `text`, whose first byte sits at `offset` in the file, on 1-based `line`.
    /// Each malformed form goes to `recovery`: when it takes it, parsing goes on as if the
    /// form were erased (the `{= … =}` forms first, then the `{{` placeholders).
    pub(crate) fn parse(
        text: &str,
        offset: usize,
        line: usize,
        recovery: &mut Recovery,
    ) -> Result<Self, ParseError> {
        #[cfg(test)]
        super::check::work::template_bytes(text.len());
        let erased = reject_equals_forms(text, offset, line, recovery)?;
        let text: &str = &erased;
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        let mut consumed = 0;
        // Newlines counted so far, up to byte `counted` of `text`: line numbers stay linear.
        let (mut counted, mut newlines) = (0usize, 0usize);
        while let Some(at) = rest.find("{{") {
            if at > 0 && rest.as_bytes()[at - 1] == b'\\' {
                literal.push_str(&unescape(&rest[..at - 1]));
                literal.push_str("{{");
                rest = &rest[at + 2..];
                consumed += at + 2;
                continue;
            }
            literal.push_str(&unescape(&rest[..at]));
            let open = consumed + at;
            let after = &rest[at + 2..];
            newlines += text.as_bytes()[counted..open]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            counted = open;
            let here = line + newlines;
            let span = Some(offset + open..offset + open + 2);
            let Some(close) = after.find("}}") else {
                recovery.recover(
                    ParseError::new(
                        ParseErrorKind::Template,
                        "unclosed `{{` placeholder: close it with `}}` or write `\\{{` for a literal `{{`",
                    )
                    .at(here, span),
                )?;
                // Without the `{{`: every later one is unclosed too.
                rest = after;
                consumed = open + 2;
                continue;
            };
            let inner = after[..close].trim();
            rest = &after[close + 2..];
            consumed = open + 2 + close + 2;
            let path = match parse_path(inner) {
                Ok(path) => path,
                Err(why) => {
                    recovery.recover(
                        ParseError::new(
                            ParseErrorKind::Template,
                            format!("invalid placeholder `{{{{ {inner} }}}}`: {why}"),
                        )
                        .at(here, Some(offset + open..offset + consumed)),
                    )?;
                    continue;
                }
            };
            if !literal.is_empty() {
                segments.push(Segment::Text(std::mem::take(&mut literal)));
            }
            segments.push(Segment::Placeholder {
                path,
                raw: inner.to_owned(),
            });
        }
        literal.push_str(&unescape(rest));
        if !literal.is_empty() {
            segments.push(Segment::Text(literal));
        }
        Ok(Self { segments })
    }

    /// Whether rendering needs no values at all.
    #[cfg(test)]
    pub(crate) fn is_literal(&self) -> bool {
        self.segments.iter().all(|s| matches!(s, Segment::Text(_)))
    }
}

/// Literal text with its `\{=` escapes resolved to `{=`.
fn unescape(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains("\\{=") {
        std::borrow::Cow::Owned(text.replace("\\{=", "{="))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Refuses a `{= … =}` form (the guide's Getting Started writes `{= content =}` once, but
/// only `{{ path }}` is a placeholder): sent as is, the model would get the placeholder
/// instead of the value. `\\{=` writes a literal `{=`. Linear: the first unescaped `{=`
/// that a `=}` closes is the error, and without a `=}` none after it can be closed. Each
/// form `recovery` takes is blanked out of the text returned, for the placeholder scan.
fn reject_equals_forms<'t>(
    text: &'t str,
    offset: usize,
    line: usize,
    recovery: &mut Recovery,
) -> Result<Cow<'t, str>, ParseError> {
    let mut erased: Option<String> = None;
    let (mut search, mut counted, mut newlines) = (0usize, 0usize, 0usize);
    while let Some(found) = text[search..].find("{=") {
        let open = search + found;
        if open > 0 && text.as_bytes()[open - 1] == b'\\' {
            search = open + 2;
            continue;
        }
        let Some(close) = text[open + 2..].find("=}") else {
            break;
        };
        let end = open + 2 + close + 2;
        let inner = text[open + 2..open + 2 + close].trim();
        let suggestion = if parse_path(inner).is_ok() {
            format!("`{{{{ {inner} }}}}`")
        } else {
            "`{{ name }}`".to_owned()
        };
        newlines += text.as_bytes()[counted..open]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted = open;
        let shown = crate::error::quote_text(inner, 80, false);
        recovery.recover(
            ParseError::new(
                ParseErrorKind::Template,
                format!(
                    "`{{= {shown} =}}` is not a placeholder and would reach the model as written; \
                     write {suggestion} to insert a value (a placeholder reads args, reply, var, sys, \
                     item or a global the section's Lua sets without `local`), or `\\{{=` for a \
                     literal `{{=`"
                ),
            )
            .at(line + newlines, Some(offset + open..offset + end)),
        )?;
        blank(erased.get_or_insert_with(|| text.to_owned()), open..end);
        search = end;
    }
    Ok(erased.map_or(Cow::Borrowed(text), Cow::Owned))
}

/// Blanks `range` of `text` out: each character but a newline becomes as many spaces as it
/// has bytes, so every offset after it stays where it was.
fn blank(text: &mut String, range: Range<usize>) {
    let blank: String = text[range.clone()]
        .chars()
        .map(|c| {
            if c == '\n' {
                "\n".to_owned()
            } else {
                " ".repeat(c.len_utf8())
            }
        })
        .collect();
    text.replace_range(range, &blank);
}

pub(crate) fn parse_path(inner: &str) -> Result<Vec<String>, &'static str> {
    if inner.is_empty() {
        return Err("the path is empty");
    }
    let mut path = Vec::new();
    for (index, part) in inner.split('.').enumerate() {
        let is_identifier = part
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let is_index = index > 0 && !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        if !is_identifier && !is_index {
            return Err("use a dotted path of names such as `var.topic` or `item.1`");
        }
        path.push(part.to_owned());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses as the parser does: stopping at the first problem.
    fn parse(text: &str, offset: usize, line: usize) -> Result<Template, ParseError> {
        Template::parse(text, offset, line, &mut Recovery::none())
    }

    fn placeholders(t: &Template) -> Vec<String> {
        t.segments
            .iter()
            .filter_map(|s| match s {
                Segment::Placeholder { raw, .. } => Some(raw.clone()),
                Segment::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn splits_text_and_placeholders() {
        let t = parse("Hi {{ args }}, see {{var.a.b}} and {{ item.1 }}.", 0, 1).unwrap();
        assert_eq!(placeholders(&t), ["args", "var.a.b", "item.1"]);
        assert_eq!(t.segments.len(), 7);
    }

    #[test]
    fn backslash_escapes_a_literal_open() {
        let t = parse(r"use \{{ name }} literally", 0, 1).unwrap();
        assert!(t.is_literal());
        assert_eq!(
            t.segments,
            [Segment::Text("use {{ name }} literally".into())]
        );
    }

    #[test]
    fn equals_forms_are_refused_unless_escaped() {
        let error = parse("Read:\n\n{= content =} and {{ args }}", 50, 3).unwrap_err();
        assert_eq!(error.kind(), ParseErrorKind::Template);
        assert_eq!(error.line(), Some(5));
        assert_eq!(error.span(), Some(57..70));
        assert!(error.message().contains("`{{ content }}`"), "{error}");
        let t = parse(r"write \{= x =} or {{ args }}; a {= alone", 0, 1).unwrap();
        assert_eq!(
            t.segments,
            [
                Segment::Text("write {= x =} or ".into()),
                Segment::Placeholder {
                    path: vec!["args".into()],
                    raw: "args".into()
                },
                Segment::Text("; a {= alone".into()),
            ]
        );
        let odd = parse("{= 1 + 2 =}", 0, 1).unwrap_err();
        assert!(odd.message().contains("`{{ name }}`"), "{odd}");
    }

    #[test]
    fn rejects_malformed_placeholders_with_their_line() {
        let error = parse("ok\n\nbad {{ args", 100, 7).unwrap_err();
        assert_eq!(error.kind(), ParseErrorKind::Template);
        assert_eq!(error.line(), Some(9));
        assert_eq!(error.span(), Some(108..110));
        for bad in [
            "{{ }}",
            "{{ a b }}",
            "{{ 1x }}",
            "{{ a..b }}",
            "{{ args() }}",
        ] {
            assert!(parse(bad, 0, 1).is_err(), "{bad}");
        }
    }
}
