// SIGTERM and SIGINT for `gpt-vk serve`, waited for on a thread of their own from the start
// (the model may take many seconds to load):
// - before serving begins, one exits at once (0): nothing is running yet;
// - the first while serving ends wait_first(), and the caller drains: no new requests, the
//   running ones get --shutdown-grace to finish;
// - a second during that drain exits at once (1), cutting what still runs, as a second
//   Ctrl-C does for other servers.
// A SIGINT the process was started ignoring (`gpt-vk serve &` in a script) stays ignored,
// as Ctrl-C does for the other commands (cli/interrupt.hpp).
#pragma once
#include <memory>

namespace gptvk::cli {

class StopSignals {
 public:
  // Blocks the signals in this thread and every thread started after (lavapipe's, httplib's,
  // the scheduler's), so that only this class's thread takes them. Call first, before any
  // other thread starts.
  StopSignals();
  void serving();    // from now on a signal starts the drain
  int wait_first();  // until the first signal while serving; returns SIGTERM or SIGINT

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the waiting thread, which outlives this object
};

}  // namespace gptvk::cli
