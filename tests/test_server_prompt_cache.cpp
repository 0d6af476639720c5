// `gpt-vk serve`'s prompt cache end to end on the bundled model: a prompt that begins with
// whole --prefill-chunk chunks of the slot's last prompt skips them, says so in
// usage.prompt_tokens_details.cached_tokens and /metrics, and answers exactly what the
// library's Generator makes for it alone (over a model of the same chunk size); a request's
// n choices run their prompt once; with --no-prompt-cache nothing is kept.
#include <httplib.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"
#include "runtime/generator.hpp"
#include "tests/support/raw_http.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

const fs::path kConfig = fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml";
constexpr uint32_t kChunk = 16;

json complete(int port, const std::vector<uint32_t>& prompt) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120, 0);
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}};
  auto r = cli.Post("/v1/completions", body.dump(), "application/json");
  BOOST_REQUIRE_MESSAGE(r, "no HTTP response");
  BOOST_REQUIRE_MESSAGE(r->status == 200, r->body);
  return json::parse(r->body);
}

// Prompts of whole sentences: the first two share their first 40 tokens, the third is the
// first again.
struct Prompts {
  std::vector<uint32_t> first, second;
};
Prompts prompts(const Tokenizer& tok) {
  Prompts p;
  p.first = tok.encode(
      "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
      "want of a wife. However little known the feelings or views of such a man may be on his first entering "
      "a neighbourhood, this truth is so well fixed in the minds of the surrounding families.");
  BOOST_REQUIRE(p.first.size() > 50u);
  p.second.assign(p.first.begin(), p.first.begin() + 40);
  for (uint32_t id : tok.encode(" My dear Mr. Bennet, said his lady to him one day, have you heard?")) p.second.push_back(id);
  return p;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(server_prompt_cache, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(kept_chunks_are_skipped_and_the_answers_equal_the_library) {
  const ModelConfig cfg = load_config(kConfig.string());
  const Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  const Prompts p = prompts(tok);
  std::vector<json> answers;
  {
    test::ServerProcess server({"--parallel", "1", "--prefill-chunk", std::to_string(kChunk)});
    for (const auto* prompt : {&p.first, &p.second, &p.first}) answers.push_back(complete(server.port(), *prompt));
    BOOST_TEST(test::metric(server.port(), "gptvk_prompt_tokens_cached_total") == 32 + 32);
    BOOST_TEST(server.stderr_text().find("validation") == std::string::npos, server.stderr_text());
  }
  // 40 shared tokens hold two whole chunks; the first prompt again finds the second's
  // first 40 tokens in the slot, the same two chunks.
  const uint32_t want_cached[] = {0, 32, 32};
  const std::vector<uint32_t>* asked[] = {&p.first, &p.second, &p.first};
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST_INFO("request " << i);
    const json& usage = answers[i]["usage"];
    BOOST_TEST(usage["prompt_tokens"] == asked[i]->size());
    BOOST_TEST(usage["prompt_tokens_details"]["cached_tokens"] == want_cached[i]);
    GenerationOptions o;
    o.sampling.temperature = 0;
    o.max_tokens = 12;
    o.logprobs = 2;
    Generator gen(lone, tok);
    gen.start(*asked[i], o);
    while (!gen.finished()) gen.next();
    const json& choice = answers[i]["choices"][0];
    BOOST_TEST(choice["text"].get<std::string>() == gen.text());
    const json& lp = choice["logprobs"]["token_logprobs"];
    BOOST_REQUIRE(lp.size() == gen.logprobs().size());
    for (size_t k = 0; k < lp.size(); ++k) BOOST_TEST(lp[k].get<float>() == gen.logprobs()[k].logprob);  // bit for bit
  }
}

// A request's n choices share one prompt: the first choice runs its chunks, the others copy
// its three whole chunks (54 of its tokens before the last) and join its last chunk as
// twins. Each choice equals that of the same request on a server that runs the choices one
// by one in one slot without the cache.
BOOST_AUTO_TEST_CASE(n_choices_run_their_prompt_once) {
  const ModelConfig cfg = load_config(kConfig.string());
  const Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  const Prompts p = prompts(tok);
  BOOST_REQUIRE(p.first.size() > 48u && p.first.size() <= 64u);
  const json body = {{"prompt", p.first}, {"n", 4},      {"max_tokens", 8},
                     {"temperature", 0.9}, {"seed", 11}, {"logprobs", 2}};
  auto ask = [&](const std::vector<std::string>& flags, bool shared) {
    test::ServerProcess server(flags);
    httplib::Client cli("127.0.0.1", server.port());
    cli.set_read_timeout(120, 0);
    auto r = cli.Post("/v1/completions", body.dump(), "application/json");
    BOOST_REQUIRE_MESSAGE(r && r->status == 200, (r ? r->body : "no HTTP response"));
    BOOST_TEST(test::metric(server.port(), "gptvk_twin_prompts_total") == (shared ? 3 : 0));
    BOOST_TEST(test::metric(server.port(), "gptvk_prompt_tokens_copied_total") == (shared ? 3 * 48 : 0));
    return json::parse(r->body);
  };
  const std::string chunk = std::to_string(kChunk);
  const json together = ask({"--parallel", "4", "--prefill-chunk", chunk}, true);
  const json one_by_one = ask({"--parallel", "1", "--prefill-chunk", chunk, "--no-prompt-cache"}, false);
  BOOST_REQUIRE(together["choices"].size() == 4u);
  BOOST_REQUIRE(one_by_one["choices"].size() == 4u);
  for (const json& a : together["choices"])
    for (const json& b : one_by_one["choices"])
      if (a["index"] == b["index"]) {
        BOOST_TEST_INFO("choice " << a["index"]);
        BOOST_TEST(a["text"] == b["text"]);
        BOOST_TEST(a["logprobs"]["token_logprobs"] == b["logprobs"]["token_logprobs"]);  // bit for bit
      }
}

BOOST_AUTO_TEST_CASE(no_prompt_cache_keeps_nothing) {
  const ModelConfig cfg = load_config(kConfig.string());
  const Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  const Prompts p = prompts(tok);
  test::ServerProcess server({"--parallel", "1", "--prefill-chunk", std::to_string(kChunk), "--no-prompt-cache"});
  const json a = complete(server.port(), p.first), b = complete(server.port(), p.first);
  BOOST_TEST(b["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
  BOOST_TEST(b["choices"][0]["text"] == a["choices"][0]["text"]);
  BOOST_TEST(test::metric(server.port(), "gptvk_prompt_tokens_cached_total") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
