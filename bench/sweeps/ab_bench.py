#!/usr/bin/env python3
"""A/B of gpt-vk builds (or settings) in one run: `gpt-vk bench` of each variant on each
shape, in alternating rounds, so that every variant meets the same machine state. For
kernel changes on a GPU, where a lent machine's minutes are few and its speed moves from
one start to the next: compare variants within one run, never across runs.

A variant is a gpt-vk binary, optionally with settings after a colon: environment
variables, or `weights.KEY=VALUE` for a key added to the config's [weights] table:
  ab_bench.py ./gpt-vk.before ./gpt-vk.after
  ab_bench.py ./gpt-vk ./gpt-vk:GPTVK_YIELDING_WAITS=0
  ab_bench.py ./gpt-vk ./gpt-vk:weights.kv_dtype=f16 --prompt-tokens 960 --gen-tokens 64
  ab_bench.py ./gpt-vk ./gpt-vk:GPTVK_FORCE=no_fp16,no_subgroup   (one variable, two items)
Options: --shapes gpt2-small,gpt2-xl  --dtype f16  --rounds 2  --gen-tokens 128  --repeats 3
         --timeout 900 (seconds for one run)
Random weights (gpt-vk makes them itself: the config names a weights file that does not
exist). Prints one line per run as it goes, then decode and prefill medians over the rounds
with the ratio to the first variant. A variant's failed run (an error, a timeout) is printed
and left out of its medians, so that one broken variant costs a lent GPU's minutes only once.
"""
import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/: bench_proc, make_random_model
from bench_proc import run  # noqa: E402
from make_random_model import SHAPES, config_text, shape_dims  # noqa: E402


def parse_variant(text):
    binary, _, settings = text.partition(":")
    env = {}  # added to this process's environment (bench_proc.run)
    weights = {}  # added to the config's [weights] table
    last = None
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        if key.startswith("weights."):
            weights[key[len("weights."):]] = value
        elif last is not None and not key.isupper():
            # Not a variable name: the previous value goes on (GPTVK_FORCE=no_fp16,no_subgroup).
            env[last] += "," + item
        else:
            env[key] = value
            last = key
    return binary, env, weights


def write_config(path, shape, dtype, weights):
    text = config_text(shape, shape_dims(shape), dtype, f"absent-{shape}.safetensors")
    extra = "".join(f'{key} = "{value}"\n' for key, value in weights.items())
    text = text.replace(f'dtype = "{dtype}"\n', f'dtype = "{dtype}"\n{extra}', 1)
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="BINARY[:VAR=VALUE,...]")
    ap.add_argument("--shapes", default="gpt2-small,gpt2-xl")
    ap.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16", "q8_0", "q4_0"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900, help="seconds for one run")
    args = ap.parse_args()
    if min(args.rounds, args.prompt_tokens, args.repeats) < 1 or args.gen_tokens < 0:
        ap.error("--rounds, --prompt-tokens and --repeats must be at least 1, --gen-tokens at least 0")
    shapes = args.shapes.split(",")
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s}; known: {', '.join(SHAPES)}")
    variants = [parse_variant(v) for v in args.variants]
    work = ["--prompt-tokens", str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens),
            "--repeats", str(args.repeats)]
    results = {}  # (shape, variant index) -> [(prefill, decode)]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        configs = {}  # (shape, variant index) -> config path
        for shape in shapes:
            for i, (_, _, weights) in enumerate(variants):
                configs[(shape, i)] = os.path.join(tmp, f"{shape}-{args.dtype}-{i}.toml")
                write_config(configs[(shape, i)], shape, args.dtype, weights)
        for r in range(args.rounds):
            for shape in shapes:
                for i, (binary, env, _) in enumerate(variants):
                    out = run([binary, "bench", "--config", configs[(shape, i)]] + work, args.timeout, env=env)
                    try:
                        p, d = out.rates()
                    except ValueError as e:
                        print(f"round {r + 1} {shape} {args.variants[i]}: FAILED: {out.error or e}", flush=True)
                        failed = True
                        continue
                    results.setdefault((shape, i), []).append((p, d))
                    print(f"round {r + 1} {shape} {args.variants[i]}: prefill {p:.1f} decode {d:.2f} tok/s",
                          flush=True)
    print(f"\n| shape | variant | decode tok/s (median) | vs first | prefill tok/s (median) | vs first |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for shape in shapes:
        medians = {i: (statistics.median(p for p, _ in rs), statistics.median(d for _, d in rs))
                   for (s, i), rs in results.items() if s == shape}
        base_p, base_d = medians.get(0, (None, None))
        for i, text in enumerate(args.variants):
            if i not in medians:
                print(f"| {shape} | `{text}` | failed | | failed | |")
                continue
            p, d = medians[i]
            vs_d = f"{d / base_d:.3f}x" if base_d else ""
            vs_p = f"{p / base_p:.3f}x" if base_p else ""
            print(f"| {shape} | `{text}` | {d:.1f} | {vs_d} | {p:.0f} | {vs_p} |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
