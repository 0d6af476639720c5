#!/usr/bin/env bash
# Builds llama.cpp's llama-quantize and llama-tokenize against the prebuilt llama.cpp
# libraries that npm's node-llama-cpp ships, from the llama.cpp source it bundles
# (llama/gitRelease.bundle, which also holds gguf-py), for tools/make_gguf_fixtures.py. Everything goes under DIR
# (~700 MB with the npm packages; keep it out of the repository, e.g. /tmp/llama):
#   DIR/node_modules/  node-llama-cpp 3.22.1 (bench/llama_cpp/package.json)
#   DIR/llama.cpp/     the bundled source (gguf-py/, convert_hf_to_gguf.py, ...)
#   DIR/bin/           llama-quantize and llama-tokenize next to the libraries they load (rpath $ORIGIN)
# Usage: tools/build_llama_quantize.sh DIR     (needs npm, git, g++; ~1 min)
set -euo pipefail
dir=$(mkdir -p "${1:?usage: build_llama_quantize.sh DIR}" && cd "$1" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -f "$dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" ]; then
  cp "$here/bench/llama_cpp/package.json" "$dir/"
  (cd "$dir" && npm install --omit=optional --ignore-scripts >/dev/null)
fi
[ -d "$dir/llama.cpp" ] || git clone -q "$dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$dir/llama.cpp" 2>/dev/null
bins=$(ls -d "$dir"/node_modules/@node-llama-cpp/linux-x64/bins/*/ | head -1)
mkdir -p "$dir/bin"
cp "$bins"/*.so "$dir/bin/"
libllama=$(cd "$dir/bin" && ls libllama.*.so | head -1)
libggml=$(cd "$dir/bin" && ls libggml.*.so | head -1)
l=$dir/llama.cpp
build() {  # build NAME SOURCES...
  local name=$1
  shift
  g++ -O1 -std=c++17 -I"$l/include" -I"$l/ggml/include" -I"$l/common" -I"$l/vendor" "$@" \
    -L"$dir/bin" -l:"$libllama" -l:"$libggml" -lggml-base -lllama-common -Wl,-rpath,'$ORIGIN' -o "$dir/bin/$name"
  echo "$dir/bin/$name"
}
build llama-quantize "$l/tools/quantize/quantize.cpp" "$l/tools/quantize/main.cpp"
build llama-tokenize "$l/tools/tokenize/tokenize.cpp"
