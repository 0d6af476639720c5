#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus under tests/fuzz/corpus/ (small, deterministic).

safetensors/: tiny valid files in the shapes the loader meets (every supported dtype, an
  unsupported one, 0-d and empty tensors, metadata, an hf-gpt2-like header) plus a few
  near misses, so the fuzzer starts next to the interesting branches.
config/: the project's model configs (configs/*.toml and the fixtures' config.toml).
gguf/: tiny GGUF files of llama.cpp's gpt2 architecture (F32; a mix of F16, BF16, Q8_0, Q4_0,
  Q5_1; the K-quants; Q2_K, Q3_K, IQ4_NL and IQ4_XS), version 2 and 3, plus near misses (truncated, misaligned, unknown type).
torch/: the small torch.save zips of tests/fixtures/formats/torch.
tokenizer/: short texts: English, contractions, digits, whitespace runs, non-Latin
  scripts, emoji, <|endoftext|>, and bytes that are not UTF-8.
openai/: request bodies for /v1/completions and /v1/chat/completions: every field the
  server reads, prompts as text, token ids and lists of both, chat messages as text and
  parts, and near misses (wrong types, values out of range, unsupported features).

Run: python3 tests/fuzz/make_corpus.py   (standard library only)
"""
import json
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "corpus"
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "BOOL": 1}


def safetensors(tensors, metadata=None, pad_to=1):
    """tensors: [(name, dtype, shape)] laid out in order; data bytes are a counter."""
    header, offset, data = {}, 0, bytearray()
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        data += bytes((offset + i) & 0xFF for i in range(n))
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % pad_to)
    return struct.pack("<Q", len(text)) + text + bytes(data)


def write(kind, name, content):
    d = OUT / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())


def safetensors_seeds():
    write("safetensors", "f32_matrix", safetensors([("w", "F32", [2, 3])]))
    write("safetensors", "mixed_dtypes", safetensors(
        [("a", "F16", [4]), ("b", "BF16", [2, 2]), ("mask", "BOOL", [1, 1, 3, 3]), ("pos", "I64", [3])],
        metadata={"format": "pt"}, pad_to=8))
    write("safetensors", "scalar_and_empty", safetensors([("s", "F32", []), ("e", "F16", [0, 4]), ("u", "U8", [5])]))
    hf = []
    for i in range(2):
        hf += [(f"h.{i}.ln_1.weight", "F32", [4]), (f"h.{i}.attn.c_attn.weight", "F32", [4, 12]),
               (f"h.{i}.attn.bias", "F32", [1, 1, 2, 2])]
    hf = [("wte.weight", "F32", [5, 4]), ("wpe.weight", "F32", [3, 4])] + hf + [("ln_f.bias", "F32", [4])]
    write("safetensors", "hf_gpt2_like", safetensors(hf, metadata={"format": "pt"}))
    write("safetensors", "empty_header", safetensors([]))
    good = safetensors([("w", "F32", [2, 2])])
    write("safetensors", "truncated_data", good[:-3])
    write("safetensors", "header_len_too_big", struct.pack("<Q", 1 << 40) + good[8:])
    overlap = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
    write("safetensors", "overlap", struct.pack("<Q", len(overlap)) + overlap + bytes(12))


def config_seeds():
    for p in sorted((ROOT / "configs").glob("*.toml")):
        write("config", "configs_" + p.stem, p.read_bytes())
    for p in sorted((ROOT / "tests" / "fixtures" / "models").glob("*/config.toml")):
        write("config", "fixture_" + p.parent.name, p.read_bytes())
    # "[" at a line start inside a multi-line array is not a table header.
    write("config", "arrays_and_headers",
          "x = [\n  [ # nested array with a comment\n    1],\n]\n[ model ]\n[[ \"q\" ]]\n")
    # Non-ASCII where TOML allows it: comments, basic, literal and multi-line strings.
    write("config", "unicode_strings_and_comments", (
        "# mod\u00e8le \u2713 \U0001F600\n[model] # \u00e9\n"
        "name = \"mod\u00e8le \\\"\u2713\\\" \\u00e9 # not a comment\"  # comment \u00a1\n"
        "vocab_size = 311\ncontext_length = 73\nemb_dim = 64\nn_heads = 2\nn_layers = 2\n\n"
        "[weights]\nfile = '\u00e9t\u00e9/model.safetensors'\n\n"
        "[tokenizer]\nvocab = \"\"\"v\u00f6cab.json\"\"\"\nmerges = '''m\u00e9rges.txt'''\n").encode())


GGUF_BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
               10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 20: (32, 18),
               23: (256, 136)}  # ggml type: (values, bytes) per block


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kv, tensors, version=3, align=32):
    """kv: [(key, type, packed value)]; tensors: [(name, ne, ggml type)], data is a counter."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, vtype, value in kv:
        out += gguf_str(key) + struct.pack("<I", vtype) + value
    offset, infos = 0, []
    for name, ne, t in tensors:
        n = 1
        for d in ne:
            n *= d
        values, size = GGUF_BLOCKS.get(t, (1, 1))
        nbytes = n // values * size
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", t, offset)
        infos.append(nbytes)
        offset += (nbytes + align - 1) // align * align
    out += bytes(-len(out) % align)
    for nbytes in infos:
        out += bytes((i * 7 + 3) & 0xFF for i in range(nbytes)) + bytes(-nbytes % align)
    return out


def gpt2_gguf(types, version=3, C=32, V=8, ctx=4):
    u32 = lambda v: struct.pack("<I", v)  # noqa: E731
    kv = [("general.architecture", 8, gguf_str("gpt2")), ("general.name", 8, gguf_str("tiny")),
          ("gpt2.context_length", 4, u32(ctx)), ("gpt2.embedding_length", 4, u32(C)),
          ("gpt2.feed_forward_length", 4, u32(4 * C)), ("gpt2.block_count", 4, u32(1)),
          ("gpt2.attention.head_count", 4, u32(2)), ("gpt2.attention.layer_norm_epsilon", 6, struct.pack("<f", 1e-5)),
          ("tokenizer.ggml.model", 8, gguf_str("gpt2")),
          ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, V) + b"".join(gguf_str(c) for c in "abcdefgh"[:V])),
          ("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, 1) + gguf_str("a b")),
          ("tokenizer.ggml.eos_token_id", 4, u32(V - 1))]
    t = lambda name, ne, default=0: (name, ne, types.get(name.split(".")[-2], default))  # noqa: E731
    tensors = [t("token_embd.weight", [C, V]), t("position_embd.weight", [C, ctx]),
               t("blk.0.attn_norm.weight", [C]), t("blk.0.attn_norm.bias", [C]),
               t("blk.0.attn_qkv.weight", [C, 3 * C]), t("blk.0.attn_qkv.bias", [3 * C]),
               t("blk.0.attn_output.weight", [C, C]), t("blk.0.attn_output.bias", [C]),
               t("blk.0.ffn_norm.weight", [C]), t("blk.0.ffn_norm.bias", [C]),
               t("blk.0.ffn_up.weight", [C, 4 * C]), t("blk.0.ffn_up.bias", [4 * C]),
               t("blk.0.ffn_down.weight", [4 * C, C]), t("blk.0.ffn_down.bias", [C]),
               t("output_norm.weight", [C]), t("output_norm.bias", [C])]
    return gguf(kv, tensors, version)


def gguf_seeds():
    good = gpt2_gguf({})
    write("gguf", "gpt2_f32", good)
    write("gguf", "gpt2_v2", gpt2_gguf({}, version=2))
    write("gguf", "gpt2_mixed", gpt2_gguf({"token_embd": 30, "attn_qkv": 8, "ffn_up": 2, "ffn_down": 1,
                                           "attn_output": 7}))
    write("gguf", "kquants", gguf([("general.alignment", 4, struct.pack("<I", 64))],
                                  [("q4k", [256, 2], 12), ("q5k", [256], 13), ("q6k", [256, 1], 14),
                                   ("q41", [64], 3), ("q50", [32, 2], 6)], align=64))
    write("gguf", "low_bit", gguf([], [("q2k", [256, 2], 10), ("q3k", [256], 11), ("iq4nl", [32, 3], 20),
                                       ("iq4xs", [256, 1], 23)]))
    write("gguf", "arrays", gguf([("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 2) + bytes(8)),
                                  ("floats", 9, struct.pack("<IQ", 12, 2) + struct.pack("<dd", 0.5, -1)),
                                  ("flag", 7, b"\x01")], []))
    write("gguf", "truncated", good[:len(good) // 2])
    write("gguf", "other_arch", good.replace(gguf_str("gpt2"), gguf_str("gpt3"), 1))
    write("gguf", "unknown_type", gguf([], [("x", [4], 99)]))


def torch_seeds():
    """The small torch.save files of tests/fixtures/formats/torch (tools/make_format_fixtures.py
    writes them with PyTorch: state dicts, a checkpoint, pickles naming os.system and eval)."""
    for p in sorted((ROOT / "tests" / "fixtures" / "formats" / "torch").glob("*.pt")):
        if p.stat().st_size <= 8192:
            write("torch", p.stem, p.read_bytes())


def tokenizer_seeds():
    texts = {
        "english": "Hello world! The quick brown fox jumps over the lazy dog.",
        "contractions": "I'm sure they'll say it's what we've done, isn't it? I'D SAY'S",
        "digits": "In 1984, 3.14159 and 2,000,000 -42 0x1F",
        "whitespace": "a  b\t\tc\n\n\nd \r\n  \u00a0\u3000end   ",
        "scripts": "\u041f\u0440\u0438\u0432\u0435\u0442 \u4f60\u597d\u4e16\u754c \u3053\u3093\u306b\u3061\u306f \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd",
        "emoji": "\U0001F600\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \u2764\ufe0f",
        "special": "end of doc<|endoftext|>Start <|endoftext|><|endoftext|> <|endoftext",
        "code": "def f(x):\n    return {'a': [1, 2]}  # comment\n",
    }
    for name, text in texts.items():
        write("tokenizer", name, text.encode("utf-8"))
    write("tokenizer", "invalid_utf8", b"ok \xff\xfe bad \xc3 lone \xe2\x82 cut \xf0\x9f\x98 \xed\xa0\x80 surrogate \xc0\xaf")


def openai_seeds():
    bodies = {
        "completion_plain": {"prompt": "Hello, I'm a language model,", "max_tokens": 8},
        "completion_every_field": {
            "model": "gpt2", "prompt": ["One", "Two"], "max_tokens": 4, "temperature": 0.7, "top_p": 0.9,
            "top_k": 40, "min_p": 0.05, "n": 2, "stream": True, "stream_options": {"include_usage": True},
            "stop": ["\n", "."], "seed": -3, "logprobs": 3, "echo": True, "presence_penalty": 0.5,
            "frequency_penalty": -0.5, "repeat_penalty": 1.1, "repeat_last_n": -1,
            "logit_bias": {"50256": -100, "13": 2.5}, "user": "u", "best_of": 2, "suffix": ""},
        "completion_token_ids": {"prompt": [[15496, 11, 314], [], [50256]], "max_tokens": 1, "stop": "x"},
        "completion_echo_score": {"prompt": [464, 1468, 582], "max_tokens": 0, "echo": True, "logprobs": 5},
        "chat_plain": {"messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}], "max_completion_tokens": 5},
        "chat_parts_logprobs": {
            "messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}]},
                         {"role": "user", "content": [{"type": "text", "text": "b"}, {"type": "text", "text": "c"}]},
                         {"role": "assistant"}, {"role": "user", "content": "d"}],
            "logprobs": True, "top_logprobs": 2, "tools": [], "tool_choice": "none",
            "response_format": {"type": "text"}},
        "near_misses": {"prompt": [1.5], "max_tokens": -1, "temperature": 3, "n": 17, "stop": ["", 4],
                        "logit_bias": {"x": "y"}, "stream_options": {"include_usage": 1}},
        "chat_refused": {"messages": [{"role": "tool", "content": {"a": 1}}], "tools": [{"type": "function"}],
                         "response_format": {"type": "json_object"}, "prompt": "x"},
        "too_long": {"prompt": "word " * 1100, "max_tokens": 1},
    }
    for name, body in bodies.items():
        write("openai", name, json.dumps(body))
    write("openai", "not_an_object", "[1, 2, 3]")
    write("openai", "not_json", '{"prompt": "unterminated')


if __name__ == "__main__":
    if OUT.exists():
        shutil.rmtree(OUT)
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    gguf_seeds()
    torch_seeds()
    openai_seeds()
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {sum(1 for f in OUT.rglob('*') if f.is_file())} files, {total} bytes, under {OUT}")
