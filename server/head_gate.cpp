#include "server/head_gate.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>

namespace gptvk::server {

HeadGate::HeadGate(std::chrono::seconds arrival, size_t head_bytes, Ready ready)
    : arrival_(arrival), head_bytes_(head_bytes), ready_(std::move(ready)),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw std::runtime_error("cannot create the HTTP server's epoll set");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { run(); });
}

HeadGate::~HeadGate() {
  stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void HeadGate::watch(WaitingConnection c) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      incoming_.push_back(std::move(c));
      c.fd = -1;
    }
  }
  if (c.fd >= 0) ::close(c.fd);  // stopped: nobody will serve it
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void HeadGate::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

// Late heads are handed over by expire().
bool HeadGate::head_in(const WaitingConnection& c) const {
  // A head that ends its lines in LF alone is in too: the worker refuses it at once
  // (server/http_strict.hpp) rather than when the arrival time runs out.
  return c.bytes.find("\n\r\n") != std::string::npos || c.bytes.find("\n\n") != std::string::npos ||
         c.bytes.size() >= head_bytes_;
}

void HeadGate::run() {
  constexpr int kTick = 100;  // ms: how often idle and late connections are looked at
  std::array<epoll_event, 64> events;
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kTick);
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        uint64_t count;
        (void)!::read(wake_fd_, &count, sizeof count);
      } else {
        read_from(events[i].data.fd);
      }
    }
    take_new();
    expire(Clock::now());
  }
  for (auto& [fd, c] : held_) ::close(fd);
  held_.clear();
  std::lock_guard lock(mu_);
  for (auto& c : incoming_) ::close(c.fd);
  incoming_.clear();
}

void HeadGate::take_new() {
  std::vector<WaitingConnection> fresh;
  {
    std::lock_guard lock(mu_);
    fresh.swap(incoming_);
  }
  for (auto& c : fresh) {
    if (held_.size() >= kMaxHeld) drop_oldest();
    c.since = Clock::now();
    if (!c.bytes.empty()) c.deadline = c.since + arrival_;
    const int fd = c.fd;
    held_[fd] = std::move(c);
    if (head_in(held_[fd])) {  // a pipelined request already read whole
      hand_over(fd);
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) drop(fd);
  }
}

void HeadGate::read_from(int fd) {
  auto it = held_.find(fd);
  if (it == held_.end()) return;
  WaitingConnection& c = it->second;
  std::array<char, 16 << 10> buf;
  const size_t room = std::min(buf.size(), head_bytes_ + 1 - std::min(head_bytes_, c.bytes.size()));
  const ssize_t got = ::recv(fd, buf.data(), room, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) return drop(fd);  // closed between requests, or mid-head: nothing to answer
  if (c.bytes.empty()) c.deadline = Clock::now() + arrival_;
  c.bytes.append(buf.data(), static_cast<size_t>(got));
  if (head_in(c)) hand_over(fd);
}

void HeadGate::expire(Clock::time_point now) {
  std::vector<int> idle, late;
  for (const auto& [fd, c] : held_) {
    if (c.bytes.empty() && now >= c.idle_until) idle.push_back(fd);
    else if (!c.bytes.empty() && now >= c.deadline) late.push_back(fd);
  }
  for (int fd : idle) drop(fd);
  for (int fd : late) hand_over(fd);  // the worker answers 408
}

// Closes the connection the gate has held longest: a client that trickles its head (or
// idles) loses its place to one that sends its request.
void HeadGate::drop_oldest() {
  auto oldest = std::min_element(held_.begin(), held_.end(),
                                 [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
  if (oldest != held_.end()) drop(oldest->first);
}

void HeadGate::hand_over(int fd) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  auto node = held_.extract(fd);
  ready_(std::move(node.mapped()));
}

void HeadGate::drop(int fd) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  held_.erase(fd);
  ::close(fd);
}

}  // namespace gptvk::server
