#!/usr/bin/env bash
# web_fetch's article extraction against trafilatura and readability-lxml, on the same pages
# in one run. Builds the batch extractor (release) and installs the Python peers into their
# own venv under target/ (never CI's). Datasets are read where they lie; see compare.py -h.
#
#   crates/promptforge-webfetch/scripts/compare.sh \
#     --scrapinghub /data/article-extraction-benchmark \
#     --wcxb /data/web-content-extraction-benchmark --wcxb-split test \
#     --mozilla /data/readability
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

venv="$root/target/webfetch-compare/venv"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! cmp -s "$here/compare-requirements.txt" "$stamp" 2>/dev/null; then
  # pip 23's resolver fails on lxml's duplicated extras: a current pip first
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$here/compare-requirements.txt"
  cp "$here/compare-requirements.txt" "$stamp"
fi

cargo build --release --locked -p promptforge-webfetch --example extract_pages
exec "$venv/bin/python" "$here/compare.py" \
  --binary "$root/target/release/examples/extract_pages" \
  --out "$root/target/webfetch-compare" "$@"
