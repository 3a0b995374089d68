//! The tasks extension (SEP-2663) over stdio at 2026-07-28: `run_prompt` as a task, whose
//! id is the run id `check_run` knows, `tasks/get` polling and `tasks/cancel`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Knobs, Upstream, binary, standard_prompts, write_config};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

struct Peer {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

fn meta(tasks: bool) -> Value {
    let extensions = if tasks {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "0"}
    })
}

impl Peer {
    async fn start(config: &std::path::Path) -> Self {
        let mut child = tokio::process::Command::new(binary())
            .args(["serve", "--stdio"])
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut peer = Self {
            _child: child,
            stdin,
            lines,
            next_id: 0,
        };
        let discover = peer
            .call("server/discover", json!({"_meta": meta(true)}))
            .await;
        assert!(
            discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
                .is_object(),
            "{discover}"
        );
        peer
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("no reply")
                .unwrap()
                .expect("stdout closed");
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["id"] == id {
                return value;
            }
        }
    }

    async fn tool(&mut self, name: &str, arguments: Value, tasks: bool) -> Value {
        let mut params = json!({"name": name, "arguments": arguments});
        params["_meta"] = meta(tasks);
        self.call("tools/call", params).await
    }

    async fn task(&mut self, id: &str) -> Value {
        self.call("tasks/get", json!({"taskId": id, "_meta": meta(true)}))
            .await["result"]
            .clone()
    }

    async fn settle(&mut self, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let task = self.task(id).await;
            if task["status"] != "working" {
                return task;
            }
            assert!(tokio::time::Instant::now() < deadline, "task never settled");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn fixture() -> (tempfile::TempDir, Upstream, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let config = write_config(dir.path(), &upstream.url, &Knobs::default());
    (dir, upstream, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prompt_as_a_task_maps_onto_the_run_registry() {
    let (_dir, _upstream, config) = fixture().await;
    let mut peer = Peer::start(&config).await;
    let created = peer
        .tool(
            "run_prompt",
            json!({"prompt": "greet", "args": "Task"}),
            true,
        )
        .await;
    let result = &created["result"];
    assert_eq!(result["resultType"], "task", "{created}");
    let id = result["taskId"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    assert!(result["pollIntervalMs"].as_u64().is_some());

    let task = peer.settle(&id).await;
    assert_eq!(task["status"], "completed", "{task}");
    let record = &task["result"]["structuredContent"];
    assert_eq!(record["run_id"], id.as_str());
    assert_eq!(record["value"], "Echo: Hello, Task!");
    assert_eq!(task["result"]["isError"], false);
    // The same id is a run id check_run knows.
    let checked = peer.tool("check_run", json!({"run_id": id}), true).await;
    assert_eq!(checked["result"]["structuredContent"], *record, "{checked}");

    // A failed run is a completed task carrying an isError result.
    let created = peer
        .tool("run_prompt", json!({"prompt": "nope"}), true)
        .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let task = peer.settle(&id).await;
    assert_eq!(task["status"], "completed");
    assert_eq!(task["result"]["isError"], true);

    // Without the capability the call is answered inline.
    let inline = peer
        .tool("run_prompt", json!({"prompt": "echo", "args": "x"}), false)
        .await;
    assert_eq!(
        inline["result"]["structuredContent"]["value"], "x",
        "{inline}"
    );

    let unknown = peer
        .call(
            "tasks/get",
            json!({"taskId": "f".repeat(32), "_meta": meta(true)}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_cancels_the_run() {
    let (_dir, upstream, config) = fixture().await;
    let mut peer = Peer::start(&config).await;
    let created = peer
        .tool(
            "run_prompt",
            json!({"prompt": "greet", "args": "SLOW"}),
            true,
        )
        .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while upstream.chats() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(peer.task(&id).await["status"], "working");
    let ack = peer
        .call("tasks/cancel", json!({"taskId": id, "_meta": meta(true)}))
        .await;
    assert!(ack.get("error").is_none(), "{ack}");
    let task = peer.settle(&id).await;
    assert_eq!(task["status"], "cancelled", "{task}");
    let record = peer.tool("check_run", json!({"run_id": id}), false).await;
    assert_eq!(
        record["result"]["structuredContent"]["status"], "failed",
        "{record}"
    );
}
