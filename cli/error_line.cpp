#include "cli/error_line.hpp"

#include <cstdio>

#include "models/tokenizer/utf8.hpp"

namespace gptvk::cli {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char hex[8];
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t n = tokenizer::utf8_char_length(text, i);
    if (n == 1 && byte >= 0x20 && byte != 0x7f) {
      out += text[i];
    } else if (n == 1 && (byte == '\n' || byte == '\r' || byte == '\t')) {
      out += byte == '\n' ? "\\n" : byte == '\r' ? "\\r" : "\\t";
    } else if (n <= 1) {  // another control byte, or one that starts no valid character
      std::snprintf(hex, sizeof hex, "\\x%02X", byte);
      out += hex;
    } else if (n == 2 && byte == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {  // C1: U+0080..U+009F
      std::snprintf(hex, sizeof hex, "\\u%04X", static_cast<unsigned char>(text[i + 1]));
      out += hex;
    } else {
      out.append(text, i, n);
    }
    i += n == 0 ? 1 : n;
  }
  return out;
}

void print_error(std::string_view message) { std::fprintf(stderr, "gpt-vk: %s\n", printable(message).c_str()); }

}  // namespace gptvk::cli
