#define BOOST_TEST_MODULE default_model
// The bundled default model (models/default/): gpt-vk's perplexity on its held-out text
// matches the value PyTorch computed when the training tool exported the model
// (reference.json), within 0.5% as the issue asks; and greedy generation gives the ids
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

// The bundled model's perplexity with its weights stored as `dt`, on its held-out text with
// reference.json's window, or on the first `prefix` tokens of it (0: all); each run once per
// process. The f16 run also scores the prefixes: its windows there are the windows a run
// over a prefix of whole strides makes, so its scores there are that run's.
struct Scores {
  PerplexityResult all;
  std::vector<double> logprobs;  // by target, in order
  std::vector<size_t> index;     // each target's position in the text
};

const Scores& bundled_scores(DType dt, size_t prefix) {
  static std::map<std::pair<DType, size_t>, Scores> done;
  if (auto it = done.find({dt, prefix}); it != done.end()) return it->second;
  const auto ref = reference();
  auto& ctx = test::context();
  ModelConfig cfg = load_config((kDir / "config.toml").string());
  cfg.dtype = dt;
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  auto ids = tok.encode(read_file(kDir / ref["heldout"].get<std::string>()));
  if (prefix) ids.resize(std::min(ids.size(), prefix));
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  Scores& s = done[{dt, prefix}];
  s.all = score_windows(model, ids, ref["context"].get<uint32_t>(), ref["stride"].get<uint32_t>(),
                        [&](const ScoredToken& t) {
                          s.logprobs.push_back(t.logprob);
                          s.index.push_back(t.index);
                        });
  return s;
}

// Perplexity over the targets before position `end`.
double perplexity_before(const Scores& s, size_t end) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < s.index.size() && s.index[i] < end; ++i, ++n) sum += s.logprobs[i];
  return std::exp(-sum / double(n));
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(default_model, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(perplexity_matches_pytorch) {
  const auto ref = reference();
  const ModelConfig cfg = load_config((kDir / "config.toml").string());
  BOOST_TEST(fs::file_size(cfg.weights_file) <= 30u * 1000 * 1000);  // the size cap
  BOOST_TEST_REQUIRE((cfg.dtype == DType::F16));  // as bundled_perplexity(F16) assumes below
  const PerplexityResult r = bundled_scores(DType::F16, 0).all;
  double want = ref["perplexity"].get<double>();
  BOOST_TEST_MESSAGE("gpt-vk perplexity " << r.perplexity << ", PyTorch " << want << " over " << r.scored);
  BOOST_TEST(r.scored == ref["tokens_scored"].get<uint64_t>());
  BOOST_TEST(std::abs(r.perplexity - want) / want <= 0.005);
}

// 8-bit (and 4-bit) weights on the device: Q8_0 perplexity within 1% of f16's (the issue's
// bound; measured over the whole text 176.12 against 176.11), Q4_0 within 3% (177.75,
// +0.9%). Whole models through the quantized decode and prompt kernels, with the fusions the
// plan picks, over the first 16 strides plus a window of the text (2304 of its 8944 tokens),
// to keep the test's time down; the f16 figure is over the same targets.
BOOST_AUTO_TEST_CASE(quantized_perplexity_near_f16) {
  const auto ref = reference();
  const size_t prefix = 16 * ref["stride"].get<size_t>() + ref["context"].get<size_t>();
  const Scores& f16_all = bundled_scores(DType::F16, 0);
  const Scores& q8_prefix = bundled_scores(DType::Q8_0, prefix);
  const double f16 = perplexity_before(f16_all, prefix), q8 = q8_prefix.all.perplexity;
  const double q4 = bundled_scores(DType::Q4_0, prefix).all.perplexity;
  // The f16 run's targets before the prefix's end are the prefix run's.
  BOOST_TEST(q8_prefix.index == std::vector<size_t>(f16_all.index.begin(),
                                                     f16_all.index.begin() + q8_prefix.index.size()));
  BOOST_TEST((q8_prefix.index.size() < f16_all.index.size() && f16_all.index[q8_prefix.index.size()] >= prefix));
  BOOST_TEST_MESSAGE("perplexity over " << prefix << " tokens: f16 " << f16 << ", q8_0 " << q8 << ", q4_0 " << q4);
  BOOST_TEST(std::abs(q8 - f16) / f16 <= 0.01);
  BOOST_TEST(std::abs(q4 - f16) / f16 <= 0.03);
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
