// The server's worker threads: a fixed set running queued tasks, as httplib::ThreadPool
// does, but safe to fail. httplib's constructor starts threads one by one; when one cannot
// start (under `ulimit -v` each thread's stack takes 8 MiB of address space), it throws
// while the threads it started still wait on the condition variable its unwinding
// destroys, and the process hangs there for good. This pool stops the threads it started
// and then throws, so the failure reaches the command's one-line error.
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gptvk::server {

class WorkerPool : public httplib::TaskQueue {
 public:
  // Starts `threads` workers; throws std::system_error (as std::thread does) when one
  // cannot start, after stopping those that did.
  explicit WorkerPool(size_t threads);
  ~WorkerPool() override;

  void enqueue(std::function<void()> task) override;
  // Lets the workers finish what is queued, then joins them.
  void shutdown() override;

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gptvk::server
