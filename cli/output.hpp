// Checked writes to standard output: every write, and the final flush and close, either
// succeeds or ends the command with one line ("cannot write to standard output: No space
// left on device", exit 1). main() ignores SIGPIPE, so a reader that went away is the
// error EPIPE here, and `generate | head -c 5` stops generating at once.
#pragma once
#include <string_view>

namespace gptvk::cli {

// Writes `bytes` to stdout and flushes them (streamed output appears as it is made).
// Throws InputError when the write or the flush fails.
void write_stdout(std::string_view bytes);

// Writes output the user asked for that goes to stderr (generate's --logprobs table):
// checked as write_stdout(), since losing it loses a result, not a diagnostic.
void write_stderr(std::string_view bytes);

// Throws the EPIPE error write_stdout() would when stdout is a pipe whose reader has gone:
// commands that write only at the end (generate --json, perplexity) look between steps
// rather than computing everything for a reader that left.
void check_stdout_reader();

// printf to stdout, checked as write_stdout().
[[gnu::format(printf, 1, 2)]] void print_stdout(const char* format, ...);

// Flushes and closes stdout at the end of a command that succeeded, so that an error only
// the close reports still fails the command. Throws InputError.
void close_stdout();

}  // namespace gptvk::cli
