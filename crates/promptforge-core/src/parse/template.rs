//! Prose templates: `{{ path }}` placeholders, parsed once at parse time.

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
    pub(crate) fn parse(text: &str, offset: usize, line: usize) -> Result<Self, ParseError> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        let mut consumed = 0;
        // Newlines counted so far, up to byte `counted` of `text`: line numbers stay linear.
        let (mut counted, mut newlines) = (0usize, 0usize);
        while let Some(at) = rest.find("{{") {
            if at > 0 && rest.as_bytes()[at - 1] == b'\\' {
                literal.push_str(&rest[..at - 1]);
                literal.push_str("{{");
                rest = &rest[at + 2..];
                consumed += at + 2;
                continue;
            }
            literal.push_str(&rest[..at]);
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
                return Err(ParseError::new(
                    ParseErrorKind::Template,
                    "unclosed `{{` placeholder: close it with `}}` or write `\\{{` for a literal `{{`",
                )
                .at(here, span));
            };
            let inner = after[..close].trim();
            let path = parse_path(inner).map_err(|why| {
                ParseError::new(
                    ParseErrorKind::Template,
                    format!("invalid placeholder `{{{{ {inner} }}}}`: {why}"),
                )
                .at(here, Some(offset + open..offset + open + 4 + close))
            })?;
            if !literal.is_empty() {
                segments.push(Segment::Text(std::mem::take(&mut literal)));
            }
            segments.push(Segment::Placeholder {
                path,
                raw: inner.to_owned(),
            });
            rest = &after[close + 2..];
            consumed = open + 2 + close + 2;
        }
        literal.push_str(rest);
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
        let t = Template::parse("Hi {{ args }}, see {{var.a.b}} and {{ item.1 }}.", 0, 1).unwrap();
        assert_eq!(placeholders(&t), ["args", "var.a.b", "item.1"]);
        assert_eq!(t.segments.len(), 7);
    }

    #[test]
    fn backslash_escapes_a_literal_open() {
        let t = Template::parse(r"use \{{ name }} literally", 0, 1).unwrap();
        assert!(t.is_literal());
        assert_eq!(
            t.segments,
            [Segment::Text("use {{ name }} literally".into())]
        );
    }

    #[test]
    fn rejects_malformed_placeholders_with_their_line() {
        let error = Template::parse("ok\n\nbad {{ args", 100, 7).unwrap_err();
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
            assert!(Template::parse(bad, 0, 1).is_err(), "{bad}");
        }
    }
}
