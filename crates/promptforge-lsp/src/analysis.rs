//! One analysed version of a document: its text, its index (built on first use), its
//! diagnostics and the quick fixes that are certain.
//!
//! The diagnostics are `promptforge check`'s — core's [`check`] on the same text, every
//! problem per file, same kinds and spans — followed by what only the index can see:
//! section references no visible section answers, `list_from_section` on a section without
//! items, and `{{ var.NAME }}` placeholders nothing assigns.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString, Range as LspRange};
use promptforge_core::parse::{FRONTMATTER_FIELDS, MAX_PROMPT_BYTES, check};

use crate::index::{Index, RefCall, Target, VarRole};
use crate::lua::escape_for;
use crate::text::{DocText, LineIndex};

/// `source` of the diagnostics that are `promptforge check`'s.
pub(crate) const CHECK_SOURCE: &str = "promptforge";
/// `source` of the diagnostics only the language server reports.
pub(crate) const INDEX_SOURCE: &str = "promptforge-lsp";
/// At most this many index diagnostics per document (check's own are capped at 50).
pub(crate) const MAX_INDEX_DIAGNOSTICS: usize = 200;
/// Names longer than this (in characters) are not compared for a fix.
const MAX_COMPARED_CHARS: usize = 256;
/// At most this many sections a "visible sections" listing names, as the run's error does.
const LISTED: usize = 20;

/// One version of a document and what is derived from it.
#[derive(Debug)]
pub(crate) struct Analysis {
    pub(crate) version: i32,
    pub(crate) text: DocText,
    /// The name core's messages use (the file path).
    pub(crate) origin: String,
    index: OnceLock<Index>,
}

impl Analysis {
    pub(crate) fn new(version: i32, text: String, lines: Arc<LineIndex>, origin: String) -> Self {
        Self {
            version,
            text: DocText::new(text, lines),
            origin,
            index: OnceLock::new(),
        }
    }

    /// The index, built by the first caller (empty for a text over core's size cap: check
    /// reports that one).
    pub(crate) fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            let text = self.text.normalized();
            Index::build(if text.len() > MAX_PROMPT_BYTES {
                ""
            } else {
                text
            })
        })
    }

    /// Every diagnostic: check's, then the index's.
    pub(crate) fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut out: Vec<Diagnostic> = check(&self.origin, self.text.original())
            .iter()
            .map(|found| Diagnostic {
                range: self.check_range(found),
                severity: Some(DiagnosticSeverity::ERROR),
                code: Some(NumberOrString::String(
                    found.error().kind().as_str().to_owned(),
                )),
                source: Some(CHECK_SOURCE.to_owned()),
                message: found.error().message().to_owned(),
                ..Diagnostic::default()
            })
            .collect();
        let index = self.index();
        let mut extra = Vec::new();
        for reference in &index.refs {
            let (severity, code, message) = match &reference.target {
                Target::Found(ids) => {
                    let no_items = reference.call == RefCall::ListFromSection
                        && ids.iter().all(|&id| {
                            index
                                .outline
                                .sections()
                                .get(id)
                                .is_some_and(|s| !s.has_items())
                        });
                    if !no_items {
                        continue;
                    }
                    (
                        DiagnosticSeverity::ERROR,
                        "no_list_items",
                        format!(
                            "section `{}` has no list items (bullets or numbered lines)",
                            reference.literal.value
                        ),
                    )
                }
                Target::NotAnAddress => (
                    DiagnosticSeverity::ERROR,
                    "not_a_section_address",
                    format!(
                        "`{}` is not a section address; write the heading level and name, such as `## Research`",
                        reference.literal.value
                    ),
                ),
                Target::NotVisible(visible) => (
                    DiagnosticSeverity::ERROR,
                    "unknown_section",
                    format!(
                        "no section `{}` is visible from `{}`; visible sections: {}",
                        reference.literal.value,
                        index.scope_heading(reference.owner),
                        listing(index, visible)
                    ),
                ),
                Target::Missing => (
                    DiagnosticSeverity::WARNING,
                    "unknown_section",
                    format!(
                        "no section `{}` in this file (this shared code can address only the sections of its caller's visible set)",
                        reference.literal.value
                    ),
                ),
            };
            extra.push(self.diagnostic(reference.literal.span.clone(), severity, code, message));
        }
        if !index.dynamic_var_write {
            for site in index.vars.iter().filter(|v| v.role == VarRole::Placeholder) {
                let assigned = index
                    .vars
                    .iter()
                    .any(|v| v.role == VarRole::Assigned && v.name == site.name);
                if !assigned {
                    extra.push(self.diagnostic(
                        site.span.clone(),
                        DiagnosticSeverity::WARNING,
                        "unassigned_variable",
                        format!(
                            "nothing in this file assigns `var.{0}`: rendering this placeholder fails with \"`var.{0}` is not defined\"",
                            site.name
                        ),
                    ));
                }
            }
        }
        extra.truncate(MAX_INDEX_DIAGNOSTICS);
        out.extend(extra);
        out
    }

    fn diagnostic(
        &self,
        span: Range<usize>,
        severity: DiagnosticSeverity,
        code: &str,
        message: String,
    ) -> Diagnostic {
        Diagnostic {
            range: self.text.range(span),
            severity: Some(severity),
            code: Some(NumberOrString::String(code.to_owned())),
            source: Some(INDEX_SOURCE.to_owned()),
            message,
            ..Diagnostic::default()
        }
    }

    /// Where a check diagnostic points: its span when the span starts on its line (as
    /// `promptforge check`'s line and column say), else the line's text.
    fn check_range(&self, found: &promptforge_core::parse::Diagnostic) -> LspRange {
        let line = found.line().and_then(|l| self.text.core_line(l));
        let span = found.error().span();
        match (span, line) {
            (Some(span), Some(line)) if span.start >= line.start && span.start <= line.end => {
                let end = if span.end > span.start {
                    span.end
                } else {
                    line.end
                };
                self.text.range(span.start..end)
            }
            (_, Some(line)) => {
                let text = &self.text.normalized()[line.clone()];
                let start = line.start + (text.len() - text.trim_start().len());
                self.text.range(start..line.end.max(start))
            }
            (Some(span), None) => self.text.range(span),
            (None, None) => self.text.range(0..0),
        }
    }

    /// Every certain fix in the document: the nearest visible section for an unknown
    /// target, the section whose name a bare target spells, the nearest field for an
    /// unknown frontmatter key.
    pub(crate) fn fixes(&self) -> Vec<Fix> {
        let index = self.index();
        let mut fixes = Vec::new();
        for reference in &index.refs {
            let candidates: Vec<String> = index
                .addressable(reference.owner)
                .iter()
                .filter_map(|&id| index.outline.sections().get(id))
                .filter(|s| reference.call != RefCall::ListFromSection || s.has_items())
                .map(|s| s.address())
                .collect();
            let replacement = match &reference.target {
                Target::NotVisible(_) => nearest(&reference.literal.value, &candidates),
                Target::NotAnAddress => {
                    let bare = reference.literal.value.trim();
                    let named: Vec<&String> = candidates
                        .iter()
                        .filter(|address| address.trim_start_matches('#').trim() == bare)
                        .collect();
                    match named.as_slice() {
                        [one] => Some((*one).clone()),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(address) = replacement {
                fixes.push(Fix {
                    title: format!("Change to `{address}`"),
                    diagnostic: reference.literal.span.clone(),
                    edit: reference.literal.content.clone(),
                    new_text: escape_for(&reference.literal.open, &address),
                });
            }
        }
        if let Some(front) = index.outline.frontmatter() {
            let entries = front.entries();
            for entry in entries {
                let parent = entry.parent().and_then(|p| entries.get(p)).map(|p| p.key());
                let known: Vec<String> = FRONTMATTER_FIELDS
                    .iter()
                    .filter_map(|f| match (parent, f.key.split_once('.')) {
                        (None, None) => Some(f.key.to_owned()),
                        (Some(p), Some((head, child))) if head == p => Some(child.to_owned()),
                        _ => None,
                    })
                    .collect();
                if known.is_empty() || known.iter().any(|k| k == entry.key()) {
                    continue;
                }
                if let Some(key) = nearest(entry.key(), &known) {
                    fixes.push(Fix {
                        title: format!("Change to `{key}`"),
                        diagnostic: entry.key_span(),
                        edit: entry.key_span(),
                        new_text: key,
                    });
                }
            }
        }
        fixes
    }
}

/// A certain quick fix: replace `edit` with `new_text`; offered where a request's range
/// meets `diagnostic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fix {
    pub(crate) title: String,
    pub(crate) diagnostic: Range<usize>,
    pub(crate) edit: Range<usize>,
    pub(crate) new_text: String,
}

/// The "visible sections" listing of a run error: at most twenty, then "and N more".
fn listing(index: &Index, visible: &[usize]) -> String {
    let mut names: Vec<String> = visible
        .iter()
        .take(LISTED)
        .filter_map(|&id| index.outline.sections().get(id))
        .map(|s| format!("`{}`", s.address()))
        .collect();
    if visible.len() > LISTED {
        names.push(format!("and {} more", visible.len() - LISTED));
    }
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The one candidate nearest to `written` by edit distance, when it is near enough (at
/// most a third of the length, at least one edit) and no other candidate is as near.
pub(crate) fn nearest(written: &str, candidates: &[String]) -> Option<String> {
    let written = written.trim();
    let limit = (written.chars().count() / 3).max(1);
    let mut best: Option<(usize, &String)> = None;
    let mut tie = false;
    let length = written.chars().count();
    for candidate in candidates {
        // Lengths further apart than the limit cannot be within it.
        if candidate.chars().count().abs_diff(length) > limit || length > MAX_COMPARED_CHARS {
            continue;
        }
        let distance = edit_distance(written, candidate);
        if distance == 0 || distance > limit {
            continue;
        }
        match best {
            Some((d, _)) if distance > d => {}
            Some((d, _)) if distance == d => tie = true,
            _ => {
                best = Some((distance, candidate));
                tie = false;
            }
        }
    }
    best.filter(|_| !tie).map(|(_, c)| c.clone())
}

/// Edit distance over characters (insertions, deletions, substitutions and transpositions
/// of neighbours each count one), case-sensitive.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut table = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            table[i * width + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut best = (table[(i - 1) * width + j] + 1)
                    .min(table[i * width + j - 1] + 1)
                    .min(table[(i - 1) * width + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(table[(i - 2) * width + j - 2] + 1);
                }
                best
            };
        }
    }
    table[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyse(text: &str) -> Analysis {
        Analysis::new(
            1,
            text.to_owned(),
            Arc::new(LineIndex::new(text)),
            "t.md".to_owned(),
        )
    }

    #[test]
    fn nearest_needs_a_unique_close_candidate() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            nearest("## Sumarise", &names(&["## Summarise", "## Research"])),
            Some("## Summarise".to_owned())
        );
        assert_eq!(nearest("## Zzz", &names(&["## Summarise"])), None);
        assert_eq!(nearest("## Ab", &names(&["## Ac", "## Ad"])), None);
        assert_eq!(
            nearest("nmae", &names(&["name", "version"])),
            Some("name".to_owned())
        );
    }

    #[test]
    fn check_and_index_diagnostics_together() {
        let text = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n# T\n\n## Summarise\n\n```lua\njump(\"## Sumarise\")\n```\n\nSay {{ var.nothing }}\n\n## Summarise\n";
        let analysis = analyse(text);
        let codes: Vec<String> = analysis
            .diagnostics()
            .iter()
            .filter_map(|d| match &d.code {
                Some(NumberOrString::String(code)) => Some(code.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            codes,
            [
                "duplicate_section",
                "unknown_section",
                "unassigned_variable"
            ]
        );
        let fixes = analysis.fixes();
        assert_eq!(fixes.len(), 1);
        assert_eq!(fixes[0].new_text, "## Summarise");
        assert_eq!(&text[fixes[0].edit.clone()], "## Sumarise");
    }

    #[test]
    fn frontmatter_typos_get_the_nearest_field() {
        let text = "---\nname: x\ndescrption: d\npromptforge: 1\ninput:\n  pth: a.md\n---\n\n# T\n";
        let fixes = analyse(text).fixes();
        let titles: Vec<&str> = fixes.iter().map(|f| f.new_text.as_str()).collect();
        assert_eq!(titles, ["description", "path"]);
    }
}
