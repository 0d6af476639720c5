// Readers for the two files of a BPE tokenizer: GPT-2's byte-level one, in either naming
// (OpenAI's encoder.json + vocab.bpe or Hugging Face's vocab.json + merges.txt, the same
// content), or GPT-1's (Hugging Face's openai-gpt vocab.json + merges.txt). GPT-2's files
// spell each byte as a character of its byte alphabet; tokens come back as raw bytes (the
// alphabet undone). GPT-1's tokens are UTF-8 text as written ("the</w>"). Every problem is
// an InputError "PATH:LINE:COLUMN: cause" (or "PATH: cause" when it has no one place).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/files.hpp"

namespace gptvk::tokenizer {

enum class Spelling {
  ByteAlphabet,  // GPT-2: every character stands for one byte (models/tokenizer/byte_alphabet.hpp)
  Utf8,          // GPT-1: the text as it is
};

// GPT-1's spelling when some token ends a word with "</w>" and there is no token "Ġ"
// (U+0120, byte 0x20 in GPT-2's alphabet, which every byte-level vocabulary holds);
// decided from the vocabulary's JSON text before it is parsed.
Spelling vocab_spelling(std::string_view vocab_json);

struct Merge {
  uint32_t left, right, merged;  // token ids; the merge's rank is its index in the list
};

// The vocabulary's text (vocab.json, or a GGUF file's tokens as one): a JSON object
// {"token": id, ...} whose ids are exactly 0..N-1. Returns the tokens' bytes indexed by id;
// `path` names the source in errors.
std::vector<std::string> parse_vocab(const std::string& path, std::string_view text,
                                     Spelling spelling = Spelling::ByteAlphabet);
// The merges' text, one "LEFT RIGHT" pair a line in rank order (an optional "#version"
// first line and blank lines are skipped). Both halves and their concatenation must be
// tokens of the vocabulary (`ids`: token bytes -> id); a pair listed twice is an error.
std::vector<Merge> parse_merges(const std::string& path, std::string_view text,
                                const std::unordered_map<std::string, uint32_t>& ids,
                                Spelling spelling = Spelling::ByteAlphabet);

// A token's bytes in a message: JSON-quoted (control bytes escaped, bytes that are not UTF-8
// as U+FFFD), its start only when long.
std::string quote_token(const std::string& token);

// The whole of a regular file of at most `max_bytes`, or InputError "cannot read PATH: reason".
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = files::kMaxTokenizerBytes);

}  // namespace gptvk::tokenizer
