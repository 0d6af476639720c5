// server/openai_request.hpp without a server: the request bodies of /v1/completions and
// /v1/chat/completions turned into what the scheduler runs (prompts as the bundled
// tokenizer's ids, the sampling controls as given), and the fields this server cannot
// honour refused with OpenAI's error fields (status, param, code) rather than ignored.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include "models/config.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "server/openai_request.hpp"

namespace fs = std::filesystem;
using namespace gptvk;
using server::ApiError;
using server::json;

namespace {

constexpr uint32_t kContext = 256;  // the bundled model's

const Tokenizer& bundled_tokenizer() {
  static const Tokenizer tok = [] {
    ModelConfig cfg = load_config((fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml").string());
    return Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  }();
  return tok;
}

server::CompletionRequest completion(const json& body) {
  return server::parse_completion_request(body, bundled_tokenizer(), kContext);
}

server::CompletionRequest chat(json body) {
  body["messages"] = json::array({{{"role", "user"}, {"content", "Hello"}}});
  return server::parse_chat_request(body, bundled_tokenizer(), kContext);
}

// `parse` throws an ApiError with this status, param and code.
template <class Parse>
void check_refused(Parse parse, int status, const std::string& param, const std::string& code) {
  try {
    parse();
    BOOST_ERROR("no error for param " << param);
  } catch (const ApiError& e) {
    BOOST_TEST(e.status == status);
    BOOST_TEST(e.param == param);
    BOOST_TEST(e.code == code);
    // OpenAI's own wording for a request past the context names no field; the others do.
    if (code != "context_length_exceeded")
      BOOST_TEST(std::string(e.what()).find("'" + param + "'") != std::string::npos, e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(prompts_in_every_shape_become_the_tokenizers_ids) {
  const auto hello = bundled_tokenizer().encode("Hello world");
  BOOST_TEST_REQUIRE(hello.size() >= 2u);
  const json ids(hello);
  auto one = completion({{"prompt", "Hello world"}});
  auto as_ids = completion({{"prompt", ids}});
  auto several = completion({{"prompt", {"Hello world", "Hello world"}}});
  auto lists = completion({{"prompt", {ids, {hello[0]}}}});
  BOOST_TEST(one.prompts.size() == 1u);
  BOOST_TEST(one.prompts[0] == hello);
  BOOST_TEST(as_ids.prompts[0] == hello);
  BOOST_TEST(as_ids.prompt_texts[0] == "Hello world");  // what echo prepends
  BOOST_TEST(several.prompts.size() == 2u);
  BOOST_TEST(several.prompts[1] == hello);
  BOOST_TEST(lists.prompts.size() == 2u);
  BOOST_TEST(lists.prompts[1] == std::vector<uint32_t>{hello[0]});
  // Token ids are integers as JSON Schema counts them (15496.0, 1.5496e4), as the integer fields are.
  const auto floats = completion(json::parse(R"({"prompt": [15496.0, 9.95e2]})"));
  BOOST_TEST(floats.prompts[0] == hello);
  check_refused([] { completion(json::parse(R"({"prompt": [15496.5]})")); }, 400, "prompt", "invalid_type");
  check_refused([] { completion(json::parse(R"({"prompt": [5.0e4, 1e300]})")); }, 400, "prompt", "invalid_value");
  // An empty prompt starts from <|endoftext|>, as GPT-2's documents do.
  BOOST_TEST(completion({{"prompt", ""}}).prompts[0] == std::vector<uint32_t>{*bundled_tokenizer().eot_id()});
  // echo shows that token, as for a prompt of its id, so that the echoed tokens are the
  // echoed text (not text "" with token "<|endoftext|>" at offset 0).
  BOOST_TEST(completion({{"prompt", ""}}).prompt_texts[0] == "<|endoftext|>");
  BOOST_TEST(completion({{"prompt", {50256}}}).prompt_texts[0] == "<|endoftext|>");
}

// A model file that asks for its start token before every text (GGUF add_bos_token): text
// prompts and the chat transcript begin with it, as llama-server's do; token-id prompts are
// taken as given; echo shows it, as it does an empty prompt's.
BOOST_AUTO_TEST_CASE(text_prompts_take_the_start_token_the_file_asks_for) {
  ModelConfig cfg = load_config((fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml").string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  const uint32_t start = 464;  // "The", as a file's own bos id may be anything
  tok.set_document_ids(start, {}, true);
  const auto hello = tok.encode("Hello world");
  std::vector<uint32_t> started = {start};
  started.insert(started.end(), hello.begin(), hello.end());
  const auto r = server::parse_completion_request({{"prompt", {"Hello world", json(hello)}}}, tok, kContext);
  BOOST_TEST(r.prompts[0] == started);
  BOOST_TEST(r.prompts[1] == hello);
  BOOST_TEST(r.prompt_texts[0] == "TheHello world");
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}};
  BOOST_TEST(server::parse_chat_request(body, tok, kContext).prompts[0][0] == start);
  tok.set_document_ids(start, {}, false);
  BOOST_TEST(server::parse_completion_request({{"prompt", "Hello world"}}, tok, kContext).prompts[0] == hello);
}

// GPT-1's tokens do not give back the text they came from (lowercased, words split): the
// prompt text echo shows, and text_offset counts in, is its tokens' text, as for GPT-2 (whose
// tokens give back the exact text).
BOOST_AUTO_TEST_CASE(a_gpt1_prompt_echoes_as_its_tokens_text) {
  const std::string dir = GPTVK_SOURCE_DIR "/tests/fixtures/tokenizer/gpt1/";
  const Tokenizer gpt1 = Tokenizer::load(dir + "vocab.json", dir + "merges.txt");
  const auto r = server::parse_completion_request({{"prompt", {"The Truth,  SAID", "x"}}}, gpt1, kContext);
  BOOST_TEST(r.prompt_texts[0] == "the truth , said ");
  BOOST_TEST(r.prompt_texts[0] == gpt1.decode(r.prompts[0]));
  BOOST_TEST(completion({{"prompt", "Hello  world!"}}).prompt_texts[0] == "Hello  world!");
  BOOST_CHECK_EXCEPTION(server::parse_completion_request({{"prompt", ""}}, gpt1, kContext), ApiError,
                        [](const ApiError& e) { return e.status == 400 && std::string(e.what()).find("<|endoftext|>") != std::string::npos; });
}

BOOST_AUTO_TEST_CASE(sampling_fields_reach_the_generation_options) {
  auto r = completion({{"prompt", "a"}, {"max_tokens", 7}, {"temperature", 0.25}, {"top_p", 0.5}, {"top_k", 9},
                       {"seed", 42}, {"stop", "\n"}, {"n", 3}, {"presence_penalty", 0.5}, {"min_p", 0.1},
                       {"logit_bias", {{"13", -100}}}, {"logprobs", 2}});
  const auto& o = r.sampling.options;
  BOOST_TEST(o.max_tokens == 7u);
  BOOST_TEST(o.sampling.temperature == 0.25f);
  BOOST_TEST(o.sampling.top_p == 0.5f);
  BOOST_TEST(o.sampling.top_k == 9u);
  // top_k 0 or below is off, as llama.cpp's server and vLLM (-1) take it.
  BOOST_TEST(completion({{"prompt", "a"}, {"top_k", -1}}).sampling.options.sampling.top_k == 0u);
  BOOST_TEST(completion({{"prompt", "a"}, {"top_k", -40}}).sampling.options.sampling.top_k == 0u);
  BOOST_TEST(o.sampling.presence_penalty == 0.5f);
  BOOST_TEST(o.sampling.min_p == 0.1f);
  BOOST_TEST(o.sampling.logit_bias.size() == 1u);
  BOOST_TEST(o.sampling.logit_bias[0].first == 13u);
  BOOST_TEST(o.sampling.logit_bias[0].second == -100.0f);
  BOOST_TEST(o.stop == std::vector<std::string>{"\n"});
  BOOST_TEST(r.n == 3u);
  BOOST_TEST(*r.logprobs == 2u);
  // Choice i samples with seed + i, so n choices differ and each is reproducible alone.
  BOOST_TEST(server::choice_seed(r.sampling, 0) == 42u);
  BOOST_TEST(server::choice_seed(r.sampling, 2) == 44u);
  // Without max_tokens, OpenAI's 16 for completions; chat runs to the context.
  BOOST_TEST(completion({{"prompt", "a"}}).sampling.options.max_tokens == 16u);
  auto c = chat(json::object());
  BOOST_TEST(c.sampling.options.max_tokens + c.prompts[0].size() == kContext);
  BOOST_TEST(chat({{"max_completion_tokens", 7}}).sampling.options.max_tokens == 7u);
  // Both sent: the newer name wins (as in vLLM; OpenAI deprecated max_tokens for it), and
  // each is checked, the losing one too.
  BOOST_TEST(chat({{"max_tokens", 2}, {"max_completion_tokens", 7}}).sampling.options.max_tokens == 7u);
  check_refused([] { chat({{"max_tokens", 2}, {"max_completion_tokens", -5}}); }, 400, "max_completion_tokens",
                "invalid_value");
  check_refused([] { chat({{"max_tokens", -2}, {"max_completion_tokens", 5}}); }, 400, "max_tokens", "invalid_value");
}

BOOST_AUTO_TEST_CASE(completion_fields_this_server_cannot_honour_are_refused) {
  check_refused([] { completion({{"prompt", "a"}, {"suffix", "b"}}); }, 400, "suffix", "unsupported_parameter");
  check_refused([] { completion({{"prompt", "a"}, {"best_of", 2}}); }, 400, "best_of", "unsupported_parameter");
  // Their neutral values pass: an empty suffix, best_of equal to n.
  BOOST_CHECK_NO_THROW(completion({{"prompt", "a"}, {"suffix", ""}, {"best_of", 2}, {"n", 2}}));
  // 200 prompt tokens and 100 more do not fit the bundled model's 256.
  check_refused([] { completion({{"prompt", std::vector<uint32_t>(200, 13)}, {"max_tokens", 100}}); }, 400, "max_tokens",
                "context_length_exceeded");
  BOOST_CHECK_NO_THROW(completion({{"prompt", std::vector<uint32_t>(200, 13)}, {"max_tokens", 56}}));
  // A prompt that leaves no room for one token is the prompt's fault, whatever max_tokens
  // says (chat's, when not sent, is the room left): the error names the prompt, not max_tokens.
  check_refused([] { completion({{"prompt", std::vector<uint32_t>(256, 13)}, {"max_tokens", 1}}); }, 400, "prompt",
                "context_length_exceeded");
  std::string words;
  for (int i = 0; i < 300; ++i) words += " x";
  const json messages = {{{"role", "user"}, {"content", words}}};
  check_refused([&] { server::parse_chat_request({{"messages", messages}}, bundled_tokenizer(), kContext); }, 400,
                "messages", "context_length_exceeded");
}

BOOST_AUTO_TEST_CASE(tool_calls_and_structured_output_are_refused_not_ignored) {
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::object()}}}};
  check_refused([&] { chat({{"tools", {tool}}}); }, 400, "tools", "unsupported_parameter");
  check_refused([&] { chat({{"functions", {tool["function"]}}}); }, 400, "functions", "unsupported_parameter");
  check_refused([] { chat({{"tool_choice", "auto"}}); }, 400, "tool_choice", "unsupported_parameter");
  check_refused([] { chat({{"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}}); }, 400,
                "tool_choice", "unsupported_parameter");
  check_refused([] { chat({{"function_call", "auto"}}); }, 400, "function_call", "unsupported_parameter");
  check_refused([] { chat({{"response_format", {{"type", "json_object"}}}}); }, 400, "response_format",
                "unsupported_parameter");
  check_refused([] { chat({{"response_format", {{"type", "json_schema"}, {"json_schema", json::object()}}}}); }, 400,
                "response_format", "unsupported_parameter");
  check_refused([] { chat({{"response_format", "json"}}); }, 400, "response_format", "invalid_type");
  // What asks for none of them passes: no tools, tool_choice "none", plain text, nulls.
  BOOST_CHECK_NO_THROW(chat({{"tools", json::array()}, {"tool_choice", "none"}, {"response_format", {{"type", "text"}}},
                             {"functions", nullptr}, {"function_call", nullptr}}));
}

BOOST_AUTO_TEST_CASE(chat_renders_the_documented_transcript) {
  const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}, {{"type", "text"}, {"text", "!"}}}}},
                         {{"role", "assistant"}, {"content", "Hello."}},
                         {{"role", "user"}, {"content", "Bye"}}};
  BOOST_TEST(server::chat_transcript(messages) == "Be brief.\n\nUser: Hi!\nAssistant: Hello.\nUser: Bye\nAssistant:");
  auto r = server::parse_chat_request({{"messages", messages}, {"max_tokens", 4}}, bundled_tokenizer(), kContext);
  BOOST_TEST(r.prompts[0] == bundled_tokenizer().encode(server::chat_transcript(messages)));
  // The model's turn ends where the next user turn would begin.
  BOOST_TEST(r.sampling.options.stop == std::vector<std::string>{"\nUser:"});
  // The reply begins after the space that follows "Assistant:" (TextStream drops it).
  BOOST_TEST(r.sampling.options.drop_leading_space);
  BOOST_TEST(!server::parse_completion_request({{"prompt", "Hi"}}, bundled_tokenizer(), kContext)
                  .sampling.options.drop_leading_space);
}

// Content parts of the wrong shape are the request's error (param "messages"), not a JSON
// library's (a part's "type" that is not a string must not escape as json::type_error:
// fuzz_openai, tests/fuzz/regressions/openai/).
BOOST_AUTO_TEST_CASE(malformed_content_parts_are_refused_naming_messages) {
  for (const json& part : {json{{"type", 5}, {"text", "x"}}, json{{"text", "x"}}, json{{"type", "text"}},
                           json{{"type", "image_url"}, {"text", "x"}}, json{{"type", "text"}, {"text", 7}}, json("x")}) {
    const json messages = {{{"role", "user"}, {"content", {part}}}};
    check_refused([&] { server::parse_chat_request({{"messages", messages}}, bundled_tokenizer(), kContext); }, 400,
                  "messages", "invalid_type");
  }
}

// A prompt's or a message's text is read as text: <|endoftext|> written in it is its
// characters' BPE pieces, never token 50256 (which only a token-id prompt sends).
BOOST_AUTO_TEST_CASE(special_tokens_written_in_text_stay_text) {
  const Tokenizer& tok = bundled_tokenizer();
  const std::vector<uint32_t> as_text = tok.encode("a<|endoftext|>b");
  BOOST_TEST(std::count(as_text.begin(), as_text.end(), 50256u) == 0);
  BOOST_TEST(completion({{"prompt", "a<|endoftext|>b"}}).prompts.at(0) == as_text, boost::test_tools::per_element());
  BOOST_TEST(completion({{"prompt", {50256}}}).prompts.at(0) == std::vector<uint32_t>{50256});
  const json messages = json::array({{{"role", "user"}, {"content", "<|endoftext|>"}}});
  const auto c = server::parse_chat_request({{"messages", messages}}, tok, kContext);
  BOOST_TEST(std::count(c.prompts.at(0).begin(), c.prompts.at(0).end(), 50256u) == 0);
}

// An insertion-ordered object costs the square of its keys to parse: a body's objects are
// held to 1024 keys (in a 1 MiB body, 100k keys in one object took 30 s of a core).
BOOST_AUTO_TEST_CASE(bodies_with_objects_of_too_many_keys_are_refused) {
  auto object_of = [](size_t keys) {
    std::string s = "{";
    for (size_t i = 0; i < keys; ++i) s += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
    return s + "}";
  };
  BOOST_TEST(server::parse_body("{\"logit_bias\":" + object_of(1024) + "}")["logit_bias"].size() == 1024u);
  for (const std::string& body : {object_of(1025), "{\"a\":[1,{\"x\":" + object_of(1025) + "}]}"}) {
    try {
      server::parse_body(body);
      BOOST_ERROR("no error for " << body.size() << " bytes");
    } catch (const ApiError& e) {
      BOOST_TEST(e.status == 400);
      BOOST_TEST(std::string(e.what()) == "the request body has an object of more than 1024 keys");
    }
  }
  BOOST_CHECK_THROW(server::parse_body("[1]"), ApiError);
  BOOST_CHECK_THROW(server::parse_body("{\"a\":"), ApiError);
}

// nlohmann::json prints and copies a document recursively: a body of a few hundred thousand
// "[" would overflow the stack of whatever printed it. Bodies nest at most 100 levels.
BOOST_AUTO_TEST_CASE(bodies_nested_past_100_levels_are_refused) {
  auto nested = [](size_t levels) {  // the body's object and levels - 1 arrays inside it
    return "{\"user\":" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  BOOST_TEST(server::parse_body(nested(100)).contains("user"));
  for (size_t levels : {101, 300000}) {
    try {
      server::parse_body(nested(levels));
      BOOST_ERROR("no error for " << levels << " levels");
    } catch (const ApiError& e) {
      BOOST_TEST(e.status == 400);
      BOOST_TEST(std::string(e.what()) == "the request body nests deeper than 100 levels");
    }
  }
}

// Counting keys must not make a body's many small objects cost the square of their number
// (a parser callback did: 100k {} in an array took 2.8 s, 350k 35 s). The time for
// 200k {} against as many numbers, measured side by side; linear parsing keeps it a few
// times over (objects are allocated), quadratic put it in the hundreds.
BOOST_AUTO_TEST_CASE(many_small_objects_parse_in_linear_time) {
  auto array_of = [](const std::string& item, size_t count) {
    std::string s = "{\"x\":[";
    for (size_t i = 0; i < count; ++i) s += (i ? "," : "") + item;
    return s + "]}";
  };
  auto seconds = [](const std::string& body) {
    const auto start = std::chrono::steady_clock::now();
    BOOST_TEST(server::parse_body(body)["x"].size() == 200000u);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::string objects = array_of("{}", 200000), numbers = array_of("0", 200000);
  double best_objects = 1e9, best_numbers = 1e9;
  for (int round = 0; round < 3; ++round) {
    best_objects = std::min(best_objects, seconds(objects));
    best_numbers = std::min(best_numbers, seconds(numbers));
  }
  BOOST_TEST(best_objects < 40 * best_numbers, best_objects << " s for the objects, " << best_numbers << " s for the numbers");
}

BOOST_AUTO_TEST_CASE(fields_are_checked_as_openai_names_them) {
  // A token id in plain decimal: "05" beside "5" would be the same token twice.
  check_refused([] { completion({{"prompt", "Hi"}, {"logit_bias", {{"5", 1}, {"05", -100}}}}); }, 400, "logit_bias",
                "invalid_type");
  // A whole number past 64 bits (parsed as a double) is out of range, not of the wrong type.
  check_refused([] { completion(json::parse(R"({"prompt": "Hi", "seed": 18446744073709551616})")); }, 400, "seed",
                "invalid_value");
  check_refused([] { completion({{"prompt", "Hi"}, {"seed", 1.5}}); }, 400, "seed", "invalid_type");
  // A number without a fractional part is an integer (JSON Schema's), however it is written.
  const auto floats = completion(json::parse(R"({"prompt": "Hi", "max_tokens": 2.0, "seed": 1e3, "n": 3.0})"));
  BOOST_TEST(floats.sampling.options.max_tokens == 2u);
  BOOST_TEST(floats.sampling.options.sampling.seed == 1000u);
  BOOST_TEST(floats.n == 3u);
  check_refused([] { completion(json::parse(R"({"prompt": "Hi", "n": 200.0})")); }, 400, "n", "invalid_value");
  check_refused([] { completion(json::parse(R"({"prompt": "Hi", "seed": -9.3e18})")); }, 400, "seed", "invalid_value");
  // The length past the context is named by the field that set it.
  check_refused([] { chat({{"max_completion_tokens", 300}}); }, 400, "max_completion_tokens", "context_length_exceeded");
  check_refused([] { chat({{"max_tokens", 300}}); }, 400, "max_tokens", "context_length_exceeded");
  // Output other than text is refused, not answered with text; "tools" must be an array.
  check_refused([] { chat({{"modalities", {"text", "audio"}}}); }, 400, "modalities", "unsupported_parameter");
  check_refused([] { chat({{"audio", {{"voice", "alloy"}, {"format", "wav"}}}}); }, 400, "audio", "unsupported_parameter");
  check_refused([] { chat({{"tools", "x"}}); }, 400, "tools", "invalid_type");
  BOOST_CHECK_NO_THROW(chat({{"modalities", {"text"}}, {"audio", nullptr}}));
}

// An assistant's refusal part is part of the transcript, as OpenAI accepts it; a user's is not.
BOOST_AUTO_TEST_CASE(an_assistants_refusal_part_is_its_text) {
  const json refusal = {{"type", "refusal"}, {"refusal", "No."}};
  const json messages = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", {refusal}}}};
  BOOST_TEST(server::chat_transcript(messages) == "User: Hi\nAssistant: No.\nAssistant:");
  check_refused([&] { server::chat_transcript({{{"role", "user"}, {"content", {refusal}}}}); }, 400, "messages",
                "invalid_type");
}
