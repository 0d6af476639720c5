// `gpt-vk serve` against hostile or odd HTTP, over raw loopback sockets: body framing that
// must be refused before the body is read (a Content-Length over the limit, lying or
// contradicting ones, unknown transfer codings, Expect: 100-continue), a chunked body past
// the limit, framing that httplib would read leniently, methods a route does not take, the
// Bearer scheme in any case, logprobs that stop where a stop string cuts the text, a model
// by its id (any bytes), Range ignored (streams are tests/test_server_streams.cpp's,
// clients that hang up tests/test_server_hangups.cpp's). Every socket read has a deadline.
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/raw_http.hpp"
#include "tests/support/server_process.hpp"

using json = nlohmann::json;
using namespace gptvk;
using namespace gptvk::test;

namespace {

test::ServerProcess& shared_server() {
  static test::ServerProcess server({"--parallel", "2"});
  return server;
}

// Sends `head` (a request whose body does not follow) on a new connection and reads its
// answer: `status` with OpenAI's `code`, its length given by Content-Length and
// "Connection: close" without Keep-Alive. Then sends what a client still sending the body
// would (here bytes that read as a request of their own) and checks that the server has
// closed the connection instead of answering them: recv ends (0 or an error) with nothing
// read, within a few seconds.
void check_refused_and_closed(int port, const std::string& head, int status, const std::string& code) {
  BOOST_TEST_CONTEXT("request: " << head.substr(0, 200)) {
    int fd = connect_to(port);
    BOOST_REQUIRE(send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
    // Within httplib's keep-alive timeout (5 s), which would close the connection anyway.
    const Received answer = receive(fd, 2.0, true);
    const std::string& response = answer.text;
    check_error(response, status, code);
    BOOST_TEST_INFO("response: " << response.substr(0, 400));
    const auto length = header_of(response, "Content-Length");
    BOOST_TEST(length.has_value());
    if (length) BOOST_TEST(*length == std::to_string(response.size() - response.find("\r\n\r\n") - 4));
    BOOST_TEST(header_of(response, "Connection").value_or("") == "close");
    BOOST_TEST(!header_of(response, "Keep-Alive").has_value());
    BOOST_TEST(response.find("100 Continue") == std::string::npos);
    // The body the server did not read, as a client that goes on sending it would.
    const std::string body = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(4096, 'a');
    (void)!send(fd, body.data(), body.size(), MSG_NOSIGNAL);
    const Received after = answer.closed ? Received{"", true} : receive(fd, 5.0, false);
    close(fd);
    BOOST_TEST_INFO("after the refusal: " << after.text.substr(0, 200));
    BOOST_TEST(after.text.empty());
    BOOST_TEST(after.closed);
  }
}

json post_json(int port, const std::string& path, const json& body) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  auto r = cli.Post(path.c_str(), body.dump(), "application/json");
  BOOST_REQUIRE(r);
  BOOST_TEST_INFO("body: " << r->body);
  BOOST_REQUIRE(r->status == 200);
  return json::parse(r->body);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(server_http)

// Refused from the headers alone: a Content-Length over the limit gets its 413 without the
// server waiting out its 30 s read timeout for a body this client never sends, so the answer
// arriving within round_trip's 10 s is the proof.
BOOST_AUTO_TEST_CASE(framing_is_refused_before_the_body) {
  const int port = shared_server().port();
  check_error(round_trip(port, post_head("/v1/completions", "Content-Length: 999999999999\r\n"), 10.0), 413,
              "payload_too_large");
  // The same without a 100 Continue first.
  const std::string expect = round_trip(port, post_head("/tokenize", "Content-Length: 2000000\r\nExpect: 100-continue\r\n"));
  check_error(expect, 413, "payload_too_large");
  BOOST_TEST(expect.find("100 Continue") == std::string::npos);
  check_error(round_trip(port, post_head("/tokenize", "Content-Length: -5\r\n")), 400, "invalid_request");
  check_error(round_trip(port, post_head("/tokenize", "Content-Length: abc\r\n")), 400, "invalid_request");
  check_error(round_trip(port, post_head("/tokenize", "Content-Length: 2\r\nContent-Length: 30\r\n") + "{}"), 400,
              "invalid_request");
  check_error(round_trip(port, post_head("/tokenize", "Transfer-Encoding: gzip\r\n")), 501, "unsupported_transfer_encoding");
  // httplib's own refusals get OpenAI's body with a code too.
  check_error(round_trip(port, "GET /health\r\nHost: x\r\n\r\n"), 400, "invalid_request");
}

// A refusal sent before the body is read gives its length and closes the connection, so
// that the client can tell where it ends and the body it may still send is not read as
// requests of its own. This matters for the 413 for "Expect: 100-continue" (which curl adds
// to bodies over 1 MiB): without a Content-Length and a close, curl sees "no chunk, no
// close, no size", sends its body anyway and gets a second answer, a 414 for it; every other
// early refusal closes the connection too.
BOOST_AUTO_TEST_CASE(an_early_refusal_has_a_length_and_closes_the_connection) {
  const int port = shared_server().port();
  check_refused_and_closed(port, post_head("/v1/completions", "Content-Length: 2000000\r\nExpect: 100-continue\r\n"), 413,
                           "payload_too_large");
  check_refused_and_closed(port, post_head("/tokenize", "Content-Length: 999999999999\r\n"), 413, "payload_too_large");
  check_refused_and_closed(port, post_head("/tokenize", "Content-Length: abc\r\n"), 400, "invalid_request");
  check_refused_and_closed(port, post_head("/tokenize", "Content-Length: abc\r\nExpect: 100-continue\r\n"), 400,
                           "invalid_request");
  check_refused_and_closed(port, post_head("/tokenize", "Transfer-Encoding: gzip\r\n"), 501, "unsupported_transfer_encoding");
  // httplib reads no body for a GET: it would be parsed as the next request.
  check_refused_and_closed(port, "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n", 400,
                           "invalid_request");
  check_refused_and_closed(
      port, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 500\r\n\r\n",
      415, "unsupported_media_type");
}

// A chunked body is read only up to the limit, however large it is; one under the limit is
// read and answered as usual.
BOOST_AUTO_TEST_CASE(chunked_bodies_keep_the_size_limit) {
  const int port = shared_server().port();
  auto chunked = [](const std::string& body) {
    std::string out = post_head("/tokenize", "Transfer-Encoding: chunked\r\nConnection: close\r\n");
    for (size_t at = 0; at < body.size(); at += 65536) {
      const std::string part = body.substr(at, 65536);
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", part.size());
      out += size + part + "\r\n";
    }
    return out + "0\r\n\r\n";
  };
  const std::string small = round_trip(port, chunked(json{{"content", "Hello world"}}.dump()), 10.0, false);
  BOOST_TEST_INFO("response: " << small);
  BOOST_TEST(status_of(small) == 200);
  BOOST_TEST(small.find("15496") != std::string::npos);
  const std::string big = json{{"content", "a"}, {"pad", std::string(3 << 20, 'a')}}.dump();
  const std::string r = round_trip(port, chunked(big), 20.0, false);
  BOOST_TEST_INFO("response: " << r.substr(0, 300));
  // The server stops reading at the limit; a client still sending may see its 413 or a
  // reset (its unread answer discarded), and the server goes on serving.
  BOOST_TEST((status_of(r) == 413 || status_of(r) == 0));
  if (status_of(r) == 413) check_error(r, 413, "payload_too_large");
  BOOST_TEST(status_of(round_trip(port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
}

// Framing that httplib reads leniently is refused (400, the connection closed), so that no
// request can hide inside another's body: chunk data not followed by CRLF (the bytes after
// it must not be answered as a request of their own), chunk sizes that are not plain hex, a
// trailer; a head whose lines end in LF alone (refused at once, not after the request
// timeout), a space before a colon, a folded line, a control character in a value, an
// HTTP/1.1 request without Host, Transfer-Encoding on HTTP/1.0. A chunk extension and an
// HTTP/1.0 request without Host are fine.
BOOST_AUTO_TEST_CASE(lenient_framing_is_refused) {
  const int port = shared_server().port();
  const std::string body = json{{"content", "Hello world"}}.dump();
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  const std::string chunked = post_head("/tokenize", "Transfer-Encoding: chunked\r\n");
  const std::string hidden = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string smuggled =
      round_trip(port, chunked + size + "\r\n" + body + "0\r\n\r\n" + hidden + "\r\n0\r\n\r\n", 5.0, false);
  BOOST_TEST_INFO("response: " << smuggled);
  check_error(smuggled, 400, "invalid_request");
  BOOST_TEST(smuggled.find("chunk data must be followed by CRLF") != std::string::npos);
  BOOST_TEST(smuggled.find("HTTP/1.1", 1) == std::string::npos);  // one answer: the hidden GET got none
  for (const std::string& bad_body : {"0x" + std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n",
                                      std::string(size) + "  \r\n" + body + "\r\n0\r\n\r\n",
                                      std::string(size) + "\r\n" + body + "\r\n0\r\nX-Trailer: 1\r\n\r\n"})
    check_refused_and_closed(port, chunked + bad_body, 400, "invalid_request");
  for (const char* head : {"GET /health HTTP/1.1\nHost: x\n\n", "GET /health HTTP/1.1\r\nHost : x\r\n\r\n",
                           "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
                           "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", "GET /health HTTP/1.1\r\n\r\n",
                           "GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
                           "POST /tokenize HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"})
    check_refused_and_closed(port, head, 400, "invalid_request");
  const std::string fine = round_trip(port,
                                      chunked + size + ";name=value\r\n" + body + "\r\n0\r\n\r\n" +
                                          "GET /health HTTP/1.0\r\n\r\n",
                                      5.0, false);
  BOOST_TEST_INFO("response: " << fine);
  BOOST_TEST(status_of(fine) == 200);
  BOOST_TEST(fine.find("15496") != std::string::npos);
  BOOST_TEST(fine.find("HTTP/1.1 200 OK", fine.find("15496")) != std::string::npos);  // the pipelined GET
}

BOOST_AUTO_TEST_CASE(a_known_route_asked_with_another_method_is_405) {
  const int port = shared_server().port();
  const std::string r = round_trip(port, "GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n");
  check_error(r, 405, "method_not_allowed");
  BOOST_TEST(r.find("Allow: POST") != std::string::npos);
  check_error(round_trip(port, "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"), 404, "not_found");
  const std::string post_model = round_trip(port, post_request("/v1/models/x", "{}"));
  check_error(post_model, 405, "method_not_allowed");
  BOOST_TEST(post_model.find("Allow: GET") != std::string::npos);
  // Without --cors-origin a browser's preflight is one more OPTIONS, and no answer names an
  // origin (tests/test_server_cors.cpp has the server with origins).
  const std::string pre = round_trip(port, "OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://app.example\r\n"
                                           "Access-Control-Request-Method: POST\r\n\r\n");
  check_error(pre, 405, "method_not_allowed");
  BOOST_TEST(!header_of(pre, "Access-Control-Allow-Origin").has_value());
  BOOST_TEST(!header_of(pre, "Vary").has_value());
}

// GET / is the server's page and /app.js its script, each with a policy that lets the page
// run only that script and talk only to the server; tests/browser.mjs uses the page.
BOOST_AUTO_TEST_CASE(the_page_and_its_script) {
  const int port = shared_server().port();
  const std::string page = round_trip(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(status_of(page) == 200);
  BOOST_TEST(header_of(page, "Content-Type").value_or("") == "text/html; charset=utf-8");
  BOOST_TEST(page.find("<script type=\"module\" src=\"/app.js\"></script>") != std::string::npos);
  const std::string policy = header_of(page, "Content-Security-Policy").value_or("");
  BOOST_TEST(policy.find("script-src 'self'") != std::string::npos, policy);
  BOOST_TEST(policy.find("connect-src 'self'") != std::string::npos, policy);
  const std::string script = round_trip(port, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(status_of(script) == 200);
  BOOST_TEST(header_of(script, "Content-Type").value_or("") == "text/javascript; charset=utf-8");
  BOOST_TEST(script.find("'/v1/chat/completions'") != std::string::npos);
  BOOST_TEST(header_of(script, "X-Content-Type-Options").value_or("") == "nosniff");
}

// GET /v1/models/{id}, which the OpenAI client's models.retrieve() asks for: the model of
// /v1/models, and 404 model_not_found for another id.
BOOST_AUTO_TEST_CASE(one_model_by_its_id) {
  httplib::Client cli("127.0.0.1", shared_server().port());
  auto models = cli.Get("/v1/models");
  BOOST_REQUIRE(models);
  const json model = json::parse(models->body)["data"][0];
  auto one = cli.Get("/v1/models/" + model["id"].get<std::string>());
  BOOST_REQUIRE(one);
  BOOST_TEST(one->status == 200);
  BOOST_TEST(json::parse(one->body) == model);
  auto other = cli.Get("/v1/models/gpt-4");
  BOOST_REQUIRE(other);
  BOOST_TEST(other->status == 404);
  BOOST_TEST(json::parse(other->body)["error"]["code"] == "model_not_found");
  // Any bytes of an id: a newline still matches the route (not a 405), and the message of a
  // NUL goes on past it.
  const std::string newline = round_trip(shared_server().port(), "GET /v1/models/a%0Ab HTTP/1.1\r\nHost: x\r\n\r\n");
  check_error(newline, 404, "model_not_found");
  const std::string nul = round_trip(shared_server().port(), "GET /v1/models/x%00y HTTP/1.1\r\nHost: x\r\n\r\n");
  check_error(nul, 404, "model_not_found");
  BOOST_TEST(body_of(nul)["error"]["message"] == std::string("The model 'x\0y' does not exist", 30));
}

// Range asks for part of an answer; every answer here is generated, and the field is
// ignored, as RFC 9110 allows, rather than sliced as httplib would: a 200 with a cut JSON
// body, or a 416 for a Range it cannot parse.
BOOST_AUTO_TEST_CASE(range_is_ignored) {
  const int port = shared_server().port();
  const std::string models = round_trip(port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nRange: bytes=0-5\r\n\r\n");
  BOOST_TEST(status_of(models) == 200);
  BOOST_TEST(body_of(models)["data"].size() == 1u);
  BOOST_TEST(!header_of(models, "Content-Range").has_value());
  const std::string tokens =
      round_trip(port, post_request("/tokenize", R"({"content":"Hello world"})", "range: bytes=abc\r\n"));
  BOOST_TEST(status_of(tokens) == 200);
  BOOST_TEST(body_of(tokens)["tokens"] == json::parse("[15496, 995]"));
}

// No route takes PUT or PATCH, and httplib reads their bodies without a length until the
// client closes: they are refused at once, not with a 408 after the 20 s request timeout.
BOOST_AUTO_TEST_CASE(put_and_patch_are_refused_at_once) {
  const int port = shared_server().port();
  const std::string put = round_trip(port, "PUT /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 3.0);
  check_error(put, 405, "method_not_allowed");
  BOOST_TEST(header_of(put, "Allow").value_or("") == "POST");
  check_error(round_trip(port, "PATCH /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 3.0), 404, "not_found");
  // Asking to send a body first: refused without "100 Continue", the body never read.
  check_refused_and_closed(port, "PUT /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\nExpect: 100-continue\r\n\r\n",
                           405, "method_not_allowed");
  // A method or version the server does not speak at all: 501 and 505, the connection closed.
  check_refused_and_closed(port, "TRACE /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method_not_implemented");
  check_refused_and_closed(port, "GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported");
}

BOOST_AUTO_TEST_CASE(the_bearer_scheme_is_case_insensitive_and_401_says_so) {
  test::ServerProcess server({"--parallel", "1", "--api-key", "sesame"});
  const std::string body = R"({"content": "Hello"})";
  auto with_auth = [&](const std::string& auth) {
    return post_request("/tokenize", body, auth);
  };
  BOOST_TEST(status_of(round_trip(server.port(), with_auth("Authorization: bearer sesame\r\n"))) == 200);
  BOOST_TEST(status_of(round_trip(server.port(), with_auth("Authorization: BEARER sesame\r\n"))) == 200);
  const std::string refused = round_trip(server.port(), with_auth("Authorization: Bearer Sesame\r\n"));
  check_error(refused, 401, "invalid_api_key");
  BOOST_TEST(refused.find("WWW-Authenticate: Bearer") != std::string::npos);
  // Refused before its body is read, with or without a 100 Continue asked for first.
  check_refused_and_closed(server.port(), post_head("/tokenize", "Authorization: Bearer x\r\nContent-Length: 500\r\n"), 401,
                           "invalid_api_key");
  check_refused_and_closed(server.port(),
                           post_head("/tokenize", "Authorization: Bearer x\r\nContent-Length: 500\r\nExpect: 100-continue\r\n"),
                           401, "invalid_api_key");
}

// A stop string that cuts a token: the logprobs list only tokens that start inside the
// text, at their true offsets (after a held-back piece too), streamed or not: none of the
// stop string's own tokens.
BOOST_AUTO_TEST_CASE(logprobs_end_where_a_stop_string_cuts_the_text) {
  const int port = shared_server().port();
  json req{{"prompt", "It was a fine morning, and"}, {"temperature", 0}, {"max_tokens", 12}, {"logprobs", 1}};
  const json full = post_json(port, "/v1/completions", req)["choices"][0];
  const std::vector<std::string> tokens = full["logprobs"]["tokens"];
  const std::string text = full["text"];
  // A stop string from one byte into token i (of two bytes or more) to one byte into i + 1.
  size_t i = 1, offset = tokens[0].size();
  while (i + 1 < tokens.size() && tokens[i].size() < 2) offset += tokens[i++].size();
  BOOST_REQUIRE(i + 1 < tokens.size());
  const size_t cut = offset + 1;
  const std::string stop = text.substr(cut, tokens[i].size());
  BOOST_REQUIRE(text.find(stop) == cut);
  req["stop"] = stop;
  const json want_tokens(std::vector<std::string>(tokens.begin(), tokens.begin() + i + 1));
  // Characters from the start of the prompt (the text is ASCII, checked below).
  json want_offsets = json::array();
  for (size_t j = 0, at = std::string(req["prompt"]).size(); j <= i; at += tokens[j++].size()) want_offsets.push_back(at);
  BOOST_REQUIRE(std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; }));
  const json stopped = post_json(port, "/v1/completions", req)["choices"][0];
  BOOST_TEST(stopped["text"] == text.substr(0, cut));
  BOOST_TEST(stopped["finish_reason"] == "stop");
  BOOST_TEST(stopped["logprobs"]["tokens"] == want_tokens);
  BOOST_TEST(stopped["logprobs"]["text_offset"] == want_offsets);
  // Streamed: the same tokens, each in the chunk whose text it starts.
  req["stream"] = true;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  auto r = cli.Post("/v1/completions", req.dump(), "application/json");
  BOOST_REQUIRE(r);
  json streamed = json::array();
  std::string streamed_text;
  for (size_t at = 0; (at = r->body.find("data: {", at)) != std::string::npos; ++at) {
    const json choice = json::parse(r->body.substr(at + 6, r->body.find("\n\n", at) - at - 6))["choices"][0];
    streamed_text += choice["text"].get<std::string>();
    if (!choice["logprobs"].is_null())
      for (const auto& t : choice["logprobs"]["tokens"]) streamed.push_back(t);
  }
  BOOST_TEST(streamed_text == text.substr(0, cut));
  BOOST_TEST(streamed == want_tokens);
}

// text_offset counts characters, from the start of the prompt: a token-id prompt whose
// tokens cut "“" in two and leave a character unfinished before ","; the offsets index the
// text a JSON reader gets (U+FFFD for the unfinished one), with or without echo.
BOOST_AUTO_TEST_CASE(text_offsets_are_characters_from_the_prompts_start) {
  const int port = shared_server().port();
  json req{{"prompt", {10161, 2611, 851, 564, 250, 8505, 447, 11}}, {"echo", true}, {"logprobs", 0},
           {"temperature", 0}, {"max_tokens", 2}};
  const json echoed = post_json(port, "/v1/completions", req)["choices"][0];
  const std::string text = echoed["text"];
  BOOST_REQUIRE(text.starts_with("Emma \u2014 \u201cyes\ufffd,"));
  const std::vector<size_t> got = echoed["logprobs"]["text_offset"];  // 8 prompt tokens, 2 generated
  BOOST_REQUIRE(got.size() == 10u);
  BOOST_TEST(std::vector<size_t>(got.begin(), got.begin() + 9) == std::vector<size_t>({0, 2, 4, 6, 7, 8, 11, 12, 13}));
  req["echo"] = false;  // the same offsets for the generated tokens
  const json plain = post_json(port, "/v1/completions", req)["choices"][0];
  BOOST_TEST(plain["logprobs"]["text_offset"] == json(std::vector<size_t>(got.begin() + 8, got.end())));
}

// /tokenize's pieces: whole UTF-8 as a string, a token that ends inside a character as its
// bytes, not U+FFFD standing in for them.
BOOST_AUTO_TEST_CASE(tokenize_pieces_that_split_a_character_are_bytes) {
  const int port = shared_server().port();
  const json r = post_json(port, "/tokenize", json{{"content", "caf\u00e9 \u4e16"}, {"with_pieces", true}});
  std::string joined;
  bool some_bytes = false;
  for (const json& t : r["tokens"]) {
    const json& piece = t["piece"];
    if (piece.is_string()) {
      joined += piece.get<std::string>();
    } else {
      BOOST_REQUIRE(piece.is_array());
      some_bytes = true;
      for (const json& b : piece) joined += static_cast<char>(b.get<int>());
    }
  }
  BOOST_TEST(joined == "caf\u00e9 \u4e16");
  BOOST_TEST(some_bytes);  // GPT-2 splits U+4E16 across tokens
}

// echo with max_tokens 0 (how lm-evaluation-harness scores text through a completions API):
// the prompt and its log-probabilities, the same as those of a request that also generates,
// and no generated token.
BOOST_AUTO_TEST_CASE(echo_with_max_tokens_0_scores_the_prompt) {
  const int port = shared_server().port();
  json req{{"prompt", "It was a fine morning, and"}, {"echo", true}, {"logprobs", 2}, {"temperature", 0}};
  req["max_tokens"] = 3;
  const json generated = post_json(port, "/v1/completions", req);
  req["max_tokens"] = 0;
  const json scored = post_json(port, "/v1/completions", req);
  const json& choice = scored["choices"][0];
  BOOST_TEST(choice["text"] == "It was a fine morning, and");
  BOOST_TEST(choice["finish_reason"] == "length");
  BOOST_TEST(scored["usage"]["completion_tokens"] == 0);
  const size_t n = scored["usage"]["prompt_tokens"].get<size_t>();
  BOOST_REQUIRE(n >= 3u);
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    const json& want = generated["choices"][0]["logprobs"][key];
    BOOST_TEST(choice["logprobs"][key] == json(std::vector<json>(want.begin(), want.begin() + n)), key);
  }
  BOOST_TEST(choice["logprobs"]["token_logprobs"][0].is_null());
  BOOST_TEST(choice["logprobs"]["token_logprobs"][1].is_number());
  // Scoring generates nothing, so a prompt may fill the whole context (256 tokens) without
  // room for one generated token.
  json full = req;
  full["prompt"] = std::vector<uint32_t>(256, 464);
  const json scored_full = post_json(port, "/v1/completions", full);
  BOOST_TEST(scored_full["choices"][0]["logprobs"]["token_logprobs"].size() == 256u);
  BOOST_TEST(scored_full["choices"][0]["logprobs"]["token_logprobs"][255].is_number());
  full["prompt"] = std::vector<uint32_t>(257, 464);
  check_error(round_trip(port, post_request("/v1/completions", full.dump())), 400, "context_length_exceeded");
  req["echo"] = false;
  httplib::Client cli("127.0.0.1", port);
  auto refused = cli.Post("/v1/completions", req.dump(), "application/json");
  BOOST_REQUIRE(refused);
  BOOST_TEST(refused->status == 400);
}

// Requests sent back to back on one connection, before any answer (HTTP/1.1 pipelining),
// are answered in order: the bytes of the next requests, read along with one, must not be
// lost (httplib alone reads each request through a buffer of its own and drops them,
// giving one answer, then closing the connection after the keep-alive timeout).
BOOST_AUTO_TEST_CASE(pipelined_requests_are_answered_in_order) {
  auto tokenize = [](const std::string& text) {
    const std::string body = json{{"content", text}}.dump();
    return post_request("/tokenize", body);
  };
  const std::string requests =
      tokenize("hello") + tokenize("world") + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const int fd = connect_to(shared_server().port());
  BOOST_REQUIRE(send(fd, requests.data(), requests.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(requests.size()));
  const Received r = receive(fd, 4.0, false);  // under the 5 s keep-alive timeout
  close(fd);
  BOOST_TEST_INFO("received: " << r.text);
  BOOST_TEST(r.closed);
  const size_t hello = r.text.find(R"({"tokens":[31373]})"), world = r.text.find(R"({"tokens":[6894]})"),
               health = r.text.find(R"({"status":"ok"})");
  BOOST_TEST((hello != std::string::npos && world != std::string::npos && health != std::string::npos));
  BOOST_TEST((hello < world && world < health));
}

// RFC 9112: empty lines before a request line are ignored (§2.2), and a target in absolute
// form is routed by its path (§3.2.2, which a server must accept), rather than a 400 or 404.
BOOST_AUTO_TEST_CASE(an_empty_line_before_a_request_and_an_absolute_target_are_accepted) {
  const int port = shared_server().port();
  BOOST_TEST(status_of(round_trip(port, "\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
  BOOST_TEST(status_of(round_trip(port, "GET http://127.0.0.1:1/health HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
  const std::string no_path = round_trip(port, "GET HTTP://h?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");  // path "/": the page
  BOOST_TEST(status_of(no_path) == 200);
  BOOST_TEST(header_of(no_path, "Content-Type").value_or("") == "text/html; charset=utf-8");
  const json body{{"prompt", "Hello"}, {"max_tokens", 2}};
  const std::string answer = round_trip(port, "\r\n" + post_request("https://example.com/v1/completions", body.dump()), 30.0);
  BOOST_TEST_INFO("answer: " << answer.substr(0, 400));
  BOOST_TEST(status_of(answer) == 200);
  BOOST_TEST(body_of(answer)["object"] == "text_completion");
}

// A client may shut its sending side once its requests are out (a half-close, as nc -N or
// Go's CloseWrite do): it still reads every answer, the end-of-file not taken for a
// vanished client.
BOOST_AUTO_TEST_CASE(a_half_closed_client_still_gets_its_answers) {
  const std::string body = json{{"content", "hello"}}.dump();
  const std::string requests = post_request("/tokenize", body) +
                               "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const int fd = connect_to(shared_server().port());
  BOOST_REQUIRE(send(fd, requests.data(), requests.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(requests.size()));
  shutdown(fd, SHUT_WR);
  const Received r = receive(fd, 4.0, false);
  close(fd);
  BOOST_TEST_INFO("received: " << r.text);
  BOOST_TEST(r.closed);
  const size_t hello = r.text.find(R"({"tokens":[31373]})"), health = r.text.find(R"({"status":"ok"})");
  BOOST_TEST((hello != std::string::npos && health != std::string::npos && hello < health));
}

// A POST with neither Content-Length nor Transfer-Encoding (curl -X POST without data) is
// answered at once, where httplib alone reads its body until the client closes: a 408
// after the request timeout, and a request pipelined behind it taken for that body.
BOOST_AUTO_TEST_CASE(a_post_without_a_length_is_411_at_once) {
  check_error(round_trip(shared_server().port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"), 411,
              "length_required");
}

// A value nested 100,000 deep where /detokenize wants a token id is a short 400: an error
// message that dumped it would recurse once per level, killing the server with a stack
// overflow (and at smaller depths echoing the whole value back). The body is refused for
// its depth (over 100 levels) before any field is read.
BOOST_AUTO_TEST_CASE(a_deeply_nested_token_is_a_short_400) {
  const int port = shared_server().port();
  const std::string body = R"({"tokens":[)" + std::string(100000, '[') + std::string(100000, ']') + "]}";
  const std::string r = round_trip(port, post_request("/detokenize", body));
  check_error(r, 400, "invalid_value");
  BOOST_TEST(r.find("nests deeper than 100 levels") != std::string::npos);
  BOOST_TEST(r.size() < 1000u);
  BOOST_TEST(status_of(round_trip(port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
}

// A request must arrive within --request-timeout of its first byte: a client that trickles
// its headers or its body (each byte within the read timeout, which it keeps resetting)
// gets a 408 and the connection closed, and so frees its thread rather than hold it for as
// long as it goes on sending.
BOOST_AUTO_TEST_CASE(a_trickled_request_gets_408_and_is_closed) {
  test::ServerProcess server({"--parallel", "1", "--request-timeout", "2"});
  auto trickled = [&](const std::string& start, const std::string& drop) {
    const int fd = connect_to(server.port());
    BOOST_REQUIRE(send(fd, start.data(), start.size(), MSG_NOSIGNAL) > 0);
    Received r;
    for (int i = 0; i < 40 && !r.closed && !whole_response(r.text); ++i) {  // at most 8 s
      (void)!send(fd, drop.data(), drop.size(), MSG_NOSIGNAL);
      const Received more = receive(fd, 0.2, true);
      r.text += more.text;
      r.closed = more.closed;
    }
    close(fd);
    return r.text;
  };
  check_error(trickled("GET /health HTTP/1.1\r\n", "X: y\r\n"), 408, "request_timeout");
  check_error(trickled(post_head("/tokenize", "Content-Length: 1000\r\n"), " "), 408, "request_timeout");
  BOOST_TEST(status_of(round_trip(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
}

// Clients that open connections and send a byte each (slowloris), more of them than the
// server has threads, leave it answering others at once: none holds a worker thread until
// its request timeout, which a request behind them would wait out too.
BOOST_AUTO_TEST_CASE(one_byte_clients_do_not_hold_the_threads) {
  test::ServerProcess server({"--parallel", "1", "--queue", "0"});  // 129 threads
  std::vector<int> lorises;
  for (int i = 0; i < 160; ++i) {
    lorises.push_back(connect_to(server.port()));
    BOOST_REQUIRE(send(lorises.back(), "G", 1, MSG_NOSIGNAL) == 1);
  }
  // Well within the 20 s request timeout that would free a thread.
  BOOST_TEST(status_of(round_trip(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)) == 200);
  for (int fd : lorises) close(fd);
}

// A line that never ends is refused once it passes its part's limit, and the connection
// closed: in the head (32 KiB for request line and headers), 431; as a chunked body's chunk
// size (the body's limit, 1 MiB, twice over for the framing), 413. httplib alone checks a
// line's length only once it has ended, holding all of it in memory meanwhile.
BOOST_AUTO_TEST_CASE(endless_lines_are_cut_at_their_limit) {
  auto endless = [](const std::string& start, char filler) {
    const int fd = connect_to(shared_server().port());
    const std::string chunk(64 << 10, filler);
    BOOST_REQUIRE(send(fd, start.data(), start.size(), MSG_NOSIGNAL) > 0);
    for (int i = 0; i < 64 && send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0; ++i) {  // 4 MiB at most
    }
    const Received r = receive(fd, 5.0, true);
    close(fd);
    BOOST_TEST(header_of(r.text, "Connection").value_or("") == "close");
    return r.text;
  };
  check_error(endless("GET /health HTTP/1.1\r\nX: ", 'a'), 431, "headers_too_large");
  // An endless request line: httplib alone would close the connection without an answer.
  check_error(endless("GET /v1/models/", 'a'), 431, "headers_too_large");
  // One header line over httplib's 8 KiB, within the head's 32 KiB: 431, not a plain 400.
  const std::string long_field = "GET /health HTTP/1.1\r\nHost: x\r\nX: " + std::string(9000, 'a') + "\r\n\r\n";
  check_error(round_trip(shared_server().port(), long_field), 431, "headers_too_large");
  check_error(endless(post_head("/tokenize", "Transfer-Encoding: chunked\r\n"), '0'), 413, "payload_too_large");
}

BOOST_AUTO_TEST_SUITE_END()
