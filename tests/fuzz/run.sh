#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS from the committed seed corpus (read only: new
# inputs go to a scratch directory). A crash, leak, timeout or sanitizer report fails the
# run; the input that caused it is saved under BUILD/fuzz-artifacts/ and is to be added
# to tests/fuzz/regressions/<target>/ together with the fix.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS] [TARGET...]}" && pwd)"
seconds="${2:-60}"
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors config tokenizer gguf torch openai)

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

for t in "${targets[@]}"; do
  exe="$build/tests/fuzz/fuzz_$t"
  [ -x "$exe" ] || { echo "fuzz: $exe not built (ninja -C $build fuzz_all)" >&2; exit 1; }
  dict=()
  [ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
  mkdir -p "$scratch/$t"
  echo "fuzz: $t for ${seconds} s"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a runaway allocation.
  # The last lines of libFuzzer's output give the run's counts (execs, coverage).
  if ! "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t-" "${dict[@]}" "$scratch/$t" "$here/corpus/$t" \
      >"$scratch/$t.log" 2>&1; then
    tail -n 60 "$scratch/$t.log"
    echo "fuzz: $t FAILED; the input is in $artifacts/ (add it to tests/fuzz/regressions/$t/ with the fix)" >&2
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$scratch/$t.log" | tr '\n' ' '
  echo
done
echo "fuzz: all targets ran ${seconds} s without a crash"
