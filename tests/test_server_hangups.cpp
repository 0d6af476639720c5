// Clients that hang up while their completion waits or runs: their sequences are cancelled
// and their slots and queue places freed, a non-streamed one through the failed writes of
// its heartbeats, a streamed one waiting in the queue through its keep-alive comments.
// `gpt-vk serve` on the bundled model over raw loopback sockets; every read has a deadline.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/client_thread.hpp"
#include "tests/support/raw_http.hpp"
#include "tests/support/server_process.hpp"

using json = nlohmann::json;
using namespace gptvk;
using namespace gptvk::test;

namespace {

const char* kPrompt = "It was a fine morning, and";

// The answer to a completion request, which must be a 200 (read whole, chunked or not).
json post_json(int port, const json& body) {
  const std::string r = round_trip(port, post_request("/v1/completions", body.dump()), 120.0);
  BOOST_TEST_INFO("response: " << r.substr(0, 400));
  BOOST_REQUIRE(status_of(r) == 200);
  return body_of(r);
}

// Sends `request` (a completion of 64 sequences x 240 tokens, the slot and every queue
// place, ~15 s of the bundled model), hangs up 300 ms later, and checks that the slot and
// the queue are free within 10 s rather than at the end of the work.
void hang_up_and_expect_the_slot_freed(int port, const std::string& request) {
  const double before = metric(port, "gptvk_generated_tokens_total");
  const int fd = connect_to(port);
  BOOST_REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  // Admitted and running: a request refused or never started would leave the slot free
  // without any cancel.
  BOOST_REQUIRE(metric_becomes(port, "gptvk_active_sequences", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  close(fd);
  bool freed = false;
  for (int i = 0; i < 200 && !freed; ++i) {  // at most 10 s
    freed = metric(port, "gptvk_active_sequences") == 0 && metric(port, "gptvk_queue_depth") == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Without the cancel the slot is busy for the whole 64 x 240 tokens (~15 s on lavapipe),
  // unless the device decodes them all before the hang-up can be seen, which says nothing.
  const double generated = metric(port, "gptvk_generated_tokens_total") - before;
  BOOST_TEST(generated > 0);
  if (generated < 64 * 240) BOOST_TEST(freed);
  else BOOST_TEST_MESSAGE("this device made all 64 x 240 tokens before the hang-up was seen; nothing to check");
}

// 4 prompts x n = 16, 240 tokens each with <|endoftext|> barred, so that every sequence runs
// its 240 tokens.
json long_request() {
  return json{{"prompt", std::vector<std::string>(4, kPrompt)},
              {"max_tokens", 240},
              {"temperature", 0.9},
              {"seed", 3},
              {"logit_bias", {{"50256", -100}}},
              {"n", 16}};
}

// One prompt's 3 x 240 tokens, one after another: ~4 s on lavapipe, past the 2 s plain wait.
json three_choices() {
  json req = long_request();
  req["prompt"] = kPrompt;
  req["n"] = 3;
  return req;
}

// `request` with HTTP/1.0 in its request line.
std::string as_http_1_0(std::string request) { return request.replace(request.find("HTTP/1.1"), 8, "HTTP/1.0"); }

}  // namespace

BOOST_AUTO_TEST_SUITE(server_hangups)

// A non-streamed request that outlasts the plain wait goes out chunked, JSON after spaces;
// when its client hangs up, the failed writes cancel it rather than let its sequences run to
// the end holding the slot and the queue.
BOOST_AUTO_TEST_CASE(a_non_streamed_client_that_hangs_up_frees_its_slot) {
  test::ServerProcess server({"--parallel", "1", "--queue", "64"});
  const int port = server.port();
  // First, a request that outlasts the plain wait is answered whole.
  const json done = post_json(port, three_choices());
  BOOST_TEST(done["choices"].size() == 3u);
  BOOST_TEST(done["usage"]["completion_tokens"] == 3 * 240);
  // Compression allowed, as browsers allow it: a compressor must not hold the one-byte
  // heartbeats back, or no write fails and the slot runs to the end.
  hang_up_and_expect_the_slot_freed(port, post_request("/v1/completions", long_request().dump(), "Accept-Encoding: br, gzip\r\n"));
}

// HTTP/1.0 has no chunked encoding: a long answer's spaces and JSON end with the connection.
// A client that hangs up fails a write as over HTTP/1.1; one that only shuts its sending
// side after the request (nc -N, some proxies) still reads the whole answer (it got an
// empty 200 when the server took the half-close for a hang-up).
BOOST_AUTO_TEST_CASE(an_http_1_0_client_that_hangs_up_on_a_non_streamed_request_frees_its_slot) {
  test::ServerProcess server({"--parallel", "1", "--queue", "64"});
  const int port = server.port();
  const std::string request = as_http_1_0(post_request("/v1/completions", three_choices().dump()));
  const int fd = connect_to(port);
  BOOST_REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  shutdown(fd, SHUT_WR);
  const Received r = receive(fd, 120.0, false);
  close(fd);
  BOOST_TEST_INFO("response: " << r.text.substr(0, 400));
  BOOST_TEST(r.closed);
  BOOST_REQUIRE(status_of(r.text) == 200);
  if (header_of(r.text, "Content-Length"))  // answered within the plain wait: the half-close was never looked at
    BOOST_TEST_MESSAGE("this device answered within 2 s; the half-close is not exercised");
  BOOST_TEST(body_of(r.text)["usage"]["completion_tokens"] == 3 * 240);
  hang_up_and_expect_the_slot_freed(port, as_http_1_0(post_request("/v1/completions", long_request().dump())));
}

// A streamed request whose client hangs up while it waits in the queue gives its place back
// (an SSE comment each second finds the client gone) and never runs, rather than hold the
// place, others getting 429, and then a slot, until its first token fails to write.
BOOST_AUTO_TEST_CASE(a_queued_stream_whose_client_hangs_up_never_runs) {
  ServerProcess server({"--parallel", "1", "--queue", "8"});
  const int port = server.port();
  // Four sequences of 200 tokens (<|endoftext|> barred) one after another: seconds of work.
  json busy{{"prompt", kPrompt}, {"max_tokens", 200}, {"temperature", 0.9}, {"seed", 1},
            {"logit_bias", {{"50256", -100}}}, {"n", 4}};
  std::chrono::steady_clock::time_point busy_done;
  std::string busy_answer;
  test::ClientThread running([&] {
    // Minutes where the device is slow (the forced-limits run on a loaded CI machine).
    busy_answer = round_trip(port, post_request("/v1/completions", busy.dump()), 600.0);
    busy_done = std::chrono::steady_clock::now();
  });
  BOOST_REQUIRE(metric_becomes(port, "gptvk_queue_depth", 3));
  json queued{{"prompt", kPrompt}, {"max_tokens", 20}, {"stream", true}};
  const int fd = connect_to(port);
  const std::string request = post_request("/v1/completions", queued.dump());
  BOOST_REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  // Behind the three waiting sequences, unless a fast device has run one of them meanwhile.
  const bool behind_them = metric_becomes(port, "gptvk_queue_depth", 4, 10);
  close(fd);
  const auto closed = std::chrono::steady_clock::now();
  running.join();
  BOOST_TEST(metric_becomes(port, "gptvk_active_sequences", 0));
  BOOST_TEST(metric(port, "gptvk_queue_depth") == 0);
  // The hang-up shows at the second comment's write, ~2 s on: a device that ran the four
  // sequences sooner leaves nothing to check.
  const double busy_for = std::chrono::duration<double>(busy_done - closed).count();
  if (busy_for < 3.0) {
    BOOST_TEST_MESSAGE("the four sequences finished " << busy_for << " s after the hang-up; nothing to check");
    return;
  }
  BOOST_TEST(behind_them);
  BOOST_TEST_REQUIRE(status_of(busy_answer) == 200);
  if (!whole_response(busy_answer)) {  // the client gave up on them: their count is cut short too
    BOOST_TEST_MESSAGE("the four sequences did not finish within 600 s; nothing to count");
    return;
  }
  // Every token made was the four's: the stream whose client left never ran.
  BOOST_TEST(body_of(busy_answer)["usage"]["completion_tokens"] == 4 * 200);
  BOOST_TEST(metric(port, "gptvk_generated_tokens_total") == 4 * 200);
}

BOOST_AUTO_TEST_SUITE_END()
