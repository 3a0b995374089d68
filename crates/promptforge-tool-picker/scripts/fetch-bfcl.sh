#!/bin/sh
# Fetch the Berkeley Function Calling Leaderboard data used to calibrate and measure the
# picker (third-party data, Apache-2.0, not committed). Prints the data directory.
#
#   crates/promptforge-tool-picker/scripts/fetch-bfcl.sh [DEST]   (default: target/bfcl)
set -eu
DEST="${1:-target/bfcl}"
VERSION="2026.3.23"
WHEEL="$DEST/dist/bfcl_eval-$VERSION-py3-none-any.whl"
mkdir -p "$DEST/dist"
if [ ! -f "$WHEEL" ]; then
    python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q \
        "bfcl-eval==$VERSION" -d "$DEST/dist" >&2
fi
python3 - "$WHEEL" "$DEST" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("bfcl_eval/data/") and name.endswith(".json"):
            z.extract(name, dest)
PY
echo "$DEST/bfcl_eval/data"
