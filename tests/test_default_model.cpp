// The bundled default model (models/default/): gpt-vk's perplexity on the first quarter of
// its held-out text matches the value PyTorch computed when the training tool exported the
// model (reference.json), within the required 0.5%; and greedy generation gives the ids
// PyTorch's greedy generation gave.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/perplexity.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {
const fs::path kDir = fs::path(GPTVK_SOURCE_DIR) / "models/default";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

nlohmann::json reference() { return nlohmann::json::parse(read_file(kDir / "reference.json")); }

// The bundled model's perplexity with its weights stored as `dt`, with reference.json's
// window, over the first strides of its held-out text that reference.json's "prefix" scored
// (a quarter of the text: the whole takes several times longer); each dtype run once.
const PerplexityResult& bundled_perplexity(DType dt) {
  static std::map<DType, PerplexityResult> done;
  if (auto it = done.find(dt); it != done.end()) return it->second;
  const auto ref = reference();
  auto& ctx = test::context();
  ModelConfig cfg = load_config((kDir / "config.toml").string());
  cfg.dtype = dt;
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  auto ids = tok.encode(read_file(kDir / ref["heldout"].get<std::string>()));
  ids.resize(std::min(ids.size(), ref["prefix"]["tokens"].get<size_t>()));
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  return done[dt] = score_windows(model, ids, ref["context"].get<uint32_t>(), ref["stride"].get<uint32_t>());
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(default_model, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(perplexity_matches_pytorch) {
  const auto want = reference()["prefix"];
  const ModelConfig cfg = load_config((kDir / "config.toml").string());
  BOOST_TEST(fs::file_size(cfg.weights_file) <= 30u * 1000 * 1000);  // the bundled model's 30 MB size cap
  BOOST_TEST_REQUIRE((cfg.dtype == DType::F16));  // as bundled_perplexity(F16) assumes below
  const PerplexityResult& r = bundled_perplexity(DType::F16);
  const double pytorch = want["perplexity"].get<double>();
  BOOST_TEST_MESSAGE("gpt-vk perplexity " << r.perplexity << ", PyTorch " << pytorch << " over " << r.scored);
  BOOST_TEST(r.scored == want["tokens_scored"].get<uint64_t>());
  BOOST_TEST(std::abs(r.perplexity - pytorch) / pytorch <= 0.005);
}

// 8-bit (and 4-bit) weights on the device: Q8_0 perplexity within 1% of f16's is the issue's
// bound (this model gives 193.45 against 193.50 over the prefix, 176.12 against 176.11 over
// the whole text), Q4_0 194.46 and 177.75 (+0.5% and +0.9%). Held to 0.2% and 1.5%, several
// times what they measure, so that a quantized path that loses accuracy fails. Whole models
// through the quantized decode and prompt kernels, with the fusions the plan picks.
BOOST_AUTO_TEST_CASE(quantized_perplexity_near_f16) {
  const double f16 = bundled_perplexity(DType::F16).perplexity, q8 = bundled_perplexity(DType::Q8_0).perplexity,
               q4 = bundled_perplexity(DType::Q4_0).perplexity;
  BOOST_TEST_MESSAGE("perplexity over the prefix: f16 " << f16 << ", q8_0 " << q8 << ", q4_0 " << q4);
  BOOST_TEST(std::abs(q8 - f16) / f16 <= 0.002);
  BOOST_TEST(std::abs(q4 - f16) / f16 <= 0.015);
}

// Greedy decoding gives PyTorch's greedy ids (tools/train_default_model.py computes them
// from the same f16 weights in f32; reference.json's "greedy"), twice: every step's two
// largest logits are at least 0.035 apart there, far beyond f32 rounding, so the ids must
// be the same.
BOOST_AUTO_TEST_CASE(greedy_generation_equals_pytorch) {
  auto& ctx = test::context();
  ModelConfig cfg = load_config((kDir / "config.toml").string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  const auto greedy = reference()["greedy"];
  const auto want = greedy["ids"].get<std::vector<uint32_t>>();
  BOOST_REQUIRE(want.size() == 31u);
  for (double gap : greedy["top2_gaps"].get<std::vector<double>>()) BOOST_REQUIRE(gap > 1e-2);
  auto run = [&] {
    model.set_sampling({0.0f, 0, 1.0f, 0});
    std::vector<uint32_t> out{model.prefill_and_sample(tok.encode(greedy["prompt"].get<std::string>()))};
    while (out.size() < want.size()) out.push_back(model.decode_next());
    return out;
  };
  const auto a = run();
  BOOST_TEST_MESSAGE("greedy: " << tok.decode(a));
  BOOST_TEST(a == want, boost::test_tools::per_element());
  BOOST_TEST(run() == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
