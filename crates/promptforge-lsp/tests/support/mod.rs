//! A test client for the language server: in process over `Connection::memory()`, or over
//! the real binary's stdio. Every wait is bounded (a hung server fails the test instead of
//! hanging it); no test asserts on time.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};
use promptforge_lsp::lsp_server::{
    Connection, Message, Notification, Request, RequestId, Response,
};
use promptforge_lsp::lsp_types::{Diagnostic, Position, PublishDiagnosticsParams, Url};
use promptforge_lsp::{Ended, Options};
use serde_json::{Value, json};

/// How long any single answer may take before the test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

/// A prompt's frontmatter and title.
pub(crate) const HEAD: &str =
    "---\nname: test\ndescription: a test prompt\npromptforge: 1\n---\n\n# Test\n\n";

/// How messages reach the server.
enum Wire {
    Memory {
        sender: Sender<Message>,
        server: Option<JoinHandle<Ended>>,
    },
    Stdio {
        child: Child,
        stdin: ChildStdin,
    },
}

/// A client: sends requests and notifications, keeps every notification it receives.
pub(crate) struct Client {
    wire: Option<Wire>,
    receiver: Receiver<Message>,
    next_id: i32,
    /// Notifications seen so far, in order.
    pub(crate) notifications: Vec<Notification>,
    /// Responses that arrived while waiting for another one.
    early: Vec<Response>,
}

impl Client {
    /// Starts a server in this process and initializes it.
    pub(crate) fn start(options: Options) -> Self {
        let (server, client) = Connection::memory();
        let handle = std::thread::spawn(move || promptforge_lsp::serve(server, options));
        let mut client = Self {
            wire: Some(Wire::Memory {
                sender: client.sender,
                server: Some(handle),
            }),
            receiver: client.receiver,
            next_id: 0,
            notifications: Vec::new(),
            early: Vec::new(),
        };
        client.initialize();
        client
    }

    /// Starts the built binary with extra environment variables and initializes it.
    pub(crate) fn spawn(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_promptforge-lsp"));
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env_remove("PROMPTFORGE_GATEWAY_URL")
            .env_remove("PROMPTFORGE_GATEWAY_API_KEY");
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the server binary starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, receiver) = unbounded();
        std::thread::spawn(move || read_frames(stdout, &sender));
        let mut client = Self {
            wire: Some(Wire::Stdio { child, stdin }),
            receiver,
            next_id: 0,
            notifications: Vec::new(),
            early: Vec::new(),
        };
        client.initialize();
        client
    }

    fn initialize(&mut self) {
        let result = self.request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": {}}),
        );
        assert!(result.response_result.is_ok(), "{result:?}");
        self.notify("initialized", json!({}));
    }

    /// Writes raw bytes to the binary's stdin (stdio clients only).
    pub(crate) fn write_raw(&mut self, bytes: &[u8]) {
        match &mut self.wire {
            Some(Wire::Stdio { stdin, .. }) => {
                stdin.write_all(bytes).unwrap();
                stdin.flush().unwrap();
            }
            _ => panic!("raw bytes need the stdio client"),
        }
    }

    pub(crate) fn send(&mut self, message: Message) {
        match &mut self.wire {
            Some(Wire::Memory { sender, .. }) => sender.send(message).unwrap(),
            Some(Wire::Stdio { stdin, .. }) => {
                let mut buffer = Vec::new();
                message.write(&mut buffer).unwrap();
                stdin.write_all(&buffer).unwrap();
                stdin.flush().unwrap();
            }
            None => panic!("the client has finished"),
        }
    }

    pub(crate) fn notify(&mut self, method: &str, params: Value) {
        self.send(Message::Notification(Notification::new(
            method.to_owned(),
            params,
        )));
    }

    /// Sends a request and returns its id without waiting.
    pub(crate) fn send_request(&mut self, method: &str, params: Value) -> RequestId {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        self.send(Message::Request(Request::new(
            id.clone(),
            method.to_owned(),
            params,
        )));
        id
    }

    /// Waits for the response to `id`.
    pub(crate) fn response(&mut self, id: &RequestId) -> Response {
        if let Some(at) = self.early.iter().position(|r| &r.id == id) {
            return self.early.remove(at);
        }
        loop {
            match self.next() {
                Message::Response(response) if &response.id == id => return response,
                Message::Response(response) => self.early.push(response),
                _ => {}
            }
        }
    }

    /// The next response of any request, in arrival order.
    pub(crate) fn any_response(&mut self) -> Response {
        if !self.early.is_empty() {
            return self.early.remove(0);
        }
        loop {
            if let Message::Response(response) = self.next() {
                return response;
            }
        }
    }

    /// Sends a request and waits for its response.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Response {
        let id = self.send_request(method, params);
        self.response(&id)
    }

    /// Sends a request and returns its result, failing the test on an error.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        match self.request(method, params).response_result {
            Ok(value) => value,
            Err(error) => panic!("{method} failed: {error:?}"),
        }
    }

    /// The next message; notifications are recorded.
    fn next(&mut self) -> Message {
        let message = self
            .receiver
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no message from the server within {PATIENCE:?}: {e}"));
        if let Message::Notification(notification) = &message {
            self.notifications.push(notification.clone());
        }
        message
    }

    /// The document symbols of `uri` (`null` for a document the server does not follow).
    pub(crate) fn symbols(&mut self, uri: &Url) -> Value {
        self.call(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": uri}}),
        )
    }

    pub(crate) fn open(&mut self, uri: &Url, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}),
        );
    }

    /// Waits for diagnostics of `uri` at `version` and returns them.
    pub(crate) fn diagnostics(&mut self, uri: &Url, version: i32) -> Vec<Diagnostic> {
        loop {
            if let Some(found) = self
                .published(uri)
                .into_iter()
                .find(|p| p.version == Some(version))
            {
                return found.diagnostics;
            }
            let message = self.next();
            if let Message::Response(response) = message {
                self.early.push(response);
            }
        }
    }

    /// Every diagnostics publication for `uri` so far, in order.
    pub(crate) fn published(&self, uri: &Url) -> Vec<PublishDiagnosticsParams> {
        self.notifications
            .iter()
            .filter(|n| n.method == "textDocument/publishDiagnostics")
            .filter_map(|n| {
                serde_json::from_value::<PublishDiagnosticsParams>(n.params.clone()).ok()
            })
            .filter(|p| &p.uri == uri)
            .collect()
    }

    /// `shutdown` then `exit`; how the session ended (in process) or the exit status.
    pub(crate) fn shutdown(mut self) -> Option<i32> {
        let response = self.request("shutdown", Value::Null);
        assert!(response.response_result.is_ok(), "{response:?}");
        self.notify("exit", Value::Null);
        self.finish()
    }

    /// Waits for the server to end: `Some(0)`/`Some(1)` for a clean/abrupt end.
    pub(crate) fn finish(mut self) -> Option<i32> {
        match self.wire.take()? {
            Wire::Memory { mut server, sender } => {
                drop(sender);
                let ended = server.take().map(|h| h.join().expect("the server thread"));
                ended.map(|e| if e == Ended::Clean { 0 } else { 1 })
            }
            Wire::Stdio { mut child, stdin } => {
                drop(stdin);
                let deadline = std::time::Instant::now() + PATIENCE;
                loop {
                    if let Some(status) = child.try_wait().unwrap() {
                        return status.code();
                    }
                    if std::time::Instant::now() > deadline {
                        let _ = child.kill();
                        panic!("the server did not exit");
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(Wire::Stdio { child, .. }) = &mut self.wire {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads `Content-Length` frames from the server's stdout.
fn read_frames(stdout: impl Read, sender: &Sender<Message>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut length = None;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length:") {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let Some(length) = length else { return };
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        // A JSON-RPC error with a null id is not a `Message`: keep it as a notification.
        let message = serde_json::from_slice::<Message>(&body).unwrap_or_else(|_| {
            Message::Notification(Notification::new(
                "test/unparsed".to_owned(),
                serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
            ))
        });
        if sender.send(message).is_err() {
            return;
        }
    }
}

/// The names of the top-level symbols of a `documentSymbol` answer.
pub(crate) fn symbol_names(symbols: &Value) -> Vec<&str> {
    symbols
        .as_array()
        .expect("symbols")
        .iter()
        .map(|s| s["name"].as_str().expect("a name"))
        .collect()
}

/// A `file://` URI for a test document.
pub(crate) fn uri(name: &str) -> Url {
    Url::parse(&format!("file:///tmp/promptforge-lsp-tests/{name}")).unwrap()
}

/// The LSP position of byte `offset` in `text` (UTF-16 columns).
pub(crate) fn position(text: &str, offset: usize) -> Position {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let character: usize = before[line_start..].chars().map(char::len_utf16).sum();
    Position::new(line as u32, character as u32)
}

/// The position `shift` bytes into the first occurrence of `needle`.
pub(crate) fn at(text: &str, needle: &str, shift: usize) -> Position {
    let offset = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not in the text"))
        + shift;
    position(text, offset)
}

/// `textDocument` + `position` params.
pub(crate) fn point(uri: &Url, position: Position) -> Value {
    json!({"textDocument": {"uri": uri}, "position": position})
}

/// Applies a workspace edit's text edits for `uri` to `text` (edits do not overlap).
pub(crate) fn apply_edit(text: &str, edit: &Value, uri: &Url) -> String {
    let edits = edit["changes"][uri.as_str()]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            let start: Position = serde_json::from_value(e["range"]["start"].clone()).unwrap();
            let end: Position = serde_json::from_value(e["range"]["end"].clone()).unwrap();
            (
                offset(text, start),
                offset(text, end),
                e["newText"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (start, end, new) in spans {
        out.replace_range(start..end, &new);
    }
    out
}

/// The byte offset of an LSP position in `text`.
pub(crate) fn offset(text: &str, position: Position) -> usize {
    let mut line_start = 0;
    for _ in 0..position.line {
        line_start += text[line_start..]
            .find('\n')
            .map_or(text.len() - line_start, |at| at + 1);
    }
    let mut units = 0;
    for (at, c) in text[line_start..].char_indices() {
        if units >= position.character as usize || c == '\n' {
            return line_start + at;
        }
        units += c.len_utf16();
    }
    text.len()
}
