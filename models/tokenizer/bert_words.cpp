#include "models/tokenizer/bert_words.hpp"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

#include <array>
#include <utility>

#include "engine/error.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::tokenizer {

namespace {

// The CJK ideograph blocks of the crate's is_chinese_char.
constexpr std::array<std::pair<UChar32, UChar32>, 8> kCjk = {{
    {0x4E00, 0x9FFF}, {0x3400, 0x4DBF}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B73F},
    {0x2B740, 0x2B81F}, {0x2B920, 0x2CEAF}, {0xF900, 0xFAFF}, {0x2F800, 0x2FA1F},
}};

bool is_cjk(UChar32 c) {
  for (auto [lo, hi] : kCjk)
    if (c >= lo && c <= hi) return true;
  return false;
}

bool is_other(UChar32 c) {
  return (U_GET_GC_MASK(c) & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CN_MASK | U_GC_CO_MASK | U_GC_CS_MASK)) != 0;
}

bool is_punctuation(UChar32 c) {
  const bool ascii =
      (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
  return ascii || (U_GET_GC_MASK(c) & U_GC_P_MASK) != 0;
}

void append_utf16(std::u16string& out, UChar32 c) {
  if (c <= 0xFFFF) {
    out += char16_t(c);
  } else {
    out += char16_t(U16_LEAD(c));
    out += char16_t(U16_TRAIL(c));
  }
}

// Steps 1 and 2, to UTF-16 for ICU's normalizer.
std::u16string clean(std::string_view text) {
  std::u16string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_char_length(text, i);
    if (len == 0) {  // an invalid byte: the U+FFFD it would decode to is dropped
      ++i;
      continue;
    }
    const UChar32 c = UChar32(utf8_code_point(text, i, len));
    i += len;
    if (c == '\t' || c == '\n' || c == '\r' || (u_isUWhiteSpace(c) && !is_other(c))) {
      out += u' ';
    } else if (c == 0 || c == 0xFFFD || is_other(c)) {
      continue;
    } else if (is_cjk(c)) {
      out += u' ';
      append_utf16(out, c);
      out += u' ';
    } else {
      append_utf16(out, c);
    }
  }
  return out;
}

std::u16string nfd(const std::u16string& s) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = unorm2_getNFDInstance(&err);
  if (U_FAILURE(err)) throw Error(std::string("ICU has no NFD normalizer: ") + u_errorName(err));
  std::u16string out(s.size() + s.size() / 4 + 16, u'\0');  // grown below if NFD needs more
  for (;;) {
    err = U_ZERO_ERROR;
    int32_t n_out = unorm2_normalize(n, reinterpret_cast<const UChar*>(s.data()), int32_t(s.size()),
                                     reinterpret_cast<UChar*>(out.data()), int32_t(out.size()), &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(size_t(n_out));
      continue;
    }
    if (U_FAILURE(err)) throw Error(std::string("ICU NFD failed: ") + u_errorName(err));
    out.resize(size_t(n_out));
    return out;
  }
}

// Steps 3-5 over one piece of text.
void words_of_piece(std::string_view text, const std::function<void(std::string_view)>& emit) {
  const std::u16string decomposed = nfd(clean(text));
  std::string word;
  auto end_word = [&] {
    if (!word.empty()) emit(word);
    word.clear();
  };
  for (size_t i = 0; i < decomposed.size();) {
    UChar32 c;
    U16_NEXT(decomposed.data(), i, decomposed.size(), c);
    if (u_charType(c) == U_NON_SPACING_MARK) continue;
    c = u_tolower(c);  // simple mapping: the one character with a longer one, U+0130, NFD split
    if (c == ' ') {
      end_word();
    } else if (is_punctuation(c)) {
      end_word();
      append_utf8(word, uint32_t(c));
      end_word();
    } else {
      append_utf8(word, uint32_t(c));
    }
  }
  end_word();
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

void for_each_bert_word(std::string_view text, const std::function<void(std::string_view)>& word) {
  constexpr size_t kPiece = 64 << 10;
  while (!text.empty()) {
    size_t cut = text.size();
    if (cut > kPiece) {
      cut = kPiece;
      while (cut > 0 && !is_ascii_space(text[cut - 1])) --cut;
      if (cut == 0) {  // no break in the first 64 KiB: up to the next one
        cut = kPiece;
        while (cut < text.size() && !is_ascii_space(text[cut])) ++cut;
      }
    }
    words_of_piece(text.substr(0, cut), word);
    text.remove_prefix(cut);
  }
}

std::vector<std::string> bert_words(std::string_view text) {
  std::vector<std::string> words;
  for_each_bert_word(text, [&](std::string_view w) { words.emplace_back(w); });
  return words;
}

}  // namespace gptvk::tokenizer
