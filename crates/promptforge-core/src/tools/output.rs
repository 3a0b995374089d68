/// The text a tool returns to the model, marked trusted or untrusted when it is built.
///
/// There is no way to build an output without choosing: untrusted text (anything a third
/// party wrote, such as a web page) is wrapped in the run's nonce envelope before it reaches
/// the model; trusted text (written by the prompt author) passes verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    text: String,
    trusted: bool,
}

impl ToolOutput {
    /// Output the prompt author controls; it reaches the model verbatim.
    pub fn trusted(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            trusted: true,
        }
    }

    /// Output from a third party; it reaches the model inside the untrusted envelope.
    pub fn untrusted(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            trusted: false,
        }
    }

    /// The raw text, before any envelope.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Consumes the output and returns its raw text.
    pub fn into_text(self) -> String {
        self.text
    }

    /// Whether the text reaches the model verbatim.
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }
}
