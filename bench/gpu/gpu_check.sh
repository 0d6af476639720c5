#!/usr/bin/env bash
# Runs on a lent GPU machine (the workplace's device tool), in the repository root, with
# .gl and .gpu carried (bench/gpu/gpu_prepare.sh made them, here): installs the Vulkan loader,
# unpacks the build, runs the whole test suite on the GPU with the validation layer on, then
# A/B-benchmarks gpt-vk variants with bench/sweeps/ab_bench.py at each context depth, then gpt-vk
# against llama.cpp's Vulkan backend (llama-bench) on the same GPU
# (bench/llama_cpp/vs_llama_bench.py). What it prints also goes to $OUT/gpu_check.log,
# ab_bench's tables to $OUT/ab-<depth>.md, the llama.cpp table to $OUT/vs-llama-cpp.md.
#
# Usage: bash bench/gpu/gpu_check.sh [VARIANT...]
#   VARIANT: ab_bench.py's BINARY[:VAR=VALUE,...], the first being the baseline. Default:
#   the build against its opt-in GPU decode features (bench/PERFORMANCE.md, GPUs).
# Environment: TESTS=0 skips the tests; DEPTHS (prompt tokens, default "128 960"); SHAPES
#   (default gpt2-small,gpt2-xl); ROUNDS (default 1); LLAMA=0 skips llama.cpp; TABLE=1 also
#   runs gpu_bench.py's table of every GPT-2 size against PyTorch (several minutes).
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
  say "test suite (validation layer on)"
  if command -v ctest >/dev/null; then
    ctest --test-dir "$src/build" -j 8 --timeout 300 --output-on-failure || status=1
  else
    for t in "$src"/build/tests/test_*; do
      (cd "$src/build" && timeout 300 "$t" --report_level=short) || { echo "FAILED: $t"; status=1; }
    done
  fi
fi

if [ $# -eq 0 ]; then
  set -- build/gpt-vk
fi
for depth in ${DEPTHS:-128 960}; do
  say "A/B at a ${depth}-token prompt"
  PYTHONUNBUFFERED=1 python3 bench/sweeps/ab_bench.py "$@" --shapes "${SHAPES:-gpt2-small,gpt2-xl}" \
    --rounds "${ROUNDS:-1}" --prompt-tokens "$depth" --timeout 150 | tee "$OUT/ab-$depth.txt" || status=1
  sed -n '/^| shape/,$p' "$OUT/ab-$depth.txt" >"$OUT/ab-$depth.md"
done

if [ "${LLAMA:-1}" != 0 ] && [ -f .gpu/llama-bench.tar.xz ]; then
  say "llama.cpp's Vulkan backend (llama-bench) against gpt-vk"
  tar -C build -xJf .gpu/llama-bench.tar.xz
  PYTHONUNBUFFERED=1 python3 bench/llama_cpp/vs_llama_bench.py --gptvk build/gpt-vk \
    --llama-bench build/llama-bench/llama-bench --shapes "${SHAPES:-gpt2-small,gpt2-xl}" \
    --models-dir /tmp/gptvk-gguf --timeout 150 --out "$OUT/vs-llama-cpp.md" || status=1
fi

if [ "${TABLE:-0}" = 1 ]; then
  say "gpu_bench.py table"
  PYTHONUNBUFFERED=1 python3 bench/gpu/gpu_bench.py --bandwidth-gbs 3350 --gptvk build/gpt-vk --out "$OUT" || status=1
fi
say "done, status $status"
exit $status
