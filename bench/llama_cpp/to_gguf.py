#!/usr/bin/python3
"""Converts a benchmark model of bench/make_random_model.py to GGUF (v3) for llama.cpp's
"gpt2" architecture, so llama.cpp runs the same weights as gpt-vk and PyTorch.

What llama.cpp's own converter (convert_hf_to_gguf.py, GPT2Model) would write for a Hugging
Face GPT-2, reproduced with the standard library and numpy (which PyTorch brings; the `gguf` package is not
installable here):
- tensor names token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm,
  ffn_up, ffn_down}, output_norm; no output.weight, so llama.cpp ties the output projection
  to token_embd (GPT-2 ties them too);
- the Conv1D weights ([in, out]) transposed to [out, in], i.e. ggml's ne = {in, out};
- with F16: 2-D weights and token_embd in F16; position_embd, norms and biases in F32
  (llama.cpp keeps 1-D tensors and position embeddings in F32);
- the real GPT-2 vocabulary and merges (models/gpt2-tokenizer), tokenizer.ggml.model "gpt2",
  pre-tokenizer "gpt-2": llama.cpp refuses to load a model without a vocabulary.

Usage: to_gguf.py [--models-dir /tmp/gptvk-bench] [--shape gpt2-small] [--dtype f16|f32] [--force]
Writes the safetensors model first when it is missing (seed 1234, as bench/sweeps/run_bench.py),
then <models-dir>/<shape>-<dtype>.gguf unless a file newer than the safetensors is there
(--force rewrites it). Prints the GGUF's path.

to_gguf.py --random [--models-dir DIR] [--shape gpt2-xl] [--dtype f16]: writes
<shape>-<dtype>-random.gguf straight away, with the standard library only (no PyTorch, no
numpy: for the lent GPU machines, bench/gpu/gpu_check.sh): GPT-2's initialisation drawn once
into a 64 Ki-value block per standard deviation and tiled through each weight. A speed
workload only (llama.cpp's kernels take the same time whatever the values); the weights are
not gpt-vk's, so no logits can be compared on it.
"""
import argparse
import json
import math
import mmap
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import make_random_model  # noqa: E402

# GGUF value types and ggml tensor types (ggml/include/gguf.h, ggml.h)
UINT32, INT32, FLOAT32, STRING, ARRAY = 4, 5, 6, 8, 9
GGML_F32, GGML_F16 = 0, 1
FILE_TYPE = {"f32": 0, "f16": 1}  # llama_ftype: ALL_F32, MOSTLY_F16
ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT: every tensor's data starts at a multiple of it
BLOCK = 1 << 16  # --random: values drawn per standard deviation, tiled through the tensors
SOURCE_DTYPES = {"F32": "<f4", "F16": "<f2"}  # safetensors dtype -> numpy's
CONV1D = (".c_attn.weight", ".c_proj.weight", ".c_fc.weight")


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, value):
    """One key/value pair; value is a scalar, a str, or (elem_type, list) for ARRAY."""
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == STRING:
        return out + gguf_string(value)
    if vtype == ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == STRING:
            return out + b"".join(gguf_string(s) for s in items)
        return out + struct.pack("<%d%s" % (len(items), {UINT32: "I", INT32: "i"}[etype]), *items)
    return out + struct.pack({UINT32: "<I", INT32: "<i", FLOAT32: "<f"}[vtype], value)


def tokenizer_kvs():
    with open(os.path.join(make_random_model.TOKENIZER_DIR, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    tokens = [None] * len(encoder)
    for text, i in encoder.items():
        tokens[i] = text
    with open(os.path.join(make_random_model.TOKENIZER_DIR, "vocab.bpe"), encoding="utf-8") as f:
        merges = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#version")]
    eot = encoder["<|endoftext|>"]
    # token type 1 = normal, 3 = control (what the converter gives GPT-2's <|endoftext|>)
    types = [3 if i == eot else 1 for i in range(len(tokens))]
    return [
        gguf_kv("tokenizer.ggml.model", STRING, "gpt2"),
        gguf_kv("tokenizer.ggml.pre", STRING, "gpt-2"),
        gguf_kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        gguf_kv("tokenizer.ggml.token_type", ARRAY, (INT32, types)),
        gguf_kv("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
        gguf_kv("tokenizer.ggml.bos_token_id", UINT32, eot),
        gguf_kv("tokenizer.ggml.eos_token_id", UINT32, eot),
    ]


def gguf_name(hf_name):
    """Hugging Face GPT-2 name -> llama.cpp name (gguf-py's tensor map for GPT2)."""
    name = hf_name.removeprefix("transformer.")
    fixed = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
             "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias"}
    if name in fixed:
        return fixed[name]
    _, layer, rest = name.split(".", 2)  # h.N.rest
    parts = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{parts[module]}.{kind}"


def tensor_plan(tensors, dtype):
    """[(hf name, gguf name, shape as written, transpose, ggml type)] for (hf name, shape)
    pairs in file order, leaving out what llama.cpp does not load."""
    skip = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers of HF checkpoints
    plan = []
    for name, shape in tensors:
        if name.endswith(skip) or name == "lm_head.weight":
            continue
        new = gguf_name(name)
        two_d = len(shape) == 2
        transpose = two_d and name.endswith(CONV1D)
        f16 = dtype == "f16" and two_d and new != "position_embd.weight"
        plan.append((name, new, list(shape)[::-1] if transpose else list(shape), transpose,
                     GGML_F16 if f16 else GGML_F32))
    return plan


def write_header(out, dims, model_name, dtype, plan):
    """GGUF v3's header, key/values and tensor infos, padded to where the data begins."""
    kvs = [
        gguf_kv("general.architecture", STRING, "gpt2"),
        gguf_kv("general.name", STRING, model_name),
        gguf_kv("general.file_type", UINT32, FILE_TYPE[dtype]),
        gguf_kv("gpt2.block_count", UINT32, dims["n_layers"]),
        gguf_kv("gpt2.context_length", UINT32, dims["context_length"]),
        gguf_kv("gpt2.embedding_length", UINT32, dims["emb_dim"]),
        gguf_kv("gpt2.feed_forward_length", UINT32, dims["ffn_dim"]),
        gguf_kv("gpt2.attention.head_count", UINT32, dims["n_heads"]),
        gguf_kv("gpt2.attention.layer_norm_epsilon", FLOAT32, 1e-5),  # norm_eps of the bench configs
    ] + tokenizer_kvs()
    infos, offset = [], 0
    for _, new, shape, _, gtype in plan:
        ne = shape[::-1]  # ggml lists the fastest-varying dimension first
        infos.append(gguf_string(new) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                     + struct.pack("<IQ", gtype, offset))
        nbytes = math.prod(shape) * (2 if gtype == GGML_F16 else 4)
        offset += nbytes + (-nbytes % ALIGNMENT)
    out.write(b"GGUF" + struct.pack("<IQQ", 3, len(plan), len(kvs)))
    for chunk in kvs + infos:
        out.write(chunk)
    out.write(b"\0" * (-out.tell() % ALIGNMENT))


def convert(src, dst, dtype):
    import numpy as np  # here: --random runs where there is no numpy

    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    meta = header.pop("__metadata__", {})  # make_random_model.py records the dimensions there
    keys = ("n_layers", "emb_dim", "n_heads", "context_length", "ffn_dim")
    if not all(k in meta for k in keys):
        raise SystemExit(f"to_gguf: {src}: no dimensions in its metadata (not written by make_random_model.py)")
    dims = {k: int(meta[k]) for k in keys}
    plan = tensor_plan(((name, info["shape"]) for name, info in header.items()), dtype)
    for name, *_ in plan:
        if header[name]["dtype"] not in SOURCE_DTYPES:
            raise SystemExit(f"to_gguf: {name}: unsupported dtype {header[name]['dtype']}")

    tmp = dst + ".partial"
    with open(src, "rb") as fin, open(tmp, "wb") as out:
        body = mmap.mmap(fin.fileno(), 0, access=mmap.ACCESS_READ)
        write_header(out, dims, meta.get("shape", "gpt2") + "-random", dtype, plan)
        for name, _, _, transpose, gtype in plan:
            info = header[name]
            begin, end = (8 + n + o for o in info["data_offsets"])
            src_dtype = np.dtype(SOURCE_DTYPES[info["dtype"]])
            a = np.frombuffer(body, src_dtype, (end - begin) // src_dtype.itemsize, begin).reshape(info["shape"])
            if transpose:
                a = a.T
            blob = np.ascontiguousarray(a, dtype="<f2" if gtype == GGML_F16 else "<f4").tobytes()
            out.write(blob + b"\0" * (-len(blob) % ALIGNMENT))
            del a  # mmap.close() refuses while a numpy view of it is alive
        body.close()
    os.replace(tmp, dst)


def write_random_gguf(models_dir, shape, dtype, log=print):
    """<models_dir>/<shape>-<dtype>-random.gguf from make_random_model.tensor_specs, with the
    standard library only (see the module docstring); returns its path."""
    dims = make_random_model.shape_dims(shape)
    specs = list(make_random_model.tensor_specs(dims))
    init = {name: spec for name, _, spec in specs}
    plan = tensor_plan(((name, dims_of) for name, dims_of, _ in specs), dtype)
    rng = random.Random(1234)
    blocks = {}  # (init, ggml type) -> bytes of BLOCK values

    def block(spec, gtype):
        key = (spec, gtype)
        if key not in blocks:
            if spec[0] == "normal":
                values = [rng.gauss(0.0, spec[1]) for _ in range(BLOCK)]
            else:
                values = [1.0 if spec[0] == "ones" else 0.0] * BLOCK
            blocks[key] = struct.pack(f"<{BLOCK}{'e' if gtype == GGML_F16 else 'f'}", *values)
        return blocks[key]

    dst = os.path.join(models_dir, f"{shape}-{dtype}-random.gguf")
    tmp = dst + ".partial"
    with open(tmp, "wb") as out:
        write_header(out, dims, shape + "-random", dtype, plan)
        for name, _, out_shape, _, gtype in plan:
            data = block(init[name], gtype)
            nbytes = math.prod(out_shape) * (2 if gtype == GGML_F16 else 4)
            for _ in range(nbytes // len(data)):
                out.write(data)
            out.write(data[: nbytes % len(data)] + b"\0" * (-nbytes % ALIGNMENT))
    os.replace(tmp, dst)
    log(f"{dst}: wrote {os.path.getsize(dst) / 2**20:.0f} MiB")
    return dst


def write_gguf(models_dir, shape, dtype, force=False, log=print):
    """Converts <models_dir>/<shape>.safetensors (make_random_model.write_model) to
    <models_dir>/<shape>-<dtype>.gguf unless that is newer; returns the GGUF's path."""
    src = os.path.join(models_dir, f"{shape}.safetensors")
    dst = os.path.join(models_dir, f"{shape}-{dtype}.gguf")
    if force or not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(src):
        convert(src, dst, dtype)
        log(f"{dst}: wrote {os.path.getsize(dst) / 2**20:.0f} MiB")
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default=make_random_model.DEFAULT_OUT)
    ap.add_argument("--shape", default="gpt2-small", choices=list(make_random_model.SHAPES))
    ap.add_argument("--dtype", default="f16", choices=list(FILE_TYPE))
    ap.add_argument("--force", action="store_true", help="rewrite even when up to date")
    ap.add_argument("--random", action="store_true",
                    help="tiled random weights, standard library only: <shape>-<dtype>-random.gguf")
    args = ap.parse_args()
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731 (stdout is the path alone)
    os.makedirs(args.models_dir, exist_ok=True)
    if args.random:
        print(write_random_gguf(args.models_dir, args.shape, args.dtype, log))
        return
    # the seed of bench/sweeps/run_bench.py, so the GGUF holds the weights gpt-vk is benchmarked on
    make_random_model.write_model(args.models_dir, args.shape, 1234, log=log)
    print(write_gguf(args.models_dir, args.shape, args.dtype, args.force, log))


if __name__ == "__main__":
    main()
