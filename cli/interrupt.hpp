// Ctrl-C for the commands that run long and keep what they have (generate, perplexity,
// score): while a SigintFlag lives, SIGINT sets a flag instead of killing the process; the
// command stops at its next step, prints what it has, says so, and exits 130 (the shell's
// code for a SIGINT). The handler before it comes back when it goes. A SIGINT the process
// was started ignoring (`gpt-vk generate ... &` in a script) stays ignored, as shells expect.
// A second SIGINT ends the process as the default action would: a command blocked writing
// to a pipe nobody reads never reaches its next step to look at the flag.
#pragma once
#include <csignal>

namespace gptvk::cli {

inline volatile std::sig_atomic_t g_sigint_raised = 0;

inline void on_sigint(int) {
  if (g_sigint_raised) {
    std::signal(SIGINT, SIG_DFL);  // both async-signal-safe
    std::raise(SIGINT);
  }
  g_sigint_raised = 1;
}

class SigintFlag {
 public:
  SigintFlag() : previous_(std::signal(SIGINT, on_sigint)) {
    if (previous_ == SIG_IGN) std::signal(SIGINT, SIG_IGN);
    g_sigint_raised = 0;
  }
  ~SigintFlag() { std::signal(SIGINT, previous_); }
  SigintFlag(const SigintFlag&) = delete;
  SigintFlag& operator=(const SigintFlag&) = delete;

  static bool raised() { return g_sigint_raised != 0; }
  static constexpr int kExitCode = 130;

 private:
  void (*previous_)(int);
};

}  // namespace gptvk::cli
