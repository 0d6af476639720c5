// GPT-2's pre-tokenisation: the text is cut into pieces by OpenAI's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with Unicode letter and number classes (PCRE2, UTF + UCP, JIT-compiled when available),
// and each piece is then BPE-encoded on its own.
//
// \s means what it means in the Python `regex` module that GPT-2's encoder.py uses: the
// Unicode White_Space property (TAB..CR, space, U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000). It is spelled out because PCRE2's \s also takes
// U+180E and JavaScript's takes U+FEFF but not U+0085.
//
// Bytes that are not valid UTF-8 are not text to the pattern: each such byte becomes a
// piece of its own, and the valid stretches between them are cut as usual (so pieces
// always concatenate back to the input, byte for byte).
#pragma once
#include <cstddef>
#include <memory>
#include <string_view>

#include "models/tokenizer/utf8.hpp"

namespace gptvk::tokenizer {

class Pretokenizer {
 public:
  Pretokenizer();
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Calls piece(std::string_view) for each piece of `text`, in order. Not reentrant on
  // one object (it reuses match state); the Tokenizer serialises calls.
  template <class F>
  void split(std::string_view text, F&& piece);

 private:
  // Length of the pattern's match at valid[pos]; `valid` is a whole stretch of valid
  // UTF-8 (its end is where the pattern sees the end of the text).
  size_t match_at(std::string_view valid, size_t pos);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <class F>
void Pretokenizer::split(std::string_view text, F&& piece) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t valid_end = utf8_valid_until(text, pos);
    std::string_view valid = text.substr(pos, valid_end - pos);
    for (size_t at = 0; at < valid.size();) {
      size_t len = match_at(valid, at);
      piece(valid.substr(at, len));
      at += len;
    }
    pos = valid_end;
    if (pos < text.size()) {  // one byte that is not (the start of) a valid character
      piece(text.substr(pos, 1));
      ++pos;
    }
  }
}

}  // namespace gptvk::tokenizer
