#include "server/connection_server.hpp"

#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "server/http_strict.hpp"

namespace gptvk::server {

namespace {

using Clock = std::chrono::steady_clock;

// Set by the stream of the connection this thread serves; handlers run on that thread.
thread_local RequestCut t_cut = RequestCut::none;
thread_local std::string t_cut_reason;  // why the request is malformed or unsupported
thread_local int t_cut_status = 0;       // an unsupported request's status

// Waits at most `wait` for `events` on `fd`; true when they came (or the socket failed, which
// the read or write that follows reports).
bool wait_for(int fd, short events, Clock::duration wait) {
  const auto until = Clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

void numeric_address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* a = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, a, &len) : ::getsockname(fd, a, &len)) != 0) return;
  std::array<char, NI_MAXHOST> host{};
  std::array<char, NI_MAXSERV> service{};
  if (::getnameinfo(a, len, host.data(), host.size(), service.data(), service.size(), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host.data();
    port = std::atoi(service.data());
  }
}

// A connection's bytes through one read buffer, kept from one request to the next. Reads
// give up at the request's deadline, and past the byte limit of its head or chunked body.
class ConnectionStream final : public httplib::Stream {
 public:
  // Serves one request, whose first bytes (its head, as a rule) are `bytes`, due whole by
  // `deadline`.
  ConnectionStream(int fd, RequestLimits limits, const std::string& bytes, Clock::time_point deadline)
      : fd_(fd), limits_(limits), buffer_(std::max(bytes.size(), kBufferBytes)), end_(bytes.size()), deadline_(deadline),
        limit_(limits.head_bytes), cut_(RequestCut::head_too_large) {
    std::memcpy(buffer_.data(), bytes.data(), bytes.size());
    t_cut = RequestCut::none;
  }
  // What was read past the request: the start of the next one.
  std::string unread() const { return std::string(buffer_.data() + begin_, end_ - begin_); }

  // The head is in: from now on the body's bytes count, against a limit when it is chunked
  // (a Content-Length body is read up to its length, and refused beyond the limit by it).
  void head_done(bool chunked) {
    read_ = 0;
    limit_ = chunked ? limits_.chunked_body_bytes : SIZE_MAX;
    cut_ = RequestCut::body_too_large;
    if (chunked) chunks_.emplace();
  }

  bool is_readable() const override { return begin_ != end_ || readable_before_deadline(); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, limits_.io_wait) && peer_still_there(); }

  ssize_t read(char* out, size_t size) override {
    if (begin_ == end_) {
      if (!readable_before_deadline()) return -1;
      ssize_t n;
      do n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    if (n > limit_ - read_) {
      t_cut = cut_;
      return -1;
    }
    if (chunks_) {
      if (auto why = chunks_->feed(buffer_.data() + begin_, n)) {
        t_cut = RequestCut::malformed;
        t_cut_reason = *why;
        return -1;
      }
    }
    read_ += n;
    std::memcpy(out, buffer_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* data, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, data, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { numeric_address(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { numeric_address(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  bool readable_before_deadline() const {
    const auto left = deadline_ - Clock::now();
    if (left > Clock::duration::zero() && wait_for(fd_, POLLIN, std::min<Clock::duration>(limits_.io_wait, left)))
      return true;
    if (Clock::now() >= deadline_) t_cut = RequestCut::late;
    return false;
  }

  // The test before each write: a client whose socket has failed (it reset the connection,
  // as its system does to the first write after it closed) is gone, and a streamed answer to
  // it stops. One that only shut its sending side (end-of-file, a legal half-close) still
  // reads its answer; httplib's own test took that for gone and answered nothing.
  bool peer_still_there() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
  }

  int fd_;
  RequestLimits limits_;
  static constexpr size_t kBufferBytes = 16 << 10;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // the buffered bytes not read yet
  Clock::time_point deadline_;
  size_t read_ = 0, limit_;  // bytes of the head or body read so far, and their limit
  RequestCut cut_;           // what passing the limit means
  std::optional<ChunkedBodyCheck> chunks_;  // a chunked body's framing so far
};

// What RFC 9112 asks of a server before httplib parses a request: empty lines before the
// request line are ignored (§2.2), and a target in absolute form ("http://host/path", which
// a server must accept, §3.2.2) is routed by its path. `bytes` starts with the request.
void normalize_request_start(std::string& bytes) {
  bytes.erase(0, std::min(bytes.find_first_not_of("\r\n"), bytes.size()));
  const size_t line_end = bytes.find("\r\n"), target = bytes.find(' ') + 1;
  if (line_end == std::string::npos || target == 0 || target >= line_end) return;
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (line_end - target < scheme.size() || ::strncasecmp(bytes.data() + target, scheme.data(), scheme.size()) != 0)
      continue;
    const size_t authority_end = bytes.find_first_of("/? ", target + scheme.size());
    if (authority_end >= line_end) return;
    bytes.erase(target, authority_end - target);
    if (bytes[target] != '/') bytes.insert(target, 1, '/');
    return;
  }
}

// Range asks for part of a representation; this server's answers are generated per
// request, and RFC 9110 (section 14.2) lets a server ignore the field. httplib would slice
// every answer by it (a 200 with part of a completion) or refuse a malformed one with 416
// before any handler runs, so its lines are dropped from the head.
void drop_range_fields(std::string& bytes) {
  size_t head_end = bytes.find("\r\n\r\n");  // where the last header line's CRLF starts
  if (head_end == std::string::npos) return;
  for (size_t line = bytes.find("\r\n") + 2; line <= head_end;) {
    const size_t next = bytes.find("\r\n", line) + 2;
    if (::strncasecmp(bytes.data() + line, "range:", 6) != 0) {
      line = next;
      continue;
    }
    bytes.erase(line, next - line);
    head_end -= next - line;
  }
}

// The limit a head's lines pass, if one does: a request line that does not end within the
// head's byte limit (httplib would close the connection without a word), or a header line
// longer than httplib reads (it would answer a plain 400).
std::optional<RequestCut> line_over_limit(const std::string& bytes, size_t head_bytes) {
  constexpr size_t kHttplibLineBytes = 8192;  // CPPHTTPLIB_HEADER_MAX_LENGTH, line end included
  const size_t head_end = bytes.find("\r\n\r\n");
  const size_t request_line_end = bytes.find('\n');
  if (request_line_end == std::string::npos)
    return bytes.size() >= head_bytes ? std::optional(RequestCut::head_too_large) : std::nullopt;
  for (size_t line = request_line_end + 1; line < std::min(head_end, bytes.size());) {
    const size_t end = std::min(bytes.find('\n', line), bytes.size());
    if (end + 1 - line > kHttplibLineBytes) return RequestCut::header_line_too_long;
    line = end + 1;
  }
  return std::nullopt;
}

// Closes once the client has had everything written. Closing with its bytes unread (the
// rest of a refused request) would send a reset, which may discard the answer before the
// client has read it; so the connection is half-closed and drained for a moment first.
void close_after_answer(int fd) {
  constexpr auto kLinger = std::chrono::seconds(1);
  ::shutdown(fd, SHUT_WR);
  const auto until = Clock::now() + kLinger;
  std::array<char, 4096> sink;
  while (Clock::now() < until && wait_for(fd, POLLIN, until - Clock::now()) && ::recv(fd, sink.data(), sink.size(), 0) > 0) {
  }
  ::close(fd);
}

}  // namespace

RequestCut request_cut() { return t_cut; }
std::string request_cut_reason() { return t_cut_reason; }
int request_cut_status() { return t_cut_status; }

ConnectionServer::ConnectionServer(RequestLimits limits, size_t workers)
    : limits_(limits), workers_(std::make_unique<WorkerPool>(workers)),
      gate_(limits.arrival, limits.head_bytes, [this](WaitingConnection c) {
        workers_->enqueue([this, c]() mutable { serve(std::move(c)); });
      }) {
  // httplib's own pool only hands accepted sockets to the gate.
  new_task_queue = [] { return new WorkerPool(2); };
}

ConnectionServer::~ConnectionServer() { close_connections(); }

void ConnectionServer::close_connections() {
  std::call_once(closed_, [this] {
    gate_.stop();
    workers_->shutdown();
  });
}

bool ConnectionServer::process_and_close_socket(socket_t sock) {
  gate_.watch({.fd = sock,
               .requests_left = keep_alive_max_count_,
               .idle_until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_)});
  return true;
}

void ConnectionServer::serve(WaitingConnection c) {
  normalize_request_start(c.bytes);
  // Framing first: the scans below take the head to end at its first CRLF CRLF.
  const std::optional<UnsupportedRequest> unsupported = unsupported_request_line(c.bytes);
  const std::optional<std::string> malformed = unsupported ? std::nullopt : head_problem(c.bytes);
  std::optional<RequestCut> over;
  if (!malformed && !unsupported) {
    drop_range_fields(c.bytes);
    over = line_over_limit(c.bytes, limits_.head_bytes);
  }
  // A request line that never ended: one httplib can read, so that the refusal below is sent.
  if (over == RequestCut::head_too_large) c.bytes = "GET /request-line-too-long HTTP/1.1\r\nHost: -\r\n\r\n";
  ConnectionStream stream(c.fd, limits_, c.bytes, c.deadline);
  // Answered 400, 431, 501 or 505 by the pre-routing or error handler, which ask request_cut().
  if (unsupported) {
    t_cut = RequestCut::unsupported;
    t_cut_status = unsupported->status;
    t_cut_reason = unsupported->why;
  } else if (malformed) {
    t_cut = RequestCut::malformed;
    t_cut_reason = *malformed;
  } else if (over) {
    t_cut = *over;
  }
  bool closed = false;
  const bool ok = process_request(stream, c.requests_left == 1, closed,
                                  [&](httplib::Request& req) { stream.head_done(req.has_header("Transfer-Encoding")); });
  // After a cut the rest of the request is unread: nothing after it can be parsed.
  if (!ok || closed || t_cut != RequestCut::none || c.requests_left == 1 || svr_sock_ == INVALID_SOCKET)
    return close_after_answer(c.fd);
  gate_.watch({.fd = c.fd,
               .bytes = stream.unread(),
               .requests_left = c.requests_left - 1,
               .idle_until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_)});
}

}  // namespace gptvk::server
