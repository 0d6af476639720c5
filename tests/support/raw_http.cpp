#include "tests/support/raw_http.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>

#include "tests/support/time_limits.hpp"

namespace gptvk::test {

namespace {

// The body of a chunked response (`body`: what follows its head) once its last chunk is in.
std::optional<std::string> dechunked(const std::string& body) {
  std::string out;
  size_t at = 0;
  for (;;) {
    const size_t line_end = body.find("\r\n", at);
    if (line_end == std::string::npos) return std::nullopt;
    size_t size = 0;
    try {
      size = std::stoul(body.substr(at, line_end - at), nullptr, 16);
    } catch (const std::exception&) {
      return std::nullopt;  // no chunk size: not a chunked body
    }
    const size_t data = line_end + 2;
    // The last chunk (size 0) ends with an empty line; httplib sends no trailers before it.
    if (size == 0) return body.find("\r\n", data) == std::string::npos ? std::nullopt : std::optional(out);
    if (body.size() < data + size + 2) return std::nullopt;
    out.append(body, data, size);
    at = data + size + 2;
  }
}

bool is_chunked(const std::string& out, size_t head_end) {
  const size_t te = out.find("\r\nTransfer-Encoding: chunked\r\n");
  return te != std::string::npos && te < head_end;
}

}  // namespace

bool whole_response(const std::string& out) {
  const size_t head_end = out.find("\r\n\r\n"), cl = out.find("Content-Length: ");
  if (head_end == std::string::npos) return false;
  if (is_chunked(out, head_end)) return dechunked(out.substr(head_end + 4)).has_value();
  return cl != std::string::npos && cl < head_end && out.size() >= head_end + 4 + std::stoul(out.substr(cl + 16));
}

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int error = errno;
    close(fd);
    throw std::runtime_error("connecting to port " + std::to_string(port) + ": " + std::strerror(error));
  }
  return fd;
}

Received receive(int fd, double deadline_s, bool one_response) {
  Received r;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
  while (std::chrono::steady_clock::now() < end && !(one_response && whole_response(r.text))) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    r.text.append(buf, static_cast<size_t>(n));
  }
  return r;
}

std::string round_trip(int port, const std::string& request, double deadline_s, bool one_response) {
  int fd = connect_to(port);
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out = receive(fd, deadline_s, one_response).text;
  close(fd);
  return out;
}

std::string post_head(const std::string& path, const std::string& headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + headers + "\r\n";
}

std::string post_request(const std::string& path, const std::string& body, const std::string& headers) {
  return post_head(path, headers + "Content-Length: " + std::to_string(body.size()) + "\r\n") + body;
}

int status_of(const std::string& response) {
  return response.rfind("HTTP/1.", 0) == 0 && response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0;
}

nlohmann::json body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  if (at == std::string::npos) return nlohmann::json();
  const std::optional<std::string> body =
      is_chunked(response, at) ? dechunked(response.substr(at + 4)) : response.substr(at + 4);
  return body ? nlohmann::json::parse(*body, nullptr, false) : nlohmann::json();
}

std::optional<std::string> header_of(const std::string& response, const std::string& name) {
  const std::string head = response.substr(0, response.find("\r\n\r\n"));
  const size_t at = head.find("\r\n" + name + ": ");
  if (at == std::string::npos) return std::nullopt;
  const size_t from = at + 4 + name.size();
  return head.substr(from, head.find("\r\n", from) - from);
}

void check_error(const std::string& response, int status, const std::string& code) {
  BOOST_TEST_INFO("response: " << response.substr(0, 400));
  BOOST_TEST(status_of(response) == status);
  const nlohmann::json body = body_of(response);
  BOOST_REQUIRE(body.is_object() && body.contains("error"));
  BOOST_TEST(body["error"]["code"] == code);
  BOOST_TEST(body["error"]["message"].is_string());
}

double metric(int port, const std::string& name) {
  const std::string response = round_trip(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 10.0);
  BOOST_REQUIRE(status_of(response) == 200);
  const auto at = response.find("\n" + name + " ");
  BOOST_REQUIRE(at != std::string::npos);
  return std::stod(response.substr(at + name.size() + 2));
}

bool metric_becomes(int port, const std::string& name, double value, double timeout_s) {
  for (int i = 0; i < time_limit(timeout_s) * 20; ++i) {
    if (metric(port, name) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace gptvk::test
