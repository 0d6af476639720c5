// Replays the fuzzers' inputs through the same checks (tests/fuzz/targets.hpp) in the
// normal build, so every CI run covers them without clang or libFuzzer:
//   tests/fuzz/corpus/<target>/       the seed corpus: each input handled cleanly
//   tests/fuzz/regressions/<target>/  inputs that once crashed a parser: each must now be
//                                     rejected with a clean InputError (tokenizer: must
//                                     round-trip, since any bytes are valid text)
// A broken invariant aborts the test (as it would crash the fuzzer); any exception other
// than InputError fails it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/targets.hpp"

namespace fs = std::filesystem;
using gptvk::fuzz::Outcome;

namespace {

const fs::path kFuzz = fs::path(GPTVK_SOURCE_DIR) / "tests/fuzz";

std::vector<fs::path> inputs(const std::string& kind, const std::string& target) {
  std::vector<fs::path> files;
  fs::path dir = kFuzz / kind / target;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <class Check>
size_t replay(const std::string& kind, const std::string& target, Check check, bool must_reject) {
  size_t n = 0;
  for (const auto& file : inputs(kind, target)) {
    std::vector<uint8_t> data = read_bytes(file);
    Outcome o = check(std::span<const uint8_t>(data));
    BOOST_TEST_MESSAGE(kind << "/" << target << "/" << file.filename().string() << ": "
                            << (o.rejected ? "rejected: " + o.message : "accepted"));
    BOOST_TEST_CONTEXT(file.string()) {
      if (must_reject) BOOST_TEST(o.rejected, "accepted, but it is to be rejected with an InputError");
      if (o.rejected) BOOST_TEST(!o.message.empty());
    }
    ++n;
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(safetensors_corpus) {
  size_t seeds = replay("corpus", "safetensors", gptvk::fuzz::check_safetensors, false);
  BOOST_TEST(seeds >= 4u, "the seed corpus is missing");
  replay("regressions", "safetensors", gptvk::fuzz::check_safetensors, true);
}

BOOST_AUTO_TEST_CASE(config_corpus) {
  size_t seeds = replay("corpus", "config", gptvk::fuzz::check_config, false);
  BOOST_TEST(seeds >= 4u, "the seed corpus is missing");
  replay("regressions", "config", gptvk::fuzz::check_config, true);
}

BOOST_AUTO_TEST_CASE(tokenizer_corpus) {
  size_t seeds = replay("corpus", "tokenizer", gptvk::fuzz::check_tokenizer, false);
  BOOST_TEST(seeds >= 4u, "the seed corpus is missing");
  replay("regressions", "tokenizer", gptvk::fuzz::check_tokenizer, false);
}

BOOST_AUTO_TEST_CASE(gguf_corpus) {
  size_t seeds = replay("corpus", "gguf", gptvk::fuzz::check_gguf, false);
  BOOST_TEST(seeds >= 4u, "the seed corpus is missing");
  replay("regressions", "gguf", gptvk::fuzz::check_gguf, true);
}

BOOST_AUTO_TEST_CASE(torch_corpus) {
  size_t seeds = replay("corpus", "torch", gptvk::fuzz::check_torch, false);
  BOOST_TEST(seeds >= 4u, "the seed corpus is missing");
  replay("regressions", "torch", gptvk::fuzz::check_torch, true);
}

BOOST_AUTO_TEST_CASE(openai_request_corpus) {
  size_t seeds = replay("corpus", "openai", gptvk::fuzz::check_openai_request, false);
  BOOST_TEST(seeds >= 4u, "the seed corpus is missing");
  replay("regressions", "openai", gptvk::fuzz::check_openai_request, true);
}

// The checks must be able to tell: a valid file is accepted, a lying one rejected.
BOOST_AUTO_TEST_CASE(checks_tell_good_from_bad) {
  auto good = read_bytes(kFuzz / "corpus/safetensors/f32_matrix");
  BOOST_TEST(!gptvk::fuzz::check_safetensors(good).rejected);
  good.resize(good.size() - 1);
  BOOST_TEST(gptvk::fuzz::check_safetensors(good).rejected);
  auto cfg = read_bytes(kFuzz / "corpus/config/fixture_hf_gpt2");
  BOOST_TEST(!gptvk::fuzz::check_config(cfg).rejected);
  cfg.insert(cfg.begin(), '[');
  BOOST_TEST(gptvk::fuzz::check_config(cfg).rejected);
  auto gguf = read_bytes(kFuzz / "corpus/gguf/gpt2_f32");
  BOOST_TEST(!gptvk::fuzz::check_gguf(gguf).rejected);
  gguf.resize(gguf.size() - 1);
  BOOST_TEST(gptvk::fuzz::check_gguf(gguf).rejected);
}
