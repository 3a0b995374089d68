//! Frames out of a byte stream (LSP's base protocol), resynchronised after a bad one.
//!
//! A frame is a header section (`Name: value` lines, a blank line) with a `Content-Length`,
//! then that many bytes of body. What is done with a bad one:
//!
//! | what arrives | what is done |
//! | --- | --- |
//! | bytes that are not a header section (garbage with or without a line break, a section without `Content-Length`, a bad or doubled `Content-Length`, a section over [`MAX_HEADER_BYTES`]) | skipped up to the next `Content-Length:` (any case, anywhere, even mid-line), holding at most one read; one [`Frame::Skipped`] says how much and why |
//! | a body shorter than its `Content-Length` (the next frame's header comes first) | the body ends where that header begins: a JSON prefix check ([`JsonPrefix`]) sees the header as soon as it arrives, so the next frame is read without waiting for bytes that will never come |
//! | a `Content-Length` over [`MAX_MESSAGE_BYTES`] | its body is skipped without being held (at most [`MAX_HEADER_BYTES`] of it plus one read in memory); if the body turns out shorter than declared, skipping stops where the next header begins |
//! | the input ending inside a frame | [`Frame::End`] with the reason (the caller logs it; the session ends) |
//!
//! The one blind spot: a body that is a valid JSON prefix and shorter than declared, after
//! which the client sends nothing. Its frame completes when the next message arrives.

use std::io::{self, Read};

use super::json_prefix::JsonPrefix;
use super::{MAX_HEADER_BYTES, MAX_MESSAGE_BYTES};

/// How many bytes one read asks for.
pub(super) const READ_CHUNK: usize = 64 * 1024;
/// A header section's length field, as matched when resynchronising (any case).
const LENGTH_NAME: &[u8] = b"content-length:";

/// What the stream held next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frame<'a> {
    /// A frame's body; `problem` says what was wrong with the frame when the next frame's
    /// header cut it short.
    Body {
        body: &'a [u8],
        problem: Option<String>,
    },
    /// Bytes that made no usable frame were skipped: how many, and why.
    Skipped(String),
    /// The input ended; why, when it ended inside a frame (or on a read error).
    End(Option<String>),
}

/// Bytes skipped while looking for a header, and why skipping began.
#[derive(Debug)]
struct Skip {
    bytes: u64,
    why: String,
}

impl Skip {
    fn describe(&self) -> String {
        format!(
            "{} bytes were skipped ({}); reading resumed at the next Content-Length header",
            self.bytes, self.why
        )
    }
}

/// A header section, parsed.
#[derive(Debug, PartialEq, Eq)]
enum Header {
    /// More bytes are needed.
    Partial,
    /// A section of `len` bytes declaring a body of `length` bytes.
    Complete { len: usize, length: u64 },
    /// Not a usable header section: why.
    Broken(String),
}

/// Reads frames from `R`, buffering at most one read past what a frame needs.
#[derive(Debug)]
pub(super) struct Frames<R> {
    input: R,
    buffer: Vec<u8>,
    /// Where the unconsumed bytes begin in `buffer`.
    start: usize,
    /// Bytes of the last frame returned, consumed when the next one is asked for.
    returned: usize,
    /// Skipping in progress (or done, and not told yet).
    skip: Option<Skip>,
    /// Looking for the next `Content-Length:`.
    scanning: bool,
}

impl<R: Read> Frames<R> {
    pub(super) fn new(input: R) -> Self {
        Self {
            input,
            buffer: Vec::new(),
            start: 0,
            returned: 0,
            skip: None,
            scanning: false,
        }
    }

    /// The next frame.
    pub(super) fn next_frame(&mut self) -> Frame<'_> {
        match self.advance() {
            Ok(Step::Body { len, problem }) => Frame::Body {
                body: self.available().get(..len).unwrap_or_default(),
                problem,
            },
            Ok(Step::Skipped(what)) => Frame::Skipped(what),
            Ok(Step::End(why)) => Frame::End(why),
            Err(error) => Frame::End(Some(format!("reading the input failed: {error}"))),
        }
    }

    fn advance(&mut self) -> io::Result<Step> {
        let returned = std::mem::take(&mut self.returned);
        self.consume(returned);
        // The memory a large body left behind goes back.
        if self.buffer.capacity() > 4 * READ_CHUNK && self.available().len() <= READ_CHUNK {
            self.compact();
            self.buffer.shrink_to(2 * READ_CHUNK);
        }
        loop {
            if self.scanning {
                let available = self.available();
                let found = find_length_name(available);
                let skipped =
                    found.unwrap_or(available.len().saturating_sub(LENGTH_NAME.len() - 1));
                self.consume(skipped);
                if let Some(skip) = &mut self.skip {
                    skip.bytes += skipped as u64;
                }
                if found.is_some() {
                    self.scanning = false;
                } else if !self.fill()? {
                    return Ok(Step::End(Some(self.ended_skipping())));
                }
                continue;
            }
            if self.skip.is_none() {
                // Blank lines between frames are tolerated.
                let blank = self
                    .available()
                    .iter()
                    .take_while(|&&b| b == b'\r' || b == b'\n')
                    .count();
                self.consume(blank);
                if self.available().is_empty() {
                    if !self.fill()? {
                        return Ok(Step::End(None));
                    }
                    continue;
                }
            }
            match parse_header(self.available()) {
                Header::Partial => {
                    if !self.fill()? {
                        return Ok(Step::End(Some(if self.skip.is_some() {
                            self.ended_skipping()
                        } else {
                            "the input ended inside a header section".to_owned()
                        })));
                    }
                }
                Header::Broken(why) => {
                    // Resynchronise on a header that begins after this section's first byte.
                    let skip = self.skip.get_or_insert(Skip { bytes: 0, why });
                    skip.bytes += 1;
                    self.consume(1);
                    self.scanning = true;
                }
                Header::Complete { len, length } => {
                    if let Some(skip) = self.skip.take() {
                        // Told first; the header is read again on the next call.
                        return Ok(Step::Skipped(skip.describe()));
                    }
                    self.consume(len);
                    return self.body(length);
                }
            }
        }
    }

    /// The body of `length` bytes at the front of the input.
    fn body(&mut self, length: u64) -> io::Result<Step> {
        let keep = length <= MAX_MESSAGE_BYTES as u64;
        if keep {
            self.reserve(length as usize);
        }
        let mut json = JsonPrefix::default();
        // Body bytes dropped already (a body over the cap is not held), validated, and
        // searched for the next header.
        let mut dropped = 0u64;
        let mut checked = 0usize;
        let mut searched: Option<usize> = None;
        loop {
            let held = self.available().len();
            let here = usize::try_from(length - dropped).map_or(held, |left| left.min(held));
            if searched.is_none()
                && let Err(at) = json.feed(self.available().get(checked..here).unwrap_or_default())
            {
                // Not JSON from here on: the next frame's header, if that is what came,
                // began at most one header section before.
                searched = Some((checked + at).saturating_sub(MAX_HEADER_BYTES));
            }
            checked = here;
            if let Some(from) = searched {
                let window = self.available().get(from..here).unwrap_or_default();
                if let Some(at) = find_length_name(window) {
                    let cut = from + at;
                    let problem = format!(
                        "a message declared {length} bytes but the next frame began after {}",
                        dropped + cut as u64
                    );
                    if keep {
                        self.returned = cut;
                        return Ok(Step::Body {
                            len: cut,
                            problem: Some(problem),
                        });
                    }
                    self.consume(cut);
                    return Ok(Step::Skipped(format!(
                        "{problem}; it was over the cap and skipped"
                    )));
                }
                searched = Some(here.saturating_sub(LENGTH_NAME.len() - 1).max(from));
            }
            if dropped + here as u64 == length {
                if keep {
                    self.returned = here;
                    return Ok(Step::Body {
                        len: here,
                        problem: None,
                    });
                }
                self.consume(here);
                return Ok(Step::Skipped(format!(
                    "a message of {length} bytes was skipped: promptforge-lsp reads messages of at most {} MiB",
                    MAX_MESSAGE_BYTES / (1024 * 1024)
                )));
            }
            if !keep {
                // Keep only what a header that began in it would need.
                let drop = here.saturating_sub(MAX_HEADER_BYTES);
                self.consume(drop);
                dropped += drop as u64;
                checked -= drop;
                searched = searched.map(|from| from.saturating_sub(drop));
            }
            if !self.fill()? {
                return Ok(Step::End(Some(format!(
                    "the input ended {} bytes into a message body of {length} bytes; the message was dropped",
                    dropped + here as u64
                ))));
            }
        }
    }

    /// What was skipped, counting what is left, when the input ends while skipping.
    fn ended_skipping(&mut self) -> String {
        let left = self.available().len() as u64;
        let skip = self.skip.get_or_insert(Skip {
            bytes: 0,
            why: "bytes after a frame".to_owned(),
        });
        skip.bytes += left;
        format!("{}; then the input ended", skip.describe())
    }

    fn available(&self) -> &[u8] {
        self.buffer.get(self.start..).unwrap_or_default()
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buffer.len());
    }

    /// Room for `n` unconsumed bytes.
    fn reserve(&mut self, n: usize) {
        self.compact();
        self.buffer.reserve(n.saturating_sub(self.buffer.len()));
    }

    /// Drops the consumed bytes.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
    }

    /// Reads once more; `false` at the end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        self.compact();
        let len = self.buffer.len();
        self.buffer.resize(len + READ_CHUNK, 0);
        loop {
            let read = self
                .input
                .read(self.buffer.get_mut(len..).unwrap_or_default());
            match read {
                Ok(n) => {
                    self.buffer.truncate(len + n);
                    return Ok(n > 0);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    self.buffer.truncate(len);
                    return Err(error);
                }
            }
        }
    }

    /// The memory the buffer holds (for the tests' bound).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.buffer.capacity()
    }
}

/// [`Frame`] without the borrow.
enum Step {
    Body { len: usize, problem: Option<String> },
    Skipped(String),
    End(Option<String>),
}

/// Where `content-length:` begins in `bytes`, in any case.
fn find_length_name(bytes: &[u8]) -> Option<usize> {
    bytes.windows(LENGTH_NAME.len()).position(|w| {
        w.first().is_some_and(|&b| b | 0x20 == b'c') && w.eq_ignore_ascii_case(LENGTH_NAME)
    })
}

/// A header section at the front of `bytes`.
fn parse_header(bytes: &[u8]) -> Header {
    let mut length: Option<u64> = None;
    let mut at = 0;
    loop {
        let rest = bytes.get(at..).unwrap_or_default();
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return if bytes.len() > MAX_HEADER_BYTES {
                Header::Broken(format!(
                    "a header section longer than {MAX_HEADER_BYTES} bytes"
                ))
            } else {
                Header::Partial
            };
        };
        at += end + 1;
        if at > MAX_HEADER_BYTES {
            return Header::Broken(format!(
                "a header section longer than {MAX_HEADER_BYTES} bytes"
            ));
        }
        let line = rest.get(..end).unwrap_or_default();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return match length {
                Some(length) => Header::Complete { len: at, length },
                None => Header::Broken("a header section without Content-Length".to_owned()),
            };
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Header::Broken("a line that is not a `Name: value` header".to_owned());
        };
        let (name, value) = line.split_at(colon);
        if name.is_empty() || !name.iter().all(|&b| is_token(b)) {
            return Header::Broken("a line that is not a `Name: value` header".to_owned());
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let value = String::from_utf8_lossy(value.get(1..).unwrap_or_default());
            let value = value.trim_matches([' ', '\t']);
            match value.parse::<u64>() {
                Ok(n) if length.is_none_or(|seen| seen == n) => length = Some(n),
                Ok(_) => return Header::Broken("two different Content-Length headers".to_owned()),
                Err(_) => return Header::Broken(format!("Content-Length `{value}`")),
            }
        }
    }
}

/// A character of an HTTP header name (RFC 9110's `tchar`).
fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    /// Every frame of `input`, bodies as text.
    fn frames(input: impl Read) -> Vec<String> {
        let mut frames = Frames::new(input);
        let mut out = Vec::new();
        loop {
            match frames.next_frame() {
                Frame::Body { body, problem } => out.push(format!(
                    "body {}{}",
                    String::from_utf8_lossy(body),
                    problem.map(|p| format!(" ({p})")).unwrap_or_default()
                )),
                Frame::Skipped(what) => out.push(format!("skipped: {what}")),
                Frame::End(why) => {
                    out.push(format!("end {why:?}"));
                    return out;
                }
            }
        }
    }

    /// A reader that hands out one byte per read: every frame split everywhere.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some((&first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            let Some(slot) = buf.first_mut() else {
                return Ok(0);
            };
            *slot = first;
            self.0 = rest;
            Ok(1)
        }
    }

    const GOOD: &str = r#"{"jsonrpc":"2.0","id":2,"method":"shutdown"}"#;

    #[test]
    fn garbage_without_a_line_break_is_skipped_to_the_next_header() {
        let input = format!("garbage{}{}", frame(GOOD), frame("{}"));
        let expected = vec![
            "skipped: 7 bytes were skipped (a header section without Content-Length); reading resumed at the next Content-Length header".to_owned(),
            format!("body {GOOD}"),
            "body {}".to_owned(),
            "end None".to_owned(),
        ];
        assert_eq!(frames(input.as_bytes()), expected);
        assert_eq!(frames(Trickle(input.as_bytes())), expected);
        // Garbage that is not even a header name is found the same way, as is a body
        // whose frame had no length at all.
        let input = format!(
            "{{junk}}\r\n{}X-Other: 1\r\n\r\n{{}}{}",
            frame(GOOD),
            frame(GOOD)
        );
        let got = frames(input.as_bytes());
        assert_eq!(got.len(), 5, "{got:?}");
        assert!(
            got[0].starts_with("skipped: 8 bytes") && got[0].contains("`Name: value`"),
            "{got:?}"
        );
        assert_eq!(got[1], format!("body {GOOD}"));
        assert!(
            got[2].starts_with("skipped: 16 bytes") && got[2].contains("without Content-Length"),
            "{got:?}"
        );
        assert_eq!(got[3], format!("body {GOOD}"));
    }

    #[test]
    fn a_short_body_ends_where_the_next_frame_begins() {
        // A whole message under too long a length, then a truncated one: both end at the
        // next header, which is read at once (nothing more is needed from the input).
        let whole = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let cut = r#"{"jsonrpc":"2.0","method":"textDocument/did"#;
        let input = format!(
            "Content-Length: 300\r\n\r\n{whole}Content-Length: 500\r\n\r\n{cut}{}",
            frame(GOOD)
        );
        let expected = vec![
            format!(
                "body {whole} (a message declared 300 bytes but the next frame began after {})",
                whole.len()
            ),
            format!(
                "body {cut} (a message declared 500 bytes but the next frame began after {})",
                cut.len()
            ),
            format!("body {GOOD}"),
            "end None".to_owned(),
        ];
        assert_eq!(frames(input.as_bytes()), expected);
        assert_eq!(frames(Trickle(input.as_bytes())), expected);
    }

    #[test]
    fn a_length_over_the_cap_is_skipped_or_cut_at_the_next_header() {
        // A bogus length: the next frame follows at once.
        let input = format!("Content-Length: 99999999999999\r\n\r\n{}", frame(GOOD));
        let got = frames(input.as_bytes());
        assert_eq!(
            got,
            [
                "skipped: a message declared 99999999999999 bytes but the next frame began after 0; it was over the cap and skipped".to_owned(),
                format!("body {GOOD}"),
                "end None".to_owned(),
            ]
        );
        // A real one (JSON all the way): skipped exactly, never held.
        let huge = MAX_MESSAGE_BYTES + 1;
        let mut input = format!("Content-Length: {huge}\r\n\r\n[").into_bytes();
        input.resize(input.len() + huge - 2, b' ');
        input.push(b']');
        input.extend_from_slice(frame(GOOD).as_bytes());
        let mut frames = Frames::new(input.as_slice());
        assert!(
            matches!(frames.next_frame(), Frame::Skipped(what) if what.contains("at most 64 MiB"))
        );
        assert!(
            frames.held() <= 2 * READ_CHUNK + MAX_HEADER_BYTES,
            "{}",
            frames.held()
        );
        assert_eq!(
            frames.next_frame(),
            Frame::Body {
                body: GOOD.as_bytes(),
                problem: None
            }
        );
        assert_eq!(frames.next_frame(), Frame::End(None));
    }

    #[test]
    fn bad_headers_are_skipped_and_named() {
        let input = [
            "Content-Length: abc\r\n\r\n".to_owned(),
            frame("{not json"),
            "\r\n".to_owned(),
            format!("X-Junk: {}\r\n", "x".repeat(MAX_HEADER_BYTES)),
            frame(GOOD),
            // Resynchronised on the second length, which is too long: its body ends at
            // the next header.
            "Content-Length: 2\r\ncontent-length: 30000\r\n\r\n{}".to_owned(),
            frame(GOOD),
        ]
        .concat();
        let got = frames(input.as_bytes());
        assert_eq!(got.len(), 8, "{got:?}");
        assert!(got[0].contains("(Content-Length `abc`)"), "{got:?}");
        // A body of the declared length that is not JSON is the caller's to answer.
        assert_eq!(got[1], "body {not json");
        assert!(
            got[2].contains(&format!("longer than {MAX_HEADER_BYTES} bytes")),
            "{got:?}"
        );
        assert_eq!(got[3], format!("body {GOOD}"));
        assert!(
            got[4].contains("two different Content-Length headers"),
            "{got:?}"
        );
        assert_eq!(
            got[5],
            "body {} (a message declared 30000 bytes but the next frame began after 2)"
        );
        assert_eq!(got[6], format!("body {GOOD}"));
        assert_eq!(got[7], "end None");
    }

    #[test]
    fn the_input_ending_inside_a_frame_is_named() {
        let got =
            frames(format!("{}Content-Length: 40\r\n\r\n{{\"jsonrpc\"", frame(GOOD)).as_bytes());
        assert_eq!(
            got,
            [
                format!("body {GOOD}"),
                "end Some(\"the input ended 10 bytes into a message body of 40 bytes; the message was dropped\")".to_owned(),
            ]
        );
        let got = frames("Content-Length: 4".as_bytes());
        assert_eq!(
            got,
            ["end Some(\"the input ended inside a header section\")"]
        );
        let got = frames("junk\r\nmore junk".as_bytes());
        assert_eq!(got.len(), 1);
        assert!(
            got[0].contains("15 bytes were skipped") && got[0].contains("then the input ended"),
            "{got:?}"
        );
    }
}
