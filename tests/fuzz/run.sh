#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS from the committed seed corpus (read only: new
# inputs go to a scratch directory). A crash, leak, timeout or sanitizer report fails the
# run; the input that caused it is saved under BUILD/fuzz-artifacts/ and is to be added
# to tests/fuzz/regressions/<target>/ together with the fix.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]
# Targets run GPTVK_FUZZ_JOBS at a time (default: one per core), each on one core, so the
# step's wall time on CI's two cores is half the sum of the targets' seconds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS] [TARGET...]}" && pwd)"
seconds="${2:-60}"
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors config tokenizer gguf torch openai)
jobs="${GPTVK_FUZZ_JOBS:-$(nproc)}"

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "fuzz: $build/tests/fuzz/fuzz_$t not built (ninja -C $build fuzz_all)" >&2; exit 1; }
done

# One target: its log in $scratch/$t.log, its exit status in $scratch/$t.rc.
fuzz_target() {
  local t="$1" dict=()
  [ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
  mkdir -p "$scratch/$t"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a runaway allocation.
  local rc=0
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "${dict[@]}" "$scratch/$t" \
    "$here/corpus/$t" >"$scratch/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$scratch/$t.rc"
}

running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz: $t for ${seconds} s"
  fuzz_target "$t" &
  running=$((running + 1))
done
wait

# The last lines of libFuzzer's output give each run's counts (execs, coverage).
failed=()
for t in "${targets[@]}"; do
  if [ "$(cat "$scratch/$t.rc")" != 0 ]; then
    tail -n 60 "$scratch/$t.log"
    echo "fuzz: $t FAILED; the input is in $artifacts/ (add it to tests/fuzz/regressions/$t/ with the fix)" >&2
    failed+=("$t")
    continue
  fi
  echo -n "fuzz: $t: "
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$scratch/$t.log" | tr '\n' ' '
  echo
done
[ ${#failed[@]} -eq 0 ] || exit 1
echo "fuzz: all targets ran ${seconds} s without a crash"
