#!/usr/bin/env python3
"""gpt-vk against llama.cpp's Vulkan backend on the same device, in alternating runs of one
invocation: llama.cpp through its own benchmark tool, llama-bench (build_llama_bench.sh),
gpt-vk through `gpt-vk bench`, both on GPT-2 shapes of the same dtype, with the protocol of
`gpt-vk bench`: prefill of a P-token prompt, then G tokens decoded from depth P (llama-bench
`-p P` at depth 0 and `-n G` at depth P).

Standard library only (no PyTorch, no numpy), so that it runs on the lent GPU machines
(bench/gpu/gpu_check.sh). The weights are random and not the same values in both engines:
llama.cpp reads a GGUF of to_gguf.py --random, gpt-vk makes its own (its config names a
file that does not exist); speed does not depend on the values. For the same weights and a
check that both compute the same model, see run_bench.py --llama-cpp and check_same_model.py.

llama.cpp leaves CPU Vulkan devices (lavapipe) out unless GGML_VK_VISIBLE_DEVICES names
them; where it lists no device, this script names device 0, so it measures lavapipe on a
machine without a GPU. The device llama-bench reports is in the table.

Usage: vs_llama_bench.py [--gptvk build/gpt-vk] [--llama-bench bench/llama_cpp/llama-bench/llama-bench]
         [--shapes gpt2-small,gpt2-xl] [--dtype f16] [--prompt-tokens 128] [--gen-tokens 128]
         [--repeats 3] [--rounds 1] [--models-dir /tmp/gptvk-gguf] [--out FILE.md]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, HERE)
from bench_proc import run  # noqa: E402
from make_random_model import SHAPES, config_text, shape_dims  # noqa: E402
from to_gguf import write_random_gguf  # noqa: E402


def llama_env(binary):
    """The environment under which a llama.cpp tool (llama-bench, llama-batched-bench) sees a
    Vulkan device, and that device's listing; ({}, None) where it lists none (a CPU build)."""
    for env in ({}, {"GGML_VK_VISIBLE_DEVICES": "0"}):
        p = subprocess.run([binary, "--list-devices"], env=dict(os.environ, **env),
                           capture_output=True, text=True, timeout=120)
        listed = [l.strip() for l in p.stdout.splitlines() if l.strip().startswith("Vulkan")]
        if listed:
            return env, listed[0]
    return {}, None


def llama_rates(out, prompt, gen):
    """(prefill tok/s, decode tok/s, device) from llama-bench's JSON report."""
    tests = json.loads(out.stdout)
    pp = [t for t in tests if t["n_prompt"] == prompt and t["n_gen"] == 0 and t["n_depth"] == 0]
    tg = [t for t in tests if t["n_prompt"] == 0 and t["n_gen"] == gen and t["n_depth"] == prompt]
    if not pp or not tg:
        raise ValueError("no pp/tg results in llama-bench's report")
    return pp[0]["avg_ts"], tg[0]["avg_ts"], pp[0].get("gpu_info") or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gptvk", default=os.path.join(ROOT, "build", "gpt-vk"))
    ap.add_argument("--llama-bench", default=os.path.join(HERE, "llama-bench", "llama-bench"))
    ap.add_argument("--shapes", default="gpt2-small,gpt2-xl")
    ap.add_argument("--dtype", default="f16", choices=["f16", "f32"])
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--models-dir", default="/tmp/gptvk-gguf")
    ap.add_argument("--timeout", type=float, default=600, help="seconds for one run")
    ap.add_argument("--out", help="also write the markdown table here")
    args = ap.parse_args()
    shapes = args.shapes.split(",")
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s}; known: {', '.join(SHAPES)}")
        context = shape_dims(s)["context_length"]
        if args.prompt_tokens + args.gen_tokens > context:
            ap.error(f"--prompt-tokens + --gen-tokens ({args.prompt_tokens + args.gen_tokens}) "
                     f"past {s}'s context of {context}")
    if min(args.prompt_tokens, args.gen_tokens, args.repeats, args.rounds) < 1:
        ap.error("--prompt-tokens, --gen-tokens, --repeats and --rounds must be at least 1")
    for path in (args.gptvk, args.llama_bench):
        if not os.access(path, os.X_OK):
            ap.error(f"{path}: not an executable (build gpt-vk, and llama-bench with build_llama_bench.sh)")
    env, listed = llama_env(args.llama_bench)
    if listed is None:
        raise SystemExit("vs_llama_bench: llama-bench lists no Vulkan device, even with GGML_VK_VISIBLE_DEVICES=0")
    print(f"llama-bench device: {listed}" + (" (GGML_VK_VISIBLE_DEVICES=0)" if env else ""), flush=True)
    P, G, R = args.prompt_tokens, args.gen_tokens, str(args.repeats)
    os.makedirs(args.models_dir, exist_ok=True)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

    results = {}  # (shape, engine) -> [(prefill, decode)]
    device = {}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        ggufs, configs = {}, {}
        for shape in shapes:
            gguf = os.path.join(args.models_dir, f"{shape}-{args.dtype}-random.gguf")
            ggufs[shape] = gguf if os.path.exists(gguf) else write_random_gguf(args.models_dir, shape, args.dtype, log)
            configs[shape] = os.path.join(tmp, f"{shape}-{args.dtype}.toml")
            with open(configs[shape], "w") as f:
                f.write(config_text(shape, shape_dims(shape), args.dtype, f"absent-{shape}.safetensors"))
        for r in range(args.rounds):
            for shape in shapes:
                runs = {
                    "llama.cpp": ([args.llama_bench, "-m", ggufs[shape], "-p", str(P), "-n", str(G),
                                   "-d", f"0,{P}", "-r", R, "-ngl", "99", "-o", "json"], env),
                    "gpt-vk": ([args.gptvk, "bench", "--config", configs[shape], "--prompt-tokens", str(P),
                                "--gen-tokens", str(G), "--repeats", R], {}),
                }
                for engine, (cmd, run_env) in runs.items():
                    out = run(cmd, args.timeout, env=run_env)
                    try:
                        if out.error:
                            raise ValueError(out.error)
                        if engine == "llama.cpp":
                            p, d, device[shape] = llama_rates(out, P, G)
                        else:
                            p, d = out.rates()
                    except (ValueError, KeyError, json.JSONDecodeError) as e:
                        print(f"round {r + 1} {shape} {engine}: FAILED: {e}\n{out.stderr[-2000:]}", flush=True)
                        failed = True
                        continue
                    results.setdefault((shape, engine), []).append((p, d))
                    print(f"round {r + 1} {shape} {engine}: prefill {p:.1f} decode {d:.2f} tok/s", flush=True)

    lines = [f"{args.dtype} weights, {P}-token prompt, {G} tokens decoded from depth {P}; medians of "
             f"{args.rounds} round(s) of {args.repeats} repeats; llama.cpp: llama-bench, every layer offloaded "
             "(`-ngl 99`), its default flash-attention and f16 KV cache.", "",
             "| shape | device (llama-bench) | llama.cpp prefill tok/s | gpt-vk prefill tok/s | gpt-vk / llama.cpp "
             "| llama.cpp decode tok/s | gpt-vk decode tok/s | gpt-vk / llama.cpp |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for shape in shapes:
        med = {e: (statistics.median(p for p, _ in rs), statistics.median(d for _, d in rs))
               for (s, e), rs in results.items() if s == shape}
        if len(med) < 2:
            lines.append(f"| {shape} | {device.get(shape, '?')} | failed | | | | | |")
            continue
        (lp, ld), (gp, gd) = med["llama.cpp"], med["gpt-vk"]
        lines.append(f"| {shape} | {device[shape]} | {lp:.1f} | {gp:.1f} | {gp / lp:.2f}x | {ld:.2f} | {gd:.2f} "
                     f"| {gd / ld:.2f}x |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
