#!/usr/bin/env bash
# The whole test suite: the same command on a fresh machine, a developer's and CI.
# Installs what the end-to-end tests need (a Python venv with the official client SDKs, the
# Claude Code and MCP Inspector CLIs, Neovim for the language server's editor test, a built
# llama-server and the SmolLM2 model, the last two cached per machine), then runs every Rust
# test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f requirements-test.txt ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
fi

# promptforge-mcp-server's client checks: Claude Code's CLI and the MCP Inspector CLI, pinned,
# installed into the git-ignored .tools/npm only when absent.
if command -v npm >/dev/null 2>&1 \
  && { [ ! -x .tools/npm/node_modules/.bin/claude ] || [ ! -x .tools/npm/node_modules/.bin/mcp-inspector ]; }; then
  mkdir -p .tools/npm
  npm install --prefix .tools/npm --no-audit --no-fund --loglevel=error \
    @anthropic-ai/claude-code@2.1.328 @modelcontextprotocol/inspector@2.12.0
fi

# promptforge-lsp's editor test drives a real Neovim: Debian's package (0.7.2 on Debian 12),
# installed only when absent.
if ! command -v nvim >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq neovim
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq neovim
  fi
fi

# Gateway local inference tests: a real llama-server and the SmolLM2 GGUF in the
# per-machine cache ~/.promptforge (both skip when already there; the first build takes
# 4-15 minutes on 2 cores).
scripts/build-llama-server.sh
scripts/fetch-smollm2.sh >/dev/null

cargo test --workspace --locked "$@"

# promptforge-core-tests' real-model scenarios: SmolLM2 through a real gateway (the binary
# is looked up beside the scenario runner, so build it in the same profile first).
cargo build -p promptforge-gateway --locked
cargo run -p promptforge-core-tests --locked -- scenarios
