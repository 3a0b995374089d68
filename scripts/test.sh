#!/usr/bin/env bash
# The whole test suite: the same command on a fresh machine, a developer's and CI.
# Installs what the end-to-end tests need (a Python venv with the official client SDKs),
# then runs every Rust test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f requirements-test.txt ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
fi

cargo test --workspace --locked "$@"
