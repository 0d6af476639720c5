// Messages on stderr as one line of plain text: what the user passed or a file holds (a
// tensor name, a dtype, a pickle's global) can carry newlines, terminal escape sequences or
// bytes that are not UTF-8, which would otherwise break the one-line error or reach the
// terminal as commands.
#pragma once
#include <string>
#include <string_view>

namespace gptvk::cli {

// `text` with control characters (C0, DEL, C1) and bytes that are not valid UTF-8
// escaped: \n, \r, \t, \xNN for other bytes, \u00NN for C1 code points.
std::string printable(std::string_view text);

// "gpt-vk: " + printable(message) + "\n" on stderr.
void print_error(std::string_view message);

}  // namespace gptvk::cli
