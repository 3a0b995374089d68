//! The language server's latencies, measured through the protocol on an in-memory
//! connection (what an editor waits for, minus the pipe):
//!
//! - change → published diagnostics on a 1,000-section prompt (no debounce, so the figure
//!   is the analysis; an editor adds the debounce, 200 ms by default), for an edit that
//!   keeps the file clean and one that breaks a Lua block;
//! - first hover on a `tools.bind` call on a fresh server (the picker loads: embedding
//!   model, tool index, the need's embedding), then a hover on another binding (picker
//!   loaded), a repeated one (cached), and an API hover (no picker at all).
//!
//! `cargo bench -p promptforge-lsp --bench latency [-- samples]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use promptforge_core::client::{GatewayClient, ModelCatalog};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_lsp::lsp_server::{Connection, Message, Notification, Request, RequestId};
use promptforge_lsp::lsp_types::{Position, PublishDiagnosticsParams, Url};
use promptforge_lsp::{Options, Resources};
use promptforge_webfetch::WebFetch;
use serde_json::{Value, json};

struct Session {
    connection: Connection,
    next: i32,
}

impl Session {
    fn start(options: Options) -> Self {
        let (server, client) = Connection::memory();
        std::thread::spawn(move || promptforge_lsp::serve(server, options));
        let mut session = Self {
            connection: client,
            next: 0,
        };
        session.request("initialize", json!({"capabilities": {}}));
        session.notify("initialized", json!({}));
        session
    }

    fn notify(&self, method: &str, params: Value) {
        let note = Notification::new(method.to_owned(), params);
        self.connection.sender.send(note.into()).unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = RequestId::from(self.next);
        let request = Request::new(id.clone(), method.to_owned(), params);
        self.connection.sender.send(request.into()).unwrap();
        loop {
            match self
                .connection
                .receiver
                .recv_timeout(Duration::from_secs(300))
                .unwrap()
            {
                Message::Response(response) if response.id == id => {
                    return response.response_result.unwrap();
                }
                _ => {}
            }
        }
    }

    fn diagnostics(&self, uri: &Url, version: i32) -> usize {
        loop {
            let message = self
                .connection
                .receiver
                .recv_timeout(Duration::from_secs(300))
                .unwrap();
            if let Message::Notification(n) = message
                && n.method == "textDocument/publishDiagnostics"
            {
                let params: PublishDiagnosticsParams = serde_json::from_value(n.params).unwrap();
                if &params.uri == uri && params.version == Some(version) {
                    return params.diagnostics.len();
                }
            }
        }
    }
}

fn resources() -> Resources {
    let search: Arc<dyn Tool> = Arc::new(WebSearch::new(GatewayClient::disabled()));
    let fetch: Arc<dyn Tool> = Arc::new(WebFetch::new());
    Resources::Given {
        tools: ToolCatalog::new(&[search, fetch]).unwrap(),
        models: ModelCatalog::empty(),
    }
}

fn thousand_sections() -> String {
    let mut text = "---\nname: bench\ndescription: a 1,000-section prompt\npromptforge: 1\n---\n\n# Bench\n\n```lua\nvar.n = 0\n```\n\n".to_owned();
    for i in 0..1000 {
        text.push_str(&format!(
            "## Section {i}\n\n```lua\nvar.n = var.n + 1\nif var.n > 5000 then jump(\"## Section {}\") end\n```\n\nSummarise step {{{{ var.n }}}} for {{{{ args }}}}.\n\n",
            (i + 1) % 1000
        ));
    }
    text
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<58} n={:<3} min {:>8.2} ms  p50 {:>8.2} ms  p95 {:>8.2} ms",
        samples.len(),
        ms(samples[0]),
        ms(at(0.5)),
        ms(at(0.95))
    );
}

fn main() {
    let samples: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30);

    // Change → diagnostics on 1,000 sections.
    let text = thousand_sections();
    let uri = Url::parse("file:///bench/big.md").unwrap();
    let session = Session::start(Options {
        debounce: Duration::ZERO,
        resources: resources(),
    });
    session.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}),
    );
    assert_eq!(session.diagnostics(&uri, 1), 0);
    let line = text[..text
        .find("var.n = var.n + 1\nif var.n > 5000 then jump(\"## Section 501\")")
        .unwrap()]
        .matches('\n')
        .count() as u32;
    let mut version = 1;
    let mut clean = Vec::new();
    let mut broken = Vec::new();
    for k in 0..samples * 2 {
        version += 1;
        // Alternately insert `local ` (a syntax error: `local var.n`) and remove it, or
        // insert and remove a comment (still clean).
        let breaking = k % 4 < 2;
        let inserting = k % 2 == 0;
        let insert = if breaking { "local " } else { "-- c\n" };
        let change = if inserting {
            json!({"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}, "text": insert})
        } else {
            let end = if breaking {
                json!({"line": line, "character": insert.len()})
            } else {
                json!({"line": line + 1, "character": 0})
            };
            json!({"range": {"start": {"line": line, "character": 0}, "end": end}, "text": ""})
        };
        let started = Instant::now();
        session.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}),
        );
        let found = session.diagnostics(&uri, version);
        let took = started.elapsed();
        if breaking && inserting {
            assert_eq!(found, 1);
            broken.push(took);
        } else {
            assert_eq!(found, 0);
            clean.push(took);
        }
    }
    println!("1,000 sections, {} KB", text.len() / 1024);
    report("change -> diagnostics, file stays clean (1 parse)", clean);
    report(
        "change -> diagnostics, edit breaks a Lua block (2 parses)",
        broken,
    );

    // A request right after a keystroke, before any diagnostics (default debounce): the
    // index of the new version is built on the request thread.
    let mut typing = Session::start(Options {
        debounce: promptforge_lsp::DEFAULT_DEBOUNCE,
        resources: resources(),
    });
    typing.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}),
    );
    typing.diagnostics(&uri, 1);
    let hover_at = json!({"textDocument": {"uri": uri}, "position": Position::new(line + 1, 20)});
    let mut after_change = Vec::new();
    for k in 0..samples {
        let text = if k % 2 == 0 { " " } else { "" };
        let end = if k % 2 == 0 { 0 } else { 1 };
        typing.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": 2 + k}, "contentChanges": [
                {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": end}}, "text": text}
            ]}),
        );
        let started = Instant::now();
        typing.request("textDocument/hover", hover_at.clone());
        after_change.push(started.elapsed());
    }
    report(
        "hover right after a change (index rebuilt, 1,000 sections)",
        after_change,
    );

    // First hover latency: a fresh server every sample.
    let prompt = "---\nname: hover\ndescription: d\npromptforge: 1\n---\n\n# Hover\n\n```lua\ntools.bind(\"search\", \"search the web for current information\")\ntools.bind(\"fetch\", \"fetch a web page and read its text\")\nlocal x = store.read(\"notes.md\")\n```\n";
    let small = Url::parse("file:///bench/hover.md").unwrap();
    let position_of = |needle: &str, shift: usize| {
        let offset = prompt.find(needle).unwrap() + shift;
        let line = prompt[..offset].matches('\n').count() as u32;
        let column = (offset - prompt[..offset].rfind('\n').map_or(0, |n| n + 1)) as u32;
        json!({"textDocument": {"uri": small}, "position": Position::new(line, column)})
    };
    let (mut api, mut first, mut loaded, mut cached) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples.clamp(3, 10) {
        let mut session = Session::start(Options {
            debounce: Duration::ZERO,
            resources: resources(),
        });
        session.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": small, "languageId": "markdown", "version": 1, "text": prompt}}),
        );
        session.diagnostics(&small, 1);
        let timed = |session: &mut Session, params: Value| {
            let started = Instant::now();
            let answer = session.request("textDocument/hover", params);
            assert!(!answer.is_null());
            started.elapsed()
        };
        api.push(timed(&mut session, position_of("store.read", 7)));
        first.push(timed(&mut session, position_of("tools.bind(\"search\"", 4)));
        loaded.push(timed(&mut session, position_of("tools.bind(\"fetch\"", 4)));
        cached.push(timed(&mut session, position_of("tools.bind(\"search\"", 4)));
    }
    report("hover on an API call (never needs the picker)", api);
    report("first binding hover, picker not loaded (loads it)", first);
    report(
        "binding hover, picker loaded (one new need embedded)",
        loaded,
    );
    report("binding hover, same need again (cached)", cached);
}
