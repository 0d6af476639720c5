// Running the real `gpt-vk` binary from a test: its stdout, stderr, exit and timing.
#pragma once
#include <string>
#include <vector>

namespace gptvk::test {

struct CliResult {
  std::string command, out, err;
  int exit_code = -1;  // when it exited
  bool signaled = false, core_dumped = false, timed_out = false;
  int signal = 0;
  double seconds = 0;
};

// Where the child's standard output goes, for rows that test writes that fail.
enum class Stdout {
  Captured,    // a pipe read into CliResult::out
  DevFull,     // /dev/full: every write fails with ENOSPC
  ClosedPipe,  // a pipe whose reading end is closed before the child starts: EPIPE
  Stalled,     // a one-page pipe nobody reads: once it is full, every write blocks
};

struct CliOptions {
  Stdout stdout_to = Stdout::Captured;
  long file_size_limit = -1;  // RLIMIT_FSIZE in bytes for the child (a full disk); -1: none
  long address_space_limit = -1;  // RLIMIT_AS in bytes for the child (`ulimit -v`); -1: none
  std::vector<std::string> unset_env;  // variable names removed from the child's environment
  std::string stdin_from;              // a path opened as the child's stdin (default /dev/null)
  bool stdin_closed = false;           // no stdin at all (`<&-`)
  std::string sigint_on_output;        // Ctrl-C: SIGINT once stdout or stderr holds this text
  bool stderr_dev_full = false;        // stderr to /dev/full (CliResult::err stays empty)
  bool sigint_ignored = false;         // started with SIGINT ignored (a script's `cmd &`)
  int sigints_when_stalled = 0;        // Stdout::Stalled: SIGINTs 0.2 s apart once the pipe is full
};

// Runs gpt-vk with `args`, the validation layer on and `env` added to the environment;
// kills it after `timeout_s` (the default only catches a hang: a busy CI runner can take
// several seconds for a run of the bundled model; stretched under GPTVK_VALIDATION_GPU,
// tests/support/time_limits.hpp). No core files: a crash shows as `signaled` instead.
CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                  double timeout_s = 120.0, const CliOptions& options = {});

}  // namespace gptvk::test
