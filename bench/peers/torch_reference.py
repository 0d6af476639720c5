#!/usr/bin/python3
"""PyTorch baseline for `gpt-vk bench`: the same model, the same weights file, the same work.

A plain GPT-2 forward (pre-LN, tanh GELU, tied head) in PyTorch with a preallocated KV
cache, on the CPU or (--device cuda) a GPU. Each run prefills --prompt-tokens random tokens (logits of the last
position, greedy pick), then decodes --gen-tokens tokens one at a time against the cache,
exactly like `gpt-vk bench`: one warm-up run, then --repeats measured runs; the medians are
printed on the last stdout line as `prefill_tok_s=<float> decode_tok_s=<float>`.

Usage: torch_reference.py --config CFG.toml [--weights FILE] [--prompt-tokens N]
         [--gen-tokens N] [--repeats R] [--threads T] [--dtype f32|f16|bf16]
         [--device cpu|cuda] [--random-weights] [--check-gptvk GPTVK_BINARY [--check-only]]
--dtype is PyTorch's compute dtype (default f32, the usual CPU baseline; PyTorch's CPU
half-precision kernels are far slower than its f32 ones). --check-gptvk first compares this
forward's logits with `gpt-vk forward` on a few tokens, so both engines are known to run
the same model before their speeds are compared (--check-only: and nothing else, so that
gpt-vk's memory does not count in this process's peak RSS when it is measured).
--random-weights makes GPT-2-initialised weights on the device instead of reading the file
(bench/gpu/gpu_bench.py: speed only, the values are not gpt-vk's). Each step ends with the
greedy pick copied to the host, so GPU timings include the same synchronisation per token
as gpt-vk's one submit per token.
"""
import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import tomllib

# Before torch starts its OpenMP pool: with the default (active) wait policy, idle OpenMP
# threads spin, and on a machine shared with other jobs two spinning threads on two cores
# make PyTorch's prefill about 7x slower (200 against 1400-2200 tok/s for "tiny").
# On an idle machine passive waiting may cost PyTorch a little: run with
# OMP_WAIT_POLICY=ACTIVE to see (a value already set in the environment wins).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
FILE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def load_tensors(path):
    """Reads a safetensors file straight into one tensor per name, so peak memory is the
    weights themselves (the peak RSS is reported next to gpt-vk's)."""
    tensors = {}
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        header.pop("__metadata__", None)
        for name, info in header.items():
            if info["dtype"] not in FILE_DTYPES:
                raise SystemExit(f"{path}: tensor {name}: dtype {info['dtype']} not supported")
            t = torch.empty(info["shape"], dtype=FILE_DTYPES[info["dtype"]])
            begin, end = info["data_offsets"]
            if end - begin != t.numel() * t.element_size() or 8 + n + end > size:
                raise SystemExit(f"{path}: tensor {name}: byte range {begin}..{end} does not fit")
            f.seek(8 + n + begin)
            # bytes go straight into the tensor's storage (little-endian host assumed)
            if f.readinto(memoryview(t.view(torch.uint8).numpy()).cast("B")) != end - begin:
                raise SystemExit(f"{path}: tensor {name}: file ends early")
            tensors[name] = t
    return tensors


def read_config(path):
    """The [model] dims and the weights path (resolved against the config's directory)."""
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    m, w = cfg["model"], cfg["weights"]
    if w.get("layout", "hf-gpt2") != "hf-gpt2":
        raise SystemExit(f"{path}: only layout hf-gpt2 is supported by this reference")
    for key, default in (("qkv_bias", True), ("out_bias", False), ("tie_embeddings", True),
                         ("activation", "gelu_tanh"), ("norm_position", "pre"), ("final_norm", True)):
        if m.get(key, default) != default:
            raise SystemExit(f"{path}: {key} = {m[key]!r} is not GPT-2's; this reference runs GPT-2 only")
    dims = {k: m[k] for k in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers")}
    dims["eps"] = m.get("norm_eps", 1e-5)
    weights = os.path.join(os.path.dirname(os.path.abspath(path)), w["file"])
    return dims, weights


class GPT2:
    """GPT-2 inference with a KV cache of context_length positions, batch size 1."""

    def __init__(self, dims, tensors, dtype, device="cpu"):
        self.d = dims
        self.dtype = dtype
        self.device = device
        strip = lambda n: n[len("transformer."):] if n.startswith("transformer.") else n  # noqa: E731
        t = {strip(k): v.to(device=device, dtype=dtype).contiguous() for k, v in tensors.items()}
        self.wte, self.wpe = t["wte.weight"], t["wpe.weight"]
        self.lnf = (t["ln_f.weight"], t["ln_f.bias"])
        self.layers = []
        for i in range(dims["n_layers"]):
            p = f"h.{i}."
            # Conv1D weights are [in, out]: x @ W is the linear map, no transpose needed
            self.layers.append({k: t[p + k] for k in (
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                "mlp.c_proj.weight", "mlp.c_proj.bias")})
        H, C, T = dims["n_heads"], dims["emb_dim"], dims["context_length"]
        self.k_cache = [torch.zeros(H, T, C // H, dtype=dtype, device=device) for _ in self.layers]
        self.v_cache = [torch.zeros(H, T, C // H, dtype=dtype, device=device) for _ in self.layers]

    def _ln(self, x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, self.d["eps"])

    def forward(self, ids, pos, all_logits=False):
        """Runs tokens `ids` at positions pos..pos+len-1, filling the cache; returns the logits
        of the last position ([vocab]) or of all positions ([len, vocab])."""
        n, C, H = len(ids), self.d["emb_dim"], self.d["n_heads"]
        D = C // H
        ids = ids.to(self.device)
        x = self.wte[ids] + self.wpe[pos:pos + n]
        # causal mask of the new queries against all cached keys 0..pos+n-1
        mask = None
        if n > 1:
            q_pos = torch.arange(pos, pos + n, device=self.device).unsqueeze(1)
            mask = torch.arange(pos + n, device=self.device).unsqueeze(0) > q_pos
        for li, L in enumerate(self.layers):
            h = self._ln(x, L["ln_1.weight"], L["ln_1.bias"])
            qkv = torch.addmm(L["attn.c_attn.bias"], h, L["attn.c_attn.weight"])
            q, k, v = qkv.view(n, 3, H, D).permute(1, 2, 0, 3)  # each [H, n, D]
            self.k_cache[li][:, pos:pos + n] = k
            self.v_cache[li][:, pos:pos + n] = v
            keys, values = self.k_cache[li][:, :pos + n], self.v_cache[li][:, :pos + n]
            scores = torch.matmul(q, keys.transpose(1, 2)) * (1.0 / math.sqrt(D))
            if mask is not None:
                scores.masked_fill_(mask, float("-inf"))
            att = torch.matmul(torch.softmax(scores.float(), dim=-1).to(self.dtype), values)
            att = att.permute(1, 0, 2).reshape(n, C)
            x = x + torch.addmm(L["attn.c_proj.bias"], att, L["attn.c_proj.weight"])
            h = self._ln(x, L["ln_2.weight"], L["ln_2.bias"])
            h = F.gelu(torch.addmm(L["mlp.c_fc.bias"], h, L["mlp.c_fc.weight"]), approximate="tanh")
            x = x + torch.addmm(L["mlp.c_proj.bias"], h, L["mlp.c_proj.weight"])
        if not all_logits:
            x = x[-1:]
        logits = torch.matmul(self._ln(x, *self.lnf), self.wte.t())
        return logits if all_logits else logits[0]


def run_once(model, prompt, gen_tokens):
    """Greedy prefill + decode; returns (prefill seconds, decode seconds, generated ids)."""
    t0 = time.perf_counter()
    token = int(torch.argmax(model.forward(prompt, 0)))
    t1 = time.perf_counter()
    out = [token]
    for i in range(gen_tokens):
        token = int(torch.argmax(model.forward(torch.tensor([token]), len(prompt) + i)))
        out.append(token)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, out


def check_against_gptvk(model, binary, config, weights, vocab_size):
    """Compares logits with `gpt-vk forward` on a few fixed ids; exits on disagreement."""
    ids = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13][: model.d["context_length"]]
    ids = [i % vocab_size for i in ids]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        cmd = [binary, "forward", "--config", config, "--ids", ",".join(map(str, ids)), "--out", out]
        if weights:
            cmd += ["--weights", weights]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        theirs = np.load(out)
    ours = model.forward(torch.tensor(ids), 0, all_logits=True).float().cpu().numpy()
    err = float(np.max(np.abs(ours - theirs)))
    scale = float(np.max(np.abs(ours)))
    same_argmax = bool((ours.argmax(-1) == theirs.argmax(-1)).all())
    # the device may store 16-bit weights: allow 2% of the logit range (the argmax agreement
    # is reported, not demanded: two logits closer than that may trade places)
    ok = err <= 0.02 * scale + 1e-4
    print(f"check vs gpt-vk forward: max |diff| {err:.3g} (logit scale {scale:.3g}), "
          f"same argmax everywhere: {same_argmax}", file=sys.stderr)
    if not ok:
        raise SystemExit("torch_reference: logits disagree with gpt-vk forward; the comparison would be unfair")
    model.k_cache = [c.zero_() for c in model.k_cache]
    model.v_cache = [c.zero_() for c in model.v_cache]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", help="overrides the file named in the config")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--dtype", choices=TORCH_DTYPES, default="f32", help="compute dtype (default f32)")
    ap.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    ap.add_argument("--random-weights", action="store_true",
                    help="GPT-2-initialised random weights made on the device; the file is not read")
    ap.add_argument("--check-gptvk", metavar="BINARY", help="compare logits with BINARY forward first")
    ap.add_argument("--check-only", action="store_true", help="with --check-gptvk: compare, then exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    dims, weights = read_config(args.config)
    if args.weights:
        weights = args.weights
    if args.prompt_tokens < 1 or args.gen_tokens < 0 or args.repeats < 1:
        ap.error("--prompt-tokens and --repeats must be positive, --gen-tokens non-negative")
    if args.prompt_tokens + args.gen_tokens > dims["context_length"]:
        ap.error(f"--prompt-tokens + --gen-tokens exceeds the context of {dims['context_length']}")
    if args.random_weights and args.check_gptvk:
        ap.error("--random-weights and --check-gptvk exclude each other (gpt-vk reads the file)")
    t = time.perf_counter()
    if args.random_weights:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
        from make_random_model import random_tensors  # noqa: E402
        dims["ffn_dim"] = 4 * dims["emb_dim"]
        tensors = dict(random_tensors(dims, 1234, args.device, TORCH_DTYPES[args.dtype]))
        source = "random weights"
    else:
        tensors = load_tensors(weights)
        source = os.path.basename(weights)
    model = GPT2(dims, tensors, TORCH_DTYPES[args.dtype], args.device)
    del tensors
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}, {args.dtype}, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}: "
          f"{source} loaded in {time.perf_counter() - t:.2f} s", file=sys.stderr)

    with torch.inference_mode():
        if args.check_gptvk:
            check_against_gptvk(model, args.check_gptvk, args.config, args.weights, dims["vocab_size"])
            if args.check_only:
                return
        g = torch.Generator().manual_seed(42)
        prompt = torch.randint(0, dims["vocab_size"], (args.prompt_tokens,), generator=g)
        prefill, decode = [], []
        for r in range(args.repeats + 1):
            tp, td, _ = run_once(model, prompt, args.gen_tokens)
            if r == 0:
                continue  # warm-up: first-touch of the cache, allocator, thread pool
            prefill.append(args.prompt_tokens / tp)
            if args.gen_tokens:
                decode.append(args.gen_tokens / td)
    p = statistics.median(prefill)
    d = statistics.median(decode) if decode else 0.0
    print(f"prefill {args.prompt_tokens} tokens: median {p:.1f} tok/s (min {min(prefill):.1f}, "
          f"max {max(prefill):.1f}) over {args.repeats} runs", file=sys.stderr)
    if decode:
        print(f"decode {args.gen_tokens} tokens at depth {args.prompt_tokens}: median {d:.2f} tok/s "
              f"(min {min(decode):.2f}, max {max(decode):.2f})", file=sys.stderr)
    print(f"prefill_tok_s={p:.3f} decode_tok_s={d:.3f}")


if __name__ == "__main__":
    main()
