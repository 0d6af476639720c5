// Checks of a tensor's values on their way to the device: NaN and infinities (a damaged
// file; one of them turns every logit into NaN, so the model would answer garbage without
// a word), and finite values beyond f16's range in a tensor stored as f16.
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
  uint64_t non_finite = 0;  // NaN or infinite
  uint64_t beyond_f16 = 0;  // finite, |w| > 65504
};
ValueScan scan_values(const std::byte* src, DType from, uint64_t n);

// InputError naming the file and tensor when `scan` found NaN or infinite values.
void require_finite(const std::string& path, const std::string& tensor, const std::byte* src, DType from,
                    uint64_t n, const ValueScan& scan);

// The same for ggml Q8_0 / Q4_0 blocks, whose f16 scales are their only float values.
void require_finite_blocks(const std::string& path, const std::string& tensor, std::span<const std::byte> blocks,
                           DType type);

// The tensor as f32 with values beyond f16's range clamped to +-65504 (a cast would make
// them infinities); for an F32 or BF16 tensor bound for f16 storage with scan.beyond_f16 > 0.
std::vector<float> clamped_to_f16_range(const std::byte* src, DType from, uint64_t n);

}  // namespace gptvk
