"""End-to-end scenarios against promptforge-mcp-server with the official `mcp` Python SDK.

Driven by tests/e2e.rs, which prepares the prompts, the configuration, a scripted
OpenAI-compatible upstream on loopback and (for HTTP) the running server.

    client.py SCENARIO --mode auto|legacy (--stdio COMMAND ARG... | --url URL --token TOKEN)
              [--upstream URL] [--dir DIR]

Exits 0 when every check of the scenario holds; an AssertionError names the one that did not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

# Bound every wait: a scenario must fail, never hang.
STEP_TIMEOUT = 60


def upstream(args, path, method="GET"):
    request = urllib.request.Request(args.upstream + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def record(result):
    assert result.structured_content is not None, result
    data = result.structured_content
    assert sorted(data) == ["elapsed_ms", "error", "prompt", "run_id", "status", "turns", "value"], data
    assert len(result.content) == 1 and json.loads(result.content[0].text) == data, result.content
    assert result.is_error == (data["status"] == "failed"), result
    if data["status"] == "running":
        assert data["value"] is None and data["error"] is None, data
    return data


async def expect_error(call, code):
    try:
        await call
    except MCPError as error:
        assert error.error.code == code, (error.error.code, error.error.message)
        return error.error.message
    raise AssertionError(f"expected a JSON-RPC error {code}")


async def run(client, **arguments):
    return record(await client.call_tool("run_prompt", arguments))


async def poll(client, run_id, want="completed"):
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        data = record(await client.call_tool("check_run", {"run_id": run_id}))
        if data["status"] != "running":
            assert data["status"] == want, data
            return data
        await anyio.sleep(0.05)
    raise AssertionError(f"run {run_id} still running")


async def listing(client):
    result = await client.call_tool("list_prompts", {})
    assert not result.is_error, result
    return {p["name"]: p for p in result.structured_content["prompts"]}


async def wait_listing(client, predicate, what):
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        prompts = await listing(client)
        if predicate(prompts):
            return prompts
        await anyio.sleep(0.05)
    raise AssertionError(f"the catalog never showed {what}")


async def basics(client, args):
    tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    picker = os.environ.get("PF_PICKER", "1") == "1"
    assert names == ["list_prompts", "run_prompt", "check_run"] + (["need_prompt"] if picker else []), names
    for tool in tools:
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object", tool
    run_schema = next(t for t in tools if t.name == "run_prompt").input_schema
    assert run_schema["required"] == ["prompt"], run_schema

    prompts = await listing(client)
    assert {"echo", "greet", "steps", "reader", "writer"} <= set(prompts), prompts
    assert prompts["reader"]["input"] == {"path": "input.md", "description": "The text to read"}, prompts
    assert prompts["writer"]["output"] == {"path": "out/report.md", "description": "The report"}, prompts
    assert prompts["echo"]["problem"] is None and "input" not in prompts["echo"], prompts

    # Progress: 0 with the prompt's name, then one frame per section entered, in order.
    frames = []

    async def on_progress(progress, total, message):
        frames.append((progress, total, message))

    result = await client.call_tool("run_prompt", {"prompt": "steps", "args": "x"}, progress_callback=on_progress)
    data = record(result)
    assert data["status"] == "completed" and data["value"] == "two:x", data
    assert frames == [(0, None, "steps"), (1, None, "## One"), (2, None, "## Two")], frames

    # A model call through the scripted upstream, and name folding.
    data = await run(client, prompt="Greet", args="World")
    assert data == {**data, "prompt": "greet", "status": "completed", "value": "Echo: Hello, World!", "turns": 1}, data
    again = record(await client.call_tool("check_run", {"run_id": data["run_id"]}))
    assert again == data, (again, data)
    data = await run(client, prompt="ECHO", args="same")
    assert data["value"] == "same", data

    # A name that resolves to nothing lists every enabled name, nearest first.
    data = await run(client, prompt="stepz")
    assert data["status"] == "failed" and data["value"] is None, data
    assert "no prompt is named `stepz`" in data["error"], data
    listed = data["error"].split("nearest first: ")[1].split(", ")
    assert listed[0] == "steps" and set(listed) == set(prompts), listed

    # Input and output files, inside [files] allowed_dirs (the fixture's files/).
    files = os.path.join(args.dir, "files")
    source = os.path.join(files, "in.txt")
    with open(source, "w") as f:
        f.write("from a file")
    assert (await run(client, prompt="reader", input_text="inline"))["value"] == "read:inline"
    assert (await run(client, prompt="reader", input_file=source))["value"] == "read:from a file"
    data = await run(client, prompt="reader", input_file=source, input_text="x")
    assert data["status"] == "failed" and "mutually exclusive" in data["error"], data
    data = await run(client, prompt="echo", input_text="x")
    assert data["status"] == "failed" and "declares no input" in data["error"], data
    missing = os.path.join(files, "missing.txt")
    data = await run(client, prompt="reader", input_file=missing)
    assert data["status"] == "failed" and missing in data["error"], data
    target = os.path.join(files, "report.md")
    data = await run(client, prompt="writer", args="R", output_file=target)
    assert data["status"] == "completed", data
    with open(target) as f:
        assert f.read() == "report for R", target
    assert not [n for n in os.listdir(files) if n.endswith(".tmp")]
    data = await run(client, prompt="echo", output_file=target)
    assert data["status"] == "failed" and "declares no output" in data["error"], data
    data = await run(client, prompt="writer", args="nofile", output_file=os.path.join(files, "never.md"))
    assert data["status"] == "failed" and "out/report.md" in data["error"], data
    assert not os.path.exists(os.path.join(files, "never.md"))
    await file_attacks(client, args, files)

    # check_run for an unknown id is a result that says so.
    data = record(await client.call_tool("check_run", {"run_id": "0" * 32}))
    assert data["status"] == "failed" and "no run has the id" in data["error"], data

    # Bad argument shapes are -32602, unknown tools -32601.
    await expect_error(client.call_tool("run_prompt", {}), -32602)
    await expect_error(client.call_tool("run_prompt", {"prompt": 3}), -32602)
    await expect_error(client.call_tool("run_prompt", {"prompt": "echo", "extra": "x"}), -32602)
    await expect_error(client.call_tool("list_prompts", {"cursor": "not-a-cursor"}), -32602)
    await expect_error(client.call_tool("echo", {}), -32601)
    if not picker:
        await expect_error(client.call_tool("need_prompt", {"capability": "x"}), -32601)
        return

    # The index is built in the background after boot: wait for it (bounded).
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        result = await client.call_tool("need_prompt", {"capability": "Repeat a greeting for a person's name."})
        if "still being built" not in result.structured_content.get("unavailable", ""):
            break
        assert time.monotonic() < deadline, "the retrieval index was never built"
        await anyio.sleep(0.05)
    assert "unavailable" not in result.structured_content, result.structured_content
    candidates = result.structured_content["prompts"]
    assert 1 <= len(candidates) <= 3, candidates
    assert candidates[0]["name"] == "greet", candidates
    await expect_error(client.call_tool("need_prompt", {}), -32602)


async def file_attacks(client, args, files):
    # Issue 38: what the server reads and writes for a call stays inside the allowed
    # directories, is a regular file, is read bounded, and never blocks the server.
    for path in ["/proc/self/environ", "/dev/zero", os.path.join(args.dir, "prompts.env")]:
        data = await run(client, prompt="reader", input_file=path)
        assert data["status"] == "failed" and "is outside [files] allowed_dirs" in data["error"], data
    link = os.path.join(files, "env-link")
    os.symlink(os.path.join(args.dir, "prompts.env"), link)
    data = await run(client, prompt="reader", input_file=link)
    assert data["status"] == "failed" and "is outside" in data["error"], data
    data = await run(client, prompt="writer", args="R", output_file=link)
    assert data["status"] == "failed" and "a symbolic link" in data["error"], data
    assert os.path.islink(link) and "PF_TEST_MCP_KEY" in open(os.path.join(args.dir, "prompts.env")).read()
    os.remove(link)
    data = await run(client, prompt="writer", args="R", output_file=os.path.join(args.dir, "prompts.toml"))
    assert data["status"] == "failed" and "is outside" in data["error"], data
    # A FIFO with no writer: refused at once, and more of them at once than the server has
    # worker threads leave it answering (opening one used to block a runtime thread).
    fifo = os.path.join(files, "pipe")
    os.mkfifo(fifo)
    failures = []

    async def fifo_call():
        failures.append(await run(client, prompt="reader", input_file=fifo))

    with anyio.fail_after(STEP_TIMEOUT):
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(fifo_call)
    assert len(failures) == 4 and all(d["status"] == "failed" and "a FIFO" in d["error"] for d in failures), failures
    if args.url:
        health = args.url.rsplit("/mcp", 1)[0] + "/healthz"
        with urllib.request.urlopen(health, timeout=10) as response:
            assert json.loads(response.read()) == {"status": "ok"}
    assert (await run(client, prompt="echo", args="still here"))["value"] == "still here"
    os.remove(fifo)


ROOTS = []


async def list_roots(context):
    return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in ROOTS])


def file_uri(path):
    return "file://" + urllib.request.pathname2url(path)


async def roots_scenario(client, args):
    # The client's roots bound the files (and [files] allowed_dirs, files/, bounds them too).
    files = os.path.join(args.dir, "files")
    a = os.path.join(files, "project a")
    b = os.path.join(files, "b")
    for d in (a, b):
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "in.txt"), "w") as f:
            f.write("in " + os.path.basename(d))
    ROOTS[:] = [file_uri(a)]
    data = await run(client, prompt="reader", input_file=os.path.join(a, "in.txt"))
    assert data["value"] == "read:in project a", data
    for path in [os.path.join(b, "in.txt"), "/proc/self/environ"]:
        data = await run(client, prompt="reader", input_file=path)
        assert data["status"] == "failed" and "outside the client's MCP roots" in data["error"], data
    link = os.path.join(a, "escape")
    os.symlink(os.path.join(b, "in.txt"), link)
    data = await run(client, prompt="reader", input_file=link)
    assert data["status"] == "failed" and "outside the client's MCP roots" in data["error"], data
    data = await run(client, prompt="writer", args="R", output_file=os.path.join(a, "out.md"))
    assert data["status"] == "completed", data
    # A root outside [files] allowed_dirs admits nothing the operator did not allow.
    ROOTS[:] = [file_uri(args.dir)]
    await client.send_roots_list_changed()
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        data = await run(client, prompt="reader", input_file=os.path.join(b, "in.txt"))
        if data["status"] == "completed":
            break
        assert time.monotonic() < deadline, ("the changed roots were never listed again", data)
        await anyio.sleep(0.05)
    assert data["value"] == "read:in b", data
    data = await run(client, prompt="reader", input_file=os.path.join(args.dir, "prompts.env"))
    assert data["status"] == "failed" and "outside [files] allowed_dirs" in data["error"], data


async def paging(client, args):
    result = await client.call_tool("list_prompts", {})
    first = result.structured_content
    assert len(first["prompts"]) == 100 and first["next_cursor"] == "100", first.get("next_cursor")
    result = await client.call_tool("list_prompts", {"cursor": first["next_cursor"]})
    second = result.structured_content
    assert len(second["prompts"]) == 5 and "next_cursor" not in second, second
    names = [p["name"] for p in first["prompts"] + second["prompts"]]
    assert names == sorted(names) and len(set(names)) == 105, names


async def deadline(client, args):
    # The upstream holds "SLOW" requests until released: the call outlives reply_deadline.
    data = await run(client, prompt="greet", args="SLOW")
    assert data["status"] == "running" and data["turns"] == 0, data
    assert (await poll_once(client, data["run_id"]))["status"] == "running"
    # A second run finds the only slot busy and is refused with the configured duration.
    busy = await run(client, prompt="echo", args="x")
    assert busy["status"] == "failed", busy
    assert busy["error"] == "every run slot is busy and none came free within 300ms. Retry in a moment.", busy
    upstream(args, "/control/release", "POST")
    done = await poll(client, data["run_id"])
    assert done["value"] == "Echo: Hello, SLOW!" and done["turns"] == 1, done
    assert upstream(args, "/control/stats")["cancelled"] == 0


async def poll_once(client, run_id):
    return record(await client.call_tool("check_run", {"run_id": run_id}))


async def cancel(client, args):
    # Cancelling an attached call (notifications/cancelled) cancels its run.
    with anyio.move_on_after(STEP_TIMEOUT) as scope:
        async with anyio.create_task_group() as group:
            async def call():
                await client.call_tool("run_prompt", {"prompt": "greet", "args": "SLOW"})

            group.start_soon(call)
            while upstream(args, "/control/stats")["waiting"] == 0:
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()
    assert not scope.cancelled_caught, "the slow call never reached the upstream"
    deadline = time.monotonic() + STEP_TIMEOUT
    while upstream(args, "/control/stats")["cancelled"] == 0:
        assert time.monotonic() < deadline, "the run was never cancelled"
        await anyio.sleep(0.02)
    # The server still answers, and the slot came free.
    assert (await run(client, prompt="echo", args="after"))["value"] == "after"


async def reload(client, args):
    prompts_dir = os.path.join(args.dir, "prompts")
    fresh = os.path.join(prompts_dir, "fresh.md")
    with open(fresh, "w") as f:
        f.write(PROMPT.format(name="fresh", description="A prompt saved after the client connected", body="return 'fresh:' .. args"))
    await wait_listing(client, lambda p: "fresh" in p and p["fresh"]["problem"] is None, "the new prompt")
    assert (await run(client, prompt="fresh", args="1"))["value"] == "fresh:1"
    # A broken edit keeps the prompt listed with its problem.
    with open(fresh, "w") as f:
        f.write("---\nname: fresh\ndescription: now broken\npromptforge: 1\nnope: 1\n---\n# T\n")
    await wait_listing(client, lambda p: p.get("fresh", {}).get("problem"), "the broken prompt's problem")
    data = await run(client, prompt="fresh")
    assert data["status"] == "failed" and "nope" in data["error"], data
    if os.environ.get("PF_PICKER", "1") == "1":
        result = await client.call_tool("need_prompt", {"capability": "now broken"})
        assert all(c["name"] != "fresh" for c in result.structured_content["prompts"]), result
    # A deleted file leaves the catalog.
    os.remove(fresh)
    await wait_listing(client, lambda p: "fresh" not in p, "the deleted prompt gone")
    # prompts.toml's [prompts.*] re-resolves the catalog too.
    toml = os.path.join(args.dir, "prompts.toml")
    with open(toml) as f:
        original = f.read()
    with open(toml, "w") as f:
        f.write(original + "\n[prompts.echo]\nenabled = false\n")
    await wait_listing(client, lambda p: "echo" not in p, "echo disabled")
    with open(toml, "w") as f:
        f.write(original)
    await wait_listing(client, lambda p: "echo" in p, "echo back")


PROMPT = "---\nname: {name}\ndescription: {description}\npromptforge: 1\n---\n\n# T\n\n```lua\n{body}\n```\n"

# Log messages (notifications/message) each client received, by client label.
LOGS = {}


def log_collector(label):
    LOGS[label] = []

    async def on_log(params):
        LOGS[label].append(params)

    return on_log


def logs_of(label, run_id):
    return [m for m in LOGS[label] if isinstance(m.data, dict) and m.data.get("run_id") == run_id]


async def wait_logs(label, run_id, count, what):
    deadline = time.monotonic() + STEP_TIMEOUT
    while len(logs_of(label, run_id)) < count:
        assert time.monotonic() < deadline, f"{what}: got {logs_of(label, run_id)}"
        await anyio.sleep(0.02)
    return logs_of(label, run_id)


def write_prompts(args, prompts):
    for name, body in prompts.items():
        with open(os.path.join(args.dir, "prompts", f"{name}.md"), "w") as f:
            f.write(PROMPT.format(name=name, description=f"The {name} test prompt", body=body))


LOGGING_PROMPTS = {
    "logger": 'log("checkpoint one")\nlog("checkpoint two")\nreturn "logged"',
    "failing": 'log("about to fail")\nerror("it broke")',
}


async def logging_scenario(client, args):
    # A run's log() checkpoints (info) and its failure (error) reach the client that started
    # it as notifications/message, naming the run; logging/setLevel filters them.
    await wait_listing(client, lambda p: "logger" in p and "failing" in p, "the logging prompts")
    data = await run(client, prompt="logger", args="x")
    assert data["value"] == "logged", data
    logs = await wait_logs("main", data["run_id"], 2, "the two checkpoints")
    assert [(m.level, m.logger, m.data["message"], m.data["prompt"], m.data["section"]) for m in logs] == [
        ("info", "promptforge", "checkpoint one", "logger", "# T"),
        ("info", "promptforge", "checkpoint two", "logger", "# T"),
    ], logs
    failed = await run(client, prompt="failing")
    assert failed["status"] == "failed", failed
    logs = await wait_logs("main", failed["run_id"], 2, "the checkpoint and the failure")
    assert [m.level for m in logs] == ["info", "error"], logs
    assert logs[0].data["message"] == "about to fail" and "it broke" in logs[1].data["error"], logs
    if args.mode == "legacy":
        # At `error`, checkpoints stop and failures still arrive.
        await client.set_logging_level("error")
        quiet = await run(client, prompt="logger", args="y")
        again = await run(client, prompt="failing")
        logs = await wait_logs("main", again["run_id"], 1, "the failure at level error")
        assert [m.level for m in logs] == ["error"], logs
        assert logs_of("main", quiet["run_id"]) == [], LOGS["main"]
        await client.set_logging_level("info")
    if args.url:
        # Another client of the same server never sees this client's messages.
        async with Client(http_server(args), mode=args.mode, logging_callback=log_collector("other"), log_level="info") as other:
            mine = await run(client, prompt="logger", args="mine")
            theirs = record(await other.call_tool("run_prompt", {"prompt": "logger", "args": "theirs"}))
            await wait_logs("other", theirs["run_id"], 2, "the other client's own checkpoints")
            await wait_logs("main", mine["run_id"], 2, "this client's checkpoints")
            assert {m.data["run_id"] for m in LOGS["other"]} == {theirs["run_id"]}, LOGS["other"]
            assert theirs["run_id"] not in {m.data["run_id"] for m in LOGS["main"]}, LOGS["main"]


async def drop(client, args):
    # The client goes away in the middle of an attached call: no resume follows, so after
    # the server's resume_grace the run is cancelled (checked by `after_drop`).
    async with anyio.create_task_group() as group:
        group.start_soon(client.call_tool, "run_prompt", {"prompt": "greet", "args": "SLOW"})
        while upstream(args, "/control/stats")["waiting"] == 0:
            await anyio.sleep(0.02)
        print(f"drop ({args.mode}): ok", flush=True)
        os._exit(0)


async def after_drop(client, args):
    deadline = time.monotonic() + STEP_TIMEOUT
    while upstream(args, "/control/stats")["cancelled"] == 0:
        assert time.monotonic() < deadline, "the dropped client's run was never cancelled"
        await anyio.sleep(0.05)
    assert upstream(args, "/control/stats")["waiting"] == 0
    # The run's slot came free.
    assert (await run(client, prompt="echo", args="after"))["value"] == "after"


class CutFirstCall(httpx2.AsyncBaseTransport):
    """Cuts the first tools/call response stream after its first event, as a dropped
    connection would; the SDK then resumes it with Last-Event-ID."""

    def __init__(self):
        self.inner = httpx2.AsyncHTTPTransport()
        self.cut = False
        self.resumed = False

    async def handle_async_request(self, request):
        if request.method == "GET" and request.headers.get("last-event-id"):
            self.resumed = True
        body = await request.aread() if request.method == "POST" else b""
        response = await self.inner.handle_async_request(request)
        if self.cut or b'"tools/call"' not in body:
            return response
        self.cut = True
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=CutStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self):
        await self.inner.aclose()


class CutStream(httpx2.AsyncByteStream):
    def __init__(self, inner):
        self.inner = inner

    async def __aiter__(self):
        seen = b""
        async for chunk in self.inner:
            yield chunk
            seen += chunk
            if b"\n\n" in seen:
                break
        await self.inner.aclose()
        raise httpx2.ReadError("the test cut the connection")

    async def aclose(self):
        await self.inner.aclose()


CUT = CutFirstCall()


async def resume(client, args):
    # The call's stream drops; the SDK resumes it with Last-Event-ID after the server's
    # retry hint, within resume_grace: the run goes on, and its answer arrives.
    grace = float(os.environ["PF_RESUME_GRACE_S"])
    result = {}
    async with anyio.create_task_group() as group:
        async def call():
            result["data"] = record(await client.call_tool("run_prompt", {"prompt": "greet", "args": "SLOW"}))

        group.start_soon(call)
        deadline = time.monotonic() + STEP_TIMEOUT
        while not (CUT.cut and CUT.resumed and upstream(args, "/control/stats")["waiting"] == 1):
            assert time.monotonic() < deadline, (CUT.cut, CUT.resumed)
            await anyio.sleep(0.02)
        # Longer than the grace period: a resumed call is never cancelled.
        await anyio.sleep(grace + 1)
        assert upstream(args, "/control/stats")["cancelled"] == 0
        upstream(args, "/control/release", "POST")
    data = result["data"]
    assert data["status"] == "completed" and data["value"] == "Echo: Hello, SLOW!", data


async def background(client, args):
    # A run past reply_deadline was handed its run id: its client going away cancels nothing.
    data = await run(client, prompt="greet", args="SLOW")
    assert data["status"] == "running", data
    with open(os.path.join(args.dir, "background.run"), "w") as f:
        f.write(data["run_id"])
    print(f"background ({args.mode}): ok", flush=True)
    os._exit(0)


async def after_background(client, args):
    with open(os.path.join(args.dir, "background.run")) as f:
        run_id = f.read()
    await anyio.sleep(float(os.environ["PF_RESUME_GRACE_S"]) + 1)
    assert upstream(args, "/control/stats")["cancelled"] == 0
    assert (await poll_once(client, run_id))["status"] == "running"
    upstream(args, "/control/release", "POST")
    done = await poll(client, run_id)
    assert done["value"] == "Echo: Hello, SLOW!", done

async def smoke(client, args):
    names = [t.name for t in (await client.list_tools()).tools]
    assert names[:3] == ["list_prompts", "run_prompt", "check_run"], names
    prompts = await listing(client)
    assert "echo" in prompts and prompts["echo"]["problem"] is None, prompts
    data = await run(client, prompt="echo", args="hello")
    assert data["status"] == "completed" and data["value"] == "hello", data


SCENARIOS = {
    "smoke": smoke,
    "basics": basics,
    "paging": paging,
    "deadline": deadline,
    "cancel": cancel,
    "reload": reload,
    "logging": logging_scenario,
    "drop": drop,
    "after_drop": after_drop,
    "resume": resume,
    "background": background,
    "after_background": after_background,
    "roots": roots_scenario,
}


def http_server(args, transport=None):
    headers = {"Authorization": f"Bearer {args.token}"}
    if transport is None:
        http = create_mcp_http_client(headers=headers)
    else:
        http = httpx2.AsyncClient(
            headers=headers,
            transport=transport,
            timeout=httpx2.Timeout(30.0, read=300.0),
        )
    return streamable_http_client(args.url, http_client=http)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--stdio", nargs=argparse.REMAINDER)
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--upstream")
    parser.add_argument("--dir")
    parser.add_argument("--server-json", help="one mcpServers entry, launched as a client would")
    args = parser.parse_args()
    if args.server_json:
        entry = json.loads(args.server_json)
        if "url" in entry:
            http = create_mcp_http_client(headers=entry.get("headers", {}))
            server = streamable_http_client(entry["url"], http_client=http)
        else:
            server = StdioServerParameters(command=entry["command"], args=entry.get("args", []), env=entry.get("env"))
    elif args.stdio:
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:], env=dict(os.environ), cwd=args.dir)
    else:
        server = http_server(args, CUT if args.scenario == "resume" else None)
    if args.scenario == "logging":
        write_prompts(args, LOGGING_PROMPTS)
    options = {}
    if args.scenario == "roots":
        options = {"list_roots_callback": list_roots}
    if args.scenario == "logging":
        # Handshake-era connections get logs per logging/setLevel (info until set); a
        # 2026-07-28 connection opts in per request (log_level stamps every request's _meta).
        options = {"logging_callback": log_collector("main"), "log_level": "info"}
    with anyio.fail_after(240):
        async with Client(server, mode=args.mode, **options) as client:
            print(f"connected: protocol {client.protocol_version}", file=sys.stderr)
            await SCENARIOS[args.scenario](client, args)
    print(f"{args.scenario} ({args.mode}): ok")


if __name__ == "__main__":
    anyio.run(main)
