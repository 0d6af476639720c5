#include "models/tokenizer/id_list.hpp"

#include <string>

#include "engine/error.hpp"

namespace gptvk {

std::vector<uint32_t> parse_id_list(std::string_view text, std::string_view what) {
  std::vector<uint32_t> ids;
  auto is_sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t i = 0;
  while (i < text.size()) {
    if (is_sep(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && !is_sep(text[j])) ++j;
    std::string_view item = text.substr(i, j - i);
    uint64_t v = 0;
    bool ok = item.size() <= 10;
    for (char c : item) {
      if (c < '0' || c > '9') ok = false;
      v = v * 10 + uint64_t(c - '0');
    }
    if (!ok || v > UINT32_MAX)
      throw InputError(std::string(what) + ": '" + std::string(item) + "' is not a token id");
    ids.push_back(uint32_t(v));
    i = j;
  }
  return ids;
}

}  // namespace gptvk
