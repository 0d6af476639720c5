// Strict UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF), as the
// tokenizer needs it: where valid text ends, where an unfinished character starts, and
// appending a code point.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk::tokenizer {

// Length (1-4) of the valid UTF-8 character starting at s[i], or 0 if the bytes there do
// not form one (a stray continuation byte, a bad lead byte, a truncated or overlong
// sequence, a surrogate, or a code point past U+10FFFF).
size_t utf8_char_length(std::string_view s, size_t i);

// Index of the first byte at or after `from` that does not start a valid character
// (s.size() if the rest is valid). ASCII is skipped eight bytes at a time.
size_t utf8_valid_until(std::string_view s, size_t from);

// Length (0-3) of the longest suffix of s that is the start of a valid character still
// missing bytes: what a streaming decoder must hold back. Bytes that can never become
// valid (0xFF, a stray continuation byte, E0 80 ...) are not held.
size_t utf8_incomplete_tail(std::string_view s);

void append_utf8(std::string& out, uint32_t code_point);

// The code point of the valid character of `len` bytes (utf8_char_length's) at s[i].
uint32_t utf8_code_point(std::string_view s, size_t i, size_t len);

// For each byte offset in `ends` (ascending, at most s.size()), the number of characters
// a reader of s as JSON text sees before it: invalid bytes count as the U+FFFD a JSON
// encoder puts in their place (one per maximal invalid subpart, as nlohmann's
// error_handler_t::replace and the WHATWG decoder do), and a character that the offset cuts
// is left out. OpenAI's text_offset counts such characters, not bytes.
std::vector<size_t> utf8_char_offsets(std::string_view s, std::span<const size_t> ends);

// A token's bytes as a JSON string that keeps them apart from every other token's: the
// bytes themselves when they are valid UTF-8, else "bytes:" and each byte as \xNN (OpenAI's
// form for tokens that end inside a character). JSON would turn every invalid byte into
// U+FFFD, making such tokens one key of an object and unknowable in a list.
std::string token_json_text(std::string_view bytes);

}  // namespace gptvk::tokenizer
