#include "engine/f16_rows.hpp"

#include <algorithm>

#include "engine/dtype.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace gptvk {

int f16_row_shift(const uint16_t* h, size_t n) {
  // For finite halves the magnitude bits order like the values they encode.
  uint16_t max_mag = 0;
  for (size_t i = 0; i < n; ++i) max_mag = std::max<uint16_t>(max_mag, h[i] & 0x7fffu);
  const int exponent = max_mag >> 10;  // biased; 0 for zero and subnormals
  if (exponent == 31) return 0;        // inf or NaN: left as they are
  return std::min(kF16MaxRowShift, 30 - exponent);
}

uint16_t f16_times_pow2(uint16_t h, int shift) {
  const uint32_t sign = h & 0x8000u, mag = h & 0x7fffu;
  if (mag >= 0x0400u) return static_cast<uint16_t>(h + (shift << 10));  // normal: add to the exponent
  if (mag == 0) return h;
  // Subnormal mag * 2^-24: normalise around its leading bit p.
  const int p = 31 - __builtin_clz(mag);
  const int exponent = p + shift - 9;  // biased exponent of the result
  if (exponent <= 0) return static_cast<uint16_t>(sign | (mag << shift));  // still subnormal
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | ((mag << (10 - p)) & 0x3ffu));
}

namespace {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Loading GPT-2 small scales ~10^8 halves: through f32 and back, 8 at a time, exact (every
// result is representable) and subnormals included, where f16_scale_row's scalar loop adds
// visibly to the load time (bench/PERFORMANCE.md, "What limits it").
__attribute__((target("avx,f16c"))) void scale_row_f16c(uint16_t* h, size_t n, int shift) {
  const __m256 factor = _mm256_set1_ps(static_cast<float>(1u << shift));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(_mm256_mul_ps(v, factor), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) h[i] = f16_times_pow2(h[i], shift);
}
#endif
}  // namespace

void f16_scale_row(uint16_t* h, size_t n, int shift) {
  if (shift == 0) return;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (cpu_has_f16c()) return scale_row_f16c(h, n, shift);
#endif
  for (size_t i = 0; i < n; ++i) h[i] = f16_times_pow2(h[i], shift);
}

}  // namespace gptvk
