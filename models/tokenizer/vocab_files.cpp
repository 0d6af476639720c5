#include "models/tokenizer/vocab_files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/tokenizer/byte_alphabet.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::tokenizer {

namespace {

// Largest id accepted: far above any real vocabulary, low enough that a typo cannot make
// us allocate gigabytes.
constexpr uint64_t kMaxId = 1u << 24;

[[noreturn]] void fail_at(const std::string& path, std::string_view text, size_t pos, const std::string& why) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++col;  // count characters, not UTF-8 continuation bytes
    }
  }
  throw InputError(path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + why);
}

std::string hex_code_point(uint32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", c);
  return buf;
}

// Decodes one UTF-8 character of text at i (advancing i) or returns false.
bool next_code_point(std::string_view text, size_t& i, uint32_t& cp) {
  size_t len = utf8_char_length(text, i);
  if (len == 0) return false;
  cp = utf8_code_point(text, i, len);
  i += len;
  return true;
}

// A flat JSON object of string keys and non-negative integer values; nothing else is
// needed for a vocabulary, and a hand-written reader can say where each problem is.
class VocabReader {
 public:
  VocabReader(const std::string& path, std::string_view text, Spelling spelling)
      : path_(path), t_(text), spelling_(spelling) {}

  std::vector<std::string> read() {
    std::vector<std::string> by_id;
    std::vector<size_t> where;  // position of each id's key, for duplicate-id messages
    std::unordered_map<std::string, size_t> seen;
    if (t_.starts_with("\xEF\xBB\xBF")) i_ = 3;  // a UTF-8 byte-order mark, as JSON parsers skip it
    skip_ws();
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        size_t key_pos = i_;
        std::string token = read_token();
        skip_ws();
        expect(':');
        skip_ws();
        size_t id_pos = i_;
        uint64_t id = read_id();
        if (!seen.emplace(token, key_pos).second) fail(key_pos, "token " + quote_token(token) + " listed twice");
        // Each entry takes 5 bytes at least ("a":0): a larger id leaves gaps for sure, and is
        // refused before the tables grow to it (a few bytes would otherwise claim gigabytes).
        if (id >= t_.size() / 5)
          fail(id_pos, "id " + std::to_string(id) + " leaves gaps: the file is too short to hold that many tokens");
        if (id >= by_id.size()) {
          by_id.resize(id + 1);
          where.resize(id + 1, std::string::npos);
        }
        if (where[id] != std::string::npos)
          fail(id_pos, "id " + std::to_string(id) + " given to two tokens, " + quote_token(by_id[id]) + " and " +
                           quote_token(token));
        by_id[id] = std::move(token);
        where[id] = key_pos;
        skip_ws();
        if (peek() == ',') {
          ++i_;
          skip_ws();
          continue;
        }
        expect('}');
        break;
      }
    }
    skip_ws();
    if (i_ != t_.size()) fail(i_, "unexpected text after the JSON object");
    if (by_id.empty()) throw InputError(path_ + ": the vocabulary is empty");
    for (size_t id = 0; id < by_id.size(); ++id)
      if (where[id] == std::string::npos)
        throw InputError(path_ + ": no token has id " + std::to_string(id) + " (ids must be 0.." +
                         std::to_string(by_id.size() - 1) + " without gaps)");
    return by_id;
  }

 private:
  [[noreturn]] void fail(size_t pos, const std::string& why) const { fail_at(path_, t_, pos, why); }
  int peek() const { return i_ < t_.size() ? static_cast<unsigned char>(t_[i_]) : -1; }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
  }
  void expect(char c) {
    if (peek() != static_cast<unsigned char>(c)) {
      fail(i_, std::string("expected '") + c + "'" + (i_ >= t_.size() ? " but the file ends" : ""));
    }
    ++i_;
  }

  uint32_t hex4(size_t at) {
    if (at + 4 > t_.size()) fail(at, "truncated \\u escape");
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = t_[at + k];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                               : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail(at + k, "bad hex digit in \\u escape");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // A JSON string whose characters are all from the byte alphabet; returns its bytes.
  std::string read_token() {
    if (peek() != '"') fail(i_, "expected a token in double quotes");
    ++i_;
    std::string bytes;
    for (;;) {
      if (i_ >= t_.size()) fail(i_, "unterminated string");
      size_t at = i_;
      unsigned char c = static_cast<unsigned char>(t_[i_]);
      uint32_t cp;
      if (c == '"') {
        ++i_;
        break;
      } else if (c == '\\') {
        if (i_ + 1 >= t_.size()) fail(at, "unterminated string");
        char e = t_[i_ + 1];
        i_ += 2;
        switch (e) {
          case '"': cp = '"'; break;
          case '\\': cp = '\\'; break;
          case '/': cp = '/'; break;
          case 'b': cp = '\b'; break;
          case 'f': cp = '\f'; break;
          case 'n': cp = '\n'; break;
          case 'r': cp = '\r'; break;
          case 't': cp = '\t'; break;
          case 'u': {
            cp = hex4(i_);
            i_ += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i_ + 1 < t_.size() && t_[i_] == '\\' && t_[i_ + 1] == 'u') {
              uint32_t lo = hex4(i_ + 2);
              if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i_ += 6;
              }
            }
            break;
          }
          default: fail(at, std::string("unknown escape \\") + e);
        }
      } else if (c < 0x20) {
        fail(at, "control character inside a string");
      } else if (!next_code_point(t_, i_, cp)) {
        fail(at, "invalid UTF-8");
      }
      if (spelling_ == Spelling::Utf8) {
        append_utf8(bytes, cp);
        continue;
      }
      int b = code_point_to_byte(cp);
      if (b < 0) fail(at, "character " + hex_code_point(cp) + " is not in GPT-2's byte alphabet");
      bytes += char(b);
    }
    if (bytes.empty()) fail(i_ - 2, "empty token");
    return bytes;
  }

  uint64_t read_id() {
    size_t start = i_;
    uint64_t v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      v = v * 10 + uint64_t(t_[i_] - '0');
      if (v > kMaxId) fail(start, "id is too large");
      ++i_;
    }
    if (i_ == start) fail(start, "expected a non-negative integer id");
    if (i_ < t_.size() && (t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E'))
      fail(start, "expected a non-negative integer id");
    return v;
  }

  const std::string& path_;
  std::string_view t_;
  Spelling spelling_;
  size_t i_ = 0;
};

// One half of a merge line: alphabet characters -> bytes, or the UTF-8 text itself.
std::string merge_token(const std::string& path, std::string_view text, size_t from, size_t to, Spelling spelling) {
  std::string bytes;
  size_t i = from;
  while (i < to) {
    size_t at = i;
    uint32_t cp;
    if (!next_code_point(text.substr(0, to), i, cp)) fail_at(path, text, at, "invalid UTF-8");
    if (spelling == Spelling::Utf8) {
      bytes.append(text.substr(at, i - at));
      continue;
    }
    int b = code_point_to_byte(cp);
    if (b < 0) fail_at(path, text, at, "character " + hex_code_point(cp) + " is not in GPT-2's byte alphabet");
    bytes += char(b);
  }
  return bytes;
}

}  // namespace

std::string read_file_bytes(const std::string& path, uint64_t max_bytes) {
  // Only regular files: a directory, a FIFO or /dev/zero is refused by name (engine/files.hpp).
  return files::read_regular(path, "cannot read " + path + ": ", max_bytes);
}

Spelling vocab_spelling(std::string_view vocab_json) {
  const bool word_ends = vocab_json.find("</w>\"") != std::string_view::npos;
  const bool byte_space = vocab_json.find("\"\xC4\xA0\"") != std::string_view::npos ||
                          vocab_json.find("\"\\u0120\"") != std::string_view::npos;
  return word_ends && !byte_space ? Spelling::Utf8 : Spelling::ByteAlphabet;
}

std::vector<std::string> parse_vocab(const std::string& path, std::string_view text, Spelling spelling) {
  return VocabReader(path, text, spelling).read();
}

std::vector<Merge> parse_merges(const std::string& path, std::string_view text,
                                const std::unordered_map<std::string, uint32_t>& ids, Spelling spelling) {
  std::vector<Merge> merges;
  std::unordered_map<uint64_t, size_t> first_seen;  // (left, right) -> line, to catch duplicates
  // A UTF-8 byte-order mark before the first line, as Windows editors write it, is skipped.
  size_t line_start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0, line_no = 0;
  auto id_of = [&](const std::string& bytes, size_t pos, const char* what) {
    auto it = ids.find(bytes);
    if (it == ids.end()) fail_at(path, text, pos, std::string(what) + " is not a token of the vocabulary");
    return it->second;
  };
  while (line_start < text.size()) {
    ++line_no;
    size_t end = text.find('\n', line_start);
    if (end == std::string::npos) end = text.size();
    size_t stop = end;
    if (stop > line_start && text[stop - 1] == '\r') --stop;
    std::string_view line(text.data() + line_start, stop - line_start);
    size_t here = line_start;
    line_start = end + 1;
    if (line_no == 1 && line.starts_with("#version")) continue;
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;

    // Exactly two fields separated by spaces or tabs (bytes of the alphabet never are).
    size_t fields[2][2];
    int n = 0;
    for (size_t i = 0; i < line.size();) {
      if (line[i] == ' ' || line[i] == '\t') {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      if (n == 2) fail_at(path, text, here + i, "a merge line must be two tokens separated by a space");
      fields[n][0] = here + i;
      fields[n][1] = here + j;
      ++n;
      i = j;
    }
    if (n != 2) fail_at(path, text, here, "a merge line must be two tokens separated by a space");
    std::string left = merge_token(path, text, fields[0][0], fields[0][1], spelling);
    std::string right = merge_token(path, text, fields[1][0], fields[1][1], spelling);
    Merge m;
    m.left = id_of(left, fields[0][0], "the left half");
    m.right = id_of(right, fields[1][0], "the right half");
    m.merged = id_of(left + right, fields[0][0], "the merged token");
    auto [it, fresh] = first_seen.emplace(uint64_t(m.left) << 32 | m.right, line_no);
    if (!fresh) fail_at(path, text, here, "merge already listed on line " + std::to_string(it->second));
    merges.push_back(m);
  }
  return merges;
}

std::string quote_token(const std::string& token) {
  return nlohmann::json(excerpt(token)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gptvk::tokenizer
