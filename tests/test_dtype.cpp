// Host conversions between storage dtypes: the scalar functions round as IEEE 754 says
// (checked against a reference written from the formats' definitions in double arithmetic,
// and against known answers), and the bulk convert() (vectorised, F16C where the CPU has
// it) gives exactly what the scalar functions give.
#include <boost/test/unit_test.hpp>

#include <algorithm>
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

// The value of a 16-bit float with `mant_bits` stored significand bits and exponent bias
// `bias` (f16: 10, 15; bf16: 7, 127), from its definition.
double decode16(uint16_t b, int mant_bits, int bias) {
  const int exp_bits = 15 - mant_bits;
  const int e = (b >> mant_bits) & ((1 << exp_bits) - 1);
  const double m = b & ((1u << mant_bits) - 1);
  const double mag = e == 0 ? std::ldexp(m, 1 - bias - mant_bits)
                     : e == (1 << exp_bits) - 1 ? (m == 0 ? INFINITY : NAN)
                                                : std::ldexp(1.0 + std::ldexp(m, -mant_bits), e - bias);
  return (b & 0x8000u) ? -mag : mag;
}

// The nearest 16-bit float to finite f (ties to an even significand, past the largest
// finite value by half a step or more: infinity), by rounding f / quantum in double
// arithmetic, where every step is exact.
uint16_t round16(float f, int mant_bits, int bias) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const double a = std::fabs(double(f));
  if (a == 0.0) return sign;
  const int exp2 = std::max(std::ilogb(a), 1 - bias);  // subnormals share the smallest quantum
  const double n = std::nearbyint(std::ldexp(a, mant_bits - exp2));  // the default mode: ties to even
  const double v = std::ldexp(n, exp2 - mant_bits);
  const int exp_bits = 15 - mant_bits;
  const int max_e = (1 << exp_bits) - 2;
  if (v >= std::ldexp(1.0, max_e - bias + 1)) return sign | uint16_t(((1u << exp_bits) - 1) << mant_bits);
  if (v < std::ldexp(1.0, 1 - bias)) return sign | uint16_t(n);  // subnormal (or, rounded up, the smallest normal)
  const int e = std::ilogb(v);
  const auto m = uint16_t(std::ldexp(v, mant_bits - e) - std::ldexp(1.0, mant_bits));
  return sign | uint16_t((e + bias) << mant_bits) | m;
}

// Every 97th f32 bit pattern (and the test values), NaNs left out.
template <class F>
void for_sampled_floats(F&& f) {
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 97) {
    const float v = from_bits(static_cast<uint32_t>(b));
    if (!std::isnan(v)) f(v);
  }
  for (float v : test_values()) f(v);
}

}  // namespace

BOOST_AUTO_TEST_CASE(bulk_f32_to_f16_matches_scalar) { BOOST_TEST(bulk_mismatches(DType::F16, f32_to_f16) == 0u); }

BOOST_AUTO_TEST_CASE(bulk_f32_to_bf16_matches_scalar) { BOOST_TEST(bulk_mismatches(DType::BF16, f32_to_bf16) == 0u); }

// The decoders against the formats' definitions, every non-NaN pattern.
BOOST_AUTO_TEST_CASE(f16_and_bf16_decode_as_defined) {
  size_t bad_f16 = 0, bad_bf16 = 0;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const auto h = static_cast<uint16_t>(b);
    if (!std::isnan(decode16(h, 10, 15))) bad_f16 += double(f16_to_f32(h)) != decode16(h, 10, 15);
    if (!std::isnan(decode16(h, 7, 127))) bad_bf16 += double(bf16_to_f32(h)) != decode16(h, 7, 127);
  }
  BOOST_TEST(bad_f16 == 0u);
  BOOST_TEST(bad_bf16 == 0u);
}

// Round to nearest, ties to even, as IEEE 754 defines it, on ~44 million f32 values spread
// over every exponent (f32 subnormals, f16 subnormals, overflow) and the halfway points.
BOOST_AUTO_TEST_CASE(f32_rounds_to_nearest_even) {
  size_t checked = 0, bad_f16 = 0, bad_bf16 = 0;
  for_sampled_floats([&](float v) {
    ++checked;
    bad_f16 += f32_to_f16(v) != round16(v, 10, 15);
    bad_bf16 += f32_to_bf16(v) != round16(v, 7, 127);
  });
  BOOST_TEST(checked > 40'000'000u);
  BOOST_TEST(bad_f16 == 0u);
  BOOST_TEST(bad_bf16 == 0u);
}

// Known answers, worked by hand: halfway cases go to the even neighbour, the largest finite
// value and the first value that overflows, subnormals.
BOOST_AUTO_TEST_CASE(known_answers) {
  const float half_step = std::ldexp(1.0f, -11);  // half an f16 step at 1.0
  BOOST_TEST(f32_to_f16(1.0f) == 0x3c00u);
  BOOST_TEST(f32_to_f16(1.0f + half_step) == 0x3c00u);      // 1 + half a step: ties to even (down)
  BOOST_TEST(f32_to_f16(1.0f + 3 * half_step) == 0x3c02u);  // 1 + 1.5 steps: ties to even (up)
  BOOST_TEST(f32_to_f16(-2.0f) == 0xc000u);
  BOOST_TEST(f32_to_f16(65504.0f) == 0x7bffu);
  BOOST_TEST(f32_to_f16(65519.996f) == 0x7bffu);
  BOOST_TEST(f32_to_f16(65520.0f) == 0x7c00u);  // half a step past the largest: infinity
  BOOST_TEST(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001u);
  BOOST_TEST(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002u);  // 1.5 subnormal steps: to even
  BOOST_TEST(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000u);  // half the smallest: to zero (even)
  BOOST_TEST(f16_to_f32(0x3555u) == 0.333251953125f);
  BOOST_TEST(f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80u);  // halfway, even below
  BOOST_TEST(f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82u);  // halfway, even above
  BOOST_TEST(f32_to_bf16(from_bits(0x3f808001u)) == 0x3f81u);  // just past halfway
  BOOST_TEST(f32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80u);  // f32's largest rounds to infinity
  BOOST_TEST(f32_to_bf16(from_bits(0x00000001u)) == 0x0000u);  // the smallest f32 subnormal
  BOOST_TEST(f32_to_bf16(from_bits(0x00008000u)) == 0x0000u);  // halfway to bf16's smallest: even
  BOOST_TEST(f32_to_bf16(from_bits(0x00018000u)) == 0x0002u);
}

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
