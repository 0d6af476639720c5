#include "models/toml_prescan.hpp"

#include <cctype>

#include "engine/error.hpp"

namespace gptvk {

namespace {

// Follows TOML's lexical states (strings of four kinds, comments) through the text, one
// character at a time, and checks what toml++ would mishandle in the state it is read in.
class TomlPrescan {
 public:
  TomlPrescan(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  void run() {
    for (i_ = 0; i_ < text_.size(); ++i_) {
      const unsigned char c = static_cast<unsigned char>(text_[i_]);
      if (c == '\n') {
        ++line_;
        line_start_ = true;
        key_dots_ = 0;
        if (mode_ == Comment || mode_ == Basic || mode_ == Literal) mode_ = Normal;
        continue;
      }
      const bool first_on_line = line_start_;
      if (c != ' ' && c != '\t') line_start_ = false;
      switch (mode_) {
        case Normal: normal(c, first_on_line); break;
        case Comment: break;
        case Basic:
          if (c == '\\' && i_ + 1 < text_.size() && text_[i_ + 1] != '\n') ++i_;  // an escaped character
          else if (c == '"') mode_ = Normal;
          break;
        case Literal:
          if (c == '\'') mode_ = Normal;
          break;
        case MultiBasic: multi_basic(c); break;
        case MultiLiteral:
          if (c == '\'' && run_of('\'') >= 3) {
            i_ += run_of('\'') - 1;  // up to two quotes before the closing three belong to the string
            mode_ = Normal;
          }
          break;
      }
    }
  }

 private:
  enum Mode { Normal, Comment, Basic, Literal, MultiBasic, MultiLiteral };

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(path_ + ":" + std::to_string(line_) + ": " + what);
  }
  size_t run_of(char q) const {
    size_t k = 0;
    while (i_ + k < text_.size() && text_[i_ + k] == q) ++k;
    return k;
  }
  static bool bare_key_char(unsigned char k) { return std::isalnum(k) || k == '_' || k == '-'; }

  void normal(unsigned char c, bool first_on_line) {
    if (c >= 0x80) fail("malformed TOML: non-ASCII character outside a string or comment");
    count_key_part(c);
    if (c == '[' && first_on_line && depth_ == 0) {  // a table header
      size_t j = i_ + 1 < text_.size() && text_[i_ + 1] == '[' ? i_ + 2 : i_ + 1;
      while (j < text_.size() && (text_[j] == ' ' || text_[j] == '\t')) ++j;
      const bool key_follows = j < text_.size() && (bare_key_char(static_cast<unsigned char>(text_[j])) ||
                                                    text_[j] == '"' || text_[j] == '\'' || text_[j] == ']');
      if (j < text_.size() && !key_follows) fail("malformed TOML: expected a table name after '['");
      i_ = j - 1;
      return;
    }
    if (c == '[' || c == '{') ++depth_;
    if ((c == ']' || c == '}') && depth_ > 0) --depth_;
    if (c == '#') mode_ = Comment;
    if (c == '"' || c == '\'') {
      const bool multi = run_of(char(c)) >= 3;
      mode_ = c == '"' ? (multi ? MultiBasic : Basic) : (multi ? MultiLiteral : Literal);
      if (multi) i_ += 2;
    }
  }

  // Dots in a run of key parts (bare, quoted, spaced), wherever it stands: a header, a
  // key before "=", an inline table. A number holds one dot at most, and any other
  // character (",", "=", a bracket) ends the run, so values never add up here.
  void count_key_part(unsigned char c) {
    if (c == '.') {
      if (++key_dots_ >= kMaxTomlKeyParts)
        fail("malformed TOML: a dotted key of more than " + std::to_string(kMaxTomlKeyParts) + " parts");
    } else if (!bare_key_char(c) && c != ' ' && c != '\t' && c != '"' && c != '\'') {
      key_dots_ = 0;
    }
  }

  void multi_basic(unsigned char c) {
    if (c == '\\') {
      size_t j = i_ + 1;  // a line-ending backslash skips whitespace and newlines
      while (j < text_.size() && (text_[j] == ' ' || text_[j] == '\t' || text_[j] == '\r' || text_[j] == '\n'))
        if (text_[j++] == '\n') ++line_;
      if (j < text_.size() && static_cast<unsigned char>(text_[j]) >= 0x80)
        fail("non-ASCII character right after a backslash in a multi-line string (not supported)");
      i_ = j > i_ + 1 ? j - 1 : j;  // skip the escaped character, or only the whitespace
    } else if (c == '"' && run_of('"') >= 3) {
      i_ += run_of('"') - 1;  // up to two quotes before the closing three belong to the string
      mode_ = Normal;
    }
  }

  const std::string& text_;
  const std::string& path_;
  Mode mode_ = Normal;
  size_t i_ = 0;
  size_t line_ = 1;
  size_t depth_ = 0;  // open value brackets ([ ] arrays, { } inline tables)
  bool line_start_ = true;
  size_t key_dots_ = 0;  // dots in the current run of key parts
};

}  // namespace

void reject_what_tomlpp_mishandles(const std::string& text, const std::string& path) {
  TomlPrescan(text, path).run();
}

}  // namespace gptvk
