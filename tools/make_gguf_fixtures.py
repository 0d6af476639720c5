#!/usr/bin/python3
"""Writes tests/fixtures/gguf/: GGUF files made by llama.cpp's own tools and the logits of
the weights llama.cpp's gguf-py dequantizes from each of them.

Two models, both written as llama.cpp's converter (convert_hf_to_gguf.py, GPT2Model) writes
a Hugging Face GPT-2 (architecture gpt2; n_ctx, n_embd, 4*n_embd, n_head, layer_norm_epsilon;
Conv1D weights transposed to [out, in]; no output.weight: tied) with gguf-py's GGUFWriter,
in F32, then quantized by llama.cpp's llama-quantize:
- small: the weights of tests/fixtures/models/hf_gpt2 (E=64, 2 layers, V=311, ctx=73), whose
  PyTorch logits are known: F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (ggml's 32-value blocks
  fit rows of 64; its K-quants need rows of 256).
- kq: seeded random weights at E=256 (1 layer, F=1024, V=300, ctx=32): Q4_K_M (Q4_K and Q6_K
  mixed), Q5_K_M (Q5_K and Q6_K), Q6_K, Q4_0 (Q4_0 matrices, a Q6_K table), Q2_K (Q2_K, Q3_K
  and Q6_K), IQ4_NL and IQ4_XS (each with a Q6_K table).
Each model carries a byte-level BPE tokenizer trained here on a short text (256 byte tokens,
merges, <|endoftext|> last), so `--model x.gguf` can tokenize.

For every file: <name>.gguf; <name>.logits.npy, the logits ([rows, V] float32) of a float64
NumPy forward pass over gguf-py's dequantized weights at the rows checked (every 8th
position and the last); and in expected.json the ids, those rows, the tensor types llama-quantize chose, and for the small model
the largest difference from the original weights' PyTorch logits (quantization error, for
the record). Also the ids of a test sentence under the tokenizer (GPT-2's algorithm), and
added-Q8_0.gguf: the small model whose vocabulary has added tokens (CONTROL and
USER_DEFINED, as the converter marks a Hugging Face tokenizer's), with the ids llama.cpp's
own llama-tokenize gives texts holding them, special tokens parsed and not.

Needs: llama.cpp's source (gguf-py) and llama-quantize and llama-tokenize built against
node-llama-cpp's libraries: tools/build_llama_quantize.sh DIR, then
    /usr/bin/python3 tools/make_gguf_fixtures.py --llama-cpp DIR
(DIR e.g. /tmp/llama; ~700 MB of npm packages, never committed). numpy, python3-regex and
python3-torch (tools/safetensors_io.py reads the small model's weights with it).

--default-model OUT_DIR (with --llama-cpp DIR) writes the bundled model (models/default,
GPT-2's real tokenizer) as GGUF in F32 and quantized, for `gpt-vk perplexity -m` and tools/compare_greedy_llama.sh.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "gguf"
sys.path.insert(0, str(ROOT / "tools"))
import safetensors_io  # noqa: E402
from gpt2_reference_encoder import PATTERN, bytes_to_unicode  # noqa: E402

CORPUS = (
    "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times; "
    "it was the age of wisdom, it was the age of foolishness. In the beginning there was the word, and "
    "the word was with the model. Models that read the files people have are the models people use. "
    "Hello world! 12345 tokens, merges and bytes: the byte pair encoding of GPT-2 at work. ") * 3
TEST_TEXT = "Hello world! The model reads the files people have: 42 tokens, ok?"
SMALL_TYPES = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
KQ_TYPES = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "Q2_K", "IQ4_NL", "IQ4_XS"]


def train_bpe(vocab_size):
    """256 byte tokens (GPT-2's byte alphabet, in byte order), merges of the most frequent
    pair (ties: the smallest pair) until vocab_size - 1, then <|endoftext|>."""
    b2u = bytes_to_unicode()
    words = {}
    for piece in PATTERN.findall(CORPUS):
        w = tuple(b2u[b] for b in piece.encode("utf-8"))
        words[w] = words.get(w, 0) + 1
    tokens = [b2u[b] for b in range(256)]
    merges = []
    while len(tokens) < vocab_size - 1:
        pairs = {}
        for w, n in words.items():
            for p in zip(w, w[1:]):
                pairs[p] = pairs.get(p, 0) + n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        tokens.append(best[0] + best[1])
        merged = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    assert len(tokens) == vocab_size - 1, "the corpus ran out of pairs"
    tokens.append("<|endoftext|>")
    return tokens, [f"{a} {b}" for a, b in merges]


def encode(text, tokens, merges):
    """GPT-2's encoder.py algorithm over this vocabulary."""
    b2u = bytes_to_unicode()
    ids = {t: i for i, t in enumerate(tokens)}
    ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
    out = []
    for piece in PATTERN.findall(text):
        word = [b2u[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            pairs = [(word[i], word[i + 1]) for i in range(len(word) - 1)]
            best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        out += [ids[w] for w in word]
    return out


def write_gguf(gguf, path, name, hp, tensors, tokens, merges, types=None):
    """What convert_hf_to_gguf.py's GPT2Model writes, tensors in F32. types: the tokens'
    gguf.TokenType (default: NORMAL, and CONTROL for <|endoftext|>, the last)."""
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_name(name)
    w.add_block_count(hp["n_layer"])
    w.add_context_length(hp["n_ctx"])
    w.add_embedding_length(hp["n_embd"])
    w.add_feed_forward_length(4 * hp["n_embd"])
    w.add_head_count(hp["n_head"])
    w.add_layer_norm_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types or [gguf.TokenType.NORMAL] * (len(tokens) - 1) + [gguf.TokenType.CONTROL])
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)
    for n, t in tensors.items():
        w.add_tensor(n, np.ascontiguousarray(t, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_to_gguf_tensors(sd, n_layer):
    """HF GPT-2 names -> llama.cpp's, Conv1D weights transposed to [out, in]."""
    g = {"token_embd.weight": sd["wte.weight"], "position_embd.weight": sd["wpe.weight"],
         "output_norm.weight": sd["ln_f.weight"], "output_norm.bias": sd["ln_f.bias"]}
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
             "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for i in range(n_layer):
        for hf, ll in names.items():
            wt = sd[f"h.{i}.{hf}.weight"]
            g[f"blk.{i}.{ll}.weight"] = wt.T if hf not in ("ln_1", "ln_2") else wt
            g[f"blk.{i}.{ll}.bias"] = sd[f"h.{i}.{hf}.bias"]
    return g


def dequantized(gguf, path):
    r = gguf.GGUFReader(str(path))
    weights, types = {}, {}
    for t in r.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        weights[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
        types[t.name] = t.tensor_type.name
    return weights, types


def forward(W, ids, n_layer, n_head):
    """GPT-2 (pre-LN, tanh GELU, tied head) in float64 from llama.cpp's tensor names."""
    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * W[p + ".weight"] + W[p + ".bias"]

    def lin(x, p):
        return x @ W[p + ".weight"].T + W[p + ".bias"]

    T = len(ids)
    x = W["token_embd.weight"][ids] + W["position_embd.weight"][:T]
    C = x.shape[1]
    hd = C // n_head
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(n_layer):
        b = f"blk.{i}."
        qkv = lin(ln(x, b + "attn_norm"), b + "attn_qkv")
        q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, n_head, hd).transpose(1, 0, 2) for j in range(3))
        a = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + lin(o, b + "attn_output")
        u = lin(ln(x, b + "ffn_norm"), b + "ffn_up")
        u = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))
        x = x + lin(u, b + "ffn_down")
    x = ln(x, "output_norm")
    return x @ W.get("output.weight", W["token_embd.weight"]).T


ADDED = [("<|im_start|>", "CONTROL"), ("<|im_end|>", "CONTROL"), (" Bonjour tout", "USER_DEFINED"),
         ("\u00fcn\u00ef", "USER_DEFINED")]
ADDED_TEXTS = ["<|im_start|>user Bonjour tout le monde, \u00fcn\u00ef!<|im_end|>",
               "plain text Bonjour toutes<|im_end|",
               "<|endoftext|>\u00fcn\u00ef\u00fcn\u00ef Bonjour tout<|im_start|><|im_end|>"]


def added_tokens_gguf(gguf, quantize, tokenize, tmp, sd, hp):
    """The small model with four added tokens, as convert_hf_to_gguf.py marks a Hugging Face
    tokenizer's added tokens (special: CONTROL, else USER_DEFINED; stored as their text, not
    in the byte alphabet): the last four merged tokens give their ids up (and their merges).
    Returns expected.json's entry: each text's ids as llama.cpp's llama-tokenize gives them,
    with and without special tokens parsed."""
    tokens, merges = train_bpe(311)
    first = len(tokens) - 1 - len(ADDED)
    tokens[first:-1] = [t for t, _ in ADDED]
    merges = merges[:len(merges) - len(ADDED)]
    types = [gguf.TokenType.NORMAL] * first + [gguf.TokenType[k] for _, k in ADDED] + [gguf.TokenType.CONTROL]
    write_gguf(gguf, tmp / "added-f32.gguf", "hf_gpt2", hp, hf_to_gguf_tensors(sd, 2), tokens, merges, types)
    subprocess.run([str(quantize), str(tmp / "added-f32.gguf"), str(OUT / "added-Q8_0.gguf"), "Q8_0"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cases = []
    for text in ADDED_TEXTS:
        for special in (False, True):
            cmd = [str(tokenize), "-m", str(OUT / "added-Q8_0.gguf"), "-p", text, "--ids", "--no-bos", "--log-disable"]
            out = subprocess.run(cmd + ([] if special else ["--no-parse-special"]), check=True, capture_output=True,
                                 text=True).stdout
            cases.append({"text": text, "special": special, "ids": json.loads(out.strip().splitlines()[-1])})
    return {"file": "added-Q8_0.gguf", "added": [{"id": first + i, "text": t, "type": k} for i, (t, k) in enumerate(ADDED)],
            "cases": cases}


def default_model_ggufs(gguf, quantize, out):
    """The bundled model (models/default) with GPT-2's real tokenizer as GGUF files in `out`
    (not fixtures: for measuring perplexity and greedy text against llama.cpp)."""
    sd, _, _ = safetensors_io.load_file(str(ROOT / "models/default/model.safetensors"))
    sd = {k.removeprefix("transformer."): v.float().numpy() for k, v in sd.items()}
    enc = json.loads((ROOT / "models/gpt2-tokenizer/encoder.json").read_text(encoding="utf-8"))
    tokens = sorted(enc, key=enc.get)
    merges = [m for m in (ROOT / "models/gpt2-tokenizer/vocab.bpe").read_text(encoding="utf-8").split("\n")[1:]
              if m.strip()]
    out.mkdir(parents=True, exist_ok=True)
    hp = {"n_layer": 6, "n_head": 4, "n_embd": 128, "n_ctx": 256}
    write_gguf(gguf, out / "default-f32.gguf", "austen-gpt2-6x128", hp, hf_to_gguf_tensors(sd, 6), tokens, merges)
    for qt in ["F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "IQ4_NL", "IQ4_XS"]:
        subprocess.run([str(quantize), str(out / "default-f32.gguf"), str(out / f"default-{qt}.gguf"), qt], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(out / f"default-{qt}.gguf")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, help="folder of tools/build_llama_quantize.sh")
    ap.add_argument("--default-model", metavar="DIR",
                    help="instead: write the bundled model as default-{f32,F16,Q8_0,Q4_0,Q4_K_M,Q5_K_M,Q6_K,Q3_K_M,Q2_K,IQ4_NL,IQ4_XS}.gguf in DIR")
    args = ap.parse_args()
    llama = pathlib.Path(args.llama_cpp)
    sys.path.insert(0, str(llama / "llama.cpp" / "gguf-py"))
    import gguf
    quantize = llama / "bin" / "llama-quantize"
    if args.default_model:
        default_model_ggufs(gguf, quantize, pathlib.Path(args.default_model))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    expected = {"tolerance_note": "logits of gpt-vk --dtype f32 within 1e-4 of the largest |logit|; "
                                  "--dtype f16 within 5e-3", "files": {}}
    tmp = pathlib.Path(tempfile.mkdtemp())

    # small: the hf_gpt2 fixture's weights
    fx = ROOT / "tests/fixtures/models/hf_gpt2"
    sd = {k: v.float().numpy() for k, v in safetensors_io.load_file(str(fx / "model.safetensors"))[0].items()}
    small = {"n_layer": 2, "n_head": 2, "n_embd": 64, "n_ctx": 73}
    ids = [int(i) for i in (fx / "ids.txt").read_text().strip().split(",")]
    golden = np.load(fx / "logits.npy")
    tokens, merges = train_bpe(311)
    write_gguf(gguf, tmp / "small-f32.gguf", "hf_gpt2", small, hf_to_gguf_tensors(sd, 2), tokens, merges)
    models = [("small", small, ids, SMALL_TYPES, golden)]
    expected["added_tokens"] = added_tokens_gguf(gguf, quantize, llama / "bin" / "llama-tokenize", tmp, sd, small)

    # kq: random weights wide enough for the K-quants' 256-value super-blocks
    rng = np.random.default_rng(35)
    C, V, ctx = 256, 300, 32
    kq = {"n_layer": 1, "n_head": 4, "n_embd": C, "n_ctx": ctx}
    g = {"token_embd.weight": rng.normal(0, 0.5, (V, C)), "position_embd.weight": rng.normal(0, 0.1, (ctx, C)),
         "output_norm.weight": 1 + rng.normal(0, 0.1, C), "output_norm.bias": rng.normal(0, 0.05, C)}
    for ll, (o, i) in {"attn_qkv": (3 * C, C), "attn_output": (C, C), "ffn_up": (4 * C, C),
                       "ffn_down": (C, 4 * C)}.items():
        g[f"blk.0.{ll}.weight"] = rng.normal(0, 1.2 / np.sqrt(i), (o, i))
        g[f"blk.0.{ll}.bias"] = rng.normal(0, 0.05, o)
    for ll in ("attn_norm", "ffn_norm"):
        g[f"blk.0.{ll}.weight"] = 1 + rng.normal(0, 0.1, C)
        g[f"blk.0.{ll}.bias"] = rng.normal(0, 0.05, C)
    kq_tokens, kq_merges = train_bpe(V)
    write_gguf(gguf, tmp / "kq-f32.gguf", "kq", kq, g, kq_tokens, kq_merges)
    kq_ids = encode(TEST_TEXT, kq_tokens, kq_merges)[:ctx]
    models.append(("kq", kq, kq_ids, KQ_TYPES, None))
    expected["tokenizer"] = {"file": "kq-Q6_K.gguf", "text": TEST_TEXT,
                             "ids": encode(TEST_TEXT, kq_tokens, kq_merges)}

    for stem, hp, ids, types, golden in models:
        ref_w, _ = dequantized(gguf, tmp / f"{stem}-f32.gguf")
        rows = sorted(set(range(0, len(ids), 8)) | {len(ids) - 1})
        for qt in types:
            name = f"{stem}-{qt}.gguf"
            subprocess.run([str(quantize), str(tmp / f"{stem}-f32.gguf"), str(OUT / name), qt], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            W, tt = dequantized(gguf, OUT / name)
            logits = forward(W, np.array(ids), hp["n_layer"], hp["n_head"])
            f32 = forward(ref_w, np.array(ids), hp["n_layer"], hp["n_head"])
            np.save(OUT / (name[:-5] + ".logits.npy"), logits[rows].astype("<f4"))
            entry = {"ids": ids, "rows": rows, "types": sorted(set(tt.values())),
                     "max_abs_logit": float(np.abs(logits).max()),
                     "quantization_error_vs_f32_weights": float(np.abs(logits - f32).max())}
            if golden is not None:
                entry["pytorch_golden_max_diff"] = float(np.abs(logits - golden).max())
            expected["files"][name] = entry
            print(name, entry["types"], "max|dq - f32 logits| =", round(entry["quantization_error_vs_f32_weights"], 4),
                  "of max", round(entry["max_abs_logit"], 2))
    (OUT / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
