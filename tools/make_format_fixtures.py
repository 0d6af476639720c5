#!/usr/bin/python3
"""Writes tests/fixtures/formats/: model files in the formats people hold, made by PyTorch.

torch/ (torch.save files written by Debian's python3-torch: zips, PyTorch >= 1.6's format, and
the legacy format):
  gpt2_lmhead_f32.pt  tests/fixtures/models/hf_gpt2's weights as GPT2LMHeadModel's
                      state_dict(): "transformer." keys, lm_head.weight sharing wte's storage,
                      the attn.bias / attn.masked_bias buffers; F32 (golden logits:
                      tests/fixtures/models/hf_gpt2/logits.npy)
  gpt2_f16.pt         the same as GPT2Model's state dict (no prefix), F16
  gpt2_bf16.pt        the same, BF16
  noncontiguous.pt    a state dict whose wte.weight is a transposed view (strides [1, V])
  checkpoint_f16.pt   gpt2_f16's weights as nanoGPT's ckpt.pt holds them ("_orig_mod." names
                      under "model", with the optimizer, iter_num and a 0-dim best_val_loss)
  views.pt            a transposed 4 x 3 view and an expanded 2 x 3 one (stride 0)
  evil_os_system.pt   a dict whose pickle calls os.system (pickled as posix.system)
  evil_eval.pt        the same with builtins.eval
  gpt2_lmhead_legacy.pt  gpt2_lmhead_f32's state dict in F16 in torch.save's legacy format
                      (_use_new_zipfile_serialization=False, as PyTorch before 1.6 wrote
                      every file): pickles, then the storages; lm_head.weight shares wte's storage
  legacy.pt           small tensors of several dtypes, a transposed view and a slice sharing
                      one storage, in the legacy format (a seed of tests/fuzz's torch target)
  evil_legacy.pt      evil_os_system's dict in the legacy format
  tiny_*.pt           small state dicts and a checkpoint dict, seeds of tests/fuzz's torch target
  protocol1.pt        a small state dict saved with pickle_protocol=1 (text INT opcodes: I01
                      for True), which torch.load reads
  legacy_protocol1.pt the same in the legacy format (its magic number pickled as LONG text)
  two_archives.pt     two torch.save archives (a/ and z/) in one zip, which torch.load refuses
  *.toml              configs naming them (hf-gpt2 layout)
gpt1_snapshot/ (a Hugging Face snapshot of model_type openai-gpt, as
  OpenAIGPTLMHeadModel.save_pretrained writes it: every key under "transformer."):
  config.json, model.safetensors (F32), ids.txt and logits.npy: PyTorch's float32 logits
  of a GPT-1 written here after transformers' modeling_openai.py (post-LN blocks, no
  final LayerNorm, gelu_new, tied head). Its vocab.json + merges.txt (a 97-token BPE of
  GPT-1's kind) come from tools/make_gpt1_tokenizer_fixtures.js.

Run: /usr/bin/python3 tools/make_format_fixtures.py   (~5 s; the same bytes on every run
except the zip timestamps torch writes and the legacy format's storage keys, which are object
addresses: nothing reads either, so keep the committed files unless their content changes)
"""
import collections
import json
import math
import os
import pathlib
import sys

import numpy as np
import torch
from torch import nn

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "formats"
sys.path.insert(0, str(ROOT / "tools"))
import safetensors_io  # noqa: E402


class Evil:
    """What a malicious checkpoint holds: unpickling it would run a command."""

    def __init__(self, fn):
        self.fn = fn

    def __reduce__(self):
        return (self.fn, ("touch /tmp/gptvk-pwned",))


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(nn.Module):
    """transformers' Conv1D: weight [in, out]."""

    def __init__(self, nx, nf):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.empty(nf))

    def forward(self, x):
        return x @ self.weight + self.bias


class Block(nn.Module):
    """modeling_openai.py's Block: n = ln_1(x + attn(x)); h = ln_2(n + mlp(n))."""

    def __init__(self, n_embd, n_head, n_ctx):
        super().__init__()
        self.n_head = n_head
        self.c_attn, self.c_proj = Conv1D(n_embd, 3 * n_embd), Conv1D(n_embd, n_embd)
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5), nn.LayerNorm(n_embd, eps=1e-5)
        self.c_fc, self.c_proj2 = Conv1D(n_embd, 4 * n_embd), Conv1D(4 * n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))

    def forward(self, x):
        T, C = x.shape[1], x.shape[2]
        q, k, v = self.c_attn(x).split(C, dim=2)
        heads = lambda t: t.view(1, T, self.n_head, C // self.n_head).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        w = q @ k.transpose(-1, -2) / math.sqrt(v.size(-1))
        b = self.bias[:, :, :T, :T]
        w = torch.softmax(w * b + -1e4 * (1 - b), dim=-1)
        a = self.c_proj((w @ v).transpose(1, 2).reshape(1, T, C))
        n = self.ln_1(x + a)
        return self.ln_2(n + self.c_proj2(gelu_new(self.c_fc(n))))


def gpt1_snapshot():
    torch.manual_seed(35)
    V, E, H, L, ctx, T = 97, 64, 2, 2, 40, 36
    tok, pos = nn.Embedding(V, E), nn.Embedding(ctx, E)
    blocks = [Block(E, H, ctx) for _ in range(L)]
    g = torch.Generator().manual_seed(350)
    with torch.no_grad():
        tok.weight.copy_(torch.randn(V, E, generator=g) * 0.6)
        pos.weight.copy_(torch.randn(ctx, E, generator=g) * 0.3)
        for b in blocks:
            for conv in (b.c_attn, b.c_proj, b.c_fc, b.c_proj2):
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) * 1.5 / math.sqrt(conv.weight.shape[0]))
                conv.bias.copy_(torch.randn(conv.bias.shape, generator=g) * 0.1)
            for ln in (b.ln_1, b.ln_2):
                ln.weight.copy_(1 + torch.randn(E, generator=g) * 0.2)
                ln.bias.copy_(torch.randn(E, generator=g) * 0.1)
        ids = torch.randint(0, V, (T,), generator=g)
        x = tok(ids)[None] + pos(torch.arange(T))[None]
        for b in blocks:
            x = b(x)
        logits = (x[0] @ tok.weight.T).float().numpy()
    sd = {"transformer.tokens_embed.weight": tok.weight, "transformer.positions_embed.weight": pos.weight}
    for i, b in enumerate(blocks):
        p = f"transformer.h.{i}."
        sd.update({p + "attn.c_attn.weight": b.c_attn.weight, p + "attn.c_attn.bias": b.c_attn.bias,
                   p + "attn.c_proj.weight": b.c_proj.weight, p + "attn.c_proj.bias": b.c_proj.bias,
                   p + "ln_1.weight": b.ln_1.weight, p + "ln_1.bias": b.ln_1.bias,
                   p + "mlp.c_fc.weight": b.c_fc.weight, p + "mlp.c_fc.bias": b.c_fc.bias,
                   p + "mlp.c_proj.weight": b.c_proj2.weight, p + "mlp.c_proj.bias": b.c_proj2.bias,
                   p + "ln_2.weight": b.ln_2.weight, p + "ln_2.bias": b.ln_2.bias,
                   p + "attn.bias": b.bias})
    d = OUT / "gpt1_snapshot"
    d.mkdir(parents=True, exist_ok=True)
    safetensors_io.save_file([(k, v.detach()) for k, v in sd.items()], str(d / "model.safetensors"), "F32",
                             {"format": "pt"})
    (d / "config.json").write_text(json.dumps({
        "architectures": ["OpenAIGPTLMHeadModel"], "model_type": "openai-gpt", "afn": "gelu", "n_embd": E,
        "n_head": H, "n_layer": L, "n_positions": ctx, "vocab_size": V, "layer_norm_epsilon": 1e-5}, indent=2) + "\n")
    (d / "ids.txt").write_text(",".join(str(int(i)) for i in ids) + "\n")
    np.save(d / "logits.npy", logits.astype("<f4"))


def two_archives(path, first, second):
    """first's torch.save archive as a/, second's as z/, in one zip."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        for folder, sd in (("a", first), ("z", second)):
            buf = io.BytesIO()
            torch.save(sd, buf)
            with zipfile.ZipFile(buf) as z:
                for info in z.infolist():
                    out.writestr(folder + "/" + info.filename.split("/", 1)[1], z.read(info))


def torch_files():
    d = OUT / "torch"
    d.mkdir(parents=True, exist_ok=True)
    fx = ROOT / "tests/fixtures/models/hf_gpt2"
    sd, _, _ = safetensors_io.load_file(str(fx / "model.safetensors"))
    lm = {"transformer." + k: v.clone() for k, v in sd.items()}
    lm["lm_head.weight"] = lm["transformer.wte.weight"]  # tied: one storage, as state_dict() gives
    torch.save(lm, d / "gpt2_lmhead_f32.pt")
    torch.save({k: v.half() for k, v in sd.items()}, d / "gpt2_f16.pt")
    torch.save({k: v.bfloat16() for k, v in sd.items()}, d / "gpt2_bf16.pt")
    # A training checkpoint as nanoGPT's train.py saves it: the compiled model's state dict
    # ("_orig_mod." names) under "model", beside the optimizer and a 0-dim loss tensor.
    torch.save({"model": {"_orig_mod." + k: v.half() for k, v in sd.items()},
                "optimizer": {"state": {}, "param_groups": [{"lr": 6e-4, "params": [0, 1]}]},
                "iter_num": 5, "best_val_loss": torch.tensor(2.5), "config": {"n_layer": 2}},
               d / "checkpoint_f16.pt")
    nc = {k: v.clone() for k, v in sd.items()}
    nc["wte.weight"] = sd["wte.weight"].t().contiguous().t()  # same values, column-major
    torch.save(nc, d / "noncontiguous.pt")
    torch.save({"wte.weight": torch.zeros(2, 2), "x": Evil(os.system)}, d / "evil_os_system.pt")
    torch.save({"wte.weight": torch.zeros(2, 2), "x": Evil(eval)}, d / "evil_eval.pt")
    # An OrderedDict with the _metadata state_dict() attaches, as transformers' files hold.
    legacy = collections.OrderedDict((k, v.half()) for k, v in lm.items() if k != "lm_head.weight")
    legacy["lm_head.weight"] = legacy["transformer.wte.weight"]
    legacy._metadata = collections.OrderedDict([("", {"version": 1}), ("transformer", {"version": 1})])
    torch.save(legacy, d / "gpt2_lmhead_legacy.pt", _use_new_zipfile_serialization=False)
    w12 = torch.arange(12, dtype=torch.float32).view(3, 4)
    torch.save({"w": w12, "w_t": w12.t(), "rows": w12[1:], "half": w12.half(), "bf": w12.bfloat16(),
                "idx": torch.arange(3)}, d / "legacy.pt", _use_new_zipfile_serialization=False)
    torch.save({"wte.weight": torch.zeros(2, 2), "x": Evil(os.system)}, d / "evil_legacy.pt",
               _use_new_zipfile_serialization=False)
    # Tiny seeds for tests/fuzz (corpus/torch): what state dicts and checkpoints hold.
    w = torch.arange(12, dtype=torch.float32).view(3, 4)
    tiny = nn.Linear(4, 3)
    torch.save(tiny.state_dict(), d / "tiny_state_dict.pt")
    torch.save({"w": w, "w_t": w.t(), "half": w.half(), "bf": w.bfloat16(), "idx": torch.arange(3),
                "mask": torch.ones(2, dtype=torch.bool), "view": w[1:], "p": nn.Parameter(w.clone())},
               d / "tiny_mixed.pt")
    torch.save({"model": tiny.state_dict(), "epoch": 3, "lr": 0.1, "name": "run", "betas": (0.9, 0.99),
                "hist": [1, 2.5, None, True]}, d / "tiny_checkpoint.pt")
    # Views saved as they are: a transposed matrix (read in row-major order) and an expanded
    # row (its elements repeated: refused).
    torch.save({"w_t": w.t(), "rows": torch.arange(3.0).expand(2, 3)}, d / "views.pt")
    protocol1 = {"w": w, "p": nn.Parameter(w.clone()), "mask": torch.ones(2, dtype=torch.bool)}
    torch.save(protocol1, d / "protocol1.pt", pickle_protocol=1)
    torch.save(protocol1, d / "legacy_protocol1.pt", pickle_protocol=1, _use_new_zipfile_serialization=False)
    two_archives(d / "two_archives.pt", {"w": w}, {"w": -w})
    model = (fx / "config.toml").read_text().split("\n[model]\n")[1].split("\n[weights]")[0]
    for name, dtype in [("gpt2_lmhead_f32", "f32"), ("gpt2_f16", "f32"), ("gpt2_bf16", "f32"), ("noncontiguous", "f32"),
                        ("checkpoint_f16", "f32"),
                        ("gpt2_lmhead_legacy", "f32"), ("evil_os_system", "f32"), ("evil_eval", "f32"),
                        ("evil_legacy", "f32")]:
        (d / f"{name}.toml").write_text(f"# Generated by tools/make_format_fixtures.py; do not edit.\n[model]\n{model}\n\n"
                                        f"[weights]\nfile = \"{name}.pt\"\nlayout = \"hf-gpt2\"\ndtype = \"{dtype}\"\n")


if __name__ == "__main__":
    gpt1_snapshot()
    torch_files()
    print("wrote", sorted(str(p.relative_to(OUT)) for p in OUT.rglob("*") if p.is_file()))
