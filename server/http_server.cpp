#include "server/http_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <ctime>
#include <sstream>
#include <stdexcept>

#include "server/completion_job.hpp"

namespace gptvk::server {

namespace {

const char* const kRoutes[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                               "/tokenize",       "/detokenize",          "/metrics"};

void send_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, error_body(e), e.status); }

json parse_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "", "invalid_json");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_type");
  return body;
}

// Runs a route's handler, turning what it throws into OpenAI's error body.
template <class F>
httplib::Server::Handler guarded(F f) {
  return [f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const json::exception& e) {
      send_error(res, ApiError(400, std::string("malformed request: ") + e.what(), "", "invalid_value"));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "internal_error", "server_error"));
    }
  };
}

std::string status_message(int status, const httplib::Request& req, size_t max_body) {
  switch (status) {
    case 404: return "no route " + req.method + " " + req.path;
    case 413: return "the request body is larger than " + std::to_string(max_body) + " bytes";
    case 414: return "the request URI is too long";
    default: return "HTTP status " + std::to_string(status);
  }
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : opts_(std::move(options)), http_(std::make_unique<httplib::Server>()),
      started_(static_cast<long long>(std::time(nullptr))) {
  const size_t threads = opts_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind a port already in use instead of failing. The hook only sees the listening
  // socket; start() widens its backlog.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  http_->set_payload_max_length(opts_.max_body_bytes);
  http_->set_read_timeout(opts_.io_timeout_s, 0);
  http_->set_write_timeout(opts_.io_timeout_s, 0);
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::check_ready() const {
  if (!ready_.load(std::memory_order_acquire))
    throw ApiError(503, "the model is still loading", "", "model_loading", "unavailable_error");
}

bool HttpServer::authorized(const httplib::Request& req, httplib::Response& res) {
  if (opts_.api_key.empty() || req.path == "/health") return true;
  if (req.get_header_value("Authorization") == "Bearer " + opts_.api_key) return true;
  send_error(res, ApiError(401, "missing or incorrect API key (send \"Authorization: Bearer KEY\")", "",
                           "invalid_api_key", "authentication_error"));
  return false;
}

void HttpServer::count(const httplib::Request& req, const httplib::Response& res) {
  std::string route = "other";
  for (const char* r : kRoutes)
    if (req.path == r) route = r;
  std::lock_guard lock(counts_mu_);
  ++requests_[{route, res.status}];
}

void HttpServer::routes() {
  auto& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return authorized(req, res) ? httplib::Server::HandlerResponse::Unhandled
                                : httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404, 413, ...) get the same error body as ours.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int status = res.status;
    send_error(res, ApiError(status, status_message(status, req, opts_.max_body_bytes), "",
                             status == 404 ? "not_found" : "", status >= 500 ? "server_error" : "invalid_request_error"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) { count(req, res); });
  s.Post("/v1/completions", guarded([this](auto& req, auto& res) { completions(req, res, false); }));
  s.Post("/v1/chat/completions", guarded([this](auto& req, auto& res) { completions(req, res, true); }));
  s.Get("/v1/models", guarded([this](auto&, auto& res) { models(res); }));
  s.Get("/health", guarded([this](auto&, auto& res) { health(res); }));
  s.Post("/tokenize", guarded([this](auto& req, auto& res) { tokenize(req, res); }));
  s.Post("/detokenize", guarded([this](auto& req, auto& res) { detokenize(req, res); }));
  s.Get("/metrics", guarded([this](auto&, auto& res) { metrics(res); }));
}

int HttpServer::start() {
  int port = opts_.port == 0 ? http_->bind_to_any_port(opts_.host) : (http_->bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
  if (port <= 0) throw std::runtime_error("cannot listen on " + opts_.host + ":" + std::to_string(opts_.port));
  // httplib listens with a backlog of 5: a burst of clients connecting at once (more than
  // --parallel of them is normal) overflows the accept queue while the accepting thread
  // waits for a CPU, and the kernel drops their handshakes, delaying each by a TCP
  // retransmission. Linux lets listen() on a listening socket set a new backlog.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return port;
}

void HttpServer::set_ready(Scheduler& scheduler, const Tokenizer& tokenizer, ModelInfo model) {
  scheduler_ = &scheduler;
  tok_ = &tokenizer;
  model_ = std::move(model);
  ready_.store(true, std::memory_order_release);
}

void HttpServer::stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  check_ready();
  json body = parse_body(req);
  CompletionRequest request = chat ? parse_chat_request(body, *tok_, model_.context)
                                   : parse_completion_request(body, *tok_, model_.context);
  const bool stream = request.stream;
  const SchedulerStats capacity = scheduler_->stats();
  const size_t sequences = request.prompts.size() * request.n;
  if (sequences > capacity.slots + capacity.max_queue)
    throw ApiError(400, "the request needs " + std::to_string(sequences) + " sequences (prompts x n); this server takes " +
                            std::to_string(capacity.slots + capacity.max_queue) + " at once (--parallel + --queue)",
                   "n", "invalid_value");
  std::shared_ptr<CompletionJob> job;
  try {
    job = std::make_shared<CompletionJob>(std::move(request), chat, model_.name, *scheduler_, *tok_);
  } catch (const QueueFull& e) {
    throw ApiError(429, e.what(), "", "queue_full", "rate_limit_error");
  } catch (const ShuttingDown& e) {
    throw ApiError(503, e.what(), "", "shutting_down", "unavailable_error");
  }
  if (!stream) return send_json(res, job->wait_response());
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](size_t, httplib::DataSink& sink) {
        std::string out;
        const bool done = job->poll_events(out, std::chrono::milliseconds(100));
        // A failed write means the client is gone: returning false ends the connection and
        // the releaser below cancels the sequences, which frees their slots.
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (done) sink.done();
        return true;
      },
      [job](bool) { job->cancel(); });
}

void HttpServer::tokenize(const httplib::Request& req, httplib::Response& res) {
  check_ready();
  json body = parse_body(req);
  if (!body.contains("content") || !body["content"].is_string())
    throw ApiError(400, "'content' must be a string", "content", "invalid_type");
  const bool pieces = body.value("with_pieces", false);
  auto ids = tok_->encode(body["content"].get<std::string>(), body.value("parse_special", false));
  json tokens = json::array();
  for (uint32_t id : ids)
    tokens.push_back(pieces ? json{{"id", id}, {"piece", tok_->token_bytes(id)}} : json(id));
  send_json(res, {{"tokens", tokens}});
}

void HttpServer::detokenize(const httplib::Request& req, httplib::Response& res) {
  check_ready();
  json body = parse_body(req);
  const json& t = body.contains("tokens") ? body["tokens"] : json();
  if (!t.is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens", "invalid_type");
  std::vector<uint32_t> ids;
  for (const json& id : t) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= tok_->vocab_size())
      throw ApiError(400, "'tokens' holds " + id.dump() + ", not a token id below " + std::to_string(tok_->vocab_size()),
                     "tokens", "invalid_value");
    ids.push_back(id.get<uint32_t>());
  }
  send_json(res, {{"content", tok_->decode(ids)}});
}

void HttpServer::models(httplib::Response& res) {
  check_ready();
  send_json(res, {{"object", "list"},
                  {"data", json::array({{{"id", model_.name},
                                         {"object", "model"},
                                         {"created", started_},
                                         {"owned_by", "gpt-vk"},
                                         {"meta", {{"n_ctx_train", model_.context}}}}})}});
}

void HttpServer::health(httplib::Response& res) {
  if (ready_.load(std::memory_order_acquire)) return send_json(res, {{"status", "ok"}});
  send_json(res, {{"status", "loading"}}, 503);
}

void HttpServer::metrics(httplib::Response& res) {
  std::ostringstream m;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    m << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
  };
  m << "# HELP gptvk_http_requests_total HTTP requests answered, by route and status.\n"
    << "# TYPE gptvk_http_requests_total counter\n";
  {
    std::lock_guard lock(counts_mu_);
    for (const auto& [key, n] : requests_)
      m << "gptvk_http_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  }
  metric("gptvk_ready", "gauge", "1 once the model is loaded.", ready_ ? 1 : 0);
  if (ready_) {
    const SchedulerStats s = scheduler_->stats();
    metric("gptvk_prompt_tokens_total", "counter", "Prompt tokens prefilled.", double(s.prompt_tokens));
    metric("gptvk_generated_tokens_total", "counter", "Tokens generated.", double(s.generated_tokens));
    metric("gptvk_sequences_total", "counter", "Sequences finished (each choice is one).", double(s.sequences_done));
    metric("gptvk_queue_depth", "gauge", "Sequences waiting for a slot.", double(s.queued));
    metric("gptvk_queue_capacity", "gauge", "Most sequences that may wait.", double(s.max_queue));
    metric("gptvk_active_sequences", "gauge", "Sequences in a slot.", double(s.active));
    metric("gptvk_slots", "gauge", "KV slots (--parallel).", double(s.slots));
    metric("gptvk_burst_prompts_total", "counter", "Prompts prefilled together with others' in one burst.",
           double(s.burst_prompts));
    metric("gptvk_decode_tokens_per_second", "gauge", "Tokens per second of the decode rounds so far, all slots together.",
           s.step_seconds > 0 ? double(s.step_tokens) / s.step_seconds : 0.0);
  }
  res.set_content(m.str(), "text/plain; version=0.0.4");
}

}  // namespace gptvk::server
