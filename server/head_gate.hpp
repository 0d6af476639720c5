// Waits, on one thread for every connection, for each request's head to arrive, so that a
// worker thread is taken only by a request whose head is in: idle keep-alive connections
// and clients trickling their heads (slowloris) hold a file descriptor, not a thread. It
// parses nothing: it only looks for the blank line that ends a head.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gptvk::server {

// A connection between two requests, with the bytes of the next one read so far.
struct WaitingConnection {
  using Clock = std::chrono::steady_clock;
  int fd = -1;
  std::string bytes;        // read, not yet served (a pipelined request's included)
  size_t requests_left = 1;  // keep-alive requests it may still make
  Clock::time_point idle_until;  // closed if the next request has not started by then
  Clock::time_point deadline;    // set by the gate when the request's first byte is in
  Clock::time_point since;       // set by the gate when it takes the connection
};

class HeadGate {
 public:
  using Clock = WaitingConnection::Clock;
  using Ready = std::function<void(WaitingConnection)>;

  // `ready` gets each connection whose next head is in, has reached `head_bytes`, or is
  // late (`arrival` after its first byte), on the gate's thread; the rest of the request
  // and its limits are the worker's.
  HeadGate(std::chrono::seconds arrival, size_t head_bytes, Ready ready);
  ~HeadGate();  // stop()

  // From any thread: the gate owns `c` from now on.
  void watch(WaitingConnection c);
  // Closes every connection it holds and those it is given from now on; idempotent.
  void stop();

 private:
  void run();
  void take_new();
  void read_from(int fd);
  void expire(Clock::time_point now);
  void hand_over(int fd);
  void drop(int fd);
  void drop_oldest();
  bool head_in(const WaitingConnection& c) const;

  std::chrono::seconds arrival_;
  size_t head_bytes_;
  Ready ready_;
  int epoll_fd_ = -1, wake_fd_ = -1;
  std::mutex mu_;
  std::vector<WaitingConnection> incoming_;  // under mu_
  bool stopping_ = false;                    // under mu_
  // The gate thread's own. At most kMaxHeld: httplib (built with select()) refuses a socket
  // numbered 1024 or more, so past that many the longest-waiting one is closed.
  std::map<int, WaitingConnection> held_;
  static constexpr size_t kMaxHeld = 768;
  std::thread thread_;
};

}  // namespace gptvk::server
