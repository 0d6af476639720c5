// Yielding condition-variable waits (engine/interpose/yielding_waits.hpp).
//
// Why: lavapipe runs each compute dispatch on worker threads that sleep on a condition
// variable between dispatches, and its queue thread sleeps on another while a dispatch
// runs. On virtual machines whose idle vCPUs halt at once (guest halt polling off), each
// such sleep costs a vCPU wake-up of tens of microseconds, and a GPT-2 small decode step
// has ~64 dispatches. Staying on the CPU for up to kYieldNs before sleeping, calling
// sched_yield so that runnable threads (the other workers) still get the vCPU, avoids most
// of those wake-ups: on lavapipe it speeds decode up more than turning the guest kernel's
// halt polling on does (bench/PERFORMANCE.md, "What a dispatch costs").
//
// How: this file defines pthread_cond_wait, pthread_cond_signal and pthread_cond_broadcast
// in the executable, which exports them (CMake: gptvk_use_yielding_waits), so calls from
// every shared library (lavapipe, the Vulkan loader, libstdc++'s std::condition_variable)
// reach these first; they forward to glibc's own through dlsym(RTLD_NEXT).
//   - signal / broadcast first bump a wake counter for the condition variable (a slot of a
//     small table picked by its address; a shared slot only costs a spurious wake-up).
//   - wait, when enabled, releases the mutex, yields until the counter moves or kYieldNs
//     pass, takes the mutex back and returns 0. To its caller that is a spurious wake-up,
//     which POSIX allows and every correct caller handles by checking its condition again
//     under the mutex. If the time ran out, the thread's next wait on the same condition
//     variable sleeps in glibc straight away.
// The wait never goes from the yielding phase into glibc's wait within one call: a
// condition changed (under the mutex) while the mutex was released, and signalled only
// after the mutex was unlocked, could otherwise be missed. Returning lets the caller see
// the change; the sleeping wait that may follow is entered with the mutex held since the
// caller's check, which is what makes a condition variable safe.
#include "engine/interpose/yielding_waits.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "engine/env_switch.hpp"

namespace {

constexpr uint64_t kYieldNs = 100'000;  // not critical over a wide range; a dispatch is 50-500 us

std::atomic<bool> g_enabled{false};
std::atomic<uint64_t> g_yielding_returns{0};
std::atomic<uint64_t> g_sleeping_waits{0};

struct alignas(64) WakeSlot {
  std::atomic<uint32_t> wakes{0};
};
constexpr uintptr_t kSlots = 64;
WakeSlot g_slots[kSlots];

WakeSlot& slot_for(const pthread_cond_t* c) {
  const auto a = reinterpret_cast<uintptr_t>(c);
  return g_slots[((a >> 4) ^ (a >> 10) ^ (a >> 16)) % kSlots];
}

// The condition variable whose next wait on this thread sleeps at once (its yielding
// phase ran out of time).
thread_local const pthread_cond_t* t_sleep_next = nullptr;

// glibc's functions: the default versions, those that code built today links against
// (GLIBC_2.3.2 on x86-64). Resolved at start-up (normally before any thread exists), else on
// first use, without locks or guards: this code runs inside other libraries' locking.
template <class Fn>
Fn glibc(std::atomic<Fn>& cache, const char* name) {
  Fn f = cache.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    if (!f) {
      std::fprintf(stderr, "gpt-vk: cannot find the C library's %s\n", name);
      std::abort();
    }
    cache.store(f, std::memory_order_release);
  }
  return f;
}
using WaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*);
using WakeFn = int (*)(pthread_cond_t*);
std::atomic<WaitFn> g_wait{nullptr};
std::atomic<WakeFn> g_signal{nullptr}, g_broadcast{nullptr};

__attribute__((constructor)) void resolve_glibc() {
  glibc(g_wait, "pthread_cond_wait");
  glibc(g_signal, "pthread_cond_signal");
  glibc(g_broadcast, "pthread_cond_broadcast");
}

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec);
}

}  // namespace

extern "C" int pthread_cond_signal(pthread_cond_t* c) {
  slot_for(c).wakes.fetch_add(1, std::memory_order_release);
  return glibc(g_signal, "pthread_cond_signal")(c);
}

extern "C" int pthread_cond_broadcast(pthread_cond_t* c) {
  slot_for(c).wakes.fetch_add(1, std::memory_order_release);
  return glibc(g_broadcast, "pthread_cond_broadcast")(c);
}

extern "C" int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  if (!g_enabled.load(std::memory_order_relaxed) || t_sleep_next == c) {
    if (t_sleep_next == c) g_sleeping_waits.fetch_add(1, std::memory_order_relaxed);
    t_sleep_next = nullptr;
    return glibc(g_wait, "pthread_cond_wait")(c, m);
  }
  WakeSlot& slot = slot_for(c);
  const uint32_t seen = slot.wakes.load(std::memory_order_acquire);
  pthread_mutex_unlock(m);
  const uint64_t deadline = now_ns() + kYieldNs;
  bool woken = false;
  for (uint32_t i = 1;; ++i) {
    if (slot.wakes.load(std::memory_order_acquire) != seen) {
      woken = true;
      break;
    }
    if (i % 16 == 0 && now_ns() > deadline) break;
    sched_yield();
  }
  const int locked = pthread_mutex_lock(m);
  t_sleep_next = woken ? nullptr : c;
  g_yielding_returns.fetch_add(1, std::memory_order_relaxed);
  return locked;
}

namespace gptvk::yielding_waits {

void enable(bool on) {
  if (!env_switch("GPTVK_YIELDING_WAITS", true)) on = false;
  g_enabled.store(on, std::memory_order_relaxed);
}

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

uint64_t yielding_returns() { return g_yielding_returns.load(std::memory_order_relaxed); }

uint64_t sleeping_waits() { return g_sleeping_waits.load(std::memory_order_relaxed); }

}  // namespace gptvk::yielding_waits
