#include "models/tokenizer/added_tokens.hpp"

#include "models/tokenizer/byte_alphabet.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::tokenizer {

namespace {

// Unicode's White_Space, what transformers' lstrip and rstrip take (Rust's char::is_whitespace).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The length of the whitespace that `text` starts with (from_end: ends with).
size_t white_space_length(std::string_view text, bool from_end) {
  size_t n = 0;
  while (n < text.size()) {
    size_t at = n;
    if (from_end) {  // back over continuation bytes to the character's first byte
      at = text.size() - n - 1;
      while (at > 0 && text.size() - n - at < 4 && (static_cast<uint8_t>(text[at]) & 0xC0) == 0x80) --at;
    }
    const size_t len = utf8_char_length(text, at);
    if (len == 0 || (from_end && at + len != text.size() - n) || !is_white_space(utf8_code_point(text, at, len)))
      break;
    n += len;
  }
  return n;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> added, const std::vector<std::string>& texts)
    : added_(std::move(added)) {
  root_.fill(kNone);
  nodes_.emplace_back();  // the root, whose children root_ indexes
  for (uint32_t t = 0; t < added_.size(); ++t) {
    const std::string& s = texts[t];
    if (s.empty()) continue;
    uint32_t node = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const uint8_t b = static_cast<uint8_t>(s[i]);
      uint32_t next = i == 0 ? root_[b] : child(node, b);
      if (next == kNone) {
        next = static_cast<uint32_t>(nodes_.size());
        if (i == 0) root_[b] = next;
        else nodes_[node].next.emplace_back(b, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    if (nodes_[node].token == kNone) nodes_[node].token = t;  // two tokens of one text: the first
    (added_[t].special ? any_special_ : any_plain_) = true;
  }
}

uint32_t AddedTokenMatcher::child(uint32_t node, uint8_t b) const {
  for (auto [byte, next] : nodes_[node].next)
    if (byte == b) return next;
  return kNone;
}

std::pair<uint32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t i, bool allow_special) const {
  std::pair<uint32_t, size_t> best{kNone, 0};
  for (uint32_t node = root_[static_cast<uint8_t>(text[i])], j = 1; node != kNone; ++j) {
    const uint32_t t = nodes_[node].token;
    if (t != kNone && (allow_special || !added_[t].special)) best = {t, j};
    if (i + j >= text.size()) break;
    node = child(node, static_cast<uint8_t>(text[i + j]));
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, bool allow_special,
                              const std::function<void(std::string_view)>& plain,
                              const std::function<void(uint32_t)>& token) const {
  size_t plain_from = 0;
  for (size_t i = 0; i < text.size();) {
    const auto [t, len] = longest_at(text, i, allow_special);
    if (t == kNone) {
      ++i;
      continue;
    }
    std::string_view before = text.substr(plain_from, i - plain_from);
    if (added_[t].lstrip) before.remove_suffix(white_space_length(before, true));
    if (!before.empty()) plain(before);
    token(added_[t].id);
    i += len;
    if (added_[t].rstrip) i += white_space_length(text.substr(i), false);
    plain_from = i;
  }
  if (plain_from < text.size()) plain(text.substr(plain_from));
}

std::string byte_alphabet_spelling(std::string_view bytes) {
  std::string out;
  for (char c : bytes) append_utf8(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace gptvk::tokenizer
