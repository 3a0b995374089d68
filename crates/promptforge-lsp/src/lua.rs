//! A Lua 5.4 tokenizer: enough of the language to find call sites, string literals and
//! `var.NAME` accesses in a block, also while the block is half-typed.
//!
//! Lua's lexical grammar is small and stable (names, numbers, short and long strings,
//! comments, operators), so the server reads it itself rather than pulling in a full Lua
//! parser: a tokenizer never fails (an unfinished string ends at its line, an unknown
//! character is a token of its own), is linear in the block, and keeps byte spans.

use std::ops::Range;

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A name or a keyword.
    Name,
    /// A numeral.
    Number,
    /// A short or long string literal, with its decoded value (`None` when an escape is
    /// invalid) and the bytes between its delimiters.
    Str {
        value: Option<String>,
        content: Range<usize>,
        /// The opening delimiter: `"`, `'` or a long bracket such as `[[`.
        open: String,
        /// Whether the closing delimiter was found.
        closed: bool,
    },
    /// A comment (line or long).
    Comment,
    /// An operator or punctuation (`.`, `..`, `==`, `(`, …).
    Punct,
    /// A character Lua does not accept outside strings and comments.
    Unknown,
}

/// One token: its kind and its byte span in the text the tokenizer was given (shifted by
/// the `base` passed to [`tokenize`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Kind,
    pub(crate) span: Range<usize>,
}

impl Token {
    /// The token's text in `source` (the text whose offset `base` was given).
    pub(crate) fn text<'a>(&self, source: &'a str, base: usize) -> &'a str {
        source
            .get(self.span.start - base..self.span.end - base)
            .unwrap_or("")
    }

    /// Whether the token is the punctuation `p`.
    pub(crate) fn is_punct(&self, source: &str, base: usize, p: &str) -> bool {
        self.kind == Kind::Punct && self.text(source, base) == p
    }

    /// The decoded value of a string literal.
    pub(crate) fn string_value(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str { value, .. } => value.as_deref(),
            _ => None,
        }
    }
}

/// The operators, longest first so the first match is the longest.
const OPERATORS: [&str; 10] = ["...", "..", "==", "~=", "<=", ">=", "<<", ">>", "//", "::"];

/// Tokenizes `code`; every span is shifted by `base` (the code's offset in the file).
pub(crate) fn tokenize(code: &str, base: usize) -> Vec<Token> {
    let bytes = code.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        let start = at;
        let kind = if code[at..].starts_with("--") {
            at += 2;
            match long_bracket(bytes, at) {
                Some(level) => {
                    let open_len = level + 2;
                    at = find_long_close(code, at + open_len, level).map_or(bytes.len(), |e| e.1);
                }
                None => at = code[at..].find('\n').map_or(bytes.len(), |n| at + n),
            }
            Kind::Comment
        } else if b == b'"' || b == b'\'' {
            let (end, value, closed) = short_string(code, at);
            at = end;
            let content_end = if closed { end - 1 } else { end };
            Kind::Str {
                value,
                content: start + 1 + base..content_end + base,
                open: (b as char).to_string(),
                closed,
            }
        } else if b == b'[' && long_bracket(bytes, at).is_some() {
            let level = long_bracket(bytes, at).unwrap_or(0);
            let open_len = level + 2;
            let mut content_start = at + open_len;
            // A line break right after the opening bracket is not part of the string.
            if code[content_start..].starts_with("\r\n") {
                content_start += 2;
            } else if code[content_start..].starts_with('\n') {
                content_start += 1;
            }
            let (content_end, end, closed) = match find_long_close(code, content_start, level) {
                Some((close, end)) => (close, end, true),
                None => (bytes.len(), bytes.len(), false),
            };
            at = end;
            Kind::Str {
                value: Some(code[content_start..content_end].to_owned()),
                content: content_start + base..content_end + base,
                open: code[start..start + open_len].to_owned(),
                closed,
            }
        } else if b.is_ascii_alphabetic() || b == b'_' {
            at += 1;
            while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                at += 1;
            }
            Kind::Name
        } else if b.is_ascii_digit()
            || (b == b'.' && bytes.get(at + 1).is_some_and(u8::is_ascii_digit))
        {
            at = numeral_end(bytes, at);
            Kind::Number
        } else if let Some(op) = OPERATORS.iter().find(|op| code[at..].starts_with(**op)) {
            at += op.len();
            Kind::Punct
        } else if b.is_ascii_punctuation() {
            at += 1;
            Kind::Punct
        } else {
            // A character outside Lua's alphabet (UTF-8 is skipped whole).
            at += code[at..].chars().next().map_or(1, char::len_utf8);
            Kind::Unknown
        };
        tokens.push(Token {
            kind,
            span: start + base..at + base,
        });
    }
    tokens
}

/// The level of a long bracket `[==[` opening at `at` (the number of `=`), if one does.
fn long_bracket(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    let level = bytes[at + 1..].iter().take_while(|&&b| b == b'=').count();
    (bytes.get(at + 1 + level) == Some(&b'[')).then_some(level)
}

/// The closing `]==]` of `level` from `from`: its start and its end.
fn find_long_close(code: &str, from: usize, level: usize) -> Option<(usize, usize)> {
    let close = format!("]{}]", "=".repeat(level));
    code.get(from..)?
        .find(&close)
        .map(|at| (from + at, from + at + close.len()))
}

/// Where a numeral starting at `at` ends: digits, letters (hex digits, exponent markers),
/// points, and a sign right after an exponent marker.
fn numeral_end(bytes: &[u8], mut at: usize) -> usize {
    let hex = bytes[at] == b'0' && matches!(bytes.get(at + 1), Some(b'x' | b'X'));
    while at < bytes.len() {
        let b = bytes[at];
        let exponent = if hex {
            matches!(b, b'p' | b'P')
        } else {
            matches!(b, b'e' | b'E')
        };
        if exponent && matches!(bytes.get(at + 1), Some(b'+' | b'-')) {
            at += 2;
        } else if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' {
            at += 1;
        } else {
            break;
        }
    }
    at
}

/// Reads a short string opening at `at`: its end (after the closing quote, or at the line
/// break or end that cut it), its decoded value, and whether it was closed.
fn short_string(code: &str, at: usize) -> (usize, Option<String>, bool) {
    let bytes = code.as_bytes();
    let quote = bytes[at];
    let mut value = String::new();
    let mut valid = true;
    let mut i = at + 1;
    while i < bytes.len() {
        let b = bytes[i];
        if b == quote {
            return (i + 1, valid.then_some(value), true);
        }
        if b == b'\n' {
            return (i, valid.then_some(value), false);
        }
        if b != b'\\' {
            let c = code[i..].chars().next().unwrap_or('\u{fffd}');
            value.push(c);
            i += c.len_utf8();
            continue;
        }
        // An escape.
        let Some(&e) = bytes.get(i + 1) else {
            return (bytes.len(), None, false);
        };
        i += 2;
        match e {
            b'n' => value.push('\n'),
            b't' => value.push('\t'),
            b'r' => value.push('\r'),
            b'a' => value.push('\u{7}'),
            b'b' => value.push('\u{8}'),
            b'f' => value.push('\u{c}'),
            b'v' => value.push('\u{b}'),
            b'\\' => value.push('\\'),
            b'"' => value.push('"'),
            b'\'' => value.push('\''),
            b'\n' => value.push('\n'),
            b'z' => {
                while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                    i += 1;
                }
            }
            b'x' => {
                let hex = code
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) if byte.is_ascii() => value.push(char::from(byte)),
                    _ => valid = false,
                }
                i += 2;
            }
            b'u' => {
                let close = code[i..].find('}');
                let scalar = close
                    .and_then(|c| code.get(i + 1..i + c))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32);
                match (code[i..].starts_with('{'), scalar, close) {
                    (true, Some(c), Some(close)) => {
                        value.push(c);
                        i += close + 1;
                    }
                    _ => valid = false,
                }
            }
            b'0'..=b'9' => {
                let digits = bytes[i - 1..]
                    .iter()
                    .take(3)
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let number: u32 = code[i - 1..i - 1 + digits].parse().unwrap_or(256);
                match u8::try_from(number) {
                    Ok(byte) if byte.is_ascii() => value.push(char::from(byte)),
                    _ => valid = false,
                }
                i += digits - 1;
            }
            _ => valid = false,
        }
    }
    (bytes.len(), valid.then_some(value), false)
}

/// Quotes `value` as a Lua string literal opened with `open` (a quote or a long bracket):
/// what a rename writes between the delimiters it keeps.
pub(crate) fn escape_for(open: &str, value: &str) -> String {
    let quote = match open {
        "\"" => '"',
        "'" => '\'',
        // Long strings take their content verbatim.
        _ => return value.to_owned(),
    };
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(code: &str) -> Vec<(String, &'static str)> {
        tokenize(code, 0)
            .iter()
            .map(|t| {
                let kind = match t.kind {
                    Kind::Name => "name",
                    Kind::Number => "number",
                    Kind::Str { .. } => "string",
                    Kind::Comment => "comment",
                    Kind::Punct => "punct",
                    Kind::Unknown => "unknown",
                };
                (t.text(code, 0).to_owned(), kind)
            })
            .collect()
    }

    #[test]
    fn names_calls_and_operators() {
        let found = kinds("local x = tools.bind('a', \"b\") .. y ~= 0x1F + 1e-3");
        let texts: Vec<&str> = found.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            texts,
            [
                "local", "x", "=", "tools", ".", "bind", "(", "'a'", ",", "\"b\"", ")", "..", "y",
                "~=", "0x1F", "+", "1e-3"
            ]
        );
    }

    #[test]
    fn comments_and_long_strings() {
        let code = "-- a comment with jump(\"## X\")\n--[==[ long\n]] still ]==] x = [[\nline]] y = [=[a]]b]=]";
        let found = kinds(code);
        assert_eq!(found[0].1, "comment");
        assert_eq!(found[1].1, "comment");
        assert_eq!(found[1].0, "--[==[ long\n]] still ]==]");
        let strings: Vec<Option<String>> = tokenize(code, 0)
            .iter()
            .filter(|t| matches!(t.kind, Kind::Str { .. }))
            .map(|t| t.string_value().map(str::to_owned))
            .collect();
        assert_eq!(strings, [Some("line".to_owned()), Some("a]]b".to_owned())]);
    }

    #[test]
    fn escapes_are_decoded_and_spans_kept() {
        let code = r###"jump("## A\tB\x41\65\u{e9}") s = 'it\'s'"###;
        let tokens = tokenize(code, 100);
        let literal = &tokens[2];
        assert_eq!(literal.string_value(), Some("## A\tBAAé"));
        let Kind::Str { content, .. } = &literal.kind else {
            panic!("not a string: {literal:?}");
        };
        assert_eq!(
            &code[content.start - 100..content.end - 100],
            r"## A\tB\x41\65\u{e9}"
        );
        assert_eq!(tokens[6].string_value(), Some("it's"));
        assert_eq!(tokenize(r#""\q""#, 0)[0].string_value(), None);
    }

    #[test]
    fn unfinished_text_never_fails() {
        for code in [
            "jump(\"## Unfinished\nnext()",
            "x = [[ never closed",
            "--[[ open",
            "\"\\",
            "é = 1",
            "0x",
            "a..",
        ] {
            let tokens = tokenize(code, 0);
            assert!(!tokens.is_empty(), "{code}");
            assert!(
                tokens.iter().all(|t| t.span.start < t.span.end),
                "{code}: {tokens:?}"
            );
        }
        let tokens = tokenize("jump(\"## Unfinished\nnext()", 0);
        assert!(matches!(&tokens[2].kind, Kind::Str { closed: false, .. }));
        assert_eq!(tokens[3].text("jump(\"## Unfinished\nnext()", 0), "next");
    }

    #[test]
    fn renamed_values_are_escaped_for_their_quote() {
        assert_eq!(escape_for("\"", "## A \"B\""), "## A \\\"B\\\"");
        assert_eq!(escape_for("'", "## it's"), "## it\\'s");
        assert_eq!(escape_for("[[", "## raw\\"), "## raw\\");
    }
}
