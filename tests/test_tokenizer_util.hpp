// Shared by the tokenizer tests: where the GPT-2 files and fixtures are, and random text.
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <random>
#include <sstream>
#include <string>

#include "engine/error.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::test {

inline std::string source_path(const std::string& rel) { return std::string(GPTVK_SOURCE_DIR) + "/" + rel; }

inline const Tokenizer& gpt2_tokenizer() {
  static Tokenizer tok = Tokenizer::load(source_path("models/gpt2-tokenizer/encoder.json"),
                                         source_path("models/gpt2-tokenizer/vocab.bpe"));
  return tok;
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Random valid UTF-8 of n characters drawn from ranges that stress the pattern: ASCII
// letters, digits, punctuation and every whitespace kind, Latin-1, combining marks,
// scripts, CJK, the zero-width joiner and variation selectors, emoji and any code point
// at all (unassigned ones included, never surrogates).
inline std::string random_utf8(std::mt19937& rng, size_t n) {
  static const uint32_t kWhite[] = {'\t', '\n', 0x0B, 0x0C, '\r', ' ', 0x85, 0xA0, 0x1680, 0x180E,
                                    0x2000, 0x2005, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF};
  static const char kAscii[] = "abcXYZ019'sS tlmdrev.,!?-_\"#(){}<>|\\/";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp;
    switch (rng() % 12) {
      case 0: case 1: case 2: cp = uint8_t(kAscii[rng() % (sizeof kAscii - 1)]); break;
      case 3: cp = kWhite[rng() % std::size(kWhite)]; break;
      case 4: cp = 0x80 + rng() % 0x180; break;            // Latin-1 and Latin Extended
      case 5: cp = 0x300 + rng() % 0x70; break;            // combining diacritics
      case 6: cp = 0x400 + rng() % 0x1000; break;          // Cyrillic .. Devanagari .. Thai ..
      case 7: cp = 0x4E00 + rng() % 0x5200; break;         // CJK
      case 8: cp = (rng() % 2) ? 0x200D : 0xFE0F; break;   // ZWJ, VS16
      case 9: cp = 0x1F300 + rng() % 0x700; break;         // emoji
      default:
        do cp = rng() % 0x110000;
        while (cp >= 0xD800 && cp < 0xE000);
    }
    tokenizer::append_utf8(out, cp);
  }
  return out;
}

inline bool is_valid_utf8(const std::string& s) { return tokenizer::utf8_valid_until(s, 0) == s.size(); }

// The InputError message of loading these files, or "" if they load.
inline std::string tokenizer_load_error(const std::string& vocab, const std::string& merges) {
  try {
    Tokenizer::load(vocab, merges);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace gptvk::test
