use std::fmt;

/// The identity of a tool: a `(server, name)` pair.
///
/// The pair is structural and never concatenated, so a server or name containing any
/// delimiter stays unambiguous. Built-in tools use the server `builtin`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId {
    server: String,
    name: String,
}

impl ToolId {
    /// Creates an identity from its server and name.
    pub fn new(server: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            name: name.into(),
        }
    }

    /// The server (provider) half of the identity.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool-name half of the identity.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ToolId {
    /// Renders `server/name` for diagnostics only; identity comparisons use the pair.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.server, self.name)
    }
}
