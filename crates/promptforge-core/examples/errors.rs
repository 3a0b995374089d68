//! The guide's Errors chapter, one error type at a time, as a program that needs no gateway:
//! `ParseError` (kind, line, span), `promptforge_version`, `RunError` (kind, section,
//! `is_cancelled`, `is_retryable`, its typed `source`), `StoreError` (`is_not_found`,
//! `path`), `CompletionError` (kind, `status`, `is_timeout`) and `ToolError`.
//!
//! ```text
//! cargo run -p promptforge-core --example errors
//! ```
//!
//! `tests/examples.rs` runs [`tour`] and checks every line it prints.
#![allow(clippy::print_stdout, clippy::print_stderr, dead_code)]

use std::error::Error as _;
use std::process::ExitCode;

use promptforge_core::{
    CancelHandle, CompletionError, CompletionErrorKind, GatewayClient, ModelCatalog, NullObserver,
    ParseError, Prompt, ResolutionContext, RunConfig, RunError, StoreError, StoreRef, ToolCatalog,
    ToolError, promptforge_version, run,
};

const HEADER: &str = "---\nname: tour\ndescription: The errors chapter\npromptforge: 1\n---\n\n";

/// Runs `body` (a prompt after its frontmatter) with `config`; `Err` only when the body
/// itself does not parse.
async fn run_body(body: &str, config: RunConfig) -> Result<Result<String, RunError>, ParseError> {
    let prompt = Prompt::parse(&format!("{HEADER}{body}"), "tour", &NullObserver)?;
    Ok(run(
        &prompt,
        "",
        ResolutionContext::empty(),
        &StoreRef::memory(),
        config,
    )
    .await)
}

/// Every error type of the chapter, one line each.
pub async fn tour() -> Vec<String> {
    let mut lines = Vec::new();

    // ParseError: a stable kind, the line, and a byte span for editors.
    let broken = format!("{HEADER}# T\n\n## A\n\n## A\n");
    if let Err(e) = Prompt::parse_named("tour.md", &broken, "tour", &NullObserver) {
        lines.push(format!(
            "ParseError kind={} line={:?} span={:?}",
            e.kind(),
            e.line(),
            e.span()
        ));
    }
    // Version detection without a full parse.
    lines.push(format!(
        "promptforge_version={:?} (not a prompt: {:?})",
        promptforge_version(&broken),
        promptforge_version("# just Markdown\n")
    ));

    // RunError from a store failure: its source is the StoreError.
    let result = run_body(
        "# T\n\n## Read\n\n```lua\nreturn store.read('missing.md')\n```\n",
        RunConfig::new("tour"),
    )
    .await;
    if let Ok(Err(e)) = result {
        let store = e.source().and_then(|s| s.downcast_ref::<StoreError>());
        lines.push(format!(
            "RunError kind={} section={:?} retryable={} store.is_not_found={:?} store.path={:?}",
            e.kind(),
            e.section(),
            e.is_retryable(),
            store.map(StoreError::is_not_found),
            store.and_then(StoreError::path)
        ));
    }

    // A cancelled run is told apart from a fault.
    let cancel = CancelHandle::new();
    cancel.cancel();
    let result = run_body(
        "# T\n\n## Loop\n\n```lua\nwhile true do end\n```\n",
        RunConfig::new("tour").cancel(cancel),
    )
    .await;
    if let Ok(Err(e)) = result {
        lines.push(format!("RunError cancelled={}", e.is_cancelled()));
    }

    // CompletionError: configuration mistakes are caught at construction...
    for (endpoint, key) in [("ftp://gateway.invalid", "k"), ("http://127.0.0.1:9", "")] {
        if let Err(e) = GatewayClient::new(endpoint, key) {
            lines.push(format!(
                "CompletionError kind={} status={:?} timeout={} retryable={}",
                e.kind(),
                e.status(),
                e.is_timeout(),
                e.is_retryable()
            ));
        }
    }
    // ...and a disabled client fails every model call with `Disabled`. The model binds
    // (a catalog and the picker over an empty tool catalog), then the call fails.
    let models = ModelCatalog::from_models_json(
        br#"{"object": "list", "data": [{"id": "m", "object": "model", "kind": "chat",
            "description": "A general chat model", "context": 8192, "thinking": "never"}]}"#,
    );
    let tools = ToolCatalog::empty();
    match (models, tools.picker()) {
        (Ok(models), Ok(picker)) => {
            let prompt = Prompt::parse(
                &format!(
                    "{HEADER}# T\n\n```lua\nmodels.default('m', 'a general chat model')\n```\n\nHello.\n"
                ),
                "tour",
                &NullObserver,
            );
            if let Ok(prompt) = prompt {
                let result = run(
                    &prompt,
                    "",
                    ResolutionContext::new(&picker, &models, &tools),
                    &StoreRef::memory(),
                    RunConfig::new("tour").client(GatewayClient::disabled()),
                )
                .await;
                if let Err(e) = result {
                    let completion = e.source().and_then(|s| s.downcast_ref::<CompletionError>());
                    lines.push(format!(
                        "RunError kind={} completion={:?}",
                        e.kind(),
                        completion.map(CompletionError::kind)
                    ));
                }
            }
        }
        (models, picker) => lines.push(format!(
            "cannot bind a model here: {:?} {:?}",
            models.err(),
            picker.err()
        )),
    }
    lines.push(format!(
        "CompletionErrorKind::Disabled={}",
        CompletionErrorKind::Disabled
    ));

    // ToolError: retryable transport failures, cancellation.
    for error in [ToolError::transport("reset"), ToolError::cancelled()] {
        lines.push(format!(
            "ToolError kind={} retryable={} cancelled={}",
            error.kind(),
            error.is_retryable(),
            error.is_cancelled()
        ));
    }
    lines
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    for line in tour().await {
        println!("{line}");
    }
    ExitCode::SUCCESS
}
