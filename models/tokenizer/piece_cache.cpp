#include "models/tokenizer/piece_cache.hpp"

namespace gptvk::tokenizer {

namespace {
constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
inline uint64_t mix_word(uint64_t h) {
  h *= kMul;
  return h ^ (h >> 29);
}
}  // namespace

PieceCache::Key::Key(std::string_view p) : piece(p) {
  // Eight bytes at a time with a multiply-xorshift mix: pieces are short, so this is a
  // handful of multiplies. The last partial word is zero-padded.
  uint64_t h = p.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= p.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, p.data() + i, 8);
    if (i < kInlineKey) words[i / 8] = w;
    h = mix_word(h ^ w);
  }
  if (i < p.size()) {
    uint64_t w = 0;
    std::memcpy(&w, p.data() + i, p.size() - i);
    if (i < kInlineKey) words[i / 8] = w;
    h = mix_word(h ^ w);
  }
  h *= kMul;
  hash = h ^ (h >> 32);
}

std::span<const uint32_t> PieceCache::find(const Key& k) const {
  if (slots_.empty()) return {};
  size_t mask = slots_.size() - 1;
  for (size_t i = k.hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.key_len == 0) return {};
    if (same_key(s, k)) return s.ids_len == 1 ? std::span<const uint32_t>(&s.ids, 1)
                                              : std::span<const uint32_t>(ids_.data() + s.ids, s.ids_len);
  }
}

void PieceCache::insert(const Key& k, std::span<const uint32_t> ids) {
  if (k.piece.empty() || k.piece.size() > UINT16_MAX || ids.empty() || ids.size() > UINT16_MAX) return;
  size_t arena = (k.piece.size() > kInlineKey ? k.piece.size() : 0) + (ids.size() > 1 ? 4 * ids.size() : 0);
  if (count_ + 1 > kMaxEntries || keys_.size() + 4 * ids_.size() + arena > kMaxArenaBytes) clear();
  if ((count_ + 1) * 2 > slots_.size()) grow();
  size_t mask = slots_.size() - 1;
  size_t i = k.hash & mask;
  while (slots_[i].key_len != 0) i = (i + 1) & mask;
  Slot& s = slots_[i];
  s.hash = k.hash;
  s.key_len = uint16_t(k.piece.size());
  s.ids_len = uint16_t(ids.size());
  if (k.piece.size() <= kInlineKey) {
    s.key[0] = k.words[0];
    s.key[1] = k.words[1];
  } else {
    s.key[0] = keys_.size();
    s.key[1] = 0;
    keys_.append(k.piece);
  }
  if (ids.size() == 1) {
    s.ids = ids[0];
  } else {
    s.ids = uint32_t(ids_.size());
    ids_.insert(ids_.end(), ids.begin(), ids.end());
  }
  ++count_;
}

void PieceCache::clear() {
  slots_.assign(slots_.size(), Slot{});
  keys_.clear();
  ids_.clear();
  count_ = 0;
}

void PieceCache::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 4096 : old.size() * 2, Slot{});
  size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key_len == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].key_len != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace gptvk::tokenizer
