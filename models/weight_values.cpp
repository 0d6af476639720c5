#include "models/weight_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/error.hpp"
#include "engine/quant.hpp"

namespace gptvk {

namespace {

template <class Bits>
Bits bits_at(const std::byte* src, uint64_t i) {
  Bits b;
  std::memcpy(&b, src + sizeof(Bits) * i, sizeof(Bits));
  return b;
}

// Tests on the magnitude's bits, which the compiler vectorizes. An exponent of all ones is
// an infinity or a NaN; one unsigned compare, (bits - lo) <= (hi - lo), tests lo <= bits <= hi.
bool f32_non_finite(uint32_t b) { return (b & 0x7fffffffu) >= 0x7f800000u; }
bool bf16_non_finite(uint16_t b) { return (b & 0x7fffu) >= 0x7f80u; }
bool f16_non_finite(uint16_t b) { return (b & 0x7fffu) >= 0x7c00u; }

bool non_finite(const std::byte* src, DType from, uint64_t i) {
  switch (from) {
    case DType::F32: return f32_non_finite(bits_at<uint32_t>(src, i));
    case DType::BF16: return bf16_non_finite(bits_at<uint16_t>(src, i));
    case DType::F16: return f16_non_finite(bits_at<uint16_t>(src, i));
    default: return false;
  }
}

// `what`: "value" or "block scale"; `where`: "element" or "block".
[[noreturn]] void fail_non_finite(const std::string& path, const std::string& tensor, uint64_t count,
                                  uint64_t first, const std::string& what, const char* where) {
  throw InputError(path + ": tensor '" + tensor + "' holds " + std::to_string(count) + " NaN or infinite " + what +
                   (count == 1 ? "" : "s") + " (the first at " + where + " " + std::to_string(first) +
                   "): a damaged file, whose model would compute NaN logits");
}

}  // namespace

ValueScan scan_values(const std::byte* src, DType from, uint64_t n, float limit) {
  ValueScan s;
  if (from == DType::F32) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t b = bits_at<uint32_t>(src, i);
      const float a = std::fabs(bits_f32(b));
      s.non_finite += f32_non_finite(b);
      s.beyond_limit += a > limit && a != std::numeric_limits<float>::infinity();
    }
  } else if (from == DType::BF16) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t b = bits_at<uint16_t>(src, i);
      const float a = std::fabs(bf16_to_f32(b));
      s.non_finite += bf16_non_finite(b);
      s.beyond_limit += a > limit && a != std::numeric_limits<float>::infinity();
    }
  } else if (from == DType::F16) {
    for (uint64_t i = 0; i < n; ++i) s.non_finite += f16_non_finite(bits_at<uint16_t>(src, i));
  }
  return s;
}

float storage_limit(DType to) {
  constexpr float kF16Max = 65504.0f;
  switch (to) {
    case DType::F16: return kF16Max;
    case DType::Q8_0: return kF16Max * 127;
    case DType::Q4_0: return kF16Max * 8;
    default: return std::numeric_limits<float>::infinity();
  }
}

void require_finite(const std::string& path, const std::string& tensor, const std::byte* src, DType from,
                    uint64_t n, const ValueScan& scan) {
  if (!scan.non_finite) return;
  uint64_t first = 0;
  while (first < n && !non_finite(src, from, first)) ++first;
  fail_non_finite(path, tensor, scan.non_finite, first, "value", "element");
}

void require_finite_blocks(const std::string& path, const std::string& tensor, std::span<const std::byte> blocks,
                           DType type) {
  const uint64_t stride = ggml_block_bytes(type), n = blocks.size() / stride;
  uint64_t count = 0, first = n;
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t scale;
    std::memcpy(&scale, blocks.data() + i * stride, 2);
    if (f16_non_finite(scale) && count++ == 0) first = i;
  }
  if (count) fail_non_finite(path, tensor, count, first, "block scale", "block");
}

std::vector<float> clamped_to(const std::byte* src, DType from, uint64_t n, float limit) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    const float f = from == DType::BF16 ? bf16_to_f32(bits_at<uint16_t>(src, i)) : bits_f32(bits_at<uint32_t>(src, i));
    v[i] = std::clamp(f, -limit, limit);
  }
  return v;
}

}  // namespace gptvk
