#include "models/truncation_guard.hpp"

#include <csetjmp>
#include <csignal>
#include <mutex>

namespace gptvk {

namespace {

thread_local sigjmp_buf* t_landing = nullptr;  // where this thread's fault returns to, if guarded
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* info, void* uctx) {
  if (sigjmp_buf* landing = t_landing) siglongjmp(*landing, 1);
  // Not ours: behave as before the guard was installed (by default, die on return as the
  // faulting access repeats).
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, uctx);
  } else if (g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != SIG_DFL) {
    g_previous.sa_handler(sig);
  } else {
    std::signal(SIGBUS, SIG_DFL);
  }
}

// Installs on_sigbus unless it is the handler already. Checked on every guarded run, not
// once: a test harness (Boost.Test's execution monitor) or a library may have put its own
// handler back since, and a handler that is not ours is kept to pass other faults on to.
void install() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  struct sigaction current {};
  sigaction(SIGBUS, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

// Restores the enclosing guard (nesting) when `f` returns, throws or faults.
struct Landing {
  sigjmp_buf* outer;
  ~Landing() { t_landing = outer; }
};

}  // namespace

bool run_catching_sigbus(const std::function<void()>& f) {
  install();
  sigjmp_buf landing;
  Landing restore{t_landing};
  // savemask = 1: the jump also unblocks SIGBUS, which the kernel blocked for the handler.
  if (sigsetjmp(landing, 1) != 0) return false;
  t_landing = &landing;
  f();
  return true;
}

}  // namespace gptvk
