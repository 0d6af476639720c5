// An httplib client for the server tests that speak well-formed HTTP: a JSON POST and its
// parsed answer, a streamed POST's server-sent events, and OpenAI's error body checked.
// (tests/support/raw_http.hpp sends what no client library would.)
#pragma once
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gptvk::test {

struct Reply {
  int status = 0;
  nlohmann::ordered_json body;  // insertion-ordered: top_logprobs keep the server's order
};
// POSTs `body` to 127.0.0.1:port; throws std::runtime_error without an answer within 120 s.
// The helpers here assert nothing themselves, so that client threads (ClientThread) may
// call them: Boost.Test's assertions are for the test's own thread only.
Reply post(int port, const std::string& path, const std::string& body, const httplib::Headers& headers = {});
Reply post(int port, const std::string& path, const nlohmann::ordered_json& body);

// A streamed request's events (the JSON of each `data:` line) and whether `[DONE]` ended it.
struct Stream {
  int status = 0;
  std::vector<nlohmann::ordered_json> events;
  bool done = false;
};
// POSTs `body` with "stream": true; with `abort_after` > 0 the client hangs up after that
// many events. Throws std::runtime_error on an event that is not `data:` or a comment.
Stream post_stream(int port, const std::string& path, nlohmann::ordered_json body, size_t abort_after = 0);

// OpenAI's error body with the status's meaning, naming `param` when it is given.
void check_error(const Reply& r, int status, const std::string& param = "");

}  // namespace gptvk::test
