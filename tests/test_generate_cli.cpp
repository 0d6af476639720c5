// `gpt-vk generate` end to end on the bundled default model: its serving path (sampler and
// model pipelines warmed up while the weights load on their own thread, then prefill and
// one-submit decode steps) prints exactly the text that the library's GptModel produces for
// the same prompt and settings: greedy, and sampled with a fixed seed. The validation layer
// is on in the child and must stay silent.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/npy.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/utf8.hpp"
#include "models/weights.hpp"
#include "runtime/generator.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

const fs::path kConfig = fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml";
const char* kPrompt = "It was a fine morning, and";

// The library's Generator driven directly: the text for `n` steps after the prompt.
std::string library_text(const ops::SamplingParams& p, uint32_t n) {
  auto& ctx = test::context();
  ModelConfig cfg = load_config(kConfig.string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  GenerationOptions options;
  options.sampling = p;
  options.max_tokens = n;
  Generator gen(model, tok);
  gen.start(tok.encode(kPrompt), options);
  while (!gen.finished()) gen.next();
  return std::string(kPrompt) + tok.decode(gen.tokens()) + "\n";
}

void check_generate(const std::vector<std::string>& flags, const ops::SamplingParams& p, uint32_t n) {
  std::vector<std::string> args = {"generate", "--config", kConfig.string(), "--prompt", kPrompt, "--max-tokens",
                                   std::to_string(n)};
  args.insert(args.end(), flags.begin(), flags.end());
  test::CliResult r = test::run_cli(args, {}, 120.0);
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find("validation:") == std::string::npos, "the validation layer reported something");
  BOOST_TEST(r.out == library_text(p, n));
}

test::CliResult generate(std::vector<std::string> flags, double timeout_s = 120.0) {
  std::vector<std::string> args = {"generate", "--config", kConfig.string()};
  args.insert(args.end(), flags.begin(), flags.end());
  test::CliResult r = test::run_cli(args, {}, timeout_s);
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find("validation:") == std::string::npos, "the validation layer reported something");
  return r;
}

// Each line parsed, keys kept in their order (logprobs' "top" lists the most likely first).
std::vector<nlohmann::ordered_json> json_lines(const std::string& out) {
  std::vector<nlohmann::ordered_json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) v.push_back(nlohmann::ordered_json::parse(line));
  return v;
}

// The largest count of any 4-gram of ids.
size_t max_4gram_repeats(const std::vector<uint32_t>& ids) {
  std::map<std::vector<uint32_t>, size_t> seen;
  size_t most = 0;
  for (size_t i = 0; i + 4 <= ids.size(); ++i) most = std::max(most, ++seen[{ids.begin() + i, ids.begin() + i + 4}]);
  return most;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(generate_cli, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(greedy_matches_the_library) {
  check_generate({"--temperature", "0"}, {0.0f, 0, 1.0f, 0}, 24);
  // Min-p cannot change the argmax, so greedy with it takes the same plain path and tokens.
  check_generate({"--temperature", "0", "--min-p", "0.5"}, {0.0f, 0, 1.0f, 0}, 24);
}

BOOST_AUTO_TEST_CASE(seeded_sampling_matches_the_library) {
  check_generate({"--seed", "11"}, {0.8f, 40, 0.95f, 11}, 24);  // generate's default filters
}

// The library's Generator as a streaming caller uses it: the pieces add up to text(), a stop
// string ends the text before it (the token completing it is still in tokens()), cancel()
// ends at once, and a restart with the same seed gives the same tokens.
BOOST_AUTO_TEST_CASE(generator_streams_stops_and_cancels) {
  auto& ctx = test::context();
  ModelConfig cfg = load_config(kConfig.string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  Generator gen(model, tok);
  GenerationOptions o;
  o.sampling = {0.0f, 0, 1.0f, 0};
  o.max_tokens = 30;
  // The unstopped greedy text (", and the same, and the house, ...") says where the stop
  // string must cut it.
  gen.start(tok.encode("Hello"), o);
  while (!gen.finished()) gen.next();
  const std::string full = gen.text();
  const size_t cut = full.find(" house");
  BOOST_REQUIRE(cut != std::string::npos);
  o.stop = {" house"};
  gen.start(tok.encode("Hello"), o);
  std::string streamed;
  while (!gen.finished()) streamed += gen.next().text;
  BOOST_TEST(streamed == gen.text());
  BOOST_TEST(gen.text() == full.substr(0, cut));
  BOOST_TEST((gen.finish_reason() == FinishReason::StopString));
  // Generation ends with the token that completes the stop string.
  const std::string made = tok.decode(gen.tokens());
  BOOST_TEST(made.size() >= cut + 6);
  BOOST_TEST(made.size() < full.size());
  BOOST_TEST(full.compare(0, made.size(), made) == 0);
  BOOST_TEST(std::string(finish_reason_name(gen.finish_reason())) == "stop");

  o.sampling = {0.9f, 40, 0.95f, 17};
  o.stop.clear();
  gen.start(tok.encode("Hello"), o);
  gen.next();
  gen.next();
  gen.cancel();
  auto last = gen.next();
  BOOST_TEST(last.last);
  BOOST_TEST(!last.token.has_value());
  BOOST_TEST((gen.finish_reason() == FinishReason::Cancelled));
  BOOST_TEST(gen.tokens().size() == 2u);
  const auto first_two = gen.tokens();
  gen.start(tok.encode("Hello"), o);
  while (!gen.finished()) gen.next();
  BOOST_TEST((gen.finish_reason() == FinishReason::Length));
  BOOST_TEST(gen.tokens().size() == 30u);
  BOOST_TEST(std::vector<uint32_t>(gen.tokens().begin(), gen.tokens().begin() + 2) == first_two);
  BOOST_CHECK_THROW(gen.next(), std::logic_error);
}

// --json's text is exactly what the plain output prints (with --no-echo), for a sampled run
// with every control, a stop string and two samples; sample i equals a lone run with seed + i.
BOOST_AUTO_TEST_CASE(json_text_equals_plain_output) {
  const std::vector<std::string> flags = {"--prompt", kPrompt, "--max-tokens", "40", "--seed", "5", "--min-p", "0.05",
                                          "--repeat-penalty", "1.2", "--frequency-penalty", "0.3",
                                          "--presence-penalty", "0.2", "--logit-bias", "11=-2", "--stop", " the",
                                          "--num-samples", "2", "--no-echo"};
  auto plain = generate(flags);
  auto with_json = flags;
  with_json.push_back("--json");
  auto j = generate(with_json);
  auto objs = json_lines(j.out);
  BOOST_REQUIRE(objs.size() == 2u);
  std::string expected;
  for (const auto& o : objs) {
    expected += o["text"].get<std::string>() + "\n";
    BOOST_TEST(o["tokens"].is_array());
    BOOST_TEST((o["finish_reason"] == "stop" || o["finish_reason"] == "length"));
    BOOST_TEST(o["text"].get<std::string>().find(" the") == std::string::npos);
  }
  BOOST_TEST(plain.out == expected);
  BOOST_TEST(objs[0]["seed"] == 5);
  BOOST_TEST(objs[1]["seed"] == 6);
  BOOST_TEST(objs[0]["tokens"] != objs[1]["tokens"]);
  // The second sample alone, with seed 6.
  auto lone = flags;
  lone[5] = "6";
  lone.erase(lone.end() - 3, lone.end() - 1);  // drop --num-samples 2
  BOOST_TEST(generate(lone).out == objs[1]["text"].get<std::string>() + "\n");
}

// Several --prompt flags run as one batch (with --num-samples 2: six completions decoding
// together) and print what separate runs of each prompt print, in order; --json indexes
// them prompt-major.
BOOST_AUTO_TEST_CASE(several_prompts_equal_separate_runs) {
  const std::vector<std::string> common = {"--max-tokens", "12", "--temperature", "0.9", "--seed", "3",
                                           "--num-samples", "2"};
  const std::vector<std::string> prompts = {kPrompt, "Emma", ""};
  std::vector<std::string> all = common;
  std::string want;
  for (const auto& p : prompts) {
    all.insert(all.end(), {"--prompt", p});
    auto one = common;
    one.insert(one.end(), {"--prompt", p});
    want += generate(one).out;
  }
  BOOST_TEST(generate(all).out == want);
  all.push_back("--json");
  auto objs = json_lines(generate(all).out);
  BOOST_REQUIRE(objs.size() == 6u);
  for (size_t i = 0; i < objs.size(); ++i) {
    BOOST_TEST(objs[i]["index"] == i);
    BOOST_TEST(objs[i]["seed"] == 3 + i % 2);
  }
}

// The prompt from a file (-f, llama.cpp's spelling of --prompt-file) and from stdin give
// what --prompt gives; llama.cpp's -p, -n, --temp and -s what our names give.
BOOST_AUTO_TEST_CASE(prompt_from_file_and_stdin) {
  const fs::path file = fs::temp_directory_path() / "gptvk_test_prompt.txt";
  std::ofstream(file, std::ios::binary) << kPrompt;
  auto want = generate({"--prompt", kPrompt, "--temperature", "0", "--max-tokens", "8"});
  BOOST_TEST(generate({"-p", kPrompt, "--temp", "0.9", "-s", "5", "-n", "8"}).out ==
             generate({"--prompt", kPrompt, "--temperature", "0.9", "--seed", "5", "--max-tokens", "8"}).out);
  auto from_file = generate({"-f", file.string(), "--temperature", "0", "--max-tokens", "8"});
  BOOST_TEST(from_file.out == want.out);
  const std::string cmd = std::string("printf '%s' '") + kPrompt + "' | " + GPTVK_BINARY + " generate --config " +
                          kConfig.string() + " --prompt - --temperature 0 --max-tokens 8 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    BOOST_TEST(pclose(p) == 0);
  }
  BOOST_TEST(out == want.out);
  // --prompt-file - reads stdin too.
  const std::string from_stdin = std::string("printf '%s' '") + kPrompt + "' | " + GPTVK_BINARY +
                                 " generate --config " + kConfig.string() +
                                 " --prompt-file - --temperature 0 --max-tokens 8 2>/dev/null";
  out.clear();
  if (FILE* p = popen(from_stdin.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    BOOST_TEST(pclose(p) == 0);
  }
  BOOST_TEST(out == want.out);
  fs::remove(file);
}

// Tokens that end inside a UTF-8 character (GPT-2 splits CJK text so) are keys of "top"
// as "bytes:\xNN...", OpenAI's form: as JSON text every such token would be U+FFFD, and the
// alternatives would collapse into one key. The tiny GGUF model continues "日本" with them.
BOOST_AUTO_TEST_CASE(logprobs_of_byte_tokens_keep_distinct_keys) {
  const fs::path gguf = fs::path(GPTVK_SOURCE_DIR) / "tests/fixtures/gguf/small-F16.gguf";
  auto r = test::run_cli({"generate", "-m", gguf.string(), "--prompt", "\u65e5\u672c", "--max-tokens", "4", "--seed",
                          "1", "--json", "--logprobs", "5"},
                         {}, 60.0);
  BOOST_REQUIRE(r.exit_code == 0);
  const auto o = json_lines(r.out).at(0);
  size_t byte_keys = 0;
  for (const auto& e : o["logprobs"]) {
    BOOST_TEST(e["top"].size() == 5u, "top: " << e["top"].dump());  // duplicates would merge
    for (auto it = e["top"].begin(); it != e["top"].end(); ++it) byte_keys += it.key().starts_with("bytes:\\x");
    const std::string token = e["token"];
    BOOST_TEST((token.starts_with("bytes:\\x") || token.find("\xef\xbf\xbd") == std::string::npos));
  }
  BOOST_TEST(byte_keys >= 2u);
}

// The completions' fields that do not depend on timing, one line each, to compare two runs'
// --json output.
std::string without_timings(std::vector<nlohmann::ordered_json> objs) {
  std::string lines;
  for (auto& o : objs) o.erase("timings"), lines += o.dump() + "\n";
  return lines;
}

// --prompt-file FILE.jsonl (strings and {"prompt": ...} objects, blank and CRLF lines among
// them) runs what the same prompts as repeated --prompt flags run: the same text greedy, the
// same completions sampled with a seed; a line's own max_tokens and seed give what a lone run
// with those flags gives, inside the same batch (written as floats, 9.0 and 5e0, as Python's
// json.dumps may write them).
BOOST_AUTO_TEST_CASE(jsonl_prompt_file_equals_repeated_prompts) {
  const fs::path file = fs::temp_directory_path() / "gptvk_test_prompts.jsonl";
  std::ofstream(file, std::ios::binary) << nlohmann::json(kPrompt).dump() << "\n\n"
                                        << R"({"prompt": "Emma"})" << "\r\n"
                                        << R"(  {"prompt": ""})" << "\n";
  const std::vector<std::string> repeated = {"--prompt", kPrompt, "--prompt", "Emma", "--prompt", ""};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<std::string> greedy = {"--temperature", "0", "--max-tokens", "10"};
  const auto want_greedy = generate(with(repeated, greedy)).out;
  BOOST_TEST(generate(with({"--prompt-file", file.string()}, greedy)).out == want_greedy);

  const std::vector<std::string> sampled = {"--seed", "3", "--max-tokens", "12", "--num-samples", "2", "--json"};
  auto want = json_lines(generate(with(repeated, sampled)).out);
  auto got = json_lines(generate(with({"--prompt-file", file.string()}, sampled)).out);
  BOOST_REQUIRE(got.size() == 6u);
  BOOST_TEST(without_timings(got) == without_timings(want));
  for (size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(got[i]["index"] == i);
    BOOST_TEST(got[i]["prompt_index"] == i / 2);
  }

  std::ofstream(file, std::ios::binary) << nlohmann::json(kPrompt).dump() << "\n"
                                        << R"({"seed": 9.0, "prompt": "Emma", "max_tokens": 5e0})" << "\n";
  got = json_lines(generate({"--prompt-file", file.string(), "--seed", "3", "--max-tokens", "12", "--json"}).out);
  BOOST_REQUIRE(got.size() == 2u);
  auto first = json_lines(generate({"--prompt", kPrompt, "--seed", "3", "--max-tokens", "12", "--json"}).out);
  auto second = json_lines(generate({"--prompt", "Emma", "--seed", "9", "--max-tokens", "5", "--json"}).out);
  BOOST_TEST(got[0]["tokens"].dump() == first.at(0)["tokens"].dump());
  BOOST_TEST(got[1]["tokens"].dump() == second.at(0)["tokens"].dump());
  BOOST_TEST(got[1]["seed"] == 9);
  BOOST_TEST(got[1]["tokens"].size() <= 5u);
  BOOST_TEST(got[0]["tokens"].size() > 5u);  // the line's max_tokens was its own
  fs::remove(file);
}

// --logprobs: each token's log-probability and its alternatives equal the log-softmax of
// `forward`'s logits over prompt + generated ids at the position before it, within 1e-5
// (decode steps run the mat-vec path with the KV cache, forward the prompt GEMM path, both
// in f32: measured 1.6e-6 on lavapipe). Both run off a GPU's matrix units
// (GPTVK_FORCE=no_coopmat), whose GEMMs round x to f16 (8.2e-4 apart on an H100).
BOOST_AUTO_TEST_CASE(logprobs_equal_log_softmax_of_forward) {
  const std::vector<std::string> f32_products = {"GPTVK_FORCE=no_coopmat"};
  auto r = test::run_cli({"generate", "--config", kConfig.string(), "--prompt", kPrompt, "--max-tokens", "12", "--seed",
                          "3", "--json", "--logprobs", "3"},
                         f32_products, 120.0);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_REQUIRE(r.exit_code == 0);
  auto o = json_lines(r.out).at(0);
  ModelConfig cfg = load_config(kConfig.string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  std::vector<uint32_t> ids = tok.encode(kPrompt);
  const size_t prompt_len = ids.size();
  for (const auto& t : o["tokens"]) ids.push_back(t.get<uint32_t>());
  std::string id_list;
  for (uint32_t id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
  const fs::path npy = fs::temp_directory_path() / "gptvk_test_logprobs.npy";
  auto f = test::run_cli({"forward", "--config", kConfig.string(), "--ids", id_list, "--out", npy.string()},
                         f32_products, 120.0);
  BOOST_REQUIRE(f.exit_code == 0);
  NpyArray logits = read_npy(npy.string());
  fs::remove(npy);
  const size_t V = cfg.vocab_size;
  BOOST_REQUIRE(o["logprobs"].size() == o["tokens"].size());
  double worst = 0;
  for (size_t i = 0; i < o["logprobs"].size(); ++i) {
    const float* row = logits.data.data() + (prompt_len - 1 + i) * V;
    double m = *std::max_element(row, row + V), z = 0;
    for (size_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - m);
    auto lp = [&](uint32_t id) { return double(row[id]) - m - std::log(z); };
    const auto& e = o["logprobs"][i];
    BOOST_TEST(e["id"] == ids[prompt_len + i]);
    worst = std::max(worst, std::fabs(e["logprob"].get<double>() - lp(ids[prompt_len + i])));
    BOOST_TEST(e["top"].size() == 3u);
    std::vector<uint32_t> order(V);
    for (uint32_t v = 0; v < V; ++v) order[v] = v;
    std::partial_sort(order.begin(), order.begin() + 3, order.end(), [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
    size_t k = 0;
    for (auto it = e["top"].begin(); it != e["top"].end(); ++it, ++k) {
      BOOST_TEST(it.key() == tokenizer::token_json_text(tok.token_bytes(order[k])), "token " << i << " alternative " << k);
      worst = std::max(worst, std::fabs(it.value().get<double>() - lp(order[k])));
    }
  }
  // A wrong token or position is off by far more.
  BOOST_TEST(worst <= 1e-5, "largest logprob difference from forward: " << worst);
}

// --logprobs without --json: after the text, stderr holds a header and one tab-separated
// line per generated token (id, text, logprob, the alternatives as id:logprob), the same
// numbers as --json's (printed to 6 significant digits).
BOOST_AUTO_TEST_CASE(plain_logprobs_table_equals_json) {
  const std::vector<std::string> common = {"--prompt", kPrompt, "--max-tokens", "6", "--seed", "3", "--logprobs", "2"};
  auto with_json = common;
  with_json.push_back("--json");
  const auto o = json_lines(generate(with_json).out).at(0);
  const auto plain = generate(common);
  std::istringstream err(plain.err);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(err, line))
    if (!line.starts_with("gpt-vk:")) rows.push_back(line);
  BOOST_REQUIRE(rows.size() == o["logprobs"].size() + 1);
  BOOST_TEST(rows[0] == "id\ttext\tlogprob\ttop");
  for (size_t i = 0; i < o["logprobs"].size(); ++i) {
    const auto& e = o["logprobs"][i];
    std::istringstream row(rows[i + 1]);
    std::string id, text, logprob, top;
    std::getline(row, id, '\t');
    std::getline(row, text, '\t');
    std::getline(row, logprob, '\t');
    std::getline(row, top);
    BOOST_TEST_INFO("row " << rows[i + 1]);
    BOOST_TEST(std::stoul(id) == e["id"].get<uint32_t>());
    BOOST_TEST(std::fabs(std::stod(logprob) - e["logprob"].get<double>()) <= 1e-5 * (1 + std::fabs(std::stod(logprob))));
    BOOST_TEST(std::count(top.begin(), top.end(), ':') == 2);  // K = 2 alternatives
    BOOST_TEST(top.starts_with(id + ":") == (e["top"].begin().key() == e["token"].get<std::string>()));
  }
}

// --logprobs 0 lists each token's own log-probability with no alternatives (as the
// server's logprobs 0 does), not nothing at all.
BOOST_AUTO_TEST_CASE(logprobs_0_lists_each_tokens_own) {
  const std::vector<std::string> common = {"--prompt", kPrompt, "--max-tokens", "4", "--seed", "3", "--json"};
  auto zero = common, one = common;
  zero.insert(zero.end(), {"--logprobs", "0"});
  one.insert(one.end(), {"--logprobs", "1"});
  const auto z = json_lines(generate(zero).out).at(0), o = json_lines(generate(one).out).at(0);
  BOOST_REQUIRE(z["logprobs"].size() == 4u);
  BOOST_TEST(z["tokens"] == o["tokens"]);
  for (size_t i = 0; i < 4; ++i) {
    BOOST_TEST(z["logprobs"][i]["top"].empty());
    BOOST_TEST(o["logprobs"][i]["top"].size() == 1u);
    BOOST_TEST(z["logprobs"][i]["logprob"].get<double>() == o["logprobs"][i]["logprob"].get<double>());
  }
}

// A token whose text is a NUL byte (GPT-2's 188, forced by its bias) is printed as \0: the
// table keeps every row and its line ends (printed as a C string, the NUL would cut it short).
BOOST_AUTO_TEST_CASE(plain_logprobs_table_escapes_a_nul_byte) {
  const auto r = generate({"--prompt", kPrompt, "--max-tokens", "3", "--seed", "1", "--logprobs", "1", "--logit-bias",
                           "188=100"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find('\0') == std::string::npos);
  std::istringstream err(r.err);
  std::vector<std::string> rows;
  for (std::string line; std::getline(err, line);)
    if (!line.starts_with("gpt-vk:")) rows.push_back(line);
  BOOST_REQUIRE(rows.size() == 4u);
  for (size_t i = 1; i < rows.size(); ++i) BOOST_TEST(rows[i].starts_with("188\t\\0\t"), rows[i]);
}

// The penalty's requirement: greedy with --repeat-penalty 1.3 repeats no 4-gram in 60 tokens
// (without it, "Hello, and the house, and the house, ..." repeats at once).
BOOST_AUTO_TEST_CASE(repeat_penalty_breaks_greedy_loops) {
  auto before = json_lines(generate({"--prompt", "Hello", "--temperature", "0", "--max-tokens", "60", "--json"}).out);
  auto after = json_lines(
      generate({"--prompt", "Hello", "--temperature", "0", "--repeat-penalty", "1.3", "--max-tokens", "60", "--json"}).out);
  auto ids = [](const nlohmann::ordered_json& o) { return o.at("tokens").get<std::vector<uint32_t>>(); };
  BOOST_TEST(max_4gram_repeats(ids(before.at(0))) > 1u);  // the loop the penalty is for
  BOOST_TEST(ids(after.at(0)).size() == 60u);
  BOOST_TEST(max_4gram_repeats(ids(after.at(0))) == 1u);
}

// Bad flags: exit 2 (usage) with a one-line message that names the problem.
BOOST_AUTO_TEST_CASE(bad_flags_are_usage_errors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> rows = {
      {{"--prompt", "hi", "--max-tokens", "abc"}, "--max-tokens: expected a whole number, got 'abc'"},
      {{"--prompt", "hi", "--temperature", "-1"}, "--temperature: must be a number >= 0, got -1"},
      {{"--prompt", "hi", "--min-p", "2"}, "--min-p: must be a number in [0, 1], got 2"},
      {{"--prompt", "hi", "--repeat-penalty", "0"}, "--repeat-penalty: must be a number > 0, got 0"},
      {{"--prompt", "hi", "--repeat-last-n", "-2"}, "--repeat-last-n: value -2 not in range -1 to"},
      {{"--prompt", "hi", "--logit-bias", "12"}, "--logit-bias: expected TOKEN_ID=BIAS"},
      {{"--prompt", "hi", "--logit-bias", "12=0x10"}, "--logit-bias: expected TOKEN_ID=BIAS"},
      // A float flag is a decimal number a float holds: not hex, padded, or rounded to 0 or inf.
      {{"--prompt", "hi", "--temperature", "0x10"}, "--temperature: expected a decimal number >= 0, got '0x10'"},
      {{"--prompt", "hi", "--temperature", " 1"}, "--temperature: expected a decimal number >= 0, got ' 1'"},
      {{"--prompt", "hi", "--temperature", "1e-50"},
       "--temperature: expected a decimal number >= 0 within a 32-bit float's range, got '1e-50'"},
      {{"--prompt", "hi", "--repeat-penalty", "1e39"}, "--repeat-penalty: expected a decimal number > 0 within"},
      {{"--prompt", "hi", "--logit-bias", "99999999=1"}, "logit bias for token 99999999, outside the vocabulary of 50257"},
      {{"--prompt", "hi", "--prompt-file", "x"}, "give either --prompt or --prompt-file, not both"},
      {{"--max-tokens", "3"}, "no prompt: give --prompt TEXT"},
      {{"--prompt", "hi", "--num-samples", "0"}, "--num-samples: value 0 not in range 1 to 1000"},
      // One value per flag: an unquoted second word is not a second prompt (or stop string).
      {{"--prompt", "hello", "world"}, "The following argument was not expected: world"},
      {{"--prompt", "hi", "--stop", "a", "b"}, "The following argument was not expected: b"},
      {{"-p", "hi", "-x", "3", "a b"},
       "The following arguments were not expected: -x 3 'a b' (see gpt-vk generate --help)"},
      {{"--prompt", "hi", "--stop", ""}, "--stop: needs a non-empty text"},
      {{"--prompt", "-", "--prompt", "-"}, "--prompt - reads stdin, which can be read only once"},
  };
  for (const auto& [flags, message] : rows) {
    std::vector<std::string> args = {"generate", "--config", kConfig.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = test::run_cli(args, {}, 60.0);
    BOOST_TEST_INFO("command: " << r.command);
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.find("gpt-vk: " + message) == 0u, "stderr: " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // Bad JSON lines: bad input (exit 1), one line naming the file and line.
  const fs::path bad_lines = fs::temp_directory_path() / "gptvk_test_bad_prompts.jsonl";
  for (const auto& [line, message] : std::vector<std::pair<std::string, std::string>>{
           {"{\"prompt\": \"hi\"", "not valid JSON"},
           {"{\"text\": \"hi\"}", "the object has no \"prompt\""},
           {"42", "expected a JSON string or an object with a \"prompt\" string, got a number"}}) {
    std::ofstream(bad_lines, std::ios::binary) << "\"fine\"\n\n" << line << "\n";
    auto r = test::run_cli({"generate", "--config", kConfig.string(), "--prompt-file", bad_lines.string()}, {}, 60.0);
    BOOST_TEST_INFO("line: " << line);
    BOOST_TEST(r.exit_code == 1);
    BOOST_TEST(r.err.find("gpt-vk: " + bad_lines.string() + ":3: " + message) == 0u, "stderr: " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  fs::remove(bad_lines);
  auto missing = test::run_cli({"generate", "--config", kConfig.string(), "--prompt-file", "/nonexistent/p.txt"}, {}, 60.0);
  BOOST_TEST(missing.exit_code == 1);
  BOOST_TEST(missing.err.find("gpt-vk: cannot read --prompt-file /nonexistent/p.txt") == 0u, missing.err);
}

// One generated token has no decode rate (it comes with the prompt's pass): null in JSON,
// none in the summary, rather than a misleading 0.0.
BOOST_AUTO_TEST_CASE(one_token_has_no_decode_rate) {
  const auto r = generate({"--prompt", kPrompt, "--max-tokens", "1", "--seed", "3", "--json"});
  const auto o = json_lines(r.out).at(0);
  BOOST_TEST(o["tokens"].size() == 1u);
  BOOST_TEST(o["timings"]["decode_tok_s"].is_null());
  BOOST_TEST(o["timings"]["prefill_tok_s"].get<double>() > 0);
  BOOST_TEST(r.err.find("generated 1 token\n") != std::string::npos, r.err);
}

// Ctrl-C (SIGINT once the prompt is echoed) keeps the text so far, says so, and exits 130.
BOOST_AUTO_TEST_CASE(ctrl_c_keeps_the_text_so_far) {
  test::CliOptions ctrl_c;
  ctrl_c.sigint_on_output = kPrompt;
  const auto r = test::run_cli({"generate", "--prompt", kPrompt, "--max-tokens", "250", "--logit-bias", "50256=-100",
                                "--seed", "1"},
                               {}, 120.0, ctrl_c);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(!r.signaled);
  BOOST_TEST(r.exit_code == 130);
  BOOST_TEST(r.out.starts_with(kPrompt));
  BOOST_TEST(r.err.find("interrupted") != std::string::npos);
  // --json still gives a line per completion: 20 samples, Ctrl-C once the seed is said
  // (before any batch of 16 ends), so the last 4 never start: "cancelled", no tokens.
  test::CliOptions at_seed;
  at_seed.sigint_on_output = "gpt-vk: seed ";
  const auto j = test::run_cli({"generate", "--prompt", kPrompt, "--max-tokens", "250", "--logit-bias", "50256=-100",
                                "--num-samples", "20", "--json"},
                               {}, 120.0, at_seed);
  BOOST_TEST_INFO("stderr: " << j.err);
  BOOST_TEST(j.exit_code == 130);
  const auto lines = json_lines(j.out);
  BOOST_REQUIRE(lines.size() == 20u);
  for (uint32_t i = 0; i < 20; ++i) {
    BOOST_TEST(lines[i]["index"] == i);
    BOOST_TEST(lines[i]["finish_reason"] == "cancelled");
    if (i >= 16) BOOST_TEST(lines[i]["tokens"].empty());
  }
}

// Blocked writing to a pipe nobody reads (~40 KB of JSON into 4 KiB), the run never looks at
// Ctrl-C's flag again: a second Ctrl-C ends it, as the shell's default action would. Not
// under ThreadSanitizer, which holds a signal back until the blocked write returns.
#ifndef GPTVK_TSAN
BOOST_AUTO_TEST_CASE(a_second_ctrl_c_ends_a_run_blocked_on_its_output) {
  test::CliOptions stalled;
  stalled.stdout_to = test::Stdout::Stalled;
  stalled.sigints_when_stalled = 2;
  const auto r = test::run_cli({"generate", "--prompt", kPrompt, "--max-tokens", "250", "--logit-bias", "50256=-100",
                                "--seed", "1", "--json", "--logprobs", "5"},
                               {}, 120.0, stalled);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.signaled);
  BOOST_TEST(r.signal == SIGINT);
}
#endif

// Started with SIGINT ignored (a script's `gpt-vk generate ... &`), it stays ignored.
BOOST_AUTO_TEST_CASE(an_ignored_sigint_stays_ignored) {
  test::CliOptions ignored;
  ignored.sigint_on_output = kPrompt;
  ignored.sigint_ignored = true;
  const auto r = test::run_cli({"generate", "--prompt", kPrompt, "--max-tokens", "40", "--logit-bias", "50256=-100",
                                "--seed", "1"},
                               {}, 120.0, ignored);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find("reached --max-tokens") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
