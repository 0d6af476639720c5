#include "models/tokenizer/utf8.hpp"

#include <cstring>

namespace gptvk::tokenizer {

namespace {

inline bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// The allowed range of the byte after lead byte `lead` (RFC 3629 table 3-7); other
// continuation bytes are always 80..BF. Returns the total length, 0 for a bad lead.
inline size_t lead_info(unsigned char lead, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead == 0xE0) { lo = 0xA0; return 3; }
  if (lead == 0xED) { hi = 0x9F; return 3; }  // no surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return 3;
  if (lead == 0xF0) { lo = 0x90; return 4; }  // no overlongs
  if (lead >= 0xF1 && lead <= 0xF3) return 4;
  if (lead == 0xF4) { hi = 0x8F; return 4; }  // nothing past U+10FFFF
  return 0;
}

}  // namespace

size_t utf8_char_length(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  unsigned char c = p[i];
  if (c < 0x80) return 1;
  unsigned char lo, hi;
  size_t len = lead_info(c, lo, hi);
  if (len == 0 || i + len > s.size()) return 0;
  if (p[i + 1] < lo || p[i + 1] > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (!is_cont(p[i + k])) return 0;
  return len;
}

size_t utf8_valid_until(std::string_view s, size_t from) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = from, n = s.size();
  while (i < n) {
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    size_t len = utf8_char_length(s, i);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

size_t utf8_incomplete_tail(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  // A held-back tail is a lead byte followed by fewer continuation bytes than it needs.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = p[n - back];
    if (is_cont(c)) continue;
    unsigned char lo, hi;
    size_t len = lead_info(c, lo, hi);
    if (len <= back) return 0;  // ASCII, a bad lead, or a complete character
    if (back >= 2 && (p[n - back + 1] < lo || p[n - back + 1] > hi)) return 0;
    return back;
  }
  return 0;
}

std::string token_json_text(std::string_view bytes) {
  if (utf8_valid_until(bytes, 0) == bytes.size()) return std::string(bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "bytes:";
  for (unsigned char b : bytes) out += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
  return out;
}

std::vector<size_t> utf8_char_offsets(std::string_view s, std::span<const size_t> ends) {
  std::vector<size_t> offsets;
  offsets.reserve(ends.size());
  size_t i = 0, chars = 0;
  for (size_t end : ends) {
    while (i < end) {
      size_t len = utf8_char_length(s, i);
      if (len == 0) {  // the longest start of a character there, at least its first byte
        len = 1;
        for (size_t k = 2; k <= 3 && i + k <= s.size(); ++k)
          if (utf8_incomplete_tail(s.substr(i, k)) == k) len = k;
      }
      if (i + len > end) break;
      i += len;
      ++chars;
    }
    offsets.push_back(chars);
  }
  return offsets;
}

uint32_t utf8_code_point(std::string_view s, size_t i, size_t len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + i);
  if (len == 1) return p[0];
  if (len == 2) return uint32_t(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
  if (len == 3) return uint32_t(p[0] & 0x0F) << 12 | uint32_t(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
  return uint32_t(p[0] & 0x07) << 18 | uint32_t(p[1] & 0x3F) << 12 | uint32_t(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

}  // namespace gptvk::tokenizer
