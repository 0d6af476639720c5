#!/usr/bin/env python3
"""Aggregate decode of B sequences decoding together (`gpt-vk bench --batch B`) on random
GPT-2 weights, every batch size of each shape in one invocation, so the ratios to B = 1 come
from the same machine state. Prints a markdown table: aggregate decode tok/s per B and its
ratio to B = 1 (the last line of `bench --batch` holds the aggregate, bench/bench_proc.py).

Usage: batch_bench.py [--gptvk build/gpt-vk] [--batches "1 8 16"] [--shapes gpt2-small]
         [--prompt-tokens 128] [--gen-tokens 128] [--dtype f16] [--timeout 300]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/: bench_proc, make_random_model
from bench_proc import run  # noqa: E402
from make_random_model import config_text, shape_dims  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gptvk", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "gpt-vk"))
    ap.add_argument("--batches", default="1 8 16")
    ap.add_argument("--shapes", default="gpt2-small")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split()]
    print(f"| shape | {' | '.join(f'B={b} tok/s' for b in batches)} | {' | '.join(f'B={b} / B=1' for b in batches[1:])} |")
    print("| --- |" + " ---: |" * (2 * len(batches) - 1))
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            cfg = os.path.join(tmp, f"{shape}.toml")
            with open(cfg, "w") as f:
                f.write(config_text(shape, shape_dims(shape), args.dtype, f"absent-{shape}.safetensors"))
            rates = []
            for b in batches:
                out = run([args.gptvk, "bench", "--config", cfg, "--batch", str(b), "--prompt-tokens",
                           str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens)], args.timeout,
                          log=lambda s: print(s, file=sys.stderr, flush=True))
                try:
                    rates.append(out.rates()[1] if out.error is None else None)
                except ValueError:
                    rates.append(None)
                if rates[-1] is None:
                    print(f"{shape} B={b}: {out.error or 'no result line'}\n{out.stderr[-600:]}", file=sys.stderr)
            cells = [f"{r:.1f}" if r else "failed" for r in rates]
            ratios = [f"{r / rates[0]:.2f}x" if r and rates[0] else "-" for r in rates[1:]]
            print(f"| {shape} | {' | '.join(cells)} | {' | '.join(ratios)} |", flush=True)


if __name__ == "__main__":
    main()
