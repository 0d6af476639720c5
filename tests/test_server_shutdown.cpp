// `gpt-vk serve` starting and stopping: flags, ports and models it refuses (one line each,
// never a hang), SIGTERM beside a client that trickles its request or holds an idle
// keep-alive connection (the server still exits 0, without waiting for them), and requests
// still running when the grace period ends (they end with an OpenAI error, not a
// finish_reason OpenAI does not have). Every socket read has a deadline.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/support/cli_run.hpp"
#include "tests/support/raw_http.hpp"
#include "tests/support/server_process.hpp"

using json = nlohmann::json;
using namespace gptvk;
using namespace gptvk::test;

BOOST_AUTO_TEST_SUITE(server_shutdown)

BOOST_AUTO_TEST_CASE(bad_flags_and_a_taken_port_are_one_line_errors) {
  // Far more slots than the device's memory holds: usage error naming the limit.
  test::CliResult r = test::run_cli({"serve", "--parallel", "1024", "--port", "0"}, {}, 60.0);
  BOOST_TEST_INFO("stderr: " << r.err);
  if (r.exit_code == 2) {
    BOOST_TEST(r.err.find("--parallel 1024 needs about") != std::string::npos);
  } else {  // a device with the memory for them: the server must then be up, not failed
    BOOST_TEST(r.timed_out);
    BOOST_TEST(r.err.find("gpt-vk: listening on http://127.0.0.1:") != std::string::npos);
    BOOST_TEST_MESSAGE("this device holds 1024 slots; the memory check is not exercised");
  }
  test::ServerProcess taken({"--parallel", "1"});
  r = test::run_cli({"serve", "--port", std::to_string(taken.port())}, {}, 120.0);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.err.find("gpt-vk: cannot listen on 127.0.0.1:") == 0);
  BOOST_TEST(r.err.find(": address already in use (--port 0 picks a free port)\n") != std::string::npos);
  r = test::run_cli({"serve", "--port", "70000"}, {}, 30.0);
  BOOST_TEST(r.exit_code == 2);
  // Octal and hex spellings are no port: "0x50" must not be taken as port 80.
  r = test::run_cli({"serve", "--port", "0x50"}, {}, 30.0);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err == "gpt-vk: --port: expected a whole number, got '0x50'\n");
  // A model that fails to open right after the port is bound, before the listening loop
  // begins (where httplib's stop() does nothing): the run must still exit, every time.
  for (int i = 0; i < 10; ++i) {
    r = test::run_cli({"serve", "--port", "0", "--config", "/nonexistent/model.toml"}, {}, 30.0);
    BOOST_TEST(!r.timed_out);
    BOOST_TEST(r.exit_code == 1);
  }
  // Every running or waiting request holds a thread: slots and queue beyond the threads
  // would leave none to answer /health or a 429 once full.
  r = test::run_cli({"serve", "--port", "0", "--parallel", "64", "--queue", "1857"}, {}, 30.0);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err == "gpt-vk: --parallel 64 with --queue 1857 admits more requests than the server has threads for "
                      "(each running or waiting request holds one): at most 1920 in all\n");
  r = test::run_cli({"serve", "--port", "0", "--batch-kernels", "fast"}, {}, 30.0);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err == "gpt-vk: --batch-kernels: fast not in {exact,gemm}\n");
}

// SIGTERM while a client trickles its request (a header line every second, which keeps
// resetting the read timeout): the server still exits 0 within its grace periods, rather
// than wait for that client for as long as it keeps sending.
BOOST_AUTO_TEST_CASE(sigterm_exits_while_a_client_trickles_its_request) {
  test::ServerProcess server({"--parallel", "1"});
  int fd = connect_to(server.port());
  const std::string line = "GET /health HTTP/1.1\r\n";
  BOOST_REQUIRE(send(fd, line.data(), line.size(), MSG_NOSIGNAL) > 0);
  std::atomic<bool> stopped{false};
  std::thread trickle([&] {
    for (int i = 0; i < 60 && !stopped; ++i) {
      (void)!send(fd, "X: y\r\n", 6, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  const int code = server.stop(SIGTERM, 20.0);
  stopped = true;
  trickle.join();
  close(fd);
  BOOST_TEST(code == 0);
}

// SIGINT is Ctrl-C: it stops the server as SIGTERM does, unless the server was started
// ignoring it (`gpt-vk serve &` in a script), where it stays ignored.
BOOST_AUTO_TEST_CASE(sigint_stops_the_server_unless_started_ignored) {
  test::ServerProcess plain({"--parallel", "1"});
  BOOST_TEST(plain.stop(SIGINT, 20.0) == 0);
  BOOST_TEST(plain.stderr_text().find("SIGINT: finishing running requests") != std::string::npos);
  test::ServerProcess ignoring({"--parallel", "1"}, 120.0, true);
  ignoring.signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  BOOST_TEST(ignoring.running());
  const int fd = connect_to(ignoring.port());
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  BOOST_REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0);
  BOOST_TEST(status_of(receive(fd, 3.0, true).text) == 200);
  close(fd);
  BOOST_TEST(ignoring.stop(SIGTERM, 20.0) == 0);
}

// A second signal while the running requests finish exits at once, with code 1 and a line
// saying so, however long --shutdown-grace is (cli/stop_signals.hpp). One slot and 4 x 240
// tokens: the work outlasts both signals on any device.
BOOST_AUTO_TEST_CASE(a_second_signal_during_the_grace_period_exits_at_once) {
  test::ServerProcess server({"--parallel", "1", "--shutdown-grace", "600"});
  const int port = server.port();
  json long_run{{"prompt", "Once upon a time"}, {"max_tokens", 240}, {"n", 4}, {"stream", true},
                {"logit_bias", {{"50256", -100}}}};
  const int fd = connect_to(port);
  const std::string request = post_request("/v1/completions", long_run.dump());
  BOOST_REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0);
  BOOST_REQUIRE(metric_becomes(port, "gptvk_active_sequences", 1));
  server.signal(SIGTERM);
  for (int i = 0; i < 500 && server.stderr_text().find("finishing running requests") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  BOOST_TEST(server.stop(SIGINT, 20.0) == 1);
  close(fd);
  BOOST_TEST_INFO("stderr: " << server.stderr_text());
  BOOST_TEST(server.stderr_text().find("SIGINT again while finishing the running requests: exiting now") !=
             std::string::npos);
}

// SIGTERM beside an idle keep-alive connection: the server exits 0 without waiting out its
// keep-alive timeout: the idle connection's thread must not hold up the exit past the grace
// period, which would then say a client connection was still open.
BOOST_AUTO_TEST_CASE(sigterm_does_not_wait_for_an_idle_keep_alive_connection) {
  test::ServerProcess server({"--parallel", "1"});
  const int fd = connect_to(server.port());
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  BOOST_REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0);
  BOOST_TEST(status_of(receive(fd, 3.0, true).text) == 200);
  const int code = server.stop(SIGTERM, 20.0);
  close(fd);
  BOOST_TEST(code == 0);
  BOOST_TEST(server.stderr_text().find("still open") == std::string::npos);
}

// Past --shutdown-grace, SIGTERM cancels what still runs: a stream gets an OpenAI error
// event before `data: [DONE]`, a plain request an error body (a 503 while its status line is
// still unsent; here, past the 2 s plain wait, in a chunked body left unfinished), and the
// server exits 0. Neither ends with finish_reason "cancelled", which OpenAI's clients do not
// know. One slot and 4 x 240 tokens a request: the work outlasts the signal by far on any device.
BOOST_AUTO_TEST_CASE(requests_cut_by_shutdown_end_with_an_error) {
  test::ServerProcess server({"--parallel", "1", "--shutdown-grace", "0"});
  const int port = server.port();
  json long_run{{"prompt", "Once upon a time"}, {"max_tokens", 240}, {"n", 4}, {"logit_bias", {{"50256", -100}}}};
  const int plain = connect_to(port);
  const std::string plain_request = post_request("/v1/completions", long_run.dump());
  BOOST_REQUIRE(send(plain, plain_request.data(), plain_request.size(), MSG_NOSIGNAL) > 0);
  long_run["stream"] = true;
  const int streamed = connect_to(port);
  const std::string streamed_request = post_request("/v1/completions", long_run.dump());
  BOOST_REQUIRE(send(streamed, streamed_request.data(), streamed_request.size(), MSG_NOSIGNAL) > 0);
  const auto sent = std::chrono::steady_clock::now();
  for (int i = 0; i < 200 && metric(port, "gptvk_queue_depth") < 6; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  // Past the server's 2 s plain wait, the plain answer's 200 has gone out (heartbeat).
  std::this_thread::sleep_until(sent + std::chrono::milliseconds(2500));
  BOOST_TEST(server.stop(SIGTERM, 20.0) == 0);
  const Received plain_answer = receive(plain, 5.0, false), stream_answer = receive(streamed, 5.0, false);
  close(plain);
  close(streamed);
  BOOST_TEST_INFO("plain: " << plain_answer.text.substr(0, 400));
  BOOST_TEST(status_of(plain_answer.text) == 200);
  BOOST_TEST(plain_answer.text.find(R"("code":"shutting_down")") != std::string::npos);
  // After the 200, the error's body is left without its last chunk, so that clients fail
  // the transfer rather than take an error for a completion (the openai client threw
  // nothing and returned an object without `choices`).
  BOOST_TEST(!plain_answer.text.ends_with("\r\n0\r\n\r\n"));
  BOOST_TEST_INFO("stream: " << stream_answer.text.substr(0, 400));
  // One error event for the request's 4 choices, then the end: nothing after the error.
  const std::string error_event = R"(data: {"error":{)";
  const size_t error_at = stream_answer.text.find(error_event);
  BOOST_TEST(error_at != std::string::npos);
  BOOST_TEST(stream_answer.text.find(error_event, error_at + 1) == std::string::npos);
  if (error_at != std::string::npos) {
    const size_t event_end = stream_answer.text.find("\n\n", error_at);
    BOOST_TEST(stream_answer.text.substr(error_at, event_end - error_at).find(R"("code":"shutting_down")") != std::string::npos);
    BOOST_TEST(stream_answer.text.find("data: ", event_end) == stream_answer.text.find("data: [DONE]", event_end));
  }
  BOOST_TEST(stream_answer.text.find("data: [DONE]") != std::string::npos);
  for (const Received* r : {&plain_answer, &stream_answer})
    BOOST_TEST(r->text.find("cancelled") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
