// Raw HTTP/1.1 over loopback sockets for the server tests: requests as bytes, so that a test
// can send what no client library would (pipelined, trickled, malformed), and answers read
// with a deadline on every read.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gptvk::test {

// A socket connected to 127.0.0.1:port; throws std::runtime_error if it cannot connect
// (client threads call it: Boost.Test asserts only on the test's own thread).
int connect_to(int port);

// Whether `out` holds a whole response: with a Content-Length, or chunked (a completion
// that runs past the server's plain wait goes out chunked) with its last chunk.
bool whole_response(const std::string& out);

// What a socket received until the server closed it (`closed`), a deadline passed, or
// (asked for) a whole response was in.
struct Received {
  std::string text;
  bool closed = false;
};
Received receive(int fd, double deadline_s, bool one_response);

// Sends `request` on a new connection and reads its answer (receive()).
std::string round_trip(int port, const std::string& request, double deadline_s = 3.0, bool one_response = true);

// A POST's head up to and including the blank line, `headers` ("Name: value\r\n"...) last.
std::string post_head(const std::string& path, const std::string& headers);
// A whole POST of `body`, with its Content-Length after `headers`.
std::string post_request(const std::string& path, const std::string& body, const std::string& headers = "");

// The status code of `response` (0 when it is not one), its body as JSON (chunked or not;
// discarded when it is not JSON), the value of its header `name`.
int status_of(const std::string& response);
nlohmann::json body_of(const std::string& response);
std::optional<std::string> header_of(const std::string& response, const std::string& name);

// Checks the status and OpenAI error body (its code, and a message) of `response`.
void check_error(const std::string& response, int status, const std::string& code);

// The value of the Prometheus metric `name` from GET /metrics (BOOST_REQUIREs that it is there).
double metric(int port, const std::string& name);
// Whether that metric reaches `value` within `timeout_s` (read every 50 ms; stretched under
// GPTVK_VALIDATION_GPU: tests/support/time_limits.hpp).
bool metric_becomes(int port, const std::string& name, double value, double timeout_s = 30);

}  // namespace gptvk::test
