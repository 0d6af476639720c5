#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus under tests/fuzz/corpus/ (small, deterministic).

safetensors/: tiny valid files in the shapes the loader meets (every supported dtype, an
  unsupported one, 0-d and empty tensors, metadata, an hf-gpt2-like header) plus a few
  near misses, so the fuzzer starts next to the interesting branches.
config/: the project's model configs (configs/*.toml and the fixtures' config.toml).
tokenizer/: short texts: English, contractions, digits, whitespace runs, non-Latin
  scripts, emoji, <|endoftext|>, and bytes that are not UTF-8.

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


if __name__ == "__main__":
    if OUT.exists():
        shutil.rmtree(OUT)
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {sum(1 for f in OUT.rglob('*') if f.is_file())} files, {total} bytes, under {OUT}")
