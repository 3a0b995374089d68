//! LSP's base protocol over stdin and stdout, bounded: `Content-Length` framed JSON-RPC
//! messages read on one thread and written on another, handed to the server as an
//! [`lsp_server::Connection`].
//!
//! Unlike a plain reader, a bad frame never leaves the session deaf: a body that is not
//! JSON is answered with a JSON-RPC parse error (id `null`); garbage, a bad header section,
//! a body shorter than its `Content-Length` and a frame larger than [`MAX_MESSAGE_BYTES`]
//! are skipped up to the next frame's header, bounded in memory, and the client is told
//! (`window/logMessage`); see `frames.rs` for each case. Only the end of stdin (or an I/O
//! error) ends the reader, with the reason logged when it ended inside a frame.

mod frames;
mod json_prefix;

use std::io::{self, Read, Write};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};
use lsp_server::{Connection, Message, Notification};
use serde_json::json;

use frames::{Frame, Frames};
pub use json_prefix::MAX_JSON_DEPTH;

/// The largest message body read, in bytes (64 MiB: a document at core's 8 MiB cap,
/// JSON-escaped, fits many times over).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// The longest header section accepted, in bytes (a longer one is skipped up to the next
/// `Content-Length` header).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The threads behind a stdio connection.
#[derive(Debug)]
pub struct IoThreads {
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
    written: Receiver<()>,
}

impl IoThreads {
    /// Waits until everything sent has been written (the writer ends once every sender of
    /// the connection is dropped), at most `limit`. The reader is not waited for: it ends
    /// with stdin.
    pub fn finish(self, limit: Duration) {
        if self.written.recv_timeout(limit).is_ok() {
            let _ = self.writer.join();
        }
        drop(self.reader);
    }
}

/// A connection over this process's stdin and stdout.
pub fn stdio() -> io::Result<(Connection, IoThreads)> {
    let (to_server, from_client) = bounded::<Message>(64);
    let (to_client, outgoing) = unbounded::<Message>();
    let (raw_sender, raw) = unbounded::<Vec<u8>>();
    let (written_sender, written) = bounded::<()>(1);
    let writer = std::thread::Builder::new()
        .name("promptforge-lsp-writer".to_owned())
        .spawn(move || {
            let stdout = io::stdout();
            let _ = write_loop(&mut stdout.lock(), &outgoing, &raw);
            let _ = written_sender.send(());
        })?;
    let notify = to_client.clone();
    let reader = std::thread::Builder::new()
        .name("promptforge-lsp-reader".to_owned())
        .spawn(move || {
            let stdin = io::stdin();
            read_loop(stdin.lock(), &to_server, &notify, &raw_sender);
        })?;
    Ok((
        Connection {
            sender: to_client,
            receiver: from_client,
        },
        IoThreads {
            reader,
            writer,
            written,
        },
    ))
}

fn write_loop(
    out: &mut impl Write,
    messages: &Receiver<Message>,
    raw: &Receiver<Vec<u8>>,
) -> io::Result<()> {
    // Once the reader is gone its channel would be ready forever: stop listening to it.
    let mut raw = raw.clone();
    loop {
        select! {
            recv(messages) -> message => match message {
                // `write` frames the message and adds `"jsonrpc": "2.0"`.
                Ok(message) => message.write(out)?,
                Err(_) => return Ok(()),
            },
            recv(raw) -> body => match body {
                Ok(body) => {
                    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
                    out.write_all(&body)?;
                    out.flush()?;
                }
                Err(_) => raw = crossbeam_channel::never(),
            },
        }
    }
}

/// Reads frames until the input ends (or `exit` arrives).
pub(crate) fn read_loop(
    input: impl Read,
    to_server: &Sender<Message>,
    to_client: &Sender<Message>,
    raw: &Sender<Vec<u8>>,
) {
    let mut frames = Frames::new(input);
    loop {
        match frames.next_frame() {
            Frame::Body { body, problem } => {
                if let Some(problem) = problem {
                    tell(to_client, &problem);
                }
                if !hand_on(body, to_server, raw) {
                    return;
                }
            }
            Frame::Skipped(what) => tell(to_client, &what),
            Frame::End(why) => {
                if let Some(why) = why {
                    let why = format!("{why}; the session ends");
                    // The client may be gone: stderr is the editor's server log too.
                    let _ = writeln!(io::stderr().lock(), "promptforge-lsp: {why}");
                    tell(to_client, &why);
                }
                return;
            }
        }
    }
}

/// Hands a body on to the server, or answers it when it is not a message; `false` once
/// reading should stop (`exit`, or the server is gone).
fn hand_on(body: &[u8], to_server: &Sender<Message>, raw: &Sender<Vec<u8>>) -> bool {
    match serde_json::from_slice::<Message>(body) {
        Ok(message) => {
            let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
            to_server.send(message).is_ok() && !exit
        }
        Err(error) => {
            let (code, text) = if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
                (-32600, format!("invalid request: {error}"))
            } else {
                (-32700, format!("parse error: {error}"))
            };
            let reply =
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": text}});
            raw.send(reply.to_string().into_bytes()).is_ok()
        }
    }
}

/// Tells the client about a dropped message (`window/logMessage`, error).
fn tell(to_client: &Sender<Message>, text: &str) {
    let _ = to_client.send(Message::Notification(Notification::new(
        "window/logMessage".to_owned(),
        json!({"type": 1, "message": text}),
    )));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    fn run(input: &str) -> (Vec<Message>, Vec<Message>, Vec<String>) {
        let (to_server, from_reader) = unbounded();
        let (to_client, told) = unbounded();
        let (raw, raw_out) = unbounded();
        read_loop(
            &mut io::Cursor::new(input.as_bytes().to_vec()),
            &to_server,
            &to_client,
            &raw,
        );
        (
            from_reader.try_iter().collect(),
            told.try_iter().collect(),
            raw_out
                .try_iter()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect(),
        )
    }

    #[test]
    fn bad_frames_are_answered_and_reading_goes_on() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let input = [
            frame("{not json"),
            "Content-Length: abc\r\n\r\n".to_owned(),
            frame(r#"{"jsonrpc":"2.0","id":[1]}"#),
            "\r\n".to_owned(),
            frame(good),
        ]
        .concat();
        let (messages, told, raw) = run(&input);
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(matches!(&messages[0], Message::Request(r) if r.method == "shutdown"));
        assert_eq!(told.len(), 1, "{told:?}");
        assert_eq!(raw.len(), 2, "{raw:?}");
        assert!(
            raw[0].contains("-32700") && raw[1].contains("-32600"),
            "{raw:?}"
        );
    }

    #[test]
    fn oversized_frames_are_skipped_without_being_held() {
        let huge = MAX_MESSAGE_BYTES + 1;
        let mut input = format!("Content-Length: {huge}\r\n\r\n").into_bytes();
        input.resize(input.len() + huge, b' ');
        input.extend_from_slice(
            frame(r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#).as_bytes(),
        );
        let (to_server, from_reader) = unbounded();
        let (to_client, told) = unbounded();
        let (raw, _raw_out) = unbounded();
        read_loop(&mut io::Cursor::new(input), &to_server, &to_client, &raw);
        assert_eq!(from_reader.try_iter().count(), 1);
        assert_eq!(told.try_iter().count(), 1);
    }

    #[test]
    fn overlong_headers_are_refused() {
        let input = format!(
            "X-Junk: {}\r\nContent-Length: 2\r\n\r\n{{}}{}",
            "x".repeat(MAX_HEADER_BYTES * 2),
            frame(r#"{"jsonrpc":"2.0","method":"exit"}"#)
        );
        let (messages, told, _) = run(&input);
        assert_eq!(told.len(), 1);
        assert!(
            messages
                .iter()
                .any(|m| matches!(m, Message::Notification(n) if n.method == "exit")),
            "{messages:?}"
        );
    }
}
