#!/usr/bin/python3
"""Second, independent reference for the tokenizer fixtures: OpenAI's GPT-2 encoder.py
(github.com/openai/gpt-2, src/encoder.py, MIT) in a few lines, on the Python `regex`
module it was written for (Debian: python3-regex).

Reads a JSON list of texts on stdin, writes a JSON list of id lists on stdout. Also the
tokenizer of tools/train_default_model.py (GPT2Tokenizer: encode and decode).
Usage: gpt2_reference_encoder.py ENCODER_JSON VOCAB_BPE < texts.json > ids.json
"""
import argparse
import json
import sys

import regex as re

# GPT-2's pre-tokenization pattern, unchanged (also tools/make_gguf_fixtures.py's).
PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    return {(word[i], word[i + 1]) for i in range(len(word) - 1)}


class Encoder:
    def __init__(self, encoder, bpe_merges):
        self.encoder = encoder
        self.byte_encoder = bytes_to_unicode()
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}
        self.pat = PATTERN

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def encode(self, text):
        bpe_tokens = []
        for token in re.findall(self.pat, text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            bpe_tokens.extend(self.encoder[bpe_token] for bpe_token in self.bpe(token).split(" "))
        return bpe_tokens


class GPT2Tokenizer:
    """Encoder from the two vocabulary files, with a decoder (tools/train_default_model.py)."""

    def __init__(self, encoder_json, vocab_bpe):
        with open(encoder_json, encoding="utf-8") as f:
            encoder = json.load(f)
        with open(vocab_bpe, encoding="utf-8") as f:
            bpe_data = f.read()
        bpe_merges = [tuple(merge_str.split()) for merge_str in bpe_data.split("\n")[1:-1]]
        self.encoder = Encoder(encoder, bpe_merges)
        self.decoder = {v: k for k, v in encoder.items()}
        self.byte_decoder = {v: k for k, v in self.encoder.byte_encoder.items()}

    def encode(self, text):
        return self.encoder.encode(text)

    def decode(self, ids):
        text = "".join(self.decoder[int(i)] for i in ids)
        return bytearray(self.byte_decoder[c] for c in text).decode("utf-8", errors="replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("encoder_json", metavar="ENCODER_JSON")
    parser.add_argument("vocab_bpe", metavar="VOCAB_BPE")
    args = parser.parse_args()
    tok = GPT2Tokenizer(args.encoder_json, args.vocab_bpe)
    texts = json.load(sys.stdin)
    json.dump([tok.encode(t) for t in texts], sys.stdout)


if __name__ == "__main__":
    main()
