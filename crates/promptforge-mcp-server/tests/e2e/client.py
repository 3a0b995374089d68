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
from mcp import Client, StdioServerParameters
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

    # Input and output files.
    source = os.path.join(args.dir, "in.txt")
    with open(source, "w") as f:
        f.write("from a file")
    assert (await run(client, prompt="reader", input_text="inline"))["value"] == "read:inline"
    assert (await run(client, prompt="reader", input_file=source))["value"] == "read:from a file"
    data = await run(client, prompt="reader", input_file=source, input_text="x")
    assert data["status"] == "failed" and "mutually exclusive" in data["error"], data
    data = await run(client, prompt="echo", input_text="x")
    assert data["status"] == "failed" and "declares no input" in data["error"], data
    missing = os.path.join(args.dir, "missing.txt")
    data = await run(client, prompt="reader", input_file=missing)
    assert data["status"] == "failed" and missing in data["error"], data
    target = os.path.join(args.dir, "report.md")
    data = await run(client, prompt="writer", args="R", output_file=target)
    assert data["status"] == "completed", data
    with open(target) as f:
        assert f.read() == "report for R", target
    assert not [n for n in os.listdir(args.dir) if n.endswith(".tmp")]
    data = await run(client, prompt="echo", output_file=target)
    assert data["status"] == "failed" and "declares no output" in data["error"], data
    data = await run(client, prompt="writer", args="nofile", output_file=os.path.join(args.dir, "never.md"))
    assert data["status"] == "failed" and "out/report.md" in data["error"], data
    assert not os.path.exists(os.path.join(args.dir, "never.md"))

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

async def smoke(client, args):
    names = [t.name for t in (await client.list_tools()).tools]
    assert names[:3] == ["list_prompts", "run_prompt", "check_run"], names
    prompts = await listing(client)
    assert "echo" in prompts and prompts["echo"]["problem"] is None, prompts
    data = await run(client, prompt="echo", args="hello")
    assert data["status"] == "completed" and data["value"] == "hello", data


SCENARIOS = {"smoke": smoke, "basics": basics, "paging": paging, "deadline": deadline, "cancel": cancel, "reload": reload}


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
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
        server = streamable_http_client(args.url, http_client=http)
    with anyio.fail_after(240):
        async with Client(server, mode=args.mode) as client:
            print(f"connected: protocol {client.protocol_version}", file=sys.stderr)
            await SCENARIOS[args.scenario](client, args)
    print(f"{args.scenario} ({args.mode}): ok")


if __name__ == "__main__":
    anyio.run(main)
