// GPT-1's BPE (Hugging Face's BPE model with end_of_word_suffix "</w>", as "openai-gpt"
// uses it): a word's characters are its first symbols, the last one spelled with "</w>"
// ("the" starts as "t", "h", "e</w>"); a character the vocabulary lacks in that form
// becomes "<unk>"; then the merges run by GPT-2's rule (models/tokenizer/bpe.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/tokenizer/bpe.hpp"
#include "models/tokenizer/piece_cache.hpp"
#include "models/tokenizer/vocab_files.hpp"

namespace gptvk::tokenizer {

class WordBpe {
 public:
  static constexpr std::string_view kEndOfWord = "</w>";
  static constexpr std::string_view kUnknown = "<unk>";

  // `ids`: token text -> id. `vocab_path` names the vocabulary in errors.
  WordBpe(const std::vector<Merge>& merges, std::unordered_map<std::string, uint32_t> ids, std::string vocab_path);

  // Appends the ids of `word` (UTF-8, not empty: one of bert_words()'s) to out. A
  // character outside the vocabulary is "<unk>"; without that token it is an InputError.
  // Not thread-safe (the cache, scratch buffers).
  void encode(std::string_view word, std::vector<uint32_t>& out);

 private:
  uint32_t symbol_id(std::string_view ch, bool last);

  PairMerger merger_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::optional<uint32_t> unk_;
  std::string vocab_path_;
  PieceCache cache_;
  std::vector<uint32_t> sym_;
  std::string scratch_;
};

}  // namespace gptvk::tokenizer
