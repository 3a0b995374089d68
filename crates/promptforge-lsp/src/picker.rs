//! The picker thread: answers the hovers and inlay hints that need to know what a binding
//! call binds to, off the request thread.
//!
//! The thread starts on the first such request. It then builds the resources a run would
//! get (`web_fetch`; with `PROMPTFORGE_GATEWAY_URL`/`_API_KEY` set, also `web_search` and
//! the gateway's model catalog, fetched once with a 10 s bound) and a core
//! [`Previewer`] over a lazy picker, which loads the embedding model on the first tool or
//! model preview. Until then, and whatever it costs, the main loop goes on answering
//! everything else. Previews are cached per question.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use lsp_server::{ErrorCode, Message, RequestId, Response};
use lsp_types::{
    Hover, HoverContents, InlayHint, InlayHintLabel, InlayHintTooltip, MarkupContent, MarkupKind,
    Position,
};
use promptforge_core::client::{GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::preview::{ModelConstraints, Preview, Previewer};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_tool_picker::{Config, LazyPicker};
use promptforge_webfetch::WebFetch;

use crate::features::{BindingQuery, Query};

/// Deferred requests waiting for the picker thread at most; more are answered at once
/// without a preview.
pub(crate) const MAX_PENDING: usize = 32;
/// Previews kept; the cache is emptied when it is full.
const MAX_CACHED: usize = 1024;
/// How long the gateway's model catalog may take to arrive.
pub(crate) const CATALOG_TIMEOUT: Duration = Duration::from_secs(10);

/// What the previews are made against.
#[derive(Clone, Default)]
pub enum Resources {
    /// What `promptforge run` would get from the environment: `web_fetch`, and with a
    /// gateway configured also `web_search` and the gateway's model catalog.
    #[default]
    FromEnvironment,
    /// Given catalogs (tests, embedders).
    Given {
        /// The tools a run would offer to `tools.bind`.
        tools: ToolCatalog,
        /// The model catalog `models.bind` resolves against.
        models: ModelCatalog,
    },
}

impl std::fmt::Debug for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FromEnvironment => f.write_str("FromEnvironment"),
            Self::Given { tools, models } => f
                .debug_struct("Given")
                .field("tools", &tools.len())
                .field("models", &models.iter().count())
                .finish(),
        }
    }
}

/// One hint waiting for its label.
#[derive(Debug, Clone)]
pub(crate) struct PendingHint {
    pub(crate) position: Position,
    pub(crate) query: BindingQuery,
}

/// A deferred request.
#[derive(Debug)]
pub(crate) enum Job {
    Hover {
        id: RequestId,
        base: String,
        range: lsp_types::Range,
        query: BindingQuery,
    },
    InlayHints {
        id: RequestId,
        hints: Vec<PendingHint>,
    },
}

impl Job {
    fn id(&self) -> &RequestId {
        match self {
            Self::Hover { id, .. } | Self::InlayHints { id, .. } => id,
        }
    }

    /// The answer without a preview (when the queue is full).
    fn without_preview(self) -> Response {
        match self {
            Self::Hover {
                id, base, range, ..
            } => Response::new_ok(id, hover(base, range)),
            Self::InlayHints { id, hints } => {
                let hints: Vec<InlayHint> = hints
                    .into_iter()
                    .filter_map(|h| match h.query {
                        BindingQuery::Known { label, detail } => {
                            Some(inlay(h.position, label, detail))
                        }
                        BindingQuery::Ask(_) => None,
                    })
                    .collect();
                Response::new_ok(id, hints)
            }
        }
    }
}

/// The handle the main loop holds: starts the thread on first use.
pub(crate) struct PickerHandle {
    resources: Resources,
    sender: Sender<Message>,
    jobs: Option<Sender<Job>>,
    cancelled: Arc<Mutex<HashSet<RequestId>>>,
}

impl PickerHandle {
    pub(crate) fn new(resources: Resources, sender: Sender<Message>) -> Self {
        Self {
            resources,
            sender,
            jobs: None,
            cancelled: Arc::default(),
        }
    }

    /// Hands a request to the picker thread; when the queue is full (or the thread cannot
    /// start) it is answered at once without a preview.
    pub(crate) fn submit(&mut self, job: Job) {
        if self.jobs.is_none() {
            let (jobs, receiver) = bounded(MAX_PENDING);
            let worker = Worker {
                resources: self.resources.clone(),
                sender: self.sender.clone(),
                cancelled: Arc::clone(&self.cancelled),
                state: None,
            };
            let started = std::thread::Builder::new()
                .name("promptforge-lsp-picker".to_owned())
                .spawn(move || worker.run(&receiver));
            if started.is_ok() {
                self.jobs = Some(jobs);
            }
        }
        let rejected = match &self.jobs {
            Some(jobs) => match jobs.try_send(job) {
                Ok(()) => None,
                Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => Some(job),
            },
            None => Some(job),
        };
        if let Some(job) = rejected {
            let _ = self.sender.send(Message::Response(job.without_preview()));
        }
    }

    /// Marks a deferred request cancelled (`$/cancelRequest`).
    pub(crate) fn cancel(&self, id: RequestId) {
        if self.jobs.is_some() {
            let mut cancelled = self
                .cancelled
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if cancelled.len() >= 4 * MAX_PENDING {
                cancelled.clear();
            }
            cancelled.insert(id);
        }
    }
}

/// The previewer and what was learnt building it.
struct State {
    previewer: Previewer,
    /// Why the model catalog is empty when a gateway was meant to give one.
    catalog_note: Option<String>,
    cache: HashMap<Query, Preview>,
}

struct Worker {
    resources: Resources,
    sender: Sender<Message>,
    cancelled: Arc<Mutex<HashSet<RequestId>>>,
    state: Option<State>,
}

impl Worker {
    fn run(mut self, jobs: &Receiver<Job>) {
        for job in jobs {
            let cancelled = self
                .cancelled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(job.id());
            let response = if cancelled {
                Response::new_err(
                    job.id().clone(),
                    ErrorCode::RequestCanceled as i32,
                    "cancelled".to_owned(),
                )
            } else {
                let id = job.id().clone();
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.answer(job))) {
                    Ok(response) => response,
                    Err(_) => Response::new_err(
                        id,
                        ErrorCode::InternalError as i32,
                        "the binding preview failed unexpectedly".to_owned(),
                    ),
                }
            };
            if self.sender.send(Message::Response(response)).is_err() {
                return;
            }
        }
    }

    fn answer(&mut self, job: Job) -> Response {
        match job {
            Job::Hover {
                id,
                base,
                range,
                query,
            } => {
                let (label, detail) = self.label(&query);
                let value = format!(
                    "{base}\n\n---\n\n**{}**\n\n{detail}",
                    label.trim_start_matches("→ ")
                );
                Response::new_ok(id, hover(value, range))
            }
            Job::InlayHints { id, hints } => {
                let hints: Vec<InlayHint> = hints
                    .into_iter()
                    .map(|hint| {
                        let (label, detail) = self.label(&hint.query);
                        inlay(hint.position, label, detail)
                    })
                    .collect();
                Response::new_ok(id, hints)
            }
        }
    }

    fn state(&mut self) -> &mut State {
        self.state
            .get_or_insert_with(|| build_state(&self.resources))
    }

    /// A short label and a markdown explanation for a binding.
    fn label(&mut self, query: &BindingQuery) -> (String, String) {
        let query = match query {
            BindingQuery::Known { label, detail } => return (label.clone(), detail.clone()),
            BindingQuery::Ask(query) => query,
        };
        let state = self.state();
        if state.cache.len() >= MAX_CACHED {
            state.cache.clear();
        }
        let preview = match state.cache.get(query) {
            Some(preview) => preview.clone(),
            None => {
                let preview = preview(&state.previewer, query);
                state.cache.insert(query.clone(), preview.clone());
                preview
            }
        };
        let note = match query {
            Query::Model { .. } => state.catalog_note.clone(),
            Query::Tool { .. } => None,
        };
        describe(&preview, note.as_deref())
    }
}

fn preview(previewer: &Previewer, query: &Query) -> Preview {
    match query {
        Query::Tool { alias, description } => previewer.tool(alias, description),
        Query::Model {
            call,
            alias,
            description,
            opts,
        } => {
            let constraints = match opts.as_deref().map(ModelConstraints::from_lua) {
                None => ModelConstraints::none(),
                Some(Ok(constraints)) => constraints,
                Some(Err(message)) => {
                    return Preview::Failed { message };
                }
            };
            previewer.model(*call, alias, description, &constraints)
        }
    }
}

/// The label a hint shows and the explanation a hover or tooltip gives.
fn describe(preview: &Preview, note: Option<&str>) -> (String, String) {
    match preview {
        Preview::Bound { name, score } => (
            format!("→ {name} ({score:.2})"),
            format!(
                "Binds `{name}` (picker score {score:.3}), as a run with the same tools and catalog would."
            ),
        ),
        Preview::Ambiguous {
            candidates,
            message,
        } => (
            format!("→ ambiguous: {}", candidates.join(", ")),
            format!("The run would fail: {message}"),
        ),
        Preview::Duplicate {
            candidates,
            message,
        } => (
            format!("→ near-duplicates: {}", candidates.join(", ")),
            format!("The run would fail: {message}"),
        ),
        Preview::NoMatch { message } => (
            "→ no match".to_owned(),
            format!("The run would fail: {message}"),
        ),
        other => {
            let message = other.message().unwrap_or("the binding fails");
            match note {
                Some(note) => (
                    format!("→ {}", short(note)),
                    format!("{note}\n\nThe run would fail: {message}"),
                ),
                None => (
                    format!("→ {}", short(message)),
                    format!("The run would fail: {message}"),
                ),
            }
        }
    }
}

/// The first clause of a message, at most 60 characters.
fn short(message: &str) -> String {
    let clause = message.split([';', '\n']).next().unwrap_or(message);
    let clause = clause.rsplit(": ").next().unwrap_or(clause).trim();
    if clause.chars().count() <= 60 {
        clause.to_owned()
    } else {
        format!("{}…", clause.chars().take(59).collect::<String>())
    }
}

fn hover(value: String, range: lsp_types::Range) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: Some(range),
    }
}

fn inlay(position: Position, label: String, detail: String) -> InlayHint {
    InlayHint {
        position,
        label: InlayHintLabel::String(label),
        kind: None,
        text_edits: None,
        tooltip: Some(InlayHintTooltip::MarkupContent(MarkupContent {
            kind: MarkupKind::Markdown,
            value: detail,
        })),
        padding_left: Some(true),
        padding_right: None,
        data: None,
    }
}

/// The resources a run would get, and a previewer over them.
fn build_state(resources: &Resources) -> State {
    let (tools, models, catalog_note) = match resources {
        Resources::Given { tools, models } => (tools.clone(), models.clone(), None),
        Resources::FromEnvironment => from_environment(),
    };
    let picker = LazyPicker::new(tools.picker_catalog(), Config::default());
    State {
        previewer: Previewer::new(picker, models, tools),
        catalog_note,
        cache: HashMap::new(),
    }
}

/// `promptforge run`'s resources: `web_fetch`; with a gateway, `web_search` and the model
/// catalog too.
fn from_environment() -> (ToolCatalog, ModelCatalog, Option<String>) {
    let fetch: Arc<dyn Tool> = Arc::new(WebFetch::new());
    let catalog = |tools: &[Arc<dyn Tool>]| ToolCatalog::new(tools).unwrap_or_default();
    let client = match GatewayClient::from_env_if_configured() {
        Ok(Some(client)) => client,
        Ok(None) => return (catalog(&[fetch]), ModelCatalog::empty(), None),
        Err(error) => {
            return (
                catalog(&[fetch]),
                ModelCatalog::empty(),
                Some(format!("the gateway settings are incomplete: {error}")),
            );
        }
    };
    let search: Arc<dyn Tool> = Arc::new(WebSearch::new(client.clone()));
    let tools = catalog(&[search, fetch]);
    let fetched = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|runtime| {
            runtime.block_on(async {
                match tokio::time::timeout(CATALOG_TIMEOUT, client.models(RequestLimits::default()))
                    .await
                {
                    Ok(Ok(models)) => Ok(models),
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(_) => Err(format!("no answer within {} s", CATALOG_TIMEOUT.as_secs())),
                }
            })
        });
    match fetched {
        Ok(models) => (tools, models, None),
        Err(error) => (
            tools,
            ModelCatalog::empty(),
            Some(format!(
                "cannot fetch the model catalog from the gateway: {error}"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_and_say_what_happens() {
        let bound = Preview::Bound {
            name: "web_fetch".to_owned(),
            score: 0.6789,
        };
        assert_eq!(describe(&bound, None).0, "→ web_fetch (0.68)");
        let failed = Preview::Failed {
            message: "models.bind(\"m\", \"x\"): the model catalog is empty (no gateway is configured, or it serves no models)".to_owned(),
        };
        assert_eq!(
            describe(&failed, None).0,
            "→ the model catalog is empty (no gateway is configured, or it…"
        );
        assert_eq!(
            describe(
                &failed,
                Some("cannot fetch the model catalog from the gateway: refused")
            )
            .0,
            "→ refused"
        );
    }
}
