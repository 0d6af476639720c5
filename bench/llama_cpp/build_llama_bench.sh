#!/usr/bin/env bash
# Builds llama-bench, llama.cpp's own benchmark tool, against the prebuilt llama.cpp Vulkan
# libraries that node-llama-cpp ships, from the llama.cpp source it bundles for the same
# release (node_modules/node-llama-cpp/llama/gitRelease.bundle). llama.cpp itself cannot be
# built here in reasonable time (its Vulkan shaders), and llama-bench is one file against
# its public API: ~10 s.
#
# Output: bench/llama_cpp/llama-bench/ (git-ignored), the binary next to the libraries it
# loads (rpath $ORIGIN; llama.cpp also looks for its backends there). It needs no Node, so
# bench/gpu/gpu_prepare.sh packs it for the lent GPU machines, where node does not travel.
# Needs `npm install --omit=optional --ignore-scripts` in bench/llama_cpp first, and g++.
# Usage: bench/llama_cpp/build_llama_bench.sh
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
out=$here/llama-bench
rm -rf "$out"
mkdir -p "$out"
cp "$bins"/*.so "$out/"
# node-llama-cpp names libllama and libggml after its build (libllama.vulkan.v0.5.0.so);
# link them by file name, which is also their soname.
libllama=$(cd "$out" && ls libllama.*.so | head -1)
libggml=$(cd "$out" && ls libggml.*.so | head -1)
l=$src/llama.cpp
g++ -O2 -DNDEBUG -std=c++17 -I"$l/include" -I"$l/ggml/include" -I"$l/common" -I"$l/vendor" \
  "$l/tools/llama-bench/llama-bench.cpp" "$l/tools/llama-bench/main.cpp" \
  -L"$out" -l:"$libllama" -l:"$libggml" -lggml-base -lllama-common -Wl,-rpath,'$ORIGIN' \
  -o "$out/llama-bench"
"$out/llama-bench" --version 2>&1 | grep -m1 -i "version" >&2 || true
echo "$out/llama-bench"
