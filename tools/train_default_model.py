"""Trains gpt-vk's bundled default model (models/default/) on CPU, from scratch.

A small GPT-2 (pre-LN, GELU tanh, tied embeddings, the real 50257-token GPT-2
vocabulary and full softmax) trained on Jane Austen's six novels (public domain, from
Debian's r-cran-janeaustenr, see tools/austen_corpus.py), so that a new user's first
`gpt-vk generate` prints recognisable English. The whole recipe:

    nice -n 10 /usr/bin/python3 tools/train_default_model.py --minutes 45

re-creates models/default/{model.safetensors, config.toml, heldout.txt,
reference.json, README.md}; `--resume --minutes M` continues from the checkpoint in
--work for M more minutes (see tools/train_resume.py), and `--reference-only` recomputes
reference.json (held-out perplexity, a greedy continuation) from the committed weights.
The learning-rate schedule follows the fraction of the wall-clock budget spent, so a run
always ends with a fully decayed learning rate however fast the machine is (the result
depends on the machine's speed).
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time

# One BLAS thread: the training shares a 2-core machine (set before numpy/torch load).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from austen_corpus import extract_text  # noqa: E402
from gpt2_reference_encoder import GPT2Tokenizer  # noqa: E402
from train_resume import (FRESH_LR, RESUME_LR, load_resume_state, recreate_commands,  # noqa: E402
                          save_checkpoint, training_summary)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_SIZE = 50257
HELDOUT_FRACTION = 0.05   # contiguous tail of the corpus never trained on
HELDOUT_FILE_BYTES = 40_000  # the part of it shipped as heldout.txt


# ----------------------------------------------------------------------------- data

def clean_text(raw: str) -> str:
    """Unwraps Gutenberg's hard-wrapped lines into one line a paragraph and collapses
    the double spaces after full stops, so the model learns prose, not line breaks."""
    paragraphs = []
    for block in raw.replace("\r", "").split("\n\n"):
        lines = [" ".join(line.split()) for line in block.split("\n")]
        text = " ".join(line for line in lines if line)
        if text:
            paragraphs.append(text)
    return "\n\n".join(paragraphs) + "\n"


def split_heldout(text: str):
    """Returns (train_text, heldout_text): the held-out part is the last
    HELDOUT_FRACTION of the corpus, starting at a paragraph boundary."""
    cut = text.index("\n\n", int(len(text) * (1 - HELDOUT_FRACTION))) + 2
    return text[:cut], text[cut:]


def heldout_excerpt(heldout: str) -> str:
    """The first ~HELDOUT_FILE_BYTES of the held-out text, ending with a paragraph."""
    end = heldout.index("\n\n", HELDOUT_FILE_BYTES)
    return heldout[:end] + "\n"


# ---------------------------------------------------------------------------- model

class Block(nn.Module):
    def __init__(self, c: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.c_attn = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x, mask):
        b, t, c = x.shape
        h = self.n_heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, emb_dim: int, n_layers: int, n_heads: int, context: int):
        super().__init__()
        self.context = context
        self.wte = nn.Embedding(VOCAB_SIZE, emb_dim)
        self.wpe = nn.Embedding(context, emb_dim)
        self.h = nn.ModuleList(Block(emb_dim, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(emb_dim, eps=1e-5)
        self.register_buffer("mask", torch.ones(context, context).triu(1).bool(),
                             persistent=False)
        # GPT-2 initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2L).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x, self.mask)
        return self.ln_f(x) @ self.wte.weight.t()  # tied LM head, no bias


def hf_gpt2_state(model: GPT) -> dict:
    """The weights under Hugging Face GPT-2 names; Conv1D weights are [in, out],
    i.e. the transpose of nn.Linear's [out, in]."""
    out = {"wte.weight": model.wte.weight, "wpe.weight": model.wpe.weight,
           "ln_f.weight": model.ln_f.weight, "ln_f.bias": model.ln_f.bias}
    for i, b in enumerate(model.h):
        p = f"h.{i}."
        out[p + "ln_1.weight"], out[p + "ln_1.bias"] = b.ln_1.weight, b.ln_1.bias
        out[p + "ln_2.weight"], out[p + "ln_2.bias"] = b.ln_2.weight, b.ln_2.bias
        for hf, lin in (("attn.c_attn", b.c_attn), ("attn.c_proj", b.attn_proj),
                        ("mlp.c_fc", b.c_fc), ("mlp.c_proj", b.mlp_proj)):
            out[p + hf + ".weight"] = lin.weight.t()
            out[p + hf + ".bias"] = lin.bias
    return {k: v.detach().contiguous() for k, v in out.items()}


def load_hf_gpt2_state(model: GPT, state: dict) -> None:
    with torch.no_grad():
        model.wte.weight.copy_(state["wte.weight"])
        model.wpe.weight.copy_(state["wpe.weight"])
        model.ln_f.weight.copy_(state["ln_f.weight"])
        model.ln_f.bias.copy_(state["ln_f.bias"])
        for i, b in enumerate(model.h):
            p = f"h.{i}."
            b.ln_1.weight.copy_(state[p + "ln_1.weight"])
            b.ln_1.bias.copy_(state[p + "ln_1.bias"])
            b.ln_2.weight.copy_(state[p + "ln_2.weight"])
            b.ln_2.bias.copy_(state[p + "ln_2.bias"])
            for hf, lin in (("attn.c_attn", b.c_attn), ("attn.c_proj", b.attn_proj),
                            ("mlp.c_fc", b.c_fc), ("mlp.c_proj", b.mlp_proj)):
                lin.weight.copy_(state[p + hf + ".weight"].t())
                lin.bias.copy_(state[p + hf + ".bias"])


# ------------------------------------------------------------------------ safetensors

def write_safetensors_f16(path: str, tensors: dict) -> None:
    """safetensors: u64 little-endian header size, JSON header, then the raw data
    (here every tensor as little-endian IEEE half, in name order)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].to(torch.float16).numpy().astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # align the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path: str) -> dict:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F16": np.float16, "F32": np.float32}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float32))
    return out


# ------------------------------------------------------------------------- evaluation

@torch.no_grad()
def sliding_window_perplexity(model: GPT, ids: list, n: int, s: int):
    """The protocol of `gpt-vk perplexity --context N --stride S`: windows of N tokens
    every S tokens; each window scores only the targets not scored before; the first
    token of the text is never a target. Returns (tokens_scored, perplexity)."""
    nll, count, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), s):
        end = min(begin + n, len(ids))
        first_target = max(begin + 1, prev_end)
        if first_target < end:
            logits = model(torch.tensor([ids[begin:end]]))[0].double()
            logp = logits.log_softmax(dim=-1)
            targets = torch.tensor(ids[first_target:end])
            rows = torch.arange(first_target - 1, end - 1) - begin
            nll -= logp[rows, targets].sum().item()
            count += end - first_target
        prev_end = end
        if end == len(ids):
            break
    return count, math.exp(nll / count)


@torch.no_grad()
def generate(model: GPT, tok: GPT2Tokenizer, prompt: str, n: int, temperature: float,
             top_k: int, seed: int) -> str:
    g = torch.Generator().manual_seed(seed)
    ids = tok.encode(prompt)
    for _ in range(n):
        logits = model(torch.tensor([ids[-model.context:]]))[0, -1]
        if temperature == 0:
            nxt = int(logits.argmax())
        else:
            logits = logits / temperature
            kth = torch.topk(logits, top_k).values[-1]
            probs = logits.masked_fill(logits < kth, float("-inf")).softmax(-1)
            nxt = int(torch.multinomial(probs, 1, generator=g))
        ids.append(nxt)
    return tok.decode(ids)


@torch.no_grad()
def greedy_reference(model: GPT, tok: GPT2Tokenizer, prompt: str, n: int) -> dict:
    """PyTorch's greedy continuation of `prompt` (n tokens) and, per step, the gap between
    the two largest logits: tests compare gpt-vk's greedy ids with these where the gap
    leaves no room for f32 rounding to change the pick."""
    ids, gaps = tok.encode(prompt), []
    for _ in range(n):
        logits = model(torch.tensor([ids[-model.context:]]))[0, -1].double()
        top = torch.topk(logits, 2).values
        gaps.append(round(float(top[0] - top[1]), 6))
        ids.append(int(logits.argmax()))
    return {"prompt": prompt, "ids": ids[len(ids) - n:], "top2_gaps": gaps}


# --------------------------------------------------------------------------- training

def lr_at(progress: float, peak: float, warmup: float) -> float:
    """Linear warmup over the first `warmup` of the budget, then cosine to peak/10."""
    if progress < warmup:
        return peak * progress / warmup
    x = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * x)))


@torch.no_grad()
def mean_loss(model: GPT, data: torch.Tensor, block: int, batches: int, batch: int,
              seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(batches):
        starts = torch.randint(0, len(data) - block - 1, (batch,), generator=g)
        x = torch.stack([data[i:i + block] for i in starts])
        y = torch.stack([data[i + 1:i + block + 1] for i in starts])
        losses.append(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
    return sum(losses) / len(losses)


def train(model: GPT, train_ids: torch.Tensor, val_ids: torch.Tensor, args,
          prior: dict = None, opt_state: dict = None) -> dict:
    """Trains for args.minutes; with `prior` (a resumed run) the step, token and minute
    counters continue from its totals."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    prior = prior or {"steps": 0, "train_tokens": 0, "train_minutes": 0.0, "runs": []}
    step0, tokens0 = prior["steps"], prior["train_tokens"]
    budget = args.minutes * 60.0
    # A resumed run draws other batches than the run before it did.
    g = torch.Generator().manual_seed(args.seed + step0)
    start, step, tokens, ema = time.time(), step0, tokens0, None
    last_ckpt = start
    total_minutes = lambda: prior["train_minutes"] + (time.time() - start) / 60  # noqa: E731
    while True:
        elapsed = time.time() - start
        if elapsed >= budget or (args.max_steps and step - step0 >= args.max_steps):
            break
        progress = elapsed / budget
        lr = lr_at(progress, args.lr, args.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train_ids) - args.block - 1, (args.batch,), generator=g)
        x = torch.stack([train_ids[i:i + args.block] for i in starts])
        y = torch.stack([train_ids[i + 1:i + args.block + 1] for i in starts])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % args.log_every == 0:
            print(f"step {step} tokens {tokens} min {elapsed / 60:.1f} lr {lr:.2e} "
                  f"loss {loss.item():.3f} ema {ema:.3f} "
                  f"tok/s {(tokens - tokens0) / max(elapsed, 1e-9):.0f}",
                  flush=True)
        if time.time() - last_ckpt > args.checkpoint_minutes * 60:
            save_checkpoint(args.checkpoint, model, opt, step, tokens, total_minutes())
            val = mean_loss(model, val_ids, args.block, 4, args.batch, seed=1)
            print(f"checkpoint at step {step}: held-out loss {val:.3f}", flush=True)
            last_ckpt = time.time()
    minutes = (time.time() - start) / 60
    save_checkpoint(args.checkpoint, model, opt, step, tokens, total_minutes())
    run = {"resumed": step0 > 0, "optimizer_state": opt_state is not None,
           "minutes": round(minutes, 1), "steps": step - step0, "tokens": tokens - tokens0,
           "lr": args.lr}
    return {"steps": step, "train_tokens": tokens,
            "train_minutes": round(prior["train_minutes"] + minutes, 1),
            "final_train_loss_ema": round(ema, 3), "runs": prior["runs"] + [run]}


# ------------------------------------------------------------------------------ main

CONFIG_TOML = """\
# gpt-vk's bundled default model: a small GPT-2 trained on Jane Austen's novels by
# tools/train_default_model.py (see README.md beside this file).
[model]
name = "{name}"
vocab_size = {vocab}
context_length = {context}
emb_dim = {emb}
n_heads = {heads}
n_layers = {layers}
ffn_dim = {ffn}
qkv_bias = true
out_bias = false
tie_embeddings = true
activation = "gelu_tanh"
norm_eps = 1e-5
norm_position = "pre"
final_norm = true

[weights]
file = "model.safetensors"
layout = "hf-gpt2"
dtype = "f16"

[tokenizer]
vocab = "../gpt2-tokenizer/encoder.json"
merges = "../gpt2-tokenizer/vocab.bpe"
"""


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=45.0, help="wall-clock training budget")
    ap.add_argument("--max-steps", type=int, default=0, help="stop earlier after N steps")
    ap.add_argument("--out", default=os.path.join(REPO, "models/default"))
    ap.add_argument("--tokenizer-dir", default=os.path.join(REPO, "models/gpt2-tokenizer"))
    ap.add_argument("--work", default="/tmp/gptvk-default-model",
                    help="corpus, token cache and checkpoint (not committed)")
    ap.add_argument("--emb", type=int, default=128)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--block", type=int, default=256, help="training sequence length")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=None,
                    help=f"peak learning rate ({FRESH_LR:g}; {RESUME_LR:g} with --resume)")
    ap.add_argument("--warmup", type=float, default=0.03, help="fraction of the budget")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--checkpoint-minutes", type=float, default=5.0)
    ap.add_argument("--export-only", action="store_true",
                    help="skip training; export the checkpoint in --work")
    ap.add_argument("--reference-only", action="store_true",
                    help="skip training; recompute reference.json from the weights in --out")
    ap.add_argument("--resume", action="store_true",
                    help="continue training the checkpoint in --work for --minutes more")
    args = ap.parse_args()
    if args.lr is None:
        args.lr = RESUME_LR if args.resume else FRESH_LR
    return args


def load_corpus(args, tok: GPT2Tokenizer):
    """Returns (train_ids, heldout_ids, heldout_file_text), caching the ids in --work."""
    os.makedirs(args.work, exist_ok=True)
    raw_path = os.path.join(args.work, "austen.txt")
    if not os.path.exists(raw_path):
        extract_text(raw_path)
    with open(raw_path, encoding="utf-8") as f:
        train_text, heldout = split_heldout(clean_text(f.read()))
    cache = os.path.join(args.work, "ids.npz")
    if os.path.exists(cache):
        z = np.load(cache)
        train_ids, heldout_ids = z["train"], z["heldout"]
    else:
        t = time.time()
        train_ids = np.array(tok.encode(train_text), dtype=np.uint16)
        heldout_ids = np.array(tok.encode(heldout), dtype=np.uint16)
        np.savez(cache, train=train_ids, heldout=heldout_ids)
        print(f"encoded corpus in {time.time() - t:.0f} s", flush=True)
    to_tensor = lambda a: torch.from_numpy(a.astype(np.int64))  # noqa: E731
    return to_tensor(train_ids), to_tensor(heldout_ids), heldout_excerpt(heldout)


def write_readme(path: str, args, ref: dict, stats: dict, size_bytes: int, n_params: int,
                 samples: list) -> None:
    sample_text = "\n\n".join(f"Prompt `{p}`, {how}:\n\n```text\n{out.strip()}\n```"
                                for p, how, out in samples)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"""# The default model of gpt-vk

A small GPT-2 trained from scratch on CPU by `tools/train_default_model.py`, so that
`gpt-vk generate --config models/default/config.toml --prompt "..."` prints English
without downloading anything. It is a toy: it writes Austen-flavoured sentences that
drift in meaning; use real GPT-2 weights for anything else.

| | |
| --- | --- |
| architecture | GPT-2 (pre-LN, GELU tanh, learned positions, tied embeddings) |
| size | {args.layers} layers, emb_dim {args.emb}, {args.heads} heads, ffn {4 * args.emb}, context {args.context}; {n_params / 1e6:.1f} M parameters |
| vocabulary | the real GPT-2 tokenizer, 50257 tokens, full softmax (`../gpt2-tokenizer/`) |
| file | `model.safetensors`, F16, Hugging Face GPT-2 tensor names (`hf-gpt2` layout), {size_bytes / 1e6:.1f} MB |
| training data | Jane Austen's six novels, {ref['train_tokens_in_corpus']} GPT-2 tokens after removing the last 5% as held-out text |
| training | {ref['train_tokens']} tokens seen ({ref['train_tokens'] / ref['train_tokens_in_corpus']:.2f} epochs) in {ref['train_minutes']} minutes on 1 CPU thread: {training_summary(stats, args)}; AdamW weight decay {args.weight_decay}, batch {args.batch} x {args.block} tokens, grad clip 1.0 |
| final training loss | {ref['final_train_loss_ema']} (moving average) |
| held-out perplexity | {ref['perplexity']:.2f} on `heldout.txt` ({ref['tokens_scored']} tokens, context {ref['context']}, stride {ref['stride']}, f16 weights computed in f32) |

## Training data and licence

The texts of *Sense and Sensibility* (1811), *Pride and Prejudice* (1813), *Mansfield
Park* (1814), *Emma* (1815), *Northanger Abbey* and *Persuasion* (1817) are in the
public domain; they come from the Debian package `r-cran-janeaustenr` (Julia Silge's
CRAN package janeaustenr, MIT licence, which took them from Project Gutenberg).
`tools/austen_corpus.py` fetches it with `apt-get download` and reads the texts out of
the package's R data files without R. Hard line wraps are joined into paragraphs.
The weights are derived from these public-domain texts only.

`heldout.txt` is the first {len(open(os.path.join(args.out, 'heldout.txt'), 'rb').read())} bytes of the held-out tail of the corpus (the
end of *Persuasion*), which training never saw. `reference.json` gives the model's
perplexity on it with the sliding-window protocol of `gpt-vk perplexity` (windows of
`context` tokens every `stride` tokens, each target scored once, the first token
never), computed in PyTorch from the stored f16 weights, and under `prefix` the same
over the text's first 16 strides and a window (what the tests score); the engine should
agree to within rounding.

## Re-creating it

python3-regex gives GPT-2's pre-tokenization pattern its `\\p{{L}}` classes; OpenBLAS
replaces Debian's reference BLAS, which is about ten times slower. The schedule follows
the wall-clock budget, so a faster or slower machine gives somewhat different weights.

    apt-get install python3-torch python3-regex libopenblas0-serial
{recreate_commands(stats)}

## Samples (PyTorch, from the stored weights)

{sample_text}
""")


def write_reference(args, tok: GPT2Tokenizer, heldout_text: str, train_facts: dict):
    """Computes and writes reference.json from the weights as stored in --out (f16 values,
    computed in f32): the held-out perplexity and a greedy continuation."""
    stored = GPT(args.emb, args.layers, args.heads, args.context)
    load_hf_gpt2_state(stored, read_safetensors(os.path.join(args.out, "model.safetensors")))
    stored.eval()
    n, s = args.context, args.context // 2
    ids = tok.encode(heldout_text)
    scored, ppl = sliding_window_perplexity(stored, ids, n, s)
    # The same protocol over the text's first 16 strides and a window: what the tests score
    # (the whole text takes them several times longer).
    prefix = 16 * s + n
    prefix_scored, prefix_ppl = sliding_window_perplexity(stored, ids[:prefix], n, s)
    ref = {"heldout": "heldout.txt", "context": n, "stride": s, "tokens_scored": scored,
           "perplexity": round(ppl, 4),
           "prefix": {"tokens": prefix, "tokens_scored": prefix_scored, "perplexity": round(prefix_ppl, 4)},
           **train_facts,
           "greedy": greedy_reference(stored, tok, "It was a fine morning, and", 31)}
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=2)
        f.write("\n")
    print(f"reference: {ref}", flush=True)
    return stored, ref


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    tok = GPT2Tokenizer(os.path.join(args.tokenizer_dir, "encoder.json"),
                        os.path.join(args.tokenizer_dir, "vocab.bpe"))
    if args.reference_only:
        with open(os.path.join(args.out, "reference.json")) as f:
            old = json.load(f)
        with open(os.path.join(args.out, "heldout.txt"), encoding="utf-8") as f:
            heldout_text = f.read()
        train_facts = {k: old[k] for k in ("train_tokens", "train_minutes", "train_tokens_in_corpus",
                                           "final_train_loss_ema")}
        write_reference(args, tok, heldout_text, train_facts)
        return
    train_ids, heldout_ids, heldout_text = load_corpus(args, tok)
    print(f"train tokens {len(train_ids)}, held-out tokens {len(heldout_ids)}", flush=True)
    args.checkpoint = os.path.join(args.work, "checkpoint.pt")

    model = GPT(args.emb, args.layers, args.heads, args.context)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters {n_params / 1e6:.2f} M", flush=True)
    stats_path = os.path.join(args.work, "train_stats.json")
    if args.resume:
        prior, opt_state = load_resume_state(model, args.checkpoint, stats_path)
        print(f"resuming at step {prior['steps']}, {prior['train_tokens']} tokens, "
              f"{prior['train_minutes']} min; optimizer state "
              f"{'loaded' if opt_state else 'absent, starting fresh'}", flush=True)
        stats = train(model, train_ids, heldout_ids, args, prior, opt_state)
        with open(stats_path, "w") as f:
            json.dump(stats, f)
    elif args.export_only:
        model.load_state_dict(torch.load(args.checkpoint)["model"])
        with open(stats_path) as f:
            stats = json.load(f)
    else:
        stats = train(model, train_ids, heldout_ids, args)
        with open(stats_path, "w") as f:
            json.dump(stats, f)
    print(f"trained: {stats}", flush=True)

    os.makedirs(args.out, exist_ok=True)
    weights = os.path.join(args.out, "model.safetensors")
    write_safetensors_f16(weights, hf_gpt2_state(model))
    with open(os.path.join(args.out, "config.toml"), "w") as f:
        f.write(CONFIG_TOML.format(name=f"austen-gpt2-{args.layers}x{args.emb}",
                                   vocab=VOCAB_SIZE, context=args.context, emb=args.emb,
                                   heads=args.heads, layers=args.layers, ffn=4 * args.emb))
    with open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout_text)

    stored, ref = write_reference(args, tok, heldout_text, {
        "train_tokens": stats["train_tokens"], "train_minutes": stats["train_minutes"],
        "train_tokens_in_corpus": int(len(train_ids)),
        "final_train_loss_ema": stats["final_train_loss_ema"]})

    samples = []
    for prompt in ("The", "Once upon a time", "It is a truth universally acknowledged"):
        samples.append((prompt, "greedy", generate(stored, tok, prompt, 40, 0, 0, 0)))
        samples.append((prompt, "temperature 0.8, top-k 40, seed 1",
                        generate(stored, tok, prompt, 40, 0.8, 40, 1)))
    for prompt, how, out in samples:
        print(f"--- {prompt!r} ({how}):\n{out}\n", flush=True)
    write_readme(os.path.join(args.out, "README.md"), args, ref, stats,
                 os.path.getsize(weights), n_params, samples)


if __name__ == "__main__":
    main()
