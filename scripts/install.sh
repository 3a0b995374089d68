#!/usr/bin/env bash
# Installs every PromptForge binary into cargo's bin directory (~/.cargo/bin by default):
# promptforge, promptforge-gateway, and the MCP server, dev runner and language server where
# this checkout has them. Pass extra `cargo install` flags through, e.g. `scripts/install.sh --root DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."

for crate in promptforge-cli promptforge-gateway promptforge-mcp-server promptforge-dev promptforge-lsp; do
  if [ -d "crates/$crate" ]; then
    cargo install --locked --path "crates/$crate" "$@"
  fi
done
