//! Tool identity, descriptors and the ordered catalog a picker indexes.

use std::fmt;

use serde_json::Value;

/// The structural identity of a tool: the server that publishes it and its name there.
///
/// The pair is never concatenated, so a server or name containing any delimiter stays
/// unambiguous: `ToolId::new("a/b", "c")` and `ToolId::new("a", "b/c")` are different tools.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ToolId {
    server: String,
    name: String,
}

impl ToolId {
    /// Creates an identity from a server and a tool name.
    pub fn new(server: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            name: name.into(),
        }
    }

    /// The server that publishes the tool.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool's name on its server.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ToolId {
    /// Shows the pair as `server` / `name` with both parts quoted, for messages only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}/{:?}", self.server, self.name)
    }
}

/// Advisory behavioural hints (MCP tool annotations).
///
/// They never change a score. Between candidates that score identically, a positive
/// read-only claim ranks first, then a non-destructive claim, then an idempotent claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct ToolAnnotations {
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "readOnlyHint",
            alias = "read_only",
            skip_serializing_if = "Option::is_none"
        )
    )]
    read_only: Option<bool>,
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "destructiveHint",
            alias = "destructive",
            skip_serializing_if = "Option::is_none"
        )
    )]
    destructive: Option<bool>,
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "idempotentHint",
            alias = "idempotent",
            skip_serializing_if = "Option::is_none"
        )
    )]
    idempotent: Option<bool>,
}

impl ToolAnnotations {
    /// No hints.
    pub fn new() -> Self {
        Self::default()
    }

    /// Claims (or denies) that the tool only reads.
    #[must_use]
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = Some(read_only);
        self
    }

    /// Claims (or denies) that the tool may destroy data.
    #[must_use]
    pub fn with_destructive(mut self, destructive: bool) -> Self {
        self.destructive = Some(destructive);
        self
    }

    /// Claims (or denies) that repeating a call has no further effect.
    #[must_use]
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// The read-only hint, if the tool states one.
    pub fn read_only(&self) -> Option<bool> {
        self.read_only
    }

    /// The destructive hint, if the tool states one.
    pub fn destructive(&self) -> Option<bool> {
        self.destructive
    }

    /// The idempotent hint, if the tool states one.
    pub fn idempotent(&self) -> Option<bool> {
        self.idempotent
    }

    /// Tie-break key: smaller ranks first (positive read-only, then non-destructive, then
    /// idempotent claims).
    pub(crate) fn tie_break_key(&self) -> (bool, bool, bool) {
        (
            self.read_only != Some(true),
            self.destructive != Some(false),
            self.idempotent != Some(true),
        )
    }
}

/// One tool as the picker sees it: identity, prose description, argument schema and hints.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ToolDescriptor {
    #[cfg_attr(feature = "serde", serde(flatten))]
    id: ToolId,
    #[cfg_attr(feature = "serde", serde(default))]
    description: String,
    #[cfg_attr(
        feature = "serde",
        serde(alias = "inputSchema", default = "empty_schema")
    )]
    input_schema: Value,
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "annotations_are_empty")
    )]
    annotations: ToolAnnotations,
}

#[cfg(feature = "serde")]
fn empty_schema() -> Value {
    Value::Object(serde_json::Map::new())
}

#[cfg(feature = "serde")]
fn annotations_are_empty(annotations: &ToolAnnotations) -> bool {
    *annotations == ToolAnnotations::default()
}

impl ToolDescriptor {
    /// Describes a tool: its identity, what it does in prose, and its arguments' JSON Schema.
    pub fn new(id: ToolId, description: impl Into<String>, input_schema: Value) -> Self {
        Self {
            id,
            description: description.into(),
            input_schema,
            annotations: ToolAnnotations::default(),
        }
    }

    /// Replaces the behavioural hints.
    #[must_use]
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// The tool's identity.
    pub fn id(&self) -> &ToolId {
        &self.id
    }

    /// The publishing server (shorthand for `id().server()`).
    pub fn server(&self) -> &str {
        self.id.server()
    }

    /// The tool's name (shorthand for `id().name()`).
    pub fn name(&self) -> &str {
        self.id.name()
    }

    /// The prose description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the tool's arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The behavioural hints.
    pub fn annotations(&self) -> &ToolAnnotations {
        &self.annotations
    }
}

/// An ordered collection of tool descriptors.
///
/// Order matters: it is the final tie-break in rankings and the order of
/// [`near_duplicates`](crate::ToolPicker::near_duplicates) pairs. Duplicate identities are
/// accepted; the picker reports them rather than refusing them.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Catalog {
    tools: Vec<ToolDescriptor>,
}

impl Catalog {
    /// Creates a catalog from descriptors, keeping their order.
    pub fn new(tools: Vec<ToolDescriptor>) -> Self {
        Self { tools }
    }

    /// The number of descriptors.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the catalog has no descriptors.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The first descriptor with this identity.
    pub fn get(&self, id: &ToolId) -> Option<&ToolDescriptor> {
        self.tools.iter().find(|t| t.id() == id)
    }

    /// The descriptors in order.
    pub fn iter(&self) -> std::slice::Iter<'_, ToolDescriptor> {
        self.tools.iter()
    }

    /// The descriptors as a slice.
    pub fn as_slice(&self) -> &[ToolDescriptor] {
        &self.tools
    }

    /// Appends a descriptor.
    pub fn push(&mut self, tool: ToolDescriptor) {
        self.tools.push(tool);
    }
}

impl From<Vec<ToolDescriptor>> for Catalog {
    fn from(tools: Vec<ToolDescriptor>) -> Self {
        Self::new(tools)
    }
}

impl FromIterator<ToolDescriptor> for Catalog {
    fn from_iter<I: IntoIterator<Item = ToolDescriptor>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Catalog {
    type Item = &'a ToolDescriptor;
    type IntoIter = std::slice::Iter<'a, ToolDescriptor>;

    fn into_iter(self) -> Self::IntoIter {
        self.tools.iter()
    }
}

impl IntoIterator for Catalog {
    type Item = ToolDescriptor;
    type IntoIter = std::vec::IntoIter<ToolDescriptor>;

    fn into_iter(self) -> Self::IntoIter {
        self.tools.into_iter()
    }
}

impl Extend<ToolDescriptor> for Catalog {
    fn extend<I: IntoIterator<Item = ToolDescriptor>>(&mut self, iter: I) {
        self.tools.extend(iter);
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_is_structural() {
        assert_ne!(ToolId::new("a/b", "c"), ToolId::new("a", "b/c"));
        assert_eq!(ToolId::new("a", "b").to_string(), r#""a"/"b""#);
    }

    #[test]
    fn catalog_deserializes_both_schema_spellings_and_flat_identity() {
        let catalog: Catalog = serde_json::from_value(json!([
            {
                "server": "files",
                "name": "read_file",
                "description": "Read a file from disk",
                "inputSchema": {"properties": {"path": {"type": "string"}}},
                "annotations": {"readOnlyHint": true}
            },
            {
                "server": "net",
                "name": "fetch_url",
                "description": "Fetch a web page over HTTP",
                "input_schema": {"properties": {"url": {"type": "string"}}}
            },
            {"server": "net", "name": "fetch_url", "description": "twin"}
        ]))
        .unwrap();
        assert_eq!(catalog.len(), 3);
        let first = &catalog.as_slice()[0];
        assert_eq!(first.id(), &ToolId::new("files", "read_file"));
        assert_eq!(first.annotations().read_only(), Some(true));
        assert_eq!(first.annotations().destructive(), None);
        assert_eq!(
            first.input_schema(),
            &json!({"properties": {"path": {"type": "string"}}})
        );
        assert_eq!(
            catalog.as_slice()[1].input_schema(),
            &json!({"properties": {"url": {"type": "string"}}})
        );
        // Duplicate identities are accepted; `get` finds the first.
        assert_eq!(
            catalog
                .get(&ToolId::new("net", "fetch_url"))
                .map(|t| t.description()),
            Some("Fetch a web page over HTTP")
        );
        assert_eq!(catalog.as_slice()[2].input_schema(), &json!({}));
    }

    #[test]
    fn catalog_round_trips() {
        let catalog: Catalog = vec![
            ToolDescriptor::new(ToolId::new("s", "a"), "first", json!({"type": "object"}))
                .with_annotations(
                    ToolAnnotations::new()
                        .with_read_only(true)
                        .with_destructive(false)
                        .with_idempotent(true),
                ),
            ToolDescriptor::new(ToolId::new("s", "b"), "second", json!({})),
        ]
        .into();
        let text = serde_json::to_string(&catalog).unwrap();
        assert!(text.contains(r#""server":"s""#), "{text}");
        assert!(text.contains(r#""readOnlyHint":true"#), "{text}");
        let back: Catalog = serde_json::from_str(&text).unwrap();
        assert_eq!(back, catalog);
    }

    #[test]
    fn catalog_collects_and_iterates_in_order() {
        let catalog: Catalog = ["a", "b", "c"]
            .into_iter()
            .map(|n| ToolDescriptor::new(ToolId::new("s", n), n, json!({})))
            .collect();
        let names: Vec<&str> = (&catalog).into_iter().map(ToolDescriptor::name).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(catalog.get(&ToolId::new("s", "z")).is_none());
        assert!(!catalog.is_empty());
    }

    #[test]
    fn tie_break_prefers_read_only_then_non_destructive_then_idempotent() {
        let none = ToolAnnotations::new();
        let read_only = ToolAnnotations::new().with_read_only(true);
        let safe = ToolAnnotations::new().with_destructive(false);
        let idem = ToolAnnotations::new().with_idempotent(true);
        let mut keys = [idem, none, safe, read_only];
        keys.sort_by_key(ToolAnnotations::tie_break_key);
        assert_eq!(keys, [read_only, safe, idem, none]);
    }
}
