#!/usr/bin/env bash
# Greedy decoding by llama.cpp (tools/llama_greedy.cpp, CPU backend) against gpt-vk on the
# same GGUF: gpt-vk's argmax after every prefix of llama.cpp's sequence, with f32 and f16
# storage, and the logit gap where they pick differently (llama.cpp's quantized CPU dot
# products round the activations to 8 bits, so near-ties may flip).
#   tools/compare_greedy_llama.sh DIR MODEL.gguf "PROMPT" N
# DIR: tools/build_llama_quantize.sh's, with DIR/bin/llama-greedy built by the g++ line at the
# top of tools/llama_greedy.cpp.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 DIR MODEL.gguf PROMPT N   (DIR of tools/build_llama_quantize.sh)" >&2
  exit 2
fi
dir=$1 model=$2 prompt=$3 n=$4
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$dir/bin/llama-greedy" ]; then
  echo "$0: no $dir/bin/llama-greedy: build it with the g++ line at the top of tools/llama_greedy.cpp" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$0: $1 failed:" >&2; tail -5 "$tmp/err" >&2; exit 1; }
out=$(LLAMA_BIN="$dir/bin" "$dir/bin/llama-greedy" "$model" "$prompt" "$n" 2>"$tmp/err") || fail llama-greedy
p=$(echo "$out" | cut -d'|' -f1 | xargs | tr ' ' ',')
g=$(echo "$out" | cut -d'|' -f2 | xargs | tr ' ' ',')
for dt in f32 f16; do
  "$here/build/gpt-vk" forward -m "$model" --dtype $dt --ids "$p,$g" --out "$tmp/l.npy" 2>"$tmp/err" || fail "gpt-vk forward ($dt)"
  /usr/bin/python3 - "$p" "$g" "$tmp/l.npy" "$(basename "$model") $dt" <<'PY'
import sys
import numpy as np
p, g = ([int(x) for x in a.split(",")] for a in sys.argv[1:3])
logits = np.load(sys.argv[3])
diff = []
for k, i in enumerate(range(len(p) - 1, len(p) + len(g) - 1)):
    a = int(logits[i].argmax())
    if a != g[k]:
        diff.append(f"step {k}: llama.cpp {g[k]}, gpt-vk {a} (gpt-vk's logit gap {logits[i][a] - logits[i][g[k]]:.4f})")
print(sys.argv[4], f"{len(g) - len(diff)}/{len(g)} greedy picks agree", "; ".join(diff))
PY
done
