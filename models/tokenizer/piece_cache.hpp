// Remembers the BPE result of each piece seen: text repeats its words, so after the first
// few kilobytes nearly every piece is a cache hit and the merge loop is skipped. Open
// addressing over 32-byte slots: a piece of up to 16 bytes and a result of one id (most
// words) live in the slot itself, so a hit touches one cache line; longer ones go to
// arenas. When it holds more than its budget it starts over empty, which bounds memory
// on endless novel input.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk::tokenizer {

class PieceCache {
 public:
  // A piece ready for lookup: its hash and, for short pieces, its bytes zero-padded to 16.
  struct Key {
    explicit Key(std::string_view piece);
    std::string_view piece;
    uint64_t hash;
    uint64_t words[2] = {0, 0};
  };

  // The cached ids of the piece, or an empty span (no piece encodes to zero ids).
  std::span<const uint32_t> find(const Key& key) const;
  void insert(const Key& key, std::span<const uint32_t> ids);

  // Appends the ids of `piece` to out: the cached ones, or those merge() appends, which are
  // then cached. Pieces longer than kMaxPiece skip the cache (long one-off runs would evict
  // useful words).
  template <class Merge>
  void append(std::string_view piece, std::vector<uint32_t>& out, Merge&& merge);
  static constexpr size_t kMaxPiece = 256;
  void clear();
  size_t size() const { return count_; }

  static constexpr size_t kInlineKey = 16;
  // Budget: entries and bytes of the arenas before the cache starts over.
  static constexpr size_t kMaxEntries = 1u << 18;
  static constexpr size_t kMaxArenaBytes = 16u << 20;

 private:
  struct Slot {
    uint64_t hash = 0;
    uint16_t key_len = 0;  // 0: empty slot
    uint16_t ids_len = 0;
    uint32_t ids;          // the id itself when ids_len == 1, else an offset into ids_
    uint64_t key[2];       // the zero-padded bytes when key_len <= 16, else key[0] = offset into keys_
  };
  static_assert(sizeof(Slot) == 32);
  bool same_key(const Slot& s, const Key& k) const {
    if (s.hash != k.hash || s.key_len != k.piece.size()) return false;
    if (s.key_len <= kInlineKey) return s.key[0] == k.words[0] && s.key[1] == k.words[1];
    return std::memcmp(keys_.data() + s.key[0], k.piece.data(), s.key_len) == 0;
  }
  void grow();

  std::vector<Slot> slots_;  // power-of-two size, at most half full
  std::string keys_;
  std::vector<uint32_t> ids_;
  size_t count_ = 0;
};

template <class Merge>
void PieceCache::append(std::string_view piece, std::vector<uint32_t>& out, Merge&& merge) {
  if (piece.size() > kMaxPiece) {
    merge();
    return;
  }
  const Key key(piece);
  const auto hit = find(key);
  if (hit.size() == 1) {
    out.push_back(hit[0]);
  } else if (!hit.empty()) {
    out.insert(out.end(), hit.begin(), hit.end());
  } else {
    const size_t start = out.size();
    merge();
    insert(key, std::span<const uint32_t>(out.data() + start, out.size() - start));
  }
}

}  // namespace gptvk::tokenizer
