#!/usr/bin/python3
"""GPT-1's tokenizer (Hugging Face "openai-gpt") as the Rust `tokenizers` crate runs it, on
Python's unicodedata: the reference of tools/make_gpt1_tokenizer_fixtures.js.

transformers' OpenAIGPTConverter builds it from vocab.json and merges.txt as
  BertNormalizer(clean_text, handle_chinese_chars, strip_accents, lowercase)
    (tokenizers/src/normalizers/bert.rs: drop NUL, U+FFFD and "other" characters (Cc, Cf,
    Cn, Co; not TAB, LF, CR), whitespace -> ' ', spaces around CJK ideographs, NFD and drop
    Mn, then lowercase each character on its own)
  BertPreTokenizer (split on whitespace, isolate each punctuation character: ASCII
    punctuation or Unicode category P*)
  BPE(unk_token "<unk>", end_of_word_suffix "</w>"): a word's characters, the last with
    "</w>", each its token or <unk>; then the lowest-ranked adjacent pair merges, leftmost
    first, until none does.

Usage: python3 tools/gpt1_reference_tokenizer.py DIR < texts.json > ids.json
  (DIR holds vocab.json and merges.txt; stdin a JSON list of texts, stdout their ids)
"""
import json
import pathlib
import sys
import unicodedata

EOW = "</w>"
CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_whitespace(c):
    return c in "\t\n\r" or c.isspace() and unicodedata.category(c) in ("Zs", "Zl", "Zp", "Cc")


def normalize(text):
    out = []
    for c in text:
        if c in "\t\n\r":
            out.append(" ")
        elif ord(c) in (0, 0xFFFD) or unicodedata.category(c) in ("Cc", "Cf", "Cn", "Co", "Cs"):
            continue
        elif is_whitespace(c):
            out.append(" ")
        elif any(lo <= ord(c) <= hi for lo, hi in CJK):
            out.append(" " + c + " ")
        else:
            out.append(c)
    text = unicodedata.normalize("NFD", "".join(out))
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    return "".join(c.lower() for c in text)


def is_punct(c):
    return (c.isascii() and not c.isalnum() and c.isprintable() and c != " ") or unicodedata.category(c).startswith("P")


def words(text):
    for chunk in normalize(text).split():
        word = ""
        for c in chunk:
            if is_punct(c):
                if word:
                    yield word
                word = ""
                yield c
            else:
                word += c
        if word:
            yield word


def bpe(word, vocab, ranks):
    syms = [vocab.get(c + EOW if i == len(word) - 1 else c, vocab["<unk>"]) for i, c in enumerate(word)]
    while len(syms) > 1:
        cands = [(ranks[(syms[i], syms[i + 1])], i) for i in range(len(syms) - 1) if (syms[i], syms[i + 1]) in ranks]
        if not cands:
            break
        rank, i = min(cands)
        syms[i:i + 2] = [rank[1]]
    return syms


def main():
    d = pathlib.Path(sys.argv[1])
    vocab = json.loads((d / "vocab.json").read_text(encoding="utf-8"))
    ranks = {}
    for n, line in enumerate((d / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]):
        l, r = line.split(" ")
        ranks[(vocab[l], vocab[r])] = (n, vocab[l + r])
    texts = json.load(sys.stdin)
    json.dump([[i for w in words(t) for i in bpe(w, vocab, ranks)] for t in texts], sys.stdout)


if __name__ == "__main__":
    main()
