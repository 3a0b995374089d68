//! Span attributes as they are recorded: every string redacted, then cut to the per-field
//! cap with a marker.

use std::borrow::Cow;

use serde_json::{Map, Value as Json};

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Appends the cut marker: `…[cut: N bytes in all]`.
fn marker(total: usize) -> String {
    format!("\u{2026}[cut: {total} bytes in all]")
}

/// The rules every recorded string goes through.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// Strings longer than this many bytes are cut.
    pub(crate) field_bytes: usize,
    /// Texts replaced by [`REDACTED`] wherever they occur.
    pub(crate) secrets: std::sync::Arc<[String]>,
}

impl Rules {
    /// `text` with every secret replaced and cut to the field cap; the second value is
    /// whether it was cut.
    pub(crate) fn text(&self, text: &str) -> (String, bool) {
        let redacted = self.redact(text);
        if redacted.len() <= self.field_bytes {
            return (redacted.into_owned(), false);
        }
        let mut end = self.field_bytes;
        while !redacted.is_char_boundary(end) {
            end -= 1;
        }
        let mut out = String::with_capacity(end + 32);
        out.push_str(&redacted[..end]);
        out.push_str(&marker(redacted.len()));
        (out, true)
    }

    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for secret in self.secrets.iter() {
            if !secret.is_empty() && out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }
}

/// A span's attributes under construction.
#[derive(Debug)]
pub struct Attrs {
    rules: Rules,
    pub(crate) map: Map<String, Json>,
    /// Bytes of string data held (keys and values), for the per-trace budget.
    pub(crate) bytes: usize,
    /// How many fields were cut.
    pub(crate) cut: u64,
}

impl Attrs {
    pub(crate) fn new(rules: Rules) -> Self {
        Self {
            rules,
            map: Map::new(),
            bytes: 0,
            cut: 0,
        }
    }

    /// A text attribute (redacted and capped).
    pub fn text(&mut self, key: &str, value: &str) {
        let (text, cut) = self.rules.text(value);
        self.cut += u64::from(cut);
        self.bytes += key.len() + text.len();
        self.map.insert(key.to_owned(), Json::String(text));
    }

    /// A JSON attribute: every string in it (keys included) redacted and capped.
    pub fn json(&mut self, key: &str, value: &Json) {
        let value = self.bounded(value);
        self.bytes += key.len();
        self.map.insert(key.to_owned(), value);
    }

    /// A number.
    pub fn number(&mut self, key: &str, value: u64) {
        self.bytes += key.len() + 8;
        self.map.insert(key.to_owned(), Json::from(value));
    }

    /// A floating-point number (non-finite values are recorded as `null`).
    pub fn float(&mut self, key: &str, value: f64) {
        self.bytes += key.len() + 8;
        let value = serde_json::Number::from_f64(value).map_or(Json::Null, Json::Number);
        self.map.insert(key.to_owned(), value);
    }

    /// A boolean.
    pub fn flag(&mut self, key: &str, value: bool) {
        self.bytes += key.len() + 1;
        self.map.insert(key.to_owned(), Json::Bool(value));
    }

    fn bounded(&mut self, value: &Json) -> Json {
        match value {
            Json::String(text) => {
                let (text, cut) = self.rules.text(text);
                self.cut += u64::from(cut);
                self.bytes += text.len();
                Json::String(text)
            }
            Json::Array(items) => Json::Array(items.iter().map(|v| self.bounded(v)).collect()),
            Json::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (key, value) in map {
                    let (key, cut) = self.rules.text(key);
                    self.cut += u64::from(cut);
                    self.bytes += key.len();
                    let value = self.bounded(value);
                    out.insert(key, value);
                }
                Json::Object(out)
            }
            other => {
                self.bytes += 8;
                other.clone()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(field_bytes: usize, secrets: &[&str]) -> Rules {
        Rules {
            field_bytes,
            secrets: secrets.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn long_fields_are_cut_at_a_char_boundary_with_a_marker() {
        let rules = rules(5, &[]);
        assert_eq!(rules.text("short"), ("short".to_owned(), false));
        let (cut, was_cut) = rules.text("héllo world");
        assert!(was_cut);
        assert_eq!(cut, "héll\u{2026}[cut: 12 bytes in all]");
    }

    #[test]
    fn secrets_are_redacted_before_cutting_everywhere_in_json() {
        let mut attrs = Attrs::new(rules(64, &["sk-secret"]));
        attrs.text("a", "key=sk-secret;");
        attrs.json("b", &json!({"sk-secret": ["x sk-secret y", 1, true, null]}));
        let text = serde_json::to_string(&attrs.map).unwrap_or_default();
        assert!(!text.contains("sk-secret"), "{text}");
        assert_eq!(attrs.map["a"], "key=<redacted>;");
        assert_eq!(attrs.map["b"]["<redacted>"][0], "x <redacted> y");
        assert_eq!(attrs.cut, 0);
        // A secret straddling the cap is redacted before the cut, so no prefix of it stays.
        let rules = rules(6, &["sk-secret"]);
        let (cut, _) = rules.text("12345sk-secret");
        assert!(cut.starts_with("12345<"), "{cut}");
    }
}
