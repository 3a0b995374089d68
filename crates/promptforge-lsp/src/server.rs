//! The main loop: the protocol's lifecycle, the open documents, debounced diagnostics on a
//! worker thread, and request dispatch.
//!
//! Threads: this loop answers every request itself from the document's index (built on
//! first use per version, linear in the document; changes go to a rope, each edit costing
//! its own length), except the two that need the picker
//! (a hover on a binding call, inlay hints over binding calls), which go to the picker
//! thread ([`crate::picker`]) and are answered from there. Diagnostics run on one worker
//! thread a debounce after the last change; a result for a version that is no longer the
//! latest is dropped, never published.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Notification as _,
    PublishDiagnostics,
};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, GotoDefinition, HoverRequest,
    InlayHintRequest, PrepareRenameRequest, References, Rename, Request as _,
};
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams,
    CodeActionProviderCapability, CompletionOptions, CompletionParams, CompletionResponse,
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    DocumentSymbolParams, DocumentSymbolResponse, GotoDefinitionParams, GotoDefinitionResponse,
    HoverParams, HoverProviderCapability, InitializeResult, InlayHint, InlayHintLabel,
    InlayHintParams, InlayHintTooltip, Location, MarkupContent, MarkupKind, MessageType, OneOf,
    PositionEncodingKind, PublishDiagnosticsParams, ReferenceParams, RenameOptions, RenameParams,
    ServerCapabilities, ServerInfo, TextDocumentPositionParams, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, Url, WorkDoneProgressOptions,
};
use promptforge_core::promptforge_version;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::analysis::Analysis;
use crate::features::{self, BindingQuery, HoverAnswer};
use crate::picker::{Job, PendingHint, PickerHandle, Resources};
use crate::text::{EditBuffer, LineIndex, TooLarge};

/// Documents open at once at most; more are refused (the client is told).
pub const MAX_OPEN_DOCUMENTS: usize = 256;
/// The largest document text kept, in bytes; a document that grows past it is dropped
/// (the client is told). Core analyses at most `MAX_PROMPT_BYTES` (8 MiB) of it.
pub const MAX_DOCUMENT_BYTES: usize = 32 * 1024 * 1024;
/// The default quiet period after a change before diagnostics are computed.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);
/// Messages already queued that are handled before due diagnostics are handed on: a burst
/// of changes gets one analysis per document, not one per change.
const MAX_BATCH: usize = 64;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The quiet period after a change before diagnostics are computed (default 200 ms;
    /// zero publishes after every change).
    pub debounce: Duration,
    /// What binding previews are made against.
    pub resources: Resources,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: DEFAULT_DEBOUNCE,
            resources: Resources::FromEnvironment,
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// `shutdown` then `exit`: exit status 0.
    Clean,
    /// `exit` without `shutdown`, or the client went away: exit status 1.
    Abrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Uninitialized,
    Running,
    ShuttingDown,
}

struct Doc {
    version: i32,
    /// The text as edited; the analysis takes a copy of it in one piece, once per version.
    text: EditBuffer,
    analysis: Option<Arc<Analysis>>,
    /// When its diagnostics are due (a debounce after the last change).
    due: Option<Instant>,
}

/// Diagnostics jobs waiting for the worker: the latest analysis of each document, so a
/// version superseded before the worker got to it is never computed and at most one
/// analysis per open document waits.
#[derive(Default)]
struct Waiting {
    jobs: Mutex<HashMap<Url, Arc<Analysis>>>,
}

/// The main loop's end of the diagnostics worker.
struct Worker {
    waiting: Arc<Waiting>,
    /// Wakes the worker; holds one token at most. Dropping it ends the worker.
    wake: Sender<()>,
}

impl Worker {
    fn submit(&self, uri: Url, analysis: Arc<Analysis>) {
        self.waiting
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri, analysis);
        // Full means the worker is woken already and will see this job.
        let _ = self.wake.try_send(());
    }
}

/// Runs a session on `connection` until `exit` or until the client goes away.
pub fn serve(connection: Connection, options: Options) -> Ended {
    let Connection { sender, receiver } = connection;
    let published: Arc<Mutex<HashMap<Url, i32>>> = Arc::default();
    let waiting = Arc::<Waiting>::default();
    let (wake, woken) = bounded::<()>(1);
    let worker_sender = sender.clone();
    let worker_published = Arc::clone(&published);
    let worker_waiting = Arc::clone(&waiting);
    let worker = std::thread::Builder::new()
        .name("promptforge-lsp-diagnostics".to_owned())
        .spawn(move || {
            diagnostics_worker(&woken, &worker_waiting, &worker_sender, &worker_published);
        });
    let mut server = Server {
        picker: PickerHandle::new(options.resources.clone(), sender.clone()),
        sender,
        debounce: options.debounce,
        docs: HashMap::new(),
        published,
        worker: worker.is_ok().then_some(Worker { waiting, wake }),
        lifecycle: Lifecycle::Uninitialized,
    };
    loop {
        let mut next = match server.next_due() {
            Some(due) => match receiver.recv_timeout(due.saturating_duration_since(Instant::now()))
            {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ended::Abrupt,
            },
            None => match receiver.recv() {
                Ok(message) => Some(message),
                Err(_) => return Ended::Abrupt,
            },
        };
        // This message and those queued behind it, then the diagnostics that are due.
        let mut handled = 0;
        while let Some(message) = next.take() {
            if let Some(ended) = server.handle(message) {
                return ended;
            }
            handled += 1;
            if handled < MAX_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        server.flush_due();
    }
}

struct Server {
    sender: Sender<Message>,
    debounce: Duration,
    docs: HashMap<Url, Doc>,
    /// The version of every open document whose diagnostics may be published.
    published: Arc<Mutex<HashMap<Url, i32>>>,
    worker: Option<Worker>,
    picker: PickerHandle,
    lifecycle: Lifecycle,
}

/// A request's outcome: an answer now, or none because another thread answers it.
enum Answer {
    Now(Result<Value, (ErrorCode, String)>),
    Deferred,
}

fn params<P: DeserializeOwned>(request: &Request) -> Result<P, (ErrorCode, String)> {
    serde_json::from_value(request.params.clone()).map_err(|e| {
        (
            ErrorCode::InvalidParams,
            format!("invalid params for {}: {e}", request.method),
        )
    })
}

fn ok(value: impl serde::Serialize) -> Answer {
    Answer::Now(serde_json::to_value(value).map_err(|e| (ErrorCode::InternalError, e.to_string())))
}

impl Server {
    fn send(&self, message: impl Into<Message>) {
        let _ = self.sender.send(message.into());
    }

    fn log(&self, kind: MessageType, text: &str) {
        self.send(Notification::new(
            "window/logMessage".to_owned(),
            json!({"type": kind, "message": text}),
        ));
    }

    fn show(&self, kind: MessageType, text: &str) {
        self.send(Notification::new(
            "window/showMessage".to_owned(),
            json!({"type": kind, "message": text}),
        ));
    }

    /// Handles one message; how the session ended when it was `exit`.
    fn handle(&mut self, message: Message) -> Option<Ended> {
        match message {
            Message::Request(request) => self.request(request),
            Message::Notification(notification) if notification.method == "exit" => {
                return Some(if self.lifecycle == Lifecycle::ShuttingDown {
                    Ended::Clean
                } else {
                    Ended::Abrupt
                });
            }
            Message::Notification(notification) => self.notification(notification),
            // Answers to requests the server never sends.
            Message::Response(_) => {}
        }
        None
    }

    fn next_due(&self) -> Option<Instant> {
        self.docs.values().filter_map(|d| d.due).min()
    }

    /// Hands every document whose debounce has passed to the diagnostics worker.
    fn flush_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Url> = self
            .docs
            .iter()
            .filter(|(_, d)| d.due.is_some_and(|due| due <= now))
            .map(|(uri, _)| uri.clone())
            .collect();
        for uri in due {
            let Some(analysis) = self.analysis(&uri) else {
                continue;
            };
            if let Some(doc) = self.docs.get_mut(&uri) {
                doc.due = None;
            }
            if let Some(worker) = &self.worker {
                worker.submit(uri, analysis);
            }
        }
    }

    /// The current version's analysis, made on first use.
    fn analysis(&mut self, uri: &Url) -> Option<Arc<Analysis>> {
        let doc = self.docs.get_mut(uri)?;
        if let Some(analysis) = &doc.analysis {
            return Some(Arc::clone(analysis));
        }
        let origin = uri
            .to_file_path()
            .map_or_else(|()| uri.to_string(), |path| path.display().to_string());
        let text = doc.text.text();
        let lines = Arc::new(LineIndex::new(&text));
        let analysis = Arc::new(Analysis::new(doc.version, text, lines, origin));
        doc.analysis = Some(Arc::clone(&analysis));
        Some(analysis)
    }

    fn request(&mut self, request: Request) {
        let id = request.id.clone();
        let answer = match self.lifecycle {
            Lifecycle::Uninitialized if request.method != "initialize" => Answer::Now(Err((
                ErrorCode::ServerNotInitialized,
                "the server is not initialized yet".to_owned(),
            ))),
            Lifecycle::ShuttingDown => Answer::Now(Err((
                ErrorCode::InvalidRequest,
                "the server is shutting down".to_owned(),
            ))),
            _ => match catch_unwind(AssertUnwindSafe(|| self.dispatch(request))) {
                Ok(answer) => answer,
                Err(_) => Answer::Now(Err((
                    ErrorCode::InternalError,
                    "the request failed unexpectedly; the server goes on".to_owned(),
                ))),
            },
        };
        if let Answer::Now(result) = answer {
            let response = match result {
                Ok(value) => Response::new_ok(id, value),
                Err((code, message)) => Response::new_err(id, code as i32, message),
            };
            self.send(response);
        }
    }

    fn dispatch(&mut self, request: Request) -> Answer {
        match request.method.as_str() {
            "initialize" => {
                self.lifecycle = Lifecycle::Running;
                ok(InitializeResult {
                    capabilities: capabilities(),
                    server_info: Some(ServerInfo {
                        name: "promptforge-lsp".to_owned(),
                        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                    }),
                })
            }
            "shutdown" => {
                self.lifecycle = Lifecycle::ShuttingDown;
                ok(Value::Null)
            }
            HoverRequest::METHOD => self.hover(&request),
            Completion::METHOD => self.with_position::<CompletionParams, _>(
                &request,
                |p| &p.text_document_position,
                |analysis, offset, _, _| {
                    ok(CompletionResponse::Array(features::completion(
                        analysis, offset,
                    )))
                },
            ),
            GotoDefinition::METHOD => self.with_position::<GotoDefinitionParams, _>(
                &request,
                |p| &p.text_document_position_params,
                |analysis, offset, uri, _| {
                    let locations: Vec<Location> = features::definition(analysis, offset)
                        .into_iter()
                        .map(|span| Location::new(uri.clone(), analysis.text.range(span)))
                        .collect();
                    if locations.is_empty() {
                        ok(Value::Null)
                    } else {
                        ok(GotoDefinitionResponse::Array(locations))
                    }
                },
            ),
            References::METHOD => self.with_position::<ReferenceParams, _>(
                &request,
                |p| &p.text_document_position,
                |analysis, offset, uri, p| {
                    let include = p.context.include_declaration;
                    let locations: Vec<Location> = features::references(analysis, offset, include)
                        .into_iter()
                        .map(|span| Location::new(uri.clone(), analysis.text.range(span)))
                        .collect();
                    ok(locations)
                },
            ),
            PrepareRenameRequest::METHOD => self.with_position::<TextDocumentPositionParams, _>(
                &request,
                |p| p,
                |analysis, offset, _, _| ok(features::prepare_rename(analysis, offset)),
            ),
            Rename::METHOD => self.with_position::<RenameParams, _>(
                &request,
                |p| &p.text_document_position,
                |analysis, offset, uri, p| match features::rename(analysis, offset, &p.new_name) {
                    Ok(edits) => ok(features::workspace_edit(analysis, uri, edits)),
                    Err(message) => Answer::Now(Err((ErrorCode::RequestFailed, message))),
                },
            ),
            DocumentSymbolRequest::METHOD => match params::<DocumentSymbolParams>(&request) {
                Ok(p) => match self.analysis(&p.text_document.uri) {
                    Some(analysis) => ok(DocumentSymbolResponse::Nested(
                        features::document_symbols(&analysis),
                    )),
                    None => ok(Value::Null),
                },
                Err(e) => Answer::Now(Err(e)),
            },
            CodeActionRequest::METHOD => match params::<CodeActionParams>(&request) {
                Ok(p) => match self.analysis(&p.text_document.uri) {
                    Some(analysis) => {
                        let range =
                            analysis.text.offset(p.range.start)..analysis.text.offset(p.range.end);
                        let actions: Vec<CodeActionOrCommand> =
                            features::code_actions(&analysis, &p.text_document.uri, range)
                                .into_iter()
                                .map(CodeActionOrCommand::CodeAction)
                                .collect();
                        ok(actions)
                    }
                    None => ok(Value::Null),
                },
                Err(e) => Answer::Now(Err(e)),
            },
            InlayHintRequest::METHOD => self.inlay_hints(&request),
            _ => Answer::Now(Err((
                ErrorCode::MethodNotFound,
                format!("unknown method {}", request.method),
            ))),
        }
    }

    /// Parses `P`, finds the document and the offset, and answers with `answer` (which also
    /// sees the parsed params).
    fn with_position<P: DeserializeOwned, F>(
        &mut self,
        request: &Request,
        position: impl Fn(&P) -> &TextDocumentPositionParams,
        answer: F,
    ) -> Answer
    where
        F: FnOnce(&Analysis, usize, &Url, &P) -> Answer,
    {
        let p: P = match params(request) {
            Ok(p) => p,
            Err(e) => return Answer::Now(Err(e)),
        };
        let at = position(&p);
        let Some(analysis) = self.analysis(&at.text_document.uri) else {
            return ok(Value::Null);
        };
        let offset = analysis.text.offset(at.position);
        answer(&analysis, offset, &at.text_document.uri, &p)
    }

    fn hover(&mut self, request: &Request) -> Answer {
        let p: HoverParams = match params(request) {
            Ok(p) => p,
            Err(e) => return Answer::Now(Err(e)),
        };
        let at = &p.text_document_position_params;
        let Some(analysis) = self.analysis(&at.text_document.uri) else {
            return ok(Value::Null);
        };
        let offset = analysis.text.offset(at.position);
        match features::hover(&analysis, offset) {
            HoverAnswer::Now(hover) => ok(hover),
            HoverAnswer::Binding(site) => {
                let range = analysis.text.range(site.span.clone());
                if let BindingQuery::Known { label, detail } = &site.query {
                    return ok(lsp_types::Hover {
                        contents: lsp_types::HoverContents::Markup(MarkupContent {
                            kind: MarkupKind::Markdown,
                            value: format!(
                                "{}\n\n---\n\n**{}**\n\n{detail}",
                                site.doc,
                                label.trim_start_matches("→ ")
                            ),
                        }),
                        range: Some(range),
                    });
                }
                self.picker.submit(Job::Hover {
                    id: request.id.clone(),
                    base: site.doc,
                    range,
                    query: site.query,
                });
                Answer::Deferred
            }
        }
    }

    fn inlay_hints(&mut self, request: &Request) -> Answer {
        let p: InlayHintParams = match params(request) {
            Ok(p) => p,
            Err(e) => return Answer::Now(Err(e)),
        };
        let Some(analysis) = self.analysis(&p.text_document.uri) else {
            return ok(Value::Null);
        };
        let range = analysis.text.offset(p.range.start)..analysis.text.offset(p.range.end);
        let hints: Vec<PendingHint> = features::binding_sites(analysis.index(), range)
            .into_iter()
            .map(|site| PendingHint {
                position: analysis.text.position(site.end),
                query: site.query,
            })
            .collect();
        if hints
            .iter()
            .all(|h| matches!(h.query, BindingQuery::Known { .. }))
        {
            let known: Vec<InlayHint> = hints
                .into_iter()
                .filter_map(|h| match h.query {
                    BindingQuery::Known { label, detail } => Some(InlayHint {
                        position: h.position,
                        label: InlayHintLabel::String(label),
                        kind: None,
                        text_edits: None,
                        tooltip: Some(InlayHintTooltip::String(detail)),
                        padding_left: Some(true),
                        padding_right: None,
                        data: None,
                    }),
                    BindingQuery::Ask(_) => None,
                })
                .collect();
            return ok(known);
        }
        self.picker.submit(Job::InlayHints {
            id: request.id.clone(),
            hints,
        });
        Answer::Deferred
    }

    fn notification(&mut self, notification: Notification) {
        if self.lifecycle == Lifecycle::Uninitialized {
            return;
        }
        let method = notification.method.clone();
        let outcome = catch_unwind(AssertUnwindSafe(|| self.apply(notification)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(problem)) => self.log(MessageType::WARNING, &format!("{method}: {problem}")),
            Err(_) => self.log(
                MessageType::ERROR,
                &format!("{method} failed unexpectedly; the server goes on"),
            ),
        }
    }

    fn apply(&mut self, notification: Notification) -> Result<(), String> {
        match notification.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let p: DidOpenTextDocumentParams = decode(notification.params)?;
                let uri = p.text_document.uri;
                if !self.docs.contains_key(&uri) && self.docs.len() >= MAX_OPEN_DOCUMENTS {
                    self.show(
                        MessageType::WARNING,
                        &format!("promptforge-lsp follows at most {MAX_OPEN_DOCUMENTS} open documents; {uri} is not analysed"),
                    );
                    return Ok(());
                }
                if p.text_document.text.len() > MAX_DOCUMENT_BYTES {
                    return Err(format!(
                        "{uri} is larger than {} MiB and is not analysed",
                        MAX_DOCUMENT_BYTES / (1024 * 1024)
                    ));
                }
                self.docs.insert(
                    uri.clone(),
                    Doc {
                        version: p.text_document.version,
                        text: EditBuffer::new(&p.text_document.text),
                        analysis: None,
                        // Published at once on open.
                        due: Some(Instant::now()),
                    },
                );
                self.allow(&uri, p.text_document.version);
            }
            DidChangeTextDocument::METHOD => {
                let p: DidChangeTextDocumentParams = decode(notification.params)?;
                let uri = p.text_document.uri;
                let due = Instant::now() + self.debounce;
                let Some(doc) = self.docs.get_mut(&uri) else {
                    return Ok(());
                };
                // In order, each against the text the previous one left.
                let applied = p.content_changes.iter().try_for_each(|change| {
                    doc.text
                        .apply(change.range, &change.text, MAX_DOCUMENT_BYTES)
                });
                if let Err(TooLarge { would_be }) = applied {
                    self.close(&uri);
                    return Err(format!(
                        "{uri} would grow to {would_be} bytes, past {} MiB, and is no longer analysed",
                        MAX_DOCUMENT_BYTES / (1024 * 1024)
                    ));
                }
                doc.version = p.text_document.version;
                doc.analysis = None;
                doc.due = Some(due);
                let version = doc.version;
                self.allow(&uri, version);
            }
            DidCloseTextDocument::METHOD => {
                let p: DidCloseTextDocumentParams = decode(notification.params)?;
                self.close(&p.text_document.uri);
            }
            "$/cancelRequest" => {
                let id = notification
                    .params
                    .get("id")
                    .cloned()
                    .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
                if let Some(id) = id {
                    self.picker.cancel(id);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Makes `version` the one whose diagnostics may be published.
    fn allow(&self, uri: &Url, version: i32) {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.clone(), version);
    }

    /// Forgets a document and clears its diagnostics.
    fn close(&mut self, uri: &Url) {
        self.docs.remove(uri);
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        published.remove(uri);
        // Under the lock: the worker cannot publish for this document after this.
        self.send(Notification::new(
            PublishDiagnostics::METHOD.to_owned(),
            PublishDiagnosticsParams::new(uri.clone(), Vec::new(), None),
        ));
    }
}

fn decode<P: DeserializeOwned>(value: Value) -> Result<P, String> {
    serde_json::from_value(value).map_err(|e| format!("invalid params: {e}"))
}

/// Whether a document claims to be a prompt (a readable `promptforge:` version, or a
/// frontmatter with a `promptforge:` key): only those get diagnostics, as `promptforge
/// check` treats Markdown found in a directory.
fn claims_prompt(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    promptforge_version(text).is_some()
        || (text.starts_with("---") && text.lines().any(|line| line.starts_with("promptforge:")))
}

fn diagnostics_worker(
    woken: &Receiver<()>,
    waiting: &Waiting,
    sender: &Sender<Message>,
    published: &Mutex<HashMap<Url, i32>>,
) {
    while woken.recv().is_ok() {
        let latest =
            std::mem::take(&mut *waiting.jobs.lock().unwrap_or_else(PoisonError::into_inner));
        for (uri, analysis) in latest {
            let current =
                |published: &HashMap<Url, i32>| published.get(&uri) == Some(&analysis.version);
            if !current(&published.lock().unwrap_or_else(PoisonError::into_inner)) {
                continue;
            }
            let diagnostics = if claims_prompt(analysis.text.original()) {
                catch_unwind(AssertUnwindSafe(|| analysis.diagnostics())).unwrap_or_default()
            } else {
                Vec::new()
            };
            let published = published.lock().unwrap_or_else(PoisonError::into_inner);
            if current(&published) {
                let params =
                    PublishDiagnosticsParams::new(uri, diagnostics, Some(analysis.version));
                if sender
                    .send(Message::Notification(Notification::new(
                        PublishDiagnostics::METHOD.to_owned(),
                        params,
                    )))
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(PositionEncodingKind::UTF16),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                ..TextDocumentSyncOptions::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some([".", "\"", "'", "#", "{"].map(str::to_owned).to_vec()),
            ..CompletionOptions::default()
        }),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: WorkDoneProgressOptions::default(),
        })),
        document_symbol_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..CodeActionOptions::default()
        })),
        inlay_hint_provider: Some(OneOf::Left(true)),
        ..ServerCapabilities::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysis(version: i32) -> Arc<Analysis> {
        let text = format!("version {version}");
        let lines = Arc::new(LineIndex::new(&text));
        Arc::new(Analysis::new(version, text, lines, "test.md".to_owned()))
    }

    #[test]
    fn only_the_latest_analysis_of_a_document_waits() {
        let (wake, woken) = bounded::<()>(1);
        let worker = Worker {
            waiting: Arc::default(),
            wake,
        };
        let a = Url::parse("file:///a.md").unwrap();
        let b = Url::parse("file:///b.md").unwrap();
        for version in 1..=100 {
            worker.submit(a.clone(), analysis(version));
        }
        worker.submit(b.clone(), analysis(7));
        // One wake-up, and one job per document: the superseded versions are gone.
        assert_eq!(woken.try_iter().count(), 1);
        let jobs = worker.waiting.jobs.lock().unwrap();
        let versions: HashMap<&Url, i32> = jobs.iter().map(|(u, a)| (u, a.version)).collect();
        assert_eq!(versions, HashMap::from([(&a, 100), (&b, 7)]));
        // Nothing else holds the superseded analyses: their memory is back.
        assert!(jobs.values().all(|a| Arc::strong_count(a) == 1));
    }
}
