#include "models/tokenizer/word_bpe.hpp"

#include <algorithm>
#include <cstdio>
#include <span>
#include <utility>

#include "engine/error.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::tokenizer {

WordBpe::WordBpe(const std::vector<Merge>& merges, std::unordered_map<std::string, uint32_t> ids,
                 std::string vocab_path)
    : merger_(merges), ids_(std::move(ids)), vocab_path_(std::move(vocab_path)) {
  if (auto it = ids_.find(std::string(kUnknown)); it != ids_.end()) unk_ = it->second;
}

uint32_t WordBpe::symbol_id(std::string_view ch, bool last) {
  scratch_.assign(ch);
  if (last) scratch_ += kEndOfWord;
  if (auto it = ids_.find(scratch_); it != ids_.end()) return it->second;
  if (unk_) return *unk_;
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X", utf8_code_point(ch, 0, ch.size()));
  throw InputError("character " + std::string(code) + " ('" + std::string(ch) + "') is not in the vocabulary " +
                   vocab_path_ + ", which has no " + std::string(kUnknown) + " token to stand for it");
}

void WordBpe::encode(std::string_view word, std::vector<uint32_t>& out) {
  cache_.append(word, out, [&] {
    PairMerger::check_memory(word.size());  // a character is a byte or more
    sym_.clear();
    for (size_t i = 0; i < word.size();) {
      size_t len = std::max<size_t>(1, utf8_char_length(word, i));  // bert_words() gives valid UTF-8
      sym_.push_back(symbol_id(word.substr(i, len), i + len == word.size()));
      i += len;
    }
    merger_.merge(sym_, out);
    if (sym_.size() > PairMerger::kKeptScratch) std::vector<uint32_t>().swap(sym_);
  });
}

}  // namespace gptvk::tokenizer
