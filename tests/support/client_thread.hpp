// A client of the server under test on a thread of its own, for the tests that need one
// request running while they look at the server. Boost.Test's assertions are not
// thread-safe (ThreadSanitizer finds its checkpoint log written from both threads), so the
// body asserts nothing: what it throws, join() throws again on the test's thread, where
// Boost.Test reports it as the case's error.
#pragma once
#include <exception>
#include <functional>
#include <thread>

namespace gptvk::test {

class ClientThread {
 public:
  explicit ClientThread(std::function<void()> body)
      : thread_([this, body = std::move(body)] {
          try {
            body();
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}
  ClientThread(const ClientThread&) = delete;
  ClientThread& operator=(const ClientThread&) = delete;
  // Joined however the case ends: a failed requirement on the test's thread must not leave a
  // joinable std::thread, whose destructor would end the whole test binary.
  ~ClientThread() {
    if (thread_.joinable()) thread_.join();
  }

  void join() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;  // declared first: set by the thread, which starts last
  std::thread thread_;
};

}  // namespace gptvk::test
