// A scan of a TOML file's text before toml++ (Debian 12's 3.3) parses it, refusing what
// that version mishandles instead of reporting: it is called by the config reader only.
#pragma once
#include <string>

namespace gptvk {

// Throws InputError "<path>:<line>: ..." for
// - non-ASCII text outside strings and comments (toml++ reaches __builtin_unreachable()
//   asking whether é and most other non-ASCII characters are whitespace: upstream issues
//   #190 and #295), and a non-ASCII character right after a multi-line string's
//   line-ending backslash (the same question, valid TOML but "not supported");
// - a table header whose "[" or "[[" is not followed by a key (a failed assertion, or
//   undefined behaviour under NDEBUG);
// - a dotted key of more than kMaxTomlKeyParts parts (toml++ walks the tables it opens
//   recursively: 200,000 parts overflow the stack).
// The others are "malformed TOML"; no config needs a key of so many parts.
// Regression inputs: tests/fuzz/regressions/config/.
void reject_what_tomlpp_mishandles(const std::string& text, const std::string& path);

inline constexpr size_t kMaxTomlKeyParts = 100;

}  // namespace gptvk
