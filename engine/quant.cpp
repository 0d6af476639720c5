#include "engine/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gptvk {

namespace {

// Q8_0: d = max|x| / 127, q = round(x / d) (ggml's quantize_row_q8_0_ref).
uint16_t quantize_block_q8(const float* x, int8_t* q) {
  float amax = 0;
  for (uint32_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (uint32_t i = 0; i < kQuantBlock; ++i) q[i] = static_cast<int8_t>(std::lround(x[i] * id));
  return f32_to_f16(d);
}

// Q4_0: d = (the value of largest magnitude) / -8, n = min(15, trunc(x / d + 8.5))
// (ggml's quantize_row_q4_0_ref); element i in the low nibble of byte i, 16 + i in the high.
uint16_t quantize_block_q4(const float* x, uint8_t* q) {
  float amax = 0, max = 0;
  for (uint32_t i = 0; i < kQuantBlock; ++i)
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (uint32_t i = 0; i < kQuantBlock / 2; ++i) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[i] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[i + 16] * id + 8.5f)));
    q[i] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return f32_to_f16(d);
}

void put_scale(std::byte* row, uint32_t block, uint16_t d) { std::memcpy(row + 2 * block, &d, 2); }
uint16_t get_scale(const std::byte* row, uint32_t block) {
  uint16_t d;
  std::memcpy(&d, row + 2 * block, 2);
  return d;
}
std::byte* block_data(std::byte* row, uint32_t cols, DType t, uint32_t block) {
  return row + uint64_t(quant_scale_words(cols)) * 16 + uint64_t(block) * quant_block_bytes(t);
}

}  // namespace

void quantize_row(const float* in, uint32_t cols, DType t, std::byte* row) {
  const uint32_t blocks = cols / kQuantBlock;
  std::memset(row, 0, uint64_t(quant_scale_words(cols)) * 16);  // the scales' padding
  for (uint32_t b = 0; b < blocks; ++b) {
    std::byte* data = block_data(row, cols, t, b);
    const float* x = in + uint64_t(b) * kQuantBlock;
    put_scale(row, b,
              t == DType::Q8_0 ? quantize_block_q8(x, reinterpret_cast<int8_t*>(data))
                               : quantize_block_q4(x, reinterpret_cast<uint8_t*>(data)));
  }
}

void repack_ggml_row(const std::byte* blocks, uint32_t cols, DType t, std::byte* row) {
  const uint32_t n = cols / kQuantBlock, in_bytes = ggml_block_bytes(t);
  std::memset(row, 0, uint64_t(quant_scale_words(cols)) * 16);
  for (uint32_t b = 0; b < n; ++b) {
    const std::byte* in = blocks + uint64_t(b) * in_bytes;
    std::memcpy(row + 2 * b, in, 2);
    std::memcpy(block_data(row, cols, t, b), in + 2, quant_block_bytes(t));
  }
}

void dequantize_row(const std::byte* row, uint32_t cols, DType t, float* out) {
  const uint32_t n = cols / kQuantBlock;
  for (uint32_t b = 0; b < n; ++b) {
    const float d = f16_to_f32(get_scale(row, b));
    const auto* data = block_data(const_cast<std::byte*>(row), cols, t, b);
    float* y = out + uint64_t(b) * kQuantBlock;
    if (t == DType::Q8_0) {
      for (uint32_t i = 0; i < kQuantBlock; ++i) y[i] = float(static_cast<int8_t>(data[i])) * d;
    } else {
      for (uint32_t i = 0; i < kQuantBlock / 2; ++i) {
        const auto byte = static_cast<uint8_t>(data[i]);
        y[i] = float(int(byte & 15) - 8) * d;
        y[i + 16] = float(int(byte >> 4) - 8) * d;
      }
    }
  }
}

}  // namespace gptvk
