#!/usr/bin/env python3
"""Aggregate decode of B sequences decoding together (`gpt-vk bench --batch B`) on random
GPT-2 weights, every batch size of each shape in one invocation, so the ratios to B = 1 come
from the same machine state. Prints a markdown table: aggregate decode tok/s per B and its
ratio to B = 1 (the last line of `bench --batch` holds the aggregate, bench/bench_proc.py).

With --llama-batched-bench, llama.cpp's own batched benchmark (bench/llama_cpp/
build_llama_bench.sh builds it: llama-bench/ for the Vulkan build, llama-cpu/ for the CPU
build) runs in the same invocation, right after gpt-vk on each shape, with the same prompt
and generated lengths (`-npp P -ntg G -npl B,...`, one sequence per prompt, no shared
prompt); the table then has its aggregate decode (S_TG) per B and gpt-vk's ratio to it.
Its weights are a random GGUF of the same shape (bench/llama_cpp/to_gguf.py, standard
library only, so this runs on the lent GPU machines too); speed does not depend on values.

Usage: batch_bench.py [--gptvk build/gpt-vk] [--batches "1 8 16"] [--shapes gpt2-small]
         [--prompt-tokens 128] [--gen-tokens 128] [--dtype f16] [--timeout 300]
         [--llama-batched-bench PATH [--threads N] [--models-dir /tmp/gptvk-gguf]]
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)  # bench_proc, make_random_model
sys.path.insert(0, os.path.join(BENCH, "llama_cpp"))  # to_gguf, vs_llama_bench
from bench_proc import run  # noqa: E402
from make_random_model import SHAPES, config_text, shape_dims  # noqa: E402
from to_gguf import write_random_gguf  # noqa: E402
from vs_llama_bench import llama_env  # noqa: E402


def log(message):
    print(message, file=sys.stderr, flush=True)


def gptvk_rates(args, cfg, batches, shape):
    rates = []
    for b in batches:
        cmd = [args.gptvk, "bench", "--config", cfg, "--batch", str(b), "--prompt-tokens",
               str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens)]
        if b > 1:  # the kernel choice is for batched steps; gpt-vk refuses it with B = 1
            cmd += ["--batch-kernels", args.batch_kernels]
        out = run(cmd, args.timeout, log=log)
        try:
            rates.append(out.rates()[1] if out.error is None else None)
        except ValueError:
            rates.append(None)
        if rates[-1] is None:
            log(f"{shape} B={b}: {out.error or 'no result line'}\n{out.stderr[-600:]}")
    return rates


def llama_rates(args, gguf, batches, shape):
    """Aggregate decode tok/s (S_TG) per batch size from one llama-batched-bench run."""
    P, G = args.prompt_tokens, args.gen_tokens
    cmd = [args.llama_batched_bench, "-m", gguf, "-c", str(max(batches) * (P + G) + 64), "-b", "2048",
           "-ub", "512", "-npp", str(P), "-ntg", str(G), "-npl", ",".join(map(str, batches)), "-ngl", "99",
           "--output-format", "jsonl"]
    if args.threads:
        cmd += ["-t", str(args.threads), "-tb", str(args.threads)]
    out = run(cmd, args.timeout * len(batches), env=llama_env(args.llama_batched_bench)[0], log=log)
    by_b = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            by_b[r["pl"]] = r["speed_tg"]
    if out.error or not by_b:
        log(f"{shape} llama-batched-bench: {out.error or 'no results'}\n{out.stderr[-600:]}")
    return [by_b.get(b) for b in batches]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gptvk", default=os.path.join(os.path.dirname(BENCH), "build", "gpt-vk"))
    ap.add_argument("--batches", default="1 8 16")
    ap.add_argument("--shapes", default="gpt2-small")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="f16", choices=["f16", "f32"])
    ap.add_argument("--batch-kernels", default="exact", choices=["exact", "gemm"],
                    help="gpt-vk bench --batch-kernels (GPUs: exact = the one-token mat-vecs, gemm = the GEMMs)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds for one gpt-vk run")
    ap.add_argument("--llama-batched-bench", help="also run llama.cpp's llama-batched-bench, same shapes and lengths")
    ap.add_argument("--threads", type=int, help="llama.cpp's CPU threads (-t, -tb); default: its own")
    ap.add_argument("--models-dir", default="/tmp/gptvk-gguf", help="where the random GGUFs are kept")
    args = ap.parse_args()
    try:
        batches = [int(b) for b in args.batches.split()]
    except ValueError:
        ap.error(f"--batches takes whole numbers separated by spaces, not {args.batches!r}")
    if not batches or min(batches) < 1:
        ap.error("--batches needs one or more sizes of at least 1")
    unknown = [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shape {unknown[0]!r}; known: {', '.join(SHAPES)}")
    if not os.path.isfile(args.gptvk):
        ap.error(f"no gpt-vk binary at {args.gptvk} (build it, or give --gptvk)")
    failed = False
    peer = args.llama_batched_bench
    cols = [f"B={b} tok/s" for b in batches] + [f"B={b} / B=1" for b in batches[1:]]
    if peer:
        cols += [f"llama.cpp B={b}" for b in batches] + [f"gpt-vk / llama.cpp B={b}" for b in batches]
    print(f"| shape | {' | '.join(cols)} |")
    print("| --- |" + " ---: |" * len(cols))
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            cfg = os.path.join(tmp, f"{shape}.toml")
            with open(cfg, "w") as f:
                f.write(config_text(shape, shape_dims(shape), args.dtype, f"absent-{shape}.safetensors"))
            rates = gptvk_rates(args, cfg, batches, shape)
            failed |= None in rates
            cells = [f"{r:.1f}" if r else "failed" for r in rates]
            cells += [f"{r / rates[0]:.2f}x" if r and rates[0] else "-" for r in rates[1:]]
            if peer:
                os.makedirs(args.models_dir, exist_ok=True)
                gguf = os.path.join(args.models_dir, f"{shape}-{args.dtype}-random.gguf")
                if not os.path.exists(gguf):
                    gguf = write_random_gguf(args.models_dir, shape, args.dtype, log)
                theirs = llama_rates(args, gguf, batches, shape)
                failed |= None in theirs
                cells += [f"{r:.1f}" if r else "failed" for r in theirs]
                cells += [f"{g / l:.2f}x" if g and l else "-" for g, l in zip(rates, theirs)]
            print(f"| {shape} | {' | '.join(cells)} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
