// Weights on the device. A Matrix is [rows][cols] row-major in its storage dtype, each row
// padded to a multiple of 8 elements (16-byte aligned rows for vector loads), 16-bit types
// packed two to a 32-bit word. A matrix larger than the device's largest binding
// (maxStorageBufferRange, e.g. GPT-2's 154 MB f32 LM head on lavapipe's 128 MiB) is split
// into row chunks, each its own buffer; ops dispatch once per chunk.
// f16 rows are stored scaled by a power of two (engine/f16_rows.hpp) and row_scales holds
// each row's 2^-shift, which every reader of an f16 matrix multiplies its results by.
// Q8_0 / Q4_0 matrices (cols a multiple of 32) store each row as its block scales then its
// blocks (engine/quant.hpp): row_stride is cols, row_bytes() the quantized row's size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/quant.hpp"
#include "engine/vk/buffer.hpp"

namespace gptvk {

namespace vk {
class Context;
}

constexpr uint32_t kRowAlign = 8;     // elements
constexpr uint32_t kChunkRowAlign = 64;  // rows: every chunk but the last holds a multiple of this

struct Matrix {
  DType dtype = DType::F32;
  uint32_t rows = 0, cols = 0;
  uint32_t row_stride = 0;      // elements per stored row (cols rounded up to kRowAlign)
  uint32_t rows_per_chunk = 0;  // rows in every chunk but possibly the last
  std::vector<vk::Buffer> chunks;
  // f16 only: one f32 per row, the factor that undoes the row's storage scaling (1 for rows
  // not written yet), on the device and as a host copy.
  vk::Buffer row_scales;
  std::vector<float> row_scale;
  // A bf16 value written is an infinity or NaN or would round to one in f16 (|v| >= 65520),
  // or a Q8_0 / Q4_0 block's weights can pass 65504 (scale x 128 or x 8): the kernels that
  // turn weights into f16 (the cooperative-matrix GEMM) must not take this matrix.
  bool outside_f16 = false;

  // Allocates (zeroed padding) for a rows x cols matrix; `max_chunk_bytes` 0 means the
  // device's largest binding.
  static Matrix create(vk::Context& ctx, DType dtype, uint32_t rows, uint32_t cols, const std::string& what,
                       uint64_t max_chunk_bytes = 0);
  uint64_t row_bytes() const {
    return is_quantized(dtype) ? quant_row_bytes(dtype, cols) : uint64_t(row_stride) * dtype_bytes(dtype);
  }
  uint32_t chunk_rows(size_t chunk) const;  // rows held by chunk `chunk`
  uint64_t bytes() const;                   // device bytes over all chunks
  // Every chunk has a uvec4 texel view (Buffer::texel_view), made by create() when the device allows.
  bool has_texel_views() const { return !chunks.empty() && chunks.front().texel_view() != VK_NULL_HANDLE; }

  // Writes rows [row0, row0 + n) from host data in dtype `from`, each source row `cols`
  // values long, converting to this matrix's dtype.
  void write_rows(uint32_t row0, uint32_t n, const void* src, DType from);
  // The same from a transposed source: value (r, c) of the rows written is at element
  // c * src_stride + r of `src` (e.g. a slice of a Conv1D [in][out] weight). Transposes and
  // converts in one pass, in cache-sized tiles, straight into the device memory when mapped.
  void write_rows_transposed(uint32_t row0, uint32_t n, const void* src, uint64_t src_stride, DType from);
  // Q8_0 / Q4_0 matrices only: rows [row0, row0 + n) from ggml blocks of this dtype (a
  // GGUF tensor's data, cols / 32 blocks a row), repacked without arithmetic.
  void write_rows_ggml(uint32_t row0, uint32_t n, const void* blocks);
  // Reads back rows converted to f32, storage scaling undone (tests, debugging).
  std::vector<float> read_rows_f32(uint32_t row0, uint32_t n) const;
};

}  // namespace gptvk
