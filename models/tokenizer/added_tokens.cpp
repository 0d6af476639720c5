#include "models/tokenizer/added_tokens.hpp"

#include <algorithm>
#include <optional>

#include "models/tokenizer/byte_alphabet.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::tokenizer {

void sort_longest_first(std::vector<AddedText>& added) {
  std::sort(added.begin(), added.end(), [](const AddedText& a, const AddedText& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  });
}

void split_on_added(std::string_view text, std::span<const AddedText> added, bool allow_special,
                    const std::function<void(std::string_view)>& plain, const std::function<void(uint32_t)>& token) {
  struct Part {
    std::string_view text;
    std::optional<uint32_t> id;
  };
  std::vector<Part> parts{{text, std::nullopt}}, next;
  for (const AddedText& a : added) {
    if ((a.special && !allow_special) || a.text.empty()) continue;
    next.clear();
    for (const Part& p : parts) {
      if (p.id) {
        next.push_back(p);
        continue;
      }
      std::string_view rest = p.text;
      for (size_t at; (at = rest.find(a.text)) != std::string_view::npos;) {
        if (at > 0) next.push_back({rest.substr(0, at), std::nullopt});
        next.push_back({{}, a.id});
        rest.remove_prefix(at + a.text.size());
      }
      if (!rest.empty()) next.push_back({rest, std::nullopt});
    }
    parts.swap(next);
  }
  for (const Part& p : parts) p.id ? token(*p.id) : plain(p.text);
}

std::string byte_alphabet_spelling(std::string_view bytes) {
  std::string out;
  for (char c : bytes) append_utf8(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace gptvk::tokenizer
