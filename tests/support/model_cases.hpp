// The whole-model fixture cases under tests/fixtures/models/ (made by
// tools/make_fixtures.py from the seed notebooks' classes): each holds a config,
// safetensors weights, input ids and PyTorch's logits for every position.
#pragma once
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "models/config.hpp"
#include "models/npy.hpp"

namespace gptvk::test {

struct Case {
  std::string name;
  ModelConfig cfg;
  std::vector<uint32_t> ids;
  NpyArray logits;
};

std::vector<std::filesystem::path> case_dirs();
Case load_case(const std::filesystem::path& dir);

// The first case of each (weight dtype, norm position, activation): what whole models run
// on through the kernel choices of devices other than the one at hand (a GPU's, the
// fallback's). Those kernels' shapes, head sizes and epilogues are checked op by op on the
// same paths (test_linear, test_attention); the models check how the plan strings them
// together, and on lavapipe each further case is 5-10 s of pipeline compiles (attention
// over a 128-wide head alone 3-10 s a variant).
std::vector<std::filesystem::path> feature_case_dirs();

// Tolerance: max |ours - torch| / max |torch| <= 1e-4 with f32 storage, <= 8e-3 with f16
// storage on the device (weights rounded to 11 significant bits: measured up to 2.4e-3 on
// lavapipe; a GPU's matrix units also round x to f16). The requirement is 1e-3 in f32; the
// error is ~2e-6 (f32 accumulation in a different order than PyTorch's), and 1e-4 still
// catches subtle bugs that 1e-3 lets through: exact GELU where tanh GELU is configured
// moves the logits by ~2e-4, norm_eps 1e-4 instead of 1e-5 by ~4e-4. The f16 case is
// there for the storage path; the f32 cases hold the arithmetic to 1e-4.
double tolerance(const ModelConfig& cfg);

// Error of logits rows [row0, row0 + n) against the golden ones, relative to the golden max.
double rel_error(const std::vector<float>& got, const NpyArray& want, size_t row0, size_t n, uint32_t vocab);

// Runs `check` on every case in `dirs` (by default every fixture), inside a test context
// naming it.
template <class F>
void for_each_case(F check, const std::vector<std::filesystem::path>& dirs = case_dirs()) {
  for (const auto& dir : dirs) {
    Case c = load_case(dir);
    BOOST_TEST_CONTEXT(c.name) { check(c); }
  }
}

}  // namespace gptvk::test
