// `gpt-vk serve`'s streamed completions against the same requests unstreamed, on the bundled
// model: stream_options.include_usage's chunks, and the text of the chunks joined, which
// must be the plain response's also where a token-id prompt ends inside a UTF-8 character.
#include <httplib.h>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/server_process.hpp"

using json = nlohmann::json;
using namespace gptvk;

namespace {

test::ServerProcess& shared_server() {
  static test::ServerProcess server({"--parallel", "2"});
  return server;
}

httplib::Result post(const json& body) {
  httplib::Client cli("127.0.0.1", shared_server().port());
  cli.set_read_timeout(60, 0);
  return cli.Post("/v1/completions", body.dump(), "application/json");
}

json post_json(const json& body) {
  auto r = post(body);
  BOOST_REQUIRE(r);
  BOOST_TEST_INFO("body: " << r->body);
  BOOST_REQUIRE(r->status == 200);
  return json::parse(r->body);
}

// The request streamed: its events' JSON, in order, and the whole body.
struct Events {
  std::vector<json> events;
  std::string body;
};
Events post_stream(json body) {
  body["stream"] = true;
  auto r = post(body);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE_MESSAGE(r->status == 200, r->body);
  Events e{{}, r->body};
  for (size_t at = 0; (at = r->body.find("data: {", at)) != std::string::npos; ++at)
    e.events.push_back(json::parse(r->body.substr(at + 6, r->body.find("\n\n", at) - at - 6)));
  return e;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(server_streams)

// With stream_options.include_usage, as OpenAI's: every chunk carries "usage": null, and one
// more chunk before [DONE] has no choices and the usage of the same request unstreamed.
BOOST_AUTO_TEST_CASE(include_usage_chunks) {
  json req{{"prompt", "It was a fine morning"}, {"max_tokens", 5}, {"temperature", 0}};
  const json plain = post_json(req);
  req["stream_options"] = {{"include_usage", true}};
  const Events s = post_stream(req);
  BOOST_REQUIRE(s.events.size() >= 2u);
  for (size_t i = 0; i + 1 < s.events.size(); ++i)
    BOOST_TEST((s.events[i].contains("usage") && s.events[i]["usage"].is_null()));
  BOOST_TEST(s.events.back()["choices"].empty());
  // The same counts, except that the prompt ran just before: an exact hit of the prompt
  // cache, every prompt token cached.
  json usage = s.events.back()["usage"];
  BOOST_TEST(usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"]);
  usage["prompt_tokens_details"] = plain["usage"]["prompt_tokens_details"];
  BOOST_TEST(usage == plain["usage"]);
  BOOST_TEST(s.body.ends_with("data: [DONE]\n\n"));
}

// Token 33768 is the first two bytes of 日 (E6 97) and token 98 its last (A5): echoed, the
// prompt "I" + E6 97 is finished by the first generated token. The echo event holds back the
// unfinished character, so the chunks join to the plain text; an echo sent alone would have
// JSON make each half a U+FFFD ("I\uFFFD\uFFFD" against "I日").
BOOST_AUTO_TEST_CASE(an_echoed_prompt_ending_inside_a_character_streams_as_the_plain_text) {
  const json req{{"prompt", {40, 33768}}, {"max_tokens", 3}, {"temperature", 0}, {"echo", true},
                 {"logit_bias", {{"98", 100}}}};
  const std::string plain = post_json(req)["choices"][0]["text"];
  BOOST_TEST(plain.starts_with("I\u65e5"), plain);
  for (const bool with_logprobs : {false, true}) {
    json asked = req;
    if (with_logprobs) asked["logprobs"] = 1;
    std::string joined;
    for (const json& e : post_stream(asked).events) joined += e["choices"][0]["text"].get<std::string>();
    BOOST_TEST(joined == plain, "logprobs " << with_logprobs);
  }
  // max_tokens 0: nothing finishes the character; the last event carries it as it is.
  json none = req;
  none["max_tokens"] = 0;
  std::string joined;
  for (const json& e : post_stream(none).events) joined += e["choices"][0]["text"].get<std::string>();
  BOOST_TEST(joined == post_json(none)["choices"][0]["text"].get<std::string>());
}

BOOST_AUTO_TEST_SUITE_END()
