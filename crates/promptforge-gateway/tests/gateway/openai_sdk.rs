//! End to end with the unmodified official `openai` Python SDK.

use std::path::PathBuf;

use serde_json::json;

use crate::harness::*;

const SCRIPT: &str = r#"
import sys
import openai
from openai import OpenAI

base_url, key = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0)

reply = client.chat.completions.create(
    model="reasoning-large",
    messages=[{"role": "user", "content": "Explain monads"}],
    temperature=0.7,
)
assert reply.model == "reasoning-large", reply.model
assert reply.choices[0].message.content == "hello from upstream", reply

pieces = []
stream = client.chat.completions.create(
    model="reasoning-large",
    messages=[{"role": "user", "content": "Explain monads"}],
    stream=True,
)
for chunk in stream:
    assert chunk.model == "reasoning-large", chunk.model
    if chunk.choices and chunk.choices[0].delta.content:
        pieces.append(chunk.choices[0].delta.content)
assert "".join(pieces) == "Hello", pieces

emb = client.embeddings.create(model="embed-large", input=["first", "second"])
assert emb.model == "embed-large", emb.model
assert emb.data[0].embedding == [0.1, 0.2, 0.3], emb.data

try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    raise SystemExit("expected NotFoundError")
except openai.NotFoundError as err:
    assert err.status_code == 404
    assert err.code == "model_not_found", err.code
    assert "unknown model no-such-model" in str(err), str(err)

try:
    OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0).models.list()
    raise SystemExit("expected AuthenticationError")
except openai.AuthenticationError as err:
    assert err.status_code == 401

models = [m.id for m in client.models.list()]
assert "reasoning-large" in models and "embed-large" in models, models
print("openai sdk e2e ok")
"#;

/// `PROMPTFORGE_TEST_PYTHON`, else `<workspace>/.venv/bin/python`.
fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("PROMPTFORGE_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = workspace.join(".venv/bin/python");
    assert!(
        venv.exists(),
        "no Python for the openai SDK test at {}: set PROMPTFORGE_TEST_PYTHON or, from the workspace root, run \
         `python3 -m venv .venv && .venv/bin/pip install -r requirements-test.txt`",
        venv.display()
    );
    venv
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_openai_sdk_drives_the_gateway() {
    let python = python();
    let upstream = Upstream::start().await;
    let (gw, dir) = Gateway::standard(&upstream).await;
    let script = dir.write("e2e_openai.py", SCRIPT);
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&gw.url)
        .arg(KEY)
        .output()
        .await
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("openai sdk e2e ok"), "{stdout}");
    // The SDK really went through the gateway to the upstream.
    let paths: Vec<String> = upstream.recorded().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/embeddings"
        ]
    );
    assert_eq!(upstream.recorded()[1].body["stream"], json!(true));
}
