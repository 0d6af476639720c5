// engine/interpose/yielding_waits.cpp replaces pthread_cond_wait / _signal / _broadcast for
// the whole process. These tests go through std::condition_variable (compiled into
// libstdc++, so they also show that a shared library's calls reach the replacements) and
// check that no wake-up is lost, including notifications made after the mutex is
// released, the case the yielding phase must not break. A lost wake-up would hang: a
// watchdog fails the test after 60 s without progress instead.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/error.hpp"
#include "engine/interpose/yielding_waits.hpp"

using namespace gptvk;
using namespace std::chrono_literals;

namespace {

// Exits the process if `progress` stops moving for 60 s (a lost wake-up).
class Watchdog {
 public:
  explicit Watchdog(const std::atomic<uint64_t>& progress) : progress_(progress), thread_([this] { run(); }) {}
  ~Watchdog() {
    done_ = true;
    thread_.join();
  }

 private:
  void run() {
    uint64_t last = progress_.load();
    auto since = std::chrono::steady_clock::now();
    while (!done_) {
      std::this_thread::sleep_for(10ms);
      const uint64_t now = progress_.load();
      if (now != last) {
        last = now;
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since > 60s) {
        std::fprintf(stderr, "test_yielding_waits: no progress for 60 s: a wake-up was lost\n");
        std::_Exit(1);
      }
    }
  }
  const std::atomic<uint64_t>& progress_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Two threads take turns `rounds` times; each notifies after releasing the mutex. Returns
// the number of completed turns.
uint64_t ping_pong(uint64_t rounds) {
  std::mutex m;
  std::condition_variable cv;
  uint64_t turn = 0;  // even: ping's turn, odd: pong's
  std::atomic<uint64_t> progress{0};
  Watchdog dog(progress);
  auto player = [&](uint64_t parity) {
    for (uint64_t i = 0; i < rounds; ++i) {
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return turn % 2 == parity; });
        ++turn;
      }
      progress.fetch_add(1);
      cv.notify_all();
    }
  };
  std::thread ping(player, 0), pong(player, 1);
  ping.join();
  pong.join();
  return progress.load();
}

struct Enabled {
  Enabled() { yielding_waits::enable(true); }
  ~Enabled() { yielding_waits::enable(false); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(libstdcxx_waits_reach_the_yielding_wait) {
  Enabled on;
  BOOST_REQUIRE(yielding_waits::enabled());
  const uint64_t before = yielding_waits::yielding_returns();
  BOOST_TEST(ping_pong(200) == 400u);
  BOOST_TEST(yielding_waits::yielding_returns() > before);
}

BOOST_AUTO_TEST_CASE(no_lost_wake_ups_when_notified_after_unlock) {
  Enabled on;
  BOOST_TEST(ping_pong(20000) == 40000u);
}

BOOST_AUTO_TEST_CASE(a_waiter_whose_yielding_phase_runs_out_sleeps_and_is_still_woken) {
  Enabled on;
  std::mutex m;
  std::condition_variable cv;
  bool ready = false;
  std::atomic<uint64_t> progress{0};
  Watchdog dog(progress);
  const uint64_t slept_before = gptvk::yielding_waits::sleeping_waits();
  // At least 20 rounds, then more (at most 200) until one waiter has slept: on a loaded
  // machine a waiter may be scheduled only after `ready`, and then it never waits.
  int rounds = 0;
  for (; rounds < 200 && (rounds < 20 || gptvk::yielding_waits::sleeping_waits() == slept_before); ++rounds) {
    ready = false;
    std::atomic<bool> started{false};
    std::thread waiter([&] {
      started = true;
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return ready; });
      progress.fetch_add(1);
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(2ms);  // well past the 100 us yielding phase
    {
      std::lock_guard lock(m);
      ready = true;
    }
    cv.notify_one();
    waiter.join();
  }
  BOOST_TEST(progress.load() == uint64_t(rounds));
  BOOST_TEST(gptvk::yielding_waits::sleeping_waits() > slept_before);
}

BOOST_AUTO_TEST_CASE(broadcast_wakes_every_waiter) {
  Enabled on;
  std::mutex m;
  std::condition_variable cv;
  uint64_t generation = 0;
  const uint64_t generations = 2000;
  std::atomic<uint64_t> progress{0};
  Watchdog dog(progress);
  std::vector<std::thread> waiters;
  std::vector<uint64_t> seen(4, 0);
  for (size_t w = 0; w < seen.size(); ++w)
    waiters.emplace_back([&, w] {
      std::unique_lock lock(m);
      for (uint64_t g = 1; g <= generations; ++g) {
        cv.wait(lock, [&] { return generation >= g; });
        seen[w] = g;
        progress.fetch_add(1);
      }
    });
  for (uint64_t g = 1; g <= generations; ++g) {
    {
      std::lock_guard lock(m);
      generation = g;
    }
    cv.notify_all();
    if (g % 100 == 0) std::this_thread::sleep_for(200us);  // let some waits run out of yielding time
  }
  for (auto& t : waiters) t.join();
  for (uint64_t s : seen) BOOST_TEST(s == generations);
}

BOOST_AUTO_TEST_CASE(disabled_waits_go_straight_to_glibc) {
  yielding_waits::enable(false);
  const uint64_t before = yielding_waits::yielding_returns();
  BOOST_TEST(ping_pong(200) == 400u);
  BOOST_TEST(yielding_waits::yielding_returns() == before);
}

// Read as every on/off variable is (engine/env_switch.hpp): "false" and "No" keep them off
// as "0" does, and junk is a usage error rather than silently on.
BOOST_AUTO_TEST_CASE(environment_variable_keeps_them_off) {
  for (const char* off : {"0", "false", "No"}) {
    setenv("GPTVK_YIELDING_WAITS", off, 1);
    yielding_waits::enable(true);
    BOOST_TEST(!yielding_waits::enabled(), off);
  }
  setenv("GPTVK_YIELDING_WAITS", "junk", 1);
  BOOST_CHECK_EXCEPTION(yielding_waits::enable(true), UsageError, [](const UsageError& e) {
    return std::string(e.what()) == "GPTVK_YIELDING_WAITS is 0, 1, true, false, yes or no, not 'junk'";
  });
  unsetenv("GPTVK_YIELDING_WAITS");
  yielding_waits::enable(true);
  BOOST_TEST(yielding_waits::enabled());
  yielding_waits::enable(false);
}
