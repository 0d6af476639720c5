#include "models/tokenizer/bpe.hpp"

#include <algorithm>
#include <functional>
#include <string>

#include "engine/error.hpp"
#include "engine/host_memory.hpp"

namespace gptvk::tokenizer {

namespace {
constexpr uint64_t kEmptyKey = UINT64_MAX;  // ids are below 2^24, so no real key is this
inline uint64_t pair_key(uint32_t l, uint32_t r) { return uint64_t(l) << 32 | r; }
inline uint64_t hash_pair_key(uint64_t k) {
  k *= 0x9E3779B97F4A7C15ull;
  return k ^ (k >> 31);
}
constexpr uint32_t kDead = UINT32_MAX;
}  // namespace

MergeTable::MergeTable(const std::vector<Merge>& merges) {
  size_t cap = 16;
  while (cap < merges.size() * 2) cap *= 2;
  slots_.assign(cap, Slot{kEmptyKey, {kNoRank, 0}});
  mask_ = cap - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    uint64_t key = pair_key(merges[rank].left, merges[rank].right);
    uint64_t i = hash_pair_key(key) & mask_;
    while (slots_[i].key != kEmptyKey && slots_[i].key != key) i = (i + 1) & mask_;
    slots_[i] = Slot{key, {uint32_t(rank), merges[rank].merged}};
  }
}

MergeTable::Hit MergeTable::find(uint32_t left, uint32_t right) const {
  uint64_t key = pair_key(left, right);
  for (uint64_t i = hash_pair_key(key) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.key == key) return s.hit;
    if (s.key == kEmptyKey) return {kNoRank, 0};
  }
}

BpeEncoder::BpeEncoder(const std::vector<Merge>& merges, const std::array<uint32_t, 256>& byte_ids)
    : merger_(merges), byte_ids_(byte_ids) {}

void BpeEncoder::encode(std::string_view piece, std::vector<uint32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  cache_.append(piece, out, [&] { merge(piece, out); });
}

namespace {

// Gives back a scratch vector's memory (clear() keeps it).
template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

void BpeEncoder::merge(std::string_view piece, std::vector<uint32_t>& out) {
  PairMerger::check_memory(piece.size());
  sym_.resize(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) sym_[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  merger_.merge(sym_, out);
  if (sym_.size() > PairMerger::kKeptScratch) release(sym_);
}

// The memory free: MemAvailable, and the address space left under `ulimit -v`.
void PairMerger::check_memory(size_t symbols) {
  if (symbols <= kCheckedSymbols) return;
  const uint64_t need = uint64_t(symbols) * kBytesPerSymbol;
  uint64_t free = host_available_bytes();
  if (const auto left = address_space_left()) free = free ? std::min(free, *left) : *left;
  if (free == 0 || need <= free) return;  // 0: unknown
  throw InputError("a word of " + std::to_string(symbols) +
                   " bytes with nothing the tokenizer splits at (a space, a digit after letters, "
                   "punctuation) needs about " + std::to_string(need >> 20) + " MiB to tokenize, more than the " +
                   std::to_string(free >> 20) + " MiB of memory free");
}

void PairMerger::merge(std::vector<uint32_t>& sym, std::vector<uint32_t>& out) {
  merge_symbols(sym, out);
  if (sym.size() > kKeptScratch) {
    release(prev_);
    release(next_);
    release(heap_);
    release(batch_);
  }
}

void PairMerger::merge_symbols(std::vector<uint32_t>& sym, std::vector<uint32_t>& out) {
  const int32_t n = int32_t(sym.size());
  prev_.resize(n);
  next_.resize(n);
  heap_.clear();
  heap_.reserve(sym.size());  // every adjacent pair at most, with no doubling past it
  for (int32_t i = 0; i < n; ++i) {
    prev_[i] = i - 1;
    next_[i] = i + 1 < n ? i + 1 : -1;
  }
  auto consider = [&](int32_t left) {  // queue the pair starting at symbol `left`, if it merges
    if (left < 0 || next_[left] < 0) return;
    MergeTable::Hit h = table_.find(sym[left], sym[next_[left]]);
    if (h.rank != MergeTable::kNoRank) {
      heap_.push_back(uint64_t(h.rank) << 32 | uint32_t(left));
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    MergeTable::Hit h = table_.find(sym[i], sym[i + 1]);
    if (h.rank != MergeTable::kNoRank) heap_.push_back(uint64_t(h.rank) << 32 | uint32_t(i));
  }
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());

  while (!heap_.empty()) {
    // Take every queued occurrence of the lowest-rank pair; they come out ordered by
    // position, so merging them in this order is encoder.py's left-to-right pass. Pairs
    // made by these merges contain the new token, so their ranks are different and wait
    // for the next round, as in encoder.py.
    const uint32_t rank = uint32_t(heap_.front() >> 32);
    batch_.clear();
    while (!heap_.empty() && uint32_t(heap_.front() >> 32) == rank) {
      batch_.push_back(heap_.front());
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      heap_.pop_back();
    }
    for (uint64_t entry : batch_) {
      int32_t left = int32_t(uint32_t(entry));
      if (sym[left] == kDead) continue;  // swallowed by an earlier merge
      int32_t right = next_[left];
      if (right < 0) continue;
      MergeTable::Hit h = table_.find(sym[left], sym[right]);
      if (h.rank != rank) continue;  // this pair has changed since it was queued
      sym[left] = h.merged;
      sym[right] = kDead;
      next_[left] = next_[right];
      if (next_[right] >= 0) prev_[next_[right]] = left;
      consider(prev_[left]);
      consider(left);
    }
  }
  for (int32_t i = 0; i >= 0; i = next_[i]) out.push_back(sym[i]);
}

}  // namespace gptvk::tokenizer
