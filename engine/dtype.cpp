#include "engine/dtype.hpp"

#include <cmath>

#include "engine/error.hpp"

namespace gptvk {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  if (s == "bf16") return DType::BF16;
  throw InputError("unknown dtype '" + s + "' (expected f32, f16 or bf16)");
}

uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (mag < 0x38800000u) {
    // Below f16's smallest normal: count units of 2^-24, rounding to nearest even.
    float units = bits_f32(mag) * 16777216.0f;  // exact: scaling by a power of two
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
  }
  uint32_t r = mag - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return bits_f32(sign);
    float v = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

void convert(const void* src, DType from, void* dst, DType to, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * dtype_bytes(from));
    return;
  }
  auto load = [&](size_t i) -> float {
    switch (from) {
      case DType::F32: return static_cast<const float*>(src)[i];
      case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    }
    return 0;
  };
  for (size_t i = 0; i < n; ++i) {
    float v = load(i);
    switch (to) {
      case DType::F32: static_cast<float*>(dst)[i] = v; break;
      case DType::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      case DType::BF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
    }
  }
}

}  // namespace gptvk
