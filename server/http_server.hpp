// gpt-vk's OpenAI-compatible HTTP server (cpp-httplib, its connections read by
// ConnectionServer): the routes, API-key check, error bodies, metrics and timeouts.
// Generation goes through a Scheduler (all Vulkan work on its thread); the HTTP threads
// only parse, tokenize, wait and write. They share one Tokenizer: its encode() takes a lock
// (the BPE cache), decode() and token_bytes() only read.
//
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
// POST /tokenize, POST /detokenize, GET /metrics, and the web page at GET / (server/web/);
// with --cors-origin, the preflights of web pages' requests (OPTIONS) and the CORS headers
// of every answer. Before set_ready() every route answers 503 (loading), /health included,
// but /metrics and the page.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/scheduler.hpp"
#include "server/cors.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace gptvk::server {

class CompletionJob;
class ConnectionServer;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port
  std::string api_key;      // non-empty: every route but /health and the page needs "Authorization: Bearer KEY"
  size_t max_body_bytes = 1 << 20;
  size_t max_head_bytes = 32 << 10;  // request line and headers together (431 beyond)
  size_t threads = 32;        // HTTP worker threads (each request holds one while it is read and answered)
  int request_timeout_s = 20;  // a request's head and body arrive within this of its first byte (408 beyond)
  int io_timeout_s = 30;      // one read or write of a connection waits at most this (slow or vanished clients)
  std::vector<std::string> cors_origins;  // origins whose pages may read the answers ("*": every one); server/cors.hpp
};

struct ModelInfo {
  std::string name;
  uint32_t context = 0;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // stop()

  // Binds the socket (throws std::runtime_error when it cannot) and starts answering on a
  // thread of its own; returns the port (the one chosen, with port 0).
  int start();
  // From now on requests go to `scheduler`; both must outlive the server (or stop() first).
  void set_ready(Scheduler& scheduler, const Tokenizer& tokenizer, ModelInfo model);
  // From now on /health answers 503 (shutting down); the scheduler refuses new work.
  void drain();
  // Lets the answers whose bodies are still going out end, then stops listening and waits
  // for the answering threads; both waits within `wait` when given. False when threads are
  // still busy then (a client trickling its request); idempotent. Call once the scheduler
  // has finished its sequences: httplib's writer leaves a body at its next turn once the
  // server stops, which would lose a stream's last events and its `data: [DONE]`.
  bool stop(std::optional<std::chrono::seconds> wait = std::nullopt);

 private:
  // Until every answer whose body a content provider writes (streams, heartbeat-chunked
  // answers) has ended, at most `wait` when given.
  void wait_for_open_answers(std::optional<std::chrono::seconds> wait);
  // The releaser of an answer whose body a content provider writes: counts the answer open
  // until httplib releases it, then cancels the job (a no-op once it is done).
  std::function<void(bool)> open_answer(std::shared_ptr<CompletionJob> job);
  void routes();
  void gates();
  void endpoints();
  void completions(const httplib::Request& req, const std::string& body, httplib::Response& res, bool chat);
  void respond_when_done(const httplib::Request& req, httplib::Response& res, const std::shared_ptr<CompletionJob>& job);
  void tokenize(const std::string& body, httplib::Response& res);
  void detokenize(const std::string& body, httplib::Response& res);
  void models(httplib::Response& res);
  void model(const std::string& id, httplib::Response& res);  // GET /v1/models/{id}
  void health(httplib::Response& res);
  void metrics(httplib::Response& res);
  bool authorized(const httplib::Request& req) const;
  void count(const httplib::Request& req, const httplib::Response& res);
  void check_ready() const;

  ServerOptions opts_;
  CorsPolicy cors_;
  std::unique_ptr<ConnectionServer> http_;
  std::thread thread_;
  std::future<void> listen_ended_;  // ready when the listening thread is done
  int listen_fd_ = -1;  // the listening socket, seen by httplib's socket-options hook
  std::atomic<bool> ready_{false}, draining_{false};
  Scheduler* scheduler_ = nullptr;  // set before ready_
  const Tokenizer* tok_ = nullptr;
  ModelInfo model_;
  long long started_ = 0;
  std::mutex open_mu_;
  std::condition_variable open_cv_;
  size_t open_answers_ = 0;
  std::mutex counts_mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (route, status) -> count
};

}  // namespace gptvk::server
