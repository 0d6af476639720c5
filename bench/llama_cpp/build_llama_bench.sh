#!/usr/bin/env bash
# Builds llama-bench and llama-batched-bench, llama.cpp's own benchmark tools, against the
# prebuilt llama.cpp libraries that node-llama-cpp ships, from the llama.cpp source it
# bundles for the same release (node_modules/node-llama-cpp/llama/gitRelease.bundle).
# llama.cpp itself cannot be built here in reasonable time (its Vulkan shaders), and each
# tool is one or two files against its public API: ~10 s each.
#
# Output (git-ignored), each binary next to the libraries it loads (rpath $ORIGIN; llama.cpp
# also looks for its backends there):
#   bench/llama_cpp/llama-bench/     llama-bench and llama-batched-bench on the Vulkan build
#   bench/llama_cpp/llama-cpu/       llama-batched-bench on the CPU-only build (the same-run
#                                    peer of batched decode on lavapipe: bench/gpu/batch_bench.py
#                                    --llama-batched-bench)
# They need no Node, so bench/gpu/gpu_prepare.sh packs llama-bench/ for the lent GPU
# machines, where node does not travel.
# Needs `npm install --omit=optional --ignore-scripts` in bench/llama_cpp first, and g++.
# Usage: bench/llama_cpp/build_llama_bench.sh  (prints the paths of what it built)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$here/node_modules/node-llama-cpp/llama/gitRelease.bundle
bins=$(ls -d "$here"/node_modules/@node-llama-cpp/linux-x64-vulkan/bins/*/ 2>/dev/null | head -1)
if [ ! -f "$bundle" ] || [ -z "$bins" ]; then
  echo "build_llama_bench: node-llama-cpp is not installed: cd $here && npm install --omit=optional --ignore-scripts" >&2
  exit 2
fi

src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git clone -q "$bundle" "$src/llama.cpp" 2>/dev/null
# build_tool OUT_DIR BINS_DIR NAME SOURCES...: NAME linked against the libraries of BINS_DIR,
# copied into OUT_DIR. node-llama-cpp names libllama and libggml after its build
# (libllama.vulkan.v0.5.0.so); they are linked by file name, which is also their soname.
l=$src/llama.cpp
build_tool() {
  local out=$1 libs=$2 name=$3
  shift 3
  mkdir -p "$out"
  cp -n "$libs"/*.so "$out/"
  local libllama libggml
  libllama=$(cd "$out" && ls libllama.*.so | head -1)
  libggml=$(cd "$out" && ls libggml.*.so | head -1)
  g++ -O2 -DNDEBUG -std=c++17 -I"$l/include" -I"$l/ggml/include" -I"$l/common" -I"$l/vendor" "$@" \
    -L"$out" -l:"$libllama" -l:"$libggml" -lggml-base -lllama-common -Wl,-rpath,'$ORIGIN' \
    -o "$out/$name"
  echo "$out/$name"
}

rm -rf "$here/llama-bench" "$here/llama-cpu"
build_tool "$here/llama-bench" "$bins" llama-bench "$l/tools/llama-bench/llama-bench.cpp" "$l/tools/llama-bench/main.cpp"
"$here/llama-bench/llama-bench" --version 2>&1 | grep -m1 -i "version" >&2 || true
build_tool "$here/llama-bench" "$bins" llama-batched-bench "$l/tools/batched-bench/batched-bench.cpp" "$l/tools/batched-bench/main.cpp"
cpu_bins=$(ls -d "$here"/node_modules/@node-llama-cpp/linux-x64/bins/*/ 2>/dev/null | head -1)
if [ -n "$cpu_bins" ]; then
  build_tool "$here/llama-cpu" "$cpu_bins" llama-batched-bench "$l/tools/batched-bench/batched-bench.cpp" "$l/tools/batched-bench/main.cpp"
fi
