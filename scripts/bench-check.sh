#!/usr/bin/env bash
# `promptforge check` over 1,000 prompts: the shipped examples copied round-robin into a
# temporary tree (ten directories of 100), timed with hyperfine (apt package `hyperfine`).
#   scripts/bench-check.sh [PROMPTFORGE_BINARY]   (default: target/release/promptforge)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/promptforge}"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
sources=(prompts/*.md)
for i in $(seq 0 999); do
  dir="$tree/d$((i / 100))"
  mkdir -p "$dir"
  cp "${sources[$((i % ${#sources[@]}))]}" "$dir/p$i.md"
done
"$bin" check "$tree" | tail -1
hyperfine --warmup 2 --runs 10 "$bin check $tree"
