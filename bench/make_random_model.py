#!/usr/bin/python3
"""Writes GPT-2-architecture models with deterministic random weights for the benchmarks.

For each shape it writes <shape>.safetensors (F32, Hugging Face GPT-2 tensor names, Conv1D
[in, out] orientation) and one gpt-vk config per device dtype, <shape>-<dtype>.toml, into a
scratch directory (default /tmp/gptvk-bench: the files are large and never belong in git).

Weights follow GPT-2's initialisation (Hugging Face GPT2PreTrainedModel._init_weights):
normal(0, 0.02) for embeddings and linear weights, c_proj weights scaled by
1/sqrt(2 * n_layers), LayerNorm weight 1 and bias 0, linear biases 0. That keeps the
residual stream's scale steady through the layers, so attention and GELU see the same kind
of activations as in a trained model (speed does not depend on the values, but a model
whose activations blow up or vanish would not be a fair workload for either engine).

Usage: make_random_model.py [--out DIR] [--shapes tiny,gpt2-small,gpt2-medium,...] [--seed S]
An existing weights file with the same shape and seed in its metadata is kept as it is.
"""
import argparse
import json
import math
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

DEFAULT_OUT = "/tmp/gptvk-bench"
DEVICE_DTYPES = ("f32", "f16", "bf16")
TOKENIZER_DIR = os.path.join(ROOT, "models", "gpt2-tokenizer")

# name -> (n_layers, emb_dim, n_heads); all use GPT-2's vocabulary and 1024-token context
SHAPES = {
    "tiny": (4, 256, 4),
    "gpt2-small": (12, 768, 12),
    "gpt2-medium": (24, 1024, 16),
    "gpt2-large": (36, 1280, 20),
    "gpt2-xl": (48, 1600, 25),
}
VOCAB_SIZE = 50257
CONTEXT_LENGTH = 1024


def shape_dims(shape):
    n_layers, emb_dim, n_heads = SHAPES[shape]
    return {"n_layers": n_layers, "emb_dim": emb_dim, "n_heads": n_heads,
            "vocab_size": VOCAB_SIZE, "context_length": CONTEXT_LENGTH, "ffn_dim": 4 * emb_dim}


def tensor_specs(dims):
    """(name, shape, init) of every tensor in Hugging Face GPT-2 order; init is ("normal",
    std), ("ones",) or ("zeros",): GPT-2's initialisation, as the module docstring says."""
    C, F, L = dims["emb_dim"], dims["ffn_dim"], dims["n_layers"]
    proj_std = 0.02 / math.sqrt(2 * L)
    yield "wte.weight", (dims["vocab_size"], C), ("normal", 0.02)
    yield "wpe.weight", (dims["context_length"], C), ("normal", 0.01)
    for i in range(L):
        p = f"h.{i}."
        yield p + "ln_1.weight", (C,), ("ones",)
        yield p + "ln_1.bias", (C,), ("zeros",)
        yield p + "attn.c_attn.weight", (C, 3 * C), ("normal", 0.02)
        yield p + "attn.c_attn.bias", (3 * C,), ("zeros",)
        yield p + "attn.c_proj.weight", (C, C), ("normal", proj_std)
        yield p + "attn.c_proj.bias", (C,), ("zeros",)
        yield p + "ln_2.weight", (C,), ("ones",)
        yield p + "ln_2.bias", (C,), ("zeros",)
        yield p + "mlp.c_fc.weight", (C, F), ("normal", 0.02)
        yield p + "mlp.c_fc.bias", (F,), ("zeros",)
        yield p + "mlp.c_proj.weight", (F, C), ("normal", proj_std)
        yield p + "mlp.c_proj.bias", (C,), ("zeros",)
    yield "ln_f.weight", (C,), ("ones",)
    yield "ln_f.bias", (C,), ("zeros",)


def random_tensors(dims, seed, device="cpu", dtype=None):
    """Yields (name, tensor) in Hugging Face GPT-2 order, generated one at a time so the
    whole model is never held twice in memory (dtype: float32 unless given). On another
    device (bench/peers/torch_reference.py --random-weights on a GPU) the values differ from the
    CPU's for the same seed."""
    import torch  # here, so that bench/gpu/gpu_bench.py can use the shapes and configs without it

    dtype = dtype or torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    for name, shape, init in tensor_specs(dims):
        if init[0] == "normal":
            yield name, (torch.randn(*shape, generator=g, device=device) * init[1]).to(dtype)
        else:
            yield name, (torch.ones if init[0] == "ones" else torch.zeros)(shape, device=device, dtype=dtype)


def read_metadata(path):
    """The __metadata__ of a safetensors file, or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n).decode("utf-8"))
        expected = 8 + n + max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        if os.path.getsize(path) != expected:
            return None  # truncated (an interrupted earlier run)
        return header.get("__metadata__", {})
    except (OSError, ValueError, KeyError, struct.error):
        return None


def config_text(shape, dims, dtype, weights_name):
    return f"""# {shape} with deterministic random weights, written by bench/make_random_model.py
[model]
name = "{shape}-random"
vocab_size = {dims['vocab_size']}
context_length = {dims['context_length']}
emb_dim = {dims['emb_dim']}
n_heads = {dims['n_heads']}
n_layers = {dims['n_layers']}
ffn_dim = {dims['ffn_dim']}
qkv_bias = true
out_bias = false
tie_embeddings = true
activation = "gelu_tanh"
norm_eps = 1e-5

[weights]
file = "{weights_name}"
layout = "hf-gpt2"
dtype = "{dtype}"

[tokenizer]
vocab = "{os.path.join(TOKENIZER_DIR, 'encoder.json')}"
merges = "{os.path.join(TOKENIZER_DIR, 'vocab.bpe')}"
"""


def write_model(out_dir, shape, seed, log=print, weights=True):
    """Writes the weights (unless already there) and the configs of one shape; returns
    {dtype: config path}. With weights=False (no PyTorch here) the configs name a file that
    does not exist, so gpt-vk makes deterministic random weights of its own."""
    dims = shape_dims(shape)
    weights_name = f"{shape}.safetensors" if weights else f"absent-{shape}.safetensors"
    weights_path = os.path.join(out_dir, weights_name)
    metadata = {"generator": "bench/make_random_model.py", "shape": shape, "seed": str(seed),
                **{k: str(v) for k, v in dims.items()}}
    if weights and read_metadata(weights_path) == metadata:
        log(f"{weights_path}: up to date")
    elif weights:
        from safetensors_io import save_file  # needs torch, as random_tensors does

        tmp = weights_path + ".partial"
        size = save_file(random_tensors(dims, seed), tmp, "F32", metadata)
        os.replace(tmp, weights_path)
        log(f"{weights_path}: wrote {size / 2**20:.0f} MiB")
    configs = {}
    for dtype in DEVICE_DTYPES:
        path = os.path.join(out_dir, f"{shape}-{dtype}.toml")
        with open(path, "w") as f:
            f.write(config_text(shape, dims, dtype, weights_name))
        configs[dtype] = path
    return configs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"scratch directory (default {DEFAULT_OUT})")
    ap.add_argument("--shapes", default="tiny,gpt2-small,gpt2-medium",
                    help="comma-separated (default tiny,gpt2-small,gpt2-medium): " + ", ".join(SHAPES))
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    os.makedirs(args.out, exist_ok=True)
    for shape in shapes:
        try:
            configs = write_model(args.out, shape, args.seed)
        except ImportError as e:
            sys.exit(f"make_random_model: {e}: writing the weights needs PyTorch and NumPy (apt-get install python3-torch python3-numpy)")
        for path in configs.values():
            print(f"  {path}")


if __name__ == "__main__":
    main()
