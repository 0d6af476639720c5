#!/bin/bash
# Issue 35's GPU check, one short run: build gpt-vk and test_linear_quant, run the
# quantized kernels' test (the 256-wide mat-vec, the tiled GEMM and split-K on a real
# GPU), then GPT-2 XL decode f16 against q8_0, alternating (random weights).
set -u
B=${B:-/tmp/gptvk-q8-build}
nvidia-smi -L 2>&1 | head -2
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$B.cmake.log" 2>&1 || { tail -20 "$B.cmake.log"; exit 1; }
ninja -C "$B" -j16 gpt-vk test_linear_quant > "$B.ninja.log" 2>&1 || { tail -30 "$B.ninja.log"; exit 1; }
"$B/gpt-vk" devices -v 2>&1 | head -4
timeout 150 "$B/tests/test_linear_quant" --report_level=short 2>&1 | tail -4
mkdir -p /tmp/q8cfg
for dt in f16 q8_0; do
  sed "s/dtype = \"f16\"/dtype = \"$dt\"/; s#file = \"gpt2-xl.safetensors\"#file = \"/nonexistent/x.safetensors\"#; s#\.\./models#$PWD/models#g" \
    configs/gpt2-xl.toml > /tmp/q8cfg/xl-$dt.toml
done
for round in 1 2; do
  for dt in f16 q8_0; do
    echo -n "round $round $dt: "
    timeout 90 "$B/gpt-vk" bench --config /tmp/q8cfg/xl-$dt.toml --prompt-tokens 128 --gen-tokens 64 --repeats 3 2>&1 | tail -1
  done
done
