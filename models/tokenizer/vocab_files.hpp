// Readers for the two files of a GPT-2 byte-level BPE tokenizer, in either spelling:
// OpenAI's encoder.json + vocab.bpe or Hugging Face's vocab.json + merges.txt (the same
// content). Tokens come back as raw bytes (the byte alphabet undone). Every problem is an
// InputError "PATH:LINE:COLUMN: cause" (or "PATH: cause" when it has no one place).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gptvk::tokenizer {

// The vocabulary: a JSON object {"token": id, ...} whose ids are exactly 0..N-1.
// Returns the tokens' bytes indexed by id.
std::vector<std::string> read_vocab(const std::string& path);

struct Merge {
  uint32_t left, right, merged;  // token ids; the merge's rank is its index in the list
};

// The merges, one "LEFT RIGHT" pair a line in rank order (an optional "#version" first
// line and blank lines are skipped). Both halves and their concatenation must be tokens
// of the vocabulary (`ids`: token bytes -> id); a pair listed twice is an error.
std::vector<Merge> read_merges(const std::string& path, const std::unordered_map<std::string, uint32_t>& ids);

// The same readers over text held in memory (a GGUF file's tokenizer); `path` names it
// in errors.
std::vector<std::string> parse_vocab(const std::string& path, std::string_view text);
std::vector<Merge> parse_merges(const std::string& path, std::string_view text,
                                const std::unordered_map<std::string, uint32_t>& ids);

// The whole of a regular file of at most `max_bytes` (default: the tokenizer files' limit),
// or InputError "cannot read PATH: reason".
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = 64ull << 20);

}  // namespace gptvk::tokenizer
