// cpp-httplib's Server (0.11, Debian 12) with its per-connection loop replaced, for four
// defects of the library's own loop:
// - each request is read through a buffered stream of its own, so the bytes of a pipelined
//   next request, read along with this one, are lost: the client waits out the keep-alive
//   timeout and sees the connection close unanswered;
// - a request is bounded only per read, so a client that trickles its head or body (one
//   byte before each read timeout) holds a worker thread for as long as it likes;
// - a line's length (a header, a chunk's size) is checked only once the line has ended, so
//   one that never ends grows in memory for as long as the client sends it;
// - a connection holds a worker thread from accept to close, idle or not, so a client
//   sending nothing (or one byte now and then) takes a thread from everyone else.
// Here a HeadGate holds connections until their next request's head is in; a worker then
// serves that request through a stream that keeps the bytes read past it for the next one
// (pipelined requests are answered in order), with the RequestLimits below. Before httplib
// parses a request, empty lines ahead of it are dropped and an absolute-form target becomes
// its path (RFC 9112), and framing httplib would read leniently is refused
// (server/http_strict.hpp). Everything else (parsing, routing, responses) is httplib's.
#pragma once
#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>

#include "server/head_gate.hpp"
#include "server/worker_pool.hpp"

namespace gptvk::server {

// Their values come from ServerOptions.
struct RequestLimits {
  std::chrono::seconds arrival;  // a request's head and body arrive within this of its first byte
  size_t head_bytes;             // its request line and headers together
  size_t chunked_body_bytes;     // a chunked body as sent, its framing included
  std::chrono::seconds io_wait;  // one read or write waits at most this long
};

// Why reading the request on this thread stopped short, when it was one of the limits or
// framing that server/http_strict.hpp refuses (the error handlers ask, to answer 408, 431
// or 400 with the reason instead of httplib's plain 400); for `malformed`, the reason.
// header_line_too_long: one header line is over httplib's 8 KiB.
// unsupported: a method or HTTP version this server does not speak, answered with
// request_cut_status() (501 or 505) and the reason.
enum class RequestCut { none, late, head_too_large, header_line_too_long, body_too_large, malformed, unsupported };
RequestCut request_cut();
std::string request_cut_reason();
int request_cut_status();

class ConnectionServer : public httplib::Server {
 public:
  // `workers`: threads serving requests (each open request holds one, a stream to its end).
  ConnectionServer(RequestLimits limits, size_t workers);
  ~ConnectionServer() override;  // close_connections()

  // Once listening has stopped: closes the connections waiting for a request and waits for
  // the workers to finish theirs; idempotent.
  void close_connections();

 private:
  bool process_and_close_socket(socket_t sock) override;  // hands it to the gate
  void serve(WaitingConnection c);

  RequestLimits limits_;
  std::unique_ptr<WorkerPool> workers_;
  HeadGate gate_;
  std::once_flag closed_;
};

}  // namespace gptvk::server
