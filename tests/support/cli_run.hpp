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

// Runs gpt-vk with `args`, the validation layer on and `env` added to the environment;
// kills it after `timeout_s`. No core files: a crash shows as `signaled` instead.
CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                  double timeout_s = 10.0);

}  // namespace gptvk::test
