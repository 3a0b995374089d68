#!/usr/bin/env bash
# The OTLP collector of the trace end-to-end test: Arize Phoenix from PyPI, pinned, in a
# virtual environment of its own cached per machine (it is large: ~850 MB, 2-3 minutes the
# first time). Prints the environment's python. Skips when already installed.
set -euo pipefail
version=20.26.1
dir="${PROMPTFORGE_PHOENIX_DIR:-$HOME/.cache/promptforge/phoenix-$version}"
if [ ! -f "$dir/ok" ]; then
  rm -rf "$dir.tmp"
  python3 -m venv "$dir.tmp"
  "$dir.tmp/bin/python" -m pip install --quiet --disable-pip-version-check "arize-phoenix==$version"
  touch "$dir.tmp/ok"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
echo "$dir/bin/python"
