#!/usr/bin/env python3
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
def arg(name):
    return args[args.index(name) + 1] if name in args else None

alias = arg("--alias") or ""
if alias.startswith("broken"):
    print(f"stand-in llama-server: model {alias} cannot be loaded", file=sys.stderr, flush=True)
    sys.exit(1)
port = int(arg("--port"))
with open(arg("--api-key-file")) as f:
    key = f.read().strip()

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if self.headers.get("authorization") == f"Bearer {key}":
            return True
        self.reply(401, {"error": {"message": "unauthorized"}})
        return False

    def do_GET(self):
        if self.path == "/health":
            self.reply(200, {"status": "ok"})
        elif self.authorized():
            self.reply(200, {"chat_template": "{% for tool in tools %}{{ tool }}{% endfor %}"})

    def do_POST(self):
        if not self.authorized():
            return
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        said = str(body.get("messages", [{}])[-1].get("content", ""))
        if said.startswith("wait:"):
            deadline = time.time() + 30
            while not os.path.exists(said[5:]) and time.time() < deadline:
                time.sleep(0.02)
        content = f"{alias} on {port}"
        if said == "tools?":
            names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
            content = json.dumps({"tools": names, "tool_choice": body.get("tool_choice", "absent")})
        self.reply(200, {
            "id": "stand-in", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        })

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
