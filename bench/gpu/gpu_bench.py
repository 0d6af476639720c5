#!/usr/bin/env python3
"""gpt-vk on a GPU: decode and prefill tokens/s of GPT-2 small to XL against the memory
bandwidth roofline, with PyTorch (CUDA, KV cache, same protocol) on the same GPU in the same
run.

Decode reads every weight matrix once per token, so its roofline is the device's memory
bandwidth over the matrix bytes (embeddings, which the tied LM head reads, included; biases,
LayerNorms and the KV cache left out: under 4% of the bytes at these depths). Both engines
run on deterministic random weights (speed does not depend on the values; tests check the
results): gpt-vk makes its own when the config's weights file is absent, PyTorch makes
GPT-2-initialised ones on the GPU (torch_reference.py --random-weights).

Usage: gpu_bench.py --bandwidth-gbs 3350 [--gptvk build/gpt-vk] [--shapes gpt2-small,...]
         [--dtypes f16] [--prompt-tokens 128] [--gen-tokens 128] [--repeats 5] [--no-torch]
         [--out DIR]
Writes DIR/gpu.md (the table), DIR/gpu.json and DIR/profile-<shape>-<dtype>.txt (`gpt-vk
bench --profile` of one run: per-op GPU time). Progress goes to stderr.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)  # bench_proc, make_random_model
from bench_proc import device_name, run  # noqa: E402
from make_random_model import SHAPES, VOCAB_SIZE, config_text, shape_dims  # noqa: E402

BYTES_PER_WEIGHT = {"f32": 4, "f16": 2, "bf16": 2}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def matrix_bytes(shape, dtype):
    """Bytes of the weight matrices one decoded token reads: per layer QKV, attention
    output, MLP up and down (12 C^2), plus the tied LM head (V x C)."""
    L, C, _ = SHAPES[shape]
    return (L * 12 * C * C + VOCAB_SIZE * C) * BYTES_PER_WEIGHT[dtype]


def rates(outcome):
    if outcome.error:
        return None, None, outcome.error
    try:
        p, d = outcome.rates()
        return p, d, None
    except ValueError as e:
        return None, None, str(e)


def fmt(v, digits=0):
    return "—" if v is None else f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bandwidth-gbs", type=float, required=True,
                    help="the GPU's memory bandwidth in GB/s for the roofline (H100 SXM: 3350, H200: 4800)")
    ap.add_argument("--gptvk", default=os.path.join(ROOT, "build", "gpt-vk"))
    ap.add_argument("--shapes", default="gpt2-small,gpt2-medium,gpt2-large,gpt2-xl")
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch CUDA rows")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    shapes, dtypes = args.shapes.split(","), args.dtypes.split(",")
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s}; known: {', '.join(SHAPES)}")
    for d in dtypes:
        if d not in BYTES_PER_WEIGHT:
            ap.error(f"unknown dtype {d}; known: {', '.join(BYTES_PER_WEIGHT)}")
    os.makedirs(args.out, exist_ok=True)

    if not os.path.isfile(args.gptvk):
        ap.error(f"no gpt-vk binary at {args.gptvk} (build it, or give --gptvk)")
    devices = subprocess.run([args.gptvk, "devices", "-v"], capture_output=True, text=True)
    device = device_name(devices.stdout) if devices.returncode == 0 else devices.stderr.strip()
    log(device)
    work = [str(args.prompt_tokens), str(args.gen_tokens), str(args.repeats)]
    bench_args = ["--prompt-tokens", work[0], "--gen-tokens", work[1], "--repeats", work[2]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            for dtype in dtypes:
                cfg = os.path.join(tmp, f"{shape}-{dtype}.toml")
                with open(cfg, "w") as f:  # a weights file that does not exist: random weights
                    f.write(config_text(shape, shape_dims(shape), dtype, f"absent-{shape}.safetensors"))
                row = {"shape": shape, "dtype": dtype, "matrix_bytes": matrix_bytes(shape, dtype)}
                row["roofline_tok_s"] = args.bandwidth_gbs * 1e9 / row["matrix_bytes"]
                out = run([args.gptvk, "bench", "--config", cfg] + bench_args, 900, log=log)
                row["gptvk_prefill"], row["gptvk_decode"], row["gptvk_error"] = rates(out)
                row["gptvk_wall_s"] = out.wall_s
                log(out.stderr.strip().splitlines()[0] if out.stderr.strip() else "")
                prof = run([args.gptvk, "bench", "--config", cfg, "--profile", "--repeats", "1",
                            "--prompt-tokens", work[0], "--gen-tokens", "8"], 900)
                with open(os.path.join(args.out, f"profile-{shape}-{dtype}.txt"), "w") as f:
                    f.write(prof.stderr + prof.stdout)
                if not args.no_torch:
                    t = run([sys.executable, os.path.join(BENCH, "peers", "torch_reference.py"), "--config", cfg,
                             "--random-weights", "--device", "cuda", "--dtype", dtype] + bench_args, 900, log=log)
                    row["torch_prefill"], row["torch_decode"], row["torch_error"] = rates(t)
                log(json.dumps(row))
                rows.append(row)

    with open(os.path.join(args.out, "gpu.json"), "w") as f:
        json.dump({"device": device, "bandwidth_gbs": args.bandwidth_gbs, "prompt_tokens": args.prompt_tokens,
                   "gen_tokens": args.gen_tokens, "repeats": args.repeats, "rows": rows}, f, indent=1)
    lines = [f"Device: {device}", "",
             f"Prompt {args.prompt_tokens} random tokens, then {args.gen_tokens} decoded (greedy); medians of "
             f"{args.repeats} runs after a warm-up. Roofline: weight-matrix bytes per token at "
             f"{args.bandwidth_gbs:.0f} GB/s.", "",
             "| model | weights | matrix GB | gpt-vk prefill tok/s | gpt-vk decode tok/s | decode / roofline |"
             " PyTorch CUDA prefill | PyTorch CUDA decode | gpt-vk / PyTorch decode |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        frac = r["gptvk_decode"] / r["roofline_tok_s"] if r["gptvk_decode"] else None
        ratio = (r["gptvk_decode"] / r["torch_decode"]
                 if r.get("torch_decode") and r["gptvk_decode"] else None)
        note = f" ({r['gptvk_error']})" if r["gptvk_error"] else ""
        lines.append(f"| {r['shape']} | {r['dtype']} | {r['matrix_bytes'] / 1e9:.2f} | {fmt(r['gptvk_prefill'])}{note} "
                     f"| {fmt(r['gptvk_decode'])} | {'—' if frac is None else f'{100 * frac:.0f}%'} "
                     f"| {fmt(r.get('torch_prefill'))} | {fmt(r.get('torch_decode'))} "
                     f"| {'—' if ratio is None else f'{ratio:.2f}x'} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "gpu.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
