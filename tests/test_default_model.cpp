#define BOOST_TEST_MODULE default_model
// The bundled default model (models/default/): gpt-vk's perplexity on its held-out text
// matches the value PyTorch computed when the training tool exported the model
// (reference.json), within 0.5% as the issue asks; and greedy generation is deterministic
// English-looking text (printable, with spaces between words).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

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

// The bundled model's perplexity on its held-out text with reference.json's window, its
// weights stored as `dt`; each dtype's run once per process (the f16 one serves both cases).
PerplexityResult bundled_perplexity(DType dt) {
  static std::map<DType, PerplexityResult> done;
  if (auto it = done.find(dt); it != done.end()) return it->second;
  const auto ref = reference();
  auto& ctx = test::context();
  ModelConfig cfg = load_config((kDir / "config.toml").string());
  cfg.dtype = dt;
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  const auto ids = tok.encode(read_file(kDir / ref["heldout"].get<std::string>()));
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  return done[dt] = perplexity(model, ids, ref["context"].get<uint32_t>(), ref["stride"].get<uint32_t>());
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(default_model, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(perplexity_matches_pytorch) {
  const auto ref = reference();
  const ModelConfig cfg = load_config((kDir / "config.toml").string());
  BOOST_TEST(fs::file_size(cfg.weights_file) <= 30u * 1000 * 1000);  // the size cap
  BOOST_TEST_REQUIRE((cfg.dtype == DType::F16));  // as bundled_perplexity(F16) assumes below
  const PerplexityResult r = bundled_perplexity(DType::F16);
  double want = ref["perplexity"].get<double>();
  BOOST_TEST_MESSAGE("gpt-vk perplexity " << r.perplexity << ", PyTorch " << want << " over " << r.scored);
  BOOST_TEST(r.scored == ref["tokens_scored"].get<uint64_t>());
  BOOST_TEST(std::abs(r.perplexity - want) / want <= 0.005);
}

// 8-bit (and 4-bit) weights on the device: Q8_0 perplexity within 1% of f16's (the issue's
// bound; measured 176.12 against 176.11), Q4_0 within 3% (measured 177.75, +0.9%). Whole
// models through the quantized decode and prompt kernels, with the fusions the plan picks.
BOOST_AUTO_TEST_CASE(quantized_perplexity_near_f16) {
  auto ppl = [](DType dt) { return bundled_perplexity(dt).perplexity; };
  const double f16 = ppl(DType::F16), q8 = ppl(DType::Q8_0), q4 = ppl(DType::Q4_0);
  BOOST_TEST_MESSAGE("perplexity f16 " << f16 << ", q8_0 " << q8 << ", q4_0 " << q4);
  BOOST_TEST(std::abs(q8 - f16) / f16 <= 0.01);
  BOOST_TEST(std::abs(q4 - f16) / f16 <= 0.03);
}

BOOST_AUTO_TEST_CASE(greedy_generation_is_deterministic_text) {
  auto& ctx = test::context();
  ModelConfig cfg = load_config((kDir / "config.toml").string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  auto run = [&] {
    model.set_sampling({0.0f, 0, 1.0f, 0});
    std::vector<uint32_t> out{model.prefill_and_sample(tok.encode("It was a fine morning, and"))};
    for (int i = 0; i < 30; ++i) out.push_back(model.decode_next());
    return out;
  };
  auto a = run(), b = run();
  BOOST_TEST(a == b, boost::test_tools::per_element());
  std::string text = tok.decode(a);
  BOOST_TEST_MESSAGE("greedy: " << text);
  size_t letters = 0, spaces = 0;
  for (unsigned char c : text) {
    letters += std::isalpha(c) != 0;
    spaces += c == ' ';
  }
  BOOST_TEST(letters > text.size() / 2);
  BOOST_TEST(spaces >= 5u);
}

BOOST_AUTO_TEST_SUITE_END()
