// `gpt-vk serve --cors-origin`: what a browser needs before it lets a web page of another
// origin read the server's answers (the Fetch standard's CORS protocol). A preflight
// (OPTIONS with Access-Control-Request-Method) from an allowed origin is answered 204
// without the API key, naming the route's method and echoing the headers asked for; every
// answer to an allowed origin, errors and streams included, names that origin; another
// origin's requests are served as before but name no origin. CorsPolicy itself (the
// wildcard, the --cors-origin check) is tested without a server.
#include <httplib.h>

#include <boost/test/unit_test.hpp>
#include <string>

#include "server/cors.hpp"
#include "tests/support/raw_http.hpp"
#include "tests/support/server_process.hpp"

using namespace gptvk;
using namespace gptvk::test;

namespace {

const char* const kApp = "http://app.example";

test::ServerProcess& cors_server() {
  static test::ServerProcess server(
      {"--parallel", "1", "--api-key", "sesame", "--cors-origin", kApp, "--cors-origin", "http://localhost:5173"});
  return server;
}

std::string preflight(const std::string& path, const std::string& origin, const std::string& extra = "") {
  return "OPTIONS " + path + " HTTP/1.1\r\nHost: x\r\nOrigin: " + origin +
         "\r\nAccess-Control-Request-Method: POST\r\n" + extra + "\r\n";
}

const std::string kAuth = "Authorization: Bearer sesame\r\n";
const std::string kCompletion = R"({"prompt": "It was", "max_tokens": 3, "temperature": 0})";

}  // namespace

BOOST_AUTO_TEST_CASE(an_allowed_origins_preflight_is_answered_without_the_key) {
  const std::string r = round_trip(
      cors_server().port(),
      preflight("/v1/chat/completions", kApp, "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n"));
  BOOST_TEST_INFO("response: " << r);
  BOOST_TEST(status_of(r) == 204);
  BOOST_TEST(header_of(r, "Access-Control-Allow-Origin").value_or("") == kApp);
  BOOST_TEST(header_of(r, "Access-Control-Allow-Methods").value_or("") == "POST, OPTIONS");
  BOOST_TEST(header_of(r, "Access-Control-Allow-Headers").value_or("") == "authorization, content-type, x-stainless-os");
  BOOST_TEST(header_of(r, "Access-Control-Max-Age").value_or("") == "600");
  BOOST_TEST(header_of(r, "Vary").value_or("") == "Origin");
  BOOST_TEST(!header_of(r, "Access-Control-Allow-Private-Network").has_value());
  // A public page's preflight to a loopback server (Chromium's Private Network Access).
  const std::string pna =
      round_trip(cors_server().port(), preflight("/v1/completions", kApp, "Access-Control-Request-Private-Network: true\r\n"));
  BOOST_TEST(status_of(pna) == 204);
  BOOST_TEST(header_of(pna, "Access-Control-Allow-Private-Network").value_or("") == "true");
  // A GET route's preflight names GET; the second configured origin is allowed too.
  const std::string models = round_trip(cors_server().port(), preflight("/v1/models", "http://localhost:5173"));
  BOOST_TEST(status_of(models) == 204);
  BOOST_TEST(header_of(models, "Access-Control-Allow-Methods").value_or("") == "GET, OPTIONS");
  BOOST_TEST(header_of(models, "Access-Control-Allow-Origin").value_or("") == "http://localhost:5173");
}

BOOST_AUTO_TEST_CASE(other_preflights_are_not_answered) {
  const int port = cors_server().port();
  // Another origin, a path that is no route, an OPTIONS that is no preflight: the API key
  // is asked for, as on any request, and no origin is named.
  for (const std::string& request :
       {preflight("/v1/completions", "http://evil.example"), preflight("/v1/nothing", kApp),
        "OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: " + std::string(kApp) + "\r\n\r\n"}) {
    BOOST_TEST_CONTEXT("request: " << request) {
      const std::string r = round_trip(port, request);
      check_error(r, 401, "invalid_api_key");
      BOOST_TEST(header_of(r, "Access-Control-Allow-Methods").has_value() == false);
      const bool allowed = request.find(kApp) != std::string::npos;
      BOOST_TEST(header_of(r, "Access-Control-Allow-Origin").has_value() == allowed);
    }
  }
  // The server's page loads without the key (it asks for it), /v1/models does not.
  BOOST_TEST(status_of(round_trip(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
  BOOST_TEST(status_of(round_trip(port, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n")) == 200);
  check_error(round_trip(port, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"), 401, "invalid_api_key");
  // With the key, an OPTIONS that is no preflight is what it was without --cors-origin.
  check_error(round_trip(port, "OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth + "\r\n"), 405,
              "method_not_allowed");
}

BOOST_AUTO_TEST_CASE(answers_to_an_allowed_origin_name_it) {
  const int port = cors_server().port();
  const std::string origin = "Origin: " + std::string(kApp) + "\r\n";
  const std::string plain = round_trip(port, post_request("/v1/completions", kCompletion, origin + kAuth), 60.0);
  BOOST_TEST_INFO("response: " << plain);
  BOOST_TEST(status_of(plain) == 200);
  BOOST_TEST(body_of(plain)["choices"][0]["text"].is_string());
  BOOST_TEST(header_of(plain, "Access-Control-Allow-Origin").value_or("") == kApp);
  // An error, so that the page can read why (here the missing key).
  const std::string refused = round_trip(port, post_request("/v1/completions", kCompletion, origin));
  check_error(refused, 401, "invalid_api_key");
  BOOST_TEST(header_of(refused, "Access-Control-Allow-Origin").value_or("") == kApp);
  // A stream: its head, written before the first event, names the origin.
  const std::string body = R"({"prompt": "It was", "max_tokens": 3, "stream": true})";
  const std::string stream =
      round_trip(port, post_request("/v1/completions", body, origin + kAuth + "Connection: close\r\n"), 60.0, false);
  BOOST_TEST_INFO("stream: " << stream);
  BOOST_TEST(stream.find("data: [DONE]") != std::string::npos);
  BOOST_TEST(header_of(stream, "Access-Control-Allow-Origin").value_or("") == kApp);
  // Another origin is served (browsers, not servers, keep its pages out) but not named.
  const std::string other =
      round_trip(port, post_request("/v1/completions", kCompletion, "Origin: http://evil.example\r\n" + kAuth), 60.0);
  BOOST_TEST(status_of(other) == 200);
  BOOST_TEST(!header_of(other, "Access-Control-Allow-Origin").has_value());
  BOOST_TEST(header_of(other, "Vary").value_or("") == "Origin");
}

BOOST_AUTO_TEST_CASE(the_policy_without_a_server) {
  httplib::Request req;
  req.method = "OPTIONS";
  req.headers.emplace("Origin", "null");  // a page opened from a file
  req.headers.emplace("Access-Control-Request-Method", "POST");
  req.headers.emplace("Access-Control-Request-Headers", "content-type\r\nX-Injected: 1");
  httplib::Response res;
  // "*": every origin, answered with the wildcard; a header list that is no list is not echoed.
  BOOST_TEST(server::CorsPolicy({"*"}).answer_preflight(req, "POST", res));
  server::CorsPolicy({"*"}).add_headers(req, res);
  BOOST_TEST(res.status == 204);
  BOOST_TEST(res.get_header_value("Access-Control-Allow-Origin") == "*");
  BOOST_TEST(!res.has_header("Access-Control-Allow-Headers"));
  // No origins: nothing answered, no header added.
  httplib::Response none;
  BOOST_TEST(!server::CorsPolicy({}).answer_preflight(req, "POST", none));
  server::CorsPolicy({}).add_headers(req, none);
  BOOST_TEST(none.headers.empty());
  // A preflight for no route is not answered.
  BOOST_TEST(!server::CorsPolicy({"*"}).answer_preflight(req, nullptr, none));

  BOOST_TEST(server::cors_origin_problem("*").empty());
  BOOST_TEST(server::cors_origin_problem("http://localhost:3000").empty());
  BOOST_TEST(server::cors_origin_problem("https://app.example").empty());
  for (const char* bad : {"http://localhost:3000/", "localhost:3000", "ftp://x", "http://", "http://a b", "https://x/path"})
    BOOST_TEST(!server::cors_origin_problem(bad).empty(), bad);
}
