#include "models/tokenizer/id_list.hpp"

#include <string>

#include "engine/error.hpp"

namespace gptvk {

std::vector<uint32_t> parse_id_list(std::string_view text, std::string_view what) {
  std::vector<uint32_t> ids;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  // A comma must follow an id: "1,,2" or a comma at either end is a missing id, not a gap
  // to skip (a script's empty variable in "$A,$B" would pass unseen).
  auto empty_item = [&] {
    return InputError(std::string(what) + ": an empty item (a comma with no id before or after it)");
  };
  bool comma_open = true;  // no id since the start or the last comma
  bool any_comma = false;
  size_t i = 0;
  while (i < text.size()) {
    if (is_space(text[i])) {
      ++i;
      continue;
    }
    if (text[i] == ',') {
      if (comma_open) throw empty_item();
      comma_open = any_comma = true;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && !is_space(text[j]) && text[j] != ',') ++j;
    std::string_view item = text.substr(i, j - i);
    uint64_t v = 0;
    bool ok = item.size() <= 10;
    for (char c : item) {
      if (c < '0' || c > '9') ok = false;
      v = v * 10 + uint64_t(c - '0');
    }
    if (!ok || v > UINT32_MAX)
      throw InputError(std::string(what) + ": '" + excerpt(item) + "' is not a token id");
    ids.push_back(uint32_t(v));
    comma_open = false;
    i = j;
  }
  if (any_comma && comma_open) throw empty_item();
  return ids;
}

}  // namespace gptvk
