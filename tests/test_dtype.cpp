#define BOOST_TEST_MODULE dtype
// Host conversions between storage dtypes: the bulk convert() (vectorised, F16C where the
// CPU has it) must give exactly what the scalar reference functions give.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/f16_rows.hpp"

using namespace gptvk;

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Finite f32 values that exercise every f16 rounding case: random bit patterns over the
// whole exponent range (f16 denormals, normals, overflow to inf, f32 denormals), exact
// halfway points between neighbouring f16 values, and odd lengths for the vector tails.
std::vector<float> test_values() {
  std::vector<float> v;
  std::mt19937 rng(5);
  for (int i = 0; i < 200001; ++i) {
    float f = from_bits(rng());
    if (std::isfinite(f)) v.push_back(f);
  }
  for (uint32_t h = 0; h < 0x7c00u; h += 7) {  // halfway between f16 h and h + 1, both signs
    float mid = 0.5f * (f16_to_f32(static_cast<uint16_t>(h)) + f16_to_f32(static_cast<uint16_t>(h + 1)));
    v.push_back(mid);
    v.push_back(-mid);
  }
  v.push_back(65504.0f);
  v.push_back(65520.0f);  // rounds to inf
  v.push_back(INFINITY);
  v.push_back(-INFINITY);
  v.push_back(0.0f);
  v.push_back(-0.0f);
  return v;
}

// How many of test_values() the bulk f32 -> `to` conversion rounds differently from `scalar`.
size_t bulk_mismatches(DType to, uint16_t (*scalar)(float)) {
  auto v = test_values();
  std::vector<uint16_t> bulk(v.size());
  convert(v.data(), DType::F32, bulk.data(), to, v.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < v.size(); ++i) mismatches += bulk[i] != scalar(v[i]);
  return mismatches;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bulk_f32_to_f16_matches_scalar) { BOOST_TEST(bulk_mismatches(DType::F16, f32_to_f16) == 0u); }

BOOST_AUTO_TEST_CASE(bulk_f32_to_bf16_matches_scalar) { BOOST_TEST(bulk_mismatches(DType::BF16, f32_to_bf16) == 0u); }

// Every non-NaN f16 goes to f32 and back unchanged, in bulk; and to bf16 as the scalar path does.
BOOST_AUTO_TEST_CASE(every_f16_round_trips) {
  std::vector<uint16_t> h;
  for (uint32_t b = 0; b < 0x10000u; ++b)
    if ((b & 0x7c00u) != 0x7c00u || (b & 0x3ffu) == 0) h.push_back(static_cast<uint16_t>(b));
  std::vector<float> f(h.size());
  std::vector<uint16_t> back(h.size()), bf(h.size());
  convert(h.data(), DType::F16, f.data(), DType::F32, h.size());
  convert(f.data(), DType::F32, back.data(), DType::F16, f.size());
  convert(h.data(), DType::F16, bf.data(), DType::BF16, h.size());
  size_t bad = 0, bad_bf = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    bad += back[i] != h[i];
    bad_bf += bf[i] != f32_to_bf16(f16_to_f32(h[i]));
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(bad_bf == 0u);
}

// f16 matrix rows are stored scaled by 2^shift (engine/f16_rows.hpp): the scaling must be
// exact for every finite half whose result is finite, subnormals included, and a row's
// shift must be the largest one that keeps its largest value finite.
BOOST_AUTO_TEST_CASE(f16_times_pow2_is_exact) {
  int checked = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float v = f16_to_f32(static_cast<uint16_t>(h));
    if (!std::isfinite(v)) continue;
    for (int s = 0; s <= kF16MaxRowShift; ++s) {
      const float want = std::ldexp(v, s);
      if (std::fabs(want) > 65504.0f) continue;
      const uint16_t got = f16_times_pow2(static_cast<uint16_t>(h), s);
      BOOST_TEST_REQUIRE(f16_to_f32(got) == want, "h=0x" << std::hex << h << std::dec << " shift=" << s);
      ++checked;
    }
  }
  BOOST_TEST(checked > 500000);  // every finite half at each shift that keeps it finite
}

BOOST_AUTO_TEST_CASE(f16_row_shift_and_scaling) {
  auto row = [](std::initializer_list<float> vals) {
    std::vector<uint16_t> r;
    for (float f : vals) r.push_back(f32_to_f16(f));
    return r;
  };
  BOOST_TEST(f16_row_shift(row({0.0f, -0.0f}).data(), 2) == kF16MaxRowShift);
  BOOST_TEST(f16_row_shift(row({1e-7f, -0.5f}).data(), 2) == kF16MaxRowShift);  // 0.5 * 2^10 = 512
  BOOST_TEST(f16_row_shift(row({63.9f}).data(), 1) == 10);   // 63.9 * 1024 < 65504
  BOOST_TEST(f16_row_shift(row({64.0f}).data(), 1) == 9);    // 64 * 1024 = 65536 would overflow
  BOOST_TEST(f16_row_shift(row({-300.0f, 1.0f}).data(), 2) == 7);
  BOOST_TEST(f16_row_shift(row({65504.0f, 1e-7f}).data(), 2) == 0);
  BOOST_TEST(f16_row_shift(row({INFINITY, 1.0f}).data(), 2) == 0);

  // Whole rows (with subnormals, zeros of both signs, odd length) against one value at a time.
  std::mt19937 rng(11);
  std::vector<uint16_t> r(1001);
  for (auto& h : r) h = static_cast<uint16_t>(rng() & 0x87ffu);  // |h| < 2^-7: every value fits shift 10
  r[3] = 0x8000u;
  r[4] = 0x0001u;
  const int shift = f16_row_shift(r.data(), r.size());
  BOOST_TEST_REQUIRE(shift == kF16MaxRowShift);
  auto scaled = r;
  f16_scale_row(scaled.data(), scaled.size(), shift);
  for (size_t i = 0; i < r.size(); ++i) {
    BOOST_TEST_REQUIRE(f16_to_f32(scaled[i]) == std::ldexp(f16_to_f32(r[i]), shift), "i=" << i);
    BOOST_TEST_REQUIRE(((scaled[i] & 0x7c00u) != 0 || (scaled[i] & 0x7fffu) == 0), "still subnormal at i=" << i);
  }
}
