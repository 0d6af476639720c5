#include "cli/stop_signals.hpp"

#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace gptvk::cli {

struct StopSignals::State {
  sigset_t set;
  std::mutex mu;
  std::condition_variable cv;
  bool serving = false;
  int first = 0;
};

namespace {

void exit_now(const char* why, int sig, int code) {
  std::fprintf(stderr, "gpt-vk: %s %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM", why);
  std::fflush(nullptr);
  std::_Exit(code);
}

// The waiting thread: detached, as it waits for as long as the process runs.
void take_signals(const std::shared_ptr<StopSignals::State>& st) {
  for (;;) {
    int sig = 0;
    if (sigwait(&st->set, &sig) != 0) continue;
    std::unique_lock lock(st->mu);
    if (!st->serving) exit_now("while loading the model: exiting", sig, 0);
    if (st->first != 0) exit_now("again while finishing the running requests: exiting now, cutting them", sig, 1);
    st->first = sig;
    st->cv.notify_all();
  }
}

}  // namespace

StopSignals::StopSignals() : state_(std::make_shared<State>()) {
  sigemptyset(&state_->set);
  sigaddset(&state_->set, SIGTERM);
  struct sigaction sigint {};
  if (sigaction(SIGINT, nullptr, &sigint) != 0 || sigint.sa_handler != SIG_IGN) sigaddset(&state_->set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &state_->set, nullptr);
  std::thread([st = state_] { take_signals(st); }).detach();
}

void StopSignals::serving() {
  std::lock_guard lock(state_->mu);
  state_->serving = true;
}

int StopSignals::wait_first() {
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->first != 0; });
  return state_->first;
}

}  // namespace gptvk::cli
