// ggml's quantized block formats turned back into f32, value for value as ggml's own
// dequantize_row_* functions (ggml-quants.c) compute them: gpt-vk reads quantized GGUF
// tensors by dequantizing them at load.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gptvk {

// Whether dequantize_ggml reads ggml type `type`: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the K-quants
// Q2_K to Q6_K, and the non-linear IQ4_NL and IQ4_XS (what llama-quantize writes without an
// importance matrix; the other IQ types index codebooks gpt-vk does not carry).
bool ggml_dequantizable(uint32_t type);

// Dequantizes `n` values (a multiple of the type's block size) of ggml type `type` from
// `src` to `dst`. Returns false for a type ggml_dequantizable refuses.
bool dequantize_ggml(uint32_t type, const std::byte* src, float* dst, uint64_t n);

}  // namespace gptvk
