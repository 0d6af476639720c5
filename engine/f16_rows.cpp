#include "engine/f16_rows.hpp"

#include <algorithm>

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

void f16_scale_row(uint16_t* h, size_t n, int shift) {
  if (shift == 0) return;
  // Normal values (nearly all) take one add, which the compiler vectorises; the rare
  // subnormals are fixed in a second pass.
  const uint16_t add = static_cast<uint16_t>(shift << 10);
  bool subnormals = false;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t mag = h[i] & 0x7fffu;
    subnormals |= mag != 0 && mag < 0x0400u;
    h[i] = mag >= 0x0400u ? static_cast<uint16_t>(h[i] + add) : h[i];
  }
  if (!subnormals) return;
  for (size_t i = 0; i < n; ++i)
    if ((h[i] & 0x7c00u) == 0) h[i] = f16_times_pow2(h[i], shift);
}

}  // namespace gptvk
