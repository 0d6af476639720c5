// Byte-pair merging of one piece, with GPT-2's rule (encoder.py's bpe()): while some
// adjacent pair of symbols is a listed merge, take the pair of lowest rank and merge every
// occurrence of it, left to right without overlap. Symbols are token ids throughout: each
// byte (GPT-2) or character (GPT-1, models/tokenizer/word_bpe.hpp) starts as its token and
// a merge yields the token of the concatenation.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "models/tokenizer/piece_cache.hpp"
#include "models/tokenizer/vocab_files.hpp"

namespace gptvk::tokenizer {

// (left id, right id) -> (rank, merged id), open addressing over one flat array.
class MergeTable {
 public:
  explicit MergeTable(const std::vector<Merge>& merges);
  struct Hit {
    uint32_t rank, merged;
  };
  static constexpr uint32_t kNoRank = UINT32_MAX;
  // rank == kNoRank when (left, right) is not a merge.
  Hit find(uint32_t left, uint32_t right) const;

 private:
  struct Slot {
    uint64_t key;
    Hit hit;
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
};

// The merge loop over a piece's initial symbols, with scratch buffers kept between calls
// (those of a piece past kKeptScratch symbols are given back after it).
class PairMerger {
 public:
  explicit PairMerger(const std::vector<Merge>& merges) : table_(merges) {}
  // Merges `symbols` (not empty) in place by the rule above and appends the result to out.
  void merge(std::vector<uint32_t>& symbols, std::vector<uint32_t>& out);

  // Bytes a merge takes per symbol at most, the caller's symbols and output included
  // (measured on 20 MB words: 35 bytes per byte for a run of one letter, whose every pair
  // is queued at once and merged in the first round, 22 for random letters; the tokenize
  // command's file and output included).
  static constexpr uint64_t kBytesPerSymbol = 36;
  // Pieces past this many symbols are checked against the memory free (check_memory).
  static constexpr size_t kCheckedSymbols = size_t{1} << 20;
  static constexpr size_t kKeptScratch = size_t{1} << 16;

  // Called before a piece's symbols are made, with its length in bytes (each symbol is a
  // byte or a character): InputError when a piece of more than kCheckedSymbols bytes needs
  // more memory than the host has free, where the OOM killer would otherwise end the
  // process (a word of hundreds of megabytes with nothing the pre-tokenizer splits at).
  static void check_memory(size_t symbols);

 private:
  MergeTable table_;
  // A doubly linked list over the symbols' positions and a heap of (rank << 32 | position)
  // candidate pairs.
  std::vector<int32_t> prev_, next_;
  std::vector<uint64_t> heap_, batch_;

  void merge_symbols(std::vector<uint32_t>& symbols, std::vector<uint32_t>& out);
};

class BpeEncoder {
 public:
  // byte_ids[b]: the token of the single byte b.
  BpeEncoder(const std::vector<Merge>& merges, const std::array<uint32_t, 256>& byte_ids);

  // Appends the ids of `piece` (raw bytes, not empty) to `out`, from the cache when seen
  // before. Not thread-safe: it updates the cache and reuses scratch buffers.
  void encode(std::string_view piece, std::vector<uint32_t>& out);

  // The same without looking at or filling the cache.
  void merge(std::string_view piece, std::vector<uint32_t>& out);

 private:
  PairMerger merger_;
  std::array<uint32_t, 256> byte_ids_;
  PieceCache cache_;
  std::vector<uint32_t> sym_;
};

}  // namespace gptvk::tokenizer
