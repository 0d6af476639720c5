// Token-id lists as written on the command line: "464,2068,318". Commas and/or
// whitespace separate ids, so the space-separated output of `gpt-vk tokenize` is accepted
// as is.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace gptvk {

// Throws InputError "<what>: 'x' is not a token id" for anything but decimal integers
// below 2^32 (whether they are in a vocabulary is for the tokenizer to check), and for a
// comma with no id before it or after it ("1,,2", ",1", "1,"). An empty or blank text is
// an empty list (commands that need ids say so).
std::vector<uint32_t> parse_id_list(std::string_view text, std::string_view what = "--ids");

}  // namespace gptvk
