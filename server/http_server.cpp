#include "server/http_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <future>
#include <sstream>
#include <stdexcept>

#include "models/tokenizer/utf8.hpp"
#include "server/completion_job.hpp"
#include "server/connection_server.hpp"
#include "server/request_framing.hpp"
#include "server/web_page.hpp"

namespace gptvk::server {

namespace {

// Every route but /v1/models/{id}, with the method it takes.
struct Route {
  const char* path;
  const char* method;
};
const Route kRoutes[] = {{"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"},
                         {"/health", "GET"},          {"/tokenize", "POST"},            {"/detokenize", "POST"},
                         {"/metrics", "GET"},         {kWebPagePaths[0], "GET"},        {kWebPagePaths[1], "GET"}};

void send_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, error_body(e), e.status); }

// Answers `e` to a request whose body has not been read, or not wholly: with its
// Content-Length and "Connection: close", and the connection closed once it is written, so
// that a client still sending the body (curl sends it after a refused "Expect:
// 100-continue") cannot have it read as requests of its own. httplib 0.11 keeps the
// connection open whatever the response's Connection header says, but closes it when a
// content provider fails: this one writes the whole body, then reports a failure. Its
// Content-Length is set from the provider's length by httplib's apply_ranges, which the
// error handler below asks for.
void refuse_unread_body(httplib::Response& res, const ApiError& e) {
  const std::string text = dump(error_body(e));
  res.status = e.status;
  res.set_content_provider(text.size(), "application/json",
                           [text](size_t offset, size_t length, httplib::DataSink& sink) {
                             sink.write(text.data() + offset, length);
                             return false;  // written: now close the connection
                           });
  res.set_header("Connection", "close");
}

void refuse_unauthorized(const httplib::Request& req, httplib::Response& res) {
  const ApiError e(401, "missing or incorrect API key (send \"Authorization: Bearer KEY\")", "", "invalid_api_key",
                   "authentication_error");
  if (body_follows(req)) refuse_unread_body(res, e);
  else send_error(res, e);
  res.set_header("WWW-Authenticate", "Bearer");
}

// A non-streamed completion answers as a plain JSON response when it is done within this
// wait; a longer one goes out chunked, with a space (JSON's leading whitespace) written each
// kHeartbeat while it runs, so that a client that hangs up fails a write and frees its
// slots instead of holding them to the end.
constexpr auto kPlainWait = std::chrono::seconds(2);
constexpr auto kHeartbeat = std::chrono::seconds(1);

// Runs `f`, turning what it throws into OpenAI's error body.
template <class F>
void answer_errors(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const json::exception& e) {
    send_error(res, ApiError(400, std::string("malformed request: ") + e.what(), "", "invalid_value"));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "internal_error", "server_error"));
  }
}

template <class F>
httplib::Server::Handler guarded(F f) {
  return [f](const httplib::Request& req, httplib::Response& res) { answer_errors(res, [&] { f(req, res); }); };
}

// The refusal of a request that one of ConnectionServer's limits cut short, if one did.
std::optional<ApiError> cut_short(const ServerOptions& opts) {
  switch (request_cut()) {
    case RequestCut::late:
      return ApiError(408, "the request did not arrive within " + std::to_string(opts.request_timeout_s) + " s of its first byte",
                      "", "request_timeout");
    case RequestCut::head_too_large:
      return ApiError(431, "the request line and headers are over " + std::to_string(opts.max_head_bytes) + " bytes", "",
                      "headers_too_large");
    case RequestCut::header_line_too_long:
      return ApiError(431, "a header line is over 8192 bytes", "", "headers_too_large");
    case RequestCut::body_too_large: return payload_too_large(opts.max_body_bytes);
    case RequestCut::malformed: return ApiError(400, "malformed HTTP request: " + request_cut_reason(), "", "invalid_request");
    case RequestCut::unsupported:
      return ApiError(request_cut_status(), request_cut_reason(), "",
                      request_cut_status() == 501 ? "method_not_implemented" : "http_version_not_supported");
    case RequestCut::none: break;
  }
  return std::nullopt;
}

// A POST route: its body read through read_body (the size limit holds for chunked bodies
// too), then f(req, body, res). A body read_body refuses (multipart, over the limit,
// malformed) is not read wholly: its refusal closes the connection. One that a limit cut
// short is answered 408.
template <class F>
httplib::Server::HandlerWithContentReader guarded_post(const ServerOptions& opts, F f) {
  return [opts, f](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    answer_errors(res, [&] {
      std::string body;
      try {
        body = read_body(req, reader, opts.max_body_bytes);
      } catch (const ApiError& e) {
        return refuse_unread_body(res, cut_short(opts).value_or(e));
      }
      f(req, std::move(body), res);
    });
  };
}

// A token's text for /tokenize's pieces: a string when it is whole UTF-8, else its bytes
// (a token can end inside a character), as llama.cpp's server answers.
json piece_json(const std::string& bytes) {
  if (tokenizer::utf8_valid_until(bytes, 0) == bytes.size()) return bytes;
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

// OpenAI's model object for the model the server runs.
json model_object(const ModelInfo& m, long long created) {
  return {{"id", m.name}, {"object", "model"}, {"created", created}, {"owned_by", "gpt-vk"}, {"meta", {{"n_ctx_train", m.context}}}};
}

// The entry of kRoutes for `path`, or nullptr. The metrics label a request by it: a path
// outside the table (/v1/models/{id} too) is "other", so that clients cannot mint labels.
const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

bool known_route(const std::string& path) { return find_route(path) != nullptr; }

// The method a route takes, or nullptr for a path that is no route.
const char* route_method(const std::string& path) {
  if (const Route* r = find_route(path)) return r->method;
  return path.starts_with("/v1/models/") && path.size() > std::strlen("/v1/models/") ? "GET" : nullptr;
}

// The refusal of a request no route takes: a 405 naming the method allowed (Allow) on a
// route's path, else a 404.
ApiError unrouted(const httplib::Request& req, httplib::Response& res) {
  const char* method = route_method(req.path);
  if (!method) return ApiError(404, "no route " + req.method + " " + req.path, "", "not_found");
  res.set_header("Allow", method);
  return ApiError(405, req.method + " is not allowed on " + req.path, "", "method_not_allowed");
}

// The error body of a status httplib set itself, before any handler ran.
ApiError library_error(int status, size_t max_body) {
  switch (status) {
    case 413: return payload_too_large(max_body);
    case 414: return ApiError(414, "the request URI is too long", "", "uri_too_long");
    case 400: return ApiError(400, "malformed HTTP request", "", "invalid_request");
    default:
      return ApiError(status, "HTTP status " + std::to_string(status), "", "",
                      status >= 500 ? "server_error" : "invalid_request_error");
  }
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : opts_(std::move(options)),
      cors_(opts_.cors_origins),
      http_(std::make_unique<ConnectionServer>(RequestLimits{.arrival = std::chrono::seconds(opts_.request_timeout_s),
                                                             .head_bytes = opts_.max_head_bytes,
                                                             // the body, plus room for its chunks' framing
                                                             .chunked_body_bytes = 2 * opts_.max_body_bytes + (64 << 10),
                                                             .io_wait = std::chrono::seconds(opts_.io_timeout_s)},
                                               opts_.threads)),
      started_(static_cast<long long>(std::time(nullptr))) {
  // A connection may make many requests: waiting for the next one holds no thread.
  http_->set_keep_alive_max_count(1000);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind a port already in use instead of failing. The hook only sees the listening
  // socket; start() widens its backlog.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  http_->set_payload_max_length(opts_.max_body_bytes);
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::check_ready() const {
  if (!ready_.load(std::memory_order_acquire))
    throw ApiError(503, "the model is still loading", "", "model_loading", "unavailable_error");
}

bool HttpServer::authorized(const httplib::Request& req) const {
  // /health for probes; the page, which asks for the key itself.
  return opts_.api_key.empty() || req.path == "/health" || is_web_page_path(req.path) ||
         bearer_matches(req.get_header_value("Authorization"), opts_.api_key);
}

void HttpServer::count(const httplib::Request& req, const httplib::Response& res) {
  const std::string route = known_route(req.path) ? req.path : "other";
  std::lock_guard lock(counts_mu_);
  ++requests_[{route, res.status}];
}

void HttpServer::routes() {
  gates();
  endpoints();
}

// What every request passes through around its route: refusals before the body is read,
// httplib's own errors in the API's error body, and the CORS headers of each answer.
void HttpServer::gates() {
  auto& s = *http_;
  // Before the body is read: a head httplib parsed but server/http_strict.hpp refuses, a
  // CORS preflight (which never carries the API key), the API key, then the body's framing.
  // A refusal here leaves the body unread, so it closes the connection.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (auto e = cut_short(opts_)) {
      refuse_unread_body(res, *e);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!body_follows(req) && cors_.answer_preflight(req, route_method(req.path), res))
      return httplib::Server::HandlerResponse::Handled;
    if (!authorized(req)) {
      refuse_unauthorized(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib reads a PUT or PATCH body without a length until the client closes; no route
    // takes either method, so they are refused before that read.
    if (req.method == "PUT" || req.method == "PATCH") {
      refuse_unread_body(res, unrouted(req, res));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (auto e = framing_error(req, opts_.max_body_bytes, false)) {
      refuse_unread_body(res, *e);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // "Expect: 100-continue": refuse before the client sends the body.
  s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (auto e = cut_short(opts_)) {
      refuse_unread_body(res, *e);
      return e->status;
    }
    if (!authorized(req)) {
      refuse_unauthorized(req, res);
      return 401;
    }
    if (req.method == "PUT" || req.method == "PATCH") {  // no route takes them: as before routing
      const ApiError e = unrouted(req, res);
      refuse_unread_body(res, e);
      return e.status;
    }
    auto e = framing_error(req, opts_.max_body_bytes, true);
    if (!e) return 100;
    refuse_unread_body(res, *e);
    return e->status;
  });
  // Statuses httplib sets itself (404, 413, ...) get the same error body as ours; a known
  // route asked with another method is a 405. A response whose body a handler set is
  // "Handled" too: httplib then gives it its Content-Length, which it leaves out of a refusal
  // of "Expect: 100-continue" otherwise.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Handled;
    std::optional<ApiError> cut = cut_short(opts_);
    const ApiError e = cut ? *cut : res.status == 404 ? unrouted(req, res) : library_error(res.status, opts_.max_body_bytes);
    // A 404 or 405 comes after the request was read whole. httplib's other refusals (a
    // malformed head, a cut one, a body over the limit) leave bytes of it unread, which
    // the connection must not parse as the next request: it closes.
    if (e.status == 404 || e.status == 405) send_error(res, e);
    else refuse_unread_body(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  // Every answer, just before its head is written: the CORS headers. And httplib adds
  // "Keep-Alive" to a response unless it closes the connection itself: one that
  // refuse_unread_body closes says "Connection: close" alone.
  s.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    cors_.add_headers(req, res);
    if (res.get_header_value("Connection") != "close") return;
    res.headers.erase("Keep-Alive");
    res.headers.erase("Connection");
    res.set_header("Connection", "close");
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) { count(req, res); });
}

void HttpServer::endpoints() {
  auto& s = *http_;
  s.Post("/v1/completions", guarded_post(opts_, [this](auto& req, auto body, auto& res) {
    completions(req, body, res, false);
  }));
  s.Post("/v1/chat/completions", guarded_post(opts_, [this](auto& req, auto body, auto& res) {
    completions(req, body, res, true);
  }));
  s.Get("/v1/models", guarded([this](auto&, auto& res) { models(res); }));
  // Any bytes for the id: '.' would not match a newline (%0A), and the request would be a 405.
  s.Get(R"(/v1/models/([\s\S]+))", guarded([this](auto& req, auto& res) { model(req.matches[1], res); }));
  s.Get("/health", guarded([this](auto&, auto& res) { health(res); }));
  s.Post("/tokenize", guarded_post(opts_, [this](auto&, auto body, auto& res) { tokenize(body, res); }));
  s.Post("/detokenize", guarded_post(opts_, [this](auto&, auto body, auto& res) { detokenize(body, res); }));
  s.Get("/metrics", guarded([this](auto&, auto& res) { metrics(res); }));
  for (const char* path : kWebPagePaths) s.Get(path, [](auto& req, auto& res) { send_web_file(req.path, res); });
}

int HttpServer::start() {
  errno = 0;
  int port = opts_.port == 0 ? http_->bind_to_any_port(opts_.host) : (http_->bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
  if (port <= 0) {
    // httplib keeps the errno of its last bind or listen (EADDRINUSE, EACCES, ...); a host
    // that does not resolve leaves none.
    const std::string why = errno == EADDRINUSE ? ": address already in use (--port 0 picks a free port)"
                            : errno != 0        ? std::string(": ") + std::strerror(errno)
                                                : " (does the host name resolve?)";
    throw std::runtime_error("cannot listen on " + opts_.host + ":" + std::to_string(opts_.port) + why);
  }
  // httplib listens with a backlog of 5: a burst of clients connecting at once (more than
  // --parallel of them is normal) overflows the accept queue while the accepting thread
  // waits for a CPU, and the kernel drops their handshakes, delaying each by a TCP
  // retransmission. Linux lets listen() on a listening socket set a new backlog.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  std::promise<void> listening_ended;
  listen_ended_ = listening_ended.get_future();
  thread_ = std::thread([this, ended = std::move(listening_ended)]() mutable {
    http_->listen_after_bind();
    http_->close_connections();
    ended.set_value();
  });
  // httplib's stop() does nothing before its loop has begun: a stop() right after start()
  // (the model failed to load) would leave the loop accepting and the join waiting forever.
  while (!http_->is_running() && listen_ended_.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
  }
  return port;
}

void HttpServer::set_ready(Scheduler& scheduler, const Tokenizer& tokenizer, ModelInfo model) {
  scheduler_ = &scheduler;
  tok_ = &tokenizer;
  model_ = std::move(model);
  ready_.store(true, std::memory_order_release);
}

void HttpServer::drain() { draining_.store(true, std::memory_order_release); }

std::function<void(bool)> HttpServer::open_answer(std::shared_ptr<CompletionJob> job) {
  {
    std::lock_guard lock(open_mu_);
    ++open_answers_;
  }
  return [this, job = std::move(job)](bool) {
    job->cancel();
    std::lock_guard lock(open_mu_);
    if (--open_answers_ == 0) open_cv_.notify_all();
  };
}

void HttpServer::wait_for_open_answers(std::optional<std::chrono::seconds> wait) {
  std::unique_lock lock(open_mu_);
  const auto ended = [this] { return open_answers_ == 0; };
  if (wait) open_cv_.wait_for(lock, *wait, ended);
  else open_cv_.wait(lock, ended);
}

bool HttpServer::stop(std::optional<std::chrono::seconds> wait) {
  const auto until = std::chrono::steady_clock::now() + wait.value_or(std::chrono::seconds(0));
  wait_for_open_answers(wait);
  if (http_) http_->stop();
  if (!thread_.joinable()) return true;
  // httplib's listening thread ends once its workers have: one held by a client that
  // trickles its request keeps it until --request-timeout. Both waits share `wait`.
  if (wait && listen_ended_.wait_until(until) != std::future_status::ready) return false;
  thread_.join();
  return true;
}

void HttpServer::completions(const httplib::Request& req, const std::string& text, httplib::Response& res, bool chat) {
  check_ready();
  json body = parse_body(text);
  CompletionRequest request = chat ? parse_chat_request(body, *tok_, model_.context)
                                   : parse_completion_request(body, *tok_, model_.context);
  const bool stream = request.stream;
  const SchedulerStats capacity = scheduler_->stats();
  const size_t sequences = request.prompts.size() * request.n;
  if (sequences > capacity.slots + capacity.max_queue)
    throw ApiError(400, "the request needs " + std::to_string(sequences) + " sequences (prompts x n); this server takes " +
                            std::to_string(capacity.slots + capacity.max_queue) + " at once (--parallel + --queue)",
                   request.n > 1 ? "n" : "prompt", "invalid_value");
  std::shared_ptr<CompletionJob> job;
  try {
    job = std::make_shared<CompletionJob>(std::move(request), chat, model_.name, *scheduler_, *tok_);
  } catch (const QueueFull& e) {
    throw ApiError(429, e.what(), "", "queue_full", "rate_limit_error");
  } catch (const ShuttingDown& e) {
    throw ApiError(503, e.what(), "", "shutting_down", "unavailable_error");
  }
  if (!stream) return respond_when_done(req, res, job);
  res.set_header("Cache-Control", "no-cache");
  auto events = [job, quiet_since = std::chrono::steady_clock::now()](size_t, httplib::DataSink& sink) mutable {
    std::string out;
    const bool done = job->poll_events(out, std::chrono::milliseconds(100));
    // While no event comes (the request waits in the queue, or a long prompt runs), an SSE
    // comment each kHeartbeat, which clients skip: only a write finds out that a client has
    // gone.
    const auto now = std::chrono::steady_clock::now();
    if (out.empty() && !done && now - quiet_since >= kHeartbeat) out = ": keep-alive\n\n";
    if (!out.empty()) {
      // A failed write means the client is gone: returning false ends the connection and
      // the releaser below cancels the sequences, which frees their slots and queue places.
      if (!sink.write(out.data(), out.size())) return false;
      quiet_since = now;
    }
    if (done) sink.done();
    return true;
  };
  // HTTP/1.0 has no chunked encoding: the stream ends when the connection closes.
  if (req.version == "HTTP/1.0") res.set_content_provider("text/event-stream", events, open_answer(job));
  else res.set_chunked_content_provider("text/event-stream", events, open_answer(job));
}

void HttpServer::respond_when_done(const httplib::Request& req, httplib::Response& res,
                                   const std::shared_ptr<CompletionJob>& job) {
  if (auto body = job->response_within(kPlainWait)) return send_json(res, *body);
  // The JSON after a space each kHeartbeat while it runs: only a write finds out that a
  // client has gone (a socket the client shut for sending may still read the answer).
  auto spaces_then_json = [job](size_t, httplib::DataSink& sink) {
    std::optional<json> body;
    try {
      body = job->response_within(kHeartbeat);
    } catch (const ApiError& e) {
      // The status line (200) has gone out. The error goes in the body for a person to
      // read, and over HTTP/1.1 the body is left unfinished (no last chunk; the connection
      // closes), so that a client sees a failed transfer, not a success without `choices`
      // (the openai npm client throws 'terminated'; curl exits 18).
      const std::string text = dump(error_body(e));
      sink.write(text.data(), text.size());
      return false;
    }
    if (!body) return sink.write(" ", 1);
    const std::string text = dump(*body);
    if (!sink.write(text.data(), text.size())) return false;
    sink.done();
    return true;
  };
  // A content type httplib does not compress (it compresses plain "application/json"): a
  // compressor holds the one-byte heartbeats back, and without writes a client that hangs
  // up is not noticed. HTTP/1.0 has no chunked encoding: the body ends with the connection.
  const char* type = "application/json; charset=utf-8";
  if (req.version == "HTTP/1.0") res.set_content_provider(type, spaces_then_json, open_answer(job));
  else res.set_chunked_content_provider(type, spaces_then_json, open_answer(job));
}

void HttpServer::tokenize(const std::string& text, httplib::Response& res) {
  check_ready();
  json body = parse_body(text);
  if (!body.contains("content") || !body["content"].is_string())
    throw ApiError(400, "'content' must be a string", "content", "invalid_type");
  for (const char* key : {"with_pieces", "parse_special", "add_special"})
    if (body.contains(key) && !body[key].is_boolean())
      throw ApiError(400, std::string("'") + key + "' must be a boolean", key, "invalid_type");
  const bool pieces = body.value("with_pieces", false);
  const std::string& content = body["content"].get_ref<const std::string&>();
  const bool special = body.value("parse_special", false);
  // add_special (llama-server's): the start token a prompt gets where the model file asks for it.
  auto ids =
      body.value("add_special", false) ? tok_->encode_document(content, special) : tok_->encode(content, special);
  json tokens = json::array();
  for (uint32_t id : ids)
    tokens.push_back(pieces ? json{{"id", id}, {"piece", piece_json(tok_->token_bytes(id))}} : json(id));
  send_json(res, {{"tokens", tokens}});
}

void HttpServer::detokenize(const std::string& text, httplib::Response& res) {
  check_ready();
  json body = parse_body(text);
  // Looked at in place: a copy of a deeply nested value would recurse once per level.
  const auto t = body.find("tokens");
  if (t == body.end() || !t->is_array())
    throw ApiError(400, "'tokens' must be an array of token ids", "tokens", "invalid_type");
  std::vector<uint32_t> ids;
  for (const json& id : *t) {
    const auto token = token_id(id, tok_->vocab_size());
    if (!token) {
      // A number is quoted; anything else is named by its type (dumping it would recurse
      // once per level, and echo the whole value back).
      const std::string type = id.type_name();
      const std::string what = id.is_number() ? id.dump() : (id.is_array() || id.is_object() ? "an " : "a ") + type;
      throw ApiError(400, "'tokens' holds " + what + ", not a token id below " + std::to_string(tok_->vocab_size()),
                     "tokens", is_whole_number(id) ? "invalid_value" : "invalid_type");
    }
    ids.push_back(*token);
  }
  send_json(res, {{"content", tok_->decode(ids)}});
}

void HttpServer::models(httplib::Response& res) {
  check_ready();
  send_json(res, {{"object", "list"}, {"data", json::array({model_object(model_, started_)})}});
}

// What OpenAI's client asks for in models.retrieve(id): the one model this server runs.
void HttpServer::model(const std::string& id, httplib::Response& res) {
  check_ready();
  if (id != model_.name) throw ApiError(404, "The model '" + id + "' does not exist", "model", "model_not_found");
  send_json(res, model_object(model_, started_));
}

void HttpServer::health(httplib::Response& res) {
  if (draining_.load(std::memory_order_acquire)) return send_json(res, {{"status", "shutting down"}}, 503);
  if (ready_.load(std::memory_order_acquire)) return send_json(res, {{"status", "ok"}});
  send_json(res, {{"status", "loading"}}, 503);
}

void HttpServer::metrics(httplib::Response& res) {
  std::ostringstream m;
  // Counts as integers: a double through the stream's 6 digits printed 1056020 as
  // 1.05602e+06, so a counter stood still between steps of 10 and rate() saw a staircase.
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    m << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
  };
  m << "# HELP gptvk_http_requests_total HTTP requests answered, by route and status.\n"
    << "# TYPE gptvk_http_requests_total counter\n";
  {
    std::lock_guard lock(counts_mu_);
    for (const auto& [key, n] : requests_)
      m << "gptvk_http_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  }
  metric("gptvk_ready", "gauge", "1 once the model is loaded.", uint64_t(ready_ ? 1 : 0));
  if (ready_) {
    const SchedulerStats s = scheduler_->stats();
    metric("gptvk_prompt_tokens_total", "counter", "Prompt tokens of the sequences admitted (cached ones included).",
           uint64_t(s.prompt_tokens));
    metric("gptvk_generated_tokens_total", "counter", "Tokens generated.", uint64_t(s.generated_tokens));
    metric("gptvk_sequences_total", "counter", "Sequences finished (each choice is one).", uint64_t(s.sequences_done));
    metric("gptvk_queue_depth", "gauge", "Sequences waiting for a slot.", uint64_t(s.queued));
    metric("gptvk_queue_capacity", "gauge", "Most sequences that may wait.", uint64_t(s.max_queue));
    metric("gptvk_active_sequences", "gauge", "Sequences in a slot.", uint64_t(s.active));
    metric("gptvk_slots", "gauge", "KV slots (--parallel).", uint64_t(s.slots));
    metric("gptvk_prompt_tokens_cached_total", "counter",
           "Prompt tokens not run again (counted once a sequence's prompt has run): their keys and values kept by a slot from an earlier prompt, or copied from another slot.",
           uint64_t(s.prompt_tokens_cached));
    metric("gptvk_prompt_tokens_copied_total", "counter",
           "Of the cached prompt tokens, those copied from another slot's keys and values (a running or free one).",
           uint64_t(s.prompt_tokens_copied));
    metric("gptvk_prompt_cache_refill_chunks_total", "counter",
           "Chunks of finished replies a free slot ran while idle, for the next turn's prompt to keep.",
           uint64_t(s.cache_refill_chunks));
    metric("gptvk_burst_prompts_total", "counter", "Prompts prefilled together with others' in one burst.",
           uint64_t(s.burst_prompts));
    metric("gptvk_twin_prompts_total", "counter",
           "Sequences that took an equal prompt's run in their burst instead of their own (n choices, one prompt sent by many).",
           uint64_t(s.twin_prompts));
    metric("gptvk_prompt_cache_hits_total", "counter",
           "Sequences whose whole prompt ran before: first token drawn from the logits kept from that run, nothing run again.",
           uint64_t(s.prompt_cache_hits));
    metric("gptvk_prompts_scored_total", "counter",
           "Prompts scored for echo with logprobs (a choice given the same prompt's scores is not counted).",
           uint64_t(s.prompts_scored));
    metric("gptvk_decode_tokens_per_second", "gauge", "Tokens per second of the decode rounds so far, all slots together.",
           s.step_seconds > 0 ? uint64_t(s.step_tokens) / s.step_seconds : 0.0);
  }
  res.set_content(m.str(), "text/plain; version=0.0.4");
}

}  // namespace gptvk::server
