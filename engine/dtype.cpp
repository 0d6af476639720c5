#include "engine/dtype.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "engine/error.hpp"

namespace gptvk {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  if (s == "bf16") return DType::BF16;
  if (s == "q8_0") return DType::Q8_0;
  if (s == "q4_0") return DType::Q4_0;
  throw InputError("unknown dtype '" + s + "' (expected f32, f16, bf16, q8_0 or q4_0)");
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

namespace {

template <class From, class To, class F>
void convert_loop(const void* src, void* dst, size_t n, F f) {
  const auto* in = static_cast<const From*>(src);
  auto* out = static_cast<To*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Loading a model converts ~10^8 weights f32 -> f16; F16C does 8 per instruction with the
// same round-to-nearest-even as f32_to_f16 (NaNs keep their payload's top bits instead of
// becoming 0x7e00). Chosen at run time, so the binary still runs on CPUs without F16C.
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = f32_to_f16(in[i]);
}
}  // namespace

bool cpu_has_f16c() {
  // AVX with the OS saving YMM state (the builtin checks both), and F16C: CPUID.1 ECX bit
  // 29 (clang's __builtin_cpu_supports does not know "f16c").
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1u);
  }();
  return yes;
}
#else
bool cpu_has_f16c() { return false; }
#endif

void convert(const void* src, DType from, void* dst, DType to, size_t n) {
  if (is_quantized(from) || is_quantized(to))
    throw std::logic_error("convert: quantized types convert by rows (engine/quant.hpp)");
  if (from == to) {
    std::memcpy(dst, src, n * dtype_bytes(from));
    return;
  }
  // One loop per pair of types (no per-element switch), so the compiler can vectorise them.
  switch (from) {
    case DType::F32:
      if (to == DType::F16) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        if (cpu_has_f16c()) return f32_to_f16_f16c(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
#endif
        return convert_loop<float, uint16_t>(src, dst, n, f32_to_f16);
      }
      return convert_loop<float, uint16_t>(src, dst, n, f32_to_bf16);
    case DType::F16:
      if (to == DType::F32) return convert_loop<uint16_t, float>(src, dst, n, f16_to_f32);
      return convert_loop<uint16_t, uint16_t>(src, dst, n, [](uint16_t h) { return f32_to_bf16(f16_to_f32(h)); });
    case DType::BF16:
      if (to == DType::F32) return convert_loop<uint16_t, float>(src, dst, n, bf16_to_f32);
      return convert_loop<uint16_t, uint16_t>(src, dst, n, [](uint16_t h) { return f32_to_f16(bf16_to_f32(h)); });
    default:
      return;
  }
}

}  // namespace gptvk
