//! Whether bytes can still be the start of a JSON text, decided as they arrive.
//!
//! A message body that cannot be JSON shows it early: the next frame's header
//! (`Content-Length: …` and a line break) is never part of a JSON text, wherever the body
//! was cut (a raw line break cannot be inside a string, and `C`/`c` cannot stand outside
//! one). [`JsonPrefix`] finds the first byte that no JSON text could have there, holding
//! nothing but its nesting stack, so the framer can tell a body shorter than its
//! `Content-Length` without waiting for bytes that will never come.
//!
//! It accepts every prefix of every text `serde_json` parses (numbers are taken as any run
//! of their characters; nesting is followed up to [`MAX_JSON_DEPTH`], at least as deep as
//! serde_json's recursion limit lets a message be); being more lenient than the parser
//! only means a bad body is found by the parser instead, at its declared end.

/// The deepest nesting of arrays and objects followed while framing; a deeper body cannot
/// be a message (serde_json's recursion limit refuses it too), so it is read to its
/// declared end and answered with a parse error.
pub const MAX_JSON_DEPTH: usize = 128;

/// What the next byte may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value: the text's first, an array element, an object member's value.
    Value,
    /// A value or `]`, right after `[`.
    ValueOrClose,
    /// A key or `}`, right after `{`.
    KeyOrClose,
    /// A key, after `,` in an object.
    Key,
    /// The `:` after a key.
    Colon,
    /// `,` or the container's closer, after an element or member.
    CommaOrClose,
    /// Only whitespace: the text is complete.
    End,
    /// Inside a string (an object's key when `key`).
    Text { key: bool },
    /// After `\` in a string.
    Escape { key: bool },
    /// `left` more hex digits of a `\u` escape.
    Unicode { key: bool, left: u8 },
    /// Inside a number.
    Number,
    /// The rest of `true`, `false` or `null`.
    Literal(&'static [u8]),
}

/// A push validator of JSON prefixes.
#[derive(Debug)]
pub(crate) struct JsonPrefix {
    expect: Expect,
    /// The open containers, innermost last: `true` for an object.
    open: Vec<bool>,
}

impl Default for JsonPrefix {
    fn default() -> Self {
        Self {
            expect: Expect::Value,
            open: Vec::new(),
        }
    }
}

impl JsonPrefix {
    /// Takes the next bytes of the text: `Err(i)` when `bytes[i]` is the first byte no JSON
    /// text can have there (the validator then stays failed and must not be fed again).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), usize> {
        let mut at = 0;
        while let Some(&byte) = bytes.get(at) {
            if let Expect::Text { .. } = self.expect {
                // Plain string content, the bulk of a document's text, in one scan.
                let rest = bytes.get(at..).unwrap_or_default();
                match rest
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                {
                    Some(special) => at += special,
                    None => return Ok(()),
                }
                let Some(&special) = bytes.get(at) else {
                    return Ok(());
                };
                if !self.step(special) {
                    return Err(at);
                }
            } else if !self.step(byte) {
                return Err(at);
            }
            at += 1;
        }
        Ok(())
    }

    /// Takes one byte; `false` when it cannot be there.
    fn step(&mut self, byte: u8) -> bool {
        match self.expect {
            Expect::Text { key } => match byte {
                b'"' if key => self.expect = Expect::Colon,
                b'"' => self.value_done(),
                b'\\' => self.expect = Expect::Escape { key },
                0..0x20 => return false,
                _ => {}
            },
            Expect::Escape { key } => match byte {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    self.expect = Expect::Text { key };
                }
                b'u' => self.expect = Expect::Unicode { key, left: 4 },
                _ => return false,
            },
            Expect::Unicode { key, left } => {
                if !byte.is_ascii_hexdigit() {
                    return false;
                }
                self.expect = match left {
                    1 => Expect::Text { key },
                    _ => Expect::Unicode {
                        key,
                        left: left - 1,
                    },
                };
            }
            Expect::Number => {
                if !matches!(byte, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    // The number ended: the byte is whatever follows a value.
                    self.value_done();
                    return self.step(byte);
                }
            }
            Expect::Literal(rest) => match rest.split_first() {
                Some((&wanted, rest)) if wanted == byte => {
                    if rest.is_empty() {
                        self.value_done();
                    } else {
                        self.expect = Expect::Literal(rest);
                    }
                }
                _ => return false,
            },
            _ if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') => {}
            Expect::Value => return self.begin_value(byte),
            Expect::ValueOrClose => {
                return if byte == b']' {
                    self.close(false)
                } else {
                    self.begin_value(byte)
                };
            }
            Expect::KeyOrClose | Expect::Key => match byte {
                b'"' => self.expect = Expect::Text { key: true },
                b'}' if self.expect == Expect::KeyOrClose => return self.close(true),
                _ => return false,
            },
            Expect::Colon if byte == b':' => self.expect = Expect::Value,
            Expect::CommaOrClose => match byte {
                b',' if self.open.last() == Some(&true) => self.expect = Expect::Key,
                b',' => self.expect = Expect::Value,
                b']' => return self.close(false),
                b'}' => return self.close(true),
                _ => return false,
            },
            Expect::Colon | Expect::End => return false,
        }
        true
    }

    fn begin_value(&mut self, byte: u8) -> bool {
        self.expect = match byte {
            b'{' | b'[' => {
                if self.open.len() >= MAX_JSON_DEPTH {
                    return false;
                }
                self.open.push(byte == b'{');
                if byte == b'{' {
                    Expect::KeyOrClose
                } else {
                    Expect::ValueOrClose
                }
            }
            b'"' => Expect::Text { key: false },
            b'-' | b'0'..=b'9' => Expect::Number,
            b't' => Expect::Literal(b"rue"),
            b'f' => Expect::Literal(b"alse"),
            b'n' => Expect::Literal(b"ull"),
            _ => return false,
        };
        true
    }

    /// Closes the innermost container, which must be an object when `object`.
    fn close(&mut self, object: bool) -> bool {
        if self.open.pop() != Some(object) {
            return false;
        }
        self.value_done();
        true
    }

    fn value_done(&mut self) {
        self.expect = if self.open.is_empty() {
            Expect::End
        } else {
            Expect::CommaOrClose
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn first_error(text: &[u8]) -> Option<usize> {
        JsonPrefix::default().feed(text).err()
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(".*", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Every text serde_json writes is accepted, fed in any two pieces.
        #[test]
        fn json_is_accepted_however_it_is_split(value in value(), pretty in any::<bool>(), cut in any::<prop::sample::Index>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            }
            .unwrap_or_default();
            let cut = cut.index(text.len() + 1);
            let mut json = JsonPrefix::default();
            prop_assert_eq!(json.feed(&text.as_bytes()[..cut]), Ok(()));
            prop_assert_eq!(json.feed(&text.as_bytes()[cut..]), Ok(()));
        }

        /// Wherever a body is cut, a header that follows is refused on its first line.
        #[test]
        fn a_header_after_any_cut_is_refused(value in value(), cut in any::<prop::sample::Index>(), lower in any::<bool>()) {
            let text = serde_json::to_string(&json!({"jsonrpc": "2.0", "params": value}))
                .unwrap_or_default();
            let cut = cut.index(text.len() + 1);
            let header = if lower { "content-length: 52\r\n\r\n" } else { "Content-Length: 52\r\n\r\n" };
            let input = [&text.as_bytes()[..cut], header.as_bytes()].concat();
            let error = first_error(&input);
            prop_assert!(error.is_some_and(|at| at >= cut && at <= cut + header.find('\r').unwrap_or(0)), "{error:?} for a cut at {cut}");
        }
    }

    #[test]
    fn what_is_refused_and_where() {
        assert_eq!(
            first_error(b"  {\"a\": [1, -2.5e3, true, null, \"\\u00e9\"]}  "),
            None
        );
        assert_eq!(first_error(b"{not json"), Some(1));
        assert_eq!(first_error(b"{\"a\" 1}"), Some(5));
        assert_eq!(first_error(b"[1,]"), Some(3));
        assert_eq!(first_error(b"[1}"), Some(2));
        assert_eq!(first_error(b"{}{}"), Some(2));
        assert_eq!(first_error(b"\"a\nb\""), Some(2));
        assert_eq!(first_error(b"\"\\x\""), Some(2));
        assert_eq!(first_error(b"\"\\u12g4\""), Some(5));
        assert_eq!(first_error(b"nul!"), Some(3));
        assert_eq!(first_error(b"Content-Length: 2"), Some(0));
        let deep = "[".repeat(MAX_JSON_DEPTH);
        assert_eq!(first_error(deep.as_bytes()), None);
        assert_eq!(
            first_error(format!("{deep}[").as_bytes()),
            Some(MAX_JSON_DEPTH)
        );
    }
}
