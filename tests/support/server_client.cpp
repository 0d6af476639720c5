#include "tests/support/server_client.hpp"

#include <boost/test/unit_test.hpp>
#include <stdexcept>

namespace gptvk::test {

using json = nlohmann::ordered_json;

Reply post(int port, const std::string& path, const std::string& body, const httplib::Headers& headers) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120, 0);
  auto r = cli.Post(path.c_str(), headers, body, "application/json");
  // Thrown rather than asserted: client threads call this, and Boost.Test is not thread-safe.
  if (!r) throw std::runtime_error("no HTTP response from " + path + ": " + httplib::to_string(r.error()));
  return {r->status, json::parse(r->body, nullptr, false)};
}

Reply post(int port, const std::string& path, const json& body) { return post(port, path, body.dump()); }

Stream post_stream(int port, const std::string& path, json body, size_t abort_after) {
  body["stream"] = true;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120, 0);
  Stream s;
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.starts_with(':')) continue;  // a comment: the server's keep-alive while nothing comes
      if (!event.starts_with("data: ")) throw std::runtime_error("a stream event without data: " + event);
      if (event == "data: [DONE]") s.done = true;
      else s.events.push_back(json::parse(event.substr(6)));
    }
    return abort_after == 0 || s.events.size() < abort_after;
  };
  auto r = cli.send(req);
  if (r) s.status = r->status;
  return s;
}

void check_error(const Reply& r, int status, const std::string& param) {
  BOOST_TEST_INFO("body: " << r.body.dump());
  BOOST_TEST(r.status == status);
  BOOST_REQUIRE(r.body.is_object() && r.body.contains("error"));
  const json& e = r.body["error"];
  BOOST_TEST((e["message"].is_string() && !e["message"].get<std::string>().empty()));
  BOOST_TEST(e["type"].is_string());
  BOOST_TEST(e.contains("code"));
  if (!param.empty()) BOOST_TEST(e["param"] == param);
}

}  // namespace gptvk::test
