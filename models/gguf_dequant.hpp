// ggml's quantized block formats turned back into f32, value for value as ggml's own
// dequantize_row_* functions (ggml-quants.c) compute them: gpt-vk reads quantized GGUF
// tensors by dequantizing them at load.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gptvk {

// Dequantizes `n` values (a multiple of the type's block size) of ggml type `type` (Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K) from `src` to `dst`. Returns false for
// another type.
bool dequantize_ggml(uint32_t type, const std::byte* src, float* dst, uint64_t n);

}  // namespace gptvk
