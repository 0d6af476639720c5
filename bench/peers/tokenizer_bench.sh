#!/usr/bin/env bash
# Encode throughput of gpt-vk's GPT-2 tokenizer next to the reference encoder (npm
# gpt-3-encoder on Node), measured in the same run on the same multi-megabyte text, with
# a check that both give the same ids. Fails unless gpt-vk is at least 5x faster.
#
# Usage: bench/peers/tokenizer_bench.sh [TEXT_FILE]
#   Without TEXT_FILE it encodes a 4 MB corpus built here: Debian's license texts (prose)
#   and the tokenizer fixture texts where both references agree (many scripts), then Python standard-library sources
#   (code, comments, docstrings) up to 4,000,000 bytes, whole files, valid UTF-8 only.
# Needs g++, libpcre2-dev, libicu-dev, node and npm (gpt-3-encoder is installed into tools/ if absent).
# Throughput is bytes of text per second of CPU time, so other jobs on the machine do not
# skew it; the wall-clock figures are printed too. "cold" is the first pass (empty word
# caches on both sides), "warm" a repeat on the same text.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vocab=$root/models/gpt2-tokenizer/encoder.json
merges=$root/models/gpt2-tokenizer/vocab.bpe

text=${1:-}
if [ -z "$text" ]; then
  text=$work/corpus.txt
  python3 - "$root" "$text" <<'PY'
import glob, json, os, sys, sysconfig
root, out = sys.argv[1], sys.argv[2]
limit = 4_000_000
parts = []
for f in sorted(glob.glob("/usr/share/common-licenses/*")):
    if os.path.isfile(f):
        parts.append(open(f, "rb").read())
with open(os.path.join(root, "tests/fixtures/tokenizer/cases.json"), encoding="utf-8") as f:
    # not the texts on which the two references differ by design (U+0085, U+FEFF)
    parts += [c["text"].encode() for c in json.load(f)["cases"] if "gpt-3-encoder" in c["reference"]]
stdlib = sysconfig.get_paths()["stdlib"]
for f in sorted(glob.glob(os.path.join(stdlib, "**/*.py"), recursive=True)):
    if sum(map(len, parts)) >= limit:
        break
    data = open(f, "rb").read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        continue
    parts.append(data)
data = b"\n".join(parts)
cut = limit
while cut < len(data) and (data[cut] & 0xC0) == 0x80:  # not inside a character
    cut += 1
open(out, "wb").write(data[:cut])
print(f"corpus: {cut} bytes: licenses, tokenizer fixtures, Python sources from {stdlib}")
PY
fi

if [ ! -d "$root/tools/node_modules/gpt-3-encoder" ]; then
  (cd "$root/tools" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

echo "building the timer ..."
g++ -O3 -DNDEBUG -std=c++20 -I"$root" "$root/bench/peers/tokenizer_bench.cpp" "$root"/models/tokenizer/*.cpp "$root/engine/files.cpp" \
  $(pkg-config --cflags --libs libpcre2-8 icu-uc) -o "$work/tokenizer_bench"

echo "gpt-vk ..."
ours=$("$work/tokenizer_bench" "$vocab" "$merges" "$text" 3)
echo "reference (node $(node --version), gpt-3-encoder $(node -p "require('$root/tools/node_modules/gpt-3-encoder/package.json').version")) ..."
ref=$(node "$root/bench/peers/tokenizer_bench_reference.js" "$text")

get() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1"; }
printf '\ntext: %s bytes, %s tokens\n' "$(get "$ours" bytes)" "$(get "$ours" tokens)"
printf '%-34s %12s %12s %16s %16s\n' "encode MB/s (CPU time | wall)" cold warm cold_wall warm_wall
for who in gpt-vk reference; do
  line=$ours
  [ $who = reference ] && line=$ref
  printf '%-34s %12s %12s %16s %16s\n' "$who" "$(get "$line" cold_mb_s)" "$(get "$line" warm_mb_s)" \
    "$(get "$line" cold_wall_mb_s)" "$(get "$line" warm_wall_mb_s)"
done
echo "gpt-vk tokenizer load: $(get "$ours" load_ms) ms"

status=0
if [ "$(get "$ours" ids_fnv)" != "$(get "$ref" ids_fnv)" ] || [ "$(get "$ours" tokens)" != "$(get "$ref" tokens)" ]; then
  echo "FAIL: gpt-vk and the reference give different ids"
  status=1
else
  echo "ids: identical ($(get "$ours" tokens) tokens)"
fi
cold=$(awk -v a="$(get "$ours" cold_mb_s)" -v b="$(get "$ref" cold_mb_s)" 'BEGIN { printf "%.1f", a / b }')
warm=$(awk -v a="$(get "$ours" warm_mb_s)" -v b="$(get "$ref" warm_mb_s)" 'BEGIN { printf "%.1f", a / b }')
echo "speedup: ${cold}x cold, ${warm}x warm (required: 5x)"
if awk -v c="$cold" -v w="$warm" 'BEGIN { exit !(c < 5 || w < 5) }'; then
  echo "FAIL: gpt-vk's tokenizer is less than 5x faster than the reference"
  status=1
fi
exit $status
