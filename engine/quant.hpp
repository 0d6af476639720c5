// Block-quantized device storage of matrices (DType::Q8_0, DType::Q4_0): ggml's Q8_0 and
// Q4_0 blocks (32 weights sharing one f16 scale d; Q8_0 stores int8 q, value q * d; Q4_0
// stores 4-bit n, value (n - 8) * d) repacked per row so that every load stays a 16-byte
// word, as the float matrices' are:
//
//   row = [scales: the row's cols/32 f16 d, in block order, zero-padded to whole 16-byte
//          words (quant_scale_words)] [data: block 0, block 1, ...]
//   Q8_0 block data: 32 int8 (two words), element i in byte i;
//   Q4_0 block data: 16 bytes (one word), element i < 16 in the low nibble of byte i and
//                    element 16 + i in its high nibble (ggml's own order).
//
// A row's scales up front let a kernel reading the row from start to end fetch the scales
// of 8 blocks with one load, and keep the int8 data 16-byte aligned (ggml's 34-byte Q8_0
// blocks are not even 4-byte aligned). Rows need cols to be a multiple of 32.
// Quantization follows ggml's reference (quantize_row_q8_0_ref / quantize_row_q4_0_ref),
// so f32 weights quantized here hold the values llama-quantize would write.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/dtype.hpp"

namespace gptvk {

constexpr uint32_t kQuantBlock = 32;  // weights per block

// Data bytes of one block: 32 (Q8_0) or 16 (Q4_0).
inline uint32_t quant_block_bytes(DType t) { return t == DType::Q8_0 ? 32 : 16; }
// Bytes of one block in a GGUF file (the f16 scale first): 34 (Q8_0) or 18 (Q4_0).
inline uint32_t ggml_block_bytes(DType t) { return 2 + quant_block_bytes(t); }
// 16-byte words of scales at the start of a row of `cols` weights.
inline uint32_t quant_scale_words(uint32_t cols) { return (cols / kQuantBlock + 7) / 8; }
// Bytes of one stored row (a multiple of 16).
inline uint64_t quant_row_bytes(DType t, uint32_t cols) {
  return uint64_t(quant_scale_words(cols)) * 16 + uint64_t(cols / kQuantBlock) * quant_block_bytes(t);
}

// One row of `cols` (a multiple of 32) f32 values into the row layout above, ggml's way.
void quantize_row(const float* in, uint32_t cols, DType t, std::byte* row);
// One row of ggml blocks (as a GGUF file holds them) into the row layout: no arithmetic.
void repack_ggml_row(const std::byte* blocks, uint32_t cols, DType t, std::byte* row);
// One stored row back to f32 values (tests, the CPU reference).
void dequantize_row(const std::byte* row, uint32_t cols, DType t, float* out);

}  // namespace gptvk
