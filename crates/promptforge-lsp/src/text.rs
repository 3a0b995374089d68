//! Document text and positions: the client's text, the normalized text core's spans point
//! into, and LSP positions (line, UTF-16 code unit) in between.
//!
//! LSP counts lines with `\n`, `\r\n` and `\r` as breaks and columns in UTF-16 code units.
//! Core reads [`normalized`](promptforge_core::parse::normalized) text (no byte-order
//! mark, CRLF turned into LF) and reports byte spans into it. [`DocText`] keeps both texts
//! and maps a normalized byte offset to the client's text and on to a [`Position`], and
//! back.

use std::ops::Range;
use std::sync::Arc;

use lsp_types::{Position, Range as LspRange};
use ropey::Rope;

/// Line starts of a text under LSP's line-break rules, with UTF-16 column conversion.
#[derive(Debug, Clone, Default)]
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => starts.push(i + 1),
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                    starts.push(i + 2);
                    i += 1;
                }
                b'\r' => starts.push(i + 1),
                _ => {}
            }
            i += 1;
        }
        Self { starts }
    }

    /// The byte range of line `line` without its break.
    fn line_range(&self, text: &str, line: usize) -> Range<usize> {
        let start = self.starts.get(line).copied().unwrap_or(text.len());
        let next = self.starts.get(line + 1).copied().unwrap_or(text.len());
        let content = &text[start..next];
        let end = next - (content.len() - content.trim_end_matches(['\n', '\r']).len());
        start..end.max(start)
    }

    /// The position of byte `offset` (clamped to the text and to a character boundary).
    pub(crate) fn position(&self, text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self
            .starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let range = self.line_range(text, line);
        let end = offset.clamp(range.start, range.end);
        let column: usize = text[range.start..end].chars().map(char::len_utf16).sum();
        Position::new(to_u32(line), to_u32(column))
    }

    /// The byte offset of `position`; a column past the line's end means its end, a line
    /// past the last means the end of the text (as the protocol asks).
    pub(crate) fn offset(&self, text: &str, position: Position) -> usize {
        let line = position.line as usize;
        if line >= self.starts.len() {
            return text.len();
        }
        let range = self.line_range(text, line);
        let mut units = 0usize;
        let wanted = position.character as usize;
        for (at, c) in text[range.clone()].char_indices() {
            if units >= wanted {
                return range.start + at;
            }
            units += c.len_utf16();
        }
        range.end
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One version of a document: the client's text and the normalized text core reads.
#[derive(Debug)]
pub(crate) struct DocText {
    original: String,
    lines: Arc<LineIndex>,
    /// The normalized text when it differs from the original.
    normalized: Option<String>,
    /// Bytes of byte-order mark removed at the start (0 or 3).
    bom: usize,
    /// Normalized offsets of every `\n` whose `\r` was removed, ascending.
    removed_cr: Vec<usize>,
    /// Line starts of the normalized text, counting `\n` only (core's line numbers).
    core_lines: Vec<usize>,
}

impl DocText {
    pub(crate) fn new(original: String, lines: Arc<LineIndex>) -> Self {
        let bom = if original.starts_with('\u{feff}') {
            3
        } else {
            0
        };
        let body = &original[bom..];
        let (normalized, removed_cr) = if body.contains("\r\n") {
            let mut text = String::with_capacity(body.len());
            let mut removed = Vec::new();
            let mut rest = body;
            while let Some(at) = rest.find("\r\n") {
                text.push_str(&rest[..at]);
                removed.push(text.len());
                text.push('\n');
                rest = &rest[at + 2..];
            }
            text.push_str(rest);
            (Some(text), removed)
        } else if bom > 0 {
            (Some(body.to_owned()), Vec::new())
        } else {
            (None, Vec::new())
        };
        let norm = normalized.as_deref().unwrap_or(&original);
        let mut core_lines = vec![0];
        core_lines.extend(norm.match_indices('\n').map(|(i, _)| i + 1));
        Self {
            original,
            lines,
            normalized,
            bom,
            removed_cr,
            core_lines,
        }
    }

    /// The text core reads and reports spans into.
    pub(crate) fn normalized(&self) -> &str {
        self.normalized.as_deref().unwrap_or(&self.original)
    }

    /// The client's text.
    pub(crate) fn original(&self) -> &str {
        &self.original
    }

    /// The client's byte offset of normalized offset `offset`.
    fn to_original(&self, offset: usize) -> usize {
        let before = self.removed_cr.partition_point(|&at| at < offset);
        offset + before + self.bom
    }

    /// The normalized offset of the client's byte offset `offset` (a `\r` of a CRLF maps to
    /// its `\n`).
    fn to_normalized(&self, offset: usize) -> usize {
        let offset = offset.saturating_sub(self.bom);
        // Each removed `\r` sits at original offset `n + k` for the k-th removed newline n.
        let mut low = 0;
        let mut high = self.removed_cr.len();
        while low < high {
            let mid = (low + high) / 2;
            if self.removed_cr[mid] + mid < offset {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        offset - low
    }

    /// The position of normalized offset `offset`.
    pub(crate) fn position(&self, offset: usize) -> Position {
        self.lines
            .position(&self.original, self.to_original(offset))
    }

    /// The range of normalized span `span`.
    pub(crate) fn range(&self, span: Range<usize>) -> LspRange {
        LspRange::new(self.position(span.start), self.position(span.end))
    }

    /// The normalized offset of `position`.
    pub(crate) fn offset(&self, position: Position) -> usize {
        self.to_normalized(self.lines.offset(&self.original, position))
    }

    /// The normalized span of core's 1-based line `line` without its break, `None` past
    /// the end.
    pub(crate) fn core_line(&self, line: usize) -> Option<Range<usize>> {
        let text = self.normalized();
        let start = *self.core_lines.get(line.checked_sub(1)?)?;
        let end = self
            .core_lines
            .get(line)
            .map_or(text.len(), |next| next - 1);
        Some(start..end.max(start))
    }
}

/// A document's text as it is edited: a rope, so a change costs its own length and a
/// logarithm of the document's, never the whole text (a `didChange` of thousands of edits
/// on a large file stays cheap). Lines break as LSP's do (`\n`, `\r\n`, `\r`: ropey's
/// `cr_lines` without `unicode_lines`), the same as [`LineIndex`]; columns are UTF-16 code
/// units.
#[derive(Debug, Clone)]
pub(crate) struct EditBuffer {
    rope: Rope,
}

/// A change refused because the text would grow past the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    /// The length the text would have had, in bytes.
    pub(crate) would_be: usize,
}

impl EditBuffer {
    pub(crate) fn new(text: &str) -> Self {
        Self {
            rope: Rope::from_str(text),
        }
    }

    /// The text's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.rope.len_bytes()
    }

    /// The text, in one piece.
    pub(crate) fn text(&self) -> String {
        self.rope.to_string()
    }

    /// Applies one content change (a range in the current text's positions, or the whole
    /// text), unless the text would then be longer than `max_bytes` (it is left as it was).
    /// Positions are clamped as [`LineIndex::offset`] clamps them, and an end before the
    /// start means the start.
    pub(crate) fn apply(
        &mut self,
        range: Option<LspRange>,
        new: &str,
        max_bytes: usize,
    ) -> Result<(), TooLarge> {
        let Some(range) = range else {
            if new.len() > max_bytes {
                return Err(TooLarge {
                    would_be: new.len(),
                });
            }
            self.rope = Rope::from_str(new);
            return Ok(());
        };
        let start = self.char_at(range.start);
        let end = self.char_at(range.end).max(start);
        let removed = self.rope.char_to_byte(end) - self.rope.char_to_byte(start);
        let would_be = self.len() - removed + new.len();
        if would_be > max_bytes {
            return Err(TooLarge { would_be });
        }
        self.rope.remove(start..end);
        self.rope.insert(start, new);
        Ok(())
    }

    /// The char index of `position`; a column past the line's end means its end, a line
    /// past the last means the end of the text, a column inside a surrogate pair means
    /// after its character.
    fn char_at(&self, position: Position) -> usize {
        let rope = &self.rope;
        let line = position.line as usize;
        if line >= rope.len_lines() {
            return rope.len_chars();
        }
        let start = rope.line_to_char(line);
        let mut end = if line + 1 < rope.len_lines() {
            rope.line_to_char(line + 1)
        } else {
            rope.len_chars()
        };
        // The line's break is not part of it.
        if end > start && rope.char(end - 1) == '\n' {
            end -= 1;
        }
        if end > start && rope.char(end - 1) == '\r' {
            end -= 1;
        }
        let wanted = rope.char_to_utf16_cu(start) + position.character as usize;
        if wanted >= rope.char_to_utf16_cu(end) {
            return end;
        }
        let at = rope.utf16_cu_to_char(wanted);
        if rope.char_to_utf16_cu(at) < wanted {
            at + 1
        } else {
            at
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> DocText {
        DocText::new(text.to_owned(), Arc::new(LineIndex::new(text)))
    }

    #[test]
    fn utf16_columns_count_surrogate_pairs() {
        let text = "héllo 😀 x\nnext";
        let d = doc(text);
        let x = text.find('x').unwrap_or(0);
        assert_eq!(d.position(x), Position::new(0, 9));
        assert_eq!(d.offset(Position::new(0, 9)), x);
        // A column past the end clamps to the end of the line.
        assert_eq!(d.offset(Position::new(0, 99)), text.find('\n').unwrap_or(0));
        assert_eq!(d.offset(Position::new(7, 0)), text.len());
    }

    #[test]
    fn crlf_and_bom_map_between_the_texts() {
        let original = "\u{feff}ab\r\ncd\r\nef";
        let d = doc(original);
        assert_eq!(d.normalized(), "ab\ncd\nef");
        let e = d.normalized().find('e').unwrap_or(0);
        assert_eq!(d.position(e), Position::new(2, 0));
        assert_eq!(d.offset(Position::new(2, 1)), e + 1);
        // The end of line 0 is the `\n` in normalized text; the client's text holds the
        // byte-order mark, one UTF-16 unit.
        assert_eq!(d.position(2), Position::new(0, 3));
        assert_eq!(d.offset(Position::new(0, 3)), 2);
        assert_eq!(d.offset(Position::new(1, 0)), 3);
        assert_eq!(d.core_line(2), Some(3..5));
        assert_eq!(d.core_line(4), None);
    }

    #[test]
    fn lone_carriage_returns_break_lines_for_the_protocol() {
        let index = LineIndex::new("a\rb\nc");
        assert_eq!(index.position("a\rb\nc", 2), Position::new(1, 0));
        assert_eq!(index.position("a\rb\nc", 4), Position::new(2, 0));
    }

    /// The naive way, the server's before ropes: each change against a fresh line index
    /// of the whole text. The reference the rope must agree with.
    fn apply_naively(text: &mut String, range: Option<LspRange>, new: &str) {
        match range {
            None => new.clone_into(text),
            Some(range) => {
                let lines = LineIndex::new(text);
                let start = lines.offset(text, range.start);
                let end = lines.offset(text, range.end).max(start);
                text.replace_range(start..end, new);
            }
        }
    }

    #[test]
    fn incremental_changes_use_utf16_ranges() {
        let mut buffer = EditBuffer::new("é😀z\nline");
        let range = LspRange::new(Position::new(0, 1), Position::new(0, 3));
        assert_eq!(buffer.apply(Some(range), "-", 100), Ok(()));
        assert_eq!(buffer.text(), "é-z\nline");
        // Inside the surrogate pair: after the emoji, as the line index rounds.
        let mut buffer = EditBuffer::new("a😀b");
        let range = LspRange::new(Position::new(0, 2), Position::new(0, 2));
        assert_eq!(buffer.apply(Some(range), "|", 100), Ok(()));
        assert_eq!(buffer.text(), "a😀|b");
        assert_eq!(buffer.apply(None, "new", 100), Ok(()));
        assert_eq!(buffer.text(), "new");
    }

    #[test]
    fn a_change_past_the_cap_is_refused_whole() {
        let mut buffer = EditBuffer::new("abc");
        let end = LspRange::new(Position::new(0, 3), Position::new(0, 3));
        assert_eq!(buffer.apply(Some(end), "de", 5), Ok(()));
        assert_eq!(
            buffer.apply(Some(end), "!", 5),
            Err(TooLarge { would_be: 6 })
        );
        assert_eq!(
            buffer.apply(None, "123456", 5),
            Err(TooLarge { would_be: 6 })
        );
        assert_eq!(buffer.text(), "abcde");
    }

    #[test]
    fn only_the_protocols_line_breaks_count() {
        // Vertical tab, form feed, NEL, LS and PS break lines for ropey's default features,
        // not for LSP (and not for the line index).
        let text = "a\u{b}b\u{c}c\u{85}d\u{2028}e\u{2029}f\rg\r\nh\ni";
        let lines = LineIndex::new(text);
        let buffer = EditBuffer::new(text);
        for line in 0..6 {
            for character in 0..12 {
                let position = Position::new(line, character);
                let char_at = buffer.char_at(position);
                let byte = text
                    .char_indices()
                    .nth(char_at)
                    .map_or(text.len(), |(at, _)| at);
                assert_eq!(byte, lines.offset(text, position), "{position:?}");
            }
        }
    }

    mod equivalence {
        use super::*;
        use proptest::prelude::*;

        fn piece() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop_oneof![
                    Just("\n"),
                    Just("\r\n"),
                    Just("\r"),
                    Just("a"),
                    Just("bc"),
                    Just("é"),
                    Just("😀"),
                    Just("\u{2028}"),
                ],
                0..12,
            )
            .prop_map(|parts| parts.concat())
        }

        fn change() -> impl Strategy<Value = (Option<LspRange>, String)> {
            let position =
                (0u32..8, 0u32..10).prop_map(|(line, character)| Position::new(line, character));
            (
                prop::option::weighted(0.95, (position.clone(), position)),
                piece(),
            )
                .prop_map(|(range, text)| (range.map(|(a, b)| LspRange::new(a, b)), text))
        }

        proptest! {
            /// Changes applied in sequence, each against the previous result, give the
            /// naive way's text.
            #[test]
            fn the_rope_agrees_with_the_naive_way(
                text in prop::collection::vec(piece(), 0..6).prop_map(|p| p.concat()),
                changes in prop::collection::vec(change(), 0..40),
            ) {
                let mut naive = text.clone();
                let mut buffer = EditBuffer::new(&text);
                for (range, new) in &changes {
                    apply_naively(&mut naive, *range, new);
                    prop_assert_eq!(buffer.apply(*range, new, usize::MAX), Ok(()));
                    prop_assert_eq!(&buffer.text(), &naive);
                }
                prop_assert_eq!(buffer.len(), naive.len());
            }
        }
    }
}
