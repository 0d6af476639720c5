// Storage dtypes and the host-side conversions between them (round-to-nearest-even).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace gptvk {

// Q8_0 and Q4_0 are block-quantized device storage (engine/quant.hpp): blocks of 32
// weights sharing one f16 scale, 8 or 4 bits a weight. They hold matrices only; host data
// and every other tensor stay in the float types.
enum class DType : uint32_t { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_0 = 4 };

inline bool is_quantized(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }
// Bytes per value of a float type (a quantized type's rows are sized by engine/quant.hpp).
inline uint32_t dtype_bytes(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t);
// "f32" | "f16" | "bf16" | "q8_0" | "q4_0"; throws InputError otherwise.
DType parse_dtype(const std::string& s);

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }

// Whether this x86 CPU converts f32 <-> f16 in hardware (F16C, with AVX); false elsewhere.
bool cpu_has_f16c();

// Converts n values from `src` (in dtype `from`) to `dst` (in dtype `to`).
void convert(const void* src, DType from, void* dst, DType to, size_t n);

}  // namespace gptvk
