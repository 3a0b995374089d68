//! Store globbing: `*` within a segment, `**` across segments.
//!
//! Patterns compile to a segment list matched with a bounded dynamic programme over
//! (pattern segment, path segment) pairs, so matching never backtracks exponentially.

use super::StoreError;

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone)]
enum Segment {
    /// `**`: zero or more whole segments.
    AnyDepth,
    /// A segment pattern made of literal runs separated by `*`.
    Parts(Vec<String>),
}

impl Glob {
    /// Compiles a pattern, rejecting syntax the store does not support.
    pub(crate) fn new(pattern: &str) -> Result<Self, StoreError> {
        let reject = |why: &str| Err(StoreError::invalid_glob(pattern, why));
        if pattern.is_empty() {
            return reject("the pattern is empty");
        }
        if pattern.contains('\\') {
            return reject("backslash escapes are not supported");
        }
        if pattern.starts_with('/') {
            return reject("patterns are relative: remove the leading slash");
        }
        if let Some(c) = pattern
            .chars()
            .find(|c| matches!(c, '?' | '[' | ']' | '{' | '}'))
        {
            return reject(&format!("`{c}` is not supported; use `*` and `**` only"));
        }
        let mut segments = Vec::new();
        for segment in pattern.split('/') {
            if segment.is_empty() {
                return reject("the pattern has an empty segment");
            }
            if segment.contains("***") {
                return reject("`***` is not supported");
            }
            if segment == "**" {
                segments.push(Segment::AnyDepth);
            } else if segment.contains("**") {
                return reject("`**` must be a whole path segment");
            } else {
                segments.push(Segment::Parts(
                    segment.split('*').map(str::to_owned).collect(),
                ));
            }
        }
        Ok(Self { segments })
    }

    /// Whether `path` matches the whole pattern.
    pub(crate) fn matches(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        // reachable[j]: pattern prefix matched the first j path segments.
        let mut reachable = vec![false; parts.len() + 1];
        reachable[0] = true;
        for segment in &self.segments {
            let mut next = vec![false; parts.len() + 1];
            match segment {
                Segment::AnyDepth => {
                    let mut seen = false;
                    for j in 0..=parts.len() {
                        seen |= reachable[j];
                        next[j] = seen;
                    }
                }
                Segment::Parts(pieces) => {
                    for j in 0..parts.len() {
                        if reachable[j] && segment_matches(pieces, parts[j]) {
                            next[j + 1] = true;
                        }
                    }
                }
            }
            reachable = next;
        }
        reachable[parts.len()]
    }
}

/// Matches one segment against `a*b*c` pieces greedily-left, which is exact for `*`-only
/// patterns (each piece is placed at its earliest position after the previous one).
fn segment_matches(pieces: &[String], text: &str) -> bool {
    if pieces.len() == 1 {
        return pieces[0] == text;
    }
    let (first, rest) = (&pieces[0], &pieces[1..]);
    let Some(mut remainder) = text.strip_prefix(first.as_str()) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return false;
    };
    for piece in middle {
        match remainder.find(piece.as_str()) {
            Some(at) => remainder = &remainder[at + piece.len()..],
            None => return false,
        }
    }
    remainder.len() >= last.len() && remainder.ends_with(last.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).unwrap().matches(path)
    }

    #[test]
    fn star_stays_within_a_segment() {
        assert!(check("notes/*.md", "notes/a.md"));
        assert!(!check("notes/*.md", "notes/sub/a.md"));
        assert!(check("*", "file"));
        assert!(!check("*", "dir/file"));
        assert!(check("a*b*c", "aXXbYYc"));
        assert!(check("a*b*c", "abc"));
        assert!(!check("a*b*c", "acb"));
        assert!(check("*.md", ".md"));
        assert!(!check("ab*ba", "aba"));
    }

    #[test]
    fn double_star_crosses_segments() {
        assert!(check("**", "a"));
        assert!(check("**", "a/b/c"));
        assert!(check("notes/**/*.md", "notes/a.md"));
        assert!(check("notes/**/*.md", "notes/x/y/a.md"));
        assert!(!check("notes/**/*.md", "other/a.md"));
        assert!(check("**/x", "x"));
        assert!(check("a/**", "a/b"));
    }

    #[test]
    fn rejects_unsupported_syntax() {
        for pattern in [
            "", "a\\*", "***", "a/***/b", "a**", "**b", "x?", "[ab]", "{a,b}", "/a", "a//b",
        ] {
            assert!(Glob::new(pattern).is_err(), "{pattern}");
        }
    }

    #[test]
    fn pathological_patterns_stay_linear() {
        let pattern = format!("{}b", "a*".repeat(50));
        let text = "a".repeat(5000);
        assert!(!check(&pattern, &text));
        let deep = vec!["**"; 40].join("/") + "/z";
        let path = vec!["q"; 200].join("/");
        assert!(!check(&deep, &path));
    }
}
