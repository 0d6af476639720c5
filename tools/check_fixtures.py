#!/usr/bin/python3
"""Checks the golden-logit fixtures (tests/fixtures/models/<case>/) the way gpt-vk will read
them, without the PyTorch model classes that made them.

For each case directory: parses config.toml (only CONTRACT keys allowed), resolves the tensor
names of layout "hf-gpt2" or "custom" ([weights.names], `linear` orientation), checks every
named tensor's shape against [model], runs a float64 NumPy forward pass that follows the
CONTRACT's description of the model (pre/post LayerNorm, activation, tied/untied head, final
norm), and compares with logits.npy: the largest difference relative to the largest golden
logit must stay under 1e-5 (float32 PyTorch vs float64 here). For a device dtype other than
f32 it also reports what rounding every weight to that dtype does to the logits.
Usage: /usr/bin/python3 tools/check_fixtures.py [DIR]   (default tests/fixtures/models)
"""
import math
import os
import sys
import tomllib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

MODEL_KEYS = {"name", "vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "ffn_dim",
              "qkv_bias", "out_bias", "tie_embeddings", "activation", "norm_eps",
              "norm_position", "final_norm"}
WEIGHTS_KEYS = {"file", "layout", "dtype", "names"}
NAME_KEYS = {"linear", "tok_emb", "pos_emb", "ln1_weight", "ln1_bias", "qkv_weight", "qkv_bias",
             "q_weight", "q_bias", "k_weight", "k_bias", "v_weight", "v_bias", "attn_out_weight",
             "attn_out_bias", "ln2_weight", "ln2_bias", "fc_weight", "fc_bias", "proj_weight",
             "proj_bias", "lnf_weight", "lnf_bias", "head_weight", "head_bias"}
TOLERANCE = 1e-5


def hf_gpt2_names(tensors):
    pre = "transformer." if "transformer.wte.weight" in tensors else ""
    h = pre + "h.{i}."
    return {"linear": "in_out", "tok_emb": pre + "wte.weight", "pos_emb": pre + "wpe.weight",
            "ln1_weight": h + "ln_1.weight", "ln1_bias": h + "ln_1.bias",
            "qkv_weight": h + "attn.c_attn.weight", "qkv_bias": h + "attn.c_attn.bias",
            "attn_out_weight": h + "attn.c_proj.weight", "attn_out_bias": h + "attn.c_proj.bias",
            "ln2_weight": h + "ln_2.weight", "ln2_bias": h + "ln_2.bias",
            "fc_weight": h + "mlp.c_fc.weight", "fc_bias": h + "mlp.c_fc.bias",
            "proj_weight": h + "mlp.c_proj.weight", "proj_bias": h + "mlp.c_proj.bias",
            "lnf_weight": pre + "ln_f.weight", "lnf_bias": pre + "ln_f.bias",
            "head_weight": "lm_head.weight"}


class Weights:
    """Looks tensors up by config key and layer, checking shapes; linear weights come back
    as [in, out] whatever the file's orientation."""

    def __init__(self, tensors, names):
        self.tensors, self.names, self.used = tensors, names, set()

    def get(self, key, shape, layer=None, linear=False):
        name = self.names[key].replace("{i}", str(layer))
        t = self.tensors[name].double().numpy()
        self.used.add(name)
        if linear and self.names["linear"] == "out_in":
            t = t.T
        assert list(t.shape) == list(shape), f"{name}: shape {t.shape}, expected {shape}"
        return t


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


ACTIVATIONS = {
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "gelu": lambda x: 0.5 * x * (1 + torch.erf(torch.from_numpy(x / math.sqrt(2))).numpy()),
    "relu": lambda x: np.maximum(x, 0),
}


def forward(m, w, ids):
    E, H, V, L = m["emb_dim"], m["n_heads"], m["vocab_size"], m["n_layers"]
    Fd, hd, T, eps = m.get("ffn_dim", 4 * E), E // H, len(ids), m.get("norm_eps", 1e-5)
    qkv_bias, post = m.get("qkv_bias", True), m.get("norm_position", "pre") == "post"
    act = ACTIVATIONS[m.get("activation", "gelu_tanh")]
    tok = w.get("tok_emb", [V, E])
    x = tok[ids] + w.get("pos_emb", [m["context_length"], E])[:T]
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(L):
        ln1 = lambda y: layer_norm(y, w.get("ln1_weight", [E], i), w.get("ln1_bias", [E], i), eps)
        ln2 = lambda y: layer_norm(y, w.get("ln2_weight", [E], i), w.get("ln2_bias", [E], i), eps)
        a = x if post else ln1(x)
        if "qkv_weight" in w.names:
            qkv = a @ w.get("qkv_weight", [E, 3 * E], i, linear=True)
            if qkv_bias:
                qkv = qkv + w.get("qkv_bias", [3 * E], i)
            q, k, v = qkv[:, :E], qkv[:, E:2 * E], qkv[:, 2 * E:]
        else:
            q, k, v = (a @ w.get(f"{p}_weight", [E, E], i, linear=True)
                       + (w.get(f"{p}_bias", [E], i) if qkv_bias else 0) for p in "qkv")
        heads = lambda t: t.reshape(T, H, hd).transpose(1, 0, 2)
        scores = heads(q) @ heads(k).transpose(0, 2, 1) / math.sqrt(hd)
        scores[:, causal] = -np.inf
        p = np.exp(scores - scores.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        att = (p @ heads(v)).transpose(1, 0, 2).reshape(T, E)
        att = att @ w.get("attn_out_weight", [E, E], i, linear=True) + w.get("attn_out_bias", [E], i)
        x = ln1(x + att) if post else x + att
        a = x if post else ln2(x)
        hidden = act(a @ w.get("fc_weight", [E, Fd], i, linear=True) + w.get("fc_bias", [Fd], i))
        mlp = hidden @ w.get("proj_weight", [Fd, E], i, linear=True) + w.get("proj_bias", [E], i)
        x = ln2(x + mlp) if post else x + mlp
    if m.get("final_norm", True):
        x = layer_norm(x, w.get("lnf_weight", [E]), w.get("lnf_bias", [E]), eps)
    head = tok if m.get("tie_embeddings", True) else w.get("head_weight", [V, E])
    logits = x @ head.T
    if m.get("out_bias", False):
        logits = logits + w.get("head_bias", [V])
    return logits


def check_case(case_dir):
    with open(os.path.join(case_dir, "config.toml"), "rb") as f:
        cfg = tomllib.load(f)
    assert set(cfg) <= {"model", "weights", "tokenizer"}, f"unknown tables {set(cfg)}"
    m, wcfg = cfg["model"], cfg["weights"]
    assert set(m) <= MODEL_KEYS and set(wcfg) <= WEIGHTS_KEYS, "unknown keys"
    tensors, dtypes, _ = safetensors_io.load_file(os.path.join(case_dir, wcfg["file"]))
    if wcfg["layout"] == "hf-gpt2":
        assert "names" not in wcfg
        names = hf_gpt2_names(tensors)
    else:
        names = wcfg["names"]
        assert set(names) <= NAME_KEYS, f"unknown names {set(names) - NAME_KEYS}"
    with open(os.path.join(case_dir, "ids.txt")) as f:
        ids = np.array([int(s) for s in f.read().strip().split(",")])
    golden = np.load(os.path.join(case_dir, "logits.npy"))
    assert golden.dtype == np.dtype("<f4") and golden.shape == (len(ids), m["vocab_size"])
    assert len(ids) <= m["context_length"] and ids.max() < m["vocab_size"]

    w = Weights(tensors, names)
    err = np.abs(forward(m, w, ids) - golden).max() / np.abs(golden).max()
    assert err < TOLERANCE, f"{case_dir}: relative error {err:.2e}"
    line = f"{os.path.basename(case_dir):28s} ok: rel err {err:.1e}, {len(w.used)} tensors used, " \
           f"{len(tensors) - len(w.used)} ignored ({sorted(set(dtypes.values()))})"
    if wcfg["dtype"] != "f32":
        rounding = {"f16": torch.float16, "bf16": torch.bfloat16}[wcfg["dtype"]]
        rounded = Weights({k: t.to(rounding).float() for k, t in tensors.items()}, names)
        err = np.abs(forward(m, rounded, ids) - golden).max() / np.abs(golden).max()
        line += f"; weights rounded to {wcfg['dtype']}: rel err {err:.1e}"
    print(line)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "models")
    cases = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for case in cases:
        check_case(os.path.join(root, case))
    print(f"{len(cases)} cases checked")


if __name__ == "__main__":
    main()
