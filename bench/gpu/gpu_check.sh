#!/usr/bin/env bash
# Runs on a lent GPU machine (the workplace's device tool), in the repository root, with
# .gl and .gpu carried (bench/gpu/gpu_prepare.sh made them, here): installs the Vulkan loader,
# unpacks the build, runs the whole test suite on the GPU with the validation layer on, then
# A/B-benchmarks gpt-vk variants with bench/sweeps/ab_bench.py at each context depth, then gpt-vk
# against llama.cpp's Vulkan backend (llama-bench) on the same GPU
# (bench/llama_cpp/vs_llama_bench.py). What it prints also goes to $OUT/gpu_check.log,
# ab_bench's tables to $OUT/ab-<depth>.md (the other weight dtypes' to $OUT/ab-<dtype>.txt),
# the llama.cpp table to $OUT/vs-llama-cpp.md.
#
# Usage: bash bench/gpu/gpu_check.sh [VARIANT...]
#   VARIANT: ab_bench.py's BINARY[:VAR=VALUE,...], the first being the baseline. Default: the
#   build without the matrix units (GPTVK_FORCE=no_coopmat), with them for the GEMMs only
#   (GPTVK_FORCE=no_coopmat_attention), and with them for prompt attention too (as it is).
# Environment (each stage can be left out, so a rerun spends the lent minutes on what is left):
#   TESTS=0 skips the suite; TESTS_R=REGEX runs only those tests, TESTS_E=REGEX leaves those out
#   (openai_client and browser need node, which the GPU machines lack); GPTVK_VALIDATION_GPU=1
#   with TESTS_R (e.g. 'test_sample|test_attention') runs those with every shader's buffer
#   accesses checked (tests/README.md, "Shader bounds checks");
#   DEPTHS (prompt tokens of the A/B, default "512"); SHAPES (default gpt2-small,gpt2-xl);
#   ROUNDS (default 1); AB=0 skips the A/B; Q8=0 skips its runs on GPT-2 XL with other weight
#   dtypes, DTYPES (default q8_0; e.g. "q8_0 bf16 q4_0": each matrix-unit staging path);
#   LLAMA=0 skips llama.cpp; LLAMA_SHAPES (default gpt2-small,gpt2-medium,gpt2-large,gpt2-xl),
#   at pp512 / tg128 (llama-bench's 512-token prompt and 128 generated tokens);
#   BATCH="1 16 64" runs `gpt-vk bench --batch B --batch-kernels gemm` on BATCH_SHAPES (default
#   gpt2-small,gpt2-xl) and llama.cpp's llama-batched-bench in the same run (unless LLAMA=0),
#   then `--batch-kernels exact` on GPT-2 small; PROFILE=0 skips the per-op profile of GPT-2 XL (512-token prompt);
#   SERVE=1 runs bench/serve/serve_load.py (1 then 16 streaming clients) against `gpt-vk serve`
#   on a random GPT-2 small GGUF, with --batch-kernels exact (the one-token mat-vecs over every
#   row) and then gemm (the GEMMs), then exact with each client's prompt its own;
#   TABLE=1 also runs gpu_bench.py's table of every GPT-2 size against PyTorch (minutes), its
#   roofline at the lent GPU's bandwidth (H200 4800 GB/s, else H100 SXM's 3350; BANDWIDTH_GBS sets it).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
say() { echo "== gpu_check $(date +%T): $*"; }

[ -f .gpu/bundle.tar.xz ] || { echo "gpu_check: .gpu/bundle.tar.xz missing: run bench/gpu/gpu_prepare.sh here and carry .gl and .gpu"; exit 2; }
if ! ldconfig -p | grep -q libvulkan.so.1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$nvidia_icd" ] && ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
  export VK_DRIVER_FILES=$nvidia_icd
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi

tar -xJf .gpu/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/build/gpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_LAYER_PATH=$PWD/build/gpu-lib
# The test binaries have the source and build paths of the checkout that built them
# compiled in; point that path at this copy.
src=$(cat .gpu/source_dir)
if [ "$(realpath -m "$src")" != "$(realpath "$PWD")" ]; then
  if [ -e "$src" ] && [ ! -L "$src" ]; then echo "gpu_check: $src exists here and is not this checkout"; exit 2; fi
  mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"
fi

say "devices"
build/gpt-vk devices || { echo "gpu_check: gpt-vk sees no Vulkan device"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null

status=0
if [ "${TESTS:-1}" != 0 ]; then
  say "test suite (validation layer on)${TESTS_R:+, tests matching $TESTS_R}"
  if command -v ctest >/dev/null; then
    ctest --test-dir "$src/build" -j 8 --timeout 300 --output-on-failure ${TESTS_R:+-R "$TESTS_R"} \
      -E "${TESTS_E:-openai_client|browser}" || status=1
  else
    for t in "$src"/build/tests/test_*; do
      [ -n "${TESTS_R:-}" ] && ! [[ $(basename "$t") =~ $TESTS_R ]] && continue
      [ -n "${TESTS_E:-}" ] && [[ $(basename "$t") =~ $TESTS_E ]] && continue
      (cd "$src/build" && timeout 300 "$t" --report_level=short) || { echo "FAILED: $t"; status=1; }
    done
  fi
fi

build/gpt-vk devices -v 2>&1 | sed -n '/^plan/,$p'

if [ $# -eq 0 ]; then
  set -- build/gpt-vk:GPTVK_FORCE=no_coopmat build/gpt-vk:GPTVK_FORCE=no_coopmat_attention build/gpt-vk
fi
if [ "${AB:-1}" != 0 ]; then
  for depth in ${DEPTHS:-512}; do
    say "A/B at a ${depth}-token prompt"
    PYTHONUNBUFFERED=1 python3 bench/sweeps/ab_bench.py "$@" --shapes "${SHAPES:-gpt2-small,gpt2-xl}" \
      --rounds "${ROUNDS:-1}" --prompt-tokens "$depth" --timeout 150 | tee "$OUT/ab-$depth.txt" || status=1
    sed -n '/^| shape/,$p' "$OUT/ab-$depth.txt" >"$OUT/ab-$depth.md"
  done
fi

if [ "${Q8:-1}" != 0 ] && [ "${AB:-1}" != 0 ]; then
  for dtype in ${DTYPES:-q8_0}; do
    say "other weights: the A/B's variants with $dtype weights, GPT-2 XL, 512-token prompt"
    PYTHONUNBUFFERED=1 python3 bench/sweeps/ab_bench.py "$@" --dtype "$dtype" --shapes gpt2-xl --rounds 1 \
      --prompt-tokens 512 --timeout 150 | tee "$OUT/ab-$dtype.txt" || status=1
  done
fi

if [ -n "${BATCH:-}" ] && build/gpt-vk bench --help 2>&1 | grep -q -- --batch; then
  say "batched decode: gpt-vk bench --batch against llama-batched-bench, 128-token prompts, 128 tokens each"
  peer=()
  if [ "${LLAMA:-1}" != 0 ] && [ -f .gpu/llama-bench.tar.xz ]; then
    tar -C build -xJf .gpu/llama-bench.tar.xz
    [ -x build/llama-bench/llama-batched-bench ] && peer=(--llama-batched-bench build/llama-bench/llama-batched-bench)
  fi
  PYTHONUNBUFFERED=1 python3 bench/gpu/batch_bench.py --gptvk build/gpt-vk --batches "$BATCH" --batch-kernels gemm \
    --shapes "${BATCH_SHAPES:-gpt2-small,gpt2-xl}" --timeout 150 "${peer[@]}" | tee "$OUT/batch.md" || status=1
  say "batched decode with exact rows (the one-token mat-vecs over every row), GPT-2 small"
  PYTHONUNBUFFERED=1 python3 bench/gpu/batch_bench.py --gptvk build/gpt-vk --batches "$BATCH" --batch-kernels exact \
    --shapes gpt2-small --timeout 150 | tee "$OUT/batch-exact.md" || status=1
fi

if [ "${PROFILE:-1}" != 0 ]; then
  say "per-op profile, GPT-2 XL f16, 512-token prompt"
  python3 - <<'PY' >/tmp/xl.toml
import sys; sys.path.insert(0, "bench")
from make_random_model import config_text, shape_dims
print(config_text("gpt2-xl", shape_dims("gpt2-xl"), "f16", "absent-gpt2-xl.safetensors"))
PY
  timeout 150 build/gpt-vk bench --config /tmp/xl.toml --prompt-tokens 512 --gen-tokens 32 --profile \
    | tee "$OUT/profile-xl.txt" || status=1
fi

if [ "${LLAMA:-1}" != 0 ] && [ -f .gpu/llama-bench.tar.xz ]; then
  say "llama.cpp's Vulkan backend (llama-bench) against gpt-vk, pp512 / tg128"
  tar -C build -xJf .gpu/llama-bench.tar.xz
  PYTHONUNBUFFERED=1 python3 bench/llama_cpp/vs_llama_bench.py --gptvk build/gpt-vk \
    --llama-bench build/llama-bench/llama-bench --shapes "${LLAMA_SHAPES:-gpt2-small,gpt2-medium,gpt2-large,gpt2-xl}" \
    --prompt-tokens 512 --gen-tokens 128 --models-dir /tmp/gptvk-gguf --timeout 150 --out "$OUT/vs-llama-cpp.md" || status=1
fi

if [ "${SERVE:-0}" = 1 ]; then
  say "serve_load: 16 streaming clients, GPT-2 small f16 (random GGUF), --batch-kernels exact then gemm"
  gguf=$(python3 bench/llama_cpp/to_gguf.py --random --shape gpt2-small --models-dir /tmp/gptvk-gguf) || status=1
  for kernels in exact gemm; do
    timeout 150 python3 bench/serve/serve_load.py --binary build/gpt-vk --clients 1,16 --requests 2 \
      --server-args "--model $gguf --batch-kernels $kernels" | tee "$OUT/serve-$kernels.md" || status=1
  done
  # The clients above share one prompt (twins: it runs once a burst); each its own here.
  timeout 150 python3 bench/serve/serve_load.py --binary build/gpt-vk --clients 1,16 --requests 2 --distinct-prompts \
    --server-args "--model $gguf" | tee "$OUT/serve-distinct.md" || status=1
fi

if [ "${TABLE:-0}" = 1 ]; then
  say "gpu_bench.py table"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$gpu" in *H200*) bw=4800 ;; *) bw=3350 ;; esac
  PYTHONUNBUFFERED=1 python3 bench/gpu/gpu_bench.py --bandwidth-gbs "${BANDWIDTH_GBS:-$bw}" --gptvk build/gpt-vk \
    --out "$OUT" || status=1
fi
say "done, status $status"
exit $status
