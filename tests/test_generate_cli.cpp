// `gpt-vk generate` end to end on the bundled default model: its serving path (sampler and
// model pipelines warmed up while the weights load on their own thread, then prefill and
// one-submit decode steps) prints exactly the text that the library's GptModel produces for
// the same prompt and settings: greedy, and sampled with a fixed seed. The validation layer
// is on in the child and must stay silent.
#define BOOST_TEST_MODULE generate_cli
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"
#include "runtime/generator.hpp"
#include "tests/support/cli_run.hpp"
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

}  // namespace

BOOST_FIXTURE_TEST_SUITE(generate_cli, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(greedy_matches_the_library) {
  check_generate({"--temperature", "0"}, {0.0f, 0, 1.0f, 0}, 24);
}

BOOST_AUTO_TEST_CASE(seeded_sampling_matches_the_library) {
  check_generate({"--seed", "11"}, {0.8f, 40, 0.95f, 11}, 24);  // generate's default filters
}

BOOST_AUTO_TEST_SUITE_END()
