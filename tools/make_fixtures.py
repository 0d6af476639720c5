#!/usr/bin/python3
"""Builds the golden-logit fixtures in tests/fixtures/models/<case>/.

Each case instantiates the model classes of a seed notebook (tools/seed_models.py), or the
post-LayerNorm model of tools/postln_model.py, at small dimensions, fills them with
deterministic random weights scaled so that the logits are peaked, rounds the weights to the
dtype of the weight file, runs PyTorch in float32 over deterministic random token ids, and
writes:
  model.safetensors  the weights under their state_dict names (buffers included)
  config.toml        a gpt-vk model config (CONTRACT schema) naming those tensors
  ids.txt            the token ids, comma-separated (as `gpt-vk forward --ids` takes them)
  logits.npy         float32 [T, vocab_size]: PyTorch's logits at every position
Usage: /usr/bin/python3 tools/make_fixtures.py [--out DIR]   (default tests/fixtures/models)
The output is byte-for-byte the same on every run. tools/check_fixtures.py re-derives every
logits.npy from config.toml + model.safetensors alone, with an independent NumPy forward pass.
"""
import argparse
import functools
import math
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import postln_model  # noqa: E402
import seed_models as sm  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

# Weight scales, chosen so that logits are peaked (mean max softmax probability well above
# 0.2) and attention is far from uniform, while activations stay O(1): std of a linear weight
# is LINEAR_GAIN / sqrt(fan_in); the (tied or untied) LM head gives logits of std ~HEAD_GAIN.
LINEAR_GAIN = 1.5
HEAD_GAIN = 4.5
POS_EMB_STD = 0.3
BIAS_STD = 0.1
NORM_GAIN_STD = 0.2
NORM_SHIFT_STD = 0.1


def block_names(prefix, attn, ln1, ln2, fc, proj, q=None, k=None, v=None, qkv=None, bias=True):
    """[weights.names] entries of one transformer block; every argument is a module path
    relative to the block (prefix contains {i})."""
    names = {}
    g, b = ln1[1], ln1[2]
    names["ln1_weight"], names["ln1_bias"] = f"{prefix}.{ln1[0]}.{g}", f"{prefix}.{ln1[0]}.{b}"
    if qkv:
        names["qkv_weight"] = f"{prefix}.{qkv}.weight"
        if bias:
            names["qkv_bias"] = f"{prefix}.{qkv}.bias"
    else:
        for key, path in (("q", q), ("k", k), ("v", v)):
            names[f"{key}_weight"] = f"{prefix}.{path}.weight"
            if bias:
                names[f"{key}_bias"] = f"{prefix}.{path}.bias"
    names["attn_out_weight"], names["attn_out_bias"] = f"{prefix}.{attn}.weight", f"{prefix}.{attn}.bias"
    names["ln2_weight"], names["ln2_bias"] = f"{prefix}.{ln2[0]}.{g}", f"{prefix}.{ln2[0]}.{b}"
    names["fc_weight"], names["fc_bias"] = f"{prefix}.{fc}.weight", f"{prefix}.{fc}.bias"
    names["proj_weight"], names["proj_bias"] = f"{prefix}.{proj}.weight", f"{prefix}.{proj}.bias"
    return names


# --- one builder per model family: returns (model, forward(ids [T]) -> logits [T, V],
#     export() -> [(name, tensor)] for the file, [model] entries, [weights] entries) ----------

def build_seed000(d):
    cfg = {"vocab_size": d["vocab"], "context_length": d["ctx"], "emb_dim": d["emb"],
           "n_heads": d["heads"], "n_layers": d["layers"], "drop_rate": 0.1, "qkv_bias": True}
    model = sm.S000GPTModel(cfg)
    names = {"linear": "out_in", "tok_emb": "tok_emb.weight", "pos_emb": "pos_emb.weight"}
    names.update(block_names("trf_blocks.{i}", "att.out_proj", ("norm1", "scale", "shift"),
                             ("norm2", "scale", "shift"), "ff.layers.0", "ff.layers.2",
                             q="att.W_query", k="att.W_key", v="att.W_value"))
    names.update(lnf_weight="final_norm.scale", lnf_bias="final_norm.shift",
                 head_weight="out_head.weight")
    model_cfg = dict(ffn_dim=4 * d["emb"], qkv_bias=True, out_bias=False, tie_embeddings=False,
                     activation="gelu_tanh", norm_position="pre", final_norm=True)
    return model, lambda ids: model(ids[None])[0], state_dict_items(model), model_cfg, names


def build_seed002(d, activation="gelu"):
    config = sm.S002GPT2Config(vocab_size=d["vocab"], n_positions=d["ctx"], n_embd=d["emb"],
                               n_layer=d["layers"], n_head=d["heads"], dropout=0.1,
                               activation_function=activation)
    model = sm.S002GPT2(config)
    names = {"linear": "out_in", "tok_emb": "wte.weight", "pos_emb": "wpe.weight"}
    names.update(block_names("blocks.{i}", "attn.c_proj", ("ln_1", "weight", "bias"),
                             ("ln_2", "weight", "bias"), "mlp.c_fc", "mlp.c_proj", qkv="attn.c_attn"))
    names.update(lnf_weight="ln_f.weight", lnf_bias="ln_f.bias")
    model_cfg = dict(ffn_dim=4 * d["emb"], qkv_bias=True, out_bias=False, tie_embeddings=True,
                     activation=activation, norm_position="pre", final_norm=True)
    return model, lambda ids: model(ids[None])[0][0], state_dict_items(model), model_cfg, names


def build_seed003(d):
    config = {"vocab_size": d["vocab"], "context_length": d["ctx"], "embedding_dim": d["emb"],
              "n_heads": d["heads"], "n_layers": d["layers"], "dropout_rate": 0.1, "qkv_bias": False}
    model = sm.S003GPTModel(config)
    names = {"linear": "out_in", "tok_emb": "tok_emb.weight", "pos_emb": "pos_emb.weight"}
    names.update(block_names("transformer_blocks.{i}", "att.out_proj", ("norm1", "scale", "shift"),
                             ("norm2", "scale", "shift"), "ff.layers.0", "ff.layers.2",
                             q="att.W_q", k="att.W_k", v="att.W_v", bias=False))
    names.update(lnf_weight="final_norm.scale", lnf_bias="final_norm.shift",
                 head_weight="out_head.weight", head_bias="out_head.bias")
    model_cfg = dict(ffn_dim=4 * d["emb"], qkv_bias=False, out_bias=True, tie_embeddings=False,
                     activation="gelu_tanh", norm_position="pre", final_norm=True)
    return model, lambda ids: model(ids[None])[0], state_dict_items(model), model_cfg, names


def build_seed004(d):
    config = sm.S004GPTConfig(vocab_size=d["vocab"], n_positions=d["ctx"], n_embd=d["emb"],
                              n_layer=d["layers"], n_head=d["heads"], n_inner=d["ffn"])
    model = sm.S004GPT(config)
    names = {"linear": "out_in", "tok_emb": "embeddings.wte.weight",
             "pos_emb": "embeddings.wpe.weight"}
    names.update(block_names("blocks.{i}", "attn.c_proj", ("ln_1", "gamma", "beta"),
                             ("ln_2", "gamma", "beta"), "mlp.c_fc", "mlp.c_proj", qkv="attn.c_attn"))
    names.update(lnf_weight="ln_f.gamma", lnf_bias="ln_f.beta")
    model_cfg = dict(ffn_dim=d["ffn"], qkv_bias=True, out_bias=False, tie_embeddings=True,
                     activation="gelu_tanh", norm_position="pre", final_norm=True)
    return model, lambda ids: model(ids[None])[0][0], state_dict_items(model), model_cfg, names


def build_postln(d):
    model = postln_model.PostLNTransformer(d["vocab"], d["ctx"], d["emb"], d["heads"],
                                           d["layers"], d["ffn"], qkv_bias=True)
    names = {"linear": "in_out", "tok_emb": "token_embedding.weight",
             "pos_emb": "position_embedding.weight"}
    names.update(block_names("layers.{i}", "attn.out", ("attn_norm", "weight", "bias"),
                             ("mlp_norm", "weight", "bias"), "fc", "proj",
                             q="attn.query", k="attn.key", v="attn.value"))
    names.update(head_weight="head.weight", head_bias="head.bias")
    model_cfg = dict(ffn_dim=d["ffn"], qkv_bias=True, out_bias=True, tie_embeddings=False,
                     activation="relu", norm_eps=1e-5, norm_position="post", final_norm=False)
    return model, lambda ids: model(ids[None])[0], state_dict_items(model), model_cfg, names


def build_hf_gpt2(d, activation, prefixed):
    """Hugging Face GPT-2 checkpoint layout, written from the seed 002 model: Conv1D weights
    [in, out] (nn.Linear weights transposed), mask buffers renamed h.{i}.attn.bias. HF's GPT-2
    uses the tanh GELU ("gelu_new"), so for activation gelu_tanh the seed's F.gelu is swapped
    for its tanh form; relu is the seed's own option. prefixed: the GPT2LMHeadModel
    state_dict form ("transformer." prefix, attn.masked_bias scalars, lm_head.weight copy of
    wte); otherwise the form of the hub's model.safetensors (no prefix, no lm_head)."""
    model, _, _, _, _ = build_seed002(d, activation="relu" if activation == "relu" else "gelu")
    if activation == "gelu_tanh":
        for block in model.blocks:
            block.mlp.activation = functools.partial(F.gelu, approximate="tanh")
    transposed = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")

    def export():
        pre = "transformer." if prefixed else ""
        out = []
        for name, t in model.state_dict().items():
            if name == "lm_head.weight":
                continue
            if name.startswith("blocks."):
                name = "h." + name[len("blocks."):]
            if name.endswith("attn.mask"):
                name = name[:-len("mask")] + "bias"
                out.append((pre + name, t))
                if prefixed:
                    out.append((pre + name[:-len("bias")] + "masked_bias", torch.tensor(-1e4)))
                continue
            out.append((pre + name, t.t() if name.endswith(transposed) else t))
        if prefixed:
            out.append(("lm_head.weight", model.lm_head.weight))
        return out

    model_cfg = {} if activation == "gelu_tanh" else dict(activation=activation)
    return model, lambda ids: model(ids[None])[0][0], export, model_cfg, None


def state_dict_items(model):
    return lambda: list(model.state_dict().items())


# --- cases -------------------------------------------------------------------------------------
# d: vocab, ctx (context_length), emb, heads, layers, ffn (where the class takes it), T.
CASES = [
    dict(name="seed000_mha_untied", seed=1000, build=build_seed000, file="BF16", device="f32",
         d=dict(vocab=271, ctx=97, emb=96, heads=3, layers=2, T=90),
         covers="seed 000: separate q/k/v with bias, untied head without bias, gelu_tanh, "
                "3 heads x 32, BF16 file"),
    dict(name="seed002_fused_tied_erf", seed=1002, build=build_seed002, file="F16", device="f32",
         d=dict(vocab=263, ctx=83, emb=96, heads=2, layers=2, T=75),
         covers="seed 002: fused c_attn, tied head (lm_head.weight duplicate in the file), "
                "exact erf gelu, 2 heads x 48, F16 file"),
    dict(name="seed003_noqkvbias_headbias", seed=1003, build=build_seed003, file="BF16",
         device="f32", d=dict(vocab=263, ctx=71, emb=80, heads=5, layers=2, T=71),
         covers="seed 003: separate q/k/v without bias, untied head WITH bias, gelu_tanh, "
                "5 heads x 16, T == context_length, BF16 file"),
    dict(name="seed004_gpt1_hd128", seed=1004, build=build_seed004, file="F16", device="f32",
         d=dict(vocab=199, ctx=101, emb=128, heads=1, layers=2, ffn=136, T=70),
         covers="seed 004: GPT-1 names (embeddings.wte, gamma/beta), fused c_attn, tied head, "
                "gelu_tanh, 1 head x 128, ffn_dim 136 (not 4*emb), F16 file"),
    dict(name="postln_relu_inout", seed=1005, build=build_postln, file="F16", device="f32",
         d=dict(vocab=229, ctx=79, emb=96, heads=6, layers=2, ffn=72, T=78),
         covers="post-LN (x = LN(x + f(x))), no final norm, relu, custom layout with "
                "linear = in_out, untied head with bias, 6 heads x 16, no mask buffers, F16 file"),
    dict(name="hf_gpt2", seed=1006, build=functools.partial(build_hf_gpt2, activation="gelu_tanh",
                                                            prefixed=False),
         file="F32", device="f32", d=dict(vocab=311, ctx=73, emb=64, heads=2, layers=2, T=72),
         covers="hf-gpt2 layout as in the hub's model.safetensors (Conv1D [in, out], "
                "h.{i}.attn.bias buffers), all optional [model] keys left at their defaults, "
                "2 heads x 32, F32 file"),
    dict(name="hf_gpt2_prefixed_relu", seed=1007,
         build=functools.partial(build_hf_gpt2, activation="relu", prefixed=True),
         file="BF16", device="f32", d=dict(vocab=293, ctx=67, emb=64, heads=1, layers=3, T=66),
         covers="hf-gpt2 layout with the transformer. prefix, attn.masked_bias scalars (shape []) "
                "and lm_head.weight present, relu, 1 head x 64, 3 layers, BF16 file"),
]
# Same weights file and golden logits as `of`, stored on the device as `device`.
DEVICE_DTYPE_CASES = [
    dict(name="hf_gpt2_f16_device", of="hf_gpt2", device="f16",
         covers="the F32 hf_gpt2 weights rounded to f16 when uploaded: tolerance 2e-2"),
]


def init_weights(model, gen, vocab):
    """Deterministic random weights; a tied parameter is drawn once (at its first module)."""
    seen = set()
    for _, module in model.named_modules():
        for pname, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            noise = torch.randn(p.shape, generator=gen)
            if isinstance(module, nn.Embedding):
                is_tok = p.shape[0] == vocab
                std = HEAD_GAIN / math.sqrt(p.shape[1]) if is_tok else POS_EMB_STD
                value = noise * std
            elif "LayerNorm" in type(module).__name__:
                gain = pname in ("weight", "scale", "gamma")
                value = 1 + NORM_GAIN_STD * noise if gain else NORM_SHIFT_STD * noise
            elif isinstance(module, (nn.Linear, postln_model.PostLNConv1D)):
                if pname == "bias":
                    value = BIAS_STD * noise
                else:
                    fan_in = p.shape[1] if isinstance(module, nn.Linear) else p.shape[0]
                    is_head = isinstance(module, nn.Linear) and p.shape[0] == vocab
                    value = noise * (HEAD_GAIN if is_head else LINEAR_GAIN) / math.sqrt(fan_in)
            else:
                raise ValueError(f"no init rule for {type(module).__name__}.{pname}")
            with torch.no_grad():
                p.copy_(value)


def round_to(model, dtype_name):
    """Rounds parameters and buffers to the file dtype, kept in float32, so PyTorch computes
    with exactly the values the file holds."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            t.copy_(t.to(TORCH_DTYPE[dtype_name]).to(torch.float32))


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v).replace("e-05", "e-5")
    if isinstance(v, int):
        return str(v)
    return '"' + v + '"'


def write_config(path, case, d, model_cfg, names, weights_file, device_dtype):
    lines = [f"# {case['covers']}",
             "# Generated by tools/make_fixtures.py; do not edit.",
             "[model]", f'name = "{case["name"]}"',
             f"vocab_size = {d['vocab']}", f"context_length = {d['ctx']}",
             f"emb_dim = {d['emb']}", f"n_heads = {d['heads']}", f"n_layers = {d['layers']}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in model_cfg.items()]
    lines += ["", "[weights]", f'file = "{weights_file}"',
              f'layout = "{"custom" if names else "hf-gpt2"}"', f'dtype = "{device_dtype}"']
    if names:
        lines += ["", "[weights.names]"] + [f'{k} = "{v}"' for k, v in names.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def logit_stats(logits):
    probs = torch.softmax(logits.double(), dim=-1)
    return dict(mean_max_prob=probs.max(dim=-1).values.mean().item(),
                min=logits.min().item(), max=logits.max().item())


def rel_err(a, b):
    return (a.double() - b.double()).abs().max().item() / b.abs().max().item()


def make_case(case, out_dir):
    d = case["d"]
    torch.manual_seed(case["seed"])  # the seed classes draw their own init from the global RNG
    gen = torch.Generator().manual_seed(case["seed"])
    model, forward, export, model_cfg, names = case["build"](d)
    model.eval()
    init_weights(model, gen, d["vocab"])
    round_to(model, case["file"])
    ids = torch.randint(0, d["vocab"], (d["T"],), generator=gen)
    with torch.no_grad():
        logits = forward(ids).float().contiguous()
        # float64 run of the same weights: how far float32 itself is from exact
        logits64 = forward_f64(model, forward, ids)
    assert logits.shape == (d["T"], d["vocab"])

    case_dir = os.path.join(out_dir, case["name"])
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    safetensors_io.save_file(export(), os.path.join(case_dir, "model.safetensors"),
                             case["file"], metadata={"format": "pt"})
    write_config(os.path.join(case_dir, "config.toml"), case, d, model_cfg, names,
                 "model.safetensors", case["device"])
    write_ids_logits(case_dir, ids, logits)
    stats = logit_stats(logits)
    stats["f32_vs_f64"] = rel_err(logits, logits64)
    return dict(case=case, model=model, forward=forward, ids=ids, logits=logits,
                model_cfg=model_cfg, names=names), stats


def forward_f64(model, forward, ids):
    model.double()
    try:
        return forward(ids)
    finally:
        model.float()


def write_ids_logits(case_dir, ids, logits):
    with open(os.path.join(case_dir, "ids.txt"), "w") as f:
        f.write(",".join(str(i) for i in ids.tolist()) + "\n")
    np.save(os.path.join(case_dir, "logits.npy"), logits.numpy().astype("<f4"))


def make_device_dtype_case(spec, base, out_dir):
    """A config that reuses another case's weights and golden logits with another device
    dtype. Also measures what rounding the weights to that dtype alone does to the logits."""
    case, logits = base["case"], base["logits"]
    case_dir = os.path.join(out_dir, spec["name"])
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    write_config(os.path.join(case_dir, "config.toml"), spec, case["d"], base["model_cfg"],
                 base["names"], f"../{case['name']}/model.safetensors", spec["device"])
    write_ids_logits(case_dir, base["ids"], logits)
    round_to(base["model"], {"f16": "F16", "bf16": "BF16"}[spec["device"]])
    with torch.no_grad():
        rounded = base["forward"](base["ids"]).float()
    return dict(logit_stats(logits), weight_rounding_err=rel_err(rounded, logits))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "models"))
    args = parser.parse_args()
    torch.set_num_threads(1)  # one reduction order, so the bytes are the same on every run
    os.makedirs(args.out, exist_ok=True)
    built = {}
    for case in CASES:
        built[case["name"]], stats = make_case(case, args.out)
        report(case["name"], case["d"], case["file"], case["device"], stats, args.out)
    for spec in DEVICE_DTYPE_CASES:
        base = built[spec["of"]]
        stats = make_device_dtype_case(spec, base, args.out)
        report(spec["name"], base["case"]["d"], base["case"]["file"], spec["device"], stats,
               args.out)


def report(name, d, file_dtype, device, stats, out_dir):
    case_dir = os.path.join(out_dir, name)
    size = sum(os.path.getsize(os.path.join(case_dir, f)) for f in os.listdir(case_dir))
    extra = " ".join(f"{k}={v:.2e}" for k, v in stats.items() if k.endswith("err") or "vs" in k)
    print(f"{name:28s} V={d['vocab']} ctx={d['ctx']} E={d['emb']} H={d['heads']} "
          f"L={d['layers']} T={d['T']} file={file_dtype} device={device} "
          f"p_max={stats['mean_max_prob']:.2f} logits=[{stats['min']:.1f},{stats['max']:.1f}] "
          f"{extra} {size / 1024:.0f}KiB")


if __name__ == "__main__":
    main()
