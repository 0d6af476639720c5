// A `gpt-vk serve` child process for tests: started on 127.0.0.1 with --port 0 (validation
// layer on), its port read from the "listening on" line, its stderr collected; killed when
// the object goes unless it was stopped with a signal first. A validation message in its
// stderr then fails the test binary (exit 1, the message printed).
#pragma once
#include <sys/types.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gptvk::test {

class ServerProcess {
 public:
  // Starts `gpt-vk serve --port 0 <args>` and waits (at most `timeout_s`, stretched under
  // GPTVK_VALIDATION_GPU: tests/support/time_limits.hpp) for it to listen;
  // BOOST_REQUIREs that it did. SIGINT starts at its default, or ignored (`serve &` in a
  // script) when `sigint_ignored`.
  explicit ServerProcess(const std::vector<std::string>& args, double timeout_s = 120.0, bool sigint_ignored = false);
  ~ServerProcess();
  int port() const { return port_; }
  // Sends `sig` and waits at most `timeout_s` (stretched the same) for the exit; returns the
  // exit code, or -1 when it had to be killed or died of a signal.
  int stop(int sig, double timeout_s = 30.0);
  // Sends `sig` and returns at once (stop() waits for the exit).
  void signal(int sig) const;
  // Whether the process has not exited (nor been reaped).
  bool running() const;
  std::string stderr_text() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int err_fd_ = -1;
  mutable std::mutex mu_;
  std::string err_;
  std::thread reader_;
};

}  // namespace gptvk::test
