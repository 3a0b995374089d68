//! The lexical half of the hybrid score: IDF-weighted coverage of the need's terms.
//!
//! For a need with distinct terms `Q` and a tool whose text has terms `D`, the score is
//! `sum(idf(t) * field(t) for t in Q and D) / sum(idf(t) for t in Q)`, in `0.0..=1.0`,
//! where `field(t)` is 1 for a term of the tool's name or description and
//! [`SCHEMA_FIELD_WEIGHT`] for a term only its parameters (names, descriptions, enum
//! values) carry. IDF comes from
//! the catalog (BM25's smoothed form), so a term every tool shares counts for little, and a
//! need term no tool mentions still weighs in the denominator: a need about something the
//! catalog never names scores low everywhere, which helps abstention.

use std::collections::{HashMap, HashSet};

/// Words too common in needs and tool descriptions to carry meaning.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "does", "for",
    "from", "get", "give", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me",
    "my", "of", "on", "or", "please", "should", "so", "some", "than", "that", "the", "their",
    "them", "then", "there", "these", "this", "to", "us", "was", "we", "what", "when", "where",
    "which", "who", "will", "with", "would", "you", "your",
];

/// Splits text into lowercase terms: on anything not alphanumeric, on `camelCase` humps,
/// dropping stop words and one-letter terms, with a light plural folding.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let term = fold(word);
            if term.chars().count() > 1 && !STOP_WORDS.contains(&term.as_str()) {
                out.push(term);
            }
            word.clear();
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                flush(&mut word, &mut out);
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            word.extend(c.to_lowercase());
        } else {
            flush(&mut word, &mut out);
            prev_lower = false;
        }
    }
    flush(&mut word, &mut out);
    out
}

/// A tool name as plain words: `getCurrentWeather` -> `get current weather`,
/// `math.factorial` -> `math factorial`.
pub(crate) fn words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !out.ends_with(' ') {
                out.push(' ');
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            out.extend(c.to_lowercase());
        } else {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            prev_lower = false;
        }
    }
    out.trim_end().to_owned()
}

/// Folds simple English plurals: `files` -> `file`, `queries` -> `query`.
fn fold(word: &str) -> String {
    if word.len() > 4 && word.ends_with("ies") {
        return format!("{}y", &word[..word.len() - 3]);
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        return word[..word.len() - 1].to_owned();
    }
    word.to_owned()
}

/// How much a need term found only in a tool's parameters counts, against 1 for a term of
/// its name or description.
pub(crate) const SCHEMA_FIELD_WEIGHT: f32 = 0.5;

/// Term weights of every tool (by field), and their document frequencies.
#[derive(Debug, Clone, Default)]
pub(crate) struct LexicalIndex {
    documents: Vec<HashMap<String, f32>>,
    frequency: HashMap<String, u32>,
}

impl LexicalIndex {
    /// An index over `(primary, schema)` texts, one pair per tool.
    pub(crate) fn new<'a>(texts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let documents: Vec<HashMap<String, f32>> = texts
            .into_iter()
            .map(|(primary, schema)| {
                let mut doc: HashMap<String, f32> = terms(schema)
                    .into_iter()
                    .map(|t| (t, SCHEMA_FIELD_WEIGHT))
                    .collect();
                doc.extend(terms(primary).into_iter().map(|t| (t, 1.0)));
                doc
            })
            .collect();
        let mut frequency: HashMap<String, u32> = HashMap::new();
        for doc in &documents {
            for term in doc.keys() {
                *frequency.entry(term.clone()).or_insert(0) += 1;
            }
        }
        Self {
            documents,
            frequency,
        }
    }

    fn idf(&self, term: &str) -> f32 {
        let n = self.documents.len() as f32;
        let df = self.frequency.get(term).copied().unwrap_or(0) as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// One score per tool, in catalog order. Sums run in the need's term order, so the
    /// result is bit-for-bit deterministic.
    pub(crate) fn scores(&self, need: &str) -> Vec<f32> {
        let mut seen = HashSet::new();
        let query: Vec<(String, f32)> = terms(need)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .map(|t| {
                let idf = self.idf(&t);
                (t, idf)
            })
            .collect();
        let total: f32 = query.iter().map(|(_, w)| w).sum();
        self.documents
            .iter()
            .map(|doc| {
                if total <= 0.0 {
                    return 0.0;
                }
                let hit: f32 = query
                    .iter()
                    .filter_map(|(t, w)| doc.get(t).map(|field| w * field))
                    .sum();
                (hit / total).clamp(0.0, 1.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_split_snake_camel_and_dots_and_fold_plurals() {
        assert_eq!(
            terms("getCurrentWeather math.factorial read_files HTTPServer"),
            [
                "current",
                "weather",
                "math",
                "factorial",
                "read",
                "file",
                "httpserver"
            ]
        );
        assert_eq!(terms("List the queries, please!"), ["list", "query"]);
        assert_eq!(terms("the status of a bus"), ["status", "bus"]);
        assert!(terms("").is_empty());
    }

    #[test]
    fn names_become_words() {
        assert_eq!(words("getCurrentWeather"), "get current weather");
        assert_eq!(words("math.factorial"), "math factorial");
        assert_eq!(words("__read__file__"), "read file");
        assert_eq!(words("HTTPServer"), "httpserver");
    }

    #[test]
    fn coverage_is_idf_weighted_and_bounded() {
        let index = LexicalIndex::new([
            ("read file: read a file from disk", ""),
            ("write file: write a file to disk", ""),
            ("fetch url: fetch a web page", ""),
        ]);
        let s = index.scores("read a file");
        assert!(s[0] > s[1], "{s:?}");
        assert!(s[1] > s[2], "{s:?}");
        assert_eq!(s[2], 0.0);
        assert!(s.iter().all(|x| (0.0..=1.0).contains(x)));
        // Every need term present: full coverage.
        assert_eq!(index.scores("fetch url")[2], 1.0);
        // No terms at all: no evidence either way.
        assert_eq!(index.scores("the of a"), [0.0, 0.0, 0.0]);
        // A term the catalog never mentions lowers every tool's coverage.
        assert!(index.scores("fetch url zebra")[2] < 1.0);
    }

    #[test]
    fn schema_terms_count_at_the_schema_weight() {
        let index = LexicalIndex::new([
            (
                "uber ride: find a ride",
                "type the kind of ride comfort black",
            ),
            ("taxi: book a taxi", ""),
        ]);
        // "comfort" is only in the first tool's schema: it counts at the schema weight.
        let s = index.scores("comfort");
        assert_eq!(s[0], SCHEMA_FIELD_WEIGHT);
        assert_eq!(s[1], 0.0);
        // A term in both fields counts fully.
        assert_eq!(index.scores("ride")[0], 1.0);
    }
}
