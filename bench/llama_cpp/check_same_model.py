#!/usr/bin/python3
"""Checks that llama.cpp, on the GGUF written by to_gguf.py, computes the model gpt-vk runs
from the safetensors file: llama.cpp's greedy continuation of a prompt (bench.mjs
--check-ids) must be what `gpt-vk forward` picks at each position, with the same
probabilities. A wrong tensor name, orientation or dtype would show as other picks.

Usage: check_same_model.py [--shape gpt2-small] [--dtype f32] [--backend vulkan|cpu]
Compare f32 with f32: with random weights the top two logits can be close enough for f16
rounding to swap them. Prints one verdict line; exit status 1 when the picks differ.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROMPT = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13]  # "The quick brown fox jumps over the lazy dog."


def step(what, cmd):
    """Runs one step; exits with its own last words when it fails."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:  # node or the binary missing
        sys.exit(f"check_same_model: {what} could not start: {e}")
    if p.returncode != 0:
        said = p.stderr.strip().splitlines()[-3:] or ["(no stderr)"]
        sys.exit(f"check_same_model: {what} failed (exit {p.returncode}): {' / '.join(said)}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default="/tmp/gptvk-bench")
    ap.add_argument("--shape", default="gpt2-small")
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    ap.add_argument("--backend", default="vulkan", choices=("vulkan", "cpu"))
    ap.add_argument("--gen-tokens", type=int, default=8)
    ap.add_argument("--gptvk", default=os.path.join(ROOT, "build", "gpt-vk"))
    args = ap.parse_args()
    gguf = step("to_gguf.py", [sys.executable, os.path.join(HERE, "to_gguf.py"), "--models-dir", args.models_dir,
                               "--shape", args.shape, "--dtype", args.dtype]).strip()
    out = step("llama.cpp (bench.mjs)", ["node", os.path.join(HERE, "bench.mjs"), "--model", gguf, "--backend",
                                         args.backend, "--check-ids", ",".join(map(str, PROMPT)),
                                         "--gen-tokens", str(args.gen_tokens)])
    picks = json.loads(out.strip().splitlines()[-1])["picks"]
    ids = PROMPT + [p["token"] for p in picks[:-1]]
    config = os.path.join(args.models_dir, f"{args.shape}-{args.dtype}.toml")
    with tempfile.TemporaryDirectory() as tmp:
        npy = os.path.join(tmp, "logits.npy")
        step("gpt-vk forward", [args.gptvk, "forward", "--config", config, "--ids", ",".join(map(str, ids)),
                                "--out", npy])
        logits = np.load(npy)[len(PROMPT) - 1:].astype(np.float64)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    gptvk_picks = probs.argmax(axis=1).tolist()
    llama_picks = [p["token"] for p in picks]
    # relative: a random model's top probabilities are ~1e-4 (near-uniform over 50257 tokens)
    diff = max(abs(p["probability"] / probs[i, p["token"]] - 1) for i, p in enumerate(picks))
    same = gptvk_picks == llama_picks
    print(f"{args.shape} {args.dtype}: llama.cpp ({args.backend}) greedy picks {llama_picks}, gpt-vk "
          f"{'the same' if same else gptvk_picks}; their probabilities differ by at most {100 * diff:.2g}% "
          f"(top probabilities {min(p['probability'] for p in picks):.3g}-{max(p['probability'] for p in picks):.3g})")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
