// server/http_strict.hpp without a server: the chunked-body check gives the same verdict
// however the body's bytes are split between reads (the connection stream hands httplib
// a line byte by byte and data in runs), and each framing error is caught; the head check
// on each rule of RFC 9112 it enforces, and on heads that are fine.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "server/http_strict.hpp"

using gptvk::server::ChunkedBodyCheck;
using gptvk::server::head_problem;

namespace {

struct Verdict {
  std::optional<std::string> error;
  bool done = false;
};

// Feeds `body` in pieces cut at random points (one piece when `pieces` is 1).
Verdict check_body(const std::string& body, std::mt19937& rng, int pieces) {
  ChunkedBodyCheck check;
  Verdict v;
  std::vector<size_t> cuts = {0, body.size()};
  for (int i = 1; i < pieces; ++i) cuts.push_back(rng() % (body.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size() && !v.error; ++i)
    v.error = check.feed(body.data() + cuts[i], cuts[i + 1] - cuts[i]);
  v.done = check.done();
  return v;
}

// A well-framed body of random chunks: sizes with leading zeros or in either case, some
// with an extension.
std::string random_body(std::mt19937& rng) {
  std::string body;
  for (int c = rng() % 5; c > 0; --c) {
    const size_t n = 1 + rng() % 300;
    char size[32];
    std::snprintf(size, sizeof size, rng() % 2 ? "%zx" : "%03zX", n);
    body += size;
    if (rng() % 3 == 0) body += ";name=\"v\"";
    body += "\r\n" + std::string(n, static_cast<char>('a' + rng() % 26)) + "\r\n";
  }
  return body + "0\r\n\r\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(well_framed_bodies_pass_however_they_are_split) {
  std::mt19937 rng(5);
  for (int i = 0; i < 500; ++i) {
    const std::string body = random_body(rng);
    for (int pieces : {1, 2, 7, int(body.size())}) {
      const Verdict v = check_body(body, rng, pieces);
      BOOST_TEST_REQUIRE(!v.error, *v.error << " in " << body);
      BOOST_TEST_REQUIRE(v.done, "not ended: " << body);
    }
  }
}

BOOST_AUTO_TEST_CASE(framing_errors_are_caught_however_they_are_split) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"5\r\nhello0\r\n\r\nGET / HTTP/1.1\r\n\r\n", "chunk data must be followed by CRLF"},
      {"5\r\nhelloXY\r\n0\r\n\r\n", "chunk data must be followed by CRLF"},
      {"5\r\nhello\n0\r\n\r\n", "chunk data must be followed by CRLF"},
      {"0x5\r\nhello\r\n0\r\n\r\n", "more than hex digits"},
      {"5 \r\nhello\r\n0\r\n\r\n", "more than hex digits"},
      {"\r\nhello\r\n0\r\n\r\n", "must start with a hex digit"},
      {"-5\r\nhello\r\n0\r\n\r\n", "must start with a hex digit"},
      {"5\nhello\r\n0\r\n\r\n", "more than hex digits"},
      {"5\r\rhello\r\n0\r\n\r\n", "must end in CRLF"},
      {"5;a\x01\r\nhello\r\n0\r\n\r\n", "control character in a chunk extension"},
      {"1000000000000000\r\n", "more than 15 hex digits"},
      {"5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n", "trailer fields"},
      {"0\r\n\n", "the last chunk must be followed by CRLF"},
  };
  std::mt19937 rng(7);
  for (const auto& [body, why] : bad)
    for (int pieces : {1, 3, int(body.size())}) {
      const Verdict v = check_body(body, rng, pieces);
      BOOST_TEST_REQUIRE(v.error.has_value(), "accepted: " << body);
      BOOST_TEST(v.error->find(why) != std::string::npos, *v.error << " for " << body);
    }
  // Leading zeros do not count towards the 15 digits; a byte after the end is an error.
  BOOST_TEST(!check_body(std::string(40, '0') + "5\r\nhello\r\n0\r\n\r\n", rng, 1).error);
  BOOST_TEST(check_body("0\r\n\r\nx", rng, 1).error.value_or("").find("past the end") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(heads) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"GET / HTTP/1.1\nHost: x\n\n", "LF alone"},
      {"GET / HTTP/1.1\r\nHost: x\n\r\n", "LF alone"},
      {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", "not a token"},
      {"GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", "without a colon"},
      {"GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", "without a name"},
      {"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\n\t2\r\n\r\n", "folded"},
      {"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r2\r\n\r\n", "control character in the value of header A"},
      {std::string("GET / HTTP/1.1\r\nHost: x\r\nA: 1\0002\r\n\r\n", 35), "control character"},
      {"GET / HTTP/1.1\r\n\r\n", "without a Host"},
      {"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", "more than one Host"},
      {"POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n", "Transfer-Encoding on an HTTP/1.0"},
  };
  for (const auto& [head, why] : bad) {
    const auto problem = head_problem(head);
    BOOST_TEST_REQUIRE(problem.has_value(), "accepted: " << head);
    BOOST_TEST(problem->find(why) != std::string::npos, *problem << " for " << head);
  }
  for (const std::string fine :
       {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nA: b\tc d\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n{}\n\n",  // the body is not the head
        "GET / HTTP/1.1\r\nHost: x\r\n"})                                  // not all in: the limits answer
    BOOST_TEST(!head_problem(fine), fine << ": " << head_problem(fine).value_or(""));
}

// A method no route or httplib answers is 501, an HTTP version other than 1.0 and 1.1 is
// 505, each named, where httplib alone would answer a bare 400 "malformed".
BOOST_AUTO_TEST_CASE(unsupported_methods_and_versions) {
  using gptvk::server::unsupported_request_line;
  const std::vector<std::tuple<std::string, int, std::string>> refused = {
      {"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "the method 'TRACE' is not one this server answers"},
      {"get / HTTP/1.1\r\n", 501, "the method 'get'"},
      {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP version 'HTTP/2.0': this server speaks HTTP/1.0 and HTTP/1.1"}};
  for (const auto& [head, status, why] : refused) {
    const auto u = unsupported_request_line(head);
    BOOST_TEST_REQUIRE(u.has_value(), "accepted: " << head);
    BOOST_TEST(u->status == status, head);
    BOOST_TEST(u->why.find(why) == 0u, u->why);
  }
  // Fine, not all in, or malformed (no version, no target): for head_problem and httplib.
  for (const std::string fine : {"GET / HTTP/1.1\r\n", "OPTIONS * HTTP/1.1\r\n", "PATCH /x HTTP/1.0\r\n", "TRACE / HTT",
                                 "GET /health\r\n", "TRACE HTTP/1.1\r\n", "FOO / BAR\r\n"})
    BOOST_TEST(!unsupported_request_line(fine), fine);
}
