// GPT-2's byte-to-unicode table (bytes_to_unicode in OpenAI's encoder.py): vocab and
// merges files spell every byte as a printable character. The 188 printable bytes
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 bytes,
// in increasing order, get U+0100, U+0101, ... (so a space is U+0120 'Ġ').
#pragma once
#include <cstdint>

namespace gptvk::tokenizer {

// The character that spells byte b in the vocab and merges files.
uint32_t byte_to_code_point(uint8_t b);

// The byte spelled by code point c, or -1 if c is not one of the 256 characters.
int code_point_to_byte(uint32_t c);

}  // namespace gptvk::tokenizer
