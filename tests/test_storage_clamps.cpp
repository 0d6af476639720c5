// What f32 weights past a storage dtype's range become on the device: +-65504 in f16 (not
// infinities), and in Q8_0 / Q4_0, whose block scales are f16, the largest value the block
// holds (not an infinite scale and NaN logits); each counted, so that the load can say so.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "models/safetensors.hpp"
#include "models/weight_values.hpp"
#include "models/weights.hpp"
#include "tests/support/safetensors_writer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;

BOOST_FIXTURE_TEST_SUITE(storage_clamps, test::NoValidationMessages)

// f32 weights beyond f16's range (|w| > 65504) stored as f16 become +-65504, not
// infinities, and are counted (load_weights says how many once); in f32 storage they stay.
// An infinity stays one; 65504 itself is in range.
BOOST_AUTO_TEST_CASE(f16_storage_clamps_values_beyond_its_range_and_counts_them) {
  auto& ctx = test::context();
  constexpr uint32_t R = 3, C = 8;
  std::vector<float> v(R * C, 0.5f);
  v[1] = 1e7f, v[9] = -70000.0f, v[10] = 65504.0f;
  SafetensorsWriter w;
  w.add_f32("t", DType::F32, {R, C}, v);
  const std::string path = (test::temp_dir() / "big.safetensors").string();
  w.write(path);
  SafetensorsFile f = SafetensorsFile::open(path);
  for (bool in_out : {false, true}) {
    BOOST_TEST_CONTEXT((in_out ? "in_out" : "out_in")) {
      Matrix h = Matrix::create(ctx, DType::F16, in_out ? C : R, in_out ? R : C, "f16");
      BOOST_TEST(write_tensor_rows(h, 0, f, f.get("t"), in_out) == 2u);
      const std::vector<float> got = h.read_rows_f32(0, in_out ? C : R);
      auto at = [&](uint32_t r, uint32_t c) { return in_out ? got[c * R + r] : got[r * C + c]; };
      BOOST_TEST(at(0, 1) == 65504.0f);
      BOOST_TEST(at(1, 1) == -65504.0f);
      BOOST_TEST(at(1, 2) == 65504.0f);
      BOOST_TEST(at(0, 0) == 0.5f);
    }
  }
  Matrix full = Matrix::create(ctx, DType::F32, R, C, "f32");
  BOOST_TEST(write_tensor_rows(full, 0, f, f.get("t"), false) == 0u);
  BOOST_TEST(full.read_rows_f32(0, 1)[1] == 1e7f);
}

// Q8_0 and Q4_0 keep each block's scale in f16 (max|w| / 127, max|w| / -8): a weight past
// 65504 x 127 or 65504 x 8 made the scale infinite and every logit NaN, without a word. Such
// weights are clamped to the largest the block holds and counted, as f16 storage does.
BOOST_AUTO_TEST_CASE(quantized_storage_clamps_values_whose_block_scale_would_overflow) {
  auto& ctx = test::context();
  constexpr uint32_t R = 3, C = 32;
  std::vector<float> v(R * C, 0.5f);
  v[1] = 1e7f, v[C + 1] = -9e6f, v[2 * C + 6] = 6e5f;  // past both limits, both, Q4_0's only
  SafetensorsWriter w;
  w.add_f32("t", DType::F32, {R, C}, v);
  const std::string path = (test::temp_dir() / "big_quant.safetensors").string();
  w.write(path);
  SafetensorsFile f = SafetensorsFile::open(path);
  struct Case {
    DType dtype;
    uint64_t clamped;
    float limit;
  };
  for (const Case& c : {Case{DType::Q8_0, 2, 65504.0f * 127}, Case{DType::Q4_0, 3, 65504.0f * 8}}) {
    BOOST_TEST_CONTEXT(dtype_name(c.dtype)) {
      BOOST_TEST(storage_limit(c.dtype) == c.limit);
      Matrix m = Matrix::create(ctx, c.dtype, R, C, dtype_name(c.dtype));
      BOOST_TEST(write_tensor_rows(m, 0, f, f.get("t"), false) == c.clamped);
      const std::vector<float> got = m.read_rows_f32(0, R);
      BOOST_TEST(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
      BOOST_TEST(got[1] == c.limit);
      BOOST_TEST(got[C + 1] == -c.limit);
      // Within f16's rounding of the block scale (2^-11 relative).
      BOOST_TEST(std::fabs(got[2 * C + 6] - std::min(6e5f, c.limit)) <= 6e5f / 2048, got[2 * C + 6]);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
