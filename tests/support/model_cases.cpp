#define GPTVK_TEST_SUPPORT_IMPL  // a library source: no global fixture of its own
#include "tests/support/model_cases.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>

#include "models/tokenizer/id_list.hpp"
#include "tests/support/vk_test.hpp"

namespace fs = std::filesystem;

namespace gptvk::test {

std::vector<fs::path> case_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(fs::path(GPTVK_SOURCE_DIR) / "tests/fixtures/models"))
    if (fs::exists(e.path() / "config.toml")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::vector<fs::path> feature_case_dirs() {
  std::vector<fs::path> dirs;
  std::set<std::tuple<DType, NormPosition, Activation>> seen;
  for (const auto& dir : case_dirs()) {
    const ModelConfig cfg = load_config((dir / "config.toml").string());
    if (seen.insert({cfg.dtype, cfg.norm_position, cfg.activation}).second) dirs.push_back(dir);
  }
  return dirs;
}

Case load_case(const fs::path& dir) {
  Case c;
  c.name = dir.filename().string();
  c.cfg = load_config((dir / "config.toml").string());
  std::ifstream in(dir / "ids.txt");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  c.ids = parse_id_list(text);
  c.logits = read_npy((dir / "logits.npy").string());
  return c;
}

double tolerance(const ModelConfig& cfg) { return cfg.dtype == DType::F32 ? 1e-4 : 8e-3; }

double rel_error(const std::vector<float>& got, const NpyArray& want, size_t row0, size_t n, uint32_t vocab) {
  std::vector<float> ref(want.data.begin() + row0 * vocab, want.data.begin() + (row0 + n) * vocab);
  return max_rel_error(got, ref);
}

}  // namespace gptvk::test
