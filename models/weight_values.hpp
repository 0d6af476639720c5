// Checks of a tensor's values on their way to the device: NaN and infinities (a damaged
// file; one of them turns every logit into NaN, so the model would answer garbage without
// a word), and finite values beyond what the tensor's storage holds (f16, or a quantized
// block's f16 scale).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/dtype.hpp"

namespace gptvk {

// What one pass over an F32, BF16 or F16 tensor's bits finds (other dtypes: nothing).
struct ValueScan {
  uint64_t non_finite = 0;    // NaN or infinite
  uint64_t beyond_limit = 0;  // finite, |w| > the `limit` given
};
// (An F16 source is within every storage's limit: only its NaN and infinities count.)
ValueScan scan_values(const std::byte* src, DType from, uint64_t n, float limit);

// The largest magnitude a storage dtype holds: f16's 65504, and for Q8_0 and Q4_0 the
// values whose block scale (max|w| / 127, max|w| / 8) stays within f16; beyond it a scale
// is infinite and every logit NaN. Infinity for f32 and bf16.
float storage_limit(DType to);

// InputError naming the file and tensor when `scan` found NaN or infinite values.
void require_finite(const std::string& path, const std::string& tensor, const std::byte* src, DType from,
                    uint64_t n, const ValueScan& scan);

// The same for ggml Q8_0 / Q4_0 blocks, whose f16 scales are their only float values.
void require_finite_blocks(const std::string& path, const std::string& tensor, std::span<const std::byte> blocks,
                           DType type);

// The tensor as f32 with values clamped to +-limit (a cast to f16 would make them
// infinities; a quantized block's scale too); for an F32 or BF16 tensor with
// scan.beyond_limit > 0.
std::vector<float> clamped_to(const std::byte* src, DType from, uint64_t n, float limit);

}  // namespace gptvk
