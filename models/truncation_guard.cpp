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

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

// Restores the enclosing guard (nesting) when `f` returns, throws or faults.
struct Landing {
  sigjmp_buf* outer;
  ~Landing() { t_landing = outer; }
};

}  // namespace

bool run_catching_sigbus(const std::function<void()>& f) {
  install_once();
  sigjmp_buf landing;
  Landing restore{t_landing};
  // savemask = 1: the jump also unblocks SIGBUS, which the kernel blocked for the handler.
  if (sigsetjmp(landing, 1) != 0) return false;
  t_landing = &landing;
  f();
  return true;
}

}  // namespace gptvk
