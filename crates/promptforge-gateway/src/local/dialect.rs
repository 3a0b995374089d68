//! The tool-calling dialect of a local chat model, resolved from its chat template.
//!
//! The rule, applied to the template text:
//! - native tool-call syntax (the template reads `tools` or writes `tool_calls`, or uses
//!   one of the known call markers `<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`) and
//!   no `tool_code`: **openai** (llama-server parses the calls itself);
//! - `tool_code` and no native syntax: **gemma3_tool_code**;
//! - both: **ambiguous**, the model fails to load;
//! - a template with no tool syntax at all (SmolLM2's, for one): **gemma3_tool_code**,
//!   the emulated dialect that teaches the tools in a system message;
//! - no template (missing or empty): **absent**, the model fails to load.
//!
//! Evidence comes from the child's live `GET /props` `chat_template`; only when that is
//! missing or empty, from a sidecar `<gguf stem>.md` beside the GGUF: optional `---`
//! frontmatter, then the Jinja template as the body.

use std::path::Path;

use crate::config::ToolDialect;

/// Markers of native tool-call support in a chat template.
const NATIVE_MARKERS: [&str; 4] = [
    "tool_calls",
    "<tool_call>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
];

/// Why no dialect could be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DialectError {
    /// Neither `/props` nor a sidecar has a template.
    #[error("no chat template: /props has none and there is no sidecar {sidecar}")]
    Absent {
        /// Where the sidecar was looked for.
        sidecar: String,
    },
    /// The template has both native and `tool_code` syntax.
    #[error(
        "ambiguous chat template ({source_name}): it has both native tool-call syntax and tool_code"
    )]
    Ambiguous {
        /// `/props` or the sidecar's path.
        source_name: String,
    },
}

/// Resolves a dialect from one template's text (the rule in the module docs).
pub(crate) fn from_template(
    template: &str,
    source_name: &str,
) -> Result<ToolDialect, DialectError> {
    let native = NATIVE_MARKERS.iter().any(|m| template.contains(m)) || reads_tools(template);
    let tool_code = template.contains("tool_code");
    match (native, tool_code) {
        (true, true) => Err(DialectError::Ambiguous {
            source_name: source_name.to_owned(),
        }),
        (true, false) => Ok(ToolDialect::OpenAi),
        (false, _) => Ok(ToolDialect::Gemma3ToolCode),
    }
}

/// Whether a Jinja template reads a `tools` variable (`{% if tools %}`, `tools | ...`,
/// `for tool in tools`).
fn reads_tools(template: &str) -> bool {
    let bytes = template.as_bytes();
    let mut from = 0;
    while let Some(i) = template[from..].find("tools") {
        let start = from + i;
        let end = start + "tools".len();
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let before_ok = start == 0 || !word(bytes[start - 1]);
        let after_ok = end >= bytes.len() || !word(bytes[end]);
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

/// The sidecar of a GGUF: the same path with the extension `.md`.
pub(crate) fn sidecar_path(gguf: &Path) -> std::path::PathBuf {
    gguf.with_extension("md")
}

/// The template body of a sidecar `.md` (frontmatter stripped), when it has one.
pub(crate) fn sidecar_template(text: &str) -> Option<&str> {
    let body = match text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    {
        Some(rest) => {
            let end = rest.find("\n---")?;
            let after = &rest[end + 4..];
            after.split_once('\n').map_or("", |(_, b)| b)
        }
        None => text,
    };
    Some(body).filter(|b| !b.trim().is_empty())
}

/// Resolves from the live props' template, else the sidecar beside `gguf`.
pub(crate) fn resolve(
    props_template: Option<&str>,
    gguf: &Path,
) -> Result<ToolDialect, DialectError> {
    if let Some(t) = props_template.filter(|t| !t.trim().is_empty()) {
        return from_template(t, "/props");
    }
    let sidecar = sidecar_path(gguf);
    let text = std::fs::read_to_string(&sidecar).ok();
    match text.as_deref().and_then(sidecar_template) {
        Some(t) => from_template(t, &sidecar.display().to_string()),
        None => Err(DialectError::Absent {
            sidecar: sidecar.display().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    #[test]
    fn plain_template_is_emulated() {
        assert_eq!(
            from_template(CHATML, "/props"),
            Ok(ToolDialect::Gemma3ToolCode)
        );
    }

    #[test]
    fn native_syntax_is_openai() {
        for t in [
            "{% if tools %}{{ tools | tojson }}{% endif %}",
            "{% for tool in tools %}x{% endfor %}",
            "{{ message.tool_calls }}",
            "<tool_call>{{ x }}</tool_call>",
        ] {
            assert_eq!(from_template(t, "/props"), Ok(ToolDialect::OpenAi), "{t}");
        }
        // A word that merely contains "tools" is not a read of `tools`.
        assert_eq!(
            from_template("{{ mytools_x }}", "/props"),
            Ok(ToolDialect::Gemma3ToolCode)
        );
    }

    #[test]
    fn tool_code_is_gemma_and_both_is_ambiguous() {
        assert_eq!(
            from_template("```tool_code\n{{ x }}```", "/props"),
            Ok(ToolDialect::Gemma3ToolCode)
        );
        assert!(matches!(
            from_template("{% if tools %}```tool_code{% endif %}", "/props"),
            Err(DialectError::Ambiguous { .. })
        ));
    }

    #[test]
    fn live_props_win_over_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("m.gguf");
        std::fs::write(
            dir.path().join("m.md"),
            "---\nname: m\n---\n{% if tools %}x{% endif %}\n",
        )
        .unwrap();
        assert_eq!(
            resolve(Some(CHATML), &gguf),
            Ok(ToolDialect::Gemma3ToolCode)
        );
        assert_eq!(resolve(None, &gguf), Ok(ToolDialect::OpenAi));
        assert_eq!(resolve(Some("  "), &gguf), Ok(ToolDialect::OpenAi));
    }

    #[test]
    fn absent_evidence_fails() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("m.gguf");
        assert!(matches!(
            resolve(None, &gguf),
            Err(DialectError::Absent { .. })
        ));
        std::fs::write(dir.path().join("m.md"), "---\nname: m\n---\n\n").unwrap();
        assert!(matches!(
            resolve(None, &gguf),
            Err(DialectError::Absent { .. })
        ));
    }

    #[test]
    fn sidecar_without_frontmatter_is_all_template() {
        assert_eq!(sidecar_template("{{ x }}"), Some("{{ x }}"));
        assert_eq!(sidecar_template("---\na: b\n---\nT"), Some("T"));
        assert_eq!(sidecar_template("---\nunterminated"), None);
    }
}
