#!/usr/bin/env bash
# From a fresh checkout to a model-backed prompt, in one command:
#   scripts/try-local.sh [PROMPT [INPUT]]      (default: prompts/greet.md "World")
# 1. builds llama-server and fetches Qwen2.5-Coder 0.5B into ~/.promptforge (each skipped
#    when already there; the first llama-server build takes 4-15 minutes on 2 cores);
# 2. builds the CLI and the gateway (debug profile, like `cargo run`);
# 3. starts the gateway with profiles/local.toml on a free loopback port with a one-time key,
#    waits until it lists the model (bounded by TRY_LOCAL_READY_SECS, default 180 s);
# 4. runs the prompt against it (`promptforge run PROMPT INPUT`), prints the result;
# 5. stops the gateway (which stops its llama-server child) on exit, also on Ctrl-C.
# The gateway's log goes to a temporary file, printed if it fails to become ready.
set -euo pipefail
cd "$(dirname "$0")/.."

PROMPT="${1:-prompts/greet.md}"
INPUT="${2-World}"
READY_SECS="${TRY_LOCAL_READY_SECS:-180}"
MODEL="qwen2.5-coder-0.5b"

if [ -n "${PROMPTFORGE_CACHE_DIR:-}" ] && [ "$PROMPTFORGE_CACHE_DIR" != "$HOME/.promptforge" ]; then
  echo "try-local: profiles/local.toml reads the default cache ~/.promptforge; unset PROMPTFORGE_CACHE_DIR" >&2
  exit 2
fi
if [ ! -f "$PROMPT" ]; then
  echo "try-local: no prompt file $PROMPT" >&2
  exit 2
fi

scripts/build-llama-server.sh >&2
scripts/fetch-qwen-coder.sh >/dev/null
cargo build --locked --quiet -p promptforge-cli -p promptforge-gateway
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
BIN="$TARGET_DIR/debug"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/try-local.XXXXXX")"
GATEWAY_PID=""
cleanup() {
  if [ -n "$GATEWAY_PID" ] && kill -0 "$GATEWAY_PID" 2>/dev/null; then
    kill -TERM "$GATEWAY_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$GATEWAY_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$GATEWAY_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

KEY="try-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# The process environment wins over gateway.env: port 0 (the kernel picks a free one) and
# a key that lives as long as this script.
PROMPTFORGE_GATEWAY_BIND=127.0.0.1:0 PROMPTFORGE_GATEWAY_API_KEY="$KEY" RUST_LOG=warn \
  "$BIN/promptforge-gateway" serve gateway.toml --profile local >"$WORK/gateway.out" 2>"$WORK/gateway.log" &
GATEWAY_PID=$!

# Whether the gateway at $1 lists $MODEL (python3 is already needed by the fetch scripts).
listed() {
  python3 - "$1" "$KEY" "$MODEL" <<'PYEOF' 2>/dev/null
import json, sys, urllib.request
url, key, model = sys.argv[1:4]
request = urllib.request.Request(url + "/v1/models", headers={"Authorization": "Bearer " + key})
with urllib.request.urlopen(request, timeout=10) as response:
    ids = [m.get("id") for m in json.load(response).get("data", [])]
sys.exit(0 if model in ids else 1)
PYEOF
}

URL=""
deadline=$((SECONDS + READY_SECS))
while [ $SECONDS -lt $deadline ]; do
  if ! kill -0 "$GATEWAY_PID" 2>/dev/null; then
    echo "try-local: the gateway exited:" >&2
    cat "$WORK/gateway.log" >&2
    exit 1
  fi
  if [ -z "$URL" ]; then
    URL="$(sed -n 's/^listening on //p' "$WORK/gateway.out" | head -n 1)"
  fi
  if [ -n "$URL" ] && listed "$URL"; then
    break
  fi
  sleep 0.5
done
if [ -z "$URL" ] || ! listed "$URL"; then
  echo "try-local: the gateway was not ready within ${READY_SECS}s:" >&2
  cat "$WORK/gateway.log" >&2
  exit 1
fi

echo "try-local: gateway $URL serving $MODEL; running $PROMPT" >&2
PROMPTFORGE_GATEWAY_URL="$URL" PROMPTFORGE_GATEWAY_API_KEY="$KEY" "$BIN/promptforge" run "$PROMPT" "$INPUT"
